// swift-tools-version: 6.1
import PackageDescription

// The benchmark harness: PrefsKV and SecureVault against SQLite, LMDB and libsecret, side by side, in one run.
// Its own package so that the library has no benchmark dependency; it depends on the root by path.
//
//   make bench          release build, full run (a few minutes), inside a private keyring session
//   make bench-quick    the same in quick mode (under a minute)
//
// System libraries come from Debian (libsqlite3-dev, liblmdb-dev, libsecret-1-dev) through pkg-config.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "Benchmarks",
    platforms: [.macOS(.v15)],
    dependencies: [
        .package(name: "SecureVault", path: "..")
    ],
    targets: [
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CLMDB", pkgConfig: "lmdb", providers: [.apt(["liblmdb-dev"])]),
        .systemLibrary(name: "CLibSecret", pkgConfig: "libsecret-1", providers: [.apt(["libsecret-1-dev"])]),
        // Counts malloc calls of the benchmark process (glibc's allocator underneath, unchanged).
        .target(name: "CMallocCounter"),

        // Workloads, engines, statistics and the report; the executables below are thin.
        .target(
            name: "BenchmarkKit",
            dependencies: [
                "CSQLite", "CLMDB", "CMallocCounter",
                .product(name: "PrefsKV", package: "SecureVault"),
                .product(name: "SecureVault", package: "SecureVault"),
            ],
            swiftSettings: swiftSettings
        ),
        // The orchestrator and its own worker processes (`prefskv-bench worker ...`).
        .executableTarget(name: "prefskv-bench", dependencies: ["BenchmarkKit"], swiftSettings: swiftSettings),
        // A fresh process that reads the vault's session token: what an app does at launch.
        .executableTarget(
            name: "vault-token-read",
            dependencies: [.product(name: "SecureVault", package: "SecureVault")],
            swiftSettings: swiftSettings
        ),
        // A fresh process that does one bare libsecret lookup (C, nothing else): the floor for the above.
        .executableTarget(name: "secret-lookup", dependencies: ["CLibSecret"]),

        // Runs the harness in quick mode and checks that every workload produced figures (not the timings).
        .testTarget(
            name: "HarnessTests",
            dependencies: ["BenchmarkKit", "prefskv-bench", "vault-token-read", "secret-lookup"],
            swiftSettings: swiftSettings
        ),
    ]
)
