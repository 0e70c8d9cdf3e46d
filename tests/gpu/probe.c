/*
 * Native driver probe (run without gpuslice): what the driver really reserves for a
 * context and for small allocations, as NVML's per-process figure and as the
 * device-wide cuMemGetInfo see it, plus the VMM allocation granularity. These numbers
 * decide how the interposer must account allocations; nothing here is asserted: the
 * check is informational (INFO), and a call that fails is an "@fail" line, shown as
 * "incomplete". NVML is loaded with dlopen so no nvml.h or libnvidia-ml link is
 * needed at build time.
 *
 * usage: probe     (output follows check.h)
 */
#include <cuda.h>
#include <dlfcn.h>
#include <string.h>
#include <unistd.h>

#include "cu_check.h"

/* The NVML declarations this probe needs, as in nvml.h of driver 580. */
typedef struct nvml_device *nvml_device_t;
typedef struct {
    unsigned long long total, free, used;
} nvml_memory_t;
typedef struct {
    unsigned int pid;
    unsigned long long used_gpu_memory;
    unsigned int gpu_instance_id, compute_instance_id;
} nvml_process_info_t;
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)

static int (*nvml_init)(void);
static int (*nvml_by_bus_id)(const char *, nvml_device_t *);
static int (*nvml_procs)(nvml_device_t, unsigned int *, nvml_process_info_t *);
static int (*nvml_meminfo)(nvml_device_t, nvml_memory_t *);
static nvml_device_t nvdev;

static int nvml_open(const char *bus_id)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    int r;

    if (!h) {
        note("cannot load libnvidia-ml.so.1: %s", dlerror());
        return 0;
    }
    *(void **)&nvml_init = dlsym(h, "nvmlInit_v2");
    *(void **)&nvml_by_bus_id = dlsym(h, "nvmlDeviceGetHandleByPciBusId_v2");
    *(void **)&nvml_procs = dlsym(h, "nvmlDeviceGetComputeRunningProcesses_v3");
    *(void **)&nvml_meminfo = dlsym(h, "nvmlDeviceGetMemoryInfo");
    if (!nvml_init || !nvml_by_bus_id || !nvml_procs || !nvml_meminfo) {
        note("libnvidia-ml.so.1 lacks a function this probe uses");
        return 0;
    }
    if ((r = nvml_init()) != 0 || (r = nvml_by_bus_id(bus_id, &nvdev)) != 0) {
        note("NVML init or handle for %s failed: %d", bus_id, r);
        return 0;
    }
    return 1;
}

/* NVML's usedGpuMemory for this pid in bytes, or -1 when NVML does not list it. */
static double nvml_used_by_me(void)
{
    nvml_process_info_t procs[256];
    unsigned int n = 256, i;
    pid_t me = getpid();

    if (!nvml_procs || nvml_procs(nvdev, &n, procs) != 0)
        return -1;
    for (i = 0; i < n && i < 256; i++)
        if (procs[i].pid == (unsigned int)me)
            return procs[i].used_gpu_memory == NVML_VALUE_NOT_AVAILABLE_ULL
                       ? -1
                       : (double)procs[i].used_gpu_memory;
    return -1;
}

static double nvml_device_used(void)
{
    nvml_memory_t m;
    if (!nvml_meminfo || nvml_meminfo(nvdev, &m) != 0)
        return -1;
    return (double)m.used;
}

static size_t cu_free(void)
{
    size_t f = 0, t = 0;
    CU(cuMemGetInfo(&f, &t));
    return f;
}

/* Prints one step: NVML per-process usage, and deltas from the previous step. */
static void step(const char *name, double *last_nvml, size_t *last_free)
{
    double u = nvml_used_by_me();
    size_t f = cu_free();
    char k[128];

    snprintf(k, sizeof k, "nvml_proc_MiB_%s", name);
    num(k, u < 0 ? -1 : u / MiB);
    if (u >= 0 && *last_nvml >= 0) {
        snprintf(k, sizeof k, "nvml_proc_delta_KiB_%s", name);
        num(k, (u - *last_nvml) / 1024.0);
    }
    snprintf(k, sizeof k, "cuMemGetInfo_free_delta_KiB_%s", name);
    num(k, ((double)*last_free - (double)f) / 1024.0);
    printf("%-28s nvml per-process %10.2f MiB   cuMemGetInfo free %12.2f MiB\n", name,
           u < 0 ? -1 : u / MiB, f / MiB);
    *last_nvml = u;
    *last_free = f;
}

int main(void)
{
    static CUdeviceptr small[1000];
    CUmemAllocationProp prop;
    CUdeviceptr p1 = 0, p2 = 0, pa = 0;
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    char bus[64];
    size_t gmin = 0, grec = 0, free_before, total;
    double u, last = -1, dev_before;
    int i, drv = 0, have_nvml;

    check_init();
    if (!CU(cuInit(0)) || !CU(cuDeviceGet(&dev, 0)) ||
        !CU(cuDeviceGetPCIBusId(bus, sizeof bus, dev)))
        return check_done();
    CU(cuDriverGetVersion(&drv));
    num("cuda_driver_version", drv);
    have_nvml = nvml_open(bus);
    dev_before = have_nvml ? nvml_device_used() : -1;
    u = have_nvml ? nvml_used_by_me() : -1;
    printf("before the context: NVML lists this pid: %s; device used %.1f MiB\n",
           u < 0 ? "no" : "yes", dev_before / MiB);

    if (!CU(cuDevicePrimaryCtxRetain(&ctx, dev)) || !CU(cuCtxSetCurrent(ctx)))
        return check_done();
    CU(cuMemGetInfo(&free_before, &total));
    num("device_total_MiB", total / MiB);
    if (have_nvml && dev_before >= 0)
        num("nvml_device_used_delta_for_context_MiB", (nvml_device_used() - dev_before) / MiB);
    step("after_context", &last, &free_before);
    if (last < 0)
        note("NVML does not list this process (pid %d): per-process figures unavailable here "
             "(a container with its own PID namespace?)",
             (int)getpid());
    else
        key("context_nvml_MiB", last / MiB);

    for (i = 0; i < 1000; i++)
        if (!CU(cuMemAlloc(&small[i], 4096)))
            break;
    step("after_1000x4KiB", &last, &free_before);
    for (i = i - 1; i >= 0; i--)
        CU(cuMemFree(small[i]));
    step("after_freeing_them", &last, &free_before);
    CU(cuMemAlloc(&p1, 1 << 20));
    step("after_1x1MiB", &last, &free_before);
    CU(cuMemAlloc(&p2, (2 << 20) + 1));
    step("after_2MiB_plus_1", &last, &free_before);
    if (CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING))) {
        if (CU(cuMemAllocAsync(&pa, 4096, s)) && CU(cuStreamSynchronize(s)))
            step("after_async_4KiB", &last, &free_before);
        if (pa)
            CU(cuMemFreeAsync(pa, s));
        CU(cuStreamSynchronize(s));
        step("after_async_free_sync", &last, &free_before);
        CU(cuStreamDestroy(s));
    }
    if (p1)
        CU(cuMemFree(p1));
    if (p2)
        CU(cuMemFree(p2));
    step("after_freeing_all", &last, &free_before);

    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    if (CU(cuMemGetAllocationGranularity(&gmin, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) &&
        CU(cuMemGetAllocationGranularity(&grec, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))) {
        key("vmm_granularity_min_KiB", gmin / 1024.0);
        key("vmm_granularity_recommended_KiB", grec / 1024.0);
    }
    CU(cuDevicePrimaryCtxRelease(dev));
    info("the probe ran to the end");
    return check_done();
}
