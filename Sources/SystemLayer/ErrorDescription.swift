// The one description format of the package's errors. It lives here, under both modules, so that neither
// PrefsKV's nor SecureVault's error formats the other's: each passes its own parts as plain strings.

/// `<type>.<code>: <message>`, then ` (<cause>)` when there is a cause the message does not already name (the
/// system-call factories write the errno into their messages).
///
/// ```swift
/// describeError(type: "PrefsError", code: "io", message: "cannot read x.prefs", cause: "errno 5")
/// // "PrefsError.io: cannot read x.prefs (errno 5)"
/// ```
package func describeError(type: String, code: String, message: String, cause: String?) -> String {
    var text = type + "." + code + ": " + message
    if let cause, !message.contains(cause) { text += " (" + cause + ")" }
    return text
}
