#!/usr/bin/env bash
# Runs `make test` on fresh clones of this repository's HEAD, one after the other, with both cores kept busy by a
# CPU burner beside it (issue 35: the suite must not flake on a loaded machine), and writes what failed.
#
#   scripts/flake-loop.sh [RUNS] [WORK]   RUNS fresh clones (default 20) under WORK (default /tmp/flake-loop);
#                                         FLAKE_BURNERS busy loops beside them (default: the number of cores)
#
# Each run's whole output is kept as WORK/run-N.log; WORK/summary.txt gets one line per run: its number, its exit
# status, its time in seconds, and the tests that failed (the names Swift Testing and XCTest print), and the last
# line totals them. The loop goes on after a failure. Exit status: 0 when every run passed, 1 otherwise.
set -uo pipefail
runs=${1:-20}
work=${2:-/tmp/flake-loop}
burners=${FLAKE_BURNERS:-$(nproc)}
root=$(cd "$(dirname "$0")/.." && pwd)
head=$(git -C "$root" rev-parse HEAD)
mkdir -p "$work"
summary="$work/summary.txt"
echo "flake loop on $head: $runs fresh clones of make test, $burners CPU burner(s) beside them, $(date -u +%FT%TZ)" \
    >"$summary"

pids=()
stop_burners() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null; }
trap stop_burners EXIT
for _ in $(seq 1 "$burners"); do
    (while :; do :; done) &
    pids+=($!)
done

failed=0
for run in $(seq 1 "$runs"); do
    clone="$work/clone"
    rm -rf "$clone"
    git clone -q "$root" "$clone" && git -C "$clone" checkout -q "$head"
    start=$SECONDS
    (cd "$clone" && make test) >"$work/run-$run.log" 2>&1
    status=$?
    names=$(grep -E '^✘ Test [^ ]+|^Test Case .* failed' "$work/run-$run.log" | sed -E 's/^✘ Test ([^ ]+).*/\1/; s/^Test Case .([^ ]+). failed.*/\1/' |
        sort -u | tr '\n' ' ')
    echo "run $run: exit $status in $((SECONDS - start)) s${names:+: failed $names}" >>"$summary"
    [ "$status" -eq 0 ] || failed=$((failed + 1))
done
rm -rf "$work/clone"
echo "total: $runs runs, $failed failed" >>"$summary"
cat "$summary"
[ "$failed" -eq 0 ]
