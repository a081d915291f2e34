// The naming rule for store ids, vault service names and vault key names.

/// The one naming rule: 1 to 128 bytes of `A-Z a-z 0-9 . _ -`, never `.` or `..`.
///
/// A name that becomes part of a file name (a PrefsKV store id, and so a vault's service name, which is the
/// id of the vault's store) is ``Role/fileName`` and must also not contain `..` anywhere: that is PrefsKV's
/// rule, unchanged. A vault's key names are ``Role/itemName``: they live inside a file, and `a..b` is a
/// valid key name as it always was.
///
/// Why the file rule is safe for service names: a service name with `..` inside (`a..b`) was accepted by
/// `Vault.init` but refused by PrefsKV as a store id at the vault's first access, so no such vault ever had
/// a file. Refusing it at `Vault.init` changes when `invalidKey` is thrown, not what can exist on disk.
///
/// ```swift
/// Names.isValid("ui.settings", as: .fileName)  // true
/// Names.isValid("a..b", as: .fileName)         // false
/// Names.isValid("a..b", as: .itemName)         // true
/// ```
///
/// Public only so that `isValid` is inlined into the first open (see Sys+Process.swift); SystemLayer is no
/// product.
public enum Names {
    /// What a name names, which decides whether `..` may appear inside it.
    public enum Role: Sendable {
        /// Part of a file name: a store id, a vault's service name.
        case fileName
        /// An item inside a file: a vault's key name.
        case itemName
    }

    /// The longest name, in bytes.
    @inlinable public static var maximumLength: Int { 128 }

    /// The rule in words, for error messages.
    package static func ruleText(_ role: Role) -> String {
        role == .fileName ? "use 1 to 128 of A-Z a-z 0-9 . _ -, no \"..\"" : "use 1 to 128 of A-Z a-z 0-9 . _ -"
    }

    /// Whether `name` follows the rule for `role`.
    ///
    /// On the first-open path: it walks the UTF-8 bytes once and calls nothing generic (`contains("..")` would
    /// instantiate the string-processing module's searcher at run time, in every fresh process's first open).
    @inlinable
    public static func isValid(_ name: String, as role: Role) -> Bool {
        var count = 0
        var previous: UInt8 = 0
        var doubleDot = false
        for c in name.utf8 {
            let allowed =
                (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || c == 0x2E
                || c == 0x5F || c == 0x2D
            guard allowed else { return false }
            if c == 0x2E && previous == 0x2E { doubleDot = true }
            previous = c
            count += 1
        }
        guard count >= 1, count <= maximumLength, name != ".", name != ".." else { return false }
        return role == .itemName || !doubleDot
    }
}
