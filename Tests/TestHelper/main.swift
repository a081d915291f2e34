// vault-test-helper: run by the tests as a child process.
//
//   vault-test-helper <command> [arguments...]
//
// Exit status: 0 success, 2 unknown command or bad arguments, 1 a command failed.
let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case "prefs-crash-writer": PrefsCommands.crashWriter(Array(arguments.dropFirst()))
case "prefs-mp-writer": PrefsCommands.multiProcessWriter(Array(arguments.dropFirst()))
case "prefs-set": PrefsCommands.set(Array(arguments.dropFirst()))
case "prefs-open-as": PrefsCommands.openAs(Array(arguments.dropFirst()))
case "prefs-hold": PrefsCommands.hold(Array(arguments.dropFirst()))
case "prefs-read-loop": PrefsCommands.readLoop(Array(arguments.dropFirst()))
default:
    PrefsCommands.fail("unknown command \(arguments.first ?? "(none)")", status: 2)
}
