// Test support: temporary directories, file bytes, the helper binary and child processes.
import Foundation
import Glibc
import Logging
import Synchronization
import SystemLayer
import Testing
import TestSupport

@testable import PrefsKV

/// A fresh directory under the system temporary directory, removed (with its contents) on deinit.
final class TempDir {
    let path: String

    /// A directory in `/dev/shm` (tmpfs: fsync costs nothing) when `memory`, else in the temporary directory.
    init(_ name: String = "t", memory: Bool = false) throws {
        var isDirectory: ObjCBool = false
        let shm =
            memory && FileManager.default.fileExists(atPath: "/dev/shm", isDirectory: &isDirectory)
            && isDirectory.boolValue
        let base = shm ? "/dev/shm/" : NSTemporaryDirectory()
        var template = Array((base + "prefskv-\(name)-XXXXXX").utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        guard made != nil else { throw TestFailure("mkdtemp failed: errno \(errno)") }
        path = String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }

    func file(_ name: String) -> String { path + "/" + name }

    /// The files in the directory, sorted.
    var files: [String] { ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted() }
}

struct TestFailure: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

func readBytes(_ path: String) throws -> [UInt8] {
    Array(try Data(contentsOf: URL(fileURLWithPath: path)))
}

/// Writes `bytes` to `path`, mode 0600 as the library creates a store's files (a store file others may read is
/// refused since issue 14).
func writeBytes(_ bytes: [UInt8], to path: String) throws {
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    guard chmod(path, 0o600) == 0 else { throw TestFailure("chmod \(path): errno \(errno)") }
}

func fileMode(_ path: String) -> UInt32 {
    var st = stat()
    guard stat(path, &st) == 0 else { return 0 }
    return UInt32(st.st_mode) & 0o7777
}

func fileSize(_ path: String) -> Int {
    var st = stat()
    guard stat(path, &st) == 0 else { return -1 }
    return Int(st.st_size)
}

/// Opens a store with a configuration built by `configure`.
func openStore(
    _ dir: TempDir, id: String = "ui", _ configure: (inout PrefsStore.Configuration) -> Void = { _ in }
) throws -> PrefsStore {
    var configuration = PrefsStore.Configuration()
    configuration.logger.logLevel = .critical
    configure(&configuration)
    return try PrefsStore(id: id, directory: dir.path, configuration: configuration)
}

/// The test helper executable: a sibling of the test bundle (walking up from /proc/self/exe).
let helperPath: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    precondition(n > 0, "cannot resolve /proc/self/exe")
    let exe = String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    var dir = URL(fileURLWithPath: exe).deletingLastPathComponent()
    while dir.path != "/" {
        let candidate = dir.appendingPathComponent("vault-test-helper").path
        if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
        dir = dir.deletingLastPathComponent()
    }
    preconditionFailure("vault-test-helper not found beside the test bundle; build it with `swift build`")
}()

/// A helper child process whose stdout is a pipe read by the test.
final class Child {
    let pid: pid_t
    /// Set once `waitpid` reaped the child: its pid may then belong to any other process or thread (a `kill` of a
    /// thread id signals that thread's whole process, so a second kill once took the test process down with it
    /// when a busy torture run had recycled the pid), and is never signalled again.
    private var reaped = false
    private var reapedStatus: Int32 = 0
    private let stdoutFD: Int32
    private var buffer: [UInt8] = []
    private(set) var lines: [String] = []
    private var eof = false

    /// Spawns `executable` (the test helper unless named) with `arguments`.
    init(_ arguments: [String], executable: String = helperPath) throws {
        // Close-on-exec from the start (`Sys.pipe`): a child another test spawns meanwhile inherits neither end (an
        // inherited write end would hold this pipe open past this child's exit).
        guard case .success(let ends) = Sys.pipe() else { throw TestFailure("pipe failed") }
        let fds = [ends.read, ends.write]
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, fds[1], 1)
        posix_spawn_file_actions_addclose(&actions, fds[0])
        posix_spawn_file_actions_addclose(&actions, fds[1])
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let rc = posix_spawn(&pid, executable, &actions, nil, argv, environ)
        close(fds[1])
        guard rc == 0 else {
            close(fds[0])
            throw TestFailure("posix_spawn failed: \(rc)")
        }
        self.pid = pid
        stdoutFD = fds[0]
    }

    deinit {
        if !reaped {
            kill(pid, SIGKILL)
            var status: Int32 = 0
            _ = waitpid(pid, &status, 0)
        }
        close(stdoutFD)
    }

    /// Reads what is available within `timeout` seconds; returns false at end of file.
    @discardableResult
    func pump(timeout: Double) -> Bool {
        guard !eof else { return false }
        var pfd = pollfd(fd: stdoutFD, events: Int16(POLLIN), revents: 0)
        let ready = poll(&pfd, 1, Int32(max(0, timeout * 1000)))
        guard ready > 0 else { return true }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let n = read(stdoutFD, &chunk, chunk.count)
        if n <= 0 {
            eof = true
            return false
        }
        buffer += chunk[0..<n]
        while let newline = buffer.firstIndex(of: 10) {
            lines.append(String(decoding: buffer[..<newline], as: UTF8.self))
            buffer.removeSubrange(...newline)
        }
        return true
    }

    /// Waits until a line satisfies `predicate` (or the child exits). `timeout` only guards against a hang: a
    /// child on a loaded machine may take many seconds to start, and that must not fail a test.
    func waitForLine(timeout: Double = 120, _ predicate: (String) -> Bool) -> String? {
        let deadline = Date().addingTimeInterval(timeout)
        var seen = 0
        while Date() < deadline {
            while seen < lines.count {
                if predicate(lines[seen]) { return lines[seen] }
                seen += 1
            }
            if !pump(timeout: 0.05) && seen == lines.count { return nil }
        }
        return nil
    }

    /// Kills the child with SIGKILL and reads everything it wrote.
    func killAndDrain() {
        if !reaped { kill(pid, SIGKILL) }
        drain()
    }

    /// Reads to end of file and reaps the child; returns its exit status (or -signal).
    @discardableResult
    func drain() -> Int32 {
        while pump(timeout: 5) {}
        guard !reaped else { return reapedStatus }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        reaped = true
        reapedStatus = status & 0x7F == 0 ? (status >> 8) & 0xFF : -(status & 0x7F)
        return reapedStatus
    }
}

/// A file system mounted for one test (tmpfs), unmounted on deinit.
final class Mount {
    let path: String

    init(size: String, in dir: TempDir) throws {
        path = dir.file("mnt")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        guard run(["mount", "-t", "tmpfs", "-o", "size=\(size),mode=0700", "tmpfs", path]) == 0 else {
            throw TestFailure("mount -t tmpfs failed: these tests need root (CAP_SYS_ADMIN)")
        }
    }

    func remount(readOnly: Bool) throws {
        guard run(["mount", "-o", readOnly ? "remount,ro" : "remount,rw", path]) == 0 else {
            throw TestFailure("remount failed")
        }
    }

    deinit {
        _ = run(["umount", "-l", path])
    }
}

/// Runs a command and returns its exit status.
@discardableResult
func run(_ arguments: [String]) -> Int32 {
    let argv = arguments.map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    guard posix_spawnp(&pid, arguments[0], nil, nil, argv, environ) == 0 else { return -1 }
    var status: Int32 = 0
    _ = waitpid(pid, &status, 0)
    return (status >> 8) & 0xFF
}

/// Hex of bytes, for messages.
func hex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

/// Expects `body` to throw a `PrefsError` with `code`; returns the error.
@discardableResult
func expectError<R>(
    _ code: PrefsError.Code, sourceLocation: SourceLocation = #_sourceLocation, _ body: () throws -> R
) -> PrefsError? {
    do {
        _ = try body()
        Issue.record("expected PrefsError.\(code), nothing was thrown", sourceLocation: sourceLocation)
    } catch let error as PrefsError {
        #expect(error.code == code, "\(error)", sourceLocation: sourceLocation)
        return error
    } catch {
        Issue.record("expected PrefsError.\(code), got \(error)", sourceLocation: sourceLocation)
    }
    return nil
}


/// Splits a crash writer's output ("B <n> <op>" before operation n, "A <n>" once it returned) into the operations
/// it acknowledged, in order, the one in flight when it was killed, and the number of the last acknowledged one
/// (`firstNumber - 1` when none was). An acknowledgement that does not match the operation begun is a failure.
func parseAcknowledgements(_ lines: [String], firstNumber: Int, sourceLocation: SourceLocation = #_sourceLocation)
    -> (acknowledged: [String], inFlight: String?, lastAck: Int)
{
    var acknowledged: [String] = []
    var inFlight: String?
    var lastAck = firstNumber - 1
    for line in lines {
        if line.hasPrefix("B ") {
            inFlight = line
        } else if line.hasPrefix("A "), let n = Int(line.dropFirst(2)), let op = inFlight {
            #expect(Int(op.split(separator: " ")[1]) == n, "ack \(n) for \(op)", sourceLocation: sourceLocation)
            acknowledged.append(op)
            inFlight = nil
            lastAck = n
        }
    }
    return (acknowledged, inFlight, lastAck)
}

/// The checksum seed of the records of the store file `bytes` (its header's version and generation).
func recordSeed(ofFile bytes: [UInt8]) -> RecordSeed {
    bytes.withUnsafeBytes { RecordSeed(headerPage: $0) }
}

/// The CRC32C a record must end with in the store file `file`, over `record` (its bytes from its magic up to its
/// CRC): what anyone who can write the file can compute (the generation it starts with is in the header).
func recordChecksum(_ record: ArraySlice<UInt8>, inFile file: [UInt8]) -> UInt32 {
    Array(record).withUnsafeBytes { recordSeed(ofFile: file).checksum($0) }
}

/// A store file of the current version as version `version` wrote it, for files whose layout that version shares
/// (the caller's to know): the version field of the header page and of its copy (the first record), their CRCs, the
/// copy's authenticator (`sealer`: a sealed store, whose copy is authenticated) and its checksum (seeded by the
/// generation) made again.
func withFormatVersion(_ version: UInt8, _ bytes: [UInt8], sealer: (any PrefsSealer)? = nil) throws -> [UInt8] {
    var out = bytes
    func storeCRC(_ crc: UInt32, at offset: Int) {
        withUnsafeBytes(of: crc.littleEndian) { out.replaceSubrange(offset..<offset + 4, with: $0) }
    }
    for start in [0, Format.logStart + Format.recordHeaderSize] {
        out[start + Format.versionOffset] = version
        storeCRC(CRC32C.checksum(Array(out[start..<start + Format.staticCRCOffset])), at: start + Format.staticCRCOffset)
    }
    let start = Format.logStart
    let length = out.withUnsafeBytes { RecordHeader.plausible(in: $0, at: start, limit: out.count)!.length }
    if let sealer {
        let header = try out.withUnsafeBytes { try Header.parse(UnsafeRawBufferPointer(rebasing: $0[0..<4096])) }
        let auth = try #require(RecordAuth(header: header, sealer: sealer))
        var record = Array(out[start..<start + length])
        record.withUnsafeMutableBytes { auth.sign($0, at: start) }
        out.replaceSubrange(start..<start + length, with: record)
    }
    storeCRC(recordChecksum(out[start..<start + length - 4], inFile: out), at: start + length - 4)
    return out
}
