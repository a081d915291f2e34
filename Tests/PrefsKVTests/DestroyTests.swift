import Foundation
import Testing

@testable import PrefsKV

/// `PrefsStore.destroy(id:directory:evenIfOpen:)`, the engine side of `vaultctl prefs wipe`: what it removes, what it
/// leaves, and how handles that have the store open notice.
@Suite struct DestroyTests {
    /// A store `ui` with two values, a quarantine copy from a real recovery, and a stale temporary image.
    static func damagedAndRepairedStore(in dir: TempDir) throws -> String {
        do {
            let store = try openStore(dir)
            try store.set("dark", forKey: "theme")
            try store.set(true, forKey: "sidebar")
        }
        // Flip the last byte of the first record's value ("dark"): one record fails its CRC.
        let path = dir.file("ui.prefs")
        var bytes = try readBytes(path)
        bytes[4096 + 32 + 5 + 3] ^= 0x01
        try writeBytes(bytes, to: path)
        let recovered = try openStore(dir)
        let quarantine = try #require(recovered.lastRecovery?.quarantinePath)
        try writeBytes([1, 2, 3], to: dir.file("ui.prefs.tmp"))
        return quarantine
    }

    @Test func removesDataLockTemporaryAndQuarantineCopiesAndNothingElse() throws {
        let dir = try TempDir("destroy", memory: true)
        let quarantine = try Self.damagedAndRepairedStore(in: dir)
        // Neighbours whose names start like the store's files: other stores, and a store whose id looks like
        // a quarantine copy of `ui`.
        try openStore(dir, id: "ui2").set(1, forKey: "x")
        try openStore(dir, id: "ui.prefs.corrupt-20260101T000000Z").set(1, forKey: "x")
        let neighbours = dir.files.filter {
            !$0.hasPrefix("ui.prefs") || $0.hasPrefix("ui.prefs.corrupt-20260101T000000Z.prefs")
        }
        #expect(dir.files.contains(URL(fileURLWithPath: quarantine).lastPathComponent))

        let report = try PrefsStore.destroy(id: "ui", directory: dir.path)

        #expect(!report.lockKept)
        #expect(
            report.removed == [
                dir.file("ui.prefs"), dir.file("ui.prefs.tmp"), quarantine, dir.file("ui.prefs.lock"),
            ])
        #expect(dir.files == neighbours.sorted())
        #expect(try openStore(dir, id: "ui2").int(forKey: "x") == 1)
        // The next open creates a new, empty store.
        #expect(try openStore(dir).count == 0)
    }

    @Test func aHandleOpenInThisProcessNoticesAndTheLockFileStays() throws {
        let dir = try TempDir("destroy", memory: true)
        let open = try openStore(dir)
        try open.set("dark", forKey: "theme")
        let before = try readBytes(dir.file("ui.prefs"))

        // By default an open store is refused, and nothing changes.
        expectError(.busy) { try PrefsStore.destroy(id: "ui", directory: dir.path) }
        #expect(dir.files == ["ui.prefs", "ui.prefs.lock"])
        #expect(try readBytes(dir.file("ui.prefs")) == before)
        #expect(try open.string(forKey: "theme") == "dark")

        let report = try PrefsStore.destroy(id: "ui", directory: dir.path, evenIfOpen: true)

        #expect(report.lockKept)
        #expect(report.removed == [dir.file("ui.prefs")])
        #expect(dir.files == ["ui.prefs.lock"])
        // The open handle does not read or write the removed file: it answers notFound, and creates nothing.
        expectError(.notFound) { try open.string(forKey: "theme") }
        expectError(.notFound) { try open.set("light", forKey: "theme") }
        #expect(dir.files == ["ui.prefs.lock"])
        // A new handle creates a fresh store on the same lock file; the old handle then follows the path to
        // it, as it follows a compaction.
        let fresh = try openStore(dir)
        #expect(try fresh.string(forKey: "theme") == nil)
        try fresh.set("light", forKey: "theme")
        #expect(try open.string(forKey: "theme") == "light")
    }

    @Test func aHandleOpenInAnotherProcessKeepsTheLockFile() throws {
        let dir = try TempDir("destroy", memory: true)
        try openStore(dir).set(1, forKey: "x")
        let holder = try Child(["prefs-hold", dir.path, "ui", "multi"])
        #expect(holder.waitForLine { _ in true } == "open")
        let before = try readBytes(dir.file("ui.prefs"))

        expectError(.busy) { try PrefsStore.destroy(id: "ui", directory: dir.path) }
        #expect(try readBytes(dir.file("ui.prefs")) == before)

        let report = try PrefsStore.destroy(id: "ui", directory: dir.path, evenIfOpen: true)

        #expect(report.lockKept)
        #expect(dir.files == ["ui.prefs.lock"])
        holder.killAndDrain()
        // Once nobody has it open, destroying again removes the lock file too.
        #expect(try PrefsStore.destroy(id: "ui", directory: dir.path).removed == [dir.file("ui.prefs.lock")])
        #expect(dir.files.isEmpty)
    }

    @Test func aSingleProcessHandleMakesItBusyAndNothingIsRemoved() throws {
        let dir = try TempDir("destroy", memory: true)
        let single = try openStore(dir) { $0.sharing = .singleProcess }
        try single.set(1, forKey: "x")
        let before = try readBytes(dir.file("ui.prefs"))

        expectError(.busy) { try PrefsStore.destroy(id: "ui", directory: dir.path) }

        #expect(dir.files == ["ui.prefs", "ui.prefs.lock"])
        #expect(try readBytes(dir.file("ui.prefs")) == before)
        #expect(try single.int(forKey: "x") == 1)
    }

    @Test func anAbsentStoreRemovesNothingAndAnInvalidIdIsRefused() throws {
        let dir = try TempDir("destroy", memory: true)
        #expect(try PrefsStore.destroy(id: "ui", directory: dir.path).removed == [])
        #expect(dir.files.isEmpty)
        expectError(.invalidKey) { try PrefsStore.destroy(id: "../ui", directory: dir.path) }
    }

    @Test func storeFilesListsDataFilesWithTheirQuarantineCopies() throws {
        let dir = try TempDir("destroy", memory: true)
        let quarantine = try Self.damagedAndRepairedStore(in: dir)
        try openStore(dir, id: "cache").set(1, forKey: "x")
        try FileManager.default.createDirectory(atPath: dir.file("folder.prefs"), withIntermediateDirectories: false)

        let stores = try PrefsStore.storeFiles(in: dir.path)

        #expect(
            stores == [
                PrefsStoreFiles(id: "cache", dataPath: dir.file("cache.prefs"), quarantinePaths: []),
                PrefsStoreFiles(id: "ui", dataPath: dir.file("ui.prefs"), quarantinePaths: [quarantine]),
            ])
        #expect(try PrefsStore.quarantineCopies(id: "ui", directory: dir.path) == [quarantine])
    }
}
