import Foundation
import Testing

@testable import PrefsKV

/// Issue 14, point 5: files another user planted in a store's directory, a directory others may write, and
/// files with modes that let others in are refused with `permissionDenied` naming the file and the problem,
/// and nothing is written to them. Planting a file of another owner needs root (CI runs as root).
@Suite(.serialized) struct PlantedFileTests {
    static let isRoot = geteuid() == 0

    /// The bytes of a valid store holding one value, written by us elsewhere.
    static func storeBytes() throws -> Data {
        let source = try TempDir("planted-source")
        try PrefsStore(id: "ui", directory: source.path).set("planted", forKey: "theme")
        return try Data(contentsOf: URL(fileURLWithPath: source.file("ui.prefs")))
    }

    /// A 1777 directory, as /tmp: others may create names in it.
    static func sharedDirectory(_ dir: TempDir) throws -> String {
        let shared = dir.file("shared")
        #expect(mkdir(shared, 0o700) == 0 && chmod(shared, 0o1777) == 0)
        return shared
    }

    static func plant(_ bytes: Data, at path: String, owner: uid_t, mode: mode_t) throws {
        try bytes.write(to: URL(fileURLWithPath: path))
        #expect(chown(path, owner, owner) == 0 && chmod(path, mode) == 0)
    }

    static func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

    static func expectRefused(
        naming path: String, _ problem: String, sourceLocation: SourceLocation = #_sourceLocation,
        _ body: () throws -> Void
    ) {
        let error = expectError(.permissionDenied, sourceLocation: sourceLocation, body)
        #expect(error?.path == path, sourceLocation: sourceLocation)
        #expect(error?.message.contains(path) == true, sourceLocation: sourceLocation)
        #expect(error?.message.contains(problem) == true, "\(String(describing: error))", sourceLocation: sourceLocation)
    }

    @Test func aDataFileOfAnotherUserInASharedDirectoryIsRefusedAndUntouched() throws {
        try #require(Self.isRoot, "planting a file of another owner needs root (make test runs as root)")
        let dir = try TempDir("planted-data")
        let shared = try Self.sharedDirectory(dir)
        let data = shared + "/ui.prefs"
        try Self.plant(try Self.storeBytes(), at: data, owner: 65534, mode: 0o666)
        let before = Self.contents(data)
        Self.expectRefused(naming: data, "belongs to uid 65534") {
            try PrefsStore(id: "ui", directory: shared).set("secret", forKey: "token")
        }
        #expect(Self.contents(data) == before)
    }

    @Test func aLockFileOfAnotherUserInASharedDirectoryIsRefusedAndUntouched() throws {
        try #require(Self.isRoot, "planting a file of another owner needs root (make test runs as root)")
        let dir = try TempDir("planted-lock")
        let shared = try Self.sharedDirectory(dir)
        let lock = shared + "/ui.prefs.lock"
        try Self.plant(Data(), at: lock, owner: 65534, mode: 0o666)
        Self.expectRefused(naming: lock, "belongs to uid 65534") {
            try PrefsStore(id: "ui", directory: shared).set("secret", forKey: "token")
        }
        #expect(Self.contents(lock) == Data())  // no lock page was set up in it
        #expect(!FileManager.default.fileExists(atPath: shared + "/ui.prefs"))
    }

    /// Root can write any file: a file of another owner is refused even when only its owner may write it.
    @Test func aPrivateDataFileOfAnotherUserIsRefused() throws {
        try #require(Self.isRoot, "planting a file of another owner needs root (make test runs as root)")
        let dir = try TempDir("planted-private")
        let data = dir.file("ui.prefs")
        try Self.plant(try Self.storeBytes(), at: data, owner: 65534, mode: 0o600)
        let before = Self.contents(data)
        Self.expectRefused(naming: data, "belongs to uid 65534") { _ = try PrefsStore(id: "ui", directory: dir.path) }
        #expect(Self.contents(data) == before)
    }

    /// Others may write (0666, 0620, 0602) or read (0640, 0604) the data file: refused, and left as it was.
    @Test(arguments: [(0o666, "write"), (0o620, "write"), (0o602, "write"), (0o640, "read"), (0o604, "read")])
    func aDataFileOthersMayWriteOrReadIsRefused(_ mode: Int, _ access: String) throws {
        let dir = try TempDir("planted-mode")
        let data = dir.file("ui.prefs")
        try Self.plant(try Self.storeBytes(), at: data, owner: geteuid(), mode: mode_t(mode))
        let before = Self.contents(data)
        Self.expectRefused(naming: data, "has mode 0\(String(mode, radix: 8)): other users may \(access) it") {
            try PrefsStore(id: "ui", directory: dir.path).set("secret", forKey: "token")
        }
        #expect(Self.contents(data) == before)
    }

    @Test(arguments: [0o666, 0o660])
    func aLockFileOthersMayWriteIsRefused(_ mode: Int) throws {
        let dir = try TempDir("planted-lock-mode")
        let lock = dir.file("ui.prefs.lock")
        try Self.plant(Data(), at: lock, owner: geteuid(), mode: mode_t(mode))
        Self.expectRefused(naming: lock, "has mode 0\(String(mode, radix: 8)): other users may write it") {
            _ = try PrefsStore(id: "ui", directory: dir.path)
        }
        #expect(Self.contents(lock) == Data())
        #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs")))
    }

    @Test(arguments: [0o777, 0o775, 0o757])
    func aStoreDirectoryOthersMayWriteIsRefusedBeforeAnythingIsCreated(_ mode: Int) throws {
        let dir = try TempDir("planted-dir")
        let store = dir.file("store")
        #expect(mkdir(store, 0o700) == 0 && chmod(store, mode_t(mode)) == 0)
        Self.expectRefused(naming: store, "has mode 0\(String(mode, radix: 8)): other users may write it") {
            _ = try PrefsStore(id: "ui", directory: store)
        }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: store)) ?? ["?"]).isEmpty)
    }

    @Test func aStoreDirectoryOfAnotherUserIsRefused() throws {
        try #require(Self.isRoot, "planting a file of another owner needs root (make test runs as root)")
        let dir = try TempDir("planted-dir-owner")
        let store = dir.file("store")
        #expect(mkdir(store, 0o700) == 0 && chown(store, 65534, 65534) == 0)
        Self.expectRefused(naming: store, "belongs to uid 65534") { _ = try PrefsStore(id: "ui", directory: store) }
        #expect(((try? FileManager.default.contentsOfDirectory(atPath: store)) ?? ["?"]).isEmpty)
    }

    /// A sticky shared directory is usable for files of our own: others cannot rename or remove them there.
    @Test func ourOwnStoreInASharedStickyDirectoryWorks() throws {
        let dir = try TempDir("planted-sticky")
        let shared = try Self.sharedDirectory(dir)
        try PrefsStore(id: "ui", directory: shared).set("dark", forKey: "theme")
        #expect(try PrefsStore(id: "ui", directory: shared).string(forKey: "theme") == "dark")
    }

    @Test func aSymbolicLinkInPlaceOfTheLockFileIsRefused() throws {
        let dir = try TempDir("planted-link")
        let target = dir.file("target")
        try Data().write(to: URL(fileURLWithPath: target))
        try FileManager.default.createSymbolicLink(atPath: dir.file("ui.prefs.lock"), withDestinationPath: target)
        #expect(throws: PrefsError.self) { _ = try PrefsStore(id: "ui", directory: dir.path) }
        #expect(Self.contents(target) == Data())
        #expect(!FileManager.default.fileExists(atPath: dir.file("ui.prefs")))
    }
}
