// The XDG data-directory rule, the one both modules' default directories follow.

extension Sys {
    /// Where an application's data lives by default: `$XDG_DATA_HOME/<name>` when `XDG_DATA_HOME` is an
    /// absolute path, otherwise `<home>/.local/share/<name>`.
    ///
    /// `<home>` is `$HOME` when set and not empty, else the user's home directory in the password database,
    /// else `/`; a trailing `/` on it is dropped. A relative or empty `XDG_DATA_HOME` is ignored, as the XDG
    /// Base Directory specification asks.
    ///
    /// ```swift
    /// Sys.dataDirectory("prefskv")  // "/home/ada/.local/share/prefskv"
    /// ```
    package static func dataDirectory(_ name: String) -> String {
        if let data = environment("XDG_DATA_HOME"), data.hasPrefix("/") {
            return data + "/" + name
        }
        let home = environment("HOME") ?? passwordHomeDirectory() ?? "/"
        return (home.hasSuffix("/") ? home : home + "/") + ".local/share/" + name
    }
}
