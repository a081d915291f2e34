import SystemLayer

/// The Flatpak sandbox the process runs in, read from `/.flatpak-info` (what flatpak puts at the root of every
/// sandbox, and what libsecret and xdg-desktop-portal read too).
package struct FlatpakSandbox: Sendable, Equatable {
    /// The application id (`[Application] name=`), e.g. `org.example.Notes`.
    package let appID: String

    static let infoPath = "/.flatpak-info"

    /// The sandbox this process runs in, nil on the host (no `/.flatpak-info`, or one without an app id).
    ///
    /// Read once per process: a process's root, and so its sandbox, is fixed when it starts (flatpak makes the file
    /// before the app runs and the sandbox's root is read-only), and an open through the Secret portal asks for
    /// it several times.
    package static var current: FlatpakSandbox? { inThisProcess }

    private static let inThisProcess: FlatpakSandbox? = Sys.readSmallFile(infoPath).flatMap {
        FlatpakSandbox(info: $0)
    }

    /// The sandbox a `/.flatpak-info` names: its `[Application]` section's `name=`, trimmed of spaces and tabs;
    /// nil without one, or with an empty one. Read as bytes (the keys and section names are ASCII).
    init?(info: [UInt8]) {
        var inApplication = false
        for rawLine in info.split(whereSeparator: { $0 == UInt8(ascii: "\n") || $0 == UInt8(ascii: "\r") }) {
            let line = Self.trimmed(rawLine)
            if line.first == UInt8(ascii: "[") {
                inApplication = line.elementsEqual("[Application]".utf8)
            } else if inApplication, line.starts(with: "name=".utf8) {
                let id = Self.trimmed(line.dropFirst("name=".utf8.count))
                guard !id.isEmpty else { return nil }
                appID = String(decoding: id, as: UTF8.self)
                return
            }
        }
        return nil
    }

    private static func trimmed(_ line: ArraySlice<UInt8>) -> ArraySlice<UInt8> {
        let blank = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
        guard let first = line.firstIndex(where: { !blank($0) }), let last = line.lastIndex(where: { !blank($0) })
        else { return line[line.startIndex..<line.startIndex] }
        return line[first...last]
    }
}
