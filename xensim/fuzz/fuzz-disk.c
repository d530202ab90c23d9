/*
 * xenblk-fuzz: the disk model (the whole disk in memory, the scratch and
 * canary ranges requests go to, completions checked against it).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fuzz-int.h"

/* --- the disk model ------------------------------------------------------ */

/* Read the whole disk and compare it with the model where it is known. */
bool verify_disk(void)
{
    uint64_t s, bad = 0, first = 0;

    F.verifies++;
    memset(F.vbuf, 0xee, DISK_BYTES);
    if (blkfront_io_sync(F.bf, BLKFRONT_OP_READ, 0, F.vbuf, DISK_BYTES) < 0) {
        fail("reading the disk back: %s", strerror(errno));
        return false;
    }
    for (s = 0; s < DISK_SECTS; s++) {
        if (F.known[s] && memcmp(F.vbuf + s * SECT, F.model + s * SECT,
                                 SECT)) {
            if (!bad++) {
                first = s;
            }
        }
    }
    if (bad) {
        fail("disk corrupted: %" PRIu64 " sectors differ from the model, "
             "first %" PRIu64 " (%s)", bad, first,
             first < CANARY_SECTS || first >= DISK_SECTS - CANARY_SECTS ?
             "canary" : "scratch");
        /* Resynchronise so that one corruption is reported once. */
        memcpy(F.model, F.vbuf, DISK_BYTES);
        memset(F.known, 1, DISK_SECTS);
        return false;
    }
    return true;
}

/* Fill the disk with a random pattern through the regular frontend. */
bool init_disk(void)
{
    fill_rand(F.model, DISK_BYTES);
    memset(F.known, 1, DISK_SECTS);
    memcpy(F.vbuf, F.model, DISK_BYTES);
    if (blkfront_io_sync(F.bf, BLKFRONT_OP_WRITE, 0, F.vbuf, DISK_BYTES) < 0) {
        fail("initial disk write: %s", strerror(errno));
        return false;
    }
    return verify_disk();
}

/* --- requests checked by the model --------------------------------------- */

/* Does [s, e) overlap a valid range of the batch (a write, or any if w)? */
static bool overlaps(uint64_t s, uint64_t e, bool w)
{
    unsigned int i;

    for (i = 0; i < F.nranges; i++) {
        if (s < F.re[i] && F.rs[i] < e && (w || F.rw[i])) {
            return true;
        }
    }
    return false;
}

/* A scratch range of @n sectors that no write of the batch touches. */
bool pick_range(unsigned int n, bool w, uint64_t *s)
{
    int tries;

    for (tries = 0; tries < 16; tries++) {
        uint64_t lo = CANARY_SECTS, hi = DISK_SECTS - CANARY_SECTS - n;

        *s = lo + rnd_below(hi - lo + 1);
        if (!overlaps(*s, *s + n, w)) {
            g_assert(F.nranges < MAX_BATCH);
            F.rs[F.nranges] = *s;
            F.re[F.nranges] = *s + n;
            F.rw[F.nranges++] = w;
            return true;
        }
    }
    return false;
}

/*
 * Fill @req's segments with random page fragments of the pool for a
 * valid read or write; @ro puts the read-only granted page in a write's
 * first segment. Returns the request's length in sectors.
 */
static unsigned int valid_segs(blkif_request_t *req, uint8_t **page, bool ro)
{
    unsigned int i, n = 0;

    for (i = 0; i < req->nr_segments; i++) {
        int ref;

        req->seg[i].first_sect = rnd_below(8);
        req->seg[i].last_sect = req->seg[i].first_sect +
                                rnd_below(8 - req->seg[i].first_sect);
        if (ro && i == 0 && req->operation == BLKIF_OP_WRITE) {
            page[i] = F.ro_wpage;
            ref = F.ro_wref;
        } else {
            page[i] = pool_page(&ref);
        }
        req->seg[i].gref = ref;
        n += req->seg[i].last_sect - req->seg[i].first_sect + 1;
        if (req->operation == BLKIF_OP_WRITE) {
            fill_rand(page[i], XENSIM_PAGE_SIZE);
        } else {
            memset(page[i], 0x5a, XENSIM_PAGE_SIZE);
        }
    }
    return n;
}

/* Put a valid request made by valid_segs(), its data checked on return. */
static Pend *valid_put(blkif_request_t *req, uint8_t **page)
{
    Pend *p = put(req, ST_OK);
    unsigned int i;

    if (p) {
        p->sector = req->sector_number;
        p->nseg = req->nr_segments;
        p->check_data = true;
        for (i = 0; i < p->nseg; i++) {
            p->page[i] = page[i];
            p->first[i] = req->seg[i].first_sect;
            p->last[i] = req->seg[i].last_sect;
        }
    }
    return p;
}

/* A valid read or write of @nseg fragments at a free scratch range. */
Pend *valid_rw(uint8_t op, unsigned int nseg, bool ro)
{
    blkif_request_t req = { .operation = op, .nr_segments = nseg };
    uint8_t *page[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    unsigned int n = valid_segs(&req, page, ro);
    uint64_t s;

    if (!pick_range(n, op != BLKIF_OP_READ, &s)) {
        return NULL;
    }
    req.sector_number = s;
    return valid_put(&req, page);
}

/*
 * @k (at most RUN_MAX) valid requests of @op, adjacent on the disk and
 * in ring order: the fork's backend merges them into one I/O. The run's
 * range keeps one free sector on each side, so that no other request of
 * the batch can join the merge. Fills @p (may be NULL) with the requests;
 * returns how many were put.
 */
unsigned int valid_run(uint8_t op, unsigned int k, Pend **p)
{
    blkif_request_t req[RUN_MAX];
    uint8_t *page[RUN_MAX][BLKIF_MAX_SEGMENTS_PER_REQUEST];
    unsigned int n[RUN_MAX], total = 0, j, put = 0;
    uint64_t s;

    k = MIN(MIN(k, RUN_MAX), ring_free());
    for (j = 0; j < k; j++) {
        req[j] = (blkif_request_t){ .operation = op,
                                    .nr_segments = 1 + rnd_below(11) };
        n[j] = valid_segs(&req[j], page[j], false);
        total += n[j];
    }
    if (!k || !pick_range(total + 2, op != BLKIF_OP_READ, &s)) {
        return 0;
    }
    s++;
    for (j = 0; j < k; j++) {
        Pend *q;

        req[j].sector_number = s;
        s += n[j];
        q = valid_put(&req[j], page[j]);
        if (!q) {
            break;
        }
        if (p) {
            p[put] = q;
        }
        put++;
    }
    return put;
}

/*
 * A malformed read or write at the canary: it must fail and change nothing
 * on the disk. Unless @io_ok (the request is well formed up to its grants,
 * which fail one by one as in Xen), the backend must not even do the I/O:
 * a read's pages stay as they were.
 */
Pend *bad_rw_io(blkif_request_t *req, unsigned int expect, bool io_ok)
{
    unsigned int i, n = MIN(req->nr_segments, BLKIF_MAX_SEGMENTS_PER_REQUEST);
    Pend *p;
    uint8_t *page[BLKIF_MAX_SEGMENTS_PER_REQUEST] = { 0 };

    for (i = 0; i < n; i++) {
        if (req->seg[i].gref == FILL_REF) {
            int ref;

            page[i] = pool_page(&ref);
            req->seg[i].gref = ref;
            if (req->operation == BLKIF_OP_WRITE) {
                fill_rand(page[i], XENSIM_PAGE_SIZE);
            } else {
                memset(page[i], 0x5a, XENSIM_PAGE_SIZE);
            }
        }
    }
    p = put(req, expect);
    if (p && req->operation == BLKIF_OP_READ && expect == ST_ERR && !io_ok) {
        p->untouched = true;
        p->nseg = n;
        memcpy(p->page, page, sizeof(page));
    }
    return p;
}

Pend *bad_rw(blkif_request_t *req, unsigned int expect)
{
    return bad_rw_io(req, expect, false);
}

static void check_pages(Pend *p, const char *what)
{
    unsigned int i;

    for (i = 0; i < p->nseg; i++) {
        unsigned int j;

        for (j = 0; j < XENSIM_PAGE_SIZE; j++) {
            if (p->page[i][j] != 0x5a) {
                fail("%s request 0x%" PRIx64 " failed but wrote the guest's "
                     "page %u at byte %u", what, p->id, i, j);
                return;
            }
        }
    }
}

/* Apply a completed valid read/write to the model, or check a read. */
void apply(Pend *p)
{
    uint64_t s = p->sector;
    unsigned int i, k;

    if (p->discard) {
        if (p->status == BLKIF_RSP_OKAY) {
            memset(F.known + p->sector, 0, p->discard_sects);
        }
        return;
    }
    if (!p->check_data) {
        if (p->untouched) {
            check_pages(p, "malformed read");
        }
        return;
    }
    if (p->status != BLKIF_RSP_OKAY) {
        if (p->op == BLKIF_OP_WRITE) {
            /* a failed write leaves each sector old or new */
            for (i = 0; i < p->nseg; i++) {
                unsigned int n = p->last[i] - p->first[i] + 1;

                memset(F.known + s, 0, n);
                s += n;
            }
            return;
        }
        if (p->op == BLKIF_OP_READ && p->revoked) {
            /* each page untouched, or the full right data */
            for (i = 0; i < p->nseg; i++) {
                uint8_t *d = p->page[i] + p->first[i] * SECT;
                unsigned int n = p->last[i] - p->first[i] + 1;
                bool pristine = true;

                for (k = 0; k < n * SECT; k++) {
                    pristine &= d[k] == 0x5a;
                }
                for (k = 0; !pristine && k < n; k++) {
                    if (F.known[s + k] &&
                        memcmp(d + k * SECT, F.model + (s + k) * SECT,
                               SECT)) {
                        fail("revoked read 0x%" PRIx64 ": segment %u neither "
                             "untouched nor the disk's data", p->id, i);
                        break;
                    }
                }
                s += n;
            }
        }
        return;
    }
    for (i = 0; i < p->nseg; i++) {
        uint8_t *d = p->page[i] + p->first[i] * SECT;
        unsigned int n = p->last[i] - p->first[i] + 1;

        if (p->op == BLKIF_OP_WRITE) {
            memcpy(F.model + s * SECT, d, n * SECT);
            memset(F.known + s, 1, n);
        } else {
            for (k = 0; k < n; k++) {
                if (F.known[s + k] &&
                    memcmp(d + k * SECT, F.model + (s + k) * SECT, SECT)) {
                    fail("read 0x%" PRIx64 " (sector %" PRIu64 ", segment %u)"
                         " returned data that is not on the disk", p->id,
                         s + k, i);
                    return;
                }
            }
        }
        s += n;
    }
}
