/*
 * Host cost of launching an empty kernel, for bench/launch_overhead.sh, which runs this
 * program natively and through gpuslice and compares. Two launch paths:
 *   runtime   empty<<<1, 1>>>() through libcudart (which reached the driver through
 *             cuGetProcAddress when it initialised)
 *   driver    cuLaunchKernel called through the pointer cudaGetDriverEntryPointByVersion
 *             returns (cuGetProcAddress underneath), as frameworks do
 * Each round synchronises, starts a host clock, launches N kernels on the legacy default
 * stream, synchronises again and stops the clock; it prints "sample API US_PER_LAUNCH".
 * Rounds alternate the two APIs, starting with a different one each round.
 *
 * "duty" mode keeps the device about half busy, so that a compute ceiling above 50% is
 * accounted but does not bind: each sample's launches go in bursts of BURST launches, each
 * burst followed by cudaDeviceSynchronize and then a sleep as long as the burst took. Only
 * the bursts are timed (launches through the final synchronise); the line is
 * "sample API US_PER_LAUNCH BURST_MS" (BURST_MS: the mean burst's wall time).
 *
 * "serve" mode is what bench/launch_pairs.py runs: after initialising CUDA and warming up
 * both APIs (WARMUP launches each) it prints "ready" and then answers one command per line
 * on stdin, so that several configurations (native, under the interposer...) can be alive
 * at once and measured in turn, A B A B, each paying its start-up once:
 *   run API N              ->  "sample API US_PER_LAUNCH"
 *   duty API N BURST       ->  "sample API US_PER_LAUNCH BURST_MS"   (duty-cycled, as above)
 *   quit                   ->  exits 0 (so does the end of stdin)
 * API is "runtime" or "driver"; an error prints "error TEXT" and exits 1.
 *
 * usage: launch_overhead [ROUNDS [LAUNCHES [WARMUP]]]   (defaults 3, 100000, 20000)
 *        launch_overhead duty [ROUNDS [LAUNCHES [WARMUP [BURST]]]]
 *                                        (defaults 3, 100000, 20000, 2000)
 *        launch_overhead serve [WARMUP]   (default 5000)
 * Exit status 1 when a CUDA call or launch failed.
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef CUresult (*launch_fn)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                              unsigned, unsigned, CUstream, void **, void **);

__global__ void empty(void)
{
}

static int rt_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    fprintf(stderr, "launch_overhead: %s: %s\n", what, cudaGetErrorString(e));
    return 0;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Sleeps s seconds (the idle half of a duty cycle). */
static void sleep_s(double s)
{
    struct timespec ts;

    if (s <= 0)
        return;
    ts.tv_sec = (time_t)s;
    ts.tv_nsec = (long)((s - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Launches n kernels; returns microseconds per launch, or -1 on an error. */
static double run_runtime(long n)
{
    double t0, t1;
    long i;

    if (!rt_ok(cudaDeviceSynchronize(), "sync"))
        return -1;
    t0 = now_s();
    for (i = 0; i < n; i++)
        empty<<<1, 1>>>();
    if (!rt_ok(cudaGetLastError(), "<<<>>> launch") || !rt_ok(cudaDeviceSynchronize(), "sync"))
        return -1;
    t1 = now_s();
    return (t1 - t0) * 1e6 / n;
}

static double run_driver(launch_fn launch, CUfunction f, long n)
{
    double t0, t1;
    unsigned bad = 0;
    long i;

    if (!rt_ok(cudaDeviceSynchronize(), "sync"))
        return -1;
    t0 = now_s();
    for (i = 0; i < n; i++)
        bad |= (unsigned)launch(f, 1, 1, 1, 1, 1, 1, 0, (CUstream)0, NULL, NULL);
    if (!rt_ok(cudaDeviceSynchronize(), "sync"))
        return -1;
    t1 = now_s();
    if (bad) {
        fprintf(stderr, "launch_overhead: cuLaunchKernel failed (%u)\n", bad);
        return -1;
    }
    return (t1 - t0) * 1e6 / n;
}

/*
 * Duty-cycled launches: n launches of one API in bursts of `burst`, each burst timed from its
 * first launch through cudaDeviceSynchronize and followed by an equal sleep. Returns
 * microseconds per launch inside the bursts (and the mean burst in *burst_ms), or -1.
 */
static double run_duty(int driver, launch_fn launch, CUfunction f, long n, long burst,
                       double *burst_ms)
{
    double busy = 0, t;
    long done = 0, k;
    int bursts = 0;

    while (done < n) {
        k = n - done < burst ? n - done : burst;
        t = driver ? run_driver(launch, f, k) : run_runtime(k);
        if (t < 0)
            return -1;
        t *= (double)k * 1e-6; /* seconds this burst took */
        busy += t;
        bursts++;
        done += k;
        sleep_s(t);
    }
    *burst_ms = busy * 1e3 / bursts;
    return busy * 1e6 / (double)n;
}

/* The serve loop: commands on stdin, one answer line each. */
static int serve(launch_fn launch, CUfunction f)
{
    char line[256], api[32];
    long n, burst;
    double us, burst_ms = 0;

    setvbuf(stdout, NULL, _IOLBF, 0);
    printf("ready\n");
    while (fgets(line, sizeof line, stdin)) {
        int duty = 0, driver;

        if (strncmp(line, "quit", 4) == 0)
            return 0;
        if (sscanf(line, "run %31s %ld", api, &n) == 2) {
            burst = 0;
        } else if (sscanf(line, "duty %31s %ld %ld", api, &n, &burst) == 3) {
            duty = 1;
        } else {
            printf("error unknown command: %s", line);
            return 1;
        }
        driver = strcmp(api, "driver") == 0;
        if ((!driver && strcmp(api, "runtime") != 0) || n <= 0 || (duty && burst <= 0)) {
            printf("error bad command: %s", line);
            return 1;
        }
        us = duty     ? run_duty(driver, launch, f, n, burst, &burst_ms)
             : driver ? run_driver(launch, f, n)
                      : run_runtime(n);
        if (us < 0) {
            printf("error the %s launches failed (see stderr)\n", api);
            return 1;
        }
        if (duty)
            printf("sample %s %.4f %.3f\n", api, us, burst_ms);
        else
            printf("sample %s %.4f\n", api, us);
    }
    return 0;
}

int main(int argc, char **argv)
{
    int duty = argc > 1 && strcmp(argv[1], "duty") == 0;
    int serving = argc > 1 && strcmp(argv[1], "serve") == 0;
    int rounds, r, k;
    long n, warm, burst;
    cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
    cudaFunction_t fn;
    launch_fn launch = NULL;
    double us, burst_ms = 0;

    if (duty) { /* the same arguments follow the word "duty", then BURST */
        argc--;
        argv++;
    }
    rounds = argc > 1 ? atoi(argv[1]) : 3;
    n = argc > 2 ? atol(argv[2]) : 100000;
    warm = argc > 3 ? atol(argv[3]) : 20000;
    if (serving) { /* serve [WARMUP] */
        rounds = 1;
        n = 1;
        warm = argc > 2 ? atol(argv[2]) : 5000;
    }
    burst = duty && argc > 4 ? atol(argv[4]) : 2000;

    if (rounds <= 0 || n <= 0 || warm < 0 || burst <= 0) {
        fprintf(stderr, "usage: launch_overhead [ROUNDS [LAUNCHES [WARMUP]]]\n"
                        "       launch_overhead duty [ROUNDS [LAUNCHES [WARMUP [BURST]]]]\n"
                        "       launch_overhead serve [WARMUP]\n");
        return 2;
    }
    if (!rt_ok(cudaSetDevice(0), "cudaSetDevice") || !rt_ok(cudaFree(0), "cudaFree(0)"))
        return 1;
    empty<<<1, 1>>>(); /* loads the module (lazy loading) before cudaGetFuncBySymbol */
    if (!rt_ok(cudaDeviceSynchronize(), "first launch") ||
        !rt_ok(cudaGetFuncBySymbol(&fn, (const void *)empty), "cudaGetFuncBySymbol") ||
        !rt_ok(cudaGetDriverEntryPointByVersion("cuLaunchKernel", (void **)&launch, 12000,
                                                cudaEnableDefault, &q),
               "cudaGetDriverEntryPointByVersion(cuLaunchKernel)"))
        return 1;
    if (q != cudaDriverEntryPointSuccess || !launch) {
        fprintf(stderr, "launch_overhead: cuLaunchKernel not found (%d)\n", (int)q);
        return 1;
    }
    if (warm && (run_runtime(warm) < 0 || run_driver(launch, (CUfunction)fn, warm) < 0))
        return 1;
    if (serving)
        return serve(launch, (CUfunction)fn);
    for (r = 0; r < rounds; r++) {
        for (k = 0; k < 2; k++) {
            int driver = (r + k) % 2;
            if (duty)
                us = run_duty(driver, launch, (CUfunction)fn, n, burst, &burst_ms);
            else
                us = driver ? run_driver(launch, (CUfunction)fn, n) : run_runtime(n);
            if (us < 0)
                return 1;
            if (duty)
                printf("sample %s %.4f %.3f\n", driver ? "driver" : "runtime", us, burst_ms);
            else
                printf("sample %s %.4f\n", driver ? "driver" : "runtime", us);
            fflush(stdout);
        }
    }
    return 0;
}
