/*
 * Contexts: their footprint and hidden part where they appear, and what their
 * destruction gives back (primary contexts, cuCtxCreate, cuCtxDestroy).
 */
#define _GNU_SOURCE
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
#include "preload/mem/mem_internal.h"

/*
 * The footprint of a context for a process NVML does not list (a PID
 * namespace): the change in the device's use across its creation (before:
 * -1 if it could not be read). Processes of other tenants attaching at the
 * same moment inflate that change, so the smallest footprint any process of
 * the tenant measured on the device is kept in the tenant and wins.
 */
static uint64_t context_footprint(struct dev_state *d, int64_t before)
{
    uint64_t *shared = &gs__state.tenant->dev[d->entry].ctx_footprint;
    uint64_t known = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
    int64_t after = nvml_device_used(d);

    if (before >= 0 && after > before) {
        uint64_t delta = (uint64_t)(after - before);
        while ((known == 0 || delta < known) &&
               !__atomic_compare_exchange_n(shared, &known, delta, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
            ;
        return known && known < delta ? known : delta;
    }
    return known;
}

/*
 * Where the tenant has no base yet (hidden_from_look cannot measure):
 * the device's growth across this process's first context less what NVML then
 * lists for the process; the smallest believable measure of the tenant is kept
 * (others attaching at the same moment only inflate it). (A base taken while a
 * process was making its context unlisted holds that memory too: on the H200
 * 0.06 MiB before its listing, so a base is not left above what it measures.)
 */
static void context_hidden(struct dev_state *d, int64_t before)
{
    uint64_t *shared = &gs__state.tenant->dev[d->entry].ctx_hidden;
    uint64_t known = __atomic_load_n(shared, __ATOMIC_ACQUIRE), hidden;
    int64_t after, mine;

    /*
     * (What the device holds beyond every process NVML lists cannot stand in for it when
     * others attach meanwhile: an idle H200 already had 615 MiB in use that is no process's.)
     */
    if (before < 0 || (after = nvml_device_used(d)) < 0 || (mine = nvml_process_used(d)) < 0 ||
        after - before <= mine)
        return;
    hidden = (uint64_t)(after - before - mine);
    if (hidden > CTX_HIDDEN_MAX)
        return; /* others attached meanwhile: not a measure of this context */
    while (
        (known == 0 || hidden < known) &&
        !__atomic_compare_exchange_n(shared, &known, hidden, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
}

/* A context appeared on d; measures the driver's overhead. */
static void context_appeared(struct dev_state *d, int64_t device_used_before)
{
    pthread_mutex_lock(&mem_mu);
    d->ctx_count++;
    if (d->mode != OVERHEAD_FOOTPRINT)
        refresh_overhead(d);
    if (d->mode == OVERHEAD_NVML_PROCESS &&
        __atomic_load_n(&gs__state.tenant->ctx_base[d->entry], __ATOMIC_ACQUIRE) == 0) {
        context_hidden(d, device_used_before);
        refresh_overhead(d);
    }
    if (d->mode != OVERHEAD_NVML_PROCESS) {
        /* NVML cannot see this process (a PID namespace): charge a measured footprint. */
        if (d->mode == OVERHEAD_UNKNOWN) {
            d->footprint = context_footprint(d, device_used_before);
            d->mode = OVERHEAD_FOOTPRINT;
            gs__debug("%s: NVML does not list this process; each context counts %llu bytes",
                      d->uuid, (unsigned long long)d->footprint);
        }
        force_charge(d, d->footprint);
        d->overhead += d->footprint;
    }
    pthread_mutex_unlock(&mem_mu);
}

/*
 * The primary context, reset while retained (it still counts in ctx_count), is
 * made again by a retain: its memory is charged again. Where NVML lists the
 * process a re-read finds it; where it does not (a PID namespace), its
 * footprint, which the reset gave back, is charged again.
 */
static void context_back(struct dev_state *d)
{
    pthread_mutex_lock(&mem_mu);
    d->primary_reset = 0;
    if (d->mode == OVERHEAD_FOOTPRINT) {
        force_charge(d, d->footprint);
        d->overhead += d->footprint;
    } else {
        refresh_overhead(d);
    }
    pthread_mutex_unlock(&mem_mu);
}

/*
 * ctx ended: what was allocated in it is gone. also, when not NULL, is a
 * second handle of the same context (the real primary context behind a
 * partition's green one: allocations made while either was current).
 */
static void context_gone(struct dev_state *d, int ord, CUcontext ctx, CUcontext also)
{
    uint64_t a = (uint64_t)(uintptr_t)ctx, b = also ? (uint64_t)(uintptr_t)also : a;
    struct gs_map_entry *e;
    uint64_t freed = 0;

    pthread_mutex_lock(&mem_mu);
    GS_MAP_FOREACH(&allocs, e)
    {
        if (e->dev == ord && (e->aux == a || e->aux == b)) {
            freed += e->bytes;
            gs_map_del(&allocs, e);
        }
    }
    GS_MAP_FOREACH(&arrays, e)
    {
        if (e->dev == ord && (e->aux == a || e->aux == b)) {
            freed += e->bytes;
            gs_map_del(&arrays, e);
        }
    }
    GS_MAP_FOREACH(&pages, e)
    {
        if (e->dev == ord && (e->aux == a || e->aux == b)) {
            freed += e->bytes;
            gs_map_del(&pages, e);
        }
    }
    d->charged = d->charged >= freed ? d->charged - freed : 0;
    uncharge(d, freed);
    if (d->ctx_count > 0)
        d->ctx_count--;
    if (d->mode == OVERHEAD_FOOTPRINT) {
        uint64_t f = d->footprint < d->overhead ? d->footprint : d->overhead;
        uncharge(d, f);
        d->overhead -= f;
    } else if (d->ctx_count == 0) {
        uncharge(d, d->overhead);
        d->overhead = 0;
    }
    pthread_mutex_unlock(&mem_mu);
    if (d->ctx_count == 0) {
        pool_forget_device(ord);
        sync_all_pools();
    }
}

/*
 * The device's use before this process's first context on it, for
 * context_footprint() and context_hidden(); -1 when not needed. Where every
 * process NVML lists there has its context in its figure, that use less the
 * figures, with how many were listed, is a base for hidden_from_look(): the
 * smallest ctx_base word of the tenant is kept.
 */
int64_t used_before(struct dev_state *d)
{
    struct nvml_look l;
    int64_t used;

    if (!d || d->ctx_count != 0)
        return -1;
    if ((used = nvml_device_used(d)) >= 0 && nvml_look_processes(d, &l) == 0 && l.complete &&
        (l.listed == 0 || l.smallest >= CTX_LISTED_MIN) && (uint64_t)used >= l.sum &&
        (uint64_t)used - l.sum < (1ULL << 47) && l.listed < 0xffff) {
        uint64_t *shared = &gs__state.tenant->ctx_base[d->entry];
        uint64_t known = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
        uint64_t mine = GPUSLICE_CTX_BASE((uint64_t)used - l.sum, l.listed);

        while ((known == 0 || mine < known) &&
               !__atomic_compare_exchange_n(shared, &known, mine, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
            ;
    }
    return used;
}

/*
 * Whether dev's primary context is still alive after the program released its
 * last reference: another holds it (an SM partition's green context, the CUDA
 * runtime's own reference), and what was made in it lives on.
 */
static int primary_alive(CUdevice dev)
{
    unsigned int flags;
    int active = 0;

    return gs__real.cuDevicePrimaryCtxGetState &&
           gs__real.cuDevicePrimaryCtxGetState(dev, &flags, &active) == CUDA_SUCCESS && active;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    struct dev_state *d;
    CUcontext real;
    int64_t before;
    CUresult r;

    GS_PASS(cuDevicePrimaryCtxRetain, (pctx, dev));
    /*
     * A context whose memory could not be counted is not made: no process slot left, no room
     * for the device in the tenant, or the tenant's lock held too long (dev_for_alloc).
     */
    r = CUDA_SUCCESS;
    d = exiting ? NULL : dev_for_alloc(dev, &r);
    if (r != CUDA_SUCCESS || (d && slot() < 0))
        return CUDA_ERROR_OUT_OF_MEMORY;
    /*
     * Kept at the program's last release for another reference, which has let go since: the
     * context went, and so did what was made in it; this retain makes a new one.
     */
    if (d && d->primary_kept && d->primary_refs == 0 && !primary_alive(dev)) {
        context_gone(d, dev, d->primary, d->real_primary);
        d->primary_kept = 0;
    }
    before = used_before(d);
    GS_RESERVED_CTX_CALL(r, d, before, gs__real.cuDevicePrimaryCtxRetain(pctx, dev));
    real = r == CUDA_SUCCESS ? *pctx : NULL;
    /* With an SM partition, what is handed out for the primary context is its green context. */
    if (r == CUDA_SUCCESS && (r = gs__sm_primary(dev, pctx)) != CUDA_SUCCESS)
        gs__real.cuDevicePrimaryCtxRelease_v2(dev);
    if (r != CUDA_SUCCESS || d == NULL)
        return r;
    d->primary = *pctx;
    d->real_primary = real;
    if (d->primary_refs++ == 0 && !d->primary_kept)
        context_appeared(d, before);
    else if (d->primary_reset)
        context_back(d);
    d->primary_kept = 0; /* a context kept alive meanwhile never went: it is counted */
    return r;
}

#define GS_PRIMARY_RELEASE_BODY(sym, reset)                                                        \
    do {                                                                                           \
        struct dev_state *d;                                                                       \
        CUresult r;                                                                                \
        GS_PASS(sym, (dev));                                                                       \
        d = exiting ? NULL : dev_get(dev);                                                         \
        if (d && d->primary && (reset || d->primary_refs == 1))                                    \
            gs__compute_ctx_gone(d->primary);                                                      \
        if (reset)                                                                                 \
            gs__sm_reset(dev);                                                                     \
        if ((r = gs__real.sym(dev)) != CUDA_SUCCESS)                                               \
            return r;                                                                              \
        if (d == NULL || (d->primary_refs == 0 && !d->primary_kept))                               \
            return r;                                                                              \
        if (reset) {                                                                               \
            if (d->primary_reset)                                                                  \
                context_back(d); /* reset twice: its footprint is taken off once */                \
            context_gone(d, dev, d->primary, d->real_primary);                                     \
            pthread_mutex_lock(&mem_mu);                                                           \
            if (d->primary_refs > 0) {                                                             \
                d->ctx_count++; /* still retained: it comes back on use */                         \
                d->primary_reset = 1;                                                              \
            }                                                                                      \
            d->primary_kept = 0;                                                                   \
            pthread_mutex_unlock(&mem_mu);                                                         \
        } else {                                                                                   \
            if (d->primary_refs > 0)                                                               \
                d->primary_refs--;                                                                 \
            if (d->primary_refs == 0 && primary_alive(dev)) {                                      \
                d->primary_kept = 1; /* another reference keeps it: nothing went */                \
            } else if (d->primary_refs == 0) {                                                     \
                if (d->primary_reset)                                                              \
                    context_back(d); /* never made again: what went with it went at the reset */   \
                d->primary_kept = 0;                                                               \
                context_gone(d, dev, d->primary, d->real_primary);                                 \
            }                                                                                      \
        }                                                                                          \
        return r;                                                                                  \
    } while (0)

GS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxRelease, 0);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxRelease_v2, 0);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxReset, 1);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxReset_v2, 1);
}

static void remember_created(CUcontext ctx, int ord)
{
    int i;

    pthread_mutex_lock(&mem_mu);
    for (i = 0; i < 256; i++) {
        if (created[i] == NULL) {
            created[i] = ctx;
            created_ord[i] = ord;
            break;
        }
    }
    pthread_mutex_unlock(&mem_mu);
}

#define GS_CTX_CREATE_BODY(sym, call)                                                              \
    do {                                                                                           \
        struct dev_state *d;                                                                       \
        int64_t before;                                                                            \
        CUresult r;                                                                                \
        GS_PASS(sym, call);                                                                        \
        r = CUDA_SUCCESS;                                                                          \
        d = exiting ? NULL : dev_for_alloc(dev, &r);                                               \
        if (r != CUDA_SUCCESS || (d && slot() < 0))                                                \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                       \
        before = used_before(d);                                                                   \
        GS_RESERVED_CTX_CALL(r, d, before, gs__real.sym call);                                     \
        if (r == CUDA_SUCCESS)                                                                     \
            gs__sm_created(dev);                                                                   \
        if (r != CUDA_SUCCESS || d == NULL)                                                        \
            return r;                                                                              \
        remember_created(*pctx, dev);                                                              \
        context_appeared(d, before);                                                               \
        return r;                                                                                  \
    } while (0)

GS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate, (pctx, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate_v2, (pctx, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                  unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                  unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
}

#define GS_CTX_DESTROY_BODY(sym)                                                                   \
    do {                                                                                           \
        struct dev_state *d;                                                                       \
        CUresult r;                                                                                \
        int i, ord = -1;                                                                           \
        GS_PASS(sym, (ctx));                                                                       \
        gs__compute_ctx_gone(ctx);                                                                 \
        if ((r = gs__real.sym(ctx)) != CUDA_SUCCESS)                                               \
            return r;                                                                              \
        pthread_mutex_lock(&mem_mu);                                                               \
        for (i = 0; i < 256 && ctx; i++) {                                                         \
            if (created[i] == ctx) {                                                               \
                ord = created_ord[i];                                                              \
                created[i] = NULL;                                                                 \
                break;                                                                             \
            }                                                                                      \
        }                                                                                          \
        pthread_mutex_unlock(&mem_mu);                                                             \
        if (ord >= 0 && !exiting && (d = dev_get(ord)) != NULL)                                    \
            context_gone(d, ord, ctx, NULL);                                                       \
        return r;                                                                                  \
    } while (0)

GS_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    GS_CTX_DESTROY_BODY(cuCtxDestroy);
}

GS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GS_CTX_DESTROY_BODY(cuCtxDestroy_v2);
}
