/*
 * The mutating admission webhook's answer (webhook.c): the interposer into a
 * pod through hostPath volumes, /etc/ld.so.preload and GPUSLICE_POD=1.
 */
#ifndef GPUSLICE_DAEMON_WEBHOOK_H
#define GPUSLICE_DAEMON_WEBHOOK_H

#include <jansson.h>
#include <stddef.h>

#define GD_ANN_INJECT "gpuslice.io/inject"     /* "false": leave the pod as it is */
#define GD_ANN_INJECTED "gpuslice.io/injected" /* set by the webhook */

/*
 * The directory of the run directory that pods mount (pods.c keeps it): all a pod's process
 * needs of the daemon and nothing else (not the API's socket): the node segment, the pods'
 * and the boards' sockets (hard links of the run directory's own), and an empty "tenants" that
 * the run directory's tenants/ (read-only, for the classes of other tenants) is mounted on.
 */
#define GD_POD_RUN_DIR "pod"

struct gd_webhook_conf {
    const char *lib_dir; /* the node's directory of libgpuslice.so and ld.so.preload */
    const char *run_dir; /* the node's gpusliced run directory (pods mount its GD_POD_RUN_DIR) */
};

/*
 * The AdmissionReview answering the AdmissionReview body (a new reference): allowed with a
 * JSON Patch (base64, as the API wants it) that injects the interposer, allowed untouched,
 * or refused with a message naming what is wrong. NULL, with a message in err, when body is
 * not an AdmissionReview (answered 400).
 */
json_t *gd_webhook_review(const char *body, size_t len, const struct gd_webhook_conf *conf,
                          char *err, size_t errlen);

#endif
