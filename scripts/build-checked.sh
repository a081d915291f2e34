#!/usr/bin/env bash
# Runs a build command and fails if the compiler warned about our code (warnings are errors here).
# SwiftPM's own note about libsecret's `-pthread` pkg-config flag (the benchmark package's bare lookup) is expected and ignored, and so is glibc's link-time
# note on `mktemp` in the toolchain's static Foundation (a `--static-swift-stdlib` build: `make release`).
set -uo pipefail
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
[ "$status" -eq 0 ] || exit "$status"
# The warnings are collected whole before they are tested: a `| grep -q` under pipefail fails, when it stops at the first
# line while the commands before it still write, and would then pass warnings as none.
warnings=$(grep -E '(^|: )warning: ' "$log" | grep -v -e 'prohibited flag(s): -pthread' -e "the use of \`mktemp' is dangerous")
if [ -n "$warnings" ]; then
    echo "build-checked: the build has warnings (listed above); they are errors here" >&2
    exit 1
fi
