/*
 * xensim: run a simulated Xen host with a PV guest disk served by QEMU.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   xensim run --qemu PATH --disk IMAGE [--format raw|qcow2] [--domid N]
 *              [--vdev xvda] [--mem MB] [--name NAME] [--readonly]
 *              [--direct-io-safe] [--qemu-arg ARG]... [--keep] [--log-dir DIR]
 *              [--timeout MS] [--guest-disk IMAGE]... [-- CMD ARGS...]
 *   xensim run --backend vbd3 --disk IMAGE [--polling-duration US]
 *              [--polling-idle-threshold PCT] [--blktap PREFIX] ...
 *   xensim host [--keep] [--log-dir DIR] [-- CMD ARGS...]
 *
 * "run" creates the host, starts xenstored, creates the domain, adds the
 * disk as libxl does for backendtype=qdisk, launches QEMU with libxl's
 * command line (each --qemu-arg is appended as device_model_args_pv)
 * and waits for the backend to reach InitWait. With --backend vbd3 the
 * disk is served as XenServer serves it instead: the host runs blktap
 * (cpumond, tapback; toolstack.h), the disk gets a tapdisk from tap-ctl
 * and xenopsd's vbd3 nodes, and QEMU is started only if --qemu is given.
 * Each --guest-disk adds one more guest on the same host and xenstored
 * (the next domid, its own disk served the same way, with its own QEMU
 * or tapdisk), as a dom0 serving several guests: XENSIM_DOMIDS and
 * XENSIM_QEMU_PIDS list them all (the first guest's variables are as
 * without it). "host" stops after xenstored. Both then print KEY=VALUE
 * lines (for eval) and either run CMD with those variables exported and
 * tear down when it exits (exiting with its status), or serve until
 * SIGINT/SIGTERM; a blktap run also stops, with status 1, if a blktap
 * daemon or a tapdisk dies.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "xensim/log.h"
#include "xensim/toolstack.h"

static char *opt_qemu;
static char *opt_disk;
static char *opt_format;
static char *opt_vdev;
static char *opt_name;
static char *opt_log_dir;
static char *opt_backend;
static char *opt_blktap;
static char **opt_qemu_args;
static char **opt_guest_disks;
static int opt_domid = XENSIM_TS_DEFAULT_DOMID;
static int opt_mem = XENSIM_TS_DEFAULT_MEM_MB;
static int opt_timeout = 30000;
/* xapi's defaults (Xapi_globs.default_vbd3_polling_*) */
static int opt_polling_duration = 1000;
static int opt_polling_idle_threshold = 50;
static gboolean opt_keep;
static gboolean opt_readonly;
static gboolean opt_direct_io_safe;
static gboolean opt_trace;

static GOptionEntry run_entries[] = {
    { "qemu", 0, 0, G_OPTION_ARG_FILENAME, &opt_qemu,
      "QEMU binary (qemu-system-i386 built with Xen)", "PATH" },
    { "disk", 0, 0, G_OPTION_ARG_FILENAME, &opt_disk,
      "disk image served to the guest", "IMAGE" },
    { "format", 0, 0, G_OPTION_ARG_STRING, &opt_format,
      "image format: raw (default), qcow2, qcow, vhd, qed", "FMT" },
    { "domid", 0, 0, G_OPTION_ARG_INT, &opt_domid,
      "guest domain id (default 1)", "N" },
    { "vdev", 0, 0, G_OPTION_ARG_STRING, &opt_vdev,
      "guest device name (default xvda)", "NAME" },
    { "mem", 0, 0, G_OPTION_ARG_INT, &opt_mem,
      "guest memory in MiB (default 64)", "MB" },
    { "name", 0, 0, G_OPTION_ARG_STRING, &opt_name,
      "guest name (default xensim-<domid>)", "NAME" },
    { "readonly", 0, 0, G_OPTION_ARG_NONE, &opt_readonly,
      "attach the disk read-only (mode r)", NULL },
    { "direct-io-safe", 0, 0, G_OPTION_ARG_NONE, &opt_direct_io_safe,
      "qdisk: xl's direct-io-safe (QEMU opens it O_DIRECT, aio=native)",
      NULL },
    { "qemu-arg", 0, 0, G_OPTION_ARG_STRING_ARRAY, &opt_qemu_args,
      "extra QEMU argument, as libxl's device_model_args_pv", "ARG" },
    { "backend", 0, 0, G_OPTION_ARG_STRING, &opt_backend,
      "qdisk (default: QEMU, as libxl) or vbd3 (tapdisk, as XenServer)",
      "TYPE" },
    { "polling-duration", 0, 0, G_OPTION_ARG_INT, &opt_polling_duration,
      "vbd3: the VBD's polling-duration in us (default 1000)", "US" },
    { "polling-idle-threshold", 0, 0, G_OPTION_ARG_INT,
      &opt_polling_idle_threshold,
      "vbd3: polling-idle-threshold, % of idle dom0 CPU (default 50)",
      "PCT" },
    { "blktap", 0, 0, G_OPTION_ARG_FILENAME, &opt_blktap,
      "vbd3: blktap install prefix (default build/blktap/inst)", "DIR" },
    { "guest-disk", 0, 0, G_OPTION_ARG_FILENAME_ARRAY, &opt_guest_disks,
      "one more guest (next domid) with this disk and its own QEMU",
      "IMAGE" },
    { "timeout", 0, 0, G_OPTION_ARG_INT, &opt_timeout,
      "ms to wait for the backend's InitWait (default 30000)", "MS" },
    { "keep", 0, 0, G_OPTION_ARG_NONE, &opt_keep,
      "keep the run dir (/dev/shm/xensim-*) at exit", NULL },
    { "log-dir", 0, 0, G_OPTION_ARG_FILENAME, &opt_log_dir,
      "log directory of this run (default build/runs/<time>-<pid>)",
      "DIR" },
    { "xenstored-trace", 0, 0, G_OPTION_ARG_NONE, &opt_trace,
      "trace xenstored's traffic to <log dir>/xenstored-trace.log", NULL },
    { NULL }
};

/* Print KEY=VALUE, quoted for the shell only when needed. */
static void print_var(const char *key, const char *value)
{
    const char *p;

    for (p = value; *p; p++) {
        if (!g_ascii_isalnum(*p) && !strchr("_/.:,+-=@%", *p)) {
            g_autofree char *q = g_shell_quote(value);

            printf("%s=%s\n", key, q);
            return;
        }
    }
    printf("%s=%s\n", key, value);
}

static void serve_sigset(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGCHLD);
}

/*
 * Run @cmd with @vars exported, or wait for SIGINT/SIGTERM when @cmd is
 * empty. Returns the exit status to use.
 */
static int serve(xensim_ts *ts, char **cmd, char **vars, bool blktap)
{
    sigset_t set;
    struct signalfd_siginfo si;
    pid_t child = 0;
    int sfd, status;

    /* Blocked since main() started; pending ones are read here. */
    serve_sigset(&set);
    sfd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        fprintf(stderr, "xensim: signalfd: %s\n", strerror(errno));
        return 1;
    }

    if (cmd && cmd[0]) {
        child = fork();
        if (child < 0) {
            fprintf(stderr, "xensim: fork: %s\n", strerror(errno));
            return 1;
        }
        if (child == 0) {
            sigprocmask(SIG_UNBLOCK, &set, NULL);
            for (; *vars; vars += 2) {
                g_setenv(vars[0], vars[1], TRUE);
            }
            execvp(cmd[0], cmd);
            fprintf(stderr, "xensim: exec %s: %s\n", cmd[0],
                    strerror(errno));
            _exit(127);
        }
    }

    for (;;) {
        if (read(sfd, &si, sizeof(si)) != sizeof(si)) {
            if (errno == EINTR) {
                continue;
            }
            fprintf(stderr, "xensim: read signalfd: %s\n", strerror(errno));
            return 1;
        }
        if (si.ssi_signo == SIGCHLD) {
            if (child > 0 && waitpid(child, &status, WNOHANG) == child) {
                if (WIFEXITED(status)) {
                    return WEXITSTATUS(status);
                }
                return 128 + WTERMSIG(status);
            }
            /* A blktap daemon or the tapdisk died: report and stop. */
            if (blktap) {
                g_autoptr(GError) err = NULL;

                if (!xensim_ts_check(ts, &err)) {
                    fprintf(stderr, "xensim: %s\n", err->message);
                    if (child > 0) {
                        kill(child, SIGTERM);
                    }
                    return 1;
                }
            }
            /* QEMU or xenstored died under us: report and stop. */
            if (xensim_ts_xenstored_pid(ts) > 0 &&
                waitpid(xensim_ts_xenstored_pid(ts), &status, WNOHANG) > 0) {
                fprintf(stderr, "xensim: xenstored exited, see %s\n",
                        xensim_ts_log_dir(ts));
                if (child > 0) {
                    kill(child, SIGTERM);
                }
                return 1;
            }
            continue;
        }
        /* SIGINT/SIGTERM */
        if (child > 0) {
            /* CMD shares our process group and got ^C itself. */
            if (si.ssi_signo == SIGTERM) {
                kill(child, SIGTERM);
            }
            continue;
        }
        return 0;
    }
}

/*
 * The --guest-disk guests: domains opt_domid + 1, + 2, ... (named
 * xensim-<domid>), each with its disk (served as @first is: same
 * backend, format, vdev and mode, so the same @devid) and its own QEMU
 * when --qemu is given, all started before any is waited for. Adds
 * XENSIM_DOMIDS and XENSIM_QEMU_PIDS (space-separated, the first guest
 * first; 0 for a guest without QEMU) to @vars.
 */
static bool start_more_guests(xensim_ts *ts, const xensim_ts_disk *first,
                              int devid, GPtrArray *vars, GError **errp)
{
    g_autoptr(GString) domids = g_string_new(NULL);
    g_autoptr(GString) pids = g_string_new(NULL);
    guint n = opt_guest_disks ? g_strv_length(opt_guest_disks) : 0;
    g_autofree char *first_pid = NULL;
    g_autofree char *pid_path = g_strdup_printf(
        "/local/domain/%d/image/device-model-pid", opt_domid);
    unsigned int len;
    guint i;

    if (opt_domid + n >= XENSIM_MAX_DOMAINS) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%u guests from domid %d: domids end at %u", n + 1,
                    opt_domid, XENSIM_MAX_DOMAINS - 1);
        return false;
    }
    first_pid = xs_read(xensim_ts_xs(ts), XBT_NULL, pid_path, &len);
    g_string_append_printf(domids, "%d", opt_domid);
    g_string_append(pids, first_pid ? first_pid : "0");
    for (i = 0; i < n; i++) {
        uint32_t domid = opt_domid + 1 + i;
        g_autofree char *name = g_strdup_printf("xensim-%u", domid);
        xensim_ts_disk disk = *first;
        int id;
        pid_t pid = 0;

        disk.target = opt_guest_disks[i];
        if (!xensim_ts_domain_create(ts, domid, name, opt_mem, errp) ||
            !xensim_ts_disk_add(ts, domid, &disk, &id, errp)) {
            return false;
        }
        if (opt_qemu) {
            pid = xensim_ts_qemu_start(ts, domid, opt_qemu,
                                       (const char *const *)opt_qemu_args,
                                       errp);
            if (pid < 0) {
                return false;
            }
        }
        g_string_append_printf(domids, " %u", domid);
        g_string_append_printf(pids, " %d", (int)pid);
    }
    for (i = 0; i < n; i++) {
        if (!xensim_ts_wait_backend_ready(ts, opt_domid + 1 + i, devid,
                                          opt_timeout, errp)) {
            return false;
        }
    }
    g_ptr_array_add(vars, g_strdup("XENSIM_DOMIDS"));
    g_ptr_array_add(vars, g_strdup(domids->str));
    g_ptr_array_add(vars, g_strdup("XENSIM_QEMU_PIDS"));
    g_ptr_array_add(vars, g_strdup(pids->str));
    return true;
}

static int usage(GOptionContext *ctx)
{
    g_autofree char *help = g_option_context_get_help(ctx, TRUE, NULL);

    fputs(help, stderr);
    return 2;
}

int main(int argc, char **argv)
{
    g_autoptr(GOptionContext) ctx = NULL;
    g_autoptr(GError) err = NULL;
    g_autoptr(GPtrArray) vars = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *name = NULL;
    g_autofree char *devid_s = NULL;
    g_autofree char *domid_s = NULL;
    g_autofree char *qmp = NULL;
    g_autofree char *be = NULL;
    g_autofree char *fe = NULL;
    g_autofree char *tapdisk_s = NULL;
    g_autofree char *minor_s = NULL;
    xensim_ts_opts opts = { 0 };
    xensim_ts_disk disk = { 0 };
    xensim_ts *ts;
    char **cmd = NULL;
    sigset_t sigs;
    bool run, vbd3 = false;
    pid_t tapdisk;
    int devid = -1, minor;
    int i, ret;

    /*
     * SIGINT/SIGTERM end the run through an orderly teardown (serve());
     * block them before any thread (libxenstore's reader) or child
     * exists. Children unblock them before exec.
     */
    serve_sigset(&sigs);
    sigprocmask(SIG_BLOCK, &sigs, NULL);

    /* Split off "-- CMD ARGS..." before option parsing. */
    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--")) {
            argv[i] = NULL;
            cmd = &argv[i + 1];
            argc = i;
            break;
        }
    }

    ctx = g_option_context_new("run|host [-- CMD ARGS...]");
    g_option_context_set_summary(ctx,
        "Simulated Xen host: xenstored under the libxen shim, a PV domain\n"
        "and (run) its qdisk disk served by QEMU launched as libxl does.");
    g_option_context_add_main_entries(ctx, run_entries, NULL);
    if (!g_option_context_parse(ctx, &argc, &argv, &err)) {
        fprintf(stderr, "xensim: %s\n", err->message);
        return 2;
    }
    if (argc != 2 || (strcmp(argv[1], "run") && strcmp(argv[1], "host"))) {
        return usage(ctx);
    }
    run = !strcmp(argv[1], "run");
    if (opt_backend) {
        if (!strcmp(opt_backend, "vbd3")) {
            vbd3 = true;
        } else if (strcmp(opt_backend, "qdisk")) {
            fprintf(stderr, "xensim: --backend is qdisk or vbd3\n");
            return 2;
        }
    }
    if (run && (!opt_disk || (!opt_qemu && !vbd3))) {
        fprintf(stderr, "xensim: run needs --disk and --qemu (or "
                "--backend vbd3)\n");
        return 2;
    }

    opts.blktap = vbd3;
    opts.blktap_prefix = opt_blktap;
    opts.log_dir = opt_log_dir;
    opts.keep = opt_keep;
    opts.xenstored_trace = opt_trace;
    ts = xensim_ts_start(&opts, &err);
    if (!ts) {
        fprintf(stderr, "xensim: %s\n", err->message);
        return 1;
    }

#define VAR(k, v) (g_ptr_array_add(vars, g_strdup(k)), \
                   g_ptr_array_add(vars, g_strdup(v)))
    VAR("XENSIM_DIR", xensim_ts_run_dir(ts));
    VAR("XENSTORED_PATH", xensim_ts_socket(ts));
    VAR("XENSIM_LOG_DIR", xensim_ts_log_dir(ts));

    if (run) {
        name = opt_name ? g_strdup(opt_name)
                        : g_strdup_printf("xensim-%d", opt_domid);
        disk.target = opt_disk;
        disk.format = opt_format;
        disk.vdev = opt_vdev;
        disk.readonly = opt_readonly;
        disk.direct_io_safe = opt_direct_io_safe;
        if (vbd3) {
            disk.backend = XENSIM_TS_BACKEND_VBD3;
            disk.polling_duration_us = opt_polling_duration;
            disk.polling_idle_threshold = opt_polling_idle_threshold;
        }
        if (!xensim_ts_domain_create(ts, opt_domid, name, opt_mem, &err) ||
            !xensim_ts_disk_add(ts, opt_domid, &disk, &devid, &err) ||
            (opt_qemu &&
             xensim_ts_qemu_start(ts, opt_domid, opt_qemu,
                                  (const char *const *)opt_qemu_args,
                                  &err) < 0)) {
            goto fail;
        }
        if (!start_more_guests(ts, &disk, devid, vars, &err)) {
            goto fail;
        }
        be = vbd3 ? xensim_ts_vbd3_backend_path(opt_domid, devid)
                  : xensim_ts_backend_path(opt_domid, devid);
        fe = xensim_ts_frontend_path(opt_domid, devid);
        if (!xensim_ts_wait_backend_ready(ts, opt_domid, devid, opt_timeout,
                                          &err)) {
            goto fail;
        }
        domid_s = g_strdup_printf("%d", opt_domid);
        devid_s = g_strdup_printf("%d", devid);
        VAR("XENSIM_DOMID", domid_s);
        VAR("XENSIM_DEVID", devid_s);
        if (opt_qemu) {
            qmp = xensim_ts_qmp_path(ts, opt_domid);
            VAR("XENSIM_QMP", qmp);
        }
        if (xensim_ts_tapdisk(ts, opt_domid, devid, &tapdisk, &minor)) {
            tapdisk_s = g_strdup_printf("%d", (int)tapdisk);
            minor_s = g_strdup_printf("%d", minor);
            VAR("XENSIM_TAPDISK_PID", tapdisk_s);
            VAR("XENSIM_TAPDISK_MINOR", minor_s);
        }
        VAR("XENSIM_BACKEND", be);
        VAR("XENSIM_FRONTEND", fe);
    }
#undef VAR
    g_ptr_array_add(vars, NULL);

    for (i = 0; g_ptr_array_index(vars, i); i += 2) {
        print_var(g_ptr_array_index(vars, i),
                  g_ptr_array_index(vars, i + 1));
    }
    fflush(stdout);

    ret = serve(ts, cmd, (char **)vars->pdata, vbd3);
    if (!xensim_ts_teardown(ts, &err)) {
        fprintf(stderr, "xensim: teardown: %s\n", err->message);
        if (!ret) {
            ret = 1;
        }
    }
    return ret;

fail:
    fprintf(stderr, "xensim: %s\n", err->message);
    fprintf(stderr, "xensim: logs in %s\n", xensim_ts_log_dir(ts));
    xensim_ts_teardown(ts, NULL);
    return 1;
}
