#!/bin/bash
# The main job: pristine upstream QEMU and the fork each serve a real ext4
# disk image (raw and qcow2) to a simulated Xen guest through xen-block,
# started as libxl starts it (`xensim run`). In the guest:
#   sha256   the whole disk read back through blkfront (xenblk-cat) must
#            equal the host image's sha256 (for qcow2: the raw image's);
#   verify   fio random writes with verify=crc32c, then reads them back;
#   randrw   5 s of 4 KiB random 70/30 read/write at queue depth 16.
# fio writes go to a scratch copy of the image in /dev/shm, never to the
# cached one. Prints a table, writes build/main/results.json, exits 1 if any
# check fails.
#
# Usage: scripts/main-job.sh
# Env:   QEMU_UPSTREAM, QEMU_FORK (default build/{upstream/obj,fork}/
#        qemu-system-i386), MAIN_ARMS (default "upstream fork"),
#        MAIN_FORMATS (default "raw qcow2").
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/build/main
xsim=$top/build/xensim/xensim
cli=$xsim/toolstack/xensim
cat_tool=$xsim/domu/xenblk-cat
engine=$xsim/fio/xenblk.so
QEMU_UPSTREAM=${QEMU_UPSTREAM:-$top/build/upstream/obj/qemu-system-i386}
QEMU_FORK=${QEMU_FORK:-$top/build/fork/qemu-system-i386}

# Real files for the image: these trees, sorted by path, taken in order
# until IMG_DATA_MB of content (mke2fs -d copies them, no mount needed).
IMG_SRC=(/usr/lib/python3.11 /usr/include /usr/share/doc)
IMG_DATA_MB=150
IMG_SIZE=256M

# fio jobs (the engine options follow --ioengine); region past the start
# of the filesystem: its content does not matter for the write tests.
FIO_COMMON=(--ioengine=external:"$engine" --direct=1 --offset=128M
            --size=64M --output-format=json --verify_state_save=0)
FIO_VERIFY=(--name=verify --rw=randwrite --bs=64k --iodepth=16
            --verify=crc32c --do_verify=1 --verify_fatal=1)
FIO_RANDRW=(--name=randrw --rw=randrw --rwmixread=70 --bs=4k --iodepth=16
            --runtime=5 --time_based --randrepeat=0)

# --- guest side: runs as the guest of `xensim run` ----------------------
# guest DIR: the three jobs, each result in DIR; never fails itself so that
# every job reports (the host side judges).
if [ "${1:-}" = --guest ]; then
    d=$2
    t0=$(date +%s%N)
    rc=0
    "$cat_tool" --sha256 >"$d/sha256.txt" 2>"$d/sha256.err" || rc=$?
    echo "$rc $(( $(date +%s%N) - t0 ))" >"$d/sha256.rc"
    for job in verify randrw; do
        declare -n args="FIO_${job^^}"
        rc=0
        fio "${FIO_COMMON[@]}" "${args[@]}" --output="$d/$job.json" \
            >"$d/$job.err" 2>&1 || rc=$?
        echo "$rc" >"$d/$job.rc"
    done
    exit 0
fi

for f in "$cli" "$cat_tool" "$engine" "$QEMU_UPSTREAM" "$QEMU_FORK"; do
    [ -e "$f" ] || { echo "main-job: missing $f (make build)" >&2; exit 1; }
done
command -v fio >/dev/null || { echo "main-job: fio missing" >&2; exit 1; }

mkdir -p "$out"
scratch=$(mktemp -d /dev/shm/xenblk-main-XXXXXX)
trap 'rm -rf "$scratch"' EXIT

# --- the image, built once ----------------------------------------------
# disk.raw (ext4), disk.qcow2 (same content), disk.sha256; "stamp" is
# written last so a half-built image is never used.
build_image() {
    local stage=$scratch/stage
    echo "main-job: building the disk image in $out (once)"
    mkdir -p "$stage"
    python3 - "$stage" "$out/files.txt" "$IMG_DATA_MB" "${IMG_SRC[@]}" <<'PY'
import os, shutil, sys
stage, listing, limit = sys.argv[1], sys.argv[2], int(sys.argv[3]) << 20
paths = []
for top in sys.argv[4:]:
    for root, dirs, files in os.walk(top):
        paths += [os.path.join(root, f) for f in files]
total = 0
with open(listing, "w") as lst:
    for p in sorted(paths):
        if not os.path.isfile(p) or os.path.islink(p):
            continue
        size = os.path.getsize(p)
        if total + size > limit:
            continue
        dst = stage + p
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        shutil.copyfile(p, dst)
        os.utime(dst, (0, 0))
        total += size
        lst.write(f"{size} {p}\n")
# Directories too: mke2fs -d keeps the times it finds.
for root, dirs, files in os.walk(stage, topdown=False):
    os.utime(root, (0, 0))
print(f"main-job: {total >> 20} MiB of real files")
PY
    # Fixed UUID, hash seed and time: same files give the same image.
    rm -f "$out/stamp"
    E2FSPROGS_FAKE_TIME=1700000000 mke2fs -q -t ext4 -d "$stage" -F \
        -U 6f1c0a7e-0b5e-4a53-9d1e-5c0ffee0b10c \
        -E hash_seed=6f1c0a7e-0b5e-4a53-9d1e-5c0ffee0b10c,root_owner=0:0 \
        "$out/disk.raw" "$IMG_SIZE"
    rm -rf "$stage"
    # mke2fs -d copies the staging copies' ctime (now): zero it, on the
    # root and on the inodes mke2fs allocated (11 up to the used count).
    local used
    used=$(dumpe2fs -h "$out/disk.raw" 2>/dev/null | awk -F: '
        /^Inode count/ { n = $2 } /^Free inodes/ { f = $2 }
        END { print n - f }')
    { echo "sif <2> ctime @0"; seq -f "sif <%.0f> ctime @0" 11 "$used"; } |
        E2FSPROGS_FAKE_TIME=1700000000 debugfs -w -f - "$out/disk.raw" \
        >/dev/null 2>&1
    e2fsck -fn "$out/disk.raw" >/dev/null
    qemu-img convert -f raw -O qcow2 "$out/disk.raw" "$out/disk.qcow2"
    sha256sum "$out/disk.raw" | cut -d' ' -f1 >"$out/disk.sha256"
    date -u +%FT%TZ >"$out/stamp"
}
[ -f "$out/stamp" ] || build_image
want=$(cat "$out/disk.sha256")
echo "main-job: image $out/disk.raw sha256 $want"

# --- each arm x format ----------------------------------------------------
runs=$scratch/runs
for arm in ${MAIN_ARMS:-upstream fork}; do
    case $arm in
        upstream) qemu=$QEMU_UPSTREAM ;;
        fork) qemu=$QEMU_FORK ;;
        *) echo "main-job: unknown arm $arm" >&2; exit 2 ;;
    esac
    for fmt in ${MAIN_FORMATS:-raw qcow2}; do
        d=$runs/$arm-$fmt
        mkdir -p "$d"
        cp "$out/disk.$fmt" "$scratch/disk.$fmt"
        echo "main-job: $arm $fmt ($qemu)"
        rc=0
        timeout 300 "$cli" run --qemu "$qemu" --disk "$scratch/disk.$fmt" \
            --format "$fmt" --mem 128 --log-dir "$out/logs/$arm-$fmt" \
            -- "$top/scripts/main-job.sh" --guest "$d" \
            >"$d/xensim.out" 2>&1 || rc=$?
        echo "$rc" >"$d/xensim.rc"
        [ "$rc" = 0 ] || sed 's/^/  | /' "$d/xensim.out" >&2
        rm -f "$scratch/disk.$fmt"
    done
done

# --- table and results.json ------------------------------------------------
python3 - "$runs" "$want" "$out/results.json" <<'PY'
import json, os, sys

runs, want, dest = sys.argv[1:4]
rows, fails = [], 0

def first(path):
    try:
        return open(path).read().split()
    except OSError:
        return []

def pct(side, p):
    v = side["clat_ns"].get("percentile", {}).get(p)
    return v / 1000 if v else None

order = {"upstream": 0, "fork": 1, "raw": 0, "qcow2": 1}
for run in sorted(os.listdir(runs),
                  key=lambda r: [order.get(x, 9) for x in r.split("-", 1)]):
    arm, fmt = run.split("-", 1)
    d = os.path.join(runs, run)
    host_ok = first(f"{d}/xensim.rc") == ["0"]
    # sha256 of the whole disk, read back in the guest
    rc, ns = (first(f"{d}/sha256.rc") + ["1", "0"])[:2]
    got = (first(f"{d}/sha256.txt") or [None, "0"])
    ok = host_ok and rc == "0" and got[0] == want
    mb = int(got[1]) / 1e6 if ok else None
    secs = int(ns) / 1e9
    rows.append(dict(arm=arm, format=fmt, job="sha256", iops=None,
                     mbps=mb / secs if mb and secs else None, p50_us=None,
                     p99_us=None, verify=None,
                     sha256="ok" if ok else "FAIL", sha256_value=got[0]))
    fails += not ok
    for job in ("verify", "randrw"):
        try:
            j = json.load(open(f"{d}/{job}.json"))["jobs"][0]
            err = j["error"]
        except (OSError, ValueError, KeyError, IndexError):
            j, err = None, -1
        rc_ok = first(f"{d}/{job}.rc") == ["0"] and err == 0
        fails += not rc_ok
        for side in ("write", "read"):
            s = j[side] if j else None
            if s is not None and s["total_ios"] == 0:
                continue
            # verify: crc32c result; randrw has none, but fails if fio did
            verify = "ok" if rc_ok else "FAIL"
            if job == "randrw" and rc_ok:
                verify = None
            rows.append(dict(
                arm=arm, format=fmt, job=f"{job}.{side}",
                iops=s["iops"] if s else None,
                mbps=s["bw_bytes"] / 1e6 if s else None,
                p50_us=pct(s, "50.000000") if s else None,
                p99_us=pct(s, "99.000000") if s else None,
                verify=verify, error=err, sha256=None))

def f(v, fmt):
    return "-" if v is None else fmt.format(v)

hdr = "%-9s %-6s %-13s %9s %9s %9s %9s %7s %7s" % (
    "arm", "format", "job", "IOPS", "MB/s", "p50 us", "p99 us",
    "verify", "sha256")
print(hdr)
print("-" * len(hdr))
for r in rows:
    print("%-9s %-6s %-13s %9s %9s %9s %9s %7s %7s" % (
        r["arm"], r["format"], r["job"], f(r["iops"], "{:.0f}"),
        f(r["mbps"], "{:.1f}"), f(r["p50_us"], "{:.0f}"),
        f(r["p99_us"], "{:.0f}"), r["verify"] or "-", r["sha256"] or "-"))
json.dump(dict(image_sha256=want, rows=rows, failures=fails),
          open(dest, "w"), indent=1)
print(f"\n{dest}: {len(rows)} rows, {fails} failure(s)")
sys.exit(1 if fails else 0)
PY
