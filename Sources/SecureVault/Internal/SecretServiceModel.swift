// What the Secret Service and Secret portal key stores answer, in types that need no libsecret: compiled in every
// build. The calls themselves (LibSecret*.swift, DeadlineTimer.swift) are compiled with the package's
// `SecretService` trait (on by default); without it, LibSecret+Absent.swift answers every call `unavailable`.

#if SecretService
internal import CSecret
#endif
import SystemLayer

/// A failure of a Secret Service call, classified. `VaultError(_:operation:)` turns it into the public error.
package struct SecretServiceFailure: Error, Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        case locked
        case noSessionBus
        case noSecretService
        case noDefaultCollection
        case timeout
        /// The item's collection is unlocked but the item is not: the provider approves access per item and
        /// per client (KeePassXC), and this client has not been approved.
        case notApproved
        /// Anything else the service reported (the GError says what).
        case other
        /// This build of the package has no Secret Service client (its `SecretService` trait is off): nothing was
        /// asked (LibSecret+Absent.swift).
        case notBuiltIn
        /// libsecret could not be loaded in this process (not installed, or damaged): nothing was asked
        /// (`LibSecret.loadLibrary`).
        case notLoaded
    }

    package var kind: Kind
    /// The GError as libsecret reported it, when there was one.
    package var domain: String?
    package var code: Int32?
    package var message: String
    /// The program behind the service, looked up within the failing call when its words matter to the answer
    /// (`notApproved`: how to approve depends on the provider).
    package var provider: SecretServiceProvider?

    /// Nothing was asked of the bus or the service: this process has no Secret Service client (`notBuiltIn`,
    /// `notLoaded`).
    package var askedNothing: Bool { kind == .notBuiltIn || kind == .notLoaded }

    package init(_ kind: Kind, domain: String? = nil, code: Int32? = nil, message: String) {
        self.kind = kind
        self.domain = domain
        self.code = code
        self.message = message
    }
}

/// Typed, bounded, prompt-free access to the freedesktop Secret Service through libsecret.
package enum LibSecret {
    package static let textContentType = "text/plain"
    package static let binaryContentType = "application/octet-stream"

    /// A schema: a name plus string attributes. Attributes are not secret (they are readable over D-Bus while
    /// locked and stored as unsalted hashes on disk), so ours carry only random ids, a format version, the vault's
    /// name and (since 0.2.0) its directory's path: nothing secret.
    ///
    /// `@unchecked Sendable`: the C struct and its strings are written once in `init` and only read afterwards.
    package final class Schema: @unchecked Sendable {
        package let name: String
        package let attributeNames: [String]
        #if SecretService
        let pointer: UnsafeMutablePointer<SecretSchema>
        #endif

        package init(name: String, attributes: [String]) {
            precondition(attributes.count < 32, "a SecretSchema holds at most 31 attributes")
            self.name = name
            self.attributeNames = attributes
            #if SecretService
            pointer = .allocate(capacity: 1)
            pointer.initialize(to: SecretSchema())
            pointer.pointee.name = Self.cString(name)
            pointer.pointee.flags = SECRET_SCHEMA_NONE
            withUnsafeMutableBytes(of: &pointer.pointee.attributes) { raw in
                let slots = raw.bindMemory(to: SecretSchemaAttribute.self)
                for (index, attribute) in attributes.enumerated() {
                    slots[index].name = Self.cString(attribute)
                    slots[index].type = SECRET_SCHEMA_ATTRIBUTE_STRING
                }
            }
            #endif
        }

        #if SecretService
        deinit {
            UnsafeMutablePointer(mutating: pointer.pointee.name)?.deallocate()
            withUnsafeMutableBytes(of: &pointer.pointee.attributes) { raw in
                for slot in raw.bindMemory(to: SecretSchemaAttribute.self) {
                    UnsafeMutablePointer(mutating: slot.name)?.deallocate()
                }
            }
            pointer.deinitialize(count: 1)
            pointer.deallocate()
        }

        /// A C copy of `text` in memory of the schema's own: a schema is made before libsecret is loaded (the
        /// package's schemas are static), and libsecret only reads its strings.
        private static func cString(_ text: String) -> UnsafePointer<CChar> {
            let bytes = text.utf8CString
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
            _ = UnsafeMutableBufferPointer(start: copy, count: bytes.count).initialize(from: bytes)
            return UnsafePointer(copy)
        }
        #endif

        /// The schema of a vault's master key: `vault` (random id of the vault), `key` (random id of the key),
        /// `format` (the vault's identity format: "1" legacy, "2"), for format 2 `service` (the vault's name,
        /// so that a file copied under another name finds no key, and no wipe of it deletes one), and on keys made
        /// since 0.2.0 `directory` (the vault directory's canonical path when the key was made: where `vaultctl vault
        /// keys` looks for the vault, so that a key whose vault was deleted by hand can be found). Look-ups and
        /// deletes match `vault`, `key`, `format` and `service` only, so keys made before `directory` keep working.
        package static let vaultMasterKey = Schema(
            name: "dev.securevault.MasterKey", attributes: ["vault", "key", "format", "service", "directory"])
    }

    /// A secret read from the service, copied straight into guarded memory.
    package struct Secret: Sendable, Equatable {
        package var bytes: SecretBytes
        package var contentType: String
    }

    /// What ``lookup(schema:attributes:collection:prompting:deadline:)`` found. Only `found` hands out a secret: when the
    /// items that match cannot be trusted as the one answer, the lookup says so instead of picking one.
    package enum LookupResult: Sendable, Equatable {
        /// No item matches, and the collection that would hold it is unlocked.
        case absent
        /// Exactly one item matches, in the expected collection, and it is unlocked: its secret.
        case found(Secret)
        /// More than one item matches (their object paths). Any app of the user can store an item with the
        /// same attributes, in any collection: which one is the real secret cannot be told.
        case several(paths: [String])
        /// The one item that matches is not in the expected collection (`expected` is that collection's path,
        /// nil when the alias names none).
        case elsewhere(path: String, expected: String?)

        /// The secret when one was found, else nil.
        package var secret: Secret? {
            if case .found(let secret) = self { return secret }
            return nil
        }
    }

    /// Lock state of a collection, read without prompting.
    package enum CollectionState: Sendable, Equatable {
        case unlocked
        case locked
        /// The alias names no collection (no keyring was ever created or unlocked in this daemon).
        case missing
    }

    /// One collection as the service reports it.
    package struct CollectionInfo: Sendable, Equatable {
        package var path: String
        package var label: String
        package var locked: Bool
    }

    /// What `probe` found: enough for `vaultctl doctor` and `Vault.status()`.
    package struct ServiceProbe: Sendable {
        package var busAddress: String?
        package var collections: [CollectionInfo]
        package var defaultCollectionPath: String?
        /// The program that owns `org.freedesktop.secrets`, when it can be told.
        package var provider: SecretServiceProvider?
    }

    /// Whether a call may show the provider's prompts (an unlock dialog, an access approval, a delete
    /// confirmation). Never, unless the app opted in.
    package enum Prompting: Sendable, Equatable {
        /// Answer `locked` / `notApproved` at once; never call `Unlock`.
        case never
        /// Call `Unlock` on exactly the collection or item needed and wait for its prompt, within the deadline.
        case allowed
    }

    /// Whether a delete may perform the prompt the provider returns for it. KeePassXC returns one for every
    /// delete, and shows a dialog from it only when its user asked to confirm deletes (Recycle Bin off).
    package enum DeletePrompt: Sendable, Equatable {
        /// Dismiss it unperformed: the delete does not happen (an open: it never shows anything).
        case skip
        /// Perform it, within the call's deadline (a wipe or a rotation the app or the user asked for; with
        /// `Prompting.allowed`, the user may answer a confirmation).
        case perform
    }

    /// What ``clear(schema:attributes:label:prompting:deletePrompt:deadline:)`` did.
    package struct ClearOutcome: Sendable, Equatable {
        /// Items deleted: a fresh search no longer finds them.
        package var deleted: Int
        /// Why a matching item is still there although its secret was already overwritten with random bytes
        /// (a delete prompt skipped or not answered within the deadline, a delete that failed, a provider that
        /// still lists the item); nil when every matching item is gone.
        package var unfinished: String?
        /// The program behind the service (what it may keep of a deleted item depends on it).
        package var provider: SecretServiceProvider?

        package init(deleted: Int, unfinished: String? = nil, provider: SecretServiceProvider? = nil) {
            self.deleted = deleted
            self.unfinished = unfinished
            self.provider = provider
        }
    }

    /// A keyring item as a listing sees it: its object path, label and attributes. Its secret is never read.
    package struct ItemInfo: Sendable, Equatable {
        package var path: String
        package var label: String
        /// The item's values of the schema's attributes (an attribute the item lacks is absent).
        package var attributes: [String: String]
    }
}

/// The Secret portal (`org.freedesktop.portal.Secret`): a secret of the calling sandboxed app's own, kept by the
/// user's keyring through the portal's backend (gnome-keyring, KWallet), handed over through a pipe.
///
/// Facts this client respects (xdg-desktop-portal 1.16, gnome-keyring 42.1): the portal names the app from the bus
/// peer's `/.flatpak-info` and does not refuse an unsandboxed caller (it gets one secret shared by every host
/// program), so the caller refuses on the host first; the Request's `Response` is subscribed before the call
/// (its path follows from `handle_token`); the pipe is read only after `Response` 0, within the same deadline as
/// the call; `Request.Close` is never called (in gnome-keyring 42.1 a closed or abandoned request breaks its portal
/// backend until the daemon restarts).
enum SecretPortal {
    /// The most a portal secret may hold: gnome-keyring's is 64 bytes; the vault assumes no length.
    static let maximumLength = 64 * 1024
    /// What the first read of the secret takes: one page.
    static let firstReadLength = 4096

    /// What went wrong, and the GError behind it (made into a `VaultError` in VaultError+SecretService.swift).
    struct PortalFailure: Error {
        enum Kind { case timeout, other }
        var kind: Kind = .other
        var code: VaultError.Code
        var message: String
        var gError: (domain: String, code: Int32, message: String)?
        var errno: Errno?
    }
}
