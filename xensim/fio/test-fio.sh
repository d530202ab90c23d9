#!/bin/bash
# fio through the xenblk engine, the simulated guest and pristine QEMU
# (or, with --vbd3, blktap's tapdisk as XenServer runs it): data verified
# with crc32c, guest counters checked, and bad setups fail fast with a
# clear message.
#
# Usage: test-fio.sh XENSIM_CLI XENBLK_SO [--vbd3] [--randrw-order0]
# QEMU: $QEMU_UPSTREAM, default build/upstream/obj/qemu-system-i386.
# tapdisk (--vbd3): $XENSIM_BLKTAP, default build/blktap/inst
# (scripts/build-blktap.sh); the backend's ring order is 3 there, 4 with
# QEMU.
# $XENSIM_PRELOAD (check-asan: the ASan runtime) is preloaded into fio,
# which loads the engine; LeakSanitizer is off there, as fio's own
# allocations (e.g. add_file()) live until exit.
# Exits 77 (skip) when QEMU (tapdisk) or fio is missing.
set -u

cli=$1
engine=$2
shift 2
vbd3=
[ "${1:-}" = --vbd3 ] && { vbd3=1; shift; }
here=$(cd "$(dirname "$0")" && pwd)
qemu=${QEMU_UPSTREAM:-$here/../../build/upstream/obj/qemu-system-i386}
blktap=${XENSIM_BLKTAP:-$here/../../build/blktap/inst}
fio=${FIO:-/usr/bin/fio}

if [ -n "$vbd3" ]; then
    # tapdisk as XenServer runs it: 8 ms polling (the seed's), permitted
    # whatever the machine's idle CPU (threshold 0), so that the polling
    # path is the one exercised.
    backend=(--backend vbd3 --polling-duration 8000
             --polling-idle-threshold 0)
    max_order=3
    need=$blktap/libexec/tapdisk
else
    backend=(--qemu "$qemu")
    max_order=4
    need=$qemu
fi
if [ ! -x "$need" ] || [ ! -x "$fio" ]; then
    echo "SKIP: need $need and $fio"
    exit 77
fi

tmp=$(mktemp -d /tmp/xenblk-fio-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
truncate -s 256M "$tmp/disk.raw"
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ok - $1"; }
bad() { fail=$((fail + 1)); echo "not ok - $1"; }

# run NAME STATS FIO-ARGS...: fio in the guest of a fresh host
run() {
    name=$1; stats=$2; shift 2
    timeout 300 "$cli" run "${backend[@]}" --disk "$tmp/disk.raw" --mem 160 \
        -- env XENBLK_STATS="$stats" LD_PRELOAD="${XENSIM_PRELOAD:-}" \
        ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0" \
        "$fio" --name="$name" \
        --ioengine=external:"$engine" --direct=1 --verify_state_save=0 "$@" \
        >"$tmp/$name.out" 2>&1
}

# check_stats FILE: every request answered, fewer kicks than requests
check_stats() {
    python3 - "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["requests"] > 0 and s["responses"] == s["requests"], s
assert s["notifies"] < s["requests"], s
print("stats:", s)
PY
}

# check_ring FILE ENTRIES: a ring of ENTRIES slots that filled up, and no
# I/O handed back to fio with FIO_Q_BUSY (fio 3.33 regenerates a requeued
# write's verify seed, so a mixed read/write job then fails verify with
# "bad header rand_seed": see xensim/fio/xenblk.c)
check_ring() {
    python3 - "$1" "$2" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["ring_entries"] == int(sys.argv[2]), s
assert s["busy"] == 0 and s["backlogged"] > 0, s
PY
}

# Meson test fio-xenblk-randrw-order0: random reads and writes of
# 512 B .. 1 MiB at depth 16 on a 32-slot ring (a 1 MiB I/O is 24
# requests), so I/Os wait for ring slots; written blocks verified at the
# end. Regression test: every I/O that waited for the ring used to come
# back to fio as FIO_Q_BUSY and the job failed with 3 "bad header" blocks.
if [ "${1:-}" = "--randrw-order0" ]; then
    if run randrw0 "$tmp/r.json" --rw=randrw --bsrange=512-1m --iodepth=16 \
           --size=64m --verify=crc32c --do_verify=1 --ring_order=0 &&
       grep -q "err= 0" "$tmp/randrw0.out" && check_stats "$tmp/r.json" &&
       check_ring "$tmp/r.json" 32; then
        ok "randrw 512 B .. 1 MiB, 32-slot ring, crc32c verified"
        exit 0
    fi
    bad "randrw on a 32-slot ring"; cat "$tmp/randrw0.out"
    exit 1
fi

# 1. Mixed sizes 512 B .. 1 MiB, random writes, verify=crc32c.
if run mixed "$tmp/mixed.json" --rw=randwrite --bsrange=512-1m \
       --iodepth=16 --size=64m --verify=crc32c --do_verify=1 \
       --verify_fatal=1 &&
   grep -q "err= 0" "$tmp/mixed.out" && check_stats "$tmp/mixed.json"; then
    ok "mixed sizes, crc32c verified"
else
    bad "mixed sizes"; cat "$tmp/mixed.out"
fi

# 2. 4 MiB sequential, x86_32 ABI, the backend's largest ring (16 pages
# with QEMU, 8 with tapdisk), busy polling.
if run big "$tmp/big.json" --rw=write --bs=4m --iodepth=4 --size=64m \
       --protocol=x86_32-abi --ring_order=-1 --busy_poll=1 \
       --verify=crc32c --do_verify=1 --verify_fatal=1 &&
   grep -q "err= 0" "$tmp/big.out" && check_stats "$tmp/big.json" &&
   grep -q "\"ring_order\": $max_order" "$tmp/big.json"; then
    ok "4 MiB, x86_32-abi, ring order $max_order, busy poll, crc32c verified"
else
    bad "4 MiB x86_32-abi"; cat "$tmp/big.out"
fi

# 3. I/O that starts mid-page in guest memory (iomem_align=512).
if run midpage "$tmp/mid.json" --rw=randwrite --bs=12k --iomem_align=512 \
       --iodepth=8 --size=16m --verify=crc32c --do_verify=1 \
       --verify_fatal=1 --protocol=x86_64-abi &&
   grep -q "err= 0" "$tmp/midpage.out"; then
    ok "mid-page buffers, x86_64-abi, crc32c verified"
else
    bad "mid-page buffers"; cat "$tmp/midpage.out"
fi

# 4. A bad option is a clear error, not a hang.
if ! run badopt "$tmp/x.json" --rw=read --bs=4k --size=1m \
       --protocol=bogus &&
   grep -q "protocol=bogus" "$tmp/badopt.out"; then
    ok "bad protocol rejected"
else
    bad "bad protocol"; cat "$tmp/badopt.out"
fi

# 5. A disk that does not exist is a clear error, not a hang.
if ! run nodisk "$tmp/x.json" --rw=read --bs=4k --size=1m --devid=999 &&
   grep -q "no disk 999" "$tmp/nodisk.out"; then
    ok "missing disk rejected"
else
    bad "missing disk"; cat "$tmp/nodisk.out"
fi

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
