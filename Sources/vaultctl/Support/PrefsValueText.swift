import ArgumentParser
import FoundationEssentials
import PrefsKV
import SystemLayer

/// The `--type` of `prefs set`.
enum ValueTypeArgument: String, CaseIterable, ExpressibleByArgument {
    case string, int, double, bool, json, data, strings

    init?(argument: String) {
        // `bytes` is what `list`, `get --json` and exports call `data`.
        self.init(rawValue: argument == "bytes" ? "data" : argument)
    }

    static var allValueStrings: [String] { allCases.map(\.rawValue) }

    /// Parses a command-line value of this type. Messages name the key, never the value.
    func value(from text: String, key: String) throws -> PrefsValue {
        func invalid(_ what: String) -> CLIFailure {
            .usage("the value given for key \"\(key)\" is not \(what)")
        }
        switch self {
        case .string:
            return .string(text)
        case .int:
            guard let number = Int64(text) else { throw invalid("an integer (a 64-bit signed decimal)") }
            return .int(number)
        case .double:
            // Finite only: `nan` and a literal past Double's range (1e400 parses as infinity) are typos here.
            guard let number = Double(text), number.isFinite else {
                throw invalid("a finite number (e.g. 1.5, -2e10; at most about 1.8e308)")
            }
            return .double(number)
        case .bool:
            switch text {
            case "true", "1": return .bool(true)
            case "false", "0": return .bool(false)
            default: throw invalid("a bool (true or false)")
            }
        case .json:
            guard (try? JSONDecoder().decode(AnyJSON.self, from: Data(text.utf8))) != nil else {
                throw invalid("valid JSON")
            }
            return .json(text)
        case .data:
            guard let bytes = Data(base64Encoded: text) else { throw invalid("valid base64") }
            return .bytes(Array(bytes))
        case .strings:
            guard let strings = try? JSONDecoder().decode([String].self, from: Data(text.utf8)) else {
                throw invalid("a JSON array of strings")
            }
            return .strings(strings)
        }
    }
}

/// Any JSON document: decoding it checks that text is JSON, nothing more.
private struct AnyJSON: Decodable {
    init(from decoder: any Decoder) throws {
        if var array = try? decoder.unkeyedContainer() {
            while !array.isAtEnd { _ = try array.decode(AnyJSON.self) }
            return
        }
        if let object = try? decoder.container(keyedBy: AnyKey.self) {
            for key in object.allKeys { _ = try object.decode(AnyJSON.self, forKey: key) }
            return
        }
        let single = try decoder.singleValueContainer()
        if single.decodeNil() { return }
        if (try? single.decode(Bool.self)) != nil { return }
        if (try? single.decode(String.self)) != nil { return }
        _ = try single.decode(Double.self)
    }

    private struct AnyKey: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }
}

extension PrefsValue {
    /// What plain `prefs get` prints: the bare value. Bytes as base64, JSON as its text, string arrays as a
    /// JSON array text, doubles as Swift prints them (`1.5`, `1e-07`, `nan`, `inf`).
    var plainText: String {
        switch self {
        case .bool(let flag): return flag ? "true" : "false"
        case .int(let number): return String(number)
        case .double(let number): return "\(number)"
        case .string(let text), .json(let text): return text
        case .bytes(let bytes): return Data(bytes).base64EncodedString()
        case .strings(let strings):
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.withoutEscapingSlashes]
            return (try? encoder.encode(strings)).map { String(decoding: $0, as: UTF8.self) } ?? "[]"
        }
    }
}

/// Milliseconds since the Unix epoch as `yyyy-MM-dd'T'HH:mm:ss'Z'` (UTC).
func utcTimestamp(milliseconds: Int64) -> String {
    guard let time = Sys.utcTime(secondsSinceEpoch: milliseconds / 1000) else { return "\(milliseconds) ms" }
    return time.formatted(dateSeparator: "-", timeSeparator: ":")
}

/// Reads all of `path`, or standard input for `-`.
func readInput(_ path: String) throws -> Data {
    let read: Result<[UInt8], Errno>
    if path == "-" {
        read = Sys.readToEnd(Sys.standardInput)
    } else {
        let fd: Int32
        switch Sys.openFollowingLinks(path) {
        case .success(let opened): fd = opened
        case .failure(let error):
            let (code, exitCode): (String, Int32)
            if error == .noEntry {
                (code, exitCode) = ("notFound", ExitStatus.notFound)
            } else if error == .accessDenied || error == .notPermitted {
                (code, exitCode) = ("permissionDenied", ExitStatus.permission)
            } else {
                (code, exitCode) = ("io", ExitStatus.ioError)
            }
            throw CLIFailure(code: code, message: "cannot read \(path): \(error.text)", exitCode: exitCode)
        }
        read = Sys.readToEnd(fd)
        Sys.close(fd)
    }
    switch read {
    case .success(let bytes): return Data(bytes)
    case .failure(let error):
        throw CLIFailure(
            code: "io", message: "cannot read \(path == "-" ? "standard input" : path): \(error.text)",
            exitCode: ExitStatus.ioError)
    }
}
