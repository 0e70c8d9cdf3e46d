/*
 * What the simulator's tests share: loading the simulated libcuda.so.1 and
 * libnvidia-ml.so.1 with dlopen/dlsym as programs do (LD_LIBRARY_PATH points
 * at lib/sim), a state file of each test program's own, and small checks.
 * Header-only: each test program is one file.
 */
#ifndef GPUSLICE_SIM_TEST_H
#define GPUSLICE_SIM_TEST_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/cuda_api.h"
#include "common/nvml_api.h"
#include "sim_extra_funcs.h"

#ifndef CUDA_ERROR_CAPTURED_EVENT
#define CUDA_ERROR_CAPTURED_EVENT ((CUresult)907)
#endif

#define MiB ((uint64_t)1 << 20)
#define GiB ((uint64_t)1 << 30)

/* Every driver function, looked up by dlsym under its exported name. */
struct cu {
    void *handle;
#define SIM_TEST_FIELD(ret, name, params) gs_pfn_##name name;
    GS_CUDA_FUNCS(SIM_TEST_FIELD)
#undef SIM_TEST_FIELD
#define SIM_TEST_EXTRA_FIELD(ret, name, params) ret(*name) params;
    SIM_EXTRA_FUNCS(SIM_TEST_EXTRA_FIELD)
#undef SIM_TEST_EXTRA_FIELD
};

struct nvml {
    void *handle;
#define SIM_TEST_FIELD(ret, name, params) gs_pfn_##name name;
    GS_NVML_FUNCS(SIM_TEST_FIELD)
#undef SIM_TEST_FIELD
};

static inline void *sim_test_dlopen(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);

    if (!h)
        fprintf(stderr, "dlopen %s: %s (is LD_LIBRARY_PATH set to lib/sim?)\n", lib, dlerror());
    return h;
}

/* 0, or -1 with a message naming the missing symbol. */
static inline int cu_load(struct cu *cu)
{
    memset(cu, 0, sizeof(*cu));
    if (!(cu->handle = sim_test_dlopen("libcuda.so.1")))
        return -1;
#define SIM_TEST_LOAD(ret, name, params)                                                           \
    if (!(*(void **)&cu->name = dlsym(cu->handle, #name))) {                                       \
        fprintf(stderr, "dlsym libcuda.so.1 %s: not exported\n", #name);                           \
        return -1;                                                                                 \
    }
    GS_CUDA_FUNCS(SIM_TEST_LOAD)
    SIM_EXTRA_FUNCS(SIM_TEST_LOAD)
#undef SIM_TEST_LOAD
    return 0;
}

static inline int nvml_load(struct nvml *nv)
{
    memset(nv, 0, sizeof(*nv));
    if (!(nv->handle = sim_test_dlopen("libnvidia-ml.so.1")))
        return -1;
#define SIM_TEST_LOAD(ret, name, params)                                                           \
    if (!(*(void **)&nv->name = dlsym(nv->handle, #name))) {                                       \
        fprintf(stderr, "dlsym libnvidia-ml.so.1 %s: not exported\n", #name);                      \
        return -1;                                                                                 \
    }
    GS_NVML_FUNCS(SIM_TEST_LOAD)
#undef SIM_TEST_LOAD
    return 0;
}

/*
 * Points GPUSLICE_SIM_STATE at a file of this test program's own (removed
 * first, and by sim_test_state_done), so tests running at once never share a
 * device; and unsets CUDA_VISIBLE_DEVICES.
 */
static char sim_test_state_path[256];

static inline void sim_test_state_init(const char *name)
{
    const char *dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";

    snprintf(sim_test_state_path, sizeof(sim_test_state_path), "%s/gpuslice-sim-test-%s-%d", dir,
             name, (int)getpid());
    unlink(sim_test_state_path);
    setenv("GPUSLICE_SIM_STATE", sim_test_state_path, 1);
    /* The tests choose the devices: a CUDA_VISIBLE_DEVICES of the machine's must not hide them. */
    unsetenv("CUDA_VISIBLE_DEVICES");
    /* Exact arithmetic on contexts: their hidden part (test_sim_nvml checks it) left out. */
    setenv("GPUSLICE_SIM_CONTEXT_HIDDEN", "0", 1);
}

static inline void sim_test_state_done(void)
{
    if (sim_test_state_path[0])
        unlink(sim_test_state_path);
}

static inline uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define assert_cu(call, expect) assert_int_equal((int)(call), (int)(expect))
#define assert_ok(call) assert_cu(call, CUDA_SUCCESS)

/* A module and a function of it, in the current context. */
static inline CUfunction get_function(struct cu *cu, const char *name)
{
    static const char image[] = "simulated";
    CUmodule m;
    CUfunction f;

    assert_ok(cu->cuModuleLoadData(&m, image));
    assert_ok(cu->cuModuleGetFunction(&f, m, name));
    return f;
}

static inline CUresult launch1(struct cu *cu, CUfunction f, CUstream s)
{
    return cu->cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL);
}

#endif /* GPUSLICE_SIM_TEST_H */
