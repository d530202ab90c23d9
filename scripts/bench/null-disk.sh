# shellcheck shell=bash
# The bench's null-co disk (the dataplane alone, nothing behind it), one
# definition for scripts/bench.sh and scripts/bench/backend-profile.sh;
# sourced. Sets null_devid, null_size (bytes), and null_disk_args POLL_NS
# [fork [merge]]: `xensim run`'s arguments for it, one per line (its own
# IOThread, iot0, polled up to POLL_NS ns, as libxl's disk is; with "fork",
# as the fork's arms run it: the disk polls its ring, polling=on, and its
# IOThread yields a CPU it lost, poll-yield=on; with "merge" too, it merges
# requests as a libxl disk does, request-merging=on, which a -device
# xen-disk does only when asked).
null_devid=51728                         # xvdb, the -device xen-disk
null_size=$((4 * 1024 * 1024 * 1024))

null_disk_args() {
    printf '%s\n' --qemu-arg=-object \
        "--qemu-arg=iothread,id=iot0,poll-max-ns=$1${2:+,poll-yield=on}" \
        --qemu-arg=-blockdev \
        "--qemu-arg=null-co,node-name=n0,size=$null_size,read-zeroes=off" \
        --qemu-arg=-device \
        "--qemu-arg=xen-disk,id=xvdb,vdev=xvdb,drive=n0,iothread=iot0${2:+,polling=on}${3:+,request-merging=on}"
}
