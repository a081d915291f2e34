import Glibc
import Synchronization
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

/// Directories made while another process removes them.
@Suite struct PrivateDirectoryTests {
    /// Removes a directory as fast as it can on a thread of its own until stopped.
    final class Remover: Sendable {
        let path: String
        let stop = Atomic<Bool>(false)
        init(path: String) { self.path = path }
    }

    /// A directory removed between its `mkdir` and its `chmod` is made again, not a failure (a vault's first write
    /// exited 74 when a failed one's clean-up removed the directory it had just made: issue 35's flake loop). A
    /// thread removes the directory as fast as it can while this one makes it 200,000 times.
    @Test func aDirectoryRemovedAsItIsMadeIsMadeAgain() throws {
        let root = (Sys.environment("TMPDIR") ?? "/tmp") + "/private-directory-\(getpid())"
        let path = root + "/vault"
        #expect(Glibc.mkdir(root, 0o700) == 0)
        defer {
            Glibc.rmdir(path)
            Glibc.rmdir(root)
        }
        let remover = Remover(path: path)
        var thread = pthread_t()
        let started = pthread_create(
            &thread, nil,
            { context in
                let remover = Unmanaged<Remover>.fromOpaque(context!).takeRetainedValue()
                while !remover.stop.load(ordering: .relaxed) { Glibc.rmdir(remover.path) }
                return nil
            }, Unmanaged.passRetained(remover).toOpaque())
        try #require(started == 0)
        var failures: [String] = []
        for _ in 0..<200_000 {
            if case .failure(let error) = Sys.makePrivateDirectory(path) { failures.append(error.text) }
        }
        remover.stop.store(true, ordering: .relaxed)
        pthread_join(thread, nil)
        #expect(failures.isEmpty, "\(failures.count) of 200,000 failed, the first with \(failures.first ?? "")")
    }
}
