/* The layout facts, computed from gpuslice's own declarations. */
#include <stddef.h>
#include <stdint.h>

#include "common/cuda_api.h"
#include "common/nvml_api.h"
#include "compat_checks.h"

#define GS_FACT(label, v) { label, (unsigned long long)(v) },
const struct gs_compat_fact gs_compat_ours_cuda[] = { GS_COMPAT_CUDA(GS_FACT){ NULL, 0 } };
const struct gs_compat_fact gs_compat_ours_nvml[] = { GS_COMPAT_NVML(GS_FACT){ NULL, 0 } };
