import SystemLayer

/// The key stores rooted in one secret at a fixed path that a deployment names: a key file
/// (``KeyStore/keyFile(_:)``, a container's mounted secret) or a systemd credential
/// (``KeyStore/systemdCredential(name:file:)``, sealed by `systemd-creds` with the host key or a TPM2); or in the
/// Secret portal's secret of a Flatpak app (``KeyStore/secretPortal``), of a length the portal chooses, from which
/// the 32-byte root key is derived with HKDF-SHA256 (salt "securevault secret portal 1", info the app id).
///
/// The root secret is never changed or deleted by a vault: a mounted secret is read-only, a unit file names one
/// credential path, and several vaults may share one. Each master key is random and is kept wrapped under the
/// root secret (XChaCha20-Poly1305) in `<service>.<key id>.vaultkey` beside the vault file, so that rotation
/// (a new wrapped key, the old one deleted), wipe (the wrapped key deleted: a copy of the vault file made
/// before cannot be opened afterwards, root secret or not) and the intent journal work by key id as with a
/// keyring.
///
/// Wrapped key file layout (73 bytes): version 1 (1 byte), then the sealed 32-byte master key (nonce 24,
/// ciphertext 32, tag 16). The associated data binds the service, the key store kind, the vault id, the key id
/// and the identity's key-store format (`KeyIdentity.keyStoreFormat`): a wrapped key renamed under another key id
/// or copied to another vault does not open.
struct FileKeys: Sendable {
    enum Root: Sendable {
        case keyFile(path: String)
        case systemdCredential(name: String, file: String)
        case secretPortal
    }

    let root: Root
    let kind: KeyIdentity.Kind
    let service: String
    let directory: String
    let deadline: Duration

    static let wrappedLength = 1 + Sodium.AEAD.overhead + MasterKeys.keyLength
    static let rootLength = 32

    private var operation: String { "the master key of vault '\(service)'" }

    /// Where the root secret is, for messages.
    var rootDescription: String {
        switch root {
        case .keyFile(let path): return "the key file \(path)"
        case .systemdCredential(let name, let file): return "the systemd credential '\(name)' (\(file))"
        case .secretPortal: return "the Secret portal's secret of app \(FlatpakSandbox.current?.appID ?? "(none)")"
        }
    }

    func wrappedPath(_ identity: KeyIdentity) -> String {
        Sys.joinPath(directory, "\(service).\(identity.keyIDHex).vaultkey")
    }

    // MARK: Master keys

    /// The master key for `identity`, nil when its wrapped key file is gone (deleted by a wipe or a rotation).
    func load(_ identity: KeyIdentity) throws(VaultError) -> SecretBytes? {
        let path = wrappedPath(identity)
        guard let wrapped = try readOwnFile(path, what: "wrapped key file", limit: Self.wrappedLength + 1) else {
            return nil
        }
        guard wrapped.count == Self.wrappedLength, wrapped[0] == 1 else {
            throw VaultError(
                code: .corrupted,
                message: "reading \(operation): the wrapped key file \(path) holds \(wrapped.count) bytes, not a "
                    + "version-1 wrapped key of \(Self.wrappedLength); it was left untouched", path: path)
        }
        guard let rootKey = try rootKey() else { throw missingRoot() }
        do {
            return try Sodium.AEAD.open(
                Array(wrapped[1...]), associatedData: associatedData(identity), key: rootKey)
        } catch {
            throw VaultError(
                code: .wrongKey,
                message: "reading \(operation): \(rootDescription) does not open the wrapped key \(path): not the "
                    + "root secret the vault was created with (or the wrapped key was copied from another vault or "
                    + "altered); nothing was changed", path: path)
        }
    }

    /// Creates a random master key for `identity` and keeps it wrapped. A systemd credential that does not exist
    /// yet is created (sealed by systemd-creds); a key file never is (``KeyStore/createKeyFile(at:)``).
    func create(_ identity: KeyIdentity) throws(VaultError) -> SecretBytes {
        let rootKey: SecretBytes
        if let found = try self.rootKey() {
            rootKey = found
        } else if case .systemdCredential(let name, let file) = root {
            rootKey = try createCredential(name: name, file: file)
        } else {
            throw missingRoot()
        }
        let key = SecretBytes.random(count: MasterKeys.keyLength)
        var wrapped = [UInt8](repeating: 1, count: Self.wrappedLength)
        let associatedData = associatedData(identity)
        wrapped.withUnsafeMutableBytes { out in
            key.withUnsafeBytes { plain in
                associatedData.withUnsafeBytes { ad in
                    Sodium.AEAD.seal(plain, associatedData: ad, key: rootKey, into: UnsafeMutableRawBufferPointer(rebasing: out[1...]))
                }
            }
        }
        let path = wrappedPath(identity)
        if case .failure(let error) = Sys.writeFileDurably(path, wrapped, directory: directory) {
            throw VaultError.syscall(error, "saving \(operation): cannot write \(path)", path: path)
        }
        return key
    }

    /// Deletes the wrapped key of `identity`; true when there was one. It is overwritten with random bytes and
    /// flushed first (a copy-on-write file system or a snapshot may still hold the old blocks). The root secret
    /// stays.
    func delete(_ identity: KeyIdentity) throws(VaultError) -> Bool {
        let path = wrappedPath(identity)
        if case .success(let fd) = Sys.open(path, .readWrite) {
            if case .success(let info) = Sys.fstat(fd), info.isRegular, info.owner == Sys.userID,
                info.size == Self.wrappedLength
            {
                _ = Sodium.randomBytes(count: info.size).withUnsafeBytes { Sys.pwrite(fd, $0, at: 0) }
                _ = Sys.fdatasync(fd)
            }
            Sys.close(fd)
        }
        switch Sys.unlink(path) {
        case .success:
            Sys.syncDirectory(directory)
            return true
        case .failure(let error) where error == .noEntry:
            return false
        case .failure(let error):
            throw VaultError.syscall(error, "deleting \(operation): cannot remove \(path)", path: path)
        }
    }

    /// Removes every wrapped key of this service left in the directory (a wipe: an open killed between writing
    /// a new vault's wrapped key and its file leaves one that no journal names).
    func removeStrays() {
        guard case .success(let names) = Sys.directoryEntries(directory) else { return }
        let prefix = service + "."
        var removed = false
        for name in names where name.hasPrefix(prefix) && name.hasSuffix(".vaultkey")
            && name.utf8.count == prefix.utf8.count + 16 + ".vaultkey".utf8.count
            && name.utf8.dropFirst(prefix.utf8.count).prefix(16).allSatisfy({ (48...57).contains($0) || (97...102).contains($0) })
        {
            if case .success = Sys.unlink(Sys.joinPath(directory, name)) { removed = true }
        }
        if removed { Sys.syncDirectory(directory) }
    }

    private func associatedData(_ identity: KeyIdentity) -> [UInt8] {
        Array("securevault wrapped key 1\0".utf8) + [kind.rawValue, identity.keyStoreFormat] + identity.vaultID
            + identity.keyID + Array(service.utf8)
    }

    private func missingRoot() -> VaultError {
        switch root {
        case .keyFile(let path):
            // A hint that runs as printed, and tells a new vault (make the key) from an existing one (its key is
            // gone: put it back, or remove the vault).
            let options = "--dir \(Sys.shellQuoted(directory)) vault %@ --key-store key-file:\(Sys.shellQuoted(path)) "
                + "--service \(Sys.shellQuoted(service))"
            if Sys.exists(Sys.joinPath(directory, service + ".prefs")) {
                return VaultError(
                    code: .keyMissing,
                    message: "vault '\(service)' exists but its key file \(path) is gone: put the key file back there "
                        + "(from its backup, or mount the secret), or remove the vault and its items with `vaultctl "
                        + options.replacing("%@", with: "wipe") + " --yes`; a new key file would not open it",
                    path: path)
            }
            return VaultError(
                code: .keyMissing,
                message: "vault '\(service)': there is no key file at \(path); a key file is never created silently: "
                    + "create one with `vaultctl " + options.replacing("%@", with: "init") + "` (or mount the secret "
                    + "there)", path: path)
        case .systemdCredential(let name, let file):
            return VaultError(
                code: .keyMissing,
                message: "vault '\(service)': the systemd credential '\(name)' is neither in $CREDENTIALS_DIRECTORY nor at "
                    + "\(file)" + (Sys.userID == 0 ? "" : rootOnlyHint(name, file)), path: file)
        case .secretPortal:
            // The portal makes the app's secret on its first request: it is never missing.
            return VaultError(code: .keyMissing, message: "vault '\(service)': the Secret portal gave no secret")
        }
    }

    /// For a user whose systemd-creds cannot use the host key (root's): the commands that make the credential as
    /// root and hand it to a service, as printed.
    private func rootOnlyHint(_ name: String, _ file: String) -> String {
        let sealed = Sys.shellQuoted(file)
        let inner = "head -c 32 /dev/urandom | systemd-creds encrypt --name=\(Sys.shellQuoted(name)) - \(sealed) && "
            + "chown \(Sys.userID) \(sealed)"
        return "; the host key is root's: create the credential as root with `sudo sh -c \(Sys.shellQuoted(inner))`, "
            + "then give it to the service with LoadCredentialEncrypted=\(name):\(file) (the vault reads it from "
            + "$CREDENTIALS_DIRECTORY)"
    }

    // MARK: The root secret

    /// The root secret, nil when it does not exist.
    func rootKey() throws(VaultError) -> SecretBytes? {
        switch root {
        case .keyFile(let path):
            return try readKeyFile(path)
        case .systemdCredential(let name, let file):
            // A service started with LoadCredentialEncrypted= gets it decrypted by systemd: no child process.
            if let directory = Sys.environment("CREDENTIALS_DIRECTORY"),
                let key = try readKeyFile(Sys.joinPath(directory, name), trust: .systemdCredential)
            {
                return key
            }
            guard let sealed = try readOwnFile(file, what: "systemd credential file", limit: 64 * 1024) else {
                return nil
            }
            return try decryptCredential(sealed, name: name, file: file)
        case .secretPortal:
            // Refused on the host (before the portal is called); the app id binds the derived key to the app.
            let secret = try SecretPortal.retrieveSecret(operation: "reading \(operation)", deadline: deadline)
            return Self.portalRootKey(from: secret, appID: FlatpakSandbox.current?.appID ?? "")
        }
    }

    /// The root key derived from the Secret portal's secret of `appID`.
    static func portalRootKey(from secret: SecretPortal.Secret, appID: String) -> SecretBytes {
        secret.withUnsafeBytes { secret in
            Sodium.hkdfSHA256(secret, salt: Array("securevault secret portal 1".utf8), info: Array(appID.utf8))
        }
    }

    /// Who may have made a root secret's file.
    enum Trust {
        /// A key file: a regular file (a symbolic link is followed: Kubernetes mounts secrets through links) of this
        /// user that others can neither read nor write (the ssh rule).
        case keyFile
        /// `$CREDENTIALS_DIRECTORY/<name>`, as systemd makes it: a regular file (a symbolic link is refused, never
        /// followed) of this user or root (the service's user, or root when systemd gives it through a group) that
        /// group and others cannot write (mode 0400 or 0440, in a read-only ramfs).
        case systemdCredential
    }

    /// Checks the key file as a read of it would (a regular file of this user that others can neither read nor
    /// write), without reading the key: `Vault.status()`. A missing file is no permission problem.
    func checkKeyFileTrust() throws(VaultError) {
        guard case .keyFile(let path) = root else { return }
        if let (fd, _) = try openChecked(path, what: "key file", followingLinks: true, checkingOwner: true) {
            Sys.close(fd)
        }
    }

    /// Reads a 32-byte key file, a regular file trusted as `trust` says.
    private func readKeyFile(_ path: String, trust: Trust = .keyFile) throws(VaultError) -> SecretBytes? {
        let what = trust == .keyFile ? "key file" : "systemd credential file"
        guard let (fd, info) = try openChecked(path, what: what, followingLinks: trust == .keyFile, checkingOwner: trust == .keyFile)
        else { return nil }
        defer { Sys.close(fd) }
        if trust == .systemdCredential { try Self.requireSystemdMade(info, path) }
        guard info.size == Self.rootLength else {
            throw VaultError(
                code: .wrongKey,
                message: "reading \(operation): \(path) holds \(info.size) bytes, not a \(Self.rootLength)-byte key "
                    + "(a key file is 32 random bytes: `head -c 32 /dev/urandom > FILE`, for a new vault); it is not "
                    + "used", path: path)
        }
        var failure: Errno?
        var short = false
        let key = SecretBytes(count: Self.rootLength) { buffer in
            switch Sys.pread(fd, into: buffer, at: 0) {
            case .success(let count): short = count != Self.rootLength
            case .failure(let error): failure = error
            }
        }
        if let failure { throw VaultError.syscall(failure, "reading \(operation): cannot read \(path)", path: path) }
        guard !short else {
            throw VaultError(
                code: .wrongKey, message: "reading \(operation): \(path) changed size while it was read; not used",
                path: path)
        }
        return key
    }

    /// Throws `permissionDenied` unless `info` (the `fstat` of `path`, a credential in `$CREDENTIALS_DIRECTORY`)
    /// shows a file of this user or root that group and others cannot write, as systemd makes it.
    private static func requireSystemdMade(_ info: FileStatus, _ path: String) throws(VaultError) {
        try VaultError.requireTrusted(
            info, path, what: "the systemd credential file", rootMayOwn: true, forbiddenMode: 0o022,
            modeProblem: "group or others may write it")
    }

    /// A small file of this vault's (a wrapped key, a credential file), nil when it does not exist. A symbolic
    /// link, a file of another user, or one others may read or write is refused before it is read.
    private func readOwnFile(_ path: String, what: String, limit: Int) throws(VaultError) -> [UInt8]? {
        guard let (fd, _) = try openChecked(path, what: what, followingLinks: false, checkingOwner: true) else {
            return nil
        }
        defer { Sys.close(fd) }
        guard let bytes = Sys.readSmallFile(fd, limit: limit) else {
            throw VaultError(code: .io, message: "reading \(operation): cannot read the \(what) \(path)", path: path)
        }
        return bytes
    }

    /// Opens `path` without blocking (a FIFO planted there opens at once) and checks, on the descriptor, that it is
    /// a regular file and (when `checkingOwner`) this user's and closed to others. Nil when it does not exist;
    /// the caller closes the descriptor.
    private func openChecked(_ path: String, what: String, followingLinks: Bool, checkingOwner: Bool)
        throws(VaultError) -> (Int32, FileStatus)?
    {
        let fd: Int32
        switch followingLinks ? Sys.openFollowingLinks(path, nonBlocking: true) : Sys.open(path, .readOnlyNonBlocking) {
        case .success(let opened): fd = opened
        case .failure(let error) where error == .noEntry: return nil
        case .failure(let error):
            throw VaultError.syscall(error, "reading \(operation): cannot open the \(what) \(path)", path: path)
        }
        do throws(VaultError) {
            let info: FileStatus
            switch Sys.fstat(fd) {
            case .success(let found): info = found
            case .failure(let error):
                throw VaultError.syscall(error, "reading \(operation): cannot inspect the \(what) \(path)", path: path)
            }
            guard info.isRegular else {
                throw VaultError(
                    code: .permissionDenied,
                    message: "reading \(operation): the \(what) \(path) is not a regular file", path: path)
            }
            if checkingOwner { try VaultError.requirePrivate(info, path, what: "the \(what)") }
            return (fd, info)
        } catch {
            Sys.close(fd)
            throw error
        }
    }

    /// ``KeyStore/createKeyFile(at:)``: published whole (a crash never leaves a short key file), never over
    /// an existing file.
    static func createKeyFile(at path: String) throws(VaultError) -> Bool {
        let key = SecretBytes.random(count: rootLength)
        switch key.withUnsafeBytes({ Sys.publishNew(path, $0) }) {
        case .success: return true
        case .failure(let error) where error == .exists: return false
        case .failure(let error): throw VaultError.syscall(error, "cannot create the key file \(path)", path: path)
        }
    }

    // MARK: systemd-creds

    static let systemdCreds = ["/usr/bin/systemd-creds", "/bin/systemd-creds"]

    private func decryptCredential(_ sealed: [UInt8], name: String, file: String) throws(VaultError) -> SecretBytes {
        guard sealed.count <= 4096 else {
            throw VaultError(
                code: .corrupted, message: "reading \(operation): \(file) is \(sealed.count) bytes, too large for a "
                    + "sealed 32-byte credential", path: file)
        }
        var outcome = try sealed.withUnsafeBytes {
            runCreds(["decrypt", "--name=\(name)", "-", "-"], input: $0, verb: "reading", file: file)
        }.get()
        defer { outcome.output.withUnsafeMutableBytes { Sys.zero($0) } }
        guard outcome.status == 0 else {
            let said = Self.firstLine(outcome.errorOutput)
            if said.contains("Permission denied") {
                throw VaultError(
                    code: .unavailable,
                    message: "reading \(operation): systemd-creds cannot decrypt \(file) as uid \(Sys.userID): \(said) "
                        + "(the host key is root's); run the service with LoadCredentialEncrypted=\(name):\(file), "
                        + "which decrypts it into $CREDENTIALS_DIRECTORY, or as root", path: file)
            }
            throw VaultError(
                code: .wrongKey,
                message: "reading \(operation): systemd-creds refused \(file): \(said) (sealed for another name, "
                    + "another machine's host key or TPM, or altered); nothing was changed", path: file)
        }
        guard outcome.output.count == Self.rootLength else {
            throw VaultError(
                code: .wrongKey,
                message: "reading \(operation): the credential in \(file) holds \(outcome.output.count) bytes, not a "
                    + "\(Self.rootLength)-byte key; it is not used", path: file)
        }
        return SecretBytes(count: Self.rootLength) { $0.copyBytes(from: outcome.output) }
    }

    /// Seals a new random root key as credential `name` into `file` (0600), and returns it.
    private func createCredential(name: String, file: String) throws(VaultError) -> SecretBytes {
        let key = SecretBytes.random(count: Self.rootLength)
        let outcome = try key.withUnsafeBytes {
            runCreds(["encrypt", "--name=\(name)", "-", "-"], input: $0, verb: "saving", file: file)
        }.get()
        guard outcome.status == 0, !outcome.output.isEmpty else {
            let said = Self.firstLine(outcome.errorOutput)
            throw VaultError(
                code: said.contains("Permission denied") ? .unavailable : .io,
                message: "saving \(operation): systemd-creds could not seal a new credential '\(name)' as uid "
                    + "\(Sys.userID): \(said)" + (said.contains("Permission denied") ? rootOnlyHint(name, file) : ""),
                path: file)
        }
        // Published whole and never over another: vaults sharing the credential may create it at once, and the
        // one that loses uses the winner's.
        switch outcome.output.withUnsafeBytes({ Sys.publishNew(file, $0) }) {
        case .success:
            return key
        case .failure(let error) where error == .exists:
            guard let winner = try rootKey() else { throw missingRoot() }
            return winner
        case .failure(let error):
            throw VaultError.syscall(error, "saving \(operation): cannot write the credential file \(file)", path: file)
        }
    }

    private func runCreds(_ arguments: [String], input: UnsafeRawBufferPointer, verb: String, file: String)
        -> Result<Sys.ChildOutcome, VaultError>
    {
        switch Sys.runChild(Self.systemdCreds, arguments, input: input, outputLimit: 64 * 1024, deadline: deadline) {
        case .success(let outcome):
            return .success(outcome)
        case .failure(.notInstalled):
            return .failure(VaultError(
                code: .unavailable,
                message: "\(verb) \(operation): systemd-creds is not installed (Debian and Ubuntu: apt-get install "
                    + "systemd; it needs systemd 250 or later)", path: file))
        case .failure(.timedOut):
            return .failure(VaultError(
                code: .timeout,
                message: "\(verb) \(operation): systemd-creds did not answer within \(deadline) (a TPM2 that does "
                    + "not respond?); it was stopped", path: file))
        case .failure(.outputTooLarge):
            return .failure(VaultError(
                code: .io, message: "\(verb) \(operation): systemd-creds wrote more than expected; not used",
                path: file))
        case .failure(.statusUnknown):
            return .failure(VaultError(
                code: .io, message: "\(verb) \(operation): the exit status of systemd-creds could not be learnt "
                    + "(is SIGCHLD ignored in this process?); not used", path: file))
        case .failure(.notStarted(let error)):
            return .failure(VaultError(
                code: .io, message: "\(verb) \(operation): systemd-creds could not be started: \(error.text)",
                path: file, cause: .errno(error.rawValue)))
        }
    }

    /// Whether `systemd-creds` can seal and unseal here, as this user, and with what: for doctor. nil when it
    /// works, else why not.
    static func probe(deadline: Duration) -> (problem: String?, detail: String) {
        let probe = [UInt8](repeating: 7, count: 1)
        let sealed: Sys.ChildOutcome
        switch probe.withUnsafeBytes({
            Sys.runChild(systemdCreds, ["encrypt", "--name=securevault-doctor", "-", "-"], input: $0, outputLimit: 8192, deadline: deadline)
        }) {
        case .success(let outcome): sealed = outcome
        case .failure(.notInstalled): return ("systemd-creds is not installed (package systemd, 250 or later)", "")
        case .failure(.timedOut): return ("systemd-creds did not answer within \(deadline)", "")
        case .failure: return ("systemd-creds could not be run", "")
        }
        guard sealed.status == 0 else {
            let said = firstLine(sealed.errorOutput)
            return ("systemd-creds cannot seal as uid \(Sys.userID): \(said)"
                + (said.contains("Permission denied") ? " (the host key is root's; a service can still be given a credential by systemd: LoadCredentialEncrypted=)" : ""), "")
        }
        let opened = sealed.output.withUnsafeBytes {
            Sys.runChild(systemdCreds, ["decrypt", "--name=securevault-doctor", "-", "-"], input: $0, outputLimit: 64, deadline: deadline)
        }
        guard case .success(let outcome) = opened, outcome.status == 0, outcome.output == probe else {
            return ("systemd-creds sealed a probe but could not unseal it", "")
        }
        var tpm = "no TPM2"
        if case .success(let answer) = [UInt8]().withUnsafeBytes({
            Sys.runChild(systemdCreds, ["has-tpm2"], input: $0, outputLimit: 4096, deadline: deadline)
        }) {
            let first = firstLine(answer.output)
            tpm = answer.status == 0 ? "TPM2 present" : "no usable TPM2 (has-tpm2: \(first))"
        }
        return (nil, "\(tpm); sealed with the host key\(tpm == "TPM2 present" ? " and the TPM2" : ""): survives reboots, "
            + "readable by root (or by a service through LoadCredentialEncrypted=)")
    }

    private static func firstLine(_ bytes: [UInt8]) -> String {
        let text = String(decoding: bytes, as: UTF8.self)
        let lines = text.split(separator: "\n").filter { !$0.contains("not located on encrypted media") }
        return lines.first.map(String.init) ?? "no message"
    }
}
