// Issue 39, the synchronous rewrite: posix_fallocate leaves its blocks unwritten (an extent flag on ext4 and XFS),
// so each fdatasync after a store into a fresh block must also commit that extent's change through the journal.
// A `.synchronous` store's files are written with zeros where they are allocated (`Sys.allocate(writing:)`); a
// buffered one's are not. Checked on the real file with FIEMAP, the file system's own account of its extents.
import Foundation
import Glibc
import SystemLayer
import TestSealer
import Testing

@testable import PrefsKV

/// Whether a file of the temporary directory given blocks by `posix_fallocate` shows them unwritten (ext4, XFS and
/// btrfs do; tmpfs has no extents): where it does not, these tests have nothing to tell apart.
private let showsUnwrittenExtents: Bool = {
    guard let dir = try? TempDir("blocks-probe") else { return false }
    let fd = open(dir.file("f"), O_RDWR | O_CREAT, 0o600)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    guard posix_fallocate(fd, 0, 64 * 1024) == 0, let found = try? WrittenBlocksTests.extents(of: dir.file("f")) else {
        return false
    }
    return found.unwritten > 0
}()

@Suite(
    .enabled(
        if: showsUnwrittenExtents,
        "the temporary directory's file system shows no unwritten extents through FIEMAP (tmpfs?): nothing to check")
)
struct WrittenBlocksTests {
    /// The extents of the file at `path` flagged unwritten, and all its extents; nil when the file system has no FIEMAP.
    static func extents(of path: String) throws -> (unwritten: Int, all: Int)? {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw TestFailure("open \(path): errno \(errno)") }
        defer { close(fd) }
        // struct fiemap (32 bytes) then up to 256 struct fiemap_extent (56 bytes each): linux/fiemap.h.
        let capacity = 256
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 32 + 56 * capacity, alignment: 8)
        defer { buffer.deallocate() }
        memset(buffer, 0, 32 + 56 * capacity)
        buffer.storeBytes(of: 0, toByteOffset: 0, as: UInt64.self)  // fm_start
        buffer.storeBytes(of: UInt64.max, toByteOffset: 8, as: UInt64.self)  // fm_length
        buffer.storeBytes(of: 1, toByteOffset: 16, as: UInt32.self)  // fm_flags: FIEMAP_FLAG_SYNC
        buffer.storeBytes(of: UInt32(capacity), toByteOffset: 24, as: UInt32.self)  // fm_extent_count
        let FS_IOC_FIEMAP: UInt = 0xC020_660B
        guard ioctl(fd, FS_IOC_FIEMAP, buffer) == 0 else {
            if errno == EOPNOTSUPP || errno == ENOTTY { return nil }
            throw TestFailure("FIEMAP \(path): errno \(errno)")
        }
        let mapped = Int(buffer.load(fromByteOffset: 20, as: UInt32.self))
        var unwritten = 0
        for i in 0..<min(mapped, capacity) {
            let flags = buffer.load(fromByteOffset: 32 + 56 * i + 40, as: UInt32.self)
            if flags & 0x800 != 0 { unwritten += 1 }  // FIEMAP_EXTENT_UNWRITTEN
        }
        return (unwritten, mapped)
    }

    /// The check itself: a file given blocks by `posix_fallocate` has unwritten extents, one whose blocks were also
    /// written has none.
    @Test(arguments: [false, true])
    func allocatedBlocksAreWrittenWhenAsked(writing: Bool) throws {
        let dir = try TempDir("blocks")  // on the disk: tmpfs has no extents
        let fd = open(dir.file("f"), O_RDWR | O_CREAT, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        try #require((try? Sys.allocate(fd, offset: 0, length: 256 * 1024).get()) != nil)
        if writing { try #require((try? Sys.writeZeros(fd, offset: 0, length: 256 * 1024).get()) != nil) }
        let found = try #require(try Self.extents(of: dir.file("f")))
        #expect(writing ? found.unwritten == 0 : found.unwritten > 0, "\(found)")
    }

    /// 200 keys rewritten 3,000 times with a 32 KiB threshold: the file grows several times and compacts on its own.
    /// A `.synchronous` store's data file then has no unwritten extent, wherever its log ends.
    @Test func aSynchronousStoresFileHasNoUnwrittenBlocks() throws {
        let dir = try TempDir("blocks")
        let store = try openStore(dir) {
            $0.durability = .synchronous
            $0.autoCompactionThreshold = 32 * 1024
        }
        for i in 0..<3_000 { try store.set(String(repeating: "v", count: 100) + "\(i)", forKey: "k\(i % 200)") }
        let found = try #require(try Self.extents(of: dir.file("ui.prefs")))
        #expect(found.unwritten == 0, "\(found)")
        #expect(try store.string(forKey: "k199") == String(repeating: "v", count: 100) + "2999")
    }

    /// A restore from a backup and a rekey write a new file for a `.synchronous` store too: its blocks are written.
    @Test func aSynchronousStoresRestoredAndRekeyedFilesHaveNoUnwrittenBlocks() throws {
        let dir = try TempDir("blocks")
        let store = try openStore(dir) {
            $0.durability = .synchronous
            $0.sealer = TestSealer(key: 1)
        }
        for i in 0..<300 { try store.set(String(repeating: "w", count: 200) + "\(i)", forKey: "k\(i)") }
        try store.backup(to: dir.file("backup.prefs"))
        try store.set("after the backup", forKey: "k0")
        try store.restore(from: dir.file("backup.prefs"))
        var found = try #require(try Self.extents(of: dir.file("ui.prefs")))
        #expect(found.unwritten == 0, "after the restore: \(found)")
        try store.rekey(to: TestSealer(key: 2))
        found = try #require(try Self.extents(of: dir.file("ui.prefs")))
        #expect(found.unwritten == 0, "after the rekey: \(found)")
        #expect(try store.string(forKey: "k0") == String(repeating: "w", count: 200) + "0")
    }
}
