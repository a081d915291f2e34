import ArgumentParser
import SecureVault

extension VaultGroup {
    /// `vaultctl vault adopt --service NAME --attribute K=V ... --as ITEM [--delete-source] [--dry-run]`
    struct AdoptCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "adopt",
            abstract: "Move a secret an app stored straight in the keyring into the vault.",
            discussion: """
                Finds the one Secret Service item whose attributes include every --attribute K=V (keytar: \
                service and account; python keyring: service and username; secret-tool: its own), copies its \
                secret into the vault as item --as (a text secret as a string item, others as a secret item), \
                reads it back through a fresh open of the vault and compares, and only then, with \
                --delete-source, deletes the keyring item (a fresh search checks it is gone). The source is \
                never changed otherwise, and a kill at any instant leaves it whole or the vault item complete. \
                Run again, it writes nothing and says "unchanged". --dry-run says what would move and changes \
                nothing. The vault's own master keys are never matched. No item matching exits 66, several 64 \
                (name more attributes), a vault item of that name with another value 64 (nothing is changed), a \
                locked keyring 75 (--interactive lets it ask). Secrets are never printed.

                JSON: {"service": "app", "item": "refreshToken", "outcome": "copied", "dryRun": false, \
                "source": {"path": "/org/freedesktop/secrets/collection/login/7", "label": "...", \
                "attributes": {"account": "...", "service": "..."}}, "deletedSource": true, \
                "keptSourceReason": null}; outcome is "copied" or "unchanged" (with --dry-run: what would be).
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        @Option(
            name: .customLong("attribute"),
            help: ArgumentHelp(
                "An attribute the keyring item has, as KEY=VALUE (repeat for several).", valueName: "k=v"))
        var attributes: [String] = []

        @Option(name: .customLong("as"), help: ArgumentHelp("The vault item to copy it into.", valueName: "item"))
        var item: String

        @Flag(
            name: .customLong("delete-source"), help: "Delete the keyring item once the copy is read back and matches.")
        var deleteSource = false

        @Flag(name: .customLong("dry-run"), help: "Say what would move; change nothing.")
        var dryRun = false

        func checkArguments() throws {
            guard !attributes.isEmpty else {
                throw CLIFailure.usage("vault adopt needs at least one --attribute KEY=VALUE naming the keyring item")
            }
            _ = try parsedAttributes()
        }

        func parsedAttributes() throws -> [String: String] {
            var parsed: [String: String] = [:]
            for pair in attributes {
                guard let equals = pair.firstIndex(of: "="), equals != pair.startIndex else {
                    throw CLIFailure.usage("--attribute \(shellQuoted(pair)): not KEY=VALUE")
                }
                let key = String(pair[..<equals])
                guard parsed[key] == nil else { throw CLIFailure.usage("--attribute \(key) is given twice") }
                parsed[key] = String(pair[pair.index(after: equals)...])
            }
            return parsed
        }

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            if !dryRun { try target.options.checkDirectoryToCreate() }
            let report = try target.vault.adopt(
                matching: try parsedAttributes(), as: item, deletingSource: deleteSource, dryRun: dryRun)
            let source = "keyring item \(report.sourcePath) (\"\(report.sourceLabel)\")"
            var human: String
            switch (report.outcome, report.dryRun) {
            case (.copied, false): human = "adopted \(source) into vault \(target.service) as \(item)"
            case (.unchanged, false): human = "unchanged: vault \(target.service) already holds \(source) as \(item)"
            case (.copied, true): human = "would adopt \(source) into vault \(target.service) as \(item) (dry run)"
            case (.unchanged, true):
                human = "would change nothing: vault \(target.service) already holds \(source) as \(item)"
            }
            if report.deletedSource { human += "; the keyring item was deleted" }
            if dryRun && deleteSource { human += "; the keyring item would then be deleted" }
            return Answer(
                json: Report(
                    service: target.service, item: item, outcome: report.outcome.rawValue, dryRun: report.dryRun,
                    source: SourceReport(
                        path: report.sourcePath, label: report.sourceLabel, attributes: report.sourceAttributes),
                    deletedSource: report.deletedSource, keptSourceReason: report.keptSourceReason),
                human: human,
                warning: report.keptSourceReason.map {
                    "warning: copied and verified, but the keyring item was kept: \($0)"
                })
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var item: String
            var outcome: String
            var dryRun: Bool
            var source: SourceReport
            var deletedSource: Bool
            @Nullable var keptSourceReason: String?
        }

        struct SourceReport: Encodable {
            var path: String
            var label: String
            var attributes: [String: String]
        }
    }
}
