import Foundation
import Testing

@testable import PrefsKV

/// Disk full, read-only file systems, permissions: typed errors, never a crash or SIGBUS, and what was
/// stored stays readable. These tests mount file systems and change users: they need root.
@Suite(.serialized) struct EnvironmentErrorTests {
    @Test func aFullDiskIsATypedErrorAndStoredDataStaysReadable() throws {
        let dir = try TempDir("full")
        let mount = try Mount(size: "256k", in: dir)
        let storeDir = mount.path + "/prefs"
        let store = try PrefsStore(id: "ui", directory: storeDir)
        var written: [String: Data] = [:]
        var failure: PrefsError?
        for i in 0..<200 {
            let value = Data(repeating: UInt8(i), count: 6000)
            do {
                try store.set(value, forKey: "blob-\(i)")
                written["blob-\(i)"] = value
            } catch let error as PrefsError {
                failure = error
                break
            }
        }
        let error = try #require(failure, "256 KiB never filled up")
        #expect(error.code == .diskFull)
        #expect(error.path == storeDir + "/ui.prefs")
        guard case .errno(let value)? = error.cause else { Issue.record("no errno: \(error)"); return }
        #expect(value == ENOSPC)
        #expect(written.count > 10)
        for (key, value) in written { #expect(try store.data(forKey: key) == value) }
        // A compaction needs room for a new image: it fails the same way and leaves the store as it was.
        let before = try readBytes(store.path)
        expectError(.diskFull) { try store.compact() }
        #expect(try readBytes(store.path) == before)
        #expect(!FileManager.default.fileExists(atPath: store.path + ".tmp"))
        // Small writes that fit the preallocated space still succeed; everything reopens intact.
        try store.removeValue(forKey: "blob-0")
        written["blob-0"] = nil
        let reopened = try PrefsStore(id: "ui", directory: storeDir)
        #expect(reopened.lastRecovery == nil)
        #expect(try reopened.count == written.count)
        for (key, value) in written { #expect(try reopened.data(forKey: key) == value) }
        #expect(try reopened.verify().isClean)
    }

    @Test func aReadOnlyFileSystemStillServesReads() throws {
        let dir = try TempDir("ro")
        let mount = try Mount(size: "1m", in: dir)
        let storeDir = mount.path + "/prefs"
        do {
            let store = try PrefsStore(id: "ui", directory: storeDir)
            try store.set("dark", forKey: "theme")
            try store.set(3, forKey: "columns")
        }
        try mount.remount(readOnly: true)
        defer { try? mount.remount(readOnly: false) }
        let store = try PrefsStore(id: "ui", directory: storeDir)
        #expect(try store.string(forKey: "theme") == "dark")
        #expect(try store.int(forKey: "columns") == 3)
        let error = expectError(.readOnly) { try store.set("light", forKey: "theme") }
        #expect(error?.path == storeDir + "/ui.prefs")
        expectError(.readOnly) { try store.compact() }
        expectError(.readOnly) { try store.removeAll() }
        #expect(try store.string(forKey: "theme") == "dark")
        #expect(try PrefsStore.verify(id: "ui", directory: storeDir).isClean)
        // A store that does not exist cannot be created there.
        expectError(.readOnly) { try PrefsStore(id: "other", directory: storeDir) }
    }

    @Test func anotherUsersStoreIsPermissionDenied() throws {
        let dir = try TempDir("perm")
        _ = try openStore(dir)
        // Run as nobody: the directory (0700, root's) cannot even be searched.
        let child = try Child(["prefs-open-as", "65534", dir.path, "ui"])
        #expect(child.waitForLine { _ in true } == "error permissionDenied")
    }

    @Test func aDirectoryWhereTheStoreFileShouldBeIsNotAStore() throws {
        let dir = try TempDir("notstore")
        try FileManager.default.createDirectory(atPath: dir.file("ui.prefs"), withIntermediateDirectories: false)
        let error = expectError(.notAStore) { try openStore(dir) }
        #expect(error?.path == dir.file("ui.prefs"))
        try FileManager.default.removeItem(atPath: dir.file("ui.prefs"))
        try FileManager.default.createSymbolicLink(atPath: dir.file("ui.prefs"), withDestinationPath: "/etc/passwd")
        let link = expectError(.io) { try openStore(dir) }
        #expect(link?.message.contains("symbolic link") == true)
    }
}
