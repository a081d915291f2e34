import ArgumentParser
import FoundationEssentials
import SecureVault

extension VaultGroup {
    /// `vaultctl vault get --service NAME KEY [--reveal]`
    struct GetCommand: VaultCommand, KeyCommand {
        static let configuration = CommandConfiguration(
            commandName: "get",
            abstract: "Show an item's metadata; with --reveal, its value.",
            discussion: """
                Without --reveal prints the item's kind, size, created and updated times and expiry (valid or \
                expired), never its value. With --reveal prints the bare value and a newline, so that \
                `$(vaultctl vault get --service app session --reveal)` is the value: text for string and \
                sessionToken items, base64 for data and secret items (a text holding control characters other \
                than tabs and line feeds is printed escaped, with a warning on stderr; --json gives it exactly). \
                An expired token is still printed, with a warning on stderr. An absent item, or a vault with no \
                file, exits 66.

                JSON: {"service": "app", "key": "session", "kind": "sessionToken", "size": 24, \
                "createdAt": 1700000000000, "updatedAt": 1700000000000, "expiresAt": 1700003600000, \
                "expired": false}, times in milliseconds since the Unix epoch; with --reveal also "value".
                """)

        @OptionGroup var options: GlobalOptions
        @OptionGroup var selection: VaultOptions

        @Argument(help: "The item's name.")
        var key: String

        @Flag(help: "Print the value itself.")
        var reveal = false

        func answer(vault target: VaultTarget, console: Console) throws -> Answer {
            try target.requireExisting()
            guard let item = try target.vault.item(key) else { throw target.noItem(key) }
            guard reveal else {
                return Answer(
                    json: ItemReport(item, service: target.service),
                    human: fields([
                        ("key", item.key), ("kind", item.kind), ("size", "\(plural(item.size, "byte"))"),
                        ("created", utcTimestamp(milliseconds: VaultItemInfo.milliseconds(item.createdAt))),
                        ("updated", utcTimestamp(milliseconds: VaultItemInfo.milliseconds(item.updatedAt))),
                        ("expires", item.expiryText),
                    ]))
            }
            guard let data = try target.vault.data(for: key) else { throw target.noItem(key) }
            let value = item.holdsText ? String(decoding: data, as: UTF8.self) : data.base64EncodedString()
            if item.isExpired() && !options.json {
                let expiry = item.expiresAt.map { utcTimestamp(milliseconds: VaultItemInfo.milliseconds($0)) } ?? ""
                console.warn("item \"\(key)\" of vault \"\(target.service)\" expired at \(expiry)")
            }
            // Always its newline, even after an empty value or one ending in a newline.
            return Answer.value(json: ItemReport(item, service: target.service, value: value), value)
        }
    }
}
