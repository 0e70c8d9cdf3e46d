/*
 * What a ceiling bills: the share of a device's time in flight in which this process's
 * kernels really ran, from NVML's per-process samples.
 *
 * The governor sees work in flight (from a launch to the marker behind it seen complete), not
 * kernels running: a loop of small kernels launched one by one leaves the device idle most of
 * that time, waiting for the host's next launch, and billing all of it held such a loop under
 * --compute 75 to 56-77 % of its native rate while the GPU stood idle (issue 30). NVML's
 * per-process samples say, for each of the driver's sample periods (about 1/6 s) in which a
 * process ran, the share of the period in which its kernels ran. So each period's samples are
 * set against the time in flight the governor counted in the same period, and the ratio (the
 * duty) scales every charge: a saturating stream is billed all its time in flight (duty 1),
 * a launch-bound loop its kernels only. bench/nvml_busy.py measured what the samples say.
 *
 * The duty predicts; NVML's count settles. Each sample taken is also set against what this
 * process billed in the same period, and the difference is taken from (or given back to) the
 * budget (duty_correction): a duty learnt at another ceiling, or before the workload changed,
 * lags by NVML's delay and the decay, and a CUDA loop of small kernels billed exactly 90, 75 and
 * 50 % was seen by NVML at 84.6, 70.9 and 46.1 % (H100, 2026-12-07). Billed and counted then
 * agree over any stretch NVML speaks of; the usage counter stays monotonic (a refund is kept
 * off its later additions).
 *
 * Fails closed: until NVML has said something, where it cannot name this process (another PID
 * namespace whose host PID no daemon found for it, an MPS client billed to its server), or
 * when its samples stop, the duty is 1 (all the time in flight, as before). The duty only ever
 * lowers what a process bills itself: a process could as well not bill at all (it can write its
 * own memory); the daemon's guard holds managed tenants to their ceilings from NVML by itself
 * (docs/design.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/parse.h"
#include "common/proc.h"
#include "preload/compute/compute_internal.h"

/* The clocks (tests/unit/test_duty.c runs this file on a clock of its own). */
#ifndef duty_clock
#define duty_clock clock_gettime
#endif

/* The initial PID namespace's inode (the kernel's PROC_PID_INIT_INO): NVML's PIDs are its. */
#define INIT_PID_NS 0xEFFFFFFCu

/* How often NVML is asked while a governed device has work in flight (each call costs 2-3 ms
   of this thread's time on the H100: NVML's period there is 200 ms). */
#ifndef DUTY_POLL_NS
#define DUTY_POLL_NS 200000000LL
#endif

/* The samples weigh in with this time constant (a workload's change is followed within it). */
#ifndef DUTY_TAU_NS
#define DUTY_TAU_NS 1000000000LL
#endif

/* Time in flight the estimate needs before it is used, summed over its samples (decayed). */
#ifndef DUTY_MIN_SPAN_NS
#define DUTY_MIN_SPAN_NS 50000000LL
#endif

/*
 * With no sample of ours heard while this much time in flight was counted, NVML is taken to
 * say nothing: duty 1. Counted in time in flight, not on the clock: a process that idles, or
 * launches uncapped for a while (nothing is counted then), keeps the duty it learnt, and a
 * window under a ceiling after such a stretch is not billed all its time in flight until
 * NVML's next sample (which comes ~0.2-0.6 s later), which throttled a launch-bound loop under
 * a ceiling it never reached at the start of every window (H100, 2026-12-06).
 */
#ifndef DUTY_STALE_NS
#define DUTY_STALE_NS 3000000000LL
#endif

/* The duty never goes below this: a workload NVML sees at 0 % is still billed something. */
#ifndef DUTY_MIN_PPM
#define DUTY_MIN_PPM 20000
#endif

/* Spacings under this between two samples are not a sample period (20 ms). */
#define DUTY_PERIOD_MIN_US 20000ULL

/*
 * Two device stamps this close are one sample: stamps on the monotonic clock are moved to the
 * realtime one afresh at each poll, by an offset that moves a microsecond or so (rounding, NTP's
 * slewing), and each poll fetches the samples of the last second again.
 */
#define DUTY_SAME_STAMP_US 2000ULL

/* The spacings kept to learn a sample period from. */
#define DUTY_SPACINGS 8

/*
 * A sample period learnt from the spacing of consecutive stamps: the smallest spacing of at
 * least 20 ms that another of the last 8 matches to within 2 %, never longer than one learnt
 * before (a skipped period makes a multiple, and a process that runs every other period for a
 * while confirms one). One short spacing, a sampler started again at another phase or a late
 * stamp, is never taken for the period: a period learnt too short bills each sample's share of
 * the real period against the time in flight of a shorter window, less than the kernels ran
 * (one 100 ms spacing among 200 ms ones billed a throttled stream 2/3 of its kernels' time).
 */
struct duty_period {
    int64_t ns; /* 0: none confirmed yet */
    int64_t recent[DUTY_SPACINGS];
    unsigned n;
};

/*
 * Time in flight within [a, b) (monotonic ns): `flight` ns of it (all of it but the short gaps
 * joined over), and what was billed for it (ns), both taken as spread evenly over [a, b).
 */
struct duty_iv {
    uint64_t a, b, flight;
    double billed;
};

/*
 * The stretches of time in flight kept per device (a throttled stream makes one per burst of a
 * few ms; charges that follow on from each other are joined up to 20 ms, so that each entry's
 * bill, spread evenly over it, is what was billed in any part of it: a launch-bound loop never
 * idle, one stretch of 2.35 s billed at a duty that changed, was settled 29 % short when its
 * whole bill was spread over it), and those in which the process launched uncapped (launches
 * less than 5 ms apart make one). Charges less than 1 ms after the entry before are joined
 * to it too (its gaps not counted in flight): a loop that waits for the device after every
 * launch made an entry per launch, 4096 of them 80 ms at 20 us a launch, less than NVML's
 * delay, so its periods reached past the ring and it learnt no duty (billed all its time in
 * flight; a reviewer's note). 4096 entries: 5 s of a throttled stream or more.
 */
#define DUTY_IVS 4096
#define DUTY_IV_JOIN_NS 20000000ULL
#define DUTY_IV_GAP_NS 1000000ULL
#define DUTY_UNCAPPED 64
#define DUTY_UNCAPPED_JOIN_NS 5000000ULL

struct duty_dev {
    int state; /* 0 not asked yet, 1 asking, -1 NVML cannot tell (no handle, no function) */
    nvmlDevice_t h;
    unsigned long long last_ts;     /* our newest sample dealt with, CLOCK_REALTIME us */
    unsigned long long last_dev_ts; /* the newest device sample taken or passed over */
    uint64_t flight_ns;             /* time in flight ever counted (duty_span) */
    uint64_t heard_flight_ns;       /* ... when a sample of ours last came */
    struct duty_period period;      /* NVML's per-process sample period */
    struct duty_period dev_period;  /* the device's */
    unsigned long long prev_ts;     /* our sample before, for the spacing */
    unsigned long long dev_prev_ts; /* the device's newest sample learnt from */
    unsigned crowd; /* NVML had more samples than room: ask about a shorter past (1.6 s >> crowd) */
    double run, span;    /* decayed sums: the kernels' time and the time in flight */
    struct duty_iv *ivs; /* DUTY_IVS of them, made at the first need; NULL: none */
    uint64_t nivs;       /* stretches ever recorded; the newest is ivs[(nivs-1) % N] */
    struct duty_iv uncapped[DUTY_UNCAPPED];
    uint64_t nuncapped;
    int dev_clock;  /* the device samples' clock: DEV_CLOCK_* */
    double correct; /* ns NVML's count says to bill more (less, when negative), not yet taken */
    uint64_t owed;  /* ns given back: kept off the usage counter's next additions */
    uint64_t settled_to;  /* periods are settled from here on (monotonic ns) */
    uint64_t settle_from; /* ... and from the budget's last reset (a new ceiling) */
    uint32_t epoch;       /* the budget's epoch settled under */
    int epoch_known;
};

/* The clock of the device's utilisation samples' stamps (NVML does not name it). */
enum { DEV_CLOCK_UNKNOWN, DEV_CLOCK_REALTIME, DEV_CLOCK_MONOTONIC, DEV_CLOCK_NONE };

static struct duty_dev duties[MAX_ORD];
static uint64_t next_poll_ns;
static int pid_known = -1; /* NVML's PID for this process is getpid() (1), or unknown (0) */

void duty_span(struct gdev *d, uint64_t from, uint64_t to, int64_t billed)
{
    struct duty_dev *u = &duties[d - gdevs];
    struct duty_iv *last;

    if (to <= from)
        return;
    /* Made once per device (with mu held, at its first charge); without it, the duty stays 1. */
    if (u->ivs == NULL && (u->ivs = calloc(DUTY_IVS, sizeof(*u->ivs))) == NULL)
        return;
    u->flight_ns += to - from;
    last = u->nivs ? &u->ivs[(u->nivs - 1) % DUTY_IVS] : NULL;
    if (last && from >= last->b && from - last->b <= DUTY_IV_GAP_NS &&
        to - last->a <= DUTY_IV_JOIN_NS) {
        last->b = to; /* charges while busy follow on from each other, or nearly */
        last->flight += to - from;
        last->billed += (double)billed;
        return;
    }
    u->ivs[u->nivs % DUTY_IVS] = (struct duty_iv){ from, to, to - from, (double)billed };
    u->nivs++;
}

int64_t duty_correction(struct gdev *d, uint32_t epoch, uint64_t now)
{
    struct duty_dev *u = &duties[d - gdevs];
    int64_t c;

    if (u->epoch_known && epoch != u->epoch) {
        /*
         * The budget was reset (a new ceiling starts from nothing): what the periods before
         * owed or were owed is let go with the old budget, and they are not settled later (a
         * refund for them would refill the emptied budget: the burst the reset prevents).
         */
        u->correct = 0;
        u->settle_from = now;
    }
    u->epoch = epoch;
    u->epoch_known = 1;
    c = (int64_t)u->correct;

    u->correct -= (double)c;
    if (c < 0)
        u->owed += (uint64_t)-c;
    stats.duty_corrected_ns += c;
    return c;
}

uint64_t duty_busy(struct gdev *d, int64_t billed)
{
    struct duty_dev *u = &duties[d - gdevs];
    uint64_t b = billed > 0 ? (uint64_t)billed : 0, off = b < u->owed ? b : u->owed;

    u->owed -= off;
    return b - off;
}

void duty_uncapped(struct gdev *d, uint64_t now)
{
    struct duty_dev *u = &duties[d - gdevs];
    struct duty_iv *last = u->nuncapped ? &u->uncapped[(u->nuncapped - 1) % DUTY_UNCAPPED] : NULL;

    if (last && now >= last->b && now - last->b < DUTY_UNCAPPED_JOIN_NS) {
        last->b = now + 1;
        return;
    }
    u->uncapped[u->nuncapped % DUTY_UNCAPPED] = (struct duty_iv){ now, now + 1, 1, 0 };
    u->nuncapped++;
}

/* The part of [a, b) inside [lo, hi). */
static uint64_t overlap(uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
    if (a < lo)
        a = lo;
    if (b > hi)
        b = hi;
    return b > a ? b - a : 0;
}

/*
 * The time in flight counted on d within [a, b) (monotonic ns), and in *billed what was billed
 * for it (an entry's time in flight and bill spread evenly over it); -1 if the kept entries
 * do not reach back that far, or the process launched uncapped then.
 */
static int64_t span_between(const struct duty_dev *u, uint64_t a, uint64_t b, double *billed)
{
    uint64_t i, n;
    double sum = 0;

    *billed = 0;
    if (b <= a || u->ivs == NULL)
        return b <= a ? 0 : -1;
    n = u->nuncapped < DUTY_UNCAPPED ? u->nuncapped : DUTY_UNCAPPED;
    for (i = 0; i < n; i++) {
        const struct duty_iv *v = &u->uncapped[(u->nuncapped - 1 - i) % DUTY_UNCAPPED];

        if (v->b > a && v->a < b)
            return -1;
    }
    n = u->nivs < DUTY_IVS ? u->nivs : DUTY_IVS;
    for (i = 0; i < n; i++) {
        const struct duty_iv *v = &u->ivs[(u->nivs - 1 - i) % DUTY_IVS];
        uint64_t o;

        if (v->b <= a)
            return (int64_t)(sum + 0.5); /* older ones end before the window: they are in order */
        o = overlap(v->a, v->b, a, b);
        sum += (double)v->flight * (double)o / (double)(v->b - v->a);
        *billed += v->billed * (double)o / (double)(v->b - v->a);
    }
    /* All kept stretches reach into the window: the oldest may have gone from the ring. */
    return u->nivs > DUTY_IVS ? -1 : (int64_t)(sum + 0.5);
}

uint32_t duty_ppm(const struct gdev *d, uint64_t now)
{
    const struct duty_dev *u = &duties[d - gdevs];
    double r;

    (void)now;
    if (u->state <= 0 || u->span < (double)DUTY_MIN_SPAN_NS ||
        u->flight_ns - u->heard_flight_ns > (uint64_t)DUTY_STALE_NS)
        return 1000000;
    r = u->run / u->span;
    if (r >= 1.0)
        return 1000000;
    if (r * 1e6 < DUTY_MIN_PPM)
        return DUTY_MIN_PPM;
    return (uint32_t)(r * 1e6);
}

/*
 * What NVML counted in [lo, end) (run ns, of which sp in flight, billed ns billed) against
 * what was billed there, into the correction: only the part after what was settled already (a
 * process's own period that follows a device period taken may reach back into it) and after
 * the budget's last reset, NVML's count taken evenly over the period for a part of it. Never
 * more than the time in flight: NVML's figure may hold another process's work it does not
 * list, or an uncapped kernel's that ran on, and billing all the time in flight is what a
 * process did before the duty (a reviewer's case: 5 ms bursts beside an unlisted process at 90 %
 * were settled 37 times their time in flight).
 */
static void settle(struct duty_dev *u, uint64_t lo, uint64_t end, double run, int64_t sp,
                   double billed)
{
    uint64_t from = lo;

    if (from < u->settled_to)
        from = u->settled_to;
    if (from < u->settle_from)
        from = u->settle_from;
    if (end > u->settled_to)
        u->settled_to = end;
    if (from >= end)
        return;
    if (from > lo) {
        run = run * (double)(end - from) / (double)(end - lo);
        sp = span_between(u, from, end, &billed);
    }
    if (sp < 0)
        return;
    if (run > (double)sp)
        run = (double)sp;
    u->correct += run - billed;
}

/*
 * Takes one sample: in the period of p ns that ended at ts (realtime us), this process's
 * kernels ran pct % of it, set against the time in flight counted in the same period. 1 if
 * it counted, 0 if it says nothing (no time in flight then, or on no clock we know).
 */
static int take(struct duty_dev *u, unsigned long long ts, unsigned pct, int64_t p, uint64_t now,
                int64_t rt_minus_mono)
{
    int64_t end_mono = (int64_t)ts * 1000 - rt_minus_mono, sp;
    double decay, run, billed;
    uint64_t lo, end;

    if (p <= 0 || end_mono <= p || (uint64_t)end_mono > now + 1000000000ULL)
        return 0; /* on no clock we know */
    lo = (uint64_t)(end_mono - p);
    end = (uint64_t)end_mono;
    sp = span_between(u, lo, end, &billed);
    /*
     * A period with nothing counted in flight, or in which the process launched without a
     * ceiling (nothing is counted then, while NVML sees its kernels), says nothing of the
     * duty. (Each sample is not clipped to its own time in flight: NVML's period and ours
     * are not cut at the same instant, so a sample errs either way, and a clip would keep only
     * the errors one way, billing less than the kernels ran; the ratio of the sums is clipped
     * instead.)
     */
    if (sp <= 0)
        return 0;
    if (sp > p)
        sp = p;
    run = (double)p * (pct > 100 ? 100 : pct) / 100.0;
    decay = 1.0 - (double)p / (double)DUTY_TAU_NS;
    if (decay < 0)
        decay = 0;
    u->run = u->run * decay + run;
    u->span = u->span * decay + (double)sp;
    settle(u, lo, end, run, sp, billed);
    stats.duty_samples++;
    return 1;
}

/* A time in microseconds. */
static unsigned long long us_of(const struct timespec *t)
{
    return (unsigned long long)t->tv_sec * 1000000ULL + (unsigned long long)t->tv_nsec / 1000ULL;
}

/* Clock c now, in microseconds. */
static unsigned long long clock_us(clockid_t c)
{
    struct timespec t;

    duty_clock(c, &t);
    return us_of(&t);
}

/*
 * The device's utilisation samples newer than since_rt (realtime us) into dev (*n of room),
 * asked on the clock *clock names; while it is unknown, realtime first, then monotonic, and
 * the clock is learnt from the stamps that come (within two minutes of one clock's now), not
 * from which question had an answer. A device that has no such samples (NOT_SUPPORTED,
 * FUNCTION_NOT_FOUND) is not asked again (*clock DEV_CLOCK_NONE). Not under mu.
 */
static nvmlReturn_t device_samples(nvmlDevice_t h, unsigned long long since_rt, int *clock,
                                   nvmlValueType_t *vt, unsigned *n, nvmlSample_t *dev)
{
    const unsigned long long near = 120000000ULL;
    int64_t off = (int64_t)clock_us(CLOCK_REALTIME) - (int64_t)clock_us(CLOCK_MONOTONIC);
    unsigned room = *n, k;
    nvmlReturn_t r = NVML_ERROR_NOT_FOUND;
    int c;

    for (c = DEV_CLOCK_REALTIME; c <= DEV_CLOCK_MONOTONIC && *clock != DEV_CLOCK_NONE; c++) {
        unsigned long long since = since_rt, newest = 0, rt_now, mono_now;

        if (*clock != DEV_CLOCK_UNKNOWN && c != *clock)
            continue;
        if (c == DEV_CLOCK_MONOTONIC)
            since = (int64_t)since_rt > off ? since_rt - (unsigned long long)off : 0;
        *n = room;
        r = gs__real.nvmlDeviceGetSamples(h, NVML_GPU_UTILIZATION_SAMPLES, since, vt, n, dev);
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
            *clock = DEV_CLOCK_NONE;
            break;
        }
        if (r != NVML_SUCCESS || *n == 0)
            continue;
        if (*n > room)
            *n = room;
        for (k = 0; k < *n; k++)
            if (dev[k].timeStamp > newest)
                newest = dev[k].timeStamp;
        rt_now = clock_us(CLOCK_REALTIME);
        mono_now = clock_us(CLOCK_MONOTONIC);
        if (*clock == DEV_CLOCK_UNKNOWN) {
            if (newest + 4 * near > rt_now && newest < rt_now + near)
                *clock = DEV_CLOCK_REALTIME;
            else if (newest + 4 * near > mono_now && newest < mono_now + near)
                *clock = DEV_CLOCK_MONOTONIC;
        }
        return r;
    }
    *n = 0;
    return r;
}

/*
 * The PID NVML names this process by, 0 while unknown: getpid() in the initial PID namespace;
 * in another (a pod's), the host PID the daemon found for its slot in the tenant's file
 * (note_hosts in src/daemon/registry.c, at its next sweep after the process's first CUDA use).
 */
static pid_t nvml_me(void)
{
    if (pid_known < 0)
        pid_known = gs_proc_self_ns() == INIT_PID_NS;
    return pid_known ? getpid() : gs__host_pid();
}

/* NVML's handle of d's GPU in *h: 0 or -1. */
static int handle_of(const struct gdev *d, nvmlDevice_t *h)
{
    char uuid[GS_UUID_STRLEN];

    if (gs__nvml_ready() < 0 || !gs__real.nvmlDeviceGetHandleByUUID ||
        !gs__real.nvmlDeviceGetProcessUtilization)
        return -1;
    gs_format_uuid(gs__state.tenant->dev[d->entry].uuid, uuid);
    memcpy(uuid, "GPU-", 4);
    return gs__real.nvmlDeviceGetHandleByUUID(uuid, h) == NVML_SUCCESS ? 0 : -1;
}

#define DUTY_MAX_SAMPLES 256

#define DUTY_DEV_SAMPLES 64

/* A device sample's value as a percentage, whatever type NVML gave it in; 101 if none. */
static unsigned sample_pct(const nvmlSample_t *x, nvmlValueType_t vt)
{
    switch (vt) {
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        return x->sampleValue.uiVal <= 100 ? x->sampleValue.uiVal : 101;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        return x->sampleValue.ulVal <= 100 ? (unsigned)x->sampleValue.ulVal : 101;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return x->sampleValue.ullVal <= 100 ? (unsigned)x->sampleValue.ullVal : 101;
    case NVML_VALUE_TYPE_DOUBLE:
        return x->sampleValue.dVal >= 0 && x->sampleValue.dVal <= 100
                   ? (unsigned)(x->sampleValue.dVal + 0.5)
                   : 101;
    default:
        return 101;
    }
}

/*
 * The device's samples, each made (timeStamp: realtime us, sampleValue.uiVal: percent) in
 * place; those on no clock we know or with no percentage are dropped. NVML documents its
 * stamps as CPU timestamps in microseconds without naming the clock: the per-process ones are
 * CLOCK_REALTIME (the duty is learnt from them on the H100), and a device stamp within two
 * minutes of the monotonic clock is taken as that one. Returns how many are left.
 */
static unsigned normalise_samples(nvmlSample_t *dev, unsigned n, nvmlValueType_t vt,
                                  const struct timespec *rt, const struct timespec *mono)
{
    unsigned long long rt_us = us_of(rt), mono_us = us_of(mono);
    const unsigned long long near = 120000000ULL;
    unsigned k, out = 0;

    for (k = 0; k < n; k++) {
        unsigned long long ts = dev[k].timeStamp;
        unsigned pct = sample_pct(&dev[k], vt);

        if (pct > 100)
            continue;
        if (ts + near > rt_us && ts < rt_us + near)
            ; /* realtime already */
        else if (ts + near > mono_us && ts < mono_us + near)
            ts = ts + rt_us - mono_us;
        else
            continue;
        dev[out].timeStamp = ts;
        dev[out].sampleValue.uiVal = pct;
        out++;
    }
    return out;
}

/*
 * Whether a process other than me ran (a sample above 0 %) in a period of NVML's that overlaps
 * [lo, hi) (realtime us; the per-process periods are p us long).
 */
static int other_ran(const nvmlProcessUtilizationSample_t *buf, unsigned n, pid_t me,
                     unsigned long long lo, unsigned long long hi, unsigned long long p)
{
    unsigned k;

    for (k = 0; k < n; k++)
        if (buf[k].pid != (unsigned)me && buf[k].smUtil > 0 && buf[k].timeStamp > lo &&
            buf[k].timeStamp < hi + p)
            return 1;
    return 0;
}

/* dev[0..n) in the order of their stamps (n is at most DUTY_DEV_SAMPLES). */
static void sort_samples(nvmlSample_t *dev, unsigned n)
{
    unsigned i, j;

    for (i = 1; i < n; i++) {
        nvmlSample_t x = dev[i];

        for (j = i; j > 0 && dev[j - 1].timeStamp > x.timeStamp; j--)
            dev[j] = dev[j - 1];
        dev[j] = x;
    }
}

/* Learns from two consecutive stamps (realtime us), prev before ts (struct duty_period). */
static void learn_period(struct duty_period *pd, unsigned long long prev, unsigned long long ts)
{
    int64_t best = 0;
    unsigned i, j, m;

    if (!prev || ts < prev + DUTY_PERIOD_MIN_US)
        return;
    pd->recent[pd->n % DUTY_SPACINGS] = (int64_t)(ts - prev) * 1000;
    pd->n++;
    m = pd->n < DUTY_SPACINGS ? pd->n : DUTY_SPACINGS;
    for (i = 0; i < m; i++) {
        int64_t c = pd->recent[i];

        for (j = 0; j < m; j++)
            if (j != i && llabs(pd->recent[j] - c) * 50 <= c)
                break;
        if (j < m && (best == 0 || c < best))
            best = c;
    }
    /* Never longer again: a stretch of skipped periods makes a confirmed multiple. */
    if (best && (pd->ns == 0 || best < pd->ns))
        pd->ns = best;
}

/*
 * Our sample s (smUtil: the share of NVML's period ending at its stamp in which this process had
 * work on the device) taken into the duty. Where no other process ran about then, the device's
 * own utilisation samples stand for ours, each taken over its own period (the unit): the
 * per-process figure counts the time a process has work on the device, which for kernels of a
 * few microseconds queued back to back includes the device's own gaps between them (a CUDA
 * <<<>>> loop of 3.8-us kernels on the H100 was billed 50 % at --compute 50 while the device's
 * utilisation read 45 % and its rate said 38 %); the device's figure is what a ceiling is judged
 * by, and when the process ran alone it is the process's. The device's periods need not end
 * when the processes' do: each device sample is set against the time in flight counted in its
 * own period, so no part of one is lost at the edges of a stretch of work (weighing device
 * samples by their overlap with our period lost part of the first and last period of every
 * stretch: a saturating stream was billed 0.88 of its kernels' time on the simulator, its
 * periods 2/5 apart). Returns 0, or 1 to wait: the device's period that holds the end of ours
 * is not reported yet (the next poll takes s again), for two periods at most.
 */
static int take_sample(struct duty_dev *u, const nvmlProcessUtilizationSample_t *s,
                       const nvmlProcessUtilizationSample_t *buf, unsigned n, pid_t me,
                       const nvmlSample_t *dev, unsigned ndev, unsigned long long now_rt,
                       uint64_t now, int64_t rt_minus_mono)
{
    int64_t pp = u->period.ns > 0 ? u->period.ns : u->dev_period.ns, dp = u->dev_period.ns;
    unsigned long long ts = s->timeStamp, p_us, d_us, lo, passed = 0;
    unsigned k, took = 0, taken_before = 0;

    if (pp <= 0)
        return 0; /* no period known yet (the first sample of a process without device samples) */
    p_us = (unsigned long long)pp / 1000;
    lo = ts > p_us ? ts - p_us : 0;
    if (ndev > 0 && dp > 0 && !other_ran(buf, n, me, lo, ts, p_us)) {
        d_us = (unsigned long long)dp / 1000;
        if (dev[ndev - 1].timeStamp < ts && now_rt < ts + 2 * p_us)
            return 1;
        for (k = 0; k < ndev; k++) {
            unsigned long long e = dev[k].timeStamp, w = d_us;

            if (e <= lo || e >= ts + d_us)
                continue; /* its period is not in ours */
            if (e <= u->last_dev_ts + DUTY_SAME_STAMP_US) {
                taken_before++; /* with our sample before */
                continue;
            }
            /* Its own window: back to the device's sample before it, where that is at most a
               period and a half back (not a gap) and not a repeat (a sampler started again at
               another phase makes one short period). */
            if (k > 0 && e - dev[k - 1].timeStamp >= DUTY_PERIOD_MIN_US &&
                e - dev[k - 1].timeStamp <= d_us + d_us / 2)
                w = e - dev[k - 1].timeStamp;
            /* (One with another's work in it, in a part of it outside ours, is passed over.) */
            if (!other_ran(buf, n, me, e > w ? e - w : 0, e, p_us)) {
                stats.duty_dev_samples +=
                    take(u, e, dev[k].sampleValue.uiVal, (int64_t)w * 1000, now, rt_minus_mono);
                took++;
            }
            u->last_dev_ts = e;
        }
        /*
         * Our own figure only where the device's spoke of none of our period (every device
         * period in it had another's work, or none was reported): where some of it was taken
         * with our sample before, the rest is let go rather than counted twice.
         */
        if (took || taken_before)
            return 0;
    }
    take(u, ts, s->smUtil, pp, now, rt_minus_mono);
    /* The device's periods that reach into ours are not taken again later. */
    for (k = 0; k < ndev; k++)
        if (dev[k].timeStamp > passed && dev[k].timeStamp < ts + (unsigned long long)dp / 1000)
            passed = dev[k].timeStamp;
    if (passed > u->last_dev_ts)
        u->last_dev_ts = passed;
    return 0;
}

void duty_fork_child(void)
{
    int i;

    /* The parent's samples and PID are not the child's: it learns its own (duty 1 meanwhile). */
    for (i = 0; i < MAX_ORD; i++)
        free(duties[i].ivs);
    memset(duties, 0, sizeof(duties));
    next_poll_ns = 0;
    pid_known = -1;
    stats.duty_pid = 0;
}

void duty_poll(uint64_t now)
{
    static nvmlProcessUtilizationSample_t buf[DUTY_MAX_SAMPLES];
    static nvmlSample_t dev[DUTY_DEV_SAMPLES];
    pid_t me;
    int i;

    if (now < next_poll_ns)
        return;
    next_poll_ns = now + DUTY_POLL_NS; /* (a PID not known yet is asked for again then) */
    if ((me = nvml_me()) <= 0)
        return;
    stats.duty_pid = me;
    for (i = 0; i < MAX_ORD; i++) {
        struct gdev *d = &gdevs[i];
        struct duty_dev *u = &duties[i];
        unsigned int n = DUTY_MAX_SAMPLES, ndev = DUTY_DEV_SAMPLES, k;
        unsigned long long since, dev_since, now_rt;
        int dev_clock;
        nvmlValueType_t vt = NVML_VALUE_TYPE_SIGNED_INT; /* (none we read, until NVML says) */
        nvmlReturn_t rd = NVML_ERROR_NOT_SUPPORTED;
        nvmlReturn_t r;
        struct timespec rt, mono;
        int64_t rt_minus_mono;
        nvmlDevice_t h;
        int state, asked = 0;

        if (d->state <= 0 || u->state < 0 ||
            (!d->busy_since && now - d->idle_since > 2000000000ULL))
            continue;
        if (u->state == 0)
            /* From a second ago: older samples (of other processes too) say nothing of ours. */
            u->last_ts = clock_us(CLOCK_REALTIME) - 1000000ULL;
        /*
         * Two periods back (400 ms to 2 s): other processes' samples that reach into our next
         * ones. Where NVML had more samples than room (dozens of processes), a shorter past,
         * halved at each such answer: our samples older than that are let go.
         */
        {
            unsigned long long back =
                2 *
                (unsigned long long)(u->period.ns > u->dev_period.ns ? u->period.ns
                                                                     : u->dev_period.ns) /
                1000;
            if (back < 400000ULL)
                back = 400000ULL;
            if (back > 2000000ULL)
                back = 2000000ULL;
            since = u->last_ts > back ? u->last_ts - back : 0;
            if (u->crowd) {
                unsigned long long keep = 1600000ULL >> u->crowd, rt_us = clock_us(CLOCK_REALTIME);

                if (keep < 50000ULL)
                    keep = 50000ULL;
                if (rt_us > keep && since < rt_us - keep)
                    since = rt_us - keep;
                if (u->last_ts < since)
                    u->last_ts = since;
            }
        }
        /* The device's samples from one period before our last one on: the one that pairs. */
        dev_since = since > 1000000ULL ? since - 1000000ULL : 0;
        h = u->h;
        state = u->state;
        dev_clock = u->dev_clock;
        /*
         * NVML's calls may take a while: not under mu (launches go on meanwhile). Only this
         * thread writes u's handle and state; others read them under mu, so they are set
         * after it is taken again.
         */
        pthread_mutex_unlock(&mu);
        if (state == 0)
            state = handle_of(d, &h) == 0 ? 1 : -1;
        r = state > 0 ? gs__real.nvmlDeviceGetProcessUtilization(h, buf, &n, since)
                      : NVML_ERROR_NOT_SUPPORTED;
        if (r == NVML_SUCCESS && gs__real.nvmlDeviceGetSamples && dev_clock != DEV_CLOCK_NONE) {
            rd = device_samples(h, dev_since, &dev_clock, &vt, &ndev, dev);
            asked = 1;
        }
        duty_clock(CLOCK_REALTIME, &rt);
        duty_clock(CLOCK_MONOTONIC, &mono);
        ndev = rd == NVML_SUCCESS
                   ? normalise_samples(dev, ndev < DUTY_DEV_SAMPLES ? ndev : DUTY_DEV_SAMPLES, vt,
                                       &rt, &mono)
                   : 0;
        pthread_mutex_lock(&mu);
        u->h = h;
        u->state = state;
        u->dev_clock = dev_clock;
        if (asked) {
            stats.duty_dev_asks++;
            stats.duty_dev_rc = (int)rd;
            stats.duty_dev_clock = dev_clock;
        }
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
            u->state = -1;
            continue;
        }
        if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
            if (u->crowd < 5)
                u->crowd++; /* (more samples than room since then: a shorter past next time) */
            continue;
        }
        if (r != NVML_SUCCESS)
            continue; /* NOT_FOUND: nothing new */
        rt_minus_mono = ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000LL +
                        ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
        now = now_ns();
        now_rt = us_of(&rt);
        n = n < DUTY_MAX_SAMPLES ? n : DUTY_MAX_SAMPLES;
        if (u->crowd && n < DUTY_MAX_SAMPLES / 4)
            u->crowd--; /* room again: a longer past next time */
        sort_samples(dev, ndev);
        for (k = 1; k < ndev; k++)
            if (dev[k].timeStamp > u->dev_prev_ts + DUTY_SAME_STAMP_US) {
                learn_period(&u->dev_period, dev[k - 1].timeStamp, dev[k].timeStamp);
                u->dev_prev_ts = dev[k].timeStamp;
            }
        /* Oldest first: the period is learnt from consecutive samples. */
        for (;;) {
            int best = -1;

            for (k = 0; k < n; k++)
                if (buf[k].pid == (unsigned)me && buf[k].timeStamp > u->last_ts &&
                    (best < 0 || buf[k].timeStamp < buf[best].timeStamp))
                    best = (int)k;
            if (best < 0)
                break;
            u->heard_flight_ns = u->flight_ns; /* NVML speaks of us, if not of this period */
            if (buf[best].timeStamp > u->prev_ts) {
                learn_period(&u->period, u->prev_ts, buf[best].timeStamp);
                u->prev_ts = buf[best].timeStamp;
            }
            if (take_sample(u, &buf[best], buf, n, me, dev, ndev, now_rt, now, rt_minus_mono))
                break; /* this sample and the later ones again at the next poll */
            u->last_ts = buf[best].timeStamp;
        }
    }
}

const char *duty_clock_name(int clock)
{
    switch (clock) {
    case DEV_CLOCK_REALTIME:
        return "realtime";
    case DEV_CLOCK_MONOTONIC:
        return "monotonic";
    case DEV_CLOCK_NONE:
        return "no (none given)";
    default:
        return "unknown";
    }
}

int64_t duty_bill(const struct gdev *d, int64_t dt, uint64_t now)
{
    uint32_t ppm = duty_ppm(d, now);

    return ppm >= 1000000 ? dt : (int64_t)((double)dt * ppm / 1e6);
}
