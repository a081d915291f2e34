// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "ClientApp",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SecureVault", path: "../..")
    ],
    targets: [
        .executableTarget(
            name: "ClientApp",
            dependencies: [
                .product(name: "PrefsKV", package: "SecureVault"),
                .product(name: "SecureVault", package: "SecureVault"),
            ])
    ]
)
