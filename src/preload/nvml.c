/*
 * NVML views: a limited tenant sees its limit as the device's total memory,
 * so nvidia-smi and monitoring code run under the interposer agree with
 * cuMemGetInfo. A refused configuration makes NVML initialisation fail too.
 */
#define _GNU_SOURCE
#include <string.h>

#include "common/parse.h"
#include "preload/preload.h"

#define GS_NVML_PASS(sym, args)                                                                    \
    do {                                                                                           \
        if (gs__load_nvml() < 0)                                                                   \
            return NVML_ERROR_LIBRARY_NOT_FOUND;                                                   \
        if (!gs__real.sym)                                                                         \
            return NVML_ERROR_FUNCTION_NOT_FOUND;                                                  \
        if (!gs__config())                                                                         \
            return gs__real.sym args;                                                              \
        if (gs__state.config_error)                                                                \
            return NVML_ERROR_UNKNOWN;                                                             \
    } while (0)

GS_EXPORT nvmlReturn_t nvmlInit(void)
{
    GS_NVML_PASS(nvmlInit, ());
    return gs__real.nvmlInit();
}

GS_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    GS_NVML_PASS(nvmlInit_v2, ());
    return gs__real.nvmlInit_v2();
}

GS_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    GS_NVML_PASS(nvmlInitWithFlags, (flags));
    return gs__real.nvmlInitWithFlags(flags);
}

/*
 * The tenant's (used, limit) on device and what its memory reservation holds
 * there (gpuslice run --filled: memory the program may have, so it counts as
 * free); -1 when the device's own figures stand.
 */
static int tenant_view(nvmlDevice_t device, uint64_t *used, uint64_t *limit, uint64_t *held)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];
    int e;

    *held = 0;
    if (gs__state.tenant == NULL || !gs__real.nvmlDeviceGetUUID ||
        gs__real.nvmlDeviceGetUUID(device, uuid, sizeof(uuid)) != NVML_SUCCESS)
        return -1;
    if ((e = gs__mem_entry_for_uuid_string(uuid)) >= 0) {
        gs__mem_refresh_entry(e);
        gs__mem_entry_usage(e, used, limit);
        *held = gs__mem_reserved_for_entry(e);
    } else {
        /* No process of the tenant has used this GPU yet (nvidia-smi, say). */
        *used = 0;
        *limit = gs__mem_limit_for_uuid(uuid);
    }
    return *limit || *held ? 0 : -1;
}

/* Applies the tenant's view to a device's (total, used, free). */
static void view(uint64_t *total, uint64_t *used, uint64_t *free, uint64_t t_used, uint64_t limit,
                 uint64_t held)
{
    uint64_t real_free = *free + held < *total ? *free + held : *total;

    if (limit == 0) {
        *used = *used > held ? *used - held : 0;
        *free = real_free;
        return;
    }
    *total = limit < *total ? limit : *total;
    *used = t_used < *total ? t_used : *total;
    *free = *total - *used;
    if (*free > real_free)
        *free = real_free;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    uint64_t used, limit, held;
    nvmlReturn_t r;

    GS_NVML_PASS(nvmlDeviceGetMemoryInfo, (device, memory));
    if ((r = gs__real.nvmlDeviceGetMemoryInfo(device, memory)) != NVML_SUCCESS || !memory)
        return r;
    if (tenant_view(device, &used, &limit, &held) == 0) {
        uint64_t t = memory->total, u = memory->used, f = memory->free;
        view(&t, &u, &f, used, limit, held);
        memory->total = t;
        memory->used = u;
        memory->free = f;
    }
    return r;
}

GS_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    uint64_t used, limit, held;
    nvmlReturn_t r;

    GS_NVML_PASS(nvmlDeviceGetMemoryInfo_v2, (device, memory));
    if ((r = gs__real.nvmlDeviceGetMemoryInfo_v2(device, memory)) != NVML_SUCCESS || !memory)
        return r;
    if (tenant_view(device, &used, &limit, &held) == 0) {
        uint64_t t = memory->total, u = memory->used, f = memory->free;
        view(&t, &u, &f, used, limit, held);
        memory->total = t;
        if (limit)
            memory->reserved = 0;
        memory->used = u;
        memory->free = f;
    }
    return r;
}
