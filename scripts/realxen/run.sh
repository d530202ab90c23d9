#!/bin/bash
# The real-Xen test (docs/real-xen.rst): Debian's Xen 4.17, a dom0 made
# of Debian 12 packages and Linux PV domUs, all inside
# `qemu-system-x86_64 -accel tcg -cpu qemu64`. In one boot, one domU per
# arm, one after the other; libxl serves each domU's qdisk disks with
# that arm's QEMU (device_model_override), Linux's xen-blkfront uses
# them: fio verify, sha256, flush, discard, mkfs/fsck, ring orders,
# hot-plug, detach during I/O, read-only and cdrom disks
# (scripts/realxen/domu-jobs.sh). The fork arms run first, from the
# Debian package (make deb) that dom0 installs with dpkg -i; dom0 removes
# it with dpkg -r after them and checks it is as before; then upstream's
# arm, from the payload.
#
# Usage: scripts/realxen/run.sh ci|smoke|full
#   smoke  arms upstream and fork, ring order 4 only, no counters
#   ci     smoke, less pristine QEMU's two known failures that cost a
#          timeout each (the ro disk never attaches, the re-attach after a
#          failure; about 3 minutes together): make check runs this one
#   full   arms upstream, fork, fork-noind (the fork with libxl's
#          device_model_args_pv -global xen-block.indirect-requests=off),
#          fork-iothread (device_model_args_pv IOThread,
#          poll-max-ns=8000000), ring orders 0 and 4, flush, discard, the
#          per-I/O counters; fork-ind256 (the fork, the domU's blkfront
#          loaded with max_indirect_segments=256: one blkif request per
#          1 MiB I/O) and blkback (no QEMU: dom0's xen-blkback serves a
#          phy: disk), whose domUs run the counters only
# Env: QEMU_UPSTREAM, QEMU_FORK (default: build/upstream/obj and build/fork
#      qemu-system-i386), FORK_DEB (the fork's package, made from
#      QEMU_FORK; default: build/deb/'s); REALXEN_ARMS (a subset of the
#      mode's arms).
# Output: build/realxen/runs/<time>/ (console.log, results.txt,
#      counters.txt); build/realxen/latest links to it. Exits 1 when a
#      case fails, an expected failure passes (strict) or a case is missing.
set -euo pipefail

# One brace group, parsed before it runs: editing this file while a (long)
# run goes on cannot derail that run.
{
mode=${1:-}
top=$(cd "$(dirname "$0")/../.." && pwd)
here=$top/scripts/realxen
img=$top/build/realxen
QEMU_UPSTREAM=${QEMU_UPSTREAM:-$top/build/upstream/obj/qemu-system-i386}
QEMU_FORK=${QEMU_FORK:-$top/build/fork/qemu-system-i386}
FORK_DEB=${FORK_DEB:-$(ls "$top"/build/deb/xenblk-qemu_*_amd64.deb 2>/dev/null | tail -n 1)}
# where the package puts the fork (packaging/debian/README.Debian)
FORK_INSTALLED=/usr/lib/xenblk/bin/qemu-system-i386
POLL_NS=8000000                    # the seed's poll-max-ns (8 ms)

case $mode in
smoke|ci) arms=(fork upstream) ;;
full)  arms=(fork fork-noind fork-ind256 fork-iothread upstream blkback) ;;
*) echo "usage: $0 ci|smoke|full" >&2; exit 2 ;;
esac
[ -z "${REALXEN_ARMS:-}" ] || read -r -a arms <<< "$REALXEN_ARMS"

# Pristine QEMU 10.2.2's expected failures: case -> the subject of the
# patch of the series that fixes it (its number is looked up at run time)
declare -A XFAIL=(
    [upstream:ro]="open a read-only disk read-only at the format layer"
    [upstream:hotplug-features]="announce InitWait only after the device wrote its features"
    [upstream:reattach-after-failure]="forget a backend that failed once its node is gone"
    [upstream:blockstats-o0]="account cache flushes and discards in blockstats"
    [upstream:blockstats-o4]="account cache flushes and discards in blockstats"
)

# Pristine QEMU's known failures that do not show in every run: case ->
# the subject of the patch that fixes it. They pass or fail (XFAIL); the
# cases that need the QEMU such a failure killed are left out (SKIP).
declare -A SOMETIMES=(
    [upstream:detach-inflight]="take no request in drains, wait for all before unmap"
)
# case -> the case before it whose failure leaves it out (domu-jobs.sh)
declare -A AFTER=([after-detach-xvda]=detach-inflight [reattach]=detach-inflight)

log() { echo "realxen: $*" >&2; }
die() { log "$*"; exit 1; }

# Cases the ci mode leaves out, per arm: expected failures that end in a
# timeout (make check-xen-smoke and check-xen run them)
declare -A CI_SKIP=([upstream]="ro reattach-after-failure")

# patch_ref SUBJECT: "NNNN full subject" of the patch of patches/series
# whose subject ends with SUBJECT (empty if none)
patch_ref() {
    local n=0 f s
    while read -r f; do
        case $f in ''|'#'*) continue ;; esac
        n=$((n + 1))
        s=$(awk '/^Subject: / { s = substr($0, 10)
                                while ((getline l) > 0 && l ~ /^ /) s = s l
                                print s; exit }' "$top/patches/$f" |
            sed 's/^\[PATCH[^]]*\] *//')
        case $s in *"$1") printf '%04d %s\n' "$n" "$s"; return ;; esac
    done < "$top/patches/series"
}

# cases MODE ARM: the cases an arm must report
cases() {
    local o c
    if [ "$2" = blkback ] || [ "$2" = fork-ind256 ]; then
        # the domU's counters mode (domu-jobs.sh); blkback: no QEMU, no ldd
        [ "$2" = blkback ] || echo ldd
        echo create ring-order-o4 indirect-o4
        grep -v '^#' "$here/counters.list" | while read -r c _; do
            echo "counters-$c"
        done
        return
    fi
    if [ "$1" = ci ]; then
        for c in $(cases smoke "$2"); do
            [[ " ${CI_SKIP[$2]:-} " == *" $c "* ]] || echo "$c"
        done
        return
    fi
    echo ldd create
    [ "$2" != fork ] || echo deb-install
    [ "$2" != fork-iothread ] || echo iothread-args
    if [ "$1" = full ]; then
        for o in 0 4; do
            echo ring-order-o$o indirect-o$o fio-qd1-o$o fio-qd32-o$o sha256-o$o \
                 fsync-o$o discard-o$o blockstats-o$o mkfs-o$o
        done
        grep -v '^#' "$here/counters.list" | while read -r c _; do
            echo "counters-$c"
        done
    else
        echo ring-order-o4 indirect-o4 fio-qd32-o4 sha256-o4 mkfs-o4
    fi
    echo hotplug-connect hotplug-features hotplug-fio ro cdrom \
         reattach-after-failure detach-inflight after-detach-xvda reattach
    [ "$2" != fork ] || echo deb-remove
}

for k in "${!XFAIL[@]}" "${!SOMETIMES[@]}"; do
    s=${XFAIL[$k]:-${SOMETIMES[$k]}}
    [ -n "$(patch_ref "$s")" ] ||
        die "known failure $k names a patch not in patches/series: $s"
done
declare -A qemu_of=([upstream]=$QEMU_UPSTREAM [fork]=$QEMU_FORK
                    [fork-noind]=$QEMU_FORK [fork-ind256]=$QEMU_FORK
                    [fork-iothread]=$QEMU_FORK)
for a in "${arms[@]}"; do
    [ "$a" != blkback ] || continue
    [ -n "${qemu_of[$a]:-}" ] || die "unknown arm $a"
    [ -x "${qemu_of[$a]}" ] || die "no QEMU for arm $a: ${qemu_of[$a]} (make build)"
    [ "${a%-*}" != fork ] || [ -f "$FORK_DEB" ] ||
        die "no package of the fork in build/deb (make deb)"
done
command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing (make deps)"

t_start=$(date +%s)
"$here/images.sh" "$img"
t_images=$(date +%s)

run=$img/runs/$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$run"
ln -sfn "runs/${run##*/}" "$img/latest"

# --- payload: the run's scripts, upstream's QEMU, the fork's package, the
# QEMUs' libraries and dom0's dpkg database, the domU ramdisk (domu.cpio +
# this run's jobs), a read-only image ----------------------------------------
p=$run/payload
mkdir -p "$p/lib" "$p/arms" "$p/dpkg/info"
cp "$here/dom0.sh" "$p/"
libs=()
for a in "${arms[@]}"; do
    if [ "$a" = blkback ]; then
        # no QEMU ("-"): dom0.sh gives xvda to xen-blkback
        echo "counters $a - - -" >> "$p/plan"
        continue
    fi
    d=${a%-*}                   # fork-iothread, fork-noind: the fork's binary
    if [ "$d" = fork ]; then
        bin=$FORK_INSTALLED
        [ -e "$p/xenblk-qemu.deb" ] || cp "$FORK_DEB" "$p/xenblk-qemu.deb"
    else
        bin=/payload/arms/$d/qemu-system-i386
        mkdir -p "$p/arms/$d"
        cp "${qemu_of[$a]}" "$p/arms/$d/qemu-system-i386"
    fi
    mapfile -t -O ${#libs[@]} libs < <(ldd "${qemu_of[$a]}" |
        awk '$2 == "=>" && $3 ~ /^\// { print $3 }')
    if [ "$a" = fork-ind256 ]; then
        # the domU's counters mode: blkfront's limit is the arm's name
        echo "counters $a $bin - -" >> "$p/plan"
        continue
    fi
    iot=-
    [ "$a" != fork-iothread ] || iot=poll-max-ns=$POLL_NS,poll-yield=on
    # full: ring order 0 first, in a domain of its own (domu-jobs.sh)
    [ "$mode" != full ] || echo "full-o0 $a $bin $iot -" >> "$p/plan"
    skip=-
    [ "$mode" != ci ] || [ -z "${CI_SKIP[$a]:-}" ] ||
        skip=$(echo "${CI_SKIP[$a]}" | tr ' ' ,)
    echo "$([ "$mode" = ci ] && echo smoke || echo "$mode") $a $bin $iot $skip" \
        >> "$p/plan"
done
mapfile -t libs < <(printf '%s\n' "${libs[@]}" | sort -u)
cp -n -L -t "$p/lib/" "${libs[@]}"
# dom0's dpkg database: the packages that own those libraries on this
# host (Debian 12, as dom0), as its dpkg records them, so that dpkg -i
# checks the package's Depends against what dom0 really has
# (one dpkg -S: each call reads the whole database; a library is
# recorded under /lib or /usr/lib, merged /usr, hence both names)
dpkg -S "${libs[@]}" $(printf '/usr%s\n' "${libs[@]}" | sed 's|^/usr/usr/|/|') \
    2>/dev/null | grep -v '^diversion' > "$run/lib-owners" || true
for l in "${libs[@]}"; do
    grep -q "/${l##*/}\$" "$run/lib-owners" || die "no package owns $l"
done
mapfile -t owners < <(sed 's/: .*//; s/, /\n/g' "$run/lib-owners" | sort -u)
dpkg-query -s "${owners[@]}" > "$p/dpkg/status"
for o in "${owners[@]}"; do
    cp /var/lib/dpkg/info/"$o".list "$p/dpkg/info/" 2>/dev/null ||
        cp /var/lib/dpkg/info/"${o%:*}".list "$p/dpkg/info/"
done
# Data files: libxl passes -vnc none, and QEMU loads the en-us keymap for
# it (the package brings the fork's). A binary copied out of its build
# tree (no qemu-bundle/ beside it)
# looks in <its dir>/../share/qemu (relocatable builds, the default),
# else in its configured datadir: dom0.sh links /usr/local/share/qemu and
# /usr/share/qemu here. The keymaps are the pinned QEMU source's.
mkdir -p "$p/arms/share/qemu"
cp -r "$top/build/upstream/src/pc-bios/keymaps" "$p/arms/share/qemu/"
head -c $((8 << 20)) /dev/urandom > "$p/ro.img"
{
    echo "RO_SHA256=$(sha256sum < "$p/ro.img" | cut -d' ' -f1)"
    [ "$mode" = full ] && echo "ARM_TIMEOUT=2400" || echo "ARM_TIMEOUT=900"
} > "$p/plan.env"
jobs=$run/domu-jobs
mkdir -p "$jobs"
cp "$here/domu-jobs.sh" "$jobs/jobs.sh"
cp "$here/counters.list" "$jobs/"
{
    cat "$img/domu.cpio"
    (cd "$jobs" && printf '%s\n' jobs.sh counters.list |
        cpio -o -H newc -R 0:0 --quiet)
} > "$p/domu.cpio"
mke2fs -q -t ext4 -d "$p" "$run/payload.img" \
    $(( $(du -sm "$p" | cut -f1) * 5 / 4 + 16 ))M
rm -rf "$p"
# the domUs' images live here; a fresh sparse ext4 every run
truncate -s 8G "$run/scratch.img"
mke2fs -q -t ext4 -E lazy_itable_init=1 "$run/scratch.img"
t_payload=$(date +%s)

# --- the boot -------------------------------------------------------------------
# bootscrub=0: scrubbing the free RAM costs minutes of emulated CPU
xen_args="console=com1 com1=115200,8n1 dom0_mem=1024M,max:1024M bootscrub=0"
xen_args+=" dom0_max_vcpus=2 loglvl=all guest_loglvl=all"
limit=$(( ${#arms[@]} * $( [ "$mode" = full ] && echo 2700 || echo 1000 ) + 600 ))
log "booting Xen (${arms[*]}, $mode); console: $run/console.log"
rc=0
timeout -k 30 "$limit" qemu-system-x86_64 -accel tcg -cpu qemu64 -smp 2 \
    -m 2048 -nodefaults -display none -no-reboot \
    -serial "file:$run/console.log" \
    -kernel "$img/xen.elf" -append "$xen_args" \
    -initrd "$img/vmlinuz console=hvc0 earlyprintk=xen,$img/dom0.cpio" \
    -drive "file=$run/payload.img,if=virtio,format=raw,readonly=on" \
    -drive "file=$run/scratch.img,if=virtio,format=raw" || rc=$?
t_boot=$(date +%s)
rm -f "$run/scratch.img"
[ $rc = 0 ] || log "the emulator ended with status $rc ($([ $rc = 124 ] && echo "timeout after ${limit}s" || echo error))"

# --- verdict -------------------------------------------------------------------
res=$run/results.txt
grep -a -o 'XB [a-z0-9-]* [RCI] .*' "$run/console.log" | tr -d '\r' > "$run/markers.txt" || true
fails=0
declare -A failed_sometimes=()
{
    printf '%-14s %-26s %-6s %s\n' arm case result detail
    for a in "${arms[@]}"; do
        if [ "$mode" = ci ]; then
            for c in ${CI_SKIP[$a]:-}; do
                printf '%-14s %-26s %-6s %s\n' "$a" "$c" SKIP \
                    "a known failure that costs a timeout: make check-xen-smoke runs it"
            done
        fi
        for c in $(cases "$mode" "$a"); do
            # a case both of an arm's domains report (ldd, create):
            # its first failure, else its first pass
            line=$(grep "^XB $a R $c " "$run/markers.txt" |
                   sort -s -k5,5 | head -n 1 || true)
            st=$(echo "$line" | cut -d' ' -f5)
            detail=$(echo "$line" | cut -d' ' -f6-)
            x=${XFAIL[$a:$c]:-}
            m=${SOMETIMES[$a:$c]:-}
            [ -z "$st" ] && [ -n "${AFTER[$c]:-}" ] &&
                [ -n "${failed_sometimes[$a:${AFTER[$c]}]:-}" ] && st=LEFT
            case $st:${x:+x}${m:+m} in
            PASS:|PASS:m) v=PASS ;;
            FAIL:x) v=XFAIL; detail="$detail (fixed by $(patch_ref "$x"))" ;;
            FAIL:m) v=XFAIL; failed_sometimes[$a:$c]=1
                    detail="$detail (a known failure that does not always show; fixed by $(patch_ref "$m"))" ;;
            PASS:x) v=XPASS; fails=$((fails + 1))
                    detail="expected to fail (fixed by $(patch_ref "$x")), passed" ;;
            LEFT:*) v=SKIP; detail="left out: ${AFTER[$c]} failed as it may" ;;
            :*)     v=MISSING; fails=$((fails + 1)) ;;
            *)      v=FAIL; fails=$((fails + 1)) ;;
            esac
            printf '%-14s %-26s %-6s %s\n' "$a" "$c" "$v" "$detail"
        done
    done
} > "$res"
cat "$res"
grep -a 'XB [a-z0-9-]* I features-' "$run/markers.txt" | cut -d' ' -f2,4- \
    > "$run/features.txt" || true
grep -a 'XB [a-z0-9-]* C ' "$run/markers.txt" | cut -d' ' -f2,4- \
    > "$run/counters-xen.txt" || true
log "wall time: images $((t_images - t_start)) s, payload" \
    "$((t_payload - t_images)) s, boot and jobs $((t_boot - t_payload)) s" \
    "(total $((t_boot - t_start)) s)"
if [ $fails -gt 0 ] || [ $rc != 0 ]; then
    log "FAILED: $fails case(s); see $res and $run/console.log"
    exit 1
fi
log "passed ($run)"
exit 0
}
