// Anonymous memory for secrets: reserve, protect, lock, keep out of core dumps. SecureVault's guarded arena
// (GuardedMemory.swift) is the one user; libsodium's `sodium_malloc` makes the same calls for each allocation.
import Glibc

extension Sys {
    /// What a page of guarded memory allows.
    package enum PageAccess {
        case none, readOnly, readWrite

        var flags: Int32 {
            switch self {
            case .none: return PROT_NONE
            case .readOnly: return PROT_READ
            case .readWrite: return PROT_READ | PROT_WRITE
            }
        }
    }

    /// `length` bytes of private anonymous address space that no access may touch yet (`PROT_NONE`, no swap
    /// reserved) and that a core dump leaves out (`MADV_DONTDUMP`); nil when the process cannot map it.
    // See: man 2 mmap, man 2 madvise
    package static func reserveSecretPages(length: Int) -> UnsafeMutableRawPointer? {
        let p = Glibc.mmap(nil, length, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
        if p == UnsafeMutableRawPointer(bitPattern: -1) || p == nil { return nil }
        // Fails only on a kernel without MADV_DONTDUMP (before 3.4); the pages are then still private and locked.
        _ = Glibc.madvise(p, length, MADV_DONTDUMP)
        return p
    }

    /// Sets what `length` bytes of pages at `base` allow. Only fails on a range that is not a whole mapping of
    /// ours (our bug) or when the kernel cannot split the mapping (out of memory): both trap, as `sodium_mprotect_*`
    /// failing would leave a secret writable or unreadable.
    // See: man 2 mprotect
    package static func protectPages(_ base: UnsafeMutableRawPointer, length: Int, _ access: PageAccess) {
        let rc = Glibc.mprotect(base, length, access.flags)
        precondition(rc == 0, "mprotect of guarded memory failed: errno \(errno)")
    }

    /// Locks `length` bytes of pages at `base` in memory (never swapped out). Returns false when the process's
    /// `RLIMIT_MEMLOCK` is spent: as `sodium_malloc` does, the memory is used unlocked then.
    // See: man 2 mlock
    package static func lockPages(_ base: UnsafeMutableRawPointer, length: Int) -> Bool {
        Glibc.mlock(base, length) == 0
    }

    /// Unlocks pages `lockPages` locked (nothing for pages it could not lock).
    // See: man 2 munlock
    package static func unlockPages(_ base: UnsafeMutableRawPointer, length: Int) {
        _ = Glibc.munlock(base, length)
    }
}
