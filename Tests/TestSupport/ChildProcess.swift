public import Foundation
import Glibc
import SystemLayer

/// What a finished child process left behind.
public struct ChildResult: Sendable, CustomStringConvertible {
    /// The exit status, or 128 + the signal number when a signal ended the child (as a shell reports it).
    public var status: Int32
    public var standardOutput: String
    public var standardError: String
    /// Wall-clock time from spawn to exit.
    public var elapsed: Duration

    /// The non-empty lines of standard output.
    public var lines: [String] {
        standardOutput.split(separator: "\n").map(String.init)
    }

    public var description: String {
        "exit \(status) after \(elapsed)\n--- stdout\n\(standardOutput)--- stderr\n\(standardError)"
    }
}

/// Runs child processes for tests: the built helper and `vaultctl`, the repository's scripts, system tools.
///
/// Spawned by `Sys.spawn`, with an empty signal mask and default dispositions: test threads block most
/// signals, and a child that inherited that mask (as Foundation's `Process` lets it) cannot be stopped by
/// SIGTERM, so a `dbus-run-session` could never shut its bus down.
public enum ChildProcess {
    public struct SpawnError: Error, CustomStringConvertible {
        public var description: String
    }

    /// Runs `executable` with `arguments`, feeding `input` to its stdin, and waits for it to exit and for its
    /// output to close.
    ///
    /// - Parameter environment: variables to set on top of this process's; a `nil` value removes one.
    public static func run(
        _ executable: String, _ arguments: [String] = [], environment: [String: String?] = [:],
        input: Data = Data()
    ) throws -> ChildResult {
        var env = ProcessInfo.processInfo.environment
        for (key, value) in environment { env[key] = value }

        // Pipes are created and marked close-on-exec under one lock that every spawn here also takes, so a
        // child spawned concurrently by another test never inherits (and holds open) our pipes.
        spawnLock.lock()
        var stdinPipe: [Int32] = [0, 0]
        var stdoutPipe: [Int32] = [0, 0]
        var stderrPipe: [Int32] = [0, 0]
        guard pipe(&stdinPipe) == 0, pipe(&stdoutPipe) == 0, pipe(&stderrPipe) == 0 else {
            spawnLock.unlock()
            throw SpawnError(description: "pipe failed: errno \(errno)")
        }
        for fd in stdinPipe + stdoutPipe + stderrPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }

        let start = ContinuousClock.now
        let spawned = Sys.spawn(
            executable, arguments, environment: env.map { "\($0.key)=\($0.value)" }, input: stdinPipe[0],
            output: stdoutPipe[1], errorOutput: stderrPipe[1])
        spawnLock.unlock()
        close(stdinPipe[0])
        close(stdoutPipe[1])
        close(stderrPipe[1])
        guard case .success(let pid) = spawned else {
            close(stdinPipe[1])
            close(stdoutPipe[0])
            close(stderrPipe[0])
            throw SpawnError(description: "posix_spawn \(executable) failed: \(spawned)")
        }

        // Feed stdin on its own thread so a child that writes before it reads cannot deadlock with us.
        let inputBytes = [UInt8](input)
        let writerFD = stdinPipe[1]
        let writer = Thread {
            inputBytes.withUnsafeBytes { raw in
                var offset = 0
                while offset < raw.count {
                    let n = write(writerFD, raw.baseAddress! + offset, raw.count - offset)
                    if n < 0 {
                        if errno == EINTR { continue }
                        break
                    }
                    offset += n
                }
            }
            close(writerFD)
        }
        signal(SIGPIPE, SIG_IGN)
        writer.start()

        let (out, err) = drain(stdoutPipe[0], stderrPipe[0])
        var rawStatus: Int32 = 0
        while waitpid(pid, &rawStatus, 0) < 0 && errno == EINTR {}
        let status: Int32 =
            (rawStatus & 0x7f) == 0 ? (rawStatus >> 8) & 0xff : 128 + (rawStatus & 0x7f)
        return ChildResult(
            status: status, standardOutput: String(decoding: out, as: UTF8.self),
            standardError: String(decoding: err, as: UTF8.self), elapsed: ContinuousClock.now - start)
    }

    /// Runs a bash script.
    public static func bash(_ script: String, environment: [String: String?] = [:]) throws -> ChildResult {
        try run("/bin/bash", ["-c", script], environment: environment)
    }

    /// Reads both pipes to end of file, then closes them.
    private static func drain(_ first: Int32, _ second: Int32) -> ([UInt8], [UInt8]) {
        var buffers: [[UInt8]] = [[], []]
        var fds = [pollfd(fd: first, events: Int16(POLLIN), revents: 0), pollfd(fd: second, events: Int16(POLLIN), revents: 0)]
        var chunk = [UInt8](repeating: 0, count: 65536)
        var open = 2
        while open > 0 {
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                break
            }
            for index in 0..<2 where fds[index].fd >= 0 && fds[index].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { read(fds[index].fd, $0.baseAddress!, $0.count) }
                if n > 0 {
                    buffers[index].append(contentsOf: chunk[0..<n])
                } else if n == 0 || errno != EINTR {
                    close(fds[index].fd)
                    fds[index].fd = -1
                    open -= 1
                }
            }
        }
        return (buffers[0], buffers[1])
    }
}

private let spawnLock = NSLock()

/// Paths of the repository and of what `swift build` produced, found from the running test bundle.
public enum BuildProducts {
    /// The directory holding the built executables (`vaultctl`, `vault-test-helper`) and the test bundle.
    public static let directory: String = {
        var url = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath().deletingLastPathComponent()
        for _ in 0..<6 {
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("vault-test-helper").path) {
                return url.path
            }
            url.deleteLastPathComponent()
        }
        preconditionFailure("cannot find the built vault-test-helper beside the test bundle; run `swift build` first")
    }()

    /// The path of a built executable product.
    public static func executable(_ name: String) -> String {
        directory + "/" + name
    }

    /// The root of the repository (the directory holding Package.swift).
    public static let repositoryRoot: String = {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().path
    }()

    /// `scripts/with-keyring.sh`.
    public static var keyringRunner: String { repositoryRoot + "/scripts/with-keyring.sh" }
}

/// Summary lines of the torture suites: printed, and appended to `$TORTURE_REPORT` when set (`make torture`
/// collects them there for Documentation/Reliability.md).
public enum TortureReport {
    public static func line(_ text: String) {
        let environment = ProcessInfo.processInfo.environment
        // The second pass of `make torture` writes persisted index tables every few records: its lines say so.
        let tables = environment["PREFSKV_INDEX_TAIL"].map { " [index tables every \($0) records]" } ?? ""
        let line = "torture: " + text + tables
        print(line)
        guard let path = environment["TORTURE_REPORT"] else { return }
        let data = Data((line + "\n").utf8)
        if let handle = FileHandle(forWritingAtPath: path) {
            handle.seekToEndOfFile()
            handle.write(data)
            handle.closeFile()
        } else {
            _ = FileManager.default.createFile(atPath: path, contents: data)
        }
    }
}
