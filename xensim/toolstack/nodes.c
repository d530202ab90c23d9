/*
 * xensim toolstack: the xenstore nodes libxl writes for a PV domain and
 * its qdisk disks.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The layout follows libxl (tools/libs/light/ in xen.git):
 * libxl__domain_make() and libxl__build_post() for the domain,
 * device_disk_add() and libxl__device_generic_add() for a disk, and
 * docs/misc/xenstore-paths.pandoc for what each node means. A vbd3 disk
 * follows XenServer's xenopsd instead (xensim_ts_vbd3_nodes()). QEMU's
 * xen-bus (hw/xen/xen-bus.c) enumerates backend/qdisk/<domid>/<devid>
 * when online=1 and state=1, and xen-block (hw/block/xen-block.c) reads
 * params, mode, dev, device-type, discard-enable and direct-io-safe.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <xen/io/protocols.h>

#include "xensim/toolstack.h"

static void node_free(gpointer p)
{
    xensim_ts_node *n = p;

    g_free(n->path);
    g_free(n->value);
    g_free(n);
}

/* Append @path (= @value, NULL for a directory) with up to two perms. */
static xensim_ts_node *node_add(GPtrArray *a, char *path, char *value)
{
    xensim_ts_node *n = g_new0(xensim_ts_node, 1);

    n->path = path;
    n->value = value;
    g_ptr_array_add(a, n);
    return n;
}

static void node_perms(xensim_ts_node *n, unsigned int owner,
                       int other, unsigned int other_perm)
{
    n->perms[0].id = owner;
    n->perms[0].perms = XS_PERM_NONE;
    n->nr_perms = 1;
    if (other >= 0) {
        n->perms[1].id = other;
        n->perms[1].perms = other_perm;
        n->nr_perms = 2;
    }
}

/*
 * libxl__xs_mknod(): an empty node with explicit perms. libxl's
 * "roperm" is dom0-owned and readable by the guest, "rwperm" is
 * guest-owned (and so readable and writable by it, unreadable by other
 * guests), "noperm" is dom0 only.
 */
static void mknod_ro(GPtrArray *a, uint32_t domid, char *path)
{
    node_perms(node_add(a, path, NULL), 0, domid, XS_PERM_READ);
}

static void mknod_rw(GPtrArray *a, uint32_t domid, char *path)
{
    node_perms(node_add(a, path, NULL), domid, -1, XS_PERM_NONE);
}

static void mknod_none(GPtrArray *a, char *path)
{
    node_perms(node_add(a, path, NULL), 0, -1, XS_PERM_NONE);
}

GPtrArray *xensim_ts_domain_nodes(uint32_t domid, const char *name,
                                  const char *uuid, uint64_t mem_kb,
                                  uint64_t store_gfn, uint32_t store_port)
{
    static const char *const ro_dirs[] = { "cpu", "memory", "device",
                                           "control" };
    static const char *const rw_dirs[] = {
        "control/shutdown", "control/feature-poweroff",
        "control/feature-reboot", "control/feature-suspend",
        "control/sysrq", "device/suspend/event-channel", "data", "drivers",
        "feature", "attr", "error",
    };
    GPtrArray *a = g_ptr_array_new_with_free_func(node_free);
    g_autofree char *dom = g_strdup_printf("/local/domain/%u", domid);
    g_autofree char *vm = g_strdup_printf("/vm/%s", uuid);
    g_autofree char *lx = g_strdup_printf("/libxl/%u", domid);
    xensim_ts_node *n;
    size_t i;

    /* libxl__domain_make(): one transaction. */
    n = node_add(a, g_strdup(dom), NULL);
    node_perms(n, 0, domid, XS_PERM_READ);
    n->fresh = true;
    n = node_add(a, g_strdup(vm), NULL);
    node_perms(n, 0, domid, XS_PERM_READ);
    n->fresh = true;
    n = node_add(a, g_strdup(lx), NULL);
    node_perms(n, 0, -1, XS_PERM_NONE);
    n->fresh = true;
    mknod_none(a, g_strdup_printf("%s/device", lx));

    node_add(a, g_strdup_printf("%s/vm", dom), g_strdup(vm));
    /* libxl__domain_rename() */
    node_add(a, g_strdup_printf("%s/name", dom), g_strdup(name));

    for (i = 0; i < G_N_ELEMENTS(ro_dirs); i++) {
        mknod_ro(a, domid, g_strdup_printf("%s/%s", dom, ro_dirs[i]));
    }
    for (i = 0; i < G_N_ELEMENTS(rw_dirs); i++) {
        mknod_rw(a, domid, g_strdup_printf("%s/%s", dom, rw_dirs[i]));
    }

    node_add(a, g_strdup_printf("%s/uuid", vm), g_strdup(uuid));
    node_add(a, g_strdup_printf("%s/name", vm), g_strdup(name));
    node_add(a,
             g_strdup_printf("%s/control/platform-feature-multiprocessor-"
                             "suspend", dom), g_strdup("1"));
    node_add(a,
             g_strdup_printf("%s/control/platform-feature-xs_reset_watches",
                             dom), g_strdup("1"));
    node_add(a, g_strdup_printf("%s/type", lx), g_strdup("pv"));

    /* libxl__build_post(): PV, one vcpu, no video memory, no fudge. */
    node_add(a, g_strdup_printf("%s/memory/static-max", dom),
             g_strdup_printf("%" PRIu64, mem_kb));
    node_add(a, g_strdup_printf("%s/memory/target", dom),
             g_strdup_printf("%" PRIu64, mem_kb));
    node_add(a, g_strdup_printf("%s/memory/videoram", dom), g_strdup("0"));
    node_add(a, g_strdup_printf("%s/domid", dom),
             g_strdup_printf("%u", domid));
    node_add(a, g_strdup_printf("%s/store/port", dom),
             g_strdup_printf("%u", store_port));
    node_add(a, g_strdup_printf("%s/store/ring-ref", dom),
             g_strdup_printf("%" PRIu64, store_gfn));
    node_add(a, g_strdup_printf("%s/cpu/0/availability", dom),
             g_strdup("online"));
    return a;
}

/* Parse "<letters>" after xvd as libxl's device_virtdisk_matches(). */
static bool vdev_letters(const char *p, int *disk, const char **end)
{
    long idx = -1;

    if (*p < 'a' || *p > 'z') {
        return false;
    }
    while (*p >= 'a' && *p <= 'z') {
        idx = (idx + 1) * 26 + (*p - 'a');
        if (idx > (1 << 20) - 1) {
            return false;
        }
        p++;
    }
    *disk = idx;
    *end = p;
    return true;
}

int xensim_ts_vdev_to_devid(const char *vdev)
{
    int disk, part;
    const char *p;
    char *ep;
    unsigned long ul;

    if (!vdev || !*vdev) {
        return -1;
    }
    if (vdev[0] == 'd') {
        /* dXpY */
        disk = strtol(vdev + 1, &ep, 10);
        if (ep == vdev + 1 || *ep != 'p' || disk < 0 || disk >= (1 << 20)) {
            return -1;
        }
        p = ep + 1;
        part = strtol(p, &ep, 10);
        if (ep == p || *ep || part < 0 || part >= 256) {
            return -1;
        }
    } else if (g_str_has_prefix(vdev, "xvd")) {
        if (!vdev_letters(vdev + 3, &disk, &p)) {
            return -1;
        }
        if (!*p) {
            part = 0;
        } else {
            /* no leading zeroes in the partition number */
            if (*p == '0') {
                return -1;
            }
            part = strtol(p, &ep, 10);
            if (*ep || part > 255 || part < 0) {
                return -1;
            }
        }
    } else {
        errno = 0;
        ul = strtoul(vdev, &ep, 0);
        if (errno || *ep || ul > INT32_MAX || vdev[0] == '-') {
            return -1;
        }
        return ul;
    }
    if (disk <= 15 && part <= 15) {
        return (202 << 8) | (disk << 4) | part;
    }
    return (1 << 28) | (disk << 8) | part;
}

const char *xensim_ts_format_prefix(const char *format)
{
    if (!format || !strcmp(format, "raw")) {
        return "aio";
    }
    if (!strcmp(format, "qcow2") || !strcmp(format, "qcow") ||
        !strcmp(format, "vhd") || !strcmp(format, "qed")) {
        return format;
    }
    return NULL;
}

char *xensim_ts_backend_path(uint32_t domid, int devid)
{
    return g_strdup_printf("/local/domain/0/backend/qdisk/%u/%d",
                           domid, devid);
}

char *xensim_ts_vbd3_backend_path(uint32_t domid, int devid)
{
    return g_strdup_printf("/local/domain/0/backend/vbd3/%u/%d",
                           domid, devid);
}

char *xensim_ts_frontend_path(uint32_t domid, int devid)
{
    return g_strdup_printf("/local/domain/%u/device/vbd/%d", domid, devid);
}

GPtrArray *xensim_ts_disk_nodes(uint32_t backend_domid, uint32_t domid,
                                const xensim_ts_disk *disk, int *devid,
                                GError **errp)
{
    const char *vdev = disk->vdev ? disk->vdev : XENSIM_TS_DEFAULT_VDEV;
    const char *prefix = xensim_ts_format_prefix(disk->format);
    g_autofree char *be = NULL;
    g_autofree char *fe = NULL;
    g_autofree char *lx = NULL;
    GPtrArray *a;
    xensim_ts_node *n;
    bool readonly = disk->readonly || disk->cdrom;
    bool discard = disk->discard || (!readonly && !disk->no_discard);
    const char *devtype = disk->cdrom ? "cdrom" : "disk";
    int id;
    struct {
        const char *key;
        char *value;
    } back[16], front[8];
    size_t nb = 0, nf = 0, i;

    id = xensim_ts_vdev_to_devid(vdev);
    if (id < 0) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "invalid virtual disk identifier '%s'", vdev);
        return NULL;
    }
    if (!prefix) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "unsupported disk format '%s'", disk->format);
        return NULL;
    }
    if (!disk->target && !disk->params && !disk->no_params && !disk->cdrom) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "disk has no target");
        return NULL;
    }
    be = g_strdup_printf("/local/domain/%u/backend/qdisk/%u/%d",
                         backend_domid, domid, id);
    fe = xensim_ts_frontend_path(domid, id);
    lx = g_strdup_printf("/libxl/%u/device/vbd/%d", domid, id);

    /* device_disk_add(), LIBXL_DISK_BACKEND_QDISK, in libxl's order. */
#define BACK(k, v) (back[nb].key = (k), back[nb++].value = (v))
#define FRONT(k, v) (front[nf].key = (k), front[nf++].value = (v))
    if (disk->params) {
        BACK("params", g_strdup(disk->params));
    } else if (!disk->no_params) {
        BACK("params", g_strdup_printf("%s:%s", prefix,
                                       disk->target ? disk->target : ""));
    }
    BACK("frontend-id", g_strdup_printf("%u", domid));
    BACK("online", g_strdup("1"));
    BACK("removable", g_strdup(disk->cdrom ? "1" : "0"));
    BACK("bootable", g_strdup("1"));
    BACK("state", g_strdup_printf("%d", XENSIM_XENBUS_INITIALISING));
    BACK("dev", g_strdup(vdev));
    BACK("type", g_strdup("qdisk"));
    BACK("mode", g_strdup(readonly ? "r" : "w"));
    BACK("device-type", g_strdup(devtype));
    if (disk->direct_io_safe) {
        BACK("direct-io-safe", g_strdup("1"));
    }
    BACK("discard-enable", g_strdup(discard ? "1" : "0"));

    FRONT("backend-id", g_strdup_printf("%u", backend_domid));
    FRONT("state", g_strdup_printf("%d", XENSIM_XENBUS_INITIALISING));
    FRONT("virtual-device", g_strdup_printf("%d", id));
    FRONT("device-type", g_strdup(devtype));
    /* PV guest: xc_domain_get_native_protocol() of a 64-bit guest. */
    FRONT("protocol", g_strdup(XEN_IO_PROTO_ABI_X86_64));
#undef BACK
#undef FRONT

    a = g_ptr_array_new_with_free_func(node_free);

    /* libxl__device_generic_add() */
    n = node_add(a, g_strdup(lx), NULL);
    n->fresh = true;
    node_add(a, g_strdup_printf("%s/frontend", lx), g_strdup(fe));
    node_add(a, g_strdup_printf("%s/backend", lx), g_strdup(be));

    /* Frontend: the guest owns it, the backend domain may read. */
    n = node_add(a, g_strdup(fe), NULL);
    node_perms(n, domid, backend_domid, XS_PERM_READ);
    n->fresh = true;
    node_add(a, g_strdup_printf("%s/backend", fe), g_strdup(be));
    for (i = 0; i < nf; i++) {
        n = node_add(a, g_strdup_printf("%s/%s", fe, front[i].key),
                     front[i].value);
        node_perms(n, domid, backend_domid, XS_PERM_READ);
    }

    /* Backend: the backend domain owns it, the guest may read. */
    n = node_add(a, g_strdup(be), NULL);
    node_perms(n, backend_domid, domid, XS_PERM_READ);
    n->fresh = true;
    node_add(a, g_strdup_printf("%s/frontend", be), g_strdup(fe));
    for (i = 0; i < nb; i++) {
        node_add(a, g_strdup_printf("%s/%s", be, back[i].key),
                 back[i].value);
    }
    /* ... and a copy of the backend entries under /libxl. */
    for (i = 0; i < nb; i++) {
        node_add(a, g_strdup_printf("%s/%s", lx, back[i].key),
                 g_strdup(back[i].value));
    }

    if (devid) {
        *devid = id;
    }
    return a;
}

bool xensim_ts_write_nodes(struct xs_handle *xsh, GPtrArray *nodes,
                           GError **errp)
{
    xs_transaction_t t;
    guint i;
    int tries = 0;

again:
    t = xs_transaction_start(xsh);
    if (t == XBT_NULL) {
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "xs_transaction_start: %s", g_strerror(errno));
        return false;
    }
    for (i = 0; i < nodes->len; i++) {
        xensim_ts_node *n = g_ptr_array_index(nodes, i);
        bool ok;

        if (n->fresh && !xs_rm(xsh, t, n->path) && errno != ENOENT) {
            goto fail;
        }
        if (n->value) {
            ok = xs_write(xsh, t, n->path, n->value, strlen(n->value));
        } else {
            ok = xs_mkdir(xsh, t, n->path);
        }
        if (!ok) {
            goto fail;
        }
        if (n->nr_perms &&
            !xs_set_permissions(xsh, t, n->path, n->perms, n->nr_perms)) {
            goto fail;
        }
        continue;
fail:
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "writing %s: %s", n->path, g_strerror(errno));
        xs_transaction_end(xsh, t, true);
        return false;
    }
    if (!xs_transaction_end(xsh, t, false)) {
        if (errno == EAGAIN && ++tries < 100) {
            goto again;
        }
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "xs_transaction_end: %s", g_strerror(errno));
        return false;
    }
    return true;
}

GPtrArray *xensim_ts_vbd3_nodes(uint32_t backend_domid, uint32_t domid,
                                const xensim_ts_disk *disk,
                                const char *nbd_path, int *devid,
                                GError **errp)
{
    const char *vdev = disk->vdev ? disk->vdev : XENSIM_TS_DEFAULT_VDEV;
    g_autofree char *be = NULL;
    g_autofree char *fe = NULL;
    GPtrArray *a;
    xensim_ts_node *n;
    int id;

    id = xensim_ts_vdev_to_devid(vdev);
    if (id < 0) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "invalid virtual disk identifier '%s'", vdev);
        return NULL;
    }
    if (disk->format && strcmp(disk->format, "raw")) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "vbd3 disk format '%s': only raw (tapdisk's aio)",
                    disk->format);
        return NULL;
    }
    if (disk->cdrom) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "vbd3 cdrom: not supported here");
        return NULL;
    }
    be = g_strdup_printf("/local/domain/%u/backend/vbd3/%u/%d",
                         backend_domid, domid, id);
    fe = xensim_ts_frontend_path(domid, id);
    a = g_ptr_array_new_with_free_func(node_free);

    /* Generic.add_device: the frontend, guest-owned, backend may read. */
    n = node_add(a, g_strdup(fe), NULL);
    node_perms(n, domid, backend_domid, XS_PERM_READ);
    n->fresh = true;
#define FRONT(k, v) \
    node_perms(node_add(a, g_strdup_printf("%s/" k, fe), (v)), domid, \
               backend_domid, XS_PERM_READ)
    FRONT("backend", g_strdup(be));
    FRONT("backend-id", g_strdup_printf("%u", backend_domid));
    FRONT("state", g_strdup_printf("%d", XENSIM_XENBUS_INITIALISING));
    FRONT("virtual-device", g_strdup_printf("%d", id));
    FRONT("device-type", g_strdup("disk"));
#undef FRONT

    /* ... and the backend, owned by its domain, the guest may read. */
    n = node_add(a, g_strdup(be), NULL);
    node_perms(n, backend_domid, domid, XS_PERM_READ);
    n->fresh = true;
#define BACK(k, v) node_add(a, g_strdup_printf("%s/" k, be), (v))
    BACK("frontend", g_strdup(fe));
    /* xapi's extra backend keys, then add_async's own. */
    BACK("sm-data/backend-kind", g_strdup("vbd3"));
    BACK("polling-duration", g_strdup_printf("%d", disk->polling_duration_us));
    BACK("polling-idle-threshold",
         g_strdup_printf("%d", disk->polling_idle_threshold));
    BACK("frontend-id", g_strdup_printf("%u", domid));
    BACK("online", g_strdup("1"));
    BACK("removable", g_strdup("0"));
    BACK("state", g_strdup_printf("%d", XENSIM_XENBUS_INITIALISING));
    BACK("dev", g_strdup(vdev));
    BACK("type", g_strdup("phy"));
    BACK("mode", g_strdup(disk->readonly ? "r" : "w"));
    BACK("params", g_strdup_printf("nbd:unix:%s", nbd_path));
#undef BACK

    if (devid) {
        *devid = id;
    }
    return a;
}
