// A differential fault harness (issue 35, "Trust V"): one damaged file, copied, and read by every tool that reads
// a store: `vaultctl prefs verify`, `prefs export` and `prefs repair` (the built binary), and the library's
// `PrefsStore.verify`, its opens under `.fail` and `.salvage` and `PrefsStore.repair`. Their answers must agree:
//
//   (a) after a repair that succeeded, every reading command opens the store (vaultctl export exits 0; the library
//       opens it under `.fail` and reads every value): nothing is left unopenable;
//   (b) a repair that says "clean, nothing changed" (vaultctl `"repaired": false`, the library's nil) comes only
//       after a verify that said clean and an export that succeeded;
//   (c) every value a read returns was written under its key, and every key whose records verify counted intact
//       (its latest record, and its transaction's commit record, outside every damaged range) still holds its value;
//   (d) a damage report (verify's ranges, a recovery's lost keys and ranges) names only keys that were written;
//   (e) no message says "read-only directory": every directory here is writable;
//   (f) a command that refused a damaged store, and verify always, leave its file byte-identical.
//
// Stores are made by `vaultctl prefs import` (one committed transaction, then single writes) and through
// `PrefsStore` (plain, and sealed with the tests' sealer: vaultctl, which has no key for it, only verifies those),
// with fewer keys than the persisted index needs and more (IndexTable.minimumKeys, lowered by PREFSKV_INDEX_TAIL),
// so that opens run both from a persisted table and from the whole log. Each round writes one seeded damage into
// real copies of the data file: a flipped bit, a zeroed page, a truncation, or garbage from near the log end to the
// end of the file.
//
// Knobs (the other torture suites' are in Tests/PrefsKVTests/Torture.swift):
//
//   PREFSKV_TORTURE=long          the long mode (`make torture`)
//   TORTURE_AGREEMENT_ROUNDS=N    damaged copies (default 64 short, 2000 long)
//   TORTURE_SECONDS=N             the time budget (default 60 short, 900 long): the loop stops at its count or its
//                                 budget, whichever comes first, and reports what it did
//   TORTURE_SEED=N                replays a run: a failure prints its seed and round
//   TORTURE_REPORT=PATH           also appends the summary line there
import Foundation
import Logging
import PrefsKV
import TestKit
import TestSealer
import TestSupport
import Testing

@Suite(.serialized) struct DamageAgreementTests {
    @Test func verifyExportAndRepairAgreeOnEveryDamageAndRepairLeavesNoStoreUnopenable() throws {
        let seed = AgreementKnobs.seed
        let threshold = AgreementKnobs.indexMinimumKeys
        // Both sides of the persisted index's threshold (4 and 300 keys when tables come every 8 records).
        let sizes = (threshold / 2 >= 4 ? [threshold / 2] : [4]) + [max(300, threshold + 44)]
        var random = SplitMix(state: seed)
        var fixtures: [AgreementFixture] = []
        for keys in sizes {
            for thenWrites in [false, true] {
                fixtures.append(try AgreementFixture.importedByVaultctl(keys: keys, thenWrites: thenWrites))
            }
            for sealed in [false, true] {
                fixtures.append(
                    try AgreementFixture.writtenThroughTheLibrary(keys: keys, sealed: sealed, seed: random.next()))
            }
        }
        for fixture in fixtures {
            // The premise: a table exactly where the store has enough keys.
            let tables = "\(fixture.tables.count) persisted index tables for \(fixture.keyCount) keys"
            #expect(
                fixture.tables.isEmpty == (fixture.keyCount < threshold),
                "\(fixture.name): \(tables) (threshold \(threshold))")
        }

        let cli = try PrefsSandbox()
        let repaired = try PrefsSandbox()
        let salvaged = try PrefsSandbox()
        var tally = Tally()
        let rounds = AgreementKnobs.rounds
        let deadline = Date().addingTimeInterval(AgreementKnobs.seconds)
        let started = Date()
        for round in 0..<rounds where Date() < deadline {
            let fixture = fixtures[round % fixtures.count]
            let kind = AgreementDamage.allCases[(round / fixtures.count) % AgreementDamage.allCases.count]
            var roundRandom = SplitMix(state: seed ^ (UInt64(round + 1) &* 0xD6E8_FEB8_6659_FD93))
            let damage = kind.apply(to: fixture, using: &roundRandom)
            let check = RoundCheck(
                fixture: fixture, damaged: damage.bytes, round: round,
                context: "round \(round), \(fixture.name), \(damage.what) (TORTURE_SEED=\(seed))",
                region: fixture.region(of: damage.firstChanged))
            tally.begin(
                store: fixture.name, kind: kind,
                beforeATable: fixture.tables.contains { damage.firstChanged < $0.lowerBound })
            do {
                if fixture.sealer == nil {
                    try check.throughVaultctl(in: cli, tally: &tally)
                } else {
                    try check.verifyThroughVaultctl(in: cli, tally: &tally)
                }
                try check.throughTheLibrary(
                    repairIn: repaired.directory, salvageIn: salvaged.directory, tally: &tally)
            } catch {
                Issue.record("\(check.context): \(error)")
                throw error
            }
        }

        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        let stores = fixtures.map { "\($0.name) (\($0.tables.isEmpty ? "no" : "\($0.tables.count)") tables)" }
        TortureReport.line(
            "damage agreement: \(tally.rounds) damaged copies in \(seconds) s on \(fixtures.count) stores "
                + "(\(stores.joined(separator: ", "))): \(tally.kindSummary); \(tally.beforeATable) with the first "
                + "damaged byte before a persisted table. vaultctl: export refused \(tally.exportsRefused), repair "
                + "repaired \(tally.cliRepaired), said clean \(tally.cliSaidClean); library: repair repaired "
                + "\(tally.libraryRepaired), said clean \(tally.librarySaidClean); .salvage read every value and "
                + "reported no recovery where verify found damage \(tally.silentSalvages); "
                + "\(tally.intactKeysCompared) keys verify counted intact compared with a read. Rounds failing: "
                + Check.allCases.map { "\($0.label) \(tally.failedRounds[$0]?.count ?? 0)" }.joined(separator: ", ")
                + " (each must be 0)")
        for check in Check.allCases {
            let failed = tally.failedRounds[check] ?? []
            guard !failed.isEmpty else { continue }
            let examples = (tally.examples[check] ?? []).map { "\n  - " + $0 }.joined()
            let listed = failed.prefix(12).map(String.init).joined(separator: ", ") + (failed.count > 12 ? ", ..." : "")
            let message =
                "\(check.label) \(check.rawValue): \(failed.count) of \(tally.rounds) rounds (by store: "
                + "\(tally.byStore(check)); first damaged byte: \(tally.byRegion(check)); rounds \(listed); "
                + "TORTURE_SEED=\(seed)); for example:\(examples)"
            Issue.record("\(message)")
        }
    }
}

// MARK: - Knobs

private enum AgreementKnobs {
    static let environment = ProcessInfo.processInfo.environment
    static let long = environment["PREFSKV_TORTURE"] == "long" || environment["PREFSKV_LONG_TESTS"] == "1"
    static var rounds: Int { environment["TORTURE_AGREEMENT_ROUNDS"].flatMap(Int.init) ?? (long ? 2000 : 64) }
    static var seconds: Double { environment["TORTURE_SECONDS"].flatMap(Double.init) ?? (long ? 900 : 60) }

    /// TORTURE_SEED, else a fresh one.
    static var seed: UInt64 {
        if let fixed = environment["TORTURE_SEED"].flatMap(UInt64.init) { return fixed }
        var generator = SystemRandomNumberGenerator()
        return UInt64.random(in: 1...UInt64.max, using: &generator)
    }

    /// The fewest keys a store has before tables are written (IndexTable.minimumKeys: 256, or PREFSKV_INDEX_TAIL
    /// when that is lower).
    static var indexMinimumKeys: Int {
        guard let tail = environment["PREFSKV_INDEX_TAIL"].flatMap(Int.init), tail > 0 else { return 256 }
        return min(256, tail)
    }
}

// MARK: - What was written

/// A value as `prefs export` writes it: its type and its JSON value as text.
private struct Exported: Hashable, CustomStringConvertible {
    var type: String
    var value: String

    static func string(_ text: String) -> Exported { Exported(type: "string", value: text) }
    static func int(_ number: Int64) -> Exported { Exported(type: "int", value: String(number)) }
    static func bytes(_ data: Data) -> Exported { Exported(type: "bytes", value: data.base64EncodedString()) }

    var description: String { "\(type) \(value.count > 40 ? value.prefix(40) + "..." : value)" }

    /// The entries of an export document by key, nil when it is not one.
    static func entries(of document: Data) -> [String: Exported]? {
        guard let object = try? JSONSerialization.jsonObject(with: document) as? [String: Any],
            object["format"] as? String == "prefskv-export", let entries = object["entries"] as? [[String: Any]]
        else { return nil }
        var out: [String: Exported] = [:]
        for entry in entries {
            guard let key = entry["key"] as? String, let type = entry["type"] as? String, let value = entry["value"]
            else { return nil }
            switch value {
            case let text as String: out[key] = Exported(type: type, value: text)
            case let number as NSNumber:
                out[key] = Exported(type: type, value: type == "int" ? String(number.int64Value) : number.stringValue)
            default: out[key] = Exported(type: type, value: String(describing: value))
            }
        }
        return out
    }
}

/// A store file and everything known about what was written into it.
private struct AgreementFixture {
    let name: String
    let sealer: TestSealer?
    /// The undamaged data file.
    let bytes: [UInt8]
    let logEnd: Int
    /// Where the header copy ends.
    let firstRecord: Int
    /// The persisted index records in the log.
    let tables: [Range<Int>]
    /// The key fields of its set and delete records.
    let keyFields: [Range<Int>]
    /// Every value each key ever held (a key only ever removed has an empty set).
    let history: [String: Set<Exported>]
    /// The live state: what an undamaged store exports.
    let final: [String: Exported]
    /// The bytes a key's final state rests on: its latest record (the whole operation's records where names are
    /// sealed) and, in a transaction, the commit record.
    let decisive: [String: [Range<Int>]]
    /// Keys written (removed ones included).
    let keyCount: Int

    /// Where `offset` lies, for the failure reports.
    func region(of offset: Int) -> String {
        if offset < 4096 { return "in the header page" }
        guard let last = tables.last else { return "in a store without tables" }
        if tables.contains(where: { $0.contains(offset) }) { return "inside a table" }
        return offset < last.lowerBound ? "before a table" : "after the last table"
    }

    /// Keys whose decisive bytes lie outside every reported range and that no report names: what `damage` counts
    /// intact. Nil damage (no report at all) counts nothing intact.
    func intactKeys(_ damage: [ReportedDamage]?) -> Set<String> {
        guard let damage else { return [] }
        let named = Set(damage.flatMap(\.keys))
        return Set(
            history.keys.filter { key in
                guard let ranges = decisive[key], !named.contains(key) else { return false }
                return !ranges.contains { range in damage.contains { $0.range.overlaps(range) } }
            })
    }

    /// `vaultctl prefs import` of `keys` string keys: one committed transaction, and a persisted table after it
    /// when there are enough keys (the store of issue 35). `thenWrites`: then a `set` that overwrites a key, a `set`
    /// of a new int key and a `delete`, single records after the table (a removal after the table makes every open
    /// read the whole log).
    static func importedByVaultctl(keys count: Int, thenWrites: Bool) throws -> AgreementFixture {
        let sandbox = try PrefsSandbox()
        var builder = FixtureBuilder(path: sandbox.path("st.prefs"))
        let document: [String: Any] = [
            "format": "prefskv-export", "store": "st", "version": 1,
            "entries": (0..<count).map { ["key": "k_\($0)", "type": "string", "value": "value-of-k_\($0)-yy"] },
        ]
        let data = try JSONSerialization.data(withJSONObject: document, options: [.sortedKeys])
        try builder.operation(
            Dictionary(uniqueKeysWithValues: (0..<count).map { ("k_\($0)", .string("value-of-k_\($0)-yy")) })
        ) {
            try sandbox.succeed(["prefs", "import", "st", "-"], input: data)
        }
        guard thenWrites else {
            return try builder.finish(name: "vaultctl-import-\(count)", sealer: nil, keyCount: count)
        }
        try builder.operation(["k_1": .string("changed-k_1-zz")]) {
            try sandbox.succeed(["prefs", "set", "st", "k_1", "changed-k_1-zz"])
        }
        try builder.operation(["extra": .int(42)]) {
            try sandbox.succeed(["prefs", "set", "st", "extra", "42", "--type", "int"])
        }
        try builder.operation(["k_2": Exported?.none]) {
            try sandbox.succeed(["prefs", "delete", "st", "k_2"])
        }
        return try builder.finish(name: "vaultctl-import+writes-\(count)", sealer: nil, keyCount: count + 1)
    }

    /// Three handles of `PrefsStore`: half the keys; the other half, a transaction, overwrites and removals; then
    /// two single sets (after the table the second handle left at its close, when the store has one; no removal
    /// there, which would make every open read the whole log).
    static func writtenThroughTheLibrary(keys count: Int, sealed: Bool, seed: UInt64) throws -> AgreementFixture {
        let sandbox = try PrefsSandbox()
        var builder = FixtureBuilder(path: sandbox.path("st.prefs"))
        var random = SplitMix(state: seed)
        let sealer = sealed ? TestSealer(key: 7) : nil
        var configuration = PrefsStore.Configuration()
        configuration.sealer = sealer
        configuration.autoCompactionThreshold = nil
        configuration.logger.logLevel = .critical
        func value(_ key: Int, _ generation: Int, _ random: inout SplitMix) -> LibraryValue {
            switch (key + generation) % 3 {
            case 0:
                .string(
                    "s-\(key)-\(generation)-" + String(repeating: "x", count: Int.random(in: 0..<40, using: &random)))
            case 1: .int(Int64(key) * 1_000_003 + Int64(generation))
            default:
                .bytes(
                    Data(
                        (0..<Int.random(in: 0..<48, using: &random)).map { _ in
                            UInt8.random(in: 0...255, using: &random)
                        }))
            }
        }
        func set(_ store: PrefsStore, _ key: Int, _ generation: Int, _ random: inout SplitMix) throws {
            let v = value(key, generation, &random)
            try builder.operation(["p_\(key)": v.exported]) { try v.set(in: store, forKey: "p_\(key)") }
        }
        do {
            let store = try PrefsStore(id: "st", directory: sandbox.directory, configuration: configuration)
            for key in 0..<count / 2 { try set(store, key, 0, &random) }
        }
        do {
            let store = try PrefsStore(id: "st", directory: sandbox.directory, configuration: configuration)
            for key in count / 2..<count { try set(store, key, 0, &random) }
            let members = Set((0..<4).map { _ in Int.random(in: 0..<count, using: &random) }).sorted()
            let values = members.map { value($0, 1, &random) }
            try builder.operation(
                Dictionary(uniqueKeysWithValues: zip(members, values).map { ("p_\($0)", .some($1.exported)) })
            ) {
                try store.write { tx in
                    for (key, v) in zip(members, values) { try v.set(in: &tx, forKey: "p_\(key)") }
                }
            }
            for _ in 0..<max(2, count / 10) { try set(store, Int.random(in: 0..<count, using: &random), 2, &random) }
            for _ in 0..<2 {
                let key = "p_\(Int.random(in: 0..<count, using: &random))"
                try builder.operation([key: Exported?.none]) { try store.removeValue(forKey: key) }
            }
        }
        do {
            let store = try PrefsStore(id: "st", directory: sandbox.directory, configuration: configuration)
            try set(store, Int.random(in: 0..<count, using: &random), 3, &random)
            try builder.operation(["p_extra": .string("extra")]) { try store.set("extra", forKey: "p_extra") }
        }
        return try builder.finish(
            name: "library-\(sealed ? "sealed" : "plain")-\(count)", sealer: sealer, keyCount: count + 1)
    }
}

/// A value the library fixture writes, and how export shows it.
private enum LibraryValue {
    case string(String)
    case int(Int64)
    case bytes(Data)

    var exported: Exported {
        switch self {
        case .string(let text): .string(text)
        case .int(let number): .int(number)
        case .bytes(let data): .bytes(data)
        }
    }

    func set(in store: PrefsStore, forKey key: String) throws {
        switch self {
        case .string(let text): try store.set(text, forKey: key)
        case .int(let number): try store.set(number, forKey: key)
        case .bytes(let data): try store.set(data, forKey: key)
        }
    }

    func set(in tx: inout PrefsTransaction, forKey key: String) throws {
        switch self {
        case .string(let text): try tx.set(text, forKey: key)
        case .int(let number): try tx.set(number, forKey: key)
        case .bytes(let data): try tx.set(data, forKey: key)
        }
    }
}

/// Records each operation's byte span (the header's log end before and after it) and effects.
private struct FixtureBuilder {
    let path: String
    var operations: [(span: Range<Int>, effects: [String: Exported?])] = []
    var history: [String: Set<Exported>] = [:]
    var final: [String: Exported] = [:]

    init(path: String) { self.path = path }

    /// Runs `body`, which writes `effects` (a nil value removes the key).
    mutating func operation(_ effects: [String: Exported?], _ body: () throws -> Void) throws {
        let before = readFile(path).map(logEnd(of:)) ?? 4096
        try body()
        let after = try #require(readFile(path).map(logEnd(of:)))
        for (key, value) in effects {
            history[key, default: []].formUnion(value.map { [$0] } ?? [])
            final[key] = value
        }
        // An operation that wrote nothing (a key already absent removed) has no bytes on disk.
        if after > before { operations.append((before..<after, effects)) }
    }

    func finish(name: String, sealer: TestSealer?, keyCount: Int) throws -> AgreementFixture {
        let bytes = try #require(readFile(path), "\(name): no store file")
        let end = logEnd(of: bytes)
        let records = try #require(logRecords(bytes, end: end), "\(name): the undamaged log does not parse")
        var decisive: [String: [Range<Int>]] = [:]
        for (span, effects) in operations {
            // Data records only: the header copy (kind 5) and persisted tables (kind 6) hold no key.
            let own = records.filter { span.contains($0.range.lowerBound) && $0.kind != 5 && $0.kind != 6 }
            guard let first = own.first, let last = own.last else { continue }
            let commit = own.count > 1 ? [last.range] : []
            for key in effects.keys {
                let record = own.last { $0.key == key }?.range ?? first.range.lowerBound..<last.range.upperBound
                decisive[key] = [record] + commit
            }
        }
        let fixture = AgreementFixture(
            name: name, sealer: sealer, bytes: bytes, logEnd: end, firstRecord: records[0].range.upperBound,
            tables: records.filter { $0.kind == 6 }.map(\.range),
            keyFields: records.filter { ($0.kind == 1 || $0.kind == 2) && !$0.keyField.isEmpty }.map(\.keyField),
            history: history, final: final,
            decisive: decisive, keyCount: keyCount)
        // The model is the store: an undamaged copy exports exactly `final`.
        let check = try PrefsSandbox()
        #expect(createFile(at: check.path("st.prefs"), bytes))
        var configuration = PrefsStore.Configuration()
        configuration.sealer = sealer
        configuration.logger.logLevel = .critical
        let store = try PrefsStore(id: "st", directory: check.directory, configuration: configuration)
        #expect(store.lastRecovery == nil, "\(name): the undamaged store needed a recovery")
        #expect(Exported.entries(of: try store.exportJSON()) == final, "\(name): the model is not the store")
        return fixture
    }
}

/// One record of a log, read from an undamaged file (Documentation/FileFormat.md, "Records"): a 32-byte header
/// (magic "PKVr", kind, value type, flags, 0, key length, value length, sequence, expiry), the key, the value,
/// padding, a 16-byte authenticator when flagged, a CRC.
private struct LogRecord {
    var range: Range<Int>
    var kind: UInt8
    /// The bytes of its key field (the sealer's tag in a sealed store).
    var keyField: Range<Int>
    /// The key's name in a plain store; nil when there is none or it is sealed.
    var key: String?
}

/// The records from the log start to `end`, nil when they do not tile it exactly.
private func logRecords(_ bytes: [UInt8], end: Int) -> [LogRecord]? {
    func u32(_ at: Int) -> Int { (0..<4).reduce(0) { $0 | Int(bytes[at + $1]) << (8 * $1) } }
    var records: [LogRecord] = []
    var offset = 4096
    while offset < end {
        guard offset + 32 <= end, bytes[offset..<offset + 4].elementsEqual("PKVr".utf8) else { return nil }
        let flags = bytes[offset + 6]
        let keyLength = u32(offset + 8)
        let valueLength = u32(offset + 12)
        let length = (32 + keyLength + valueLength + 4 + (flags & 4 != 0 ? 16 : 0) + 7) & ~7
        guard offset + length <= end else { return nil }
        let key =
            keyLength > 0 && flags & 2 == 0
            ? String(decoding: bytes[offset + 32..<offset + 32 + keyLength], as: UTF8.self) : nil
        records.append(
            LogRecord(
                range: offset..<offset + length, kind: bytes[offset + 4],
                keyField: offset + 32..<offset + 32 + keyLength, key: key))
        offset += length
    }
    return offset == end && !records.isEmpty ? records : nil
}

/// The log end a store file's header names (the low 48 bits of the word at 256).
private func logEnd(of bytes: [UInt8]) -> Int {
    guard bytes.count >= 264 else { return 4096 }
    return (0..<6).reduce(0) { $0 | Int(bytes[256 + $1]) << (8 * $1) }
}

// MARK: - Damage

private enum AgreementDamage: String, CaseIterable {
    case flippedBit, zeroedPage, truncation, garbageTail

    struct Applied {
        var bytes: [UInt8]
        var what: String
        var firstChanged: Int
    }

    func apply(to fixture: AgreementFixture, using random: inout SplitMix) -> Applied {
        var bytes = fixture.bytes
        let end = fixture.logEnd
        switch self {
        case .flippedBit:
            // Mostly anywhere in the log; one time in eight in the header page, two in eight in a record's key field
            // (what names a damaged record's key).
            let at: Int
            switch Int.random(in: 0..<8, using: &random) {
            case 0: at = Int.random(in: 0..<4096, using: &random)
            case 1, 2:
                let field = fixture.keyFields[Int.random(in: 0..<fixture.keyFields.count, using: &random)]
                at = Int.random(in: field, using: &random)
            default: at = Int.random(in: 4096..<end, using: &random)
            }
            let bit = Int.random(in: 0..<8, using: &random)
            bytes[at] ^= UInt8(1 << bit)
            return Applied(bytes: bytes, what: "bit \(bit) of byte \(at) flipped", firstChanged: at)
        case .zeroedPage:
            let page = Int.random(in: 0..<(end + 4095) / 4096, using: &random)
            for i in page * 4096..<min((page + 1) * 4096, bytes.count) { bytes[i] = 0 }
            return Applied(bytes: bytes, what: "page \(page) zeroed", firstChanged: page * 4096)
        case .truncation:
            // Inside the log, the header copy left whole.
            let length = Int.random(in: fixture.firstRecord..<end, using: &random)
            bytes.removeLast(bytes.count - length)
            return Applied(bytes: bytes, what: "truncated to \(length) bytes (log end \(end))", firstChanged: length)
        case .garbageTail:
            // From up to 512 bytes before the log end (its last records) to up to 64 after it, to the file's end.
            let start = min(
                Int.random(in: max(fixture.firstRecord, end - 512)..<end + 64, using: &random), bytes.count - 1)
            for i in start..<bytes.count { bytes[i] = UInt8.random(in: 0...255, using: &random) }
            return Applied(
                bytes: bytes, what: "random bytes from \(start) to the end \(bytes.count) (log end \(end))",
                firstChanged: start)
        }
    }
}

// MARK: - Checks

/// A damaged range as a report gives it.
private struct ReportedDamage {
    var range: Range<Int>
    var keys: [String]

    init(range: Range<Int>, keys: [String]) {
        self.range = range
        self.keys = keys
    }

    init(_ damage: PrefsDamage) { self.init(range: damage.range, keys: damage.keys) }

    /// The `damage` list of a `--json prefs verify` or `prefs repair` answer.
    static func list(_ object: [String: Any]?) -> [ReportedDamage]? {
        guard let list = object?["damage"] as? [[String: Any]] else { return nil }
        return list.map { entry in
            let offset = (entry["offset"] as? NSNumber)?.intValue ?? 0
            let length = max(0, (entry["length"] as? NSNumber)?.intValue ?? 0)
            return ReportedDamage(range: offset..<offset + length, keys: entry["keys"] as? [String] ?? [])
        }
    }
}

private enum Check: String, CaseIterable {
    case unopenableAfterRepair = "left unopenable after a repair that succeeded"
    case repairCalledDamageClean = "repair said clean, nothing changed, where verify or export found damage"
    case valueNeverWritten = "a read returned a key or value that was never written"
    case intactKeyLost = "a key verify counted intact was lost or changed"
    case unwrittenKeyNamed = "a damage report named a key that was never written"
    case readOnlyClaim = "a message said \"read-only directory\" in a writable directory"
    case refusalChangedFile = "verify, or a command that refused, changed the damaged file"
    case damageLeftAfterRepair = "a repaired store still verifies damaged"
    case repairRefused = "repair failed on a store with a header copy intact"
    case salvageOpenFailed = "an open under .salvage failed"

    var label: String {
        switch self {
        case .unopenableAfterRepair: "(a)"
        case .repairCalledDamageClean: "(b)"
        case .valueNeverWritten: "(c) written"
        case .intactKeyLost: "(c) intact"
        case .unwrittenKeyNamed: "(d)"
        case .readOnlyClaim: "(e)"
        case .refusalChangedFile: "(f)"
        case .damageLeftAfterRepair: "[repaired but damaged]"
        case .repairRefused: "[repair refused]"
        case .salvageOpenFailed: "[salvage open failed]"
        }
    }
}

/// What the rounds found: the rounds in which each check failed, and the first examples.
private struct Tally {
    var rounds = 0
    var byKind: [AgreementDamage: Int] = [:]
    var beforeATable = 0
    var exportsRefused = 0
    var cliRepaired = 0
    var cliSaidClean = 0
    var libraryRepaired = 0
    var librarySaidClean = 0
    var silentSalvages = 0
    /// Keys verify counted intact, compared with what a read returned (summed over the reads compared).
    var intactKeysCompared = 0
    var roundsByStore: [String: Int] = [:]
    var failedRounds: [Check: [Int]] = [:]
    var failedByStore: [Check: [String: Int]] = [:]
    var failedByRegion: [Check: [String: Int]] = [:]
    var examples: [Check: [String]] = [:]

    mutating func begin(store: String, kind: AgreementDamage, beforeATable: Bool) {
        rounds += 1
        roundsByStore[store, default: 0] += 1
        byKind[kind, default: 0] += 1
        if beforeATable { self.beforeATable += 1 }
    }

    mutating func fail(_ check: Check, round: Int, store: String, region: String, _ detail: String) {
        if failedRounds[check]?.last != round {
            failedRounds[check, default: []].append(round)
            failedByStore[check, default: [:]][store, default: 0] += 1
            failedByRegion[check, default: [:]][region, default: 0] += 1
        }
        if examples[check, default: []].count < 3 { examples[check, default: []].append(detail) }
    }

    /// "vaultctl-import-300 4 of 8, ..." for the stores where `check` failed.
    func byStore(_ check: Check) -> String {
        (failedByStore[check] ?? [:]).sorted { $0.key < $1.key }
            .map { "\($0.key) \($0.value) of \(roundsByStore[$0.key] ?? 0)" }.joined(separator: ", ")
    }

    /// "2 inside a table, 9 before a table" for the rounds where `check` failed: where their first damaged byte was.
    func byRegion(_ check: Check) -> String {
        (failedByRegion[check] ?? [:]).sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }
            .joined(separator: ", ")
    }

    var kindSummary: String {
        AgreementDamage.allCases.map { "\($0.rawValue) \(byKind[$0] ?? 0)" }.joined(separator: ", ")
    }
}

/// One damaged copy, read by every tool.
private struct RoundCheck {
    let fixture: AgreementFixture
    let damaged: [UInt8]
    let round: Int
    let context: String
    /// Where the first damaged byte is: in the header page, before, inside or after a persisted table.
    let region: String

    private func fail(_ check: Check, _ tally: inout Tally, _ detail: String) {
        tally.fail(check, round: round, store: fixture.name, region: region, "\(context): \(detail)")
    }

    /// (d): every key a report names was written.
    private func checkNames(_ keys: [String], _ source: String, _ tally: inout Tally) {
        let unknown = keys.filter { fixture.history[$0] == nil }
        if !unknown.isEmpty { fail(.unwrittenKeyNamed, &tally, "\(source) named \(unknown)") }
    }

    /// (e).
    private func checkMessage(_ text: String, _ source: String, _ tally: inout Tally) {
        if text.contains("read-only directory") { fail(.readOnlyClaim, &tally, "\(source): \(text)") }
    }

    /// (c): what a read returned, against what was written and what verify counted intact.
    private func checkValues(_ found: [String: Exported], intact: Set<String>, _ source: String, _ tally: inout Tally) {
        for (key, value) in found.sorted(by: { $0.key < $1.key }) {
            guard let had = fixture.history[key] else {
                fail(.valueNeverWritten, &tally, "\(source) returned key \(key), never written")
                continue
            }
            if !had.contains(value) { fail(.valueNeverWritten, &tally, "\(source): \(key) is \(value), never written") }
        }
        tally.intactKeysCompared += intact.count
        let changed = intact.sorted().filter { found[$0] != fixture.final[$0] }
        if let key = changed.first {
            fail(
                .intactKeyLost, &tally,
                "\(source): \(changed.count) keys verify counted intact differ, e.g. \(key) is "
                    + "\(found[key].map { "\($0)" } ?? "absent"), not \(fixture.final[key].map { "\($0)" } ?? "absent")"
            )
        }
    }

    /// (f).
    private func checkUnchanged(_ path: String, _ source: String, _ tally: inout Tally) {
        if readFile(path) != damaged { fail(.refusalChangedFile, &tally, "\(source) changed \(path)") }
    }

    private func place(in directory: String) throws {
        removeFiles(in: directory)
        #expect(createFile(at: directory + "/st.prefs", damaged), "\(context): cannot write the damaged copy")
    }

    // MARK: vaultctl

    /// `prefs verify`, `prefs export`, `prefs repair`, and `prefs export` again after a repair that changed
    /// something or when the first export refused.
    func throughVaultctl(in sandbox: PrefsSandbox, tally: inout Tally) throws {
        try place(in: sandbox.directory)
        let path = sandbox.path("st.prefs")
        let verify = try verifyThroughVaultctl(in: sandbox, placed: true, tally: &tally)

        let export = try sandbox.run(["--json", "prefs", "export", "st"])
        if export.status == 0 {
            if let found = Exported.entries(of: Data(export.standardOutput.utf8)) {
                checkValues(found, intact: fixture.intactKeys(verify.damage), "vaultctl export", &tally)
            } else {
                Issue.record("\(context): vaultctl export exited 0 without an export document: \(export)")
            }
        } else {
            tally.exportsRefused += 1
            checkMessage(export.standardOutput + export.standardError, "vaultctl export refusal", &tally)
            checkUnchanged(path, "vaultctl export (exit \(export.status))", &tally)
        }

        let repair = try sandbox.run(["--json", "prefs", "repair", "st"])
        checkMessage(repair.standardOutput + repair.standardError, "vaultctl repair", &tally)
        guard repair.status == 0 else {
            fail(.repairRefused, &tally, "vaultctl repair exited \(repair.status): \(repair.standardOutput)")
            return
        }
        let report = try? JSONSerialization.jsonObject(with: Data(repair.standardOutput.utf8)) as? [String: Any]
        let didRepair = report?["repaired"] as? Bool == true
        checkNames(
            (report?["lostKeys"] as? [String] ?? []) + (ReportedDamage.list(report) ?? []).flatMap(\.keys),
            "vaultctl repair's report", &tally)
        if didRepair {
            tally.cliRepaired += 1
        } else {
            tally.cliSaidClean += 1
            if verify.status != 0 || export.status != 0 {
                fail(
                    .repairCalledDamageClean, &tally,
                    "vaultctl repair said clean (\(report?["clean"] as? Bool == true ? "clean" : "?")) after verify "
                        + "exited \(verify.status) and export \(export.status)")
            }
        }
        guard didRepair || export.status != 0 else { return }
        let after = try sandbox.run(["--json", "prefs", "export", "st"])
        guard after.status == 0 else {
            fail(
                .unopenableAfterRepair, &tally,
                "vaultctl export after repair (\(didRepair ? "repaired" : "said clean")) exited \(after.status): "
                    + after.standardOutput.replacingOccurrences(of: "\n", with: " "))
            checkMessage(after.standardOutput + after.standardError, "vaultctl export refusal after repair", &tally)
            return
        }
        if let found = Exported.entries(of: Data(after.standardOutput.utf8)) {
            checkValues(found, intact: fixture.intactKeys(verify.damage), "vaultctl export after repair", &tally)
        } else {
            Issue.record("\(context): vaultctl export exited 0 without an export document: \(after)")
        }
    }

    /// `--json prefs verify`: its exit status and its damage report (nil when it gave none: no header verified).
    @discardableResult
    func verifyThroughVaultctl(
        in sandbox: PrefsSandbox, placed: Bool = false, tally: inout Tally
    ) throws -> (status: Int32, damage: [ReportedDamage]?) {
        if !placed { try place(in: sandbox.directory) }
        let result = try sandbox.run(["--json", "prefs", "verify", "st"])
        let object = try? JSONSerialization.jsonObject(with: Data(result.standardOutput.utf8)) as? [String: Any]
        let damage = ReportedDamage.list(object)
        checkNames((damage ?? []).flatMap(\.keys), "vaultctl verify", &tally)
        checkMessage(result.standardOutput + result.standardError, "vaultctl verify", &tally)
        checkUnchanged(sandbox.path("st.prefs"), "vaultctl verify", &tally)
        if result.status == 0 && damage?.isEmpty != true {
            Issue.record("\(context): vaultctl verify exited 0 without a clean report: \(result)")
        }
        return (result.status, result.status == 0 ? [] : damage)
    }

    // MARK: The library

    private func configuration(_ recovery: PrefsStore.RecoveryPolicy) -> PrefsStore.Configuration {
        var configuration = PrefsStore.Configuration()
        configuration.recovery = recovery
        configuration.sealer = fixture.sealer
        configuration.autoCompactionThreshold = nil
        configuration.logger.logLevel = .critical
        return configuration
    }

    /// Why an open or a read failed: the error's code and message.
    struct ReadFailure: Error {
        var code: String
        var message: String
    }

    /// Opens the store under `recovery` and reads every value; the report of the recovery it needed.
    private func openAndExport(
        _ directory: String, _ recovery: PrefsStore.RecoveryPolicy
    ) -> Result<(entries: [String: Exported], recovery: PrefsRecoveryReport?), ReadFailure> {
        do {
            let store = try PrefsStore(id: "st", directory: directory, configuration: configuration(recovery))
            guard let entries = Exported.entries(of: try store.exportJSON()) else {
                return .failure(ReadFailure(code: "-", message: "exportJSON returned no export document"))
            }
            return .success((entries, store.lastRecovery))
        } catch let error as PrefsError {
            return .failure(ReadFailure(code: "\(error.code)", message: error.message))
        } catch {
            return .failure(ReadFailure(code: "-", message: "\(error)"))
        }
    }

    /// `PrefsStore.verify`, an open under `.fail` that reads every value, `PrefsStore.repair` and the same open
    /// again, in `repairIn`; an open under `.salvage` that reads every value on a second copy, in `salvageIn`.
    func throughTheLibrary(repairIn: String, salvageIn: String, tally: inout Tally) throws {
        try place(in: repairIn)
        let path = repairIn + "/st.prefs"
        var verified: PrefsVerifyReport?
        do {
            verified = try PrefsStore.verify(id: "st", directory: repairIn, sealer: fixture.sealer)
        } catch let error as PrefsError {
            checkMessage(error.message, "PrefsStore.verify", &tally)
        }
        let verifyDamage = verified.map { $0.damage.map(ReportedDamage.init) }
        checkNames((verifyDamage ?? []).flatMap(\.keys), "PrefsStore.verify", &tally)
        checkUnchanged(path, "PrefsStore.verify", &tally)
        let intact = fixture.intactKeys(verifyDamage)

        let strict = openAndExport(repairIn, .fail)
        switch strict {
        case .success(let read):
            checkValues(read.entries, intact: intact, "the library under .fail", &tally)
        case .failure(let error):
            checkMessage(error.message, "the library's refusal under .fail", &tally)
            checkUnchanged(path, "the library's refusal under .fail (\(error.code))", &tally)
        }

        let repair: PrefsRecoveryReport?
        do {
            repair = try PrefsStore.repair(id: "st", directory: repairIn, configuration: configuration(.salvage))
        } catch {
            fail(.repairRefused, &tally, "PrefsStore.repair threw \(error)")
            return
        }
        if let repair {
            tally.libraryRepaired += 1
            checkNames(repair.lostKeys + repair.damage.flatMap(\.keys), "PrefsStore.repair's report", &tally)
            checkMessage(repair.description, "PrefsStore.repair's report", &tally)
        } else {
            tally.librarySaidClean += 1
            let strictFailed = if case .failure = strict { true } else { false }
            if verified?.isClean != true || strictFailed {
                let found = verified.map { "\($0.damage.count) damaged ranges" } ?? "no header"
                fail(
                    .repairCalledDamageClean, &tally,
                    "PrefsStore.repair returned nil (clean) after verify found \(found) and the .fail open "
                        + (strictFailed ? "refused" : "read every value"))
            }
        }
        switch openAndExport(repairIn, .fail) {
        case .success(let read):
            checkValues(read.entries, intact: intact, "the library under .fail after repair", &tally)
            if let after = try? PrefsStore.verify(id: "st", directory: repairIn, sealer: fixture.sealer),
                !after.isClean
            {
                fail(.damageLeftAfterRepair, &tally, "PrefsStore.verify after repair: \(after.damage)")
            }
        case .failure(let error):
            fail(
                .unopenableAfterRepair, &tally,
                "the library under .fail after repair (\(repair == nil ? "nil: clean" : "repaired")): "
                    + "\(error.code): \(error.message)")
            checkMessage(error.message, "the library's refusal after repair", &tally)
        }

        try place(in: salvageIn)
        switch openAndExport(salvageIn, .salvage) {
        case .success(let read):
            checkValues(read.entries, intact: intact, "the library under .salvage", &tally)
            if let report = read.recovery {
                checkNames(report.lostKeys + report.damage.flatMap(\.keys), "the .salvage open's report", &tally)
                checkMessage(report.description, "the .salvage open's report", &tally)
            } else if verified?.isClean != true {
                tally.silentSalvages += 1
            }
        case .failure(let error):
            fail(.salvageOpenFailed, &tally, "\(error.code): \(error.message)")
        }
    }
}
