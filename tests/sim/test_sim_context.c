/*
 * Tests of the simulated driver's contexts: primary context refcounts, state,
 * flags and footprint; created contexts of every version; each thread's
 * context stack; and what happens to work and memory when a context ends.
 * Device usage is read through NVML, as a monitoring tool would.
 */
#include "sim_test.h"

#include <pthread.h>

#define FOOTPRINT (32 * MiB) /* GPUSLICE_SIM_CONTEXT_BYTES below */

static struct cu cu;
static struct nvml nv;
static nvmlDevice_t dev0;

static int setup(void **state)
{
    (void)state;
    sim_test_state_init("context");
    setenv("GPUSLICE_SIM_CONTEXT_BYTES", "32M", 1);
    if (cu_load(&cu) < 0 || nvml_load(&nv) < 0)
        return -1;
    if (cu.cuInit(0) != CUDA_SUCCESS || nv.nvmlInit_v2() != NVML_SUCCESS ||
        nv.nvmlDeviceGetHandleByIndex_v2(0, &dev0) != NVML_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nv.nvmlShutdown();
    sim_test_state_done();
    return 0;
}

static uint64_t used(void)
{
    nvmlMemory_t m;

    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    return m.used;
}

static void assert_no_current(void)
{
    CUcontext c = (CUcontext)1;

    assert_ok(cu.cuCtxGetCurrent(&c));
    assert_null(c);
}

static void test_primary_retain_is_refcounted_and_charges_footprint_once(void **state)
{
    uint64_t base = used();
    CUcontext a, b;
    unsigned flags;
    int active;

    (void)state;
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 0);
    assert_ok(cu.cuDevicePrimaryCtxRetain(&a, 0));
    assert_int_equal(used(), base + FOOTPRINT);
    assert_ok(cu.cuDevicePrimaryCtxRetain(&b, 0));
    assert_ptr_equal(a, b);
    assert_int_equal(used(), base + FOOTPRINT);
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 1);
    assert_int_equal(used(), base + FOOTPRINT);
    assert_ok(cu.cuDevicePrimaryCtxRelease(0));
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 0);
    assert_int_equal(used(), base);
    assert_cu(cu.cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuDevicePrimaryCtxRetain(&a, 1), CUDA_ERROR_INVALID_DEVICE);
}

static void test_calls_needing_a_context_fail_without_one(void **state)
{
    CUdeviceptr p;
    CUstream s;
    CUevent e;
    CUmodule m;
    size_t f, t;
    CUdevice d;

    (void)state;
    assert_no_current();
    assert_cu(cu.cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuMemGetInfo_v2(&f, &t), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuEventCreate(&e, 0), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuModuleLoadData(&m, "x"), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuCtxSynchronize(), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuStreamSynchronize(NULL), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuLaunchKernel(NULL, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
              CUDA_ERROR_INVALID_CONTEXT);
}

static void test_primary_release_frees_what_it_held(void **state)
{
    uint64_t base = used();
    CUcontext c;
    CUdeviceptr p;
    CUstream s;

    (void)state;
    assert_ok(cu.cuDevicePrimaryCtxRetain(&c, 0));
    assert_ok(cu.cuCtxSetCurrent(c));
    assert_ok(cu.cuMemAlloc_v2(&p, 100 * MiB));
    assert_ok(cu.cuStreamCreate(&s, 0));
    assert_int_equal(used(), base + FOOTPRINT + 100 * MiB);
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
    assert_int_equal(used(), base);
    /* Still current, but no longer usable. */
    assert_cu(cu.cuMemAlloc_v2(&p, 1), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuStreamSynchronize(s), CUDA_ERROR_INVALID_HANDLE);
    assert_ok(cu.cuCtxSetCurrent(NULL));
    assert_no_current();
}

static void test_primary_reset_frees_everything_but_keeps_the_reference(void **state)
{
    uint64_t base = used();
    CUcontext c, c2;
    CUdeviceptr p;
    unsigned flags;
    int active;

    (void)state;
    assert_ok(cu.cuDevicePrimaryCtxRetain(&c, 0));
    assert_ok(cu.cuCtxPushCurrent_v2(c));
    assert_ok(cu.cuMemAlloc_v2(&p, 10 * MiB));
    assert_ok(cu.cuDevicePrimaryCtxReset_v2(0));
    assert_int_equal(used(), base);
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(active, 0);
    assert_ok(cu.cuDevicePrimaryCtxRetain(&c2, 0));
    assert_ptr_equal(c, c2);
    assert_int_equal(used(), base + FOOTPRINT);
    assert_ok(cu.cuMemAlloc_v2(&p, 10 * MiB));
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
    assert_int_equal(used(), base + FOOTPRINT + 10 * MiB);
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
    assert_int_equal(used(), base);
    assert_cu(cu.cuDevicePrimaryCtxRelease_v2(0), CUDA_ERROR_INVALID_CONTEXT);
    assert_ok(cu.cuCtxPopCurrent_v2(&c2));
    assert_ptr_equal(c, c2);
}

static void test_primary_set_flags_v1_refuses_an_active_context(void **state)
{
    CUcontext c;
    unsigned flags;
    int active;

    (void)state;
    assert_ok(cu.cuDevicePrimaryCtxSetFlags(0, 4));
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(flags, 4);
    assert_ok(cu.cuDevicePrimaryCtxRetain(&c, 0));
    assert_cu(cu.cuDevicePrimaryCtxSetFlags(0, 1), CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE);
    assert_ok(cu.cuDevicePrimaryCtxSetFlags_v2(0, 1));
    assert_ok(cu.cuDevicePrimaryCtxGetState(0, &flags, &active));
    assert_int_equal(flags, 1);
    assert_cu(cu.cuDevicePrimaryCtxSetFlags_v2(0, 3), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuDevicePrimaryCtxSetFlags_v2(0, 0x100), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuDevicePrimaryCtxSetFlags_v2(0, 0));
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
}

static void check_created(CUcontext c, uint64_t base)
{
    CUcontext cur;
    CUdevice d = -1;

    assert_non_null(c);
    assert_ok(cu.cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, c);
    assert_ok(cu.cuCtxGetDevice(&d));
    assert_int_equal(d, 0);
    assert_int_equal(used(), base + FOOTPRINT);
    assert_ok(cu.cuCtxDestroy_v2(c));
    assert_no_current();
    assert_int_equal(used(), base);
}

static void test_ctx_create_every_version_pushes_and_charges(void **state)
{
    uint64_t base = used();
    CUexecAffinityParam aff = { .type = CU_EXEC_AFFINITY_TYPE_SM_COUNT, .param.smCount.val = 66 };
    CUctxCreateParams params = { .execAffinityParams = &aff, .numExecAffinityParams = 1 };
    CUctxCreateParams cig = { .cigParams = (CUctxCigParam *)&aff };
    CUcontext c = NULL;

    (void)state;
    assert_ok(cu.cuCtxCreate(&c, 0, 0));
    check_created(c, base);
    assert_ok(cu.cuCtxCreate_v2(&c, 4, 0));
    check_created(c, base);
    assert_ok(cu.cuCtxCreate_v3(&c, &aff, 1, 0, 0));
    check_created(c, base);
    assert_ok(cu.cuCtxCreate_v4(&c, NULL, 0, 0));
    check_created(c, base);
    assert_ok(cu.cuCtxCreate_v4(&c, &params, 0, 0));
    check_created(c, base);
    assert_cu(cu.cuCtxCreate_v4(&c, &cig, 0, 0), CUDA_ERROR_NOT_SUPPORTED);
    aff.param.smCount.val = 1000;
    assert_cu(cu.cuCtxCreate_v3(&c, &aff, 1, 0, 0), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuCtxCreate_v2(&c, 0, 5), CUDA_ERROR_INVALID_DEVICE);
    assert_cu(cu.cuCtxCreate_v2(&c, 3, 0), CUDA_ERROR_INVALID_VALUE);
    assert_no_current();
    assert_int_equal(used(), base);
}

static void test_ctx_stack_push_pop_and_set_current(void **state)
{
    CUcontext a, b, cur, prim;

    (void)state;
    assert_ok(cu.cuCtxCreate_v2(&a, 0, 0));
    assert_ok(cu.cuCtxCreate_v2(&b, 0, 0)); /* stack: a b */
    assert_ok(cu.cuCtxPopCurrent_v2(&cur));
    assert_ptr_equal(cur, b);
    assert_ok(cu.cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    assert_ok(cu.cuCtxPushCurrent_v2(b)); /* a b */
    assert_ok(cu.cuCtxSetCurrent(NULL));  /* pops: a */
    assert_ok(cu.cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, a);
    assert_ok(cu.cuCtxSetCurrent(b)); /* replaces the top: b */
    assert_ok(cu.cuCtxGetCurrent(&cur));
    assert_ptr_equal(cur, b);
    assert_ok(cu.cuCtxPopCurrent(&cur));
    assert_ptr_equal(cur, b);
    assert_no_current();
    assert_cu(cu.cuCtxPopCurrent_v2(&cur), CUDA_ERROR_INVALID_CONTEXT);
    assert_cu(cu.cuCtxPushCurrent_v2((CUcontext)&cur), CUDA_ERROR_INVALID_CONTEXT);
    assert_ok(cu.cuDevicePrimaryCtxRetain(&prim, 0));
    assert_cu(cu.cuCtxDestroy_v2(prim), CUDA_ERROR_INVALID_CONTEXT);
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
    assert_ok(cu.cuCtxDestroy_v2(a));
    assert_ok(cu.cuCtxDestroy(b));
    assert_cu(cu.cuCtxDestroy_v2(b), CUDA_ERROR_INVALID_CONTEXT);
    assert_no_current();
}

struct thread_arg {
    CUcontext ctx;
    pthread_barrier_t *barrier;
    CUcontext seen;
    CUresult alloc;
};

static void *other_thread(void *p)
{
    struct thread_arg *a = p;
    CUdeviceptr d;

    cu.cuCtxGetCurrent(&a->seen); /* a new thread starts with none */
    cu.cuCtxSetCurrent(a->ctx);
    pthread_barrier_wait(a->barrier); /* the main thread destroys the context */
    pthread_barrier_wait(a->barrier);
    a->alloc = cu.cuMemAlloc_v2(&d, 1);
    cu.cuCtxGetCurrent(&a->seen);
    return NULL;
}

static void test_context_destroyed_while_current_elsewhere_reports_destroyed(void **state)
{
    pthread_barrier_t barrier;
    struct thread_arg a = { .barrier = &barrier };
    pthread_t t;

    (void)state;
    pthread_barrier_init(&barrier, NULL, 2);
    assert_ok(cu.cuCtxCreate_v2(&a.ctx, 0, 0));
    pthread_create(&t, NULL, other_thread, &a);
    pthread_barrier_wait(&barrier);
    assert_null(a.seen);
    assert_ok(cu.cuCtxDestroy_v2(a.ctx));
    pthread_barrier_wait(&barrier);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&barrier);
    assert_cu(a.alloc, CUDA_ERROR_CONTEXT_IS_DESTROYED);
    assert_ptr_equal(a.seen, a.ctx);
    assert_no_current();
}

static void test_context_creation_fails_when_the_device_is_full(void **state)
{
    CUcontext c, c2;
    CUdeviceptr p;
    size_t f, t;
    uint64_t before;

    (void)state;
    assert_ok(cu.cuCtxCreate_v2(&c, 0, 0));
    assert_ok(cu.cuMemGetInfo_v2(&f, &t));
    assert_ok(cu.cuMemAlloc_v2(&p, f - 16 * MiB));
    before = used();
    assert_cu(cu.cuCtxCreate_v2(&c2, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_cu(cu.cuDevicePrimaryCtxRetain(&c2, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(used(), before);
    assert_ok(cu.cuCtxGetCurrent(&c2));
    assert_ptr_equal(c2, c);
    assert_ok(cu.cuCtxDestroy_v2(c));
    assert_no_current();
}

static void test_ctx_v2_calls_take_an_explicit_context(void **state)
{
    CUcontext a, b;
    CUdevice d = -1;

    (void)state;
    assert_ok(cu.cuCtxCreate_v2(&a, 0, 0));
    assert_ok(cu.cuCtxPopCurrent_v2(&b));
    assert_no_current();
    assert_ok(cu.cuCtxGetDevice_v2(&d, a));
    assert_int_equal(d, 0);
    assert_ok(cu.cuCtxSynchronize_v2(a));
    assert_cu(cu.cuCtxSynchronize_v2(NULL), CUDA_ERROR_INVALID_CONTEXT);
    assert_ok(cu.cuCtxDestroy_v2(a));
    assert_cu(cu.cuCtxSynchronize_v2(a), CUDA_ERROR_CONTEXT_IS_DESTROYED);
}

static void test_ctx_synchronize_waits_for_every_stream(void **state)
{
    CUcontext c;
    CUstream s1, s2;
    CUfunction f;
    uint64_t t0;

    (void)state;
    assert_ok(cu.cuCtxCreate_v2(&c, 0, 0));
    f = get_function(&cu, "spin_15000us");
    assert_ok(cu.cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuStreamCreate(&s2, 0));
    t0 = now_ns();
    assert_ok(launch1(&cu, f, s1));
    assert_ok(launch1(&cu, f, s2));
    assert_ok(cu.cuCtxSynchronize());
    assert_true(now_ns() - t0 >= 30000000ull);
    assert_ok(cu.cuStreamQuery(s1));
    assert_ok(cu.cuStreamQuery(s2));
    assert_ok(cu.cuCtxDestroy_v2(c));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_primary_retain_is_refcounted_and_charges_footprint_once),
        cmocka_unit_test(test_calls_needing_a_context_fail_without_one),
        cmocka_unit_test(test_primary_release_frees_what_it_held),
        cmocka_unit_test(test_primary_reset_frees_everything_but_keeps_the_reference),
        cmocka_unit_test(test_primary_set_flags_v1_refuses_an_active_context),
        cmocka_unit_test(test_ctx_create_every_version_pushes_and_charges),
        cmocka_unit_test(test_ctx_stack_push_pop_and_set_current),
        cmocka_unit_test(test_context_destroyed_while_current_elsewhere_reports_destroyed),
        cmocka_unit_test(test_context_creation_fails_when_the_device_is_full),
        cmocka_unit_test(test_ctx_v2_calls_take_an_explicit_context),
        cmocka_unit_test(test_ctx_synchronize_waits_for_every_stream),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
