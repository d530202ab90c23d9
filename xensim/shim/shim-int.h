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

#define SHIM_ENOSYS(fn) ({ static int logged_; shim_enosys(fn, &logged_); })

#endif /* XENSIM_SHIM_INT_H */
