import Foundation
import Testing
import TestSupport

/// `vaultctl doctor` and the global options, run as a user runs them: the built binary, its stdout, stderr
/// and exit code.
@Suite struct DoctorTests {
    static var vaultctl: String { BuildProducts.executable("vaultctl") }

    @Test func outsideAnySessionItSaysNoSecretServiceIsReachableAndExits69() throws {
        let result = try ChildProcess.run(
            Self.vaultctl, ["doctor"],
            environment: ["DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "XDG_RUNTIME_DIR": "/nonexistent"])
        #expect(result.status == 69, "\(result)")
        #expect(result.lines.contains("No Secret Service is reachable: there is no D-Bus session bus in this environment."),
                "\(result)")
        #expect(result.lines.contains { $0.hasPrefix("Fix: ") })
        #expect(result.lines.first?.hasPrefix("libsodium        1.0.") == true)
    }

    /// Where no Secret Service runs, doctor still finds what works (the kernel keyrings are tried for real) and
    /// recommends it; the exit code stays the default key store's.
    @Test func withoutASecretServiceItListsTheKeyStoresThatWorkAndRecommendsOne() throws {
        let result = try KeyringSession.scenario(
            .noSecretService, script: "$VAULTCTL doctor; echo \"exit $?\"; $VAULTCTL --json doctor")
        #expect(result.lines.contains { $0.hasPrefix("key store secret-service") && $0.contains("unavailable: ") })
        #expect(
            result.lines.contains("key store keyring:user        ready: every process of the user; gone at reboot"),
            "\(result)")
        #expect(result.lines.contains { $0.hasPrefix("key store passphrase          ready: ") })
        // A test run outside a login session has no session keyring of its own.
        #expect(
            result.lines.contains(
                "key store keyring:session     unavailable: no session keyring: this is not a login session"),
            "\(result)")
        // Root can use the host key: a systemd credential survives reboots, so it comes first.
        #expect(
            result.lines.contains { $0.hasPrefix("key store systemd-creds:NAME  ready: ") && $0.contains("host key") },
            "\(result)")
        #expect(result.lines.contains { $0.hasPrefix("key store key-file:PATH       ready: ") })
        #expect(result.lines.contains("recommended      --key-store systemd-creds:NAME"), "\(result)")
        #expect(result.lines.contains("exit 69"))
        let json = try #require(result.standardOutput.range(of: "{").map { String(result.standardOutput[$0.lowerBound...]) })
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])
        #expect(object["recommendedKeyStore"] as? String == "systemd-creds:NAME", "\(json)")
        let stores = try #require(object["keyStores"] as? [[String: Any]])
        #expect(stores.map { $0["name"] as? String } == [
            "secret-service", "secret-portal", "keyring:session", "keyring:user", "keyring:persistent", "systemd-creds:NAME",
            "key-file:PATH", "passphrase",
        ])
    }

    /// Another user cannot use the host key: systemd-creds is listed as unavailable with the reason, and the
    /// user keyring is recommended.
    @Test func asAUserWithoutTheHostKeyItRecommendsTheUserKeyring() throws {
        let result = try ChildProcess.run(
            "/usr/bin/setpriv",
            ["--reuid=65534", "--regid=65534", "--clear-groups", Self.vaultctl, "--dir", "/nonexistent/vaults", "doctor"],
            environment: ["DBUS_SESSION_BUS_ADDRESS": nil, "HOME": "/nonexistent"])
        #expect(
            result.lines.contains {
                $0.hasPrefix("key store systemd-creds:NAME  unavailable: systemd-creds cannot seal as uid 65534: ")
                    && $0.contains("the host key is root's")
            }, "\(result)")
        #expect(result.lines.contains("recommended      --key-store keyring:user"), "\(result)")
    }

    @Test func inAnUnlockedKeyringSessionItIsReady() throws {
        let result = try KeyringSession.scenario(script: "$VAULTCTL doctor; echo \"exit $?\"")
        #expect(result.lines.last == "exit 0", "\(result)")
        #expect(result.lines.contains("Ready: the Secret Service is reachable and the default keyring is unlocked."))
        #expect(result.lines.contains("keyring          Login (default): unlocked"), "\(result)")
        #expect(result.lines.contains("recommended      --key-store secret-service"), "\(result)")
    }

    @Test func aLockedKeyringExits75WithTheUnlockFix() throws {
        let result = try KeyringSession.scenario(script: "LOCK; $VAULTCTL doctor; echo \"exit $?\"")
        #expect(result.lines.last == "exit 75", "\(result)")
        #expect(result.lines.contains("keyring          Login (default): locked"), "\(result)")
        #expect(result.lines.contains { $0.hasPrefix("The default keyring is locked") })
    }

    @Test func aBusWithoutSecretServiceExits69() throws {
        let result = try KeyringSession.scenario(.noSecretService, script: "$VAULTCTL doctor; echo \"exit $?\"")
        #expect(result.lines.last == "exit 69", "\(result)")
        #expect(result.lines.contains(
            "No Secret Service is reachable: the session bus has no org.freedesktop.secrets provider."))
    }

    @Test func jsonReportIsOneSortedDocument() throws {
        let result = try KeyringSession.scenario(script: "$VAULTCTL --json doctor")
        #expect(result.status == 0, "\(result)")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any])
        #expect(object["ok"] as? Bool == true)
        #expect((object["libraries"] as? [String: Any])?["libsodium"] as? String != nil)
        let collections = try #require(object["collections"] as? [[String: Any]])
        #expect(collections.contains { $0["default"] as? Bool == true && $0["locked"] as? Bool == false })
        // Sorted keys: the top-level keys appear in order.
        let keys = result.standardOutput.split(separator: "\n").filter { $0.hasPrefix("  \"") }
            .map { String($0.dropFirst(3).prefix { $0 != "\"" }) }
        #expect(keys == keys.sorted() && keys.count == object.count, "\(keys)")
    }

    @Test func insecureStoreDirectoryExits77() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("doctor-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o755])
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let result = try KeyringSession.scenario(script: "$VAULTCTL doctor --dir \(KeyringSession.shellQuote(dir)); echo \"exit $?\"")
        #expect(result.lines.last == "exit 77", "\(result)")
        #expect(result.lines.contains { $0.contains("open to other users") })
    }
}

@Suite struct GlobalOptionTests {
    @Test func helpListsTheExitCodeTable() throws {
        let result = try ChildProcess.run(DoctorTests.vaultctl, ["--help"])
        #expect(result.status == 0)
        for line in ["64  bad usage", "65  data damaged", "66  no such store", "69  key store unavailable",
                     "74  I/O failure", "75  keyring locked", "77  permission denied", "78  master key missing"] {
            #expect(result.standardOutput.contains(line), "missing: \(line)")
        }
    }

    @Test func versionPrintsTheVersion() throws {
        let result = try ChildProcess.run(DoctorTests.vaultctl, ["--version"])
        #expect(result.status == 0)
        #expect(result.lines == ["0.2.0"])
    }

    @Test func unknownCommandIsBadUsage() throws {
        let plain = try ChildProcess.run(DoctorTests.vaultctl, ["frobnicate"])
        #expect(plain.status == 64)
        #expect(plain.standardOutput.isEmpty)
        #expect(!plain.standardError.isEmpty)

        let json = try ChildProcess.run(DoctorTests.vaultctl, ["--json", "frobnicate"])
        #expect(json.status == 64)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let error = try #require(object["error"] as? [String: Any])
        #expect(error["code"] as? String == "usage")
        #expect((error["message"] as? String)?.isEmpty == false)
    }
}
