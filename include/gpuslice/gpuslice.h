/*
 * gpuslice's C API for one process: run functions side by side on weighted
 * partitions of one GPU's SMs (green contexts), each on its own thread.
 *
 * It is exported by libgpuslice.so (link with -lgpuslice, or use it
 * preloaded); it loads the CUDA driver itself and needs no CUDA headers.
 *
 * Constraints, which are those of green contexts in one process:
 * - A lane's partition binds the thread that runs its function: work it
 *   issues there (driver or runtime API, on the NULL stream or streams it
 *   creates there) runs on the lane's SMs. Threads the function starts
 *   itself do not, unless they make gpuslice_lane_context() current.
 * - Memory is shared by all lanes (the device's primary context): a pointer
 *   allocated in one lane is valid in another, but ordering between lanes is
 *   the caller's (events or a synchronisation); do not hand streams or
 *   pointers still in use across lanes.
 * - The partitions exist only while gpuslice_lanes_run runs; streams made in
 *   a lane must be destroyed by its function.
 * - Not to be combined with GPUSLICE_SMS (a whole-process partition) on the
 *   same device.
 * - Size grids by the lane's sm_count. cuDeviceGetAttribute
 *   (MULTIPROCESSOR_COUNT) on a lane's thread answers it too, but that is
 *   checked on the simulated GPU only; on an H200 the CUDA runtime's
 *   cudaDeviceGetAttribute gave the whole GPU's count before a fix.
 */
#ifndef GPUSLICE_GPUSLICE_H
#define GPUSLICE_GPUSLICE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPUSLICE_LANES_MAX 64

/* What one lane got, and what its function returned. */
struct gpuslice_lane {
    double weight;     /* as given */
    unsigned sm_count; /* the exact SMs of its partition, as the driver reports them */
    unsigned first_sm; /* its first SM, in the driver's split order */
    int result;        /* the function's return value */
    int cuda_error;    /* the CUresult of waiting for the lane's GPU work after it (0: none) */
};

/* A lane's function: runs on its own thread with the lane's partition current. */
typedef int (*gpuslice_lane_fn)(int lane, const struct gpuslice_lane *info, void *arg);

/*
 * Splits CUDA device `device`'s SMs into n partitions (1..GPUSLICE_LANES_MAX)
 * in proportion to weights (positive, finite), as gpuslice procs plans them
 * (whole groups of the GPU's co-scheduled split when every lane gets one,
 * else of its finest split), starts one thread per lane with its partition
 * current, releases them together, runs fn(i, &lanes[i], args ? args[i] :
 * NULL) on each, waits for them all and for their work on the GPU, and frees
 * the partitions.
 *
 * Returns 0 when every lane ran (each lanes[i].result is its function's
 * return value, lanes[i].cuda_error what waiting for its work said: an
 * asynchronous fault of its kernels shows there), or before any lane runs: -EINVAL for bad arguments,
 * -ENODEV for a device that does not exist, -ENOTSUP when the driver or GPU
 * has no green contexts or cannot split that finely, -EIO for another driver
 * error, -EAGAIN when a thread cannot be started; with a message for a
 * person in err (errlen bytes, may be 0).
 */
int gpuslice_lanes_run(int device, int n, const double *weights, gpuslice_lane_fn fn,
                       void *const *args, struct gpuslice_lane *lanes, char *err, size_t errlen);

/*
 * The CUcontext of the calling thread's lane (cast to void *), for threads a
 * lane's function starts to make current; NULL outside a lane.
 */
void *gpuslice_lane_context(void);

#ifdef __cplusplus
}
#endif

#endif
