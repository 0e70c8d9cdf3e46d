/*
 * Green contexts of the simulated driver, as CUDA 13.0 has them on an H200:
 * a device's SMs split into groups of 8 (15 of 132, leaving 12 over; of 2,
 * 66, when co-scheduling is ignored), groups of one split merged into a descriptor, a green context
 * made from it that shares its device's primary context, and a CUcontext
 * converted from it. Kernels launched from a green context (its NULL stream,
 * streams made while it is current, graphs captured there) take the device
 * time of the whole-device kernel scaled by the device's SMs over the
 * partition's. GPUSLICE_SIM_GREEN=0 makes every call answer
 * CUDA_ERROR_NOT_SUPPORTED, as a driver without them does.
 *
 * Resources carry a tag in their opaque bytes: where they came from (a
 * device or context, or which split), so that merging groups of different
 * splits is refused as the driver refuses it.
 */
#define _GNU_SOURCE
#include "sim_cuda.h"

#include <stdlib.h>
#include <string.h>

#define TAG_MAGIC 0x31525347u /* "GSR1" */
#define SM_GROUP 8            /* minimum partition and alignment */
#define SM_GROUP_FINE 2       /* ... with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING */

struct tag {
    uint32_t magic;
    uint32_t split; /* 0: a whole device's or context's resource, never split */
    int32_t dev;
    uint32_t cluster; /* the largest thread-block cluster it holds */
};

_Static_assert(sizeof(struct tag) <= sizeof(((CUdevResource *)0)->internal_padding),
               "the tag fits the resource's opaque bytes");

/*
 * SMs the co-scheduled split of a whole device cannot group: the H200's
 * driver leaves 12 of its 132 over (15 groups of 8); other sizes leave the
 * remainder of 8.
 */
static unsigned coscheduled_leftover(unsigned sms)
{
    return sms == 132 ? 12 : sms % SM_GROUP;
}

static unsigned group_size(unsigned fine)
{
    unsigned g = fine ? SM_GROUP_FINE : SM_GROUP;

    return g < sim_drv.cfg.sms ? g : sim_drv.cfg.sms;
}

static void fill(CUdevResource *r, int dev, unsigned sms, uint32_t split, unsigned cluster)
{
    struct tag t = { TAG_MAGIC, split, dev, cluster };

    memset(r, 0, sizeof(*r));
    r->type = CU_DEV_RESOURCE_TYPE_SM;
    r->sm.smCount = sms;
    r->sm.minSmPartitionSize = group_size(0);
    /* The split is the same whatever the driver says here (GPUSLICE_SIM_SM_ALIGNMENT). */
    r->sm.smCoscheduledAlignment = sim_drv.cfg.sm_align ? sim_drv.cfg.sm_align : group_size(0);
    memcpy(r->internal_padding, &t, sizeof(t));
}

static int tag_of(const CUdevResource *r, struct tag *t)
{
    memcpy(t, r->internal_padding, sizeof(*t));
    return r->type == CU_DEV_RESOURCE_TYPE_SM && t->magic == TAG_MAGIC ? 0 : -1;
}

unsigned sim_current_sms(void)
{
    const struct CUctx_st *c = sim_tls.depth > 0 ? sim_tls.stack[sim_tls.depth - 1] : NULL;

    return c && c->base ? c->sms : 0;
}

unsigned sim_current_cluster(void)
{
    const struct CUctx_st *c = sim_tls.depth > 0 ? sim_tls.stack[sim_tls.depth - 1] : NULL;

    return c && c->base ? c->cluster : 0;
}

uint64_t sim_scale_duration(uint64_t dur_ns, unsigned sms)
{
    if (sms == 0 || sms >= sim_drv.cfg.sms)
        return dur_ns;
    return dur_ns * sim_drv.cfg.sms / sms;
}

/* sim_enter for the resource API: also refuses when green contexts are off. */
static CUresult enter(void)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!sim_drv.cfg.green) {
        sim_leave();
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetDevResource(CUdevice device, CUdevResource *resource,
                                           CUdevResourceType type)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_check_device(device)) == CUDA_SUCCESS) {
        if (!sim_drv.cfg.green)
            r = CUDA_ERROR_NOT_SUPPORTED;
        else if (!resource)
            r = CUDA_ERROR_INVALID_VALUE;
        else if (type != CU_DEV_RESOURCE_TYPE_SM)
            r = CUDA_ERROR_INVALID_RESOURCE_TYPE;
        else
            fill(resource, device, sim_drv.cfg.sms, 0, SIM_CLUSTER_DEVICE);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDevSmResourceSplitByCount(CUdevResource *result, unsigned int *nbGroups,
                                                const CUdevResource *input,
                                                CUdevResource *remaining, unsigned int useFlags,
                                                unsigned int minCount)
{
    unsigned size, n, unit;
    struct tag t;
    uint32_t split;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!nbGroups || !input || (useFlags & ~3u)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (tag_of(input, &t) < 0) {
        r = CUDA_ERROR_INVALID_RESOURCE_TYPE;
    } else if (t.split != 0 || minCount > input->sm.smCount) {
        /* The groups of a split are not split again (until a green context is made). */
        r = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
    } else {
        unit = group_size(useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING);
        size = minCount <= unit ? unit : (minCount + unit - 1) / unit * unit;
        n = size <= input->sm.smCount ? input->sm.smCount / size : 0;
        /* A whole device's co-scheduled groups of the minimum size, as its driver makes them. */
        if (!(useFlags & CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING) && size == SM_GROUP &&
            input->sm.smCount == sim_drv.cfg.sms && n > 0 &&
            input->sm.smCount - n * size < coscheduled_leftover(input->sm.smCount))
            n = (input->sm.smCount - coscheduled_leftover(input->sm.smCount)) / size;
        if (result && n > *nbGroups)
            n = *nbGroups;
        split = ++sim_drv.next_split;
        if (result)
            for (unsigned i = 0; i < n; i++)
                fill(&result[i], t.dev, size, split, unit);
        if (remaining)
            fill(remaining, t.dev, input->sm.smCount - n * size, split, unit);
        *nbGroups = n;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDevResourceGenerateDesc(CUdevResourceDesc *phDesc, CUdevResource *resources,
                                              unsigned int nbResources)
{
    struct CUdevResourceDesc_st *d;
    struct tag first, t;
    unsigned sms = 0, cluster = 0;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!phDesc || !resources || nbResources == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (unsigned i = 0; i < nbResources; i++) {
        if (tag_of(&resources[i], &t) < 0) {
            r = CUDA_ERROR_INVALID_RESOURCE_TYPE;
            goto out;
        }
        if (i == 0)
            first = t;
        /* Several resources must all come from one split. */
        if (t.dev != first.dev || (nbResources > 1 && (t.split == 0 || t.split != first.split))) {
            r = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
            goto out;
        }
        sms += resources[i].sm.smCount;
        if (i == 0 || t.cluster < cluster)
            cluster = t.cluster;
    }
    if (sms == 0 || !(d = calloc(1, sizeof(*d)))) {
        r = sms == 0 ? CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION : CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    d->dev = first.dev;
    d->sms = sms;
    d->cluster = cluster;
    d->next = sim_drv.descs;
    sim_drv.descs = d;
    *phDesc = d;
out:
    sim_leave();
    return r;
}

static struct CUgreenCtx_st *green_find(CUgreenCtx h)
{
    for (struct CUgreenCtx_st *g = sim_drv.greens; g; g = g->next)
        if (g == h)
            return g;
    return NULL;
}

SIM_EXPORT CUresult cuGreenCtxCreate(CUgreenCtx *phCtx, CUdevResourceDesc desc, CUdevice dev,
                                     unsigned int flags)
{
    struct CUdevResourceDesc_st *d;
    struct CUgreenCtx_st *g;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    for (d = sim_drv.descs; d && d != desc; d = d->next)
        ;
    if (!phCtx || !d || flags != CU_GREEN_CTX_DEFAULT_STREAM) {
        r = CUDA_ERROR_INVALID_VALUE; /* CUDA 13.0 requires the default-stream flag */
    } else if ((r = sim_check_device(dev)) == CUDA_SUCCESS && d->dev != dev) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (r == CUDA_SUCCESS && !(g = calloc(1, sizeof(*g)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (r == CUDA_SUCCESS) {
        /* It holds a reference to the primary context, which it shares. */
        if ((r = sim_primary_retain_locked(dev)) != CUDA_SUCCESS) {
            free(g);
        } else {
            g->ctx.id = ++sim_drv.next_id;
            g->ctx.dev = dev;
            g->ctx.active = 1;
            g->ctx.base = &sim_drv.primary[dev];
            g->ctx.sms = d->sms;
            g->ctx.cluster = d->cluster;
            g->ctx.legacy.ctx = g->ctx.base;
            g->ctx.legacy.kind = SIM_STREAM_LEGACY;
            g->ctx.next = sim_drv.contexts;
            sim_drv.contexts = &g->ctx;
            g->next = sim_drv.greens;
            sim_drv.greens = g;
            *phCtx = g;
        }
    }
    sim_leave();
    return r;
}

/*
 * A stream whose kernels run on the green context's SMs. Like the real
 * driver (measured on an H200, bench/green_route.cu), it takes work of the
 * primary context it shares: its functions, and events made there, with the
 * primary current.
 */
SIM_EXPORT CUresult cuGreenCtxStreamCreate(CUstream *phStream, CUgreenCtx greenCtx,
                                           unsigned int flags, int priority)
{
    struct CUgreenCtx_st *g;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!phStream || flags != CU_STREAM_NON_BLOCKING) {
        r = CUDA_ERROR_INVALID_VALUE; /* the driver requires CU_STREAM_NON_BLOCKING */
    } else if (!(g = green_find(greenCtx)) || g->ctx.destroyed) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        r = sim_stream_new(g->ctx.base, g->ctx.sms, flags, priority, phStream);
        if (r == CUDA_SUCCESS)
            (*phStream)->cluster = g->ctx.cluster;
    }
    sim_leave();
    return r;
}

/* Like created contexts, a destroyed one is kept: other threads may still name it. */
SIM_EXPORT CUresult cuGreenCtxDestroy(CUgreenCtx hCtx)
{
    struct CUgreenCtx_st *g;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!(g = green_find(hCtx)) || g->ctx.destroyed) {
        r = CUDA_ERROR_INVALID_CONTEXT;
    } else {
        g->ctx.destroyed = 1;
        g->ctx.active = 0;
        if (sim_tls.depth > 0 && sim_tls.stack[sim_tls.depth - 1] == &g->ctx)
            sim_tls.depth--;
        r = sim_primary_release_locked(g->ctx.dev);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxFromGreenCtx(CUcontext *pContext, CUgreenCtx hCtx)
{
    struct CUgreenCtx_st *g;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!pContext)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(g = green_find(hCtx)) || g->ctx.destroyed)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else
        *pContext = &g->ctx;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuGreenCtxGetDevResource(CUgreenCtx hCtx, CUdevResource *resource,
                                             CUdevResourceType type)
{
    struct CUgreenCtx_st *g;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!resource)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(g = green_find(hCtx)) || g->ctx.destroyed)
        r = CUDA_ERROR_INVALID_CONTEXT;
    else if (type != CU_DEV_RESOURCE_TYPE_SM)
        r = CUDA_ERROR_INVALID_RESOURCE_TYPE;
    else
        fill(resource, g->ctx.dev, g->ctx.sms, 0, g->ctx.cluster);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuCtxGetDevResource(CUcontext hCtx, CUdevResource *resource,
                                        CUdevResourceType type)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = enter()) != CUDA_SUCCESS)
        return r;
    if (!resource)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_ctx_lookup(hCtx, &c)) != CUDA_SUCCESS ||
             (r = sim_ctx_usable(c)) != CUDA_SUCCESS)
        ;
    else if (type != CU_DEV_RESOURCE_TYPE_SM)
        r = CUDA_ERROR_INVALID_RESOURCE_TYPE;
    else
        fill(resource, c->dev, c->base ? c->sms : sim_drv.cfg.sms, 0,
             c->base ? c->cluster : SIM_CLUSTER_DEVICE);
    sim_leave();
    return r;
}
