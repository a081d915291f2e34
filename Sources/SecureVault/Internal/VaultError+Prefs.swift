import PrefsKV

extension VaultError {
    /// The one place a storage-engine error becomes the vault's error.
    init(_ error: PrefsError, vault service: String) {
        let code: Code
        switch error.code {
        case .invalidKey: code = .invalidKey
        case .valueTooLarge: code = .valueTooLarge
        case .tampered: code = .tampered
        case .wrongKey: code = .wrongKey
        case .encrypted, .notEncrypted, .corrupted, .notAStore, .typeMismatch, .invalidInput:
            code = .corrupted
        case .unsupportedVersion: code = .unsupportedVersion
        case .notFound: code = .notFound
        case .diskFull: code = .diskFull
        case .permissionDenied: code = .permissionDenied
        case .busy: code = .locked
        default: code = .io
        }
        let cause: Cause? =
            switch error.cause {
            case .errno(let value)?: .errno(value)
            case .error(let underlying)?: .error(underlying)
            case nil: nil
            }
        self.init(
            code: code, message: "vault '\(service)' (\(error.path ?? "no file")): \(error.message)",
            path: error.path, cause: cause)
    }

    /// Wraps whatever a PrefsKV call threw.
    static func wrapping(_ error: any Error, vault service: String) -> VaultError {
        switch error {
        case let error as VaultError: return error
        case let error as PrefsError: return VaultError(error, vault: service)
        default: return VaultError(code: .io, message: "vault '\(service)': \(error)", cause: .error(error))
        }
    }
}
