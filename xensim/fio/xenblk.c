/*
 * fio external ioengine "xenblk": fio drives a xensim guest's blkfront.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   fio --ioengine=external:/path/to/xenblk.so --direct=1 ...
 *
 * The job's process plays domain $XENSIM_DOMID of the host in $XENSIM_DIR
 * and connects device $XENSIM_DEVID (as `xensim run` exports them; engine
 * options override). fio's I/O buffers are allocated in the domain's
 * memory (iomem_alloc), so requests carry grant references to them and
 * nothing is copied on the guest side.
 *
 * The hooks map one to one onto the blkfront data path:
 *   queue     -> blkfront_queue (ring slots, no notify); while blkfront
 *                cannot take more, the I/O waits in the engine's backlog
 *   commit    -> blkfront_commit (push, one notify if req_event asks)
 *   getevents -> blkfront_reap / blkfront_wait (event or busy poll), then
 *                backlogged I/Os onto the slots the completions freed
 *
 * The engine takes every I/O fio hands it (at most iodepth) instead of
 * answering FIO_Q_BUSY when the ring is full (a 1 MiB I/O is 24 requests,
 * a 32-slot ring holds one). fio 3.33 regenerates the verify pattern of a
 * write it gets back from FIO_Q_BUSY, drawing one more seed than it
 * replays when verifying, so every later block of a mixed read/write job
 * (where fio checks the header's seed) fails verify with "bad header
 * rand_seed" although the disk holds the data written (fio issue 1526,
 * fixed in fio 3.34 by commit ad21b61d27fd, IO_U_F_PATTERN_DONE).
 * One job per device (a device has one frontend). Built against fio 3.33's
 * headers for Debian's /usr/bin/fio (see get-fio-src.sh); functions fio
 * does not export (__td_verror) are not used.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <glib.h>

#include "fio.h"
#include "optgroup.h"

#include <xen/io/xenbus.h>

#include "xensim/blkfront.h"
#include "xensim/domu.h"

#define XENBLK_TIMEOUT_MS 30000

struct xenblk_options {
    void *pad;                  /* fio: first field is the thread_data */
    char *xensim_dir;
    int domid;                  /* -1: $XENSIM_DOMID */
    int devid;                  /* -1: $XENSIM_DEVID */
    int ring_order;
    char *protocol;
    unsigned int busy_poll;
    unsigned int push_each;
    unsigned int max_indirect_segments;
    unsigned int timeout_ms;
    char *stats_file;
};

struct xenblk_data {
    xensim_domu *d;
    xensim_xs *xs;
    blkfront *bf;
    void *mem;
    size_t mem_pages;
    struct io_u **events;       /* completed, for ->event() */
    struct blkfront_io **done;
    struct io_u **queued;       /* queued since the last commit */
    unsigned int nr_queued;
    struct io_u **backlog;      /* accepted, blkfront busy: FIFO ring */
    unsigned int backlog_head;
    unsigned int nr_backlog;
    struct io_u **failed;       /* backlogged, then refused by blkfront */
    unsigned int nr_failed;
    unsigned int depth;
    uint64_t busy;              /* FIO_Q_BUSY returned */
    uint64_t backlogged;        /* I/Os that waited in the backlog */
    uint64_t waits;             /* blocking waits in getevents */
};

static struct fio_option options[] = {
    {
        .name = "xensim_dir",
        .lname = "xensim run directory",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct xenblk_options, xensim_dir),
        .help = "Simulated host directory (default $XENSIM_DIR)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "domid",
        .lname = "guest domain id",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct xenblk_options, domid),
        .def = "-1",
        .minval = -1,
        .help = "Domain to play (default $XENSIM_DOMID)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "devid",
        .lname = "virtual block device id",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct xenblk_options, devid),
        .def = "-1",
        .minval = -1,
        .help = "device/vbd/<devid> to connect (default $XENSIM_DEVID)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "ring_order",
        .lname = "ring page order",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct xenblk_options, ring_order),
        .def = "0",
        .minval = -1,
        .maxval = BLKFRONT_MAX_RING_ORDER,
        .help = "log2 of ring pages; -1: the backend's max-ring-page-order",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "protocol",
        .lname = "blkif ABI",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct xenblk_options, protocol),
        .help = "native, x86_32-abi or x86_64-abi",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "busy_poll",
        .lname = "busy-poll for responses",
        .type = FIO_OPT_BOOL,
        .off1 = offsetof(struct xenblk_options, busy_poll),
        .def = "0",
        .help = "Spin on the ring instead of waiting for the event channel",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "push_each",
        .lname = "push each request",
        .type = FIO_OPT_BOOL,
        .off1 = offsetof(struct xenblk_options, push_each),
        .def = "0",
        .help = "Push each ring request as it is queued, as Linux blkfront "
                "does (default: one push per fio commit)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "max_indirect_segments",
        .lname = "indirect segments per request",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct xenblk_options, max_indirect_segments),
        .def = "32",
        .minval = 0,
        .maxval = BLKFRONT_MAX_INDIRECT_SEGMENTS,
        .help = "Segments per request with BLKIF_OP_INDIRECT, capped to the "
                "backend's feature-max-indirect-segments (default 32, as "
                "Linux blkfront; 0: plain requests of 11 segments only)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "xenblk_timeout",
        .lname = "backend timeout",
        .type = FIO_OPT_INT,
        .off1 = offsetof(struct xenblk_options, timeout_ms),
        .def = "30000",
        .help = "ms to wait for the backend (connect, responses)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = "stats_file",
        .lname = "guest counters file",
        .type = FIO_OPT_STR_STORE,
        .off1 = offsetof(struct xenblk_options, stats_file),
        .help = "Write guest counters as JSON here at exit "
                "(default $XENBLK_STATS)",
        .category = FIO_OPT_C_ENGINE,
        .group = FIO_OPT_G_INVALID,
    },
    {
        .name = NULL,
    },
};

/* Option, else environment variable, else -1. */
static long opt_or_env(int val, const char *env)
{
    const char *s;

    if (val >= 0) {
        return val;
    }
    s = getenv(env);
    return s && *s ? strtol(s, NULL, 10) : -1;
}

static const char *xenblk_dir(struct xenblk_options *o)
{
    return o->xensim_dir && *o->xensim_dir ? o->xensim_dir
                                           : getenv("XENSIM_DIR");
}

static int parse_protocol(const char *s, enum blkfront_protocol *p)
{
    if (!s || !*s || !strcmp(s, "native")) {
        *p = BLKFRONT_PROTO_NATIVE;
    } else if (!strcmp(s, "x86_32-abi") || !strcmp(s, "x86_32")) {
        *p = BLKFRONT_PROTO_X86_32;
    } else if (!strcmp(s, "x86_64-abi") || !strcmp(s, "x86_64")) {
        *p = BLKFRONT_PROTO_X86_64;
    } else {
        return -1;
    }
    return 0;
}

/* Domain and device from the options or the environment; logs errors. */
static int xenblk_ids(struct thread_data *td, long *domid, long *devid)
{
    struct xenblk_options *o = td->eo;

    *domid = opt_or_env(o->domid, "XENSIM_DOMID");
    *devid = opt_or_env(o->devid, "XENSIM_DEVID");
    if (!xenblk_dir(o)) {
        log_err("xenblk: no host: set xensim_dir= or XENSIM_DIR\n");
        return -1;
    }
    if (*domid <= 0 || *domid >= (long)XENSIM_MAX_DOMAINS) {
        log_err("xenblk: bad or missing domid (option or XENSIM_DOMID)\n");
        return -1;
    }
    if (*devid < 0) {
        log_err("xenblk: missing devid (option or XENSIM_DEVID)\n");
        return -1;
    }
    return 0;
}

/*
 * The disk's size when the backend publishes it only at Connected, as
 * Linux blkback and tapback do (QEMU's xen-block writes it at realize):
 * connect, read it, close; the backend goes back to InitWait when the
 * job's blkfront connects. *@ssize gets the sector size.
 */
static int xenblk_probe_size(struct thread_data *td, xensim_domu *d,
                             xensim_xs *xs, long devid, uint64_t *sectors,
                             uint64_t *ssize)
{
    struct xenblk_options *o = td->eo;
    struct blkfront_opts bo = { .devid = devid, .timeout_ms = o->timeout_ms };
    blkfront *bf = blkfront_connect(d, xs, &bo);

    if (!bf) {
        return -1;
    }
    *sectors = blkfront_info(bf)->sectors;
    *ssize = blkfront_info(bf)->sector_size;
    blkfront_close(bf);
    return 0;
}

/*
 * Runs in fio's main process: validate options and learn the disk size
 * from the backend's nodes (read through a short-lived xenstore
 * connection; the job process makes its own in ->init).
 */
static int xenblk_setup(struct thread_data *td)
{
    struct xenblk_options *o = td->eo;
    enum blkfront_protocol proto;
    xensim_domu *d = NULL;
    xensim_xs *xs = NULL;
    uint64_t sectors, ssize = 0;
    char *path = NULL, *be = NULL;
    long domid, devid;
    int ret = 1;

    if (xenblk_ids(td, &domid, &devid) < 0) {
        return 1;
    }
    if (parse_protocol(o->protocol, &proto) < 0) {
        log_err("xenblk: protocol=%s: want native, x86_32-abi or "
                "x86_64-abi\n", o->protocol);
        return 1;
    }
    if (td->o.nr_files > 1) {
        log_err("xenblk: one file (the device) per job\n");
        return 1;
    }

    d = xensim_domu_open(xenblk_dir(o), domid);
    if (!d) {
        log_err("xenblk: cannot attach to %s as domain %ld: %s\n",
                xenblk_dir(o), domid, strerror(errno));
        return 1;
    }
    xs = xensim_xs_open(d);
    if (!xs) {
        log_err("xenblk: xenstore ring of domain %ld: %s\n", domid,
                strerror(errno));
        goto out;
    }
    xensim_xs_set_timeout(xs, o->timeout_ms);
    path = g_strdup_printf("device/vbd/%ld/backend", devid);
    be = xensim_xs_read(xs, XENSIM_XBT_NULL, path, NULL);
    if (!be) {
        log_err("xenblk: no disk %ld in domain %ld (%s: %s)\n", devid,
                domid, path, strerror(errno));
        goto out;
    }
    g_free(path);
    path = g_strdup_printf("%s/sectors", be);
    /* The backend writes sectors when it realizes: wait for InitWait. */
    if (xensim_xs_read_u64(xs, XENSIM_XBT_NULL, path, &sectors) < 0) {
        g_free(path);
        path = g_strdup_printf("%s/state", be);
        xensim_xs_wait_mask(xs, path, (1u << XenbusStateInitWait) |
                            (1u << XenbusStateConnected), o->timeout_ms,
                            NULL);
        g_free(path);
        path = g_strdup_printf("%s/sectors", be);
        if (xensim_xs_read_u64(xs, XENSIM_XBT_NULL, path, &sectors) < 0 &&
            xenblk_probe_size(td, d, xs, devid, &sectors, &ssize) < 0) {
            log_err("xenblk: backend %s has no size (%s): is its "
                    "backend (QEMU, tapdisk) running?\n", be,
                    strerror(errno));
            goto out;
        }
    }
    g_free(path);
    path = g_strdup_printf("%s/sector-size", be);
    if (!ssize && xensim_xs_read_u64(xs, XENSIM_XBT_NULL, path, &ssize) < 0) {
        ssize = 512;
    }

    if (!td->files_index) {
        add_file(td, be, 0, 0);
        td->o.nr_files = td->o.nr_files ? : 1;
        td->o.open_files++;
    }
    td->files[0]->real_file_size = sectors * ssize;
    ret = 0;
out:
    g_free(path);
    g_free(be);
    xensim_xs_close(xs);
    xensim_domu_close(d);
    return ret;
}

static int xenblk_init(struct thread_data *td)
{
    struct xenblk_options *o = td->eo;
    struct blkfront_opts bo = { 0 };
    struct xenblk_data *xd;
    long domid, devid;

    /* Our ops table must be where fio's thread_data has it: a cheap check
     * that the headers we were built with match this fio's layout. */
    if (!td->io_ops || strcmp(td->io_ops->name, "xenblk")) {
        log_err("xenblk: struct thread_data layout mismatch: rebuild "
                "against this fio's headers\n");
        return 1;
    }
    if (xenblk_ids(td, &domid, &devid) < 0 ||
        parse_protocol(o->protocol, &bo.protocol) < 0) {
        return 1;
    }
    bo.devid = devid;
    bo.ring_order = o->ring_order;
    bo.poll = o->busy_poll;
    bo.push_each = o->push_each;
    /* fio's 0 is "off"; blkfront's 0 is its default */
    bo.max_indirect_segments = o->max_indirect_segments ?
                               (int)o->max_indirect_segments : -1;
    bo.timeout_ms = o->timeout_ms;

    xd = calloc(1, sizeof(*xd));
    td->io_ops_data = xd;
    xd->depth = td->o.iodepth;
    xd->events = calloc(xd->depth, sizeof(*xd->events));
    xd->done = calloc(xd->depth, sizeof(*xd->done));
    xd->queued = calloc(xd->depth, sizeof(*xd->queued));
    xd->backlog = calloc(xd->depth, sizeof(*xd->backlog));
    xd->failed = calloc(xd->depth, sizeof(*xd->failed));

    xd->d = xensim_domu_open(xenblk_dir(o), domid);
    if (!xd->d) {
        log_err("xenblk: cannot attach to %s as domain %ld: %s\n",
                xenblk_dir(o), domid, strerror(errno));
        return 1;
    }
    xd->xs = xensim_xs_open(xd->d);
    if (!xd->xs) {
        log_err("xenblk: xenstore ring of domain %ld: %s\n", domid,
                strerror(errno));
        return 1;
    }
    xensim_xs_set_timeout(xd->xs, o->timeout_ms);
    xd->bf = blkfront_connect(xd->d, xd->xs, &bo);
    if (!xd->bf) {
        log_err("xenblk: device %ld of domain %ld did not connect: %s\n",
                devid, domid, strerror(errno));
        return 1;
    }
    return 0;
}

/* fio's buffers live in domain memory, so requests can grant them. */
static int xenblk_iomem_alloc(struct thread_data *td, size_t size)
{
    struct xenblk_data *xd = td->io_ops_data;

    xd->mem_pages = (size + XENSIM_PAGE_SIZE - 1) / XENSIM_PAGE_SIZE;
    xd->mem = xensim_domu_alloc_pages(xd->d, xd->mem_pages);
    if (!xd->mem) {
        log_err("xenblk: %zu KiB of I/O buffers do not fit in the domain's "
                "%" PRIu64 " KiB of memory (lower iodepth*bs or give the "
                "domain more memory)\n", size / 1024,
                xensim_domu_nr_pages(xd->d) * 4);
        return 1;
    }
    td->orig_buffer = xd->mem;
    return 0;
}

static void xenblk_iomem_free(struct thread_data *td)
{
    struct xenblk_data *xd = td->io_ops_data;

    if (xd && xd->mem) {
        xensim_domu_free_pages(xd->d, xd->mem, xd->mem_pages);
        xd->mem = NULL;
    }
}

static int xenblk_io_u_init(struct thread_data *td, struct io_u *io_u)
{
    io_u->engine_data = calloc(1, sizeof(struct blkfront_io));
    return io_u->engine_data ? 0 : 1;
}

static void xenblk_io_u_free(struct thread_data *td, struct io_u *io_u)
{
    free(io_u->engine_data);
    io_u->engine_data = NULL;
}

/*
 * Hand backlogged I/Os to blkfront, oldest first, while it takes them;
 * returns how many it took (the caller pushes them with blkfront_commit).
 * An I/O blkfront refuses goes to xd->failed, for getevents to complete
 * with the error, as queue would have done had it not waited.
 */
static unsigned int xenblk_feed(struct xenblk_data *xd)
{
    unsigned int fed = 0;

    while (xd->nr_backlog && !blkfront_busy(xd->bf)) {
        struct io_u *io_u = xd->backlog[xd->backlog_head];
        struct blkfront_io *io = io_u->engine_data;

        xd->backlog_head = (xd->backlog_head + 1) % xd->depth;
        xd->nr_backlog--;
        if (blkfront_queue(xd->bf, io) < 0) {
            io->error = -errno;
            xd->failed[xd->nr_failed++] = io_u;
            continue;
        }
        fed++;
    }
    return fed;
}

static enum fio_q_status xenblk_queue(struct thread_data *td,
                                      struct io_u *io_u)
{
    struct xenblk_data *xd = td->io_ops_data;
    struct blkfront_io *io = io_u->engine_data;
    const struct blkfront_info *info = blkfront_info(xd->bf);

    fio_ro_check(td, io_u);

    /*
     * fio never has more than iodepth I/Os in the engine, so this does not
     * happen; should it, FIO_Q_BUSY is still correct (only slower, and
     * see the top of the file about verify).
     */
    if (xd->nr_queued == xd->depth ||
        xd->nr_backlog + xd->nr_failed == xd->depth) {
        xd->busy++;
        return FIO_Q_BUSY;
    }

    io->offset = io_u->offset;
    io->len = io_u->xfer_buflen;
    io->buf = io_u->xfer_buf;
    io->opaque = io_u;
    switch (io_u->ddir) {
    case DDIR_READ:
        io->op = BLKFRONT_OP_READ;
        break;
    case DDIR_WRITE:
        io->op = BLKFRONT_OP_WRITE;
        break;
    case DDIR_TRIM:
        io->op = BLKFRONT_OP_DISCARD;
        break;
    case DDIR_SYNC:
    case DDIR_DATASYNC:
    case DDIR_SYNC_FILE_RANGE:
        if (!info->feature_flush) {
            return FIO_Q_COMPLETED;     /* no write cache to flush */
        }
        io->op = BLKFRONT_OP_FLUSH;
        io->offset = io->len = 0;
        break;
    default:
        io_u->error = EINVAL;
        return FIO_Q_COMPLETED;
    }

    /*
     * blkfront holds one I/O whose requests do not all fit yet; later ones
     * wait here, in order, rather than going back to fio with FIO_Q_BUSY
     * (see the top of the file): completions make room in getevents.
     */
    if (xd->nr_backlog || blkfront_busy(xd->bf)) {
        xd->backlog[(xd->backlog_head + xd->nr_backlog) % xd->depth] = io_u;
        xd->nr_backlog++;
        xd->backlogged++;
    } else if (blkfront_queue(xd->bf, io) < 0) {
        io_u->error = errno;
        return FIO_Q_COMPLETED;
    }
    xd->queued[xd->nr_queued++] = io_u;
    return FIO_Q_QUEUED;
}

static int xenblk_commit(struct thread_data *td)
{
    struct xenblk_data *xd = td->io_ops_data;
    unsigned int i;

    if (!xd->nr_queued) {
        return 0;
    }
    xenblk_feed(xd);
    blkfront_commit(xd->bf);
    /* Issue time and submit accounting, as engines with ->commit do. */
    if (fio_fill_issue_time(td)) {
        struct timespec now;

        fio_gettime(&now, NULL);
        for (i = 0; i < xd->nr_queued; i++) {
            memcpy(&xd->queued[i]->issue_time, &now, sizeof(now));
            io_u_queued(td, xd->queued[i]);
        }
    }
    io_u_mark_submit(td, xd->nr_queued);
    xd->nr_queued = 0;
    return 0;
}

static int xenblk_getevents(struct thread_data *td, unsigned int min,
                            unsigned int max, const struct timespec *t)
{
    struct xenblk_data *xd = td->io_ops_data;
    struct xenblk_options *o = td->eo;
    unsigned int nr = 0, i, n;
    int timeout = t ? t->tv_sec * 1000 + t->tv_nsec / 1000000
                    : (int)o->timeout_ms;

    max = MIN(max, xd->depth);
    for (;;) {
        while (nr < max && xd->nr_failed) {
            xd->events[nr++] = xd->failed[--xd->nr_failed];
        }
        n = blkfront_reap(xd->bf, xd->done + nr, max - nr);
        for (i = nr; i < nr + n; i++) {
            xd->events[i] = xd->done[i]->opaque;
        }
        nr += n;
        /* The completions freed ring slots: backlogged I/Os go on now. */
        if (xenblk_feed(xd)) {
            blkfront_commit(xd->bf);
        }
        if (nr >= min || nr == max) {
            break;
        }
        if (xd->nr_failed) {
            continue;           /* refused by blkfront: complete them */
        }
        xd->waits++;
        if (blkfront_wait(xd->bf, timeout) < 0) {
            if (t && errno == ETIMEDOUT) {
                break;
            }
            log_err("xenblk: no response from the backend in %d ms "
                    "(%u I/Os in flight): %s\n", timeout,
                    blkfront_inflight(xd->bf), strerror(errno));
            return -errno;
        }
    }
    return nr;
}

static struct io_u *xenblk_event(struct thread_data *td, int event)
{
    struct xenblk_data *xd = td->io_ops_data;
    struct io_u *io_u = xd->events[event];
    struct blkfront_io *io = io_u->engine_data;

    io_u->error = -io->error;
    io_u->resid = io->error ? io_u->xfer_buflen : 0;
    return io_u;
}

static void xenblk_write_stats(struct thread_data *td,
                               struct xenblk_data *xd)
{
    struct xenblk_options *o = td->eo;
    const char *file = o->stats_file && *o->stats_file ? o->stats_file
                                                       : getenv("XENBLK_STATS");
    const struct blkfront_stats *s;
    const struct blkfront_info *info;
    uint64_t backend_notifies = 0, guest_wakeups = 0;
    int port;
    FILE *f;

    if (!file || !*file || !xd->bf) {
        return;
    }
    f = fopen(file, "w");
    if (!f) {
        log_err("xenblk: cannot write stats to %s: %s\n", file,
                strerror(errno));
        return;
    }
    s = blkfront_stats(xd->bf);
    info = blkfront_info(xd->bf);
    /*
     * Backend->guest notifications: the notifies sent from the backend's
     * end of the ring's event channel (the peer of our port), since it
     * was bound for this connection. guest_wakeups: those that reached
     * us as a new event (a notify on an already pending port coalesces).
     */
    port = blkfront_port(xd->bf);
    if (port > 0) {
        xensim *hv = xensim_domu_hv(xd->d);
        uint32_t domid = xensim_domu_domid(xd->d), rdom, rport;

        xensim_port_stats(hv, domid, port, NULL, &guest_wakeups);
        if (!xensim_port_peer(hv, domid, port, &rdom, &rport)) {
            xensim_port_stats(hv, rdom, rport, &backend_notifies, NULL);
        }
    }
    fprintf(f, "{\"ios\": %" PRIu64 ", \"requests\": %" PRIu64
            ", \"responses\": %" PRIu64 ", \"notifies\": %" PRIu64
            ", \"commits\": %" PRIu64 ", \"events\": %" PRIu64
            ", \"grants\": %" PRIu64 ", \"grant_evictions\": %" PRIu64
            ", \"indirect_requests\": %" PRIu64
            ", \"indirect_segments\": %u"
            ", \"busy\": %" PRIu64 ", \"backlogged\": %" PRIu64
            ", \"waits\": %" PRIu64
            ", \"iodepth\": %u, \"ring_order\": %u, \"ring_entries\": %u"
            ", \"busy_poll\": %s, \"backend_notifies\": %" PRIu64
            ", \"guest_wakeups\": %" PRIu64 "}\n",
            s->ios, s->requests, s->responses, s->notifies, s->commits,
            s->events, s->grants, s->grant_evictions, s->indirect_requests,
            info->indirect_segments, xd->busy,
            xd->backlogged, xd->waits,
            xd->depth, info->ring_order, info->ring_entries,
            o->busy_poll ? "true" : "false", backend_notifies,
            guest_wakeups);
    fclose(f);
}

static void xenblk_cleanup(struct thread_data *td)
{
    struct xenblk_data *xd = td->io_ops_data;

    if (!xd) {
        return;
    }
    xenblk_write_stats(td, xd);
    /* fio has already freed the buffers (cleanup_io_u runs first). */
    blkfront_close(xd->bf);
    xensim_xs_close(xd->xs);
    xensim_domu_close(xd->d);
    free(xd->events);
    free(xd->done);
    free(xd->queued);
    free(xd->backlog);
    free(xd->failed);
    free(xd);
}

static int xenblk_open_file(struct thread_data *td, struct fio_file *f)
{
    return 0;
}

static int xenblk_close_file(struct thread_data *td, struct fio_file *f)
{
    return 0;
}

struct ioengine_ops ioengine = {
    .name = "xenblk",
    .version = FIO_IOOPS_VERSION,
    .flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL,
    .setup = xenblk_setup,
    .init = xenblk_init,
    .queue = xenblk_queue,
    .commit = xenblk_commit,
    .getevents = xenblk_getevents,
    .event = xenblk_event,
    .cleanup = xenblk_cleanup,
    .open_file = xenblk_open_file,
    .close_file = xenblk_close_file,
    .iomem_alloc = xenblk_iomem_alloc,
    .iomem_free = xenblk_iomem_free,
    .io_u_init = xenblk_io_u_init,
    .io_u_free = xenblk_io_u_free,
    .options = options,
    .option_struct_size = sizeof(struct xenblk_options),
};
