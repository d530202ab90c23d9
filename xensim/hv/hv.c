/*
 * xensim hypervisor state: host and domain lifetime (see xensim/hv.h).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <xen/xen.h>

#include "hv-int.h"

#define HV_FILE         "hv"
#define HV_TMP_FILE     "hv.tmp"

static void dom_file_name(char *buf, size_t len, uint32_t domid,
                          const char *what)
{
    snprintf(buf, len, "dom%u.%s", domid, what);
}

int xensim_hv_lock(xensim *xs)
{
    int r = pthread_mutex_lock(&xs->hv->lock);

    if (r == EOWNERDEAD) {
        /* A process died inside a control op: state may be half done. */
        xensim_log(XENSIM_LOG_WARN, "hv lock owner died, recovering");
        pthread_mutex_consistent(&xs->hv->lock);
        r = 0;
    }
    if (r) {
        errno = r;
        return -1;
    }
    return 0;
}

void xensim_hv_unlock(xensim *xs)
{
    pthread_mutex_unlock(&xs->hv->lock);
}

static xensim *xensim_new(const char *dir)
{
    xensim *xs = g_new0(xensim, 1);
    unsigned i;

    xs->dir = g_strdup(dir);
    xs->dirfd = -1;
    pthread_mutex_init(&xs->lock, NULL);
    for (i = 0; i < XENSIM_MAX_DOMAINS; i++) {
        xs->dom[i].memfd = -1;
    }
    for (i = 0; i < XENSIM_MAX_HANDLES; i++) {
        xs->peer[i].fd = -1;
    }
    xs->maps = g_hash_table_new_full(g_direct_hash, g_direct_equal,
                                     NULL, g_free);
    return xs;
}

static int hv_init_shared(struct xensim_hv_shared *hv)
{
    pthread_mutexattr_t attr;
    int r;

    memset(hv, 0, sizeof(*hv));
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_setpshared(&attr, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&attr, PTHREAD_MUTEX_ROBUST);
    r = pthread_mutex_init(&hv->lock, &attr);
    pthread_mutexattr_destroy(&attr);
    if (r) {
        errno = r;
        return -1;
    }
    hv->version = XENSIM_HV_VERSION;
    hv->size = sizeof(*hv);
    hv->next_generation = 1;
    hv->domains[0].state = XENSIM_DOM_LIVE;
    hv->domains[0].generation = hv->next_generation++;
    g_strlcpy(hv->domains[0].name, "Domain-0", sizeof(hv->domains[0].name));
    /* dom0's own xenstore port (Linux: /proc/xen/xsd_port), offered to 0. */
    hv->domains[0].ports[1].state = XENSIM_PORT_UNBOUND;
    hv->domains[0].ports[1].remote_dom = 0;
    hv->domains[0].xenstore_port = 1;
    __atomic_store_n(&hv->magic, XENSIM_HV_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

xensim *xensim_create(const char *dir)
{
    xensim *xs;
    void *p;
    int fd = -1, kva = -1, saved;

    if (!dir) {
        errno = EINVAL;
        return NULL;
    }
    if (g_mkdir_with_parents(dir, 0700) < 0) {
        return NULL;
    }
    xs = xensim_new(dir);
    xs->dirfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (xs->dirfd < 0) {
        goto err;
    }
    fd = openat(xs->dirfd, HV_TMP_FILE,
                O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || ftruncate(fd, sizeof(struct xensim_hv_shared)) < 0) {
        goto err;
    }
    p = mmap(NULL, sizeof(struct xensim_hv_shared), PROT_READ | PROT_WRITE,
             MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        goto err;
    }
    xs->hv = p;
    if (hv_init_shared(xs->hv) < 0) {
        goto err;
    }
    /* dom0's xenstore ring page (Linux: /proc/xen/xsd_kva). */
    kva = openat(xs->dirfd, XENSIM_DOM0_KVA_FILE,
                 O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (kva < 0 || ftruncate(kva, XENSIM_PAGE_SIZE) < 0) {
        goto err;
    }
    close(kva);
    kva = -1;
    if (renameat(xs->dirfd, HV_TMP_FILE, xs->dirfd, HV_FILE) < 0) {
        goto err;
    }
    close(fd);
    xensim_log(XENSIM_LOG_INFO, "created host in %s", dir);
    return xs;

err:
    saved = errno;
    if (kva >= 0) {
        close(kva);
    }
    if (fd >= 0) {
        unlinkat(xs->dirfd, HV_TMP_FILE, 0);
        close(fd);
    }
    xensim_detach(xs);
    errno = saved;
    return NULL;
}

xensim *xensim_attach(const char *dir)
{
    struct stat st;
    xensim *xs;
    void *p;
    int fd = -1, saved;

    if (!dir) {
        dir = getenv("XENSIM_DIR");
        if (!dir) {
            errno = ENOENT;
            return NULL;
        }
    }
    xs = xensim_new(dir);
    xs->dirfd = open(dir, O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    if (xs->dirfd < 0) {
        goto err;
    }
    fd = openat(xs->dirfd, HV_FILE, O_RDWR | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) < 0) {
        goto err;
    }
    if (st.st_size != sizeof(struct xensim_hv_shared)) {
        errno = EPROTO;
        goto err;
    }
    p = mmap(NULL, sizeof(struct xensim_hv_shared), PROT_READ | PROT_WRITE,
             MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        goto err;
    }
    xs->hv = p;
    if (__atomic_load_n(&xs->hv->magic, __ATOMIC_ACQUIRE) != XENSIM_HV_MAGIC ||
        xs->hv->version != XENSIM_HV_VERSION ||
        xs->hv->size != sizeof(struct xensim_hv_shared)) {
        errno = EPROTO;
        goto err;
    }
    close(fd);
    return xs;

err:
    saved = errno;
    if (fd >= 0) {
        close(fd);
    }
    xensim_detach(xs);
    errno = saved;
    return NULL;
}

static void dommap_release(struct xensim_dommap *m)
{
    if (m->mem) {
        munmap(m->mem, m->nr_pages * XENSIM_PAGE_SIZE);
    }
    if (m->gnttab) {
        munmap(m->gnttab, XENSIM_GNTTAB_ENTRIES * sizeof(grant_entry_v1_t));
    }
    if (m->memfd >= 0) {
        close(m->memfd);
    }
    m->mem = NULL;
    m->gnttab = NULL;
    m->memfd = -1;
    m->nr_pages = 0;
    __atomic_store_n(&m->generation, 0, __ATOMIC_RELEASE);
}

void xensim_detach(xensim *xs)
{
    unsigned i;

    if (!xs) {
        return;
    }
    for (i = 0; i < XENSIM_MAX_DOMAINS; i++) {
        dommap_release(&xs->dom[i]);
    }
    xensim_evtchn_fini(xs);
    if (xs->hv) {
        munmap(xs->hv, sizeof(struct xensim_hv_shared));
    }
    if (xs->dirfd >= 0) {
        close(xs->dirfd);
    }
    g_hash_table_destroy(xs->maps);
    pthread_mutex_destroy(&xs->lock);
    g_free(xs->dir);
    g_free(xs);
}

const char *xensim_dir(const xensim *xs)
{
    return xs->dir;
}

int xensim_domain_state(xensim *xs, uint32_t domid)
{
    if (domid >= XENSIM_MAX_DOMAINS) {
        errno = EINVAL;
        return -1;
    }
    return __atomic_load_n(&xs->hv->domains[domid].state, __ATOMIC_ACQUIRE);
}

static int dom_create_file(xensim *xs, uint32_t domid, const char *what,
                           off_t size)
{
    char name[32];
    int fd;

    dom_file_name(name, sizeof(name), domid, what);
    fd = openat(xs->dirfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
                0600);
    if (fd < 0) {
        return -1;
    }
    if (ftruncate(fd, size) < 0) {
        int saved = errno;

        close(fd);
        unlinkat(xs->dirfd, name, 0);
        errno = saved;
        return -1;
    }
    return fd;
}

static void dom_remove_files(xensim *xs, uint32_t domid)
{
    char name[32];

    dom_file_name(name, sizeof(name), domid, "mem");
    unlinkat(xs->dirfd, name, 0);
    dom_file_name(name, sizeof(name), domid, "gnttab");
    unlinkat(xs->dirfd, name, 0);
}

/* Seed entry GNTTAB_RESERVED_XENSTORE as xc_dom_gnttab_seed() does. */
static int dom_seed_gnttab(int fd)
{
    grant_entry_v1_t *gt;

    gt = mmap(NULL, XENSIM_GNTTAB_ENTRIES * sizeof(*gt),
              PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (gt == MAP_FAILED) {
        return -1;
    }
    gt[GNTTAB_RESERVED_XENSTORE].domid = 0;
    gt[GNTTAB_RESERVED_XENSTORE].frame = XENSIM_XENSTORE_GFN;
    __atomic_store_n(&gt[GNTTAB_RESERVED_XENSTORE].flags,
                     GTF_permit_access, __ATOMIC_RELEASE);
    munmap(gt, XENSIM_GNTTAB_ENTRIES * sizeof(*gt));
    return 0;
}

int xensim_domain_create(xensim *xs, uint32_t domid, uint64_t nr_pages,
                         const char *name)
{
    struct xensim_domain *d;
    int memfd = -1, gtfd = -1, saved;

    if (domid == 0 || domid >= XENSIM_MAX_DOMAINS || nr_pages < 2 ||
        nr_pages > (UINT64_MAX / XENSIM_PAGE_SIZE)) {
        errno = EINVAL;
        return -1;
    }
    if (xensim_hv_lock(xs) < 0) {
        return -1;
    }
    d = &xs->hv->domains[domid];
    if (d->state == XENSIM_DOM_LIVE) {
        errno = EEXIST;
        goto err;
    }
    memfd = dom_create_file(xs, domid, "mem", nr_pages * XENSIM_PAGE_SIZE);
    if (memfd < 0) {
        goto err;
    }
    gtfd = dom_create_file(xs, domid, "gnttab",
                           XENSIM_GNTTAB_ENTRIES * sizeof(grant_entry_v1_t));
    if (gtfd < 0 || dom_seed_gnttab(gtfd) < 0) {
        goto err;
    }
    memset(d->ports, 0, sizeof(d->ports));
    memset(xs->hv->active[domid], 0, sizeof(xs->hv->active[domid]));
    d->nr_pages = nr_pages;
    g_strlcpy(d->name, name ? name : "", sizeof(d->name));
    /* The xenstore event channel, offered to dom0 (xc_dom_alloc_evtchn). */
    d->ports[1].state = XENSIM_PORT_UNBOUND;
    d->ports[1].remote_dom = 0;
    d->xenstore_port = 1;
    d->generation = xs->hv->next_generation++;
    __atomic_store_n(&d->state, XENSIM_DOM_LIVE, __ATOMIC_RELEASE);
    xensim_hv_unlock(xs);
    close(memfd);
    close(gtfd);
    xensim_log(XENSIM_LOG_INFO, "domain %u (%s) created, %" PRIu64 " pages",
               domid, d->name, nr_pages);
    return 0;

err:
    saved = errno;
    if (memfd >= 0) {
        close(memfd);
    }
    if (gtfd >= 0) {
        close(gtfd);
    }
    if (memfd >= 0 || gtfd >= 0) {
        dom_remove_files(xs, domid);
    }
    xensim_hv_unlock(xs);
    errno = saved;
    return -1;
}

int xensim_domain_destroy(xensim *xs, uint32_t domid)
{
    struct xensim_domain *d;

    if (domid == 0 || domid >= XENSIM_MAX_DOMAINS) {
        errno = EINVAL;
        return -1;
    }
    if (xensim_hv_lock(xs) < 0) {
        return -1;
    }
    d = &xs->hv->domains[domid];
    if (d->state != XENSIM_DOM_LIVE) {
        xensim_hv_unlock(xs);
        errno = ESRCH;
        return -1;
    }
    __atomic_store_n(&d->state, XENSIM_DOM_DYING, __ATOMIC_RELEASE);
    xensim_evtchn_close_domain_ports(xs, domid);
    dom_remove_files(xs, domid);
    xensim_hv_unlock(xs);
    xensim_log(XENSIM_LOG_INFO, "domain %u destroyed", domid);
    xensim_virq_send(xs, VIRQ_DOM_EXC);
    return 0;
}

int xensim_domain_info(xensim *xs, uint32_t domid, struct xensim_domain *out)
{
    if (domid >= XENSIM_MAX_DOMAINS) {
        errno = ESRCH;
        return -1;
    }
    if (xensim_hv_lock(xs) < 0) {
        return -1;
    }
    if (xs->hv->domains[domid].state != XENSIM_DOM_LIVE) {
        xensim_hv_unlock(xs);
        errno = ESRCH;
        return -1;
    }
    *out = xs->hv->domains[domid];
    xensim_hv_unlock(xs);
    return 0;
}

/*
 * Map @domid's files in this process, once per domain generation.
 * Lock-free when already mapped. NULL + ESRCH if not live, ENOENT for
 * dom0 (it has neither memory file nor grant table).
 */
struct xensim_dommap *xensim_dommap_get(xensim *xs, uint32_t domid)
{
    struct xensim_domain *d;
    struct xensim_dommap *m;
    char name[32];
    uint64_t gen, nr_pages;
    int fd, saved;
    void *mem, *gt;

    if (domid >= XENSIM_MAX_DOMAINS) {
        errno = ESRCH;
        return NULL;
    }
    d = &xs->hv->domains[domid];
    m = &xs->dom[domid];
    gen = __atomic_load_n(&d->generation, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) != XENSIM_DOM_LIVE) {
        errno = ESRCH;
        return NULL;
    }
    if (domid == 0) {
        errno = ENOENT;
        return NULL;
    }
    if (__atomic_load_n(&m->generation, __ATOMIC_ACQUIRE) == gen) {
        return m;
    }

    pthread_mutex_lock(&xs->lock);
    for (;;) {
        gen = __atomic_load_n(&d->generation, __ATOMIC_ACQUIRE);
        if (m->generation == gen) {
            break;
        }
        /*
         * A stale mapping belongs to a destroyed domain; whoever still
         * uses it raced with the destruction of its domain.
         */
        dommap_release(m);
        nr_pages = d->nr_pages;
        dom_file_name(name, sizeof(name), domid, "mem");
        fd = openat(xs->dirfd, name, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            goto err;
        }
        mem = mmap(NULL, nr_pages * XENSIM_PAGE_SIZE, PROT_READ | PROT_WRITE,
                   MAP_SHARED, fd, 0);
        if (mem == MAP_FAILED) {
            saved = errno;
            close(fd);
            errno = saved;
            goto err;
        }
        m->memfd = fd;
        m->mem = mem;
        m->nr_pages = nr_pages;
        dom_file_name(name, sizeof(name), domid, "gnttab");
        fd = openat(xs->dirfd, name, O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            goto err_release;
        }
        gt = mmap(NULL, XENSIM_GNTTAB_ENTRIES * sizeof(grant_entry_v1_t),
                  PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        saved = errno;
        close(fd);
        if (gt == MAP_FAILED) {
            errno = saved;
            goto err_release;
        }
        m->gnttab = gt;
        if (__atomic_load_n(&d->generation, __ATOMIC_ACQUIRE) != gen ||
            __atomic_load_n(&d->state, __ATOMIC_ACQUIRE) != XENSIM_DOM_LIVE) {
            /* Recreated (or destroyed) while we mapped: start again. */
            dommap_release(m);
            if (__atomic_load_n(&d->state, __ATOMIC_ACQUIRE) !=
                XENSIM_DOM_LIVE) {
                errno = ESRCH;
                goto err;
            }
            continue;
        }
        __atomic_store_n(&m->generation, gen, __ATOMIC_RELEASE);
        break;
    }
    pthread_mutex_unlock(&xs->lock);
    return m;

err_release:
    saved = errno;
    dommap_release(m);
    errno = saved;
err:
    saved = errno;
    pthread_mutex_unlock(&xs->lock);
    if (saved == ENOENT) {
        saved = ESRCH;      /* files removed: destroyed under us */
    }
    errno = saved;
    return NULL;
}

void *xensim_domain_mem(xensim *xs, uint32_t domid, uint64_t *nr_pages)
{
    struct xensim_dommap *m = xensim_dommap_get(xs, domid);

    if (!m) {
        return NULL;
    }
    if (nr_pages) {
        *nr_pages = m->nr_pages;
    }
    return m->mem;
}

grant_entry_v1_t *xensim_gnttab(xensim *xs, uint32_t domid)
{
    struct xensim_dommap *m = xensim_dommap_get(xs, domid);

    return m ? m->gnttab : NULL;
}
