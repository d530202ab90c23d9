/*
 * xenblk-fuzz: the QMP client (is QEMU alive and answering?).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fuzz-int.h"

/* --- QMP: is QEMU alive and answering? ----------------------------------- */

static bool qmp_line(char **line, int timeout_ms)
{
    gint64 deadline = g_get_monotonic_time() + timeout_ms * 1000ll;

    for (;;) {
        char *nl = memchr(F.qbuf, '\n', F.qlen);

        if (nl) {
            size_t n = nl - F.qbuf + 1;

            *line = g_strndup(F.qbuf, n);
            memmove(F.qbuf, F.qbuf + n, F.qlen - n);
            F.qlen -= n;
            return true;
        }
        gint64 left = (deadline - g_get_monotonic_time()) / 1000;
        struct pollfd p = { .fd = F.qmp, .events = POLLIN };

        if (left <= 0 || F.qlen == sizeof(F.qbuf) ||
            poll(&p, 1, left) <= 0) {
            return false;
        }
        ssize_t r = read(F.qmp, F.qbuf + F.qlen, sizeof(F.qbuf) - F.qlen);
        if (r <= 0) {
            return false;
        }
        F.qlen += r;
    }
}

/*
 * Send @cmd and wait for its answer (events are skipped): 1 "return",
 * 0 "error" (logged), -1 no answer in @timeout_ms.
 */
static int qmp_send(const char *cmd, int timeout_ms)
{
    char *line;

    if (F.qmp < 0 || write(F.qmp, cmd, strlen(cmd)) != (ssize_t)strlen(cmd)) {
        return -1;
    }
    while (qmp_line(&line, timeout_ms)) {
        int r = strstr(line, "\"return\"") ? 1 :
                strstr(line, "\"error\"") ? 0 : -1;

        if (r == 0) {
            fprintf(stderr, "xenblk-fuzz: [%s] QMP error: %s", F.cur, line);
        }
        g_free(line);
        if (r >= 0) {
            return r;
        }
    }
    return -1;
}

static bool qmp_cmd(const char *cmd, int timeout_ms)
{
    return qmp_send(cmd, timeout_ms) == 1;
}

bool qmp_open(void)
{
    g_autofree char *path = xensim_ts_qmp_path(F.ts, DOMID);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    char *line;
    int i;

    F.qlen = 0;
    F.qmp = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    g_strlcpy(sa.sun_path, path, sizeof(sa.sun_path));
    for (i = 0; i < 100; i++) {
        if (connect(F.qmp, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            break;
        }
        g_usleep(50000);
    }
    if (i == 100 || !qmp_line(&line, 5000)) {
        close(F.qmp);
        F.qmp = -1;
        return false;
    }
    g_free(line);
    return qmp_cmd("{\"execute\":\"qmp_capabilities\"}\n", 5000);
}

bool qemu_exited(void)
{
    g_autofree char *stat = NULL;
    g_autofree char *p = g_strdup_printf("/proc/%d/stat", F.qemu_pid);
    char *s;

    if (!g_file_get_contents(p, &stat, NULL, NULL)) {
        return true;
    }
    s = strrchr(stat, ')');
    return !s || s[2] == 'Z' || s[2] == 'X';
}

/* QEMU alive: the process runs and its monitor answers. */
bool qemu_alive(void)
{
    return !qemu_exited() &&
           qmp_cmd("{\"execute\":\"query-status\"}\n", 5000);
}

/* qmp_send() of a formatted command, 10 s to answer. */
int qmp_exec(const char *fmt, ...)
{
    g_autofree char *cmd = NULL;
    va_list ap;

    va_start(ap, fmt);
    cmd = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return qmp_send(cmd, 10000);
}
