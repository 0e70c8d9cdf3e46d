/*
 * Driver-API results for the GPU test programs, in the protocol of check.h:
 * CU(call) passes a CUDA_SUCCESS through and reports anything else as an
 * "@fail" line naming the call, the line and the error.
 */
#ifndef GPUSLICE_GPU_CU_CHECK_H
#define GPUSLICE_GPU_CU_CHECK_H

#include <cuda.h>

#include "check.h"

static inline const char *errname(CUresult r)
{
    const char *s = NULL;
    if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
        s = "?";
    return s;
}

static inline int cu_ok(CUresult r, const char *what, int line)
{
    if (r == CUDA_SUCCESS)
        return 1;
    expect(0, "line %d: %s returned %d (%s)", line, what, (int)r, errname(r));
    return 0;
}
#define CU(call) cu_ok((call), #call, __LINE__)

#endif
