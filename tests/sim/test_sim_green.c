/*
 * Tests of the simulated driver's green contexts: the SM resource and its
 * splits with an H200's granularity, descriptors, green contexts and their
 * converted CUcontexts, and that kernels launched from a partition take the
 * whole-device time scaled by its share of the SMs, on every path that is
 * bound to it.
 */
#include "sim_test.h"

#define MS 1000000ull

static struct cu cu;
static CUcontext primary;

static int setup(void **state)
{
    (void)state;
    sim_test_state_init("green");
    if (cu_load(&cu) < 0 || cu.cuInit(0) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&primary, 0) != CUDA_SUCCESS ||
        cu.cuCtxSetCurrent(primary) != CUDA_SUCCESS)
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

static CUdevResource device_sms(void)
{
    CUdevResource r;

    assert_ok(cu.cuDeviceGetDevResource(0, &r, CU_DEV_RESOURCE_TYPE_SM));
    return r;
}

/* A green context of n groups of `group` SMs (the first of one split). */
static CUgreenCtx make_green(unsigned group, unsigned n, unsigned flags)
{
    CUdevResource all = device_sms(), groups[66], rest;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    unsigned nb = 66;

    assert_ok(cu.cuDevSmResourceSplitByCount(groups, &nb, &all, &rest, flags, group));
    assert_true(nb >= n);
    assert_ok(cu.cuDevResourceGenerateDesc(&desc, groups, n));
    assert_ok(cu.cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
    return g;
}

static void test_resource_and_splits_have_the_h200_granularity(void **state)
{
    CUdevResource all = device_sms(), groups[66], rest, a[2];
    unsigned nb;

    (void)state;
    assert_int_equal(all.sm.smCount, 132);
    assert_int_equal(all.sm.minSmPartitionSize, 8);
    assert_int_equal(all.sm.smCoscheduledAlignment, 8);
    assert_cu(cu.cuDeviceGetDevResource(0, &all, (CUdevResourceType)5),
              CUDA_ERROR_INVALID_RESOURCE_TYPE);
    assert_cu(cu.cuDeviceGetDevResource(7, &all, CU_DEV_RESOURCE_TYPE_SM),
              CUDA_ERROR_INVALID_DEVICE);
    all = device_sms();
    /* Counting only: groups of 8 (the minimum), of 16 (one more, aligned), of 2 ignoring co-scheduling. */
    assert_ok(cu.cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 0, 1));
    assert_int_equal(nb, 15); /* and 12 left over, as the H200's driver splits them */
    assert_ok(cu.cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 0, 9));
    assert_int_equal(nb, 8);
    assert_ok(cu.cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL,
                                             CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, 1));
    assert_int_equal(nb, 66);
    /* Into an array: as many as it holds, the rest remaining. */
    nb = 3;
    assert_ok(cu.cuDevSmResourceSplitByCount(groups, &nb, &all, &rest, 0, 8));
    assert_int_equal(nb, 3);
    assert_int_equal(groups[2].sm.smCount, 8);
    assert_int_equal(rest.sm.smCount, 132 - 24);
    nb = 66;
    assert_ok(cu.cuDevSmResourceSplitByCount(groups, &nb, &all, &rest, 0, 8));
    assert_int_equal(nb, 15);
    assert_int_equal(rest.sm.smCount, 12);
    /* A group is not split again; too large a minimum and unknown flags are refused. */
    assert_cu(cu.cuDevSmResourceSplitByCount(NULL, &nb, &groups[0], NULL, 0, 2),
              CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    assert_cu(cu.cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 0, 133),
              CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    assert_cu(cu.cuDevSmResourceSplitByCount(NULL, &nb, &all, NULL, 4, 8),
              CUDA_ERROR_INVALID_VALUE);
    /* A descriptor merges groups of one split (with its remainder), not of two. */
    a[0] = groups[0];
    a[1] = rest;
    {
        CUdevResourceDesc d;
        assert_ok(cu.cuDevResourceGenerateDesc(&d, a, 2));
        nb = 1;
        assert_ok(cu.cuDevSmResourceSplitByCount(&a[1], &nb, &all, NULL, 0, 8));
        assert_cu(cu.cuDevResourceGenerateDesc(&d, a, 2),
                  CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION);
    }
}

static void test_green_context_shares_the_primary_and_reports_its_sms(void **state)
{
    CUdevResource r, all = device_sms(), groups[16];
    CUdevResourceDesc desc;
    CUgreenCtx g, bad;
    CUcontext c, cur;
    CUdevice d = -1;
    CUdeviceptr p;
    unsigned nb = 16;

    (void)state;
    assert_ok(cu.cuDevSmResourceSplitByCount(groups, &nb, &all, NULL, 0, 8));
    assert_ok(cu.cuDevResourceGenerateDesc(&desc, groups, 2));
    assert_cu(cu.cuGreenCtxCreate(&bad, desc, 0, 0), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuGreenCtxCreate(&bad, desc, 1, CU_GREEN_CTX_DEFAULT_STREAM),
              CUDA_ERROR_INVALID_DEVICE);
    assert_ok(cu.cuGreenCtxCreate(&g, desc, 0, CU_GREEN_CTX_DEFAULT_STREAM));
    assert_ok(cu.cuGreenCtxGetDevResource(g, &r, CU_DEV_RESOURCE_TYPE_SM));
    assert_int_equal(r.sm.smCount, 16);
    assert_ok(cu.cuCtxFromGreenCtx(&c, g));
    assert_ptr_not_equal(c, primary);
    assert_ok(cu.cuCtxGetDevResource(c, &r, CU_DEV_RESOURCE_TYPE_SM));
    assert_int_equal(r.sm.smCount, 16);
    assert_ok(cu.cuCtxGetDevResource(primary, &r, CU_DEV_RESOURCE_TYPE_SM));
    assert_int_equal(r.sm.smCount, 132);
    /* Current like any context; memory made there is the primary context's. */
    assert_ok(cu.cuCtxSetCurrent(c));
    assert_ok(cu.cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, c);
    assert_ok(cu.cuCtxGetDevice(&d));
    assert_int_equal(d, 0);
    assert_ok(cu.cuMemAlloc_v2(&p, MiB));
    assert_ok(cu.cuCtxSetCurrent(primary));
    assert_ok(cu.cuMemFree_v2(p));
    /* Its CUcontext is not destroyed as a context; the green context is. */
    assert_cu(cu.cuCtxDestroy_v2(c), CUDA_ERROR_INVALID_CONTEXT);
    assert_ok(cu.cuGreenCtxDestroy(g));
    assert_cu(cu.cuGreenCtxDestroy(g), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuCtxFromGreenCtx(&c, g), CUDA_ERROR_INVALID_CONTEXT);
    assert_ok(cu.cuCtxSetCurrent(c));
    assert_cu(cu.cuCtxSynchronize(), CUDA_ERROR_CONTEXT_IS_DESTROYED);
    assert_ok(cu.cuCtxSetCurrent(primary));
}

/* Device time of one spin_4000us kernel launched on s from the current context, in ms. */
static double kernel_ms(CUfunction f, CUstream s)
{
    CUevent a, b;
    float ms = -1;

    assert_ok(cu.cuEventCreate(&a, 0));
    assert_ok(cu.cuEventCreate(&b, 0));
    assert_ok(cu.cuEventRecord(a, s));
    assert_ok(launch1(&cu, f, s));
    assert_ok(cu.cuEventRecord(b, s));
    assert_ok(cu.cuEventSynchronize(b));
    assert_ok(cu.cuEventElapsedTime_v2(&ms, a, b));
    assert_ok(cu.cuEventDestroy_v2(a));
    assert_ok(cu.cuEventDestroy_v2(b));
    return ms;
}

static void test_kernels_of_a_partition_take_the_time_of_its_share(void **state)
{
    CUfunction f = get_function(&cu, "spin_4000us");
    CUgreenCtx g = make_green(2, 33, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING); /* 66 SMs */
    CUstream made_in_green, s;
    CUcontext c;
    double ms;

    (void)state;
    ms = kernel_ms(f, NULL);
    assert_true(ms >= 4.0 && ms < 6.0);
    assert_ok(cu.cuCtxFromGreenCtx(&c, g));
    assert_ok(cu.cuCtxSetCurrent(c));
    ms = kernel_ms(f, NULL); /* its NULL stream */
    assert_true(ms >= 8.0 && ms < 10.0);
    ms = kernel_ms(f, CU_STREAM_PER_THREAD);
    assert_true(ms >= 8.0 && ms < 10.0);
    assert_ok(cu.cuStreamCreate(&made_in_green, CU_STREAM_NON_BLOCKING));
    /* A stream keeps the SMs of the context it was made in. */
    assert_ok(cu.cuCtxSetCurrent(primary));
    ms = kernel_ms(f, made_in_green);
    assert_true(ms >= 8.0 && ms < 10.0);
    assert_ok(cu.cuStreamCreate(&s, 0));
    ms = kernel_ms(f, s);
    assert_true(ms >= 4.0 && ms < 6.0);
    assert_ok(cu.cuStreamDestroy_v2(s));
    assert_ok(cu.cuStreamDestroy_v2(made_in_green));
    assert_ok(cu.cuGreenCtxDestroy(g));
}

/* A launch of one cluster of n blocks (cuLaunchKernelEx) on s. */
static CUresult cluster_launch(CUstream s, unsigned n, unsigned grid)
{
    CUlaunchAttribute at;
    CUlaunchConfig cfg;

    memset(&at, 0, sizeof(at));
    memset(&cfg, 0, sizeof(cfg));
    at.id = CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    at.value.clusterDim.x = n;
    at.value.clusterDim.y = at.value.clusterDim.z = 1;
    cfg.gridDimX = grid;
    cfg.gridDimY = cfg.gridDimZ = 1;
    cfg.blockDimX = 128;
    cfg.blockDimY = cfg.blockDimZ = 1;
    cfg.hStream = s;
    cfg.attrs = &at;
    cfg.numAttrs = 1;
    return cu.cuLaunchKernelEx(&cfg, get_function(&cu, "noop"), NULL, NULL);
}

/*
 * Thread-block clusters as the H200 runs them (bench/green_cluster.cu): up to 8 blocks on the
 * whole device and on co-scheduled groups of 8, up to 2 on the split that ignores
 * co-scheduling; larger ones are refused at launch, as is a grid that is not whole clusters.
 */
static void test_clusters_fit_the_groups_of_their_partition(void **state)
{
    CUgreenCtx coarse = make_green(8, 8, 0); /* 64 SMs */
    CUgreenCtx fine = make_green(2, 33, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING);
    CUstream whole, sc, sf;
    CUcontext c;

    (void)state;
    assert_ok(cu.cuStreamCreate(&whole, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuGreenCtxStreamCreate(&sc, coarse, CU_STREAM_NON_BLOCKING, 0));
    assert_ok(cu.cuGreenCtxStreamCreate(&sf, fine, CU_STREAM_NON_BLOCKING, 0));
    assert_ok(cluster_launch(whole, 8, 256));
    assert_cu(cluster_launch(whole, 16, 256), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    assert_cu(cluster_launch(whole, 8, 12), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    assert_cu(cluster_launch(whole, 0, 8), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    assert_ok(cluster_launch(sc, 1, 256));
    assert_ok(cluster_launch(sc, 8, 256));
    assert_cu(cluster_launch(sc, 16, 256), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    assert_ok(cluster_launch(sf, 2, 256));
    assert_cu(cluster_launch(sf, 4, 256), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    /* The NULL stream of a current green context: that context's groups. */
    assert_ok(cu.cuCtxFromGreenCtx(&c, fine));
    assert_ok(cu.cuCtxSetCurrent(c));
    assert_cu(cluster_launch(NULL, 4, 256), CUDA_ERROR_INVALID_CLUSTER_SIZE);
    assert_ok(cluster_launch(NULL, 2, 256));
    assert_ok(cu.cuCtxSetCurrent(primary));
    assert_ok(cu.cuCtxSynchronize());
    assert_ok(cu.cuStreamDestroy_v2(whole));
    assert_ok(cu.cuStreamDestroy_v2(sc));
    assert_ok(cu.cuStreamDestroy_v2(sf));
    assert_ok(cu.cuGreenCtxDestroy(coarse));
    assert_ok(cu.cuGreenCtxDestroy(fine));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resource_and_splits_have_the_h200_granularity),
        cmocka_unit_test(test_green_context_shares_the_primary_and_reports_its_sms),
        cmocka_unit_test(test_kernels_of_a_partition_take_the_time_of_its_share),
        cmocka_unit_test(test_clusters_fit_the_groups_of_their_partition),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
