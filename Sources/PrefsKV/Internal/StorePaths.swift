// The names of a store's files, the rule for store ids, and the directory they live in.
import SystemLayer

/// The file names of one store.
struct StorePaths {
    let id: String
    let directory: String
    let data: String
    let lock: String
    let temporary: String
    /// The base image of a buffered store between an unflushed automatic compaction and the next `sync()`.
    let previous: String
    /// The names of the data and lock files in `directory` (for `Sys.open(at:)`).
    let dataFileName: String
    let lockFileName: String

    init(id: String, directory: String) {
        self.id = id
        // An empty directory is the working directory: "." so that it can be opened and fsynced by name.
        self.directory = directory.isEmpty ? "." : directory
        dataFileName = id + ".prefs"
        lockFileName = dataFileName + ".lock"
        data = Sys.joinPath(self.directory, dataFileName)
        lock = data + ".lock"
        temporary = data + ".tmp"
        previous = data + ".prev"
    }
}

extension StorePaths {
    /// Throws `invalidKey` for a store id the naming rule rejects.
    /// Whether `id` is a valid store id.
    static func isValid(storeID id: String) -> Bool { Names.isValid(id, as: .fileName) }

    static func validate(storeID id: String) throws(PrefsError) {
        guard Names.isValid(id, as: .fileName) else {
            throw PrefsError(.invalidKey, "invalid store id \"\(id)\": \(Names.ruleText(.fileName))")
        }
    }

    /// Creates `directory` and missing parents with mode 0700. A relative directory is created relative to the
    /// working directory (each parent is a prefix of `directory` as written, never rebuilt from `/`); an empty
    /// one is the working directory itself.
    static func ensureDirectory(_ directory: String) throws(PrefsError) {
        if directory.isEmpty { return }
        if case .success = Sys.lstat(directory) { return }
        for path in Sys.directoryPrefixes(of: directory) {
            if case .success = Sys.lstat(path) { continue }
            switch Sys.mkdir(path, permissions: 0o700) {
            case .success:
                try Sys.chmod(path, 0o700).orThrow("chmod", "cannot set the directory's mode", path: path)
            case .failure(let e) where e == .exists: continue
            case .failure(let e): throw PrefsError.system(e, "mkdir", "cannot create the store directory", path: path)
            }
        }
    }
}

/// fsyncs the store's directory so that a rename or a new file name survives a power loss. Failures are
/// ignored: the data is already in place for every process; only power-loss durability of the name is at risk.
func syncDirectory(_ paths: StorePaths) {
    _ = syncDirectoryChecked(paths)
}

/// `syncDirectory`, for the callers whose promise rests on it (a base image's link before an unflushed image is
/// renamed over the data file, its removal after one was flushed): the error, nil when the directory was flushed.
func syncDirectoryChecked(_ paths: StorePaths) -> PrefsError? {
    let fd: Int32
    switch Sys.open(paths.directory, .directory) {
    case .success(let f): fd = f
    case .failure(let e): return PrefsError.system(e, "open", "cannot open the store directory", path: paths.directory)
    }
    defer { Sys.close(fd) }
    if case .failure(let e) = Sys.fsync(fd) {
        return PrefsError.system(e, "fsync", "cannot flush the store directory", path: paths.directory)
    }
    return nil
}
