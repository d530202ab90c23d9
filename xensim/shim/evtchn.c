/*
 * libxenevtchn over xensim (contract: xenevtchn.h, Linux /dev/xen/evtchn).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A handle is one xensim event channel handle of dom0; its fd is an
 * eventfd that is readable while one of its unmasked ports is pending.
 * Errors pass straight through from libxensim-hv; nothing is logged.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>

#include <xenevtchn.h>

#include "shim-int.h"

struct xenevtchn_handle {
    xensim_evtchn *ch;
};

xenevtchn_handle *xenevtchn_open(struct xentoollog_logger *logger,
                                 unsigned int open_flags)
{
    xenevtchn_handle *xce;
    xensim *xs = shim_host();
    int fd, saved;

    if (!xs) {
        return NULL;
    }
    xce = calloc(1, sizeof(*xce));
    if (!xce) {
        return NULL;
    }
    xce->ch = xensim_evtchn_open(xs, SHIM_DOMID);
    if (!xce->ch) {
        goto err;
    }
    if (open_flags & XENEVTCHN_NO_CLOEXEC) {
        fd = xensim_evtchn_fd(xce->ch);
        if (fcntl(fd, F_SETFD, fcntl(fd, F_GETFD) & ~FD_CLOEXEC) < 0) {
            goto err;
        }
    }
    return xce;

err:
    saved = errno;
    xenevtchn_close(xce);
    errno = saved;
    return NULL;
}

xenevtchn_handle *xenevtchn_fdopen(struct xentoollog_logger *logger,
                                   int fd, unsigned int open_flags)
{
    /* xenstored live update only: handles cannot cross exec here. */
    SHIM_ENOSYS(__func__);
    return NULL;
}

int xenevtchn_restrict(xenevtchn_handle *xce, domid_t domid)
{
    return SHIM_ENOSYS(__func__);
}

int xenevtchn_close(xenevtchn_handle *xce)
{
    if (!xce) {
        return 0;
    }
    xensim_evtchn_close(xce->ch);
    free(xce);
    return 0;
}

int xenevtchn_fd(xenevtchn_handle *xce)
{
    return xensim_evtchn_fd(xce->ch);
}

int xenevtchn_notify(xenevtchn_handle *xce, evtchn_port_t port)
{
    return xensim_evtchn_notify(xce->ch, port);
}

xenevtchn_port_or_error_t
xenevtchn_bind_unbound_port(xenevtchn_handle *xce, uint32_t domid)
{
    return xensim_evtchn_alloc_unbound(xce->ch, domid);
}

xenevtchn_port_or_error_t
xenevtchn_bind_interdomain(xenevtchn_handle *xce, uint32_t domid,
                           evtchn_port_t remote_port)
{
    return xensim_evtchn_bind_interdomain(xce->ch, domid, remote_port);
}

xenevtchn_port_or_error_t
xenevtchn_bind_virq(xenevtchn_handle *xce, unsigned int virq)
{
    return xensim_evtchn_bind_virq(xce->ch, virq);
}

int xenevtchn_unbind(xenevtchn_handle *xce, evtchn_port_t port)
{
    return xensim_evtchn_unbind(xce->ch, port);
}

xenevtchn_port_or_error_t xenevtchn_pending(xenevtchn_handle *xce)
{
    return xensim_evtchn_pending(xce->ch);
}

int xenevtchn_unmask(xenevtchn_handle *xce, evtchn_port_t port)
{
    return xensim_evtchn_unmask(xce->ch, port);
}
