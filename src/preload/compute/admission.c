/*
 * Admission: whether a launch may go now (budget, queued work), waiting when
 * not, and taking turns with the user's other tenants on the device board.
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
    uint64_t sleep_to = spin == WAIT_SLEEP        ? deadline
                        : spin == WAIT_AWAKE      ? t0
                        : deadline > t0 + SPIN_NS ? deadline - SPIN_NS
                                                  : t0;
    struct timespec ts = { (time_t)(sleep_to / 1000000000ULL), (long)(sleep_to % 1000000000ULL) };

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

/* A turn of weight w on the board (QUANTUM_NS x w, at most QUANTUM_MAX_NS). */
int64_t turn_of(uint32_t w)
{
    int64_t q = QUANTUM_NS * (int64_t)(w ? w : 1);

    return q > QUANTUM_MAX_NS ? QUANTUM_MAX_NS : q;
}

/*
 * How long a launch waits for its turn before it runs beside the holder: longer than the
 * holder's turn and its queue (a weight of 20 holds the device 200 ms), read from the
 * board (another process's word: at most QUANTUM_MAX_NS).
 */
static uint64_t patience(const struct gpuslice_board *b)
{
    uint64_t turn = __atomic_load_n(&b->holder_turn_ns, __ATOMIC_ACQUIRE);

    if (turn > (uint64_t)QUANTUM_MAX_NS)
        turn = QUANTUM_MAX_NS;
    turn += QUEUE_NS + TURN_PATIENCE_NS / 2;
    return turn > (uint64_t)TURN_PATIENCE_NS ? turn : (uint64_t)TURN_PATIENCE_NS;
}

/*
 * Whether d has enough queued that a launch waits: about QUEUE_NS in two or
 * more groups; while a higher class is active, YIELD_QUEUE_NS in one, so what
 * runs beside the higher class, or holds SMs it wants, is about one kernel.
 */
static int queue_full(const struct gdev *d)
{
    int groups = d->outstanding + (d->unmarked > 0);

    /* (Not while a capture is open: nothing marks the work then, see enter().) */
    if (d->above && __atomic_load_n(&captures, __ATOMIC_RELAXED) == 0)
        return d->queued >= YIELD_QUEUE_NS && groups >= 1;
    return d->queued >= QUEUE_NS && groups >= 2;
}

/*
 * Waits until a launch into (h, ptds) may go: budget left, short queue, the
 * device ours. Returns 1 with mu released when the launch is governed (call
 * leave() after it), 0 when it passes straight through.
 */
int enter(CUstream h, int ptds, CUgraphExec g, struct admit *a)
{
    struct gstream *s;
    struct gdev *d;
    uint64_t now;
    int waited = 0, refreshed = 0, wake;
    uint64_t turn_since = 0;
    uint32_t pct, prio = GPUSLICE_PRIORITY_UNSET, weight = 1;

    if (__atomic_load_n(&captures, __ATOMIC_RELAXED) > 0) {
        CUstreamCaptureStatus st = CU_STREAM_CAPTURE_STATUS_NONE;
        CUresult r =
            ptds ? gs__real.cuStreamIsCapturing_ptsz(h, &st) : gs__real.cuStreamIsCapturing(h, &st);
        if (r != CUDA_SUCCESS || st != CU_STREAM_CAPTURE_STATUS_NONE) {
            __atomic_add_fetch(&stats.capture_passes, 1, __ATOMIC_RELAXED);
            return 0; /* captured work runs when its graph is launched */
        }
    }
    pthread_mutex_lock(&mu);
    if (is_stopping() || (!governing() && governor_start() < 0) ||
        (s = stream_get(h, ptds)) == NULL ||
        ((d = &gdevs[s->ord])->state <= 0 && (d = gdev_get(s->ord)) == NULL) ||
        (s->kind == STREAM_PER_THREAD && captures > 0)) {
        /* (A per-thread stream is marked at each launch; during a capture it cannot be.) */
        pthread_mutex_unlock(&mu);
        return 0;
    }
    a->route = NULL;
    pct = governed(d, &prio, &weight);
    if (pct == 0)
        goto admitted;
    d->above = 0;
    if (class_wanted(d, prio)) {
        /* Say this class is busy here, and see whether a higher one is. */
        now = now_ns();
        class_note(d, prio, now);
        d->above = class_above(d, prio, now, ABOVE_GRACE_NS);
    }
    /* The common case: budget left, a short queue, the device ours. */
    if (!d->starved &&
        (pct >= 100 || __atomic_load_n(&entry_of(d)->compute_tokens, __ATOMIC_ACQUIRE) > 0) &&
        !queue_full(d) && nmarks < MAX_MARKS - 8 && !d->yielding &&
        (!d->board || d->holding || prio == GPUSLICE_PRIORITY_LATENCY))
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
        int64_t tok;

        pct = governed(d, &prio, &weight);
        if (pct == 0 || is_stopping())
            break;
        now = now_ns();
        d->above = class_above(d, prio, now, ABOVE_GRACE_NS);
        /* The governor refills while work is in flight; refill here only when it matters. */
        tok = __atomic_load_n(&entry_of(d)->compute_tokens, __ATOMIC_ACQUIRE);
        if (pct >= 100)
            tok = 1, d->starved = 0; /* a class or weight alone: no budget */
        else if (tok <= 0 || d->starved)
            tok = gs_budget_refill_at(entry_of(d), now, budget_cap(pct), pct);
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
            wait_until(now + (uint64_t)need, SPIN_LONG || (s->cost > 0 && s->cost < SPIN_COST_NS)
                                                 ? WAIT_AWAKE
                                             : need < MAX_WAIT_NS ? WAIT_WAKE_EARLY
                                                                  : WAIT_SLEEP);
            /* The tenant's throttled time, for the daemon's metrics and gpuslice top. */
            __atomic_add_fetch(&gs__state.tenant->compute_throttled_ns[d->entry], now_ns() - now,
                               __ATOMIC_RELAXED);
            continue;
        }
        if (queue_full(d) && !refreshed && __atomic_load_n(&captures, __ATOMIC_RELAXED) == 0) {
            /* The governor reads markers lazily: see what is really still queued first. */
            int i;
            for (i = nmarks - 1; i >= 0; i--)
                if (gs__real.cuEventQuery(marks[i].ev) != CUDA_ERROR_NOT_READY)
                    mark_done(i, now);
            refreshed = 1;
            continue;
        }
        if (queue_full(d) || nmarks >= MAX_MARKS - 8 || d->yielding) {
            refreshed = 0;
            if (!waited) {
                stats.queue_waits++;
                if (d->above)
                    stats.above_waits++;
            }
            waited = 1;
            if (gov_idle)
                gov_wake();
            wait_until(now + 1000000, WAIT_SLEEP);
            continue;
        }
        /* A latency tenant takes no turns: the others yield to it (queue_full, route). */
        if (d->board && !d->holding && prio != GPUSLICE_PRIORITY_LATENCY) {
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
                d->wait_since = 0;
                __atomic_store_n(&b->holder_turn_ns, (uint64_t)turn_of(weight), __ATOMIC_RELEASE);
            } else if ((turn_since && now - turn_since >= patience(b)) ||
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
                /* Still wanting a turn: a holder that missed us yields to us then. */
                if (!d->wait_since)
                    d->wait_since = now;
                gs_board_note_waiting(b, self(), d->wait_since, now);
                class_note(d, prio, now);
            } else {
                if (!waited)
                    stats.board_waits++;
                waited = 1;
                if (!turn_since)
                    turn_since = now;
                if (!d->wait_since)
                    d->wait_since = now;
                /* Waiting is this class's work too: a lower-class holder yields to it. */
                class_note(d, prio, now);
                pthread_mutex_unlock(&mu);
                gs_board_wait(b, self(), d->wait_since, 1000000, now);
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
        /* NVML will see these kernels, and nothing is counted in flight for them (duty.c). */
        duty_uncapped(d, now_ns());
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
    /* Yielding: each launch is followed, so the short queue holds one kernel or so. */
    a->mark = captures == 0 && (a->graph_idx >= 0 || s->unmarked_est >= MARK_NS ||
                                s->kind == STREAM_PER_THREAD || d->above);
    if (d->above && a->routable && a->graph_idx < 0 && captures == 0 &&
        s->kind != STREAM_PER_THREAD && __atomic_load_n(&s->launching, __ATOMIC_RELAXED) == 1)
        route_stream(d, s, a);
    wake = gov_idle;
    gov_idle = 0; /* one wake-up is enough */
    pthread_mutex_unlock(&mu);
    if (wake)
        gov_wake();
    return 1;
}

void leave(struct admit *a, CUresult r)
{
    struct gstream *s = a->s;
    struct gdev *d = &gdevs[s->ord];

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
