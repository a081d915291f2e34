#!/usr/bin/env bash
# Install what the package needs on a Debian/Ubuntu machine. A no-op when everything is present.
#
#   scripts/bootstrap.sh          # install missing packages (uses sudo when not root)
#   scripts/bootstrap.sh --check  # only report what is missing; exit 1 if anything is
set -euo pipefail

# libsqlite3-dev and liblmdb-dev: the benchmark package (Benchmarks/), whose harness test `make test` runs.
# libsecret-1-dev: libsecret's and GLib's headers, against which CSecretDeclarationTests checks Sources/CSecret's
# declarations, and the benchmark's bare libsecret lookup (SecureVault itself loads libsecret at run time).
# keepassxc: the second Secret Service provider of the provider matrix (scripts/with-keepassxc.sh), run headless.
# binutils: objcopy, for copies without debug information (the allocation test's helper, scripts/ct-check.sh's probe).
# systemd: systemd-creds, the systemd credential key store (it works without systemd running as PID 1).
# keyutils: keyctl, the bench's baseline of a kernel keyring read.
# libssl-dev: OpenSSL's libcrypto, which the MMKV importer loads at run time to decrypt (PrefsKVMMKV's LibCrypto.swift)
# and the import tests encrypt with (the -dev package's name is the same on every release; the library's is not).
# bubblewrap, xdg-dbus-proxy, xdg-desktop-portal: a real Flatpak-style sandbox and the Secret portal for the
# secret-portal key store's tests (scripts/with-portal.sh, scripts/sandbox.sh).
# valgrind: callgrind for scripts/bench-check.sh; memcheck and its headers (memcheck.h) for scripts/ct-check.sh.
packages=(libsodium-dev libsecret-1-dev gnome-keyring dbus dbus-x11 libsecret-tools pkg-config valgrind binutils keepassxc
    libsqlite3-dev liblmdb-dev systemd keyutils libssl-dev bubblewrap xdg-dbus-proxy xdg-desktop-portal)

missing=()
for p in "${packages[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$p")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "${1:-}" = "--check" ]; then
    echo "missing Debian packages: ${missing[*]}" >&2
    exit 1
fi

if ! command -v apt-get >/dev/null 2>&1; then
    echo "bootstrap: apt-get not found; install these packages by hand: ${missing[*]}" >&2
    exit 1
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "bootstrap: not root and no sudo; install: ${missing[*]}" >&2; exit 1; }
    sudo=(sudo)
fi

echo "bootstrap: installing ${missing[*]}" >&2
# apt can be busy (another apt run, unattended upgrades): wait for its lock rather than fail.
apt_opts=(-o DPkg::Lock::Timeout=300 -q)
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get "${apt_opts[@]}" update >/dev/null
"${sudo[@]}" apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}" >/dev/null
