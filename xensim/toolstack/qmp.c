/*
 * xensim toolstack: a QMP client for the device model's monitor, as libxl
 * talks to it (libxl__qmp_*): one command at a time, events skipped.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "xensim/toolstack.h"

struct xensim_qmp {
    int fd;
    size_t len;
    char buf[65536];
};

static int64_t qmp_now_ms(void)
{
    return g_get_monotonic_time() / 1000;
}

/* Next line from QEMU by @deadline (ms, monotonic); g_free it. */
static char *qmp_line(xensim_qmp *q, int64_t deadline, GError **errp)
{
    for (;;) {
        char *nl = memchr(q->buf, '\n', q->len);
        struct pollfd p = { .fd = q->fd, .events = POLLIN };
        int64_t left = deadline - qmp_now_ms();
        ssize_t r;

        if (nl) {
            size_t n = nl - q->buf + 1;
            char *line = g_strndup(q->buf, n);

            memmove(q->buf, q->buf + n, q->len - n);
            q->len -= n;
            return line;
        }
        if (q->len == sizeof(q->buf)) {
            g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_FAILED,
                        "QMP line longer than %zu bytes", sizeof(q->buf));
            return NULL;
        }
        if (left <= 0 || poll(&p, 1, left) <= 0) {
            g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_AGAIN,
                        "no answer from QMP");
            return NULL;
        }
        r = read(q->fd, q->buf + q->len, sizeof(q->buf) - q->len);
        if (r <= 0) {
            g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_PIPE,
                        "QMP socket closed");
            return NULL;
        }
        q->len += r;
    }
}

xensim_qmp *xensim_qmp_open(const char *path, int timeout_ms, GError **errp)
{
    g_autofree xensim_qmp *q = g_new0(xensim_qmp, 1);
    struct sockaddr_un sa = { .sun_family = AF_UNIX };
    int64_t deadline = qmp_now_ms() + timeout_ms;
    g_autofree char *greeting = NULL;
    g_autofree char *ok = NULL;

    if (strlen(path) >= sizeof(sa.sun_path)) {
        g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_NAMETOOLONG,
                    "%s: path too long", path);
        return NULL;
    }
    strcpy(sa.sun_path, path);
    q->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    while (connect(q->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        if (qmp_now_ms() >= deadline) {
            g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                        "%s: %s", path, g_strerror(errno));
            close(q->fd);
            return NULL;
        }
        g_usleep(20000);
    }
    greeting = qmp_line(q, deadline, errp);
    ok = greeting ? xensim_qmp_call(q, "{\"execute\":\"qmp_capabilities\"}",
                                    MAX(deadline - qmp_now_ms(), 0), errp)
                  : NULL;
    if (!ok) {
        close(q->fd);
        return NULL;
    }
    return g_steal_pointer(&q);
}

char *xensim_qmp_call(xensim_qmp *q, const char *cmd, int timeout_ms,
                      GError **errp)
{
    int64_t deadline = qmp_now_ms() + timeout_ms;
    size_t len = strlen(cmd);
    char *line;

    if (write(q->fd, cmd, len) != (ssize_t)len || write(q->fd, "\n", 1) != 1) {
        g_set_error(errp, G_FILE_ERROR, g_file_error_from_errno(errno),
                    "QMP write: %s", g_strerror(errno));
        return NULL;
    }
    while ((line = qmp_line(q, deadline, errp))) {
        if (strstr(line, "\"return\"")) {
            return line;
        }
        if (strstr(line, "\"error\"")) {
            g_set_error(errp, G_FILE_ERROR, G_FILE_ERROR_FAILED, "QMP %s: %s",
                        cmd, g_strchomp(line));
            g_free(line);
            return NULL;
        }
        g_free(line);               /* an event */
    }
    return NULL;
}

void xensim_qmp_close(xensim_qmp *q)
{
    if (q) {
        close(q->fd);
        g_free(q);
    }
}
