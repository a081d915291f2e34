import ArgumentParser
import SecureVault
import SystemLayer

extension VaultGroup {
    /// `vaultctl vault status --service NAME`
    struct StatusCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "status",
            abstract: "Show a vault's key store, keyring, file, permissions and item count, without its key.",
            discussion: """
                Never prompts and never reads the master key: works with a locked keyring and with no Secret \
                Service at all. Exits 0 whenever it could look (it reports problems; `vaultctl doctor` \
                diagnoses them), 64 for an invalid service name. The vault id and key id are random ids, not \
                secrets: the master key is stored under them (`secret-tool search vault VAULT-ID`).

                JSON: {"service": "app", "keyStore": "secretService", "accessibility": "afterFirstUnlock", \
                "sessionBus": true, "secretService": true, "defaultCollection": {"path": \
                "/org/freedesktop/secrets/collection/login", "label": "Login", "locked": false}, \
                "locked": false, "kernelKeyring": null, "directory": {"path": "...", "exists": true, "mode": \
                "0700", "owner": 1000}, \
                "file": {"path": ".../app.prefs", "exists": true, "mode": "0600", "owner": 1000, \
                "size": 8192}, "itemCount": 2, "vaultId": "<32 hex digits>", "keyId": "<16 hex digits>", \
                "permissionProblem": null, "problem": null}. What could not be learnt is null; problem is \
                {"code": "...", "message": "..."}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        static var needsKey: Bool { false }

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            let report = VaultStatusReport.gather(target)
            return Answer(json: report.json, human: report.human)
        }
    }
}

/// What `vault status` found.
struct VaultStatusReport {
    /// A directory or file as `lstat` sees it.
    struct FileFacts {
        var path: String
        var exists: Bool
        var mode: Int?
        var owner: Int?
        var size: Int?

        init(path: String) {
            self.path = path
            let status = try? Sys.lstat(path).get()
            exists = status != nil
            mode = status.map { Int($0.permissions) }
            owner = status.map { Int($0.owner) }
            size = status?.size
        }

        /// `{"exists": true, "mode": "0600", "owner": 1000, "path": ...}`, plus `"size"` for a file.
        struct JSON: Encodable {
            var path: String
            var exists: Bool
            @Nullable var mode: String?
            @Nullable var owner: Int?
            /// Only for a file: there, null when it does not exist.
            var size: Nullable<Int>?
        }

        func json(withSize: Bool) -> JSON {
            JSON(
                path: path, exists: exists, mode: mode.map(octalMode), owner: owner,
                size: withSize ? Nullable(wrappedValue: size) : nil)
        }

        /// `/path (mode 0700)` or `/path (not created yet)`.
        func text(extra: String? = nil) -> String {
            guard exists, let mode else { return "\(path) (not created yet)" }
            return "\(path) (mode \(octalMode(mode))\(extra.map { ", " + $0 } ?? ""))"
        }
    }

    var status: VaultStatus
    var defaultCollection: LibSecret.CollectionInfo?
    var directory: FileFacts
    var file: FileFacts
    var identity: KeyIdentity?
    var problem: VaultError?

    static func gather(_ target: VaultTarget) -> VaultStatusReport {
        let status = target.vault.status()
        var defaultCollection: LibSecret.CollectionInfo?
        if status.secretServiceReachable == true, status.hasDefaultKeyring == true,
            let probe = try? LibSecret.probe(deadline: VaultDefaults.deadline)
        {
            defaultCollection = probe.collections.first { $0.path == probe.defaultCollectionPath }
        }
        var identity: KeyIdentity?
        var problem = status.problem
        if status.fileExists {
            do {
                identity = try target.vault.existingIdentity()
            } catch {
                problem = problem ?? error
            }
        }
        return VaultStatusReport(
            status: status, defaultCollection: defaultCollection, directory: FileFacts(path: target.directory),
            file: FileFacts(path: target.path), identity: identity, problem: problem)
    }

    /// `vault status --json`: what could not be learnt is null.
    struct JSON: Encodable {
        struct Collection: Encodable {
            var path: String
            var label: String
            var locked: Bool
        }

        struct KernelKeyring: Encodable {
            var reachable: Bool
            @Nullable var key: String?
        }

        var service: String
        var keyStore: String
        var accessibility: String
        @Nullable var sessionBus: Bool?
        @Nullable var secretService: Bool?
        @Nullable var defaultCollection: Collection?
        @Nullable var locked: Bool?
        /// For a kernel keyring key store: `{"reachable": true, "key": "present"}` (key null without a file).
        @Nullable var kernelKeyring: KernelKeyring?
        var directory: FileFacts.JSON
        var file: FileFacts.JSON
        @Nullable var itemCount: Int?
        @Nullable var vaultId: String?
        @Nullable var keyId: String?
        @Nullable var permissionProblem: String?
        @Nullable var problem: ErrorReport.Body?
    }

    var json: JSON {
        JSON(
            service: status.service, keyStore: status.keyStore, accessibility: status.accessibility,
            sessionBus: status.sessionBusReachable, secretService: status.secretServiceReachable,
            defaultCollection: defaultCollection.map {
                JSON.Collection(path: $0.path, label: $0.label, locked: $0.locked)
            },
            locked: status.keyringLocked,
            kernelKeyring: status.kernelKeyringReachable.map { JSON.KernelKeyring(reachable: $0, key: status.kernelKeyState) },
            directory: directory.json(withSize: false),
            file: file.json(withSize: true), itemCount: status.itemCount, vaultId: identity?.vaultIDHex,
            keyId: identity?.keyIDHex, permissionProblem: status.permissionProblem,
            problem: problem.map { ErrorReport.Body(code: $0.code.description, message: $0.message) })
    }

    var human: String {
        func known(_ flag: Bool?, _ yes: String, _ no: String) -> String {
            flag.map { $0 ? yes : no } ?? "unknown"
        }
        var keyring: String
        switch (status.hasDefaultKeyring, status.keyringLocked) {
        case (false?, _): keyring = "none (the Secret Service has no default keyring)"
        case (_, let locked?):
            let name = defaultCollection.map { $0.label.isEmpty ? $0.path : $0.label } ?? "default"
            keyring = "\(name): \(locked ? "locked" : "unlocked")"
        default: keyring = "unknown"
        }
        if status.keyStore != "secretService" { keyring = "not used by this key store" }
        if let reachable = status.kernelKeyringReachable {
            keyring = reachable ? "reachable, key " + (status.kernelKeyState ?? "- (no file)") : "not reachable"
        }
        var lines: [(String, String)] = [
            ("service", status.service),
            ("key store", "\(status.keyStore) (\(status.accessibility))"),
            ("session bus", known(status.sessionBusReachable, "reachable", "unreachable")),
            ("secret service", known(status.secretServiceReachable, "reachable", "not reachable")),
            (status.kernelKeyringReachable == nil ? "default keyring" : "kernel keyring", keyring),
            ("directory", directory.text()),
            ("file", file.text(extra: file.size.map { "\($0) bytes" })),
            ("items", status.itemCount.map(String.init) ?? "-"),
            ("vault id", identity?.vaultIDHex ?? "-"),
            ("key id", identity?.keyIDHex ?? "-"),
            ("permissions", status.permissionProblem ?? "ok"),
        ]
        if let problem { lines.append(("problem", "\(problem.code): \(problem.message)")) }
        return fields(lines)
    }
}
