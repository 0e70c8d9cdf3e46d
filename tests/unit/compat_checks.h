/*
 * The layout facts our CUDA/NVML declarations must share with the real
 * headers, as X(label, value). Expanded once against ours (compat_ours.c) and
 * once against the real headers (compat_real.c); test_api_compat compares.
 */
#define GS_COMPAT_CUDA(X)                                                                          \
    X("sizeof CUresult", sizeof(CUresult))                                                         \
    X("sizeof CUdeviceptr", sizeof(CUdeviceptr))                                                   \
    X("sizeof CUdeviceptr_v1", sizeof(CUdeviceptr_v1))                                             \
    X("sizeof CUuuid", sizeof(CUuuid))                                                             \
    X("sizeof CUmemAllocationProp", sizeof(CUmemAllocationProp))                                   \
    X("off CUmemAllocationProp.location", offsetof(CUmemAllocationProp, location))                 \
    X("off CUmemAllocationProp.allocFlags", offsetof(CUmemAllocationProp, allocFlags))             \
    X("sizeof CUmemPoolProps", sizeof(CUmemPoolProps))                                             \
    X("off CUmemPoolProps.location", offsetof(CUmemPoolProps, location))                           \
    X("off CUmemPoolProps.maxSize", offsetof(CUmemPoolProps, maxSize))                             \
    X("sizeof CUmemAccessDesc", sizeof(CUmemAccessDesc))                                           \
    X("sizeof CUDA_ARRAY_DESCRIPTOR", sizeof(CUDA_ARRAY_DESCRIPTOR))                               \
    X("off CUDA_ARRAY_DESCRIPTOR.Format", offsetof(CUDA_ARRAY_DESCRIPTOR, Format))                 \
    X("sizeof CUDA_ARRAY3D_DESCRIPTOR", sizeof(CUDA_ARRAY3D_DESCRIPTOR))                           \
    X("off CUDA_ARRAY3D_DESCRIPTOR.Flags", offsetof(CUDA_ARRAY3D_DESCRIPTOR, Flags))               \
    X("sizeof CUDA_ARRAY_DESCRIPTOR_v1", sizeof(CUDA_ARRAY_DESCRIPTOR_v1))                         \
    X("sizeof CUDA_ARRAY3D_DESCRIPTOR_v1", sizeof(CUDA_ARRAY3D_DESCRIPTOR_v1))                     \
    X("sizeof CUexecAffinityParam", sizeof(CUexecAffinityParam))                                   \
    X("sizeof CUctxCreateParams", sizeof(CUctxCreateParams))                                       \
    X("off CUctxCreateParams.cigParams", offsetof(CUctxCreateParams, cigParams))                   \
    X("sizeof CUlaunchAttributeValue", sizeof(CUlaunchAttributeValue))                             \
    X("sizeof CUlaunchAttribute", sizeof(CUlaunchAttribute))                                       \
    X("off CUlaunchAttribute.value", offsetof(CUlaunchAttribute, value))                           \
    X("sizeof CUlaunchConfig", sizeof(CUlaunchConfig))                                             \
    X("off CUlaunchConfig.hStream", offsetof(CUlaunchConfig, hStream))                             \
    X("off CUlaunchConfig.numAttrs", offsetof(CUlaunchConfig, numAttrs))                           \
    X("sizeof CUDA_KERNEL_NODE_PARAMS", sizeof(CUDA_KERNEL_NODE_PARAMS))                           \
    X("off CUDA_KERNEL_NODE_PARAMS.ctx", offsetof(CUDA_KERNEL_NODE_PARAMS, ctx))                   \
    X("sizeof CUDA_KERNEL_NODE_PARAMS_v1", sizeof(CUDA_KERNEL_NODE_PARAMS_v1))                     \
    X("sizeof CUdevResource", sizeof(CUdevResource))                                               \
    X("off CUdevResource.sm", offsetof(CUdevResource, sm))                                         \
    X("off CUdevResource.sm.minSmPartitionSize", offsetof(CUdevResource, sm.minSmPartitionSize))   \
    X("off CUdevResource.sm.smCoscheduledAlignment",                                               \
      offsetof(CUdevResource, sm.smCoscheduledAlignment))                                          \
    X("CU_DEV_RESOURCE_TYPE_SM", CU_DEV_RESOURCE_TYPE_SM)                                          \
    X("CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING",                                           \
      CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING)                                             \
    X("CUDA_ERROR_OUT_OF_MEMORY", CUDA_ERROR_OUT_OF_MEMORY)                                        \
    X("CUDA_ERROR_NOT_INITIALIZED", CUDA_ERROR_NOT_INITIALIZED)                                    \
    X("CUDA_ERROR_INVALID_CONTEXT", CUDA_ERROR_INVALID_CONTEXT)                                    \
    X("CUDA_ERROR_NOT_FOUND", CUDA_ERROR_NOT_FOUND)                                                \
    X("CUDA_ERROR_NOT_READY", CUDA_ERROR_NOT_READY)                                                \
    X("CUDA_ERROR_NOT_SUPPORTED", CUDA_ERROR_NOT_SUPPORTED)                                        \
    X("CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED)              \
    X("CUDA_ERROR_UNKNOWN", CUDA_ERROR_UNKNOWN)                                                    \
    X("CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT", CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)        \
    X("CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR",                                              \
      CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)                                                \
    X("CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED", CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED)    \
    X("CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",                                   \
      CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)                                     \
    X("CU_MEMPOOL_ATTR_RELEASE_THRESHOLD", CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)                      \
    X("CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT", CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)                \
    X("CU_MEMPOOL_ATTR_USED_MEM_CURRENT", CU_MEMPOOL_ATTR_USED_MEM_CURRENT)                        \
    X("CU_MEMPOOL_ATTR_USED_MEM_HIGH", CU_MEMPOOL_ATTR_USED_MEM_HIGH)                              \
    X("CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM",                                             \
      CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)                                               \
    X("CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT", CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT)    \
    X("CU_LAUNCH_ATTRIBUTE_COOPERATIVE", CU_LAUNCH_ATTRIBUTE_COOPERATIVE)                          \
    X("CU_STREAM_CAPTURE_MODE_RELAXED", CU_STREAM_CAPTURE_MODE_RELAXED)                            \
    X("CU_AD_FORMAT_HALF", CU_AD_FORMAT_HALF)                                                      \
    X("CU_MEM_ALLOCATION_TYPE_PINNED", CU_MEM_ALLOCATION_TYPE_PINNED)                              \
    X("CU_MEM_LOCATION_TYPE_DEVICE", CU_MEM_LOCATION_TYPE_DEVICE)                                  \
    X("CU_MEM_ACCESS_FLAGS_PROT_READWRITE", CU_MEM_ACCESS_FLAGS_PROT_READWRITE)                    \
    X("CU_STREAM_PER_THREAD", (uintptr_t)CU_STREAM_PER_THREAD)                                     \
    X("CU_STREAM_LEGACY", (uintptr_t)CU_STREAM_LEGACY)

#define GS_COMPAT_NVML(X)                                                                          \
    X("sizeof nvmlMemory_t", sizeof(nvmlMemory_t))                                                 \
    X("sizeof nvmlMemory_v2_t", sizeof(nvmlMemory_v2_t))                                           \
    X("off nvmlMemory_v2_t.used", offsetof(nvmlMemory_v2_t, used))                                 \
    X("nvmlMemory_v2", nvmlMemory_v2)                                                              \
    X("sizeof nvmlDeviceAttributes_t", sizeof(nvmlDeviceAttributes_t))                             \
    X("off nvmlDeviceAttributes_t.memorySizeMB", offsetof(nvmlDeviceAttributes_t, memorySizeMB))   \
    X("sizeof nvmlProcessInfo_t", sizeof(nvmlProcessInfo_t))                                       \
    X("sizeof nvmlProcessInfo_v1_t", sizeof(nvmlProcessInfo_v1_t))                                 \
    X("sizeof nvmlProcessUtilizationSample_t", sizeof(nvmlProcessUtilizationSample_t))             \
    X("NVML_ERROR_INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE)                                \
    X("NVML_ERROR_ARGUMENT_VERSION_MISMATCH", NVML_ERROR_ARGUMENT_VERSION_MISMATCH)                \
    X("NVML_ERROR_UNKNOWN", NVML_ERROR_UNKNOWN)

struct gs_compat_fact {
    const char *label;
    unsigned long long value;
};
