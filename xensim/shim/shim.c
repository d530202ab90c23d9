/*
 * libxensim-shim: host attachment and the unsupported-call reporter.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "shim-int.h"

static pthread_once_t host_once = PTHREAD_ONCE_INIT;
static xensim *host;
static int host_errno;

static void shim_attach(void)
{
    host = xensim_attach(NULL);
    if (!host) {
        host_errno = errno;
        xensim_log(XENSIM_LOG_ERR, "cannot attach to $XENSIM_DIR (%s): %s",
                   getenv("XENSIM_DIR") ?: "unset", strerror(errno));
        return;
    }
    xensim_log(XENSIM_LOG_INFO, "shim attached to %s as dom%u",
               xensim_dir(host), SHIM_DOMID);
}

xensim *shim_host(void)
{
    pthread_once(&host_once, shim_attach);
    if (!host) {
        errno = host_errno;
    }
    return host;
}

int shim_enosys(const char *fn, int *logged)
{
    int level = XENSIM_LOG_WARN;

    if (__atomic_exchange_n(logged, 1, __ATOMIC_RELAXED)) {
        level = XENSIM_LOG_DEBUG;
    }
    xensim_log(level, "%s: not supported by xensim", fn);
    errno = ENOSYS;
    return -1;
}
