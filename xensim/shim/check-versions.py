#!/usr/bin/env python3
# Check libxensim-shim.so's exports: each xen*/xc_* symbol must carry the
# version node the real library gives it, and every such symbol imported
# by the given binaries (QEMU, xenstored, tapdisk; skipped if absent) is
# exported.
import glob
import os
import subprocess
import sys


def dynsyms(path, undefined):
    opt = '--undefined-only' if undefined else '--defined-only'
    out = subprocess.run(['nm', '-D', opt, path], check=True,
                         capture_output=True, text=True).stdout
    syms = {}
    for line in out.splitlines():
        name = line.split()[-1]
        if '@' not in name:
            continue
        base, ver = name.replace('@@', '@').split('@', 1)
        if base.startswith(('xen', 'xc_')) and not base.startswith('xenstore'):
            syms[base] = ver
    return syms


def main():
    shim = dynsyms(sys.argv[1], False)
    real = {}
    for lib in ('xenevtchn', 'xengnttab', 'xenforeignmemory',
                'xendevicemodel', 'xentoolcore', 'xenctrl'):
        for path in glob.glob('/lib/x86_64-linux-gnu/lib%s.so.*' % lib):
            real.update(dynsyms(path, False))
    errors = []
    if not shim:
        errors.append('shim exports no versioned xen symbols')
    for name, ver in sorted(shim.items()):
        if real.get(name) != ver:
            errors.append('%s@%s: real library has %s'
                          % (name, ver, real.get(name)))
    for binary in sys.argv[2:]:
        if not os.path.exists(binary):
            print('skipping absent %s' % binary)
            continue
        for name, ver in sorted(dynsyms(binary, True).items()):
            if shim.get(name) != ver:
                errors.append('%s imports %s@%s, shim has %s'
                              % (os.path.basename(binary), name, ver,
                                 shim.get(name)))
    for e in errors:
        print(e)
    print('%d symbols checked, %d errors' % (len(shim), len(errors)))
    return 1 if errors else 0


sys.exit(main())
