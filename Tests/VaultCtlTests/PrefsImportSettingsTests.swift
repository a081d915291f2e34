import Foundation
import Glibc
import TestSupport
import Testing

/// `vaultctl prefs import --from json|zustand` (issue 37, JSON stores): what a user runs to bring an app's old
/// settings file in, the file only read, a bad one creating nothing, and a kill at any instant leaving the store
/// as it was or the whole import.
@Suite struct PrefsImportSettingsTests {
    @Test func aSettingsFileComesInTypedAndARunAgainSaysUnchanged() throws {
        let sandbox = try PrefsSandbox()
        let file = sandbox.path("config.json")
        let text = #"{"theme": "dark", "zoom": 1.25, "window": {"width": 900}, "recent": ["a"], "gone": null}"#
        try sandbox.write(Array(text.utf8), to: "config.json")
        let dry = try sandbox.succeed(["prefs", "import", "ui", file, "--from", "json", "--dry-run"])
        #expect(dry.lines.first?.hasPrefix("would import 4 keys into store ui") == true, "\(dry)")
        #expect(!sandbox.files.contains("ui.prefs"), "a dry run created the store")
        let first = try sandbox.succeed(["--json", "prefs", "import", "ui", file, "--from", "json"])
        let report = try jsonObject(first.standardOutput)
        #expect(report["imported"] as? [String] == ["recent", "theme", "window", "zoom"], "\(first)")
        #expect(report["skipped"] as? [String] == ["gone"] && report["created"] as? Bool == true)
        #expect((report["types"] as? [String: String])?["window"] == "json")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "zoom"]).standardOutput == "1.25\n")
        #expect(try sandbox.bytes("config.json") == Array(text.utf8), "the source file changed")
        let before = try sandbox.bytes("ui.prefs")
        let again = try sandbox.succeed(["prefs", "import", "ui", file, "--from", "json"])
        #expect(
            again.lines.first?.contains("imported 0 keys") == true
                && again.lines.first?.contains("4 unchanged") == true, "\(again)")
        #expect(try sandbox.bytes("ui.prefs") == before, "a second import wrote")
        try sandbox.succeed(["prefs", "set", "ui", "theme", "light"])
        let kept = try sandbox.succeed(["prefs", "import", "ui", file, "--from", "json"])
        #expect(kept.lines.first?.contains("kept 1 the store holds another value for") == true, "\(kept)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "theme"]).standardOutput == "light\n")
        try sandbox.succeed(["prefs", "import", "ui", file, "--from", "json", "--replace"])
        #expect(try sandbox.succeed(["prefs", "get", "ui", "theme"]).standardOutput == "dark\n")
    }

    @Test func aZustandPayloadBecomesTheNamedState() throws {
        let sandbox = try PrefsSandbox()
        let payload = #"{"state": {"cols": 2}, "version": 3}"#
        let imported = try sandbox.succeed(
            ["prefs", "import", "ui", "-", "--from", "zustand", "--name", "layout"], input: Data(payload.utf8))
        #expect(imported.lines.first?.hasPrefix("imported 1 key into store ui") == true, "\(imported)")
        let stored = try sandbox.succeed(["prefs", "get", "ui", "layout"]).standardOutput
        #expect(stored == #"{"state":{"cols":2},"version":3}"# + "\n", "\(stored)")
        let noName = try sandbox.run(["prefs", "import", "ui", "-", "--from", "zustand"], input: Data(payload.utf8))
        #expect(noName.status == 64, "\(noName)")
    }

    @Test func aBadFileExits64AndCreatesNothing() throws {
        let sandbox = try PrefsSandbox()
        for (kind, text) in [("json", "[1, 2]"), ("json", "{oops"), ("zustand", #"{"version": 1}"#)] {
            var arguments = ["prefs", "import", "ui", "-", "--from", kind]
            if kind == "zustand" { arguments += ["--name", "layout"] }
            let result = try sandbox.run(arguments, input: Data(text.utf8))
            #expect(result.status == 64, "\(kind) \(text): \(result)")
            #expect(result.standardError.contains("cannot import standard input into store \"ui\""), "\(result)")
            #expect(!sandbox.files.contains("ui.prefs"), "\(kind) \(text): a refused import created the store")
        }
    }

    /// 20 SIGKILLs spread over the first 1.2 s of an import of 3,000 keys (about half a second here) into a store that holds one: afterwards the store opens
    /// and holds its key and either none of the file's keys or all of them, each with the file's value.
    @Test func aKillAtAnyInstantLeavesTheOldStoreOrTheWholeImport() throws {
        let sandbox = try PrefsSandbox()
        let keys = (0..<3000).map { "k\($0)" }
        let text = "{" + keys.map { "\"\($0)\": \"v-\($0)\"" }.joined(separator: ",") + "}"
        try sandbox.write(Array(text.utf8), to: "big.json")
        let outcomes = try sandbox.killImports("big.json --from json", keys: keys)
        print("prefs import kills: \(outcomes.sorted { $0.key < $1.key })")
    }
}
