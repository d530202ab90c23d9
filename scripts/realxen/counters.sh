#!/bin/bash
# Per-I/O counters, real Xen beside xensim (docs/real-xen.rst): runs the
# jobs of scripts/realxen/counters.list through xensim (the project's
# userspace Xen, Debian's xenstored, the xenblk fio engine) with the same
# arms as a real-Xen run, and prints both sides as one table. The blkback
# arm (dom0's xen-blkback) has no xensim side: its xensim columns are "-".
#
# Usage: scripts/realxen/counters.sh RUN_DIR
#   RUN_DIR: a full run of scripts/realxen/run.sh (its counters-xen.txt)
# Env: QEMU_UPSTREAM, QEMU_FORK as run.sh.
# Writes RUN_DIR/xensim/ (each job's files), RUN_DIR/counters.md; exits 1
# when a side lacks a job, or when blkif requests per I/O (how blkfront
# splits an I/O: no timing in it) differ by more than 2%.
#
# The xensim side runs as the bench does (scripts/bench/guest.sh sessions:
# query-blockstats before and after each fio run, the engine's counters),
# ring order 4 as the real domU's second pass, a raw image on tmpfs.
set -euo pipefail

run=$(realpath "${1:?usage: $0 RUN_DIR}")
top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/scripts/realxen
QEMU_UPSTREAM=${QEMU_UPSTREAM:-$top/build/upstream/obj/qemu-system-i386}
QEMU_FORK=${QEMU_FORK:-$top/build/fork/qemu-system-i386}
xensim=$top/build/xensim/xensim/toolstack/xensim
engine=$top/build/xensim/xensim/fio/xenblk.so
POLL_NS=8000000

die() { echo "counters: $*" >&2; exit 1; }
[ -s "$run/counters-xen.txt" ] || die "$run has no counters-xen.txt (a full run)"
for f in "$xensim" "$engine" /usr/bin/fio; do
    [ -e "$f" ] || die "missing $f (make build)"
done
# the run's arms (results.txt), also those that reported no counters
arms=$( { awk 'NR > 1 { print $1 }' "$run/results.txt" 2>/dev/null
          cut -d' ' -f1 "$run/counters-xen.txt"; } | awk '!seen[$0]++')

disk=/dev/shm/xenblk-counters-$$.raw
pid=
cleanup() {
    [ -z "$pid" ] || kill "$pid" 2>/dev/null || true
    rm -f "$disk"
}
trap cleanup EXIT
truncate -s 512M "$disk"

for a in $arms; do
    [ "$a" != blkback ] || continue
    sdir=$run/xensim/$a
    rm -rf "$sdir"
    mkdir -p "$sdir"
    args=(--disk "$disk" --mem 256)
    case $a in
    upstream) args+=(--qemu "$QEMU_UPSTREAM") ;;
    fork) args+=(--qemu "$QEMU_FORK") ;;
    # the engine's blkfront, like Linux's, uses no indirect segments
    # where the backend offers none
    fork-noind) args+=(--qemu "$QEMU_FORK" --qemu-arg=-global
                       --qemu-arg=xen-block.indirect-requests=off) ;;
    fork-ind256) args+=(--qemu "$QEMU_FORK") ;;
    fork-iothread) args+=(--qemu "$QEMU_FORK" --qemu-arg=-object
                          --qemu-arg="iothread,id=xvda,poll-max-ns=$POLL_NS,poll-yield=on"
                          --qemu-arg=-global
                          --qemu-arg=xen-disk.polling=on) ;;
    *) die "unknown arm $a" ;;
    esac
    BENCH_ENGINE=$engine "$xensim" run "${args[@]}" --log-dir "$sdir/logs" \
        -- "$top/scripts/bench/guest.sh" "$sdir" > "$sdir/session.log" 2>&1 &
    pid=$!
    for _ in $(seq 600); do
        [ ! -f "$sdir/ready" ] && kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    [ -f "$sdir/ready" ] || { cat "$sdir/session.log" >&2; die "xensim ($a) did not start"; }
    while read -r c fargs; do
        ind=
        [ "$a" != fork-ind256 ] || ind=--max_indirect_segments=256
        echo "$c 51712 --name=$c $fargs --ring_order=4 $ind" > "$sdir/cmd"
        for _ in $(seq 1200); do
            [ -f "$sdir/$c.done" ] && break
            kill -0 $pid 2>/dev/null || break
            sleep 0.1
        done
        [ "$(cat "$sdir/$c.done" 2>/dev/null)" = 0 ] ||
            die "$a $c failed: $(tail -n 5 "$sdir/$c.fio.log" 2>/dev/null)"
    done < <(grep -v '^#' "$here/counters.list")
    echo quit > "$sdir/cmd"
    wait $pid || true
    pid=
done

python3 - "$run" "$here/counters.list" $arms <<'PY'
import json, os, sys

run, listing, arms = sys.argv[1], sys.argv[2], sys.argv[3:]
jobs = [l.split()[0] for l in open(listing) if l.strip() and l[0] != "#"]

real = {}
for line in open(os.path.join(run, "counters-xen.txt")):
    f = line.split()
    kv = dict(x.split("=") for x in f[2:])
    real[(f[0], f[1])] = {k: int(v) for k, v in kv.items()}


def xensim(arm, job):
    d = os.path.join(run, "xensim", arm)
    fio = json.load(open(os.path.join(d, job + ".fio.json")))
    xen = json.load(open(os.path.join(d, job + ".xen.json")))
    pre, post = (json.load(open(os.path.join(d, "%s.%s.json" % (job, w))))
                 for w in ("pre", "post"))
    # the one disk of the session: xvda
    (b0,), (b1,) = pre["blockstats"].values(), post["blockstats"].values()
    delta = lambda k: b1[k] - b0[k]
    ios = sum(j["read"]["total_ios"] + j["write"]["total_ios"]
              for j in fio["jobs"])
    return {"ios": ios, "irqs": xen["guest_wakeups"],
            "notifies": xen["backend_notifies"], "greqs": xen["requests"],
            "ops": delta("rd_operations") + delta("wr_operations"),
            "merged": delta("rd_merged") + delta("wr_merged")}


rows, bad = [], []
hdr = ("| job | arm | I/Os xen/sim | irq/IO xen | wakeups/IO sim "
       "(notifies) | blkif/IO xen/sim | blk-req/IO xen/sim | "
       "merged/IO xen/sim |")
rows += [hdr, "|" + "---|" * 8]
for job in jobs:
    for arm in arms:
        r = real.get((arm, job))
        try:
            s = xensim(arm, job) if arm != "blkback" else None
        except (OSError, ValueError, KeyError) as e:
            s = None
            bad.append("%s %s: no xensim figures (%s)" % (arm, job, e))
        per = lambda d, k: d[k] / d["ios"] if d["ios"] else float("nan")
        breq = lambda d: (d["ops"] - d["merged"]) / d["ios"]
        if arm == "blkback" and r is not None:
            # no xensim side; "merged" is blkif requests less the loop
            # device's requests (dom0.sh)
            rows.append("| %s | %s | %d/- | %.2f | - | %.2f/- | %.2f/- | "
                        "%.2f/- |" % (job, arm, r["ios"], per(r, "irqs"),
                                      per(r, "ops"), breq(r),
                                      per(r, "merged")))
            continue
        if r is None:
            bad.append("%s %s: no real-Xen figures" % (arm, job))
        if r is None and s is not None:
            # the arm failed under real Xen: xensim's side alone
            rows.append("| %s | %s | -/%d | - | %.2f (%.2f) | -/%.2f | "
                        "-/%.2f | -/%.2f |" % (
                            job, arm, s["ios"], per(s, "irqs"),
                            per(s, "notifies"), per(s, "ops"), breq(s),
                            per(s, "merged")))
        if r is None or s is None:
            continue
        if abs(per(r, "ops") - per(s, "ops")) > 0.02 * per(s, "ops"):
            bad.append("%s %s: blkif requests per I/O %.2f (Xen) vs %.2f "
                       "(xensim)" % (arm, job, per(r, "ops"), per(s, "ops")))
        rows.append("| %s | %s | %d/%d | %.2f | %.2f (%.2f) | %.2f/%.2f | "
                    "%.2f/%.2f | %.2f/%.2f |" % (
                        job, arm, r["ios"], s["ios"], per(r, "irqs"),
                        per(s, "irqs"), per(s, "notifies"), per(r, "ops"),
                        per(s, "ops"), breq(r), breq(s), per(r, "merged"),
                        per(s, "merged")))
out = "\n".join(rows) + "\n"
open(os.path.join(run, "counters.md"), "w").write(out)
print(out)
for b in bad:
    print("counters: " + b, file=sys.stderr)
sys.exit(1 if bad else 0)
PY
