/*
 * xensim toolstack: Debian's xenstored under the libxen shim.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * xenstored runs in the foreground (-N) as dom0's store would, with its
 * hypervisor side (xc, gnttab, evtchn) and the two /proc/xen files of
 * its dom0_init() served by libxensim-shim.so. It is not started with
 * -D: that would also skip the handles XS_INTRODUCE needs.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "xensim/log.h"
#include "xensim/toolstack.h"
#include "ts-int.h"

const char *xensim_ts_default_shim(void)
{
    const char *e = g_getenv("XENSIM_SHIM");

    return e ? e : XENSIM_BUILD_ROOT "/xensim/shim/libxensim-shim.so";
}

const char *xensim_ts_default_xenstored(void)
{
    const char *e = g_getenv("XENSIM_XENSTORED");

    return e ? e : XENSIM_SOURCE_ROOT
        "/build/xen-utils/usr/lib/xen-4.17/bin/xenstored";
}

int64_t ts_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

pid_t ts_spawn(char **argv, char **envp, const char *log_file,
               GError **errp)
{
    sigset_t all;
    pid_t pid;
    int log_fd, null_fd;

    log_fd = open(log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log_fd < 0) {
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "open %s: %s", log_file, g_strerror(errno));
        return -1;
    }
    null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (null_fd < 0) {
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "open /dev/null: %s", g_strerror(errno));
        close(log_fd);
        return -1;
    }
    pid = fork();
    if (pid < 0) {
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "fork: %s", g_strerror(errno));
        close(log_fd);
        close(null_fd);
        return -1;
    }
    if (pid == 0) {
        /*
         * Own process group, so that ^C reaches only the toolstack, which
         * tears down in order; die with it if it is killed.
         */
        setpgid(0, 0);
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        sigemptyset(&all);
        sigprocmask(SIG_SETMASK, &all, NULL);
        dup2(null_fd, STDIN_FILENO);
        dup2(log_fd, STDOUT_FILENO);
        dup2(log_fd, STDERR_FILENO);
        execve(argv[0], argv, envp);
        dprintf(STDERR_FILENO, "xensim: exec %s: %s\n", argv[0],
                strerror(errno));
        _exit(127);
    }
    close(log_fd);
    close(null_fd);
    return pid;
}

char *ts_preload(const char *shim)
{
    const char *first = g_getenv("XENSIM_PRELOAD");

    if (first && *first) {
        return g_strdup_printf("%s %s", first, shim);
    }
    return g_strdup(shim);
}

bool ts_stop_child(pid_t pid, int *status, int timeout_ms)
{
    int64_t deadline;
    int st = 0;
    pid_t r;

    if (kill(pid, SIGTERM) < 0 && errno != ESRCH) {
        return false;
    }
    deadline = ts_now_ms() + timeout_ms;
    for (;;) {
        r = waitpid(pid, &st, WNOHANG);
        if (r == pid || (r < 0 && errno == ECHILD)) {
            break;
        }
        if (ts_now_ms() >= deadline) {
            xensim_log(XENSIM_LOG_WARN, "pid %d ignored SIGTERM, killing",
                       (int)pid);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            if (status) {
                *status = st;
            }
            return false;
        }
        g_usleep(10 * 1000);
    }
    if (status) {
        *status = st;
    }
    return true;
}

char *ts_status_string(int status)
{
    if (WIFEXITED(status)) {
        return g_strdup_printf("exited with status %d", WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        return g_strdup_printf("killed by signal %d (%s)", WTERMSIG(status),
                               strsignal(WTERMSIG(status)));
    }
    return g_strdup_printf("status 0x%x", status);
}

/* Can we connect to the unix socket at @path? */
static bool socket_accepts(const char *path)
{
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int fd;
    bool ok;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        return false;
    }
    strcpy(sa.sun_path, path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return false;
    }
    ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
    close(fd);
    return ok;
}

pid_t xensim_xenstored_start(const char *xenstored, const char *shim,
                             const char *run_dir, const char *log_file,
                             const char *trace_file, GError **errp)
{
    g_autofree char *sock = g_strdup_printf("%s/socket", run_dir);
    g_autoptr(GPtrArray) args = g_ptr_array_new();
    g_auto(GStrv) env = g_get_environ();
    g_autofree char *preload = NULL;
    int64_t deadline;
    pid_t pid;
    int st;

    if (!g_file_test(xenstored, G_FILE_TEST_IS_EXECUTABLE)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "no xenstored at %s (run "
                    "xensim/toolstack/get-xenstored.sh build/xen-utils)",
                    xenstored);
        return -1;
    }
    if (!g_file_test(shim, G_FILE_TEST_EXISTS)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NOENT,
                    "no libxen shim at %s", shim);
        return -1;
    }
    preload = ts_preload(shim);
    env = g_environ_setenv(env, "LD_PRELOAD", preload, TRUE);
    env = g_environ_setenv(env, "XENSIM_DIR", run_dir, TRUE);
    env = g_environ_setenv(env, "XENSTORED_RUNDIR", run_dir, TRUE);
    env = g_environ_setenv(env, "XENSTORED_PATH", sock, TRUE);

    g_ptr_array_add(args, (char *)xenstored);
    g_ptr_array_add(args, "-N");
    if (trace_file) {
        g_ptr_array_add(args, "-T");
        g_ptr_array_add(args, (char *)trace_file);
    }
    g_ptr_array_add(args, NULL);

    pid = ts_spawn((char **)args->pdata, env, log_file, errp);
    if (pid < 0) {
        return -1;
    }

    deadline = ts_now_ms() + 10000;
    while (!socket_accepts(sock)) {
        if (waitpid(pid, &st, WNOHANG) == pid) {
            g_autofree char *s = ts_status_string(st);

            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "xenstored %s before accepting connections "
                        "(see %s)", s, log_file);
            return -1;
        }
        if (ts_now_ms() >= deadline) {
            ts_stop_child(pid, NULL, 1000);
            g_set_error(errp, G_SPAWN_ERROR, G_SPAWN_ERROR_FAILED,
                        "xenstored socket %s not accepting after 10 s "
                        "(see %s)", sock, log_file);
            return -1;
        }
        g_usleep(5 * 1000);
    }
    xensim_log(XENSIM_LOG_INFO, "xenstored pid %d on %s", (int)pid, sock);
    return pid;
}

bool xensim_xenstored_stop(pid_t pid)
{
    if (pid <= 0) {
        return true;
    }
    return ts_stop_child(pid, NULL, 5000);
}
