import Foundation

/// Diagnostics on stderr.
enum Console {
    static func error(_ text: String) {
        FileHandle.standardError.write(Data((text + "\n").utf8))
    }
}

struct DemoError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// Files and processes.
enum Files {
    /// A new private directory under `$TMPDIR` (or /tmp).
    static func temporaryDirectory() throws -> String {
        let base = ProcessInfo.processInfo.environment["TMPDIR"] ?? "/tmp"
        var template = Array((base + "/launch-demo.XXXXXX").utf8CString)
        guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
            throw DemoError("cannot create a directory in \(base): errno \(errno)")
        }
        return String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
    }

    /// Runs a program and waits for it: `input` goes to its stdin, its stdout is captured (or discarded, for a
    /// daemon that forks and would hold the pipe open), its stderr passes through (or is discarded).
    ///
    /// posix_spawn and waitpid rather than Foundation's `Process`, whose wait here never returned after
    /// gnome-keyring-daemon forked.
    static func run(
        _ path: String, _ arguments: [String], input: String? = nil, quiet: Bool = false,
        environment: [String: String?] = [:]
    ) throws -> (status: Int32, output: Data) {
        var inPipe: [Int32] = [-1, -1]
        var outPipe: [Int32] = [-1, -1]
        guard pipe(&inPipe) == 0 else { throw DemoError("pipe: errno \(errno)") }
        guard quiet || pipe(&outPipe) == 0 else { throw DemoError("pipe: errno \(errno)") }
        for fd in inPipe + outPipe where fd >= 0 { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, inPipe[0], 0)
        if quiet {
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        } else {
            posix_spawn_file_actions_adddup2(&actions, outPipe[1], 1)
        }
        let argv = ([path] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var variables = ProcessInfo.processInfo.environment
        for (name, value) in environment { variables[name] = value }
        let envp = variables.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { envp.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, nil, argv, envp)
        close(inPipe[0])
        if !quiet { close(outPipe[1]) }
        guard spawned == 0 else {
            close(inPipe[1])
            if !quiet { close(outPipe[0]) }
            throw DemoError("cannot run \(path): errno \(spawned)")
        }
        var bytes = Array((input ?? "").utf8)
        var written = 0
        while written < bytes.count {
            let n = bytes.withUnsafeMutableBytes { write(inPipe[1], $0.baseAddress! + written, $0.count - written) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            written += n
        }
        close(inPipe[1])
        var output: [UInt8] = []
        if !quiet {
            var chunk = [UInt8](repeating: 0, count: 65536)
            while true {
                let n = read(outPipe[0], &chunk, chunk.count)
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { break }
                output += chunk[0..<n]
            }
            close(outPipe[0])
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return ((status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f), Data(output))
    }

    /// Flips one byte in the middle of the value of the last record that sets `key` in a plain PrefsKV store,
    /// in place, and returns its offset. The log starts at 4096; a record is "PKVr", kind (1 = set), type,
    /// flags, a reserved byte, u32 key length, u32 value length, seq, expiry, the key, the value, padding and a
    /// CRC32C, 8-byte aligned (Documentation/FileFormat.md).
    static func flipByteInRecord(key: String, ofStore path: String) throws -> Int {
        guard var bytes = FileManager.default.contents(atPath: path).map(Array.init) else {
            throw DemoError("cannot read \(path)")
        }
        func u32(_ at: Int) -> Int {
            Int(bytes[at]) | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2]) << 16 | Int(bytes[at + 3]) << 24
        }
        var offset = 4096
        var target: Int?
        while offset + 32 <= bytes.count, bytes[offset..<offset + 4].elementsEqual("PKVr".utf8) {
            let keyLength = u32(offset + 8)
            let valueLength = u32(offset + 12)
            let keyRange = (offset + 32)..<(offset + 32 + keyLength)
            if bytes[offset + 4] == 1, valueLength > 0, bytes[keyRange].elementsEqual(key.utf8) {
                target = keyRange.upperBound + valueLength / 2
            }
            offset += (32 + keyLength + valueLength + 4 + 7) & ~7
        }
        guard let target else { throw DemoError("no record of \"\(key)\" in \(path)") }
        bytes[target] ^= 0x20
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: path))
        try handle.seek(toOffset: UInt64(target))
        try handle.write(contentsOf: [bytes[target]])
        try handle.close()
        return target
    }
}

/// The private session's gnome-keyring, driven as the tests drive it (DESIGN.md section 6).
enum Keyring {
    static let collection = "/org/freedesktop/secrets/collection/login"

    /// Locks the login keyring through the Secret Service's D-Bus `Lock` method.
    static func lock() throws {
        let result = try gdbus([
            "--object-path", "/org/freedesktop/secrets", "--method", "org.freedesktop.Secret.Service.Lock",
            "['\(collection)']",
        ])
        guard result.status == 0 else { throw DemoError("locking the keyring failed (gdbus exited \(result.status))") }
        guard try isLocked() == true else { throw DemoError("the keyring did not lock") }
    }

    /// Unlocks it by replacing the daemon with one given the password, then waits until it is unlocked.
    static func unlock(password: String) throws {
        // The daemon forks and keeps what it inherited: give it nothing of ours to hold open.
        _ = try Files.run(
            "/usr/bin/env", ["gnome-keyring-daemon", "--replace", "--unlock", "--components=secrets"],
            input: password, quiet: true)
        let deadline = ContinuousClock.now + .seconds(10)
        while ContinuousClock.now < deadline {
            if (try? isLocked()) == false { return }
            usleep(50_000)
        }
        throw DemoError("the keyring was still locked 10 s after gnome-keyring-daemon --replace --unlock")
    }

    /// The login collection's `Locked` property; nil when it cannot be read.
    static func isLocked() throws -> Bool? {
        let result = try gdbus([
            "--object-path", collection, "--method", "org.freedesktop.DBus.Properties.Get",
            "org.freedesktop.Secret.Collection", "Locked",
        ])
        let text = String(decoding: result.output, as: UTF8.self)
        return result.status != 0 ? nil : text.contains("true") ? true : text.contains("false") ? false : nil
    }

    /// How many vault master keys the keyring holds (items of SecureVault's schema); nil when unknown.
    static func masterKeyCount() -> Int? {
        guard
            let result = try? gdbus([
                "--object-path", "/org/freedesktop/secrets", "--method", "org.freedesktop.Secret.Service.SearchItems",
                "{'xdg:schema': 'dev.securevault.MasterKey'}",
            ]), result.status == 0
        else { return nil }
        return String(decoding: result.output, as: UTF8.self).components(separatedBy: collection + "/").count - 1
    }

    private static func gdbus(_ arguments: [String]) throws -> (status: Int32, output: Data) {
        try Files.run("/usr/bin/env", ["gdbus", "call", "--session", "--dest", "org.freedesktop.secrets"] + arguments)
    }
}
