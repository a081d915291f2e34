import Foundation
import TestSealer
import Testing

@testable import PrefsKV

/// Writes the fuzz targets' seed corpus (committed under Fuzz/Corpus) when PREFSKV_FUZZ_CORPUS names the
/// directory to write to: `make fuzz-corpus`.
@Suite struct FuzzCorpusTests {
    @Test(.enabled(if: Torture.environment["PREFSKV_FUZZ_CORPUS"] != nil))
    func writeTheSeedCorpus() throws {
        let out = Torture.environment["PREFSKV_FUZZ_CORPUS"]!
        for sub in ["open", "record-decoder"] {
            try FileManager.default.createDirectory(atPath: out + "/" + sub, withIntermediateDirectories: true)
        }
        func seed(_ name: String, sealer: (any PrefsSealer)? = nil, _ fill: (PrefsStore) throws -> Void) throws {
            let dir = try TempDir("corpus", memory: true)
            let store = try openStore(dir) {
                $0.sealer = sealer
                $0.autoCompactionThreshold = nil
            }
            try fill(store)
            // The file up to the end of its log: the preallocated zeros after it add nothing.
            let bytes = Array(try readBytes(store.path).prefix(4096 + (try store.stats().logBytes)))
            try writeBytes(bytes, to: "\(out)/open/\(name).prefs")
            try writeBytes(Array(bytes[4096...]), to: "\(out)/record-decoder/\(name).log")
        }
        try seed("empty") { _ in }
        try seed("every-type") { store in
            try store.set(true, forKey: "bool")
            try store.set(Int64(-7), forKey: "int")
            try store.set(2.5, forKey: "double")
            try store.set("dark", forKey: "theme")
            try store.set(Data([0, 1, 2]), forKey: "bytes")
            try store.set(["a", "b"], forKey: "strings")
            try store.set("soon", forKey: "expiring", expiresAfter: .seconds(86400))
        }
        try seed("transactions-and-deletes") { store in
            try store.set("one", forKey: "alpha")
            try store.write { tx in
                try tx.set(1, forKey: "bravo")
                try tx.set(2, forKey: "charlie")
                tx.removeValue(forKey: "alpha")
            }
            try store.removeValue(forKey: "bravo")
            try store.removeAll()
            try store.set(3, forKey: "delta")
        }
        try seed("sealed", sealer: TestSealer(key: 5)) { store in
            try store.set("token", forKey: "session")
            try store.write { tx in
                try tx.set(1, forKey: "a")
                try tx.set(2, forKey: "b")
            }
        }
        try seed("many-records") { store in
            for i in 0..<60 { try store.set("value \(i)", forKey: "k\(i % 12)") }
        }
    }
}
