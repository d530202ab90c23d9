/*
 * xenblk-fuzz: indirect requests (BLKIF_OP_INDIRECT, blkif.h).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Expectations depend on what the backend offered at connect (F.ind_adv,
 * its feature-max-indirect-segments):
 *  - offered: a malformed indirect request gets BLKIF_RSP_ERROR with its
 *    id and its indirect_op as the response's operation (blkback's, and
 *    what Linux blkfront checks), touches neither the disk nor a
 *    read's pages; a valid one (up to IND_MAX_SEGS segments) is served
 *    and its data checked against the model;
 *  - not offered (pristine QEMU, or indirect-requests=off): every
 *    indirect request is an unknown operation, BLKIF_RSP_ERROR echoing
 *    BLKIF_OP_INDIRECT, and no I/O is done at all.
 * Then settle(): QEMU alive, the ring serves, the disk as modelled.
 */
#include <inttypes.h>
#include <string.h>

#include "fuzz-int.h"

/* put() sets the id through blkif_request_t: the same bytes here. */
G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, id) ==
                offsetof(blkif_request_t, id));
G_STATIC_ASSERT(sizeof(blkif_request_indirect_t) <= sizeof(blkif_request_t));

#define SEGS_PER_PAGE (XENSIM_PAGE_SIZE / sizeof(struct blkif_request_segment))

/* The operation the response to indirect request @r must have */
static void want_op(Pend *p, const blkif_request_indirect_t *r)
{
    p->check_op = true;
    p->want_op = F.ind_adv ? r->indirect_op : BLKIF_OP_INDIRECT;
}

bool grant_indirect(void)
{
    unsigned int i;

    F.ind = xensim_domu_alloc_pages(F.dom, IND_PAGES);
    if (!F.ind) {
        return false;
    }
    for (i = 0; i < IND_PAGES; i++) {
        F.ind_ref[i] = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(
                           F.dom, F.ind + i * XENSIM_PAGE_SIZE), true);
        if (F.ind_ref[i] < 0) {
            return false;
        }
    }
    return true;
}

/* An indirect request under construction: header and segment list. */
typedef struct Ind {
    union {
        blkif_request_t rw;
        blkif_request_indirect_t ind;
    } r;
    struct blkif_request_segment *seg;  /* in the batch's indirect pages */
    unsigned int nseg;                  /* entries of seg[] filled */
    uint8_t *page[IND_MAX_SEGS];        /* data pages (valid segments) */
} Ind;

/*
 * Start an indirect @iop request of @nseg segments (the header's count)
 * at @sector, its list filled with whole pool pages for the first
 * MIN(@nseg, IND_MAX_SEGS) entries, on fresh indirect pages of the batch.
 * False if the batch has no indirect pages left.
 */
static bool ind_new(Ind *x, uint8_t iop, unsigned int nseg, uint64_t sector)
{
    unsigned int i, npages = MAX(1u, (MIN(nseg, IND_MAX_SEGS) +
                                      SEGS_PER_PAGE - 1) / SEGS_PER_PAGE);

    /* a third of the pool: random mode's plain requests need the rest */
    if (F.ind_next + npages > IND_PAGES ||
        F.pool_next + MIN(nseg, IND_MAX_SEGS) > POOL_PAGES / 3) {
        return false;
    }
    memset(x, 0, sizeof(*x));
    x->r.ind.operation = BLKIF_OP_INDIRECT;
    x->r.ind.indirect_op = iop;
    x->r.ind.nr_segments = nseg;
    x->r.ind.sector_number = sector;
    x->r.ind.handle = 0;
    x->seg = (void *)(F.ind + F.ind_next * XENSIM_PAGE_SIZE);
    for (i = 0; i < npages; i++) {
        x->r.ind.indirect_grefs[i] = F.ind_ref[F.ind_next++];
    }
    x->nseg = MIN(nseg, IND_MAX_SEGS);
    memset(x->seg, 0, npages * XENSIM_PAGE_SIZE);
    for (i = 0; i < x->nseg; i++) {
        int ref;

        x->page[i] = pool_page(&ref);
        x->seg[i].gref = ref;
        x->seg[i].first_sect = 0;
        x->seg[i].last_sect = 7;
        if (iop == BLKIF_OP_READ) {
            memset(x->page[i], 0x5a, XENSIM_PAGE_SIZE);
        } else {
            fill_rand(x->page[i], XENSIM_PAGE_SIZE);
        }
    }
    return true;
}

/* Random fragments for a valid request; returns its length in sectors. */
static unsigned int ind_fragments(Ind *x)
{
    unsigned int i, n = 0;

    for (i = 0; i < x->nseg; i++) {
        x->seg[i].first_sect = rnd_below(8);
        x->seg[i].last_sect = x->seg[i].first_sect +
                              rnd_below(8 - x->seg[i].first_sect);
        n += x->seg[i].last_sect - x->seg[i].first_sect + 1;
    }
    return n;
}

/*
 * Put a request that must fail: ERROR echoing BLKIF_OP_INDIRECT, a read's
 * pages untouched, the disk (canary) unchanged.
 */
static Pend *ind_bad(Ind *x)
{
    Pend *p = put(&x->r.rw, ST_ERR);
    unsigned int i;

    if (p) {
        want_op(p, &x->r.ind);
        if (x->r.ind.indirect_op == BLKIF_OP_READ) {
            p->untouched = true;
            p->nseg = x->nseg;
            for (i = 0; i < x->nseg; i++) {
                p->page[i] = x->page[i];
            }
        }
    }
    return p;
}

/*
 * Put a well-formed request (at a scratch range when @valid_range, its
 * sector already set otherwise): served and checked when the backend
 * offers indirect requests of this size, else must fail untouched.
 */
static Pend *ind_good(Ind *x, unsigned int expect)
{
    bool served = F.ind_adv && x->r.ind.nr_segments <= F.ind_adv;
    Pend *p;
    unsigned int i;

    if (!served) {
        return ind_bad(x);
    }
    p = put(&x->r.rw, expect);
    if (p) {
        want_op(p, &x->r.ind);
        p->op = x->r.ind.indirect_op;   /* apply() reads it as a r/w */
        p->sector = x->r.ind.sector_number;
        p->nseg = x->nseg;
        p->check_data = true;
        for (i = 0; i < x->nseg; i++) {
            p->page[i] = x->page[i];
            p->first[i] = x->seg[i].first_sect;
            p->last[i] = x->seg[i].last_sect;
        }
    }
    return p;
}

/* A valid indirect read or write of @nseg segments at a scratch range. */
static Pend *ind_valid(uint8_t iop, unsigned int nseg)
{
    Ind x;
    uint64_t s;

    if (!ind_new(&x, iop, nseg, 0)) {
        return NULL;
    }
    if (!pick_range(ind_fragments(&x), iop == BLKIF_OP_WRITE, &s)) {
        return NULL;
    }
    x.r.ind.sector_number = s;
    return ind_good(&x, ST_OK);
}

/* Served (and checked) when offered; an unknown operation otherwise. */
void add_ind_valid(void)
{
    unsigned int max = F.ind_adv ? MIN(F.ind_adv, IND_MAX_SEGS)
                                 : IND_MAX_SEGS;

    ind_valid(BLKIF_OP_WRITE, 12);
    ind_valid(BLKIF_OP_READ, 12);
    ind_valid(BLKIF_OP_WRITE, max);
    ind_valid(BLKIF_OP_READ, max);
    ind_valid(BLKIF_OP_WRITE, 12 + rnd_below(max - 11));
    ind_valid(BLKIF_OP_READ, 12 + rnd_below(max - 11));
    /* 11 or fewer: blkback serves them, a backend may refuse them */
    {
        Ind x;
        uint64_t s;

        if (ind_new(&x, BLKIF_OP_WRITE, 1 + rnd_below(11), 0) &&
            pick_range(ind_fragments(&x), true, &s)) {
            x.r.ind.sector_number = s;
            ind_good(&x, ST_OK | ST_ERR);
        }
    }
}

/* indirect_grefs[] entries that are not ours to give. */
void add_ind_bad_grant(void)
{
    static const uint32_t wild[] = {
        0, XENSIM_GNTTAB_ENTRIES, 0x7fffffff, 0xffffffff,
    };
    unsigned int i;
    Ind x;

    for (i = 0; i < G_N_ELEMENTS(wild) + 3; i++) {
        uint8_t op = i & 1 ? BLKIF_OP_READ : BLKIF_OP_WRITE;

        if (!ind_new(&x, op, 12 + rnd_below(20), canary_sector())) {
            return;
        }
        if (i < G_N_ELEMENTS(wild)) {
            x.r.ind.indirect_grefs[0] = wild[i];
        } else if (i == G_N_ELEMENTS(wild)) {
            x.r.ind.indirect_grefs[0] = free_ref();
        } else if (i == G_N_ELEMENTS(wild) + 1) {
            x.r.ind.indirect_grefs[0] = F.other_ref;
        } else {
            /* 600 segments: the second page's grant is not granted */
            x.r.ind.nr_segments = 600;
            x.r.ind.indirect_grefs[1] = free_ref();
        }
        ind_bad(&x);
    }
    /* a segment's data grant is bad: the list itself is fine */
    if (ind_new(&x, BLKIF_OP_WRITE, 20, canary_sector())) {
        x.seg[15].gref = free_ref();
        ind_bad(&x);
    }
}

/* nr_segments of 0, above the advertised limit, above the protocol's. */
void add_ind_nr_segments(void)
{
    const unsigned int n[] = {
        0, F.ind_adv + 1, BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST *
        SEGS_PER_PAGE + 1, 0xffff,
    };
    unsigned int i;
    Ind x;

    for (i = 0; i < G_N_ELEMENTS(n) * 2; i++) {
        if (!ind_new(&x, i & 1 ? BLKIF_OP_READ : BLKIF_OP_WRITE, n[i / 2],
                     canary_sector())) {
            return;
        }
        ind_bad(&x);
    }
}

/* A segment's sector range outside its page, deep in the list. */
void add_ind_bad_sects(void)
{
    static const uint8_t bad[][2] = { { 5, 4 }, { 7, 0 }, { 0, 8 },
                                      { 200, 255 } };
    unsigned int i;
    Ind x;

    for (i = 0; i < G_N_ELEMENTS(bad) * 2; i++) {
        unsigned int k;

        if (!ind_new(&x, i & 1 ? BLKIF_OP_READ : BLKIF_OP_WRITE,
                     12 + rnd_below(20), canary_sector())) {
            return;
        }
        k = 11 + rnd_below(x.nseg - 11);      /* past the inline 11 */
        x.seg[k].first_sect = bad[i / 2][0];
        x.seg[k].last_sect = bad[i / 2][1];
        ind_bad(&x);
    }
}

/* indirect_op other than READ/WRITE, the list otherwise fine. */
void add_ind_op(void)
{
    static const uint8_t ops[] = {
        BLKIF_OP_FLUSH_DISKCACHE, BLKIF_OP_DISCARD, BLKIF_OP_INDIRECT,
        BLKIF_OP_WRITE_BARRIER, 4, 7, 0xff,
    };
    unsigned int i;
    Ind x;

    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        if (!ind_new(&x, ops[i], 12 + rnd_below(20), canary_sector())) {
            return;
        }
        ind_bad(&x);
    }
}

/* --- the list changed under the backend ---------------------------------- */

/*
 * One segment of the list flips between two values with single 8-byte
 * stores, so that a backend copying the list once sees exactly list A or
 * list B (a wider flip could be caught half-written: a third list).
 */
static struct {
    uint64_t *seg;
    uint64_t a, b;
} flip;

/* Right after the kick: swap the segment A <-> B until the response. */
static void flip_during(void)
{
    struct blkfront_ring_state rs;
    unsigned int i;

    for (i = 0; i < 20000; i++) {
        __atomic_store_n(flip.seg, i & 1 ? flip.a : flip.b, __ATOMIC_RELAXED);
        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod != rs.rsp_cons) {
            break;
        }
    }
}

static bool page_is(const uint8_t *disk, const uint8_t *page)
{
    return !memcmp(disk, page, XENSIM_PAGE_SIZE);
}

static bool untouched(const uint8_t *page)
{
    unsigned int j;

    for (j = 0; j < XENSIM_PAGE_SIZE; j++) {
        if (page[j] != 0x5a) {
            return false;
        }
    }
    return true;
}

/*
 * One request whose segment k flips between page A and page B (valid
 * both), or between A and a segment out of its page (@b_bad: sectors
 * 200..255 of an ungranted ref) while the backend may be reading the
 * list. The backend must copy the list once and validate its copy: OKAY
 * with segment k's data from A or from B (a write on disk, a read in
 * that page, the other page untouched), or ERROR; never a mix, a crash
 * or an access outside the pages.
 */
static void ind_flip_one(uint8_t iop, bool b_bad)
{
    const unsigned int n = 16, k = 13;
    struct blkif_request_segment sb;
    g_autofree uint8_t *old = NULL;
    uint8_t *pb;
    unsigned int i;
    bool ok = true;
    int ref;
    Ind x;
    Pend *p;
    uint64_t s;

    batch_begin();
    if (!ind_new(&x, iop, n, 0) || !pick_range(n * 8, true, &s)) {
        return;
    }
    x.r.ind.sector_number = s;
    pb = pool_page(&ref);
    if (iop == BLKIF_OP_READ) {
        memset(pb, 0x5a, XENSIM_PAGE_SIZE);
    } else {
        fill_rand(pb, XENSIM_PAGE_SIZE);
    }
    sb = x.seg[k];
    sb.gref = ref;
    if (b_bad) {
        sb.gref = free_ref();
        sb.first_sect = 200;
        sb.last_sect = 255;
    }
    G_STATIC_ASSERT(sizeof(sb) == sizeof(uint64_t));
    flip.seg = (uint64_t *)&x.seg[k];
    memcpy(&flip.a, &x.seg[k], 8);
    memcpy(&flip.b, &sb, 8);
    p = put(&x.r.rw, F.ind_adv >= n ? ST_OK | ST_ERR : ST_ERR);
    if (!p) {
        return;
    }
    want_op(p, &x.r.ind);
    F.during = flip_during;
    old = g_memdup2(F.model + s * SECT, n * XENSIM_PAGE_SIZE);
    memset(F.known + s, 0, n * 8);      /* checked below */
    if (!batch_run(NULL, 0) || !p->got) {
        return;
    }
    if (blkfront_io_sync(F.bf, BLKFRONT_OP_READ, s * SECT, F.vbuf,
                         n * XENSIM_PAGE_SIZE) < 0) {
        fail("reading back the flipped request's range failed");
        return;
    }
    if (p->status == BLKIF_RSP_OKAY) {
        for (i = 0; i < n; i++) {
            const uint8_t *d = F.vbuf + i * XENSIM_PAGE_SIZE;

            if (i == k) {
                ok &= iop == BLKIF_OP_WRITE ?
                      page_is(d, x.page[k]) || (!b_bad && page_is(d, pb)) :
                      (page_is(d, x.page[k]) && untouched(pb)) ||
                      (!b_bad && page_is(d, pb) && untouched(x.page[k]));
            } else {
                ok &= page_is(d, x.page[i]);
            }
        }
        if (!ok) {
            fail("indirect %s whose list changed under the backend: "
                 "neither list's data (the backend read the list twice?)",
                 iop == BLKIF_OP_WRITE ? "write" : "read");
        }
    } else if (iop == BLKIF_OP_WRITE && !F.ind_adv &&
               memcmp(F.vbuf, old, n * XENSIM_PAGE_SIZE)) {
        fail("indirect write refused as an unknown operation changed the "
             "disk");
    }
    /* the model takes what is there now */
    memcpy(F.model + s * SECT, F.vbuf, n * XENSIM_PAGE_SIZE);
    memset(F.known + s, 1, n * 8);
}

void run_ind_flip(void)
{
    ind_flip_one(BLKIF_OP_WRITE, false);
    ind_flip_one(BLKIF_OP_READ, false);
    ind_flip_one(BLKIF_OP_WRITE, true);
    ind_flip_one(BLKIF_OP_READ, true);
}
