#!/bin/bash
# make check-asan: the fork and xensim built with AddressSanitizer (with
# LeakSanitizer) and UndefinedBehaviorSanitizer, then xensim's suites
# (unit, integration, data integrity, fuzz, the disk-spec matrix), the
# series' qtests and a mirror loop on the fork, under them.
#
# Usage: [ASAN_UPSTREAM=1] check-asan.sh FORK_PKGVERSION QTEST...
#
# ASAN_UPSTREAM=1 (make check-asan-upstream) builds pristine QEMU the same
# way and runs xensim's suites and the fuzzer on it first: a report on
# what the series fixes, not a test of the fork, so make check (CI's
# budget: one ASan QEMU build, not two) leaves it out.
#
# Builds go to build/asan/{upstream,fork,xensim}. Every sanitizer report
# goes to a file in build/asan/reports/ (log_path) instead of a test's
# stderr; any report fails the run, after the suites, with the reports
# printed. UBSan halts on its first report, so a test that meets one
# fails too. Leaks are checked at exit of every instrumented process
# (QEMU quits on SIGTERM through qemu_cleanup()).
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
pkgversion=${1:?usage: check-asan.sh FORK_PKGVERSION QTEST...}
shift
qtests=("$@")
build=$top/build
. "$top/scripts/base.sh"        # BASE=X.Y: that base's trees (qbuild)
asan=$qbuild/asan
reports=$asan/reports
san=(-Dasan=true -Dubsan=true)

# xensim, instrumented the same way (b_lundef=false: the sanitizer
# runtimes' symbols are resolved at run time in shared objects).
if [ ! -f "$asan/xensim/build.ninja" ]; then
    meson setup "$asan/xensim" "$top" \
        -Db_sanitize=address,undefined -Db_lundef=false \
        -Dqemu_upstream="$asan/upstream/qemu-system-i386" \
        -Dqemu_fork="$asan/fork/qemu-system-i386" >/dev/null
fi
ninja -C "$asan/xensim" >/dev/null

with_upstream=${ASAN_UPSTREAM:-0}
if [ "$with_upstream" = 1 ]; then
    "$top/scripts/build-qemu.sh" "$qbuild/upstream/src" "$asan/upstream" "" \
        -- "${san[@]}"
fi
XENSIM_BUILD=$asan/xensim \
NINJA_TARGETS="${qtests[*]/#/tests/qtest/}" \
    "$top/scripts/build-qemu.sh" "$qbuild/src" "$asan/fork" "$pkgversion" \
    -- "${san[@]}"

rm -rf "$reports"
mkdir -p "$reports"
# verify_asan_link_order=0: the shim is LD_PRELOADed ahead of QEMU's own
# libasan. XENSIM_PRELOAD puts the ASan runtime first in processes whose
# binary is not instrumented but load the instrumented shim or fio engine
# (Debian's xenstored, fio).
# max_allocation_size_mb: a runaway allocation is an ASan error (the
# fuzzer's RLIMIT_AS cap cannot be used with ASan's shadow memory).
asan_opts=verify_asan_link_order=0:detect_leaks=1:max_allocation_size_mb=2048
export LSAN_OPTIONS="suppressions=$top/scripts/lsan.supp:print_suppressions=0"
XENSIM_PRELOAD=$(gcc -print-file-name=libasan.so)
export XENSIM_PRELOAD
# Pristine QEMU has UB that the series fixes: scripts/ubsan-upstream.supp
# names it, for the upstream arm only.
up_supp=suppressions=$top/scripts/ubsan-upstream.supp

# phase NAME UBSAN_EXTRA CMD...: run CMD with its reports in
# $reports/NAME/: the files of log_path, the meson log, and the device
# models' logs of the runs it made (their stderr). Sets $rc on failure.
rc=0
phases=()
phase() {
    local name=$1 extra=$2 d=$reports/$1
    shift 2
    mkdir -p "$d"
    touch "$d/.start"
    phases+=("$name")
    echo "== check-asan: $name"
    ASAN_OPTIONS="$asan_opts:log_path=$d/asan" \
    UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$d/ubsan${extra:+:$extra}" \
        "$@" || rc=1
    if [ -d "$build/runs" ]; then
        find "$build/runs" -type f -name '*.log' -newer "$d/.start" \
            -exec cp --backup=numbered -t "$d" {} +
    fi
}
mt=(meson test -C "$asan/xensim" --print-errorlogs --timeout-multiplier 3)

# xensim's own suites run once, through whichever QEMU comes first: the
# integration tests take the QEMU of QEMU_UPSTREAM.
if [ "$with_upstream" = 1 ]; then
    phase upstream-suites "$up_supp" env QEMU_UPSTREAM="$asan/upstream/qemu-system-i386" \
        "${mt[@]}" --suite xensim --suite integrity --logbase upstream-suites
    phase upstream-fuzz "$up_supp" "${mt[@]}" fuzz-upstream --logbase upstream-fuzz
    phase fork-integrity "" env QEMU_UPSTREAM="$asan/fork/qemu-system-i386" \
        "${mt[@]}" --suite integrity --logbase fork-integrity
else
    phase fork-suites "" env QEMU_UPSTREAM="$asan/fork/qemu-system-i386" \
        "${mt[@]}" --suite xensim --suite integrity --logbase fork-suites
fi
phase fork-fuzz "" "${mt[@]}" fuzz-fork --logbase fork-fuzz
phase fork-specs "" "${mt[@]}" specs-fork --logbase fork-specs
# One at a time, as make check-qtest runs them
phase fork-qtests "" env -C "$asan/fork" PATH="$build/tools/path" \
    meson test --no-rebuild --print-errorlogs --timeout-multiplier 3 \
    --num-processes 1 --logbase fork-qtests "${qtests[@]/#/qtest-i386/}"
# Drains under guest I/O (scripts/mirror-loop.sh), with the plain xensim
phase fork-mirror "" env QEMU_FORK="$asan/fork/qemu-system-i386" \
    MIRROR_LOOPS=1 "$top/scripts/mirror-loop.sh" fork
for f in upstream-suites upstream-fuzz fork-suites fork-integrity fork-fuzz \
         fork-specs; do
    cp "$asan/xensim/meson-logs/$f.txt" "$reports/$f/" 2>/dev/null || true
done
cp "$asan/fork/meson-logs/fork-qtests.txt" "$reports/fork-qtests/" ||
    true

# Count errors, not files: a report file may hold only warnings (ASan's
# note on swapcontext in a process whose binary is not instrumented).
# The fuzzer's expected failures on pristine QEMU (--xfail: the bugs the
# series fixes) crash it, and ASan reports those crashes: upstream-fuzz
# is shown, not judged.
printf '%-16s %6s %6s %6s\n' phase asan leaks ubsan
for p in "${phases[@]}"; do
    d=$reports/$p
    n_asan=$(cat "$d"/* | grep -c 'ERROR: AddressSanitizer' || true)
    n_leak=$(cat "$d"/* | grep -c 'ERROR: LeakSanitizer' || true)
    n_ubsan=$(cat "$d"/* | grep -c 'runtime error:' || true)
    note=
    if [ "$p" = upstream-fuzz ]; then
        note="  (expected: crashes of the fuzzer's --xfail cases)"
    elif [ $((n_asan + n_leak + n_ubsan)) -gt 0 ]; then
        note="  FAIL"
        rc=1
        grep -rlE 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$d" |
        while IFS= read -r f; do
            echo "---- $f"
            grep -m 3 -A 25 -E 'ERROR: (Address|Leak)Sanitizer|runtime error:' "$f"
        done
    fi
    printf '%-16s %6d %6d %6d%s\n' "$p" "$n_asan" "$n_leak" "$n_ubsan" "$note"
done
echo "check-asan: reports in $reports"
exit $rc
