/*
 * Integration test: pristine upstream QEMU started as libxl starts a PV
 * guest's device model finds the qdisk disk the toolstack wrote, creates
 * the xen-block device and reaches XenbusStateInitWait, with the backend
 * nodes a real Xen host would show.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * QEMU: $QEMU_UPSTREAM, default build/upstream/obj/qemu-system-i386.
 * Exits 77 (skipped) when QEMU, xenstored or the shim is missing.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "xensim/toolstack.h"

#define IMAGE_SECTORS   16384           /* 8 MiB of 512-byte sectors */
#define DOMID           3

static const char *qemu_path;

static char *make_image(const char *dir)
{
    char *path = g_build_filename(dir, "disk.raw", NULL);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);

    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(ftruncate(fd, (off_t)IMAGE_SECTORS * 512), ==, 0);
    close(fd);
    return path;
}

static char *read_node(struct xs_handle *xsh, const char *dir,
                       const char *key)
{
    g_autofree char *path = g_strdup_printf("%s/%s", dir, key);
    unsigned int len;

    return xs_read(xsh, XBT_NULL, path, &len);
}

static void assert_node(struct xs_handle *xsh, const char *dir,
                        const char *key, const char *want)
{
    g_autofree char *v = read_node(xsh, dir, key);

    if (!v) {
        g_test_message("%s/%s missing", dir, key);
    }
    g_assert_nonnull(v);
    g_assert_cmpstr(v, ==, want);
}

static void test_initwait(void)
{
    g_autofree char *tmp = g_dir_make_tmp("xensim-test-qemu-XXXXXX", NULL);
    g_autofree char *image = make_image(tmp);
    g_autofree char *logs = g_build_filename(tmp, "logs", NULL);
    g_autofree char *be = NULL;
    g_autofree char *fe = NULL;
    g_autofree char *state = NULL;
    g_autofree char *dm_state = NULL;
    g_autofree char *run_dir = NULL;
    g_autofree char *sectors = g_strdup_printf("%d", IMAGE_SECTORS);
    g_autofree char *params = g_strdup_printf("aio:%s", image);
    g_autoptr(GError) err = NULL;
    xensim_ts_opts opts = { .log_dir = logs };
    xensim_ts_disk disk = { .target = image, .format = "raw" };
    struct xs_handle *xsh;
    xensim_ts *ts;
    int devid = -1;
    pid_t pid;

    ts = xensim_ts_start(&opts, &err);
    g_assert_no_error(err);
    if (!ts) {
        return;
    }
    run_dir = g_strdup(xensim_ts_run_dir(ts));
    xsh = xensim_ts_xs(ts);

    g_assert_true(xensim_ts_domain_create(ts, DOMID, "initwait", 32, &err));
    g_assert_no_error(err);
    if (g_test_failed()) {
        goto out;
    }
    g_assert_true(xensim_ts_disk_add(ts, DOMID, &disk, &devid, &err));
    g_assert_no_error(err);
    if (g_test_failed()) {
        goto out;
    }
    g_assert_cmpint(devid, ==, 51712);

    pid = xensim_ts_qemu_start(ts, DOMID, qemu_path, NULL, &err);
    g_assert_no_error(err);
    g_assert_cmpint(pid, >, 0);
    if (g_test_failed()) {
        goto out;
    }

    be = xensim_ts_backend_path(DOMID, devid);
    fe = xensim_ts_frontend_path(DOMID, devid);
    state = g_strdup_printf("%s/state", be);
    if (!xensim_ts_wait_node(ts, state, "2", 30000, &err)) {
        g_test_message("%s (logs in %s)", err->message, logs);
    }
    g_assert_no_error(err);
    if (g_test_failed()) {
        goto out;
    }
    /* xen-block's realize runs after xen-bus announced InitWait. */
    g_assert_true(xensim_ts_wait_backend_ready(ts, DOMID, devid, 10000,
                                               &err));
    g_assert_no_error(err);

    /* QEMU tells libxl it is up the same way. */
    dm_state = g_strdup_printf("/local/domain/0/device-model/%d/state",
                               DOMID);
    g_assert_true(xensim_ts_wait_node(ts, dm_state, "running", 10000, &err));
    g_assert_no_error(err);

    /* What xen-block's realize wrote for an 8 MiB read-write raw file. */
    assert_node(xsh, be, "sectors", sectors);
    assert_node(xsh, be, "sector-size", "512");
    assert_node(xsh, be, "info", "0");
    assert_node(xsh, be, "mode", "w");
    assert_node(xsh, be, "feature-flush-cache", "1");
    assert_node(xsh, be, "max-ring-page-order", "4");
    assert_node(xsh, be, "feature-discard", "1");
    assert_node(xsh, be, "discard-granularity", "512");
    assert_node(xsh, be, "discard-alignment", "0");
    assert_node(xsh, be, "hotplug-status", "connected");
    assert_node(xsh, be, "online", "1");
    assert_node(xsh, be, "frontend", fe);
    /* ... and the toolstack's nodes are untouched. */
    assert_node(xsh, be, "params", params);
    assert_node(xsh, fe, "state", "1");
    assert_node(xsh, fe, "virtual-device", "51712");
    assert_node(xsh, fe, "backend", be);

out:
    g_clear_error(&err);
    g_assert_true(xensim_ts_teardown(ts, &err));
    g_assert_no_error(err);
    g_assert_false(g_file_test(run_dir, G_FILE_TEST_EXISTS));

    g_unlink(image);
    if (g_test_failed()) {
        g_test_message("logs kept in %s", logs);
        return;
    }
    {
        g_autoptr(GDir) d = g_dir_open(logs, 0, NULL);
        const char *name;

        while (d && (name = g_dir_read_name(d))) {
            g_autofree char *p = g_build_filename(logs, name, NULL);

            g_unlink(p);
        }
    }
    g_rmdir(logs);
    g_rmdir(tmp);
}

int main(int argc, char **argv)
{
    const char *missing = NULL;

    qemu_path = g_getenv("QEMU_UPSTREAM");
    if (!qemu_path) {
        qemu_path = XENSIM_SOURCE_ROOT "/build/upstream/obj/qemu-system-i386";
    }
    if (!g_file_test(qemu_path, G_FILE_TEST_IS_EXECUTABLE)) {
        missing = qemu_path;
    } else if (!g_file_test(xensim_ts_default_xenstored(),
                            G_FILE_TEST_IS_EXECUTABLE)) {
        missing = xensim_ts_default_xenstored();
    } else if (!g_file_test(xensim_ts_default_shim(), G_FILE_TEST_EXISTS)) {
        missing = xensim_ts_default_shim();
    }
    if (missing) {
        fprintf(stderr, "SKIP: %s not found (set QEMU_UPSTREAM, run "
                "toolstack/get-xenstored.sh, build the shim)\n", missing);
        return 77;
    }

    g_test_init(&argc, &argv, NULL);
    /* Failed checks are reported and the run is still torn down. */
    g_test_set_nonfatal_assertions();
    g_test_add_func("/toolstack/qemu/initwait", test_initwait);
    return g_test_run();
}
