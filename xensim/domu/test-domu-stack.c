/*
 * xensim domU library against the real stack: Debian's xenstored under
 * the shim, and pristine QEMU's xen-block started as libxl starts it.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * This process is the toolstack (dom0, through libxensim-toolstack) and
 * the guest (domain DOMID, through libxensim-domu) at once:
 *
 * - xenstore as a domU sees it over its ring page: watches fire on
 *   registration and for the node and its children, a conflicting
 *   transaction ends in EAGAIN, the backend's nodes are readable but not
 *   writable (EACCES);
 * - blkfront data integrity for every size class 512 B .. 4 MiB, with
 *   buffers and disk offsets that start mid-page, deep queues that
 *   overflow the ring, flush, discard (zeroes read back from a raw file),
 *   clean close and reconnect with another ring order, and the x86_32-abi
 *   and x86_64-abi protocols (64-bit ids round-trip through the backend);
 * - notification rules: a pushed request is not served until the kick
 *   when the backend asked for one, rsp_event is re-armed after a reap.
 *
 * QEMU: $QEMU_UPSTREAM, default build/upstream/obj/qemu-system-i386.
 * Exits 77 (skipped) when QEMU, xenstored or the shim is missing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "xensim/blkfront.h"
#include "xensim/domu.h"
#include "xensim/toolstack.h"
#include <xen/io/xenbus.h>

#define DOMID           4
#define MEM_MB          96
#define DISK_BYTES      (64ull << 20)

static const char *qemu_path;
static xensim_ts *ts;
static xensim_domu *dom;
static xensim_xs *xs;
static int devid;
static char *image, *tmpdir, *logdir;

/* --- xenstore ----------------------------------------------------------- */

static void test_xs_basic(void)
{
    g_autofree char *v = NULL;
    g_auto(GStrv) names = NULL;
    unsigned int len, n;

    /* Relative paths resolve in our home; the toolstack wrote "name". */
    v = xensim_xs_read(xs, XENSIM_XBT_NULL, "name", &len);
    g_assert_nonnull(v);
    g_assert_cmpstr(v, ==, "domu-test");
    g_free(g_steal_pointer(&v));

    g_assert_cmpint(xensim_xs_mkdir(xs, XENSIM_XBT_NULL, "data/basic"), ==,
                    0);
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/basic/a",
                                    "hello", 5), ==, 0);
    g_assert_cmpint(xensim_xs_printf(xs, XENSIM_XBT_NULL, "data/basic/b",
                                     "%d", 42), ==, 0);
    v = xensim_xs_read(xs, XENSIM_XBT_NULL, "data/basic/a", &len);
    g_assert_cmpstr(v, ==, "hello");
    g_assert_cmpuint(len, ==, 5);
    names = xensim_xs_directory(xs, XENSIM_XBT_NULL, "data/basic", &n);
    g_assert_nonnull(names);
    g_assert_cmpuint(n, ==, 2);
    g_assert_true(g_strv_contains((const char *const *)names, "a"));
    g_assert_true(g_strv_contains((const char *const *)names, "b"));

    /* A value bigger than the 1 KiB ring goes through piecewise. */
    {
        char big[2000];  /* > the 1 KiB ring, < xenstored's 2 KiB node quota */
        g_autofree char *back = NULL;

        memset(big, 'x', sizeof(big));
        big[100] = 'y';
        g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/basic/big",
                                        big, sizeof(big)), ==, 0);
        back = xensim_xs_read(xs, XENSIM_XBT_NULL, "data/basic/big", &len);
        g_assert_cmpmem(back, len, big, sizeof(big));
    }

    g_assert_cmpint(xensim_xs_rm(xs, XENSIM_XBT_NULL, "data/basic"), ==, 0);
    g_assert_null(xensim_xs_read(xs, XENSIM_XBT_NULL, "data/basic/a", NULL));
    g_assert_cmpint(errno, ==, ENOENT);
}

static void expect_watch(const char *want_path, const char *want_token)
{
    g_autofree char *path = NULL, *token = NULL;

    g_assert_cmpint(xensim_xs_read_watch(xs, 5000, &path, &token), ==, 0);
    g_assert_cmpstr(path, ==, want_path);
    g_assert_cmpstr(token, ==, want_token);
}

static void test_xs_watch(void)
{
    char *path, *token;

    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/w", "", 0),
                    ==, 0);
    g_assert_cmpint(xensim_xs_watch(xs, "data/w", "tok"), ==, 0);
    /* Fires once on registration... */
    expect_watch("data/w", "tok");
    /* ...for the node... */
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/w", "1", 1),
                    ==, 0);
    expect_watch("data/w", "tok");
    /* ...and for its children, with the child's path. */
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/w/c/d", "2",
                                    1), ==, 0);
    expect_watch("data/w/c/d", "tok");
    /* Not for a sibling. */
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/wx", "3", 1),
                    ==, 0);
    g_assert_cmpint(xensim_xs_read_watch(xs, 300, &path, &token), ==, -1);
    g_assert_cmpint(errno, ==, ETIMEDOUT);

    g_assert_cmpint(xensim_xs_unwatch(xs, "data/w", "tok"), ==, 0);
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/w", "4", 1),
                    ==, 0);
    g_assert_cmpint(xensim_xs_read_watch(xs, 300, &path, &token), ==, -1);
    g_assert_cmpint(xensim_xs_pending_watches(xs), ==, 0);
    xensim_xs_rm(xs, XENSIM_XBT_NULL, "data/w");
    xensim_xs_rm(xs, XENSIM_XBT_NULL, "data/wx");
}

static void test_xs_transaction(void)
{
    g_autofree char *v = NULL;
    uint32_t tx;

    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/t", "0", 1),
                    ==, 0);

    /* A transaction that read a node someone else changed must fail. */
    g_assert_cmpint(xensim_xs_transaction_start(xs, &tx), ==, 0);
    g_assert_cmpuint(tx, !=, XENSIM_XBT_NULL);
    v = xensim_xs_read(xs, tx, "data/t", NULL);
    g_assert_cmpstr(v, ==, "0");
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, "data/t", "1", 1),
                    ==, 0);
    g_assert_cmpint(xensim_xs_write(xs, tx, "data/t", "2", 1), ==, 0);
    g_assert_cmpint(xensim_xs_transaction_end(xs, tx, false), ==, -1);
    g_assert_cmpint(errno, ==, EAGAIN);
    g_free(v);
    v = xensim_xs_read(xs, XENSIM_XBT_NULL, "data/t", NULL);
    g_assert_cmpstr(v, ==, "1");

    /* Without a conflict it commits, and is invisible until then. */
    g_assert_cmpint(xensim_xs_transaction_start(xs, &tx), ==, 0);
    g_assert_cmpint(xensim_xs_write(xs, tx, "data/t", "3", 1), ==, 0);
    g_free(v);
    v = xensim_xs_read(xs, XENSIM_XBT_NULL, "data/t", NULL);
    g_assert_cmpstr(v, ==, "1");
    g_assert_cmpint(xensim_xs_transaction_end(xs, tx, false), ==, 0);
    g_free(v);
    v = xensim_xs_read(xs, XENSIM_XBT_NULL, "data/t", NULL);
    g_assert_cmpstr(v, ==, "3");
    xensim_xs_rm(xs, XENSIM_XBT_NULL, "data/t");
}

static void test_xs_perms(void)
{
    g_autofree char *be = xensim_ts_backend_path(DOMID, devid);
    g_autofree char *node = g_strdup_printf("%s/sectors", be);
    g_autofree char *v = NULL;
    g_auto(GStrv) perms = NULL;
    unsigned int n;

    /* The frontend may read the backend's nodes... */
    v = xensim_xs_read(xs, XENSIM_XBT_NULL, node, NULL);
    g_assert_nonnull(v);
    g_assert_cmpstr(v, ==, "131072");
    /* ...but not write or remove them. */
    g_assert_cmpint(xensim_xs_write(xs, XENSIM_XBT_NULL, node, "1", 1), ==,
                    -1);
    g_assert_cmpint(errno, ==, EACCES);
    g_assert_cmpint(xensim_xs_rm(xs, XENSIM_XBT_NULL, node), ==, -1);
    g_assert_cmpint(errno, ==, EACCES);
    /* dom0 owns it, we may read: "n0", "r<domid>". */
    perms = xensim_xs_get_perms(xs, XENSIM_XBT_NULL, be, &n);
    g_assert_nonnull(perms);
    g_assert_cmpstr(perms[0], ==, "n0");
    /* Another domain's home is out of reach entirely. */
    g_assert_null(xensim_xs_read(xs, XENSIM_XBT_NULL,
                                 "/local/domain/0/name", NULL));
    g_assert_cmpint(errno, ==, EACCES);
}

/* --- blkfront -------------------------------------------------------------- */

static blkfront *connect_indirect(int order, enum blkfront_protocol proto,
                                  int max_indirect)
{
    struct blkfront_opts o = { .devid = devid, .ring_order = order,
                               .protocol = proto,
                               .max_indirect_segments = max_indirect };
    blkfront *bf = blkfront_connect(dom, xs, &o);

    if (!bf) {
        g_test_message("connect failed: %s (logs in %s)", strerror(errno),
                       logdir);
    }
    g_assert_nonnull(bf);
    return bf;
}

static blkfront *connect(int order, enum blkfront_protocol proto)
{
    return connect_indirect(order, proto, 0);
}

static void fill(uint8_t *p, size_t len, uint64_t seed)
{
    size_t i;

    for (i = 0; i < len; i += 8) {
        uint64_t v = (seed + i) * 0x9e3779b97f4a7c15ull;

        memcpy(p + i, &v, MIN(8, len - i));
    }
}

/* Write @len bytes at @off from a buffer starting @boff into a page. */
static void rw_check(blkfront *bf, uint64_t off, size_t len, size_t boff)
{
    size_t bytes = len + boff;
    uint8_t *wbuf = blkfront_buf_alloc(bf, bytes);
    uint8_t *rbuf = blkfront_buf_alloc(bf, bytes);

    g_assert_nonnull(wbuf);
    g_assert_nonnull(rbuf);
    fill(wbuf + boff, len, off ^ len ^ boff);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_WRITE, off, wbuf + boff,
                                     len), ==, 0);
    memset(rbuf, 0xee, bytes);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_READ, off, rbuf + boff,
                                     len), ==, 0);
    g_assert_cmpmem(rbuf + boff, len, wbuf + boff, len);
    /* Nothing outside the buffer was touched. */
    if (boff) {
        g_assert_cmpuint(rbuf[boff - 1], ==, 0xee);
    }
    blkfront_buf_free(bf, wbuf, bytes);
    blkfront_buf_free(bf, rbuf, bytes);
}

static void integrity(blkfront *bf)
{
    static const size_t sizes[] = {
        512, 1024, 4096, 8192, 44 * 1024, 64 * 1024, 128 * 1024,
        256 * 1024, 1024 * 1024, 4096 * 1024,
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(sizes); i++) {
        uint64_t off = (i + 1) * (5ull << 20);

        rw_check(bf, off, sizes[i], 0);
        rw_check(bf, off + 512, sizes[i], 512);     /* mid-page buffer */
        rw_check(bf, off + 3584, sizes[i], 3584);   /* last sector */
        rw_check(bf, off + 1024, sizes[i], 0);      /* disk mid-page only */
    }
}

static void test_blk_integrity(void)
{
    blkfront *bf = connect(0, BLKFRONT_PROTO_NATIVE);
    const struct blkfront_info *info = blkfront_info(bf);
    const struct blkfront_stats *st = blkfront_stats(bf);

    g_assert_cmpuint(info->sectors * info->sector_size, ==, DISK_BYTES);
    g_assert_cmpuint(info->ring_order, ==, 0);
    g_assert_cmpuint(info->ring_entries, ==, 32);
    g_assert_true(info->feature_flush);
    g_assert_true(info->feature_discard);
    integrity(bf);
    g_assert_cmpuint(st->responses, ==, st->requests);
    blkfront_close(bf);
}

/* Run @nr I/Os of @len bytes at once, @op on buf + i * len. */
static void run_batch(blkfront *bf, enum blkfront_op op, uint8_t *buf,
                      unsigned int nr, size_t len)
{
    struct blkfront_io *ios = g_new0(struct blkfront_io, nr), *done[16];
    unsigned int i, queued = 0, completed = 0;

    while (completed < nr) {
        while (queued < nr) {
            ios[queued] = (struct blkfront_io) {
                .op = op, .offset = (uint64_t)queued * len, .len = len,
                .buf = buf + (size_t)queued * len,
            };
            if (blkfront_queue(bf, &ios[queued]) < 0) {
                g_assert_cmpint(errno, ==, EAGAIN);
                break;
            }
            queued++;
        }
        blkfront_commit(bf);
        g_assert_cmpint(blkfront_wait(bf, 10000), ==, 0);
        unsigned int n = blkfront_reap(bf, done, G_N_ELEMENTS(done));
        for (i = 0; i < n; i++) {
            g_assert_cmpint(done[i]->error, ==, 0);
        }
        completed += n;
    }
    g_assert_cmpuint(blkfront_inflight(bf), ==, 0);
    g_free(ios);
}

/* Many I/Os at once on a 32-slot ring: splits, waits for space, batches. */
static void test_blk_deep_queue(void)
{
    enum { NR = 64, LEN = 64 * 1024 };  /* 1 or 2 requests each: > 32 */
    blkfront *bf = connect(0, BLKFRONT_PROTO_NATIVE);
    const struct blkfront_stats *st = blkfront_stats(bf);
    uint8_t *wbuf = blkfront_buf_alloc(bf, (size_t)NR * LEN);
    uint8_t *rbuf = blkfront_buf_alloc(bf, (size_t)NR * LEN);
    uint64_t notifies0 = st->notifies, req0 = st->requests;

    fill(wbuf, (size_t)NR * LEN, 77);
    run_batch(bf, BLKFRONT_OP_WRITE, wbuf, NR, LEN);
    run_batch(bf, BLKFRONT_OP_READ, rbuf, NR, LEN);
    g_assert_cmpmem(rbuf, (size_t)NR * LEN, wbuf, (size_t)NR * LEN);
    {
        /* 2 plain requests each, or 1 indirect one: 64 > 32 still */
        struct blkfront_io io = { .op = BLKFRONT_OP_READ, .len = LEN,
                                  .buf = wbuf };

        g_assert_cmpuint(blkfront_io_nr_requests(bf, &io), ==,
                         blkfront_info(bf)->indirect_segments ? 1 : 2);
        g_assert_cmpuint(st->requests - req0, ==,
                         2 * NR * blkfront_io_nr_requests(bf, &io));
    }
    /* Fewer kicks than requests: the backend asks only when idle. */
    g_test_message("%" G_GUINT64_FORMAT " notifies for %" G_GUINT64_FORMAT
                   " requests", st->notifies - notifies0,
                   st->requests - req0);
    g_assert_cmpuint(st->notifies - notifies0, <, st->requests - req0);
    blkfront_buf_free(bf, wbuf, (size_t)NR * LEN);
    blkfront_buf_free(bf, rbuf, (size_t)NR * LEN);
    blkfront_close(bf);
}

static void test_blk_flush_discard(void)
{
    blkfront *bf = connect(0, BLKFRONT_PROTO_NATIVE);
    const size_t len = 1 << 20;
    const uint64_t off = 40ull << 20;
    uint8_t *buf = blkfront_buf_alloc(bf, len);
    uint8_t *zero = g_malloc0(len);

    fill(buf, len, 5);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_WRITE, off, buf, len),
                    ==, 0);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_FLUSH, 0, NULL, 0), ==,
                    0);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_DISCARD, off, NULL,
                                     len), ==, 0);
    memset(buf, 0xaa, len);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_READ, off, buf, len),
                    ==, 0);
    /* A raw file punches a hole on discard: it reads back as zeroes. */
    g_assert_cmpmem(buf, len, zero, len);

    /* Out of range is refused before anything reaches the ring. */
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_READ, DISK_BYTES, buf,
                                     512), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_free(zero);
    blkfront_buf_free(bf, buf, len);
    blkfront_close(bf);
}

static void test_blk_reconnect(void)
{
    blkfront *bf = connect(0, BLKFRONT_PROTO_NATIVE);
    uint8_t *buf = blkfront_buf_alloc(bf, 8192);
    uint8_t *chk = blkfront_buf_alloc(bf, 8192);
    g_autofree char *be = xensim_ts_backend_path(DOMID, devid);
    g_autofree char *state = g_strdup_printf("%s/state", be);
    uint64_t s;

    fill(buf, 8192, 99);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_WRITE, 4096, buf, 8192),
                    ==, 0);
    /* Close and reconnect on the same handle. */
    g_assert_cmpint(blkfront_disconnect(bf, true), ==, 0);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_READ, 4096, chk, 8192),
                    ==, 0);
    g_assert_cmpmem(chk, 8192, buf, 8192);
    g_assert_cmpint(blkfront_disconnect(bf, false), ==, 0);
    g_assert_cmpint(xensim_xs_read_u64(xs, XENSIM_XBT_NULL, state, &s), ==,
                    0);
    g_assert_cmpuint(s, ==, XenbusStateClosed);
    /* I/O on a closed device is refused. */
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_READ, 0, chk, 512), ==,
                    -1);
    g_assert_cmpint(errno, ==, ENOTCONN);
    blkfront_buf_free(bf, buf, 8192);
    blkfront_buf_free(bf, chk, 8192);
    blkfront_close(bf);

    /* A new frontend after a clean close, with a 16-page ring. */
    bf = connect(-1, BLKFRONT_PROTO_NATIVE);
    g_assert_cmpuint(blkfront_info(bf)->ring_order, ==, 4);
    g_assert_cmpuint(blkfront_info(bf)->ring_entries, ==, 512);
    chk = blkfront_buf_alloc(bf, 8192);
    g_assert_cmpint(blkfront_io_sync(bf, BLKFRONT_OP_READ, 4096, chk, 8192),
                    ==, 0);
    fill(buf = g_malloc(8192), 8192, 99);
    g_assert_cmpmem(chk, 8192, buf, 8192);
    g_free(buf);
    blkfront_buf_free(bf, chk, 8192);
    blkfront_close(bf);
}

/*
 * The backend must parse our layout: a read with a 64-bit id (which sits
 * at offset 4 in x86_32, 8 in x86_64) comes back with the same id, and
 * the data is right.
 */
static void raw_id_roundtrip(blkfront *bf)
{
    uint8_t *page = blkfront_buf_alloc(bf, 4096);
    int64_t gfn = xensim_domu_gfn(dom, page);
    int ref = xensim_domu_grant(dom, blkfront_info(bf)->backend_id, gfn,
                                false);
    blkif_request_t req = { 0 };
    uint64_t id;
    int16_t status;

    g_assert_cmpint(ref, >=, 0);
    req.operation = BLKIF_OP_READ;
    req.nr_segments = 1;
    req.id = 0x0123456789abcdefull;
    req.sector_number = (5ull << 20) / 512;     /* written by integrity() */
    req.seg[0].gref = ref;
    req.seg[0].first_sect = 0;
    req.seg[0].last_sect = 7;
    g_assert_cmpint(blkfront_raw_put(bf, &req), ==, 0);
    blkfront_raw_push(bf);
    g_assert_cmpint(blkfront_raw_kick(bf), ==, 0);
    g_assert_cmpint(blkfront_wait(bf, 5000), ==, 0);
    g_assert_cmpint(blkfront_raw_response(bf, &id, &status), ==, 0);
    g_assert_cmphex(id, ==, 0x0123456789abcdefull);
    g_assert_cmpint(status, ==, BLKIF_RSP_OKAY);
    {
        uint8_t want[512];

        fill(want, 512, (5ull << 20) ^ 512 ^ 0);
        g_assert_cmpmem(page, 512, want, 512);
    }
    g_assert_cmpint(xensim_domu_end_grant(dom, ref), ==, 0);
    blkfront_buf_free(bf, page, 4096);
}

static void test_blk_protocol(gconstpointer data)
{
    enum blkfront_protocol proto = GPOINTER_TO_INT(data);
    blkfront *bf = connect(1, proto);

    g_assert_cmpuint(blkfront_info(bf)->ring_order, ==, 1);
    integrity(bf);
    raw_id_roundtrip(bf);
    blkfront_close(bf);
}

/*
 * Indirect descriptors as negotiated with this backend: with
 * feature-max-indirect-segments (QEMU with the indirect patch) a 1 MiB
 * I/O (256 pages) is 256 / min(backend's, ours) BLKIF_OP_INDIRECT
 * requests, without it 24 plain ones; an I/O of up to 11 pages is a
 * plain request either way (as Linux). Data integrity on every ABI, and
 * with indirect descriptors turned off.
 */
static void check_indirect(enum blkfront_protocol proto, int want,
                           int order)
{
    blkfront *bf = connect_indirect(order, proto, want);
    const struct blkfront_info *info = blkfront_info(bf);
    const struct blkfront_stats *st = blkfront_stats(bf);
    g_autofree char *be = xensim_ts_backend_path(DOMID, devid);
    g_autofree char *node = g_strdup_printf(
        "%s/feature-max-indirect-segments", be);
    uint64_t adv = 0, req0, ind0;
    unsigned int segs, mine = want < 0 ? 0 : want ? want : 32;
    struct blkfront_io io = { .op = BLKFRONT_OP_READ, .len = 1 << 20 };

    if (xensim_xs_read_u64(xs, XENSIM_XBT_NULL, node, &adv) < 0) {
        adv = 0;
    }
    g_assert_cmpuint(info->max_indirect_segments, ==, adv);
    segs = MIN(mine, adv);
    if (segs <= BLKIF_MAX_SEGMENTS_PER_REQUEST) {
        segs = 0;
    }
    g_assert_cmpuint(info->indirect_segments, ==, segs);
    g_test_message("backend offers %" G_GUINT64_FORMAT " indirect segments, "
                   "we use %u", adv, segs);

    io.buf = blkfront_buf_alloc(bf, io.len);
    g_assert_cmpuint(blkfront_io_nr_requests(bf, &io), ==,
                     segs ? 256 / segs + !!(256 % segs) : 24);
    req0 = st->requests;
    ind0 = st->indirect_requests;
    rw_check(bf, 3ull << 20, 1 << 20, 0);
    g_assert_cmpuint(st->requests - req0, ==,
                     2 * blkfront_io_nr_requests(bf, &io));
    /* a last request of 11 pages or fewer goes plain */
    g_assert_cmpuint(st->indirect_requests - ind0, ==,
                     segs ? 2 * (256 / segs + (256 % segs > 11)) : 0);
    /* 11 pages or fewer: plain requests even with indirect on */
    ind0 = st->indirect_requests;
    rw_check(bf, 7ull << 20, 11 * 4096, 0);
    rw_check(bf, 7ull << 20, 8192, 512);
    g_assert_cmpuint(st->indirect_requests, ==, ind0);
    integrity(bf);
    raw_id_roundtrip(bf);
    g_assert_cmpuint(st->responses, ==, st->requests);
    blkfront_buf_free(bf, io.buf, io.len);
    blkfront_close(bf);
}

static void test_blk_indirect(void)
{
    check_indirect(BLKFRONT_PROTO_NATIVE, 0, 0);
    check_indirect(BLKFRONT_PROTO_X86_32, 0, 1);
    check_indirect(BLKFRONT_PROTO_X86_64, 0, 0);
    check_indirect(BLKFRONT_PROTO_NATIVE, 256, 4);
    check_indirect(BLKFRONT_PROTO_X86_32, 4096, 0);
    check_indirect(BLKFRONT_PROTO_NATIVE, 12, 0);
    check_indirect(BLKFRONT_PROTO_NATIVE, 11, 0);
    check_indirect(BLKFRONT_PROTO_NATIVE, -1, 0);
}

/* req_event/rsp_event as ring.h defines them, seen from the frontend. */
static void test_blk_notify(void)
{
    blkfront *bf = connect(0, BLKFRONT_PROTO_NATIVE);
    uint8_t *page = blkfront_buf_alloc(bf, 4096);
    struct blkfront_ring_state rs;
    struct blkfront_io io = { .op = BLKFRONT_OP_READ, .offset = 0,
                              .len = 4096, .buf = page }, *done;
    const struct blkfront_stats *st = blkfront_stats(bf);
    uint64_t n0;

    /* Idle backend: it wants a kick for the next request. */
    blkfront_ring_state(bf, &rs);
    g_assert_cmpuint(rs.req_event, ==, rs.req_prod + 1);

    /* Pushed but not kicked: the backend does not see it. */
    g_assert_cmpint(blkfront_queue(bf, &io), ==, 0);
    blkfront_raw_push(bf);
    g_usleep(300 * 1000);
    g_assert_cmpuint(blkfront_reap(bf, &done, 1), ==, 0);
    blkfront_ring_state(bf, &rs);
    g_assert_cmpuint(rs.rsp_prod, ==, rs.rsp_cons);

    /* The kick gets it served. */
    n0 = st->notifies;
    g_assert_cmpint(blkfront_raw_kick(bf), ==, 0);
    g_assert_cmpint(blkfront_wait(bf, 5000), ==, 0);
    g_assert_cmpuint(blkfront_reap(bf, &done, 1), ==, 1);
    g_assert_true(done == &io);
    g_assert_cmpint(io.error, ==, 0);
    g_assert_cmpuint(st->notifies, ==, n0 + 1);
    /* We asked to be told about the next response. */
    blkfront_ring_state(bf, &rs);
    g_assert_cmpuint(rs.rsp_event, ==, rs.rsp_cons + 1);

    /* commit() kicks exactly once for a batch when the backend is idle. */
    n0 = st->notifies;
    g_assert_cmpint(blkfront_queue(bf, &io), ==, 0);
    g_assert_cmpint(blkfront_commit(bf), ==, 1);
    g_assert_cmpint(blkfront_commit(bf), ==, 0);        /* nothing new */
    g_assert_cmpint(blkfront_wait(bf, 5000), ==, 0);
    g_assert_cmpuint(blkfront_reap(bf, &done, 1), ==, 1);
    g_assert_cmpuint(st->notifies, ==, n0 + 1);
    blkfront_buf_free(bf, page, 4096);
    blkfront_close(bf);
}

/* --- fixture --------------------------------------------------------------- */

static int setup_stack(void)
{
    g_autoptr(GError) err = NULL;
    xensim_ts_opts opts = { 0 };
    xensim_ts_disk disk = { 0 };
    g_autofree char *be = NULL, *state = NULL;
    int fd;

    tmpdir = g_dir_make_tmp("xensim-domu-XXXXXX", NULL);
    logdir = g_build_filename(tmpdir, "logs", NULL);
    image = g_build_filename(tmpdir, "disk.raw", NULL);
    fd = open(image, O_CREAT | O_RDWR | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, DISK_BYTES) < 0) {
        return -1;
    }
    close(fd);

    opts.log_dir = logdir;
    disk.target = image;
    disk.format = "raw";
    ts = xensim_ts_start(&opts, &err);
    if (!ts ||
        !xensim_ts_domain_create(ts, DOMID, "domu-test", MEM_MB, &err) ||
        !xensim_ts_disk_add(ts, DOMID, &disk, &devid, &err) ||
        xensim_ts_qemu_start(ts, DOMID, qemu_path, NULL, &err) < 0) {
        fprintf(stderr, "stack: %s (logs in %s)\n", err->message, logdir);
        return -1;
    }
    be = xensim_ts_backend_path(DOMID, devid);
    state = g_strdup_printf("%s/state", be);
    if (!xensim_ts_wait_node(ts, state, "2", 30000, &err)) {
        fprintf(stderr, "stack: %s (logs in %s)\n", err->message, logdir);
        return -1;
    }
    dom = xensim_domu_open(xensim_ts_run_dir(ts), DOMID);
    if (!dom) {
        perror("xensim_domu_open");
        return -1;
    }
    xs = xensim_xs_open(dom);
    if (!xs) {
        perror("xensim_xs_open");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *missing = NULL;
    int ret;

    qemu_path = g_getenv("QEMU_UPSTREAM");
    if (!qemu_path) {
        qemu_path = XENSIM_SOURCE_ROOT "/build/upstream/obj/qemu-system-i386";
    }
    if (!g_file_test(qemu_path, G_FILE_TEST_IS_EXECUTABLE)) {
        missing = qemu_path;
    } else if (!g_file_test(xensim_ts_default_xenstored(),
                            G_FILE_TEST_IS_EXECUTABLE)) {
        missing = xensim_ts_default_xenstored();
    } else if (!g_file_test(xensim_ts_default_shim(), G_FILE_TEST_EXISTS)) {
        missing = xensim_ts_default_shim();
    }
    if (missing) {
        fprintf(stderr, "SKIP: %s not found\n", missing);
        return 77;
    }

    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/domu/xs/basic", test_xs_basic);
    g_test_add_func("/domu/xs/watch", test_xs_watch);
    g_test_add_func("/domu/xs/transaction", test_xs_transaction);
    g_test_add_func("/domu/xs/perms", test_xs_perms);
    g_test_add_func("/domu/blk/integrity", test_blk_integrity);
    g_test_add_func("/domu/blk/notify", test_blk_notify);
    g_test_add_func("/domu/blk/deep-queue", test_blk_deep_queue);
    g_test_add_func("/domu/blk/flush-discard", test_blk_flush_discard);
    g_test_add_func("/domu/blk/reconnect", test_blk_reconnect);
    g_test_add_func("/domu/blk/indirect", test_blk_indirect);
    g_test_add_data_func("/domu/blk/protocol/x86_32-abi",
                         GINT_TO_POINTER(BLKFRONT_PROTO_X86_32),
                         test_blk_protocol);
    g_test_add_data_func("/domu/blk/protocol/x86_64-abi",
                         GINT_TO_POINTER(BLKFRONT_PROTO_X86_64),
                         test_blk_protocol);

    if (setup_stack() < 0) {
        xensim_ts_teardown(ts, NULL);
        return 1;
    }
    ret = g_test_run();
    xensim_xs_close(xs);
    xensim_domu_close(dom);
    xensim_ts_teardown(ts, NULL);
    if (ret == 0) {
        g_unlink(image);
        /* logs are kept under tmpdir on failure */
    }
    return ret;
}
