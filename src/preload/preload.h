/*
 * Internals shared by the interposer's files: the real driver functions,
 * the process's configuration and tenant, logging. Nothing here is exported.
 */
#ifndef GPUSLICE_PRELOAD_H
#define GPUSLICE_PRELOAD_H

#include <limits.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/driver.h"
#include "common/parse.h"
#include "gpuslice/node_abi.h"
#include "gpuslice/tenant_abi.h"
#include "preload/hooks.h"

#define GS_EXPORT __attribute__((visibility("default")))

/*
 * The real functions (every one the lists in common/cuda_funcs.h and
 * nvml_funcs.h name), resolved by the one loader on first use.
 */
extern struct gs_driver gs__real;

/* Loads libcuda.so.1 (or libnvidia-ml.so.1) and resolves gs__real; 0 or <0. */
int gs__load_cuda(void);
int gs__load_nvml(void);
/* NVML loaded and initialised once (mem/charge.c): 0, or -1 when it cannot be. */
int gs__nvml_ready(void);

/*
 * mem/charge.c: the host PID recorded in this process's slot of its tenant's file (the
 * daemon's sweep finds it for a process of another PID namespace), 0 while not known.
 */
pid_t gs__host_pid(void);

/* Process-wide state, fixed once the configuration is read. */
struct gs_state {
    int active;       /* hooks enforce something; else they pass through */
    int config_error; /* configuration refused: cuInit fails */
    char config_msg[512];
    struct gs_limits mem_limits;
    struct gs_limits compute_limits;
    struct gs_limits sm_limits; /* GPUSLICE_SMS: SM partitions */
    uint32_t priority, weight;  /* GPUSLICE_PRIORITY, GPUSLICE_WEIGHT; 0 = not set */
    struct gpuslice_tenant *tenant;
    int shared_tenant;           /* tenant from GPUSLICE_TENANT, HAMi's shared file or the daemon */
    char shared_cache[PATH_MAX]; /* CUDA_DEVICE_MEMORY_SHARED_CACHE's tenant file, or "" */
    int debug;
    /* A tenant of the daemon's (managed.c): its limits are in the node segment, read-only. */
    const struct gpuslice_node *node;
    uint32_t node_id;
    int node_idx;
    char node_dir[256]; /* where its node segment and the daemon's board socket are */
};

extern struct gs_state gs__state;

/*
 * hami.c: joins (or makes) the tenant whose state file is path, HAMi's
 * CUDA_DEVICE_MEMORY_SHARED_CACHE; 0, or <0 with the message in
 * gs__state.config_msg.
 */
int gs__hami_attach(const char *path);

/* Reads the configuration once; returns gs__state.active. */
int gs__config(void);

/* Hooks for dlsym/cuGetProcAddress: the hook replacing symbol, or NULL. */
void *gs__hook_for_symbol(const char *symbol);

void gs__log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void gs__debug(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* device.c: the one device registry (ordinal -> UUID, tenant entry) */
#define GS_DEVICE_LATER (-1) /* not known yet (the driver is not initialised): ask again */
#define GS_DEVICE_NONE (-2)  /* never: no tenant, an ordinal out of range, or no room in it */
#define GS_DEVICE_BUSY (-3)  /* the tenant's lock was not had in time: ask again (meanwhile */
                             /* nothing may be allocated there: its memory could not be counted) */

/*
 * Ordinal's UUID as "gpu-…" (the key of the limit lists; raw, when not NULL,
 * gets its 16 bytes), or NULL while the driver cannot tell it yet.
 */
const char *gs__device_uuid(int ord, uint8_t raw[16]);

/* Ordinal's entry in the tenant's device table (made with its limits), or GS_DEVICE_*. */
int gs__device_entry(int ord);

/*
 * The limits of tenant device entry e: the daemon's where it manages the
 * tenant (looked up by the UUID this process's driver gave, never by what
 * the shared file says), else the entry's own. Memory in bytes, compute in
 * percent; 0 = none.
 */
uint64_t gs__mem_limit(int e);
uint32_t gs__compute_limit(int e);

/*
 * The tenant's priority class (GPUSLICE_PRIORITY_*, UNSET = normal) and weight (1..100, 0 =
 * not set: 1) now: the daemon's where it manages the tenant, else the tenant file's.
 */
void gs__sched(uint32_t *priority, uint32_t *weight);

/* device.c: the raw UUID of tenant device entry e as this process's driver gave it, or NULL. */
const uint8_t *gs__entry_uuid(int e);

/*
 * managed.c: finds whether this process belongs to a tenant of the daemon's
 * (by itself or an ancestor being a member), and if so attaches its state
 * file. 1 managed (gs__state filled), 0 not, < 0 an error (message in
 * gs__state.config_msg): a process the daemon manages never runs unlimited.
 */
int gs__managed_attach(void);

/* mem/ (the memory accounting) */
void gs__mem_fork_child(void);
void gs__mem_exit(void);

/* Tenant device entry for an NVML device handle (by UUID), or -1. */
int gs__mem_entry_for_uuid_string(const char *uuid);

/* The tenant's usage and limit on entry e (limit 0 = none). */
void gs__mem_entry_usage(int e, uint64_t *used, uint64_t *limit);

/* Refreshes driver-side figures (pools, context overhead) for entry e's device. */
void gs__mem_refresh_entry(int e);

/* Limit configured for a device not yet registered (by NVML UUID string). */
uint64_t gs__mem_limit_for_uuid(const char *uuid);

/* What the tenant's memory reservation holds on device entry e's GPU (0: none). */
uint64_t gs__mem_reserved_for_entry(int e);

/* sm.c */
/* After the real cuDevicePrimaryCtxRetain: *pctx becomes dev's partition, or an error. */
CUresult gs__sm_primary(CUdevice dev, CUcontext *pctx);
/* Before the real cuDevicePrimaryCtxReset of dev. */
void gs__sm_reset(CUdevice dev);
/* A context the program created on dev. */
void gs__sm_created(CUdevice dev);
/*
 * Whether GPUSLICE_SMS is set (fixed by the configuration), and the swap of a
 * current primary context for its partition: CUDA_SUCCESS, or the error of a
 * refused partition for the caller to return.
 */
extern int gs__sm_on;
CUresult gs__sm_ensure(void);
#define GS_SM_ENSURE()                                                                             \
    do {                                                                                           \
        CUresult sm_r_;                                                                            \
        if (gs__sm_on && (sm_r_ = gs__sm_ensure()) != CUDA_SUCCESS)                                \
            return sm_r_;                                                                          \
    } while (0)

/* The device's SM resource, and a green context of count SMs from first (sm.c). */
CUresult gs__sm_device(CUdevice dev, CUdevResource *all, char *msg, size_t len);
CUresult gs__sm_build(CUdevice dev, CUdevResource *all, unsigned count, unsigned first,
                      int fine_only, CUgreenCtx *green, CUcontext *ctx, unsigned *sms,
                      unsigned *group, char *msg, size_t len);
unsigned gs__sm_group(CUdevResource *all, unsigned *ngroups);

/*
 * lanes.c: how many gpuslice_lanes_run partitions exist now, and 1 with the
 * SM count of the one current on this thread when it is one of dev's, else 0.
 */
extern int gs__lanes_live;
int gs__lanes_sms(CUdevice dev, int *count);

/* compute/ (the compute governor) */
void gs__compute_config(void);
void gs__compute_ctx_gone(CUcontext ctx);
void gs__compute_fork_child(void);
void gs__compute_exit(void);

/*
 * Starts every hook: without an active configuration the call goes straight
 * to the driver; with a refused configuration it fails, so a process whose
 * limits could not be read never runs unlimited.
 */
#define GS_PASS(sym, args)                                                                         \
    do {                                                                                           \
        if (gs__load_cuda() < 0)                                                                   \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
        if (!gs__real.sym)                                                                         \
            return CUDA_ERROR_NOT_SUPPORTED;                                                       \
        if (!gs__config())                                                                         \
            return gs__real.sym args;                                                              \
        if (gs__state.config_error)                                                                \
            return CUDA_ERROR_NOT_INITIALIZED;                                                     \
    } while (0)

#endif
