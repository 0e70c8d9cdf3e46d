/*
 * This machine's GPUs as the driver describes them, the driver loaded with
 * dlopen (gpuslice info runs where no driver is installed, and says so).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "control/gpuinfo.h"
#include "control/log.h"
#include "control/mps.h"
#include "common/cuda_api.h"
#include "common/driver.h"
#include "common/error.h"

/*
 * Where the daemon would find the simulated GPU (lib/sim beside the binary's directory, as in
 * the build tree), the fix a person needs when there is no driver. The CLI does not switch to
 * it by itself, as gpusliced does: the programs that run, procs and reserve start load
 * libcuda.so.1 through the dynamic loader, so only LD_LIBRARY_PATH gives them the same GPU.
 */
void gpuinfo_sim_hint(char *buf, size_t len)
{
    static const char *const rel[] = { "../lib/sim", "../lib/gpuslice/sim" };
    char exe[PATH_MAX], dir[PATH_MAX + 32], real[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    size_t i;

    buf[0] = '\0';
    if (n <= 0)
        return;
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return;
    *slash = '\0';
    for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        if ((size_t)snprintf(dir, sizeof(dir), "%s/%s/libcuda.so.1", exe, rel[i]) >= sizeof(dir) ||
            access(dir, R_OK) != 0 || realpath(dir, real) == NULL)
            continue;
        *strrchr(real, '/') = '\0';
        if ((size_t)snprintf(buf, len, " (for the simulated GPU: LD_LIBRARY_PATH=%s)", real) >= len)
            buf[0] = '\0'; /* a cut path would be a wrong fix */
        return;
    }
}

int gpuinfo_load_driver(struct gs_driver *d, char *err, size_t errlen)
{
    char why[256];
    size_t n;

    memset(d, 0, sizeof(*d));
    if (gs_driver_open_cuda(d, RTLD_NOW | RTLD_LOCAL, NULL, err, errlen) < 0) {
        n = strlen(err);
        gpuinfo_sim_hint(err + n, errlen - n);
        return GS_ENODRIVER;
    }
    if (gs_driver_open_nvml(d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        gs_log_note("info: NVML not loaded, memory and driver version unknown (%s)", why);
        return 0;
    }
    if (d->nvmlInit_v2 == NULL || d->nvmlInit_v2() != NVML_SUCCESS) {
        gs_log_note("info: NVML did not initialise, memory and driver version unknown");
        d->nvmlShutdown = NULL;
        dlclose(d->nvml);
        d->nvml = NULL;
    }
    return 0;
}

void gpuinfo_unload_driver(struct gs_driver *d)
{
    if (d->nvml && d->nvmlShutdown)
        d->nvmlShutdown();
    gs_driver_close(d);
}

/*
 * The size of the first group cuDevSmResourceSplitByCount makes from all of
 * in when asked for groups of at least min_count SMs; 0 and r set if none.
 */
static unsigned int split_size(const struct gs_driver *d, const CUdevResource *in,
                               unsigned int flags, unsigned int min_count, CUresult *r)
{
    CUdevResource group, rest;
    unsigned int n = 1;

    memset(&group, 0, sizeof(group));
    memset(&rest, 0, sizeof(rest));
    *r = d->cuDevSmResourceSplitByCount(&group, &n, in, &rest, flags, min_count);
    if (*r != CUDA_SUCCESS)
        return 0;
    if (n < 1 || group.type != CU_DEV_RESOURCE_TYPE_SM || group.sm.smCount == 0) {
        *r = CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION;
        return 0;
    }
    return group.sm.smCount;
}

/*
 * Asks the driver, never guesses: the smallest group (minCount 1), the step
 * between group sizes (minCount one above the smallest), and the smallest
 * group when co-scheduling is ignored.
 */
static void probe_green(const struct gs_driver *d, CUdevice dev, struct gpuinfo_green *g)
{
    CUdevResource all;
    CUresult r;
    char buf[32];
    unsigned int next;

    memset(g, 0, sizeof(*g));
    if (d->cuDeviceGetDevResource == NULL || d->cuDevSmResourceSplitByCount == NULL) {
        snprintf(
            g->reason, sizeof(g->reason), "not supported by this driver (it does not export %s)",
            d->cuDeviceGetDevResource ? "cuDevSmResourceSplitByCount" : "cuDeviceGetDevResource");
        return;
    }
    memset(&all, 0, sizeof(all));
    r = d->cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM);
    if (r != CUDA_SUCCESS || all.sm.smCount == 0) {
        snprintf(g->reason, sizeof(g->reason), "%s (cuDeviceGetDevResource: %s)",
                 r == CUDA_ERROR_NOT_SUPPORTED || r == CUDA_SUCCESS
                     ? "not supported by this driver"
                     : "the driver did not describe the SMs",
                 r == CUDA_SUCCESS ? "no SMs" : gs_driver_cu_name(d, r, buf, sizeof(buf)));
        return;
    }
    g->drv_min = all.sm.minSmPartitionSize;
    g->drv_align = all.sm.smCoscheduledAlignment;
    g->min_sms = (int)split_size(d, &all, 0, 1, &r);
    if (g->min_sms == 0) {
        snprintf(g->reason, sizeof(g->reason),
                 "cuDevSmResourceSplitByCount (minCount 1) failed: %s",
                 gs_driver_cu_name(d, r, buf, sizeof(buf)));
        return;
    }
    g->supported = 1;
    if ((unsigned int)g->min_sms < all.sm.smCount &&
        (next = split_size(d, &all, 0, (unsigned int)g->min_sms + 1, &r)) >
            (unsigned int)g->min_sms)
        g->alignment = (int)next - g->min_sms;
    g->finest = (int)split_size(d, &all, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 1, &r);
    {
        unsigned n = 0;
        if (d->cuDevSmResourceSplitByCount(NULL, &n, &all, NULL, 0, 1) == CUDA_SUCCESS)
            g->groups = (int)n;
        n = 0;
        if (d->cuDevSmResourceSplitByCount(NULL, &n, &all, NULL,
                                           CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                           1) == CUDA_SUCCESS)
            g->finest_groups = (int)n;
    }
    if (g->alignment == 0 || g->finest == 0)
        snprintf(g->reason, sizeof(g->reason), "%s could not be measured with %s",
                 g->alignment == 0 && g->finest == 0 ? "alignment and finest split"
                 : g->alignment == 0                 ? "alignment"
                                                     : "finest split",
                 "cuDevSmResourceSplitByCount");
}

/*
 * The MPS daemon that serves this GPU: the one `gpuslice mps start` made for
 * it when its pipe directory exists, else $CUDA_MPS_PIPE_DIRECTORY's (default
 * /tmp/nvidia-mps), whose daemon may serve any GPU (that is not checked).
 */
static void mps_of(struct gpuinfo_gpu *g)
{
    const char *env = getenv("CUDA_MPS_PIPE_DIRECTORY");
    struct mps_gpu m;
    struct stat st;

    int own = mps_gpu_init(&m, g->uuid) == 0 && lstat(m.pipe, &st) == 0 && S_ISDIR(st.st_mode);

    if (own)
        snprintf(g->mps_dir, sizeof(g->mps_dir), "%s", m.pipe);
    else
        snprintf(g->mps_dir, sizeof(g->mps_dir), "%s", env && *env ? env : MPS_DEFAULT_PIPE_DIR);
    g->mps = mps_state(g->mps_dir, own);
}

static int query_gpu(const struct gs_driver *d, int ordinal, struct gpuinfo_gpu *g)
{
    char buf[32];
    CUdevice dev;
    CUuuid u;
    CUresult r;

    memset(g, 0, sizeof(*g));
    g->index = ordinal;
    g->sm_count = g->cc_major = g->cc_minor = -1;
    if ((r = d->cuDeviceGet(&dev, ordinal)) != CUDA_SUCCESS ||
        (r = d->cuDeviceGetName(g->name, sizeof(g->name), dev)) != CUDA_SUCCESS ||
        (r = d->cuDeviceGetUuid_v2(&u, dev)) != CUDA_SUCCESS) {
        gs_log_error("info: GPU %d: %s", ordinal, gs_driver_cu_name(d, r, buf, sizeof(buf)));
        return -EIO;
    }
    gs_format_uuid((const unsigned char *)u.bytes, g->uuid);
    memcpy(g->uuid, "GPU", 3); /* as NVML and nvidia-smi write it */
    if (d->cuDeviceGetAttribute(&g->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev))
        g->sm_count = -1;
    if (d->cuDeviceGetAttribute(&g->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev) ||
        d->cuDeviceGetAttribute(&g->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev))
        g->cc_major = g->cc_minor = -1;
    if (d->nvml && d->nvmlDeviceGetHandleByUUID && d->nvmlDeviceGetMemoryInfo) {
        nvmlDevice_t h;

        g->have_mem = d->nvmlDeviceGetHandleByUUID(g->uuid, &h) == NVML_SUCCESS &&
                      d->nvmlDeviceGetMemoryInfo(h, &g->mem) == NVML_SUCCESS;
    }
    probe_green(d, dev, &g->green);
    mps_of(g);
    return 0;
}

int gpuinfo_gather(const struct gs_driver *d, struct gpuinfo *in)
{
    char buf[32];
    CUresult r;
    int i, n = 0;

    memset(in, 0, sizeof(*in));
    if (d->cuInit == NULL || d->cuDeviceGetCount == NULL || d->cuDeviceGet == NULL ||
        d->cuDeviceGetName == NULL || d->cuDeviceGetUuid_v2 == NULL ||
        d->cuDeviceGetAttribute == NULL) {
        gs_log_error("info: the CUDA driver lacks basic device queries (too old?)");
        return -ENOSYS;
    }
    if (d->cuDriverGetVersion && d->cuDriverGetVersion(&in->cuda_version) != CUDA_SUCCESS)
        in->cuda_version = 0;
    if (d->nvml && d->nvmlSystemGetDriverVersion &&
        d->nvmlSystemGetDriverVersion(in->driver_version, sizeof(in->driver_version)) !=
            NVML_SUCCESS)
        in->driver_version[0] = '\0';
    if ((r = d->cuInit(0)) != CUDA_SUCCESS && r != CUDA_ERROR_NO_DEVICE) {
        gs_log_error("info: cuInit failed: %s", gs_driver_cu_name(d, r, buf, sizeof(buf)));
        return -EIO;
    }
    if (r == CUDA_SUCCESS && (r = d->cuDeviceGetCount(&n)) != CUDA_SUCCESS) {
        gs_log_error("info: cuDeviceGetCount failed: %s",
                     gs_driver_cu_name(d, r, buf, sizeof(buf)));
        return -EIO;
    }
    if (n <= 0)
        return 0;
    if ((in->gpus = calloc((size_t)n, sizeof(*in->gpus))) == NULL)
        return -ENOMEM;
    for (i = 0; i < n; i++)
        if (query_gpu(d, i, &in->gpus[in->ngpus]) == 0)
            in->ngpus++;
        else
            in->failed++;
    return 0;
}
