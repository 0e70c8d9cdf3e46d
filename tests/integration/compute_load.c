/*
 * A saturating load for compute-ceiling tests on the simulated GPU: launches
 * spin kernels (which hold the device a known time) back to back for a while
 * through one launch path, then prints the share of wall time its kernels
 * held the device: "share 0.301 launches 1234". It synchronises after about
 * every 20 ms of work, as real programs do, so that without a ceiling the
 * queue stays short too.
 *
 * usage: compute_load PATH SECONDS KERNEL_US [THREADS]
 *   PATH: stream (cuLaunchKernel on a created stream), legacy (the legacy
 *   default stream), ptds (cuLaunchKernel_ptsz, per-thread default stream),
 *   ex (cuLaunchKernelEx), coop (cuLaunchCooperativeKernel), graph (a graph
 *   of 10 kernels, cuGraphLaunch), capture (captures a graph while loading),
 *   idle (3 kernels, then 200 ms of host work, repeatedly: the device is mostly
 *   idle), gaps (one kernel, then COMPUTE_LOAD_GAP_US of host work, repeatedly, a
 *   synchronisation every 20 ms: a launch-bound loop whose kernels are shorter than the gaps
 *   between them; it also prints "late_rate R", its launches per second over the second
 *   half of the run, after a ceiling's duty is learnt; with COMPUTE_LOAD_RATE_MS=M also
 *   "rate END R" for every window of M ms, END on the wall clock in seconds), ptds-capture (another thread launches once on its per-thread stream
 *   while this one captures, then this one loads a stream); ex_ptsz, coop_ptsz,
 *   graph_ptsz: the per-thread-default-stream variants of ex, coop and graph; gaps-stream:
 *   the gaps load for COMPUTE_LOAD_FIRST_S seconds (3 by default), then the stream load for
 *   SECONDS, of which alone it prints the share (a workload that turns saturating after a
 *   ceiling's duty was learnt low); rest-stream: one kernel, then COMPUTE_LOAD_FIRST_S
 *   seconds (1 by default) of nothing, then the stream load for SECONDS, of which alone it
 *   prints the share (a tenant idle a while, whose budget is full, turning saturating);
 *   stream-retain: the stream load, the primary context retained and released once more
 *   after each launch (as a library does), the program's own reference held throughout;
 *   ctx-destroy: 8 kernels launched in a context of its own (cuCtxCreate), which is destroyed
 *   at once with them in flight, then the stream load in the primary context; bad-capture: a
 *   capture of the legacy stream the driver refuses to begin ("begin_capture R" first), a
 *   global capture invalidated (cuStreamSynchronize of the captured stream) whose
 *   cuStreamEndCapture fails, then the stream load ("end_capture R" first); wrong-thread: a
 *   global capture another thread tries to end (refused, the capture goes on) while another
 *   stream's kernels run, then 20 ms later the capturing thread ends it, then the stream
 *   load ("end_capture R R" first);
 *   pair-streams, pair-ctx, pair-ptds: one kernel on a stream B, then 4 queued behind it on
 *   a stream A, then a wait for B alone, then for A, over and over: B and A two created
 *   streams, B waited for with cuStreamSynchronize (pair-streams); B a stream of the primary
 *   context waited for with cuCtxSynchronize, A a stream of a second context of the device
 *   (pair-ctx); B the main thread's per-thread default stream, A another thread's, each
 *   waited for with cuStreamSynchronize_ptsz (pair-ptds). A wait for B alone must leave A's
 *   work, still running, to be billed.
 *   COMPUTE_LOAD_CLUSTER=N: ex and ex_ptsz launch a grid of one thread-block cluster
 *   of N blocks (CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION).
 * Under gpuslice run it also prints what the tenant was billed while it ran
 * (compute_busy_ns in its shared state) beside the device time of its own
 * kernels and the wall time of the load: "billed_s B kernel_s K wall_s W".
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"
#include "gpuslice/tenant_abi.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

static const char *path;
static double seconds;
static unsigned kernel_us;
static CUcontext ctx;
static CUdevice dev;
static CUfunction fn;
static char fn_name[64];
static double in_launch; /* seconds inside launch calls (legacy path, one thread) */
/* COMPUTE_LOAD_TRACE=1 (stream path, one thread): every launch's return time, for trace_report. */
static double *trace_t;
static long trace_n, trace_cap;

/* The device time the tenant has been billed, all devices (ns), or -1 outside a tenant. */
static double billed_ns(void)
{
    static const struct gpuslice_tenant *t;
    const char *file = getenv("GPUSLICE_TENANT");
    double sum = 0;
    int i, fd;

    if (t == NULL && file && (fd = open(file, O_RDONLY | O_CLOEXEC)) >= 0) {
        void *m = mmap(NULL, sizeof(*t), PROT_READ, MAP_SHARED, fd, 0);
        close(fd);
        if (m != MAP_FAILED)
            t = m;
    }
    if (t == NULL)
        return -1;
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        sum += (double)__atomic_load_n(&t->dev[i].compute_busy_ns, __ATOMIC_RELAXED);
    return sum;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "compute_load: %s failed: %d\n", #call, (int)r_);                      \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static CUgraphExec make_graph(CUstream s)
{
    CUgraph g;
    CUgraphExec ge;
    int i;

    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    for (i = 0; i < 10; i++)
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
    CHECK(cuStreamEndCapture(s, &g));
    CHECK(cuGraphInstantiateWithFlags(&ge, g, 0));
    return ge;
}

static void *load(void *arg)
{
    long *done = arg;
    CUstream s = NULL, side = NULL;
    CUgraphExec ge = NULL;
    CUlaunchConfig cfg;
    double end;
    long n = 0;

    CHECK(cuCtxSetCurrent(ctx));
    if (strcmp(path, "stream") == 0 || strcmp(path, "stream-retain") == 0 ||
        strcmp(path, "ex") == 0 || strcmp(path, "coop") == 0 || strcmp(path, "graph") == 0 ||
        strcmp(path, "capture") == 0 || strcmp(path, "coop_ptsz") == 0 ||
        strcmp(path, "graph_ptsz") == 0)
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (strcmp(path, "graph") == 0 || strcmp(path, "graph_ptsz") == 0)
        ge = make_graph(s);
    if (strcmp(path, "capture") == 0)
        CHECK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 32;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    const char *cl = getenv("COMPUTE_LOAD_CLUSTER");
    CUlaunchAttribute cat;
    if (cl && atoi(cl) > 0) {
        memset(&cat, 0, sizeof(cat));
        cat.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
        cat.value.clusterDim.x = (unsigned)atoi(cl);
        cat.value.clusterDim.y = cat.value.clusterDim.z = 1;
        cfg.gridDimX = cat.value.clusterDim.x;
        cfg.attrs = &cat;
        cfg.numAttrs = 1;
    }
    end = now_s() + seconds;
    /* Like a real program, wait for the work now and then (every ~20 ms of it). */
    const char *se = getenv("COMPUTE_LOAD_SYNC_EVERY");
    long every = se ? atol(se) : kernel_us ? 20000 / (long)kernel_us + 1 : 2000, next_sync = every;
    /* COMPUTE_LOAD_HOST_US: host work between launches, as an interpreter would add. */
    const char *hw = getenv("COMPUTE_LOAD_HOST_US");
    double host_s = hw ? atof(hw) / 1e6 : 0;
    while (now_s() < end) {
        if (host_s > 0) {
            double until = now_s() + host_s;
            while (now_s() < until)
                ;
        }
        if (n >= next_sync) {
            CHECK(cuCtxSynchronize());
            next_sync = n + every;
        }
        if (strcmp(path, "stream") == 0 || strcmp(path, "capture") == 0) {
            CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
            if (trace_t && trace_n < trace_cap)
                trace_t[trace_n++] = now_s();
            n++;
        } else if (strcmp(path, "stream-retain") == 0) {
            CUcontext again;

            CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
            CHECK(cuDevicePrimaryCtxRetain(&again, dev));
            CHECK(cuDevicePrimaryCtxRelease_v2(dev));
            n++;
        } else if (strcmp(path, "legacy") == 0) {
            double t = now_s();
            CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
            in_launch += now_s() - t;
            n++;
        } else if (strcmp(path, "ptds") == 0) {
            CHECK(cuLaunchKernel_ptsz(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
            n++;
        } else if (strcmp(path, "ex") == 0) {
            CHECK(cuLaunchKernelEx(&cfg, fn, NULL, NULL));
            n++;
        } else if (strcmp(path, "coop") == 0) {
            CHECK(cuLaunchCooperativeKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL));
            n++;
        } else if (strcmp(path, "graph") == 0) {
            CHECK(cuGraphLaunch(ge, s));
            n += 10;
        } else if (strcmp(path, "ex_ptsz") == 0) {
            /* cfg.hStream NULL: this thread's per-thread default stream. */
            CHECK(cuLaunchKernelEx_ptsz(&cfg, fn, NULL, NULL));
            n++;
        } else if (strcmp(path, "coop_ptsz") == 0) {
            CHECK(cuLaunchCooperativeKernel_ptsz(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL));
            n++;
        } else if (strcmp(path, "graph_ptsz") == 0) {
            CHECK(cuGraphLaunch_ptsz(ge, s));
            n += 10;
        }
        if (side && n % 50 == 0) {
            /* A capture while work is in flight must not upset either. */
            CUgraphExec e = make_graph(side);
            CHECK(cuGraphExecDestroy(e));
        }
    }
    CHECK(cuCtxSynchronize());
    *done = n;
    return NULL;
}

/*
 * Where the time went: runs of launches separated by gaps over 50 us are bursts; prints the
 * share of time in bursts and the launch rate inside them, overall and in their first 100 us.
 */
static void trace_report(double t0, double t1)
{
    double gap = 50e-6, b_start = t0, prev = t0, in_burst = 0, n_in = 0, first = 0, n_first = 0;
    long bursts = 1, i;

    for (i = 0; i < trace_n; i++) {
        double d = trace_t[i] - prev;
        if (d > gap) {
            in_burst += prev - b_start;
            b_start = trace_t[i];
            bursts++;
        } else {
            n_in++;
            if (trace_t[i] - b_start < 100e-6)
                n_first++, first += d;
        }
        prev = trace_t[i];
    }
    in_burst += prev - b_start;
    printf("trace bursts %ld burst_frac %.4f rate_in_bursts %.0f rate_first_100us %.0f\n", bursts,
           in_burst / (t1 - t0), n_in / in_burst, first > 0 ? n_first / first : 0);
}

static void *ptds_once(void *arg)
{
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuLaunchKernel_ptsz(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    return NULL;
}

/* Work the device mostly does not do: what is charged must stay small. */
static long idle_load(void)
{
    struct timespec host = { 0, 200000000 };
    CUstream s;
    double end = now_s() + seconds;
    long n = 0;
    int i;

    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    while (now_s() < end) {
        for (i = 0; i < 3; i++, n++)
            CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        nanosleep(&host, NULL);
        CHECK(cuStreamSynchronize(s));
    }
    return n;
}

/* Kernels shorter than the host's gaps between them; *late: launches/s over the second half. */
static long gap_load(double *late)
{
    const char *g = getenv("COMPUTE_LOAD_GAP_US");
    double gap = (g ? atof(g) : 4.0 * kernel_us) * 1e-6, t = now_s(), end = t + seconds;
    double half = t + seconds / 2, sync_at = t + 0.02, w;
    const char *re = getenv("COMPUTE_LOAD_RATE_MS");
    double every = re ? atof(re) * 1e-3 : 0, win = t;
    long n = 0, n_half = -1, n_win = 0;
    CUstream s;

    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    while ((t = now_s()) < end) {
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        n++;
        for (w = now_s() + gap; now_s() < w;)
            ;
        if (n_half < 0 && t >= half)
            n_half = n;
        if (every > 0 && t - win >= every) {
            /* COMPUTE_LOAD_RATE_MS: "rate END RATE", launches/s over each window, END on the
               wall clock (CLOCK_REALTIME s, as date +%s.%N says it). */
            struct timespec rt;

            clock_gettime(CLOCK_REALTIME, &rt);
            printf("rate %.3f %.0f\n", (double)rt.tv_sec + rt.tv_nsec * 1e-9,
                   (double)(n - 1 - n_win) / (t - win));
            n_win = n - 1;
            win = t;
        }
        if (t >= sync_at) {
            CHECK(cuStreamSynchronize(s));
            sync_at = t + 0.02;
        }
    }
    CHECK(cuStreamSynchronize(s));
    *late = n_half < 0 ? 0 : (double)(n - n_half) / (now_s() - half);
    return n;
}

/* pair-ptds: the other thread's side, told what to do through cmd (1 launch 4, 2 wait, 3 end). */
static pthread_mutex_t pair_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pair_cv = PTHREAD_COND_INITIALIZER;
static int pair_cmd;

static void *pair_side(void *arg)
{
    int cmd, i;

    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    for (;;) {
        pthread_mutex_lock(&pair_mu);
        while (pair_cmd == 0)
            pthread_cond_wait(&pair_cv, &pair_mu);
        cmd = pair_cmd;
        pthread_mutex_unlock(&pair_mu);
        if (cmd == 3)
            return NULL;
        if (cmd == 1)
            for (i = 0; i < 4; i++)
                CHECK(cuLaunchKernel_ptsz(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        else
            CHECK(cuStreamSynchronize_ptsz(NULL));
        pthread_mutex_lock(&pair_mu);
        pair_cmd = 0;
        pthread_cond_broadcast(&pair_cv);
        pthread_mutex_unlock(&pair_mu);
    }
}

static void pair_tell(int cmd)
{
    pthread_mutex_lock(&pair_mu);
    pair_cmd = cmd;
    pthread_cond_broadcast(&pair_cv);
    while (cmd != 3 && pair_cmd != 0)
        pthread_cond_wait(&pair_cv, &pair_mu);
    pthread_mutex_unlock(&pair_mu);
}

/* The pair-* loads: B's one kernel, A's 4 behind it, a wait for B alone, then for A. */
static long pair_load(void)
{
    int mode = strcmp(path, "pair-streams") == 0 ? 0 : strcmp(path, "pair-ctx") == 0 ? 1 : 2;
    double end = now_s() + seconds;
    CUstream sa = NULL, sb = NULL;
    CUcontext c2 = NULL, popped;
    CUfunction f2 = fn;
    CUmodule m2;
    pthread_t th;
    long n = 0;
    int i;

    CHECK(cuStreamCreate(&sb, CU_STREAM_NON_BLOCKING));
    if (mode == 0)
        CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
    if (mode == 1) {
        CHECK(cuCtxCreate_v2(&c2, 0, dev));
        CHECK(cuModuleLoadData(&m2, "simulated"));
        CHECK(cuModuleGetFunction(&f2, m2, fn_name));
        CHECK(cuStreamCreate(&sa, CU_STREAM_NON_BLOCKING));
        CHECK(cuCtxSetCurrent(ctx));
    }
    if (mode == 2)
        pthread_create(&th, NULL, pair_side, NULL);
    while (now_s() < end) {
        if (mode == 2)
            CHECK(cuLaunchKernel_ptsz(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        else
            CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, sb, NULL, NULL));
        if (mode == 1)
            CHECK(cuCtxPushCurrent_v2(c2));
        if (mode == 2)
            pair_tell(1);
        else
            for (i = 0; i < 4; i++)
                CHECK(cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, sa, NULL, NULL));
        if (mode == 1)
            CHECK(cuCtxPopCurrent_v2(&popped));
        n += 5;
        /* B alone: A's kernels, queued behind it, still run. */
        if (mode == 0)
            CHECK(cuStreamSynchronize(sb));
        else if (mode == 1)
            CHECK(cuCtxSynchronize());
        else
            CHECK(cuStreamSynchronize_ptsz(NULL));
        /* Then A. */
        if (mode == 0) {
            CHECK(cuStreamSynchronize(sa));
        } else if (mode == 1) {
            CHECK(cuCtxPushCurrent_v2(c2));
            CHECK(cuCtxSynchronize());
            CHECK(cuCtxPopCurrent_v2(&popped));
        } else {
            pair_tell(2);
        }
    }
    if (mode == 2) {
        pair_tell(3);
        pthread_join(th, NULL);
    }
    if (mode == 1)
        CHECK(cuCtxDestroy_v2(c2));
    CHECK(cuCtxSetCurrent(ctx));
    return n;
}

/* A context of its own, destroyed with 8 kernels in flight. */
static void ctx_destroyed_busy(void)
{
    CUcontext c2;
    CUmodule m2;
    CUfunction f2;
    int i;

    CHECK(cuCtxCreate_v2(&c2, 0, dev));
    CHECK(cuModuleLoadData(&m2, "simulated"));
    CHECK(cuModuleGetFunction(&f2, m2, fn_name));
    for (i = 0; i < 8; i++)
        CHECK(cuLaunchKernel(f2, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuCtxDestroy_v2(c2));
    CHECK(cuCtxSetCurrent(ctx));
}

/* A global capture invalidated, whose end fails (the capture is over then). */
static void capture_failed(void)
{
    CUstream x;
    CUgraph g = NULL;
    CUresult r;

    /* A capture the driver refuses to begin (the legacy stream cannot capture) is none. */
    r = cuStreamBeginCapture_v2(NULL, CU_STREAM_CAPTURE_MODE_GLOBAL);
    printf("begin_capture %d\n", (int)r);
    CHECK(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture_v2(x, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, x, NULL, NULL));
    if (cuStreamSynchronize(x) == CUDA_SUCCESS) { /* refused while capturing: invalidates */
        fprintf(stderr, "compute_load: a captured stream synchronised\n");
        exit(1);
    }
    r = cuStreamEndCapture(x, &g);
    printf("end_capture %d\n", (int)r);
    CHECK(cuStreamDestroy_v2(x));
}

static CUstream wt_stream;
static CUresult wt_result;

static void *end_elsewhere(void *arg)
{
    CUgraph g = NULL;

    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    wt_result = cuStreamEndCapture(wt_stream, &g);
    return NULL;
}

/*
 * A global capture another thread tries to end (refused: it goes on) while work of another
 * stream is in flight; 20 ms later the capturing thread ends it (no call of the interposer's
 * may have invalidated it meanwhile).
 */
static void capture_wrong_thread(void)
{
    struct timespec pause = { 0, 20000000 };
    CUgraph g = NULL;
    CUstream y;
    pthread_t th;
    CUresult r;
    int i;

    CHECK(cuStreamCreate(&y, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&wt_stream, CU_STREAM_NON_BLOCKING));
    for (i = 0; i < 8; i++)
        CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, y, NULL, NULL));
    CHECK(cuStreamBeginCapture_v2(wt_stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, wt_stream, NULL, NULL));
    pthread_create(&th, NULL, end_elsewhere, NULL);
    pthread_join(th, NULL);
    CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, wt_stream, NULL, NULL));
    nanosleep(&pause, NULL);
    r = cuStreamEndCapture(wt_stream, &g);
    CHECK(cuStreamSynchronize(y));
    CHECK(cuStreamDestroy_v2(y));
    printf("end_capture %d %d\n", (int)wt_result, (int)r);
    if (g)
        CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(wt_stream));
}

/* A per-thread-stream launch made during another thread's capture must not wedge us. */
static void ptds_during_capture(void)
{
    CUstream x;
    CUgraph g;
    pthread_t th;

    CHECK(cuStreamCreate(&x, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture_v2(x, CU_STREAM_CAPTURE_MODE_RELAXED));
    pthread_create(&th, NULL, ptds_once, NULL);
    pthread_join(th, NULL);
    CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, x, NULL, NULL));
    CHECK(cuStreamEndCapture(x, &g));
    CHECK(cuGraphDestroy(g));
    path = "stream";
}

int main(int argc, char **argv)
{
    char *name = fn_name;
    pthread_t th[16];
    long done[16];
    int threads, i;
    long total = 0;
    double t0, wall, b0;
    CUmodule m;

    if (argc < 4) {
        fprintf(stderr, "usage: compute_load PATH SECONDS KERNEL_US [THREADS]\n");
        return 2;
    }
    path = argv[1];
    seconds = atof(argv[2]);
    kernel_us = (unsigned)atoi(argv[3]);
    threads = argc > 4 ? atoi(argv[4]) : 1;
    if (threads < 1 || threads > 16 || seconds <= 0) {
        fprintf(stderr, "compute_load: bad arguments\n");
        return 2;
    }
    CHECK(cuInit(0));
    /* COMPUTE_LOAD_DEVICE: the CUDA ordinal to load (default 0). */
    CHECK(
        cuDeviceGet(&dev, getenv("COMPUTE_LOAD_DEVICE") ? atoi(getenv("COMPUTE_LOAD_DEVICE")) : 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&m, "simulated"));
    /* KERNEL_US 0: a kernel that takes no device time, to time the launch path itself. */
    snprintf(name, sizeof(fn_name), kernel_us ? "spin_%uus" : "noop", kernel_us);
    CHECK(cuModuleGetFunction(&fn, m, name));
    if (strcmp(path, "ptds-capture") == 0)
        ptds_during_capture();
    if (strcmp(path, "gaps-stream") == 0) {
        /* The gaps load for COMPUTE_LOAD_FIRST_S seconds (3 by default), then the stream. */
        const char *f = getenv("COMPUTE_LOAD_FIRST_S");
        double late, keep = seconds;

        seconds = f ? atof(f) : 3.0;
        gap_load(&late);
        seconds = keep;
        path = "stream";
    }
    if (strcmp(path, "ctx-destroy") == 0) {
        ctx_destroyed_busy();
        path = "stream";
    }
    if (strcmp(path, "bad-capture") == 0) {
        capture_failed();
        path = "stream";
    }
    if (strcmp(path, "wrong-thread") == 0) {
        capture_wrong_thread();
        path = "stream";
    }
    if (strcmp(path, "rest-stream") == 0) {
        const char *f = getenv("COMPUTE_LOAD_FIRST_S");
        double rest = f ? atof(f) : 1.0;
        struct timespec ts = { (time_t)rest, (long)((rest - (double)(time_t)rest) * 1e9) };

        CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cuCtxSynchronize());
        nanosleep(&ts, NULL);
        path = "stream";
    }
    t0 = now_s();
    b0 = billed_ns();
    if (strcmp(path, "gaps") == 0) {
        double late;

        total = gap_load(&late);
        wall = now_s() - t0;
        printf("share %.3f launches %ld late_rate %.0f\n", (double)total * kernel_us / 1e6 / wall,
               total, late);
        if (b0 >= 0)
            printf("billed_s %.4f kernel_s %.4f wall_s %.4f\n", (billed_ns() - b0) / 1e9,
                   total * kernel_us / 1e6, wall);
        CHECK(cuDevicePrimaryCtxRelease_v2(dev));
        return 0;
    }
    if (strncmp(path, "pair-", 5) == 0) {
        total = pair_load();
        wall = now_s() - t0;
        printf("share %.3f launches %ld\n", (double)total * kernel_us / 1e6 / wall, total);
        if (b0 >= 0)
            printf("billed_s %.4f kernel_s %.4f wall_s %.4f\n", (billed_ns() - b0) / 1e9,
                   total * kernel_us / 1e6, wall);
        CHECK(cuDevicePrimaryCtxRelease_v2(dev));
        return 0;
    }
    if (strcmp(path, "idle") == 0) {
        total = idle_load();
        wall = now_s() - t0;
        printf("share %.3f launches %ld\n", (double)total * kernel_us / 1e6 / wall, total);
        CHECK(cuDevicePrimaryCtxRelease_v2(dev));
        return 0;
    }
    if (getenv("COMPUTE_LOAD_TRACE") && threads == 1) {
        trace_cap = (long)(seconds * 2e6) + 16;
        trace_t = malloc((size_t)trace_cap * sizeof(*trace_t));
    }
    for (i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, load, &done[i]);
    for (i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += done[i];
    }
    wall = now_s() - t0;
    if (trace_t)
        trace_report(t0, t0 + wall);
    printf("share %.3f launches %ld ns_per_launch %.0f in_launch_s %.3f\n",
           (double)total * kernel_us / 1e6 / wall, total, wall * 1e9 * threads / (double)total,
           in_launch);
    if (b0 >= 0)
        printf("billed_s %.4f kernel_s %.4f wall_s %.4f\n", (billed_ns() - b0) / 1e9,
               (double)total * kernel_us / 1e6, wall);
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
