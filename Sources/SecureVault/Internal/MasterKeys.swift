/// Loads, creates and deletes master keys in the configured key store, and answers "may I use it now?".
///
/// Every failure is a `VaultError` naming the vault; a key that is simply not there is `nil`.
struct MasterKeys: Sendable {
    let store: KeyStore
    let service: String
    let deadline: Duration

    /// The length of every master key: 256 bits.
    static let keyLength = 32

    private var operation: String { "the master key of vault '\(service)'" }

    /// The key for `identity` (read from the header of `file`), or nil when the key store does not have it.
    ///
    /// Key material is checked here, where it enters: anything but exactly one key of ``keyLength`` bytes in the
    /// place the vault keeps it (another app of the user can store an item with the vault's attributes) is
    /// ``VaultError/Code/wrongKey``, never handed on to the crypto, whose length checks trap.
    func load(_ identity: KeyIdentity, file: String) throws(VaultError) -> SecretBytes? {
        let key: SecretBytes
        switch store.storage {
        case .secretService:
            let found: LibSecret.LookupResult
            do {
                found = try LibSecret.lookup(
                    schema: .vaultMasterKey, attributes: attributes(identity), deadline: deadline)
            } catch {
                throw VaultError(error, operation: "reading \(operation)")
            }
            switch found {
            case .absent:
                return nil
            case .found(let secret):
                key = secret.bytes
            case .several(let paths):
                throw VaultError(
                    code: .wrongKey,
                    message: "reading \(operation): \(paths.count) keyring items claim to be it "
                        + "(\(paths.joined(separator: ", "))): another app may have stored one, so none is used; "
                        + "remove the ones that are not the vault's (secret-tool search --all vault "
                        + "\(identity.vaultIDHex))")
            case .elsewhere(let path, let expected):
                throw VaultError(
                    code: .wrongKey,
                    message: "reading \(operation): the only keyring item that claims to be it, \(path), is not in "
                        + "the default collection (\(expected ?? "none")) where the vault keeps its key: another app "
                        + "may have stored it, so it is not used")
            }
        case .passphrase(let passphrase, _, let maximum):
            try checkCost(of: identity, file: file, maximum: maximum)
            key = try derive(passphrase, identity)
        case .inMemory(let keys):
            guard let found = keys.load(name(identity)) else { return nil }
            key = found
        }
        guard key.count == Self.keyLength else {
            throw VaultError(
                code: .wrongKey,
                message: "reading \(operation): the \(store.kind.name) key store returned \(key.count) bytes, "
                    + "not a \(Self.keyLength)-byte key (another app may have stored it); it is not used")
        }
        return key
    }

    /// Creates a key for `identity` (filling in a passphrase's salt and cost) and saves it.
    func create(_ identity: inout KeyIdentity) throws(VaultError) -> SecretBytes {
        switch store.storage {
        case .secretService:
            let key = SecretBytes.random(count: Self.keyLength)
            do {
                try LibSecret.store(
                    schema: .vaultMasterKey, attributes: attributes(identity),
                    label: "SecureVault master key for '\(service)'", secret: key, deadline: deadline)
            } catch {
                throw VaultError(error, operation: "saving \(operation)")
            }
            return key
        case .passphrase(let passphrase, let cost, _):
            identity.salt = Sodium.randomBytes(count: Sodium.passwordSaltBytes)
            identity.argonPasses = cost.passes
            identity.argonMemoryKiB = cost.memoryKiB
            return try derive(passphrase, identity)
        case .inMemory(let keys):
            let key = SecretBytes.random(count: Self.keyLength)
            keys.save(key, as: name(identity))
            return key
        }
    }

    /// Deletes the key for `identity`; deleting an absent key succeeds.
    func delete(_ identity: KeyIdentity) throws(VaultError) {
        switch store.storage {
        case .secretService:
            do {
                try LibSecret.clear(schema: .vaultMasterKey, attributes: attributes(identity), deadline: deadline)
            } catch {
                throw VaultError(error, operation: "deleting \(operation)")
            }
        case .passphrase:
            break  // nothing is stored: the salt goes with the file
        case .inMemory(let keys):
            keys.delete(name(identity))
        }
    }

    /// For `whenUnlocked`: throws `locked` when the keyring holding the key is locked now, even if the key is
    /// already in memory.
    func checkUnlocked() throws(VaultError) {
        guard case .secretService = store.storage else { return }
        let state: LibSecret.CollectionState
        do {
            state = try LibSecret.collectionState(deadline: deadline)
        } catch {
            throw VaultError(error, operation: "checking the keyring of vault '\(service)'")
        }
        switch state {
        case .unlocked: return
        case .locked:
            throw VaultError(SecretServiceFailure(.locked, message: "locked"), operation: "using vault '\(service)'")
        case .missing:
            throw VaultError(
                SecretServiceFailure(.noDefaultCollection, message: "no default collection"),
                operation: "using vault '\(service)'")
        }
    }

    private func attributes(_ identity: KeyIdentity) -> [String: String] {
        ["vault": identity.vaultIDHex, "key": identity.keyIDHex, "format": "1"]
    }

    private func name(_ identity: KeyIdentity) -> String {
        identity.vaultIDHex + "/" + identity.keyIDHex
    }

    /// A header's Argon2id cost is chosen by whoever wrote the file: refuse one above `maximum` (passes or
    /// memory) or below libsodium's minimum before deriving anything. No SecureVault writes such a header under
    /// this configuration, so it is `corrupted`, like any other header field that is out of range.
    private func checkCost(of identity: KeyIdentity, file: String, maximum: PassphraseCost) throws(VaultError) {
        let asked = identity.passphraseCost
        let problem: String
        if !asked.covers(.minimum) {
            problem = "less than libsodium's minimum (\(PassphraseCost.minimum.text))"
        } else if !maximum.covers(asked) {
            problem =
                "more than this key store accepts (at most \(maximum.text); a vault written at a higher cost needs "
                + "a larger maximumCost)"
        } else {
            return
        }
        throw VaultError(
            code: .corrupted,
            message: "vault '\(service)': the header of \(file) asks Argon2id for \(asked.text), \(problem); "
                + "nothing was derived and the file was left untouched", path: file)
    }

    private func derive(_ passphrase: SecretBytes, _ identity: KeyIdentity) throws(VaultError) -> SecretBytes {
        let cost = Sodium.PasswordHashCost(
            operations: UInt64(identity.argonPasses), memoryBytes: Int(identity.argonMemoryKiB) * 1024)
        do {
            return try Sodium.argon2id(password: passphrase, salt: identity.salt, cost: cost)
        } catch {
            throw VaultError(
                code: .io,
                message: "deriving \(operation) from the passphrase failed: Argon2id could not get "
                    + "\(identity.argonMemoryKiB) KiB of memory or its cost is out of range")
        }
    }
}
