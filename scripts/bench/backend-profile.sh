#!/bin/bash
# Per-I/O profile of one bench cell's backend process, QEMU or tapdisk:
# what the whole process does for each guest I/O (system calls by kind,
# context switches, CPU), counted by `perf stat` on its tracepoints for
# the length of one fio run, with the bench's setup (scripts/bench.sh:
# 8 ms polling, ring order 3, 1 GiB written-out raw file on tmpfs, the
# session on CPU 1, the guest's fio on CPU 0).
#
# Usage: [POLL_NS=N] [POLLING=off] [POLL_YIELD=off] [DISK=null]
#        [QEMU_ARGS="ARG ..."]
#        scripts/bench/backend-profile.sh ARM RW BS QD [SECONDS]
#   POLLING=off: the fork's disk does not poll its ring (xen-disk's
#   polling property; its IOThread still polls its notifier for POLL_NS);
#   POLL_YIELD=off: the fork's IOThread does not pause polling when it
#   loses its CPU (poll-yield)
#   ARM: upstream, fork, fork-native (the fork with xl's direct-io-safe:
#   O_DIRECT, aio=native) or tapdisk; e.g. ... tapdisk read 1m 1 3
#   DISK=null: the bench's null-co disk instead (xvdb, its own IOThread
#   polled at POLL_NS; not on tapdisk, which has no null driver)
#   QEMU_ARGS: more arguments for the fork's QEMU, split at blanks, e.g.
#   "-global xen-disk.max-merge-size=256K"; FORK_QEMU: another build of
#   it (a proposed change, as bench.sh's BENCH_EXTRA_ARMS)
# Prints one line of per-I/O figures, then one per kind of thread (by
# name: QEMU runs with debug-threads=on) with its CPU time and its time
# runnable but waiting for a CPU (run queue, from schedstat), per I/O.
# PERF_RECORD=1 also samples the process (perf record -g, 999 Hz) and
# prints its top symbols (self time). The output directory (kept) is
# printed first.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/scripts/bench/null-disk.sh"
syscalls="select pselect6 ppoll epoll_wait io_submit io_getevents read
          write pread64 preadv pwritev preadv2 pwritev2 futex ioctl"
# "tid name cpu_ns runqueue_ns" for every thread of process $1
threads_snapshot() {
    local t name stat
    for t in /proc/"$1"/task/*; do
        read -r name <"$t/comm" && read -r stat <"$t/schedstat" &&
            echo "${t##*/} ${name// /_} $stat"
    done
}
if [ "${1:-}" = --guest ]; then
    # Inside `xensim run`: the backend's pid, counted while fio runs
    out=$2 rw=$3 bs=$4 qd=$5 secs=$6
    devid=51712                         # xvda, the libxl disk
    [ "${DISK:-file}" = file ] || devid=$null_devid
    if [ -n "${XENSIM_TAPDISK_PID:-}" ]; then
        pid=$XENSIM_TAPDISK_PID
    else
        pid=$(pgrep -P "$PPID" qemu-system)
        [ -z "${QOM_POLL:-}" ] || python3 "$top/scripts/bench/probe.py" \
            --qom-set-poll "$XENSIM_QMP" xvda "$QOM_POLL"
    fi
    events=context-switches,task-clock
    for s in $syscalls; do events+=,syscalls:sys_enter_$s; done
    perf stat -x, -e "$events" -p "$pid" -o "$out/perf.csv" &
    stat_pid=$!
    if [ "${PERF_RECORD:-0}" = 1 ]; then
        perf record -q -g -F 999 -p "$pid" -o "$out/perf.data" \
            >/dev/null 2>&1 &
        rec_pid=$!
    fi
    sleep 0.3
    threads_snapshot "$pid" >"$out/threads.before"
    taskset -c 0 fio --name=p \
        --ioengine=external:"$top/build/xensim/xensim/fio/xenblk.so" \
        --devid="$devid" --rw="$rw" --bs="$bs" --iodepth="$qd" --direct=1 \
        --ring_order=3 --rwmixread=70 --time_based --runtime="$secs" \
        --output-format=json --output="$out/fio.json" >"$out/fio.log" 2>&1
    threads_snapshot "$pid" >"$out/threads.after"
    kill -INT "$stat_pid" ${rec_pid:+"$rec_pid"}
    wait || true
    exit 0
fi

arm=${1:?usage: $0 upstream|fork|fork-native|tapdisk RW BS QD [SECONDS]}
rw=${2:?} bs=${3:?} qd=${4:?} secs=${5:-3}
[ -z "${QEMU_ARGS:-}${FORK_QEMU:-}" ] || [[ $arm == fork* ]] ||
    { echo "backend-profile: QEMU_ARGS and FORK_QEMU are for the fork's arms" >&2
      exit 2; }
[ "${DISK:-file}:$arm" != null:tapdisk ] ||
    { echo "backend-profile: tapdisk has no null-co" >&2; exit 2; }
out=$(mktemp -d /tmp/backend-profile.XXXXXX)
echo "backend-profile: $out"
disk=/dev/shm/backend-profile-$$.raw
trap 'rm -f "$disk"' EXIT
dd if=/dev/zero of="$disk" bs=1M count=1024 status=none
args=()
# Threads named by their role (IO <iothread id>, worker, ...)
qemu_threads=(--qemu-arg=-name --qemu-arg=guest,debug-threads=on)
case $arm in
tapdisk)
    args=(--backend vbd3 --polling-duration $(( ${POLL_NS:-8000000} / 1000 ))
          --polling-idle-threshold 0) ;;
fork | fork-native)
    # fork-native: xl's direct-io-safe (O_DIRECT, aio=native: no thread
    # pool between the IOThread and the image, as tapdisk's libaio)
    [ "$arm" = fork ] || args=(--direct-io-safe)
    args+=(--qemu "${FORK_QEMU:-$top/build/fork/qemu-system-i386}"
          "${qemu_threads[@]}"
          --qemu-arg=-object --qemu-arg=iothread,id=xvda,poll-max-ns=${POLL_NS:-8000000},poll-yield=${POLL_YIELD:-on}
          --qemu-arg=-global --qemu-arg=xen-disk.polling=${POLLING:-on})
    read -ra extra <<< "${QEMU_ARGS:-}"
    for x in "${extra[@]}"; do args+=("--qemu-arg=$x"); done ;;
upstream)
    args=(--qemu "$top/build/upstream/obj/qemu-system-i386"
          "${qemu_threads[@]}")
    export QOM_POLL=${POLL_NS:-8000000} ;;
*) echo "backend-profile: ARM is upstream, fork, fork-native or tapdisk" >&2
   exit 2 ;;
esac
case ${DISK:-file} in
file) ;;
null) mapfile -t -O "${#args[@]}" args \
          < <(null_disk_args "${POLL_NS:-8000000}" \
                             $([[ $arm == fork* ]] && echo fork merge)) ;;
*) echo "backend-profile: DISK is file or null" >&2; exit 2 ;;
esac
taskset -c 1 "$top/build/xensim/xensim/toolstack/xensim" run "${args[@]}" \
    --disk "$disk" --mem 256 --log-dir "$out/logs" \
    -- "$0" --guest "$out" "$rw" "$bs" "$qd" "$secs" >"$out/run.log" 2>&1 ||
    { cat "$out/run.log" >&2; exit 1; }
python3 - "$out" "$arm" "$rw" "$bs" "$qd" <<'PY'
import json, sys
out, arm, rw, bs, qd = sys.argv[1:]
j = json.load(open(out + "/fio.json"))["jobs"][0]
ios = j["read"]["total_ios"] + j["write"]["total_ios"]
mbps = (j["read"]["bw_bytes"] + j["write"]["bw_bytes"]) / 1e6
c = {}
for line in open(out + "/perf.csv"):
    f = line.strip().split(",")
    if len(f) > 2 and f[0] and f[0][0].isdigit():
        c[f[2].replace("syscalls:sys_enter_", "").split(":")[-1]] = \
            float(f[0])
per = ", ".join("%s %.2f" % (k, v / ios) for k, v in sorted(c.items())
                if k not in ("task-clock", "context-switches") and v)
print("%s %s %s QD%s: %.0f MB/s; per I/O: CPU %.1f us, ctx-sw %.2f; "
      "syscalls: %s" % (arm, rw, bs, qd, mbps,
                        c.get("task-clock", 0) * 1e3 / ios,
                        c.get("context-switches", 0) / ios, per))

def threads(name):
    t = {}
    for line in open(out + "/" + name):
        tid, comm, cpu, wait = line.split()[:4]
        t[tid] = (comm, int(cpu), int(wait))
    return t
before, after = threads("threads.before"), threads("threads.after")
kinds = {}
for tid, (comm, cpu, wait) in after.items():
    _, cpu0, wait0 = before.get(tid, (comm, 0, 0))
    k = kinds.setdefault(comm, [0, 0, 0])
    k[0] += 1
    k[1] += cpu - cpu0
    k[2] += wait - wait0
for comm, (n, cpu, wait) in sorted(kinds.items(), key=lambda x: -x[1][1]):
    if cpu or wait:
        print("  %-16s x%-3d per I/O: CPU %.2f us, waiting for a CPU %.2f us"
              % (comm, n, cpu / 1e3 / ios, wait / 1e3 / ios))
PY
if [ "${PERF_RECORD:-0}" = 1 ]; then
    perf report -i "$out/perf.data" --stdio --no-children --sort sym \
        2>/dev/null | grep -E '^ +[0-9]' | head -n 15
fi
