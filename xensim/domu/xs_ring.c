/*
 * xensim domU library: xenstore client over the domain's ring page.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * The wire format is xen/io/xs_wire.h: a struct xsd_sockmsg header
 * (type, req_id, tx_id, len) followed by len payload bytes, carried as a
 * byte stream over the two 1 KiB rings of struct xenstore_domain_interface
 * (docs/misc/xenstore-ring.txt). A message may be larger than the ring,
 * so both directions move it piecewise and wait for the event channel in
 * between. Replies carry the request's req_id; XS_WATCH_EVENT messages
 * arrive unsolicited at any point and are queued.
 */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <time.h>

#include <glib.h>

#include "domu-int.h"

#define XS_DEFAULT_TIMEOUT_MS 5000

struct xs_watch_event {
    char *path;
    char *token;
};

struct xensim_xs {
    xensim_domu *d;
    struct xenstore_domain_interface *intf;
    xensim_evtchn *evtchn;
    uint32_t port;
    int timeout_ms;
    uint32_t next_req_id;
    GQueue events;              /* struct xs_watch_event * */
};

/* --- the ring as a byte stream ------------------------------------------ */

ssize_t xs_ring_put(char *ring, uint32_t *cons_p, uint32_t *prod_p,
                    const void *data, size_t len)
{
    uint32_t cons = DOMU_READ_ONCE(*cons_p);
    uint32_t prod = DOMU_READ_ONCE(*prod_p);
    size_t space, n, off, chunk;

    /* The space we are about to fill must have been consumed: read cons
     * before writing data (xenstore-ring.txt: "mb() ... before writing"). */
    xen_mb();
    if (prod - cons > XENSTORE_RING_SIZE) {
        errno = EIO;
        return -1;
    }
    space = XENSTORE_RING_SIZE - (prod - cons);
    n = MIN(len, space);
    for (off = 0; off < n; off += chunk) {
        uint32_t idx = MASK_XENSTORE_IDX(prod + off);

        chunk = MIN(n - off, XENSTORE_RING_SIZE - idx);
        memcpy(ring + idx, (const char *)data + off, chunk);
    }
    xen_wmb();                  /* data visible before the new prod */
    DOMU_WRITE_ONCE(*prod_p, prod + n);
    return n;
}

ssize_t xs_ring_get(char *ring, uint32_t *cons_p, uint32_t *prod_p,
                    void *data, size_t len)
{
    uint32_t prod = DOMU_READ_ONCE(*prod_p);
    uint32_t cons = DOMU_READ_ONCE(*cons_p);
    size_t avail, n, off, chunk;

    xen_rmb();                  /* prod read before the data it covers */
    if (prod - cons > XENSTORE_RING_SIZE) {
        errno = EIO;
        return -1;
    }
    avail = prod - cons;
    n = MIN(len, avail);
    for (off = 0; off < n; off += chunk) {
        uint32_t idx = MASK_XENSTORE_IDX(cons + off);

        chunk = MIN(n - off, XENSTORE_RING_SIZE - idx);
        memcpy((char *)data + off, ring + idx, chunk);
    }
    xen_mb();                   /* data read before the space is freed */
    DOMU_WRITE_ONCE(*cons_p, cons + n);
    return n;
}

int xs_error_to_errno(const char *s)
{
    size_t i;

    for (i = 0; i < G_N_ELEMENTS(xsd_errors); i++) {
        if (!strcmp(s, xsd_errors[i].errstring)) {
            return xsd_errors[i].errnum;
        }
    }
    return EINVAL;
}

/* --- waiting for xenstored ---------------------------------------------- */

static int64_t deadline_after(int timeout_ms)
{
    return timeout_ms < 0 ? -1 : g_get_monotonic_time() +
                                 (int64_t)timeout_ms * 1000;
}

/*
 * Wait for an event on the xenstore port until @deadline (monotonic us,
 * -1 = none), then consume and unmask it. Returns 0 after an event (or a
 * spurious wakeup: callers re-check the ring), -1 ETIMEDOUT.
 */
static int xs_wait(xensim_xs *xs, int64_t deadline)
{
    struct pollfd pfd = { .fd = xensim_evtchn_fd(xs->evtchn),
                          .events = POLLIN };
    int timeout = -1, r, port;

    if (deadline >= 0) {
        int64_t left = deadline - g_get_monotonic_time();

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        timeout = (left + 999) / 1000;
    }
    r = poll(&pfd, 1, timeout);
    if (r < 0 && errno != EINTR) {
        return -1;
    }
    if (r == 0) {
        errno = ETIMEDOUT;
        return -1;
    }
    while ((port = xensim_evtchn_pending(xs->evtchn)) >= 0) {
        xensim_evtchn_unmask(xs->evtchn, port);
    }
    return 0;
}

static int xs_send_bytes(xensim_xs *xs, const void *data, size_t len,
                         int64_t deadline)
{
    const char *p = data;

    while (len) {
        ssize_t n = xs_ring_put(xs->intf->req, &xs->intf->req_cons,
                                &xs->intf->req_prod, p, len);
        if (n < 0) {
            return -1;
        }
        if (n) {
            xensim_evtchn_notify(xs->evtchn, xs->port);
            p += n;
            len -= n;
        } else if (xs_wait(xs, deadline) < 0) {
            return -1;
        }
    }
    return 0;
}

static int xs_recv_bytes(xensim_xs *xs, void *data, size_t len,
                         int64_t deadline)
{
    char *p = data;

    while (len) {
        ssize_t n = xs_ring_get(xs->intf->rsp, &xs->intf->rsp_cons,
                                &xs->intf->rsp_prod, p, len);
        if (n < 0) {
            return -1;
        }
        if (n) {
            /* Tell xenstored there is space again (it may be waiting). */
            xensim_evtchn_notify(xs->evtchn, xs->port);
            p += n;
            len -= n;
        } else if (xs_wait(xs, deadline) < 0) {
            return -1;
        }
    }
    return 0;
}

/*
 * Receive one message; @body gets its payload plus a NUL (g_free).
 * Rejects payloads over XENSTORE_PAYLOAD_MAX (EIO): the peer is broken.
 */
static int xs_recv_msg(xensim_xs *xs, struct xsd_sockmsg *hdr, char **body,
                       int64_t deadline)
{
    if (xs_recv_bytes(xs, hdr, sizeof(*hdr), deadline) < 0) {
        return -1;
    }
    if (hdr->len > XENSTORE_PAYLOAD_MAX) {
        errno = EIO;
        return -1;
    }
    *body = g_malloc(hdr->len + 1);
    if (xs_recv_bytes(xs, *body, hdr->len, deadline) < 0) {
        g_free(*body);
        *body = NULL;
        return -1;
    }
    (*body)[hdr->len] = '\0';
    return 0;
}

static void xs_queue_event(xensim_xs *xs, char *body, uint32_t len)
{
    struct xs_watch_event *ev;
    size_t plen = strnlen(body, len);

    if (plen >= len) {
        g_free(body);           /* malformed: no token */
        return;
    }
    ev = g_new(struct xs_watch_event, 1);
    ev->path = g_strdup(body);
    ev->token = g_strndup(body + plen + 1, len - plen - 1);
    g_free(body);
    g_queue_push_tail(&xs->events, ev);
}

/*
 * One request/reply exchange: send @type with the @niov payload pieces,
 * queue any watch events met on the way, and return the reply payload
 * (NUL-terminated, g_free) with its length in @rlen. XS_ERROR replies
 * become -1/errno.
 */
static char *xs_talk(xensim_xs *xs, uint32_t type, uint32_t tx,
                     const struct iovec *iov, int niov, unsigned int *rlen)
{
    int64_t deadline = deadline_after(xs->timeout_ms);
    struct xsd_sockmsg hdr = { .type = type, .tx_id = tx };
    int i;

    hdr.req_id = ++xs->next_req_id;
    for (i = 0; i < niov; i++) {
        hdr.len += iov[i].iov_len;
    }
    if (hdr.len > XENSTORE_PAYLOAD_MAX) {
        errno = E2BIG;
        return NULL;
    }
    if (xs_send_bytes(xs, &hdr, sizeof(hdr), deadline) < 0) {
        return NULL;
    }
    for (i = 0; i < niov; i++) {
        if (xs_send_bytes(xs, iov[i].iov_base, iov[i].iov_len,
                          deadline) < 0) {
            return NULL;
        }
    }

    for (;;) {
        struct xsd_sockmsg rhdr;
        char *body;

        if (xs_recv_msg(xs, &rhdr, &body, deadline) < 0) {
            return NULL;
        }
        if (rhdr.type == XS_WATCH_EVENT) {
            xs_queue_event(xs, body, rhdr.len);
            continue;
        }
        if (rhdr.req_id != hdr.req_id) {
            /* A reply to a request that timed out earlier: drop it. */
            g_free(body);
            continue;
        }
        if (rhdr.type == XS_ERROR) {
            int err = xs_error_to_errno(body);

            g_free(body);
            errno = err;
            return NULL;
        }
        if (rhdr.type != type) {
            g_free(body);
            errno = EIO;
            return NULL;
        }
        if (rlen) {
            *rlen = rhdr.len;
        }
        return body;
    }
}

/* Exchange whose reply is just "OK". */
static int xs_talk_ok(xensim_xs *xs, uint32_t type, uint32_t tx,
                      const struct iovec *iov, int niov)
{
    char *r = xs_talk(xs, type, tx, iov, niov, NULL);

    g_free(r);
    return r ? 0 : -1;
}

#define IOV_STR(s) { .iov_base = (void *)(s), .iov_len = strlen(s) + 1 }

/* --- public calls -------------------------------------------------------- */

xensim_xs *xensim_xs_open(xensim_domu *d)
{
    xensim *hv = xensim_domu_hv(d);
    struct xensim_domain info;
    xensim_xs *xs;
    int err;

    if (xensim_domain_info(hv, xensim_domu_domid(d), &info) < 0) {
        return NULL;
    }
    xs = g_new0(xensim_xs, 1);
    xs->d = d;
    xs->timeout_ms = XS_DEFAULT_TIMEOUT_MS;
    xs->port = info.xenstore_port;
    g_queue_init(&xs->events);
    xs->intf = xensim_domu_page(d, XENSIM_XENSTORE_GFN);
    xs->evtchn = xensim_evtchn_open(hv, xensim_domu_domid(d));
    if (!xs->evtchn || xensim_evtchn_adopt(xs->evtchn, xs->port) < 0) {
        goto err;
    }
    return xs;

err:
    err = errno;
    xensim_xs_close(xs);
    errno = err;
    return NULL;
}

static void xs_event_free(gpointer p)
{
    struct xs_watch_event *ev = p;

    g_free(ev->path);
    g_free(ev->token);
    g_free(ev);
}

void xensim_xs_close(xensim_xs *xs)
{
    if (!xs) {
        return;
    }
    /*
     * Closing the handle would close the xenstore port too; the port
     * belongs to the domain, so only give up ownership by closing the
     * handle when the hv supports that. xensim_evtchn_close() releases
     * the handle's ports (adopted ones return to unowned).
     */
    xensim_evtchn_close(xs->evtchn);
    g_queue_clear_full(&xs->events, xs_event_free);
    g_free(xs);
}

void xensim_xs_set_timeout(xensim_xs *xs, int timeout_ms)
{
    xs->timeout_ms = timeout_ms;
}

int xensim_xs_fd(const xensim_xs *xs)
{
    return xensim_evtchn_fd(xs->evtchn);
}

char *xensim_xs_read(xensim_xs *xs, uint32_t tx, const char *path,
                     unsigned int *len)
{
    struct iovec iov[] = { IOV_STR(path) };

    return xs_talk(xs, XS_READ, tx, iov, 1, len);
}

int xensim_xs_read_u64(xensim_xs *xs, uint32_t tx, const char *path,
                       uint64_t *val)
{
    char *s = xensim_xs_read(xs, tx, path, NULL);
    char *end;
    int ret = 0;

    if (!s) {
        return -1;
    }
    errno = 0;
    *val = strtoull(s, &end, 10);
    if (!*s || *end || errno || *s == '-') {
        errno = EINVAL;
        ret = -1;
    }
    g_free(s);
    return ret;
}

int xensim_xs_write(xensim_xs *xs, uint32_t tx, const char *path,
                    const void *val, unsigned int len)
{
    struct iovec iov[] = { IOV_STR(path),
                           { .iov_base = (void *)val, .iov_len = len } };

    return xs_talk_ok(xs, XS_WRITE, tx, iov, 2);
}

int xensim_xs_printf(xensim_xs *xs, uint32_t tx, const char *path,
                     const char *fmt, ...)
{
    va_list ap;
    char *s;
    int ret;

    va_start(ap, fmt);
    s = g_strdup_vprintf(fmt, ap);
    va_end(ap);
    ret = xensim_xs_write(xs, tx, path, s, strlen(s));
    g_free(s);
    return ret;
}

int xensim_xs_mkdir(xensim_xs *xs, uint32_t tx, const char *path)
{
    struct iovec iov[] = { IOV_STR(path) };

    return xs_talk_ok(xs, XS_MKDIR, tx, iov, 1);
}

int xensim_xs_rm(xensim_xs *xs, uint32_t tx, const char *path)
{
    struct iovec iov[] = { IOV_STR(path) };

    return xs_talk_ok(xs, XS_RM, tx, iov, 1);
}

/* Split a reply of NUL-terminated strings into a vector. */
static char **split_nul(char *body, unsigned int len, unsigned int *n)
{
    GPtrArray *v = g_ptr_array_new();
    unsigned int off = 0;

    while (off < len) {
        size_t l = strnlen(body + off, len - off);

        g_ptr_array_add(v, g_strndup(body + off, l));
        off += l + 1;
    }
    if (n) {
        *n = v->len;
    }
    g_ptr_array_add(v, NULL);
    g_free(body);
    return (char **)g_ptr_array_free(v, FALSE);
}

char **xensim_xs_directory(xensim_xs *xs, uint32_t tx, const char *path,
                           unsigned int *n)
{
    struct iovec iov[] = { IOV_STR(path) };
    unsigned int len;
    char *r = xs_talk(xs, XS_DIRECTORY, tx, iov, 1, &len);

    return r ? split_nul(r, len, n) : NULL;
}

int xensim_xs_set_perms(xensim_xs *xs, uint32_t tx, const char *path,
                        const char *const *perms, unsigned int n)
{
    struct iovec *iov = g_new(struct iovec, n + 1);
    unsigned int i;
    int ret;

    iov[0] = (struct iovec)IOV_STR(path);
    for (i = 0; i < n; i++) {
        iov[i + 1] = (struct iovec)IOV_STR(perms[i]);
    }
    ret = xs_talk_ok(xs, XS_SET_PERMS, tx, iov, n + 1);
    g_free(iov);
    return ret;
}

char **xensim_xs_get_perms(xensim_xs *xs, uint32_t tx, const char *path,
                           unsigned int *n)
{
    struct iovec iov[] = { IOV_STR(path) };
    unsigned int len;
    char *r = xs_talk(xs, XS_GET_PERMS, tx, iov, 1, &len);

    return r ? split_nul(r, len, n) : NULL;
}

int xensim_xs_watch(xensim_xs *xs, const char *path, const char *token)
{
    struct iovec iov[] = { IOV_STR(path), IOV_STR(token) };

    return xs_talk_ok(xs, XS_WATCH, XENSIM_XBT_NULL, iov, 2);
}

int xensim_xs_unwatch(xensim_xs *xs, const char *path, const char *token)
{
    struct iovec iov[] = { IOV_STR(path), IOV_STR(token) };

    return xs_talk_ok(xs, XS_UNWATCH, XENSIM_XBT_NULL, iov, 2);
}

unsigned int xensim_xs_pending_watches(const xensim_xs *xs)
{
    return g_queue_get_length((GQueue *)&xs->events);
}

int xensim_xs_read_watch(xensim_xs *xs, int timeout_ms, char **path,
                         char **token)
{
    int64_t deadline = deadline_after(timeout_ms);
    struct xs_watch_event *ev;

    while (g_queue_is_empty(&xs->events)) {
        struct xsd_sockmsg hdr;
        char *body;

        /* Only read when a whole header is there: never block mid-way. */
        if (DOMU_READ_ONCE(xs->intf->rsp_prod) ==
            DOMU_READ_ONCE(xs->intf->rsp_cons)) {
            if (timeout_ms == 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            if (xs_wait(xs, deadline) < 0) {
                return -1;
            }
            continue;
        }
        if (xs_recv_msg(xs, &hdr, &body, deadline_after(xs->timeout_ms))
            < 0) {
            return -1;
        }
        if (hdr.type == XS_WATCH_EVENT) {
            xs_queue_event(xs, body, hdr.len);
        } else {
            g_free(body);       /* a stale reply */
        }
    }
    ev = g_queue_pop_head(&xs->events);
    *path = ev->path;
    *token = ev->token;
    g_free(ev);
    return 0;
}

int xensim_xs_transaction_start(xensim_xs *xs, uint32_t *tx)
{
    struct iovec iov[] = { IOV_STR("") };
    char *r = xs_talk(xs, XS_TRANSACTION_START, XENSIM_XBT_NULL, iov, 1,
                      NULL);
    char *end;

    if (!r) {
        return -1;
    }
    *tx = strtoul(r, &end, 10);
    if (end == r || *tx == XENSIM_XBT_NULL) {
        g_free(r);
        errno = EIO;
        return -1;
    }
    g_free(r);
    return 0;
}

int xensim_xs_transaction_end(xensim_xs *xs, uint32_t tx, bool abort)
{
    struct iovec iov[] = { IOV_STR(abort ? "F" : "T") };

    return xs_talk_ok(xs, XS_TRANSACTION_END, tx, iov, 1);
}

int xensim_xs_wait_mask(xensim_xs *xs, const char *path, uint64_t mask,
                        int timeout_ms, uint64_t *last)
{
    int64_t deadline = deadline_after(timeout_ms);
    char *token = g_strdup_printf("xensim-wait-%u", ++xs->next_req_id);
    GQueue other = G_QUEUE_INIT;
    uint64_t v = UINT64_MAX;
    int ret = -1, err = 0;
    GList *l;

    if (xensim_xs_watch(xs, path, token) < 0) {
        g_free(token);
        return -1;
    }
    for (;;) {
        char *epath, *etoken;

        if (xensim_xs_read_u64(xs, XENSIM_XBT_NULL, path, &v) < 0) {
            v = UINT64_MAX;
        }
        if (v < 64 && (mask & (1ull << v))) {
            ret = 0;
            break;
        }
        /* Sleep until our watch fires; keep other events for the caller. */
        for (;;) {
            int left = deadline < 0 ? -1 :
                (int)MAX(1, (deadline - g_get_monotonic_time()) / 1000);

            if (deadline >= 0 && g_get_monotonic_time() >= deadline) {
                err = ETIMEDOUT;
                goto out;
            }
            if (xensim_xs_read_watch(xs, left, &epath, &etoken) < 0) {
                err = errno;
                goto out;
            }
            if (!strcmp(etoken, token)) {
                g_free(epath);
                g_free(etoken);
                break;
            }
            struct xs_watch_event *ev = g_new(struct xs_watch_event, 1);
            ev->path = epath;
            ev->token = etoken;
            g_queue_push_tail(&other, ev);
        }
    }
out:
    xensim_xs_unwatch(xs, path, token);
    /* Drop our own late events, put the others back in front, in order. */
    for (l = xs->events.head; l;) {
        GList *next = l->next;
        struct xs_watch_event *ev = l->data;

        if (!strcmp(ev->token, token)) {
            xs_event_free(ev);
            g_queue_delete_link(&xs->events, l);
        }
        l = next;
    }
    while (!g_queue_is_empty(&other)) {
        g_queue_push_head(&xs->events, g_queue_pop_tail(&other));
    }
    if (last) {
        *last = v;
    }
    g_free(token);
    errno = err;
    return ret;
}
