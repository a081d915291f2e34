// Adopting a secret an app's earlier versions kept straight in the Secret Service (keytar's service/account,
// python keyring's service/username, libsecret's simple API, secret-tool): copied into the vault, read back
// through a fresh handle and compared, and only then, when asked, the source deleted. Never the source lost.
import SystemLayer

/// What `Vault.adopt(matching:as:deletingSource:dryRun:)` did (or, with `dryRun`, would do).
public struct VaultAdoptReport: Sendable, Equatable {
    /// What became of the vault item.
    public enum Outcome: String, Sendable, Equatable {
        /// The secret was copied into the vault item, which did not exist.
        case copied
        /// The vault item already held this secret: nothing was written (an adoption run again).
        case unchanged
    }

    /// The keyring item adopted: its object path.
    public var sourcePath: String
    /// Its label.
    public var sourceLabel: String
    /// All its attributes (never its secret).
    public var sourceAttributes: [String: String]
    /// The vault item it went to.
    public var name: String
    public var outcome: Outcome
    /// Whether the source item was deleted: only when asked, and only after the copy was read back and matched.
    public var deletedSource = false
    /// Why a source item that was to be deleted is still there (a delete the keyring asked to confirm and nobody
    /// did); nil otherwise.
    public var keptSourceReason: String?
    /// Nothing was written or deleted: the report says what would be.
    public var dryRun = false
}

extension Vault {
    /// Takes over a secret another program (or an earlier version of the app) stored straight in the Secret
    /// Service: the one item whose attributes include `attributes` is copied into this vault as item `name`, read
    /// back through a fresh handle and compared (in constant time), and only then, if `deletingSource`, deleted
    /// from the keyring (a fresh search checks it is gone). Text items (`text/plain`, libsecret's password API)
    /// become string items, others secret items.
    ///
    /// ```swift
    /// // keytar stored the refresh token under service/account: move it into the vault, once.
    /// let report = try vault.adopt(
    ///     matching: ["service": "com.example.app", "account": "refresh-token"], as: "refreshToken",
    ///     deletingSource: true)
    /// ```
    ///
    /// Repeatable: when the vault item already holds the secret nothing is written (``VaultAdoptReport/Outcome/unchanged``).
    /// A kill at any instant leaves the source item whole, or the vault item complete and verified (and the source
    /// then deleted or not). The vault's own master keys are never matched. Prompts only as the configuration's
    /// ``Configuration/prompting`` allows.
    ///
    /// - Throws: ``VaultError/Code/notFound`` when no item matches; ``VaultError/Code/invalidKey`` when several do
    ///   (name more attributes) or `name` is no item name; ``VaultError/Code/invalidValue`` when the vault item
    ///   exists with another value (nothing is changed) or the secret is empty; `locked`, `accessNotApproved`,
    ///   `unavailable`, `timeout` from the keyring; what a write throws.
    @discardableResult
    public func adopt(
        matching attributes: [String: String], as name: String, deletingSource: Bool = false, dryRun: Bool = false
    ) throws -> VaultAdoptReport {
        try Self.validate(name: name, what: "item name", as: .itemName)
        guard !attributes.isEmpty else {
            throw VaultError(code: .invalidKey, message: "adopting into vault '\(service)': no attribute to match")
        }
        let described = attributes.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        let operation = "adopting the keyring item \(described) into vault '\(service)' as '\(name)'"
        return try perform(operation) { () throws(VaultError) -> VaultAdoptReport in
            // A dry run reads only, and creates nothing: not even the directory and lock file the lock would make.
            if dryRun { return try adopting(attributes, as: name, described, operation, deletingSource, dryRun: true) }
            // One that fails before the vault has a file leaves neither the directory nor the lock file.
            return try withVaultLockLeavingNothingOnFailure { () throws(VaultError) -> VaultAdoptReport in
                try adopting(attributes, as: name, described, operation, deletingSource, dryRun: false)
            }
        }
    }

    /// The adoption itself, under the vault lock unless `dryRun`.
    private func adopting(
        _ attributes: [String: String], as name: String, _ described: String, _ operation: String,
        _ deletingSource: Bool, dryRun: Bool
    ) throws(VaultError) -> VaultAdoptReport {
        let source = try adoptionSource(attributes, described)
        let secret: LibSecret.Secret
        do throws(SecretServiceFailure) {
            secret = try LibSecret.secret(
                ofItem: source.path, prompting: keys.secretService.prompting,
                deadline: keys.secretService.deadline)
        } catch {
            throw VaultError(error, operation: operation)
        }
        guard secret.bytes.count > 0 else {
            throw VaultError(
                code: .invalidValue, message: "\(operation): the keyring item \(source.path) holds no secret")
        }
        let text =
            secret.contentType.hasPrefix("text/plain")
            && secret.bytes.withUnsafeBytes { String(validating: $0, as: UTF8.self) != nil }
        var report = VaultAdoptReport(
            sourcePath: source.path, sourceLabel: source.label, sourceAttributes: source.attributes, name: name,
            outcome: try holds(secret.bytes, at: name, operation) ? .unchanged : .copied, dryRun: dryRun)
        guard !dryRun else { return report }
        if report.outcome == .copied {
            do {
                try secret.bytes.withUnsafeBytes { bytes in
                    try store(
                        kind: text ? .string : .secret, payload: bytes, for: name, expiresAt: 0,
                        allowEmpty: false)
                }
            } catch {
                throw VaultError.wrapping(error, vault: service)
            }
        }
        // Read back through a fresh handle (its own open and read of the file) before the source may go.
        let fresh: Vault
        do {
            fresh = try Vault(service: service, configuration: configuration)
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        guard try fresh.holds(secret.bytes, at: name, operation) else {
            throw VaultError(
                code: .corrupted,
                message: "\(operation): the vault item read back through a fresh open does not match the "
                    + "keyring item; the keyring item was left as it is", path: path)
        }
        if deletingSource {
            let reason: String?
            do throws(SecretServiceFailure) {
                // Read again just before it goes: the program that owns it may still be running and have
                // stored a newer secret since the copy (a refreshed token), which must not be lost.
                let now = try LibSecret.secret(
                    ofItem: source.path, prompting: keys.secretService.prompting,
                    deadline: keys.secretService.deadline)
                if now.bytes != secret.bytes {
                    reason =
                        "the keyring item changed after it was copied (the program that stored it may still "
                        + "be running): it was kept, and the vault holds the value copied before"
                } else {
                    reason = try LibSecret.deleteItem(
                        source.path, attributes: attributes, deadline: keys.secretService.deadline)
                }
            } catch {
                reason = error.message
            }
            report.deletedSource = reason == nil
            report.keptSourceReason = reason
            if let reason {
                logger.notice("\(operation): copied and verified, but the source was kept: \(reason)")
            }
        }
        return report
    }

    /// The one keyring item `attributes` match, never one of the vault master keys.
    private func adoptionSource(
        _ attributes: [String: String], _ described: String
    ) throws(VaultError)
        -> LibSecret.ItemInfo
    {
        let found: [LibSecret.ItemInfo]
        do throws(SecretServiceFailure) {
            found = try LibSecret.matchingItems(attributes, deadline: configuration.deadline)
        } catch {
            throw VaultError(error, operation: "searching the keyring for \(described)")
        }
        let candidates = found.filter { $0.attributes["xdg:schema"] != LibSecret.Schema.vaultMasterKey.name }
        guard let only = candidates.first else {
            throw VaultError(
                code: .notFound,
                message: "no keyring item matches \(described); nothing was changed (an earlier adopt that "
                    + "deleted its source leaves none: the vault item stays)")
        }
        guard candidates.count == 1 else {
            throw VaultError(
                code: .invalidKey,
                message:
                    "\(candidates.count) keyring items match \(described) (\(candidates.map(\.path).joined(separator: ", "))): "
                    + "name more attributes so that one does; nothing was changed")
        }
        return only
    }

    /// Whether item `name` holds exactly `bytes` (compared in constant time); false when it does not exist.
    /// Another value there is `invalidValue`: an adoption never replaces a vault item.
    private func holds(_ bytes: SecretBytes, at name: String, _ operation: String) throws(VaultError) -> Bool {
        let same: Bool?
        do {
            same = try read(name, "reading item '\(name)'") { _, payload in
                bytes.withUnsafeBytes { Sodium.constantTimeEqual($0, payload) }
            }
        } catch {
            throw VaultError.wrapping(error, vault: service)
        }
        guard let same else { return false }
        guard same else {
            throw VaultError(
                code: .invalidValue,
                message: "\(operation): the vault item '\(name)' exists with another value; nothing was changed "
                    + "(remove it first, or adopt under another name)")
        }
        return true
    }
}
