// The names of a store's files, the rule for store ids, and the directory they live in.

/// The file names of one store.
struct StorePaths {
    let id: String
    let directory: String
    let data: String
    let lock: String
    let temporary: String

    init(id: String, directory: String) {
        self.id = id
        self.directory = directory
        let base = directory.hasSuffix("/") ? directory + id : directory + "/" + id
        data = base + ".prefs"
        lock = data + ".lock"
        temporary = data + ".tmp"
    }

    var dataFileName: String { id + ".prefs" }
}

extension Engine {
    static func validate(storeID id: String) throws(PrefsError) {
        let allowed = id.utf8.allSatisfy { c in
            (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                || c == 0x5F || c == 0x2D
        }
        // Not `id.contains("..")`: that goes through the string-processing module's generic searcher, whose
        // metadata a fresh process instantiates at its first open (about 100 µs, for a two-byte pattern).
        var previous: UInt8 = 0
        var doubleDot = false
        for c in id.utf8 {
            if c == 0x2E && previous == 0x2E { doubleDot = true }
            previous = c
        }
        guard allowed, (1...128).contains(id.utf8.count), id != ".", !doubleDot else {
            throw PrefsError(.invalidKey, "invalid store id \"\(id)\": use 1 to 128 of A-Z a-z 0-9 . _ -, no \"..\"")
        }
    }

    /// Creates `directory` and missing parents with mode 0700.
    static func ensureDirectory(_ directory: String) throws(PrefsError) {
        if case .success = Sys.lstat(directory) { return }
        var path = ""
        for component in directory.split(separator: "/", omittingEmptySubsequences: true) {
            path += "/" + component
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
    guard case .success(let fd) = Sys.open(paths.directory, .directory) else { return }
    _ = Sys.fsync(fd)
    Sys.close(fd)
}
