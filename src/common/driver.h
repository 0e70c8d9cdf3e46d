/*
 * The one loader of the real NVIDIA libraries, for the CLI and the interposer
 * alike: libcuda.so.1 ($GPUSLICE_REAL_LIBCUDA) and libnvidia-ml.so.1
 * ($GPUSLICE_REAL_LIBNVML), opened with dlopen, every function of
 * GS_CUDA_FUNCS and GS_NVML_FUNCS resolved into one table.
 */
#ifndef GPUSLICE_COMMON_DRIVER_H
#define GPUSLICE_COMMON_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"
#include "common/env.h"
#include "common/nvml_api.h"
#include "common/nvml_funcs.h"

/* The real functions, by their exported names; NULL where the library lacks one. */
struct gs_driver {
    void *cuda; /* dlopen handles; NULL until loaded */
    void *nvml;
#define GS_DRIVER_MEMBER(ret, name, params) gs_pfn_##name name;
    GS_CUDA_FUNCS(GS_DRIVER_MEMBER)
    GS_NVML_FUNCS(GS_DRIVER_MEMBER)
#undef GS_DRIVER_MEMBER
};

/* How a name is looked up in a loaded library (dlsym when NULL). */
typedef void *(*gs_driver_lookup)(void *lib, const char *name);

/*
 * Loads the CUDA driver ($GPUSLICE_REAL_LIBCUDA when set and not empty, else
 * libcuda.so.1) with dlopen's flags and resolves every CUDA function of d,
 * leaving its NVML part as it is (d starts zeroed: {0}, static, or closed).
 * Returns 0, or GS_ENODRIVER with dlerror's message in err.
 */
int gs_driver_open_cuda(struct gs_driver *d, int flags, gs_driver_lookup lookup, char *err,
                        size_t errlen);

/* The same for NVML ($GPUSLICE_REAL_LIBNVML, else libnvidia-ml.so.1). */
int gs_driver_open_nvml(struct gs_driver *d, int flags, gs_driver_lookup lookup, char *err,
                        size_t errlen);

/* Closes what d loaded and clears it; d may be NULL. */
void gs_driver_close(struct gs_driver *d);

/*
 * cuInit and cuDeviceGetCount: how many devices there are (0 when the driver
 * says CUDA_ERROR_NO_DEVICE), or a negative errno with a message in err.
 */
int gs_driver_count(const struct gs_driver *d, char *err, size_t errlen);

/* The UUID of CUDA device i into out: 0, or the driver's error (a CUresult > 0). */
int gs_driver_uuid(const struct gs_driver *d, int i, uint8_t out[16]);

/*
 * gs_driver_count, then each device's UUID in CUDA order into uuids (at most
 * max of them; every one must be readable). Returns how many devices there
 * are, or a negative errno with a message in err.
 */
int gs_driver_uuids(const struct gs_driver *d, uint8_t (*uuids)[16], int max, char *err,
                    size_t errlen);

/* The driver's name for r ("CUDA_ERROR_NO_DEVICE"), else "CUDA error N" in buf. */
const char *gs_driver_cu_name(const struct gs_driver *d, CUresult r, char *buf, size_t len);

#endif /* GPUSLICE_COMMON_DRIVER_H */
