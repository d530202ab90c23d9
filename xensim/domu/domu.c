/*
 * xensim domU library: the domain's memory, page allocator and grants.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "domu-int.h"

struct xensim_domu {
    xensim *hv;
    uint32_t domid;
    uint8_t *mem;
    uint64_t nr_pages;
    grant_entry_v1_t *gnttab;
    uint8_t *page_used;         /* one byte per gfn: allocator state */
    uint64_t next_fit;          /* first-fit search starts here */
    uint32_t *free_refs;        /* stack of free grant refs */
    uint32_t nr_free_refs;
};

xensim_domu *xensim_domu_open(const char *dir, uint32_t domid)
{
    xensim_domu *d = g_new0(xensim_domu, 1);
    uint32_t ref;
    int err;

    d->domid = domid;
    d->hv = xensim_attach(dir);
    if (!d->hv) {
        goto err;
    }
    d->mem = xensim_domain_mem(d->hv, domid, &d->nr_pages);
    if (!d->mem) {
        goto err;
    }
    d->gnttab = xensim_gnttab(d->hv, domid);
    if (!d->gnttab) {
        goto err;
    }
    d->page_used = g_malloc0(d->nr_pages);
    d->page_used[XENSIM_XENSTORE_GFN] = 1;
    d->next_fit = XENSIM_FIRST_FREE_GFN;

    /*
     * Entries below GNTTAB_NR_RESERVED_ENTRIES belong to the toolstack
     * (xen/grant_table.h); hand out the rest, lowest first. An entry with
     * flags already set is in use by an earlier process of this domain.
     */
    d->free_refs = g_new(uint32_t, XENSIM_GNTTAB_ENTRIES);
    for (ref = XENSIM_GNTTAB_ENTRIES - 1; ref >= GNTTAB_NR_RESERVED_ENTRIES;
         ref--) {
        if (!DOMU_READ_ONCE(d->gnttab[ref].flags)) {
            d->free_refs[d->nr_free_refs++] = ref;
        }
    }
    return d;

err:
    err = errno;
    xensim_domu_close(d);
    errno = err;
    return NULL;
}

void xensim_domu_close(xensim_domu *d)
{
    if (!d) {
        return;
    }
    xensim_detach(d->hv);
    g_free(d->page_used);
    g_free(d->free_refs);
    g_free(d);
}

xensim *xensim_domu_hv(xensim_domu *d)
{
    return d->hv;
}

uint32_t xensim_domu_domid(const xensim_domu *d)
{
    return d->domid;
}

uint64_t xensim_domu_nr_pages(const xensim_domu *d)
{
    return d->nr_pages;
}

grant_entry_v1_t *xensim_domu_gnttab(xensim_domu *d)
{
    return d->gnttab;
}

void *xensim_domu_page(xensim_domu *d, uint64_t gfn)
{
    if (gfn >= d->nr_pages) {
        errno = EINVAL;
        return NULL;
    }
    return d->mem + gfn * XENSIM_PAGE_SIZE;
}

int64_t xensim_domu_gfn(xensim_domu *d, const void *p)
{
    const uint8_t *b = p;

    if (b < d->mem || b >= d->mem + d->nr_pages * XENSIM_PAGE_SIZE) {
        errno = EFAULT;
        return -1;
    }
    return (b - d->mem) / XENSIM_PAGE_SIZE;
}

static int64_t find_run(xensim_domu *d, uint64_t from, uint64_t to, size_t n)
{
    uint64_t gfn, run = 0;

    for (gfn = from; gfn < to; gfn++) {
        run = d->page_used[gfn] ? 0 : run + 1;
        if (run == n) {
            return gfn + 1 - n;
        }
    }
    return -1;
}

void *xensim_domu_alloc_pages(xensim_domu *d, size_t n)
{
    int64_t gfn;

    if (n == 0 || n > d->nr_pages) {
        errno = n ? ENOMEM : EINVAL;
        return NULL;
    }
    gfn = find_run(d, d->next_fit, d->nr_pages, n);
    if (gfn < 0) {
        gfn = find_run(d, XENSIM_FIRST_FREE_GFN, d->nr_pages, n);
    }
    if (gfn < 0) {
        errno = ENOMEM;
        return NULL;
    }
    memset(d->page_used + gfn, 1, n);
    d->next_fit = gfn + n;
    memset(d->mem + gfn * XENSIM_PAGE_SIZE, 0, n * XENSIM_PAGE_SIZE);
    return d->mem + gfn * XENSIM_PAGE_SIZE;
}

void xensim_domu_free_pages(xensim_domu *d, void *p, size_t n)
{
    int64_t gfn;

    if (!p) {
        return;
    }
    gfn = xensim_domu_gfn(d, p);
    g_assert(gfn >= XENSIM_FIRST_FREE_GFN && gfn + n <= d->nr_pages);
    memset(d->page_used + gfn, 0, n);
    if ((uint64_t)gfn < d->next_fit) {
        d->next_fit = gfn;
    }
}

int xensim_domu_grant(xensim_domu *d, uint32_t remote, uint64_t gfn,
                      bool readonly)
{
    grant_entry_v1_t *e;
    uint32_t ref;

    if (gfn >= d->nr_pages || gfn > UINT32_MAX) {
        errno = EINVAL;
        return -1;
    }
    if (!d->nr_free_refs) {
        errno = ENOSPC;
        return -1;
    }
    ref = d->free_refs[--d->nr_free_refs];
    e = &d->gnttab[ref];
    e->domid = remote;
    e->frame = gfn;
    /*
     * xen/grant_table.h, "Introducing a valid entry into the grant table":
     * domid and frame must be visible before the flags that validate them.
     */
    xen_wmb();
    DOMU_WRITE_ONCE(e->flags, GTF_permit_access |
                    (readonly ? GTF_readonly : 0));
    return ref;
}

int xensim_domu_end_grant(xensim_domu *d, uint32_t ref)
{
    grant_entry_v1_t *e;
    uint16_t flags;

    if (ref < GNTTAB_NR_RESERVED_ENTRIES || ref >= XENSIM_GNTTAB_ENTRIES) {
        errno = EINVAL;
        return -1;
    }
    e = &d->gnttab[ref];
    /*
     * xen/grant_table.h, "Invalidating an in-use GTF_permit_access entry":
     * clear the flags only if the remote is not reading or writing it,
     * atomically with respect to the hypervisor setting those bits.
     */
    flags = DOMU_READ_ONCE(e->flags);
    do {
        if (flags & (GTF_reading | GTF_writing)) {
            errno = EBUSY;
            return -1;
        }
    } while (!__atomic_compare_exchange_n(&e->flags, &flags, 0, false,
                                          __ATOMIC_SEQ_CST,
                                          __ATOMIC_RELAXED));
    d->free_refs[d->nr_free_refs++] = ref;
    return 0;
}
