// Secret Service commands: one call of the libsecret wrapper per process, its outcome as one line on stdout.
//
//   secret-store  VAULT KEY [--text] [--collection ALIAS]
//                                      stores the bytes read from stdin (hex-encoded) under attributes
//                                      vault=VAULT key=KEY format=1, in the collection ALIAS (default:
//                                      "default"); prints "stored"
//   (secret-store, secret-lookup and secret-clear take `--service NAME`: then the attributes are a format-2
//   vault's, vault=VAULT key=KEY format=2 service=NAME)
//   secret-lookup VAULT KEY [--after FILE]
//                                      prints "found <hex>", "absent", "several <n>" (that many items match)
//                                      or "elsewhere <path>" (the one match is outside the default collection);
//                                      --after: connects and reads the lock state first, creates FILE.ready,
//                                      and looks up once FILE exists (the deadline counts from then)
//   secret-clear  VAULT KEY            prints "cleared" or "nothing"
//   secret-state                       prints "unlocked", "locked" or "missing" (the default collection)
//   secret-lock                        locks the default collection through the wrapper; prints "locked"
//   secret-probe                       prints "collections <n> default <path>"
//
// A failure prints "failure <kind> <domain> <code> <elapsed-ms>" and exits 1. Every command is bounded by
// VAULT_TEST_DEADLINE_MS (default 2000). Elapsed time is printed for every outcome on stderr as "elapsed <ms>".
import Glibc

@testable import SecureVault

enum SecretCommands {
    static func run(_ command: String, _ arguments: [String]) -> Int32 {
        let deadlineMilliseconds = getenv("VAULT_TEST_DEADLINE_MS").flatMap { Int(String(cString: $0)) } ?? 2000
        let deadline = Duration.milliseconds(deadlineMilliseconds)
        let schema = LibSecret.Schema.vaultMasterKey
        func attributes() -> [String: String] {
            precondition(arguments.count >= 2, "\(command) needs VAULT and KEY")
            if let index = arguments.firstIndex(of: "--service"), index + 1 < arguments.count {
                return ["vault": arguments[0], "key": arguments[1], "format": "2", "service": arguments[index + 1]]
            }
            return ["vault": arguments[0], "key": arguments[1], "format": "1"]
        }
        let start = ContinuousClock.now
        func elapsed() -> Int {
            let d = ContinuousClock.now - start
            return Int(d.components.seconds * 1000 + d.components.attoseconds / 1_000_000_000_000_000)
        }
        do {
            let line: String
            switch command {
            case "secret-store":
                let input = readLine(strippingNewline: true) ?? ""
                guard let bytes = hexDecode(input) else {
                    writeToStandardError("secret-store: stdin is not hex\n")
                    return 64
                }
                let text = arguments.contains("--text")
                let collection = arguments.firstIndex(of: "--collection").map { arguments[$0 + 1] } ?? "default"
                try LibSecret.store(
                    schema: schema, attributes: attributes(), label: "vault-test-helper \(arguments[0])",
                    secret: SecretBytes(bytes),
                    contentType: text ? LibSecret.textContentType : LibSecret.binaryContentType,
                    collection: collection, deadline: deadline)
                line = "stored"
            case "secret-lookup":
                if let index = arguments.firstIndex(of: "--after"), index + 1 < arguments.count {
                    // Connected first (the service proxy and the lock state, no session), then the lookup once
                    // FILE exists; FILE.ready tells the script that the process is connected and waiting.
                    _ = try LibSecret.collectionState(deadline: deadline)
                    let file = arguments[index + 1]
                    let ready = creat(file + ".ready", 0o600)
                    if ready >= 0 { close(ready) }
                    while access(file, F_OK) != 0 { usleep(10_000) }
                }
                switch try LibSecret.lookup(schema: schema, attributes: attributes(), deadline: deadline) {
                case .found(let secret): line = "found " + secret.bytes.withUnsafeBytes { hexEncode($0) }
                case .absent: line = "absent"
                case .several(let paths): line = "several \(paths.count)"
                case .elsewhere(let path, _): line = "elsewhere \(path)"
                }
            case "secret-clear":
                line =
                    try LibSecret.clear(schema: schema, attributes: attributes(), deadline: deadline).deleted > 0
                    ? "cleared" : "nothing"
            case "secret-state":
                switch try LibSecret.collectionState(deadline: deadline) {
                case .unlocked: line = "unlocked"
                case .locked: line = "locked"
                case .missing: line = "missing"
                }
            case "secret-lock":
                line = try LibSecret.lock(deadline: deadline) ? "locked" : "missing"
            case "secret-probe":
                let probe = try LibSecret.probe(deadline: deadline)
                line = "collections \(probe.collections.count) default \(probe.defaultCollectionPath ?? "-")"
            default:
                return 64
            }
            print(line)
            writeToStandardError("elapsed \(elapsed())\n")
            return 0
        } catch {
            print("failure \(error.kind) \(error.domain ?? "-") \(error.code.map(String.init) ?? "-") \(elapsed())")
            writeToStandardError("elapsed \(elapsed())\nmessage \(error.message)\n")
            return 1
        }
    }

    static func hexEncode(_ bytes: UnsafeRawBufferPointer) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0xF)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func hexDecode(_ text: String) -> [UInt8]? {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else { return nil }
        func nibble(_ c: UInt8) -> UInt8? {
            switch c {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
            default: return nil
            }
        }
        var out: [UInt8] = []
        var index = 0
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }
}
