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
 *
 * In webhook-claims mode (conf->claims) pods keep the form they know, and the
 * scheduler places them: a GPU pod's slice (its annotations, HAMi's resources)
 * becomes a claim of the DRA driver, from a ResourceClaimTemplate named after
 * the slice that the webhook makes sure of in the pod's namespace (claims_patch
 * below). The pod's annotations stay the one source of its limits: the
 * template is derived from them, never written by the pod's author.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/env.h"
#include "daemon/dra.h"
#include "daemon/podspec.h"
#include "daemon/webhook.h"
#include "gpuslice/tenant_abi.h"

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

/* ---- webhook-claims ---- */

#define CLAIM_REQUEST "gpu" /* the template's one request */

/* A limit that one request can carry: its default alone; -EINVAL (err) for per-GPU entries. */
static int one_value(const struct gs_limits *l, const char *what, const char *example, uint64_t *v,
                     char *err, size_t errlen)
{
    *v = 0;
    if (l->n == 0)
        return 0;
    if (l->n == 1 && l->e[0].key == GS_KEY_ALL) {
        *v = l->e[0].value;
        return 0;
    }
    /* (Only an annotation has per-GPU entries: HAMi's resources are one sum.) */
    snprintf(err, errlen,
             "annotation %s: a claim gives each of the pod's GPUs the same slice, so per-GPU "
             "values cannot be placed: give one %s for all (e.g. %s)",
             l->source ? l->source : "?", what, example);
    return -EINVAL;
}

int gd_webhook_slice(const json_t *pod, const char *ns, const char *latency_ns,
                     struct gd_webhook_slice *s, char *err, size_t errlen)
{
    struct gd_pod_spec ps;
    uint64_t mem, cores;
    int r;

    memset(s, 0, sizeof(*s));
    s->priority = GPUSLICE_PRIORITY_UNSET;
    if ((r = gd_pod_spec(pod, &ps, err, errlen)) < 0)
        return r;
    if (ps.sms.n) {
        snprintf(err, errlen,
                 "annotation %s: a claim cannot carry an SM partition (its devices share by "
                 "memory and cores): leave it out, or set " GD_ANN_INJECT
                 ": \"false\" and give the pod its GPU otherwise",
                 GD_ANN_SMS);
        return -EINVAL;
    }
    if (one_value(&ps.memory, "size", "8G", &mem, err, errlen) < 0 ||
        one_value(&ps.compute, "percentage", "50", &cores, err, errlen) < 0)
        return -EINVAL;
    if (ps.gpus > GD_DRA_MAX_DEVS) {
        snprintf(err, errlen,
                 "resource " GD_NVIDIA_GPU ": %" PRIu32 " GPUs in one claim; the driver gives at "
                 "most %d",
                 ps.gpus, GD_DRA_MAX_DEVS);
        return -EINVAL;
    }
    /*
     * The class goes into the template's configuration, which the node's driver judges again
     * (dra.c: latency only for pod-latency-namespaces); refused here too, so that the pod's
     * author hears of it at once rather than from a claim that never becomes ready.
     */
    if ((r = gd_pod_class_allowed(&ps, ns, latency_ns ? latency_ns : "", err, errlen)) < 0)
        return r;
    /* Memory in steps of 256 MiB, rounded up as the scheduler rounds a request (KEP-5075). */
    s->mem_mib = (mem / GD_DRA_MEM_STEP + (mem % GD_DRA_MEM_STEP != 0)) * (GD_DRA_MEM_STEP >> 20);
    s->cores = (int)cores;
    s->count = ps.gpus ? ps.gpus : 1;
    s->priority = ps.priority;
    return 0;
}

void gd_webhook_template_name(const struct gd_webhook_slice *s, char *out, size_t len)
{
    char m[32] = "", c[16] = "", p[24] = "";

    if (s->mem_mib)
        snprintf(m, sizeof(m), "m%" PRIu64 "mi-", s->mem_mib);
    if (s->cores)
        snprintf(c, sizeof(c), "c%d-", s->cores);
    if (s->priority != GPUSLICE_PRIORITY_UNSET)
        snprintf(p, sizeof(p), "-%s", gs_priority_name(s->priority));
    snprintf(out, len, GD_POD_CLAIM_TEMPLATE_PREFIX "%s%sn%" PRIu32 "%s", m, c, s->count, p);
}

json_t *gd_webhook_template(const struct gd_webhook_slice *s, const char *ns)
{
    char name[128], q[32];
    json_t *req = json_object(), *exactly, *devices, *t;

    gd_webhook_template_name(s, name, sizeof(name));
    if (s->mem_mib) {
        snprintf(q, sizeof(q), "%" PRIu64 "Mi", s->mem_mib);
        json_object_set_new(req, "memory", json_string(q));
    }
    if (s->cores) {
        snprintf(q, sizeof(q), "%d", s->cores);
        json_object_set_new(req, "cores", json_string(q));
    }
    exactly = json_pack("{s:s, s:s, s:I}", "deviceClassName", GD_DEVICE_CLASS, "allocationMode",
                        "ExactCount", "count", (json_int_t)s->count);
    /* No capacity asked: each device consumes its capacities' defaults (the whole memory). */
    if (json_object_size(req))
        json_object_set_new(exactly, "capacity", json_pack("{s:o}", "requests", req));
    else
        json_decref(req);
    devices = json_pack("{s:[{s:s, s:o}]}", "requests", "name", CLAIM_REQUEST, "exactly", exactly);
    if (s->priority != GPUSLICE_PRIORITY_UNSET)
        json_object_set_new(devices, "config",
                            json_pack("[{s:[s], s:{s:s, s:{s:s, s:s, s:s}}}]", "requests",
                                      CLAIM_REQUEST, "opaque", "driver", GD_DRA_DRIVER,
                                      "parameters", "apiVersion", "gpu.gpuslice.io/v1alpha1",
                                      "kind", "ClaimConfig", "priority",
                                      gs_priority_name(s->priority)));
    t = json_pack("{s:s, s:s, s:{s:s, s:s, s:{s:s}}, s:{s:{s:o}}}", "apiVersion",
                  "resource.k8s.io/v1", "kind", "ResourceClaimTemplate", "metadata", "name", name,
                  "namespace", ns, "labels", "app.kubernetes.io/managed-by", "gpuslice", "spec",
                  "spec", "devices", devices);
    return t;
}

/* Whether v is the string want. */
static int str_is(const json_t *v, const char *want)
{
    return json_is_string(v) && strcmp(json_string_value(v), want) == 0;
}

/* A quantity of a template: 0 (absent: *v 0) or -1. */
static int tmpl_quantity(const json_t *v, uint64_t *out)
{
    *out = 0;
    if (v == NULL)
        return 0;
    return json_is_string(v) && gs_parse_quantity(json_string_value(v), out) == 0 ? 0 : -1;
}

/*
 * A template's spec.spec read back into a slice: 0, or -1 when it is not exactly a form
 * gd_webhook_template makes (any other field, selector or request is a difference). The API
 * server's defaults (allocationMode ExactCount, count 1) count as given; spec.metadata (the
 * labels of the claims made) changes no allocation and is not looked at.
 */
static int tmpl_slice(const json_t *t, struct gd_webhook_slice *s)
{
    const json_t *devs = json_object_get(json_object_get(json_object_get(t, "spec"), "spec"),
                                         "devices"),
                 *reqs = json_object_get(devs, "requests"), *r = json_array_get(reqs, 0),
                 *ex = json_object_get(r, "exactly"), *cap = json_object_get(ex, "capacity"),
                 *rq = json_object_get(cap, "requests"), *cfg = json_object_get(devs, "config"),
                 *v;
    const char *key, *mode = json_string_value(json_object_get(ex, "allocationMode"));
    json_t *count = json_object_get(ex, "count");
    uint64_t mem, cores;

    memset(s, 0, sizeof(*s));
    s->priority = GPUSLICE_PRIORITY_UNSET;
    if (!json_is_object(devs) || json_array_size(reqs) != 1 || json_object_size(r) != 2 ||
        !str_is(json_object_get(r, "name"), CLAIM_REQUEST) ||
        !json_is_object(ex) ||
        !str_is(json_object_get(ex, "deviceClassName"), GD_DEVICE_CLASS) ||
        (mode && strcmp(mode, "ExactCount") != 0) ||
        (count && (!json_is_integer(count) || json_integer_value(count) < 1 ||
                   json_integer_value(count) > GD_DRA_MAX_DEVS)))
        return -1;
    json_object_foreach((json_t *)ex, key, v)
        if (strcmp(key, "deviceClassName") != 0 && strcmp(key, "allocationMode") != 0 &&
            strcmp(key, "count") != 0 && strcmp(key, "capacity") != 0)
            return -1;
    json_object_foreach((json_t *)devs, key, v)
        if (strcmp(key, "requests") != 0 && strcmp(key, "config") != 0)
            return -1;
    if ((cap && (json_object_size(cap) != 1 || !json_is_object(rq))) ||
        json_object_size(rq) != (size_t)(json_object_get(rq, "memory") != NULL) +
                                    (size_t)(json_object_get(rq, "cores") != NULL) ||
        tmpl_quantity(json_object_get(rq, "memory"), &mem) < 0 ||
        tmpl_quantity(json_object_get(rq, "cores"), &cores) < 0 || mem % GD_DRA_MEM_STEP != 0 ||
        cores > 100 || (json_object_get(rq, "memory") && mem == 0) ||
        (json_object_get(rq, "cores") && cores == 0))
        return -1;
    s->mem_mib = mem >> 20;
    s->cores = (int)cores;
    s->count = count ? (uint32_t)json_integer_value(count) : 1;
    if (cfg) {
        const json_t *c0 = json_array_get(cfg, 0), *op = json_object_get(c0, "opaque"),
                     *par = json_object_get(op, "parameters"), *rn = json_object_get(c0, "requests");
        const char *prio = json_string_value(json_object_get(par, "priority"));
        uint32_t p;

        if (json_array_size(cfg) != 1 || json_object_size(c0) != 2 || json_array_size(rn) != 1 ||
            !str_is(json_array_get(rn, 0), CLAIM_REQUEST) ||
            json_object_size(op) != 2 ||
            !str_is(json_object_get(op, "driver"), GD_DRA_DRIVER) ||
            !prio || gs_parse_priority(prio, &p) < 0 ||
            json_object_size(par) != 1u + (json_object_get(par, "apiVersion") != NULL) +
                                         (json_object_get(par, "kind") != NULL))
            return -1;
        s->priority = p;
    }
    return 0;
}

int gd_webhook_template_same(const json_t *a, const json_t *b)
{
    struct gd_webhook_slice x, y;

    return tmpl_slice(a, &x) == 0 && tmpl_slice(b, &y) == 0 && x.mem_mib == y.mem_mib &&
           x.cores == y.cores && x.count == y.count && x.priority == y.priority;
}

static void op_remove(json_t *patch, const char *path)
{
    json_array_append_new(patch, json_pack("{s:s, s:s}", "op", "remove", "path", path));
}

/* A key as a JSON Pointer's reference token: '~' as "~0", '/' as "~1". */
static void pointer_token(const char *key, char *out, size_t len)
{
    size_t o = 0;

    for (; *key && o + 3 < len; key++) {
        if (*key == '~' || *key == '/') {
            out[o++] = '~';
            out[o++] = *key == '~' ? '0' : '1';
        } else {
            out[o++] = *key;
        }
    }
    out[o] = '\0';
}

/* The resources by which a container asks a device plugin (or HAMi) for a GPU. */
static const char *const plugin_resources[] = { GD_NVIDIA_GPU, GD_HAMI_MEM, GD_HAMI_CORES,
                                                GD_HAMI_PRIORITY };

static int asks_plugin(const json_t *c)
{
    const json_t *res = json_object_get(c, "resources");
    size_t r;

    for (r = 0; r < sizeof(plugin_resources) / sizeof(plugin_resources[0]); r++)
        if (json_object_get(json_object_get(res, "limits"), plugin_resources[r]) ||
            json_object_get(json_object_get(res, "requests"), plugin_resources[r]))
            return 1;
    return 0;
}

/* Whether container c names the pod's claim GD_POD_CLAIM in resources.claims. */
static int names_claim(const json_t *c)
{
    const json_t *e;
    size_t i;

    json_array_foreach(json_object_get(json_object_get(c, "resources"), "claims"), i, e)
        if (str_is(json_object_get(e, "name"), GD_POD_CLAIM))
            return 1;
    return 0;
}

/* A namespace as the API names them (a DNS label): safe in the template's URL. */
static int dns_label(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 63 && strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789-") == n &&
           s[0] != '-' && s[n - 1] != '-';
}

/*
 * The claims mode's patch for pod of namespace ns (a new array), NULL with nothing to do, or
 * NULL with why (and *code, the HTTP status of the refusal) when the pod must be refused.
 *
 * A pod already in claim form (a claim of its own from a template gpuslice-*, the webhook's
 * from an earlier call among them) is left as it is: a second call adds nothing. Else the
 * pod's slice (gd_webhook_slice) names a template, which conf->ensure makes sure of (not on a
 * dry run: sideEffects NoneOnDryRun), and the patch:
 *   - adds the claim {name: gpuslice, resourceClaimTemplateName: T} to spec.resourceClaims;
 *   - adds {name: gpuslice} to resources.claims of each container and init container that
 *     asks for a GPU by a resource, or of every one when the pod asks by annotations only;
 *   - removes nvidia.com/gpu, gpumem, gpucores and priority from their limits and requests:
 *     the claim brings the GPU (through its CDI spec), and neither the NVIDIA device plugin
 *     nor HAMi's scheduler must take one too (nor can a node without them place the pod);
 *     their values are in the template already;
 *   - sets the annotation gpuslice.io/claim-template: T, for people.
 * It does not add the interposer's mounts: the claim's CDI spec brings the same ones (both
 * would mount /etc/ld.so.preload).
 */
static json_t *claims_patch(const json_t *pod, const char *ns, int dry_run,
                            const struct gd_webhook_conf *conf, int *code, char *why,
                            size_t whylen)
{
    const char *const lists[] = { "containers", "initContainers" };
    const json_t *spec = json_object_get(pod, "spec"), *md = json_object_get(pod, "metadata"),
                 *rc, *c;
    struct gd_webhook_slice sl;
    char name[128], path[256], tok[64], msg[512];
    json_t *patch, *tmpl;
    size_t i, k, r;
    int any_asks = 0, e;

    *code = 422;
    json_array_foreach(json_object_get(spec, "resourceClaims"), i, rc)
    {
        const char *t = json_string_value(json_object_get(rc, "resourceClaimTemplateName"));

        if (t && strncmp(t, GD_POD_CLAIM_TEMPLATE_PREFIX, strlen(GD_POD_CLAIM_TEMPLATE_PREFIX)) ==
                     0)
            return NULL; /* in claim form already (a second call: nothing to add) */
    }
    if (!gd_pod_wants_gpus(pod))
        return NULL;
    json_array_foreach(json_object_get(spec, "resourceClaims"), i, rc)
        if (str_is(json_object_get(rc, "name"), GD_POD_CLAIM)) {
            snprintf(why, whylen,
                     "the pod has a claim named " GD_POD_CLAIM
                     " that is not gpuslice's (rename it, or set " GD_ANN_INJECT
                     ": \"false\" to opt out)");
            return NULL;
        }
    if (!json_is_object(spec) || !json_is_array(json_object_get(spec, "containers"))) {
        snprintf(why, whylen, "the pod has no spec.containers");
        return NULL;
    }
    if (!ns || !dns_label(ns)) {
        snprintf(why, whylen, "the pod's namespace \"%.64s\" is not a namespace's name",
                 ns ? ns : "");
        return NULL;
    }
    if (gd_webhook_slice(pod, ns, conf->latency_namespaces, &sl, why, whylen) < 0)
        return NULL;
    gd_webhook_template_name(&sl, name, sizeof(name));
    if (!dry_run) {
        if (!conf->ensure) {
            *code = 500;
            snprintf(why, whylen, "the webhook cannot make ResourceClaimTemplate %s/%s: it "
                     "speaks to no API server", ns, name);
            return NULL;
        }
        if (!(tmpl = gd_webhook_template(&sl, ns)))
            return NULL; /* (no memory: why is empty, the pod allowed untouched) */
        msg[0] = '\0';
        e = conf->ensure(ns, tmpl, conf->ensure_arg, msg, sizeof(msg));
        json_decref(tmpl);
        if (e < 0) {
            *code = e == -EEXIST ? 409 : 500;
            snprintf(why, whylen, "ResourceClaimTemplate %s/%s: %s", ns, name,
                     msg[0] ? msg : "it could not be made");
            return NULL;
        }
    }
    patch = json_array();
    if (!json_is_array(json_object_get(spec, "resourceClaims")))
        op_add(patch, "/spec/resourceClaims", json_array());
    op_add(patch, "/spec/resourceClaims/-",
           json_pack("{s:s, s:s}", "name", GD_POD_CLAIM, "resourceClaimTemplateName", name));
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(spec, lists[k]), i, c) any_asks |= asks_plugin(c);
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(spec, lists[k]), i, c)
        {
            const json_t *res = json_object_get(c, "resources");
            const char *const parts[] = { "limits", "requests" };
            size_t q;

            if (any_asks && !asks_plugin(c))
                continue;
            if (!names_claim(c)) {
                if (!json_is_object(res)) {
                    snprintf(path, sizeof(path), "/spec/%s/%zu/resources", lists[k], i);
                    op_add(patch, path, json_object());
                }
                if (!json_is_array(json_object_get(res, "claims"))) {
                    snprintf(path, sizeof(path), "/spec/%s/%zu/resources/claims", lists[k], i);
                    op_add(patch, path, json_array());
                }
                snprintf(path, sizeof(path), "/spec/%s/%zu/resources/claims/-", lists[k], i);
                op_add(patch, path, json_pack("{s:s}", "name", GD_POD_CLAIM));
            }
            for (q = 0; q < 2; q++)
                for (r = 0; r < sizeof(plugin_resources) / sizeof(plugin_resources[0]); r++)
                    if (json_object_get(json_object_get(res, parts[q]), plugin_resources[r])) {
                        pointer_token(plugin_resources[r], tok, sizeof(tok));
                        snprintf(path, sizeof(path), "/spec/%s/%zu/resources/%s/%s", lists[k],
                                 i, parts[q], tok);
                        op_remove(patch, path);
                    }
        }
    if (!json_is_object(json_object_get(md, "annotations")))
        op_add(patch, "/metadata/annotations", json_object());
    /* "add" of a member that is there replaces it (RFC 6902): a record for people. */
    op_add(patch, "/metadata/annotations/gpuslice.io~1claim-template", json_string(name));
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
    const char *uid, *kind, *ns, *opt;
    char why[1024];
    int code = 422;

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
    } else if (conf->claims && (!(opt = annotation(pod, GD_ANN_INJECT)) ||
                                strcmp(opt, "true") == 0)) {
        /* (Opted out, or a bad value of the opt-out: patch_for's answer, below, as ever.) */
        ns = json_string_value(json_object_get(req, "namespace"));
        if (!ns)
            ns = json_string_value(
                json_object_get(json_object_get(pod, "metadata"), "namespace"));
        why[0] = '\0';
        patch = claims_patch(pod, ns, json_is_true(json_object_get(req, "dryRun")), conf, &code,
                             why, sizeof(why));
    } else {
        patch = patch_for(pod, conf, why, sizeof(why));
    }
    if (why[0]) {
        json_object_set_new(resp, "allowed", json_false());
        json_object_set_new(resp, "status",
                            json_pack("{s:i, s:s, s:s}", "code", code, "reason",
                                      code == 422   ? "Invalid"
                                      : code == 409 ? "Conflict"
                                                    : "InternalError",
                                      "message", why));
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
