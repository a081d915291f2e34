import Foundation
import TestSupport
import Testing

/// The exact bytes of `--json` answers, not only their keys: two-space indent, ` : ` between key and value,
/// keys sorted, "/" and non-ASCII text as they are, doubles as Swift prints them and non-finite ones as
/// strings, an absent value as `null`, one newline after the document.
@Suite struct PrefsJSONBytesTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var type: String
        var text: String
        var typeName: String
        /// The `"value"` member's JSON text.
        var json: String
        var testDescription: String { "\(type) \(text)" }
    }

    static let cases: [Case] = [
        Case(type: "string", text: "välue/ü", typeName: "string", json: #""välue/ü""#),
        Case(type: "int", text: "-3", typeName: "int", json: "-3"),
        Case(type: "bool", text: "true", typeName: "bool", json: "true"),
        Case(type: "double", text: "2.5", typeName: "double", json: "2.5"),
        Case(type: "double", text: "1e-07", typeName: "double", json: "1e-07"),
        Case(type: "double", text: "nan", typeName: "double", json: #""nan""#),
        Case(type: "double", text: "-inf", typeName: "double", json: #""-inf""#),
        Case(type: "data", text: "AQID", typeName: "bytes", json: #""AQID""#),
        Case(type: "json", text: #"{"a":"b/c","é":1}"#, typeName: "json", json: #""{\"a\":\"b/c\",\"é\":1}""#),
        Case(
            type: "strings", text: #"["a/b","ü","x\"y"]"#, typeName: "strings",
            json: "[\n    \"a/b\",\n    \"ü\",\n    \"x\\\"y\"\n  ]"),
    ]

    @Test(arguments: cases)
    func getPrintsEachTypeOfValueExactly(_ testCase: Case) throws {
        let sandbox = try PrefsSandbox()
        if testCase.type == "double", !(Double(testCase.text)?.isFinite ?? true) {
            // `prefs set --type double` takes finite numbers only; a store written by an app may hold any
            // Double, and an export carries it as "nan", "inf" or "-inf".
            let document = sandbox.path("k.json")
            try Data(
                #"{"format":"prefskv-export","version":1,"store":"ui","entries":[{"key":"k","type":"double","value":"\#(testCase.text)"}]}"#
                    .utf8
            ).write(to: URL(fileURLWithPath: document))
            try sandbox.succeed(["prefs", "import", "ui", document])
        } else {
            try sandbox.succeed(["prefs", "set", "ui", "k", "--type", testCase.type, "--", testCase.text])
        }

        let result = try sandbox.succeed(["--json", "prefs", "get", "ui", "k"])

        #expect(
            result.standardOutput
                == "{\n  \"key\" : \"k\",\n  \"type\" : \"\(testCase.typeName)\",\n  \"value\" : \(testCase.json)\n}\n")
    }

    /// Answers about a store `ui` holding theme="dark"; `PATH` stands for its data file.
    static let answers: [(arguments: [String], status: Int32, text: String)] = [
        (
            ["list", "ui"], 0,
            """
            {
              "entries" : [
                {
                  "expiresAt" : null,
                  "key" : "theme",
                  "size" : 4,
                  "type" : "string"
                }
              ],
              "store" : "ui"
            }

            """
        ),
        (
            ["stats", "ui"], 0,
            """
            {
              "fileBytes" : 8192,
              "garbageRatio" : 0,
              "generation" : 0,
              "keyCount" : 1,
              "lastRecovery" : null,
              "liveBytes" : 48,
              "logBytes" : 48,
              "path" : "PATH",
              "recordCount" : 1,
              "store" : "ui"
            }

            """
        ),
        (
            ["get", "ui", "nope"], 66,
            #"""
            {
              "error" : {
                "code" : "notFound",
                "message" : "store \"ui\" (PATH) has no key \"nope\""
              }
            }

            """#
        ),
    ]

    @Test(arguments: answers)
    func answerIsExactlyTheDocument(_ arguments: [String], _ status: Int32, _ text: String) throws {
        let sandbox = try PrefsSandbox()
        try sandbox.succeed(["prefs", "set", "ui", "theme", "dark"])

        let result = try sandbox.run(["--json", "prefs"] + arguments)

        #expect(result.status == status)
        #expect(result.standardError.isEmpty)
        #expect(result.standardOutput == text.replacing("PATH", with: sandbox.path("ui.prefs")))
    }
}
