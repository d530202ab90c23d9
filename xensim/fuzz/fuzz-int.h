/*
 * xenblk-fuzz: private definitions shared by its files.
 *
 * Copyright (c) 2026 The xenblk fork authors
 * SPDX-License-Identifier: GPL-2.0-or-later
 *
 *   xenblk-fuzz.c   the driver: options, the stack, restarts, the summary
 *   fuzz-qmp.c      the QMP client (is QEMU alive and answering?)
 *   fuzz-ring.c     connecting, the shared ring, raw requests, batches
 *   fuzz-disk.c     the disk model and the requests it checks
 *   fuzz-cases.c    the directed cases and their run
 *   fuzz-faults.c   faults during I/O
 *   fuzz-random.c   random mode
 *
 * All of them share one state, F (one fuzzer, one stack at a time).
 */
#ifndef XENSIM_FUZZ_INT_H
#define XENSIM_FUZZ_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <glib.h>
#include <xen/io/blkif.h>

#include "xensim/blkfront.h"
#include "xensim/domu.h"
#include "xensim/toolstack.h"

#define DOMID           3
#define OTHER_DOMID     7           /* grants "to another domain" */
#define MEM_MB          96
#define DISK_BYTES      (16ull << 20)
#define SECT            512u
#define DISK_SECTS      (DISK_BYTES / SECT)
#define CANARY_SECTS    2048u       /* 1 MiB at each end: no valid write */
#define POOL_PAGES      1024u       /* data pages granted to dom0 */
#define MAX_BATCH       64u
#define RSP_TIMEOUT_MS  10000
#define SETTLE_MS       30          /* wait for responses nobody owes us */

#define FILL_REF 0xfffffff0u       /* rw_req(): bad_rw() grants a page */

#define ST_OK   (1u << 0)           /* BLKIF_RSP_OKAY */
#define ST_ERR  (1u << 1)           /* BLKIF_RSP_ERROR */
#define ST_NOTSUP (1u << 2)         /* BLKIF_RSP_EOPNOTSUPP */
#define ST_BAD  (ST_ERR | ST_NOTSUP)

#define RUN_MAX 8                   /* valid_run(): requests in a run */
#define IND_MAX_SEGS 64u            /* indirect requests the model checks */
#define IND_PAGES 32u               /* indirect pages per batch */

/* --- state --------------------------------------------------------------- */

typedef struct Pend {
    uint64_t id;
    unsigned int expect;            /* ST_* accepted */
    uint8_t op;
    uint64_t sector;                /* for data checks (valid reads/writes) */
    unsigned int nseg;
    uint8_t *page[IND_MAX_SEGS];
    uint8_t first[IND_MAX_SEGS];
    uint8_t last[IND_MAX_SEGS];
    bool check_data;                /* valid read/write: model applies */
    bool untouched;                 /* pages must keep their fill */
    bool revoked;                   /* grant revoked in flight */
    bool discard;                   /* valid discard: forget the range */
    uint64_t discard_sects;
    bool got;
    int16_t status;
    bool check_op;                  /* the response's op must be want_op */
    uint8_t want_op;
    uint8_t rsp_op;                 /* operation of the response */
} Pend;

typedef struct Fuzz {
    const char *qemu;
    char **qemu_args;       /* --qemu-arg: more QEMU arguments */
    uint64_t seed, rng;
    GHashTable *xfail;              /* case names expected to fail */
    GHashTable *xfail_hit;
    GHashTable *ran;                /* cases run at least once */
    const char *cur;                /* current case */
    char *tmpdir, *logdir, *image;

    xensim_ts *ts;
    pid_t qemu_pid;
    xensim_domu *dom;
    xensim_xs *xs;
    int devid;
    char *fe, *be;
    xensim_qmp *qmp;                /* QEMU's monitor (libxl's socket) */

    blkfront *bf;
    enum blkfront_protocol proto;
    int order;
    uint8_t *sring;                 /* the shared ring page(s) */
    unsigned int nr_ents, slot_size;
    uint8_t (*snap)[112];           /* request bytes per slot */
    bool ring_dead;                 /* abused: reconnect before use */
    bool no_padcheck;               /* slots hold garbage: skip XSA-216 */
    unsigned int unknown, padleak;  /* this batch, reported once */

    uint8_t *pool;
    int pool_ref[POOL_PAGES];
    unsigned int pool_next;
    uint8_t *ro_page, *ro_wpage, *other_page, *rev_pages;
    int ro_ref, ro_wref, other_ref;
    uint8_t *vbuf;                  /* whole-disk buffer for checks */
    uint8_t *ind;                   /* indirect pages, granted read-only */
    int ind_ref[IND_PAGES];
    unsigned int ind_next;
    uint32_t ind_adv;               /* backend's feature-max-indirect-... */

    uint8_t *model;                 /* DISK_BYTES */
    uint8_t *known;                 /* per sector: model is exact */

    Pend pend[MAX_BATCH * 2];
    unsigned int npend;
    uint64_t next_id;
    /* valid ranges of the batch: [start, end) sectors, and is-write */
    uint64_t rs[MAX_BATCH], re[MAX_BATCH];
    bool rw[MAX_BATCH];
    unsigned int nranges;

    /* counters */
    uint64_t execs, requests, responses, failures, xfails, crashes, hangs;
    uint64_t restarts, verifies, halts, disconnects;
    uint64_t fault_errors, resizes, iothread_changes, cut_inflight;
    bool fault_nodes;               /* "fplain" added in this stack */
    void (*during)(void);           /* batch_run(): right after the kick */
    GHashTable *case_fail;          /* name -> count */
} Fuzz;

extern Fuzz F;

/* --- xenblk-fuzz.c ------------------------------------------------------- */

/* A random number below @n (0 if @n is 0), from the seeded generator. */
uint64_t rnd_below(uint64_t n);

/* Fill @len bytes at @p with random bytes. */
void fill_rand(uint8_t *p, size_t len);

/*
 * Report a failure of the current case (F.cur): expected if the case is
 * listed with --xfail, counted per case either way.
 */
void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/*
 * QEMU died or hangs (@why): count it, kill it and start a fresh stack;
 * false if that fails.
 */
bool restart(const char *why);

/* After a case: QEMU alive, ring usable, disk as modelled. */
bool settle(void);

/* --- fuzz-qmp.c ---------------------------------------------------------- */

/* Connect to QEMU's QMP socket and leave negotiation mode. */
bool qmp_open(void);

/*
 * Send a formatted command and wait 10 s for its answer: 1 "return",
 * 0 "error" (logged), -1 no answer.
 */
int qmp_exec(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The QEMU process is gone (or a zombie). */
bool qemu_exited(void);

/* QEMU alive: the process runs and its monitor answers. */
bool qemu_alive(void);

/* --- fuzz-ring.c --------------------------------------------------------- */

/* Take up the ring of a new connection of F.bf (connect or reconnect). */
bool ring_adopt(void);

/* Connect F.bf with a ring of 2^@order pages in @proto's layout. */
bool fe_connect(int order, enum blkfront_protocol proto);

/* Start a batch: no request pending, no range taken, pool pages free. */
void batch_begin(void);

/* Slots of the ring not holding a request of ours. */
unsigned int ring_free(void);

/* The next data page of the pool for this batch, its grant in @ref. */
uint8_t *pool_page(int *ref);

/* Put @req on the ring, remembering what it should get back. */
Pend *put(blkif_request_t *req, unsigned int expect);

/* Is @status one that @expect (ST_*) accepts? */
bool status_ok(unsigned int expect, int16_t status);

/* Take every available response; returns how many. */
unsigned int collect(void);

/*
 * Push and kick the batch, wait for every response it is owed and check
 * them all; @revoke: end the grants of these refs right after the kick.
 * False if QEMU died with responses missing.
 */
bool batch_run(const int *revoke, unsigned int nrevoke);

/* --- fuzz-disk.c --------------------------------------------------------- */

/* Read the whole disk and compare it with the model where it is known. */
bool verify_disk(void);

/* Fill the disk with a random pattern through the regular frontend. */
bool init_disk(void);

/* A scratch range of @n sectors that no write of the batch touches. */
bool pick_range(unsigned int n, bool w, uint64_t *s);

/* A valid read or write of @nseg fragments at a free scratch range. */
Pend *valid_rw(uint8_t op, unsigned int nseg, bool ro);

/*
 * @k (at most RUN_MAX) valid requests of @op, adjacent on the disk and
 * in ring order (merged by the fork's backend); @p (may be NULL) gets
 * the requests. Returns how many were put.
 */
unsigned int valid_run(uint8_t op, unsigned int k, Pend **p);

/*
 * A malformed read or write at the canary: it must fail and change
 * nothing; unless @io_ok, a read's pages must stay as they were.
 */
Pend *bad_rw_io(blkif_request_t *req, unsigned int expect, bool io_ok);

/* bad_rw_io() of a request the backend must not even do the I/O of. */
Pend *bad_rw(blkif_request_t *req, unsigned int expect);

/* Apply a completed valid read/write to the model, or check a read. */
void apply(Pend *p);

/* --- fuzz-cases.c -------------------------------------------------------- */

/* A request of @op, @nseg whole-page segments (grants FILL_REF), at @sector. */
blkif_request_t rw_req(uint8_t op, uint64_t sector, unsigned int nseg);

/* A sector in the low canary with room for 88 more. */
uint64_t canary_sector(void);

/* A ref whose grant entry is empty (not granted to anyone). */
uint32_t free_ref(void);

/* The request cases: each adds its requests to the current batch. */
void add_nr_segments(void);
void add_bad_sects(void);
void add_bad_grants(void);
void add_past_end(void);
void add_overflow(void);
void add_unknown_ops(void);
void add_discard_huge(void);

/* Put a discard of @n sectors at @sector. */
Pend *discard(uint64_t sector, uint64_t n, unsigned int expect);

/* Reads and writes whose grants are revoked right after the kick */
void run_revoke(void);

/* req_prod set more than a ring ahead, or behind the backend's. */
void run_prod_overflow(void);
void run_prod_backwards(void);

/*
 * Every directed case on every ring ABI, then garbage negotiation; false
 * if the stack could not be brought back.
 */
bool run_directed(void);

/* --list: the directed cases' names, one a line. */
void list_cases(void);

/* --- fuzz-faults.c ------------------------------------------------------- */

/* The fault cases (cases[] in fuzz-cases.c). */
void run_fault_errors(void);
void run_fault_resize(void);
void run_fault_iothread(void);
void run_fault_disconnect(void);

/* Retune the IOThread (the next of a fixed list of settings) over QMP. */
void iothread_change(void);

/* --- fuzz-indirect.c ----------------------------------------------------- */

/* Allocate and grant (read-only, to dom0) the indirect pages. */
bool grant_indirect(void);

/* The indirect cases (cases[] in fuzz-cases.c). */
void add_ind_valid(void);
void add_ind_bad_grant(void);
void add_ind_nr_segments(void);
void add_ind_bad_sects(void);
void add_ind_op(void);
void run_ind_flip(void);

/* --- fuzz-random.c ------------------------------------------------------- */

/* @iterations random batches; false if the stack could not be restored. */
bool run_random(unsigned int iterations);

#endif /* XENSIM_FUZZ_INT_H */
