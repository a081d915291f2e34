import Foundation
import Testing
import TestSupport

/// A machine where libsecret cannot be loaded (issue 39: SecureVault loads it at the first use of a key store that
/// needs it, Sources/CSecret, and links it nowhere). Made for real: vaultctl runs in a bwrap mount namespace whose
/// libsecret-1.so.0 is /dev/null, inside a private session whose gnome-keyring is unlocked and answering, so that
/// only the library is missing.
@Suite struct WithoutLibsecretTests {
    /// vaultctl starts (a linked libsecret would stop the process at the dynamic linker, exit 127), its `prefs`
    /// commands and a key-file vault work, the Secret Service answers `unavailable` (69) naming the library, and
    /// doctor says so; the same commands with the library in place use the keyring.
    @Test func aProcessWithoutLibsecretStartsAndTellsItsKeyStoreFromTheOthers() throws {
        let result = try KeyringSession.scenario(
            script: #"""
                L=$(realpath "$(ldconfig -p | awk '/libsecret-1\.so\.0 /{ print $NF; exit }')")
                echo "library $L"
                NOLIB() { bwrap --dev-bind / / --ro-bind /dev/null "$L" "$@"; }
                D=$(mktemp -d)
                NOLIB "$VAULTCTL" prefs --dir "$D" set ui theme dark; echo "prefs set $?"
                NOLIB "$VAULTCTL" prefs --dir "$D" get ui theme; echo "prefs get $?"
                printf 't1' | NOLIB "$VAULTCTL" --dir "$D" vault set --service app session; echo "secret-service set $?"
                NOLIB "$VAULTCTL" --json doctor >"$D/doctor.json"; echo "doctor $?"; tr -d '\n' <"$D/doctor.json"; echo
                NOLIB "$VAULTCTL" --dir "$D" vault init --key-store key-file:"$D/k.key" --service kf; echo "init $?"
                printf 't2' | NOLIB "$VAULTCTL" --dir "$D" vault set --key-store key-file:"$D/k.key" --service kf \
                    session
                echo "key-file set $?"
                NOLIB "$VAULTCTL" --dir "$D" vault get --reveal --key-store key-file:"$D/k.key" --service kf session
                echo; echo "key-file get $?"
                printf 't1' | "$VAULTCTL" --dir "$D" vault set --service app session; echo "with the library set $?"
                "$VAULTCTL" --dir "$D" vault get --reveal --service app session; echo; echo "with the library get $?"
                """#)
        #expect(result.lines.first?.hasPrefix("library /") == true, "\(result)")
        #expect(result.lines.contains("prefs set 0") && result.lines.contains("dark"), "\(result)")
        #expect(result.lines.contains("prefs get 0"), "\(result)")
        #expect(result.lines.contains("secret-service set 69"), "\(result)")
        #expect(result.standardError.contains("libsecret could not be loaded ("), "\(result)")
        #expect(result.standardError.contains("install it (libsecret-1-0 on Debian and Ubuntu)"), "\(result)")
        #expect(result.lines.contains("doctor 69"), "\(result)")
        let doctor = result.lines.first { $0.hasPrefix("{") } ?? ""
        #expect(doctor.contains(#""kind" : "notLoaded""#), "\(doctor)")
        #expect(doctor.contains(#""libsecret" : "not loaded: "#), "\(doctor)")
        #expect(doctor.contains(#""reachable" : null"#), "the bus was asked: \(doctor)")
        #expect(result.lines.contains("init 0") && result.lines.contains("key-file set 0"), "\(result)")
        #expect(result.lines.contains("t2") && result.lines.contains("key-file get 0"), "\(result)")
        #expect(result.lines.contains("with the library set 0"), "\(result)")
        #expect(result.lines.contains("t1") && result.lines.contains("with the library get 0"), "\(result)")
    }

    /// The Secret portal inside a Flatpak sandbox (scripts/with-portal.sh) where libsecret cannot be loaded: the
    /// sandbox's view of the file system is made from a mount namespace whose libsecret-1.so.0 is /dev/null. The
    /// portal key store answers `unavailable` naming the library, and leaves no vault; with the library, the same
    /// set and get work.
    @Test func theSecretPortalWithoutLibsecretSaysSo() throws {
        let result = try KeyringSession.scenario(
            .portal,
            script: #"""
                L=$(realpath "$(ldconfig -p | awk '/libsecret-1\.so\.0 /{ print $NF; exit }')")
                D="$HOME/vault"; mkdir -m 700 "$D"
                printf 't1' | bwrap --dev-bind / / --ro-bind /dev/null "$L" bash -c 'SANDBOX "$@"' _ org.example.Notes \
                    "$VAULTCTL" --dir "$D" vault set --service notes session
                echo "without the library $?"
                echo "files: $(ls "$D" | grep -v '\.lock$' | tr '\n' ' ')"
                printf 't2' | SANDBOX org.example.Notes "$VAULTCTL" --dir "$D" vault set --service notes session
                echo "with the library $?"
                SANDBOX org.example.Notes "$VAULTCTL" --dir "$D" vault get --reveal --service notes session
                echo; echo "get $?"
                """#)
        #expect(result.lines.contains("without the library 69"), "\(result)")
        #expect(result.standardError.contains("libsecret could not be loaded ("), "\(result)")
        // Nothing but the vault's lock file (which any failed first write leaves in a directory that exists).
        #expect(result.lines.contains("files: "), "a refused portal set left a vault or key file: \(result)")
        #expect(result.lines.contains("with the library 0"), "\(result)")
        #expect(result.lines.contains("t2") && result.lines.contains("get 0"), "\(result)")
    }
}
