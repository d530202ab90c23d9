#!/bin/bash
# The images of the real-Xen test (docs/real-xen.rst), built from Debian
# 12 packages without installing them (apt-get download, dpkg-deb -x):
#
#   OUT/xen.elf     Xen 4.17 (xen-hypervisor-4.17-amd64), gunzipped: QEMU's
#                   multiboot loader takes an ELF, not a gzip
#   OUT/vmlinuz     Debian's kernel (linux-image-amd64): dom0 and the domUs
#   OUT/dom0.cpio   dom0's initramfs: busybox, xl/libxl, xenstored,
#                   xenconsoled, xen-init-dom0, xenstore-utils, socat and
#                   jq (QMP), dpkg (run.sh installs the fork's package),
#                   Debian's device model (qemu-system-xen, installed in
#                   dom0's dpkg database), the kernel modules dom0 needs
#                   (xen-blkback and loop for the blkback arm),
#                   /boot/vmlinuz for the domUs; /init is
#                   scripts/realxen/dom0-init
#   OUT/domu.cpio   the domUs' initramfs: busybox, fio 3.33 (built from its
#                   source: Debian's fio pulls 80 MB of libraries),
#                   e2fsprogs, xenstore-utils, jq, xen-blkfront.ko; /init
#                   is scripts/realxen/domu-init
#
# Each binary comes with the shared libraries `ldd` resolves for it (the
# unpacked packages first, then the host, which is Debian 12 too).
# Uncompressed cpio: under TCG, unpacking is cheaper than decompressing.
#
# Usage: scripts/realxen/images.sh OUT
# Cached: OUT/images.stamp holds the sha256 of the inputs (package
# versions, this script, the init scripts); nothing is done when it
# matches. apt-get download checks each .deb against the signed index.
set -euo pipefail

out=$(realpath -m "${1:?usage: $0 OUT}")
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null |
       sed -n 's/^ *Depends: \(linux-image-[0-9].*\)$/\1/p' | head -n 1)
[ -n "$kpkg" ] || { echo "images: apt knows no linux-image-amd64" >&2; exit 1; }
kver=${kpkg#linux-image-}
PKGS=(xen-hypervisor-4.17-amd64 xen-utils-4.17 xenstore-utils "$kpkg"
      busybox-static socat libwrap0 jq libjq1 libonig5 e2fsprogs libext2fs2
      dpkg qemu-system-xen)
XENBIN=usr/lib/xen-4.17/bin
DOM0_MODULES=(virtio_pci virtio_blk ext4 crc32c_generic xenfs xen-evtchn
              xen-gntdev xen-gntalloc xen-privcmd xen-blkback loop)
DOMU_MODULES=(xen-blkfront)

log() { echo "images: $*" >&2; }
die() { log "$*"; exit 1; }

# pkg=version of each, from one apt-cache call (each call reads every index)
mapfile -t versions < <(apt-cache policy "${PKGS[@]}" 2>/dev/null |
    awk '/^[^ ].*:$/ { p = substr($0, 1, length($0) - 1) }
         /^ *Candidate:/ && $2 != "(none)" { print p "=" $2 }')
[ ${#versions[@]} = ${#PKGS[@]} ] ||
    die "apt has no candidate for some of ${PKGS[*]} (apt-get update?)"
stamp=$( { printf '%s\n' "${versions[@]}"
           cat "$0" "$here/dom0-init" "$here/domu-init"; } | sha256sum | cut -c1-64)
if [ "$(cat "$out/images.stamp" 2>/dev/null)" = "$stamp" ]; then
    exit 0
fi
log "building into $out (Xen, kernel $kver, dom0 and domU initramfs)"
rm -f "$out/images.stamp"
mkdir -p "$out/debs"
sysroot=$out/sysroot

# --- packages ---------------------------------------------------------------
need=()
for pv in "${versions[@]}"; do
    p=${pv%%=*}
    v=${pv#*=}
    ls "$out/debs/${p}_"*"${v#*:}_"*.deb >/dev/null 2>&1 || need+=("$pv")
done
if [ ${#need[@]} -gt 0 ]; then
    # as root apt warns that _apt cannot write here: harmless
    (cd "$out/debs" && apt-get download -q "${need[@]}" >/dev/null 2>&1) ||
        die "apt-get download ${need[*]} failed"
fi
rm -rf "$sysroot"
mkdir -p "$sysroot"
for pv in "${versions[@]}"; do
    p=${pv%%=*}
    v=${pv#*=}
    dpkg-deb -x "$(ls "$out/debs/${p}_"*"${v#*:}_"*.deb | head -n 1)" "$sysroot"
done
zcat "$sysroot/boot/xen-4.17-amd64.gz" > "$out/xen.elf"
cp "$sysroot/boot/vmlinuz-$kver" "$out/vmlinuz"

# --- fio 3.33 for the domU (the version xensim's engine is built for) -----
fio=$out/fio-src/fio-3.33/fio
if [ ! -x "$fio" ]; then
    "$top/xensim/fio/get-fio-src.sh" "$out/fio-src"
    make -C "$out/fio-src/fio-3.33" -j"$(nproc)" fio >"$out/fio-build.log" 2>&1 ||
        { tail -20 "$out/fio-build.log" >&2; die "fio build failed"; }
fi

# --- staging helpers -----------------------------------------------------------
libpath=$sysroot/lib/x86_64-linux-gnu:$sysroot/usr/lib/x86_64-linux-gnu

# new_stage DIR: an empty merged-/usr root with busybox's applets
new_stage() {
    local d=$1 a
    rm -rf "$d"
    mkdir -p "$d"/usr/{bin,sbin,lib/x86_64-linux-gnu,lib64} \
             "$d"/{dev,proc,sys,tmp,run,etc,boot,mnt}
    for a in bin sbin lib lib64; do ln -s usr/$a "$d/$a"; done
    cp "$sysroot/bin/busybox" "$d/usr/bin/busybox"
    for a in $("$d/usr/bin/busybox" --list); do
        [ -e "$d/usr/bin/$a" ] || ln -s busybox "$d/usr/bin/$a"
    done
    # glibc dlopens libgcc_s for pthread_cancel (xl's, fio's threads)
    cp -L /lib/x86_64-linux-gnu/libgcc_s.so.1 "$d/usr/lib/x86_64-linux-gnu/"
}

# add_bin DIR FILE [DEST]: FILE (a path in the sysroot, or on the host when
# absolute) at DEST (default: its sysroot path) and every library ldd
# resolves for it, flat in /usr/lib/x86_64-linux-gnu (a default path of
# Debian's ld.so, no cache needed).
add_bin() {
    local d=$1 src=$2 dest=${3:-$2} lib
    [ "${src#/}" != "$src" ] || src=$sysroot/$src
    [ -f "$src" ] || die "missing $src"
    mkdir -p "$d/$(dirname "$dest")"
    # a busybox applet of that name (dpkg, dpkg-deb) is a link: replace
    # it, never busybox through it
    rm -f "$d/$dest"
    cp -L "$src" "$d/$dest"
    if LD_LIBRARY_PATH=$libpath ldd "$src" | grep -q 'not found'; then
        die "$src: $(LD_LIBRARY_PATH=$libpath ldd "$src" | grep 'not found' | tr -s ' \t' ' ')"
    fi
    for lib in $(LD_LIBRARY_PATH=$libpath ldd "$src" |
                 awk '$2 == "=>" && $3 ~ /^\// { print $3 }'); do
        [ -e "$d/usr/lib/x86_64-linux-gnu/${lib##*/}" ] ||
            cp -L "$lib" "$d/usr/lib/x86_64-linux-gnu/"
    done
    [ -e "$d/usr/lib64/ld-linux-x86-64.so.2" ] ||
        cp -L /lib64/ld-linux-x86-64.so.2 "$d/usr/lib64/"
}

# add_modules DIR NAME...: the modules and what they depend on (their
# .modinfo "depends="), then busybox depmod for the guest's modprobe
moddir=lib/modules/$kver
declare -A modpath
while read -r f; do
    n=${f##*/}
    n=${n%.ko}
    modpath[${n//-/_}]=$f
done < <(cd "$sysroot/$moddir" && find kernel -name '*.ko')
add_modules() {
    local d=$1 m f deps
    shift
    for m in "$@"; do
        m=${m//-/_}
        f=${modpath[$m]:-}
        [ -n "$f" ] || die "no module $m in $kpkg"
        f=usr/$moddir/$f
        [ -e "$d/$f" ] && continue
        mkdir -p "$d/$(dirname "$f")"
        cp "$sysroot/$moddir/${modpath[$m]}" "$d/$f"
        deps=$(objcopy -O binary --only-section=.modinfo "$d/$f" /dev/stdout |
               tr '\0' '\n' | sed -n 's/^depends=//p' | tr ',' ' ')
        # shellcheck disable=SC2086
        [ -z "$deps" ] || add_modules "$d" $deps
    done
}
finish_modules() {
    local d=$1
    cp "$sysroot/$moddir/modules.order" "$sysroot/$moddir/modules.builtin" \
       "$d/usr/$moddir/"
    "$sysroot/bin/busybox" depmod -b "$d" "$kver"
}

# pack DIR FILE: newc cpio, owned by root
pack() {
    (cd "$1" && find . -mindepth 1 | LC_ALL=C sort |
     cpio -o -H newc -R 0:0 --quiet) > "$2"
}

# --- dom0 --------------------------------------------------------------------
s=$out/dom0
new_stage "$s"
for b in xl xenstored xenconsoled xen-init-dom0; do
    add_bin "$s" "$XENBIN/$b"
done
add_bin "$s" usr/bin/xenstore
for a in read write ls list rm exists watch chmod; do
    ln -s xenstore "$s/usr/bin/xenstore-$a"
done
add_bin "$s" usr/bin/socat
add_bin "$s" usr/bin/jq
# dpkg, and the programs it runs that busybox has not, or not as it
# wants them: ldconfig (glibc's, static) and GNU tar (dpkg-deb's), from
# the host, Debian 12 too. Its database holds qemu-system-xen (below);
# each run adds the packages whose libraries its payload brings (run.sh).
for b in dpkg dpkg-deb dpkg-split dpkg-query dpkg-divert; do
    add_bin "$s" usr/bin/$b
done
add_bin "$s" /sbin/ldconfig usr/sbin/ldconfig
add_bin "$s" /usr/bin/tar usr/bin/tar
mkdir -p "$s"/var/lib/dpkg/{info,updates,triggers} "$s/etc/dpkg/dpkg.cfg.d"
# Debian's device model, libxl's default (/usr/libexec/
# xen-qemu-system-i386), installed as dpkg would: the fork's package must
# leave it alone and its xenblk-default diverts it. Its libraries, not its
# data (no arm runs it as a device model; dom0.sh runs its --version).
qdeb=$(ls "$out"/debs/qemu-system-xen_*.deb | head -n 1)
add_bin "$s" usr/libexec/xen-qemu-system-i386
dpkg-deb -f "$qdeb" | sed '1a Status: install ok installed' \
    > "$s/var/lib/dpkg/status"
dpkg-deb -c "$qdeb" | awk '{ print substr($6, 2) }' |
    sed 's|/$||; s|^$|/.|' > "$s/var/lib/dpkg/info/qemu-system-xen.list"
add_modules "$s" "${DOM0_MODULES[@]}"
finish_modules "$s"
cp "$out/vmlinuz" "$s/boot/vmlinuz"
install -m 755 "$here/dom0-init" "$s/init"
pack "$s" "$out/dom0.cpio"

# --- domU --------------------------------------------------------------------
s=$out/domu
new_stage "$s"
add_bin "$s" "$fio" usr/bin/fio
strip "$s/usr/bin/fio"          # built with -g: 4x smaller, a smaller ramdisk
add_bin "$s" sbin/mke2fs
add_bin "$s" sbin/e2fsck
cp "$sysroot/etc/mke2fs.conf" "$s/etc/"
add_bin "$s" usr/bin/xenstore
for a in read write ls exists; do ln -s xenstore "$s/usr/bin/xenstore-$a"; done
add_bin "$s" usr/bin/jq
add_modules "$s" "${DOMU_MODULES[@]}"
finish_modules "$s"
install -m 755 "$here/domu-init" "$s/init"
pack "$s" "$out/domu.cpio"

echo "$stamp" > "$out/images.stamp"
log "dom0.cpio $(du -m "$out/dom0.cpio" | cut -f1) MiB," \
    "domu.cpio $(du -m "$out/domu.cpio" | cut -f1) MiB"
