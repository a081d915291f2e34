import Dispatch
public import FoundationEssentials

/// The blocking work of a vault (D-Bus calls to the Secret Service, fsync) runs here, never on the Swift
/// concurrency cooperative pool, whose few threads must not wait on a keyring.
let blockingQueue = DispatchQueue(label: "SecureVault.blocking", qos: .userInitiated, attributes: .concurrent)

extension Vault {
    /// Runs `body` on a dedicated queue and resumes the caller with its outcome.
    func offloaded<R: Sendable>(_ body: @escaping @Sendable () throws -> R) async throws -> R {
        try await withCheckedThrowingContinuation { continuation in
            blockingQueue.async {
                continuation.resume(with: Result { try body() })
            }
        }
    }

    /// Async twin of ``set(_:for:allowEmpty:)-(String,_,_)``: the blocking work runs off the cooperative thread
    /// pool.
    ///
    /// ```swift
    /// try await vault.set("s3cr3t", for: "apiToken")
    /// ```
    public func set(_ value: String, for key: String, allowEmpty: Bool = false) async throws {
        try await offloaded { try self.set(value, for: key, allowEmpty: allowEmpty) }
    }

    /// Async twin of ``set(_:for:allowEmpty:)-(Data,_,_)``.
    public func set(_ value: Data, for key: String, allowEmpty: Bool = false) async throws {
        try await offloaded { try self.set(value, for: key, allowEmpty: allowEmpty) }
    }

    /// Async twin of ``set(_:for:allowEmpty:)-(SecretBytes,_,_)``.
    public func set(_ value: SecretBytes, for key: String, allowEmpty: Bool = false) async throws {
        try await offloaded { try self.set(value, for: key, allowEmpty: allowEmpty) }
    }

    /// Async twin of `adopt(matching:as:deletingSource:dryRun:)`: the keyring calls run off the cooperative pool.
    ///
    /// ```swift
    /// try await vault.adopt(matching: ["service": "com.example.app", "account": "refresh"], as: "refreshToken")
    /// ```
    @discardableResult
    public func adopt(
        matching attributes: [String: String], as name: String, deletingSource: Bool = false, dryRun: Bool = false
    ) async throws -> VaultAdoptReport {
        try await offloaded {
            try self.adopt(matching: attributes, as: name, deletingSource: deletingSource, dryRun: dryRun)
        }
    }

    /// Async twin of ``string(for:)``.
    ///
    /// ```swift
    /// let token = try await vault.string(for: "apiToken")
    /// ```
    public func string(for key: String) async throws -> String? {
        try await offloaded { try self.string(for: key) }
    }

    /// Async twin of ``data(for:)``.
    public func data(for key: String) async throws -> Data? {
        try await offloaded { try self.data(for: key) }
    }

    /// Async twin of ``secret(for:)``.
    public func secret(for key: String) async throws -> SecretBytes? {
        try await offloaded { try self.secret(for: key) }
    }

    /// Async twin of ``remove(_:)``.
    public func remove(_ key: String) async throws {
        try await offloaded { try self.remove(key) }
    }

    /// Async twin of ``contains(_:)``.
    public func contains(_ key: String) async throws -> Bool {
        try await offloaded { try self.contains(key) }
    }

    /// Async twin of ``allKeys()``.
    public func allKeys() async throws -> [String] {
        try await offloaded { try self.allKeys() }
    }

    /// Async twin of ``removeAll()``.
    public func removeAll() async throws {
        try await offloaded { try self.removeAll() }
    }

    /// Async twin of ``setSessionToken(_:expiresAt:for:allowEmpty:)``.
    ///
    /// ```swift
    /// try await vault.setSessionToken(token, expiresAt: expiry)
    /// ```
    public func setSessionToken(
        _ token: String, expiresAt: Date?, for key: String = Vault.defaultSessionTokenKey, allowEmpty: Bool = false
    )
        async throws
    {
        try await offloaded { try self.setSessionToken(token, expiresAt: expiresAt, for: key, allowEmpty: allowEmpty) }
    }

    /// Async twin of `sessionToken(for:)`.
    ///
    /// ```swift
    /// switch await vault.sessionToken() { ... }
    /// ```
    public func sessionToken(for key: String = Vault.defaultSessionTokenKey) async -> SessionTokenState {
        (try? await offloaded { self.sessionToken(for: key) }) ?? .unavailable(.storageFailure)
    }

    /// Async twin of `status()`.
    public func status() async -> VaultStatus {
        // `status()` cannot throw; the fallback is unreachable.
        (try? await offloaded { self.status() })!
    }

    /// Async twin of `wipe()`.
    @discardableResult
    public func wipe() async throws -> VaultWipeReport {
        try await offloaded { try self.wipe() }
    }

    /// Async twin of `rotateKey()`.
    @discardableResult
    public func rotateKey() async throws -> VaultRotationReport {
        try await offloaded { try self.rotateKey() }
    }
}
