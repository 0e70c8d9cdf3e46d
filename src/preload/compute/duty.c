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
 * Fails closed: until NVML has said something, where it cannot name this process (another PID
 * namespace, an MPS client billed to its server), or when its samples stop, the duty is 1 (all
 * the time in flight, as before). The duty only ever lowers what a process bills itself: a
 * process could as well not bill at all (it can write its own memory); the daemon's guard
 * holds managed tenants to their ceilings from NVML by itself (docs/design.md).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/parse.h"
#include "common/proc.h"
#include "preload/compute/compute_internal.h"

/* The initial PID namespace's inode (the kernel's PROC_PID_INIT_INO): NVML's PIDs are its. */
#define INIT_PID_NS 0xEFFFFFFCu

/* How often NVML is asked while a governed device has work in flight. */
#ifndef DUTY_POLL_NS
#define DUTY_POLL_NS 100000000LL
#endif

/* The samples weigh in with this time constant (a workload's change is followed within it). */
#ifndef DUTY_TAU_NS
#define DUTY_TAU_NS 1000000000LL
#endif

/* Time in flight the estimate needs before it is used, summed over its samples (decayed). */
#ifndef DUTY_MIN_SPAN_NS
#define DUTY_MIN_SPAN_NS 50000000LL
#endif

/* With no sample for this long while work is in flight, NVML is taken to say nothing: duty 1. */
#ifndef DUTY_STALE_NS
#define DUTY_STALE_NS 3000000000LL
#endif

/* The duty never goes below this: a workload NVML sees at 0 % is still billed something. */
#ifndef DUTY_MIN_PPM
#define DUTY_MIN_PPM 20000
#endif

/* Before the first two samples one period apart are seen: NVML's period on H100/H200. */
#define DUTY_PERIOD0_NS 166666667LL

struct duty_dev {
    int state; /* 0 not asked yet, 1 asking, -1 NVML cannot tell (no handle, no function) */
    nvmlDevice_t h;
    unsigned long long last_ts; /* the newest sample taken, CLOCK_REALTIME us */
    uint64_t last_sample_ns;    /* when (monotonic) a sample of ours last came */
    int64_t period_ns;          /* the driver's sample period, the smallest spacing seen */
    unsigned long long prev_ts; /* the sample before, for the spacing */
    double run, span;           /* decayed sums: the kernels' time and the time in flight */
    uint64_t bucket_key[DUTY_BUCKETS];
    int64_t bucket_ns[DUTY_BUCKETS];
    uint64_t uncapped_key[DUTY_BUCKETS]; /* a bucket in which it launched without a ceiling */
};

static struct duty_dev duties[MAX_ORD];
static uint64_t next_poll_ns;
static int pid_known = -1; /* NVML's PID for this process is getpid() (1), or unknown (0) */

static int64_t mono_to_key(uint64_t t)
{
    return (int64_t)(t / DUTY_BUCKET_NS);
}

void duty_span(struct gdev *d, uint64_t from, uint64_t to)
{
    struct duty_dev *u = &duties[d - gdevs];

    while (from < to) {
        uint64_t key = (uint64_t)mono_to_key(from);
        uint64_t end = (key + 1) * (uint64_t)DUTY_BUCKET_NS;
        int i = (int)(key % DUTY_BUCKETS);

        if (end > to)
            end = to;
        if (u->bucket_key[i] != key) {
            u->bucket_key[i] = key;
            u->bucket_ns[i] = 0;
        }
        u->bucket_ns[i] += (int64_t)(end - from);
        from = end;
    }
}

void duty_uncapped(struct gdev *d, uint64_t now)
{
    struct duty_dev *u = &duties[d - gdevs];
    uint64_t key = (uint64_t)mono_to_key(now);

    u->uncapped_key[key % DUTY_BUCKETS] = key;
}

/*
 * The time in flight counted on d within [a, b) (monotonic ns); -1 if the ring has lost it
 * or the process launched uncapped then.
 */
static int64_t span_between(const struct duty_dev *u, uint64_t a, uint64_t b, uint64_t now)
{
    int64_t sum = 0;
    uint64_t k;

    if (b <= a)
        return 0;
    if (now - a > (uint64_t)(DUTY_BUCKETS - 2) * DUTY_BUCKET_NS)
        return -1;
    for (k = (uint64_t)mono_to_key(a); k <= (uint64_t)mono_to_key(b - 1); k++) {
        int i = (int)(k % DUTY_BUCKETS);
        uint64_t lo = k * (uint64_t)DUTY_BUCKET_NS, hi = lo + (uint64_t)DUTY_BUCKET_NS;
        int64_t in;

        if (u->uncapped_key[i] == k)
            return -1;
        if (u->bucket_key[i] != k)
            continue; /* nothing in flight then */
        in = u->bucket_ns[i];
        /* A bucket cut by the window counts in proportion (its span spread evenly). */
        if (lo < a)
            in = (int64_t)((double)in * (double)(hi - a) / (double)DUTY_BUCKET_NS);
        if (hi > b)
            in = (int64_t)((double)in * (double)(b - (lo > a ? lo : a)) /
                           (double)(hi - (lo > a ? lo : a)));
        sum += in;
    }
    return sum;
}

uint32_t duty_ppm(const struct gdev *d, uint64_t now)
{
    const struct duty_dev *u = &duties[d - gdevs];
    double r;

    if (u->state <= 0 || u->span < (double)DUTY_MIN_SPAN_NS ||
        now - u->last_sample_ns > (uint64_t)DUTY_STALE_NS)
        return 1000000;
    r = u->run / u->span;
    if (r >= 1.0)
        return 1000000;
    if (r * 1e6 < DUTY_MIN_PPM)
        return DUTY_MIN_PPM;
    return (uint32_t)(r * 1e6);
}

/* Takes one of our samples: u's period ended at ts (realtime us) ran pct % of it. */
static void take(struct duty_dev *u, unsigned long long ts, unsigned pct, uint64_t now,
                 int64_t rt_minus_mono)
{
    int64_t p = u->period_ns > 0 ? u->period_ns : DUTY_PERIOD0_NS;
    int64_t end_mono = (int64_t)ts * 1000 - rt_minus_mono, sp;
    double decay, run;

    if (u->prev_ts && ts > u->prev_ts) {
        int64_t gap = (int64_t)(ts - u->prev_ts) * 1000;

        if (gap >= 20000000LL && (u->period_ns == 0 || gap < u->period_ns))
            u->period_ns = gap; /* skipped periods make multiples: the smallest is the period */
    }
    u->prev_ts = ts;
    if (end_mono <= p || (uint64_t)end_mono > now + 1000000000ULL)
        return; /* on no clock we know */
    sp = span_between(u, (uint64_t)(end_mono - p), (uint64_t)end_mono, now);
    /*
     * A period with nothing counted in flight, or in which the process launched without a
     * ceiling (nothing is counted then, while NVML sees its kernels), says nothing of the
     * duty. (Each sample is not clipped to its own time in flight: the period's edges fall
     * inside buckets, and a clip would take only the errors one way, billing less than the
     * kernels ran; the ratio of the sums is clipped instead.)
     */
    if (sp <= 0)
        return;
    if (sp > p)
        sp = p;
    run = (double)p * (pct > 100 ? 100 : pct) / 100.0;
    decay = 1.0 - (double)p / (double)DUTY_TAU_NS;
    if (decay < 0)
        decay = 0;
    u->run = u->run * decay + run;
    u->span = u->span * decay + (double)sp;
    u->last_sample_ns = now;
}

static int nvml_pid_known(void)
{
    if (pid_known < 0)
        pid_known = gs_proc_self_ns() == INIT_PID_NS;
    return pid_known;
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

void duty_poll(uint64_t now)
{
    static nvmlProcessUtilizationSample_t buf[DUTY_MAX_SAMPLES];
    int i;

    if (now < next_poll_ns || !nvml_pid_known())
        return;
    next_poll_ns = now + DUTY_POLL_NS;
    for (i = 0; i < MAX_ORD; i++) {
        struct gdev *d = &gdevs[i];
        struct duty_dev *u = &duties[i];
        unsigned int n = DUTY_MAX_SAMPLES, k;
        unsigned long long since;
        nvmlReturn_t r;
        struct timespec rt, mono;
        int64_t rt_minus_mono;
        pid_t me = getpid();
        nvmlDevice_t h;
        int state;

        if (d->state <= 0 || u->state < 0 || (!d->busy_since && now - d->idle_since > 2000000000ULL))
            continue;
        since = u->last_ts;
        h = u->h;
        state = u->state;
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
        clock_gettime(CLOCK_REALTIME, &rt);
        clock_gettime(CLOCK_MONOTONIC, &mono);
        pthread_mutex_lock(&mu);
        u->h = h;
        u->state = state;
        if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND) {
            u->state = -1;
            continue;
        }
        if (r != NVML_SUCCESS)
            continue; /* NOT_FOUND: nothing new; INSUFFICIENT_SIZE: next time, fewer */
        rt_minus_mono = ((int64_t)rt.tv_sec - (int64_t)mono.tv_sec) * 1000000000LL +
                        ((int64_t)rt.tv_nsec - (int64_t)mono.tv_nsec);
        now = now_ns();
        /* Oldest first: the period is learnt from consecutive samples. */
        for (;;) {
            int best = -1;

            for (k = 0; k < n && k < DUTY_MAX_SAMPLES; k++)
                if (buf[k].pid == (unsigned)me && buf[k].timeStamp > u->last_ts &&
                    (best < 0 || buf[k].timeStamp < buf[best].timeStamp))
                    best = (int)k;
            if (best < 0)
                break;
            u->last_ts = buf[best].timeStamp;
            take(u, buf[best].timeStamp, buf[best].smUtil, now, rt_minus_mono);
            stats.duty_samples++;
        }
    }
}

int64_t duty_bill(const struct gdev *d, int64_t dt, uint64_t now)
{
    uint32_t ppm = duty_ppm(d, now);

    return ppm >= 1000000 ? dt : (int64_t)((double)dt * ppm / 1e6);
}
