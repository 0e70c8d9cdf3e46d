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

struct gd_webhook_conf {
    const char *lib_dir; /* the node's directory of libgpuslice.so and ld.so.preload */
    const char *run_dir; /* the node's gpusliced run directory */
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
