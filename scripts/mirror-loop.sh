#!/bin/bash
# No request may bypass a drain: a block job's drained sections under a
# guest writing at depth (issue "redo patch 0011", the mirror loop).
#
# The guest writes 4 KiB at random, queue depth 32, direct, with
# verify=crc32c (fio writes the region, then reads every block back and
# checks it), LOOPS times. Meanwhile the host mirrors the disk, over QMP,
# with blockdev-mirror sync=full copy-mode=write-blocking to a new raw
# image, waits for the job to be ready and completes it (the disk then
# runs on the new image), again and again until the guest is done. A
# write that reaches the old image inside the drain of the switch-over,
# after the job's last copy, is lost on the new image, and the guest's
# verify reads it back wrong; a request taken in a drained section can
# also trip the job's assertions. Last, with the guest idle, one more
# mirror, after which the old and new images must be equal byte for byte.
#
# Usage: scripts/mirror-loop.sh [ARM...]   (default: fork upstream)
# Env:   MIRROR_LOOPS (fio loops, default 3), QEMU_FORK, QEMU_UPSTREAM.
# Output: one line per arm; build/mirror/<time>/; exit 1 if an arm that
# must pass (the fork) fails. Upstream's result is reported, not judged.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
arms=${*:-fork upstream}
loops=${MIRROR_LOOPS:-3}
cli=$top/build/xensim/xensim/toolstack/xensim
engine=$top/build/xensim/xensim/fio/xenblk.so
declare -A qemu=(
    [fork]=${QEMU_FORK:-$top/build/fork/qemu-system-i386}
    [upstream]=${QEMU_UPSTREAM:-$top/build/upstream/obj/qemu-system-i386}
)
out=$top/build/mirror/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"

# The guest side, run by `xensim run ... -- $0 --guest DIR`: fio in the
# background, the QMP mirror loop in the foreground until fio is done.
if [ "${1:-}" = --guest ]; then
    d=$2
    fio --name=mirror --ioengine=external:"$engine" --direct=1 \
        --rw=randwrite --bs=4k --iodepth=32 --size=96M --loops="$loops" \
        --verify=crc32c --do_verify=1 --verify_fatal=1 \
        --verify_state_save=0 --randrepeat=0 \
        --output-format=json --output="$d/fio.json" >"$d/fio.log" 2>&1 &
    fio_pid=$!
    rc=0
    PYTHONPATH=$top/scripts/bench python3 - "$XENSIM_QMP" "$d" "$fio_pid" \
        >"$d/qmp.log" 2>&1 <<'PY' || rc=$?
import os, subprocess, sys, time
from probe import QMP

qmp_path, d, fio_pid = sys.argv[1], sys.argv[2], int(sys.argv[3])
q = QMP(qmp_path, timeout=60)


def fio_running():
    """fio is our sibling (the shell's child): alive and not a zombie"""
    try:
        with open("/proc/%d/stat" % fio_pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def disk_node():
    """The node the libxl disk runs on (its BlockBackend's root), and its
    image file"""
    for b in q.cmd("query-block"):
        if b.get("inserted"):
            return b["inserted"]["node-name"], b["inserted"]["file"]
    raise RuntimeError("no disk in query-block")


def mirror(n):
    src, src_file = disk_node()
    tgt = os.path.join(d, "target%d.raw" % n)
    size = os.path.getsize(src_file)
    with open(tgt, "wb") as f:
        f.truncate(size)
    q.cmd("blockdev-add", driver="raw", **{"node-name": "t%d" % n},
          file={"driver": "file", "filename": tgt})
    q.cmd("blockdev-mirror", **{"job-id": "m%d" % n, "copy-mode":
                                "write-blocking"},
          device=src, target="t%d" % n, sync="full")
    while True:
        jobs = {j["device"]: j for j in q.cmd("query-block-jobs")}
        j = jobs.get("m%d" % n)
        if j is None:
            raise RuntimeError("mirror m%d vanished before ready" % n)
        if j["ready"]:
            break
        time.sleep(0.01)
    q.cmd("block-job-complete", device="m%d" % n)
    while any(j["device"] == "m%d" % n for j in q.cmd("query-block-jobs")):
        time.sleep(0.01)
    new, _ = disk_node()
    if new != "t%d" % n:
        raise RuntimeError("disk on %s after mirror m%d, not t%d"
                           % (new, n, n))
    return src, src_file, tgt


def drop(node, image):
    """An image the disk no longer runs on: free it (the first is libxl's)"""
    if node.startswith("t"):
        q.cmd("blockdev-del", **{"node-name": node})
        os.unlink(image)


n = 0
while fio_running():
    n += 1
    drop(*mirror(n)[:2])
    print("mirror %d completed under guest I/O" % n, flush=True)
while fio_running():
    time.sleep(0.1)
# The guest is idle: one more switch-over, then the images must be equal
n += 1
old_node, old, new = mirror(n)
same = subprocess.run(["cmp", "-s", old, new]).returncode == 0
drop(old_node, old)
print("final mirror %d at rest: images %s" % (n, "equal" if same
                                              else "DIFFER"), flush=True)
print("MIRRORS=%d" % (n - 1))
sys.exit(0 if same else 3)
PY
    wait "$fio_pid" || rc=${rc/#0/4}
    echo "$rc" > "$d/rc"
    exit 0
fi

[ -x "$cli" ] && [ -f "$engine" ] ||
    { echo "mirror-loop: missing xensim (make build)" >&2; exit 1; }
fail=0
for arm in $arms; do
    q=${qemu[$arm]}
    d=$out/$arm
    mkdir -p "$d"
    truncate -s 128M "$d/disk.raw"
    rc=0
    timeout -k 30 900 "$cli" run --qemu "$q" --disk "$d/disk.raw" \
        --mem 192 --log-dir "$d/logs" -- "$0" --guest "$d" \
        >"$d/run.log" 2>&1 || rc=$?
    grc=$(cat "$d/rc" 2>/dev/null || echo none)
    mirrors=$(sed -n 's/^MIRRORS=//p' "$d/qmp.log" 2>/dev/null)
    verify=$(jq -r '.jobs[0].error' "$d/fio.json" 2>/dev/null || echo none)
    if [ "$rc" = 0 ] && [ "$grc" = 0 ]; then
        res=ok
    else
        res=FAIL
        [ "$arm" = fork ] && fail=1
    fi
    printf 'mirror-loop: %-8s %s: %s mirrors completed under guest I/O,' \
        "$arm" "$res" "${mirrors:-?}"
    printf ' guest verify error %s, host %s, guest %s (%s)\n' \
        "$verify" "$rc" "$grc" "$d"
    if [ "$res" = ok ]; then
        rm -f "$d"/*.raw
    else
        tail -n 5 "$d/qmp.log" "$d/fio.log" 2>/dev/null | sed 's/^/    /'
    fi
done
exit $fail
