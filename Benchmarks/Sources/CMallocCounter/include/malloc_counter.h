#ifndef MALLOC_COUNTER_H
#define MALLOC_COUNTER_H

// Counting of heap allocations made by the benchmark process. The allocator stays glibc's: the wrappers in
// malloc_counter.c forward every call to it and, while counting is on, add one per allocation (malloc,
// calloc, realloc, posix_memalign, aligned_alloc, memalign). Single-threaded workloads only: the counter is
// a relaxed load and store, not a locked add, so that counting costs about a nanosecond.
void malloc_counter_start(void);
unsigned long long malloc_counter_stop(void);

#endif
