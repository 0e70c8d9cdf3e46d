/*
 * Device memory of the simulated driver: every allocation family (plain,
 * pitched, managed, stream-ordered pools, VMM, arrays), the process-local map
 * of device addresses, and the charges each family makes on the shared device
 * (in 2 MiB granules, as the real driver reserves). Device memory has no
 * backing except managed memory, which is host-mapped so the host may touch it.
 */
#define _GNU_SOURCE
#include "sim_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Where device addresses come from: the 32-bit legacy calls need low ones. */
#define SIM_VA_LO 0x200000000000ull
#define SIM_VA_HI 0x300000000000ull
#define SIM_VA32_LO 0x00200000ull
#define SIM_VA32_HI 0x100000000ull

#define SIM_PITCH_ALIGN 512u

/* ---- the address map -------------------------------------------------- */

/* Index of the last range with base <= p, or -1. */
static long range_index(CUdeviceptr p)
{
    long lo = 0, hi = (long)sim_drv.nranges - 1, found = -1;

    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (sim_drv.ranges[mid].base <= p) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

static struct sim_range *range_containing(CUdeviceptr p)
{
    long i = range_index(p);

    if (i < 0 || p - sim_drv.ranges[i].base >= sim_drv.ranges[i].span)
        return NULL;
    return &sim_drv.ranges[i];
}

static struct sim_range *range_at(CUdeviceptr base)
{
    long i = range_index(base);

    return i >= 0 && sim_drv.ranges[i].base == base ? &sim_drv.ranges[i] : NULL;
}

static int range_insert(const struct sim_range *r)
{
    long i = range_index(r->base) + 1;

    if (sim_drv.nranges == sim_drv.cap) {
        size_t cap = sim_drv.cap ? sim_drv.cap * 2 : 64;
        struct sim_range *n = realloc(sim_drv.ranges, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        sim_drv.ranges = n;
        sim_drv.cap = cap;
    }
    memmove(&sim_drv.ranges[i + 1], &sim_drv.ranges[i],
            (sim_drv.nranges - (size_t)i) * sizeof(*r));
    sim_drv.ranges[i] = *r;
    sim_drv.nranges++;
    return 0;
}

static void range_remove(struct sim_range *r)
{
    size_t i = (size_t)(r - sim_drv.ranges);

    memmove(&sim_drv.ranges[i], &sim_drv.ranges[i + 1],
            (sim_drv.nranges - i - 1) * sizeof(*r));
    sim_drv.nranges--;
}

/* First fit of span bytes aligned to align in [lo, hi); a free hint is taken as is. */
static int va_find(uint64_t lo, uint64_t hi, uint64_t span, uint64_t align, CUdeviceptr hint,
                   CUdeviceptr *out)
{
    uint64_t cur = sim_round_up(lo, align);

    if (span == 0 || span > hi - lo)
        return -ENOMEM;
    if (hint && hint % align == 0 && hint >= lo && hint <= hi - span) {
        long i = range_index(hint + span - 1);
        if (i < 0 || sim_drv.ranges[i].base + sim_drv.ranges[i].span <= hint) {
            *out = hint;
            return 0;
        }
    }
    for (size_t i = 0; i < sim_drv.nranges; i++) {
        const struct sim_range *r = &sim_drv.ranges[i];
        if (r->base + r->span <= cur)
            continue;
        if (r->base >= cur + span || r->base >= hi)
            break;
        cur = sim_round_up(r->base + r->span, align);
        if (cur > hi - span)
            return -ENOMEM;
    }
    if (cur > hi - span)
        return -ENOMEM;
    *out = cur;
    return 0;
}

/* ---- plain allocations ------------------------------------------------ */

static CUresult alloc_device(struct CUctx_st *c, uint64_t size, int low32, CUdeviceptr *out)
{
    struct sim_range r = {.size = size, .kind = SIM_RANGE_ALLOC, .dev = c->dev, .ctx = c};

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIM_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r.span = r.charged = sim_round_up(size, SIM_GRANULE);
    if (va_find(low32 ? SIM_VA32_LO : SIM_VA_LO, low32 ? SIM_VA32_HI : SIM_VA_HI, r.span,
                SIM_GRANULE, 0, &r.base) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (sim_state_charge(&sim_drv.st, c->dev, r.charged) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (range_insert(&r) < 0) {
        sim_state_uncharge(&sim_drv.st, c->dev, r.charged);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = r.base;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    r = dptr ? alloc_device(c, bytesize, 0, dptr) : CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    struct CUctx_st *c;
    CUdeviceptr p = 0;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    r = dptr ? alloc_device(c, bytesize, 1, &p) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    sim_leave();
    return r;
}

/* Rows start on 512-byte boundaries; the whole pitch * height is reserved. */
static CUresult alloc_pitch(size_t width, size_t height, unsigned elem, int low32,
                            CUdeviceptr *dptr, size_t *pitch)
{
    struct CUctx_st *c;
    uint64_t p;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    p = sim_round_up(width, SIM_PITCH_ALIGN);
    if (!dptr || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16) ||
        width > SIM_MAX_BYTES)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (height > SIM_MAX_BYTES / p)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if ((r = alloc_device(c, p * height, low32, dptr)) == CUDA_SUCCESS)
        *pitch = (size_t)p;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
    return alloc_pitch(WidthInBytes, Height, ElementSizeBytes, 0, dptr, pPitch);
}

SIM_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                    unsigned int WidthInBytes, unsigned int Height,
                                    unsigned int ElementSizeBytes)
{
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult r;

    if (!dptr || !pPitch)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    r = alloc_pitch(WidthInBytes, Height, ElementSizeBytes, 1, &p, &pitch);
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return r;
}

/* Counted as device memory, and host-mapped (lazily, never reserved) so the host may use it. */
SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct CUctx_st *c;
    struct sim_range rg = {.kind = SIM_RANGE_MANAGED};
    size_t page = 4096;
    void *host;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (bytesize > SIM_MAX_BYTES) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    rg.size = bytesize;
    rg.span = sim_round_up(bytesize, page);
    rg.charged = sim_round_up(bytesize, SIM_GRANULE);
    rg.dev = c->dev;
    rg.ctx = c;
    if (sim_state_charge(&sim_drv.st, c->dev, rg.charged) < 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    host = mmap(NULL, rg.span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
    if (host == MAP_FAILED) {
        sim_state_uncharge(&sim_drv.st, c->dev, rg.charged);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    rg.host = host;
    rg.base = (CUdeviceptr)(uintptr_t)host;
    if (range_insert(&rg) < 0) {
        munmap(host, rg.span);
        sim_state_uncharge(&sim_drv.st, c->dev, rg.charged);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    *dptr = rg.base;
out:
    sim_leave();
    return r;
}

/* ---- pools ------------------------------------------------------------ */

static struct CUmemPoolHandle_st *pool_new(int dev, int is_default, uint64_t max_size)
{
    struct CUmemPoolHandle_st *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->dev = dev;
    p->is_default = is_default;
    p->max_size = max_size;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->next = sim_drv.pools;
    sim_drv.pools = p;
    return p;
}

static void pool_unlink(struct CUmemPoolHandle_st *p)
{
    struct CUmemPoolHandle_st **pp;

    for (pp = &sim_drv.pools; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p);
}

int sim_mem_init_pools(void)
{
    for (uint32_t d = 0; d < sim_drv.cfg.devices; d++) {
        struct CUmemPoolHandle_st *p = pool_new((int)d, 1, 0);
        if (!p)
            return -ENOMEM;
        sim_drv.default_pool[d] = sim_drv.current_pool[d] = p;
    }
    return 0;
}

static struct CUmemPoolHandle_st *pool_find(CUmemoryPool h)
{
    for (struct CUmemPoolHandle_st *p = sim_drv.pools; p; p = p->next)
        if (p == h && !p->destroyed)
            return p;
    return NULL;
}

/* Shrinks the reserve to keep bytes (never below what is in use), giving the rest back. */
static void pool_shrink_to(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    uint64_t target = keep < p->used ? p->used : keep;

    if (p->reserved > target) {
        sim_state_uncharge(&sim_drv.st, p->dev, p->reserved - target);
        p->reserved = target;
    }
}

void sim_pools_settle(int dev)
{
    for (struct CUmemPoolHandle_st *p = sim_drv.pools; p; p = p->next)
        if (p->dev == dev && p->reserved - p->used > p->threshold)
            pool_shrink_to(p, p->used + p->threshold);
}

void sim_sync_then_settle(uint64_t until, int dev)
{
    sim_sleep_until(until);
    if (sim_enter() == CUDA_SUCCESS) {
        sim_pools_settle(dev);
        sim_leave();
    }
}

/*
 * U grows by the size in granules; past R the pool grows to U, taking the
 * growth from the device, and an allocation the device cannot hold changes
 * nothing.
 */
static CUresult pool_alloc(struct CUmemPoolHandle_st *p, struct CUctx_st *c, size_t size,
                           CUdeviceptr *out)
{
    struct sim_range r = {.size = size, .kind = SIM_RANGE_POOL, .dev = p->dev, .ctx = c, .pool = p};
    uint64_t used;

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIM_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r.span = r.charged = sim_round_up(size, SIM_GRANULE);
    used = p->used + r.charged;
    if (p->max_size && used > p->max_size)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (va_find(SIM_VA_LO, SIM_VA_HI, r.span, SIM_GRANULE, 0, &r.base) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (used > p->reserved && sim_state_charge(&sim_drv.st, p->dev, used - p->reserved) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (range_insert(&r) < 0) {
        if (used > p->reserved)
            sim_state_uncharge(&sim_drv.st, p->dev, used - p->reserved);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (used > p->reserved)
        p->reserved = used;
    p->used = used;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *out = r.base;
    return CUDA_SUCCESS;
}

/* Frees any allocation (not a VMM reservation); the range pointer dies with it. */
static void range_free(struct sim_range *r)
{
    struct CUmemPoolHandle_st *p = r->pool;

    switch (r->kind) {
    case SIM_RANGE_POOL:
        p->used -= r->charged;
        range_remove(r);
        /* A destroyed pool goes once its last allocation does. */
        if (p->destroyed && p->used == 0) {
            pool_shrink_to(p, 0);
            pool_unlink(p);
        }
        return;
    case SIM_RANGE_MANAGED:
        munmap(r->host, r->span);
        /* fall through */
    case SIM_RANGE_ALLOC:
        sim_state_uncharge(&sim_drv.st, r->dev, r->charged);
        range_remove(r);
        return;
    case SIM_RANGE_VA:
        return;
    }
}

static CUresult free_at(CUdeviceptr dptr)
{
    struct sim_range *r = range_at(dptr);

    if (!r || r->kind == SIM_RANGE_VA)
        return CUDA_ERROR_INVALID_VALUE;
    range_free(r);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    r = free_at(dptr);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    return cuMemFree_v2(dptr);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, int use_pool,
                            CUstream h, int ptds)
{
    struct CUmemPoolHandle_st *p = NULL;
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!dptr || (use_pool && !(p = pool_find(pool))))
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS) {
        /* Allocated at once, even when capturing: there are no memory nodes here. */
        if (!p)
            p = sim_drv.current_pool[s->ctx->dev];
        r = pool_alloc(p, s->ctx, size, dptr);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, 0, hStream, 0);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, 0, hStream, 1);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
                                            CUmemoryPool pool, CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, 1, hStream, 0);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, 1, hStream, 1);
}

/* The bytes return to the pool at once; the pool gives back to the device at a sync. */
static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptds)
{
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS)
        r = free_at(dptr);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, 0);
}

SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, 1);
}

static int valid_location(const CUmemLocation *l)
{
    return l->type == CU_MEM_LOCATION_TYPE_DEVICE && l->id >= 0 &&
           (uint32_t)l->id < sim_drv.cfg.devices;
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        !valid_location(&poolProps->location))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(p = pool_new(poolProps->location.id, 0, poolProps->maxSize)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        *pool = p;
    sim_leave();
    return r;
}

/*
 * With allocations outstanding the pool lives on until they are freed, as
 * documented; what it holds beyond them goes back now.
 */
SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)) || p->is_default) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        if (sim_drv.current_pool[p->dev] == p)
            sim_drv.current_pool[p->dev] = sim_drv.default_pool[p->dev];
        pool_shrink_to(p, 0);
        if (p->used == 0)
            pool_unlink(p);
        else
            p->destroyed = 1;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)))
        r = CUDA_ERROR_INVALID_VALUE;
    else
        pool_shrink_to(p, minBytesToKeep);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)) || !value) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - 1];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: *(cuuint64_t *)value = p->threshold; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT: *(cuuint64_t *)value = p->reserved; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH: *(cuuint64_t *)value = p->reserved_high; break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT: *(cuuint64_t *)value = p->used; break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH: *(cuuint64_t *)value = p->used_high; break;
        default: r = CUDA_ERROR_INVALID_VALUE; break;
        }
    }
    sim_leave();
    return r;
}

/* The high-water marks may only be reset (set to 0, which means "to the current value"). */
SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)) || !value) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - 1] = *(int *)value != 0;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD: p->threshold = *(cuuint64_t *)value; break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                p->reserved_high = p->reserved;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                p->used_high = p->used;
            break;
        default: r = CUDA_ERROR_INVALID_VALUE; break;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pool_out)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS)
        *pool_out = sim_drv.default_pool[dev];
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pool)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS)
        *pool = sim_drv.current_pool[dev];
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_check_device(dev)) != CUDA_SUCCESS)
        ;
    else if (!(p = pool_find(pool)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (p->dev != dev)
        r = CUDA_ERROR_INVALID_DEVICE;
    else
        sim_drv.current_pool[dev] = p;
    sim_leave();
    return r;
}

/* ---- virtual memory management ------------------------------------------ */

static int valid_alloc_prop(const CUmemAllocationProp *prop)
{
    return prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && valid_location(&prop->location);
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                  const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || !prop || !valid_alloc_prop(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = (size_t)SIM_GRANULE;
    return CUDA_SUCCESS;
}

static struct sim_vmm *vmm_find(CUmemGenericAllocationHandle h)
{
    for (struct sim_vmm *v = sim_drv.vmms; v; v = v->next)
        if ((uintptr_t)v == h)
            return v;
    return NULL;
}

/* Physical memory goes when the handle is released and no mapping is left. */
static void vmm_maybe_free(struct sim_vmm *v)
{
    struct sim_vmm **pp;

    if (v->refs > 0 || v->maps > 0)
        return;
    sim_state_uncharge(&sim_drv.st, v->dev, v->size);
    for (pp = &sim_drv.vmms; *pp; pp = &(*pp)->next) {
        if (*pp == v) {
            *pp = v->next;
            break;
        }
    }
    free(v);
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct sim_vmm *v;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!handle || !prop || flags != 0 || !valid_alloc_prop(prop) || size == 0 ||
        size % SIM_GRANULE != 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (size > SIM_MAX_BYTES || !(v = calloc(1, sizeof(*v)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (sim_state_charge(&sim_drv.st, prop->location.id, size) < 0) {
        free(v);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        v->dev = prop->location.id;
        v->size = size;
        v->refs = 1;
        v->next = sim_drv.vmms;
        sim_drv.vmms = v;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)v;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct sim_vmm *v;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(v = vmm_find(handle)) || v->refs == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        v->refs--;
        vmm_maybe_free(v);
    }
    sim_leave();
    return r;
}

static struct sim_map *map_containing(const struct sim_range *va, CUdeviceptr p)
{
    for (struct sim_map *m = va->maps; m; m = m->next)
        if (p >= m->ptr && p - m->ptr < m->size)
            return m;
    return NULL;
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    struct sim_range *va;
    struct sim_map *m = NULL;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing((CUdeviceptr)(uintptr_t)addr);
    if (!handle || !va || va->kind != SIM_RANGE_VA ||
        !(m = map_containing(va, (CUdeviceptr)(uintptr_t)addr))) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        m->handle->refs++;
        *handle = (CUmemGenericAllocationHandle)(uintptr_t)m->handle;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                        CUdeviceptr addr, unsigned long long flags)
{
    struct sim_range r = {.kind = SIM_RANGE_VA};
    CUresult res;

    if ((res = sim_enter()) != CUDA_SUCCESS)
        return res;
    if (alignment < SIM_GRANULE)
        alignment = (size_t)SIM_GRANULE;
    if (!ptr || size == 0 || flags != 0 || (alignment & (alignment - 1)) != 0) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else if (size > SIM_VA_HI - SIM_VA_LO) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        r.size = size;
        r.span = sim_round_up(size, SIM_GRANULE);
        if (va_find(SIM_VA_LO, SIM_VA_HI, r.span, alignment, addr, &r.base) < 0 ||
            range_insert(&r) < 0)
            res = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *ptr = r.base;
    }
    sim_leave();
    return res;
}

static void unmap(struct sim_range *va, struct sim_map *m)
{
    struct sim_map **pp;

    for (pp = &va->maps; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    m->handle->maps--;
    vmm_maybe_free(m->handle);
    free(m);
}

/* Mappings still in the range are dropped with it, as cuMemUnmap would. */
SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    struct sim_range *va;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_at(ptr);
    if (!va || va->kind != SIM_RANGE_VA || sim_round_up(size, SIM_GRANULE) != va->span) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        while (va->maps)
            unmap(va, va->maps);
        range_remove(va);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    struct sim_range *va;
    struct sim_vmm *v;
    struct sim_map *m;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing(ptr);
    v = vmm_find(handle);
    if (flags != 0 || !v || v->refs == 0 || size == 0 || size % SIM_GRANULE ||
        offset % SIM_GRANULE || offset > v->size || size > v->size - offset || !va ||
        va->kind != SIM_RANGE_VA || size > va->span - (ptr - va->base)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (m = va->maps; m; m = m->next) {
        if (ptr < m->ptr + m->size && m->ptr < ptr + size) {
            r = CUDA_ERROR_INVALID_VALUE; /* already mapped */
            goto out;
        }
    }
    if (!(m = calloc(1, sizeof(*m)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    m->ptr = ptr;
    m->size = size;
    m->handle = v;
    m->next = va->maps;
    va->maps = m;
    v->maps++;
out:
    sim_leave();
    return r;
}

/* Unmaps whole mappings inside [ptr, ptr + size); cutting one in part is refused. */
SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct sim_range *va;
    struct sim_map *m, *next;
    int found = 0;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing(ptr);
    if (!va || va->kind != SIM_RANGE_VA || size == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (m = va->maps; m; m = m->next) {
        int overlaps = ptr < m->ptr + m->size && m->ptr < ptr + size;
        int inside = m->ptr >= ptr && m->ptr + m->size <= ptr + size;
        if (overlaps && !inside) {
            r = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
        found |= inside;
    }
    if (!found) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (m = va->maps; m; m = next) {
        next = m->next;
        if (m->ptr >= ptr && m->ptr + m->size <= ptr + size)
            unmap(va, m);
    }
out:
    sim_leave();
    return r;
}

/* Whether [p, p + n) is covered by mappings of va. */
static int va_covered(const struct sim_range *va, CUdeviceptr p, size_t n)
{
    CUdeviceptr end = p + n;

    while (p < end) {
        const struct sim_map *m = map_containing(va, p);
        if (!m)
            return 0;
        p = m->ptr + m->size;
    }
    return 1;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                   size_t count)
{
    struct sim_range *va;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing(ptr);
    if (!desc || count == 0 || size == 0 || !va || va->kind != SIM_RANGE_VA ||
        size > va->span - (ptr - va->base) || !va_covered(va, ptr, size))
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++)
        if (!valid_location(&desc[i].location) ||
            (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            r = CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

/* ---- arrays ----------------------------------------------------------- */

static unsigned format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8: case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16: case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32: case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

/* width * max(height, 1) * max(depth, 1) * channels * element size, in granules. */
static CUresult array_create(CUarray *ph, uint64_t w, uint64_t h, uint64_t d, CUarray_format fmt,
                             unsigned channels)
{
    struct CUctx_st *c;
    struct CUarray_st *a;
    uint64_t esize = format_bytes(fmt), bytes;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    h = h ? h : 1;
    d = d ? d : 1;
    if (!ph || w == 0 || esize == 0 || (channels != 1 && channels != 2 && channels != 4)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    esize *= channels;
    if (w > SIM_MAX_BYTES / esize || h > SIM_MAX_BYTES / (w * esize) ||
        d > SIM_MAX_BYTES / (w * esize * h)) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    bytes = sim_round_up(w * h * d * esize, SIM_GRANULE);
    if (!(a = calloc(1, sizeof(*a)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (sim_state_charge(&sim_drv.st, c->dev, bytes) < 0) {
        free(a);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        a->ctx = c;
        a->dev = c->dev;
        a->charged = bytes;
        a->next = sim_drv.arrays;
        sim_drv.arrays = a;
        *ph = a;
    }
out:
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, 1, d->Format, d->NumChannels);
}

SIM_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, 1, d->Format, d->NumChannels);
}

SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

SIM_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

static void array_free(struct CUarray_st *a)
{
    sim_state_uncharge(&sim_drv.st, a->dev, a->charged);
    free(a);
}

SIM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    struct CUarray_st **pp;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_HANDLE;
    for (pp = &sim_drv.arrays; *pp; pp = &(*pp)->next) {
        if (*pp == hArray) {
            struct CUarray_st *a = *pp;
            *pp = a->next;
            array_free(a);
            r = CUDA_SUCCESS;
            break;
        }
    }
    sim_leave();
    return r;
}

/* ---- information ------------------------------------------------------ */

static CUresult mem_info(uint64_t *free_b, uint64_t *total_b)
{
    struct CUctx_st *c;
    uint64_t used;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    sim_state_lock(&sim_drv.st);
    used = sim_state_used(sim_drv.st.sh, c->dev);
    sim_state_unlock(&sim_drv.st);
    *total_b = sim_drv.cfg.memory;
    *free_b = used < sim_drv.cfg.memory ? sim_drv.cfg.memory - used : 0;
    sim_leave();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f, t;
    CUresult r;

    if (!free || !total)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    if ((r = mem_info(&f, &t)) == CUDA_SUCCESS) {
        *free = (size_t)f;
        *total = (size_t)t;
    }
    return r;
}

/* The 32-bit legacy call cannot say more than 4 GiB - 1. */
SIM_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    uint64_t f, t;
    CUresult r;

    if (!free || !total)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    if ((r = mem_info(&f, &t)) == CUDA_SUCCESS) {
        *free = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
        *total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    }
    return r;
}

/* The allocation (or, for VMM, the mapping) holding p. */
static CUresult address_range(CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    struct sim_range *r = range_containing(p);
    struct sim_map *m;

    if (!r)
        return CUDA_ERROR_NOT_FOUND;
    if (r->kind == SIM_RANGE_VA) {
        if (!(m = map_containing(r, p)))
            return CUDA_ERROR_NOT_FOUND;
        *base = m->ptr;
        *size = m->size;
        return CUDA_SUCCESS;
    }
    if (p - r->base >= r->size)
        return CUDA_ERROR_NOT_FOUND;
    *base = r->base;
    *size = r->size;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct CUctx_st *c;
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if ((r = address_range(dptr, &b, &s)) == CUDA_SUCCESS) {
        if (pbase)
            *pbase = b;
        if (psize)
            *psize = s;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
                                         CUdeviceptr_v1 dptr)
{
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r = cuMemGetAddressRange_v2(&b, &s, dptr);

    if (r == CUDA_SUCCESS) {
        if (pbase)
            *pbase = (CUdeviceptr_v1)b;
        if (psize)
            *psize = (unsigned int)s;
    }
    return r;
}

/* ---- copies ----------------------------------------------------------- */

/*
 * Checks that [p, p + n) lies in one live allocation or in mapped VMM memory;
 * for managed memory returns its host address. Under the lock.
 */
static CUresult check_device_range(CUdeviceptr p, size_t n, void **host)
{
    struct sim_range *r = range_containing(p);

    *host = NULL;
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (r->kind == SIM_RANGE_VA)
        return n <= r->span - (p - r->base) && va_covered(r, p, n) ? CUDA_SUCCESS
                                                                   : CUDA_ERROR_INVALID_VALUE;
    if (p - r->base > r->size || n > r->size - (p - r->base))
        return CUDA_ERROR_INVALID_VALUE;
    if (r->kind == SIM_RANGE_MANAGED)
        *host = (char *)r->host + (p - r->base);
    return CUDA_SUCCESS;
}

enum copy_dir { COPY_HTOD, COPY_DTOH, COPY_SET };

/*
 * Copies are synchronous, as the driver's pageable-memory copies are: they
 * wait for the work queued before them on the default stream. Memset is not.
 */
static CUresult copy(enum copy_dir dir, CUdeviceptr dev, void *host, const void *src,
                     unsigned char value, size_t n, int ptds)
{
    struct CUctx_st *c;
    struct CUstream_st *s;
    uint64_t until = 0;
    void *managed = NULL;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (n > 0 && ((dir == COPY_HTOD && !src) || (dir == COPY_DTOH && !host)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (n > 0)
        r = check_device_range(dev, n, &managed);
    if (r == CUDA_SUCCESS && dir != COPY_SET &&
        (r = sim_stream_get(NULL, ptds, &s)) == CUDA_SUCCESS)
        until = sim_stream_wait_point(s);
    sim_leave();
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    sim_sleep_until(until);
    switch (dir) {
    case COPY_HTOD:
        if (managed)
            memcpy(managed, src, n);
        break;
    case COPY_DTOH:
        if (managed)
            memcpy(host, managed, n);
        else
            memset(host, 0, n); /* device memory has no content: reads give zeros */
        break;
    case COPY_SET:
        if (managed)
            memset(managed, value, n);
        break;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy(COPY_HTOD, dstDevice, NULL, srcHost, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                         size_t ByteCount)
{
    return copy(COPY_HTOD, dstDevice, NULL, srcHost, 0, ByteCount, 1);
}

SIM_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                 unsigned int ByteCount)
{
    return copy(COPY_HTOD, dstDevice, NULL, srcHost, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(COPY_DTOH, srcDevice, dstHost, NULL, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(COPY_DTOH, srcDevice, dstHost, NULL, 0, ByteCount, 1);
}

SIM_EXPORT CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    return copy(COPY_DTOH, srcDevice, dstHost, NULL, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return copy(COPY_SET, dstDevice, NULL, NULL, uc, N, 0);
}

SIM_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return copy(COPY_SET, dstDevice, NULL, NULL, uc, N, 1);
}

SIM_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
    return copy(COPY_SET, dstDevice, NULL, NULL, uc, N, 0);
}

/* ---- teardown --------------------------------------------------------- */

void sim_mem_drop_ctx(struct CUctx_st *c)
{
    struct CUarray_st **pa = &sim_drv.arrays;

    for (size_t i = sim_drv.nranges; i-- > 0;)
        if (sim_drv.ranges[i].ctx == c && sim_drv.ranges[i].kind != SIM_RANGE_VA)
            range_free(&sim_drv.ranges[i]);
    while (*pa) {
        struct CUarray_st *a = *pa;
        if (a->ctx == c) {
            *pa = a->next;
            array_free(a);
        } else {
            pa = &a->next;
        }
    }
    sim_pools_settle(c->dev);
}
