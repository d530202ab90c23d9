#!/bin/sh
# Xen's own test-xenstore (tools/tests/xenstore, from Debian's
# xen-utils-4.17) against Debian's xenstored running under the libxen
# shim, through `xensim host`.
#
# Copyright (c) 2026 The xenblk fork authors
# SPDX-License-Identifier: GPL-2.0-or-later
#
# Usage: test-xenstore.sh XENSIM-CLI [test-xenstore options]
# Exit 77 (skip) when xenstored is not unpacked or the shim not built.
set -u

cli=$1
shift
here=$(cd "$(dirname "$0")" && pwd)
unpack=$here/../../build/xen-utils
xsd=${XENSIM_XENSTORED:-$unpack/usr/lib/xen-4.17/bin/xenstored}
txs=$(dirname "$xsd")/test-xenstore
shim=${XENSIM_SHIM:-$(dirname "$cli")/../shim/libxensim-shim.so}

if [ ! -x "$xsd" ] || [ ! -x "$txs" ]; then
    echo "SKIP: no xenstored/test-xenstore at $(dirname "$xsd");" \
         "run xensim/toolstack/get-xenstored.sh build/xen-utils" >&2
    exit 77
fi
if [ ! -e "$shim" ]; then
    echo "SKIP: libxen shim not built ($shim)" >&2
    exit 77
fi

logs=$(mktemp -d /tmp/xensim-test-xenstore.XXXXXX)
XENSIM_XENSTORED=$xsd XENSIM_SHIM=$shim \
    "$cli" host --log-dir "$logs" -- "$txs" "$@"
rc=$?
if [ $rc -ne 0 ]; then
    echo "test-xenstore failed ($rc); xenstored log:" >&2
    cat "$logs/xenstored.log" >&2
else
    rm -rf "$logs"
fi
exit $rc
