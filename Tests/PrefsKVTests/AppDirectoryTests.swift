import Foundation
import TestSupport
import Testing

@testable import PrefsKV

/// Each app's own data directory, and directories given as URLs.
@Suite struct AppDirectoryTests {
    @Test func anAppsDirectoryIsItsOwnUnderTheDataDirectory() throws {
        let environment = ProcessInfo.processInfo.environment
        let data = environment["XDG_DATA_HOME"].flatMap { $0.hasPrefix("/") ? $0 : nil }
            ?? (environment["HOME"] ?? "/") + "/.local/share"
        let notes = try AppDirectory("com.example.notes")
        let mail = try AppDirectory("com.example.mail")
        #expect(notes.root == data + "/com.example.notes")
        #expect(notes.preferences == notes.root + "/prefs" && notes.vaults == notes.root + "/vault")
        #expect(notes.preferences != mail.preferences, "two apps never share a store file")
        #expect(PrefsStore.defaultDirectory != notes.preferences)
    }

    @Test(arguments: ["", ".", "..", "../etc", "a/b", "/abs", String(repeating: "x", count: 129)])
    func anIdThatIsNoFileNameIsRefused(id: String) {
        #expect(throws: PrefsError.self) { _ = try AppDirectory(id) }
        do {
            _ = try AppDirectory(id)
        } catch let error as PrefsError {
            #expect(error.code == .invalidKey, "\(error)")
        } catch {
            Issue.record("\(error)")
        }
    }

    @Test func aDirectoryMayBeAFileURL() throws {
        let dir = try TempDir()
        let store = try PrefsStore(id: "ui", directory: URL(filePath: dir.path))
        try store.set("dark", forKey: "theme")
        #expect(store.path == dir.path + "/ui.prefs")
        #expect(try PrefsStore(id: "ui", directory: dir.path).string(forKey: "theme") == "dark")
        do {
            _ = try PrefsStore(id: "ui", directory: URL(string: "https://example.com/prefs")!)
            Issue.record("a web URL was taken for a directory")
        } catch let error as PrefsError {
            #expect(error.code == .invalidInput)
        }
    }
}
