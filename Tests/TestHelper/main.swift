// vault-test-helper: a child process for tests. Each command is a fresh process, so it exercises cold paths
// (a new bus connection, a new mapping) and can be killed, stopped or run in another D-Bus session.
//
//   vault-test-helper <command> [arguments...]
//
// Exit status: 0 success, 1 a command failed, 2 or 64 unknown command or bad arguments.
import CForkProbe
import Glibc

let arguments = Array(CommandLine.arguments.dropFirst())
let rest = Array(arguments.dropFirst())
switch arguments.first {
case "prefs-crash-writer": PrefsCommands.crashWriter(rest)
case "prefs-torture-writer": TortureCommands.writer(rest)
case "prefs-permission-faults": TortureCommands.permissionFaults(rest)
case "prefs-mp-writer": PrefsCommands.multiProcessWriter(rest)
case "prefs-update-state": UpdateCommands.state(rest)
case "prefs-update-key": UpdateCommands.key(rest)
case "prefs-set": PrefsCommands.set(rest)
case "prefs-get": PrefsCommands.get(rest)
case "prefs-default-directory": PrefsCommands.defaultDirectory(rest)
case "prefs-open-as": PrefsCommands.openAs(rest)
case "prefs-hold": PrefsCommands.hold(rest)
case "prefs-hold-writer": PrefsCommands.holdWriter(rest)
case "prefs-temporary": PrefsCommands.temporary(rest)
case "prefs-read-loop": PrefsCommands.readLoop(rest)
case "prefs-changed-reader": TortureCommands.changedReader(rest)
case "prefs-blob-reader": TortureCommands.blobReader(rest)
case "secret-store", "secret-lookup", "secret-clear", "secret-state", "secret-lock", "secret-probe":
    exit(SecretCommands.run(arguments[0], rest))
case "vault-set", "vault-get", "vault-token-set", "vault-token", "vault-read-lock-read", "vault-identity",
    "vault-rotate", "vault-wipe", "vault-status", "vault-crash-writer", "vault-dump", "vault-format",
    "vault-make-legacy", "vault-contract", "vault-key-hash", "vault-rotate-report",
    "vault-wipe-report", "keyring-key", "keyring-revoke", "keyring-expire",
    "keyring-cache-key":
    exit(VaultCommands.run(arguments[0], rest))
case "keyring-fill": exit(VaultCommands.fillKeyring(rest))
case "portal-secret": exit(VaultCommands.portalSecret())
case "portal-requests": exit(VaultCommands.portalRequests(rest))
case "keyring-session": exit(VaultCommands.keyringSession(rest))
case "launch-route", "launch-sign-in", "launch-logout", "prefs-damage", "file-flip":
    exit(LaunchCommands.run(arguments[0], rest))
case "guard-probe":
    // A fresh process, whose SIGBUS guard is not installed yet: fork_probe_guard installs it over the disposition
    // its child sets first.
    print(fork_probe_guard(Int32(rest.first ?? "") ?? 0))
    exit(0)
default:
    PrefsCommands.fail("unknown command \(arguments.first ?? "(none)")", status: 2)
}
