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
 *
 * This file: the state, the configuration and the small helpers; beside it
 * streams.c (devices, streams, events), governor.c (the thread that polls
 * markers and charges the budget), admission.c (whether a launch may go, and
 * taking turns on the board), hooks.c (the launch, graph, event and capture
 * entry points) and life.c (fork and exit).
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
#include "common/node.h"
#include "common/tenant.h"
#include "preload/preload.h"
#include "preload/compute/compute_internal.h"

#ifndef WINDOW_NS
#define WINDOW_NS 50000000LL /* the budget holds at most P% of this window */
#endif
/*
 * Launches and the governor share one lock, held for well under a microsecond
 * at a time; a launch that finds it taken spins a little instead of sleeping,
 * because a sleep and wake-up costs more than the wait (on the simulated GPU's
 * machine, governed launches cost 290 ns more than plain ones with a plain
 * mutex, 140 ns with this one).
 */
#if MU_ADAPTIVE && defined(PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP)
pthread_mutex_t mu = PTHREAD_ADAPTIVE_MUTEX_INITIALIZER_NP;
#else
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
#endif
pthread_cond_t launch_cv = PTHREAD_COND_INITIALIZER; /* launches wait here */
struct gdev gdevs[MAX_ORD];
struct gstream streams[MAX_STREAMS];
struct gmark marks[MAX_MARKS];
int nmarks;
struct gevent events[MAX_EVENTS];
int nevents;
struct ggraph graphs[MAX_GRAPHS];
struct gstream *last_stream; /* an explicit stream a lookup found last (NULL: none) */
int captures;                /* stream captures begun through our hooks and not yet ended */
struct capture capturing[MAX_CAPTURES];
int hot[MAX_HOT];
int nhot;
int hot_overflow;
pid_t gov_pid; /* the process the governor thread runs in (atomic: read without mu) */
pid_t my_pid;  /* self() is a system call in glibc >= 2.25: cached, reset at fork */
int gov_idle;
uint32_t gov_seq;       /* the governor sleeps on this word (futex); gov_wake() bumps it */
uint64_t last_admit_ns; /* the latest admission of a governed launch */
int stopping;           /* atomic: set at exit, read everywhere */
uint64_t my_start_time;

struct compute_stats stats;

int is_stopping(void)
{
    return __atomic_load_n(&stopping, __ATOMIC_ACQUIRE);
}

pid_t self(void)
{
    pid_t p = __atomic_load_n(&my_pid, __ATOMIC_RELAXED);

    if (p == 0) {
        p = getpid();
        __atomic_store_n(&my_pid, p, __ATOMIC_RELAXED);
    }
    return p;
}

int governing(void)
{
    return __atomic_load_n(&gov_pid, __ATOMIC_ACQUIRE) == self();
}

uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int armed(void)
{
    struct gpuslice_tenant *t = gs__state.tenant;

    return t != NULL &&
           (__atomic_load_n(&t->compute_any, __ATOMIC_RELAXED) != 0 ||
            (gs__state.node && gs_node_compute_any(gs__state.node, gs__state.node_idx)));
}

struct gpuslice_tenant_device *entry_of(const struct gdev *d)
{
    return &gs__state.tenant->dev[d->entry];
}

uint32_t governed(const struct gdev *d, uint32_t *prio, uint32_t *weight)
{
    uint32_t c = gs__compute_limit(d->entry);

    gs__sched(prio, weight);
    if (c)
        return c;
    /* A class or a weight is governed too, under a ceiling that never binds. */
    return *prio != GPUSLICE_PRIORITY_UNSET || *weight != 0 ? 100 : 0;
}

uint32_t ceiling_of(const struct gdev *d)
{
    uint32_t p, w;

    return governed(d, &p, &w);
}

/* The budget's cap and the level at which a starved tenant resumes. */
int64_t budget_cap(uint32_t pct)
{
    return WINDOW_NS * (int64_t)pct / 100;
}

int64_t resume_level(uint32_t pct)
{
    int64_t half = budget_cap(pct) / 2;
    return half < RESUME_NS ? half : RESUME_NS;
}

void gs__compute_config(void)
{
    int i;

    /* The environment's class and weight are the tenant's (where its limits are not fixed). */
    /* (Sequentially consistent, as gs_tenant_set_sched's: gs_tenant_set recounts compute_any.) */
    if (gs__state.priority)
        __atomic_store_n(&gs__state.tenant->priority, gs__state.priority, __ATOMIC_SEQ_CST);
    if (gs__state.weight)
        __atomic_store_n(&gs__state.tenant->weight, gs__state.weight, __ATOMIC_SEQ_CST);
    if (gs__state.priority || gs__state.weight)
        __atomic_store_n(&gs__state.tenant->compute_any, 1, __ATOMIC_SEQ_CST);
    /* A ceiling from the environment arms the launch hooks before any device is seen. */
    for (i = 0; i < gs__state.compute_limits.n; i++)
        if (gs__state.compute_limits.e[i].value > 0 && gs__state.compute_limits.e[i].value < 100)
            __atomic_store_n(&gs__state.tenant->compute_any, 1, __ATOMIC_RELEASE);
}
