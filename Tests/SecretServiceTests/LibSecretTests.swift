import Foundation
import Testing
import TestSupport

@testable import SecureVault

/// The libsecret wrapper against the real gnome-keyring of the private session `make test` starts.
@Suite struct LibSecretRoundTripTests {
    let schema = LibSecret.Schema.vaultMasterKey

    func attributes() -> [String: String] {
        ["vault": KeyringSession.randomID(), "key": KeyringSession.randomID(), "format": "1"]
    }

    @Test func storedSecretIsReadBackAndClearedForGood() throws {
        try KeyringSession.require()
        let attributes = attributes()
        let secret = SecretBytes.random(count: 32)
        try LibSecret.store(schema: schema, attributes: attributes, label: "test", secret: secret, deadline: KeyringSession.deadline)

        let found = try #require(try LibSecret.lookup(schema: schema, attributes: attributes, deadline: KeyringSession.deadline).secret)
        #expect(found.bytes == secret)

        let cleared = try LibSecret.clear(schema: schema, attributes: attributes, deadline: KeyringSession.deadline)
        #expect(cleared.deleted == 1 && cleared.unfinished == nil, "\(cleared)")
        #expect(cleared.provider?.kind == .gnomeKeyring, "\(cleared)")
        #expect(try LibSecret.lookup(schema: schema, attributes: attributes, deadline: KeyringSession.deadline) == .absent)
        #expect(try LibSecret.clear(schema: schema, attributes: attributes, deadline: KeyringSession.deadline).deleted == 0)
    }

    @Test func binarySecretWithEveryByteValueRoundTripsExactly() throws {
        try KeyringSession.require()
        let attributes = attributes()
        // NUL first and inside, 0xFF, and every other byte value: nothing may be truncated or re-encoded.
        let bytes: [UInt8] = [0x00, 0xFF, 0x00, 0x00] + (0...255).map { UInt8($0) } + [0xFF, 0x00]
        try LibSecret.store(
            schema: schema, attributes: attributes, label: "test", secret: SecretBytes(bytes), deadline: KeyringSession.deadline)
        defer { _ = try? LibSecret.clear(schema: schema, attributes: attributes, deadline: KeyringSession.deadline) }

        let found = try #require(try LibSecret.lookup(schema: schema, attributes: attributes, deadline: KeyringSession.deadline).secret)
        #expect(found.bytes.withUnsafeBytes { Array($0) } == bytes)
    }

    @Test func textSecretRoundTrips() throws {
        try KeyringSession.require()
        let attributes = attributes()
        try LibSecret.store(
            schema: schema, attributes: attributes, label: "test", secret: SecretBytes(utf8: "pässwörd ✓"),
            contentType: LibSecret.textContentType, deadline: KeyringSession.deadline)
        defer { _ = try? LibSecret.clear(schema: schema, attributes: attributes, deadline: KeyringSession.deadline) }
        let found = try #require(try LibSecret.lookup(schema: schema, attributes: attributes, deadline: KeyringSession.deadline).secret)
        #expect(found.bytes.withUnsafeBytes { String(decoding: $0, as: UTF8.self) } == "pässwörd ✓")
    }

    @Test func storingAgainReplacesTheSecret() throws {
        try KeyringSession.require()
        let attributes = attributes()
        defer { _ = try? LibSecret.clear(schema: schema, attributes: attributes, deadline: KeyringSession.deadline) }
        try LibSecret.store(schema: schema, attributes: attributes, label: "a", secret: SecretBytes([1]), deadline: KeyringSession.deadline)
        try LibSecret.store(schema: schema, attributes: attributes, label: "b", secret: SecretBytes([2]), deadline: KeyringSession.deadline)
        let found = try #require(try LibSecret.lookup(schema: schema, attributes: attributes, deadline: KeyringSession.deadline).secret)
        #expect(found.bytes == SecretBytes([2]))
    }

    @Test func unknownItemIsAbsentWhenTheKeyringIsUnlocked() throws {
        try KeyringSession.require()
        #expect(try LibSecret.lookup(schema: schema, attributes: attributes(), deadline: KeyringSession.deadline) == .absent)
        #expect(try LibSecret.collectionState(deadline: KeyringSession.deadline) == .unlocked)
    }

    @Test func probeSeesTheDefaultCollection() throws {
        try KeyringSession.require()
        let probe = try LibSecret.probe(deadline: KeyringSession.deadline)
        #expect(probe.defaultCollectionPath == "/org/freedesktop/secrets/collection/login")
        #expect(probe.collections.contains { $0.path == "/org/freedesktop/secrets/collection/login" && !$0.locked })
        #expect(probe.busAddress != nil)
    }
}

/// Keyring states produced for real in throwaway sessions: a D-Bus `Lock`, no service, no bus, a stopped and a
/// killed daemon. Each command is a fresh helper process, as an app launch would be.
@Suite struct LibSecretFaultTests {
    @Test func lockedCollectionIsReportedAsLockedNeverAsAbsent() throws {
        let id = KeyringSession.randomID()
        let result = try KeyringSession.scenario(
            script: """
            echo 00ff0041 | $H secret-store \(id) k
            LOCK
            $H secret-state
            $H secret-lookup \(id) k          # the item exists but is locked
            $H secret-lookup \(id) other      # an item that does not exist: "absent" cannot be known
            echo 01 | $H secret-store \(id) k2
            $H secret-clear \(id) k
            UNLOCK
            $H secret-lookup \(id) k          # nothing was lost while locked
            $H secret-lookup \(id) k2         # the refused store wrote nothing
            """)
        let outcomes = result.outcomes
        try #require(outcomes.count == 8, "\(result)")
        #expect(outcomes[0] == "stored")
        #expect(outcomes[1] == "locked")
        for index in 2...5 {
            // Classified without a prompt: an answer ("locked"), not the deadline running out ("timeout"), which
            // a prompt nobody answers would come to.
            #expect(outcomes[index].hasPrefix("failure locked "), "command \(index): \(outcomes[index])")
            #expect(Self.elapsedMilliseconds(outcomes[index]) < KeyringSession.defaultDeadlineMilliseconds)
        }
        #expect(outcomes[6] == "found 00ff0041", "\(result)")
        #expect(outcomes[7] == "absent")
    }

    @Test func aSecondMatchingItemOrTheOnlyOneInAnotherCollectionIsNeverFound() throws {
        // Another app of the user can store items with our attributes anywhere; a lookup must not pick one.
        let id = KeyringSession.randomID()
        let result = try KeyringSession.scenario(
            script: """
            echo 00ff0041 | $H secret-store \(id) k
            echo 01 | $H secret-store \(id) k --collection session
            $H secret-lookup \(id) k          # two candidates
            $H secret-clear \(id) k           # clearing removes the default collection's only
            $H secret-lookup \(id) k          # the other one is not ours to delete, and never found
            echo 00ff0041 | $H secret-store \(id) k --collection session
            $H secret-lookup \(id) k          # the only one, outside the default collection
            """)
        let outcomes = result.outcomes
        try #require(outcomes.count == 7, "\(result)")
        #expect(outcomes[2] == "several 2", "\(result)")
        #expect(outcomes[3] == "cleared", "\(result)")
        #expect(outcomes[4].hasPrefix("elsewhere /org/freedesktop/secrets/collection/session/"), "\(result)")
        #expect(outcomes[6].hasPrefix("elsewhere /org/freedesktop/secrets/collection/session/"), "\(result)")
    }

    @Test func busWithoutSecretServiceIsNoSecretService() throws {
        let result = try KeyringSession.scenario(
            .noSecretService,
            script: """
            $H secret-lookup v k
            echo 00 | $H secret-store v k
            $H secret-state
            """)
        #expect(result.outcomes.count == 3, "\(result)")
        for outcome in result.outcomes {
            #expect(outcome.hasPrefix("failure noSecretService g-dbus-error-quark 2 "), "\(result)")
        }
    }

    @Test func serviceWithoutDefaultCollectionIsNoDefaultCollection() throws {
        let result = try KeyringSession.scenario(
            .noKeyring,
            script: """
            $H secret-state
            $H secret-lookup v k
            echo 00 | $H secret-store v k
            """)
        #expect(result.outcomes.first == "missing", "\(result)")
        #expect(result.outcomes.dropFirst().allSatisfy { $0.hasPrefix("failure noDefaultCollection ") }, "\(result)")
        #expect(result.outcomes.count == 3)
    }

    @Test(arguments: [
        ("unset", [String: String?]()),
        ("dead socket", ["DBUS_SESSION_BUS_ADDRESS": "unix:path=/nonexistent/bus"]),
    ])
    func noSessionBusIsNoSessionBus(name: String, environment: [String: String?]) throws {
        var env: [String: String?] = [
            "DBUS_SESSION_BUS_ADDRESS": nil, "DISPLAY": nil, "XDG_RUNTIME_DIR": "/nonexistent",
        ]
        env.merge(environment) { $1 }
        let result = try ChildProcess.run(KeyringSession.helper, ["secret-lookup", "v", "k"], environment: env)
        #expect(result.status == 1)
        #expect(result.outcomes.first?.hasPrefix("failure noSessionBus g-io-error-quark ") == true, "\(result)")
    }

    @Test func stoppedDaemonTimesOutAtTheDeadline() throws {
        let id = KeyringSession.randomID()
        let result = try KeyringSession.scenario(
            script: """
            echo 42 | $H secret-store \(id) k
            PID=$(DAEMON_PID)
            kill -STOP "$PID"
            VAULT_TEST_DEADLINE_MS=700 $H secret-lookup \(id) k
            echo 43 | VAULT_TEST_DEADLINE_MS=700 $H secret-store \(id) k
            VAULT_TEST_DEADLINE_MS=700 $H secret-state
            kill -CONT "$PID"
            $H secret-lookup \(id) k
            """)
        let outcomes = result.outcomes
        try #require(outcomes.count == 5, "\(result)")
        for outcome in outcomes[1...3] {
            #expect(outcome.hasPrefix("failure timeout "), "\(result)")
            let elapsed = Self.elapsedMilliseconds(outcome)
            // Ended by the 700 ms deadline, never before it, and not by D-Bus's own 25 s timeout: the upper
            // bound is half of that, far above what a loaded machine adds to the deadline.
            #expect(elapsed >= 650 && elapsed < 12_500, "\(outcome)")
        }
        #expect(outcomes[4] == "found 42", "\(result)")
    }

    /// A process's first lookup opens its transfer session (`OpenSession`, a Diffie-Hellman exchange) while it reads
    /// the collection's lock state, not after its search: with the daemon stopped once the process has connected,
    /// both calls are on the bus while neither can be answered (before the session was opened on a helper thread,
    /// `OpenSession` came only after the search had been answered, so it never showed up here). Told by the calls
    /// the bus carried, not by time: each wait is for an event, bounded only so that a failure ends. Then the daemon
    /// runs again and the lookup finds the secret.
    @Test func aLookupOpensItsSessionWhileItReadsTheLockState() throws {
        let id = KeyringSession.randomID()
        let result = try KeyringSession.scenario(
            script: """
            echo 42 | $H secret-store \(id) k
            VAULT_TEST_DEADLINE_MS=60000 $H secret-lookup \(id) k --after "$HOME/go" >"$HOME/lookup.txt" &
            LOOKUP=$!
            for _ in $(seq 1 1200); do [ -e "$HOME/go.ready" ] && break; sleep 0.05; done
            dbus-monitor --session "type='method_call',interface='org.freedesktop.Secret.Service'" \
              "type='method_call',interface='org.freedesktop.DBus.Properties'" >"$HOME/calls.txt" 2>/dev/null &
            MONITOR=$!
            for _ in $(seq 1 1200); do [ -s "$HOME/calls.txt" ] && break; sleep 0.05; done
            PID=$(DAEMON_PID)
            kill -STOP "$PID"
            touch "$HOME/go"
            for _ in $(seq 1 1200); do
              grep -q 'member=ReadAlias$' "$HOME/calls.txt" && grep -q 'member=OpenSession$' "$HOME/calls.txt" && break
              sleep 0.05
            done
            grep -c 'member=ReadAlias$' "$HOME/calls.txt"
            grep -c 'member=OpenSession$' "$HOME/calls.txt"
            grep -c 'member=SearchItems$' "$HOME/calls.txt"
            kill -CONT "$PID"
            wait "$LOOKUP"
            cat "$HOME/lookup.txt"
            kill "$MONITOR"
            """)
        let outcomes = result.outcomes
        try #require(outcomes.count == 5, "\(result)")
        #expect(outcomes[1] == "1", "the lock-state read was sent: \(result)")
        #expect(outcomes[2] == "1", "the session is opened while the lock state is unanswered: \(result)")
        #expect(outcomes[3] == "0", "nothing is searched before the lock state is known: \(result)")
        #expect(outcomes[4] == "found 42", "\(result)")
    }

    @Test func killedDaemonComesBackLockedAndIsReportedAsLocked() throws {
        let id = KeyringSession.randomID()
        let result = try KeyringSession.scenario(
            script: """
            echo 42 | $H secret-store \(id) k
            kill -9 "$(DAEMON_PID)"
            $H secret-lookup \(id) k
            UNLOCK
            $H secret-lookup \(id) k
            """)
        let outcomes = result.outcomes
        try #require(outcomes.count == 3, "\(result)")
        // D-Bus activates a fresh daemon whose login keyring is locked: "locked", not "absent".
        #expect(outcomes[1].hasPrefix("failure locked "), "\(result)")
        #expect(outcomes[2] == "found 42", "\(result)")
    }

    static func elapsedMilliseconds(_ failureLine: String) -> Int {
        Int(failureLine.split(separator: " ").last ?? "") ?? .max
    }
}
