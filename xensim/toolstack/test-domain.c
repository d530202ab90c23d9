/*
 * Toolstack against the real xenstored: a domain is introduced, and the
 * nodes and permissions of a qdisk disk read back as libxl leaves them.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Exits 77 (skipped) when xenstored or the shim is missing.
 */
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include <glib/gstdio.h>

#include "xensim/toolstack.h"

#define DOMID 5

static void assert_perms(struct xs_handle *xsh, const char *path,
                         unsigned int owner, int reader)
{
    unsigned int n = 0;
    g_autofree struct xs_permissions *p =
        xs_get_permissions(xsh, XBT_NULL, path, &n);

    if (!p) {
        g_test_message("no permissions for %s", path);
    }
    g_assert_nonnull(p);
    g_assert_cmpuint(n, ==, reader < 0 ? 1 : 2);
    g_assert_cmpuint(p[0].id, ==, owner);
    g_assert_cmpuint(p[0].perms, ==, XS_PERM_NONE);
    if (reader >= 0) {
        g_assert_cmpuint(p[1].id, ==, reader);
        g_assert_cmpuint(p[1].perms, ==, XS_PERM_READ);
    }
}

static void assert_value(struct xs_handle *xsh, const char *path,
                         const char *want)
{
    unsigned int len;
    g_autofree char *v = xs_read(xsh, XBT_NULL, path, &len);

    g_assert_cmpstr(v, ==, want);
}

static void test_domain_disk(void)
{
    g_autofree char *tmp = g_dir_make_tmp("xensim-test-domain-XXXXXX", NULL);
    g_autofree char *run_dir = NULL;
    g_autoptr(GError) err = NULL;
    xensim_ts_opts opts = { .log_dir = tmp };
    xensim_ts_disk disk = { .target = "/nonexistent.img", .vdev = "xvdb" };
    g_autofree char *dompath = NULL;
    struct xensim_domain info;
    struct xs_handle *xsh;
    xensim_ts *ts;
    int devid;
    pid_t xsd;
    int st;

    ts = xensim_ts_start(&opts, &err);
    g_assert_no_error(err);
    xsh = xensim_ts_xs(ts);
    run_dir = g_strdup(xensim_ts_run_dir(ts));
    xsd = xensim_ts_xenstored_pid(ts);

    /* xen-init-dom0's nodes */
    assert_value(xsh, "/local/domain/0/domid", "0");
    assert_value(xsh, "/local/domain/0/name", "Domain-0");

    g_assert_false(xs_is_domain_introduced(xsh, DOMID));
    g_assert_true(xensim_ts_domain_create(ts, DOMID, "dom", 16, &err));
    g_assert_no_error(err);
    /* xenstored mapped the ring and bound the port */
    g_assert_true(xs_is_domain_introduced(xsh, DOMID));
    dompath = xs_get_domain_path(xsh, DOMID);
    g_assert_cmpstr(dompath, ==, "/local/domain/5");
    g_assert_cmpint(xensim_domain_info(xensim_ts_hv(ts), DOMID, &info), ==, 0);
    {
        g_autofree char *port = g_strdup_printf("%u", info.xenstore_port);

        assert_value(xsh, "/local/domain/5/store/port", port);
    }
    assert_value(xsh, "/local/domain/5/domid", "5");
    assert_value(xsh, "/local/domain/5/name", "dom");
    assert_perms(xsh, "/local/domain/5", 0, DOMID);
    assert_perms(xsh, "/local/domain/5/device", 0, DOMID);
    assert_perms(xsh, "/local/domain/5/data", DOMID, -1);
    /* written below a roperm directory: inherited */
    assert_perms(xsh, "/local/domain/5/name", 0, DOMID);

    g_assert_true(xensim_ts_disk_add(ts, DOMID, &disk, &devid, &err));
    g_assert_no_error(err);
    g_assert_cmpint(devid, ==, 51728);
    assert_perms(xsh, "/local/domain/0/backend/qdisk/5/51728", 0, DOMID);
    assert_perms(xsh, "/local/domain/0/backend/qdisk/5/51728/params", 0,
                 DOMID);
    assert_perms(xsh, "/local/domain/5/device/vbd/51728", DOMID, 0);
    assert_perms(xsh, "/local/domain/5/device/vbd/51728/state", DOMID, 0);
    assert_perms(xsh, "/libxl/5/device/vbd/51728", 0, -1);
    assert_value(xsh, "/local/domain/0/backend/qdisk/5/51728/params",
                 "aio:/nonexistent.img");
    assert_value(xsh, "/local/domain/5/device/vbd/51728/backend",
                 "/local/domain/0/backend/qdisk/5/51728");

    /* wait_node: immediate match, and a timeout that names the value */
    g_assert_true(xensim_ts_wait_node(ts,
        "/local/domain/0/backend/qdisk/5/51728/state", "1", 1000, &err));
    g_assert_no_error(err);
    g_assert_false(xensim_ts_wait_node(ts,
        "/local/domain/0/backend/qdisk/5/51728/state", "2", 200, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, "'1'"));
    g_clear_error(&err);

    g_assert_true(xensim_ts_teardown(ts, &err));
    g_assert_no_error(err);
    /* xenstored was reaped, the run dir is gone */
    g_assert_cmpint(waitpid(xsd, &st, WNOHANG), ==, -1);
    g_assert_false(g_file_test(run_dir, G_FILE_TEST_EXISTS));

    /* logs stay if the test fails above; remove them on success */
    {
        g_autoptr(GDir) d = g_dir_open(tmp, 0, NULL);
        const char *name;

        while (d && (name = g_dir_read_name(d))) {
            g_autofree char *p = g_build_filename(tmp, name, NULL);

            g_unlink(p);
        }
    }
    g_rmdir(tmp);
}

int main(int argc, char **argv)
{
    const char *missing = NULL;

    if (!g_file_test(xensim_ts_default_xenstored(),
                     G_FILE_TEST_IS_EXECUTABLE)) {
        missing = xensim_ts_default_xenstored();
    } else if (!g_file_test(xensim_ts_default_shim(), G_FILE_TEST_EXISTS)) {
        missing = xensim_ts_default_shim();
    }
    if (missing) {
        fprintf(stderr, "SKIP: %s not found (run toolstack/get-xenstored.sh, "
                "build the shim)\n", missing);
        return 77;
    }
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/toolstack/domain/disk", test_domain_disk);
    return g_test_run();
}
