/*
 * The list of CUDA driver functions gpuslice declares, written once. It names
 * types only, so it expands against our declarations (cuda_api.h) and, in the
 * compatibility test, against the real cuda.h.
 */
#ifndef GPUSLICE_CUDA_FUNCS_H
#define GPUSLICE_CUDA_FUNCS_H

/*
 * Function types. GS_CUDA_FUNCS(X) lists every driver function gpuslice or
 * the simulator declares, as X(return, symbol, (parameters)). The symbol is
 * the exported name, with its version or stream suffix.
 */
#define GS_CUDA_FUNCS(X)                                                                           \
    X(CUresult, cuInit, (unsigned int Flags))                                                      \
    X(CUresult, cuDriverGetVersion, (int *driverVersion))                                          \
    X(CUresult, cuGetErrorString, (CUresult error, const char **pStr))                             \
    X(CUresult, cuGetErrorName, (CUresult error, const char **pStr))                               \
    X(CUresult, cuGetProcAddress,                                                                  \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags))                         \
    X(CUresult, cuGetProcAddress_v2,                                                               \
      (const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,                          \
       CUdriverProcAddressQueryResult *symbolStatus))                                              \
    X(CUresult, cuDeviceGet, (CUdevice * device, int ordinal))                                     \
    X(CUresult, cuDeviceGetCount, (int *count))                                                    \
    X(CUresult, cuDeviceGetName, (char *name, int len, CUdevice dev))                              \
    X(CUresult, cuDeviceGetUuid, (CUuuid * uuid, CUdevice dev))                                    \
    X(CUresult, cuDeviceGetUuid_v2, (CUuuid * uuid, CUdevice dev))                                 \
    X(CUresult, cuDeviceTotalMem, (unsigned int *bytes, CUdevice dev))                             \
    X(CUresult, cuDeviceTotalMem_v2, (size_t * bytes, CUdevice dev))                               \
    X(CUresult, cuDeviceGetAttribute, (int *pi, CUdevice_attribute attrib, CUdevice dev))          \
    X(CUresult, cuDeviceGetPCIBusId, (char *pciBusId, int len, CUdevice dev))                      \
    X(CUresult, cuDeviceGetDevResource,                                                            \
      (CUdevice device, CUdevResource * resource, CUdevResourceType type))                         \
    X(CUresult, cuDevSmResourceSplitByCount,                                                       \
      (CUdevResource * result, unsigned int *nbGroups, const CUdevResource *input,                 \
       CUdevResource *remaining, unsigned int useFlags, unsigned int minCount))                    \
    X(CUresult, cuDevResourceGenerateDesc,                                                         \
      (CUdevResourceDesc * phDesc, CUdevResource * resources, unsigned int nbResources))           \
    X(CUresult, cuGreenCtxCreate,                                                                  \
      (CUgreenCtx * phCtx, CUdevResourceDesc desc, CUdevice dev, unsigned int flags))              \
    X(CUresult, cuGreenCtxDestroy, (CUgreenCtx hCtx))                                              \
    X(CUresult, cuCtxFromGreenCtx, (CUcontext * pContext, CUgreenCtx hCtx))                        \
    X(CUresult, cuGreenCtxGetDevResource,                                                          \
      (CUgreenCtx hCtx, CUdevResource * resource, CUdevResourceType type))                         \
    X(CUresult, cuCtxGetDevResource,                                                               \
      (CUcontext hCtx, CUdevResource * resource, CUdevResourceType type))                          \
    X(CUresult, cuDeviceGetDefaultMemPool, (CUmemoryPool * pool_out, CUdevice dev))                \
    X(CUresult, cuDeviceGetMemPool, (CUmemoryPool * pool, CUdevice dev))                           \
    X(CUresult, cuDeviceSetMemPool, (CUdevice dev, CUmemoryPool pool))                             \
    X(CUresult, cuDevicePrimaryCtxRetain, (CUcontext * pctx, CUdevice dev))                        \
    X(CUresult, cuDevicePrimaryCtxRelease, (CUdevice dev))                                         \
    X(CUresult, cuDevicePrimaryCtxRelease_v2, (CUdevice dev))                                      \
    X(CUresult, cuDevicePrimaryCtxReset, (CUdevice dev))                                           \
    X(CUresult, cuDevicePrimaryCtxReset_v2, (CUdevice dev))                                        \
    X(CUresult, cuDevicePrimaryCtxGetState, (CUdevice dev, unsigned int *flags, int *active))      \
    X(CUresult, cuDevicePrimaryCtxSetFlags, (CUdevice dev, unsigned int flags))                    \
    X(CUresult, cuDevicePrimaryCtxSetFlags_v2, (CUdevice dev, unsigned int flags))                 \
    X(CUresult, cuCtxCreate, (CUcontext * pctx, unsigned int flags, CUdevice dev))                 \
    X(CUresult, cuCtxCreate_v2, (CUcontext * pctx, unsigned int flags, CUdevice dev))              \
    X(CUresult, cuCtxCreate_v3,                                                                    \
      (CUcontext * pctx, CUexecAffinityParam * paramsArray, int numParams, unsigned int flags,     \
       CUdevice dev))                                                                              \
    X(CUresult, cuCtxCreate_v4,                                                                    \
      (CUcontext * pctx, CUctxCreateParams * ctxCreateParams, unsigned int flags, CUdevice dev))   \
    X(CUresult, cuCtxDestroy, (CUcontext ctx))                                                     \
    X(CUresult, cuCtxDestroy_v2, (CUcontext ctx))                                                  \
    X(CUresult, cuCtxGetCurrent, (CUcontext * pctx))                                               \
    X(CUresult, cuCtxSetCurrent, (CUcontext ctx))                                                  \
    X(CUresult, cuCtxPushCurrent, (CUcontext ctx))                                                 \
    X(CUresult, cuCtxPushCurrent_v2, (CUcontext ctx))                                              \
    X(CUresult, cuCtxPopCurrent, (CUcontext * pctx))                                               \
    X(CUresult, cuCtxPopCurrent_v2, (CUcontext * pctx))                                            \
    X(CUresult, cuCtxGetDevice, (CUdevice * device))                                               \
    X(CUresult, cuCtxSynchronize, (void))                                                          \
    X(CUresult, cuCtxSynchronize_v2, (CUcontext ctx))                                              \
    X(CUresult, cuMemGetInfo, (unsigned int *free, unsigned int *total))                           \
    X(CUresult, cuMemGetInfo_v2, (size_t * free, size_t * total))                                  \
    X(CUresult, cuMemAlloc, (CUdeviceptr_v1 * dptr, unsigned int bytesize))                        \
    X(CUresult, cuMemAlloc_v2, (CUdeviceptr * dptr, size_t bytesize))                              \
    X(CUresult, cuMemAllocPitch,                                                                   \
      (CUdeviceptr_v1 * dptr, unsigned int *pPitch, unsigned int WidthInBytes,                     \
       unsigned int Height, unsigned int ElementSizeBytes))                                        \
    X(CUresult, cuMemAllocPitch_v2,                                                                \
      (CUdeviceptr * dptr, size_t * pPitch, size_t WidthInBytes, size_t Height,                    \
       unsigned int ElementSizeBytes))                                                             \
    X(CUresult, cuMemAllocManaged, (CUdeviceptr * dptr, size_t bytesize, unsigned int flags))      \
    X(CUresult, cuMemFree, (CUdeviceptr_v1 dptr))                                                  \
    X(CUresult, cuMemFree_v2, (CUdeviceptr dptr))                                                  \
    X(CUresult, cuMemGetAddressRange_v2, (CUdeviceptr * pbase, size_t * psize, CUdeviceptr dptr))  \
    X(CUresult, cuMemAllocAsync, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))          \
    X(CUresult, cuMemAllocAsync_ptsz, (CUdeviceptr * dptr, size_t bytesize, CUstream hStream))     \
    X(CUresult, cuMemAllocFromPoolAsync,                                                           \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream))                  \
    X(CUresult, cuMemAllocFromPoolAsync_ptsz,                                                      \
      (CUdeviceptr * dptr, size_t bytesize, CUmemoryPool pool, CUstream hStream))                  \
    X(CUresult, cuMemFreeAsync, (CUdeviceptr dptr, CUstream hStream))                              \
    X(CUresult, cuMemFreeAsync_ptsz, (CUdeviceptr dptr, CUstream hStream))                         \
    X(CUresult, cuMemPoolCreate, (CUmemoryPool * pool, const CUmemPoolProps *poolProps))           \
    X(CUresult, cuMemPoolDestroy, (CUmemoryPool pool))                                             \
    X(CUresult, cuMemPoolTrimTo, (CUmemoryPool pool, size_t minBytesToKeep))                       \
    X(CUresult, cuMemPoolGetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value)) \
    X(CUresult, cuMemPoolSetAttribute, (CUmemoryPool pool, CUmemPool_attribute attr, void *value)) \
    X(CUresult, cuMemGetAllocationGranularity,                                                     \
      (size_t * granularity, const CUmemAllocationProp *prop,                                      \
       CUmemAllocationGranularity_flags option))                                                   \
    X(CUresult, cuMemCreate,                                                                       \
      (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp *prop,        \
       unsigned long long flags))                                                                  \
    X(CUresult, cuMemRelease, (CUmemGenericAllocationHandle handle))                               \
    X(CUresult, cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle * handle, void *addr))  \
    X(CUresult, cuMemAddressReserve,                                                               \
      (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                         \
       unsigned long long flags))                                                                  \
    X(CUresult, cuMemAddressFree, (CUdeviceptr ptr, size_t size))                                  \
    X(CUresult, cuMemMap,                                                                          \
      (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,           \
       unsigned long long flags))                                                                  \
    X(CUresult, cuMemUnmap, (CUdeviceptr ptr, size_t size))                                        \
    X(CUresult, cuMemSetAccess,                                                                    \
      (CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count))                   \
    X(CUresult, cuArrayCreate,                                                                     \
      (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray))                         \
    X(CUresult, cuArrayCreate_v2,                                                                  \
      (CUarray * pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray))                            \
    X(CUresult, cuArray3DCreate,                                                                   \
      (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray))                       \
    X(CUresult, cuArray3DCreate_v2,                                                                \
      (CUarray * pHandle, const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray))                          \
    X(CUresult, cuArrayDestroy, (CUarray hArray))                                                  \
    X(CUresult, cuMemcpyHtoD_v2, (CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount))   \
    X(CUresult, cuMemcpyDtoH_v2, (void *dstHost, CUdeviceptr srcDevice, size_t ByteCount))         \
    X(CUresult, cuMemsetD8_v2, (CUdeviceptr dstDevice, unsigned char uc, size_t N))                \
    X(CUresult, cuModuleLoad, (CUmodule * module, const char *fname))                              \
    X(CUresult, cuModuleLoadData, (CUmodule * module, const void *image))                          \
    X(CUresult, cuModuleUnload, (CUmodule hmod))                                                   \
    X(CUresult, cuModuleGetFunction, (CUfunction * hfunc, CUmodule hmod, const char *name))        \
    X(CUresult, cuLaunchKernel,                                                                    \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                     \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra))          \
    X(CUresult, cuLaunchKernel_ptsz,                                                               \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                     \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams, void **extra))          \
    X(CUresult, cuLaunchKernelEx,                                                                  \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra))             \
    X(CUresult, cuLaunchKernelEx_ptsz,                                                             \
      (const CUlaunchConfig *config, CUfunction f, void **kernelParams, void **extra))             \
    X(CUresult, cuLaunchCooperativeKernel,                                                         \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                     \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams))                        \
    X(CUresult, cuLaunchCooperativeKernel_ptsz,                                                    \
      (CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,          \
       unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                     \
       unsigned int sharedMemBytes, CUstream hStream, void **kernelParams))                        \
    X(CUresult, cuStreamCreate, (CUstream * phStream, unsigned int Flags))                         \
    X(CUresult, cuStreamCreateWithPriority,                                                        \
      (CUstream * phStream, unsigned int flags, int priority))                                     \
    X(CUresult, cuStreamDestroy, (CUstream hStream))                                               \
    X(CUresult, cuStreamDestroy_v2, (CUstream hStream))                                            \
    X(CUresult, cuStreamSynchronize, (CUstream hStream))                                           \
    X(CUresult, cuStreamSynchronize_ptsz, (CUstream hStream))                                      \
    X(CUresult, cuStreamGetCtx, (CUstream hStream, CUcontext * pctx))                              \
    X(CUresult, cuStreamQuery, (CUstream hStream))                                                 \
    X(CUresult, cuStreamQuery_ptsz, (CUstream hStream))                                            \
    X(CUresult, cuStreamBeginCapture, (CUstream hStream))                                          \
    X(CUresult, cuStreamBeginCapture_v2, (CUstream hStream, CUstreamCaptureMode mode))             \
    X(CUresult, cuStreamBeginCapture_ptsz, (CUstream hStream))                                     \
    X(CUresult, cuStreamBeginCapture_v2_ptsz, (CUstream hStream, CUstreamCaptureMode mode))        \
    X(CUresult, cuStreamEndCapture, (CUstream hStream, CUgraph * phGraph))                         \
    X(CUresult, cuStreamEndCapture_ptsz, (CUstream hStream, CUgraph * phGraph))                    \
    X(CUresult, cuStreamIsCapturing, (CUstream hStream, CUstreamCaptureStatus * captureStatus))    \
    X(CUresult, cuStreamIsCapturing_ptsz,                                                          \
      (CUstream hStream, CUstreamCaptureStatus * captureStatus))                                   \
    X(CUresult, cuStreamWaitEvent, (CUstream hStream, CUevent hEvent, unsigned int Flags))         \
    X(CUresult, cuGreenCtxStreamCreate,                                                            \
      (CUstream * phStream, CUgreenCtx greenCtx, unsigned int flags, int priority))                \
    X(CUresult, cuEventCreate, (CUevent * phEvent, unsigned int Flags))                            \
    X(CUresult, cuEventRecord, (CUevent hEvent, CUstream hStream))                                 \
    X(CUresult, cuEventRecord_ptsz, (CUevent hEvent, CUstream hStream))                            \
    X(CUresult, cuEventQuery, (CUevent hEvent))                                                    \
    X(CUresult, cuEventSynchronize, (CUevent hEvent))                                              \
    X(CUresult, cuEventElapsedTime, (float *pMilliseconds, CUevent hStart, CUevent hEnd))          \
    X(CUresult, cuEventElapsedTime_v2, (float *pMilliseconds, CUevent hStart, CUevent hEnd))       \
    X(CUresult, cuEventDestroy, (CUevent hEvent))                                                  \
    X(CUresult, cuEventDestroy_v2, (CUevent hEvent))                                               \
    X(CUresult, cuGraphCreate, (CUgraph * phGraph, unsigned int flags))                            \
    X(CUresult, cuGraphDestroy, (CUgraph hGraph))                                                  \
    X(CUresult, cuGraphAddKernelNode,                                                              \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                 \
       size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams))                      \
    X(CUresult, cuGraphAddKernelNode_v2,                                                           \
      (CUgraphNode * phGraphNode, CUgraph hGraph, const CUgraphNode *dependencies,                 \
       size_t numDependencies, const CUDA_KERNEL_NODE_PARAMS *nodeParams))                         \
    X(CUresult, cuGraphInstantiateWithFlags,                                                       \
      (CUgraphExec * phGraphExec, CUgraph hGraph, unsigned long long flags))                       \
    X(CUresult, cuGraphExecDestroy, (CUgraphExec hGraphExec))                                      \
    X(CUresult, cuGraphLaunch, (CUgraphExec hGraphExec, CUstream hStream))                         \
    X(CUresult, cuGraphLaunch_ptsz, (CUgraphExec hGraphExec, CUstream hStream))

#endif /* GPUSLICE_CUDA_FUNCS_H */
