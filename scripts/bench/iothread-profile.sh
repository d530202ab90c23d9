#!/bin/bash
# Per-I/O profile of a libxl disk's IOThread for one fio job: what the
# event loop does for each guest I/O (passes, eventfd reads and writes,
# futex wake-ups of the thread pool, context switches, CPU), counted by
# perf on the IOThread's tracepoints for the length of the run.
#
# Usage: scripts/bench/iothread-profile.sh QEMU RW BS QD [SECONDS]
#   e.g. scripts/bench/iothread-profile.sh build/fork/qemu-system-i386 \
#            randread 4k 16 3
# The disk is a 512 MiB raw file on tmpfs, attached as libxl does with
# default settings (its IOThread "xvda" polls up to 32 us on the fork).
# Placement as in the bench: QEMU and the simulated host on CPU 1, the
# guest's fio on CPU 0. Prints one line of per-I/O figures: syscalls the
# IOThread makes (loop waits: ppoll, epoll or io_uring_enter; eventfd
# reads and writes, a frontend notification being one write; futex, the
# thread pool's wake-ups), its context switches and CPU time. With
# PROBES=1 also passes of the event loop (aio_poll() calls), bottom-half
# runs (aio_bh_poll()) and frontend notifications
# (xen_device_notify_event_channel()), counted with uprobes on QEMU's own
# symbols; each hit traps, which slows the IOThread several times over
# and so changes how completions batch: read those as counts, not speed.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = --guest ]; then
    # Inside `xensim run`: find the IOThread, count while fio runs
    out=$2 rw=$3 bs=$4 qd=$5 secs=$6
    tid=$(PYTHONPATH=$top/scripts/bench python3 -c '
import sys
from probe import QMP
q = QMP(sys.argv[1])
print([t["thread-id"] for t in q.cmd("query-iothreads")
       if t["id"] == "xvda"][0])' "$XENSIM_QMP")
    events=context-switches,task-clock${PROBE_EVENTS:+,$PROBE_EVENTS}
    for s in ppoll epoll_wait epoll_pwait io_uring_enter read write \
             futex ioctl; do
        events+=,syscalls:sys_enter_$s
    done
    perf stat -x, -e "$events" -t "$tid" -o "$out/perf.csv" &
    perf_pid=$!
    sleep 0.2
    taskset -c 0 fio --name=p --ioengine=external:"$top/build/xensim/xensim/fio/xenblk.so" \
        --devid=51712 --rw="$rw" --bs="$bs" --iodepth="$qd" --direct=1 \
        --rwmixread=70 --time_based --runtime="$secs" \
        --output-format=json --output="$out/fio.json" >"$out/fio.log" 2>&1
    kill -INT "$perf_pid"
    wait "$perf_pid" || true
    exit 0
fi

qemu=$(realpath "${1:?usage: $0 QEMU RW BS QD [SECONDS]}")
rw=${2:?} bs=${3:?} qd=${4:?} secs=${5:-3}
out=$(mktemp -d /tmp/iothread-profile.XXXXXX)
# uprobes on the binary under test, in a group of our own
group=xbprof$$
funcs="aio_poll aio_bh_poll xen_device_notify_event_channel"
PROBE_EVENTS=
[ "${PROBES:-0}" = 1 ] || funcs=
for f in $funcs; do
    perf probe -q -x "$qemu" --add "$group:$f=$f" >/dev/null 2>&1 ||
        { echo "iothread-profile: cannot probe $f in $qemu" >&2; exit 1; }
    PROBE_EVENTS+="${PROBE_EVENTS:+,}$group:$f"
done
export PROBE_EVENTS
disk=/dev/shm/iothread-profile-$$.raw
trap 'rm -f "$disk"; perf probe -q -d "$group:*" >/dev/null 2>&1' EXIT
dd if=/dev/zero of="$disk" bs=1M count=512 status=none
taskset -c 1 "$top/build/xensim/xensim/toolstack/xensim" run --qemu "$qemu" \
    --disk "$disk" --mem 256 --log-dir "$out/logs" \
    -- "$0" --guest "$out" "$rw" "$bs" "$qd" "$secs" >"$out/run.log" 2>&1 ||
    { cat "$out/run.log" >&2; exit 1; }
python3 - "$out" "$qemu" "$rw" "$bs" "$qd" <<'PY'
import json, sys
out, qemu, rw, bs, qd = sys.argv[1:]
j = json.load(open(out + "/fio.json"))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
iops = j["read"]["iops"] + j["write"]["iops"]
c = {}
for line in open(out + "/perf.csv"):
    f = line.strip().split(",")
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        c[f[2].replace("syscalls:sys_enter_", "").split(":")[-1]] = \
            float(f[0])
waits = sum(c.get(k, 0) for k in ("ppoll", "epoll_wait", "epoll_pwait",
                                  "io_uring_enter"))
per = lambda k: c.get(k, 0) / ios
probes = ""
if "aio_poll" in c:
    probes = ("aio_poll %.2f, aio_bh_poll %.2f, frontend notify %.2f | "
              % (per("aio_poll"), per("aio_bh_poll"),
                 per("xen_device_notify_event_channel")))
print("%s %s %s QD%s: %.0f IOPS; per I/O: %sloop waits %.2f, read %.2f, "
      "write %.2f, futex %.2f, ctx-sw %.2f, CPU %.1f us"
      % (qemu.split("/")[-3] + "/" + qemu.split("/")[-1], rw, bs, qd, iops,
         probes, waits / ios, per("read"), per("write"), per("futex"),
         per("context-switches"), c.get("task-clock", 0) * 1e3 / ios))
PY
