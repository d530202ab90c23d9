/*
 * xensim toolstack: blktap's dom0 side for vbd3 disks, run as XenServer
 * runs it (toolstack.h, "blktap"): a private mount namespace, cpumond and
 * tapback started after xenstored, and a tapdisk per disk made with
 * tap-ctl as SM's blktap2.py makes it.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xensim/log.h"
#include "xensim/toolstack.h"
#include "ts-int.h"

/* blktap's fixed paths (include/blktap.h, tapdisk-log.h, cpumond.h). */
#define HOST_SHM            "/dev/shm"
#define TLOG_DIR            "/var/log/blktap"
#define CPUMOND_SHM         HOST_SHM "/cpu_util_monitor"
#define NBD_PATH_FMT        "/run/blktap-control/nbd%d.%d"

struct ts_blktap {
    char *prefix;
    char *log_dir;
    char **env;                 /* of tap-ctl, tapback, cpumond */
    int host_shm_fd;            /* O_PATH: the host's /dev/shm, hidden */
    pid_t syslog;               /* the run's syslog sink */
    pid_t cpumond;
    pid_t tapback;
};

const char *xensim_ts_default_blktap(void)
{
    const char *e = g_getenv("XENSIM_BLKTAP");

    return e ? e : XENSIM_SOURCE_ROOT "/build/blktap/inst";
}

static bool bt_errno(GError **errp, const char *fmt, const char *arg)
{
    int e = errno;
    g_autofree char *what = g_strdup_printf(fmt, arg);

    g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(e), "%s: %s",
                what, g_strerror(e));
    return false;
}

static char *bt_bin(const ts_blktap *b, const char *rel)
{
    return g_build_filename(b->prefix, rel, NULL);
}

/* Bind-mount @src over @dst (which exists). */
static bool bt_bind(const char *src, const char *dst, GError **errp)
{
    if (mount(src, dst, NULL, MS_BIND, NULL) < 0) {
        return bt_errno(errp, "bind mount over %s", dst);
    }
    return true;
}

bool ts_blktap_expose(ts_blktap *b, const char *path, GError **errp)
{
    g_autofree char *proc = NULL;
    g_autofree char *parent = NULL;
    const char *rel;
    struct stat st;
    bool ok;
    int fd, f;

    if (!g_str_has_prefix(path, HOST_SHM "/")) {
        return true;            /* the namespace sees it as the host does */
    }
    rel = path + strlen(HOST_SHM "/");
    fd = openat(b->host_shm_fd, rel, O_PATH | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0) {
            close(fd);
        }
        return bt_errno(errp, "host %s", path);
    }
    parent = g_path_get_dirname(path);
    if (g_mkdir_with_parents(parent, 0755) < 0) {
        close(fd);
        return bt_errno(errp, "mkdir %s", parent);
    }
    if (S_ISDIR(st.st_mode)) {
        ok = mkdir(path, 0700) == 0 || errno == EEXIST;
    } else {
        f = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
        ok = f >= 0;
        if (ok) {
            close(f);
        }
    }
    if (!ok) {
        close(fd);
        return bt_errno(errp, "mountpoint %s", path);
    }
    proc = g_strdup_printf("/proc/self/fd/%d", fd);
    ok = bt_bind(proc, path, errp);
    close(fd);
    return ok;
}

void ts_blktap_remove_exposed_dir(ts_blktap *b, const char *path)
{
    if (!g_str_has_prefix(path, HOST_SHM "/")) {
        return;
    }
    umount2(path, MNT_DETACH);
    if (unlinkat(b->host_shm_fd, path + strlen(HOST_SHM "/"),
                 AT_REMOVEDIR) < 0) {
        xensim_log(XENSIM_LOG_WARN, "rmdir host %s: %s", path,
                   g_strerror(errno));
    }
}

/*
 * The mount namespace: / private (nothing propagates back to the host),
 * then /run, /var/log/blktap and /dev/shm as toolstack.h says.
 */
static bool bt_unshare(ts_blktap *b, const char *run_dir, GError **errp)
{
    g_autofree char *run = g_build_filename(run_dir, "run", NULL);
    g_autofree char *logs = g_build_filename(b->log_dir, "blktap", NULL);

    if (unshare(CLONE_NEWNS) < 0) {
        return bt_errno(errp, "unshare(CLONE_NEWNS)%s",
                        errno == EPERM ? " (blktap's runs need root)" : "");
    }
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0) {
        return bt_errno(errp, "making %s a private mount", "/");
    }
    if (g_mkdir_with_parents(run, 0755) < 0 ||
        g_mkdir_with_parents(logs, 0755) < 0 ||
        g_mkdir_with_parents(TLOG_DIR, 0755) < 0) {
        return bt_errno(errp, "mkdir %s", "(run, logs, " TLOG_DIR ")");
    }
    if (!bt_bind(run, "/run", errp) || !bt_bind(logs, TLOG_DIR, errp)) {
        return false;
    }
    b->host_shm_fd = open(HOST_SHM, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (b->host_shm_fd < 0) {
        return bt_errno(errp, "open %s", HOST_SHM);
    }
    if (mount("xensim-shm", HOST_SHM, "tmpfs", MS_NOSUID | MS_NODEV,
              "mode=1777,size=64m") < 0) {
        return bt_errno(errp, "mount tmpfs on %s", HOST_SHM);
    }
    return ts_blktap_expose(b, run_dir, errp);
}

ts_blktap *ts_blktap_new(const char *prefix, const char *run_dir,
                         const char *log_dir, GError **errp)
{
    static const char *const bins[] = { "sbin/tap-ctl", "libexec/tapdisk",
                                        "bin/tapback", "bin/cpumond" };
    ts_blktap *b = g_new0(ts_blktap, 1);
    size_t i;

    b->prefix = g_strdup(prefix ? prefix : xensim_ts_default_blktap());
    b->log_dir = g_strdup(log_dir);
    b->host_shm_fd = -1;
    for (i = 0; i < G_N_ELEMENTS(bins); i++) {
        g_autofree char *p = bt_bin(b, bins[i]);

        if (!g_file_test(p, G_FILE_TEST_IS_EXECUTABLE)) {
            g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                        "no %s (scripts/build-blktap.sh builds blktap)", p);
            goto fail;
        }
    }
    if (!bt_unshare(b, run_dir, errp)) {
        goto fail;
    }
    /* tap-ctl spawn's tapdisk daemonizes: keep it as our child. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0) {
        bt_errno(errp, "%s", "PR_SET_CHILD_SUBREAPER");
        goto fail;
    }
    return b;

fail:
    ts_blktap_free(b);
    return NULL;
}

/* g_spawn_sync's child: the signals the toolstack blocks, unblocked. */
static void bt_child_setup(gpointer data)
{
    sigset_t none;

    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
}

/*
 * Run `tap-ctl ARGS...`; its stdout (trimmed) in *@out if wanted. Every
 * command and its output go to <log dir>/tap-ctl.log.
 */
static bool bt_tapctl(ts_blktap *b, char **out, GError **errp, ...)
{
    g_autoptr(GPtrArray) argv = g_ptr_array_new_with_free_func(g_free);
    g_autofree char *sout = NULL;
    g_autofree char *serr = NULL;
    g_autofree char *cmd = NULL;
    g_autofree char *log = g_build_filename(b->log_dir, "tap-ctl.log", NULL);
    g_autoptr(GError) err = NULL;
    FILE *lf;
    const char *a;
    va_list ap;
    int status = -1;
    bool ok;

    g_ptr_array_add(argv, bt_bin(b, "sbin/tap-ctl"));
    va_start(ap, errp);
    while ((a = va_arg(ap, const char *))) {
        g_ptr_array_add(argv, g_strdup(a));
    }
    va_end(ap);
    g_ptr_array_add(argv, NULL);
    cmd = g_strjoinv(" ", (char **)argv->pdata);

    ok = g_spawn_sync(NULL, (char **)argv->pdata, b->env, G_SPAWN_DEFAULT,
                      bt_child_setup, NULL, &sout, &serr, &status, &err) &&
         g_spawn_check_wait_status(status, &err);
    lf = fopen(log, "a");
    if (lf) {
        fprintf(lf, "$ %s\n%s%s%s", cmd, sout ? sout : "", serr ? serr : "",
                ok ? "" : "(failed)\n");
        fclose(lf);
    }
    if (!ok) {
        g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                    "%s: %s%s%s (see %s)", cmd, err->message,
                    serr && *serr ? ": " : "", serr ? g_strstrip(serr) : "",
                    log);
        return false;
    }
    if (out) {
        *out = g_strdup(g_strstrip(sout));
    }
    return true;
}

/*
 * The run's syslog: a datagram socket at @sock (libxensim-shim sends
 * blktap's syslog there, dom0.c) read by a child that appends each
 * message to @log_file as "HH:MM:SS.mmm <PRI>IDENT[PID]: MSG".
 */
static pid_t bt_syslog_start(const char *sock, const char *log_file,
                             GError **errp)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char buf[4096];
    sigset_t none;
    pid_t pid;
    int fd, out;

    if (strlen(sock) >= sizeof(sa.sun_path)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NAMETOOLONG,
                    "syslog socket path %s too long", sock);
        return -1;
    }
    strcpy(sa.sun_path, sock);
    fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    out = open(log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0 || out < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa))) {
        bt_errno(errp, "syslog sink %s", sock);
        goto fail;
    }
    pid = fork();
    if (pid < 0) {
        bt_errno(errp, "%s", "fork");
        goto fail;
    }
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        for (;;) {
            struct timespec ts;
            struct tm tm;
            char stamp[32];
            ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);

            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                _exit(0);
            }
            while (n > 0 && buf[n - 1] == '\n') {
                n--;
            }
            clock_gettime(CLOCK_REALTIME, &ts);
            localtime_r(&ts.tv_sec, &tm);
            strftime(stamp, sizeof(stamp), "%H:%M:%S", &tm);
            dprintf(out, "%s.%03ld %.*s\n", stamp, ts.tv_nsec / 1000000,
                    (int)n, buf);
        }
    }
    close(fd);
    close(out);
    return pid;

fail:
    if (fd >= 0) {
        close(fd);
    }
    if (out >= 0) {
        close(out);
    }
    return -1;
}

/* Wait up to @timeout_ms for @path to exist. */
static bool bt_wait_path(const char *path, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;

    while (!g_file_test(path, G_FILE_TEST_EXISTS)) {
        if (ts_now_ms() >= deadline) {
            return false;
        }
        g_usleep(5 * 1000);
    }
    return true;
}

bool ts_blktap_start(ts_blktap *b, const char *run_dir, const char *shim,
                     const char *socket, GError **errp)
{
    g_autofree char *cpumond = bt_bin(b, "bin/cpumond");
    g_autofree char *tapback = bt_bin(b, "bin/tapback");
    g_autofree char *bindir = bt_bin(b, "bin");
    g_autofree char *path = g_strdup_printf("%s:%s", bindir,
                                            g_getenv("PATH") ?: "/usr/bin:/bin");
    g_autofree char *preload = ts_preload(shim);
    g_autofree char *clog = g_build_filename(b->log_dir, "cpumond.log", NULL);
    g_autofree char *tlog = g_build_filename(b->log_dir, "tapback.log", NULL);
    g_autofree char *slog = g_build_filename(b->log_dir, "syslog.log", NULL);
    g_autofree char *sock = g_build_filename(run_dir, "syslog", NULL);
    char *cargv[] = { cpumond, NULL };
    /* Foreground (-d); the master forks a tapback -x <domid> per guest. */
    char *targv[] = { tapback, "-d", g_getenv("XENSIM_TAPBACK_VERBOSE") ? "-v" : NULL, NULL };

    b->env = g_get_environ();
    b->env = g_environ_setenv(b->env, "LD_PRELOAD", preload, TRUE);
    b->env = g_environ_setenv(b->env, "XENSIM_DIR", run_dir, TRUE);
    b->env = g_environ_setenv(b->env, "XENSTORED_PATH", socket, TRUE);
    b->env = g_environ_setenv(b->env, "PATH", path, TRUE);
    b->env = g_environ_setenv(b->env, "XENSIM_SYSLOG", sock, TRUE);

    b->syslog = bt_syslog_start(sock, slog, errp);
    if (b->syslog < 0) {
        b->syslog = 0;
        return false;
    }

    /* tapdisk reads cpumond's page once, at start: it must be there. */
    b->cpumond = ts_spawn(cargv, b->env, clog, errp);
    if (b->cpumond < 0) {
        b->cpumond = 0;
        return false;
    }
    if (!bt_wait_path(CPUMOND_SHM, 5000)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "cpumond made no %s in 5 s (see %s)", CPUMOND_SHM, clog);
        return false;
    }
    b->tapback = ts_spawn(targv, b->env, tlog, errp);
    if (b->tapback < 0) {
        b->tapback = 0;
        return false;
    }
    xensim_log(XENSIM_LOG_INFO, "blktap: cpumond pid %d, tapback pid %d",
               (int)b->cpumond, (int)b->tapback);
    return true;
}

bool ts_blktap_attach(ts_blktap *b, const char *image, bool readonly,
                      pid_t *pid, int *minor, char **nbd_path,
                      GError **errp)
{
    g_autofree char *dev = NULL;
    g_autofree char *pid_s = NULL;
    g_autofree char *minor_s = NULL;
    g_autofree char *args = g_strdup_printf("aio:%s", image);
    const char *p;
    char *end;
    long m, t;

    if (!ts_blktap_expose(b, image, errp)) {
        return false;
    }
    /* blktap2.py Tapdisk.launch_on_tap(): allocate, spawn, attach, open. */
    if (!bt_tapctl(b, &dev, errp, "allocate", NULL)) {
        return false;
    }
    p = strrchr(dev, '-');
    m = p ? strtol(p + 1, &end, 10) : -1;
    if (!p || *end || m < 0) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "tap-ctl allocate: no minor in '%s'", dev);
        return false;
    }
    minor_s = g_strdup_printf("%ld", m);
    if (!bt_tapctl(b, &pid_s, errp, "spawn", NULL)) {
        return false;
    }
    t = strtol(pid_s, &end, 10);
    if (*end || t <= 0) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "tap-ctl spawn: no pid in '%s'", pid_s);
        return false;
    }
    *pid = t;
    *minor = m;
    if (!bt_tapctl(b, NULL, errp, "attach", "-p", pid_s, "-m", minor_s,
                   NULL) ||
        !bt_tapctl(b, NULL, errp, "open", "-p", pid_s, "-m", minor_s, "-a",
                   args, readonly ? "-R" : NULL, NULL)) {
        return false;
    }
    *nbd_path = g_strdup_printf(NBD_PATH_FMT, (int)*pid, *minor);
    xensim_log(XENSIM_LOG_INFO, "blktap: tapdisk pid %d minor %d serves %s",
               (int)*pid, *minor, image);
    return true;
}

/* Wait up to @timeout_ms for @pid to be gone; reap it if it is ours. */
static bool bt_wait_gone(pid_t pid, int timeout_ms)
{
    int64_t deadline = ts_now_ms() + timeout_ms;
    int st;

    for (;;) {
        pid_t r = waitpid(pid, &st, WNOHANG);

        if (r == pid || (r < 0 && errno == ECHILD && kill(pid, 0) < 0)) {
            return true;
        }
        if (ts_now_ms() >= deadline) {
            return false;
        }
        g_usleep(5 * 1000);
    }
}

bool ts_blktap_detach(ts_blktap *b, pid_t pid, int minor, GError **errp)
{
    g_autofree char *pid_s = g_strdup_printf("%d", (int)pid);
    g_autofree char *minor_s = g_strdup_printf("%d", minor);
    bool ok;

    /* SM's detach: close (disconnects any ring), detach, free. */
    ok = bt_tapctl(b, NULL, errp, "close", "-p", pid_s, "-m", minor_s, NULL) &&
         bt_tapctl(b, NULL, errp, "detach", "-p", pid_s, "-m", minor_s,
                   NULL) &&
         bt_tapctl(b, NULL, errp, "free", "-m", minor_s, NULL);
    /* With its last VBD gone tapdisk exits (tapdisk_server_check_state). */
    if (!bt_wait_gone(pid, 5000)) {
        xensim_log(XENSIM_LOG_WARN, "tapdisk %d still there, killing",
                   (int)pid);
        kill(pid, SIGKILL);
        bt_wait_gone(pid, 5000);
        if (ok) {
            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "tapdisk %d did not exit after its detach", (int)pid);
        }
        ok = false;
    }
    return ok;
}

bool ts_blktap_check(ts_blktap *b, GError **errp)
{
    struct {
        pid_t *pid;
        const char *name;
    } d[] = { { &b->cpumond, "cpumond" }, { &b->tapback, "tapback" } };
    size_t i;
    int st;

    for (i = 0; i < G_N_ELEMENTS(d); i++) {
        if (*d[i].pid > 0 && waitpid(*d[i].pid, &st, WNOHANG) == *d[i].pid) {
            g_autofree char *s = ts_status_string(st);

            *d[i].pid = 0;
            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "%s %s (see %s/%s.log)", d[i].name, s, b->log_dir,
                        d[i].name);
            return false;
        }
    }
    return true;
}

bool ts_blktap_stop(ts_blktap *b, GError **errp)
{
    bool ok = true;
    int st;

    if (!b) {
        return true;
    }
    if (b->tapback > 0) {
        /*
         * The master ignores SIGTERM while it has slaves, a slave while
         * it has devices: the whole group goes, then what stays is killed.
         */
        kill(-b->tapback, SIGTERM);
        if (!bt_wait_gone(b->tapback, 1000)) {
            kill(-b->tapback, SIGKILL);
            bt_wait_gone(b->tapback, 5000);
        }
        while (waitpid(-b->tapback, &st, WNOHANG) > 0) {
            /* slaves the master left behind (we are their reaper) */
        }
        b->tapback = 0;
    }
    if (b->cpumond > 0) {
        /* SIGINT: cpumond's own clean exit. */
        kill(b->cpumond, SIGINT);
        if (!bt_wait_gone(b->cpumond, 3000)) {
            kill(b->cpumond, SIGKILL);
            bt_wait_gone(b->cpumond, 5000);
            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "cpumond needed SIGKILL");
            ok = false;
        }
        b->cpumond = 0;
    }
    if (b->syslog > 0) {
        kill(b->syslog, SIGTERM);
        bt_wait_gone(b->syslog, 5000);
        b->syslog = 0;
    }
    return ok;
}

void ts_blktap_free(ts_blktap *b)
{
    if (!b) {
        return;
    }
    if (b->host_shm_fd >= 0) {
        close(b->host_shm_fd);
    }
    g_strfreev(b->env);
    g_free(b->prefix);
    g_free(b->log_dir);
    g_free(b);
}
