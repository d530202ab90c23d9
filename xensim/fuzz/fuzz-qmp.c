/*
 * xenblk-fuzz: the QMP client (is QEMU alive and answering?).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz-int.h"

/* --- QMP: is QEMU alive and answering? ----------------------------------- */

/* xensim_qmp_call(): 1 "return", 0 "error" (logged), -1 no answer. */
static int qmp_send(const char *cmd, int timeout_ms)
{
    g_autoptr(GError) err = NULL;
    g_autofree char *r = NULL;

    if (!F.qmp) {
        return -1;
    }
    r = xensim_qmp_call(F.qmp, cmd, timeout_ms, &err);
    if (r) {
        return 1;
    }
    if (g_error_matches(err, G_FILE_ERROR, G_FILE_ERROR_FAILED)) {
        fprintf(stderr, "xenblk-fuzz: [%s] %s\n", F.cur, err->message);
        return 0;
    }
    return -1;
}

bool qmp_open(void)
{
    g_autofree char *path = xensim_ts_qmp_path(F.ts, DOMID);
    g_autoptr(GError) err = NULL;

    F.qmp = xensim_qmp_open(path, 5000, &err);
    return F.qmp != NULL;
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
           qmp_send("{\"execute\":\"query-status\"}", 5000) == 1;
}

/* qmp_send() of a formatted command, 10 s to answer. */
int qmp_exec(const char *fmt, ...)
{
    g_autofree char *cmd = NULL;
    va_list ap;

    va_start(ap, fmt);
    cmd = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    return qmp_send(g_strchomp(cmd), 10000);
}
