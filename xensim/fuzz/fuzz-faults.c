/*
 * xenblk-fuzz: faults during I/O (blkdebug errors, block_resize, IOThread
 * changes, a disconnect with requests in flight).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "fuzz-int.h"

/* --- faults during I/O ---------------------------------------------------- */

/*
 * The libxl disk's format node, as xen-block names it
 * (xen_block_blockdev_add(): "<vdev>-<driver>"), and the two nodes the
 * fault cases add: "fplain", a plain file node on the same image, and
 * "fdbg", blkdebug over it. blockdev-reopen swaps the format node's file
 * child between them: a drain of the device (detach, attach) with I/O in
 * flight, and the faults wherever blkdebug is in.
 */
#define FMT_NODE "xvda-raw"
#define GROW_BYTES (1ull << 20)

static bool reopen_file(const char *node)
{
    if (qmp_exec("{\"execute\":\"blockdev-reopen\",\"arguments\":{\"options\":"
                 "[{\"driver\":\"raw\",\"node-name\":\"" FMT_NODE "\","
                 "\"file\":\"%s\"}]}}\n", node) != 1) {
        fail("blockdev-reopen of " FMT_NODE " onto %s failed", node);
        return false;
    }
    return true;
}

/* Put blkdebug under the disk: reads of @rsec EIO, writes of @wsec ENOSPC */
static bool blkdebug_in(uint64_t rsec, uint64_t wsec)
{
    if (!F.fault_nodes) {
        if (qmp_exec("{\"execute\":\"blockdev-add\",\"arguments\":"
                     "{\"driver\":\"file\",\"node-name\":\"fplain\","
                     "\"filename\":\"%s\",\"locking\":\"off\"}}\n",
                     F.image) != 1) {
            fail("blockdev-add of a file node failed");
            return false;
        }
        F.fault_nodes = true;
    }
    if (qmp_exec("{\"execute\":\"blockdev-add\",\"arguments\":"
                 "{\"driver\":\"blkdebug\",\"node-name\":\"fdbg\","
                 "\"image\":\"fplain\",\"inject-error\":["
                 "{\"event\":\"read_aio\",\"errno\":5,\"sector\":%" PRIu64
                 ",\"once\":false},"
                 "{\"event\":\"write_aio\",\"errno\":28,\"sector\":%" PRIu64
                 ",\"once\":false}]}}\n", rsec, wsec) != 1) {
        fail("blockdev-add of blkdebug failed");
        return false;
    }
    return reopen_file("fdbg");
}

static void blkdebug_out(void)
{
    if (reopen_file("fplain") &&
        qmp_exec("{\"execute\":\"blockdev-del\",\"arguments\":"
                 "{\"node-name\":\"fdbg\"}}\n") != 1) {
        fail("blockdev-del of blkdebug failed");
    }
}

/* A request of a run holding a failing sector fails; the run's others
 * may fail with it (a merged I/O has one result) but nothing else may. */
static void expect_fault(Pend **run, unsigned int n, uint64_t bad)
{
    unsigned int i;

    for (i = 0; i < n; i++) {
        uint64_t len = 0;
        unsigned int j;

        for (j = 0; j < run[i]->nseg; j++) {
            len += run[i]->last[j] - run[i]->first[j] + 1;
        }
        run[i]->expect = bad >= run[i]->sector && bad < run[i]->sector + len ?
                         ST_ERR : ST_OK | ST_ERR;
    }
}

void run_fault_errors(void)
{
    Pend *r[RUN_MAX], *w[RUN_MAX];
    unsigned int nr, nw, i;
    uint64_t rsec, wsec;

    batch_begin();
    nr = valid_run(BLKIF_OP_READ, RUN_MAX, r);
    nw = valid_run(BLKIF_OP_WRITE, RUN_MAX, w);
    for (i = 0; i < 3; i++) {
        valid_run(i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ, 4, NULL);
    }
    if (nr < 2 || nw < 2) {
        fail("no room for the fault runs");
        return;
    }
    /* a sector inside the run's second request */
    rsec = r[1]->sector;
    wsec = w[1]->sector;
    expect_fault(r, nr, rsec);
    expect_fault(w, nw, wsec);
    if (!blkdebug_in(rsec, wsec)) {
        return;
    }
    batch_run(NULL, 0);
    for (i = 0; i < F.npend; i++) {
        F.fault_errors += F.pend[i].got &&
                          F.pend[i].status == BLKIF_RSP_ERROR;
    }
    blkdebug_out();
}

static uint64_t be_sectors(void)
{
    g_autofree char *p = g_strdup_printf("%s/sectors", F.be);
    uint64_t s = 0;

    xensim_xs_read_u64(F.xs, XENSIM_XBT_NULL, p, &s);
    return s;
}

static uint64_t resize_to;

static void resize_now(void)
{
    F.resizes++;
    if (qmp_exec("{\"execute\":\"block_resize\",\"arguments\":"
                 "{\"node-name\":\"" FMT_NODE "\",\"size\":%" PRIu64 "}}\n",
                 resize_to) != 1) {
        fail("block_resize to %" PRIu64 " failed", resize_to);
    }
}

/* A batch of valid runs with block_resize to @bytes while it is in flight */
static void resize_batch(uint64_t bytes)
{
    unsigned int i;

    batch_begin();
    for (i = 0; i < 6; i++) {
        valid_run(i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ, 1 + rnd_below(8),
                  NULL);
    }
    resize_to = bytes;
    F.during = resize_now;
    batch_run(NULL, 0);
    if (be_sectors() != bytes / SECT) {
        fail("backend sectors %" PRIu64 " after block_resize to %" PRIu64
             " bytes", be_sectors(), bytes);
    }
}

/* One request at @sector (past the model's disk), expecting @expect. */
static void beyond(uint8_t op, uint64_t sector, unsigned int expect)
{
    blkif_request_t req = rw_req(op, sector, 1);

    batch_begin();
    bad_rw_io(&req, expect, true);
    batch_run(NULL, 0);
}

void run_fault_resize(void)
{
    resize_batch(DISK_BYTES + GROW_BYTES);
    beyond(BLKIF_OP_WRITE, DISK_SECTS, ST_OK);
    beyond(BLKIF_OP_READ, DISK_SECTS + GROW_BYTES / SECT - 8, ST_OK);
    beyond(BLKIF_OP_WRITE, DISK_SECTS + GROW_BYTES / SECT, ST_ERR);
    resize_batch(DISK_BYTES);
    beyond(BLKIF_OP_WRITE, DISK_SECTS, ST_ERR);
    beyond(BLKIF_OP_READ, DISK_SECTS - 8, ST_OK);
}

/* IOThread settings changed with requests in flight. */
static const char *const iothread_sets[] = {
    "\"poll-max-ns\",\"value\":0",
    "\"poll-max-ns\",\"value\":8000000",
    "\"poll-grow\",\"value\":4",
    "\"poll-shrink\",\"value\":2",
    "\"poll-max-ns\",\"value\":1000",
    "\"aio-max-batch\",\"value\":1",
    "\"aio-max-batch\",\"value\":0",
    "\"poll-max-ns\",\"value\":32768",
};
static unsigned int iothread_next;

void iothread_change(void)
{
    const char *set = iothread_sets[iothread_next++ %
                                    G_N_ELEMENTS(iothread_sets)];

    F.iothread_changes++;
    if (qmp_exec("{\"execute\":\"qom-set\",\"arguments\":{\"path\":"
                 "\"/objects/xvda\",\"property\":%s}}\n", set) != 1) {
        fail("qom-set of the IOThread (%s) failed", set);
    }
}

static void iothread_batch(void)
{
    unsigned int i;

    batch_begin();
    for (i = 0; i < 4; i++) {
        valid_run(i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ, 1 + rnd_below(8),
                  NULL);
    }
    F.during = iothread_change;
    batch_run(NULL, 0);
}

void run_fault_iothread(void)
{
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(iothread_sets); i++) {
        iothread_batch();
    }
    /*
     * Moving the disk to the main loop: xen-block cannot follow a new
     * AioContext, so QEMU must refuse (and stay as it was), not crash.
     */
    if (qmp_exec("{\"execute\":\"x-blockdev-set-iothread\",\"arguments\":"
                 "{\"node-name\":\"" FMT_NODE "\",\"iothread\":null}}\n") ==
        1) {
        fail("x-blockdev-set-iothread moved an attached xen-block disk");
    }
    iothread_batch();
}

/*
 * The frontend closes with requests in flight (a crashing guest driver):
 * the backend must reach Closed and connect again, and no write of the
 * old ring may land after that. Writes that got no response leave their
 * sectors old or new; they are rewritten through the new ring, and a
 * late write from the old one would show in the check after.
 */
void run_fault_disconnect(void)
{
    unsigned int i, cut = 0;
    uint64_t s, e;

    batch_begin();
    for (i = 0; i < 6; i++) {
        valid_run(i % 3 ? BLKIF_OP_WRITE : BLKIF_OP_READ, RUN_MAX, NULL);
    }
    F.execs++;
    blkfront_raw_push(F.bf);
    blkfront_raw_kick(F.bf);
    g_usleep(rnd_below(400));
    collect();
    for (i = 0; i < F.npend; i++) {
        Pend *p = &F.pend[i];

        if (p->got) {
            if (!status_ok(p->expect, p->status)) {
                fail("request 0x%" PRIx64 ": status %d", p->id, p->status);
            }
            apply(p);
        } else if (p->op == BLKIF_OP_WRITE) {
            p->status = BLKIF_RSP_ERROR;    /* outcome unknown */
            apply(p);
            cut++;
        } else {
            cut++;
        }
    }
    F.cut_inflight += cut;
    if (blkfront_disconnect(F.bf, true) < 0) {
        fail("disconnect with %u requests in flight: %s", cut,
             strerror(errno));
        F.ring_dead = true;
        return;
    }
    F.disconnects++;
    ring_adopt();
    /* rewrite what is unknown, then give stale writes time to land */
    for (s = 0; s < DISK_SECTS; s = e) {
        for (; s < DISK_SECTS && F.known[s]; s++) {
            /* skip known sectors */
        }
        for (e = s; e < DISK_SECTS && !F.known[e]; e++) {
            /* extend the unknown range */
        }
        if (e == s) {
            break;
        }
        fill_rand(F.model + s * SECT, (e - s) * SECT);
        memcpy(F.vbuf + s * SECT, F.model + s * SECT, (e - s) * SECT);
        if (blkfront_io_sync(F.bf, BLKFRONT_OP_WRITE, s * SECT,
                             F.vbuf + s * SECT, (e - s) * SECT) < 0) {
            fail("rewrite after reconnect: %s", strerror(errno));
            return;
        }
        memset(F.known + s, 1, e - s);
    }
    g_usleep(100 * 1000);
}
