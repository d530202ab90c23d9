#!/bin/bash
# make check-qtest RUNS times while every CPU is kept busy by a spinning
# process: a qtest that leans on timing or on a CPU to spare fails here.
# Usage: check-qtest-busy.sh RUNS; prints the runs that passed, and the
# log of each failure (build/check-qtest-busy/run-N.log).
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
runs=${1:-20}
logs=$top/build/check-qtest-busy
rm -rf "$logs"
mkdir -p "$logs"

spinners=()
stop_spinners() { [ ${#spinners[@]} = 0 ] || kill "${spinners[@]}" 2>/dev/null; }
trap stop_spinners EXIT
for _ in $(seq "$(nproc)"); do
    ( while :; do :; done ) &
    spinners+=($!)
done

passed=0
for i in $(seq "$runs"); do
    if make -s -C "$top" check-qtest >"$logs/run-$i.log" 2>&1; then
        passed=$((passed + 1))
        rm -f "$logs/run-$i.log"
    else
        echo "check-qtest-busy: run $i failed:" >&2
        grep -E '^not ok|FAIL|ERROR' "$logs/run-$i.log" | head -20 >&2
    fi
done
echo "check-qtest-busy: $passed of $runs runs passed with $(nproc) CPUs busy"
[ "$passed" = "$runs" ]
