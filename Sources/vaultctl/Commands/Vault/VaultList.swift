import ArgumentParser
import PrefsKV
import SecureVault

extension VaultGroup {
    /// `vaultctl vault list --service NAME`
    struct ListCommand: VaultCommand {
        static let configuration = CommandConfiguration(
            commandName: "list",
            abstract: "List a vault's items: name, kind, size, created, updated and expiry, never values.",
            discussion: """
                Opens every item with the master key (so a locked keyring exits 75 and a missing key 78) and \
                prints its metadata; values are never printed (see `vault get --reveal`). Kinds: string, \
                sessionToken (set with --expires-in), data, secret. Sizes are the value's bytes; times are UTC. \
                An item whose record no longer opens (damaged or tampered) cannot be named: the items that \
                open are listed, the count of the others goes to stderr, and the command exits 65 (see \
                `vault verify`).

                JSON: {"service": "app", "unreadable": 0, "items": [{"key": "session", \
                "kind": "sessionToken", "size": 24, "createdAt": 1700000000000, "updatedAt": 1700000000000, \
                "expiresAt": 1700003600000, "expired": false}]}, times in milliseconds since the Unix epoch, \
                expiresAt null for items that do not expire.
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            let items = try target.vault.items()
            // Sealed names are only learnt by opening records: one that does not open is left out of
            // `items()`. The checksum scan still counts it.
            let stored = (try? PrefsStore.inspect(id: target.service, directory: target.directory)?.scanLog())?
                .liveKeyCount
            let unreadable = max(0, (stored ?? items.count) - items.count)
            return Answer(
                json: Report(service: target.service, unreadable: unreadable, items: items.map { ItemReport($0) }),
                human: table(["KEY", "KIND", "SIZE", "CREATED", "UPDATED", "EXPIRES"], items.map(\.row)),
                warning: unreadable == 0
                    ? nil
                    : "\(plural(unreadable, "item")) of vault \"\(target.service)\" could not be opened "
                        + "(damaged or tampered) and \(unreadable == 1 ? "is" : "are") not listed; "
                        + "see `\(target.command("verify"))`",
                status: unreadable == 0 ? ExitStatus.success : ExitStatus.dataError)
        }

        /// The `--json` answer.
        struct Report: Encodable {
            var service: String
            var unreadable: Int
            var items: [ItemReport]
        }
    }
}
