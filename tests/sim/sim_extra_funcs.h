/*
 * Driver functions the simulator exports beyond the shared list
 * (src/common/cuda_funcs.h), as X(return, symbol, (parameters)), so that every
 * name cuGetProcAddress resolves for a function of that list has a real
 * target (CUDA 13 asks for cuCtxGetDevice at 13000, which is its _v2; per-thread copies; the legacy 32-bit calls). Candidates for
 * the shared list.
 */
#ifndef GPUSLICE_SIM_EXTRA_FUNCS_H
#define GPUSLICE_SIM_EXTRA_FUNCS_H

#include "common/cuda_api.h"

#define SIM_EXTRA_FUNCS(X)                                                                         \
    X(CUresult, cuCtxGetDevice_v2, (CUdevice * device, CUcontext ctx))                             \
    X(CUresult, cuMemGetAddressRange,                                                              \
      (CUdeviceptr_v1 * pbase, unsigned int *psize, CUdeviceptr_v1 dptr))                          \
    X(CUresult, cuMemcpyHtoD,                                                                      \
      (CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount))                     \
    X(CUresult, cuMemcpyDtoH, (void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount))   \
    X(CUresult, cuMemsetD8, (CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N))          \
    X(CUresult, cuMemcpyHtoD_v2_ptds,                                                              \
      (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))                              \
    X(CUresult, cuMemcpyDtoH_v2_ptds, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))    \
    X(CUresult, cuMemsetD8_v2_ptds, (CUdeviceptr dstDevice, unsigned char uc, size_t N))           \
    X(CUresult, cuGraphInstantiate,                                                                \
      (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode * phErrorNode, char *logBuffer,      \
       size_t bufferSize))                                                                         \
    X(CUresult, cuGraphInstantiate_v2,                                                             \
      (CUgraphExec * phGraphExec, CUgraph hGraph, CUgraphNode * phErrorNode, char *logBuffer,      \
       size_t bufferSize))

#endif /* GPUSLICE_SIM_EXTRA_FUNCS_H */
