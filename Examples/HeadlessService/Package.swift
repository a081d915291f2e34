// swift-tools-version: 6.1
import PackageDescription

// A headless service (a daemon, a container) that keeps its vault's key in a key file or a systemd credential:
// it turns SecureVault's `SecretService` trait off, so that its build has no D-Bus code at all and never loads
// libsecret, GIO or GLib (no build links them: the default one loads them at the first keyring call). `make test`
// builds it and runs it, checking that it loads none of them (scripts/check-headless.sh).
let package = Package(
    name: "HeadlessService",
    dependencies: [
        .package(name: "SecureVault", path: "../..", traits: [])
    ],
    targets: [
        .executableTarget(
            name: "HeadlessService",
            dependencies: [.product(name: "SecureVault", package: "SecureVault")])
    ]
)
