/*
 * libxensim-shim internals: the libxen* calls of a dom0 process (QEMU,
 * xenstored) implemented over libxensim-hv.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef XENSIM_SHIM_INT_H
#define XENSIM_SHIM_INT_H

#include "xensim/hv.h"
#include "xensim/log.h"

/* Every process the shim is preloaded into is domain 0. */
#define SHIM_DOMID  0u

/*
 * The simulated host in $XENSIM_DIR, attached on first use and kept for
 * the life of the process. NULL with errno set (and one log line) when
 * there is none.
 */
xensim *shim_host(void);

/*
 * Report an unsupported libxen call: errno = ENOSYS, a warning the first
 * time @fn is called (debug afterwards). Returns -1.
 */
int shim_enosys(const char *fn, int *logged);

/*
 * Grant copy of @count segments as Linux gntdev's IOCTL_GNTDEV_GRANT_COPY
 * does it (gntdev_ioctl_grant_copy()): -1 + EINVAL and nothing copied if
 * a segment is malformed (no grant side, or a grant side beyond its
 * page); otherwise 0, with each segment's GNTST_* in its status.
 */
struct xengnttab_grant_copy_segment;      /* xengnttab.h */
int shim_grant_copy(xensim *xs, uint32_t count,
                    struct xengnttab_grant_copy_segment *segs);

/*
 * The dom0 kernel's /dev/xen/gntdev (gntdev.c): open() of that path gives
 * a shim file descriptor; -1 with errno set when there is no host.
 */
int shim_gntdev_open(int flags);

#define SHIM_ENOSYS(fn) ({ static int logged_; shim_enosys(fn, &logged_); })

#endif /* XENSIM_SHIM_INT_H */
