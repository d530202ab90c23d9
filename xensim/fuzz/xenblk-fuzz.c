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
 *   xenblk-fuzz --qemu PATH [--qemu-arg=ARG]... [--seed N] [--iterations N]
 *               [--mode M] [--xfail CASE]... [--list]
 *
 * --xfail names a case (or random-mode class) known to fail on this QEMU:
 * its failures are reported as expected and random mode does not
 * generate it. Exit status: 0 if no unexpected failure, 1 otherwise, 77
 * if the stack cannot run here (no xenstored or shim).
 */
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "fuzz-int.h"

Fuzz F;

static uint64_t rnd(void)
{
    /* xorshift64* */
    F.rng ^= F.rng >> 12;
    F.rng ^= F.rng << 25;
    F.rng ^= F.rng >> 27;
    return F.rng * 0x2545f4914f6cdd1dull;
}

uint64_t rnd_below(uint64_t n)
{
    return n ? rnd() % n : 0;
}

void fill_rand(uint8_t *p, size_t len)
{
    size_t i;

    for (i = 0; i < len; i += 8) {
        uint64_t v = rnd();

        memcpy(p + i, &v, MIN(8, len - i));
    }
}

void fail(const char *fmt, ...)
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
        (F.qemu_pid = xensim_ts_qemu_start(F.ts, DOMID, F.qemu,
                                           (const char *const *)F.qemu_args,
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
    xensim_qmp_close(F.qmp);
    F.qmp = NULL;
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
    return F.ro_ref >= 0 && F.ro_wref >= 0 && F.other_ref >= 0 &&
           grant_indirect();
}

/* --- driver -------------------------------------------------------------- */

bool restart(const char *why)
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
bool settle(void)
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
        { "qemu-arg", 0, 0, G_OPTION_ARG_STRING_ARRAY, &F.qemu_args,
          "one more QEMU argument (repeatable)", "ARG" },
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
        list_cases();
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
