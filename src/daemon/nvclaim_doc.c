/*
 * The documents of NVIDIA's DRA driver as gpusliced reads them (nvclaim.h): a pod's claim
 * names, a ResourceClaim of gpu.nvidia.com, the node's ResourceSlices, and the memory limits
 * they make. Pure functions over jansson values; every field read is checked, and a bad one
 * is an error naming the claim and the field's path: a pod whose claims cannot be read is
 * refused, never left unlimited.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "daemon/nvclaim.h"

#define SHOW(v) (json_is_string(v) ? json_string_value(v) : "?")

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

static int lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

/* An object name: a DNS subdomain of at most 253 characters (safe in a URL's path). */
static int object_name(const json_t *v)
{
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : 0, i;

    if (!s || n == 0 || n >= GD_CLAIM_NAME_LEN || strlen(s) != n || !lower_alnum(s[0]) ||
        !lower_alnum(s[n - 1]))
        return 0;
    for (i = 1; i + 1 < n; i++)
        if (!lower_alnum(s[i]) && s[i] != '-' && s[i] != '.')
            return 0;
    return 1;
}

/* A string of at most len - 1 characters and no NUL, copied; else 0. */
static int copy_str(const json_t *v, char *out, size_t len)
{
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : 0;

    if (!s || n == 0 || n >= len || strlen(s) != n)
        return 0;
    memcpy(out, s, n + 1);
    return 1;
}

static int add_name(char names[][GD_CLAIM_NAME_LEN], int *n, int max, const json_t *v,
                    const char *at, char *err, size_t errlen)
{
    int k;

    if (!object_name(v))
        return fail(err, errlen, "%s: \"%.64s\" is not a claim's name", at, SHOW(v));
    for (k = 0; k < *n; k++)
        if (strcmp(names[k], json_string_value(v)) == 0)
            return 0;
    if (*n == max)
        return fail(err, errlen, "more than %d resource claims: their limits cannot all be read",
                    max);
    snprintf(names[(*n)++], GD_CLAIM_NAME_LEN, "%s", json_string_value(v));
    return 0;
}

int gd_nv_pod_claims(const json_t *pod, char names[][GD_CLAIM_NAME_LEN], int max, int *pending,
                     char *err, size_t errlen)
{
    const json_t *spec = json_object_get(json_object_get(pod, "spec"), "resourceClaims");
    const json_t *st = json_object_get(json_object_get(pod, "status"), "resourceClaimStatuses");
    const json_t *e, *s;
    char at[96];
    size_t i, k;
    int n = 0;

    *pending = 0;
    json_array_foreach(st, i, e)
    {
        const json_t *v = json_object_get(e, "resourceClaimName");

        if (v == NULL || json_is_null(v))
            continue; /* no claim was needed for it */
        snprintf(at, sizeof(at), "status.resourceClaimStatuses[%zu].resourceClaimName", i);
        if (add_name(names, &n, max, v, at, err, errlen) < 0)
            return -1;
    }
    json_array_foreach(spec, i, e)
    {
        const json_t *v = json_object_get(e, "resourceClaimName");
        const char *ref = json_string_value(json_object_get(e, "name"));
        int named = 0;

        if (v != NULL && !json_is_null(v)) {
            snprintf(at, sizeof(at), "spec.resourceClaims[%zu].resourceClaimName", i);
            if (add_name(names, &n, max, v, at, err, errlen) < 0)
                return -1;
            continue;
        }
        if (json_object_get(e, "resourceClaimTemplateName") == NULL)
            continue;
        /* A template's claim: named by the status entry of the same name, once it exists. */
        json_array_foreach(st, k, s)
        {
            named |= ref && json_is_string(json_object_get(s, "name")) &&
                     strcmp(json_string_value(json_object_get(s, "name")), ref) == 0;
        }
        if (!named)
            (*pending)++;
    }
    return n;
}

/* consumedCapacity.memory of result at: bytes (0 for none). */
static int consumed_memory(const json_t *res, const char *at, uint64_t *mem, char *err,
                           size_t errlen)
{
    const json_t *cc = json_object_get(res, "consumedCapacity"), *v;
    int r;

    *mem = 0;
    if (cc == NULL || json_is_null(cc))
        return 0;
    if (!json_is_object(cc))
        return fail(err, errlen, "%s.consumedCapacity is not an object", at);
    if ((v = json_object_get(cc, "memory")) == NULL)
        return 0; /* another capacity (shares): no memory reserved */
    if (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v))
        return fail(err, errlen, "%s.consumedCapacity.memory is not a quantity string", at);
    if ((r = gs_parse_quantity(json_string_value(v), mem)) < 0)
        return fail(err, errlen, "%s.consumedCapacity.memory: \"%.64s\" is not %s", at,
                    json_string_value(v),
                    r == -ERANGE ? "a quantity this side of 2^64" : GS_QUANTITY_FORMS);
    return 0;
}

static int reserved_for(const json_t *rf, const char *pod_uid)
{
    const json_t *e;
    size_t i;

    json_array_foreach(rf, i, e)
    {
        const json_t *res = json_object_get(e, "resource"), *uid = json_object_get(e, "uid");
        const json_t *grp = json_object_get(e, "apiGroup");

        if (json_is_string(res) && strcmp(json_string_value(res), "pods") == 0 &&
            (grp == NULL || (json_is_string(grp) && json_string_length(grp) == 0)) &&
            json_is_string(uid) && strcmp(json_string_value(uid), pod_uid) == 0)
            return 1;
    }
    return 0;
}

static int claim_read(const json_t *claim, const char *ns, const char *name, const char *node,
                      const char *pod_uid, struct gd_nv_claim *out, char *err, size_t errlen)
{
    const json_t *md = json_object_get(claim, "metadata");
    const json_t *status = json_object_get(claim, "status");
    const json_t *alloc = json_object_get(status, "allocation");
    const json_t *results = json_object_get(json_object_get(alloc, "devices"), "results");
    const json_t *res;
    char at[64];
    size_t i;

    if (!json_is_object(claim))
        return fail(err, errlen, "not a JSON object");
    if (!json_is_string(json_object_get(md, "namespace")) ||
        strcmp(json_string_value(json_object_get(md, "namespace")), ns) != 0 ||
        !json_is_string(json_object_get(md, "name")) ||
        strcmp(json_string_value(json_object_get(md, "name")), name) != 0)
        return fail(err, errlen, "the API server answered with another object (%.64s/%.64s)",
                    SHOW(json_object_get(md, "namespace")), SHOW(json_object_get(md, "name")));
    if (!copy_str(json_object_get(md, "uid"), out->uid, sizeof(out->uid)) ||
        !copy_str(json_object_get(md, "resourceVersion"), out->rv, sizeof(out->rv)))
        return fail(err, errlen, "metadata.uid or metadata.resourceVersion is missing or bad");
    if (!json_is_object(alloc))
        return fail(err, errlen, "not allocated (status.allocation is missing)");
    if (!reserved_for(json_object_get(status, "reservedFor"), pod_uid))
        return fail(err, errlen, "status.reservedFor does not name this pod (uid %s)", pod_uid);
    if (results != NULL && !json_is_array(results))
        return fail(err, errlen, "status.allocation.devices.results is not a list");
    json_array_foreach(results, i, res)
    {
        const json_t *drv = json_object_get(res, "driver"), *pool = json_object_get(res, "pool");
        struct gd_nv_result *r;

        snprintf(at, sizeof(at), "status.allocation.devices.results[%zu]", i);
        if (!json_is_string(drv))
            return fail(err, errlen, "%s.driver is missing", at);
        if (strcmp(json_string_value(drv), GD_NV_DRIVER) != 0)
            continue; /* another driver's device: its own business */
        if (!json_is_string(pool) || strcmp(json_string_value(pool), node) != 0 ||
            json_string_length(pool) != strlen(node))
            return fail(err, errlen, "%s.pool is \"%.64s\", not this node's (%.253s)", at,
                        SHOW(pool), node);
        if (out->n == GD_NV_MAX_RESULTS)
            return fail(err, errlen, "more than %d devices of %s", GD_NV_MAX_RESULTS, GD_NV_DRIVER);
        r = &out->r[out->n];
        if (!copy_str(json_object_get(res, "device"), r->device, sizeof(r->device)))
            return fail(err, errlen, "%s.device is missing or not a device's name", at);
        if (consumed_memory(res, at, &r->mem, err, errlen) < 0)
            return -1;
        out->n++;
    }
    return 0;
}

int gd_nv_claim_read(const json_t *claim, const char *ns, const char *name, const char *node,
                     const char *pod_uid, struct gd_nv_claim *out, char *err, size_t errlen)
{
    char why[400];

    memset(out, 0, sizeof(*out));
    if (claim_read(claim, ns, name, node, pod_uid, out, why, sizeof(why)) == 0)
        return 0;
    memset(out, 0, sizeof(*out));
    return fail(err, errlen, "claim %.64s/%.64s: %s", ns, name, why);
}

int gd_nv_slices_read(const json_t *list, const char *node, struct gd_nv_dev *out, int max, int *n,
                      char *err, size_t errlen)
{
    const json_t *items = json_object_get(list, "items"), *it, *d;
    size_t i, k;

    *n = 0;
    if (!json_is_array(items))
        return fail(err, errlen, "the ResourceSlice list has no items");
    json_array_foreach(items, i, it)
    {
        const json_t *spec = json_object_get(it, "spec");
        const char *drv = json_string_value(json_object_get(spec, "driver"));
        const char *nn = json_string_value(json_object_get(spec, "nodeName"));
        const char *pool =
            json_string_value(json_object_get(json_object_get(spec, "pool"), "name"));

        if (!drv || !nn || !pool || strcmp(drv, GD_NV_DRIVER) != 0 || strcmp(nn, node) != 0 ||
            strcmp(pool, node) != 0)
            continue;
        json_array_foreach(json_object_get(spec, "devices"), k, d)
        {
            const json_t *u = json_object_get(
                json_object_get(json_object_get(d, "attributes"), "uuid"), "string");
            struct gd_nv_dev *x = &out[*n];

            if (*n == max) {
                *n = 0;
                return fail(err, errlen, "more than %d devices of %s on node %.253s", max,
                            GD_NV_DRIVER, node);
            }
            if (!copy_str(json_object_get(d, "name"), x->name, sizeof(x->name)) ||
                !copy_str(u, x->uuid, sizeof(x->uuid)))
                continue;
            (*n)++;
        }
    }
    return 0;
}

int gd_nv_limits_add(struct gs_limits *l, unsigned char *whole, const char *uuid, uint64_t mem,
                     char *err, size_t errlen)
{
    char key[GS_UUID_STRLEN];
    int i;

    if (!gs_parse_uuid(uuid, strlen(uuid), key)) {
        if (mem == 0)
            return 0; /* held whole (a MIG device is bounded by its own memory) */
        return fail(err, errlen,
                    "device %.64s consumes memory but is no GPU (a MIG device?): gpuslice holds "
                    "memory per GPU UUID only",
                    uuid);
    }
    for (i = 0; i < l->n; i++)
        if (l->e[i].key == GS_KEY_UUID && strcmp(l->e[i].uuid, key) == 0)
            break;
    if (i == l->n) {
        if (l->n == GS_MAX_LIMIT_ENTRIES)
            return fail(err, errlen, "more than %d GPUs", GS_MAX_LIMIT_ENTRIES);
        memset(&l->e[i], 0, sizeof(l->e[i]));
        l->e[i].key = GS_KEY_UUID;
        snprintf(l->e[i].uuid, sizeof(l->e[i].uuid), "%s", key);
        l->n++;
    }
    if (mem == 0)
        whole[i] = 1;
    else if (l->e[i].value > UINT64_MAX - mem)
        l->e[i].value = UINT64_MAX;
    else
        l->e[i].value += mem;
    return 0;
}

void gd_nv_limits_done(struct gs_limits *l, const unsigned char *whole)
{
    int i, k = 0;

    for (i = 0; i < l->n; i++)
        if (!whole[i] && l->e[i].value > 0)
            l->e[k++] = l->e[i];
    l->n = k;
}

/* The annotation's bound on GPU uuid: its UUID entry, else its smallest other; 0 for none. */
static uint64_t ann_bound(const struct gs_limits *ann, const char *uuid, int *at)
{
    uint64_t low = 0;
    int i;

    *at = -1;
    for (i = 0; i < ann->n; i++)
        if (ann->e[i].key == GS_KEY_UUID && strcmp(ann->e[i].uuid, uuid) == 0) {
            *at = i;
            return ann->e[i].value;
        }
    for (i = 0; i < ann->n; i++)
        if (ann->e[i].key != GS_KEY_UUID && ann->e[i].value > 0 &&
            (low == 0 || ann->e[i].value < low))
            low = ann->e[i].value;
    return low;
}

int gd_nv_merge(const struct gs_limits *ann, const struct gs_limits *claims, struct gs_limits *out,
                char *err, size_t errlen)
{
    int i, at;

    *out = *ann;
    if (claims->n == 0)
        return 0;
    out->source = ann->n ? "its annotations and resource claims (the smaller per GPU)"
                         : "its resource claims of " GD_NV_DRIVER;
    for (i = 0; i < claims->n; i++) {
        uint64_t v = claims->e[i].value, a = ann_bound(ann, claims->e[i].uuid, &at);

        if (a > 0 && a < v)
            v = a;
        if (at >= 0) {
            out->e[at].value = v;
            continue;
        }
        if (out->n == GS_MAX_LIMIT_ENTRIES)
            return fail(err, errlen, "the annotations' and claims' memory limits are more than %d",
                        GS_MAX_LIMIT_ENTRIES);
        out->e[out->n] = claims->e[i];
        out->e[out->n++].value = v;
    }
    return 0;
}
