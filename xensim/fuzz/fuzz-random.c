/*
 * xenblk-fuzz: random mode.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include "fuzz-int.h"

/* Random-mode classes: the directed cases' names, so --xfail applies */
static bool enabled(const char *name)
{
    return !g_hash_table_contains(F.xfail, name);
}

static void random_request(void)
{
    static const struct {
        const char *name;
        void (*add)(void);
    } bad[] = {
        { "nr-segments", add_nr_segments },
        { "bad-sects", add_bad_sects },
        { "bad-grants", add_bad_grants },
        { "past-end", add_past_end },
        { "sector-overflow", add_overflow },
        { "unknown-op", add_unknown_ops },
        { "discard-huge", add_discard_huge },
        { "indirect-valid", add_ind_valid },
        { "indirect-bad-grant", add_ind_bad_grant },
        { "indirect-nr-segments", add_ind_nr_segments },
        { "indirect-bad-sects", add_ind_bad_sects },
        { "indirect-op", add_ind_op },
    };
    uint64_t r = rnd_below(100);
    uint64_t s;

    if (r < 25) {
        valid_rw(BLKIF_OP_READ, 1 + rnd_below(11), false);
    } else if (r < 50) {
        valid_rw(BLKIF_OP_WRITE, 1 + rnd_below(11), rnd_below(8) == 0);
    } else if (r < 70) {
        valid_run(r & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ,
                  2 + rnd_below(RUN_MAX - 1), NULL);
    } else if (r < 75) {
        blkif_request_t f = { .operation = BLKIF_OP_FLUSH_DISKCACHE };
        put(&f, ST_OK);
    } else if (r < 80) {
        unsigned int n = 1 + rnd_below(256);

        if (pick_range(n, true, &s)) {
            Pend *p = discard(s, n, ST_OK);

            if (p) {
                p->discard = true;
                p->sector = s;
                p->discard_sects = n;
            }
        }
    } else {
        unsigned int i = rnd_below(G_N_ELEMENTS(bad));

        if (enabled(bad[i].name)) {
            bad[i].add();
        }
    }
}

bool run_random(unsigned int iterations)
{
    unsigned int it;

    for (it = 0; it < iterations; it++) {
        uint64_t r = rnd_below(100);

        F.cur = "random";
        if (r < 3 && enabled("prod-overflow")) {
            F.cur = "prod-overflow";
            run_prod_overflow();
        } else if (r < 5 && enabled("prod-backwards")) {
            F.cur = "prod-backwards";
            run_prod_backwards();
        } else if (r < 10 && enabled("revoke-inflight")) {
            F.cur = "revoke-inflight";
            run_revoke();
        } else if (r < 11 && enabled("fault-disconnect")) {
            F.cur = "fault-disconnect";
            run_fault_disconnect();
        } else if (r < 12) {
            static const enum blkfront_protocol pr[] = {
                BLKFRONT_PROTO_NATIVE, BLKFRONT_PROTO_X86_32,
                BLKFRONT_PROTO_X86_64,
            };
            F.cur = "reconnect";
            blkfront_close(F.bf);
            F.bf = NULL;
            if (!fe_connect(rnd_below(5), pr[rnd_below(3)])) {
                return false;
            }
            continue;
        } else {
            /* a batch: fill up to the free ring space */
            unsigned int want = 1 + rnd_below(MIN(ring_free(), 48u));

            batch_begin();
            while (F.npend < want && ring_free() > 12 &&
                   F.npend + 12 < G_N_ELEMENTS(F.pend)) {
                random_request();
            }
            if (!F.npend) {
                continue;
            }
            if (r < 18 && enabled("fault-iothread")) {
                F.during = iothread_change;
            }
            if (!batch_run(NULL, 0)) {
                if (!settle()) {
                    return false;
                }
                continue;
            }
        }
        if (F.ring_dead || it % 25 == 24 || !qemu_alive()) {
            if (!settle()) {
                return false;
            }
        }
    }
    F.cur = "random";
    return settle();
}
