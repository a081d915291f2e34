import Foundation
import Glibc
import TestSealer
import Testing
import TestSupport

@testable import PrefsKV

/// The file system changing under an open store: the file deleted or replaced, permissions changed, the disk
/// filling up during every kind of rewrite, a read-only remount. Typed errors, nothing written where no open
/// will find it, and what was stored before stays readable. Needs root (tmpfs mounts, another user).
@Suite(.serialized) struct FileSystemFaultTests {
    @Test func aStoreFileDeletedWhileOpenMakesTheNextWriteNotFoundAndWritesNothing() throws {
        let dir = try TempDir("fs-deleted")
        let store = try openStore(dir)
        let other = try openStore(dir)
        try store.set("kept", forKey: "a")
        try FileManager.default.removeItem(atPath: store.path)
        // The process's inotify watch raises the file's flag within microseconds; drain it here so the test
        // does not depend on the watcher thread's timing. The next write then notices (an fstat, paid only
        // when the flag is up) instead of appending to a file no open will see.
        LinkWatcher.shared.drain()
        let error = expectError(.notFound) { try store.set("lost?", forKey: "b") }
        #expect(error?.path == store.path)
        #expect(!FileManager.default.fileExists(atPath: store.path), "a write recreated the store")
        // Every handle on the deleted file stops using it: reads answer notFound from then on.
        expectError(.notFound) { try other.string(forKey: "a") }
        expectError(.notFound) { try store.sync() }
        // A store created under the name afterwards is followed.
        let fresh = try openStore(dir)
        try fresh.set("new", forKey: "c")
        try store.set("joined", forKey: "d")
        #expect(try fresh.string(forKey: "d") == "joined")
        #expect(try store.string(forKey: "c") == "new" && store.string(forKey: "a") == nil)
    }

    @Test func theWatcherNoticesADeletionOnItsOwn() throws {
        let dir = try TempDir("fs-deleted-async")
        let store = try openStore(dir)
        try store.set("kept", forKey: "a")
        let watched = store.engine.withLock { $0.log.file.linkFlagIsRaised } != nil
        try FileManager.default.removeItem(atPath: store.path)
        // No drain: the watcher thread raises the flag by itself. Wait for that event (the 120 s limit only
        // guards against a hang), not for a fixed time a loaded machine may not give the thread.
        if watched {
            let limit = ContinuousClock.now + .seconds(120)
            while store.engine.withLock({ $0.log.file.linkFlagIsRaised }) != true && ContinuousClock.now < limit {
                usleep(1_000)
            }
            try #require(
                store.engine.withLock { $0.log.file.linkFlagIsRaised } == true,
                "the watcher thread never raised the flag of the deleted file")
        }
        expectError(.notFound) { try store.set("lost?", forKey: "b") }
        #expect(!FileManager.default.fileExists(atPath: store.path))
    }

    @Test func aStoreFileMovedAwayWhileOpenIsNoLongerWrittenTo() throws {
        let dir = try TempDir("fs-moved")
        let store = try openStore(dir)
        try store.set("kept", forKey: "a")
        let moved = dir.file("moved-away.prefs")
        #expect(rename(store.path, moved) == 0)
        LinkWatcher.shared.drain()
        expectError(.notFound) { try store.set("lost?", forKey: "b") }
        // The moved file was not written to after the move: it still holds exactly the one record.
        let reopened = try PrefsStore.verify(id: "moved-away", directory: dir.path)
        #expect(reopened.isClean && reopened.recordsVerified == 1, "\(reopened)")
        #expect(!FileManager.default.fileExists(atPath: store.path), "a write recreated the store")
    }

    @Test func aStoreReplacedByARenameWhileOpenIsFollowedBeforeTheNextWrite() throws {
        let dir = try TempDir("fs-replaced")
        let store = try openStore(dir)
        try store.set("old", forKey: "a")
        let elsewhere = try TempDir("fs-replacement")
        do {
            let replacement = try openStore(elsewhere)
            try replacement.set("theirs", forKey: "x")
        }
        #expect(rename(elsewhere.file("ui.prefs"), store.path) == 0)
        LinkWatcher.shared.drain()
        try store.set("mine", forKey: "b")
        let reopened = try openStore(dir)
        #expect(try CrashModel.read(reopened).values == ["x": .string("theirs"), "b": .string("mine")])
        #expect(try store.string(forKey: "a") == nil)
        #expect(reopened.lastRecovery == nil)
    }

    @Test func aStoreDirectoryDeletedWhileOpenIsNotFoundEvenAfterAnotherOpenRecreatesIt() throws {
        let parent = try TempDir("fs-rmdir")
        let dir = parent.path + "/prefs"
        let store = try PrefsStore(id: "ui", directory: dir)
        try store.set("kept", forKey: "a")
        try FileManager.default.removeItem(atPath: dir)
        LinkWatcher.shared.drain()
        // Another process recreates the store: a new lock file, which this handle does not hold.
        let fresh = try PrefsStore(id: "ui", directory: dir)
        try fresh.set("new", forKey: "b")
        expectError(.notFound) { try store.set("x", forKey: "c") }
        #expect(try fresh.string(forKey: "c") == nil)
        #expect(try PrefsStore(id: "ui", directory: dir).string(forKey: "b") == "new")
    }

    /// Permissions are checked when a file is opened: an open handle keeps writing after the directory or the
    /// file becomes read-only; a compaction needs the directory; a new open of a read-only file reads.
    @Test func permissionChangesWhileOpenAreTypedAndLoseNothing() throws {
        let parent = try TempDir("fs-perm")
        let dir = parent.path + "/store"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false)
        #expect(chown(dir, 65534, 65534) == 0 && chmod(dir, 0o700) == 0 && chmod(parent.path, 0o755) == 0)
        let child = try Child(["prefs-permission-faults", "65534", dir])
        #expect(child.drain() == 0)
        #expect(
            child.lines == [
                "write ok",
                "write-in-read-only-directory ok",
                "compact-in-read-only-directory permissionDenied",
                "open-in-read-only-directory ok",
                "write-to-read-only-file ok",
                "open-read-only-file-and-read ok",
                "write-through-read-only-open permissionDenied",
                "compact-with-read-only-file ok",
                "reopen-and-read-everything ok",
            ])
    }

    /// Linux refuses to remount a file system read-only while a file on it is open for writing, so an open
    /// store never sees its file system turn read-only under it; after the store is closed the remount works
    /// and the store opens for reading (EnvironmentErrorTests covers that side).
    @Test func aReadOnlyRemountIsRefusedWhileAStoreIsOpen() throws {
        let dir = try TempDir("fs-remount")
        let mount = try Mount(size: "1m", in: dir)
        var store: PrefsStore? = try PrefsStore(id: "ui", directory: mount.path + "/prefs")
        try store?.set("dark", forKey: "theme")
        #expect(throws: TestFailure.self) { try mount.remount(readOnly: true) }
        #expect(try store?.string(forKey: "theme") == "dark")
        try store?.set("light", forKey: "theme")
        store = nil
        try mount.remount(readOnly: true)
        defer { try? mount.remount(readOnly: false) }
        #expect(try PrefsStore(id: "ui", directory: mount.path + "/prefs").string(forKey: "theme") == "light")
    }

    /// A full disk during a rekey, a restore, an automatic compaction and a recovery: each is a typed error
    /// (or, for the automatic compaction, a logged warning after a successful write) and the file is left
    /// byte-identical.
    @Test func aFullDiskDuringEveryRewriteLeavesTheStoreAsItWas() throws {
        let dir = try TempDir("fs-full")
        let mount = try Mount(size: "256k", in: dir)
        let storeDir = mount.path + "/prefs"
        let capture = LogCapture()
        let store = try PrefsStore(id: "ui", directory: storeDir, configuration: {
            var c = PrefsStore.Configuration()
            c.autoCompactionThreshold = 16 * 1024
            c.logger = capture.logger
            return c
        }())
        for i in 0..<40 { try store.set(String(repeating: "v", count: 400) + "\(i)", forKey: "k\(i % 20)") }
        try store.backup(to: storeDir + "/ui.backup")
        // Fill the disk.
        let filler = storeDir + "/filler"
        let fd = open(filler, O_RDWR | O_CREAT, 0o600)
        defer { close(fd) }
        var size = 0
        while posix_fallocate(fd, off_t(size), 4096) == 0 { size += 4096 }
        let before = try readBytes(store.path)
        let values = try CrashModel.read(store)
        expectError(.diskFull) { try store.rekey(to: TestSealer(key: 1)) }
        expectError(.diskFull) { try store.restore(from: storeDir + "/ui.backup") }
        #expect(try readBytes(store.path) == before)
        #expect(try CrashModel.read(store) == values)
        // Rewrites of one key fit in the file's free space until an automatic compaction is due; it fails,
        // the write does not.
        var rewrites = 0
        while capture.entries.withLock({ !$0.contains { $0.level == .warning } }) && rewrites < 2000 {
            try store.set(String(repeating: "w", count: 400) + "\(rewrites)", forKey: "k0")
            rewrites += 1
        }
        #expect(capture.entries.withLock { $0.contains { $0.level == .warning && $0.message.contains("automatic compaction") } })
        #expect(try store.string(forKey: "k0") == String(repeating: "w", count: 400) + "\(rewrites - 1)")
        #expect(try store.verify().isClean)
        // A damaged store cannot be recovered on a full disk (no room for the quarantine copy): the open is a
        // typed error and the file stays byte-identical; with room again, it recovers.
        var damaged = try readBytes(store.path)
        damaged[4096 + 40] ^= 0xFF
        try writeBytes(damaged, to: store.path)
        expectError(.diskFull) { try PrefsStore(id: "ui", directory: storeDir) }
        #expect(try readBytes(store.path) == damaged)
        #expect(ftruncate(fd, 0) == 0)
        let recovered = try PrefsStore(id: "ui", directory: storeDir)
        #expect(recovered.lastRecovery != nil)
    }
}
