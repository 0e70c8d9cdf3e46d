/*
 * Contexts of the simulated driver: primary contexts (refcounted, one per
 * device, their footprint charged while active), created contexts, and each
 * thread's stack of current contexts.
 */
#define _GNU_SOURCE
#include "sim_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

CUresult sim_ctx_lookup(CUcontext h, struct CUctx_st **out)
{
    if (!h)
        return CUDA_ERROR_INVALID_CONTEXT;
    for (uint32_t d = 0; d < sim_drv.cfg.devices; d++) {
        if (h == &sim_drv.primary[d]) {
            *out = h;
            return CUDA_SUCCESS;
        }
    }
    for (struct CUctx_st *c = sim_drv.contexts; c; c = c->next) {
        if (c == h) {
            *out = c;
            return CUDA_SUCCESS;
        }
    }
    return CUDA_ERROR_INVALID_CONTEXT;
}

CUresult sim_ctx_usable(const struct CUctx_st *c)
{
    if (c->destroyed)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (c->base) /* a green context lives on its primary context */
        return c->base->active ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    return c->active ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
}

static CUresult ctx_activate(struct CUctx_st *c)
{
    if (sim_state_context_add(&sim_drv.st, sim_phys(c->dev)) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* A fresh id: per-thread stream caches of an earlier life no longer match. */
    c->id = ++sim_drv.next_id;
    c->active = 1;
    return CUDA_SUCCESS;
}

void sim_ctx_teardown(struct CUctx_st *c)
{
    sim_exec_drop_ctx(c);
    sim_mem_drop_ctx(c);
    c->legacy.tail_ns = 0;
}

static void ctx_deactivate(struct CUctx_st *c)
{
    sim_ctx_teardown(c);
    sim_state_context_remove(&sim_drv.st, sim_phys(c->dev));
    c->active = 0;
}

static int valid_ctx_flags(unsigned flags)
{
    unsigned sched = flags & 0x07;

    return (flags & ~0xFFu) == 0 && (sched == 0 || sched == 1 || sched == 2 || sched == 4);
}

/* ---- primary contexts ------------------------------------------------- */

CUresult sim_primary_retain_locked(int dev)
{
    struct CUctx_st *c = &sim_drv.primary[dev];
    CUresult r = CUDA_SUCCESS;

    if (!c->active)
        r = ctx_activate(c);
    if (r == CUDA_SUCCESS)
        c->refcount++;
    return r;
}

CUresult sim_primary_release_locked(int dev)
{
    struct CUctx_st *c = &sim_drv.primary[dev];

    if (c->refcount == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (--c->refcount == 0 && c->active)
        ctx_deactivate(c);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pctx)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS &&
             (r = sim_primary_retain_locked(dev)) == CUDA_SUCCESS)
        *pctx = &sim_drv.primary[dev];
    sim_leave();
    return r;
}

/*
 * Not a CUDA function: what the CUDA runtime does through its private entry
 * points (seen on an H200), retaining dev's primary context and making it
 * current on the calling thread without calling the public functions an
 * interposer hooks.
 */
SIM_EXPORT CUresult cuSimRuntimeMakePrimaryCurrent(CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_check_device(dev)) == CUDA_SUCCESS &&
        (r = sim_primary_retain_locked(dev)) == CUDA_SUCCESS) {
        if (sim_tls.depth == 0)
            sim_tls.depth = 1;
        sim_tls.stack[sim_tls.depth - 1] = &sim_drv.primary[dev];
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_check_device(dev)) == CUDA_SUCCESS)
        r = sim_primary_release_locked(dev);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    return cuDevicePrimaryCtxRelease_v2(dev);
}

/*
 * Reset destroys everything the primary context holds but, as documented,
 * does not release it: the refcount stays, and the next retain revives it.
 */
SIM_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_check_device(dev)) == CUDA_SUCCESS && sim_drv.primary[dev].active)
        ctx_deactivate(&sim_drv.primary[dev]);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    return cuDevicePrimaryCtxReset_v2(dev);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!flags || !active)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS) {
        *flags = sim_drv.primary[dev].flags;
        *active = sim_drv.primary[dev].active;
    }
    sim_leave();
    return r;
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags, int refuse_active)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!valid_ctx_flags(flags))
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS) {
        if (refuse_active && sim_drv.primary[dev].active)
            r = CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
        else
            sim_drv.primary[dev].flags = flags;
    }
    sim_leave();
    return r;
}

/* The 7.0 call refused an active context; the 11.0 one changes it anyway. */
SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags)
{
    return primary_set_flags(dev, flags, 1);
}

SIM_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags)
{
    return primary_set_flags(dev, flags, 0);
}

/* ---- created contexts ------------------------------------------------- */

static CUresult check_affinity(const CUexecAffinityParam *params, int n)
{
    if (n < 0 || (n > 0 && !params))
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < n; i++)
        if (params[i].type != CU_EXEC_AFFINITY_TYPE_SM_COUNT ||
            params[i].param.smCount.val > sim_drv.cfg.sms)
            return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    struct CUctx_st *c;
    CUresult r;

    if (!pctx || !valid_ctx_flags(flags))
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_check_device(dev)) != CUDA_SUCCESS)
        return r;
    if (sim_tls.depth == SIM_CTX_STACK)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!(c = calloc(1, sizeof(*c))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = dev;
    c->flags = flags;
    c->legacy.ctx = c;
    c->legacy.kind = SIM_STREAM_LEGACY;
    if ((r = ctx_activate(c)) != CUDA_SUCCESS) {
        free(c);
        return r;
    }
    c->next = sim_drv.contexts;
    sim_drv.contexts = c;
    sim_tls.stack[sim_tls.depth++] = c; /* a new context is pushed on the caller's stack */
    *pctx = c;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = ctx_create(pctx, flags, dev);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    return cuCtxCreate_v2(pctx, flags, dev);
}

/* Affinity (an SM count) is accepted and checked, not enforced: there is no MPS here. */
SIM_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray, int numParams,
                                   unsigned int flags, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = check_affinity(paramsArray, numParams)) == CUDA_SUCCESS)
        r = ctx_create(pctx, flags, dev);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                   unsigned int flags, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (ctxCreateParams && ctxCreateParams->cigParams)
        r = ctxCreateParams->numExecAffinityParams ? CUDA_ERROR_INVALID_VALUE
                                                   : CUDA_ERROR_NOT_SUPPORTED;
    else if (ctxCreateParams)
        r = check_affinity(ctxCreateParams->execAffinityParams,
                           ctxCreateParams->numExecAffinityParams);
    if (r == CUDA_SUCCESS)
        r = ctx_create(pctx, flags, dev);
    sim_leave();
    return r;
}

/*
 * The context is marked destroyed, never freed: other threads may still have
 * it current, and must get CUDA_ERROR_CONTEXT_IS_DESTROYED, not a dangling
 * pointer.
 */
SIM_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_ctx_lookup(ctx, &c)) == CUDA_SUCCESS) {
        if (c->primary || c->destroyed || c->base) { /* a green context's is not destroyed */
            r = CUDA_ERROR_INVALID_CONTEXT;
        } else {
            ctx_deactivate(c);
            c->destroyed = 1;
            if (sim_tls.depth > 0 && sim_tls.stack[sim_tls.depth - 1] == c)
                sim_tls.depth--;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    return cuCtxDestroy_v2(ctx);
}

/* ---- the current context ---------------------------------------------- */

SIM_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    *pctx = sim_tls.depth > 0 ? sim_tls.stack[sim_tls.depth - 1] : NULL;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    struct CUctx_st *c = NULL;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!ctx) { /* NULL pops the top, or does nothing on an empty stack */
        if (sim_tls.depth > 0)
            sim_tls.depth--;
    } else if ((r = sim_ctx_lookup(ctx, &c)) == CUDA_SUCCESS) {
        if (sim_tls.depth == 0)
            sim_tls.depth = 1;
        sim_tls.stack[sim_tls.depth - 1] = c;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_ctx_lookup(ctx, &c)) == CUDA_SUCCESS) {
        if (sim_tls.depth == SIM_CTX_STACK)
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else
            sim_tls.stack[sim_tls.depth++] = c;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
    return cuCtxPushCurrent_v2(ctx);
}

SIM_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (sim_tls.depth == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    sim_tls.depth--;
    if (pctx)
        *pctx = sim_tls.stack[sim_tls.depth];
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx)
{
    return cuCtxPopCurrent_v2(pctx);
}

/* The context named, or the current one when ctx is NULL; under the lock. */
static CUresult ctx_or_current(CUcontext ctx, struct CUctx_st **out)
{
    CUresult r;

    if (!ctx) {
        ctx = sim_tls.depth > 0 ? sim_tls.stack[sim_tls.depth - 1] : NULL;
        if (!ctx)
            return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((r = sim_ctx_lookup(ctx, out)) != CUDA_SUCCESS ||
        (r = sim_ctx_usable(*out)) != CUDA_SUCCESS)
        return r;
    *out = sim_ctx_base(*out);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!device)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = ctx_or_current(ctx, &c)) == CUDA_SUCCESS)
        *device = c->dev;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxGetDevice(CUdevice *device)
{
    return cuCtxGetDevice_v2(device, NULL);
}

/* Waits for every stream of the context, then lets pools give back what they may. */
SIM_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    struct CUctx_st *c;
    uint64_t until = 0;
    int dev = 0;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = ctx_or_current(ctx, &c)) == CUDA_SUCCESS &&
        (r = sim_capture_check_unsafe()) == CUDA_SUCCESS) {
        until = sim_ctx_wait_point(c);
        dev = c->dev;
    }
    sim_leave();
    if (r == CUDA_SUCCESS)
        sim_sync_then_settle(until, dev);
    return r;
}

SIM_EXPORT CUresult cuCtxSynchronize(void)
{
    return cuCtxSynchronize_v2(NULL);
}
