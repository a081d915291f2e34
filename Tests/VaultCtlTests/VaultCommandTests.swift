import Foundation
import TestSupport
import Testing

/// `vaultctl vault` run as a user runs it, in a private keyring session: the built binary, its stdout, stderr
/// and exit code, for every command. Values go in on stdin only and come out only with --reveal.
@Suite struct VaultCommandTests {
    @Test func anEmptyValueIsRefusedWith64UnlessAllowEmptySaysSo() throws {
        let vault = try VaultSandbox()
        let token = VaultSandbox.secret("token")
        try vault.input("set-token", token, secret: token)
        try vault.input("set-newline", "\n")
        try vault.input("set-newline-token", "\n")
        try vault.run(
            revealing: ["reveal-token", "reveal-empty"],
            script: """
                V set-empty-new vault set --service new session --expires-in 3600
                V set-token vault set --service app session --expires-in 3600
                V set-empty vault set --service app session --expires-in 3600
                V set-empty-json --json vault set --service app session
                V set-newline vault set --service app note
                V set-newline-token vault set --service app session --expires-in 60
                V reveal-token vault get --service app session --reveal
                V allowed vault set --service app note --allow-empty
                V reveal-empty vault get --service app note --reveal
                """)
        let empty = try vault.step("set-empty-new")
        #expect(empty.status == 64 && empty.standardOutput.isEmpty, "\(empty)")
        #expect(
            empty.standardError == "vaultctl: invalidValue: the value of \"session\" on stdin is empty (an unset "
                + "variable?); nothing was stored; pass --allow-empty to store an empty value\n", "\(empty)")
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile("new")), "a vault was created")
        for name in ["set-empty", "set-newline", "set-newline-token"] {
            let step = try vault.step(name)
            #expect(step.status == 64 && step.standardError.hasPrefix("vaultctl: invalidValue: "), "\(step)")
        }
        let json = try vault.step("set-empty-json")
        #expect(json.status == 64 && json.standardError.isEmpty, "\(json)")
        #expect(try json.errorCode() == "invalidValue")
        // The token set before is still the token.
        #expect(try vault.step("reveal-token").standardOutput == token + "\n")
        #expect(try vault.step("allowed").status == 0)
        #expect(try vault.step("reveal-empty").standardOutput == "\n")
    }

    @Test func itemsGoInOnStdinAndComeOutOnlyWithReveal() throws {
        let vault = try VaultSandbox()
        let password = VaultSandbox.secret("password")
        let token = VaultSandbox.secret("token")
        let old = VaultSandbox.secret("old")
        let twice = VaultSandbox.secret("twice")
        let json = VaultSandbox.secret("json")
        try vault.input("set-password", password + "\n", secret: password)
        try vault.input("set-token", token, secret: token)
        try vault.input("set-expired", old, secret: old)
        try vault.input("set-twice", twice + "\n\n", secret: twice)
        try vault.input("set-json", json, secret: json)
        let argumentWord = "argument-word-\(KeyringSession.randomID().prefix(8))"
        let revealing: Set = [
            "reveal-password", "reveal-token", "reveal-empty", "reveal-twice", "reveal-expired", "reveal-unchanged",
        ]
        try vault.run(
            revealing: revealing,
            script: """
                V set-password vault set --service app password
                V set-token vault set --service app session --expires-in 3600
                V set-expired vault set --service app old --expires-in 0
                V set-empty vault set --service app empty --allow-empty
                V set-twice vault set --service app twice
                V set-json vault set --service app structured --json
                V list vault list --service app
                V list-json --json vault list --service app
                V get-password vault get --service app password
                V get-token vault get --service app session --json
                V reveal-password vault get --service app password --reveal
                V reveal-token vault get --service app session --reveal --json
                V reveal-empty vault get --service app empty --reveal
                V reveal-twice vault get --service app twice --reveal
                V reveal-expired vault get --service app old --reveal
                V get-absent vault get --service app nothing --reveal
                V get-absent-json --json vault get --service app nothing
                V set-argument vault set --service app password \(argumentWord)
                V reveal-unchanged vault get --service app password --reveal
                V delete vault delete --service app password
                V delete-json vault delete --service app structured --json
                V delete-again vault delete --service app password
                V get-deleted vault get --service app password --reveal
                V list-other vault list --service other
                """)

        for name in ["set-password", "set-token", "set-expired", "set-empty", "set-twice"] {
            let set = try vault.step(name)
            #expect(set.status == 0 && set.standardOutput.isEmpty && set.standardError.isEmpty, "\(set)")
        }
        let setJSON = try jsonObject(try vault.step("set-json").standardOutput)
        #expect(setJSON["key"] as? String == "structured" && setJSON["kind"] as? String == "string")
        #expect(number(setJSON["size"]) == Int64(json.utf8.count) && setJSON["value"] == nil, "\(setJSON)")

        // list: metadata of every item, sorted, never a value.
        let list = try vault.step("list")
        #expect(list.status == 0, "\(list)")
        let rows = list.lines.map { $0.split(separator: " ", omittingEmptySubsequences: true).map(String.init) }
        #expect(rows.first == ["KEY", "KIND", "SIZE", "CREATED", "UPDATED", "EXPIRES"], "\(list)")
        #expect(rows.dropFirst().map { $0[0] } == ["empty", "old", "password", "session", "structured", "twice"])
        #expect(
            rows.first { $0[0] == "password" }.map { Array($0[1...2]) + [$0[5]] }
                == ["string", "\(password.utf8.count)", "never"], "\(list)")
        #expect(
            rows.first { $0[0] == "session" }.map { [$0[1], $0[2], $0[6]] }
                == ["sessionToken", "\(token.utf8.count)", "(valid)"], "\(list)")
        #expect(rows.first { $0[0] == "old" }?.last == "(expired)", "\(list)")
        #expect(rows.first { $0[0] == "empty" }?[2] == "0")
        #expect(rows.first { $0[0] == "twice" }?[2] == "\(twice.utf8.count + 1)", "only one newline is stripped")

        let listed = try jsonObject(try vault.step("list-json").standardOutput)
        #expect(listed["service"] as? String == "app" && number(listed["unreadable"]) == 0)
        let items = try #require(listed["items"] as? [[String: Any]])
        #expect(items.map { $0["key"] as? String } == ["empty", "old", "password", "session", "structured", "twice"])
        #expect(items.allSatisfy { $0["value"] == nil && number($0["createdAt"]) != nil })
        let session = try #require(items.first { $0["key"] as? String == "session" })
        #expect(session["kind"] as? String == "sessionToken" && session["expired"] as? Bool == false)
        let expiresIn = (number(session["expiresAt"]) ?? 0) - (number(session["createdAt"]) ?? 0)
        #expect((3_590_000...3_600_000).contains(expiresIn), "expires about an hour after creation: \(session)")
        #expect(items.first { $0["key"] as? String == "old" }?["expired"] as? Bool == true)
        #expect(items.first { $0["key"] as? String == "password" }?["expiresAt"] is NSNull)

        // get without --reveal: metadata only.
        let get = try vault.step("get-password")
        #expect(get.status == 0, "\(get)")
        #expect(
            Array(get.lines.prefix(3)) == [
                "key      password", "kind     string", "size     \(password.utf8.count) bytes",
            ])
        #expect(
            get.lines.count == 6 && get.lines[3].hasPrefix("created  20") && get.lines[5] == "expires  never", "\(get)")
        let tokenMetadata = try jsonObject(try vault.step("get-token").standardOutput)
        #expect(tokenMetadata["kind"] as? String == "sessionToken" && tokenMetadata["value"] == nil, "\(tokenMetadata)")
        #expect(tokenMetadata["service"] as? String == "app" && tokenMetadata["expired"] as? Bool == false)

        // --reveal: the bare value and a newline, so that $(...) is the value.
        #expect(try vault.step("reveal-password").standardOutput == password + "\n")
        let revealed = try jsonObject(try vault.step("reveal-token").standardOutput)
        #expect(revealed["value"] as? String == token && revealed["kind"] as? String == "sessionToken")
        #expect(try vault.step("reveal-empty").standardOutput == "\n")
        #expect(try vault.step("reveal-twice").standardOutput == twice + "\n\n")
        let expired = try vault.step("reveal-expired")
        #expect(expired.status == 0 && expired.standardOutput == old + "\n", "\(expired)")
        #expect(expired.standardError.hasPrefix("vaultctl: item \"old\" of vault \"app\" expired at 20"), "\(expired)")

        // Absent items: 66, an error on stderr (plain) or as the one JSON document.
        let absent = try vault.step("get-absent")
        #expect(absent.status == 66 && absent.standardOutput.isEmpty, "\(absent)")
        #expect(absent.standardError.hasPrefix("vaultctl: notFound: vault \"app\" ("), "\(absent)")
        #expect(absent.standardError.contains("has no item \"nothing\""), "\(absent)")
        let absentJSON = try vault.step("get-absent-json")
        #expect(absentJSON.status == 66 && absentJSON.standardError.isEmpty, "\(absentJSON)")
        #expect(try absentJSON.errorCode() == "notFound")

        // A value as an argument is refused, not echoed, and nothing is stored.
        let argument = try vault.step("set-argument")
        #expect(argument.status == 64 && argument.standardOutput.isEmpty, "\(argument)")
        #expect(argument.standardError.contains("takes the value on stdin"), "\(argument)")
        #expect(!argument.standardError.contains(argumentWord), "the refused word was echoed: \(argument)")
        #expect(try vault.step("reveal-unchanged").standardOutput == password + "\n")

        // delete: 0, then 66 for what is no longer there.
        let delete = try vault.step("delete")
        #expect(delete.status == 0 && delete.standardOutput.isEmpty && delete.standardError.isEmpty, "\(delete)")
        let deleted = try jsonObject(try vault.step("delete-json").standardOutput)
        #expect(deleted["deleted"] as? Bool == true && deleted["key"] as? String == "structured")
        #expect(try vault.step("delete-again").status == 66)
        let gone = try vault.step("get-deleted")
        #expect(gone.status == 66 && gone.standardOutput.isEmpty, "\(gone)")

        // Reading commands never create a vault.
        let other = try vault.step("list-other")
        #expect(other.status == 66, "\(other)")
        #expect(other.standardError.contains("no vault \"other\""), "\(other)")
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile("other")))
    }

    @Test func statusNamesKeyringFileAndIdsAndRotateKeyReplacesTheKey() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        let session = try vault.run(
            revealing: ["reveal"],
            script: """
                V status-before vault status --service app
                V set vault set --service app k
                V status vault status --service app
                V status-json vault status --service app --json
                V rotate vault rotate-key --service app
                V rotate-json --json vault rotate-key --service app
                V status-after --json vault status --service app
                V reveal vault get --service app k --reveal
                V verify vault verify --service app
                V verify-json --json vault verify --service app
                secret-tool search --all vault "$(VAULT_ID status-after)" 2>&1 | grep -a '^attribute.key = '
                """)
        let directory = vault.vaultDirectory

        let before = try vault.step("status-before")
        #expect(before.status == 0, "\(before)")
        #expect(
            before.lines == [
                "service          app",
                "key store        secretService (afterFirstUnlock)",
                "session bus      reachable",
                "secret service   reachable",
                "default keyring  Login: unlocked",
                "directory        \(directory) (not created yet)",
                "file             \(directory)/app.prefs (not created yet)",
                "items            -",
                "vault id         -",
                "key id           -",
                "permissions      ok",
            ], "\(before)")

        let status = try vault.step("status")
        let object = try jsonObject(try vault.step("status-json").standardOutput)
        let vaultID = try #require(object["vaultId"] as? String)
        let keyID = try #require(object["keyId"] as? String)
        #expect(vaultID.count == 32 && keyID.count == 16 && (vaultID + keyID).allSatisfy(\.isHexDigit))
        #expect(status.lines.contains("directory        \(directory) (mode 0700)"), "\(status)")
        #expect(status.lines.contains { $0.hasPrefix("file             \(directory)/app.prefs (mode 0600, ") })
        #expect(status.lines.contains("items            1") && status.lines.contains("vault id         \(vaultID)"))
        #expect(status.lines.contains("key id           \(keyID)"), "\(status)")
        #expect(object["locked"] as? Bool == false && object["secretService"] as? Bool == true)
        #expect(object["sessionBus"] as? Bool == true && number(object["itemCount"]) == 1)
        #expect((object["file"] as? [String: Any])?["mode"] as? String == "0600")
        #expect((object["directory"] as? [String: Any])?["mode"] as? String == "0700")
        #expect((object["defaultCollection"] as? [String: Any])?["locked"] as? Bool == false)
        #expect(object["problem"] is NSNull && object["keyStore"] as? String == "secretService")

        // Two rotations: each names the key it replaced and the new one; the data still opens.
        let rotate = try vault.step("rotate")
        let words = rotate.standardOutput.split(separator: " ").map(String.init)
        #expect(
            rotate.status == 0
                && rotate.standardOutput.hasPrefix("rotated the master key of vault app: key id \(keyID) -> "),
            "\(rotate)")
        let secondKey = words.last?.trimmingCharacters(in: .whitespacesAndNewlines) ?? ""
        let rotated = try jsonObject(try vault.step("rotate-json").standardOutput)
        #expect(rotated["oldKeyId"] as? String == secondKey && rotated["vaultId"] as? String == vaultID)
        let thirdKey = try #require(rotated["newKeyId"] as? String)
        #expect(Set([keyID, secondKey, thirdKey]).count == 3 && secondKey.count == 16, "\(rotate)")
        let after = try jsonObject(try vault.step("status-after").standardOutput)
        #expect(after["keyId"] as? String == thirdKey && after["vaultId"] as? String == vaultID)
        #expect(try vault.step("reveal").standardOutput == value + "\n")
        // The keyring holds the current key only: rotation deleted the old ones.
        #expect(session.lines == ["attribute.key = \(thirdKey)"], "\(session)")

        let verify = try vault.step("verify")
        #expect(verify.status == 0, "\(verify)")
        #expect(verify.lines == ["vault app is clean: 1 item opened, \(vault.vaultFile())"], "\(verify)")
        let verified = try jsonObject(try vault.step("verify-json").standardOutput)
        #expect(verified["clean"] as? Bool == true && number(verified["itemsOpened"]) == 1)
        #expect((verified["failures"] as? [Any])?.isEmpty == true && (verified["damage"] as? [Any])?.isEmpty == true)
    }

    @Test func wipeWithoutYesIsRefusedAndWithYesRemovesItemsFileAndMasterKey() throws {
        let vault = try VaultSandbox()
        let value = VaultSandbox.secret("value")
        try vault.input("set", value, secret: value)
        try vault.run(
            script: """
                V set vault set --service app k
                V status --json vault status --service app
                VID=$(VAULT_ID status)
                cp "$VDIR/app.prefs" "$IO/before.prefs"
                V refused vault wipe --service app
                V refused-json --json vault wipe --service app
                cmp -s "$VDIR/app.prefs" "$IO/before.prefs"; echo $? >"$IO/unchanged"
                secret-tool search --all vault "$VID" 2>&1 | grep -ac '^attribute.vault = ' >"$IO/keys-before"
                V wipe vault wipe --service app --yes
                secret-tool search --all vault "$VID" 2>&1 | grep -ac '^attribute.vault = ' >"$IO/keys-after"
                V get-after vault get --service app k
                V wipe-again --json vault wipe --service app --yes
                echo "$VID" >"$IO/vault-id"
                """)
        let refused = try vault.step("refused")
        #expect(refused.status == 64 && refused.standardOutput.isEmpty, "\(refused)")
        #expect(refused.standardError.contains("refusing to wipe vault \"app\" without --yes"), "\(refused)")
        let refusedJSON = try vault.step("refused-json")
        #expect(refusedJSON.status == 64 && refusedJSON.standardError.isEmpty)
        #expect(try refusedJSON.errorCode() == "usage")
        #expect(vault.output("unchanged") == "0", "a refused wipe changed the vault file")
        #expect(vault.output("keys-before") == "1")

        let wipe = try vault.step("wipe")
        #expect(wipe.status == 0, "\(wipe)")
        #expect(wipe.lines == ["wiped vault app: master key, items and file \(vault.vaultFile()) removed"])
        #expect(vault.output("keys-after") == "0", "the master key is still in the keyring")
        #expect(!FileManager.default.fileExists(atPath: vault.vaultFile()))
        #expect(try vault.step("get-after").status == 66)
        let again = try vault.step("wipe-again")
        #expect(again.status == 66, "\(again)")
        #expect(try again.errorCode() == "notFound")
        #expect(vault.output("vault-id")?.count == 32)
    }

    @Test func badUsageExits64AndTouchesNothing() throws {
        let sandbox = try PrefsSandbox()
        func vaultctl(_ arguments: [String], input: Data = Data()) throws -> ChildResult {
            // No session bus at all: none of these may get as far as the Secret Service.
            try ChildProcess.run(
                PrefsSandbox.vaultctl, ["--dir", sandbox.path("vault")] + arguments,
                environment: ["DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "XDG_RUNTIME_DIR": "/nonexistent"],
                input: input)
        }
        let cases: [(arguments: [String], input: Data, code: String)] = [
            (["vault", "get", "k"], Data(), "usage"),
            (["vault", "get", "--service", "bad/name", "k"], Data(), "invalidKey"),
            (["vault", "get", "--service", "app", "bad key"], Data(), "invalidKey"),
            (["vault", "delete", "--service", "app", ""], Data(), "invalidKey"),
            (["vault", "status", "--service", ".."], Data(), "invalidKey"),
            (["vault", "wipe", "--service", "app"], Data(), "usage"),
            (["vault", "set", "--service", "app", "k", "--expires-in", "-1"], Data("v".utf8), "usage"),
            (["vault", "set", "--service", "app", "k", "--expires-in", "soon"], Data("v".utf8), "usage"),
            (["vault", "set", "--service", "app", "k", "two", "words"], Data("v".utf8), "usage"),
            (["vault", "set", "--service", "app", "k"], Data([0xFF, 0xFE]), "usage"),
            (["vault", "set", "--service", "app", "k"], Data(count: 64 * 1024 + 2), "valueTooLarge"),
            (["vault", "set", "--service", "app", "bad key"], Data("v".utf8), "invalidKey"),
        ]
        for (arguments, input, code) in cases {
            let plain = try vaultctl(arguments, input: input)
            #expect(plain.status == 64, "\(arguments): \(plain)")
            #expect(plain.standardOutput.isEmpty && !plain.standardError.isEmpty, "\(arguments): \(plain)")
            let json = try vaultctl(["--json"] + arguments, input: input)
            #expect(json.status == 64 && json.standardError.isEmpty, "\(arguments): \(json)")
            let error = try jsonObject(json.standardOutput)["error"] as? [String: Any]
            #expect(error?["code"] as? String == code, "\(arguments): \(json)")
        }
        #expect(sandbox.files.isEmpty, "bad usage created \(sandbox.files)")
    }

    /// `--dir` relative to the working directory for a vault: `vault set` creates `<cwd>/<dir>` (mode 0700) and
    /// the vault file in it, never `/<dir>`, and `vault get` from the same working directory reads the item.
    @Test func aRelativeDirIsUnderTheWorkingDirectory() throws {
        let vault = try VaultSandbox()
        let top = "rel-\(UInt32.random(in: 0...UInt32.max))"
        defer { _ = try? FileManager.default.removeItem(atPath: "/" + top) }
        let secret = VaultSandbox.secret("relative")
        try vault.input("set", secret, secret: secret)
        try vault.run(
            revealing: ["get"],
            script: """
                cd "$IO/.." || exit 99
                mkdir \(top)   # vaultctl creates the last level of --dir only
                VDIR=\(top)/vault
                V set vault set --service app password
                V get vault get --service app password --reveal
                """)
        let set = try vault.step("set")
        #expect(set.status == 0 && set.standardError.isEmpty, "\(set)")
        let get = try vault.step("get")
        #expect(get.status == 0 && get.standardOutput == secret + "\n", "\(get)")
        #expect(!FileManager.default.fileExists(atPath: "/" + top), "a relative --dir was created under /")
        #expect(vault.sandbox.mode(top + "/vault") == 0o700)
        #expect(vault.sandbox.mode(top + "/vault/app.prefs") == 0o600)
    }

}
