#!/usr/bin/env bash
# Checks what SecureVault's `SecretService` trait promises when an app turns it off (KeyStores.md, "Building without
# the Secret Service"), the way an app does it: Examples/HeadlessService depends on the package with `traits: []`.
#   1. its executable loads no libsecret, GIO, GObject or GLib in its whole run below (LD_DEBUG=libs, the dynamic
#      linker's account of every library it loads, dlopen included); vaultctl, built with the default traits by
#      `make test` before this, must load libsecret when it uses the Secret Service, or this check could not fail.
#      No build links them (ldd shows none for either): Sources/CSecret loads libsecret at its first use;
#   2. run inside a private session whose gnome-keyring is unlocked and answering (so that a build that kept the
#      Secret Service would succeed where it must refuse): a key-file vault keeps and rotates its session token;
#      the Secret Service and the Secret portal answer `unavailable` at once, naming the trait, leaving nothing;
#      and a vault that vaultctl (with the trait) made there with the Secret Service reads unavailable, its status
#      naming the trait, its file left byte for byte (the service checks each and exits 1 on a failure);
#   3. vaultctl built without the trait (.build-headless): `doctor --json` exits 69, names the trait and asks no
#      bus (`"reachable" : null`), and a Secret Service vault's `vault set` exits 69 naming it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}
package="$root/Examples/HeadlessService"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
build() { # build LABEL ARGS...: a checked build, its output shown only when it fails
    local label=$1
    shift
    if ! "$root/scripts/build-checked.sh" "$swift" build "$@" >"$work/build.log" 2>&1; then
        cat "$work/build.log" >&2
        echo "check-headless: the build of $label failed (above)" >&2
        exit 1
    fi
}
fail() {
    echo "check-headless: $*" >&2
    exit 1
}
build Examples/HeadlessService --package-path "$package"
bin="$("$swift" build --package-path "$package" --show-bin-path)/HeadlessService"
client="$("$swift" build --package-path "$root" --show-bin-path)/vaultctl"
pattern='lib(secret-1|gio-2\.0|gobject-2\.0|glib-2\.0)\.so'
# ldd's output is read whole before it is searched: `ldd | grep -q` under pipefail fails when grep stops at the first
# match while ldd still writes (SIGPIPE), as it did on a loaded machine (stop 58).
for executable in "$client" "$bin"; do
    libraries=$(ldd "$executable")
    if grep -E "$pattern" <<<"$libraries"; then fail "$executable links the libraries above"; fi
done

# shellcheck disable=SC2016 # expanded by the inner shell
"$root/scripts/with-keyring.sh" bash -c '
    set -eu
    printf "token-0" | LD_DEBUG=libs "$1" vault set --dir "$2" --service made-with-the-trait --expires-in 3600 \
        session 2>"$3/client.libs"
    sha256sum "$2/made-with-the-trait.prefs" >"$3/before"
    LD_DEBUG=libs "$4" "$3/service" "$2" 2>"$3/stderr"
    sha256sum "$2/made-with-the-trait.prefs" >"$3/after"
' _ "$client" "$work/made" "$work" "$bin" || {
    cat "$work/stderr" >&2 2>/dev/null || true
    fail "Examples/HeadlessService failed (above)"
}
cmp -s "$work/before" "$work/after" || fail "the vault made with the Secret Service changed when read without it"
grep -q "find library=libsecret-1.so.0" "$work/client.libs" ||
    fail "$client (default traits) loaded no libsecret to use the Secret Service: this check cannot tell"
if grep -E "find library=$pattern" "$work/stderr"; then
    fail "$bin, built without the SecretService trait, loaded the libraries above"
fi

build "vaultctl without the SecretService trait" --disable-default-traits --scratch-path "$root/.build-headless" \
    --product vaultctl
headless="$("$swift" build --disable-default-traits --scratch-path "$root/.build-headless" --show-bin-path)/vaultctl"
libraries=$(ldd "$headless")
if grep -E "$pattern" <<<"$libraries"; then fail "$headless links the libraries above"; fi
status=0
"$headless" --json doctor >"$work/doctor.json" || status=$?
[ "$status" -eq 69 ] || fail "vaultctl doctor without the trait exited $status, not 69"
grep -q '"kind" : "notBuiltIn"' "$work/doctor.json" || fail "doctor --json names no notBuiltIn failure: $(cat "$work/doctor.json")"
grep -q '"reachable" : null' "$work/doctor.json" || fail "doctor --json says the bus answered: $(cat "$work/doctor.json")"
status=0
printf 'x' | "$headless" vault set --dir "$work/ss" --service app session 2>"$work/set.err" || status=$?
[ "$status" -eq 69 ] || fail "vault set with the Secret Service exited $status, not 69"
grep -q "SecretService trait" "$work/set.err" || fail "vault set did not name the trait: $(cat "$work/set.err")"
echo "check-headless: built without the SecretService trait, SecureVault loads no libsecret, GIO or GLib; every check passed"
