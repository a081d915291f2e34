#!/usr/bin/env bash
# The constant-time check of the vault's seal and open (the ctgrind technique; Documentation/SecureVault.md,
# "Constant time"): runs ct-probe (Tests/CTProbe) under valgrind's memcheck with the keys and plaintexts marked
# undefined, and fails on any memcheck error: "Conditional jump or move depends on uninitialised value(s)" is a
# branch on secret data, "Use of uninitialised value" a memory address computed from it. About 20 s.
#
#   scripts/ct-check.sh    build ct-probe (debug) if needed, run it under memcheck; exit 1 on any finding
#                          (CT_CHECK_KEEP=FILE keeps memcheck's whole log there)
#
# Needs valgrind, with its headers for the build (Debian's valgrind package; scripts/bootstrap.sh installs it), and
# objcopy (binutils): valgrind 3.19 cannot read the DWARF 5 of a debug build, so it runs a copy without it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
swift=${SWIFT:-swift}
work=$(mktemp -d)
trap '[ -n "${CT_CHECK_KEEP:-}" ] && cp "$work/valgrind.log" "$CT_CHECK_KEEP"; rm -rf "$work"' EXIT
if ! "$swift" build --product ct-probe >"$work/build.log" 2>&1; then
    cat "$work/build.log" >&2
    echo "ct-check: the build of ct-probe failed" >&2
    exit 2
fi
objcopy --strip-debug "$("$swift" build --show-bin-path)/ct-probe" "$work/ct-probe"
status=0
valgrind --tool=memcheck --error-exitcode=3 --num-callers=12 \
    "$work/ct-probe" --require-valgrind >"$work/out.log" 2>"$work/valgrind.log" || status=$?
cat "$work/out.log"
if [ "$status" -eq 0 ]; then
    echo "ct-check: no branch and no memory address depends on a key or a plaintext in the key check, seal and open"
    exit 0
fi
# The findings, with Swift's symbol names demangled.
grep -v -E '^==[0-9]+== ?$' "$work/valgrind.log" | { "$swift" demangle --simplified 2>/dev/null || cat; } >&2 || true
branches=$(grep -c 'Conditional jump or move depends on uninitialised value' "$work/valgrind.log" || true)
addresses=$(grep -c 'Use of uninitialised value' "$work/valgrind.log" || true)
if [ "$status" -eq 3 ]; then
    echo "ct-check: failed: memcheck found $branches branch(es) and $addresses memory address(es) that depend on" \
        "secret data (above; each error is counted once however often it ran)" >&2
else
    echo "ct-check: failed: ct-probe exited with status $status under valgrind (above)" >&2
fi
exit 1
