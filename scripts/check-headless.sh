#!/usr/bin/env bash
# Checks what SecureVault's `SecretService` trait promises when an app turns it off (KeyStores.md, "Building without
# the Secret Service"), the way an app does it: Examples/HeadlessService depends on the package with `traits: []`.
#   1. its executable loads no libsecret, GIO, GObject or GLib (ldd; vaultctl, built with the default traits by
#      `make test` before this, must show libsecret, or this check could not fail);
#   2. it runs outside any D-Bus session: a key-file vault keeps and rotates its session token, and the Secret
#      Service and the Secret portal answer `unavailable` at once, naming the trait, leaving nothing behind (the
#      service checks each and exits 1 on a failure);
#   3. a vault made with the Secret Service (by vaultctl, in a private keyring session) reads `unavailable` there,
#      not absent, and its file is left byte for byte.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
swift=${SWIFT:-swift}
package="$root/Examples/HeadlessService"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! "$root/scripts/build-checked.sh" "$swift" build --package-path "$package" >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    echo "check-headless: the build of Examples/HeadlessService failed (above)" >&2
    exit 1
fi
bin="$("$swift" build --package-path "$package" --show-bin-path)/HeadlessService"
client="$("$swift" build --package-path "$root" --show-bin-path)/vaultctl"
pattern='lib(secret-1|gio-2\.0|gobject-2\.0|glib-2\.0)\.so'
if ! ldd "$client" | grep -Eq "$pattern"; then
    echo "check-headless: $client (default traits) shows no libsecret in ldd: this check cannot tell" >&2
    exit 1
fi
if ldd "$bin" | grep -E "$pattern"; then
    echo "check-headless: $bin, built without the SecretService trait, loads the libraries above" >&2
    exit 1
fi
made="$work/made"
printf 'token-0' | "$root/scripts/with-keyring.sh" "$client" vault set --dir "$made" --service made-with-the-trait session
before=$(sha256sum "$made/made-with-the-trait.prefs")
if ! env -u DBUS_SESSION_BUS_ADDRESS "$bin" "$work/service" "$made" 2>"$work/stderr"; then
    cat "$work/stderr" >&2
    echo "check-headless: Examples/HeadlessService failed (above)" >&2
    exit 1
fi
if [ "$(sha256sum "$made/made-with-the-trait.prefs")" != "$before" ]; then
    echo "check-headless: the vault made with the Secret Service changed when read without it" >&2
    exit 1
fi
echo "check-headless: Examples/HeadlessService loads no libsecret, GIO or GLib, and its checks passed"
