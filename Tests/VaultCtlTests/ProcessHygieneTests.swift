import Foundation
import Glibc
import TestSupport
import Testing

/// vaultctl while a secret may be in memory: paused at the hidden prompt of `vault set` on a pseudo-terminal,
/// it has core dumps off (RLIMIT_CORE 0) and is not dumpable, and a signal that ends it there gives the
/// terminal its echo back before the process ends with that signal.
@Suite struct ProcessHygieneTests {
    /// Python drives the pseudo-terminal: it starts vaultctl on the slave side (as user 65534 through
    /// setpriv when the tests run as root, so that /proc tells a dumpable process from one that is not), waits
    /// until echo is off, reads /proc/<pid>/limits and whether the process is dumpable, sends the signal, and
    /// reads the echo flag again once vaultctl has ended. One `name value` line per finding.
    static let harness = #"""
        import os, pty, signal, subprocess, sys, termios, time
        vaultctl, directory, signame = sys.argv[1:4]
        master, slave = pty.openpty()
        ECHO = termios.ECHO
        print("echo-before", "on" if termios.tcgetattr(slave)[3] & ECHO else "off")
        command = [vaultctl, "--dir", directory, "vault", "set", "--service", "app", "token"]
        root = os.geteuid() == 0
        if root:
            command = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + command
        child = subprocess.Popen(command, stdin=slave, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 start_new_session=True)
        deadline = time.time() + 120  # a guard against a hang only
        while termios.tcgetattr(slave)[3] & ECHO:
            if time.time() > deadline or child.poll() is not None:
                print("prompt never-quiet", child.poll()); sys.exit(1)
            time.sleep(0.01)
        print("echo-at-prompt off")
        limits = open("/proc/%d/limits" % child.pid).read().splitlines()
        core = [line for line in limits if line.startswith("Max core file size")][0].split()
        print("core-limit", core[4], core[5])
        if root:
            # /proc/<pid> of a process that is not dumpable belongs to root, not to the process's user.
            print("dumpable", "no" if os.stat("/proc/%d/status" % child.pid).st_uid == 0 else "yes")
        else:
            try:
                open("/proc/%d/environ" % child.pid).read(); print("dumpable yes")
            except PermissionError:
                print("dumpable no")
        os.kill(child.pid, getattr(signal, signame))
        out, err = child.communicate(timeout=120)
        print("ended-by", -child.returncode if child.returncode < 0 else "exit-%d" % child.returncode)
        print("echo-after", "on" if termios.tcgetattr(slave)[3] & ECHO else "off")
        print("stdout", repr(out.decode()))
        print("stderr", repr(err.decode()))
        """#

    @Test(arguments: ["SIGINT", "SIGTERM"])
    func aSignalAtTheHiddenPromptRestoresEchoAndTheProcessIsNeverDumpable(_ signal: String) throws {
        let sandbox = try PrefsSandbox()
        let result = try ChildProcess.run(
            "/usr/bin/env", ["python3", "-c", Self.harness, PrefsSandbox.vaultctl, sandbox.path("vault"), signal])
        let findings = Dictionary(
            result.lines.map { line in
                let parts = line.split(separator: " ", maxSplits: 1)
                return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
            }, uniquingKeysWith: { first, _ in first })
        #expect(result.status == 0, "\(result)")
        #expect(findings["echo-before"] == "on", "\(result)")
        #expect(findings["echo-at-prompt"] == "off", "\(result)")
        #expect(findings["core-limit"] == "0 0", "\(result)")
        #expect(findings["dumpable"] == "no", "\(result)")
        let number = signal == "SIGINT" ? SIGINT : SIGTERM
        #expect(findings["ended-by"] == "\(number)", "ended by the signal's default action: \(result)")
        #expect(findings["echo-after"] == "on", "the terminal was left without echo: \(result)")
        #expect(findings["stdout"] == "''", "\(result)")
        // Nothing was stored: the vault has no file.
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("vault/app.prefs")))
    }

    /// A crash report never shows memory: the Swift runtime's backtracer (which prints every register and the
    /// bytes each one points at) is removed from vaultctl, so a crash at the prompt (here a SIGSEGV sent to it)
    /// ends the process with the signal and prints nothing but the prompt's own line.
    @Test func aCrashAtThePromptPrintsNoBacktraceRegistersOrMemory() throws {
        let sandbox = try PrefsSandbox()
        let result = try ChildProcess.run(
            "/usr/bin/env", ["python3", "-c", Self.harness, PrefsSandbox.vaultctl, sandbox.path("vault"), "SIGSEGV"])
        let stderr = result.lines.first { $0.hasPrefix("stderr ") } ?? ""
        #expect(result.lines.contains("ended-by \(SIGSEGV)"), "\(result)")
        #expect(
            stderr == #"stderr 'vaultctl: type the value of "token" (not echoed), then press Enter and Ctrl-D\n'"#,
            "\(result)")
        for word in ["Backtracing", "crashed", "Registers", "rip", "Images"] {
            #expect(!result.standardOutput.contains(word), "\(result)")
        }
    }
}
