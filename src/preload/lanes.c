/*
 * The in-process lanes API (include/gpuslice/gpuslice.h): weighted green
 * contexts of one GPU, one thread each, released together. The partitions
 * are planned as gpuslice procs plans them (common/smplan.c) and made as
 * GPUSLICE_SMS makes them (sm.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/smplan.h"
#include "gpuslice/gpuslice.h"
#include "preload/preload.h"

/* The start: every lane ready with its context current, then all go (or none). */
struct start {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int ready, go, abort;
};

struct lane_run {
    int index;
    struct gpuslice_lane *info;
    CUgreenCtx green;
    CUcontext ctx;
    gpuslice_lane_fn fn;
    void *arg;
    struct start *start;
    CUresult set; /* making the context current */
    CUdevice dev;
    unsigned sms;
};

/* The lanes of the run in progress (gs__lanes_live of them), for cuDeviceGetAttribute. */
static struct lane_run runs[GPUSLICE_LANES_MAX];
int gs__lanes_live;

static __thread __attribute__((tls_model("initial-exec"))) CUcontext lane_ctx;

static int errno_of(CUresult r)
{
    switch (r) {
    case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_INVALID_VALUE: /* a split the GPU cannot make */
    case CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION:
        return -ENOTSUP;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
        return -ENODEV;
    default:
        return -EIO;
    }
}

/* The sizes and counts of the device's two splits (minCount 1). */
static void geometry(CUdevResource *all, struct sm_geom *g)
{
    CUdevResource one, rest;
    unsigned n;

    memset(g, 0, sizeof(*g));
    g->total = all->sm.smCount;
    n = 1;
    if (gs__real.cuDevSmResourceSplitByCount(&one, &n, all, &rest, 0, 1) == CUDA_SUCCESS &&
        n == 1 &&
        gs__real.cuDevSmResourceSplitByCount(NULL, &g->ncoarse, all, NULL, 0, 1) == CUDA_SUCCESS)
        g->coarse = one.sm.smCount;
    n = 1;
    if (gs__real.cuDevSmResourceSplitByCount(&one, &n, all, &rest,
                                             CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                             1) == CUDA_SUCCESS &&
        n == 1 &&
        gs__real.cuDevSmResourceSplitByCount(NULL, &g->nfine, all, NULL,
                                             CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                             1) == CUDA_SUCCESS)
        g->fine = one.sm.smCount;
}

static void *lane_main(void *p)
{
    struct lane_run *l = p;

    struct start *st = l->start;
    int go;

    l->set = gs__real.cuCtxSetCurrent(l->ctx);
    if (l->set == CUDA_SUCCESS)
        lane_ctx = l->ctx;
    pthread_mutex_lock(&st->mu);
    st->ready++;
    pthread_cond_broadcast(&st->cv);
    while (!st->go && !st->abort)
        pthread_cond_wait(&st->cv, &st->mu);
    go = st->go;
    pthread_mutex_unlock(&st->mu);
    if (!go || l->set != CUDA_SUCCESS) {
        lane_ctx = NULL;
        return NULL;
    }
    l->info->result = l->fn(l->index, l->info, l->arg);
    l->info->cuda_error = (int)gs__real.cuCtxSynchronize();
    lane_ctx = NULL;
    gs__real.cuCtxSetCurrent(NULL);
    return NULL;
}

GS_EXPORT void *gpuslice_lane_context(void)
{
    return (void *)lane_ctx;
}

int gs__lanes_sms(CUdevice dev, int *count)
{
    int i, n = __atomic_load_n(&gs__lanes_live, __ATOMIC_ACQUIRE);
    CUcontext c = NULL;

    if (n == 0 || !gs__real.cuCtxGetCurrent || gs__real.cuCtxGetCurrent(&c) != CUDA_SUCCESS ||
        c == NULL)
        return 0;
    for (i = 0; i < n; i++) {
        unsigned sms = __atomic_load_n(&runs[i].sms, __ATOMIC_ACQUIRE);
        if (__atomic_load_n(&runs[i].ctx, __ATOMIC_ACQUIRE) == c && runs[i].dev == dev && sms > 0) {
            *count = (int)sms;
            return 1;
        }
    }
    return 0;
}

GS_EXPORT int gpuslice_lanes_run(int device, int n, const double *weights, gpuslice_lane_fn fn,
                                 void *const *args, struct gpuslice_lane *lanes, char *err,
                                 size_t errlen)
{
    static pthread_mutex_t one_at_a_time = PTHREAD_MUTEX_INITIALIZER;
    struct sm_lane plan[GPUSLICE_LANES_MAX];
    pthread_t th[GPUSLICE_LANES_MAX];
    struct start start = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0 };
    struct sm_geom g;
    CUdevResource all;
    CUcontext primary;
    CUdevice dev;
    CUresult r;
    struct sm_split split;
    char msg[512];
    int i, made = 0, started = 0, rc = 0, count = 0;

    if (n < 1 || n > GPUSLICE_LANES_MAX || !weights || !fn || !lanes) {
        gs_set_error(err, errlen, "gpuslice_lanes_run: %s",
                     n < 1 || n > GPUSLICE_LANES_MAX ? "n must be 1 to 64"
                     : !fn                           ? "no lane function"
                                                     : "weights and lanes are needed");
        return -EINVAL;
    }
    for (i = 0; i < n; i++) {
        if (!(weights[i] > 0) || !isfinite(weights[i])) {
            gs_set_error(err, errlen, "gpuslice_lanes_run: weight %d (%g) is not a positive number",
                         i, weights[i]);
            return -EINVAL;
        }
    }
    if (gs__load_cuda() < 0 || !gs__real.cuInit) {
        gs_set_error(err, errlen, "gpuslice_lanes_run: no NVIDIA driver found (libcuda.so.1)");
        return -ENODEV;
    }
    if ((r = gs__real.cuInit(0)) != CUDA_SUCCESS ||
        (r = gs__real.cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
        gs_set_error(err, errlen,
                     "gpuslice_lanes_run: the CUDA driver did not initialise (error %d)", (int)r);
        return errno_of(r);
    }
    if (device < 0 || device >= count || gs__real.cuDeviceGet(&dev, device) != CUDA_SUCCESS) {
        gs_set_error(err, errlen, "gpuslice_lanes_run: there is no GPU %d (%d visible)", device,
                     count);
        return -ENODEV;
    }
    pthread_mutex_lock(&one_at_a_time);
    /* The primary context first, as the driver advises; the partitions share it. */
    if ((r = gs__real.cuDevicePrimaryCtxRetain(&primary, dev)) != CUDA_SUCCESS) {
        pthread_mutex_unlock(&one_at_a_time);
        gs_set_error(err, errlen, "gpuslice_lanes_run: GPU %d: no context (error %d)", device,
                     (int)r);
        return errno_of(r);
    }
    if ((r = gs__sm_device(dev, &all, msg, sizeof(msg))) != CUDA_SUCCESS) {
        gs_set_error(err, errlen, "gpuslice_lanes_run: %s", msg);
        rc = errno_of(r);
        goto out;
    }
    geometry(&all, &g);
    for (i = 0; i < n; i++)
        plan[i].share = weights[i];
    if (smplan(&g, plan, n, &split, msg, sizeof(msg)) < 0) {
        gs_set_error(err, errlen, "gpuslice_lanes_run: GPU %d: %s", device, msg);
        rc = -ENOTSUP;
        goto out;
    }
    for (made = 0; made < n; made++) {
        struct lane_run *l = &runs[made];
        unsigned sms = 0, used;
        memset(l, 0, sizeof(*l));
        if ((r = gs__sm_build(dev, &all, plan[made].count, plan[made].first, split.fine, &l->green,
                              &l->ctx, &sms, &used, msg, sizeof(msg))) != CUDA_SUCCESS) {
            gs_set_error(err, errlen, "gpuslice_lanes_run: lane %d: %s", made, msg);
            rc = errno_of(r);
            goto out;
        }
        lanes[made].weight = weights[made];
        lanes[made].sm_count = sms;
        lanes[made].first_sm = plan[made].first;
        lanes[made].result = 0;
        lanes[made].cuda_error = 0;
        l->index = made;
        l->dev = dev;
        l->sms = sms;
        l->info = &lanes[made];
        l->fn = fn;
        l->arg = args ? args[made] : NULL;
    }
    __atomic_store_n(&gs__lanes_live, n, __ATOMIC_RELEASE);
    for (started = 0; started < n; started++) {
        runs[started].start = &start;
        if (pthread_create(&th[started], NULL, lane_main, &runs[started]) != 0)
            break;
    }
    pthread_mutex_lock(&start.mu);
    if (started < n) {
        start.abort = 1; /* nobody runs */
    } else {
        while (start.ready < n)
            pthread_cond_wait(&start.cv, &start.mu);
        for (i = 0; i < n && runs[i].set == CUDA_SUCCESS; i++)
            ;
        if (i < n)
            start.abort = 1; /* a lane without its partition current: none runs */
        else
            start.go = 1; /* all together */
    }
    pthread_cond_broadcast(&start.cv);
    pthread_mutex_unlock(&start.mu);
    for (i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    if (started < n) {
        gs_set_error(err, errlen, "gpuslice_lanes_run: cannot start lane %d's thread; no lane ran",
                     started);
        rc = -EAGAIN;
        goto out;
    }
    for (i = 0; i < n && rc == 0; i++) {
        if (runs[i].set != CUDA_SUCCESS) {
            gs_set_error(err, errlen,
                         "gpuslice_lanes_run: lane %d: its partition could not be made "
                         "current (error %d); no lane ran",
                         i, (int)runs[i].set);
            rc = -EIO;
        }
    }
out:
    __atomic_store_n(&gs__lanes_live, 0, __ATOMIC_RELEASE);
    /* A reader that saw the lanes live matches no context of a destroyed (or reused) lane. */
    for (i = 0; i < made; i++) {
        __atomic_store_n(&runs[i].sms, 0, __ATOMIC_RELEASE);
        __atomic_store_n(&runs[i].ctx, NULL, __ATOMIC_RELEASE);
    }
    for (i = 0; i < made; i++)
        if (gs__real.cuGreenCtxDestroy)
            gs__real.cuGreenCtxDestroy(runs[i].green);
    gs__real.cuDevicePrimaryCtxRelease_v2(dev);
    pthread_mutex_unlock(&one_at_a_time);
    return rc;
}
