import Foundation
import TestSupport
import Testing

/// Human output never hands a terminal a control character: keys, values and messages that hold one print it
/// escaped (`\xHH`, `\u{HH}`, and `\\` for a backslash), byte for byte as README's vaultctl section says;
/// `--json` is unchanged.
@Suite struct TerminalOutputTests {
    /// ESC ] 0 ; ... BEL retitles a terminal, ESC [ 2 J clears it.
    static let hostileKey = "\u{1b}]0;pwned\u{07}x\u{1b}[2J"
    /// A C1 CSI (U+009B), DEL and a backslash.
    static let c1Key = "c1\u{9b}m\u{7f}\\"

    @Test func listPrintsKeysWithControlCharactersEscaped() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.succeed(["prefs", "set", "ui", Self.hostileKey, "a\\b"])
        try sandbox.succeed(["prefs", "set", "ui", Self.c1Key, "v"])
        let list = try sandbox.succeed(["prefs", "list", "ui"])
        #expect(
            Array(list.standardOutput.utf8)
                == Array(
                    """
                    KEY                       TYPE    SIZE  EXPIRES
                    \\x1b]0;pwned\\x07x\\x1b[2J  string  3     never
                    c1\\u{9b}m\\x7f\\\\           string  1     never

                    """.utf8), "\(list)")
        #expect(list.standardError.isEmpty)

        // --json stays the machine format: the key as JSON escapes it.
        let json = try sandbox.succeed(["--json", "prefs", "list", "ui"])
        #expect(json.standardOutput.contains(#""key" : "\u001b]0;pwned\u0007x\u001b[2J""#), "\(json)")
    }

    @Test func messagesOnStderrEscapeTheKeyTheyName() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeStore()
        let missing = try sandbox.run(["prefs", "get", "ui", Self.hostileKey])
        #expect(missing.status == 66)
        #expect(missing.standardOutput.isEmpty)
        #expect(
            Array(missing.standardError.utf8)
                == Array(
                    (#"vaultctl: notFound: store "ui" (\#(sandbox.directory)/ui.prefs) has no key "#
                        + #""\x1b]0;pwned\x07x\x1b[2J""#).utf8 + [0x0A]), "\(missing)")
    }

    @Test func getPrintsAPlainValueAsItIsAndAValueWithControlCharactersEscaped() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.succeed(["prefs", "set", "ui", "path", #"C:\new\x1b"#])
        try sandbox.succeed(["prefs", "set", "ui", "lines", "a\tb\nc"])
        try sandbox.succeed(["prefs", "set", "ui", "clear", "a\u{1b}[2Jb\\"])

        // Backslashes, tabs and line feeds of a plain value are the value: `$(vaultctl prefs get ...)` keeps them.
        let path = try sandbox.succeed(["prefs", "get", "ui", "path"])
        #expect(path.standardOutput == #"C:\new\x1b"# + "\n" && path.standardError.isEmpty, "\(path)")
        let lines = try sandbox.succeed(["prefs", "get", "ui", "lines"])
        #expect(lines.standardOutput == "a\tb\nc\n" && lines.standardError.isEmpty, "\(lines)")

        let clear = try sandbox.succeed(["prefs", "get", "ui", "clear"])
        #expect(Array(clear.standardOutput.utf8) == Array(#"a\x1b[2Jb\\"#.utf8 + [0x0A]), "\(clear)")
        #expect(
            clear.standardError
                == "vaultctl: the value holds control characters and is shown escaped; --json gives its exact text\n")
        let json = try sandbox.succeed(["--json", "prefs", "get", "ui", "clear"])
        #expect(json.standardOutput.contains(#""value" : "a\u001b[2Jb\\""#), "\(json)")
    }

    /// The libraries' log lines (`--verbose`) are diagnostics: on stderr through the same escaping, not on
    /// stdout as swift-log's default handler would print them.
    @Test func libraryLogLinesGoToStderrThroughTheSameEscaping() throws {
        let sandbox = try PrefsSandbox()
        try sandbox.makeDamagedStore()
        let repair = try sandbox.run(["--verbose", "prefs", "repair", "ui"])
        #expect(repair.status == 0, "\(repair)")
        #expect(!repair.standardOutput.contains("prefskv:"), "\(repair)")
        #expect(
            repair.standardError.split(separator: "\n").contains {
                $0.hasPrefix("vaultctl: error: prefskv: recovered damaged store \(sandbox.directory)/ui.prefs")
            }, "\(repair)")
    }
}
