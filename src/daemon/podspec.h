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

/* The claim the webhook gives a pod in webhook-claims mode (webhook.c): its name and template's. */
#define GD_POD_CLAIM "gpuslice"
#define GD_POD_CLAIM_TEMPLATE_PREFIX "gpuslice-"

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
 * percent, at most 100 in all; nvidia.com/priority 0, high: latency, or 1, low: background;
 * an init container counts as the scheduler counts it: the pod asks for the most of the
 * containers' sum and each init container's own).
 * A bad value in any of them is an error even where another form would count: 0, or -EINVAL
 * with a message naming the annotation or resource and the accepted forms in err.
 */
int gd_pod_spec(const json_t *pod, struct gd_pod_spec *out, char *err, size_t errlen);

/*
 * Whether pod (a Pod object) is a GPU pod: the one definition that the webhook (which injects
 * the interposer into it) and the daemon (which makes it a tenant, "pod-<uid>") both use. 1
 * when any of its containers or init containers has one of nvidia.com/gpu, nvidia.com/gpumem,
 * nvidia.com/gpucores or nvidia.com/priority in its limits or requests; else 0 when its GPU
 * comes through the webhook's claim (gd_pod_has_claim: its processes join the claim's tenant,
 * and the claim's CDI spec brings the interposer); else 1 when it has one of the annotations
 * gd_pod_spec reads (whatever their values: a bad one is refused, not ignored), or any other
 * spec.resourceClaims (a GPU of NVIDIA's DRA driver is named only by a claim, and a claim's
 * driver is not in the pod: in a namespace that opted in, a pod with claims of other drivers
 * is injected too, harmlessly: it gets no limit from them); else 0. Ephemeral containers
 * cannot ask for resources (the API refuses them).
 */
int gd_pod_wants_gpus(const json_t *pod);

/*
 * Whether pod has the claim the webhook gives in webhook-claims mode: an entry of
 * spec.resourceClaims named GD_POD_CLAIM whose resourceClaimTemplateName starts with
 * GD_POD_CLAIM_TEMPLATE_PREFIX. 1 or 0.
 */
int gd_pod_has_claim(const json_t *pod);

/*
 * Whether a pod of namespace ns may have the class its spec s asks for. A pod's annotations
 * and resources are written by whoever creates it; a class above normal (latency) is the
 * node admin's to give, as the API gives it to admins only: allowed lists the namespaces
 * whose pods may have it (gpusliced's pod-latency-namespaces: names separated by commas, "*"
 * for every namespace, empty for none). Pods cannot set a weight. 0, or -EPERM with a message
 * in err naming the annotation or resource, the namespace and what is allowed.
 */
int gd_pod_class_allowed(const struct gd_pod_spec *s, const char *ns, const char *allowed,
                         char *err, size_t errlen);

/*
 * Checks a list for gd_pod_class_allowed: "*", or namespace names (lower-case letters, digits
 * and '-', at most 63) separated by commas. 0, or -EINVAL with a message in err.
 */
int gd_pod_ns_list_check(const char *list, char *err, size_t errlen);

#endif
