/*
 * The mutating admission webhook's answer (webhook.c): the interposer into a
 * pod through hostPath volumes, /etc/ld.so.preload and GPUSLICE_POD=1.
 */
#ifndef GPUSLICE_DAEMON_WEBHOOK_H
#define GPUSLICE_DAEMON_WEBHOOK_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#define GD_ANN_INJECT "gpuslice.io/inject"     /* "false": leave the pod as it is */
#define GD_ANN_INJECTED "gpuslice.io/injected" /* set by the webhook */

/*
 * The directory of the run directory that pods mount (pods.c keeps it): all a pod's process
 * needs of the daemon and nothing else (not the API's socket): the node segment, the pods'
 * and the boards' sockets (hard links of the run directory's own), and an empty "tenants" that
 * the run directory's tenants/ (read-only, for the classes of other tenants) is mounted on.
 */
#define GD_POD_RUN_DIR "pod"

#define GD_ANN_CLAIM_TEMPLATE "gpuslice.io/claim-template" /* set in webhook-claims mode */
#define GD_DEVICE_CLASS "gpuslice.io" /* the DeviceClass of the driver's GPUs */

/*
 * Makes sure the ResourceClaimTemplate tmpl (gd_webhook_template; its metadata.name) exists in
 * namespace ns with its spec (gd_webhook_template_same): 0, or a negative errno with a message
 * in err (-EEXIST: one of that name whose spec differs). arg is the conf's.
 */
typedef int gd_webhook_ensure_fn(const char *ns, const json_t *tmpl, void *arg, char *err,
                                 size_t errlen);

struct gd_webhook_conf {
    const char *lib_dir; /* the node's directory of libgpuslice.so and ld.so.preload */
    const char *run_dir; /* the node's gpusliced run directory (pods mount its GD_POD_RUN_DIR) */
    /*
     * webhook-claims: a GPU pod's slice becomes a claim of the DRA driver instead of the
     * interposer's mounts. latency_namespaces is pod-latency-namespaces (NULL: none); ensure
     * makes the templates (NULL: every pod that needs one is refused), called with ensure_arg.
     */
    int claims;
    const char *latency_namespaces;
    gd_webhook_ensure_fn *ensure;
    void *ensure_arg;
};

/*
 * The AdmissionReview answering the AdmissionReview body (a new reference): allowed with a
 * JSON Patch (base64, as the API wants it) that injects the interposer (or, in claims mode,
 * gives the pod its claim), allowed untouched, or refused with a message naming what is
 * wrong. NULL, with a message in err, when body is not an AdmissionReview (answered 400).
 */
json_t *gd_webhook_review(const char *body, size_t len, const struct gd_webhook_conf *conf,
                          char *err, size_t errlen);

/* The ensure of gpusliced (webhook_api.c): GET, POST on 404, GET again on 409, by kube.c. */
int gd_webhook_ensure_template(const char *ns, const json_t *tmpl, void *arg, char *err,
                               size_t errlen);

/* A pod's slice as one request of a claim: each of its count GPUs gets the same. */
struct gd_webhook_slice {
    uint64_t mem_mib;  /* memory, MiB, a multiple of 256 (rounded up); 0: none asked (all) */
    int cores;         /* 1..100; 0: none asked (no ceiling) */
    uint32_t count;    /* GPUs, 1..GD_DRA_MAX_DEVS */
    uint32_t priority; /* GPUSLICE_PRIORITY_*; GPUSLICE_PRIORITY_UNSET: none asked */
};

/*
 * The slice of pod (namespace ns) from its limits (gd_pod_spec): memory and compute from their
 * defaults (one size, one percentage: per-GPU entries are refused), count from nvidia.com/gpu
 * (1 without it), the priority class where latency_ns allows it (gd_pod_class_allowed). 0, or
 * -EINVAL / -EPERM with a message in err naming the annotation or resource.
 */
int gd_webhook_slice(const json_t *pod, const char *ns, const char *latency_ns,
                     struct gd_webhook_slice *s, char *err, size_t errlen);

/*
 * The name of the template of slice s, the same for the same slice:
 * gpuslice-m<MiB>mi-c<cores>-n<count>[-<class>] (m and c left out when not asked).
 */
void gd_webhook_template_name(const struct gd_webhook_slice *s, char *out, size_t len);

/*
 * The ResourceClaimTemplate of slice s in namespace ns (a new reference): one request "gpu" of
 * exactly count devices of class GD_DEVICE_CLASS with the capacity s asks, the class as the
 * driver's opaque configuration, labelled app.kubernetes.io/managed-by: gpuslice.
 */
json_t *gd_webhook_template(const struct gd_webhook_slice *s, const char *ns);

/*
 * Whether two ResourceClaimTemplates ask the same (their spec.spec read back into a slice, the
 * API server's defaults and quantities' forms aside): 1, or 0 (also when either is not one
 * gd_webhook_template makes).
 */
int gd_webhook_template_same(const json_t *a, const json_t *b);

#endif
