// swift-tools-version: 6.1
import PackageDescription

// Every Swift target: Swift 6 language mode (the tools-version default), strict concurrency, and
// `InternalImportsByDefault`, so a C type can never leak into a public declaration.
let swiftSettings: [SwiftSetting] = [
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("ExistentialAny"),
]

let package = Package(
    name: "SecureVault",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "PrefsKV", targets: ["PrefsKV"]),
        .library(name: "SecureVault", targets: ["SecureVault"]),
        .library(name: "PrefsKVMMKV", targets: ["PrefsKVMMKV"]),
        .executable(name: "vaultctl", targets: ["vaultctl"]),
    ],
    // On by default. libsecret, GIO and GLib are not linked either way: the key stores load them the first time
    // they are used (Sources/CSecret), so a process that never uses them never loads them, and one that runs where
    // they are not installed starts, its Secret Service key store answering `unavailable`. Turned off
    // (`.package(url: ..., from: ..., traits: [])`), SecureVault has no Secret Service or Secret portal code at all
    // and those key stores always answer `unavailable` (KeyStores.md, "Building without the Secret Service").
    traits: [
        .trait(
            name: "SecretService",
            description:
                "The Secret Service and Secret portal key stores (libsecret, GIO and GLib, loaded at first use)."),
        .default(enabledTraits: ["SecretService"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    ],
    targets: [
        // libsodium, the one C library linked, found through pkg-config; `make test` installs it
        // (scripts/bootstrap.sh).
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        // libsecret's functions, declared by the package and loaded at the first use of a key store that needs
        // them (CSecret.h): no pkg-config, no development package, nothing linked.
        .target(name: "CSecret"),

        // PrefsKV's C side: CRC32C with the processor's crc32 instruction (chosen at run time), the system calls
        // of the open path without the Glibc overlay's wrappers, the SIGBUS guard of the mappings, and
        // ThreadSanitizer's annotations. It also holds SecureVault's nonce source (prefs_nonce.h): the process's
        // random nonce prefix and counter, from which VaultSealer takes every value's nonce (SecureVault depends on
        // this target for that alone). It lives here, not in SecureVault's C or a target of its own, because like
        // the mapping guard it is process-wide state below every module (one page per process, advised
        // MADV_WIPEONFORK so that a child after fork draws its own prefix) with no cryptography in it: randomness
        // and a counter. It is tested with the system layer (SystemLayerTests' NonceSourceTests, through CForkProbe).
        .target(name: "CPrefsKV"),
        // The kernel key retention service: add_key(2) and keyctl(2), without libkeyutils.
        .target(name: "CKeyring"),

        // The system layer every module shares (`package` access): one `Errno`, the system-call wrappers
        // (`Sys`), the clock, the XDG data directory, the naming rule and the mutex. The only importer of Glibc
        // among the libraries.
        .target(name: "SystemLayer", dependencies: ["CPrefsKV"], swiftSettings: swiftSettings),

        // The storage engine: no crypto, no D-Bus.
        .target(
            name: "PrefsKV",
            dependencies: ["CPrefsKV", "SystemLayer", .product(name: "Logging", package: "swift-log")],
            // Invariant checks that cost time (a scan of every compacted image): on in debug builds, so in the
            // tests; off in release builds.
            swiftSettings: swiftSettings + [.define("PREFSKV_INTERNAL_CHECKS", .when(configuration: .debug))]
        ),
        // Importing MMKV files into a PrefsKV store (`PrefsStore.importMMKV`): MMKV's log, meta file and AES-CFB
        // encryption. A module of its own so that PrefsKV stays free of crypto. It links no library of its own:
        // OpenSSL's libcrypto is loaded (dlopen) at the first encrypted import, and the CRC-32 is its own.
        .target(
            name: "PrefsKVMMKV", dependencies: ["PrefsKV", "SystemLayer"], swiftSettings: swiftSettings),
        // Keys and secrets: libsodium sealing, the Secret Service, session tokens.
        .target(
            name: "SecureVault",
            dependencies: [
                "PrefsKV", "SystemLayer", "CPrefsKV", "CSodium", "CKeyring",
                .target(name: "CSecret", condition: .when(traits: ["SecretService"])),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "vaultctl",
            dependencies: [
                "PrefsKV", "PrefsKVMMKV", "SecureVault", "SystemLayer",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // The UI state of the example client app (theme, sidebar): app policy over `PersistedState`, not library
        // API. Shared by the launch demo, the test helper and the tests; not a product.
        .target(
            name: "ExampleAppState",
            dependencies: ["PrefsKV", .product(name: "Logging", package: "swift-log")],
            path: "Examples/AppState",
            swiftSettings: swiftSettings
        ),
        // The app-launch demo (`make demo`): a client app's launches, each a new process, with timings.
        .executableTarget(
            name: "launch-demo",
            dependencies: [
                "PrefsKV", "SecureVault", "ExampleAppState", .product(name: "Logging", package: "swift-log"),
            ],
            path: "Examples/LaunchDemo",
            swiftSettings: swiftSettings
        ),

        // A helper the tests run as a child process: crash victims, fresh-process probes of the Secret Service.
        .executableTarget(
            name: "vault-test-helper",
            dependencies: [
                "PrefsKV", "SecureVault", "ExampleAppState", "TestSealer", "TestKit", "CForkProbe",
                .product(name: "Logging", package: "swift-log"),
            ],
            path: "Tests/TestHelper",
            swiftSettings: swiftSettings
        ),
        // A second writer of a store's file, in C, for the concurrent-writer tests (ConcurrentWriterTests).
        .executableTarget(name: "prefs-racer", path: "Tests/PrefsRacer"),
        // Shared by the test targets: running child processes, finding build products and scripts.
        .target(
            name: "TestSupport", dependencies: ["SystemLayer", .product(name: "Logging", package: "swift-log")],
            path: "Tests/TestSupport", swiftSettings: swiftSettings),
        // libFuzzer targets (`make fuzz` builds them with -sanitize=fuzzer,address; a normal build just compiles
        // them): the log scanner on arbitrary bytes, and opening arbitrary bytes as a store file.
        .executableTarget(
            name: "FuzzRecordDecoder", dependencies: ["PrefsKV"], path: "Fuzz/FuzzRecordDecoder",
            swiftSettings: swiftSettings),
        .executableTarget(
            name: "FuzzOpen", dependencies: ["PrefsKV", "TestSealer", "TestKit"], path: "Fuzz/FuzzOpen",
            swiftSettings: swiftSettings),
        // ... and a vault file opened and unsealed with a passphrase key store.
        .executableTarget(
            name: "FuzzVaultOpen",
            dependencies: ["SecureVault", "TestKit", .product(name: "Logging", package: "swift-log")],
            path: "Fuzz/FuzzVaultOpen", swiftSettings: swiftSettings),
        // A toy sealer (not cryptography) shared by the PrefsKV tests, the test helper and the fuzz targets.
        .target(name: "TestSealer", dependencies: ["PrefsKV"], path: "Tests/TestSealer", swiftSettings: swiftSettings),
        // A seeded random generator and whole-file helpers, with no test framework, for the same users.
        .target(name: "TestKit", path: "Tests/TestKit", swiftSettings: swiftSettings),
        .testTarget(
            name: "PrefsKVTests",
            dependencies: [
                "PrefsKV", "PrefsKVMMKV", "ExampleAppState", "TestSealer", "TestSupport", "TestKit",
                "vault-test-helper", "prefs-racer",
            ],
            swiftSettings: swiftSettings
        ),
        // fork() for the tests of the nonce source and of the SIGBUS guard (Swift cannot call it).
        .target(name: "CForkProbe", dependencies: ["CPrefsKV"], path: "Tests/CForkProbe"),
        // valgrind's client requests (memcheck's "undefined" marks), for the constant-time check.
        .target(name: "CSecretMarks", path: "Tests/CSecretMarks"),
        // The program scripts/ct-check.sh runs under memcheck: the vault's seal and open with the keys and
        // plaintexts marked secret, failing on any branch that depends on them.
        .executableTarget(
            name: "ct-probe", dependencies: ["SecureVault", "SystemLayer", "CSecretMarks"], path: "Tests/CTProbe",
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SystemLayerTests", dependencies: ["SystemLayer", "CPrefsKV", "CForkProbe"],
            swiftSettings: swiftSettings),
        .testTarget(
            name: "SecureVaultTests",
            dependencies: [
                "SecureVault", "PrefsKV", "ExampleAppState", "CSodium", "TestSupport", "vault-test-helper",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
        // Needs the real Secret Service: runs inside scripts/with-keyring.sh and fails without it.
        .testTarget(
            name: "SecretServiceTests",
            dependencies: ["SecureVault", "TestSupport", "vault-test-helper"],
            swiftSettings: swiftSettings
        ),
        // The built vaultctl is run as a child process; PrefsKV, the tests' sealer and seeded generator are for
        // DamageAgreementTests, which reads the same damaged files through the library and compares the answers.
        .testTarget(
            name: "VaultCtlTests",
            dependencies: [
                "vaultctl", "TestSupport", "vault-test-helper", "PrefsKV", "TestSealer", "TestKit",
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: swiftSettings
        ),
    ]
)
