/*
 * libxensim-shim through the real libxen* link: this program is linked
 * with -lxenevtchn -lxengnttab -lxenctrl ... and run with LD_PRELOAD of
 * the shim, as QEMU and xenstored are. The simulated host and the guest
 * side are driven directly with libxensim-hv.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <stdint.h>
#include <xen/sys/gntdev.h>

#include <glib.h>
#include <xenctrl.h>
#include <xenevtchn.h>
#include <xenforeignmemory.h>
#include <xengnttab.h>
#include <xentoolcore.h>

#include "xensim/hv.h"

static char *dir;
static xensim *xs;

static bool fd_readable(int fd)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    return poll(&pfd, 1, 0) == 1;
}

static void assert_from_shim(void *fn, const char *name)
{
    Dl_info info;

    g_assert_true(dladdr(fn, &info));
    if (!strstr(info.dli_fname, "libxensim-shim")) {
        g_error("%s resolved to %s, not the shim", name, info.dli_fname);
    }
}

static void test_bindings(void)
{
    assert_from_shim((void *)xenevtchn_open, "xenevtchn_open");
    assert_from_shim((void *)xenevtchn_pending, "xenevtchn_pending");
    assert_from_shim((void *)xengnttab_grant_copy, "xengnttab_grant_copy");
    assert_from_shim((void *)xengnttab_map_domain_grant_refs,
                     "xengnttab_map_domain_grant_refs");
    assert_from_shim((void *)xc_interface_open, "xc_interface_open");
    assert_from_shim((void *)xc_domain_getinfo, "xc_domain_getinfo");
    assert_from_shim((void *)xenforeignmemory_map2, "xenforeignmemory_map2");
    assert_from_shim((void *)xentoolcore_restrict_all,
                     "xentoolcore_restrict_all");
}

static void test_evtchn(void)
{
    xenevtchn_handle *xce = xenevtchn_open(NULL, 0);
    xensim_evtchn *guest = xensim_evtchn_open(xs, 1);
    int port, gport, fd;

    g_assert_nonnull(xce);
    fd = xenevtchn_fd(xce);
    port = xenevtchn_bind_unbound_port(xce, 1);
    g_assert_cmpint(port, >, 0);
    gport = xensim_evtchn_bind_interdomain(guest, 0, port);
    g_assert_cmpint(gport, >, 0);
    g_assert_cmpint(xensim_evtchn_pending(guest), ==, gport);
    g_assert_cmpint(xensim_evtchn_unmask(guest, gport), ==, 0);

    g_assert_false(fd_readable(fd));
    g_assert_cmpint(xensim_evtchn_notify(guest, gport), ==, 0);
    g_assert_true(fd_readable(fd));
    g_assert_cmpint(xenevtchn_pending(xce), ==, port);
    g_assert_false(fd_readable(fd));
    g_assert_cmpint(xenevtchn_unmask(xce, port), ==, 0);

    g_assert_cmpint(xenevtchn_notify(xce, port), ==, 0);
    g_assert_cmpint(xensim_evtchn_pending(guest), ==, gport);
    g_assert_cmpint(xenevtchn_notify(xce, port + 50), ==, -1);
    g_assert_cmpint(errno, ==, ENOTCONN);

    g_assert_cmpint(xenevtchn_unbind(xce, port), ==, 0);
    g_assert_null(xenevtchn_fdopen(NULL, fd, 0));
    g_assert_cmpint(errno, ==, ENOSYS);
    g_assert_cmpint(xenevtchn_close(xce), ==, 0);
    g_assert_cmpint(xenevtchn_close(NULL), ==, 0);
    xensim_evtchn_close(guest);
}

static void test_gnttab(void)
{
    xengnttab_handle *xgt = xengnttab_open(NULL, 0);
    grant_entry_v1_t *gt = xensim_gnttab(xs, 1);
    uint8_t *mem = xensim_domain_mem(xs, 1, NULL);
    xengnttab_grant_copy_segment_t seg[2];
    uint32_t refs[2] = { 40, 41 };
    uint8_t buf[64];
    uint8_t *p;

    g_assert_nonnull(xgt);
    g_assert_cmpint(xengnttab_set_max_grants(xgt, 128), ==, 0);
    /* QEMU's probe: must succeed or QEMU falls back to map + memcpy. */
    g_assert_cmpint(xengnttab_grant_copy(xgt, 0, NULL), ==, 0);

    for (int i = 0; i < 2; i++) {
        gt[refs[i]].domid = 0;
        gt[refs[i]].frame = 10 - i;
        __atomic_store_n(&gt[refs[i]].flags, GTF_permit_access,
                         __ATOMIC_RELEASE);
    }
    memset(mem + 9 * XC_PAGE_SIZE, 'g', XC_PAGE_SIZE);
    memset(mem + 10 * XC_PAGE_SIZE, 'h', XC_PAGE_SIZE);

    p = xengnttab_map_domain_grant_refs(xgt, 2, 1, refs,
                                        PROT_READ | PROT_WRITE);
    g_assert_nonnull(p);
    g_assert_cmpint(p[0], ==, 'h');
    g_assert_cmpint(p[XC_PAGE_SIZE], ==, 'g');
    g_assert_cmpuint(gt[40].flags & GTF_writing, ==, GTF_writing);
    g_assert_cmpint(xengnttab_unmap(xgt, p, 2), ==, 0);
    g_assert_cmpuint(gt[40].flags, ==, GTF_permit_access);

    memset(seg, 0, sizeof(seg));
    seg[0].flags = GNTCOPY_source_gref;             /* guest -> buf */
    seg[0].source.foreign.domid = 1;
    seg[0].source.foreign.ref = 41;
    seg[0].source.foreign.offset = 8;
    seg[0].dest.virt = buf;
    seg[0].len = sizeof(buf);
    seg[1].flags = GNTCOPY_dest_gref;               /* not granted */
    seg[1].dest.foreign.domid = 1;
    seg[1].dest.foreign.ref = 8191;
    seg[1].source.virt = buf;
    seg[1].len = 1;
    g_assert_cmpint(xengnttab_grant_copy(xgt, 2, seg), ==, 0);
    g_assert_cmpint(seg[0].status, ==, GNTST_okay);
    g_assert_cmpint(seg[1].status, ==, GNTST_permission_denied);
    g_assert_cmpint(buf[0], ==, 'g');

    seg[0].flags = GNTCOPY_dest_gref;               /* buf -> guest */
    seg[0].dest.foreign = seg[0].source.foreign;
    seg[0].source.virt = buf;
    memset(buf, 'z', sizeof(buf));
    g_assert_cmpint(xengnttab_grant_copy(xgt, 1, seg), ==, 0);
    g_assert_cmpint(seg[0].status, ==, GNTST_okay);
    g_assert_cmpint(mem[9 * XC_PAGE_SIZE + 8], ==, 'z');
    g_assert_cmpint(mem[9 * XC_PAGE_SIZE + 7], ==, 'g');

    /* Past the page end: the whole call fails, as with gntdev. */
    seg[0].dest.foreign.offset = XC_PAGE_SIZE - 1;
    g_assert_cmpint(xengnttab_grant_copy(xgt, 1, seg), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);

    g_assert_null(xengnttab_map_grant_ref(xgt, 1, 42, PROT_READ));
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xengnttab_close(xgt), ==, 0);
}

/*
 * tapdisk's grant copy: its own open() of /dev/xen/gntdev and the raw
 * IOCTL_GNTDEV_GRANT_COPY, with gntdev's all-or-nothing check of the
 * segments; tapback's access() of the device.
 */
static void test_gntdev(void)
{
    grant_entry_v1_t *gt = xensim_gnttab(xs, 1);
    uint8_t *mem = xensim_domain_mem(xs, 1, NULL);
    struct ioctl_gntdev_grant_copy_segment seg[2];
    struct ioctl_gntdev_grant_copy copy = { .count = 2, .segments = seg };
    uint8_t buf[512];
    int fd;

    g_assert_cmpint(access("/dev/xen/gntdev", F_OK), ==, 0);
    g_assert_cmpint(access("/dev/xen/nothing-else", F_OK), ==, -1);
    fd = open("/dev/xen/gntdev", O_NONBLOCK);
    g_assert_cmpint(fd, >=, 0);

    gt[50].domid = 0;
    gt[50].frame = 20;
    __atomic_store_n(&gt[50].flags, GTF_permit_access, __ATOMIC_RELEASE);
    gt[51].domid = 0;
    gt[51].frame = 21;
    __atomic_store_n(&gt[51].flags, GTF_permit_access | GTF_readonly,
                     __ATOMIC_RELEASE);
    memset(mem + 20 * XC_PAGE_SIZE, 'r', XC_PAGE_SIZE);

    /* A blkif write: one segment from the guest, sectors 1-1 of a page. */
    memset(seg, 0, sizeof(seg));
    seg[0].flags = GNTCOPY_source_gref;
    seg[0].source.foreign.domid = 1;
    seg[0].source.foreign.ref = 50;
    seg[0].source.foreign.offset = 512;
    seg[0].dest.virt = buf;
    seg[0].len = 512;
    /* A blkif read into a read-only grant: denied, per segment. */
    seg[1].flags = GNTCOPY_dest_gref;
    seg[1].dest.foreign.domid = 1;
    seg[1].dest.foreign.ref = 51;
    seg[1].source.virt = buf;
    seg[1].len = 512;
    g_assert_cmpint(ioctl(fd, IOCTL_GNTDEV_GRANT_COPY, &copy), ==, 0);
    g_assert_cmpint(seg[0].status, ==, GNTST_okay);
    g_assert_cmpint(seg[1].status, ==, GNTST_permission_denied);
    g_assert_cmpint(buf[0], ==, 'r');
    g_assert_cmpint(buf[511], ==, 'r');

    /* Beyond the page: EINVAL for the whole call, nothing copied. */
    memset(buf, 'w', sizeof(buf));
    seg[0].flags = GNTCOPY_dest_gref;
    seg[0].dest.foreign = seg[0].source.foreign;
    seg[0].source.virt = buf;
    seg[1].dest.foreign.ref = 50;
    seg[1].dest.foreign.offset = XC_PAGE_SIZE - 256;
    g_assert_cmpint(ioctl(fd, IOCTL_GNTDEV_GRANT_COPY, &copy), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(mem[20 * XC_PAGE_SIZE + 512], ==, 'r');
    /* ... and the same copy, in range, reaches the guest. */
    seg[1].dest.foreign.offset = 0;
    g_assert_cmpint(ioctl(fd, IOCTL_GNTDEV_GRANT_COPY, &copy), ==, 0);
    g_assert_cmpint(mem[20 * XC_PAGE_SIZE + 512], ==, 'w');
    g_assert_cmpint(mem[20 * XC_PAGE_SIZE], ==, 'w');

    /* Other gntdev requests are not served; other fds reach the kernel. */
    g_assert_cmpint(ioctl(fd, IOCTL_GNTDEV_SET_MAX_GRANTS, buf), ==, -1);
    g_assert_cmpint(errno, ==, ENOSYS);
    close(fd);
    g_assert_cmpint(ioctl(0 /* stdin */, IOCTL_GNTDEV_GRANT_COPY, &copy),
                    ==, -1);
    g_assert_cmpint(errno, !=, ENOSYS);
}

static void test_ctrl(void)
{
    xc_interface *xch = xc_interface_open(NULL, NULL, 0);
    xenevtchn_handle *xce = xenevtchn_open(NULL, 0);
    xenforeignmemory_handle *fmem = xenforeignmemory_open(NULL, 0);
    xen_pfn_t pfn = 1;
    xc_dominfo_t info[4];
    int virq;

    g_assert_nonnull(xch);
    g_assert_nonnull(fmem);
    g_assert_cmpint(xc_domain_getinfo(xch, 0, 4, info), ==, 2);
    g_assert_cmpuint(info[0].domid, ==, 0);
    g_assert_cmpuint(info[1].domid, ==, 1);
    g_assert_false(info[1].dying);
    g_assert_cmpuint(info[1].nr_pages, ==, 64);

    virq = xenevtchn_bind_virq(xce, VIRQ_DOM_EXC);
    g_assert_cmpint(virq, >, 0);
    g_assert_cmpint(xensim_domain_destroy(xs, 1), ==, 0);
    g_assert_cmpint(xenevtchn_pending(xce), ==, virq);
    g_assert_cmpint(xc_domain_getinfo(xch, 1, 1, info), ==, 1);
    g_assert_cmpuint(info[0].domid, ==, 1);
    g_assert_true(info[0].dying);
    g_assert_true(info[0].shutdown);

    g_assert_null(xenforeignmemory_map2(fmem, 1, NULL, PROT_READ, 0, 1,
                                        &pfn, NULL));
    g_assert_cmpint(errno, ==, ENOSYS);
    g_assert_cmpint(xentoolcore_restrict_all(1), ==, 0);
    xenforeignmemory_close(fmem);
    xenevtchn_close(xce);
    xc_interface_close(xch);
}

/* xenstored's dom0 ring: /proc/xen/xsd_port and xsd_kva come from xensim. */
static void test_xsd(void)
{
    char buf[16] = "";
    uint8_t *page;
    int fd;

    fd = open("/proc/xen/xsd_port", O_RDONLY);
    g_assert_cmpint(fd, >=, 0);
    g_assert_cmpint(read(fd, buf, sizeof(buf) - 1), >, 0);
    close(fd);
    g_assert_cmpint(atoi(buf), ==, 1);
    fd = open("/proc/xen/xsd_kva", O_RDWR);
    g_assert_cmpint(fd, >=, 0);
    page = mmap(NULL, XC_PAGE_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    g_assert_true(page != MAP_FAILED);
    close(fd);
    page[0] = 'k';
    munmap(page, XC_PAGE_SIZE);
    fd = open("/proc/xen/other", O_RDONLY);
    g_assert_cmpint(fd, ==, -1);
}

int main(int argc, char **argv)
{
    char tmpl[] = "/dev/shm/xensim-shim-XXXXXX";
    g_autofree char *cmd = NULL;
    int ret;

    g_test_init(&argc, &argv, NULL);
    dir = mkdtemp(tmpl);
    g_assert_nonnull(dir);
    xs = xensim_create(dir);
    g_assert_nonnull(xs);
    g_assert_cmpint(xensim_domain_create(xs, 1, 64, "guest"), ==, 0);
    g_setenv("XENSIM_DIR", dir, TRUE);

    g_test_add_func("/xensim/shim/bindings", test_bindings);
    g_test_add_func("/xensim/shim/evtchn", test_evtchn);
    g_test_add_func("/xensim/shim/gnttab", test_gnttab);
    g_test_add_func("/xensim/shim/gntdev", test_gntdev);
    g_test_add_func("/xensim/shim/ctrl", test_ctrl);
    g_test_add_func("/xensim/shim/xsd", test_xsd);
    ret = g_test_run();

    xensim_detach(xs);
    cmd = g_strdup_printf("rm -rf '%s'", dir);
    if (system(cmd) != 0) {
        ret = 1;
    }
    return ret;
}
