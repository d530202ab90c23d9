/*
 * Unit tests of the xenstore layout the toolstack writes: libxl's paths,
 * values and permissions for a PV domain and a qdisk disk, and xenopsd's
 * for a vbd3 disk.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <string.h>

#include "xensim/toolstack.h"

static xensim_ts_node *find(GPtrArray *a, const char *path, guint *index)
{
    guint i;

    for (i = 0; i < a->len; i++) {
        xensim_ts_node *n = g_ptr_array_index(a, i);

        if (!strcmp(n->path, path)) {
            if (index) {
                *index = i;
            }
            return n;
        }
    }
    g_test_message("missing node %s", path);
    g_assert_not_reached();
}

static void assert_value(GPtrArray *a, const char *path, const char *value)
{
    xensim_ts_node *n = find(a, path, NULL);

    g_assert_nonnull(n->value);
    g_assert_cmpstr(n->value, ==, value);
}

static void assert_perms(xensim_ts_node *n, unsigned int owner, int reader)
{
    g_assert_cmpuint(n->nr_perms, ==, reader < 0 ? 1 : 2);
    g_assert_cmpuint(n->perms[0].id, ==, owner);
    g_assert_cmpuint(n->perms[0].perms, ==, XS_PERM_NONE);
    if (reader >= 0) {
        g_assert_cmpuint(n->perms[1].id, ==, reader);
        g_assert_cmpuint(n->perms[1].perms, ==, XS_PERM_READ);
    }
}

static void test_vdev(void)
{
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvda"), ==, 51712);
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvdb"), ==, 51728);
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvda1"), ==, 51713);
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvdp15"), ==, (202 << 8) | 255);
    /* beyond 16 disks or 15 partitions: the extended form */
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvdq"), ==,
                    (1 << 28) | (16 << 8));
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvdaa"), ==,
                    (1 << 28) | (26 << 8));
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvda16"), ==, (1 << 28) | 16);
    g_assert_cmpint(xensim_ts_vdev_to_devid("d0p0"), ==, 51712);
    g_assert_cmpint(xensim_ts_vdev_to_devid("d1p2"), ==, 51730);
    g_assert_cmpint(xensim_ts_vdev_to_devid("51712"), ==, 51712);
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvda01"), ==, -1);
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvd"), ==, -1);
    g_assert_cmpint(xensim_ts_vdev_to_devid("xvda256"), ==, -1);
    g_assert_cmpint(xensim_ts_vdev_to_devid("hda"), ==, -1);
    g_assert_cmpint(xensim_ts_vdev_to_devid(""), ==, -1);
}

static void test_format(void)
{
    g_assert_cmpstr(xensim_ts_format_prefix(NULL), ==, "aio");
    g_assert_cmpstr(xensim_ts_format_prefix("raw"), ==, "aio");
    g_assert_cmpstr(xensim_ts_format_prefix("qcow2"), ==, "qcow2");
    g_assert_cmpstr(xensim_ts_format_prefix("vhd"), ==, "vhd");
    g_assert_null(xensim_ts_format_prefix("vmdk"));
}

static void test_disk(void)
{
    static const char *const be_keys[] = {
        "frontend", "params", "frontend-id", "online", "removable",
        "bootable", "state", "dev", "type", "mode", "device-type",
        "discard-enable",
    };
    static const char *const fe_keys[] = {
        "backend", "backend-id", "state", "virtual-device", "device-type",
        "protocol",
    };
    const char *be = "/local/domain/0/backend/qdisk/3/51712";
    const char *fe = "/local/domain/3/device/vbd/51712";
    const char *lx = "/libxl/3/device/vbd/51712";
    xensim_ts_disk disk = { .target = "/img/a.qcow2", .format = "qcow2" };
    g_autoptr(GPtrArray) a = NULL;
    g_autoptr(GError) err = NULL;
    xensim_ts_node *n;
    guint i, ibe, ife, ientry;
    int devid = -1, nbe = 0, nfe = 0;

    a = xensim_ts_disk_nodes(0, 3, &disk, &devid, &err);
    g_assert_no_error(err);
    g_assert_nonnull(a);
    g_assert_cmpint(devid, ==, 51712);

    /* backend: dom0 owns, the guest reads; libxl removes it first */
    n = find(a, be, &ibe);
    g_assert_null(n->value);
    g_assert_true(n->fresh);
    assert_perms(n, 0, 3);
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/frontend", fe);
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/params",
                 "qcow2:/img/a.qcow2");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/frontend-id", "3");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/online", "1");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/state", "1");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/dev", "xvda");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/type", "qdisk");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/mode", "w");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/device-type",
                 "disk");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/removable", "0");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/bootable", "1");
    assert_value(a, "/local/domain/0/backend/qdisk/3/51712/discard-enable",
                 "1");

    /* frontend: the guest owns, the backend domain reads */
    n = find(a, fe, &ife);
    g_assert_null(n->value);
    g_assert_true(n->fresh);
    assert_perms(n, 3, 0);
    assert_value(a, "/local/domain/3/device/vbd/51712/backend", be);
    assert_value(a, "/local/domain/3/device/vbd/51712/backend-id", "0");
    assert_value(a, "/local/domain/3/device/vbd/51712/state", "1");
    assert_value(a, "/local/domain/3/device/vbd/51712/virtual-device",
                 "51712");
    assert_value(a, "/local/domain/3/device/vbd/51712/device-type", "disk");
    assert_value(a, "/local/domain/3/device/vbd/51712/protocol",
                 "x86_64-abi");
    n = find(a, "/local/domain/3/device/vbd/51712/state", &ientry);
    assert_perms(n, 3, 0);
    g_assert_cmpuint(ientry, >, ife);

    /* libxl's private copy */
    assert_value(a, "/libxl/3/device/vbd/51712/frontend", fe);
    assert_value(a, "/libxl/3/device/vbd/51712/backend", be);
    assert_value(a, "/libxl/3/device/vbd/51712/params",
                 "qcow2:/img/a.qcow2");
    g_assert_true(find(a, lx, NULL)->fresh);

    /* nothing else in either directory; entries follow their directory */
    for (i = 0; i < a->len; i++) {
        n = g_ptr_array_index(a, i);
        if (g_str_has_prefix(n->path, be) && n->path[strlen(be)] == '/') {
            g_assert_true(g_strv_contains(be_keys, n->path + strlen(be) + 1));
            g_assert_cmpuint(i, >, ibe);
            /* inherited from the directory: no explicit perms */
            g_assert_cmpuint(n->nr_perms, ==, 0);
            nbe++;
        }
        if (g_str_has_prefix(n->path, fe) && n->path[strlen(fe)] == '/') {
            g_assert_true(g_strv_contains(fe_keys, n->path + strlen(fe) + 1));
            g_assert_cmpuint(i, >, ife);
            nfe++;
        }
    }
    g_assert_cmpint(nbe, ==, G_N_ELEMENTS(be_keys));
    g_assert_cmpint(nfe, ==, G_N_ELEMENTS(fe_keys));
}

/* xenopsd's vbd3 nodes (Device.Vbd.add_async), tapdisk's NBD socket. */
static void test_vbd3(void)
{
    static const char *const be_keys[] = {
        "frontend", "sm-data/backend-kind", "polling-duration",
        "polling-idle-threshold", "frontend-id", "online", "removable",
        "state", "dev", "type", "mode", "params",
    };
    static const char *const fe_keys[] = {
        "backend", "backend-id", "state", "virtual-device", "device-type",
    };
    const char *be = "/local/domain/0/backend/vbd3/2/51728";
    const char *fe = "/local/domain/2/device/vbd/51728";
    xensim_ts_disk disk = {
        .backend = XENSIM_TS_BACKEND_VBD3, .target = "/img/c.raw",
        .vdev = "xvdb", .polling_duration_us = 8000,
        .polling_idle_threshold = 50,
    };
    xensim_ts_disk bad = disk;
    g_autoptr(GPtrArray) a = NULL;
    g_autoptr(GError) err = NULL;
    g_autofree char *bpath = xensim_ts_vbd3_backend_path(2, 51728);
    xensim_ts_node *n;
    guint i, ibe, ife;
    int devid = -1, nbe = 0, nfe = 0;

    g_assert_cmpstr(bpath, ==, be);
    a = xensim_ts_vbd3_nodes(0, 2, &disk, "/run/blktap-control/nbd7.0",
                             &devid, &err);
    g_assert_no_error(err);
    g_assert_cmpint(devid, ==, 51728);

    n = find(a, be, &ibe);
    g_assert_true(n->fresh);
    assert_perms(n, 0, 2);
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/params",
                 "nbd:unix:/run/blktap-control/nbd7.0");
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/polling-duration",
                 "8000");
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/"
                 "polling-idle-threshold", "50");
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/type", "phy");
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/state", "1");
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/mode", "w");
    assert_value(a, "/local/domain/0/backend/vbd3/2/51728/frontend", fe);
    n = find(a, fe, &ife);
    g_assert_true(n->fresh);
    assert_perms(n, 2, 0);
    assert_value(a, "/local/domain/2/device/vbd/51728/backend", be);
    assert_value(a, "/local/domain/2/device/vbd/51728/virtual-device",
                 "51728");

    /* exactly xenopsd's keys; the frontend's readable by the backend */
    for (i = 0; i < a->len; i++) {
        n = g_ptr_array_index(a, i);
        if (g_str_has_prefix(n->path, be) && n->path[strlen(be)] == '/') {
            g_assert_true(g_strv_contains(be_keys, n->path + strlen(be) + 1));
            g_assert_cmpuint(i, >, ibe);
            nbe++;
        }
        if (g_str_has_prefix(n->path, fe) && n->path[strlen(fe)] == '/') {
            g_assert_true(g_strv_contains(fe_keys, n->path + strlen(fe) + 1));
            assert_perms(n, 2, 0);
            nfe++;
        }
    }
    g_assert_cmpint(nbe, ==, G_N_ELEMENTS(be_keys));
    g_assert_cmpint(nfe, ==, G_N_ELEMENTS(fe_keys));

    /* tapdisk's aio: serves raw images; no cdrom here */
    bad.format = "qcow2";
    g_assert_null(xensim_ts_vbd3_nodes(0, 2, &bad, "x", NULL, &err));
    g_clear_error(&err);
    bad = disk;
    bad.cdrom = true;
    g_assert_null(xensim_ts_vbd3_nodes(0, 2, &bad, "x", NULL, &err));
    g_clear_error(&err);
}

static void test_disk_options(void)
{
    xensim_ts_disk disk = {
        .target = "/img/b", .vdev = "xvdb", .readonly = true,
        .no_discard = true, .direct_io_safe = true,
    };
    g_autoptr(GPtrArray) a = NULL;
    g_autoptr(GError) err = NULL;
    int devid;

    a = xensim_ts_disk_nodes(0, 1, &disk, &devid, &err);
    g_assert_no_error(err);
    g_assert_cmpint(devid, ==, 51728);
    assert_value(a, "/local/domain/0/backend/qdisk/1/51728/params",
                 "aio:/img/b");
    assert_value(a, "/local/domain/0/backend/qdisk/1/51728/mode", "r");
    assert_value(a, "/local/domain/0/backend/qdisk/1/51728/dev", "xvdb");
    assert_value(a, "/local/domain/0/backend/qdisk/1/51728/discard-enable",
                 "0");
    assert_value(a, "/local/domain/0/backend/qdisk/1/51728/direct-io-safe",
                 "1");
}

/* libxl's defaults: discard follows access, a cdrom is removable and ro */
static void test_disk_defaults(void)
{
    static const struct {
        xensim_ts_disk disk;
        const char *params, *mode, *devtype, *removable, *discard;
    } t[] = {
        { { .target = "/img/a" }, "aio:/img/a", "w", "disk", "0", "1" },
        { { .target = "/img/a", .readonly = true },
          "aio:/img/a", "r", "disk", "0", "0" },
        { { .target = "/img/a", .readonly = true, .discard = true },
          "aio:/img/a", "r", "disk", "0", "1" },
        { { .target = "/img/a.iso", .cdrom = true },
          "aio:/img/a.iso", "r", "cdrom", "1", "0" },
        { { .cdrom = true }, "aio:", "r", "cdrom", "1", "0" },
    };
    const char *be = "/local/domain/0/backend/qdisk/1/51712";
    const char *fe = "/local/domain/1/device/vbd/51712";
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(t); i++) {
        g_autoptr(GPtrArray) a = NULL;
        g_autoptr(GError) err = NULL;
        g_autofree char *p = g_strdup_printf("%s/params", be);
        g_autofree char *m = g_strdup_printf("%s/mode", be);
        g_autofree char *d = g_strdup_printf("%s/device-type", be);
        g_autofree char *fd = g_strdup_printf("%s/device-type", fe);
        g_autofree char *r = g_strdup_printf("%s/removable", be);
        g_autofree char *de = g_strdup_printf("%s/discard-enable", be);

        a = xensim_ts_disk_nodes(0, 1, &t[i].disk, NULL, &err);
        g_assert_no_error(err);
        assert_value(a, p, t[i].params);
        assert_value(a, m, t[i].mode);
        assert_value(a, d, t[i].devtype);
        assert_value(a, fd, t[i].devtype);
        assert_value(a, r, t[i].removable);
        assert_value(a, de, t[i].discard);
    }
}

static void test_disk_invalid(void)
{
    xensim_ts_disk bad_vdev = { .target = "/img/c", .vdev = "hda" };
    xensim_ts_disk bad_fmt = { .target = "/img/c", .format = "vmdk" };
    GError *err = NULL;

    g_assert_null(xensim_ts_disk_nodes(0, 1, &bad_vdev, NULL, &err));
    g_assert_nonnull(err);
    g_assert_nonnull(strstr(err->message, "hda"));
    g_clear_error(&err);
    g_assert_null(xensim_ts_disk_nodes(0, 1, &bad_fmt, NULL, &err));
    g_assert_nonnull(strstr(err->message, "vmdk"));
    g_clear_error(&err);
}

static void test_domain(void)
{
    g_autoptr(GPtrArray) a = xensim_ts_domain_nodes(2, "guest", "u-u-i-d",
                                                    65536, 0, 7);
    xensim_ts_node *n;
    guint idom, idata;

    /* dom0 owns the domain's directory, the domain reads it */
    n = find(a, "/local/domain/2", &idom);
    g_assert_true(n->fresh);
    assert_perms(n, 0, 2);
    g_assert_cmpuint(idom, ==, 0);
    assert_perms(find(a, "/vm/u-u-i-d", NULL), 0, 2);
    assert_perms(find(a, "/libxl/2", NULL), 0, -1);
    /* read-only to the guest */
    assert_perms(find(a, "/local/domain/2/device", NULL), 0, 2);
    assert_perms(find(a, "/local/domain/2/control", NULL), 0, 2);
    /* the guest's own */
    n = find(a, "/local/domain/2/data", &idata);
    assert_perms(n, 2, -1);
    assert_perms(find(a, "/local/domain/2/control/shutdown", NULL), 2, -1);
    assert_perms(find(a, "/local/domain/2/device/suspend/event-channel",
                      NULL), 2, -1);

    assert_value(a, "/local/domain/2/name", "guest");
    assert_value(a, "/local/domain/2/vm", "/vm/u-u-i-d");
    assert_value(a, "/local/domain/2/domid", "2");
    assert_value(a, "/local/domain/2/store/port", "7");
    assert_value(a, "/local/domain/2/store/ring-ref", "0");
    assert_value(a, "/local/domain/2/memory/static-max", "65536");
    assert_value(a, "/local/domain/2/memory/target", "65536");
    assert_value(a, "/local/domain/2/cpu/0/availability", "online");
    assert_value(a, "/local/domain/2/control/"
                 "platform-feature-xs_reset_watches", "1");
    assert_value(a, "/vm/u-u-i-d/uuid", "u-u-i-d");
    assert_value(a, "/libxl/2/type", "pv");
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
    g_test_add_func("/toolstack/nodes/vdev", test_vdev);
    g_test_add_func("/toolstack/nodes/format", test_format);
    g_test_add_func("/toolstack/nodes/disk", test_disk);
    g_test_add_func("/toolstack/nodes/disk-options", test_disk_options);
    g_test_add_func("/toolstack/nodes/vbd3", test_vbd3);
    g_test_add_func("/toolstack/nodes/disk-defaults", test_disk_defaults);
    g_test_add_func("/toolstack/nodes/disk-invalid", test_disk_invalid);
    g_test_add_func("/toolstack/nodes/domain", test_domain);
    return g_test_run();
}
