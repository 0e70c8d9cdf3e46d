/*
 * A multi-threaded load for the ThreadSanitizer build: run under gpuslice run
 * (--memory, --compute) against the simulated GPU, it allocates and frees
 * through every family (cuMemAlloc, cuMemAllocAsync/cuMemFreeAsync, VMM
 * create/map/unmap/release), launches kernels (cuLaunchKernel, its _ptsz
 * variant, cuLaunchKernelEx), captures and launches graphs, and asks for
 * memory info and entry points, and makes requests over the limit, on 12
 * threads at once. Every call must succeed, but for those over the limit,
 * which must be refused: what the threads hold together stays far under a
 * limit of 1 GiB (run it with --memory 1G). After
 * the threads are done the tenant's free memory must be what it was before,
 * to the byte. Prints "ok THREADS OPERATIONS" and exits 0, or names the call
 * that failed and exits 1; TSan's reports are its own (exit status 66 under
 * the test's TSAN_OPTIONS).
 *
 * usage: tsan_stress [SECONDS]   (default 2; each thread does each of its
 * operations at least 3 times whatever the time)
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

#define MiB (1024UL * 1024UL)
#define ROLES 6
#define PER_ROLE 2 /* 12 threads */
#define MIN_ROUNDS 3

static CUcontext ctx;
static CUfunction spin, noop;
static double deadline;
static long ops_total;

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "tsan_stress: %s failed: %d (line %d)\n", #call, (int)r_, __LINE__);   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static int go_on(long round)
{
    return round < MIN_ROUNDS || now_s() < deadline;
}

/* cuMemAlloc/cuMemFree of a few sizes, some held across rounds. */
static long plain(unsigned seed)
{
    CUdeviceptr held[4] = { 0 };
    long n = 0, round;

    for (round = 0; go_on(round); round++) {
        unsigned i = (seed + (unsigned)round) % 4;
        size_t bytes = (size_t)(1 + (seed * 7 + (unsigned)round) % 16) * MiB / 2 + 4096;
        CUdeviceptr p;

        if (held[i]) {
            CHECK(cuMemFree_v2(held[i]));
            held[i] = 0;
        } else {
            CHECK(cuMemAlloc_v2(&held[i], bytes));
        }
        CHECK(cuMemAlloc_v2(&p, 4096));
        CHECK(cuMemFree_v2(p));
        n += 3;
    }
    for (unsigned i = 0; i < 4; i++)
        if (held[i])
            CHECK(cuMemFree_v2(held[i]));
    return n;
}

/* Stream-ordered allocations with kernels between them, synchronised now and then. */
static long async(unsigned seed)
{
    CUstream s;
    long n = 0, round;

    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (round = 0; go_on(round); round++) {
        CUdeviceptr a, b;
        size_t bytes = (size_t)(1 + (seed + (unsigned)round) % 8) * MiB;

        CHECK(cuMemAllocAsync(&a, bytes, s));
        CHECK(cuMemAllocAsync(&b, 4096, s));
        CHECK(cuLaunchKernel(noop, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        CHECK(cuMemFreeAsync(b, s));
        CHECK(cuMemFreeAsync(a, s));
        if (round % 4 == 3)
            CHECK(cuStreamSynchronize(s));
        n += 5;
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    return n;
}

/* VMM: create, reserve, map, set access, unmap, release, free the range, in two orders. */
static long vmm(unsigned seed)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc access;
    size_t gran = 0;
    long n = 0, round;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    memset(&access, 0, sizeof(access));
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    for (round = 0; go_on(round); round++) {
        size_t bytes = gran * (1 + (seed + (unsigned)round) % 4);
        CUmemGenericAllocationHandle h;
        CUdeviceptr va;

        CHECK(cuMemCreate(&h, bytes, &prop, 0));
        CHECK(cuMemAddressReserve(&va, bytes, 0, 0, 0));
        CHECK(cuMemMap(va, bytes, 0, h, 0));
        CHECK(cuMemSetAccess(va, bytes, &access, 1));
        if (round % 2) { /* released while mapped: the memory goes at the unmap */
            CHECK(cuMemRelease(h));
            CHECK(cuMemUnmap(va, bytes));
        } else {
            CHECK(cuMemUnmap(va, bytes));
            CHECK(cuMemRelease(h));
        }
        CHECK(cuMemAddressFree(va, bytes));
        n += 7;
    }
    return n;
}

/* Launches through three paths: a created stream, the per-thread stream, cuLaunchKernelEx. */
static long launch(unsigned seed)
{
    CUlaunchConfig cfg;
    CUstream s;
    long n = 0, round;

    (void)seed;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    for (round = 0; go_on(round); round++) {
        CHECK(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        CHECK(cuLaunchKernel_ptsz(spin, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cuLaunchKernelEx(&cfg, spin, NULL, NULL));
        if (round % 8 == 7)
            CHECK(cuStreamSynchronize(s));
        n += 3;
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamSynchronize_ptsz(NULL));
    CHECK(cuStreamDestroy_v2(s));
    return n;
}

/* Captures a graph of a few kernels (thread-local mode: the others keep launching), launches it. */
static long capture(unsigned seed)
{
    CUstream s;
    long n = 0, round;

    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (round = 0; go_on(round); round++) {
        CUgraph g;
        CUgraphExec ge;
        int k, kernels = 2 + (int)((seed + (unsigned)round) % 3);

        CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
        for (k = 0; k < kernels; k++)
            CHECK(cuLaunchKernel(spin, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        CHECK(cuStreamEndCapture(s, &g));
        CHECK(cuGraphInstantiateWithFlags(&ge, g, 0));
        CHECK(cuGraphLaunch(ge, s));
        CHECK(cuGraphLaunch(ge, s));
        CHECK(cuStreamSynchronize(s));
        CHECK(cuGraphExecDestroy(ge));
        CHECK(cuGraphDestroy(g));
        n += 7 + kernels;
    }
    CHECK(cuStreamDestroy_v2(s));
    return n;
}

/* A call that must be refused for the limit: the refusal path runs beside the others. */
#define REFUSED(call)                                                                              \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_ERROR_OUT_OF_MEMORY) {                                                      \
            fprintf(stderr, "tsan_stress: %s gave %d, not out of memory (line %d)\n", #call,       \
                    (int)r_, __LINE__);                                                            \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/*
 * Entry points looked up while the others run, the memory the tenant is told
 * it has, and requests over the limit (OVER bytes, more than it can ever hold).
 */
#define OVER (3UL << 30)
static long lookups(unsigned seed)
{
    static const char *const names[] = { "cuMemAlloc",    "cuLaunchKernel", "cuMemGetInfo",
                                         "cuGraphLaunch", "cuMemCreate",    "cuMemAllocAsync" };
    CUmemAllocationProp prop;
    CUstream s;
    long n = 0, round;

    memset(&prop, 0, sizeof(prop));
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    for (round = 0; go_on(round); round++) {
        const char *name = names[(seed + (unsigned)round) % 6];
        CUdriverProcAddressQueryResult st;
        CUmemGenericAllocationHandle h;
        size_t free_b, total_b;
        CUdeviceptr d;
        void *p = NULL;

        CHECK(cuGetProcAddress_v2(name, &p, 12000, 0, &st));
        if (p == NULL) {
            fprintf(stderr, "tsan_stress: no entry point for %s\n", name);
            exit(1);
        }
        CHECK(cuMemGetInfo_v2(&free_b, &total_b));
        if (free_b > total_b) {
            fprintf(stderr, "tsan_stress: free %zu > total %zu\n", free_b, total_b);
            exit(1);
        }
        switch (round % 3) {
        case 0:
            REFUSED(cuMemAlloc_v2(&d, OVER));
            break;
        case 1:
            REFUSED(cuMemCreate(&h, OVER, &prop, 0));
            break;
        default:
            REFUSED(cuMemAllocAsync(&d, OVER, s));
            break;
        }
        n += 3;
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    return n;
}

static long (*const roles[ROLES])(unsigned) = { plain, async, vmm, launch, capture, lookups };

struct worker {
    pthread_t th;
    unsigned id;
    long ops;
};

static void *work(void *arg)
{
    struct worker *w = arg;

    CHECK(cuCtxSetCurrent(ctx));
    w->ops = roles[w->id % ROLES](w->id);
    __atomic_add_fetch(&ops_total, w->ops, __ATOMIC_RELAXED);
    return NULL;
}

int main(int argc, char **argv)
{
    struct worker w[ROLES * PER_ROLE];
    size_t free0, free1, total;
    double seconds = argc > 1 ? atof(argv[1]) : 2;
    CUdevice dev;
    CUmodule m;
    unsigned i;

    if (argc > 2 || seconds <= 0 || seconds > 600) {
        fprintf(stderr, "usage: tsan_stress [SECONDS]\n");
        return 2;
    }
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&m, "simulated"));
    CHECK(cuModuleGetFunction(&spin, m, "spin_20us"));
    CHECK(cuModuleGetFunction(&noop, m, "noop"));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemGetInfo_v2(&free0, &total));
    deadline = now_s() + seconds;
    for (i = 0; i < ROLES * PER_ROLE; i++) {
        w[i].id = i;
        if (pthread_create(&w[i].th, NULL, work, &w[i]) != 0) {
            fprintf(stderr, "tsan_stress: cannot start thread %u\n", i);
            return 1;
        }
    }
    for (i = 0; i < ROLES * PER_ROLE; i++)
        pthread_join(w[i].th, NULL);
    CHECK(cuCtxSynchronize());
    CHECK(cuMemGetInfo_v2(&free1, &total));
    if (free1 != free0) {
        fprintf(stderr, "tsan_stress: free memory %zu after, %zu before: %lld bytes %s\n", free1,
                free0, (long long)free0 - (long long)free1,
                free1 < free0 ? "still charged" : "given back twice");
        return 1;
    }
    CHECK(cuModuleUnload(m));
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    printf("ok threads %d operations %ld memory %zu\n", ROLES * PER_ROLE, ops_total, total);
    return 0;
}
