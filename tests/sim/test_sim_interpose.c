/*
 * Tests that the simulated libcuda.so.1 behaves like the real one under an
 * interposer: this program exports driver functions of its own, as an
 * LD_PRELOADed library does, and the simulator must neither call them from
 * inside (cuMemFree -> cuMemFree_v2) nor hand them out from cuGetProcAddress.
 */
#include "sim_test.h"

static int hooked_calls;

/* The "interposer": exported from this executable (ENABLE_EXPORTS). */
CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    (void)dptr;
    hooked_calls++;
    return CUDA_ERROR_UNKNOWN;
}

CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    (void)dptr;
    (void)bytesize;
    hooked_calls++;
    return CUDA_ERROR_UNKNOWN;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    (void)symbol;
    (void)pfn;
    (void)cudaVersion;
    (void)flags;
    (void)symbolStatus;
    hooked_calls++;
    return CUDA_ERROR_UNKNOWN;
}

static void test_simulator_binds_its_own_functions(void **state)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    gs_pfn_cuInit init;
    gs_pfn_cuGetProcAddress gpa;
    gs_pfn_cuDevicePrimaryCtxRetain retain;
    gs_pfn_cuCtxSetCurrent set_current;
    gs_pfn_cuMemAlloc alloc32;
    gs_pfn_cuMemFree free32;
    CUcontext ctx;
    CUdeviceptr_v1 p;
    void *fn = NULL;

    (void)state;
    assert_non_null(h);
    *(void **)&init = dlsym(h, "cuInit");
    *(void **)&gpa = dlsym(h, "cuGetProcAddress");
    *(void **)&retain = dlsym(h, "cuDevicePrimaryCtxRetain");
    *(void **)&set_current = dlsym(h, "cuCtxSetCurrent");
    *(void **)&alloc32 = dlsym(h, "cuMemAlloc");
    *(void **)&free32 = dlsym(h, "cuMemFree");
    assert_ok(init(0));
    /* cuGetProcAddress (v1) is cuGetProcAddress_v2 inside: the simulator's own. */
    assert_ok(gpa("cuMemAlloc", &fn, 13000, 0));
    assert_ptr_equal(fn, dlsym(h, "cuMemAlloc_v2"));
    assert_ptr_not_equal(fn, (void *)cuMemAlloc_v2);
    assert_ok(gpa("cuMemFree", &fn, 13000, 0));
    assert_ptr_not_equal(fn, (void *)cuMemFree_v2);
    assert_ok(retain(&ctx, 0));
    assert_ok(set_current(ctx));
    assert_ok(alloc32(&p, 4096));
    assert_ok(free32(p)); /* the 32-bit call must not land in our cuMemFree_v2 */
    assert_int_equal(hooked_calls, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_simulator_binds_its_own_functions),
    };
    int r;

    sim_test_state_init("interpose");
    r = cmocka_run_group_tests(tests, NULL, NULL);
    sim_test_state_done();
    return r;
}
