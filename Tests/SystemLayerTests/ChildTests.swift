import SystemLayer
import Testing

/// `Sys.runChild`: what a key store's helper program (systemd-creds) is run with.
@Suite struct ChildTests {
    @Test func itFeedsTheInputAndCollectsBothOutputs() throws {
        let input: [UInt8] = Array("secret bytes\n".utf8)
        let result = input.withUnsafeBytes {
            Sys.runChild(
                ["/nonexistent/bash", "/bin/bash"], ["-c", "cat; echo said >&2; exit 3"], input: $0, outputLimit: 64,
                deadline: .seconds(60))
        }
        let outcome = try result.get()
        #expect(outcome.status == 3)
        #expect(outcome.output == input)
        #expect(outcome.errorOutput == Array("said\n".utf8))
    }

    @Test func aChildPastItsDeadlineIsKilledAndReported() throws {
        // The child would print after 30 s; its pid file shows it is gone once runChild returns.
        let pidFile = "/tmp/child-test-\(Sys.processID())"
        let result = [UInt8]().withUnsafeBytes {
            Sys.runChild(
                ["/bin/bash"], ["-c", "echo $$ > \(pidFile); exec sleep 30"], input: $0, outputLimit: 64,
                deadline: .milliseconds(300))
        }
        #expect(Self.failure(result) == .timedOut)
        let pid = try #require(Sys.readSmallFile(pidFile).map { String(decoding: $0, as: UTF8.self) })
        _ = Sys.removeIfPresent(pidFile)
        #expect(!Sys.exists("/proc/\(pid.split(separator: "\n")[0])"), "the child was killed and reaped")
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
            Sys.runChild(["/bin/bash"], ["-c", "head -c 100000 /dev/zero"], input: $0, outputLimit: 1000, deadline: .seconds(60))
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
