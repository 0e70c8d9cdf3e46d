/*
 * The interposer's one device registry: for each CUDA ordinal of this process
 * (CUDA_VISIBLE_DEVICES applied), the device's UUID, which is its key in every
 * limit list, and its entry in the tenant's device table, each resolved once
 * and shared by the memory accounting, the compute governor and SM
 * partitions. A CUdevice is its ordinal (cuDeviceGet hands out the ordinal).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "common/tenant.h"
#include "preload/preload.h"

#define MAX_ORDINALS 64

struct device {
    int uuid_known; /* atomic: uuid is filled */
    int entry;      /* atomic: the tenant entry + 1; 0 unknown; -1 none (no room) */
    uint8_t raw[16];
    char uuid[GS_UUID_STRLEN]; /* "gpu-…" */
};

static struct device devices[MAX_ORDINALS];
static pthread_mutex_t publish_mu = PTHREAD_MUTEX_INITIALIZER; /* a UUID is written once */

const char *gs__device_uuid(int ord, uint8_t raw[16])
{
    struct device *d;
    CUuuid u;
    CUdevice dev;

    if (ord < 0 || ord >= MAX_ORDINALS)
        return NULL;
    d = &devices[ord];
    if (!__atomic_load_n(&d->uuid_known, __ATOMIC_ACQUIRE)) {
        if (!gs__real.cuDeviceGet || !gs__real.cuDeviceGetUuid_v2 ||
            gs__real.cuDeviceGet(&dev, ord) != CUDA_SUCCESS ||
            gs__real.cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS)
            return NULL; /* not initialised yet: asked again next time */
        pthread_mutex_lock(&publish_mu);
        if (!__atomic_load_n(&d->uuid_known, __ATOMIC_ACQUIRE)) {
            memcpy(d->raw, u.bytes, 16);
            gs_format_uuid((const unsigned char *)u.bytes, d->uuid);
            __atomic_store_n(&d->uuid_known, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&publish_mu);
    }
    if (raw)
        memcpy(raw, d->raw, 16);
    return d->uuid;
}

int gs__device_entry(int ord)
{
    struct device *d;
    const char *uuid;
    uint8_t raw[16];
    uint64_t limit;
    uint32_t ceiling;
    int e;

    if (ord < 0 || ord >= MAX_ORDINALS || gs__state.tenant == NULL)
        return GS_DEVICE_NONE;
    d = &devices[ord];
    if ((e = __atomic_load_n(&d->entry, __ATOMIC_ACQUIRE)) != 0)
        return e > 0 ? e - 1 : GS_DEVICE_NONE;
    if ((uuid = gs__device_uuid(ord, raw)) == NULL)
        return GS_DEVICE_LATER;
    limit = gs_limits_lookup(&gs__state.mem_limits, ord, uuid);
    ceiling = (uint32_t)gs_limits_lookup(&gs__state.compute_limits, ord, uuid);
    /* gs_tenant_device finds an existing entry by UUID: racing threads get the same one. */
    if ((e = gs_tenant_device(gs__state.tenant, raw, ord, limit, ceiling)) == -ENOSPC) {
        if (__atomic_exchange_n(&d->entry, -1, __ATOMIC_ACQ_REL) != -1)
            gs__log("device %d: no room for it in the tenant's device table", ord);
        return GS_DEVICE_NONE;
    }
    if (e < 0)
        return GS_DEVICE_LATER; /* the tenant's lock was not had in time: asked again */
    __atomic_store_n(&d->entry, e + 1, __ATOMIC_RELEASE);
    return e;
}
