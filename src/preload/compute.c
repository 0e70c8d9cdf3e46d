/*
 * Compute ceilings: a tenant given P% of a device may have work on it at
 * most P% of the time, counted across all its processes.
 *
 * What is counted is the time the tenant's own work holds the device: from
 * the submission of a launch while nothing of the process was running there,
 * until the driver reports that everything submitted has finished. We learn
 * that from event markers recorded behind the launches — sparse for streams
 * of tiny kernels (about one per MARK_NS of estimated work), one per launch
 * for large ones — and from a governor thread that polls them and charges
 * elapsed busy time to the tenant's budget in shared memory. The budget
 * refills at P% of wall time. When it is spent, launches wait; the work
 * already queued is kept short (QUEUE_NS), so a ceiling bites within
 * milliseconds instead of after a long queue drains.
 *
 * Processes with ceilings that share a device take turns on it through the
 * device board (board.c): otherwise the GPU would time-slice between them
 * and each would be charged for the other's turns. A holder gives the device
 * up when it goes idle, or after QUANTUM_NS while another waits.
 *
 * Copies and memsets are neither throttled nor charged on their own (they
 * use the copy engines, not the SMs); a kernel queued behind one in the same
 * stream is charged from its own submission. Launches into a stream that is
 * being captured into a graph run nothing and pass straight through; the
 * graph is governed when it is launched. While any capture is in progress
 * the interposer makes no driver calls of its own, because a call from
 * another thread can invalidate a capture in global mode.
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

/* Tunables; bench/compute_variants.sh builds variants with some of them changed (-D). */
#ifndef MARK_NS
#define MARK_NS 200000LL      /* a marker behind about this much estimated work */
#endif
#ifndef QUEUE_NS
#define QUEUE_NS 2000000LL    /* keep at most about this much work queued */
#endif
#ifndef RESUME_NS
#define RESUME_NS 2000000LL   /* after the budget ran out, wait until this much is back */
#endif
#ifndef WINDOW_NS
#define WINDOW_NS 50000000LL  /* the budget holds at most P% of this window */
#endif
#ifndef QUANTUM_NS
#define QUANTUM_NS 10000000LL /* hold the device this long at most while others wait */
#endif
#ifndef YIELD_GRACE_NS
#define YIELD_GRACE_NS 2000000LL /* after yielding, leave the device to a waiter this long */
#endif
#ifndef POLL_NS
#define POLL_NS 250000LL      /* governor poll while work is in flight (see CHARGE_STEP_NS) */
#endif
#ifndef CHARGE_STEP_NS
#define CHARGE_STEP_NS 50000LL /* a launch charges the busy time since the last charge past this */
#endif
#ifndef POLL_FAST_NS
#define POLL_FAST_NS 20000LL  /* ... while a launch waits for it */
#endif
#ifndef TAIL_NS
#define TAIL_NS 100000LL      /* unmarked work this old gets a marker from the governor */
#endif
#ifndef MAX_WAIT_NS
#define MAX_WAIT_NS 5000000LL /* a waiting launch re-reads limits at least this often */
#endif
#ifndef SPIN_NS
#define SPIN_NS 200000LL      /* a launch waiting for budget is awake this long before it is due */
#endif
#ifndef MAX_CHARGE_NS
#define MAX_CHARGE_NS 10000000LL /* one poll charges at most this (the process may have been stopped) */
#endif
#ifndef DEBT_FLOOR_NS
#define DEBT_FLOOR_NS 1000000000LL /* the budget never owes more than this */
#endif
#ifndef TURN_PATIENCE_NS
#define TURN_PATIENCE_NS 100000000LL /* a launch waits this long for its turn, then overlaps */
#endif
#ifndef STALE_NS
#define STALE_NS 500000000LL  /* unmarked work nothing can mark is taken as done after this */
#endif
#ifndef LINGER_NS
#define LINGER_NS 2000000LL /* the governor polls on this long after the last launch */
#endif
#ifndef MU_ADAPTIVE
#define MU_ADAPTIVE 1 /* 0: a plain mutex (the module lock spins a little before it sleeps) */
#endif
#ifndef SPIN_LONG
#define SPIN_LONG 0 /* 1: every launch waiting for budget waits awake */
#endif
#ifndef SPIN_COST_NS
#define SPIN_COST_NS 50000LL /* streams whose launches cost less than this wait for budget awake */
#endif

#define MAX_ORD 64
#define MAX_STREAMS 512
#define MAX_MARKS 1024
#define MAX_EVENTS 1024
#define MAX_GRAPHS 256

enum stream_kind { STREAM_EXPLICIT, STREAM_LEGACY, STREAM_PER_THREAD };

struct gdev {
    int state; /* 0 unresolved, 1 resolved, -1 cannot be governed */
    int entry; /* tenant device entry */
    struct gpuslice_board *board;
    int holding;
    uint64_t hold_since;
    int yielding;         /* launches wait; the device is released once idle */
    uint64_t yield_until; /* after a yield, leave the device to a waiter until then */
    int starved;          /* the budget ran out: wait for RESUME_NS of it */
    int32_t stuck_pid;    /* a holder that did not let go: run beside it while it holds */
    uint64_t stuck_since; /* ... its claim's acquired_ns, so a new claim is waited for again */
    int outstanding;      /* markers not yet complete */
    int unmarked;         /* launches not yet behind a marker */
    int launching;        /* launches between their admission and the driver's answer */
    int waiting;          /* launches waiting for admission */
    int64_t queued;       /* estimated ns of work not known to be complete */
    uint64_t busy_since;  /* charged up to here; 0 = idle */
};

struct gstream {
    int used; /* 0 never used, 1 in use, 2 freed (lookups probe past it) */
    enum stream_kind kind;
    CUstream h;
    CUcontext ctx;
    pid_t tid; /* per-thread default streams: the thread */
    int ord;
    int unmarked;
    int graph;              /* a graph launch is among the unmarked work */
    int64_t unmarked_est;
    uint64_t first_unmarked_ns;
    uint64_t last_launch_ns;
    uint64_t last_done_ns; /* when its last marker was seen complete */
    int64_t cost;          /* estimated ns per launch, 0 = unknown */
    int launching;         /* last: a reused slot keeps it (see stream_drop) */
};

struct gmark {
    CUevent ev;
    CUcontext ctx;
    int ord;
    int stream; /* index in streams, -1 once the stream is gone */
    int launches;
    int graph; /* index in graphs, or -1 */
    int64_t est;
    uint64_t first_submit_ns;
    uint64_t recorded_ns;
};

struct gevent {
    CUevent ev;
    CUcontext ctx;
};

struct ggraph {
    CUgraphExec h;
    int64_t cost;
};

/*
 * Launches and the governor share one lock, held for well under a microsecond
 * at a time; a launch that finds it taken spins a little instead of sleeping,
 * because a sleep and wake-up costs more than the wait (on the simulated GPU's
 * machine, governed launches cost 290 ns more than plain ones with a plain
 * mutex, 140 ns with this one).
 */
#if MU_ADAPTIVE && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
static pthread_mutex_t mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
#else
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#endif
static pthread_cond_t launch_cv = PTHREAD_COND_INITIALIZER; /* launches wait here */
static struct gdev devs[MAX_ORD];
static struct gstream streams[MAX_STREAMS];
static struct gmark marks[MAX_MARKS];
static int nmarks;
static struct gevent events[MAX_EVENTS];
static int nevents;
static struct ggraph graphs[MAX_GRAPHS];
static struct gstream *last_stream; /* an explicit stream a lookup found last (NULL: none) */
static int captures; /* stream captures begun through our hooks and not yet ended */
/* Which streams those are (a capture is ended on the stream it began on). */
#define MAX_CAPTURES 64
static struct {
    CUstream h;
    pid_t tid; /* for the per-thread and legacy default streams */
} capturing[MAX_CAPTURES];
/* Streams that may hold unmarked work, so a poll need not scan them all. */
#define MAX_HOT 16
static int hot[MAX_HOT];
static int nhot;
static int hot_overflow;
static pid_t gov_pid; /* the process the governor thread runs in (atomic: read without mu) */
static pid_t my_pid;  /* self() is a system call in glibc >= 2.25: cached, reset at fork */
static int gov_idle;
static uint32_t gov_seq; /* the governor sleeps on this word (futex); gov_wake() bumps it */
static uint64_t last_admit_ns; /* the latest admission of a governed launch */
static int stopping; /* atomic: set at exit, read everywhere */
static uint64_t my_start_time;

static struct {
    unsigned long launches, marks, budget_waits, queue_waits, board_waits,
        yields, capture_passes, polls, queries, settles, overlaps, stale, tail_queries;
    uint64_t wait_ns;
    unsigned long gov_naps; /* timed sleeps of the governor, and their length in all */
    uint64_t gov_nap_ns;
} stats;

static int is_stopping(void)
{
    return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

/* Whether the governor runs in this process (not an ancestor we were forked from). */
static int governing(void);

static pid_t self(void)
{
    pid_t p = __atomic_load_n(&my_pid, __ATOMIC_RELAXED);

    if (p == 0) {
        p = getpid();
        __atomic_store_n(&my_pid, p, __ATOMIC_RELAXED);
    }
    return p;
}

static int governing(void)
{
    return __atomic_load_n(&gov_pid, __ATOMIC_ACQUIRE) == self();
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int armed(void)
{
    struct gpuslice_tenant *t = gs__state.tenant;

    return t != NULL && __atomic_load_n(&t->compute_any, __ATOMIC_RELAXED) != 0;
}

static struct gpuslice_tenant_device *entry_of(const struct gdev *d)
{
    return &gs__state.tenant->dev[d->entry];
}

static uint32_t ceiling_of(const struct gdev *d)
{
    return __atomic_load_n(&entry_of(d)->compute_limit, __ATOMIC_RELAXED);
}

/* The budget's cap and the level at which a starved tenant resumes. */
static int64_t budget_cap(uint32_t pct)
{
    return WINDOW_NS * (int64_t)pct / 100;
}

static int64_t resume_level(uint32_t pct)
{
    int64_t half = budget_cap(pct) / 2;
    return half < RESUME_NS ? half : RESUME_NS;
}

void gs__compute_config(void)
{
    int i;

    /* A ceiling from the environment arms the launch hooks before any device is seen. */
    for (i = 0; i < gs__state.compute_limits.n; i++)
        if (gs__state.compute_limits.e[i].value > 0 && gs__state.compute_limits.e[i].value < 100)
            __atomic_store_n(&gs__state.tenant->compute_any, 1, __ATOMIC_RELEASE);
}

/* ---- devices, streams, events ------------------------------------------- */

/* With mu held. */
static struct gdev *dev_get(int ord)
{
    struct gdev *d;
    int e, r;

    if (ord < 0 || ord >= MAX_ORD)
        return NULL;
    d = &devs[ord];
    if (d->state)
        return d->state > 0 ? d : NULL;
    pthread_mutex_unlock(&mu);
    e = gs__mem_device_entry(ord);
    pthread_mutex_lock(&mu);
    if (d->state)
        return d->state > 0 ? d : NULL;
    if (e < 0)
        return NULL; /* not initialised yet: try again on the next launch */
    d->entry = e;
    {
        char note[600];

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
    d->state = 1;
    return d;
}

/* Which stream a launch goes to, and in which context; 0 or -1. */
static int stream_key(CUstream h, int ptds, enum stream_kind *kind, CUcontext *ctx)
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
static struct gstream *stream_get(CUstream h, int ptds)
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
        if (s->kind == kind && s->h == h && s->tid == tid && (kind == STREAM_EXPLICIT || s->ctx == ctx)) {
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

static int64_t graph_cost(CUgraphExec g, int add)
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
static void drop_unmarked(struct gstream *s)
{
    struct gdev *d = &devs[s->ord];

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
static void mark(struct gstream *s, int graph_idx)
{
    struct gdev *d = &devs[s->ord];
    CUstream target = s->kind == STREAM_EXPLICIT  ? s->h
                      : s->kind == STREAM_LEGACY  ? CU_STREAM_LEGACY
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
    if ((ev = event_get(s->ctx)) != NULL && (r = gs__real.cuEventRecord(ev, target)) != CUDA_SUCCESS)
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
static void tail(struct gstream *s)
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
static void mark_done(int i, uint64_t now)
{
    struct gmark *m = &marks[i];
    struct gdev *d = &devs[m->ord];

    if (m->stream >= 0) {
        struct gstream *s = &streams[m->stream];
        uint64_t start = s->last_done_ns > m->first_submit_ns ? s->last_done_ns : m->first_submit_ns;
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

/* ---- the governor thread -------------------------------------------------- */

static void charge(struct gdev *d, uint64_t now)
{
    if (d->busy_since && now > d->busy_since) {
        uint64_t dt = now - d->busy_since;
        /* A longer gap means this thread did not run (a stopped process): don't bill it. */
        gs_budget_charge(entry_of(d), dt > (uint64_t)MAX_CHARGE_NS ? MAX_CHARGE_NS : dt,
                         -DEBT_FLOOR_NS);
        d->busy_since = now;
    }
}

static int dev_busy(const struct gdev *d)
{
    return d->outstanding > 0 || d->unmarked > 0 || __atomic_load_n(&d->launching, __ATOMIC_ACQUIRE) > 0;
}

static void release_board(struct gdev *d, uint64_t now)
{
    if (!d->holding)
        return;
    gs_board_release(d->board, self());
    d->holding = 0;
    if (d->yielding) {
        d->yielding = 0;
        d->yield_until = now + YIELD_GRACE_NS;
    }
}

/* One pass over everything in flight. With mu held; returns the next poll delay (ns) or 0. */
/*
 * Whether this poll should ask the driver about the markers. While a process
 * keeps launching, its device counts as busy anyway (it has unmarked work), so
 * markers need only be read now and then, for the queue bound and the cost
 * estimates: every driver call we make competes with the program's launches.
 * They are read at every poll when it matters when work ends: a launch waits,
 * the queue is near its bound, or the process stopped launching.
 */
static int query_due(uint64_t now)
{
    static uint64_t last;
    int i;

    if (nmarks == 0)
        return 0;
    for (i = 0; i < MAX_ORD; i++) {
        const struct gdev *d = &devs[i];
        if (d->state > 0 && d->outstanding &&
            (d->waiting || d->unmarked == 0 || d->queued >= QUEUE_NS / 2)) {
            last = now;
            return 1;
        }
    }
    if (now - last >= 1000000ULL) {
        last = now;
        return 1;
    }
    return 0;
}

static int64_t govern(uint64_t now)
{
    int i, busy = 0, hurry = 0, changed = 0, draining = 0;

    stats.polls++;
    if (captures > 0) {
        /* No driver calls now; a capture left open must not keep the device busy for ever. */
        for (i = nmarks - 1; i >= 0; i--)
            if (now - marks[i].recorded_ns >= (uint64_t)STALE_NS) {
                stats.stale++;
                mark_done(i, now);
                changed = 1;
            }
    } else if (query_due(now)) {
        stats.queries++;
        for (i = nmarks - 1; i >= 0; i--) {
            CUresult r = gs__real.cuEventQuery(marks[i].ev);
            if (r != CUDA_ERROR_NOT_READY) {
                mark_done(i, now);
                changed = 1;
            }
        }
    }
    {
        int n = hot_overflow ? MAX_STREAMS : nhot, j;
        for (j = n - 1; j >= 0; j--) {
            struct gstream *s = &streams[hot_overflow ? j : hot[j]];
            int quiet = s->used == 1 && s->unmarked &&
                        !__atomic_load_n(&s->launching, __ATOMIC_ACQUIRE);
            if (quiet && captures == 0 && s->kind != STREAM_PER_THREAD &&
                now - s->last_launch_ns >= (uint64_t)TAIL_NS)
                tail(s);
            else if (quiet && now - s->last_launch_ns >= (uint64_t)STALE_NS) {
                drop_unmarked(s); /* nothing can mark it (another thread's stream, a capture) */
                stats.stale++;
            }
            if (!hot_overflow && (s->used != 1 || !s->unmarked))
                hot[j] = hot[--nhot];
        }
        if (hot_overflow) {
            hot_overflow = 0;
            nhot = 0;
            for (j = 0; j < MAX_STREAMS && !hot_overflow; j++)
                if (streams[j].used == 1 && streams[j].unmarked) {
                    if (nhot < MAX_HOT)
                        hot[nhot++] = j;
                    else
                        hot_overflow = 1;
                }
        }
    }
    for (i = 0; i < MAX_ORD; i++) {
        struct gdev *d = &devs[i];

        if (d->state <= 0)
            continue;
        gs_budget_refill(entry_of(d), now, budget_cap(ceiling_of(d)));
        if (dev_busy(d)) {
            charge(d, now);
            busy = 1;
            if (d->waiting)
                hurry = 1;
            if (d->unmarked == 0)
                draining = 1; /* its end is near: see it soon */
            if (d->holding && !d->yielding && now - d->hold_since >= (uint64_t)QUANTUM_NS &&
                gs_board_waiting(d->board, now)) {
                d->yielding = 1;
                stats.yields++;
                hurry = 1;
            }
        } else {
            if (d->busy_since) {
                charge(d, now);
                d->busy_since = 0;
            }
            if (d->holding) {
                release_board(d, now);
                changed = 1;
            }
        }
    }
    if (changed)
        pthread_cond_broadcast(&launch_cv);
    if (!busy)
        /* Idle now, but launching lately: stay on a timer rather than make the next launch wake us. */
        return now - __atomic_load_n(&last_admit_ns, __ATOMIC_RELAXED) < (uint64_t)LINGER_NS
                   ? POLL_NS
                   : 0;
    return hurry || draining ? POLL_FAST_NS : POLL_NS;
}

/* Wakes the governor (with or without mu; lost wake-ups are impossible, see governor()). */
static void gov_wake(void)
{
    __atomic_add_fetch(&gov_seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &gov_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void *governor(void *arg)
{
    (void)arg;
    /* Our own thread only: wake within microseconds of a poll's deadline, not 50 µs late. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_mutex_lock(&mu);
    while (!is_stopping() && governing()) {
        int64_t delay = govern(now_ns());
        /* Read under mu: a launch that finds us idle bumps it, and the wait below sees that. */
        uint32_t seq = __atomic_load_n(&gov_seq, __ATOMIC_ACQUIRE);
        struct timespec ts = {(time_t)(delay / 1000000000LL), (long)(delay % 1000000000LL)};

        uint64_t t0 = now_ns();

        gov_idle = delay == 0;
        pthread_mutex_unlock(&mu);
        syscall(SYS_futex, &gov_seq, FUTEX_WAIT_PRIVATE, seq, delay ? &ts : NULL, NULL, 0);
        pthread_mutex_lock(&mu);
        gov_idle = 0;
        if (delay) {
            stats.gov_naps++;
            stats.gov_nap_ns += now_ns() - t0;
        }
    }
    pthread_mutex_unlock(&mu);
    return NULL;
}

static void stop_at_exit(void)
{
    struct timespec pause = {0, 100000};
    uint64_t now = now_ns();
    int i, tries;

    __atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
    /* exit() may come from a signal handler that interrupted this very thread holding mu. */
    for (tries = 0; pthread_mutex_trylock(&mu) != 0; tries++) {
        if (tries == 100) {
            for (i = 0; i < MAX_ORD; i++)
                if (devs[i].board)
                    gs_board_release(devs[i].board, self()); /* lock-free */
            return;
        }
        nanosleep(&pause, NULL);
    }
    for (i = 0; i < MAX_ORD; i++) {
        if (devs[i].state > 0) {
            charge(&devs[i], now);
            if (devs[i].holding) {
                gs_board_release(devs[i].board, self());
                devs[i].holding = 0;
            }
        }
    }
    gov_wake();
    pthread_cond_broadcast(&launch_cv);
    pthread_mutex_unlock(&mu);
}

/* With mu held. */
static int governor_start(void)
{
    static int atexit_done;
    pthread_condattr_t ca;
    pthread_attr_t a;
    pthread_t th;
    sigset_t all, old;
    int r;

    if (governing())
        return 0;
    if (is_stopping())
        return -ESHUTDOWN;
    if (!atexit_done) {
        /* Before the libraries' destructors, while the driver still works. */
        atexit(stop_at_exit);
        atexit_done = 1;
    }
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&launch_cv, &ca);
    pthread_condattr_destroy(&ca);
    my_start_time = gs_proc_start_time(self());
    __atomic_store_n(&gov_pid, self(), __ATOMIC_RELEASE);
    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's signals are not for us */
    r = pthread_create(&th, &a, governor, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    if (r != 0) {
        __atomic_store_n(&gov_pid, 0, __ATOMIC_RELEASE);
        gs__log("cannot start the compute governor thread (%s); compute ceilings are not "
                "enforced in this process",
                strerror(r));
        return -r;
    }
    pthread_setname_np(th, "gpuslice-gov");
    return 0;
}

/* ---- admission ------------------------------------------------------------ */

/*
 * Sleeps (mu released) until deadline or a broadcast. spin: WAIT_SLEEP, or
 * WAIT_WAKE_EARLY (the last SPIN_NS before the deadline are spent awake: a
 * thread woken from a sleep of milliseconds launches more slowly for a while,
 * and that slow time would be charged as device time), or WAIT_AWAKE (awake
 * throughout, see enter()).
 */
enum { WAIT_SLEEP, WAIT_WAKE_EARLY, WAIT_AWAKE };

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void wait_until(uint64_t deadline, int spin)
{
    uint64_t t0 = now_ns();
    uint64_t sleep_to = spin == WAIT_SLEEP     ? deadline
                        : spin == WAIT_AWAKE   ? t0
                        : deadline > t0 + SPIN_NS ? deadline - SPIN_NS
                                                  : t0;
    struct timespec ts = {(time_t)(sleep_to / 1000000000ULL), (long)(sleep_to % 1000000000ULL)};

    if (sleep_to > t0) {
        pthread_cond_timedwait(&launch_cv, &mu, &ts);
        if (now_ns() < sleep_to) {
            /* Woken early (the governor saw work end): the caller looks again. */
            stats.wait_ns += now_ns() - t0;
            return;
        }
    }
    if (spin != WAIT_SLEEP && now_ns() < deadline) {
        pthread_mutex_unlock(&mu);
        while (now_ns() < deadline)
            cpu_relax();
        pthread_mutex_lock(&mu);
    }
    stats.wait_ns += now_ns() - t0;
}

struct admit {
    struct gstream *s;
    int graph_idx;
    int mark;    /* record a marker behind this launch */
    int64_t est; /* what it was counted as */
};

/*
 * Waits until a launch into (h, ptds) may go: budget left, short queue, the
 * device ours. Returns 1 with mu released when the launch is governed (call
 * leave() after it), 0 when it passes straight through.
 */
static int enter(CUstream h, int ptds, CUgraphExec g, struct admit *a)
{
    struct gstream *s;
    struct gdev *d;
    uint64_t now;
    int waited = 0, refreshed = 0, wake;
    uint64_t turn_since = 0;

    if (__atomic_load_n(&captures, __ATOMIC_RELAXED) > 0) {
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        CUresult r = ptds ? gs__real.cuStreamIsCapturing_ptsz(h, &st)
                          : gs__real.cuStreamIsCapturing(h, &st);
        if (r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) {
            __atomic_add_fetch(&stats.capture_passes, 1, __ATOMIC_RELAXED);
            return 0; /* captured work runs when its graph is launched */
        }
    }
    pthread_mutex_lock(&mu);
    if (is_stopping() || (!governing() && governor_start() < 0) ||
        (s = stream_get(h, ptds)) == NULL ||
        ((d = &devs[s->ord])->state <= 0 && (d = dev_get(s->ord)) == NULL) ||
        (s->kind == STREAM_PER_THREAD && captures > 0)) {
        /* (A per-thread stream is marked at each launch; during a capture it cannot be.) */
        pthread_mutex_unlock(&mu);
        return 0;
    }
    /* The common case: budget left, a short queue, the device ours. No clock needed. */
    if (ceiling_of(d) == 0 ||
        (!d->starved && __atomic_load_n(&entry_of(d)->compute_tokens, __ATOMIC_ACQUIRE) > 0 &&
         !(d->queued >= QUEUE_NS && d->outstanding + (d->unmarked > 0) >= 2) &&
         nmarks < MAX_MARKS - 8 && !d->yielding && (!d->board || d->holding)))
        goto admitted;
    d->waiting++;
    /* About to wait: put a marker behind this stream's work now, so its end is seen at once. */
    if (s->unmarked && !__atomic_load_n(&s->launching, __ATOMIC_ACQUIRE) &&
        __atomic_load_n(&captures, __ATOMIC_RELAXED) == 0)
        mark(s, -1);
    /* Wake the governor now, not at its next poll: the end of this burst is what it must see. */
    pthread_mutex_unlock(&mu);
    gov_wake(); /* not under mu: the governor would wake only to find it taken */
    pthread_mutex_lock(&mu);
    for (;;) {
        uint32_t pct = ceiling_of(d);
        int64_t tok;

        if (pct == 0 || is_stopping())
            break;
        now = now_ns();
        /* The governor refills while work is in flight; refill here only when it matters. */
        tok = __atomic_load_n(&entry_of(d)->compute_tokens, __ATOMIC_ACQUIRE);
        if (tok <= 0 || d->starved)
            tok = gs_budget_refill(entry_of(d), now, budget_cap(pct));
        if (d->starved && tok >= resume_level(pct))
            d->starved = 0;
        else if (!d->starved && tok <= 0)
            d->starved = 1;
        if (d->starved) {
            /* Sleep until enough is back at the refill rate, re-reading the limit now and then. */
            int64_t need = (resume_level(pct) - tok) * 100 / pct;
            if (need > MAX_WAIT_NS)
                need = MAX_WAIT_NS;
            if (need < 20000)
                need = 20000;
            if (!waited)
                stats.budget_waits++;
            waited = 1;
            /*
             * A stream of tiny launches, whose pace the host sets, waits awake
             * (spinning with mu released): a thread that slept launches more
             * slowly for a while, and that is charged as device time. Its CPU
             * would have been busy launching anyway. Measured, a <<<>>> loop at
             * 25/50/90 %: on the H200's VM 22.9/46.8/91.4 awake and
             * 22.2/45.5/90.7 asleep (one run each, within that VM's noise); on
             * the simulator's 2-CPU machine 23.9/48.8/87.8 and 23.9/46.6/86.9,
             * the bursts 50.3 % and 47.4 % of the time at 50 %. Others sleep,
             * awake only for the end when the budget (not the limit's re-read)
             * is due.
             */
            wait_until(now + (uint64_t)need,
                       SPIN_LONG || (s->cost > 0 && s->cost < SPIN_COST_NS) ? WAIT_AWAKE
                       : need < MAX_WAIT_NS                                ? WAIT_WAKE_EARLY
                                                                           : WAIT_SLEEP);
            continue;
        }
        if (d->queued >= QUEUE_NS && d->outstanding + (d->unmarked > 0) >= 2 && !refreshed &&
            __atomic_load_n(&captures, __ATOMIC_RELAXED) == 0) {
            /* The governor reads markers lazily: see what is really still queued first. */
            int i;
            for (i = nmarks - 1; i >= 0; i--)
                if (gs__real.cuEventQuery(marks[i].ev) != CUDA_ERROR_NOT_READY)
                    mark_done(i, now);
            refreshed = 1;
            continue;
        }
        if ((d->queued >= QUEUE_NS && d->outstanding + (d->unmarked > 0) >= 2) ||
            nmarks >= MAX_MARKS - 8 || d->yielding) {
            refreshed = 0;
            if (!waited)
                stats.queue_waits++;
            waited = 1;
            if (gov_idle)
                gov_wake();
            wait_until(now + 1000000, WAIT_SLEEP);
            continue;
        }
        if (d->board && !d->holding) {
            struct gpuslice_board *b = d->board;
            if (now < d->yield_until && __atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) == 0 &&
                gs_board_waiting(b, now)) {
                /* We just yielded: let the waiter that was woken take it first. */
                wait_until(now + 50000, WAIT_SLEEP);
                continue;
            }
            if (gs_board_try_acquire(b, self(), my_start_time, now)) {
                d->holding = 1;
                d->hold_since = now;
                d->yield_until = 0;
            } else if ((turn_since && now - turn_since >= (uint64_t)TURN_PATIENCE_NS) ||
                       (d->stuck_pid &&
                        __atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) == d->stuck_pid &&
                        __atomic_load_n(&b->acquired_ns, __ATOMIC_ACQUIRE) == d->stuck_since)) {
                /*
                 * The holder has not let go (stopped, or not governed any more):
                 * run beside it, time-sliced by the GPU, rather than wait for ever,
                 * until that claim ends.
                 */
                d->stuck_pid = __atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE);
                d->stuck_since = __atomic_load_n(&b->acquired_ns, __ATOMIC_ACQUIRE);
                stats.overlaps++;
            } else {
                if (!waited)
                    stats.board_waits++;
                waited = 1;
                if (!turn_since)
                    turn_since = now;
                pthread_mutex_unlock(&mu);
                gs_board_wait(b, 1000000, now);
                pthread_mutex_lock(&mu);
                stats.wait_ns += now_ns() - now;
                continue;
            }
        }
        break;
    }
    d->waiting--;
admitted:
    if (ceiling_of(d) == 0 || is_stopping()) {
        pthread_mutex_unlock(&mu);
        return 0;
    }
    a->s = s;
    a->graph_idx = -1;
    if (g) {
        /* A graph is followed on its own: close what came before it. */
        if (s->unmarked && captures == 0)
            mark(s, -1);
        graph_cost(g, 1);
        a->graph_idx = (int)(((uintptr_t)g >> 4) % MAX_GRAPHS);
    }
    /*
     * Counted now, as if it will succeed (leave() takes it back if not), so that
     * leave() needs the lock only to record a marker: one lock per launch.
     */
    now = now_ns();
    __atomic_add_fetch(&d->launching, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&s->launching, 1, __ATOMIC_RELAXED);
    if (!d->busy_since)
        d->busy_since = now;
    else if (now - d->busy_since >= (uint64_t)CHARGE_STEP_NS)
        charge(d, now); /* here, not only at the governor's polls: see POLL_NS */
    a->est = a->graph_idx >= 0 ? graphs[a->graph_idx].cost : s->cost;
    if (a->est <= 0)
        a->est = MARK_NS;
    if (!s->unmarked) {
        int k, idx = (int)(s - streams), found = 0;
        s->first_unmarked_ns = now;
        for (k = 0; k < nhot && !found; k++)
            found = hot[k] == idx;
        if (!found) {
            if (nhot < MAX_HOT)
                hot[nhot++] = idx;
            else
                hot_overflow = 1;
        }
    }
    s->unmarked++;
    s->unmarked_est += a->est;
    s->last_launch_ns = now;
    __atomic_store_n(&last_admit_ns, now, __ATOMIC_RELAXED);
    if (a->graph_idx >= 0)
        s->graph = 1;
    d->unmarked++;
    d->queued += a->est;
    stats.launches++;
    a->mark = captures == 0 &&
              (a->graph_idx >= 0 || s->unmarked_est >= MARK_NS || s->kind == STREAM_PER_THREAD);
    wake = gov_idle;
    gov_idle = 0; /* one wake-up is enough */
    pthread_mutex_unlock(&mu);
    if (wake)
        gov_wake();
    return 1;
}

static void leave(struct admit *a, CUresult r)
{
    struct gstream *s = a->s;
    struct gdev *d = &devs[s->ord];

    if (r == CUDA_SUCCESS && !a->mark) {
        __atomic_sub_fetch(&s->launching, 1, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&d->launching, 1, __ATOMIC_RELEASE);
        return;
    }
    pthread_mutex_lock(&mu);
    __atomic_sub_fetch(&d->launching, 1, __ATOMIC_RELEASE);
    if (__atomic_sub_fetch(&s->launching, 1, __ATOMIC_ACQ_REL) == 0 && s->used == 1) {
        if (r != CUDA_SUCCESS) {
            /* Nothing was queued: take back what enter() counted. */
            if (s->unmarked > 0) {
                s->unmarked--;
                s->unmarked_est -= a->est;
                d->unmarked--;
                d->queued -= a->est;
            }
            stats.launches--;
        } else if (s->unmarked && captures == 0) {
            /*
             * Only with no other launch into this stream still in the driver: a
             * marker must not claim work that may land behind it. Otherwise the
             * last of them, or the governor, marks it.
             */
            mark(s, a->graph_idx);
        }
    }
    pthread_mutex_unlock(&mu);
}

/* ---- hooks ------------------------------------------------------------------ */

#define GS_LAUNCH_BODY(sym, stream, ptds, graph, args)   \
    do {                                                 \
        struct admit a;                                  \
        CUresult r;                                      \
        int saved;                                       \
        GS_PASS(sym, args);                              \
        GS_SM_ENSURE();                                  \
        if (!armed())                                    \
            return gs__real.sym args;                    \
        saved = errno;                                   \
        if (!enter(stream, ptds, graph, &a)) {           \
            errno = saved;                               \
            return gs__real.sym args;                    \
        }                                                \
        errno = saved;                                   \
        r = gs__real.sym args;                           \
        saved = errno;                                   \
        leave(&a, r);                                    \
        errno = saved;                                   \
        return r;                                        \
    } while (0)

#define LAUNCH_PARAMS                                                                             \
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,            \
        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                   \
        unsigned int sharedMemBytes, CUstream hStream, void **kernelParams
#define LAUNCH_ARGS                                                                               \
    f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes, hStream,    \
        kernelParams

GS_EXPORT CUresult cuLaunchKernel(LAUNCH_PARAMS, void **extra)
{
    GS_LAUNCH_BODY(cuLaunchKernel, hStream, 0, NULL, (LAUNCH_ARGS, extra));
}

GS_EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_PARAMS, void **extra)
{
    GS_LAUNCH_BODY(cuLaunchKernel_ptsz, hStream, 1, NULL, (LAUNCH_ARGS, extra));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_PARAMS)
{
    GS_LAUNCH_BODY(cuLaunchCooperativeKernel, hStream, 0, NULL, (LAUNCH_ARGS));
}

GS_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(LAUNCH_PARAMS)
{
    GS_LAUNCH_BODY(cuLaunchCooperativeKernel_ptsz, hStream, 1, NULL, (LAUNCH_ARGS));
}

GS_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                    void **kernelParams, void **extra)
{
    GS_LAUNCH_BODY(cuLaunchKernelEx, config ? config->hStream : NULL, 0, NULL,
                   (config, f, kernelParams, extra));
}

GS_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                         void **kernelParams, void **extra)
{
    GS_LAUNCH_BODY(cuLaunchKernelEx_ptsz, config ? config->hStream : NULL, 1, NULL,
                   (config, f, kernelParams, extra));
}

GS_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_LAUNCH_BODY(cuGraphLaunch, hStream, 0, hGraphExec, (hGraphExec, hStream));
}

GS_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    GS_LAUNCH_BODY(cuGraphLaunch_ptsz, hStream, 1, hGraphExec, (hGraphExec, hStream));
}

/*
 * A synchronisation returned: everything before it in ctx (or in one stream
 * of it) is done. Settling that now, rather than at the next poll, keeps
 * the time charged to the work that really ran.
 */
static void settle(CUcontext ctx, int one_stream, enum stream_kind kind, CUstream h,
                   uint64_t since)
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
        d = &devs[s->ord];
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

#define GS_STREAM_SYNC_BODY(sym, ptds)                                               \
    do {                                                                             \
        enum stream_kind kind;                                                       \
        CUcontext ctx = NULL;                                                        \
        uint64_t t0 = now_ns();                                                      \
        CUresult r;                                                                  \
        GS_PASS(sym, (hStream));                                                     \
        r = gs__real.sym(hStream);                                                   \
        if (r == CUDA_SUCCESS && settling() && stream_key(hStream, ptds, &kind, &ctx) == 0) \
            settle(ctx, 1, kind, kind == STREAM_EXPLICIT ? hStream : NULL, t0);      \
        return r;                                                                    \
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

#define GS_STREAM_DESTROY_BODY(sym)                \
    do {                                           \
        GS_PASS(sym, (hStream));                   \
        if (governing())                           \
            stream_gone(hStream);                  \
        return gs__real.sym(hStream);              \
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
        devs[marks[i].ord].outstanding--;
        devs[marks[i].ord].queued -= marks[i].est;
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

#define GS_BEGIN_CAPTURE_BODY(sym, ptds, args)                                  \
    do {                                                                        \
        CUresult r;                                                             \
        GS_PASS(sym, args);                                                     \
        capture_begun(hStream, ptds); /* before: the governor stays out */      \
        if ((r = gs__real.sym args) != CUDA_SUCCESS)                            \
            capture_ended(hStream, ptds, 1);                                    \
        return r;                                                               \
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

#define GS_END_CAPTURE_BODY(sym, ptds, is_capturing)                            \
    do {                                                                        \
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;               \
        CUresult r;                                                             \
        GS_PASS(sym, (hStream, phGraph));                                       \
        r = gs__real.sym(hStream, phGraph);                                     \
        /* After a failure the capture may go on: ask, on this same thread. */  \
        capture_ended(hStream, ptds,                                            \
                      r == CUDA_SUCCESS || !gs__real.is_capturing ||            \
                          gs__real.is_capturing(hStream, &st) != CUDA_SUCCESS || \
                          st == CU_STREAM_CAPTURE_STATUS_NONE);                 \
        return r;                                                               \
    } while (0)

GS_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    GS_END_CAPTURE_BODY(cuStreamEndCapture, 0, cuStreamIsCapturing);
}

GS_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    GS_END_CAPTURE_BODY(cuStreamEndCapture_ptsz, 1, cuStreamIsCapturing_ptsz);
}

/* ---- process life ------------------------------------------------------------- */

void gs__compute_fork_child(void)
{
    /* The child has no governor, no markers and holds no device. */
    {
        pthread_mutexattr_t ma;
        pthread_mutexattr_init(&ma);
#if MU_ADAPTIVE && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
        pthread_mutexattr_settype(&ma, PTHREAD_MUTEX_ADAPTIVE_NP);
#endif
        pthread_mutex_init(&mu, &ma);
        pthread_mutexattr_destroy(&ma);
    }
    memset(devs, 0, sizeof(devs));
    memset(streams, 0, sizeof(streams));
    memset(graphs, 0, sizeof(graphs));
    last_stream = NULL;
    nmarks = 0;
    nevents = 0;
    nhot = 0;
    hot_overflow = 0;
    captures = 0;
    memset(capturing, 0, sizeof(capturing));
    __atomic_store_n(&gov_pid, 0, __ATOMIC_RELAXED);
    gov_idle = 0;
    my_pid = 0;
}

void gs__compute_exit(void)
{
    struct timespec pause = {0, 100000};
    int i, tries;

    if (governing())
        stop_at_exit();
    if (!gs__state.debug)
        return;
    /* The governor may still be running: read its counters under its lock, or not at all. */
    for (tries = 0; pthread_mutex_trylock(&mu) != 0; tries++) {
        if (tries == 100)
            return;
        nanosleep(&pause, NULL);
    }
    if (stats.launches) {
        for (i = 0; i < MAX_ORD; i++)
            if (devs[i].state > 0)
                gs__log("debug: compute: device %d: the tenant has held it %.3f s in all", i,
                        __atomic_load_n(&entry_of(&devs[i])->compute_busy_ns, __ATOMIC_RELAXED) /
                            1e9);
        gs__log("debug: compute: %lu launches governed, %lu markers (%lu quiet streams asked "
                "whether done), "
                "waits: %lu budget, %lu queue, %lu device (%.3f s in all; %lu ran beside a "
                "holder that did not let go), %lu yields, %lu "
                "captured launches passed, %lu polls (%lu asked the driver), %lu synchronisations "
                "settled; the governor napped %lu times, %.1f us on average, ",
                stats.launches, stats.marks, stats.tail_queries,
                stats.budget_waits,
                stats.queue_waits, stats.board_waits, stats.wait_ns / 1e9, stats.overlaps,
                stats.yields,
                stats.capture_passes, stats.polls, stats.queries, stats.settles, stats.gov_naps,
                stats.gov_naps ? stats.gov_nap_ns / 1e3 / (double)stats.gov_naps : 0.0);
    }
    pthread_mutex_unlock(&mu);
}
