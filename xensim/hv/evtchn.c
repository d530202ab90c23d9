/*
 * xensim interdomain event channels (see xensim/hv.h).
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * Port state (xen/common/event_channel.c semantics) lives in the shared hv
 * file; port lifetime changes take the hv lock. The data path is
 * lock-free and follows Linux's /dev/xen/evtchn (drivers/xen/evtchn.c):
 *
 *  notify:  set the peer's PENDING; if that made it pending, unmasked and
 *           owned, add one credit to the owner's eventfd.
 *  pending: take one credit, then the first pending unmasked port we own:
 *           mask it and clear PENDING in one compare-and-swap.
 *  unmask:  clear MASKED; if the port is pending, add one credit.
 *
 * PENDING, MASKED and the owner share one word (xensim_port.evstate), so
 * exactly one party sees each transition to "deliverable" and adds the
 * credit: the eventfd (EFD_SEMAPHORE) holds at most as many credits as
 * there are deliverable ports, and the fd is never readable for nothing.
 * Credits of ports closed before delivery are skipped (h->debt).
 *
 * Another process's eventfd is fetched once with pidfd_getfd() and cached
 * per (handle slot, generation) in this process.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/pidfd.h>
#include <unistd.h>

#include "hv-int.h"

#define OWNED_WORDS     (XENSIM_MAX_PORTS / 64)

struct xensim_evtchn {
    xensim *xs;
    uint32_t domid;
    uint32_t index;                 /* slot in hv->handles */
    uint64_t generation;
    int efd;
    uint32_t next;                  /* where pending() starts scanning */
    uint32_t debt;                  /* credits of ports unbound unseen */
    uint64_t owned[OWNED_WORDS];    /* ports this handle owns (atomic) */
    uint64_t adopted[OWNED_WORDS];  /* of which adopted, not bound here */
};

static struct xensim_port *port_ptr(xensim *xs, uint32_t domid, uint32_t port)
{
    return &xs->hv->domains[domid].ports[port];
}

static uint32_t ev_owner(uint32_t ev)
{
    return ev >> XENSIM_EV_OWNER_SHIFT;
}

/* Pending and unmasked (owner not checked). */
static bool ev_deliverable(uint32_t ev)
{
    return (ev & (XENSIM_EV_PENDING | XENSIM_EV_MASKED)) == XENSIM_EV_PENDING;
}

/* Refresh the informational pending/masked fields from evstate @ev. */
static void ev_mirror(struct xensim_port *p, uint32_t ev)
{
    __atomic_store_n(&p->pending, !!(ev & XENSIM_EV_PENDING),
                     __ATOMIC_RELAXED);
    __atomic_store_n(&p->masked, !!(ev & XENSIM_EV_MASKED), __ATOMIC_RELAXED);
}

static bool bit_test(const uint64_t *map, uint32_t bit)
{
    return __atomic_load_n(&map[bit / 64], __ATOMIC_RELAXED) &
           (1ull << (bit % 64));
}

static void bit_set(uint64_t *map, uint32_t bit)
{
    __atomic_fetch_or(&map[bit / 64], 1ull << (bit % 64), __ATOMIC_RELAXED);
}

static void bit_clear(uint64_t *map, uint32_t bit)
{
    __atomic_fetch_and(&map[bit / 64], ~(1ull << (bit % 64)),
                       __ATOMIC_RELAXED);
}

static bool handle_owns(xensim_evtchn *h, uint32_t port)
{
    return port && port < XENSIM_MAX_PORTS && bit_test(h->owned, port) &&
           ev_owner(__atomic_load_n(&port_ptr(h->xs, h->domid, port)->evstate,
                                    __ATOMIC_ACQUIRE)) == h->index + 1;
}

/*
 * A descriptor for handle @slot's eventfd in this process, checked to
 * still belong to generation @gen. -1 if the owner is gone.
 */
static int handle_dup_fd(struct xensim_handle_slot *slot, uint64_t gen)
{
    pid_t pid = slot->pid;
    int tfd = slot->fd, pidfd, fd;

    if (pid == getpid()) {
        fd = fcntl(tfd, F_DUPFD_CLOEXEC, 0);
    } else {
        pidfd = pidfd_open(pid, 0);
        if (pidfd < 0) {
            xensim_log(XENSIM_LOG_DEBUG, "pidfd_open(%d): %s", pid,
                       strerror(errno));
            return -1;
        }
        fd = pidfd_getfd(pidfd, tfd, 0);
        if (fd < 0) {
            xensim_log(XENSIM_LOG_WARN, "pidfd_getfd(%d, %d): %s", pid, tfd,
                       strerror(errno));
        }
        close(pidfd);
    }
    if (fd < 0) {
        return -1;
    }
    /* The owner clears in_use before closing: we got the right file. */
    if (!__atomic_load_n(&slot->in_use, __ATOMIC_SEQ_CST) ||
        __atomic_load_n(&slot->generation, __ATOMIC_SEQ_CST) != gen) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Make handle @hidx's eventfd readable; count it on port @p. */
static void handle_kick(xensim *xs, uint32_t hidx, struct xensim_port *p)
{
    struct xensim_handle_slot *slot = &xs->hv->handles[hidx];
    struct xensim_peer *peer = &xs->peer[hidx];
    uint64_t one = 1, gen;
    int fd;

    pthread_mutex_lock(&xs->lock);
    gen = __atomic_load_n(&slot->generation, __ATOMIC_SEQ_CST);
    if (!__atomic_load_n(&slot->in_use, __ATOMIC_SEQ_CST)) {
        goto out;
    }
    if (peer->fd < 0 || peer->generation != gen) {
        if (peer->fd >= 0) {
            close(peer->fd);
            peer->fd = -1;
        }
        fd = handle_dup_fd(slot, gen);
        if (fd < 0) {
            goto out;
        }
        peer->fd = fd;
        peer->generation = gen;
    }
    /* Counted first, so that whoever wakes up sees it. */
    __atomic_fetch_add(&p->wakeups, 1, __ATOMIC_RELAXED);
    if (write(peer->fd, &one, sizeof(one)) != sizeof(one)) {
        __atomic_fetch_sub(&p->wakeups, 1, __ATOMIC_RELAXED);
    }
out:
    pthread_mutex_unlock(&xs->lock);
}

static void self_kick(xensim_evtchn *h, struct xensim_port *p)
{
    uint64_t one = 1;

    __atomic_fetch_add(&p->wakeups, 1, __ATOMIC_RELAXED);
    if (write(h->efd, &one, sizeof(one)) != sizeof(one)) {
        __atomic_fetch_sub(&p->wakeups, 1, __ATOMIC_RELAXED);
    }
}

/* Set @p pending; credit its owner if that made it deliverable. */
static void port_raise(xensim *xs, struct xensim_port *p)
{
    uint32_t old, owner;

    if (__atomic_load_n(&p->evstate, __ATOMIC_RELAXED) & XENSIM_EV_PENDING) {
        return;
    }
    old = __atomic_fetch_or(&p->evstate, XENSIM_EV_PENDING, __ATOMIC_SEQ_CST);
    ev_mirror(p, old | XENSIM_EV_PENDING);
    owner = ev_owner(old);
    if (!(old & XENSIM_EV_PENDING) && ev_deliverable(old | XENSIM_EV_PENDING)
        && owner && owner <= XENSIM_MAX_HANDLES) {
        handle_kick(xs, owner - 1, p);
    }
}

/*
 * Close @domid:@port (hv lock held); an INTERDOMAIN peer becomes UNBOUND.
 * Returns the port's last evstate.
 */
static uint32_t port_close_locked(xensim *xs, uint32_t domid, uint32_t port)
{
    struct xensim_port *p = port_ptr(xs, domid, port), *peer;
    uint32_t ev;

    if (p->state == XENSIM_PORT_INTERDOMAIN &&
        p->remote_dom < XENSIM_MAX_DOMAINS &&
        p->remote_port && p->remote_port < XENSIM_MAX_PORTS) {
        peer = port_ptr(xs, p->remote_dom, p->remote_port);
        if (peer->state == XENSIM_PORT_INTERDOMAIN &&
            peer->remote_dom == domid && peer->remote_port == port) {
            peer->remote_dom = domid;
            peer->remote_port = 0;
            __atomic_store_n(&peer->state, XENSIM_PORT_UNBOUND,
                             __ATOMIC_RELEASE);
        }
    }
    __atomic_store_n(&p->state, XENSIM_PORT_FREE, __ATOMIC_RELEASE);
    ev = __atomic_exchange_n(&p->evstate, 0, __ATOMIC_SEQ_CST);
    __atomic_store_n(&p->handle, 0, __ATOMIC_RELEASE);
    p->remote_dom = 0;
    p->remote_port = 0;
    p->virq = 0;
    p->pending = 0;
    p->masked = 0;
    p->notifies = 0;
    p->wakeups = 0;
    return ev;
}

void xensim_evtchn_close_domain_ports(xensim *xs, uint32_t domid)
{
    uint32_t port;

    for (port = 1; port < XENSIM_MAX_PORTS; port++) {
        if (port_ptr(xs, domid, port)->state != XENSIM_PORT_FREE) {
            port_close_locked(xs, domid, port);
        }
    }
}

void xensim_evtchn_fini(xensim *xs)
{
    unsigned i;

    for (i = 0; i < XENSIM_MAX_HANDLES; i++) {
        if (xs->peer[i].fd >= 0) {
            close(xs->peer[i].fd);
            xs->peer[i].fd = -1;
        }
    }
}

/* Release handle slot @i and every port it owns (hv lock held). */
static void slot_release_locked(xensim *xs, uint32_t i)
{
    uint32_t d, port;

    for (d = 0; d < XENSIM_MAX_DOMAINS; d++) {
        for (port = 1; port < XENSIM_MAX_PORTS; port++) {
            if (port_ptr(xs, d, port)->handle == i + 1) {
                port_close_locked(xs, d, port);
            }
        }
    }
    __atomic_store_n(&xs->hv->handles[i].in_use, 0, __ATOMIC_SEQ_CST);
}

/* Free the slots of processes that died without closing (hv lock held). */
static void slots_reclaim_locked(xensim *xs)
{
    struct xensim_handle_slot *slot;
    uint32_t i;

    for (i = 0; i < XENSIM_MAX_HANDLES; i++) {
        slot = &xs->hv->handles[i];
        if (slot->in_use && kill(slot->pid, 0) < 0 && errno == ESRCH) {
            xensim_log(XENSIM_LOG_INFO, "reclaiming evtchn handle %u of "
                       "dead pid %d", i, slot->pid);
            slot_release_locked(xs, i);
        }
    }
}

static int slot_find_locked(xensim *xs)
{
    uint32_t i;

    for (i = 0; i < XENSIM_MAX_HANDLES; i++) {
        if (!xs->hv->handles[i].in_use) {
            return i;
        }
    }
    return -1;
}

xensim_evtchn *xensim_evtchn_open(xensim *xs, uint32_t domid)
{
    struct xensim_handle_slot *slot;
    xensim_evtchn *h;
    int i, saved;

    if (domid >= XENSIM_MAX_DOMAINS) {
        errno = ESRCH;
        return NULL;
    }
    h = g_new0(xensim_evtchn, 1);
    h->xs = xs;
    h->domid = domid;
    h->efd = eventfd(0, EFD_SEMAPHORE | EFD_NONBLOCK | EFD_CLOEXEC);
    if (h->efd < 0) {
        goto err;
    }
    if (xensim_hv_lock(xs) < 0) {
        goto err;
    }
    if (xs->hv->domains[domid].state != XENSIM_DOM_LIVE) {
        xensim_hv_unlock(xs);
        errno = ESRCH;
        goto err;
    }
    i = slot_find_locked(xs);
    if (i < 0) {
        slots_reclaim_locked(xs);
        i = slot_find_locked(xs);
    }
    if (i < 0) {
        xensim_hv_unlock(xs);
        errno = EMFILE;
        goto err;
    }
    slot = &xs->hv->handles[i];
    slot->domid = domid;
    slot->pid = getpid();
    slot->fd = h->efd;
    slot->generation = xs->hv->next_generation++;
    __atomic_store_n(&slot->in_use, 1, __ATOMIC_SEQ_CST);
    h->index = i;
    h->generation = slot->generation;
    xensim_hv_unlock(xs);
    return h;

err:
    saved = errno;
    if (h->efd >= 0) {
        close(h->efd);
    }
    g_free(h);
    errno = saved;
    return NULL;
}

int xensim_evtchn_close(xensim_evtchn *h)
{
    xensim *xs;
    uint32_t port;

    if (!h) {
        return 0;
    }
    xs = h->xs;
    if (xensim_hv_lock(xs) == 0) {
        for (port = 1; port < XENSIM_MAX_PORTS; port++) {
            struct xensim_port *p = port_ptr(xs, h->domid, port);

            if (!bit_test(h->owned, port) || p->handle != h->index + 1) {
                continue;
            }
            if (bit_test(h->adopted, port)) {
                /* Not ours to close: hand it back, as the builder made it. */
                __atomic_fetch_and(&p->evstate,
                                   (1u << XENSIM_EV_OWNER_SHIFT) - 1,
                                   __ATOMIC_SEQ_CST);
                __atomic_store_n(&p->handle, 0, __ATOMIC_RELEASE);
            } else {
                port_close_locked(xs, h->domid, port);
            }
        }
        slot_release_locked(xs, h->index);
        xensim_hv_unlock(xs);
    }
    close(h->efd);
    g_free(h);
    return 0;
}

int xensim_evtchn_fd(const xensim_evtchn *h)
{
    return h->efd;
}

/* Allocate a free local port owned by @h (hv lock held). */
static int port_alloc_locked(xensim_evtchn *h)
{
    struct xensim_port *p;
    uint32_t port;

    for (port = 1; port < XENSIM_MAX_PORTS; port++) {
        p = port_ptr(h->xs, h->domid, port);
        if (p->state == XENSIM_PORT_FREE) {
            memset(p, 0, sizeof(*p));
            p->handle = h->index + 1;
            __atomic_store_n(&p->evstate,
                             (h->index + 1) << XENSIM_EV_OWNER_SHIFT,
                             __ATOMIC_SEQ_CST);
            bit_clear(h->adopted, port);
            bit_set(h->owned, port);
            return port;
        }
    }
    errno = ENOSPC;
    return -1;
}

static int handle_lock_live(xensim_evtchn *h)
{
    if (xensim_hv_lock(h->xs) < 0) {
        return -1;
    }
    if (h->xs->hv->domains[h->domid].state != XENSIM_DOM_LIVE) {
        xensim_hv_unlock(h->xs);
        errno = ESRCH;
        return -1;
    }
    return 0;
}

int xensim_evtchn_alloc_unbound(xensim_evtchn *h, uint32_t remote_dom)
{
    int port;

    if (remote_dom == DOMID_SELF) {
        remote_dom = h->domid;
    }
    if (remote_dom >= XENSIM_MAX_DOMAINS) {
        errno = ESRCH;
        return -1;
    }
    if (handle_lock_live(h) < 0) {
        return -1;
    }
    port = port_alloc_locked(h);
    if (port > 0) {
        struct xensim_port *p = port_ptr(h->xs, h->domid, port);

        p->remote_dom = remote_dom;
        __atomic_store_n(&p->state, XENSIM_PORT_UNBOUND, __ATOMIC_RELEASE);
    }
    xensim_hv_unlock(h->xs);
    return port;
}

int xensim_evtchn_bind_interdomain(xensim_evtchn *h, uint32_t remote_dom,
                                   uint32_t remote_port)
{
    struct xensim_port *lp, *rp;
    xensim *xs = h->xs;
    int port;

    if (remote_dom == DOMID_SELF) {
        remote_dom = h->domid;
    }
    if (remote_dom >= XENSIM_MAX_DOMAINS) {
        errno = ESRCH;
        return -1;
    }
    if (!remote_port || remote_port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    if (handle_lock_live(h) < 0) {
        return -1;
    }
    if (xs->hv->domains[remote_dom].state != XENSIM_DOM_LIVE) {
        errno = ESRCH;
        goto err;
    }
    rp = port_ptr(xs, remote_dom, remote_port);
    if (rp->state != XENSIM_PORT_UNBOUND || rp->remote_dom != h->domid) {
        errno = EINVAL;
        goto err;
    }
    port = port_alloc_locked(h);
    if (port < 0) {
        goto err;
    }
    lp = port_ptr(xs, h->domid, port);
    lp->remote_dom = remote_dom;
    lp->remote_port = remote_port;
    __atomic_store_n(&lp->state, XENSIM_PORT_INTERDOMAIN, __ATOMIC_RELEASE);
    rp->remote_dom = h->domid;
    rp->remote_port = port;
    __atomic_store_n(&rp->state, XENSIM_PORT_INTERDOMAIN, __ATOMIC_RELEASE);
    xensim_hv_unlock(xs);
    /*
     * As Xen's evtchn_bind_interdomain(): notifications sent to the
     * unbound port may have been lost, so conservatively raise ours.
     */
    port_raise(xs, lp);
    return port;

err:
    xensim_hv_unlock(xs);
    return -1;
}

int xensim_evtchn_bind_virq(xensim_evtchn *h, uint32_t virq)
{
    int port;

    if (h->domid != 0 || virq >= NR_VIRQS) {
        errno = EINVAL;
        return -1;
    }
    if (handle_lock_live(h) < 0) {
        return -1;
    }
    port = port_alloc_locked(h);
    if (port > 0) {
        struct xensim_port *p = port_ptr(h->xs, h->domid, port);

        p->virq = virq;
        __atomic_store_n(&p->state, XENSIM_PORT_VIRQ, __ATOMIC_RELEASE);
    }
    xensim_hv_unlock(h->xs);
    return port;
}

int xensim_evtchn_adopt(xensim_evtchn *h, uint32_t port)
{
    struct xensim_port *p;
    uint32_t me = h->index + 1, old, new;

    if (!port || port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    if (handle_lock_live(h) < 0) {
        return -1;
    }
    p = port_ptr(h->xs, h->domid, port);
    if (p->state == XENSIM_PORT_FREE) {
        xensim_hv_unlock(h->xs);
        errno = EINVAL;
        return -1;
    }
    old = __atomic_load_n(&p->evstate, __ATOMIC_SEQ_CST);
    do {
        if (ev_owner(old) == me) {
            xensim_hv_unlock(h->xs);
            return 0;
        }
        if (ev_owner(old)) {
            xensim_hv_unlock(h->xs);
            errno = EBUSY;
            return -1;
        }
        /* Like a fresh bind: owned by us and unmasked. */
        new = (old & XENSIM_EV_PENDING) | (me << XENSIM_EV_OWNER_SHIFT);
    } while (!__atomic_compare_exchange_n(&p->evstate, &old, new, false,
                                          __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST));
    ev_mirror(p, new);
    p->handle = me;
    bit_set(h->adopted, port);
    bit_set(h->owned, port);
    xensim_hv_unlock(h->xs);
    /* Nobody credited an event raised while the port had no owner. */
    if (new & XENSIM_EV_PENDING) {
        self_kick(h, p);
    }
    return 0;
}

int xensim_evtchn_unbind(xensim_evtchn *h, uint32_t port)
{
    uint32_t ev;

    if (!port || port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    if (xensim_hv_lock(h->xs) < 0) {
        return -1;
    }
    if (!handle_owns(h, port)) {
        xensim_hv_unlock(h->xs);
        errno = ENOTCONN;
        return -1;
    }
    ev = port_close_locked(h->xs, h->domid, port);
    if (ev_deliverable(ev) && ev_owner(ev) == h->index + 1) {
        uint64_t val;

        /* Take back its credit, or skip it when it lands. */
        if (read(h->efd, &val, sizeof(val)) < 0) {
            __atomic_fetch_add(&h->debt, 1, __ATOMIC_RELAXED);
        }
    }
    bit_clear(h->owned, port);
    bit_clear(h->adopted, port);
    xensim_hv_unlock(h->xs);
    return 0;
}

int xensim_evtchn_notify(xensim_evtchn *h, uint32_t port)
{
    struct xensim_port *p;
    uint32_t rd, rport;

    if (!port || port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    if (!handle_owns(h, port)) {
        errno = ENOTCONN;
        return -1;
    }
    p = port_ptr(h->xs, h->domid, port);
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) !=
        XENSIM_PORT_INTERDOMAIN) {
        /* Xen's evtchn_send() drops events on an unbound port. */
        return 0;
    }
    rd = __atomic_load_n(&p->remote_dom, __ATOMIC_RELAXED);
    rport = __atomic_load_n(&p->remote_port, __ATOMIC_RELAXED);
    if (rd >= XENSIM_MAX_DOMAINS || !rport || rport >= XENSIM_MAX_PORTS) {
        return 0;   /* closed under us */
    }
    __atomic_fetch_add(&p->notifies, 1, __ATOMIC_RELAXED);
    port_raise(h->xs, port_ptr(h->xs, rd, rport));
    return 0;
}

/* Take the first deliverable port of @h: mask it, clear PENDING. */
static int pending_take(xensim_evtchn *h)
{
    struct xensim_port *ports = h->xs->hv->domains[h->domid].ports;
    uint32_t me = h->index + 1, i, port, start = h->next, ev;

    for (i = 0; i < XENSIM_MAX_PORTS; i++) {
        port = (start + i) % XENSIM_MAX_PORTS;
        if (!h->owned[port / 64]) {
            i += 63 - port % 64;    /* skip the rest of an empty word */
            continue;
        }
        if (!bit_test(h->owned, port)) {
            continue;
        }
        ev = __atomic_load_n(&ports[port].evstate, __ATOMIC_SEQ_CST);
        while (ev_owner(ev) == me && ev_deliverable(ev)) {
            uint32_t new = (ev & ~XENSIM_EV_PENDING) | XENSIM_EV_MASKED;

            if (__atomic_compare_exchange_n(&ports[port].evstate, &ev, new,
                                            false, __ATOMIC_SEQ_CST,
                                            __ATOMIC_SEQ_CST)) {
                ev_mirror(&ports[port], new);
                h->next = port + 1;
                return port;
            }
        }
        if (ev_owner(ev) != me) {
            /* closed by someone else (domain destroyed, reclaim) */
            bit_clear(h->owned, port);
            bit_clear(h->adopted, port);
        }
    }
    return -1;
}

int xensim_evtchn_pending(xensim_evtchn *h)
{
    uint32_t debt;
    uint64_t val;
    int port;

    for (;;) {
        /* One credit per port; EAGAIN when there is none. */
        if (read(h->efd, &val, sizeof(val)) < 0) {
            return -1;
        }
        debt = __atomic_load_n(&h->debt, __ATOMIC_RELAXED);
        while (debt && !__atomic_compare_exchange_n(&h->debt, &debt, debt - 1,
                                                    false, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED)) {
            /* retry with the fresh value */
        }
        if (debt) {
            continue;   /* credit of a port unbound before delivery */
        }
        port = pending_take(h);
        if (port > 0) {
            return port;
        }
        /* Credit of a port someone else closed: try the next one. */
    }
}

int xensim_evtchn_unmask(xensim_evtchn *h, uint32_t port)
{
    struct xensim_port *p;
    uint32_t old;

    if (!port || port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    if (!handle_owns(h, port)) {
        /* Linux's evtchn_write() ignores ports the user does not own. */
        return 0;
    }
    p = port_ptr(h->xs, h->domid, port);
    old = __atomic_fetch_and(&p->evstate, ~XENSIM_EV_MASKED, __ATOMIC_SEQ_CST);
    ev_mirror(p, old & ~XENSIM_EV_MASKED);
    if ((old & XENSIM_EV_MASKED) && (old & XENSIM_EV_PENDING) &&
        ev_owner(old) == h->index + 1) {
        self_kick(h, p);
    }
    return 0;
}

int xensim_virq_send(xensim *xs, uint32_t virq)
{
    struct xensim_port *p;
    uint32_t port;

    if (virq >= NR_VIRQS) {
        errno = EINVAL;
        return -1;
    }
    for (port = 1; port < XENSIM_MAX_PORTS; port++) {
        p = port_ptr(xs, 0, port);
        if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) == XENSIM_PORT_VIRQ &&
            p->virq == virq) {
            port_raise(xs, p);
        }
    }
    return 0;
}

int xensim_port_peer(xensim *xs, uint32_t domid, uint32_t port,
                     uint32_t *remote_dom, uint32_t *remote_port)
{
    struct xensim_port *p;

    if (domid >= XENSIM_MAX_DOMAINS || !port || port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    p = port_ptr(xs, domid, port);
    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) !=
        XENSIM_PORT_INTERDOMAIN) {
        errno = ENOTCONN;
        return -1;
    }
    *remote_dom = __atomic_load_n(&p->remote_dom, __ATOMIC_RELAXED);
    *remote_port = __atomic_load_n(&p->remote_port, __ATOMIC_RELAXED);
    return 0;
}

int xensim_port_stats(xensim *xs, uint32_t domid, uint32_t port,
                      uint64_t *notifies, uint64_t *wakeups)
{
    struct xensim_port *p;

    if (domid >= XENSIM_MAX_DOMAINS || !port || port >= XENSIM_MAX_PORTS) {
        errno = EINVAL;
        return -1;
    }
    p = port_ptr(xs, domid, port);
    if (notifies) {
        *notifies = __atomic_load_n(&p->notifies, __ATOMIC_RELAXED);
    }
    if (wakeups) {
        *wakeups = __atomic_load_n(&p->wakeups, __ATOMIC_RELAXED);
    }
    return 0;
}
