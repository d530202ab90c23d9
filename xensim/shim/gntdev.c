/*
 * The dom0 kernel's grant device, /dev/xen/gntdev, for backends that use
 * it directly rather than through libxengnttab: tapdisk opens it itself
 * and issues IOCTL_GNTDEV_GRANT_COPY on it for every request's data
 * (blktap drivers/td-req.c guest_copy2()), and tapback checks that it
 * exists (access(F_OK)) before it starts.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * open("/dev/xen/gntdev") (routed here by xsd.c's open()) gives an
 * anonymous memfd, remembered in a bitmap of gntdev fds. ioctl() on such
 * an fd with IOCTL_GNTDEV_GRANT_COPY does what Linux gntdev_ioctl() does
 * (the ABI of Xen's xen/sys/gntdev.h, the same segment layout as
 * xengnttab_grant_copy_segment_t): shim_grant_copy(), a memcpy per
 * segment, no syscall. Every other ioctl goes to the kernel unchanged.
 * close() is not interposed: the bit of a closed fd stays set, which
 * only matters to a caller that issues a gntdev ioctl on a descriptor
 * it did not get from opening gntdev.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <stdint.h>
#include <xen/sys/gntdev.h>
#include <xengnttab.h>

#include "shim-int.h"

#define GNTDEV_PATH     "/dev/xen/gntdev"
#define GNTDEV_MAX_FD   65536

/* The ioctl's segments are the library's, field for field. */
_Static_assert(sizeof(struct ioctl_gntdev_grant_copy_segment) ==
               sizeof(xengnttab_grant_copy_segment_t), "segment size");
_Static_assert(offsetof(struct ioctl_gntdev_grant_copy_segment, len) ==
               offsetof(xengnttab_grant_copy_segment_t, len), "len");
_Static_assert(offsetof(struct ioctl_gntdev_grant_copy_segment, status) ==
               offsetof(xengnttab_grant_copy_segment_t, status), "status");

static unsigned long gntdev_fds[GNTDEV_MAX_FD / (8 * sizeof(unsigned long))];

#define FD_WORD(fd) (gntdev_fds[(fd) / (8 * sizeof(unsigned long))])
#define FD_BIT(fd)  (1ul << ((fd) % (8 * sizeof(unsigned long))))

static bool gntdev_is_fd(int fd)
{
    return fd >= 0 && fd < GNTDEV_MAX_FD &&
           (__atomic_load_n(&FD_WORD(fd), __ATOMIC_RELAXED) & FD_BIT(fd));
}

int shim_gntdev_open(int flags)
{
    int fd;

    if (!shim_host()) {
        return -1;
    }
    fd = memfd_create("xensim-gntdev", (flags & O_CLOEXEC) ? MFD_CLOEXEC : 0);
    if (fd < 0) {
        return -1;
    }
    if (fd >= GNTDEV_MAX_FD) {
        close(fd);
        errno = EMFILE;
        return -1;
    }
    __atomic_fetch_or(&FD_WORD(fd), FD_BIT(fd), __ATOMIC_RELAXED);
    xensim_log(XENSIM_LOG_INFO, GNTDEV_PATH ": fd %d", fd);
    return fd;
}

/*
 * Exported as ioctl@GLIBC_2.2.5 (libxensim-shim.map). On x86-64 glibc's
 * ioctl() is the bare system call, which is what the other requests get.
 */
int ioctl(int fd, unsigned long request, ...)
{
    struct ioctl_gntdev_grant_copy *copy;
    va_list ap;
    void *arg;

    va_start(ap, request);
    arg = va_arg(ap, void *);
    va_end(ap);

    if (_IOC_TYPE(request) != 'G' || !gntdev_is_fd(fd)) {
        return syscall(SYS_ioctl, fd, request, arg);
    }
    if (request != IOCTL_GNTDEV_GRANT_COPY) {
        /* Map, unmap, notify, dma-buf: through libxengnttab only. */
        return SHIM_ENOSYS("ioctl(/dev/xen/gntdev) other than GRANT_COPY");
    }
    copy = arg;
    return shim_grant_copy(shim_host(), copy->count,
                           (xengnttab_grant_copy_segment_t *)copy->segments);
}

/* Exported as access@GLIBC_2.2.5: tapback's check that gntdev exists. */
int access(const char *path, int mode)
{
    if (!strcmp(path, GNTDEV_PATH)) {
        if (!shim_host()) {
            errno = ENOENT;
            return -1;
        }
        return 0;
    }
    return faccessat(AT_FDCWD, path, mode, 0);
}
