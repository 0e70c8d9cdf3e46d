/*
 * Every CUDA driver and NVML function the interposer hooks, written once.
 * X(api, symbol, version, ptds, flags):
 *   api      the name callers give cuGetProcAddress ("cuMemAlloc")
 *   symbol   the exported variant this hook replaces ("cuMemAlloc_v2")
 *   version  the lowest CUDA version that resolves api to symbol
 *   ptds     1 for the per-thread-default-stream variant
 *   flags    GS_HOOK: handed out (by dlsym and cuGetProcAddress) once a limit
 *            or partition is configured; GS_HOOK_ALWAYS: also in a process
 *            with nothing configured (the lanes API answers through
 *            cuDeviceGetAttribute, and the runtime must get our resolver)
 * A symbol's prototype is its entry in common/cuda_funcs.h or nvml_funcs.h,
 * which declares it, so a hook defined with another prototype does not
 * build. The lists expand into the lookup table used by dlsym and
 * cuGetProcAddress; the exported symbols are exactly their entries (checked
 * by integration.exports); the real functions are the loader's (driver.h).
 */
#ifndef GPUSLICE_PRELOAD_HOOKS_H
#define GPUSLICE_PRELOAD_HOOKS_H

#include "common/cuda_api.h"
#include "common/nvml_api.h"

#define GS_HOOK 0
#define GS_HOOK_ALWAYS 1

#define GS_CUDA_HOOKS(X)                                                                           \
    X(cuInit, cuInit, 2000, 0, GS_HOOK)                                                            \
    X(cuGetProcAddress, cuGetProcAddress, 11030, 0, GS_HOOK_ALWAYS)                                \
    X(cuGetProcAddress, cuGetProcAddress_v2, 12000, 0, GS_HOOK_ALWAYS)                             \
    X(cuDeviceTotalMem, cuDeviceTotalMem, 2000, 0, GS_HOOK)                                        \
    X(cuDeviceTotalMem, cuDeviceTotalMem_v2, 3020, 0, GS_HOOK)                                     \
    X(cuDeviceGetAttribute, cuDeviceGetAttribute, 2000, 0, GS_HOOK_ALWAYS)                         \
    X(cuMemGetInfo, cuMemGetInfo, 2000, 0, GS_HOOK)                                                \
    X(cuMemGetInfo, cuMemGetInfo_v2, 3020, 0, GS_HOOK)                                             \
    X(cuDevicePrimaryCtxRetain, cuDevicePrimaryCtxRetain, 7000, 0, GS_HOOK)                        \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease, 7000, 0, GS_HOOK)                      \
    X(cuDevicePrimaryCtxRelease, cuDevicePrimaryCtxRelease_v2, 11000, 0, GS_HOOK)                  \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset, 7000, 0, GS_HOOK)                          \
    X(cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2, 11000, 0, GS_HOOK)                      \
    X(cuCtxCreate, cuCtxCreate, 2000, 0, GS_HOOK)                                                  \
    X(cuCtxCreate, cuCtxCreate_v2, 3020, 0, GS_HOOK)                                               \
    X(cuCtxCreate, cuCtxCreate_v3, 11040, 0, GS_HOOK)                                              \
    X(cuCtxCreate, cuCtxCreate_v4, 12050, 0, GS_HOOK)                                              \
    X(cuCtxGetCurrent, cuCtxGetCurrent, 4000, 0, GS_HOOK)                                          \
    X(cuStreamCreate, cuStreamCreate, 2000, 0, GS_HOOK)                                            \
    X(cuStreamCreateWithPriority, cuStreamCreateWithPriority, 5050, 0, GS_HOOK)                    \
    X(cuCtxSetCurrent, cuCtxSetCurrent, 4000, 0, GS_HOOK)                                          \
    X(cuCtxPushCurrent, cuCtxPushCurrent, 2000, 0, GS_HOOK)                                        \
    X(cuCtxPushCurrent, cuCtxPushCurrent_v2, 4000, 0, GS_HOOK)                                     \
    X(cuCtxDestroy, cuCtxDestroy, 2000, 0, GS_HOOK)                                                \
    X(cuCtxDestroy, cuCtxDestroy_v2, 4000, 0, GS_HOOK)                                             \
    X(cuMemAlloc, cuMemAlloc, 2000, 0, GS_HOOK)                                                    \
    X(cuMemAlloc, cuMemAlloc_v2, 3020, 0, GS_HOOK)                                                 \
    X(cuMemAllocPitch, cuMemAllocPitch, 2000, 0, GS_HOOK)                                          \
    X(cuMemAllocPitch, cuMemAllocPitch_v2, 3020, 0, GS_HOOK)                                       \
    X(cuMemAllocManaged, cuMemAllocManaged, 6000, 0, GS_HOOK)                                      \
    X(cuMemFree, cuMemFree, 2000, 0, GS_HOOK)                                                      \
    X(cuMemFree, cuMemFree_v2, 3020, 0, GS_HOOK)                                                   \
    X(cuMemAllocAsync, cuMemAllocAsync, 11020, 0, GS_HOOK)                                         \
    X(cuMemAllocAsync, cuMemAllocAsync_ptsz, 11020, 1, GS_HOOK)                                    \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync, 11020, 0, GS_HOOK)                         \
    X(cuMemAllocFromPoolAsync, cuMemAllocFromPoolAsync_ptsz, 11020, 1, GS_HOOK)                    \
    X(cuMemFreeAsync, cuMemFreeAsync, 11020, 0, GS_HOOK)                                           \
    X(cuMemFreeAsync, cuMemFreeAsync_ptsz, 11020, 1, GS_HOOK)                                      \
    X(cuMemPoolCreate, cuMemPoolCreate, 11020, 0, GS_HOOK)                                         \
    X(cuMemPoolDestroy, cuMemPoolDestroy, 11020, 0, GS_HOOK)                                       \
    X(cuMemPoolTrimTo, cuMemPoolTrimTo, 11020, 0, GS_HOOK)                                         \
    X(cuMemCreate, cuMemCreate, 10020, 0, GS_HOOK)                                                 \
    X(cuMemRelease, cuMemRelease, 10020, 0, GS_HOOK)                                               \
    X(cuMemRetainAllocationHandle, cuMemRetainAllocationHandle, 11000, 0, GS_HOOK)                 \
    X(cuMemMap, cuMemMap, 10020, 0, GS_HOOK)                                                       \
    X(cuMemUnmap, cuMemUnmap, 10020, 0, GS_HOOK)                                                   \
    X(cuArrayCreate, cuArrayCreate, 2000, 0, GS_HOOK)                                              \
    X(cuArrayCreate, cuArrayCreate_v2, 3020, 0, GS_HOOK)                                           \
    X(cuArray3DCreate, cuArray3DCreate, 2000, 0, GS_HOOK)                                          \
    X(cuArray3DCreate, cuArray3DCreate_v2, 3020, 0, GS_HOOK)                                       \
    X(cuArrayDestroy, cuArrayDestroy, 2000, 0, GS_HOOK)                                            \
    X(cuLaunchKernel, cuLaunchKernel, 4000, 0, GS_HOOK)                                            \
    X(cuLaunchKernel, cuLaunchKernel_ptsz, 7000, 1, GS_HOOK)                                       \
    X(cuLaunchKernelEx, cuLaunchKernelEx, 11060, 0, GS_HOOK)                                       \
    X(cuLaunchKernelEx, cuLaunchKernelEx_ptsz, 11060, 1, GS_HOOK)                                  \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel, 9000, 0, GS_HOOK)                      \
    X(cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz, 9000, 1, GS_HOOK)                 \
    X(cuGraphLaunch, cuGraphLaunch, 10000, 0, GS_HOOK)                                             \
    X(cuGraphLaunch, cuGraphLaunch_ptsz, 10000, 1, GS_HOOK)                                        \
    X(cuCtxSynchronize, cuCtxSynchronize, 2000, 0, GS_HOOK)                                        \
    X(cuCtxSynchronize, cuCtxSynchronize_v2, 13000, 0, GS_HOOK)                                    \
    X(cuStreamSynchronize, cuStreamSynchronize, 2000, 0, GS_HOOK)                                  \
    X(cuStreamSynchronize, cuStreamSynchronize_ptsz, 7000, 1, GS_HOOK)                             \
    X(cuStreamDestroy, cuStreamDestroy, 2000, 0, GS_HOOK)                                          \
    X(cuStreamDestroy, cuStreamDestroy_v2, 4000, 0, GS_HOOK)                                       \
    X(cuStreamBeginCapture, cuStreamBeginCapture, 10000, 0, GS_HOOK)                               \
    X(cuStreamBeginCapture, cuStreamBeginCapture_ptsz, 10000, 1, GS_HOOK)                          \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2, 10010, 0, GS_HOOK)                            \
    X(cuStreamBeginCapture, cuStreamBeginCapture_v2_ptsz, 10010, 1, GS_HOOK)                       \
    X(cuStreamEndCapture, cuStreamEndCapture, 10000, 0, GS_HOOK)                                   \
    X(cuStreamEndCapture, cuStreamEndCapture_ptsz, 10000, 1, GS_HOOK)

/* NVML: the same shape; version and ptds are unused. */
#define GS_NVML_HOOKS(X)                                                                           \
    X(nvmlInit, nvmlInit, 0, 0, GS_HOOK)                                                           \
    X(nvmlInit_v2, nvmlInit_v2, 0, 0, GS_HOOK)                                                     \
    X(nvmlInitWithFlags, nvmlInitWithFlags, 0, 0, GS_HOOK)                                         \
    X(nvmlDeviceGetMemoryInfo, nvmlDeviceGetMemoryInfo, 0, 0, GS_HOOK)                             \
    X(nvmlDeviceGetMemoryInfo_v2, nvmlDeviceGetMemoryInfo_v2, 0, 0, GS_HOOK)

#endif
