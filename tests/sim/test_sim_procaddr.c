/*
 * Tests of the simulated driver's symbol resolution and front door: dlsym of
 * every exported name, cuGetProcAddress/_v2 by version and per-thread-stream
 * flag as CUDA 13's driver answers (and as every getproc line of
 * h200-driver-facts.txt says the H200's driver did), the unexported
 * trampolines of GPUSLICE_SIM_PROCADDR=unexported (run as "test_sim_procaddr
 * unexported"), calls before cuInit, error names, device queries, and that
 * nothing but driver functions is exported.
 */
#include "sim_test.h"

#include <fcntl.h>
#include <sys/wait.h>

static struct cu cu;

struct expect {
    const char *name;
    int version;
    unsigned flags;
    const char *symbol;
};

#define PTDS CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

/* From CUDA 13.0's cudaTypedefs.h (PFN_<name>_v<version>[_ptsz]) and cuda.h's #defines. */
static const struct expect expects[] = {
    { "cuInit", 2000, 0, "cuInit" },
    { "cuDriverGetVersion", 2020, 0, "cuDriverGetVersion" },
    { "cuGetErrorString", 6000, 0, "cuGetErrorString" },
    { "cuGetErrorName", 6000, 0, "cuGetErrorName" },
    { "cuGetProcAddress", 11030, 0, "cuGetProcAddress" },
    { "cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2" },
    { "cuDeviceGet", 2000, 0, "cuDeviceGet" },
    { "cuDeviceGetCount", 2000, 0, "cuDeviceGetCount" },
    { "cuDeviceGetName", 2000, 0, "cuDeviceGetName" },
    { "cuDeviceGetUuid", 9020, 0, "cuDeviceGetUuid" },
    { "cuDeviceGetUuid", 11040, 0, "cuDeviceGetUuid_v2" },
    { "cuDeviceTotalMem", 2000, 0, "cuDeviceTotalMem" },
    { "cuDeviceTotalMem", 3020, 0, "cuDeviceTotalMem_v2" },
    { "cuDeviceGetAttribute", 2000, 0, "cuDeviceGetAttribute" },
    { "cuDeviceGetPCIBusId", 4010, 0, "cuDeviceGetPCIBusId" },
    { "cuDeviceGetDevResource", 12040, 0, "cuDeviceGetDevResource" },
    { "cuDevSmResourceSplitByCount", 12040, 0, "cuDevSmResourceSplitByCount" },
    { "cuDevResourceGenerateDesc", 12040, 0, "cuDevResourceGenerateDesc" },
    { "cuGreenCtxCreate", 12040, 0, "cuGreenCtxCreate" },
    { "cuGreenCtxDestroy", 12040, 0, "cuGreenCtxDestroy" },
    { "cuCtxFromGreenCtx", 12040, 0, "cuCtxFromGreenCtx" },
    { "cuGreenCtxStreamCreate", 12050, 0, "cuGreenCtxStreamCreate" },
    { "cuStreamWaitEvent", 3020, 0, "cuStreamWaitEvent" },
    { "cuGreenCtxGetDevResource", 12040, 0, "cuGreenCtxGetDevResource" },
    { "cuCtxGetDevResource", 12040, 0, "cuCtxGetDevResource" },
    { "cuDeviceGetDefaultMemPool", 11020, 0, "cuDeviceGetDefaultMemPool" },
    { "cuDeviceGetMemPool", 11020, 0, "cuDeviceGetMemPool" },
    { "cuDeviceSetMemPool", 11020, 0, "cuDeviceSetMemPool" },
    { "cuDevicePrimaryCtxRetain", 7000, 0, "cuDevicePrimaryCtxRetain" },
    { "cuDevicePrimaryCtxRelease", 7000, 0, "cuDevicePrimaryCtxRelease" },
    { "cuDevicePrimaryCtxRelease", 11000, 0, "cuDevicePrimaryCtxRelease_v2" },
    { "cuDevicePrimaryCtxReset", 7000, 0, "cuDevicePrimaryCtxReset" },
    { "cuDevicePrimaryCtxReset", 11000, 0, "cuDevicePrimaryCtxReset_v2" },
    { "cuDevicePrimaryCtxGetState", 7000, 0, "cuDevicePrimaryCtxGetState" },
    { "cuDevicePrimaryCtxSetFlags", 7000, 0, "cuDevicePrimaryCtxSetFlags" },
    { "cuDevicePrimaryCtxSetFlags", 11000, 0, "cuDevicePrimaryCtxSetFlags_v2" },
    { "cuCtxCreate", 2000, 0, "cuCtxCreate" },
    { "cuCtxCreate", 3020, 0, "cuCtxCreate_v2" },
    { "cuCtxCreate", 11040, 0, "cuCtxCreate_v3" },
    { "cuCtxCreate", 12050, 0, "cuCtxCreate_v4" },
    { "cuCtxDestroy", 2000, 0, "cuCtxDestroy" },
    { "cuCtxDestroy", 4000, 0, "cuCtxDestroy_v2" },
    { "cuCtxGetCurrent", 4000, 0, "cuCtxGetCurrent" },
    { "cuCtxSetCurrent", 4000, 0, "cuCtxSetCurrent" },
    { "cuCtxPushCurrent", 2000, 0, "cuCtxPushCurrent" },
    { "cuCtxPushCurrent", 4000, 0, "cuCtxPushCurrent_v2" },
    { "cuCtxPopCurrent", 2000, 0, "cuCtxPopCurrent" },
    { "cuCtxPopCurrent", 4000, 0, "cuCtxPopCurrent_v2" },
    { "cuCtxGetDevice", 2000, 0, "cuCtxGetDevice" },
    { "cuCtxGetDevice", 13000, 0, "cuCtxGetDevice_v2" },
    { "cuCtxSynchronize", 2000, 0, "cuCtxSynchronize" },
    { "cuCtxSynchronize", 13000, 0, "cuCtxSynchronize_v2" },
    { "cuMemGetInfo", 2000, 0, "cuMemGetInfo" },
    { "cuMemGetInfo", 3020, 0, "cuMemGetInfo_v2" },
    { "cuMemAlloc", 2000, 0, "cuMemAlloc" },
    { "cuMemAlloc", 3020, 0, "cuMemAlloc_v2" },
    { "cuMemAllocPitch", 2000, 0, "cuMemAllocPitch" },
    { "cuMemAllocPitch", 3020, 0, "cuMemAllocPitch_v2" },
    { "cuMemAllocManaged", 6000, 0, "cuMemAllocManaged" },
    { "cuMemFree", 2000, 0, "cuMemFree" },
    { "cuMemFree", 3020, 0, "cuMemFree_v2" },
    { "cuMemGetAddressRange", 2000, 0, "cuMemGetAddressRange" },
    { "cuMemGetAddressRange", 3020, 0, "cuMemGetAddressRange_v2" },
    { "cuMemAllocAsync", 11020, 0, "cuMemAllocAsync" },
    { "cuMemAllocAsync", 11020, PTDS, "cuMemAllocAsync_ptsz" },
    { "cuMemAllocFromPoolAsync", 11020, 0, "cuMemAllocFromPoolAsync" },
    { "cuMemAllocFromPoolAsync", 11020, PTDS, "cuMemAllocFromPoolAsync_ptsz" },
    { "cuMemFreeAsync", 11020, 0, "cuMemFreeAsync" },
    { "cuMemFreeAsync", 11020, PTDS, "cuMemFreeAsync_ptsz" },
    { "cuMemPoolCreate", 11020, 0, "cuMemPoolCreate" },
    { "cuMemPoolDestroy", 11020, 0, "cuMemPoolDestroy" },
    { "cuMemPoolTrimTo", 11020, 0, "cuMemPoolTrimTo" },
    { "cuMemPoolGetAttribute", 11020, 0, "cuMemPoolGetAttribute" },
    { "cuMemPoolSetAttribute", 11020, 0, "cuMemPoolSetAttribute" },
    { "cuMemGetAllocationGranularity", 10020, 0, "cuMemGetAllocationGranularity" },
    { "cuMemCreate", 10020, 0, "cuMemCreate" },
    { "cuMemRelease", 10020, 0, "cuMemRelease" },
    { "cuMemRetainAllocationHandle", 11000, 0, "cuMemRetainAllocationHandle" },
    { "cuMemAddressReserve", 10020, 0, "cuMemAddressReserve" },
    { "cuMemAddressFree", 10020, 0, "cuMemAddressFree" },
    { "cuMemMap", 10020, 0, "cuMemMap" },
    { "cuMemUnmap", 10020, 0, "cuMemUnmap" },
    { "cuMemSetAccess", 10020, 0, "cuMemSetAccess" },
    { "cuArrayCreate", 2000, 0, "cuArrayCreate" },
    { "cuArrayCreate", 3020, 0, "cuArrayCreate_v2" },
    { "cuArray3DCreate", 2000, 0, "cuArray3DCreate" },
    { "cuArray3DCreate", 3020, 0, "cuArray3DCreate_v2" },
    { "cuArrayDestroy", 2000, 0, "cuArrayDestroy" },
    { "cuMemcpyHtoD", 2000, 0, "cuMemcpyHtoD" },
    { "cuMemcpyHtoD", 3020, 0, "cuMemcpyHtoD_v2" },
    { "cuMemcpyHtoD", 7000, PTDS, "cuMemcpyHtoD_v2_ptds" },
    { "cuMemcpyDtoH", 2000, 0, "cuMemcpyDtoH" },
    { "cuMemcpyDtoH", 3020, 0, "cuMemcpyDtoH_v2" },
    { "cuMemcpyDtoH", 7000, PTDS, "cuMemcpyDtoH_v2_ptds" },
    { "cuMemsetD8", 2000, 0, "cuMemsetD8" },
    { "cuMemsetD8", 3020, 0, "cuMemsetD8_v2" },
    { "cuMemsetD8", 7000, PTDS, "cuMemsetD8_v2_ptds" },
    { "cuModuleLoad", 2000, 0, "cuModuleLoad" },
    { "cuModuleLoadData", 2000, 0, "cuModuleLoadData" },
    { "cuModuleUnload", 2000, 0, "cuModuleUnload" },
    { "cuModuleGetFunction", 2000, 0, "cuModuleGetFunction" },
    { "cuLaunchKernel", 4000, 0, "cuLaunchKernel" },
    { "cuLaunchKernel", 7000, PTDS, "cuLaunchKernel_ptsz" },
    { "cuLaunchKernelEx", 11060, 0, "cuLaunchKernelEx" },
    { "cuLaunchKernelEx", 11060, PTDS, "cuLaunchKernelEx_ptsz" },
    { "cuLaunchCooperativeKernel", 9000, 0, "cuLaunchCooperativeKernel" },
    { "cuLaunchCooperativeKernel", 9000, PTDS, "cuLaunchCooperativeKernel_ptsz" },
    { "cuStreamCreate", 2000, 0, "cuStreamCreate" },
    { "cuStreamCreateWithPriority", 5050, 0, "cuStreamCreateWithPriority" },
    { "cuStreamDestroy", 2000, 0, "cuStreamDestroy" },
    { "cuStreamDestroy", 4000, 0, "cuStreamDestroy_v2" },
    { "cuStreamSynchronize", 2000, 0, "cuStreamSynchronize" },
    { "cuStreamSynchronize", 7000, PTDS, "cuStreamSynchronize_ptsz" },
    { "cuStreamQuery", 2000, 0, "cuStreamQuery" },
    { "cuStreamQuery", 7000, PTDS, "cuStreamQuery_ptsz" },
    { "cuStreamGetCtx", 9020, 0, "cuStreamGetCtx" },
    { "cuStreamBeginCapture", 10000, 0, "cuStreamBeginCapture" },
    { "cuStreamBeginCapture", 10000, PTDS, "cuStreamBeginCapture_ptsz" },
    { "cuStreamBeginCapture", 10010, 0, "cuStreamBeginCapture_v2" },
    { "cuStreamBeginCapture", 10010, PTDS, "cuStreamBeginCapture_v2_ptsz" },
    { "cuStreamEndCapture", 10000, 0, "cuStreamEndCapture" },
    { "cuStreamEndCapture", 10000, PTDS, "cuStreamEndCapture_ptsz" },
    { "cuStreamIsCapturing", 10000, 0, "cuStreamIsCapturing" },
    { "cuStreamIsCapturing", 10000, PTDS, "cuStreamIsCapturing_ptsz" },
    { "cuEventCreate", 2000, 0, "cuEventCreate" },
    { "cuEventRecord", 2000, 0, "cuEventRecord" },
    { "cuEventRecord", 7000, PTDS, "cuEventRecord_ptsz" },
    { "cuEventQuery", 2000, 0, "cuEventQuery" },
    { "cuEventSynchronize", 2000, 0, "cuEventSynchronize" },
    { "cuEventElapsedTime", 2000, 0, "cuEventElapsedTime" },
    { "cuEventElapsedTime", 12080, 0, "cuEventElapsedTime_v2" },
    { "cuEventDestroy", 2000, 0, "cuEventDestroy" },
    { "cuEventDestroy", 4000, 0, "cuEventDestroy_v2" },
    { "cuGraphCreate", 10000, 0, "cuGraphCreate" },
    { "cuGraphDestroy", 10000, 0, "cuGraphDestroy" },
    { "cuGraphAddKernelNode", 10000, 0, "cuGraphAddKernelNode" },
    { "cuGraphAddKernelNode", 12000, 0, "cuGraphAddKernelNode_v2" },
    { "cuGraphInstantiate", 10000, 0, "cuGraphInstantiate" },
    { "cuGraphInstantiate", 11000, 0, "cuGraphInstantiate_v2" },
    { "cuGraphInstantiate", 12000, 0, "cuGraphInstantiateWithFlags" },
    { "cuGraphInstantiateWithFlags", 11040, 0, "cuGraphInstantiateWithFlags" },
    { "cuGraphExecDestroy", 10000, 0, "cuGraphExecDestroy" },
    { "cuGraphLaunch", 10000, 0, "cuGraphLaunch" },
    { "cuGraphLaunch", 10000, PTDS, "cuGraphLaunch_ptsz" },

    /* The highest version not above the request wins; flags pick the stream variant. */
    { "cuMemAlloc", 3010, 0, "cuMemAlloc" },
    { "cuMemAlloc", 13000, 0, "cuMemAlloc_v2" },
    { "cuMemAlloc", 13000, PTDS, "cuMemAlloc_v2" },
    { "cuLaunchKernel", 13000, 0, "cuLaunchKernel" },
    { "cuLaunchKernel", 13000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel" },
    { "cuLaunchKernel", 13000, PTDS, "cuLaunchKernel_ptsz" },
    { "cuStreamBeginCapture", 13000, PTDS, "cuStreamBeginCapture_v2_ptsz" },
    { "cuCtxCreate", 13000, 0, "cuCtxCreate_v4" },
    { "cuGraphInstantiate", 13000, 0, "cuGraphInstantiateWithFlags" },
    { "cuGetProcAddress", 13000, PTDS, "cuGetProcAddress_v2" },
};

static const char *const exported[] = {
#define SIM_TEST_NAME(ret, name, params) #name,
    GS_CUDA_FUNCS(SIM_TEST_NAME) SIM_EXTRA_FUNCS(SIM_TEST_NAME)
#undef SIM_TEST_NAME
};

/* Not driver functions: the runtime's private path, for tests (sim_context.c). */
static const char *const private_exports[] = { "cuSimRuntimeMakePrimaryCurrent" };

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static int setup(void **state)
{
    (void)state;
    sim_test_state_init("procaddr");
    setenv("GPUSLICE_SIM_GREEN", "0", 1); /* a driver without green contexts */
    return cu_load(&cu);
}

static int teardown(void **state)
{
    (void)state;
    sim_test_state_done();
    return 0;
}

static void test_calls_before_init_return_not_initialized(void **state)
{
    int n = 0;
    CUcontext ctx;
    CUdeviceptr p;
    void *fn = NULL;

    (void)state;
    assert_cu(cu.cuDeviceGetCount(&n), CUDA_ERROR_NOT_INITIALIZED);
    assert_cu(cu.cuCtxGetCurrent(&ctx), CUDA_ERROR_NOT_INITIALIZED);
    assert_cu(cu.cuMemAlloc_v2(&p, 1), CUDA_ERROR_NOT_INITIALIZED);
    assert_cu(cu.cuDevicePrimaryCtxRetain(&ctx, 0), CUDA_ERROR_NOT_INITIALIZED);
    /* What the runtime needs before cuInit works before it. */
    assert_ok(cu.cuDriverGetVersion(&n));
    assert_int_equal(n, 13000);
    assert_ok(cu.cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL));
    assert_ptr_equal(fn, (void *)cu.cuInit);
    assert_cu(cu.cuInit(1), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuInit(0));
    assert_ok(cu.cuInit(0));
    assert_ok(cu.cuDeviceGetCount(&n));
    assert_int_equal(n, 1);
}

static void test_dlsym_finds_every_listed_function(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(exported); i++)
        assert_non_null(dlsym(cu.handle, exported[i]));
}

static void test_procaddr_resolves_by_version_and_stream_flag(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(expects); i++) {
        const struct expect *e = &expects[i];
        void *want = dlsym(cu.handle, e->symbol), *got = (void *)1, *got1 = (void *)1;
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;

        assert_non_null(want);
        if (cu.cuGetProcAddress_v2(e->name, &got, e->version, e->flags, &st) != CUDA_SUCCESS ||
            got != want || st != CU_GET_PROC_ADDRESS_SUCCESS)
            fail_msg("%s v%d flags %u: wanted %s", e->name, e->version, e->flags, e->symbol);
        assert_ok(cu.cuGetProcAddress(e->name, &got1, e->version, e->flags));
        assert_ptr_equal(got1, want);
    }
}

/*
 * Every "getproc NAME: fF@V=SYMBOL ..." line of the H200's measurements
 * (h200-driver-facts.txt): the answer for flag F from version V up to the
 * next change, over the versions driver_facts.c asked for.
 */
static const int fact_versions[] = { 2000,  3020,  4000,  7000,  9000,  10000, 10010, 10020,
                                     11000, 11020, 11040, 11060, 12000, 12050, 13000 };

static const char *simulated_answer(const char *name, int version, unsigned flags)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    void *fn = NULL;
    Dl_info info;
    CUresult r = cu.cuGetProcAddress_v2(name, &fn, version, flags, &st);

    if (r != CUDA_SUCCESS)
        return st == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "version-low" : "none";
    if (!dladdr(fn, &info) || !info.dli_sname || dlsym(cu.handle, info.dli_sname) != fn)
        return "UNEXPORTED";
    return info.dli_sname;
}

static void test_procaddr_answers_as_the_h200_driver_did(void **state)
{
    FILE *f = fopen(SIM_FACTS_FILE, "r");
    char line[4096];
    int lines = 0, checked = 0;

    (void)state;
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        char name[128], *p, *save = NULL, *tok;
        char want[3][16][64]; /* per flag, per version index */
        int have[3] = { 0, 0, 0 };

        if (sscanf(line, "getproc %127[^:]:", name) != 1)
            continue;
        lines++;
        memset(want, 0, sizeof(want));
        p = strchr(line, ':') + 1;
        for (tok = strtok_r(p, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
            unsigned fl;
            int ver, vi;
            char sym[64];

            if (sscanf(tok, "f%u@%d=%63s", &fl, &ver, sym) != 3 || fl > 2)
                fail_msg("unreadable fact \"%s\" in %s", tok, name);
            for (vi = 0; vi < (int)COUNT(fact_versions) && fact_versions[vi] < ver; vi++)
                ;
            /* From this version up to the next change, the answer was sym. */
            for (int k = vi; k < (int)COUNT(fact_versions); k++)
                snprintf(want[fl][k], sizeof(want[fl][k]), "%s", sym);
            have[fl] = 1;
        }
        for (unsigned fl = 0; fl < 3; fl++) {
            assert_true(have[fl]);
            for (int k = 0; k < (int)COUNT(fact_versions); k++) {
                const char *got = simulated_answer(name, fact_versions[k], fl);
                if (want[fl][k][0] == '\0')
                    fail_msg("%s flags %u: no fact at %d", name, fl, fact_versions[k]);
                if (strcmp(got, want[fl][k]) != 0)
                    fail_msg("%s v%d flags %u: the simulator answers %s, the H200 %s", name,
                             fact_versions[k], fl, got, want[fl][k]);
                checked++;
            }
        }
    }
    fclose(f);
    assert_true(lines >= 40); /* every hooked name was measured */
    assert_int_equal(checked, lines * 3 * (int)COUNT(fact_versions));
}

static void test_every_exported_function_is_reachable_by_procaddr(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(exported); i++) {
        size_t k;
        for (k = 0; k < COUNT(expects); k++)
            if (strcmp(expects[k].symbol, exported[i]) == 0)
                break;
        if (k == COUNT(expects))
            fail_msg("%s is exported but no expectation resolves to it", exported[i]);
    }
}

static void test_procaddr_of_itself_gives_a_working_resolver(void **state)
{
    gs_pfn_cuGetProcAddress_v2 gpa2 = NULL;
    gs_pfn_cuGetProcAddress gpa1 = NULL;
    CUdriverProcAddressQueryResult st;
    void *fn = NULL;

    (void)state;
    assert_ok(cu.cuGetProcAddress("cuGetProcAddress", (void **)&gpa1, 11030, 0));
    assert_ptr_equal((void *)gpa1, dlsym(cu.handle, "cuGetProcAddress"));
    assert_ok(cu.cuGetProcAddress_v2("cuGetProcAddress", (void **)&gpa2, 12000, 0, &st));
    assert_ptr_equal((void *)gpa2, dlsym(cu.handle, "cuGetProcAddress_v2"));
    /* libcudart resolves everything else through the pointer it got back. */
    assert_ok(gpa2("cuLaunchKernel", &fn, 12000, PTDS, &st));
    assert_ptr_equal(fn, (void *)cu.cuLaunchKernel_ptsz);
    assert_ok(gpa1("cuMemAlloc", &fn, 12000, 0));
    assert_ptr_equal(fn, (void *)cu.cuMemAlloc_v2);
}

static void test_procaddr_unknown_name_is_not_found(void **state)
{
    static const char *const names[] = { "cuNoSuchFunction", "cuMemAlloc_v2", "cuLaunchKernel_ptsz",
                                         "", "nvmlInit" };
    (void)state;
    for (size_t i = 0; i < COUNT(names); i++) {
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
        void *fn = (void *)1;

        assert_cu(cu.cuGetProcAddress_v2(names[i], &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
        assert_int_equal(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
        assert_null(fn);
        fn = (void *)1;
        assert_cu(cu.cuGetProcAddress(names[i], &fn, 13000, 0), CUDA_ERROR_NOT_FOUND);
        assert_null(fn);
    }
}

static void test_procaddr_too_old_version_is_not_sufficient(void **state)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;
    void *fn = (void *)1;

    (void)state;
    assert_cu(cu.cuGetProcAddress_v2("cuMemAllocAsync", &fn, 11010, 0, &st), CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_null(fn);
    fn = (void *)1;
    assert_cu(cu.cuGetProcAddress_v2("cuGetProcAddress", &fn, 11020, PTDS, &st),
              CUDA_ERROR_NOT_FOUND);
    assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    assert_null(fn);
    /* The status pointer may be NULL. */
    assert_cu(cu.cuGetProcAddress_v2("cuLaunchKernelEx", &fn, 11000, 0, NULL),
              CUDA_ERROR_NOT_FOUND);
    /*
     * With the per-thread flag, a name that has per-thread variants resolves
     * only to them: below their first version it is not sufficient, even
     * where a plain variant exists (measured: cuStreamSynchronize at 2000,
     * cuLaunchKernel at 4000).
     */
    {
        static const struct {
            const char *name;
            int version;
        } low[] = { { "cuStreamSynchronize", 2000 }, { "cuStreamSynchronize", 6999 },
                    { "cuLaunchKernel", 4000 },      { "cuLaunchKernel", 6050 },
                    { "cuMemcpyHtoD", 6050 },        { "cuEventRecord", 3020 } };
        for (size_t i = 0; i < COUNT(low); i++) {
            fn = (void *)1;
            st = CU_GET_PROC_ADDRESS_SUCCESS;
            if (cu.cuGetProcAddress_v2(low[i].name, &fn, low[i].version, PTDS, &st) !=
                    CUDA_ERROR_NOT_FOUND ||
                st != CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT || fn != NULL)
                fail_msg("%s v%d flags 2: status %d, pointer %p; want not sufficient", low[i].name,
                         low[i].version, (int)st, fn);
            assert_cu(cu.cuGetProcAddress_v2(low[i].name, &fn, low[i].version, 0, &st),
                      CUDA_SUCCESS); /* the plain one without the flag */
        }
    }
}

static void test_procaddr_rejects_bad_arguments(void **state)
{
    void *fn;

    (void)state;
    assert_cu(cu.cuGetProcAddress_v2("cuInit", &fn, 13000, 4, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuGetProcAddress_v2("cuInit", &fn, 13000, 3, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuGetProcAddress_v2(NULL, &fn, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuGetProcAddress_v2("cuInit", NULL, 13000, 0, NULL), CUDA_ERROR_INVALID_VALUE);
}

/* The dynamic symbol table holds driver functions and nothing else. */
static void test_exports_only_driver_functions(void **state)
{
    Dl_info info;
    char cmd[4200], line[512];
    FILE *f;
    int seen = 0;

    (void)state;
    assert_true(dladdr((void *)cu.cuInit, &info) != 0);
    snprintf(cmd, sizeof(cmd), "nm -D --defined-only '%s' 2>/dev/null", info.dli_fname);
    if (!(f = popen(cmd, "r")))
        skip();
    while (fgets(line, sizeof(line), f)) {
        char addr[64], type[8], name[256];
        size_t i, k;

        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3)
            continue;
        if (strcmp(type, "T") != 0 && strcmp(type, "D") != 0 && strcmp(type, "B") != 0)
            continue;
        for (i = 0; i < COUNT(exported) && strcmp(exported[i], name) != 0; i++)
            ;
        for (k = 0; i == COUNT(exported) && k < COUNT(private_exports); k++)
            if (strcmp(private_exports[k], name) == 0)
                i = 0;
        if (i == COUNT(exported))
            fail_msg("libcuda.so.1 exports %s, which is not a listed driver function", name);
        seen++;
    }
    if (pclose(f) != 0 && seen == 0)
        skip(); /* no nm here */
    assert_int_equal(seen, (int)(COUNT(exported) + COUNT(private_exports)));
}

static void test_error_names_and_strings(void **state)
{
    const char *s = NULL;

    (void)state;
    assert_ok(cu.cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &s));
    assert_string_equal(s, "CUDA_ERROR_OUT_OF_MEMORY");
    assert_ok(cu.cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
    assert_string_equal(s, "out of memory");
    assert_ok(cu.cuGetErrorName((CUresult)301, &s));
    assert_string_equal(s, "CUDA_ERROR_FILE_NOT_FOUND");
    assert_cu(cu.cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
    assert_null(s);
}

static void test_device_identity(void **state)
{
    static const unsigned char uuid0[16] = { 0x5a, 0xc1, 0xce, 0x00, 0x00, 0x00, 0x40, 0x00,
                                             0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
    char name[64], bus[32];
    CUdevice dev;
    CUuuid u;
    size_t total;
    unsigned total32, groups = 0;
    CUdevResource res;
    int v;

    (void)state;
    assert_ok(cu.cuDeviceGet(&dev, 0));
    assert_cu(cu.cuDeviceGet(&dev, 1), CUDA_ERROR_INVALID_DEVICE);
    assert_ok(cu.cuDeviceGetName(name, sizeof(name), dev));
    assert_string_equal(name, "gpuslice simulated GPU");
    assert_ok(cu.cuDeviceGetName(name, 9, dev));
    assert_string_equal(name, "gpuslice");
    assert_ok(cu.cuDeviceGetUuid_v2(&u, dev));
    assert_memory_equal(u.bytes, uuid0, 16);
    assert_ok(cu.cuDeviceGetUuid(&u, dev));
    assert_memory_equal(u.bytes, uuid0, 16);
    assert_ok(cu.cuDeviceTotalMem_v2(&total, dev));
    assert_int_equal(total, 16 * GiB);
    assert_ok(cu.cuDeviceTotalMem(&total32, dev));
    assert_int_equal(total32, UINT32_MAX);
    assert_ok(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev));
    assert_int_equal(v, 132);
    assert_ok(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
    assert_int_equal(v, 9);
    assert_ok(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev));
    assert_int_equal(v, 0);
    assert_ok(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev));
    assert_int_equal(v, 1);
    assert_cu(cu.cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, dev),
              CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, 3),
              CUDA_ERROR_INVALID_DEVICE);
    assert_ok(cu.cuDeviceGetPCIBusId(bus, sizeof(bus), dev));
    assert_string_equal(bus, "0000:18:00.0");
    /* GPUSLICE_SIM_GREEN=0: the resource API answers "not supported", never invented numbers. */
    memset(&res, 0, sizeof(res));
    assert_cu(cu.cuDeviceGetDevResource(dev, &res, CU_DEV_RESOURCE_TYPE_SM),
              CUDA_ERROR_NOT_SUPPORTED);
    assert_int_equal(res.sm.smCount, 0);
    assert_cu(cu.cuDeviceGetDevResource(3, &res, CU_DEV_RESOURCE_TYPE_SM),
              CUDA_ERROR_INVALID_DEVICE);
    assert_cu(cu.cuDevSmResourceSplitByCount(NULL, &groups, &res, NULL, 0, 1),
              CUDA_ERROR_NOT_SUPPORTED);
}

/* ---- GPUSLICE_SIM_PROCADDR=unexported (this program run with "unexported") ---- */

static int is_exported(void *fn)
{
    Dl_info info;

    return dladdr(fn, &info) && info.dli_sname && dlsym(cu.handle, info.dli_sname) == fn;
}

static void *lookup(const char *name, int version, unsigned flags)
{
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    void *fn = NULL;

    assert_ok(cu.cuGetProcAddress_v2(name, &fn, version, flags, &st));
    assert_int_equal(st, CU_GET_PROC_ADDRESS_SUCCESS);
    assert_non_null(fn);
    return fn;
}

/*
 * Every lookup gives a pointer no dlsym gives, one per variant: the same
 * variant (another version that resolves to it, the v1 entry point) gives
 * the same pointer, different variants different ones.
 */
static void test_unexported_pointers_are_not_the_exported_ones(void **state)
{
    (void)state;
    for (size_t i = 0; i < COUNT(expects); i++) {
        const struct expect *e = &expects[i];
        void *fn = lookup(e->name, e->version, e->flags), *fn1 = NULL;

        if (is_exported(fn) || fn == dlsym(cu.handle, e->symbol))
            fail_msg("%s v%d flags %u: an exported pointer", e->name, e->version, e->flags);
        assert_ok(cu.cuGetProcAddress(e->name, &fn1, e->version, e->flags));
        assert_ptr_equal(fn1, fn);
        for (size_t k = 0; k < i; k++) {
            const struct expect *o = &expects[k];
            void *other = lookup(o->name, o->version, o->flags);
            if ((strcmp(o->symbol, e->symbol) == 0) != (other == fn))
                fail_msg("%s v%d (%s) and %s v%d (%s): pointers %p and %p", e->name, e->version,
                         e->symbol, o->name, o->version, o->symbol, fn, other);
        }
    }
    /* The rules are the exported mode's: too old is still not sufficient. */
    {
        CUdriverProcAddressQueryResult st;
        void *fn = (void *)1;
        assert_cu(cu.cuGetProcAddress_v2("cuStreamSynchronize", &fn, 2000, PTDS, &st),
                  CUDA_ERROR_NOT_FOUND);
        assert_int_equal(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
        assert_null(fn);
    }
}

/* The pointers behave as the exported functions do, the resolver included. */
static void test_unexported_pointers_behave_as_the_exported_ones(void **state)
{
    gs_pfn_cuGetProcAddress_v2 gpa2;
    gs_pfn_cuDriverGetVersion version;
    gs_pfn_cuInit init;
    gs_pfn_cuDeviceGetCount count;
    gs_pfn_cuDevicePrimaryCtxRetain retain;
    gs_pfn_cuCtxSetCurrent set;
    gs_pfn_cuMemAlloc_v2 alloc;
    gs_pfn_cuMemGetInfo_v2 info;
    gs_pfn_cuMemFree_v2 mfree;
    gs_pfn_cuLaunchKernel_ptsz launch;
    CUdriverProcAddressQueryResult st;
    CUcontext c;
    CUdeviceptr p;
    size_t f0, f1, t;
    int v = 0, n = 0;
    void *fn = NULL;

    (void)state;
    *(void **)&gpa2 = lookup("cuGetProcAddress", 12000, 0);
    assert_false(is_exported((void *)gpa2));
    assert_ok(gpa2("cuDriverGetVersion", (void **)&version, 13000, 0, &st));
    assert_false(is_exported((void *)version));
    assert_ok(version(&v));
    assert_int_equal(v, 13000);
    assert_ok(gpa2("cuInit", &fn, 13000, 0, &st));
    *(void **)&init = fn;
    assert_ok(init(0));
    *(void **)&count = lookup("cuDeviceGetCount", 13000, 0);
    assert_ok(count(&n));
    assert_int_equal(n, 1);
    *(void **)&retain = lookup("cuDevicePrimaryCtxRetain", 13000, 0);
    *(void **)&set = lookup("cuCtxSetCurrent", 13000, 0);
    *(void **)&alloc = lookup("cuMemAlloc", 13000, 0);
    *(void **)&info = lookup("cuMemGetInfo", 13000, 0);
    *(void **)&mfree = lookup("cuMemFree", 13000, 0);
    *(void **)&launch = lookup("cuLaunchKernel", 13000, PTDS);
    assert_ok(retain(&c, 0));
    assert_ok(set(c));
    assert_ok(info(&f0, &t));
    assert_ok(alloc(&p, 5 * GiB)); /* 64-bit sizes pass through untouched */
    assert_ok(info(&f1, &t));
    assert_int_equal(f0 - f1, 5 * GiB);
    assert_ok(cu.cuMemFree_v2(p)); /* what a trampoline made, the exported function frees */
    assert_ok(alloc(&p, 1));
    assert_ok(mfree(p));
    assert_cu(mfree(p), CUDA_ERROR_INVALID_VALUE);
    assert_ok(launch(get_function(&cu, "spin_10us"), 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    assert_ok(cu.cuStreamSynchronize_ptsz(NULL));
    assert_ok(cu.cuDevicePrimaryCtxRelease_v2(0));
}

/* A mode that is neither: one message naming the variable, and lookups fail. */
static void test_bad_procaddr_mode_is_refused(void **state)
{
    int err[2], status;
    char buf[512] = "";
    ssize_t n;
    pid_t pid;

    (void)state;
    assert_int_equal(pipe(err), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char self[4096];
        ssize_t len = readlink("/proc/self/exe", self, sizeof(self) - 1);
        dup2(err[1], 2);
        if (len <= 0)
            _exit(9);
        self[len] = '\0';
        setenv("GPUSLICE_SIM_PROCADDR", "hidden", 1);
        execl(self, self, "bad-mode", (char *)NULL);
        _exit(9);
    }
    close(err[1]);
    n = read(err[0], buf, sizeof(buf) - 1);
    buf[n > 0 ? n : 0] = '\0';
    close(err[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_non_null(strstr(buf, "GPUSLICE_SIM_PROCADDR: \"hidden\" is not a mode"));
}

/* The child of test_bad_procaddr_mode_is_refused: both entry points refuse, quietly after once. */
static int bad_mode_child(void)
{
    void *fn = (void *)1;

    if (cu_load(&cu) < 0)
        return 2;
    if (cu.cuGetProcAddress_v2("cuInit", &fn, 13000, 0, NULL) != CUDA_ERROR_INVALID_VALUE ||
        fn != NULL || cu.cuGetProcAddress("cuInit", &fn, 13000, 0) != CUDA_ERROR_INVALID_VALUE)
        return 1;
    return 0;
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_calls_before_init_return_not_initialized),
        cmocka_unit_test(test_dlsym_finds_every_listed_function),
        cmocka_unit_test(test_procaddr_resolves_by_version_and_stream_flag),
        cmocka_unit_test(test_procaddr_answers_as_the_h200_driver_did),
        cmocka_unit_test(test_every_exported_function_is_reachable_by_procaddr),
        cmocka_unit_test(test_procaddr_of_itself_gives_a_working_resolver),
        cmocka_unit_test(test_procaddr_unknown_name_is_not_found),
        cmocka_unit_test(test_procaddr_too_old_version_is_not_sufficient),
        cmocka_unit_test(test_procaddr_rejects_bad_arguments),
        cmocka_unit_test(test_exports_only_driver_functions),
        cmocka_unit_test(test_error_names_and_strings),
        cmocka_unit_test(test_device_identity),
        cmocka_unit_test(test_bad_procaddr_mode_is_refused),
    };
    const struct CMUnitTest unexported[] = {
        cmocka_unit_test(test_unexported_pointers_are_not_the_exported_ones),
        cmocka_unit_test(test_unexported_pointers_behave_as_the_exported_ones),
    };

    if (argc > 1 && strcmp(argv[1], "bad-mode") == 0)
        return bad_mode_child();
    if (argc > 1 && strcmp(argv[1], "unexported") == 0) {
        setenv("GPUSLICE_SIM_PROCADDR", "unexported", 1);
        return cmocka_run_group_tests_name("unexported", unexported, setup, teardown);
    }
    unsetenv("GPUSLICE_SIM_PROCADDR");
    return cmocka_run_group_tests(tests, setup, teardown);
}
