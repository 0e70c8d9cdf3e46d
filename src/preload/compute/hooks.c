/*
 * The entry points and what they need: kernel, cooperative and graph launches
 * (and their _ptsz forms) through enter/leave, synchronisation settling the
 * accounts, streams and contexts that go, stream capture.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/futex.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include "common/board.h"
#include "common/tenant.h"
#include "preload/preload.h"
#include "preload/compute/compute_internal.h"

/*
 * A governed launch: enter() admits it (waiting if it must), the driver runs
 * it, leave() follows it. routable: a kernel launch that may move to the
 * yield partition (route.c), where rargs calls it with the stream a.route.
 */
#define GS_LAUNCH_BODY(sym, stream, ptds, graph, routable_, args, rargs)                           \
    do {                                                                                           \
        struct admit a;                                                                            \
        CUresult r;                                                                                \
        int saved;                                                                                 \
        GS_PASS(sym, args);                                                                        \
        GS_SM_ENSURE();                                                                            \
        if (!armed())                                                                              \
            return gs__real.sym args;                                                              \
        saved = errno;                                                                             \
        a.routable = (routable_);                                                                  \
        if (!enter(stream, ptds, graph, &a)) {                                                     \
            errno = saved;                                                                         \
            return gs__real.sym args;                                                              \
        }                                                                                          \
        if (a.route && route_before(&a)) {                                                         \
            errno = saved;                                                                         \
            r = gs__real.sym rargs;                                                                \
            /* Refused on the partition: where it was asked. */                                    \
            if (r != CUDA_SUCCESS)                                                                 \
                r = gs__real.sym args;                                                             \
            else                                                                                   \
                route_after(&a);                                                                   \
        } else {                                                                                   \
            errno = saved;                                                                         \
            r = gs__real.sym args;                                                                 \
        }                                                                                          \
        saved = errno;                                                                             \
        leave(&a, r);                                                                              \
        errno = saved;                                                                             \
        return r;                                                                                  \
    } while (0)

#define LAUNCH_PARAMS                                                                              \
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,             \
        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                    \
        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams
#define LAUNCH_ARGS                                                                                \
    f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,     \
        kernelParams
#define ROUTED_ARGS                                                                                \
    f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, a.route,     \
        kernelParams

/* cuLaunchKernelEx's configuration, on the yield partition's stream. */
static const CUlaunchConfig *routed_config(const CUlaunchConfig *config, CUlaunchConfig *copy,
                                           CUstream h)
{
    *copy = *config;
    copy->hStream = h;
    return copy;
}

/*
 * Whether a cuLaunchKernelEx may move to the yield partition: 0 for a cooperative launch
 * sized for the whole device, else the blocks in one of its thread-block clusters (1 with
 * none; route_stream() moves a cluster only where the partition's co-scheduled groups hold
 * it).
 */
static int routable_ex(const CUlaunchConfig *config)
{
    unsigned i, blocks = 1;

    if (config == NULL)
        return 0;
    for (i = 0; i < config->numAttrs && config->attrs; i++) {
        const CUlaunchAttribute *at = &config->attrs[i];

        if (at->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && at->value.cooperative)
            return 0;
        if (at->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            uint64_t n =
                (uint64_t)at->value.clusterDim.x * at->value.clusterDim.y * at->value.clusterDim.z;

            blocks = n > 1024 ? 1024 : n ? (unsigned)n : 1;
        }
    }
    return (int)blocks;
}

GS_EXPORT CUresult cuLaunchKernel(LAUNCH_PARAMS, void **extra)
{
    GS_LAUNCH_BODY(cuLaunchKernel, hStream, 0, NULL, 1, (LAUNCH_ARGS, extra), (ROUTED_ARGS, extra));
}

GS_EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_PARAMS, void **extra)
{
    GS_LAUNCH_BODY(cuLaunchKernel_ptsz, hStream, 1, NULL, 1, (LAUNCH_ARGS, extra),
                   (ROUTED_ARGS, extra));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_PARAMS)
{
    GS_LAUNCH_BODY(cuLaunchCooperativeKernel, hStream, 0, NULL, 0, (LAUNCH_ARGS), (LAUNCH_ARGS));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(LAUNCH_PARAMS)
{
    GS_LAUNCH_BODY(cuLaunchCooperativeKernel_ptsz, hStream, 1, NULL, 0, (LAUNCH_ARGS),
                   (LAUNCH_ARGS));
}

GS_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                                    void **extra)
{
    CUlaunchConfig copy;
    GS_LAUNCH_BODY(cuLaunchKernelEx, config ? config->hStream : NULL, 0, NULL, routable_ex(config),
                   (config, f, kernelParams, extra),
                   (routed_config(config, &copy, a.route), f, kernelParams, extra));
}

GS_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                         void **kernelParams, void **extra)
{
    CUlaunchConfig copy;
    GS_LAUNCH_BODY(cuLaunchKernelEx_ptsz, config ? config->hStream : NULL, 1, NULL,
                   routable_ex(config), (config, f, kernelParams, extra),
                   (routed_config(config, &copy, a.route), f, kernelParams, extra));
}

GS_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_LAUNCH_BODY(cuGraphLaunch, hStream, 0, hGraphExec, 0, (hGraphExec, hStream),
                   (hGraphExec, hStream));
}

GS_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_LAUNCH_BODY(cuGraphLaunch_ptsz, hStream, 1, hGraphExec, 0, (hGraphExec, hStream),
                   (hGraphExec, hStream));
}

/*
 * A synchronisation returned: everything before it in ctx (or in one stream
 * of it) is done. Settling that now, rather than at the next poll, keeps
 * the time charged to the work that really ran.
 */
static void settle(CUcontext ctx, int one_stream, enum stream_kind kind, CUstream h, uint64_t since)
{
    uint64_t now = now_ns();
    int i;

    pthread_mutex_lock(&mu);
    stats.settles++;
    for (i = 0; i < MAX_STREAMS; i++) {
        struct gstream *s = &streams[i];
        struct gdev *d;
        int j;

        if (s->used != 1 || (ctx && s->ctx != ctx))
            continue;
        if (one_stream && (s->kind != kind || s->h != h ||
                           (kind == STREAM_PER_THREAD && s->tid != (pid_t)syscall(SYS_gettid))))
            continue;
        d = &gdevs[s->ord];
        /* Only what was submitted before the synchronisation began is known done. */
        for (j = nmarks - 1; j >= 0; j--)
            if (marks[j].stream == i && marks[j].recorded_ns < since)
                mark_done(j, now);
        if (s->unmarked && !__atomic_load_n(&s->launching, __ATOMIC_ACQUIRE) &&
            s->last_launch_ns < since)
            drop_unmarked(s);
        if (d->state > 0 && !dev_busy(d) && d->busy_since) {
            charge(d, now);
            d->busy_since = 0;
            d->idle_since = now;
        }
    }
    pthread_cond_broadcast(&launch_cv);
    pthread_mutex_unlock(&mu);
}

static int settling(void)
{
    return governing() && __atomic_load_n(&captures, __ATOMIC_RELAXED) == 0;
}

GS_EXPORT CUresult cuCtxSynchronize(void)
{
    CUcontext ctx = NULL;
    uint64_t t0 = now_ns();
    CUresult r;

    GS_PASS(cuCtxSynchronize, ());
    r = gs__real.cuCtxSynchronize();
    if (r == CUDA_SUCCESS && settling() && gs__real.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
        settle(ctx, 0, STREAM_EXPLICIT, NULL, t0);
    return r;
}

GS_EXPORT CUresult cuCtxSynchronize_v2(CUcontext ctx)
{
    uint64_t t0 = now_ns();
    CUresult r;

    GS_PASS(cuCtxSynchronize_v2, (ctx));
    r = gs__real.cuCtxSynchronize_v2(ctx);
    if (r == CUDA_SUCCESS && settling() &&
        (ctx || (gs__real.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)))
        settle(ctx, 0, STREAM_EXPLICIT, NULL, t0);
    return r;
}

#define GS_STREAM_SYNC_BODY(sym, ptds)                                                             \
    do {                                                                                           \
        enum stream_kind kind;                                                                     \
        CUcontext ctx = NULL;                                                                      \
        uint64_t t0 = now_ns();                                                                    \
        CUresult r;                                                                                \
        GS_PASS(sym, (hStream));                                                                   \
        r = gs__real.sym(hStream);                                                                 \
        if (r == CUDA_SUCCESS && settling() && stream_key(hStream, ptds, &kind, &ctx) == 0)        \
            settle(ctx, 1, kind, kind == STREAM_EXPLICIT ? hStream : NULL, t0);                    \
        return r;                                                                                  \
    } while (0)

GS_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    GS_STREAM_SYNC_BODY(cuStreamSynchronize, 0);
}

GS_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    GS_STREAM_SYNC_BODY(cuStreamSynchronize_ptsz, 1);
}

/*
 * Forgets stream s: its unmarked work as done, its markers as of no stream,
 * its slot a tombstone that lookups probe past. Its launching count stays: a
 * launch still in the driver decrements it without the lock. With mu held.
 */
static void stream_drop(struct gstream *s)
{
    int j;

    drop_unmarked(s);
    route_drop(s);
    for (j = 0; j < nmarks; j++)
        if (marks[j].stream == (int)(s - streams))
            marks[j].stream = -1;
    s->used = 2;
    s->h = NULL;
    s->ctx = NULL;
    if (last_stream == s)
        last_stream = NULL;
    s->tid = 0;
    s->cost = 0;
}

/* A stream going away: its unmarked work can no longer be followed. */
static void stream_gone(CUstream h)
{
    int i;

    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD)
        return;
    pthread_mutex_lock(&mu);
    for (i = 0; i < MAX_STREAMS; i++) {
        struct gstream *s = &streams[i];
        if (s->used == 1 && s->kind == STREAM_EXPLICIT && s->h == h)
            stream_drop(s);
    }
    pthread_mutex_unlock(&mu);
}

#define GS_STREAM_DESTROY_BODY(sym)                                                                \
    do {                                                                                           \
        GS_PASS(sym, (hStream));                                                                   \
        if (governing())                                                                           \
            stream_gone(hStream);                                                                  \
        return gs__real.sym(hStream);                                                              \
    } while (0)

GS_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
    GS_STREAM_DESTROY_BODY(cuStreamDestroy);
}

GS_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    GS_STREAM_DESTROY_BODY(cuStreamDestroy_v2);
}

void gs__compute_ctx_gone(CUcontext ctx)
{
    int i;

    if (!governing() || ctx == NULL)
        return;
    pthread_mutex_lock(&mu);
    for (i = nmarks - 1; i >= 0; i--) {
        if (marks[i].ctx != ctx)
            continue;
        gdevs[marks[i].ord].outstanding--;
        gdevs[marks[i].ord].queued -= marks[i].est;
        marks[i] = marks[--nmarks];
    }
    for (i = nevents - 1; i >= 0; i--)
        if (events[i].ctx == ctx)
            events[i] = events[--nevents]; /* the context takes its events with it */
    for (i = 0; i < MAX_STREAMS; i++) {
        struct gstream *s = &streams[i];
        if (s->used == 1 && s->ctx == ctx)
            stream_drop(s);
    }
    /*
     * A yield partition made from it goes with it (it holds a reference to the primary
     * context, which would otherwise outlive the program's last release): made again at the
     * next need.
     */
    for (i = 0; i < MAX_ORD; i++)
        if (gdevs[i].route > 0 && gdevs[i].primary == ctx) {
            if (gs__real.cuGreenCtxDestroy)
                gs__real.cuGreenCtxDestroy(gdevs[i].green);
            gdevs[i].route = 0;
            gdevs[i].green = NULL;
        }
    pthread_cond_broadcast(&launch_cv);
    pthread_mutex_unlock(&mu);
}

/* The key of a capture: the handle, and for default streams the thread. */
static void capture_key(CUstream h, int ptds, CUstream *key, pid_t *tid)
{
    *key = h;
    *tid = 0;
    if (h == NULL || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        *key = h == NULL ? (ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY) : h;
        *tid = (pid_t)syscall(SYS_gettid);
    }
}

static void capture_begun(CUstream h, int ptds)
{
    CUstream key;
    pid_t tid;
    int i;

    capture_key(h, ptds, &key, &tid);
    pthread_mutex_lock(&mu);
    for (i = 0; i < MAX_CAPTURES; i++) {
        if (capturing[i].h == NULL) {
            capturing[i].h = key;
            capturing[i].tid = tid;
            break;
        }
    }
    /* Counted even past MAX_CAPTURES: the governor stays out. Atomic: launches read it unlocked. */
    __atomic_add_fetch(&captures, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&mu);
}

/* Ends the capture on h if we saw it begin; over = 0 if it is in fact still going on. */
static void capture_ended(CUstream h, int ptds, int over)
{
    CUstream key;
    pid_t tid;
    int i;

    if (!over)
        return;
    capture_key(h, ptds, &key, &tid);
    pthread_mutex_lock(&mu);
    for (i = 0; i < MAX_CAPTURES; i++) {
        if (capturing[i].h == key && capturing[i].tid == tid) {
            capturing[i].h = NULL;
            if (captures > 0)
                __atomic_sub_fetch(&captures, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    if (i == MAX_CAPTURES && captures > MAX_CAPTURES)
        __atomic_sub_fetch(&captures, 1, __ATOMIC_RELEASE); /* one beyond the table */
    pthread_mutex_unlock(&mu);
}

#define GS_BEGIN_CAPTURE_BODY(sym, ptds, args)                                                     \
    do {                                                                                           \
        CUresult r;                                                                                \
        GS_PASS(sym, args);                                                                        \
        capture_begun(hStream, ptds); /* before: the governor stays out */                         \
        if ((r = gs__real.sym args) != CUDA_SUCCESS)                                               \
            capture_ended(hStream, ptds, 1);                                                       \
        return r;                                                                                  \
    } while (0)

GS_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    GS_BEGIN_CAPTURE_BODY(cuStreamBeginCapture, 0, (hStream));
}

GS_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    GS_BEGIN_CAPTURE_BODY(cuStreamBeginCapture_ptsz, 1, (hStream));
}

GS_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    GS_BEGIN_CAPTURE_BODY(cuStreamBeginCapture_v2, 0, (hStream, mode));
}

GS_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    GS_BEGIN_CAPTURE_BODY(cuStreamBeginCapture_v2_ptsz, 1, (hStream, mode));
}

#define GS_END_CAPTURE_BODY(sym, ptds, is_capturing)                                               \
    do {                                                                                           \
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;                                  \
        CUresult r;                                                                                \
        GS_PASS(sym, (hStream, phGraph));                                                          \
        r = gs__real.sym(hStream, phGraph);                                                        \
        /* After a failure the capture may go on: ask, on this same thread. */                     \
        capture_ended(hStream, ptds,                                                               \
                      r == CUDA_SUCCESS || !gs__real.is_capturing ||                               \
                          gs__real.is_capturing(hStream, &st) != CUDA_SUCCESS ||                   \
                          st == CU_STREAM_CAPTURE_STATUS_NONE);                                    \
        return r;                                                                                  \
    } while (0)

GS_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    GS_END_CAPTURE_BODY(cuStreamEndCapture, 0, cuStreamIsCapturing);
}

GS_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    GS_END_CAPTURE_BODY(cuStreamEndCapture_ptsz, 1, cuStreamIsCapturing_ptsz);
}
