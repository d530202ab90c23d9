#!/bin/bash
# Scale benchmark: N guests at once on one simulated host, per arm.
#
# Usage: scripts/bench-scale.sh full|quick
#
#   full   N = 1 4 8 16 guests x 4k randread QD1, 4k randread QD32, 4k
#          randrw 70/30 QD16, 1m read QD32; plus "mix" at N = 8 (guest 1
#          4k randread QD1, the other 7 QD32); arms upstream, fork,
#          fork-32k, fork-8ms; 10 repeats (the first discarded), 0.5 s
#          ramp + 2 s measured; the N = 1 4k randread QD1 cell over 6 s
#          (BENCH_SCALE_QD1_RUNTIME, not BENCH_RUNTIME: its per-repeat
#          ratio varies less over 6 s; longer runs did not help with more
#          guests; docs/benchmarks.rst). Then the idle cost: N = 16 idle
#          connected disks over 5 s, and a light load (one 4k read every
#          1 ms, fio rate_iops=1000) on N = 1 and N = 16 disks over 3 s,
#          2 repeats. About 50 minutes.
#   quick  N = 1 4 x 4k randread QD1 and 1m read QD32, mix at N = 4;
#          arms upstream, fork, fork-8ms; 2 repeats (the first
#          discarded), 0.8 s runs; idle N = 4 over 2 s, light N = 1 over
#          2 s, once. About 2.5 minutes; CI runs it (check-bench-scale)
#          to prove the pipeline: it asserts files and sane values, never
#          speed.
#
# A session is one `xensim run` with N_max guests: one host, one
# xenstored (as a real dom0), and per guest its own domain (domids 1..),
# its own raw disk on tmpfs attached through the libxl qdisk path, and its
# own QEMU started with libxl's command line (--guest-disk). A run with N
# guests drives guests 1..N with one fio job each (one fio process tree,
# so they start together); the other guests' disks stay unconnected.
# Each arm's session starts once per repeat; within a repeat the
# orchestrator runs each cell on every arm in turn, seconds apart,
# rotating the arm order from cell to cell, so drift cancels in the
# per-repeat ratio arm/upstream (docs/benchmarks.rst, "Scale mode").
#
# Arms (all the same command line, but for the fork's polling):
#   upstream   pristine QEMU (build/upstream/obj): cannot poll the ring
#              (its IOThread polls its own notifier for up to 32 us)
#   fork       the full series (build/fork), libxl disk at its default
#              (as upstream: the ring is not polled)
#   fork-32k   the fork, -object iothread,id=xvda,poll-max-ns=32768,
#              poll-yield=on -global xen-disk.polling=on (the IOThread
#              default, on the command line as device_model_args_pv)
#   fork-8ms   the fork, the same with poll-max-ns=8000000 (the seed's
#              8 ms)
#
# Placement: nothing is pinned. The guests' fio jobs, the QEMUs, xenstored
# and xensim share the machine's two CPUs as dom0's vCPUs and the guests
# would; pinning 2N+1 busy threads onto two CPUs would only choose who
# waits.
#
# Output: build/bench-scale/<timestamp>/ (or $BENCH_OUT): raw/ (each run's
# fio JSON, engine counters per guest, QEMU snapshots), meta/,
# results.json, results.md, chart.png. Overrides: BENCH_SCALE_N,
# BENCH_SCALE_WORKLOADS, BENCH_SCALE_MIX_N (empty: no mix cell),
# BENCH_SCALE_ARMS (upstream always included), BENCH_REPEATS,
# BENCH_RAMP, BENCH_RUNTIME, BENCH_SCALE_QD1_RUNTIME, BENCH_SCALE_IDLE_N,
# BENCH_SCALE_LIGHT_N, BENCH_SCALE_IDLE_REPEATS (0: no idle runs),
# BENCH_SCALE_EXTRA_ARMS, BENCH_SCALE_CHART (0: none), BENCH_SCALE_DISK_MB
# (full mode), BENCH_OUT.
# scripts/bench-bundle.sh packs all of it for a host with no build.
set -euo pipefail

# One brace group, parsed before it runs: editing this file while a run
# goes on cannot derail that run.
{
mode=${1:-}
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
here=$top/scripts/bench
. "$top/scripts/base.sh"      # BASE=X.Y: that base's trees (qbuild)
. "$top/scripts/bench/session.sh"   # sessions: start, send, run, stop
qb=$qbuild

case $mode in
full)
    n_list=${BENCH_SCALE_N-"1 4 8 16"}
    workloads=${BENCH_SCALE_WORKLOADS-"rr4k-qd1 rr4k-qd32 rw4k-qd16 sr1m-qd32"}
    mix_n=${BENCH_SCALE_MIX_N-8}
    arm_list=${BENCH_SCALE_ARMS:-"upstream fork fork-32k fork-8ms"}
    repeats=${BENCH_REPEATS:-10}
    ramp=${BENCH_RAMP:-500ms}
    runtime=${BENCH_RUNTIME:-2s}
    qd1_runtime=${BENCH_SCALE_QD1_RUNTIME:-6s}
    idle_n=${BENCH_SCALE_IDLE_N:-16}
    light_n=${BENCH_SCALE_LIGHT_N-"1 16"}
    idle_repeats=${BENCH_SCALE_IDLE_REPEATS:-2}
    idle_window=5
    light_window=3
    disk_mb=${BENCH_SCALE_DISK_MB:-256}
    ;;
quick)
    n_list=${BENCH_SCALE_N-"1 4"}
    workloads=${BENCH_SCALE_WORKLOADS-"rr4k-qd1 sr1m-qd32"}
    mix_n=${BENCH_SCALE_MIX_N-4}
    arm_list=${BENCH_SCALE_ARMS:-"upstream fork fork-8ms"}
    repeats=${BENCH_REPEATS:-2}
    ramp=${BENCH_RAMP:-200ms}
    runtime=${BENCH_RUNTIME:-800ms}
    qd1_runtime=${BENCH_SCALE_QD1_RUNTIME:-$runtime}
    idle_n=${BENCH_SCALE_IDLE_N:-4}
    light_n=${BENCH_SCALE_LIGHT_N-"1"}
    idle_repeats=${BENCH_SCALE_IDLE_REPEATS:-1}
    idle_window=2
    light_window=2
    disk_mb=64
    ;;
*)
    echo "usage: $0 full|quick" >&2
    exit 2
    ;;
esac
ring_order=3                    # the seed's max_ring_page_order
mem_mb=96                       # guest: QD32 x 1 MiB buffers fit
devid=51712                     # xvda, libxl's disk

xensim=$build/xensim/xensim/toolstack/xensim
engine=$build/xensim/xensim/fio/xenblk.so
fio=${FIO:-/usr/bin/fio}

declare -A arm_qemu arm_poll
arm_qemu=([upstream]=$qb/upstream/obj/qemu-system-i386
          [fork]=$qb/fork/qemu-system-i386
          [fork-32k]=$qb/fork/qemu-system-i386
          [fork-8ms]=$qb/fork/qemu-system-i386)
# poll-max-ns given on the command line; none: the build's own IOThread
arm_poll=([upstream]="" [fork]="" [fork-32k]=32768 [fork-8ms]=8000000)
# BENCH_SCALE_EXTRA_ARMS="NAME=QEMU[:POLL_NS] ...": more arms, e.g. a
# proposed change built beside the fork (named in the results as given)
for x in ${BENCH_SCALE_EXTRA_ARMS:-}; do
    name=${x%%=*} rest=${x#*=}
    arm_qemu[$name]=${rest%%:*}
    arm_poll[$name]=
    [[ $rest == *:* ]] && arm_poll[$name]=${rest#*:}
    arm_list+=" $name"
done
arms=(upstream)
for a in $arm_list; do
    [ -n "${arm_qemu[$a]+x}" ] || { echo "bench-scale: no arm $a" >&2; exit 2; }
    [ "$a" = upstream ] || arms+=("$a")
done

log() { printf '%s\n' "$*" >&2; }
warn() { log "bench-scale: WARNING: $*"; }
die() { log "bench-scale: $*"; exit 1; }

for a in "${arms[@]}"; do
    [ -x "${arm_qemu[$a]}" ] || die "no QEMU for arm $a: ${arm_qemu[$a]} (make build)"
done
for f in "$xensim" "$engine" "$fio"; do
    [ -e "$f" ] || die "missing $f (make build)"
done
# BENCH_SCALE_CHART=0: no chart (a host without gnuplot; the bundle's
# run.sh sets it there, and chart.gp is drawn wherever gnuplot is)
chart=${BENCH_SCALE_CHART:-1}
[ "$chart" = 0 ] || command -v gnuplot >/dev/null ||
    die "gnuplot missing (make deps)"

n_max=$idle_n
for n in $n_list $mix_n $light_n; do
    [ "$n" -gt "$n_max" ] && n_max=$n
done

# --- Output directory and metadata ------------------------------------------

stamp=$(date -u +%Y%m%d-%H%M%S)
out=${BENCH_OUT:-$build/bench-scale/$stamp}
mkdir -p "$out/raw" "$out/meta"
meta=$out/meta
lscpu > "$meta/lscpu.txt"
uname -a > "$meta/uname.txt"
nproc > "$meta/nproc.txt"
grep -m1 MemTotal /proc/meminfo > "$meta/meminfo.txt"
"$fio" --version > "$meta/fio-version.txt"
uptime > "$meta/uptime-start.txt"
git -C "$top" describe --always --dirty > "$meta/repo.txt" 2>/dev/null || true
for a in "${arms[@]}"; do
    "${arm_qemu[$a]}" --version | head -n 1 > "$meta/qemu-version-$a.txt"
    poll=${arm_poll[$a]:-"the build default"}
    echo "${arm_qemu[$a]}, poll-max-ns $poll" > "$meta/arm-$a.txt"
done
git -C "$qb/src" log --oneline "base/$QEMU_VERSION..HEAD" \
    > "$meta/series-fork.txt" 2>/dev/null || true

# --- Disks: one per guest, shared by the arms (one runs at a time) ---------

disks=()
declare -A sess_pid sess_starts
sessions=()
cleanup() {
    kill_sessions
    rm -f "${disks[@]}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
for ((i = 1; i <= n_max; i++)); do
    disks+=("/dev/shm/xenblk-scale-$$-$i.raw")
    # written out (not sparse): reads touch real tmpfs pages, as writes do
    dd if=/dev/zero of="${disks[-1]}" bs=1M count=$disk_mb status=none
done

# --- Sessions ---------------------------------------------------------------

# xensim run's arguments for arm $1 (one per line)
arm_args() {
    local a=$1 i
    printf '%s\n' --qemu "${arm_qemu[$a]}" --mem "$mem_mb" --disk "${disks[0]}"
    for ((i = 1; i < n_max; i++)); do
        printf '%s\n' --guest-disk "${disks[$i]}"
    done
    if [ -n "${arm_poll[$a]}" ]; then
        printf '%s\n' --qemu-arg=-object \
            --qemu-arg="iothread,id=xvda,poll-max-ns=${arm_poll[$a]},poll-yield=on" \
            --qemu-arg=-global --qemu-arg=xen-disk.polling=on
    fi
}

{
    echo "mode=$mode repeats=$repeats ramp=$ramp runtime=$runtime" \
         "qd1_runtime=$qd1_runtime"
    echo "n=${n_list// /,} workloads=${workloads// /,} mix_n=$mix_n" \
         "idle_n=$idle_n light_n=${light_n// /,} idle_repeats=$idle_repeats" \
         "idle_window=$idle_window light_window=$light_window"
    echo "ring_order=$ring_order disk_mb=$disk_mb mem_mb=$mem_mb n_max=$n_max" \
         "placement=unpinned"
    for a in "${arms[@]}"; do
        printf 'arm %s: %s run' "$a" "$xensim"
        mapfile -t args < <(arm_args "$a")
        printf ' %q' "${args[@]}"
        printf ' -- scripts/bench/scale-guest.sh SESSION\n'
    done
} > "$meta/commands.txt"

# The session plumbing (start, send, run and restart, stop) is
# scripts/bench/session.sh's. A session here is the arm's host, xenstored
# and n_max QEMUs.
session_ready_s=120
# session_exec ARM SDIR N ARGS...: see start_session
session_exec() {
    local sdir=$2 n=$3
    shift 3
    exec "$xensim" run "$@" --log-dir "$sdir/xensim-logs.$n" -- \
        "$here/scale-guest.sh" "$sdir"
}

# jobfile FILE SDIR ID N WORKLOAD: one fio job per guest 1..N
# The idle and light runs last long enough for their probes to fall in
# every guest's run: fio starts a job once its guest has connected, one
# after another (about 0.3 s each here; scale-guest.sh waits for all of
# them before its first probe), plus the probes of N QEMUs.
jobfile() {
    local f=$1 sdir=$2 id=$3 n=$4 w=$5 g opts
    local slack=$((3 + n / 2))
    {
        echo "[global]"
        echo "ioengine=external:$engine"
        echo "devid=$devid"
        echo "ring_order=$ring_order"
        echo "direct=1"
        case $w in
        idle)
            # one read, then nothing until the probes are done
            echo "rw=randread"
            echo "bs=4k"
            echo "iodepth=1"
            echo "thinktime=$((idle_window + slack))s"
            echo "thinktime_blocks=1"
            echo "time_based"
            echo "runtime=$((idle_window + slack))s"
            ;;
        light)
            echo "rw=randread"
            echo "bs=4k"
            echo "iodepth=1"
            echo "rate_iops=1000"
            echo "time_based"
            echo "runtime=$((light_window + slack))s"
            ;;
        rr4k-qd1)
            echo "time_based"
            echo "ramp_time=$ramp"
            if [ "$n" = 1 ]; then
                echo "runtime=$qd1_runtime"
            else
                echo "runtime=$runtime"
            fi
            ;;
        *)
            echo "time_based"
            echo "ramp_time=$ramp"
            echo "runtime=$runtime"
            ;;
        esac
        for ((g = 1; g <= n; g++)); do
            echo "[g$g]"
            echo "domid=$g"
            echo "stats_file=$sdir/$id.xen.$g.json"
            case $w in
            rr4k-qd1)  opts="rw=randread bs=4k iodepth=1" ;;
            rr4k-qd32) opts="rw=randread bs=4k iodepth=32" ;;
            rw4k-qd16) opts="rw=randrw rwmixread=70 bs=4k iodepth=16" ;;
            sr1m-qd32) opts="rw=read bs=1m iodepth=32" ;;
            mix)
                # guest 1 latency-bound, the others at depth
                if [ "$g" = 1 ]; then
                    opts="rw=randread bs=4k iodepth=1"
                else
                    opts="rw=randread bs=4k iodepth=32"
                fi
                ;;
            idle|light) opts="" ;;
            *) die "unknown workload $w" ;;
            esac
            for o in $opts; do echo "$o"; done
        done
    } > "$f"
}

# run_guests ARM SDIR ID N WORKLOAD [timed D W]: one run; waits for it.
# A session that died (a QEMU crashed) is restarted and the run done
# again, 3 tries in all (run_in_session).
run_guests() {
    local a=$1 sdir=$2 id=$3 n=$4 w=$5 verb=${6:-run} d=${7:-} win=${8:-}
    jobfile "$sdir/$id.fio" "$sdir" "$id" "$n" "$w"
    run_in_session "$a" "$sdir" "$id" 3 "$verb $id $sdir/$id.fio $d $win"
}

# aggregate MB/s of a run, all guests
agg_mbps() {
    jq -r '[.jobs[] | .read.bw_bytes + .write.bw_bytes] | add / 1e6
           | . * 10 | round / 10' "$1"
}

cells=()
for n in $n_list; do
    for w in $workloads; do cells+=("$n:$w"); done
done
[ -n "$mix_n" ] && cells+=("$mix_n:mix")
ncells=${#cells[@]}
log "bench-scale: $mode, ${ncells} cells x ${#arms[@]} arms x $repeats" \
    "repeats, up to $n_max guests per host, unpinned -> $out"
t0=$(date +%s)

for ((r = 1; r <= repeats; r++)); do
    rdir=$(printf '%s/raw/r%02d' "$out" "$r")
    start_repeat "$rdir" "${arms[@]}"
    for ((c = 0; c < ncells; c++)); do
        IFS=: read -r n w <<< "${cells[$c]}"
        id=n$n-$w
        line=""
        for ((i = 0; i < ${#arms[@]}; i++)); do
            a=${arms[$(( (i + c + r) % ${#arms[@]} ))]}
            run_guests "$a" "$rdir/$a" "$id" "$n" "$w"
            line+=" $a=$(agg_mbps "$rdir/$a/$id.fio.json")"
        done
        log "$(printf '[%ds] r%d/%d N=%-2s %-9s MB/s:%s' \
            "$(( $(date +%s) - t0 ))" "$r" "$repeats" "$n" "$w" "$line")"
    done
    stop_sessions "${arms[@]}"
done

# --- Idle cost --------------------------------------------------------------
# Idle: idle_n guests each do one read and then nothing; the probes span
# idle_window seconds starting 1 s later (after any poll window). Light:
# one 4k read every 1 ms per guest, probes over light_window seconds
# starting 1 s in (adaptive polling has settled).
for ((r = 1; r <= idle_repeats; r++)); do
    rdir=$(printf '%s/raw/idle%02d' "$out" "$r")
    start_repeat "$rdir" "${arms[@]}"
    for ((i = 0; i < ${#arms[@]}; i++)); do
        a=${arms[$(( (i + r) % ${#arms[@]} ))]}
        run_guests "$a" "$rdir/$a" "n$idle_n-idle" "$idle_n" idle \
            timed 1 "$idle_window"
        for n in $light_n; do
            run_guests "$a" "$rdir/$a" "n$n-light" "$n" light \
                timed 1 "$light_window"
        done
    done
    log "[$(( $(date +%s) - t0 ))s] idle repeat $r/$idle_repeats done"
    stop_sessions "${arms[@]}"
done
uptime > "$meta/uptime-end.txt"

# --- Analysis -----------------------------------------------------------------

python3 "$here/scale-analyze.py" "$out"
if [ "$chart" != 0 ]; then
    (cd "$out" && gnuplot chart.gp) || die "gnuplot failed"
fi
if [ "$mode" = quick ]; then
    python3 "$here/scale-analyze.py" --check "$out"
fi
log "bench-scale: done in $(( $(date +%s) - t0 ))s: $out/results.md"
exit 0
}
