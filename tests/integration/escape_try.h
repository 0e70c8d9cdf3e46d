/*
 * One allocation through driver functions found by a lookup of the caller's
 * choosing, for escape.c and libescape.c. Static: compiled into each object,
 * so that a lookup relative to the caller (RTLD_NEXT) is relative to it.
 */
#ifndef GPUSLICE_TESTS_ESCAPE_TRY_H
#define GPUSLICE_TESTS_ESCAPE_TRY_H

#include <stdio.h>

#include "common/cuda_api.h"

typedef void *(*dlsym_fn)(void *, const char *);

/*
 * Resolves the functions with d(handle, name), takes device 0's primary context
 * and allocates bytes: 0 refused for memory, 1 allocated, 2 a set-up error. how
 * names the way in the line it prints.
 */
static int escape_try(dlsym_fn d, void *handle, const char *how, unsigned long long bytes)
{
    gs_pfn_cuInit init;
    gs_pfn_cuDevicePrimaryCtxRetain retain;
    gs_pfn_cuCtxSetCurrent set;
    gs_pfn_cuMemAlloc_v2 alloc;
    CUcontext ctx;
    CUdeviceptr p;
    CUresult r;

    if (!(init = (gs_pfn_cuInit)d(handle, "cuInit")) ||
        !(retain = (gs_pfn_cuDevicePrimaryCtxRetain)d(handle, "cuDevicePrimaryCtxRetain")) ||
        !(set = (gs_pfn_cuCtxSetCurrent)d(handle, "cuCtxSetCurrent")) ||
        !(alloc = (gs_pfn_cuMemAlloc_v2)d(handle, "cuMemAlloc_v2"))) {
        printf("%s: cannot resolve the driver\n", how);
        return 2;
    }
    if (init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS) {
        printf("%s: no context\n", how);
        return 2;
    }
    r = alloc(&p, bytes);
    printf("allocation %s of %llu -> %d\n", how, bytes, (int)r);
    return r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 2;
}

#endif
