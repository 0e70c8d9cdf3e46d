/*
 * The in-process lanes API (gpuslice_lanes_run) on the simulated GPU: one
 * lane per weight on device 0; each lane says the SMs its current context
 * has, what the API reported, when its function started (CLOCK_MONOTONIC,
 * µs) and the device time of one spin_2000us kernel (2 ms on the whole
 * device) on its NULL stream:
 *   "lane I sms N reported N attribute N first F start_us T ms X"
 * (attribute: the device's MULTIPROCESSOR_COUNT asked on the lane's thread;
 * via_gpa, via_dlsym: the same through the pointers cuGetProcAddress and
 * dlsym give; via_gpa_self: through the cuGetProcAddress that
 * cuGetProcAddress_v2("cuGetProcAddress") hands back, which is how the CUDA
 * runtime resolves every driver function; via_dlsym_gpa: through the
 * cuGetProcAddress_v2 that dlsym gives for the driver's handle, where the
 * runtime starts; cluster: the largest thread-block cluster of 16, 8, 4, 2
 * or 1 blocks a cuLaunchKernelEx on its NULL stream is not refused)
 * then "rc R", "primary active A" (whether the device's primary context is
 * still active after the run: 0, as the API releases what it retained, or -1
 * when the driver cannot say) and, when R < 0, "err MESSAGE".
 * usage: lanes_probe [-d DEVICE] [-q | -a] WEIGHT...     exit status 0 when R is 0
 * -q: each lane runs no kernel: it prints "lane I arg A sms N", A the argument it was given
 * (lane I's is "a<I>"), and returns 100 + I; after the run, "info I weight W sms N first F
 * result R cuda_error E" for each lane, as gpuslice_lanes_run filled it in. Up to 65 weights
 * are passed on, one more than the API allows.
 * -a: each lane launches a 300 ms kernel (spin_300000us) on its NULL stream and returns at once;
 * after the run, "run_ms M": how long gpuslice_lanes_run took.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"
#include "gpuslice/gpuslice.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

typedef CUresult (*attr_fn)(int *, CUdevice_attribute, CUdevice);

/* The largest cluster of 16, 8, 4, 2 or 1 blocks f launches with on the NULL stream; 0 if none. */
static unsigned largest_cluster(CUfunction f)
{
    unsigned n;

    for (n = 16; n >= 1; n /= 2) {
        CUlaunchAttribute at;
        CUlaunchConfig cfg;

        memset(&at, 0, sizeof(at));
        memset(&cfg, 0, sizeof(cfg));
        at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        at.value.clusterDim.x = n;
        at.value.clusterDim.y = at.value.clusterDim.z = 1;
        cfg.gridDimX = 16;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = 128;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.attrs = &at;
        cfg.numAttrs = 1;
        if (cuLaunchKernelEx(&cfg, f, NULL, NULL) == CUDA_SUCCESS)
            return n;
    }
    return 0;
}

/* MULTIPROCESSOR_COUNT through fn, or -1. */
static int ask(attr_fn fn)
{
    int v = -1;

    if (fn == NULL || fn(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) != CUDA_SUCCESS)
        return -1;
    return v;
}

/* -q: the lane's own argument and partition, no kernel. */
static int quick_lane(int i, const struct gpuslice_lane *info, void *arg)
{
    CUdevResource res;
    CUcontext cur;

    memset(&res, 0, sizeof(res));
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS ||
        cuCtxGetDevResource(cur, &res, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS)
        return 1;
    printf("lane %d arg %s sms %u reported %u\n", i, arg ? (const char *)arg : "(null)",
           res.sm.smCount, info->sm_count);
    return 100 + i;
}

/* -a: a 300 ms kernel launched on the lane's NULL stream, not waited for. */
static int async_lane(int i, const struct gpuslice_lane *info, void *arg)
{
    static const char image[] = "simulated";
    CUmodule m;
    CUfunction f;

    (void)i;
    (void)info;
    (void)arg;
    if (cuModuleLoadData(&m, image) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "spin_300000us") != CUDA_SUCCESS ||
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
        return 1;
    return 0;
}

static int lane(int i, const struct gpuslice_lane *info, void *arg)
{
    void *gpa = NULL, *self = NULL, *gpa_self = NULL,
         *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *dl_gpa = NULL, *gpa_dl = NULL;
    CUdriverProcAddressQueryResult st;
    static const char image[] = "simulated";
    struct timespec ts;
    CUdevResource res;
    CUcontext cur;
    CUmodule m;
    CUfunction f, noop;
    CUevent a, b;
    float ms = -1;
    long long start;
    int attr = -1;

    (void)arg;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    start = (long long)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
    memset(&res, 0, sizeof(res));
    if (cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != gpuslice_lane_context() ||
        cuCtxGetDevResource(cur, &res, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
        cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) != CUDA_SUCCESS ||
        cuModuleLoadData(&m, image) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, "spin_2000us") != CUDA_SUCCESS ||
        cuEventCreate(&a, 0) != CUDA_SUCCESS || cuEventCreate(&b, 0) != CUDA_SUCCESS ||
        cuEventRecord(a, NULL) != CUDA_SUCCESS ||
        cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS ||
        cuEventRecord(b, NULL) != CUDA_SUCCESS || cuEventSynchronize(b) != CUDA_SUCCESS ||
        cuEventElapsedTime_v2(&ms, a, b) != CUDA_SUCCESS ||
        cuModuleGetFunction(&noop, m, "noop") != CUDA_SUCCESS)
        return 1;
    if (cuGetProcAddress_v2("cuDeviceGetAttribute", &gpa, 12000, 0, &st) != CUDA_SUCCESS)
        gpa = NULL;
    if (cuGetProcAddress_v2("cuGetProcAddress", &self, 12000, 0, &st) != CUDA_SUCCESS ||
        self == NULL ||
        ((CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
             self)("cuDeviceGetAttribute", &gpa_self, 12000, 0, &st) != CUDA_SUCCESS)
        gpa_self = NULL;
    if (lib == NULL || (dl_gpa = dlsym(lib, "cuGetProcAddress_v2")) == NULL ||
        ((CUresult(*)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *))
             dl_gpa)("cuDeviceGetAttribute", &gpa_dl, 12000, 0, &st) != CUDA_SUCCESS)
        gpa_dl = NULL;
    printf("lane %d sms %u reported %u attribute %d via_gpa %d via_dlsym %d first %u start_us "
           "%lld ms %.2f via_gpa_self %d via_dlsym_gpa %d cluster %u\n",
           i, res.sm.smCount, info->sm_count, attr, ask((attr_fn)gpa),
           ask(lib ? (attr_fn)dlsym(lib, "cuDeviceGetAttribute") : NULL), info->first_sm, start, ms,
           ask((attr_fn)gpa_self), ask((attr_fn)gpa_dl), largest_cluster(noop));
    return 0;
}

int main(int argc, char **argv)
{
    struct gpuslice_lane lanes[GPUSLICE_LANES_MAX + 1];
    double w[GPUSLICE_LANES_MAX + 1];
    static char names[GPUSLICE_LANES_MAX + 1][16];
    void *args[GPUSLICE_LANES_MAX + 1];
    char err[512] = "";
    struct timespec t0, t1;
    int n = 0, i = 1, dev = 0, rc, attr = -1, mode = 0; /* 1: -q, 2: -a */

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc > 2 && strcmp(argv[1], "-d") == 0) {
        dev = atoi(argv[2]);
        i = 3;
    }
    if (i < argc && strcmp(argv[i], "-q") == 0) {
        mode = 1;
        i++;
    } else if (i < argc && strcmp(argv[i], "-a") == 0) {
        mode = 2;
        i++;
    }
    for (; i < argc && n < GPUSLICE_LANES_MAX + 1; i++) {
        snprintf(names[n], sizeof(names[n]), "a%d", n);
        args[n] = names[n];
        w[n++] = strtod(argv[i], NULL);
    }
    memset(lanes, 0xff, sizeof(lanes)); /* what the API fills in shows */
    clock_gettime(CLOCK_MONOTONIC, &t0);
    rc = gpuslice_lanes_run(dev, n, w,
                            mode == 1   ? quick_lane
                            : mode == 2 ? async_lane
                                        : lane,
                            mode == 1 ? args : NULL, lanes, err, sizeof(err));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("rc %d\n", rc);
    if (mode == 2)
        printf("run_ms %.0f\n",
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6);
    {
        unsigned flags = 0;
        int active = -1;

        if (cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS)
            active = -1;
        printf("primary active %d\n", active);
    }
    for (i = 0; mode == 1 && rc == 0 && i < n; i++)
        printf("info %d weight %g sms %u first %u result %d cuda_error %d\n", i, lanes[i].weight,
               lanes[i].sm_count, lanes[i].first_sm, lanes[i].result, lanes[i].cuda_error);
    if (cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev) == CUDA_SUCCESS)
        printf("after attribute %d\n", attr); /* no lane current: the whole GPU's */
    if (rc < 0)
        printf("err %s\n", err);
    for (i = 0; rc == 0 && i < n; i++)
        if (lanes[i].result != (mode == 1 ? 100 + i : 0) || lanes[i].cuda_error != 0)
            rc = 1;
    return rc == 0 ? 0 : 1;
}
