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
        bf_load_response(&ring, proto, i, &id, &st);
        g_assert_cmphex(id, ==, 0xfeed0000 + i);
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
 * Split (@buf, @len) and check every rule: <= 11 segments, each inside one
 * page, contiguous coverage of the buffer, and the request count.
 */
static void check_split(uintptr_t buf, uint64_t len, uint32_t want_reqs)
{
    struct bf_seg seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    uint64_t done = 0;
    uintptr_t expect = buf;
    uint32_t reqs = 0;

    g_assert_cmpuint(bf_split_count(buf, len), ==, want_reqs);
    for (;;) {
        unsigned int n, i;
        uint64_t covered = bf_split_next(buf, len, done, seg, &n);

        if (!covered) {
            g_assert_cmpuint(n, ==, 0);
            break;
        }
        g_assert_cmpuint(n, >=, 1);
        g_assert_cmpuint(n, <=, BLKIF_MAX_SEGMENTS_PER_REQUEST);
        /* Only the last request may be short of 11 segments. */
        if (done + covered < len) {
            g_assert_cmpuint(n, ==, BLKIF_MAX_SEGMENTS_PER_REQUEST);
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
    g_assert_cmpuint(bf_split_next(base + 512, 4096, 0, seg, &n), ==, 4096);
    g_assert_cmpuint(n, ==, 2);
    g_assert_cmpuint(seg[0].first_sect, ==, 1);
    g_assert_cmpuint(seg[0].last_sect, ==, 7);
    g_assert_cmphex(seg[1].page, ==, base + 4096);
    g_assert_cmpuint(seg[1].first_sect, ==, 0);
    g_assert_cmpuint(seg[1].last_sect, ==, 0);
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
    g_test_add_func("/domu/xs/ring-stream", test_xs_ring_stream);
    g_test_add_func("/domu/xs/errors", test_xs_errors);
    return g_test_run();
}
