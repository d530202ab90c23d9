#!/bin/bash
# Fetch and unpack the pinned QEMU base (upstream/qemu.conf).
#
# Usage: fetch-upstream.sh DESTDIR
#
# Tries the Debian archive (apt-get source --download-only) first and falls
# back to the cached copy in $SHARED_UPSTREAM (default ../shared/upstream).
# The orig tarball's sha256 must match QEMU_SHA256 whatever its origin.
# DESTDIR is created atomically: it either holds the whole pristine tree or
# does not exist.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/upstream/qemu.conf"
dest=${1:?usage: fetch-upstream.sh DESTDIR}
shared=${SHARED_UPSTREAM:-$top/../shared/upstream}
dl=${DL_DIR:-$top/build/dl}

[ -d "$dest" ] && exit 0
mkdir -p "$dl"
tarball=$dl/$QEMU_ORIG

verify() {
    echo "$QEMU_SHA256  $1" | sha256sum --check --status
}

tried=()
if [ -f "$tarball" ] && ! verify "$tarball"; then
    echo "fetch-upstream: $tarball has the wrong sha256, discarding it" >&2
    rm -f "$tarball"
fi
if [ ! -f "$tarball" ] && [ -z "${NO_APT_SOURCE:-}" ]; then
    tried+=("apt-get source qemu=$QEMU_DEBVERSION")
    tmp=$(mktemp -d "$dl/apt.XXXXXX")
    if (cd "$tmp" && apt-get source -q --download-only "qemu=$QEMU_DEBVERSION") \
        >"$dl/apt-source.log" 2>&1 && [ -f "$tmp/$QEMU_ORIG" ]; then
        if verify "$tmp/$QEMU_ORIG"; then
            mv "$tmp/$QEMU_ORIG" "$tarball"
        else
            echo "fetch-upstream: archive copy has the wrong sha256" >&2
        fi
    fi
    rm -rf "$tmp"
fi
if [ ! -f "$tarball" ]; then
    tried+=("$shared/$QEMU_ORIG")
    if [ -f "$shared/$QEMU_ORIG" ]; then
        if verify "$shared/$QEMU_ORIG"; then
            cp "$shared/$QEMU_ORIG" "$tarball.tmp" && mv "$tarball.tmp" "$tarball"
        else
            echo "fetch-upstream: $shared/$QEMU_ORIG: sha256 mismatch" \
                 "(want $QEMU_SHA256)" >&2
        fi
    fi
fi
if [ ! -f "$tarball" ]; then
    echo "fetch-upstream: no verified copy of $QEMU_ORIG; tried:" >&2
    printf '  %s\n' "${tried[@]}" >&2
    exit 1
fi
# Re-check what we are about to unpack: the cache may have changed.
verify "$tarball" || { echo "fetch-upstream: $tarball: sha256 mismatch" >&2; exit 1; }

mkdir -p "$(dirname "$dest")"
stage=$(mktemp -d "$(dirname "$dest")/.unpack.XXXXXX")
trap 'rm -rf "$stage"' EXIT
tar -xJf "$tarball" -C "$stage" --no-same-owner
mv "$stage/qemu-$QEMU_VERSION" "$dest"
echo "fetch-upstream: QEMU $QEMU_VERSION ($QEMU_DEBVERSION) in $dest"
