/*
 * xensim hypervisor state: domains, v1 grant tables and interdomain event
 * channels shared by every process of one simulated host.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * One simulated host lives in a run directory (XENSIM_DIR):
 *
 *   hv              struct xensim_hv_shared, the hypervisor's own state
 *   dom<N>.mem      domain N's memory, nr_pages * XC_PAGE_SIZE bytes
 *   dom<N>.gnttab   domain N's v1 grant table (grant_entry_v1_t array)
 *   dom0.xsd_kva    dom0's own xenstore ring page: what Linux dom0 offers
 *                   xenstored as /proc/xen/xsd_kva (its port, /proc/xen/
 *                   xsd_port, is domains[0].xenstore_port, unbound for 0)
 *
 * All three live on tmpfs (the run directory is under /dev/shm) and are
 * mapped MAP_SHARED by every participant: the toolstack (xensim run),
 * xenstored and QEMU through the libxen shim (as domain 0), and the guest
 * (libxensim-domu, e.g. inside fio) as domain N. Nothing runs between them
 * on the data path:
 *
 *  - a grant map is an mmap() of the granting domain's memory file;
 *  - a grant copy is a memcpy() from/to the domain's memory, mapped once;
 *  - an event-channel notify sets the remote port's pending bit and, when
 *    that bit was clear and the port unmasked, writes the eventfd of the
 *    handle that owns the remote port (obtained once with pidfd_getfd()).
 *
 * Event channel semantics follow Linux /dev/xen/evtchn (xenevtchn.h):
 * an event masks its port; xensim_evtchn_pending() returns the port and it
 * stays masked until xensim_evtchn_unmask(); a handle's fd is readable
 * while one of its unmasked ports is pending.
 *
 * Errors: functions returning int give 0 (or a value >= 0) on success and
 * -1 with errno set on failure, like the libxen calls they stand behind.
 * Control operations (domain and port lifetime) take a process-shared
 * robust mutex; notify/pending/unmask and grant copy are lock-free.
 */
#ifndef XENSIM_HV_H
#define XENSIM_HV_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <xen/xen.h>
#include <xen/grant_table.h>
#include <xen/event_channel.h>

#define XENSIM_PAGE_SIZE        4096u
#define XENSIM_MAX_DOMAINS      32u    /* domids 0 .. 31 */
#define XENSIM_MAX_PORTS        256u   /* per domain; port 0 is never used */
#define XENSIM_MAX_HANDLES      256u   /* evtchn handles, whole host */
#define XENSIM_GNTTAB_ENTRIES   8192u  /* 16 v1 frames per domain */

/*
 * Fixed guest-physical layout seeded at domain creation, as the domain
 * builder does (xc_dom_gnttab_seed): gfn 0 is the xenstore ring page
 * (struct xenstore_domain_interface), granted to dom0 in grant entry
 * GNTTAB_RESERVED_XENSTORE; the domain's xenstore event channel is an
 * unbound port for dom0 whose number is in xensim_domain.xenstore_port.
 * Pages from XENSIM_FIRST_FREE_GFN on belong to the guest.
 */
#define XENSIM_XENSTORE_GFN     0u
#define XENSIM_DOM0_KVA_FILE    "dom0.xsd_kva"

#define XENSIM_FIRST_FREE_GFN   1u

enum xensim_port_state {
    XENSIM_PORT_FREE = 0,
    XENSIM_PORT_UNBOUND,        /* waiting for remote_dom to bind */
    XENSIM_PORT_INTERDOMAIN,    /* connected to remote_dom:remote_port */
    XENSIM_PORT_VIRQ,           /* dom0 only: virq */
};

/*
 * xensim_port.evstate: owner (handle index + 1) in bits 16..31, plus
 * PENDING and MASKED, changed only with atomic read-modify-writes. The
 * one operation that makes a port pending-and-unmasked with an owner
 * (notify, unmask or adopt) adds exactly one credit to the owner's
 * eventfd (EFD_SEMAPHORE); pending() takes one credit per port returned.
 * So the fd is readable only when a port can be returned: no spurious
 * wakeups (xenstored exits if pending() fails after poll()).
 */
#define XENSIM_EV_PENDING       1u
#define XENSIM_EV_MASKED        2u
#define XENSIM_EV_OWNER_SHIFT   16

struct xensim_port {
    uint32_t state;             /* enum xensim_port_state */
    uint32_t remote_dom;
    uint32_t remote_port;
    uint32_t virq;
    uint32_t handle;            /* owning handle index + 1; 0 = none */
    uint32_t pending;           /* snapshot of XENSIM_EV_PENDING */
    uint32_t masked;            /* snapshot of XENSIM_EV_MASKED */
    uint32_t evstate;           /* atomic: the truth, see XENSIM_EV_* */
    uint64_t notifies;          /* atomic: notifies sent from this port */
    uint64_t wakeups;           /* atomic: eventfd writes to this port's owner */
};

enum xensim_domain_state {
    XENSIM_DOM_FREE = 0,
    XENSIM_DOM_LIVE,
    XENSIM_DOM_DYING,           /* destroyed, xenstored not yet told */
};

struct xensim_domain {
    uint32_t state;             /* enum xensim_domain_state */
    uint32_t xenstore_port;     /* unbound port in this domain, for dom0 */
    uint64_t nr_pages;
    uint64_t generation;        /* bumped on create: stale mappings detect reuse */
    char name[64];
    struct xensim_port ports[XENSIM_MAX_PORTS];
};

struct xensim_handle_slot {
    uint32_t in_use;
    uint32_t domid;             /* domain whose ports this handle owns */
    int32_t pid;                /* owner process */
    int32_t fd;                 /* owner's eventfd number, for pidfd_getfd() */
    uint64_t generation;        /* bumped on open: caches detect reuse */
};

/* Opaque per-process view of one simulated host. */
typedef struct xensim xensim;

/* Opaque per-process event channel handle (one eventfd, many ports). */
typedef struct xensim_evtchn xensim_evtchn;

/* --- host lifetime ------------------------------------------------------ */

/*
 * Create a new simulated host in @dir (made if missing; must be on a
 * filesystem that supports MAP_SHARED, normally tmpfs). Domain 0 exists
 * from the start. Returns NULL with errno set on failure.
 */
xensim *xensim_create(const char *dir);

/*
 * Attach to the host in @dir, or in $XENSIM_DIR when @dir is NULL.
 * Returns NULL with errno set (ENOENT: no host there).
 */
xensim *xensim_attach(const char *dir);

/* Detach; NULL is accepted. Mappings handed out stay valid until unmapped. */
void xensim_detach(xensim *xs);

const char *xensim_dir(const xensim *xs);

/* --- domains ------------------------------------------------------------ */

/*
 * Create domain @domid (1 .. XENSIM_MAX_DOMAINS-1) with @nr_pages pages of
 * memory and the seeded layout above. EEXIST if live, EINVAL if out of
 * range or nr_pages < 2.
 */
int xensim_domain_create(xensim *xs, uint32_t domid, uint64_t nr_pages,
                         const char *name);

/*
 * Destroy @domid: close its ports (peers' ports become UNBOUND, as Xen
 * does), remove its files, and raise VIRQ_DOM_EXC in dom0.
 */
int xensim_domain_destroy(xensim *xs, uint32_t domid);

/*
 * State of @domid (enum xensim_domain_state: FREE, LIVE or DYING), read
 * without the lock, for xc_domain_getinfo(). -1 + EINVAL if out of range.
 */
int xensim_domain_state(xensim *xs, uint32_t domid);

/* Snapshot of @domid's state into @out. ESRCH if the domain is not live. */
int xensim_domain_info(xensim *xs, uint32_t domid, struct xensim_domain *out);

/*
 * The whole memory of @domid mapped read-write in this process (mapped on
 * first use, cached). @nr_pages gets the size in pages. NULL + ESRCH if
 * not live. Used by grant copy and by the guest library.
 */
void *xensim_domain_mem(xensim *xs, uint32_t domid, uint64_t *nr_pages);

/* @domid's grant table (XENSIM_GNTTAB_ENTRIES entries), mapped shared. */
grant_entry_v1_t *xensim_gnttab(xensim *xs, uint32_t domid);

/* --- grants, seen from the mapping/copying domain ----------------------- */

/*
 * Map @count grant refs of domain @granter for domain @mapper into one
 * contiguous range (MAP_FIXED over a reserved area). @prot is PROT_READ
 * or PROT_READ|PROT_WRITE. Each entry must be GTF_permit_access for
 * @mapper and, for PROT_WRITE, not GTF_readonly; GTF_reading (and
 * GTF_writing for a writable map) is set while mapped. All or nothing:
 * on failure nothing stays mapped, errno is EINVAL (bad ref or entry) or
 * EPERM (read-only entry mapped writable). Returns the address or NULL.
 */
void *xensim_grant_map(xensim *xs, uint32_t mapper, uint32_t granter,
                       uint32_t count, const uint32_t *refs, int prot);

/* Undo xensim_grant_map(): clears GTF_reading/GTF_writing, munmap(). */
int xensim_grant_unmap(xensim *xs, void *addr, uint32_t count);

/*
 * One grant copy segment as GNTTABOP_copy takes it; @status gets a GNTST_*
 * value: GNTST_bad_domain (no such granter), GNTST_bad_gntref (ref out of
 * range), GNTST_permission_denied (entry not GTF_permit_access for the
 * copier, or destination GTF_readonly), GNTST_general_error (range beyond
 * the page). Returns the number of segments that failed.
 */
struct xensim_copy_seg {
    bool to_guest;              /* true: local -> grant; false: grant -> local */
    uint32_t granter;
    uint32_t ref;
    uint16_t offset;            /* within the granted page */
    uint16_t len;
    void *local;
    int16_t status;
};
int xensim_grant_copy(xensim *xs, uint32_t copier,
                      struct xensim_copy_seg *segs, uint32_t count);

/* --- event channels ----------------------------------------------------- */

/* Open a handle owning ports of @domid; its eventfd is xensim_evtchn_fd(). */
xensim_evtchn *xensim_evtchn_open(xensim *xs, uint32_t domid);
int xensim_evtchn_close(xensim_evtchn *h);      /* NULL accepted */
int xensim_evtchn_fd(const xensim_evtchn *h);

/* Allocate an unbound local port that @remote_dom may bind. Port or -1. */
int xensim_evtchn_alloc_unbound(xensim_evtchn *h, uint32_t remote_dom);

/*
 * Bind a local port to @remote_dom's UNBOUND port @remote_port (which must
 * be offered to this domain). Both become INTERDOMAIN. Local port or -1
 * (EINVAL: remote port not unbound for us; ESRCH: no such domain).
 */
int xensim_evtchn_bind_interdomain(xensim_evtchn *h, uint32_t remote_dom,
                                   uint32_t remote_port);

/* dom0: bind a VIRQ (only VIRQ_DOM_EXC is ever raised). Port or -1. */
int xensim_evtchn_bind_virq(xensim_evtchn *h, uint32_t virq);

/*
 * Take ownership of an existing local port of the handle's domain that no
 * handle owns yet (ports the domain builder made, e.g. the xenstore port).
 * EBUSY if another handle owns it.
 */
int xensim_evtchn_adopt(xensim_evtchn *h, uint32_t port);

/* Close a local port; an INTERDOMAIN peer goes back to UNBOUND. */
int xensim_evtchn_unbind(xensim_evtchn *h, uint32_t port);

/* Send an event on local @port to its peer. ENOTCONN if not connected. */
int xensim_evtchn_notify(xensim_evtchn *h, uint32_t port);

/*
 * Next pending, unmasked port of this handle: it is masked and its pending
 * bit cleared. -1 with errno EAGAIN when none. Never blocks.
 */
int xensim_evtchn_pending(xensim_evtchn *h);

/* Unmask @port; if it became pending while masked the fd turns readable. */
int xensim_evtchn_unmask(xensim_evtchn *h, uint32_t port);

/* Raise @virq in dom0 (every port bound to it). */
int xensim_virq_send(xensim *xs, uint32_t virq);

/* Counters of @domid:@port (struct xensim_port notifies/wakeups). */
int xensim_port_stats(xensim *xs, uint32_t domid, uint32_t port,
                      uint64_t *notifies, uint64_t *wakeups);

/* The peer of interdomain port @domid:@port; -1/ENOTCONN when unbound. */
int xensim_port_peer(xensim *xs, uint32_t domid, uint32_t port,
                     uint32_t *remote_dom, uint32_t *remote_port);

#endif /* XENSIM_HV_H */
