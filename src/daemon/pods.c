/*
 * Kubernetes pods as tenants. Each pod the daemon follows (kube.c) is one
 * managed tenant, "pod-<uid>", whose limits are exactly what the pod's object
 * says (podspec.c) and what its claims of NVIDIA's DRA driver consumed
 * (nvclaim.c; the smaller per GPU), flagged GPUSLICE_NODE_POD, and
 * GPUSLICE_NODE_REFUSED when the object's values are bad or a claim cannot be
 * read or placed (its processes' CUDA calls then fail). A pod
 * that is deleted ends its tenant; one that comes back under its name has a
 * new uid, so a new tenant.
 *
 * A pod's processes join its tenant through GPUSLICE_NODE_POD_SOCKET in the
 * run directory (mode 0666: a pod's containers run as any user). The
 * process connects and sends nothing; the kernel names it (SO_PEERCRED, its
 * PID in the daemon's namespace, the host's under hostPID), the daemon reads
 * its cgroup (cgroup.c), and the pod and container that names is the only
 * thing that decides its tenant: never its environment. The answer is one
 * line: "ok ID", "wait WHY" (a pod's cgroup, but a pod not known yet: ask
 * again), "refused WHY", "none WHY" (not a pod's process, or a daemon that
 * does not follow pods) or "error WHY". With "ok" comes the tenant's state file,
 * open for writing (SCM_RIGHTS): the pod mounts no tenant's file writable.
 *
 * The kernel's PID of the peer is the one it connected with; a process that
 * connects and exits leaves its PID to be taken by another (another pod's),
 * whose /proc would then be read. So the peer is held by a pidfd from the
 * kernel (SO_PEERPIDFD) and everything read of /proc/PID counts only if that
 * process still lives after the reads (usock.c). Its cgroup is placed from
 * the hierarchies' roots even where the daemon has a cgroup namespace of its
 * own (cgroup.c, gd_pods_cgroup).
 *
 * Pods mount RUN_DIR/pod only (the webhook's patch), never the run directory:
 * it holds hard links of the node segment and of the pods' and boards'
 * sockets, and an empty tenants/ for the run directory's tenants/ to be
 * mounted on read-only (other tenants' class stamps). The API's socket is not
 * there: a pod is never an admin (and http.c's peer_of says so of any process
 * in a pod's cgroup that reaches it all the same).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/board.h"
#include "common/error.h"
#include "common/node.h"
#include "common/proc.h"
#include "control/tenants.h"
#include "daemon/cgroup.h"
#include "daemon/daemon.h"
#include "daemon/dra.h"
#include "daemon/guard/guard.h"
#include "daemon/kube.h"
#include "daemon/nvclaim.h"
#include "daemon/pods.h"
#include "daemon/podspec.h"
#include "daemon/usock.h"
#include "daemon/webhook.h"

#define MAX_JOINED 64 /* processes of a pod remembered with their container, for labels */

/* What the daemon keeps of a pod beside its tenant; under gd.mu. */
struct podrec {
    char uid[GD_POD_UID_LEN], ns[256], name[256];
    uint32_t node_id; /* its tenant */
    int refused;
    char err[512];
    struct gd_pod_spec spec;
    int ncont;
    struct {
        char name[64], id[65];
    } cont[GD_POD_MAX_CONTAINERS];
    int nclaims; /* the claims it names (a claim of the DRA driver shared with other pods) */
    char claims[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN];
    int njoined;
    struct {
        pid_t pid; /* the daemon's namespace */
        char cid[GD_CONTAINER_ID_LEN];
    } joined[MAX_JOINED];
};

static struct podrec *recs[GD_MAX_PODS];
static int nrec;
static int synced_once; /* a whole list has been read: a pod missing from it is gone */
static unsigned long joins, waits, refusals, unplaced;

static struct gd_usock sock = { .fd = -1, .stop = { -1, -1 } };

static struct podrec *rec_find(const char *uid)
{
    int i;

    for (i = 0; i < nrec; i++)
        if (strcmp(recs[i]->uid, uid) == 0)
            return recs[i];
    return NULL;
}

static void rec_drop(int i)
{
    free(recs[i]);
    recs[i] = recs[--nrec];
}

/* A pod's UID as the API gives it: a UUID in lower case (else it cannot be a tenant). */
static int uuid_like(const char *s)
{
    int i;

    if (strlen(s) != 36)
        return 0;
    for (i = 0; i < 36; i++) {
        char c = s[i];

        if (i == 8 || i == 13 || i == 18 || i == 23
                ? c != '-'
                : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    return 1;
}

/* The pod's tenant made or brought to what its object says; under gd.mu. */
static void put(const struct gd_kube_pod *k)
{
    struct gd_limits_req l;
    struct gd_tenant *t;
    struct podrec *r = rec_find(k->uid);
    struct gd_pod_spec spec = k->spec;
    char name[64], err[512];
    int refused = !k->ok || k->nv == GD_NV_REFUSED;

    /*
     * Claims still being read (nvclaim.c): no tenant yet (its processes wait), or the one it
     * has keeps its limits until they are. Never a tenant without the claims' limits.
     */
    if (!refused && k->nv == GD_NV_WAIT)
        return;
    snprintf(err, sizeof(err), "%s", !k->ok ? k->err : refused ? k->nv_err : "");
    /* The claims' memory per GPU beside the annotations': the smaller wins (nvclaim.h). */
    if (!refused && gd_nv_merge(&k->spec.memory, &k->nv_mem, &spec.memory, err, sizeof(err)) < 0)
        refused = 1;
    snprintf(name, sizeof(name), "pod-%.36s", k->uid);
    memset(&l, 0, sizeof(l));
    if (!refused) {
        l.has_mem = spec.memory.n > 0;
        l.mem = spec.memory;
        l.has_comp = spec.compute.n > 0;
        l.comp = spec.compute;
        l.priority = spec.priority == GPUSLICE_PRIORITY_UNSET ? 0 : spec.priority;
    }
    l.pod_flags = GPUSLICE_NODE_POD | (refused ? GPUSLICE_NODE_REFUSED : 0);
    if (gd_tenant_put_pod(name, &l, &t, err, sizeof(err)) < 0) {
        char why[512];

        /* Limits the node cannot hold (an index beyond its table): refused, never unlimited. */
        snprintf(why, sizeof(why), "%s", err);
        memset(&l, 0, sizeof(l));
        l.pod_flags = GPUSLICE_NODE_POD | GPUSLICE_NODE_REFUSED;
        refused = 1;
        if (gd_tenant_put_pod(name, &l, &t, err, sizeof(err)) < 0) {
            /* No room (the node's table is full): said once, and to its processes. */
            if (r == NULL || r->node_id != 0)
                gd_log("kubernetes: pod %s/%s has no tenant: %s", k->ns, k->name, err);
            t = NULL;
        } else {
            snprintf(err, sizeof(err), "%s", why);
        }
    }
    if (r == NULL) {
        if (nrec == GD_MAX_PODS || (r = calloc(1, sizeof(*r))) == NULL)
            return;
        recs[nrec++] = r;
        snprintf(r->uid, sizeof(r->uid), "%.36s", k->uid);
    }
    snprintf(r->ns, sizeof(r->ns), "%s", k->ns);
    snprintf(r->name, sizeof(r->name), "%s", k->name);
    r->node_id = t ? t->node_id : 0; /* 0: none (err says why) */
    r->refused = refused;
    snprintf(r->err, sizeof(r->err), "%s", refused || t == NULL ? err : "");
    r->spec = spec;
    r->ncont = k->ncont;
    memcpy(r->cont, k->cont, sizeof(r->cont));
    r->nclaims = k->nclaims;
    memcpy(r->claims, k->claims, sizeof(r->claims));
}

/*
 * Whether a pod is one for a tenant: a GPU pod (gd_pod_wants_gpus, the webhook's definition
 * too: a pod it injects is one the daemon joins), whose containers have not all stopped for
 * good. Other pods cannot use a GPU the device plugin did not give them, and would fill the
 * node's table of tenants.
 */
static int wants_gpus(const struct gd_kube_pod *k)
{
    return !k->ended && k->gpu;
}

/* Whether managed tenant t is the tenant of a pod the snapshot v (n pods) keeps. */
static int in_snapshot(const struct gd_tenant *t, const struct gd_kube_pod *v, int n)
{
    int i;

    for (i = 0; i < n; i++)
        if (strncmp(t->policy.name, "pod-", 4) == 0 && strcmp(t->policy.name + 4, v[i].uid) == 0 &&
            wants_gpus(&v[i]))
            return 1;
    return 0;
}

void gd_pods_reconcile(void)
{
    struct gd_kube_pod *v;
    int n, synced, i;

    v = gd_kube_snapshot(&n, &synced);
    if (n < 0) {
        gd_log("kubernetes: out of memory: the pods' tenants are brought up to date later");
        return;
    }
    pthread_mutex_lock(&gd.mu);
    for (i = 0; i < n; i++)
        if (uuid_like(v[i].uid) && wants_gpus(&v[i]))
            put(&v[i]);
    /*
     * Before the first whole list (after a restart) a pod not in the copy may only not have
     * been read yet: nothing ends until then.
     */
    if (synced) {
        synced_once = 1;
        for (i = gd.ntenant - 1; i >= 0; i--) {
            struct gd_tenant *t = &gd.tenant[i];

            /* (A claim's tenant, also flagged a pod's, ends with its claim: dra.c.) */
            if (t->managed && (t->policy.flags & GPUSLICE_NODE_POD) &&
                !gd_dra_is_claim_tenant(t->policy.name) && !in_snapshot(t, v, n)) {
                gd_log("kubernetes: tenant %s (%s) ended: its pod is gone", t->id, t->policy.name);
                gd_tenant_end(t);
            }
        }
        for (i = nrec - 1; i >= 0; i--) {
            int k, have = 0;

            for (k = 0; k < n && !have; k++)
                have = strcmp(v[k].uid, recs[i]->uid) == 0 && wants_gpus(&v[k]);
            if (!have)
                rec_drop(i);
        }
    }
    pthread_mutex_unlock(&gd.mu);
    free(v);
}

void gd_pods_retry(void)
{
    int i, need = 0;

    pthread_mutex_lock(&gd.mu);
    for (i = 0; i < nrec && !need; i++)
        need = recs[i]->node_id == 0;
    pthread_mutex_unlock(&gd.mu);
    if (need)
        gd_pods_reconcile();
}

uint32_t gd_pods_tenant_of(const char *uid)
{
    const struct podrec *r = rec_find(uid);

    return r ? r->node_id : 0; /* a refused pod keeps the limits it had */
}

static const struct podrec *pod_of(const struct gd_tenant *t)
{
    int i;

    if (!t->managed || !(t->policy.flags & GPUSLICE_NODE_POD))
        return NULL;
    for (i = 0; i < nrec; i++)
        if (recs[i]->node_id == t->node_id)
            return recs[i];
    return NULL;
}

/* ---- where the daemon's cgroup namespace is rooted ---- */

#define PF_KTHREAD_FLAG 0x00200000 /* /proc/PID/stat's flags: a kernel thread */

static struct gd_cgroup_ns self_ns;
static int ns_placed;                 /* 1: self_ns holds; 0: ns_why says why not */
static char ns_why[512];              /* why pods' cgroups cannot be placed */
static char self_pod[GD_POD_UID_LEN]; /* the daemon's own pod's UID ("" for none) */
static pthread_once_t ns_once = PTHREAD_ONCE_INIT;

/*
 * Whether /proc/2 is kthreadd, the kernel's thread maker: a kernel thread (PF_KTHREAD, which
 * no process can give itself) named so. It sits in the root cgroup of every hierarchy, so the
 * daemon (with the host's PIDs) can check where its namespace was found to be rooted.
 */
static int kthreadd(void)
{
    char buf[1024], *close_paren;
    unsigned long flags = 0;
    int f;

    if (gs_read_text("/proc/2/stat", buf, sizeof(buf)) <= 0 ||
        strncmp(buf, "2 (kthreadd) ", 13) != 0 || (close_paren = strrchr(buf, ')')) == NULL)
        return 0;
    /* ") S ppid pgrp session tty tpgid flags": flags is the 9th field, the 7th after ')'. */
    for (f = 0; f < 7 && close_paren; f++)
        close_paren = strchr(close_paren + 1, ' ');
    return close_paren && sscanf(close_paren + 1, "%lu", &flags) == 1 && (flags & PF_KTHREAD_FLAG);
}

/* (Why pods are not placed, ns_why, is said by gd_pods_start, once Kubernetes is followed.) */
static void ns_find(void)
{
    char self[16384], k[16384], cid[GD_CONTAINER_ID_LEN];
    ssize_t n, kn;
    int i, nested = -1;

    if ((n = gs_read_text("/proc/self/cgroup", self, sizeof(self))) <= 0) {
        snprintf(ns_why, sizeof(ns_why), "cannot read /proc/self/cgroup: %s", strerror(errno));
        return;
    }
    if (gd_cgroup_ns_find(gd_opt.host_cgroup_root, self, (size_t)n, getpid(), &self_ns, ns_why,
                          sizeof(ns_why)) < 0)
        return;
    /* Under the host's PIDs, kthreadd must place at every hierarchy's root, or the tree is not the host's. */
    if (kthreadd() && ((kn = gs_read_text("/proc/2/cgroup", k, sizeof(k))) <= 0 ||
                       !gd_cgroup_at_roots(&self_ns, k, (size_t)kn))) {
        snprintf(ns_why, sizeof(ns_why),
                 "kthreadd (PID 2) is not at the roots of the cgroup hierarchies found in %.300s: "
                 "that is not the host's tree",
                 gd_opt.host_cgroup_root);
        return;
    }
    ns_placed = 1;
    if (gd_cgroup_pod_in(&self_ns, self, (size_t)n, self_pod, cid) != 1)
        self_pod[0] = '\0';
    /* Said once where it is not the host's: cgroup v2's root first, else the first v1 one. */
    for (i = 0; i < self_ns.n; i++)
        if (self_ns.h[i].root[0] && (nested < 0 || self_ns.h[i].ctrl[0] == '\0'))
            nested = i;
    if (nested >= 0)
        gd_log("cgroups: the daemon has a cgroup namespace of its own, rooted at %s (%s); "
               "pods' cgroups are placed from the roots of %s",
               self_ns.h[nested].root,
               self_ns.h[nested].ctrl[0] ? self_ns.h[nested].ctrl : "cgroup v2",
               gd_opt.host_cgroup_root);
}

int gd_pods_cgroup(const char *cg, size_t len, char uid[GD_POD_UID_LEN],
                   char cid[GD_CONTAINER_ID_LEN], char *why, size_t whylen)
{
    int r;

    pthread_once(&ns_once, ns_find);
    if (!ns_placed) {
        uid[0] = cid[0] = '\0';
        snprintf(why, whylen, "%s", ns_why);
        return GD_CGROUP_UNPLACED;
    }
    if ((r = gd_cgroup_pod_in(&self_ns, cg, len, uid, cid)) == GD_CGROUP_UNPLACED)
        snprintf(why, whylen,
                 "its cgroup is in a hierarchy, or at a place, the daemon's cgroup "
                 "namespace was not found in");
    return r;
}

int gd_pods_peer_in_pod(const char *cg, size_t len)
{
    char uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN], why[512];
    int r = gd_pods_cgroup(cg, len, uid, cid, why, sizeof(why));

    if (r == 1)
        return strcmp(uid, self_pod) != 0; /* the daemon's own pod's are its admin's */
    if (r == 0)
        return 0;
    if (r == GD_CGROUP_UNPLACED && !ns_placed)
        /*
         * Where the namespace is not known: a process of the daemon's own container (never
         * climbing out of it) is not another pod's, unless it names one from the root.
         */
        return !gd_cgroup_inside(cg, len) || gd_cgroup_pod(cg, len, uid, cid) != 0;
    return 1; /* two pods, or a cgroup that cannot be placed: taken for a pod's */
}

const char *gd_pods_unplaced(void)
{
    if (!gd_kube_enabled())
        return NULL;
    pthread_once(&ns_once, ns_find);
    return ns_placed ? NULL : ns_why;
}

/* ---- joining: one answer per connection ---- */

/* A process as read from /proc while its pidfd said it was alive: the daemon's PID, and its own. */
struct who {
    pid_t pid, inner;
    uint32_t ns;
    uint64_t start;
};

/*
 * Joins process w (in container cid) to tenant t, of pod record r (NULL for a claim's tenant),
 * with the tenant's state file for the answer; under gd.mu.
 */
static void join(struct gd_tenant *t, const struct who *w, const char *cid, struct podrec *r,
                 char *out, size_t len, int *state_fd)
{
    pid_t pid = w->pid;
    char err[512];
    int k;
    const char *ns = r ? r->ns : "claim", *pname = r ? r->name : t->policy.name;

    /*
     * Its state file, which the pod's processes write their usage into, goes with the answer
     * (opened here: the pod mounts the run directory read-only, and its processes may run as
     * any user). The file stays the daemon's, 0644.
     */
    if ((*state_fd = open(t->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
        snprintf(out, len, "error pod %.200s/%.200s: its state file: %s", ns, pname,
                 strerror(errno));
        return;
    }
    if (gd_tenant_join_as(t, pid, w->ns, w->inner, w->start, 0, err, sizeof(err)) < 0) {
        snprintf(out, len, "error pod %.200s/%.200s: %.500s", ns, pname, err);
        close(*state_fd);
        *state_fd = -1;
        return;
    }
    joins++;
    if (!r) {
        snprintf(out, len, "ok %u", t->node_id);
        return;
    }
    /* Room for it: the processes that have exited leave the table first. */
    for (k = 0; r->njoined == MAX_JOINED && k < r->njoined;)
        if (kill(r->joined[k].pid, 0) < 0 && errno == ESRCH)
            r->joined[k] = r->joined[--r->njoined];
        else
            k++;
    for (k = 0; k < r->njoined && r->joined[k].pid != pid; k++)
        ;
    if (k == r->njoined && r->njoined < MAX_JOINED)
        r->njoined++;
    if (k < MAX_JOINED) {
        r->joined[k].pid = pid;
        snprintf(r->joined[k].cid, sizeof(r->joined[k].cid), "%s", cid);
    }
    snprintf(out, len, "ok %u", t->node_id);
}

/* The answer for process w (cg: its /proc/PID/cgroup), into out; under gd.mu. */
static void answer(const struct who *w, const char *cg, size_t cglen, char *out, size_t len,
                   int *state_fd)
{
    pid_t pid = w->pid;
    char puid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN], name[64], err[512];
    struct podrec *r;
    struct gd_tenant *t;
    int c = gd_pods_cgroup(cg, cglen, puid, cid, err, sizeof(err)), k;

    if (c == GD_CGROUP_UNPLACED) {
        unplaced++;
        snprintf(out, len, "error the daemon cannot tell which pod process %d is in: %.700s",
                 (int)pid, err);
        return;
    }
    if (c < 0) {
        snprintf(out, len, "error process %d: its cgroups name more than one pod or container",
                 (int)pid);
        return;
    }
    if (c == 0) {
        snprintf(out, len, "none process %d is in no Kubernetes pod's cgroup", (int)pid);
        return;
    }
    if (!gd_kube_enabled()) {
        snprintf(out, len, "none this daemon does not follow Kubernetes pods (--kube-api)");
        return;
    }
    /*
     * A pod with a claim of the DRA driver prepared for it joins the claim's tenant: one the
     * claim was reserved for when it was prepared, or one that names it (a claim shared by
     * pods is prepared once, for the first; the kubelet runs a pod only with the claims
     * reserved for it).
     */
    k = gd_dra_tenant_of_pod(puid, name, sizeof(name), err, sizeof(err));
    if (k == 0 && (r = rec_find(puid)) != NULL && r->nclaims > 0)
        k = gd_dra_tenant_of_claims(puid, r->ns, (const char(*)[GD_CLAIM_NAME_LEN])r->claims,
                                    r->nclaims, name, sizeof(name), err, sizeof(err));
    if (k < 0) {
        refusals++;
        snprintf(out, len, "refused %.700s", err);
        return;
    }
    if (k > 0) {
        if ((t = gd_tenant_find_managed(name)) == NULL) {
            snprintf(out, len, "wait pod %s: its claim's tenant is being made", puid);
            return;
        }
        join(t, w, cid, NULL, out, len, state_fd);
        return;
    }
    if ((r = rec_find(puid)) == NULL) {
        waits++;
        snprintf(out, len, "wait pod %s is not known to the daemon yet%s", puid,
                 synced_once ? "" : " (it has not listed the node's pods since it started)");
        return;
    }
    if (r->node_id == 0) {
        snprintf(out, len, "error pod %.200s/%.200s has no tenant: %.500s", r->ns, r->name, r->err);
        return;
    }
    if (r->refused) {
        refusals++;
        snprintf(out, len, "refused pod %.200s/%.200s: %.500s", r->ns, r->name, r->err);
        return;
    }
    snprintf(name, sizeof(name), "pod-%.36s", puid);
    if ((t = gd_tenant_find(name)) == NULL || t->node_id != r->node_id) {
        snprintf(out, len, "wait pod %s/%s: its tenant is being made", r->ns, r->name);
        return;
    }
    join(t, w, cid, r, out, len, state_fd);
}

static void serve_one(int c)
{
    struct gd_peer_id peer;
    struct who w;
    char path[64], cg[16384], out[1024];
    ssize_t got = -1;
    int fd, state_fd = -1, e = 0;

    if (gd_peer_get(c, &peer) < 0) {
        snprintf(out, sizeof(out),
                 "error the kernel does not name the connecting process (gone, or in a PID "
                 "namespace the daemon does not see)\n");
    } else {
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)peer.pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
            got = read(fd, cg, sizeof(cg) - 1);
            e = errno;
            close(fd);
        } else {
            e = errno;
        }
        w.pid = peer.pid;
        w.ns = gs_proc_pid_ns(peer.pid);
        w.inner = gs_proc_inner_pid(peer.pid);
        w.start = gs_proc_start_time(peer.pid);
        /*
         * Only now, after every read of /proc/PID: the process that connected is still alive,
         * so PID was still its own and all that was read is its (a PID is not given to another
         * while its holder lives). A process that connected and exited, its PID taken by one of
         * another pod, would otherwise be answered with that pod's tenant.
         */
        if (!gd_peer_alive(&peer)) {
            snprintf(out, sizeof(out), "error process %d exited while it asked\n", (int)peer.pid);
        } else if (got < 0) {
            snprintf(out, sizeof(out), "error cannot read %s: %s\n", path, strerror(e));
        } else if (w.start == 0 || w.ns == 0 || w.inner <= 0) {
            snprintf(out, sizeof(out), "error process %d cannot be read in /proc\n", (int)peer.pid);
        } else {
            unsigned id;

            cg[got] = '\0';
            pthread_mutex_lock(&gd.mu);
            answer(&w, cg, (size_t)got, out, sizeof(out) - 1, &state_fd);
            pthread_mutex_unlock(&gd.mu);
            /* Its container's cgroup gets the pod's limits in the driver (r615+) first. */
            if (state_fd >= 0 && sscanf(out, "ok %u", &id) == 1)
                gd_guard_wall_join(id, cg);
            strcat(out, "\n");
        }
        gd_peer_close(&peer);
    }
    /* Non-blocking: a peer that does not read loses its answer, and holds nothing up. */
    {
        union {
            char buf[CMSG_SPACE(sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = { out, strlen(out) };
        struct msghdr m;

        memset(&m, 0, sizeof(m));
        m.msg_iov = &iov;
        m.msg_iovlen = 1;
        if (state_fd >= 0) {
            struct cmsghdr *h;

            memset(&u, 0, sizeof(u));
            m.msg_control = u.buf;
            m.msg_controllen = sizeof(u.buf);
            h = CMSG_FIRSTHDR(&m);
            h->cmsg_level = SOL_SOCKET;
            h->cmsg_type = SCM_RIGHTS;
            h->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(h), &state_fd, sizeof(int));
        }
        (void)!sendmsg(c, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (state_fd >= 0)
            close(state_fd);
    }
}

/* ---- what pods mount: RUN_DIR/pod ---- */

static const char *const pod_links[] = { GPUSLICE_NODE_FILE, GS_BOARDS_SOCKET,
                                         GPUSLICE_NODE_POD_SOCKET };

/* RUN_DIR/sub (sub "" for RUN_DIR/pod itself) into out; 0 or -ENAMETOOLONG. */
static int pod_path(const char *sub, char *out, size_t len)
{
    int n = snprintf(out, len, "%s/" GD_POD_RUN_DIR "%s%s", gd_opt.run_dir, sub[0] ? "/" : "", sub);

    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

/*
 * RUN_DIR/pod/name made a hard link of RUN_DIR/name (a file or a socket: the same inode, so
 * a process that opens or connects to either reaches the daemon's own), replaced atomically:
 * the daemon makes its node segment and sockets anew at a start.
 */
static int pod_link(const char *name, char *err, size_t errlen)
{
    char from[PATH_MAX], to[PATH_MAX], tmp[PATH_MAX];

    if ((size_t)snprintf(from, sizeof(from), "%s/%s", gd_opt.run_dir, name) >= sizeof(from) ||
        pod_path(name, to, sizeof(to)) < 0 ||
        (size_t)snprintf(tmp, sizeof(tmp), "%s.%d.tmp", to, (int)getpid()) >= sizeof(tmp)) {
        snprintf(err, errlen, "%s/" GD_POD_RUN_DIR "/%s: the path is too long", gd_opt.run_dir,
                 name);
        return -1;
    }
    unlink(tmp);
    if (link(from, tmp) < 0 || rename(tmp, to) < 0) {
        snprintf(err, errlen, "cannot link %s to %s: %s", from, to, strerror(errno));
        unlink(tmp);
        return -1;
    }
    return 0;
}

int gd_pods_start(char *err, size_t errlen)
{
    char dir[PATH_MAX], sub[PATH_MAX];
    size_t i;

    if (gd_pod_ns_list_check(gd_opt.pod_latency_namespaces, err, errlen) < 0)
        return -1;
    pthread_once(&ns_once, ns_find); /* said in the log now, not at the first pod's process */
    /*
     * Here, not in ns_find: a /readyz asked before Kubernetes was followed (the HTTP API starts
     * first) ran ns_find then, and the line was never written.
     */
    if (!ns_placed)
        gd_log("kubernetes: pods' processes cannot be told by their cgroup, and are refused: %s",
               ns_why);
    if (pod_path("", dir, sizeof(dir)) < 0 || pod_path("tenants", sub, sizeof(sub)) < 0) {
        snprintf(err, errlen, "%s: the path is too long", gd_opt.run_dir);
        return -1;
    }
    if (gd_own_dir(dir, 0755, err, errlen) < 0 || gd_own_dir(sub, 0755, err, errlen) < 0 ||
        gd_usock_start(&sock, GPUSLICE_NODE_POD_SOCKET, serve_one, "pods' processes", err, errlen) <
            0)
        return -1;
    for (i = 0; i < sizeof(pod_links) / sizeof(pod_links[0]); i++)
        if (pod_link(pod_links[i], err, errlen) < 0)
            return -1;
    return 0;
}

void gd_pods_stop(void)
{
    char path[PATH_MAX];
    int i;

    gd_usock_stop(&sock);
    /*
     * The sockets' links too (the boards' stops next): a pod's process then finds no socket,
     * as on the host, not one nobody answers. The node segment stays, as its limits do.
     */
    if (pod_path(GPUSLICE_NODE_POD_SOCKET, path, sizeof(path)) == 0)
        unlink(path);
    if (pod_path(GS_BOARDS_SOCKET, path, sizeof(path)) == 0)
        unlink(path);
    pthread_mutex_lock(&gd.mu);
    for (i = nrec - 1; i >= 0; i--)
        rec_drop(i);
    pthread_mutex_unlock(&gd.mu);
}

/* ---- what the API and /metrics show ---- */

static const char *container_name(const struct podrec *r, const char *cid)
{
    int i;

    for (i = 0; cid[0] && i < r->ncont; i++)
        if (strcmp(r->cont[i].id, cid) == 0)
            return r->cont[i].name;
    return NULL;
}

/* The container of pod process pid (the daemon's namespace), "" if not known. */
static const char *pid_container(const struct podrec *r, pid_t pid, const char **id)
{
    int i;

    for (i = 0; i < r->njoined; i++)
        if (r->joined[i].pid == pid) {
            const char *n = container_name(r, r->joined[i].cid);

            *id = r->joined[i].cid;
            return n ? n : "";
        }
    *id = "";
    return "";
}

/* How many devices the pod's limits cover: its nvidia.com/gpu, else its keys, else one. */
static unsigned pod_gpus(const struct podrec *r)
{
    unsigned n = 0;
    int i;

    if (r->spec.gpus)
        return r->spec.gpus;
    for (i = 0; i < r->spec.memory.n; i++)
        n += r->spec.memory.e[i].key != GS_KEY_ALL;
    return n ? n : 1;
}

/*
 * Entry k of l as it limits: a compute ceiling (percent) of 100 % is none, 0, as the registry
 * keeps it.
 */
static uint64_t limit_of(const struct gs_limits *l, int k, int percent)
{
    return percent && l->e[k].value >= 100 ? 0 : l->e[k].value;
}

/*
 * The sum over the pod's devices of a limit (memory, or compute with percent): device i is its
 * container's CUDA index i, whose limit is its index key's, else the default; a UUID key counts
 * once more.
 */
static uint64_t pod_total(const struct podrec *r, const struct gs_limits *l, int percent)
{
    uint64_t sum = 0, def = 0;
    unsigned g = pod_gpus(r), i;
    int k;

    for (k = 0; k < l->n; k++)
        if (l->e[k].key == GS_KEY_ALL)
            def = limit_of(l, k, percent);
    for (i = 0; i < g; i++) {
        uint64_t v = def;

        for (k = 0; k < l->n; k++)
            if (l->e[k].key == GS_KEY_INDEX && (unsigned)l->e[k].index == i)
                v = limit_of(l, k, percent);
        sum += v;
    }
    for (k = 0; k < l->n; k++)
        if (l->e[k].key == GS_KEY_UUID ||
            (l->e[k].key == GS_KEY_INDEX && (unsigned)l->e[k].index >= g))
            sum += limit_of(l, k, percent);
    return sum;
}

static uint64_t pod_used(const struct gd_tenant *t)
{
    uint64_t sum = 0;
    int e;

    for (e = 0; t->t && e < GPUSLICE_MAX_DEVICES; e++)
        if (tenant_list_dev_in_use(&t->t->dev[e]))
            sum += gd_tenant_mem_used(t, e);
    return sum;
}

json_t *gd_pods_tenant_json(const struct gd_tenant *t)
{
    const struct podrec *r = pod_of(t);
    json_t *procs, *o;
    int i;

    if (r == NULL)
        return NULL;
    procs = json_array();
    for (i = 0; t->t && i < GPUSLICE_MAX_PROCS; i++)
        if (t->seen_pid[i] > 0) {
            const char *id, *name = pid_container(r, t->seen_pid[i], &id);
            uint64_t mem = 0;
            int e;

            for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
                mem += t->t->proc[i].mem_used[e];
            json_array_append_new(
                procs, json_pack("{s:i, s:s, s:s, s:I}", "pid", (int)t->seen_pid[i], "container",
                                 name, "container_id", id, "memory_used_bytes", (json_int_t)mem));
        }
    o = json_pack("{s:s, s:s, s:s, s:b, s:o, s:i, s:I, s:I, s:I, s:o}", "namespace", r->ns, "name",
                  r->name, "uid", r->uid, "refused", r->refused, "error",
                  r->refused ? json_string(r->err) : json_null(), "gpus", (int)pod_gpus(r),
                  "memory_limit_bytes_total", (json_int_t)pod_total(r, &r->spec.memory, 0),
                  "compute_limit_percent_total", (json_int_t)pod_total(r, &r->spec.compute, 1),
                  "memory_used_bytes_total", (json_int_t)pod_used(t), "processes", procs);
    return o;
}

int gd_pods_labels(const struct gd_tenant *t, const char **ns, const char **name)
{
    const struct podrec *r = pod_of(t);

    if (r == NULL)
        return 0;
    *ns = r->ns;
    *name = r->name;
    return 1;
}

void gd_pods_metrics(FILE *f, void (*label)(FILE *, const char *))
{
    static const struct {
        const char *name, *help;
    } m[] = {
        { "gpuslice_pod_memory_limit_bytes",
          "The pod's memory limit summed over its GPUs (a namespace's sum is its quota)." },
        { "gpuslice_pod_memory_used_bytes", "GPU memory the pod's live processes hold, summed." },
        { "gpuslice_pod_compute_limit_percent",
          "The pod's compute ceilings summed over its GPUs, in percent of one GPU." },
        { "gpuslice_pod_gpus", "GPUs the pod's limits cover (nvidia.com/gpu, else its keys)." },
        { "gpuslice_pod_processes", "Live processes of the pod's tenant." },
        { "gpuslice_pod_refused", "1 when the daemon refused the pod's GPU limits." },
    };
    size_t k;
    int i;

    for (k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", m[k].name, m[k].help, m[k].name);
        for (i = 0; i < gd.ntenant; i++) {
            const struct gd_tenant *t = &gd.tenant[i];
            const struct podrec *r = pod_of(t);
            uint64_t v;

            if (r == NULL)
                continue;
            v = k == 0   ? pod_total(r, &r->spec.memory, 0)
                : k == 1 ? pod_used(t)
                : k == 2 ? pod_total(r, &r->spec.compute, 1)
                : k == 3 ? pod_gpus(r)
                : k == 4 ? (uint64_t)t->nlive
                         : (uint64_t)r->refused;
            if ((k == 0 || k == 2) && v == 0)
                continue; /* no limit: no series, as for tenants */
            fprintf(f, "%s{namespace=\"", m[k].name);
            label(f, r->ns);
            fputs("\",pod=\"", f);
            label(f, r->name);
            fputs("\",uid=\"", f);
            label(f, r->uid);
            fprintf(f, "\",tenant=\"%u\"} %llu\n", t->node_id, (unsigned long long)v);
        }
    }
    /* By container: what each container's live processes hold, summed over the GPUs. */
    fprintf(f, "# HELP gpuslice_pod_container_memory_used_bytes GPU memory a container's live "
               "processes hold, summed over its GPUs.\n# TYPE "
               "gpuslice_pod_container_memory_used_bytes gauge\n");
    for (i = 0; i < gd.ntenant; i++) {
        const struct gd_tenant *t = &gd.tenant[i];
        const struct podrec *r = pod_of(t);
        int c;

        for (c = 0; r && t->t && c < r->ncont; c++) {
            uint64_t sum = 0;
            int q, e, seen = 0;

            for (q = 0; q < GPUSLICE_MAX_PROCS; q++) {
                const char *id;

                if (t->seen_pid[q] <= 0)
                    continue;
                pid_container(r, t->seen_pid[q], &id);
                if (strcmp(id, r->cont[c].id) != 0)
                    continue;
                seen = 1;
                for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
                    sum += t->t->proc[q].mem_used[e];
            }
            if (!seen)
                continue;
            fputs("gpuslice_pod_container_memory_used_bytes{namespace=\"", f);
            label(f, r->ns);
            fputs("\",pod=\"", f);
            label(f, r->name);
            fputs("\",container=\"", f);
            label(f, r->cont[c].name);
            fputs("\",uid=\"", f);
            label(f, r->uid);
            fprintf(f, "\",tenant=\"%u\"} %llu\n", t->node_id, (unsigned long long)sum);
        }
    }
    fprintf(f,
            "# HELP gpuslice_pod_joins_total Pod processes joined to their pod's tenant.\n"
            "# TYPE gpuslice_pod_joins_total counter\ngpuslice_pod_joins_total %lu\n"
            "# HELP gpuslice_pod_join_waits_total Joins answered wait (the pod not known yet).\n"
            "# TYPE gpuslice_pod_join_waits_total counter\ngpuslice_pod_join_waits_total %lu\n"
            "# HELP gpuslice_pod_join_refusals_total Joins refused (the pod's limits are bad).\n"
            "# TYPE gpuslice_pod_join_refusals_total counter\n"
            "gpuslice_pod_join_refusals_total %lu\n"
            "# HELP gpuslice_pod_cgroups_placed 1 when the daemon can tell a process's pod by "
            "its cgroup (0: pods' processes are refused; /readyz and the log say why).\n"
            "# TYPE gpuslice_pod_cgroups_placed gauge\ngpuslice_pod_cgroups_placed %d\n"
            "# HELP gpuslice_pod_join_unplaced_total Joins refused because the process's cgroup "
            "could not be placed.\n"
            "# TYPE gpuslice_pod_join_unplaced_total counter\n"
            "gpuslice_pod_join_unplaced_total %lu\n",
            joins, waits, refusals, ns_placed, unplaced);
}
