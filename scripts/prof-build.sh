#!/usr/bin/env bash
# Builds the benchmark harness for valgrind (release, no debug information: valgrind 3.19 cannot read the DWARF 5
# of a normal build) in Benchmarks/.build-prof, and prints the path of its prefskv-bench. The build's output is
# shown only when it fails. Used by scripts/audit-first-open.sh and scripts/bench-check.sh.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root/Benchmarks"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$root/scripts/build-checked.sh" swift build -c release --scratch-path .build-prof -Xswiftc -gnone -Xcc -g0 \
    >"$log" 2>&1; then
    cat "$log" >&2
    echo "prof-build: the build of the benchmark harness for valgrind failed" >&2
    exit 1
fi
echo "$root/Benchmarks/.build-prof/release/prefskv-bench"
