/*
 * xensim toolstack: what libxl and xl do on a real Xen host, reduced to
 * what a PV block backend needs.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A run (xensim_ts) owns one simulated host:
 *
 *   run dir   /dev/shm/xensim-<pid>-XXXXXX: the hypervisor state (hv.h),
 *             xenstored's socket and the QMP sockets. Exported as
 *             XENSIM_DIR to every participant.
 *   log dir   one per run: xenstored.log, qemu-dm-<name>.log.
 *
 * xensim_ts_start() creates the host and starts Debian's xenstored under
 * the libxen shim as dom0 does at boot (xenstored.service followed by
 * xen-init-dom0). xensim_ts_domain_create() and xensim_ts_disk_add()
 * write the same xenstore nodes with the same permissions as libxl
 * (libxl__domain_make, libxl__build_post, device_disk_add and
 * libxl__device_generic_add in tools/libs/light/), and
 * xensim_ts_qemu_start() launches QEMU with libxl's command line for a
 * PV guest's device model (libxl__build_device_model_args_new).
 *
 * Clients reach xenstored with Debian's libxenstore: XENSTORED_PATH is
 * <run dir>/socket.
 *
 * Errors: functions taking a GError ** return false (or NULL) and set it;
 * nothing is logged for such failures. Not thread-safe: one thread
 * drives a run.
 */
#ifndef XENSIM_TOOLSTACK_H
#define XENSIM_TOOLSTACK_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>
#include <xenstore.h>

#include "xensim/hv.h"

/* Xenbus states (xen/io/xenbus.h), as written to the "state" nodes. */
#define XENSIM_XENBUS_INITIALISING  1
#define XENSIM_XENBUS_INITWAIT      2
#define XENSIM_XENBUS_CONNECTED     4

/* Defaults of a run. */
#define XENSIM_TS_DEFAULT_DOMID     1
#define XENSIM_TS_DEFAULT_MEM_MB    64
#define XENSIM_TS_DEFAULT_VDEV      "xvda"

typedef struct xensim_ts xensim_ts;

typedef struct xensim_ts_opts {
    /*
     * Host blktap's dom0 side, for vbd3 disks (see "blktap" below): the
     * run gets its own mount namespace and starts cpumond and tapback as
     * XenServer's dom0 does at boot. Needs CAP_SYS_ADMIN (root).
     */
    bool blktap;
    /* blktap's install prefix (sbin/tap-ctl, libexec/tapdisk,
     * bin/tapback, bin/cpumond); NULL: $XENSIM_BLKTAP, else the one
     * scripts/build-blktap.sh makes in the build tree. */
    const char *blktap_prefix;
    /* Per-run log directory; NULL: $XENSIM_LOG_DIR, else a new
     * <runs>/<YYYYmmdd-HHMMSS>-<pid> under the build tree's runs dir,
     * else under /tmp/xensim-runs. */
    const char *log_dir;
    /* Debian xenstored binary; NULL: $XENSIM_XENSTORED, else the unpack
     * made by toolstack/get-xenstored.sh in the build tree. */
    const char *xenstored;
    /* libxensim-shim.so; NULL: $XENSIM_SHIM, else the build tree's. */
    const char *shim;
    /* Keep the run dir at teardown (logs are always kept); it is
     * marked with a "kept" file so that later runs leave it alone. */
    bool keep;
    /* Pass -T <log dir>/xenstored-trace.log to xenstored. */
    bool xenstored_trace;
} xensim_ts_opts;

/* Who serves a disk: the xenstore backend type of its nodes. */
typedef enum xensim_ts_backend {
    XENSIM_TS_BACKEND_QDISK = 0,    /* QEMU; libxl's backendtype=qdisk */
    XENSIM_TS_BACKEND_VBD3,         /* tapdisk + tapback, as XenServer */
} xensim_ts_backend;

/* A disk as xl's disk spec describes it (docs/man/xl-disk-configuration). */
typedef struct xensim_ts_disk {
    xensim_ts_backend backend;
    /*
     * vbd3 only: the VBD's polling-duration (us) and
     * polling-idle-threshold (% of idle dom0 CPU above which tapdisk may
     * poll) nodes, which xapi always writes (its defaults: 1000 us, 50).
     */
    int polling_duration_us;
    int polling_idle_threshold;
    const char *target;         /* image path (libxl's pdev_path) */
    const char *format;         /* raw, qcow2, qcow, vhd, qed; NULL: raw */
    const char *vdev;           /* xvdX[N] or dXpY; NULL: xvda */
    bool readonly;              /* access=ro: mode "r" instead of "w" */
    /*
     * devtype=cdrom: device-type "cdrom", and as xlu_disk_parse() makes
     * it, removable and read-only; no @target is an empty drive, which
     * libxl writes as params "aio:".
     */
    bool cdrom;
    /*
     * discard-enable: libxl's default is on for a writable disk and off
     * for a read-only one (libxl__device_disk_setdefault); xl's "discard"
     * and "no-discard" force it.
     */
    bool discard;
    bool no_discard;
    bool direct_io_safe;        /* direct-io-safe=1 */
    /*
     * Bad specs, for tests: @params, if set, is written as the backend's
     * params node verbatim ("" too) instead of "<format>:<target>", and
     * @no_params leaves the node out. @target is then not needed.
     */
    const char *params;
    bool no_params;
} xensim_ts_disk;

/* One xenstore node as libxl writes it. */
typedef struct xensim_ts_node {
    char *path;                 /* absolute */
    char *value;                /* NULL: mkdir (no value written) */
    /* Explicit permissions (owner first, as xs_set_permissions takes
     * them); nr_perms == 0: inherited from the parent at creation. */
    struct xs_permissions perms[2];
    unsigned int nr_perms;
    /* Remove the whole subtree first, as libxl does for the directories
     * it (re)creates (domain path, device directories). */
    bool fresh;
} xensim_ts_node;

/* --- node layout (pure, no xenstored needed) --------------------------- */

/*
 * libxl's device number of @vdev (libxl__device_disk_dev_number): xvdX
 * and dXpY give (202 << 8) | (disk << 4) | part for disk and part up to
 * 15, the extended (1 << 28) | (disk << 8) | part form otherwise; a plain
 * number is taken as is. -1 for anything else (hdX and sdX are HVM-only
 * names and not accepted here).
 */
int xensim_ts_vdev_to_devid(const char *vdev);

/*
 * The string libxl writes before the image path in "params"
 * (libxl__device_disk_string_of_format): raw -> "aio", qcow2 -> "qcow2",
 * qcow, vhd, qed as is. NULL for an unknown format.
 */
const char *xensim_ts_format_prefix(const char *format);

/*
 * The nodes libxl writes for a PV domain @domid named @name with
 * @mem_kb of memory and its xenstore ring in gfn @store_gfn, port
 * @store_port (libxl__domain_make, then libxl__build_post), in write
 * order, as an array of xensim_ts_node * (free with
 * g_ptr_array_unref). @uuid is the /vm/<uuid> name. As in libxl, dom0
 * owns /local/domain/<domid> (and cpu, memory, device, control) with
 * the guest allowed to read; the guest owns only data, drivers, feature,
 * attr, error, control/{shutdown,feature-*,sysrq} and
 * device/suspend/event-channel, plus each device/<kind>/<devid> its
 * devices get.
 */
GPtrArray *xensim_ts_domain_nodes(uint32_t domid, const char *name,
                                  const char *uuid, uint64_t mem_kb,
                                  uint64_t store_gfn, uint32_t store_port);

/*
 * The nodes libxl writes to attach @disk to @domid with backendtype=qdisk
 * served by @backend_domid: backend/qdisk/<domid>/<devid> (backend owns,
 * frontend reads), device/vbd/<devid> (frontend owns, backend reads) and
 * the /libxl/<domid>/device/vbd/<devid> copy. *@devid gets the device
 * number. NULL and @errp set if vdev or format is not valid.
 */
GPtrArray *xensim_ts_disk_nodes(uint32_t backend_domid, uint32_t domid,
                                const xensim_ts_disk *disk, int *devid,
                                GError **errp);

/*
 * The nodes XenServer's xenopsd writes to attach @disk (backend
 * XENSIM_TS_BACKEND_VBD3, a raw image) to @domid, served by a tapdisk in
 * @backend_domid whose NBD socket is @nbd_path (Device.Vbd.add_async in
 * ocaml/xenopsd/xc/device.ml): backend/vbd3/<domid>/<devid> with
 * params "nbd:unix:<nbd_path>" (what SM's attach returns for blktap3),
 * sm-data/backend-kind, polling-duration and polling-idle-threshold
 * (xapi's extra backend keys), frontend-id, online, removable, state,
 * dev, type "phy", mode; device/vbd/<devid> with backend-id, state,
 * virtual-device, device-type (no protocol: xenopsd leaves it to the
 * frontend). Permissions as libxl's. *@devid gets the device number.
 * The block hotplug script's nodes (physical-device-path,
 * hotplug-status) come later, see xensim_ts_disk_add().
 */
GPtrArray *xensim_ts_vbd3_nodes(uint32_t backend_domid, uint32_t domid,
                                const xensim_ts_disk *disk,
                                const char *nbd_path, int *devid,
                                GError **errp);

/*
 * Write @nodes in order in one transaction, retried on EAGAIN as libxl
 * does: a fresh node's subtree is removed first; a directory (NULL
 * value) is made with xs_mkdir, a value with xs_write; explicit perms are
 * then set with xs_set_permissions.
 */
bool xensim_ts_write_nodes(struct xs_handle *xsh, GPtrArray *nodes,
                           GError **errp);

/* --- a run -------------------------------------------------------------- */

/*
 * Create a host in a fresh run dir under /dev/shm (first removing run
 * dirs whose creator died without a teardown and that were not kept),
 * start xenstored on it
 * (waiting until its socket accepts) and write dom0's nodes as
 * xen-init-dom0 does. @opts may be NULL.
 */
xensim_ts *xensim_ts_start(const xensim_ts_opts *opts, GError **errp);

/*
 * Undo everything the run did, in libxl's order: QEMU gets SIGTERM (then
 * SIGKILL after 5 s), the domains' nodes are removed and the domains
 * destroyed, xenstored is stopped, and the run dir removed unless
 * opts.keep. NULL is accepted. Returns false if a step failed (the
 * teardown still goes on; the first failure is in @errp).
 */
bool xensim_ts_teardown(xensim_ts *ts, GError **errp);

const char *xensim_ts_run_dir(const xensim_ts *ts);     /* XENSIM_DIR */
const char *xensim_ts_log_dir(const xensim_ts *ts);
const char *xensim_ts_socket(const xensim_ts *ts);      /* XENSTORED_PATH */
pid_t xensim_ts_xenstored_pid(const xensim_ts *ts);
xensim *xensim_ts_hv(xensim_ts *ts);
/* The run's own dom0 xenstore connection (Debian libxenstore). */
struct xs_handle *xensim_ts_xs(xensim_ts *ts);

/*
 * Create domain @domid (@mem_mb of memory) in the hypervisor, write its
 * nodes (xensim_ts_domain_nodes) and introduce it to xenstored with
 * xs_introduce_domain(domid, XENSIM_XENSTORE_GFN, its xenstore port), as
 * libxl__build_post does; xenstored then maps the ring through grant
 * GNTTAB_RESERVED_XENSTORE and binds the port.
 */
bool xensim_ts_domain_create(xensim_ts *ts, uint32_t domid,
                             const char *name, uint64_t mem_mb,
                             GError **errp);

/*
 * Add @disk to @domid; *@devid gets its number. qdisk: the nodes of
 * xensim_ts_disk_nodes(), for a QEMU started later. vbd3 (needs
 * opts.blktap): SM's attach, a tapdisk for the raw image made as
 * blktap2.py does it (tap-ctl allocate, spawn, attach, open -a aio:),
 * then xensim_ts_vbd3_nodes() in one transaction, then what the block
 * hotplug script writes: physical-device-path (the tapdisk's NBD
 * socket), hotplug-status=connected. tapback takes it from there.
 */
bool xensim_ts_disk_add(xensim_ts *ts, uint32_t domid,
                        const xensim_ts_disk *disk, int *devid,
                        GError **errp);

/*
 * The tapdisk serving vbd3 disk @devid of @domid: *@pid (the process)
 * and *@minor (its tap-ctl minor). False if there is none.
 */
bool xensim_ts_tapdisk(xensim_ts *ts, uint32_t domid, int devid,
                       pid_t *pid, int *minor);

/*
 * Remove disk @devid of @domid from xenstore as libxl__device_destroy()
 * does when an attach fails or a detach completes: its frontend, backend
 * and /libxl directories, in one transaction.
 */
bool xensim_ts_disk_remove(xensim_ts *ts, uint32_t domid, int devid,
                           GError **errp);

/* Backend (qdisk, vbd3) and frontend directory of device @devid of @domid. */
char *xensim_ts_backend_path(uint32_t domid, int devid);
char *xensim_ts_vbd3_backend_path(uint32_t domid, int devid);
char *xensim_ts_frontend_path(uint32_t domid, int devid);

/*
 * Launch @qemu as libxl launches a PV guest's device model:
 *
 *   qemu -xen-domid N -no-shutdown
 *        -chardev socket,id=libxl-cmd,path=<run>/qmp-libxl-N,server=on,wait=off
 *        -mon chardev=libxl-cmd,mode=control
 *        -chardev socket,id=libxenstat-cmd,path=<run>/qmp-libxenstat-N,...
 *        -mon chardev=libxenstat-cmd,mode=control
 *        -nodefaults -no-user-config -xen-attach -name NAME
 *        -vnc none -display none -nographic
 *        -machine xenpv EXTRA_PV... -m MB
 *
 * (@extra_pv is libxl's device_model_args_pv, NULL-terminated or NULL;
 * "-vnc none" is left out, with a warning, for a QEMU built without VNC,
 * which would reject it),
 * with XENSIM_DIR, XENSTORED_PATH, LD_PRELOAD=<shim> and libxl's
 * XEN_QEMU_CONSOLE_LIMIT in its environment and stdout/stderr in
 * <log dir>/qemu-dm-NAME.log. Makes device-model/N first and writes
 * image/device-model-pid after, as libxl__spawn_local_dm does. Does not
 * wait: see xensim_ts_wait_node().
 */
pid_t xensim_ts_qemu_start(xensim_ts *ts, uint32_t domid, const char *qemu,
                           const char *const *extra_pv, GError **errp);

/* <run dir>/qmp-libxl-<domid>: QMP socket of the domain's QEMU. */
char *xensim_ts_qmp_path(const xensim_ts *ts, uint32_t domid);

/*
 * A QMP client of a device model's monitor (e.g. xensim_ts_qmp_path()),
 * one command at a time, as libxl uses it. xensim_qmp_open() connects
 * (retrying until @timeout_ms, for a QEMU still starting) and negotiates
 * capabilities. xensim_qmp_call() sends @cmd, one JSON object without a
 * newline, and waits up to @timeout_ms for its answer, skipping events:
 * the "return" line (g_free it), or NULL with @errp set (an "error"
 * answer, a timeout, a closed socket). Close accepts NULL.
 */
typedef struct xensim_qmp xensim_qmp;
xensim_qmp *xensim_qmp_open(const char *path, int timeout_ms, GError **errp);
char *xensim_qmp_call(xensim_qmp *q, const char *cmd, int timeout_ms,
                      GError **errp);
void xensim_qmp_close(xensim_qmp *q);

/*
 * Wait up to @timeout_ms for @path to read exactly @value (@value NULL:
 * for @path to exist), using a xenstore watch on @path. Fails early
 * (with QEMU's exit status in the message) if a QEMU started by this run
 * exits, or if xenstored exits. Children are reaped here: SIGCHLD
 * handling by the caller must not waitpid(-1).
 */
bool xensim_ts_wait_node(xensim_ts *ts, const char *path, const char *value,
                         int timeout_ms, GError **errp);

/*
 * Wait until the backend of @domid's device @devid is ready for a
 * frontend: state InitWait and, for qdisk, because pristine QEMU's
 * xen-bus announces InitWait before xen-block's realize writes the
 * disk's nodes (the fork fixes that), its last node ("sectors") present
 * too; tapback writes max-ring-page-order before InitWait and sectors
 * only when it connects. A backend that refuses the disk by going to
 * Closed (the fork writes the reason to the error node, as Linux
 * backends do) fails the wait at once, with that reason in @errp.
 */
bool xensim_ts_wait_backend_ready(xensim_ts *ts, uint32_t domid, int devid,
                                  int timeout_ms, GError **errp);

/*
 * Reap children of the run that exited: false, with @errp saying which
 * and how, if xenstored, a QEMU or one of blktap's daemons (cpumond,
 * tapback, a tapdisk) has died. For a caller's SIGCHLD handling.
 */
bool xensim_ts_check(xensim_ts *ts, GError **errp);

/* --- blktap (opts.blktap) ---------------------------------------------- */

/*
 * A run with opts.blktap is set up as a XenServer dom0 runs blktap 3:
 *
 *  - its own mount namespace (unshare(CLONE_NEWNS), / made private), so
 *    that runs side by side cannot meet in blktap's fixed paths: /run
 *    is <run dir>/run (tap-ctl's /run/blktap-control, tapback's
 *    /var/run/tapback.*), /dev/shm a fresh tmpfs (tapdisk's
 *    /dev/shm/vbd3-<domid>-<devid> and cpumond's /cpu_util_monitor are
 *    created O_EXCL) into which the run dir and every vbd3 image under
 *    /dev/shm are bind-mounted at their own paths, and /var/log/blktap
 *    (tapdisk's log files) is <log dir>/blktap. The run is a child
 *    subreaper, so the tapdisks that `tap-ctl spawn` daemonizes remain
 *    its children;
 *  - cpumond (XenServer's cpumond.service: the dom0 idle CPU tapdisk
 *    compares with polling-idle-threshold; without it tapdisk never
 *    polls) and tapback (tapback.service, in the foreground: -d) start
 *    after xenstored, under the libxen shim with XENSIM_DIR and
 *    XENSTORED_PATH; their syslog (and tapdisk's) goes to a sink of the
 *    run, <log dir>/syslog.log (XENSIM_SYSLOG, see shim/dom0.c), their
 *    output to <log dir>/cpumond.log, tapback.log;
 *  - vbd3 disks get their tapdisk from tap-ctl (xensim_ts_disk_add()),
 *    which runs it under the shim too; at teardown their nodes are
 *    removed, the tapdisk closed, detached and freed (SM's detach), it
 *    exits, then tapback and cpumond are stopped.
 *
 * Errors of these steps name the log to read.
 */

/* --- xenstored alone (used by xensim_ts_start) -------------------------- */

/*
 * Start @xenstored in the foreground (-N) on the host in @run_dir, with
 * LD_PRELOAD=@shim, XENSIM_DIR, XENSTORED_RUNDIR=@run_dir and
 * XENSTORED_PATH=<run dir>/socket in its environment and stdout/stderr
 * appended to @log_file; @trace_file (may be NULL) is passed as -T.
 * Not -D: xenstored 4.17 only opens its xc, gnttab and evtchn handles,
 * which XS_INTRODUCE needs, together with dom0's own connection
 * (domain_init() + dom0_init()); the shim serves dom0_init()'s
 * /proc/xen/xsd_port and xsd_kva from the host (hv.h). Returns the pid
 * once the socket accepts connections (10 s at most), or -1.
 */
pid_t xensim_xenstored_start(const char *xenstored, const char *shim,
                             const char *run_dir, const char *log_file,
                             const char *trace_file, GError **errp);

/* SIGTERM, wait up to 5 s, then SIGKILL. True if it exited on SIGTERM. */
bool xensim_xenstored_stop(pid_t pid);

/*
 * Defaults: $XENSIM_SHIM or the build tree's libxensim-shim.so;
 * $XENSIM_XENSTORED or the get-xenstored.sh unpack in build/xen-utils.
 */
const char *xensim_ts_default_shim(void);
const char *xensim_ts_default_xenstored(void);
/* $XENSIM_BLKTAP or the build tree's build/blktap/inst. */
const char *xensim_ts_default_blktap(void);

#endif /* XENSIM_TOOLSTACK_H */
