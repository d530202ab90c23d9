/*
 * xensim domU library: private definitions shared by its files.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef XENSIM_DOMU_INT_H
#define XENSIM_DOMU_INT_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>

#include <xen/xen.h>
#include <xen/grant_table.h>
#include <xen/io/ring.h>
#include <xen/io/xs_wire.h>

#include "xensim/domu.h"

/*
 * xen/io/ring.h leaves the barriers to the includer (xenctrl.h defines
 * them for tools; with the default __XEN_INTERFACE_VERSION__ ring.h maps
 * them to undefined mb()/rmb()/wmb()). Peers are other processes sharing
 * MAP_SHARED memory, so C11 fences are the exact requirement: release
 * orders ring contents before an index store, acquire orders an index load
 * before the contents, and the full fence orders the producer-index store
 * before the event-index load in the *_CHECK_NOTIFY macros. Macros expand
 * at use, so redefining them after the include is enough.
 */
#undef xen_mb
#undef xen_rmb
#undef xen_wmb
#define xen_mb()  __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define xen_rmb() __atomic_thread_fence(__ATOMIC_ACQUIRE)
#define xen_wmb() __atomic_thread_fence(__ATOMIC_RELEASE)

/* Read a value another domain writes exactly once. */
#define DOMU_READ_ONCE(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)
#define DOMU_WRITE_ONCE(x, v) __atomic_store_n(&(x), (v), __ATOMIC_RELAXED)

/*
 * Byte-stream halves of the xenstore ring, no waiting and no barriers of
 * the caller's: each copies what fits and publishes the index with the
 * barrier docs/misc/xenstore-ring.txt asks for. @prod/@cons are the
 * indices of the direction in use. Return the number of bytes moved, or
 * -1 (EIO) when the indices are more than a ring apart (corrupt peer).
 */
ssize_t xs_ring_put(char *ring, uint32_t *cons, uint32_t *prod,
                    const void *data, size_t len);
ssize_t xs_ring_get(char *ring, uint32_t *cons, uint32_t *prod,
                    void *data, size_t len);

/*
 * Map an XS_ERROR payload ("EACCES") to an errno value, with xs_wire.h's
 * xsd_errors table; EINVAL for strings it does not know.
 */
int xs_error_to_errno(const char *s);

#endif /* XENSIM_DOMU_INT_H */
