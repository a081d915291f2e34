import Glibc
import SystemLayer
import Testing

@testable import SecureVault

/// The pieces under the Secret portal's request that need no portal: the secret's read from its pipe, the
/// sandbox's `/.flatpak-info`, and the deadline timer every libsecret and GDBus call is bounded by. The request
/// itself runs for real in a sandbox: Tests/VaultCtlTests/SecretPortalTests.swift.
@Suite struct PortalPlumbingTests {
    // MARK: The secret's pipe

    /// Every length around the first read's page and the maximum comes back byte for byte, from a writer that
    /// writes it in pieces (as a backend may) and closes.
    @Test(arguments: [1, 64, 4095, 4096, 4097, 8192 + 13, SecretPortal.maximumLength])
    func aSecretOfAnyLengthUpToTheMaximumIsReadWhole(length: Int) throws {
        let secret = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 131 &+ 7) }
        let read = try readThroughPipe(secret)
        #expect(read.count == length)
        #expect(read.withUnsafeBytes { Array($0) } == secret)
    }

    @Test func aSecretLongerThanTheMaximumIsAnErrorNotATruncatedKey() {
        let secret = [UInt8](repeating: 0x5A, count: SecretPortal.maximumLength + 1)
        #expect {
            _ = try readThroughPipe(secret)
        } throws: { error in
            let failure = error as? SecretPortal.PortalFailure
            return failure?.code == .io && failure?.errno == .messageTooLong
        }
    }

    @Test func anEmptySecretIsAnError() {
        #expect {
            _ = try readThroughPipe([])
        } throws: { error in
            let failure = error as? SecretPortal.PortalFailure
            return failure?.code == .io && failure?.message.contains("empty secret") == true
        }
    }

    /// A backend that writes part of the secret and never closes the pipe: a timeout at the deadline, never a hang
    /// and never the part as the secret.
    @Test func aPipeNeverClosedIsATimeout() throws {
        let (readEnd, writeEnd) = try Sys.pipe().get()
        defer {
            Sys.close(readEnd)
            Sys.close(writeEnd)
        }
        #expect(Glibc.write(writeEnd, [1, 2, 3], 3) == 3)
        #expect {
            _ = try SecretPortal.readSecret(
                from: readEnd, appID: "org.example.Test", end: ContinuousClock.now + .milliseconds(200))
        } throws: { error in
            (error as? SecretPortal.PortalFailure)?.kind == .timeout
        }
    }

    /// Writes `secret` into a pipe from a thread of its own, in pieces of 1000 bytes, and closes it; reads it as the
    /// portal's secret is read.
    private func readThroughPipe(_ secret: [UInt8]) throws -> SecretPortal.Secret {
        let (readEnd, writeEnd) = try Sys.pipe().get()
        defer { Sys.close(readEnd) }
        let started = Sys.detachThread {
            var offset = 0
            while offset < secret.count {
                let piece = min(1000, secret.count - offset)
                let written = secret[offset..<(offset + piece)].withUnsafeBytes { Sys.write(writeEnd, $0) }
                guard case .success = written else { break }
                offset += piece
            }
            Sys.close(writeEnd)
        }
        try #require(started)
        return try SecretPortal.readSecret(from: readEnd, appID: "org.example.Test", end: .now + .seconds(60))
    }

    // MARK: /.flatpak-info

    @Test func theAppIDIsTheApplicationSectionsName() {
        let info = """
            [Application]
            name = ignored-with-spaces-before-the-equals
            name=\t org.example.Notes \t\r
            runtime=runtime/org.gnome.Platform/x86_64/46

            [Instance]
            name=org.example.Wrong
            """
        #expect(FlatpakSandbox(info: Array(info.utf8))?.appID == "org.example.Notes")
    }

    @Test func noApplicationSectionOrAnEmptyNameIsNoSandbox() {
        #expect(FlatpakSandbox(info: Array("[Instance]\nname=org.example.Wrong\n".utf8)) == nil)
        #expect(FlatpakSandbox(info: Array("[Application]\nname=  \n".utf8)) == nil)
        #expect(FlatpakSandbox(info: []) == nil)
        #expect(FlatpakSandbox(info: Array("name=org.example.BeforeAnySection\n[Application]\n".utf8)) == nil)
    }

    // MARK: The deadline timer

    @Test func aTimerCancelsItsCancellableAtItsDeadline() {
        let timer = DeadlineTimer(after: .milliseconds(20))
        defer { timer.disarm() }
        #expect(waitUntil { timer.expired })
    }

    /// A timer disarmed before its deadline never fires: a later timer's firing proves the deadline thread went past
    /// the first one's deadline (it fires its sources in the order of their deadlines). A second to disarm it in;
    /// a thread held off the processor for longer (a loaded machine) disarmed it too late to show anything.
    @Test func aDisarmedTimerNeverFires() {
        let armed = ContinuousClock.now
        let disarmed = DeadlineTimer(after: .seconds(1))
        disarmed.disarm()
        let inTime = ContinuousClock.now - armed < .seconds(1)
        let later = DeadlineTimer(after: .milliseconds(1200))
        defer { later.disarm() }
        #expect(waitUntil { later.expired })
        #expect(!inTime || !disarmed.expired)
    }

    /// Timers armed and disarmed from many threads at once, some firing as they are disarmed, some released without
    /// a disarm: every one that was left to its deadline fires, none crashes (the sources hold their cancellables),
    /// and none disarmed well before its deadline ever fires (a later timer's firing proves the deadline passed).
    @Test func timersFromManyThreadsAtOnce() async {
        let results = await withTaskGroup(of: (fired: Bool, disarmedEarly: DeadlineTimer?).self) { group in
            for index in 0..<96 {
                group.addTask {
                    switch index % 3 {
                    case 0:
                        // Disarmed as it may fire: either is right.
                        DeadlineTimer(after: .milliseconds(index % 8)).disarm()
                        return (true, nil)
                    case 1:
                        // Disarmed before its deadline (unless this task was held off the processor that long).
                        let armed = ContinuousClock.now
                        let timer = DeadlineTimer(after: .seconds(2))
                        timer.disarm()
                        return (true, ContinuousClock.now - armed < .seconds(2) ? timer : nil)
                    default:
                        let timer = DeadlineTimer(after: .milliseconds(index % 8))
                        return (waitUntil { timer.expired }, nil)
                    }
                }
            }
            return await group.reduce(into: [(fired: Bool, disarmedEarly: DeadlineTimer?)]()) { $0.append($1) }
        }
        #expect(results.allSatisfy { $0.fired })
        let fence = DeadlineTimer(after: .milliseconds(2200))
        defer { fence.disarm() }
        #expect(waitUntil { fence.expired })
        let disarmed = results.compactMap(\.disarmedEarly)
        #expect(!disarmed.isEmpty && disarmed.count <= 32)
        #expect(disarmed.allSatisfy { !$0.expired })
    }

    // MARK: The session bus's address

    /// The Unix sockets a session bus address names, as the portal's connection tries them: `unix:path=` and
    /// `unix:abstract=` entries in order, `%XX` escapes decoded, other transports and malformed entries skipped;
    /// without an address, `$XDG_RUNTIME_DIR/bus`.
    @Test func theSessionBusAddressNamesItsUnixSockets() {
        typealias Socket = SecretPortal.Bus.UnixSocket
        func sockets(_ address: String?, _ runtime: String? = "/run/user/1000") -> [Socket] {
            SecretPortal.Bus.unixSockets(address: address, runtimeDirectory: runtime)
        }
        #expect(sockets("unix:path=/run/flatpak/bus") == [Socket(path: "/run/flatpak/bus", abstract: false)])
        #expect(
            sockets("unix:abstract=/tmp/dbus-AbC,guid=0123456789abcdef")
                == [Socket(path: "/tmp/dbus-AbC", abstract: true)])
        #expect(
            sockets("tcp:host=localhost,port=4;unix:guid=00,path=/x%20y%2cz;autolaunch:;unix:path=/second")
                == [Socket(path: "/x y,z", abstract: false), Socket(path: "/second", abstract: false)])
        // A malformed escape, a NUL, an empty path, a key without a value, bytes that are not UTF-8, a path longer
        // than a socket address holds: that entry is skipped, not cut short or changed.
        let long = String(repeating: "d", count: 107)
        #expect(
            sockets("unix:path=/bad%2;unix:path=/nul%00;unix:path=;unix:path;unix:path=/%ff;unix:path=/\(long)"
                + ";unix:path=/good")
                == [Socket(path: "/good", abstract: false)])
        #expect(sockets("unix:path=\(long)") == [Socket(path: long, abstract: false)])
        #expect(sockets("tcp:host=localhost,port=4").isEmpty)
        #expect(sockets(nil) == [Socket(path: "/run/user/1000/bus", abstract: false)])
        #expect(sockets("") == [Socket(path: "/run/user/1000/bus", abstract: false)])
        #expect(sockets(nil, nil).isEmpty)
    }
}

/// Polls `condition` every millisecond for at most a minute (an event's bound, not a timing: it returns as soon as
/// the condition holds).
private func waitUntil(_ condition: () -> Bool) -> Bool {
    for _ in 0..<60_000 {
        if condition() { return true }
        usleep(1000)
    }
    return condition()
}
