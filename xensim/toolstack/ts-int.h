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

/* --- blktap (blktap.c; the run's side is described in toolstack.h) ----- */

typedef struct ts_blktap ts_blktap;

/*
 * Check blktap's binaries under @prefix (NULL: the default), then make
 * the run's mount namespace (with @run_dir bind-mounted into the private
 * /dev/shm) and make the process a child subreaper. Call while the
 * process is single-threaded (unshare(CLONE_NEWNS) needs it) and before
 * any child is started. NULL + @errp on failure.
 */
ts_blktap *ts_blktap_new(const char *prefix, const char *run_dir,
                         const char *log_dir, GError **errp);

/* Start cpumond, then tapback, against the xenstored on @socket. */
bool ts_blktap_start(ts_blktap *b, const char *run_dir, const char *shim,
                     const char *socket, GError **errp);

/* Make the host's @path visible at @path if it is under /dev/shm. */
bool ts_blktap_expose(ts_blktap *b, const char *path, GError **errp);

/* Unmount the exposed (emptied) directory @path and rmdir the host's. */
void ts_blktap_remove_exposed_dir(ts_blktap *b, const char *path);

/*
 * A tapdisk serving the raw @image: *@pid, *@minor and *@nbd_path (its
 * NBD socket, g_free) on success.
 */
bool ts_blktap_attach(ts_blktap *b, const char *image, bool readonly,
                      pid_t *pid, int *minor, char **nbd_path,
                      GError **errp);

/* Close, detach, free minor @minor of tapdisk @pid; wait for it to exit. */
bool ts_blktap_detach(ts_blktap *b, pid_t pid, int minor, GError **errp);

/* False (and reaped) if cpumond or tapback has exited. */
bool ts_blktap_check(ts_blktap *b, GError **errp);

/* Stop tapback (and its slaves) and cpumond; NULL is accepted. */
bool ts_blktap_stop(ts_blktap *b, GError **errp);
void ts_blktap_free(ts_blktap *b);

#endif /* XENSIM_TS_INT_H */
