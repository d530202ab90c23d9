#!/bin/bash
# Guest side of one bench session: `xensim run ... -- guest.sh SESSION_DIR`.
#
# Keeps one simulated host + QEMU (one arm) alive for a whole repeat and runs
# fio cells on request, so the orchestrator (scripts/bench.sh) can interleave
# the arms cell by cell, seconds apart, without booting a host per cell.
# The tapdisk arm's session (`xensim run --backend vbd3`) has no QEMU: its
# backend process is the tapdisk xensim names in $XENSIM_TAPDISK_PID, and
# the probes read that process's counters instead (probe.py --tapdisk).
#
# Protocol (all files in SESSION_DIR):
#   ready        written once the session can take cells: KEY=VALUE lines
#                (QEMU's or tapdisk's pid, XENSIM_* of the run)
#   cmd          a FIFO; each line is "ID DEVID FIO-ARGS...", or "quit"
#   ID.pre.json  probe.py snapshot before the fio run
#   ID.fio.json  fio's JSON output
#   ID.xen.json  the xenblk engine's guest counters (XENBLK_STATS)
#   ID.post.json probe.py snapshot after the fio run
#   ID.done      fio's exit status; written last
# Environment: BENCH_ENGINE (xenblk.so), BENCH_GUEST_CPU (fio's CPU),
# BENCH_QOM_POLL ("ID=NS": qom-set an IOThread's poll-max-ns at start, for
# arms that cannot take the command line's IOThread), XENSIM_* from xensim.
set -euo pipefail

sdir=${1:?usage: guest.sh SESSION_DIR}
here=$(cd "$(dirname "$0")" && pwd)
probe=$here/probe.py
engine=${BENCH_ENGINE:?}
cpu=${BENCH_GUEST_CPU:-0}

# The backend process the probes read: QEMU, our sibling (a child of the
# `xensim run` process that runs us), or the tapdisk arm's tapdisk.
if [ -n "${XENSIM_TAPDISK_PID:-}" ]; then
    probe_args=(--tapdisk "$XENSIM_TAPDISK_PID")
    backend_pid=TAPDISK_PID=$XENSIM_TAPDISK_PID
else
    qemu_pid=0
    for p in /proc/[0-9]*; do
        stat=$(cat "$p/stat" 2>/dev/null) || continue
        rest=${stat##*) }            # fields after "(comm)": state ppid ...
        read -r _ ppid _ <<< "$rest"
        if [ "$ppid" = "$PPID" ] &&
           [[ $(cat "$p/comm" 2>/dev/null) == qemu-system* ]]; then
            qemu_pid=${p#/proc/}
        fi
    done
    if [ "$qemu_pid" = 0 ]; then
        echo "guest.sh: QEMU (child of $PPID) not found" >&2
        exit 1
    fi
    probe_args=("$XENSIM_QMP" "$qemu_pid")
    backend_pid=QEMU_PID=$qemu_pid
fi

if [ -n "${BENCH_QOM_POLL:-}" ]; then
    python3 "$probe" --qom-set-poll "$XENSIM_QMP" "${BENCH_QOM_POLL%%=*}" \
        "${BENCH_QOM_POLL#*=}"
fi

rm -f "$sdir/cmd"
mkfifo "$sdir/cmd"
# Opened read-write: never EOF between the orchestrator's writes.
exec 3<>"$sdir/cmd"
{
    echo "$backend_pid"
    env | grep '^XENSIM_' | sort
} > "$sdir/ready.tmp"
mv "$sdir/ready.tmp" "$sdir/ready"

while read -r -u 3 id devid args; do
    [ "$id" = quit ] && break
    python3 "$probe" "${probe_args[@]}" > "$sdir/$id.pre.json"
    rc=0
    # shellcheck disable=SC2086  # args is a word list made by bench.sh
    XENBLK_STATS=$sdir/$id.xen.json taskset -c "$cpu" fio \
        --ioengine=external:"$engine" --devid="$devid" \
        --output-format=json --output="$sdir/$id.fio.json" $args \
        > "$sdir/$id.fio.log" 2>&1 || rc=$?
    python3 "$probe" "${probe_args[@]}" > "$sdir/$id.post.json"
    echo "$rc" > "$sdir/$id.done.tmp"
    mv "$sdir/$id.done.tmp" "$sdir/$id.done"
done
exit 0
