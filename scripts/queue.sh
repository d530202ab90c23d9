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
#                    each patch (bisectability) in build/check/, and run
#                    each patch's qtests with and without it.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
. "$top/upstream/qemu.conf"
build=$top/build
srcdir=$build/src
pristine=$build/upstream/src
patches=$top/patches

# Fixed identity and dates make the base and patch commits reproducible.
export GIT_AUTHOR_NAME="QEMU upstream" GIT_AUTHOR_EMAIL="qemu-devel@nongnu.org"
export GIT_COMMITTER_NAME="xenblk patch queue" GIT_COMMITTER_EMAIL="xenblk@localhost"
export GIT_AUTHOR_DATE="2000-01-01T00:00:00Z" GIT_COMMITTER_DATE="2000-01-01T00:00:00Z"
BASE_TAG=base/$QEMU_VERSION

series() {
    [ -f "$patches/series" ] || return 0
    grep -v '^[[:space:]]*\(#\|$\)' "$patches/series" || true
}

format_patches() {   # $1 = output directory
    git -C "$srcdir" -c core.abbrev=12 format-patch -q --zero-commit \
        --no-signature --no-numbered --subject-prefix=PATCH \
        -o "$1" "$BASE_TAG..HEAD" >/dev/null
}

# Hash of a patch set (a directory with series and *.patch)
set_hash() {
    (cd "$1" && cat series $(grep -v '^[[:space:]]*\(#\|$\)' series) 2>/dev/null) |
        sha256sum | cut -d' ' -f1
}

# The patch set build/src was made from (or last exported to)
stamp_file() { echo "$srcdir/.git/xenblk-series"; }

unexported() {       # true when build/src holds commits patches/ lacks
    [ -d "$srcdir/.git" ] || return 1
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

cmd_src() {
    "$top/scripts/fetch-upstream.sh" "$pristine"
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
        git -C "$stage" am -q --committer-date-is-author-date "$patches/$p" || {
            git -C "$stage" am --abort || true
            echo "queue: $p does not apply" >&2
            exit 1
        }
    done
    rm -rf "$srcdir"
    mv "$stage" "$srcdir"
    set_hash "$patches" > "$(stamp_file)"
    echo "queue: build/src = QEMU $QEMU_VERSION + $(series | wc -l) patches"
}

cmd_export() {
    [ -d "$srcdir/.git" ] || { echo "queue: no build/src; run 'make src'" >&2; exit 1; }
    git -C "$srcdir" diff --quiet HEAD ||
        echo "queue: warning: uncommitted changes in build/src are not exported" >&2
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
    echo "queue: exported $(series | wc -l) patches"
}

cmd_sync() {
    local tmp mine
    if [ ! -d "$srcdir/.git" ]; then
        cmd_src
        return
    fi
    [ "$(cat "$(stamp_file)" 2>/dev/null)" = "$(set_hash "$patches")" ] && return
    # patches/ changed (e.g. a pull): remake build/src unless it has work
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
        if ! "$srcdir/scripts/checkpatch.pl" --no-signoff -q "$patches/$p"; then
            echo "queue: checkpatch: $p: FAILED" >&2
            rc=1
        fi
        grep -q '^Signed-off-by:' "$patches/$p" ||
            { echo "queue: $p has no Signed-off-by" >&2; rc=1; }
    done
    [ $rc = 0 ] || exit 1
    # Bisectability: build the tree after each patch, in one work tree so
    # each step recompiles only what that patch touched.
    local wt=$build/check/src i=0 c t tests
    rm -rf "$wt" "$build/check/bin"
    mkdir -p "$build/check/bin/0"
    cp "$build/upstream/obj/qemu-system-i386" "$build/check/bin/0/" 2>/dev/null || true
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
    git -C "$srcdir" worktree remove --force "$wt"
    echo "queue: $n patches pass checkpatch and build one by one"
    check_qtests "$n"
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
