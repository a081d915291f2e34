// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "ClientApp",
    dependencies: [
        .package(name: "SecureVault", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "ClientApp",
            dependencies: [
                "ClientAppCore",
                .product(name: "PrefsKV", package: "SecureVault"),
                .product(name: "SecureVault", package: "SecureVault"),
            ]),
        // The app's logic around its stores, and its own tests: the way an app tests code that uses the
        // libraries (temporary stores and vaults: no files left, no keyring, no D-Bus).
        .target(
            name: "ClientAppCore",
            dependencies: [
                .product(name: "PrefsKV", package: "SecureVault"),
                .product(name: "SecureVault", package: "SecureVault"),
            ]),
        .testTarget(name: "ClientAppTests", dependencies: ["ClientAppCore"]),
    ]
)
