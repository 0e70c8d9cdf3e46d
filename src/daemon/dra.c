/*
 * gpusliced as the DRA driver gpu.gpuslice.io: it publishes the node's GPUs as one
 * ResourceSlice whose devices may be allocated to several claims, each consuming part of the
 * device's memory and cores (KEP-5075), registers with the kubelet, and prepares each claim
 * the scheduler allocated here as a tenant whose limits are the claim's consumed capacity.
 *
 * The scheduler packs by the slice; the daemon holds each claim to what it was given, and
 * judges every claim again itself: a claim of another node, pool or driver, a device that is
 * not one of ours, or claims that together would overfill a GPU (a scheduler that did not
 * keep the sums) are refused by name, never prepared unlimited.
 *
 * A claim's tenant, "claim-<uid>", is joined by the processes of the pods the claim is
 * reserved for, through the pods' socket (pods.c): the kernel names the process, its cgroup
 * names the pod. The CDI spec written per claim brings the interposer, its ld.so.preload, the
 * pods' directory (read-only) and GPUSLICE_POD=1 into the containers: nothing in the container
 * decides its limits.
 *
 * Prepared claims are kept in STATE_DIR/dra-claims.json (written, synced, renamed before a
 * Prepare answers), so that a daemon killed between Prepare and Unprepare answers both
 * correctly when it comes back: the tenants are made again from it at start.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "daemon/daemon.h"
#include "daemon/dra.h"
#include "daemon/grpc.h"
#include "daemon/kube.h"
#include "daemon/podspec.h"
#include "daemon/webhook.h"
#include "gpuslice/node_abi.h"
#include "gpuslice/tenant_abi.h"

#define MAX_PREPARED 256 /* claims prepared on the node at once (the tenant table holds 256) */
#define CHECKPOINT "dra-claims.json"
#define REG_SOCKET GD_DRA_DRIVER "-reg.sock"
#define DRA_SOCKET "dra.sock"

static struct {
    pthread_mutex_t mu; /* Prepare, Unprepare and the checkpoint, one at a time */
    struct gd_dra_claim *claim[MAX_PREPARED];
    int n;
    /* The pods' map: which pod may join which claim's tenant; under map_mu, taken last. */
    pthread_mutex_t map_mu;
    /* Pods that joined a prepared claim they name, not in its reservedFor when prepared. */
    struct {
        char pod[129], claim[129];
    } shared[MAX_PREPARED];
    int nshared;
    int running, registered;
    char reg_error[512];
    char node[256], dra_sock[4096], reg_sock[4096];
    struct gd_grpc *reg_srv, *dra_srv;
    pthread_t th;
    pthread_mutex_t stop_mu;
    pthread_cond_t stop_cv;
    int stop;
    int64_t generation;
    char published[64]; /* the GPUs as last published: a digest ("" until the first success) */
    unsigned long prepares, unprepares, refusals;
} dra = { .mu = PTHREAD_MUTEX_INITIALIZER,
          .map_mu = PTHREAD_MUTEX_INITIALIZER,
          .stop_mu = PTHREAD_MUTEX_INITIALIZER,
          .stop_cv = PTHREAD_COND_INITIALIZER };

/* ---- the node's GPUs ---- */

static const char *arch_name(int major)
{
    switch (major) {
    case 7: return "Volta/Turing";
    case 8: return "Ampere/Ada";
    case 9: return "Hopper";
    case 10: return "Blackwell";
    case 12: return "Blackwell";
    default: return "";
    }
}

/* The GPUs as NVML shows them now, into g (GD_MAX_DEVICES); their number. */
static int gpus_now(struct gd_dra_gpu *g)
{
    int i, n;

    pthread_mutex_lock(&gd.mu);
    n = gd.ndev;
    for (i = 0; i < n; i++) {
        const struct gd_device *d = &gd.dev[i];

        memset(&g[i], 0, sizeof(g[i]));
        g[i].index = d->index;
        gs_set_error(g[i].uuid, sizeof(g[i].uuid), "%s", d->uuid);
        gs_set_error(g[i].product, sizeof(g[i].product), "%s", d->name);
        gs_set_error(g[i].driver_version, sizeof(g[i].driver_version), "%s", gd.driver_version);
        gs_set_error(g[i].arch, sizeof(g[i].arch), "%s", arch_name(d->cc_major));
        g[i].sms = d->sms;
        g[i].mem_total = d->mem_total;
    }
    pthread_mutex_unlock(&gd.mu);
    return n;
}

/* ---- publishing ---- */

static void set_generation(int64_t g)
{
    pthread_mutex_lock(&dra.map_mu);
    dra.generation = g;
    pthread_mutex_unlock(&dra.map_mu);
}

static void slice_name(char *out, size_t len)
{
    json_t *s = gd_dra_slice_json(dra.node, 1, NULL, 0);
    const char *name = json_string_value(json_object_get(json_object_get(s, "metadata"), "name"));

    gs_set_error(out, len, "%s", name ? name : "");
    json_decref(s);
}

/*
 * The slice brought to the GPUs g (n): made, or replaced with the next generation where it
 * differs. 0, or -1 with err.
 */
static int publish(const struct gd_dra_gpu *g, int n, char *err, size_t errlen)
{
    char path[1024], name[300];
    json_t *cur = NULL, *want, *got = NULL;
    long code;
    int r = -1;

    slice_name(name, sizeof(name));
    gs_set_error(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s", name);
    code = gd_kube_call("GET", path, NULL, &cur, 30, err, errlen);
    if (code == 404) {
        want = gd_dra_slice_json(dra.node, 1, g, n);
        code = gd_kube_call("POST", "/apis/resource.k8s.io/v1/resourceslices", want, &got, 30,
                            err, errlen);
        if (code == 201 || code == 200) {
            set_generation(1);
            r = 0;
        }
        json_decref(want);
    } else if (code == 200) {
        json_t *spec = json_object_get(cur, "spec");
        json_int_t gen = json_integer_value(json_object_get(json_object_get(spec, "pool"),
                                                            "generation"));
        const char *rv = json_string_value(
            json_object_get(json_object_get(cur, "metadata"), "resourceVersion"));
        json_t *same = gd_dra_slice_json(dra.node, gen, g, n);

        if (json_equal(json_object_get(same, "spec"), spec)) {
            set_generation(gen);
            r = 0;
        } else {
            want = gd_dra_slice_json(dra.node, gen + 1, g, n);
            if (rv)
                json_object_set_new(json_object_get(want, "metadata"), "resourceVersion",
                                    json_string(rv));
            code = gd_kube_call("PUT", path, want, &got, 30, err, errlen);
            if (code == 200) {
                set_generation(gen + 1);
                r = 0;
            }
            json_decref(want);
        }
        json_decref(same);
    }
    json_decref(cur);
    json_decref(got);
    return r;
}

/* The slices of this node and driver deleted (the driver leaves); 0 or -1 with err. */
static int unpublish(char *err, size_t errlen)
{
    char path[1024], name[300];
    json_t *got = NULL;
    long code;

    slice_name(name, sizeof(name));
    gs_set_error(path, sizeof(path), "/apis/resource.k8s.io/v1/resourceslices/%s", name);
    code = gd_kube_call("DELETE", path, NULL, &got, 10, err, errlen);
    json_decref(got);
    return code == 200 || code == 202 || code == 404 ? 0 : -1;
}

static void digest(const struct gd_dra_gpu *g, int n, char *out, size_t len)
{
    unsigned long long h = 1469598103934665603ull;
    int i;
    size_t k;

    for (i = 0; i < n; i++) {
        char line[256];

        gs_set_error(line, sizeof(line), "%d %s %s %llu %d|", g[i].index, g[i].uuid, g[i].product,
                 (unsigned long long)g[i].mem_total, g[i].sms);
        for (k = 0; line[k]; k++)
            h = (h ^ (unsigned char)line[k]) * 1099511628211ull;
    }
    gs_set_error(out, len, "%d-%016llx", n, h);
}

/* Waits up to s seconds or until the driver stops; 1 when it stops. */
static int pause_s(int s)
{
    struct timespec ts;
    int stop;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += s;
    pthread_mutex_lock(&dra.stop_mu);
    while (!dra.stop && pthread_cond_timedwait(&dra.stop_cv, &dra.stop_mu, &ts) == 0)
        ;
    stop = dra.stop;
    pthread_mutex_unlock(&dra.stop_mu);
    return stop;
}

/*
 * Every dra-publish-s seconds (2 until the first success): the slice read back and brought to the
 * GPUs, so that a GPU that comes or goes, or a slice deleted or changed by someone else, is
 * published again.
 */
static void *publisher(void *arg)
{
    struct gd_dra_gpu g[GD_MAX_DEVICES];
    char err[1024], dig[64], last_err[1024] = "";
    int n;

    (void)arg;
    do {
        n = gpus_now(g);
        digest(g, n, dig, sizeof(dig));
        if (publish(g, n, err, sizeof(err)) == 0) {
            if (strcmp(dig, dra.published) != 0)
                gd_log("dra: published %d GPU(s) of node %s", n, dra.node);
            snprintf(dra.published, sizeof(dra.published), "%s", dig);
            last_err[0] = '\0';
        } else if (strcmp(err, last_err) != 0) {
            gd_log("dra: the node's ResourceSlice could not be published: %s", err);
            snprintf(last_err, sizeof(last_err), "%s", err);
        }
    } while (!pause_s(dra.published[0] ? (int)gd_opt.dra_publish_s : 2));
    return NULL;
}

/* ---- the prepared claims, and their checkpoint ---- */

static int find(const char *uid)
{
    int i;

    for (i = 0; i < dra.n; i++)
        if (strcmp(dra.claim[i]->uid, uid) == 0)
            return i;
    return -1;
}

/*
 * STATE_DIR/dra-claims.json written durably: the table as it will be, with put (if not NULL)
 * in place of the claim of its UID or added, and the entry at skip (if >= 0) left out. The
 * table itself is changed only after (under dra.mu): a claim is prepared, or unprepared, only
 * once the file says so. 0 or -1 with err.
 */
static int checkpoint_write(const struct gd_dra_claim *put, int skip, char *err, size_t errlen)
{
    struct gd_dra_claim *flat = calloc((size_t)dra.n + 1, sizeof(*flat));
    char path[PATH_MAX], tmp[PATH_MAX];
    json_t *j;
    char *text = NULL;
    int fd = -1, i, r = -1, k = 0, placed = 0;
    size_t len, off;

    if (!flat) {
        gs_set_error(err, errlen, "out of memory");
        return -1;
    }
    for (i = 0; i < dra.n; i++) {
        if (i == skip)
            continue;
        if (put && strcmp(dra.claim[i]->uid, put->uid) == 0) {
            flat[k++] = *put;
            placed = 1;
        } else {
            flat[k++] = *dra.claim[i];
        }
    }
    if (put && !placed)
        flat[k++] = *put;
    j = gd_dra_checkpoint_json(flat, k);
    free(flat);
    if (!j || !(text = json_dumps(j, JSON_INDENT(1)))) {
        json_decref(j);
        gs_set_error(err, errlen, "out of memory");
        return -1;
    }
    json_decref(j);
    gs_set_error(path, sizeof(path), "%s/" CHECKPOINT, gd_opt.state_dir);
    gs_set_error(tmp, sizeof(tmp), "%s.tmp", path);
    len = strlen(text);
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
        goto fail;
    for (off = 0; off < len;) {
        ssize_t w = write(fd, text + off, len - off);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            goto fail;
        off += (size_t)w;
    }
    if (fsync(fd) < 0 || close(fd) < 0) {
        fd = -1;
        goto fail;
    }
    fd = -1;
    if (rename(tmp, path) < 0)
        goto fail;
    if ((fd = open(gd_opt.state_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
        fsync(fd);
        close(fd);
    }
    fd = -1;
    r = 0;
fail:
    if (r < 0) {
        gs_set_error(err, errlen, "cannot write %s: %s", path, strerror(errno));
        if (fd >= 0)
            close(fd);
        unlink(tmp);
    }
    free(text);
    return r;
}

/* A claim's tenant name. */
static void tenant_name(const char *uid, char *out, size_t len)
{
    gs_set_error(out, len, "claim-%s", uid);
}

/*
 * The claim's tenant made or given exactly the claim's limits (under gd.mu): memory and cores
 * per GPU UUID, its class and weight. 0, or -1 with err.
 */
static int tenant_put(const struct gd_dra_claim *c, char *err, size_t errlen)
{
    struct gd_limits_req l;
    struct gd_tenant *t;
    char name[64];
    int i;

    memset(&l, 0, sizeof(l));
    for (i = 0; i < c->nhold; i++) {
        const struct gd_dra_hold *h = &c->hold[i];
        const struct gd_device *d = gd_device_find(h->uuid);
        struct gs_limit_entry *e;

        if (!d) {
            gs_set_error(err, errlen, "claim %s/%s: GPU %s is no longer on this node", c->ns,
                     c->name, h->uuid);
            return -1;
        }
        if (h->mem_bytes > 0 && l.mem.n < GS_MAX_LIMIT_ENTRIES) {
            e = &l.mem.e[l.mem.n++];
            e->key = GS_KEY_UUID;
            gs_set_error(e->uuid, sizeof(e->uuid), "gpu-%s", d->uuid + 4);
            for (char *p = e->uuid; *p; p++)
                if (*p >= 'A' && *p <= 'F')
                    *p = (char)(*p - 'A' + 'a');
            e->value = h->mem_bytes;
        }
        if (h->cores > 0 && h->cores < 100 && l.comp.n < GS_MAX_LIMIT_ENTRIES) {
            e = &l.comp.e[l.comp.n++];
            e->key = GS_KEY_UUID;
            gs_set_error(e->uuid, sizeof(e->uuid), "gpu-%s", d->uuid + 4);
            for (char *p = e->uuid; *p; p++)
                if (*p >= 'A' && *p <= 'F')
                    *p = (char)(*p - 'A' + 'a');
            e->value = (uint64_t)h->cores;
        }
    }
    l.has_mem = l.mem.n > 0;
    l.has_comp = l.comp.n > 0;
    l.priority = c->priority;
    l.weight = c->weight;
    l.pod_flags = GPUSLICE_NODE_POD;
    tenant_name(c->uid, name, sizeof(name));
    if (gd_tenant_put_pod(name, &l, &t, err, errlen) < 0)
        return -1;
    return 0;
}

/*
 * Whether claim c fits beside the claims prepared now (other than its own earlier preparation):
 * per GPU, the memory of all at most the GPU's, their cores at most 100, and a claim of a
 * whole GPU alone on it. 0, or -1 with err naming the claim and the GPU.
 */
static int fits(const struct gd_dra_claim *c, const struct gd_dra_gpu *g, int ng, char *err,
                size_t errlen)
{
    int i, k, j, x;

    for (i = 0; i < c->nhold; i++) {
        const struct gd_dra_hold *h = &c->hold[i];
        uint64_t total = 0, mem = 0;
        int cores = 0, whole = h->mem_bytes == 0, others = 0;

        for (x = 0; x < ng; x++)
            if (strcmp(g[x].uuid, h->uuid) == 0)
                total = g[x].mem_total;
        mem = h->mem_bytes;
        cores = h->cores;
        for (k = 0; k < dra.n; k++) {
            const struct gd_dra_claim *o = dra.claim[k];

            if (strcmp(o->uid, c->uid) == 0)
                continue;
            for (j = 0; j < o->nhold; j++) {
                if (strcmp(o->hold[j].uuid, h->uuid) != 0)
                    continue;
                others++;
                whole |= o->hold[j].mem_bytes == 0;
                mem += o->hold[j].mem_bytes;
                cores += o->hold[j].cores;
            }
        }
        if (whole && others > 0) {
            gs_set_error(err, errlen,
                     "claim %s/%s: %s (GPU %s) is held whole by a claim prepared here, or this "
                     "claim asks it whole beside %d other(s): the scheduler's allocation "
                     "overfills it",
                     c->ns, c->name, h->device, h->uuid, others);
            return -1;
        }
        if (mem > total) {
            gs_set_error(err, errlen,
                     "claim %s/%s: %s (GPU %s): the claims prepared here would hold %llu MiB of "
                     "its %llu MiB: the scheduler's allocation overfills it",
                     c->ns, c->name, h->device, h->uuid, (unsigned long long)(mem >> 20),
                     (unsigned long long)(total >> 20));
            return -1;
        }
        if (cores > 100) {
            gs_set_error(err, errlen,
                     "claim %s/%s: %s (GPU %s): the claims prepared here would hold %d of its "
                     "100 cores: the scheduler's allocation overfills it",
                     c->ns, c->name, h->device, h->uuid, cores);
            return -1;
        }
    }
    return 0;
}

/* ---- CDI ---- */

static int cdi_path(const char *uid, char *out, size_t len)
{
    int n = snprintf(out, len, "%s/gpuslice.io-claim_%s.json", gd_opt.cdi_dir, uid);

    return n < 0 || (size_t)n >= len ? -1 : 0;
}

/* The claim's CDI spec written atomically into cdi-dir; 0 or -1 with err. */
static int cdi_write(const struct gd_dra_claim *c, char *err, size_t errlen)
{
    char path[PATH_MAX], tmp[PATH_MAX + 16], lib[PATH_MAX], pre[PATH_MAX], pods[PATH_MAX],
        tenants[PATH_MAX];
    const char *run = gd_opt.inject_run_dir[0] ? gd_opt.inject_run_dir : gd_opt.run_dir;
    json_t *spec;
    char *text;
    int fd, r = -1;
    size_t len, off;

    gs_set_error(lib, sizeof(lib), "%s", gd_opt.inject_lib_dir);
    gs_set_error(pre, sizeof(pre), "%s/ld.so.preload", gd_opt.inject_lib_dir);
    gs_set_error(pods, sizeof(pods), "%s/" GD_POD_RUN_DIR, run);
    gs_set_error(tenants, sizeof(tenants), "%s/tenants", run);
    if (cdi_path(c->uid, path, sizeof(path)) < 0) {
        gs_set_error(err, errlen, "cdi-dir %s: the path is too long", gd_opt.cdi_dir);
        return -1;
    }
    if (!(spec = gd_dra_cdi_json(c->uid, lib, pre, pods, tenants))) {
        gs_set_error(err, errlen, "claim %s/%s: its UID \"%s\" cannot name a CDI device", c->ns,
                 c->name, c->uid);
        return -1;
    }
    text = json_dumps(spec, JSON_INDENT(2));
    json_decref(spec);
    if (!text) {
        gs_set_error(err, errlen, "out of memory");
        return -1;
    }
    gs_set_error(tmp, sizeof(tmp), "%s.tmp", path);
    len = strlen(text);
    /* Runtimes read every *.json of the directory: the temporary name is not one. */
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644)) >= 0) {
        for (off = 0; off < len;) {
            ssize_t w = write(fd, text + off, len - off);

            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0)
                break;
            off += (size_t)w;
        }
        if (off == len && fsync(fd) == 0 && close(fd) == 0) {
            fd = -1;
            if (rename(tmp, path) == 0)
                r = 0;
        }
        if (fd >= 0)
            close(fd);
    }
    if (r < 0) {
        gs_set_error(err, errlen, "claim %s/%s: cannot write its CDI spec %s: %s", c->ns, c->name,
                 path, strerror(errno));
        unlink(tmp);
    }
    free(text);
    return r;
}

/* A regular file opened for reading, never waiting (a FIFO planted under its name); or NULL. */
static FILE *open_regular(const char *path)
{
    struct stat st;
    FILE *f;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW);

    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > (16 << 20) ||
        !(f = fdopen(fd, "r"))) {
        close(fd);
        return NULL;
    }
    return f;
}

/*
 * Whether NVIDIA's CDI spec names GPU uuid (nvidia.com/gpu=<UUID>) in one of the directories
 * nvidia-cdi-dirs lists: a spec of kind nvidia.com/gpu with a device of that name, JSON or
 * YAML as nvidia-ctk writes them (YAML read line by line: "kind:" and "- name:" entries).
 */
static int nvidia_cdi_has(const char *uuid)
{
    char dirs[sizeof(gd_opt.nvidia_cdi_dirs)], *save = NULL, *d;
    int found = 0;

    gs_set_error(dirs, sizeof(dirs), "%s", gd_opt.nvidia_cdi_dirs);
    for (d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        DIR *dir = opendir(d);
        struct dirent *e;

        if (!dir)
            continue;
        while (!found && (e = readdir(dir))) {
            char path[PATH_MAX], line[1024];
            size_t nl = strlen(e->d_name);
            int nvidia = 0, yaml;
            FILE *f;

            yaml = nl > 5 && (strcmp(e->d_name + nl - 5, ".yaml") == 0 ||
                              strcmp(e->d_name + nl - 4, ".yml") == 0);
            if (!yaml && !(nl > 5 && strcmp(e->d_name + nl - 5, ".json") == 0))
                continue;
            /* Ours (one per claim) are never NVIDIA's: not read. */
            if (strncmp(e->d_name, "gpuslice.io-", 12) == 0 ||
                (size_t)snprintf(path, sizeof(path), "%s/%s", d, e->d_name) >= sizeof(path) ||
                !(f = open_regular(path)))
                continue;
            if (!yaml) {
                json_t *j = json_loadf(f, 0, NULL), *dev;
                size_t i;

                if (j && strcmp(json_string_value(json_object_get(j, "kind")) ?: "",
                                "nvidia.com/gpu") == 0)
                    json_array_foreach(json_object_get(j, "devices"), i, dev)
                        if (strcasecmp(json_string_value(json_object_get(dev, "name")) ?: "",
                                       uuid) == 0)
                            found = 1;
                json_decref(j);
                fclose(f);
                continue;
            }
            while (!found && fgets(line, sizeof(line), f)) {
                char *p = line, *q;

                while (*p == ' ' || *p == '\t' || *p == '-')
                    p++;
                if ((q = strpbrk(p, "\r\n#")))
                    *q = '\0';
                for (q = p + strlen(p); q > p && (q[-1] == ' ' || q[-1] == '\t'); q--)
                    q[-1] = '\0';
                if (strncmp(p, "kind:", 5) == 0) {
                    for (q = p + 5; *q == ' ' || *q == '"' || *q == '\''; q++)
                        ;
                    nvidia = strncmp(q, "nvidia.com/gpu", 14) == 0 &&
                             (q[14] == '\0' || q[14] == '"' || q[14] == '\'');
                } else if (nvidia && strncmp(p, "name:", 5) == 0) {
                    for (q = p + 5; *q == ' ' || *q == '"' || *q == '\''; q++)
                        ;
                    if (strncasecmp(q, uuid, strlen(uuid)) == 0 &&
                        (q[strlen(uuid)] == '\0' || q[strlen(uuid)] == '"' ||
                         q[strlen(uuid)] == '\''))
                        found = 1;
                }
            }
            fclose(f);
        }
        closedir(dir);
    }
    return found;
}

/* ---- Prepare and Unprepare ---- */

/*
 * The longest UID a claim may have here: its tenant is "claim-<uid>", and a tenant's name has 63
 * bytes (the node segment's). A Kubernetes UID is a UUID, 36.
 */
#define UID_MAX (sizeof(((struct gpuslice_node_tenant *)0)->name) - 1 - (sizeof("claim-") - 1))

/* Whether uid can be a claim's UID here (a file name and a tenant name are made of it). */
static int uid_ok(const char *uid)
{
    size_t i, n = strlen(uid);

    if (n == 0 || n > UID_MAX)
        return 0;
    for (i = 0; i < n; i++)
        if (!((uid[i] >= 'a' && uid[i] <= 'z') || (uid[i] >= '0' && uid[i] <= '9') ||
              uid[i] == '-'))
            return 0;
    return 1;
}

/*
 * The answer for claim ref begun: its UID, which must be a Kubernetes UID before anything is
 * made of it (a file name, a tenant name). 0, or -1 with the answer's error set.
 */
static int answer_start(const struct gd_dra_ref *ref, struct gd_dra_answer *a)
{
    memset(a, 0, sizeof(*a));
    gs_set_error(a->uid, sizeof(a->uid), "%s", ref->uid);
    if (uid_ok(ref->uid))
        return 0;
    gs_set_error(a->error, sizeof(a->error),
                 "claim %s/%s: UID \"%s\" is not a Kubernetes UID (lower-case letters, digits "
                 "and '-', at most %zu)",
                 ref->ns, ref->name, ref->uid, UID_MAX);
    return -1;
}

/* Whether namespace ns is one of pod-latency-namespaces (a claim's author may set more there). */
static int ns_trusted(const char *ns)
{
    struct gd_pod_spec ps;
    char err[64];

    memset(&ps, 0, sizeof(ps));
    ps.priority = GPUSLICE_PRIORITY_LATENCY;
    return gd_pod_class_allowed(&ps, ns, gd_opt.pod_latency_namespaces, err, sizeof(err)) == 0;
}

/*
 * What a claim's author may not set in its own configuration: the latency class and a weight
 * are the node admin's to give (the API gives them to admins only), in a DeviceClass's
 * configuration or to the namespaces of pod-latency-namespaces. 0, or -1 with err.
 */
static int author_allowed(const struct gd_dra_claim *c, char *err, size_t errlen)
{
    const char *list = gd_opt.pod_latency_namespaces[0] ? gd_opt.pod_latency_namespaces : "none";

    if ((c->claim_set & GD_DRA_CLAIM_SET_PRIORITY) && c->priority == GPUSLICE_PRIORITY_LATENCY &&
        !ns_trusted(c->ns)) {
        gs_set_error(err, errlen,
                     "claim %s/%s: its configuration (opaque parameters of " GD_DRA_DRIVER
                     ") asks for priority latency, which claims of namespace %s may not have "
                     "(normal or background may; the node's admin gives latency in a "
                     "DeviceClass's configuration, or to the namespaces listed in gpusliced's "
                     "pod-latency-namespaces: %.300s)",
                     c->ns, c->name, c->ns, list);
        return -1;
    }
    if ((c->claim_set & GD_DRA_CLAIM_SET_WEIGHT) && !ns_trusted(c->ns)) {
        gs_set_error(err, errlen,
                     "claim %s/%s: its configuration (opaque parameters of " GD_DRA_DRIVER
                     ") sets weight %u, which claims of namespace %s may not set (leave it out; "
                     "the node's admin sets weights in a DeviceClass's configuration, or for "
                     "the namespaces listed in gpusliced's pod-latency-namespaces: %.300s)",
                     c->ns, c->name, c->weight, c->ns, list);
        return -1;
    }
    return 0;
}

/*
 * A pod takes its GPUs in one claim of this driver: a pod of c already served by another
 * prepared claim is refused here, naming both, rather than when its process asks to join.
 */
static int pods_free(const struct gd_dra_claim *c, char *err, size_t errlen)
{
    int i, k, p;

    for (i = 0; i < dra.n; i++) {
        const struct gd_dra_claim *o = dra.claim[i];

        if (strcmp(o->uid, c->uid) == 0)
            continue;
        for (k = 0; k < o->npod; k++)
            for (p = 0; p < c->npod; p++)
                if (strcmp(o->pod_uid[k], c->pod_uid[p]) == 0) {
                    gs_set_error(err, errlen,
                                 "claim %s/%s: pod %s already has claim %s/%s of " GD_DRA_DRIVER
                                 " prepared: a pod takes its GPUs in one claim (of one or "
                                 "more devices)",
                                 c->ns, c->name, c->pod_uid[p], o->ns, o->name);
                    return -1;
                }
    }
    return 0;
}

/* The request's name as the kubelet knows it: a subrequest's ("gpu/small") is its request's. */
static void add_request(struct gd_dra_dev_answer *d, const char *req)
{
    size_t n = strcspn(req, "/");
    int i;

    for (i = 0; i < d->nreq; i++)
        if (strlen(d->request[i]) == n && strncmp(d->request[i], req, n) == 0)
            return;
    if (d->nreq < 4 && n < sizeof(d->request[0])) {
        memcpy(d->request[d->nreq], req, n);
        d->request[d->nreq++][n] = '\0';
    }
}

/* The claim's tenant ended (under neither lock). */
static void tenant_end(const char *uid)
{
    struct gd_tenant *t;
    char name[64];

    tenant_name(uid, name, sizeof(name));
    pthread_mutex_lock(&gd.mu);
    if ((t = gd_tenant_find_managed(name)) && (t->policy.flags & GPUSLICE_NODE_POD))
        gd_tenant_end(t);
    pthread_mutex_unlock(&gd.mu);
}

static int tenant_exists(const char *uid)
{
    char name[64];
    int r;

    tenant_name(uid, name, sizeof(name));
    pthread_mutex_lock(&gd.mu);
    r = gd_tenant_find_managed(name) != NULL;
    pthread_mutex_unlock(&gd.mu);
    return r;
}

/*
 * Makes claim c prepared, all or nothing (under dra.mu): it fits beside the others, its tenant
 * and its CDI spec are made, the checkpoint says so, then the table does. On a failure what
 * this call made is undone (a claim prepared before keeps its tenant as it was). 0, or -1
 * with err.
 */
static int commit(const struct gd_dra_claim *c, const struct gd_dra_gpu *g, int ng, char *err,
                  size_t errlen)
{
    struct gd_dra_claim *slot, old;
    int at = find(c->uid), existed, r;
    char path[PATH_MAX];

    if (fits(c, g, ng, err, errlen) < 0 || pods_free(c, err, errlen) < 0)
        return -1;
    if (at < 0 && dra.n == MAX_PREPARED) {
        gs_set_error(err, errlen, "claim %s/%s: %d claims are prepared on this node, the most it "
                     "holds", c->ns, c->name, MAX_PREPARED);
        return -1;
    }
    if (at >= 0)
        old = *dra.claim[at];
    if (!(slot = at >= 0 ? dra.claim[at] : malloc(sizeof(*slot)))) {
        gs_set_error(err, errlen, "claim %s/%s: out of memory", c->ns, c->name);
        return -1;
    }
    existed = tenant_exists(c->uid);
    pthread_mutex_lock(&gd.mu);
    r = tenant_put(c, err, errlen);
    pthread_mutex_unlock(&gd.mu);
    if (r < 0 || cdi_write(c, err, errlen) < 0 || checkpoint_write(c, -1, err, errlen) < 0) {
        if (r < 0) {
            if (at < 0)
                free(slot);
            return -1;
        }
        if (at >= 0) {
            char e2[256];

            pthread_mutex_lock(&gd.mu);
            tenant_put(&old, e2, sizeof(e2));
            pthread_mutex_unlock(&gd.mu);
        } else {
            if (!existed)
                tenant_end(c->uid);
            if (cdi_path(c->uid, path, sizeof(path)) == 0)
                unlink(path);
            free(slot);
        }
        return -1;
    }
    pthread_mutex_lock(&dra.map_mu);
    *slot = *c;
    if (at < 0)
        dra.claim[dra.n++] = slot;
    dra.prepares++;
    pthread_mutex_unlock(&dra.map_mu);
    return 0;
}

/*
 * Reads and judges claim ref, then prepares it; into a. The API server is read without dra.mu
 * (a slow one delays this claim only); the commit holds it.
 */
static void prepare_one(const struct gd_dra_ref *ref, struct gd_dra_answer *a)
{
    struct gd_dra_gpu g[GD_MAX_DEVICES];
    struct gd_dra_claim c;
    char path[1024], err[1024] = "";
    json_t *obj = NULL;
    long code;
    int ng, i, r;

    if (answer_start(ref, a) < 0)
        goto out;
    gs_set_error(path, sizeof(path), "/apis/resource.k8s.io/v1/namespaces/%s/resourceclaims/%s",
                 ref->ns, ref->name);
    code = gd_kube_call("GET", path, NULL, &obj, 10, err, sizeof(err));
    if (code != 200) {
        gs_set_error(a->error, sizeof(a->error),
                     "claim %s/%s: cannot read it from the API server: %s", ref->ns, ref->name,
                     err);
        goto out;
    }
    ng = gpus_now(g);
    if (gd_dra_claim_read(obj, ref, dra.node, g, ng, &c, err, sizeof(err)) < 0 ||
        author_allowed(&c, err, sizeof(err)) < 0) {
        gs_set_error(a->error, sizeof(a->error), "%s", err);
        goto out;
    }
    for (i = 0; i < c.nhold; i++)
        if (!nvidia_cdi_has(c.hold[i].uuid)) {
            gs_set_error(a->error, sizeof(a->error),
                         "claim %s/%s: no CDI spec of NVIDIA's names GPU %s (nvidia.com/gpu=%s) "
                         "in %s: generate it on the node with `nvidia-ctk cdi generate "
                         "--device-name-strategy=uuid --output=/var/run/cdi/nvidia.yaml` (the "
                         "NVIDIA Container Toolkit), or set nvidia-cdi-dirs",
                         c.ns, c.name, c.hold[i].uuid, c.hold[i].uuid, gd_opt.nvidia_cdi_dirs);
            goto out;
        }
    err[0] = '\0';
    pthread_mutex_lock(&dra.mu);
    r = commit(&c, g, ng, err, sizeof(err));
    pthread_mutex_unlock(&dra.mu);
    if (r < 0) {
        gs_set_error(a->error, sizeof(a->error), "%s", err);
        goto out;
    }
    for (i = 0; i < c.nhold && i < GD_DRA_MAX_DEVS; i++) {
        struct gd_dra_dev_answer *d = &a->dev[a->ndev++];
        int k;

        for (k = 0; k < c.hold[i].nreq; k++)
            add_request(d, c.hold[i].request[k]);
        gs_set_error(d->pool, sizeof(d->pool), "%s", dra.node);
        gs_set_error(d->device, sizeof(d->device), "%s", c.hold[i].device);
        d->ncdi = 2;
        gd_dra_cdi_id(c.uid, d->cdi[0], sizeof(d->cdi[0]));
        gs_set_error(d->cdi[1], sizeof(d->cdi[1]), "nvidia.com/gpu=%s", c.hold[i].uuid);
    }
    gd_log("dra: claim %s/%s (%s) prepared: %d device(s)", c.ns, c.name, c.uid, c.nhold);
out:
    if (a->error[0]) {
        pthread_mutex_lock(&dra.map_mu);
        dra.refusals++;
        pthread_mutex_unlock(&dra.map_mu);
        a->ndev = 0;
        gd_log("dra: %s", a->error);
    }
    json_decref(obj);
}

/*
 * Ends claim ref's preparation (one not prepared: only what may be left of it goes); into a.
 * The checkpoint first: a claim the file still names would come back after a restart.
 */
static void unprepare_one(const struct gd_dra_ref *ref, struct gd_dra_answer *a)
{
    struct gd_dra_claim *c = NULL;
    char path[PATH_MAX], err[512];
    int at;

    if (answer_start(ref, a) < 0)
        return;
    pthread_mutex_lock(&dra.mu);
    if ((at = find(ref->uid)) >= 0 && checkpoint_write(NULL, at, err, sizeof(err)) < 0) {
        pthread_mutex_unlock(&dra.mu);
        gs_set_error(a->error, sizeof(a->error),
                     "claim %s/%s: still prepared (its tenant and CDI spec kept): %s", ref->ns,
                     ref->name, err);
        return;
    }
    if (at >= 0) {
        int i;

        pthread_mutex_lock(&dra.map_mu);
        c = dra.claim[at];
        dra.claim[at] = dra.claim[--dra.n];
        dra.unprepares++;
        for (i = dra.nshared - 1; i >= 0; i--)
            if (strcmp(dra.shared[i].claim, ref->uid) == 0)
                dra.shared[i] = dra.shared[--dra.nshared];
        pthread_mutex_unlock(&dra.map_mu);
    }
    tenant_end(ref->uid);
    if (cdi_path(ref->uid, path, sizeof(path)) == 0 && unlink(path) < 0 && errno != ENOENT)
        gs_set_error(a->error, sizeof(a->error),
                     "claim %s/%s: unprepared, but its CDI spec %s could not be removed: %s",
                     ref->ns, ref->name, path, strerror(errno));
    pthread_mutex_unlock(&dra.mu);
    if (c)
        gd_log("dra: claim %s/%s (%s) unprepared", ref->ns, ref->name, ref->uid);
    free(c);
}

typedef void (*one_fn)(const struct gd_dra_ref *, struct gd_dra_answer *);

static int serve(const uint8_t *req, size_t len, uint8_t **resp, size_t *resplen, char *msg,
                 size_t msglen, one_fn one,
                 int (*encode)(const struct gd_dra_answer *, int, uint8_t **, size_t *))
{
    struct gd_dra_ref ref[GD_DRA_MAX_CLAIMS];
    struct gd_dra_answer *a;
    int n, i;

    if (gd_dra_decode_claims(req, len, ref, GD_DRA_MAX_CLAIMS, &n, msg, msglen) < 0)
        return GD_GRPC_INVALID_ARGUMENT;
    if (!(a = calloc((size_t)(n ? n : 1), sizeof(*a)))) {
        gs_set_error(msg, msglen, "out of memory");
        return GD_GRPC_RESOURCE_EXHAUSTED;
    }
    for (i = 0; i < n; i++)
        one(&ref[i], &a[i]);
    i = encode(a, n, resp, resplen);
    free(a);
    if (i < 0) {
        gs_set_error(msg, msglen, "out of memory");
        return GD_GRPC_RESOURCE_EXHAUSTED;
    }
    return GD_GRPC_OK;
}

static int on_prepare(void *ctx, const uint8_t *req, size_t len, uint8_t **resp, size_t *resplen,
                      char *msg, size_t msglen)
{
    (void)ctx;
    return serve(req, len, resp, resplen, msg, msglen, prepare_one, gd_dra_encode_prepare);
}

static int on_unprepare(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
                        size_t *resplen, char *msg, size_t msglen)
{
    (void)ctx;
    return serve(req, len, resp, resplen, msg, msglen, unprepare_one, gd_dra_encode_unprepare);
}

/* ---- registration ---- */

static const char *const versions[] = { GD_DRA_SERVICE_V1, GD_DRA_SERVICE_V1BETA1 };

static int on_get_info(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
                       size_t *resplen, char *msg, size_t msglen)
{
    (void)ctx, (void)req, (void)len;
    if (gd_dra_encode_plugin_info(GD_DRA_DRIVER, dra.dra_sock, versions, 2, resp, resplen) < 0) {
        gs_set_error(msg, msglen, "out of memory");
        return GD_GRPC_RESOURCE_EXHAUSTED;
    }
    return GD_GRPC_OK;
}

static int on_reg_status(void *ctx, const uint8_t *req, size_t len, uint8_t **resp,
                         size_t *resplen, char *msg, size_t msglen)
{
    int ok = 0;
    char why[512];

    (void)ctx;
    if (gd_dra_decode_reg_status(req, len, &ok, why, sizeof(why)) < 0) {
        gs_set_error(msg, msglen, "RegistrationStatus: not a message this driver can read");
        return GD_GRPC_INVALID_ARGUMENT;
    }
    pthread_mutex_lock(&dra.map_mu);
    dra.registered = ok;
    gs_set_error(dra.reg_error, sizeof(dra.reg_error), "%s", ok ? "" : why);
    pthread_mutex_unlock(&dra.map_mu);
    if (ok)
        gd_log("dra: registered with the kubelet");
    else
        gd_log("dra: the kubelet refused the registration: %s", why);
    *resp = NULL;
    *resplen = 0;
    return GD_GRPC_OK;
}

/* ---- what pods.c and the API ask ---- */

/* Whether pod joined claim claim_uid by naming it (under map_mu). */
static int shared_by(const char *pod, const char *claim_uid)
{
    int i;

    for (i = 0; i < dra.nshared; i++)
        if (strcmp(dra.shared[i].pod, pod) == 0 && strcmp(dra.shared[i].claim, claim_uid) == 0)
            return 1;
    return 0;
}

int gd_dra_tenant_of_pod(const char *pod_uid, char *name, size_t namelen, char *why,
                         size_t whylen)
{
    int i, k, found = 0;

    pthread_mutex_lock(&dra.map_mu);
    for (i = 0; i < dra.n; i++)
        for (k = 0; k <= dra.claim[i]->npod; k++)
            if (k < dra.claim[i]->npod ? strcmp(dra.claim[i]->pod_uid[k], pod_uid) == 0
                                       : shared_by(pod_uid, dra.claim[i]->uid)) {
                if (found++ == 0)
                    tenant_name(dra.claim[i]->uid, name, namelen);
                else
                    gs_set_error(why, whylen,
                             "pod %s has more than one claim of " GD_DRA_DRIVER " prepared: a "
                             "pod takes its GPUs in one claim (of one or more devices)",
                             pod_uid);
            }
    pthread_mutex_unlock(&dra.map_mu);
    return found > 1 ? -1 : found;
}

int gd_dra_tenant_of_claims(const char *pod_uid, const char *ns,
                            const char (*names)[GD_CLAIM_NAME_LEN], int n,
                            char *name, size_t namelen, char *why, size_t whylen)
{
    struct gd_dra_claim *hit = NULL;
    int i, k, found = 0;

    pthread_mutex_lock(&dra.map_mu);
    for (i = 0; i < dra.n; i++)
        for (k = 0; k < n; k++)
            if (strcmp(dra.claim[i]->ns, ns) == 0 && strcmp(dra.claim[i]->name, names[k]) == 0) {
                if (found++ == 0)
                    hit = dra.claim[i];
                else
                    gs_set_error(why, whylen,
                                 "pod %s names more than one claim of " GD_DRA_DRIVER
                                 " prepared: a pod takes its GPUs in one claim (of one or more "
                                 "devices)",
                                 pod_uid);
            }
    if (found == 1) {
        tenant_name(hit->uid, name, namelen);
        /* Known from now on (the guard's attribution too); not kept across a restart. */
        for (i = 0; i < dra.nshared && strcmp(dra.shared[i].pod, pod_uid) != 0; i++)
            ;
        if (i == dra.nshared && dra.nshared < MAX_PREPARED)
            dra.nshared++;
        if (i < MAX_PREPARED) {
            gs_set_error(dra.shared[i].pod, sizeof(dra.shared[i].pod), "%s", pod_uid);
            gs_set_error(dra.shared[i].claim, sizeof(dra.shared[i].claim), "%s", hit->uid);
        }
    }
    pthread_mutex_unlock(&dra.map_mu);
    return found > 1 ? -1 : found;
}

int gd_dra_is_claim_tenant(const char *name)
{
    return strncmp(name, "claim-", 6) == 0;
}

void gd_dra_metrics(FILE *f)
{
    static const char *const h[][3] = {
        { "gpuslice_dra_registered", "gauge",
          "1 when the kubelet has registered the DRA driver gpu.gpuslice.io." },
        { "gpuslice_dra_prepared_claims", "gauge", "Claims prepared on this node now." },
        { "gpuslice_dra_prepares_total", "counter", "Claims prepared (NodePrepareResources)." },
        { "gpuslice_dra_unprepares_total", "counter",
          "Claims unprepared (NodeUnprepareResources)." },
        { "gpuslice_dra_refusals_total", "counter",
          "Claims Prepare refused (each with its reason in the kubelet's event)." },
        { "gpuslice_dra_slice_generation", "gauge",
          "The generation of the node's ResourceSlice as last published." },
    };
    long long v[6];
    int i;

    if (!dra.running)
        return;
    pthread_mutex_lock(&dra.map_mu);
    v[0] = dra.registered;
    v[1] = dra.n;
    v[2] = (long long)dra.prepares;
    v[3] = (long long)dra.unprepares;
    v[4] = (long long)dra.refusals;
    v[5] = (long long)dra.generation;
    pthread_mutex_unlock(&dra.map_mu);
    for (i = 0; i < 6; i++)
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n%s %lld\n", h[i][0], h[i][2], h[i][0], h[i][1],
                h[i][0], v[i]);
}

/* ---- start and stop ---- */

/*
 * A checkpoint that cannot be read is moved aside (PATH.bad-TIME), said in the log, and the
 * driver starts without its claims rather than take the node's enforcement down with it: the
 * kubelet prepares them again when their pods are next started. 0, or -1 where it cannot be
 * moved.
 */
static int aside(const char *path, const char *why, char *err, size_t errlen)
{
    char to[PATH_MAX + 32];

    gs_set_error(to, sizeof(to), "%s.bad-%lld", path, (long long)time(NULL));
    if (rename(path, to) < 0) {
        gs_set_error(err, errlen, "dra: %s: %s, and it cannot be moved aside: %s", path, why,
                     strerror(errno));
        return -1;
    }
    gd_log("dra: %s: %s: moved to %s; starting without the claims it held (their pods' processes "
           "cannot join until the kubelet prepares them again)", path, why, to);
    return 0;
}

/* The checkpoint read back, and each claim's tenant made again; 0 or -1 with err. */
static int restore(char *err, size_t errlen)
{
    char path[PATH_MAX], why[1024];
    struct gd_dra_claim *all;
    json_error_t je;
    json_t *j;
    int n = 0, i;

    gs_set_error(path, sizeof(path), "%s/" CHECKPOINT, gd_opt.state_dir);
    if (access(path, F_OK) != 0)
        return 0;
    if (!(j = json_load_file(path, 0, &je))) {
        gs_set_error(why, sizeof(why), "not JSON (line %d: %s)", je.line, je.text);
        return aside(path, why, err, errlen);
    }
    if (!(all = calloc(MAX_PREPARED, sizeof(*all)))) {
        json_decref(j);
        gs_set_error(err, errlen, "out of memory");
        return -1;
    }
    if (gd_dra_checkpoint_read(j, all, MAX_PREPARED, &n, why, sizeof(why)) < 0) {
        json_decref(j);
        free(all);
        return aside(path, why, err, errlen);
    }
    json_decref(j);
    for (i = 0; i < n; i++) {
        struct gd_dra_claim *c = malloc(sizeof(*c));

        if (!c)
            break;
        *c = all[i];
        pthread_mutex_lock(&dra.map_mu);
        dra.claim[dra.n++] = c;
        pthread_mutex_unlock(&dra.map_mu);
        pthread_mutex_lock(&gd.mu);
        if (tenant_put(c, why, sizeof(why)) < 0)
            gd_log("dra: claim %s/%s from the checkpoint: %s", c->ns, c->name, why);
        pthread_mutex_unlock(&gd.mu);
    }
    free(all);
    gd_log("dra: %d prepared claim(s) from %s", dra.n, path);
    return 0;
}

int gd_dra_start(char *err, size_t errlen)
{
    static const struct gd_grpc_method reg[] = {
        { GD_DRA_REG_PATH "GetInfo", on_get_info, NULL },
        { GD_DRA_REG_PATH "NotifyRegistrationStatus", on_reg_status, NULL },
    };
    static const struct gd_grpc_method svc[] = {
        { GD_DRA_PATH_V1 "NodePrepareResources", on_prepare, NULL },
        { GD_DRA_PATH_V1 "NodeUnprepareResources", on_unprepare, NULL },
        { GD_DRA_PATH_V1BETA1 "NodePrepareResources", on_prepare, NULL },
        { GD_DRA_PATH_V1BETA1 "NodeUnprepareResources", on_unprepare, NULL },
    };

    if (!gd_opt.dra)
        return 0;
    if (!gd_kube_enabled()) {
        gs_set_error(err, errlen, "dra: the DRA driver needs the Kubernetes API server (kube-api)");
        return -1;
    }
    gs_set_error(dra.node, sizeof(dra.node), "%s", gd_kube_node());
    if ((size_t)snprintf(dra.dra_sock, sizeof(dra.dra_sock), "%s/" DRA_SOCKET,
                         gd_opt.kubelet_plugin_dir) >= sizeof(dra.dra_sock) ||
        (size_t)snprintf(dra.reg_sock, sizeof(dra.reg_sock), "%s/" REG_SOCKET,
                         gd_opt.kubelet_registry_dir) >= sizeof(dra.reg_sock)) {
        gs_set_error(err, errlen, "dra: kubelet-plugin-dir or kubelet-registry-dir is too long");
        return -1;
    }
    if (gd_own_dir(gd_opt.kubelet_plugin_dir, 0750, err, errlen) < 0)
        return -1;
    if (mkdir(gd_opt.cdi_dir, 0755) < 0 && errno != EEXIST) {
        gs_set_error(err, errlen, "dra: cdi-dir %s: %s", gd_opt.cdi_dir, strerror(errno));
        return -1;
    }
    if (access(gd_opt.cdi_dir, W_OK) != 0) {
        gs_set_error(err, errlen, "dra: cdi-dir %s is not writable: %s", gd_opt.cdi_dir,
                 strerror(errno));
        return -1;
    }
    if (access(gd_opt.kubelet_registry_dir, W_OK) != 0) {
        gs_set_error(err, errlen, "dra: kubelet-registry-dir %s: %s (the kubelet's "
                 "plugins_registry, mounted from the node)", gd_opt.kubelet_registry_dir,
                 strerror(errno));
        return -1;
    }
    if (restore(err, errlen) < 0)
        return -1;
    dra.stop = 0;
    if (pthread_create(&dra.th, NULL, publisher, NULL) != 0) {
        gs_set_error(err, errlen, "dra: cannot start the publisher: %s", strerror(errno));
        return -1;
    }
    dra.running = 1;
    /* The driver's socket first: the kubelet calls the endpoint GetInfo names at once. */
    if (!(dra.dra_srv = gd_grpc_start(dra.dra_sock, 0600, svc, 4, err, errlen)) ||
        !(dra.reg_srv = gd_grpc_start(dra.reg_sock, 0600, reg, 2, err, errlen))) {
        gd_dra_stop_keep();
        return -1;
    }
    gd_log("dra: driver " GD_DRA_DRIVER " on %s, registered through %s", dra.dra_sock,
           dra.reg_sock);
    return 0;
}

static void stop_all(int unpub)
{
    char err[512];
    int i;

    if (!dra.running)
        return;
    /* The registration first: the kubelet then stops calling, before the driver goes. */
    gd_grpc_stop(dra.reg_srv);
    dra.reg_srv = NULL;
    gd_grpc_stop(dra.dra_srv);
    dra.dra_srv = NULL;
    pthread_mutex_lock(&dra.stop_mu);
    dra.stop = 1;
    pthread_cond_broadcast(&dra.stop_cv);
    pthread_mutex_unlock(&dra.stop_mu);
    pthread_join(dra.th, NULL);
    if (unpub && unpublish(err, sizeof(err)) < 0)
        gd_log("dra: the node's ResourceSlice could not be removed: %s", err);
    pthread_mutex_lock(&dra.map_mu);
    for (i = 0; i < dra.n; i++)
        free(dra.claim[i]);
    dra.n = 0;
    dra.nshared = 0;
    pthread_mutex_unlock(&dra.map_mu);
    dra.published[0] = '\0';
    dra.running = 0;
}

void gd_dra_stop_keep(void)
{
    stop_all(0);
}

void gd_dra_stop(void)
{
    stop_all(1);
}
