/*
 * xenblk-fuzz: the directed cases (malformed requests, ring abuse,
 * negotiation garbage) and their run.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <xen/io/xenbus.h>

#include "fuzz-int.h"

/* --- cases --------------------------------------------------------------- */

blkif_request_t rw_req(uint8_t op, uint64_t sector, unsigned int nseg)
{
    blkif_request_t r = { .operation = op, .nr_segments = nseg,
                          .sector_number = sector };
    unsigned int i;

    for (i = 0; i < MIN(nseg, BLKIF_MAX_SEGMENTS_PER_REQUEST); i++) {
        r.seg[i].gref = FILL_REF;
        r.seg[i].first_sect = 0;
        r.seg[i].last_sect = 7;
    }
    return r;
}

uint64_t canary_sector(void)
{
    return rnd_below(CANARY_SECTS - 88);
}

void add_nr_segments(void)
{
    blkif_request_t r;

    valid_rw(BLKIF_OP_WRITE, 11, false);        /* the maximum is fine */
    valid_rw(BLKIF_OP_READ, 11, false);
    r = rw_req(BLKIF_OP_WRITE, canary_sector(), 12);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 12);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, canary_sector(), 255);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 255);
    bad_rw(&r, ST_ERR);
    /*
     * No segment: blkif.h has no use for it outside a flush, Linux blkback
     * fails it; an implementation may also complete it as a no-op.
     */
    r = rw_req(BLKIF_OP_WRITE, canary_sector(), 0);
    put(&r, ST_OK | ST_ERR);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 0);
    put(&r, ST_OK | ST_ERR);
    r = rw_req(BLKIF_OP_FLUSH_DISKCACHE, 0, 0);
    put(&r, ST_OK);
}

void add_bad_sects(void)
{
    blkif_request_t r;
    int i;

    for (i = 0; i < 2; i++) {
        uint8_t op = i ? BLKIF_OP_READ : BLKIF_OP_WRITE;

        r = rw_req(op, canary_sector(), 3);
        r.seg[1].first_sect = 5;
        r.seg[1].last_sect = 4;                 /* first > last */
        bad_rw(&r, ST_ERR);
        r = rw_req(op, canary_sector(), 1);
        r.seg[0].first_sect = 7;
        r.seg[0].last_sect = 0;
        bad_rw(&r, ST_ERR);
        r = rw_req(op, canary_sector(), 2);
        r.seg[1].last_sect = 8;                 /* crosses the page */
        bad_rw(&r, ST_ERR);
        r = rw_req(op, canary_sector(), 1);
        r.seg[0].first_sect = 200;
        r.seg[0].last_sect = 255;
        bad_rw(&r, ST_ERR);
    }
}

/* A ref whose grant entry is empty (not granted to anyone) */
uint32_t free_ref(void)
{
    grant_entry_v1_t *gt = xensim_domu_gnttab(F.dom);
    uint32_t ref;

    do {
        ref = 8 + rnd_below(XENSIM_GNTTAB_ENTRIES - 8);
    } while (gt[ref].flags);
    return ref;
}

void add_bad_grants(void)
{
    static const uint32_t wild[] = {
        0, XENSIM_GNTTAB_ENTRIES, XENSIM_GNTTAB_ENTRIES * 16, 0x7fffffff,
        0xffffffff,
    };
    blkif_request_t r;
    unsigned int i;
    Pend *p;

    for (i = 0; i < G_N_ELEMENTS(wild) + 2; i++) {
        uint8_t op = i & 1 ? BLKIF_OP_READ : BLKIF_OP_WRITE;
        uint32_t ref = i < G_N_ELEMENTS(wild) ? wild[i] : free_ref();

        r = rw_req(op, canary_sector(), 2);
        r.seg[1].gref = ref;
        bad_rw_io(&r, ST_ERR, true);
    }
    /* Granted to another domain: neither read into nor written from */
    memset(F.other_page, 0x5a, XENSIM_PAGE_SIZE);
    for (i = 0; i < 2; i++) {
        r = rw_req(i ? BLKIF_OP_READ : BLKIF_OP_WRITE, canary_sector(), 1);
        r.seg[0].gref = F.other_ref;
        p = put(&r, ST_ERR);
        if (p && i) {
            p->untouched = true;
            p->nseg = 1;
            p->page[0] = F.other_page;
        }
    }
    /* Read-only: cannot be read into, but can be written from */
    memset(F.ro_page, 0x5a, XENSIM_PAGE_SIZE);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 1);
    r.seg[0].gref = F.ro_ref;
    p = put(&r, ST_ERR);
    if (p) {
        p->untouched = true;
        p->nseg = 1;
        p->page[0] = F.ro_page;
    }
    valid_rw(BLKIF_OP_WRITE, 2, true);
}

void add_past_end(void)
{
    blkif_request_t r;
    Pend *p;

    r = rw_req(BLKIF_OP_READ, DISK_SECTS - 1, 1);       /* 8 sectors: 1 in */
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, DISK_SECTS, 1);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, DISK_SECTS + 4096, 11);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, UINT64_MAX, 1);
    bad_rw(&r, ST_ERR);
    /* the last sector itself is fine */
    r = rw_req(BLKIF_OP_READ, DISK_SECTS - 1, 1);
    r.seg[0].first_sect = r.seg[0].last_sect = 7;
    p = bad_rw(&r, ST_OK);
    (void)p;
}

/*
 * sector_number * 512 wraps: 2^55 + k sectors is byte 2^64 + 512k, i.e.
 * 512k in 64 bits, inside the disk. The backend must refuse it, not write
 * the canary at sector k.
 */
void add_overflow(void)
{
    blkif_request_t r;
    uint64_t k = canary_sector();
    Pend *v;

    r = rw_req(BLKIF_OP_WRITE, (1ull << 55) + k, 2);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, (1ull << 55) + k, 2);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, (1ull << 54) + k, 1);  /* 2^63: negative */
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, UINT64_MAX - 7, 1);    /* -4096 */
    bad_rw(&r, ST_ERR);
    /* Right after a valid write, "adjacent" only through the wrap */
    v = valid_rw(BLKIF_OP_WRITE, 1, false);
    if (v) {
        r = rw_req(BLKIF_OP_WRITE, (1ull << 55) + v->sector +
                   v->last[0] - v->first[0] + 1, 1);
        bad_rw(&r, ST_ERR);
    }
}

void add_unknown_ops(void)
{
    static const uint8_t ops[] = {
        BLKIF_OP_WRITE_BARRIER, 4, BLKIF_OP_INDIRECT, 7, 42, 0x80, 0xff,
    };
    blkif_request_t r;
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        r = rw_req(ops[i], canary_sector(), 1 + rnd_below(11));
        bad_rw(&r, ST_BAD);
    }
}

Pend *discard(uint64_t sector, uint64_t n, unsigned int expect)
{
    blkif_request_t r = { 0 };
    blkif_request_discard_t *d = (void *)&r;
    Pend *p;

    d->operation = BLKIF_OP_DISCARD;
    d->sector_number = sector;
    d->nr_sectors = n;
    p = put(&r, expect);
    return p;
}

void add_discard_huge(void)
{
    uint64_t k = canary_sector(), s;
    Pend *p;

    discard(k, UINT64_MAX, ST_ERR);                    /* wraps */
    discard(k, 1ull << 63, ST_ERR);
    discard(UINT64_MAX - 1, 4, ST_ERR);                /* wraps */
    discard(k, DISK_SECTS, ST_ERR);                    /* past the end */
    discard(DISK_SECTS, 1, ST_ERR);
    /* in int64 bytes, but ~2^32 block-layer requests of 2 GiB */
    discard(k, (INT64_MAX / SECT) - k - 1, ST_ERR);
    discard(k, 1ull << 40, ST_ERR);
    /* a valid one, in the scratch area */
    if (pick_range(64, true, &s)) {
        p = discard(s, 64, ST_OK);
        if (p) {
            p->discard = true;
            p->sector = s;
            p->discard_sects = 64;
        }
    }
}

/* Reads and writes whose grants are revoked right after the kick */
void run_revoke(void)
{
    int refs[MAX_BATCH];
    unsigned int i, n = 0, nreq = MIN(ring_free(), 5u);

    batch_begin();
    for (i = 0; i < nreq; i++) {
        uint8_t op = i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ;
        Pend *p = valid_rw(op, 11, false);
        unsigned int j;

        if (!p) {
            continue;
        }
        p->expect = ST_OK | ST_ERR;
        p->revoked = true;
        /* replace the segments' grants with fresh ones we will revoke */
        for (j = 0; j < p->nseg && n < MAX_BATCH; j++) {
            uint8_t *page = F.rev_pages + n * XENSIM_PAGE_SIZE;
            RING_IDX idx;
            struct blkfront_ring_state rs;
            int ref = xensim_domu_grant(F.dom, 0,
                                        xensim_domu_gfn(F.dom, page), false);

            memcpy(page, p->page[j], XENSIM_PAGE_SIZE);
            p->page[j] = page;
            refs[n++] = ref;
            blkfront_ring_state(F.bf, &rs);
            idx = rs.req_prod_pvt - 1;
            /* rewrite the gref in the slot we just filled */
            {
                blkif_request_t r = { 0 };
                uint8_t *slot = F.sring + 64 + (idx % F.nr_ents) *
                                F.slot_size;
                size_t segoff = F.proto == BLKFRONT_PROTO_X86_32 ? 20 : 24;

                (void)r;
                memcpy(slot + segoff + j * 8, &ref, 4);
                memcpy(F.snap[idx % F.nr_ents], slot, F.slot_size);
            }
        }
    }
    batch_run(refs, n);
}

/* --- ring abuse ---------------------------------------------------------- */

static uint64_t be_state(void)
{
    g_autofree char *p = g_strdup_printf("%s/state", F.be);
    uint64_t s = 0;

    xensim_xs_read_u64(F.xs, XENSIM_XBT_NULL, p, &s);
    return s;
}

/*
 * Set the shared req_prod to @prod (a number of requests the ring cannot
 * hold, or an index behind the backend's) over @nvalid valid writes that
 * the ring does hold, and kick. The backend may halt the ring or
 * disconnect; it must not process more than the frontend ever put there.
 */
static void run_ring_abuse(bool backwards)
{
    struct blkfront_ring_state rs;
    blkif_sring_t *sr = (blkif_sring_t *)F.sring;
    unsigned int i, nvalid = MIN(ring_free(), 4u);
    uint64_t before;
    RING_IDX prod;

    batch_begin();
    for (i = 0; i < nvalid; i++) {
        Pend *p = valid_rw(BLKIF_OP_WRITE, 1 + rnd_below(11), false);

        if (p) {
            p->expect = ST_OK;
        }
    }
    blkfront_ring_state(F.bf, &rs);
    prod = backwards ? rs.req_prod - 1 - rnd_below(F.nr_ents) :
                       rs.req_prod_pvt + F.nr_ents + 1 +
                       rnd_below(1u << 30);
    before = F.failures + F.xfails;
    F.execs++;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    sr->req_prod = prod;
    blkfront_raw_kick(F.bf);
    F.no_padcheck = true;
    g_usleep(200 * 1000);
    /* Whatever came back must be for requests we made, once each */
    {
        unsigned int n = 0;

        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod - rs.rsp_cons <= F.nr_ents) {
            n = collect();
        } else {
            fail("rsp_prod %u jumped past the ring", rs.rsp_prod);
        }
        g_usleep(100 * 1000);
        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod != rs.rsp_cons) {
            fail("backend still producing responses after req_prod %s "
                 "(%u more)", backwards ? "moved backwards" : "overflowed",
                 rs.rsp_prod - rs.rsp_cons);
        }
        if (n > F.npend) {
            fail("%u responses for %u requests: the backend processed "
                 "garbage slots", n, F.npend);
        }
    }
    for (i = 0; i < F.npend; i++) {
        if (F.pend[i].got) {
            apply(&F.pend[i]);
        } else {
            /* not processed: the model stays as it was */
            F.pend[i].check_data = false;
        }
    }
    F.no_padcheck = false;
    if (!qemu_alive()) {
        return;
    }
    if (be_state() == XenbusStateClosing || be_state() == XenbusStateClosed) {
        F.disconnects++;
    } else if (F.failures + F.xfails == before) {
        F.halts++;              /* nothing processed, nothing answered */
    }
    F.ring_dead = true;
}

/* --- negotiation garbage ------------------------------------------------- */

static void fe_w(const char *node, const char *val)
{
    g_autofree char *p = g_strdup_printf("%s/%s", F.fe, node);

    xensim_xs_write(F.xs, XENSIM_XBT_NULL, p, val, strlen(val));
}

static void fe_rm(const char *node)
{
    g_autofree char *p = g_strdup_printf("%s/%s", F.fe, node);

    xensim_xs_rm(F.xs, XENSIM_XBT_NULL, p);
}

/*
 * Negotiate by hand with garbage in one node: the backend must not reach
 * Connected (unless @may_connect), must refuse the frontend the way
 * blkback does, with Closing (checked as the case "nego-end-state": a
 * backend left in InitWait makes the frontend wait for ever), and must
 * stay alive and usable.
 */
static void garbage_negotiation(const char *name, bool may_connect)
{
    g_autofree char *bstate = g_strdup_printf("%s/state", F.be);
    uint8_t *ring = xensim_domu_alloc_pages(F.dom, 4);
    xensim_evtchn *ev = xensim_evtchn_open(xensim_domu_hv(F.dom), DOMID);
    int port = ev ? xensim_evtchn_alloc_unbound(ev, 0) : -1;
    int refs[4], ro = -1, i;
    char buf[64];
    uint64_t s;
    bool connected;

    F.cur = name;
    g_hash_table_add(F.ran, (gpointer)name);
    F.execs++;
    for (i = 0; i < 4; i++) {
        refs[i] = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(
                      F.dom, ring + i * XENSIM_PAGE_SIZE), false);
    }
    memset(ring, 0, 4 * XENSIM_PAGE_SIZE);
    SHARED_RING_INIT((blkif_sring_t *)ring);
    if (xensim_xs_wait_mask(F.xs, bstate, 1u << XenbusStateInitWait, 10000,
                            &s) < 0) {
        fail("backend not in InitWait before the case (state %" PRIu64 ")",
             s);
        goto out;
    }
    snprintf(buf, sizeof(buf), "%d", port);
    fe_w("event-channel", buf);
    snprintf(buf, sizeof(buf), "%d", refs[0]);
    fe_w("ring-ref", buf);
    fe_w("protocol", "x86_64-abi");
    if (!strcmp(name, "nego-order-too-big")) {
        fe_w("ring-page-order", "9");
        for (i = 0; i < 4; i++) {
            snprintf(buf, sizeof(buf), "ring-ref%d", i);
            fe_w(buf, "8");
        }
    } else if (!strcmp(name, "nego-order-huge")) {
        fe_w("ring-page-order", "4294967295");
    } else if (!strcmp(name, "nego-order-missing-ref")) {
        fe_w("ring-page-order", "2");
        for (i = 0; i < 3; i++) {
            char node[16];

            snprintf(node, sizeof(node), "ring-ref%d", i);
            snprintf(buf, sizeof(buf), "%d", refs[i]);
            fe_w(node, buf);
        }
    } else if (!strcmp(name, "nego-evtchn-text")) {
        fe_w("event-channel", "not-a-port");
    } else if (!strcmp(name, "nego-evtchn-foreign")) {
        fe_w("event-channel", "250");           /* not ours, not bound */
    } else if (!strcmp(name, "nego-protocol")) {
        fe_w("protocol", "sparc64-abi");
    } else if (!strcmp(name, "nego-ref-ungranted")) {
        snprintf(buf, sizeof(buf), "%u", free_ref());
        fe_w("ring-ref", buf);
    } else if (!strcmp(name, "nego-ref-readonly")) {
        ro = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(F.dom, ring), true);
        snprintf(buf, sizeof(buf), "%d", ro);
        fe_w("ring-ref", buf);
    } else if (!strcmp(name, "nego-ref-other-domain")) {
        snprintf(buf, sizeof(buf), "%d", F.other_ref);
        fe_w("ring-ref", buf);
    } else if (!strcmp(name, "nego-ref-huge")) {
        fe_w("ring-ref", "4294967295");
    }
    fe_w("state", "3");                         /* Initialised */
    xensim_xs_wait_mask(F.xs, bstate, (1u << XenbusStateConnected) |
                        (1u << XenbusStateClosing), 1500, &s);
    connected = s == XenbusStateConnected;
    if (!qemu_alive()) {
        return;
    }
    if (connected && !may_connect) {
        fail("backend connected to garbage negotiation");
    }
    g_hash_table_add(F.ran, (gpointer)"nego-end-state");
    if (!connected && s != XenbusStateClosing) {
        F.cur = "nego-end-state";
        fail("%s: the backend neither connected nor refused (Closing);"
             " it stays in state %" PRIu64, name, s);
        F.cur = name;
    }
    /*
     * Back to a clean slate the way Linux does it, one step at a time:
     * Closing (wait for the backend to follow), Closed (likewise), then
     * Initialising. Writing them back to back lets the backend see only
     * the last one and stay Closed.
     */
    fe_w("state", "5");
    xensim_xs_wait_mask(F.xs, bstate, (1u << XenbusStateClosing) |
                        (1u << XenbusStateClosed), 10000, &s);
    fe_w("state", "6");
    if (xensim_xs_wait_mask(F.xs, bstate, 1u << XenbusStateClosed,
                            10000, &s) < 0) {
        fail("backend did not close after the case (state %" PRIu64 ")", s);
    }
    fe_rm("ring-ref");
    fe_rm("ring-page-order");
    for (i = 0; i < 4; i++) {
        snprintf(buf, sizeof(buf), "ring-ref%d", i);
        fe_rm(buf);
    }
    fe_rm("event-channel");
    fe_rm("protocol");
    fe_w("state", "1");                         /* Initialising */
    xensim_xs_wait_mask(F.xs, bstate, 1u << XenbusStateInitWait, 10000, &s);
out:
    for (i = 0; i < 4; i++) {
        if (xensim_domu_end_grant(F.dom, refs[i]) < 0) {
            fail("ring grant %d still mapped after the backend closed",
                 refs[i]);
        }
    }
    if (ro >= 0) {
        xensim_domu_end_grant(F.dom, ro);
    }
    xensim_evtchn_close(ev);
    xensim_domu_free_pages(F.dom, ring, 4);
}

/* --- the directed run ---------------------------------------------------- */

typedef struct Case {
    const char *name;
    void (*add)(void);      /* batch of requests, or NULL */
    void (*run)(void);      /* whole case */
} Case;

void run_prod_overflow(void)
{
    run_ring_abuse(false);
}

void run_prod_backwards(void)
{
    run_ring_abuse(true);
}

static const Case cases[] = {
    { "nr-segments", add_nr_segments, NULL },
    { "bad-sects", add_bad_sects, NULL },
    { "bad-grants", add_bad_grants, NULL },
    { "past-end", add_past_end, NULL },
    { "sector-overflow", add_overflow, NULL },
    { "unknown-op", add_unknown_ops, NULL },
    { "discard-huge", add_discard_huge, NULL },
    { "revoke-inflight", NULL, run_revoke },
    { "indirect-valid", add_ind_valid, NULL },
    { "indirect-bad-grant", add_ind_bad_grant, NULL },
    { "indirect-nr-segments", add_ind_nr_segments, NULL },
    { "indirect-bad-sects", add_ind_bad_sects, NULL },
    { "indirect-op", add_ind_op, NULL },
    { "indirect-flip", NULL, run_ind_flip },
    { "prod-overflow", NULL, run_prod_overflow },
    { "prod-backwards", NULL, run_prod_backwards },
    { "fault-errors", NULL, run_fault_errors },
    { "fault-resize", NULL, run_fault_resize },
    { "fault-iothread", NULL, run_fault_iothread },
    { "fault-disconnect", NULL, run_fault_disconnect },
};

static const char *const nego_cases[] = {
    "nego-order-too-big", "nego-order-huge", "nego-order-missing-ref",
    "nego-evtchn-text", "nego-evtchn-foreign", "nego-protocol",
    "nego-ref-ungranted", "nego-ref-readonly", "nego-ref-other-domain",
    "nego-ref-huge",
};

static bool run_case(const Case *c)
{
    F.cur = c->name;
    g_hash_table_add(F.ran, (gpointer)c->name);
    if (c->add) {
        batch_begin();
        c->add();
        if (!batch_run(NULL, 0)) {
            return settle();
        }
    } else {
        c->run();
    }
    return settle();
}

bool run_directed(void)
{
    static const enum blkfront_protocol protos[] = {
        BLKFRONT_PROTO_NATIVE, BLKFRONT_PROTO_X86_32, BLKFRONT_PROTO_X86_64,
    };
    unsigned int i, p;

    for (p = 0; p < G_N_ELEMENTS(protos); p++) {
        /* every request case on every ring ABI (padding differs) */
        if (p) {
            F.cur = "reconnect";
            blkfront_close(F.bf);
            F.bf = NULL;
            if (!fe_connect(p == 1 ? 1 : 0, protos[p])) {
                return false;
            }
        }
        for (i = 0; i < G_N_ELEMENTS(cases); i++) {
            if (!run_case(&cases[i])) {
                return false;
            }
        }
    }
    /* garbage negotiation: the frontend has to let go of the device */
    F.cur = "nego";
    blkfront_close(F.bf);
    F.bf = NULL;
    fe_w("state", "1");             /* Initialising: backend to InitWait */
    for (i = 0; i < G_N_ELEMENTS(nego_cases); i++) {
        garbage_negotiation(nego_cases[i],
                            !strcmp(nego_cases[i], "nego-protocol"));
        if (!qemu_alive()) {
            if (!restart("died")) {
                return false;
            }
            blkfront_close(F.bf);
            F.bf = NULL;
        }
    }
    F.cur = "nego-recover";
    if (!fe_connect(0, BLKFRONT_PROTO_NATIVE)) {
        return false;
    }
    verify_disk();
    return true;
}

/* --list: the directed cases' names, one a line. */
void list_cases(void)
{
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        printf("%s\n", cases[i].name);
    }
    for (i = 0; i < G_N_ELEMENTS(nego_cases); i++) {
        printf("%s\n", nego_cases[i]);
    }
}
