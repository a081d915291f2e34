import Foundation
import TestSupport
import Testing

/// What a command leaves on disk when it names a path by mistake or fails: a mistyped `--dir` is not created
/// as a tree, a first `vault set` that fails leaves no directory, a read of a file that is no store creates no
/// lock file, and a wiped vault leaves no lock file.
@Suite struct NothingLeftBehindTests {
    static var vaultctl: String { BuildProducts.executable("vaultctl") }

    static func scratch() throws -> String {
        let path = "/dev/shm/left-behind-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        return path
    }

    static func run(_ arguments: [String], input: String = "", bus: Bool = false) throws -> ChildResult {
        try ChildProcess.run(
            vaultctl, arguments, environment: bus ? [:] : ["DBUS_SESSION_BUS_ADDRESS": nil],
            input: Data(input.utf8))
    }

    static func tree(_ path: String) -> [String] {
        ((FileManager.default.subpaths(atPath: path)) ?? []).sorted()
    }

    @Test func aMistypedDirIsNotCreatedButANewLastLevelIs() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let typo = try Self.run(["--dir", root + "/srv/ap/prefs", "prefs", "set", "ui", "theme", "dark"])
        #expect(typo.status == 66, "\(typo)")
        #expect(typo.standardError.contains("neither it nor its parent \(root)/srv/ap exists"), "\(typo)")
        let vaultTypo = try Self.run(
            ["--dir", root + "/srv/ap/vault", "vault", "set", "--service", "app", "--key-store", "keyring:user", "s"],
            input: "tok")
        #expect(vaultTypo.status == 66, "\(vaultTypo)")
        #expect(Self.tree(root).isEmpty, "nothing was created: \(Self.tree(root))")
        let created = try Self.run(["--dir", root + "/prefs", "prefs", "set", "ui", "theme", "dark"])
        #expect(created.status == 0, "\(created)")
        #expect(Self.tree(root) == ["prefs", "prefs/ui.prefs", "prefs/ui.prefs.lock"])
    }

    @Test func aFirstVaultSetThatFailsLeavesNoDirectory() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let failed = try Self.run(["--dir", root + "/vault", "vault", "set", "--service", "app", "s"], input: "tok")
        #expect(failed.status == 69, "no session bus: \(failed)")
        #expect(Self.tree(root).isEmpty, "\(Self.tree(root))")
    }

    /// An adoption takes the vault's lock, which makes the directory and the lock file: one that fails before
    /// the vault has a file removes them, as a first write does (before, both were left).
    @Test func aFailedAdoptionIntoANewVaultLeavesNoDirectory() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let adopt = ["--dir", root + "/vault", "vault", "adopt", "--service", "app", "--as", "token"]
        let noBus = try Self.run(adopt + ["--attribute", "service=nothing-\(UUID().uuidString)"])
        #expect(noBus.status == 69, "no session bus: \(noBus)")
        #expect(Self.tree(root).isEmpty, "\(Self.tree(root))")
        if ProcessInfo.processInfo.environment["VAULT_TEST_KEYRING"] != nil {
            // The keyring answers, and nothing matches.
            let none = try Self.run(adopt + ["--attribute", "service=nothing-\(UUID().uuidString)"], bus: true)
            #expect(none.status == 66, "no item matches: \(none)")
            #expect(Self.tree(root).isEmpty, "\(Self.tree(root))")
        }
    }

    @Test func readingAFileThatIsNoStoreCreatesNothing() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = FileManager.default.createFile(
            atPath: root + "/junk.prefs", contents: Data("junk".utf8), attributes: [.posixPermissions: 0o600])
        chmod(root, 0o700)
        for command in [["get", "junk", "theme"], ["list", "junk"], ["export", "junk"]] {
            let read = try Self.run(["--dir", root, "prefs"] + command)
            #expect(read.status == 65, "\(command): \(read)")
        }
        #expect(Self.tree(root) == ["junk.prefs"], "\(Self.tree(root))")
    }

    @Test func aWipedVaultLeavesNoLockFile() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let key = root + "/vault.key"
        let store = ["--key-store", "key-file:\(key)"]
        #expect(try Self.run(["--dir", root + "/vault", "vault", "init", "--service", "app"] + store).status == 0)
        #expect(try Self.run(["--dir", root + "/vault", "vault", "set", "--service", "app", "s"] + store, input: "t").status == 0)
        let wipe = try Self.run(["--dir", root + "/vault", "vault", "wipe", "--service", "app", "--yes"] + store)
        #expect(wipe.status == 0, "\(wipe)")
        #expect(Self.tree(root) == ["vault", "vault.key"], "\(Self.tree(root))")
    }
}

extension NothingLeftBehindTests {
    /// Runs the bash `script` with `$V` the vaultctl under test, `$R` the scratch directory `root`, and no session bus
    /// (so that every first write fails for want of a key store).
    private static func withoutAKeyStore(in root: String, _ script: String) throws -> ChildResult {
        try ChildProcess.run(
            "/bin/bash", ["-c", script], environment: ["V": vaultctl, "R": root, "DBUS_SESSION_BUS_ADDRESS": nil])
    }

    /// Two processes making the same vault's first write at once, both failing (no session bus): each removes
    /// what it made only while it holds the vault lock, so neither fails for the other's cleanup (a lock file or
    /// directory removed under it) and nothing is left; twenty rounds.
    @Test func twoFirstWritesThatFailAtOnceLeaveNothingAndFailOnlyForTheirOwnReason() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let result = try Self.withoutAKeyStore(
            in: root,
            """
            for r in $(seq 1 20); do
              "$V" --dir "$R/vault" vault set --service app s <<< tok > /dev/null 2> "$R/a.err" & a=$!
              "$V" --dir "$R/vault" vault set --service app s <<< tok > /dev/null 2> "$R/b.err" & b=$!
              wait $a; ra=$?; wait $b; rb=$?
              echo "$ra $rb $(cut -d: -f2 "$R/a.err" | head -1)$(cut -d: -f2 "$R/b.err" | head -1) $(ls "$R" | grep -v err | tr '\\n' ' ')"
              rm -f "$R"/*.err
            done
            """)
        #expect(result.lines.count == 20, "\(result)")
        for line in result.lines {
            #expect(line == "69 69  unavailable unavailable ", "each fails for want of a key store, and nothing is left: \(line)")
        }
    }

    /// Six first writes of one vault at once, all failing, and two reads, 250 times: a waiter could make a new lock
    /// file between the failed write's removal of its lock file and of its directory, and then, not having made the
    /// directory, leave both behind (about one round in a hundred before the directory's own lock; none in 1,000
    /// after); a read that waited on the lock for a failing write's journal must not leave them either.
    @Test func manyFirstWritesThatFailAtOnceLeaveNothing() throws {
        let root = try Self.scratch()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let result = try Self.withoutAKeyStore(
            in: root,
            """
            left=0
            for r in $(seq 1 250); do
              for p in 1 2 3 4 5 6; do
                ( "$V" --dir "$R/vault" vault set --service app s <<< tok > /dev/null 2> "$R/set$p.err"
                  s=$?; [ $s = 69 ] || echo "round $r: set exited $s: $(head -c 400 "$R/set$p.err")" >> "$R/odd" ) &
              done
              for p in 1 2; do
                ( "$V" --dir "$R/vault" vault get --service app s > /dev/null 2> "$R/get$p.err"
                  s=$?; [ $s = 66 ] || echo "round $r: get exited $s: $(head -c 400 "$R/get$p.err")" >> "$R/odd" ) &
              done
              wait
              if [ -e "$R/vault" ]; then left=$((left+1)); rm -rf "$R/vault"; fi
            done
            echo "left $left"
            cat "$R/odd" 2> /dev/null
            """)
        #expect(result.lines.first == "left 0", "rounds that left the vault's directory behind: \(result)")
        #expect(
            result.lines.count == 1,
            "every write fails 69 (no key store), every read 66 (no vault); the others, with their messages: \(result)")
    }
}
