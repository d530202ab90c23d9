/*
 * xensim blkfront: a Xen PV block frontend in user space.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Negotiates with a blkif backend (QEMU's xen-block, or any other) the way
 * Linux xen-blkfront does, over xenstore (xen/io/blkif.h, "Feature and
 * Parameter Negotiation"):
 *
 *   backend InitWait -> frontend writes ring-ref / ring-refN +
 *   ring-page-order, event-channel, protocol, feature-persistent=0 and
 *   goes Initialised -> backend Connected -> frontend reads sectors,
 *   sector-size, info, feature-flush-cache, feature-discard,
 *   feature-max-indirect-segments, ... and goes Connected.
 *
 * Data path, all in the caller's thread, no locks, no syscall except the
 * event-channel notify and (when blocking) poll():
 *
 *   blkfront_queue()   splits an I/O into blkif requests of at most
 *                      BLKIF_MAX_SEGMENTS_PER_REQUEST one-page segments, or
 *                      of the negotiated indirect segments (a request of
 *                      more than 11 goes as BLKIF_OP_INDIRECT, its segment
 *                      list in indirect pages granted read-only for the
 *                      request's lifetime, as Linux does without
 *                      persistent grants), and writes them to the ring,
 *                      without notifying;
 *   blkfront_commit()  RING_PUSH_REQUESTS_AND_CHECK_NOTIFY, one notify if
 *                      the backend asked for it (req_event);
 *   blkfront_reap()    consumes responses, re-arming rsp_event with
 *                      RING_FINAL_CHECK_FOR_RESPONSES, and completes an
 *                      I/O when all its requests have answered;
 *   blkfront_wait()    blocks on the event channel fd, or busy-polls.
 *
 * Data buffers must live in the domain's memory (xensim_domu_alloc_pages
 * or blkfront_buf_alloc) and be 512-byte aligned; they need not be page
 * aligned (an I/O may start mid-page, as a bio can). Each data page is
 * granted to the backend the first time it is used and the grant is kept
 * for reuse; without feature-persistent the backend grant-copies, so the
 * grant stays valid across requests. When the grant table runs out, grants
 * of idle pages are revoked and reused (least recently granted first).
 *
 * Units: byte offsets and lengths in the API, 512-byte sectors on the
 * wire (blkif.h: sector_number, first_sect/last_sect), whatever the
 * backend's sector-size (which is reported).
 */
#ifndef XENSIM_BLKFRONT_H
#define XENSIM_BLKFRONT_H

#include <stdbool.h>
#include <stdint.h>

#include <xen/io/blkif.h>

#include "xensim/domu.h"

typedef struct blkfront blkfront;

/* Ring ABI written to the "protocol" node (xen/io/protocols.h). */
enum blkfront_protocol {
    BLKFRONT_PROTO_NATIVE = 0,  /* this host's ABI, written as such */
    BLKFRONT_PROTO_X86_32,      /* "x86_32-abi": 4-byte aligned uint64_t */
    BLKFRONT_PROTO_X86_64,      /* "x86_64-abi" */
};

/* Largest ring-page-order we offer: 2^4 pages, as QEMU's default max. */
#define BLKFRONT_MAX_RING_ORDER 4

/* Linux xen-blkfront's default max_indirect_segments. */
#define BLKFRONT_DEFAULT_INDIRECT_SEGMENTS 32
/* blkif.h's ceiling: 8 indirect pages of 512 segments. */
#define BLKFRONT_MAX_INDIRECT_SEGMENTS 4096

struct blkfront_opts {
    uint32_t devid;             /* device/vbd/<devid> */
    /*
     * ring-page-order to use: 0 (default, Linux's default too), up to the
     * backend's max-ring-page-order (larger values are capped to it), or
     * -1 for the backend's maximum (capped at BLKFRONT_MAX_RING_ORDER).
     */
    int ring_order;
    enum blkfront_protocol protocol;
    bool poll;                  /* blkfront_wait() busy-polls the ring */
    /*
     * Push each request as it is queued, as Linux blkfront pushes every
     * block-layer request (of at most 11 pages); by default
     * blkfront_commit() pushes all that was queued since the last one.
     */
    bool push_each;
    int timeout_ms;             /* control-plane waits; 0: 10000 */
    /*
     * Segments per request we accept with indirect descriptors, as Linux
     * blkfront's max_indirect_segments: 0 for its default,
     * BLKFRONT_DEFAULT_INDIRECT_SEGMENTS; -1 none (plain requests only);
     * else up to BLKFRONT_MAX_INDIRECT_SEGMENTS. Used only when the
     * backend offers feature-max-indirect-segments, capped to it, and
     * only if that leaves more than BLKIF_MAX_SEGMENTS_PER_REQUEST.
     */
    int max_indirect_segments;
};

/* What the backend announced at Connected (blkif.h, backend nodes). */
struct blkfront_info {
    uint32_t backend_id;
    char backend[128];          /* backend xenstore path */
    uint64_t sectors;           /* "sectors": size in sector-size units */
    uint32_t sector_size;       /* "sector-size", bytes */
    uint32_t info;              /* "info": VDISK_* flags */
    bool feature_flush;         /* "feature-flush-cache" */
    bool feature_discard;       /* "feature-discard" */
    uint32_t discard_granularity;   /* bytes */
    uint32_t discard_alignment;     /* bytes */
    uint32_t max_ring_order;    /* backend "max-ring-page-order" */
    uint32_t ring_order;        /* what we use */
    uint32_t ring_entries;      /* slots in the ring */
    /* backend "feature-max-indirect-segments" (0: absent) */
    uint32_t max_indirect_segments;
    /* segments per request we use with BLKIF_OP_INDIRECT (0: none) */
    uint32_t indirect_segments;
};

/* Guest-side counters (not reset by reconnect). */
struct blkfront_stats {
    uint64_t ios;               /* I/Os queued */
    uint64_t requests;          /* blkif requests put on the ring */
    uint64_t responses;         /* blkif responses consumed */
    uint64_t notifies;          /* event-channel kicks sent to the backend */
    uint64_t commits;           /* blkfront_commit() calls that pushed */
    uint64_t events;            /* events received from the backend */
    uint64_t grants;            /* grant entries written for data pages */
    uint64_t grant_evictions;   /* idle data-page grants revoked for reuse */
    uint64_t indirect_requests; /* of requests: BLKIF_OP_INDIRECT ones */
    uint64_t wrong_op_responses;    /* with another operation: errors */
};

/*
 * Connect device @o->devid of domain @d, using @xs for xenstore (borrowed,
 * must outlive the blkfront). Blocks up to @o->timeout_ms for each backend
 * state change. Returns NULL with errno: ENOENT (no such device),
 * ETIMEDOUT (backend did not reach InitWait/Connected), EINVAL (bad
 * options), ENOMEM, or the xenstore error. The reason is logged at
 * XENSIM_LOG_ERR.
 */
blkfront *blkfront_connect(xensim_domu *d, xensim_xs *xs,
                           const struct blkfront_opts *o);

/*
 * Close cleanly: Closing, wait for the backend to reach Closing/Closed,
 * Closed, wait for the backend's Closed (it has unmapped the ring), then
 * free the ring. In-flight I/O must have completed. Then, if @reconnect,
 * switch to Initialising and negotiate again (the backend goes back to
 * InitWait), keeping the data grants; otherwise leave it Closed.
 */
int blkfront_disconnect(blkfront *bf, bool reconnect);

/* Disconnect (not reconnecting) if connected, and free; NULL accepted. */
void blkfront_close(blkfront *bf);

/*
 * Free without a word to the backend (it died, or the host is being torn
 * down): the ring's grants are ended (a grant still mapped is leaked, with
 * a warning) and the ring and data grants freed. NULL accepted.
 */
void blkfront_abandon(blkfront *bf);

const struct blkfront_info *blkfront_info(const blkfront *bf);
const struct blkfront_stats *blkfront_stats(const blkfront *bf);

/* The event channel fd (readable when a response event is pending). */
int blkfront_fd(const blkfront *bf);

/* --- I/O ------------------------------------------------------------------ */

enum blkfront_op {
    BLKFRONT_OP_READ,
    BLKFRONT_OP_WRITE,
    BLKFRONT_OP_FLUSH,          /* BLKIF_OP_FLUSH_DISKCACHE, no data */
    BLKFRONT_OP_DISCARD,        /* BLKIF_OP_DISCARD of [offset, +len) */
};

struct blkfront_io {
    /* set by the caller */
    enum blkfront_op op;
    uint64_t offset;            /* bytes, multiple of 512 */
    uint64_t len;               /* bytes, multiple of 512; 0 for flush */
    void *buf;                  /* read/write: in domain memory, 512-aligned */
    void *opaque;
    /* set on completion */
    int error;                  /* 0, -EIO (BLKIF_RSP_ERROR), -EOPNOTSUPP */
    /* private */
    uint32_t reqs_left;         /* requests not yet answered */
    uint32_t reqs_unqueued;     /* requests not yet on the ring */
    uint64_t next_off;          /* progress of splitting, bytes */
    struct blkfront_io *next;
};

/*
 * Number of blkif requests @io becomes on @bf's connection: read/write,
 * one per 11 pages the buffer touches, or per info.indirect_segments
 * pages when indirect descriptors are in use (segments are page
 * fragments; an I/O starting mid-page touches one more page); flush 1;
 * discard 1.
 */
uint32_t blkfront_io_nr_requests(const blkfront *bf,
                                 const struct blkfront_io *io);

/*
 * Put @io's requests on the ring (private producer index; nothing is
 * visible to the backend until commit). If the ring cannot take all of
 * them, the rest are queued after it and go out as responses free slots
 * (in blkfront_reap()). Fails with EAGAIN, taking nothing, while an
 * earlier I/O is still waiting for ring space, and EINVAL for a malformed
 * I/O (alignment, buffer outside domain memory, beyond the disk,
 * flush/discard the backend did not offer: EOPNOTSUPP).
 */
int blkfront_queue(blkfront *bf, struct blkfront_io *io);

/* True while an I/O waits for ring space (blkfront_queue gives EAGAIN). */
bool blkfront_busy(const blkfront *bf);

/*
 * Publish queued requests (RING_PUSH_REQUESTS_AND_CHECK_NOTIFY) and kick
 * the backend if it asked for it. Returns 1 if it notified, 0 if not.
 */
int blkfront_commit(blkfront *bf);

/*
 * Consume all available responses and return up to @max completed I/Os in
 * @done (completed I/Os beyond @max wait for the next call). Refills the
 * ring from the waiting I/O and commits it. Never blocks.
 */
unsigned int blkfront_reap(blkfront *bf, struct blkfront_io **done,
                           unsigned int max);

/* I/Os queued and not yet returned by blkfront_reap(). */
unsigned int blkfront_inflight(const blkfront *bf);

/*
 * Wait until responses are available (or a completed I/O is waiting to be
 * reaped), up to @timeout_ms (< 0: forever). Busy-polls the ring if the
 * blkfront was opened with poll, else blocks in poll() on the event
 * channel and consumes the event. -1 ETIMEDOUT.
 */
int blkfront_wait(blkfront *bf, int timeout_ms);

/*
 * Synchronous helper: queue, commit and wait for one I/O. Returns 0 or
 * -1 with errno (EIO, EOPNOTSUPP, or the queueing error).
 */
int blkfront_io_sync(blkfront *bf, enum blkfront_op op, uint64_t offset,
                     void *buf, uint64_t len);

/* Allocate page-aligned buffer space in domain memory (free with _free). */
void *blkfront_buf_alloc(blkfront *bf, size_t bytes);
void blkfront_buf_free(blkfront *bf, void *buf, size_t bytes);

/* --- low level, for tests ------------------------------------------------- */

/*
 * Copy the native-layout request @req into the next free ring slot (in the
 * negotiated protocol's layout) and advance the private producer. A
 * BLKIF_OP_INDIRECT @req is read as the blkif_request_indirect_t that
 * overlays it (the caller grants its indirect pages). Its id
 * is used verbatim: responses with ids that are not ours are counted and
 * ignored by blkfront_reap() but can be read with blkfront_raw_response().
 * EAGAIN if the ring is full.
 */
int blkfront_raw_put(blkfront *bf, const blkif_request_t *req);

/* Publish requests without notifying (req_prod = private producer). */
void blkfront_raw_push(blkfront *bf);

/* Notify the backend unconditionally. */
int blkfront_raw_kick(blkfront *bf);

struct blkfront_ring_state {
    RING_IDX req_prod, req_event, rsp_prod, rsp_event;  /* shared page */
    RING_IDX req_prod_pvt, rsp_cons;                    /* ours */
};
void blkfront_ring_state(const blkfront *bf, struct blkfront_ring_state *s);

/*
 * Set the shared rsp_event (xen/io/ring.h): the backend notifies when it
 * pushes rsp_prod past it. Lets a test re-arm faster than any real
 * frontend would.
 */
void blkfront_raw_set_rsp_event(blkfront *bf, RING_IDX rsp_event);

/* Local event-channel port of the ring (the backend binds its peer). */
int blkfront_port(const blkfront *bf);

/*
 * Take the next unconsumed response (id, status) without blkfront_reap()
 * bookkeeping. -1 EAGAIN if none.
 */
int blkfront_raw_response(blkfront *bf, uint64_t *id, int16_t *status);

#endif /* XENSIM_BLKFRONT_H */
