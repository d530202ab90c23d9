#!/bin/sh
# Unpack Debian's xen-utils-4.17 (xenstored, test-xenstore) into DEST
# without installing it: apt-get download, sha256 checked against the
# one apt's index gives for that version, dpkg -x.
#
# Copyright (c) 2026 The xenblk fork authors
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: get-xenstored.sh DEST
# Idempotent: DEST/.stamp records the version and sha256 unpacked; a
# second run with the same candidate does nothing. Prints the path of
# xenstored on success.
set -eu

PKG=xen-utils-4.17
BIN=usr/lib/xen-4.17/bin

if [ $# -ne 1 ]; then
    echo "usage: $0 DEST" >&2
    exit 2
fi
DEST=$1

die() {
    echo "get-xenstored: $*" >&2
    exit 1
}

# The candidate version and its sha256, as apt's index states them.
ver=$(apt-cache policy "$PKG" 2>/dev/null | sed -n 's/^ *Candidate: *//p')
if [ -z "$ver" ] || [ "$ver" = "(none)" ]; then
    die "apt knows no candidate for $PKG (run apt-get update?)"
fi
sum=$(apt-cache show "$PKG=$ver" | sed -n 's/^SHA256: *//p' | head -n 1)
[ -n "$sum" ] || die "apt-cache show $PKG=$ver gives no SHA256"

stamp="$DEST/.stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$PKG $ver $sum" ] &&
   [ -x "$DEST/$BIN/xenstored" ]; then
    echo "$DEST/$BIN/xenstored"
    exit 0
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes into the current directory; as root it may
# warn that _apt cannot read it, which is harmless here.
(cd "$tmp" && apt-get download -q "$PKG=$ver" >/dev/null 2>&1) ||
    die "apt-get download $PKG=$ver failed"
deb=$(ls "$tmp"/*.deb 2>/dev/null | head -n 1)
[ -n "$deb" ] || die "no .deb downloaded"

got=$(sha256sum "$deb" | cut -d' ' -f1)
[ "$got" = "$sum" ] || die "sha256 mismatch for $deb: got $got, apt says $sum"

rm -rf "$DEST.new"
mkdir -p "$DEST.new"
dpkg -x "$deb" "$DEST.new"
[ -x "$DEST.new/$BIN/xenstored" ] || die "$PKG has no $BIN/xenstored"
echo "$PKG $ver $sum" > "$DEST.new/.stamp"
rm -rf "$DEST"
mv "$DEST.new" "$DEST"
echo "$DEST/$BIN/xenstored"
