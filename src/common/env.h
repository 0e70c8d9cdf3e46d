/*
 * Every environment variable of gpuslice's own (GPUSLICE_*) and of the peers
 * whose forms it reads (vgpu.rs's TENSOR_FUSION_*, HAMi-core's CUDA_DEVICE_*),
 * named once here. Code uses the GS_ENV_* names, never a literal; GS_ENV_VARS
 * lists them all, each with whether a person sets it (documented in
 * gpuslice(1) and README, which integration.docs checks against this list) or
 * gpuslice sets it for its own children, and one line of what it is.
 */
#ifndef GPUSLICE_COMMON_ENV_H
#define GPUSLICE_COMMON_ENV_H

#define GS_ENV_MEMORY "GPUSLICE_MEMORY_LIMIT"
#define GS_ENV_TF_MEMORY "TENSOR_FUSION_CUDA_MEM_LIMIT"
#define GS_ENV_HAMI_MEMORY "CUDA_DEVICE_MEMORY_LIMIT"
#define GS_ENV_COMPUTE "GPUSLICE_COMPUTE_LIMIT"
#define GS_ENV_TF_COMPUTE "TENSOR_FUSION_CUDA_UP_LIMIT"
#define GS_ENV_HAMI_COMPUTE "CUDA_DEVICE_SM_LIMIT"
#define GS_ENV_HAMI_SHARED_CACHE "CUDA_DEVICE_MEMORY_SHARED_CACHE"
#define GS_ENV_SMS "GPUSLICE_SMS"
#define GS_ENV_PRIORITY "GPUSLICE_PRIORITY"
#define GS_ENV_WEIGHT "GPUSLICE_WEIGHT"
#define GS_ENV_YIELD_SMS "GPUSLICE_YIELD_SMS"
#define GS_ENV_TENANT "GPUSLICE_TENANT"
#define GS_ENV_DEBUG "GPUSLICE_DEBUG"
#define GS_ENV_RUN_DIR "GPUSLICE_RUN_DIR"
#define GS_ENV_DAEMON_DIR "GPUSLICE_DAEMON_DIR"
#define GS_ENV_POD "GPUSLICE_POD"
#define GS_ENV_REAL_LIBCUDA "GPUSLICE_REAL_LIBCUDA"
#define GS_ENV_REAL_LIBNVML "GPUSLICE_REAL_LIBNVML"
#define GS_ENV_PRELOAD_LIB "GPUSLICE_PRELOAD_LIB"
#define GS_ENV_PYTHON_DIR "GPUSLICE_PYTHON_DIR"
#define GS_ENV_LIB "GPUSLICE_LIB"
#define GS_ENV_BIN "GPUSLICE_BIN"
#define GS_ENV_MPS_TIMEOUT "GPUSLICE_MPS_TIMEOUT"
#define GS_ENV_LANE "GPUSLICE_LANE"
#define GS_ENV_LANE_BARRIER "GPUSLICE_LANE_BARRIER"
#define GS_ENV_INFO_REEXEC "GPUSLICE_INFO_REEXEC"
/* libgpuslice-addpath.so: vgpu.rs's TF_ names, and these after them. */
#define GS_ENV_ADD_PATH "GPUSLICE_PATH"
#define GS_ENV_ADD_LD_PRELOAD "GPUSLICE_LD_PRELOAD"
#define GS_ENV_ADD_LD_LIBRARY_PATH "GPUSLICE_LD_LIBRARY_PATH"
#define GS_ENV_PREPEND_PATH "GPUSLICE_PREPEND_PATH"
#define GS_ENV_PREPEND_LD_PRELOAD "GPUSLICE_PREPEND_LD_PRELOAD"
#define GS_ENV_PREPEND_LD_LIBRARY_PATH "GPUSLICE_PREPEND_LD_LIBRARY_PATH"

/* Who sets a variable: a person (documented), or gpuslice for its own children. */
#define GS_ENV_USER 1
#define GS_ENV_INTERNAL 0

/* X(name, who, what) for every variable above, in gpuslice(1)'s order. */
#define GS_ENV_VARS(X)                                                                             \
    X(GS_ENV_MEMORY, GS_ENV_USER, "memory limit per GPU, as run --memory")                         \
    X(GS_ENV_TF_MEMORY, GS_ENV_USER, "memory limit in vgpu.rs's JSON form")                        \
    X(GS_ENV_HAMI_MEMORY, GS_ENV_USER, "memory limit in HAMi-core's form (and _<index>)")          \
    X(GS_ENV_COMPUTE, GS_ENV_USER, "compute ceiling per GPU, as run --compute")                    \
    X(GS_ENV_TF_COMPUTE, GS_ENV_USER, "compute ceiling in vgpu.rs's JSON form")                    \
    X(GS_ENV_HAMI_COMPUTE, GS_ENV_USER, "compute ceiling in HAMi-core's form (and _<index>)")      \
    X(GS_ENV_HAMI_SHARED_CACHE, GS_ENV_USER, "a file: processes naming one share limits (HAMi)")   \
    X(GS_ENV_SMS, GS_ENV_USER, "an SM partition per GPU, as run --sms")                            \
    X(GS_ENV_PRIORITY, GS_ENV_USER, "priority class: latency, normal or background")               \
    X(GS_ENV_WEIGHT, GS_ENV_USER, "share of a contended GPU within the class, 1..100")             \
    X(GS_ENV_YIELD_SMS, GS_ENV_USER, "SMs a lower class keeps while a higher one is active (MPS)") \
    X(GS_ENV_RUN_DIR, GS_ENV_USER, "where tenant files live, absolute (default /dev/shm)")         \
    X(GS_ENV_DAEMON_DIR, GS_ENV_USER,                                                              \
      "the daemon's run directory, absolute (default /run/gpuslice)")                              \
    X(GS_ENV_POD, GS_ENV_USER, "1: a pod's process; CUDA fails unless the daemon joins its pod")   \
    X(GS_ENV_DEBUG, GS_ENV_USER, "1: the interposer says what it does on stderr")                  \
    X(GS_ENV_PRELOAD_LIB, GS_ENV_USER, "the libgpuslice.so run and exec preload")                  \
    X(GS_ENV_REAL_LIBCUDA, GS_ENV_USER, "the real CUDA driver library to load")                    \
    X(GS_ENV_REAL_LIBNVML, GS_ENV_USER, "the real NVML library to load")                           \
    X(GS_ENV_TENANT, GS_ENV_USER, "the tenant file a process joins (run and exec set it)")         \
    X(GS_ENV_MPS_TIMEOUT, GS_ENV_USER, "seconds mps waits for the control daemon")                 \
    X(GS_ENV_PYTHON_DIR, GS_ENV_USER, "where run --torch-priority finds its PyTorch hook")         \
    X(GS_ENV_LIB, GS_ENV_USER, "the libgpuslice.so the Python package loads")                      \
    X(GS_ENV_BIN, GS_ENV_USER, "the gpuslice program the Python package runs")                     \
    X(GS_ENV_LANE, GS_ENV_USER, "the lane of an SM partition a program of procs runs in")          \
    X(GS_ENV_ADD_PATH, GS_ENV_USER, "addpath: appended to PATH")                                   \
    X(GS_ENV_ADD_LD_PRELOAD, GS_ENV_USER, "addpath: appended to LD_PRELOAD")                       \
    X(GS_ENV_ADD_LD_LIBRARY_PATH, GS_ENV_USER, "addpath: appended to LD_LIBRARY_PATH")             \
    X(GS_ENV_PREPEND_PATH, GS_ENV_USER, "addpath: put in front of PATH")                           \
    X(GS_ENV_PREPEND_LD_PRELOAD, GS_ENV_USER, "addpath: put in front of LD_PRELOAD")               \
    X(GS_ENV_PREPEND_LD_LIBRARY_PATH, GS_ENV_USER, "addpath: put in front of LD_LIBRARY_PATH")     \
    X(GS_ENV_LANE_BARRIER, GS_ENV_INTERNAL, "procs: the file its programs start together at")      \
    X(GS_ENV_INFO_REEXEC, GS_ENV_INTERNAL, "info: run again without the interposer")

#endif /* GPUSLICE_COMMON_ENV_H */
