/*
 * The API: one table of routes, each a method, a path pattern whose {names}
 * match one segment, and its handler. Requests and answers are JSON
 * (jansson); every error is {"error": {"code", "message"}} with its status,
 * the message naming the field and what is accepted. Who may do what: a
 * tenant's owner may read it and lower its limits; raising a limit, or
 * touching another user's tenant, takes an admin (root, the daemon's user,
 * the admin group, or a TCP client with the token).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/node.h"
#include "common/proc.h"
#include "common/text.h"
#include "common/tenant.h"
#include "control/tenants.h"
#include "daemon/daemon.h"
#include "daemon/guard/guard.h"
#include "daemon/pods.h"
#include "daemon/kube.h"

typedef void (*handler)(struct gd_request *req, struct gd_response *resp);

struct route {
    const char *method;
    const char *pattern;
    handler fn;
};

void gd_api_scrub(char *s)
{
    size_t n = strlen(s), i = 0;

    while (i < n) {
        uint32_t cp;
        size_t k = gs_utf8_len((const unsigned char *)s + i, n - i, &cp);

        if (k == 0 || cp == 0) {
            s[i++] = '?';
            continue;
        }
        i += k;
    }
}

void gd_api_error(struct gd_response *resp, int status, const char *code, const char *fmt, ...)
{
    char msg[1024];
    json_t *o;
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gd_api_scrub(msg); /* it may quote what the client sent */
    o = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
    free(resp->body);
    resp->body = json_dumps(o, JSON_COMPACT);
    resp->len = resp->body ? strlen(resp->body) : 0;
    resp->status = status;
    resp->content_type = "application/json";
    json_decref(o);
}

/* Answers with o (a new reference, taken; NULL when it could not be made: a 500). */
static void reply(struct gd_response *resp, int status, json_t *o)
{
    if (o == NULL) {
        gd_api_error(resp, 500, "internal", "the answer could not be made");
        return;
    }
    free(resp->body);
    resp->body = json_dumps(o, JSON_COMPACT | JSON_ENSURE_ASCII);
    resp->len = resp->body ? strlen(resp->body) : 0;
    resp->status = resp->body ? status : 500;
    resp->content_type = "application/json";
    json_decref(o);
}

/* ---- what devices and tenants look like ---- */

static json_t *num_or_null(long v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *device_json(const struct gd_device *d)
{
    json_t *procs = json_array(), *o;
    int k;

    for (k = 0; k < d->nproc; k++)
        json_array_append_new(
            procs, json_pack("{s:i, s:I, s:o}", "pid", (int)d->proc[k].pid, "memory_bytes",
                             (json_int_t)d->proc[k].mem, "utilization",
                             d->proc[k].sm_util < 0 ? json_null()
                                                    : json_real(d->proc[k].sm_util / 100.0)));
    o = json_pack("{s:i, s:s, s:s, s:I, s:I, s:I, s:o, s:o, s:o, s:o, s:o}", "index", d->index,
                  "uuid", d->uuid, "name", d->name, "memory_total_bytes", (json_int_t)d->mem_total,
                  "memory_used_bytes", (json_int_t)d->mem_used, "memory_reserved_bytes",
                  (json_int_t)d->mem_reserved, "utilization",
                  d->util < 0 ? json_null() : json_real(d->util / 100.0), "power_watts",
                  d->power_mw < 0 ? json_null() : json_real(d->power_mw / 1000.0), "sm_clock_mhz",
                  num_or_null(d->sm_clock), "temperature_celsius", num_or_null(d->temp_c),
                  "processes", procs);
    return o;
}

static json_t *limit_map(const struct gd_tenant *t, int mem)
{
    json_t *o = json_object();
    int e;

    if (t->managed) {
        const struct gpuslice_node_tenant *p = &t->policy;
        uint64_t def = mem ? p->mem_default : p->compute_default;

        json_object_set_new(o, "default", def ? json_integer((json_int_t)def) : json_null());
        for (e = 0; e < GPUSLICE_NODE_MAX_DEVICES; e++) {
            static const uint8_t zero[16];
            char u[GS_UUID_STRLEN];
            uint64_t v = mem ? p->dev[e].mem_limit : p->dev[e].compute_limit;

            if (memcmp(p->dev[e].uuid, zero, 16) == 0)
                continue;
            /* A pod's key of its containers' own CUDA index. */
            if (gs_node_key_index(p->dev[e].uuid) >= 0)
                snprintf(u, sizeof(u), "cuda:%d", gs_node_key_index(p->dev[e].uuid));
            else
                tenant_list_uuid(p->dev[e].uuid, u);
            json_object_set_new(o, u, v ? json_integer((json_int_t)v) : json_null());
        }
        return o;
    }
    if (t->t && (t->t->set_flags & (mem ? GPUSLICE_SET_MEMORY : GPUSLICE_SET_COMPUTE))) {
        uint64_t v = mem ? t->t->set_mem_limit : t->t->set_compute_limit;
        json_object_set_new(o, "default", v ? json_integer((json_int_t)v) : json_null());
    }
    for (e = 0; t->t && e < GPUSLICE_MAX_DEVICES; e++) {
        char u[GS_UUID_STRLEN];
        uint64_t v = mem ? t->t->dev[e].mem_limit : tenant_list_ceiling(&t->t->dev[e]);

        if (!tenant_list_dev_in_use(&t->t->dev[e]))
            continue;
        tenant_list_uuid(t->t->dev[e].uuid, u);
        json_object_set_new(o, u, v ? json_integer((json_int_t)v) : json_null());
    }
    return o;
}

static json_t *tenant_processes(const struct gd_tenant *t)
{
    const pid_t *seen = t->seen_pid;
    json_t *arr = json_array();
    int i, e;

    if (t->t == NULL)
        return arr;
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *p = &t->t->proc[i];
        json_t *mem;

        if (seen[i] == 0)
            continue;
        mem = json_object();
        for (e = 0; e < GPUSLICE_MAX_DEVICES; e++) {
            char u[GS_UUID_STRLEN];

            if (!tenant_list_dev_in_use(&t->t->dev[e]))
                continue;
            tenant_list_uuid(t->t->dev[e].uuid, u);
            json_object_set_new(mem, u, json_integer((json_int_t)p->mem_used[e]));
        }
        json_array_append_new(arr, json_pack("{s:o, s:i, s:I, s:o}", "pid",
                                             seen[i] > 0 ? json_integer(seen[i]) : json_null(),
                                             "pid_in_namespace", (int)p->pid, "pid_namespace",
                                             (json_int_t)p->pid_ns, "memory_bytes", mem));
    }
    return arr;
}

/* A count from a file its owner writes, as JSON: never negative (json_int_t is signed). */
static json_int_t count(uint64_t v)
{
    return v > (uint64_t)INT64_MAX ? (json_int_t)INT64_MAX : (json_int_t)v;
}

/* A tenant's class (never UNSET: normal) and weight (1..100), its file's read as hostile. */
static void tenant_sched(const struct gd_tenant *t, uint32_t *prio, uint32_t *weight)
{
    uint32_t p = 0, w = 0;

    if (t->managed) {
        p = t->policy.priority;
        w = t->policy.weight;
    } else if (t->t) {
        p = __atomic_load_n(&t->t->priority, __ATOMIC_RELAXED);
        w = __atomic_load_n(&t->t->weight, __ATOMIC_RELAXED);
    }
    *prio = p >= GPUSLICE_PRIORITY_BACKGROUND && p <= GPUSLICE_PRIORITY_LATENCY
                ? p
                : GPUSLICE_PRIORITY_NORMAL;
    *weight = w >= 1 && w <= GPUSLICE_WEIGHT_MAX ? w : 1;
}

/* Whether a managed tenant's limits name GPUs of the node (not a pod's CUDA indexes). */
static int has_gpu_keys(const struct gpuslice_node_tenant *p)
{
    static const uint8_t zero[16];
    int e;

    for (e = 0; e < GPUSLICE_NODE_MAX_DEVICES; e++)
        if (memcmp(p->dev[e].uuid, zero, 16) != 0 && gs_node_key_index(p->dev[e].uuid) < 0)
            return 1;
    return 0;
}

static json_t *tenant_json(const struct gd_tenant *t)
{
    json_t *devs = json_array(), *pids = json_array(), *o;
    char name[64];
    int e, nproc = 0;

    if (t->t)
        nproc = t->nlive;
    for (e = 0; t->t && e < GPUSLICE_MAX_DEVICES; e++) {
        const struct gpuslice_tenant_device *d = &t->t->dev[e];
        const struct gd_device *g = NULL;
        char u[GS_UUID_STRLEN];
        uint64_t mem = 0;
        uint32_t comp = 0;
        int k;

        if (!tenant_list_dev_in_use(d))
            continue;
        tenant_list_uuid(d->uuid, u);
        for (k = 0; k < gd.ndev; k++)
            if (memcmp(gd.dev[k].raw, d->uuid, 16) == 0)
                g = &gd.dev[k];
        if (g)
            gd_tenant_limits(t, g, &mem, &comp);
        else if (!t->managed) {
            mem = d->mem_limit;
            comp = tenant_list_ceiling(d);
        }
        json_array_append_new(
            devs, json_pack("{s:s, s:o, s:o, s:I, s:I, s:I, s:o, s:f, s:f, s:I}", "uuid", u,
                            "index", g ? json_integer(g->index) : json_null(), "memory_limit_bytes",
                            mem ? json_integer(count(mem)) : json_null(), "memory_used_bytes",
                            count(gd_tenant_mem_used(t, e)), "memory_charged_bytes",
                            count(gd_tenant_mem_charged(t, e)), "memory_nvml_bytes",
                            count(gd_tenant_mem_nvml(t, e)), "compute_limit_percent",
                            comp ? json_integer(comp) : json_null(), "gpu_time_seconds",
                            d->compute_busy_ns / 1e9, "throttled_seconds",
                            t->t->compute_throttled_ns[e] / 1e9, "allocations_refused",
                            count(t->t->mem_refused[e])));
    }
    /*
     * A GPU the guard sees the tenant's processes on that its state file does not name (a
     * process past the interposer): shown all the same, with NVML's figure. And one it has
     * limits of its own on, fixed when it was made, before a process of it uses that GPU
     * (with them, the default's GPUs too): the limits it will have there.
     */
    for (e = 0; t->managed && e < gd.ndev; e++) {
        const struct gd_device *g = &gd.dev[e];
        uint64_t nv = 0, mem = 0;
        uint32_t comp = 0;
        int c;

        if (gd_tenant_entry(t, g->raw) >= 0)
            continue;
        if (gd_guard_use(t->node_id, g->raw, &nv, &c) < 0)
            nv = 0;
        gd_tenant_limits(t, g, &mem, &comp);
        if (nv == 0 && !(has_gpu_keys(&t->policy) && (mem || comp)))
            continue;
        json_array_append_new(
            devs, json_pack("{s:s, s:i, s:o, s:I, s:I, s:I, s:o, s:f, s:f, s:I}", "uuid", g->uuid,
                            "index", g->index, "memory_limit_bytes",
                            mem ? json_integer(count(mem)) : json_null(), "memory_used_bytes",
                            count(nv), "memory_charged_bytes", (json_int_t)0, "memory_nvml_bytes",
                            count(nv), "compute_limit_percent",
                            comp ? json_integer(comp) : json_null(), "gpu_time_seconds", 0.0,
                            "throttled_seconds", 0.0, "allocations_refused", (json_int_t)0));
    }
    for (e = 0; t->t && e < GPUSLICE_MAX_PROCS; e++)
        if (t->seen_pid[e] > 0)
            json_array_append_new(pids, json_integer(t->seen_pid[e]));
    gd_tenant_name(t, name, sizeof(name));
    o = json_pack("{s:s, s:s, s:b, s:I, s:i, s:o, s:I, s:I, s:{s:o, s:o}, s:i, s:o}", "id", t->id,
                  "name", name, "managed", t->managed, "owner", (json_int_t)t->owner, "creator_pid",
                  t->managed || t->t == NULL || t->t->creator_pid < 0 ? 0 : (int)t->t->creator_pid,
                  "pids", pids, "read_monotonic_ns", count(t->read_ns), "created_unix_ns",
                  count(t->managed ? t->policy.created_unix_ns
                        : t->t     ? t->t->created_unix_ns
                                   : 0),
                  "limits", "memory", limit_map(t, 1), "compute", limit_map(t, 0), "processes",
                  nproc, "devices", devs);
    {
        uint32_t prio, weight;

        tenant_sched(t, &prio, &weight);
        json_object_set_new(o, "priority", json_string(gs_priority_name(prio)));
        json_object_set_new(o, "weight", json_integer(weight));
    }
    {
        json_t *pod = gd_pods_tenant_json(t);

        json_object_set_new(o, "pod", pod ? pod : json_null());
    }
    json_object_set_new(o, "frozen", json_boolean(t->managed && gd_guard_frozen(t->node_id)));
    return o;
}

/* ---- requests ---- */

static int may_read(const struct gd_request *req, const struct gd_tenant *t)
{
    return req->peer.admin || req->peer.uid == t->owner;
}

/* The tenant of the route's {tenant}, or an answer (404, 403) and NULL. Under gd.mu. */
static struct gd_tenant *tenant_of(struct gd_request *req, struct gd_response *resp)
{
    struct gd_tenant *t = gd_tenant_find(req->params[0]);

    if (t == NULL) {
        gd_api_error(resp, 404, "not_found",
                     "no tenant \"%s\" (give a tenant's id or a managed tenant's name: GET "
                     "/v1/tenants lists them)",
                     req->params[0]);
        return NULL;
    }
    if (!may_read(req, t)) {
        gd_api_error(resp, 403, "forbidden",
                     "tenant %s belongs to uid %d; only its owner or an admin (root, group %s) "
                     "may see or change it",
                     t->id, (int)t->owner, gd_opt.admin_group);
        return NULL;
    }
    return t;
}

static int is_json(const struct gd_request *req)
{
    const char *c = req->content_type;
    size_t n = strlen("application/json");

    return c && strncasecmp(c, "application/json", n) == 0 && (c[n] == '\0' || c[n] == ';');
}

/* The body as a JSON object, or an answer (415, 400) and NULL. */
static json_t *body_object(struct gd_request *req, struct gd_response *resp)
{
    json_error_t je;
    json_t *o;

    if (!is_json(req)) {
        gd_api_error(resp, 415, "unsupported_media_type",
                     "the body must be JSON, sent with \"Content-Type: application/json\" (got "
                     "%s)",
                     req->content_type ? req->content_type : "none");
        return NULL;
    }
    if ((o = json_loadb(req->body, req->body_len, JSON_REJECT_DUPLICATES, &je)) == NULL) {
        gd_api_error(resp, 400, "bad_json", "the body is not JSON: %s (at character %d)", je.text,
                     je.position);
        return NULL;
    }
    if (!json_is_object(o)) {
        json_decref(o);
        gd_api_error(resp, 400, "bad_json", "the body must be a JSON object");
        return NULL;
    }
    return o;
}

/* Refuses members of o other than the allowed ones; 0, or -1 with the answer. */
static int only_fields(json_t *o, const char *const *allowed, struct gd_response *resp)
{
    const char *key;
    json_t *v;

    json_object_foreach(o, key, v)
    {
        const char *const *a;
        char list[256] = "";

        for (a = allowed; *a; a++)
            if (strcmp(*a, key) == 0)
                break;
        if (*a)
            continue;
        for (a = allowed; *a; a++)
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
                     a == allowed ? "" : ", ", *a);
        gd_api_error(resp, 400, "unknown_field", "unknown field \"%.100s\" (accepted: %s)", key,
                     list);
        return -1;
    }
    return 0;
}

/* One value of a limit: a size ("8G", bytes as an integer) or a percentage 1..100. */
static int limit_value(json_t *v, int mem, const char *field, const char *key, uint64_t *out,
                       char *err, size_t errlen)
{
    if (json_is_null(v)) {
        *out = 0;
        return 0;
    }
    if (mem) {
        if (json_is_string(v)) {
            if (gs_parse_size(json_string_value(v), out) < 0) {
                gs_set_error(err, errlen, "%s%s%s: \"%.64s\" is not a size (" GS_SIZE_FORMS ")",
                             field, key ? "." : "", key ? key : "", json_string_value(v));
                return -1;
            }
        } else if (json_is_integer(v) && json_integer_value(v) >= 0) {
            *out = (uint64_t)json_integer_value(v);
        } else {
            gs_set_error(err, errlen,
                         "%s%s%s: give a size as a string (" GS_SIZE_FORMS
                         ") or bytes as an integer",
                         field, key ? "." : "", key ? key : "");
            return -1;
        }
        if (*out && *out < GS_MIN_MEMORY_LIMIT) {
            gs_set_error(err, errlen, "%s%s%s: %llu bytes is below the smallest limit, 1M", field,
                         key ? "." : "", key ? key : "", (unsigned long long)*out);
            return -1;
        }
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > 100) {
        gs_set_error(err, errlen,
                     "%s%s%s: give a percentage of the GPU's time, an integer 1..100 (100 or "
                     "null: no ceiling)",
                     field, key ? "." : "", key ? key : "");
        return -1;
    }
    *out = (uint64_t)json_integer_value(v);
    if (*out == 100)
        *out = 0;
    return 0;
}

/* "memory" or "compute": one value for every GPU, or an object by index or UUID. */
static int parse_limits(json_t *v, int mem, struct gs_limits *out, char *err, size_t errlen)
{
    const char *field = mem ? "memory" : "compute", *key;
    json_t *val;

    memset(out, 0, sizeof(*out));
    out->source = field;
    if (!json_is_object(v)) {
        out->n = 1;
        out->e[0].key = GS_KEY_ALL;
        return limit_value(v, mem, field, NULL, &out->e[0].value, err, errlen);
    }
    const char *keys[GS_MAX_LIMIT_ENTRIES];
    int k;

    json_object_foreach(v, key, val)
    {
        struct gs_limit_entry *e = &out->e[out->n];
        const struct gd_device *d;

        if (out->n >= GS_MAX_LIMIT_ENTRIES) {
            gs_set_error(err, errlen, "%s: more than %d entries", field, GS_MAX_LIMIT_ENTRIES);
            return -1;
        }
        memset(e, 0, sizeof(*e));
        if (strcmp(key, "default") == 0) {
            e->key = GS_KEY_ALL;
        } else if ((d = gd_device_find(key)) != NULL) {
            e->key = GS_KEY_UUID;
            gs_parse_uuid(d->uuid, strlen(d->uuid), e->uuid);
        } else {
            gs_set_error(err, errlen,
                         "%s: \"%.64s\" is not a GPU of this node (keys: \"default\", an NVML "
                         "index 0..%d, or a GPU UUID: GET /v1/devices)",
                         field, key, gd.ndev - 1);
            return -1;
        }
        /* Two keys for one GPU ("0" and its UUID, or two spellings of it): which would win? */
        for (k = 0; k < out->n; k++)
            if (out->e[k].key == e->key &&
                (e->key == GS_KEY_ALL || strcmp(out->e[k].uuid, e->uuid) == 0)) {
                gs_set_error(err, errlen,
                             "%s: \"%.64s\" and \"%.64s\" name the same GPU (give each GPU once)",
                             field, keys[k], key);
                return -1;
            }
        if (limit_value(val, mem, field, key, &e->value, err, errlen) < 0)
            return -1;
        keys[out->n++] = key;
    }
    return 0;
}

/* The limits of a body's "memory" and "compute"; 0, or -1 with a 400 answer. */
static int body_limits(json_t *o, struct gd_limits_req *l, struct gd_response *resp)
{
    char err[512];
    json_t *v;

    memset(l, 0, sizeof(*l));
    if ((v = json_object_get(o, "memory")) != NULL) {
        if (parse_limits(v, 1, &l->mem, err, sizeof(err)) < 0)
            goto bad;
        l->has_mem = 1;
    }
    if ((v = json_object_get(o, "compute")) != NULL) {
        if (parse_limits(v, 0, &l->comp, err, sizeof(err)) < 0)
            goto bad;
        l->has_comp = 1;
    }
    if ((v = json_object_get(o, "priority")) != NULL &&
        (!json_is_string(v) || gs_parse_priority(json_string_value(v), &l->priority) < 0)) {
        snprintf(err, sizeof(err), "priority: give \"latency\", \"normal\" or \"background\"");
        goto bad;
    }
    if ((v = json_object_get(o, "weight")) != NULL &&
        (!json_is_integer(v) || json_integer_value(v) < 1 ||
         json_integer_value(v) > GPUSLICE_WEIGHT_MAX)) {
        snprintf(err, sizeof(err), "weight: give an integer from 1 to %u", GPUSLICE_WEIGHT_MAX);
        goto bad;
    }
    if (v)
        l->weight = (uint32_t)json_integer_value(v);
    return 0;
bad:
    gd_api_error(resp, 400, "bad_value", "%s", err);
    return -1;
}

/* The effective limit (0: none, read as infinite) of a limits table for raw. */
static uint64_t effective(const struct gs_limits *l, const uint8_t raw[16], uint64_t current)
{
    char u[GS_UUID_STRLEN];
    int k;

    gs_format_uuid(raw, u);
    for (k = 0; k < l->n; k++)
        if (l->e[k].key == GS_KEY_UUID && strcasecmp(l->e[k].uuid, u) == 0)
            return l->e[k].value;
    for (k = 0; k < l->n; k++)
        if (l->e[k].key == GS_KEY_ALL)
            return l->e[k].value;
    return current;
}

static int raises(uint64_t now, uint64_t want)
{
    return now != 0 && (want == 0 || want > now);
}

/* The limit policy p gives the GPU raw (memory in bytes or compute in percent; 0: none). */
static uint64_t policy_limit(const struct gpuslice_node_tenant *p, const uint8_t raw[16], int mem)
{
    int d;

    for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
        if (memcmp(p->dev[d].uuid, raw, 16) == 0)
            return mem ? p->dev[d].mem_limit : p->dev[d].compute_limit;
    return mem ? p->mem_default : p->compute_default;
}

/*
 * A limit for people: memory as "8 GiB (8589934592 bytes)", compute as "25 %", 0 as "no
 * limit" (issue 31: a refusal printed raw byte counts).
 */
static const char *limit_text(int mem, uint64_t v, char *buf, size_t len)
{
    char size[32];

    if (v == 0)
        snprintf(buf, len, "no limit");
    else if (!mem)
        snprintf(buf, len, "%llu %%", (unsigned long long)v);
    else {
        gs_format_size(v, size, sizeof(size));
        snprintf(buf, len, "%s (%llu bytes)", size, (unsigned long long)v);
    }
    return buf;
}

/*
 * Whether policy b gives any GPU a higher limit than a does, judged per GPU on the whole of
 * both (every GPU of the node, every GPU either names, and the default for the others), or a
 * higher class or weight; names it in err.
 */
static int policy_raises(const struct gpuslice_node_tenant *a, const struct gpuslice_node_tenant *b,
                         char *err, size_t errlen)
{
    static const uint8_t zero[16];
    char t1[64], t2[64];
    int k, mem;

    for (mem = 1; mem >= 0; mem--) {
        const char *what = mem ? "memory" : "compute";
        uint64_t now = mem ? a->mem_default : a->compute_default,
                 want = mem ? b->mem_default : b->compute_default;

        if (raises(now, want)) {
            gs_set_error(err, errlen, "the %s default from %s to %s", what,
                         limit_text(mem, now, t1, sizeof(t1)),
                         limit_text(mem, want, t2, sizeof(t2)));
            return 1;
        }
        for (k = 0; k < gd.ndev + 2 * GPUSLICE_NODE_MAX_DEVICES; k++) {
            const uint8_t *raw = k < gd.ndev ? gd.dev[k].raw
                                 : k < gd.ndev + GPUSLICE_NODE_MAX_DEVICES
                                     ? a->dev[k - gd.ndev].uuid
                                     : b->dev[k - gd.ndev - GPUSLICE_NODE_MAX_DEVICES].uuid;
            char u[GS_UUID_STRLEN];

            if (memcmp(raw, zero, 16) == 0)
                continue;
            now = policy_limit(a, raw, mem);
            want = policy_limit(b, raw, mem);
            if (raises(now, want)) {
                gs_format_uuid(raw, u);
                if (k < gd.ndev)
                    gs_set_error(err, errlen, "%s on GPU %d from %s to %s", what, gd.dev[k].index,
                                 limit_text(mem, now, t1, sizeof(t1)),
                                 limit_text(mem, want, t2, sizeof(t2)));
                else
                    gs_set_error(err, errlen, "%s on GPU-%s from %s to %s", what, u + 4,
                                 limit_text(mem, now, t1, sizeof(t1)),
                                 limit_text(mem, want, t2, sizeof(t2)));
                return 1;
            }
        }
    }
    {
        uint32_t pa = a->priority ? a->priority : GPUSLICE_PRIORITY_NORMAL,
                 pb = b->priority ? b->priority : GPUSLICE_PRIORITY_NORMAL,
                 wa = a->weight ? a->weight : 1, wb = b->weight ? b->weight : 1;

        if (pb > pa) {
            gs_set_error(err, errlen, "the priority class from %s to %s", gs_priority_name(pa),
                         gs_priority_name(pb));
            return 1;
        }
        if (wb > wa) {
            gs_set_error(err, errlen, "the weight from %u to %u", wa, wb);
            return 1;
        }
    }
    return 0;
}

/*
 * Whether l raises any limit of t on any GPU of the node; names it in err. A managed
 * tenant's change is judged on its policy as it would be after the whole change (so no
 * order of keys, and no key the check reads differently from the update, can raise a GPU
 * unseen); a gpuslice run's, which its owner may write anyway, on each GPU's value.
 */
static int raises_any(const struct gd_tenant *t, const struct gd_limits_req *l, char *err,
                      size_t errlen)
{
    char t1[64], t2[64];
    int k, mem;

    if (t->managed) {
        struct gpuslice_node_tenant before, after;

        /* A change that cannot be made raises nothing: the update refuses it itself. */
        if (gd_tenant_preview(t, l, &before, &after, err, errlen) < 0)
            return 0;
        return policy_raises(&before, &after, err, errlen);
    }

    for (k = 0; k < gd.ndev; k++) {
        uint64_t m;
        uint32_t c;

        gd_tenant_limits(t, &gd.dev[k], &m, &c);
        for (mem = 1; mem >= 0; mem--) {
            const struct gs_limits *lim = mem ? &l->mem : &l->comp;
            uint64_t now = mem ? m : c, want;

            if (!(mem ? l->has_mem : l->has_comp))
                continue;
            want = effective(lim, gd.dev[k].raw, now);
            if (raises(now, want)) {
                gs_set_error(err, errlen, "%s on GPU %d from %s to %s", mem ? "memory" : "compute",
                             gd.dev[k].index, limit_text(mem, now, t1, sizeof(t1)),
                             limit_text(mem, want, t2, sizeof(t2)));
                return 1;
            }
        }
    }
    {
        uint32_t prio, weight;

        tenant_sched(t, &prio, &weight);
        if (l->priority && l->priority > prio) {
            gs_set_error(err, errlen, "the priority class from %s to %s", gs_priority_name(prio),
                         gs_priority_name(l->priority));
            return 1;
        }
        if (l->weight && l->weight > weight) {
            gs_set_error(err, errlen, "the weight from %u to %u", weight, l->weight);
            return 1;
        }
    }
    return 0;
}

/* ---- handlers ---- */

static void h_healthz(struct gd_request *req, struct gd_response *resp)
{
    (void)req;
    reply(resp, 200, json_pack("{s:s}", "status", "ok"));
}

static void h_readyz(struct gd_request *req, struct gd_response *resp)
{
    char why[sizeof(gd.state_error)];
    const char *unplaced;

    (void)req;
    if (__atomic_load_n(&gd.ready, __ATOMIC_ACQUIRE) <= 0) {
        gd_api_error(resp, 503, "not_ready", "the daemon has not read its GPUs and tenants yet");
        return;
    }
    if ((unplaced = gd_pods_unplaced()) != NULL) {
        gd_api_error(resp, 503, "not_ready",
                     "pods' processes are refused: their cgroups cannot be placed (%s)", unplaced);
        return;
    }
    /* Not ready while a change could not be made durable: it would be lost at a reboot. */
    pthread_mutex_lock(&gd.mu);
    memcpy(why, gd.state_error, sizeof(why));
    pthread_mutex_unlock(&gd.mu);
    if (why[0]) {
        gd_api_error(resp, 503, "not_ready", "%s: changes to tenants are refused until it can be",
                     why);
        return;
    }
    reply(resp, 200,
          json_pack("{s:s, s:b, s:s}", "status", "ready", "simulated", gd.simulated, "memory_wall",
                    gd_wall_state()));
}

static void h_openapi(struct gd_request *req, struct gd_response *resp)
{
    (void)req;
    resp->body = strdup(gd_openapi_json);
    resp->len = resp->body ? strlen(resp->body) : 0;
    resp->status = 200;
    resp->content_type = "application/json";
}

static void h_metrics(struct gd_request *req, struct gd_response *resp)
{
    pthread_mutex_lock(&gd.mu);
    resp->len = gd_metrics_render(&resp->body, req->peer.uid, req->peer.admin);
    pthread_mutex_unlock(&gd.mu);
    resp->status = resp->body ? 200 : 500;
    resp->content_type = "text/plain; version=0.0.4; charset=utf-8";
}

/* The node's pods as the daemon follows them from the Kubernetes API (kube.c). */
static void h_pods(struct gd_request *req, struct gd_response *resp)
{
    json_t *o = gd_kube_pods_json();

    /* The cluster's pods are an admin's to see: a user gets the state, and no pod. */
    if (o && !req->peer.admin)
        json_object_set_new(o, "pods", json_array());
    reply(resp, 200, o);
}

static void h_devices(struct gd_request *req, struct gd_response *resp)
{
    json_t *arr = json_array();
    int k;

    (void)req;
    pthread_mutex_lock(&gd.mu);
    for (k = 0; k < gd.ndev; k++)
        json_array_append_new(arr, device_json(&gd.dev[k]));
    pthread_mutex_unlock(&gd.mu);
    reply(resp, 200,
          json_pack("{s:s, s:b, s:s, s:o}", "hostname", gd.hostname, "simulated", gd.simulated,
                    "driver_version", gd.driver_version, "devices", arr));
}

static void h_device(struct gd_request *req, struct gd_response *resp)
{
    const struct gd_device *d;

    pthread_mutex_lock(&gd.mu);
    if ((d = gd_device_find(req->params[0])) == NULL) {
        int n = gd.ndev;

        pthread_mutex_unlock(&gd.mu);
        gd_api_error(resp, 404, "not_found",
                     "no GPU \"%s\" on this node (give an NVML index 0..%d or a UUID)",
                     req->params[0], n - 1);
        return;
    }
    reply(resp, 200, device_json(d));
    pthread_mutex_unlock(&gd.mu);
}

static void h_tenants(struct gd_request *req, struct gd_response *resp)
{
    json_t *arr = json_array();
    int k;

    pthread_mutex_lock(&gd.mu);
    for (k = 0; k < gd.ntenant; k++)
        if (may_read(req, &gd.tenant[k]))
            json_array_append_new(arr, tenant_json(&gd.tenant[k]));
    pthread_mutex_unlock(&gd.mu);
    reply(resp, 200, json_pack("{s:o}", "tenants", arr));
}

static void h_tenant(struct gd_request *req, struct gd_response *resp)
{
    struct gd_tenant *t;

    pthread_mutex_lock(&gd.mu);
    if ((t = tenant_of(req, resp)) != NULL)
        reply(resp, 200, tenant_json(t));
    pthread_mutex_unlock(&gd.mu);
}

static int good_name(const char *s)
{
    size_t i, n = strlen(s);
    int digits = 1, dashes = 0;

    if (n == 0 || n > 63)
        return 0;
    /* Nor the form of a gpuslice run's ID ("<uid>-<pid>-<hex>"), which names its tenant. */
    for (i = 0; i < n; i++)
        dashes += s[i] == '-';
    if (dashes == 2 && strspn(s, "0123456789-abcdef") == n && s[0] >= '0' && s[0] <= '9')
        return 0;
    for (i = 0; i < n; i++) {
        char c = s[i];
        int ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                 (i > 0 && (c == '.' || c == '_' || c == '-'));
        if (!ok)
            return 0;
        digits &= c >= '0' && c <= '9';
    }
    return !digits;
}

static void h_create(struct gd_request *req, struct gd_response *resp)
{
    static const char *const fields[] = { "name",     "memory", "compute", "owner",
                                          "priority", "weight", NULL };
    struct gd_limits_req l;
    struct gd_tenant *t;
    json_t *o, *name, *owner;
    uid_t uid = req->peer.uid;
    char err[512];
    int r;

    if ((o = body_object(req, resp)) == NULL)
        return;
    if (only_fields(o, fields, resp) < 0)
        goto out;
    name = json_object_get(o, "name");
    if (!json_is_string(name) || !good_name(json_string_value(name))) {
        gd_api_error(resp, 400, "bad_value",
                     "name: give 1..63 characters of letters, digits, '.', '_' and '-', starting "
                     "with a letter or digit, not all digits, nor of the form UID-PID-HEX (a "
                     "gpuslice run's ID)");
        goto out;
    }
    if (strncmp(json_string_value(name), "pod-", 4) == 0 ||
        strncmp(json_string_value(name), "claim-", 6) == 0) {
        gd_api_error(resp, 400, "bad_value",
                     "name: names starting with \"pod-\" or \"claim-\" are the daemon's, for "
                     "Kubernetes pods and claims of its DRA driver");
        goto out;
    }
    if ((owner = json_object_get(o, "owner")) != NULL) {
        if (!json_is_integer(owner) || json_integer_value(owner) < 0 ||
            json_integer_value(owner) > 0x7fffffff) {
            gd_api_error(resp, 400, "bad_value", "owner: give a user ID, an integer");
            goto out;
        }
        uid = (uid_t)json_integer_value(owner);
        if (uid != req->peer.uid && !req->peer.admin) {
            gd_api_error(resp, 403, "forbidden",
                         "owner: only an admin (root, group %s) may make a tenant for another "
                         "user (you are uid %d)",
                         gd_opt.admin_group, (int)req->peer.uid);
            goto out;
        }
    }
    pthread_mutex_lock(&gd.mu);
    if (body_limits(o, &l, resp) == 0 && !req->peer.admin &&
        (l.priority == GPUSLICE_PRIORITY_LATENCY || l.weight > 1)) {
        gd_api_error(resp, 403, "forbidden",
                     "%s: only an admin (root, group %s) may make a tenant above the defaults "
                     "(class normal, weight 1)",
                     l.priority == GPUSLICE_PRIORITY_LATENCY ? "priority latency" : "weight",
                     gd_opt.admin_group);
    } else if (resp->status == 0 && !req->peer.admin &&
               gd_tenants_of(uid) >= (int)gd_opt.tenants_per_user) {
        /* One user may not fill the node's table: the others, and pods, need room too. */
        gd_api_error(resp, 429, "quota",
                     "uid %d has %d tenants of the daemon, the most a user may make "
                     "(tenants-per-user); delete one first, or ask an admin",
                     (int)uid, gd_tenants_of(uid));
    } else if (resp->status == 0) {
        if ((r = gd_tenant_create(json_string_value(name), uid, &l, &t, err, sizeof(err))) < 0)
            gd_api_error(resp,
                         gd_state_status(r) ? gd_state_status(r)
                         : r == -EEXIST     ? 409
                         : r == -ENOSPC     ? 507
                                            : 500,
                         gd_state_status(r) ? "state_not_written"
                         : r == -EEXIST     ? "conflict"
                                            : "cannot_create",
                         "%s", err);
        else
            reply(resp, 201, tenant_json(t));
    }
    pthread_mutex_unlock(&gd.mu);
out:
    json_decref(o);
}

/* A pod's tenant is the pod object's: 409 (said in resp) for a change through the API. */
static int pod_owned(const struct gd_tenant *t, struct gd_response *resp)
{
    if (!t->managed || !(t->policy.flags & GPUSLICE_NODE_POD))
        return 0;
    gd_api_error(resp, 409, "conflict",
                 "tenant %s is a Kubernetes pod's: its limits come from the pod's annotations, it "
                 "ends with the pod, and its processes join it by their cgroup",
                 t->id);
    return 1;
}

static void h_patch(struct gd_request *req, struct gd_response *resp)
{
    static const char *const fields[] = { "memory", "compute", "priority", "weight", NULL };
    struct gd_limits_req l;
    struct gd_tenant *t;
    char err[512];
    json_t *o;
    int r;

    if ((o = body_object(req, resp)) == NULL)
        return;
    if (only_fields(o, fields, resp) < 0) {
        json_decref(o);
        return;
    }
    pthread_mutex_lock(&gd.mu);
    if ((t = tenant_of(req, resp)) != NULL && !pod_owned(t, resp) &&
        body_limits(o, &l, resp) == 0) {
        if (!l.has_mem && !l.has_comp && !l.priority && !l.weight)
            gd_api_error(resp, 400, "bad_value",
                         "give \"memory\", \"compute\", \"priority\" or \"weight\"");
        else if (!req->peer.admin && raises_any(t, &l, err, sizeof(err)))
            gd_api_error(resp, 403, "forbidden",
                         "only an admin (root, group %s) may raise a limit: this would raise %s",
                         gd_opt.admin_group, err);
        else if (!t->managed) {
            /*
             * A gpuslice run's: its file is changed without gd.mu, as it may wait up to 2 s for
             * the tenant's lock, which its owner can hold (every other request, the sampler and
             * the guard waited behind it).
             */
            char path[PATH_MAX], id[GD_ID_MAX];
            struct gpuslice_tenant *now = NULL;
            uid_t owner = t->owner;
            uint64_t began = 0;

            snprintf(path, sizeof(path), "%s", t->path);
            snprintf(id, sizeof(id), "%s", t->id);
            pthread_mutex_unlock(&gd.mu);
            r = gd_run_tenant_set(path, owner, id, &l, err, sizeof(err));
            if (r == 0) {
                began = gd_mono_ns();
                now = gd_run_tenant_read(path, owner);
            }
            pthread_mutex_lock(&gd.mu);
            if (r < 0)
                gd_api_error(resp, r == -ENOENT ? 404 : 400, "bad_value", "%s", err);
            else if ((t = gd_tenant_find(req->params[0])) != NULL && now &&
                     strcmp(t->path, path) == 0 && t->owner == owner) {
                /*
                 * Its limits as changed, not as the last sweep read them; unless the copy the
                 * daemon holds was read after this one began (a sweep, or another change).
                 */
                if (began > t->read_ns && began > t->changed_ns) {
                    gd_run_tenant_limits_from(t, now);
                    t->changed_ns = began;
                }
                reply(resp, 200, tenant_json(t));
            } else
                reply(resp, 200, json_pack("{s:s}", "status", "changed"));
            if (now)
                gs_tenant_close(now);
        } else if ((r = gd_tenant_update(t, &l, err, sizeof(err))) < 0)
            gd_api_error(resp,
                         gd_state_status(r) ? gd_state_status(r)
                         : r == -ENOENT     ? 404
                                            : 400,
                         gd_state_status(r) ? "state_not_written" : "bad_value", "%s", err);
        else if ((t = gd_tenant_find(req->params[0])) != NULL)
            reply(resp, 200, tenant_json(t));
        else
            reply(resp, 200, json_pack("{s:s}", "status", "changed"));
    }
    pthread_mutex_unlock(&gd.mu);
    json_decref(o);
}

static void h_delete(struct gd_request *req, struct gd_response *resp)
{
    struct gd_tenant *t;
    char err[512];
    int r;

    /* req->query: the value of the route's one query argument, force. */
    int force = req->query && (strcmp(req->query, "true") == 0 || strcmp(req->query, "1") == 0);

    if (req->query && !force && strcmp(req->query, "false") != 0 && strcmp(req->query, "0") != 0) {
        gd_api_error(resp, 400, "bad_value",
                     "force: \"%.64s\" is not true or false (true, for admins: kill the tenant's "
                     "processes, then delete it)",
                     req->query);
        return;
    }
    if (force && !req->peer.admin) {
        gd_api_error(resp, 403, "forbidden",
                     "only an admin (root, group %s) may delete a tenant with force",
                     gd_opt.admin_group);
        return;
    }
    pthread_mutex_lock(&gd.mu);
    if ((t = tenant_of(req, resp)) != NULL && !pod_owned(t, resp)) {
        if ((r = gd_tenant_delete(t, force, err, sizeof(err))) < 0)
            gd_api_error(resp,
                         gd_state_status(r) ? gd_state_status(r)
                         : r == -EBUSY      ? 409
                                            : 400,
                         gd_state_status(r) ? "state_not_written"
                         : r == -EBUSY      ? "conflict"
                                            : "bad_request",
                         "%s", err);
        else
            resp->status = 204;
    }
    pthread_mutex_unlock(&gd.mu);
}

static void h_processes(struct gd_request *req, struct gd_response *resp)
{
    struct gd_tenant *t;

    pthread_mutex_lock(&gd.mu);
    if ((t = tenant_of(req, resp)) != NULL)
        reply(resp, 200, json_pack("{s:o}", "processes", tenant_processes(t)));
    pthread_mutex_unlock(&gd.mu);
}

/* The calling process (the kernel names it: SO_PEERCRED) joins the tenant. */
static void h_join(struct gd_request *req, struct gd_response *resp)
{
    struct gd_tenant *t;
    char err[512];
    int r;

    if (!req->peer.unix_peer || req->peer.pid <= 0) {
        gd_api_error(resp, 400, "bad_request",
                     "a process joins a tenant over the unix socket, which names it (gpuslice "
                     "run --tenant NAME)");
        return;
    }
    pthread_mutex_lock(&gd.mu);
    if ((t = tenant_of(req, resp)) != NULL && !pod_owned(t, resp)) {
        if (req->peer.uid != t->owner && !req->peer.admin)
            gd_api_error(resp, 403, "forbidden", "tenant %s belongs to uid %d", t->id,
                         (int)t->owner);
        else if ((r = gd_tenant_join_as(t, req->peer.pid, req->peer.pid_ns, req->peer.inner,
                                        req->peer.start, req->peer.admin, err, sizeof(err))) < 0)
            gd_api_error(resp,
                         r == -ENOSPC   ? 507
                         : r == -EDQUOT ? 429
                         : r == -EPERM  ? 403
                                        : 400,
                         r == -EPERM    ? "forbidden"
                         : r == -EDQUOT ? "quota"
                                        : "cannot_join",
                         "%s", err);
        else
            reply(resp, 200,
                  json_pack("{s:s, s:i, s:s}", "tenant", t->id, "pid", (int)req->peer.pid,
                            "state_file", t->path));
    }
    pthread_mutex_unlock(&gd.mu);
}

static void h_events(struct gd_request *req, struct gd_response *resp)
{
    uint64_t from = gd_events_last();

    if (req->last_event_id) {
        char *end;
        unsigned long long v = strtoull(req->last_event_id, &end, 10);

        if (*req->last_event_id == '\0' || *end != '\0') {
            gd_api_error(resp, 400, "bad_value",
                         "Last-Event-ID: \"%.64s\" is not an event id (a decimal number)",
                         req->last_event_id);
            return;
        }
        from = v;
    }
    resp->status = 200;
    resp->sse = 1;
    resp->sse_from = from;
    resp->sse_uid = req->peer.uid;
    resp->sse_admin = req->peer.admin;
}

static const struct route routes[] = {
    { "GET", "/healthz", h_healthz },
    { "GET", "/readyz", h_readyz },
    { "GET", "/metrics", h_metrics },
    { "GET", "/v1/openapi.json", h_openapi },
    { "GET", "/v1/devices", h_devices },
    { "GET", "/v1/devices/{device}", h_device },
    { "GET", "/v1/tenants", h_tenants },
    { "POST", "/v1/tenants", h_create },
    { "GET", "/v1/tenants/{tenant}", h_tenant },
    { "PATCH", "/v1/tenants/{tenant}", h_patch },
    { "DELETE", "/v1/tenants/{tenant}", h_delete },
    { "GET", "/v1/tenants/{tenant}/processes", h_processes },
    { "POST", "/v1/tenants/{tenant}/processes", h_join },
    { "GET", "/v1/events", h_events },
    { "GET", "/v1/pods", h_pods },
};

#define NROUTES (sizeof(routes) / sizeof(routes[0]))

/* Whether path matches pattern; each {name} takes one non-empty segment into params. */
static int match(const char *pattern, const char *path, char *params[2], char *buf, size_t len)
{
    int np = 0;
    size_t used = 0;

    while (*pattern && *path) {
        if (*pattern == '{') {
            const char *end = strchr(path, '/');
            size_t n = end ? (size_t)(end - path) : strlen(path);

            if (n == 0 || np >= 2 || used + n + 1 > len)
                return 0;
            memcpy(buf + used, path, n);
            buf[used + n] = '\0';
            params[np++] = buf + used;
            used += n + 1;
            path += n;
            pattern = strchr(pattern, '}') + 1;
            continue;
        }
        if (*pattern++ != *path++)
            return 0;
    }
    return *pattern == '\0' && *path == '\0';
}

void gd_api_handle(struct gd_request *req, struct gd_response *resp)
{
    char buf[512], allow[64] = "";
    size_t k;
    int path_known = 0;

    for (k = 0; k < NROUTES; k++) {
        char *params[2] = { NULL, NULL };

        if (!match(routes[k].pattern, req->path, params, buf, sizeof(buf)))
            continue;
        path_known = 1;
        if (strcmp(routes[k].method, req->method) != 0) {
            snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow), "%s%s",
                     allow[0] ? ", " : "", routes[k].method);
            continue;
        }
        req->params[0] = params[0];
        req->params[1] = params[1];
        routes[k].fn(req, resp);
        if (resp->status == 0)
            resp->status = 500;
        return;
    }
    if (path_known)
        gd_api_error(resp, 405, "method_not_allowed", "%s is not allowed on %.200s (allowed: %s)",
                     req->method, req->path, allow);
    else
        gd_api_error(resp, 404, "not_found",
                     "no such endpoint: %.200s (the API is described at /v1/openapi.json)",
                     req->path);
}
