#!/usr/bin/env bash
# The instructions the hot paths run, counted by valgrind's callgrind on the release build of the benchmark
# harness (only inside each workload's timed section, `measuredRegion`), against the figures committed in
# Benchmarks/instructions.txt. Instruction counts hardly move with the machine's load, so a regression shows
# where times drown in noise (Documentation/Performance.md, "Instruction counts").
#
#   scripts/bench-check.sh           fail (exit 1) when a path runs more than 5% more instructions than committed
#   scripts/bench-check.sh --warn    the same comparison, but a growth is only a warning (make test)
#   scripts/bench-check.sh --update  measure and write the figures into Benchmarks/instructions.txt
#
# Needs valgrind (scripts/bootstrap.sh installs it).
set -euo pipefail
mode=check
case "${1:-}" in
"") ;;
--warn) mode=warn ;;
--update) mode=update ;;
*)
    echo "usage: scripts/bench-check.sh [--warn | --update]" >&2
    exit 64
    ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
committed="$root/Benchmarks/instructions.txt"
tolerance=5
bin=$("$root/scripts/prof-build.sh")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Swift's hashing is seeded at random per process; the counts are made with a fixed seed.
export SWIFT_DETERMINISTIC_HASHING=1

# count NAME OPERATIONS WORKER-ARGUMENTS...: instructions per operation inside the worker's timed sections.
measured=()
count() {
    local name=$1 operations=$2
    shift 2
    if ! valgrind --tool=callgrind --callgrind-out-file="$work/$name.out" --toggle-collect='*measuredRegion*' \
        "$bin" worker "$@" >/dev/null 2>"$work/$name.log"; then
        cat "$work/$name.log" >&2
        echo "bench-check: $name: the worker failed under valgrind: $bin worker $*" >&2
        exit 2
    fi
    local total
    total=$(awk '/^totals:/ { print $2; exit }' "$work/$name.out")
    if [ -z "$total" ] || [ "$total" -eq 0 ]; then
        echo "bench-check: $name: nothing was counted (is measuredRegion still called by measure?)" >&2
        exit 2
    fi
    measured+=("$name $(((total + operations / 2) / operations))")
}
populate() { "$bin" worker set-int "$1" "$2" "$3" >/dev/null; }

populate prefskv "$work/plain" 10000
populate prefskv "$work/ten" 10
populate prefskv-encrypted "$work/sealed" 10000
count get 30000 get prefskv "$work/plain" 10000 3
count first-get 10000 first-get prefskv "$work/plain" 10000
count set 10000 set-int prefskv "$work/set" 10000
count sealed-get 30000 get prefskv-encrypted "$work/sealed" 10000 3
count sealed-cached-get 30000 get prefskv-encrypted-cached "$work/sealed" 10000 3
count sealed-set 10000 set-int prefskv-encrypted "$work/sealed-set" 10000
count cold-10 1 cold prefskv "$work/ten" 1 key.5
count cold-10000 1 cold prefskv "$work/plain" 1 key.5000
count sealed-cold-10000 1 cold prefskv-encrypted "$work/sealed" 1 key.5000
count blob-rewrite 2000 blob-4k prefskv "$work/blob" 2000 1000

if [ "$mode" = update ]; then
    {
        echo "# Instructions per operation of the hot paths, counted by scripts/bench-check.sh (callgrind, valgrind"
        echo "# $(valgrind --version | sed 's/valgrind-//'), release build of Benchmarks/, $(uname -m)). \`make bench-check\` fails when a path"
        echo "# runs more than $tolerance% more than its figure here; \`make bench-check-update\` rewrites this file."
        echo "# get, sealed-get: a warm int64 read of a 10,000-key store (every key read once before); sealed-cached-get:"
        echo "# the same through the plaintext cache (Configuration.cachesPlaintext); first-get: open"
        echo "# a 10,000-key store and read every key once (per key); set, sealed-set: setting 10,000 new int keys;"
        echo "# cold-N: open + first read of an N-key store in a fresh process; blob-rewrite: a 4 KiB value rewritten"
        echo "# among 1,000 keys (its compactions included)."
        printf '%s\n' "${measured[@]}"
    } >"$committed"
    echo "bench-check: wrote $committed"
    printf '  %s\n' "${measured[@]}"
    exit 0
fi

echo "bench-check: instructions per operation under callgrind (committed -> now; more than +$tolerance% fails)"
grown=()
for line in "${measured[@]}"; do
    read -r name now <<<"$line"
    before=$(awk -v n="$name" '$1 == n { print $2 }' "$committed")
    if [ -z "$before" ]; then
        printf '  %-18s %10s -> %10s   (no committed figure)\n' "$name" "-" "$now"
        grown+=("$name has no committed figure")
        continue
    fi
    change=$(awk -v a="$before" -v b="$now" 'BEGIN { printf "%+.1f", (b - a) * 100 / a }')
    printf '  %-18s %10s -> %10s   %s%%\n' "$name" "$before" "$now" "$change"
    if awk -v a="$before" -v b="$now" -v t="$tolerance" 'BEGIN { exit !(b > a * (1 + t / 100)) }'; then
        grown+=("$name: $before -> $now instructions ($change%)")
    fi
done
if [ ${#grown[@]} -eq 0 ]; then
    echo "bench-check: no hot path grew by more than $tolerance%"
    exit 0
fi
for what in "${grown[@]}"; do
    if [ "$mode" = warn ]; then echo "bench-check: warning: $what" >&2; else echo "bench-check: $what" >&2; fi
done
if [ "$mode" = warn ]; then
    echo "bench-check: warning only (make test); make bench-check fails on this" >&2
    exit 0
fi
echo "bench-check: failed: a hot path grew by more than $tolerance% (if intended, make bench-check-update and say why)" >&2
exit 1
