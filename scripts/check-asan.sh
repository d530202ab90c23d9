#!/bin/bash
# make check-asan: pristine QEMU, the fork and xensim built with
# AddressSanitizer (with LeakSanitizer) and UndefinedBehaviorSanitizer,
# then xensim's suites (unit, integration, data integrity, fuzz) on both
# arms and the series' qtests on the fork, under them.
#
# Usage: check-asan.sh FORK_PKGVERSION QTEST...
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
asan=$build/asan
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

"$top/scripts/build-qemu.sh" "$build/upstream/src" "$asan/upstream" "" \
    -- "${san[@]}"
XENSIM_BUILD=$asan/xensim \
NINJA_TARGETS="${qtests[*]/#/tests/qtest/}" \
    "$top/scripts/build-qemu.sh" "$build/src" "$asan/fork" "$pkgversion" \
    -- "${san[@]}"

rm -rf "$reports"
mkdir -p "$reports"
# verify_asan_link_order=0: the shim is LD_PRELOADed ahead of QEMU's own
# libasan. XENSIM_PRELOAD puts the ASan runtime first in processes whose
# binary is not instrumented but load the instrumented shim or fio engine
# (Debian's xenstored, fio).
export ASAN_OPTIONS="verify_asan_link_order=0:detect_leaks=1:log_path=$reports/asan:print_suppressions=0"
export LSAN_OPTIONS="suppressions=$top/scripts/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan"
XENSIM_PRELOAD=$(gcc -print-file-name=libasan.so)
export XENSIM_PRELOAD

rc=0
echo "== check-asan: xensim's suites, pristine QEMU $asan/upstream"
QEMU_UPSTREAM=$asan/upstream/qemu-system-i386 \
    meson test -C "$asan/xensim" --print-errorlogs \
    --timeout-multiplier 3 || rc=1
echo "== check-asan: integrity suite, the fork $asan/fork"
QEMU_UPSTREAM=$asan/fork/qemu-system-i386 \
    meson test -C "$asan/xensim" --print-errorlogs --suite integrity \
    --timeout-multiplier 3 || rc=1
echo "== check-asan: the series' qtests"
(cd "$asan/fork" && PATH=$build/tools/path meson test --no-rebuild \
    --print-errorlogs --timeout-multiplier 3 \
    "${qtests[@]/#/qtest-i386/}") || rc=1

# Figures. A report file may hold only warnings (ASan's note on
# swapcontext in a process whose binary is not instrumented); count the
# errors themselves.
count() {
    cat "$reports"/$1.* 2>/dev/null | grep -cE "$2" || true
}
n_asan=$(count asan 'ERROR: AddressSanitizer')
n_leak=$(count asan 'ERROR: LeakSanitizer')
n_ubsan=$(count ubsan 'runtime error:')
echo "check-asan: AddressSanitizer errors $n_asan, LeakSanitizer reports" \
     "$n_leak, UBSan errors $n_ubsan"
if [ $((n_asan + n_leak + n_ubsan)) -gt 0 ]; then
    for f in $(grep -lE 'ERROR: |runtime error:' "$reports"/*); do
        echo "---- $f"
        head -n 80 "$f"
    done
    rc=1
fi
exit $rc
