// The standard streams and other descriptors the process is given: read to their end, written in full.
// A parent may have closed any of them, so EBADF here is reported, not trapped (see `retrying(given:_:)`).
import CPrefsKV
import Glibc

extension Sys {
    /// Standard input, output and error.
    package static let standardInput: Int32 = 0
    package static let standardOutput: Int32 = 1
    package static let standardError: Int32 = 2

    /// Reads from `fd` until `buffer` is full or the input ends; returns the count of bytes read.
    ///
    /// A pipe or a terminal delivers its input in pieces: this reads until `read` returns 0 (on a terminal,
    /// Ctrl-D at the start of a line).
    // See: man 2 read
    package static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) -> Result<Int, Errno> {
        var done = 0
        while done < buffer.count {
            switch retrying(given: true, { Glibc.read(fd, buffer.baseAddress! + done, buffer.count - done) }) {
            case .failure(let e): return .failure(e)
            case .success(0): return .success(done)
            case .success(let n): done += n
            }
        }
        return .success(done)
    }

    /// Everything `fd` delivers until its end (a pipe or standard input included).
    // See: man 2 read
    package static func readToEnd(_ fd: Int32) -> Result<[UInt8], Errno> {
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            switch chunk.withUnsafeMutableBytes({ read(fd, into: $0) }) {
            case .failure(let e): return .failure(e)
            case .success(let count):
                bytes += chunk[0..<count]
                if count < chunk.count { return .success(bytes) }
            }
        }
    }

    /// Writes all of `buffer` to `fd` (a short write is continued); the first failure ends it, as a closed pipe
    /// ends a command's output.
    // See: man 2 write
    package static func write(_ fd: Int32, _ buffer: UnsafeRawBufferPointer) -> Result<Void, Errno> {
        var done = 0
        while done < buffer.count {
            switch retrying(given: true, { Glibc.write(fd, buffer.baseAddress! + done, buffer.count - done) }) {
            case .failure(let e): return .failure(e)
            case .success(let n): done += n
            }
        }
        return .success(())
    }
}

extension Sys {
    /// A pipe, both ends close-on-exec.
    // See: man 2 pipe2
    package static func pipe() -> Result<(read: Int32, write: Int32), Errno> {
        var fds: [Int32] = [-1, -1]
        guard prefs_pipe_cloexec(&fds) == 0 else { return .failure(Errno(rawValue: errno)) }
        return .success((fds[0], fds[1]))
    }

    /// Reads from `fd` into `buffer`, after the `start` bytes already in it, until its writers close it, waiting at
    /// most until `deadline` for each piece (so a writer that never closes cannot hang the caller): the count now in
    /// `buffer`, `.timedOut` when the deadline passed first, `.messageTooLong` when more than `buffer.count` bytes
    /// come.
    // See: man 2 poll
    package static func readToEnd(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, after start: Int = 0, deadline: ContinuousClock.Instant
    ) -> Result<Int, Errno> {
        switch read(fd, into: buffer, after: start, untilClosedBefore: deadline) {
        case .success(let count) where count == buffer.count:
            // Full: one byte more tells "exactly full" from "too long".
            var spare: UInt8 = 0
            return withUnsafeMutableBytes(of: &spare) { spare in
                read(fd, into: spare, untilClosedBefore: deadline).flatMap {
                    $0 == 0 ? .success(count) : .failure(.messageTooLong)
                }
            }
        case let other:
            return other
        }
    }

    /// Reads from `fd` into `buffer`, after the `start` bytes already in it, until its writers close it or `buffer`
    /// is full, waiting at most until `deadline` for each piece: the count now in `buffer` (all of it when full: the
    /// writers may have more), `.timedOut` when the deadline passed first.
    // See: man 2 poll
    package static func read(
        _ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, after start: Int = 0,
        untilClosedBefore deadline: ContinuousClock.Instant
    ) -> Result<Int, Errno> {
        var done = start
        while done < buffer.count {
            let left = ContinuousClock.now.duration(to: deadline)
            guard left > .zero else { return .failure(.timedOut) }
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            var request = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            switch retrying(given: true, { Int(Glibc.poll(&request, 1, milliseconds)) }) {
            case .failure(let e): return .failure(e)
            case .success(0): return .failure(.timedOut)
            case .success: break
            }
            switch retrying(given: true, { Glibc.read(fd, buffer.baseAddress! + done, buffer.count - done) }) {
            case .failure(let e): return .failure(e)
            case .success(0): return .success(done)
            case .success(let n): done += n
            }
        }
        return .success(done)
    }
}
