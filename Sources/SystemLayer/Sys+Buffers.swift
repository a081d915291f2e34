// Buffers that grow large: a store index's arrays (KeyIndex), resized without holding the old and the new copy at once.
import CPrefsKV
import Glibc

extension Sys {
    /// From this size a growable buffer has pages of its own (`mmap`) and grows by `mremap`, which moves its page
    /// table entries: nothing is copied, and the old and the new buffer never both take memory. (Grown by
    /// allocating the new one and moving into it, a million-key index's items went from 25 to 50 MB with 75 MB
    /// taken in between.) Smaller ones come from `malloc`.
    package static let pagedBufferBytes = 1 << 20

    /// `bytes` bytes of uninitialized memory, aligned to 16, for ``resizeBuffer(_:from:to:)`` and
    /// ``freeBuffer(_:bytes:)`` (which must be given the same size). Pages never touched cost no memory.
    /// Traps when the process is out of memory (or address space), as `UnsafeMutablePointer.allocate` does.
    // See: man 2 mmap, man 3 malloc
    package static func allocateBuffer(bytes: Int) -> UnsafeMutableRawPointer {
        if bytes < pagedBufferBytes {
            guard let p = Glibc.malloc(Swift.max(bytes, 1)) else { fatalError("out of memory for \(bytes) bytes") }
            return p
        }
        let p = Glibc.mmap(nil, pagedLength(bytes), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
        // MAP_FAILED is (void *)-1 (Swift's `MAP_FAILED` is a function of the Glibc module's library, bound and paged
        // in at its first call; an index's first large buffer may come at a store's first open).
        guard let p, p != UnsafeMutableRawPointer(bitPattern: -1) else {
            fatalError("out of memory for \(bytes) bytes (\(Errno.current.text))")
        }
        return p
    }

    /// The buffer of `old` bytes at `buffer` (from ``allocateBuffer(bytes:)`` or this) resized to `new` bytes,
    /// its first `min(old, new)` bytes kept, moved bit for bit (so only for types that are bitwise movable, as
    /// Swift's own types without weak references are). The old address is invalid afterwards. Traps when out of
    /// memory.
    // See: man 2 mremap, man 3 realloc
    package static func resizeBuffer(_ buffer: UnsafeMutableRawPointer, from old: Int, to new: Int)
        -> UnsafeMutableRawPointer
    {
        switch (old >= pagedBufferBytes, new >= pagedBufferBytes) {
        case (false, false):
            guard let p = Glibc.realloc(buffer, Swift.max(new, 1)) else { fatalError("out of memory for \(new) bytes") }
            return p
        case (true, true):
            let p = prefs_remap_pages(buffer, pagedLength(old), pagedLength(new))
            guard let p, p != UnsafeMutableRawPointer(bitPattern: -1) else {
                fatalError("out of memory for \(new) bytes (\(Errno.current.text))")
            }
            return p
        case (false, true), (true, false):
            let p = allocateBuffer(bytes: new)
            p.copyMemory(from: buffer, byteCount: Swift.min(old, new))
            freeBuffer(buffer, bytes: old)
            return p
        }
    }

    /// Frees a buffer of `bytes` bytes from ``allocateBuffer(bytes:)`` or ``resizeBuffer(_:from:to:)``.
    // See: man 2 munmap, man 3 free
    package static func freeBuffer(_ buffer: UnsafeMutableRawPointer, bytes: Int) {
        if bytes < pagedBufferBytes {
            Glibc.free(buffer)
        } else {
            unmap(buffer, length: pagedLength(bytes))
        }
    }

    private static func pagedLength(_ bytes: Int) -> Int { (bytes + pageSize - 1) / pageSize * pageSize }
}
