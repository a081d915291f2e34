import Glibc
import SystemLayer
import Testing

/// `Sys.runChild`: what a key store's helper program (systemd-creds) is run with.
@Suite struct ChildTests {
    // Each bash here runs with --norc: started with standard input a socket and no SHLVL in its environment (the
    // child's environment is PATH alone), bash takes itself for a shell started by sshd and reads ~/.bashrc.
    @Test func itFeedsTheInputAndCollectsBothOutputs() throws {
        let input: [UInt8] = Array("secret bytes\n".utf8)
        let result = input.withUnsafeBytes {
            Sys.runChild(
                ["/nonexistent/bash", "/bin/bash"], ["--norc", "-c", "cat; echo said >&2; exit 3"], input: $0, outputLimit: 64,
                deadline: .seconds(60))
        }
        let outcome = try result.get()
        #expect(outcome.status == 3)
        #expect(outcome.output == input)
        #expect(outcome.errorOutput == Array("said\n".utf8))
    }

    @Test func aChildPastItsDeadlineIsKilledAndReported() throws {
        // The child (sleep, which would exit after 30 s) runs under a name of its own, a symbolic link: the kernel
        // gives it that name at its exec, before runChild returns the pid and starts the clock, and keeps it while
        // the process is a zombie. No process may carry the name once runChild returns. (The child used to write
        // its pid to a file itself: on a loaded machine bash was killed at 300 ms before it had written the file,
        // and `#require` of the file failed with nothing wrong.)
        let name = "ct" + String((0..<12).map { _ in "abcdefghijklmnopqrstuvwxyz".randomElement()! })
        var template = Array("/tmp/child-test-XXXXXX".utf8CString)
        let directory = try #require(mkdtemp(&template).map { String(cString: $0) })
        let link = directory + "/" + name
        #expect(symlink("/bin/sleep", link) == 0)
        defer {
            unlink(link)
            rmdir(directory)
        }
        let result = [UInt8]().withUnsafeBytes {
            Sys.runChild([link], ["30"], input: $0, outputLimit: 64, deadline: .milliseconds(300))
        }
        #expect(Self.failure(result) == .timedOut)
        #expect(Self.processes(named: name) == [], "the child was killed and reaped")
    }

    /// The pids whose name (`/proc/PID/comm`, the first 15 bytes of the executable's file name) is `name`.
    static func processes(named name: String) -> [String]? {
        guard case .success(let entries) = Sys.directoryEntries("/proc") else { return nil }
        return entries.filter { pid in
            pid.allSatisfy(\.isNumber)
                && Sys.readSmallFile("/proc/\(pid)/comm").map { String(decoding: $0, as: UTF8.self) } == name + "\n"
        }
    }

    @Test func aChildThatExitsWithoutReadingItsInputRaisesNoSignalHere() throws {
        let input = [UInt8](repeating: 1, count: 4096)
        let result = input.withUnsafeBytes {
            Sys.runChild(["/bin/true"], [], input: $0, outputLimit: 64, deadline: .seconds(60))
        }
        #expect(try result.get().status == 0)
    }

    @Test func tooMuchOutputAndAMissingProgramAreTyped() {
        let flood = [UInt8]().withUnsafeBytes {
            Sys.runChild(["/bin/bash"], ["--norc", "-c", "head -c 100000 /dev/zero"], input: $0, outputLimit: 1000, deadline: .seconds(60))
        }
        #expect(Self.failure(flood) == .outputTooLarge)
        let missing = [UInt8]().withUnsafeBytes {
            Sys.runChild(["/nonexistent/a", "/nonexistent/b"], [], input: $0, outputLimit: 10, deadline: .seconds(1))
        }
        #expect(Self.failure(missing) == .notInstalled)
    }

    static func failure(_ result: Result<Sys.ChildOutcome, Sys.ChildFailure>) -> Sys.ChildFailure? {
        if case .failure(let failure) = result { return failure }
        return nil
    }
}

extension ChildTests {
    /// A key store's helper gets nothing of the host app's but what it is given: an environment of PATH alone, and
    /// descriptors 0, 1 and 2 (before: the whole environment, and every descriptor the host app opened without
    /// O_CLOEXEC).
    @Test func theChildGetsOnlyPathAndDescriptorsZeroToTwo() throws {
        // A descriptor the host app opened without close-on-exec, moved out of the way of the child's own.
        let opened = open("/dev/null", O_RDONLY)
        try #require(opened >= 0)
        let inheritable = fcntl(opened, F_DUPFD, 100)
        close(opened)
        try #require(inheritable >= 100)
        defer { close(inheritable) }
        #expect(fcntl(inheritable, F_GETFD) & FD_CLOEXEC == 0)
        var parentNames: [String] = []
        var entry = environ
        while let pointer = entry.pointee {
            parentNames.append(String(String(cString: pointer).prefix { $0 != "=" }))
            entry += 1
        }
        #expect(parentNames.contains { $0 != "PATH" }, "the test process has variables besides PATH: \(parentNames)")
        let result = [UInt8]().withUnsafeBytes {
            Sys.runChild(
                ["/bin/bash"],
                [
                    "--norc", "-c",
                    "tr '\\0' '\\n' < /proc/$$/environ | cut -d= -f1; echo --; "
                        + "[ -e /proc/$$/fd/\(inheritable) ] && echo inherited; ls /proc/self/fd",
                ],
                input: $0, outputLimit: 64 * 1024, deadline: .seconds(60))
        }
        let outcome = try result.get()
        let lines = String(decoding: outcome.output, as: UTF8.self).split(separator: "\n").map(String.init)
        let separator = try #require(lines.firstIndex(of: "--"), "\(lines)")
        #expect(Array(lines[..<separator]) == ["PATH"], "\(lines)")
        // ls's own listing has its directory open as 3.
        #expect(Array(lines[(separator + 1)...]) == ["0", "1", "2", "3"], "\(lines)")
    }
}
