// vault-test-helper: a child process for tests. Each command is a fresh process, so it exercises cold paths
// (a new bus connection, a new mapping) and can be killed, stopped or run in another D-Bus session.
//
//   vault-test-helper <command> [arguments...]
import Glibc

let arguments = Array(CommandLine.arguments.dropFirst())
guard let command = arguments.first else {
    writeToStandardError("usage: vault-test-helper <command> [arguments...]\n")
    exit(64)
}
let rest = Array(arguments.dropFirst())

switch command {
case "secret-store", "secret-lookup", "secret-clear", "secret-state", "secret-lock", "secret-probe":
    exit(SecretCommands.run(command, rest))
default:
    writeToStandardError("vault-test-helper: unknown command \(command)\n")
    exit(64)
}
