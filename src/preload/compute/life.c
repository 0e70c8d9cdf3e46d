/* Process life: what a forked child starts with, and what is done at exit. */
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
    memset(gdevs, 0, sizeof(gdevs));
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
    memset(&stats, 0, sizeof(stats)); /* its debug summary counts its own work, not the parent's */
    duty_fork_child();
}

void gs__compute_exit(void)
{
    struct timespec pause = { 0, 100000 };
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
            if (gdevs[i].state > 0)
                gs__log("debug: compute: device %d: the tenant has held it %.3f s in all; this "
                        "process billed %.1f %% of its time in flight (duty, from %lu of "
                        "NVML's samples, %lu of them the device's; NVML's count changed the "
                        "bills by %+.3f s; the device's samples "
                        "asked for %lu times, NVML's last answer %d, stamped on the %s clock; "
                        "NVML's PID for it %d, 0 if not known)",
                        i,
                        __atomic_load_n(&entry_of(&gdevs[i])->compute_busy_ns, __ATOMIC_RELAXED) /
                            1e9,
                        duty_ppm(&gdevs[i], now_ns()) / 1e4, stats.duty_samples,
                        stats.duty_dev_samples, stats.duty_corrected_ns / 1e9, stats.duty_dev_asks,
                        stats.duty_dev_rc, duty_clock_name(stats.duty_dev_clock), stats.duty_pid);
        gs__log(
            "debug: compute: %lu launches governed, %lu markers (%lu quiet streams asked "
            "whether done), "
            "waits: %lu budget, %lu queue, %lu device (%.3f s in all; %lu ran beside a "
            "holder that did not let go), %lu yields, %lu turns on the board (%.2f ms on "
            "average), %lu waits for a higher class, %lu "
            "launches moved to the yield partition (%lu in thread-block clusters; %lu clusters "
            "larger than its groups stayed), %lu captured launches passed, %lu polls (%lu asked the driver), %lu synchronisations "
            "settled; the governor napped %lu times, %.1f us on average, ",
            stats.launches, stats.marks, stats.tail_queries, stats.budget_waits, stats.queue_waits,
            stats.board_waits, stats.wait_ns / 1e9, stats.overlaps, stats.yields, stats.turns,
            stats.turns ? stats.held_ns / 1e6 / (double)stats.turns : 0.0, stats.above_waits,
            stats.routed, stats.routed_clusters, stats.cluster_stays, stats.capture_passes,
            stats.polls, stats.queries, stats.settles, stats.gov_naps,
            stats.gov_naps ? stats.gov_nap_ns / 1e3 / (double)stats.gov_naps : 0.0);
        for (i = 0; i < MAX_ORD; i++)
            if (gdevs[i].state > 0 && gdevs[i].board)
                gs__log("debug: compute: device %d: board held by %d (this process %d, "
                        "holding %d), longest waiter %d; %lu polls held it with work running, %lu "
                        "of them with a waiter; the longest turn %.2f ms",
                        i, __atomic_load_n(&gdevs[i].board->holder_pid, __ATOMIC_RELAXED),
                        (int)self(), gdevs[i].holding,
                        __atomic_load_n(&gdevs[i].board->first_pid, __ATOMIC_RELAXED),
                        stats.holding_polls, stats.waited_polls, stats.longest_hold_ns / 1e6);
    }
    pthread_mutex_unlock(&mu);
}
