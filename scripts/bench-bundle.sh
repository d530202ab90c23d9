#!/bin/bash
# The scale bench as one relocatable tarball, for a bigger host.
#
# Usage: scripts/bench-bundle.sh      (make bench-bundle; after make build)
#
# Makes build/bench-bundle/xenblk-bench.tar.gz: both QEMUs (upstream and
# the fork), xensim with its shim and fio engine, Debian's xenstored, fio,
# jq, the libraries they load and glibc's dynamic loader, plus
# scripts/bench-scale.sh and what it runs. On the other host (any x86-64
# Linux with bash, python3 and a /dev/shm; no build, no packages):
#
#   tar xzf xenblk-bench.tar.gz
#   xenblk-bench/run.sh full          # or quick; BENCH_SCALE_* as usual
#
# Results go to xenblk-bench/results/<timestamp>/ (results.md; the chart
# is drawn where gnuplot is). Each ELF program is started by a static
# launcher (scripts/bench/bundle-launcher.c) through the bundle's own
# loader and libraries: the host's glibc and libraries are neither used
# nor touched, whether they are older or newer.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=$top/build
. "$top/scripts/base.sh"
name=xenblk-bench
stage=$build/bench-bundle/$name
tarball=$build/bench-bundle/$name.tar.gz

die() { echo "bench-bundle: $*" >&2; exit 1; }

xenstored=$build/xen-utils/usr/lib/xen-4.17/bin/xenstored
# program in the bundle (its path as bench-scale.sh expects it) <- source
declare -A progs=(
    [build/upstream/obj/qemu-system-i386]=$qbuild/upstream/obj/qemu-system-i386
    [build/fork/qemu-system-i386]=$qbuild/fork/qemu-system-i386
    [build/xensim/xensim/toolstack/xensim]=$build/xensim/xensim/toolstack/xensim
    [bin/xenstored]=$xenstored
    [bin/fio]=$(command -v fio || true)
    [bin/jq]=$(command -v jq || true)
)
# shared objects loaded by path (LD_PRELOAD, fio's external engine)
declare -A objs=(
    [lib/libxensim-shim.so]=$build/xensim/xensim/shim/libxensim-shim.so
    [build/xensim/xensim/fio/xenblk.so]=$build/xensim/xensim/fio/xenblk.so
)
for f in "${progs[@]}" "${objs[@]}"; do
    [ -f "$f" ] || die "missing $f (make build)"
done

rm -rf "$stage" "$tarball"
mkdir -p "$stage/lib"
touch "$stage/.xenblk-bundle"

gcc -static -O2 -Wall -o "$stage/lib/bundle-launcher" \
    "$top/scripts/bench/bundle-launcher.c"

# Every library the programs and objects need, and the loader itself
copy_libs() {
    ldd "$1" | awk '/=> \//{print $3} /^\t\/.*ld-linux/{print $1}' |
    while read -r lib; do
        cp -nL "$lib" "$stage/lib/"
    done
}
for dst in "${!progs[@]}"; do
    src=${progs[$dst]}
    mkdir -p "$stage/$(dirname "$dst")"
    cp "$src" "$stage/$dst.real"
    strip --strip-unneeded "$stage/$dst.real"
    ln "$stage/lib/bundle-launcher" "$stage/$dst"
    copy_libs "$src"
done
for dst in "${!objs[@]}"; do
    mkdir -p "$stage/$(dirname "$dst")"
    cp "${objs[$dst]}" "$stage/$dst"
    copy_libs "${objs[$dst]}"
done
[ -f "$stage/lib/ld-linux-x86-64.so.2" ] || die "no ld-linux-x86-64.so.2 found"

# QEMU's data (keymaps: libxl passes -vnc none), where a QEMU started by
# the loader in lib/ looks: <its directory>/../share/qemu
mkdir -p "$stage/share/qemu"
cp -r "$qbuild/fork/qemu-bundle/usr/local/share/qemu/keymaps" \
    "$stage/share/qemu/"

# The bench's scripts, where bench-scale.sh looks for them
mkdir -p "$stage/scripts/bench" "$stage/upstream"
cp "$top/scripts/bench-scale.sh" "$top/scripts/base.sh" "$stage/scripts/"
cp "$top/scripts/bench/session.sh" "$top/scripts/bench/scale-guest.sh" \
   "$top/scripts/bench/scale-probe.py" "$top/scripts/bench/scale-analyze.py" \
   "$top/scripts/bench/probe.py" "$top/scripts/bench/analyze.py" \
   "$stage/scripts/bench/"
cp "$top"/upstream/qemu*.conf "$stage/upstream/"
git -C "$qbuild/src" log --oneline "base/$QEMU_VERSION..HEAD" \
    > "$stage/series-fork.txt" 2>/dev/null || true
git -C "$top" describe --always --dirty > "$stage/repo.txt" 2>/dev/null || true

cat > "$stage/run.sh" <<'EOF'
#!/bin/bash
# Run the scale bench from this bundle: run.sh full|quick (BENCH_SCALE_*
# overrides as in scripts/bench-scale.sh).
set -euo pipefail
b=$(cd "$(dirname "$0")" && pwd)
export PATH=$b/bin:$PATH
export XENSIM_SHIM=$b/lib/libxensim-shim.so
export XENSIM_XENSTORED=$b/bin/xenstored
export FIO=$b/bin/fio
export BENCH_OUT=${BENCH_OUT:-$b/results/$(date -u +%Y%m%d-%H%M%S)}
command -v gnuplot >/dev/null || export BENCH_SCALE_CHART=0
exec "$b/scripts/bench-scale.sh" "$@"
EOF
chmod +x "$stage/run.sh"

strip --strip-unneeded "$stage"/lib/*.so* "$stage"/build/xensim/xensim/fio/*.so
tar -C "$build/bench-bundle" -czf "$tarball" "$name"
echo "bench-bundle: $tarball ($(du -h "$tarball" | cut -f1)):" \
     "tar xzf it anywhere and run $name/run.sh full|quick"
