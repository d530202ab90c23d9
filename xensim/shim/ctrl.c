/*
 * libxenctrl, libxenforeignmemory, libxendevicemodel and libxentoolcore
 * over xensim: the handles and the few calls a PV backend and xenstored
 * make (contracts: xenctrl.h, xenforeignmemory.h, xendevicemodel.h,
 * xentoolcore.h). The rest is in stubs.c.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xenctrl.h>
#include <xenforeignmemory.h>
#include <xendevicemodel.h>
#include <xentoolcore.h>

#include "shim-int.h"

struct xc_interface_core {
    xensim *xs;
};

struct xenforeignmemory_handle {
    xensim *xs;
};

struct xendevicemodel_handle {
    xensim *xs;
};

xc_interface *xc_interface_open(xentoollog_logger *logger,
                                xentoollog_logger *dombuild_logger,
                                unsigned open_flags)
{
    xc_interface *xch;
    xensim *xs = shim_host();

    if (!xs) {
        return NULL;
    }
    xch = calloc(1, sizeof(*xch));
    if (xch) {
        xch->xs = xs;
    }
    return xch;
}

int xc_interface_close(xc_interface *xch)
{
    free(xch);
    return 0;
}

/*
 * Fill @info from domain @domid's slot. A DYING domain (destroyed,
 * xenstored not yet told) reads as dying and shut down, which is what
 * xenstored's domain_cleanup() looks for.
 */
static void shim_dominfo(xensim *xs, uint32_t domid, int state,
                         xc_dominfo_t *info)
{
    struct xensim_domain d;

    memset(info, 0, sizeof(*info));
    info->domid = domid;
    info->nr_online_vcpus = 1;
    if (state == XENSIM_DOM_DYING) {
        info->dying = 1;
        info->shutdown = 1;
        info->shutdown_reason = SHUTDOWN_poweroff;
        return;
    }
    info->running = 1;
    if (domid == 0 || xensim_domain_info(xs, domid, &d) < 0) {
        return;
    }
    info->nr_pages = d.nr_pages;
    info->max_memkb = d.nr_pages * (XENSIM_PAGE_SIZE / 1024);
}

int xc_domain_getinfo(xc_interface *xch, uint32_t first_domid,
                      unsigned int max_doms, xc_dominfo_t *info)
{
    unsigned int n = 0;
    uint32_t domid;
    int state;

    for (domid = first_domid;
         domid < XENSIM_MAX_DOMAINS && n < max_doms; domid++) {
        state = xensim_domain_state(xch->xs, domid);
        if (state == XENSIM_DOM_LIVE || state == XENSIM_DOM_DYING) {
            shim_dominfo(xch->xs, domid, state, &info[n++]);
        }
    }
    return n;
}

xenforeignmemory_handle *xenforeignmemory_open(xentoollog_logger *logger,
                                               unsigned int open_flags)
{
    xenforeignmemory_handle *fmem;
    xensim *xs = shim_host();

    if (!xs) {
        return NULL;
    }
    fmem = calloc(1, sizeof(*fmem));
    if (fmem) {
        fmem->xs = xs;
    }
    return fmem;
}

int xenforeignmemory_close(xenforeignmemory_handle *fmem)
{
    free(fmem);
    return 0;
}

xendevicemodel_handle *xendevicemodel_open(xentoollog_logger *logger,
                                           unsigned int open_flags)
{
    xendevicemodel_handle *dmod;
    xensim *xs = shim_host();

    if (!xs) {
        return NULL;
    }
    dmod = calloc(1, sizeof(*dmod));
    if (dmod) {
        dmod->xs = xs;
    }
    return dmod;
}

int xendevicemodel_close(xendevicemodel_handle *dmod)
{
    free(dmod);
    return 0;
}

int xentoolcore_restrict_all(domid_t domid)
{
    /* Nothing to restrict: xensim handles carry no hypervisor privilege. */
    xensim_log(XENSIM_LOG_INFO, "xentoolcore_restrict_all(%u): no-op",
               domid);
    return 0;
}
