// Joining and splitting paths, one rule for every module: a relative directory stays relative (to the working
// directory of the call), an absolute one stays absolute; nothing gains or loses a leading "/".
import Glibc

extension Sys {
    /// `name` inside `directory`: one `/` between them, none added after a trailing one. An empty directory is
    /// the working directory, so its files are named relative to it (never from `/`).
    ///
    /// ```swift
    /// Sys.joinPath("/var/lib/app", "ui.prefs")  // "/var/lib/app/ui.prefs"
    /// Sys.joinPath("state/", "ui.prefs")        // "state/ui.prefs"
    /// Sys.joinPath("", "ui.prefs")              // "ui.prefs"
    /// ```
    package static func joinPath(_ directory: String, _ name: String) -> String {
        if directory.isEmpty { return name }
        return directory.hasSuffix("/") ? directory + name : directory + "/" + name
    }

    /// The directory holding `path`: what comes before its last `/`, `/` for a name right under the root, and
    /// `.` for a bare name (the working directory).
    ///
    /// ```swift
    /// Sys.parentDirectory(of: "/srv/ui.prefs.bak")  // "/srv"
    /// Sys.parentDirectory(of: "/ui.prefs.bak")      // "/"
    /// Sys.parentDirectory(of: "ui.prefs.bak")       // "."
    /// ```
    package static func parentDirectory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// Every directory from the first component of `path` down to `path` itself, each spelled as a prefix of
    /// `path`: `"a/b/c"` gives `a`, `a/b`, `a/b/c` (relative to the working directory); `"/a/b"` gives `/a`,
    /// `/a/b`. What `mkdir -p` creates, in the order it creates them.
    package static func directoryPrefixes(of path: String) -> [String] {
        var prefixes: [String] = []
        var index = path.startIndex
        while index < path.endIndex {
            if path[index] == "/" && index != path.startIndex && path[path.index(before: index)] != "/" {
                prefixes.append(String(path[..<index]))
            }
            index = path.index(after: index)
        }
        if !path.isEmpty && !path.hasSuffix("/") { prefixes.append(path) }
        return prefixes
    }

    /// The absolute path of an existing `path` with every symbolic link, `.` and `..` resolved (`realpath(3)`),
    /// nil when it does not exist or cannot be resolved. What a record of where a file lives should hold: a
    /// relative path names different places from different working directories.
    ///
    /// ```swift
    /// Sys.canonicalPath("state")  // "/home/me/app/state", run in /home/me/app
    /// ```
    package static func canonicalPath(_ path: String) -> String? {
        guard let resolved = realpath(path.isEmpty ? "." : path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
