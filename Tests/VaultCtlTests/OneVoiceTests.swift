import Foundation
import TestSupport
import Testing

/// vaultctl speaks in one voice: every failure, an argument error included, is `vaultctl: <code>: <what>` (and
/// under --json only the message, never the usage text); errors say what is wrong in words; a limit is given
/// the same way everywhere; a report claims only what happened. Each case is one the adoption review met.
@Suite struct OneVoiceTests {
    static var vaultctl: String { BuildProducts.executable("vaultctl") }

    final class Scratch {
        let path = "/dev/shm/one-voice-\(UUID().uuidString)"
        init() throws {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        }
        deinit { try? FileManager.default.removeItem(atPath: path) }

        func run(_ arguments: [String], input: Data = Data()) throws -> ChildResult {
            try ChildProcess.run(
                OneVoiceTests.vaultctl, ["--dir", path] + arguments,
                environment: ["DBUS_SESSION_BUS_ADDRESS": nil], input: input)
        }

        func write(_ text: String, to name: String) {
            _ = FileManager.default.createFile(
                atPath: path + "/" + name, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600])
        }
    }

    @Test func anArgumentErrorSpeaksLikeEveryOtherError() throws {
        let scratch = try Scratch()
        let human = try scratch.run(["prefs", "get", "ui"])
        #expect(human.status == 64)
        #expect(human.standardError.hasPrefix("vaultctl: usage: Missing expected argument '<key>'\n"), "\(human)")
        let json = try scratch.run(["--json", "prefs", "get", "ui"])
        #expect(json.status == 64)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(json.standardOutput.utf8)) as? [String: Any])
        let error = try #require(object["error"] as? [String: Any])
        #expect(error["code"] as? String == "usage")
        #expect(error["message"] as? String == "Missing expected argument '<key>'", "no usage text: \(json)")
    }

    @Test func aNegativeExpiryIsRefusedForWhatItIs() throws {
        let scratch = try Scratch()
        let result = try scratch.run(
            ["vault", "set", "--service", "app", "--key-store", "keyring:user", "s", "--expires-in", "-5"],
            input: Data("tok".utf8))
        #expect(result.status == 64)
        #expect(result.standardError.contains("--expires-in must be from 0 to"), "\(result)")
        #expect(result.standardError.contains("not -5"), "\(result)")
    }

    @Test func theValueLimitIsStatedOnce() throws {
        let scratch = try Scratch()
        let key = ["vault", "set", "--service", "app", "--key-store", "keyring:user", "big"]
        // Past what vaultctl reads, and just past what the vault takes: the same limit, in the same words.
        let tooLarge = try scratch.run(key, input: Data(repeating: 0x61, count: 70000))
        #expect(tooLarge.status == 64)
        #expect(
            tooLarge.standardError.contains("longer than the limit of 65536 bytes (64 KiB; one trailing newline is not counted)"),
            "\(tooLarge)")
        let justOver = try scratch.run(key, input: Data(repeating: 0x61, count: 65537))
        #expect(justOver.status == 64)
        #expect(justOver.standardError.contains("is 65537 bytes; the limit is 65536 bytes (64 KiB)"), "\(justOver)")
        let fits = try scratch.run(key, input: Data(repeating: 0x61, count: 65536) + Data("\n".utf8))
        #expect(fits.status == 0, "\(fits)")
        #expect(try scratch.run(["vault", "wipe", "--service", "app", "--key-store", "keyring:user", "--yes"]).status == 0)
    }

    @Test func anImportThatIsNoExportSaysWhatIsMissingInWords() throws {
        let scratch = try Scratch()
        scratch.write(#"{"x": 1}"#, to: "a.json")
        scratch.write(
            #"{"format":"prefskv-export","version":1,"store":"ui","entries":[{"key":"a","type":"int","value":"x"}]}"#,
            to: "b.json")
        let missing = try scratch.run(["prefs", "import", "ui", scratch.path + "/a.json"])
        #expect(missing.status == 64)
        #expect(missing.standardError.hasSuffix("the document is not a PrefsKV export: the document has no \"format\" field\n"), "\(missing)")
        let wrong = try scratch.run(["prefs", "import", "ui", scratch.path + "/b.json"])
        #expect(wrong.standardError.hasSuffix("entries[0].value is not an integer\n"), "\(wrong)")
        #expect(!(missing.standardError + wrong.standardError).contains("DecodingError"))
        #expect(!(missing.standardError + wrong.standardError).contains("CodingKeys"))
    }

    @Test(arguments: ["nan", "inf", "1e400", "-1e999"])
    func aDoubleMustBeFinite(text: String) throws {
        let scratch = try Scratch()
        let result = try scratch.run(["prefs", "set", "ui", "d", text, "--type", "double"])
        #expect(result.status == 64, "\(result)")
        #expect(result.standardError.contains("is not a finite number"), "\(result)")
    }

    @Test func aJunkFileIsTheSameAnswerEverywhereAndAWipeClaimsNoKey() throws {
        let scratch = try Scratch()
        scratch.write("junkjunkjunk", to: "app.prefs")
        let store = ["--service", "app", "--key-store", "keyring:user"]
        let list = try scratch.run(["vault", "list"] + store)
        let verify = try scratch.run(["vault", "verify"] + store)
        #expect(list.status == 65 && verify.status == 65, "\(list)\(verify)")
        #expect(list.standardError.hasPrefix("vaultctl: corrupted: ") && verify.standardError.hasPrefix("vaultctl: corrupted: "))
        let wipe = try scratch.run(["vault", "wipe", "--yes"] + store)
        #expect(wipe.status == 0, "\(wipe)")
        #expect(
            wipe.standardOutput
                == "wiped vault app: file \(scratch.path)/app.prefs removed (it was not a vault file: it named no master key)\n",
            "\(wipe)")
    }

    @Test func verboseSaysWhatIsDone() throws {
        let scratch = try Scratch()
        let set = try scratch.run(["--verbose", "prefs", "set", "ui", "theme", "dark"])
        #expect(set.status == 0)
        let lines = set.standardError.split(separator: "\n").map(String.init)
        #expect(lines.first == "vaultctl: store \"ui\": \(scratch.path)/ui.prefs (no file yet)", "\(set)")
        #expect(lines.contains("vaultctl: set key \"theme\" (string) in \(scratch.path)/ui.prefs"), "\(set)")
        #expect(lines.last?.hasPrefix("vaultctl: done in ") == true, "\(set)")
        let quiet = try scratch.run(["prefs", "get", "ui", "theme"])
        #expect(quiet.standardError.isEmpty)
    }

    @Test func storesAndKeysAreNamedForWhatTheyListAndTheOldNamesStillWork() throws {
        let scratch = try Scratch()
        #expect(try scratch.run(["prefs", "set", "ui", "theme", "dark"]).status == 0)
        let stores = try scratch.run(["prefs", "stores"])
        let ls = try scratch.run(["prefs", "ls"])
        #expect(stores.status == 0 && stores.standardOutput == ls.standardOutput, "\(stores)\(ls)")
        #expect(stores.standardOutput.hasPrefix("STORE  SIZE"), "\(stores)")
        let keys = try scratch.run(["prefs", "keys", "ui"])
        let list = try scratch.run(["prefs", "list", "ui"])
        #expect(keys.status == 0 && keys.standardOutput == list.standardOutput, "\(keys)\(list)")
        #expect(keys.standardOutput.hasPrefix("KEY"), "\(keys)")
    }

    /// `vault lock` uses no directory: its help does not offer --dir, and the global options still work.
    @Test func vaultLockShowsNoDirectoryOptionButTheGlobalOptionsWork() throws {
        let help = try ChildProcess.run(Self.vaultctl, ["vault", "lock", "--help"])
        #expect(help.status == 0 && !help.standardOutput.contains("--dir"), "\(help)")
        #expect(help.standardOutput.contains("--json"), "the discussion names --json: \(help)")
        let scratch = try Scratch()
        let json = try scratch.run(["--json", "vault", "lock"])
        #expect(json.status == 69, "no session bus: \(json)")
        #expect(json.standardOutput.contains("\"code\" : \"unavailable\""), "--json still applies: \(json)")
        let after = try scratch.run(["vault", "lock", "--json"])
        #expect(after.standardOutput.contains("\"code\" : \"unavailable\""), "\(after)")
    }
}
