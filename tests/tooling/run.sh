#!/bin/bash
# Tests of the fork's own tooling: pinned fetch, patch-queue round trip,
# and what the two QEMU builds must provide.
# Usage: run.sh [TEST...]   (tampered nosource routes nogc variants
#                            roundtrip binaries install guard; default all)
# Prints one line per test and a closing "N passed, N failed" line.
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/upstream/qemu.conf"
shared=${SHARED_UPSTREAM:-$top/../shared/upstream}
work=$(mktemp -d /tmp/xenblk-tooling.XXXXXX)
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT
pass=0
fail=0

ok()   { echo "ok - $1"; pass=$((pass + 1)); }
nok()  { echo "not ok - $1"; fail=$((fail + 1)); [ -n "${2:-}" ] && sed 's/^/#   /' "$2"; }

# A tarball with one byte changed must be refused, leaving nothing behind.
t_tampered() {
    local d=$work/tampered
    mkdir -p "$d/shared" "$d/dl"
    cp "$shared/$QEMU_ORIG" "$d/shared/"
    printf '\x00' | dd of="$d/shared/$QEMU_ORIG" bs=1 seek=4096 conv=notrunc status=none
    if NO_NETWORK=1 SHARED_UPSTREAM=$d/shared DL_DIR=$d/dl \
        "$top/scripts/fetch-upstream.sh" "$d/out" >"$d/log" 2>&1; then
        nok "tampered tarball is refused" "$d/log"
    elif [ -e "$d/out" ] || ls "$d"/.unpack.* >/dev/null 2>&1 ||
         [ -n "$(ls -A "$d/dl")" ]; then
        nok "tampered tarball leaves nothing behind" "$d/log"
    elif ! grep -q 'sha256 mismatch' "$d/log" || ! grep -q "$d/shared/$QEMU_ORIG" "$d/log"; then
        nok "tampered tarball error names the mismatch and what was tried" "$d/log"
    else
        ok "tampered tarball is refused with a clear error, nothing left behind"
    fi
}

# No source at all: one clear error naming every place tried, where to
# put the tarball and its sha256.
t_nosource() {
    local d=$work/nosource r
    mkdir -p "$d/shared" "$d/dl"
    if NO_NETWORK=1 SHARED_UPSTREAM=$d/shared DL_DIR=$d/dl \
        "$top/scripts/fetch-upstream.sh" "$d/out" >"$d/log" 2>&1; then
        nok "missing source is an error" "$d/log"; return
    fi
    for r in "no verified copy" "cache .*$d/dl/$QEMU_ORIG" "archive .*NO_NETWORK" \
             "snapshot .*NO_NETWORK" "shared .*$d/shared/$QEMU_ORIG" \
             "put it at $d/dl/$QEMU_ORIG" "$QEMU_SHA256"; do
        grep -q -- "$r" "$d/log" || { nok "missing source error is clear ($r)" "$d/log"; return; }
    done
    if [ -e "$d/out" ]; then
        nok "missing source leaves nothing behind" "$d/log"
    else
        ok "missing source gives one clear error (routes, where to put it, sha256)"
    fi
}

# The network routes against a local server standing in for a Debian
# mirror (found through apt's sources, here a private APT_CONFIG) and for
# the snapshot archive, with a small made-up base named by QEMU_CONF.
t_routes() {
    local d=$work/routes v=9.9.9 orig sha1 port= pid codename ver
    local pool=$work/routes/www/debian/pool/main/q/qemu
    ver=1:$v+ds-1 orig=qemu_$v+ds.orig.tar.xz
    mkdir -p "$d/tree/qemu-$v" "$pool" "$d/www/file" \
             "$d/www/mr/package/qemu/$ver" "$d/apt/parts" "$d/apt/lists"
    echo "made up" > "$d/tree/qemu-$v/README"
    tar -cJf "$d/$orig" -C "$d/tree" "qemu-$v"
    printf 'QEMU_VERSION=%s\nQEMU_DEBVERSION=%s\nQEMU_ORIG=%s\nQEMU_SHA256=%s\n' \
        "$v" "$ver" "$orig" "$(sha256sum "$d/$orig" | cut -d' ' -f1)" > "$d/qemu.conf"
    cp "$d/$orig" "$pool/"
    sha1=$(sha1sum "$d/$orig" | cut -d' ' -f1)
    cp "$d/$orig" "$d/www/file/$sha1"
    printf '{"result":[{"hash":"0123"},{"hash":"%s"}],"fileinfo":{"0123":[{"name":"qemu_%s.dsc"}],"%s":[{"name":"%s","path":"/pool/main/q/qemu"}]}}\n' \
        "$sha1" "$ver" "$sha1" "$orig" > "$d/www/mr/package/qemu/$ver/srcfiles"
    python3 -u -m http.server --bind 127.0.0.1 --directory "$d/www" 0 \
        >"$d/http.log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do
        port=$(sed -n 's/.* port \([0-9]*\).*/\1/p' "$d/http.log")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { kill "$pid"; nok "a local HTTP server starts" "$d/http.log"; return; }
    codename=$(. /etc/os-release && echo "$VERSION_CODENAME")
    # The security archive is no Debian mirror for sources: never tried.
    printf 'deb http://127.0.0.1:%s/debian-security %s-security main\n' \
        "$port" "$codename" > "$d/apt/sources.list"
    printf 'Types: deb deb-src\nURIs: http://127.0.0.1:%s/debian\nSuites: %s\nComponents: main\n' \
        "$port" "$codename" > "$d/apt/parts/mirror.sources"
    printf 'Dir::Etc::SourceList "%s";\nDir::Etc::SourceParts "%s";\nDir::State::Lists "%s";\n' \
        "$d/apt/sources.list" "$d/apt/parts" "$d/apt/lists" > "$d/apt/apt.conf"
    fetch() {   # NAME [VAR=VALUE...]: fetch the made-up base into $d/NAME
        local n=$1; shift
        env no_proxy=127.0.0.1 APT_CONFIG="$d/apt/apt.conf" QEMU_CONF="$d/qemu.conf" \
            SNAPSHOT_URL="http://127.0.0.1:$port" SHARED_UPSTREAM="$d/none" \
            DL_DIR="$d/$n.dl" "$@" "$top/scripts/fetch-upstream.sh" "$d/$n" >"$d/$n.log" 2>&1
    }
    if ! fetch archive || [ ! -f "$d/archive/README" ] ||
       ! grep -q "from http://127.0.0.1:$port/debian/pool/main/q/qemu/$orig" "$d/archive.log" ||
       ! cmp -s "$d/archive.dl/$orig" "$d/$orig" || grep -q security "$d/http.log"; then
        nok "archive route: the pool of the apt sources' Debian mirror" "$d/archive.log"
        kill "$pid"; return
    fi
    mv "$pool/$orig" "$d/$orig.away"
    if ! fetch snapshot || [ ! -f "$d/snapshot/README" ] ||
       ! grep -q "from http://127.0.0.1:$port/file/$sha1" "$d/snapshot.log" ||
       ! grep -q "GET /debian/pool/main/q/qemu/$orig .* 404" "$d/http.log"; then
        nok "snapshot route: the file the snapshot API names, when the mirror has none" \
            "$d/snapshot.log"
        kill "$pid"; return
    fi
    echo bad > "$pool/$orig"
    mkdir -p "$d/shared"
    cp "$d/$orig" "$d/shared/"
    if ! fetch bad FETCH_ROUTES="archive shared" SHARED_UPSTREAM="$d/shared" ||
       [ ! -f "$d/bad/README" ] || ! grep -q "$orig: sha256 mismatch" "$d/bad.log"; then
        nok "a bad archive copy is refused and the next route taken" "$d/bad.log"
        kill "$pid"; return
    fi
    kill "$pid"
    # No network now: a verified copy in the cache is all it takes.
    if ! fetch cached DL_DIR="$d/bad.dl" || [ ! -f "$d/cached/README" ] ||
       grep -q "from " "$d/cached.log"; then
        nok "a verified copy in the download cache is used first" "$d/cached.log"
    else
        ok "fetch routes: the apt sources' Debian mirror, snapshot, bad copy refused, cache first"
    fi
}

# build/src never runs git's automatic gc: a detached `git gc --auto` after
# a commit or `git am` (the base commit leaves ~10,000 loose objects) raced
# with `rm -rf` of the tree in FORCE=1 make src. Here queue.sh src makes
# build/src from a small base with 8000 loose objects, enough that stock
# git would gc (more than gc.auto/256 = 27 in objects/17, git's estimate).
# gc.autoDetach=false from the environment keeps any gc in the foreground,
# so the result is deterministic: without gc.auto=0 in build/src the base
# commit packs the objects and this fails.
t_nogc() {
    local d=$work/nogc i n17 after packs
    local -x GIT_CONFIG_COUNT=1 GIT_CONFIG_KEY_0=gc.autoDetach GIT_CONFIG_VALUE_0=false
    mkdir -p "$d/build/upstream/src" "$d/patches" "$d/scripts" "$d/upstream"
    cp "$top/scripts/queue.sh" "$top/scripts/fetch-upstream.sh" \
        "$top/scripts/base.sh" "$d/scripts/"
    cp "$top/upstream/qemu.conf" "$d/upstream/"
    : > "$d/patches/series"
    for i in $(seq 8000); do echo "$i" > "$d/build/upstream/src/f$i"; done
    if ! (cd "$d" && scripts/queue.sh src) >"$d/log" 2>&1; then
        nok "queue.sh src on a small base" "$d/log"; return
    fi
    git -C "$d/build/src" gc --auto >>"$d/log" 2>&1
    git -C "$d/build/src" maintenance run --auto >>"$d/log" 2>&1
    n17=$(git -C "$d/build/src" rev-list --objects --all | grep -c '^17')
    after=$(git -C "$d/build/src" count-objects | cut -d' ' -f1)
    packs=$(git -C "$d/build/src" count-objects -v | sed -n 's/^packs: //p')
    if [ "$n17" -le 27 ]; then
        nok "the small base would make stock git gc ($n17 objects in objects/17)" "$d/log"
    elif [ "$packs" != 0 ] || [ "$after" -lt 8000 ]; then
        nok "git's auto gc never runs in build/src ($after loose objects, $packs packs)" "$d/log"
    else
        ok "git's auto gc never runs in build/src ($after loose objects stay)"
    fi
}

# A second base (BASE=9.9 on a made-up pair of small bases): a patch that
# applies there as it is gets no variant; one that does not gets one, and
# only it; src applies the variant; a later change to the patches/ version
# of a varied patch stops src there until the variant is carried along.
t_variants() {
    local d=$work/variants g
    g() { git -c user.name=T -c user.email=t@t "$@"; }
    mkdir -p "$d/build/upstream/src" "$d/build/base-9.9/upstream/src" \
        "$d/patches" "$d/scripts" "$d/upstream"
    cp "$top/scripts/queue.sh" "$top/scripts/fetch-upstream.sh" \
        "$top/scripts/base.sh" "$d/scripts/"
    cp "$top/upstream/qemu.conf" "$d/upstream/"
    printf 'QEMU_VERSION=9.9.1\nQEMU_DEBVERSION=1:9.9.1\nQEMU_ORIG=none\nQEMU_SHA256=none\n' \
        > "$d/upstream/qemu-9.9.conf"
    printf 'a\nb\nc\nd\ne\n' > "$d/build/upstream/src/same"
    printf 'a\nb\nc\nd\ne\n' > "$d/build/base-9.9/upstream/src/same"
    printf '1\n2\n3\n4\n5\n' > "$d/build/upstream/src/moved"
    printf '1\nTWO\n3\n4\n5\n' > "$d/build/base-9.9/upstream/src/moved"
    : > "$d/patches/series"
    (cd "$d" && scripts/queue.sh src &&
        sed -i 's/^c$/C/' build/src/same && g -C build/src commit -q -a -m "same: C" \
            -m "Signed-off-by: T <t@t>" &&
        sed -i 's/^3$/THREE/' build/src/moved && g -C build/src commit -q -a -m "moved: 3" \
            -m "Signed-off-by: T <t@t>" &&
        scripts/queue.sh export) >"$d/log" 2>&1 ||
        { nok "variants: a two-patch series on the default base" "$d/log"; return; }
    if (cd "$d" && BASE=9.9 scripts/queue.sh src) >>"$d/log" 2>&1; then
        nok "variants: the second patch cannot apply on 9.9 as it is" "$d/log"; return
    fi
    # resolve by hand, as README's "Adding a base" says
    (cd "$d/build/base-9.9/.src.new" &&
        printf '1\nTWO\nTHREE\n4\n5\n' > moved &&
        g commit -q -a -m "moved: 3" -m "Signed-off-by: T <t@t>" &&
        cd "$d" && mv build/base-9.9/.src.new build/base-9.9/src &&
        BASE=9.9 scripts/queue.sh export) >>"$d/log" 2>&1 ||
        { nok "variants: export of base 9.9" "$d/log"; return; }
    if [ "$(cd "$d/patches/base-9.9" && ls)" != "$(printf '0002-moved-3.patch\nFROM')" ]; then
        nok "variants: only the patch that differs on 9.9 gets a variant" "$d/log"; return
    fi
    cp -a "$d/patches" "$d/patches.1"
    if ! (cd "$d" && FORCE=1 BASE=9.9 scripts/queue.sh src &&
          BASE=9.9 scripts/queue.sh export) >>"$d/log" 2>&1 ||
       ! diff -r "$d/patches.1" "$d/patches" >>"$d/log" ||
       ! grep -q THREE "$d/build/base-9.9/src/moved"; then
        nok "variants: src applies the variant, export gives it back unchanged" "$d/log"; return
    fi
    sed -i 's/^Subject: \[PATCH\] moved: 3$/Subject: [PATCH] moved: three/' \
        "$d/patches/0002-moved-3.patch"
    if (cd "$d" && FORCE=1 BASE=9.9 scripts/queue.sh src) >>"$d/log" 2>&1 ||
       ! grep -q "changed since its variant" "$d/log"; then
        nok "variants: a stale variant stops src" "$d/log"; return
    fi
    ok "variants: one variant where the bases differ, applied, exported, kept in step"
}

# make src && make export leaves patches/ byte-identical, for the real
# series and for a series with one more patch made in build/src.
t_roundtrip() {
    local d=$work/clone
    mkdir -p "$d"
    (cd "$top" && git ls-files -z | xargs -0 -r cp --parents -t "$d")
    (cd "$top" && git ls-files -z --others --exclude-standard | xargs -0 -r cp --parents -t "$d")
    mkdir -p "$d/build"
    # Reuse the verified download and unpacked base; nothing is rebuilt.
    ln -s "$top/build/dl" "$d/build/dl"
    [ -d "$top/build/upstream/src" ] && mkdir -p "$d/build/upstream" &&
        ln -s "$top/build/upstream/src" "$d/build/upstream/src"
    cp -a "$d/patches" "$work/patches.orig"
    if ! (cd "$d" && scripts/queue.sh src && scripts/queue.sh export) >"$work/rt.log" 2>&1; then
        nok "make src && make export runs" "$work/rt.log"; return
    fi
    if ! diff -r "$work/patches.orig" "$d/patches" >"$work/rt.diff"; then
        nok "make src && make export leaves patches/ byte-identical" "$work/rt.diff"; return
    fi
    # One more patch, exported, re-applied and exported again.
    (cd "$d/build/src" && echo "/* roundtrip */" >> README.rst &&
        git -c user.name=T -c user.email=t@t commit -q -a \
            -m "tests: round trip" -m "Signed-off-by: T <t@t>") >>"$work/rt.log" 2>&1
    (cd "$d" && scripts/queue.sh export) >>"$work/rt.log" 2>&1
    cp -a "$d/patches" "$work/patches.one"
    if ! (cd "$d" && FORCE=1 scripts/queue.sh src && scripts/queue.sh export) >>"$work/rt.log" 2>&1 ||
       ! diff -r "$work/patches.one" "$d/patches" >"$work/rt.diff" ||
       [ "$(grep -c . "$d/patches/series")" != "$(( $(grep -c . "$work/patches.orig/series") + 1 ))" ]; then
        nok "a new patch survives src/export byte-identical" "$work/rt.diff"; return
    fi
    # An unexported change in build/src must not be thrown away by `make src`.
    echo "/* local */" >> "$d/build/src/README.rst"
    if (cd "$d" && scripts/queue.sh src) >>"$work/rt.log" 2>&1; then
        nok "make src refuses to discard unexported work" "$work/rt.log"; return
    fi
    ok "make src && make export round trip is byte-identical (series of $(grep -c . "$work/patches.orig/series") and +1)"
}

t_binaries() {
    local up=${QEMU_UPSTREAM:-$top/build/upstream/obj/qemu-system-i386}
    local fork=${QEMU_FORK:-$top/build/fork/qemu-system-i386}
    local b
    for b in "$up" "$fork"; do
        if [ ! -x "$b" ] || [ ! -x "$(dirname "$b")/qemu-img" ]; then
            nok "$b and qemu-img are built"; continue
        fi
        if "$b" -device help 2>&1 | grep -q '"xen-disk"'; then
            ok "$(basename "$(dirname "$(dirname "$b")")")/$(basename "$(dirname "$b")"): -device help lists xen-disk"
        else
            nok "$b -device help lists xen-disk"
        fi
    done
    [ -x "$fork" ] || return
    if "$fork" --version | head -1 | grep -q "(xenblk-[0-9.]*-[0-9]*p)"; then
        ok "fork --version names the series: $("$fork" --version | head -1)"
    else
        nok "fork --version names the series: $("$fork" --version | head -1)"
    fi
    if "$up" --version | head -1 | grep -q xenblk; then
        nok "upstream --version carries no fork suffix"
    else
        ok "upstream --version carries no fork suffix"
    fi
}

# make install DESTDIR=... PREFIX=/usr: the fork where README.Debian's
# device_model_override points, finding its keymaps from there (QEMU's
# relocatable lookup), and nothing where Debian's QEMUs live.
t_install() {
    local fork=${QEMU_FORK:-$top/build/fork/qemu-system-i386}
    local d=$work/install bin p
    [ -x "$fork" ] || { nok "install: the fork is built"; return; }
    bin=$(sed -n 's/.*device_model_override = "\(.*\)"/\1/p' \
          "$top/packaging/debian/README.Debian")
    DESTDIR=$d PREFIX=/usr "$top/scripts/install.sh" "$(dirname "$fork")" \
        > "$d.log" 2>&1 || { nok "install: scripts/install.sh" "$d.log"; return; }
    if [ -z "$bin" ] || [ ! -x "$d$bin" ]; then
        nok "install: the fork at README.Debian's path ($bin)"; return
    fi
    echo '{"execute":"qmp_capabilities"}{"execute":"quit"}' |
        (cd / && timeout 20 "$d$bin" -M none -nodefaults -display none \
                    -vnc none -qmp stdio) > "$d.log" 2>&1 ||
        { nok "install: $bin runs -vnc none (its en-us keymap)" "$d.log"; return; }
    for p in usr/bin/qemu-system-i386 usr/libexec usr/share/qemu \
             usr/lib/xen-4.17; do
        [ ! -e "$d/$p" ] || { nok "install: nothing at Debian's /$p"; return; }
    done
    ok "install: $bin with its keymaps, nothing at Debian's QEMU paths"
}

# The bench guard's verdict (scripts/bench/analyze.py --confirm) on
# made-up confirm runs: noise around parity passes, a cell whose 95%
# interval lies below 0.90 fails, and a run too short for an interval
# is an error, not a pass.
t_guard() {
    local d=$work/guard c rc name want msg
    for c in "level:0:beyond noise" "slow:1:95% CI and all" \
             "short:1:too few repeats"; do
        IFS=: read -r name want msg <<< "$c"
        mkdir -p "$d/$name"
        PYTHONDONTWRITEBYTECODE=1 python3 - "$top/scripts/bench" "$d/$name" "$name" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
import analyze
out, case = sys.argv[2], sys.argv[3]
ratios = {"level": [0.78, 0.85, 0.88, 0.92, 0.95, 0.97, 1.0, 1.02, 1.05,
                    1.1, 1.2],
          "slow": [0.55, 0.6, 0.62, 0.65, 0.68, 0.7, 0.72, 0.75, 0.8,
                   0.85, 1.3],
          "short": [0.5, 0.6, 0.7]}[case]
s = {"n": len(ratios), "ratio_iops": analyze.median(ratios),
     "ratio_iops_repeats": ratios,
     "ratio_iops_ci95": analyze.median_ci95(ratios)}
json.dump({"runs": [], "summary": {"null/4k/16/randrw/fork": s}},
          open(out + "/results.json", "w"))
PY
        rc=0
        python3 "$top/scripts/bench/analyze.py" --confirm "$d/$name" \
            > "$d/$name.log" 2>&1 || rc=$?
        if [ "$rc" = "$want" ] && grep -q "$msg" "$d/$name.log"; then
            ok "bench guard: a $name cell exits $want ($msg)"
        else
            nok "bench guard: a $name cell exits $want ($msg; got $rc)" \
                "$d/$name.log"
        fi
    done
}

for t in ${*:-tampered nosource routes nogc variants roundtrip binaries install guard}; do
    "t_$t"
done
echo "tooling: $pass passed, $fail failed"
[ "$fail" = 0 ]
