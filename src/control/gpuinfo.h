/*
 * This machine's GPUs as the driver describes them (control/gpuinfo.c): name,
 * UUID, memory, SMs, compute capability, the green-context partition sizes the
 * driver allows, and the MPS control daemon serving each; for gpuslice info
 * (and the node daemon's inventory to come).
 */
#ifndef GPUSLICE_CONTROL_GPUINFO_H
#define GPUSLICE_CONTROL_GPUINFO_H

#include <stddef.h>

#include "control/mps.h"
#include "common/driver.h"
#include "common/nvml_api.h"
#include "common/parse.h"

#define GPUINFO_NAME_LEN 96
#define GPUINFO_REASON_LEN 160

/* A value the driver may not give: known is 0 with a reason in the caller's hands. */
struct gpuinfo_green {
    int supported;
    int min_sms, alignment, finest;  /* 0 = unknown */
    int groups, finest_groups;       /* how many of each a whole split makes; 0 = unknown */
    unsigned int drv_min, drv_align; /* what cuDeviceGetDevResource reports; 0 = nothing */
    char reason[GPUINFO_REASON_LEN];
};

struct gpuinfo_gpu {
    int index;
    char name[GPUINFO_NAME_LEN];
    char uuid[GS_UUID_STRLEN];
    int have_mem;
    nvmlMemory_t mem;
    int sm_count, cc_major, cc_minor; /* -1 = unknown */
    struct gpuinfo_green green;
    const char *mps;
    char mps_dir[MPS_PATH_MAX]; /* the pipe directory mps describes */
};

struct gpuinfo {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE]; /* "" = unknown */
    int cuda_version;                                            /* 0 = unknown */
    struct gpuinfo_gpu *gpus;
    int ngpus;
    int failed; /* GPUs the driver would not describe (named on stderr, left out) */
};

/* " (for the simulated GPU: LD_LIBRARY_PATH=DIR)" where it lies beside the binary, else "". */
void gpuinfo_sim_hint(char *buf, size_t len);
/* Loads the CUDA driver (required; err then ends with the hint) and NVML (optional: then no
 * memory figures). */
int gpuinfo_load_driver(struct gs_driver *d, char *err, size_t errlen);
void gpuinfo_unload_driver(struct gs_driver *d);

/*
 * Fills in (in->gpus allocated, the caller frees it): every GPU the driver
 * describes; one it will not is named on stderr and counted in in->failed.
 */
int gpuinfo_gather(const struct gs_driver *d, struct gpuinfo *in);

#endif
