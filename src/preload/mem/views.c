/*
 * What the program is told it has (cuMemGetInfo, cuDeviceTotalMem, NVML's
 * memory queries through nvml.c), and the NVML helpers they use.
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

void gs__mem_entry_usage(int e, uint64_t *used, uint64_t *limit)
{
    struct gpuslice_tenant *t = gs__state.tenant;

    *used = __atomic_load_n(&t->dev[e].mem_used, __ATOMIC_RELAXED);
    *limit = gs__mem_limit(e);
}

void gs__mem_refresh_entry(int e)
{
    int i;

    sync_all_pools();
    pthread_mutex_lock(&mem_mu);
    for (i = 0; i < MAX_ORDINALS; i++)
        if (devs[i].resolved > 0 && devs[i].entry == e)
            refresh_overhead(&devs[i]);
    pthread_mutex_unlock(&mem_mu);
    gs_tenant_reap(gs__state.tenant);
}

/*
 * Fills (free, total) for ordinal from the tenant view; 0 if it differs from
 * the device's: a limit applies, or a memory reservation (gpuslice run
 * --filled) holds memory the program may have, which counts as free.
 */
static int limited_view(int ord, uint64_t real_free, uint64_t real_total, uint64_t *free,
                        uint64_t *total)
{
    struct dev_state *d;
    uint64_t used, limit, held;

    if (exiting || (d = dev_get(ord)) == NULL)
        return -1;
    gs__mem_refresh_entry(d->entry);
    gs__mem_entry_usage(d->entry, &used, &limit);
    held = reserved_for(d);
    if (limit == 0 && held == 0)
        return -1;
    real_free = real_free + held < real_total ? real_free + held : real_total;
    if (limit == 0) {
        *total = real_total;
        *free = real_free;
        return 0;
    }
    *total = limit < real_total ? limit : real_total;
    *free = limit > used ? limit - used : 0;
    if (*free > real_free)
        *free = real_free; /* never promise what the device does not have */
    return 0;
}

GS_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f, t;
    CUresult r;

    GS_PASS(cuMemGetInfo_v2, (free, total));
    if ((r = gs__real.cuMemGetInfo_v2(free, total)) != CUDA_SUCCESS || !free || !total)
        return r;
    if (limited_view(current_ordinal(), *free, *total, &f, &t) == 0) {
        *free = f;
        *total = t;
    }
    return r;
}

GS_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    size_t rf, rt;
    uint64_t f, t;
    CUresult r;

    GS_PASS(cuMemGetInfo, (free, total));
    if (!gs__real.cuMemGetInfo_v2 || !free || !total)
        return gs__real.cuMemGetInfo(free, total);
    if ((r = gs__real.cuMemGetInfo_v2(&rf, &rt)) != CUDA_SUCCESS)
        return r;
    if (limited_view(current_ordinal(), rf, rt, &f, &t) < 0) {
        f = rf;
        t = rt;
    }
    *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
    *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    return r;
}

static uint64_t total_limit(CUdevice dev, uint64_t real_total)
{
    struct dev_state *d;
    uint64_t limit;

    if (exiting || (d = dev_get(dev)) == NULL)
        return real_total;
    limit = gs__mem_limit(d->entry);
    return limit && limit < real_total ? limit : real_total;
}

GS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r;

    GS_PASS(cuDeviceTotalMem_v2, (bytes, dev));
    if ((r = gs__real.cuDeviceTotalMem_v2(bytes, dev)) == CUDA_SUCCESS && bytes)
        *bytes = total_limit(dev, *bytes);
    return r;
}

GS_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CUresult r;

    GS_PASS(cuDeviceTotalMem, (bytes, dev));
    if ((r = gs__real.cuDeviceTotalMem(bytes, dev)) == CUDA_SUCCESS && bytes)
        *bytes = (unsigned int)total_limit(dev, *bytes);
    return r;
}

/* ---- NVML helpers ---- */

int gs__mem_entry_for_uuid_string(const char *uuid)
{
    struct gpuslice_tenant *t = gs__state.tenant;
    char s[GS_UUID_STRLEN];
    int i;

    if (t == NULL)
        return -1;
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++) {
        gs_format_uuid(t->dev[i].uuid, s);
        if (strcasecmp(s, uuid) == 0)
            return i;
    }
    return -1;
}

uint64_t gs__mem_limit_for_uuid(const char *uuid)
{
    int count = 0, i;

    /* An index key needs the CUDA ordinal of this GPU: ask the driver. */
    if (gs__load_cuda() == 0 && gs__real.cuInit && gs__real.cuInit(0) == CUDA_SUCCESS &&
        gs__real.cuDeviceGetCount && gs__real.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
        for (i = 0; i < count && i < MAX_ORDINALS; i++) {
            struct dev_state *d = dev_get(i);
            if (d && strcasecmp(d->uuid, uuid) == 0)
                return gs__mem_limit(d->entry);
        }
    }
    return gs_limits_lookup(&gs__state.mem_limits, -1, uuid);
}
