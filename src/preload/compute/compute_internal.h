/*
 * What the parts of the compute governor (src/preload/compute/) share: the
 * tunables, the per-device, stream, marker, event and graph tables, the lock
 * and condition variable, and the helpers that cross files. Only those files
 * include it. Lock order: mu is taken alone (the board and the tenant's
 * budget are lock-free words; tenant_abi.h).
 */
#ifndef GPUSLICE_PRELOAD_COMPUTE_INTERNAL_H
#define GPUSLICE_PRELOAD_COMPUTE_INTERNAL_H

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
#define MARK_NS 200000LL /* a marker behind about this much estimated work */
#endif

#ifndef QUEUE_NS
#define QUEUE_NS 2000000LL /* keep at most about this much work queued */
#endif

#ifndef RESUME_NS
#define RESUME_NS 2000000LL /* after the budget ran out, wait until this much is back */
#endif

#ifndef QUANTUM_NS
#define QUANTUM_NS 10000000LL /* hold the device this long at most while others wait */
#endif

#ifndef YIELD_GRACE_NS
#define YIELD_GRACE_NS 2000000LL /* after yielding, leave the device to a waiter this long */
#endif

#ifndef POLL_NS
#define POLL_NS 250000LL /* governor poll while work is in flight (see CHARGE_STEP_NS) */
#endif

#ifndef CHARGE_STEP_NS
#define CHARGE_STEP_NS 50000LL /* a launch charges the busy time since the last charge past this */
#endif

#ifndef POLL_FAST_NS
#define POLL_FAST_NS 20000LL /* ... while a launch waits for it */
#endif

#ifndef TAIL_NS
#define TAIL_NS 100000LL /* unmarked work this old gets a marker from the governor */
#endif

#ifndef MAX_WAIT_NS
#define MAX_WAIT_NS 5000000LL /* a waiting launch re-reads limits at least this often */
#endif

#ifndef SPIN_NS
#define SPIN_NS 200000LL /* a launch waiting for budget is awake this long before it is due */
#endif

#ifndef MAX_CHARGE_NS
#define MAX_CHARGE_NS                                                                              \
    10000000LL /* one poll charges at most this (the process may have been stopped) */
#endif

#ifndef DEBT_FLOOR_NS
#define DEBT_FLOOR_NS 1000000000LL /* the budget never owes more than this */
#endif

#ifndef ABOVE_GRACE_NS
#define ABOVE_GRACE_NS                                                                             \
    5000000LL /* a higher class counts as active this long after its work was last seen */
#endif

#ifndef YIELD_QUEUE_NS
#define YIELD_QUEUE_NS 200000LL /* while a higher class is active, keep at most this queued */
#endif

#ifndef HOLD_IDLE_NS
#define HOLD_IDLE_NS                                                                               \
    300000LL /* a holder whose work ended keeps the device this long for its next launch */
#endif

#ifndef QUANTUM_MAX_NS
#define QUANTUM_MAX_NS 200000000LL /* a weight's quantum (QUANTUM_NS x weight) at most */
#endif

#ifndef TURN_PATIENCE_NS
#define TURN_PATIENCE_NS 100000000LL /* a launch waits this long for its turn, then overlaps */
#endif

#ifndef STALE_NS
#define STALE_NS 500000000LL /* unmarked work nothing can mark is taken as done after this */
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
    int shared_board; /* the daemon's, of every user's tenants: its class stamps are ignored */
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
    uint64_t idle_since;  /* when its work last ended */
    uint64_t wait_since;  /* when a launch began waiting for its turn on the board; 0 = none */
    /*
     * Yielding to a higher class (admission.c): the class it yields to, or 0; the SMs its
     * launches move to meanwhile (a green context of about three quarters of the device,
     * route.c, made at the first need, under MPS only): 0 not tried, 1 ready, -1 cannot be
     * made.
     */
    int above;
    uint64_t peer_ns; /* classes.c: when the daemon's other tenants were last looked at here */
    uint32_t peer_prio;
    int peer_above;
    int route;
    unsigned route_cluster; /* the largest thread-block cluster the partition holds */
    CUgreenCtx green;
    CUcontext primary;
};

struct gstream {
    int used; /* 0 never used, 1 in use, 2 freed (lookups probe past it) */
    enum stream_kind kind;
    CUstream h;
    CUcontext ctx;
    pid_t tid; /* per-thread default streams: the thread */
    int ord;
    int unmarked;
    int graph; /* a graph launch is among the unmarked work */
    int64_t unmarked_est;
    uint64_t first_unmarked_ns;
    uint64_t last_launch_ns;
    uint64_t last_done_ns; /* when its last marker was seen complete */
    int64_t cost;          /* estimated ns per launch, 0 = unknown */
    CUstream shadow;       /* its twin on the device's yield partition, NULL = none yet */
    CUevent ev_in, ev_out; /* the order between the two: stream -> twin -> stream */
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

/* Which streams those are (a capture is ended on the stream it began on). */
#define MAX_CAPTURES 64

struct capture {
    CUstream h;
    pid_t tid; /* for the per-thread and legacy default streams */
};

/* Streams that may hold unmarked work, so a poll need not scan them all. */
#define MAX_HOT 16

/* What GPUSLICE_DEBUG=1 reports at exit. */
struct compute_stats {
    unsigned long launches, marks, budget_waits, queue_waits, board_waits, yields, capture_passes,
        polls, queries, settles, overlaps, stale, tail_queries, above_waits, routed, turns,
        routed_clusters, cluster_stays;
    uint64_t held_ns; /* the device board held, over all turns */
    /* Governor polls that found the board held here with work running, and of those, someone
       waiting; the longest a turn had lasted at such a poll. */
    unsigned long holding_polls, waited_polls;
    uint64_t longest_hold_ns;
    uint64_t wait_ns;
    unsigned long gov_naps; /* timed sleeps of the governor, and their length in all */
    uint64_t gov_nap_ns;
    unsigned long duty_samples;     /* NVML's samples taken into the duty (duty.c) */
    unsigned long duty_dev_samples; /* ... of them the device's own */
    int64_t duty_corrected_ns;      /* what NVML's count added to the bills (less taken back) */
    unsigned long duty_dev_asks;    /* the device's samples asked for */
    int duty_dev_rc;                /* ... NVML's last answer */
    int duty_dev_clock;             /* ... and the clock learnt for their stamps (DEV_CLOCK_*) */
    int duty_pid;                   /* the PID NVML names this process by, as last asked; 0 none */
};

struct admit {
    int routable;   /* in: a kernel launch that may move to the yield partition: 0 not, else
                       the blocks in one of its clusters (1 for none) */
    CUstream route; /* out: the twin stream it goes to instead, or NULL */
    CUstream orig;  /* ... the program's stream, and the events ordering the two */
    CUevent ev_in, ev_out;
    struct gstream *s;
    int graph_idx;
    int mark;    /* record a marker behind this launch */
    int64_t est; /* what it was counted as */
};

extern pthread_mutex_t mu;
extern pthread_mutex_t mu;
extern pthread_cond_t launch_cv;
extern struct gdev gdevs[MAX_ORD];
extern struct gstream streams[MAX_STREAMS];
extern struct gmark marks[MAX_MARKS];
extern int nmarks;
extern struct gevent events[MAX_EVENTS];
extern int nevents;
extern struct ggraph graphs[MAX_GRAPHS];
extern struct gstream *last_stream;
extern int captures;
extern struct capture capturing[MAX_CAPTURES];
extern int hot[MAX_HOT];
extern int nhot;
extern int hot_overflow;
extern pid_t gov_pid;
extern pid_t my_pid;
extern int gov_idle;
extern uint32_t gov_seq;
extern uint64_t last_admit_ns;
extern int stopping;
extern uint64_t my_start_time;
extern struct compute_stats stats;
int is_stopping(void);
pid_t self(void);
int governing(void);
uint64_t now_ns(void);

/* classes.c: a class's work on a device, among one user's tenants and the daemon's. */
int class_wanted(struct gdev *d, uint32_t prio);
void class_note(struct gdev *d, uint32_t prio, uint64_t now);
int class_above(struct gdev *d, uint32_t prio, uint64_t now, uint64_t grace);
int armed(void);
struct gpuslice_tenant_device *entry_of(const struct gdev *d);
/* The ceiling that governs d (100: a class or weight alone, 0: none), and the class and weight. */
uint32_t governed(const struct gdev *d, uint32_t *prio, uint32_t *weight);
uint32_t ceiling_of(const struct gdev *d);
int64_t budget_cap(uint32_t pct);
int64_t resume_level(uint32_t pct);
struct gdev *gdev_get(int ord);
int stream_key(CUstream h, int ptds, enum stream_kind *kind, CUcontext *ctx);
struct gstream *stream_get(CUstream h, int ptds);
int64_t graph_cost(CUgraphExec g, int add);
void drop_unmarked(struct gstream *s);
void mark(struct gstream *s, int graph_idx);
void tail(struct gstream *s);
void mark_done(int i, uint64_t now);
void charge(struct gdev *d, uint64_t now);
/* duty.c: what a charge bills (see there). With mu held. */
void duty_span(struct gdev *d, uint64_t from, uint64_t to, int64_t billed);
/* What NVML's count says to bill more (negative: to give back) since the last call; epoch:
   the budget's (a change lets go of what the periods before it owed). */
int64_t duty_correction(struct gdev *d, uint32_t epoch, uint64_t now);
/* Of a bill (or a correction) of billed ns, what goes to the usage counter (refunds kept off). */
uint64_t duty_busy(struct gdev *d, int64_t billed);
void duty_uncapped(struct gdev *d, uint64_t now); /* it launched without a ceiling now */
uint32_t duty_ppm(const struct gdev *d, uint64_t now);
int64_t duty_bill(const struct gdev *d, int64_t dt, uint64_t now);
/* The name of a DEV_CLOCK_* value (duty.c), for the debug report. */
const char *duty_clock_name(int clock);
/* duty.c: a forked child starts with no duty learnt (from gs__compute_fork_child). */
void duty_fork_child(void);
void duty_poll(uint64_t now); /* may release mu for NVML's calls */
int dev_busy(const struct gdev *d);
void gov_wake(void);
void *governor(void *arg);
void stop_at_exit(void);
int governor_start(void);
int enter(CUstream h, int ptds, CUgraphExec g, struct admit *a);
void leave(struct admit *a, CUresult r);
int64_t turn_of(uint32_t w);
int route_stream(struct gdev *d, struct gstream *s, struct admit *a);
int route_before(struct admit *a);
void route_after(struct admit *a);
void route_drop(struct gstream *s);

#endif
