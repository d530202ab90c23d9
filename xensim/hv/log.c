/*
 * xensim levelled logger (see xensim/log.h).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "xensim/log.h"

static int log_threshold = -1;

static int log_parse_threshold(void)
{
    static const char *const names[] = { "err", "warn", "info", "debug" };
    const char *env = getenv("XENSIM_LOG");
    int i;

    if (env) {
        for (i = 0; i < 4; i++) {
            if (!strcmp(env, names[i])) {
                return i;
            }
        }
    }
    return XENSIM_LOG_WARN;
}

bool xensim_log_enabled(int level)
{
    int t = __atomic_load_n(&log_threshold, __ATOMIC_RELAXED);

    if (t < 0) {
        t = log_parse_threshold();
        __atomic_store_n(&log_threshold, t, __ATOMIC_RELAXED);
    }
    return level <= t;
}

void xensim_log(int level, const char *fmt, ...)
{
    int saved_errno = errno;
    char buf[1024];
    va_list ap;
    int n, m;

    if (!xensim_log_enabled(level)) {
        return;
    }
    n = snprintf(buf, sizeof(buf), "xensim[%d]: ", (int)getpid());
    va_start(ap, fmt);
    m = vsnprintf(buf + n, sizeof(buf) - n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) {
        m = 0;
    }
    n += m;
    if (n > (int)sizeof(buf) - 2) {
        n = sizeof(buf) - 2;
    }
    if (n == 0 || buf[n - 1] != '\n') {
        buf[n++] = '\n';
    }
    if (write(STDERR_FILENO, buf, n) < 0) {
        /* nowhere left to report it */
    }
    errno = saved_errno;
}
