/// What ``Vault/wipe()`` did with the master key the vault's file names. The file itself is always removed.
///
/// ```swift
/// let report = try vault.wipe()
/// if let reason = report.keptKeyReason { print("the master key was left:", reason) }
/// ```
public struct VaultWipeReport: Sendable, Equatable {
    /// Whether this wipe deleted the master key from the key store. False when the key store held none for
    /// the file (already deleted, a keyring reset, a passphrase vault, which stores none) and when a key was
    /// left (``keptKeyReason``).
    public var removedKey: Bool = false
    /// Why a key the file names was left in the key store, nil when none was: the file did not prove that the
    /// key is this vault's (a file copied or renamed from another vault, or a legacy keyring item labelled for
    /// another service). Names files and services, never key material.
    public var keptKeyReason: String?

    /// A report of a wipe that removed no key and left none.
    public init(removedKey: Bool = false, keptKeyReason: String? = nil) {
        self.removedKey = removedKey
        self.keptKeyReason = keptKeyReason
    }
}
