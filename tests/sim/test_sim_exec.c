/*
 * Tests of work on the simulated device: spin kernels take their time (by
 * events and by the wall clock), launches serialise on the device, stream
 * query/synchronize, the per-thread default stream, Ex and cooperative
 * launches, graphs by stream capture and built explicitly, what a capture
 * allows in each mode (as measured on an H200: h200-driver-facts.txt,
 * "capture" lines), and modules.
 */
#include "sim_test.h"

#include <pthread.h>

#define MS 1000000ull

static struct cu cu;
static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    sim_test_state_init("exec");
    if (cu_load(&cu) < 0 || cu.cuInit(0) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cu.cuDevicePrimaryCtxRelease_v2(0);
    sim_test_state_done();
    return 0;
}

static float elapsed_ms(CUevent a, CUevent b)
{
    float ms = -1;

    assert_ok(cu.cuEventElapsedTime_v2(&ms, a, b));
    return ms;
}

static void test_spin_kernel_takes_its_time(void **state)
{
    CUfunction f = get_function(&cu, "spin_20000us");
    CUevent a, b;
    CUstream s;
    uint64_t t0, wall;
    float ms, ms1;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, 0));
    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&b, 0));
    t0 = now_ns();
    assert_ok(cu.cuEventRecord(a, s));
    assert_ok(launch1(&cu, f, s));
    assert_ok(cu.cuEventRecord(b, s));
    assert_cu(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_cu(cu.cuEventQuery(b), CUDA_ERROR_NOT_READY);
    assert_cu(cu.cuEventElapsedTime(&ms, a, b), CUDA_ERROR_NOT_READY);
    assert_ok(cu.cuStreamSynchronize(s));
    wall = now_ns() - t0;
    assert_ok(cu.cuStreamQuery(s));
    assert_ok(cu.cuEventQuery(b));
    ms = elapsed_ms(a, b);
    assert_ok(cu.cuEventElapsedTime(&ms1, a, b));
    assert_true(ms1 == ms);
    assert_true(ms >= 20.0f && ms < 40.0f);
    assert_true(wall >= 20 * MS && wall < 40 * MS);
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy(b));
    assert_ok(cu.cuStreamDestroy_v2(s));
}

static void test_other_functions_take_no_time(void **state)
{
    static const char *const names[] = { "gemm", "spin_us", "spin_12", "spin_x5us", "spin_5usx" };
    CUevent a, b;

    (void)state;
    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&b, 0));
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        CUfunction f = get_function(&cu, names[i]);
        assert_ok(cu.cuEventRecord(a, NULL));
        assert_ok(launch1(&cu, f, NULL));
        assert_ok(launch1(&cu, f, CU_STREAM_LEGACY));
        assert_ok(cu.cuEventRecord(b, NULL));
        assert_ok(cu.cuEventSynchronize(b));
        assert_true(elapsed_ms(a, b) < 5.0f);
    }
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(b));
}

static void test_kernels_on_different_streams_serialise_on_the_device(void **state)
{
    CUfunction f = get_function(&cu, "spin_10000us");
    CUstream s1, s2;
    uint64_t t0;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuStreamCreateWithPriority(&s2, CU_STREAM_NON_BLOCKING, -100));
    t0 = now_ns();
    assert_ok(launch1(&cu, f, s1));
    assert_ok(launch1(&cu, f, s2));
    assert_ok(cu.cuStreamSynchronize(s2)); /* s2's kernel waited for s1's */
    assert_true(now_ns() - t0 >= 20 * MS);
    assert_ok(cu.cuStreamQuery(s1));
    assert_ok(cu.cuStreamDestroy_v2(s1));
    assert_ok(cu.cuStreamDestroy(s2));
    assert_cu(cu.cuStreamDestroy(s2), CUDA_ERROR_INVALID_HANDLE);
}

static void test_copies_wait_for_the_default_stream(void **state)
{
    CUfunction f = get_function(&cu, "spin_10000us");
    CUdeviceptr p;
    char buf[4];
    uint64_t t0;

    (void)state;
    assert_ok(cu.cuMemAlloc_v2(&p, sizeof(buf)));
    t0 = now_ns();
    assert_ok(launch1(&cu, f, NULL));
    assert_ok(cu.cuMemcpyDtoH_v2(buf, p, sizeof(buf)));
    assert_true(now_ns() - t0 >= 10 * MS);
    assert_ok(cu.cuMemFree_v2(p));
}

struct ptds_arg {
    CUfunction f;
    CUresult query_after_launch, sync, query_after_sync;
    uint64_t waited;
};

static void *ptds_thread(void *p)
{
    struct ptds_arg *a = p;
    uint64_t t0;

    cu.cuCtxSetCurrent(ctx);
    t0 = now_ns();
    cu.cuLaunchKernel_ptsz(a->f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    a->query_after_launch = cu.cuStreamQuery_ptsz(NULL);
    a->sync = cu.cuStreamSynchronize(CU_STREAM_PER_THREAD);
    a->waited = now_ns() - t0;
    a->query_after_sync = cu.cuStreamQuery_ptsz(NULL);
    return NULL;
}

static void test_per_thread_default_stream(void **state)
{
    struct ptds_arg a = { .f = get_function(&cu, "spin_10000us") };
    pthread_t t;
    CUstreamCaptureStatus st;

    (void)state;
    pthread_create(&t, NULL, ptds_thread, &a);
    pthread_join(t, NULL);
    assert_cu(a.query_after_launch, CUDA_ERROR_NOT_READY);
    assert_ok(a.sync);
    assert_true(a.waited >= 10 * MS);
    assert_ok(a.query_after_sync);
    /* This thread's own per-thread stream is another stream, and idle. */
    assert_ok(cu.cuStreamQuery_ptsz(NULL));
    assert_ok(cu.cuStreamIsCapturing_ptsz(NULL, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
}

static void test_launch_ex_and_cooperative(void **state)
{
    CUfunction f = get_function(&cu, "spin_5000us");
    CUlaunchAttribute coop = { .id = CU_LAUNCH_ATTRIBUTE_COOPERATIVE, .value.cooperative = 1 };
    CUlaunchConfig cfg = { .gridDimX = 132,
                           .gridDimY = 1,
                           .gridDimZ = 1,
                           .blockDimX = 256,
                           .blockDimY = 1,
                           .blockDimZ = 1,
                           .hStream = NULL,
                           .attrs = &coop,
                           .numAttrs = 1 };
    CUevent a, b;
    float ms;

    (void)state;
    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&b, 0));
    assert_ok(cu.cuEventRecord(a, NULL));
    assert_ok(cu.cuLaunchKernelEx(&cfg, f, NULL, NULL));
    assert_ok(cu.cuLaunchCooperativeKernel(f, 132, 1, 1, 256, 1, 1, 0, NULL, NULL));
    assert_ok(cu.cuEventRecord(b, NULL));
    assert_ok(cu.cuEventSynchronize(b));
    ms = elapsed_ms(a, b);
    assert_true(ms >= 10.0f && ms < 30.0f);

    assert_ok(cu.cuEventRecord_ptsz(a, NULL));
    assert_ok(cu.cuLaunchKernelEx_ptsz(&cfg, f, NULL, NULL));
    assert_ok(cu.cuLaunchCooperativeKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL));
    assert_ok(cu.cuEventRecord_ptsz(b, NULL));
    assert_ok(cu.cuStreamSynchronize_ptsz(NULL));
    ms = elapsed_ms(a, b);
    assert_true(ms >= 10.0f && ms < 30.0f);

    /* 132 SMs hold 8 blocks of 256 threads each: more cannot be co-resident. */
    cfg.gridDimX = 132 * 8 + 1;
    assert_cu(cu.cuLaunchKernelEx(&cfg, f, NULL, NULL), CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    assert_cu(cu.cuLaunchCooperativeKernel(f, 132 * 8 + 1, 1, 1, 256, 1, 1, 0, NULL, NULL),
              CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE);
    cfg.numAttrs = 0;
    assert_ok(cu.cuLaunchKernelEx(&cfg, get_function(&cu, "noop"), NULL, NULL));
    cfg.gridDimX = 0;
    assert_cu(cu.cuLaunchKernelEx(&cfg, f, NULL, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuLaunchKernel(f, 1, 1, 1, 1025, 1, 1, 0, NULL, NULL, NULL),
              CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuLaunchKernel((CUfunction)&cfg, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
              CUDA_ERROR_INVALID_HANDLE);
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(b));
}

static void test_graph_by_stream_capture_runs_when_launched(void **state)
{
    CUfunction f = get_function(&cu, "spin_5000us");
    CUstreamCaptureStatus st;
    CUstream s;
    CUgraph g;
    CUgraphExec e;
    CUevent a, b;
    uint64_t t0;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&b, 0));
    assert_ok(cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    assert_ok(cu.cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_ACTIVE);
    assert_cu(cu.cuStreamBeginCapture(s), CUDA_ERROR_ILLEGAL_STATE);
    t0 = now_ns();
    assert_ok(launch1(&cu, f, s));
    assert_ok(cu.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, NULL, NULL));
    assert_ok(cu.cuStreamEndCapture(s, &g));
    assert_true(now_ns() - t0 < 5 * MS); /* recorded, not run */
    assert_ok(cu.cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_NONE);
    assert_ok(cu.cuStreamQuery(s));
    assert_ok(cu.cuGraphInstantiateWithFlags(&e, g, 0));
    assert_ok(cu.cuEventRecord(a, s));
    assert_ok(cu.cuGraphLaunch(e, s));
    assert_ok(cu.cuGraphLaunch_ptsz(e, s));
    assert_ok(cu.cuEventRecord(b, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_true(elapsed_ms(a, b) >= 20.0f);
    assert_ok(cu.cuGraphExecDestroy(e));
    assert_ok(cu.cuGraphDestroy(g));
    assert_cu(cu.cuGraphDestroy(g), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(b));
    assert_ok(cu.cuStreamDestroy_v2(s));
}

static void test_capture_broken_by_a_sync_is_invalidated(void **state)
{
    CUfunction f = get_function(&cu, "spin_1000us");
    CUstream s;
    CUgraph g = (CUgraph)1;
    CUstreamCaptureStatus st;

    (void)state;
    assert_cu(cu.cuStreamBeginCapture(NULL), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_ok(cu.cuStreamCreate(&s, 0));
    assert_ok(cu.cuStreamBeginCapture(s));
    assert_ok(launch1(&cu, f, s));
    assert_cu(cu.cuStreamSynchronize(s), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
    assert_ok(cu.cuStreamIsCapturing(s, &st));
    assert_int_equal(st, CU_STREAM_CAPTURE_STATUS_INVALIDATED);
    assert_cu(launch1(&cu, f, s), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_cu(cu.cuStreamEndCapture(s, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    assert_null(g);
    assert_cu(cu.cuStreamEndCapture(s, &g), CUDA_ERROR_ILLEGAL_STATE);
    /* The per-thread stream can capture. */
    assert_ok(cu.cuStreamBeginCapture_v2_ptsz(NULL, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_ok(cu.cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    assert_ok(cu.cuStreamEndCapture_ptsz(NULL, &g));
    assert_non_null(g);
    assert_ok(cu.cuGraphDestroy(g));
    assert_ok(cu.cuStreamBeginCapture_ptsz(s));
    assert_ok(cu.cuStreamEndCapture(s, &g));
    assert_ok(cu.cuGraphDestroy(g));
    assert_ok(cu.cuStreamDestroy_v2(s));
}

/* ---- what a capture allows, per mode, as the H200's driver answered ---- */

static const CUstreamCaptureMode capture_modes[] = { CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                     CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                     CU_STREAM_CAPTURE_MODE_RELAXED };
static const char *const capture_mode_names[] = { "global", "thread-local", "relaxed" };

struct other {
    int what;
    CUstream capturing, plain;
    CUevent ev;
    CUresult r;
};

/* driver_facts.c's list of another thread's calls, in its order. */
static const char *const other_names[] = { "cuEventQuery(event recorded outside)",
                                           "cuStreamQuery(another stream)",
                                           "cuEventRecord(event, another stream)",
                                           "cuEventCreate",
                                           "cuMemAlloc(1 MiB)",
                                           "cuStreamIsCapturing(the capturing stream)",
                                           "cuCtxGetCurrent + cuCtxPushCurrent/Pop",
                                           "cuStreamGetCtx(the capturing stream)",
                                           "cuEventQuery(legacy-stream event)",
                                           "cuStreamQuery(CU_STREAM_LEGACY)",
                                           "cuEventRecord(event, CU_STREAM_LEGACY)",
                                           "cuMemGetInfo" };

/* In global mode these failed (CAPTURE_UNSUPPORTED) and invalidated the capture. */
static const int other_unsafe[] = { 1, 1, 0, 0, 1, 0, 0, 0, 1, 1, 0, 0 };

static void *other_thread(void *arg)
{
    struct other *o = arg;
    CUstreamCaptureStatus st;
    CUcontext c;
    CUevent e;
    CUdeviceptr p;
    size_t f, t;

    cu.cuCtxSetCurrent(ctx);
    switch (o->what) {
    case 0:
    case 8:
        o->r = cu.cuEventQuery(o->ev);
        break;
    case 1:
        o->r = cu.cuStreamQuery(o->plain);
        break;
    case 2:
        o->r = cu.cuEventRecord(o->ev, o->plain);
        break;
    case 3:
        if ((o->r = cu.cuEventCreate(&e, CU_EVENT_DISABLE_TIMING)) == CUDA_SUCCESS)
            cu.cuEventDestroy_v2(e);
        break;
    case 4:
        if ((o->r = cu.cuMemAlloc_v2(&p, MiB)) == CUDA_SUCCESS)
            cu.cuMemFree_v2(p);
        break;
    case 5:
        o->r = cu.cuStreamIsCapturing(o->capturing, &st);
        break;
    case 6:
        if ((o->r = cu.cuCtxGetCurrent(&c)) == CUDA_SUCCESS &&
            (o->r = cu.cuCtxPushCurrent_v2(ctx)) == CUDA_SUCCESS)
            o->r = cu.cuCtxPopCurrent_v2(&c);
        break;
    case 7:
        o->r = cu.cuStreamGetCtx(o->capturing, &c);
        break;
    case 9:
        o->r = cu.cuStreamQuery(CU_STREAM_LEGACY);
        break;
    case 10:
        o->r = cu.cuEventRecord(o->ev, CU_STREAM_LEGACY);
        break;
    default:
        o->r = cu.cuMemGetInfo_v2(&f, &t);
        break;
    }
    return NULL;
}

static void test_capture_modes_allow_what_the_h200_allowed(void **state)
{
    CUfunction f = get_function(&cu, "noop");
    CUstream cap, plain;
    CUevent ev, ev_plain;
    CUgraph g;

    (void)state;
    assert_ok(cu.cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuStreamCreate(&plain, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    assert_ok(cu.cuEventCreate(&ev_plain, CU_EVENT_DISABLE_TIMING));
    for (int m = 0; m < 3; m++) {
        /* The capturing thread's own record into its capture, then a query of that event. */
        assert_ok(cu.cuStreamBeginCapture_v2(cap, capture_modes[m]));
        assert_ok(launch1(&cu, f, cap));
        assert_ok(cu.cuEventRecord(ev, cap));
        assert_cu(cu.cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
        assert_cu(cu.cuStreamEndCapture(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        /* Its own query of the capturing stream. */
        assert_ok(cu.cuStreamBeginCapture_v2(cap, capture_modes[m]));
        assert_ok(launch1(&cu, f, cap));
        assert_cu(cu.cuStreamQuery(cap), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        assert_cu(cu.cuStreamEndCapture(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        /* Another thread's calls while this one captures. */
        for (int w = 0; w < (int)(sizeof(other_names) / sizeof(other_names[0])); w++) {
            struct other o = { w, cap, plain, ev_plain, CUDA_ERROR_UNKNOWN };
            int unsafe = m == 0 && other_unsafe[w];
            CUresult end;
            pthread_t th;

            assert_ok(cu.cuEventRecord(ev_plain, w == 8 ? CU_STREAM_LEGACY : plain));
            assert_ok(cu.cuCtxSynchronize());
            assert_ok(cu.cuStreamBeginCapture_v2(cap, capture_modes[m]));
            assert_ok(launch1(&cu, f, cap));
            assert_int_equal(pthread_create(&th, NULL, other_thread, &o), 0);
            assert_int_equal(pthread_join(th, NULL), 0);
            end = launch1(&cu, f, cap);
            if (end == CUDA_SUCCESS)
                end = cu.cuStreamEndCapture(cap, &g);
            else
                assert_cu(cu.cuStreamEndCapture(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
            if (o.r != (unsafe ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS) ||
                (end == CUDA_SUCCESS) == unsafe)
                fail_msg("capture %s: another thread's %s -> %d; capture end %d",
                         capture_mode_names[m], other_names[w], o.r, end);
            if (end == CUDA_SUCCESS)
                assert_ok(cu.cuGraphDestroy(g));
        }
    }
    /* The entry point without a mode captures in global mode. */
    {
        struct other o = { 0, cap, plain, ev_plain, CUDA_ERROR_UNKNOWN };
        pthread_t th;
        assert_ok(cu.cuStreamBeginCapture(cap));
        assert_int_equal(pthread_create(&th, NULL, other_thread, &o), 0);
        assert_int_equal(pthread_join(th, NULL), 0);
        assert_cu(o.r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
        assert_cu(cu.cuStreamEndCapture(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
    }
    assert_ok(cu.cuEventDestroy_v2(ev));
    assert_ok(cu.cuEventDestroy_v2(ev_plain));
    assert_ok(cu.cuStreamDestroy_v2(cap));
    assert_ok(cu.cuStreamDestroy_v2(plain));
}

/*
 * The capturing thread's own unsafe calls: forbidden in global and
 * thread-local mode, allowed in relaxed mode (CUDA's documented rule; the
 * H200 run measured only the queries above).
 */
static void test_capturing_thread_may_not_allocate_unless_relaxed(void **state)
{
    CUstream cap;
    CUdeviceptr p;
    CUgraph g;

    (void)state;
    assert_ok(cu.cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    for (int m = 0; m < 3; m++) {
        CUresult r;
        assert_ok(cu.cuStreamBeginCapture_v2(cap, capture_modes[m]));
        r = cu.cuMemAlloc_v2(&p, MiB);
        if (capture_modes[m] == CU_STREAM_CAPTURE_MODE_RELAXED) {
            assert_ok(r);
            assert_ok(cu.cuMemFree_v2(p));
            assert_ok(cu.cuStreamEndCapture(cap, &g));
            assert_ok(cu.cuGraphDestroy(g));
        } else {
            assert_cu(r, CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            assert_cu(cu.cuCtxSynchronize(), CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED);
            assert_cu(cu.cuStreamEndCapture(cap, &g), CUDA_ERROR_STREAM_CAPTURE_INVALIDATED);
        }
    }
    /* With the capture over, all is allowed again. */
    assert_ok(cu.cuMemAlloc_v2(&p, MiB));
    assert_ok(cu.cuMemFree_v2(p));
    assert_ok(cu.cuStreamDestroy_v2(cap));
}

/* A captured event record is a node: it records when the graph runs, not before. */
static void test_captured_event_record_runs_with_the_graph(void **state)
{
    CUfunction f = get_function(&cu, "spin_5000us");
    CUstream s;
    CUevent a, ev;
    CUgraph g;
    CUgraphExec e;
    uint64_t t0;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&ev, 0));
    assert_ok(cu.cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    assert_ok(launch1(&cu, f, s));
    assert_ok(cu.cuEventRecord(ev, s));
    assert_ok(cu.cuStreamEndCapture(s, &g));
    /* Last recorded in a capture: still not to be waited on. */
    assert_cu(cu.cuEventQuery(ev), CUDA_ERROR_CAPTURED_EVENT);
    assert_cu(cu.cuEventSynchronize(ev), CUDA_ERROR_CAPTURED_EVENT);
    assert_ok(cu.cuGraphInstantiateWithFlags(&e, g, 0));
    t0 = now_ns();
    assert_ok(cu.cuEventRecord(a, s));
    assert_ok(cu.cuGraphLaunch(e, s));
    assert_cu(cu.cuEventQuery(ev), CUDA_ERROR_NOT_READY); /* recorded by the graph, at its end */
    assert_ok(cu.cuEventSynchronize(ev));
    assert_true(now_ns() - t0 >= 5 * MS);
    assert_true(elapsed_ms(a, ev) >= 5.0f);
    assert_ok(cu.cuEventQuery(ev));
    assert_ok(cu.cuGraphExecDestroy(e));
    assert_ok(cu.cuGraphDestroy(g));
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(ev));
    assert_ok(cu.cuStreamDestroy_v2(s));
}

static void test_explicit_graph_runs_its_kernel_nodes(void **state)
{
    CUfunction f = get_function(&cu, "spin_4000us");
    CUDA_KERNEL_NODE_PARAMS_v1 p1 = { .func = f,
                                      .gridDimX = 1,
                                      .gridDimY = 1,
                                      .gridDimZ = 1,
                                      .blockDimX = 64,
                                      .blockDimY = 1,
                                      .blockDimZ = 1 };
    CUDA_KERNEL_NODE_PARAMS p2 = { .func = f,
                                   .gridDimX = 1,
                                   .gridDimY = 1,
                                   .gridDimZ = 1,
                                   .blockDimX = 64,
                                   .blockDimY = 1,
                                   .blockDimZ = 1 };
    CUgraphNode n1, n2, n3;
    CUgraph g;
    CUgraphExec e, e2;
    CUevent a, b;
    char log[16] = "junk";
    float ms;

    (void)state;
    assert_ok(cu.cuGraphCreate(&g, 0));
    assert_ok(cu.cuGraphAddKernelNode(&n1, g, NULL, 0, &p1));
    assert_ok(cu.cuGraphAddKernelNode_v2(&n2, g, &n1, 1, &p2));
    assert_ok(cu.cuGraphAddKernelNode_v2(&n3, g, (CUgraphNode[]){ n1, n2 }, 2, &p2));
    assert_cu(cu.cuGraphAddKernelNode_v2(&n3, g, (CUgraphNode[]){ (CUgraphNode)&g }, 1, &p2),
              CUDA_ERROR_INVALID_VALUE);
    p2.func = NULL;
    assert_cu(cu.cuGraphAddKernelNode_v2(&n3, g, NULL, 0, &p2), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuGraphInstantiateWithFlags(&e, g, 0));
    assert_ok(cu.cuGraphInstantiate(&e2, g, NULL, log, sizeof(log)));
    assert_string_equal(log, "");
    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&b, 0));
    assert_ok(cu.cuEventRecord(a, NULL));
    assert_ok(cu.cuGraphLaunch(e, NULL));
    assert_ok(cu.cuEventRecord(b, NULL));
    assert_ok(cu.cuEventSynchronize(b));
    ms = elapsed_ms(a, b);
    assert_true(ms >= 12.0f && ms < 30.0f);
    assert_ok(cu.cuGraphExecDestroy(e));
    assert_ok(cu.cuGraphExecDestroy(e2));
    assert_cu(cu.cuGraphExecDestroy(e2), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuGraphDestroy(g));
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(b));
}

static void test_events_without_timing_or_record(void **state)
{
    CUevent a, b;
    float ms;

    (void)state;
    assert_ok(cu.cuEventCreate(&a, CU_EVENT_DISABLE_TIMING));
    assert_ok(cu.cuEventCreate(&b, 0));
    assert_ok(cu.cuEventQuery(b)); /* never recorded: complete */
    assert_ok(cu.cuEventSynchronize(b));
    assert_cu(cu.cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
    assert_ok(cu.cuEventRecord(a, NULL));
    assert_ok(cu.cuEventRecord(b, NULL));
    assert_cu(cu.cuEventElapsedTime(&ms, a, b), CUDA_ERROR_INVALID_HANDLE);
    assert_cu(cu.cuEventCreate(&a, 4), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(b));
    assert_cu(cu.cuEventDestroy_v2(b), CUDA_ERROR_INVALID_HANDLE);
}

static void test_modules_load_from_any_file_and_unload(void **state)
{
    CUmodule m;
    CUfunction f1, f2;

    (void)state;
    assert_ok(cu.cuModuleLoad(&m, "/proc/self/exe"));
    assert_ok(cu.cuModuleGetFunction(&f1, m, "spin_10us"));
    assert_ok(cu.cuModuleGetFunction(&f2, m, "spin_10us"));
    assert_ptr_equal(f1, f2);
    assert_ok(cu.cuModuleUnload(m));
    assert_cu(cu.cuModuleUnload(m), CUDA_ERROR_INVALID_HANDLE);
    assert_cu(launch1(&cu, f1, NULL), CUDA_ERROR_INVALID_HANDLE);
    assert_cu(cu.cuModuleLoad(&m, "/nonexistent/kernel.cubin"), (CUresult)301);
    assert_cu(cu.cuModuleLoadData(&m, NULL), CUDA_ERROR_INVALID_VALUE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spin_kernel_takes_its_time),
        cmocka_unit_test(test_other_functions_take_no_time),
        cmocka_unit_test(test_kernels_on_different_streams_serialise_on_the_device),
        cmocka_unit_test(test_copies_wait_for_the_default_stream),
        cmocka_unit_test(test_per_thread_default_stream),
        cmocka_unit_test(test_launch_ex_and_cooperative),
        cmocka_unit_test(test_graph_by_stream_capture_runs_when_launched),
        cmocka_unit_test(test_capture_broken_by_a_sync_is_invalidated),
        cmocka_unit_test(test_capture_modes_allow_what_the_h200_allowed),
        cmocka_unit_test(test_capturing_thread_may_not_allocate_unless_relaxed),
        cmocka_unit_test(test_captured_event_record_runs_with_the_graph),
        cmocka_unit_test(test_explicit_graph_runs_its_kernel_nodes),
        cmocka_unit_test(test_events_without_timing_or_record),
        cmocka_unit_test(test_modules_load_from_any_file_and_unload),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
