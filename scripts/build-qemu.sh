#!/bin/bash
# Configure (once) and build one QEMU tree for the Xen PV device model.
#
# Usage: build-qemu.sh SRCDIR OBJDIR [PKGVERSION] [-- EXTRA_MESON_ARGS...]
#
# Builds qemu-system-i386 and qemu-img for i386-softmmu with Xen, linux-aio
# and io_uring. Both arms use the same layout (OBJDIR/../src == SRCDIR is
# not required, but keeping OBJDIR and SRCDIR siblings lets ccache share
# objects between them through CCACHE_BASEDIR).
#
# The +ds orig tarball carries no firmware blobs. pc-bios/meson.build unpacks
# edk2 images whenever it finds bzip2, so meson runs with a PATH that has
# no bzip2 (tools/path/ under the build root) instead of patching upstream.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
src=$(cd "${1:?usage: build-qemu.sh SRCDIR OBJDIR [PKGVERSION]}" && pwd)
obj=${2:?usage: build-qemu.sh SRCDIR OBJDIR [PKGVERSION]}
pkgversion=${3:-}
shift 3 2>/dev/null || shift $#
[ "${1:-}" = -- ] && shift
extra=("$@")

build=$top/build
mkdir -p "$obj" "$build/tools"
obj=$(cd "$obj" && pwd)

# A PATH equal to the system one minus bzip2 (see above).
tpath=$build/tools/path
if [ ! -d "$tpath" ]; then
    tmp=$(mktemp -d "$build/tools/.path.XXXXXX")
    for f in /usr/local/bin/* /usr/bin/*; do
        case ${f##*/} in
        bzip2|bunzip2|bzcat|\[) ;;
        *) [ -e "$tmp/${f##*/}" ] || ln -s "$f" "$tmp/${f##*/}" ;;
        esac
    done
    mv "$tmp" "$tpath"
fi

# Outside the tree, so a fresh clone on the same machine reuses objects.
export CCACHE_DIR=${CCACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/xenblk/ccache}
export CCACHE_BASEDIR=$build
export CCACHE_NOHASHDIR=1
export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}

# xensim's uninstalled pkg-config file, for the qtests of the series; the
# tree is reconfigured when it appears. XENSIM_BUILD picks another xensim
# build (the sanitizer one for check-asan).
xensim_pc=${XENSIM_BUILD:-$build/xensim}/meson-uninstalled
export PKG_CONFIG_PATH=$xensim_pc${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
have_xensim=
if [ -f "$src/tests/qtest/xen-testbed.c" ] &&
   [ -f "$xensim_pc/xensim-uninstalled.pc" ]; then
    have_xensim=xensim${XENSIM_BUILD:+:$XENSIM_BUILD}
fi

# .configured: line 1 the configuration, line 2 the version string
stamp=$obj/.configured
want="$src|vnc|$have_xensim|${extra[*]:-}"
if [ -f "$stamp" ] && [ "$(head -n 1 "$stamp")" = "$want" ] &&
   [ "$(sed -n 2p "$stamp")" != "$pkgversion" ]; then
    # A new series version changes only the version string
    PATH=$tpath "$obj/pyvenv/bin/meson" configure "$obj" \
        -Dpkgversion="$pkgversion" >/dev/null
    printf '%s\n%s\n' "$want" "$pkgversion" > "$stamp"
fi
if [ ! -f "$stamp" ] || [ "$(head -n 1 "$stamp")" != "$want" ]; then
    rm -rf "$obj"
    mkdir -p "$obj"
    cat > "$obj/native.ini" <<'EOF'
[binaries]
c = ['ccache', 'gcc', '-m64']
cpp = ['ccache', 'c++', '-m64']
EOF
    if ! (cd "$obj" &&
          "$src/configure" --skip-meson --python=/usr/bin/python3 \
              --target-list=i386-softmmu --disable-download \
              >configure.log 2>&1 &&
          PATH=$tpath pyvenv/bin/meson setup \
              --native-file=native.ini \
              -Dauto_features=disabled -Dwrap_mode=nodownload \
              -Dxen=enabled -Dlinux_aio=enabled -Dlinux_io_uring=enabled \
              -Dtools=enabled -Ddocs=disabled -Dinstall_blobs=false \
              -Dvnc=enabled -Dpixman=enabled \
              -Dpkgversion="$pkgversion" "${extra[@]}" \
              . "$src" >meson-setup.log 2>&1); then
        echo "build-qemu: configure of $src failed; last lines:" >&2
        tail -n 25 "$obj/configure.log" "$obj/meson-setup.log" >&2
        exit 1
    fi
    printf '%s\n%s\n' "$want" "$pkgversion" > "$stamp"
fi

PATH=$tpath ninja -C "$obj" qemu-system-i386 qemu-img ${NINJA_TARGETS:-}
