/*
 * xensim hypervisor state: layout of the shared "hv" file and the
 * per-process view. Private to libxensim-hv.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 */
#ifndef XENSIM_HV_INT_H
#define XENSIM_HV_INT_H

#include <pthread.h>

#include <glib.h>

#include "xensim/hv.h"
#include "xensim/log.h"

#define XENSIM_HV_MAGIC     0x766873696d73656eull   /* "nesmishv" */
#define XENSIM_HV_VERSION   1u

/* Grant pin counts (hv->active): readers in the low half, writers high. */
#define XENSIM_PIN_RD       1u
#define XENSIM_PIN_WR       (1u << 16)

/* The "hv" file: one per simulated host, mapped MAP_SHARED by everyone. */
struct xensim_hv_shared {
    uint64_t magic;             /* XENSIM_HV_MAGIC once initialised */
    uint32_t version;           /* XENSIM_HV_VERSION */
    uint32_t size;              /* sizeof(struct xensim_hv_shared) */
    pthread_mutex_t lock;       /* robust, process-shared: control ops */
    uint64_t next_generation;   /* under lock: domains and handles */
    struct xensim_domain domains[XENSIM_MAX_DOMAINS];
    struct xensim_handle_slot handles[XENSIM_MAX_HANDLES];
    /* Xen's active grant entries, reduced to pin counts (under lock). */
    uint32_t active[XENSIM_MAX_DOMAINS][XENSIM_GNTTAB_ENTRIES];
};

/* This process's mappings of one domain, valid for one generation. */
struct xensim_dommap {
    uint64_t generation;        /* 0: nothing mapped; published last */
    int memfd;
    void *mem;
    uint64_t nr_pages;
    grant_entry_v1_t *gnttab;
};

/* A cached dup of another handle's eventfd (pidfd_getfd()). */
struct xensim_peer {
    uint64_t generation;
    int fd;
};

struct xensim {
    char *dir;
    int dirfd;
    struct xensim_hv_shared *hv;
    pthread_mutex_t lock;       /* guards dom[] updates, peer[], maps */
    struct xensim_dommap dom[XENSIM_MAX_DOMAINS];
    struct xensim_peer peer[XENSIM_MAX_HANDLES];
    GHashTable *maps;           /* address -> struct xensim_grant_mapping */
};

/* hv.c */
int xensim_hv_lock(xensim *xs);
void xensim_hv_unlock(xensim *xs);
struct xensim_dommap *xensim_dommap_get(xensim *xs, uint32_t domid);

/* evtchn.c */
void xensim_evtchn_close_domain_ports(xensim *xs, uint32_t domid);
void xensim_evtchn_fini(xensim *xs);

#endif /* XENSIM_HV_INT_H */
