/*
 * The mutating admission webhook that puts the interposer into a pod without
 * changing its image. For a pod that asks for GPUs (nvidia.com/gpu, HAMi's
 * resources, or a gpuslice or TensorFusion GPU annotation), and has not opted
 * out with gpuslice.io/inject: "false", the answer is a JSON Patch that adds:
 *
 *   - two hostPath volumes: the node's interposer directory (libgpuslice.so
 *     and an ld.so.preload naming it, which the DaemonSet installs) and the
 *     daemon's run directory (its node segment, sockets, tenants' files);
 *   - to every container and init container: the interposer directory at
 *     /usr/local/gpuslice (read-only), its ld.so.preload at /etc/ld.so.preload
 *     (so every dynamically linked program of the image, nvidia-smi too,
 *     loads the interposer, whatever the image's own LD_PRELOAD), the run
 *     directory at /run/gpuslice, and GPUSLICE_POD=1 (CUDA fails unless the
 *     daemon joins the process to the pod's tenant, by its cgroup);
 *   - the annotation gpuslice.io/injected: "true" (a second call adds nothing).
 *
 * Everything here is input from whoever creates pods: a value of the opt-out
 * annotation other than "true" or "false", or a pod that already has a volume
 * or mount of ours, is refused (allowed: false) with a message naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "daemon/webhook.h"

#define VOL_LIB "gpuslice-lib"
#define VOL_RUN "gpuslice-run"
#define MNT_LIB "/usr/local/gpuslice"
#define MNT_RUN "/run/gpuslice"
#define MNT_PRELOAD "/etc/ld.so.preload"

static const char *annotation(const json_t *pod, const char *name)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), name));
}

/* Whether the pod asks for GPUs in any of the forms the daemon reads. */
static int wants_gpus(const json_t *pod)
{
    static const char *const res[] = { "nvidia.com/gpu", "nvidia.com/gpumem",
                                       "nvidia.com/gpucores" };
    static const char *const ann[] = {
        "gpuslice.io/memory",          "gpuslice.io/compute",
        "gpuslice.io/priority",        "gpuslice.io/sms",
        "tensor-fusion.ai/vram-limit", "tensor-fusion.ai/compute-percent-limit",
        "tensor-fusion.ai/qos"
    };
    const json_t *anns = json_object_get(json_object_get(pod, "metadata"), "annotations");
    const char *const lists[] = { "containers", "initContainers" };
    size_t i, k, r;
    const json_t *c;

    for (k = 0; k < sizeof(ann) / sizeof(ann[0]); k++)
        if (json_object_get(anns, ann[k]))
            return 1;
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(json_object_get(pod, "spec"), lists[k]), i, c)
        {
            const json_t *res_ = json_object_get(c, "resources");

            for (r = 0; r < sizeof(res) / sizeof(res[0]); r++)
                if (json_object_get(json_object_get(res_, "limits"), res[r]) ||
                    json_object_get(json_object_get(res_, "requests"), res[r]))
                    return 1;
        }
    return 0;
}

static void op_add(json_t *patch, const char *path, json_t *value)
{
    json_array_append_new(patch,
                          json_pack("{s:s, s:s, s:o}", "op", "add", "path", path, "value", value));
}

/* Whether array a (of objects) has one whose key is val. */
static int has_named(const json_t *a, const char *key, const char *val)
{
    const json_t *v;
    size_t i;

    json_array_foreach(a, i, v)
    {
        const char *s = json_string_value(json_object_get(v, key));

        if (s && strcmp(s, val) == 0)
            return 1;
    }
    return 0;
}

/*
 * The patch for pod (a new array), NULL with nothing to do, or NULL with why set when the pod
 * must be refused.
 */
static json_t *patch_for(const json_t *pod, const struct gd_webhook_conf *conf, char *why,
                         size_t whylen)
{
    const char *opt = annotation(pod, GD_ANN_INJECT);
    const json_t *spec = json_object_get(pod, "spec"), *c;
    const char *const lists[] = { "containers", "initContainers" };
    json_t *patch;
    size_t i, k;
    char path[128];

    why[0] = '\0';
    if (opt && strcmp(opt, "true") != 0 && strcmp(opt, "false") != 0) {
        snprintf(why, whylen, "annotation " GD_ANN_INJECT ": \"%.64s\": give \"true\" or \"false\"",
                 opt);
        return NULL;
    }
    if ((opt && strcmp(opt, "false") == 0) || !wants_gpus(pod))
        return NULL;
    if (json_is_string(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "annotations"), GD_ANN_INJECTED)))
        return NULL; /* a second call (reinvocation): done already */
    if (!json_is_object(spec) || !json_is_array(json_object_get(spec, "containers"))) {
        snprintf(why, whylen, "the pod has no spec.containers");
        return NULL;
    }
    if (has_named(json_object_get(spec, "volumes"), "name", VOL_LIB) ||
        has_named(json_object_get(spec, "volumes"), "name", VOL_RUN)) {
        snprintf(why, whylen,
                 "the pod already has a volume named " VOL_LIB " or " VOL_RUN
                 ", which gpuslice's injection adds (set " GD_ANN_INJECT ": \"false\" to opt out)");
        return NULL;
    }
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(spec, lists[k]), i, c)
        {
            const json_t *m = json_object_get(c, "volumeMounts");

            if (has_named(m, "mountPath", MNT_PRELOAD) || has_named(m, "mountPath", MNT_LIB) ||
                has_named(m, "mountPath", MNT_RUN) ||
                has_named(json_object_get(c, "env"), "name", GS_ENV_POD)) {
                snprintf(why, whylen,
                         "container %.64s already mounts " MNT_PRELOAD ", " MNT_LIB " or " MNT_RUN
                         ", or sets " GS_ENV_POD
                         ", which gpuslice's injection adds (set " GD_ANN_INJECT
                         ": \"false\" to opt out)",
                         json_string_value(json_object_get(c, "name"))
                             ? json_string_value(json_object_get(c, "name"))
                             : "?");
                return NULL;
            }
        }
    patch = json_array();
    if (!json_is_array(json_object_get(spec, "volumes")))
        op_add(patch, "/spec/volumes", json_array());
    op_add(patch, "/spec/volumes/-",
           json_pack("{s:s, s:{s:s, s:s}}", "name", VOL_LIB, "hostPath", "path", conf->lib_dir,
                     "type", "Directory"));
    op_add(patch, "/spec/volumes/-",
           json_pack("{s:s, s:{s:s, s:s}}", "name", VOL_RUN, "hostPath", "path", conf->run_dir,
                     "type", "Directory"));
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(spec, lists[k]), i, c)
        {
            if (!json_is_array(json_object_get(c, "volumeMounts"))) {
                snprintf(path, sizeof(path), "/spec/%s/%zu/volumeMounts", lists[k], i);
                op_add(patch, path, json_array());
            }
            snprintf(path, sizeof(path), "/spec/%s/%zu/volumeMounts/-", lists[k], i);
            op_add(
                patch, path,
                json_pack("{s:s, s:s, s:b}", "name", VOL_LIB, "mountPath", MNT_LIB, "readOnly", 1));
            op_add(patch, path,
                   json_pack("{s:s, s:s, s:s, s:b}", "name", VOL_LIB, "mountPath", MNT_PRELOAD,
                             "subPath", "ld.so.preload", "readOnly", 1));
            op_add(patch, path, json_pack("{s:s, s:s}", "name", VOL_RUN, "mountPath", MNT_RUN));
            if (!json_is_array(json_object_get(c, "env"))) {
                snprintf(path, sizeof(path), "/spec/%s/%zu/env", lists[k], i);
                op_add(patch, path, json_array());
            }
            snprintf(path, sizeof(path), "/spec/%s/%zu/env/-", lists[k], i);
            op_add(patch, path, json_pack("{s:s, s:s}", "name", GS_ENV_POD, "value", "1"));
        }
    if (!json_is_object(json_object_get(json_object_get(pod, "metadata"), "annotations")))
        op_add(patch, "/metadata/annotations", json_object());
    /* JSON Pointer: '/' in a key is written "~1". */
    op_add(patch, "/metadata/annotations/gpuslice.io~1injected", json_string("true"));
    return patch;
}

static char *base64(const char *s, size_t n)
{
    static const char t[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc(4 * ((n + 2) / 3) + 1), *o = out;
    size_t i;

    if (out == NULL)
        return NULL;
    for (i = 0; i + 2 < n; i += 3) {
        unsigned v = (unsigned)(unsigned char)s[i] << 16 | (unsigned)(unsigned char)s[i + 1] << 8 |
                     (unsigned char)s[i + 2];

        *o++ = t[v >> 18];
        *o++ = t[(v >> 12) & 63];
        *o++ = t[(v >> 6) & 63];
        *o++ = t[v & 63];
    }
    if (i < n) {
        unsigned v = (unsigned)(unsigned char)s[i] << 16 |
                     (i + 1 < n ? (unsigned)(unsigned char)s[i + 1] << 8 : 0);

        *o++ = t[v >> 18];
        *o++ = t[(v >> 12) & 63];
        *o++ = i + 1 < n ? t[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

json_t *gd_webhook_review(const char *body, size_t len, const struct gd_webhook_conf *conf,
                          char *err, size_t errlen)
{
    json_error_t je;
    json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *req, *pod, *resp, *patch;
    const char *uid, *kind;
    char why[512];

    if (doc == NULL) {
        snprintf(err, errlen, "the body is not JSON: %s (line %d)", je.text, je.line);
        return NULL;
    }
    req = json_object_get(doc, "request");
    uid = json_string_value(json_object_get(req, "uid"));
    kind = json_string_value(json_object_get(json_object_get(req, "kind"), "kind"));
    pod = json_object_get(req, "object");
    if (!json_is_object(req) || !uid || strlen(uid) > 128 || !json_is_object(pod)) {
        snprintf(err, errlen,
                 "not an AdmissionReview: give {\"apiVersion\": "
                 "\"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", "
                 "\"request\": {\"uid\", \"kind\", \"object\"}}");
        json_decref(doc);
        return NULL;
    }
    resp = json_pack("{s:s, s:b}", "uid", uid, "allowed", 1);
    if (kind && strcmp(kind, "Pod") != 0) {
        patch = NULL; /* the configuration sends pods only: anything else passes untouched */
        why[0] = '\0';
    } else {
        patch = patch_for(pod, conf, why, sizeof(why));
    }
    if (why[0]) {
        json_object_set_new(resp, "allowed", json_false());
        json_object_set_new(
            resp, "status",
            json_pack("{s:i, s:s, s:s}", "code", 422, "reason", "Invalid", "message", why));
    } else if (patch) {
        char *text = json_dumps(patch, JSON_COMPACT),
             *b64 = text ? base64(text, strlen(text)) : NULL;

        if (b64) {
            json_object_set_new(resp, "patchType", json_string("JSONPatch"));
            json_object_set_new(resp, "patch", json_string(b64));
        }
        free(text);
        free(b64);
        json_decref(patch);
        if (!b64) {
            snprintf(err, errlen, "out of memory");
            json_decref(resp);
            json_decref(doc);
            return NULL;
        }
    }
    json_decref(doc);
    return json_pack("{s:s, s:s, s:o}", "apiVersion", "admission.k8s.io/v1", "kind",
                     "AdmissionReview", "response", resp);
}
