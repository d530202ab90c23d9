#!/bin/sh
# Fetch and configure the fio 3.33 source whose headers the xenblk external
# ioengine is compiled against, so that struct thread_data / struct io_u
# match Debian's /usr/bin/fio 3.33 (package fio 3.33-3).
#
# Usage: get-fio-src.sh DEST
#   Leaves the configured tree in DEST/fio-3.33 (config-host.h present).
#
# Source: `apt-get source fio=3.33-3` when a deb-src entry serves it;
# otherwise the pinned orig tarball in $FIO_UPSTREAM_DIR (default: the
# project's shared/upstream beside the repository), checked against
# SHA256SUMS there.
#
# Feature set: with apt-get source, debian/rules' configure lines are
# printed for comparison; offline (the usual case here: no deb-src for
# bookworm) the debian/ tarball is not available, so we configure with
# --prefix=/usr --disable-native as a distro build does. Only a few CONFIG_* macros change the layout of what an engine
# touches: CONFIG_CUDA adds fields inside struct thread_data (Debian's fio
# has no CUDA: its Build-Depends in fio_3.33-3.dsc list none), and
# CONFIG_LIBAIO/POSIXAIO/RDMA only extend the union at the *end* of
# struct io_u, which fio allocates; every field before it keeps its offset.
# We check the result: the configured tree must not define CONFIG_CUDA, and
# the engine verifies at init that td->io_ops is itself (offset check).
set -eu

VERSION=3.33
DEBVER=3.33-3
TARBALL=fio_${VERSION}.orig.tar.gz

dest=${1:?usage: $0 DEST}
here=$(cd "$(dirname "$0")" && pwd)
up=${FIO_UPSTREAM_DIR:-$here/../../../shared/upstream}
src=$dest/fio-$VERSION

if [ -f "$src/config-host.h" ]; then
    exit 0
fi
mkdir -p "$dest"
rm -rf "$src"

if (cd "$dest" && apt-get source -q "fio=$DEBVER") >"$dest/apt.log" 2>&1 &&
   [ -d "$src/debian" ]; then
    echo "get-fio-src: fio $DEBVER from apt-get source" >&2
else
    echo "get-fio-src: apt-get source failed, using $up/$TARBALL" >&2
    [ -f "$up/$TARBALL" ] || { echo "get-fio-src: $up/$TARBALL missing" >&2;
                                exit 1; }
    want=$(awk -v f="$TARBALL" '$2 == f { print $1 }' "$up/SHA256SUMS")
    have=$(sha256sum "$up/$TARBALL" | awk '{ print $1 }')
    if [ -z "$want" ] || [ "$want" != "$have" ]; then
        echo "get-fio-src: sha256 mismatch for $TARBALL ($have)" >&2
        exit 1
    fi
    tar -C "$dest" -xzf "$up/$TARBALL"
fi

if [ -f "$src/debian/rules" ]; then
    grep -n "configure" "$src/debian/rules" >&2 || true
fi

(cd "$src" && ./configure --prefix=/usr --disable-native) \
    >"$dest/configure.log" 2>&1 || {
    tail -20 "$dest/configure.log" >&2
    exit 1
}

if grep -q "define CONFIG_CUDA" "$src/config-host.h"; then
    echo "get-fio-src: CONFIG_CUDA set, thread_data would not match" >&2
    exit 1
fi
echo "get-fio-src: configured $src" >&2
