// Small pieces shared by the test targets, the test helper process and the fuzz targets: a seeded random
// generator and whole-file reads and writes. No test framework here, so that executables can use it too.
import Glibc

/// A deterministic generator (SplitMix64), so that a failing case can be replayed from its seed.
///
/// ```swift
/// var random = SplitMix(state: 42)
/// let n = Int.random(in: 0..<10, using: &random)
/// ```
public struct SplitMix: RandomNumberGenerator {
    public var state: UInt64

    public init(state: UInt64) { self.state = state }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// The whole contents of the file at `path`, or nil when it cannot be opened or read.
///
/// ```swift
/// let before = readFile(path)
/// ```
public func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if n < 0 && errno == EINTR { continue }
        guard n > 0 else { return n == 0 ? bytes : nil }
        bytes += chunk[0..<n]
    }
}

/// Creates or replaces the file at `path` (mode 0600) with `bytes`; false when it cannot.
///
/// ```swift
/// createFile(at: directory + "/ui.prefs", bytes)
/// ```
@discardableResult
public func createFile(at path: String, _ bytes: [UInt8]) -> Bool {
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    return bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) } == bytes.count
}

/// A new private directory named `<prefix>XXXXXX` (see mkdtemp(3)).
///
/// ```swift
/// let directory = makeScratchDirectory(prefix: "/dev/shm/prefskv-fuzz-")
/// ```
public func makeScratchDirectory(prefix: String) -> String {
    var template = Array((prefix + "XXXXXX").utf8CString)
    guard template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) != nil else {
        fatalError("mkdtemp \(prefix)XXXXXX: errno \(errno)")
    }
    return String(cString: template.withUnsafeBufferPointer { $0.baseAddress! })
}

/// Removes the files directly inside `directory` (not subdirectories).
///
/// ```swift
/// removeFiles(in: directory)
/// ```
public func removeFiles(in directory: String) {
    guard let dir = opendir(directory) else { return }
    var names: [String] = []
    while let entry = readdir(dir) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) {
            String(cString: $0.bindMemory(to: CChar.self).baseAddress!)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    closedir(dir)
    for name in names { unlink(directory + "/" + name) }
}
