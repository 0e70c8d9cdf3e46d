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
static const uint64_t v_rt_off_ns = 1795000000000000000ULL; /* an epoch of December 2026 */

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

uint64_t now_ns(void)
{
    return v_mono_ns;
}

/* ---- the scripted NVML ------------------------------------------------------------------- */

#define ME_PID_OTHER 4242u
#define MAXS 512

static nvmlProcessUtilizationSample_t fproc[MAXS];
static unsigned nfproc;
static nvmlSample_t fdev[MAXS];
static unsigned nfdev;
static int dev_samples_supported;
static unsigned long long reveal_us; /* samples stamped after this are not reported yet */
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
    *vt = NVML_VALUE_TYPE_UNSIGNED_INT;
    /* Newest first here too. */
    for (k = nfdev; k-- > 0;)
        if (fdev[k].timeStamp > since && fdev[k].timeStamp <= reveal_us && c < *n)
            s[c++] = fdev[k];
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
    struct stretch s[64];
    int ns;
};

static uint64_t base_mono;
static unsigned long long base_rt_us;

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
static struct scenario *cur;

/* Resets duty.c's state and the script; the timeline starts now, at 1000 s on the clock. */
static void start(struct scenario *sc)
{
    memset(duties, 0, sizeof(duties));
    memset(gdevs, 0, sizeof(gdevs));
    memset(&stats, 0, sizeof(stats));
    next_poll_ns = 0;
    pid_known = 1;
    v_mono_ns = 1000000000000ULL;
    base_mono = v_mono_ns;
    base_rt_us = (v_mono_ns + v_rt_off_ns) / 1000ULL;
    gs__real.nvmlDeviceGetProcessUtilization = f_proc_util;
    gs__real.nvmlDeviceGetSamples = f_samples;
    dev_samples_supported = sc->device;
    gdevs[0].state = 1;
    gdevs[0].busy_since = 1;
    duties[0].state = 1; /* the handle is known (handle_of is the preload's) */
    duties[0].h = (nvmlDevice_t)1;
    duties[0].last_ts = base_rt_us;
    nfproc = nfdev = 0;
    reveal_us = 0;
    recorded_ms = 0;
    cur = sc;
}

/* The clock moved to t ms of the timeline, the governor's time in flight counted up to it. */
static void advance(double t)
{
    int i;

    for (i = 0; i < cur->ns; i++) {
        double a = cur->s[i].a > recorded_ms ? cur->s[i].a : recorded_ms;
        double b = cur->s[i].b < t ? cur->s[i].b : t;

        if (b > a)
            duty_span(&gdevs[0], base_mono + (uint64_t)(a * 1e6), base_mono + (uint64_t)(b * 1e6));
    }
    if (t > recorded_ms)
        recorded_ms = t;
    v_mono_ns = base_mono + (uint64_t)(t * 1e6);
}

/* The governor's time in flight, and what NVML stamps for it. */
static void script(struct scenario *sc)
{
    double e;

    for (e = sc->P; e <= sc->end; e += sc->P) {
        double f = flight_in(sc, e - sc->P, e);

        if (f > 0)
            fproc[nfproc++] =
                (nvmlProcessUtilizationSample_t){ .pid = (unsigned)getpid(),
                                                  .timeStamp = stamp(e),
                                                  .smUtil = pct_of(f * sc->f_proc, sc->P) };
        if (sc->other)
            fproc[nfproc++] = (nvmlProcessUtilizationSample_t){ .pid = ME_PID_OTHER,
                                                                .timeStamp = stamp(e),
                                                                .smUtil = sc->other };
    }
    /* The device is sampled all the time: its periods before the timeline are reported too. */
    for (e = sc->D - sc->shift - 5 * sc->D; e <= sc->end; e += sc->D) {
        double f = flight_in(sc, e - sc->D, e);
        double busy = f * sc->f_dev + sc->other_dev * sc->D;

        sc->dev_busy += f > 0;
        fdev[nfdev].timeStamp = stamp(e);
        fdev[nfdev].sampleValue.uiVal = pct_of(busy, sc->D);
        nfdev++;
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
                      (long long)duties[0].period_ns, (long long)duties[0].dev_period_ns);
        assert_true(ratio() >= 0.48 && ratio() <= 0.52);
        assert_true(llabs(duties[0].period_ns - 166666667LL) < 2000);
        assert_true(llabs(duties[0].dev_period_ns - 166666667LL) < 2000);
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
        fproc[nfproc++] = (nvmlProcessUtilizationSample_t){ .pid = ME_PID_OTHER,
                                                            .timeStamp = stamp(200.0 * (k + 1)),
                                                            .smUtil = 40 };
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
    fproc[nfproc++] = (nvmlProcessUtilizationSample_t){ .pid = ME_PID_OTHER,
                                                        .timeStamp = stamp(200),
                                                        .smUtil = 50 };
    fproc[nfproc++] = (nvmlProcessUtilizationSample_t){ .pid = ME_PID_OTHER,
                                                        .timeStamp = stamp(600),
                                                        .smUtil = 50 };
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
    poll_at(1000.0 / 6 + 1);
    assert_int_equal(stats.duty_samples, 0); /* one sample: no period yet */
    assert_int_equal(duties[0].period_ns, 0);
    assert_int_equal(duties[0].dev_clock, DEV_CLOCK_NONE); /* not asked again */
    poll_all(367, 1900);
    print_message("no device samples: duty %.4f from %lu samples\n", ratio(), stats.duty_samples);
    assert_int_equal(stats.duty_samples, 7); /* 8 periods with work, the first not taken */
    assert_true(llabs(duties[0].period_ns - 166666667LL) < 2000);
    assert_true(ratio() >= 0.58 && ratio() <= 0.62);
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

/* The smallest spacing of at least 20 ms is the period: skipped periods make multiples. */
static void period_is_smallest_spacing(void **st)
{
    int64_t p = 0;

    (void)st;
    learn_period(&p, 0, 1000000);
    assert_int_equal(p, 0); /* nothing before */
    learn_period(&p, 1000000, 1400000);
    assert_int_equal(p, 400000000LL);
    learn_period(&p, 1400000, 1600000);
    assert_int_equal(p, 200000000LL);
    learn_period(&p, 1600000, 2200000);
    assert_int_equal(p, 200000000LL);
    learn_period(&p, 2200000, 2210000); /* 10 ms: two stamps of one period */
    assert_int_equal(p, 200000000LL);
    learn_period(&p, 2210000, 2230000); /* 20 ms exactly: a period */
    assert_int_equal(p, 20000000LL);
}

/* The time in flight in a window: stretches joined, overlaps exact, uncapped launches void. */
static void span_between_exact(void **st)
{
    struct duty_dev *u = &duties[0];

    (void)st;
    memset(duties, 0, sizeof(duties));
    duty_span(&gdevs[0], 1000, 2000);
    duty_span(&gdevs[0], 2000, 3000); /* follows on: one stretch */
    duty_span(&gdevs[0], 5000, 6000);
    assert_int_equal(u->nivs, 2);
    assert_int_equal(u->flight_ns, 3000);
    assert_int_equal(span_between(u, 0, 10000), 3000);
    assert_int_equal(span_between(u, 2500, 5500), 1000);
    assert_int_equal(span_between(u, 3000, 5000), 0);
    assert_int_equal(span_between(u, 6000, 6000), 0);
    duty_uncapped(&gdevs[0], 5200);
    assert_int_equal(span_between(u, 5000, 5300), -1);
    assert_int_equal(span_between(u, 1000, 2000), 1000);
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
        cmocka_unit_test(waits_for_device_period),
        cmocka_unit_test(period_is_smallest_spacing),
        cmocka_unit_test(span_between_exact),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
