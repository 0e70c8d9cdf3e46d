/*
 * The pods of this node, from the Kubernetes API server: a list (in pages),
 * then a watch from its resourceVersion, again and again; a 410 (the version
 * expired) lists again, a cut stream or a refusal waits (0.5 s, doubling to
 * 30 s) and watches again from the last version seen. Over TLS that checks
 * the server against the CA given (the service account's in a cluster), with
 * the service account's token, read again for every request (it rotates).
 * Each pod's GPU limits are read from it (podspec.c); a pod whose limits
 * cannot be read gets a Warning Event naming why. The view is the API's
 * /v1/pods. Pods are not tenants yet, and their processes are not tied to
 * them: that comes next (docs/kubernetes.md).
 */
#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/kube.h"
#include "daemon/pods.h"
#include "daemon/kubewatch.h"
#include "daemon/nvclaim.h"
#include "daemon/podspec.h"
#include "gpuslice/tenant_abi.h"

#define IN_CLUSTER_DIR "/var/run/secrets/kubernetes.io/serviceaccount"
#define LIST_PAGE 500
#define LIST_MAX_BODY (64u << 20) /* one page of 500 pods */
#define WATCH_MAX_LINE (4u << 20) /* one pod */
#define WATCH_SECONDS 290
#define BACKOFF_MIN_MS 500
#define BACKOFF_MAX_MS 30000

struct pod {
    struct gd_kube_pod p;
    char rv[GD_WATCH_RV_MAX];
    uint64_t gen; /* the list that last saw it */
};

static struct {
    pthread_mutex_t mu; /* the fields below the thread's */
    struct pod *pods[GD_MAX_PODS];
    int npods;
    char rv[GD_WATCH_RV_MAX];
    int synced; /* a list has been read whole */
    char state[512];
    unsigned long lists, watches, relists, events, refused;
    uint64_t gen;
    /* the thread's own */
    pthread_t th;
    int running;
    int client; /* api, token_file and ca_file set, libcurl started: gd_kube_call works */
    volatile int stop;
    char api[512], node[256], token_file[4096], ca_file[4096];
    int expired; /* the watch ended with 410 */
} kube = { .mu = PTHREAD_MUTEX_INITIALIZER };

int gd_kube_enabled(void)
{
    return kube.running;
}

static void set_state(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_state(const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&kube.mu);
    va_start(ap, fmt);
    vsnprintf(kube.state, sizeof(kube.state), fmt, ap);
    va_end(ap);
    pthread_mutex_unlock(&kube.mu);
}

/* The token, read again each time (it rotates); 0 or -1 with err. */
static int read_token(char *out, size_t len, char *err, size_t errlen)
{
    FILE *f = fopen(kube.token_file, "r");
    size_t n;

    if (!f) {
        snprintf(err, errlen, "cannot read the token %.300s: %s", kube.token_file, strerror(errno));
        return -1;
    }
    n = fread(out, 1, len - 1, f);
    fclose(f);
    out[n] = '\0';
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        out[--n] = '\0';
    if (n == 0 || n == len - 1 || strpbrk(out, "\r\n")) {
        snprintf(err, errlen, "the token %.300s is empty, too long or not one line",
                 kube.token_file);
        return -1;
    }
    return 0;
}

struct xfer {
    char *body;
    size_t len, cap, max;
    struct gd_watch *w; /* a watch: the body goes to its decoder */
    int rc;             /* the decoder's refusal */
    long status;
};

static size_t on_data(char *p, size_t sz, size_t n, void *arg)
{
    struct xfer *x = arg;
    size_t k = sz * n;

    /* A watch's 200 body goes to the decoder; any other body is kept (an error's Status). */
    if (x->w && x->status == 200) {
        if ((x->rc = gd_watch_feed(x->w, p, k)) < 0)
            return 0; /* stops the transfer */
        return k;
    }
    if (x->len + k > x->max)
        return 0;
    if (x->len + k + 1 > x->cap) {
        size_t cap = x->cap ? x->cap : 65536;
        char *b;

        while (cap < x->len + k + 1)
            cap *= 2;
        if (!(b = realloc(x->body, cap)))
            return 0;
        x->body = b;
        x->cap = cap;
    }
    memcpy(x->body + x->len, p, k);
    x->len += k;
    x->body[x->len] = '\0';
    return k;
}

/* The status line, before the body: which of on_data's paths the body takes. */
static size_t on_header(char *p, size_t sz, size_t n, void *arg)
{
    struct xfer *x = arg;
    size_t k = sz * n;
    char line[64];
    long code;

    /* (A header line is not NUL-terminated: a copy is.) */
    if (k > 9 && strncmp(p, "HTTP/", 5) == 0) {
        memcpy(line, p, k < sizeof(line) - 1 ? k : sizeof(line) - 1);
        line[k < sizeof(line) - 1 ? k : sizeof(line) - 1] = '\0';
        if (sscanf(line, "HTTP/%*s %ld", &code) == 1)
            x->status = code;
    }
    return k;
}

static int on_progress(void *arg, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
    (void)arg, (void)a, (void)b, (void)c, (void)d;
    return kube.stop ? 1 : 0;
}

/*
 * One request: method (NULL: GET without a body, POST with one) of path with a JSON body or
 * none. The HTTP status, or -1 with err for a transfer that failed (the connection, TLS, a cut
 * stream, the decoder's refusal).
 */
static long request_m(const char *method, const char *path, const char *body, struct xfer *x,
                      long timeout_s, char *err, size_t errlen)
{
    char url[4096], token[16384], auth[16448], cerr[CURL_ERROR_SIZE];
    struct curl_slist *h = NULL;
    CURL *c;
    CURLcode r;

    if (read_token(token, sizeof(token), err, errlen) < 0)
        return -1;
    if (!(c = curl_easy_init())) {
        snprintf(err, errlen, "libcurl could not start a request");
        return -1;
    }
    snprintf(url, sizeof(url), "%s%s", kube.api, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    h = curl_slist_append(h, auth);
    h = curl_slist_append(h, "Accept: application/json");
    if (body)
        h = curl_slist_append(h, "Content-Type: application/json");
    cerr[0] = '\0';
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(c, CURLOPT_CAINFO, kube.ca_file);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, timeout_s);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, x);
    curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(c, CURLOPT_HEADERDATA, x);
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    if (body)
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
    if (method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    r = curl_easy_perform(c);
    if (r == CURLE_OK)
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &x->status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    memset(token, 0, sizeof(token));
    memset(auth, 0, sizeof(auth));
    if (r != CURLE_OK) {
        if (x->w && x->rc < 0)
            snprintf(err, errlen, "%.256s", x->w->err);
        else
            snprintf(err, errlen, "%.200s: %.250s", kube.api,
                     cerr[0] ? cerr : curl_easy_strerror(r));
        return -1;
    }
    return x->status;
}

static void status_message(const struct xfer *x, long code, char *err, size_t errlen);

static long request(const char *path, const char *body, struct xfer *x, long timeout_s, char *err,
                    size_t errlen)
{
    return request_m(NULL, path, body, x, timeout_s, err, errlen);
}

long gd_kube_call(const char *method, const char *path, const json_t *body, json_t **out,
                  long timeout_s, char *err, size_t errlen)
{
    struct xfer x = { .max = LIST_MAX_BODY };
    char *b = NULL;
    long code;

    *out = NULL;
    if (!kube.client) {
        snprintf(err, errlen, "the daemon does not speak to a Kubernetes API server (kube-api)");
        return -1;
    }
    if (body && !(b = json_dumps(body, JSON_COMPACT))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    code = request_m(method, path, b, &x, timeout_s, err, errlen);
    free(b);
    if (code > 0 && x.body)
        *out = json_loads(x.body, 0, NULL);
    if (code > 0 && (code < 200 || code > 299))
        status_message(&x, code, err, errlen);
    free(x.body);
    return code;
}

const char *gd_kube_node(void)
{
    return kube.node;
}

/* A refusal's message: the Status's own, else the status code. */
static void status_message(const struct xfer *x, long code, char *err, size_t errlen)
{
    json_t *s = x->body ? json_loads(x->body, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(s, "message"));

    snprintf(err, errlen, "HTTP %ld from the API server%s%.300s", code, m ? ": " : "", m ? m : "");
    json_decref(s);
}

/* The pod's Warning Event: why its limits could not be read. */
static void post_event(const char *ns, const char *name, const char *uid, const char *msg)
{
    char path[1024], err[512], now[32];
    struct xfer x = { .max = 1 << 20 };
    time_t t = time(NULL);
    struct tm tm;
    json_t *ev;
    char *body;
    long code;

    gmtime_r(&t, &tm);
    strftime(now, sizeof(now), "%Y-%m-%dT%H:%M:%SZ", &tm);
    ev = json_pack("{s:s, s:s, s:{s:s+, s:s}, s:{s:s, s:s, s:s, s:s, s:s}, s:s, s:s, s:s, "
                   "s:{s:s, s:s}, s:s, s:s, s:s, s:s, s:i}",
                   "apiVersion", "v1", "kind", "Event", "metadata", "generateName", name, ".",
                   "namespace", ns, "involvedObject", "apiVersion", "v1", "kind", "Pod",
                   "namespace", ns, "name", name, "uid", uid, "reason", "InvalidGPULimits",
                   "message", msg, "type", "Warning", "source", "component", "gpusliced", "host",
                   kube.node, "reportingComponent", "gpusliced", "reportingInstance", kube.node,
                   "firstTimestamp", now, "lastTimestamp", now, "count", 1);
    body = ev ? json_dumps(ev, JSON_COMPACT) : NULL;
    json_decref(ev);
    if (!body)
        return;
    snprintf(path, sizeof(path), "/api/v1/namespaces/%s/events", ns);
    code = request(path, body, &x, 30, err, sizeof(err));
    free(body);
    if (code == 201 || code == 200) {
        pthread_mutex_lock(&kube.mu);
        kube.events++;
        pthread_mutex_unlock(&kube.mu);
    } else {
        if (code > 0)
            status_message(&x, code, err, sizeof(err));
        gd_log("kubernetes: no Event for pod %s/%s: %s", ns, name, err);
    }
    free(x.body);
}

static int find(const char *uid)
{
    int i;

    for (i = 0; i < kube.npods; i++)
        if (strcmp(kube.pods[i]->p.uid, uid) == 0)
            return i;
    return -1;
}

static void drop(int i)
{
    free(kube.pods[i]);
    kube.pods[i] = kube.pods[--kube.npods];
}

/*
 * A name, namespace, uid or resourceVersion of the API's: a string that fits, of the
 * characters Kubernetes allows in names (DNS subdomains; a uid or version has no others), so
 * that it is safe in a URL's path and in the daemon's JSON; or NULL.
 */
static const char *field(const json_t *md, const char *key, size_t max)
{
    const json_t *v = json_object_get(md, key);
    const char *s = json_string_value(v);
    size_t n = s ? json_string_length(v) : 0;

    if (!s || n == 0 || n >= max ||
        strspn(s, "abcdefghijklmnopqrstuvwxyz"
                  "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_") != n)
        return NULL;
    return s;
}

/*
 * The container IDs of the pod's status (containerStatuses and initContainerStatuses:
 * "containerd://ID", "cri-o://ID", "docker://ID"), with their names, for labels.
 */
static void containers(const json_t *obj, struct gd_kube_pod *p)
{
    static const char *const lists[] = { "containerStatuses", "initContainerStatuses" };
    const json_t *st = json_object_get(obj, "status"), *c;
    size_t k, i;

    p->ncont = 0;
    for (k = 0; k < 2; k++)
        json_array_foreach(json_object_get(st, lists[k]), i, c)
        {
            const char *name = json_string_value(json_object_get(c, "name"));
            const char *id = json_string_value(json_object_get(c, "containerID"));
            const char *sep = id ? strstr(id, "://") : NULL;

            if (p->ncont == GD_POD_MAX_CONTAINERS || !name || !sep || strlen(name) >= 64 ||
                strlen(sep + 3) == 0 || strlen(sep + 3) >= 65 ||
                strspn(sep + 3, "0123456789abcdef") != strlen(sep + 3) ||
                strspn(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(name))
                continue;
            snprintf(p->cont[p->ncont].name, sizeof(p->cont[0].name), "%s", name);
            snprintf(p->cont[p->ncont].id, sizeof(p->cont[0].id), "%s", sep + 3);
            p->ncont++;
        }
}

/*
 * The claims a pod names (n of them, or -1 with cerr: refused), kept with it; under kube.mu.
 * A GPU pod with claims is read again (GD_NV_WAIT) when it is new or changed, or names other
 * claims; a relist that brings it unchanged keeps what was read. 1 when the reader has work.
 */
static int claims_put(struct pod *p, int changed, char claims[][GD_CLAIM_NAME_LEN], int n,
                      int pending, const char *cerr)
{
    int same = n == p->p.nclaims, k;

    for (k = 0; same && k < n; k++)
        same = strcmp(claims[k], p->p.claims[k]) == 0;
    if (n < 0) {
        p->p.nclaims = 0;
        p->p.nv_had = 0;
        p->p.nv = GD_NV_REFUSED;
        snprintf(p->p.nv_err, sizeof(p->p.nv_err), "%s", cerr);
        return 0;
    }
    if (!same)
        p->p.nv_had = 0; /* other claims: nothing read of them yet */
    p->p.nclaims = n;
    memcpy(p->p.claims, claims, (size_t)n * sizeof(claims[0]));
    p->p.nv_pending = pending;
    if (n == 0 && pending == 0) {
        p->p.nv = GD_NV_NONE;
        p->p.nv_mem.n = 0;
        p->p.nv_err[0] = '\0';
        return 0;
    }
    if (!changed && same && p->p.nv != GD_NV_NONE)
        return 0;
    p->p.nv = GD_NV_WAIT;
    return p->p.gpu && pending == 0;
}

/*
 * A pod added or changed (gen: the list that read it, 0 from a watch). Its Warning Event,
 * when its limits newly cannot be read, is posted after the lock.
 */
static void pod_put(const json_t *obj, uint64_t gen)
{
    const json_t *md = json_object_get(obj, "metadata");
    const char *uid = field(md, "uid", 64), *ns = field(md, "namespace", 256),
               *name = field(md, "name", 256), *rv = field(md, "resourceVersion", GD_WATCH_RV_MAX);
    const char *node = json_string_value(json_object_get(json_object_get(obj, "spec"), "nodeName"));
    struct gd_pod_spec spec;
    char err[512], evmsg[512] = "", cerr[512] = "";
    char claims[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN];
    struct pod *p;
    int i, ok, nclaims, pending, kick = 0;

    if (!uid || !ns || !name || !rv) {
        gd_log("kubernetes: a pod without a usable uid, namespace, name or resourceVersion is "
               "ignored");
        return;
    }
    err[0] = '\0';
    /* A class above normal only where the node's admin allows it (never the pod's own say). */
    ok = gd_pod_spec(obj, &spec, err, sizeof(err)) == 0 &&
         gd_pod_class_allowed(&spec, ns, gd_opt.pod_latency_namespaces, err, sizeof(err)) == 0;
    nclaims = gd_nv_pod_claims(obj, claims, GD_POD_MAX_CLAIMS, &pending, cerr, sizeof(cerr));
    if (nclaims < 0 && ok) {
        ok = 0; /* refused as a bad annotation is, with its Event */
        memcpy(err, cerr, sizeof(err));
    }
    pthread_mutex_lock(&kube.mu);
    i = find(uid);
    if (!node || strcmp(node, kube.node) != 0) {
        if (i >= 0)
            drop(i); /* no longer ours (the selector should not send it) */
        pthread_mutex_unlock(&kube.mu);
        return;
    }
    if (i < 0) {
        if (kube.npods == GD_MAX_PODS || !(p = calloc(1, sizeof(*p)))) {
            pthread_mutex_unlock(&kube.mu);
            gd_log("kubernetes: pod %s/%s not followed: %d pods already", ns, name, GD_MAX_PODS);
            return;
        }
        kube.pods[kube.npods++] = p;
        snprintf(p->p.uid, sizeof(p->p.uid), "%s", uid);
        snprintf(p->p.ns, sizeof(p->p.ns), "%s", ns);
        snprintf(p->p.name, sizeof(p->p.name), "%s", name);
    } else {
        p = kube.pods[i];
    }
    if (!ok && (i < 0 || p->p.ok || strcmp(p->p.err, err) != 0)) {
        snprintf(evmsg, sizeof(evmsg), "%s", err);
        kube.refused++;
    }
    p->p.gpu = gd_pod_wants_gpus(obj);
    kick = claims_put(p, i < 0 || strcmp(p->rv, rv) != 0, claims, nclaims, pending, cerr);
    snprintf(p->rv, sizeof(p->rv), "%s", rv);
    if (gen)
        p->gen = gen;
    p->p.ok = ok;
    p->p.spec = ok ? spec : (struct gd_pod_spec){ .priority = GPUSLICE_PRIORITY_UNSET };
    snprintf(p->p.err, sizeof(p->p.err), "%s", ok ? "" : err);
    containers(obj, &p->p);
    {
        const char *phase =
            json_string_value(json_object_get(json_object_get(obj, "status"), "phase"));

        p->p.ended = phase && (strcmp(phase, "Succeeded") == 0 || strcmp(phase, "Failed") == 0);
    }
    pthread_mutex_unlock(&kube.mu);
    if (evmsg[0]) {
        gd_log("kubernetes: pod %s/%s: %s", ns, name, evmsg);
        post_event(ns, name, uid, evmsg);
    }
    if (kick)
        gd_nv_kick(); /* read off this thread: a slow claim never holds the watch up */
}

static void pod_delete(const json_t *obj)
{
    const char *uid = field(json_object_get(obj, "metadata"), "uid", 64);
    int i;

    pthread_mutex_lock(&kube.mu);
    if (uid && (i = find(uid)) >= 0)
        drop(i);
    pthread_mutex_unlock(&kube.mu);
}

int gd_kube_nv_jobs(struct gd_nv_job *jobs, int max, int retry)
{
    int i, n = 0;

    pthread_mutex_lock(&kube.mu);
    for (i = 0; i < kube.npods && n < max; i++) {
        const struct pod *p = kube.pods[i];

        if (!p->p.gpu || p->p.ended || p->p.nclaims == 0 || p->p.nv_pending ||
            !(p->p.nv == GD_NV_WAIT || (retry && p->p.nv == GD_NV_REFUSED)))
            continue;
        snprintf(jobs[n].uid, sizeof(jobs[n].uid), "%s", p->p.uid);
        snprintf(jobs[n].ns, sizeof(jobs[n].ns), "%s", p->p.ns);
        snprintf(jobs[n].rv, sizeof(jobs[n].rv), "%s", p->rv);
        jobs[n].nclaims = p->p.nclaims;
        memcpy(jobs[n].claims, p->p.claims, sizeof(jobs[n].claims));
        n++;
    }
    pthread_mutex_unlock(&kube.mu);
    return n;
}

void gd_kube_nv_done(const struct gd_nv_job *j, int state, int unread, const struct gs_limits *mem,
                     const char *err)
{
    char ns[256] = "", name[256] = "", evmsg[512] = "";
    int refused = state == GD_NV_REFUSED;
    struct pod *p;
    int i;

    pthread_mutex_lock(&kube.mu);
    if ((i = find(j->uid)) < 0 || strcmp(kube.pods[i]->rv, j->rv) != 0) {
        pthread_mutex_unlock(&kube.mu); /* gone, or changed: read again by a later job */
        return;
    }
    p = kube.pods[i];
    if (refused && unread && p->p.nv_had) {
        /*
         * Read again after the pod changed, and the API server did not answer: an allocation
         * does not change while its claim is reserved for the pod, so what the same claims
         * gave still holds (a refusal would fail the pod's new processes for a blip).
         */
        p->p.nv = GD_NV_OK;
        snprintf(name, sizeof(name), "%s", p->p.name);
        pthread_mutex_unlock(&kube.mu);
        gd_log("kubernetes: pod %s/%s: its claims' limits kept as last read: %s", j->ns, name, err);
        return;
    }
    if (refused && (p->p.nv != GD_NV_REFUSED || strcmp(p->p.nv_err, err) != 0)) {
        snprintf(evmsg, sizeof(evmsg), "%s", err);
        snprintf(ns, sizeof(ns), "%s", p->p.ns);
        snprintf(name, sizeof(name), "%s", p->p.name);
        kube.refused++;
    }
    p->p.nv = refused ? GD_NV_REFUSED : GD_NV_OK;
    p->p.nv_had = !refused;
    if (refused)
        memset(&p->p.nv_mem, 0, sizeof(p->p.nv_mem));
    else
        p->p.nv_mem = *mem;
    snprintf(p->p.nv_err, sizeof(p->p.nv_err), "%s", refused ? err : "");
    pthread_mutex_unlock(&kube.mu);
    if (evmsg[0]) {
        gd_log("kubernetes: pod %s/%s: %s", ns, name, evmsg);
        post_event(ns, name, j->uid, evmsg);
    }
}

static void set_rv(const char *rv)
{
    pthread_mutex_lock(&kube.mu);
    snprintf(kube.rv, sizeof(kube.rv), "%s", rv);
    pthread_mutex_unlock(&kube.mu);
}

/* The node's field selector, escaped for a query. */
static void selector(char *out, size_t len)
{
    char *e = curl_easy_escape(NULL, kube.node, 0);

    snprintf(out, len, "fieldSelector=spec.nodeName%%3D%s", e ? e : "");
    curl_free(e);
}

/* Lists the node's pods, page by page; what a list no longer has is gone. 0 or -1 (err). */
static int list_pods(char *err, size_t errlen)
{
    char path[8192], sel[1024], cont[4096] = "", rv[GD_WATCH_RV_MAX] = "";
    uint64_t gen;
    int i, pages = 0;

    selector(sel, sizeof(sel));
    pthread_mutex_lock(&kube.mu);
    gen = ++kube.gen;
    kube.lists++;
    pthread_mutex_unlock(&kube.mu);
    do {
        struct xfer x = { .max = LIST_MAX_BODY };
        json_t *doc, *items, *it;
        const char *c, *r;
        size_t k;
        long code;

        if (cont[0]) {
            char *e = curl_easy_escape(NULL, cont, 0);

            snprintf(path, sizeof(path), "/api/v1/pods?%s&limit=%d&continue=%s", sel, LIST_PAGE,
                     e ? e : "");
            curl_free(e);
        } else {
            snprintf(path, sizeof(path), "/api/v1/pods?%s&limit=%d", sel, LIST_PAGE);
        }
        code = request(path, NULL, &x, 60, err, errlen);
        if (code != 200) {
            if (code == 410 && cont[0] && pages < 1000) {
                cont[0] = '\0'; /* the pages' version expired: from the start */
                free(x.body);
                continue;
            }
            if (code > 0)
                status_message(&x, code, err, errlen);
            free(x.body);
            return -1;
        }
        doc = x.body ? json_loads(x.body, 0, NULL) : NULL;
        free(x.body);
        items = json_object_get(doc, "items");
        r = json_string_value(json_object_get(json_object_get(doc, "metadata"), "resourceVersion"));
        c = json_string_value(json_object_get(json_object_get(doc, "metadata"), "continue"));
        if (!json_is_array(items) || !r || !*r || strlen(r) >= sizeof(rv) ||
            (c && strlen(c) >= sizeof(cont))) {
            json_decref(doc);
            snprintf(err, errlen, "the API server's pod list is not a PodList");
            return -1;
        }
        json_array_foreach(items, k, it) pod_put(it, gen);
        snprintf(rv, sizeof(rv), "%s", r);
        snprintf(cont, sizeof(cont), "%s", c ? c : "");
        json_decref(doc);
        pages++;
    } while (cont[0] && !kube.stop);
    pthread_mutex_lock(&kube.mu);
    for (i = kube.npods - 1; i >= 0; i--)
        if (kube.pods[i]->gen != gen)
            drop(i); /* deleted while nobody watched */
    snprintf(kube.rv, sizeof(kube.rv), "%s", rv);
    kube.synced = 1;
    pthread_mutex_unlock(&kube.mu);
    gd_pods_reconcile();
    return 0;
}

static int on_event(const struct gd_watch_event *ev, void *arg)
{
    (void)arg;
    switch (ev->type) {
    case GD_WATCH_ADDED:
    case GD_WATCH_MODIFIED:
        pod_put(ev->object, 0);
        gd_pods_reconcile();
        break;
    case GD_WATCH_DELETED:
        pod_delete(ev->object);
        gd_pods_reconcile();
        break;
    case GD_WATCH_BOOKMARK:
        break;
    case GD_WATCH_ERROR:
        if (ev->code == 410) {
            kube.expired = 1;
            return -ECANCELED;
        }
        return -EPROTO;
    }
    if (ev->rv[0])
        set_rv(ev->rv);
    return 0;
}

/* One watch from the last version: 0 it ended (watch again), 1 expired (list again), -1 err. */
static int watch_pods(char *err, size_t errlen)
{
    char path[8192], sel[1024], rv[GD_WATCH_RV_MAX], *e;
    struct gd_watch w;
    struct xfer x = { .max = 1 << 20 };
    long code;
    int r;

    selector(sel, sizeof(sel));
    pthread_mutex_lock(&kube.mu);
    snprintf(rv, sizeof(rv), "%s", kube.rv);
    kube.watches++;
    pthread_mutex_unlock(&kube.mu);
    e = curl_easy_escape(NULL, rv, 0);
    snprintf(path, sizeof(path),
             "/api/v1/pods?%s&watch=true&allowWatchBookmarks=true&timeoutSeconds=%d"
             "&resourceVersion=%s",
             sel, WATCH_SECONDS, e ? e : "");
    curl_free(e);
    gd_watch_init(&w, WATCH_MAX_LINE, on_event, NULL);
    x.w = &w;
    kube.expired = 0;
    code = request(path, NULL, &x, WATCH_SECONDS + 30, err, errlen);
    r = kube.expired ? 1 : code == 200 && gd_watch_end(&w) == 0 ? 0 : -1;
    if (r < 0 && code == 200)
        snprintf(err, errlen, "%s", w.err[0] ? w.err : "the watch ended early");
    else if (code == 410)
        r = 1;
    else if (code > 0 && code != 200)
        status_message(&x, code, err, errlen);
    gd_watch_free(&w);
    free(x.body);
    return r;
}

/* Sleeps ms, or less once the daemon stops. */
static void pause_ms(long ms)
{
    while (ms > 0 && !kube.stop) {
        struct timespec ts = { 0, (ms > 100 ? 100 : ms) * 1000000L };

        nanosleep(&ts, NULL);
        ms -= 100;
    }
}

static void *kube_main(void *arg)
{
    char err[512];
    long backoff = BACKOFF_MIN_MS;
    int listed = 0;

    (void)arg;
    while (!kube.stop) {
        if (!listed) {
            set_state("listing the pods of node %s", kube.node);
            if (list_pods(err, sizeof(err)) < 0) {
                set_state("listing failed (%s); again in %ld ms", err, backoff);
                gd_log("kubernetes: listing pods failed: %s; again in %ld ms", err, backoff);
                pause_ms(backoff);
                backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
                continue;
            }
            listed = 1;
            backoff = BACKOFF_MIN_MS;
        }
        set_state("watching the pods of node %s", kube.node);
        switch (watch_pods(err, sizeof(err))) {
        case 0:
            backoff = BACKOFF_MIN_MS;
            break;
        case 1:
            pthread_mutex_lock(&kube.mu);
            kube.relists++;
            pthread_mutex_unlock(&kube.mu);
            listed = 0; /* the version expired: list again */
            break;
        default:
            if (kube.stop)
                break;
            set_state("the watch failed (%s); again in %ld ms", err, backoff);
            gd_log("kubernetes: the pod watch failed: %s; again in %ld ms", err, backoff);
            pause_ms(backoff);
            backoff = backoff * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : backoff * 2;
        }
    }
    return NULL;
}

int gd_kube_client_start(char *err, size_t errlen)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");

    if (kube.client)
        return 1;
    if (strcmp(gd_opt.kube_api, "off") == 0 || (!gd_opt.kube_api[0] && !host))
        return 0;
    if (gd_opt.kube_api[0]) {
        if (strncmp(gd_opt.kube_api, "https://", 8) != 0 || strlen(gd_opt.kube_api) < 9 ||
            strpbrk(gd_opt.kube_api, " \t\r\n?#")) {
            snprintf(err, errlen,
                     "kube-api: \"%s\" is not an https:// URL of the API server (or off)",
                     gd_opt.kube_api);
            return -1;
        }
        snprintf(kube.api, sizeof(kube.api), "%s", gd_opt.kube_api);
        while (kube.api[strlen(kube.api) - 1] == '/')
            kube.api[strlen(kube.api) - 1] = '\0';
    } else {
        /* In a cluster: the service's address, an IPv6 one in brackets. */
        snprintf(kube.api, sizeof(kube.api),
                 strchr(host, ':') ? "https://[%s]:%s" : "https://%s:%s", host,
                 port && *port ? port : "443");
    }
    snprintf(kube.token_file, sizeof(kube.token_file), "%s",
             gd_opt.kube_token_file[0] ? gd_opt.kube_token_file : IN_CLUSTER_DIR "/token");
    snprintf(kube.ca_file, sizeof(kube.ca_file), "%s",
             gd_opt.kube_ca_file[0] ? gd_opt.kube_ca_file : IN_CLUSTER_DIR "/ca.crt");
    if (access(kube.ca_file, R_OK) != 0) {
        snprintf(err, errlen, "kubernetes: cannot read the API server's CA %s: %s", kube.ca_file,
                 strerror(errno));
        return -1;
    }
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(err, errlen, "kubernetes: libcurl could not start");
        return -1;
    }
    kube.client = 1;
    return 1;
}

int gd_kube_start(char *err, size_t errlen)
{
    const char *node = gd_opt.node_name[0] ? gd_opt.node_name : getenv("NODE_NAME");
    int r;

    /* The node's name is checked first: a daemon that cannot follow pods starts no client. */
    if (strcmp(gd_opt.kube_api, "off") == 0 ||
        (!gd_opt.kube_api[0] && !getenv("KUBERNETES_SERVICE_HOST")))
        return 0;
    if (!node || !*node || strlen(node) >= sizeof(kube.node) || strchr(node, '/')) {
        snprintf(err, errlen,
                 "kubernetes: the node's name is needed (node-name, or NODE_NAME from the pod's "
                 "spec.nodeName as the DaemonSet sets it)");
        return -1;
    }
    if ((r = gd_kube_client_start(err, errlen)) <= 0)
        return r;
    snprintf(kube.node, sizeof(kube.node), "%s", node);
    kube.stop = 0;
    if (pthread_create(&kube.th, NULL, kube_main, NULL) != 0) {
        snprintf(err, errlen, "kubernetes: cannot start the pod watch: %s", strerror(errno));
        return -1;
    }
    kube.running = 1;
    gd_log("kubernetes: following the pods of node %s at %s", kube.node, kube.api);
    return 0;
}

void gd_kube_stop(void)
{
    int i;

    if (kube.running) {
        kube.stop = 1;
        gd_nv_stop();
        pthread_join(kube.th, NULL);
        kube.running = 0;
        pthread_mutex_lock(&kube.mu);
        for (i = kube.npods - 1; i >= 0; i--)
            drop(i);
        pthread_mutex_unlock(&kube.mu);
    }
    if (kube.client) {
        kube.client = 0;
        curl_global_cleanup();
    }
}

static json_t *limits_json(const struct gs_limits *l, int sms)
{
    json_t *a = json_array();
    int i;

    for (i = 0; i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        json_t *o = json_object();

        if (e->key == GS_KEY_ALL)
            json_object_set_new(o, "device", json_string("all"));
        else if (e->key == GS_KEY_INDEX)
            json_object_set_new(o, "device", json_integer(e->index));
        else
            json_object_set_new(o, "device", json_string(e->uuid));
        if (sms && (e->value & GS_SMS_SHARE))
            json_object_set_new(o, "percent", json_integer(GS_SMS_COUNT(e->value)));
        else if (sms)
            json_object_set_new(o, "sms", json_integer(GS_SMS_COUNT(e->value))),
                json_object_set_new(o, "first", json_integer(GS_SMS_FIRST(e->value)));
        else
            json_object_set_new(o, "value", json_integer((json_int_t)e->value));
        json_array_append_new(a, o);
    }
    return a;
}

json_t *gd_kube_pods_json(void)
{
    json_t *pods = json_array(), *out;
    int i;

    pthread_mutex_lock(&kube.mu);
    for (i = 0; i < kube.npods; i++) {
        const struct gd_kube_pod *p = &kube.pods[i]->p;
        const char *prio =
            p->spec.priority == GPUSLICE_PRIORITY_UNSET ? NULL : gs_priority_name(p->spec.priority);

        json_array_append_new(
            pods,
            json_pack(
                "{s:s, s:s, s:s, s:s, s:b, s:o, s:{s:o, s:o, s:o, s:o}, s:{s:o, s:o, s:o, "
                "s:o}}",
                "namespace", p->ns, "name", p->name, "uid", p->uid, "resourceVersion",
                kube.pods[i]->rv, "ok", p->ok, "error", p->ok ? json_null() : json_string(p->err),
                "limits", "memory", limits_json(&p->spec.memory, 0), "compute",
                limits_json(&p->spec.compute, 0), "sms", limits_json(&p->spec.sms, 1), "priority",
                prio ? json_string(prio) : json_null(), "from", "memory",
                p->spec.memory.n ? json_string(p->spec.memory.source) : json_null(), "compute",
                p->spec.compute.n ? json_string(p->spec.compute.source) : json_null(), "sms",
                p->spec.sms.n ? json_string(p->spec.sms.source) : json_null(), "priority",
                p->spec.priority_from ? json_string(p->spec.priority_from) : json_null()));
    }
    out = json_pack("{s:b, s:s, s:s, s:b, s:s, s:s, s:{s:I, s:I, s:I, s:I, s:I}, s:o}", "enabled",
                    kube.running, "node", kube.node, "api", kube.api, "synced", kube.synced,
                    "resourceVersion", kube.rv, "state", kube.state, "counts", "lists",
                    (json_int_t)kube.lists, "watches", (json_int_t)kube.watches, "relists",
                    (json_int_t)kube.relists, "events", (json_int_t)kube.events, "refused",
                    (json_int_t)kube.refused, "pods", pods);
    pthread_mutex_unlock(&kube.mu);
    return out;
}

struct gd_kube_pod *gd_kube_snapshot(int *n, int *synced)
{
    struct gd_kube_pod *v = NULL;
    int i;

    pthread_mutex_lock(&kube.mu);
    *n = 0;
    *synced = kube.synced;
    if (kube.npods > 0 && (v = malloc((size_t)kube.npods * sizeof(*v))) != NULL) {
        for (i = 0; i < kube.npods; i++)
            v[i] = kube.pods[i]->p;
        *n = kube.npods;
    } else if (kube.npods > 0) {
        *n = -1; /* not "no pods": that would end every pod's tenant */
    }
    pthread_mutex_unlock(&kube.mu);
    return v;
}
