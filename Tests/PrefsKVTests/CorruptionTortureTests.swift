import Foundation
import TestKit
import TestSealer
import Testing

@testable import PrefsKV

/// A store written operation by operation, with the byte span of every operation's records known (from the
/// log size before and after it), so that the effect of any damage can be predicted exactly.
struct SpannedStore {
    struct Operation {
        var span: Range<Int>
        /// Key to its value after the operation, nil for removed. `removeAll` lists every key.
        var effects: [String: Expected?]
        /// A transaction of several records: its members, then a commit record ending at `dataEnd`.
        var isTransaction = false
        /// Where the operation's own records end: `span`'s end, or where an index record the write appended after
        /// them starts (torture runs with tables every few records: PREFSKV_INDEX_TAIL).
        var dataEnd: Int
    }

    let name: String
    let sealer: (any PrefsSealer)?
    var operations: [Operation] = []
    var bytes: [UInt8] = []
    var logEnd = 4096
    var keys: Set<String> = []
    /// Where the header copy ends and the first record starts.
    var firstRecord: Int { firstRecordOffset(sealed: sealer != nil) }

    /// `count` random operations on `keyCount` keys: sets of three types, transactions, deletes, and one
    /// removeAll a third of the way through.
    static func make(
        _ name: String, operations count: Int, keys keyCount: Int, sealed: Bool, seed: UInt64
    ) throws -> SpannedStore {
        var fixture = SpannedStore(name: name, sealer: sealed ? TestSealer(key: 7) : nil)
        let dir = try TempDir("spanned", memory: true)
        let store = try openStore(dir) {
            $0.autoCompactionThreshold = nil
            $0.sealer = fixture.sealer
        }
        var rng = SplitMix(state: seed)
        fixture.logEnd = fixture.firstRecord
        for n in 0..<count {
            let before = fixture.firstRecord + (try store.stats().logBytes)
            var effects: [String: Expected?] = [:]
            let key = "key-\(Int.random(in: 0..<keyCount, using: &rng))"
            var isTransaction = false
            switch Int.random(in: 0..<100, using: &rng) {
            case _ where n == count / 3:
                try store.removeAll()
                for k in fixture.keys { effects[k] = .some(nil) }
            case 0..<30:
                try store.set(Int64(n) * 1_000_003, forKey: key)
                effects[key] = .int(Int64(n) * 1_000_003)
            case 30..<55:
                let text = "value \(n) " + String(repeating: "·", count: Int.random(in: 0..<120, using: &rng))
                try store.set(text, forKey: key)
                effects[key] = .string(text)
            case 55..<70:
                let data = Data(
                    (0..<Int.random(in: 0..<700, using: &rng)).map { _ in UInt8.random(in: 0...255, using: &rng) })
                try store.set(data, forKey: key)
                effects[key] = .data(data)
            case 70..<88:
                let keys = Set(
                    (0..<Int.random(in: 2...4, using: &rng)).map { _ in
                        "key-\(Int.random(in: 0..<keyCount, using: &rng))"
                    })
                try store.write { tx in
                    for (i, k) in keys.sorted().enumerated() { try tx.set(Int64(n * 10 + i), forKey: k) }
                }
                for (i, k) in keys.sorted().enumerated() { effects[k] = .int(Int64(n * 10 + i)) }
                isTransaction = true
            default:
                try store.removeValue(forKey: key)
                effects[key] = .some(nil)
            }
            let after = fixture.firstRecord + (try store.stats().logBytes)
            // An operation that wrote nothing (an unchanged value, an absent key removed) has no effect on disk.
            guard after > before else { continue }
            fixture.keys.formUnion(effects.keys)
            // The index word (bytes 280..<288, the offset in its low 48 bits) names a table the write appended.
            let word = try readBytes(store.path)[280..<288].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
            let table = Int(word & 0xFFFF_FFFF_FFFF)
            fixture.operations.append(
                Operation(
                    span: before..<after, effects: effects, isTransaction: isTransaction,
                    dataEnd: (before..<after).contains(table) ? table : after))
            fixture.logEnd = after
        }
        fixture.final = fixture.expected(hit: [])
        for (i, op) in fixture.operations.enumerated() {
            for (key, value) in op.effects {
                fixture.latest[key] = i
                if let value { fixture.history[key, default: []].append(value) }
            }
        }
        #expect(try CrashModel.read(store).values == fixture.final.compactMapValues { $0 })
        fixture.bytes = try readBytes(store.path)
        return fixture
    }

    /// What each key holds at the end.
    var final: [String: Expected?] = [:]
    /// The index of the last operation that touched each key.
    var latest: [String: Int] = [:]
    /// Every value each key ever held.
    var history: [String: [Expected]] = [:]

    /// Replays the operations outside `hit`: what a key must hold when its latest operation is intact.
    func expected(hit: Set<Int>) -> [String: Expected?] {
        var values: [String: Expected?] = [:]
        for (i, op) in operations.enumerated() where !hit.contains(i) {
            for (key, value) in op.effects { values[key] = value }
        }
        return values
    }
}

/// For each byte of `original`: whether `damaged` differs there or was cut off before it.
func changedBytes(_ original: [UInt8], _ damaged: [UInt8]) -> [Bool] {
    var changed = [Bool](repeating: false, count: original.count)
    let common = min(original.count, damaged.count)
    original.withUnsafeBytes { a in
        damaged.withUnsafeBytes { b in
            changed.withUnsafeMutableBufferPointer { out in
                var chunk = 0
                while chunk < common {
                    let length = min(256, common - chunk)
                    // memcmp skips equal chunks quickly even in a debug build.
                    if memcmp(a.baseAddress! + chunk, b.baseAddress! + chunk, length) != 0 {
                        for i in chunk..<chunk + length where a[i] != b[i] { out[i] = true }
                    }
                    chunk += length
                }
                for i in common..<original.count { out[i] = true }
            }
        }
    }
    return changed
}

/// One random damage to a store file.
enum Damage: String, CaseIterable {
    case bitFlips, singleBitFlip, overwrittenRange, truncation, zeroedPage, swappedPages, garbageAfterLog

    /// The damaged bytes, and for swapped pages the range from the first to the end of the second page: a
    /// record's checksum does not cover its offset, so a page of intact records written in the wrong place
    /// (a misdirected write) is indistinguishable from records in place, and keys whose latest records lie
    /// between the two pages may read an older value they had (see Documentation/Reliability.md).
    func apply(_ bytes: [UInt8], logEnd: Int, using rng: inout SplitMix) -> (bytes: [UInt8], moved: Range<Int>?) {
        var b = bytes
        var moved: Range<Int>?
        let pages = b.count / 4096
        switch self {
        case .bitFlips:
            for _ in 0..<Int.random(in: 1...8, using: &rng) {
                // Mostly in the log, sometimes in the header page.
                let at =
                    Int.random(in: 0..<10, using: &rng) == 0
                    ? Int.random(in: 0..<4096, using: &rng)
                    : Int.random(in: 4096..<logEnd, using: &rng)
                b[at] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
            }
        case .singleBitFlip:
            // One bit of the header or the log: what a single flipped bit may cost (issue 15: at most the record
            // it hit; nothing in a header, which has a copy).
            b[Int.random(in: 0..<logEnd, using: &rng)] ^= 1 << UInt8.random(in: 0..<8, using: &rng)
        case .overwrittenRange:
            let start = Int.random(in: 0..<logEnd, using: &rng)
            let length = min(Int.random(in: 1...1024, using: &rng), b.count - start)
            for i in start..<start + length { b[i] = UInt8.random(in: 0...255, using: &rng) }
        case .truncation:
            b.removeLast(b.count - Int.random(in: 0..<logEnd, using: &rng))
        case .zeroedPage:
            let page = Int.random(in: 0..<pages, using: &rng)
            for i in page * 4096..<(page + 1) * 4096 { b[i] = 0 }
        case .swappedPages:
            // Two distinct pages (every store file has at least two); the header page one time in eight.
            let first = Int.random(in: 0..<8, using: &rng) == 0 ? 0 : Int.random(in: 1..<pages, using: &rng)
            var second = Int.random(in: 1..<pages, using: &rng)
            if second == first { second = first == 1 ? (pages > 2 ? 2 : 0) : 1 }
            for i in 0..<4096 { b.swapAt(first * 4096 + i, second * 4096 + i) }
            moved = min(first, second) * 4096..<(max(first, second) + 1) * 4096
        case .garbageAfterLog:
            // A log that ends within 64 bytes of the file's end leaves less room than the offset drawn.
            let start = min(logEnd + Int.random(in: 0..<64, using: &rng), b.count)
            for i in start..<b.count { b[i] = UInt8.random(in: 0...255, using: &rng) }
        }
        return (b, moved)
    }
}

@Suite(.serialized) struct CorruptionTortureTests {
    /// Random damages on stores of several sizes, plain and sealed. For each: no crash; header damage is an
    /// error that leaves the file byte-identical; otherwise the store opens, every key whose latest operation
    /// is intact reads exactly that value, a key whose latest operation was hit reads absent or a value it
    /// really had, no key appears that was never written, damage in the log makes a recovery with a
    /// byte-identical quarantine copy, damage elsewhere makes none, and the store is writable at once.
    @Test func randomDamageNeverYieldsAWrongValueAndLosesOnlyWhatItHit() throws {
        let damages = Torture.count("DAMAGES", short: 400, long: 10000)
        let deadline = Torture.deadline()
        let seed = tortureSeed()
        var rng = SplitMix(state: seed)
        var fixtures: [SpannedStore] = []
        for sealed in [false, true] {
            for (name, operations, keys) in [
                ("tiny", 6, 4), ("small", 60, 20), ("medium", 500, 80), ("large", 1500, 200),
            ] {
                fixtures.append(
                    try SpannedStore.make(
                        "\(name)\(sealed ? "-sealed" : "")", operations: operations, keys: keys, sealed: sealed,
                        seed: rng.next()))
            }
        }
        let dir = try TempDir("torture-damage", memory: true)
        let path = dir.file("ui.prefs")
        var outcomes: [String: Int] = [:]
        var byKind: [String: Int] = [:]
        var keysExact = 0
        var keysHitLost = 0
        var namedLost = 0
        var namedReverted = 0
        var keysHitOlder = 0
        var keysHitLatest = 0
        var keysBetweenSwapped = 0
        // Single flipped bits: how many keys lost the value they held (absent, or an older one), per flip.
        var lostPerFlip: [Int: Int] = [:]
        var commitFlips = 0
        var repairs = 0
        var repairedKeys = 0
        var unopenableAfterRepair = 0
        var sealedRefusedRepairs = 0
        var done = 0
        let started = Date()
        for round in 0..<damages where Date() < deadline {
            done += 1
            let fixture = fixtures[round % fixtures.count]
            let kind = Damage.allCases[Int.random(in: 0..<Damage.allCases.count, using: &rng)]
            byKind[kind.rawValue, default: 0] += 1
            let (damaged, moved) = kind.apply(fixture.bytes, logEnd: fixture.logEnd, using: &rng)
            let context = "round \(round), \(fixture.name), \(kind) (seed \(seed))"
            for name in dir.files where name != "ui.prefs.lock" {
                try FileManager.default.removeItem(atPath: dir.file(name))
            }
            try writeBytes(damaged, to: path)

            // Which bytes changed, and what that touches.
            // A byte is changed when it differs or was cut off.
            let changed = changedBytes(fixture.bytes, damaged)
            // The header page's static part and its copy (the record that starts the log): the open reads the
            // store when either verifies, and refuses (file byte-identical) only when both are hit.
            let pageHit = damaged.count < 4096 || changed[0..<128].contains(true)
            let copyHit = changed[4096..<fixture.firstRecord].contains(true)
            let logEndHit = changed[256..<264].contains(true)
            let hit = Set(
                fixture.operations.indices.filter { i in
                    let span = fixture.operations[i].span
                    return changed[span].contains(true)
                })

            let store: PrefsStore
            do {
                store = try openStore(dir) { $0.sealer = fixture.sealer }
            } catch let error as PrefsError {
                #expect(pageHit && copyHit, "\(context): an open failed with a header copy intact: \(error)")
                #expect([.notAStore, .corrupted, .unsupportedVersion].contains(error.code), "\(context): \(error)")
                #expect(try readBytes(path) == damaged, "\(context): a failed open changed the file")
                #expect(dir.files == ["ui.prefs", "ui.prefs.lock"], "\(context): a failed open left \(dir.files)")
                outcomes["both header copies hit: \(error.code), file byte-identical", default: 0] += 1
                var configuration = PrefsStore.Configuration()
                configuration.sealer = fixture.sealer
                configuration.logger.logLevel = .critical
                if error.code == .unsupportedVersion {
                    // A version field above 3 and no copy: a newer format as far as anyone can tell, never rebuilt.
                    expectError(.unsupportedVersion) {
                        try PrefsStore.repair(id: "ui", directory: dir.path, configuration: configuration)
                    }
                    #expect(try readBytes(path) == damaged, "\(context): a refused repair changed the file")
                    continue
                }
                if fixture.sealer != nil && damaged.count >= 4096 {
                    // A sealed store whose identity went with both copies cannot be told from one under a wrong key:
                    // repair rebuilds it only when records authenticate under an identity still legible.
                    do {
                        let report = try #require(
                            try PrefsStore.repair(id: "ui", directory: dir.path, configuration: configuration))
                        #expect(try readBytes(try #require(report.quarantinePath)) == damaged, "\(context)")
                        repairs += 1
                        repairedKeys += report.recordsKept
                    } catch let error as PrefsError where error.code == .corrupted || error.code == .wrongKey {
                        #expect(try readBytes(path) == damaged, "\(context): a refused repair changed the file")
                        sealedRefusedRepairs += 1
                    }
                    continue
                }
                // Repair always ends in a store that opens, holding no value that was never written, the
                // original kept byte for byte.
                do {
                    let report = try #require(
                        try PrefsStore.repair(id: "ui", directory: dir.path, configuration: configuration))
                    let quarantine = try #require(report.quarantinePath, "\(context)")
                    #expect(try readBytes(quarantine) == damaged, "\(context): the repair's original copy differs")
                    let repaired = try openStore(dir) { $0.sealer = fixture.sealer }
                    #expect(repaired.lastRecovery == nil, "\(context)")
                    for (key, value) in try CrashModel.read(repaired).values {
                        #expect(
                            fixture.history[key, default: []].contains(value),
                            "\(context): after repair \(key) holds a value it never had")
                    }
                    try repaired.set("after", forKey: "zz-after")
                    repairs += 1
                    repairedKeys += report.recordsKept
                } catch {
                    unopenableAfterRepair += 1
                    Issue.record("\(context): the store does not open after repair: \(error)")
                }
                continue
            }
            #expect(!(pageHit && copyHit), "\(context): a store with both header copies damaged opened")
            if pageHit && copyHit { continue }

            // Every key: exact when its latest operation is intact; absent or a value it had otherwise.
            let found = try CrashModel.read(store).values
            let intact = fixture.expected(hit: hit)
            for key in found.keys where !fixture.keys.contains(key) {
                Issue.record("\(context): key \(key) was never written")
            }
            for key in fixture.keys {
                let value = found[key]
                let last = fixture.latest[key]
                if let last, let moved, fixture.operations[last].span.overlaps(moved), !hit.contains(last) {
                    // Between two swapped pages: absent, or a value it had.
                    if let value {
                        #expect(
                            fixture.history[key, default: []].contains(value),
                            "\(context): \(key) holds a value it never had")
                    }
                    if value == fixture.final[key] ?? nil { keysExact += 1 } else { keysBetweenSwapped += 1 }
                } else if let last, hit.contains(last) {
                    if let value {
                        #expect(
                            fixture.history[key, default: []].contains(value),
                            "\(context): \(key) holds a value it never had")
                        if value == fixture.final[key] ?? nil { keysHitLatest += 1 } else { keysHitOlder += 1 }
                    } else {
                        keysHitLost += 1
                    }
                } else {
                    let want = intact[key] ?? nil
                    #expect(
                        value == want,
                        "\(context): \(key) is \(String(describing: value)), not \(String(describing: want)); latest record at \(fixture.latest[key].map { "\(fixture.operations[$0].span)" } ?? "-")"
                    )
                    keysExact += 1
                }
            }

            if kind == .singleBitFlip, let at = changed.firstIndex(of: true) {
                let lost = fixture.keys.filter { key in
                    guard let want = fixture.final[key] ?? nil else { return false }
                    return found[key] != want
                }.count
                // A transaction whose commit record was hit has nothing that vouches for it: it goes whole (a
                // torn transaction cannot be told from it). Any other record costs at most its own key.
                let commitLength = Format.recordLength(
                    keyLength: 0, valueLength: 4, authenticated: fixture.sealer != nil)
                let inCommit = fixture.operations.contains {
                    $0.isTransaction && ($0.dataEnd - commitLength..<$0.dataEnd).contains(at)
                }
                if inCommit {
                    commitFlips += 1
                } else {
                    lostPerFlip[lost, default: 0] += 1
                    #expect(lost <= 1, "\(context): one flipped bit at \(at) cost \(lost) keys")
                }
            }

            // A recovery exactly when the log was damaged, with the damaged file kept byte for byte.
            let logDamaged = !hit.isEmpty || logEndHit || damaged.count < fixture.logEnd || pageHit || copyHit
            if let report = store.lastRecovery {
                #expect(logDamaged, "\(context): a recovery without damage to the log: \(report)")
                let quarantine = try #require(report.quarantinePath, "\(context)")
                #expect(try readBytes(quarantine) == damaged, "\(context): the quarantine copy differs")
                #expect(fileMode(quarantine) == 0o400)
                // The report's names hold of the store (issue 40, point 8): a key named lost reads absent, one named
                // reverted reads a value.
                for key in report.lostKeys {
                    #expect(found[key] == nil, "\(context): \(key) is named lost but reads a value: \(report)")
                }
                for key in report.revertedKeys {
                    #expect(found[key] != nil, "\(context): \(key) is named reverted but reads absent: \(report)")
                }
                namedLost += report.lostKeys.count
                namedReverted += report.revertedKeys.count
                outcomes["log damage: recovered, quarantined", default: 0] += 1
            } else {
                #expect(!logDamaged, "\(context): damage to the log went unreported")
                outcomes["damage outside the log: opened intact, no recovery", default: 0] += 1
            }
            // Usable at once, and clean from then on.
            try store.set("after", forKey: "zz-after")
            #expect(try store.verify().isClean, "\(context)")
            let reopened = try openStore(dir) { $0.sealer = fixture.sealer }
            #expect(reopened.lastRecovery == nil, "\(context): a second recovery was needed")
            #expect(try reopened.string(forKey: "zz-after") == "after")
        }
        let seconds = String(format: "%.1f", Date().timeIntervalSince(started))
        let kinds = byKind.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        let results = outcomes.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: "; ")
        Torture.report(
            "corruption: \(done) damages in \(seconds) s on \(fixtures.count) stores (4 sizes, plain and sealed): \(kinds). "
                + "Outcomes: \(results). Keys: \(keysExact) outside the damage all exact; of keys whose latest record "
                + "was hit, \(keysHitLatest) still read the latest value (its record moved intact), \(keysHitOlder) "
                + "an older value, \(keysHitLost) absent; \(keysBetweenSwapped) keys between two swapped pages read an "
                + "older value or none; 0 values never written. Single flipped bits: keys that lost their value per "
                + "flip \(lostPerFlip.sorted { $0.key < $1.key }.map { "\($0.key): \($0.value)" }.joined(separator: ", ")) "
                + "(at most 1), and \(commitFlips) in a transaction's commit record (the transaction goes whole). "
                + "Both header copies hit: \(repairs) repaired (\(repairedKeys) records kept from their bodies), "
                + "\(unopenableAfterRepair) stores left unopenable after repair (must be 0), \(sealedRefusedRepairs) "
                + "sealed stores with no identity left refused by repair (file byte-identical). Recovery reports "
                + "named \(namedLost) keys lost (each read absent) and \(namedReverted) reverted to an older value "
                + "(each read a value)")
    }
}
