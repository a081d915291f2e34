// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "ClientApp",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SecureVault", path: "../..")   // or .package(url: "<this repository>", from: "0.1.0")
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
