# dom0 side of the real-Xen test (busybox sh), run by dom0-init from the
# payload disk (/payload). For each arm of /payload/plan, one after the
# other: a PV domU made by xl whose disk libxl serves with that arm's
# QEMU (device_model_override), the domU's requests (through xenstore:
# data/xb/req -> data/xb/ack, see domu-jobs.sh), then the logs.
#
# The fork's package (/payload/xenblk-qemu.deb) is installed with dpkg
# before the first arm, with xenblk-default enabled, and removed once
# its arms are done (cases deb-install, deb-remove of arm fork): the
# dom0 must then be as it was (files, dpkg's database, diversions).
#
# /payload/plan: "MODE ARM QEMU IOTHREAD SKIP" lines (QEMU: the binary
# libxl runs, device_model_override; IOTHREAD: the
# device_model_args_pv IOThread of the fork, or "-"; SKIP: cases the domU
# leaves out, comma-separated, or "-"). Prints "XB <arm> ..."
# lines (results, information) and each domU's console and QEMU log with
# a "[<arm>] " prefix; scripts/realxen/run.sh judges.
P=/payload
export PATH=/usr/lib/xen-4.17/bin:/usr/sbin:/usr/bin

mkdir -p /etc/xen && touch /etc/xen/xl.conf     # xl warns without one
# QEMU's data files (keymaps), where an installed QEMU looks for them
for d in /usr/local/share /usr/share; do
    [ -e $d/qemu ] || { mkdir -p $d && ln -s "$P/arms/share/qemu" $d/qemu; }
done

# QEMU's shared libraries: the payload's, where dom0 has none of that name
for l in "$P"/lib/*; do
    [ -e "/usr/lib/x86_64-linux-gnu/${l##*/}" ] || cp "$l" /usr/lib/x86_64-linux-gnu/
done
# dpkg's database: qemu-system-xen (the image's), and the packages those
# libraries come from (run.sh)
{ echo; cat "$P/dpkg/status"; } >> /var/lib/dpkg/status
cp "$P"/dpkg/info/*.list /var/lib/dpkg/info/
: > /var/lib/dpkg/available

# dom0_state: what installing and removing the package must leave as it
# was: the files of /usr and /etc, Debian's device model, dpkg's packages
# and diversions
debian_qemu=/usr/libexec/xen-qemu-system-i386
dom0_state() {
    { find /usr /etc -xdev | sort; sha256sum "$debian_qemu"
      dpkg-query -W; dpkg-divert --list; } | md5sum | cut -d' ' -f1
}

# deb_install: dpkg -i the fork's package, then the host-wide switch.
# dpkg by its path: busybox sh runs its own dpkg applet before PATH's.
deb_install() {
    pristine=$(dom0_state)
    if ! /usr/bin/dpkg -i "$P/xenblk-qemu.deb" > /run/dpkg.log 2>&1; then
        echo "XB fork R deb-install FAIL $(tail -n 5 /run/dpkg.log | tr '\n' ' ')"
        return
    fi
    v=$(dpkg-query -W -f '${Version}' xenblk-qemu)
    xenblk-default enable
    if ! $debian_qemu --version | grep -q xenblk; then
        echo "XB fork R deb-install FAIL xenblk-default enable:" \
             "$($debian_qemu --version | head -n 1)"
        return
    fi
    echo "XB fork R deb-install PASS xenblk-qemu $v; $(xenblk-default status)"
}

# deb_remove: dpkg -r, which disables xenblk-default (prerm); dom0 must
# be as before deb_install
deb_remove() {
    if ! dpkg-query -W xenblk-qemu > /run/dpkg.log 2>&1; then
        echo "XB fork R deb-remove FAIL the package was not installed"
    elif ! /usr/bin/dpkg -r xenblk-qemu > /run/dpkg.log 2>&1; then
        echo "XB fork R deb-remove FAIL $(tail -n 5 /run/dpkg.log | tr '\n' ' ')"
    elif [ "$(dom0_state)" != "$pristine" ]; then
        echo "XB fork R deb-remove FAIL dom0 not as before the package:" \
             "$(xenblk-default status 2>&1) $(ls -d /usr/lib/xenblk 2>&1)"
    else
        echo "XB fork R deb-remove PASS dom0 as before (files, packages," \
             "diversions; $debian_qemu: $($debian_qemu --version | head -n 1))"
    fi
}

# qmp DOMID CMD-JSON: one QMP command on libxl's monitor of the domain's
# device model; prints the "return" value, compact
qmp() {
    { echo '{"execute":"qmp_capabilities"}'; echo "$2"; sleep 2; } |
        socat -t 5 - "UNIX-CONNECT:/var/run/xen/qmp-libxl-$1" 2>/dev/null |
        jq -c 'select(.return != null and .return != {}) | .return' | tail -n 1
}

# qemu_pid DOMID: the device model of that domain (its -xen-domid)
qemu_pid() {
    for p in /proc/[0-9]*; do
        tr '\0' ' ' < "$p/cmdline" 2>/dev/null |
            grep -q -- "-xen-domid $1 " && { echo "${p#/proc/}"; return; }
    done
}

# xen-blkback's arm: xvda is phy:/dev/loop0 over a file of the scratch
# disk. libxl runs the disk's hotplug script (Debian's
# /etc/xen/scripts/block is in xen-utils-common, which this dom0 lacks):
# this one only tells blkback the device, as "block" does for a device.
LOOP=/dev/loop0
cat > /run/xb-phy <<'EOF'
#!/bin/sh
# libxl: $1 = add|remove, XENBUS_PATH = the backend's xenstore directory
[ "$1" = add ] || exit 0
dev=$(xenstore-read "$XENBUS_PATH/params") || exit 1
xenstore-write "$XENBUS_PATH/physical-device" "$(stat -L -c %t:%T "$dev")" \
    "$XENBUS_PATH/physical-device-path" "$dev" \
    "$XENBUS_PATH/hotplug-status" connected
EOF
chmod 755 /run/xb-phy

# blkback_stats DOMID: xvda's counters in query-blockstats' terms, for the
# counter jobs: blkif requests from blkback's statistics (rd_req, wr_req:
# one per ring request, indirect or not; sysfs-driver-xen-blkback), and
# the requests dom0's block layer completed on the loop device (its
# /sys/block stat, reads and writes) as the operations left once merged
# (QEMU's rd_operations - rd_merged)
blkback_stats() {
    st=/sys/bus/xen-backend/devices/vbd-$1-51712/statistics
    rd=$(cat $st/rd_req) wr=$(cat $st/wr_req)
    # shellcheck disable=SC2046
    set -- $(cat /sys/block/${LOOP#/dev/}/stat)
    echo "{\"rd_operations\":$rd,\"wr_operations\":$wr," \
         "\"rd_merged\":$((rd - $1)),\"wr_merged\":$((wr - $5))," \
         "\"flush_operations\":$(cat $st/f_req)," \
         "\"unmap_operations\":$(cat $st/ds_req)}"
}

# serve ARM DOMID QPID VERB ARGS: one request of the domU; prints the
# answer's text, returns its status
serve() {
    a=$1 d=$2 q=$3 verb=$4
    shift 4
    case $verb in
    stats)
        if [ "$q" = blkback ]; then
            blkback_stats "$d"
            return
        fi
        # query-blockstats of the disk whose node is "<vdev>-<driver>"
        qmp "$d" '{"execute":"query-blockstats"}' |
            jq -c --arg v "$1-" '.[] | select(.["node-name"] // "" |
                startswith($v)) | .stats | {rd_operations, wr_operations,
                rd_merged, wr_merged, flush_operations, unmap_operations,
                failed_rd_operations, failed_wr_operations}' | grep .
        ;;
    attach)
        timeout 120 xl block-attach "$d" "$1" > /run/xl.out 2>&1
        r=$?
        tr '\n' ' ' < /run/xl.out
        case $1 in *target=/payload/ro.img*) echo "sha256 $RO_SHA256" ;; esac
        return $r
        ;;
    detach)
        # xl waits for the backend to close (10 s), then removes it
        timeout 120 xl block-detach "$d" "$1" > /run/xl.out 2>&1
        r=$?
        tr '\n' ' ' < /run/xl.out
        return $r
        ;;
    record)
        # the whole query-blockstats, for the record
        echo "XB $a I blockstats $(qmp "$d" '{"execute":"query-blockstats"}')" >&2
        ;;
    mkimage)
        truncate -s 64M "/scratch/$a-$1.img"
        ;;
    qemu-alive)
        # no: with what the kernel said of its end, if anything
        kill -0 "$q" 2>/dev/null && echo yes ||
            echo "no $(dmesg | grep -E 'qemu.*(segfault|traps:)' | tail -n 1 |
                       tr -s ' ' | cut -c1-160)"
        ;;
    *)
        echo "unknown request $verb"
        return 1
        ;;
    esac
}

# dump_logs ARM: the device model's log (libxl stops it with the domain)
# and what the kernel said about it
dump_logs() {
    for f in /var/log/xen/qemu-dm-$1.log /var/log/xen/xl-$1.log; do
        [ -f "$f" ] && tail -n 60 "$f" | sed "s|^|[$1] ${f##*/}: |"
    done
    dmesg | grep -i -E 'qemu|segfault|traps:' | tail -n 10 | sed "s/^/[$1] dmesg: /"
}

# run_arm MODE ARM QEMU IOTHREAD SKIP: one domU, served until it is gone
run_arm() {
    mode=$1 a=$2 bin=$3 iot=$4 skip=$5
    truncate -s 512M "/scratch/$a-xvda.img"
    # QEMU "-": no QEMU, xen-blkback serves xvda (phy:)
    if [ "$bin" = - ]; then
        losetup "$LOOP" "/scratch/$a-xvda.img" ||
            { echo "XB $a R create FAIL losetup"; return; }
        # target= last: xl takes the rest of the spec as the target
        disk="format=raw,vdev=xvda,access=rw,backendtype=phy,script=/run/xb-phy,target=$LOOP"
    else
        [ -x "$bin" ] || { echo "XB $a R ldd FAIL no $bin"; return; }
        missing=$(/lib64/ld-linux-x86-64.so.2 --list "$bin" | grep 'not found')
        [ -z "$missing" ] || { echo "XB $a R ldd FAIL $missing"; return; }
        echo "XB $a R ldd PASS"
        disk="format=raw,vdev=xvda,access=rw,backendtype=qdisk,target=/scratch/$a-xvda.img"
    fi
    # device model arguments: the IOThread, the fork without indirect
    # segments (fork-noind: on the abstract xen-block, so that the
    # hot-plugged xen-cdrom gets it too, not only xen-disk)
    dmargs=
    [ "$iot" = - ] || dmargs="\"-object\", \"iothread,id=xvda,$iot\", \"-global\", \"xen-disk.polling=on\""
    case $a in
    *-noind) dmargs="${dmargs:+$dmargs, }\"-global\", \"xen-block.indirect-requests=off\"" ;;
    esac
    truncate -s 256M "/scratch/$a-xvdb.img"
    cfg=/run/$a.cfg
    {
        echo "name = \"$a\""
        echo 'type = "pv"'
        echo 'kernel = "/boot/vmlinuz"'
        echo "ramdisk = \"$P/domu.cpio\""
        echo "extra = \"console=hvc0 quiet xb_arm=$a xb_mode=$mode xb_skip=$skip\""
        echo 'memory = 512'
        echo 'vcpus = 1'
        echo 'on_poweroff = "destroy"'
        echo 'on_crash = "destroy"'
        echo "disk = [ \"$disk\" ]"
        echo 'device_model_version = "qemu-xen"'
        [ "$bin" = - ] || echo "device_model_override = \"$bin\""
        [ -z "$dmargs" ] || echo "device_model_args_pv = [ $dmargs ]"
    } > "$cfg"
    echo "XB $a I create-start $(cut -d' ' -f1 /proc/uptime)"
    if ! xl create "$cfg" > "/run/$a.create.log" 2>&1; then
        echo "XB $a R create FAIL $(tr '\n' ' ' < "/run/$a.create.log")"
        dump_logs "$a"
        return
    fi
    d=$(xl domid "$a")
    if [ "$bin" = - ]; then q=blkback; else q=$(qemu_pid "$d"); fi
    echo "XB $a R create PASS domid=$d qemu-pid=${q:-none}" \
         "exe=$(readlink "/proc/$q/exe") at $(cut -d' ' -f1 /proc/uptime)"
    tail -n +1 -f "/var/log/xen/console/guest-$a.log" 2>/dev/null |
        sed "s/^/[$a] /" &
    tailpid=$!
    if [ "$iot" != - ]; then
        it=$(qmp "$d" '{"execute":"query-iothreads"}')
        echo "XB $a I iothreads $it"
        want=${iot#*poll-max-ns=}
        echo "$it" | jq -e --argjson w "${want%%,*}" \
            'any(.[]; .id == "xvda" and .["poll-max-ns"] == $w)' >/dev/null
        r=$?
        [ $r = 0 ] && echo "XB $a R iothread-args PASS" ||
            echo "XB $a R iothread-args FAIL"
    fi
    last=
    t0=$(cut -d. -f1 /proc/uptime)
    # until libxl removes the domain's xenstore home (xl is too heavy to
    # run in this loop under emulation)
    while xenstore-exists "/local/domain/$d"; do
        req=$(xenstore-read "/local/domain/$d/data/xb/req" 2>/dev/null)
        if [ -n "$req" ] && [ "$req" != "$last" ]; then
            last=$req
            s=${req%% *}
            # shellcheck disable=SC2086
            txt=$(serve "$a" "$d" "$q" ${req#* })
            xenstore-write "/local/domain/$d/data/xb/ack" "$s $? $txt"
        fi
        if [ $(( $(cut -d. -f1 /proc/uptime) - t0 )) -gt "$ARM_TIMEOUT" ]; then
            echo "XB $a R timeout FAIL after ${ARM_TIMEOUT}s"
            xl destroy "$a"
            break
        fi
        sleep 0.3
    done
    sleep 1
    kill "$tailpid" 2>/dev/null
    dump_logs "$a"
}

. "$P/plan.env"
installed=
while read -r mode a bin iot skip; do
    # the package's arms come first (run.sh); it goes once they are done
    case $bin in
    -) ;;                       # blkback's arm: no device model
    $P/*) [ -z "$installed" ] || { deb_remove; installed=; } ;;
    *) [ -n "$installed" ] || { deb_install; installed=1; } ;;
    esac
    echo "XB $a I arm-start $(cut -d' ' -f1 /proc/uptime)"
    run_arm "$mode" "$a" "$bin" "$iot" "$skip"
    echo "XB $a I arm-end $(cut -d' ' -f1 /proc/uptime)"
done < "$P/plan"
[ -z "$installed" ] || deb_remove
