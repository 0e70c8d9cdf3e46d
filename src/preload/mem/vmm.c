/*
 * Virtual memory management (cuMemCreate, cuMemMap, cuMemUnmap, cuMemRelease,
 * cuMemRetainAllocationHandle): physical handles are what is charged, given
 * back once released and unmapped.
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
 * A physical allocation is recorded under a serial of ours, not under its
 * handle: the driver may hand a released handle's value to the next
 * cuMemCreate while the old allocation still lives in a mapping. Every
 * record changes before the driver call that could let another thread reuse
 * its key (release, unmap) and is put back if that call fails.
 */

/* Gives back a physical allocation once nothing holds it; mem_mu held. */
static void vmm_maybe_free(struct gs_map_entry *e)
{
    struct dev_state *d;

    if (e->refs == 0 && e->maps == 0) {
        if ((d = dev_get(e->dev)) != NULL)
            unadmit_locked(d, e->bytes);
        gs_map_del(&vmm, e);
    }
}

/*
 * Adds a reference to allocation serial through handle h; mem_mu held. The
 * driver hands out the same handle value again for the same allocation
 * (cuMemRetainAllocationHandle, as NCCL does before it releases): the handle's
 * entry then counts its references, each released once.
 */
static int vmm_add_handle(CUmemGenericAllocationHandle h, uint64_t serial)
{
    struct gs_map_entry *e = gs_map_get(&handles, h), *a;

    if (e != NULL && e->aux == serial) {
        e->refs++;
    } else {
        if ((e = gs_map_put(&handles, h)) == NULL)
            return -ENOMEM;
        e->aux = serial;
        e->refs = 1;
    }
    if ((a = gs_map_get(&vmm, serial)) != NULL)
        a->refs++;
    return 0;
}

GS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct gs_map_entry *e;
    struct dev_state *d;
    CUresult r;
    int ord, ok = 0;

    GS_PASS(cuMemCreate, (handle, size, prop, flags));
    if (exiting || prop == NULL || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
        return gs__real.cuMemCreate(handle, size, prop, flags);
    if ((d = dev_for_alloc(ord = prop->location.id, &r)) == NULL)
        return r == CUDA_SUCCESS ? gs__real.cuMemCreate(handle, size, prop, flags) : r;
    if (size == 0)
        return gs__real.cuMemCreate(handle, size, prop, flags);
    if ((r = admit(d, size)) != CUDA_SUCCESS)
        return r;
    GS_RESERVED_CALL(r, d, size, gs__real.cuMemCreate(handle, size, prop, flags));
    if (r != CUDA_SUCCESS) {
        unadmit(d, size);
        settle(d);
        return r;
    }
    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_put(&vmm, ++vmm_serial)) != NULL) {
        e->bytes = size;
        e->dev = ord;
        e->refs = 0;
        e->maps = 0;
        ok = vmm_add_handle(*handle, vmm_serial) == 0;
        if (!ok)
            gs_map_del(&vmm, gs_map_get(&vmm, vmm_serial));
    }
    pthread_mutex_unlock(&mem_mu);
    if (!ok)
        gs__log("out of memory tracking a VMM allocation; it stays charged");
    settle(d);
    return CUDA_SUCCESS;
}

GS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct gs_map_entry *h, *e;
    uint64_t serial = 0;
    CUresult r;

    GS_PASS(cuMemRelease, (handle));
    pthread_mutex_lock(&mem_mu);
    if ((h = gs_map_get(&handles, handle)) != NULL) {
        serial = h->aux;
        if (h->refs <= 1)
            gs_map_del(&handles, h);
        else
            h->refs--;
        if ((e = gs_map_get(&vmm, serial)) != NULL && e->refs > 0)
            e->refs--;
    }
    pthread_mutex_unlock(&mem_mu);
    r = gs__real.cuMemRelease(handle);
    pthread_mutex_lock(&mem_mu);
    if (serial && r != CUDA_SUCCESS) {
        /* Still the program's: the driver gave no one else this handle. */
        if (vmm_add_handle(handle, serial) < 0)
            gs__log("out of memory tracking a VMM handle");
    } else if (serial && (e = gs_map_get(&vmm, serial)) != NULL) {
        vmm_maybe_free(e);
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

/* The serial of the allocation mapped at addr, or 0; mem_mu held. */
static uint64_t vmm_at(uint64_t addr)
{
    struct gs_map_entry *m;

    GS_MAP_FOREACH(&mappings, m)
    {
        if (addr >= m->key && addr - m->key < m->bytes)
            return m->aux;
    }
    return 0;
}

GS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    uint64_t serial;
    CUresult r;

    GS_PASS(cuMemRetainAllocationHandle, (handle, addr));
    if ((r = gs__real.cuMemRetainAllocationHandle(handle, addr)) != CUDA_SUCCESS || !handle)
        return r;
    pthread_mutex_lock(&mem_mu);
    if ((serial = vmm_at((uint64_t)(uintptr_t)addr)) != 0 && vmm_add_handle(*handle, serial) < 0)
        gs__log("out of memory tracking a VMM handle");
    pthread_mutex_unlock(&mem_mu);
    return r;
}

GS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    struct gs_map_entry *h, *e, *m;
    CUresult r;

    GS_PASS(cuMemMap, (ptr, size, offset, handle, flags));
    if ((r = gs__real.cuMemMap(ptr, size, offset, handle, flags)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&mem_mu);
    if ((h = gs_map_get(&handles, handle)) != NULL) {
        uint64_t serial = h->aux;
        if ((m = gs_map_put(&mappings, ptr)) != NULL) {
            m->bytes = size;
            m->aux = serial;
            if ((e = gs_map_get(&vmm, serial)) != NULL)
                e->maps++;
        }
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

#define VMM_UNMAP_BATCH 64

GS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct gs_map_entry *m, *e, gone[VMM_UNMAP_BATCH];
    int n = 0, i, more = 0;
    CUresult r;

    GS_PASS(cuMemUnmap, (ptr, size));
    /* Forgotten before the driver unmaps: another thread may map the range again at once. */
    pthread_mutex_lock(&mem_mu);
    GS_MAP_FOREACH(&mappings, m)
    {
        if (m->key >= ptr && m->key - ptr < size) {
            if (n == VMM_UNMAP_BATCH) {
                more = 1;
                break;
            }
            gone[n++] = *m;
            gs_map_del(&mappings, m);
        }
    }
    pthread_mutex_unlock(&mem_mu);
    r = gs__real.cuMemUnmap(ptr, size);
    pthread_mutex_lock(&mem_mu);
    for (i = 0; i < n; i++) {
        if (r != CUDA_SUCCESS) {
            if ((m = gs_map_put(&mappings, gone[i].key)) != NULL)
                *m = gone[i];
        } else if ((e = gs_map_get(&vmm, gone[i].aux)) != NULL) {
            if (e->maps > 0)
                e->maps--;
            vmm_maybe_free(e);
        }
    }
    /* A range of more mappings than one batch: the rest, now that the driver has unmapped it. */
    while (more && r == CUDA_SUCCESS) {
        more = 0;
        GS_MAP_FOREACH(&mappings, m)
        {
            if (m->key >= ptr && m->key - ptr < size) {
                uint64_t serial = m->aux;
                gs_map_del(&mappings, m);
                if ((e = gs_map_get(&vmm, serial)) != NULL) {
                    if (e->maps > 0)
                        e->maps--;
                    vmm_maybe_free(e);
                }
                more = 1;
                break;
            }
        }
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}
