import Foundation
import TestSupport
import Testing

/// `vaultctl prefs set/get/list/delete`, run as a user runs them: values of every type, what plain and JSON
/// answers look like, and what bad input and absent stores answer.
@Suite struct PrefsValueTests {
    struct TypedValue: Sendable, CustomTestStringConvertible {
        var type: String
        var input: String
        /// What plain `get` prints before its newline.
        var plain: String
        /// The type `get --json` and `list` name.
        var storedType: String
        /// The JSON text of `value` in `get --json`.
        var json: String
        var testDescription: String { type }
    }

    static let typedValues: [TypedValue] = [
        TypedValue(type: "string", input: "dark mode", plain: "dark mode", storedType: "string", json: #""dark mode""#),
        TypedValue(type: "int", input: "-42", plain: "-42", storedType: "int", json: "-42"),
        TypedValue(type: "double", input: "1.5", plain: "1.5", storedType: "double", json: "1.5"),
        TypedValue(type: "bool", input: "true", plain: "true", storedType: "bool", json: "true"),
        TypedValue(
            type: "json", input: #"{"b":[1,2],"a":null}"#, plain: #"{"b":[1,2],"a":null}"#, storedType: "json",
            json: #""{\"b\":[1,2],\"a\":null}""#),
        TypedValue(type: "data", input: "AQID/w==", plain: "AQID/w==", storedType: "bytes", json: #""AQID/w==""#),
        TypedValue(
            type: "strings", input: #"["a","b/c"]"#, plain: #"["a","b/c"]"#, storedType: "strings",
            json: #"["a","b/c"]"#),
    ]

    @Test(arguments: typedValues)
    func setWithEachTypeThenGetPrintsTheBareValueAndJSONGetTheTypedValue(_ value: TypedValue) throws {
        let sandbox = try PrefsSandbox()
        let set = try sandbox.succeed(["prefs", "set", "ui", "k", value.input, "--type", value.type])
        #expect(set.standardOutput.isEmpty && set.standardError.isEmpty, "\(set)")

        let plain = try sandbox.succeed(["prefs", "get", "ui", "k"])
        #expect(plain.standardOutput == value.plain + "\n")
        #expect(plain.standardError.isEmpty)

        let json = try jsonObject(try sandbox.succeed(["--json", "prefs", "get", "ui", "k"]).standardOutput)
        #expect(json["key"] as? String == "k")
        #expect(json["type"] as? String == value.storedType)
        #expect(json.count == 3, "\(json)")
        let expected = try JSONSerialization.jsonObject(with: Data(value.json.utf8), options: [.fragmentsAllowed])
        let canonical: (Any?) throws -> Data = {
            try JSONSerialization.data(withJSONObject: $0 as Any, options: [.sortedKeys, .fragmentsAllowed])
        }
        #expect(try canonical(json["value"]) == (try canonical(expected)), "\(json)")

        let list = try jsonObject(try sandbox.succeed(["--json", "prefs", "list", "ui"]).standardOutput)
        let entries = try #require(list["entries"] as? [[String: Any]])
        #expect(entries.first?["type"] as? String == value.storedType)
    }

    @Test func commandSubstitutionGivesTheValueAndAnEmptyStringStillEndsItsLine() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.succeed(["prefs", "set", "ui", "theme", "dark"])
        try sandbox.succeed(["prefs", "set", "ui", "empty", ""])
        let script = """
            theme=$("$VAULTCTL" --dir "$DIR" prefs get ui theme) || exit 9
            [ "$theme" = dark ] && echo same
            """
        let result = try ChildProcess.bash(
            script, environment: ["VAULTCTL": PrefsSandbox.vaultctl, "DIR": sandbox.directory])
        #expect(result.standardOutput == "same\n", "\(result)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "empty"]).standardOutput == "\n")
    }

    @Test func aValueStartingWithADashGoesAfterDoubleDashWhileNegativeNumbersNeedNone() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.succeed(["prefs", "set", "ui", "offset", "-3", "--type", "int"])
        try sandbox.succeed(["prefs", "set", "--type", "double", "ui", "scale", "-1e-3"])
        try sandbox.succeed(["prefs", "set", "ui", "flags", "--", "-x"])
        #expect(try sandbox.succeed(["prefs", "get", "ui", "offset"]).standardOutput == "-3\n")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "scale"]).standardOutput == "-0.001\n")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "flags"]).standardOutput == "-x\n")
        let refused = try sandbox.run(["prefs", "set", "ui", "flags", "-y"])
        #expect(refused.status == 64, "\(refused)")
        #expect(refused.standardError.contains("after --"), "\(refused)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "flags"]).standardOutput == "-x\n")
    }

    @Test func listShowsKeyTypeSizeAndExpiry() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.succeed(["prefs", "set", "ui", "theme", "dark"])
        try sandbox.succeed(["prefs", "set", "ui", "width", "240", "--type", "int"])
        // An expiry can be given through an import: 4102444800000 ms is 2100-01-01T00:00:00Z.
        let export = try sandbox.succeed(["prefs", "export", "ui"]).standardOutput
        let withExpiry = export.replacingOccurrences(
            of: #""key" : "theme","#, with: #""expiresAt" : 4102444800000, "key" : "theme","#)
        #expect(withExpiry != export)
        try sandbox.succeed(["prefs", "import", "ui", "-"], input: Data(withExpiry.utf8))

        let human = try sandbox.succeed(["prefs", "list", "ui"])
        #expect(
            human.lines == [
                "KEY    TYPE    SIZE  EXPIRES",
                "theme  string  4     2100-01-01T00:00:00Z",
                "width  int     8     never",
            ], "\(human)")

        let json = try jsonObject(try sandbox.succeed(["--json", "prefs", "list", "ui"]).standardOutput)
        #expect(json["store"] as? String == "ui")
        let entries = try #require(json["entries"] as? [[String: Any]])
        #expect(entries.map { $0["key"] as? String } == ["theme", "width"])
        #expect(entries.map { number($0["size"]) } == [4, 8])
        #expect(number(entries[0]["expiresAt"]) == 4_102_444_800_000)
        #expect(entries[1]["expiresAt"] is NSNull)
    }

    @Test func deleteRemovesAKeyAndAnAbsentKeyExits66() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let deleted = try sandbox.succeed(["prefs", "delete", "ui", "theme"])
        #expect(deleted.standardOutput.isEmpty)
        let gone = try sandbox.run(["prefs", "get", "ui", "theme"])
        #expect(gone.status == 66, "\(gone)")
        #expect(gone.standardOutput.isEmpty)
        #expect(gone.standardError.contains("has no key \"theme\""), "\(gone)")
        let again = try sandbox.run(["prefs", "delete", "ui", "theme"])
        #expect(again.status == 66, "\(again)")
        #expect(try sandbox.succeed(["prefs", "get", "ui", "width"]).standardOutput == "240\n")
    }

    static let readingCommands: [[String]] = [
        ["get", "ghost", "theme"], ["list", "ghost"], ["stats", "ghost"], ["verify", "ghost"], ["repair", "ghost"],
        ["export", "ghost"], ["compact", "ghost"], ["delete", "ghost", "theme"], ["wipe", "ghost", "--yes"],
    ]

    @Test(arguments: readingCommands)
    func aMissingStoreAnswers66AndIsNotCreated(_ command: [String]) throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let before = try sandbox.snapshot()

        let plain = try sandbox.run(["prefs"] + command)
        #expect(plain.status == 66, "\(plain)")
        #expect(plain.standardOutput.isEmpty)
        #expect(plain.standardError.contains(sandbox.path("ghost.prefs")), "the message names the file: \(plain)")

        let json = try sandbox.run(["--json", "prefs"] + command)
        #expect(json.status == 66, "\(json)")
        let error = try #require(try jsonObject(json.standardOutput)["error"] as? [String: Any])
        #expect(error["code"] as? String == "notFound")

        #expect(try sandbox.snapshot() == before)
    }

    @Test func aMissingDirectoryIsNotCreatedByReadingCommands() throws {
        let sandbox = try PrefsSandbox()
        let missing = sandbox.path("not-yet")
        for command in [["get", "ui", "theme"], ["list", "ui"], ["verify", "ui"], ["ls"]] {
            let result = try ChildProcess.run(PrefsSandbox.vaultctl, ["--dir", missing, "prefs"] + command)
            #expect(result.status == 66, "\(command): \(result)")
        }
        #expect(!FileManager.default.fileExists(atPath: missing))
    }

    struct BadInput: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        /// A value that must not appear in the message (messages name keys, never values).
        var value: String?
        var testDescription: String {
            arguments.map { $0.count > 40 ? "<\($0.count) bytes>" : $0 }.joined(separator: " ")
        }
    }

    static let badInputs: [BadInput] = [
        BadInput(arguments: ["set", "ui", "", "v"], value: nil),
        BadInput(arguments: ["set", "ui", String(repeating: "k", count: 16 * 1024 + 1), "v"], value: nil),
        BadInput(arguments: ["get", "ui", ""], value: nil),
        BadInput(arguments: ["set", "../ui", "k", "v"], value: nil),
        BadInput(arguments: ["get", "a/b", "k"], value: nil),
        BadInput(arguments: ["set", "ui", "k", "v", "--type", "frob"], value: nil),
        BadInput(arguments: ["set", "ui", "k", "s3cr3t-not-base64!", "--type", "data"], value: "s3cr3t-not-base64!"),
        BadInput(arguments: ["set", "ui", "k", "12monkeys", "--type", "int"], value: "12monkeys"),
        BadInput(arguments: ["set", "ui", "k", "2.5.1", "--type", "double"], value: "2.5.1"),
        BadInput(arguments: ["set", "ui", "k", "maybe-so", "--type", "bool"], value: "maybe-so"),
        BadInput(arguments: ["set", "ui", "k", "{\"unterminated", "--type", "json"], value: "unterminated"),
        BadInput(arguments: ["set", "ui", "k", "[1,2]", "--type", "strings"], value: "[1,2]"),
        BadInput(arguments: ["wipe", "ui"], value: nil),
        BadInput(arguments: ["set", "ui", "k", "one", "two"], value: nil),
        BadInput(arguments: ["set", "ui", "k"], value: nil),
    ]

    @Test(arguments: badInputs)
    func badInputExits64AndChangesNothing(_ input: BadInput) throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let before = try sandbox.snapshot()

        let plain = try sandbox.run(["prefs"] + input.arguments)
        #expect(plain.status == 64, "\(plain)")
        #expect(plain.standardOutput.isEmpty, "\(plain)")
        #expect(!plain.standardError.isEmpty)
        if let value = input.value { #expect(!plain.standardError.contains(value), "\(plain)") }

        let json = try sandbox.run(["--json", "prefs"] + input.arguments)
        #expect(json.status == 64, "\(json)")
        #expect(json.standardError.isEmpty, "\(json)")
        let error = try #require(try jsonObject(json.standardOutput)["error"] as? [String: Any])
        #expect((error["code"] as? String)?.isEmpty == false)
        #expect((error["message"] as? String)?.isEmpty == false)
        if let value = input.value { #expect(!json.standardOutput.contains(value), "\(json)") }

        #expect(try sandbox.snapshot() == before)
    }
}
