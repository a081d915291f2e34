// The Secret Service and the Secret portal in a build without the package's `SecretService` trait: no D-Bus code,
// nothing that would load libsecret, GIO or GLib, and every call answers at once that this build has none
// (`notBuiltIn`, the vault's `unavailable`), naming the trait. The same declarations as LibSecret*.swift, so that the key stores'
// code is one in both builds.
#if !SecretService

extension SecretServiceFailure {
    /// What every Secret Service call answers in this build.
    static var notBuiltIn: SecretServiceFailure {
        SecretServiceFailure(
            .notBuiltIn,
            message: "this build of SecureVault has no Secret Service: the package's SecretService trait is off "
                + "(KeyStores.md, \"Building without the Secret Service\"); use a key file, a systemd credential or "
                + "the kernel keyring, or build with the trait")
    }
}

extension LibSecret {
    /// No libsecret is loaded: this build has no code that would load it.
    package static let library = "none (built without the SecretService trait)"

    package static func store(
        schema: Schema, attributes: [String: String], label: String, secret: SecretBytes,
        contentType: String = binaryContentType, collection alias: String = "default",
        prompting: Prompting = .never, deadline: Duration
    ) throws(SecretServiceFailure) {
        throw .notBuiltIn
    }

    package static func lookup(
        schema: Schema, attributes: [String: String], collection alias: String = "default",
        prompting: Prompting = .never, deadline: Duration
    ) throws(SecretServiceFailure) -> LookupResult {
        throw .notBuiltIn
    }

    package static func collectionState(
        alias: String = "default", deadline: Duration
    ) throws(SecretServiceFailure) -> CollectionState {
        throw .notBuiltIn
    }

    package static func unlock(alias: String = "default", deadline: Duration) throws(SecretServiceFailure) {
        throw .notBuiltIn
    }

    package static func lock(alias: String = "default", deadline: Duration) throws(SecretServiceFailure) -> Bool {
        throw .notBuiltIn
    }

    package static func probe(deadline: Duration) throws(SecretServiceFailure) -> ServiceProbe {
        throw .notBuiltIn
    }

    package static func provider(deadline: Duration) -> SecretServiceProvider? { nil }

    package static func clear(
        schema: Schema, attributes: [String: String], label: String? = nil, prompting: Prompting = .never,
        deletePrompt: DeletePrompt = .perform, deadline: Duration
    ) throws(SecretServiceFailure) -> ClearOutcome {
        throw .notBuiltIn
    }

    package static func items(schema: Schema, deadline: Duration) throws(SecretServiceFailure) -> [ItemInfo] {
        throw .notBuiltIn
    }

    package static func matchingItems(
        _ attributes: [String: String], deadline: Duration
    ) throws(SecretServiceFailure) -> [ItemInfo] {
        throw .notBuiltIn
    }

    package static func secret(
        ofItem path: String, prompting: Prompting = .never, deadline: Duration
    ) throws(SecretServiceFailure) -> Secret {
        throw .notBuiltIn
    }

    package static func deleteItem(
        _ path: String, attributes: [String: String], deletePrompt: DeletePrompt = .perform, deadline: Duration
    ) throws(SecretServiceFailure) -> String? {
        throw .notBuiltIn
    }
}

extension SecretPortal {
    /// The portal's secret: never made in this build (`retrieveSecret` always throws).
    struct Secret {
        let count: Int

        private init() { count = 0 }

        func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
            try body(UnsafeRawBufferPointer(start: nil, count: 0))
        }
    }

    /// Throws `unavailable` at once: this build has no portal client.
    static func retrieveSecret(operation: String, deadline: Duration) throws(VaultError) -> Secret {
        throw VaultError(
            code: .unavailable,
            message: "\(operation): this build of SecureVault has no Secret portal: the package's SecretService trait "
                + "is off (KeyStores.md, \"Building without the Secret Service\")")
    }
}
#endif
