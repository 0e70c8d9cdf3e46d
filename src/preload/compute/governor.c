/*
 * The governor thread: polls the markers behind launches, charges the busy
 * time to the tenant's budget, wakes waiting launches when it refills.
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

void charge(struct gdev *d, uint64_t now)
{
    if (d->busy_since && now > d->busy_since) {
        uint64_t dt = now - d->busy_since;

        /* A longer gap means this thread did not run (a stopped process): don't bill it. */
        if (dt > (uint64_t)MAX_CHARGE_NS)
            dt = MAX_CHARGE_NS;
        /* Of the time in flight, the share in which kernels ran (duty.c). */
        int64_t bill = duty_bill(d, (int64_t)dt, now);

        /* (What the debt floor forgave was not billed: NVML's count settles what was.) */
        duty_span(d, now - dt, now,
                  gs_budget_settle(entry_of(d), bill, duty_busy(d, bill), -DEBT_FLOOR_NS));
        d->busy_since = now;
    }
}

/* Bills (or gives back) what NVML's count says the bills missed (duty.c). With mu held. */
static void settle_duty(void)
{
    uint64_t now = now_ns();
    int i;

    for (i = 0; i < MAX_ORD; i++) {
        struct gdev *d = &gdevs[i];
        int64_t c;

        if (d->state > 0 &&
            (c = duty_correction(d, __atomic_load_n(&entry_of(d)->compute_epoch, __ATOMIC_ACQUIRE),
                                 now)) != 0)
            gs_budget_settle(entry_of(d), c, c > 0 ? duty_busy(d, c) : 0, -DEBT_FLOOR_NS);
    }
}

int dev_busy(const struct gdev *d)
{
    return d->outstanding > 0 || d->unmarked > 0 ||
           __atomic_load_n(&d->launching, __ATOMIC_ACQUIRE) > 0;
}

static void release_board(struct gdev *d, uint64_t now)
{
    if (!d->holding)
        return;
    gs_board_release(d->board, self());
    d->holding = 0;
    stats.turns++;
    stats.held_ns += now - d->hold_since;
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
        const struct gdev *d = &gdevs[i];
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
    int i, busy = 0, hurry = 0, changed = 0, draining = 0, holding = 0;
    uint32_t pct, prio, weight;

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
            int quiet =
                s->used == 1 && s->unmarked && !__atomic_load_n(&s->launching, __ATOMIC_ACQUIRE);
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
        struct gdev *d = &gdevs[i];

        if (d->state <= 0)
            continue;
        pct = governed(d, &prio, &weight);
        gs_budget_refill_at(entry_of(d), now, budget_cap(pct), pct);
        if (dev_busy(d)) {
            int64_t quantum, q;

            charge(d, now);
            busy = 1;
            if (d->waiting)
                hurry = 1;
            if (d->unmarked == 0)
                draining = 1;         /* its end is near: see it soon */
            class_note(d, prio, now); /* its work still runs */
            /*
             * Turns by weight: a holder keeps the device QUANTUM_NS per unit of weight; one of
             * a lower class than a tenant waiting for it (active on the board) yields at once.
             */
            quantum = turn_of(weight);
            if (d->board && class_above(d, prio, now, ABOVE_GRACE_NS))
                quantum = 0;
            /*
             * ... its queued work counted in (at most QUEUE_NS of it, never less than none:
             * the estimate is of the work, not the work), so the turn ends when that drains.
             */
            q = d->queued < 0 ? 0 : d->queued > QUEUE_NS ? QUEUE_NS : d->queued;
            if (d->holding && !d->yielding) {
                uint64_t held = now - d->hold_since;

                stats.holding_polls++;
                if (held > stats.longest_hold_ns)
                    stats.longest_hold_ns = held;
                if (gs_board_waiting(d->board, now)) {
                    stats.waited_polls++;
                    if ((int64_t)held + q >= quantum) {
                        d->yielding = 1;
                        stats.yields++;
                        hurry = 1;
                    }
                }
            }
        } else {
            if (d->busy_since) {
                charge(d, now);
                d->busy_since = 0;
                d->idle_since = now;
                if (!d->holding)
                    d->wait_since = 0; /* a wait that ended: the next one starts afresh */
            }
            /*
             * Released when idle, but not in the gap of a synchronisation (the next launch
             * comes within microseconds): a weight's longer turn would end at each one.
             */
            if (d->holding &&
                (d->yielding || d->starved || now - d->idle_since >= (uint64_t)HOLD_IDLE_NS)) {
                release_board(d, now);
                changed = 1;
            }
        }
        holding |= d->holding;
    }
    if (changed)
        pthread_cond_broadcast(&launch_cv);
    if (!busy)
        /*
         * Idle now, but launching lately: stay on a timer rather than make the next launch wake
         * us. Never asleep with the board held: it would stay held (HOLD_IDLE_NS lets a holder
         * keep it over a short gap), and a waiter would give up and run beside us.
         */
        return holding ||
                       now - __atomic_load_n(&last_admit_ns, __ATOMIC_RELAXED) < (uint64_t)LINGER_NS
                   ? POLL_NS
                   : 0;
    return hurry || draining ? POLL_FAST_NS : POLL_NS;
}

/* Wakes the governor (with or without mu; lost wake-ups are impossible, see governor()). */
void gov_wake(void)
{
    __atomic_add_fetch(&gov_seq, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &gov_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void *governor(void *arg)
{
    (void)arg;
    /* Our own thread only: wake within microseconds of a poll's deadline, not 50 µs late. */
    prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
    pthread_mutex_lock(&mu);
    while (!is_stopping() && governing()) {
        int64_t delay;

        duty_poll(now_ns());
        settle_duty();
        delay = govern(now_ns());
        /* Read under mu: a launch that finds us idle bumps it, and the wait below sees that. */
        uint32_t seq = __atomic_load_n(&gov_seq, __ATOMIC_ACQUIRE);
        struct timespec ts = { (time_t)(delay / 1000000000LL), (long)(delay % 1000000000LL) };

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

void stop_at_exit(void)
{
    struct timespec pause = { 0, 100000 };
    uint64_t now = now_ns();
    int i, tries;

    __atomic_store_n(&stopping, 1, __ATOMIC_RELEASE);
    /* exit() may come from a signal handler that interrupted this very thread holding mu. */
    for (tries = 0; pthread_mutex_trylock(&mu) != 0; tries++) {
        if (tries == 100) {
            for (i = 0; i < MAX_ORD; i++)
                if (gdevs[i].board)
                    gs_board_release(gdevs[i].board, self()); /* lock-free */
            return;
        }
        nanosleep(&pause, NULL);
    }
    for (i = 0; i < MAX_ORD; i++) {
        if (gdevs[i].state > 0) {
            charge(&gdevs[i], now);
            if (gdevs[i].holding) {
                gs_board_release(gdevs[i].board, self());
                gdevs[i].holding = 0;
            }
        }
    }
    gov_wake();
    pthread_cond_broadcast(&launch_cv);
    pthread_mutex_unlock(&mu);
}

/* With mu held. */
int governor_start(void)
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
