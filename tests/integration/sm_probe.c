/*
 * What an SM partition binds, on the simulated GPU: THREADS threads start
 * as the CUDA runtime does on each (retain device 0's primary context, make
 * it current) and each prints, per launch path, the SMs its current context
 * has and the device time of one spin_2000us kernel (2 ms on the whole
 * device):
 *   "thread T PATH sms N ms X"   PATH: null (the NULL stream), stream (one made
 *                                there), graph (captured there, replayed)
 * With "create" first, the main thread also makes a context of its own with
 * cuCtxCreate and prints its line ("created sms N ms X"). With "internal"
 * first, each thread makes the primary context current as the CUDA runtime
 * does through its private entry points (the simulator's
 * cuSimRuntimeMakePrimaryCurrent), not through cuDevicePrimaryCtxRetain and
 * cuCtxSetCurrent. "priority" is "internal" whose first call after that is
 * cuStreamCreateWithPriority (as PyTorch makes its streams): each thread
 * prints a line for that stream too ("thread T priority sms N ms X").
 * First, before any context, it prints the device's MULTIPROCESSOR_COUNT
 * attribute and whether the primary context is active after that query
 * ("attribute sms N primary_active A").
 * Exit status: 0, 1 when a CUDA call failed (named on stderr), 2 for bad usage.
 *
 * usage: sm_probe [create|internal|priority] THREADS
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            const char *n_ = NULL;                                                                 \
            cuGetErrorName(r_, &n_);                                                               \
            fprintf(stderr, "sm_probe: %s: %s\n", #call, n_ ? n_ : "error");                       \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

static int report(const char *who, const char *path, CUstream s, CUfunction f, CUgraphExec g)
{
    CUdevResource res;
    CUcontext cur;
    CUevent a, b;
    float ms = -1;

    CHECK(cuCtxGetCurrent(&cur));
    memset(&res, 0, sizeof(res));
    CHECK(cuCtxGetDevResource(cur, &res, CU_DEV_RESOURCE_TYPE_SM));
    CHECK(cuEventCreate(&a, 0));
    CHECK(cuEventCreate(&b, 0));
    CHECK(cuEventRecord(a, s));
    if (g)
        CHECK(cuGraphLaunch(g, s));
    else
        CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuEventRecord(b, s));
    CHECK(cuEventSynchronize(b));
    CHECK(cuEventElapsedTime_v2(&ms, a, b));
    printf("%s %s sms %u ms %.2f\n", who, path, res.sm.smCount, ms);
    CHECK(cuEventDestroy_v2(a));
    CHECK(cuEventDestroy_v2(b));
    return 0;
}

static int internal, priority;

static int run_thread(int t)
{
    static const char image[] = "simulated";
    char who[32];
    CUcontext ctx;
    CUmodule m;
    CUfunction f;
    CUstream s, ps = NULL;
    CUgraph graph;
    CUgraphExec exec;

    snprintf(who, sizeof(who), "thread %d", t);
    if (internal) {
        CUresult (*make_current)(CUdevice) =
            (CUresult(*)(CUdevice))dlsym(RTLD_DEFAULT, "cuSimRuntimeMakePrimaryCurrent");
        if (!make_current) {
            fprintf(stderr, "sm_probe: the driver has no cuSimRuntimeMakePrimaryCurrent\n");
            return -1;
        }
        CHECK(make_current(0));
        if (priority)
            CHECK(cuStreamCreateWithPriority(&ps, CU_STREAM_NON_BLOCKING, -1));
    } else {
        CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
        CHECK(cuCtxSetCurrent(ctx));
    }
    CHECK(cuModuleLoadData(&m, image));
    CHECK(cuModuleGetFunction(&f, m, "spin_2000us"));
    if (report(who, "null", NULL, f, NULL) < 0)
        return -1;
    if (ps && report(who, "priority", ps, f, NULL) < 0)
        return -1;
    if (ps)
        CHECK(cuStreamDestroy_v2(ps));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (report(who, "stream", s, f, NULL) < 0)
        return -1;
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK(cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamEndCapture(s, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    if (report(who, "graph", s, f, exec) < 0)
        return -1;
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuDevicePrimaryCtxRelease_v2(0));
    return 0;
}

static void *thread_main(void *arg)
{
    return (void *)(intptr_t)run_thread((int)(intptr_t)arg);
}

static int created(void)
{
    static const char image[] = "simulated";
    CUcontext c;
    CUmodule m;
    CUfunction f;

    CHECK(cuCtxCreate_v2(&c, 0, 0));
    CHECK(cuModuleLoadData(&m, image));
    CHECK(cuModuleGetFunction(&f, m, "spin_2000us"));
    if (report("created", "null", NULL, f, NULL) < 0)
        return -1;
    CHECK(cuCtxDestroy_v2(c));
    return 0;
}

int main(int argc, char **argv)
{
    pthread_t th[64];
    int n, i, rc = 0, attr = 0, create = argc > 1 && strcmp(argv[1], "create") == 0;

    priority = argc > 1 && strcmp(argv[1], "priority") == 0;
    internal = priority || (argc > 1 && strcmp(argv[1], "internal") == 0);
    if (argc != 2 + (create || internal) || (n = atoi(argv[1 + (create || internal)])) < 1 ||
        n > 64) {
        fprintf(stderr, "usage: sm_probe [create|internal|priority] THREADS (1..64)\n");
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (cuInit(0) != CUDA_SUCCESS) {
        fprintf(stderr, "sm_probe: cuInit failed\n");
        return 1;
    }
    /* Before any context: the count the program is told, its partition's on a partitioned device. */
    if (cuDeviceGetAttribute(&attr, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0) != CUDA_SUCCESS) {
        fprintf(stderr, "sm_probe: cuDeviceGetAttribute(MULTIPROCESSOR_COUNT) failed\n");
        return 1;
    }
    {
        unsigned flags = 0;
        int active = -1;
        cuDevicePrimaryCtxGetState(0, &flags, &active);
        /* Asking must not make a context (the memory accounting would not see it). */
        printf("attribute sms %d primary_active %d\n", attr, active);
    }
    if (create && created() < 0)
        return 1;
    for (i = 0; i < n; i++)
        if (pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i) != 0)
            return 1;
    for (i = 0; i < n; i++) {
        void *r;
        pthread_join(th[i], &r);
        if (r != NULL)
            rc = 1;
    }
    return rc;
}
