// The standard streams and other descriptors the process is given: read to their end, written in full.
// A parent may have closed any of them, so EBADF here is reported, not trapped (see `retrying(given:_:)`).
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
