/*
 * Stream-ordered allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync, their
 * frees, pool trimming and destruction): charged by the pools' reserved size,
 * which grows in 32 MiB steps on the H200 (docs/design.md).
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

static struct pool_state *pool_find(CUmemoryPool pool, int ord, int add)
{
    int i, free_i = -1;

    if (pool == NULL)
        return NULL;
    for (i = 0; i < MAX_POOLS; i++) {
        if (pools[i].pool == pool)
            return &pools[i];
        if (pools[i].pool == NULL && !pools[i].destroyed && free_i < 0)
            free_i = i;
    }
    if (!add || free_i < 0)
        return NULL;
    /* Under mem_mu too: refresh_overhead reads the table holding mem_mu alone. */
    pthread_mutex_lock(&mem_mu);
    memset(&pools[free_i], 0, sizeof(pools[free_i]));
    pools[free_i].pool = pool;
    pools[free_i].ord = ord;
    pthread_mutex_unlock(&mem_mu);
    return &pools[free_i];
}

/*
 * The live allocations of each pool (pool_mu held): a pool destroyed while some
 * live keeps their memory until the last is freed (the driver's rule), and so
 * keeps their charge. A free takes the record before the driver is asked (the
 * address may be handed out again the moment it is freed) and gives it back if
 * the driver refuses.
 */
static void pool_ptr_add(struct pool_state *p, CUdeviceptr ptr)
{
    struct gs_map_entry *e;

    if ((e = gs_map_get(&pool_ptrs, (uint64_t)ptr)) != NULL) {
        /* A free we did not see (a graph's free node): that allocation is gone. */
        if (pools[e->aux].live)
            pools[e->aux].live--;
        pools[e->aux].uncounted = 1;
    } else if ((e = gs_map_put(&pool_ptrs, (uint64_t)ptr)) == NULL) {
        p->uncounted = 1;
        return;
    } else {
        __atomic_add_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
    }
    e->aux = (uint64_t)(p - pools);
    p->live++;
}

/* Takes ptr's record before its free: its pool's slot, or -1 when it is no pool's. */
int pool_ptr_take(CUdeviceptr ptr)
{
    struct gs_map_entry *e;
    int slot = -1;

    if (__atomic_load_n(&pool_ptr_count, __ATOMIC_RELAXED) == 0)
        return -1;
    pthread_mutex_lock(&pool_mu);
    if ((e = gs_map_get(&pool_ptrs, (uint64_t)ptr)) != NULL) {
        slot = (int)e->aux;
        gs_map_del(&pool_ptrs, e);
        __atomic_sub_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&pool_mu);
    return slot;
}

/* The free of ptr (taken from slot) was refused, or only recorded into a graph: still live. */
void pool_ptr_untake(CUdeviceptr ptr, int slot)
{
    struct gs_map_entry *e;

    pthread_mutex_lock(&pool_mu);
    if ((e = gs_map_put(&pool_ptrs, (uint64_t)ptr)) != NULL) {
        e->aux = (uint64_t)slot;
        __atomic_add_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
    } else {
        pools[slot].live--;
        pools[slot].uncounted = 1;
    }
    pthread_mutex_unlock(&pool_mu);
}

/* Gives back a destroyed pool's slot and charge (pool_mu held). */
static void pool_release(struct pool_state *p)
{
    struct dev_state *d;

    pthread_mutex_lock(&mem_mu);
    if ((d = dev_get(p->ord)) != NULL)
        unadmit_locked(d, p->accounted);
    memset(p, 0, sizeof(*p));
    pthread_mutex_unlock(&mem_mu);
}

/*
 * The allocation taken from slot is freed. If it was a destroyed pool's last, the
 * pool's memory goes when the free has run: with ordered, a free in stream order,
 * the stream is waited for first (the driver frees when the stream reaches it).
 */
void pool_ptr_done(int slot, int ordered, CUstream stream, int ptsz)
{
    struct pool_state *p = &pools[slot];
    int last;

    pthread_mutex_lock(&pool_mu);
    last = p->live && --p->live == 0 && p->destroyed && !p->uncounted;
    pthread_mutex_unlock(&pool_mu);
    if (!last)
        return;
    if (ordered)
        (ptsz ? gs__real.cuStreamSynchronize_ptsz : gs__real.cuStreamSynchronize)(stream);
    pthread_mutex_lock(&pool_mu);
    /* Unless the device's last context took it meanwhile (and the slot is another's now). */
    if (p->destroyed && p->pool == NULL && p->live == 0)
        pool_release(p);
    pthread_mutex_unlock(&pool_mu);
}

/* Every context on ord is gone, and with them every pool allocation made there. */
void pool_forget_device(int ord)
{
    struct gs_map_entry *e;
    int i;

    pthread_mutex_lock(&pool_mu);
    GS_MAP_FOREACH(&pool_ptrs, e)
    {
        struct pool_state *p = &pools[e->aux];
        if (p->ord == ord) {
            if (p->live)
                p->live--;
            gs_map_del(&pool_ptrs, e);
            __atomic_sub_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
        }
    }
    for (i = 0; i < MAX_POOLS; i++)
        if (pools[i].destroyed && pools[i].ord == ord)
            pool_release(&pools[i]);
    pthread_mutex_unlock(&pool_mu);
}

/*
 * What the pools on ordinal ord gave back to the device and are still charged
 * for: a pool gives memory back at a synchronisation the interposer does not
 * see (cuStreamSynchronize), and its charge stays until it is read again
 * (pool_sync), while NVML's figure for the process already lacks it. mem_mu
 * held (which every change of the pool table's pool, ord and accounted holds).
 */
uint64_t pools_released_unseen(int ord)
{
    cuuint64_t now;
    uint64_t sum = 0;
    int i;

    for (i = 0; i < MAX_POOLS && gs__real.cuMemPoolGetAttribute; i++)
        if (pools[i].pool && pools[i].ord == ord &&
            gs__real.cuMemPoolGetAttribute(pools[i].pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                           &now) == CUDA_SUCCESS &&
            now < pools[i].accounted)
            sum += pools[i].accounted - now;
    return sum;
}

/* Measured on the H200: a pool that must grow takes whole steps of 32 MiB (4 KiB took 32 MiB). */
#define POOL_STEP (32ULL << 20)

/*
 * The most the pool may grow by to serve bytes more. By count, what its use
 * would lack (held one after another, 4K, 4K, 1M, 20M, 8M took 32 MiB, +4M
 * 64); but a pool with room by count grows too where no hole holds the request
 * (20 MiB free in a hole and 24 at the end, 30 MiB asked: grew 32), and with
 * 32 threads on their own streams, and several pools, that was the common case:
 * real use reached 1030-1056 MiB under 1 GiB. Every growth measured was at most
 * the request rounded up to a step (1 GiB + 1 from empty: 1056 MiB), so that is
 * what is charged before the driver is asked. UINT64_MAX for a request no pool
 * grows by (refused).
 */
static uint64_t pool_growth(uint64_t reserved, uint64_t used, uint64_t bytes)
{
    uint64_t by_count;

    if (bytes > UINT64_MAX - POOL_STEP - used)
        return UINT64_MAX;
    by_count = used + bytes <= reserved ? 0 : round_up(used + bytes, POOL_STEP) - reserved;
    return by_count > round_up(bytes, POOL_STEP) ? by_count : round_up(bytes, POOL_STEP);
}

struct async_args {
    int which; /* 0 alloc, 1 alloc ptsz, 2 from pool, 3 from pool ptsz */
    CUdeviceptr *dptr;
    size_t bytesize;
    CUmemoryPool pool;
    CUstream stream;
};

static CUresult async_call(struct async_args *a)
{
    switch (a->which) {
    case 0:
        return gs__real.cuMemAllocAsync(a->dptr, a->bytesize, a->stream);
    case 1:
        return gs__real.cuMemAllocAsync_ptsz(a->dptr, a->bytesize, a->stream);
    case 2:
        return gs__real.cuMemAllocFromPoolAsync(a->dptr, a->bytesize, a->pool, a->stream);
    default:
        return gs__real.cuMemAllocFromPoolAsync_ptsz(a->dptr, a->bytesize, a->pool, a->stream);
    }
}

/*
 * Takes back an allocation the pool grew for beyond what was admitted (its
 * growth was not what 32 MiB steps predict): freed in stream order, and the
 * stream waited for, so that the pool gives back what it grew by.
 */
static void async_undo(struct async_args *a)
{
    CUresult r = a->which & 1 ? gs__real.cuMemFreeAsync_ptsz(*a->dptr, a->stream)
                              : gs__real.cuMemFreeAsync(*a->dptr, a->stream);

    if (r == CUDA_SUCCESS)
        (a->which & 1 ? gs__real.cuStreamSynchronize_ptsz
                      : gs__real.cuStreamSynchronize)(a->stream);
}

/* The pool's reserved and used bytes (both 0 when the driver does not tell). */
static void pool_sizes(CUmemoryPool pool, cuuint64_t *reserved, cuuint64_t *used)
{
    if (!gs__real.cuMemPoolGetAttribute ||
        gs__real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, reserved) !=
            CUDA_SUCCESS ||
        gs__real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, used) !=
            CUDA_SUCCESS)
        *reserved = *used = 0;
}

/*
 * The allocation of a made the pool grow beyond the need admitted for it (from
 * reserved): what it grew by past that is charged at once, whatever the limit,
 * so that no one else is admitted against memory the driver holds; then, where
 * that crossed the limit (or the lock could not be had), the allocation is
 * undone and 1 returned. pool_mu held.
 */
static int pool_past_admission(struct dev_state *d, struct pool_state *p, CUmemoryPool pool,
                               struct async_args *a, uint64_t reserved, uint64_t need)
{
    const struct gpuslice_tenant_device *td = &gs__state.tenant->dev[d->entry];
    cuuint64_t now = 0;
    uint64_t extra, limit;
    int over;

    if (!gs__real.cuMemPoolGetAttribute ||
        gs__real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now) !=
            CUDA_SUCCESS ||
        now <= reserved + need)
        return 0;
    extra = now - reserved - need;
    if ((over = charge_taken(d, extra) < 0) == 0) {
        pthread_mutex_lock(&mem_mu);
        d->charged += extra;
        p->accounted += extra;
        pthread_mutex_unlock(&mem_mu);
        limit = gs__mem_limit(d->entry);
        over = limit && __atomic_load_n(&td->mem_used, __ATOMIC_RELAXED) > limit;
    }
    gs__debug("pool on %s grew %llu bytes, %llu past the %llu admitted%s", d->uuid,
              (unsigned long long)(now - reserved), (unsigned long long)extra,
              (unsigned long long)need, over ? "; the allocation is refused" : "");
    if (!over)
        return 0;
    async_undo(a);
    /*
     * A pool that keeps its memory (a release threshold above its use, as PyTorch's
     * cudaMallocAsync backend sets) would stay grown: give back what it grew by.
     */
    if (gs__real.cuMemPoolTrimTo)
        gs__real.cuMemPoolTrimTo(pool, (size_t)reserved + 1);
    return 1;
}

/*
 * A stream-ordered allocation from pool on d. Everything from reading the
 * pool to charging what it really reserved happens under pool_mu, so no other
 * allocation of this process can take the room this one was admitted for; the
 * most the pool may grow by (pool_growth) is charged before the driver is
 * asked, so that neither can another process's: the device never holds more
 * than the limit. Where the limit has not that much room, the pool's unused
 * chunks (charged as it reserves them) are given back first; if there is still
 * not room it is refused, though a hole of the pool might have held it. A pool
 * only shrinks to its whole steps in use, so a shrink by another thread's
 * synchronisation meanwhile only leaves the charge above what it reserves.
 */
static CUresult pool_alloc(struct dev_state *d, int ord, CUmemoryPool pool, struct async_args *a)
{
    struct pool_state *p;
    cuuint64_t reserved = 0, used = 0;
    uint64_t need;
    CUresult r;
    int tries, trimmed = 0;

    pthread_mutex_lock(&pool_mu);
    if ((p = pool_find(pool, ord, 1)) == NULL) {
        pthread_mutex_unlock(&pool_mu);
        gs__log("more than %d memory pools in use; refusing to allocate untracked", MAX_POOLS);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (tries = 0;;) {
        pool_sync(p); /* the charge is what the pool reserves now */
        pool_sizes(pool, &reserved, &used);
        need = pool_growth(reserved, used, a->bytesize);
        if (!trimmed && !room_for(d, need) && reserved > used && gs__real.cuMemPoolTrimTo) {
            /* Its unused chunks first: what they hold is charged, and may make room. */
            trimmed = 1;
            gs__real.cuMemPoolTrimTo(pool, (size_t)used);
            continue;
        }
        if ((r = admit(d, need)) != CUDA_SUCCESS) {
            pthread_mutex_unlock(&pool_mu);
            return r;
        }
        pthread_mutex_lock(&mem_mu);
        p->accounted += need;
        pthread_mutex_unlock(&mem_mu);
        r = async_call(a);
        if (r != CUDA_ERROR_OUT_OF_MEMORY || tries++ >= RESERVE_TRIES)
            break;
        /* Refused by the driver: the reservation (run --filled) may give memory back. */
        pthread_mutex_lock(&mem_mu);
        p->accounted -= need;
        unadmit_locked(d, need);
        pthread_mutex_unlock(&mem_mu);
        settle(d);
        pthread_mutex_unlock(&pool_mu);
        if (!give_back(d, need))
            return r;
        pthread_mutex_lock(&pool_mu);
        if ((p = pool_find(pool, ord, 0)) == NULL) {
            pthread_mutex_unlock(&pool_mu);
            return r; /* destroyed meanwhile */
        }
    }
    if (r == CUDA_SUCCESS && pool_past_admission(d, p, pool, a, reserved, need))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r == CUDA_SUCCESS)
        pool_ptr_add(p, *a->dptr);
    pool_sync(p); /* the charge becomes what the pool really reserved */
    pthread_mutex_unlock(&pool_mu);
    settle(d);
    return r;
}

static CUresult alloc_async(struct async_args *a)
{
    struct dev_state *d;
    CUresult r;
    int ord = -1, i;

    if (a->pool) {
        /* A pool we saw created knows its device; otherwise the current one. */
        pthread_mutex_lock(&pool_mu);
        for (i = 0; i < MAX_POOLS; i++)
            if (pools[i].pool == a->pool)
                ord = pools[i].ord;
        pthread_mutex_unlock(&pool_mu);
    }
    if (ord < 0)
        ord = current_ordinal();
    if (exiting || ord < 0)
        return async_call(a);
    if ((d = dev_for_alloc(ord, &r)) == NULL)
        return r == CUDA_SUCCESS ? async_call(a) : r;
    if (a->bytesize == 0)
        return async_call(a);
    {
        CUmemoryPool pool = a->pool;
        if (pool == NULL && (!gs__real.cuDeviceGetMemPool ||
                             gs__real.cuDeviceGetMemPool(&pool, ord) != CUDA_SUCCESS))
            return async_call(a);
        return pool_alloc(d, ord, pool, a);
    }
}

GS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    struct async_args a = { 0, dptr, bytesize, NULL, hStream };

    GS_PASS(cuMemAllocAsync, (dptr, bytesize, hStream));
    return alloc_async(&a);
}

GS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    struct async_args a = { 1, dptr, bytesize, NULL, hStream };

    GS_PASS(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
    return alloc_async(&a);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    struct async_args a = { 2, dptr, bytesize, pool, hStream };

    GS_PASS(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream));
    if (pool == NULL)
        return gs__real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
    return alloc_async(&a);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    struct async_args a = { 3, dptr, bytesize, pool, hStream };

    GS_PASS(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream));
    if (pool == NULL)
        return gs__real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream);
    return alloc_async(&a);
}

/*
 * A stream-ordered free. Into a stream being captured it frees nothing yet (the
 * graph's free node will, unseen): the allocation stays live to us.
 */
static CUresult free_async(CUdeviceptr dptr, CUstream stream, int ptsz)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    int slot = exiting ? -1 : pool_ptr_take(dptr);
    CUresult r =
        ptsz ? gs__real.cuMemFreeAsync_ptsz(dptr, stream) : gs__real.cuMemFreeAsync(dptr, stream);

    if (slot >= 0) {
        if (r == CUDA_SUCCESS && (ptsz ? gs__real.cuStreamIsCapturing_ptsz
                                       : gs__real.cuStreamIsCapturing)(stream, &cs) != CUDA_SUCCESS)
            cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (r != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
            pool_ptr_untake(dptr, slot);
        else
            pool_ptr_done(slot, 1, stream, ptsz);
    }
    if (r == CUDA_SUCCESS && !exiting)
        sync_all_pools();
    return r;
}

GS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    GS_PASS(cuMemFreeAsync, (dptr, hStream));
    return free_async(dptr, hStream, 0);
}

GS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    GS_PASS(cuMemFreeAsync_ptsz, (dptr, hStream));
    return free_async(dptr, hStream, 1);
}

GS_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult r;

    GS_PASS(cuMemPoolCreate, (pool, poolProps));
    r = gs__real.cuMemPoolCreate(pool, poolProps);
    if (r == CUDA_SUCCESS && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        pthread_mutex_lock(&pool_mu);
        pool_find(*pool, poolProps->location.id, 1);
        pthread_mutex_unlock(&pool_mu);
    }
    return r;
}

GS_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct pool_state *p;
    CUresult r;

    GS_PASS(cuMemPoolTrimTo, (pool, minBytesToKeep));
    r = gs__real.cuMemPoolTrimTo(pool, minBytesToKeep);
    pthread_mutex_lock(&pool_mu);
    if ((p = pool_find(pool, -1, 0)) != NULL)
        pool_sync(p);
    pthread_mutex_unlock(&pool_mu);
    return r;
}

GS_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    struct pool_state *p;
    CUresult r;

    GS_PASS(cuMemPoolDestroy, (pool));
    pthread_mutex_lock(&pool_mu);
    p = pool_find(pool, -1, 0);
    /*
     * With allocations from it still live, the driver destroys the pool only when the
     * last is freed, and keeps what they occupy until then: it gives back the rest now
     * (trimmed here, so that the charge kept is what stays reserved).
     */
    if (p && (p->live || p->uncounted) && gs__real.cuMemPoolTrimTo &&
        gs__real.cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS)
        pool_sync(p);
    r = gs__real.cuMemPoolDestroy(pool);
    if (r == CUDA_SUCCESS && p) {
        if (p->live || p->uncounted) {
            gs__debug("a memory pool was destroyed with %llu allocations live: its %llu bytes "
                      "stay charged until they are freed",
                      (unsigned long long)p->live, (unsigned long long)p->accounted);
            pthread_mutex_lock(&mem_mu);
            p->pool = NULL;
            p->destroyed = 1;
            pthread_mutex_unlock(&mem_mu);
        } else {
            pool_release(p);
        }
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}
