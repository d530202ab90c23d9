#!/bin/bash
# make deb: the fork's device model as a Debian 12 binary package,
# xenblk-qemu, from the fork already built (make fork) and
# packaging/debian/ (control, copyright, README.Debian, prerm).
#
# The binary is the tree's own build (per base, ccache), not a Debian
# source package's, so this assembles the package with the tools
# dpkg-buildpackage and debhelper call themselves: scripts/install.sh
# into a staging root (stripped as dh_strip does), dpkg-shlibdeps for
# Depends, dpkg-gencontrol for DEBIAN/control (the version from the
# changelog written here), dpkg-deb --root-owner-group (no fakeroot).
# lintian then checks it and fails the build on an error. Cached:
# OUTDIR/deb.stamp holds the sha256 of the inputs.
#
# Usage: scripts/build-deb.sh FORK_OBJDIR OUTDIR VERSION
#   VERSION: <QEMU version>+xenblk<series release>.<patches>-<revision>
# Env: DEBFULLNAME, DEBEMAIL (Debian's convention, as dch): the package's
#   Maintainer and changelog signer; the default is MAINTAINERS' entry,
#   whose address is on localhost: lintian's bogus-mail-host errors are
#   suppressed for it alone, with a note (docs/packaging.rst).
# Prints the path of the .deb on its last line.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
obj=${1:?usage: $0 FORK_OBJDIR OUTDIR VERSION}
out=${2:?usage: $0 FORK_OBJDIR OUTDIR VERSION}
version=${3:?usage: $0 FORK_OBJDIR OUTDIR VERSION}
pkg=xenblk-qemu
maintainer="${DEBFULLNAME:-xenblk maintainers} <${DEBEMAIL:-xenblk@localhost}>"
umask 022

mkdir -p "$out"
out=$(cd "$out" && pwd)
deb=$out/${pkg}_${version}_amd64.deb
stamp=$( { echo "$version $maintainer"; cat "$obj/qemu-system-i386" "$0" \
           "$top/scripts/install.sh" "$top"/packaging/xenblk-default* \
           "$top"/packaging/debian/*; } | sha256sum | cut -c1-64)
if [ -f "$deb" ] && [ "$(cat "$out/deb.stamp" 2>/dev/null)" = "$stamp" ]; then
    echo "$deb"
    exit 0
fi
rm -f "$out/deb.stamp"
root=$out/root
src=$out/src
rm -rf "$root" "$src"
mkdir -p "$root/DEBIAN" "$src/debian"

DESTDIR=$root PREFIX=/usr STRIP=1 "$top/scripts/install.sh" "$obj"
gzip -9n "$root/usr/share/man/man8/xenblk-default.8"

# The changelog: one entry per build, dated by the tree's last commit so
# that the same tree makes the same package
qemu=${version%%+*}
series=${version#*+xenblk}
series=${series%-*}
date=$(git -C "$top" log -1 --format=%cD 2>/dev/null || date -R)
rev=$(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo unknown)
cat > "$src/debian/changelog" <<EOC
xenblk ($version) bookworm; urgency=medium

  * QEMU $qemu with the xenblk series, release ${series%.*}
    (${series#*.} patches; xenblk tree at $rev).

 -- $maintainer  $date
EOC
cp "$top/packaging/debian/control" "$src/debian/"

doc=$root/usr/share/doc/$pkg
install -d "$doc"
install -m 644 "$top/packaging/debian/copyright" \
               "$top/packaging/debian/README.Debian" "$doc/"
gzip -9n < "$src/debian/changelog" > "$doc/changelog.Debian.gz"
install -m 755 "$top/packaging/debian/prerm" "$root/DEBIAN/"

(cd "$src" &&
 dpkg-shlibdeps -T"$src/debian/substvars" \
     "$root/usr/lib/xenblk/bin/qemu-system-i386" &&
 dpkg-gencontrol -p"$pkg" -P"$root" -T"$src/debian/substvars" \
     -f"$src/debian/files" -DMaintainer="$maintainer")
(cd "$root" && find usr -type f -print0 | LC_ALL=C sort -z |
 xargs -0 md5sum) > "$root/DEBIAN/md5sums"

rm -f "$out/${pkg}_"*.deb
dpkg-deb --root-owner-group -Zxz --build "$root" "$deb" >/dev/null
rm -rf "$root" "$src"
lint=(--fail-on error --tag-display-limit 0)
if [ -z "${DEBEMAIL:-}" ]; then
    echo "build-deb: Maintainer $maintainer (no DEBEMAIL): set DEBEMAIL for" \
         "a package you distribute" >&2
    lint+=(--suppress-tags bogus-mail-host,bogus-mail-host-in-debian-changelog)
fi
lintian "${lint[@]}" "$deb" >&2
echo "$stamp" > "$out/deb.stamp"
echo "$deb"
