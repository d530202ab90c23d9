/*
 * xenblk-fuzz: a hostile Xen PV block frontend against a QEMU backend.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * This process is the toolstack and the guest of one simulated host
 * (xensim): it starts the QEMU given on the command line as libxl starts a
 * PV guest's device model, with a raw disk, and then plays a frontend
 * that breaks the blkif rules on purpose (xen/io/blkif.h, xen/io/ring.h):
 *
 *   requests   nr_segments 0 / 12 / 255, first_sect > last_sect,
 *              last_sect >= 8, unknown grant refs, refs granted to another
 *              domain, read-only refs for a read, sectors past the end,
 *              sector_number * 512 wrapping to an in-range offset, unknown
 *              operations, discards with huge counts, grants revoked while
 *              the request is in flight;
 *   ring       req_prod beyond req_cons + ring size, req_prod moving back;
 *   xenstore   ring-page-order above the maximum, non-numeric or foreign
 *              event-channel, unknown protocol, ring-ref not granted;
 *   faults     during I/O, with the fork's merging and polling active:
 *              read EIO and write ENOSPC from blkdebug (inserted with
 *              blockdev-reopen), block_resize up and down, the IOThread's
 *              polling retuned and a refused x-blockdev-set-iothread, the
 *              frontend disconnecting with requests in flight.
 *
 * Valid requests come alone or in runs of adjacent ones (what the fork's
 * backend merges into one I/O), so merged completions, their errors and
 * their response slots are checked like any other.
 *
 * After each case it asserts what a backend owes a hostile guest: QEMU is
 * alive (its QMP monitor answers), every request it accepted from the
 * ring got exactly one response with an acceptable status (the bad ones
 * BLKIF_RSP_ERROR or BLKIF_RSP_EOPNOTSUPP), responses carry no bytes the
 * frontend did not put in the slot (XSA-216: padding), ring abuse either
 * halts the ring (no garbage processed) or disconnects, and the disk
 * holds exactly what the accepted writes put there (an in-memory model of
 * the whole disk, canary regions that no valid write touches, compared by
 * reading the disk back).
 *
 * Random mode runs N batches of random mixes of valid and malformed
 * requests, with ring abuse, revocations and reconnects (other protocol,
 * other ring order) now and then, all from one printed seed.
 *
 *   xenblk-fuzz --qemu PATH [--seed N] [--iterations N] [--mode M]
 *               [--xfail CASE]... [--list]
 *
 * --xfail names a case (or random-mode class) known to fail on this QEMU:
 * its failures are reported as expected and random mode does not
 * generate it. Exit status: 0 if no unexpected failure, 1 otherwise, 77
 * if the stack cannot run here (no xenstored or shim).
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>
#include <xen/io/blkif.h>
#include <xen/io/xenbus.h>

#include "xensim/blkfront.h"
#include "xensim/domu.h"
#include "xensim/toolstack.h"

#define DOMID           3
#define OTHER_DOMID     7           /* grants "to another domain" */
#define MEM_MB          96
#define DISK_BYTES      (16ull << 20)
#define SECT            512u
#define DISK_SECTS      (DISK_BYTES / SECT)
#define CANARY_SECTS    2048u       /* 1 MiB at each end: no valid write */
#define POOL_PAGES      1024u       /* data pages granted to dom0 */
#define MAX_BATCH       64u
#define RSP_TIMEOUT_MS  10000
#define SETTLE_MS       30          /* wait for responses nobody owes us */

#define FILL_REF 0xfffffff0u       /* rw_req(): bad_rw() grants a page */

#define ST_OK   (1u << 0)           /* BLKIF_RSP_OKAY */
#define ST_ERR  (1u << 1)           /* BLKIF_RSP_ERROR */
#define ST_NOTSUP (1u << 2)         /* BLKIF_RSP_EOPNOTSUPP */
#define ST_BAD  (ST_ERR | ST_NOTSUP)

/* --- state --------------------------------------------------------------- */

typedef struct Pend {
    uint64_t id;
    unsigned int expect;            /* ST_* accepted */
    uint8_t op;
    uint64_t sector;                /* for data checks (valid reads/writes) */
    unsigned int nseg;
    uint8_t *page[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    uint8_t first[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    uint8_t last[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    bool check_data;                /* valid read/write: model applies */
    bool untouched;                 /* pages must keep their fill */
    bool revoked;                   /* grant revoked in flight */
    bool discard;                   /* valid discard: forget the range */
    uint64_t discard_sects;
    bool got;
    int16_t status;
} Pend;

typedef struct Fuzz {
    const char *qemu;
    uint64_t seed, rng;
    GHashTable *xfail;              /* case names expected to fail */
    GHashTable *xfail_hit;
    GHashTable *ran;                /* cases run at least once */
    const char *cur;                /* current case */
    char *tmpdir, *logdir, *image;

    xensim_ts *ts;
    pid_t qemu_pid;
    xensim_domu *dom;
    xensim_xs *xs;
    int devid;
    char *fe, *be;
    int qmp;
    char qbuf[65536];
    size_t qlen;

    blkfront *bf;
    enum blkfront_protocol proto;
    int order;
    uint8_t *sring;                 /* the shared ring page(s) */
    unsigned int nr_ents, slot_size;
    uint8_t (*snap)[112];           /* request bytes per slot */
    bool ring_dead;                 /* abused: reconnect before use */
    bool no_padcheck;               /* slots hold garbage: skip XSA-216 */
    unsigned int unknown, padleak;  /* this batch, reported once */

    uint8_t *pool;
    int pool_ref[POOL_PAGES];
    unsigned int pool_next;
    uint8_t *ro_page, *ro_wpage, *other_page, *rev_pages;
    int ro_ref, ro_wref, other_ref;
    uint8_t *vbuf;                  /* whole-disk buffer for checks */

    uint8_t *model;                 /* DISK_BYTES */
    uint8_t *known;                 /* per sector: model is exact */

    Pend pend[MAX_BATCH * 2];
    unsigned int npend;
    uint64_t next_id;
    /* valid ranges of the batch: [start, end) sectors, and is-write */
    uint64_t rs[MAX_BATCH], re[MAX_BATCH];
    bool rw[MAX_BATCH];
    unsigned int nranges;

    /* counters */
    uint64_t execs, requests, responses, failures, xfails, crashes, hangs;
    uint64_t restarts, verifies, halts, disconnects;
    uint64_t fault_errors, resizes, iothread_changes, cut_inflight;
    bool fault_nodes;               /* "fplain" added in this stack */
    void (*during)(void);           /* batch_run(): right after the kick */
    GHashTable *case_fail;          /* name -> count */
} Fuzz;

static Fuzz F;

static uint64_t rnd(void)
{
    /* xorshift64* */
    F.rng ^= F.rng >> 12;
    F.rng ^= F.rng << 25;
    F.rng ^= F.rng >> 27;
    return F.rng * 0x2545f4914f6cdd1dull;
}

static uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

static void fill_rand(uint8_t *p, size_t len)
{
    size_t i;

    for (i = 0; i < len; i += 8) {
        uint64_t v = rnd();

        memcpy(p + i, &v, MIN(8, len - i));
    }
}

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...)
{
    va_list ap;
    char *msg;
    bool x = g_hash_table_contains(F.xfail, F.cur);

    va_start(ap, fmt);
    msg = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s [%s] %s (seed %" PRIu64 ")\n",
            x ? "XFAIL" : "FAIL", F.cur, msg, F.seed);
    g_free(msg);
    if (x) {
        F.xfails++;
        g_hash_table_add(F.xfail_hit, (gpointer)F.cur);
    } else {
        F.failures++;
    }
    g_hash_table_insert(F.case_fail, (gpointer)F.cur,
                        GUINT_TO_POINTER(GPOINTER_TO_UINT(
                            g_hash_table_lookup(F.case_fail, F.cur)) + 1));
}

/* --- QMP: is QEMU alive and answering? ----------------------------------- */

static bool qmp_line(char **line, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;

    for (;;) {
        char *nl = memchr(F.qbuf, '\n', F.qlen);

        if (nl) {
            size_t n = nl - F.qbuf + 1;

            *line = g_strndup(F.qbuf, n);
            memmove(F.qbuf, F.qbuf + n, F.qlen - n);
            F.qlen -= n;
            return true;
        }
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        struct pollfd p = { .fd = F.qmp, .events = POLLIN };

        if (left <= 0 || F.qlen == sizeof(F.qbuf) ||
            poll(&p, 1, left) <= 0) {
            return false;
        }
        ssize_t r = read(F.qmp, F.qbuf + F.qlen, sizeof(F.qbuf) - F.qlen);
        if (r <= 0) {
            return false;
        }
        F.qlen += r;
    }
}

/*
 * Send @cmd and wait for its answer (events are skipped): 1 "return",
 * 0 "error" (logged), -1 no answer in @timeout_ms.
 */
static int qmp_send(const char *cmd, int timeout_ms)
{
    char *line;

    if (F.qmp < 0 || write(F.qmp, cmd, strlen(cmd)) != (ssize_t)strlen(cmd)) {
        return -1;
    }
    while (qmp_line(&line, timeout_ms)) {
        int r = strstr(line, "\"return\"") ? 1 :
                strstr(line, "\"error\"") ? 0 : -1;

        if (r == 0) {
            fprintf(stderr, "xenblk-fuzz: [%s] QMP error: %s", F.cur, line);
        }
        g_free(line);
        if (r >= 0) {
            return r;
        }
    }
    return -1;
}

static bool qmp_cmd(const char *cmd, int timeout_ms)
{
    return qmp_send(cmd, timeout_ms) == 1;
}

static bool qmp_open(void)
{
    g_autofree char *path = xensim_ts_qmp_path(F.ts, DOMID);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *line;
    int i;

    F.qlen = 0;
    F.qmp = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    for (i = 0; i < 100; i++) {
        if (connect(F.qmp, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            break;
        }
        g_usleep(50000);
    }
    if (i == 100 || !qmp_line(&line, 5000)) {
        close(F.qmp);
        F.qmp = -1;
        return false;
    }
    g_free(line);
    return qmp_cmd("{\"execute\":\"qmp_capabilities\"}\n", 5000);
}

static bool qemu_exited(void)
{
    g_autofree char *stat = NULL;
    g_autofree char *p = g_strdup_printf("/proc/%d/stat", F.qemu_pid);
    char *s;

    if (!g_file_get_contents(p, &stat, NULL, NULL)) {
        return true;
    }
    s = strrchr(stat, ')');
    return !s || s[2] == 'Z' || s[2] == 'X';
}

/* QEMU alive: the process runs and its monitor answers. */
static bool qemu_alive(void)
{
    return !qemu_exited() &&
           qmp_cmd("{\"execute\":\"query-status\"}\n", 5000);
}

/* --- the stack ----------------------------------------------------------- */

static bool stack_start(void)
{
    g_autoptr(GError) err = NULL;
    xensim_ts_opts opts = { .log_dir = F.logdir };
    xensim_ts_disk disk = { .format = "raw", .vdev = "xvda" };
    g_autofree char *state = NULL;
    struct rlimit rl;
    int fd;

    fd = open(F.image, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, DISK_BYTES) < 0) {
        perror(F.image);
        return false;
    }
    close(fd);
    disk.target = F.image;
    F.ts = xensim_ts_start(&opts, &err);
    if (!F.ts ||
        !xensim_ts_domain_create(F.ts, DOMID, "fuzz", MEM_MB, &err) ||
        !xensim_ts_disk_add(F.ts, DOMID, &disk, &F.devid, &err) ||
        (F.qemu_pid = xensim_ts_qemu_start(F.ts, DOMID, F.qemu, NULL,
                                           &err)) < 0) {
        fprintf(stderr, "stack: %s (logs in %s)\n",
                err ? err->message : "?", F.logdir);
        return false;
    }
    /*
     * A runaway allocation (a hostile request making QEMU allocate without
     * bound) must end in QEMU's abort, not in the host's OOM killer: cap
     * its address space well above what it needs (about 1.3 GiB). Not
     * under AddressSanitizer, which reserves terabytes of shadow address
     * space (check-asan caps single allocations with max_allocation_size_mb
     * instead).
     */
    if (!g_getenv("ASAN_OPTIONS")) {
        rl.rlim_cur = rl.rlim_max = 3ull << 30;
        prlimit(F.qemu_pid, RLIMIT_AS, &rl, NULL);
    }

    F.be = xensim_ts_backend_path(DOMID, F.devid);
    F.fe = xensim_ts_frontend_path(DOMID, F.devid);
    state = g_strdup_printf("%s/state", F.be);
    if (!xensim_ts_wait_backend_ready(F.ts, DOMID, F.devid, 30000, &err)) {
        fprintf(stderr, "stack: %s (logs in %s)\n", err->message, F.logdir);
        return false;
    }
    F.dom = xensim_domu_open(xensim_ts_run_dir(F.ts), DOMID);
    F.xs = F.dom ? xensim_xs_open(F.dom) : NULL;
    if (!F.xs) {
        perror("domu");
        return false;
    }
    if (!qmp_open()) {
        fprintf(stderr, "stack: no QMP\n");
        return false;
    }
    return true;
}

static void stack_stop(void)
{
    if (F.bf) {
        if (!F.ring_dead && qemu_alive()) {
            blkfront_close(F.bf);
        } else {
            blkfront_abandon(F.bf);     /* the host goes away */
        }
        F.bf = NULL;
    }
    g_free(F.snap);
    F.snap = NULL;
    if (F.qmp >= 0) {
        close(F.qmp);
        F.qmp = -1;
    }
    xensim_xs_close(F.xs);
    F.xs = NULL;
    xensim_domu_close(F.dom);
    F.dom = NULL;
    xensim_ts_teardown(F.ts, NULL);
    F.ts = NULL;
    F.fault_nodes = false;
    g_free(F.fe);
    g_free(F.be);
    F.fe = F.be = NULL;
}

/* The shared ring: the page granted as ring-ref (or ring-ref0). */
static uint8_t *find_sring(void)
{
    g_autofree char *p = g_strdup_printf("%s/%s", F.fe,
                                         F.order ? "ring-ref0" : "ring-ref");
    uint64_t ref;

    if (xensim_xs_read_u64(F.xs, XENSIM_XBT_NULL, p, &ref) < 0 ||
        ref >= XENSIM_GNTTAB_ENTRIES) {
        return NULL;
    }
    return xensim_domu_page(F.dom, xensim_domu_gnttab(F.dom)[ref].frame);
}

/* Take up the ring of a new connection of F.bf (connect or reconnect). */
static bool ring_adopt(void)
{
    F.order = blkfront_info(F.bf)->ring_order;
    F.nr_ents = blkfront_info(F.bf)->ring_entries;
    F.sring = find_sring();
    g_free(F.snap);
    F.snap = g_malloc0(F.nr_ents * sizeof(*F.snap));
    F.ring_dead = false;
    return F.sring != NULL;
}

static bool fe_connect(int order, enum blkfront_protocol proto)
{
    struct blkfront_opts o = { .devid = F.devid, .ring_order = order,
                               .protocol = proto, .timeout_ms = 10000 };

    F.bf = blkfront_connect(F.dom, F.xs, &o);
    if (!F.bf) {
        fail("blkfront_connect: %s", strerror(errno));
        return false;
    }
    F.proto = proto;
    F.slot_size = proto == BLKFRONT_PROTO_X86_32 ? 108 : 112;
    return ring_adopt();
}

/* Grant the data pool to dom0 (writable) and the odd pages. */
static bool grant_pool(void)
{
    unsigned int i;

    F.pool = xensim_domu_alloc_pages(F.dom, POOL_PAGES);
    F.ro_page = xensim_domu_alloc_pages(F.dom, 1);
    F.ro_wpage = xensim_domu_alloc_pages(F.dom, 1);
    F.other_page = xensim_domu_alloc_pages(F.dom, 1);
    F.rev_pages = xensim_domu_alloc_pages(F.dom, MAX_BATCH);
    F.vbuf = xensim_domu_alloc_pages(F.dom, DISK_BYTES / XENSIM_PAGE_SIZE);
    if (!F.pool || !F.ro_page || !F.ro_wpage || !F.other_page ||
        !F.rev_pages || !F.vbuf) {
        return false;
    }
    for (i = 0; i < POOL_PAGES; i++) {
        F.pool_ref[i] = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(
                            F.dom, F.pool + i * XENSIM_PAGE_SIZE), false);
        if (F.pool_ref[i] < 0) {
            return false;
        }
    }
    F.ro_ref = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(F.dom, F.ro_page),
                                 true);
    F.ro_wref = xensim_domu_grant(F.dom, 0,
                                  xensim_domu_gfn(F.dom, F.ro_wpage), true);
    F.other_ref = xensim_domu_grant(F.dom, OTHER_DOMID,
                                    xensim_domu_gfn(F.dom, F.other_page),
                                    false);
    return F.ro_ref >= 0 && F.ro_wref >= 0 && F.other_ref >= 0;
}

/* --- the disk model ------------------------------------------------------ */

/* Read the whole disk and compare it with the model where it is known. */
static bool verify_disk(void)
{
    uint64_t s, bad = 0, first = 0;

    F.verifies++;
    memset(F.vbuf, 0xee, DISK_BYTES);
    if (blkfront_io_sync(F.bf, BLKFRONT_OP_READ, 0, F.vbuf, DISK_BYTES) < 0) {
        fail("reading the disk back: %s", strerror(errno));
        return false;
    }
    for (s = 0; s < DISK_SECTS; s++) {
        if (F.known[s] && memcmp(F.vbuf + s * SECT, F.model + s * SECT,
                                 SECT)) {
            if (!bad++) {
                first = s;
            }
        }
    }
    if (bad) {
        fail("disk corrupted: %" PRIu64 " sectors differ from the model, "
             "first %" PRIu64 " (%s)", bad, first,
             first < CANARY_SECTS || first >= DISK_SECTS - CANARY_SECTS ?
             "canary" : "scratch");
        /* Resynchronise so that one corruption is reported once. */
        memcpy(F.model, F.vbuf, DISK_BYTES);
        memset(F.known, 1, DISK_SECTS);
        return false;
    }
    return true;
}

/* Fill the disk with a random pattern through the regular frontend. */
static bool init_disk(void)
{
    fill_rand(F.model, DISK_BYTES);
    memset(F.known, 1, DISK_SECTS);
    memcpy(F.vbuf, F.model, DISK_BYTES);
    if (blkfront_io_sync(F.bf, BLKFRONT_OP_WRITE, 0, F.vbuf, DISK_BYTES) < 0) {
        fail("initial disk write: %s", strerror(errno));
        return false;
    }
    return verify_disk();
}

/* --- requests ------------------------------------------------------------ */

static void batch_begin(void)
{
    F.unknown = F.padleak = 0;
    F.npend = 0;
    F.nranges = 0;
    F.pool_next = 0;
}

static unsigned int ring_free(void)
{
    struct blkfront_ring_state rs;

    blkfront_ring_state(F.bf, &rs);
    return F.nr_ents - (rs.req_prod_pvt - rs.rsp_cons);
}

static uint8_t *pool_page(int *ref)
{
    unsigned int i = F.pool_next++;

    g_assert(i < POOL_PAGES);       /* pages are not shared in a batch */

    *ref = F.pool_ref[i];
    return F.pool + i * XENSIM_PAGE_SIZE;
}

/* Put @req on the ring, remembering what it should get back. */
static Pend *put(blkif_request_t *req, unsigned int expect)
{
    struct blkfront_ring_state rs;
    Pend *p;

    g_assert(F.npend < G_N_ELEMENTS(F.pend));
    p = &F.pend[F.npend++];
    memset(p, 0, sizeof(*p));
    req->id = p->id = F.next_id++;
    p->expect = expect;
    p->op = req->operation;
    blkfront_ring_state(F.bf, &rs);
    if (blkfront_raw_put(F.bf, req) < 0) {
        F.npend--;
        return NULL;
    }
    /* The slot as we wrote it: a response may change only its fields. */
    memcpy(F.snap[rs.req_prod_pvt % F.nr_ents],
           F.sring + 64 + (rs.req_prod_pvt % F.nr_ents) * F.slot_size,
           F.slot_size);
    F.requests++;
    return p;
}

/* Does [s, e) overlap a valid range of the batch (a write, or any if w)? */
static bool overlaps(uint64_t s, uint64_t e, bool w)
{
    unsigned int i;

    for (i = 0; i < F.nranges; i++) {
        if (s < F.re[i] && F.rs[i] < e && (w || F.rw[i])) {
            return true;
        }
    }
    return false;
}

/* A scratch range of @n sectors that no write of the batch touches. */
static bool pick_range(unsigned int n, bool w, uint64_t *s)
{
    int tries;

    for (tries = 0; tries < 16; tries++) {
        uint64_t lo = CANARY_SECTS, hi = DISK_SECTS - CANARY_SECTS - n;

        *s = lo + rnd_below(hi - lo + 1);
        if (!overlaps(*s, *s + n, w)) {
            g_assert(F.nranges < MAX_BATCH);
            F.rs[F.nranges] = *s;
            F.re[F.nranges] = *s + n;
            F.rw[F.nranges++] = w;
            return true;
        }
    }
    return false;
}

/*
 * Fill @req's segments with random page fragments of the pool for a
 * valid read or write; @ro puts the read-only granted page in a write's
 * first segment. Returns the request's length in sectors.
 */
static unsigned int valid_segs(blkif_request_t *req, uint8_t **page, bool ro)
{
    unsigned int i, n = 0;

    for (i = 0; i < req->nr_segments; i++) {
        int ref;

        req->seg[i].first_sect = rnd_below(8);
        req->seg[i].last_sect = req->seg[i].first_sect +
                                rnd_below(8 - req->seg[i].first_sect);
        if (ro && i == 0 && req->operation == BLKIF_OP_WRITE) {
            page[i] = F.ro_wpage;
            ref = F.ro_wref;
        } else {
            page[i] = pool_page(&ref);
        }
        req->seg[i].gref = ref;
        n += req->seg[i].last_sect - req->seg[i].first_sect + 1;
        if (req->operation == BLKIF_OP_WRITE) {
            fill_rand(page[i], XENSIM_PAGE_SIZE);
        } else {
            memset(page[i], 0x5a, XENSIM_PAGE_SIZE);
        }
    }
    return n;
}

/* Put a valid request made by valid_segs(), its data checked on return. */
static Pend *valid_put(blkif_request_t *req, uint8_t **page)
{
    Pend *p = put(req, ST_OK);
    unsigned int i;

    if (p) {
        p->sector = req->sector_number;
        p->nseg = req->nr_segments;
        p->check_data = true;
        for (i = 0; i < p->nseg; i++) {
            p->page[i] = page[i];
            p->first[i] = req->seg[i].first_sect;
            p->last[i] = req->seg[i].last_sect;
        }
    }
    return p;
}

/* A valid read or write of @nseg fragments at a free scratch range. */
static Pend *valid_rw(uint8_t op, unsigned int nseg, bool ro)
{
    blkif_request_t req = { .operation = op, .nr_segments = nseg };
    uint8_t *page[BLKIF_MAX_SEGMENTS_PER_REQUEST];
    unsigned int n = valid_segs(&req, page, ro);
    uint64_t s;

    if (!pick_range(n, op != BLKIF_OP_READ, &s)) {
        return NULL;
    }
    req.sector_number = s;
    return valid_put(&req, page);
}

#define RUN_MAX 8

/*
 * @k (at most RUN_MAX) valid requests of @op, adjacent on the disk and
 * in ring order: the fork's backend merges them into one I/O. The run's
 * range keeps one free sector on each side, so that no other request of
 * the batch can join the merge. Fills @p (may be NULL) with the requests;
 * returns how many were put.
 */
static unsigned int valid_run(uint8_t op, unsigned int k, Pend **p)
{
    blkif_request_t req[RUN_MAX];
    uint8_t *page[RUN_MAX][BLKIF_MAX_SEGMENTS_PER_REQUEST];
    unsigned int n[RUN_MAX], total = 0, j, put = 0;
    uint64_t s;

    k = MIN(MIN(k, RUN_MAX), ring_free());
    for (j = 0; j < k; j++) {
        req[j] = (blkif_request_t){ .operation = op,
                                    .nr_segments = 1 + rnd_below(11) };
        n[j] = valid_segs(&req[j], page[j], false);
        total += n[j];
    }
    if (!k || !pick_range(total + 2, op != BLKIF_OP_READ, &s)) {
        return 0;
    }
    s++;
    for (j = 0; j < k; j++) {
        Pend *q;

        req[j].sector_number = s;
        s += n[j];
        q = valid_put(&req[j], page[j]);
        if (!q) {
            break;
        }
        if (p) {
            p[put] = q;
        }
        put++;
    }
    return put;
}

/*
 * A malformed read or write at the canary: it must fail and change nothing
 * on the disk. Unless @io_ok (the request is well formed up to its grants,
 * which fail one by one as in Xen), the backend must not even do the I/O:
 * a read's pages stay as they were.
 */
static Pend *bad_rw_io(blkif_request_t *req, unsigned int expect, bool io_ok)
{
    unsigned int i, n = MIN(req->nr_segments, BLKIF_MAX_SEGMENTS_PER_REQUEST);
    Pend *p;
    uint8_t *page[BLKIF_MAX_SEGMENTS_PER_REQUEST] = { 0 };

    for (i = 0; i < n; i++) {
        if (req->seg[i].gref == FILL_REF) {
            int ref;

            page[i] = pool_page(&ref);
            req->seg[i].gref = ref;
            if (req->operation == BLKIF_OP_WRITE) {
                fill_rand(page[i], XENSIM_PAGE_SIZE);
            } else {
                memset(page[i], 0x5a, XENSIM_PAGE_SIZE);
            }
        }
    }
    p = put(req, expect);
    if (p && req->operation == BLKIF_OP_READ && expect == ST_ERR && !io_ok) {
        p->untouched = true;
        p->nseg = n;
        memcpy(p->page, page, sizeof(page));
    }
    return p;
}

static Pend *bad_rw(blkif_request_t *req, unsigned int expect)
{
    return bad_rw_io(req, expect, false);
}

static bool status_ok(unsigned int expect, int16_t status)
{
    return ((expect & ST_OK) && status == BLKIF_RSP_OKAY) ||
           ((expect & ST_ERR) && status == BLKIF_RSP_ERROR) ||
           ((expect & ST_NOTSUP) && status == BLKIF_RSP_EOPNOTSUPP);
}

/* Padding bytes of a response slot (XSA-216): unchanged from the request. */
static void check_padding(RING_IDX idx)
{
    const uint8_t *slot = F.sring + 64 + (idx % F.nr_ents) * F.slot_size;
    const uint8_t *was = F.snap[idx % F.nr_ents];
    static const unsigned int pad64[] = { 9, 12, 13, 14, 15 };
    static const unsigned int pad32[] = { 9 };
    const unsigned int *pad = F.proto == BLKFRONT_PROTO_X86_32 ? pad32 : pad64;
    unsigned int i, n = F.proto == BLKFRONT_PROTO_X86_32 ? 1 : 5;

    for (i = 0; i < n; i++) {
        if (slot[pad[i]] != was[pad[i]] && !F.padleak++) {
            fail("response %u: padding byte %u is 0x%02x, the frontend "
                 "left 0x%02x there (backend data leaked)", idx, pad[i],
                 slot[pad[i]], was[pad[i]]);
            return;
        }
    }
}

static Pend *find_pend(uint64_t id)
{
    unsigned int i;

    for (i = 0; i < F.npend; i++) {
        if (F.pend[i].id == id) {
            return &F.pend[i];
        }
    }
    return NULL;
}

static unsigned int nr_got(void)
{
    unsigned int i, n = 0;

    for (i = 0; i < F.npend; i++) {
        n += F.pend[i].got;
    }
    return n;
}

/* Take every available response; false on a protocol violation. */
static unsigned int collect(void)
{
    struct blkfront_ring_state rs;
    unsigned int n = 0;
    uint64_t id;
    int16_t st;

    for (;;) {
        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod == rs.rsp_cons) {
            blkfront_raw_set_rsp_event(F.bf, rs.rsp_cons + 1);
            blkfront_ring_state(F.bf, &rs);
            if (rs.rsp_prod == rs.rsp_cons) {
                return n;
            }
        }
        if (rs.rsp_prod - rs.rsp_cons > F.nr_ents) {
            fail("rsp_prod %u is more than a ring ahead of rsp_cons %u",
                 rs.rsp_prod, rs.rsp_cons);
            F.ring_dead = true;
            return n;
        }
        if (!F.no_padcheck) {
            check_padding(rs.rsp_cons);
        }
        if (blkfront_raw_response(F.bf, &id, &st) < 0) {
            return n;
        }
        F.responses++;
        n++;
        Pend *p = find_pend(id);
        if (!p) {
            if (F.unknown++) {
                continue;
            }
            fail("response with id 0x%" PRIx64 " that no request of this "
                 "batch has (status %d)", id, st);
            continue;
        }
        if (p->got) {
            fail("second response for request 0x%" PRIx64 " (op %u)", id,
                 p->op);
            continue;
        }
        p->got = true;
        p->status = st;
    }
}

static void check_pages(Pend *p, const char *what)
{
    unsigned int i;

    for (i = 0; i < p->nseg; i++) {
        unsigned int j;

        for (j = 0; j < XENSIM_PAGE_SIZE; j++) {
            if (p->page[i][j] != 0x5a) {
                fail("%s request 0x%" PRIx64 " failed but wrote the guest's "
                     "page %u at byte %u", what, p->id, i, j);
                return;
            }
        }
    }
}

/* Apply a completed valid read/write to the model, or check a read. */
static void apply(Pend *p)
{
    uint64_t s = p->sector;
    unsigned int i, k;

    if (p->discard) {
        if (p->status == BLKIF_RSP_OKAY) {
            memset(F.known + p->sector, 0, p->discard_sects);
        }
        return;
    }
    if (!p->check_data) {
        if (p->untouched) {
            check_pages(p, "malformed read");
        }
        return;
    }
    if (p->status != BLKIF_RSP_OKAY) {
        if (p->op == BLKIF_OP_WRITE) {
            /* a failed write leaves each sector old or new */
            for (i = 0; i < p->nseg; i++) {
                unsigned int n = p->last[i] - p->first[i] + 1;

                memset(F.known + s, 0, n);
                s += n;
            }
            return;
        }
        if (p->op == BLKIF_OP_READ && p->revoked) {
            /* each page untouched, or the full right data */
            for (i = 0; i < p->nseg; i++) {
                uint8_t *d = p->page[i] + p->first[i] * SECT;
                unsigned int n = p->last[i] - p->first[i] + 1;
                bool pristine = true;

                for (k = 0; k < n * SECT; k++) {
                    pristine &= d[k] == 0x5a;
                }
                for (k = 0; !pristine && k < n; k++) {
                    if (F.known[s + k] &&
                        memcmp(d + k * SECT, F.model + (s + k) * SECT,
                               SECT)) {
                        fail("revoked read 0x%" PRIx64 ": segment %u neither "
                             "untouched nor the disk's data", p->id, i);
                        break;
                    }
                }
                s += n;
            }
        }
        return;
    }
    for (i = 0; i < p->nseg; i++) {
        uint8_t *d = p->page[i] + p->first[i] * SECT;
        unsigned int n = p->last[i] - p->first[i] + 1;

        if (p->op == BLKIF_OP_WRITE) {
            memcpy(F.model + s * SECT, d, n * SECT);
            memset(F.known + s, 1, n);
        } else {
            for (k = 0; k < n; k++) {
                if (F.known[s + k] &&
                    memcmp(d + k * SECT, F.model + (s + k) * SECT, SECT)) {
                    fail("read 0x%" PRIx64 " (sector %" PRIu64 ", segment %u)"
                         " returned data that is not on the disk", p->id,
                         s + k, i);
                    return;
                }
            }
        }
        s += n;
    }
}

/*
 * Push and kick the batch, wait for every response it is owed, then a
 * little longer for responses nobody owes us, and check them all.
 * @revoke: end the grants of these refs right after the kick.
 */
static bool batch_run(const int *revoke, unsigned int nrevoke)
{
    gint64 deadline;
    unsigned int i, got = 0, missing = 0;

    F.execs++;
    blkfront_raw_push(F.bf);
    blkfront_raw_kick(F.bf);
    for (i = 0; i < nrevoke; i++) {
        xensim_domu_end_grant(F.dom, revoke[i]);
    }
    if (F.during) {
        F.during();
        F.during = NULL;
    }
    deadline = g_get_monotonic_time() + RSP_TIMEOUT_MS * 1000ll;
    while (g_get_monotonic_time() < deadline && !F.ring_dead) {
        collect();
        got = nr_got();
        if (got == F.npend) {
            break;
        }
        blkfront_wait(F.bf, 20);
    }
    g_usleep(SETTLE_MS * 1000);
    collect();
    for (i = 0; i < F.npend; i++) {
        Pend *p = &F.pend[i];

        if (!p->got) {
            missing++;
            continue;
        }
        if (!status_ok(p->expect, p->status)) {
            fail("request 0x%" PRIx64 " (op %u): status %d, want %s%s%s",
                 p->id, p->op, p->status,
                 p->expect & ST_OK ? "OKAY " : "",
                 p->expect & ST_ERR ? "ERROR " : "",
                 p->expect & ST_NOTSUP ? "EOPNOTSUPP" : "");
        }
        apply(p);
    }
    if (missing) {
        if (!qemu_alive()) {
            return false;
        }
        fail("%u of %u requests got no response in %d ms", missing, F.npend,
             RSP_TIMEOUT_MS);
        F.ring_dead = true;     /* they may still come: start over */
    }
    return true;
}

/* --- cases --------------------------------------------------------------- */

static blkif_request_t rw_req(uint8_t op, uint64_t sector, unsigned int nseg)
{
    blkif_request_t r = { .operation = op, .nr_segments = nseg,
                          .sector_number = sector };
    unsigned int i;

    for (i = 0; i < MIN(nseg, BLKIF_MAX_SEGMENTS_PER_REQUEST); i++) {
        r.seg[i].gref = FILL_REF;
        r.seg[i].first_sect = 0;
        r.seg[i].last_sect = 7;
    }
    return r;
}

static uint64_t canary_sector(void)
{
    return rnd_below(CANARY_SECTS - 88);
}

static void add_nr_segments(void)
{
    blkif_request_t r;

    valid_rw(BLKIF_OP_WRITE, 11, false);        /* the maximum is fine */
    valid_rw(BLKIF_OP_READ, 11, false);
    r = rw_req(BLKIF_OP_WRITE, canary_sector(), 12);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 12);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, canary_sector(), 255);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 255);
    bad_rw(&r, ST_ERR);
    /*
     * No segment: blkif.h has no use for it outside a flush, Linux blkback
     * fails it; an implementation may also complete it as a no-op.
     */
    r = rw_req(BLKIF_OP_WRITE, canary_sector(), 0);
    put(&r, ST_OK | ST_ERR);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 0);
    put(&r, ST_OK | ST_ERR);
    r = rw_req(BLKIF_OP_FLUSH_DISKCACHE, 0, 0);
    put(&r, ST_OK);
}

static void add_bad_sects(void)
{
    blkif_request_t r;
    int i;

    for (i = 0; i < 2; i++) {
        uint8_t op = i ? BLKIF_OP_READ : BLKIF_OP_WRITE;

        r = rw_req(op, canary_sector(), 3);
        r.seg[1].first_sect = 5;
        r.seg[1].last_sect = 4;                 /* first > last */
        bad_rw(&r, ST_ERR);
        r = rw_req(op, canary_sector(), 1);
        r.seg[0].first_sect = 7;
        r.seg[0].last_sect = 0;
        bad_rw(&r, ST_ERR);
        r = rw_req(op, canary_sector(), 2);
        r.seg[1].last_sect = 8;                 /* crosses the page */
        bad_rw(&r, ST_ERR);
        r = rw_req(op, canary_sector(), 1);
        r.seg[0].first_sect = 200;
        r.seg[0].last_sect = 255;
        bad_rw(&r, ST_ERR);
    }
}

/* A ref whose grant entry is empty (not granted to anyone) */
static uint32_t free_ref(void)
{
    grant_entry_v1_t *gt = xensim_domu_gnttab(F.dom);
    uint32_t ref;

    do {
        ref = 8 + rnd_below(XENSIM_GNTTAB_ENTRIES - 8);
    } while (gt[ref].flags);
    return ref;
}

static void add_bad_grants(void)
{
    static const uint32_t wild[] = {
        0, XENSIM_GNTTAB_ENTRIES, XENSIM_GNTTAB_ENTRIES * 16, 0x7fffffff,
        0xffffffff,
    };
    blkif_request_t r;
    unsigned int i;
    Pend *p;

    for (i = 0; i < G_N_ELEMENTS(wild) + 2; i++) {
        uint8_t op = i & 1 ? BLKIF_OP_READ : BLKIF_OP_WRITE;
        uint32_t ref = i < G_N_ELEMENTS(wild) ? wild[i] : free_ref();

        r = rw_req(op, canary_sector(), 2);
        r.seg[1].gref = ref;
        bad_rw_io(&r, ST_ERR, true);
    }
    /* Granted to another domain: neither read into nor written from */
    memset(F.other_page, 0x5a, XENSIM_PAGE_SIZE);
    for (i = 0; i < 2; i++) {
        r = rw_req(i ? BLKIF_OP_READ : BLKIF_OP_WRITE, canary_sector(), 1);
        r.seg[0].gref = F.other_ref;
        p = put(&r, ST_ERR);
        if (p && i) {
            p->untouched = true;
            p->nseg = 1;
            p->page[0] = F.other_page;
        }
    }
    /* Read-only: cannot be read into, but can be written from */
    memset(F.ro_page, 0x5a, XENSIM_PAGE_SIZE);
    r = rw_req(BLKIF_OP_READ, canary_sector(), 1);
    r.seg[0].gref = F.ro_ref;
    p = put(&r, ST_ERR);
    if (p) {
        p->untouched = true;
        p->nseg = 1;
        p->page[0] = F.ro_page;
    }
    valid_rw(BLKIF_OP_WRITE, 2, true);
}

static void add_past_end(void)
{
    blkif_request_t r;
    Pend *p;

    r = rw_req(BLKIF_OP_READ, DISK_SECTS - 1, 1);       /* 8 sectors: 1 in */
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, DISK_SECTS, 1);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, DISK_SECTS + 4096, 11);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, UINT64_MAX, 1);
    bad_rw(&r, ST_ERR);
    /* the last sector itself is fine */
    r = rw_req(BLKIF_OP_READ, DISK_SECTS - 1, 1);
    r.seg[0].first_sect = r.seg[0].last_sect = 7;
    p = bad_rw(&r, ST_OK);
    (void)p;
}

/*
 * sector_number * 512 wraps: 2^55 + k sectors is byte 2^64 + 512k, i.e.
 * 512k in 64 bits, inside the disk. The backend must refuse it, not write
 * the canary at sector k.
 */
static void add_overflow(void)
{
    blkif_request_t r;
    uint64_t k = canary_sector();
    Pend *v;

    r = rw_req(BLKIF_OP_WRITE, (1ull << 55) + k, 2);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_READ, (1ull << 55) + k, 2);
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, (1ull << 54) + k, 1);  /* 2^63: negative */
    bad_rw(&r, ST_ERR);
    r = rw_req(BLKIF_OP_WRITE, UINT64_MAX - 7, 1);    /* -4096 */
    bad_rw(&r, ST_ERR);
    /* Right after a valid write, "adjacent" only through the wrap */
    v = valid_rw(BLKIF_OP_WRITE, 1, false);
    if (v) {
        r = rw_req(BLKIF_OP_WRITE, (1ull << 55) + v->sector +
                   v->last[0] - v->first[0] + 1, 1);
        bad_rw(&r, ST_ERR);
    }
}

static void add_unknown_ops(void)
{
    static const uint8_t ops[] = {
        BLKIF_OP_WRITE_BARRIER, 4, BLKIF_OP_INDIRECT, 7, 42, 0x80, 0xff,
    };
    blkif_request_t r;
    unsigned int i;

    for (i = 0; i < G_N_ELEMENTS(ops); i++) {
        r = rw_req(ops[i], canary_sector(), 1 + rnd_below(11));
        bad_rw(&r, ST_BAD);
    }
}

static Pend *discard(uint64_t sector, uint64_t n, unsigned int expect)
{
    blkif_request_t r = { 0 };
    blkif_request_discard_t *d = (void *)&r;
    Pend *p;

    d->operation = BLKIF_OP_DISCARD;
    d->sector_number = sector;
    d->nr_sectors = n;
    p = put(&r, expect);
    return p;
}

static void add_discard_huge(void)
{
    uint64_t k = canary_sector(), s;
    Pend *p;

    discard(k, UINT64_MAX, ST_ERR);                    /* wraps */
    discard(k, 1ull << 63, ST_ERR);
    discard(UINT64_MAX - 1, 4, ST_ERR);                /* wraps */
    discard(k, DISK_SECTS, ST_ERR);                    /* past the end */
    discard(DISK_SECTS, 1, ST_ERR);
    /* in int64 bytes, but ~2^32 block-layer requests of 2 GiB */
    discard(k, (INT64_MAX / SECT) - k - 1, ST_ERR);
    discard(k, 1ull << 40, ST_ERR);
    /* a valid one, in the scratch area */
    if (pick_range(64, true, &s)) {
        p = discard(s, 64, ST_OK);
        if (p) {
            p->discard = true;
            p->sector = s;
            p->discard_sects = 64;
        }
    }
}

/* Reads and writes whose grants are revoked right after the kick */
static void run_revoke(void)
{
    int refs[MAX_BATCH];
    unsigned int i, n = 0, nreq = MIN(ring_free(), 5u);

    batch_begin();
    for (i = 0; i < nreq; i++) {
        uint8_t op = i & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ;
        Pend *p = valid_rw(op, 11, false);
        unsigned int j;

        if (!p) {
            continue;
        }
        p->expect = ST_OK | ST_ERR;
        p->revoked = true;
        /* replace the segments' grants with fresh ones we will revoke */
        for (j = 0; j < p->nseg && n < MAX_BATCH; j++) {
            uint8_t *page = F.rev_pages + n * XENSIM_PAGE_SIZE;
            RING_IDX idx;
            struct blkfront_ring_state rs;
            int ref = xensim_domu_grant(F.dom, 0,
                                        xensim_domu_gfn(F.dom, page), false);

            memcpy(page, p->page[j], XENSIM_PAGE_SIZE);
            p->page[j] = page;
            refs[n++] = ref;
            blkfront_ring_state(F.bf, &rs);
            idx = rs.req_prod_pvt - 1;
            /* rewrite the gref in the slot we just filled */
            {
                blkif_request_t r = { 0 };
                uint8_t *slot = F.sring + 64 + (idx % F.nr_ents) *
                                F.slot_size;
                size_t segoff = F.proto == BLKFRONT_PROTO_X86_32 ? 20 : 24;

                (void)r;
                memcpy(slot + segoff + j * 8, &ref, 4);
                memcpy(F.snap[idx % F.nr_ents], slot, F.slot_size);
            }
        }
    }
    batch_run(refs, n);
}

/* --- ring abuse ---------------------------------------------------------- */

static uint64_t be_state(void)
{
    g_autofree char *p = g_strdup_printf("%s/state", F.be);
    uint64_t s = 0;

    xensim_xs_read_u64(F.xs, XENSIM_XBT_NULL, p, &s);
    return s;
}

/*
 * Set the shared req_prod to @prod (a number of requests the ring cannot
 * hold, or an index behind the backend's) over @nvalid valid writes that
 * the ring does hold, and kick. The backend may halt the ring or
 * disconnect; it must not process more than the frontend ever put there.
 */
static void run_ring_abuse(bool backwards)
{
    struct blkfront_ring_state rs;
    blkif_sring_t *sr = (blkif_sring_t *)F.sring;
    unsigned int i, nvalid = MIN(ring_free(), 4u);
    uint64_t before;
    RING_IDX prod;

    batch_begin();
    for (i = 0; i < nvalid; i++) {
        Pend *p = valid_rw(BLKIF_OP_WRITE, 1 + rnd_below(11), false);

        if (p) {
            p->expect = ST_OK;
        }
    }
    blkfront_ring_state(F.bf, &rs);
    prod = backwards ? rs.req_prod - 1 - rnd_below(F.nr_ents) :
                       rs.req_prod_pvt + F.nr_ents + 1 +
                       rnd_below(1u << 30);
    before = F.failures + F.xfails;
    F.execs++;
    __atomic_thread_fence(__ATOMIC_SEQ_CST);
    sr->req_prod = prod;
    blkfront_raw_kick(F.bf);
    F.no_padcheck = true;
    g_usleep(200 * 1000);
    /* Whatever came back must be for requests we made, once each */
    {
        unsigned int n = 0;

        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod - rs.rsp_cons <= F.nr_ents) {
            n = collect();
        } else {
            fail("rsp_prod %u jumped past the ring", rs.rsp_prod);
        }
        g_usleep(100 * 1000);
        blkfront_ring_state(F.bf, &rs);
        if (rs.rsp_prod != rs.rsp_cons) {
            fail("backend still producing responses after req_prod %s "
                 "(%u more)", backwards ? "moved backwards" : "overflowed",
                 rs.rsp_prod - rs.rsp_cons);
        }
        if (n > F.npend) {
            fail("%u responses for %u requests: the backend processed "
                 "garbage slots", n, F.npend);
        }
    }
    for (i = 0; i < F.npend; i++) {
        if (F.pend[i].got) {
            apply(&F.pend[i]);
        } else {
            /* not processed: the model stays as it was */
            F.pend[i].check_data = false;
        }
    }
    F.no_padcheck = false;
    if (!qemu_alive()) {
        return;
    }
    if (be_state() == XenbusStateClosing || be_state() == XenbusStateClosed) {
        F.disconnects++;
    } else if (F.failures + F.xfails == before) {
        F.halts++;              /* nothing processed, nothing answered */
    }
    F.ring_dead = true;
}

/* --- negotiation garbage ------------------------------------------------- */

static void fe_w(const char *node, const char *val)
{
    g_autofree char *p = g_strdup_printf("%s/%s", F.fe, node);

    xensim_xs_write(F.xs, XENSIM_XBT_NULL, p, val, strlen(val));
}

static void fe_rm(const char *node)
{
    g_autofree char *p = g_strdup_printf("%s/%s", F.fe, node);

    xensim_xs_rm(F.xs, XENSIM_XBT_NULL, p);
}

/*
 * Negotiate by hand with garbage in one node: the backend must not reach
 * Connected (unless @may_connect), and must stay alive and usable.
 */
static void garbage_negotiation(const char *name, bool may_connect)
{
    g_autofree char *bstate = g_strdup_printf("%s/state", F.be);
    uint8_t *ring = xensim_domu_alloc_pages(F.dom, 4);
    xensim_evtchn *ev = xensim_evtchn_open(xensim_domu_hv(F.dom), DOMID);
    int port = ev ? xensim_evtchn_alloc_unbound(ev, 0) : -1;
    int refs[4], ro = -1, i;
    char buf[64];
    uint64_t s;
    bool connected;

    F.cur = name;
    g_hash_table_add(F.ran, (gpointer)name);
    F.execs++;
    for (i = 0; i < 4; i++) {
        refs[i] = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(
                      F.dom, ring + i * XENSIM_PAGE_SIZE), false);
    }
    memset(ring, 0, 4 * XENSIM_PAGE_SIZE);
    SHARED_RING_INIT((blkif_sring_t *)ring);
    if (xensim_xs_wait_mask(F.xs, bstate, 1u << XenbusStateInitWait, 10000,
                            &s) < 0) {
        fail("backend not in InitWait before the case (state %" PRIu64 ")",
             s);
        goto out;
    }
    snprintf(buf, sizeof(buf), "%d", port);
    fe_w("event-channel", buf);
    snprintf(buf, sizeof(buf), "%d", refs[0]);
    fe_w("ring-ref", buf);
    fe_w("protocol", "x86_64-abi");
    if (!strcmp(name, "nego-order-too-big")) {
        fe_w("ring-page-order", "9");
        for (i = 0; i < 4; i++) {
            snprintf(buf, sizeof(buf), "ring-ref%d", i);
            fe_w(buf, "8");
        }
    } else if (!strcmp(name, "nego-order-huge")) {
        fe_w("ring-page-order", "4294967295");
    } else if (!strcmp(name, "nego-order-missing-ref")) {
        fe_w("ring-page-order", "2");
        for (i = 0; i < 3; i++) {
            char node[16];

            snprintf(node, sizeof(node), "ring-ref%d", i);
            snprintf(buf, sizeof(buf), "%d", refs[i]);
            fe_w(node, buf);
        }
    } else if (!strcmp(name, "nego-evtchn-text")) {
        fe_w("event-channel", "not-a-port");
    } else if (!strcmp(name, "nego-evtchn-foreign")) {
        fe_w("event-channel", "250");           /* not ours, not bound */
    } else if (!strcmp(name, "nego-protocol")) {
        fe_w("protocol", "sparc64-abi");
    } else if (!strcmp(name, "nego-ref-ungranted")) {
        snprintf(buf, sizeof(buf), "%u", free_ref());
        fe_w("ring-ref", buf);
    } else if (!strcmp(name, "nego-ref-readonly")) {
        ro = xensim_domu_grant(F.dom, 0, xensim_domu_gfn(F.dom, ring), true);
        snprintf(buf, sizeof(buf), "%d", ro);
        fe_w("ring-ref", buf);
    } else if (!strcmp(name, "nego-ref-other-domain")) {
        snprintf(buf, sizeof(buf), "%d", F.other_ref);
        fe_w("ring-ref", buf);
    } else if (!strcmp(name, "nego-ref-huge")) {
        fe_w("ring-ref", "4294967295");
    }
    fe_w("state", "3");                         /* Initialised */
    connected = xensim_xs_wait_mask(F.xs, bstate,
                                    1u << XenbusStateConnected, 1500,
                                    &s) == 0;
    if (!qemu_alive()) {
        return;
    }
    if (connected && !may_connect) {
        fail("backend connected to garbage negotiation");
    }
    /*
     * Back to a clean slate the way Linux does it, one step at a time:
     * Closing (wait for the backend to follow), Closed (likewise), then
     * Initialising. Writing them back to back lets the backend see only
     * the last one and stay Closed.
     */
    fe_w("state", "5");
    xensim_xs_wait_mask(F.xs, bstate, (1u << XenbusStateClosing) |
                        (1u << XenbusStateClosed), 10000, &s);
    fe_w("state", "6");
    if (xensim_xs_wait_mask(F.xs, bstate, 1u << XenbusStateClosed,
                            10000, &s) < 0) {
        fail("backend did not close after the case (state %" PRIu64 ")", s);
    }
    fe_rm("ring-ref");
    fe_rm("ring-page-order");
    for (i = 0; i < 4; i++) {
        snprintf(buf, sizeof(buf), "ring-ref%d", i);
        fe_rm(buf);
    }
    fe_rm("event-channel");
    fe_rm("protocol");
    fe_w("state", "1");                         /* Initialising */
    xensim_xs_wait_mask(F.xs, bstate, 1u << XenbusStateInitWait, 10000, &s);
out:
    for (i = 0; i < 4; i++) {
        if (xensim_domu_end_grant(F.dom, refs[i]) < 0) {
            fail("ring grant %d still mapped after the backend closed",
                 refs[i]);
        }
    }
    if (ro >= 0) {
        xensim_domu_end_grant(F.dom, ro);
    }
    xensim_evtchn_close(ev);
    xensim_domu_free_pages(F.dom, ring, 4);
}

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

/* qmp_send() of a formatted command, 10 s to answer. */
static int qmp_exec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int qmp_exec(const char *fmt, ...)
{
    g_autofree char *cmd = NULL;
    va_list ap;

    va_start(ap, fmt);
    cmd = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return qmp_send(cmd, 10000);
}

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

static void run_fault_errors(void)
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

static void run_fault_resize(void)
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

static void iothread_change(void)
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

static void run_fault_iothread(void)
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
static void run_fault_disconnect(void)
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

/* --- driver -------------------------------------------------------------- */

static bool restart(const char *why)
{
    fprintf(stderr, "%s [%s] restarting the stack: %s (seed %" PRIu64 ")\n",
            g_hash_table_contains(F.xfail, F.cur) ? "XFAIL" : "CRASH",
            F.cur, why, F.seed);
    if (qemu_exited()) {
        F.crashes++;
    } else {
        F.hangs++;
    }
    fail("QEMU %s", why);
    F.restarts++;
    if (!qemu_exited()) {
        kill(F.qemu_pid, SIGKILL);
    }
    F.ring_dead = true;
    stack_stop();
    /* keep the dead QEMU's log: the next one starts a new file */
    {
        g_autofree char *log = g_build_filename(F.logdir, "qemu-dm-fuzz.log",
                                                NULL);
        g_autofree char *kept = g_strdup_printf("%s.%" PRIu64, log,
                                                F.restarts);

        rename(log, kept);
    }
    return stack_start() && grant_pool() && fe_connect(0,
                                                       BLKFRONT_PROTO_NATIVE)
           && init_disk();
}

/* After a case: QEMU alive, ring usable, disk as modelled. */
static bool settle(void)
{
    if (!qemu_alive()) {
        return restart(qemu_exited() ? "died" : "stopped answering QMP");
    }
    if (F.ring_dead) {
        /* Abused ring: disconnect and connect a fresh one */
        if (blkfront_disconnect(F.bf, true) < 0) {
            fail("reconnect after ring abuse: %s", strerror(errno));
            return qemu_alive() ? restart("could not reconnect")
                                : restart("died");
        }
        ring_adopt();
    }
    verify_disk();
    return qemu_alive() || restart("died");
}

typedef struct Case {
    const char *name;
    void (*add)(void);      /* batch of requests, or NULL */
    void (*run)(void);      /* whole case */
} Case;

static void run_prod_overflow(void)
{
    run_ring_abuse(false);
}

static void run_prod_backwards(void)
{
    run_ring_abuse(true);
}

static const Case cases[] = {
    { "nr-segments", add_nr_segments, NULL },
    { "bad-sects", add_bad_sects, NULL },
    { "bad-grants", add_bad_grants, NULL },
    { "past-end", add_past_end, NULL },
    { "sector-overflow", add_overflow, NULL },
    { "unknown-op", add_unknown_ops, NULL },
    { "discard-huge", add_discard_huge, NULL },
    { "revoke-inflight", NULL, run_revoke },
    { "prod-overflow", NULL, run_prod_overflow },
    { "prod-backwards", NULL, run_prod_backwards },
    { "fault-errors", NULL, run_fault_errors },
    { "fault-resize", NULL, run_fault_resize },
    { "fault-iothread", NULL, run_fault_iothread },
    { "fault-disconnect", NULL, run_fault_disconnect },
};

static const char *const nego_cases[] = {
    "nego-order-too-big", "nego-order-huge", "nego-order-missing-ref",
    "nego-evtchn-text", "nego-evtchn-foreign", "nego-protocol",
    "nego-ref-ungranted", "nego-ref-readonly", "nego-ref-other-domain",
    "nego-ref-huge",
};

static bool run_case(const Case *c)
{
    F.cur = c->name;
    g_hash_table_add(F.ran, (gpointer)c->name);
    if (c->add) {
        batch_begin();
        c->add();
        if (!batch_run(NULL, 0)) {
            return settle();
        }
    } else {
        c->run();
    }
    return settle();
}

static bool run_directed(void)
{
    static const enum blkfront_protocol protos[] = {
        BLKFRONT_PROTO_NATIVE, BLKFRONT_PROTO_X86_32, BLKFRONT_PROTO_X86_64,
    };
    unsigned int i, p;

    for (p = 0; p < G_N_ELEMENTS(protos); p++) {
        /* every request case on every ring ABI (padding differs) */
        if (p) {
            F.cur = "reconnect";
            blkfront_close(F.bf);
            F.bf = NULL;
            if (!fe_connect(p == 1 ? 1 : 0, protos[p])) {
                return false;
            }
        }
        for (i = 0; i < G_N_ELEMENTS(cases); i++) {
            if (!run_case(&cases[i])) {
                return false;
            }
        }
    }
    /* garbage negotiation: the frontend has to let go of the device */
    F.cur = "nego";
    blkfront_close(F.bf);
    F.bf = NULL;
    fe_w("state", "1");             /* Initialising: backend to InitWait */
    for (i = 0; i < G_N_ELEMENTS(nego_cases); i++) {
        garbage_negotiation(nego_cases[i],
                            !strcmp(nego_cases[i], "nego-protocol"));
        if (!qemu_alive()) {
            if (!restart("died")) {
                return false;
            }
            blkfront_close(F.bf);
            F.bf = NULL;
        }
    }
    F.cur = "nego-recover";
    if (!fe_connect(0, BLKFRONT_PROTO_NATIVE)) {
        return false;
    }
    verify_disk();
    return true;
}

/* Random-mode classes: the directed cases' names, so --xfail applies */
static bool enabled(const char *name)
{
    return !g_hash_table_contains(F.xfail, name);
}

static void random_request(void)
{
    static const struct {
        const char *name;
        void (*add)(void);
    } bad[] = {
        { "nr-segments", add_nr_segments },
        { "bad-sects", add_bad_sects },
        { "bad-grants", add_bad_grants },
        { "past-end", add_past_end },
        { "sector-overflow", add_overflow },
        { "unknown-op", add_unknown_ops },
        { "discard-huge", add_discard_huge },
    };
    uint64_t r = rnd_below(100);
    uint64_t s;

    if (r < 25) {
        valid_rw(BLKIF_OP_READ, 1 + rnd_below(11), false);
    } else if (r < 50) {
        valid_rw(BLKIF_OP_WRITE, 1 + rnd_below(11), rnd_below(8) == 0);
    } else if (r < 70) {
        valid_run(r & 1 ? BLKIF_OP_WRITE : BLKIF_OP_READ,
                  2 + rnd_below(RUN_MAX - 1), NULL);
    } else if (r < 75) {
        blkif_request_t f = { .operation = BLKIF_OP_FLUSH_DISKCACHE };
        put(&f, ST_OK);
    } else if (r < 80) {
        unsigned int n = 1 + rnd_below(256);

        if (pick_range(n, true, &s)) {
            Pend *p = discard(s, n, ST_OK);

            if (p) {
                p->discard = true;
                p->sector = s;
                p->discard_sects = n;
            }
        }
    } else {
        unsigned int i = rnd_below(G_N_ELEMENTS(bad));

        if (enabled(bad[i].name)) {
            bad[i].add();
        }
    }
}

static bool run_random(unsigned int iterations)
{
    unsigned int it;

    for (it = 0; it < iterations; it++) {
        uint64_t r = rnd_below(100);

        F.cur = "random";
        if (r < 3 && enabled("prod-overflow")) {
            F.cur = "prod-overflow";
            run_prod_overflow();
        } else if (r < 5 && enabled("prod-backwards")) {
            F.cur = "prod-backwards";
            run_prod_backwards();
        } else if (r < 10 && enabled("revoke-inflight")) {
            F.cur = "revoke-inflight";
            run_revoke();
        } else if (r < 11 && enabled("fault-disconnect")) {
            F.cur = "fault-disconnect";
            run_fault_disconnect();
        } else if (r < 12) {
            static const enum blkfront_protocol pr[] = {
                BLKFRONT_PROTO_NATIVE, BLKFRONT_PROTO_X86_32,
                BLKFRONT_PROTO_X86_64,
            };
            F.cur = "reconnect";
            blkfront_close(F.bf);
            F.bf = NULL;
            if (!fe_connect(rnd_below(5), pr[rnd_below(3)])) {
                return false;
            }
            continue;
        } else {
            /* a batch: fill up to the free ring space */
            unsigned int want = 1 + rnd_below(MIN(ring_free(), 48u));

            batch_begin();
            while (F.npend < want && ring_free() > 12 &&
                   F.npend + 12 < G_N_ELEMENTS(F.pend)) {
                random_request();
            }
            if (!F.npend) {
                continue;
            }
            if (r < 18 && enabled("fault-iothread")) {
                F.during = iothread_change;
            }
            if (!batch_run(NULL, 0)) {
                if (!settle()) {
                    return false;
                }
                continue;
            }
        }
        if (F.ring_dead || it % 25 == 24 || !qemu_alive()) {
            if (!settle()) {
                return false;
            }
        }
    }
    F.cur = "random";
    return settle();
}

int main(int argc, char **argv)
{
    g_autofree char *mode = NULL;
    g_auto(GStrv) xfail = NULL;
    gint64 seed = -1;
    gint iterations = 200;
    gboolean list = FALSE;
    GOptionEntry entries[] = {
        { "qemu", 0, 0, G_OPTION_ARG_FILENAME, &F.qemu,
          "QEMU binary ($QEMU_UPSTREAM)", "PATH" },
        { "seed", 0, 0, G_OPTION_ARG_INT64, &seed, "random seed", "N" },
        { "iterations", 0, 0, G_OPTION_ARG_INT, &iterations,
          "random-mode batches (200)", "N" },
        { "mode", 0, 0, G_OPTION_ARG_STRING, &mode,
          "cases, random or all (all)", "M" },
        { "xfail", 0, 0, G_OPTION_ARG_STRING_ARRAY, &xfail,
          "case known to fail on this QEMU (repeatable)", "CASE" },
        { "list", 0, 0, G_OPTION_ARG_NONE, &list, "list the cases", NULL },
        { NULL },
    };
    g_autoptr(GOptionContext) ctx = g_option_context_new(
        "- a hostile blkfront against a QEMU xen-block backend");
    g_autoptr(GError) err = NULL;
    GHashTableIter iter;
    gpointer k, v;
    bool ok;
    unsigned int i;
    gint64 t0 = g_get_monotonic_time();

    g_option_context_add_main_entries(ctx, entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fprintf(stderr, "%s\n", err->message);
        return 2;
    }
    if (list) {
        for (i = 0; i < G_N_ELEMENTS(cases); i++) {
            printf("%s\n", cases[i].name);
        }
        for (i = 0; i < G_N_ELEMENTS(nego_cases); i++) {
            printf("%s\n", nego_cases[i]);
        }
        return 0;
    }
    if (!F.qemu) {
        F.qemu = g_getenv("QEMU_UPSTREAM");
    }
    if (!F.qemu || !g_file_test(F.qemu, G_FILE_TEST_IS_EXECUTABLE)) {
        fprintf(stderr, "SKIP: no QEMU (--qemu)\n");
        return 77;
    }
    if (!g_file_test(xensim_ts_default_xenstored(),
                     G_FILE_TEST_IS_EXECUTABLE) ||
        !g_file_test(xensim_ts_default_shim(), G_FILE_TEST_EXISTS)) {
        fprintf(stderr, "SKIP: xenstored or the shim is missing\n");
        return 77;
    }
    if (!mode) {
        mode = g_strdup("all");
    }
    F.seed = seed >= 0 ? (uint64_t)seed : (uint64_t)g_get_real_time();
    F.rng = F.seed * 0x9e3779b97f4a7c15ull + 1;
    F.xfail = g_hash_table_new(g_str_hash, g_str_equal);
    F.xfail_hit = g_hash_table_new(g_str_hash, g_str_equal);
    F.ran = g_hash_table_new(g_str_hash, g_str_equal);
    F.case_fail = g_hash_table_new(g_str_hash, g_str_equal);
    for (i = 0; xfail && xfail[i]; i++) {
        g_hash_table_add(F.xfail, xfail[i]);
    }
    F.qmp = -1;
    F.next_id = 0x1000;
    F.cur = "setup";
    F.model = g_malloc(DISK_BYTES);
    F.known = g_malloc0(DISK_SECTS);
    F.tmpdir = g_dir_make_tmp("xenblk-fuzz-XXXXXX", NULL);
    F.logdir = g_build_filename(F.tmpdir, "logs", NULL);
    F.image = g_build_filename(F.tmpdir, "disk.raw", NULL);
    printf("xenblk-fuzz: qemu %s\nxenblk-fuzz: seed %" PRIu64
           " (rerun with --seed %" PRIu64 "), mode %s, logs in %s\n",
           F.qemu, F.seed, F.seed, mode, F.logdir);
    fflush(stdout);

    signal(SIGPIPE, SIG_IGN);
    ok = stack_start() && grant_pool() &&
         fe_connect(0, BLKFRONT_PROTO_NATIVE) && init_disk();
    if (ok && (!strcmp(mode, "cases") || !strcmp(mode, "all"))) {
        ok = run_directed();
    }
    if (ok && (!strcmp(mode, "random") || !strcmp(mode, "all"))) {
        ok = run_random(iterations);
    }
    if (!ok) {
        F.failures++;
        fprintf(stderr, "FAIL [%s] aborted (seed %" PRIu64 ")\n", F.cur,
                F.seed);
    }
    if (qemu_exited()) {
        F.crashes++;
    }
    stack_stop();

    printf("xenblk-fuzz: %" PRIu64 " executions, %" PRIu64 " requests, %"
           PRIu64 " responses, %" PRIu64 " disk verifications, %.1f s\n",
           F.execs, F.requests, F.responses, F.verifies,
           (g_get_monotonic_time() - t0) / 1e6);
    printf("xenblk-fuzz: ring abuse: %" PRIu64 " halted; %" PRIu64
           " disconnects\n", F.halts, F.disconnects);
    printf("xenblk-fuzz: faults: %" PRIu64 " requests failed by blkdebug, %"
           PRIu64 " resizes, %" PRIu64 " IOThread changes, %" PRIu64
           " requests cut by a disconnect\n", F.fault_errors, F.resizes,
           F.iothread_changes, F.cut_inflight);
    printf("xenblk-fuzz: %" PRIu64 " failures, %" PRIu64 " expected "
           "failures, %" PRIu64 " crashes, %" PRIu64 " hangs, %" PRIu64
           " restarts\n", F.failures, F.xfails, F.crashes, F.hangs,
           F.restarts);
    g_hash_table_iter_init(&iter, F.case_fail);
    while (g_hash_table_iter_next(&iter, &k, &v)) {
        printf("xenblk-fuzz:   %-24s %u failures%s\n", (char *)k,
               GPOINTER_TO_UINT(v),
               g_hash_table_contains(F.xfail, k) ? " (expected)" : "");
    }
    for (i = 0; xfail && xfail[i]; i++) {
        if (g_hash_table_contains(F.ran, xfail[i]) &&
            !g_hash_table_contains(F.xfail_hit, xfail[i])) {
            printf("xenblk-fuzz:   %-24s XPASS (listed with --xfail)\n",
                   xfail[i]);
        }
    }
    printf("xenblk-fuzz: seed %" PRIu64 "\n", F.seed);
    fflush(stdout);     /* LeakSanitizer may _exit() after main */
    if (F.failures == 0) {
        g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", F.tmpdir);

        if (system(cmd) != 0) {
            fprintf(stderr, "could not remove %s\n", F.tmpdir);
        }
    }
    return F.failures ? 1 : 0;
}
