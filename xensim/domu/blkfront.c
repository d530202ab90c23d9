/*
 * xensim blkfront: negotiation and data path.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * See include/xensim/blkfront.h for the contract. Request ids are indices
 * into a shadow array of ring size, as in Linux xen-blkfront: the shadow
 * remembers the I/O and the data pages of each request in flight.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>

#include <glib.h>
#include <xen/io/xenbus.h>

#include "xensim/log.h"
#include "blkfront-int.h"

#define BF_DEFAULT_TIMEOUT_MS 10000
#define BF_NO_ID UINT32_MAX

struct bf_shadow {
    struct blkfront_io *io;     /* NULL: free */
    uint32_t next_free;
    uint32_t nseg;
    /* The response's operation: the request's, an indirect one's own */
    uint8_t op;
    uint32_t *gfn;              /* data pages: bf->max_segs entries */
    uint32_t nind;              /* indirect pages granted, and their refs */
    uint32_t ind_ref[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
};

enum bf_state {
    BF_STATE_CLOSED,
    BF_STATE_CONNECTED,
};

struct blkfront {
    xensim_domu *d;
    xensim_xs *xs;
    struct blkfront_opts o;
    struct blkfront_info info;
    struct blkfront_stats stats;
    enum bf_state state;
    char *fe;                   /* device/vbd/<devid> */

    xensim_evtchn *evtchn;
    int port;

    union bf_front_ring ring;
    void *ring_pages;
    unsigned int nr_ring_pages;
    uint32_t ring_ref[1u << BLKFRONT_MAX_RING_ORDER];

    struct bf_shadow *shadow;   /* info.ring_entries */
    uint32_t free_id;
    /*
     * Per connection: segments per request (11, or info.indirect_segments),
     * the shadows' gfn arrays, the splitter's scratch list, and each
     * slot's indirect pages (ind_per_slot of them, slot id's at
     * ind_pages + id * ind_per_slot pages), allocated once as Linux does.
     */
    unsigned int max_segs;
    uint32_t *shadow_gfn;
    struct bf_seg *segs;
    uint8_t *ind_pages;
    unsigned int ind_per_slot;
    unsigned int inflight;      /* I/Os queued, not yet reaped */

    struct blkfront_io *waiting;        /* I/O with unqueued requests */
    struct blkfront_io *done_head, *done_tail;

    /* Data-page grants, per gfn: ref (0 = none) and requests using it. */
    uint32_t *gfn_ref;
    uint16_t *gfn_busy;
    uint32_t *granted;          /* FIFO of granted gfns, for eviction */
    uint32_t granted_head, granted_len, granted_cap;
};

/* --- helpers --------------------------------------------------------------- */

static int bf_timeout(const blkfront *bf)
{
    return bf->o.timeout_ms ? bf->o.timeout_ms : BF_DEFAULT_TIMEOUT_MS;
}

static char *bf_be_path(const blkfront *bf, const char *node)
{
    return g_strdup_printf("%s/%s", bf->info.backend, node);
}

static char *bf_fe_path(const blkfront *bf, const char *node)
{
    return g_strdup_printf("%s/%s", bf->fe, node);
}

/* Read backend node @node as an unsigned; @def if absent or malformed. */
static uint64_t bf_be_u64(blkfront *bf, const char *node, uint64_t def)
{
    char *p = bf_be_path(bf, node);
    uint64_t v;

    if (xensim_xs_read_u64(bf->xs, XENSIM_XBT_NULL, p, &v) < 0) {
        v = def;
    }
    g_free(p);
    return v;
}

static int bf_set_state(blkfront *bf, enum xenbus_state s)
{
    char *p = bf_fe_path(bf, "state");
    int ret = xensim_xs_printf(bf->xs, XENSIM_XBT_NULL, p, "%u", s);

    g_free(p);
    return ret;
}

/* Wait until the backend state is one of the bits in @mask (1 << state). */
static int bf_wait_backend(blkfront *bf, unsigned int mask, uint64_t *state)
{
    char *p = bf_be_path(bf, "state");
    int ret = xensim_xs_wait_mask(bf->xs, p, mask, bf_timeout(bf), state);

    g_free(p);
    return ret;
}

/* --- data-page grants ------------------------------------------------------ */

/* Revoke the grant of the oldest idle data page; -1 ENOSPC if none. */
static int bf_evict_one(blkfront *bf)
{
    uint32_t tries;

    for (tries = 0; tries < bf->granted_len; tries++) {
        uint32_t gfn = bf->granted[bf->granted_head];

        bf->granted_head = (bf->granted_head + 1) % bf->granted_cap;
        bf->granted_len--;
        if (!bf->gfn_busy[gfn] &&
            xensim_domu_end_grant(bf->d, bf->gfn_ref[gfn]) == 0) {
            bf->gfn_ref[gfn] = 0;
            bf->stats.grant_evictions++;
            return 0;
        }
        /* Busy: back to the tail. */
        bf->granted[(bf->granted_head + bf->granted_len) % bf->granted_cap] =
            gfn;
        bf->granted_len++;
    }
    errno = ENOSPC;
    return -1;
}

/* Grant @gfn to the backend, revoking an idle data grant if full. */
static int bf_grant(blkfront *bf, uint32_t gfn, bool readonly)
{
    int ref = xensim_domu_grant(bf->d, bf->info.backend_id, gfn, readonly);

    if (ref < 0 && errno == ENOSPC && bf_evict_one(bf) == 0) {
        ref = xensim_domu_grant(bf->d, bf->info.backend_id, gfn, readonly);
    }
    return ref;
}

/* Grant reference for data page @gfn, granting it on first use. */
static int bf_data_ref(blkfront *bf, uint32_t gfn)
{
    int ref;

    if (bf->gfn_ref[gfn]) {
        return bf->gfn_ref[gfn];
    }
    ref = bf_grant(bf, gfn, false);
    if (ref < 0) {
        return -1;
    }
    bf->gfn_ref[gfn] = ref;
    bf->granted[(bf->granted_head + bf->granted_len) % bf->granted_cap] = gfn;
    bf->granted_len++;
    bf->stats.grants++;
    return ref;
}

static void bf_drop_data_grants(blkfront *bf)
{
    uint64_t gfn, n = xensim_domu_nr_pages(bf->d);

    for (gfn = 0; gfn < n; gfn++) {
        if (bf->gfn_ref[gfn] &&
            xensim_domu_end_grant(bf->d, bf->gfn_ref[gfn]) == 0) {
            bf->gfn_ref[gfn] = 0;
        }
    }
    bf->granted_len = 0;
}

/* --- ring setup and negotiation ------------------------------------------- */

/* End the grants of a request's indirect pages (after its response). */
static void bf_end_indirect(blkfront *bf, struct bf_shadow *sh)
{
    unsigned int i;

    for (i = 0; i < sh->nind; i++) {
        if (xensim_domu_end_grant(bf->d, sh->ind_ref[i]) < 0) {
            xensim_log(XENSIM_LOG_WARN, "blkfront: indirect page grant %u "
                       "still in use by the backend, leaking it",
                       sh->ind_ref[i]);
        }
    }
    sh->nind = 0;
}

static void bf_free_segs(blkfront *bf)
{
    unsigned int i;

    if (bf->shadow) {
        for (i = 0; i < bf->info.ring_entries; i++) {
            bf_end_indirect(bf, &bf->shadow[i]);
            bf->shadow[i].gfn = NULL;
        }
    }
    if (bf->ind_pages) {
        xensim_domu_free_pages(bf->d, bf->ind_pages,
                               bf->info.ring_entries * bf->ind_per_slot);
    }
    bf->ind_pages = NULL;
    bf->ind_per_slot = 0;
    g_free(bf->shadow_gfn);
    bf->shadow_gfn = NULL;
    g_free(bf->segs);
    bf->segs = NULL;
    bf->max_segs = 0;
}

static void bf_free_ring(blkfront *bf)
{
    unsigned int i;

    bf_free_segs(bf);

    for (i = 0; i < bf->nr_ring_pages; i++) {
        if (xensim_domu_end_grant(bf->d, bf->ring_ref[i]) < 0) {
            xensim_log(XENSIM_LOG_WARN, "blkfront: ring grant %u still "
                       "mapped by the backend, leaking it", bf->ring_ref[i]);
        }
    }
    if (bf->ring_pages) {
        xensim_domu_free_pages(bf->d, bf->ring_pages, bf->nr_ring_pages);
    }
    bf->ring_pages = NULL;
    bf->nr_ring_pages = 0;
    if (bf->evtchn) {
        xensim_evtchn_close(bf->evtchn);
        bf->evtchn = NULL;
    }
    g_free(bf->shadow);
    bf->shadow = NULL;
}

static int bf_alloc_ring(blkfront *bf, unsigned int order)
{
    unsigned int i, n = 1u << order;
    blkif_sring_t *sring;

    bf->ring_pages = xensim_domu_alloc_pages(bf->d, n);
    if (!bf->ring_pages) {
        return -1;
    }
    bf->nr_ring_pages = 0;
    for (i = 0; i < n; i++) {
        int64_t gfn = xensim_domu_gfn(bf->d, (char *)bf->ring_pages +
                                      i * XENSIM_PAGE_SIZE);
        int ref = xensim_domu_grant(bf->d, bf->info.backend_id, gfn, false);

        if (ref < 0) {
            return -1;
        }
        bf->ring_ref[i] = ref;
        bf->nr_ring_pages++;
    }

    sring = bf->ring_pages;
    SHARED_RING_INIT(sring);
    FRONT_RING_INIT(&bf->ring.native, sring, XENSIM_PAGE_SIZE * n);
    /* FRONT_RING_INIT sized it for the native entry; use the ABI's size. */
    bf->ring.native.nr_ents = bf_ring_entries(bf->o.protocol, order);
    bf->info.ring_order = order;
    bf->info.ring_entries = bf->ring.native.nr_ents;

    bf->shadow = g_new0(struct bf_shadow, bf->info.ring_entries);
    for (i = 0; i < bf->info.ring_entries; i++) {
        bf->shadow[i].next_free = i + 1 < bf->info.ring_entries ?
                                  i + 1 : BF_NO_ID;
    }
    bf->free_id = 0;

    bf->evtchn = xensim_evtchn_open(xensim_domu_hv(bf->d),
                                    xensim_domu_domid(bf->d));
    if (!bf->evtchn) {
        return -1;
    }
    bf->port = xensim_evtchn_alloc_unbound(bf->evtchn, bf->info.backend_id);
    return bf->port < 0 ? -1 : 0;
}

static const char *bf_protocol_name(enum blkfront_protocol p)
{
    switch (p) {
    case BLKFRONT_PROTO_X86_32:
        return XEN_IO_PROTO_ABI_X86_32;
    case BLKFRONT_PROTO_X86_64:
        return XEN_IO_PROTO_ABI_X86_64;
    case BLKFRONT_PROTO_NATIVE:
    default:
        return XEN_IO_PROTO_ABI_NATIVE;
    }
}

/* Remove ring-ref, ring-refN and ring-page-order (absent ones are fine) */
static void bf_remove_ring_nodes(blkfront *bf, uint32_t tx)
{
    unsigned int i;
    char node[24];
    char *p;

    for (i = 0; i <= 1u << BLKFRONT_MAX_RING_ORDER; i++) {
        if (i == 1u << BLKFRONT_MAX_RING_ORDER) {
            snprintf(node, sizeof(node), "ring-ref");
        } else {
            snprintf(node, sizeof(node), "ring-ref%u", i);
        }
        p = bf_fe_path(bf, node);
        xensim_xs_rm(bf->xs, tx, p);
        g_free(p);
    }
    p = bf_fe_path(bf, "ring-page-order");
    xensim_xs_rm(bf->xs, tx, p);
    g_free(p);
}

/* Write the frontend nodes in one transaction, retrying on EAGAIN. */
static int bf_publish(blkfront *bf)
{
    for (;;) {
        uint32_t tx;
        unsigned int i;
        char *p;
        int r = 0;

        if (xensim_xs_transaction_start(bf->xs, &tx) < 0) {
            return -1;
        }
#define W(node, ...) do {                                                   \
            p = bf_fe_path(bf, node);                                       \
            r = r ? r : xensim_xs_printf(bf->xs, tx, p, __VA_ARGS__);       \
            g_free(p);                                                      \
        } while (0)
        /*
         * A previous connection may have used the other layout: the
         * backend must not find its stale ring-ref / ring-refN nodes.
         */
        bf_remove_ring_nodes(bf, tx);
        if (bf->info.ring_order == 0) {
            W("ring-ref", "%u", bf->ring_ref[0]);
        } else {
            for (i = 0; i < bf->nr_ring_pages; i++) {
                char node[24];

                snprintf(node, sizeof(node), "ring-ref%u", i);
                W(node, "%u", bf->ring_ref[i]);
            }
            W("ring-page-order", "%u", bf->info.ring_order);
        }
        W("event-channel", "%d", bf->port);
        W("protocol", "%s", bf_protocol_name(bf->o.protocol));
        W("feature-persistent", "%u", 0);
        W("state", "%u", XenbusStateInitialised);
#undef W
        if (r < 0) {
            int err = errno;

            xensim_xs_transaction_end(bf->xs, tx, true);
            errno = err;
            return -1;
        }
        if (xensim_xs_transaction_end(bf->xs, tx, false) == 0) {
            return 0;
        }
        if (errno != EAGAIN) {
            return -1;
        }
    }
}

/*
 * Segments per request, as Linux's blkfront_gather_backend_features():
 * the backend's feature-max-indirect-segments capped to ours, and no
 * indirect descriptors at all unless that beats a plain request's 11.
 * Then the per-connection arrays and each slot's indirect pages.
 */
static int bf_setup_segs(blkfront *bf)
{
    unsigned int want = bf->o.max_indirect_segments < 0 ? 0 :
                        bf->o.max_indirect_segments ?
                        bf->o.max_indirect_segments :
                        BLKFRONT_DEFAULT_INDIRECT_SEGMENTS;
    unsigned int segs = MIN(want, bf->info.max_indirect_segments), i;

    if (segs <= BLKIF_MAX_SEGMENTS_PER_REQUEST) {
        segs = 0;
    }
    bf->info.indirect_segments = segs;
    bf->ind_per_slot = bf_indirect_pages(segs);
    if (bf->ind_per_slot) {
        bf->ind_pages = xensim_domu_alloc_pages(
            bf->d, bf->info.ring_entries * bf->ind_per_slot);
        if (!bf->ind_pages) {
            xensim_log(XENSIM_LOG_WARN, "blkfront: no memory for %u "
                       "indirect pages, using plain requests",
                       bf->info.ring_entries * bf->ind_per_slot);
            bf->info.indirect_segments = 0;
            bf->ind_per_slot = 0;
        }
    }
    bf->max_segs = bf->info.indirect_segments ? bf->info.indirect_segments
                                              : BLKIF_MAX_SEGMENTS_PER_REQUEST;
    bf->segs = g_new(struct bf_seg, bf->max_segs);
    bf->shadow_gfn = g_new(uint32_t, (size_t)bf->info.ring_entries *
                                     bf->max_segs);
    for (i = 0; i < bf->info.ring_entries; i++) {
        bf->shadow[i].gfn = bf->shadow_gfn + (size_t)i * bf->max_segs;
        bf->shadow[i].nind = 0;
    }
    return 0;
}

/* Negotiate from backend InitWait to Connected; logs why it failed. */
static int bf_negotiate(blkfront *bf)
{
    unsigned int order;
    uint64_t s;
    int err;

    if (bf_wait_backend(bf, 1u << XenbusStateInitWait, &s) < 0) {
        err = errno;
        xensim_log(XENSIM_LOG_ERR, "blkfront: backend %s not in InitWait "
                   "(state %" PRIu64 "): %s", bf->info.backend, s,
                   strerror(err));
        errno = err;
        return -1;
    }

    bf->info.max_ring_order = bf_be_u64(bf, "max-ring-page-order", 0);
    if (bf->o.ring_order < 0) {
        order = MIN(bf->info.max_ring_order, BLKFRONT_MAX_RING_ORDER);
    } else {
        order = MIN((unsigned int)bf->o.ring_order, bf->info.max_ring_order);
        if (order != (unsigned int)bf->o.ring_order) {
            xensim_log(XENSIM_LOG_WARN, "blkfront: ring-page-order %d capped "
                       "to the backend's max %u", bf->o.ring_order, order);
        }
    }

    if (bf_alloc_ring(bf, order) < 0 || bf_publish(bf) < 0) {
        err = errno;
        xensim_log(XENSIM_LOG_ERR, "blkfront: setting up the ring for %s: "
                   "%s", bf->fe, strerror(err));
        errno = err;
        return -1;
    }

    if (bf_wait_backend(bf, 1u << XenbusStateConnected, &s) < 0) {
        err = errno;
        xensim_log(XENSIM_LOG_ERR, "blkfront: backend %s did not connect "
                   "(state %" PRIu64 "): %s", bf->info.backend, s,
                   strerror(err));
        errno = err;
        return -1;
    }

    bf->info.sectors = bf_be_u64(bf, "sectors", 0);
    bf->info.sector_size = bf_be_u64(bf, "sector-size", 512);
    bf->info.info = bf_be_u64(bf, "info", 0);
    bf->info.feature_flush = bf_be_u64(bf, "feature-flush-cache", 0);
    bf->info.feature_discard = bf_be_u64(bf, "feature-discard", 0);
    bf->info.discard_granularity = bf_be_u64(bf, "discard-granularity",
                                             bf->info.sector_size);
    bf->info.discard_alignment = bf_be_u64(bf, "discard-alignment", 0);
    bf->info.max_indirect_segments =
        MIN(bf_be_u64(bf, "feature-max-indirect-segments", 0), UINT32_MAX);
    if (bf->info.sector_size < 512 || bf->info.sector_size % 512) {
        xensim_log(XENSIM_LOG_ERR, "blkfront: bad sector-size %u",
                   bf->info.sector_size);
        errno = EINVAL;
        return -1;
    }
    if (bf_setup_segs(bf) < 0) {
        return -1;
    }
    if (bf_set_state(bf, XenbusStateConnected) < 0) {
        return -1;
    }
    bf->state = BF_STATE_CONNECTED;
    xensim_log(XENSIM_LOG_INFO, "blkfront: %s connected: %" PRIu64
               " sectors of %u, ring order %u (%u slots), %s%s%s, "
               "%u segments per request",
               bf->fe, bf->info.sectors, bf->info.sector_size,
               bf->info.ring_order, bf->info.ring_entries,
               bf_protocol_name(bf->o.protocol),
               bf->info.feature_flush ? ", flush" : "",
               bf->info.feature_discard ? ", discard" : "", bf->max_segs);
    return 0;
}

blkfront *blkfront_connect(xensim_domu *d, xensim_xs *xs,
                           const struct blkfront_opts *o)
{
    blkfront *bf;
    uint64_t nr_pages = xensim_domu_nr_pages(d), v;
    char *p, *be;
    int err;

    if (o->ring_order > BLKFRONT_MAX_RING_ORDER || o->ring_order < -1 ||
        o->protocol > BLKFRONT_PROTO_X86_64 ||
        o->max_indirect_segments < -1 ||
        o->max_indirect_segments > BLKFRONT_MAX_INDIRECT_SEGMENTS) {
        xensim_log(XENSIM_LOG_ERR, "blkfront: bad options (ring order %d, "
                   "protocol %d, max indirect segments %d)", o->ring_order,
                   o->protocol, o->max_indirect_segments);
        errno = EINVAL;
        return NULL;
    }

    bf = g_new0(blkfront, 1);
    bf->d = d;
    bf->xs = xs;
    bf->o = *o;
    bf->port = -1;
    bf->fe = g_strdup_printf("device/vbd/%u", o->devid);
    bf->gfn_ref = g_new0(uint32_t, nr_pages);
    bf->gfn_busy = g_new0(uint16_t, nr_pages);
    bf->granted_cap = XENSIM_GNTTAB_ENTRIES;
    bf->granted = g_new(uint32_t, bf->granted_cap);

    p = bf_fe_path(bf, "backend");
    be = xensim_xs_read(xs, XENSIM_XBT_NULL, p, NULL);
    g_free(p);
    if (!be) {
        err = errno;
        xensim_log(XENSIM_LOG_ERR, "blkfront: no %s/backend: %s", bf->fe,
                   strerror(err));
        goto fail;
    }
    g_strlcpy(bf->info.backend, be, sizeof(bf->info.backend));
    g_free(be);
    p = bf_fe_path(bf, "backend-id");
    if (xensim_xs_read_u64(xs, XENSIM_XBT_NULL, p, &v) < 0 ||
        v >= XENSIM_MAX_DOMAINS) {
        err = errno ? errno : EINVAL;
        xensim_log(XENSIM_LOG_ERR, "blkfront: bad %s", p);
        g_free(p);
        goto fail;
    }
    g_free(p);
    bf->info.backend_id = v;

    /*
     * A frontend of an earlier process may have left the device Closed
     * (clean close) or connected (it died): take the device through
     * Closing/Closed as a reloaded Linux driver would, then Initialising,
     * which sends QEMU's backend back to InitWait (xen-bus.c).
     */
    p = bf_be_path(bf, "state");
    if (xensim_xs_read_u64(xs, XENSIM_XBT_NULL, p, &v) == 0 &&
        v != XenbusStateInitialising && v != XenbusStateInitWait) {
        g_free(p);
        if (v != XenbusStateClosed &&
            blkfront_disconnect(bf, false) < 0) {
            err = errno;
            goto fail;
        }
        if (bf_set_state(bf, XenbusStateInitialising) < 0) {
            err = errno;
            goto fail;
        }
    } else {
        g_free(p);
    }

    if (bf_negotiate(bf) < 0) {
        err = errno;
        goto fail;
    }
    return bf;

fail:
    blkfront_close(bf);
    errno = err;
    return NULL;
}

int blkfront_disconnect(blkfront *bf, bool reconnect)
{
    uint64_t s;

    if (bf->state == BF_STATE_CONNECTED && bf->inflight) {
        errno = EBUSY;
        return -1;
    }
    /*
     * xenbus protocol (xen/io/xenbus.h): Closing, the backend follows to
     * Closing; Closed, the backend disconnects (unmaps the ring) and goes
     * Closed. Only then may the ring pages be revoked and reused.
     */
    if (bf_set_state(bf, XenbusStateClosing) < 0 ||
        bf_wait_backend(bf, (1u << XenbusStateClosing) |
                        (1u << XenbusStateClosed), &s) < 0 ||
        bf_set_state(bf, XenbusStateClosed) < 0 ||
        bf_wait_backend(bf, 1u << XenbusStateClosed, &s) < 0) {
        int err = errno;

        xensim_log(XENSIM_LOG_ERR, "blkfront: closing %s (backend state "
                   "%" PRIu64 "): %s", bf->fe, s, strerror(err));
        errno = err;
        return -1;
    }
    bf->state = BF_STATE_CLOSED;
    bf_free_ring(bf);
    if (!reconnect) {
        return 0;
    }
    if (bf_set_state(bf, XenbusStateInitialising) < 0) {
        return -1;
    }
    return bf_negotiate(bf);
}

void blkfront_close(blkfront *bf)
{
    if (!bf) {
        return;
    }
    if (bf->state == BF_STATE_CONNECTED) {
        blkfront_disconnect(bf, false);
    }
    if (bf->state == BF_STATE_CLOSED) {
        bf_free_ring(bf);
        bf_drop_data_grants(bf);
    }
    g_free(bf->fe);
    g_free(bf->gfn_ref);
    g_free(bf->gfn_busy);
    g_free(bf->granted);
    g_free(bf);
}

void blkfront_abandon(blkfront *bf)
{
    if (bf) {
        bf->state = BF_STATE_CLOSED;
        blkfront_close(bf);
    }
}

const struct blkfront_info *blkfront_info(const blkfront *bf)
{
    return &bf->info;
}

const struct blkfront_stats *blkfront_stats(const blkfront *bf)
{
    return &bf->stats;
}

int blkfront_fd(const blkfront *bf)
{
    return xensim_evtchn_fd(bf->evtchn);
}

/* --- data path ------------------------------------------------------------- */

uint32_t blkfront_io_nr_requests(const blkfront *bf,
                                 const struct blkfront_io *io)
{
    switch (io->op) {
    case BLKFRONT_OP_READ:
    case BLKFRONT_OP_WRITE:
        return bf_split_count((uintptr_t)io->buf, io->len, bf->max_segs);
    default:
        return 1;
    }
}

static int bf_check_io(blkfront *bf, const struct blkfront_io *io)
{
    uint64_t disk = bf->info.sectors * bf->info.sector_size;

    if (bf->state != BF_STATE_CONNECTED) {
        return -ENOTCONN;
    }
    switch (io->op) {
    case BLKFRONT_OP_READ:
    case BLKFRONT_OP_WRITE:
        if (!io->len || ((uintptr_t)io->buf & 511) ||
            xensim_domu_gfn(bf->d, io->buf) < XENSIM_FIRST_FREE_GFN ||
            xensim_domu_gfn(bf->d, (char *)io->buf + io->len - 1) < 0) {
            return -EINVAL;
        }
        break;
    case BLKFRONT_OP_FLUSH:
        return bf->info.feature_flush ? 0 : -EOPNOTSUPP;
    case BLKFRONT_OP_DISCARD:
        if (!bf->info.feature_discard) {
            return -EOPNOTSUPP;
        }
        break;
    default:
        return -EINVAL;
    }
    /* Overflow first, then bounds (as blkback's xen_vbd_translate). */
    if ((io->offset | io->len) & 511 || io->offset + io->len < io->offset ||
        io->offset + io->len > disk) {
        return -EINVAL;
    }
    return 0;
}

/* Undo the grants of a request that could not be put: @nseg data pages. */
static void bf_unput(blkfront *bf, struct bf_shadow *sh, unsigned int nseg)
{
    while (nseg--) {
        bf->gfn_busy[sh->gfn[nseg]]--;
    }
    bf_end_indirect(bf, sh);
}

/* Put the next request of @io on the ring; false if the ring is full. */
static bool bf_put_one(blkfront *bf, struct blkfront_io *io)
{
    union bf_request req;
    struct bf_shadow *sh;
    uint32_t id;

    if (RING_FULL(&bf->ring.native) || bf->free_id == BF_NO_ID) {
        return false;
    }
    id = bf->free_id;
    sh = &bf->shadow[id];

    memset(&req, 0, offsetof(blkif_request_t, seg));
    req.rw.id = id;
    req.rw.handle = bf->o.devid;
    req.rw.sector_number = (io->offset + io->next_off) >> 9;
    sh->nseg = 0;

    switch (io->op) {
    case BLKFRONT_OP_READ:
    case BLKFRONT_OP_WRITE: {
        struct blkif_request_segment *list;
        unsigned int i, n, nind;
        uint64_t covered;

        covered = bf_split_next((uintptr_t)io->buf, io->len, io->next_off,
                                bf->max_segs, bf->segs, &n);
        /* Written in place: the ring request, or the slot's indirect pages */
        list = bf_seg_list(&req, n, bf->ind_per_slot ?
                           bf->ind_pages + (size_t)id * bf->ind_per_slot *
                           XENSIM_PAGE_SIZE : NULL);
        for (i = 0; i < n; i++) {
            uint32_t gfn = xensim_domu_gfn(bf->d, (void *)bf->segs[i].page);
            int ref = bf_data_ref(bf, gfn);

            if (ref < 0) {
                /* Grant table full of busy pages: wait for completions. */
                bf_unput(bf, sh, i);
                return false;
            }
            bf->gfn_busy[gfn]++;
            sh->gfn[i] = gfn;
            list[i].gref = ref;
            list[i].first_sect = bf->segs[i].first_sect;
            list[i].last_sect = bf->segs[i].last_sect;
        }
        /* The backend only reads the segment list: read-only grants. */
        nind = bf_indirect_pages(n);
        for (sh->nind = 0; sh->nind < nind; sh->nind++) {
            int ref = bf_grant(bf, xensim_domu_gfn(bf->d, (uint8_t *)list +
                                   sh->nind * XENSIM_PAGE_SIZE), true);

            if (ref < 0) {
                bf_unput(bf, sh, n);
                return false;
            }
            sh->ind_ref[sh->nind] = ref;
        }
        sh->nseg = n;
        sh->op = io->op == BLKFRONT_OP_READ ? BLKIF_OP_READ : BLKIF_OP_WRITE;
        bf_set_rw(&req, sh->op, n, bf->o.devid, sh->ind_ref);
        bf->stats.indirect_requests += nind != 0;
        io->next_off += covered;
        break;
    }
    case BLKFRONT_OP_FLUSH:
        req.rw.operation = BLKIF_OP_FLUSH_DISKCACHE;
        req.rw.sector_number = 0;
        sh->op = req.rw.operation;
        break;
    case BLKFRONT_OP_DISCARD: {
        blkif_request_discard_t *rd = &req.discard;

        rd->operation = BLKIF_OP_DISCARD;
        sh->op = rd->operation;
        rd->flag = 0;
        rd->nr_sectors = io->len >> 9;
        break;
    }
    }

    bf->free_id = sh->next_free;
    sh->io = io;
    bf_store_request(&bf->ring, bf->o.protocol, bf->ring.native.req_prod_pvt,
                     &req.rw);
    bf->ring.native.req_prod_pvt++;
    io->reqs_unqueued--;
    bf->stats.requests++;
    if (bf->o.push_each) {
        blkfront_commit(bf);
    }
    return true;
}

/* Queue what fits of the waiting I/O. */
static void bf_fill_from_waiting(blkfront *bf)
{
    struct blkfront_io *io = bf->waiting;

    while (io && io->reqs_unqueued) {
        if (!bf_put_one(bf, io)) {
            return;
        }
    }
    bf->waiting = NULL;
}

int blkfront_queue(blkfront *bf, struct blkfront_io *io)
{
    int r = bf_check_io(bf, io);

    if (r < 0) {
        errno = -r;
        return -1;
    }
    if (bf->waiting) {
        errno = EAGAIN;
        return -1;
    }
    io->error = 0;
    io->next_off = 0;
    io->next = NULL;
    io->reqs_left = io->reqs_unqueued = blkfront_io_nr_requests(bf, io);
    bf->inflight++;
    bf->stats.ios++;
    bf->waiting = io;
    bf_fill_from_waiting(bf);
    return 0;
}

bool blkfront_busy(const blkfront *bf)
{
    return bf->waiting != NULL;
}

int blkfront_commit(blkfront *bf)
{
    int notify;

    if (bf->ring.native.req_prod_pvt == bf->ring.native.sring->req_prod) {
        return 0;
    }
    RING_PUSH_REQUESTS_AND_CHECK_NOTIFY(&bf->ring.native, notify);
    bf->stats.commits++;
    if (notify) {
        xensim_evtchn_notify(bf->evtchn, bf->port);
        bf->stats.notifies++;
    }
    return notify;
}

static void bf_complete_req(blkfront *bf, uint64_t id, uint8_t op,
                            int16_t status)
{
    struct bf_shadow *sh;
    struct blkfront_io *io;
    unsigned int i;

    if (id >= bf->info.ring_entries || !bf->shadow[id].io) {
        xensim_log(XENSIM_LOG_WARN, "blkfront: response with unknown id "
                   "0x%" PRIx64, id);
        return;
    }
    sh = &bf->shadow[id];
    io = sh->io;
    /* Linux blkfront (since 5.14) takes such a response as a broken ring */
    if (op != sh->op) {
        xensim_log(XENSIM_LOG_WARN, "blkfront: response to id 0x%" PRIx64
                   " has operation %u, not %u", id, op, sh->op);
        bf->stats.wrong_op_responses++;
        status = BLKIF_RSP_ERROR;
    }
    for (i = 0; i < sh->nseg; i++) {
        bf->gfn_busy[sh->gfn[i]]--;
    }
    bf_end_indirect(bf, sh);
    sh->io = NULL;
    sh->next_free = bf->free_id;
    bf->free_id = id;

    if (status != BLKIF_RSP_OKAY && !io->error) {
        io->error = status == BLKIF_RSP_EOPNOTSUPP ? -EOPNOTSUPP : -EIO;
    }
    if (--io->reqs_left == 0) {
        if (bf->done_tail) {
            bf->done_tail->next = io;
        } else {
            bf->done_head = io;
        }
        bf->done_tail = io;
    }
}

unsigned int blkfront_reap(blkfront *bf, struct blkfront_io **done,
                           unsigned int max)
{
    unsigned int n = 0;
    bool refilled = false;
    int more;

    if (!bf->shadow) {
        return 0;
    }
    do {
        RING_IDX rp = bf->ring.native.sring->rsp_prod, i;

        xen_rmb();              /* rsp_prod before the responses it covers */
        for (i = bf->ring.native.rsp_cons; i != rp; i++) {
            uint64_t id;
            uint8_t op;
            int16_t status;

            bf_load_response(&bf->ring, bf->o.protocol, i, &id, &op, &status);
            bf->stats.responses++;
            bf_complete_req(bf, id, op, status);
        }
        bf->ring.native.rsp_cons = rp;
        if (bf->waiting) {
            bf_fill_from_waiting(bf);
            refilled = true;
        }
        RING_FINAL_CHECK_FOR_RESPONSES(&bf->ring.native, more);
    } while (more);
    if (refilled) {
        blkfront_commit(bf);
    }

    while (n < max && bf->done_head) {
        struct blkfront_io *io = bf->done_head;

        bf->done_head = io->next;
        if (!bf->done_head) {
            bf->done_tail = NULL;
        }
        io->next = NULL;
        done[n++] = io;
        bf->inflight--;
    }
    return n;
}

unsigned int blkfront_inflight(const blkfront *bf)
{
    return bf->inflight;
}

int blkfront_wait(blkfront *bf, int timeout_ms)
{
    int64_t deadline = timeout_ms < 0 ? -1 : g_get_monotonic_time() +
                                              (int64_t)timeout_ms * 1000;

    for (;;) {
        int port, r, left = -1;

        if (bf->done_head ||
            RING_HAS_UNCONSUMED_RESPONSES(&bf->ring.native)) {
            return 0;
        }
        if (deadline >= 0) {
            int64_t us = deadline - g_get_monotonic_time();

            if (us <= 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            left = (us + 999) / 1000;
        }
        if (bf->o.poll) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        struct pollfd pfd = { .fd = xensim_evtchn_fd(bf->evtchn),
                              .events = POLLIN };
        r = poll(&pfd, 1, left);
        if (r < 0 && errno != EINTR) {
            return -1;
        }
        while ((port = xensim_evtchn_pending(bf->evtchn)) >= 0) {
            bf->stats.events++;
            xensim_evtchn_unmask(bf->evtchn, port);
        }
    }
}

int blkfront_io_sync(blkfront *bf, enum blkfront_op op, uint64_t offset,
                     void *buf, uint64_t len)
{
    struct blkfront_io io = { .op = op, .offset = offset, .len = len,
                              .buf = buf };
    struct blkfront_io *done;

    if (blkfront_queue(bf, &io) < 0) {
        return -1;
    }
    blkfront_commit(bf);
    for (;;) {
        if (blkfront_reap(bf, &done, 1)) {
            g_assert(done == &io);      /* the only I/O in flight */
            break;
        }
        if (blkfront_wait(bf, bf_timeout(bf)) < 0) {
            return -1;                  /* io still in flight */
        }
    }
    if (io.error) {
        errno = -io.error;
        return -1;
    }
    return 0;
}

void *blkfront_buf_alloc(blkfront *bf, size_t bytes)
{
    return xensim_domu_alloc_pages(bf->d, (bytes + XENSIM_PAGE_SIZE - 1) /
                                   XENSIM_PAGE_SIZE);
}

void blkfront_buf_free(blkfront *bf, void *buf, size_t bytes)
{
    xensim_domu_free_pages(bf->d, buf, (bytes + XENSIM_PAGE_SIZE - 1) /
                           XENSIM_PAGE_SIZE);
}

/* --- low level ------------------------------------------------------------- */

int blkfront_raw_put(blkfront *bf, const blkif_request_t *req)
{
    if (!bf->shadow || RING_FULL(&bf->ring.native)) {
        errno = EAGAIN;
        return -1;
    }
    bf_store_request(&bf->ring, bf->o.protocol, bf->ring.native.req_prod_pvt,
                     req);
    bf->ring.native.req_prod_pvt++;
    bf->stats.requests++;
    return 0;
}

void blkfront_raw_push(blkfront *bf)
{
    xen_wmb();                  /* requests before the producer index */
    bf->ring.native.sring->req_prod = bf->ring.native.req_prod_pvt;
}

int blkfront_raw_kick(blkfront *bf)
{
    bf->stats.notifies++;
    return xensim_evtchn_notify(bf->evtchn, bf->port);
}

void blkfront_ring_state(const blkfront *bf, struct blkfront_ring_state *s)
{
    const blkif_sring_t *sr = bf->ring.native.sring;

    s->req_prod = DOMU_READ_ONCE(sr->req_prod);
    s->req_event = DOMU_READ_ONCE(sr->req_event);
    s->rsp_prod = DOMU_READ_ONCE(sr->rsp_prod);
    s->rsp_event = DOMU_READ_ONCE(sr->rsp_event);
    s->req_prod_pvt = bf->ring.native.req_prod_pvt;
    s->rsp_cons = bf->ring.native.rsp_cons;
}

void blkfront_raw_set_rsp_event(blkfront *bf, RING_IDX rsp_event)
{
    bf->ring.native.sring->rsp_event = rsp_event;
    xen_mb();
}

int blkfront_port(const blkfront *bf)
{
    return bf->port;
}

int blkfront_raw_response(blkfront *bf, uint64_t *id, int16_t *status)
{
    uint8_t op;

    if (!RING_HAS_UNCONSUMED_RESPONSES(&bf->ring.native)) {
        errno = EAGAIN;
        return -1;
    }
    xen_rmb();
    bf_load_response(&bf->ring, bf->o.protocol, bf->ring.native.rsp_cons,
                     id, &op, status);
    bf->ring.native.rsp_cons++;
    bf->stats.responses++;
    return 0;
}
