/*
 * Every CUDA driver and NVML function the interposer hooks, written once.
 * X(ret, api, symbol, version, ptds, params, args):
 *   api      the name callers give cuGetProcAddress ("cuMemAlloc")
 *   symbol   the exported variant this hook replaces ("cuMemAlloc_v2")
 *   version  the lowest CUDA version that resolves api to symbol
 *   ptds     1 for the per-thread-default-stream variant
 * The lists expand into the real-function pointers, the lookup table used by
 * dlsym and cuGetProcAddress, and the exported hooks' pass-through paths.
 */
#ifndef GPUSLICE_PRELOAD_HOOKS_H
#define GPUSLICE_PRELOAD_HOOKS_H

#include "common/cuda_api.h"
#include "common/nvml_api.h"

#define GS_CUDA_HOOKS(X)                                                                         \
    X(CUresult, cuInit, cuInit, 2000, 0, (unsigned int Flags), (Flags))                          \
    X(CUresult, cuGetProcAddress, cuGetProcAddress, 11030, 0,                                    \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags),                       \
      (symbol, pfn, cudaVersion, flags))                                                         \
    X(CUresult, cuGetProcAddress, cuGetProcAddress_v2, 12000, 0,                                 \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                        \
       CUdriverProcAddressQueryResult *symbolStatus),                                            \
      (symbol, pfn, cudaVersion, flags, symbolStatus))                                           \
    X(CUresult, cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0, (unsigned int *bytes, CUdevice dev), \
      (bytes, dev))                                                                              \
    X(CUresult, cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, 0, (size_t * bytes, CUdevice dev),  \
      (bytes, dev))                                                                              \
    X(CUresult, cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0,                            \
      (int *pi, CUdevice_attribute attrib, CUdevice dev), (pi, attrib, dev))                     \
    X(CUresult, cuMemGetInfo, cuMemGetInfo, 2000, 0, (unsigned int *free, unsigned int *total),  \
      (free, total))                                                                             \
    X(CUresult, cuMemGetInfo, cuMemGetInfo_v2, 3020, 0, (size_t * free, size_t * total),         \
      (free, total))                                                                             \
    X(CUresult, cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0,                     \
      (CUcontext * pctx, CUdevice dev), (pctx, dev))                                             \
    X(CUresult, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0, (CUdevice dev),   \
      (dev))                                                                                     \
    X(CUresult, cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000, 0,               \
      (CUdevice dev), (dev))                                                                     \
    X(CUresult, cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0, (CUdevice dev), (dev)) \
    X(CUresult, cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000, 0, (CUdevice dev),   \
      (dev))                                                                                     \
    X(CUresult, cuCtxCreate, cuCtxCreate, 2000, 0,                                               \
      (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))                  \
    X(CUresult, cuCtxCreate, cuCtxCreate_v2, 3020, 0,                                            \
      (CUcontext * pctx, unsigned int flags, CUdevice dev), (pctx, flags, dev))                  \
    X(CUresult, cuCtxCreate, cuCtxCreate_v3, 11040, 0,                                           \
      (CUcontext * pctx, CUexecAffinityParam * paramsArray, int numParams, unsigned int flags,   \
       CUdevice dev),                                                                            \
      (pctx, paramsArray, numParams, flags, dev))                                                \
    X(CUresult, cuCtxCreate, cuCtxCreate_v4, 12050, 0,                                           \
      (CUcontext * pctx, CUctxCreateParams * ctxCreateParams, unsigned int flags, CUdevice dev), \
      (pctx, ctxCreateParams, flags, dev))                                                       \
    X(CUresult, cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0, (CUcontext * pctx), (pctx))           \
    X(CUresult, cuStreamCreate, cuStreamCreate, 2000, 0, (CUstream * phStream, unsigned int Flags), \
      (phStream, Flags))                                                                         \
    X(CUresult, cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050, 0,                 \
      (CUstream * phStream, unsigned int flags, int priority), (phStream, flags, priority))      \
    X(CUresult, cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0, (CUcontext ctx), (ctx))               \
    X(CUresult, cuCtxPushCurrent, cuCtxPushCurrent, 2000, 0, (CUcontext ctx), (ctx))             \
    X(CUresult, cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000, 0, (CUcontext ctx), (ctx))          \
    X(CUresult, cuCtxDestroy, cuCtxDestroy, 2000, 0, (CUcontext ctx), (ctx))                     \
    X(CUresult, cuCtxDestroy, cuCtxDestroy_v2, 4000, 0, (CUcontext ctx), (ctx))                  \
    X(CUresult, cuMemAlloc, cuMemAlloc, 2000, 0, (CUdeviceptr_v1 * dptr, unsigned int bytesize), \
      (dptr, bytesize))                                                                          \
    X(CUresult, cuMemAlloc, cuMemAlloc_v2, 3020, 0, (CUdeviceptr * dptr, size_t bytesize),       \
      (dptr, bytesize))                                                                          \
    X(CUresult, cuMemAllocPitch, cuMemAllocPitch, 2000, 0,                                       \
      (CUdeviceptr_v1 * dptr, unsigned int *pPitch, unsigned int WidthInBytes,                   \
       unsigned int Height, unsigned int ElementSizeBytes),                                      \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                    \
    X(CUresult, cuMemAllocPitch, cuMemAllocPitch_v2, 3020, 0,                                    \
      (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height,                  \
       unsigned int ElementSizeBytes),                                                           \
      (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes))                                    \
    X(CUresult, cuMemAllocManaged, cuMemAllocManaged, 6000, 0,                                   \
      (CUdeviceptr * dptr, size_t bytesize, unsigned int flags), (dptr, bytesize, flags))        \
    X(CUresult, cuMemFree, cuMemFree, 2000, 0, (CUdeviceptr_v1 dptr), (dptr))                    \
    X(CUresult, cuMemFree, cuMemFree_v2, 3020, 0, (CUdeviceptr dptr), (dptr))                    \
    X(CUresult, cuMemAllocAsync, cuMemAllocAsync, 11020, 0,                                      \
      (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))        \
    X(CUresult, cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020, 1,                                 \
      (CUdeviceptr * dptr, size_t bytesize, CUstream hStream), (dptr, bytesize, hStream))        \
    X(CUresult, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0,                      \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),                \
      (dptr, bytesize, pool, hStream))                                                           \
    X(CUresult, cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020, 1,                 \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream),                \
      (dptr, bytesize, pool, hStream))                                                           \
    X(CUresult, cuMemFreeAsync, cuMemFreeAsync, 11020, 0, (CUdeviceptr dptr, CUstream hStream),  \
      (dptr, hStream))                                                                           \
    X(CUresult, cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020, 1,                                   \
      (CUdeviceptr dptr, CUstream hStream), (dptr, hStream))                                     \
    X(CUresult, cuMemPoolCreate, cuMemPoolCreate, 11020, 0,                                      \
      (CUmemoryPool * pool, const CUmemPoolProps *poolProps), (pool, poolProps))                 \
    X(CUresult, cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0, (CUmemoryPool pool), (pool))       \
    X(CUresult, cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0,                                      \
      (CUmemoryPool pool, size_t minBytesToKeep), (pool, minBytesToKeep))                        \
    X(CUresult, cuMemCreate, cuMemCreate, 10020, 0,                                              \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,      \
       unsigned long long flags),                                                                \
      (handle, size, prop, flags))                                                               \
    X(CUresult, cuMemRelease, cuMemRelease, 10020, 0, (CUmemGenericAllocationHandle handle),     \
      (handle))                                                                                  \
    X(CUresult, cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0,              \
      (CUmemGenericAllocationHandle * handle, void *addr), (handle, addr))                       \
    X(CUresult, cuMemMap, cuMemMap, 10020, 0,                                                    \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,         \
       unsigned long long flags),                                                                \
      (ptr, size, offset, handle, flags))                                                        \
    X(CUresult, cuMemUnmap, cuMemUnmap, 10020, 0, (CUdeviceptr ptr, size_t size), (ptr, size))   \
    X(CUresult, cuArrayCreate, cuArrayCreate, 2000, 0,                                           \
      (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray),                       \
      (pHandle, pAllocateArray))                                                                 \
    X(CUresult, cuArrayCreate, cuArrayCreate_v2, 3020, 0,                                        \
      (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray),                          \
      (pHandle, pAllocateArray))                                                                 \
    X(CUresult, cuArray3DCreate, cuArray3DCreate, 2000, 0,                                       \
      (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray),                     \
      (pHandle, pAllocateArray))                                                                 \
    X(CUresult, cuArray3DCreate, cuArray3DCreate_v2, 3020, 0,                                    \
      (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray),                        \
      (pHandle, pAllocateArray))                                                                 \
    X(CUresult, cuArrayDestroy, cuArrayDestroy, 2000, 0, (CUarray hArray), (hArray))             \
    X(CUresult, cuLaunchKernel, cuLaunchKernel, 4000, 0,                                         \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,      \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                  \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),       \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,        \
       hStream, kernelParams, extra))                                                                 \
    X(CUresult, cuLaunchKernel, cuLaunchKernel_ptsz, 7000, 1,                                    \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,      \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                  \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra),       \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,        \
       hStream, kernelParams, extra))                                                                 \
    X(CUresult, cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0,                                    \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),           \
      (config, f, kernelParams, extra))                                                          \
    X(CUresult, cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060, 1,                               \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra),           \
      (config, f, kernelParams, extra))                                                          \
    X(CUresult, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0,                   \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,      \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                  \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams),                     \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,        \
       hStream, kernelParams))                                                                 \
    X(CUresult, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000, 1,              \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,      \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                  \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams),                     \
      (f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ, sharedMemBytes,        \
       hStream, kernelParams))                                                                 \
    X(CUresult, cuGraphLaunch, cuGraphLaunch, 10000, 0, (CUgraphExec hGraphExec, CUstream hStream), \
      (hGraphExec, hStream))                                                                     \
    X(CUresult, cuGraphLaunch, cuGraphLaunch_ptsz, 10000, 1,                                     \
      (CUgraphExec hGraphExec, CUstream hStream), (hGraphExec, hStream))                         \
    X(CUresult, cuCtxSynchronize, cuCtxSynchronize, 2000, 0, (void), ())                         \
    X(CUresult, cuCtxSynchronize, cuCtxSynchronize_v2, 13000, 0, (CUcontext ctx), (ctx))         \
    X(CUresult, cuStreamSynchronize, cuStreamSynchronize, 2000, 0, (CUstream hStream), (hStream)) \
    X(CUresult, cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000, 1, (CUstream hStream),      \
      (hStream))                                                                                 \
    X(CUresult, cuStreamDestroy, cuStreamDestroy, 2000, 0, (CUstream hStream), (hStream))        \
    X(CUresult, cuStreamDestroy, cuStreamDestroy_v2, 4000, 0, (CUstream hStream), (hStream))     \
    X(CUresult, cuStreamBeginCapture, cuStreamBeginCapture, 10000, 0, (CUstream hStream),        \
      (hStream))                                                                                 \
    X(CUresult, cuStreamBeginCapture, cuStreamBeginCapture_ptsz, 10000, 1, (CUstream hStream),   \
      (hStream))                                                                                 \
    X(CUresult, cuStreamBeginCapture, cuStreamBeginCapture_v2, 10010, 0,                         \
      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))                             \
    X(CUresult, cuStreamBeginCapture, cuStreamBeginCapture_v2_ptsz, 10010, 1,                    \
      (CUstream hStream, CUstreamCaptureMode mode), (hStream, mode))                             \
    X(CUresult, cuStreamEndCapture, cuStreamEndCapture, 10000, 0,                                \
      (CUstream hStream, CUgraph * phGraph), (hStream, phGraph))                                 \
    X(CUresult, cuStreamEndCapture, cuStreamEndCapture_ptsz, 10000, 1,                           \
      (CUstream hStream, CUgraph * phGraph), (hStream, phGraph))

/* NVML: the same shape; version and ptds are unused. */
#define GS_NVML_HOOKS(X)                                                                         \
    X(nvmlReturn_t, nvmlInit, nvmlInit, 0, 0, (void), ())                                        \
    X(nvmlReturn_t, nvmlInit_v2, nvmlInit_v2, 0, 0, (void), ())                                  \
    X(nvmlReturn_t, nvmlInitWithFlags, nvmlInitWithFlags, 0, 0, (unsigned int flags), (flags))   \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo, 0, 0,                      \
      (nvmlDevice_t device, nvmlMemory_t * memory), (device, memory))                            \
    X(nvmlReturn_t, nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2, 0, 0,                \
      (nvmlDevice_t device, nvmlMemory_v2_t * memory), (device, memory))

#endif
