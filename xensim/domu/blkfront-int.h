/*
 * xensim blkfront: ring ABIs and request splitting (private).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef XENSIM_BLKFRONT_INT_H
#define XENSIM_BLKFRONT_INT_H

#include "domu-int.h"

#include <xen/io/blkif.h>
#include <xen/io/protocols.h>

#include "xensim/blkfront.h"

/*
 * The two x86 ring ABIs of xen/io/blkif.h (see xen/io/protocols.h). The
 * public header only defines the including compiler's native layout, so
 * the other ones are declared here, field for field the same as
 * struct blkif_request / blkif_request_discard / blkif_response, with the
 * alignment of each ABI:
 *
 *  - x86_32: uint64_t is 4-byte aligned, so id sits at offset 4 and a
 *    request is 108 bytes, a response 12 (sizes checked below);
 *  - x86_64: uint64_t is 8-byte aligned (id at 8, 112 and 16 bytes),
 *    identical to the native layout on an x86_64 host.
 *
 * struct blkif_request_indirect overlays the first 64 bytes of a slot:
 * x86_32 packs it (id at 4, sector at 12, handle at 20, indirect_grefs
 * at 24, then the header's i386-only 8-byte pad), x86_64 aligns it (id at
 * 8, sector at 16, handle at 24, indirect_grefs at 28, 4 bytes of tail
 * padding); both are 64 bytes, as Linux blkback's x86_32/x86_64 views.
 */
#pragma pack(push, 4)
struct bf_x86_32_request {
    uint8_t operation;
    uint8_t nr_segments;
    blkif_vdev_t handle;
    uint64_t id;
    blkif_sector_t sector_number;
    struct blkif_request_segment seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};
struct bf_x86_32_request_discard {
    uint8_t operation;
    uint8_t flag;
    blkif_vdev_t handle;
    uint64_t id;
    blkif_sector_t sector_number;
    uint64_t nr_sectors;
};
struct bf_x86_32_request_indirect {
    uint8_t operation;
    uint8_t indirect_op;
    uint16_t nr_segments;
    uint64_t id;
    blkif_sector_t sector_number;
    blkif_vdev_t handle;
    grant_ref_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
    uint64_t pad;
};
struct bf_x86_32_response {
    uint64_t id;
    uint8_t operation;
    int16_t status;
};
#pragma pack(pop)

struct bf_x86_64_request {
    uint8_t operation;
    uint8_t nr_segments;
    blkif_vdev_t handle;
    uint64_t __attribute__((aligned(8))) id;
    blkif_sector_t __attribute__((aligned(8))) sector_number;
    struct blkif_request_segment seg[BLKIF_MAX_SEGMENTS_PER_REQUEST];
};
struct bf_x86_64_request_discard {
    uint8_t operation;
    uint8_t flag;
    blkif_vdev_t handle;
    uint64_t __attribute__((aligned(8))) id;
    blkif_sector_t __attribute__((aligned(8))) sector_number;
    uint64_t __attribute__((aligned(8))) nr_sectors;
};
struct bf_x86_64_request_indirect {
    uint8_t operation;
    uint8_t indirect_op;
    uint16_t nr_segments;
    uint64_t __attribute__((aligned(8))) id;
    blkif_sector_t __attribute__((aligned(8))) sector_number;
    blkif_vdev_t handle;
    grant_ref_t indirect_grefs[BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST];
};
struct bf_x86_64_response {
    uint64_t __attribute__((aligned(8))) id;
    uint8_t operation;
    int16_t status;
};

DEFINE_RING_TYPES(bf_x86_32, struct bf_x86_32_request,
                  struct bf_x86_32_response);
DEFINE_RING_TYPES(bf_x86_64, struct bf_x86_64_request,
                  struct bf_x86_64_response);

_Static_assert(sizeof(struct bf_x86_32_request) == 108, "x86_32 request");
_Static_assert(sizeof(struct bf_x86_32_response) == 12, "x86_32 response");
_Static_assert(offsetof(struct bf_x86_32_request, id) == 4, "x86_32 id");
_Static_assert(offsetof(struct bf_x86_32_request_discard, nr_sectors) == 20,
               "x86_32 discard");
_Static_assert(sizeof(struct bf_x86_32_request_indirect) == 64,
               "x86_32 indirect");
_Static_assert(offsetof(struct bf_x86_32_request_indirect, id) == 4 &&
               offsetof(struct bf_x86_32_request_indirect,
                        sector_number) == 12 &&
               offsetof(struct bf_x86_32_request_indirect, handle) == 20 &&
               offsetof(struct bf_x86_32_request_indirect,
                        indirect_grefs) == 24, "x86_32 indirect layout");
_Static_assert(sizeof(struct bf_x86_64_request) == 112, "x86_64 request");
_Static_assert(sizeof(struct bf_x86_64_request_indirect) == 64,
               "x86_64 indirect");
_Static_assert(offsetof(struct bf_x86_64_request_indirect, id) == 8 &&
               offsetof(struct bf_x86_64_request_indirect,
                        sector_number) == 16 &&
               offsetof(struct bf_x86_64_request_indirect, handle) == 24 &&
               offsetof(struct bf_x86_64_request_indirect,
                        indirect_grefs) == 28, "x86_64 indirect layout");
#if defined(__x86_64__)
/* The native view is x86_64's: blkfront builds requests in it. */
_Static_assert(sizeof(blkif_request_indirect_t) == 64 &&
               offsetof(blkif_request_indirect_t, id) ==
               offsetof(blkif_request_t, id) &&
               offsetof(blkif_request_indirect_t, sector_number) ==
               offsetof(blkif_request_t, sector_number) &&
               offsetof(blkif_request_indirect_t, indirect_grefs) == 28,
               "native indirect");
#endif
_Static_assert(sizeof(struct bf_x86_64_response) == 16, "x86_64 response");
_Static_assert(offsetof(struct bf_x86_64_request_discard, nr_sectors) == 24,
               "x86_64 discard");

/*
 * All three front rings share one shape (req_prod_pvt, rsp_cons, nr_ents,
 * sring) and their shared pages one 64-byte header, so the index-only
 * ring.h macros are applied to the native view whatever the ABI; only slot
 * access differs.
 */
union bf_front_ring {
    blkif_front_ring_t native;
    bf_x86_32_front_ring_t x86_32;
    bf_x86_64_front_ring_t x86_64;
};
_Static_assert(offsetof(struct bf_x86_32_sring, ring) ==
               offsetof(struct blkif_sring, ring), "sring header");
_Static_assert(offsetof(struct bf_x86_64_sring, ring) ==
               offsetof(struct blkif_sring, ring), "sring header");

/* Slots in a ring of 2^@order pages for @proto (a power of two). */
unsigned int bf_ring_entries(enum blkfront_protocol proto,
                             unsigned int order);

/* A request as blkfront builds it, in the native layout. */
union bf_request {
    blkif_request_t rw;
    blkif_request_discard_t discard;
    blkif_request_indirect_t indirect;
};

/* Segments in one indirect page: 512 (blkif.h, BLKIF_OP_INDIRECT). */
#define BF_SEGS_PER_INDIRECT_PAGE \
    (XENSIM_PAGE_SIZE / sizeof(struct blkif_request_segment))
/* The protocol's ceiling: 8 indirect pages of 512 segments. */
#define BF_MAX_INDIRECT_SEGS \
    (BF_SEGS_PER_INDIRECT_PAGE * BLKIF_MAX_INDIRECT_PAGES_PER_REQUEST)
_Static_assert(BF_MAX_INDIRECT_SEGS == BLKFRONT_MAX_INDIRECT_SEGMENTS,
               "indirect ceiling");

/* Indirect pages a request of @nseg segments needs (0 if it fits inline). */
static inline unsigned int bf_indirect_pages(unsigned int nseg)
{
    return nseg > BLKIF_MAX_SEGMENTS_PER_REQUEST ?
           (nseg + BF_SEGS_PER_INDIRECT_PAGE - 1) /
           BF_SEGS_PER_INDIRECT_PAGE : 0;
}

/*
 * Where a read or write of @nseg segments keeps its segment list: in the
 * request itself when they fit (as Linux blkfront, even when indirect
 * descriptors were negotiated), else in the indirect pages at @ind
 * (virtually contiguous, 512 segments per page, so one flat array).
 */
static inline struct blkif_request_segment *
bf_seg_list(union bf_request *r, unsigned int nseg, void *ind)
{
    return nseg > BLKIF_MAX_SEGMENTS_PER_REQUEST ? ind : r->rw.seg;
}

/*
 * Set the header of a read or write (@op BLKIF_OP_READ/WRITE) of @nseg
 * segments whose list bf_seg_list() gave: a plain request, or
 * BLKIF_OP_INDIRECT with @ind_ref the grants of its
 * bf_indirect_pages(@nseg) pages. id and sector_number are kept.
 */
void bf_set_rw(union bf_request *r, uint8_t op, unsigned int nseg,
               blkif_vdev_t handle, const uint32_t *ind_ref);

/* Store native request @r into slot @idx of @ring in @proto's layout. */
void bf_store_request(union bf_front_ring *ring,
                      enum blkfront_protocol proto, RING_IDX idx,
                      const blkif_request_t *r);

/* Load response @idx of @ring (read once, in @proto's layout). */
void bf_load_response(union bf_front_ring *ring,
                      enum blkfront_protocol proto, RING_IDX idx,
                      uint64_t *id, uint8_t *op, int16_t *status);

/*
 * Splitting an I/O into blkif segments, as Linux's blk-mq + xen-blkfront
 * do: the buffer is walked page by page; each page fragment is one
 * segment (first_sect..last_sect in 512-byte units within the page,
 * blkif.h "struct blkif_request_segment"); a request takes up to @max
 * segments: BLKIF_MAX_SEGMENTS_PER_REQUEST, or the indirect segments
 * negotiated (min of the backend's feature-max-indirect-segments and
 * ours), the queue's max_segments in Linux.
 */
struct bf_seg {
    uintptr_t page;             /* address of the page (4 KiB aligned) */
    uint8_t first_sect;
    uint8_t last_sect;
};

/*
 * Fill @seg with the segments of the next request of a buffer at @buf of
 * @len bytes, @done bytes of which are already covered; returns the bytes
 * this request covers (0 when done). @buf and @len must be 512-aligned.
 */
uint64_t bf_split_next(uintptr_t buf, uint64_t len, uint64_t done,
                       unsigned int max, struct bf_seg *seg,
                       unsigned int *nseg);

/* Number of requests bf_split_next() makes for (@buf, @len, @max). */
uint32_t bf_split_count(uintptr_t buf, uint64_t len, unsigned int max);

#endif /* XENSIM_BLKFRONT_INT_H */
