public import FoundationEssentials
public import Logging
import PrefsKV

extension Vault {
    /// How a vault is opened. The defaults suit an app on a Linux desktop.
    ///
    /// ```swift
    /// var configuration = Vault.Configuration(directory: "/var/lib/myapp/vault")
    /// configuration.keyStore = .passphrase(SecretBytes(utf8: passphrase))
    /// configuration.deadline = .seconds(1)
    /// ```
    public struct Configuration: Sendable {
        /// The directory holding vault files, created 0700 when absent. A directory or vault file that other
        /// users can read, or that another user owns, is refused with ``VaultError/Code/permissionDenied``.
        /// A relative directory is relative to the working directory of each call (an empty one is the working
        /// directory itself). The default is ``Vault/defaultDirectory``.
        public var directory: String
        /// Where the master key lives. The default is ``KeyStore/secretService``, and ``KeyStore/secretPortal``
        /// inside a Flatpak sandbox (where the Secret Service needs a hole in the sandbox that gives the app every
        /// secret of the user); there is never a fallback.
        public var keyStore: KeyStore = KeyStore.processDefault
        /// When the key may be used. The default is ``Accessibility/afterFirstUnlock``.
        public var accessibility: Accessibility = .afterFirstUnlock
        /// How long any one Secret Service or Secret portal call may take before it fails with
        /// ``VaultError/Code/timeout`` (the portal's connecting to the bus: this long for each read, rounded up
        /// to whole seconds). The default is 2 seconds.
        public var deadline: Duration = VaultDefaults.deadline
        /// Whether the key store may show its prompts. The default is ``Prompting/never``: a locked keyring
        /// is ``VaultError/Code/locked`` and an item the provider has not approved for this program is
        /// ``VaultError/Code/accessNotApproved``, at once, and no unlock or approval dialog is ever shown. (A
        /// `Vault.wipe()` or `Vault.rotateKey()` performs the prompt KeePassXC returns for every delete,
        /// within ``deadline``: KeePassXC deletes nothing without it, and shows a dialog from it only when its
        /// user asked to confirm deletes. An open never does.)
        public var prompting: Prompting = .never
        /// A per-session cache of the master key in a kernel keyring, in front of a slow or interactive key
        /// store (a passphrase derived once per login, not per process). Off (nil) by default: see ``KeyCache``
        /// for what it trades.
        public var keyCache: KeyCache?
        /// Where failures are logged (once each, at error level, never with a value). The default logs under
        /// the label "securevault" through whatever backend the app bootstrapped.
        public var logger: Logger {
            get { chosenLogger ?? Logger(label: VaultDefaults.loggerLabel) }
            set { chosenLogger = newValue }
        }
        /// The logger the app chose, if any. The default one is made when something is logged, not with the
        /// configuration: the first `Logger` of a process sets up swift-log's logging system, about a tenth of a
        /// fresh process's first vault access (and a backend the app bootstraps later is then the one used).
        package var chosenLogger: Logger?

        /// A configuration for vaults in `directory`.
        ///
        /// ```swift
        /// let app = try AppDirectory("com.example.notes")
        /// let vault = try Vault(service: "com.example.notes", configuration: .init(directory: app.vaults))
        /// ```
        public init(directory: String = Vault.defaultDirectory) {
            self.directory = directory
        }

        /// A configuration for vaults in the directory `directory` names (a file URL).
        ///
        /// ```swift
        /// let configuration = try Vault.Configuration(directory: URL(filePath: "/var/lib/myapp/vault"))
        /// ```
        ///
        /// - Throws: ``VaultError/Code/invalidValue`` for a URL that is not a file URL.
        public init(directory: URL) throws {
            do {
                self.directory = try PrefsStore.path(of: directory)
            } catch {
                throw VaultError(code: .invalidValue, message: error.message)
            }
        }
    }

    /// Whether the key store may ask the user: unlock a locked keyring, approve this program's access to the
    /// vault's key (KeePassXC asks per item and per program), confirm deleting a key.
    ///
    /// ```swift
    /// var configuration = Vault.Configuration()
    /// configuration.prompting = .allowed(deadline: .seconds(120))   // a "Sign in" button, a CLI with a user
    /// ```
    ///
    /// The vault never prompts on its own: with ``never`` every answer comes without a dialog, within
    /// ``Configuration/deadline``. With ``allowed(deadline:)`` the vault calls the Secret Service's `Unlock` on
    /// exactly the collection or the item it needs and waits for the prompt's answer, up to `deadline` for the
    /// whole call; a prompt that runs out of time is dismissed (KeePassXC may leave its dialog on screen) and the
    /// call fails with ``VaultError/Code/timeout``
    /// (a declined one with ``VaultError/Code/locked`` or ``VaultError/Code/accessNotApproved``).
    public enum Prompting: Sendable, Equatable {
        /// Never show a prompt. The default.
        case never
        /// Show the key store's prompts when they are needed, each call bounded by `deadline`.
        case allowed(deadline: Duration)
    }

    /// When the master key may be used, in the spirit of the Keychain's accessibility classes.
    ///
    /// The vault never shows an unlock prompt unless ``Configuration/prompting`` allows it: a locked keyring is
    /// reported as ``VaultError/Code/locked``.
    public enum Accessibility: String, Sendable {
        /// Once read, the key stays in this process's guarded memory: locking the keyring later does not
        /// break a running app. The default.
        case afterFirstUnlock
        /// The keyring's lock state is checked before every access (one more D-Bus round trip each): a locked
        /// keyring answers `locked` even though the key is in memory.
        case whenUnlocked
    }
}
