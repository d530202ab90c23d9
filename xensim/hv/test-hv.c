/*
 * Unit tests for libxensim-hv: domains, grant checks, event channels.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <glib.h>

#include "xensim/hv.h"

typedef struct {
    char *dir;
    xensim *xs;
} Fixture;

static void fixture_setup(Fixture *f, gconstpointer data)
{
    char tmpl[] = "/dev/shm/xensim-test-XXXXXX";

    g_assert_nonnull(mkdtemp(tmpl));
    f->dir = g_strdup(tmpl);
    f->xs = xensim_create(f->dir);
    g_assert_nonnull(f->xs);
    g_assert_cmpint(xensim_domain_create(f->xs, 1, 64, "guest"), ==, 0);
}

static void fixture_teardown(Fixture *f, gconstpointer data)
{
    g_autofree char *cmd = g_strdup_printf("rm -rf '%s'", f->dir);

    xensim_detach(f->xs);
    g_assert_cmpint(system(cmd), ==, 0);
    g_free(f->dir);
}

static bool fd_readable(int fd, int timeout_ms)
{
    struct pollfd pfd = { .fd = fd, .events = POLLIN };

    return poll(&pfd, 1, timeout_ms) == 1 && (pfd.revents & POLLIN);
}

static bool file_exists(const char *dir, const char *name)
{
    g_autofree char *path = g_build_filename(dir, name, NULL);

    return g_file_test(path, G_FILE_TEST_EXISTS);
}

/* Grant @ref of dom1 to @domid for @frame, the way a guest does. */
static void grant(Fixture *f, uint32_t ref, domid_t domid, uint32_t frame,
                  uint16_t flags)
{
    grant_entry_v1_t *gt = xensim_gnttab(f->xs, 1);

    g_assert_nonnull(gt);
    gt[ref].domid = domid;
    gt[ref].frame = frame;
    __atomic_store_n(&gt[ref].flags, flags, __ATOMIC_RELEASE);
}

/* --- domains ------------------------------------------------------------ */

static void test_domain_create(Fixture *f, gconstpointer data)
{
    struct xensim_domain info;
    grant_entry_v1_t *gt;
    xensim *xs2;

    g_assert_cmpint(xensim_domain_state(f->xs, 0), ==, XENSIM_DOM_LIVE);
    g_assert_cmpint(xensim_domain_info(f->xs, 0, &info), ==, 0);
    g_assert_cmpuint(info.xenstore_port, !=, 0);
    g_assert_cmpuint(info.ports[info.xenstore_port].state, ==,
                     XENSIM_PORT_UNBOUND);
    g_assert_cmpuint(info.ports[info.xenstore_port].remote_dom, ==, 0);
    g_assert_true(file_exists(f->dir, XENSIM_DOM0_KVA_FILE));
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpstr(info.name, ==, "guest");
    g_assert_cmpuint(info.nr_pages, ==, 64);
    g_assert_cmpuint(info.xenstore_port, !=, 0);
    g_assert_cmpuint(info.ports[info.xenstore_port].state, ==,
                     XENSIM_PORT_UNBOUND);
    g_assert_cmpuint(info.ports[info.xenstore_port].remote_dom, ==, 0);
    g_assert_cmpuint(info.ports[info.xenstore_port].handle, ==, 0);

    gt = xensim_gnttab(f->xs, 1);
    g_assert_cmpuint(gt[GNTTAB_RESERVED_XENSTORE].flags, ==,
                     GTF_permit_access);
    g_assert_cmpuint(gt[GNTTAB_RESERVED_XENSTORE].domid, ==, 0);
    g_assert_cmpuint(gt[GNTTAB_RESERVED_XENSTORE].frame, ==,
                     XENSIM_XENSTORE_GFN);
    g_assert_true(file_exists(f->dir, "dom1.mem"));
    g_assert_true(file_exists(f->dir, "dom1.gnttab"));

    errno = 0;
    g_assert_cmpint(xensim_domain_create(f->xs, 1, 64, "again"), ==, -1);
    g_assert_cmpint(errno, ==, EEXIST);
    g_assert_cmpint(xensim_domain_create(f->xs, 0, 64, "dom0"), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xensim_domain_create(f->xs, XENSIM_MAX_DOMAINS, 64, "x"),
                    ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xensim_domain_create(f->xs, 2, 1, "tiny"), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xensim_domain_info(f->xs, 2, &info), ==, -1);
    g_assert_cmpint(errno, ==, ESRCH);

    /* Another attach sees the same memory. */
    xs2 = xensim_attach(f->dir);
    g_assert_nonnull(xs2);
    ((char *)xensim_domain_mem(f->xs, 1, NULL))[4096 * 3 + 7] = 'x';
    g_assert_cmpint(((char *)xensim_domain_mem(xs2, 1, NULL))[4096 * 3 + 7],
                    ==, 'x');
    xensim_detach(xs2);

    g_assert_null(xensim_attach("/nonexistent-xensim"));
    g_assert_cmpint(errno, ==, ENOENT);
}

static void test_domain_destroy(Fixture *f, gconstpointer data)
{
    xensim_evtchn *h0 = xensim_evtchn_open(f->xs, 0);
    xensim_evtchn *h1 = xensim_evtchn_open(f->xs, 1);
    struct xensim_domain info;
    int virq_port, p1, p0;

    virq_port = xensim_evtchn_bind_virq(h0, VIRQ_DOM_EXC);
    g_assert_cmpint(virq_port, >, 0);
    p1 = xensim_evtchn_alloc_unbound(h1, 0);
    g_assert_cmpint(p1, >, 0);
    p0 = xensim_evtchn_bind_interdomain(h0, 1, p1);
    g_assert_cmpint(p0, >, 0);
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, p0);  /* bind raises */
    g_assert_cmpint(xensim_evtchn_unmask(h0, p0), ==, 0);
    g_assert_false(fd_readable(xensim_evtchn_fd(h0), 0));

    g_assert_cmpint(xensim_domain_destroy(f->xs, 1), ==, 0);
    g_assert_cmpint(xensim_domain_state(f->xs, 1), ==, XENSIM_DOM_DYING);
    g_assert_false(file_exists(f->dir, "dom1.mem"));
    g_assert_false(file_exists(f->dir, "dom1.gnttab"));
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, -1);
    g_assert_cmpint(errno, ==, ESRCH);
    g_assert_null(xensim_domain_mem(f->xs, 1, NULL));
    g_assert_cmpint(errno, ==, ESRCH);

    /* VIRQ_DOM_EXC raised in dom0; the interdomain peer is unbound. */
    g_assert_true(fd_readable(xensim_evtchn_fd(h0), 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, virq_port);
    g_assert_cmpint(xensim_domain_info(f->xs, 0, &info), ==, 0);
    g_assert_cmpuint(info.ports[p0].state, ==, XENSIM_PORT_UNBOUND);
    g_assert_cmpuint(info.ports[p0].remote_dom, ==, 1);
    g_assert_cmpint(xensim_domain_destroy(f->xs, 1), ==, -1);
    g_assert_cmpint(errno, ==, ESRCH);

    /* The domid can be reused; old mappings are not. */
    g_assert_cmpint(xensim_domain_create(f->xs, 1, 32, "again"), ==, 0);
    g_assert_nonnull(xensim_domain_mem(f->xs, 1, NULL));
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpuint(info.nr_pages, ==, 32);
    xensim_evtchn_close(h1);
    xensim_evtchn_close(h0);
}

/* --- grants ------------------------------------------------------------- */

static void test_grant_copy(Fixture *f, gconstpointer data)
{
    uint8_t *mem = xensim_domain_mem(f->xs, 1, NULL);
    uint8_t buf[XENSIM_PAGE_SIZE];
    struct xensim_copy_seg seg[8];

    memset(mem + 5 * XENSIM_PAGE_SIZE, 0xab, XENSIM_PAGE_SIZE);
    grant(f, 10, 0, 5, GTF_permit_access);
    grant(f, 11, 2, 5, GTF_permit_access);                 /* other domain */
    grant(f, 12, 0, 5, 0);                                 /* not granted */
    grant(f, 13, 0, 5, GTF_permit_access | GTF_readonly);
    grant(f, 14, 0, 6, GTF_accept_transfer);               /* wrong type */
    grant(f, 15, 0, 1000, GTF_permit_access);              /* bad frame */

    memset(seg, 0, sizeof(seg));
    for (int i = 0; i < 8; i++) {
        seg[i].granter = 1;
        seg[i].local = buf;
        seg[i].len = 16;
    }
    seg[0].ref = 10;                        /* good read */
    seg[1].granter = 7;                     /* no such domain */
    seg[1].ref = 10;
    seg[2].ref = XENSIM_GNTTAB_ENTRIES;     /* bad ref */
    seg[3].ref = 11;                        /* wrong domid */
    seg[4].ref = 12;                        /* not permit_access */
    seg[5].ref = 13;                        /* readonly written */
    seg[5].to_guest = true;
    seg[6].ref = 10;                        /* range beyond page */
    seg[6].offset = XENSIM_PAGE_SIZE - 8;
    seg[7].ref = 14;
    memset(buf, 0, sizeof(buf));
    g_assert_cmpint(xensim_grant_copy(f->xs, 0, seg, 8), ==, 7);
    g_assert_cmpint(seg[0].status, ==, GNTST_okay);
    g_assert_cmpint(seg[1].status, ==, GNTST_bad_domain);
    g_assert_cmpint(seg[2].status, ==, GNTST_bad_gntref);
    g_assert_cmpint(seg[3].status, ==, GNTST_permission_denied);
    g_assert_cmpint(seg[4].status, ==, GNTST_permission_denied);
    g_assert_cmpint(seg[5].status, ==, GNTST_permission_denied);
    g_assert_cmpint(seg[6].status, ==, GNTST_general_error);
    g_assert_cmpint(seg[7].status, ==, GNTST_permission_denied);
    for (int i = 0; i < 16; i++) {
        g_assert_cmpuint(buf[i], ==, 0xab);
    }

    /* Reading a read-only grant is fine; a copy ending at the page end too */
    seg[0].ref = 13;
    seg[0].offset = XENSIM_PAGE_SIZE - 16;
    g_assert_cmpint(xensim_grant_copy(f->xs, 0, seg, 1), ==, 0);
    /* The copier must be the grantee: dom2 cannot use dom0's grant. */
    g_assert_cmpint(xensim_grant_copy(f->xs, 2, seg, 1), ==, 1);
    g_assert_cmpint(seg[0].status, ==, GNTST_permission_denied);

    /* Write into the guest at an offset, whole page, and a bad frame. */
    memset(buf, 0x5a, sizeof(buf));
    seg[0] = (struct xensim_copy_seg) {
        .to_guest = true, .granter = 1, .ref = 10, .offset = 100,
        .len = 200, .local = buf,
    };
    seg[1] = (struct xensim_copy_seg) {
        .to_guest = true, .granter = 1, .ref = 15, .len = 1, .local = buf,
    };
    g_assert_cmpint(xensim_grant_copy(f->xs, 0, seg, 2), ==, 1);
    g_assert_cmpint(seg[0].status, ==, GNTST_okay);
    g_assert_cmpint(seg[1].status, ==, GNTST_bad_page);
    g_assert_cmpuint(mem[5 * XENSIM_PAGE_SIZE + 99], ==, 0xab);
    g_assert_cmpuint(mem[5 * XENSIM_PAGE_SIZE + 100], ==, 0x5a);
    g_assert_cmpuint(mem[5 * XENSIM_PAGE_SIZE + 299], ==, 0x5a);
    g_assert_cmpuint(mem[5 * XENSIM_PAGE_SIZE + 300], ==, 0xab);

    /* Revoking the grant stops copies at once. */
    grant(f, 10, 0, 5, 0);
    g_assert_cmpint(xensim_grant_copy(f->xs, 0, seg, 1), ==, 1);
    g_assert_cmpint(seg[0].status, ==, GNTST_permission_denied);
}

static void test_grant_map(Fixture *f, gconstpointer data)
{
    grant_entry_v1_t *gt = xensim_gnttab(f->xs, 1);
    uint8_t *mem = xensim_domain_mem(f->xs, 1, NULL);
    uint32_t refs[3] = { 20, 21, 22 };
    uint8_t *p, *q;

    /* Frames out of order: the mapping is contiguous anyway. */
    grant(f, 20, 0, 9, GTF_permit_access);
    grant(f, 21, 0, 3, GTF_permit_access);
    grant(f, 22, 0, 7, GTF_permit_access);
    mem[9 * XENSIM_PAGE_SIZE] = 'a';
    mem[3 * XENSIM_PAGE_SIZE + 1] = 'b';
    mem[7 * XENSIM_PAGE_SIZE + 4095] = 'c';

    p = xensim_grant_map(f->xs, 0, 1, 3, refs, PROT_READ | PROT_WRITE);
    g_assert_nonnull(p);
    g_assert_cmpint(p[0], ==, 'a');
    g_assert_cmpint(p[XENSIM_PAGE_SIZE + 1], ==, 'b');
    g_assert_cmpint(p[3 * XENSIM_PAGE_SIZE - 1], ==, 'c');
    p[2 * XENSIM_PAGE_SIZE] = 'w';
    g_assert_cmpint(mem[7 * XENSIM_PAGE_SIZE], ==, 'w');
    for (int i = 0; i < 3; i++) {
        g_assert_cmpuint(gt[refs[i]].flags & (GTF_reading | GTF_writing), ==,
                         GTF_reading | GTF_writing);
    }

    /* A second, read-only mapping of ref 21 keeps the pins counted. */
    q = xensim_grant_map(f->xs, 0, 1, 1, &refs[1], PROT_READ);
    g_assert_nonnull(q);
    g_assert_cmpint(q[1], ==, 'b');
    g_assert_cmpint(xensim_grant_unmap(f->xs, p, 2), ==, -1);  /* wrong size */
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xensim_grant_unmap(f->xs, p, 3), ==, 0);
    g_assert_cmpuint(gt[20].flags, ==, GTF_permit_access);
    g_assert_cmpuint(gt[22].flags, ==, GTF_permit_access);
    g_assert_cmpuint(gt[21].flags, ==, GTF_permit_access | GTF_reading);
    g_assert_cmpint(xensim_grant_unmap(f->xs, q, 1), ==, 0);
    g_assert_cmpuint(gt[21].flags, ==, GTF_permit_access);
    g_assert_cmpint(xensim_grant_unmap(f->xs, q, 1), ==, -1);
}

static void test_grant_map_errors(Fixture *f, gconstpointer data)
{
    grant_entry_v1_t *gt = xensim_gnttab(f->xs, 1);
    uint32_t refs[3] = { 30, 31, 32 };
    uint8_t *p;

    grant(f, 30, 0, 2, GTF_permit_access);
    grant(f, 31, 0, 3, GTF_permit_access | GTF_readonly);
    grant(f, 32, 2, 4, GTF_permit_access);

    /* Read-only entry mapped writable: EPERM, and entry 30 is let go. */
    errno = 0;
    g_assert_null(xensim_grant_map(f->xs, 0, 1, 2, refs,
                                   PROT_READ | PROT_WRITE));
    g_assert_cmpint(errno, ==, EPERM);
    g_assert_cmpuint(gt[30].flags, ==, GTF_permit_access);
    g_assert_cmpuint(gt[31].flags, ==, GTF_permit_access | GTF_readonly);

    /* Read-only entry mapped read-only: fine, GTF_writing stays clear. */
    p = xensim_grant_map(f->xs, 0, 1, 1, &refs[1], PROT_READ);
    g_assert_nonnull(p);
    g_assert_cmpuint(gt[31].flags, ==,
                     GTF_permit_access | GTF_readonly | GTF_reading);
    g_assert_cmpint(xensim_grant_unmap(f->xs, p, 1), ==, 0);
    g_assert_cmpuint(gt[31].flags, ==, GTF_permit_access | GTF_readonly);

    /* Granted to another domain, last of three: all or nothing. */
    refs[1] = 30;
    g_assert_null(xensim_grant_map(f->xs, 0, 1, 3, refs, PROT_READ));
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpuint(gt[30].flags, ==, GTF_permit_access);

    /* Bad ref, not permitted, bad frame, no such domain. */
    refs[0] = XENSIM_GNTTAB_ENTRIES;
    g_assert_null(xensim_grant_map(f->xs, 0, 1, 1, refs, PROT_READ));
    g_assert_cmpint(errno, ==, EINVAL);
    refs[0] = 33;
    g_assert_null(xensim_grant_map(f->xs, 0, 1, 1, refs, PROT_READ));
    g_assert_cmpint(errno, ==, EINVAL);
    grant(f, 33, 0, 64, GTF_permit_access);
    g_assert_null(xensim_grant_map(f->xs, 0, 1, 1, refs, PROT_READ));
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpuint(gt[33].flags, ==, GTF_permit_access);
    refs[0] = 30;
    g_assert_null(xensim_grant_map(f->xs, 0, 5, 1, refs, PROT_READ));
    g_assert_cmpint(errno, ==, ESRCH);

    /* The xenstore page is seeded for dom0. */
    refs[0] = GNTTAB_RESERVED_XENSTORE;
    p = xensim_grant_map(f->xs, 0, 1, 1, refs, PROT_READ | PROT_WRITE);
    g_assert_nonnull(p);
    p[0] = 'x';
    g_assert_cmpint(((char *)xensim_domain_mem(f->xs, 1, NULL))[0], ==, 'x');
    g_assert_cmpint(xensim_grant_unmap(f->xs, p, 1), ==, 0);
}

/* --- event channels ----------------------------------------------------- */

static void test_evtchn_semantics(Fixture *f, gconstpointer data)
{
    xensim_evtchn *h0 = xensim_evtchn_open(f->xs, 0);
    xensim_evtchn *h1 = xensim_evtchn_open(f->xs, 1);
    int fd0 = xensim_evtchn_fd(h0), fd1 = xensim_evtchn_fd(h1);
    uint64_t notifies, wakeups, wakeups0;
    struct xensim_domain info;
    int p1, p0;

    g_assert_nonnull(h0);
    g_assert_nonnull(h1);
    p1 = xensim_evtchn_alloc_unbound(h1, 0);
    g_assert_cmpint(p1, >, 0);

    /* Only the domain the port is offered to may bind it. */
    g_assert_cmpint(xensim_evtchn_bind_interdomain(h1, 1, p1), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xensim_evtchn_bind_interdomain(h0, 1, 200), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);
    g_assert_cmpint(xensim_evtchn_bind_interdomain(h0, 9, 1), ==, -1);
    g_assert_cmpint(errno, ==, ESRCH);

    p0 = xensim_evtchn_bind_interdomain(h0, 1, p1);
    g_assert_cmpint(p0, >, 0);
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpuint(info.ports[p1].state, ==, XENSIM_PORT_INTERDOMAIN);
    g_assert_cmpuint(info.ports[p1].remote_dom, ==, 0);
    g_assert_cmpuint(info.ports[p1].remote_port, ==, p0);
    /* Binding raises the local port once (lost events, as Xen). */
    g_assert_true(fd_readable(fd0, 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, p0);
    g_assert_cmpint(xensim_evtchn_unmask(h0, p0), ==, 0);
    g_assert_false(fd_readable(fd0, 0));
    g_assert_false(fd_readable(fd1, 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, -1);
    g_assert_cmpint(errno, ==, EAGAIN);
    g_assert_cmpint(xensim_port_stats(f->xs, 0, p0, NULL, &wakeups0), ==, 0);

    /* notify -> readable -> pending returns the port, masked. */
    g_assert_cmpint(xensim_evtchn_notify(h1, p1), ==, 0);
    g_assert_true(fd_readable(fd0, 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, p0);
    g_assert_false(fd_readable(fd0, 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, -1);

    /* A notify while masked neither wakes nor is returned... */
    g_assert_cmpint(xensim_evtchn_notify(h1, p1), ==, 0);
    g_assert_false(fd_readable(fd0, 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, -1);
    g_assert_cmpint(errno, ==, EAGAIN);
    /* ...until unmask, which makes the fd readable again. */
    g_assert_cmpint(xensim_evtchn_unmask(h0, p0), ==, 0);
    g_assert_true(fd_readable(fd0, 0));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, p0);
    g_assert_cmpint(xensim_evtchn_unmask(h0, p0), ==, 0);
    g_assert_false(fd_readable(fd0, 0));

    /* Notifies while pending and unmasked coalesce into one wakeup. */
    g_assert_cmpint(xensim_evtchn_notify(h1, p1), ==, 0);
    g_assert_cmpint(xensim_evtchn_notify(h1, p1), ==, 0);
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, p0);
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, -1);
    g_assert_cmpint(xensim_evtchn_unmask(h0, p0), ==, 0);
    g_assert_false(fd_readable(fd0, 0));

    g_assert_cmpint(xensim_port_stats(f->xs, 1, p1, &notifies, NULL), ==, 0);
    g_assert_cmpuint(notifies, ==, 4);
    g_assert_cmpint(xensim_port_stats(f->xs, 0, p0, NULL, &wakeups), ==, 0);
    g_assert_cmpuint(wakeups - wakeups0, ==, 3);  /* notify, unmask, notify */

    /* And the other way. */
    g_assert_cmpint(xensim_evtchn_notify(h0, p0), ==, 0);
    g_assert_true(fd_readable(fd1, 0));
    g_assert_cmpint(xensim_evtchn_pending(h1), ==, p1);

    /* Ports not owned by the handle. */
    g_assert_cmpint(xensim_evtchn_notify(h0, p1 == p0 ? p0 + 1 : p1 + 100),
                    ==, -1);
    g_assert_cmpint(errno, ==, ENOTCONN);
    g_assert_cmpint(xensim_evtchn_unbind(h1, p0 + 100), ==, -1);
    g_assert_cmpint(errno, ==, ENOTCONN);

    /* Unbind: the peer goes back to UNBOUND, notifying it is dropped. */
    g_assert_cmpint(xensim_evtchn_unbind(h1, p1), ==, 0);
    g_assert_cmpint(xensim_domain_info(f->xs, 0, &info), ==, 0);
    g_assert_cmpuint(info.ports[p0].state, ==, XENSIM_PORT_UNBOUND);
    g_assert_cmpuint(info.ports[p0].remote_dom, ==, 1);
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpuint(info.ports[p1].state, ==, XENSIM_PORT_FREE);
    g_assert_cmpint(xensim_evtchn_notify(h0, p0), ==, 0);
    g_assert_cmpint(xensim_evtchn_notify(h1, p1), ==, -1);
    g_assert_cmpint(errno, ==, ENOTCONN);

    /* Dom1 can now bind the port dom0 kept (it is offered to dom1). */
    p1 = xensim_evtchn_bind_interdomain(h1, 0, p0);
    g_assert_cmpint(p1, >, 0);
    xensim_evtchn_close(h0);
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpuint(info.ports[p1].state, ==, XENSIM_PORT_UNBOUND);
    xensim_evtchn_close(h1);
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpuint(info.ports[p1].state, ==, XENSIM_PORT_FREE);
}

static void test_evtchn_many_ports(Fixture *f, gconstpointer data)
{
    xensim_evtchn *h0 = xensim_evtchn_open(f->xs, 0);
    xensim_evtchn *h1 = xensim_evtchn_open(f->xs, 1);
    int p1[3], p0[3], seen = 0, port;

    for (int i = 0; i < 3; i++) {
        p1[i] = xensim_evtchn_alloc_unbound(h1, 0);
        p0[i] = xensim_evtchn_bind_interdomain(h0, 1, p1[i]);
        g_assert_cmpint(p0[i], >, 0);
    }
    while ((port = xensim_evtchn_pending(h0)) > 0) {
        xensim_evtchn_unmask(h0, port);
    }
    for (int i = 0; i < 3; i++) {
        g_assert_cmpint(xensim_evtchn_notify(h1, p1[i]), ==, 0);
    }
    /* One eventfd, three ports: each pending() call re-arms the fd. */
    for (int i = 0; i < 3; i++) {
        g_assert_true(fd_readable(xensim_evtchn_fd(h0), 0));
        port = xensim_evtchn_pending(h0);
        for (int j = 0; j < 3; j++) {
            if (port == p0[j]) {
                seen |= 1 << j;
            }
        }
    }
    g_assert_cmpint(seen, ==, 7);
    g_assert_false(fd_readable(xensim_evtchn_fd(h0), 0));
    xensim_evtchn_close(h1);
    xensim_evtchn_close(h0);
}

static void test_evtchn_adopt(Fixture *f, gconstpointer data)
{
    xensim_evtchn *h0 = xensim_evtchn_open(f->xs, 0);
    xensim_evtchn *h1 = xensim_evtchn_open(f->xs, 1);
    xensim_evtchn *h1b = xensim_evtchn_open(f->xs, 1);
    struct xensim_domain info;
    uint32_t xsport;
    int p0;

    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    xsport = info.xenstore_port;
    p0 = xensim_evtchn_bind_interdomain(h0, 1, xsport);
    g_assert_cmpint(p0, >, 0);
    /* Event to a port nobody owns yet: kept pending, delivered on adopt. */
    g_assert_cmpint(xensim_evtchn_notify(h0, p0), ==, 0);
    g_assert_cmpint(xensim_evtchn_notify(h1, xsport), ==, -1);
    g_assert_cmpint(errno, ==, ENOTCONN);
    g_assert_cmpint(xensim_evtchn_adopt(h1, xsport), ==, 0);
    g_assert_true(fd_readable(xensim_evtchn_fd(h1), 0));
    g_assert_cmpint(xensim_evtchn_pending(h1), ==, xsport);
    g_assert_cmpint(xensim_evtchn_adopt(h1b, xsport), ==, -1);
    g_assert_cmpint(errno, ==, EBUSY);
    g_assert_cmpint(xensim_evtchn_adopt(h1b, 200), ==, -1);
    g_assert_cmpint(errno, ==, EINVAL);

    /* Closing the adopter hands the port back, still connected. */
    xensim_evtchn_close(h1);
    g_assert_cmpint(xensim_domain_info(f->xs, 1, &info), ==, 0);
    g_assert_cmpuint(info.ports[xsport].state, ==, XENSIM_PORT_INTERDOMAIN);
    g_assert_cmpuint(info.ports[xsport].handle, ==, 0);
    g_assert_cmpint(xensim_evtchn_adopt(h1b, xsport), ==, 0);
    g_assert_cmpint(xensim_evtchn_unmask(h1b, xsport), ==, 0);
    g_assert_cmpint(xensim_evtchn_notify(h0, p0), ==, 0);
    g_assert_cmpint(xensim_evtchn_pending(h1b), ==, xsport);
    xensim_evtchn_close(h1b);
    xensim_evtchn_close(h0);
}

/* The child binds dom1 to dom0's port, kicks the parent, waits for an echo. */
static int child_main(const char *dir, int port)
{
    xensim *xs = xensim_attach(dir);
    xensim_evtchn *h;
    int lp;

    if (!xs || !(h = xensim_evtchn_open(xs, 1))) {
        return 10;
    }
    lp = xensim_evtchn_bind_interdomain(h, 0, port);
    if (lp < 0) {
        return 11;
    }
    while (xensim_evtchn_pending(h) >= 0) {
        xensim_evtchn_unmask(h, lp);      /* the bind's own event */
    }
    if (xensim_evtchn_notify(h, lp) < 0) {
        return 12;
    }
    if (!fd_readable(xensim_evtchn_fd(h), 5000)) {
        return 13;
    }
    if (xensim_evtchn_pending(h) != lp) {
        return 14;
    }
    xensim_evtchn_close(h);
    xensim_detach(xs);
    return 0;
}

static void test_evtchn_cross_process(Fixture *f, gconstpointer data)
{
    xensim_evtchn *h0 = xensim_evtchn_open(f->xs, 0);
    uint64_t wakeups;
    int port, status;
    pid_t pid;

    port = xensim_evtchn_alloc_unbound(h0, 1);
    g_assert_cmpint(port, >, 0);
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        _exit(child_main(f->dir, port));
    }
    /* The child's notify reaches our eventfd through pidfd_getfd(). */
    g_assert_true(fd_readable(xensim_evtchn_fd(h0), 5000));
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, port);
    g_assert_cmpint(xensim_port_stats(f->xs, 0, port, NULL, &wakeups), ==, 0);
    g_assert_cmpuint(wakeups, ==, 1);
    /* And ours reaches the child's. */
    g_assert_cmpint(xensim_evtchn_notify(h0, port), ==, 0);
    g_assert_cmpint(waitpid(pid, &status, 0), ==, pid);
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    xensim_evtchn_close(h0);
}

/* A child hammers 4 ports; every time our fd is readable, pending works. */
static void test_evtchn_no_spurious(Fixture *f, gconstpointer data)
{
    xensim_evtchn *h0 = xensim_evtchn_open(f->xs, 0);
    int fd0 = xensim_evtchn_fd(h0), ports[4], status, port, got = 0;
    bool child_done = false;
    pid_t pid;

    for (int i = 0; i < 4; i++) {
        ports[i] = xensim_evtchn_alloc_unbound(h0, 1);
        g_assert_cmpint(ports[i], >, 0);
    }
    pid = fork();
    g_assert_cmpint(pid, >=, 0);
    if (pid == 0) {
        xensim *xs = xensim_attach(f->dir);
        xensim_evtchn *h = xensim_evtchn_open(xs, 1);
        int lp[4];

        for (int i = 0; i < 4; i++) {
            lp[i] = xensim_evtchn_bind_interdomain(h, 0, ports[i]);
            if (lp[i] < 0) {
                _exit(1);
            }
        }
        for (int i = 0; i < 20000; i++) {
            if (xensim_evtchn_notify(h, lp[i % 4]) < 0) {
                _exit(2);
            }
        }
        _exit(0);
    }
    while (!child_done || fd_readable(fd0, 50)) {
        if (!child_done && waitpid(pid, &status, WNOHANG) == pid) {
            child_done = true;
        }
        if (!fd_readable(fd0, 10)) {
            continue;
        }
        port = xensim_evtchn_pending(h0);
        g_assert_cmpint(port, >, 0);
        got++;
        /* Sometimes hold the port masked for a while. */
        if (got % 3) {
            g_assert_cmpint(xensim_evtchn_unmask(h0, port), ==, 0);
        } else {
            g_assert_cmpint(xensim_evtchn_pending(h0), !=, port);
            g_assert_cmpint(xensim_evtchn_unmask(h0, port), ==, 0);
        }
    }
    g_assert_true(WIFEXITED(status));
    g_assert_cmpint(WEXITSTATUS(status), ==, 0);
    g_assert_cmpint(got, >, 0);
    g_assert_cmpint(xensim_evtchn_pending(h0), ==, -1);
    g_assert_cmpint(errno, ==, EAGAIN);

    /* An undelivered event goes away with its port, readability too. */
    g_assert_cmpint(xensim_domain_destroy(f->xs, 1), ==, 0);
    g_assert_cmpint(xensim_domain_create(f->xs, 1, 64, "again"), ==, 0);
    {
        xensim_evtchn *h1 = xensim_evtchn_open(f->xs, 1);
        int p1 = xensim_evtchn_bind_interdomain(h1, 0, ports[0]);

        g_assert_cmpint(p1, >, 0);
        port = xensim_evtchn_pending(h1);
        g_assert_cmpint(port, ==, p1);                  /* the bind's */
        g_assert_cmpint(xensim_evtchn_unmask(h1, p1), ==, 0);
        g_assert_cmpint(xensim_evtchn_notify(h0, ports[0]), ==, 0);
        g_assert_true(fd_readable(xensim_evtchn_fd(h1), 0));
        g_assert_cmpint(xensim_evtchn_unbind(h1, p1), ==, 0);
        g_assert_false(fd_readable(xensim_evtchn_fd(h1), 0));
        xensim_evtchn_close(h1);
    }
    xensim_evtchn_close(h0);
}

int main(int argc, char **argv)
{
    g_test_init(&argc, &argv, NULL);
#define ADD(path, fn) \
    g_test_add(path, Fixture, NULL, fixture_setup, fn, fixture_teardown)
    ADD("/xensim/hv/domain/create", test_domain_create);
    ADD("/xensim/hv/domain/destroy", test_domain_destroy);
    ADD("/xensim/hv/grant/copy", test_grant_copy);
    ADD("/xensim/hv/grant/map", test_grant_map);
    ADD("/xensim/hv/grant/map-errors", test_grant_map_errors);
    ADD("/xensim/hv/evtchn/semantics", test_evtchn_semantics);
    ADD("/xensim/hv/evtchn/many-ports", test_evtchn_many_ports);
    ADD("/xensim/hv/evtchn/adopt", test_evtchn_adopt);
    ADD("/xensim/hv/evtchn/cross-process", test_evtchn_cross_process);
    ADD("/xensim/hv/evtchn/no-spurious", test_evtchn_no_spurious);
#undef ADD
    return g_test_run();
}
