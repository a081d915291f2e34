#!/usr/bin/env bash
# Completes the man page swift-argument-parser's generate-manual writes: its EXIT STATUS is the generic
# sentence (`.Ex -std`), and it has no ENVIRONMENT, FILES or EXAMPLES. Replaces the one and appends the others,
# from Documentation/vaultctl.1.sections.
#
#   scripts/man-sections.sh PAGE
set -euo pipefail
page=$1
sections="$(dirname "$0")/../Documentation/vaultctl.1.sections"
[ -s "$page" ] || { echo "man-sections: no page at $page" >&2; exit 1; }
grep -q '^\.Sh "EXIT STATUS"$' "$page" || { echo "man-sections: $page has no EXIT STATUS to replace" >&2; exit 1; }
# Everything before the generated EXIT STATUS (always the last section), then ours.
tmp="$page.tmp"
sed '/^\.Sh "EXIT STATUS"$/,$d' "$page" >"$tmp"
cat "$sections" >>"$tmp"
mv "$tmp" "$page"
