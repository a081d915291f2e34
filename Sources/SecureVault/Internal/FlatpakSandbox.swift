import SystemLayer

/// The Flatpak sandbox the process runs in, read from `/.flatpak-info` (what flatpak puts at the root of every
/// sandbox, and what libsecret and xdg-desktop-portal read too).
package struct FlatpakSandbox: Sendable, Equatable {
    /// The application id (`[Application] name=`), e.g. `org.example.Notes`.
    package let appID: String

    static let infoPath = "/.flatpak-info"

    /// The sandbox this process runs in, nil on the host (no `/.flatpak-info`, or one without an app id).
    package static var current: FlatpakSandbox? {
        guard let bytes = Sys.readSmallFile(infoPath, limit: 256 * 1024) else { return nil }
        var section = ""
        for line in String(decoding: bytes, as: UTF8.self).split(whereSeparator: \.isNewline) {
            let text = trimmed(line)
            if text.hasPrefix("[") {
                section = text
            } else if section == "[Application]", text.hasPrefix("name=") {
                let id = trimmed(text.dropFirst("name=".count))
                return id.isEmpty ? nil : FlatpakSandbox(appID: id)
            }
        }
        return nil
    }

    private static func trimmed(_ text: Substring) -> String {
        String(
            text.drop(while: { $0 == " " || $0 == "\t" }).reversed().drop(while: { $0 == " " || $0 == "\t" }).reversed()
        )
    }
}
