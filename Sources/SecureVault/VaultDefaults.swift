import Glibc

/// Where vaults live unless a configuration says otherwise.
package enum VaultDefaults {
    /// `$XDG_DATA_HOME/securevault`, or `$HOME/.local/share/securevault`.
    package static var directory: String {
        if let xdg = getenv("XDG_DATA_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
            return xdg + "/securevault"
        }
        let home = getenv("HOME").map { String(cString: $0) } ?? "/"
        return (home.hasSuffix("/") ? home : home + "/") + ".local/share/securevault"
    }

    /// How long a Secret Service call may take before it is a `timeout`.
    package static let deadline: Duration = .seconds(2)
}
