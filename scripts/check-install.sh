#!/usr/bin/env bash
# `make test`'s check of `make install`: installs the debug build under a temporary prefix (DESTDIR staging)
# and checks what a user gets: bin/vaultctl that runs, a man page naming every command that renders, and
# the three shell completions. Fails loudly on anything missing.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make --no-print-directory install CONFIG=debug PREFIX=/opt/vaultctl DESTDIR="$stage" >/dev/null
root="$stage/opt/vaultctl"
fail() { echo "check-install: $*" >&2; exit 1; }
[ -x "$root/bin/vaultctl" ] || fail "no bin/vaultctl"
"$root/bin/vaultctl" --version | grep -q '^[0-9]' || fail "bin/vaultctl --version does not run"
page="$root/share/man/man1/vaultctl.1"
[ -s "$page" ] || fail "no man page"
for command in "prefs stores" "prefs keys" "vault migrate-key" "vault init" "doctor"; do
    grep -q "${command#* }" "$page" || fail "the man page does not name $command"
done
if command -v man >/dev/null; then
    MANWIDTH=100 man -l "$page" 2>/dev/null | grep -q "vaultctl" || fail "the man page does not render"
fi
[ -s "$root/share/bash-completion/completions/vaultctl" ] || fail "no bash completion"
[ -s "$root/share/zsh/site-functions/_vaultctl" ] || fail "no zsh completion"
[ -s "$root/share/fish/vendor_completions.d/vaultctl.fish" ] || fail "no fish completion"
echo "check-install: make install gives bin/vaultctl, its man page and bash, zsh and fish completions"
