// A store's life as an app sees it: does it exist, which stores a directory holds, removing one (per-account
// stores at sign-out), and a store for the app's own tests that leaves nothing behind.
import FoundationEssentials
import Synchronization
import SystemLayer

/// What ``PrefsStore/destroy(id:directory:evenIfOpen:)`` removed.
///
/// ```swift
/// let report = try PrefsStore.destroy(id: "user-42", directory: directory)
/// logger.info("removed \(report.removed.count) files")
/// ```
public struct PrefsDestroyReport: Sendable, Equatable {
    /// The files removed, in the order they were removed: the data file, a leftover temporary image, the base
    /// image (`<id>.prefs.prev`), quarantine copies and the lock file.
    public var removed: [String]
    /// True when the lock file was left in place because other handles had the store open (only with
    /// `evenIfOpen`); they answer ``PrefsError/Code/notFound`` from their next access on.
    public var lockKept: Bool

    package init(removed: [String], lockKept: Bool) {
        self.removed = removed
        self.lockKept = lockKept
    }
}

extension PrefsStore {
    /// Whether the store `id` exists in `directory`: its data file, `<directory>/<id>.prefs`, is there. Opens,
    /// creates and locks nothing; a missing directory holds no store.
    ///
    /// ```swift
    /// if try PrefsStore.exists(id: "user-\(account.id)", directory: directory) { ... }
    /// ```
    ///
    /// - Throws: ``PrefsError/Code/invalidKey`` for an id no store may have; a ``PrefsError`` when the
    ///   directory cannot be searched.
    public static func exists(id: String, directory: String = PrefsStore.defaultDirectory) throws -> Bool {
        try StorePaths.validate(storeID: id)
        let path = StorePaths(id: id, directory: directory).data
        switch Sys.lstat(path) {
        case .success: return true
        case .failure(let e) where e == .noEntry || e == .notADirectory: return false
        case .failure(let e): throw PrefsError.system(e, "lstat", "cannot look for the store file", path: path)
        }
    }

    /// The ids of the stores in `directory`, sorted: one for each regular file named `<id>.prefs`. Lock files,
    /// temporary images, base images and quarantine copies are not stores. Opens and changes nothing; a missing
    /// directory holds none.
    ///
    /// ```swift
    /// let accounts = try PrefsStore.storeIDs(in: directory).filter { $0.hasPrefix("user-") }
    /// ```
    public static func storeIDs(in directory: String = PrefsStore.defaultDirectory) throws -> [String] {
        do {
            return try storeFiles(in: directory).map(\.id)
        } catch let error as PrefsError where error.code == .notFound {
            return []
        }
    }

    /// Removes the store `id` from `directory`: its data file, a leftover temporary image, its base image, its
    /// quarantine copies and its lock file. A store that is not there is no error (the report lists nothing).
    ///
    /// It runs under the store's locks, so no open, write or compaction is under way while it removes the
    /// files. A store that other handles (in this process or another) have open is refused with
    /// ``PrefsError/Code/busy`` and nothing is removed, unless `evenIfOpen` is true: then the data file is
    /// marked retired before it goes, so every open handle notices on its next access and answers
    /// ``PrefsError/Code/notFound`` rather than reading or writing a removed file (their lock file stays, see
    /// ``PrefsDestroyReport/lockKept``). A single-process handle holding the store is `busy` either way.
    ///
    /// ```swift
    /// // At sign-out: the account's store goes with it.
    /// try PrefsStore.destroy(id: "user-\(account.id)", directory: directory)
    /// ```
    @discardableResult
    public static func destroy(
        id: String, directory: String = PrefsStore.defaultDirectory, evenIfOpen: Bool = false
    ) throws -> PrefsDestroyReport {
        try StorePaths.validate(storeID: id)
        let destroyed = try Destroy.destroy(paths: StorePaths(id: id, directory: directory), evenIfOpen: evenIfOpen)
        return PrefsDestroyReport(removed: destroyed.removed, lockKept: destroyed.lockKept)
    }

    /// A store in a new private temporary directory (in `$TMPDIR`, or `/tmp`), removed with everything in it
    /// when this handle is released: for an app's own tests. It is the real engine (files, locks, recovery),
    /// so a test sees what the app will; each call makes a new directory, so parallel tests never share one.
    ///
    /// ```swift
    /// @Test func theSidebarWidthIsRemembered() throws {
    ///     let store = try PrefsStore.temporary()
    ///     try store.set(320, forKey: "sidebarWidth")
    ///     #expect(try store.int(forKey: "sidebarWidth") == 320)
    /// }   // the directory is gone here
    /// ```
    ///
    /// A second handle on the same store (`PrefsStore(id:directory:)` with ``directory``) works too: keep the
    /// temporary handle alive while the directory is in use (`withExtendedLifetime`). Whatever a test leaves
    /// there is removed when the process exits.
    public static func temporary(id: String = "test", configuration: Configuration = Configuration()) throws
        -> PrefsStore
    {
        try StorePaths.validate(storeID: id)
        let directory = try TemporaryDirectory()
        return try PrefsStore(
            id: id, directory: directory.path, configuration: configuration, temporaryDirectory: directory)
    }
}

/// A private directory made for a temporary store or vault, removed with its contents when released, and again
/// when the process exits (a test that opened a store there by path after the handle was released made it anew).
package final class TemporaryDirectory: Sendable {
    /// The directory's absolute path.
    package let path: String

    /// Every temporary directory this process made; removed at exit.
    private static let made = Mutex<[String]>([])

    package init() throws(PrefsError) {
        switch Sys.makeTemporaryDirectory(prefix: "prefskv-temporary-") {
        case .success(let path): self.path = path
        case .failure(let e):
            throw PrefsError.system(e, "mkdtemp", "cannot create a temporary directory", path: "$TMPDIR")
        }
        let first = Self.made.withLock { made in
            made.append(path)
            return made.count == 1
        }
        if first { Sys.atExit { TemporaryDirectory.removeAll() } }
    }

    deinit {
        Self.remove(path)
    }

    private static func removeAll() {
        for path in made.withLock({ $0 }) { remove(path) }
    }

    /// Symbolic links inside are removed, never followed.
    private static func remove(_ path: String) {
        try? FileManager.default.removeItem(atPath: path)
    }
}
