/* The devices, streams and events the governor follows, and the markers behind launches. */
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
#include "common/proc.h"
#include "common/tenant.h"
#include "preload/preload.h"
#include "preload/compute/compute_internal.h"

/* With mu held. */
struct gdev *gdev_get(int ord)
{
    struct gdev *d;
    int e, r;

    if (ord < 0 || ord >= MAX_ORD)
        return NULL;
    d = &gdevs[ord];
    if (d->state)
        return d->state > 0 ? d : NULL;
    pthread_mutex_unlock(&mu);
    /*
     * The tenant's lock not had in time (a process of the tenant stopped inside it): the
     * launch waits for it rather than run ungoverned, as an allocation is refused rather
     * than admitted uncharged. Each try waits out the lock's own bound.
     */
    while ((e = gs__device_entry(ord)) == GS_DEVICE_BUSY && !is_stopping())
        ;
    pthread_mutex_lock(&mu);
    if (d->state)
        return d->state > 0 ? d : NULL;
    if (e < 0)
        return NULL; /* not initialised yet: try again on the next launch */
    d->entry = e;
    {
        char note[600];

        /*
         * A tenant of the daemon's takes turns with the daemon's other tenants, of every user,
         * on its board of the GPU; where there is none (no daemon running, an older one), with
         * the user's other tenants, as without a daemon.
         */
        d->shared_board = 0;
        /*
         * (Only in the daemon's PID namespace: a holder is known by its PID, and its death by
         * that PID's start time, which another namespace's PIDs do not tell.)
         */
        if (gs__state.node && gs__state.node_dir[0] && gs__state.node->daemon_pid_ns != 0 &&
            gs__state.node->daemon_pid_ns == gs_proc_self_ns()) {
            r = gs_board_open_shared(gs__state.node_dir, gs__state.node->owner_uid,
                                     gs__state.tenant->dev[e].uuid, &d->board, note, sizeof(note));
            if (r == 0) {
                d->shared_board = 1;
                gs__debug("device %d: the daemon's board (%s/" GS_BOARDS_SOCKET ")", ord,
                          gs__state.node_dir);
                goto boarded;
            }
            if (r != -ENOENT && r != -ECONNREFUSED)
                gs__log("device %d: the daemon's board in %s cannot be used (%s%s%s); this "
                        "process takes turns only with your own tenants",
                        ord, gs__state.node_dir, strerror(-r), note[0] ? ": " : "", note);
        }
        if ((r = gs_board_open(gs_board_dir(), gs__state.tenant->dev[e].uuid, &d->board, note,
                               sizeof(note))) < 0) {
            d->board = NULL;
            gs__log("device %d: no device board in %s (%s%s%s); this process does not take "
                    "turns on it with your other tenants, so their compute shares are not kept",
                    ord, gs_board_dir(), strerror(-r), note[0] ? ": " : "", note);
        } else if (note[0]) {
            gs__log("device %d: %s; using the next board name", ord, note);
        }
    }
boarded:
    d->state = 1;
    return d;
}

/* Which stream a launch goes to, and in which context; 0 or -1. */
int stream_key(CUstream h, int ptds, enum stream_kind *kind, CUcontext *ctx)
{
    if (h == CU_STREAM_PER_THREAD || (h == NULL && ptds)) {
        *kind = STREAM_PER_THREAD;
    } else if (h == NULL || h == CU_STREAM_LEGACY) {
        *kind = STREAM_LEGACY;
    } else {
        *kind = STREAM_EXPLICIT;
        *ctx = NULL;
        return 0;
    }
    if (!gs__real.cuCtxGetCurrent || gs__real.cuCtxGetCurrent(ctx) != CUDA_SUCCESS || !*ctx)
        return -1;
    return 0;
}

static unsigned stream_hash(CUstream h, CUcontext ctx, pid_t tid)
{
    uint64_t k = (uint64_t)(uintptr_t)h ^ ((uint64_t)(uintptr_t)ctx << 7) ^ ((uint64_t)tid << 29);

    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdULL;
    k ^= k >> 33;
    return (unsigned)(k % MAX_STREAMS);
}

/* Forgets a stream whose work is all accounted for. With mu held. */
static int stream_evictable(const struct gstream *s, uint64_t now)
{
    int i;

    if (s->unmarked || __atomic_load_n(&s->launching, __ATOMIC_ACQUIRE) ||
        now - s->last_launch_ns < 1000000000ULL)
        return 0;
    for (i = 0; i < nmarks; i++)
        if (marks[i].stream == (int)(s - streams))
            return 0;
    return 1;
}

/* The stream entry for a launch; NULL if it cannot be governed. With mu held. */
struct gstream *stream_get(CUstream h, int ptds)
{
    enum stream_kind kind;
    CUcontext ctx = NULL, cur = NULL;
    CUdevice dev;
    pid_t tid = 0;
    unsigned i, k, victim = MAX_STREAMS;
    struct gstream *s;
    int pushed = 0;

    /* The stream of the last launch, most often this one's: a created stream is its handle. */
    if (last_stream && last_stream->h == h && h != NULL && h != CU_STREAM_LEGACY &&
        h != CU_STREAM_PER_THREAD)
        return last_stream;
    if (stream_key(h, ptds, &kind, &ctx) < 0)
        return NULL;
    if (kind == STREAM_PER_THREAD)
        tid = (pid_t)syscall(SYS_gettid);
    else if (kind == STREAM_LEGACY)
        h = NULL;
    k = stream_hash(h, ctx, tid);
    for (i = 0; i < MAX_STREAMS; i++) {
        s = &streams[(k + i) % MAX_STREAMS];
        if (s->used != 1) {
            if (victim == MAX_STREAMS && !__atomic_load_n(&s->launching, __ATOMIC_ACQUIRE))
                victim = (k + i) % MAX_STREAMS;
            if (s->used == 0)
                break;
            continue;
        }
        if (s->kind == kind && s->h == h && s->tid == tid &&
            (kind == STREAM_EXPLICIT || s->ctx == ctx)) {
            if (kind == STREAM_EXPLICIT)
                last_stream = s;
            return s;
        }
        if (victim == MAX_STREAMS && i > 8 && stream_evictable(s, now_ns()))
            victim = (k + i) % MAX_STREAMS;
    }
    if (victim == MAX_STREAMS)
        return NULL;
    /* A new stream: find its context and device once. */
    if (kind == STREAM_EXPLICIT &&
        (!gs__real.cuStreamGetCtx || gs__real.cuStreamGetCtx(h, &ctx) != CUDA_SUCCESS || !ctx))
        return NULL;
    if (gs__real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS)
        return NULL;
    if (cur != ctx) {
        if (gs__real.cuCtxPushCurrent_v2(ctx) != CUDA_SUCCESS)
            return NULL;
        pushed = 1;
    }
    if (gs__real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        dev = -1;
    if (pushed)
        gs__real.cuCtxPopCurrent_v2(&cur);
    if (dev < 0)
        return NULL;
    s = &streams[victim];
    if (last_stream == s)
        last_stream = NULL;
    if (s->used == 1)
        route_drop(s); /* its twin and events, if it had them */
    memset(s, 0, offsetof(struct gstream, launching));
    s->used = 1;
    s->kind = kind;
    s->h = h;
    s->ctx = ctx;
    s->tid = tid;
    s->ord = (int)dev;
    s->last_launch_ns = now_ns();
    return s;
}

int64_t graph_cost(CUgraphExec g, int add)
{
    unsigned k = (unsigned)(((uintptr_t)g >> 4) % MAX_GRAPHS);

    if (graphs[k].h != g) {
        if (!add)
            return 0;
        graphs[k].h = g;
        graphs[k].cost = 0;
    }
    return graphs[k].cost;
}

/* An event of ctx for a marker; the calling thread has ctx current or pushed. */
static CUevent event_get(CUcontext ctx)
{
    CUevent ev;
    int i;

    for (i = nevents - 1; i >= 0; i--) {
        if (events[i].ctx == ctx) {
            ev = events[i].ev;
            events[i] = events[--nevents];
            return ev;
        }
    }
    if (gs__real.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return NULL;
    return ev;
}

static void event_put(CUevent ev, CUcontext ctx)
{
    if (nevents < MAX_EVENTS) {
        events[nevents].ev = ev;
        events[nevents].ctx = ctx;
        nevents++;
    } else {
        gs__real.cuEventDestroy_v2(ev);
    }
}

/* Takes s's unmarked work as done, without a marker. With mu held. */
void drop_unmarked(struct gstream *s)
{
    struct gdev *d = &gdevs[s->ord];

    d->unmarked -= s->unmarked;
    d->queued -= s->unmarked_est;
    if (d->queued < 0)
        d->queued = 0;
    s->unmarked = 0;
    s->unmarked_est = 0;
    s->graph = 0;
}

/*
 * Records a marker behind s's unmarked work, from the thread that launched it
 * (the governor never writes into a program's stream). With mu held.
 */
void mark(struct gstream *s, int graph_idx)
{
    struct gdev *d = &gdevs[s->ord];
    CUstream target = s->kind == STREAM_EXPLICIT ? s->h
                      : s->kind == STREAM_LEGACY ? CU_STREAM_LEGACY
                                                 : CU_STREAM_PER_THREAD;
    CUcontext cur = NULL;
    CUevent ev = NULL;
    CUresult r = CUDA_ERROR_INVALID_CONTEXT;
    int pushed = 0;

    if (nmarks >= MAX_MARKS)
        return; /* launches wait for the queue to drain before this can persist */
    /* The event must be made in the stream's context, wherever this thread is. */
    if (gs__real.cuCtxGetCurrent(&cur) != CUDA_SUCCESS || cur != s->ctx) {
        if (gs__real.cuCtxPushCurrent_v2(s->ctx) != CUDA_SUCCESS)
            goto lost;
        pushed = 1;
    }
    r = CUDA_ERROR_OUT_OF_MEMORY;
    if ((ev = event_get(s->ctx)) != NULL &&
        (r = gs__real.cuEventRecord(ev, target)) != CUDA_SUCCESS)
        gs__real.cuEventDestroy_v2(ev);
    if (pushed)
        gs__real.cuCtxPopCurrent_v2(&cur);
lost:
    if (r != CUDA_SUCCESS) {
        drop_unmarked(s); /* without a marker the work cannot be followed: count it as done */
        return;
    }
    marks[nmarks].ev = ev;
    marks[nmarks].ctx = s->ctx;
    marks[nmarks].ord = s->ord;
    marks[nmarks].stream = (int)(s - streams);
    marks[nmarks].launches = s->unmarked;
    marks[nmarks].graph = s->graph ? graph_idx : -1;
    marks[nmarks].est = s->unmarked_est;
    marks[nmarks].first_submit_ns = s->first_unmarked_ns;
    marks[nmarks].recorded_ns = now_ns();
    nmarks++;
    d->outstanding++;
    d->unmarked -= s->unmarked;
    s->unmarked = 0;
    s->unmarked_est = 0;
    s->graph = 0;
    stats.marks++;
}

/*
 * The program stopped launching into s: ask the driver whether the stream has
 * finished instead of recording a marker into it (which, on the legacy stream,
 * would be a barrier for the context's other blocking streams). Done: its work
 * is over now; not yet: ask again at the next poll. With mu held.
 */
void tail(struct gstream *s)
{
    CUstream target = s->kind == STREAM_EXPLICIT ? s->h : CU_STREAM_LEGACY;
    CUcontext cur;
    CUresult r;

    if (!gs__real.cuStreamQuery || gs__real.cuCtxPushCurrent_v2(s->ctx) != CUDA_SUCCESS) {
        drop_unmarked(s); /* cannot be followed: count it as done */
        return;
    }
    r = gs__real.cuStreamQuery(target);
    gs__real.cuCtxPopCurrent_v2(&cur);
    stats.tail_queries++;
    if (r != CUDA_ERROR_NOT_READY)
        drop_unmarked(s);
}

/* A marker was seen complete at now: learn from it and forget it. */
void mark_done(int i, uint64_t now)
{
    struct gmark *m = &marks[i];
    struct gdev *d = &gdevs[m->ord];

    if (m->stream >= 0) {
        struct gstream *s = &streams[m->stream];
        uint64_t start =
            s->last_done_ns > m->first_submit_ns ? s->last_done_ns : m->first_submit_ns;
        int64_t took = now > start ? (int64_t)(now - start) : 0;

        if (m->graph >= 0 && graphs[m->graph].h) {
            int64_t c = graphs[m->graph].cost;
            graphs[m->graph].cost = c ? (c * 7 + took * 3) / 10 : took;
        } else if (m->launches > 0) {
            int64_t per = took / m->launches, c = s->cost;
            s->cost = c ? (c * 7 + per * 3) / 10 : per;
            if (s->cost < 1000)
                s->cost = 1000;
        }
        s->last_done_ns = now;
    }
    d->outstanding--;
    d->queued -= m->est;
    if (d->queued < 0)
        d->queued = 0;
    event_put(m->ev, m->ctx);
    marks[i] = marks[--nmarks];
}
