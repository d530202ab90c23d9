/*
 * xensim domU library: tests that need no host.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * - the three blkif ring ABIs, checked byte by byte against the offsets
 *   xen/io/blkif.h implies for x86_32 (4-byte aligned uint64_t) and x86_64;
 * - request splitting: segments within a page, 11 per request, I/O that
 *   starts mid-page, sizes 512 B .. 4 MiB;
 * - the xenstore ring as a byte stream: wrap-around, partial writes when
 *   full, corrupt indices, the xs_wire error table.
 */
#include <errno.h>
#include <stdlib.h>

#include <glib.h>

#include "blkfront-int.h"

static void *page_alloc(size_t n)
{
    void *p = aligned_alloc(XENSIM_PAGE_SIZE, n * XENSIM_PAGE_SIZE);

    memset(p, 0, n * XENSIM_PAGE_SIZE);
    return p;
}

static void test_ring_entries(void)
{
    unsigned int order;

    for (order = 0; order <= BLKFRONT_MAX_RING_ORDER; order++) {
        /* (4096 << order) - 64 bytes of header over 108/112-byte slots,
         * rounded down to a power of two: 32 << order either way. */
        g_assert_cmpuint(bf_ring_entries(BLKFRONT_PROTO_NATIVE, order), ==,
                         32u << order);
        g_assert_cmpuint(bf_ring_entries(BLKFRONT_PROTO_X86_32, order), ==,
                         32u << order);
        g_assert_cmpuint(bf_ring_entries(BLKFRONT_PROTO_X86_64, order), ==,
                         32u << order);
    }
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v;

    memcpy(&v, p, 8);
    return v;
}

static uint32_t get32(const uint8_t *p)
{
    uint32_t v;

    memcpy(&v, p, 4);
    return v;
}

/*
 * Store a read/write request and a discard in slots 0 and 1 and check
 * them at the ABI's offsets: @stride is the slot size, @id_off the offset
 * of id (sector_number follows it, segments follow that).
 */
static void check_request_layout(enum blkfront_protocol proto,
                                 size_t stride, size_t id_off)
{
    uint8_t *page = page_alloc(1);
    union bf_front_ring ring;
    blkif_request_t r;
    blkif_request_discard_t *rd = (void *)&r;
    const uint8_t *s0, *s1;
    unsigned int i;

    SHARED_RING_INIT((blkif_sring_t *)page);
    FRONT_RING_INIT(&ring.native, (blkif_sring_t *)page, XENSIM_PAGE_SIZE);
    ring.native.nr_ents = bf_ring_entries(proto, 0);

    memset(&r, 0, sizeof(r));
    r.operation = BLKIF_OP_WRITE;
    r.nr_segments = 3;
    r.handle = 0xca00;
    r.id = 0x1122334455667788ull;
    r.sector_number = 0x0102030405060708ull;
    for (i = 0; i < 3; i++) {
        r.seg[i].gref = 100 + i;
        r.seg[i].first_sect = i;
        r.seg[i].last_sect = 7 - i;
    }
    bf_store_request(&ring, proto, 0, &r);

    memset(&r, 0, sizeof(r));
    rd->operation = BLKIF_OP_DISCARD;
    rd->flag = 0;
    rd->id = 42;
    rd->sector_number = 4096;
    rd->nr_sectors = 0xabcdef;
    bf_store_request(&ring, proto, 1, &r);

    s0 = page + 64;             /* after the 64-byte sring header */
    s1 = s0 + stride;
    g_assert_cmpuint(s0[0], ==, BLKIF_OP_WRITE);
    g_assert_cmpuint(s0[1], ==, 3);
    g_assert_cmpuint(s0[2] | s0[3] << 8, ==, 0xca00);
    g_assert_cmphex(get64(s0 + id_off), ==, 0x1122334455667788ull);
    g_assert_cmphex(get64(s0 + id_off + 8), ==, 0x0102030405060708ull);
    for (i = 0; i < 3; i++) {
        const uint8_t *seg = s0 + id_off + 16 + 8 * i;

        g_assert_cmpuint(get32(seg), ==, 100 + i);
        g_assert_cmpuint(seg[4], ==, i);
        g_assert_cmpuint(seg[5], ==, 7 - i);
    }
    g_assert_cmpuint(s1[0], ==, BLKIF_OP_DISCARD);
    g_assert_cmphex(get64(s1 + id_off), ==, 42);
    g_assert_cmphex(get64(s1 + id_off + 8), ==, 4096);
    g_assert_cmphex(get64(s1 + id_off + 16), ==, 0xabcdef);
    free(page);
}

static void test_request_layout(void)
{
    check_request_layout(BLKFRONT_PROTO_X86_32, 108, 4);
    check_request_layout(BLKFRONT_PROTO_X86_64, 112, 8);
    check_request_layout(BLKFRONT_PROTO_NATIVE, 112, 8);
}

/* Backend writes responses at the ABI's offsets; we must read them back. */
static void check_response_layout(enum blkfront_protocol proto,
                                  size_t stride, size_t status_off)
{
    uint8_t *page = page_alloc(1);
    union bf_front_ring ring;
    uint64_t id;
    int16_t st;
    uint8_t op;
    unsigned int i;

    SHARED_RING_INIT((blkif_sring_t *)page);
    FRONT_RING_INIT(&ring.native, (blkif_sring_t *)page, XENSIM_PAGE_SIZE);
    ring.native.nr_ents = bf_ring_entries(proto, 0);
    for (i = 0; i < 3; i++) {
        uint8_t *s = page + 64 + i * stride;
        uint64_t v = 0xfeed0000 + i;
        int16_t status = i == 1 ? BLKIF_RSP_ERROR : BLKIF_RSP_OKAY;

        memcpy(s, &v, 8);
        s[8] = BLKIF_OP_READ;
        memcpy(s + status_off, &status, 2);
    }
    for (i = 0; i < 3; i++) {
        bf_load_response(&ring, proto, i, &id, &op, &st);
        g_assert_cmphex(id, ==, 0xfeed0000 + i);
        g_assert_cmpuint(op, ==, BLKIF_OP_READ);
        g_assert_cmpint(st, ==, i == 1 ? BLKIF_RSP_ERROR : BLKIF_RSP_OKAY);
    }
    free(page);
}

static void test_response_layout(void)
{
    /* Responses share the slots (a union) with the requests. */
    check_response_layout(BLKFRONT_PROTO_X86_32, 108, 10);
    check_response_layout(BLKFRONT_PROTO_X86_64, 112, 10);
    check_response_layout(BLKFRONT_PROTO_NATIVE, 112, 10);
}

/*
 * Split (@buf, @len) into requests of at most @max segments and check
 * every rule: <= @max segments, each inside one page, contiguous coverage
 * of the buffer, and the request count.
 */
static void check_split_max(uintptr_t buf, uint64_t len, unsigned int max,
                            uint32_t want_reqs)
{
    struct bf_seg *seg = g_new(struct bf_seg, max);
    uint64_t done = 0;
    uintptr_t expect = buf;
    uint32_t reqs = 0;

    g_assert_cmpuint(bf_split_count(buf, len, max), ==, want_reqs);
    for (;;) {
        unsigned int n, i;
        uint64_t covered = bf_split_next(buf, len, done, max, seg, &n);

        if (!covered) {
            g_assert_cmpuint(n, ==, 0);
            break;
        }
        g_assert_cmpuint(n, >=, 1);
        g_assert_cmpuint(n, <=, max);
        /* Only the last request may be short of @max segments. */
        if (done + covered < len) {
            g_assert_cmpuint(n, ==, max);
        }
        for (i = 0; i < n; i++) {
            g_assert_cmphex(seg[i].page % XENSIM_PAGE_SIZE, ==, 0);
            g_assert_cmpuint(seg[i].first_sect, <=, seg[i].last_sect);
            g_assert_cmpuint(seg[i].last_sect, <, 8);
            g_assert_cmphex(seg[i].page + seg[i].first_sect * 512, ==,
                            expect);
            expect = seg[i].page + (seg[i].last_sect + 1) * 512;
            /* Inner segments span to the page edges. */
            if (expect < buf + len) {
                g_assert_cmpuint(seg[i].last_sect, ==, 7);
            }
        }
        done += covered;
        reqs++;
    }
    g_assert_cmpuint(done, ==, len);
    g_assert_cmphex(expect, ==, buf + len);
    g_assert_cmpuint(reqs, ==, want_reqs);
    g_free(seg);
}

static void check_split(uintptr_t buf, uint64_t len, uint32_t want_reqs)
{
    check_split_max(buf, len, BLKIF_MAX_SEGMENTS_PER_REQUEST, want_reqs);
}

static void test_split(void)
{
    const uintptr_t base = 0x100000;    /* page aligned */
    static const struct {
        uintptr_t off;
        uint64_t len;
        uint32_t reqs;
    } cases[] = {
        { 0, 512, 1 },
        { 3584, 512, 1 },               /* last sector of a page */
        { 512, 4096, 1 },               /* mid-page: 2 segments */
        { 0, 4096, 1 },
        { 0, 11 * 4096, 1 },            /* exactly one full request */
        { 512, 11 * 4096, 2 },          /* 12 pages touched */
        { 0, 12 * 4096, 2 },
        { 0, 64 * 1024, 2 },
        { 0, 256 * 1024, 6 },           /* 64 pages */
        { 0, 1024 * 1024, 24 },         /* 256 pages */
        { 0, 4 * 1024 * 1024, 94 },     /* 1024 pages */
        { 512, 4 * 1024 * 1024, 94 },   /* 1025 pages */
        { 1024, 4 * 1024 * 1024 - 1024, 94 },
    };
    struct bf_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    unsigned int i, n;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        check_split(base + cases[i].off, cases[i].len, cases[i].reqs);
    }

    /* Mid-page 4 KiB: sectors 1..7 of the first page, 0..0 of the next. */
    g_assert_cmpuint(bf_split_next(base + 512, 4096, 0,
                                   BLKIF_MAX_SEGMENTS_PER_REQUEST, seg, &n),
                     ==, 4096);
    g_assert_cmpuint(n, ==, 2);
    g_assert_cmpuint(seg[0].first_sect, ==, 1);
    g_assert_cmpuint(seg[0].last_sect, ==, 7);
    g_assert_cmphex(seg[1].page, ==, base + 4096);
    g_assert_cmpuint(seg[1].first_sect, ==, 0);
    g_assert_cmpuint(seg[1].last_sect, ==, 0);
}

/*
 * With indirect segments negotiated (Linux's default 32, QEMU's likely
 * 256, the protocol's 4096), a large I/O becomes requests of that many
 * pages; the count is what blkfront_io_nr_requests() promises.
 */
static void test_split_indirect(void)
{
    const uintptr_t base = 0x100000;
    static const struct {
        uintptr_t off;
        uint64_t len;
        unsigned int max;
        uint32_t reqs;
    } cases[] = {
        { 0, 4096, 32, 1 },
        { 0, 12 * 4096, 32, 1 },            /* 12 pages: one, indirect */
        { 0, 32 * 4096, 32, 1 },
        { 512, 32 * 4096, 32, 2 },          /* 33 pages touched */
        { 0, 1024 * 1024, 32, 8 },          /* 256 pages */
        { 0, 1024 * 1024, 256, 1 },
        { 1024, 1024 * 1024, 256, 2 },      /* 257 pages */
        { 0, 4 * 1024 * 1024, 32, 32 },
        { 0, 4 * 1024 * 1024, 4096, 1 },
        { 0, 16 * 1024 * 1024, 4096, 1 },   /* 8 full indirect pages */
        { 0, 1024 * 1024, 12, 22 },         /* 21 of 12 and one of 4 */
    };
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        check_split_max(base + cases[i].off, cases[i].len, cases[i].max,
                        cases[i].reqs);
    }
    g_assert_cmpuint(bf_indirect_pages(1), ==, 0);
    g_assert_cmpuint(bf_indirect_pages(11), ==, 0);
    g_assert_cmpuint(bf_indirect_pages(12), ==, 1);
    g_assert_cmpuint(bf_indirect_pages(512), ==, 1);
    g_assert_cmpuint(bf_indirect_pages(513), ==, 2);
    g_assert_cmpuint(bf_indirect_pages(4096), ==, 8);
    g_assert_cmpuint(BF_SEGS_PER_INDIRECT_PAGE, ==, 512);
}

/*
 * A read of @nseg pages built as blkfront builds it (bf_split_next,
 * bf_seg_list, bf_set_rw) and stored in slot 0 of a @proto ring: up to
 * 11 segments it is a plain request with the list inline; beyond, it is
 * BLKIF_OP_INDIRECT at the ABI's offsets (@id_off: id; sector follows;
 * @handle_off, @grefs_off), with the list in the indirect pages, 8 bytes
 * a segment, 512 a page.
 */
static void check_indirect_request(enum blkfront_protocol proto,
                                   unsigned int nseg, size_t id_off,
                                   size_t handle_off, size_t grefs_off)
{
    const uintptr_t base = 0x200000;
    uint8_t *page = page_alloc(1);
    uint8_t *ind = page_alloc(BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST);
    struct bf_seg *seg = g_new(struct bf_seg, nseg);
    uint32_t ind_ref[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
    struct blkif_request_segment *list;
    union bf_front_ring ring;
    union bf_request r;
    unsigned int n, i, nind = bf_indirect_pages(nseg);
    const uint8_t *s0;

    SHARED_RING_INIT((blkif_sring_t *)page);
    FRONT_RING_INIT(&ring.native, (blkif_sring_t *)page, XENSIM_PAGE_SIZE);
    ring.native.nr_ents = bf_ring_entries(proto, 0);
    memset(page + 64, 0xcc, XENSIM_PAGE_SIZE - 64);
    memset(ind, 0xcc, BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST * XENSIM_PAGE_SIZE);

    /* 512 bytes in, so the first segment is sectors 1..7, the last 0..0 */
    g_assert_cmpuint(bf_split_next(base + 512, (uint64_t)(nseg - 1) * 4096,
                                   0, nseg, seg, &n), ==,
                     (uint64_t)(nseg - 1) * 4096);
    g_assert_cmpuint(n, ==, nseg);
    memset(&r, 0, sizeof(r));
    r.rw.id = 0x1122334455667788ull;
    r.rw.sector_number = 0x0102030405060708ull;
    list = bf_seg_list(&r, n, ind);
    g_assert_true(nind ? (void *)list == ind : list == r.rw.seg);
    for (i = 0; i < n; i++) {
        list[i].gref = 1000 + i;
        list[i].first_sect = seg[i].first_sect;
        list[i].last_sect = seg[i].last_sect;
    }
    for (i = 0; i < nind; i++) {
        ind_ref[i] = 50 + i;
    }
    bf_set_rw(&r, BLKIF_OP_WRITE, n, 0xca00, ind_ref);
    bf_store_request(&ring, proto, 0, &r.rw);

    s0 = page + 64;
    g_assert_cmphex(get64(s0 + id_off), ==, 0x1122334455667788ull);
    g_assert_cmphex(get64(s0 + id_off + 8), ==, 0x0102030405060708ull);
    if (!nind) {
        g_assert_cmpuint(s0[0], ==, BLKIF_OP_WRITE);
        g_assert_cmpuint(s0[1], ==, n);
        g_assert_cmpuint(s0[2] | s0[3] << 8, ==, 0xca00);
        for (i = 0; i < n; i++) {
            const uint8_t *sg = s0 + id_off + 16 + 8 * i;

            g_assert_cmpuint(get32(sg), ==, 1000 + i);
        }
        /* nothing went to an indirect page */
        g_assert_cmpuint(ind[0], ==, 0xcc);
        goto out;
    }
    g_assert_cmpuint(s0[0], ==, BLKIF_OP_INDIRECT);
    g_assert_cmpuint(s0[1], ==, BLKIF_OP_WRITE);            /* indirect_op */
    g_assert_cmpuint(s0[2] | s0[3] << 8, ==, n);            /* 16 bits */
    g_assert_cmpuint(s0[handle_off] | s0[handle_off + 1] << 8, ==, 0xca00);
    for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++) {
        g_assert_cmpuint(get32(s0 + grefs_off + 4 * i), ==,
                         i < nind ? 50 + i : 0);
    }
    /* the slot's bytes past the 64-byte indirect header are not written */
    g_assert_cmpuint(s0[64], ==, 0xcc);
    /* segment k is at byte 8k % 4096 of indirect page k / 512 */
    for (i = 0; i < n; i++) {
        const uint8_t *sg = ind + (i / 512) * XENSIM_PAGE_SIZE +
                            (i % 512) * 8;

        g_assert_cmpuint(get32(sg), ==, 1000 + i);
        g_assert_cmpuint(sg[4], ==, i ? 0 : 1);
        g_assert_cmpuint(sg[5], ==, i == n - 1 ? 0 : 7);
    }
    /* and nothing past the list */
    if (n % 512) {
        g_assert_cmpuint(ind[n * 8], ==, 0xcc);
    }
out:
    g_free(seg);
    free(ind);
    free(page);
}

static void test_indirect_layout(void)
{
    static const unsigned int nsegs[] = { 11, 12, 32, 256, 512, 513, 4096 };
    unsigned int i;

    /* Native on this x86_64 host is x86_64's layout. */
    G_STATIC_ASSERT(sizeof(blkif_request_indirect_t) == 64);
    G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, indirect_op) == 1);
    G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, nr_segments) == 2);
    G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, id) == 8);
    G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, sector_number) == 16);
    G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, handle) == 24);
    G_STATIC_ASSERT(offsetof(blkif_request_indirect_t, indirect_grefs) == 28);
    G_STATIC_ASSERT(sizeof(struct bf_x86_32_request_indirect) == 64);
    G_STATIC_ASSERT(offsetof(struct bf_x86_32_request_indirect, id) == 4);
    G_STATIC_ASSERT(offsetof(struct bf_x86_32_request_indirect,
                             sector_number) == 12);
    G_STATIC_ASSERT(offsetof(struct bf_x86_32_request_indirect, handle) == 20);
    G_STATIC_ASSERT(offsetof(struct bf_x86_32_request_indirect,
                             indirect_grefs) == 24);
    G_STATIC_ASSERT(offsetof(struct bf_x86_32_request_indirect, pad) == 56);
    G_STATIC_ASSERT(sizeof(struct bf_x86_64_request_indirect) == 64);
    G_STATIC_ASSERT(offsetof(struct bf_x86_64_request_indirect,
                             indirect_grefs) == 28);
    G_STATIC_ASSERT(sizeof(struct blkif_request_segment) == 8);

    for (i = 0; i < G_N_ELEMENTS(nsegs); i++) {
        check_indirect_request(BLKFRONT_PROTO_X86_32, nsegs[i], 4, 20, 24);
        check_indirect_request(BLKFRONT_PROTO_X86_64, nsegs[i], 8, 24, 28);
        check_indirect_request(BLKFRONT_PROTO_NATIVE, nsegs[i], 8, 24, 28);
    }
}

/* --- xenstore ring -------------------------------------------------------- */

static void test_xs_ring_stream(void)
{
    struct xenstore_domain_interface *intf = page_alloc(1);
    uint8_t in[3000], out[3000];
    size_t i, sent = 0, got = 0;

    for (i = 0; i < sizeof(in); i++) {
        in[i] = i * 7 + 3;
    }
    /* Start near the index wrap to exercise it too. */
    intf->req_cons = intf->req_prod = UINT32_MAX - 100;

    /* Full ring: 1024 bytes go in, then nothing until the peer reads. */
    g_assert_cmpint(xs_ring_put(intf->req, &intf->req_cons, &intf->req_prod,
                                in, sizeof(in)), ==, XENSTORE_RING_SIZE);
    sent = XENSTORE_RING_SIZE;
    g_assert_cmpint(xs_ring_put(intf->req, &intf->req_cons, &intf->req_prod,
                                in + sent, sizeof(in) - sent), ==, 0);
    while (got < sizeof(in)) {
        ssize_t n = xs_ring_get(intf->req, &intf->req_cons, &intf->req_prod,
                                out + got, 700);

        g_assert_cmpint(n, >, 0);
        got += n;
        if (sent < sizeof(in)) {
            n = xs_ring_put(intf->req, &intf->req_cons, &intf->req_prod,
                            in + sent, sizeof(in) - sent);
            g_assert_cmpint(n, >, 0);
            sent += n;
        }
    }
    g_assert_cmpmem(in, sizeof(in), out, sizeof(out));
    g_assert_cmpuint(intf->req_prod - intf->req_cons, ==, 0);
    g_assert_cmpint(xs_ring_get(intf->req, &intf->req_cons, &intf->req_prod,
                                out, 10), ==, 0);

    /* A peer that claims more than a ring's worth is refused. */
    intf->rsp_prod = intf->rsp_cons + XENSTORE_RING_SIZE + 1;
    errno = 0;
    g_assert_cmpint(xs_ring_get(intf->rsp, &intf->rsp_cons, &intf->rsp_prod,
                                out, 10), ==, -1);
    g_assert_cmpint(errno, ==, EIO);
    free(intf);
}

static void test_xs_errors(void)
{
    g_assert_cmpint(xs_error_to_errno("EACCES"), ==, EACCES);
    g_assert_cmpint(xs_error_to_errno("EAGAIN"), ==, EAGAIN);
    g_assert_cmpint(xs_error_to_errno("ENOENT"), ==, ENOENT);
    g_assert_cmpint(xs_error_to_errno("E2BIG"), ==, E2BIG);
    g_assert_cmpint(xs_error_to_errno("bogus"), ==, EINVAL);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/domu/blkif/ring-entries", test_ring_entries);
    g_test_add_func("/domu/blkif/request-layout", test_request_layout);
    g_test_add_func("/domu/blkif/response-layout", test_response_layout);
    g_test_add_func("/domu/blkif/split", test_split);
    g_test_add_func("/domu/blkif/split-indirect", test_split_indirect);
    g_test_add_func("/domu/blkif/indirect-layout", test_indirect_layout);
    g_test_add_func("/domu/xs/ring-stream", test_xs_ring_stream);
    g_test_add_func("/domu/xs/errors", test_xs_errors);
    return g_test_run();
}
