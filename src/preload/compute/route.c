/*
 * Yielding SMs to a higher class: while a tenant of a higher priority class
 * is active on the device (the board says so, admission.c), a lower-class
 * process that is an MPS client moves its kernel launches onto a green
 * context of about half the device's SMs, so the higher class finds the
 * other half free; when the higher class idles, launches go to the whole
 * device again. Each program stream gets a twin stream in that green
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
              known ? "moves to half the SMs while a higher one is active"
                    : "only keeps its queue short while a higher one is active");
    return known;
}

/* The device's yield partition, made once; 1 ready, -1 cannot. With mu held. */
static int route_ready(struct gdev *d, int ord)
{
    char msg[512];
    CUdevResource all;
    CUcontext gctx;
    CUdevice dev;
    unsigned sms = 0, group = 0;

    if (d->route)
        return d->route;
    d->route = -1;
    if (gs__sm_on || !mps_client() || !gs__real.cuGreenCtxStreamCreate ||
        !gs__real.cuStreamWaitEvent || gs__real.cuDeviceGet(&dev, ord) != CUDA_SUCCESS ||
        gs__real.cuDevicePrimaryCtxRetain(&d->primary, dev) != CUDA_SUCCESS)
        return -1;
    gs__real.cuDevicePrimaryCtxRelease_v2 ? gs__real.cuDevicePrimaryCtxRelease_v2(dev)
                                          : gs__real.cuDevicePrimaryCtxRelease(dev);
    if (gs__sm_device(dev, &all, msg, sizeof(msg)) != CUDA_SUCCESS ||
        gs__sm_build(dev, &all, all.sm.smCount / 2 / 2 * 2, 0, 1, &d->green, &gctx, &sms, &group,
                     msg, sizeof(msg)) != CUDA_SUCCESS) {
        gs__log("device %d: no partition to yield SMs on (%s); this process keeps only its "
                "queue short while a higher class is active",
                ord, msg);
        return -1;
    }
    gs__debug("compute: device %d: yields to a higher class on %u of %u SMs", ord, sms,
              all.sm.smCount);
    d->route = 1;
    return 1;
}

int route_stream(struct gdev *d, struct gstream *s, struct admit *a)
{
    CUcontext ctx = s->ctx;

    if (route_ready(d, s->ord) < 0)
        return 0;
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
