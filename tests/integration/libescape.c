/*
 * The library half of escape.c: loaded after the interposer (or into a
 * new link-map namespace), it finds dlsym the way such a library would.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

#include "common/cuda_api.h"

typedef void *(*dlsym_fn)(void *, const char *);

dlsym_fn escape_next_dlsym(void);
int escape_alloc(dlsym_fn unused, unsigned long long bytes);
int escape_next_alloc(unsigned long long bytes);

/* What "the next dlsym" is from here: glibc's, unless the interposer answers for it. */
dlsym_fn escape_next_dlsym(void)
{
    return (dlsym_fn)dlsym(RTLD_NEXT, "dlsym");
}

/* Opens libcuda from here (in a namespace: its own copy) and allocates bytes. */
int escape_alloc(dlsym_fn unused, unsigned long long bytes)
{
    void *lib = dlopen("libcuda.so.1", RTLD_NOW);
    gs_pfn_cuInit init;
    gs_pfn_cuDevicePrimaryCtxRetain retain;
    gs_pfn_cuCtxSetCurrent set;
    gs_pfn_cuMemAlloc_v2 alloc;
    CUcontext ctx;
    CUdeviceptr p;
    CUresult r;

    (void)unused;
    if (!lib || !(init = (gs_pfn_cuInit)dlsym(lib, "cuInit")) ||
        !(retain = (gs_pfn_cuDevicePrimaryCtxRetain)dlsym(lib, "cuDevicePrimaryCtxRetain")) ||
        !(set = (gs_pfn_cuCtxSetCurrent)dlsym(lib, "cuCtxSetCurrent")) ||
        !(alloc = (gs_pfn_cuMemAlloc_v2)dlsym(lib, "cuMemAlloc_v2")))
        return 2;
    if (init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS)
        return 2;
    r = alloc(&p, bytes);
    printf("allocation in the namespace of %llu -> %d\n", bytes, (int)r);
    return r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 2;
}

/* The driver's functions as "the next definition" after this library, and an allocation. */
int escape_next_alloc(unsigned long long bytes)
{
    gs_pfn_cuInit init = (gs_pfn_cuInit)dlsym(RTLD_NEXT, "cuInit");
    gs_pfn_cuDevicePrimaryCtxRetain retain =
        (gs_pfn_cuDevicePrimaryCtxRetain)dlsym(RTLD_NEXT, "cuDevicePrimaryCtxRetain");
    gs_pfn_cuCtxSetCurrent set = (gs_pfn_cuCtxSetCurrent)dlsym(RTLD_NEXT, "cuCtxSetCurrent");
    gs_pfn_cuMemAlloc_v2 alloc = (gs_pfn_cuMemAlloc_v2)dlsym(RTLD_NEXT, "cuMemAlloc_v2");
    CUcontext ctx;
    CUdeviceptr p;
    CUresult r;

    if (!init || !retain || !set || !alloc)
        return 2;
    if (init(0) != CUDA_SUCCESS || retain(&ctx, 0) != CUDA_SUCCESS || set(ctx) != CUDA_SUCCESS)
        return 2;
    r = alloc(&p, bytes);
    printf("allocation through RTLD_NEXT of %llu -> %d\n", bytes, (int)r);
    return r == CUDA_SUCCESS ? 1 : r == CUDA_ERROR_OUT_OF_MEMORY ? 0 : 2;
}
