// The clock, the process and its environment, and the byte helpers of the hot paths.
//
// What a warm get or set calls (the clock, byte equality, the thread id, zeroing, the key index's allocation)
// is `@inlinable public`, so that it compiles into its caller as it did when these lived in PrefsKV. Public,
// not package: Swift 6.3 does not inline an `@inlinable package` function into another module (checked on
// a two-module package: the call stays). SystemLayer is no product, so nothing outside this package can
// import it.
public import CPrefsKV
public import Glibc

extension Sys {
    // See: man 2 clock_gettime. CLOCK_REALTIME in milliseconds since the Unix epoch (a vDSO call).
    @inlinable @inline(__always)
    public static func nowMilliseconds() -> Int64 {
        var ts = timespec()
        _ = clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1000 + Int64(ts.tv_nsec) / 1_000_000
    }

    /// A moment broken down in UTC: calendar fields as `gmtime_r` gives them, the year in full and the month
    /// from 1.
    package struct UTCTime: Equatable, Sendable {
        package var year: Int32
        package var month: Int32
        package var day: Int32
        package var hour: Int32
        package var minute: Int32
        package var second: Int32

        /// The fields as `<year>-<month>-<day>T<hour>:<minute>:<second>Z` with every field but the year in two
        /// digits and the given separators in place of `-` and `:`.
        ///
        /// ```swift
        /// time.formatted()                                          // "20261124T101500Z" (file names)
        /// time.formatted(dateSeparator: "-", timeSeparator: ":")    // "2026-11-24T10:15:00Z"
        /// ```
        package func formatted(dateSeparator: String = "", timeSeparator: String = "") -> String {
            func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
            return "\(year)\(dateSeparator)\(two(month))\(dateSeparator)\(two(day))T"
                + "\(two(hour))\(timeSeparator)\(two(minute))\(timeSeparator)\(two(second))Z"
        }
    }

    /// `seconds` since the Unix epoch broken down in UTC; nil when out of the C library's range.
    // See: man 3 gmtime_r
    package static func utcTime(secondsSinceEpoch seconds: Int64) -> UTCTime? {
        var time = time_t(seconds)
        var parts = tm()
        guard gmtime_r(&time, &parts) != nil else { return nil }
        return UTCTime(
            year: parts.tm_year + 1900, month: parts.tm_mon + 1, day: parts.tm_mday, hour: parts.tm_hour,
            minute: parts.tm_min, second: parts.tm_sec)
    }

    /// The current UTC time as `yyyyMMdd'T'HHmmss'Z'`, for quarantine file names.
    package static func utcTimestamp() -> String {
        let now = Int64(time(nil))
        // The present is within gmtime_r's range; the seconds stand in should it ever not be.
        return utcTime(secondsSinceEpoch: now)?.formatted() ?? "\(now)"
    }

    /// Overwrites `buffer` with zeros in a way the optimiser may not remove (plaintext of sealed values).
    // See: man 3 explicit_bzero
    @inlinable
    public static func zero(_ buffer: UnsafeMutableRawBufferPointer) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        explicit_bzero(base, buffer.count)
    }

    /// Whether `a` and `b` hold the same bytes, compared in a time that depends on their length only
    /// (`prefs_equal_constant_time`): for authenticators and key checks, where `==` would stop at the first
    /// differing byte and tell how much of a forgery was right.
    ///
    /// ```swift
    /// guard Sys.constantTimeEqual(expected, stored) else { return false }
    /// ```
    public static func constantTimeEqual(_ a: UnsafeRawBufferPointer, _ b: UnsafeRawBufferPointer) -> Bool {
        guard a.count == b.count else { return false }
        guard let x = a.baseAddress, let y = b.baseAddress else { return true }
        return prefs_equal_constant_time(x, y, a.count) == 1
    }

    /// Byte equality of two ranges (`memcmp`).
    @inlinable @inline(__always)
    public static func bytesEqual(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Bool {
        count == 0 || memcmp(a, b, count) == 0
    }

    /// The order of two ranges of `count` bytes, as `memcmp` gives it: negative, zero or positive.
    @inlinable @inline(__always)
    public static func compareBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, count: Int) -> Int32 {
        count == 0 ? 0 : memcmp(a, b, count)
    }

    /// `count` zeroed elements from `calloc` (a large block comes straight from the kernel, already zero, so its
    /// pages cost nothing until written); nil when memory is exhausted. Release with ``free(_:)``.
    // See: man 3 calloc
    @inlinable
    public static func allocateZeroed<T>(_ count: Int, of type: T.Type) -> UnsafeMutablePointer<T>? {
        calloc(count, MemoryLayout<T>.stride)?.bindMemory(to: T.self, capacity: count)
    }

    /// Releases a block from ``allocateZeroed(_:of:)``.
    // See: man 3 free
    @inlinable
    public static func free<T>(_ pointer: UnsafeMutablePointer<T>?) {
        Glibc.free(pointer)
    }

    /// An id of the calling thread (`pthread_self`), to catch a store written from inside its own transaction.
    @inlinable @inline(__always)
    public static func threadID() -> UInt { UInt(pthread_self()) }

    /// Lets another thread run (`sched_yield`), in a wait for a thread just started.
    // See: man 2 sched_yield
    package static func yieldThread() { _ = sched_yield() }

    /// Sleeps for `milliseconds` (a signal may end it early): the pace of vaultctl's progress lines.
    // See: man 2 nanosleep
    package static func sleep(milliseconds: Int) {
        var request = timespec(tv_sec: milliseconds / 1000, tv_nsec: (milliseconds % 1000) * 1_000_000)
        _ = nanosleep(&request, nil)
    }

    /// Whether `descriptor` is a terminal (vaultctl's progress lines go only to one).
    // See: man 3 isatty
    package static func isTerminal(_ descriptor: Int32) -> Bool { isatty(descriptor) != 0 }

    /// `getpid()`, for unique temporary names.
    package static func processID() -> Int32 { getpid() }

    /// The calling process's effective user id.
    package static func effectiveUserID() -> UInt32 { geteuid() }

    /// The calling process's real user id: the user a file must belong to (a vault's directory and file).
    package static var userID: UInt32 { getuid() }

    /// Runs `body` when the process exits normally (`exit`, or returning from `main`).
    // See: man 3 atexit
    package static func atExit(_ body: @convention(c) () -> Void) {
        _ = Glibc.atexit(body)
    }

    /// The value of an environment variable, or nil when unset or (unless `keepingEmpty`) empty.
    ///
    /// `keepingEmpty` is for a report of the environment as it is (`vaultctl doctor` shows a set but empty
    /// `DBUS_SESSION_BUS_ADDRESS` as such).
    // See: man 3 getenv
    package static func environment(_ name: String, keepingEmpty: Bool = false) -> String? {
        guard let p = getenv(name), keepingEmpty || p.pointee != 0 else { return nil }
        return String(cString: p)
    }

    /// The home directory of the effective user from the password database, when it has one.
    package static func passwordHomeDirectory() -> String? {
        guard let entry = getpwuid(geteuid()), let dir = entry.pointee.pw_dir else { return nil }
        return String(cString: dir)
    }

    /// Turns core dumps off for this process, for a process that holds secrets: RLIMIT_CORE 0 (no core file)
    /// and not dumpable (`PR_SET_DUMPABLE` 0: no core file whatever the limit or `core_pattern` pipe says, and
    /// no other process of the same user may attach to it or read its memory through `/proc/<pid>/mem`).
    // See: man 2 setrlimit, man 2 prctl (PR_SET_DUMPABLE)
    package static func disableCoreDumps() {
        var limit = rlimit(rlim_cur: 0, rlim_max: 0)
        _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit)
        _ = prefs_set_not_dumpable()
    }

    /// The signals a crash ends a process with, on which the Swift runtime's backtracer is installed.
    package static let crashSignals: [Int32] = [SIGQUIT, SIGABRT, SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP]

    /// Gives the crash signals back their default action, which removes the Swift runtime's backtracer from
    /// this process: on a crash it prints every register and the 16 bytes each one points at, which in a
    /// process holding secrets may be secret bytes. A crash then ends the process at once (exit status 128 +
    /// the signal), after the runtime's one-line "Fatal error" message when there is one; with
    /// ``disableCoreDumps()`` no core file is written either.
    // See: man 2 sigaction
    package static func disableCrashBacktraces() {
        for signal in crashSignals {
            var action = sigaction()
            action.__sigaction_handler.sa_handler = SIG_DFL
            sigemptyset(&action.sa_mask)
            _ = sigaction(signal, &action, nil)
        }
    }

    /// Ends the process with `status`, flushing C streams (`exit(3)`).
    // See: man 3 exit
    package static func exit(_ status: Int32) -> Never {
        Glibc.exit(status)
    }

    /// The system page size.
    package static let pageSize: Int = Int(sysconf(Int32(_SC_PAGESIZE)))
}
