// swift-tools-version: 6.1
import PackageDescription

// A headless service (a daemon, a container) that keeps its vault's key in a key file or a systemd credential:
// it turns SecureVault's `SecretService` trait off, so that it links no libsecret, GIO or GLib and starts where
// they are not installed. `make test` builds it and runs it (scripts/check-headless.sh).
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
