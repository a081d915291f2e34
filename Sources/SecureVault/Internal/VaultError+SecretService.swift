extension VaultError {
    /// The one place a Secret Service failure becomes the public error. `operation` names what was being done
    /// ("reading the master key of vault 'app'"), so the message says what failed and why.
    package init(_ failure: SecretServiceFailure, operation: String) {
        let cause: Cause? = failure.domain.map {
            .secretService(domain: $0, code: failure.code ?? 0, message: failure.message)
        }
        switch failure.kind {
        case .locked:
            // An unlock prompt that was asked for (interactive mode) and dismissed, or that could not be shown.
            let prompt = failure.message.contains("dismissed") ? " (its unlock prompt was dismissed or could not be shown)" : ""
            self.init(
                code: .locked,
                message: "\(operation): the keyring is locked\(prompt); unlock it (log in, or open your keyring app) "
                    + "and retry",
                cause: cause)
        case .notApproved:
            let provider = failure.provider ?? SecretServiceProvider(program: "secret-service", pid: 0)
            self.init(
                code: .accessNotApproved,
                message: "\(operation): the keyring is unlocked, but \(failure.message): "
                    + provider.approvalHint,
                cause: cause)
        case .noSessionBus:
            self.init(
                code: .unavailable,
                message: "\(operation): no D-Bus session bus is reachable, so no Secret Service can be asked",
                cause: cause)
        case .noSecretService:
            // The proxy's bare ServiceUnknown: the name is hidden from the sandbox (no talk-name). With the
            // talk-name and no daemon, the bus names org.freedesktop.secrets as anywhere else.
            if let sandbox = FlatpakSandbox.current, !failure.message.contains("org.freedesktop.secrets") {
                self.init(
                    code: .unavailable,
                    message: "\(operation): the Secret Service is not reachable from the Flatpak sandbox of "
                        + "\(sandbox.appID) (its manifest has no --talk-name=org.freedesktop.secrets, a hole that would "
                        + "give the app every secret of the user): use the Secret portal instead, the default key "
                        + "store inside a sandbox (KeyStore.secretPortal; vaultctl --key-store secret-portal)",
                    cause: cause)
            } else {
                self.init(
                    code: .unavailable,
                    message: "\(operation): no Secret Service (gnome-keyring, KeePassXC...) is running on the session "
                        + "bus", cause: cause)
            }
        case .notBuiltIn, .notLoaded:
            self.init(code: .unavailable, message: "\(operation): \(failure.message)")
        case .noDefaultCollection:
            self.init(
                code: .unavailable,
                message: "\(operation): the Secret Service has no default keyring; create or unlock one first",
                cause: cause)
        case .timeout:
            self.init(code: .timeout, message: "\(operation): \(failure.message)", cause: cause)
        case .other:
            self.init(code: .io, message: "\(operation): the Secret Service failed: \(failure.message)", cause: cause)
        }
    }

    /// A Secret portal failure (SecretPortal, LibSecret+Portal.swift): its code and words, and the GError or errno
    /// behind it.
    init(_ failure: SecretPortal.PortalFailure, operation: String) {
        let cause: Cause?
        if let gError = failure.gError {
            cause = .secretService(domain: gError.domain, code: gError.code, message: gError.message)
        } else {
            cause = failure.errno.map { .errno($0.rawValue) }
        }
        self.init(code: failure.code, message: "\(operation): \(failure.message)", cause: cause)
    }
}
