/*
 * What a process of a real dom0 finds there and this host may lack, for
 * blktap's daemons (tapdisk, tapback, tap-ctl):
 *
 *  - a syslog: tapback and tap-ctl log with syslog(3) only, tapdisk with
 *    its own datagrams to /dev/log (drivers/tapdisk-syslog.c). With
 *    $XENSIM_SYSLOG set (the run's sink socket, toolstack/blktap.c),
 *    connect() of an AF_UNIX socket to /dev/log goes there instead, and
 *    syslog()/vsyslog() (and their _chk forms) send their message there
 *    as a datagram "<PRI>IDENT[PID]: MSG", honouring setlogmask(); with
 *    it unset, everything is libc's.
 *  - root's right to raise its limits: tapdisk starts with
 *    setrlimit(RLIMIT_MEMLOCK, unlimited) and exits if that fails
 *    (tapdisk_set_resource_limits()), before mlockall(). A XenServer
 *    dom0's root has CAP_SYS_RESOURCE; a container's root may not. When
 *    raising RLIMIT_MEMLOCK or RLIMIT_CORE fails with EPERM, the soft
 *    limit is raised to the hard one and the call reports success (once
 *    logged): mlockall() itself needs no limit with CAP_IPC_LOCK, and is
 *    left to the kernel.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
/* Define libc's own setrlimit(), not the setrlimit64 LFS renames it to. */
#undef _FILE_OFFSET_BITS

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/param.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <syslog.h>
#include <unistd.h>

#include "shim-int.h"

#define DEV_LOG "/dev/log"

static const char *log_ident;
static int log_facility = LOG_USER;
static int log_fd = -1;

/* Exported as connect@GLIBC_2.2.5. */
int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    const char *sink = getenv("XENSIM_SYSLOG");
    struct sockaddr_un to = { .sun_family = AF_UNIX };

    if (sink && addr && addr->sa_family == AF_UNIX &&
        len > offsetof(struct sockaddr_un, sun_path) &&
        !strncmp(un->sun_path, DEV_LOG, sizeof(un->sun_path)) &&
        strlen(sink) < sizeof(to.sun_path)) {
        strcpy(to.sun_path, sink);
        addr = (const struct sockaddr *)&to;
        len = sizeof(to);
    }
    return syscall(SYS_connect, fd, addr, len);
}

static void dom0_vsyslog(int pri, const char *fmt, va_list ap)
{
    const char *sink = getenv("XENSIM_SYSLOG");
    struct sockaddr_un to = { .sun_family = AF_UNIX };
    char msg[2048];
    int n, m, saved = errno;

    if (!(setlogmask(0) & LOG_MASK(LOG_PRI(pri)))) {
        return;
    }
    if (log_fd < 0) {
        log_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (log_fd < 0 || strlen(sink) >= sizeof(to.sun_path)) {
            return;
        }
        strcpy(to.sun_path, sink);
        if (syscall(SYS_connect, log_fd, &to, sizeof(to)) < 0) {
            close(log_fd);
            log_fd = -1;
            return;
        }
    }
    if (!(pri & LOG_FACMASK)) {
        pri |= log_facility;
    }
    n = snprintf(msg, sizeof(msg), "<%d>%s[%d]: ", pri,
                 log_ident ? log_ident : program_invocation_short_name,
                 (int)getpid());
    errno = saved;                          /* for %m */
    m = vsnprintf(msg + n, sizeof(msg) - n, fmt, ap);
    if (m > 0) {
        n = MIN(n + m, (int)sizeof(msg) - 1);
    }
    send(log_fd, msg, n, MSG_DONTWAIT | MSG_NOSIGNAL);
    errno = saved;
}

/* The libc function @name, for the calls that go to libc after all. */
static void *libc_next(const char *name)
{
    return dlsym(RTLD_NEXT, name);
}

/* Exported as openlog@GLIBC_2.2.5: libc's, and the ident kept. */
void openlog(const char *ident, int option, int facility)
{
    void (*next)(const char *, int, int) = libc_next("openlog");

    log_ident = ident;
    log_facility = facility ? facility : LOG_USER;
    if (next) {
        next(ident, option, facility);
    }
}

/* Exported as vsyslog@GLIBC_2.2.5 (and syslog, __syslog_chk, ...). */
void vsyslog(int pri, const char *fmt, va_list ap)
{
    void (*next)(int, const char *, va_list);

    if (getenv("XENSIM_SYSLOG")) {
        dom0_vsyslog(pri, fmt, ap);
        return;
    }
    next = libc_next("vsyslog");
    if (next) {
        next(pri, fmt, ap);
    }
}

void syslog(int pri, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsyslog(pri, fmt, ap);
    va_end(ap);
}

void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap);
void __vsyslog_chk(int pri, int flag, const char *fmt, va_list ap)
{
    vsyslog(pri, fmt, ap);
}

void __syslog_chk(int pri, int flag, const char *fmt, ...);
void __syslog_chk(int pri, int flag, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsyslog(pri, fmt, ap);
    va_end(ap);
}

static int dom0_setrlimit_eperm(__rlimit_resource_t resource,
                                const struct rlimit *rl);

/*
 * Exported as setrlimit@GLIBC_2.2.5 and setrlimit64@GLIBC_2.2.5. Not
 * instrumented: AddressSanitizer's runtime, preloaded ahead of the shim
 * into uninstrumented programs (XENSIM_PRELOAD), calls setrlimit() while
 * it initialises, before its shadow memory exists.
 */
__attribute__((no_sanitize_address))
int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
    if (prlimit(0, resource, rl, NULL) == 0) {
        return 0;
    }
    return dom0_setrlimit_eperm(resource, rl);
}

/* A limit the kernel refused: what a XenServer dom0's root would get */
static int dom0_setrlimit_eperm(__rlimit_resource_t resource,
                                const struct rlimit *rl)
{
    static int logged;
    struct rlimit cur, want;

    if (errno != EPERM ||
        (resource != RLIMIT_MEMLOCK && resource != RLIMIT_CORE) ||
        prlimit(0, resource, NULL, &cur) < 0) {
        return -1;
    }
    want.rlim_max = cur.rlim_max;
    want.rlim_cur = MIN(rl->rlim_cur, cur.rlim_max);
    if (prlimit(0, resource, &want, NULL) < 0) {
        return -1;
    }
    xensim_log(__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED) ?
               XENSIM_LOG_DEBUG : XENSIM_LOG_INFO,
               "setrlimit(%s): raising the hard limit needs "
               "CAP_SYS_RESOURCE, which this host's root lacks; soft "
               "limit set to the hard one (%llu)",
               resource == RLIMIT_MEMLOCK ? "RLIMIT_MEMLOCK" : "RLIMIT_CORE",
               (unsigned long long)want.rlim_cur);
    return 0;
}

int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rl)
{
    return setrlimit(resource, (const struct rlimit *)rl);
}
