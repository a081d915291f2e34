import Foundation
import Testing
import TestSupport

/// Vault writers SIGKILLed at random instants while they set items, rotate the master key and wipe the vault,
/// against the real gnome-keyring and the real kernel keyring (`KeyStore.kernelKeyring(.user)`). After every kill a fresh process dumps the vault, which must hold exactly
/// the acknowledged state, or that state plus the one operation in flight: nothing lost, nothing resurrected,
/// never a vault left without its key, and no key left that the vault file does not use.
///
/// Rounds: `VAULT_CRASH_ROUNDS` (default 40; `make torture` runs thousands).
@Suite struct VaultCrashTests {
    enum Operation: Equatable {
        case set(key: String, value: String)
        case rotate
        case wipe
        case migrate

        /// The writer's deterministic schedule (see `vault-crash-writer` in Tests/TestHelper); when `migrating`
        /// between two key stores, ops 7 and 13 migrate and 19 rotates.
        init(_ i: Int, migrating: Bool = false) {
            switch (i % 20, migrating) {
            case (7, false): self = .rotate
            case (19, false): self = .wipe
            case (7, true), (13, true): self = .migrate
            case (19, true): self = .rotate
            default: self = .set(key: "k\(i % 5)", value: "v\(i)")
            }
        }

        func apply(to state: inout [String: String]) {
            switch self {
            case .set(let key, let value): state[key] = value
            case .rotate, .migrate: break
            case .wipe: state = [:]
            }
        }

        var phase: String {
            switch self {
            case .set: return "set"
            case .rotate: return "rotate"
            case .wipe: return "wipe"
            case .migrate: return "migrate"
            }
        }
    }

    /// `migrate`: writers migrating the vault back and forth between a key file and the session keyring
    /// (`vault migrate-key`), rotating and setting; after every kill, besides the state, exactly one key of the
    /// vault is left in the two key stores together (the journal deleted the other, whichever store it was in).
    /// `portal`: the same between the Secret Service and the Secret portal, the writers and the dumps running as a
    /// Flatpak app with the talk-name (scripts/with-portal.sh, scripts/sandbox.sh); the keys left are the wrapped
    /// key files plus the keyring's items of the vault.
    @Test(arguments: ["secretService", "keyring:session", "key-file", "systemd-creds", "migrate", "portal"])
    func killedWritersLoseNoAcknowledgedWriteAndResurrectNothing(keyStore: String) throws {
        let portal = keyStore == "portal"
        let migrating = keyStore == "migrate" || portal
        // A service of its own per case: the cases run at once, and the kernel keys a case counts are named by it
        // (a user's keys are visible across session keyrings in /proc/keys).
        let service = (migrating ? "mig-" : "app-") + UUID().uuidString.prefix(8).lowercased()
        // The portal's rounds restart the keyring each (about a second): `make torture`'s thousands are capped at 200.
        let requested = Int(ProcessInfo.processInfo.environment["VAULT_CRASH_ROUNDS"] ?? "") ?? 40
        let rounds = portal ? min(requested, 200) : requested
        let work = "/dev/shm/vault-crash-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }
        // One keyring session for all rounds; each round is a writer process killed after 20 to 400 ms, then
        // a fresh process dumping what the vault holds.
        // The kernel keyring rounds run in a session keyring of their own, so that the keys of killed writers go
        // with it instead of piling up in the user's keyrings.
        try """
            H=\(KeyringSession.shellQuote(KeyringSession.helper))
            export VAULT_TEST_DIR=\(work)/vaults
            \(keyStore == "secretService" ? "" : "export VAULT_TEST_KEY_STORE=\(keyStore)")
            \(keyStore == "key-file" ? "export VAULT_TEST_KEY_STORE=key-file:\(work)/key; head -c 32 /dev/urandom > \(work)/key; chmod 600 \(work)/key" : "")
            \(keyStore == "systemd-creds" ? "export VAULT_TEST_KEY_STORE=systemd-creds:crash" : "")
            SVC=\(service)
            HOST=$H
            if \(portal); then
              export VAULT_TEST_KEY_STORE=secret-portal VAULT_TEST_MIGRATE_TO=secret-service
              H="$sandbox --talk-secrets org.example.Crash $H"
              mkdir -m 700 -p \(work)/vaults
              echo v0 | $H vault-set $SVC k0 > /dev/null
            elif \(migrating); then
              export VAULT_TEST_KEY_STORE=key-file:\(work)/key VAULT_TEST_MIGRATE_TO=keyring:session
              head -c 32 /dev/urandom > \(work)/key; chmod 600 \(work)/key
              echo v0 | $H vault-set $SVC k0 > /dev/null
            fi
            left() {
              # Wrapped key files; keyring items or live kernel keys of the vault; deletes of unused keys the journal
              # keeps for the next maintenance call (deferred); whether the vault file exists.
              deferred=$(cat \(work)/vaults/$SVC.vault.intent 2>/dev/null | grep -c '^drop .* deferred')
              if \(portal || keyStore == "secretService"); then
                stored=$(secret-tool search --all service $SVC 2>&1 | grep -c '^\\[/')
              else
                stored=$(grep " securevault:$SVC:" /proc/keys | awk '$2 !~ /[iRD]/' | wc -l)
              fi
              file=0; [ -e \(work)/vaults/$SVC.prefs ] && file=1
              echo "$(ls \(work)/vaults/$SVC.*.vaultkey 2>/dev/null | wc -l) $stored $deferred $file"
            }
            for r in $(seq 1 \(rounds)); do
              # The acks file exists before the writer starts: on a loaded machine the kill can come before the
              # child was first scheduled, and so before a redirect of its own had created it (no acks: 0 acked).
              : > \(work)/acks.$r
              $H vault-crash-writer $SVC >> \(work)/acks.$r 2>\(work)/writer-err.$r &
              pid=$!
              sleep "0.$(printf '%03d' $((RANDOM % 380 + 20)))"
              kill -9 "$pid"; wait "$pid" 2>/dev/null
              if \(portal); then
                # The writer dies with its sandbox (bwrap's parent-death signal), a moment after the script around
                # it: nothing is read before it is gone.
                end=$((SECONDS + 120))
                while pgrep -f "vault-crash-writer $SVC" >/dev/null && [ "$SECONDS" -lt "$end" ]; do sleep 0.01; done
                # gnome-keyring 42.1: a request its app abandoned (killed) breaks the portal backend until the
                # daemon restarts; every later request is refused. A user's session would need the same restart.
                printf '%s' "$VAULT_TEST_KEYRING_PASSWORD" | gnome-keyring-daemon --replace --unlock --components=secrets >/dev/null 2>&1
                end=$((SECONDS + 120))
                until [ "$($HOST secret-state 2>/dev/null)" = unlocked ] || [ "$SECONDS" -ge "$end" ]; do sleep 0.05; done
                # The daemon's Secret Service answering is not yet its portal backend answering: the portal is asked
                # until it gives this app its secret (a first request to the new daemon has been refused with "The
                # connection is closed"), so that what the dump below meets is the vault, not the restart.
                until $H portal-secret >/dev/null 2>&1 || [ "$SECONDS" -ge "$end" ]; do sleep 0.05; done
              fi
              : > \(work)/dump-retries.$r
              for attempt in 1 2 3; do
                $H vault-dump $SVC > \(work)/dump.$r 2>\(work)/dump-err.$r
                # A D-Bus call of the dump refused or cut (the daemon restarted above, the portal between them): the
                # key store's typed error, not a vault that does not open; asked again, at most three times, each
                # retry counted in the report. Any other error is the vault's answer and fails the round.
                if \(portal) && grep -qE '^error (io|unavailable|timeout) ' \(work)/dump.$r \\
                  && grep -qiE 'portal|d-bus|session bus|connection' \(work)/dump-err.$r; then
                  cat \(work)/dump.$r \(work)/dump-err.$r >> \(work)/dump-retries.$r
                  sleep 0.2
                  continue
                fi
                break
              done
              left > \(work)/left.$r
            done
            echo done
            """.write(toFile: "\(work)/rounds.sh", atomically: true, encoding: .utf8)
        let result = try KeyringSession.scenario(
            portal ? .portal : .keyring,
            script: keyStore == "secretService" || portal
                ? "bash \(work)/rounds.sh" : "$H keyring-session 'bash \(work)/rounds.sh'")
        try #require(result.lines.last == "done", "\(result)")

        var state: [String: String] = migrating ? ["k0": "v0"] : [:]
        var leftKeys = 0
        var killedIn: [String: Int] = [:]
        var acknowledged = 0
        var unopened = 0
        var wrong = 0
        var busLost: [String] = []
        var dumpRetries: [String] = []
        var deferredRounds = 0
        for round in 1...rounds {
            let acks = try String(contentsOfFile: "\(work)/acks.\(round)", encoding: .utf8)
                .split(separator: "\n").map(String.init)
            let dump = try String(contentsOfFile: "\(work)/dump.\(round)", encoding: .utf8)
                .split(separator: "\n").map(String.init)
            // Replay what the writer acknowledged, checking it is the schedule.
            var last = 0
            for line in acks {
                // The kill ends the writer's sandbox script, and its xdg-dbus-proxy (bwrap --die-with-parent) a
                // moment before the writer itself: a writer in a D-Bus call then reports it refused or closed
                // (`unavailable`, `io`; `timeout`, `locked` for a portal request cut short) as its last line. An
                // error is no acknowledgement: its operation is the one in flight, the writer's acknowledgements
                // end there, and the state checks below still hold. Any other error (keyMissing, wrongKey,
                // corrupted...) fails the round.
                if portal, ["unavailable", "io", "timeout", "locked"].contains(where: { line.hasPrefix("error \($0) ") }) {
                    let message = (try? String(contentsOfFile: "\(work)/writer-err.\(round)", encoding: .utf8)) ?? ""
                    busLost.append("round \(round): \(line): \(message.split(separator: "\n").last ?? "")")
                    break
                }
                let fields = line.split(separator: " ", maxSplits: 1)
                let i = try #require(Int(fields[0]), "round \(round): bad ack \(line)")
                try #require(i == last + 1, "round \(round): ack \(i) after \(last)")
                Operation(i, migrating: migrating).apply(to: &state)
                last = i
            }
            acknowledged += last
            let inFlight = Operation(last + 1, migrating: migrating)
            killedIn[inFlight.phase, default: 0] += 1
            var withInFlight = state
            inFlight.apply(to: &withInFlight)

            let retried = (try? String(contentsOfFile: "\(work)/dump-retries.\(round)", encoding: .utf8)) ?? ""
            if !retried.isEmpty {
                dumpRetries.append("round \(round): \(retried.split(separator: "\n").joined(separator: " / "))")
            }
            let found = try Self.parse(dump)
            let errors = (try? String(contentsOfFile: "\(work)/dump-err.\(round)", encoding: .utf8)) ?? ""
            guard let found else {
                unopened += 1
                Issue.record("round \(round): the vault did not open after a kill in \(inFlight.phase): \(dump) \(errors)")
                break
            }
            if found != state && found != withInFlight {
                wrong += 1
                Issue.record(
                    "round \(round), killed in \(inFlight.phase) after ack \(last): found \(found), acknowledged \(state)")
            }
            let left = try String(contentsOfFile: "\(work)/left.\(round)", encoding: .utf8)
                .split(whereSeparator: \.isWhitespace).compactMap { Int($0) }
            try #require(left.count == 4, "round \(round): keys left \(left)")
            if !migrating {
                // One key store: the key the file uses, and no other (a first write's key is journaled before it is
                // made: a kill before its file leaves a line the next open finishes); no key without a file.
                let keys = left[0] + left[1]
                if keys != left[3] || left[2] != 0 {
                    leftKeys += 1
                    let what = "keys left (files, keyring or kernel, deferred deletes, vault file) \(left)"
                    Issue.record("round \(round), killed in \(inFlight.phase): \(what)")
                }
            }
            if migrating {
                // Wrapped key files and live kernel keys (keyring items) of the vault: exactly one, in the store the
                // file names, besides unused keys whose delete the journal keeps as deferred. A delete is
                // deferred when the key store refused it (an open never retries it; the next rotation, migration or
                // wipe does): here only in the portal case, when a writer's D-Bus call failed as its proxy went (a
                // rotation or migration that had made its new key, then could not delete the old one; the kill
                // ends the proxy a moment before the writer, which may die before it reports the failure).
                let keys = left.prefix(2).reduce(0, +)
                let deferred = left.count > 2 ? left[2] : 0
                // A deferred line may also name a key already gone (deleted since, by the journal's next pass): at
                // least the key in use, and every other key named by a deferred line.
                if keys < 1 || keys - 1 > deferred || (deferred > 0 && !portal) {
                    leftKeys += 1
                    let what = "keys left (files, kernel or keyring, deferred deletes) \(left)"
                    Issue.record("round \(round), killed in \(inFlight.phase): \(what)")
                }
                if deferred > 0 { deferredRounds += 1 }
            }
            state = found  // the next round starts from what is really there
        }
        TortureReport.line(
            "vault crash (\(keyStore)): \(rounds) kills of writers setting, rotating and wiping against the real key store, "
                + "\(acknowledged) acknowledged operations, in flight at the kill: \(killedIn.sorted { $0.key < $1.key }); "
                + "vaults that did not open: \(unopened), states neither acknowledged nor acknowledged plus the "
                + "operation in flight (a lost or resurrected write): \(wrong)"
                + (migrating
                    ? "; rounds leaving other than exactly one key across both key stores: \(leftKeys)"
                    : "; rounds leaving a key no vault file uses, or a file without its key: \(leftKeys)")
                + (portal ? "; writers stopped by a failed D-Bus call: \(busLost.count) \(busLost.prefix(3))" : "")
                + (portal
                    ? "; dumps asked again after a failed D-Bus call: \(dumpRetries.count) \(dumpRetries.prefix(3))" : "")
                + (migrating ? "; rounds ending with an unused key's delete deferred: \(deferredRounds)" : ""))
    }

    /// Parses `vault-dump` output: nil when the vault could not be read.
    static func parse(_ lines: [String]) throws -> [String: String]? {
        if lines == ["(empty)"] { return [:] }
        if lines.first?.hasPrefix("error ") == true || lines.isEmpty { return nil }
        var items: [String: String] = [:]
        for line in lines {
            let parts = line.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2 else { return nil }
            items[parts[0]] = parts[1]
        }
        return items
    }
}
