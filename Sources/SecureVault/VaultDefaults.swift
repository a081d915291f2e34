import SystemLayer

/// Where vaults live unless a configuration says otherwise.
package enum VaultDefaults {
    /// `$XDG_DATA_HOME/securevault`, or `$HOME/.local/share/securevault` (the system layer's XDG rule,
    /// `Sys.dataDirectory`, which PrefsKV's default directory follows too).
    package static var directory: String { Sys.dataDirectory("securevault") }

    /// How long a Secret Service call may take before it is a `timeout`.
    package static let deadline: Duration = .seconds(2)
    /// The label of a vault's default logger (and of its file's store's).
    package static let loggerLabel = "securevault"
}
