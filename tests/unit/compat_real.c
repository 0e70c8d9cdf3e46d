/*
 * The layout facts, computed from the real cuda.h (and nvml.h where it is
 * installed). Redeclaring every function of our lists here makes the compiler
 * check that our function types match the real ones.
 */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "common/cuda_funcs.h"
#include "compat_checks.h"

#define GS_REDECLARE(ret, name, params) ret CUDAAPI name params;
GS_CUDA_FUNCS(GS_REDECLARE)

#define GS_FACT(label, v) { label, (unsigned long long)(v) },
const struct gs_compat_fact gs_compat_real_cuda[] = { GS_COMPAT_CUDA(GS_FACT){ NULL, 0 } };

#ifdef GS_HAVE_NVML_H
#include <nvml.h>

#include "common/nvml_funcs.h"
GS_NVML_FUNCS(GS_REDECLARE)
const struct gs_compat_fact gs_compat_real_nvml[] = { GS_COMPAT_NVML(GS_FACT){ NULL, 0 } };
#else
const struct gs_compat_fact gs_compat_real_nvml[] = { { NULL, 0 } };
#endif
