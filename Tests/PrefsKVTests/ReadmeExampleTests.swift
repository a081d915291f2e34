import Testing

import Foundation
import PrefsKV

/// The README's usage snippet, verbatim between the markers, so the README never shows code that does not build.
@Suite struct ReadmeExampleTests {
    @Test func readmeSnippetCompilesAndDoesWhatItSays() throws {
        let directory = try TempDir("readme")
        let appDataDirectory = directory.path
        // README begin
        let store = try PrefsStore(id: "ui", directory: appDataDirectory)
        try store.set("dark", forKey: "theme")
        try store.set(true, forKey: "sidebar.expanded")
        try store.write { tx in                              // several changes, all or nothing
            try tx.set(280, forKey: "sidebar.width")
            tx.removeValue(forKey: "legacy.sidebar")
        }
        let theme = try store.string(forKey: "theme") ?? "light"
        // README end
        #expect(theme == "dark")
        #expect(try store.bool(forKey: "sidebar.expanded") == true)
        #expect(try store.int(forKey: "sidebar.width") == 280)

        // The snippet above and the README's must stay the same text.
        let readme = try String(contentsOfFile: repositoryRoot + "/README.md", encoding: .utf8)
        let test = try String(contentsOfFile: #filePath, encoding: .utf8)
        let snippet = test.components(separatedBy: "// README begin\n")[1].components(separatedBy: "        // README end")[0]
            .split(separator: "\n", omittingEmptySubsequences: false).map { $0.dropFirst(8) }.joined(separator: "\n")
        #expect(readme.contains("```swift\nimport PrefsKV\n\n" + snippet + "```"), "README snippet drifted from this test")
    }

    var repositoryRoot: String {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }
}
