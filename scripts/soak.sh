#!/bin/bash
# Data-integrity soak: fio verify jobs through xen-block, several guests at
# once, for a set time, on the fork (all patches: deferred notify, polling
# at poll-max-ns=8 ms, merging at max-merge-size=1 MiB) and on pristine
# upstream. Each guest is its own simulated host (`xensim run`) with its
# own QEMU; they run together, so the QEMUs, their IOThreads and the
# guests preempt each other on this machine's cores.
#
# Every guest loops over: write its 128 MiB region once with mixed sizes
# (512 B to 4 MiB, 4 MiB I/Os split by blkfront into 11-segment requests
# that the fork merges again), a flush every 16 writes (BLKIF_OP_FLUSH_
# DISKCACHE), queue depth 32; then read it all back and verify every block
# (crc32c header and data, fio's verify=crc32c). A mismatch is any block
# fio reports as bad; a lost response ends the job with an error.
#
#   guest  image  ring order / protocol   I/O
#   g1     raw    4 (512 slots), native   random writes
#   g2     qcow2  0 (32 slots),  x86_32   sequential writes
#   g3     raw    2 (128 slots), x86_64   random writes
#
# Usage: scripts/soak.sh [MINUTES]   (default $SOAK_MINUTES or 2, per arm)
# Env:   SOAK_ARMS (default "fork upstream"), QEMU_FORK, QEMU_UPSTREAM;
#        SOAK_SECONDS overrides MINUTES; SOAK_CORRUPT=1 is the negative
#        control: the host overwrites 4 KiB of the raw images at random
#        every half second, behind the guests' back, and the soak must
#        fail with mismatches.
# Output: a table, build/soak/<time>/results.json; exit 1 on any mismatch,
# fio error, or guest that did not finish.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
minutes=${1:-${SOAK_MINUTES:-2}}
seconds=${SOAK_SECONDS:-$((minutes * 60))}
arms=${SOAK_ARMS:-fork upstream}
xsim=$top/build/xensim/xensim
cli=$xsim/toolstack/xensim
engine=$xsim/fio/xenblk.so
fio=${FIO:-/usr/bin/fio}
declare -A qemu=(
    [fork]=${QEMU_FORK:-$top/build/fork/qemu-system-i386}
    [upstream]=${QEMU_UPSTREAM:-$top/build/upstream/obj/qemu-system-i386}
)
# The fork's libxl disk takes its IOThread from the command line
# ("let the command line tune a libxl disk's IOThread"), as
# device_model_args_pv would give it, and polls its ring (polling=on);
# upstream makes its own with the default poll-max-ns (32 us) and cannot
# poll the ring.
declare -A qemu_args=(
    [fork]="--qemu-arg=-object --qemu-arg=iothread,id=xvda,poll-max-ns=8000000,poll-yield=on
            --qemu-arg=-global --qemu-arg=xen-disk.polling=on"
    [upstream]=""
)
guests=(g1 g2 g3)
declare -A g_format=([g1]=raw [g2]=qcow2 [g3]=raw)
declare -A g_fio=(
    [g1]="--rw=randwrite --ring_order=4 --protocol=native"
    [g2]="--rw=write --ring_order=0 --protocol=x86_32-abi"
    [g3]="--rw=randwrite --ring_order=2 --protocol=x86_64-abi"
)

for f in "$cli" "$engine" "$fio"; do
    [ -x "$f" ] || [ -f "$f" ] || { echo "soak: missing $f (make build)" >&2; exit 1; }
done
out=$top/build/soak/$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "soak: $seconds s per arm, arms: $arms, guests: ${guests[*]}; in $out"

for arm in $arms; do
    q=${qemu[$arm]}
    [ -x "$q" ] || { echo "soak: no QEMU for $arm at $q" >&2; exit 1; }
    "$q" --version | head -n 1 >"$out/$arm.version"
    pids=()
    for g in "${guests[@]}"; do
        d=$out/$arm/$g
        mkdir -p "$d"
        img=$d/disk.${g_format[$g]}
        if [ "${g_format[$g]}" = qcow2 ]; then
            "$top/build/upstream/obj/qemu-img" create -q -f qcow2 "$img" 256M
        else
            truncate -s 256M "$img"
        fi
        # shellcheck disable=SC2086 # word lists by design
        ( timeout -k 30 $((seconds + 300)) \
            "$cli" run --qemu "$q" --disk "$img" --format "${g_format[$g]}" \
                --mem 192 --log-dir "$d/logs" ${qemu_args[$arm]} \
                -- env XENBLK_STATS="$d/stats.json" \
                "$fio" --name="$g" --ioengine=external:"$engine" \
                --direct=1 ${g_fio[$g]} --offset=64M --size=128M \
                --bssplit=512/10:4k/20:64k/20:1m/30:4m/20 --iodepth=32 \
                --fsync=16 --verify=crc32c --do_verify=1 \
                --verify_fatal=0 --continue_on_error=verify \
                --verify_state_save=0 --loops=100000 \
                --runtime="$seconds" --randrepeat=0 \
                --output-format=json --output="$d/fio.json"
          echo $? >"$d/rc" ) >"$d/run.log" 2>&1 &
        pids+=($!)
    done
    if [ "${SOAK_CORRUPT:-0}" = 1 ]; then
        ( sleep 5
          while :; do
              for img in "$out/$arm"/*/disk.raw; do
                  dd if=/dev/urandom of="$img" bs=4k count=1 conv=notrunc \
                      seek=$((16384 + RANDOM % 32768)) status=none
              done
              sleep 0.5
          done ) &
        corrupter=$!
    fi
    wait "${pids[@]}" || true
    [ -z "${corrupter:-}" ] || kill "$corrupter" 2>/dev/null || true
done

python3 - "$out" "$seconds" $arms <<'PY'
import json, os, sys

out, minutes, arms = sys.argv[1], float(sys.argv[2]) / 60, sys.argv[3:]
rows, bad, res = [], 0, {"minutes_per_arm": minutes, "arms": {}}
for arm in arms:
    version = open(os.path.join(out, arm + ".version")).read().strip()
    res["arms"][arm] = {"version": version, "guests": {}}
    for g in sorted(os.listdir(os.path.join(out, arm))):
        d = os.path.join(out, arm, g)
        rc = int(open(os.path.join(d, "rc")).read().strip() or 1)
        log = open(os.path.join(d, "run.log"), errors="replace").read()
        # continue_on_error=verify: total_err counts the bad blocks; any
        # other error ends the job with "error" set
        w = v = mism = 0
        errs = 1
        try:
            j = json.load(open(os.path.join(d, "fio.json")))["jobs"][0]
            w, v = j["write"]["io_bytes"], j["read"]["io_bytes"]
            mism, errs = j["total_err"], j["error"]
        except (OSError, ValueError, KeyError, IndexError):
            pass
        st = {}
        try:
            st = json.load(open(os.path.join(d, "stats.json")))
        except (OSError, ValueError):
            pass
        ok = rc == 0 and mism == 0 and errs == 0
        bad += not ok
        r = {"rc": rc, "written_bytes": w, "verified_bytes": v,
             "mismatches": mism, "fio_errors": errs,
             "requests": st.get("requests"), "responses": st.get("responses"),
             "ok": ok}
        res["arms"][arm]["guests"][g] = r
        rows.append((arm, g, w, v, mism, errs, st.get("requests", 0),
                     st.get("responses", 0), "ok" if ok else "FAIL"))
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
print(f"{'arm':9} {'guest':5} {'written':>10} {'verified':>10} "
      f"{'mismatch':>8} {'error':>6} {'requests':>10} {'responses':>10}")
tot = {}
for a, g, w, v, m, e, rq, rs, ok in rows:
    print(f"{a:9} {g:5} {w / 2**30:8.2f}Gi {v / 2**30:8.2f}Gi {m:8d} {e:6d} "
          f"{rq:10d} {rs:10d}  {ok}")
    t = tot.setdefault(a, [0, 0, 0])
    t[0] += v; t[1] += m; t[2] += e != 0
for a, (v, m, e) in tot.items():
    print(f"soak: {a}: {minutes:.2g} min x {len(rows) // len(tot)} guests, "
          f"{v / 2**30:.2f} GiB verified, {m} mismatches, {e} guests "
          f"with errors")
sys.exit(1 if bad else 0)
PY
