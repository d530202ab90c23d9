/*
 * The two files through which a Linux dom0 kernel hands its own xenstore
 * ring to xenstored (tools/xenstored/posix.c: xenbus_evtchn() reads
 * /proc/xen/xsd_port, xenbus_map() mmaps /proc/xen/xsd_kva). There is no
 * dom0 kernel here, so open() of exactly these two paths is redirected to
 * the simulated host: the port is domains[0].xenstore_port (an unbound
 * dom0 port offered to dom0) and the page is $XENSIM_DIR/dom0.xsd_kva.
 * open() of /dev/xen/gntdev goes to gntdev.c (tapdisk opens the grant
 * device itself). Every other open() goes straight to openat().
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
/* Define libc's own open(), not the open64 that LFS renames it to. */
#undef _FILE_OFFSET_BITS

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "shim-int.h"

#define XSD_PORT_PATH   "/proc/xen/xsd_port"
#define XSD_KVA_PATH    "/proc/xen/xsd_kva"

static int xsd_port_open(xensim *xs, int flags)
{
    struct xensim_domain dom0;
    char buf[16];
    int fd, len;

    if (xensim_domain_info(xs, 0, &dom0) < 0) {
        return -1;
    }
    fd = memfd_create("xsd_port", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
    if (fd < 0) {
        return -1;
    }
    len = snprintf(buf, sizeof(buf), "%u", dom0.xenstore_port);
    if (write(fd, buf, len) != len || lseek(fd, 0, SEEK_SET) < 0) {
        close(fd);
        errno = EIO;
        return -1;
    }
    xensim_log(XENSIM_LOG_INFO, XSD_PORT_PATH ": dom0 port %u",
               dom0.xenstore_port);
    return fd;
}

static int xsd_kva_open(xensim *xs, int flags)
{
    char path[4096];

    snprintf(path, sizeof(path), "%s/%s", xensim_dir(xs),
             XENSIM_DOM0_KVA_FILE);
    xensim_log(XENSIM_LOG_INFO, XSD_KVA_PATH ": %s", path);
    return openat(AT_FDCWD, path, flags & (O_ACCMODE | O_CLOEXEC));
}

static int xsd_open(const char *path, int flags, mode_t mode)
{
    xensim *xs;

    if (!strncmp(path, "/proc/xen/", 10) && !strcmp(path, XSD_PORT_PATH)) {
        xs = shim_host();
        return xs ? xsd_port_open(xs, flags) : -1;
    }
    if (!strncmp(path, "/proc/xen/", 10) && !strcmp(path, XSD_KVA_PATH)) {
        xs = shim_host();
        return xs ? xsd_kva_open(xs, flags) : -1;
    }
    if (!strncmp(path, "/dev/xen/", 9) && !strcmp(path, "/dev/xen/gntdev")) {
        return shim_gntdev_open(flags);
    }
    return openat(AT_FDCWD, path, flags, mode);
}

/*
 * Exported as open@GLIBC_2.2.5 and open64@GLIBC_2.2.5
 * (libxensim-shim.map) to interpose libc's.
 */
int open(const char *path, int flags, ...)
{
    mode_t mode = 0;

    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_list ap;

        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    return xsd_open(path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;

    if (flags & (O_CREAT | __O_TMPFILE)) {
        va_list ap;

        va_start(ap, flags);
        mode = va_arg(ap, int);
        va_end(ap);
    }
    return xsd_open(path, flags | O_LARGEFILE, mode);
}
