/*
 * xensim toolstack: one simulated host with xenstored, domains, qdisk
 * disks and their QEMU device models, set up and torn down as libxl does.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <glib/gstdio.h>

#include "xensim/log.h"
#include "xensim/toolstack.h"
#include "ts-int.h"

struct ts_disk {
    int devid;
    xensim_ts_backend backend;
    pid_t tapdisk;              /* vbd3: its tapdisk; 0: none, -1: died */
    int minor;                  /* vbd3: the tapdisk's minor */
};

struct ts_domain {
    bool live;
    char *name;
    char *uuid;
    uint64_t mem_mb;
    GArray *disks;              /* struct ts_disk: disks added */
    pid_t qemu_pid;             /* 0: none; -1: reaped */
    int qemu_status;
};

struct xensim_ts {
    char *run_dir;
    char *log_dir;
    char *socket;
    char *shim;
    bool keep;
    xensim *hv;
    pid_t xenstored_pid;
    int xenstored_status;
    struct xs_handle *xsh;
    ts_blktap *blktap;          /* opts.blktap */
    struct ts_domain dom[XENSIM_MAX_DOMAINS];
};

static bool ts_errno(GError **errp, const char *what)
{
    int e = errno;

    g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s",
                what, g_strerror(e));
    return false;
}

/* The per-run log directory: made here, never removed. */
static char *ts_make_log_dir(const char *want, GError **errp)
{
    const char *env = g_getenv("XENSIM_LOG_DIR");
    g_autoptr(GDateTime) now = g_date_time_new_now_local();
    g_autofree char *stamp = g_date_time_format(now, "%Y%m%d-%H%M%S");
    const char *bases[] = { XENSIM_SOURCE_ROOT "/build/runs",
                            "/tmp/xensim-runs" };
    size_t i;

    if (want || env) {
        const char *d = want ? want : env;

        if (g_mkdir_with_parents(d, 0755) < 0) {
            ts_errno(errp, d);
            return NULL;
        }
        return g_strdup(d);
    }
    for (i = 0; i < G_N_ELEMENTS(bases); i++) {
        char *d = g_strdup_printf("%s/%s-%d", bases[i], stamp, (int)getpid());

        if (g_mkdir_with_parents(d, 0755) == 0 && access(d, W_OK) == 0) {
            return d;
        }
        g_free(d);
    }
    ts_errno(errp, "no writable log directory");
    return NULL;
}

/* xen-init-dom0: dom0's own nodes. */
static bool ts_init_dom0(xensim_ts *ts, GError **errp)
{
    if (!xs_write(ts->xsh, XBT_NULL, "/local/domain/0/domid", "0", 1) ||
        !xs_write(ts->xsh, XBT_NULL, "/local/domain/0/name", "Domain-0",
                  8)) {
        return ts_errno(errp, "writing dom0's nodes");
    }
    return true;
}

static void ts_remove_dir(const char *dir);

/*
 * Remove run dirs left by runs that died without a teardown: their name
 * carries the creator's pid, which no longer exists. Runs kept on
 * purpose (opts.keep) hold a "kept" file and stay.
 */
static void ts_reap_stale_run_dirs(void)
{
    GDir *gd = g_dir_open("/dev/shm", 0, NULL);
    const char *name;

    if (!gd) {
        return;
    }
    while ((name = g_dir_read_name(gd))) {
        g_autofree char *dir = NULL;
        g_autofree char *kept = NULL;
        char *end;
        long pid;

        if (!g_str_has_prefix(name, "xensim-")) {
            continue;
        }
        pid = strtol(name + 7, &end, 10);
        if (end == name + 7 || *end != '-' || pid <= 0 ||
            kill(pid, 0) == 0 || errno != ESRCH) {
            continue;
        }
        dir = g_build_filename("/dev/shm", name, NULL);
        kept = g_build_filename(dir, "kept", NULL);
        if (!g_file_test(kept, G_FILE_TEST_EXISTS)) {
            xensim_log(XENSIM_LOG_INFO, "removing stale run dir %s", dir);
            ts_remove_dir(dir);
        }
    }
    g_dir_close(gd);
}

xensim_ts *xensim_ts_start(const xensim_ts_opts *opts, GError **errp)
{
    static const xensim_ts_opts no_opts;
    xensim_ts *ts = g_new0(xensim_ts, 1);
    g_autofree char *tmpl = NULL;
    g_autofree char *xsd_log = NULL;
    g_autofree char *trace = NULL;
    const char *xenstored;

    if (!opts) {
        opts = &no_opts;
    }
    ts->keep = opts->keep;
    ts->shim = g_strdup(opts->shim ? opts->shim : xensim_ts_default_shim());
    xenstored = opts->xenstored ? opts->xenstored
                                : xensim_ts_default_xenstored();

    ts_reap_stale_run_dirs();
    tmpl = g_strdup_printf("/dev/shm/xensim-%d-XXXXXX", (int)getpid());
    if (!g_mkdtemp(tmpl)) {
        ts_errno(errp, tmpl);
        goto fail;
    }
    ts->run_dir = g_steal_pointer(&tmpl);
    ts->socket = g_strdup_printf("%s/socket", ts->run_dir);
    ts->log_dir = ts_make_log_dir(opts->log_dir, errp);
    if (!ts->log_dir) {
        goto fail;
    }
    if (opts->blktap) {
        /* First: still one thread and no child (toolstack.h, blktap). */
        ts->blktap = ts_blktap_new(opts->blktap_prefix, ts->run_dir,
                                   ts->log_dir, errp);
        if (!ts->blktap) {
            goto fail;
        }
    }

    ts->hv = xensim_create(ts->run_dir);
    if (!ts->hv) {
        ts_errno(errp, "xensim_create");
        goto fail;
    }
    xsd_log = g_strdup_printf("%s/xenstored.log", ts->log_dir);
    if (opts->xenstored_trace) {
        trace = g_strdup_printf("%s/xenstored-trace.log", ts->log_dir);
    }
    ts->xenstored_pid = xensim_xenstored_start(xenstored, ts->shim,
                                               ts->run_dir, xsd_log, trace,
                                               errp);
    if (ts->xenstored_pid < 0) {
        ts->xenstored_pid = 0;
        goto fail;
    }

    /* Our own clients (and our children) find xenstored there. */
    g_setenv("XENSTORED_PATH", ts->socket, TRUE);
    ts->xsh = xs_open(XS_OPEN_SOCKETONLY);
    if (!ts->xsh) {
        ts_errno(errp, "xs_open");
        goto fail;
    }
    if (!ts_init_dom0(ts, errp)) {
        goto fail;
    }
    /* XenServer's boot: cpumond and tapback after xenstored. */
    if (ts->blktap && !ts_blktap_start(ts->blktap, ts->run_dir, ts->shim,
                                       ts->socket, errp)) {
        goto fail;
    }
    return ts;

fail:
    xensim_ts_teardown(ts, NULL);
    return NULL;
}

const char *xensim_ts_run_dir(const xensim_ts *ts)
{
    return ts->run_dir;
}

const char *xensim_ts_log_dir(const xensim_ts *ts)
{
    return ts->log_dir;
}

const char *xensim_ts_socket(const xensim_ts *ts)
{
    return ts->socket;
}

pid_t xensim_ts_xenstored_pid(const xensim_ts *ts)
{
    return ts->xenstored_pid;
}

xensim *xensim_ts_hv(xensim_ts *ts)
{
    return ts->hv;
}

struct xs_handle *xensim_ts_xs(xensim_ts *ts)
{
    return ts->xsh;
}

static struct ts_domain *ts_dom(xensim_ts *ts, uint32_t domid, GError **errp)
{
    if (domid == 0 || domid >= XENSIM_MAX_DOMAINS || !ts->dom[domid].live) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "no domain %u in this run", domid);
        return NULL;
    }
    return &ts->dom[domid];
}

bool xensim_ts_domain_create(xensim_ts *ts, uint32_t domid,
                             const char *name, uint64_t mem_mb,
                             GError **errp)
{
    struct ts_domain *d;
    struct xensim_domain info;
    g_autoptr(GPtrArray) nodes = NULL;

    if (domid == 0 || domid >= XENSIM_MAX_DOMAINS) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "domid %u out of range 1..%u", domid,
                    XENSIM_MAX_DOMAINS - 1);
        return false;
    }
    if (xensim_domain_create(ts->hv, domid,
                             mem_mb * (1024 * 1024 / XENSIM_PAGE_SIZE),
                             name) < 0) {
        return ts_errno(errp, "xensim_domain_create");
    }
    d = &ts->dom[domid];
    d->live = true;
    d->name = g_strdup(name);
    d->uuid = g_uuid_string_random();
    d->mem_mb = mem_mb;
    d->disks = g_array_new(FALSE, FALSE, sizeof(struct ts_disk));

    if (xensim_domain_info(ts->hv, domid, &info) < 0) {
        return ts_errno(errp, "xensim_domain_info");
    }
    nodes = xensim_ts_domain_nodes(domid, name, d->uuid, mem_mb * 1024,
                                   XENSIM_XENSTORE_GFN, info.xenstore_port);
    if (!xensim_ts_write_nodes(ts->xsh, nodes, errp)) {
        return false;
    }
    if (!xs_introduce_domain(ts->xsh, domid, XENSIM_XENSTORE_GFN,
                             info.xenstore_port)) {
        return ts_errno(errp, "xs_introduce_domain");
    }
    xensim_log(XENSIM_LOG_INFO, "domain %u (%s) introduced, store port %u",
               domid, name, info.xenstore_port);
    return true;
}

static struct ts_disk *ts_disk_find(struct ts_domain *d, int devid)
{
    guint i;

    for (i = 0; d->disks && i < d->disks->len; i++) {
        struct ts_disk *k = &g_array_index(d->disks, struct ts_disk, i);

        if (k->devid == devid) {
            return k;
        }
    }
    return NULL;
}

/*
 * A vbd3 disk as XenServer attaches it (xensim_ts_disk_add() in
 * toolstack.h): SM's tapdisk, xenopsd's nodes, the block script's.
 */
static bool ts_vbd3_add(xensim_ts *ts, uint32_t domid,
                        const xensim_ts_disk *disk, struct ts_disk *k,
                        GError **errp)
{
    g_autoptr(GPtrArray) nodes = NULL;
    g_autofree char *nbd = NULL;
    g_autofree char *be = NULL;
    g_autofree char *pdp = NULL;
    g_autofree char *hs = NULL;
    g_autofree char *mrpo = NULL;

    if (!ts->blktap) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "a vbd3 disk needs a run with blktap (opts.blktap)");
        return false;
    }
    if (!disk->target) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "vbd3 disk has no target");
        return false;
    }
    nodes = xensim_ts_vbd3_nodes(0, domid, disk, "", &k->devid, errp);
    if (!nodes) {
        return false;
    }
    g_clear_pointer(&nodes, g_ptr_array_unref);
    if (!ts_blktap_attach(ts->blktap, disk->target, disk->readonly,
                          &k->tapdisk, &k->minor, &nbd, errp)) {
        return false;
    }
    nodes = xensim_ts_vbd3_nodes(0, domid, disk, nbd, NULL, errp);
    if (!xensim_ts_write_nodes(ts->xsh, nodes, errp)) {
        return false;
    }
    /*
     * scripts/block add (xenopsd): "nbd:unix:<path>" params. tapback's
     * per-domain slave only learns of physical-device-path from its
     * watch (reconnect() reads physical-device alone), so the script
     * must run once the slave has the device; on XenServer the script's
     * start-up gives it that time, here it waits for the node tapback
     * writes when it creates the device.
     */
    be = xensim_ts_vbd3_backend_path(domid, k->devid);
    pdp = g_strdup_printf("%s/physical-device-path", be);
    hs = g_strdup_printf("%s/hotplug-status", be);
    mrpo = g_strdup_printf("%s/max-ring-page-order", be);
    if (!xensim_ts_wait_node(ts, mrpo, NULL, 10000, errp)) {
        g_prefix_error(errp, "tapback did not take the device (see %s/"
                       "syslog.log): ", ts->log_dir);
        return false;
    }
    if (!xs_write(ts->xsh, XBT_NULL, pdp, nbd, strlen(nbd))) {
        return ts_errno(errp, pdp);
    }
    if (!xs_write(ts->xsh, XBT_NULL, hs, "connected", 9)) {
        return ts_errno(errp, hs);
    }
    return true;
}

bool xensim_ts_disk_add(xensim_ts *ts, uint32_t domid,
                        const xensim_ts_disk *disk, int *devid,
                        GError **errp)
{
    struct ts_domain *d = ts_dom(ts, domid, errp);
    g_autoptr(GPtrArray) nodes = NULL;
    struct ts_disk k = { .backend = disk->backend };

    if (!d) {
        return false;
    }
    if (disk->backend == XENSIM_TS_BACKEND_VBD3) {
        if (!ts_vbd3_add(ts, domid, disk, &k, errp)) {
            if (k.tapdisk > 0) {
                ts_blktap_detach(ts->blktap, k.tapdisk, k.minor, NULL);
            }
            return false;
        }
    } else {
        nodes = xensim_ts_disk_nodes(0, domid, disk, &k.devid, errp);
        if (!nodes || !xensim_ts_write_nodes(ts->xsh, nodes, errp)) {
            return false;
        }
    }
    g_array_append_val(d->disks, k);
    if (devid) {
        *devid = k.devid;
    }
    return true;
}

bool xensim_ts_tapdisk(xensim_ts *ts, uint32_t domid, int devid,
                       pid_t *pid, int *minor)
{
    struct ts_disk *k;

    if (domid == 0 || domid >= XENSIM_MAX_DOMAINS || !ts->dom[domid].live) {
        return false;
    }
    k = ts_disk_find(&ts->dom[domid], devid);
    if (!k || k->tapdisk <= 0) {
        return false;
    }
    *pid = k->tapdisk;
    *minor = k->minor;
    return true;
}

/* SM's detach of a vbd3 disk's tapdisk, once its nodes are gone. */
static bool ts_disk_release(xensim_ts *ts, struct ts_disk *k, GError **errp)
{
    bool ok = true;

    if (k->tapdisk > 0) {
        ok = ts_blktap_detach(ts->blktap, k->tapdisk, k->minor, errp);
    }
    k->tapdisk = 0;
    return ok;
}

bool xensim_ts_disk_remove(xensim_ts *ts, uint32_t domid, int devid,
                           GError **errp)
{
    struct ts_domain *d = ts_dom(ts, domid, errp);
    struct ts_disk *k = d ? ts_disk_find(d, devid) : NULL;
    bool vbd3 = k && k->backend == XENSIM_TS_BACKEND_VBD3;
    char *paths[] = {
        xensim_ts_frontend_path(domid, devid),
        vbd3 ? xensim_ts_vbd3_backend_path(domid, devid)
             : xensim_ts_backend_path(domid, devid),
        g_strdup_printf("/libxl/%u/device/vbd/%d", domid, devid),
    };
    xs_transaction_t t;
    bool ok = d != NULL;
    size_t i;
    int tries = 0;

again:
    t = ok ? xs_transaction_start(ts->xsh) : XBT_NULL;
    if (ok && t == XBT_NULL) {
        ts_errno(errp, "xs_transaction_start");
        ok = false;
    }
    for (i = 0; ok && i < G_N_ELEMENTS(paths); i++) {
        if (!xs_rm(ts->xsh, t, paths[i]) && errno != ENOENT) {
            ts_errno(errp, paths[i]);
            xs_transaction_end(ts->xsh, t, true);
            ok = false;
        }
    }
    if (ok && !xs_transaction_end(ts->xsh, t, false)) {
        if (errno == EAGAIN && ++tries < 100) {
            goto again;
        }
        ts_errno(errp, "xs_transaction_end");
        ok = false;
    }
    for (i = 0; i < G_N_ELEMENTS(paths); i++) {
        g_free(paths[i]);
    }
    if (ok && k && !ts_disk_release(ts, k, errp)) {
        ok = false;
    }
    for (i = 0; ok && i < d->disks->len; i++) {
        if (g_array_index(d->disks, struct ts_disk, i).devid == devid) {
            g_array_remove_index(d->disks, i);
            break;
        }
    }
    return ok;
}

/*
 * Does @qemu know -vnc? libxl always passes "-vnc none" to a PV guest's
 * device model, but a QEMU configured without VNC rejects the option
 * while parsing it, before -version, which gives a cheap probe.
 */
static bool ts_qemu_has_vnc(const char *qemu)
{
    const char *argv[] = { qemu, "-vnc", "none", "-version", NULL };
    int status = -1;

    if (!g_spawn_sync(NULL, (char **)argv, NULL,
                      G_SPAWN_STDOUT_TO_DEV_NULL | G_SPAWN_STDERR_TO_DEV_NULL,
                      NULL, NULL, NULL, NULL, &status, NULL)) {
        return true;
    }
    return g_spawn_check_wait_status(status, NULL);
}

char *xensim_ts_qmp_path(const xensim_ts *ts, uint32_t domid)
{
    return g_strdup_printf("%s/qmp-libxl-%u", ts->run_dir, domid);
}

pid_t xensim_ts_qemu_start(xensim_ts *ts, uint32_t domid, const char *qemu,
                           const char *const *extra_pv, GError **errp)
{
    struct ts_domain *d = ts_dom(ts, domid, errp);
    g_autoptr(GPtrArray) args = g_ptr_array_new_with_free_func(g_free);
    g_auto(GStrv) env = g_get_environ();
    g_autofree char *log = NULL;
    g_autofree char *qmp = NULL;
    g_autofree char *dm_path = NULL;
    g_autofree char *pid_path = NULL;
    g_autofree char *pid_str = NULL;
    g_autofree char *preload = NULL;
    pid_t pid;

    if (!d) {
        return -1;
    }
    if (d->qemu_pid > 0) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_EXIST,
                    "domain %u already has a device model", domid);
        return -1;
    }
    if (!g_file_test(qemu, G_FILE_TEST_IS_EXECUTABLE)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "no QEMU at %s", qemu);
        return -1;
    }

    /* libxl__spawn_local_dm(): the device model's xenstore directory. */
    dm_path = g_strdup_printf("/local/domain/0/device-model/%u", domid);
    if (!xs_mkdir(ts->xsh, XBT_NULL, dm_path)) {
        ts_errno(errp, dm_path);
        return -1;
    }

    /* libxl__build_device_model_args_new(), PV guest, no vfb. */
    qmp = xensim_ts_qmp_path(ts, domid);
#define ARG(s) g_ptr_array_add(args, (s))
    ARG(g_strdup(qemu));
    ARG(g_strdup("-xen-domid"));
    ARG(g_strdup_printf("%u", domid));
    ARG(g_strdup("-no-shutdown"));
    ARG(g_strdup("-chardev"));
    ARG(g_strdup_printf("socket,id=libxl-cmd,path=%s,server=on,wait=off",
                        qmp));
    ARG(g_strdup("-mon"));
    ARG(g_strdup("chardev=libxl-cmd,mode=control"));
    ARG(g_strdup("-chardev"));
    ARG(g_strdup_printf("socket,id=libxenstat-cmd,path=%s/qmp-libxenstat-%u,"
                        "server=on,wait=off", ts->run_dir, domid));
    ARG(g_strdup("-mon"));
    ARG(g_strdup("chardev=libxenstat-cmd,mode=control"));
    ARG(g_strdup("-nodefaults"));
    ARG(g_strdup("-no-user-config"));
    ARG(g_strdup("-xen-attach"));
    ARG(g_strdup("-name"));
    ARG(g_strdup(d->name));
    if (ts_qemu_has_vnc(qemu)) {
        ARG(g_strdup("-vnc"));
        ARG(g_strdup("none"));
    } else {
        xensim_log(XENSIM_LOG_WARN, "%s has no VNC: leaving out libxl's "
                   "-vnc none", qemu);
    }
    ARG(g_strdup("-display"));
    ARG(g_strdup("none"));
    ARG(g_strdup("-nographic"));
    ARG(g_strdup("-machine"));
    ARG(g_strdup("xenpv"));
    for (; extra_pv && *extra_pv; extra_pv++) {
        ARG(g_strdup(*extra_pv));
    }
    ARG(g_strdup("-m"));
    ARG(g_strdup_printf("%" PRIu64, d->mem_mb));
    ARG(NULL);
#undef ARG

    env = g_environ_setenv(env, "XENSIM_DIR", ts->run_dir, TRUE);
    env = g_environ_setenv(env, "XENSTORED_PATH", ts->socket, TRUE);
    preload = ts_preload(ts->shim);
    env = g_environ_setenv(env, "LD_PRELOAD", preload, TRUE);
    /* libxl__set_qemu_env_for_xsa_180() */
    env = g_environ_setenv(env, "XEN_QEMU_CONSOLE_LIMIT", "1048576", TRUE);

    log = g_strdup_printf("%s/qemu-dm-%s.log", ts->log_dir, d->name);
    if (xensim_log_enabled(XENSIM_LOG_INFO)) {
        g_autofree char *cmd = g_strjoinv(" ", (char **)args->pdata);

        xensim_log(XENSIM_LOG_INFO, "starting device model: %s", cmd);
    }
    pid = ts_spawn((char **)args->pdata, env, log, errp);
    if (pid < 0) {
        return -1;
    }
    d->qemu_pid = pid;

    pid_path = g_strdup_printf("/local/domain/%u/image/device-model-pid",
                               domid);
    pid_str = g_strdup_printf("%d", (int)pid);
    if (!xs_write(ts->xsh, XBT_NULL, pid_path, pid_str, strlen(pid_str))) {
        ts_errno(errp, pid_path);
        return -1;
    }
    return pid;
}

/* Reap children of the run that have exited; describe the first. */
static bool ts_check_children(xensim_ts *ts, GError **errp)
{
    uint32_t i;
    guint j;
    int st;

    if (ts->xenstored_pid > 0 &&
        waitpid(ts->xenstored_pid, &st, WNOHANG) == ts->xenstored_pid) {
        g_autofree char *s = ts_status_string(st);

        ts->xenstored_pid = 0;
        ts->xenstored_status = st;
        g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                    "xenstored %s (see %s/xenstored.log)", s, ts->log_dir);
        return false;
    }
    for (i = 1; i < XENSIM_MAX_DOMAINS; i++) {
        struct ts_domain *d = &ts->dom[i];

        if (d->qemu_pid > 0 &&
            waitpid(d->qemu_pid, &st, WNOHANG) == d->qemu_pid) {
            g_autofree char *s = ts_status_string(st);

            d->qemu_pid = -1;
            d->qemu_status = st;
            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "QEMU of domain %u %s (see %s/qemu-dm-%s.log)", i, s,
                        ts->log_dir, d->name);
            return false;
        }
        for (j = 0; d->disks && j < d->disks->len; j++) {
            struct ts_disk *k = &g_array_index(d->disks, struct ts_disk, j);

            if (k->tapdisk > 0 &&
                waitpid(k->tapdisk, &st, WNOHANG) == k->tapdisk) {
                g_autofree char *s = ts_status_string(st);

                g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                            "tapdisk %d of domain %u disk %d %s (see %s/"
                            "blktap)", (int)k->tapdisk, i, k->devid, s,
                            ts->log_dir);
                k->tapdisk = -1;
                return false;
            }
        }
    }
    return !ts->blktap || ts_blktap_check(ts->blktap, errp);
}

bool xensim_ts_check(xensim_ts *ts, GError **errp)
{
    return ts_check_children(ts, errp);
}

/*
 * Wait up to @timeout_ms for @path to exist and, unless @values is NULL,
 * to read one of the NULL-terminated @values. Returns the index of the
 * value read (0 when @values is NULL), or -1 with @errp set.
 */
static int ts_wait_node(xensim_ts *ts, const char *path,
                        const char *const *values, int timeout_ms,
                        GError **errp)
{
    g_autofree char *token = g_strdup_printf("xensim-wait-%p", (void *)path);
    int64_t deadline = ts_now_ms() + timeout_ms;
    int found = -1;

    if (!xs_watch(ts->xsh, path, token)) {
        ts_errno(errp, "xs_watch");
        return -1;
    }
    for (;;) {
        unsigned int len;
        g_autofree char *v = xs_read(ts->xsh, XBT_NULL, path, &len);
        struct pollfd pfd = { .fd = xs_fileno(ts->xsh), .events = POLLIN };
        char **ev;
        int64_t left;
        int i;

        for (i = 0; v && values && values[i]; i++) {
            if (!strcmp(v, values[i])) {
                found = i;
            }
        }
        if (v && !values) {
            found = 0;
        }
        if (found >= 0 || !ts_check_children(ts, errp)) {
            break;
        }
        left = deadline - ts_now_ms();
        if (left <= 0) {
            if (values) {
                g_autofree char *want = g_strjoinv("' or '", (char **)values);

                g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_AGAIN,
                            "%s is '%s', not '%s', after %d ms", path,
                            v ? v : "(absent)", want, timeout_ms);
            } else {
                g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_AGAIN,
                            "%s absent after %d ms", path, timeout_ms);
            }
            break;
        }
        /* Short slices: children are checked between them. */
        if (poll(&pfd, 1, MIN(left, 100)) > 0) {
            while ((ev = xs_check_watch(ts->xsh))) {
                free(ev);
            }
        }
    }
    xs_unwatch(ts->xsh, path, token);
    return found;
}

bool xensim_ts_wait_node(xensim_ts *ts, const char *path, const char *value,
                         int timeout_ms, GError **errp)
{
    const char *const values[] = { value, NULL };

    return ts_wait_node(ts, path, value ? values : NULL, timeout_ms,
                        errp) >= 0;
}

bool xensim_ts_wait_backend_ready(xensim_ts *ts, uint32_t domid, int devid,
                                  int timeout_ms, GError **errp)
{
    static const char *const states[] = { "2", "6", NULL }; /* InitWait, Closed */
    struct ts_domain *d = ts_dom(ts, domid, NULL);
    struct ts_disk *k = d ? ts_disk_find(d, devid) : NULL;
    bool vbd3 = k && k->backend == XENSIM_TS_BACKEND_VBD3;
    g_autofree char *be = vbd3 ? xensim_ts_vbd3_backend_path(domid, devid)
                               : xensim_ts_backend_path(domid, devid);
    g_autofree char *state = g_strdup_printf("%s/state", be);
    g_autofree char *sectors = g_strdup_printf("%s/sectors", be);
    int64_t deadline = ts_now_ms() + timeout_ms;
    int got = ts_wait_node(ts, state, states, timeout_ms, errp);

    if (got == 1) {
        /* xenbus_dev_fatal()'s node, as QEMU's xen_backend_refuse() */
        g_autofree char *error_node = g_strdup_printf(
            "/local/domain/0/error/backend/%s/%u/%d/error",
            vbd3 ? "vbd3" : "qdisk", domid, devid);
        unsigned int len;
        g_autofree char *why = xs_read(ts->xsh, XBT_NULL, error_node, &len);

        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "the backend refused disk %d of domain %u: %s", devid,
                    domid, why ? why : "(no error node)");
        return false;
    }
    /* tapback writes sectors only when it connects */
    return got == 0 &&
           (vbd3 || xensim_ts_wait_node(ts, sectors, NULL,
                                        MAX(deadline - ts_now_ms(), 0), errp));
}

/* libxl's domain destroy, reduced: DM, device and domain nodes, domain. */
static bool ts_domain_destroy(xensim_ts *ts, uint32_t domid, GError **errp)
{
    struct ts_domain *d = &ts->dom[domid];
    bool ok = true;
    guint i;
    int st = 0;

    if (d->qemu_pid > 0) {
        if (!ts_stop_child(d->qemu_pid, &st, 5000)) {
            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "QEMU of domain %u needed SIGKILL", domid);
            ok = false;
        }
        d->qemu_pid = -1;
        d->qemu_status = st;
    }
    if (ts->xsh) {
        char *paths[] = {
            g_strdup_printf("/local/domain/0/device-model/%u", domid),
            g_strdup_printf("/local/domain/0/backend/qdisk/%u", domid),
            g_strdup_printf("/local/domain/0/backend/vbd3/%u", domid),
            g_strdup_printf("/local/domain/%u", domid),
            g_strdup_printf("/libxl/%u", domid),
            g_strdup_printf("/vm/%s", d->uuid),
        };

        for (i = 0; i < G_N_ELEMENTS(paths); i++) {
            if (!xs_rm(ts->xsh, XBT_NULL, paths[i]) && errno != ENOENT &&
                ok) {
                ts_errno(errp, paths[i]);
                ok = false;
            }
            g_free(paths[i]);
        }
    }
    for (i = 0; d->disks && i < d->disks->len; i++) {
        if (!ts_disk_release(ts, &g_array_index(d->disks, struct ts_disk, i),
                             ok ? errp : NULL)) {
            ok = false;
        }
    }
    if (xensim_domain_destroy(ts->hv, domid) < 0 && ok) {
        ts_errno(errp, "xensim_domain_destroy");
        ok = false;
    }
    d->live = false;
    g_free(d->name);
    g_free(d->uuid);
    if (d->disks) {
        g_array_unref(d->disks);
    }
    d->name = d->uuid = NULL;
    d->disks = NULL;
    return ok;
}

/* rm -rf @dir (the run dir holds only plain files and sockets). */
static void ts_remove_dir(const char *dir)
{
    GDir *gd = g_dir_open(dir, 0, NULL);
    const char *name;

    if (gd) {
        while ((name = g_dir_read_name(gd))) {
            g_autofree char *p = g_build_filename(dir, name, NULL);

            if (g_file_test(p, G_FILE_TEST_IS_DIR) &&
                !g_file_test(p, G_FILE_TEST_IS_SYMLINK)) {
                ts_remove_dir(p);
            } else {
                g_unlink(p);
            }
        }
        g_dir_close(gd);
    }
    g_rmdir(dir);
}

bool xensim_ts_teardown(xensim_ts *ts, GError **errp)
{
    GError *err = NULL;
    GError **first = errp;
    uint32_t i;
    bool ok = true;

    if (!ts) {
        return true;
    }
    for (i = 1; i < XENSIM_MAX_DOMAINS; i++) {
        if (ts->dom[i].live &&
            !ts_domain_destroy(ts, i, first ? first : &err)) {
            ok = false;
            first = NULL;
        }
        g_clear_error(&err);
    }
    if (!ts_blktap_stop(ts->blktap, first ? first : &err)) {
        ok = false;
        first = NULL;
    }
    g_clear_error(&err);
    if (ts->xsh) {
        xs_close(ts->xsh);
        ts->xsh = NULL;
    }
    if (ts->xenstored_pid > 0) {
        if (!xensim_xenstored_stop(ts->xenstored_pid)) {
            if (first) {
                g_set_error(first, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                            "xenstored needed SIGKILL");
                first = NULL;
            }
            ok = false;
        }
        ts->xenstored_pid = 0;
    }
    xensim_detach(ts->hv);
    if (ts->run_dir) {
        if (ts->keep) {
            g_autofree char *kept = g_build_filename(ts->run_dir, "kept",
                                                     NULL);

            g_file_set_contents(kept, "", 0, NULL);
            xensim_log(XENSIM_LOG_INFO, "keeping %s", ts->run_dir);
        } else {
            ts_remove_dir(ts->run_dir);
            if (ts->blktap) {
                /* Our run dir is a bind mount over the host's: drop both. */
                ts_blktap_remove_exposed_dir(ts->blktap, ts->run_dir);
            }
        }
    }
    ts_blktap_free(ts->blktap);
    g_free(ts->run_dir);
    g_free(ts->log_dir);
    g_free(ts->socket);
    g_free(ts->shim);
    g_free(ts);
    return ok;
}
