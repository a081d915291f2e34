#!/usr/bin/env bash
# The first open of a store in a fresh process, counted instruction by instruction: valgrind's callgrind on a
# release build of the benchmark harness, collecting only inside `PrefsStore.init` and the first `int64` read.
# Prints the instruction count and fails (exit 1) when that path called a Swift runtime entry point that builds
# type metadata at run time, or dlsym: each costs a fresh process tens of microseconds (demangling, the
# runtime's caches, pages of libswiftCore) and none is needed to open an intact plain store
# (Documentation/Performance.md, "A fresh process's first open"). Needs valgrind (scripts/bootstrap.sh).
#
#   scripts/audit-first-open.sh          (make audit-first-open)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$("$root/scripts/prof-build.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$bin" worker set-int prefskv "$work/store" 10 >/dev/null

# The two entry points, by their mangled names (they change only if their Swift signatures do).
open_symbol='$s7PrefsKV0A5StoreC2id9directory13configurationACSS_SSAC13ConfigurationVtKcfC'
read_symbol='$s7PrefsKV0A5StoreC5int646forKeys5Int64VSgSS_tKF'
# Both must be in the binary: a name that matches nothing collects nothing, silently (until stop 58 the open's name
# was that of an initializer the allocating one no longer called, and only the read was audited).
nm "$bin" >"$work/symbols.txt"
for symbol in "$open_symbol" "$read_symbol"; do
    if ! grep -qF " $symbol" "$work/symbols.txt"; then
        echo "audit-first-open: $symbol is not in $bin: did PrefsStore.init or int64(forKey:) change signature?" >&2
        exit 2
    fi
done
valgrind --tool=callgrind --callgrind-out-file="$work/callgrind.out" \
    --toggle-collect="$open_symbol" --toggle-collect="$read_symbol" \
    "$bin" worker cold prefskv "$work/store" 1 key.5 >/dev/null 2>"$work/valgrind.log"
callgrind_annotate "$work/callgrind.out" >"$work/annotated.txt"
total=$(awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1; exit }' "$work/annotated.txt")
if [ -z "$total" ] || [ "$total" -eq 0 ]; then
    echo "audit-first-open: nothing was collected: did PrefsStore.init or int64(forKey:) change signature?" >&2
    exit 2
fi
echo "first open + first read of a 10-key store in a fresh process: $total instructions"
runtime='swift_getGenericMetadata|swift_getTypeByMangledName|swift_getCanonicalPrespecializedGenericMetadata|'
runtime+='swift_allocateGeneric|swift_getTupleTypeMetadata|swift_getExistentialTypeMetadata|swift_initClassMetadata|'
runtime+='swift_conformsToProtocol|[^_]dlsym'
if grep -Eq "$runtime" "$work/annotated.txt"; then
    echo "audit-first-open: the open path built type metadata at run time or looked up a symbol:" >&2
    grep -E "$runtime" "$work/annotated.txt" | swift demangle --simplified >&2
    exit 1
fi
echo "no type metadata built at run time, no dlsym"
