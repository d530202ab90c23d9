#!/bin/bash
# make install: the fork's device model in a tree of its own, never on
# PATH and never over Debian's qemu-system-xen (/usr/libexec/
# xen-qemu-system-i386) or qemu-system-x86 (/usr/bin/qemu-system-i386):
#
#   PREFIX/lib/xenblk/bin/qemu-system-i386   the device model
#   PREFIX/share/xenblk/qemu/keymaps/        its keymaps (-vnc, libxl's
#                                            default, needs en-us)
#   PREFIX/lib/xenblk/share -> ../../share/xenblk
#   PREFIX/sbin/xenblk-default               the host-wide switch
#   PREFIX/share/man/man8/xenblk-default.8
#
# QEMU is built relocatable (scripts/build-qemu.sh, prefix /usr/local):
# it looks for its data in <its own dir>/../share/qemu, whatever PREFIX
# is, so the link above is all it needs; no -L.
#
# Usage: scripts/install.sh FORK_OBJDIR   (env DESTDIR, PREFIX; STRIP=1
# strips the binary as dh_strip does, for the Debian package)
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
obj=${1:?usage: $0 FORK_OBJDIR}
prefix=${PREFIX:-/usr/local}
root=${DESTDIR:-}$prefix
bin=$obj/qemu-system-i386
keymaps=$obj/qemu-bundle/usr/local/share/qemu/keymaps
[ -x "$bin" ] && [ -d "$keymaps" ] ||
    { echo "install: no fork build in $obj (make fork)" >&2; exit 1; }

install -d "$root/lib/xenblk/bin" "$root/share/xenblk/qemu/keymaps" \
           "$root/sbin" "$root/share/man/man8"
if [ -n "${STRIP:-}" ]; then
    strip --remove-section=.comment --remove-section=.note \
          --strip-unneeded -o "$root/lib/xenblk/bin/qemu-system-i386" "$bin"
    chmod 755 "$root/lib/xenblk/bin/qemu-system-i386"
else
    install -m 755 "$bin" "$root/lib/xenblk/bin/qemu-system-i386"
fi
# the build tree's keymaps are links into the source: copy their targets
find "$keymaps" -mindepth 1 -maxdepth 1 -print0 |
    xargs -0 install -m 644 -t "$root/share/xenblk/qemu/keymaps"
ln -sfn ../../share/xenblk "$root/lib/xenblk/share"
sed "s|@PREFIX@|$prefix|g" "$top/packaging/xenblk-default" > "$root/sbin/xenblk-default"
chmod 755 "$root/sbin/xenblk-default"
install -m 644 "$top/packaging/xenblk-default.8" "$root/share/man/man8/"
