import Foundation
import Testing

@testable import PrefsKV

/// `importJSONObject` and `importPersistedState` (issue 37, JSON stores): an app's old settings file and its
/// Zustand `persist` payload come in typed, in one transaction, repeatably, and a bad file writes nothing.
@Suite struct JSONImportTests {
    static let settings = #"""
        {"theme": "dark", "zoom": 1.25, "count": 3, "big": 9007199254740993, "on": true, "recent": ["a", "b"],
         "window": {"width": 900, "height": 600}, "mixed": [1, "a"], "gone": null}
        """#

    struct Window: Codable, Equatable { var width: Int; var height: Int }

    @Test func aFlatObjectBecomesTypedKeysAndNestedValuesStayJSON() throws {
        let dir = try TempDir("json-import", memory: true)
        let store = try PrefsStore(id: "ui", directory: dir.path)
        let report = try store.importJSONObject(Data(Self.settings.utf8))
        #expect(report.imported == ["big", "count", "mixed", "on", "recent", "theme", "window", "zoom"])
        #expect(report.skipped == ["gone"] && report.unchanged.isEmpty && report.kept.isEmpty && !report.dryRun)
        #expect(
            report.types == [
                "big": "int", "count": "int", "mixed": "json", "on": "bool", "recent": "strings", "theme": "string",
                "window": "json", "zoom": "double",
            ])
        #expect(try store.string(forKey: "theme") == "dark")
        #expect(try store.double(forKey: "zoom") == 1.25)
        #expect(try store.int64(forKey: "big") == 9_007_199_254_740_993, "an integer lost its exactness")
        #expect(try store.bool(forKey: "on") == true)
        #expect(try store.strings(forKey: "recent") == ["a", "b"])
        #expect(try store.decode(Window.self, forKey: "window") == Window(width: 900, height: 600))
        #expect(try store.data(forKey: "gone") == nil)
    }

    @Test func runAgainItChangesNothingAndKeepsWhatTheAppChangedUnlessReplacing() throws {
        let dir = try TempDir("json-import", memory: true)
        let store = try PrefsStore(id: "ui", directory: dir.path)
        try store.importJSONObject(Data(Self.settings.utf8))
        let before = try readBytes(store.path)
        let again = try store.importJSONObject(Data(Self.settings.utf8))
        #expect(again.imported.isEmpty && again.kept.isEmpty && again.unchanged.count == 8, "\(again)")
        #expect(try readBytes(store.path) == before, "importing the same file again wrote")

        try store.set("light", forKey: "theme")
        let kept = try store.importJSONObject(Data(Self.settings.utf8))
        #expect(kept.kept == ["theme"] && kept.imported.isEmpty, "\(kept)")
        #expect(try store.string(forKey: "theme") == "light", "an import overwrote what the app changed")
        let dry = try store.importJSONObject(Data(Self.settings.utf8), replacing: true, dryRun: true)
        #expect(dry.imported == ["theme"] && dry.dryRun)
        #expect(try store.string(forKey: "theme") == "light", "a dry run wrote")
        let replaced = try store.importJSONObject(Data(Self.settings.utf8), replacing: true)
        #expect(replaced.imported == ["theme"])
        #expect(try store.string(forKey: "theme") == "dark")
    }

    struct Layout: Codable, Sendable, Equatable { var columns: Int; var title: String }
    struct LayoutV1: Codable { var cols: Int; var name: String }

    @Test func aZustandPayloadBecomesAPersistedStateThatTheAppsMigrationTakesOver() throws {
        let dir = try TempDir("json-import", memory: true)
        let store = try PrefsStore(id: "ui", directory: dir.path)
        let payload = #"{"version": 1, "state": {"name": "Inbox", "cols": 2}}"#
        let report = try store.importPersistedState(Data(payload.utf8), as: "layout")
        #expect(report.imported == ["layout"] && report.types == ["layout": "json"])
        let layout = PersistedState(name: "layout", version: 2, defaults: Layout(columns: 1, title: ""), store: store) {
            stored in
            #expect(stored.version == 1)
            let old = try stored.decode(LayoutV1.self)
            return Layout(columns: old.cols, title: old.name)
        }
        #expect(layout.value == Layout(columns: 2, title: "Inbox"))
        #expect(layout.hydration == .migrated(from: 1))
        // The payload as PersistedState writes it: sorted keys, so the same payload again is unchanged.
        let sameAsStored = #"{"state":{"cols":2,"name":"Inbox"},"version":1}"#
        let fresh = try PrefsStore(id: "fresh", directory: dir.path)
        try fresh.importPersistedState(Data(payload.utf8), as: "layout")
        #expect(try fresh.importPersistedState(Data(sameAsStored.utf8), as: "layout").unchanged == ["layout"])
        // No version: Zustand's default, 0.
        try fresh.importPersistedState(Data(#"{"state": {"cols": 3, "name": "Sent"}}"#.utf8), as: "noVersion")
        let zero = PersistedState(name: "noVersion", version: 0, defaults: LayoutV1(cols: 0, name: ""), store: fresh)
        #expect(zero.value.cols == 3 && zero.hydration == .stored)
    }

    @Test(arguments: [
        ("not json", "{theme: dark}", "is not JSON"),
        ("an array", #"["a", "b"]"#, "not a JSON object"),
        ("a bad key", #"{"": 1, "theme": "dark"}"#, "key"),
    ])
    func aBadSettingsFileWritesNothing(_ name: String, _ text: String, _ said: String) throws {
        let dir = try TempDir("json-import", memory: true)
        let store = try PrefsStore(id: "ui", directory: dir.path)
        try store.set("light", forKey: "theme")
        let before = try readBytes(store.path)
        let error = #expect(throws: PrefsError.self) { try store.importJSONObject(Data(text.utf8)) }
        #expect(error?.code == .invalidInput || error?.code == .invalidKey, "\(name): \(String(describing: error))")
        #expect(error?.message.contains(said) == true, "\(name): \(error?.message ?? "")")
        #expect(try readBytes(store.path) == before, "\(name): the store changed")
    }

    @Test(arguments: [
        ("no state", #"{"version": 1}"#, "no \"state\""),
        ("a string version", #"{"state": {}, "version": "1"}"#, "\"version\""),
        ("a negative version", #"{"state": {}, "version": -1}"#, "\"version\""),
        ("not an object", #"[1]"#, "not a JSON object"),
    ])
    func aBadPayloadWritesNothing(_ name: String, _ text: String, _ said: String) throws {
        let dir = try TempDir("json-import", memory: true)
        let store = try PrefsStore(id: "ui", directory: dir.path)
        let error = #expect(throws: PrefsError.self) { try store.importPersistedState(Data(text.utf8), as: "layout") }
        #expect(
            error?.code == .invalidInput && error?.message.contains(said) == true,
            "\(name): \(String(describing: error))")
        #expect(try store.count == 0)
    }
}
