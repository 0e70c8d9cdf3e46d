/*
 * Reading limits from the environment, where gpuslice run, vgpu.rs users and
 * HAMi-core users put them. Precedence, highest first:
 *   memory:  GPUSLICE_MEMORY_LIMIT  >  TENSOR_FUSION_CUDA_MEM_LIMIT  >
 *            CUDA_DEVICE_MEMORY_LIMIT_<i> (per device)  >  CUDA_DEVICE_MEMORY_LIMIT
 *   compute: GPUSLICE_COMPUTE_LIMIT  >  TENSOR_FUSION_CUDA_UP_LIMIT  >
 *            CUDA_DEVICE_SM_LIMIT_<i> (per device)  >  CUDA_DEVICE_SM_LIMIT
 * The first source that is set is used alone (HAMi's two variables form one
 * source); every variable that is set is still validated, so a typo is never
 * silently ignored: a name in HAMi-core's namespace (from
 * CUDA_DEVICE_MEMORY_LIMIT_ or CUDA_DEVICE_SM_LIMIT_ on) that is not
 * BASE_<index> is refused. Each source keeps its own units: sizes in
 * HAMi-core's variables and vgpu.rs's JSON are bytes unless a unit is given
 * (HAMi-core: k, m, g), and no memory limit below GS_MIN_MEMORY_LIMIT is
 * accepted from any of them.
 */
#ifndef GPUSLICE_CONFIG_H
#define GPUSLICE_CONFIG_H

#include "common/env.h" /* the GS_ENV_* names */
#include "common/parse.h"

/*
 * Fills out from the environment env (a NULL-terminated "NAME=value" array,
 * e.g. environ). Returns 0 (out->n == 0: no limit configured) or -EINVAL
 * with a message in err.
 */
int gs_config_memory(char *const *env, struct gs_limits *out, char *err, size_t errlen);

/*
 * Same for compute ceilings (percent of a device's time, 1..100; 100 means
 * none). HAMi-core's variables also take 0, meaning none, as HAMi-core does.
 */
int gs_config_compute(char *const *env, struct gs_limits *out, char *err, size_t errlen);

/*
 * The priority class (GPUSLICE_PRIORITY, GPUSLICE_PRIORITY_UNSET when not
 * set) and weight (GPUSLICE_WEIGHT, 0 when not set) in env: 0, or -EINVAL
 * with a message in err.
 */
int gs_config_sched(char *const *env, uint32_t *priority, uint32_t *weight, char *err,
                    size_t errlen);

/*
 * HAMi-core's shared file (CUDA_DEVICE_MEMORY_SHARED_CACHE) in env: *path
 * points into env at its value, or is NULL when it is unset or empty (no
 * file: each process keeps its own limits). Returns 0, or -EINVAL with a
 * message in err for a value no two processes could be sure to mean alike:
 * a relative path (it depends on each one's working directory), one that
 * ends in '/' or names "." or "..", one longer than PATH_MAX.
 */
int gs_config_shared_cache(char *const *env, const char **path, char *err, size_t errlen);

/* The value of name in env, or NULL. */
const char *gs_env_get(char *const *env, const char *name);

#endif
