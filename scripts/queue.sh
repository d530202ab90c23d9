#!/bin/bash
# The patch queue: patches/series applied on the pinned base as git commits.
#
#   queue.sh src     build/src/ = pristine base commit + one commit per patch
#                    (git am). Refuses to replace a build/src/ whose commits
#                    are not exported yet, unless FORCE=1.
#   queue.sh export  build/src/ commits since the base -> patches/ and
#                    patches/series (git format-patch, stable names, no
#                    churn when nothing changed).
#   queue.sh sync    make build/src/ if missing, or again if patches/ changed
#                    since (and build/src holds no work of its own).
#   queue.sh check   checkpatch.pl on every patch, then build the tree after
#                    each patch (bisectability) in build/check/, check that
#                    each stable fix builds on the bare base, and run each
#                    patch's qtests with and without it.
#
# BASE=X.Y works on another base (scripts/base.sh): its tree is in
# build/base-X.Y/src, and a patch that must differ there has its variant in
# patches/base-X.Y/ under the same name. export writes a variant only for
# a patch whose patches/ version does not give the same tree there.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/scripts/base.sh"
build=$qbuild
srcdir=$build/src
pristine=$build/upstream/src
patches=$top/patches

# Fixed identity and dates make the base and patch commits reproducible.
export GIT_AUTHOR_NAME="QEMU upstream" GIT_AUTHOR_EMAIL="qemu-devel@nongnu.org"
export GIT_COMMITTER_NAME="xenblk patch queue" GIT_COMMITTER_EMAIL="xenblk@localhost"
export GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z"
BASE_TAG=base/$QEMU_VERSION

# The file of patch $1 on this base: its variant, if it has one
patch_file() {
    if [ -n "$variants" ] && [ -f "$variants/$1" ]; then
        echo "$variants/$1"
    else
        echo "$patches/$1"
    fi
}

series() {
    [ -f "$patches/series" ] || return 0
    grep -v '^[[:space:]]*\(#\|$\)' "$patches/series" || true
}

# git format-patch as the queue writes patches (stable, no churn)
queue_format_patch() {
    git -C "$srcdir" -c core.abbrev=12 format-patch -q --zero-commit \
        --no-signature --no-numbered --subject-prefix=PATCH "$@"
}

format_patches() {   # $1 = output directory
    queue_format_patch -o "$1" "$BASE_TAG..HEAD" >/dev/null
}

# Hash of a patch set (a directory with series and *.patch, and on
# another base the variants that replace some of them)
set_hash() {
    local p
    for p in $(cd "$1" && grep -v '^[[:space:]]*\(#\|$\)' series 2>/dev/null); do
        if [ -n "${2:-}" ] && [ -f "$2/$p" ]; then cat "$2/$p"; else cat "$1/$p"; fi
    done | cat "$1/series" - 2>/dev/null | sha256sum | cut -d' ' -f1
}

# The patch set build/src was made from (or last exported to)
stamp_file() { echo "$srcdir/.git/xenblk-series"; }

# build/src's HEAD when it was made from (or last exported to) patches/
head_file() { echo "$srcdir/.git/xenblk-head"; }

unexported() {       # true when build/src holds commits patches/ lacks
    [ -d "$srcdir/.git" ] || return 1
    if [ -n "$variants" ]; then
        [ "$(git -C "$srcdir" rev-parse HEAD)" != "$(cat "$(head_file)" 2>/dev/null)" ] ||
            ! git -C "$srcdir" diff --quiet HEAD
        return
    fi
    local tmp rc=1
    tmp=$(mktemp -d)
    format_patches "$tmp"
    for p in "$tmp"/*.patch; do
        [ -e "$p" ] || break
        cmp -s "$p" "$patches/${p##*/}" || rc=0
    done
    [ "$(ls "$tmp" | wc -l)" = "$(series | wc -l)" ] || rc=0
    git -C "$srcdir" diff --quiet HEAD || rc=0
    rm -rf "$tmp"
    return $rc
}

# A variant made from an older patches/ version of its patch would drop
# the change silently: refuse, and say which.
stale_variants() {
    local sum name rc=0
    [ -n "$variants" ] && [ -d "$variants" ] || return 0
    for name in $(cd "$variants" && ls *.patch 2>/dev/null); do
        sum=$(sed -n "s/  $name\$//p" "$variants/FROM" 2>/dev/null)
        if [ "$sum" != "$(sha256sum < "$patches/$name" | cut -d' ' -f1)" ]; then
            echo "queue: patches/$name changed since its variant for $BASE" \
                 "was made: carry the change into ${variants#"$top/"}/$name" \
                 "(STALE_OK=1 BASE=$BASE make src applies the old one; amend" \
                 "that commit, then BASE=$BASE make export)" >&2
            rc=1
        fi
    done
    return $rc
}

cmd_src() {
    "$top/scripts/fetch-upstream.sh" "$pristine"
    [ -n "${STALE_OK:-}" ] || stale_variants || exit 1
    if [ -d "$srcdir" ] && [ -z "${FORCE:-}" ] && unexported; then
        echo "queue: build/src has changes or commits not in patches/;" \
             "run 'make export' first, or FORCE=1 to discard them" >&2
        exit 1
    fi
    local stage=$build/.src.new
    rm -rf "$stage"
    mkdir -p "$stage"
    cp -a "$pristine/." "$stage/"
    git -C "$stage" init -q -b base
    # No automatic gc, ever, in build/src (and its worktrees, which share
    # this config): the base commit leaves ~10,000 loose objects, so every
    # commit or `git am` would start `git gc --auto` detached, and it raced
    # with `rm -rf` of the tree (FORCE=1 make src: "cannot remove
    # .git/objects: Directory not empty"). autoDetach=false too, in case
    # someone turns gc.auto back on. `git gc` by hand still works.
    git -C "$stage" config gc.auto 0
    git -C "$stage" config gc.autoDetach false
    git -C "$stage" config maintenance.auto false
    git -C "$stage" add -A -f .
    git -C "$stage" commit -q -m "QEMU $QEMU_VERSION ($QEMU_DEBVERSION orig tarball)"
    git -C "$stage" tag "$BASE_TAG"
    git -C "$stage" checkout -q -b fork
    local p
    for p in $(series); do
        git -C "$stage" am -q --committer-date-is-author-date "$(patch_file "$p")" || {
            git -C "$stage" am --abort || true
            echo "queue: $p does not apply" >&2
            exit 1
        }
    done
    rm -rf "$srcdir"
    mv "$stage" "$srcdir"
    set_hash "$patches" "$variants" > "$(stamp_file)"
    git -C "$srcdir" rev-parse HEAD > "$(head_file)"
    echo "queue: ${srcdir#"$top/"} = QEMU $QEMU_VERSION + $(series | wc -l) patches"
}

# Another base shares patches/series: each of its commits is exported as a
# variant only when the patches/ version of that patch, applied to the
# commit's parent, does not give the commit's tree.
export_variants() {
    local n=0 c name wt=$build/.export-wt
    [ "$(git -C "$srcdir" rev-list --count "$BASE_TAG..HEAD")" = "$(series | wc -l)" ] || {
        echo "queue: build/src of base $BASE must have one commit per patch" \
             "of patches/series" >&2
        exit 1
    }
    mkdir -p "$variants"
    git -C "$srcdir" worktree prune
    rm -rf "$wt"
    git -C "$srcdir" worktree add -q --detach "$wt" "$BASE_TAG"
    for c in $(git -C "$srcdir" rev-list --reverse "$BASE_TAG..HEAD"); do
        n=$((n + 1))
        name=$(series | sed -n "${n}p")
        git -C "$wt" checkout -q --force --detach "$c~1"
        if git -C "$wt" am -q "$patches/$name" >/dev/null 2>&1 &&
           [ "$(git -C "$wt" rev-parse 'HEAD^{tree}')" = \
             "$(git -C "$srcdir" rev-parse "$c^{tree}")" ]; then
            rm -f "$variants/$name"
        else
            git -C "$wt" am --abort >/dev/null 2>&1 || true
            queue_format_patch --stdout -1 "$c" > "$wt.patch"
            cmp -s "$wt.patch" "$variants/$name" || cp "$wt.patch" "$variants/$name"
            rm -f "$wt.patch"
        fi
    done
    git -C "$srcdir" worktree remove --force "$wt"
    # which patches/ version each variant was made from (stale_variants)
    (cd "$variants" && for name in *.patch; do
        [ -e "$name" ] && echo "$(sha256sum < "$patches/$name" | cut -d' ' -f1)  $name"
     done) > "$variants/FROM"
    [ -s "$variants/FROM" ] || rm -f "$variants/FROM"
    rmdir "$variants" 2>/dev/null || true
    set_hash "$patches" "$variants" > "$(stamp_file)"
    git -C "$srcdir" rev-parse HEAD > "$(head_file)"
    echo "queue: exported base $BASE: $(ls "$variants"/*.patch 2>/dev/null | wc -l)" \
         "variants in ${variants#"$top/"}"
}

cmd_export() {
    [ -d "$srcdir/.git" ] || { echo "queue: no build/src; run 'make src'" >&2; exit 1; }
    git -C "$srcdir" diff --quiet HEAD ||
        echo "queue: warning: uncommitted changes in build/src are not exported" >&2
    if [ -n "$variants" ]; then
        export_variants
        return
    fi
    local tmp
    tmp=$(mktemp -d)
    format_patches "$tmp"
    # Replace only what changed, so unchanged patches keep their mtime.
    for p in "$patches"/*.patch; do
        [ -e "$p" ] || break
        [ -e "$tmp/${p##*/}" ] || rm -f "$p"
    done
    for p in "$tmp"/*.patch; do
        [ -e "$p" ] || break
        cmp -s "$p" "$patches/${p##*/}" || cp "$p" "$patches/${p##*/}"
    done
    (cd "$tmp" && ls *.patch 2>/dev/null || true) > "$tmp/series.new"
    cmp -s "$tmp/series.new" "$patches/series" || cp "$tmp/series.new" "$patches/series"
    rm -rf "$tmp"
    set_hash "$patches" > "$(stamp_file)"
    git -C "$srcdir" rev-parse HEAD > "$(head_file)"
    echo "queue: exported $(series | wc -l) patches"
}

cmd_sync() {
    local tmp mine
    if [ ! -d "$srcdir/.git" ]; then
        cmd_src
        return
    fi
    [ "$(cat "$(stamp_file)" 2>/dev/null)" = "$(set_hash "$patches" "$variants")" ] && return
    # patches/ changed (e.g. a pull): remake build/src unless it has work
    if [ -n "$variants" ]; then
        if unexported; then
            echo "queue: patches/ changed, but ${srcdir#"$top/"} has work not" \
                 "in it; building it as it is ('BASE=$BASE make export' or" \
                 "FORCE=1 BASE=$BASE make src)" >&2
            return
        fi
        FORCE=1 cmd_src
        return
    fi
    tmp=$(mktemp -d)
    format_patches "$tmp"
    (cd "$tmp" && ls *.patch 2>/dev/null || true) > "$tmp/series"
    mine=$(set_hash "$tmp")
    rm -rf "$tmp"
    if [ "$mine" != "$(cat "$(stamp_file)" 2>/dev/null)" ] ||
       ! git -C "$srcdir" diff --quiet HEAD; then
        echo "queue: patches/ changed, but build/src has work not in it;" \
             "building build/src as it is ('make export' or FORCE=1 make src)" >&2
        return
    fi
    FORCE=1 cmd_src
}

cmd_check() {
    [ -d "$srcdir/.git" ] || cmd_src
    local n rc=0 p
    n=$(series | wc -l)
    echo "queue: checkpatch on $n patches"
    for p in $(series); do
        if ! "$srcdir/scripts/checkpatch.pl" --no-signoff -q "$(patch_file "$p")"; then
            echo "queue: checkpatch: $p: FAILED" >&2
            rc=1
        fi
        grep -q '^Signed-off-by:' "$(patch_file "$p")" ||
            { echo "queue: $p has no Signed-off-by" >&2; rc=1; }
    done
    [ $rc = 0 ] || exit 1
    # Bisectability: build the tree after each patch, in one work tree so
    # each step recompiles only what that patch touched.
    local wt=$build/check/src i=0 c t tests
    rm -rf "$wt" "$build/check/bin"
    mkdir -p "$build/check/bin/0"
    # the "before" of patch 1's qtests (make upstream)
    cp "$build/upstream/obj/qemu-system-i386" "$build/check/bin/0/" || {
        echo "queue: no upstream QEMU $QEMU_VERSION to test patch 1 against" >&2
        exit 1
    }
    git -C "$srcdir" worktree prune
    git -C "$srcdir" worktree add -q --detach "$wt" "$BASE_TAG"
    for c in $(git -C "$srcdir" rev-list --reverse "$BASE_TAG..HEAD"); do
        i=$((i + 1))
        git -C "$wt" checkout -q --detach "$c"
        # the qtests this patch adds or changes
        tests=$(git -C "$wt" diff --name-only "$c~1" "$c" -- 'tests/qtest/*-test.c' |
                sed 's|\.c$||')
        echo "queue: building after patch $i/$n: $(git -C "$wt" log -1 --format=%s)"
        NINJA_TARGETS="$tests" "$top/scripts/build-qemu.sh" "$wt" \
            "$build/check/obj" "check" >/dev/null ||
            { echo "queue: tree does not build after patch $i" >&2; exit 1; }
        mkdir -p "$build/check/bin/$i"
        cp "$build/check/obj/qemu-system-i386" "$build/check/bin/$i/"
        for t in $tests; do
            cp "$build/check/obj/$t" "$build/check/bin/$i/"
            echo "${t##*/}" >> "$build/check/bin/$i/tests"
        done
    done
    echo "queue: $n patches pass checkpatch and build one by one"
    check_stable "$wt"
    git -C "$srcdir" worktree remove --force "$wt"
    check_qtests "$n"
}

# The fixes for bugs the base has are marked for qemu-stable, as a
# maintainer sends them: "Cc: qemu-stable@nongnu.org", one more such line
# "... # needs: <subject>" per earlier fix a backport must take too (the
# Linux stable-kernel-rules form, with subjects, as this queue's hashes
# change). They come first in the series, after the test infrastructure
# their qtests need (-accel qtest, the testbed). Each must apply (3-way,
# as git cherry-pick does) to the bare base with what it needs, and build
# there. Tests are left out: they go to stable as a set, on top of the
# testbed.
stable_line() { git -C "$srcdir" log -1 --format=%B "$1" | grep '^Cc: qemu-stable@nongnu.org'; }

stable_needs() {     # commit -> the commits it needs, nearest first
    local c s
    for s in $(stable_line "$1" | sed -n 's/^.*# needs: //p' | tr ' ' '\037'); do
        s=${s//$'\037'/ }
        c=$(git -C "$srcdir" log --format=%H --fixed-strings --grep="$s" \
                "$BASE_TAG..HEAD" | while read -r h; do
                [ "$(git -C "$srcdir" log -1 --format=%s "$h")" = "$s" ] && echo "$h"
            done)
        [ -n "$c" ] || { echo "queue: stable prerequisite not in the series: $s" >&2; return 1; }
        echo "$c"
        stable_needs "$c"
    done
}

# Compile the objects of the C files $2... change, in build/check/obj (set
# up for work tree $1 by the bisect builds): linking is for the series.
stable_build() {
    local wt=$1 f objs=""
    shift
    for f in $(git -C "$srcdir" show --format= --name-only "$@" -- '*.c' |
               grep -v '^tests/' | sort -u); do
        objs="$objs $(ninja -C "$build/check/obj" -t targets all |
                      sed -n "s|^\([^:]*\.p/${f//\//_}\.o\):.*|\1|p")"
    done
    [ -n "${objs// /}" ] || return 0
    # build-qemu.sh's PATH: without bzip2, so meson wants no EDK2 blobs
    PATH=$top/build/tools/path ninja -C "$build/check/obj" $objs >/dev/null 2>&1
}

check_stable() {
    local wt=$1 c i=0 last_stable=0 first_other=0 need picks rc=0
    # the test infrastructure before the first fix is not for stable
    for c in $(git -C "$srcdir" rev-list --reverse "$BASE_TAG..HEAD"); do
        i=$((i + 1))
        if stable_line "$c" >/dev/null; then
            last_stable=$i
        elif [ $last_stable -gt 0 ] && [ $first_other = 0 ]; then
            first_other=$i
        fi
    done
    if [ $first_other != 0 ] && [ $first_other -lt $last_stable ]; then
        echo "queue: patch $first_other is no stable fix but comes before" \
             "stable fix $last_stable: fixes go first" >&2
        return 1
    fi
    for c in $(git -C "$srcdir" rev-list --reverse "$BASE_TAG..HEAD"); do
        stable_line "$c" >/dev/null || continue
        need=$(stable_needs "$c") || return 1
        # the needed commits in series order, then the fix
        picks=$(git -C "$srcdir" rev-list --reverse "$BASE_TAG..HEAD" |
                grep -F -x -f <(echo "$need"; echo "$c") || true)
        git -C "$wt" reset -q --hard     # drops files a pick added, too
        git -C "$wt" checkout -q --detach "$BASE_TAG"
        local p ok=1
        for p in $picks; do
            git -C "$srcdir" format-patch -1 --stdout "$p" |
                git -C "$wt" apply -3 --exclude='tests/*' >/dev/null 2>&1 ||
                { ok=0; break; }
        done
        local s
        s=$(git -C "$srcdir" log -1 --format=%s "$c")
        if [ $ok = 0 ]; then
            echo "queue: stable fix does not apply to $QEMU_VERSION with" \
                 "what it needs: $s" >&2
            rc=1
        elif ! stable_build "$wt" $picks; then
            echo "queue: stable fix does not build on $QEMU_VERSION with" \
                 "what it needs: $s" >&2
            rc=1
        else
            echo "queue: stable fix applies and builds on $QEMU_VERSION" \
                 "with $(($(echo "$picks" | wc -w) - 1)) more: $s"
        fi
    done
    git -C "$wt" reset -q --hard
    git -C "$wt" checkout -q --detach "$BASE_TAG"
    return $rc
}

# Does qtest $2 in $1 pass against QEMU $3? Some of what a patch fixes is
# a race the unpatched tree loses only most of the time (e.g. 64
# notifications for 64 responses, or 1 when the test thread is starved),
# so it counts as passing only if it passes three times.
before_passes() {
    local n
    for n in 1 2 3; do
        (cd "$1" && QTEST_QEMU_BINARY=$3 timeout 600 "./$2" \
            >"$2.before.log" 2>&1) || return 1
    done
    return 0
}

# Each patch's qtests must pass on the tree after it and fail on the tree
# before it (otherwise they do not test the patch).
check_qtests() {
    local n=$1 i t rc=0 bin=$build/check/bin
    for i in $(seq 1 "$n"); do
        [ -f "$bin/$i/tests" ] || continue
        for t in $(cat "$bin/$i/tests"); do
            if ! (cd "$bin/$i" && QTEST_QEMU_BINARY=./qemu-system-i386 \
                  timeout 600 "./$t" >"$t.after.log" 2>&1); then
                echo "queue: patch $i: $t FAILS with the patch" \
                     "(log: $bin/$i/$t.after.log)" >&2
                rc=1
            elif cmp -s "$bin/$i/qemu-system-i386" \
                        "$bin/$((i - 1))/qemu-system-i386"; then
                # a patch of tests only (the testbed): no QEMU without it
                echo "queue: patch $i: $t passes; the patch does not" \
                     "change QEMU"
            elif before_passes "$bin/$i" "$t" "../$((i - 1))/qemu-system-i386"; then
                echo "queue: patch $i: $t passes WITHOUT the patch" >&2
                rc=1
            else
                echo "queue: patch $i: $t passes with it, fails without it:" \
                     "$(grep -m1 -E 'ERROR|Bail out' "$bin/$i/$t.before.log" | cut -c1-150)"
            fi
        done
    done
    return $rc
}

case ${1:-} in
src) cmd_src ;;
export) cmd_export ;;
sync) cmd_sync ;;
check) cmd_check ;;
*) echo "usage: queue.sh src|export|sync|check" >&2; exit 2 ;;
esac
