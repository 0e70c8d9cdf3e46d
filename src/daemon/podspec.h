/*
 * A pod's GPU limits, read from the pod object of the Kubernetes API (its
 * JSON): our annotations, TensorFusion's and HAMi's container resources.
 */
#ifndef GPUSLICE_DAEMON_PODSPEC_H
#define GPUSLICE_DAEMON_PODSPEC_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/parse.h"

#define GD_ANN_MEMORY "gpuslice.io/memory"
#define GD_ANN_COMPUTE "gpuslice.io/compute"
#define GD_ANN_PRIORITY "gpuslice.io/priority"
#define GD_ANN_SMS "gpuslice.io/sms"
#define GD_TF_VRAM "tensor-fusion.ai/vram-limit"
#define GD_TF_COMPUTE "tensor-fusion.ai/compute-percent-limit"
#define GD_TF_QOS "tensor-fusion.ai/qos"
#define GD_HAMI_MEM "nvidia.com/gpumem"
#define GD_HAMI_CORES "nvidia.com/gpucores"
#define GD_HAMI_PRIORITY "nvidia.com/priority"
#define GD_NVIDIA_GPU "nvidia.com/gpu"

struct gd_pod_spec {
    struct gs_limits memory, compute, sms; /* n == 0: none; .source names where they came from */
    uint32_t priority;                     /* GPUSLICE_PRIORITY_*, UNSET for none */
    const char *priority_from;             /* the annotation or resource, NULL for none */
    uint32_t gpus; /* nvidia.com/gpu summed over the containers' limits; 0 for none */
};

/*
 * The limits of pod (a Pod object). For each setting the first of these that the pod has
 * counts: our annotation (gpuslice.io/memory, compute, priority, sms, in the forms of the
 * CLI's --memory, --compute, --priority and --sms); TensorFusion's annotation
 * (tensor-fusion.ai/vram-limit, a quantity; compute-percent-limit, 1 to 100; qos, low,
 * medium, high or critical: background, normal, latency, latency); HAMi's container resource
 * limits, summed over the pod's containers (nvidia.com/gpumem in MiB, nvidia.com/gpucores in
 * percent, at most 100 in all; nvidia.com/priority 0, high: latency, or 1, low: background).
 * A bad value in any of them is an error even where another form would count: 0, or -EINVAL
 * with a message naming the annotation or resource and the accepted forms in err.
 */
int gd_pod_spec(const json_t *pod, struct gd_pod_spec *out, char *err, size_t errlen);

#endif
