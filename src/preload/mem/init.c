/* cuInit: refuses a broken configuration and checks the limits' device keys. */
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

/* Every index and UUID key of l names a device that exists; else -1 with a message. */
static int validate_list(const struct gs_limits *l, int count, char *msg, size_t len)
{
    int i, j, at[GS_MAX_LIMIT_ENTRIES];

    for (i = 0; i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        int found = 0;

        at[i] = e->key == GS_KEY_INDEX ? e->index : -1;
        if (e->key == GS_KEY_INDEX && e->index >= count) {
            snprintf(msg, len,
                     "%s: device %d does not exist: this process sees %d CUDA device%s "
                     "(indexes 0 to %d)",
                     l->source, e->index, count, count == 1 ? "" : "s", count - 1);
            return -1;
        }
        if (e->key != GS_KEY_UUID)
            continue;
        for (j = 0; j < count && j < MAX_ORDINALS && !found; j++) {
            CUuuid u;
            char s[GS_UUID_STRLEN];
            if (gs__real.cuDeviceGetUuid_v2(&u, j) == CUDA_SUCCESS) {
                gs_format_uuid((const unsigned char *)u.bytes, s);
                found = strcasecmp(s, e->uuid) == 0;
                if (found)
                    at[i] = j;
            }
        }
        if (!found && gs__load_nvml() == 0 && gs__real.nvmlDeviceGetHandleByUUID) {
            /* Not visible to this process, but maybe to another of the tenant. */
            nvmlDevice_t h;
            char s[GS_UUID_STRLEN];
            memcpy(s, e->uuid, sizeof(s));
            memcpy(s, "GPU-", 4);
            if (gs__real.nvmlInit_v2)
                gs__real.nvmlInit_v2();
            found = gs__real.nvmlDeviceGetHandleByUUID(s, &h) == NVML_SUCCESS;
        }
        if (!found) {
            snprintf(msg, len, "%s: no GPU has UUID GPU-%s on this machine", l->source,
                     e->uuid + 4);
            return -1;
        }
    }
    /* An index and the UUID of one device: one would silently override the other. */
    for (i = 0; i < l->n; i++)
        for (j = 0; at[i] >= 0 && j < i; j++)
            if (at[j] == at[i]) {
                snprintf(msg, len, "%s: two entries name CUDA device %d: give each device once",
                         l->source, at[i]);
                return -1;
            }
    return 0;
}

/*
 * A key for a device that does not exist would silently mean no limit there:
 * memory, compute and SM keys are all refused.
 */
static int validate_keys(char *msg, size_t len)
{
    int count = 0;

    if (!gs__real.cuDeviceGetCount || gs__real.cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return 0;
    if (validate_list(&gs__state.mem_limits, count, msg, len) < 0 ||
        validate_list(&gs__state.compute_limits, count, msg, len) < 0 ||
        validate_list(&gs__state.sm_limits, count, msg, len) < 0)
        return -1;
    return 0;
}

GS_EXPORT CUresult cuInit(unsigned int Flags)
{
    static int checked;
    CUresult r;

    if (gs__load_cuda() < 0 || !gs__real.cuInit)
        return CUDA_ERROR_NOT_INITIALIZED;
    gs__config();
    if (gs__state.config_error)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gs__real.cuInit(Flags)) != CUDA_SUCCESS || !gs__state.active)
        return r;
    if (!__atomic_load_n(&checked, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&mem_mu);
        if (!checked && validate_keys(gs__state.config_msg, sizeof(gs__state.config_msg)) < 0) {
            gs__state.config_error = 1;
            gs__log("%s; CUDA is disabled in this process (cuInit fails)", gs__state.config_msg);
        }
        __atomic_store_n(&checked, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&mem_mu);
    }
    return gs__state.config_error ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
