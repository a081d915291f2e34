// launch-demo: a client app's launches, end to end, each one a new process.
//
//   launch-demo                    plays the whole story and prints the report (run it with `make demo`:
//                                  it locks and unlocks the keyring of the private session that starts)
//   launch-demo launch  --dir DIR  one launch of the app: hydrate the UI state, read the token, route
//   launch-demo sign-in --dir DIR  a launch, then sign-in: save a token, choose the dark theme, expand the
//                                  sidebar, keep an e-mail address in an encrypted store
//   launch-demo logout  --dir DIR  a launch, then logout
//   ... --key-store STORE          (any of them) the vault's key store, as vaultctl spells it: a server's
//                                  launches use systemd-creds:NAME
//
// The sub-commands are the app; each prints one JSON report on stdout, with the times it measured.
import Foundation

let arguments = Array(CommandLine.arguments.dropFirst())
switch arguments.first {
case nil:
    exit(Demo.run())
case "launch", "sign-in", "logout":
    exit(AppLaunch.run(arguments[0], Array(arguments.dropFirst())))
default:
    Console.error(
        """
        usage: launch-demo                                  play the app's launches (inside `make demo`)
               launch-demo launch|sign-in|logout --dir DIR [--key-store STORE]
                                                            one launch of the app, as a JSON report
        """)
    exit(arguments.first == "--help" || arguments.first == "-h" ? 0 : 64)
}
