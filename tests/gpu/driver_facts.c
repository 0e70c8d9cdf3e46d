/*
 * What the real driver does where the simulated one (tests/sim) must behave
 * the same for the CPU suite to mean anything: how small cuMemAlloc requests
 * are packed, the pitch cuMemAllocPitch picks, what an array really takes,
 * how a memory pool grows, which pointer cuGetProcAddress hands out for each
 * name, version and flag, and what a stream capture allows. Run natively
 * (no gpuslice); nothing is judged, every line is a fact (@num or @note) that
 * tests/sim/README.md cites.
 *
 * usage: driver_facts     (output follows check.h)
 */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cu_check.h"

#define KiB 1024ULL
#define MIB (1024ULL * 1024ULL)

static size_t cu_free(void)
{
    size_t f = 0, t = 0;
    cuMemGetInfo(&f, &t);
    return f;
}

/* ---- packing of small cuMemAlloc requests -------------------------------- */

static void packing(size_t size, int n)
{
    static CUdeviceptr p[4096];
    size_t start = cu_free(), prev = start, now;
    int i, steps = 0;

    printf("packing %zu B:", size);
    for (i = 0; i < n && i < 4096; i++) {
        if (cuMemAlloc(&p[i], size) != CUDA_SUCCESS)
            break;
        now = cu_free();
        if (now != prev && steps < 12) {
            printf(" [%d]+%llu KiB", i, (unsigned long long)(prev - now) / KiB);
            steps++;
        }
        prev = now;
    }
    n = i;
    printf(" ; %d allocations took %llu KiB\n", n, (unsigned long long)(start - prev) / KiB);
    {
        char k[64];
        snprintf(k, sizeof k, "pack_%zu_x%d_KiB", size, n);
        num(k, (double)(start - prev) / KiB);
    }
    for (i = 0; i < n; i++)
        cuMemFree(p[i]);
    printf("  after freeing them: %lld KiB still taken\n",
           (long long)((long long)start - (long long)cu_free()) / (long long)KiB);
}

static void single(size_t size)
{
    size_t before = cu_free(), after;
    CUdeviceptr p;
    char k[64];

    if (cuMemAlloc(&p, size) != CUDA_SUCCESS) {
        note("cuMemAlloc(%zu) failed", size);
        return;
    }
    after = cu_free();
    snprintf(k, sizeof k, "alloc_%zu_KiB", size);
    num(k, (double)(before - after) / KiB);
    printf("cuMemAlloc(%zu) took %llu KiB\n", size, (unsigned long long)(before - after) / KiB);
    cuMemFree(p);
}

/* ---- pitch ---------------------------------------------------------------- */

static void pitch(size_t width, size_t height, unsigned elem)
{
    size_t before = cu_free(), after, pp = 0;
    CUdeviceptr p;

    if (cuMemAllocPitch(&p, &pp, width, height, elem) != CUDA_SUCCESS) {
        note("cuMemAllocPitch(%zu, %zu, %u) failed", width, height, elem);
        return;
    }
    after = cu_free();
    printf("pitch width %zu height %zu elem %u -> pitch %zu, took %llu KiB\n", width, height, elem,
           pp, (unsigned long long)(before - after) / KiB);
    cuMemFree(p);
}

/* ---- arrays --------------------------------------------------------------- */

static void array2d(size_t w, size_t h, CUarray_format f, unsigned ch, const char *fname)
{
    CUDA_ARRAY_DESCRIPTOR d;
    size_t before = cu_free(), after;
    CUarray a;

    memset(&d, 0, sizeof d);
    d.Width = w;
    d.Height = h;
    d.Format = f;
    d.NumChannels = ch;
    if (cuArrayCreate(&a, &d) != CUDA_SUCCESS) {
        note("cuArrayCreate %zux%zu %s x%u failed", w, h, fname, ch);
        return;
    }
    after = cu_free();
    printf("array2d %zux%zu %s x%u (%llu B of elements) took %llu KiB\n", w, h, fname, ch,
           (unsigned long long)(w * (h ? h : 1) * ch *
                                (f == CU_AD_FORMAT_FLOAT  ? 4
                                 : f == CU_AD_FORMAT_HALF ? 2
                                                          : 1)),
           (unsigned long long)(before - after) / KiB);
    cuArrayDestroy(a);
}

static void array3d(size_t w, size_t h, size_t dpt, CUarray_format f, unsigned ch,
                    const char *fname)
{
    CUDA_ARRAY3D_DESCRIPTOR d;
    size_t before = cu_free(), after;
    CUarray a;

    memset(&d, 0, sizeof d);
    d.Width = w;
    d.Height = h;
    d.Depth = dpt;
    d.Format = f;
    d.NumChannels = ch;
    if (cuArray3DCreate(&a, &d) != CUDA_SUCCESS) {
        note("cuArray3DCreate %zux%zux%zu failed", w, h, dpt);
        return;
    }
    after = cu_free();
    printf("array3d %zux%zux%zu %s x%u took %llu KiB\n", w, h, dpt, fname, ch,
           (unsigned long long)(before - after) / KiB);
    cuArrayDestroy(a);
}

/* ---- pools ---------------------------------------------------------------- */

static unsigned long long pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;
    cuMemPoolGetAttribute(pool, a, &v);
    return (unsigned long long)v;
}

static void pool_one(CUmemoryPool pool, CUstream s, size_t size, const char *what)
{
    CUdeviceptr p;
    size_t before = cu_free();

    if (cuMemAllocFromPoolAsync(&p, size, pool, s) != CUDA_SUCCESS) {
        note("%s: alloc %zu failed", what, size);
        return;
    }
    cuStreamSynchronize(s);
    printf("%s: alloc %zu B from empty -> reserved %llu KiB, used %llu KiB, device %llu KiB\n",
           what, size, pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB,
           pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) / KiB,
           (unsigned long long)(before - cu_free()) / KiB);
    cuMemFreeAsync(p, s);
    cuStreamSynchronize(s);
    cuMemPoolTrimTo(pool, 0);
}

static void pool_sequence(CUmemoryPool pool, CUstream s, const char *what)
{
    static const size_t sizes[] = { 4096,    4096,     1 << 20, 20 << 20, 8 << 20,
                                    4 << 20, 40 << 20, 1 << 20, 100 << 20 };
    CUdeviceptr p[16];
    size_t i;

    printf("%s: held one after another:", what);
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        if (cuMemAllocFromPoolAsync(&p[i], sizes[i], pool, s) != CUDA_SUCCESS)
            break;
        cuStreamSynchronize(s);
        printf(" +%zu KiB -> %llu", sizes[i] / 1024,
               pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
    }
    printf(" (KiB reserved)\n");
    while (i-- > 0)
        cuMemFreeAsync(p[i], s);
    cuStreamSynchronize(s);
    printf("%s: after freeing all and a sync: reserved %llu KiB\n", what,
           pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
    cuMemPoolTrimTo(pool, 0);
}

static void pools(CUdevice dev)
{
    static const size_t sizes[] = { 4096,      1 << 20,         2 << 20,        (2 << 20) + 1,
                                    31 << 20,  32 << 20,        (32 << 20) + 1, 33 << 20,
                                    48 << 20,  64 << 20,        (64 << 20) + 1, 100 << 20,
                                    256 << 20, (1ULL << 30) + 1 };
    CUmemoryPool def, own;
    CUmemPoolProps props;
    CUstream s;
    size_t i;
    cuuint64_t thr;

    if (!CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)) ||
        !CU(cuDeviceGetDefaultMemPool(&def, dev)))
        return;
    printf("default pool: release threshold %llu\n",
           pool_attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD));
    for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        pool_one(def, s, sizes[i], "default pool");
    pool_sequence(def, s, "default pool");
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    if (CU(cuMemPoolCreate(&own, &props))) {
        for (i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            pool_one(own, s, sizes[i], "created pool");
        pool_sequence(own, s, "created pool");
        thr = ~0ULL;
        cuMemPoolSetAttribute(own, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &thr);
        {
            CUdeviceptr p;
            if (cuMemAllocFromPoolAsync(&p, 4096, own, s) == CUDA_SUCCESS) {
                cuMemFreeAsync(p, s);
                cuStreamSynchronize(s);
                printf("created pool, threshold max: 4 KiB alloc+free+sync leaves %llu KiB "
                       "reserved\n",
                       pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
            }
            cuMemPoolTrimTo(own, 0);
            printf("  after cuMemPoolTrimTo(0): %llu KiB\n",
                   pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
        }
        cuMemPoolDestroy(own);
    }
    /* A free that another thread's sync releases: reserved shrinks without our hooks knowing. */
    {
        CUdeviceptr a, b;
        if (cuMemAllocAsync(&a, 8 << 20, s) == CUDA_SUCCESS &&
            cuMemAllocAsync(&b, 8 << 20, s) == CUDA_SUCCESS) {
            cuStreamSynchronize(s);
            printf("default pool: two 8 MiB held: reserved %llu KiB\n",
                   pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
            cuMemFreeAsync(b, s);
            printf("  one freed, before any sync: reserved %llu KiB\n",
                   pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
            cuStreamSynchronize(s);
            printf("  after the stream's sync: reserved %llu KiB\n",
                   pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
            cuMemFreeAsync(a, s);
            cuCtxSynchronize();
            printf("  both freed, after cuCtxSynchronize: reserved %llu KiB\n",
                   pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
        }
    }
    cuStreamDestroy(s);
}

/* ---- cuGetProcAddress ---------------------------------------------------- */

static const char *variants[] = { "cuMemAlloc",
                                  "cuMemAlloc_v2",
                                  "cuMemGetInfo",
                                  "cuMemGetInfo_v2",
                                  "cuMemAllocPitch",
                                  "cuMemAllocPitch_v2",
                                  "cuMemFree",
                                  "cuMemFree_v2",
                                  "cuDeviceTotalMem",
                                  "cuDeviceTotalMem_v2",
                                  "cuCtxCreate",
                                  "cuCtxCreate_v2",
                                  "cuCtxCreate_v3",
                                  "cuCtxCreate_v4",
                                  "cuCtxDestroy",
                                  "cuCtxDestroy_v2",
                                  "cuCtxPushCurrent",
                                  "cuCtxPushCurrent_v2",
                                  "cuDevicePrimaryCtxRelease",
                                  "cuDevicePrimaryCtxRelease_v2",
                                  "cuDevicePrimaryCtxReset",
                                  "cuDevicePrimaryCtxReset_v2",
                                  "cuArrayCreate",
                                  "cuArrayCreate_v2",
                                  "cuArray3DCreate",
                                  "cuArray3DCreate_v2",
                                  "cuLaunchKernel",
                                  "cuLaunchKernel_ptsz",
                                  "cuLaunchKernelEx",
                                  "cuLaunchKernelEx_ptsz",
                                  "cuLaunchCooperativeKernel",
                                  "cuLaunchCooperativeKernel_ptsz",
                                  "cuGraphLaunch",
                                  "cuGraphLaunch_ptsz",
                                  "cuMemAllocAsync",
                                  "cuMemAllocAsync_ptsz",
                                  "cuMemAllocFromPoolAsync",
                                  "cuMemAllocFromPoolAsync_ptsz",
                                  "cuMemFreeAsync",
                                  "cuMemFreeAsync_ptsz",
                                  "cuStreamSynchronize",
                                  "cuStreamSynchronize_ptsz",
                                  "cuCtxSynchronize",
                                  "cuCtxSynchronize_v2",
                                  "cuStreamBeginCapture",
                                  "cuStreamBeginCapture_ptsz",
                                  "cuStreamBeginCapture_v2",
                                  "cuStreamBeginCapture_v2_ptsz",
                                  "cuStreamEndCapture",
                                  "cuStreamEndCapture_ptsz",
                                  "cuStreamDestroy",
                                  "cuStreamDestroy_v2",
                                  "cuGetProcAddress",
                                  "cuGetProcAddress_v2",
                                  "cuInit",
                                  "cuDeviceGetAttribute",
                                  "cuMemCreate",
                                  "cuMemRelease",
                                  "cuMemMap",
                                  "cuMemUnmap",
                                  "cuMemAllocManaged",
                                  "cuMemPoolCreate",
                                  "cuMemPoolDestroy",
                                  "cuMemPoolTrimTo",
                                  "cuMemRetainAllocationHandle",
                                  "cuCtxGetCurrent",
                                  "cuCtxSetCurrent",
                                  "cuStreamCreate",
                                  "cuStreamCreateWithPriority",
                                  "cuDevicePrimaryCtxRetain",
                                  "cuArrayDestroy",
                                  NULL };

static const char *apis[] = { "cuMemAlloc",
                              "cuMemGetInfo",
                              "cuMemAllocPitch",
                              "cuMemFree",
                              "cuDeviceTotalMem",
                              "cuCtxCreate",
                              "cuCtxDestroy",
                              "cuCtxPushCurrent",
                              "cuDevicePrimaryCtxRelease",
                              "cuDevicePrimaryCtxReset",
                              "cuArrayCreate",
                              "cuArray3DCreate",
                              "cuLaunchKernel",
                              "cuLaunchKernelEx",
                              "cuLaunchCooperativeKernel",
                              "cuGraphLaunch",
                              "cuMemAllocAsync",
                              "cuMemAllocFromPoolAsync",
                              "cuMemFreeAsync",
                              "cuStreamSynchronize",
                              "cuCtxSynchronize",
                              "cuStreamBeginCapture",
                              "cuStreamEndCapture",
                              "cuStreamDestroy",
                              "cuGetProcAddress",
                              "cuInit",
                              "cuDeviceGetAttribute",
                              "cuMemCreate",
                              "cuMemRelease",
                              "cuMemMap",
                              "cuMemUnmap",
                              "cuMemAllocManaged",
                              "cuMemPoolCreate",
                              "cuMemPoolDestroy",
                              "cuMemPoolTrimTo",
                              "cuMemRetainAllocationHandle",
                              "cuCtxGetCurrent",
                              "cuCtxSetCurrent",
                              "cuStreamCreate",
                              "cuStreamCreateWithPriority",
                              "cuDevicePrimaryCtxRetain",
                              "cuArrayDestroy",
                              NULL };

static void procaddr(void)
{
    static const int versions[] = { 2000,  3020,  4000,  7000,  9000,  10000, 10010, 10020,
                                    11000, 11020, 11040, 11060, 12000, 12050, 13000 };
    static const cuuint64_t flags[] = { CU_GET_PROC_ADDRESS_DEFAULT,
                                        CU_GET_PROC_ADDRESS_LEGACY_STREAM,
                                        CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM };
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD), *exp[128];
    int i, j, k, nv = 0;

    if (!lib) {
        note("libcuda.so.1 not loaded?");
        return;
    }
    for (nv = 0; variants[nv]; nv++)
        exp[nv] = dlsym(lib, variants[nv]);
    for (i = 0; apis[i]; i++) {
        printf("getproc %s:", apis[i]);
        for (k = 0; k < 3; k++) {
            const char *prev = NULL;
            int prev_ver = 0;
            for (j = 0; j < (int)(sizeof versions / sizeof versions[0]); j++) {
                CUdriverProcAddressQueryResult st = 0;
                void *p = NULL;
                const char *name = "none";
                CUresult r = cuGetProcAddress(apis[i], &p, versions[j], flags[k], &st);
                int v;

                if (r == CUDA_SUCCESS && p) {
                    name = "UNEXPORTED";
                    for (v = 0; v < nv; v++)
                        if (exp[v] == p) {
                            name = variants[v];
                            break;
                        }
                } else {
                    name =
                        st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version-low" : "none";
                }
                if (prev == NULL || strcmp(prev, name) != 0) {
                    printf(" f%llu@%d=%s", (unsigned long long)flags[k], versions[j], name);
                    prev = name;
                    prev_ver = versions[j];
                }
            }
            (void)prev_ver;
        }
        printf("\n");
    }
}

/* ---- stream capture -------------------------------------------------------- */

struct other {
    int what;
    CUcontext ctx;
    CUstream capturing, plain;
    CUevent ev_plain;
    CUresult r;
};

static const char *other_names[] = { "cuEventQuery(event recorded outside)",
                                     "cuStreamQuery(another stream)",
                                     "cuEventRecord(event, another stream)",
                                     "cuEventCreate",
                                     "cuMemAlloc(1 MiB)",
                                     "cuStreamIsCapturing(the capturing stream)",
                                     "cuCtxGetCurrent + cuCtxPushCurrent/Pop",
                                     "cuStreamGetCtx(the capturing stream)",
                                     "cuEventQuery(legacy-stream event)",
                                     "cuStreamQuery(CU_STREAM_LEGACY)",
                                     "cuEventRecord(event, CU_STREAM_LEGACY)",
                                     "cuMemGetInfo",
                                     NULL };

static void *other_thread(void *arg)
{
    struct other *o = arg;
    CUstreamCaptureStatus st;
    CUcontext c;
    CUevent e;
    CUdeviceptr p;
    size_t f, t;

    cuCtxSetCurrent(o->ctx);
    switch (o->what) {
    case 0:
        o->r = cuEventQuery(o->ev_plain);
        break;
    case 1:
        o->r = cuStreamQuery(o->plain);
        break;
    case 2:
        o->r = cuEventRecord(o->ev_plain, o->plain);
        break;
    case 3:
        o->r = cuEventCreate(&e, CU_EVENT_DISABLE_TIMING);
        if (o->r == CUDA_SUCCESS)
            cuEventDestroy(e);
        break;
    case 4:
        o->r = cuMemAlloc(&p, 1 << 20);
        if (o->r == CUDA_SUCCESS)
            cuMemFree(p);
        break;
    case 5:
        o->r = cuStreamIsCapturing(o->capturing, &st);
        break;
    case 6:
        o->r = cuCtxGetCurrent(&c);
        if (o->r == CUDA_SUCCESS && (o->r = cuCtxPushCurrent(o->ctx)) == CUDA_SUCCESS)
            o->r = cuCtxPopCurrent(&c);
        break;
    case 7:
        o->r = cuStreamGetCtx(o->capturing, &c);
        break;
    case 8:
        o->r = cuEventQuery(o->ev_plain);
        break;
    case 9:
        o->r = cuStreamQuery(CU_STREAM_LEGACY);
        break;
    case 10:
        o->r = cuEventRecord(o->ev_plain, CU_STREAM_LEGACY);
        break;
    default:
        o->r = cuMemGetInfo(&f, &t);
        break;
    }
    return NULL;
}

static void capture(CUcontext ctx)
{
    static const CUstreamCaptureMode modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                 CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                 CU_STREAM_CAPTURE_MODE_RELAXED };
    static const char *mode_names[] = { "global", "thread-local", "relaxed" };
    CUstream cap, plain;
    CUevent ev, ev_plain;
    CUdeviceptr buf;
    CUgraph g;
    CUresult r1, r2, re;
    int m, w;

    if (!CU(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING)) ||
        !CU(cuStreamCreate(&plain, CU_STREAM_NON_BLOCKING)) ||
        !CU(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING)) ||
        !CU(cuEventCreate(&ev_plain, CU_EVENT_DISABLE_TIMING)) || !CU(cuMemAlloc(&buf, 1 << 20)))
        return;
    for (m = 0; m < 3; m++) {
        /* The capturing thread's own event record into the capturing stream, then a query. */
        cuStreamBeginCapture(cap, modes[m]);
        cuMemsetD8Async(buf, 1, 1 << 20, cap);
        r1 = cuEventRecord(ev, cap);
        r2 = cuEventQuery(ev);
        re = cuStreamEndCapture(cap, &g);
        printf("capture %s: cuEventRecord into the capturing stream %s, then cuEventQuery of "
               "it %s, end %s\n",
               mode_names[m], errname(r1), errname(r2), errname(re));
        if (re == CUDA_SUCCESS)
            cuGraphDestroy(g);
        /* The capturing thread queries its own stream. */
        cuStreamBeginCapture(cap, modes[m]);
        cuMemsetD8Async(buf, 1, 1 << 20, cap);
        r1 = cuStreamQuery(cap);
        re = cuStreamEndCapture(cap, &g);
        printf("capture %s: cuStreamQuery(the capturing stream) %s, end %s\n", mode_names[m],
               errname(r1), errname(re));
        if (re == CUDA_SUCCESS)
            cuGraphDestroy(g);
        /* Another thread's calls while this one captures. */
        for (w = 0; other_names[w]; w++) {
            struct other o = { w, ctx, cap, plain, ev_plain, CUDA_SUCCESS };
            pthread_t th;

            if (w == 8)
                cuEventRecord(ev_plain, CU_STREAM_LEGACY);
            else
                cuEventRecord(ev_plain, plain);
            cuStreamSynchronize(plain);
            cuCtxSynchronize();
            cuStreamBeginCapture(cap, modes[m]);
            cuMemsetD8Async(buf, 1, 1 << 20, cap);
            pthread_create(&th, NULL, other_thread, &o);
            pthread_join(th, NULL);
            cuMemsetD8Async(buf, 2, 1 << 20, cap);
            re = cuStreamEndCapture(cap, &g);
            printf("capture %s: another thread's %s -> %s; capture end %s\n", mode_names[m],
                   other_names[w], errname(o.r), errname(re));
            if (re == CUDA_SUCCESS)
                cuGraphDestroy(g);
            cuCtxSynchronize();
        }
    }
    cuMemFree(buf);
}

/* ---- placement: where small allocations land, arrays' padding ---------------- */

static void placement(void)
{
    CUdeviceptr a[8], big, s1, hold[8];
    size_t before;
    int i;

    /* Four 1 MiB, the first freed, one more: into its hole, or a new page? */
    for (i = 0; i < 4; i++)
        cuMemAlloc(&a[i], 1 << 20);
    printf("place 4 x 1 MiB at page offsets:");
    for (i = 0; i < 4; i++)
        printf(" %llx/%llx", (unsigned long long)(a[i] >> 21),
               (unsigned long long)(a[i] & 0x1fffff));
    printf("\n");
    cuMemFree(a[0]);
    before = cu_free();
    cuMemAlloc(&a[4], 1 << 20);
    printf("place after freeing the first, 1 MiB more at %llx/%llx took %lld KiB\n",
           (unsigned long long)(a[4] >> 21), (unsigned long long)(a[4] & 0x1fffff),
           (long long)((long long)before - (long long)cu_free()) / 1024);
    for (i = 1; i < 5; i++)
        cuMemFree(a[i]);
    /* A small one after a large one that left its last page part empty. */
    before = cu_free();
    cuMemAlloc(&big, 3 << 20);
    printf("place 3 MiB at %llx/%llx took %lld KiB\n", (unsigned long long)(big >> 21),
           (unsigned long long)(big & 0x1fffff),
           (long long)((long long)before - (long long)cu_free()) / 1024);
    before = cu_free();
    cuMemAlloc(&s1, 4096);
    printf("place then 4 KiB at %llx/%llx took %lld KiB\n", (unsigned long long)(s1 >> 21),
           (unsigned long long)(s1 & 0x1fffff),
           (long long)((long long)before - (long long)cu_free()) / 1024);
    cuMemFree(s1);
    cuMemFree(big);
    /* 100-byte requests: how many to a page (the alignment). */
    {
        static CUdeviceptr p[5000];
        size_t st = cu_free();
        int n;
        for (n = 0; n < 5000 && cuMemAlloc(&p[n], 100) == CUDA_SUCCESS; n++)
            ;
        printf("place %d x 100 B took %lld KiB; offsets of the first four: %llx %llx %llx %llx\n",
               n, (long long)((long long)st - (long long)cu_free()) / 1024,
               (unsigned long long)(p[0] & 0x1fffff), (unsigned long long)(p[1] & 0x1fffff),
               (unsigned long long)(p[2] & 0x1fffff), (unsigned long long)(p[3] & 0x1fffff));
        while (n-- > 0)
            cuMemFree(p[n]);
    }
    /* Small pitched allocations held together: packed like cuMemAlloc? */
    before = cu_free();
    for (i = 0; i < 8; i++) {
        size_t pp;
        cuMemAllocPitch(&hold[i], &pp, 100, 16, 4);
    }
    printf("place 8 x pitched 100 x 16 (8 KiB each) took %lld KiB\n",
           (long long)((long long)before - (long long)cu_free()) / 1024);
    for (i = 0; i < 8; i++)
        cuMemFree(hold[i]);
    /* Managed small ones next to device ones. */
}

static void arrays3d(void)
{
    static const size_t wb[] = { 16, 64, 100, 256, 400, 1000, 2000, 4096 };
    static const size_t hs[] = { 1, 8, 9, 64, 100, 1000 };
    static const size_t ds[] = { 1, 2, 10, 16, 17, 64, 100 };
    size_t i, j, k;

    for (i = 0; i < sizeof wb / sizeof wb[0]; i++)
        for (j = 0; j < sizeof hs / sizeof hs[0]; j++)
            for (k = 0; k < sizeof ds / sizeof ds[0]; k++) {
                CUDA_ARRAY3D_DESCRIPTOR d;
                size_t before = cu_free();
                CUarray a;

                memset(&d, 0, sizeof d);
                d.Width = wb[i];
                d.Height = hs[j];
                d.Depth = ds[k];
                d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
                d.NumChannels = 1;
                if (cuArray3DCreate(&a, &d) != CUDA_SUCCESS) {
                    printf("a3 %zu %zu %zu failed\n", wb[i], hs[j], ds[k]);
                    continue;
                }
                printf("a3 %zu %zu %zu %lld\n", wb[i], hs[j], ds[k],
                       (long long)((long long)before - (long long)cu_free()) / 1024);
                cuArrayDestroy(a);
            }
    /* Big ones, where 2 MiB rounding hides less. */
    {
        static const size_t big[][3] = { { 4000, 1000, 1 },  { 4000, 1000, 2 }, { 4000, 1000, 3 },
                                         { 4000, 1000, 5 },  { 4000, 1000, 9 }, { 4000, 1000, 33 },
                                         { 4000, 1001, 8 },  { 4000, 1025, 8 }, { 4000, 1100, 8 },
                                         { 4001, 1000, 8 },  { 4100, 1000, 8 }, { 8192, 512, 4 },
                                         { 8192, 520, 4 },   { 2000, 2000, 3 }, { 100, 10000, 16 },
                                         { 10000, 100, 16 }, { 64, 64, 4096 } };
        for (i = 0; i < sizeof big / sizeof big[0]; i++) {
            CUDA_ARRAY3D_DESCRIPTOR d;
            size_t before = cu_free();
            CUarray a;

            memset(&d, 0, sizeof d);
            d.Width = big[i][0];
            d.Height = big[i][1];
            d.Depth = big[i][2];
            d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
            d.NumChannels = 1;
            if (cuArray3DCreate(&a, &d) != CUDA_SUCCESS) {
                printf("a3 %zu %zu %zu failed\n", big[i][0], big[i][1], big[i][2]);
                continue;
            }
            printf("a3 %zu %zu %zu %lld\n", big[i][0], big[i][1], big[i][2],
                   (long long)((long long)before - (long long)cu_free()) / 1024);
            cuArrayDestroy(a);
        }
    }
}

/* 2-D arrays: is the height rounded to 8 rows, or to a block of up to 128? ("a2 W H KiB", u8) */
static void arrays2d(void)
{
    static const size_t wb[] = { 64, 1000, 4096, 16384, 65536 };
    static const size_t hs[] = { 1, 8, 9, 17, 33, 65, 100, 129, 200, 1000, 1025 };
    size_t i, j;

    for (i = 0; i < sizeof wb / sizeof wb[0]; i++)
        for (j = 0; j < sizeof hs / sizeof hs[0]; j++) {
            CUDA_ARRAY_DESCRIPTOR d;
            size_t before = cu_free();
            CUarray a;

            memset(&d, 0, sizeof d);
            d.Width = wb[i];
            d.Height = hs[j];
            d.Format = CU_AD_FORMAT_UNSIGNED_INT8;
            d.NumChannels = 1;
            if (cuArrayCreate(&a, &d) != CUDA_SUCCESS) {
                printf("a2 %zu %zu failed\n", wb[i], hs[j]);
                continue;
            }
            printf("a2 %zu %zu %lld\n", wb[i], hs[j],
                   (long long)((long long)before - (long long)cu_free()) / 1024);
            cuArrayDestroy(a);
        }
}

static void pool_fragments(CUdevice dev)
{
    CUmemoryPool def;
    CUstream s;
    CUdeviceptr a, b, c;

    if (cuStreamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS ||
        cuDeviceGetDefaultMemPool(&def, dev) != CUDA_SUCCESS)
        return;
    cuMemAllocAsync(&a, 20 << 20, s);
    cuMemAllocAsync(&b, 20 << 20, s);
    cuStreamSynchronize(s);
    printf("pool frag: 20+20 MiB held: reserved %llu KiB\n",
           pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
    cuMemFreeAsync(a, s);
    cuStreamSynchronize(s);
    printf("pool frag: first freed + sync: reserved %llu KiB, used %llu KiB\n",
           pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB,
           pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) / KiB);
    cuMemAllocAsync(&c, 30 << 20, s);
    cuStreamSynchronize(s);
    printf("pool frag: then 30 MiB: reserved %llu KiB, used %llu KiB\n",
           pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB,
           pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT) / KiB);
    cuMemFreeAsync(b, s);
    cuMemFreeAsync(c, s);
    cuStreamSynchronize(s);
    printf("pool frag: all freed + sync: reserved %llu KiB\n",
           pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
    /* Is a freed block reusable before the stream reaches the free (same stream)? */
    cuMemAllocAsync(&a, 30 << 20, s);
    cuMemFreeAsync(a, s);
    cuMemAllocAsync(&b, 30 << 20, s);
    printf("pool reuse in stream order: reserved %llu KiB before any sync\n",
           pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) / KiB);
    cuMemFreeAsync(b, s);
    cuStreamSynchronize(s);
    cuStreamDestroy(s);
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    int i;

    check_init();
    if (argc > 1 && strcmp(argv[1], "--more") == 0) {
        if (!CU(cuInit(0)) || !CU(cuDeviceGet(&dev, 0)) ||
            !CU(cuDevicePrimaryCtxRetain(&ctx, dev)) || !CU(cuCtxSetCurrent(ctx)))
            return check_done();
        placement();
        arrays3d();
        arrays2d();
        pool_fragments(dev);
        note("more facts recorded");
        return 0;
    }
    if (!CU(cuInit(0)) || !CU(cuDeviceGet(&dev, 0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, dev)) ||
        !CU(cuCtxSetCurrent(ctx)))
        return check_done();
    {
        int a = 0;
        cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, dev);
        printf("TEXTURE_PITCH_ALIGNMENT %d\n", a);
        cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, dev);
        printf("TEXTURE_ALIGNMENT %d\n", a);
        cuDeviceGetAttribute(&a, CU_DEVICE_ATTRIBUTE_MAX_PITCH, dev);
        printf("MAX_PITCH %d\n", a);
    }
    {
        static const size_t sizes[] = {
            512, 4096, 65536, 262144, 524288, 1 << 20, (1 << 20) + 4096, (2 << 20) - 4096
        };
        for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
            packing(sizes[i], (int)((24 << 20) / sizes[i] < 4000 ? (24 << 20) / sizes[i] : 4000));
    }
    {
        static const size_t sizes[] = { 2 << 20, (2 << 20) + 1,  3 << 20,
                                        5 << 20, (33 << 20) + 1, (100 << 20) + 1 };
        for (i = 0; i < (int)(sizeof sizes / sizeof sizes[0]); i++)
            single(sizes[i]);
    }
    {
        static const size_t widths[] = { 1,   4,    100,  128,  256,  500,  511,  512,
                                         513, 1000, 1024, 2048, 4096, 4097, 10000 };
        static const unsigned elems[] = { 4, 8, 16 };
        int e;
        for (e = 0; e < 3; e++)
            for (i = 0; i < (int)(sizeof widths / sizeof widths[0]); i++)
                pitch(widths[i], 16, elems[e]);
        pitch(1000, 10000, 4);
        pitch(3000, 3000, 16);
    }
    array2d(1, 1, CU_AD_FORMAT_UNSIGNED_INT8, 1, "u8");
    array2d(100, 100, CU_AD_FORMAT_UNSIGNED_INT8, 1, "u8");
    array2d(1000, 1000, CU_AD_FORMAT_UNSIGNED_INT8, 1, "u8");
    array2d(1000, 1000, CU_AD_FORMAT_FLOAT, 4, "f32");
    array2d(4096, 4096, CU_AD_FORMAT_FLOAT, 4, "f32");
    array2d(4096, 4096, CU_AD_FORMAT_HALF, 2, "f16");
    array2d(3000, 0, CU_AD_FORMAT_FLOAT, 1, "f32");
    array2d(1 << 20, 0, CU_AD_FORMAT_FLOAT, 4, "f32");
    array2d(1001, 999, CU_AD_FORMAT_FLOAT, 2, "f32");
    array3d(256, 256, 256, CU_AD_FORMAT_FLOAT, 1, "f32");
    array3d(100, 100, 100, CU_AD_FORMAT_UNSIGNED_INT8, 4, "u8");
    array3d(1000, 1000, 10, CU_AD_FORMAT_HALF, 1, "f16");
    {
        size_t before = cu_free();
        CUdeviceptr p;
        if (cuMemAllocManaged(&p, 64 << 20, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS) {
            printf("cuMemAllocManaged(64 MiB) took %lld KiB before any touch\n",
                   (long long)((long long)before - (long long)cu_free()) / 1024);
            cuMemFree(p);
        }
    }
    pools(dev);
    procaddr();
    capture(ctx);
    note("facts recorded");
    return check_done() ? 0 : 0;
}
