/*
 * xensim blkfront: ring ABIs and request splitting.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Pure functions over ring memory and buffer addresses, unit-tested
 * without a backend (test-domu-unit.c).
 */
#include <glib.h>

#include "blkfront-int.h"

unsigned int bf_ring_entries(enum blkfront_protocol proto,
                             unsigned int order)
{
    size_t size = (size_t)XENSIM_PAGE_SIZE << order;

    switch (proto) {
    case BLKFRONT_PROTO_X86_32:
        return __CONST_RING_SIZE(bf_x86_32, size);
    case BLKFRONT_PROTO_X86_64:
        return __CONST_RING_SIZE(bf_x86_64, size);
    case BLKFRONT_PROTO_NATIVE:
    default:
        return __CONST_RING_SIZE(blkif, size);
    }
}

/*
 * Field-by-field store into a slot of another ABI's layout; the discard
 * variant overlays the segment area with nr_sectors (blkif.h,
 * struct blkif_request_discard), the indirect one the whole header
 * (struct blkif_request_indirect: nr_segments is 16 bits at offset 2,
 * where a plain request has its handle). Bytes of the slot that the
 * layout leaves unused keep what was there.
 */
#define BF_STORE(dst, dtype, itype, r) do {                                 \
    if ((r)->operation == BLKIF_OP_INDIRECT) {                              \
        const blkif_request_indirect_t *ri_ = (const void *)(r);            \
        itype *di_ = (void *)(dst);                                         \
        di_->operation = ri_->operation;                                    \
        di_->indirect_op = ri_->indirect_op;                                \
        di_->nr_segments = ri_->nr_segments;                                \
        di_->id = ri_->id;                                                  \
        di_->sector_number = ri_->sector_number;                            \
        di_->handle = ri_->handle;                                          \
        memcpy(di_->indirect_grefs, ri_->indirect_grefs,                    \
               sizeof(di_->indirect_grefs));                                \
        break;                                                              \
    }                                                                       \
    (dst)->operation = (r)->operation;                                      \
    (dst)->handle = (r)->handle;                                            \
    (dst)->id = (r)->id;                                                    \
    (dst)->sector_number = (r)->sector_number;                              \
    if ((r)->operation == BLKIF_OP_DISCARD) {                               \
        const blkif_request_discard_t *rd_ = (const void *)(r);             \
        dtype *dd_ = (void *)(dst);                                         \
        dd_->flag = rd_->flag;                                              \
        dd_->nr_sectors = rd_->nr_sectors;                                  \
    } else {                                                                \
        (dst)->nr_segments = (r)->nr_segments;                              \
        memcpy((dst)->seg, (r)->seg,                                        \
               MIN((r)->nr_segments, BLKIF_MAX_SEGMENTS_PER_REQUEST) *      \
               sizeof((r)->seg[0]));                                        \
    }                                                                       \
} while (0)

void bf_store_request(union bf_front_ring *ring,
                      enum blkfront_protocol proto, RING_IDX idx,
                      const blkif_request_t *r)
{
    switch (proto) {
    case BLKFRONT_PROTO_X86_32: {
        struct bf_x86_32_request *s = RING_GET_REQUEST(&ring->x86_32, idx);

        BF_STORE(s, struct bf_x86_32_request_discard,
                 struct bf_x86_32_request_indirect, r);
        break;
    }
    case BLKFRONT_PROTO_X86_64: {
        struct bf_x86_64_request *s = RING_GET_REQUEST(&ring->x86_64, idx);

        BF_STORE(s, struct bf_x86_64_request_discard,
                 struct bf_x86_64_request_indirect, r);
        break;
    }
    case BLKFRONT_PROTO_NATIVE:
    default: {
        blkif_request_t *s = RING_GET_REQUEST(&ring->native, idx);

        BF_STORE(s, blkif_request_discard_t, blkif_request_indirect_t, r);
        break;
    }
    }
}

void bf_set_rw(union bf_request *r, uint8_t op, unsigned int nseg,
               blkif_vdev_t handle, const uint32_t *ind_ref)
{
    unsigned int i, nind = bf_indirect_pages(nseg);

    if (!nind) {
        r->rw.operation = op;
        r->rw.nr_segments = nseg;
        r->rw.handle = handle;
        return;
    }
    r->indirect.operation = BLKIF_OP_INDIRECT;
    r->indirect.indirect_op = op;
    r->indirect.nr_segments = nseg;
    r->indirect.handle = handle;
    for (i = 0; i < BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST; i++) {
        r->indirect.indirect_grefs[i] = i < nind ? ind_ref[i] : 0;
    }
}

void bf_load_response(union bf_front_ring *ring,
                      enum blkfront_protocol proto, RING_IDX idx,
                      uint64_t *id, uint8_t *op, int16_t *status)
{
    switch (proto) {
    case BLKFRONT_PROTO_X86_32: {
        struct bf_x86_32_response *s = RING_GET_RESPONSE(&ring->x86_32, idx);

        *id = DOMU_READ_ONCE(s->id);
        *op = DOMU_READ_ONCE(s->operation);
        *status = DOMU_READ_ONCE(s->status);
        break;
    }
    case BLKFRONT_PROTO_X86_64: {
        struct bf_x86_64_response *s = RING_GET_RESPONSE(&ring->x86_64, idx);

        *id = DOMU_READ_ONCE(s->id);
        *op = DOMU_READ_ONCE(s->operation);
        *status = DOMU_READ_ONCE(s->status);
        break;
    }
    case BLKFRONT_PROTO_NATIVE:
    default: {
        blkif_response_t *s = RING_GET_RESPONSE(&ring->native, idx);

        *id = DOMU_READ_ONCE(s->id);
        *op = DOMU_READ_ONCE(s->operation);
        *status = DOMU_READ_ONCE(s->status);
        break;
    }
    }
}

uint64_t bf_split_next(uintptr_t buf, uint64_t len, uint64_t done,
                       unsigned int max, struct bf_seg *seg,
                       unsigned int *nseg)
{
    uint64_t covered = 0;
    unsigned int n = 0;

    while (done + covered < len && n < max) {
        uintptr_t a = buf + done + covered;
        uintptr_t off = a & (XENSIM_PAGE_SIZE - 1);
        uint64_t chunk = MIN(XENSIM_PAGE_SIZE - off, len - done - covered);

        seg[n].page = a - off;
        seg[n].first_sect = off >> 9;
        seg[n].last_sect = ((off + chunk) >> 9) - 1;
        covered += chunk;
        n++;
    }
    *nseg = n;
    return covered;
}

uint32_t bf_split_count(uintptr_t buf, uint64_t len, unsigned int max)
{
    uintptr_t first = buf & ~(uintptr_t)(XENSIM_PAGE_SIZE - 1);
    uint64_t pages;

    if (!len) {
        return 0;
    }
    pages = (buf + len - 1 - first) / XENSIM_PAGE_SIZE + 1;
    return (pages + max - 1) / max;
}
