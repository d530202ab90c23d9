#!/bin/bash
# Install everything the fork, xensim, the benchmarks and the fork's
# Debian package (make deb: dpkg-dev, lintian) need on Debian 12;
# with the argument "realxen", what make check-xen needs too
# (qemu-system-x86, cpio).
# Idempotent: installs only what is missing, adds bookworm-backports (for
# meson >= 1.5) and a deb-src entry (xensim/fio/get-fio-src.sh) only when
# the machine has none, on the Debian mirror its apt sources already use.
set -euo pipefail

PKGS=(
    build-essential pkg-config git ccache ninja-build flex bison
    python3 python3-venv xz-utils dpkg-dev ca-certificates curl
    libglib2.0-dev libpixman-1-dev zlib1g-dev libzstd-dev libfdt-dev
    device-tree-compiler libaio-dev liburing-dev libxen-dev
    fio e2fsprogs qemu-utils gnuplot-nox jq
    libasan8 libubsan1
    autoconf automake libtool uuid-dev libssl-dev
    lintian
)
[ "${1:-}" != realxen ] || PKGS+=(qemu-system-x86 cpio)
BPO_PKGS=(meson python3-pycotap)

SUDO=
[ "$(id -u)" = 0 ] || SUDO=sudo

have_all() {
    local p
    for p in "$@"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed' || return 1
    done
}

meson_ok() {
    command -v meson >/dev/null &&
        dpkg --compare-versions "$(meson --version)" ge 1.5
}

# A deb-src entry for this machine's release itself (bookworm, not only
# its backports): `apt-get source fio=3.33-3` (xensim/fio/get-fio-src.sh)
# needs one.
release_src() {
    local codename
    codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
    apt-get indextargets --no-release-info \
        --format '$(CREATED_BY)|$(RELEASE)' 2>/dev/null |
        awk -F'|' -v c="$codename" '$1 == "Sources" && $2 == c { f = 1 }
                                    END { exit !f }'
}

if have_all "${PKGS[@]}" python3-pycotap && meson_ok && release_src; then
    exit 0
fi

mirror=
use_mirror() {
    [ -z "$mirror" ] || return 0
    mirror=$("$(dirname "$0")/debian-mirrors.sh" | sed -n 1p)
    mirror=${mirror%/}
    if [ -z "$mirror" ]; then
        mirror=http://deb.debian.org/debian
        echo "setup-deps: no Debian mirror in the apt sources; using $mirror"
    fi
}

src_dir=/etc/apt/sources.list.d
if ! grep -rqs 'bookworm-backports' /etc/apt/sources.list $src_dir; then
    use_mirror
    echo "setup-deps: adding bookworm-backports (meson >= 1.5) from $mirror"
    $SUDO tee $src_dir/xenblk-backports.sources >/dev/null <<EOF
Types: deb
URIs: $mirror
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi
if ! release_src; then
    use_mirror
    echo "setup-deps: adding a deb-src entry (apt-get source) from $mirror"
    $SUDO tee $src_dir/xenblk-src.sources >/dev/null <<EOF
Types: deb-src
URIs: $mirror
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
fi

export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q
$SUDO apt-get install -y -q --no-install-recommends "${PKGS[@]}"
$SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports "${BPO_PKGS[@]}"
meson_ok || { echo "setup-deps: meson >= 1.5 still missing" >&2; exit 1; }
