#!/bin/bash
# Guest side of one scale-bench session: `xensim run ... --guest-disk ...
# -- scale-guest.sh SESSION_DIR` (scripts/bench-scale.sh).
#
# The session is one simulated host (one xenstored) with several guests,
# each its own domain, disk and QEMU; this script keeps it alive for a
# repeat and runs fio job files on request. A job file holds one fio job
# per guest (the xenblk engine's domid option picks the guest), so fio
# starts them together and reports each guest on its own.
#
# Protocol (all files in SESSION_DIR):
#   ready        written once the session can take runs: KEY=VALUE lines
#                (XENSIM_* of the run, with XENSIM_DOMIDS and
#                XENSIM_QEMU_PIDS)
#   cmd          a FIFO; each line is one of
#                  run ID JOBFILE        probe, fio, probe
#                  timed ID JOBFILE D W  fio in the background; once every
#                                        guest's QEMU has served a request,
#                                        probe after D seconds and again W
#                                        seconds later
#                  quit
#   ID.pre.json  scale-probe.py snapshot of every QEMU of the session
#   ID.fio.json  fio's JSON output (json+: latency histograms per guest)
#   ID.post.json the second snapshot
#   ID.done      fio's exit status; written last
# The engine's counters of each guest go to ID.xen.<domid>.json (the job
# file's stats_file). Environment: XENSIM_* from xensim.
set -euo pipefail

sdir=${1:?usage: scale-guest.sh SESSION_DIR}
here=$(cd "$(dirname "$0")" && pwd)
probe() {
    python3 "$here/scale-probe.py" "$XENSIM_DIR" "$XENSIM_DOMIDS" \
        "$XENSIM_QEMU_PIDS" > "$1.tmp"
    mv "$1.tmp" "$1"
}

rm -f "$sdir/cmd"
mkfifo "$sdir/cmd"
# Opened read-write: never EOF between the orchestrator's writes.
exec 3<>"$sdir/cmd"
env | grep '^XENSIM_' | sort > "$sdir/ready.tmp"
mv "$sdir/ready.tmp" "$sdir/ready"

while read -r -u 3 verb id job delay window; do
    [ "$verb" = quit ] && break
    rc=0
    fio_cmd=(fio --output-format=json+ --output="$sdir/$id.fio.json" "$job")
    case $verb in
    run)
        probe "$sdir/$id.pre.json"
        "${fio_cmd[@]}" > "$sdir/$id.fio.log" 2>&1 || rc=$?
        probe "$sdir/$id.post.json"
        ;;
    timed)
        # the guests of this job file (domid=N lines), not the session's
        domids=$(sed -n 's/^domid=//p' "$job" | tr '\n' ' ')
        python3 "$here/scale-probe.py" --io-count "$XENSIM_DIR" "$domids" \
            > "$sdir/$id.io-base.json"
        "${fio_cmd[@]}" > "$sdir/$id.fio.log" 2>&1 &
        fio_pid=$!
        python3 "$here/scale-probe.py" --wait-io "$XENSIM_DIR" "$domids" \
            "$sdir/$id.io-base.json" ||
            echo "scale-guest.sh: $id: a guest did no I/O in 60 s" >&2
        sleep "$delay"
        probe "$sdir/$id.pre.json"
        sleep "$window"
        probe "$sdir/$id.post.json"
        wait "$fio_pid" || rc=$?
        ;;
    *)
        echo "scale-guest.sh: unknown command $verb" >&2
        rc=2
        ;;
    esac
    echo "$rc" > "$sdir/$id.done.tmp"
    mv "$sdir/$id.done.tmp" "$sdir/$id.done"
done
exit 0
