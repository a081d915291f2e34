import SystemLayer

/// The program behind `org.freedesktop.secrets`, and what it is known to do that the specification allows
/// but gnome-keyring does not (measured: Documentation/SecureVault.md, "Secret Service providers").
///
/// Known from the process that owns the bus name (`GetConnectionUnixProcessID`, then `/proc/<pid>/cmdline`):
/// a name, not a proof. It only chooses the words of a warning or a hint, never what the vault does.
package struct SecretServiceProvider: Sendable, Equatable {
    package enum Kind: Sendable, Equatable {
        case gnomeKeyring
        case keePassXC
        case kWallet
        case other
    }

    package var kind: Kind
    /// The executable's name (`keepassxc`, `gnome-keyring-daemon`, ...).
    package var program: String
    package var pid: UInt32

    /// Reads the name of process `pid` from /proc; nil when it cannot be read (another user's process under
    /// hidepid, a process gone).
    init?(pid: UInt32) {
        guard pid > 0 else { return nil }
        var program: String?
        if let cmdline = Sys.readSmallFile("/proc/\(pid)/cmdline"), let first = cmdline.split(separator: 0).first {
            program = String(decoding: first, as: UTF8.self).split(separator: "/").last.map(String.init)
        }
        if program == nil || program!.isEmpty, let comm = Sys.readSmallFile("/proc/\(pid)/comm") {
            program = String(decoding: comm, as: UTF8.self).trimmingSuffix("\n")
        }
        guard let program, !program.isEmpty else { return nil }
        self.init(program: program, pid: pid)
    }

    init(program: String, pid: UInt32) {
        self.program = program
        self.pid = pid
        let lowered = program.lowercased()
        if lowered.hasPrefix("gnome-keyring") {
            kind = .gnomeKeyring
        } else if lowered.hasPrefix("keepassxc") {
            kind = .keePassXC
        } else if lowered.hasPrefix("kwallet") || lowered.hasPrefix("ksecretd") {
            kind = .kWallet
        } else {
            kind = .other
        }
    }

    /// `gnome-keyring`, `KeePassXC`, `KWallet`, or the program's name.
    package var name: String {
        switch kind {
        case .gnomeKeyring: return "gnome-keyring"
        case .keePassXC: return "KeePassXC"
        case .kWallet: return "KWallet"
        case .other: return program
        }
    }

    /// `KeePassXC (keepassxc, pid 4242)`.
    package var description: String {
        kind == .other ? "\(program) (pid \(pid))" : "\(name) (\(program), pid \(pid))"
    }

    /// What the provider may keep of an item it deleted, and how to purge it; nil when its deletion is final
    /// (gnome-keyring) or not known to keep anything.
    package var keptAfterDelete: String? {
        switch kind {
        case .keePassXC:
            return "KeePassXC moves a deleted entry to the database's Recycle Bin when the Recycle Bin is on (its "
                + "default), and keeps an entry's earlier secrets in its History: the old master key may remain "
                + "there until you empty the Recycle Bin (or turn it off in Database Settings, so deletes are final)"
        case .gnomeKeyring, .kWallet, .other:
            return nil
        }
    }

    /// How to approve access to an item, for a provider that approves per item and per client.
    package var approvalHint: String {
        switch kind {
        case .keePassXC:
            return "KeePassXC asks to approve each program's access to an entry and forgets the approval when the "
                + "program exits (\"Remember\" keeps it until then): approve it with --interactive (or "
                + "Vault.Configuration.prompting), or turn off \"Confirm when passwords are retrieved by clients\" in "
                + "KeePassXC's Secret Service Integration settings"
        case .gnomeKeyring, .kWallet, .other:
            return "the Secret Service approves access per item: approve it with --interactive (or "
                + "Vault.Configuration.prompting) in the keyring app's prompt"
        }
    }
}

extension String {
    fileprivate func trimmingSuffix(_ suffix: String) -> String {
        hasSuffix(suffix) ? String(dropLast(suffix.count)) : self
    }
}
