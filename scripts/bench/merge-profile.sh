#!/bin/bash
# Why 1 MiB guest I/Os at depth become more than one block-layer request:
# one guest, 1 MiB sequential I/O at QD32 through a libxl disk, with the
# fork's merge trace events logged, placed as the bench places it (QEMU
# and the simulated host on CPU 1, the guest's fio on CPU 0, the disk's
# IOThread at the bench's poll-max-ns).
#
# Usage: scripts/bench/merge-profile.sh QEMU read|write [SECONDS [POLL_NS]]
#   e.g. scripts/bench/merge-profile.sh build/fork/qemu-system-i386 read 3
# MERGE_QD (32) and MERGE_RING_ORDER (3, the bench's) set the guest's
# depth and ring order: at 3 the ring holds 256 requests, 10 2/3 I/Os of
# 24, so at QD32 the frontend queues what fits of the next I/O.
# MERGE_PUSH_EACH=1 makes the guest push each ring request as it queues
# it, as Linux blkfront does, instead of one push per fio commit.
# The disk is a 512 MiB raw file on tmpfs. The environment reaches QEMU
# (xensim passes it on). Prints one JSON object:
#   blk_requests_per_io   query-blockstats (operations - merged) / guest I/Os
#   blkif_per_io          ring requests per guest I/O (the engine's)
#   merges                block requests the dataplane merged (trace
#                         xen_block_dataplane_merge): count, histogram of
#                         the blkif requests in each, share that is exactly
#                         one guest I/O (1 MiB at a 1 MiB boundary)
#   more_requests         times a ring pass that ended with a merge open
#                         found the frontend had pushed more, and went on
#                         (trace xen_block_dataplane_more_requests)
#   engine                the guest's counters per I/O: ring pushes
#                         (commits), requests per push, responses per
#                         blocking wait, backend notifications
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
engine=$top/build/xensim/xensim/fio/xenblk.so
if [ "${1:-}" = --guest ]; then
    # Inside `xensim run`: snapshot, fio, snapshot
    out=$2 rw=$3 secs=$4
    qd=${MERGE_QD:-32} ring_order=${MERGE_RING_ORDER:-3}
    push_each=${MERGE_PUSH_EACH:-0}
    probe=$top/scripts/bench/probe.py
    qemu_pid=$(cat "$out/qemu.pid")
    python3 "$probe" "$XENSIM_QMP" "$qemu_pid" > "$out/pre.json"
    XENBLK_STATS=$out/xen.json taskset -c 0 fio --name=m \
        --ioengine=external:"$engine" --devid=51712 --ring_order="$ring_order" \
        --push_each="$push_each" \
        --rw="$rw" --bs=1m --iodepth="$qd" --direct=1 --time_based \
        --runtime="$secs" --output-format=json --output="$out/fio.json" \
        > "$out/fio.log" 2>&1
    python3 "$probe" "$XENSIM_QMP" "$qemu_pid" > "$out/post.json"
    exit 0
fi

qemu=$(realpath "${1:?usage: $0 QEMU read|write [SECONDS [POLL_NS]]}")
rw=${2:?} secs=${3:-3} poll_ns=${4:-8000000}
out=$(mktemp -d /tmp/merge-profile.XXXXXX)
disk=/dev/shm/merge-profile-$$.raw
trap 'rm -f "$disk"' EXIT
dd if=/dev/zero of="$disk" bs=1M count=512 status=none
printf '%s\n' xen_block_dataplane_merge \
    xen_block_dataplane_more_requests > "$out/trace-events"
# The guest finds QEMU's pid in xenstore (image/device-model-pid)
taskset -c 1 "$top/build/xensim/xensim/toolstack/xensim" run --qemu "$qemu" \
    --disk "$disk" --mem 256 --log-dir "$out/logs" \
    --qemu-arg=-object --qemu-arg="iothread,id=xvda,poll-max-ns=$poll_ns,poll-yield=on" \
    --qemu-arg=-global --qemu-arg=xen-disk.polling=on \
    --qemu-arg=-D --qemu-arg="$out/trace.log" \
    --qemu-arg=-trace --qemu-arg="events=$out/trace-events" \
    -- bash -c 'echo "$XENSIM_QEMU_PIDS" > "$1/qemu.pid" && exec "$0" \
        --guest "$1" "$2" "$3"' "$0" "$out" "$rw" "$secs" \
    > "$out/run.log" 2>&1 || { cat "$out/run.log" >&2; exit 1; }
python3 - "$out" "$qemu" "$rw" "$poll_ns" <<'PY'
import json, re, sys
out, qemu, rw, poll_ns = sys.argv[1:]
ld = lambda f: json.load(open(out + "/" + f))
xen, pre, post = ld("xen.json"), ld("pre.json"), ld("post.json")
ios = xen["ios"]
ops = 0
for dev, st in post["blockstats"].items():
    b = pre["blockstats"].get(dev, {})
    for k, s in (("rd_operations", 1), ("wr_operations", 1),
                 ("rd_merged", -1), ("wr_merged", -1)):
        ops += s * (st.get(k, 0) - b.get(k, 0))
MIB = 1 << 20
hist, whole, nmerge, more = {}, 0, 0, 0
for line in open(out + "/trace.log"):
    m = re.search(r"xen_block_dataplane_merge .*offset 0x([0-9a-f]+) "
                  r"requests ([0-9]+) bytes ([0-9]+)", line)
    if m:
        off, n, b = int(m.group(1), 16), int(m.group(2)), int(m.group(3))
        nmerge += 1
        key = "24" if n == 24 else "12-23" if n >= 12 else "2-11"
        hist[key] = hist.get(key, 0) + 1
        whole += off % MIB == 0 and b == MIB
        continue
    more += "xen_block_dataplane_more_requests" in line
res = {
    "qemu": qemu, "rw": rw, "poll_max_ns": int(poll_ns), "guest_ios": ios,
    "mbps": sum(json.load(open(out + "/fio.json"))["jobs"][0][d]["bw_bytes"]
                for d in ("read", "write")) / 1e6,
    "blk_requests_per_io": ops / ios,
    "blkif_per_io": xen["requests"] / ios,
    "merges": {"count": nmerge, "per_io": nmerge / ios,
               "singles_per_io": (ops - nmerge) / ios,
               "requests_hist": hist,
               "whole_guest_io_share": whole / nmerge if nmerge else None},
    "more_requests": more,
    "engine": {"commits_per_io": xen["commits"] / ios,
               "requests_per_commit": xen["requests"] / xen["commits"],
               "responses_per_wait": xen["responses"] / max(xen["waits"], 1),
               "backend_notifies_per_io": xen["backend_notifies"] / ios},
    "out": out,
}
print(json.dumps(res, indent=1))
PY
