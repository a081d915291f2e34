import Foundation
import Testing

@testable import PrefsKV

/// A store's life as an app sees it (issue 38): `exists`, `storeIDs(in:)`, `destroy` refusing an open store,
/// `Configuration.readOnly`, and `temporary()`.
@Suite struct LifecycleTests {
    @Test func existsAndStoreIDsSeeDataFilesOnly() throws {
        let dir = try TempDir("lifecycle", memory: true)
        let missing = dir.file("not-made")
        #expect(try PrefsStore.exists(id: "ui", directory: missing) == false)
        #expect(try PrefsStore.storeIDs(in: missing) == [])
        #expect(!FileManager.default.fileExists(atPath: missing), "looking creates nothing")
        #expect(try PrefsStore.storeIDs(in: dir.path) == [])

        try openStore(dir, id: "user-2").set(1, forKey: "x")
        try openStore(dir, id: "user-1").set(1, forKey: "x")
        // Files that are not stores: a lock file alone, a temporary image, a base image, a quarantine copy, a
        // directory named like a store.
        for name in ["user-3.prefs.lock", "user-1.prefs.tmp", "user-1.prefs.prev", "user-2.prefs.corrupt-20260101T000000Z"] {
            try writeBytes([1], to: dir.file(name))
        }
        try FileManager.default.createDirectory(atPath: dir.file("folder.prefs"), withIntermediateDirectories: false)

        #expect(try PrefsStore.storeIDs(in: dir.path) == ["user-1", "user-2"])
        #expect(try PrefsStore.exists(id: "user-1", directory: dir.path))
        #expect(try !PrefsStore.exists(id: "user-3", directory: dir.path))
        expectError(.invalidKey) { try PrefsStore.exists(id: "../user-1", directory: dir.path) }
    }

    @Test func destroyRefusesAStoreAReadOnlyHandleOfAnotherProcessHasOpen() throws {
        let dir = try TempDir("lifecycle", memory: true)
        try openStore(dir).set("dark", forKey: "theme")
        let before = try readBytes(dir.file("ui.prefs"))
        let reader = try Child(["prefs-hold", dir.path, "ui", "readonly"])
        #expect(reader.waitForLine { _ in true } == "open")

        expectError(.busy) { try PrefsStore.destroy(id: "ui", directory: dir.path) }
        #expect(try readBytes(dir.file("ui.prefs")) == before)
        #expect(dir.files == ["ui.prefs", "ui.prefs.lock"])

        reader.killAndDrain()
        let report = try PrefsStore.destroy(id: "ui", directory: dir.path)
        #expect(report.removed == [dir.file("ui.prefs"), dir.file("ui.prefs.lock")])
        #expect(try !PrefsStore.exists(id: "ui", directory: dir.path))
    }

    @Test func aReadOnlyOpenCreatesNothing() throws {
        let dir = try TempDir("lifecycle", memory: true)
        let nested = dir.file("app/prefs")
        expectError(.notFound) { try openStore(dir, id: "ui") { $0.readOnly = true } }
        expectError(.notFound) {
            var readOnly = PrefsStore.Configuration()
            readOnly.readOnly = true
            return try PrefsStore(id: "ui", directory: nested, configuration: readOnly)
        }
        #expect(dir.files == [], "no lock file, no data file, no directory")
    }

    @Test func aReadOnlyHandleNeverWritesAndFollowsAWriterProcess() throws {
        let dir = try TempDir("lifecycle", memory: true)
        try openStore(dir).set("dark", forKey: "theme")
        let reader = try openStore(dir) { $0.readOnly = true }
        let data = try readBytes(dir.file("ui.prefs"))
        let lock = try readBytes(dir.file("ui.prefs.lock"))

        #expect(try reader.string(forKey: "theme") == "dark")
        expectError(.readOnly) { try reader.set("light", forKey: "theme") }
        expectError(.readOnly) { try reader.removeValue(forKey: "theme") }
        expectError(.readOnly) { try reader.write { try $0.set(1, forKey: "n") } }
        expectError(.readOnly) { try reader.compact() }
        #expect(try readBytes(dir.file("ui.prefs")) == data)
        #expect(try readBytes(dir.file("ui.prefs.lock")) == lock)

        // Another process writes: the read-only handle sees it.
        let writer = try Child(["prefs-set", dir.path, "ui", "theme", "light"])
        #expect(writer.waitForLine { _ in true } == "ok")
        writer.killAndDrain()
        #expect(try reader.string(forKey: "theme") == "light")
    }

    /// A read-only handle by choice is held to the owner rules of one that can write: in a directory where others
    /// can plant names (1777, as /tmp), another user's files (mode 0644, readable) are refused, not read.
    @Test func aReadOnlyOpenRefusesAnotherUsersFilesInASharedDirectory() throws {
        let dir = try TempDir("lifecycle")
        try openStore(dir).set("planted", forKey: "theme")
        #expect(chmod(dir.path, 0o1777) == 0)
        #expect(chmod(dir.file("ui.prefs"), 0o644) == 0 && chmod(dir.file("ui.prefs.lock"), 0o644) == 0)
        let before = try readBytes(dir.file("ui.prefs"))

        let child = try Child(["prefs-open-as", "65534", dir.path, "ui", "readonly"])
        #expect(child.waitForLine { _ in true } == "error permissionDenied")
        #expect(child.drain() == 0)
        #expect(try readBytes(dir.file("ui.prefs")) == before)
    }

    @Test func aReadOnlyOpenOfADamagedStoreSalvagesInMemoryAndLeavesTheFile() throws {
        let dir = try TempDir("lifecycle", memory: true)
        do {
            let store = try openStore(dir)
            try store.set("dark", forKey: "theme")
            try store.set(true, forKey: "sidebar")
        }
        // Flip the last byte of the first record's value ("dark"): that record fails its CRC.
        var bytes = try readBytes(dir.file("ui.prefs"))
        bytes[4096 + 32 + 5 + 3] ^= 0x01
        try writeBytes(bytes, to: dir.file("ui.prefs"))

        let reader = try openStore(dir) { $0.readOnly = true }
        #expect(reader.lastRecovery != nil)
        #expect(try reader.bool(forKey: "sidebar") == true)
        // What the read-only handle recovered is what a writable open recovers (from a copy of the file).
        try FileManager.default.createDirectory(atPath: dir.file("copy"), withIntermediateDirectories: false)
        try writeBytes(bytes, to: dir.file("copy/ui.prefs"))
        var quiet = PrefsStore.Configuration()
        quiet.logger.logLevel = .critical
        let writable = try PrefsStore(id: "ui", directory: dir.file("copy"), configuration: quiet)
        #expect(try reader.string(forKey: "theme") == writable.string(forKey: "theme"))
        #expect(writable.lastRecovery != nil)
        #expect(try readBytes(dir.file("ui.prefs")) == bytes, "the damaged file is left byte for byte")
        #expect(dir.files == ["copy", "ui.prefs", "ui.prefs.lock"], "no quarantine copy")
    }

    @Test func aTemporaryStoreIsRealAndGoesWithItsHandle() throws {
        var directories: [String] = []
        do {
            let first = try PrefsStore.temporary()
            let second = try PrefsStore.temporary(id: "ui")
            directories = [first.directory, second.directory]
            #expect(first.directory != second.directory)
            try first.set(320, forKey: "sidebarWidth")
            // A second handle on the same file sees it: it is the real engine.
            #expect(try PrefsStore(id: "test", directory: first.directory).int(forKey: "sidebarWidth") == 320)
            #expect(try second.int(forKey: "sidebarWidth") == nil)
            #expect(FileManager.default.fileExists(atPath: first.path))
        }
        for directory in directories {
            #expect(!FileManager.default.fileExists(atPath: directory), "\(directory) is removed with its handle")
        }
    }

    /// A process that made its temporary directory anew (a store opened there by path after the handle went)
    /// leaves nothing when it exits.
    @Test func aTemporaryDirectoryMadeAgainIsRemovedAtExit() throws {
        let child = try Child(["prefs-temporary"])
        let directory = try #require(child.waitForLine { _ in true })
        #expect(directory.contains("prefskv-temporary-"))
        #expect(child.drain() == 0)
        #expect(!FileManager.default.fileExists(atPath: directory))
    }
}
