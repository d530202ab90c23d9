#!/bin/bash
# The QEMU base a script works on, from $BASE (e.g. BASE=10.0); sourced by
# the scripts that fetch, apply, build or run a base, and run by the
# Makefile as `scripts/base.sh dir`.
#
# upstream/qemu.conf pins the default base; upstream/qemu-<BASE>.conf any
# other. The default base's QEMU trees live in build/ (upstream/, src/,
# fork/, check/, arms/), another base's in build/base-<BASE>/; downloads,
# ccache, tools and xensim are shared. A patch that must differ on another
# base has its variant, under the same name, in patches/base-<BASE>/.
#
# Sets QEMU_VERSION, QEMU_DEBVERSION, QEMU_ORIG, QEMU_SHA256, QEMU_CONF
# (exported), qbuild (the base's build directory) and variants (its
# variant directory, empty for the default base). Exits 2 on a base with
# no conf.
base_top=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$base_top/upstream/qemu.conf"
if [ -z "${BASE:-}" ] || [ "$BASE" = "${QEMU_VERSION%.*}" ]; then
    QEMU_CONF=$base_top/upstream/qemu.conf
    qbuild=$base_top/build
    variants=
else
    QEMU_CONF=$base_top/upstream/qemu-$BASE.conf
    [ -f "$QEMU_CONF" ] || {
        echo "base: no upstream/qemu-$BASE.conf; the bases are" \
             "${QEMU_VERSION%.*} (default)$(cd "$base_top/upstream" &&
             ls qemu-*.conf | sed 's/^qemu-\(.*\)\.conf$/, \1/' | tr -d '\n')" >&2
        exit 2
    }
    . "$QEMU_CONF"
    qbuild=$base_top/build/base-$BASE
    variants=$base_top/patches/base-$BASE
fi
export QEMU_CONF

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case ${1:-} in
    dir) echo "$qbuild" ;;
    version) echo "$QEMU_VERSION" ;;
    *) echo "usage: BASE=X.Y base.sh dir|version" >&2; exit 2 ;;
    esac
fi
