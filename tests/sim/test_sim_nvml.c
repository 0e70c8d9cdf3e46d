/*
 * Tests of the simulated libnvidia-ml.so.1: init refcount, versions, device
 * identity (agreeing with the driver's UUID bytes), memory v1/v2, processes
 * v1/v3, utilisation and per-process samples consistent with what the
 * simulated driver did; CUDA_VISIBLE_DEVICES remapping the driver's devices
 * and not NVML's. Two devices.
 */
#include "sim_test.h"
#include "sim_state.h" /* SIM_SAMPLE_NS: NVML's sample period */

#include <sys/wait.h>

#define MS 1000000ull

static struct cu cu;
static struct nvml nv;
static nvmlDevice_t dev0, dev1;
static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    sim_test_state_init("nvml");
    setenv("GPUSLICE_SIM_DEVICES", "2", 1);
    setenv("GPUSLICE_SIM_CONTEXT_HIDDEN", "6M", 1); /* as the H200: 5.8 MiB a context */
    return cu_load(&cu) < 0 || nvml_load(&nv) < 0 ? -1 : 0;
}

static int teardown(void **state)
{
    (void)state;
    sim_test_state_done();
    return 0;
}

/* r615's per-cgroup memory limits: absent before r615, checked arguments after. */
struct set_limits {
    const char *ns;
    unsigned long long soft, hard;
};
struct get_limits {
    const char *ns;
    unsigned long long soft, hard, used;
};

static void test_memory_limits_need_r615(void **state)
{
    nvmlReturn_t (*set)(nvmlDevice_t, struct set_limits *) =
        (nvmlReturn_t(*)(nvmlDevice_t, struct set_limits *))dlsym(nv.handle,
                                                                  "nvmlDeviceSetMemoryLimits_v1");
    nvmlReturn_t (*get)(nvmlDevice_t, struct get_limits *) =
        (nvmlReturn_t(*)(nvmlDevice_t, struct get_limits *))dlsym(nv.handle,
                                                                  "nvmlDeviceGetMemoryLimits_v1");
    struct set_limits s = { "/nonexistent-cgroup", 0, 1ULL << 30 };
    struct get_limits g = { "/nonexistent-cgroup", 1, 1, 1 };
    char v[64];
    nvmlDevice_t d;

    (void)state;
    assert_non_null(set);
    assert_non_null(get);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_SUCCESS);
    unsetenv("GPUSLICE_SIM_DRIVER_VERSION");
    assert_int_equal(nv.nvmlSystemGetDriverVersion(v, sizeof(v)), NVML_SUCCESS);
    assert_string_equal(v, "580.159.04-sim");
    assert_int_equal(set(d, &s), NVML_ERROR_FUNCTION_NOT_FOUND);
    assert_int_equal(get(d, &g), NVML_ERROR_FUNCTION_NOT_FOUND);
    setenv("GPUSLICE_SIM_DRIVER_VERSION", "615.00-sim", 1);
    assert_int_equal(nv.nvmlSystemGetDriverVersion(v, sizeof(v)), NVML_SUCCESS);
    assert_string_equal(v, "615.00-sim");
    assert_int_equal(set(d, &s), NVML_ERROR_NOT_FOUND); /* no such cgroup */
    s.ns = "relative/path";
    assert_int_equal(set(d, &s), NVML_ERROR_INVALID_ARGUMENT);
    s.ns = "/";
    s.soft = 2ULL << 30; /* soft above hard */
    assert_int_equal(set(d, &s), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(set(d, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(get(d, &g), NVML_SUCCESS); /* none set: soft 0, hard at its max */
    assert_true(g.soft == 0 && g.hard == ~0ULL);
    unsetenv("GPUSLICE_SIM_DRIVER_VERSION");
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
}

static void test_calls_before_init_are_uninitialized(void **state)
{
    unsigned n;
    nvmlDevice_t d;

    (void)state;
    assert_int_equal(nv.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nv.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    assert_string_equal(nv.nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
}

static void test_init_is_refcounted(void **state)
{
    unsigned n = 0;

    (void)state;
    assert_int_equal(nv.nvmlInit(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlInitWithFlags(0), NVML_SUCCESS);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCount(&n), NVML_SUCCESS); /* one reference left */
    assert_int_equal(n, 2);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetCount(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(nv.nvmlInitWithFlags(8), NVML_ERROR_INVALID_ARGUMENT);
    /* The rest of the tests run initialised, with the driver too. */
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(0, &dev0), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex(1, &dev1), NVML_SUCCESS);
    assert_ok(cu.cuInit(0));
    assert_ok(cu.cuDevicePrimaryCtxRetain(&ctx, 0));
    assert_ok(cu.cuCtxSetCurrent(ctx));
}

static void test_versions(void **state)
{
    char v[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda = 0;

    (void)state;
    assert_int_equal(nv.nvmlSystemGetDriverVersion(v, sizeof(v)), NVML_SUCCESS);
    assert_string_equal(v, "580.159.04-sim");
    assert_int_equal(nv.nvmlSystemGetDriverVersion(v, 5), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nv.nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 13000);
    /* GPUSLICE_SIM_CUDA_VERSION: what both libraries report, read at each call. */
    setenv("GPUSLICE_SIM_CUDA_VERSION", "12080", 1);
    assert_int_equal(nv.nvmlSystemGetCudaDriverVersion(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 12080);
    cuda = 0;
    assert_int_equal(cu.cuDriverGetVersion(&cuda), CUDA_SUCCESS);
    assert_int_equal(cuda, 12080);
    setenv("GPUSLICE_SIM_CUDA_VERSION", "12085", 1);
    assert_int_equal(nv.nvmlSystemGetCudaDriverVersion(&cuda), NVML_ERROR_UNKNOWN);
    assert_int_equal(cu.cuDriverGetVersion(&cuda), CUDA_ERROR_INVALID_VALUE);
    unsetenv("GPUSLICE_SIM_CUDA_VERSION");
    assert_int_equal(cu.cuDriverGetVersion(&cuda), CUDA_SUCCESS);
    assert_int_equal(cuda, 13000);
}

static void test_device_identity_agrees_with_the_driver(void **state)
{
    char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], want[64];
    nvmlDevice_t d;
    unsigned index;
    int major, minor;
    CUuuid u;

    (void)state;
    for (unsigned i = 0; i < 2; i++) {
        const unsigned char *b = (const unsigned char *)u.bytes;
        assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(i, &d), NVML_SUCCESS);
        assert_int_equal(nv.nvmlDeviceGetIndex(d, &index), NVML_SUCCESS);
        assert_int_equal(index, i);
        assert_int_equal(nv.nvmlDeviceGetUUID(d, uuid, sizeof(uuid)), NVML_SUCCESS);
        assert_ok(cu.cuDeviceGetUuid_v2(&u, (CUdevice)i));
        snprintf(want, sizeof(want),
                 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                 b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                 b[14], b[15]);
        assert_string_equal(uuid, want);
        assert_int_equal(nv.nvmlDeviceGetHandleByUUID(uuid, &d), NVML_SUCCESS);
        assert_int_equal(nv.nvmlDeviceGetIndex(d, &index), NVML_SUCCESS);
        assert_int_equal(index, i);
    }
    assert_int_equal(nv.nvmlDeviceGetUUID(dev1, uuid, sizeof(uuid)), NVML_SUCCESS);
    assert_string_equal(uuid, "GPU-5ac1ce00-0000-4000-8000-000000000001");
    assert_int_equal(nv.nvmlDeviceGetUUID(dev1, uuid, 40), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(nv.nvmlDeviceGetHandleByUUID("GPU-5AC1CE00-0000-4000-8000-000000000000", &d),
                     NVML_SUCCESS);
    assert_ptr_equal(d, dev0);
    assert_int_equal(nv.nvmlDeviceGetHandleByUUID("GPU-5ac1ce00-0000-4000-8000-000000000002", &d),
                     NVML_ERROR_NOT_FOUND);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(2, &d), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(nv.nvmlDeviceGetName(dev0, name, sizeof(name)), NVML_SUCCESS);
    assert_string_equal(name, "gpuslice simulated GPU");
    assert_int_equal(nv.nvmlDeviceGetCudaComputeCapability(dev0, &major, &minor), NVML_SUCCESS);
    assert_int_equal(major, 9);
    assert_int_equal(minor, 0);
    assert_int_equal(nv.nvmlDeviceGetIndex((nvmlDevice_t)&index, &index),
                     NVML_ERROR_INVALID_ARGUMENT);
}

static void test_memory_info_follows_the_driver(void **state)
{
    nvmlMemory_t m, m1;
    nvmlMemory_v2_t m2 = { .version = nvmlMemory_v2 };
    CUdeviceptr p;
    size_t f, t;

    (void)state;
    assert_ok(cu.cuMemAlloc_v2(&p, 100 * MiB));
    assert_ok(cu.cuMemGetInfo_v2(&f, &t));
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(m.total, 16 * GiB);
    assert_int_equal(m.used, t - f);
    assert_int_equal(m.free, f);
    /* The device's use counts a context's hidden part, which no process's figure lists. */
    assert_int_equal(m.used, 64 * MiB + 6 * MiB + 100 * MiB);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(dev0, &m2), NVML_SUCCESS);
    assert_int_equal(m2.total, 16 * GiB);
    assert_int_equal(m2.used, m.used);
    assert_int_equal(m2.free, m.free);
    assert_int_equal(m2.reserved, 0);
    m2.version = 1;
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo_v2(dev0, &m2),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    /* The other device is untouched. */
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev1, &m1), NVML_SUCCESS);
    assert_int_equal(m1.used, 0);
    assert_ok(cu.cuMemFree_v2(p));
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(m.used, 64 * MiB + 6 * MiB);
}

static void test_running_processes_v1_and_v3(void **state)
{
    nvmlProcessInfo_t p3[4];
    nvmlProcessInfo_v1_t p1[4];
    unsigned n = 0;
    CUcontext c1;
    CUdeviceptr p;

    (void)state;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev0, &n, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 1);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev0, &n, p3), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p3[0].pid, getpid());
    assert_int_equal(p3[0].usedGpuMemory, 64 * MiB);
    assert_int_equal(p3[0].gpuInstanceId, 0xFFFFFFFFu);
    /* A context and memory on the second device show there, and only there. */
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses(dev1, &n, p1), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_ok(cu.cuCtxCreate_v2(&c1, 0, 1));
    assert_ok(cu.cuMemAlloc_v2(&p, 3 * MiB));
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses(dev1, &n, p1), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p1[0].pid, getpid());
    assert_int_equal(p1[0].usedGpuMemory, 64 * MiB + 4 * MiB);
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev0, &n, p3), NVML_SUCCESS);
    assert_int_equal(p3[0].usedGpuMemory, 64 * MiB);
    assert_ok(cu.cuCtxDestroy_v2(c1));
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses(dev1, &n, p1), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_ok(cu.cuCtxSetCurrent(ctx));
}

/* NVML's figures are what the driver reserved (pages, chunks), not what was asked. */
static void test_per_process_memory_counts_pages_and_chunks(void **state)
{
    nvmlProcessInfo_t p3[4];
    CUdeviceptr small[100], pooled;
    nvmlMemory_t m;
    unsigned n = 4;

    (void)state;
    for (int i = 0; i < 100; i++)
        assert_ok(cu.cuMemAlloc_v2(&small[i], 4096));   /* 400 KiB asked: one page */
    assert_ok(cu.cuMemAllocAsync(&pooled, 4096, NULL)); /* a 32 MiB chunk */
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev0, &n, p3), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p3[0].usedGpuMemory, 64 * MiB + 2 * MiB + 32 * MiB);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(m.used, 64 * MiB + 6 * MiB + 2 * MiB + 32 * MiB); /* + the hidden part */
    for (int i = 0; i < 100; i++)
        assert_ok(cu.cuMemFree_v2(small[i]));
    assert_ok(cu.cuMemFreeAsync(pooled, NULL));
    assert_ok(cu.cuStreamSynchronize(NULL));
    n = 4;
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev0, &n, p3), NVML_SUCCESS);
    assert_int_equal(p3[0].usedGpuMemory, 64 * MiB);
}

/* Sleeps until the sample period (SIM_SAMPLE_NS) holding now has ended. */
static void wait_period_end(void)
{
    uint64_t t = now_ns(), end = (t / SIM_SAMPLE_NS + 1) * SIM_SAMPLE_NS;

    usleep((useconds_t)((end - t) / 1000 + 2000));
}

static void test_utilization_follows_the_device_timeline(void **state)
{
    nvmlUtilization_t u;
    nvmlProcessUtilizationSample_t s[8];
    unsigned n = 0, i;
    CUfunction f = get_function(&cu, "spin_200000us");
    struct timespec rt;
    unsigned long long now_us, ts, busy_ms = 0;

    (void)state;
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(dev0, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, NULL, &n, 0), NVML_ERROR_NOT_FOUND);
    assert_ok(launch1(&cu, f, NULL));
    assert_ok(cu.cuCtxSynchronize());
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(dev0, &u), NVML_SUCCESS);
    assert_in_range(u.gpu, 18, 21);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(dev1, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 0);
    /*
     * Per-process samples come one per period in which the process ran, once the period has
     * ended: 200 ms of kernel fall in two or three periods of 1/6 s.
     */
    wait_period_end();
    n = 0;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, NULL, &n, 0),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_in_range(n, 2, 3);
    n = 1;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, 0),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    n = 8;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, 0), NVML_SUCCESS);
    assert_in_range(n, 2, 3);
    clock_gettime(CLOCK_REALTIME, &rt);
    now_us = (unsigned long long)rt.tv_sec * 1000000ull + (unsigned long long)rt.tv_nsec / 1000;
    for (i = 0; i < n; i++) {
        assert_int_equal(s[i].pid, getpid());
        busy_ms += s[i].smUtil * (SIM_SAMPLE_NS / 1000000ull) / 100;
        assert_true(s[i].timeStamp <= now_us && s[i].timeStamp + 1000000ull > now_us);
        /* Oldest first, one period apart (CLOCK_REALTIME us, the period's end). */
        if (i > 0)
            assert_in_range(s[i].timeStamp - s[i - 1].timeStamp, SIM_SAMPLE_NS / 1000 - 2,
                            SIM_SAMPLE_NS / 1000 + 2);
    }
    /* Each sample the share of its period: together the kernel's 200 ms (percent rounding). */
    assert_in_range(busy_ms, 195, 205);
    /* A middle period wholly inside the kernel: 100 %. */
    if (n == 3)
        assert_int_equal(s[1].smUtil, 100);
    ts = s[n - 1].timeStamp;
    /* Only samples newer than the last one seen. */
    n = 8;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, ts), NVML_ERROR_NOT_FOUND);
    assert_int_equal(n, 0);
    n = 8;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, ts - 1), NVML_SUCCESS);
    assert_int_equal(n, 1);
}

/*
 * The device's utilisation samples (nvmlDeviceGetSamples): one per period, idle ones too,
 * each the share of its period in which a kernel ran, on periods of their own whose ends fall
 * GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT (40 by default) percent of a period before the
 * per-process samples' ends.
 */
static void test_device_samples_have_periods_of_their_own(void **state)
{
    nvmlProcessUtilizationSample_t s[32];
    nvmlSample_t d[32];
    nvmlValueType_t vt;
    unsigned n, nd, i, k, busy_ms = 0, full = 0;
    CUfunction f = get_function(&cu, "spin_200000us");
    struct timespec rt;
    unsigned long long since, p_us = SIM_SAMPLE_NS / 1000, shift_us;

    (void)state;
    shift_us = SIM_SAMPLE_NS * 40 / 100 / 1000;
    /* (Clear of the periods that hold earlier tests' kernels.) */
    usleep((useconds_t)(2 * p_us));
    clock_gettime(CLOCK_REALTIME, &rt);
    since = (unsigned long long)rt.tv_sec * 1000000ull + (unsigned long long)rt.tv_nsec / 1000;
    nd = 32;
    assert_int_equal(nv.nvmlDeviceGetSamples(dev0, NVML_TOTAL_POWER_SAMPLES, 0, &vt, &nd, d),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_ok(launch1(&cu, f, NULL));
    assert_ok(cu.cuCtxSynchronize());
    /* Both kinds of period holding the kernel's end have ended. */
    usleep((useconds_t)(2 * p_us));
    nd = 32;
    assert_int_equal(nv.nvmlDeviceGetSamples(dev0, NVML_GPU_UTILIZATION_SAMPLES, since, &vt, &nd, d),
                     NVML_SUCCESS);
    assert_int_equal(vt, NVML_VALUE_TYPE_UNSIGNED_INT);
    assert_in_range(nd, 3, 6);
    for (i = 0; i < nd; i++) {
        assert_true(d[i].timeStamp > since);
        busy_ms += d[i].sampleValue.uiVal * (unsigned)p_us / 100000u;
        full += d[i].sampleValue.uiVal == 100;
        if (i > 0)
            assert_in_range(d[i].timeStamp - d[i - 1].timeStamp, p_us - 2, p_us + 2);
    }
    /* Together the kernel's 200 ms (each sample's percent rounded), at most one period full. */
    assert_in_range(busy_ms, 193, 207);
    assert_in_range(full, 0, 1);
    n = 32;
    assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, since), NVML_SUCCESS);
    assert_in_range(n, 2, 3);
    for (k = 0; k < n; k++)
        for (i = 0; i < nd; i++) {
            /* A device period ends SHIFT before each process period's end, modulo P. */
            assert_in_range((s[k].timeStamp - d[i].timeStamp + 1000 * p_us) % p_us,
                            shift_us - 2, shift_us + 2);
        }
    /* Only samples newer than the last one seen; the newest idle period is 0 %. */
    since = d[nd - 1].timeStamp;
    usleep((useconds_t)p_us);
    nd = 32;
    assert_int_equal(nv.nvmlDeviceGetSamples(dev0, NVML_GPU_UTILIZATION_SAMPLES, since, &vt, &nd, d),
                     NVML_SUCCESS);
    assert_in_range(nd, 1, 2);
    assert_true(d[0].timeStamp > since);
    assert_int_equal(d[nd - 1].sampleValue.uiVal, 0);
}

static void test_shutdown_then_reinit_sees_the_same_state(void **state)
{
    nvmlMemory_t m;

    (void)state;
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlInit_v2(), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetHandleByIndex_v2(0, &dev0), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(m.used, 64 * MiB + 6 * MiB);
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(m.used, 0);
    assert_int_equal(nv.nvmlShutdown(), NVML_SUCCESS);
}

/*
 * In a fresh child with CUDA_VISIBLE_DEVICES=spec: the driver's count, and
 * for its device 0 the NVML index whose UUID it has and on which its memory
 * is seen; NVML's count stays 2. Returns count * 100 + NVML index * 10 +
 * NVML's count; 50 + NVML's count when cuInit fails; below 10 the step that
 * went wrong.
 */
static int visible_child(const char *spec)
{
    int status;
    pid_t pid = fork();

    assert_true(pid >= 0);
    if (pid == 0) {
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE], want[64];
        unsigned long long before[2], after[2];
        unsigned nvcount = 0;
        int count = -1, index = 9;
        nvmlMemory_t m;
        nvmlDevice_t d;
        CUcontext c;
        CUdeviceptr p;
        CUuuid u;

        if (spec)
            setenv("CUDA_VISIBLE_DEVICES", spec, 1);
        else
            unsetenv("CUDA_VISIBLE_DEVICES");
        if (nv.nvmlInit_v2() != NVML_SUCCESS || nv.nvmlDeviceGetCount_v2(&nvcount) != NVML_SUCCESS)
            _exit(1);
        if (cu.cuInit(0) != CUDA_SUCCESS)
            _exit(cu.cuDeviceGetCount(&count) == CUDA_ERROR_NOT_INITIALIZED ? 50 + nvcount : 2);
        if (cu.cuDeviceGetCount(&count) != CUDA_SUCCESS || count < 1)
            _exit(3);
        if (cu.cuDeviceGetUuid_v2(&u, 0) != CUDA_SUCCESS)
            _exit(4);
        for (unsigned i = 0; i < 2; i++) {
            const unsigned char *b = (const unsigned char *)u.bytes;
            snprintf(want, sizeof(want),
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                     b[12], b[13], b[14], b[15]);
            if (nv.nvmlDeviceGetHandleByIndex_v2(i, &d) != NVML_SUCCESS ||
                nv.nvmlDeviceGetUUID(d, uuid, sizeof(uuid)) != NVML_SUCCESS ||
                nv.nvmlDeviceGetMemoryInfo(d, &m) != NVML_SUCCESS)
                _exit(5);
            if (strcmp(uuid, want) == 0)
                index = (int)i;
            before[i] = m.used;
        }
        if (cu.cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS ||
            cu.cuCtxSetCurrent(c) != CUDA_SUCCESS || cu.cuMemAlloc_v2(&p, 64 * MiB) != CUDA_SUCCESS)
            _exit(6);
        for (unsigned i = 0; i < 2; i++) {
            nv.nvmlDeviceGetHandleByIndex_v2(i, &d);
            nv.nvmlDeviceGetMemoryInfo(d, &m);
            after[i] = m.used;
        }
        /* The context and the allocation land on the NVML device with the same UUID only. */
        for (unsigned i = 0; i < 2; i++)
            if ((after[i] - before[i] == 128 * MiB + 6 * MiB) != ((int)i == index))
                _exit(7);
        _exit(count * 100 + index * 10 + (int)nvcount);
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static void test_cuda_visible_devices_remaps_the_driver_not_nvml(void **state)
{
    (void)state;
    assert_int_equal(visible_child(NULL), 202);  /* both; CUDA 0 is NVML 0 */
    assert_int_equal(visible_child("1"), 112);   /* one: NVML's device 1 */
    assert_int_equal(visible_child("1,0"), 212); /* the order given */
    assert_int_equal(visible_child("GPU-5ac1ce00-0000-4000-8000-000000000001"), 112);
    assert_int_equal(visible_child("0,7,1"), 102); /* 7 ends the list */
    assert_int_equal(visible_child("-1,1"), 52);   /* cuInit fails: no device */
    assert_int_equal(visible_child(""), 52);
    assert_int_equal(visible_child("1,1"), 52); /* named twice: none */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_memory_limits_need_r615),
        cmocka_unit_test(test_calls_before_init_are_uninitialized),
        cmocka_unit_test(test_init_is_refcounted),
        cmocka_unit_test(test_versions),
        cmocka_unit_test(test_device_identity_agrees_with_the_driver),
        cmocka_unit_test(test_memory_info_follows_the_driver),
        cmocka_unit_test(test_running_processes_v1_and_v3),
        cmocka_unit_test(test_per_process_memory_counts_pages_and_chunks),
        cmocka_unit_test(test_utilization_follows_the_device_timeline),
        cmocka_unit_test(test_device_samples_have_periods_of_their_own),
        cmocka_unit_test(test_shutdown_then_reinit_sees_the_same_state),
        cmocka_unit_test(test_cuda_visible_devices_remaps_the_driver_not_nvml),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
