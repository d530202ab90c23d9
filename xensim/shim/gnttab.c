/*
 * libxengnttab over xensim (contract: xengnttab.h, Linux gntdev).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Maps go through xensim_grant_map() (one contiguous mmap of the
 * granter's memory file), copies through xensim_grant_copy() (memcpy
 * from the granter's memory, mapped once per process): no syscall per
 * copy. The caller is always domain 0. shim_grant_copy() also serves
 * the raw IOCTL_GNTDEV_GRANT_COPY (gntdev.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <xengnttab.h>

#include "shim-int.h"

struct xengntdev_handle {
    xensim *xs;
    uint32_t max_grants;
};

xengnttab_handle *xengnttab_open(struct xentoollog_logger *logger,
                                 unsigned int open_flags)
{
    xengnttab_handle *xgt;
    xensim *xs = shim_host();

    if (!xs) {
        return NULL;
    }
    xgt = calloc(1, sizeof(*xgt));
    if (!xgt) {
        return NULL;
    }
    xgt->xs = xs;
    return xgt;
}

int xengnttab_close(xengnttab_handle *xgt)
{
    /* Like gntdev: mappings outlive the handle until unmapped. */
    free(xgt);
    return 0;
}

int xengnttab_set_max_grants(xengnttab_handle *xgt, uint32_t nr_grants)
{
    /* Recorded only: current gntdev has no per-handle limit either. */
    xgt->max_grants = nr_grants;
    return 0;
}

/* The one map operation behind every xengnttab_map_* call. Logs errors. */
static void *shim_gnttab_map(xengnttab_handle *xgt, uint32_t count,
                             uint32_t domid, const uint32_t *refs, int prot)
{
    void *addr = xensim_grant_map(xgt->xs, SHIM_DOMID, domid, count, refs,
                                  prot);

    if (!addr) {
        xensim_log(XENSIM_LOG_WARN, "grant map of %u refs of dom%u "
                   "(first %u) failed: %s", count, domid,
                   count ? refs[0] : 0, strerror(errno));
    }
    return addr;
}

void *xengnttab_map_grant_ref(xengnttab_handle *xgt, uint32_t domid,
                              uint32_t ref, int prot)
{
    return shim_gnttab_map(xgt, 1, domid, &ref, prot);
}

void *xengnttab_map_domain_grant_refs(xengnttab_handle *xgt, uint32_t count,
                                      uint32_t domid, uint32_t *refs,
                                      int prot)
{
    return shim_gnttab_map(xgt, count, domid, refs, prot);
}

void *xengnttab_map_grant_refs(xengnttab_handle *xgt, uint32_t count,
                               uint32_t *domids, uint32_t *refs, int prot)
{
    uint32_t i;

    for (i = 1; i < count; i++) {
        if (domids[i] != domids[0]) {
            /* One contiguous mapping comes from one domain's memory file. */
            xensim_log(XENSIM_LOG_WARN, "grant map across domains "
                       "(dom%u, dom%u): not supported", domids[0], domids[i]);
            errno = EINVAL;
            return NULL;
        }
    }
    return shim_gnttab_map(xgt, count, count ? domids[0] : 0, refs, prot);
}

void *xengnttab_map_grant_ref_notify(xengnttab_handle *xgt, uint32_t domid,
                                     uint32_t ref, int prot,
                                     uint32_t notify_offset,
                                     evtchn_port_t notify_port)
{
    if (notify_offset == (uint32_t)-1 && notify_port == (evtchn_port_t)-1) {
        return shim_gnttab_map(xgt, 1, domid, &ref, prot);
    }
    SHIM_ENOSYS(__func__);      /* unmap notification */
    return NULL;
}

int xengnttab_unmap(xengnttab_handle *xgt, void *start_address,
                    uint32_t count)
{
    return xensim_grant_unmap(xgt->xs, start_address, count);
}

/*
 * Check a segment as Linux gntdev_grant_copy_seg() does: at least one
 * side is a grant ref, and a grant side stays inside its page.
 */
static bool shim_copy_seg_valid(const xengnttab_grant_copy_segment_t *seg)
{
    if (!(seg->flags & (GNTCOPY_source_gref | GNTCOPY_dest_gref))) {
        return false;
    }
    if ((seg->flags & GNTCOPY_source_gref) &&
        seg->source.foreign.offset + seg->len > XENSIM_PAGE_SIZE) {
        return false;
    }
    if ((seg->flags & GNTCOPY_dest_gref) &&
        seg->dest.foreign.offset + seg->len > XENSIM_PAGE_SIZE) {
        return false;
    }
    return true;
}

/* One segment; returns its GNTST_* status. */
static int16_t shim_copy_seg(xensim *xs, xengnttab_grant_copy_segment_t *seg)
{
    uint8_t bounce[XENSIM_PAGE_SIZE];
    struct xensim_copy_seg s[2];
    bool from = seg->flags & GNTCOPY_source_gref;
    bool to = seg->flags & GNTCOPY_dest_gref;

    if (from) {
        s[0] = (struct xensim_copy_seg) {
            .to_guest = false,
            .granter = seg->source.foreign.domid,
            .ref = seg->source.foreign.ref,
            .offset = seg->source.foreign.offset,
            .len = seg->len,
            .local = to ? bounce : seg->dest.virt,
        };
        if (xensim_grant_copy(xs, SHIM_DOMID, &s[0], 1)) {
            return s[0].status;
        }
    }
    if (to) {
        s[1] = (struct xensim_copy_seg) {
            .to_guest = true,
            .granter = seg->dest.foreign.domid,
            .ref = seg->dest.foreign.ref,
            .offset = seg->dest.foreign.offset,
            .len = seg->len,
            .local = from ? bounce : seg->source.virt,
        };
        if (xensim_grant_copy(xs, SHIM_DOMID, &s[1], 1)) {
            return s[1].status;
        }
    }
    return GNTST_okay;
}

int shim_grant_copy(xensim *xs, uint32_t count,
                    xengnttab_grant_copy_segment_t *segs)
{
    uint32_t i;

    /* As the gntdev ioctl: malformed segments fail the whole call. */
    for (i = 0; i < count; i++) {
        if (!shim_copy_seg_valid(&segs[i])) {
            errno = EINVAL;
            return -1;
        }
    }
    for (i = 0; i < count; i++) {
        segs[i].status = shim_copy_seg(xs, &segs[i]);
    }
    return 0;
}

int xengnttab_grant_copy(xengnttab_handle *xgt, uint32_t count,
                         xengnttab_grant_copy_segment_t *segs)
{
    return shim_grant_copy(xgt->xs, count, segs);
}
