// Whether a store's directory and files may be trusted: checked on the open descriptor (`fstat`), never by
// path, so that what is checked is what is used.
//
// The rule (Documentation/FileFormat.md, "Who may own a store's files"):
// - The store directory belongs to the effective user or to root, and others may not write it, unless its
//   sticky bit is set (a shared directory such as /tmp: others may plant names there, which the file checks
//   refuse, but cannot rename or remove ours).
// - The lock and data files belong to the effective user and others may not write them; the data file is
//   closed to others entirely (no group or other access).
// - One exception, for a store installed read-only for every user (a system-wide store): a handle that cannot
//   write may read a data and lock file of another owner that nobody else may write. A handle that could
//   write (root can write any file) never uses a file of another owner.
import SystemLayer

enum FileTrust {
    /// Throws `permissionDenied` naming the store directory when it may not be trusted.
    static func checkDirectory(_ status: FileStatus, path: String) throws(PrefsError) {
        let user = Sys.effectiveUserID()
        guard status.owner == user || status.owner == 0 else {
            throw PrefsError(
                .permissionDenied,
                "store directory \(path) belongs to uid \(status.owner), not to this user (uid \(user)); "
                    + "refusing to use it", path: path)
        }
        guard status.permissions & 0o022 == 0 || status.permissions & 0o1000 != 0 else {
            throw PrefsError(
                .permissionDenied,
                "store directory \(path) has mode 0\(String(status.permissions, radix: 8)): other users may "
                    + "write it; refusing to use it (chmod go-w \(path))", path: path)
        }
    }

    /// Throws `permissionDenied` naming the file when the lock file (`isData` false) or the data file at `path`
    /// may not be used; `writable`: the handle would write it.
    static func checkFile(_ status: FileStatus, path: String, isData: Bool, writable: Bool) throws(PrefsError) {
        let what = isData ? "store file" : "lock file"
        let user = Sys.effectiveUserID()
        let permissions = status.permissions
        if status.owner != user && (writable || permissions & 0o022 != 0) {
            throw PrefsError(
                .permissionDenied,
                "\(what) \(path) belongs to uid \(status.owner), not to this user (uid \(user)); refusing to use it",
                path: path)
        }
        if permissions & 0o022 != 0 {
            throw PrefsError(
                .permissionDenied,
                "\(what) \(path) has mode 0\(String(permissions, radix: 8)): other users may write it; "
                    + "refusing to use it", path: path)
        }
        if isData && status.owner == user && permissions & 0o077 != 0 {
            throw PrefsError(
                .permissionDenied,
                "\(what) \(path) has mode 0\(String(permissions, radix: 8)): other users may read it; "
                    + "refusing to use it (chmod go= \(path))", path: path)
        }
    }
}
