/// What `Vault.wipe()` did with the master key the vault's file names. The file itself is always removed.
///
/// ```swift
/// let report = try vault.wipe()
/// if let reason = report.keptKeyReason { print("the master key was left:", reason) }
/// if let copy = report.remainingCopy { print("the key store may keep a copy:", copy) }
/// ```
public struct VaultWipeReport: Sendable, Equatable {
    /// Whether this wipe deleted the master key from the key store (a fresh search no longer finds it). False
    /// when the key store held none for the file (already deleted, a keyring reset, a passphrase vault, which
    /// stores none) and when a key was left (``keptKeyReason``).
    public var removedKey: Bool = false
    /// Why a key the file names was left in the key store, nil when none was: the file did not prove that the
    /// key is this vault's (a file copied or renamed from another vault, or a legacy keyring item labelled for
    /// another service), or the key store did not complete the delete (a delete it asked to confirm and nobody
    /// did; the key's secret is overwritten with random bytes first, and the next `Vault.wipe()` or
    /// `Vault.rotateKey()` retries). Names files, services and items, never key material.
    public var keptKeyReason: String?
    /// What the key store may still keep of a key it deleted, and how to purge it, nil when its deletion is
    /// final: KeePassXC moves deleted entries to its Recycle Bin (when on, its default) and keeps an entry's
    /// earlier secrets in its History.
    public var remainingCopy: String?

    /// A report of a wipe that removed no key and left none.
    public init(removedKey: Bool = false, keptKeyReason: String? = nil, remainingCopy: String? = nil) {
        self.removedKey = removedKey
        self.keptKeyReason = keptKeyReason
        self.remainingCopy = remainingCopy
    }
}

/// What `Vault.rotateKey()` did with the old master key. The items are always under the new key once it
/// returns.
///
/// ```swift
/// let report = try vault.rotateKey()
/// if !report.removedOldKey { print("the old key is still in the key store:", report.keptKeyReason ?? "") }
/// ```
public struct VaultRotationReport: Sendable, Equatable {
    /// Whether the old key was deleted from the key store (a fresh search no longer finds it). False for a
    /// passphrase vault (nothing is stored) and when the old key was left (``keptKeyReason``).
    public var removedOldKey: Bool = false
    /// Why the old key is still in the key store, nil when it is not: a legacy item labelled for another
    /// vault, or a delete the key store did not complete (retried by the next `Vault.wipe()` or
    /// `Vault.rotateKey()`).
    public var keptKeyReason: String?
    /// What the key store may still keep of the deleted old key, and how to purge it (see
    /// ``VaultWipeReport/remainingCopy``); nil when its deletion is final.
    public var remainingCopy: String?

    /// A report of a rotation.
    public init(removedOldKey: Bool = false, keptKeyReason: String? = nil, remainingCopy: String? = nil) {
        self.removedOldKey = removedOldKey
        self.keptKeyReason = keptKeyReason
        self.remainingCopy = remainingCopy
    }
}
