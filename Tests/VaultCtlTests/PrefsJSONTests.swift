import Foundation
import TestSupport
import Testing

/// `--json` for every `prefs` command: one document on stdout with sorted keys, nothing on stderr, the exit
/// code of the table, errors included.
@Suite struct PrefsJSONTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var arguments: [String]
        var status: Int32
        /// The top-level keys of the answer.
        var keys: Set<String>
        var input = ""
        var testDescription: String { arguments.joined(separator: " ") + " -> \(status)" }
    }

    static let error: Set<String> = ["error"]

    static let cases: [Case] = [
        Case(arguments: ["list", "ui"], status: 0, keys: ["store", "entries"]),
        Case(arguments: ["get", "ui", "theme"], status: 0, keys: ["key", "type", "value"]),
        Case(arguments: ["set", "ui", "theme", "light"], status: 0, keys: ["store", "key", "type"]),
        Case(arguments: ["set", "ui", "n", "-7", "--type", "int"], status: 0, keys: ["store", "key", "type"]),
        Case(arguments: ["delete", "ui", "theme"], status: 0, keys: ["store", "key", "deleted"]),
        Case(
            arguments: ["stats", "ui"], status: 0,
            keys: [
                "store", "path", "keyCount", "liveBytes", "logBytes", "fileBytes", "recordCount", "garbageRatio",
                "generation", "lastRecovery",
            ]),
        Case(
            arguments: ["verify", "ui"], status: 0,
            keys: ["store", "path", "clean", "sealed", "recordsVerified", "damage"]),
        Case(
            arguments: ["verify", "bad"], status: 65,
            keys: ["store", "path", "clean", "sealed", "recordsVerified", "damage"]),
        Case(
            arguments: ["repair", "bad"], status: 0,
            keys: [
                "store", "path", "clean", "repaired", "kept", "lost", "lostKeys", "revertedKeys", "quarantine", "damage",
            ]),
        Case(
            arguments: ["compact", "ui"], status: 0,
            keys: [
                "store", "path", "fileBytesBefore", "fileBytesAfter", "logBytesBefore", "logBytesAfter", "generation",
            ]),
        Case(arguments: ["export", "ui"], status: 0, keys: ["format", "version", "store", "entries"]),
        Case(
            arguments: ["import", "copy", "-"], status: 0, keys: ["store", "path", "imported", "created"],
            input: "EXPORT"),
        Case(arguments: ["wipe", "ui", "--yes"], status: 0, keys: ["store", "path", "removed", "lockKept"]),
        Case(arguments: ["ls"], status: 0, keys: ["directory", "stores"]),
        // Errors, one per kind of failure.
        Case(arguments: ["wipe", "ui"], status: 64, keys: error),
        Case(arguments: ["set", "ui", "k", "v", "--type", "nope"], status: 64, keys: error),
        Case(arguments: ["set", "ui", "k", "x", "--type", "int"], status: 64, keys: error),
        Case(arguments: ["import", "ui", "-"], status: 64, keys: error, input: "[]"),
        Case(arguments: ["get", "bad", "width"], status: 65, keys: error),
        Case(arguments: ["get", "ui", "missing"], status: 66, keys: error),
        Case(arguments: ["list", "ghost"], status: 66, keys: error),
        Case(arguments: ["get", "sealed", "theme"], status: 78, keys: error),
        Case(arguments: ["nonsense"], status: 64, keys: error),
    ]

    @Test(arguments: cases)
    func everyAnswerIsOneSortedJSONDocumentOnStdout(_ testCase: Case) throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        try sandbox.makeDamagedStore("bad")
        try sandbox.makeStore("sealed")
        try sandbox.markSealed("sealed")
        let input =
            testCase.input == "EXPORT"
            ? try sandbox.succeed(["prefs", "export", "ui"]).standardOutput : testCase.input

        let result = try sandbox.run(["--json", "prefs"] + testCase.arguments, input: Data(input.utf8))

        #expect(result.status == testCase.status, "\(result)")
        #expect(result.standardError.isEmpty, "\(result)")
        let object = try jsonObject(result.standardOutput)
        #expect(Set(object.keys) == testCase.keys, "\(result)")
        if let error = object["error"] as? [String: Any] {
            #expect(Set(error.keys) == ["code", "message"])
            #expect((error["code"] as? String)?.isEmpty == false)
            #expect((error["message"] as? String)?.isEmpty == false)
        }
    }

    @Test func theSortedDocumentCheckRejectsUnsortedKeysAndSecondDocuments() {
        var sorted = SortedJSONChecker(bytes: Array(#"{"a": [{"b": 1, "c": null}], "d": "x"}"#.utf8))
        #expect(sorted.check() == nil)
        var nested = SortedJSONChecker(bytes: Array(#"{"a": {"c": 1, "b": 2}}"#.utf8))
        #expect(nested.check() != nil)
        var uppercase = SortedJSONChecker(bytes: Array(#"{"a": 1, "B": 2}"#.utf8))
        #expect(uppercase.check() != nil)
        var two = SortedJSONChecker(bytes: Array("{}\n{}".utf8))
        #expect(two.check() != nil)
        var unterminated = SortedJSONChecker(bytes: Array(#"{"a": [1, 2}"#.utf8))
        #expect(unterminated.check() != nil)
    }
}
