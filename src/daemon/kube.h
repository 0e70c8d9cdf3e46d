/*
 * The pods of this node from the Kubernetes API server (kube.c).
 */
#ifndef GPUSLICE_DAEMON_KUBE_H
#define GPUSLICE_DAEMON_KUBE_H

#include <jansson.h>
#include <stddef.h>

#include "daemon/kubewatch.h"
#include "daemon/nvclaim.h"
#include "daemon/podspec.h"

#define GD_MAX_PODS 1024 /* pods followed at once (a kubelet's default is 110) */

/*
 * Starts following the node's pods when kube-api is an https:// URL, or when it is empty and
 * the daemon runs in a cluster (KUBERNETES_SERVICE_HOST); "off" never. 0 (also when off), or
 * -1 with a message for a configuration that cannot work.
 */
int gd_kube_start(char *err, size_t errlen);
/*
 * The client alone (gd_kube_call), with no node and no pod watch (the webhook's): the API
 * server's URL, CA and token as gd_kube_start takes them. 1 started (or already), 0 off (no
 * kube-api and not in a cluster), or -1 with a message.
 */
int gd_kube_client_start(char *err, size_t errlen);
void gd_kube_stop(void);
int gd_kube_enabled(void);

#define GD_POD_MAX_CONTAINERS 16 /* containers named in a pod's status that are kept */

/* A pod as the daemon follows it. */
struct gd_kube_pod {
    char uid[64], ns[256], name[256];
    int gpu;   /* a GPU pod (gd_pod_wants_gpus): the webhook's definition, and the daemon's */
    int ok;    /* its limits were read; else err says why */
    int ended; /* status.phase Succeeded or Failed: its containers have all stopped */
    struct gd_pod_spec spec;
    char err[512];
    int ncont; /* its containers' IDs from its status (containerd://ID and the like) */
    struct {
        char name[64], id[65];
    } cont[GD_POD_MAX_CONTAINERS];
    /* Its claims (nvclaim.h), whose results of gpu.nvidia.com add memory limits by GPU UUID. */
    int nclaims;
    char claims[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN];
    int nv_pending;          /* claims of its templates that its status does not name yet */
    int nv;                  /* GD_NV_*: where reading them stands */
    struct gs_limits nv_mem; /* GD_NV_OK: the claims' memory per GPU UUID (n 0: none) */
    char nv_err[512];        /* GD_NV_REFUSED: why, naming the claim */
    int nv_had;              /* the claims named now were read once: nv_mem holds what they gave */
};

enum {
    GD_NV_NONE = 0, /* no claims */
    GD_NV_WAIT,     /* being read: no tenant is made (or changed) until they are */
    GD_NV_OK,
    GD_NV_REFUSED /* a claim could not be read or placed: the pod is refused */
};

/* A pod whose claims are to be read (gd_kube_nv_jobs), as the pod was at resourceVersion rv. */
struct gd_nv_job {
    char uid[64], ns[256], rv[GD_WATCH_RV_MAX];
    int nclaims;
    char claims[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN];
};

/*
 * Up to max pods of this node whose claims are to be read: those waiting (GD_NV_WAIT), and
 * with retry those refused for a claim too (it may be readable now). The count.
 */
int gd_kube_nv_jobs(struct gd_nv_job *jobs, int max, int retry);

/*
 * The outcome of job j (GD_NV_OK with its claims' memory limits mem, or GD_NV_REFUSED with
 * err; unread: the API server did not answer, which keeps what the same claims gave before
 * when they were read once, and refuses otherwise). Dropped when the pod changed meanwhile
 * (another job reads it again). A new refusal posts the pod's Warning Event.
 */
void gd_kube_nv_done(const struct gd_nv_job *j, int state, int unread, const struct gs_limits *mem,
                     const char *err);

/*
 * One call of the API server from any thread: method (GET, POST, PUT, DELETE) of path (from
 * "/api" or "/apis") with body (NULL: none). The HTTP status with the answer's JSON in *out (a
 * new reference; NULL when it had none or it was not JSON), err set to the API server's message
 * for a status outside 2xx; or -1 with err when no answer came (or the daemon follows no API
 * server).
 */
long gd_kube_call(const char *method, const char *path, const json_t *body, json_t **out,
                  long timeout_s, char *err, size_t errlen);

/* This node's name in the cluster (valid once gd_kube_start has succeeded). */
const char *gd_kube_node(void);

/* The pods as /v1/pods shows them (a new reference). */
json_t *gd_kube_pods_json(void);

/*
 * A copy of the pods followed now (malloc'd, *n of them; NULL with *n 0 when none), and
 * whether a whole list has been read since the daemon started (*synced): before that, a pod
 * missing from the copy may only not have been seen yet. NULL with *n -1: no memory for it.
 */
struct gd_kube_pod *gd_kube_snapshot(int *n, int *synced);

#endif
