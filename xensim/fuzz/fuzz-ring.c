/*
 * xenblk-fuzz: the ring (connecting, adopting the shared ring, raw requests
 * and responses, batches).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fuzz-int.h"

/* --- the ring ------------------------------------------------------------ */

/* The shared ring: the page granted as ring-ref (or ring-ref0). */
static uint8_t *find_sring(void)
{
    g_autofree char *p = g_strdup_printf("%s/%s", F.fe,
                                         F.order ? "ring-ref0" : "ring-ref");
    uint64_t ref;

    if (xensim_xs_read_u64(F.xs, XENSIM_XBT_NULL, p, &ref) < 0 ||
        ref >= XENSIM_GNTTAB_ENTRIES) {
        return NULL;
    }
    return xensim_domu_page(F.dom, xensim_domu_gnttab(F.dom)[ref].frame);
}

/* Take up the ring of a new connection of F.bf (connect or reconnect). */
bool ring_adopt(void)
{
    F.order = blkfront_info(F.bf)->ring_order;
    F.nr_ents = blkfront_info(F.bf)->ring_entries;
    F.sring = find_sring();
    F.ind_adv = blkfront_info(F.bf)->max_indirect_segments;
    g_free(F.snap);
    F.snap = g_malloc0(F.nr_ents * sizeof(*F.snap));
    F.ring_dead = false;
    return F.sring != NULL;
}

bool fe_connect(int order, enum blkfront_protocol proto)
{
    struct blkfront_opts o = { .devid = F.devid, .ring_order = order,
                               .protocol = proto, .timeout_ms = 10000 };

    F.bf = blkfront_connect(F.dom, F.xs, &o);
    if (!F.bf) {
        fail("blkfront_connect: %s", strerror(errno));
        return false;
    }
    F.proto = proto;
    F.slot_size = proto == BLKFRONT_PROTO_X86_32 ? 108 : 112;
    return ring_adopt();
}

/* --- requests ------------------------------------------------------------ */

void batch_begin(void)
{
    F.unknown = F.padleak = 0;
    F.npend = 0;
    F.nranges = 0;
    F.pool_next = 0;
    F.ind_next = 0;
}

unsigned int ring_free(void)
{
    struct blkfront_ring_state rs;

    blkfront_ring_state(F.bf, &rs);
    return F.nr_ents - (rs.req_prod_pvt - rs.rsp_cons);
}

uint8_t *pool_page(int *ref)
{
    unsigned int i = F.pool_next++;

    g_assert(i < POOL_PAGES);       /* pages are not shared in a batch */

    *ref = F.pool_ref[i];
    return F.pool + i * XENSIM_PAGE_SIZE;
}

/* Put @req on the ring, remembering what it should get back. */
Pend *put(blkif_request_t *req, unsigned int expect)
{
    struct blkfront_ring_state rs;
    Pend *p;

    g_assert(F.npend < G_N_ELEMENTS(F.pend));
    p = &F.pend[F.npend++];
    memset(p, 0, sizeof(*p));
    req->id = p->id = F.next_id++;
    p->expect = expect;
    p->op = req->operation;
    blkfront_ring_state(F.bf, &rs);
    if (blkfront_raw_put(F.bf, req) < 0) {
        F.npend--;
        return NULL;
    }
    /* The slot as we wrote it: a response may change only its fields. */
    memcpy(F.snap[rs.req_prod_pvt % F.nr_ents],
           F.sring + 64 + (rs.req_prod_pvt % F.nr_ents) * F.slot_size,
           F.slot_size);
    F.requests++;
    return p;
}

bool status_ok(unsigned int expect, int16_t status)
{
    return ((expect & ST_OK) && status == BLKIF_RSP_OKAY) ||
           ((expect & ST_ERR) && status == BLKIF_RSP_ERROR) ||
           ((expect & ST_NOTSUP) && status == BLKIF_RSP_EOPNOTSUPP);
}

/* Padding bytes of a response slot (XSA-216): unchanged from the request. */
static void check_padding(RING_IDX idx)
{
    const uint8_t *slot = F.sring + 64 + (idx % F.nr_ents) * F.slot_size;
    const uint8_t *was = F.snap[idx % F.nr_ents];
    static const unsigned int pad64[] = { 9, 12, 13, 14, 15 };
    static const unsigned int pad32[] = { 9 };
    const unsigned int *pad = F.proto == BLKFRONT_PROTO_X86_32 ? pad32 : pad64;
    unsigned int i, n = F.proto == BLKFRONT_PROTO_X86_32 ? 1 : 5;

    for (i = 0; i < n; i++) {
        if (slot[pad[i]] != was[pad[i]] && !F.padleak++) {
            fail("response %u: padding byte %u is 0x%02x, the frontend "
                 "left 0x%02x there (backend data leaked)", idx, pad[i],
                 slot[pad[i]], was[pad[i]]);
            return;
        }
    }
}

static Pend *find_pend(uint64_t id)
{
    unsigned int i;

    for (i = 0; i < F.npend; i++) {
        if (F.pend[i].id == id) {
            return &F.pend[i];
        }
    }
    return NULL;
}

static unsigned int nr_got(void)
{
    unsigned int i, n = 0;

    for (i = 0; i < F.npend; i++) {
        n += F.pend[i].got;
    }
    return n;
}

/* Take every available response; false on a protocol violation. */
unsigned int collect(void)
{
    struct blkfront_ring_state rs;
    unsigned int n = 0;
    uint64_t id;
    int16_t st;

    for (;;) {
        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod == rs.rsp_cons) {
            blkfront_raw_set_rsp_event(F.bf, rs.rsp_cons + 1);
            blkfront_ring_state(F.bf, &rs);
            if (rs.rsp_prod == rs.rsp_cons) {
                return n;
            }
        }
        if (rs.rsp_prod - rs.rsp_cons > F.nr_ents) {
            fail("rsp_prod %u is more than a ring ahead of rsp_cons %u",
                 rs.rsp_prod, rs.rsp_cons);
            F.ring_dead = true;
            return n;
        }
        if (!F.no_padcheck) {
            check_padding(rs.rsp_cons);
        }
        /* the response's operation: offset 8 in every ABI */
        uint8_t rop = F.sring[64 + (rs.rsp_cons % F.nr_ents) * F.slot_size +
                              8];
        if (blkfront_raw_response(F.bf, &id, &st) < 0) {
            return n;
        }
        F.responses++;
        n++;
        Pend *p = find_pend(id);
        if (!p) {
            if (F.unknown++) {
                continue;
            }
            fail("response with id 0x%" PRIx64 " that no request of this "
                 "batch has (status %d)", id, st);
            continue;
        }
        if (p->got) {
            fail("second response for request 0x%" PRIx64 " (op %u)", id,
                 p->op);
            continue;
        }
        p->got = true;
        p->status = st;
        p->rsp_op = rop;
    }
}

/*
 * Push and kick the batch, wait for every response it is owed, then a
 * little longer for responses nobody owes us, and check them all.
 * @revoke: end the grants of these refs right after the kick.
 */
bool batch_run(const int *revoke, unsigned int nrevoke)
{
    gint64 deadline;
    unsigned int i, got = 0, missing = 0;

    F.execs++;
    blkfront_raw_push(F.bf);
    blkfront_raw_kick(F.bf);
    for (i = 0; i < nrevoke; i++) {
        xensim_domu_end_grant(F.dom, revoke[i]);
    }
    if (F.during) {
        F.during();
        F.during = NULL;
    }
    deadline = g_get_monotonic_time() + RSP_TIMEOUT_MS * 1000ll;
    while (g_get_monotonic_time() < deadline && !F.ring_dead) {
        collect();
        got = nr_got();
        if (got == F.npend) {
            break;
        }
        blkfront_wait(F.bf, 20);
    }
    g_usleep(SETTLE_MS * 1000);
    collect();
    for (i = 0; i < F.npend; i++) {
        Pend *p = &F.pend[i];

        if (!p->got) {
            missing++;
            continue;
        }
        if (!status_ok(p->expect, p->status)) {
            fail("request 0x%" PRIx64 " (op %u): status %d, want %s%s%s",
                 p->id, p->op, p->status,
                 p->expect & ST_OK ? "OKAY " : "",
                 p->expect & ST_ERR ? "ERROR " : "",
                 p->expect & ST_NOTSUP ? "EOPNOTSUPP" : "");
        }
        if (p->check_op && p->rsp_op != p->want_op) {
            fail("indirect request 0x%" PRIx64 ": response has operation "
                 "%u, want %u", p->id, p->rsp_op, p->want_op);
        }
        apply(p);
    }
    if (missing) {
        if (!qemu_alive()) {
            return false;
        }
        fail("%u of %u requests got no response in %d ms", missing, F.npend,
             RSP_TIMEOUT_MS);
        F.ring_dead = true;     /* they may still come: start over */
    }
    return true;
}
