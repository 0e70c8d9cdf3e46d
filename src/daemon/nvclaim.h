/*
 * Claims of NVIDIA's DRA driver (gpu.nvidia.com) as pods' memory limits: the pure readers of
 * the pod's claim names, a ResourceClaim and the node's ResourceSlices (nvclaim_doc.c), and
 * the thread that reads a pod's claims off the pod watch's path (nvclaim.c).
 *
 * What NVIDIA's driver publishes, as relied on here (kubernetes-sigs/dra-driver-nvidia-gpu,
 * formerly NVIDIA/k8s-dra-driver-gpu, at 95932046683719c43b6a0dd9613c2e5aad5d6703):
 *   - the driver's name gpu.nvidia.com (cmd/gpu-kubelet-plugin/main.go, DriverName);
 *   - one pool per node, named after the node (cmd/gpu-kubelet-plugin/driver.go: Pools keyed
 *     by nodeName);
 *   - a full GPU's device named gpu-<minor> (deviceinfo.go, CanonicalName) with the string
 *     attribute uuid (its "GPU-..." UUID; a MIG device's is "MIG-...") and the capacity
 *     "memory" (partitions.go, fullGpuCapacity; mig.go for a MIG device);
 *   - with the feature gate ConsumableShares (pkg/featuregates/featuregates.go, Alpha, off by
 *     default) and --consumable-shares memory|unlimited|N (consumable_shares.go): the device
 *     allows multiple allocations and its memory a request policy; a claim's
 *     capacity.requests.memory is then the allocation result's consumedCapacity.memory. In
 *     "memory" mode a claim that asks none consumes the whole GPU's; in "unlimited" and N
 *     modes it consumes 0 (demo/specs/consumable-shares/README.md);
 *   - its documentation's "No memory isolation" among time-slicing's limits
 *     (site/content/docs/guides/gpu-allocation/time-slicing.md): the gap this closes.
 * And of Kubernetes (resource.k8s.io/v1, core/v1): pod.spec.resourceClaims[] {name,
 * resourceClaimName | resourceClaimTemplateName}; pod.status.resourceClaimStatuses[] {name,
 * resourceClaimName} naming the claim generated from a template (absent: none was needed);
 * a claim's status.allocation.devices.results[] {request, driver, pool, device,
 * consumedCapacity} and status.reservedFor[] {resource: pods, name, uid}.
 */
#ifndef GPUSLICE_DAEMON_NVCLAIM_H
#define GPUSLICE_DAEMON_NVCLAIM_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "common/parse.h"

#define GD_NV_DRIVER "gpu.nvidia.com"
#define GD_POD_MAX_CLAIMS 8   /* claims of one pod that are followed (more: refused) */
#define GD_CLAIM_NAME_LEN 254 /* a DNS subdomain and its NUL */
#define GD_NV_DEVICE_LEN 128  /* a device's name (a DNS label, 63 in v1) and its NUL */
#define GD_NV_UUID_LEN 64     /* a device's uuid attribute ("GPU-...", "MIG-...") */
#define GD_NV_MAX_RESULTS 32  /* results of gpu.nvidia.com in one claim */
#define GD_NV_MAX_DEVICES 512 /* devices of gpu.nvidia.com on one node (MIG included) */

/*
 * The claims a pod names: status.resourceClaimStatuses[].resourceClaimName (the claims made
 * from its templates) and spec.resourceClaims[].resourceClaimName, each once, into names.
 * *pending: how many of spec.resourceClaims name a template whose claim the status does not
 * name yet. The count (0..max), or -1 with err: a name that is no object name, or more than
 * max claims (the pod is refused then: its limits cannot all be known).
 */
int gd_nv_pod_claims(const json_t *pod, char names[][GD_CLAIM_NAME_LEN], int max, int *pending,
                     char *err, size_t errlen);

/* One allocation result of gpu.nvidia.com: its device and the memory it consumes (0: none). */
struct gd_nv_result {
    char device[GD_NV_DEVICE_LEN];
    uint64_t mem;
};

struct gd_nv_claim {
    char uid[64], rv[64];
    int n;
    struct gd_nv_result r[GD_NV_MAX_RESULTS];
};

/*
 * Claim ns/name (its JSON from the API server) read for pod pod_uid of node: its uid and
 * resourceVersion, and its results of gpu.nvidia.com, each of whose pool must be node (a
 * result elsewhere cannot be on this node's GPUs). The claim must be allocated and reserved
 * for the pod. consumedCapacity.memory is a quantity; none, or "0" (what NVIDIA's unlimited
 * and N-shares modes consume by default), is no limit. Results of other drivers are skipped
 * (n may be 0). 0, or -1 with err "claim NS/NAME: ..." and out zeroed.
 */
int gd_nv_claim_read(const json_t *claim, const char *ns, const char *name, const char *node,
                     const char *pod_uid, struct gd_nv_claim *out, char *err, size_t errlen);

struct gd_nv_dev {
    char name[GD_NV_DEVICE_LEN];
    char uuid[GD_NV_UUID_LEN];
};

/*
 * The devices of gpu.nvidia.com in node's pool from a ResourceSliceList (items whose
 * spec.driver, spec.nodeName and spec.pool.name say so; others are skipped), with their
 * attribute uuid (a device without one is skipped), into out (*n of them). 0, or -1 with err
 * (not a list, or more than max devices).
 */
int gd_nv_slices_read(const json_t *list, const char *node, struct gd_nv_dev *out, int max, int *n,
                      char *err, size_t errlen);

/*
 * Adds a result's memory on GPU uuid ("GPU-...") to the claims' limits l (keyed by the
 * lower-case UUID); whole[] (GS_MAX_LIMIT_ENTRIES, zeroed at first) marks a GPU that a result
 * without memory holds whole: no limit on it then, whatever the others consume. Two results
 * on one GPU (two claims, or two requests) add up. 0, or -1 with err: uuid is no GPU's UUID
 * (a MIG device, whose memory the interposer cannot key) while mem > 0, or too many GPUs.
 */
int gd_nv_limits_add(struct gs_limits *l, unsigned char *whole, const char *uuid, uint64_t mem,
                     char *err, size_t errlen);

/* Drops from l the GPUs that whole[] marks (after every result was added). */
void gd_nv_limits_done(struct gs_limits *l, const unsigned char *whole);

/*
 * The pod's memory limits: its annotations' (ann) and its claims' (claims, by UUID) together.
 * Where both speak of a GPU the smaller wins: the claim's is what the scheduler reserved for
 * the pod on that GPU, the annotation's what the pod's owner allows it; either can only
 * narrow the other. An annotation's UUID entry for the GPU counts; without one, its smallest
 * default or index entry does (an index is the container's own, unknown here, and the claim's
 * UUID entry wins over any index entry in the interposer). 0, or -1 with err (no room).
 */
int gd_nv_merge(const struct gs_limits *ann, const struct gs_limits *claims, struct gs_limits *out,
                char *err, size_t errlen);

/* ---- the reading thread (nvclaim.c) ---- */

/* Something to read: started on the first call. */
void gd_nv_kick(void);
void gd_nv_stop(void);

#endif
