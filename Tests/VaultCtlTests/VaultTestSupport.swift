// Support for the `vaultctl vault` tests: a vault directory for one test, and scripts run in a private keyring
// session that call the built vaultctl the way a user does, each call's stdout, stderr, exit code and time kept
// in a file for the test to read. Secrets travel only through files fed to stdin, and every run checks that
// none of them reached a command line, an output that did not ask for it, or the vault file.
import Foundation
import Glibc
import TestSupport
import Testing

/// A vault directory (`<sandbox>/vault`, created by vaultctl itself) and an `io` directory of step results.
final class VaultSandbox {
    let sandbox: PrefsSandbox
    /// Values given to `input`: none may appear in a script, in a step's output (unless the step reveals), or
    /// in the vault's files.
    private(set) var secrets: [String] = []

    init() throws {
        sandbox = try PrefsSandbox()
        try FileManager.default.createDirectory(atPath: io, withIntermediateDirectories: false)
    }

    var vaultDirectory: String { sandbox.path("vault") }
    var io: String { sandbox.path("io") }
    /// The data file of vault `service`.
    func vaultFile(_ service: String = "app") -> String { vaultDirectory + "/" + service + ".prefs" }

    /// A fresh secret: unique, so that finding it anywhere means it leaked.
    static func secret(_ label: String) -> String {
        "\(label)-\(KeyringSession.randomID().prefix(12))"
    }

    /// Writes `text` as the standard input of step `step` and remembers it as a secret.
    func input(_ step: String, _ text: String, secret: String? = nil) throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: io + "/" + step + ".in"))
        if let secret { secrets.append(secret) }
    }

    // MARK: Running

    /// In scripts: `V NAME ARGS...` runs `vaultctl --dir <vault directory> ARGS` with `$IO/NAME.in` (or nothing)
    /// on stdin and keeps its stdout, stderr, exit code and milliseconds under `$IO/NAME.*`; `PAUSE NAME` waits
    /// until the test has run its handler for NAME; `VAULT_ID STEP` prints the vaultId of a `--json vault
    /// status` step. Plus KeyringSession's `LOCK`, `UNLOCK`, `$H`.
    static let prelude = """
        V() {
          local name=$1; shift
          local input=/dev/null
          [ -e "$IO/$name.in" ] && input="$IO/$name.in"
          local start; start=$(date +%s%N)
          "$VAULTCTL" --dir "$VDIR" "$@" <"$input" >"$IO/$name.out" 2>"$IO/$name.err"
          echo $? >"$IO/$name.rc"
          echo $(( ($(date +%s%N) - start) / 1000000 )) >"$IO/$name.ms"
        }
        PAUSE() {
          : >"$IO/$1.ready"
          local end=$((SECONDS + 300))
          while [ "$SECONDS" -lt "$end" ]; do [ -e "$IO/$1.go" ] && return 0; sleep 0.01; done
          echo "PAUSE $1: the test never said go in 300 s" >&2; exit 99
        }
        VAULT_ID() { sed -n 's/^  "vaultId" : "\\([0-9a-f]*\\)",\\{0,1\\}$/\\1/p' "$IO/$1.out"; }

        """

    /// Runs `script` in a fresh private session of kind `mode`, running `pauses[NAME]` when the script says
    /// `PAUSE NAME`. Then checks that no secret leaked: not in the script, not in any step's stdout (except the
    /// steps in `revealing`) or stderr, not in the vault's files.
    @discardableResult
    func run(
        _ mode: KeyringSession.Mode = .keyring, revealing: Set<String> = [], pauses: [String: () throws -> Void] = [:],
        script: String, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> ChildResult {
        for secret in secrets {
            #expect(!script.contains(secret), "a secret is in a command line", sourceLocation: sourceLocation)
        }
        let box = ScenarioBox()
        let full = Self.prelude + script
        let environment: [String: String?] = ["VDIR": vaultDirectory, "IO": io]
        let thread = Thread {
            box.finish(Result { try KeyringSession.scenario(mode, script: full, environment: environment) })
        }
        thread.start()
        var handled: Set<String> = []
        var handlerError: (any Error)?
        while !box.isDone {
            for (name, handler) in pauses where !handled.contains(name) && fileExists(io + "/" + name + ".ready") {
                handled.insert(name)
                do { try handler() } catch { handlerError = handlerError ?? error }
                _ = FileManager.default.createFile(atPath: io + "/" + name + ".go", contents: nil)
            }
            usleep(10_000)
        }
        let result = try box.result()
        if let handlerError { throw handlerError }
        #expect(
            handled == Set(pauses.keys), "the script never paused at \(Set(pauses.keys).subtracting(handled))",
            sourceLocation: sourceLocation)
        try checkNoSecretLeaked(revealing: revealing, sourceLocation: sourceLocation)
        return result
    }

    /// What step `name` left: its exit code, stdout, stderr and time. Fails the test when it never ran.
    func step(_ name: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> StepResult {
        func read(_ suffix: String) -> String? {
            (try? Data(contentsOf: URL(fileURLWithPath: io + "/" + name + "." + suffix)))
                .map { String(decoding: $0, as: UTF8.self) }
        }
        let status = try #require(
            read("rc").flatMap { Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) },
            "step \(name) did not run", sourceLocation: sourceLocation)
        return StepResult(
            name: name, status: status, standardOutput: read("out") ?? "", standardError: read("err") ?? "",
            milliseconds: read("ms").flatMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) } ?? -1)
    }

    /// A text file a script wrote into `$IO`, trimmed.
    func output(_ name: String) -> String? {
        (try? String(contentsOfFile: io + "/" + name, encoding: .utf8))?
            .trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The names of the steps that ran.
    var steps: [String] {
        ((try? FileManager.default.contentsOfDirectory(atPath: io)) ?? []).filter { $0.hasSuffix(".rc") }
            .map { String($0.dropLast(3)) }.sorted()
    }

    private func checkNoSecretLeaked(revealing: Set<String>, sourceLocation: SourceLocation) throws {
        guard !secrets.isEmpty else { return }
        for name in steps {
            let result = try step(name, sourceLocation: sourceLocation)
            for secret in secrets {
                #expect(
                    !result.standardError.contains(secret), "step \(name) printed a secret on stderr",
                    sourceLocation: sourceLocation)
                if !revealing.contains(name) {
                    #expect(
                        !result.standardOutput.contains(secret), "step \(name) printed a secret on stdout",
                        sourceLocation: sourceLocation)
                }
            }
        }
        let files = (try? FileManager.default.contentsOfDirectory(atPath: vaultDirectory)) ?? []
        for file in files {
            let bytes = (try? Data(contentsOf: URL(fileURLWithPath: vaultDirectory + "/" + file))) ?? Data()
            for secret in secrets {
                #expect(
                    bytes.range(of: Data(secret.utf8)) == nil, "a secret is in clear in \(file)",
                    sourceLocation: sourceLocation)
            }
        }
    }

    // MARK: Vault file bytes

    /// The records of a PrefsKV file's log, in file order, after the header copy (Documentation/FileFormat.md:
    /// the log starts at 4096, in version 3 with a kind-5 header-copy record, and ends at the low 48 bits of the
    /// word at 256; a record is 32 header bytes, key, value, padding to 8, a 16-byte authenticator when its flags
    /// (byte 6) have bit 2, and a CRC32C of everything before it, from version 5 with the header's generation after
    /// the magic: `recordCRC`).
    static func records(_ bytes: [UInt8]) -> [Record] {
        func u32(_ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) } }
        let logEnd = (0..<6).reduce(0) { $0 | Int(bytes[256 + $1]) << (8 * $1) }
        var records: [Record] = []
        var offset = 4096
        while offset + 32 <= logEnd, bytes[offset..<offset + 4].elementsEqual("PKVr".utf8) {
            let keyLength = u32(offset + 8)
            let valueLength = u32(offset + 12)
            let record = Record(
                offset: offset, kind: bytes[offset + 4], keyLength: keyLength, valueLength: valueLength,
                length: (32 + keyLength + valueLength + 4 + (bytes[offset + 6] & 4 != 0 ? 16 : 0) + 7) & ~7)
            if record.kind != 5 { records.append(record) }
            offset += record.length
        }
        return records
    }

    /// Where the first record after the header copy starts in a version-3 file (sealed: the copy has an
    /// authenticator).
    static func firstRecordOffset(sealed: Bool) -> Int { sealed ? 4096 + 184 : 4096 + 168 }

    struct Record {
        var offset: Int
        var kind: UInt8
        var keyLength: Int
        var valueLength: Int
        var length: Int
        var valueRange: Range<Int> { offset + 32 + keyLength..<offset + 32 + keyLength + valueLength }
        var crcOffset: Int { offset + length - 4 }

        /// Whether the stored CRC32C matches the record's bytes.
        func checksumMatches(_ bytes: [UInt8]) -> Bool {
            recordCRC(bytes[offset..<crcOffset], inFile: bytes) == storedCRC(bytes)
        }

        func storedCRC(_ bytes: [UInt8]) -> UInt32 {
            (0..<4).reduce(0) { $0 | UInt32(bytes[crcOffset + $1]) << (8 * UInt32($1)) }
        }

        /// Recomputes the record's CRC32C after its bytes were changed.
        func fixChecksum(_ bytes: inout [UInt8]) {
            let crc = recordCRC(bytes[offset..<crcOffset], inFile: bytes)
            for i in 0..<4 { bytes[crcOffset + i] = UInt8(truncatingIfNeeded: crc >> (8 * UInt32(i))) }
        }
    }
}

/// One `V` step of a script.
struct StepResult: CustomStringConvertible {
    var name: String
    var status: Int32
    var standardOutput: String
    var standardError: String
    var milliseconds: Int

    /// The non-empty lines of standard output.
    var lines: [String] { standardOutput.split(separator: "\n").map(String.init) }

    var description: String {
        "step \(name): exit \(status) after \(milliseconds) ms\n"
            + "--- stdout\n\(standardOutput)--- stderr\n\(standardError)"
    }

    /// `{"error": {"code": ..., "message": ...}}` parsed (and checked to be one sorted document): the code.
    func errorCode(sourceLocation: SourceLocation = #_sourceLocation) throws -> String? {
        let error = try jsonObject(standardOutput, sourceLocation: sourceLocation)["error"] as? [String: Any]
        #expect((error?["message"] as? String)?.isEmpty == false, "\(self)", sourceLocation: sourceLocation)
        return error?["code"] as? String
    }
}

/// Hands a scenario's result from the thread that ran it to the test.
///
/// `@unchecked Sendable`: every access to `value` holds `lock`.
private final class ScenarioBox: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Result<ChildResult, any Error>?

    func finish(_ result: Result<ChildResult, any Error>) {
        lock.withLock { value = result }
    }

    var isDone: Bool { lock.withLock { value != nil } }

    func result() throws -> ChildResult {
        try lock.withLock { value }!.get()
    }
}

/// Whether anything exists at `path`.
private func fileExists(_ path: String) -> Bool {
    var info = stat()
    return lstat(path, &info) == 0
}
