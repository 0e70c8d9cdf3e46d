/*
 * What the parts of the interposer's memory accounting (src/preload/mem/)
 * share: the per-ordinal device state, the pool table, the maps of what is
 * charged, the locks, and the helpers every allocation family uses. Only
 * those files include it. Lock order: pool_mu before mem_mu; the tenant's
 * lock is taken inside either (tenant_abi.h).
 */
#ifndef GPUSLICE_PRELOAD_MEM_INTERNAL_H
#define GPUSLICE_PRELOAD_MEM_INTERNAL_H

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/error.h"
#include "common/reserve.h"
#include "common/tenant.h"
#include "preload/map.h"
#include "preload/preload.h"

#define MAX_ORDINALS 64

#define MAX_POOLS 64

#define RESERVE_TRIES 3 /* ... and asks it this many times */

#define RESERVE_CTX_BYTES (1ULL << 30) /* what a context that cannot be made asks for */

enum overhead_mode { OVERHEAD_UNKNOWN, OVERHEAD_NVML_PROCESS, OVERHEAD_FOOTPRINT };

struct dev_state {
    int resolved; /* 1 resolved, <0 failed */
    int entry;    /* tenant device entry */
    uint64_t gran;
    char uuid[GS_UUID_STRLEN]; /* "gpu-…" */
    int primary_refs;
    int primary_reset;      /* reset while retained: gone until it is retained again */
    int primary_kept;       /* released by the program, alive for another reference */
    CUcontext primary;      /* as handed out: with an SM partition, its green context */
    CUcontext real_primary; /* the device's own primary context */
    int ctx_count;
    uint64_t charged;  /* allocations, pools, VMM, arrays of this process */
    uint64_t overhead; /* driver-side usage beyond them */
    enum overhead_mode mode;
    uint64_t footprint; /* per-context, when NVML cannot see this process */
    uint64_t last_refresh_ns;
    int inflight; /* allocations and frees between their charge and the driver's answer */
};

struct pool_state {
    CUmemoryPool pool; /* NULL once destroyed */
    int ord;
    int destroyed; /* destroyed while allocations from it lived: charged until they go */
    int uncounted; /* an allocation from it went unrecorded: charged until its context goes */
    uint64_t live; /* allocations from it not yet freed */
    uint64_t accounted;
};

/*
 * This process's usage on the device according to the driver (NVML), or -1
 * when NVML does not list it. The process list can grow between asking its
 * length and reading it (hundreds of processes attach at once): the buffer
 * grows until it fits, so a busy GPU never looks like one that cannot see us.
 */
/*
 * One look at device d through NVML's process list: this process's figure
 * (-1 when it is not listed), and the number, sum and smallest of every listed
 * process's figures. -1 when the list could not be read.
 */
struct nvml_look {
    int64_t mine;
    uint64_t sum;
    uint64_t smallest;
    unsigned listed;
    int complete; /* every listed process gave a figure */
};

/* The largest believable hidden part of a context (measured on the H200: 5.8 MiB). */
#define CTX_HIDDEN_MAX (64ULL << 20)

/*
 * A process NVML lists with less than this, or with less than half of this
 * process's own context figure, is still making its context: on the H200 a
 * process was listed with 14 MiB from just after cuInit, its figure growing in
 * steps (16 ... 32, 102, 104 MiB, for over a second at 104 with 64 processes
 * making theirs at once) to its context's 526 MiB as the context became
 * current (bench/context_memory.py).
 */
#define CTX_LISTED_MIN (32ULL << 20)

/* r = expr, asked again after the reservation gave memory back (see give_back). */
#define GS_RESERVED_CALL(r, d, bytes, expr)                                                        \
    do {                                                                                           \
        int tries_ = 0;                                                                            \
        while (((r) = (expr)) == CUDA_ERROR_OUT_OF_MEMORY && tries_++ < RESERVE_TRIES &&           \
               give_back((d), (bytes)))                                                            \
            ;                                                                                      \
    } while (0)

/*
 * The same for making a context, which the driver measures by the change in
 * the device's use: after a give-back that changed it, measured again.
 */
#define GS_RESERVED_CTX_CALL(r, d, before, expr)                                                   \
    do {                                                                                           \
        int tries_ = 0;                                                                            \
        while (((r) = (expr)) == CUDA_ERROR_OUT_OF_MEMORY && tries_++ < RESERVE_TRIES &&           \
               give_back((d), RESERVE_CTX_BYTES))                                                  \
            (before) = used_before(d);                                                             \
    } while (0)

/*
 * Frees: forget first (so a reused address cannot be confused), restore on failure.
 * A pointer not charged as a plain allocation may be a pool's (cuMemFree frees those too).
 */
#define GS_FREE_BODY(sym, map, key, call)                                                          \
    do {                                                                                           \
        struct gs_map_entry old;                                                                   \
        CUresult r;                                                                                \
        int had, slot = -1;                                                                        \
        struct dev_state *fd = NULL;                                                               \
        GS_PASS(sym, call);                                                                        \
        had = untrack((map), (uint64_t)(key), &old);                                               \
        if (!had && (map) == &allocs)                                                              \
            slot = pool_ptr_take((CUdeviceptr)(key));                                              \
        if (had && (fd = dev_get(old.dev)) != NULL)                                                \
            __atomic_add_fetch(&fd->inflight, 1, __ATOMIC_ACQ_REL);                                \
        if ((r = gs__real.sym call) != CUDA_SUCCESS) {                                             \
            if (had)                                                                               \
                retrack((map), &old);                                                              \
            if (slot >= 0)                                                                         \
                pool_ptr_untake((CUdeviceptr)(key), slot);                                         \
        } else if (had) {                                                                          \
            release_entry(&old);                                                                   \
        } else if (slot >= 0) {                                                                    \
            pool_ptr_done(slot, 0, NULL, 0);                                                       \
        }                                                                                          \
        if (fd)                                                                                    \
            settle(fd);                                                                            \
        return r;                                                                                  \
    } while (0)

extern pthread_mutex_t mem_mu;
extern pthread_mutex_t pool_mu;
extern struct dev_state devs[MAX_ORDINALS];
extern struct pool_state pools[MAX_POOLS];
extern struct gs_map allocs;
extern struct gs_map vmm;
extern struct gs_map handles;
extern struct gs_map mappings;
extern uint64_t vmm_serial;
extern struct gs_map arrays;
extern struct gs_map pages;
extern struct gs_map pool_ptrs;
extern uint64_t pool_ptr_count;
extern CUcontext created[256];
extern int created_ord[256];
extern int exiting;
uint64_t round_up(uint64_t v, uint64_t g);
int slot(void);
struct dev_state *dev_get(int ord);
struct dev_state *dev_for_alloc(int ord, CUresult *r);
void lock_refused(int e);
int current_ordinal(void);
int charge_taken(struct dev_state *d, uint64_t bytes);
void force_charge(struct dev_state *d, uint64_t bytes);
void uncharge(struct dev_state *d, uint64_t bytes);
int nvml_look_processes(struct dev_state *d, struct nvml_look *l);
int64_t nvml_process_used(struct dev_state *d);
int64_t nvml_device_used(struct dev_state *d);
void refresh_overhead(struct dev_state *d);
void pool_sync(struct pool_state *p);
void sync_all_pools(void);
CUresult admit(struct dev_state *d, uint64_t bytes);
int room_for(const struct dev_state *d, uint64_t bytes);
void settle(struct dev_state *d);
void unadmit_locked(struct dev_state *d, uint64_t bytes);
void unadmit(struct dev_state *d, uint64_t bytes);
int track(struct gs_map *m, uint64_t key, uint64_t bytes, int ord, uint64_t aux);
int untrack(struct gs_map *m, uint64_t key, struct gs_map_entry *out);
void retrack(struct gs_map *m, const struct gs_map_entry *old);
uint64_t current_ctx(void);
struct dev_state *limited_current(int *ord, CUresult *r);
void release_entry(const struct gs_map_entry *e);
int give_back(struct dev_state *d, uint64_t bytes);
uint64_t reserved_for(const struct dev_state *d);
int pool_ptr_take(CUdeviceptr ptr);
void pool_ptr_untake(CUdeviceptr ptr, int slot);
void pool_ptr_done(int slot, int ordered, CUstream stream, int ptsz);
void pool_forget_device(int ord);
uint64_t pools_released_unseen(int ord);
int64_t used_before(struct dev_state *d);

#endif
