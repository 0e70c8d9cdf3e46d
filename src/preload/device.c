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
#include <stdio.h>
#include <string.h>

#include "common/node.h"
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
/* By tenant entry: the UUID this process's driver gave the entry's device (set before published). */
static uint8_t entry_raw[GPUSLICE_MAX_DEVICES][16];
static int entry_known[GPUSLICE_MAX_DEVICES];
static int entry_ord[GPUSLICE_MAX_DEVICES]; /* the CUDA index this process gave it first */
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
            memcpy(d->uuid, "GPU", 3); /* as nvidia-smi and every other line of ours write it */
            __atomic_store_n(&d->uuid_known, 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&publish_mu);
    }
    if (raw)
        memcpy(raw, d->raw, 16);
    return d->uuid;
}

/*
 * HAMi's shared file: a GPU's limits are those of the first process that used it through
 * the file (HAMi-core, likewise, keeps its creator's and only logs a process that differs).
 * A process whose own differ is told once per GPU, at its first use: not a hot path.
 */
static void note_file_limits(int ord, int e, uint64_t mem, uint32_t compute)
{
    const struct gpuslice_tenant_device *d = &gs__state.tenant->dev[e];
    uint64_t fmem = __atomic_load_n(&d->mem_limit, __ATOMIC_RELAXED);
    uint32_t fcomp = __atomic_load_n(&d->compute_limit, __ATOMIC_RELAXED);
    char fc[8], oc[8];

    if (fmem == mem && fcomp % 100 == compute % 100)
        return;
    snprintf(fc, sizeof(fc), fcomp % 100 ? "%u%%" : "none", fcomp % 100);
    snprintf(oc, sizeof(oc), compute % 100 ? "%u%%" : "none", compute % 100);
    gs__log("device %d: the limits recorded in %s apply (memory %llu bytes, compute %s), not "
            "this process's own (memory %llu bytes, compute %s; 0 bytes: none): the first "
            "process to use a GPU through the file sets them",
            ord, gs__state.shared_cache, (unsigned long long)fmem, fc, (unsigned long long)mem, oc);
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
    /* The daemon's limits, mirrored into a new entry (what is enforced is read from the node). */
    if (gs__state.node)
        gs_node_limits(gs__state.node, gs__state.node_idx, gs__state.node_id, raw, ord, &limit,
                       &ceiling);
    /* gs_tenant_device finds an existing entry by UUID: racing threads get the same one. */
    if ((e = gs_tenant_device(gs__state.tenant, raw, ord, limit, ceiling)) == -ENOSPC) {
        if (__atomic_exchange_n(&d->entry, -1, __ATOMIC_ACQ_REL) != -1)
            gs__log("device %d: no room for it in the tenant's device table", ord);
        return GS_DEVICE_NONE;
    }
    if (e < 0)
        return GS_DEVICE_BUSY; /* the tenant's lock was not had in time: asked again */
    if (gs__state.shared_cache[0] && e < GPUSLICE_MAX_DEVICES)
        note_file_limits(ord, e, limit, ceiling);
    if (e < GPUSLICE_MAX_DEVICES && !__atomic_load_n(&entry_known[e], __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&publish_mu);
        memcpy(entry_raw[e], raw, 16);
        entry_ord[e] = ord;
        __atomic_store_n(&entry_known[e], 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&publish_mu);
    }
    __atomic_store_n(&d->entry, e + 1, __ATOMIC_RELEASE);
    return e;
}

const uint8_t *gs__entry_uuid(int e)
{
    if (e < 0 || e >= GPUSLICE_MAX_DEVICES || !__atomic_load_n(&entry_known[e], __ATOMIC_ACQUIRE))
        return NULL;
    return entry_raw[e];
}

/*
 * A managed tenant's limit, from the node segment. An entry whose UUID this process has
 * not resolved (another process of the tenant made it) is not one it charges or launches
 * on; the tenant's defaults are given. A tenant the daemon has ended keeps the limits last
 * read, so that nothing becomes unlimited.
 */
static void node_limits(int e, uint64_t *mem, uint32_t *compute)
{
    static uint64_t last_mem[GPUSLICE_MAX_DEVICES];
    static uint32_t last_comp[GPUSLICE_MAX_DEVICES];
    static const uint8_t none[16];
    const uint8_t *u = gs__entry_uuid(e);

    if (e < 0 || e >= GPUSLICE_MAX_DEVICES) {
        *mem = 0;
        *compute = 0;
        return;
    }
    if (gs_node_limits(gs__state.node, gs__state.node_idx, gs__state.node_id, u ? u : none,
                       u ? entry_ord[e] : -1, mem, compute) == 0) {
        __atomic_store_n(&last_mem[e], *mem, __ATOMIC_RELAXED);
        __atomic_store_n(&last_comp[e], *compute, __ATOMIC_RELAXED);
    } else {
        *mem = __atomic_load_n(&last_mem[e], __ATOMIC_RELAXED);
        *compute = __atomic_load_n(&last_comp[e], __ATOMIC_RELAXED);
    }
}

uint64_t gs__mem_limit(int e)
{
    uint64_t mem;
    uint32_t compute;

    if (gs__state.node == NULL)
        return e >= 0 && e < GPUSLICE_MAX_DEVICES
                   ? __atomic_load_n(&gs__state.tenant->dev[e].mem_limit, __ATOMIC_RELAXED)
                   : 0;
    node_limits(e, &mem, &compute);
    return mem;
}

uint32_t gs__compute_limit(int e)
{
    uint64_t mem;
    uint32_t compute;

    if (gs__state.node == NULL)
        return e >= 0 && e < GPUSLICE_MAX_DEVICES
                   ? __atomic_load_n(&gs__state.tenant->dev[e].compute_limit, __ATOMIC_RELAXED)
                   : 0;
    node_limits(e, &mem, &compute);
    return compute > 0 && compute < 100 ? compute : 0;
}

/* The priority class and weight now (the daemon's for a tenant it manages; tenant_abi.h). */
void gs__sched(uint32_t *priority, uint32_t *weight)
{
    static uint32_t last_p, last_w;
    uint32_t p, w;

    if (gs__state.tenant == NULL) {
        *priority = GPUSLICE_PRIORITY_UNSET;
        *weight = 0;
        return;
    }
    if (gs__state.node == NULL) {
        p = __atomic_load_n(&gs__state.tenant->priority, __ATOMIC_RELAXED);
        w = __atomic_load_n(&gs__state.tenant->weight, __ATOMIC_RELAXED);
    } else if (gs_node_sched(gs__state.node, gs__state.node_idx, gs__state.node_id, &p, &w) == 0) {
        __atomic_store_n(&last_p, p, __ATOMIC_RELAXED);
        __atomic_store_n(&last_w, w, __ATOMIC_RELAXED);
    } else {
        p = __atomic_load_n(&last_p, __ATOMIC_RELAXED);
        w = __atomic_load_n(&last_w, __ATOMIC_RELAXED);
    }
    /* The tenant's file is written by its owner: out of range reads as the default. */
    *priority = p <= GPUSLICE_PRIORITY_LATENCY ? p : GPUSLICE_PRIORITY_UNSET;
    *weight = w <= GPUSLICE_WEIGHT_MAX ? w : 0;
}
