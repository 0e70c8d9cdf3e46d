/*
 * The mutating admission webhook that puts the interposer into a pod without
 * changing its image. For a GPU pod (gd_pod_wants_gpus: the same definition
 * the daemon makes tenants by) that has not opted out with
 * gpuslice.io/inject: "false", the answer is a JSON Patch that adds:
 *
 *   - three hostPath volumes: the node's interposer directory (libgpuslice.so
 *     and an ld.so.preload naming it, which the DaemonSet installs), the
 *     daemon's run directory's pod/ (GD_POD_RUN_DIR: the node segment and the
 *     pods' and boards' sockets, never the API's socket) and its tenants/;
 *   - to every container and init container: the interposer directory at
 *     /usr/local/gpuslice (read-only), its ld.so.preload at /etc/ld.so.preload
 *     (so every dynamically linked program of the image, nvidia-smi too,
 *     loads the interposer, whatever the image's own LD_PRELOAD), pod/ at
 *     /run/gpuslice and tenants/ at /run/gpuslice/tenants, read-only, and
 *     GPUSLICE_POD=1 (CUDA fails unless the daemon joins the process to the
 *     pod's tenant, by its cgroup);
 *   - the annotation gpuslice.io/injected: "true", for people (a second call
 *     adds only what a container lacks: it looks at the containers, not at
 *     an annotation anyone can write).
 *
 * Everything here is input from whoever creates pods: a value of the opt-out
 * annotation other than "true" or "false", or a pod that already has a volume
 * or mount of ours, is refused (allowed: false) with a message naming it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "daemon/podspec.h"
#include "daemon/webhook.h"

#define VOL_LIB "gpuslice-lib"
#define VOL_RUN "gpuslice-run"
#define VOL_TENANTS "gpuslice-tenants"
#define MNT_LIB "/usr/local/gpuslice"
#define MNT_RUN "/run/gpuslice"
#define MNT_TENANTS MNT_RUN "/tenants"
#define MNT_PRELOAD "/etc/ld.so.preload"

static const char *annotation(const json_t *pod, const char *name)
{
    return json_string_value(
        json_object_get(json_object_get(json_object_get(pod, "metadata"), "annotations"), name));
}

static void op_add(json_t *patch, const char *path, json_t *value)
{
    json_array_append_new(patch,
                          json_pack("{s:s, s:s, s:o}", "op", "add", "path", path, "value", value));
}

/* A volume of ours in the pod: 1 as we add it, 0 absent, -1 under our name but not ours. */
static int our_volume(const json_t *spec, const char *name, const char *host_path)
{
    const json_t *v;
    size_t i;

    json_array_foreach(json_object_get(spec, "volumes"), i, v)
    {
        const char *n = json_string_value(json_object_get(v, "name"));
        const char *hp = json_string_value(json_object_get(json_object_get(v, "hostPath"), "path"));

        if (n && strcmp(n, name) == 0)
            return hp && strcmp(hp, host_path) == 0 ? 1 : -1;
    }
    return 0;
}

/* The mount of c at path: its volume's name and subPath (NULL for none); NULL if none. */
static const json_t *mount_at(const json_t *c, const char *path)
{
    const json_t *m;
    size_t i;

    json_array_foreach(json_object_get(c, "volumeMounts"), i, m)
    {
        const char *p = json_string_value(json_object_get(m, "mountPath"));

        if (p && strcmp(p, path) == 0)
            return m;
    }
    return NULL;
}

static int mount_is(const json_t *m, const char *vol, const char *sub)
{
    const char *n = json_string_value(json_object_get(m, "name"));
    const char *sp = json_string_value(json_object_get(m, "subPath"));

    return m && n && strcmp(n, vol) == 0 && (sub ? sp && strcmp(sp, sub) == 0 : sp == NULL);
}

/*
 * Container c: 1 it has all the injection gives it (a second call: nothing to add), 0 none
 * of it, -1 some of it, or those paths or GPUSLICE_POD for something else (refused).
 */
static int container_state(const json_t *c)
{
    const json_t *lib = mount_at(c, MNT_LIB), *pre = mount_at(c, MNT_PRELOAD),
                 *run = mount_at(c, MNT_RUN), *ten = mount_at(c, MNT_TENANTS), *e;
    const char *pod_env = NULL;
    size_t i;

    json_array_foreach(json_object_get(c, "env"), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));

        if (n && strcmp(n, GS_ENV_POD) == 0)
            pod_env = json_string_value(json_object_get(e, "value"))
                          ? json_string_value(json_object_get(e, "value"))
                          : "";
    }
    if (!lib && !pre && !run && !ten && !pod_env)
        return 0;
    if (mount_is(lib, VOL_LIB, NULL) && mount_is(pre, VOL_LIB, "ld.so.preload") &&
        mount_is(run, VOL_RUN, NULL) && mount_is(ten, VOL_TENANTS, NULL) && pod_env &&
        strcmp(pod_env, "1") == 0)
        return 1;
    return -1;
}

/*
 * The patch for pod (a new array), NULL with nothing to do, or NULL with why set when the pod
 * must be refused. What is there already is looked at, not an annotation anyone can write: a
 * container that has all of the injection is left as it is, one that has none of it gets it
 * (a sidecar another webhook added after our first call, on the reinvocation), one that has
 * part of it, or those paths for something else, is refused.
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
    char pod_dir[4200], tenants_dir[4200];
    int vlib, vrun, vten, st;

    why[0] = '\0';
    if (opt && strcmp(opt, "true") != 0 && strcmp(opt, "false") != 0) {
        snprintf(why, whylen, "annotation " GD_ANN_INJECT ": \"%.64s\": give \"true\" or \"false\"",
                 opt);
        return NULL;
    }
    if ((opt && strcmp(opt, "false") == 0) || !gd_pod_wants_gpus(pod))
        return NULL;
    if (!json_is_object(spec) || !json_is_array(json_object_get(spec, "containers"))) {
        snprintf(why, whylen, "the pod has no spec.containers");
        return NULL;
    }
    /* The run directory's pod/ only, never the run directory (its API socket makes admins). */
    snprintf(pod_dir, sizeof(pod_dir), "%s/" GD_POD_RUN_DIR, conf->run_dir);
    snprintf(tenants_dir, sizeof(tenants_dir), "%s/tenants", conf->run_dir);
    vlib = our_volume(spec, VOL_LIB, conf->lib_dir);
    vrun = our_volume(spec, VOL_RUN, pod_dir);
    vten = our_volume(spec, VOL_TENANTS, tenants_dir);
    if (vlib < 0 || vrun < 0 || vten < 0) {
        snprintf(why, whylen,
                 "the pod has a volume named " VOL_LIB ", " VOL_RUN " or " VOL_TENANTS
                 " that is not gpuslice's (set " GD_ANN_INJECT ": \"false\" to opt out)");
        return NULL;
    }
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(spec, lists[k]), i, c)
        {
            if (container_state(c) < 0) {
                snprintf(why, whylen,
                         "container %.64s mounts " MNT_PRELOAD ", " MNT_LIB ", " MNT_RUN
                         " or " MNT_TENANTS ", or sets " GS_ENV_POD
                         ", otherwise than gpuslice's injection does "
                         "(set " GD_ANN_INJECT ": \"false\" to opt out)",
                         json_string_value(json_object_get(c, "name"))
                             ? json_string_value(json_object_get(c, "name"))
                             : "?");
                return NULL;
            }
        }
    patch = json_array();
    if (!json_is_array(json_object_get(spec, "volumes")))
        op_add(patch, "/spec/volumes", json_array());
    if (!vlib)
        op_add(patch, "/spec/volumes/-",
               json_pack("{s:s, s:{s:s, s:s}}", "name", VOL_LIB, "hostPath", "path", conf->lib_dir,
                         "type", "Directory"));
    if (!vrun)
        op_add(patch, "/spec/volumes/-",
               json_pack("{s:s, s:{s:s, s:s}}", "name", VOL_RUN, "hostPath", "path", pod_dir,
                         "type", "Directory"));
    if (!vten)
        op_add(patch, "/spec/volumes/-",
               json_pack("{s:s, s:{s:s, s:s}}", "name", VOL_TENANTS, "hostPath", "path",
                         tenants_dir, "type", "Directory"));
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(spec, lists[k]), i, c)
        {
            if ((st = container_state(c)) != 0)
                continue; /* injected already */
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
            /*
             * Read-only, and the run directory's pod/ only: all a pod's process needs (the
             * node segment, the pods' and boards' sockets), not the API's socket, through
             * which root in a container was an admin. A pod's root can write neither the node
             * segment (every tenant's limits) nor plant files; its processes get their
             * tenant's state file from the daemon (gpusliced.pods, SCM_RIGHTS), and sockets
             * connect on a read-only mount. The tenants' directory, read-only on pod/'s empty
             * tenants/, holds the other tenants' class stamps that a process yields to.
             */
            op_add(
                patch, path,
                json_pack("{s:s, s:s, s:b}", "name", VOL_RUN, "mountPath", MNT_RUN, "readOnly", 1));
            op_add(patch, path,
                   json_pack("{s:s, s:s, s:b}", "name", VOL_TENANTS, "mountPath", MNT_TENANTS,
                             "readOnly", 1));
            if (!json_is_array(json_object_get(c, "env"))) {
                snprintf(path, sizeof(path), "/spec/%s/%zu/env", lists[k], i);
                op_add(patch, path, json_array());
            }
            snprintf(path, sizeof(path), "/spec/%s/%zu/env/-", lists[k], i);
            op_add(patch, path, json_pack("{s:s, s:s}", "name", GS_ENV_POD, "value", "1"));
        }
    if (!json_is_string(json_object_get(
            json_object_get(json_object_get(pod, "metadata"), "annotations"), GD_ANN_INJECTED))) {
        if (!json_is_object(json_object_get(json_object_get(pod, "metadata"), "annotations")))
            op_add(patch, "/metadata/annotations", json_object());
        /* JSON Pointer: '/' in a key is written "~1". (A record for people; never believed.) */
        op_add(patch, "/metadata/annotations/gpuslice.io~1injected", json_string("true"));
    }
    /* Only the volumes' array made, or nothing: nothing to do. */
    if (json_array_size(patch) == 0 ||
        (json_array_size(patch) == 1 && !json_is_array(json_object_get(spec, "volumes")))) {
        json_decref(patch);
        return NULL;
    }
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
