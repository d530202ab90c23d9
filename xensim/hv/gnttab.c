/*
 * xensim v1 grant tables: map, unmap and copy (see xensim/hv.h).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The checks are the ones Xen makes in xen/common/grant_table.c for a v1
 * entry: the entry must be GTF_permit_access for the mapping/copying
 * domain, GTF_readonly forbids writes, and a map pins the entry by setting
 * GTF_reading (and GTF_writing) with a compare-and-swap on the flags+domid
 * word, so that a guest revoking the grant at the same time either sees
 * the flags or makes the map fail. Pin counts (Xen's active entries) live
 * in the shared hv state under the control lock; grant copy is lock-free.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "hv-int.h"

/* A v1 entry's flags (low 16 bits) and domid (high 16 bits), as one word. */
typedef uint32_t __attribute__((may_alias)) grant_word_t;

#define GRANT_PIN_RETRIES   4   /* as Xen: then "entry is unstable" */

struct xensim_grant_mapping {
    uint32_t granter;
    uint64_t generation;
    uint32_t count;
    bool writable;
    uint32_t refs[];
};

static grant_word_t *grant_word(grant_entry_v1_t *e)
{
    return (grant_word_t *)(void *)e;
}

/* Drop one pin of @ref (caller holds the hv lock); clear unused flags. */
static void grant_unpin(xensim *xs, struct xensim_dommap *m, uint32_t granter,
                        uint32_t ref, bool writable)
{
    uint32_t *act = &xs->hv->active[granter][ref];
    uint32_t clear = 0;

    *act -= XENSIM_PIN_RD + (writable ? XENSIM_PIN_WR : 0);
    if (!(*act & 0xffff)) {
        clear |= GTF_reading;
    }
    if (!(*act >> 16)) {
        clear |= GTF_writing;
    }
    if (clear) {
        __atomic_fetch_and(grant_word(&m->gnttab[ref]), ~clear,
                           __ATOMIC_ACQ_REL);
    }
}

/*
 * Pin @ref of @granter for @mapper (caller holds the hv lock). Returns the
 * granted frame, or -1 with errno EINVAL (bad ref, entry not
 * permit_access for @mapper, unstable, frame outside the domain) or EPERM
 * (GTF_readonly and @writable).
 */
static int64_t grant_pin(xensim *xs, struct xensim_dommap *m,
                         uint32_t granter, uint32_t mapper, uint32_t ref,
                         bool writable)
{
    grant_word_t *w;
    uint32_t old, new, flags, pin;
    uint64_t frame;
    int tries;

    if (ref >= XENSIM_GNTTAB_ENTRIES) {
        errno = EINVAL;
        return -1;
    }
    w = grant_word(&m->gnttab[ref]);
    for (tries = 0; tries < GRANT_PIN_RETRIES; tries++) {
        old = __atomic_load_n(w, __ATOMIC_ACQUIRE);
        flags = old & 0xffff;
        if ((flags & GTF_type_mask) != GTF_permit_access ||
            (old >> 16) != mapper) {
            errno = EINVAL;
            return -1;
        }
        if (writable && (flags & GTF_readonly)) {
            errno = EPERM;
            return -1;
        }
        new = old | GTF_reading | (writable ? GTF_writing : 0);
        if (new == old ||
            __atomic_compare_exchange_n(w, &old, new, false,
                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
            break;
        }
    }
    if (tries == GRANT_PIN_RETRIES) {
        xensim_log(XENSIM_LOG_DEBUG, "dom%u gref %u unstable", granter, ref);
        errno = EINVAL;
        return -1;
    }
    pin = XENSIM_PIN_RD + (writable ? XENSIM_PIN_WR : 0);
    xs->hv->active[granter][ref] += pin;
    /* Read the frame after the flags are set, once. */
    frame = __atomic_load_n(&m->gnttab[ref].frame, __ATOMIC_ACQUIRE);
    if (frame >= m->nr_pages) {
        grant_unpin(xs, m, granter, ref, writable);
        errno = EINVAL;
        return -1;
    }
    return frame;
}

void *xensim_grant_map(xensim *xs, uint32_t mapper, uint32_t granter,
                       uint32_t count, const uint32_t *refs, int prot)
{
    struct xensim_grant_mapping *gm;
    struct xensim_dommap *m;
    bool writable = prot & PROT_WRITE;
    size_t len;
    uint8_t *addr;
    uint32_t i, pinned = 0;
    int64_t frame;
    int saved;

    if (!count || count > XENSIM_GNTTAB_ENTRIES || !refs ||
        mapper >= XENSIM_MAX_DOMAINS ||
        (prot & ~(PROT_READ | PROT_WRITE)) || !(prot & PROT_READ)) {
        errno = EINVAL;
        return NULL;
    }
    m = xensim_dommap_get(xs, granter);
    if (!m) {
        errno = ESRCH;
        return NULL;
    }
    len = (size_t)count * XENSIM_PAGE_SIZE;
    addr = mmap(NULL, len, PROT_NONE,
                MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (addr == MAP_FAILED) {
        return NULL;
    }
    gm = g_malloc(sizeof(*gm) + count * sizeof(uint32_t));
    gm->granter = granter;
    gm->count = count;
    gm->writable = writable;
    memcpy(gm->refs, refs, count * sizeof(uint32_t));

    if (xensim_hv_lock(xs) < 0) {
        goto err;
    }
    gm->generation = m->generation;
    if (xs->hv->domains[granter].state != XENSIM_DOM_LIVE ||
        xs->hv->domains[granter].generation != gm->generation) {
        errno = ESRCH;
        goto err_unlock;
    }
    for (i = 0; i < count; i++) {
        frame = grant_pin(xs, m, granter, mapper, refs[i], writable);
        if (frame < 0) {
            goto err_unlock;
        }
        pinned = i + 1;
        if (mmap(addr + (size_t)i * XENSIM_PAGE_SIZE, XENSIM_PAGE_SIZE, prot,
                 MAP_SHARED | MAP_FIXED, m->memfd,
                 (off_t)frame * XENSIM_PAGE_SIZE) == MAP_FAILED) {
            goto err_unlock;
        }
    }
    xensim_hv_unlock(xs);

    pthread_mutex_lock(&xs->lock);
    g_hash_table_insert(xs->maps, addr, gm);
    pthread_mutex_unlock(&xs->lock);
    return addr;

err_unlock:
    saved = errno;
    for (i = 0; i < pinned; i++) {
        grant_unpin(xs, m, granter, refs[i], writable);
    }
    xensim_hv_unlock(xs);
    errno = saved;
err:
    saved = errno;
    munmap(addr, len);
    g_free(gm);
    errno = saved;
    return NULL;
}

int xensim_grant_unmap(xensim *xs, void *addr, uint32_t count)
{
    struct xensim_grant_mapping *gm;
    struct xensim_dommap *m;
    uint32_t i;

    pthread_mutex_lock(&xs->lock);
    gm = g_hash_table_lookup(xs->maps, addr);
    if (!gm || gm->count != count) {
        pthread_mutex_unlock(&xs->lock);
        errno = EINVAL;
        return -1;
    }
    g_hash_table_steal(xs->maps, addr);
    pthread_mutex_unlock(&xs->lock);

    m = &xs->dom[gm->granter];
    if (xensim_hv_lock(xs) == 0) {
        /* A recreated domain has fresh pins: nothing of ours to drop. */
        if (xs->hv->domains[gm->granter].state == XENSIM_DOM_LIVE &&
            xs->hv->domains[gm->granter].generation == gm->generation &&
            m->generation == gm->generation) {
            for (i = 0; i < count; i++) {
                grant_unpin(xs, m, gm->granter, gm->refs[i], gm->writable);
            }
        }
        xensim_hv_unlock(xs);
    }
    munmap(addr, (size_t)count * XENSIM_PAGE_SIZE);
    g_free(gm);
    return 0;
}

/* One GNTTABOP_copy segment; returns its GNTST_* status. */
static int16_t grant_copy_one(xensim *xs, uint32_t copier,
                              struct xensim_copy_seg *seg)
{
    struct xensim_dommap *m;
    uint32_t word, flags;
    uint64_t frame;
    uint8_t *page;

    m = xensim_dommap_get(xs, seg->granter);
    if (!m) {
        return GNTST_bad_domain;
    }
    if (seg->ref >= XENSIM_GNTTAB_ENTRIES) {
        return GNTST_bad_gntref;
    }
    /* Read the entry once; the guest may rewrite it at any time. */
    word = __atomic_load_n(grant_word(&m->gnttab[seg->ref]), __ATOMIC_ACQUIRE);
    frame = __atomic_load_n(&m->gnttab[seg->ref].frame, __ATOMIC_ACQUIRE);
    flags = word & 0xffff;
    if ((flags & GTF_type_mask) != GTF_permit_access ||
        (word >> 16) != copier) {
        return GNTST_permission_denied;
    }
    if (seg->to_guest && (flags & GTF_readonly)) {
        return GNTST_permission_denied;
    }
    if ((uint32_t)seg->offset + seg->len > XENSIM_PAGE_SIZE) {
        return GNTST_general_error;
    }
    if (frame >= m->nr_pages) {
        return GNTST_bad_page;
    }
    page = (uint8_t *)m->mem + frame * XENSIM_PAGE_SIZE;
    if (seg->to_guest) {
        memcpy(page + seg->offset, seg->local, seg->len);
    } else {
        memcpy(seg->local, page + seg->offset, seg->len);
    }
    return GNTST_okay;
}

int xensim_grant_copy(xensim *xs, uint32_t copier,
                      struct xensim_copy_seg *segs, uint32_t count)
{
    uint32_t i;
    int failed = 0;

    for (i = 0; i < count; i++) {
        segs[i].status = grant_copy_one(xs, copier, &segs[i]);
        if (segs[i].status != GNTST_okay) {
            failed++;
        }
    }
    return failed;
}
