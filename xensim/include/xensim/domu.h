/*
 * xensim domU library: the guest side of a simulated host.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 * A process that plays domain N (a test, or fio through the xenblk engine)
 * opens the host with xensim_domu_open() and then owns:
 *
 *  - the domain's memory (mapped shared, see hv.h): a first-fit page
 *    allocator hands out pages from XENSIM_FIRST_FREE_GFN on;
 *  - the domain's v1 grant table: entries from GNTTAB_NR_RESERVED_ENTRIES
 *    on are allocated here and filled as xen/grant_table.h prescribes;
 *  - a xenstore client (xensim_xs) that speaks xs_wire.h messages over the
 *    domain's xenstore ring page (struct xenstore_domain_interface at gfn
 *    XENSIM_XENSTORE_GFN), woken by the domain's xenstore event channel,
 *    exactly as a PV kernel's xenbus driver does.
 *
 * One process per domain, one thread per handle: nothing here locks.
 * Errors: -1 (or NULL) with errno set, nothing logged unless stated.
 */
#ifndef XENSIM_DOMU_H
#define XENSIM_DOMU_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xensim/hv.h"

typedef struct xensim_domu xensim_domu;

/* --- the domain ---------------------------------------------------------- */

/*
 * Attach to the host in @dir (NULL: $XENSIM_DIR) as live domain @domid.
 * ENOENT: no host; ESRCH: domain not live.
 */
xensim_domu *xensim_domu_open(const char *dir, uint32_t domid);

/* Close; NULL accepted. Grants and pages are not revoked (domain lives on). */
void xensim_domu_close(xensim_domu *d);

xensim *xensim_domu_hv(xensim_domu *d);
uint32_t xensim_domu_domid(const xensim_domu *d);

/* Size of the domain's memory, in 4 KiB pages. */
uint64_t xensim_domu_nr_pages(const xensim_domu *d);

/* Address of page @gfn in this process, or NULL (EINVAL) if out of range. */
void *xensim_domu_page(xensim_domu *d, uint64_t gfn);

/*
 * Guest frame number of the page holding @p, or -1 (EFAULT) when @p is not
 * inside the domain's memory.
 */
int64_t xensim_domu_gfn(xensim_domu *d, const void *p);

/*
 * Allocate @n contiguous, zeroed pages of domain memory (first fit from
 * XENSIM_FIRST_FREE_GFN). Returns their address or NULL (ENOMEM).
 */
void *xensim_domu_alloc_pages(xensim_domu *d, size_t n);

/* Free pages from xensim_domu_alloc_pages(); NULL accepted. */
void xensim_domu_free_pages(xensim_domu *d, void *p, size_t n);

/*
 * Grant domain @remote access to page @gfn (read-only if @readonly).
 * Writes domid and frame, then a write barrier, then the flags, as
 * xen/grant_table.h ("Introducing a valid entry") requires. Returns the
 * grant reference (>= GNTTAB_NR_RESERVED_ENTRIES) or -1 (ENOSPC: table
 * full, EINVAL: bad gfn).
 */
int xensim_domu_grant(xensim_domu *d, uint32_t remote, uint64_t gfn,
                      bool readonly);

/*
 * Revoke grant @ref and free it. Fails with EBUSY, leaving the entry
 * intact, while the remote has it mapped (GTF_reading/GTF_writing set;
 * xen/grant_table.h "Invalidating an in-use GTF_permit_access entry").
 */
int xensim_domu_end_grant(xensim_domu *d, uint32_t ref);

/* Raw access to this domain's grant table, for tests. */
grant_entry_v1_t *xensim_domu_gnttab(xensim_domu *d);

/* --- xenstore client over the ring page ---------------------------------- */

typedef struct xensim_xs xensim_xs;

#define XENSIM_XBT_NULL 0u          /* "no transaction" (xs_wire tx_id 0) */

/*
 * Connect to xenstore through the domain's ring page: opens an event
 * channel handle of the domain and adopts its xenstore port (EBUSY if
 * another handle already owns it: one client per domain at a time).
 * Requires the domain to have been introduced to xenstored.
 */
xensim_xs *xensim_xs_open(xensim_domu *d);

/* Close; NULL accepted. Pending watch events are dropped. */
void xensim_xs_close(xensim_xs *xs);

/*
 * Time a blocking call may wait for xenstored, in milliseconds (default
 * 5000; < 0 waits forever). A call that runs out fails with ETIMEDOUT.
 */
void xensim_xs_set_timeout(xensim_xs *xs, int timeout_ms);

/* The event channel fd: readable when xenstored has written to the ring. */
int xensim_xs_fd(const xensim_xs *xs);

/*
 * Paths are absolute ("/local/domain/0/backend/...") or relative to the
 * domain's home (/local/domain/<domid>), as xenstored resolves them.
 * Errors come from xenstored's XS_ERROR replies, mapped to errno with
 * xs_wire.h's xsd_errors table (ENOENT, EACCES, EAGAIN, EINVAL, ...).
 */

/* Value of @path (NUL terminated, g_free it); @len gets its length. */
char *xensim_xs_read(xensim_xs *xs, uint32_t tx, const char *path,
                     unsigned int *len);

/* Read @path and parse it as an unsigned decimal (EINVAL if not one). */
int xensim_xs_read_u64(xensim_xs *xs, uint32_t tx, const char *path,
                       uint64_t *val);

int xensim_xs_write(xensim_xs *xs, uint32_t tx, const char *path,
                    const void *val, unsigned int len);
int xensim_xs_printf(xensim_xs *xs, uint32_t tx, const char *path,
                     const char *fmt, ...) __attribute__((format(printf, 4, 5)));
int xensim_xs_mkdir(xensim_xs *xs, uint32_t tx, const char *path);
int xensim_xs_rm(xensim_xs *xs, uint32_t tx, const char *path);

/* Children of @path: NULL-terminated vector (g_strfreev), count in @n. */
char **xensim_xs_directory(xensim_xs *xs, uint32_t tx, const char *path,
                           unsigned int *n);

/*
 * Set the permissions of @path: @perms[0] is the owner and default access,
 * the rest per-domain grants, each "<r|w|b|n><domid>" (docs/misc/
 * xenstore.txt, "SET_PERMS").
 */
int xensim_xs_set_perms(xensim_xs *xs, uint32_t tx, const char *path,
                        const char *const *perms, unsigned int n);

/* Permissions of @path in the same format (g_strfreev), count in @n. */
char **xensim_xs_get_perms(xensim_xs *xs, uint32_t tx, const char *path,
                           unsigned int *n);

/*
 * Watch @path and everything below it. xenstored queues one event right
 * away (docs/misc/xenstore.txt: "WATCH ... fires immediately"), then one
 * per change. Events are queued here until xensim_xs_read_watch().
 */
int xensim_xs_watch(xensim_xs *xs, const char *path, const char *token);
int xensim_xs_unwatch(xensim_xs *xs, const char *path, const char *token);

/*
 * Next watch event: @path and @token (g_free both) of the changed node.
 * Waits up to @timeout_ms (0: do not wait, < 0: forever); ETIMEDOUT.
 */
int xensim_xs_read_watch(xensim_xs *xs, int timeout_ms, char **path,
                         char **token);

/* Number of watch events received and not yet read. */
unsigned int xensim_xs_pending_watches(const xensim_xs *xs);

int xensim_xs_transaction_start(xensim_xs *xs, uint32_t *tx);

/*
 * End transaction @tx, committing unless @abort. A commit that conflicts
 * with another change fails with EAGAIN: the caller redoes the whole
 * transaction.
 */
int xensim_xs_transaction_end(xensim_xs *xs, uint32_t tx, bool abort);

/*
 * Wait until node @path reads as an unsigned value v < 64 with bit v set
 * in @mask (e.g. 1 << XenbusStateConnected), or until @timeout_ms. Uses a
 * private watch, so it sleeps until the node changes; other watch events
 * stay queued. The value last read goes to @last (UINT64_MAX if the node
 * was missing). ETIMEDOUT.
 */
int xensim_xs_wait_mask(xensim_xs *xs, const char *path, uint64_t mask,
                        int timeout_ms, uint64_t *last);

#endif /* XENSIM_DOMU_H */
