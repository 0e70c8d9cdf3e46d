/*
 * Tenant views: the daemon's answer and the run directory's files copied
 * into one plain form (control/tenant_view.h). The daemon's answer is read
 * with the CLI's own JSON reader and checked field by field: a member of the
 * wrong type or out of range makes the tenant invalid, never a guess.
 */
#define _GNU_SOURCE
#include "control/tenant_view.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/tenant.h"
#include "common/text.h"
#include "control/daemon_client.h"
#include "control/json.h"
#include "control/log.h"

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* A non-negative integer member up to max; dflt when absent or null; -1 when malformed. */
static int get_uint(const struct gs_json *o, const char *key, double max, uint64_t dflt,
                    uint64_t *out)
{
    const struct gs_json *v = gs_json_get(o, key);

    if (v == NULL || v->type == GS_JSON_NULL) {
        *out = dflt;
        return 0;
    }
    if (v->type != GS_JSON_NUMBER || !(v->num >= 0) || v->num > max || v->num != floor(v->num))
        return -1;
    *out = (uint64_t)v->num;
    return 0;
}

static int dev_from_json(struct tview_dev *d, const struct gs_json *o)
{
    const char *uuid = gs_json_str(gs_json_get(o, "uuid"), NULL);
    const struct gs_json *busy = gs_json_get(o, "gpu_time_seconds");
    uint64_t index, ceil;

    if (o->type != GS_JSON_OBJECT || uuid == NULL || strlen(uuid) >= sizeof(d->uuid))
        return -1;
    snprintf(d->uuid, sizeof(d->uuid), "%s", uuid);
    if (get_uint(o, "index", 1e6, UINT64_MAX, &index) < 0 ||
        get_uint(o, "memory_limit_bytes", 1.8e19, 0, &d->mem_limit) < 0 ||
        get_uint(o, "memory_used_bytes", 1.8e19, 0, &d->mem_used) < 0 ||
        get_uint(o, "compute_limit_percent", 100, 0, &ceil) < 0)
        return -1;
    if (busy == NULL || busy->type != GS_JSON_NUMBER || !(busy->num >= 0) || busy->num > 1.8e10)
        return -1;
    d->index = index == UINT64_MAX ? -1 : (int)index;
    d->ceiling = ceil >= 100 ? 0 : (uint32_t)ceil;
    d->busy_ns = (uint64_t)(busy->num * 1e9 + 0.5); /* at most 1.8e19: fits */
    d->used = -1;
    return 0;
}

int tview_from_json(struct tview *v, const struct gs_json *o)
{
    const char *id = gs_json_str(gs_json_get(o, "id"), NULL);
    const struct gs_json *jname = gs_json_get(o, "name");
    const char *name = gs_json_str(jname, "");
    const struct gs_json *pids = gs_json_get(o, "pids"), *devs = gs_json_get(o, "devices"), *e;
    const struct gs_json *managed = gs_json_get(o, "managed"), *limits = gs_json_get(o, "limits");
    uint64_t owner, creator, def_mem, def_ceil;

    memset(v, 0, sizeof(*v));
    if (o == NULL || o->type != GS_JSON_OBJECT || id == NULL || id[0] == '\0' ||
        strlen(id) >= sizeof(v->id) || strlen(name) >= sizeof(v->name) ||
        (jname && jname->type != GS_JSON_STRING))
        return -EINVAL;
    if (get_uint(o, "owner", 4294967294.0, UINT64_MAX, &owner) < 0 || owner == UINT64_MAX ||
        get_uint(o, "creator_pid", 4194304, 0, &creator) < 0 ||
        get_uint(o, "read_monotonic_ns", 1.8e19, 0, &v->at_ns) < 0)
        return -EINVAL;
    if (managed && managed->type != GS_JSON_TRUE && managed->type != GS_JSON_FALSE)
        return -EINVAL;
    snprintf(v->id, sizeof(v->id), "%s", id);
    snprintf(v->name, sizeof(v->name), "%s", name);
    v->owner = (uid_t)owner;
    v->creator = (int)creator;
    v->managed = managed && managed->type == GS_JSON_TRUE;
    if (pids) {
        if (pids->type != GS_JSON_ARRAY)
            return -EINVAL;
        for (e = pids->child; e; e = e->next) {
            if (e->type != GS_JSON_NUMBER || !(e->num >= 1) || e->num > 4194304 ||
                e->num != floor(e->num))
                return -EINVAL;
            if (v->npids < TVIEW_PIDS)
                v->pids[v->npids] = (int)e->num;
            v->npids++;
        }
    }
    if (limits && limits->type != GS_JSON_OBJECT)
        return -EINVAL;
    if (get_uint(gs_json_get(limits, "memory"), "default", 1.8e19, 0, &def_mem) < 0 ||
        get_uint(gs_json_get(limits, "compute"), "default", 100, 0, &def_ceil) < 0)
        return -EINVAL;
    v->def_mem = def_mem;
    v->def_ceiling = def_ceil >= 100 ? 0 : (uint32_t)def_ceil;
    {
        const struct gs_json *jp = gs_json_get(o, "priority");
        uint64_t w;

        v->priority = GPUSLICE_PRIORITY_NORMAL;
        if (jp && (jp->type != GS_JSON_STRING || gs_parse_priority(jp->str, &v->priority) < 0))
            return -EINVAL;
        if (get_uint(o, "weight", GPUSLICE_WEIGHT_MAX, 1, &w) < 0 || w < 1)
            return -EINVAL;
        v->weight = (uint32_t)w;
    }
    if (devs == NULL || devs->type != GS_JSON_ARRAY || devs->n > GPUSLICE_MAX_DEVICES)
        return -EINVAL;
    for (e = devs->child; e; e = e->next)
        if (dev_from_json(&v->dev[v->ndev++], e) < 0)
            return -EINVAL;
    return 0;
}

void tview_from_entry(struct tview *v, const struct tenant_entry *te)
{
    const struct gpuslice_tenant *t = te->t;
    int d;

    memset(v, 0, sizeof(*v));
    snprintf(v->id, sizeof(v->id), "%s", te->id);
    tenant_list_name(t, v->name, sizeof(v->name));
    v->owner = te->owner;
    v->creator = t->creator_pid > 0 ? (int)t->creator_pid : 0;
    v->at_ns = te->read_ns;
    v->npids = tenant_list_pids(t, v->pids, TVIEW_PIDS);
    v->priority = __atomic_load_n(&t->priority, __ATOMIC_RELAXED);
    if (v->priority < GPUSLICE_PRIORITY_BACKGROUND || v->priority > GPUSLICE_PRIORITY_LATENCY)
        v->priority = GPUSLICE_PRIORITY_NORMAL; /* not set, or not a class: what applies */
    v->weight = __atomic_load_n(&t->weight, __ATOMIC_RELAXED);
    if (v->weight < 1 || v->weight > GPUSLICE_WEIGHT_MAX)
        v->weight = 1;
    for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
        const struct gpuslice_tenant_device *dev = &t->dev[d];
        struct tview_dev *o = &v->dev[v->ndev];

        if (!tenant_list_dev_in_use(dev))
            continue;
        o->index = (int)dev->ordinal;
        tenant_list_uuid(dev->uuid, o->uuid);
        o->mem_limit = __atomic_load_n(&dev->mem_limit, __ATOMIC_RELAXED);
        o->mem_used = tenant_list_mem_used(t, d);
        o->ceiling = tenant_list_ceiling(dev);
        o->busy_ns = __atomic_load_n(&dev->compute_busy_ns, __ATOMIC_RELAXED);
        o->used = -1;
        v->ndev++;
    }
}

static int push(struct tview_list *l)
{
    if (l->n == l->cap) {
        size_t ncap = l->cap ? l->cap * 2 : 16;
        struct tview *nv = realloc(l->v, ncap * sizeof(*nv));

        if (nv == NULL)
            return -ENOMEM;
        l->v = nv;
        l->cap = ncap;
    }
    return 0;
}

int tview_parse(struct tview_list *l, const char *body, uint64_t at_ns, char *err, size_t errlen)
{
    const struct gs_json *arr, *o;
    struct gs_json *root;
    char why[512];

    root = gs_json_parse(body, strlen(body), why, sizeof(why));
    arr = gs_json_get(root, "tenants");
    if (root == NULL || arr == NULL || arr->type != GS_JSON_ARRAY) {
        snprintf(err, errlen, "gpusliced's answer to GET /v1/tenants is not a tenant list%s%.300s",
                 root ? "" : ": ", root ? "" : why);
        gs_json_free(root);
        return -EINVAL;
    }
    for (o = arr->child; o; o = o->next) {
        if (push(l) < 0) {
            snprintf(err, errlen, "%s", gs_strerror(-ENOMEM));
            gs_json_free(root);
            return -ENOMEM;
        }
        /* One odd tenant (what another user's file holds) must not hide the others. */
        if (tview_from_json(&l->v[l->n], o) < 0) {
            l->malformed++;
            continue;
        }
        if (l->v[l->n].at_ns == 0)
            l->v[l->n].at_ns = at_ns; /* an older daemon: when its answer came */
        l->n++;
    }
    gs_json_free(root);
    l->daemon = 1;
    return 0;
}

/* The daemon's tenants into l: 0, 1 when no daemon answers, or -1 after a message in err. */
static int read_daemon(struct tview_list *l, char *err, size_t errlen)
{
    char why[512], msg[512], shown[GS_TEXT_LEN(512)], *body = NULL;
    int st = gs_daemon_request("GET", "/v1/tenants", NULL, &body, why, sizeof(why));
    uint64_t at = now_ns();

    /* No daemon, or one this user may not ask (the socket is its group's): the files, as before. */
    if (st == -ECONNREFUSED || st == -ENOENT || st == -EACCES) {
        free(body);
        return 1;
    }
    if (st < 0) {
        snprintf(err, errlen, "%s", why);
        free(body);
        return -1;
    }
    if (st != 200) {
        gs_daemon_error_message(body, msg, sizeof(msg));
        gs_text_safe(shown, sizeof(shown), msg, strlen(msg));
        snprintf(err, errlen, "gpusliced answered GET /v1/tenants with HTTP %d: %.300s", st, shown);
        free(body);
        return -1;
    }
    st = tview_parse(l, body, at, err, errlen);
    free(body);
    return st < 0 ? -1 : 0;
}

static int listed(const struct tview_list *l, const char *id)
{
    size_t i;

    for (i = 0; i < l->n; i++)
        if (strcmp(l->v[i].id, id) == 0)
            return 1;
    return 0;
}

int tview_read(struct tview_list *l, int warn, char *err, size_t errlen)
{
    struct tenant_list files = { NULL, 0, 0, 0 };
    size_t i, ndaemon;
    char why[512];
    int r;

    memset(l, 0, sizeof(*l));
    if ((r = read_daemon(l, why, sizeof(why))) < 0) {
        /* Still show what the files hold: a daemon that cannot be asked hides nothing. */
        if (warn)
            gs_log_error("warning: %s; showing the run directory's tenants only", why);
        l->n = 0;
        l->daemon = 0;
    }
    if (warn && l->malformed)
        gs_log_error("warning: gpusliced sent %zu tenant%s this version cannot read; left out",
                     l->malformed, l->malformed == 1 ? "" : "s");
    ndaemon = l->n;
    if ((r = tenant_list_scan(&files, warn)) < 0) {
        snprintf(err, errlen,
                 "cannot read the run directory %s: %s (GPUSLICE_RUN_DIR must name a "
                 "directory you may list and search, default /dev/shm)",
                 gs_tenant_dir(), gs_strerror(r));
        tview_done(l);
        return r;
    }
    l->skipped = files.skipped;
    for (i = 0; i < files.n; i++) {
        if (ndaemon && listed(l, files.v[i].id))
            continue;
        if ((r = push(l)) < 0) {
            snprintf(err, errlen, "%s", gs_strerror(r));
            tenant_list_done(&files);
            tview_done(l);
            return r;
        }
        tview_from_entry(&l->v[l->n++], &files.v[i]);
    }
    tenant_list_done(&files);
    return 0;
}

void tview_usage(struct tview_list *b, const struct tview_list *a)
{
    size_t i, j;
    int d, e;

    for (i = 0; i < b->n; i++)
        for (j = 0; j < a->n; j++) {
            const struct tview *x0 = &a->v[j];
            struct tview *x1 = &b->v[i];
            double dt;

            if (strcmp(x1->id, x0->id) != 0)
                continue;
            if (x1->at_ns <= x0->at_ns)
                break;
            dt = (double)(x1->at_ns - x0->at_ns);
            for (d = 0; d < x1->ndev; d++) {
                struct tview_dev *y = &x1->dev[d];
                uint64_t before = 0; /* an entry added since the first reading started from zero */

                for (e = 0; e < x0->ndev; e++)
                    if (strcmp(x0->dev[e].uuid, y->uuid) == 0)
                        before = x0->dev[e].busy_ns;
                y->used = y->busy_ns <= before ? 0 : 100.0 * (double)(y->busy_ns - before) / dt;
            }
            break;
        }
}

int tview_stale(const struct tview_list *b, const struct tview_list *a)
{
    size_t i, j;

    for (i = 0; i < b->n; i++)
        for (j = 0; j < a->n; j++)
            if (strcmp(b->v[i].id, a->v[j].id) == 0 && b->v[i].at_ns <= a->v[j].at_ns)
                return 1;
    return 0;
}

void tview_done(struct tview_list *l)
{
    if (l == NULL)
        return;
    free(l->v);
    l->v = NULL;
    l->n = 0;
    l->cap = 0;
}

static void json_uint_or_null(FILE *f, const char *key, uint64_t v)
{
    if (v)
        fprintf(f, ",\"%s\":%llu", key, (unsigned long long)v);
    else
        fprintf(f, ",\"%s\":null", key);
}

void tview_json(FILE *f, const struct tview_list *l)
{
    size_t i;
    int d, k;

    fputc('[', f);
    for (i = 0; i < l->n; i++) {
        const struct tview *t = &l->v[i];

        fprintf(f, "%s{\"id\":", i ? "," : "");
        gs_json_string(f, t->id, strlen(t->id));
        fprintf(f, ",\"name\":");
        gs_json_string(f, t->name, strlen(t->name));
        fprintf(f, ",\"owner_uid\":%u,\"creator_pid\":%d,\"managed\":%s,\"pids\":[",
                (unsigned)t->owner, t->creator, t->managed ? "true" : "false");
        for (k = 0; k < t->npids && k < TVIEW_PIDS; k++)
            fprintf(f, "%s%d", k ? "," : "", t->pids[k]);
        fprintf(f, "]");
        json_uint_or_null(f, "default_memory_limit_bytes", t->def_mem);
        json_uint_or_null(f, "default_compute_limit_percent", t->def_ceiling);
        fprintf(f, ",\"priority\":\"%s\",\"weight\":%u", gs_priority_name(t->priority), t->weight);
        fprintf(f, ",\"devices\":[");
        for (d = 0; d < t->ndev; d++) {
            const struct tview_dev *x = &t->dev[d];

            fprintf(f, "%s{\"index\":", d ? "," : "");
            if (x->index >= 0)
                fprintf(f, "%d", x->index);
            else
                fprintf(f, "null");
            fprintf(f, ",\"uuid\":");
            gs_json_string(f, x->uuid, strlen(x->uuid));
            json_uint_or_null(f, "memory_limit_bytes", x->mem_limit);
            fprintf(f, ",\"memory_used_bytes\":%llu", (unsigned long long)x->mem_used);
            json_uint_or_null(f, "compute_limit_percent", x->ceiling);
            if (x->used >= 0)
                fprintf(f, ",\"compute_used_percent\":%.2f", x->used);
            else
                fprintf(f, ",\"compute_used_percent\":null");
            /* Exact, and independent of the locale's decimal point. */
            fprintf(f, ",\"compute_busy_seconds\":%llu.%09llu}",
                    (unsigned long long)(x->busy_ns / 1000000000ULL),
                    (unsigned long long)(x->busy_ns % 1000000000ULL));
        }
        fprintf(f, "]}");
    }
    fputc(']', f);
}
