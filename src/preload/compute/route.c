/*
 * Yielding SMs to a higher class: while a tenant of a higher priority class
 * is active on the device (the board says so, admission.c), a lower-class
 * process that is an MPS client moves its kernel launches onto a green
 * context of about three quarters of the device's SMs (GPUSLICE_YIELD_SMS),
 * so the higher class finds the rest free; when the higher class idles,
 * launches go to the whole device again. Each program stream gets a twin stream in that green
 * context, and the order between them is kept by events: the twin waits for
 * what the program queued before the launch, and the program's stream waits
 * for the twin's kernel before anything queued after it. Measured on an H200
 * (bench/green_route.cu, driver 580): a kernel of a module loaded in the
 * primary context, launched onto a green context's stream with the primary
 * current, runs on that partition only; 200 hops between the two streams kept
 * their order; a moved launch costs the host 1.4 us more than a plain one.
 * Without MPS the GPU time-slices whole contexts, so a partition would only
 * slow the lower class down: nothing moves then.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/env.h"
#include "common/parse.h"
#include "common/mps_pipe.h"
#include "preload/preload.h"
#include "preload/compute/compute_internal.h"

/* Whether this process is an MPS client: a control daemon's endpoint is where the driver looks. */
static int mps_client(void)
{
    static int known = -1;
    const char *dir;

    if (known >= 0)
        return known;
    dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
    if (!dir || !*dir)
        dir = "/tmp/nvidia-mps";
    known = gs_mps_control_at(dir);
    gs__debug("compute: %s MPS client (pipe directory %s): a lower class %s",
              known ? "an" : "not an", dir,
              known ? "moves to fewer SMs while a higher one is active"
                    : "only keeps its queue short while a higher one is active");
    return known;
}

/*
 * How many of total SMs a lower class keeps while a higher one is active: GPUSLICE_YIELD_SMS,
 * else three quarters (route_ready() rounds it down to whole groups: 96 of the H200's 132).
 * Measured on the H200 (docs/results.md, 2026-12-03), a latency job of small GEMMs beside
 * 8192^3 GEMMs under MPS: with 64 SMs kept the background kept 62 % of its solo rate, with 96
 * it kept 80 %, and the latency job's p99 was the same within the noise (1.13x and 1.11x of
 * solo); a latency tenant whose kernels need more of the device sets fewer.
 */
static unsigned yield_sms(unsigned total)
{
    uint32_t n;

    /* (Its form was checked at start-up, gs_config_sched(): a bad one fails CUDA there.) */
    if (gs_parse_yield_sms(getenv(GS_ENV_YIELD_SMS), &n) < 0)
        return total * 3 / 4;
    if (n >= total) {
        gs__log("%s=%u: GPU has %u SMs; a lower class keeps %u while a higher one is active",
                GS_ENV_YIELD_SMS, n, total, total - 2);
        return total - 2;
    }
    return n;
}

/* The device's yield partition, made once; 1 ready, -1 cannot. With mu held. */
static int route_ready(struct gdev *d, int ord)
{
    char msg[512];
    CUdevResource all;
    CUcontext gctx;
    CUdevice dev;
    unsigned sms = 0, group = 0, keep, coarse, ngroups = 0;

    if (d->route)
        return d->route;
    d->route = -1;
    if (gs__sm_on || !mps_client() || !gs__real.cuGreenCtxStreamCreate ||
        !gs__real.cuStreamWaitEvent || gs__real.cuDeviceGet(&dev, ord) != CUDA_SUCCESS ||
        gs__real.cuDevicePrimaryCtxRetain(&d->primary, dev) != CUDA_SUCCESS)
        return -1;
    gs__real.cuDevicePrimaryCtxRelease_v2 ? gs__real.cuDevicePrimaryCtxRelease_v2(dev)
                                          : gs__real.cuDevicePrimaryCtxRelease(dev);
    if (gs__sm_device(dev, &all, msg, sizeof(msg)) != CUDA_SUCCESS)
        goto none;
    /*
     * The SMs kept, in whole co-scheduled groups where the device has them, so that a
     * thread-block cluster of up to a group's SMs runs there as on the whole device (the
     * H200: groups of 8 SMs); else in the 2-SM split.
     * Measured on the H200 (bench/green_cluster.cu): a cluster of up to the group's size runs
     * on such a partition, a larger one is refused at launch (cudaErrorInvalidClusterSize),
     * never hangs; a launch refused there runs where it was asked (hooks.c).
     */
    keep = yield_sms(all.sm.smCount);
    coarse = gs__sm_group(&all, &ngroups);
    /* (At most what the groups cover: the H200's 15 groups of 8 leave 12 SMs over.) */
    if (coarse >= 2 && keep > ngroups * coarse)
        keep = ngroups * coarse;
    if (coarse >= 2 && keep >= coarse)
        keep = keep / coarse * coarse;
    else
        keep = keep < 2 ? 2 : keep / 2 * 2;
    if (gs__sm_build(dev, &all, keep, 0, 0, &d->green, &gctx, &sms, &group, msg, sizeof(msg)) !=
        CUDA_SUCCESS)
        goto none;
    d->route_cluster = group >= 2 ? group : 1;
    gs__debug("compute: device %d: yields to a higher class on %u of %u SMs (thread-block "
              "clusters of up to %u blocks move there)",
              ord, sms, all.sm.smCount, d->route_cluster);
    d->route = 1;
    return 1;
none:
    gs__log("device %d: no partition to yield SMs on (%s); this process keeps only its queue "
            "short while a higher class is active",
            ord, msg);
    return -1;
}

int route_stream(struct gdev *d, struct gstream *s, struct admit *a)
{
    CUcontext ctx = s->ctx;

    if (route_ready(d, s->ord) < 0)
        return 0;
    if ((unsigned)a->routable > d->route_cluster) {
        __atomic_add_fetch(&stats.cluster_stays, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (!s->shadow) {
        if (s->kind == STREAM_EXPLICIT &&
            (!gs__real.cuStreamGetCtx || gs__real.cuStreamGetCtx(s->h, &ctx) != CUDA_SUCCESS))
            return 0;
        /* Only the primary context's streams: the partition shares its memory and modules. */
        if (ctx != d->primary)
            return 0;
        if (gs__real.cuGreenCtxStreamCreate(&s->shadow, d->green, CU_STREAM_NON_BLOCKING, 0) !=
            CUDA_SUCCESS) {
            s->shadow = NULL;
            return 0;
        }
        if (gs__real.cuEventCreate(&s->ev_in, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS ||
            gs__real.cuEventCreate(&s->ev_out, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS) {
            route_drop(s);
            return 0;
        }
    }
    a->route = s->shadow;
    a->orig = s->kind == STREAM_EXPLICIT ? s->h : NULL;
    a->ev_in = s->ev_in;
    a->ev_out = s->ev_out;
    return 1;
}

int route_before(struct admit *a)
{
    if (gs__real.cuEventRecord(a->ev_in, a->orig) != CUDA_SUCCESS ||
        gs__real.cuStreamWaitEvent(a->route, a->ev_in, 0) != CUDA_SUCCESS) {
        a->route = NULL;
        return 0;
    }
    return 1;
}

void route_after(struct admit *a)
{
    /* The order cannot be kept by events: keep it by waiting for the moved kernel. */
    if (gs__real.cuEventRecord(a->ev_out, a->route) != CUDA_SUCCESS ||
        gs__real.cuStreamWaitEvent(a->orig, a->ev_out, 0) != CUDA_SUCCESS)
        gs__real.cuStreamSynchronize(a->route);
    __atomic_add_fetch(&stats.routed, 1, __ATOMIC_RELAXED);
    if (a->routable > 1)
        __atomic_add_fetch(&stats.routed_clusters, 1, __ATOMIC_RELAXED);
}

void route_drop(struct gstream *s)
{
    if (s->ev_in)
        gs__real.cuEventDestroy_v2 ? gs__real.cuEventDestroy_v2(s->ev_in)
                                   : gs__real.cuEventDestroy(s->ev_in);
    if (s->ev_out)
        gs__real.cuEventDestroy_v2 ? gs__real.cuEventDestroy_v2(s->ev_out)
                                   : gs__real.cuEventDestroy(s->ev_out);
    if (s->shadow)
        gs__real.cuStreamDestroy_v2 ? gs__real.cuStreamDestroy_v2(s->shadow)
                                    : gs__real.cuStreamDestroy(s->shadow);
    s->shadow = NULL;
    s->ev_in = s->ev_out = NULL;
}
