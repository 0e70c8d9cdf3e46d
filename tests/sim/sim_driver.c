/*
 * The simulated driver's front door: cuInit and what it sets up (the state
 * file, CUDA_VISIBLE_DEVICES), error names, versions, device queries, and
 * cuGetProcAddress with the table that maps each API name and version to the
 * function the real CUDA 13 driver returns (and, with
 * GPUSLICE_SIM_PROCADDR=unexported, to trampolines no dlsym gives). Also the
 * fork and exit handling of the process-local state.
 */
#define _GNU_SOURCE
#include "sim_cuda.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>

struct sim_driver sim_drv = { .lock = PTHREAD_MUTEX_INITIALIZER };
__thread struct sim_tls sim_tls;

/* What a forked child inherited: kept reachable, never used (see on_fork_child). */
static struct sim_driver forked_parent;

CUresult sim_enter(void)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&sim_drv.lock);
    if (sim_drv.npending)
        sim_frees_due(sim_now_ns());
    return CUDA_SUCCESS;
}

void sim_leave(void)
{
    pthread_mutex_unlock(&sim_drv.lock);
}

CUresult sim_enter_ctx(struct CUctx_st **ctx)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    c = sim_tls.depth > 0 ? sim_tls.stack[sim_tls.depth - 1] : NULL;
    if (!c) {
        sim_leave();
        return CUDA_ERROR_INVALID_CONTEXT;
    }
    if ((r = sim_ctx_usable(c)) != CUDA_SUCCESS) {
        sim_leave();
        return r;
    }
    *ctx = sim_ctx_base(c); /* a green context's memory, streams and modules are its primary's */
    return CUDA_SUCCESS;
}

CUresult sim_check_device(CUdevice dev)
{
    return dev >= 0 && (uint32_t)dev < sim_drv.cfg.devices ? CUDA_SUCCESS
                                                           : CUDA_ERROR_INVALID_DEVICE;
}

/* ---- init ------------------------------------------------------------- */

static void init_primary(int dev)
{
    struct CUctx_st *c = &sim_drv.primary[dev];

    memset(c, 0, sizeof(*c));
    c->id = ++sim_drv.next_id;
    c->dev = dev;
    c->primary = 1;
    c->legacy.ctx = c;
    c->legacy.kind = SIM_STREAM_LEGACY;
}

/*
 * CUDA_VISIBLE_DEVICES, as the CUDA API reads it (NVML ignores it, as the
 * real NVML does): CUDA ordinals become the listed devices of the state file.
 * Returns how many are visible.
 */
static uint32_t apply_visible_devices(void)
{
    sim_drv.phys_devices = sim_drv.cfg.devices;
    sim_drv.cfg.devices = (uint32_t)sim_visible_devices(getenv("CUDA_VISIBLE_DEVICES"),
                                                        sim_drv.phys_devices, sim_drv.phys);
    return sim_drv.cfg.devices;
}

SIM_EXPORT CUresult cuInit(unsigned int Flags)
{
    CUresult r;

    if (Flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_drv.lock);
    if (!sim_drv.init_tried) {
        sim_drv.init_tried = 1;
        sim_state_close(&sim_drv.st);
        if (sim_config_load(&sim_drv.cfg) < 0) {
            sim_drv.init_result = CUDA_ERROR_INVALID_VALUE;
        } else if (sim_state_open(&sim_drv.cfg, &sim_drv.st) < 0) {
            sim_drv.init_result = CUDA_ERROR_OPERATING_SYSTEM;
        } else if (!apply_visible_devices()) {
            sim_drv.init_result = CUDA_ERROR_NO_DEVICE; /* as CUDA: cuInit fails */
        } else {
            for (uint32_t d = 0; d < sim_drv.cfg.devices; d++)
                init_primary((int)d);
            if (sim_mem_init_pools() < 0) {
                sim_drv.init_result = CUDA_ERROR_OUT_OF_MEMORY;
            } else {
                sim_drv.init_result = CUDA_SUCCESS;
                __atomic_store_n(&sim_drv.ready, 1, __ATOMIC_RELEASE);
            }
        }
    }
    r = sim_drv.init_result;
    pthread_mutex_unlock(&sim_drv.lock);
    return r;
}

/*
 * The real driver refuses CUDA in a child forked after cuInit; the simulator
 * lets the child start afresh instead, so tests may fork freely. The parent's
 * objects stay reachable in forked_parent and are never touched again.
 */
static void on_fork_prepare(void)
{
    pthread_mutex_lock(&sim_drv.lock);
}

static void on_fork_parent(void)
{
    pthread_mutex_unlock(&sim_drv.lock);
}

static void on_fork_child(void)
{
    struct sim_shared *sh = sim_drv.st.sh;
    int fd = sim_drv.st.fd;

    forked_parent = sim_drv;
    memset(&sim_drv, 0, sizeof(sim_drv));
    pthread_mutex_init(&sim_drv.lock, NULL);
    /* Unmapped and closed by the next cuInit, which opens the file afresh. */
    sim_drv.st.sh = sh;
    sim_drv.st.fd = fd;
    sim_drv.st.slot = -1;
    memset(&sim_tls, 0, sizeof(sim_tls));
}

__attribute__((constructor)) static void sim_driver_load(void)
{
    pthread_atfork(on_fork_prepare, on_fork_parent, on_fork_child);
}

/*
 * Like the real driver, what a process held is freed when it ends: at once, or
 * with GPUSLICE_SIM_EXIT_FREE_MS set that long after its death is seen.
 */
__attribute__((destructor)) static void sim_driver_unload(void)
{
    if (sim_ready() && sim_drv.st.exit_free_ms == 0)
        sim_state_release_self(&sim_drv.st);
}

SIM_EXPORT CUresult cuDriverGetVersion(int *driverVersion)
{
    if (!driverVersion || sim_cuda_version(driverVersion) < 0)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* ---- errors ----------------------------------------------------------- */

#define SIM_ERRORS(X)                                                                              \
    X(CUDA_SUCCESS, "no error")                                                                    \
    X(CUDA_ERROR_INVALID_VALUE, "invalid argument")                                                \
    X(CUDA_ERROR_OUT_OF_MEMORY, "out of memory")                                                   \
    X(CUDA_ERROR_NOT_INITIALIZED, "initialization error")                                          \
    X(CUDA_ERROR_DEINITIALIZED, "driver shutting down")                                            \
    X(CUDA_ERROR_NO_DEVICE, "no CUDA-capable device is detected")                                  \
    X(CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal")                                         \
    X(CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid")                                  \
    X(CUDA_ERROR_INVALID_CONTEXT, "invalid device context")                                        \
    X(CUDA_ERROR_CONTEXT_ALREADY_IN_USE, "context already in use")                                 \
    X(CUDA_ERROR_FILE_NOT_FOUND, "file not found")                                                 \
    X(CUDA_ERROR_OPERATING_SYSTEM, "OS call failed or operation not supported on this OS")         \
    X(CUDA_ERROR_INVALID_HANDLE, "invalid resource handle")                                        \
    X(CUDA_ERROR_ILLEGAL_STATE, "the operation cannot be performed in the present state")          \
    X(CUDA_ERROR_NOT_FOUND, "named symbol not found")                                              \
    X(CUDA_ERROR_NOT_READY, "device not ready")                                                    \
    X(CUDA_ERROR_ILLEGAL_ADDRESS, "an illegal memory access was encountered")                      \
    X(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, "too many resources requested for launch")               \
    X(CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "primary context active")                                 \
    X(CUDA_ERROR_CONTEXT_IS_DESTROYED, "context is destroyed")                                     \
    X(CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "too many blocks in cooperative launch")            \
    X(CUDA_ERROR_NOT_PERMITTED, "operation not permitted")                                         \
    X(CUDA_ERROR_NOT_SUPPORTED, "operation not supported")                                         \
    X(CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "operation not permitted when stream is capturing")   \
    X(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED,                                                       \
      "operation failed due to a previous error during capture")                                   \
    X(CUDA_ERROR_STREAM_CAPTURE_UNMATCHED, "capture was not initiated in this stream")             \
    X(CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,                                                          \
      "operation would make the legacy stream depend on a capturing blocking stream")              \
    X(CUDA_ERROR_CAPTURED_EVENT,                                                                   \
      "operation not permitted on an event last recorded in a capturing stream")                   \
    X(CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD,                                                      \
      "attempt to terminate a thread-local capture sequence from another thread")                  \
    X(CUDA_ERROR_INVALID_CLUSTER_SIZE, "invalid cluster size")                                     \
    X(CUDA_ERROR_INVALID_RESOURCE_TYPE, "invalid resource type")                                   \
    X(CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION, "invalid resource configuration")                 \
    X(CUDA_ERROR_UNKNOWN, "unknown error")

SIM_EXPORT CUresult cuGetErrorString(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)error) {
#define SIM_ERROR_STRING(code, text)                                                               \
    case code:                                                                                     \
        *pStr = text;                                                                              \
        return CUDA_SUCCESS;
        SIM_ERRORS(SIM_ERROR_STRING)
#undef SIM_ERROR_STRING
    default:
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
}

SIM_EXPORT CUresult cuGetErrorName(CUresult error, const char **pStr)
{
    if (!pStr)
        return CUDA_ERROR_INVALID_VALUE;
    switch ((int)error) {
#define SIM_ERROR_NAME(code, text)                                                                 \
    case code:                                                                                     \
        *pStr = #code;                                                                             \
        return CUDA_SUCCESS;
        SIM_ERRORS(SIM_ERROR_NAME)
#undef SIM_ERROR_NAME
    default:
        *pStr = NULL;
        return CUDA_ERROR_INVALID_VALUE;
    }
}

/* ---- devices ---------------------------------------------------------- */

SIM_EXPORT CUresult cuDeviceGetCount(int *count)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!count)
        return CUDA_ERROR_INVALID_VALUE;
    *count = (int)sim_drv.cfg.devices;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!device)
        return CUDA_ERROR_INVALID_VALUE;
    if (sim_check_device(ordinal) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

/* Device queries read only what cuInit fixed, so they take no lock. */
static CUresult device_query(CUdevice dev, const void *out)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    return sim_check_device(dev);
}

SIM_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev)
{
    CUresult r = device_query(dev, name);

    if (r != CUDA_SUCCESS)
        return r;
    if (len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(name, (size_t)len, "%s", SIM_DEVICE_NAME);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev)
{
    CUresult r = device_query(dev, uuid);

    if (r == CUDA_SUCCESS)
        sim_uuid_bytes(sim_phys(dev), (unsigned char *)uuid->bytes);
    return r;
}

SIM_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev)
{
    return cuDeviceGetUuid(uuid, dev);
}

SIM_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r = device_query(dev, bytes);

    if (r == CUDA_SUCCESS)
        *bytes = (size_t)sim_drv.cfg.memory;
    return r;
}

/* The 32-bit legacy call cannot say more than 4 GiB - 1. */
SIM_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CUresult r = device_query(dev, bytes);

    if (r == CUDA_SUCCESS)
        *bytes = sim_drv.cfg.memory > UINT32_MAX ? UINT32_MAX : (unsigned int)sim_drv.cfg.memory;
    return r;
}

/* An H100/H200-like device; attributes not listed read 0, as absent features do. */
static int attribute_value(int attrib, CUdevice dev)
{
    switch (attrib) {
    case 1:
        return 1024; /* MAX_THREADS_PER_BLOCK */
    case 2:
    case 3:
        return 1024; /* MAX_BLOCK_DIM_X, Y */
    case 4:
        return 64; /* MAX_BLOCK_DIM_Z */
    case 5:
        return 2147483647; /* MAX_GRID_DIM_X */
    case 6:
    case 7:
        return 65535;
    case 8:
        return 49152; /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 9:
        return 65536; /* TOTAL_CONSTANT_MEMORY */
    case 10:
        return 32; /* WARP_SIZE */
    case 11:
        return 2147483647; /* MAX_PITCH */
    case 12:
        return 65536; /* MAX_REGISTERS_PER_BLOCK */
    case 13:
        return 1980000; /* CLOCK_RATE, kHz */
    case 14:
        return 512; /* TEXTURE_ALIGNMENT */
    case 15:
        return 1; /* GPU_OVERLAP */
    case 16:
        return (int)sim_drv.cfg.sms;
    case 19:
        return 1; /* CAN_MAP_HOST_MEMORY */
    case 30:
        return 512; /* SURFACE_ALIGNMENT */
    case 31:
        return 1; /* CONCURRENT_KERNELS */
    case 33:
        return 0x18 + sim_phys(dev); /* PCI_BUS_ID, as cuDeviceGetPCIBusId says */
    case 36:
        return 2619000; /* MEMORY_CLOCK_RATE */
    case 37:
        return 6144; /* GLOBAL_MEMORY_BUS_WIDTH */
    case 38:
        return 52428800; /* L2_CACHE_SIZE */
    case 39:
        return 2048; /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 40:
        return 3; /* ASYNC_ENGINE_COUNT */
    case 41:
        return 1; /* UNIFIED_ADDRESSING */
    case 51:
        return 32; /* TEXTURE_PITCH_ALIGNMENT */
    case 75:
        return (int)sim_drv.cfg.cc_major;
    case 76:
        return (int)sim_drv.cfg.cc_minor;
    case 78:
    case 79:
    case 80:
        return 1; /* stream priorities, L1 caches */
    case 81:
        return 233472; /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
    case 82:
        return 65536; /* MAX_REGISTERS_PER_MULTIPROCESSOR */
    case 83:
        return 1; /* MANAGED_MEMORY */
    case 89:
    case 90:
        return 1; /* CONCURRENT_MANAGED_ACCESS, COMPUTE_PREEMPTION */
    case 95:
        return 1; /* COOPERATIVE_LAUNCH */
    case 97:
        return 232448; /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 102:
        return 1; /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    case 103:
        return 1; /* HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED */
    case 106:
        return 32; /* MAX_BLOCKS_PER_MULTIPROCESSOR */
    case 115:
        return 1; /* MEMORY_POOLS_SUPPORTED */
    case 119:
        return 1; /* MEMPOOL_SUPPORTED_HANDLE_TYPES: POSIX fd */
    case 120:
        return 1; /* CLUSTER_LAUNCH */
    default:
        return 0;
    }
}

SIM_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    CUresult r = device_query(dev, pi);

    if (r != CUDA_SUCCESS)
        return r;
    if ((int)attrib < 1 || (int)attrib > 147) /* CU_DEVICE_ATTRIBUTE_MAX - 1 in CUDA 13.0 */
        return CUDA_ERROR_INVALID_VALUE;
    *pi = attribute_value((int)attrib, dev);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev)
{
    CUresult r = device_query(dev, pciBusId);

    if (r != CUDA_SUCCESS)
        return r;
    if (len <= 0)
        return CUDA_ERROR_INVALID_VALUE;
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", 0x18 + sim_phys(dev));
    return CUDA_SUCCESS;
}

/* ---- cuGetProcAddress --------------------------------------------------- */

/*
 * (API name, exported symbol, first CUDA version it answers for, per-thread
 * default stream variant?), from the PFN_<name>_v<version>[_ptsz|_ptds] types
 * of CUDA 13.0's cudaTypedefs.h and the #defines of its cuda.h. The test
 * test_sim_procaddr checks every exported symbol is reachable from here, and
 * that the answers are those of every "getproc" line h200-driver-facts.txt
 * recorded on an H200.
 */
struct proc_entry {
    const char *name;
    void *fn;
    int version;
    int ptds;
};

#define P(name, sym, ver)                                                                          \
    {                                                                                              \
        name, (void *)sym, ver, 0                                                                  \
    }
#define PT(name, sym, ver)                                                                         \
    {                                                                                              \
        name, (void *)sym, ver, 1                                                                  \
    }

static const struct proc_entry proc_table[] = {
    P("cuInit", cuInit, 2000),
    P("cuDriverGetVersion", cuDriverGetVersion, 2020),
    P("cuGetErrorString", cuGetErrorString, 6000),
    P("cuGetErrorName", cuGetErrorName, 6000),
    P("cuGetProcAddress", cuGetProcAddress, 11030),
    P("cuGetProcAddress", cuGetProcAddress_v2, 12000),
    P("cuDeviceGet", cuDeviceGet, 2000),
    P("cuDeviceGetCount", cuDeviceGetCount, 2000),
    P("cuDeviceGetName", cuDeviceGetName, 2000),
    P("cuDeviceGetUuid", cuDeviceGetUuid, 9020),
    P("cuDeviceGetUuid", cuDeviceGetUuid_v2, 11040),
    P("cuDeviceTotalMem", cuDeviceTotalMem, 2000),
    P("cuDeviceTotalMem", cuDeviceTotalMem_v2, 3020),
    P("cuDeviceGetAttribute", cuDeviceGetAttribute, 2000),
    P("cuDeviceGetPCIBusId", cuDeviceGetPCIBusId, 4010),
    P("cuDeviceGetDevResource", cuDeviceGetDevResource, 12040),
    P("cuDevSmResourceSplitByCount", cuDevSmResourceSplitByCount, 12040),
    P("cuDevResourceGenerateDesc", cuDevResourceGenerateDesc, 12040),
    P("cuGreenCtxCreate", cuGreenCtxCreate, 12040),
    P("cuGreenCtxDestroy", cuGreenCtxDestroy, 12040),
    P("cuCtxFromGreenCtx", cuCtxFromGreenCtx, 12040),
    P("cuGreenCtxGetDevResource", cuGreenCtxGetDevResource, 12040),
    P("cuGreenCtxStreamCreate", cuGreenCtxStreamCreate, 12050),
    P("cuCtxGetDevResource", cuCtxGetDevResource, 12040),
    P("cuDeviceGetDefaultMemPool", cuDeviceGetDefaultMemPool, 11020),
    P("cuDeviceGetMemPool", cuDeviceGetMemPool, 11020),
    P("cuDeviceSetMemPool", cuDeviceSetMemPool, 11020),
    P("cuDevicePrimaryCtxRetain", cuDevicePrimaryCtxRetain, 7000),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease, 7000),
    P("cuDevicePrimaryCtxRelease", cuDevicePrimaryCtxRelease_v2, 11000),
    P("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset, 7000),
    P("cuDevicePrimaryCtxReset", cuDevicePrimaryCtxReset_v2, 11000),
    P("cuDevicePrimaryCtxGetState", cuDevicePrimaryCtxGetState, 7000),
    P("cuDevicePrimaryCtxSetFlags", cuDevicePrimaryCtxSetFlags, 7000),
    P("cuDevicePrimaryCtxSetFlags", cuDevicePrimaryCtxSetFlags_v2, 11000),
    P("cuCtxCreate", cuCtxCreate, 2000),
    P("cuCtxCreate", cuCtxCreate_v2, 3020),
    P("cuCtxCreate", cuCtxCreate_v3, 11040),
    P("cuCtxCreate", cuCtxCreate_v4, 12050),
    P("cuCtxDestroy", cuCtxDestroy, 2000),
    P("cuCtxDestroy", cuCtxDestroy_v2, 4000),
    P("cuCtxGetCurrent", cuCtxGetCurrent, 4000),
    P("cuCtxSetCurrent", cuCtxSetCurrent, 4000),
    P("cuCtxPushCurrent", cuCtxPushCurrent, 2000),
    P("cuCtxPushCurrent", cuCtxPushCurrent_v2, 4000),
    P("cuCtxPopCurrent", cuCtxPopCurrent, 2000),
    P("cuCtxPopCurrent", cuCtxPopCurrent_v2, 4000),
    P("cuCtxGetDevice", cuCtxGetDevice, 2000),
    P("cuCtxGetDevice", cuCtxGetDevice_v2, 13000),
    P("cuCtxSynchronize", cuCtxSynchronize, 2000),
    P("cuCtxSynchronize", cuCtxSynchronize_v2, 13000),
    P("cuMemGetInfo", cuMemGetInfo, 2000),
    P("cuMemGetInfo", cuMemGetInfo_v2, 3020),
    P("cuMemAlloc", cuMemAlloc, 2000),
    P("cuMemAlloc", cuMemAlloc_v2, 3020),
    P("cuMemAllocPitch", cuMemAllocPitch, 2000),
    P("cuMemAllocPitch", cuMemAllocPitch_v2, 3020),
    P("cuMemAllocManaged", cuMemAllocManaged, 6000),
    P("cuMemFree", cuMemFree, 2000),
    P("cuMemFree", cuMemFree_v2, 3020),
    P("cuMemGetAddressRange", cuMemGetAddressRange, 2000),
    P("cuMemGetAddressRange", cuMemGetAddressRange_v2, 3020),
    P("cuMemAllocAsync", cuMemAllocAsync, 11020),
    PT("cuMemAllocAsync", cuMemAllocAsync_ptsz, 11020),
    P("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync, 11020),
    PT("cuMemAllocFromPoolAsync", cuMemAllocFromPoolAsync_ptsz, 11020),
    P("cuMemFreeAsync", cuMemFreeAsync, 11020),
    PT("cuMemFreeAsync", cuMemFreeAsync_ptsz, 11020),
    P("cuMemPoolCreate", cuMemPoolCreate, 11020),
    P("cuMemPoolDestroy", cuMemPoolDestroy, 11020),
    P("cuMemPoolTrimTo", cuMemPoolTrimTo, 11020),
    P("cuMemPoolGetAttribute", cuMemPoolGetAttribute, 11020),
    P("cuMemPoolSetAttribute", cuMemPoolSetAttribute, 11020),
    P("cuMemGetAllocationGranularity", cuMemGetAllocationGranularity, 10020),
    P("cuMemCreate", cuMemCreate, 10020),
    P("cuMemRelease", cuMemRelease, 10020),
    P("cuMemRetainAllocationHandle", cuMemRetainAllocationHandle, 11000),
    P("cuMemAddressReserve", cuMemAddressReserve, 10020),
    P("cuMemAddressFree", cuMemAddressFree, 10020),
    P("cuMemMap", cuMemMap, 10020),
    P("cuMemUnmap", cuMemUnmap, 10020),
    P("cuMemSetAccess", cuMemSetAccess, 10020),
    P("cuArrayCreate", cuArrayCreate, 2000),
    P("cuArrayCreate", cuArrayCreate_v2, 3020),
    P("cuArray3DCreate", cuArray3DCreate, 2000),
    P("cuArray3DCreate", cuArray3DCreate_v2, 3020),
    P("cuArrayDestroy", cuArrayDestroy, 2000),
    P("cuMemcpyHtoD", cuMemcpyHtoD, 2000),
    P("cuMemcpyHtoD", cuMemcpyHtoD_v2, 3020),
    PT("cuMemcpyHtoD", cuMemcpyHtoD_v2_ptds, 7000),
    P("cuMemcpyDtoH", cuMemcpyDtoH, 2000),
    P("cuMemcpyDtoH", cuMemcpyDtoH_v2, 3020),
    PT("cuMemcpyDtoH", cuMemcpyDtoH_v2_ptds, 7000),
    P("cuMemsetD8", cuMemsetD8, 2000),
    P("cuMemsetD8", cuMemsetD8_v2, 3020),
    PT("cuMemsetD8", cuMemsetD8_v2_ptds, 7000),
    P("cuModuleLoad", cuModuleLoad, 2000),
    P("cuModuleLoadData", cuModuleLoadData, 2000),
    P("cuModuleUnload", cuModuleUnload, 2000),
    P("cuModuleGetFunction", cuModuleGetFunction, 2000),
    P("cuLaunchKernel", cuLaunchKernel, 4000),
    PT("cuLaunchKernel", cuLaunchKernel_ptsz, 7000),
    P("cuLaunchKernelEx", cuLaunchKernelEx, 11060),
    PT("cuLaunchKernelEx", cuLaunchKernelEx_ptsz, 11060),
    P("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel, 9000),
    PT("cuLaunchCooperativeKernel", cuLaunchCooperativeKernel_ptsz, 9000),
    P("cuStreamCreate", cuStreamCreate, 2000),
    P("cuStreamCreateWithPriority", cuStreamCreateWithPriority, 5050),
    P("cuStreamDestroy", cuStreamDestroy, 2000),
    P("cuStreamDestroy", cuStreamDestroy_v2, 4000),
    P("cuStreamSynchronize", cuStreamSynchronize, 2000),
    PT("cuStreamSynchronize", cuStreamSynchronize_ptsz, 7000),
    P("cuStreamGetCtx", cuStreamGetCtx, 9020),
    P("cuStreamQuery", cuStreamQuery, 2000),
    PT("cuStreamQuery", cuStreamQuery_ptsz, 7000),
    P("cuStreamBeginCapture", cuStreamBeginCapture, 10000),
    PT("cuStreamBeginCapture", cuStreamBeginCapture_ptsz, 10000),
    P("cuStreamBeginCapture", cuStreamBeginCapture_v2, 10010),
    PT("cuStreamBeginCapture", cuStreamBeginCapture_v2_ptsz, 10010),
    P("cuStreamEndCapture", cuStreamEndCapture, 10000),
    PT("cuStreamEndCapture", cuStreamEndCapture_ptsz, 10000),
    P("cuStreamIsCapturing", cuStreamIsCapturing, 10000),
    PT("cuStreamIsCapturing", cuStreamIsCapturing_ptsz, 10000),
    P("cuStreamWaitEvent", cuStreamWaitEvent, 3020),
    P("cuEventCreate", cuEventCreate, 2000),
    P("cuEventRecord", cuEventRecord, 2000),
    PT("cuEventRecord", cuEventRecord_ptsz, 7000),
    P("cuEventQuery", cuEventQuery, 2000),
    P("cuEventSynchronize", cuEventSynchronize, 2000),
    P("cuEventElapsedTime", cuEventElapsedTime, 2000),
    P("cuEventElapsedTime", cuEventElapsedTime_v2, 12080),
    P("cuEventDestroy", cuEventDestroy, 2000),
    P("cuEventDestroy", cuEventDestroy_v2, 4000),
    P("cuGraphCreate", cuGraphCreate, 10000),
    P("cuGraphDestroy", cuGraphDestroy, 10000),
    P("cuGraphAddKernelNode", cuGraphAddKernelNode, 10000),
    P("cuGraphAddKernelNode", cuGraphAddKernelNode_v2, 12000),
    P("cuGraphInstantiate", cuGraphInstantiate, 10000),
    P("cuGraphInstantiate", cuGraphInstantiate_v2, 11000),
    P("cuGraphInstantiate", cuGraphInstantiateWithFlags, 12000),
    P("cuGraphInstantiateWithFlags", cuGraphInstantiateWithFlags, 11040),
    P("cuGraphExecDestroy", cuGraphExecDestroy, 10000),
    P("cuGraphLaunch", cuGraphLaunch, 10000),
    PT("cuGraphLaunch", cuGraphLaunch_ptsz, 10000),
};

#undef P
#undef PT

#define NPROC (sizeof(proc_table) / sizeof(proc_table[0]))

/*
 * GPUSLICE_SIM_PROCADDR=unexported: cuGetProcAddress hands out, for each
 * table entry, a trampoline of its own that jumps to the exported function,
 * so callers get a pointer that no dlsym returns (as a driver may), with the
 * same behaviour. Made once, in an executable mapping of 16 bytes an entry.
 */
enum procaddr_mode { PROCADDR_EXPORTED, PROCADDR_UNEXPORTED, PROCADDR_BAD };

static pthread_once_t procaddr_once = PTHREAD_ONCE_INIT;
static enum procaddr_mode procaddr_mode;
static unsigned char *trampolines;

#define TRAMPOLINE_BYTES 16

static int make_trampolines(void)
{
    size_t len = sim_round_up(NPROC * TRAMPOLINE_BYTES, 4096);
    unsigned char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

    if (m == MAP_FAILED)
        return -errno;
    for (size_t i = 0; i < NPROC; i++) {
        unsigned char *t = m + i * TRAMPOLINE_BYTES;
        uint64_t target = (uint64_t)(uintptr_t)proc_table[i].fn;
#if defined(__x86_64__)
        /* movabs $target, %rax; jmp *%rax (rax is free at a call: no callee is variadic) */
        t[0] = 0x48;
        t[1] = 0xb8;
        memcpy(t + 2, &target, 8);
        t[10] = 0xff;
        t[11] = 0xe0;
        memset(t + 12, 0xcc, 4);
#elif defined(__aarch64__)
        /* ldr x16, #8; br x16; .quad target (x16 is the intra-procedure-call scratch register) */
        static const uint32_t code[2] = { 0x58000050u, 0xd61f0200u };
        memcpy(t, code, 8);
        memcpy(t + 8, &target, 8);
#else
        (void)t;
        (void)target;
        munmap(m, len);
        return -ENOTSUP;
#endif
    }
    if (mprotect(m, len, PROT_READ | PROT_EXEC) < 0) {
        int e = errno;
        munmap(m, len);
        return -e;
    }
    __builtin___clear_cache((char *)m, (char *)m + len);
    trampolines = m;
    return 0;
}

static void procaddr_config(void)
{
    const char *v = getenv("GPUSLICE_SIM_PROCADDR");
    int r;

    if (!v || strcmp(v, "exported") == 0) {
        procaddr_mode = PROCADDR_EXPORTED;
    } else if (strcmp(v, "unexported") != 0) {
        fprintf(stderr,
                "gpuslice-sim: GPUSLICE_SIM_PROCADDR: \"%s\" is not a mode "
                "(use exported or unexported)\n",
                v);
        procaddr_mode = PROCADDR_BAD;
    } else if ((r = make_trampolines()) < 0) {
        fprintf(stderr,
                "gpuslice-sim: GPUSLICE_SIM_PROCADDR: unexported pointers cannot be "
                "made here: %s\n",
                strerror(-r));
        procaddr_mode = PROCADDR_BAD;
    } else {
        procaddr_mode = PROCADDR_UNEXPORTED;
    }
}

/* What cuGetProcAddress hands out for table entry e: one trampoline per function. */
static void *proc_pointer(const struct proc_entry *e)
{
    size_t k = 0;

    if (procaddr_mode != PROCADDR_UNEXPORTED)
        return e->fn;
    while (proc_table[k].fn != e->fn)
        k++;
    return trampolines + k * TRAMPOLINE_BYTES;
}

/*
 * As the H200's driver answered (README, cuGetProcAddress): the variant of
 * the highest version not above the one asked for; with the per-thread
 * default stream flag, only per-thread variants where the name has any
 * (cuStreamSynchronize at 2000 with flag 2: version not sufficient, though
 * the plain one exists), else the plain ones.
 */
SIM_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                        cuuint64_t flags,
                                        CUdriverProcAddressQueryResult *symbolStatus)
{
    const struct proc_entry *best = NULL;
    int known = 0, has_ptds = 0, want_ptds;

    if (pfn)
        *pfn = NULL;
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    pthread_once(&procaddr_once, procaddr_config);
    if (procaddr_mode == PROCADDR_BAD)
        return CUDA_ERROR_INVALID_VALUE;
    if (!symbol || !pfn || cudaVersion < 0 ||
        (flags != CU_GET_PROC_ADDRESS_DEFAULT && flags != CU_GET_PROC_ADDRESS_LEGACY_STREAM &&
         flags != CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM))
        return CUDA_ERROR_INVALID_VALUE;

    for (size_t i = 0; i < NPROC; i++) {
        if (strcmp(proc_table[i].name, symbol) == 0) {
            known = 1;
            has_ptds |= proc_table[i].ptds;
        }
    }
    if (!known)
        return CUDA_ERROR_NOT_FOUND;
    want_ptds = flags == CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM && has_ptds;
    for (size_t i = 0; i < NPROC; i++) {
        const struct proc_entry *e = &proc_table[i];

        if (strcmp(e->name, symbol) == 0 && e->ptds == want_ptds && e->version <= cudaVersion &&
            (!best || e->version > best->version))
            best = e;
    }
    if (!best) {
        if (symbolStatus)
            *symbolStatus = CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = proc_pointer(best);
    if (symbolStatus)
        *symbolStatus = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags)
{
    return cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, NULL);
}

int sim_mps_client(void)
{
    static int known = -1;
    char path[4096];
    const char *dir;
    struct stat st;

    if (known < 0) {
        dir = getenv("CUDA_MPS_PIPE_DIRECTORY");
        if (!dir || !*dir)
            dir = "/tmp/nvidia-mps";
        snprintf(path, sizeof(path), "%s/control", dir);
        known = stat(path, &st) == 0 && (S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode));
    }
    return known;
}
