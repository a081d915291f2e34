import ExampleAppState
import Foundation
import Synchronization
import TestSupport
import Testing

@testable import PrefsKV

/// `PersistedState` over real store files: hydration, versions and migration, writes that change nothing,
/// damaged and unreadable stores, observation.
@Suite struct PersistedStateTests {
    @Test func nothingStoredHydratesToTheDefaultsWithoutWritingOrLogging() throws {
        let dir = try TempDir("persisted", memory: true)
        let log = LogCapture()
        let store = try openStore(dir) { $0.logger = log.logger }
        let before = try readBytes(store.path)

        let theme = PersistedState.theme(in: store)
        let sidebar = PersistedState.sidebar(in: store)

        #expect(theme.value == .light)
        #expect(sidebar.value == SidebarState(isExpanded: false, width: 240))
        #expect(theme.hydration == .absent)
        #expect(sidebar.hydration == .absent)
        #expect(try readBytes(store.path) == before)
        #expect(log.entries.withLock { $0.isEmpty })
    }

    @Test func statesRoundTripThroughANewHandleAsVersionedSortedJSON() throws {
        let dir = try TempDir("persisted", memory: true)
        do {
            let store = try openStore(dir)
            try PersistedState.theme(in: store).set(.dark)
            try PersistedState.sidebar(in: store).update {
                $0.isExpanded = true
                $0.width = 312
            }
        }
        let store = try openStore(dir)
        let theme = PersistedState.theme(in: store)
        let sidebar = PersistedState.sidebar(in: store)
        #expect(theme.value == .dark)
        #expect(sidebar.value == SidebarState(isExpanded: true, width: 312))
        #expect(theme.hydration == .stored)
        #expect(sidebar.hydration == .stored)
        #expect(try rawJSON(store, "theme") == #"{"state":"dark","version":0}"#)
        #expect(try rawJSON(store, "sidebar") == #"{"state":{"isExpanded":true,"width":312},"version":1}"#)
    }

    @Test func settingAnUnchangedStateLeavesTheFileByteIdentical() throws {
        let dir = try TempDir("persisted", memory: true)
        let store = try openStore(dir)
        let sidebar = PersistedState.sidebar(in: store)
        try sidebar.set(SidebarState(isExpanded: true, width: 300))
        let written = try readBytes(store.path)

        try sidebar.set(SidebarState(isExpanded: true, width: 300))
        try sidebar.update { $0.width = 300 }
        // A second handle (a relaunch) hydrating and setting the same state writes nothing either.
        let other = PersistedState.sidebar(in: try openStore(dir))
        try other.set(other.value)
        #expect(try readBytes(store.path) == written)

        // The comparison is meaningful: a different state does change the file.
        try sidebar.update { $0.width = 301 }
        #expect(try readBytes(store.path) != written)
    }

    @Test func olderVersionIsMigratedAndWrittenBackOnce() throws {
        let dir = try TempDir("persisted", memory: true)
        do {
            let store = try openStore(dir)
            try store.setCodable(Envelope(state: ["expanded": true], version: 0), forKey: "sidebar")
        }
        let log = LogCapture()
        let store = try openStore(dir) { $0.logger = log.logger }
        let sidebar = PersistedState.sidebar(in: store)
        #expect(sidebar.value == SidebarState(isExpanded: true, width: 240))
        #expect(sidebar.hydration == .migrated(from: 0))
        #expect(try rawJSON(store, "sidebar") == #"{"state":{"isExpanded":true,"width":240},"version":1}"#)
        #expect(log.errors.isEmpty)

        let again = PersistedState.sidebar(in: try openStore(dir))
        #expect(again.hydration == .stored)
        #expect(again.value == SidebarState(isExpanded: true, width: 240))
    }

    @Test func migrationReceivesTheStoredVersionAndDecodesTheOldShape() throws {
        struct Old: Codable { var size: String }
        struct New: Codable, Sendable, Equatable { var size: Int }
        let dir = try TempDir("persisted", memory: true)
        let store = try openStore(dir)
        try store.setCodable(Envelope(state: Old(size: "14"), version: 3), forKey: "editor")
        let seen = Mutex<[Int]>([])
        let editor = PersistedState(name: "editor", version: 5, defaults: New(size: 12), store: store) { stored in
            seen.withLock { $0.append(stored.version) }
            return New(size: Int(try stored.decode(Old.self).size) ?? 0)
        }
        #expect(editor.value == New(size: 14))
        #expect(seen.withLock { $0 } == [3])
        #expect(try rawJSON(store, "editor") == #"{"state":{"size":14},"version":5}"#)
    }

    /// Stored values hydration cannot use: each gives the defaults and one error naming the file, and leaves
    /// the stored bytes alone until the app changes the state.
    @Test(arguments: UnusableValue.allCases)
    func unusableStoredValueHydratesToTheDefaultsWithOneErrorUntilTheNextChange(_ kind: UnusableValue) throws {
        let dir = try TempDir("persisted", memory: true)
        do {
            let store = try openStore(dir)
            try kind.write(into: store, key: "theme")
        }
        let log = LogCapture()
        let store = try openStore(dir) { $0.logger = log.logger }
        let before = try readBytes(store.path)

        let theme = kind.open(store)
        #expect(theme.value == .light)
        guard case .unreadable(let reason) = theme.hydration else {
            Issue.record("expected .unreadable, got \(theme.hydration)")
            return
        }
        #expect(reason.contains(kind.expectedReason), "\(reason)")
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(log.errors.first?.contains(store.path) == true, "\(log.errors)")
        #expect(try readBytes(store.path) == before, "hydration wrote over a value it could not read")

        try theme.set(.dark)
        let healed = kind.open(try openStore(dir))
        #expect(healed.hydration == .stored)
        #expect(healed.value == .dark)
        #expect(log.errors.count == 1)
    }

    enum UnusableValue: String, CaseIterable, CustomTestStringConvertible {
        case newerVersion, notJSON, notAnEnvelope, wrongShape, anotherType, olderWithoutMigration, failedMigration

        var testDescription: String { rawValue }

        func write(into store: PrefsStore, key: String) throws {
            switch self {
            case .newerVersion: try store.setCodable(Envelope(state: "neon", version: 7), forKey: key)
            case .notJSON:
                let bytes = Array("{not json".utf8)
                try store.writeOne(key, .json, nil, length: bytes.count) { $0.copyBytes(from: bytes) }
            case .notAnEnvelope: try store.setCodable(["theme": "dark"], forKey: key)
            case .wrongShape: try store.setCodable(Envelope(state: 42, version: 0), forKey: key)
            case .anotherType: try store.set("dark", forKey: key)
            case .olderWithoutMigration, .failedMigration:
                try store.setCodable(Envelope(state: "dark", version: 0), forKey: key)
            }
        }

        func open(_ store: PrefsStore) -> PersistedState<AppTheme> {
            switch self {
            case .olderWithoutMigration:
                return PersistedState(name: "theme", version: 1, defaults: .light, store: store)
            case .failedMigration:
                return PersistedState(name: "theme", version: 1, defaults: .light, store: store) { _ in
                    throw TestFailure("no way from version 0")
                }
            default:
                return PersistedState.theme(in: store)
            }
        }

        var expectedReason: String {
            switch self {
            case .newerVersion: return "version 7, newer than this app's 0"
            case .anotherType: return "cannot be read (typeMismatch"
            case .notJSON, .notAnEnvelope: return "not a versioned state"
            case .wrongShape: return "does not decode as AppTheme"
            case .olderWithoutMigration: return "version 0 and no migration"
            case .failedMigration: return "migrating the stored state from version 0 failed"
            }
        }
    }

    @Test func damagedFileKeepsEveryIntactStateDefaultsTheLostOneAndLogsOneError() throws {
        let dir = try TempDir("persisted", memory: true)
        let path: String
        do {
            let store = try openStore(dir)
            path = store.path
            try PersistedState.theme(in: store).set(.dark)
            try PersistedState.sidebar(in: store).set(SidebarState(isExpanded: true, width: 320))
            try store.set(7, forKey: "launchCount")
        }
        var bytes = try readBytes(path)
        let theme = try #require(lastRecord(named: "theme", in: bytes))
        bytes[theme.valueOffset + 3] ^= 0x5A
        try writeBytes(bytes, to: path)

        let log = LogCapture()
        let store = try openStore(dir) { $0.logger = log.logger }
        let themeState = PersistedState.theme(in: store)
        let sidebarState = PersistedState.sidebar(in: store)

        #expect(themeState.value == .light)
        #expect(themeState.hydration == .lost)
        #expect(sidebarState.value == SidebarState(isExpanded: true, width: 320))
        #expect(sidebarState.hydration == .stored)
        #expect(try store.int(forKey: "launchCount") == 7)
        // One error for the damaged file: the store's recovery logs it, the states do not log it again.
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(log.errors.first?.contains(path) == true)
        let report = try #require(store.lastRecovery)
        let quarantine = try #require(report.quarantinePath)
        #expect(FileManager.default.fileExists(atPath: quarantine))
        #expect(log.errors.first?.contains(quarantine) == true)

        // The next change writes a healthy store.
        try themeState.set(.system)
        #expect(try PrefsStore.verify(id: "ui", directory: dir.path).isClean)
        let reopened = try openStore(dir)
        #expect(reopened.lastRecovery == nil)
        #expect(PersistedState.theme(in: reopened).value == .system)
        #expect(PersistedState.sidebar(in: reopened).value == SidebarState(isExpanded: true, width: 320))
        #expect(log.errors.count == 1)
    }

    /// With `ifUnreadable: .refuse` a file that is not a store stays as it is and the states live in memory.
    @Test func withRefuseAFileThatIsNotAStoreIsLeftAloneAndTheStatesLiveInMemoryWithOneError() throws {
        let dir = try TempDir("persisted", memory: true)
        let path = dir.file("ui.prefs")
        let garbage = Array(repeating: UInt8(0xA5), count: 8192)
        try writeBytes(garbage, to: path)
        let log = LogCapture()
        var configuration = PrefsStore.Configuration()
        configuration.logger = log.logger

        let ui = PrefsStore.openOrLog(
            id: "ui", directory: dir.path, configuration: configuration, ifUnreadable: .refuse)
        #expect(ui == nil)
        let theme = PersistedState.theme(in: ui)
        let sidebar = PersistedState.sidebar(in: ui)
        #expect(theme.value == .light)
        #expect(sidebar.value == SidebarState())
        #expect(theme.hydration == .noStore)
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(log.errors.first?.contains(path) == true, "\(log.errors)")

        try theme.set(.dark)
        #expect(theme.value == .dark)
        #expect(theme.rehydrate() == .dark)
        #expect(try readBytes(path) == garbage)
        #expect(log.errors.count == 1)
    }

    @Test func observersSeeChangesFromThisHandleAndFromAnother() throws {
        let dir = try TempDir("persisted", memory: true)
        let theme = PersistedState.theme(in: try openStore(dir))
        let seen = Mutex<[AppTheme]>([])
        let observation = theme.observe { value in seen.withLock { $0.append(value) } }
        defer { observation.cancel() }

        try theme.set(.dark)
        #expect(seen.withLock { $0 } == [.dark])

        // Another handle on the same file (another process, as far as the store can tell).
        try PersistedState.theme(in: try openStore(dir)).set(.system)
        let deadline = ContinuousClock.now + .seconds(120)  // waits for the event; only guards against a hang
        while seen.withLock({ $0.count }) < 2 && ContinuousClock.now < deadline {
            Thread.sleep(forTimeInterval: 0.01)
        }
        #expect(seen.withLock { $0 } == [.dark, .system])
        #expect(theme.value == .system)
    }

    @Test func resetRemovesTheStoredStateAndReturnsToTheDefaults() throws {
        let dir = try TempDir("persisted", memory: true)
        let store = try openStore(dir)
        let theme = PersistedState.theme(in: store)
        try theme.set(.dark)
        try theme.reset()
        #expect(theme.value == .light)
        #expect(try !store.contains("theme"))
        #expect(PersistedState.theme(in: store).hydration == .absent)
    }

    /// Issue 15: an app is never stuck. A store of 300 keys whose header page and header copy were zeroed (its
    /// first two pages): `openOrLog` rebuilds it from the records of its body that verify, keeps the original
    /// aside, bytes unchanged, and logs one error naming both files, and the user's next choice is saved and read
    /// back by the next launch. (Before: nil, and defaults in memory at every launch from then on.)
    @Test func anUnreadableFileIsMovedAsideAndTheNextChoiceIsSaved() throws {
        let dir = try TempDir("persisted", memory: true)
        let path = dir.file("ui.prefs")
        do {
            let store = try openStore(dir)
            try store.write { tx in for i in 0..<300 { try tx.set(i, forKey: "key-\(i)") } }
        }
        var damaged = try readBytes(path)
        for i in 0..<8192 { damaged[i] = 0 }
        try writeBytes(damaged, to: path)
        expectError(.notAStore) { try openStore(dir) }  // the default open still refuses, touching nothing
        #expect(try readBytes(path) == damaged)

        let log = LogCapture()
        var configuration = PrefsStore.Configuration()
        configuration.logger = log.logger
        let ui = try #require(PrefsStore.openOrLog(id: "ui", directory: dir.path, configuration: configuration))
        let report = try #require(ui.lastRecovery)
        let quarantine = try #require(report.quarantinePath)
        #expect(quarantine.hasPrefix(path + ".corrupt-"))
        #expect(try readBytes(quarantine) == damaged)
        #expect(fileMode(quarantine) == 0o400)
        // The members after the second page, and their commit record, verify: the transaction is salvaged by
        // member. Each key kept holds exactly what was written.
        let kept = try ui.allKeys
        #expect(kept.count > 200 && kept.count < 300 && report.recordsKept == kept.count + 1, "\(report)")
        for key in kept { #expect(try ui.int(forKey: key) == Int(key.dropFirst(4))) }
        #expect(log.errors.count == 1, "\(log.errors)")
        #expect(log.errors.first.map { $0.contains(path) && $0.contains(quarantine) } == true, "\(log.errors)")

        let theme = PersistedState(name: "theme", version: 0, defaults: "light", store: ui)
        #expect(theme.value == "light")
        try theme.set("dark")
        let relaunched = PersistedState(name: "theme", version: 0, defaults: "light", store: try openStore(dir))
        #expect(relaunched.value == "dark")
        #expect(dir.files.filter { $0.contains(".corrupt-") }.count == 1)
    }

    /// A file cut inside its header page (no record left) is moved aside for an empty store; a directory where the file should be is
    /// never moved (nil, as before).
    @Test func aTruncatedHeaderIsMovedAsideButADirectoryIsNot() throws {
        let dir = try TempDir("persisted", memory: true)
        let path = dir.file("ui.prefs")
        do { try openStore(dir).set("v", forKey: "k") }
        let truncated = Array(try readBytes(path)[0..<2048])
        try writeBytes(truncated, to: path)
        let ui = try #require(PrefsStore.openOrLog(id: "ui", directory: dir.path))
        #expect(try ui.string(forKey: "k") == nil)
        #expect(try readBytes(try #require(ui.lastRecovery?.quarantinePath)) == truncated)
        try ui.set("again", forKey: "k")
        #expect(try openStore(dir).string(forKey: "k") == "again")

        let other = try TempDir("persisted", memory: true)
        try FileManager.default.createDirectory(atPath: other.file("ui.prefs"), withIntermediateDirectories: false)
        #expect(PrefsStore.openOrLog(id: "ui", directory: other.path) == nil)
        #expect(other.files.filter { $0.contains(".corrupt-") }.isEmpty)
    }
}

/// The JSON text stored under `key`.
private func rawJSON(_ store: PrefsStore, _ key: String) throws -> String? {
    try store.readFixed(key, .json) { String(decoding: $0, as: UTF8.self) }
}

/// The last record in a plain store file whose key is `name` (the log starts at 4096; see FileFormat.md).
func lastRecord(named name: String, in bytes: [UInt8]) -> (offset: Int, valueOffset: Int, valueLength: Int)? {
    func u32(_ at: Int) -> Int {
        Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
    }
    var offset = 4096
    var found: (Int, Int, Int)?
    while offset + 32 <= bytes.count, bytes[offset..<offset + 4].elementsEqual("PKVr".utf8) {
        let keyLength = u32(offset + 8)
        let valueLength = u32(offset + 12)
        if bytes[offset + 4] == 1, bytes[(offset + 32)..<(offset + 32 + keyLength)].elementsEqual(name.utf8) {
            found = (offset, offset + 32 + keyLength, valueLength)
        }
        offset += (32 + keyLength + valueLength + 4 + 7) & ~7
    }
    return found
}
