/*
 * xenblk-cat: read or write a whole simulated guest disk through blkfront.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   xenblk-cat [--devid N] [--ring-order N] [--depth N] [--bs BYTES]
 *              [--sha256] [--write FILE]
 *
 * Plays domain $XENSIM_DOMID of the host in $XENSIM_DIR (as `xensim run`
 * exports them) and connects device --devid (default $XENSIM_DEVID).
 * Reading (the default) streams the whole disk to stdout in order, or with
 * --sha256 prints "<sha256 hex>  <bytes>" of it instead. --write FILE
 * copies FILE to the start of the disk (FILE must not be larger than the
 * disk; its size is rounded up to 512 bytes with zeros) and, with
 * --sha256, prints the checksum of what was written.
 *
 * Up to --depth I/Os of --bs bytes (default 8 x 1 MiB) are in flight at
 * once; completions may come back in any order, the data is consumed in
 * disk order. Exit status 0 on success, 1 on an I/O or setup error, 2 on a
 * usage error.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <glib.h>

#include "xensim/blkfront.h"
#include "xensim/domu.h"

#define CAT_TIMEOUT_MS 30000

static int opt_devid = -1;
static int opt_ring_order;
static int opt_depth = 8;
static int opt_bs = 1024 * 1024;
static gboolean opt_sha256;
static char *opt_write;

static GOptionEntry entries[] = {
    { "devid", 0, 0, G_OPTION_ARG_INT, &opt_devid,
      "device/vbd/<devid> (default $XENSIM_DEVID)", "N" },
    { "ring-order", 0, 0, G_OPTION_ARG_INT, &opt_ring_order,
      "ring-page-order, -1: the backend's max (default 0)", "N" },
    { "depth", 0, 0, G_OPTION_ARG_INT, &opt_depth,
      "I/Os in flight (default 8)", "N" },
    { "bs", 0, 0, G_OPTION_ARG_INT, &opt_bs,
      "bytes per I/O, multiple of 4096 (default 1 MiB)", "BYTES" },
    { "sha256", 0, 0, G_OPTION_ARG_NONE, &opt_sha256,
      "print the sha256 of the data instead of the data", NULL },
    { "write", 0, 0, G_OPTION_ARG_FILENAME, &opt_write,
      "write FILE to the disk instead of reading it", "FILE" },
    { NULL }
};

/* One I/O slot: a --bs buffer in domain memory. */
struct slot {
    struct blkfront_io io;
    bool busy;                  /* queued, not yet consumed */
    bool done;                  /* completed, not yet consumed */
};

/* $NAME as a non-negative integer, or -1. */
static long env_long(const char *name)
{
    const char *s = getenv(name);

    return s && *s ? strtol(s, NULL, 10) : -1;
}

/* Fill @buf with the next @len bytes of @f, zero padded; -1 on error. */
static int fill(FILE *f, uint8_t *buf, size_t len)
{
    size_t n = fread(buf, 1, len, f);

    if (n < len && ferror(f)) {
        return -1;
    }
    memset(buf + n, 0, len - n);
    return 0;
}

/*
 * Run the whole transfer of @total bytes on @bf: reads go to @out (or only
 * to @sum), writes come from @in. Returns 0 or -1 (message printed).
 */
static int transfer(blkfront *bf, struct slot *slots, uint64_t total,
                    FILE *in, FILE *out, GChecksum *sum)
{
    enum blkfront_op op = in ? BLKFRONT_OP_WRITE : BLKFRONT_OP_READ;
    uint64_t next = 0;          /* offset of the next I/O to queue */
    unsigned int head = 0;      /* slot consumed next, in disk order */
    unsigned int tail = 0;      /* slot queued next */
    struct blkfront_io *done[64];
    unsigned int i, n;

    while (next < total || slots[head].busy) {
        /* Queue into free slots, in disk order. */
        while (next < total && !slots[tail].busy && !blkfront_busy(bf)) {
            struct slot *s = &slots[tail];

            s->io.op = op;
            s->io.offset = next;
            s->io.len = MIN((uint64_t)opt_bs, total - next);
            s->io.opaque = s;
            if (in && fill(in, s->io.buf, s->io.len) < 0) {
                fprintf(stderr, "xenblk-cat: read %s: %s\n", opt_write,
                        strerror(errno));
                return -1;
            }
            if (in && sum) {
                g_checksum_update(sum, s->io.buf, s->io.len);
            }
            if (blkfront_queue(bf, &s->io) < 0) {
                if (errno == EAGAIN) {
                    break;
                }
                fprintf(stderr, "xenblk-cat: queue at %" PRIu64 ": %s\n",
                        next, strerror(errno));
                return -1;
            }
            s->busy = true;
            s->done = false;
            next += s->io.len;
            tail = (tail + 1) % opt_depth;
        }
        blkfront_commit(bf);

        /* Collect completions; wait only when none is ready. */
        n = blkfront_reap(bf, done, G_N_ELEMENTS(done));
        if (n == 0 && !slots[head].done) {
            if (blkfront_wait(bf, CAT_TIMEOUT_MS) < 0) {
                fprintf(stderr, "xenblk-cat: no response in %d ms (%u in "
                        "flight): %s\n", CAT_TIMEOUT_MS,
                        blkfront_inflight(bf), strerror(errno));
                return -1;
            }
            continue;
        }
        for (i = 0; i < n; i++) {
            struct slot *s = done[i]->opaque;

            if (s->io.error) {
                fprintf(stderr, "xenblk-cat: %s at %" PRIu64 " (+%" PRIu64
                        "): %s\n", in ? "write" : "read", s->io.offset,
                        s->io.len, strerror(-s->io.error));
                return -1;
            }
            s->done = true;
        }

        /* Consume completed slots in disk order. */
        while (slots[head].busy && slots[head].done) {
            struct slot *s = &slots[head];

            if (!in && sum) {
                g_checksum_update(sum, s->io.buf, s->io.len);
            } else if (!in && fwrite(s->io.buf, 1, s->io.len, out) !=
                       s->io.len) {
                fprintf(stderr, "xenblk-cat: write to stdout: %s\n",
                        strerror(errno));
                return -1;
            }
            s->busy = false;
            head = (head + 1) % opt_depth;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GChecksum) sum = NULL;
    struct blkfront_opts bo = { 0 };
    const struct blkfront_info *info;
    struct slot *slots = NULL;
    xensim_domu *d = NULL;
    xensim_xs *xs = NULL;
    blkfront *bf = NULL;
    FILE *in = NULL;
    uint64_t total, size;
    long domid;
    int i, ret = 1;

    ctx = g_option_context_new("- read or write a whole xensim guest disk");
    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err) || argc != 1) {
        fprintf(stderr, "xenblk-cat: %s\n",
                err ? err->message : "unexpected argument");
        return 2;
    }
    if (opt_devid < 0) {
        opt_devid = env_long("XENSIM_DEVID");
    }
    domid = env_long("XENSIM_DOMID");
    if (!getenv("XENSIM_DIR") || domid <= 0 || opt_devid < 0) {
        fprintf(stderr, "xenblk-cat: need XENSIM_DIR, XENSIM_DOMID and "
                "XENSIM_DEVID (or --devid): run under `xensim run`\n");
        return 2;
    }
    if (opt_depth < 1 || opt_depth > 64 || opt_bs < 4096 ||
        opt_bs % 4096) {
        fprintf(stderr, "xenblk-cat: --depth 1..64, --bs a multiple of "
                "4096\n");
        return 2;
    }
    if (opt_write) {
        in = fopen(opt_write, "rb");
        if (!in) {
            fprintf(stderr, "xenblk-cat: %s: %s\n", opt_write,
                    strerror(errno));
            return 1;
        }
    }

    d = xensim_domu_open(NULL, domid);
    xs = d ? xensim_xs_open(d) : NULL;
    if (!xs) {
        fprintf(stderr, "xenblk-cat: attach to domain %ld: %s\n", domid,
                strerror(errno));
        goto out;
    }
    xensim_xs_set_timeout(xs, CAT_TIMEOUT_MS);
    bo.devid = opt_devid;
    bo.ring_order = opt_ring_order;
    bo.timeout_ms = CAT_TIMEOUT_MS;
    bf = blkfront_connect(d, xs, &bo);
    if (!bf) {
        fprintf(stderr, "xenblk-cat: device %d did not connect: %s\n",
                opt_devid, strerror(errno));
        goto out;
    }
    info = blkfront_info(bf);
    total = info->sectors * info->sector_size;

    if (in) {
        /* Write the file's size, rounded up to whole sectors. */
        if (fseeko(in, 0, SEEK_END) < 0) {
            goto out;
        }
        size = ((uint64_t)ftello(in) + 511) & ~(uint64_t)511;
        rewind(in);
        if (size > total) {
            fprintf(stderr, "xenblk-cat: %s (%" PRIu64 " bytes) is larger "
                    "than the disk (%" PRIu64 ")\n", opt_write, size, total);
            goto out;
        }
        total = size;
    }

    slots = g_new0(struct slot, opt_depth);
    for (i = 0; i < opt_depth; i++) {
        slots[i].io.buf = blkfront_buf_alloc(bf, opt_bs);
        if (!slots[i].io.buf) {
            fprintf(stderr, "xenblk-cat: %d x %d bytes do not fit in the "
                    "domain's memory\n", opt_depth, opt_bs);
            goto out;
        }
    }
    if (opt_sha256) {
        sum = g_checksum_new(G_CHECKSUM_SHA256);
    }
    if (transfer(bf, slots, total, in, stdout, sum) < 0) {
        goto out;
    }
    /* Written data is on stable storage before we report it. */
    if (in && info->feature_flush &&
        blkfront_io_sync(bf, BLKFRONT_OP_FLUSH, 0, NULL, 0) < 0) {
        fprintf(stderr, "xenblk-cat: flush: %s\n", strerror(errno));
        goto out;
    }
    if (sum) {
        printf("%s  %" PRIu64 "\n", g_checksum_get_string(sum), total);
    }
    if (fflush(stdout) != 0) {
        fprintf(stderr, "xenblk-cat: stdout: %s\n", strerror(errno));
        goto out;
    }
    ret = 0;
out:
    /*
     * After an I/O error, requests may still be in flight: leave the ring
     * and buffers to the host's teardown rather than free them under the
     * backend.
     */
    if (bf && blkfront_inflight(bf) == 0) {
        for (i = 0; slots && i < opt_depth && slots[i].io.buf; i++) {
            blkfront_buf_free(bf, slots[i].io.buf, opt_bs);
        }
        blkfront_close(bf);
    }
    g_free(slots);
    xensim_xs_close(xs);
    xensim_domu_close(d);
    if (in) {
        fclose(in);
    }
    return ret;
}
