#!/bin/bash
# Benchmark grid: fio in a xensim guest through xen-block, per arm.
#
# Usage: scripts/bench.sh full|quick
#
#   full   sequential: bs 4k 64k 256k 1m 4m x QD 1 32 x read write;
#          random: bs 4k 64k x QD 1 16 32 x randread randwrite randrw
#          (70/30); 8 repeats (the first discarded), ramp 0.2 s + 0.5 s
#          per fio run; arms upstream, fork, tapdisk and the reference:
#          under an hour here (see below)
#   quick  sequential bs 4k 1m x QD 1 32 x read write, random 4k QD 16
#          x randread randwrite randrw, 3 repeats (the first discarded),
#          1 s per fio run; CI runs it to prove the pipeline: it asserts
#          files and sane values. Its guard (a coarse tripwire on a noisy
#          machine, not a speed test) trips when a random null-co cell of
#          the fork has a median below 0.90 of upstream; those cells are
#          then run alone, upstream and fork, for 12 repeats more
#          ($out/confirm), and the run fails (exit 4) only if the 95%
#          interval of a cell's median lies wholly below 0.90
#          (scripts/bench/analyze.py, RANDOM_GUARD)
#
# The method is the seeds' (docs/benchmarks.rst): every cell is a ratio
# arm/upstream per repeat, and the median of those ratios over the kept
# repeats, with its coefficient of variation; the arms run one after the
# other, seconds apart, in every cell of every repeat, so drift in the
# machine cancels in the ratio.
#
# Arms (QEMU builds; all get the same command line, see "QEMU arguments"):
#   upstream     pristine QEMU (build/upstream/obj)
#   notify-only  the series up to deferred notification: the testbed, the
#                stable fixes, notify (build/arms/notify/obj); an ablation
#                arm, not in the default arms: ask with BENCH_ARMS
#   notify+poll  ... up to event-channel polling and the libxl IOThread's
#                command line (build/arms/notify-poll/obj); also ablation
#   fork         the full series (build/fork)
#   tapdisk      no QEMU: blktap's tapdisk (build/blktap, scripts/
#                build-blktap.sh) as XenServer runs it, `xensim run
#                --backend vbd3`: tapback, tap-ctl, vbd3 nodes with
#                polling-duration $BENCH_TAPDISK_POLL_US (default the
#                seed's 8000) and polling-idle-threshold
#                $BENCH_TAPDISK_IDLE (see below); file backend only
#                (tapdisk has no null-co). The seed's yardstick.
#   reference    no QEMU: fio on the host on the same backing store
#                (libaio on the tmpfs file, fio's null engine for null-co)
# The ablation arms are built from git worktrees of build/src at the
# series' commits (build/arms/<name>/{src,obj}) and reused; they are
# rebuilt (incrementally) only when that prefix of the series changed.
# If an arm's session dies (a QEMU crash) the crash is recorded, the
# session restarted and the cell run again.
#
# Backends, both in every session's QEMU:
#   file   a 1 GiB raw file on tmpfs (/dev/shm), attached as xvda (51712)
#          through xensim's libxl path (backendtype=qdisk); the tapdisk
#          arm serves the same file as xvda with aio: (O_DIRECT). When
#          the kernel's tmpfs refuses O_DIRECT (before Linux 6.6), every
#          arm and the reference get a loop device over that file
#          instead ($BENCH_STORE: auto, tmpfs or loop)
#   null   null-co (the dataplane alone), xvdb (51728), from
#          -blockdev null-co + -device xen-disk on the command line
#
# Sessions: each arm's host + QEMU starts once per repeat (`xensim run --
# scripts/bench/guest.sh`), serves every cell of that repeat, and stops;
# the four sessions of a repeat live side by side and the orchestrator
# alternates between them cell by cell (rotating the arm order).
#
# Placement: every session (xensim, xenstored, QEMU and its IOThreads) is
# pinned to CPU $BENCH_QEMU_CPU (1), the guest's fio to $BENCH_GUEST_CPU (0).
#
# Output: build/bench/<timestamp>/ (or $BENCH_OUT): raw/ (every run's
# files), meta/, results.json, results.md, chart.png. Overrides:
# BENCH_REPEATS, BENCH_RAMP, BENCH_RUNTIME, BENCH_BS, BENCH_QD, BENCH_RW,
# BENCH_RAND_BS, BENCH_RAND_QD, BENCH_RAND_RW (an empty list leaves that
# grid out), BENCH_BACKENDS ("file null"), BENCH_ARMS (subset, upstream
# always included), BENCH_POLL_NS,
# BENCH_TAPDISK_POLL_US, BENCH_TAPDISK_IDLE, BENCH_STORE,
# BENCH_DIRECT_IO_SAFE, BENCH_QEMU_TRACE (QEMU trace-event patterns,
# e.g. "poll_yiel* xen_block_*", enabled in every QEMU arm: their lines
# are in each session's xensim-logs.N/qemu-dm-*.log; tracing costs time,
# so meta/commands.txt records it).
set -euo pipefail

# The whole script is one brace group, parsed before it runs: editing this
# file while a (long) run goes on cannot derail that run.
{
mode=${1:-}
top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
here=$top/scripts/bench
. "$top/scripts/base.sh"      # BASE=X.Y: that base's trees (qb)
. "$top/scripts/bench/session.sh"   # sessions: start, send, run, stop
qb=$qbuild
base_tag=base/$QEMU_VERSION

case $mode in
full)
    bs_list=${BENCH_BS-"4k 64k 256k 1m 4m"}
    rand_bs_list=${BENCH_RAND_BS-"4k 64k"}
    rand_qd_list=${BENCH_RAND_QD-"1 16 32"}
    repeats=${BENCH_REPEATS:-8}
    # 1824 fio runs (38 cells; the file disk's four arms, null-co's two;
    # 8 repeats). A guest run costs its ramp + runtime plus ~1 s (fio
    # start, blkfront connect/disconnect, two QMP probes), a host run
    # ~0.5 s: about 50 minutes on 2 cores (docs/benchmarks.rst).
    ramp=${BENCH_RAMP:-200ms}
    runtime=${BENCH_RUNTIME:-500ms}
    ;;
quick)
    bs_list=${BENCH_BS-"4k 1m"}
    rand_bs_list=${BENCH_RAND_BS-"4k"}
    rand_qd_list=${BENCH_RAND_QD-"16"}
    repeats=${BENCH_REPEATS:-3}
    # 198 runs (the file disk's four arms, null-co's two; 11 cells, 3
    # repeats); 1 s each keeps it at about 7 minutes
    ramp=${BENCH_RAMP:-0}
    runtime=${BENCH_RUNTIME:-1s}
    ;;
*)
    echo "usage: $0 full|quick" >&2
    exit 2
    ;;
esac
qd_list=${BENCH_QD-"1 32"}
rw_list=${BENCH_RW-"read write"}
rand_rw_list=${BENCH_RAND_RW-"randread randwrite randrw"}
backends=${BENCH_BACKENDS:-"file null"}
poll_ns=${BENCH_POLL_NS:-8000000}        # the seed's poll-max-ns (8 ms)
# tapdisk's polling-duration (us): the seed's 8 ms too. Its idle gate:
# tapdisk polls only while cpumond's idle dom0 CPU exceeds this percent
# (xapi's default is 50). The seed's dom0 had CPUs to spare; here one
# polling thread is half of the machine, so at 50 the gate would shut
# tapdisk's polling whenever it polls: 0 keeps it open, as on the seed's
# host (docs/benchmarks.rst, "tapdisk's idle threshold").
tapdisk_poll_us=${BENCH_TAPDISK_POLL_US:-$((poll_ns / 1000))}
tapdisk_idle=${BENCH_TAPDISK_IDLE:-0}
# BENCH_DIRECT_IO_SAFE=1: the QEMU arms' libxl disk with xl's
# direct-io-safe (O_DIRECT and aio=native, tapdisk's way to the image)
# instead of libxl's default (buffered, aio=threads).
direct_io_safe=${BENCH_DIRECT_IO_SAFE:-0}
qemu_trace=${BENCH_QEMU_TRACE:-}
qemu_cpu=${BENCH_QEMU_CPU:-1}
guest_cpu=${BENCH_GUEST_CPU:-0}
ring_order=3                             # the seed's max_ring_page_order
mem_mb=256                               # guest: QD32 x 4 MiB buffers fit
disk_mb=1024
file_devid=51712                         # xvda, libxl's disk
. "$top/scripts/bench/null-disk.sh"      # null_devid, null_size, its args

xensim=$build/xensim/xensim/toolstack/xensim
engine=$build/xensim/xensim/fio/xenblk.so
fio=${FIO:-/usr/bin/fio}

# Arms: name, QEMU binary, git commit of build/src (ablations), and whether
# the build takes libxl's IOThread from the command line.
declare -A arm_qemu arm_commit arm_iothread_arg
# the default arms; the ablation arms (notify-only, notify+poll) and
# fork-noind and fork-buffered are asked for with BENCH_ARMS
all_arms=(upstream fork tapdisk)
arm_qemu[upstream]=$qb/upstream/obj/qemu-system-i386
arm_qemu[fork]=$qb/fork/qemu-system-i386
# fork-noind: the fork offering no indirect requests (indirect-requests
# =off), so the guest splits a large I/O into 11-segment requests as before;
# not in the default arms, ask for it with BENCH_ARMS
arm_qemu[fork-noind]=$qb/fork/qemu-system-i386
# fork-buffered: the fork opening libxl's disk buffered, as before patch
# 0034 (direct-io=off); not in the default arms either
arm_qemu[fork-buffered]=$qb/fork/qemu-system-i386
arm_qemu[notify-only]=$qb/arms/notify/obj/qemu-system-i386
arm_qemu[notify+poll]=$qb/arms/notify-poll/obj/qemu-system-i386
arm_iothread_arg=([upstream]=0 [notify-only]=0 [notify+poll]=1 [fork]=1
                  [fork-noind]=1 [fork-buffered]=1 [tapdisk]=-)
# BENCH_EXTRA_ARMS="NAME=QEMU ...": more arms, e.g. a proposed change
# built beside the fork (it takes libxl's IOThread from the command line,
# as the fork does); named in the results as given, after the others
for x in ${BENCH_EXTRA_ARMS:-}; do
    arm_qemu[${x%%=*}]=${x#*=}
    arm_iothread_arg[${x%%=*}]=1
done
blktap=$build/blktap/inst
. "$top/upstream/blktap.conf"

arms=()
for a in ${BENCH_ARMS:-${all_arms[*]}} $(for x in ${BENCH_EXTRA_ARMS:-}; do
                                             echo "${x%%=*}"; done); do
    # left out of the default arms when blktap could not be built
    if [ "$a" = tapdisk ] && [ -z "${BENCH_ARMS:-}" ] &&
       [ ! -x "$build/blktap/inst/libexec/tapdisk" ]; then
        echo "bench: WARNING: no tapdisk (make blktap): no tapdisk arm" >&2
        continue
    fi
    arms+=("$a")
done
[[ " ${arms[*]} " == *" upstream "* ]] || arms=(upstream "${arms[@]}")

log() { printf '%s\n' "$*" >&2; }
warn() { log "bench: WARNING: $*"; }
die() { log "bench: $*"; exit 1; }

# --- Build the ablation arms (once) -----------------------------------------

# Commit of build/src that ends with patch number $1: the n-th commit after
# the base tag (build/src is the series applied as commits, in order).
series_commit() {
    git -C "$qb/src" rev-list --reverse "$base_tag..HEAD" | sed -n "${1}p"
}

# Number of the patch whose subject is $1 (arms end at a named patch, so
# they keep their meaning when the series is reordered).
series_number() {
    git -C "$qb/src" log --reverse --format=%s "$base_tag..HEAD" |
        grep -n -x -F -- "$1" | cut -d: -f1
}
arm_last_notify="hw/block/xen-block: notify the frontend once per batch of completions"
arm_last_poll="hw/block/xen-block: let the command line tune a libxl disk's IOThread"

# build_arm NAME DIR N: QEMU with patches 0001..N in build/arms/DIR/obj, from
# a worktree of build/src (build/arms/DIR/src). Made once; moved to the
# series' current commit and rebuilt (incrementally, ccache) only when the
# tree of that prefix changed, so the arms follow the series.
build_arm() {
    local name=$1 dir=$2 n=$3 commit wt=$qb/arms/$2/src
    local obj=$qb/arms/$2/obj stamp
    [ -d "$qb/src/.git" ] || die "no build/src (make src)"
    [ -n "$n" ] || die "arm $name: its last patch is not in the series"
    commit=$(series_commit "$n")
    [ -n "$commit" ] || die "build/src has fewer than $n patches"
    # build/src made again (make src) leaves the old worktree dangling
    if [ -d "$wt" ] && ! git -C "$wt" rev-parse -q HEAD >/dev/null 2>&1; then
        rm -rf "$wt"
        git -C "$qb/src" worktree prune
    fi
    if [ ! -d "$wt" ]; then
        mkdir -p "$qb/arms/$dir"
        git -C "$qb/src" worktree add --detach "$wt" "$commit" >/dev/null
    elif [ "$(git -C "$wt" rev-parse 'HEAD^{tree}')" != \
           "$(git -C "$qb/src" rev-parse "$commit^{tree}")" ]; then
        git -C "$wt" checkout -q --detach "$commit"
    fi
    stamp=$(git -C "$wt" rev-parse 'HEAD^{tree}')
    if [ -x "$obj/qemu-system-i386" ] &&
       [ "$(cat "$obj/.arm-tree" 2>/dev/null)" = "$stamp" ]; then
        return 0
    fi
    log "bench: building arm $name (patches 0001-$(printf %04d "$n")," \
        "$(git -C "$wt" log -1 --format=%h)) into build/arms/$dir/obj"
    "$top/scripts/build-qemu.sh" "$wt" "$obj" "xenblk-arm-$dir" \
        > "$qb/arms/$dir.build.log" 2>&1 ||
        die "build of arm $name failed, see build/arms/$dir.build.log"
    echo "$stamp" > "$obj/.arm-tree"
}

for a in "${arms[@]}"; do
    case $a in
    notify-only) build_arm "$a" notify "$(series_number "$arm_last_notify")" ;;
    notify+poll) build_arm "$a" notify-poll "$(series_number "$arm_last_poll")" ;;
    tapdisk)
        [ -x "$blktap/libexec/tapdisk" ] ||
            die "no tapdisk in $blktap (make blktap)"
        continue ;;
    esac
    [ -x "${arm_qemu[$a]}" ] || die "no QEMU for arm $a: ${arm_qemu[$a]}"
done
for f in "$xensim" "$engine" "$fio"; do
    [ -e "$f" ] || die "missing $f (make build)"
done
command -v gnuplot >/dev/null || die "gnuplot missing (make deps)"

# --- Output directory and metadata ------------------------------------------

stamp=$(date -u +%Y%m%d-%H%M%S)
out=${BENCH_OUT:-$build/bench/$stamp}
mkdir -p "$out/raw" "$out/meta"
meta=$out/meta
lscpu > "$meta/lscpu.txt"
uname -a > "$meta/uname.txt"
nproc > "$meta/nproc.txt"
grep -m1 MemTotal /proc/meminfo > "$meta/meminfo.txt"
cat /etc/debian_version > "$meta/debian_version.txt" 2>/dev/null || true
"$fio" --version > "$meta/fio-version.txt"
uptime > "$meta/uptime-start.txt"
git -C "$top" describe --always --dirty > "$meta/repo.txt" 2>/dev/null || true
for a in "${arms[@]}"; do
    if [ "$a" = tapdisk ]; then
        echo "blktap $BLKTAP_VERSION ($BLKTAP_COMMIT) tapdisk" \
            > "$meta/qemu-version-$a.txt"
        echo "$blktap/libexec/tapdisk" > "$meta/qemu-path-$a.txt"
        continue
    fi
    "${arm_qemu[$a]}" --version | head -n 1 > "$meta/qemu-version-$a.txt"
    echo "${arm_qemu[$a]}" > "$meta/qemu-path-$a.txt"
done
for d in notify notify-poll; do
    if [ -d "$qb/arms/$d/src" ]; then
        git -C "$qb/arms/$d/src" log --oneline "$base_tag..HEAD" \
            > "$meta/series-$d.txt" 2>/dev/null || true
    fi
done
git -C "$qb/src" log --oneline "$base_tag..HEAD" \
    > "$meta/series-fork.txt" 2>/dev/null || true

# --- Backing store ---------------------------------------------------------

disk=/dev/shm/xenblk-bench-$$.raw
image=$disk
loopdev=
declare -A sess_pid sess_starts
sessions=()
cleanup() {
    kill_sessions
    [ -z "$loopdev" ] || losetup -d "$loopdev" 2>/dev/null || true
    rm -f "$image"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# Written out (not sparse): reads then touch real tmpfs pages, as writes do.
dd if=/dev/zero of="$disk" bs=1M count=$disk_mb status=none

# tapdisk opens its image O_DIRECT; tmpfs takes that from Linux 6.6 on.
# Otherwise every arm (and the reference) uses a loop device over the
# same file: the same RAM, each backend with its own open mode.
store=${BENCH_STORE:-auto}
if [ "$store" = auto ]; then
    store=tmpfs
    dd if="$disk" of=/dev/null bs=4k count=1 iflag=direct status=none \
        2>/dev/null || store=loop
fi
case $store in
tmpfs) ;;
loop)
    loopdev=$(losetup --find --show "$disk") || die "losetup failed"
    disk=$loopdev
    log "bench: store: loop device $disk over $image (tmpfs O_DIRECT:" \
        "$(dd if="$image" of=/dev/null bs=4k count=1 iflag=direct \
           status=none 2>&1 && echo accepted || echo refused))" ;;
*) die "BENCH_STORE=$store: auto, tmpfs or loop" ;;
esac

# --- QEMU arguments (the same for every arm) --------------------------------

# null-co device with its own IOThread, polled like libxl's disk.
# libxl's disk (xvda) gets its IOThread's poll-max-ns the seed's way,
# `-object iothread,id=xvda,poll-max-ns=N` (device_model_args_pv), on the
# arms that take libxl's IOThread from the command line. Upstream and
# notify-only make that IOThread themselves and fail on a duplicate id, so
# they get the same setting by QMP qom-set at session start.
# query-iothreads then shows the same poll-max-ns on every arm (recorded in
# every run's snapshot). Without the polling patches the setting has no
# effect: nothing polls.
arm_args() {
    local a=$1 t traces
    if [ "$a" = tapdisk ]; then
        printf '%s\n' --backend vbd3 --disk "$disk" --mem "$mem_mb" \
            --blktap "$blktap" --polling-duration "$tapdisk_poll_us" \
            --polling-idle-threshold "$tapdisk_idle"
        return
    fi
    printf '%s\n' --qemu "${arm_qemu[$a]}" --disk "$disk" --mem "$mem_mb"
    if [ "$a" = notify+poll ]; then
        null_disk_args "$poll_ns" fork     # before merging (and its property)
    elif [ "${arm_iothread_arg[$a]}" = 1 ]; then
        null_disk_args "$poll_ns" fork merge
    else
        null_disk_args "$poll_ns"
    fi
    [ "$direct_io_safe" = 0 ] || printf '%s\n' --direct-io-safe
    read -ra traces <<< "$qemu_trace"   # split, not expanded here
    for t in "${traces[@]}"; do
        printf '%s\n' --qemu-arg=-trace "--qemu-arg=enable=$t"
    done
    [ "$a" != fork-noind ] || printf '%s\n' --qemu-arg=-global \
        --qemu-arg=xen-disk.indirect-requests=off
    [ "$a" != fork-buffered ] || printf '%s\n' --qemu-arg=-global \
        --qemu-arg=xen-disk.direct-io=off
    if [ "${arm_iothread_arg[$a]}" = 1 ]; then
        printf '%s\n' --qemu-arg=-object \
            --qemu-arg="iothread,id=xvda,poll-max-ns=$poll_ns,poll-yield=on" \
            --qemu-arg=-global --qemu-arg=xen-disk.polling=on
    fi
}

{
    echo "mode=$mode repeats=$repeats ramp=$ramp runtime=$runtime"
    echo "bs=$bs_list qd=$qd_list rw=$rw_list poll_ns=$poll_ns" \
         "rand_bs=${rand_bs_list// /,} rand_qd=${rand_qd_list// /,}" \
         "rand_rw=${rand_rw_list// /,}"
    echo "qemu_cpu=$qemu_cpu guest_cpu=$guest_cpu ring_order=$ring_order" \
         "store=$store tapdisk_poll_us=$tapdisk_poll_us" \
         "tapdisk_idle_threshold=$tapdisk_idle direct_io_safe=$direct_io_safe" \
         "qemu_trace=${qemu_trace// /,}"
    for a in "${arms[@]}"; do
        printf 'arm %s: taskset -c %s %s run' "$a" "$qemu_cpu" "$xensim"
        mapfile -t args < <(arm_args "$a")
        printf ' %q' "${args[@]}"
        printf ' -- scripts/bench/guest.sh SESSION'
        [ "${arm_iothread_arg[$a]}" != 0 ] ||
            printf ' (then QMP qom-set /objects/xvda poll-max-ns=%s)' \
                "$poll_ns"
        echo
    done
} > "$meta/commands.txt"

# --- Sessions -----------------------------------------------------------------

# The session plumbing (start, send, run and restart, stop) is
# scripts/bench/session.sh's.
session_ready_s=60
# session_exec ARM SDIR N ARGS...: an arm's host + QEMU for one repeat,
# pinned, with guest.sh's environment (see start_session)
session_exec() {
    local a=$1 sdir=$2 n=$3
    shift 3
    export BENCH_ENGINE=$engine BENCH_GUEST_CPU=$guest_cpu
    [ "${arm_iothread_arg[$a]}" != 0 ] ||
        export BENCH_QOM_POLL="xvda=$poll_ns"
    exec taskset -c "$qemu_cpu" "$xensim" run "$@" \
        --log-dir "$sdir/xensim-logs.$n" -- "$here/guest.sh" "$sdir"
}

# fio job options of one cell (shared by the guest and the reference)
cell_args() {
    local bs=$1 qd=$2 rw=$3 mix=""
    # randrw is the 70/30 mix databases are measured with; the random
    # offsets come from fio's default seed, the same sequence on every arm
    [ "$rw" = randrw ] && mix=" --rwmixread=70"
    echo "--name=cell --rw=$rw --bs=$bs --iodepth=$qd --direct=1" \
         "--time_based --ramp_time=$ramp --runtime=$runtime$mix"
}

# run_xen ARM SDIR ID DEVID ARGS: one fio run in a session; waits for it.
# A session that died (a QEMU crash) is restarted and the cell run again,
# up to 3 times (run_in_session).
run_xen() {
    local a=$1 sdir=$2 id=$3 devid=$4 args=$5
    run_in_session "$a" "$sdir" "$id" 4 \
        "$id $devid $args --ring_order=$ring_order"
}

# run_ref DIR ID BACKEND ARGS: fio on the host, same store, no Xen
run_ref() {
    local dir=$1 id=$2 backend=$3 args=$4
    mkdir -p "$dir"
    # shellcheck disable=SC2086
    if [ "$backend" = file ]; then
        taskset -c "$guest_cpu" "$fio" $args --ioengine=libaio \
            --filename="$disk" --output-format=json \
            --output="$dir/$id.fio.json" > "$dir/$id.fio.log" 2>&1
    else
        taskset -c "$guest_cpu" "$fio" $args --ioengine=null \
            --size="$null_size" --output-format=json \
            --output="$dir/$id.fio.json" > "$dir/$id.fio.log" 2>&1
    fi || die "reference fio failed ($id): $(tail -n 5 "$dir/$id.fio.log")"
}

# MB/s (10^6 bytes) of a fio JSON run, reads + writes
mbps() {
    jq -r '[.jobs[0].read.bw_bytes, .jobs[0].write.bw_bytes] | add / 1e6
           | . * 10 | round / 10' "$1"
}

cells=()
for qd in $qd_list; do
    for bs in $bs_list; do
        for rw in $rw_list; do
            cells+=("$bs:$qd:$rw")
        done
    done
done
for qd in $rand_qd_list; do
    for bs in $rand_bs_list; do
        for rw in $rand_rw_list; do
            cells+=("$bs:$qd:$rw")
        done
    done
done
all=("${arms[@]}" reference)
ncells=${#cells[@]}
log "bench: $mode grid, ${#cells[@]} cells x $(wc -w <<< "$backends") backends x ${#all[@]} arms" \
    "x $repeats repeats -> $out"
log "bench: sequential and random I/O, direct=1, QEMU on CPU" \
    "$qemu_cpu, guest fio on CPU $guest_cpu"
t0=$(date +%s)

for ((r = 1; r <= repeats; r++)); do
    rdir=$(printf '%s/raw/r%02d' "$out" "$r")
    start_repeat "$rdir" "${arms[@]}"
    for ((c = 0; c < ncells; c++)); do
        IFS=: read -r bs qd rw <<< "${cells[$c]}"
        args=$(cell_args "$bs" "$qd" "$rw")
        # rotate the arm order from cell to cell and repeat to repeat
        order=()
        for ((i = 0; i < ${#all[@]}; i++)); do
            order+=("${all[$(( (i + c + r) % ${#all[@]} ))]}")
        done
        for backend in $backends; do
            id=$backend-$bs-qd$qd-$rw
            line=""
            for a in "${order[@]}"; do
                # tapdisk has no null-co: it serves the file cells only;
                # nor has the reference (fio's null engine on the host
                # measures nothing the arms share)
                [ "$a" = tapdisk ] || [ "$a" = reference ] &&
                    [ "$backend" = null ] && continue
                if [ "$a" = reference ]; then
                    run_ref "$rdir/reference" "$id" "$backend" "$args"
                    f=$rdir/reference/$id.fio.json
                else
                    devid=$file_devid
                    [ "$backend" = null ] && devid=$null_devid
                    run_xen "$a" "$rdir/$a" "$id" "$devid" "$args"
                    f=$rdir/$a/$id.fio.json
                fi
                line+=" $a=$(mbps "$f")"
            done
            log "$(printf '[%ds] r%d/%d %-5s %4s QD%-2s %-5s MB/s:%s' \
                "$(( $(date +%s) - t0 ))" "$r" "$repeats" "$backend" \
                "$bs" "$qd" "$rw" "$line")"
        done
    done
    stop_sessions "${arms[@]}"
done
uptime > "$meta/uptime-end.txt"

# --- Analysis -------------------------------------------------------------------

python3 "$here/analyze.py" "$out"
(cd "$out" && gnuplot chart.gp) || die "gnuplot failed"
if [ "$mode" = quick ] && [ -n "${BENCH_CONFIRM:-}" ]; then
    python3 "$here/analyze.py" --confirm "$out" || exit 4
elif [ "$mode" = quick ]; then
    rc=0
    python3 "$here/analyze.py" --check "$out" || rc=$?
    if [ "$rc" = 3 ]; then
        # The guard tripped: the tripped cells again, alone and longer
        # (analyze.py, RANDOM_GUARD). Lines: backend bs qd rw.
        pick() { cut -d' ' -f"$1" "$out/guard-tripped.txt" | sort -u |
                 tr '\n' ' '; }
        BENCH_CONFIRM=1 BENCH_OUT=$out/confirm BENCH_ARMS=fork BENCH_BS='' \
            BENCH_BACKENDS="$(pick 1)" BENCH_RAND_BS="$(pick 2)" \
            BENCH_RAND_QD="$(pick 3)" BENCH_RAND_RW="$(pick 4)" \
            BENCH_REPEATS=12 "$0" quick || exit $?
    elif [ "$rc" != 0 ]; then
        exit "$rc"
    fi
fi
log "bench: done in $(( $(date +%s) - t0 ))s: $out/results.md"
exit 0
}
