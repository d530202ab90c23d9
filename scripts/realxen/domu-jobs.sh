# domU side of the real-Xen test (busybox sh; /jobs.sh of the domU's
# initramfs, run by domu-init). Linux's own xen-blkfront against the
# QEMU that libxl started in dom0 for this domain (the arm).
#
# Kernel command line: xb_arm=NAME (the arm, for the markers),
# xb_mode=smoke|full|full-o0|counters (docs/real-xen.rst lists the jobs
# of each; full-o0 is the ring order 0 pass of full, in a domain of its
# own; counters: ring order, indirect and the counters only, for the arm
# whose disk xen-blkback serves and for fork-ind256) and
# xb_skip=CASE,... (cases left out, "-" for none: run.sh's ci mode).
# Output, on the console (xenconsoled logs it in dom0):
#   XB <arm> R <case> PASS|FAIL [detail]   one result per case
#   XB <arm> C <job> key=value...          per-I/O counters of a job
#   XB <arm> I <what> ...                  information (features, ...)
# Requests to dom0 (QMP, xl block-attach/-detach) go through xenstore:
# this domain writes data/xb/req = "SEQ VERB ARGS", dom0 answers in
# data/xb/ack = "SEQ RC TEXT" (scripts/realxen/dom0.sh).
#
# Disks (devids: xen/io/blkif.h's vdev numbering, xvda = 51712):
#   xvda  rw, cold-plugged (the domain's config)
#   xvdb  rw, hot-plugged (xl block-attach), detached during I/O, again
#   xvdc  access=ro, hot-plugged; xvdd devtype=cdrom, hot-plugged
#   xvde  hot-plugged before its image exists, detached, attached again
arm=$(sed -n 's/.*xb_arm=\([^ ]*\).*/\1/p' /proc/cmdline)
mode=$(sed -n 's/.*xb_mode=\([^ ]*\).*/\1/p' /proc/cmdline)
skip=$(sed -n 's/.*xb_skip=\([^ ]*\).*/\1/p' /proc/cmdline)
MiB=1048576

# say TEXT: a marker line; on stderr, so that it is never captured by $( )
say() { echo "XB $arm $*" >&2; }
# wanted CASE: not left out by xb_skip
wanted() { case ",$skip," in *",$1,"*) return 1 ;; esac; }
# res CASE STATUS [DETAIL]: one case's result (status 0 = PASS), with the
# domU's uptime
res() {
    t="[t=$(cut -d' ' -f1 /proc/uptime)]"
    if [ "$2" = 0 ]; then
        say "R $1 PASS${3:+ $3} $t"
    else
        say "R $1 FAIL${3:+ $3} $t"
    fi
}

# ask VERB ARGS...: a request to dom0; prints the answer's text and
# returns its status (1 when dom0 does not answer in 120 s). The sequence
# number lives in a file: ask often runs in a $( ) subshell.
ask() {
    seq=$(( $(cat /tmp/xb.seq 2>/dev/null || echo 0) + 1 ))
    echo $seq > /tmp/xb.seq
    xenstore-write data/xb/req "$seq $*" || return 1
    n=0
    while :; do
        a=$(xenstore-read data/xb/ack 2>/dev/null)
        case $a in "$seq "*) break ;; esac
        n=$((n + 1))
        [ $n -lt 600 ] || { say "I ask-timeout $*" >&2; return 1; }
        sleep 0.2
    done
    a=${a#"$seq "}
    rc=${a%% *}
    case $a in *" "*) echo "${a#* }" ;; esac
    return "$rc"
}

# wait_path PATH SECONDS [gone]: until PATH exists (or is gone)
wait_path() {
    n=0
    while :; do
        if [ "${3:-}" = gone ]; then [ ! -e "$1" ] && return 0
        else [ -e "$1" ] && return 0; fi
        n=$((n + 1))
        [ $n -lt $(($2 * 5)) ] || return 1
        sleep 0.2
    done
}

# blkif interrupts so far: the sum over every "blkif" line of
# /proc/interrupts (an idle disk adds nothing)
irqs() {
    awk '/blkif/ { for (i = 2; i <= NF && $i ~ /^[0-9]+$/; i++) s += $i }
         END { print s + 0 }' /proc/interrupts
}
# requests the guest's block layer completed on DEV: reads + writes
# (/sys/block/DEV/stat fields 1 and 5; Documentation/block/stat.rst)
blkreqs() { awk '{ print $1 + $5 }' "/sys/block/$1/stat"; }

# fio_run NAME ARGS...: fio with its JSON output in /tmp/NAME.json;
# returns fio's status, shows its error lines
fio_run() {
    n=$1
    shift
    fio --name="$n" --ioengine=libaio --direct=1 --output-format=json \
        --output="/tmp/$n.json" "$@" >"/tmp/$n.err" 2>&1
    r=$?
    [ $r = 0 ] || head -c 600 "/tmp/$n.err" | sed "s/^/XB $arm I fio-err $n: /" >&2
    return $r
}
fio_ios() { jq '[.jobs[] | .read.total_ios + .write.total_ios] | add' "/tmp/$1.json"; }
fio_ok() { [ "$(jq '[.jobs[].error] | add' "/tmp/$1.json" 2>/dev/null)" = 0 ]; }

# stat_of JSON FIELD: a counter of the disk's query-blockstats entry
stat_of() { echo "$1" | jq ".$2"; }

# blk_stat D FIELD: one counter of the guest's /sys/block/D/stat
# (Documentation/block/stat.rst: 12 discard I/Os, 16 flush I/Os)
blk_stat() { awk -v f="$2" '{ print $f }' "/sys/block/$1/stat"; }

# --- the jobs on one disk (each returns 0 when it passed) ---------------------

# job_verify D QD SIZE: randrw 512 B .. 1 MiB at depth QD, verify=crc32c
job_verify() {
    fio_run "v$1-$2" --filename="/dev/$1" --rw=randrw --bsrange=512-1m \
        --iodepth="$2" --size="$3" --verify=crc32c --do_verify=1 \
        --verify_fatal=1 --verify_state_save=0 && fio_ok "v$1-$2"
}

# job_sha256 D OFFSET_MIB: 8 MiB of random data written at OFFSET_MIB
# (O_DIRECT), read back (O_DIRECT), compared by sha256
job_sha256() {
    dd if=/dev/urandom of=/tmp/region bs=$MiB count=8 2>/dev/null
    want=$(sha256sum < /tmp/region | cut -d' ' -f1)
    dd if=/tmp/region of="/dev/$1" bs=$MiB seek="$2" oflag=direct \
        conv=fsync 2>/dev/null || return 1
    got=$(dd if="/dev/$1" bs=$MiB skip="$2" count=8 iflag=direct 2>/dev/null |
          sha256sum | cut -d' ' -f1)
    [ "$got" = "$want" ]
}

# job_fsync D: 4 KiB random writes, each followed by fsync (and one at
# the end: fio issues a write's fsync before the next write, so the last
# write has none without end_fsync), so that blkfront sends
# BLKIF_OP_FLUSH_DISKCACHE; the data must verify. The flushes are counted
# where blkfront completed them (the guest's /sys/block stat), and where
# QEMU did (query-blockstats flush_operations), for the blockstats case.
job_fsync() {
    pre=$(ask stats "$1") || return 1
    gpre=$(blk_stat "$1" 16)
    fio_run fsync --filename="/dev/$1" --rw=randwrite --bs=4k --size=1m \
        --offset=300m --fsync=1 --end_fsync=1 --verify=crc32c \
        --do_verify=1 --verify_fatal=1 --verify_state_save=0
    r=$?
    post=$(ask stats "$1") || return 1
    writes=$(jq '.jobs[0].write.total_ios' /tmp/fsync.json)
    g_flushes=$(( $(blk_stat "$1" 16) - gpre ))
    q_flushes=$(( $(stat_of "$post" flush_operations) -
                  $(stat_of "$pre" flush_operations) ))
    say "I fsync writes=$writes flushes=$g_flushes qemu-flush-operations=$q_flushes"
    [ $r = 0 ] && [ "$writes" -gt 0 ] && [ "$g_flushes" -ge "$writes" ]
}

# job_discard D: blkdiscard of 16 MiB that held data. QEMU (discard=unmap:
# libxl's default discard-enable=1 for a writable disk) punches a hole,
# so the range reads back as zeroes; blkfront and QEMU count the discards
job_discard() {
    max=$(cat "/sys/block/$1/queue/discard_max_bytes")
    [ "$max" -gt 0 ] || { say "I discard not offered"; return 1; }
    dd if=/dev/urandom of="/dev/$1" bs=$MiB seek=400 count=16 oflag=direct \
        conv=fsync 2>/dev/null
    pre=$(ask stats "$1") || return 1
    gpre=$(blk_stat "$1" 12)
    blkdiscard -o $((400 * MiB)) -l $((16 * MiB)) "/dev/$1" || return 1
    post=$(ask stats "$1") || return 1
    g_discards=$(( $(blk_stat "$1" 12) - gpre ))
    q_discards=$(( $(stat_of "$post" unmap_operations) -
                   $(stat_of "$pre" unmap_operations) ))
    nz=$(dd if="/dev/$1" bs=$MiB skip=400 count=16 iflag=direct 2>/dev/null |
         tr -d '\000' | wc -c)
    say "I discard max=$max discards=$g_discards qemu-unmap-operations=$q_discards nonzero-bytes=$nz"
    [ "$g_discards" -gt 0 ] && [ "$nz" = 0 ]
}

# job_mkfs D: mke2fs -t ext4 on the whole disk, then a forced e2fsck -n.
# e2fsprogs' by path: Debian's static busybox sh runs its own applet of
# the same name first, whatever PATH says, and that one has no ext4.
job_mkfs() {
    /usr/sbin/mke2fs -q -F -t ext4 "/dev/$1" >/tmp/mkfs.log 2>&1 &&
        /usr/sbin/e2fsck -f -n "/dev/$1" >>/tmp/mkfs.log 2>&1
    r=$?
    [ $r = 0 ] || tail -3 /tmp/mkfs.log | sed "s/^/XB $arm I mkfs: /" >&2
    return $r
}

# ring order blkfront negotiated for devid $1: its ring-page-order node
# (absent when one page, xen/io/blkif.h)
ring_order() { xenstore-read "device/vbd/$1/ring-page-order" 2>/dev/null || echo 0; }

# features D DEVID: what blkfront negotiated for disk D, one line
# (discard_max_bytes is left out: blkfront sets it to the disk's size)
features() {
    q=/sys/block/$1/queue
    echo "ro=$(cat /sys/block/$1/ro) wc=$(sed 's/ /-/g' $q/write_cache)" \
         "fua=$(cat $q/fua) discard=$([ "$(cat $q/discard_max_bytes)" -gt 0 ] && echo 1 || echo 0)" \
         "discard_gran=$(cat $q/discard_granularity)" \
         "max_hw_kb=$(cat $q/max_hw_sectors_kb) segs=$(cat $q/max_segments)" \
         "lbs=$(cat $q/logical_block_size) order=$(ring_order "$2")"
}
# backend_nodes DEVID: the backend's feature nodes as the frontend reads them
backend_nodes() {
    b=$(xenstore-read "device/vbd/$1/backend")
    for k in max-ring-page-order feature-flush-cache feature-discard \
             discard-granularity feature-persistent \
             feature-max-indirect-segments info sector-size \
             sectors multi-queue-max-queues; do
        printf '%s=%s ' "$k" "$(xenstore-read "$b/$k" 2>/dev/null || echo -)"
    done
}

# --- indirect segments ---------------------------------------------------------
# Whether blkfront must negotiate indirect segments with this arm's
# backend: the fork (patch 0032, 256 offered) and xen-blkback (256) offer
# them; pristine QEMU offers none, and fork-noind is the fork with
# -global xen-block.indirect-requests=off.
case $arm in upstream|*-noind) want_indirect=no ;; *) want_indirect=yes ;; esac

# job_indirect D DEVID: what blkfront negotiated, from the domU: its own
# word (the line it prints when the disk connects, "indirect descriptors:
# enabled;") and the limit it gave the queue from it: max_segments is
# min(its max_indirect_segments, the backend's
# feature-max-indirect-segments) with indirect requests, else
# BLKIF_MAX_SEGMENTS_PER_REQUEST (11). Either alone could mislead (a stale
# dmesg line of another connect, a limit set for another reason). Then one
# 128 KiB O_DIRECT read: 32 pages, one indirect request where negotiated.
# blkfront checks each response (since Linux 5.14, XSA-376): one whose
# operation is not the request's (an indirect request's is its
# indirect_op) stops the disk, and its I/O never completes. So the read
# runs in the background, and a disk that stopped ends the domain's jobs
# (ring_dead) rather than every later job hanging until dom0's timeout.
job_indirect() {
    line=$(dmesg | grep "blkfront: $1: " | tail -n 1)
    case $line in
    *"indirect descriptors: enabled;"*) said=yes ;;
    *"indirect descriptors: disabled;"*) said=no ;;
    *) said=unknown ;;
    esac
    segs=$(cat "/sys/block/$1/queue/max_segments")
    lim=$(cat /sys/module/xen_blkfront/parameters/max_indirect_segments)
    b=$(xenstore-read "device/vbd/$2/backend")
    offer=$(xenstore-read "$b/feature-max-indirect-segments" 2>/dev/null || echo 0)
    if [ "$want_indirect" = yes ]; then
        [ "$offer" -lt "$lim" ] && want_segs=$offer || want_segs=$lim
    else
        want_segs=11
    fi
    why=
    dd if="/dev/$1" of=/dev/null bs=128k count=1 iflag=direct 2>/dev/null &
    ddp=$!
    n=0
    while kill -0 $ddp 2>/dev/null && [ $n -lt 100 ]; do sleep 0.2; n=$((n + 1)); done
    if kill -0 $ddp 2>/dev/null; then
        io="read-128k=hung"
        why="$(dmesg | grep "$1: response has" | tail -n 1 | sed 's/^\[[^]]*\] //')"
        why=${why:-"$1: a 128 KiB read did not complete in 20 s"}
    else
        wait $ddp && io="read-128k=ok" || io="read-128k=error"
    fi
    echo "negotiated=$said max_segments=$segs blkfront-max=$lim backend-offers=$offer $io${why:+ ($why)}"
    [ "$said" = "$want_indirect" ] && [ "$segs" = "$want_segs" ] &&
        [ "$io" = read-128k=ok ]
}

# --- per-I/O counters ---------------------------------------------------------
# counter JOB FIO-ARGS: one fixed-size job on xvda with the guest's
# merging off (nomerges=2: one block-layer request per fio I/O, as
# xensim's engine issues them), and the counters around it:
#   ios     fio's I/Os; irqs: blkif interrupts in this domU
#   greqs   requests blkfront completed (/sys/block/xvda/stat)
#   ops     blkif requests QEMU accounted (rd+wr_operations)
#   merged  of those, merged into another (rd+wr_merged)
counter() {
    c=$1
    shift
    s0=$(ask stats xvda) || { res "counters-$c" 1 "no stats"; return; }
    i0=$(irqs)
    g0=$(blkreqs xvda)
    fio_run "c-$c" --filename=/dev/xvda "$@"
    r=$?
    i1=$(irqs)
    g1=$(blkreqs xvda)
    s1=$(ask stats xvda) || { res "counters-$c" 1 "no stats"; return; }
    ops=$(( $(stat_of "$s1" rd_operations) + $(stat_of "$s1" wr_operations) -
            $(stat_of "$s0" rd_operations) - $(stat_of "$s0" wr_operations) ))
    mrg=$(( $(stat_of "$s1" rd_merged) + $(stat_of "$s1" wr_merged) -
            $(stat_of "$s0" rd_merged) - $(stat_of "$s0" wr_merged) ))
    say "C $c ios=$(fio_ios "c-$c") irqs=$((i1 - i0)) greqs=$((g1 - g0))" \
        "ops=$ops merged=$mrg"
    res "counters-$c" $r
}

counters() {
    echo 2 > /sys/block/xvda/queue/nomerges
    # scripts/realxen/counters.list, which the xensim side runs too
    grep -v '^#' /counters.list | while read -r c args; do
        # shellcheck disable=SC2086
        counter "$c" $args
    done
    echo 0 > /sys/block/xvda/queue/nomerges
}

# --- one pass: blkfront loaded with max_ring_page_order=$1 -----------------
pass() {
    o=$1
    # fork-ind256: blkfront takes up to 256 segments (1 MiB) per request,
    # the fork's offer, where Linux's default is 32
    ind_opt=
    case $arm in *-ind256) ind_opt=max_indirect_segments=256 ;; esac
    # shellcheck disable=SC2086
    modprobe xen-blkfront max_ring_page_order="$o" $ind_opt
    if ! wait_path /dev/xvda 60; then
        res "ring-order-o$o" 1 "no /dev/xvda"
        return
    fi
    got=$(ring_order 51712)
    # QEMU offers max-ring-page-order 4: blkfront takes min(its limit, 4)
    [ "$got" = "$o" ]
    res "ring-order-o$o" $? "negotiated=$got"
    say "I features-xvda-o$o $(features xvda 51712)"
    ind=$(job_indirect xvda 51712)
    res "indirect-o$o" $? "$ind (expected: $want_indirect)"
    case $ind in *"=hung"*) ring_dead=yes; return ;; esac
    if [ "$mode" = counters ]; then
        # xen-blkback's arm (no QEMU), fork-ind256: the counts only
        counters
        return
    fi
    if [ "$mode" != smoke ]; then
        job_verify xvda 1 16m
        res "fio-qd1-o$o" $?
    fi
    job_verify xvda 32 32m
    res "fio-qd32-o$o" $?
    job_sha256 xvda 100
    res "sha256-o$o" $?
    if [ "$mode" != smoke ]; then
        job_fsync xvda
        res "fsync-o$o" $?
        job_discard xvda
        res "discard-o$o" $?
        # QEMU accounted every flush and discard blkfront completed
        [ "${g_flushes:-0}" -gt 0 ] && [ "$q_flushes" = "$g_flushes" ] &&
            [ "${g_discards:-0}" -gt 0 ] && [ "$q_discards" = "$g_discards" ]
        res "blockstats-o$o" $? "flushes guest=${g_flushes:-?}\
 qemu=${q_flushes:-?} discards guest=${g_discards:-?} qemu=${q_discards:-?}"
        [ "$o" != 4 ] || counters
    fi
    job_mkfs xvda
    res "mkfs-o$o" $?
}

# --- hot-plug, detach during I/O, re-attach -----------------------------------
XVDB="vdev=xvdb,access=rw,backendtype=qdisk,target=/scratch/$arm-xvdb.img"

# The cold-plugged xvda is the reference: a hot-plugged disk must
# negotiate what it did (the seed's hot-plug complaint). blkfront reads
# max-ring-page-order when the backend is in InitWait, the rest when it
# is Connected.
hotplug() {
    out=$(ask attach "$XVDB")
    r=$?
    [ -z "$out" ] || say "I attach-xvdb $out"
    if [ $r != 0 ] || ! wait_path /dev/xvdb 60; then
        res hotplug-connect 1 "xl block-attach rc=$r"
        return
    fi
    res hotplug-connect 0
    sleep 1
    ref=$(features xvda 51712)
    f=$(features xvdb 51728)
    say "I features-xvdb-hotplug $f"
    say "I backend-xvda $(backend_nodes 51712)"
    say "I backend-xvdb $(backend_nodes 51728)"
    dmesg | grep 'blkfront: xvd[ab]' | sed "s/^/XB $arm I dmesg /" >&2
    [ "$f" = "$ref" ]
    res hotplug-features $? "xvdb: $f; xvda: $ref"
    job_verify xvdb 32 16m
    res hotplug-fio $?
}

# detach xvdb while fio runs: fio must end (EIO), the node must go, QEMU
# must stay up and keep serving xvda. It runs last: pristine QEMU may die
# here (run.sh, SOMETIMES), and the cases after it need a live QEMU.
detach_inflight() {
    [ -b /dev/xvdb ] || return      # hotplug-connect failed
    fio --name=busy --filename=/dev/xvdb --ioengine=libaio --direct=1 \
        --rw=randrw --bs=64k --iodepth=32 --size=200m --time_based \
        --runtime=60 --output=/tmp/busy.out >/dev/null 2>&1 &
    fp=$!
    sleep 3
    out=$(ask detach xvdb)
    r=$?
    [ -z "$out" ] || say "I detach-xvdb $out"
    n=0
    while kill -0 $fp 2>/dev/null && [ $n -lt 60 ]; do sleep 1; n=$((n + 1)); done
    kill -0 $fp 2>/dev/null && { kill -9 $fp; say "I busy fio did not end"; }
    wait $fp 2>/dev/null
    wait_path /dev/xvdb 30 gone
    gone=$([ $? = 0 ] && echo yes || echo no)
    alive=$(ask qemu-alive)
    [ $r = 0 ] && [ $gone = yes ] && [ "$alive" = yes ]
    res detach-inflight $? "xl-rc=$r node-gone=$gone qemu-alive=$alive fio-ended-after=${n}s"
    [ "$alive" = yes ] || return
    job_sha256 xvda 120
    res after-detach-xvda $?

    out=$(ask attach "$XVDB")
    r=$?
    if [ $r = 0 ] && wait_path /dev/xvdb 60; then
        job_verify xvdb 32 16m
        res reattach $?
    else
        res reattach 1 "rc=$r ${out:-}"
    fi
}

# --- read-only and cdrom disks (hot-plugged) ----------------------------------
# readonly_disk CASE VDEV DEVID SPEC: the image is on dom0's read-only
# payload disk; dom0 gives its sha256 in the answer of "attach". Reads
# must match, a write and a discard must fail.
readonly_disk() {
    case=$1 vdev=$2 devid=$3 spec=$4
    want=$(ask attach "$spec")
    r=$?
    if [ $r != 0 ] || ! wait_path "/dev/$vdev" 60; then
        res "$case" 1 "not attached (xl rc=$r, no /dev/$vdev)"
        return
    fi
    sleep 1
    say "I features-$vdev-$case $(features "$vdev" "$devid")"
    say "I backend-$vdev $(backend_nodes "$devid")"
    got=$(dd if="/dev/$vdev" bs=$MiB iflag=direct 2>/dev/null | sha256sum |
          cut -d' ' -f1)
    match=$([ "$got" = "${want##* }" ] && echo yes || echo no)
    ro=$(cat "/sys/block/$vdev/ro")
    w=no
    dd if=/dev/zero of="/dev/$vdev" bs=4096 count=1 oflag=direct \
        2>/dev/null && w=yes
    d=no
    blkdiscard -o 0 -l $MiB "/dev/$vdev" 2>/dev/null && d=yes
    [ $match = yes ] && [ "$ro" = 1 ] && [ $w = no ] && [ $d = no ]
    r=$?
    # what was read, against what dom0 wrote: sectors and hash prefixes
    sectors=$(cat "/sys/block/$vdev/size")
    res "$case" $r "sha256-match=$match ro=$ro write-ok=$w discard-ok=$d \
sectors=$sectors got=$(echo "$got" | cut -c1-12) \
want=$(echo "${want##* }" | cut -c1-12)"
}

# --- a disk whose first attach failed, attached again --------------------------
# The image is not there at the first xl block-attach (QEMU refuses it);
# xl block-detach, dom0 creates the image, xl block-attach again: the
# disk must connect now, without restarting the device model.
reattach_failed() {
    spec="vdev=xvde,access=rw,backendtype=qdisk,target=/scratch/$arm-late.img"
    ask attach "$spec" >/dev/null
    if wait_path /dev/xvde 20; then
        res reattach-after-failure 1 "attached with no image"
        return
    fi
    out=$(ask detach xvde)
    r=$?
    ask mkimage late >/dev/null
    ask attach "$spec" >/dev/null
    if wait_path /dev/xvde 60; then
        job_sha256 xvde 8
        res reattach-after-failure $? "detach rc=$r"
    else
        res reattach-after-failure 1 "no /dev/xvde after the image appeared (detach rc=$r: $out)"
    fi
}

ring_dead=
say "I start $(cut -d' ' -f1 /proc/uptime) mode=$mode"
if [ "$mode" = full-o0 ]; then
    # blkfront reads max_ring_page_order when it loads, and busybox's
    # rmmod cannot unload it once xvda was used (EAGAIN, 30 tries): ring
    # order 0 gets a domain of its own
    pass 0
elif [ "$mode" = counters ]; then
    pass 4
else
    pass 4
    if [ -n "$ring_dead" ]; then
        # xvda's I/O hangs: the other jobs would too (the cases they
        # leave out are MISSING in the verdict)
        say "I abort xvda stopped: no further jobs"
        say "I end $(cut -d' ' -f1 /proc/uptime)"
        exit 1
    fi
    hotplug
    ! wanted ro || readonly_disk ro xvdc 51744 \
        "vdev=xvdc,access=ro,backendtype=qdisk,target=/payload/ro.img"
    readonly_disk cdrom xvdd 51760 \
        "vdev=xvdd,devtype=cdrom,access=ro,backendtype=qdisk,target=/payload/ro.img"
    ! wanted reattach-after-failure || reattach_failed
    detach_inflight
fi
ask record >/dev/null
say "I end $(cut -d' ' -f1 /proc/uptime)"
