/*
 * The reader of pods' claims of NVIDIA's DRA driver (nvclaim.h): one thread, apart from the
 * pod watch, so that a claim slow to answer holds up no pod event. The watch marks a pod
 * whose claims are to be read (kube.c, GD_NV_WAIT) and kicks; this thread reads each claim
 * (GET, 15 s at most), places each of its results of gpu.nvidia.com on a GPU by the node's
 * ResourceSlices of that driver (kept, and listed again when a device is not in them), hands
 * the pod's memory limits per GPU UUID back to the watch's record (kube.c, dropped if the pod
 * changed meanwhile) and brings the tenants up to date. A pod refused for a claim is tried
 * again every RETRY_S: the API server may have been away.
 */
#include <curl/curl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "daemon/daemon.h"
#include "daemon/kube.h"
#include "daemon/nvclaim.h"
#include "daemon/pods.h"

#define JOBS 16
#define CALL_S 15
#define RETRY_S 10

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int started, stop, kicked;
    pthread_t th;
    /* the thread's own: the node's devices of gpu.nvidia.com */
    struct gd_nv_dev dev[GD_NV_MAX_DEVICES];
    int ndev;
} nv = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* The node's ResourceSlices of gpu.nvidia.com listed again into nv.dev. 0, or -1 with err. */
static int slices_list(char *err, size_t errlen)
{
    char path[1024], e2[512];
    char *node = curl_easy_escape(NULL, gd_kube_node(), 0);
    json_t *doc = NULL;
    long code;
    int r = -1;

    snprintf(path, sizeof(path),
             "/apis/resource.k8s.io/v1/resourceslices?fieldSelector=spec.driver%%3D" GD_NV_DRIVER
             "%%2Cspec.nodeName%%3D%s",
             node ? node : "");
    curl_free(node);
    code = gd_kube_call("GET", path, NULL, &doc, CALL_S, e2, sizeof(e2));
    if (code != 200 || doc == NULL)
        gs_set_error(err, errlen, "the node's ResourceSlices of %s cannot be listed: %s",
                     GD_NV_DRIVER, code == 200 ? "the answer is not JSON" : e2);
    else
        r = gd_nv_slices_read(doc, gd_kube_node(), nv.dev, GD_NV_MAX_DEVICES, &nv.ndev, err,
                              errlen);
    json_decref(doc);
    return r;
}

static const char *uuid_of(const char *device)
{
    int i;

    for (i = 0; i < nv.ndev; i++)
        if (strcmp(nv.dev[i].name, device) == 0)
            return nv.dev[i].uuid;
    return NULL;
}

/*
 * Claim name of job j read, its results added to l. 0, or -1 with err naming the claim, or -2
 * (with err) when the API server did not answer (no answer, or 5xx): the claim is unread.
 */
static int claim_add(const struct gd_nv_job *j, const char *name, int *listed, struct gs_limits *l,
                     unsigned char *whole, char *err, size_t errlen)
{
    static struct gd_nv_claim c; /* the thread's only */
    char path[1024], e2[512];
    json_t *doc = NULL;
    long code;
    int k, r;

    snprintf(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s", j->ns,
             name);
    code = gd_kube_call("GET", path, NULL, &doc, CALL_S, e2, sizeof(e2));
    if (code != 200 || doc == NULL) {
        gs_set_error(err, errlen, "claim %.64s/%.64s cannot be read: %s", j->ns, name,
                     code == 200 ? "the answer is not JSON" : e2);
        json_decref(doc);
        return code < 0 || code >= 500 ? -2 : -1; /* no answer: unread */
    }
    r = gd_nv_claim_read(doc, j->ns, name, gd_kube_node(), j->uid, &c, err, errlen);
    json_decref(doc);
    if (r < 0)
        return -1;
    for (k = 0; k < c.n; k++) {
        const char *uuid = uuid_of(c.r[k].device);

        if (uuid == NULL && !*listed) {
            *listed = 1; /* a device not seen yet: the slices once more */
            if (slices_list(e2, sizeof(e2)) < 0) {
                gs_set_error(err, errlen, "claim %.64s/%.64s: %s", j->ns, name, e2);
                return -2;
            }
            uuid = uuid_of(c.r[k].device);
        }
        if (uuid == NULL) {
            gs_set_error(err, errlen,
                         "claim %.64s/%.64s: device %.64s of %s is in no ResourceSlice of node "
                         "%.253s (or has no uuid attribute)",
                         j->ns, name, c.r[k].device, GD_NV_DRIVER, gd_kube_node());
            return -1;
        }
        if (gd_nv_limits_add(l, whole, uuid, c.r[k].mem, e2, sizeof(e2)) < 0) {
            gs_set_error(err, errlen, "claim %.64s/%.64s: %s", j->ns, name, e2);
            return -1;
        }
    }
    return 0;
}

static void resolve(const struct gd_nv_job *j)
{
    struct gs_limits l;
    unsigned char whole[GS_MAX_LIMIT_ENTRIES];
    char err[512];
    int k, r, listed = 0;

    memset(&l, 0, sizeof(l));
    memset(whole, 0, sizeof(whole));
    for (k = 0; k < j->nclaims; k++)
        if ((r = claim_add(j, j->claims[k], &listed, &l, whole, err, sizeof(err))) < 0) {
            gd_kube_nv_done(j, GD_NV_REFUSED, r == -2, NULL, err);
            return;
        }
    gd_nv_limits_done(&l, whole);
    gd_kube_nv_done(j, GD_NV_OK, 0, &l, "");
}

static void *nv_main(void *arg)
{
    static struct gd_nv_job jobs[JOBS];
    time_t last_retry = time(NULL);
    int n, k, retry;

    (void)arg;
    pthread_mutex_lock(&nv.mu);
    while (!nv.stop) {
        if (!nv.kicked) {
            struct timespec ts;

            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_sec += 1;
            pthread_cond_timedwait(&nv.cv, &nv.mu, &ts);
            if (nv.stop)
                break;
        }
        retry = time(NULL) - last_retry >= RETRY_S;
        if (!nv.kicked && !retry)
            continue;
        nv.kicked = 0;
        pthread_mutex_unlock(&nv.mu);
        if (retry)
            last_retry = time(NULL);
        n = gd_kube_nv_jobs(jobs, JOBS, retry);
        for (k = 0; k < n && !__atomic_load_n(&nv.stop, __ATOMIC_ACQUIRE); k++)
            resolve(&jobs[k]);
        if (n > 0)
            gd_pods_reconcile();
        pthread_mutex_lock(&nv.mu);
        if (n == JOBS)
            nv.kicked = 1; /* more may wait */
    }
    pthread_mutex_unlock(&nv.mu);
    return NULL;
}

void gd_nv_kick(void)
{
    pthread_mutex_lock(&nv.mu);
    if (!nv.started && !nv.stop) {
        if (pthread_create(&nv.th, NULL, nv_main, NULL) != 0) {
            pthread_mutex_unlock(&nv.mu);
            gd_log("kubernetes: cannot start the reader of pods' claims; tried again at the "
                   "next pod event");
            return;
        }
        nv.started = 1;
    }
    nv.kicked = 1;
    pthread_cond_signal(&nv.cv);
    pthread_mutex_unlock(&nv.mu);
}

void gd_nv_stop(void)
{
    int started;

    pthread_mutex_lock(&nv.mu);
    __atomic_store_n(&nv.stop, 1, __ATOMIC_RELEASE);
    started = nv.started;
    pthread_cond_signal(&nv.cv);
    pthread_mutex_unlock(&nv.mu);
    if (started)
        pthread_join(nv.th, NULL);
    pthread_mutex_lock(&nv.mu);
    nv.started = 0;
    nv.stop = 0;
    pthread_mutex_unlock(&nv.mu);
}
