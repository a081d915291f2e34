#include "malloc_counter.h"

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>

// glibc's own entry points: the wrappers below replace the public names for the whole process (the executable's
// definitions come first in symbol lookup) and forward here.
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t count, size_t size);
extern void *__libc_realloc(void *pointer, size_t size);
extern void __libc_free(void *pointer);
extern void *__libc_memalign(size_t alignment, size_t size);

static _Atomic int counting;
static _Atomic unsigned long long allocations;

static inline void count_one(void) {
    if (atomic_load_explicit(&counting, memory_order_relaxed)) {
        unsigned long long n = atomic_load_explicit(&allocations, memory_order_relaxed);
        atomic_store_explicit(&allocations, n + 1, memory_order_relaxed);
    }
}

void malloc_counter_start(void) {
    atomic_store(&allocations, 0);
    atomic_store(&counting, 1);
}

unsigned long long malloc_counter_stop(void) {
    atomic_store(&counting, 0);
    return atomic_load(&allocations);
}

void *malloc(size_t size) {
    count_one();
    return __libc_malloc(size);
}

void *calloc(size_t count, size_t size) {
    count_one();
    return __libc_calloc(count, size);
}

void *realloc(void *pointer, size_t size) {
    count_one();
    return __libc_realloc(pointer, size);
}

void free(void *pointer) { __libc_free(pointer); }

void *memalign(size_t alignment, size_t size) {
    count_one();
    return __libc_memalign(alignment, size);
}

void *aligned_alloc(size_t alignment, size_t size) {
    count_one();
    return __libc_memalign(alignment, size);
}

int posix_memalign(void **out, size_t alignment, size_t size) {
    if (alignment < sizeof(void *) || (alignment & (alignment - 1)) != 0) return EINVAL;
    count_one();
    void *pointer = __libc_memalign(alignment, size);
    if (pointer == NULL && size != 0) return ENOMEM;
    *out = pointer;
    return 0;
}
