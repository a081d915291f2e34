// The only file of vaultctl that calls the C library: file status, the terminal, standard streams, the process.
// Every other file goes through `System`, so that a shared system layer can take these over in one place.
import Glibc

/// vaultctl's system calls: small wrappers, each retrying `EINTR` where it can occur.
enum System {
    /// A failed call: its errno and the C library's text for it.
    struct Failure: Error {
        var number: Int32
        /// Whether opening the file failed (rather than reading it).
        var opening = false

        /// `strerror`'s text, e.g. "No such file or directory".
        var description: String { String(cString: strerror(number)) }
        /// `ENOENT`.
        var isNotFound: Bool { number == ENOENT }
        /// `EACCES` or `EPERM`.
        var isPermissionDenied: Bool { number == EACCES || number == EPERM }
    }

    /// What `stat`/`lstat` tell vaultctl about a path.
    struct FileStatus {
        /// The permission bits (`st_mode & 0o7777`).
        var mode: Int
        /// The owner's user id.
        var owner: Int
        /// The size in bytes.
        var size: Int
    }

    /// `lstat(path)`: nil when nothing is there (a symbolic link is itself, not its target). See: man 2 lstat
    static func linkStatus(_ path: String) -> FileStatus? {
        var info = stat()
        guard lstat(path, &info) == 0 else { return nil }
        return FileStatus(info)
    }

    /// `stat(path)`, following links: nil when nothing (reachable) is there. See: man 2 stat
    static func fileStatus(_ path: String) -> FileStatus? {
        var info = stat()
        guard stat(path, &info) == 0 else { return nil }
        return FileStatus(info)
    }

    /// This process's real user id. See: man 2 getuid
    static var userID: Int { Int(getuid()) }

    /// The value of an environment variable, nil when unset. See: man 3 getenv
    static func environment(_ name: String) -> String? {
        getenv(name).map { String(cString: $0) }
    }

    /// Ends the process with `status` (buffers of this process are its own writes: none pending). See: man 3 exit
    static func exit(_ status: Int32) -> Never {
        Glibc.exit(status)
    }

    /// Secrets pass through this process: never let a crash write them to a core file. See: man 2 setrlimit
    static func disableCoreDumps() {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
    }

    /// Standard input, output and error.
    static let standardInput: Int32 = 0
    static let standardOutput: Int32 = 1
    static let standardError: Int32 = 2

    /// Writes all of `text` to `fd`; a failure (a closed pipe) drops the rest, as a CLI's output does.
    static func write(_ text: String, to fd: Int32) {
        var copy = text
        copy.withUTF8 { bytes in
            var offset = 0
            while offset < bytes.count {
                let written = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    return
                }
                offset += written
            }
        }
    }

    /// Reads from `fd` into `buffer[from...]` until end of file or the buffer is full; returns the bytes now held.
    /// See: man 2 read
    static func read(_ fd: Int32, into buffer: inout [UInt8], from start: Int = 0) throws(Failure) -> Int {
        var count = start
        while count < buffer.count {
            let got = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + count, $0.count - count) }
            if got == 0 { break }
            if got < 0 {
                if errno == EINTR { continue }
                throw Failure(number: errno)
            }
            count += got
        }
        return count
    }

    /// All of the file at `path` (opened read-only). See: man 2 open
    static func readFile(_ path: String) throws(Failure) -> [UInt8] {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw Failure(number: errno, opening: true) }
        defer { Glibc.close(fd) }
        return try readToEnd(fd)
    }

    /// All that is left to read from `fd`.
    static func readToEnd(_ fd: Int32) throws(Failure) -> [UInt8] {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = try read(fd, into: &chunk)
            bytes += chunk[0..<count]
            if count < chunk.count { return bytes }
        }
    }

    /// Runs `body` with standard input's echo turned off when it is a terminal; `onTerminal` runs first, and
    /// `afterTerminal` last, only on a terminal. See: man 3 tcsetattr
    static func withoutEcho<R, E: Error>(
        onTerminal: () -> Void, afterTerminal: () -> Void, _ body: () throws(E) -> R
    ) throws(E) -> R {
        var saved = termios()
        let terminal = isatty(standardInput) != 0 && tcgetattr(standardInput, &saved) == 0
        if terminal {
            onTerminal()
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            _ = tcsetattr(standardInput, TCSAFLUSH, &quiet)
        }
        defer {
            if terminal {
                _ = tcsetattr(standardInput, TCSAFLUSH, &saved)
                afterTerminal()
            }
        }
        return try body()
    }

    /// Overwrites `bytes` with zeros in a way the compiler cannot drop. See: man 3 explicit_bzero
    static func zero(_ bytes: inout [UInt8]) {
        bytes.withUnsafeMutableBytes { raw in
            if let base = raw.baseAddress { explicit_bzero(base, raw.count) }
        }
    }

    /// A UTC calendar time: year, month (1-12), day, hour, minute, second.
    struct UTCTime {
        var year, month, day, hour, minute, second: Int
    }

    /// Seconds since the Unix epoch as a UTC calendar time; nil when out of range. See: man 3 gmtime_r
    static func utcTime(seconds: Int64) -> UTCTime? {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return nil }
        return UTCTime(
            year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday),
            hour: Int(parts.tm_hour), minute: Int(parts.tm_min), second: Int(parts.tm_sec))
    }
}

extension System.FileStatus {
    fileprivate init(_ info: stat) {
        self.init(mode: Int(info.st_mode & 0o7777), owner: Int(info.st_uid), size: Int(info.st_size))
    }
}
