/*
 * A runtime-API (<<<>>>) program of small kernels, for bench/compute_share.py: it measures
 * its own throughput uncapped and under each compute ceiling, changing its tenant's ceiling
 * itself with `$GPUSLICE_BIN set "$GPUSLICE_TENANT" --compute P` between phases, so that
 * "alone" and "capped" are measured in the same process minutes apart.
 *
 * Work: a 64K-element float kernel doing 4 FMAs per element (256 blocks of 256 threads),
 * launched back to back on one non-blocking stream:
 *   stream   one unit is one <<<>>> launch
 *   graph    100 launches captured once (cudaStreamBeginCapture/EndCapture); one unit is
 *            one cudaGraphLaunch of them
 * Work is launched in chunks followed by cudaStreamSynchronize, sized to about --chunk-ms of
 * wall time when uncapped, and every chunk's completion time is recorded, so the work
 * completed inside a window is known.
 *
 * Phases, per repeat: uncapped ("none"), then each ceiling in turn (with --interleave an
 * uncapped phase before each ceiling); after all repeats one more uncapped phase
 * ("none-end"). With --warmup-seconds W, each capped phase that follows an uncapped one is
 * preceded by W s of work at its ceiling, unmeasured ("warmup"; the ceiling is then not set
 * again). A phase starts when `gpuslice set` returns, discards --settle seconds,
 * measures --phase-seconds, then works on --tail seconds more under the same ceiling (so
 * that an outside sampler's periods straddling the window's end see the same ceiling).
 * Output lines (parsed by compute_share.py, the same as its PyTorch workers print):
 *   tenant PID PATH   (first: this process and $GPUSLICE_TENANT, or "-")
 *   calib WORKLOAD UNITS_PER_CHUNK CHUNK_MS KERNELS_PER_UNIT
 *   phase WORKLOAD REPEAT LABEL RATE WINDOW_S CHUNKS SET_MS START END
 *         (RATE in kernels/s; START, END: the window in CLOCK_MONOTONIC seconds)
 *   error TEXT
 *
 * usage: compute_small stream|graph [--repeats N] [--phase-seconds S] [--settle S]
 *                      [--tail S] [--ceilings 10,25,...] [--chunk-ms MS] [--interleave]
 *                      [--warmup-seconds W] [--no-set]
 * env:   GPUSLICE_BIN (gpuslice), GPUSLICE_TENANT (set by gpuslice run),
 *        BENCH_PARENT_PID (exit when that process is gone)
 * Exit status 0 when every phase ran, 1 on a CUDA or `gpuslice set` error, 2 on bad usage.
 */
#include <cuda_runtime.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "small_kernel.cuh"

extern char **environ;

#define GRAPH_KERNELS 100
#define MAX_CEILINGS 32
#define MAX_POINTS (1 << 20)
#define CMD_TIMEOUT_S 20.0

struct bench {
    const char *workload; /* "cuda-small" or "cuda-graph" */
    int graph;
    cudaStream_t stream;
    cudaGraphExec_t exec;
    float *x;
    long units_per_chunk;
    int kernels_per_unit;
    /* completion times and cumulative kernels of the current phase */
    double *t;
    double *w;
    long npoints;
    pid_t parent;
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

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

static int cuda_ok(cudaError_t e, const char *what)
{
    if (e == cudaSuccess)
        return 1;
    printf("error %s: %s\n", what, cudaGetErrorString(e));
    fflush(stdout);
    return 0;
}

/* The parent (the driver script) is gone: stop rather than run on unattended. */
static int orphaned(const struct bench *b)
{
    return b->parent > 0 && kill(b->parent, 0) < 0 && errno == ESRCH;
}

/* Launches n units and waits for them; 0 or -1 on a CUDA error. */
static int run_chunk(struct bench *b, long n)
{
    long i;

    for (i = 0; i < n; i++) {
        if (b->graph) {
            if (cudaGraphLaunch(b->exec, b->stream) != cudaSuccess)
                break;
        } else {
            fma4<<<N_ELEMS / THREADS, THREADS, 0, b->stream>>>(b->x, N_ELEMS, 0.999f, 0.001f);
        }
    }
    if (!cuda_ok(cudaGetLastError(), b->graph ? "cudaGraphLaunch" : "<<<>>> launch") ||
        !cuda_ok(cudaStreamSynchronize(b->stream), "cudaStreamSynchronize"))
        return -1;
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Picks the number of units per chunk so that a chunk takes about chunk_ms uncapped. */
static int calibrate(struct bench *b, double chunk_ms)
{
    double t[5], t0, per_unit;
    long n = 1;
    int i;

    for (;;) { /* grow until one chunk takes a tenth of the target or more */
        t0 = now_s();
        if (run_chunk(b, n) < 0)
            return -1;
        if ((now_s() - t0) * 1e3 >= chunk_ms / 10 || n >= (1L << 24))
            break;
        n *= 4;
    }
    for (i = 0; i < 5; i++) {
        t0 = now_s();
        if (run_chunk(b, n) < 0)
            return -1;
        t[i] = now_s() - t0;
    }
    qsort(t, 5, sizeof(t[0]), cmp_double);
    per_unit = t[2] / (double)n;
    b->units_per_chunk = (long)(chunk_ms * 1e-3 / per_unit + 0.5);
    if (b->units_per_chunk < 1)
        b->units_per_chunk = 1;
    /* measure what was chosen */
    for (i = 0; i < 5; i++) {
        t0 = now_s();
        if (run_chunk(b, b->units_per_chunk) < 0)
            return -1;
        t[i] = now_s() - t0;
    }
    qsort(t, 5, sizeof(t[0]), cmp_double);
    printf("calib %s %ld %.3f %d\n", b->workload, b->units_per_chunk, t[2] * 1e3,
           b->kernels_per_unit);
    fflush(stdout);
    return 0;
}

/*
 * Runs chunks until one completes at or after t_end, recording (completion time, kernels
 * so far) from the point (t_start, 0). 0, or -1 on an error.
 */
static int run_until(struct bench *b, double t_start, double t_end)
{
    double w = 0, last_check = t_start;

    b->npoints = 0;
    b->t[b->npoints] = t_start;
    b->w[b->npoints++] = 0;
    for (;;) {
        double t;

        if (run_chunk(b, b->units_per_chunk) < 0)
            return -1;
        t = now_s();
        w += (double)(b->units_per_chunk * b->kernels_per_unit);
        if (b->npoints < MAX_POINTS) {
            b->t[b->npoints] = t;
            b->w[b->npoints++] = w;
        }
        if (t >= t_end)
            return 0;
        if (t - last_check > 0.5) {
            last_check = t;
            if (orphaned(b)) {
                printf("error the driver process %d is gone\n", (int)b->parent);
                return -1;
            }
        }
    }
}

/* Cumulative work at time x, linear between recorded completions. */
static double work_at(const struct bench *b, double x)
{
    long lo = 0, hi = b->npoints - 1;

    if (x <= b->t[0])
        return b->w[0];
    if (x >= b->t[hi])
        return b->w[hi];
    while (hi - lo > 1) {
        long mid = (lo + hi) / 2;
        if (b->t[mid] <= x)
            lo = mid;
        else
            hi = mid;
    }
    if (b->t[hi] <= b->t[lo])
        return b->w[hi];
    return b->w[lo] + (b->w[hi] - b->w[lo]) * (x - b->t[lo]) / (b->t[hi] - b->t[lo]);
}

static long chunks_between(const struct bench *b, double a, double z)
{
    long i, n = 0;

    for (i = 1; i < b->npoints; i++)
        n += b->t[i] > a && b->t[i] <= z;
    return n;
}

/*
 * Runs argv (argv[0] looked up in PATH) with LD_PRELOAD removed from its environment (the
 * CLI needs no interposer), its stdout onto our stderr (our stdout is the result stream),
 * and kills it after timeout_s. Returns its exit status, 124 when it timed out, or -1 when
 * it could not be started.
 */
static int run_cmd(char *const argv[], double timeout_s)
{
    posix_spawn_file_actions_t fa;
    char **env;
    size_t n = 0, i, k = 0;
    int status = 0, r;
    pid_t pid;
    double deadline = now_s() + timeout_s;

    while (environ[n])
        n++;
    if ((env = (char **)calloc(n + 1, sizeof(*env))) == NULL)
        return -1;
    for (i = 0; i < n; i++)
        if (strncmp(environ[i], "LD_PRELOAD=", 11) != 0)
            env[k++] = environ[i];
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, 2, 1);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    r = posix_spawnp(&pid, argv[0], &fa, NULL, argv, env);
    posix_spawn_file_actions_destroy(&fa);
    free(env);
    if (r != 0) {
        errno = r;
        return -1;
    }
    for (;;) {
        pid_t w = waitpid(pid, &status, WNOHANG);

        if (w == pid)
            break;
        if (w < 0 && errno != EINTR)
            return -1;
        if (now_s() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            return 124;
        }
        sleep_s(0.0005);
    }
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    return 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

static const char *gs_bin(void)
{
    const char *b = getenv("GPUSLICE_BIN");

    return b && *b ? b : "gpuslice";
}

/* gpuslice set "$GPUSLICE_TENANT" --compute VALUE; 0 or -1 (with an error line). */
static int set_ceiling(const char *value, double *ms)
{
    const char *tenant = getenv("GPUSLICE_TENANT");
    char *argv[6];
    double t0 = now_s();
    int rc;

    if (!tenant || !*tenant) {
        printf(
            "error GPUSLICE_TENANT is not set: run this under gpuslice run (or pass --no-set)\n");
        return -1;
    }
    argv[0] = (char *)gs_bin();
    argv[1] = (char *)"set";
    argv[2] = (char *)tenant;
    argv[3] = (char *)"--compute";
    argv[4] = (char *)value;
    argv[5] = NULL;
    rc = run_cmd(argv, CMD_TIMEOUT_S);
    *ms = (now_s() - t0) * 1e3;
    if (rc != 0) {
        if (rc < 0)
            printf("error %s set %s --compute %s could not be started: %s\n", argv[0], tenant,
                   value, strerror(errno));
        else
            printf("error %s set %s --compute %s %s (exit %d; its message is above)\n", argv[0],
                   tenant, value, rc == 124 ? "timed out" : "failed", rc);
        return -1;
    }
    return 0;
}

/* The ceiling last set ("100": gpuslice run --compute 100). */
static char ceiling_now[16] = "100";

/* One phase: set the ceiling (unless no_set or already set), settle, measure, tail; prints the
 * phase line. */
static int phase(struct bench *b, int repeat, const char *label, const char *value, int no_set,
                 double settle, double seconds, double tail)
{
    double set_ms = 0, t0, a, z, rate;

    if (!no_set && strcmp(value, ceiling_now) != 0) {
        if (run_chunk(b, 0) < 0) /* nothing in flight while the ceiling changes */
            return -1;
        if (set_ceiling(value, &set_ms) < 0)
            return -1;
        snprintf(ceiling_now, sizeof(ceiling_now), "%s", value);
    }
    t0 = now_s();
    a = t0 + settle;
    z = a + seconds;
    if (run_until(b, t0, z + tail) < 0)
        return -1;
    rate = (work_at(b, z) - work_at(b, a)) / (z - a);
    printf("phase %s %d %s %.6g %.4f %ld %.2f %.6f %.6f\n", b->workload, repeat, label, rate, z - a,
           chunks_between(b, a, z), set_ms, a, z);
    fflush(stdout);
    return 0;
}

static void usage(void)
{
    fprintf(stderr, "usage: compute_small stream|graph [--repeats N] [--phase-seconds S] "
                    "[--settle S] [--tail S] [--ceilings 10,25,50,75,90] [--chunk-ms MS] "
                    "[--interleave] [--warmup-seconds W] [--no-set]\n");
}

int main(int argc, char **argv)
{
    static const struct option opts[] = { { "repeats", required_argument, NULL, 'r' },
                                          { "phase-seconds", required_argument, NULL, 's' },
                                          { "settle", required_argument, NULL, 'S' },
                                          { "ceilings", required_argument, NULL, 'c' },
                                          { "chunk-ms", required_argument, NULL, 'k' },
                                          { "no-set", no_argument, NULL, 'n' },
                                          { "interleave", no_argument, NULL, 'I' },
                                          { "help", no_argument, NULL, 'h' },
                                          { "tail", required_argument, NULL, 'T' },
                                          { "warmup-seconds", required_argument, NULL, 'W' },
                                          { NULL, 0, NULL, 0 } };
    struct bench b;
    int repeats = 3, no_set = 0, interleave = 0, nceil = 0, ceilings[MAX_CEILINGS], c, r, i;
    double seconds = 2.0, settle = 0.3, chunk_ms = 8.0, tail = 0.0, warmup = 0.0;
    const char *list = "10,25,50,75,90", *pp;
    char value[16], label[16];
    cudaGraph_t graph;
    const char *parent;

    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&b, 0, sizeof(b));
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'r':
            repeats = atoi(optarg);
            break;
        case 's':
            seconds = atof(optarg);
            break;
        case 'S':
            settle = atof(optarg);
            break;
        case 'T':
            tail = atof(optarg);
            break;
        case 'W':
            warmup = atof(optarg);
            break;
        case 'c':
            list = optarg;
            break;
        case 'k':
            chunk_ms = atof(optarg);
            break;
        case 'n':
            no_set = 1;
            break;
        case 'I':
            interleave = 1;
            break;
        default:
            usage();
            return c == 'h' ? 0 : 2;
        }
    }
    if (optind != argc - 1 || (strcmp(argv[optind], "stream") && strcmp(argv[optind], "graph")) ||
        repeats < 1 || seconds <= 0 || settle < 0 || tail < 0 || chunk_ms <= 0 ||
        warmup < 0) {
        usage();
        return 2;
    }
    for (pp = list; *pp;) {
        char *end;
        long v = strtol(pp, &end, 10);
        if (end == pp || v < 1 || v > 100 || nceil == MAX_CEILINGS || (*end && *end != ',')) {
            fprintf(stderr,
                    "compute_small: --ceilings: \"%s\" is not a list of percentages "
                    "1..100 (use e.g. 10,25,50)\n",
                    list);
            return 2;
        }
        ceilings[nceil++] = (int)v;
        pp = *end ? end + 1 : end;
    }
    if (nceil == 0) {
        usage();
        return 2;
    }
    {
        const char *tenant = getenv("GPUSLICE_TENANT");
        printf("tenant %d %s\n", (int)getpid(), tenant && *tenant ? tenant : "-");
    }
    b.graph = strcmp(argv[optind], "graph") == 0;
    b.workload = b.graph ? "cuda-graph" : "cuda-small";
    b.kernels_per_unit = b.graph ? GRAPH_KERNELS : 1;
    parent = getenv("BENCH_PARENT_PID");
    b.parent = parent ? (pid_t)atoi(parent) : 0;
    b.t = (double *)malloc(MAX_POINTS * sizeof(double));
    b.w = (double *)malloc(MAX_POINTS * sizeof(double));
    if (!b.t || !b.w) {
        printf("error out of host memory\n");
        return 1;
    }

    if (!cuda_ok(cudaSetDevice(0), "cudaSetDevice") ||
        !cuda_ok(cudaStreamCreateWithFlags(&b.stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
        !cuda_ok(cudaMalloc((void **)&b.x, N_ELEMS * sizeof(float)), "cudaMalloc") ||
        !cuda_ok(cudaMemset(b.x, 0, N_ELEMS * sizeof(float)), "cudaMemset"))
        return 1;
    if (b.graph) {
        if (!cuda_ok(cudaStreamBeginCapture(b.stream, cudaStreamCaptureModeGlobal),
                     "cudaStreamBeginCapture"))
            return 1;
        for (i = 0; i < GRAPH_KERNELS; i++)
            fma4<<<N_ELEMS / THREADS, THREADS, 0, b.stream>>>(b.x, N_ELEMS, 0.999f, 0.001f);
        if (!cuda_ok(cudaGetLastError(), "launch during capture") ||
            !cuda_ok(cudaStreamEndCapture(b.stream, &graph), "cudaStreamEndCapture") ||
            !cuda_ok(cudaGraphInstantiate(&b.exec, graph, 0), "cudaGraphInstantiate"))
            return 1;
    }
    /* warm-up: clocks up, module loaded, graph uploaded */
    {
        double t_end = now_s() + 0.5;
        while (now_s() < t_end)
            if (run_chunk(&b, 64) < 0)
                return 1;
    }
    if (calibrate(&b, chunk_ms) < 0)
        return 1;
    {
        double t0 = now_s(); /* one more second of steady work before measuring */
        if (run_until(&b, t0, t0 + 1.0) < 0)
            return 1;
    }
    for (r = 0; r < repeats; r++) {
        for (i = 0; i < nceil; i++) {
            snprintf(value, sizeof(value), "%d", ceilings[i]);
            snprintf(label, sizeof(label), "%d", ceilings[i]);
            if (i == 0 || interleave) {
                if (phase(&b, r, "none", "none", no_set, settle, seconds, tail) < 0)
                    return 1;
                if (warmup > 0 && phase(&b, r, "warmup", value, no_set, 0, warmup, 0) < 0)
                    return 1;
            }
            if (phase(&b, r, label, value, no_set, settle, seconds, tail) < 0)
                return 1;
        }
    }
    if (phase(&b, repeats, "none-end", "none", no_set, settle, seconds, tail) < 0)
        return 1;
    {
        float h;
        if (!cuda_ok(cudaMemcpy(&h, b.x, sizeof(h), cudaMemcpyDeviceToHost), "cudaMemcpy"))
            return 1;
        printf("done %s x[0]=%g\n", b.workload, (double)h);
    }
    return 0;
}
