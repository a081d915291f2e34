// Clocks, process facts, statistics and child processes: the harness's plumbing.
import CMallocCounter
import Glibc

/// Nanoseconds on the monotonic clock.
@inline(__always)
public func monotonicNanoseconds() -> UInt64 {
    var now = timespec()
    clock_gettime(CLOCK_MONOTONIC, &now)
    return UInt64(now.tv_sec) * 1_000_000_000 + UInt64(now.tv_nsec)
}

/// What one timed section measured.
public struct Measured: Sendable {
    public var nanoseconds: UInt64
    public var allocations: UInt64
}

/// Times `body`, counting its heap allocations (see `CMallocCounter`: about a nanosecond per allocation).
@inline(__always)
public func measure(_ body: () throws -> Void) rethrows -> Measured {
    malloc_counter_start()
    let start = monotonicNanoseconds()
    try measuredRegion(body)
    let end = monotonicNanoseconds()
    let allocations = malloc_counter_stop()
    return Measured(nanoseconds: end - start, allocations: allocations)
}

/// Runs the timed section of every workload: one function, never inlined, so that callgrind can count the
/// instructions inside it and nothing else (`--toggle-collect='*measuredRegion*'`: scripts/bench-check.sh).
@inline(never)
public func measuredRegion(_ body: () throws -> Void) rethrows { try body() }

/// Peak resident set size of this process, in KiB: `VmHWM` of /proc/self/status. (`getrusage`'s ru_maxrss
/// survives execve on Linux, so a worker would report its parent's peak.)
public func peakRSSKiB() -> Int {
    guard let status = readSmallFile("/proc/self/status"),
        let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") })
    else { return 0 }
    return Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0
}

/// Total size in bytes of the regular files at `paths` (directories: their files, one level deep).
public func diskBytes(_ paths: [String]) -> Int {
    var total = 0
    for path in paths {
        var status = stat()
        guard stat(path, &status) == 0 else { continue }
        if (status.st_mode & S_IFMT) == S_IFDIR {
            total += diskBytes(directoryEntries(path).map { path + "/" + $0 })
        } else {
            total += Int(status.st_size)
        }
    }
    return total
}

func directoryEntries(_ path: String) -> [String] {
    guard let directory = opendir(path) else { return [] }
    defer { closedir(directory) }
    var names: [String] = []
    while let entry = readdir(directory) {
        let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
            String(cString: raw.bindMemory(to: CChar.self).baseAddress!)
        }
        if name != "." && name != ".." { names.append(name) }
    }
    return names
}

/// Removes a directory tree (the harness's own scratch directories only).
public func removeTree(_ path: String) {
    var status = stat()
    guard lstat(path, &status) == 0 else { return }
    if (status.st_mode & S_IFMT) == S_IFDIR {
        for name in directoryEntries(path) { removeTree(path + "/" + name) }
        rmdir(path)
    } else {
        unlink(path)
    }
}

/// Creates a fresh private directory under `parent`.
public func makeScratchDirectory(in parent: String, prefix: String) -> String {
    var template = Array((parent + "/" + prefix + "XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { fatalError("mkdtemp in \(parent) failed: errno \(errno)") }
    return String(cString: made)
}

public func environment(_ name: String) -> String? {
    getenv(name).map { String(cString: $0) }
}

/// Median and spread of samples.
public struct Summary: Sendable, Codable {
    public var median: Double
    public var minimum: Double
    public var maximum: Double
    public var count: Int

    public init?(_ samples: [Double]) {
        guard !samples.isEmpty else { return nil }
        let sorted = samples.sorted()
        let middle = sorted.count / 2
        median = sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
        minimum = sorted.first!
        maximum = sorted.last!
        count = sorted.count
    }

    /// Half the min-max range, as a percentage of the median.
    public var spreadPercent: Double { median == 0 ? 0 : (maximum - minimum) / 2 / median * 100 }
}

public func median(_ samples: [Double]) -> Double? { Summary(samples)?.median }

// MARK: Child processes

/// What a finished child process printed, how it ended, and how long it lived (spawn to reaped).
public struct ChildRun: Sendable {
    public var status: Int32
    public var output: String
    public var wallNanoseconds: UInt64
}

/// The directory holding this executable (and the harness's helper executables beside it).
public let executableDirectory: String = {
    var buffer = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    precondition(length > 0, "cannot read /proc/self/exe")
    let path = String(decoding: buffer[0..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    return String(path[..<path.lastIndex(of: "/")!])
}()

/// Runs `executable` (a path, or a name looked up in PATH) with `arguments`, collecting stdout; stderr passes
/// through. The wall time runs from just before `posix_spawn` to just after `waitpid`.
public func runChild(_ executable: String, _ arguments: [String], environment extra: [String] = []) -> ChildRun {
    var pipeFDs: [Int32] = [0, 0]
    precondition(pipe(&pipeFDs) == 0, "pipe failed")
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_adddup2(&actions, pipeFDs[1], 1)
    posix_spawn_file_actions_addclose(&actions, pipeFDs[0])
    posix_spawn_file_actions_addclose(&actions, pipeFDs[1])
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let start = monotonicNanoseconds()
    var environmentList: [UnsafeMutablePointer<CChar>?] = []
    var index = 0
    while let entry = environ[index] {
        environmentList.append(strdup(entry))
        index += 1
    }
    environmentList += extra.map { strdup($0) } + [nil]
    defer { environmentList.forEach { free($0) } }
    let spawned = withCleanSignals { attributes in
        posix_spawnp(&pid, executable, &actions, &attributes, argv, environmentList)
    }
    close(pipeFDs[1])
    guard spawned == 0 else {
        close(pipeFDs[0])
        return ChildRun(status: 127, output: "", wallNanoseconds: 0)
    }
    var output: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 65536)
    while true {
        let n = read(pipeFDs[0], &chunk, chunk.count)
        if n > 0 { output += chunk[0..<n] } else if n == 0 || errno != EINTR { break }
    }
    close(pipeFDs[0])
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    let end = monotonicNanoseconds()
    let exit = (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    return ChildRun(status: exit, output: String(decoding: output, as: UTF8.self), wallNanoseconds: end - start)
}

/// Starts `executable` without waiting; returns its pid (stdout goes to /dev/null).
public func startChild(_ executable: String, _ arguments: [String]) -> Int32 {
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    let argv = ([executable] + arguments).map { strdup($0) } + [nil]
    defer { argv.forEach { free($0) } }
    var pid: pid_t = 0
    let spawned = withCleanSignals { attributes in posix_spawnp(&pid, executable, &actions, &attributes, argv, environ) }
    precondition(spawned == 0, "cannot start \(executable)")
    return pid
}

/// Spawn attributes that give the child no blocked signal and every signal's default action: a child inherits its
/// spawning thread's mask otherwise, and a Dispatch or test-runner thread blocks most signals, so a SIGTERM a
/// script sends its own children (scripts/sandbox.sh's proxy, with-portal.sh's daemons) would never arrive.
func withCleanSignals(_ body: (inout posix_spawnattr_t) -> Int32) -> Int32 {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var empty = sigset_t()
    sigemptyset(&empty)
    var all = sigset_t()
    sigfillset(&all)
    posix_spawnattr_setsigmask(&attributes, &empty)
    posix_spawnattr_setsigdefault(&attributes, &all)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    return body(&attributes)
}

public func waitForChild(_ pid: Int32) -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
}

/// Writes to standard error (progress lines; stdout carries the report).
public func note(_ text: String) {
    var line = text + "\n"
    line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
}
