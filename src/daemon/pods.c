/*
 * Kubernetes pods as tenants. Each pod the daemon follows (kube.c) is one
 * managed tenant, "pod-<uid>", whose limits are exactly what the pod's object
 * says (podspec.c), flagged GPUSLICE_NODE_POD, and GPUSLICE_NODE_REFUSED when
 * the object's values are bad (its processes' CUDA calls then fail). A pod
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
 * open for writing (SCM_RIGHTS): the pod mounts the run directory read-only.
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

#include "common/error.h"
#include "common/node.h"
#include "common/proc.h"
#include "control/tenants.h"
#include "daemon/cgroup.h"
#include "daemon/daemon.h"
#include "daemon/kube.h"
#include "daemon/pods.h"
#include "daemon/podspec.h"
#include "daemon/usock.h"

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
    int njoined;
    struct {
        pid_t pid; /* the daemon's namespace */
        char cid[GD_CONTAINER_ID_LEN];
    } joined[MAX_JOINED];
};

static struct podrec *recs[GD_MAX_PODS];
static int nrec;
static int synced_once; /* a whole list has been read: a pod missing from it is gone */
static unsigned long joins, waits, refusals;

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
    char name[64], err[512];
    int refused = !k->ok;

    snprintf(name, sizeof(name), "pod-%.36s", k->uid);
    memset(&l, 0, sizeof(l));
    if (k->ok) {
        l.has_mem = k->spec.memory.n > 0;
        l.mem = k->spec.memory;
        l.has_comp = k->spec.compute.n > 0;
        l.comp = k->spec.compute;
        l.priority = k->spec.priority == GPUSLICE_PRIORITY_UNSET ? 0 : k->spec.priority;
    }
    snprintf(err, sizeof(err), "%s", k->err);
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
    r->spec = k->spec;
    r->ncont = k->ncont;
    memcpy(r->cont, k->cont, sizeof(r->cont));
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

            if (t->managed && (t->policy.flags & GPUSLICE_NODE_POD) && !in_snapshot(t, v, n)) {
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

/* ---- joining: one answer per connection ---- */

/* The answer for the process pid (the daemon's namespace) of user uid, into out; under gd.mu. */
static void answer(pid_t pid, const char *cg, size_t cglen, char *out, size_t len, int *state_fd)
{
    char puid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN], name[64], err[512];
    struct podrec *r;
    struct gd_tenant *t;
    int c = gd_cgroup_pod(cg, cglen, puid, cid), k;

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
    /*
     * Its state file, which the pod's processes write their usage into, goes with the answer
     * (opened here: the pod mounts the run directory read-only, and its processes may run as
     * any user). The file stays the daemon's, 0644.
     */
    if ((*state_fd = open(t->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0) {
        snprintf(out, len, "error pod %.200s/%.200s: its state file: %s", r->ns, r->name,
                 strerror(errno));
        return;
    }
    if (gd_tenant_join(t, pid, 0, err, sizeof(err)) < 0) {
        snprintf(out, len, "error pod %.200s/%.200s: %.500s", r->ns, r->name, err);
        close(*state_fd);
        *state_fd = -1;
        return;
    }
    joins++;
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

static void serve_one(int c)
{
    struct ucred cred = { 0, 0, 0 };
    socklen_t cl = sizeof(cred);
    char path[64], cg[16384], out[1024];
    ssize_t got = -1;
    int fd, state_fd = -1;

    if (getsockopt(c, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.pid <= 0) {
        snprintf(out, sizeof(out), "error the kernel does not name the connecting process\n");
    } else {
        /* The same process before and after its cgroup is read (not a PID taken again). */
        uint64_t start = gs_proc_start_time(cred.pid);

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)cred.pid);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
            got = read(fd, cg, sizeof(cg) - 1);
            close(fd);
        }
        if (got >= 0 && (start == 0 || gs_proc_start_time(cred.pid) != start)) {
            snprintf(out, sizeof(out), "error process %d exited while it asked\n", (int)cred.pid);
        } else if (got < 0) {
            snprintf(out, sizeof(out), "error cannot read %s: %s\n", path, strerror(errno));
        } else {
            cg[got] = '\0';
            pthread_mutex_lock(&gd.mu);
            answer(cred.pid, cg, (size_t)got, out, sizeof(out) - 1, &state_fd);
            pthread_mutex_unlock(&gd.mu);
            strcat(out, "\n");
        }
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

int gd_pods_start(char *err, size_t errlen)
{
    if (gd_pod_ns_list_check(gd_opt.pod_latency_namespaces, err, errlen) < 0)
        return -1;
    return gd_usock_start(&sock, GPUSLICE_NODE_POD_SOCKET, serve_one, "pods' processes", err,
                          errlen);
}

void gd_pods_stop(void)
{
    int i;

    gd_usock_stop(&sock);
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
 * The sum over the pod's devices of a limit (memory or compute): device i is its container's
 * CUDA index i, whose limit is its index key's, else the default; a UUID key counts once more.
 */
static uint64_t pod_total(const struct podrec *r, const struct gs_limits *l)
{
    uint64_t sum = 0, def = 0;
    unsigned g = pod_gpus(r), i;
    int k;

    for (k = 0; k < l->n; k++)
        if (l->e[k].key == GS_KEY_ALL)
            def = l->e[k].value;
    for (i = 0; i < g; i++) {
        uint64_t v = def;

        for (k = 0; k < l->n; k++)
            if (l->e[k].key == GS_KEY_INDEX && (unsigned)l->e[k].index == i)
                v = l->e[k].value;
        sum += v;
    }
    for (k = 0; k < l->n; k++)
        if (l->e[k].key == GS_KEY_UUID ||
            (l->e[k].key == GS_KEY_INDEX && (unsigned)l->e[k].index >= g))
            sum += l->e[k].value;
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
                  "memory_limit_bytes_total", (json_int_t)pod_total(r, &r->spec.memory),
                  "compute_limit_percent_total", (json_int_t)pod_total(r, &r->spec.compute),
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
            v = k == 0   ? pod_total(r, &r->spec.memory)
                : k == 1 ? pod_used(t)
                : k == 2 ? pod_total(r, &r->spec.compute)
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
            "gpuslice_pod_join_refusals_total %lu\n",
            joins, waits, refusals);
}
