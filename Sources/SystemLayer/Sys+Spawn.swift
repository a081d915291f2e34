// Running a short-lived helper program (systemd-creds) with a deadline: the library never waits on a child
// longer than its caller allows.
import CPrefsKV
import Glibc

extension Sys {
    /// What a finished child left.
    package struct ChildOutcome {
        /// The exit status, or 128 + the signal number when a signal ended it (as a shell reports it).
        package var status: Int32
        /// Its standard output (at most the limit asked for). May hold a secret: the caller wipes it.
        package var output: [UInt8]
        /// Its standard error, at most 4 KiB.
        package var errorOutput: [UInt8]
    }

    /// Why a child could not be run to its end.
    package enum ChildFailure: Error, Equatable {
        /// No executable at any of the paths given.
        case notInstalled
        /// It could not be started (a pipe, or `posix_spawn` itself).
        case notStarted(Errno)
        /// It did not finish within the deadline, and was killed.
        case timedOut
        /// It wrote more than the limit to its standard output, and was killed.
        case outputTooLarge
        /// Its exit status could not be learnt (SIGCHLD ignored, or another thread reaped it).
        case statusUnknown
    }

    /// Runs the first of `executables` that exists with `arguments`, feeds it `input` on its standard input
    /// (then closes it), and collects its output, killing it (SIGKILL) at `deadline`.
    ///
    /// Nothing passes through argv or the environment but `arguments`: a secret goes in `input` (at most 4 KiB,
    /// sent over a socket so that a child that exits early cannot raise SIGPIPE here). The child starts with an
    /// empty signal mask and default signal dispositions (the caller's threads may block signals), an environment
    /// of `PATH` alone (``childEnvironment``: none of the host app's variables, and the C locale, so its messages are
    /// the ones the caller recognises), and descriptors 0, 1 and 2 only (``spawn(_:_:environment:input:output:errorOutput:)``
    /// closes the others, including those the host app opened without O_CLOEXEC).
    // See: man 3 posix_spawn, man 2 poll, man 2 waitpid
    package static func runChild(
        _ executables: [String], _ arguments: [String], input: UnsafeRawBufferPointer, outputLimit: Int,
        deadline: Duration
    ) -> Result<ChildOutcome, ChildFailure> {
        precondition(input.count <= 4096, "a child's input is sent before its output is read: at most 4 KiB")
        guard let executable = executables.first(where: { access($0, X_OK) == 0 }) else {
            return .failure(.notInstalled)
        }
        var inputPair: [Int32] = [-1, -1]
        var outputPipe: [Int32] = [-1, -1]
        var errorPipe: [Int32] = [-1, -1]
        func closeAll() {
            for fd in inputPair + outputPipe + errorPipe where fd >= 0 { close(fd) }
        }
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0, &inputPair) == 0
        else { return .failure(.notStarted(.current)) }
        guard prefs_pipe_cloexec(&outputPipe) == 0, prefs_pipe_cloexec(&errorPipe) == 0 else {
            let error = Errno.current
            closeAll()
            return .failure(.notStarted(error))
        }

        let spawned = spawn(
            executable, arguments, environment: childEnvironment, input: inputPair[1], output: outputPipe[1],
            errorOutput: errorPipe[1])
        close(inputPair[1])
        close(outputPipe[1])
        close(errorPipe[1])
        inputPair[1] = -1
        outputPipe[1] = -1
        errorPipe[1] = -1
        guard case .success(let pid) = spawned else {
            closeAll()
            if case .failure(let error) = spawned { return .failure(.notStarted(error)) }
            return .failure(.notInstalled)
        }

        var sent = 0
        while sent < input.count {
            let n = send(inputPair[0], input.baseAddress! + sent, input.count - sent, Int32(MSG_NOSIGNAL))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }  // the child closed its input: its exit status says why
            sent += n
        }
        close(inputPair[0])
        inputPair[0] = -1

        let until = ContinuousClock.now + deadline
        let collected = collect(output: outputPipe[0], errorOutput: errorPipe[0], outputLimit: outputLimit, until: until)
        closeAll()
        switch collected {
        case .failure(let reason):
            stop(pid)
            return .failure(reason)
        case .success(let streams):
            // Its output closed; it should be exiting. Waited for within the same deadline all the same.
            switch reap(pid, until: until) {
            case .success(let status?):
                return .success(ChildOutcome(status: status, output: streams.output, errorOutput: streams.errorOutput))
            case .success(nil):
                stop(pid)
                return .failure(.timedOut)
            case .failure(let failure):
                return .failure(failure)
            }
        }
    }

    /// The environment of a helper program run by ``runChild(_:_:input:outputLimit:deadline:)``: `systemd-creds`
    /// needs no variable (its `SYSTEMD_*` debugging variables are exactly what a host app's environment must not
    /// change), and a search path is all a program run by absolute path may use.
    package static let childEnvironment = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]

    /// The exit status of `pid` once it has ended (128 + the signal for a signal), nil when it has not by
    /// `until`. ECHILD (another thread reaped it, or SIGCHLD is ignored) is `statusUnknown`.
    private static func reap(_ pid: Int32, until: ContinuousClock.Instant) -> Result<Int32?, ChildFailure> {
        var rawStatus: Int32 = 0
        while true {
            let reaped = waitpid(pid, &rawStatus, WNOHANG)
            if reaped == pid {
                return .success((rawStatus & 0x7f) == 0 ? (rawStatus >> 8) & 0xff : 128 + (rawStatus & 0x7f))
            }
            if reaped < 0 && errno != EINTR { return .failure(.statusUnknown) }
            if ContinuousClock.now >= until { return .success(nil) }
            usleep(500)
        }
    }

    /// SIGKILLs `pid` and reaps it; a child that does not die within a second (stuck in an uninterruptible
    /// sleep: a device that does not answer) is left to a detached thread to reap, so the caller never waits.
    private static func stop(_ pid: Int32) {
        kill(pid, SIGKILL)
        if case .success(nil) = reap(pid, until: ContinuousClock.now + .seconds(1)) {
            _ = detachThread {
                var status: Int32 = 0
                while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            }
        }
    }

    /// Starts `executable` with `arguments` (argv[0] is `executable`), its standard input, output and error the
    /// descriptors given (each dup'ed onto 0, 1 and 2; every other descriptor is closed in the child, whoever
    /// opened it and however), an empty
    /// signal mask and default dispositions (the caller's threads may block signals, and a child that inherited
    /// that could not be stopped by SIGTERM), and `environment` (`NAME=value` entries; nil: this process's).
    // See: man 3 posix_spawn
    package static func spawn(
        _ executable: String, _ arguments: [String], environment: [String]?, input: Int32, output: Int32,
        errorOutput: Int32
    ) -> Result<Int32, Errno> {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, input, 0)
        posix_spawn_file_actions_adddup2(&actions, output, 1)
        posix_spawn_file_actions_adddup2(&actions, errorOutput, 2)
        // See: man 2 close_range (glibc's posix_spawn_file_actions_addclosefrom_np, 2.34 and later)
        let closing = prefs_spawn_close_from(&actions, 3)
        guard closing == 0 else { return .failure(Errno(rawValue: closing)) }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var emptyMask = sigset_t()
        sigemptyset(&emptyMask)
        var allSignals = sigset_t()
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &emptyMask)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv = ([executable] + arguments).map { strdup($0) } + [nil]
        defer { argv.forEach { free($0) } }
        var pid: pid_t = 0
        let status: Int32
        if let environment {
            let envp = environment.map { strdup($0) } + [nil]
            defer { envp.forEach { free($0) } }
            status = posix_spawn(&pid, executable, &actions, &attributes, argv, envp)
        } else {
            status = posix_spawn(&pid, executable, &actions, &attributes, argv, environ)
        }
        return status == 0 ? .success(pid) : .failure(Errno(rawValue: status))
    }

    /// Reads both pipes to their end (closing each), or fails at `until` or when the output passes its limit.
    private static func collect(
        output: Int32, errorOutput: Int32, outputLimit: Int, until: ContinuousClock.Instant
    ) -> Result<(output: [UInt8], errorOutput: [UInt8]), ChildFailure> {
        var buffers: [[UInt8]] = [[], []]
        buffers[0].reserveCapacity(outputLimit)  // never reallocated: no copy of a secret is left behind
        let limits = [outputLimit, 4096]
        var fds = [
            pollfd(fd: output, events: Int16(POLLIN), revents: 0),
            pollfd(fd: errorOutput, events: Int16(POLLIN), revents: 0),
        ]
        var chunk = [UInt8](repeating: 0, count: 4096)
        defer { chunk.withUnsafeMutableBytes { zero($0) } }
        var open = 2
        while open > 0 {
            let left = until - ContinuousClock.now
            guard left > .zero else {
                buffers[0].withUnsafeMutableBytes { zero($0) }
                return .failure(.timedOut)
            }
            let milliseconds = Int32(clamping: left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000 + 1)
            let ready = poll(&fds, 2, milliseconds)
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }  // the deadline is checked above
            for index in 0..<2 where fds[index].fd >= 0 && fds[index].revents != 0 {
                let n = chunk.withUnsafeMutableBytes { Glibc.read(fds[index].fd, $0.baseAddress!, $0.count) }
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else {
                    fds[index].fd = -1  // closed by the caller
                    open -= 1
                    continue
                }
                guard buffers[index].count + n <= limits[index] else {
                    if index == 1 { continue }  // standard error is only for messages: the rest is dropped
                    buffers[0].withUnsafeMutableBytes { zero($0) }
                    return .failure(.outputTooLarge)
                }
                buffers[index].append(contentsOf: chunk[0..<n])
            }
        }
        return .success((buffers[0], buffers[1]))
    }
}
