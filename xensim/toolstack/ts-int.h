/*
 * xensim toolstack: helpers shared by the toolstack's files.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef XENSIM_TS_INT_H
#define XENSIM_TS_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>

/* Monotonic clock in milliseconds. */
int64_t ts_now_ms(void);

/*
 * fork() + execve(@argv[0]) with @envp, stdin from /dev/null and
 * stdout/stderr appended to @log_file; the child gets its own process
 * group, an empty signal mask and SIGTERM when this thread dies.
 */
pid_t ts_spawn(char **argv, char **envp, const char *log_file,
               GError **errp);

/*
 * SIGTERM @pid and reap it; SIGKILL after @timeout_ms. *@status (may be
 * NULL) gets the wait status. False if SIGKILL was needed.
 */
bool ts_stop_child(pid_t pid, int *status, int timeout_ms);

/*
 * LD_PRELOAD for a process started under the shim: $XENSIM_PRELOAD (when
 * set) ahead of @shim. A sanitizer build of xensim sets it to the ASan
 * runtime, which must come first in a process whose own binary is not
 * instrumented (Debian's xenstored) and be loaded before the
 * instrumented shim in any process.
 */
char *ts_preload(const char *shim);

/* "exited with status N" / "killed by signal N (name)". */
char *ts_status_string(int status);

#endif /* XENSIM_TS_INT_H */
