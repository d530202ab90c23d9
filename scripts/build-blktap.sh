#!/bin/bash
# Fetch, verify and build the pinned blktap (upstream/blktap.conf): tapdisk,
# tap-ctl, tapback and cpumond for the bench's tapdisk arm, installed in
# build/blktap/inst (sbin/tap-ctl, libexec/tapdisk, bin/tapback,
# bin/cpumond). Nothing of blktap goes into the repository.
#
# Usage: build-blktap.sh
# Exit status 3: no verified tarball anywhere (nothing built); 1: failed.
#
# The tarball is looked for in the order of $BLKTAP_ROUTES (default all):
#   cache   $DL_DIR/$BLKTAP_TARBALL (DL_DIR defaults to build/dl)
#   github  $BLKTAP_URL, GitHub's tar.gz of the tag (skipped with
#           NO_NETWORK=1); kept when its tar is the pinned git archive
#   shared  $SHARED_UPSTREAM/$BLKTAP_TARBALL (default ../shared/upstream)
# The .tar.xz must match BLKTAP_SHA256; GitHub's .tar.gz must decompress
# to the tar whose sha256 is BLKTAP_TAR_SHA256 (the same `git archive`).
#
# Built once: build/blktap/.built records the tarball's tar sha256 and
# this script's own, and the build is skipped while both match and the
# binaries are there. With ccache (CC="ccache gcc") a rebuild takes
# seconds. The source needs a VERSION file (version.m4 includes it; the
# git archive has none) and gcc 12 warns stringop-truncation in code
# built with -Werror, hence -Wno-error=stringop-truncation.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/upstream/blktap.conf"
out=$top/build/blktap
dl=${DL_DIR:-$top/build/dl}
shared=${SHARED_UPSTREAM:-$(cd "$top/.." && pwd)/shared/upstream}
routes=${BLKTAP_ROUTES:-cache github shared}
inst=$out/inst
bins=("$inst/sbin/tap-ctl" "$inst/libexec/tapdisk" "$inst/bin/tapback"
      "$inst/bin/cpumond")
want="$BLKTAP_TAR_SHA256 $(sha256sum "$0" | cut -d' ' -f1)"

log() { printf 'build-blktap: %s\n' "$*" >&2; }

have_bins() {
    local b
    for b in "${bins[@]}"; do [ -x "$b" ] || return 1; done
}
if [ "$(cat "$out/.built" 2>/dev/null)" = "$want" ] && have_bins; then
    exit 0
fi

mkdir -p "$dl" "$out"
tarball=$dl/$BLKTAP_TARBALL
part=$dl/.$BLKTAP_TARBALL.$$
trap 'rm -f "$part" "$part.gz"' EXIT

gh_tar=$dl/blktap-$BLKTAP_VERSION.tar     # the github route's, unpacked
verify_xz() { echo "$BLKTAP_SHA256  $1" | sha256sum --check --status; }
verify_tar() { echo "$BLKTAP_TAR_SHA256  $1" | sha256sum --check --status; }

src_tar=
from_cache() {
    if [ -f "$tarball" ] && verify_xz "$tarball"; then
        src_tar=$tarball
    elif [ -f "$gh_tar" ] && verify_tar "$gh_tar"; then
        src_tar=$gh_tar
    fi
    [ -n "$src_tar" ]
}

from_shared() {
    [ -f "$shared/$BLKTAP_TARBALL" ] || return 1
    cp "$shared/$BLKTAP_TARBALL" "$part"
    verify_xz "$part" || { log "$shared/$BLKTAP_TARBALL: sha256 mismatch"; return 1; }
    mv "$part" "$tarball"
    src_tar=$tarball
}

# GitHub's archive of the tag is gzip over the same git archive tar:
# check the tar, keep it as the pinned .tar.xz would be (cache).
from_github() {
    [ -z "${NO_NETWORK:-}" ] || return 1
    command -v curl >/dev/null || return 1
    curl -fsSL --connect-timeout "${FETCH_CONNECT_TIMEOUT:-10}" \
        --max-time "${FETCH_MAX_TIME:-300}" -o "$part.gz" "$BLKTAP_URL" \
        2>/dev/null || { log "$BLKTAP_URL: download failed"; return 1; }
    if [ "$(gzip -dc "$part.gz" | sha256sum | cut -d' ' -f1)" != \
         "$BLKTAP_TAR_SHA256" ]; then
        log "$BLKTAP_URL: not the pinned git archive (tar sha256 mismatch)"
        return 1
    fi
    gzip -dc "$part.gz" > "$part"
    verify_tar "$part" || return 1
    mv "$part" "$gh_tar"
    src_tar=$gh_tar
}

got=
for r in $routes; do
    if "from_$r"; then got=$r; break; fi
done
if [ -z "$got" ]; then
    log "no verified blktap $BLKTAP_VERSION (tried: $routes); put" \
        "$BLKTAP_TARBALL (sha256 $BLKTAP_SHA256) in $dl or $shared"
    exit 3
fi
log "blktap $BLKTAP_VERSION ($BLKTAP_COMMIT) from $got"

# Unpack afresh (in-tree build: blktap's Makefile.am names built .la
# files by $(top_srcdir), so it cannot build out of tree).
rm -rf "$out/src" "$inst" "$out/.built"
mkdir -p "$out/src"
tar -xf "$src_tar" -C "$out/src" --strip-components=1 --no-same-owner
echo "$BLKTAP_VERSION" > "$out/src/VERSION"

cc=gcc
if command -v ccache >/dev/null; then
    cc="ccache gcc"
    export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xenblk/ccache}
    export CCACHE_BASEDIR=$out
    export CCACHE_NOHASHDIR=1
fi
blog=$out/build.log
{
    cd "$out/src"
    autoreconf -fi
    # Static: tap-ctl spawn runs $libexecdir/tapdisk, a real binary then,
    # with no libtool wrapper or rpath between it and the preloaded shim.
    ./configure --prefix="$inst" --disable-shared CC="$cc" \
        CFLAGS="-O2 -g -Wno-error=stringop-truncation"
    # What the arm runs, in the top Makefile's order (not cbt, nor
    # mockatests, which needs cmocka). The install hooks put units in
    # /usr/lib/systemd/system: not ours.
    for d in lvm vhd cpumond control drivers include tapback; do
        make -C "$d" -j"$(nproc)"
        make -C "$d" install SYSTEMD_SERVICE_DIR="$inst/lib/systemd/system"
    done
} > "$blog" 2>&1 || { tail -n 30 "$blog" >&2; log "failed, see $blog"; exit 1; }
have_bins || { log "build made no ${bins[*]}"; exit 1; }
echo "$want" > "$out/.built"
log "built into $inst"
