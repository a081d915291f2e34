public import FoundationEssentials
import SystemLayer

/// Where one application keeps its data by default, so that two apps never share a file: `$XDG_DATA_HOME/<id>`
/// (else `~/.local/share/<id>`), with ``preferences`` (`prefs/`) for its stores and ``vaults`` (`vault/`) for
/// its vaults. Nothing is created until a store or vault is.
///
/// ```swift
/// let app = try AppDirectory("com.example.notes")
/// let ui = try PrefsStore(id: "ui", directory: app.preferences)        // ~/.local/share/com.example.notes/prefs
/// let vault = try Vault(service: "com.example.notes", configuration: .init(directory: app.vaults))
/// ```
///
/// The stores' and vaults' own defaults (``PrefsStore/defaultDirectory``, `Vault.defaultDirectory`) are one
/// directory shared by every app of the user; pass an app's directory instead.
public struct AppDirectory: Sendable, Hashable {
    /// The application's identifier (a reverse-DNS name is customary).
    public let id: String
    /// `$XDG_DATA_HOME/<id>`, or `~/.local/share/<id>` when `XDG_DATA_HOME` is unset (read when made).
    public let root: String

    /// The data directory of application `id`.
    ///
    /// - Throws: ``PrefsError/Code/invalidKey`` when `id` is not a file name (`[A-Za-z0-9._-]`, 1 to 128
    ///   characters, not `.` or `..`): it names a directory, and must not climb out of the data directory.
    public init(_ id: String) throws {
        guard Names.isValid(id, as: .fileName) else {
            throw PrefsError(.invalidKey, "invalid application id \"\(id.prefix(140))\": \(Names.ruleText(.fileName))")
        }
        self.id = id
        root = Sys.dataDirectory(id)
    }

    /// The directory of the app's preference stores: `<root>/prefs`.
    public var preferences: String { root + "/prefs" }
    /// The directory of the app's vaults: `<root>/vault`.
    public var vaults: String { root + "/vault" }
}

extension PrefsStore {
    /// Opens the store `id` in the directory `directory` names (a file URL), as ``init(id:directory:configuration:)-(_,String,_)``
    /// does for a path.
    ///
    /// ```swift
    /// let store = try PrefsStore(id: "ui", directory: URL(filePath: "/var/lib/myapp"))
    /// ```
    ///
    /// - Throws: ``PrefsError/Code/invalidInput`` for a URL that is not a file URL; otherwise what
    ///   ``init(id:directory:configuration:)-(_,String,_)`` throws.
    public convenience init(id: String, directory: URL, configuration: Configuration = Configuration()) throws {
        try self.init(id: id, directory: try Self.path(of: directory), configuration: configuration)
    }

    /// The path of a directory URL: a file URL only.
    package static func path(of directory: URL) throws(PrefsError) -> String {
        guard directory.isFileURL else {
            throw PrefsError(.invalidInput, "\(directory) is not a file URL: a store lives in a local directory")
        }
        return directory.path(percentEncoded: false)
    }
}
