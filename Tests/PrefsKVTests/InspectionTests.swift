import Foundation
import Testing

@testable import PrefsKV

/// `PrefsStore.inspect` reads the header page only; what needs the log is `scanLog()`, on demand.
@Suite struct InspectionTests {
    @Test func inspectReadsTheHeaderAndScanLogCountsTheLiveKeys() throws {
        let dir = try TempDir("inspect")
        let store = try openStore(dir)
        try store.set("dark", forKey: "theme")
        try store.set(3, forKey: "columns")
        try store.set("soon gone", forKey: "expiring", expiresAfter: .milliseconds(1))
        usleep(5000)
        let inspection = try #require(try PrefsStore.inspect(id: "ui", directory: dir.path))
        #expect(inspection.path == dir.file("ui.prefs") && !inspection.isSealed && inspection.keyCheck.isEmpty)
        #expect(inspection.storeUUID.count == 16 && inspection.fileBytes == fileSize(dir.file("ui.prefs")))
        #expect(try inspection.scanLog() == PrefsLogScan(liveKeyCount: 2, damage: []))
        #expect(try PrefsStore.inspect(id: "absent", directory: dir.path) == nil)
    }

    @Test func inspectDoesNotReadTheLogButScanLogReportsItsDamage() throws {
        let dir = try TempDir("inspect-damage")
        try openStore(dir).set("dark", forKey: "theme")
        let path = dir.file("ui.prefs")
        var bytes = try readBytes(path)
        bytes[firstRecordOffset() + 9] ^= 0xFF  // inside the first record: its checksum fails
        try writeBytes(bytes, to: path)
        let inspection = try #require(try PrefsStore.inspect(id: "ui", directory: dir.path))
        #expect(!inspection.isSealed && inspection.fileBytes == bytes.count)
        let scan = try inspection.scanLog()
        #expect(scan.liveKeyCount == 0 && !scan.damage.isEmpty)
        #expect(try readBytes(path) == bytes, "inspecting changes nothing")
    }
}
