#!/usr/bin/env bash
# `make test`'s check of `make install`: installs the debug build under a temporary prefix (DESTDIR staging)
# and checks what a user gets: bin/vaultctl that runs, a man page naming every command that renders, and
# the three shell completions. Fails loudly on anything missing.
set -euo pipefail
cd "$(dirname "$0")/.."
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
make --no-print-directory release CONFIG=debug >/dev/null
make --no-print-directory install CONFIG=debug PREFIX=/opt/vaultctl DESTDIR="$stage" >/dev/null
root="$stage/opt/vaultctl"
fail() { echo "check-install: $*" >&2; exit 1; }
[ -x "$root/bin/vaultctl" ] || fail "no bin/vaultctl"
"$root/bin/vaultctl" --version | grep -q '^[0-9]' || fail "bin/vaultctl --version does not run"
page="$root/share/man/man1/vaultctl.1"
[ -s "$page" ] || fail "no man page"
# Every command has its own entry (`.It Em <name>` in the generated mdoc).
for entry in doctor prefs '"stores, ls"' '"keys, list"' vault init migrate-key rotate-key unlock; do
    grep -qx ".It Em $entry" "$page" || fail "the man page has no entry for $entry"
done
# The sections generate-manual does not write (scripts/man-sections.sh): the real exit codes, every one that
# `vaultctl --help` lists, the environment, the files and examples.
for section in '"EXIT STATUS"' ENVIRONMENT FILES EXAMPLES; do
    grep -qx ".Sh $section" "$page" || fail "the man page has no $section section"
done
grep -qx '.Ex -std' "$page" && fail "the man page's EXIT STATUS is the generic sentence"
for code in $("$root/bin/vaultctl" --help | sed -n 's/^  \([0-9][0-9]*\)  .*/\1/p'); do
    grep -qx ".It $code" "$page" || fail "the man page's EXIT STATUS lacks exit code $code (vaultctl --help has it)"
done
grep -q 'Ev VAULTCTL_KEY_STORE' "$page" || fail "the man page's ENVIRONMENT lacks VAULTCTL_KEY_STORE"
# Rendered by groff or mandoc where one is installed (a minimized system's `man` is a stub that renders nothing).
if command -v groff >/dev/null; then
    rendered=$(groff -mandoc -Tutf8 "$page" 2>/dev/null | sed 's/.\x08//g')   # overstruck bold made plain
    grep -q "migrate-key" <<<"$rendered" || fail "the man page does not render (groff)"
elif command -v mandoc >/dev/null; then
    mandoc -Tlint "$page" >/dev/null 2>&1 || fail "the man page does not render (mandoc -Tlint)"
fi
[ -s "$root/share/bash-completion/completions/vaultctl" ] || fail "no bash completion"
[ -s "$root/share/zsh/site-functions/_vaultctl" ] || fail "no zsh completion"
[ -s "$root/share/fish/vendor_completions.d/vaultctl.fish" ] || fail "no fish completion"
echo "check-install: make install gives bin/vaultctl, its man page and bash, zsh and fish completions"
