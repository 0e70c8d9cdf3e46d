/*
 * The duty (src/preload/compute/duty.c): what a ceiling bills of its time in flight, learnt
 * from NVML's samples. NVML here is a script: the time in flight the governor counted, and the
 * per-process and device samples a driver would stamp for it, with periods of any length and
 * device periods of any phase against the processes'. The duty must come out as the share of
 * the time in flight in which the kernels ran, to within NVML's whole percents.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <math.h>
#include <stdint.h>
#include <time.h>

#include <cmocka.h>

/* duty.c's clocks: the test's own, moved by the scenarios (monotonic; realtime a fixed offset on). */
static uint64_t v_mono_ns;
static uint64_t v_rt_off_ns = 1795000000000000000ULL; /* an epoch of December 2026 */

static int test_clock(clockid_t id, struct timespec *ts)
{
    uint64_t t = v_mono_ns + (id == CLOCK_REALTIME ? v_rt_off_ns : 0);

    ts->tv_sec = (time_t)(t / 1000000000ULL);
    ts->tv_nsec = (long)(t % 1000000000ULL);
    return 0;
}
#define duty_clock test_clock

#include "../../src/preload/compute/duty.c"

/* What duty.c takes from the rest of libgpuslice.so. */
pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
struct gdev gdevs[MAX_ORD];
struct compute_stats stats;
struct gs_driver gs__real;
struct gs_state gs__state;

int gs__nvml_ready(void)
{
    return 0;
}

/* The host PID the daemon would have found for this process (another PID namespace). */
static pid_t v_host_pid;

pid_t gs__host_pid(void)
{
    return v_host_pid;
}

uint64_t now_ns(void)
{
    return v_mono_ns;
}

/* ---- the scripted NVML ------------------------------------------------------------------- */

#define ME_PID_OTHER 4242u
#define MAXS 2048

static nvmlProcessUtilizationSample_t fproc[MAXS];
static unsigned nfproc;
static nvmlSample_t fdev[MAXS];
static unsigned nfdev;
static int dev_samples_supported;
static int dev_mono;       /* the device's samples stamped on the monotonic clock, typed ULL */
static uint64_t base_mono; /* the timeline's start on the monotonic clock (ns) */
static unsigned long long base_rt_us; /* ... and on the realtime clock at its start (us) */
static unsigned long long reveal_us;  /* samples stamped after this are not reported yet */
static unsigned long long dev_asked_since;

static nvmlReturn_t f_proc_util(nvmlDevice_t h, nvmlProcessUtilizationSample_t *u, unsigned *n,
                                unsigned long long since)
{
    unsigned k, c = 0;

    (void)h;
    for (k = 0; k < nfproc; k++)
        if (fproc[k].timeStamp > since && fproc[k].timeStamp <= reveal_us)
            c++;
    if (c == 0) {
        *n = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    if (!u || *n < c) {
        *n = c;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    c = 0;
    /* Newest first: the reader must not take NVML's order as time's. */
    for (k = nfproc; k-- > 0;)
        if (fproc[k].timeStamp > since && fproc[k].timeStamp <= reveal_us)
            u[c++] = fproc[k];
    *n = c;
    return NVML_SUCCESS;
}

static nvmlReturn_t f_samples(nvmlDevice_t h, nvmlSamplingType_t type, unsigned long long since,
                              nvmlValueType_t *vt, unsigned *n, nvmlSample_t *s)
{
    unsigned k, c = 0;

    (void)h;
    if (!dev_samples_supported)
        return NVML_ERROR_NOT_SUPPORTED;
    if (type != NVML_GPU_UTILIZATION_SAMPLES)
        return NVML_ERROR_NOT_SUPPORTED;
    dev_asked_since = since;
    *vt = dev_mono ? NVML_VALUE_TYPE_UNSIGNED_LONG_LONG : NVML_VALUE_TYPE_UNSIGNED_INT;
    /* Newest first here too. */
    for (k = nfdev; k-- > 0;) {
        nvmlSample_t x = fdev[k];

        if (x.timeStamp > reveal_us)
            continue;
        if (dev_mono) {
            /* (The script's stamps are realtime from the start: the same instants on the
               monotonic clock, which no slewing moves.) */
            x.timeStamp = x.timeStamp - base_rt_us + base_mono / 1000ULL;
            x.sampleValue.ullVal = fdev[k].sampleValue.uiVal;
        }
        if (x.timeStamp > since && c < *n)
            s[c++] = x;
    }
    *n = c;
    return c ? NVML_SUCCESS : NVML_ERROR_NOT_FOUND;
}

/* ---- scenarios --------------------------------------------------------------------------- */

/*
 * A timeline in ms from a base B (monotonic) that lies far enough in the past for every stamp
 * to be one: flight stretches, and for each the share of it in which the process had work by
 * NVML's per-process figure (f_proc) and in which its kernels ran by the device's (f_dev).
 */
struct stretch {
    double a, b;
};

struct scenario {
    double P, D;       /* the per-process and the device's sample periods, ms */
    double shift;      /* the device's periods end this many ms before the processes' */
    double f_proc;     /* per-process figure: share of the time in flight */
    double f_dev;      /* the device's figure: share of the time in flight */
    unsigned other;    /* another process's per-process figure (%), all along; 0 none */
    double other_dev;  /* and the share of the device its kernels take in each period */
    double end;        /* the timeline's length, ms */
    int device;        /* the device's samples are reported */
    unsigned dev_busy; /* (set by script) device samples with time in flight in their period */
    double jitter;     /* each device stamp this many ms late at most (pseudo-random) */
    double restart_at; /* the device's sampler starts again here, restart_shift ms later */
    double restart_shift;
    unsigned me;      /* the PID NVML names this process by; 0: getpid() */
    double change_at; /* from here on (ms; 0 never) the device's figure is f_dev2 */
    double f_dev2;
    struct stretch s[64];
    int ns;
};

static double ovl(double a, double b, double lo, double hi)
{
    if (a < lo)
        a = lo;
    if (b > hi)
        b = hi;
    return b > a ? b - a : 0;
}

static double flight_in(const struct scenario *sc, double lo, double hi)
{
    double t = 0;
    int i;

    for (i = 0; i < sc->ns; i++)
        t += ovl(sc->s[i].a, sc->s[i].b, lo, hi);
    return t;
}

static unsigned pct_of(double part, double whole)
{
    double v = 100.0 * part / whole + 0.5;

    return v > 100 ? 100 : (unsigned)v;
}

static unsigned long long stamp(double ms)
{
    return (unsigned long long)((long long)base_rt_us + llround(ms * 1000.0));
}

static double recorded_ms; /* the time in flight is counted up to here */
static double billed_ns;   /* what the governor billed for it (at the duty of the moment) */
static struct scenario *cur;

/* duty.c's state as at a process's start (its stretches' buffers given back). */
static void reset_duties(void)
{
    int i;

    for (i = 0; i < MAX_ORD; i++)
        free(duties[i].ivs);
    memset(duties, 0, sizeof(duties));
}

/* Resets duty.c's state and the script; the timeline starts now, at 1000 s on the clock. */
static void start(struct scenario *sc)
{
    v_rt_off_ns = 1795000000000000000ULL;
    reset_duties();
    memset(gdevs, 0, sizeof(gdevs));
    memset(&stats, 0, sizeof(stats));
    next_poll_ns = 0;
    pid_known = 1;
    v_host_pid = 0;
    v_mono_ns = 1000000000000ULL;
    base_mono = v_mono_ns;
    base_rt_us = (v_mono_ns + v_rt_off_ns) / 1000ULL;
    gs__real.nvmlDeviceGetProcessUtilization = f_proc_util;
    gs__real.nvmlDeviceGetSamples = f_samples;
    dev_samples_supported = sc->device;
    dev_mono = 0;
    gdevs[0].state = 1;
    gdevs[0].busy_since = 1;
    duties[0].state = 1; /* the handle is known (handle_of is the preload's) */
    duties[0].h = (nvmlDevice_t)1;
    duties[0].last_ts = base_rt_us;
    nfproc = nfdev = 0;
    reveal_us = 0;
    recorded_ms = 0;
    billed_ns = 0;
    cur = sc;
}

/* The clock moved to t ms of the timeline, the governor's time in flight counted up to it. */
static void advance(double t)
{
    int i;

    for (i = 0; i < cur->ns; i++) {
        double a = cur->s[i].a > recorded_ms ? cur->s[i].a : recorded_ms;
        double b = cur->s[i].b < t ? cur->s[i].b : t;

        /* As charge() does, at the governor's polls (5 ms apart here): at the duty of then. */
        for (; b > a; a += 5) {
            double e = a + 5 < b ? a + 5 : b;
            uint64_t from = base_mono + (uint64_t)(a * 1e6), to = base_mono + (uint64_t)(e * 1e6);
            int64_t bill = duty_bill(&gdevs[0], (int64_t)(to - from), now_ns());

            duty_span(&gdevs[0], from, to, bill);
            billed_ns += (double)bill;
        }
    }
    if (t > recorded_ms)
        recorded_ms = t;
    v_mono_ns = base_mono + (uint64_t)(t * 1e6);
}

/* A per-process sample NVML stamps at ms of the timeline: pid's work was on the device pct %. */
static void proc_sample(unsigned pid, double ms, unsigned pct)
{
    if (nfproc < MAXS)
        fproc[nfproc++] =
            (nvmlProcessUtilizationSample_t){ .pid = pid, .timeStamp = stamp(ms), .smUtil = pct };
}

/* The governor's time in flight, and what NVML stamps for it. */
static void script(struct scenario *sc)
{
    double e;

    for (e = sc->P; e <= sc->end; e += sc->P) {
        double f = flight_in(sc, e - sc->P, e);

        if (f > 0)
            proc_sample(sc->me ? sc->me : (unsigned)getpid(), e, pct_of(f * sc->f_proc, sc->P));
        if (sc->other)
            proc_sample(ME_PID_OTHER, e, sc->other);
    }
    /*
     * The device is sampled all the time (its periods before the timeline are reported too),
     * each sample the share of its own period (from the stamp before it) in which a kernel ran.
     */
    {
        double prev = sc->D - sc->shift - 6 * sc->D, next = prev + sc->D;
        unsigned seed = 12345;

        for (; next <= sc->end; next += sc->D) {
            double x = next, f, busy, len;

            if (sc->jitter > 0) {
                seed = seed * 1103515245u + 12345u;
                x += sc->jitter * (double)((seed >> 16) % 1000) / 1000.0;
            }
            if (sc->restart_at > 0 && next >= sc->restart_at && next - sc->D < sc->restart_at) {
                next = sc->restart_at + sc->restart_shift; /* the first stamp at the new phase */
                x = next;
            }
            len = x - prev;
            f = flight_in(sc, prev, x);
            busy = f * (sc->change_at > 0 && x > sc->change_at ? sc->f_dev2 : sc->f_dev) +
                   sc->other_dev * len;
            if (prev >= sc->D - sc->shift - 5 * sc->D) {
                sc->dev_busy += f > 0;
                fdev[nfdev].timeStamp = stamp(x);
                fdev[nfdev].sampleValue.uiVal = pct_of(busy, len);
                nfdev++;
            }
            prev = x;
        }
    }
}

/* NVML asked at t ms of the timeline; it has stamped every period that ended by then. */
static void poll_at(double t)
{
    advance(t);
    reveal_us = stamp(t);
    next_poll_ns = 0;
    pthread_mutex_lock(&mu);
    duty_poll(now_ns());
    pthread_mutex_unlock(&mu);
}

/* NVML asked every 200 ms from `from` (as the governor does) to `to`. */
static void poll_all(double from, double to)
{
    double t;

    for (t = from; t <= to + 1e-9; t += 200)
        poll_at(t);
}

static double ratio(void)
{
    return duties[0].span > 0 ? duties[0].run / duties[0].span : -1;
}

/* Bursts of `on` ms every `every` ms from `first` to `last`. */
static void bursts(struct scenario *sc, double first, double last, double on, double every)
{
    double t;

    for (t = first; t + on <= last && sc->ns < 64; t += every)
        sc->s[sc->ns++] = (struct stretch){ t, t + on };
}

/* ---- tests ------------------------------------------------------------------------------- */

/*
 * A saturating stream throttled to a quarter (50 ms bursts every 200 ms, its kernels running
 * all its time in flight) is billed all its time in flight, whatever the phase of the device's
 * periods against the processes' and whatever the stretch's first and last period hold.
 */
static void saturating_any_phase(void **st)
{
    static const double shifts[] = { 0, 13, 50, 80, 120, 187 };
    unsigned i;

    (void)st;
    for (i = 0; i < sizeof(shifts) / sizeof(shifts[0]); i++) {
        struct scenario sc = { .P = 200,
                               .D = 200,
                               .shift = shifts[i],
                               .f_proc = 1,
                               .f_dev = 1,
                               .end = 1600,
                               .device = 1 };

        bursts(&sc, 130, 1530, 50, 200);
        start(&sc);
        script(&sc);
        poll_all(37, 2037);
        print_message("shift %.0f ms: duty %.4f from %lu samples\n", shifts[i], ratio(),
                      stats.duty_samples);
        /* Each device period with time in flight in it, once. */
        assert_int_equal(stats.duty_samples, sc.dev_busy);
        assert_int_equal(stats.duty_dev_samples, sc.dev_busy);
        assert_true(ratio() >= 0.97 && ratio() <= 1.03);
        assert_int_equal(duty_ppm(&gdevs[0], now_ns()), 1000000);
    }
}

/*
 * Back-to-back tiny kernels: NVML's per-process figure counts the device's gaps between them
 * (80 % of the time in flight), the device's own utilisation does not (50 %). Alone on the
 * device, the device's figure is the duty, at any phase; the periods' lengths are learnt from
 * the stamps (1/6 s here, not the H100's 200 ms).
 */
static void device_figure_when_alone(void **st)
{
    static const double shifts[] = { 0, 66.7, 100 };
    unsigned i;

    (void)st;
    for (i = 0; i < sizeof(shifts) / sizeof(shifts[0]); i++) {
        struct scenario sc = { .P = 1000.0 / 6,
                               .D = 1000.0 / 6,
                               .shift = shifts[i],
                               .f_proc = 0.8,
                               .f_dev = 0.5,
                               .end = 1500,
                               .device = 1 };

        bursts(&sc, 77, 1430, 60, 1000.0 / 6);
        start(&sc);
        script(&sc);
        poll_all(91, 1900);
        assert_int_equal(stats.duty_samples, sc.dev_busy);
        print_message("shift %.1f: duty %.4f, periods %lld / %lld ns\n", shifts[i], ratio(),
                      (long long)duties[0].period.ns, (long long)duties[0].dev_period.ns);
        assert_true(ratio() >= 0.48 && ratio() <= 0.52);
        assert_true(llabs(duties[0].period.ns - 166666667LL) < 2000);
        assert_true(llabs(duties[0].dev_period.ns - 166666667LL) < 2000);
        assert_true(duty_ppm(&gdevs[0], now_ns()) >= 480000 &&
                    duty_ppm(&gdevs[0], now_ns()) <= 520000);
    }
}

/*
 * Another process runs beside it: the device's figure holds both, so the process's own figure
 * is the duty.
 */
static void own_figure_beside_another(void **st)
{
    struct scenario sc = { .P = 200,
                           .D = 200,
                           .shift = 80,
                           .f_proc = 0.8,
                           .f_dev = 0.5,
                           .other = 30,
                           .other_dev = 0.3,
                           .end = 1600,
                           .device = 1 };

    (void)st;
    bursts(&sc, 30, 1570, 100, 200);
    start(&sc);
    script(&sc);
    poll_all(137, 2000);
    print_message("beside another: duty %.4f\n", ratio());
    assert_int_equal(stats.duty_dev_samples, 0);
    assert_true(ratio() >= 0.78 && ratio() <= 0.82);
}

/*
 * Another process ran only in the first half: from then on, alone, the device's figure is used;
 * the duty follows it (its sums decay in 1 s) and no device period is counted twice.
 */
static void alone_after_another(void **st)
{
    struct scenario sc = {
        .P = 200, .D = 200, .shift = 120, .f_proc = 0.9, .f_dev = 0.3, .end = 3000, .device = 1
    };
    unsigned k;

    (void)st;
    bursts(&sc, 10, 2990, 190, 200);
    start(&sc);
    script(&sc);
    /* The other process's samples in the first second only (and in the device's). */
    for (k = 0; k < 5; k++) {
        proc_sample(ME_PID_OTHER, 200.0 * (k + 1), 40);
    }
    poll_all(59, 3459);
    print_message("alone after another: duty %.4f from %lu samples\n", ratio(), stats.duty_samples);
    /* Each period once, by one figure: our own five while the other ran (and the device's
       period reaching into the last of them with it), then the device's nine. */
    assert_int_equal(stats.duty_samples, 14);
    assert_true(ratio() >= 0.30 && ratio() <= 0.45);
}

/*
 * Alone in a period of ours, but each device period reaching into it holds another's work (its
 * periods on both sides): our own figure is taken for that period, not nothing.
 */
static void between_two_others(void **st)
{
    struct scenario sc = {
        .P = 200, .D = 200, .shift = 100, .f_proc = 0.9, .f_dev = 0.3, .end = 800, .device = 1
    };

    (void)st;
    bursts(&sc, 0, 800, 200, 200);
    start(&sc);
    script(&sc);
    proc_sample(ME_PID_OTHER, 200, 50);
    proc_sample(ME_PID_OTHER, 600, 50);
    poll_all(53, 1453);
    print_message("between two others: duty %.4f from %lu samples\n", ratio(), stats.duty_samples);
    assert_int_equal(stats.duty_samples, 4);
    assert_true(ratio() >= 0.89 && ratio() <= 0.91);
}

/*
 * Without device samples the per-process figure is the duty, and the period is learnt from its
 * stamps: the first sample, before any spacing is seen, is not taken with a guessed period.
 */
static void process_figure_without_device(void **st)
{
    struct scenario sc = { .P = 1000.0 / 6,
                           .D = 1000.0 / 6,
                           .shift = 0,
                           .f_proc = 0.6,
                           .f_dev = 0.2,
                           .end = 1500,
                           .device = 0 };

    (void)st;
    bursts(&sc, 100, 1450, 40, 1000.0 / 6);
    start(&sc);
    script(&sc);
    poll_at(2000.0 / 6 + 1);
    assert_int_equal(stats.duty_samples, 0); /* two samples: one spacing, no period yet */
    assert_int_equal(duties[0].period.ns, 0);
    assert_int_equal(duties[0].dev_clock, DEV_CLOCK_NONE); /* not asked again */
    poll_all(367, 1900);
    print_message("no device samples: duty %.4f from %lu samples\n", ratio(), stats.duty_samples);
    assert_int_equal(stats.duty_samples, 6); /* 8 periods with work, the first two not taken */
    assert_true(llabs(duties[0].period.ns - 166666667LL) < 2000);
    assert_true(ratio() >= 0.58 && ratio() <= 0.62);
}

/*
 * In a pod's PID namespace NVML names the process by its host PID, which the daemon writes in
 * its slot: nothing is learnt until it is known (duty 1), then the samples of that PID are its
 * own; those of the PID it has inside (another process's on the host) are not.
 */
static void pod_namespace_host_pid(void **st)
{
    struct scenario sc = {
        .P = 1000.0 / 6, .D = 1000.0 / 6, .f_proc = 0.6, .end = 1500, .device = 0, .me = 777777
    };
    double e;
    int known;

    (void)st;
    bursts(&sc, 100, 1450, 40, 1000.0 / 6);
    for (known = 0; known < 2; known++) {
        start(&sc);
        pid_known = 0; /* not the initial PID namespace */
        v_host_pid = known ? 777777 : 0;
        script(&sc);
        for (e = sc.P; e <= sc.end; e += sc.P)
            proc_sample((unsigned)getpid(), e, 90);
        poll_all(1, 1900);
        print_message("pod, host PID %s: duty %.4f from %lu samples, NVML's PID %d\n",
                      known ? "known" : "not known", ratio(), stats.duty_samples, stats.duty_pid);
        if (!known) {
            assert_int_equal(stats.duty_samples, 0);
            assert_int_equal(stats.duty_pid, 0);
            assert_int_equal(duty_ppm(&gdevs[0], now_ns()), 1000000);
        } else {
            assert_int_equal(stats.duty_pid, 777777);
            assert_int_equal(stats.duty_samples, 6);
            assert_true(ratio() >= 0.58 && ratio() <= 0.62);
            assert_true(duty_ppm(&gdevs[0], now_ns()) < 1000000);
            /* A forked child is billed at 1 until it learns its own duty, not at its parent's. */
            duty_fork_child();
            assert_int_equal(duty_ppm(&gdevs[0], now_ns()), 1000000);
            assert_int_equal(stats.duty_pid, 0);
            assert_int_equal(pid_known, -1);
        }
    }
}

/*
 * A sample whose end the device has not reported yet waits for the device's period that holds
 * it (the next poll), for two periods at most; then it is taken from what there is.
 */
static void waits_for_device_period(void **st)
{
    struct scenario sc = {
        .P = 200, .D = 200, .shift = 100, .f_proc = 1, .f_dev = 1, .end = 1000, .device = 1
    };

    (void)st;
    bursts(&sc, 0, 1000, 200, 200);
    start(&sc);
    script(&sc); /* the device's period ending at 1100 is never reported */
    poll_at(1000);
    /* Our sample ending at 800 is taken with the device's periods ending at 700 and 900; the
       one ending at 1000 waits for the device's period ending at 1100. */
    assert_int_equal(duties[0].last_ts, stamp(800));
    assert_int_equal(duties[0].last_dev_ts, stamp(900));
    assert_int_equal(stats.duty_samples, 5);
    assert_true(ratio() >= 0.99 && ratio() <= 1.01);
    poll_at(1399);
    assert_int_equal(duties[0].last_ts, stamp(800)); /* still waiting */
    /* Two periods on, it is taken with what there is: its device periods were taken already. */
    poll_at(1401);
    assert_int_equal(duties[0].last_ts, stamp(1000));
    assert_int_equal(stats.duty_samples, 5);
}

/*
 * The period: the smallest spacing another recent one matches within 2 %; never one short
 * spacing; never longer again.
 */
static void period_learnt_from_spacings(void **st)
{
    struct duty_period pd;

    (void)st;
    memset(&pd, 0, sizeof(pd));
    learn_period(&pd, 0, 1000000);
    assert_int_equal(pd.ns, 0); /* nothing before */
    learn_period(&pd, 1000000, 1400000);
    assert_int_equal(pd.ns, 0); /* one spacing (400 ms) */
    learn_period(&pd, 1400000, 1600000);
    assert_int_equal(pd.ns, 0); /* 400 and 200: neither matched */
    learn_period(&pd, 1600000, 1800000);
    assert_int_equal(pd.ns, 200000000LL);
    learn_period(&pd, 1800000, 1810000); /* 10 ms: not a spacing of periods */
    learn_period(&pd, 1810000, 1880000); /* 70 ms once: a sampler started again */
    assert_int_equal(pd.ns, 200000000LL);
    learn_period(&pd, 1880000, 2080000);
    learn_period(&pd, 2080000, 2283000); /* 203 ms: within 2 % */
    assert_int_equal(pd.ns, 200000000LL);
    learn_period(&pd, 2283000, 2300000); /* 17 ms: ignored */
    learn_period(&pd, 2300000, 2305000);
    assert_int_equal(pd.ns, 200000000LL);
    /* Every other period for a while: 400 ms confirmed, and still 200 ms. */
    for (int k = 0; k < 10; k++)
        learn_period(&pd, 2305000 + 400000ULL * (unsigned)k, 2705000 + 400000ULL * (unsigned)k);
    assert_int_equal(pd.ns, 200000000LL);
    /* 196 ms twice (within 2 % of each other, not of 200): the smaller period. */
    learn_period(&pd, 7000000, 7196000);
    learn_period(&pd, 7196000, 7392000);
    assert_int_equal(pd.ns, 196000000LL);
}

/*
 * The device's stamps late by up to 6 ms, and its sampler started again once at another phase
 * (one spacing of 70 ms): a throttled stream (50 ms of every 200, its kernels running all its
 * time in flight) is still billed all of it. (The first version took the smallest spacing for
 * the period and billed such a stream 2/3 of its kernels' time.)
 */
static void device_stamps_jitter_and_restart(void **st)
{
    struct scenario sc = { .P = 200,
                           .D = 200,
                           .shift = 80,
                           .f_proc = 1,
                           .f_dev = 1,
                           .end = 3000,
                           .device = 1,
                           .jitter = 6,
                           .restart_at = 1321,
                           .restart_shift = 69 };

    (void)st;
    bursts(&sc, 37, 2900, 50, 211); /* drifting against the periods */
    start(&sc);
    script(&sc);
    poll_all(41, 3641);
    print_message("jitter and a restart: duty %.4f from %lu samples (%lu the device's), period "
                  "%lld ns\n",
                  ratio(), stats.duty_samples, stats.duty_dev_samples,
                  (long long)duties[0].dev_period.ns);
    assert_true(duties[0].dev_period.ns >= 190000000LL && duties[0].dev_period.ns <= 206000000LL);
    assert_true(stats.duty_dev_samples >= 10);
    assert_true(ratio() >= 0.97 && ratio() <= 1.03);
}

/*
 * The same with the device's samples stamped on the monotonic clock, and the realtime clock
 * slewed 0.1 ms ahead of it at each poll (NTP's most, 500 ppm): a sample fetched again at the
 * next poll is the same sample, not a new one a spacing later, and the one short spacing is
 * still never the period.
 */
static void device_stamps_monotonic_slewed(void **st)
{
    struct scenario sc = { .P = 200,
                           .D = 200,
                           .shift = 80,
                           .f_proc = 1,
                           .f_dev = 1,
                           .end = 3000,
                           .device = 1,
                           .restart_at = 1321,
                           .restart_shift = 69 };
    double t;

    (void)st;
    bursts(&sc, 37, 2900, 50, 211);
    start(&sc);
    dev_mono = 1;
    script(&sc);
    for (t = 41; t <= 3641; t += 200) {
        poll_at(t);
        v_rt_off_ns += 100000ULL;
    }
    print_message("monotonic, slewed: duty %.4f from %lu samples (%lu the device's), period "
                  "%lld ns, clock %s\n",
                  ratio(), stats.duty_samples, stats.duty_dev_samples,
                  (long long)duties[0].dev_period.ns, duty_clock_name(duties[0].dev_clock));
    assert_int_equal(duties[0].dev_clock, DEV_CLOCK_MONOTONIC);
    assert_true(duties[0].dev_period.ns >= 190000000LL && duties[0].dev_period.ns <= 206000000LL);
    assert_int_equal(stats.duty_dev_samples, sc.dev_busy);
    assert_true(ratio() >= 0.97 && ratio() <= 1.03);
}

/* Process and device periods of different lengths, either way. */
static void periods_of_different_lengths(void **st)
{
    static const double pd[2][2] = { { 200, 1000.0 / 6 }, { 1000.0 / 6, 200 } };
    int i;

    (void)st;
    for (i = 0; i < 2; i++) {
        struct scenario sc = { .P = pd[i][0],
                               .D = pd[i][1],
                               .shift = 50,
                               .f_proc = 0.9,
                               .f_dev = 0.6,
                               .end = 2400,
                               .device = 1 };

        bursts(&sc, 23, 2300, 60, 190);
        start(&sc);
        script(&sc);
        poll_all(77, 3077);
        print_message("P %.1f D %.1f: duty %.4f from %lu samples\n", pd[i][0], pd[i][1], ratio(),
                      stats.duty_samples);
        assert_int_equal(stats.duty_dev_samples, sc.dev_busy);
        assert_true(ratio() >= 0.58 && ratio() <= 0.62);
    }
}

/*
 * Another process in the device's period that reaches into our next one only: our next period
 * is not taken by our own figure as well (its first part was taken with the device's period
 * before), and the device's period after the other's is taken.
 */
static void no_period_counted_twice(void **st)
{
    struct scenario sc = {
        .P = 200, .D = 200, .shift = 100, .f_proc = 0.8, .f_dev = 0.5, .end = 1000, .device = 1
    };

    (void)st;
    bursts(&sc, 0, 1000, 200, 200);
    start(&sc);
    script(&sc);
    proc_sample(ME_PID_OTHER, 600, 30);
    poll_all(31, 1631);
    print_message("no period twice: duty %.4f from %lu samples, %lu the device's\n", ratio(),
                  stats.duty_samples, stats.duty_dev_samples);
    /* The device's (-100, 100], (100, 300] and (700, 900]; our own (400, 600]. */
    assert_int_equal(stats.duty_dev_samples, 3);
    assert_int_equal(stats.duty_samples, 4);
}

/*
 * More samples since our last than there is room for (dozens of processes): NVML answers
 * INSUFFICIENT_SIZE, and the next questions start later until they fit, not for ever the same.
 */
static void too_many_samples(void **st)
{
    struct scenario sc = {
        .P = 200, .D = 200, .shift = 0, .f_proc = 0.5, .f_dev = 0.5, .end = 3600, .device = 1
    };
    unsigned pid, e;

    (void)st;
    bursts(&sc, 0, 3600, 200, 200);
    start(&sc);
    script(&sc);
    for (e = 200; e <= 3600; e += 200)
        for (pid = 0; pid < 60; pid++)
            proc_sample(5000 + pid, e, 1);
    /* 61 samples a period: 256 are 4 periods (0.8 s), less than any past asked about at first. */
    poll_all(2400, 4000);
    print_message("too many samples: %lu taken, crowd %u\n", stats.duty_samples, duties[0].crowd);
    assert_true(stats.duty_samples >= 3);
    assert_true(ratio() >= 0.49 && ratio() <= 0.51);
}

/*
 * The time in flight in a window: charges that follow on (or within 1 ms) joined into one
 * entry, its time in flight and bill spread evenly over it; uncapped launches void a window.
 */
static void span_between_exact(void **st)
{
    const uint64_t M = 1000000; /* 1 ms */
    struct duty_dev *u = &duties[0];
    double b;

    (void)st;
    reset_duties();
    duty_span(&gdevs[0], 1 * M, 2 * M, 500);
    duty_span(&gdevs[0], 2 * M, 3 * M, 900); /* follows on: one entry */
    duty_span(&gdevs[0], 5500000, 6500000, 1000);
    assert_int_equal(u->nivs, 2);
    assert_int_equal(u->flight_ns, 3 * M);
    assert_int_equal(span_between(u, 0, 10 * M, &b), 3 * M);
    assert_true(fabs(b - 2400) < 1e-9);
    /* A quarter of the first entry (of 1400 billed), half of the second (of 1000). */
    assert_int_equal(span_between(u, 2500000, 6 * M, &b), 1 * M);
    assert_true(fabs(b - (1400.0 / 4 + 500)) < 1e-9);
    assert_int_equal(span_between(u, 3 * M, 5500000, &b), 0);
    assert_true(b == 0);
    assert_int_equal(span_between(u, 6 * M, 6 * M, &b), 0);
    /* 0.4 ms after the last: joined, the gap not in flight (1.5 ms over 1.9). */
    duty_span(&gdevs[0], 6900000, 7400000, 300);
    assert_int_equal(u->nivs, 2);
    assert_int_equal(span_between(u, 5500000, 7400000, &b), 1500000);
    assert_true(fabs(b - 1300) < 1e-9);
    assert_int_equal(span_between(u, 6500000, 6900000, &b), 315789);
    /* 20 ms at most in one entry. */
    duty_span(&gdevs[0], 7400000, 26 * M, 100);
    assert_int_equal(u->nivs, 3);
    duty_uncapped(&gdevs[0], 4 * M);
    assert_int_equal(span_between(u, 3900000, 4200000, &b), -1);
    assert_int_equal(span_between(u, 1 * M, 2 * M, &b), 1 * M);
}

/*
 * A loop that waits for the device after every launch (20 us in flight every 25 us for 2.5 s):
 * its entries reach back past NVML's delay, a period 1 s ago is counted (0.8 of it in flight),
 * not lost from the ring.
 */
static void sync_per_launch_kept(void **st)
{
    struct duty_dev *u = &duties[0];
    const uint64_t t0 = 1000000000ULL;
    uint64_t t;
    int64_t sp;
    double b;

    (void)st;
    reset_duties();
    for (t = t0; t < t0 + 2500000000ULL; t += 25000)
        duty_span(&gdevs[0], t, t + 20000, 10000);
    sp = span_between(u, t0 + 1300000000ULL, t0 + 1500000000ULL, &b);
    print_message("sync per launch: %llu entries, %lld ns in flight in 200 ms a second ago\n",
                  (unsigned long long)u->nivs, (long long)sp);
    assert_true(u->nivs < DUTY_IVS);
    assert_true(sp > 159000000 && sp < 161000000);
    assert_true(fabs(b - 80000000.0) < 1e6);
}

/*
 * NVML's count settles what the duty billed: a loop whose kernels ran 60 % of its time in
 * flight until 1.2 s, then 30 % (the workload changed), is billed at the duty of the moment,
 * which lags; the corrections make the bills of every period NVML spoke of what NVML counted
 * in it, to within its whole percents, and a refund is kept off the usage counter's additions.
 */
static void settles(double on, double every)
{
    struct scenario sc = { .P = 200,
                           .D = 200,
                           .shift = 70,
                           .f_proc = 1,
                           .f_dev = 0.6,
                           .change_at = 1200,
                           .f_dev2 = 0.3,
                           .end = 2800,
                           .device = 1 };
    double counted = 0, taken = 0, t;
    int64_t c, gave = 0;
    unsigned k;

    bursts(&sc, 40, 2390, on, every);
    start(&sc);
    script(&sc);
    for (t = 37; t <= 3400; t += 200) {
        poll_at(t);
        c = duty_correction(&gdevs[0], 0, now_ns());
        taken += (double)c;
        if (c < 0)
            gave += -c;
    }
    /* What NVML counted in the periods taken (the device's, with time in flight in them). */
    for (k = 0; k < nfdev; k++) {
        double e = ((double)fdev[k].timeStamp - (double)base_rt_us) / 1000.0;

        if (e > 0 && flight_in(&sc, e - 200, e) > 0)
            counted += 200e6 * fdev[k].sampleValue.uiVal / 100.0;
    }
    print_message("billed %.1f ms, corrections %+.1f ms, NVML counted %.1f ms, duty %.3f\n",
                  billed_ns / 1e6, taken / 1e6, counted / 1e6, ratio());
    assert_int_equal(stats.duty_dev_samples, sc.dev_busy);
    /* The duty alone missed by more than NVML's rounding; with the corrections, within it. */
    assert_true(fabs(billed_ns - counted) > 0.05 * counted);
    assert_true(fabs(billed_ns + taken - counted) < 0.01 * counted);
    /* Refunds are owed by the usage counter: the next bills add that much less to it. */
    assert_true(gave > 0);
    assert_int_equal(duty_busy(&gdevs[0], gave + 5), 5);
    assert_int_equal(duty_busy(&gdevs[0], 7), 7);
    assert_int_equal(stats.duty_corrected_ns, (int64_t)taken);
}

static void correction_settles_bills(void **st)
{
    (void)st;
    settles(80, 100);
    /* One stretch of 2.35 s in flight (a launch-bound loop never idle), billed at a changing
       duty: each part of its bill is set against the period it was billed in. */
    settles(2350, 2400);
}

/*
 * Settling, piece by piece: never above the time in flight (another process's work NVML does
 * not list), each part of the timeline once (a period reaching back into one settled), none
 * from before the budget's reset.
 */
static void settle_at(struct duty_dev *u, uint64_t lo, uint64_t end, double run)
{
    double b;
    int64_t sp = span_between(u, lo, end, &b);

    settle(u, lo, end, run, sp, b);
}

static void settle_bounds(void **st)
{
    const uint64_t M = 1000000; /* 1 ms */
    struct duty_dev *u = &duties[0];

    (void)st;
    reset_duties();
    memset(&stats, 0, sizeof(stats));
    duty_span(&gdevs[0], 1 * M, 2 * M, 1000000);
    duty_span(&gdevs[0], 2 * M, 3 * M, 1000000);
    /* NVML counted 4 ms in [0, 4 ms) where 2 ms were in flight and billed: none to settle. */
    settle_at(u, 0, 4 * M, 4000000);
    assert_true(u->correct == 0);
    /* A period reaching back into it: only [4, 6) ms is new (half NVML's 1 ms, 0.2 billed). */
    duty_span(&gdevs[0], 4500000, 5500000, 200000);
    settle_at(u, 2 * M, 6 * M, 1000000);
    assert_true(fabs(u->correct - (500000 - 200000)) < 1e-6);
    /* Taken whole; refunds are owed by the usage counter. */
    assert_int_equal(duty_correction(&gdevs[0], 7, 6 * M), 300000);
    assert_true(u->correct == 0 && u->settled_to == 6 * M);
    duty_span(&gdevs[0], 7500000, 8500000, 1000000);
    settle_at(u, 6 * M, 9 * M, 100000);
    assert_int_equal(duty_correction(&gdevs[0], 7, 9 * M), -900000);
    assert_int_equal(u->owed, 900000);
    /* The budget reset (epoch 8) at 11 ms: what was pending goes, and so do periods before. */
    duty_span(&gdevs[0], 10 * M, 11 * M, 1000000);
    settle_at(u, 9 * M, 11 * M, 0);
    assert_int_equal(duty_correction(&gdevs[0], 8, 11 * M), 0);
    assert_true(u->correct == 0 && u->settle_from == 11 * M);
    duty_span(&gdevs[0], 12500000, 13500000, 400000);
    settle_at(u, 10500000, 13500000, 900000);
    /* Only [11, 13.5) ms: five sixths of NVML's 0.9 ms against its bill of 0.4. */
    assert_true(fabs(u->correct - (750000 - 400000)) < 1e-6);
    assert_int_equal(stats.duty_corrected_ns, 300000 - 900000);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(saturating_any_phase),
        cmocka_unit_test(device_figure_when_alone),
        cmocka_unit_test(own_figure_beside_another),
        cmocka_unit_test(alone_after_another),
        cmocka_unit_test(between_two_others),
        cmocka_unit_test(process_figure_without_device),
        cmocka_unit_test(pod_namespace_host_pid),
        cmocka_unit_test(waits_for_device_period),
        cmocka_unit_test(period_learnt_from_spacings),
        cmocka_unit_test(device_stamps_jitter_and_restart),
        cmocka_unit_test(device_stamps_monotonic_slewed),
        cmocka_unit_test(periods_of_different_lengths),
        cmocka_unit_test(no_period_counted_twice),
        cmocka_unit_test(too_many_samples),
        cmocka_unit_test(span_between_exact),
        cmocka_unit_test(sync_per_launch_kept),
        cmocka_unit_test(correction_settles_bills),
        cmocka_unit_test(settle_bounds),
    };

    int r = cmocka_run_group_tests(tests, NULL, NULL);

    reset_duties();
    return r;
}
