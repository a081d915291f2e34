// Guarded memory for key material: the owners of guarded regions (`GuardedBuffer`, `WritableGuardedBuffer`) and the
// process-wide arena of guarded pages that holds the small ones.
import Synchronization
import SystemLayer

/// Guarded pages for secrets up to a page less 16 bytes (every key, subkey and session token of the vault): what
/// `sodium_malloc` gives each allocation, without its system calls per allocation.
///
/// `sodium_malloc` maps four or more pages for every allocation (a page for its bookkeeping, a guard page, the
/// secret's pages, a guard page), protects, locks and marks them, and `sodium_free` unlocks and unmaps them again:
/// about 15 µs to allocate and 10 to free on this project's VMs (PerformanceIssues36-39.md, issue 39, stop 58), a
/// sixth of a sealed store's cold open. The arena keeps each of those protections per secret, with fewer calls:
/// - **Guard pages**: a chunk is one reserved mapping of 64 slot pages, each between two pages nothing may access
///   (`PROT_NONE` for good), so a run off either end of a secret faults as it does past a `sodium_malloc` region.
/// - **The secret ends at its page's end** and 16 random bytes (the process's canary, as libsodium's) lie right
///   before it: an overflow faults on the next guard page at once, an underflow into the canary traps at release.
/// - **Locked** (`mlock`) while it holds a secret, unlocked when released (so a process's `RLIMIT_MEMLOCK` budget is
///   spent by the secrets it holds, not by every slot it ever used, and a forked child, which inherits no locks,
///   locks its own). As `sodium_malloc` does, a secret that the limit leaves no room for is kept unlocked.
/// - **No core dump**: the whole chunk is `MADV_DONTDUMP`.
/// - **Read-only** once filled, for `GuardedBuffer` (`PROT_READ`); a `WritableGuardedBuffer` stays writable.
/// - **Zeroed on release**, and the slot made inaccessible (`PROT_NONE`) until it is handed out again: a use after
///   release faults until then, as one of an unmapped `sodium_malloc` region faults until the kernel maps something
///   else there (often the next `sodium_malloc`).
/// An allocation costs an `mprotect` to open its slot, an `mlock` and an `mprotect` to make it read-only; a release an
/// `mprotect`, a `munlock` and an `mprotect`: no mapping made or removed (no page tables torn down, no other CPU
/// interrupted to flush its TLB). Slots are taken and returned with atomic operations, so a `fork()` while another
/// thread holds one cannot leave the child waiting on a lock (the child only loses that slot, and whatever secret a
/// thread was releasing at that instant stays in the child's copy of it, as with `sodium_free`).
enum GuardedArena {
    static let pageSize = Sys.pageSize
    static let canaryBytes = 16
    /// The largest secret a slot holds.
    static var slotCapacity: Int { pageSize - canaryBytes }

    /// The process's canary: 16 random bytes before every secret in a slot, compared when it is released.
    static let canary: (UInt64, UInt64) = {
        var bytes: (UInt64, UInt64) = (0, 0)
        withUnsafeMutableBytes(of: &bytes) { Sodium.fillRandom($0) }
        return bytes
    }()

    /// One reserved mapping: guard page, slot page, guard page, ... slot page, guard page.
    ///
    /// `@unchecked Sendable`: `base` is fixed at `init`; every slot page belongs to whoever took its bit in `free`
    /// (an acquiring exchange) until it gives the bit back (a releasing store).
    final class Chunk: @unchecked Sendable {
        static let slots = 64
        let base: UnsafeMutableRawPointer
        /// A set bit: the slot is free.
        let free = Atomic<UInt64>(.max)
        /// The chunk made when this one was full.
        let next = AtomicLazyReference<Chunk>()

        static var length: Int { GuardedArena.pageSize * (2 * slots + 1) }

        init?() {
            guard let base = Sys.reserveSecretPages(length: Chunk.length) else { return nil }
            self.base = base
        }

        deinit {
            // Only a chunk that lost the race to be `next` of a full one: a published chunk lives as long as the process.
            Sys.unmap(base, length: Chunk.length)
        }

        func page(_ slot: Int) -> UnsafeMutableRawPointer { base + GuardedArena.pageSize * (1 + 2 * slot) }

        /// A free slot, now the caller's; nil when every slot is taken.
        func take() -> Int? {
            var bits = free.load(ordering: .relaxed)
            while bits != 0 {
                let slot = bits.trailingZeroBitCount
                let (exchanged, original) = free.compareExchange(
                    expected: bits, desired: bits & ~(1 << UInt64(slot)), ordering: .acquiring)
                if exchanged { return slot }
                bits = original
            }
            return nil
        }
    }

    /// A secret's slot: where its owner gives it back.
    struct Slot {
        let chunk: Chunk
        let index: Int
    }

    /// Nil when the process could not reserve the first chunk: every secret then gets `sodium_malloc` pages.
    static let first: Chunk? = Chunk()

    /// `count` bytes (at least one) in a slot of their own, readable and writable, zero; nil when `count` is larger
    /// than a slot or no chunk could be mapped (the caller uses `sodium_malloc` then). `chunks` is the process's
    /// arena, or a test's own.
    static func allocate(
        count: Int, from chunks: Chunk? = GuardedArena.first
    ) -> (pointer: UnsafeMutableRawPointer, slot: Slot)? {
        let size = max(count, 1)
        guard size <= slotCapacity, var chunk = chunks else { return nil }
        while true {
            if let index = chunk.take() {
                let page = chunk.page(index)
                Sys.protectPages(page, length: pageSize, .readWrite)
                _ = Sys.lockPages(page, length: pageSize)
                let pointer = page + pageSize - size
                var value = canary
                withUnsafeBytes(of: &value) { (pointer - canaryBytes).copyMemory(from: $0.baseAddress!, byteCount: canaryBytes) }
                return (pointer, Slot(chunk: chunk, index: index))
            }
            if let next = chunk.next.load() {
                chunk = next
            } else if let made = Chunk() {
                chunk = chunk.next.storeIfNil(made)
            } else {
                return nil
            }
        }
    }

    /// Makes the slot's page read-only.
    static func sealReadOnly(_ slot: Slot) {
        Sys.protectPages(slot.chunk.page(slot.index), length: pageSize, .readOnly)
    }

    /// Checks the canary before `pointer`, zeroes the canary and the secret, makes the page inaccessible and gives
    /// the slot back. A changed canary means something wrote before the secret: that traps, as `sodium_free` does.
    static func release(_ pointer: UnsafeMutableRawPointer, _ slot: Slot) {
        let page = slot.chunk.page(slot.index)
        Sys.protectPages(page, length: pageSize, .readWrite)
        var value = canary
        let intact = withUnsafeBytes(of: &value) { expected in
            Sodium.constantTimeEqual(UnsafeRawBufferPointer(start: pointer - canaryBytes, count: canaryBytes), expected)
        }
        precondition(intact, "guarded memory: the 16 bytes before a secret were overwritten (a write out of bounds)")
        let written = pointer.distance(to: page + pageSize) + canaryBytes
        Sodium.zero(UnsafeMutableRawBufferPointer(start: pointer - canaryBytes, count: written))
        Sys.unlockPages(page, length: pageSize)
        Sys.protectPages(page, length: pageSize, .none)
        slot.chunk.free.bitwiseOr(UInt64(1) << UInt64(slot.index), ordering: .releasing)
    }
}

/// One guarded region: a `GuardedArena` slot, or `sodium_malloc` pages for a secret larger than a slot.
struct GuardedRegion {
    let pointer: UnsafeMutableRawPointer
    private let slot: GuardedArena.Slot?

    /// `count` bytes, readable and writable, zero. A negative count is a programmer error.
    init(count: Int) {
        precondition(count >= 0, "a guarded region of \(count) bytes")
        if let allocated = GuardedArena.allocate(count: count) {
            pointer = allocated.pointer
            slot = allocated.slot
        } else {
            pointer = Sodium.guardedAllocate(count: count)
            slot = nil
            Sodium.zero(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        }
    }

    func sealReadOnly() {
        if let slot { GuardedArena.sealReadOnly(slot) } else { Sodium.guardedSealReadOnly(pointer) }
    }

    /// Zeroes the region and gives it back.
    func release() {
        if let slot { GuardedArena.release(pointer, slot) } else { Sodium.guardedFree(pointer) }
    }
}

/// The owner of one guarded region: read-only once filled, zeroed and freed in `deinit`.
///
/// `@unchecked Sendable`: the bytes are written only inside `init` and made read-only by `mprotect` before
/// the object is published, so every later access is a read.
final class GuardedBuffer: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    let count: Int
    private let region: GuardedRegion

    init(count: Int, initializingWith body: (UnsafeMutableRawBufferPointer) throws -> Void) rethrows {
        self.count = count
        region = GuardedRegion(count: count)
        pointer = region.pointer
        // If `body` throws, the object is fully initialised, so `deinit` runs and frees the region.
        try body(UnsafeMutableRawBufferPointer(start: pointer, count: count))
        region.sealReadOnly()
    }

    deinit { region.release() }
}

/// A guarded region that stays writable (guard pages, canary, locked, excluded from core dumps), for key material
/// that changes: `VaultSealer`'s nonce-prefix subkeys. Zeroed and freed in `deinit`.
///
/// `@unchecked Sendable`: its owner serialises every access (VaultSealer holds it under a mutex).
final class WritableGuardedBuffer: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer
    let count: Int
    private let region: GuardedRegion

    init(count: Int) {
        self.count = count
        region = GuardedRegion(count: count)
        pointer = region.pointer
    }

    deinit { region.release() }
}
