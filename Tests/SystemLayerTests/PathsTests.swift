import SystemLayer
import Testing

/// The one path rule: a relative path stays relative, an absolute one absolute.
@Suite struct PathsTests {
    @Test func joiningKeepsARelativeDirectoryRelative() {
        #expect(Sys.joinPath("/var/lib/app", "ui.prefs") == "/var/lib/app/ui.prefs")
        #expect(Sys.joinPath("/var/lib/app/", "ui.prefs") == "/var/lib/app/ui.prefs")
        #expect(Sys.joinPath("/", "ui.prefs") == "/ui.prefs")
        #expect(Sys.joinPath("state", "ui.prefs") == "state/ui.prefs")
        #expect(Sys.joinPath("a/b/", "ui.prefs") == "a/b/ui.prefs")
        #expect(Sys.joinPath("", "ui.prefs") == "ui.prefs")
    }

    @Test func theParentOfABareNameIsTheWorkingDirectory() {
        #expect(Sys.parentDirectory(of: "/srv/ui.bak") == "/srv")
        #expect(Sys.parentDirectory(of: "/ui.bak") == "/")
        #expect(Sys.parentDirectory(of: "backups/ui.bak") == "backups")
        #expect(Sys.parentDirectory(of: "ui.bak") == ".")
    }

    @Test func directoryPrefixesAreSpelledAsThePathIs() {
        #expect(Sys.directoryPrefixes(of: "a/b/c") == ["a", "a/b", "a/b/c"])
        #expect(Sys.directoryPrefixes(of: "/a/b") == ["/a", "/a/b"])
        #expect(Sys.directoryPrefixes(of: "./a//b/") == [".", "./a", "./a//b"])
        #expect(Sys.directoryPrefixes(of: "../x") == ["..", "../x"])
        #expect(Sys.directoryPrefixes(of: "") == [])
    }
}
