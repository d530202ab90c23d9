#!/bin/bash
# Fetch, verify and unpack the pinned QEMU base.
#
# Usage: fetch-upstream.sh [DESTDIR]
#
# The base is the Debian orig tarball $QEMU_CONF names (default
# upstream/qemu.conf: QEMU_VERSION, QEMU_DEBVERSION, QEMU_ORIG, QEMU_SHA256).
# It is looked for in the order of $FETCH_ROUTES (default: all four):
#   cache     $DL_DIR/$QEMU_ORIG (DL_DIR defaults to build/dl)
#   archive   <mirror>/pool/main/q/qemu/$QEMU_ORIG, for each Debian mirror
#             in the machine's apt sources (apt itself parses sources.list,
#             *.list and deb822 *.sources; apt's state is not changed)
#   snapshot  Debian's snapshot archive ($SNAPSHOT_URL), which keeps every
#             version ever uploaded: its API names the file by sha1
#   shared    $SHARED_UPSTREAM/$QEMU_ORIG (default ../shared/upstream)
# NO_NETWORK=1 skips archive and snapshot. Every network attempt is bounded
# (FETCH_CONNECT_TIMEOUT, FETCH_MAX_TIME seconds). Whatever its origin, the
# tarball must match QEMU_SHA256; it is then kept in DL_DIR.
# With DESTDIR, it is unpacked there atomically: DESTDIR either holds the
# whole pristine tree or does not exist.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
if [ -n "${QEMU_CONF:-}" ]; then
    . "$QEMU_CONF"
else
    . "$top/scripts/base.sh"      # upstream/qemu.conf, or BASE's
fi
dest=${1:-}
dl=${DL_DIR:-$top/build/dl}
shared=${SHARED_UPSTREAM:-$(cd "$top/.." && pwd)/shared/upstream}
snapshot=${SNAPSHOT_URL:-https://snapshot.debian.org}
routes=${FETCH_ROUTES:-cache archive snapshot shared}
pkg=${QEMU_ORIG%%_*}                     # the Debian source package: qemu
case $pkg in
lib?*) pool=pool/main/${pkg:0:4}/$pkg ;;
*) pool=pool/main/${pkg:0:1}/$pkg ;;
esac

[ -n "$dest" ] && [ -d "$dest" ] && exit 0
mkdir -p "$dl"
tarball=$dl/$QEMU_ORIG
part=$dl/.$QEMU_ORIG.$$                  # a download or copy in progress
stage=
trap 'rm -f "$part"; [ -z "$stage" ] || rm -rf "$stage"' EXIT

verify() { echo "$QEMU_SHA256  $1" | sha256sum --check --status; }

tried=()
note() { tried+=("$(printf '%-9s %s' "$1" "$2")"); }

# Keep $part as the tarball if its sha256 is the pinned one.
take() {   # ROUTE ORIGIN
    if verify "$part"; then
        mv "$part" "$tarball"
        echo "fetch-upstream: $QEMU_ORIG from $2 (sha256 ok)"
        return 0
    fi
    rm -f "$part"
    note "$1" "$2: sha256 mismatch"
    echo "fetch-upstream: $2: sha256 mismatch (want $QEMU_SHA256)" >&2
    return 1
}

# Bounded download of URL to $part; on failure, prints curl's reason.
get() {   # URL
    local err
    command -v curl >/dev/null || { echo "curl missing (make deps)"; return 1; }
    err=$(curl -fsSL --connect-timeout "${FETCH_CONNECT_TIMEOUT:-10}" \
          --max-time "${FETCH_MAX_TIME:-900}" --speed-limit 1024 --speed-time 60 \
          -o "$part" "$1" 2>&1) && return 0
    rm -f "$part"
    err=${err##*curl: }
    echo "${err:-failed}"
    return 1
}

# apt's proxy serves curl too, unless the environment names one.
for s in http https; do
    v=${s}_proxy p=
    [ -n "${!v:-}" ] || eval "$(apt-config shell p "Acquire::$s::Proxy" 2>/dev/null)"
    [ -z "$p" ] || [ "$p" = DIRECT ] || export "$v=$p"
done

from_cache() {
    [ -f "$tarball" ] || { note cache "$tarball: not there"; return 1; }
    verify "$tarball" && return 0
    note cache "$tarball: sha256 mismatch, discarded"
    echo "fetch-upstream: $tarball: sha256 mismatch, discarding it" >&2
    rm -f "$tarball"
    return 1
}

from_archive() {
    local m url msg mirrors
    mirrors=$("$top/scripts/debian-mirrors.sh")
    [ -n "$mirrors" ] ||
        { note archive "no Debian mirror in the apt sources (apt-get indextargets)"; return 1; }
    for m in $mirrors; do
        url=${m%/}/$pool/$QEMU_ORIG
        case $m in
        http://* | https://* | ftp://*) ;;
        *) note archive "$url: not a URL curl can fetch"; continue ;;
        esac
        if msg=$(get "$url"); then
            take archive "$url" && return 0
        else
            note archive "$url: $msg"
        fi
    done
    return 1
}

from_snapshot() {
    local api sha1 msg
    command -v jq >/dev/null || { note snapshot "jq missing (make deps)"; return 1; }
    api="$snapshot/mr/package/$pkg/$(jq -rn --arg v "$QEMU_DEBVERSION" '$v|@uri')/srcfiles?fileinfo=1"
    msg=$(get "$api") || { note snapshot "$api: $msg"; return 1; }
    sha1=$(jq -r --arg n "$QEMU_ORIG" '.fileinfo | to_entries[] |
                select(any(.value[]; .name == $n)) | .key' "$part" 2>/dev/null |
           head -n1) || true
    rm -f "$part"
    [ -n "$sha1" ] || { note snapshot "$api: names no $QEMU_ORIG"; return 1; }
    msg=$(get "$snapshot/file/$sha1") ||
        { note snapshot "$snapshot/file/$sha1: $msg"; return 1; }
    take snapshot "$snapshot/file/$sha1"
}

from_shared() {
    [ -f "$shared/$QEMU_ORIG" ] || { note shared "$shared/$QEMU_ORIG: not there"; return 1; }
    cp "$shared/$QEMU_ORIG" "$part" && take shared "$shared/$QEMU_ORIG"
}

got=
for r in $routes; do
    case $r in
    cache | shared) ;;
    archive | snapshot)
        if [ -n "${NO_NETWORK:-}" ]; then note "$r" "skipped (NO_NETWORK)"; continue; fi ;;
    *) echo "fetch-upstream: unknown route '$r' in FETCH_ROUTES" >&2; exit 2 ;;
    esac
    if "from_$r"; then got=$r; break; fi
done
if [ -z "$got" ]; then
    {
        echo "fetch-upstream: no verified copy of $QEMU_ORIG" \
             "(QEMU $QEMU_VERSION, Debian source $pkg $QEMU_DEBVERSION); tried:"
        printf '  %s\n' "${tried[@]}"
        echo "Get that file (any Debian mirror's $pool/ or $snapshot has it)," \
             "put it at $tarball (or in $shared/) and run make again;" \
             "its sha256 must be $QEMU_SHA256"
    } >&2
    exit 1
fi
# Re-check what we are about to unpack: the cache may have changed.
verify "$tarball" || { echo "fetch-upstream: $tarball: sha256 mismatch" >&2; exit 1; }
[ -n "$dest" ] || { echo "fetch-upstream: $tarball (sha256 ok)"; exit 0; }

mkdir -p "$(dirname "$dest")"
stage=$(mktemp -d "$(dirname "$dest")/.unpack.XXXXXX")
tar -xJf "$tarball" -C "$stage" --no-same-owner
mv "$stage/qemu-$QEMU_VERSION" "$dest"
echo "fetch-upstream: QEMU $QEMU_VERSION ($QEMU_DEBVERSION) in $dest"
