/*
 * xenblk-specs: the libxl disk-spec matrix against a QEMU qdisk backend.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Each case is one xl disk spec (docs/man/xl-disk-configuration.5), written
 * by xensim's toolstack as libxl 4.17's device_disk_add() writes it, next
 * to a guest's first disk (xvda, raw, read-write) that is in use. The disk
 * is attached at boot (present when QEMU starts) or hot-plugged (xl
 * block-attach). Then, as a Xen storage engineer would check it:
 *
 *   served    the backend reaches InitWait, a blkfront connects, "info", "sectors" and the
 *             discard nodes are what the spec says, a read returns the
 *             image's bytes, and what the spec forbids (writes and
 *             discards on a read-only disk or a cdrom, discards without
 *             discard-enable) gets BLKIF_RSP_ERROR with the image
 *             unchanged;
 *   refused   QEMU logs one error for the device (once: a disk hot-plugged
 *             after it is created, and the bad one is not tried again),
 *             the backend ends Closed with the reason in its error node
 *             (as Linux backends refuse a device), and nothing else
 *             breaks.
 *
 * Either way QEMU must stay up and the first disk must still serve a write
 * and a read. The toolstack's frontend nodes (state, backend, backend-id,
 * virtual-device, device-type) are never overwritten by the backend. Two
 * cases, initwait-features and qmp-hotplug, check that a hot-plugged
 * disk's features are published before InitWait (the seed's hot-plug
 * complaint), one, state-flood, that a guest rewriting its state node
 * cannot make QEMU deaf to its toolstack.
 *
 *   xenblk-specs --qemu PATH [--xfail CASE[=FIX]]... [--case CASE] [--list]
 *
 * FIX names the patch that fixes an expected failure (by subject); it is
 * printed with the failure.
 *
 * Exit status: 0 if no unexpected failure, 1 otherwise, 77 if the stack
 * cannot run here (no xenstored or shim). A case that needs what this
 * machine lacks (a loop device) is reported as SKIP.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib/gstdio.h>
#include <xen/io/xenbus.h>

#include "xensim/blkfront.h"
#include "xensim/domu.h"
#include "xensim/toolstack.h"

#define DOMID           3
#define DOMID2          4           /* the second QEMU's guest */
#define MEM_MB          64
#define IMAGE_BYTES     (8u << 20)
#define WAIT_MS         10000

typedef struct Host {
    uint32_t domid;
    xensim_ts *ts;                  /* NULL: shares the first host's */
    xensim_domu *dom;
    xensim_xs *xs;
    blkfront *first;                /* the guest's xvda, in use */
    char *log;                      /* QEMU's log file */
    pid_t qemu;
    void *page;                     /* one page of guest memory for I/O */
} Host;

static struct {
    const char *qemu;
    char *qemu_img;
    char *dir;                      /* images, logs */
    const char *cur;                /* case running */
    GHashTable *xfail;
    unsigned int failures, xfails, skips, xfail_hit;
    bool case_failed;
    bool check_order;               /* wait_initwait() checks the trace */
} S;

static void fail(const char *fmt, ...) G_GNUC_PRINTF(1, 2);

static void fail(const char *fmt, ...)
{
    const char *fix = g_hash_table_lookup(S.xfail, S.cur);
    va_list ap;
    g_autofree char *msg = NULL;

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    if (fix) {
        fprintf(stderr, "XFAIL [%s] %s (fixed by: %s)\n", S.cur, msg, fix);
    } else {
        fprintf(stderr, "FAIL [%s] %s\n", S.cur, msg);
    }
    S.case_failed = true;
}

/* --- images ---------------------------------------------------------------- */

/* A raw image of IMAGE_BYTES whose every 512-byte sector holds its index. */
static char *make_raw(const char *name)
{
    char *path = g_build_filename(S.dir, name, NULL);
    g_autofree uint8_t *buf = g_malloc(IMAGE_BYTES);
    uint32_t i;

    for (i = 0; i < IMAGE_BYTES / 512; i++) {
        memset(buf + i * 512, 0, 512);
        memcpy(buf + i * 512, &i, sizeof(i));
        buf[i * 512 + 511] = 0x5a;
    }
    if (!g_file_set_contents(path, (char *)buf, IMAGE_BYTES, NULL)) {
        g_error("cannot write %s", path);
    }
    return path;
}

/* @raw converted to @fmt with qemu-img (from the QEMU under test). */
static char *make_converted(const char *raw, const char *fmt)
{
    char *path = g_strdup_printf("%s.%s", raw, fmt);
    const char *argv[] = { S.qemu_img, "convert", "-q", "-f", "raw", "-O",
                           fmt, raw, path, NULL };
    int status;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_DEFAULT, NULL, NULL,
                      NULL, NULL, &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        g_error("qemu-img convert to %s failed", fmt);
    }
    return path;
}

static char *image_checksum(const char *path)
{
    g_autofree char *data = NULL;
    gsize len;

    if (!g_file_get_contents(path, &data, &len, NULL)) {
        return g_strdup("(unreadable)");
    }
    return g_compute_checksum_for_data(G_CHECKSUM_SHA256, (guchar *)data, len);
}

/* --- the host -------------------------------------------------------------- */

static xensim_ts *host_ts;

static char *be_path(Host *h, int devid, const char *key)
{
    g_autofree char *be = xensim_ts_backend_path(h->domid, devid);

    return key ? g_strdup_printf("%s/%s", be, key) : g_steal_pointer(&be);
}

static char *fe_path(Host *h, int devid, const char *key)
{
    g_autofree char *fe = xensim_ts_frontend_path(h->domid, devid);

    return g_strdup_printf("%s/%s", fe, key);
}

static char *read_node(const char *path)
{
    unsigned int len;

    return xs_read(xensim_ts_xs(host_ts), XBT_NULL, path, &len);
}

static int add_disk(Host *h, const xensim_ts_disk *disk)
{
    g_autoptr(GError) err = NULL;
    int devid = -1;

    if (!xensim_ts_disk_add(host_ts, h->domid, disk, &devid, &err)) {
        g_error("disk_add: %s", err->message);
    }
    return devid;
}

/*
 * Start a guest @domid (on the shared host) whose first disk is a fresh raw
 * image, plus @boot (may be NULL) present at boot; start its QEMU and
 * connect the first disk. *@boot_devid gets @boot's device number.
 */
static bool host_start(Host *h, uint32_t domid, const xensim_ts_disk *boot,
                       int *boot_devid)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *name = g_strdup_printf("specs-%u", domid);
    g_autofree char *img = g_strdup_printf("first-%u.raw", domid);
    g_autofree char *first_img = make_raw(img);
    xensim_ts_disk first = { .target = first_img, .vdev = "xvda" };
    struct blkfront_opts o = { .devid = 51712, .timeout_ms = WAIT_MS };
    int devid;

    memset(h, 0, sizeof(*h));
    h->domid = domid;
    if (!xensim_ts_domain_create(host_ts, domid, name, MEM_MB, &err)) {
        fail("domain: %s", err->message);
        return false;
    }
    devid = add_disk(h, &first);
    if (boot) {
        *boot_devid = add_disk(h, boot);
    }
    h->qemu = xensim_ts_qemu_start(host_ts, domid, S.qemu, NULL, &err);
    if (h->qemu < 0) {
        fail("qemu: %s", err->message);
        return false;
    }
    h->log = g_strdup_printf("%s/qemu-dm-%s.log",
                             xensim_ts_log_dir(host_ts), name);
    if (!xensim_ts_wait_backend_ready(host_ts, domid, devid, WAIT_MS,
                                      &err)) {
        fail("first disk: %s", err->message);
        return false;
    }
    h->dom = xensim_domu_open(xensim_ts_run_dir(host_ts), domid);
    h->xs = h->dom ? xensim_xs_open(h->dom) : NULL;
    h->first = h->xs ? blkfront_connect(h->dom, h->xs, &o) : NULL;
    if (!h->first) {
        fail("first disk: no blkfront");
        return false;
    }
    h->page = blkfront_buf_alloc(h->first, 4096);
    return true;
}

static void host_stop(Host *h)
{
    if (h->first) {
        blkfront_buf_free(h->first, h->page, 4096);
        blkfront_close(h->first);
    }
    xensim_xs_close(h->xs);
    xensim_domu_close(h->dom);
    g_free(h->log);
    memset(h, 0, sizeof(*h));
}

/* QEMU is up and the first disk serves a write and a read. */
static void assert_first_disk(Host *h)
{
    memset(h->page, 0xc3, 4096);
    if (blkfront_io_sync(h->first, BLKFRONT_OP_WRITE, 4096, h->page,
                         4096) < 0 ||
        blkfront_io_sync(h->first, BLKFRONT_OP_READ, 4096, h->page,
                         4096) < 0) {
        fail("the first disk stopped serving: %s", g_strerror(errno));
    }
}

/* Lines of QEMU's log that contain @needle. */
static unsigned int log_count(Host *h, const char *needle)
{
    g_autofree char *text = NULL;
    unsigned int n = 0;
    const char *p;

    if (!g_file_get_contents(h->log, &text, NULL, NULL)) {
        return 0;
    }
    for (p = text; (p = strstr(p, needle)); p++) {
        n++;
    }
    return n;
}

/* --- what a disk owes the guest ----------------------------------------- */

typedef struct Want {
    uint32_t info;                  /* VDISK_* flags */
    bool discard;                   /* feature-discard published */
    bool writable;                  /* a write succeeds */
} Want;

/* A writable disk with libxl's defaults: discard on */
static const Want RW = { .discard = true, .writable = true };

/*
 * The frontend nodes the toolstack wrote are still the toolstack's: state
 * and the rest untouched until the frontend itself writes.
 */
static void assert_frontend_nodes(Host *h, int devid, const char *devtype)
{
    static const char *const keys[] = { "state", "backend", "backend-id",
                                         "virtual-device", "device-type" };
    g_autofree char *be = be_path(h, devid, NULL);
    g_autofree char *id = g_strdup_printf("%d", devid);
    const char *want[] = { "1", be, "0", id, devtype };
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(keys); i++) {
        g_autofree char *p = fe_path(h, devid, keys[i]);
        g_autofree char *v = read_node(p);

        if (g_strcmp0(v, want[i])) {
            fail("frontend node %s is '%s', the toolstack wrote '%s'", p,
                 v ? v : "(absent)", want[i]);
        }
    }
}

/*
 * Line number in xenstored's trace of the first write of @value (NULL:
 * any) to @path, or G_MAXUINT.
 */
static unsigned int trace_write(const char *path, const char *value)
{
    g_autofree char *trace = g_build_filename(xensim_ts_log_dir(host_ts),
                                              "xenstored-trace.log", NULL);
    g_autofree char *text = NULL;
    g_autofree char *needle = g_strdup_printf(" WRITE (%s %s", path,
                                              value ? value : "");
    g_auto(GStrv) lines = NULL;
    unsigned int i;

    if (!g_file_get_contents(trace, &text, NULL, NULL)) {
        return G_MAXUINT;
    }
    lines = g_strsplit(text, "\n", -1);
    for (i = 0; lines[i]; i++) {
        if (strstr(lines[i], needle)) {
            return i;
        }
    }
    return G_MAXUINT;
}

/*
 * Wait for InitWait. What a frontend reads on seeing it (blkif.h, "Backend
 * XenBus Nodes": max-ring-page-order, feature-flush-cache, and with them
 * sectors and info) must have been written before it, as blkback does:
 * Linux blkfront reads max-ring-page-order at InitWait and a hot-plugged
 * disk would otherwise get a one-page ring. Checked on xenstored's trace,
 * the order in which QEMU made the writes, not on a racy read.
 */
static bool wait_initwait(Host *h, int devid)
{
    static const char *const early[] = { "max-ring-page-order",
                                         "feature-flush-cache", "sectors",
                                         "info" };
    g_autoptr(GError) err = NULL;
    g_autofree char *state = be_path(h, devid, "state");
    unsigned int initwait;
    size_t i;

    if (!xensim_ts_wait_node(host_ts, state, "2", WAIT_MS, &err) ||
        !xensim_ts_wait_backend_ready(host_ts, h->domid, devid, WAIT_MS,
                                      &err)) {
        fail("backend never reached InitWait: %s", err->message);
        return false;
    }
    initwait = S.check_order ? trace_write(state, "2") : 0;
    for (i = 0; S.check_order && i < G_N_ELEMENTS(early); i++) {
        g_autofree char *p = be_path(h, devid, early[i]);

        if (trace_write(p, NULL) > initwait) {
            fail("InitWait was written before %s", early[i]);
            break;
        }
    }
    return true;
}

/*
 * Put @req on the ring as is (blkfront_queue() would refuse what the
 * backend did not offer) and wait for its response's status.
 */
static int raw_request(blkfront *bf, const blkif_request_t *req,
                       int16_t *status)
{
    gint64 end = g_get_monotonic_time() + WAIT_MS * 1000ll;
    uint64_t id;

    if (blkfront_raw_put(bf, req) < 0) {
        return -1;
    }
    blkfront_raw_push(bf);
    blkfront_raw_kick(bf);
    while (g_get_monotonic_time() < end) {
        if (blkfront_raw_response(bf, &id, status) == 0) {
            return id == req->id ? 0 : -1;
        }
        g_usleep(1000);
    }
    return -1;
}

/* The disk at @devid serves @image as @w says. */
static void expect_served(Host *h, int devid, const char *image,
                          const char *devtype, const Want *w)
{
    struct blkfront_opts o = { .devid = devid, .timeout_ms = WAIT_MS };
    g_autofree char *sum = image ? image_checksum(image) : NULL;
    g_autofree char *after = NULL;
    g_autofree char *gran = NULL;
    g_autofree char *gran_path = be_path(h, devid, "discard-granularity");
    const struct blkfront_info *info;
    blkif_request_t req = { 0 };
    blkif_request_discard_t d = {
        .operation = BLKIF_OP_DISCARD, .id = 0x51, .sector_number = 64,
        .nr_sectors = 8,
    };
    blkfront *bf;
    uint32_t sect = 16;

    if (!wait_initwait(h, devid)) {
        return;
    }
    assert_frontend_nodes(h, devid, devtype);
    bf = blkfront_connect(h->dom, h->xs, &o);
    if (!bf) {
        fail("blkfront could not connect: %s", g_strerror(errno));
        return;
    }
    info = blkfront_info(bf);
    if (info->info != w->info) {
        fail("info is %#x, want %#x", info->info, w->info);
    }
    if (info->sectors * info->sector_size != IMAGE_BYTES) {
        fail("%" PRIu64 " sectors of %u bytes, want %u bytes",
             info->sectors, info->sector_size, IMAGE_BYTES);
    }
    if (info->feature_discard != w->discard) {
        fail("feature-discard %s, want %s",
             info->feature_discard ? "published" : "absent",
             w->discard ? "published" : "absent");
    }
    gran = read_node(gran_path);
    if (w->discard && (!gran || info->discard_granularity == 0)) {
        fail("feature-discard without discard-granularity");
    }

    /* A read returns the image's own bytes (sector 16 holds 16). */
    memset(h->page, 0, 4096);
    if (blkfront_io_sync(bf, BLKFRONT_OP_READ, 16 * 512, h->page, 4096) < 0) {
        fail("read: %s", g_strerror(errno));
    } else if (memcmp(h->page, &sect, sizeof(sect)) ||
               ((uint8_t *)h->page)[511] != 0x5a) {
        fail("read returned bytes that are not the image's");
    }

    /* A write: allowed or BLKIF_RSP_ERROR, as the spec says. */
    memset(h->page, 0xee, 4096);
    errno = 0;
    if (blkfront_io_sync(bf, BLKFRONT_OP_WRITE, 32 * 512, h->page,
                         4096) < 0) {
        if (w->writable || errno != EIO) {
            fail("write: %s", g_strerror(errno));
        }
    } else if (!w->writable) {
        fail("a write to a read-only disk succeeded");
    }

    /*
     * A discard the spec does not allow, sent anyway: a read-only disk
     * answers BLKIF_RSP_ERROR; a writable one without discard-enable may
     * also complete it as a no-op (the block layer drops discards without
     * discard=unmap); either way sector 64 keeps its bytes.
     */
    if (!w->writable || !w->discard) {
        int16_t status;

        sect = 64;
        memcpy(&req, &d, sizeof(d));
        if (raw_request(bf, &req, &status) < 0) {
            fail("no response to a discard");
        } else if (status == BLKIF_RSP_OKAY && !w->writable) {
            fail("a discard on a read-only disk succeeded");
        }
        if (blkfront_io_sync(bf, BLKFRONT_OP_READ, 64 * 512, h->page,
                             512) < 0 ||
            memcmp(h->page, &sect, sizeof(sect))) {
            fail("a discard the spec does not allow lost data");
        }
    } else if (blkfront_io_sync(bf, BLKFRONT_OP_DISCARD, 64 * 512, NULL,
                                4096) < 0) {
        fail("discard: %s", g_strerror(errno));
    }

    blkfront_close(bf);
    if (image && !w->writable) {
        after = image_checksum(image);
        if (strcmp(sum, after)) {
            fail("the read-only image changed");
        }
    }
}

/*
 * The disk at @devid is refused: one error in QEMU's log names it, a good
 * disk hot-plugged after it is created (the backend watch got past the bad
 * one) without a second attempt at the bad one, and the bad backend ends
 * as Linux backends end a device they cannot set up (xenbus_dev_fatal()):
 * Closed, with the reason in its error node, so that nobody waits for an
 * InitWait that will not come.
 */
static void expect_refused(Host *h, int devid, const char *good_image,
                           const char *good_vdev)
{
    xensim_ts_disk good = { .target = good_image, .vdev = good_vdev };
    g_autofree char *needle = g_strdup_printf("device '%d'", devid);
    g_autofree char *state = be_path(h, devid, "state");
    g_autofree char *error_node = g_strdup_printf(
        "/local/domain/0/error/backend/qdisk/%u/%d/error", h->domid, devid);
    g_autofree char *v = NULL;
    g_autofree char *why = NULL;
    int good_devid;

    good_devid = add_disk(h, &good);
    expect_served(h, good_devid, NULL, "disk", &RW);
    /* created in the watch event before the good disk's: settled by now */
    v = read_node(state);
    why = read_node(error_node);
    if (!v || strcmp(v, "6")) {
        fail("the bad disk's backend is in state %s, not Closed (6)",
             v ? v : "(absent)");
    }
    if (!why || !*why) {
        fail("no reason in %s", error_node);
    } else {
        printf("     %s: refused: %s\n", S.cur, why);
    }
    switch (log_count(h, needle)) {
    case 1:
        break;
    case 0:
        fail("QEMU logged no error for device %d", devid);
        break;
    default:
        fail("QEMU tried device %d more than once (%u errors)", devid,
             log_count(h, needle));
    }
}

/* --- cases ------------------------------------------------------------------ */

typedef enum { BOOT, HOTPLUG } When;

/* One disk, served as @w says, attached @when. */
static void served(When when, const xensim_ts_disk *disk, const char *image,
                   const Want *w)
{
    Host h;
    int devid = -1;

    if (host_start(&h, DOMID, when == BOOT ? disk : NULL, &devid)) {
        if (when == HOTPLUG) {
            devid = add_disk(&h, disk);
        }
        expect_served(&h, devid, image, disk->cdrom ? "cdrom" : "disk", w);
        assert_first_disk(&h);
    }
    host_stop(&h);
}

static void refused(When when, const xensim_ts_disk *disk)
{
    g_autofree char *good = make_raw("good.raw");
    Host h;
    int devid = -1;

    if (host_start(&h, DOMID, when == BOOT ? disk : NULL, &devid)) {
        if (when == HOTPLUG) {
            devid = add_disk(&h, disk);
        }
        expect_refused(&h, devid, good, "xvdc");
        assert_first_disk(&h);
    }
    host_stop(&h);
}

#define RO_INFO         VDISK_READONLY
#define CDROM_INFO      (VDISK_CDROM | VDISK_READONLY)

static void case_rw(void)
{
    g_autofree char *img = make_raw("rw.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb" };

    served(BOOT, &d, img, &RW);
}

static void case_rw_hotplug(void)
{
    g_autofree char *img = make_raw("rw.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb" };

    served(HOTPLUG, &d, img, &RW);
}

/* A hot-plugged disk publishes its features before InitWait. */
static void case_initwait_features(void)
{
    g_autofree char *img = make_raw("hot.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb" };

    S.check_order = true;
    served(HOTPLUG, &d, img, &RW);
    S.check_order = false;
}

static void case_no_discard(void)
{
    g_autofree char *img = make_raw("nodiscard.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb", .no_discard = true };
    Want w = { .writable = true };

    served(BOOT, &d, img, &w);
}

static void case_ro_raw(void)
{
    g_autofree char *img = make_raw("ro.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb", .readonly = true };
    Want w = { .info = RO_INFO };

    served(BOOT, &d, img, &w);
}

static void case_ro_raw_hotplug(void)
{
    g_autofree char *img = make_raw("ro.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb", .readonly = true };
    Want w = { .info = RO_INFO };

    served(HOTPLUG, &d, img, &w);
}

/* xl "access=ro, discard": discard asked for on a disk that cannot lose
 * data; either not offered or refused, never done. */
static void case_ro_discard(void)
{
    g_autofree char *img = make_raw("rod.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb", .readonly = true,
                         .discard = true };
    Want w = { .info = RO_INFO };

    served(BOOT, &d, img, &w);
}

static void case_ro_qcow2(void)
{
    g_autofree char *raw = make_raw("roq.raw");
    g_autofree char *img = make_converted(raw, "qcow2");
    xensim_ts_disk d = { .target = img, .format = "qcow2", .vdev = "xvdb",
                         .readonly = true };
    Want w = { .info = RO_INFO };

    served(BOOT, &d, img, &w);
}

static void case_qcow2(void)
{
    g_autofree char *raw = make_raw("q.raw");
    g_autofree char *img = make_converted(raw, "qcow2");
    xensim_ts_disk d = { .target = img, .format = "qcow2", .vdev = "xvdb" };

    served(BOOT, &d, img, &RW);
}

static void case_cdrom(void)
{
    g_autofree char *img = make_raw("cd.iso");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb", .cdrom = true };
    Want w = { .info = CDROM_INFO };

    served(BOOT, &d, img, &w);
}

/*
 * An empty cdrom (xl "devtype=cdrom" without a target: params "aio:").
 * A PV guest can never get media into it (libxl_cdrom_insert() wants an
 * HVM domain), so refusing it cleanly is what it owes.
 */
static void case_cdrom_empty(void)
{
    xensim_ts_disk d = { .vdev = "xvdb", .cdrom = true };

    refused(BOOT, &d);
}

/* params as a user may write a target: other prefixes, or none. */
static void prefix(const char *fmt)
{
    g_autofree char *img = make_raw("prefix.raw");
    g_autofree char *params = g_strdup_printf(fmt, img);
    xensim_ts_disk d = { .params = params, .vdev = "xvdb" };

    served(HOTPLUG, &d, img, &RW);
}

static void case_prefix_raw(void)
{
    prefix("raw:%s");
}

static void case_prefix_none(void)
{
    prefix("%s");
}

static void case_missing_path(void)
{
    xensim_ts_disk d = { .target = "/nonexistent/disk.raw", .vdev = "xvdb" };

    refused(HOTPLUG, &d);
}

static void case_params_empty(void)
{
    xensim_ts_disk d = { .params = "", .vdev = "xvdb" };

    refused(HOTPLUG, &d);
}

static void case_params_absent(void)
{
    xensim_ts_disk d = { .no_params = true, .vdev = "xvdb" };

    refused(HOTPLUG, &d);
}

/*
 * An NBD export as a libxl user can write it: the target "nbd:unix:PATH"
 * becomes params "aio:nbd:unix:PATH". xen-block opens only local files
 * and block devices, so it must refuse it cleanly.
 */
static void case_nbd(void)
{
    g_autofree char *sock = g_build_filename(S.dir, "nbd.sock", NULL);
    g_autofree char *target = g_strdup_printf("nbd:unix:%s", sock);
    xensim_ts_disk d = { .target = target, .vdev = "xvdb" };

    refused(HOTPLUG, &d);
}

/* A block device (libxl "target=/dev/loopN", format raw): host_device. */
static void case_block_device(void)
{
    g_autofree char *img = make_raw("loop.raw");
    g_autofree char *out = NULL;
    const char *argv[] = { "losetup", "--find", "--show", img, NULL };
    int status;

    if (!g_spawn_sync(NULL, (char **)argv, NULL, G_SPAWN_SEARCH_PATH |
                      G_SPAWN_STDERR_TO_DEV_NULL, NULL, NULL, &out, NULL,
                      &status, NULL) ||
        !g_spawn_check_wait_status(status, NULL)) {
        fprintf(stderr, "SKIP [%s] no loop device here\n", S.cur);
        S.skips++;
        return;
    }
    g_strstrip(out);
    {
        xensim_ts_disk d = { .target = out, .vdev = "xvdb" };
            const char *detach[] = { "losetup", "-d", out, NULL };

        served(HOTPLUG, &d, NULL, &RW);
        g_spawn_sync(NULL, (char **)detach, NULL, G_SPAWN_SEARCH_PATH, NULL,
                     NULL, NULL, NULL, NULL, NULL);
    }
}

/*
 * Two QEMUs open one image, as a live migration's source and destination
 * do (xen-block opens with locking off): both connect, and what one
 * writes (and flushes) the other reads.
 */
static void case_two_qemus(void)
{
    g_autofree char *img = make_raw("shared.raw");
    xensim_ts_disk d = { .target = img, .vdev = "xvdb" };
    Host a, b;
    int da = -1, db = -1;

    if (host_start(&a, DOMID, &d, &da) && host_start(&b, DOMID2, &d, &db)) {
        struct blkfront_opts oa = { .devid = da, .timeout_ms = WAIT_MS };
        struct blkfront_opts ob = { .devid = db, .timeout_ms = WAIT_MS };
        blkfront *fa, *fb;

        if (!wait_initwait(&a, da) || !wait_initwait(&b, db)) {
            goto out;
        }
        fa = blkfront_connect(a.dom, a.xs, &oa);
        fb = blkfront_connect(b.dom, b.xs, &ob);
        if (!fa || !fb) {
            fail("the %s QEMU's disk did not connect",
                 fa ? "second" : "first");
        } else {
            memset(a.page, 0x7e, 4096);
            if (blkfront_io_sync(fa, BLKFRONT_OP_WRITE, 0, a.page, 4096) ||
                blkfront_io_sync(fa, BLKFRONT_OP_FLUSH, 0, NULL, 0) ||
                blkfront_io_sync(fb, BLKFRONT_OP_READ, 0, b.page, 4096)) {
                fail("I/O: %s", g_strerror(errno));
            } else if (memcmp(a.page, b.page, 4096)) {
                fail("the second QEMU did not read what the first wrote");
            }
        }
        if (fa) {
            blkfront_close(fa);
        }
        if (fb) {
            blkfront_close(fb);
        }
                assert_first_disk(&a);
        assert_first_disk(&b);
    }
out:
    host_stop(&a);
    host_stop(&b);
}

#define BUSY_IOS        16
#define BUSY_IO_BYTES   (64 * 1024)

/*
 * QMP device_add of a xen-disk, the other way a disk is hot-plugged (a
 * management layer driving QEMU itself), while the first disk has
 * BUSY_IOS writes in flight: its features before InitWait (xen-bus makes
 * its backend and frontend nodes itself here), served as a disk without
 * discard (its block node has no discard=unmap), and every write of the
 * first disk answered.
 */
static void case_qmp_hotplug(void)
{
    static const Want rw_no_discard = { .writable = true };
    g_autofree char *img = make_raw("qmp.raw");
    g_autofree char *qmp_path = NULL;
    g_autofree char *add = NULL;
    g_autofree char *r1 = NULL;
    g_autofree char *r2 = NULL;
    g_autoptr(GError) err = NULL;
    struct blkfront_io io[BUSY_IOS];
    xensim_qmp *qmp = NULL;
    uint8_t *buf = NULL;
    unsigned int i, done = 0;
    Host h;

    if (!host_start(&h, DOMID, NULL, NULL)) {
        goto out;
    }
    qmp_path = xensim_ts_qmp_path(host_ts, h.domid);
    qmp = xensim_qmp_open(qmp_path, WAIT_MS, &err);
    if (!qmp) {
        fail("QMP: %s", err->message);
        goto out;
    }
    buf = blkfront_buf_alloc(h.first, BUSY_IOS * BUSY_IO_BYTES);
    memset(buf, 0x3c, BUSY_IOS * BUSY_IO_BYTES);
    for (i = 0; i < BUSY_IOS; i++) {
        io[i] = (struct blkfront_io) {
            .op = BLKFRONT_OP_WRITE, .offset = i * BUSY_IO_BYTES,
            .len = BUSY_IO_BYTES, .buf = buf + i * BUSY_IO_BYTES,
        };
        if (blkfront_queue(h.first, &io[i]) < 0) {
            fail("queue a write on the first disk: %s", g_strerror(errno));
            goto out;
        }
    }
    blkfront_commit(h.first);

    add = g_strdup_printf("{\"execute\":\"blockdev-add\",\"arguments\":"
                          "{\"driver\":\"raw\",\"node-name\":\"qmp0\","
                          "\"file\":{\"driver\":\"file\","
                          "\"filename\":\"%s\"}}}", img);
    r1 = xensim_qmp_call(qmp, add, WAIT_MS, &err);
    r2 = r1 ? xensim_qmp_call(qmp, "{\"execute\":\"device_add\","
                              "\"arguments\":{\"driver\":\"xen-disk\","
                              "\"id\":\"xvdb\",\"vdev\":\"xvdb\","
                              "\"drive\":\"qmp0\"}}", WAIT_MS, &err)
            : NULL;
    if (!r2) {
        fail("QMP hot-plug: %s", err->message);
        goto out;
    }
    S.check_order = true;
    expect_served(&h, xensim_ts_vdev_to_devid("xvdb"), img, "disk",
                  &rw_no_discard);
    S.check_order = false;

    while (done < BUSY_IOS && blkfront_wait(h.first, WAIT_MS) == 0) {
        struct blkfront_io *c[BUSY_IOS];
        unsigned int n = blkfront_reap(h.first, c, BUSY_IOS);

        for (i = 0; i < n; i++) {
            if (c[i]->error) {
                fail("a write of the first disk failed: %d", c[i]->error);
            }
        }
        done += n;
    }
    if (done < BUSY_IOS) {
        fail("%u of %u writes of the first disk answered", done, BUSY_IOS);
    }
    assert_first_disk(&h);
out:
    if (buf) {
        blkfront_buf_free(h.first, buf, BUSY_IOS * BUSY_IO_BYTES);
    }
    xensim_qmp_close(qmp);
    host_stop(&h);
}

/*
 * xl block-attach of a disk whose image is not there yet: refused; libxl
 * removes the device's nodes (libxl__device_destroy), the user creates
 * the image and attaches the same vdev again, which must now be served.
 */
static void case_reattach(void)
{
    g_autofree char *img = g_build_filename(S.dir, "later.raw", NULL);
    g_autofree char *made = NULL;
    g_autofree char *needle = NULL;
    g_autoptr(GError) err = NULL;
    xensim_ts_disk d = { .target = img, .vdev = "xvdb" };
    gint64 end;
    Host h;
    int devid;

    g_unlink(img);
    if (host_start(&h, DOMID, NULL, NULL)) {
        devid = add_disk(&h, &d);
        needle = g_strdup_printf("device '%d'", devid);
        end = g_get_monotonic_time() + WAIT_MS * 1000ll;
        while (!log_count(&h, needle) && g_get_monotonic_time() < end) {
            g_usleep(10000);
        }
        if (!log_count(&h, needle)) {
            fail("QEMU logged no error for the missing image");
        } else if (!xensim_ts_disk_remove(host_ts, DOMID, devid, &err)) {
            fail("disk_remove: %s", err->message);
        } else {
            made = make_raw("later.raw");
            devid = add_disk(&h, &d);
            expect_served(&h, devid, made, "disk", &RW);
            assert_first_disk(&h);
        }
    }
    host_stop(&h);
}

/*
 * xl block-detach with 32 writes in flight: libxl writes the backend's
 * state Closing and online 0 (libxl__initiate_device_generic_remove) and
 * waits for Closed. Every write must get its response before the ring
 * goes, each one answered OKAY must be on the disk, the frontend's close
 * must complete, and QEMU must destroy the device and go on.
 */
static void case_detach_inflight(void)
{
    g_autofree char *img = make_raw("detach.raw");
    g_autofree char *state = NULL;
    g_autofree char *online = NULL;
    g_autofree uint8_t *disk = NULL;
    xensim_ts_disk d = { .target = img, .vdev = "xvdb" };
    struct blkfront_opts o = { .timeout_ms = WAIT_MS };
    struct blkfront_io ios[32], *done[32];
    struct xs_handle *xsh;
    xs_transaction_t t;
    unsigned int i, n = 0;
    gsize len;
    gint64 end;
    blkfront *bf;
    uint8_t *buf;
    Host h;
    int devid = -1;

    if (!host_start(&h, DOMID, &d, &devid) || !wait_initwait(&h, devid)) {
        goto out;
    }
    o.devid = devid;
    bf = blkfront_connect(h.dom, h.xs, &o);
    if (!bf) {
        fail("blkfront could not connect");
        goto out;
    }
    buf = blkfront_buf_alloc(bf, 32 * 4096);
    for (i = 0; i < 32; i++) {
        memset(buf + i * 4096, 0xa0 + i, 4096);
        ios[i] = (struct blkfront_io) {
            .op = BLKFRONT_OP_WRITE, .offset = (64 + i * 8) * 512,
            .len = 4096, .buf = buf + i * 4096,
        };
        if (blkfront_queue(bf, &ios[i]) < 0) {
            fail("queue: %s", g_strerror(errno));
        }
    }
    blkfront_commit(bf);

    xsh = xensim_ts_xs(host_ts);
    state = be_path(&h, devid, "state");
    online = be_path(&h, devid, "online");
    do {
        t = xs_transaction_start(xsh);
        xs_write(xsh, t, state, "5", 1);
        xs_write(xsh, t, online, "0", 1);
    } while (!xs_transaction_end(xsh, t, false) && errno == EAGAIN);

    end = g_get_monotonic_time() + WAIT_MS * 1000ll;
    while (n < 32 && g_get_monotonic_time() < end) {
        blkfront_wait(bf, 100);
        n += blkfront_reap(bf, done + n, 32 - n);
    }
    if (n < 32) {
        fail("%u of 32 writes in flight got no response", 32 - n);
        blkfront_abandon(bf);
    } else {
        if (blkfront_disconnect(bf, false) < 0) {
            fail("the frontend's close did not complete: %s",
                 g_strerror(errno));
        }
        blkfront_close(bf);
    }
    if (!g_file_get_contents(img, (char **)&disk, &len, NULL)) {
        fail("cannot read the image back");
    }
    for (i = 0; disk && i < n; i++) {
        const uint8_t *p = disk + done[i]->offset;
        uint8_t want = 0xa0 + (done[i]->offset / 512 - 64) / 8;

        if (!done[i]->error && (p[0] != want || p[4095] != want)) {
            fail("a write answered OKAY is not on the disk");
            break;
        }
    }
    /* QEMU destroys the device, as libxl waits for (its nodes go) */
    end = g_get_monotonic_time() + WAIT_MS * 1000ll;
    while (g_get_monotonic_time() < end) {
        g_autofree char *v = read_node(state);

        if (!v || !strcmp(v, "6")) {
            break;
        }
        g_usleep(10000);
    }
    {
        g_autofree char *v = read_node(state);

        if (v && strcmp(v, "6")) {
            fail("backend state %s after the detach, want Closed", v);
        }
    }
    assert_first_disk(&h);
out:
    host_stop(&h);
}

static gint cmp_uint(gconstpointer a, gconstpointer b)
{
    unsigned int x = *(const unsigned int *)a, y = *(const unsigned int *)b;

    return x < y ? -1 : x > y;
}

/* Peak resident set of process @pid so far (VmHWM), in KiB; 0 if unknown */
static uint64_t peak_rss_kib(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/status", (int)pid);
    g_autofree char *text = NULL;
    const char *p;

    if (!g_file_get_contents(path, &text, NULL, NULL) ||
        !(p = strstr(text, "VmHWM:"))) {
        return 0;
    }
    return g_ascii_strtoull(p + strlen("VmHWM:"), NULL, 10);
}

/*
 * Whether process @pid runs with AddressSanitizer (gcc links libasan.so).
 * Its quarantine keeps freed memory resident (256 MiB by default), so its
 * resident set measures nothing; LeakSanitizer's exit check stands in.
 */
static bool runs_asan(pid_t pid)
{
    g_autofree char *path = g_strdup_printf("/proc/%d/maps", (int)pid);
    g_autofree char *text = NULL;

    return g_file_get_contents(path, &text, NULL, NULL) &&
           strstr(text, "/libasan.so");
}

#define FLOOD_WRITES        50000   /* of each kind: 100,000 in all */
#define FLOOD_RSS_KIB       1024
#define FLOOD_QMP_MS        2000
#define FLOOD_QMP_WRITES    200

typedef struct Flood {
    xensim_xs *xs;
    const char *path;
    unsigned int done;              /* writes made (atomic) */
    int error;                      /* errno of a failed write */
    gint running;
} Flood;

/* The guest: FLOOD_WRITES x "4", then FLOOD_WRITES alternating "3"/"4" */
static gpointer flood_writer(gpointer opaque)
{
    Flood *f = opaque;
    unsigned int i;

    for (i = 0; i < 2 * FLOOD_WRITES; i++) {
        const char *v = i < FLOOD_WRITES || (i & 1) ? "4" : "3";

        if (xensim_xs_write(f->xs, 0, f->path, v, 1) < 0) {
            f->error = errno;
            break;
        }
        g_atomic_int_inc(&f->done);
    }
    g_atomic_int_set(&f->running, 0);
    return NULL;
}

/*
 * A connected frontend rewrites its own state node FLOOD_WRITES times
 * with the same value (Connected), then as many times alternating
 * Initialised and Connected, the states a frontend passes through while
 * connecting; every write is a watch event that costs QEMU a xenstore
 * round trip or more. While it does, QEMU must go on answering its
 * toolstack: QMP calls within FLOOD_QMP_WRITES writes of the guest (the
 * median; its round trips measure time here, and the median ignores a
 * QEMU the host just did not schedule), not once QEMU has handled every
 * event queued before them. After it, QEMU's peak resident set must not have
 * grown by FLOOD_RSS_KIB (events queued one by one would; not checked
 * under ASan, see runs_asan()), the backend
 * must be Connected, the ring must work, and QEMU must stop on SIGTERM as
 * libxl asks it to (the teardown checks that).
 */
static void case_state_flood(void)
{
    g_autofree char *fe_state = NULL;
    g_autofree char *be_state = NULL;
    g_autofree char *qmp_path = NULL;
    g_autoptr(GError) err = NULL;
    xensim_qmp *qmp = NULL;
    GThread *writer;
    Flood f = { .running = 1 };
    Host h;
    uint64_t before, after;
    g_autoptr(GArray) lags = g_array_new(FALSE, FALSE, sizeof(unsigned int));
    unsigned int median = 0, worst = 0;

    if (!host_start(&h, DOMID, NULL, NULL)) {
        goto out;
    }
    fe_state = fe_path(&h, 51712, "state");
    be_state = be_path(&h, 51712, "state");
    qmp_path = xensim_ts_qmp_path(host_ts, h.domid);
    qmp = xensim_qmp_open(qmp_path, WAIT_MS, &err);
    if (!qmp) {
        fail("QMP: %s", err->message);
        goto out;
    }
    assert_first_disk(&h);
    before = peak_rss_kib(h.qemu);
    f.xs = h.xs;
    f.path = fe_state;
    writer = g_thread_new("flood", flood_writer, &f);
    while (g_atomic_int_get(&f.running)) {
        unsigned int w0 = g_atomic_int_get(&f.done);
        g_autofree char *r = xensim_qmp_call(qmp,
                                             "{\"execute\":\"query-status\"}",
                                             FLOOD_QMP_MS, &err);

        if (!r) {
            fail("QMP unanswered for %d ms while the guest wrote its state "
                 "(%u writes made): %s", FLOOD_QMP_MS,
                 g_atomic_int_get(&f.done), err->message);
            break;
        }
        if (g_atomic_int_get(&f.running)) {
            unsigned int lag = g_atomic_int_get(&f.done) - w0;

            g_array_append_val(lags, lag);
        }
        g_usleep(20000);
    }
    g_thread_join(writer);
    if (f.error) {
        fail("write %u of the frontend's state: %s", f.done,
             g_strerror(f.error));
        goto out;
    }
    if (!xensim_ts_wait_node(host_ts, be_state, "4", WAIT_MS, NULL)) {
        fail("the backend is not Connected after the flood");
    }
    assert_first_disk(&h);
    after = peak_rss_kib(h.qemu);
    g_array_sort(lags, cmp_uint);
    if (lags->len) {
        median = g_array_index(lags, unsigned int, lags->len / 2);
        worst = g_array_index(lags, unsigned int, lags->len - 1);
    }
    printf("     state-flood: %u state writes; %u QMP calls during them "
           "answered in %u writes (median), %u (slowest); QEMU peak RSS %"
           PRIu64 " -> %" PRIu64 " KiB\n", f.done, lags->len, median, worst,
           before, after);
    if (!lags->len || median >= FLOOD_QMP_WRITES) {
        fail("QMP calls took %u state writes (median) to answer", median);
    }
    if (runs_asan(h.qemu)) {
        printf("     state-flood: QEMU runs under ASan, its RSS is not "
               "checked (quarantine); LeakSanitizer checks at exit\n");
    } else if (!before || !after || after > before + FLOOD_RSS_KIB) {
        fail("QEMU's memory grew from %" PRIu64 " to %" PRIu64 " KiB",
             before, after);
    }
out:
    xensim_qmp_close(qmp);
    host_stop(&h);
}

static const struct {
    const char *name;
    void (*fn)(void);
    bool trace;                     /* the case reads xenstored's trace */
} cases[] = {
    { "rw", case_rw },
    { "rw-hotplug", case_rw_hotplug },
    { "qmp-hotplug", case_qmp_hotplug, .trace = true },
    { "initwait-features", case_initwait_features, .trace = true },
    { "no-discard", case_no_discard },
    { "ro-raw", case_ro_raw },
    { "ro-raw-hotplug", case_ro_raw_hotplug },
    { "ro-discard", case_ro_discard },
    { "ro-qcow2", case_ro_qcow2 },
    { "qcow2", case_qcow2 },
    { "cdrom", case_cdrom },
    { "cdrom-empty", case_cdrom_empty },
    { "prefix-raw", case_prefix_raw },
    { "prefix-none", case_prefix_none },
    { "missing-path", case_missing_path },
    { "params-empty", case_params_empty },
    { "params-absent", case_params_absent },
    { "reattach", case_reattach },
    { "nbd", case_nbd },
    { "block-device", case_block_device },
    { "two-qemus", case_two_qemus },
    { "detach-inflight", case_detach_inflight },
    { "state-flood", case_state_flood },
};

int main(int argc, char **argv)
{
    g_auto(GStrv) xfail = NULL;
    g_autofree char *only = NULL;
    g_autofree char *qemu = NULL;
    gboolean list = FALSE;
    GOptionEntry entries[] = {
        { "qemu", 0, 0, G_OPTION_ARG_FILENAME, &qemu, "QEMU binary", "PATH" },
        { "xfail", 0, 0, G_OPTION_ARG_STRING_ARRAY, &xfail,
          "case known to fail on this QEMU, and the patch that fixes it "
          "(repeatable)", "CASE[=FIX]" },
        { "case", 0, 0, G_OPTION_ARG_STRING, &only, "run only CASE",
          "CASE" },
        { "list", 0, 0, G_OPTION_ARG_NONE, &list, "list the cases", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "- libxl disk specs against a QEMU qdisk backend");
    g_autoptr(GError) err = NULL;
    xensim_ts_opts opts = { 0 };
    g_autofree char *logs = NULL;
    g_autofree char *dir = NULL;
    unsigned int ran = 0;
    size_t i;

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fprintf(stderr, "%s\n", err->message);
        return 2;
    }
    if (list) {
        for (i = 0; i < G_N_ELEMENTS(cases); i++) {
            printf("%s\n", cases[i].name);
        }
        return 0;
    }
    S.qemu = qemu ? qemu : g_getenv("QEMU_UPSTREAM");
    if (!S.qemu || !g_file_test(S.qemu, G_FILE_TEST_IS_EXECUTABLE)) {
        fprintf(stderr, "SKIP: no QEMU (--qemu)\n");
        return 77;
    }
    if (!g_file_test(xensim_ts_default_xenstored(),
                     G_FILE_TEST_IS_EXECUTABLE) ||
        !g_file_test(xensim_ts_default_shim(), G_FILE_TEST_EXISTS)) {
        fprintf(stderr, "SKIP: no xenstored or shim\n");
        return 77;
    }
    dir = g_path_get_dirname(S.qemu);
    S.qemu_img = g_build_filename(dir, "qemu-img", NULL);
    S.xfail = g_hash_table_new(g_str_hash, g_str_equal);
    for (i = 0; xfail && xfail[i]; i++) {
        char *eq = strchr(xfail[i], '=');

        if (eq) {
            *eq = '\0';
        }
        g_hash_table_insert(S.xfail, xfail[i], eq ? eq + 1 : "(unnamed)");
    }

    S.dir = g_dir_make_tmp("xenblk-specs-XXXXXX", NULL);
    for (i = 0; i < G_N_ELEMENTS(cases); i++) {
        bool x;

        if (only && strcmp(only, cases[i].name)) {
            continue;
        }
        S.cur = cases[i].name;
        S.case_failed = false;
        x = g_hash_table_contains(S.xfail, S.cur);
        logs = g_build_filename(S.dir, S.cur, NULL);
        opts.log_dir = logs;
        /* the trace costs ~0.15 ms a request: only where it is read */
        opts.xenstored_trace = cases[i].trace;
        host_ts = xensim_ts_start(&opts, &err);
        if (!host_ts) {
            fprintf(stderr, "stack: %s\n", err->message);
            return 1;
        }
        cases[i].fn();
        if (!xensim_ts_teardown(host_ts, &err)) {
            fail("teardown: %s", err->message);
            g_clear_error(&err);
        }
        host_ts = NULL;
        ran++;
        if (S.case_failed && x) {
            S.xfails++;
        } else if (S.case_failed) {
            S.failures++;
            fprintf(stderr, "       logs in %s\n", logs);
        } else if (x) {
            /* strict: an xfail list must say what really fails */
            S.failures++;
            fprintf(stderr, "XPASS [%s] marked as failing, but passed\n",
                    S.cur);
        } else {
            printf("ok   %s\n", S.cur);
        }
        g_clear_pointer(&logs, g_free);
    }
    printf("xenblk-specs: %u cases, %u failed, %u expected failures, "
           "%u skipped (%s)\n", ran, S.failures, S.xfails, S.skips, S.qemu);
    if (!S.failures) {
        g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", S.dir);

        if (system(cmd)) {
            /* left behind */
        }
    }
    return S.failures ? 1 : 0;
}
