import Foundation
import Synchronization
import Testing

@testable import SecureVault

/// What guarded memory promises (SecureVault.md, "Key material"), read back from the kernel's own account of the
/// process's mappings (`/proc/self/smaps`) and memory (`/proc/self/mem`), for secrets in `GuardedArena` slots and
/// for the larger ones `sodium_malloc` holds.
@Suite struct GuardedMemoryTests {
    static let page = GuardedArena.pageSize
    /// Sizes at both ends of a slot, and two past it (`sodium_malloc` pages).
    static let sizes = [1, 32, 64, GuardedArena.slotCapacity, GuardedArena.slotCapacity + 1, 3 * page + 5]

    struct Mapping {
        var start: UInt
        var end: UInt
        var permissions: String
        var flags: Set<Substring>
    }

    /// The process's mapping that holds `address`, as `/proc/self/smaps` gives it; nil when nothing is mapped there.
    static func mapping(containing address: UInt) throws -> Mapping? {
        // Read to the end: a /proc file reports no size, and a single read stops at a page.
        let handle = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/smaps"))
        defer { try? handle.close() }
        let smaps = String(decoding: try handle.readToEnd() ?? Data(), as: UTF8.self)
        var found: Mapping?
        for line in smaps.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: true)
            if let range = fields.first, range.contains("-"), fields.count >= 5, !range.hasSuffix(":") {
                if found != nil { return found }
                let bounds = range.split(separator: "-")
                guard bounds.count == 2, let start = UInt(bounds[0], radix: 16), let end = UInt(bounds[1], radix: 16)
                else { continue }
                if start <= address, address < end {
                    found = Mapping(start: start, end: end, permissions: String(fields[1]), flags: [])
                }
            } else if found != nil, fields.first == "VmFlags:" {
                found!.flags = Set(fields.dropFirst())
            }
        }
        return found
    }

    /// `count` bytes at `address` read through `/proc/self/mem`, which reads pages whatever their protection.
    static func peek(_ address: UInt, count: Int) throws -> [UInt8] {
        let mem = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/self/mem"))
        defer { try? mem.close() }
        try mem.seek(toOffset: UInt64(address))
        return [UInt8](try mem.read(upToCount: count) ?? Data())
    }

    /// Whether every secret of this process can be locked whatever the others hold: it has `CAP_IPC_LOCK` (bit 14 of
    /// its effective capabilities), or no `RLIMIT_MEMLOCK`. Otherwise a secret the limit leaves no room for (the
    /// tests of other suites hold secrets at the same time) is kept unlocked, as `sodium_malloc`'s is.
    static var mayLock: Bool {
        func procLine(_ file: String, _ prefix: String) -> Substring? {
            let text = String(decoding: FileManager.default.contents(atPath: file) ?? Data(), as: UTF8.self)
            return text.split(separator: "\n").first { $0.hasPrefix(prefix) }?.dropFirst(prefix.count)
        }
        if let capabilities = procLine("/proc/self/status", "CapEff:"),
            let bits = UInt64(capabilities.trimmingCharacters(in: .whitespaces), radix: 16), bits & (1 << 14) != 0
        {
            return true
        }
        return procLine("/proc/self/limits", "Max locked memory")?.split(separator: " ").first == "unlimited"
    }

    static func address(_ pointer: UnsafeMutableRawPointer) -> UInt { UInt(bitPattern: pointer) }

    /// Every protection of a filled secret: its bytes read-only, locked, out of core dumps, ending at a page's end
    /// (an overflow faults at once), with a page no access may touch on either side.
    @Test(arguments: sizes) func aSecretIsReadOnlyLockedUndumpedAndFencedByGuardPages(count: Int) throws {
        let secret = SecretBytes(count: count) { $0.initializeMemory(as: UInt8.self, repeating: 0xA5) }
        defer { withExtendedLifetime(secret) {} }
        let start = Self.address(secret.storage.pointer)
        let end = start + UInt(count)
        #expect(end % UInt(Self.page) == 0, "the secret ends at its page's end")
        let own = try #require(try Self.mapping(containing: start))
        #expect(own.permissions == "r--p")
        #expect(own.flags.contains("dd"), "left out of core dumps")
        if Self.mayLock { #expect(own.flags.contains("lo"), "locked in memory") }
        #expect(try Self.mapping(containing: end - 1)?.permissions == "r--p")
        // The 16 canary bytes lie right before the secret, on its page or (`sodium_malloc`) the one before.
        let canaryPage = (start - 16) - (start - 16) % UInt(Self.page)
        #expect(try Self.mapping(containing: canaryPage - 1)?.permissions == "---p", "a guard page before")
        #expect(try Self.mapping(containing: end)?.permissions == "---p", "a guard page after")
        #expect(secret.withUnsafeBytes { $0.allSatisfy { $0 == 0xA5 } })
    }

    /// A writable region (a sealer's subkeys) has the same fences and stays writable.
    @Test(arguments: sizes) func aWritableRegionIsLockedUndumpedAndFencedByGuardPages(count: Int) throws {
        let buffer = WritableGuardedBuffer(count: count)
        defer { withExtendedLifetime(buffer) {} }
        let start = Self.address(buffer.pointer)
        let end = start + UInt(count)
        #expect(UnsafeRawBufferPointer(start: buffer.pointer, count: count).allSatisfy { $0 == 0 }, "made zero")
        buffer.pointer.storeBytes(of: 0x5A, toByteOffset: count - 1, as: UInt8.self)
        #expect(end % UInt(Self.page) == 0)
        let own = try #require(try Self.mapping(containing: start))
        #expect(own.permissions == "rw-p")
        #expect(own.flags.contains("dd"))
        if Self.mayLock { #expect(own.flags.contains("lo")) }
        let canaryPage = (start - 16) - (start - 16) % UInt(Self.page)
        #expect(try Self.mapping(containing: canaryPage - 1)?.permissions == "---p")
        #expect(try Self.mapping(containing: end)?.permissions == "---p")
    }

    /// Released, a secret's bytes (and the canary) are zero and its page takes no access (a use after release
    /// faults). On a chunk of the test's own: a slot of the process's arena may be taken again by another test at once.
    @Test(arguments: [1, 32, GuardedArena.slotCapacity]) func aReleasedSecretIsZeroAndInaccessible(count: Int) throws {
        let chunk = try #require(GuardedArena.Chunk())
        let (pointer, slot) = try #require(GuardedArena.allocate(count: count, from: chunk))
        UnsafeMutableRawBufferPointer(start: pointer, count: count).initializeMemory(as: UInt8.self, repeating: 0xC3)
        GuardedArena.sealReadOnly(slot)
        let start = Self.address(pointer)
        #expect(try Self.peek(start, count: count).allSatisfy { $0 == 0xC3 }, "the peek reads the secret")
        #expect(try Self.peek(start - 16, count: 16).contains { $0 != 0 }, "a canary before it")
        if Self.mayLock { #expect(try Self.mapping(containing: start)?.flags.contains("lo") == true) }
        GuardedArena.release(pointer, slot)
        #expect(try Self.mapping(containing: start)?.permissions == "---p")
        #expect(try Self.mapping(containing: start)?.flags.contains("lo") == false, "unlocked: the limit is given back")
        let firstPage = start - start % UInt(Self.page)
        #expect(try Self.peek(firstPage, count: Self.page).allSatisfy { $0 == 0 }, "the whole page is zero")
        #expect(chunk.free.load(ordering: .relaxed) == .max, "the slot is free again")
        let again = try #require(GuardedArena.allocate(count: count, from: chunk))
        #expect(again.pointer == pointer, "and handed out again")
        #expect(try Self.mapping(containing: start)?.permissions == "rw-p")
        GuardedArena.release(again.pointer, again.slot)
    }

    /// More secrets than a chunk holds at once: each keeps its own bytes and page, and every slot given back is
    /// handed out again, from threads at once.
    @Test func manySecretsAtOnceFromManyThreadsKeepTheirOwnBytes() async throws {
        let held = await withTaskGroup(of: [(SecretBytes, UInt8)].self) { group in
            for task in 0..<4 {
                group.addTask {
                    var held: [(SecretBytes, UInt8)] = []
                    for round in 0..<200 {
                        let byte = UInt8(truncatingIfNeeded: task * 61 + round)
                        let count = 1 + (round * 37) % GuardedArena.slotCapacity
                        held.append(
                            (SecretBytes(count: count) { $0.initializeMemory(as: UInt8.self, repeating: byte) }, byte))
                        if round % 3 == 2 { held.removeFirst() }
                    }
                    return held
                }
            }
            return await group.reduce(into: [(SecretBytes, UInt8)]()) { $0 += $1 }
        }
        #expect(held.count == 4 * 134)
        for (secret, byte) in held {
            #expect(secret.withUnsafeBytes { $0.allSatisfy { $0 == byte } })
        }
        let pages = Set(held.map { Self.address($0.0.storage.pointer) / UInt(Self.page) })
        #expect(pages.count == held.count, "no two live secrets share a page")
    }

    /// A write into the 16 bytes before a secret (an underflow) changes the canary: releasing it traps, as
    /// `sodium_free` does.
    @Test func aWriteBeforeASecretTrapsWhenItIsReleased() async {
        await #expect(processExitsWith: .failure) {
            let buffer = WritableGuardedBuffer(count: 32)
            withExtendedLifetime(buffer) {
                let before = buffer.pointer - 1
                before.storeBytes(of: ~before.load(as: UInt8.self), as: UInt8.self)
            }
        }
    }

    /// A negative size is a programmer error, in a release build too.
    @Test func aNegativeSizeTraps() async {
        await #expect(processExitsWith: .failure) { _ = SecretBytes.random(count: -1) }
    }

    /// A write one byte past a secret faults at once on the guard page.
    @Test func aWritePastASecretFaults() async {
        await #expect(processExitsWith: .failure) {
            let buffer = WritableGuardedBuffer(count: 32)
            withExtendedLifetime(buffer) { (buffer.pointer + 32).storeBytes(of: 1, as: UInt8.self) }
        }
    }
}
