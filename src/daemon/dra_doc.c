/*
 * The DRA driver's documents (dra.h), pure functions over jansson values: the node's
 * ResourceSlice, a ResourceClaim read and judged for this node, its CDI spec, and the checkpoint
 * of prepared claims. A claim's status comes from the scheduler and its opaque configuration
 * from the claim's author: every field read is checked, and a bad one is an error naming the
 * claim and the field's path; no string is ever cut to fit.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/parse.h"
#include "common/env.h"
#include "daemon/dra.h"
#include "gpuslice/tenant_abi.h"

#define CORES_MAX 100
#define MAX_PODS                                                                                   \
    ((int)(sizeof(((struct gd_dra_claim *)0)->pod_uid) /                                           \
           sizeof(((struct gd_dra_claim *)0)->pod_uid[0])))
#define MAX_REQS                                                                                   \
    ((int)(sizeof(((struct gd_dra_hold *)0)->request) /                                            \
           sizeof(((struct gd_dra_hold *)0)->request[0])))
/* The opaque parameters' optional type, for claims that name it (as Kubernetes objects do). */
#define CONFIG_API_VERSION "gpu.gpuslice.io/v1alpha1"
#define CONFIG_KIND "ClaimConfig"
#define CHECKPOINT_VERSION 1
/* Upstream's bounds on a device's attribute values (string and version). */
#define ATTR_STRING_MAX 64

/* ---- shared checks ---- */

static int lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* A DNS-1123 subdomain of at most max characters (Kubernetes' object names). */
static int is_dns_subdomain(const char *s, size_t max)
{
    size_t n = strlen(s), i;

    if (n == 0 || n > max || !lower_alnum(s[0]) || !lower_alnum(s[n - 1]))
        return 0;
    for (i = 1; i + 1 < n; i++) {
        if (lower_alnum(s[i]))
            continue;
        if (s[i] == '-' && s[i - 1] != '.' && s[i + 1] != '.')
            continue;
        if (s[i] == '.' && lower_alnum(s[i - 1]) && lower_alnum(s[i + 1]))
            continue;
        return 0;
    }
    return 1;
}

/*
 * The index of a device name gpu-<index> in its one exact form (decimal, no sign, no leading
 * zero, nothing after), or -1: "gpu-01" must not pass for gpu-1.
 */
static int device_index(const char *s)
{
    long v = 0;
    const char *p;

    if (strncmp(s, "gpu-", 4) != 0)
        return -1;
    p = s + 4;
    if (*p == '\0' || (p[0] == '0' && p[1] != '\0'))
        return -1;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
        v = v * 10 + (*p - '0');
        if (v > INT_MAX)
            return -1;
    }
    return (int)v;
}

/*
 * Where the rules of a CDI device name allow it: letters, digits, '-', '_', '.' and ':',
 * beginning and ending with a letter or digit (what the CDI library checks).
 */
static int is_cdi_name(const char *s)
{
    size_t n, i;

    if (s == NULL || (n = strlen(s)) == 0 || n > 128)
        return 0;
    if (!isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1]))
        return 0;
    for (i = 0; i < n; i++)
        if (!isalnum((unsigned char)s[i]) && !strchr("-_.:", s[i]))
            return 0;
    return 1;
}

/* ---- the ResourceSlice ---- */

#define SLICE_SUFFIX "-" GD_DRA_DRIVER

/*
 * The slice's name: <node>-gpu.gpuslice.io where that is a valid name of at most 253
 * characters (node names are DNS subdomains, so this is the usual case and names stay
 * distinct); otherwise the node's name lowered, its other characters made '-', cut to fit,
 * with a hash of the whole node name so that two long names sharing a prefix do not collide.
 */
static void slice_name(const char *node, char out[254])
{
    size_t room = 253 - strlen(SLICE_SUFFIX), n = 0, i;
    uint32_t h = 2166136261u; /* FNV-1a */

    if (is_dns_subdomain(node, room)) {
        snprintf(out, 254, "%s%s", node, SLICE_SUFFIX);
        return;
    }
    for (i = 0; node[i]; i++)
        h = (h ^ (unsigned char)node[i]) * 16777619u;
    room -= 9; /* "-" and 8 hex digits */
    for (i = 0; node[i] && n < room; i++) {
        char c = (char)tolower((unsigned char)node[i]);

        if (!lower_alnum(c))
            c = '-';
        if (c == '-' && (n == 0 || out[n - 1] == '-'))
            continue;
        out[n++] = c;
    }
    while (n > 0 && out[n - 1] == '-')
        n--;
    snprintf(out + n, 254 - n, "%s%08" PRIx32 "%s", n ? "-" : "", h, SLICE_SUFFIX);
}

/* Dot-separated identifiers of [0-9A-Za-z-]; in a pre-release a numeric one has no leading 0. */
static const char *semver_idents(const char *p, int pre)
{
    for (;;) {
        const char *b = p;
        int digits = 1;

        for (; isalnum((unsigned char)*p) || *p == '-'; p++)
            if (!isdigit((unsigned char)*p))
                digits = 0;
        if (p == b || (pre && digits && *b == '0' && p - b > 1))
            return NULL;
        if (*p != '.')
            return p;
        p++;
    }
}

/*
 * A semantic version (semver.org 2.0.0) of at most 64 characters, as a version attribute
 * must be: NVIDIA's "550.54.15" is one, "535.104.05" (a leading zero) and "550.54" are not.
 */
static int is_semver(const char *s)
{
    const char *p = s;
    int i;

    if (strlen(s) > ATTR_STRING_MAX)
        return 0;
    for (i = 0; i < 3; i++) {
        if (*p == '0')
            p++;
        else if (*p >= '1' && *p <= '9')
            while (isdigit((unsigned char)*p))
                p++;
        else
            return 0;
        if (i < 2 && *p++ != '.')
            return 0;
    }
    if (*p == '-' && !(p = semver_idents(p + 1, 1)))
        return 0;
    if (*p == '+' && !(p = semver_idents(p + 1, 0)))
        return 0;
    return *p == '\0';
}

static json_t *quantity(uint64_t v)
{
    char buf[24];

    snprintf(buf, sizeof(buf), "%" PRIu64, v);
    return json_string(buf);
}

/*
 * Attributes are named without a domain, which puts them in the driver's (gpu.gpuslice.io/…):
 * each a C identifier of at most 32 characters. A string attribute longer than upstream's 64
 * characters is left out rather than cut, since one bad attribute fails the whole slice.
 */
static int set_string_attr(json_t *attrs, const char *key, const char *v)
{
    if (v[0] == '\0' || strlen(v) > ATTR_STRING_MAX)
        return 0;
    return json_object_set_new(attrs, key, json_pack("{s:s}", "string", v));
}

static json_t *device_json(const struct gd_dra_gpu *g)
{
    json_t *attrs = json_object(), *cap, *dev;
    uint64_t max = g->mem_total / GD_DRA_MEM_STEP * GD_DRA_MEM_STEP;
    char name[32];

    if (attrs == NULL || g->index < 0)
        goto fail;
    if (set_string_attr(attrs, "uuid", g->uuid) < 0 ||
        set_string_attr(attrs, "productName", g->product) < 0 ||
        set_string_attr(attrs, "architecture", g->arch) < 0 ||
        json_object_set_new(attrs, "index", json_pack("{s:I}", "int", (json_int_t)g->index)) < 0)
        goto fail;
    /* Unknown (0) is left out: a selector on it then fails rather than match a wrong count. */
    if (g->sms > 0 && json_object_set_new(attrs, "multiprocessors",
                                          json_pack("{s:I}", "int", (json_int_t)g->sms)) < 0)
        goto fail;
    if (is_semver(g->driver_version)) {
        if (json_object_set_new(attrs, "driverVersion",
                                json_pack("{s:s}", "version", g->driver_version)) < 0)
            goto fail;
    } else if (set_string_attr(attrs, "driverVersion", g->driver_version) < 0) {
        goto fail;
    }
    /*
     * memory: consumed in steps of 256 MiB from 256 MiB up to the total rounded down, all by
     * default (a claim that names no size gets the GPU). Upstream requires min + step within
     * the capacity: a GPU under 512 MiB publishes its memory without a policy.
     */
    if (max >= 2 * GD_DRA_MEM_STEP)
        cap = json_pack("{s:{s:o, s:{s:o, s:{s:o, s:o, s:o}}}}", "memory", "value",
                        quantity(g->mem_total), "requestPolicy", "default", quantity(max),
                        "validRange", "min", quantity(GD_DRA_MEM_STEP), "step",
                        quantity(GD_DRA_MEM_STEP), "max", quantity(max));
    else
        cap = json_pack("{s:{s:o}}", "memory", "value", quantity(g->mem_total));
    /* cores: a percentage ceiling, none (0) by default. */
    if (cap == NULL ||
        json_object_set_new(cap, "cores",
                            json_pack("{s:s, s:{s:s, s:{s:s, s:s, s:s}}}", "value", "100",
                                      "requestPolicy", "default", "0", "validRange", "min", "0",
                                      "max", "100", "step", "1")) < 0) {
        json_decref(cap);
        goto fail;
    }
    snprintf(name, sizeof(name), "gpu-%d", g->index);
    dev = json_pack("{s:s, s:b, s:o, s:o}", "name", name, "allowMultipleAllocations", 1,
                    "attributes", attrs, "capacity", cap);
    return dev;
fail:
    json_decref(attrs);
    return NULL;
}

json_t *gd_dra_slice_json(const char *node, int64_t generation, const struct gd_dra_gpu *gpu, int n)
{
    json_t *devs, *slice;
    char name[254];
    int i;

    /* At most 128 devices in one slice (upstream); a node name is a DNS subdomain. */
    if (node == NULL || !is_dns_subdomain(node, 253) || n < 0 || n > 128 ||
        (n > 0 && gpu == NULL) || generation < 0)
        return NULL;
    if ((devs = json_array()) == NULL)
        return NULL;
    for (i = 0; i < n; i++)
        if (json_array_append_new(devs, device_json(&gpu[i])) < 0) {
            json_decref(devs);
            return NULL;
        }
    slice_name(node, name);
    slice =
        json_pack("{s:s, s:s, s:{s:s}, s:{s:s, s:s, s:{s:s, s:I, s:i}, s:o}}", "apiVersion",
                  "resource.k8s.io/v1", "kind", "ResourceSlice", "metadata", "name", name, "spec",
                  "driver", GD_DRA_DRIVER, "nodeName", node, "pool", "name", node, "generation",
                  (json_int_t)generation, "resourceSliceCount", 1, "devices", devs);
    return slice;
}

/* ---- errors ---- */

/* Where an error is written and whom it names: a claim (ns/name) or the checkpoint. */
struct ctx {
    char *err;
    size_t errlen;
    const char *ns, *name; /* NULL: the checkpoint */
};

static int fail(struct ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct ctx *c, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (c->err == NULL || c->errlen == 0)
        return -1;
    if (c->ns)
        n = snprintf(c->err, c->errlen, "claim %.253s/%.253s: ", c->ns, c->name);
    else
        n = snprintf(c->err, c->errlen, "checkpoint: ");
    if (n >= 0 && (size_t)n < c->errlen) {
        va_start(ap, fmt);
        vsnprintf(c->err + n, c->errlen - (size_t)n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/*
 * A string field into out (outsz bytes): 0, or -1 naming path when it is missing (need), not a
 * string, holds a NUL, is empty (need) or is too long for out.
 */
static int get_str(struct ctx *c, const json_t *v, const char *path, char *out, size_t outsz,
                   int need)
{
    size_t len;

    out[0] = '\0';
    if (v == NULL)
        return need ? fail(c, "%s is missing", path) : 0;
    if (!json_is_string(v))
        return fail(c, "%s is not a string", path);
    len = json_string_length(v);
    if (strlen(json_string_value(v)) != len)
        return fail(c, "%s holds a NUL character", path);
    if (len == 0 && need)
        return fail(c, "%s is empty", path);
    if (len >= outsz)
        return fail(c, "%s is longer than %zu characters", path, outsz - 1);
    memcpy(out, json_string_value(v), len + 1);
    return 0;
}

/* A string shown in a message: at most 64 characters of it, '?' if it is not a string. */
#define SHOW(v) (json_is_string(v) ? json_string_value(v) : "?")

/* ---- the ResourceClaim ---- */

static int check_meta(struct ctx *c, const json_t *claim, const struct gd_dra_ref *ref)
{
    static const char *const keys[] = { "namespace", "name", "uid" };
    const char *want[3] = { ref->ns, ref->name, ref->uid };
    const json_t *meta = json_object_get(claim, "metadata");
    int k;

    if (!json_is_object(claim))
        return fail(c, "the claim is not a JSON object");
    for (k = 0; k < 3; k++) {
        const json_t *v = json_object_get(meta, keys[k]);

        if (!json_is_string(v) || json_string_length(v) != strlen(want[k]) ||
            strcmp(json_string_value(v), want[k]) != 0)
            return fail(c, "metadata.%s is \"%.64s\", not the claim asked for (\"%.128s\")",
                        keys[k], SHOW(v), want[k]);
    }
    return 0;
}

/* consumedCapacity.<key> of result path: a quantity at most max into *out. */
static int get_consumed(struct ctx *c, const json_t *v, const char *path, uint64_t max,
                        const char *what, const char *unit, uint64_t *out)
{
    int r;

    if (!json_is_string(v))
        return fail(c, "%s is not a quantity string", path);
    if ((r = gs_parse_quantity(json_string_value(v), out)) < 0)
        return fail(c, "%s: \"%.64s\" is not %s", path, json_string_value(v),
                    r == -ERANGE ? "a quantity this side of 2^64" : GS_QUANTITY_FORMS);
    if (*out > max)
        return fail(c, "%s: %.64s is over %s (%" PRIu64 "%s)", path, json_string_value(v), what,
                    max, unit);
    return 0;
}

/* One result of ours: the GPU it names and what it consumes. */
static int read_result(struct ctx *c, const json_t *res, const char *at, const char *node,
                       const struct gd_dra_gpu *gpu, int ngpu, int *g, char *request, uint64_t *mem,
                       int *cores)
{
    const json_t *pool = json_object_get(res, "pool"), *dev = json_object_get(res, "device");
    const json_t *cc = json_object_get(res, "consumedCapacity"), *v;
    const char *key;
    char path[160];
    uint64_t q;
    int idx;

    if (!json_is_string(pool) || strcmp(json_string_value(pool), node) != 0 ||
        json_string_length(pool) != strlen(node))
        return fail(c, "%s.pool is \"%.64s\", not this node's (%.253s)", at, SHOW(pool), node);
    if (!json_is_string(dev) || (idx = device_index(json_string_value(dev))) < 0 ||
        json_string_length(dev) != strlen(json_string_value(dev)))
        return fail(c, "%s.device: \"%.64s\" is not a device of %s (gpu-<index>)", at, SHOW(dev),
                    GD_DRA_DRIVER);
    for (*g = 0; *g < ngpu && gpu[*g].index != idx; (*g)++)
        ;
    if (*g == ngpu)
        return fail(c, "%s.device: %s is no GPU of this node", at, json_string_value(dev));
    snprintf(path, sizeof(path), "%s.request", at);
    if (get_str(c, json_object_get(res, "request"), path, request, 64, 1) < 0)
        return -1;
    *mem = 0;
    *cores = 0;
    if (cc == NULL)
        return 0;
    if (!json_is_object(cc))
        return fail(c, "%s.consumedCapacity is not an object", at);
    /* Only the capacities this driver publishes can be consumed: another is a mismatch. */
    json_object_foreach((json_t *)cc, key, v)
    {
        snprintf(path, sizeof(path), "%s.consumedCapacity.%.32s", at, key);
        if (strcmp(key, "memory") == 0) {
            if (get_consumed(c, v, path, gpu[*g].mem_total, "the GPU's memory", " bytes", &q) < 0)
                return -1;
            /* 0 would read as "the whole GPU" below: a scheduler never grants 0 bytes. */
            if (q == 0)
                return fail(c, "%s: 0 bytes is no share of a GPU", path);
            *mem = q;
        } else if (strcmp(key, "cores") == 0) {
            if (get_consumed(c, v, path, CORES_MAX, "the cores' ceiling", " per cent", &q) < 0)
                return -1;
            /* The parser cuts a fraction, and 0.5 cut to 0 would read as "no ceiling". */
            if (strchr(json_string_value(v), '.'))
                return fail(c, "%s: \"%.64s\" is not a whole number of per cent", path,
                            json_string_value(v));
            *cores = (int)q;
        } else {
            return fail(c, "%s: %s publishes no capacity \"%.32s\" (only memory and cores)", path,
                        GD_DRA_DRIVER, key);
        }
    }
    return 0;
}

/*
 * Two results of one claim on one device (two of its requests sharing a GPU, which a device
 * with allowMultipleAllocations permits) become one hold answering both requests: the claim
 * is one tenant with one limit per GPU, and the kubelet must still see the device under each
 * request. Their consumption is summed, bounded by the GPU as the scheduler's own sum is:
 * memory not given counts as the whole GPU, and cores not given (no ceiling) leaves none.
 */
static int merge_hold(struct ctx *c, struct gd_dra_hold *h, const char *at,
                      const struct gd_dra_gpu *g, const char *request, uint64_t mem, int cores)
{
    uint64_t had = h->mem_bytes ? h->mem_bytes : g->mem_total, add = mem ? mem : g->mem_total;
    int k;

    if (had > g->mem_total - add)
        return fail(c,
                    "%s: with the claim's other results on %s, memory is over the GPU's "
                    "(%" PRIu64 ")",
                    at, h->device, g->mem_total);
    if (h->cores && cores && h->cores + cores > CORES_MAX)
        return fail(c, "%s: with the claim's other results on %s, cores are over 100", at,
                    h->device);
    h->mem_bytes = had + add;
    h->cores = h->cores && cores ? h->cores + cores : 0;
    for (k = 0; k < h->nreq; k++)
        if (strcmp(h->request[k], request) == 0)
            return 0;
    if (h->nreq == MAX_REQS)
        return fail(c, "%s: more than %d requests on %s", at, MAX_REQS, h->device);
    snprintf(h->request[h->nreq++], sizeof(h->request[0]), "%s", request);
    return 0;
}

static int read_results(struct ctx *c, const json_t *results, const char *node,
                        const struct gd_dra_gpu *gpu, int ngpu, struct gd_dra_claim *out)
{
    const json_t *res;
    size_t i;

    if (results != NULL && !json_is_array(results))
        return fail(c, "status.allocation.devices.results is not a list");
    json_array_foreach(results, i, res)
    {
        const json_t *drv = json_object_get(res, "driver");
        char at[64], request[64], dev[32];
        uint64_t mem = 0;
        int g = 0, cores = 0, h;

        snprintf(at, sizeof(at), "status.allocation.devices.results[%zu]", i);
        if (!json_is_object(res) || !json_is_string(drv))
            return fail(c, "%s.driver is missing", at);
        if (strcmp(json_string_value(drv), GD_DRA_DRIVER) != 0)
            continue; /* another driver's device: not ours to prepare */
        if (read_result(c, res, at, node, gpu, ngpu, &g, request, &mem, &cores) < 0)
            return -1;
        snprintf(dev, sizeof(dev), "gpu-%d", gpu[g].index);
        for (h = 0; h < out->nhold && strcmp(out->hold[h].device, dev) != 0; h++)
            ;
        if (h < out->nhold) {
            if (merge_hold(c, &out->hold[h], at, &gpu[g], request, mem, cores) < 0)
                return -1;
            continue;
        }
        if (out->nhold == GD_DRA_MAX_DEVS)
            return fail(c, "%s: more than %d devices of %s", at, GD_DRA_MAX_DEVS, GD_DRA_DRIVER);
        h = out->nhold++;
        if (strlen(gpu[g].uuid) >= sizeof(out->hold[h].uuid))
            return fail(c, "%s: the GPU's UUID is too long", at);
        snprintf(out->hold[h].uuid, sizeof(out->hold[h].uuid), "%s", gpu[g].uuid);
        snprintf(out->hold[h].device, sizeof(out->hold[h].device), "%s", dev);
        snprintf(out->hold[h].request[0], sizeof(out->hold[h].request[0]), "%s", request);
        out->hold[h].nreq = 1;
        out->hold[h].mem_bytes = mem;
        out->hold[h].cores = cores;
    }
    if (out->nhold == 0)
        return fail(c, "no device of %s in status.allocation.devices.results", GD_DRA_DRIVER);
    return 0;
}

/* The opaque parameters of config[j]: priority and weight (0: not given). */
static int read_params(struct ctx *c, const json_t *p, const char *at, uint32_t *prio,
                       uint32_t *weight)
{
    const char *key;
    json_t *v;

    *prio = *weight = 0;
    if (!json_is_object(p))
        return fail(c, "%s.opaque.parameters is not an object", at);
    json_object_foreach((json_t *)p, key, v)
    {
        if (strcmp(key, "priority") == 0) {
            if (!json_is_string(v) || gs_parse_priority(json_string_value(v), prio) < 0)
                return fail(c,
                            "%s.opaque.parameters.priority: \"%.64s\" is not a priority "
                            "(latency, normal or background)",
                            at, SHOW(v));
        } else if (strcmp(key, "weight") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 1 ||
                json_integer_value(v) > GPUSLICE_WEIGHT_MAX)
                return fail(c, "%s.opaque.parameters.weight is not an integer from 1 to %u", at,
                            GPUSLICE_WEIGHT_MAX);
            *weight = (uint32_t)json_integer_value(v);
        } else if (strcmp(key, "apiVersion") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), CONFIG_API_VERSION) != 0)
                return fail(c, "%s.opaque.parameters.apiVersion: \"%.64s\" is not %s", at, SHOW(v),
                            CONFIG_API_VERSION);
        } else if (strcmp(key, "kind") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), CONFIG_KIND) != 0)
                return fail(c, "%s.opaque.parameters.kind: \"%.64s\" is not %s", at, SHOW(v),
                            CONFIG_KIND);
        } else {
            return fail(c,
                        "%s.opaque.parameters: unknown key \"%.64s\" (known: priority, "
                        "weight, apiVersion, kind)",
                        at, key);
        }
    }
    return 0;
}

/*
 * Whether a config's requests list names request: every request when the list is empty, and
 * a main request's name covers its subrequests ("req" applies to "req/sub").
 */
static int config_applies(const json_t *reqs, const char *request)
{
    const json_t *r;
    size_t i, main = strcspn(request, "/");

    if (json_array_size(reqs) == 0)
        return 1;
    json_array_foreach(reqs, i, r)
    {
        const char *s = json_string_value(r);

        if (strcmp(s, request) == 0 || (strlen(s) == main && strncmp(s, request, main) == 0))
            return 1;
    }
    return 0;
}

/*
 * The configuration of driver gpu.gpuslice.io, in order (a class's entries come before the
 * claim's own, so a later entry overrides an earlier one for the devices both apply to). A
 * claim is one tenant with one priority and one weight: two devices given different values
 * are refused; a device no entry applies to takes the claim's value.
 */
static int read_config(struct ctx *c, const json_t *config, struct gd_dra_claim *out)
{
    uint32_t prio[GD_DRA_MAX_DEVS] = { 0 }, weight[GD_DRA_MAX_DEVS] = { 0 };
    const json_t *e;
    size_t j, i;
    int h, k;

    if (config != NULL && !json_is_array(config))
        return fail(c, "status.allocation.devices.config is not a list");
    json_array_foreach(config, j, e)
    {
        const json_t *opaque = json_object_get(e, "opaque"), *reqs = json_object_get(e, "requests");
        const json_t *drv = json_object_get(opaque, "driver"), *r;
        const char *src = json_string_value(json_object_get(e, "source"));
        int from_class = src && strcmp(src, "FromClass") == 0;
        uint32_t p, w;
        char at[64];

        snprintf(at, sizeof(at), "status.allocation.devices.config[%zu]", j);
        if (!json_is_object(e))
            return fail(c, "%s is not an object", at);
        if (opaque == NULL)
            continue;
        if (!json_is_string(drv))
            return fail(c, "%s.opaque.driver is missing", at);
        if (strcmp(json_string_value(drv), GD_DRA_DRIVER) != 0)
            continue;
        if (read_params(c, json_object_get(opaque, "parameters"), at, &p, &w) < 0)
            return -1;
        if (reqs != NULL && !json_is_array(reqs))
            return fail(c, "%s.requests is not a list", at);
        json_array_foreach(reqs, i, r)
        {
            if (!json_is_string(r) || json_string_length(r) == 0)
                return fail(c, "%s.requests[%zu] is not a request's name", at, i);
        }
        for (h = 0; h < out->nhold; h++)
            for (k = 0; k < out->hold[h].nreq; k++)
                if (config_applies(reqs, out->hold[h].request[k])) {
                    if (p)
                        prio[h] = p;
                    if (w)
                        weight[h] = w;
                    /* The class's configuration is its admin's; any other, the author's. */
                    if (p && !from_class)
                        out->claim_set |= GD_DRA_CLAIM_SET_PRIORITY;
                    if (w && !from_class)
                        out->claim_set |= GD_DRA_CLAIM_SET_WEIGHT;
                    break;
                }
    }
    for (h = 0; h < out->nhold; h++) {
        if (prio[h] && out->priority && prio[h] != out->priority)
            return fail(c,
                        "status.allocation.devices.config: priority %s for %s but %s for "
                        "another device (one claim has one priority)",
                        gs_priority_name(prio[h]), out->hold[h].device,
                        gs_priority_name(out->priority));
        if (weight[h] && out->weight && weight[h] != out->weight)
            return fail(c,
                        "status.allocation.devices.config: weight %u for %s but %u for "
                        "another device (one claim has one weight)",
                        weight[h], out->hold[h].device, out->weight);
        if (prio[h])
            out->priority = prio[h];
        if (weight[h])
            out->weight = weight[h];
    }
    return 0;
}

/* status.reservedFor: the UIDs of the pods the claim is reserved for (who may join it). */
static int read_reserved(struct ctx *c, const json_t *rf, struct gd_dra_claim *out)
{
    const json_t *e;
    size_t i;

    if (rf != NULL && !json_is_array(rf))
        return fail(c, "status.reservedFor is not a list");
    json_array_foreach(rf, i, e)
    {
        const json_t *res = json_object_get(e, "resource"), *grp = json_object_get(e, "apiGroup");
        char path[64];

        if (!json_is_string(res) || strcmp(json_string_value(res), "pods") != 0 ||
            (grp != NULL && (!json_is_string(grp) || json_string_length(grp) != 0)))
            continue; /* a consumer that is not a pod joins no tenant */
        if (out->npod == MAX_PODS)
            return fail(c, "status.reservedFor[%zu]: more than %d pods", i, MAX_PODS);
        snprintf(path, sizeof(path), "status.reservedFor[%zu].uid", i);
        if (get_str(c, json_object_get(e, "uid"), path, out->pod_uid[out->npod],
                    sizeof(out->pod_uid[0]), 1) < 0)
            return -1;
        out->npod++;
    }
    return 0;
}

int gd_dra_claim_read(const json_t *claim, const struct gd_dra_ref *ref, const char *node,
                      const struct gd_dra_gpu *gpu, int ngpu, struct gd_dra_claim *out, char *err,
                      size_t errlen)
{
    struct ctx c = { err, errlen, ref->ns, ref->name };
    const json_t *status = json_object_get(claim, "status");
    const json_t *alloc = json_object_get(status, "allocation");
    const json_t *devs = json_object_get(alloc, "devices");

    memset(out, 0, sizeof(*out));
    if (check_meta(&c, claim, ref) < 0)
        goto fail;
    if (get_str(&c, json_object_get(json_object_get(claim, "metadata"), "namespace"),
                "metadata.namespace", out->ns, sizeof(out->ns), 1) < 0 ||
        get_str(&c, json_object_get(json_object_get(claim, "metadata"), "name"), "metadata.name",
                out->name, sizeof(out->name), 1) < 0 ||
        get_str(&c, json_object_get(json_object_get(claim, "metadata"), "uid"), "metadata.uid",
                out->uid, sizeof(out->uid), 1) < 0)
        goto fail;
    if (!json_is_object(alloc)) {
        fail(&c, "not allocated (status.allocation is missing)");
        goto fail;
    }
    if (devs != NULL && !json_is_object(devs)) {
        fail(&c, "status.allocation.devices is not an object");
        goto fail;
    }
    if (read_results(&c, json_object_get(devs, "results"), node, gpu, ngpu, out) < 0 ||
        read_config(&c, json_object_get(devs, "config"), out) < 0 ||
        read_reserved(&c, json_object_get(status, "reservedFor"), out) < 0)
        goto fail;
    return 0;
fail:
    memset(out, 0, sizeof(*out));
    return -1;
}

/* ---- the CDI spec ---- */

/*
 * cdiVersion: the oldest that allows what the spec uses (CDI's SPEC.md table: 0.3.0 has env
 * and mounts with options; 0.4.0 adds a mount's type, 0.5.0 device nodes' hostPath, 0.6.0
 * annotations and dots in the kind's name, none of which is used), so older runtimes read it.
 */
#define CDI_VERSION "0.3.0"
#define CDI_KIND "gpuslice.io/claim"

static json_t *ro_bind(const char *host, const char *cont)
{
    return json_pack("{s:s, s:s, s:[s, s, s, s]}", "hostPath", host, "containerPath", cont,
                     "options", "ro", "nosuid", "nodev", "bind");
}

json_t *gd_dra_cdi_json(const char *claim_uid, const char *lib_dir, const char *preload_file,
                        const char *pods_dir, const char *tenants_dir)
{
    if (!is_cdi_name(claim_uid) || lib_dir == NULL || preload_file == NULL || pods_dir == NULL ||
        tenants_dir == NULL || lib_dir[0] != '/' || preload_file[0] != '/' || pods_dir[0] != '/' ||
        tenants_dir[0] != '/')
        return NULL;
    /* Where the webhook mounts the same (webhook.c): one layout in every pod. */
    return json_pack("{s:s, s:s, s:[{s:s, s:{s:[s], s:[o, o, o, o]}}]}", "cdiVersion",
                     CDI_VERSION, "kind", CDI_KIND, "devices", "name", claim_uid,
                     "containerEdits", "env", GS_ENV_POD "=1", "mounts",
                     ro_bind(lib_dir, "/usr/local/gpuslice"),
                     ro_bind(preload_file, "/etc/ld.so.preload"),
                     ro_bind(pods_dir, "/run/gpuslice"),
                     ro_bind(tenants_dir, "/run/gpuslice/tenants"));
}

void gd_dra_cdi_id(const char *claim_uid, char *out, size_t len)
{
    int n;

    if (len == 0)
        return;
    out[0] = '\0';
    if (!is_cdi_name(claim_uid))
        return;
    n = snprintf(out, len, "%s=%s", CDI_KIND, claim_uid);
    if (n < 0 || (size_t)n >= len)
        out[0] = '\0';
}

/* ---- the checkpoint ---- */

static json_t *strings_json(const char (*s)[64], int n)
{
    json_t *a = json_array();
    int i;

    for (i = 0; a && i < n; i++)
        if (json_array_append_new(a, json_string(s[i])) < 0) {
            json_decref(a);
            return NULL;
        }
    return a;
}

static json_t *claim_json(const struct gd_dra_claim *c)
{
    json_t *holds = json_array(), *pods = json_array(), *h;
    int i;

    if (holds == NULL || pods == NULL)
        goto fail;
    for (i = 0; i < c->nhold && i < GD_DRA_MAX_DEVS; i++) {
        const struct gd_dra_hold *x = &c->hold[i];

        h = json_pack("{s:s, s:s, s:o, s:I, s:i}", "uuid", x->uuid, "device", x->device, "requests",
                      strings_json(x->request, x->nreq), "memory", (json_int_t)x->mem_bytes,
                      "cores", x->cores);
        if (x->mem_bytes > (uint64_t)INT64_MAX || json_array_append_new(holds, h) < 0)
            goto fail;
    }
    for (i = 0; i < c->npod && i < MAX_PODS; i++)
        if (json_array_append_new(pods, json_string(c->pod_uid[i])) < 0)
            goto fail;
    return json_pack("{s:s, s:s, s:s, s:I, s:I, s:o, s:o}", "namespace", c->ns, "name", c->name,
                     "uid", c->uid, "priority", (json_int_t)c->priority, "weight",
                     (json_int_t)c->weight, "holds", holds, "pods", pods);
fail:
    json_decref(holds);
    json_decref(pods);
    return NULL;
}

json_t *gd_dra_checkpoint_json(const struct gd_dra_claim *c, int n)
{
    json_t *claims = json_array();
    int i;

    for (i = 0; claims && i < n; i++)
        if (json_array_append_new(claims, claim_json(&c[i])) < 0) {
            json_decref(claims);
            return NULL;
        }
    return json_pack("{s:i, s:o}", "version", CHECKPOINT_VERSION, "claims", claims);
}

/* The object at path has exactly the keys of keys[] (NULL-ended): 0, or -1 naming another. */
static int only_keys(struct ctx *c, const json_t *o, const char *path, const char *const *keys)
{
    const char *key;
    json_t *v;
    int k;

    if (!json_is_object(o))
        return fail(c, "%s is not an object", path);
    json_object_foreach((json_t *)o, key, v)
    {
        for (k = 0; keys[k] && strcmp(keys[k], key) != 0; k++)
            ;
        if (keys[k] == NULL)
            return fail(c, "%s: unknown key \"%.64s\"", path, key);
    }
    for (k = 0; keys[k]; k++)
        if (json_object_get(o, keys[k]) == NULL)
            return fail(c, "%s.%s is missing", path, keys[k]);
    return 0;
}

/* An integer field from min to max. */
static int get_int(struct ctx *c, const json_t *v, const char *path, json_int_t min, json_int_t max,
                   json_int_t *out)
{
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max)
        return fail(c, "%s is not an integer from %lld to %lld", path, (long long)min,
                    (long long)max);
    *out = json_integer_value(v);
    return 0;
}

static int read_hold(struct ctx *c, const json_t *o, const char *at, struct gd_dra_hold *h)
{
    static const char *const keys[] = { "uuid", "device", "requests", "memory", "cores", NULL };
    const json_t *reqs = json_object_get(o, "requests"), *r;
    char path[256];
    json_int_t v = 0;
    size_t i;

    if (only_keys(c, o, at, keys) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s.uuid", at);
    if (get_str(c, json_object_get(o, "uuid"), path, h->uuid, sizeof(h->uuid), 1) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s.device", at);
    if (get_str(c, json_object_get(o, "device"), path, h->device, sizeof(h->device), 1) < 0)
        return -1;
    if (device_index(h->device) < 0)
        return fail(c, "%s: \"%s\" is not gpu-<index>", path, h->device);
    snprintf(path, sizeof(path), "%s.requests", at);
    if (!json_is_array(reqs) || json_array_size(reqs) < 1 ||
        json_array_size(reqs) > (size_t)MAX_REQS)
        return fail(c, "%s is not a list of 1 to %d requests", path, MAX_REQS);
    json_array_foreach(reqs, i, r)
    {
        snprintf(path, sizeof(path), "%s.requests[%zu]", at, i);
        if (get_str(c, r, path, h->request[i], sizeof(h->request[0]), 1) < 0)
            return -1;
    }
    h->nreq = (int)json_array_size(reqs);
    snprintf(path, sizeof(path), "%s.memory", at);
    if (get_int(c, json_object_get(o, "memory"), path, 0, INT64_MAX, &v) < 0)
        return -1;
    h->mem_bytes = (uint64_t)v;
    snprintf(path, sizeof(path), "%s.cores", at);
    if (get_int(c, json_object_get(o, "cores"), path, 0, CORES_MAX, &v) < 0)
        return -1;
    h->cores = (int)v;
    return 0;
}

static int read_claim(struct ctx *c, const json_t *o, const char *at, struct gd_dra_claim *cl)
{
    static const char *const keys[] = { "namespace", "name",  "uid",  "priority",
                                        "weight",    "holds", "pods", NULL };
    const json_t *holds = json_object_get(o, "holds"), *pods = json_object_get(o, "pods"), *e;
    char path[128];
    json_int_t v = 0;
    size_t i;

    if (only_keys(c, o, at, keys) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s.namespace", at);
    if (get_str(c, json_object_get(o, "namespace"), path, cl->ns, sizeof(cl->ns), 1) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s.name", at);
    if (get_str(c, json_object_get(o, "name"), path, cl->name, sizeof(cl->name), 1) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s.uid", at);
    if (get_str(c, json_object_get(o, "uid"), path, cl->uid, sizeof(cl->uid), 1) < 0)
        return -1;
    snprintf(path, sizeof(path), "%s.priority", at);
    if (get_int(c, json_object_get(o, "priority"), path, GPUSLICE_PRIORITY_UNSET,
                GPUSLICE_PRIORITY_LATENCY, &v) < 0)
        return -1;
    cl->priority = (uint32_t)v;
    snprintf(path, sizeof(path), "%s.weight", at);
    if (get_int(c, json_object_get(o, "weight"), path, 0, GPUSLICE_WEIGHT_MAX, &v) < 0)
        return -1;
    cl->weight = (uint32_t)v;
    snprintf(path, sizeof(path), "%s.holds", at);
    if (!json_is_array(holds) || json_array_size(holds) < 1 ||
        json_array_size(holds) > GD_DRA_MAX_DEVS)
        return fail(c, "%s is not a list of 1 to %d holds", path, GD_DRA_MAX_DEVS);
    json_array_foreach(holds, i, e)
    {
        snprintf(path, sizeof(path), "%s.holds[%zu]", at, i);
        if (read_hold(c, e, path, &cl->hold[i]) < 0)
            return -1;
    }
    cl->nhold = (int)json_array_size(holds);
    snprintf(path, sizeof(path), "%s.pods", at);
    if (!json_is_array(pods) || json_array_size(pods) > (size_t)MAX_PODS)
        return fail(c, "%s is not a list of at most %d pod UIDs", path, MAX_PODS);
    json_array_foreach(pods, i, e)
    {
        snprintf(path, sizeof(path), "%s.pods[%zu]", at, i);
        if (get_str(c, e, path, cl->pod_uid[i], sizeof(cl->pod_uid[0]), 1) < 0)
            return -1;
    }
    cl->npod = (int)json_array_size(pods);
    return 0;
}

int gd_dra_checkpoint_read(const json_t *j, struct gd_dra_claim *out, int max, int *n, char *err,
                           size_t errlen)
{
    static const char *const keys[] = { "version", "claims", NULL };
    struct ctx c = { err, errlen, NULL, NULL };
    const json_t *claims = json_object_get(j, "claims"), *e;
    json_int_t version;
    size_t i;

    *n = 0;
    if (max < 0)
        max = 0;
    memset(out, 0, sizeof(*out) * (size_t)max);
    if (only_keys(&c, j, "the document", keys) < 0)
        return -1;
    if (!json_is_integer(json_object_get(j, "version")) ||
        (version = json_integer_value(json_object_get(j, "version"))) != CHECKPOINT_VERSION)
        return fail(&c, "version is not %d (a checkpoint of another gpusliced)",
                    CHECKPOINT_VERSION);
    if (!json_is_array(claims))
        return fail(&c, "claims is not a list");
    if (json_array_size(claims) > (size_t)max)
        return fail(&c, "claims: more than %d", max);
    json_array_foreach(claims, i, e)
    {
        char at[32];
        size_t k;

        snprintf(at, sizeof(at), "claims[%zu]", i);
        if (read_claim(&c, e, at, &out[i]) < 0) {
            memset(out, 0, sizeof(*out) * (size_t)max);
            return -1;
        }
        for (k = 0; k < i; k++)
            if (strcmp(out[k].uid, out[i].uid) == 0) {
                fail(&c, "%s.uid: claim %s twice", at, out[i].uid);
                memset(out, 0, sizeof(*out) * (size_t)max);
                return -1;
            }
    }
    *n = (int)json_array_size(claims);
    return 0;
}
