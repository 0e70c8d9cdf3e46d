/*
 * Where a launch-bound program's time goes under a compute ceiling: launches the small
 * kernel of compute_small.cu back to back on one stream, in chunks followed by
 * cudaStreamSynchronize, for a fixed time, and records when every launch returned. Gaps
 * between returns longer than --gap-us (other than a chunk's synchronisation) are waits;
 * the runs of launches between them are bursts. It prints one line of totals and the launch
 * rate by position inside a burst, so that a rate that drops after each wait shows up
 * directly:
 *   trace LABEL WALL_S LAUNCHES RATE_PER_S BURSTS BURST_TIME_FRACTION WAIT_FRACTION
 *         RATE_IN_BURSTS RATE_0_100US RATE_100_500US RATE_500US_2MS RATE_AFTER_2MS
 *         SYNC_FRACTION BUSY_FRACTION
 * (rates in launches/s; fractions of the wall time; BUSY_FRACTION is gpuslice's own busy
 * share of the tenant over the same time, read with `$GPUSLICE_BIN tenants --json` before
 * and after, or -1 outside a tenant). Run it as it is, and under `gpuslice run --compute P`,
 * side by side; the machine should run no other tenant meanwhile.
 *
 * With --phases (under gpuslice run) it changes its own tenant's ceiling before each phase
 * (`$GPUSLICE_BIN set "$GPUSLICE_TENANT" --compute LABEL`), runs --settle seconds unrecorded,
 * then records --seconds, printing one line per phase, so that uncapped and capped phases
 * are compared inside one process. LABEL is "-" without --phases.
 *
 * usage: launch_trace [--seconds S] [--chunk N] [--gap-us US] [--phases none,50,...]
 *                     [--settle S]
 */
#include <cuda_runtime.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "small_kernel.cuh"

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* The first tenant's compute_busy_seconds on device 0 from `gpuslice tenants --json`, or -1. */
static double tenant_busy(void)
{
    const char *gs = getenv("GPUSLICE_BIN"), *key = "\"compute_busy_seconds\":";
    char cmd[4096], buf[65536], *p;
    size_t len;
    FILE *f;

    if (!gs || !getenv("GPUSLICE_TENANT") ||
        snprintf(cmd, sizeof(cmd), "'%s' tenants --json --interval 0", gs) >= (int)sizeof(cmd) ||
        strchr(gs, '\'') || !(f = popen(cmd, "r")))
        return -1;
    len = fread(buf, 1, sizeof(buf) - 1, f);
    buf[len] = 0;
    pclose(f);
    p = strstr(buf, key);
    return p ? atof(p + strlen(key)) : -1;
}

#define CK(call)                                                                                   \
    do {                                                                                           \
        cudaError_t e_ = (call);                                                                   \
        if (e_ != cudaSuccess) {                                                                   \
            printf("error %s: %s\n", #call, cudaGetErrorString(e_));                               \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

static uint64_t *t, *sync_end;
static unsigned char *after_sync;
static long cap;
static float *x;
static cudaStream_t s;

/* Launches chunks for `seconds`, recording every launch; the number of launches, or -1. */
static long record(double seconds, long chunk, uint64_t *t0)
{
    uint64_t t_end;
    long n = 0, i;

    memset(after_sync, 0, (size_t)cap);
    *t0 = now_ns();
    t_end = *t0 + (uint64_t)(seconds * 1e9);
    while (n + chunk < cap) {
        for (i = 0; i < chunk; i++) {
            fma4<<<N_ELEMS / THREADS, THREADS, 0, s>>>(x, N_ELEMS, 0.999f, 0.001f);
            t[n++] = now_ns();
        }
        if (cudaGetLastError() != cudaSuccess || cudaStreamSynchronize(s) != cudaSuccess) {
            printf("error a launch or cudaStreamSynchronize failed\n");
            return -1;
        }
        sync_end[n - 1] = now_ns();
        after_sync[n] = 1; /* the next launch follows a synchronisation */
        if (sync_end[n - 1] >= t_end)
            break;
    }
    return n;
}

static void analyze(const char *label, long n, uint64_t t0, double gap_us, double busy)
{
    uint64_t gap = (uint64_t)(gap_us * 1e3), wall = sync_end[n - 1] - t0;
    uint64_t burst_time = 0, wait_time = 0, sync_time = 0, b_start = t0, prev = t0;
    /* launches and time by position inside a burst: [0,100us) [100,500us) [0.5,2ms) 2ms+ */
    static const uint64_t edge[4] = { 100000, 500000, 2000000, UINT64_MAX };
    double cnt[4] = { 0 }, dur[4] = { 0 };
    long bursts = 1, i;

    for (i = 0; i < n; i++) {
        uint64_t from = prev, d;
        int k;
        if (after_sync[i] && i > 0) {
            /* the synchronisation is not a wait; what follows it is */
            sync_time += sync_end[i - 1] - t[i - 1];
            from = sync_end[i - 1];
        }
        d = t[i] - from;
        if (d > gap && i > 0) {
            wait_time += d;
            burst_time += (after_sync[i] ? t[i - 1] : from) - b_start;
            b_start = t[i];
            bursts++;
            prev = t[i];
            continue;
        }
        for (k = 0; k < 3 && from - b_start >= edge[k]; k++)
            ;
        cnt[k] += 1;
        dur[k] += (double)d;
        prev = t[i];
    }
    burst_time += t[n - 1] - b_start;
    printf("trace %s %.3f %ld %.0f %ld %.4f %.4f %.0f %.0f %.0f %.0f %.0f %.4f %.4f\n", label,
           wall / 1e9, n, n / (wall / 1e9), bursts, (double)burst_time / (double)wall,
           (double)wait_time / (double)wall,
           (cnt[0] + cnt[1] + cnt[2] + cnt[3]) / ((dur[0] + dur[1] + dur[2] + dur[3]) / 1e9),
           dur[0] ? cnt[0] / (dur[0] / 1e9) : 0, dur[1] ? cnt[1] / (dur[1] / 1e9) : 0,
           dur[2] ? cnt[2] / (dur[2] / 1e9) : 0, dur[3] ? cnt[3] / (dur[3] / 1e9) : 0,
           (double)sync_time / (double)wall, busy);
    fflush(stdout);
}

/* `$GPUSLICE_BIN set "$GPUSLICE_TENANT" --compute VALUE -q`; 0 or -1. */
static int set_ceiling(const char *value)
{
    const char *gs = getenv("GPUSLICE_BIN"), *tn = getenv("GPUSLICE_TENANT");
    char cmd[4096];

    if (!gs || !tn || strchr(gs, '\'') || strchr(tn, '\'') ||
        snprintf(cmd, sizeof(cmd), "'%s' set '%s' --compute %s -q", gs, tn, value) >=
            (int)sizeof(cmd)) {
        printf("error --phases needs GPUSLICE_BIN and GPUSLICE_TENANT (run under gpuslice run)\n");
        return -1;
    }
    if (system(cmd) != 0) {
        printf("error %s failed\n", cmd);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        { "seconds", required_argument, NULL, 's' }, { "chunk", required_argument, NULL, 'c' },
        { "gap-us", required_argument, NULL, 'g' },  { "phases", required_argument, NULL, 'p' },
        { "settle", required_argument, NULL, 'S' },  { NULL, 0, NULL, 0 }
    };
    double seconds = 2.0, gap_us = 50.0, settle = 0.1;
    const char *phases = NULL;
    long chunk = 2000, n, i;
    uint64_t t0, t_end;
    int c;

    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (c == 's')
            seconds = atof(optarg);
        else if (c == 'c')
            chunk = atol(optarg);
        else if (c == 'g')
            gap_us = atof(optarg);
        else if (c == 'p')
            phases = optarg;
        else if (c == 'S')
            settle = atof(optarg);
        else {
            fprintf(stderr, "usage: launch_trace [--seconds S] [--chunk N] [--gap-us US] "
                            "[--phases none,50,...] [--settle S]\n");
            return 2;
        }
    }
    if (seconds <= 0 || seconds > 60 || chunk < 1 || gap_us <= 0 || settle < 0 || settle > 10) {
        fprintf(stderr, "launch_trace: --seconds 0..60, --chunk >= 1, --gap-us > 0, "
                        "--settle 0..10\n");
        return 2;
    }
    cap = (long)(seconds * 2e6) + chunk + 16; /* at most 2 launches a microsecond */
    t = (uint64_t *)malloc((size_t)cap * sizeof(*t));
    sync_end = (uint64_t *)malloc((size_t)cap * sizeof(*sync_end));
    after_sync = (unsigned char *)calloc((size_t)cap, 1);
    if (!t || !sync_end || !after_sync) {
        printf("error out of host memory\n");
        return 1;
    }
    CK(cudaSetDevice(0));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc((void **)&x, N_ELEMS * sizeof(float)));
    CK(cudaMemset(x, 0, N_ELEMS * sizeof(float)));
    t_end = now_ns() + 500000000ULL; /* warm-up */
    while (now_ns() < t_end) {
        for (i = 0; i < 64; i++)
            fma4<<<N_ELEMS / THREADS, THREADS, 0, s>>>(x, N_ELEMS, 0.999f, 0.001f);
        CK(cudaStreamSynchronize(s));
    }
    if (!phases) {
        double busy0 = tenant_busy(), busy1;
        if ((n = record(seconds, chunk, &t0)) < 0)
            return 1;
        busy1 = tenant_busy();
        analyze("-", n, t0, gap_us,
                busy0 >= 0 && busy1 >= 0 ? (busy1 - busy0) / ((sync_end[n - 1] - t0) / 1e9) : -1.0);
        return 0;
    }
    {
        char list[1024], *save = NULL, *ph;
        if (strlen(phases) >= sizeof(list)) {
            fprintf(stderr, "launch_trace: --phases is too long\n");
            return 2;
        }
        strcpy(list, phases);
        for (ph = strtok_r(list, ",", &save); ph; ph = strtok_r(NULL, ",", &save)) {
            double busy0, busy1;
            if (set_ceiling(ph) < 0 || (settle > 0 && record(settle, chunk, &t0) < 0))
                return 1;
            busy0 = tenant_busy();
            if ((n = record(seconds, chunk, &t0)) < 0)
                return 1;
            busy1 = tenant_busy();
            analyze(ph, n, t0, gap_us,
                    busy0 >= 0 && busy1 >= 0 ? (busy1 - busy0) / ((sync_end[n - 1] - t0) / 1e9)
                                             : -1.0);
        }
    }
    return 0;
}
