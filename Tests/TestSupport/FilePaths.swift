import Foundation
import Glibc

/// The path a descriptor of this process has open (its /proc/self/fd link), nil when it names none: what the fault
/// and power-loss tests match a flushed descriptor against.
public func pathOfDescriptor(_ fd: Int32) -> String? {
    var buffer = [CChar](repeating: 0, count: 4096)
    let n = readlink("/proc/self/fd/\(fd)", &buffer, buffer.count - 1)
    guard n > 0 else { return nil }
    return String(decoding: buffer[0..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// `path` with its directory resolved (symbolic links and all), its last component kept: the name /proc/self/fd gives
/// a descriptor of it, even for a file not created yet.
public func resolvedPath(_ path: String) -> String {
    let directory = (path as NSString).deletingLastPathComponent
    let name = (path as NSString).lastPathComponent
    var resolved = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
    guard realpath(directory, &resolved) != nil else { return path }
    return String(decoding: resolved.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) + "/" + name
}
