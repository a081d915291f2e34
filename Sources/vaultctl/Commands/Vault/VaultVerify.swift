import ArgumentParser
import PrefsKV
import SecureVault

extension VaultGroup {
    /// `vaultctl vault verify --service NAME`
    struct VerifyCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "verify",
            abstract: "Check every record's checksum and open every item with the master key.",
            discussion: """
                Changes nothing. Exits 0 when every record verifies and every item opens; 65 with every item \
                that failed and every damaged range (offset, length, records, reason) otherwise: a flipped \
                byte fails its record's checksum, a ciphertext moved under another name fails to open \
                (tampered). When damage keeps the vault from opening at all, the checksum scan alone reports \
                the ranges. A locked keyring exits 75, a missing master key 78.

                JSON: {"service": "app", "path": "...", "clean": false, "itemsOpened": 2, \
                "failures": [{"key": "session", "code": "tampered", "message": "..."}], \
                "damage": [{"offset": 4096, "length": 120, "records": 1, "keys": [], \
                "reason": "..."}]}.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            // The library scans the file with the key even when damage or tampering keeps it from opening.
            let report = try target.vault.verify()
            let (opened, failures, damage) = (report.itemsOpened, report.failures, report.damage)
            let clean = failures.isEmpty && damage.isEmpty
            let summary =
                clean
                ? "vault \(target.service) is clean: \(plural(opened, "item")) opened, \(target.path)"
                : "vault \(target.service) is DAMAGED: \(plural(failures.count, "item")) failed to open, "
                    + "\(plural(damage.count, "damaged range")), \(plural(opened, "item")) opened, \(target.path)"
            var human = [summary]
            if !failures.isEmpty {
                human.append(
                    table(
                        ["KEY", "CODE", "MESSAGE"],
                        failures.map { [$0.key, $0.error.code.description, $0.error.message] }))
            }
            if !damage.isEmpty { human.append(damageTable(damage)) }
            return Answer(
                json: Report(
                    service: target.service, path: target.path, clean: clean, itemsOpened: opened,
                    failures: failures.map {
                        Report.Failure(key: $0.key, code: $0.error.code.description, message: $0.error.message)
                    },
                    damage: damage.map(DamageReport.init)),
                human: human.joined(separator: "\n"),
                status: clean ? ExitStatus.success : ExitStatus.dataError)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            struct Failure: Encodable {
                var key: String
                var code: String
                var message: String
            }

            var service: String
            var path: String
            var clean: Bool
            var itemsOpened: Int
            var failures: [Failure]
            var damage: [DamageReport]
        }
    }
}
