/*
 * The tenants: the daemon's own (managed: their limits in the node segment,
 * their state files in RUN_DIR/tenants, their definitions kept in
 * STATE_DIR/tenants.json so a reboot keeps them) and those of gpuslice run
 * (their files in the run directory gpuslice uses). A sweep re-reads them
 * all into a fresh list, outside the lock, then swaps it in and records what
 * changed as events. State files are read by copy (pread), never mapped:
 * their owners may truncate them under us. What the daemon writes to one
 * (the mirror of its limits, for tools that read the file) is written with
 * pwrite for the same reason.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/error.h"
#include "common/node.h"
#include "common/proc.h"
#include "common/tenant.h"
#include "common/text.h"
#include "control/tenants.h"
#include "daemon/daemon.h"
#include "daemon/guard/guard.h"

#define MAX_TENANTS (GD_MAX_RUN_TENANTS + GPUSLICE_NODE_MAX_TENANTS)

static struct gd_tenant lists[2][MAX_TENANTS];
static int cur;                                              /* gd.tenant == lists[cur] */
static pthread_mutex_t sweep_mu = PTHREAD_MUTEX_INITIALIZER; /* one sweep at a time */

static void uuid_str(const uint8_t raw[16], char out[GS_UUID_STRLEN])
{
    tenant_list_uuid(raw, out);
}

/* ---- the definitions file: STATE_DIR/tenants.json, replaced atomically ---- */

static json_t *limits_json(const struct gpuslice_node_tenant *p, int mem)
{
    json_t *o = json_object();
    int d;

    if (mem ? p->mem_default : p->compute_default)
        json_object_set_new(
            o, "default",
            json_integer(mem ? (json_int_t)p->mem_default : (json_int_t)p->compute_default));
    for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++) {
        char u[GS_UUID_STRLEN];
        static const uint8_t zero[16];

        if (memcmp(p->dev[d].uuid, zero, 16) == 0)
            continue;
        if (gs_node_key_index(p->dev[d].uuid) >= 0)
            snprintf(u, sizeof(u), "cuda:%d", gs_node_key_index(p->dev[d].uuid));
        else
            uuid_str(p->dev[d].uuid, u);
        json_object_set_new(o, u,
                            json_integer(mem ? (json_int_t)p->dev[d].mem_limit
                                             : (json_int_t)p->dev[d].compute_limit));
    }
    return o;
}

/*
 * Writes text to path durably: a temporary file beside it, written whole and synced, renamed
 * over path, then the directory synced, so that after a crash or a power cut path holds either
 * the old text or the new, whole. 0, or a negative errno with the step that failed in *step.
 */
static int write_durably(const char *path, const char *text, size_t len, const char **step)
{
    char tmp[PATH_MAX + 64], dir[PATH_MAX + 32], *slash;
    size_t done = 0;
    int fd, r;

    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    *step = "creating its temporary file";
    if ((fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600)) < 0)
        return -errno;
    *step = "writing it";
    while (done < len) {
        ssize_t w = write(fd, text + done, len - done);

        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            r = w < 0 ? -errno : -ENOSPC;
            goto fail;
        }
        done += (size_t)w;
    }
    /* A full disk or an I/O error may only show here (delayed allocation, NFS). */
    *step = "syncing it";
    if (fsync(fd) < 0) {
        r = -errno;
        goto fail;
    }
    *step = "closing it";
    r = close(fd) < 0 && errno != EINTR ? -errno : 0; /* closed either way */
    fd = -1;
    if (r < 0)
        goto fail;
    *step = "renaming it into place";
    if (rename(tmp, path) < 0) {
        r = -errno;
        goto fail;
    }
    /* The rename itself is durable once the directory is. */
    *step = "syncing its directory";
    snprintf(dir, sizeof(dir), "%s", path);
    if ((slash = strrchr(dir, '/')) != NULL)
        *(slash == dir ? slash + 1 : slash) = '\0';
    if ((fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        return -errno;
    r = fsync(fd) < 0 && errno != EINVAL ? -errno : 0; /* EINVAL: it cannot be synced */
    close(fd);
    return r;
fail:
    if (fd >= 0)
        close(fd);
    unlink(tmp);
    return r;
}

static int restoring; /* restore_definitions runs: it writes the file once, at its end */

/*
 * Writes every managed tenant's definition durably, as it is in the node segment except entry
 * slot, which is as *with says (slot -1: none): a change is written before it is made, and made
 * only once it is durable. Under gd.mu. 0, or GD_ESTATE_FULL / GD_ESTATE_IO with the message in
 * err (and in gd.state_error, which makes the daemon not ready until a write succeeds).
 */
static int save_definitions(int slot, const struct gpuslice_node_tenant *with, char *err,
                            size_t errlen)
{
    char path[PATH_MAX + 32], *text;
    json_t *arr;
    const char *step = "building it";
    int i, r;

    if (restoring)
        return 0;
    snprintf(path, sizeof(path), "%s/tenants.json", gd_opt.state_dir);
    arr = json_array();
    for (i = 0; arr && i < GPUSLICE_NODE_MAX_TENANTS; i++) {
        struct gpuslice_node_tenant p;

        if (i == slot)
            p = *with;
        else
            gs_node_read_tenant(gd.node, i, &p);
        if (p.id == 0)
            continue;
        json_array_append_new(
            arr,
            json_pack("{s:i, s:s, s:i, s:I, s:o, s:o, s:i, s:i, s:b, s:b}", "id", (json_int_t)p.id,
                      "name", p.name, "owner", (json_int_t)p.owner_uid, "created_unix_ns",
                      (json_int_t)p.created_unix_ns, "memory", limits_json(&p, 1), "compute",
                      limits_json(&p, 0), "priority", (json_int_t)p.priority, "weight",
                      (json_int_t)p.weight, "pod", (p.flags & GPUSLICE_NODE_POD) != 0, "refused",
                      (p.flags & GPUSLICE_NODE_REFUSED) != 0));
    }
    text = arr ? json_dumps(arr, JSON_INDENT(2)) : NULL;
    json_decref(arr);
    r = text ? write_durably(path, text, strlen(text), &step) : -ENOMEM;
    free(text);
    if (r == 0) {
        if (gd.state_error[0])
            gd_log("the state %s is written again: ready", path);
        gd.state_error[0] = '\0';
        return 0;
    }
    if (gd.state_error[0] == '\0')
        gd_log("cannot write the state %s (%s: %s): not ready until it can be written", path, step,
               strerror(-r));
    snprintf(gd.state_error, sizeof(gd.state_error),
             "cannot write the daemon's state %.360s (%s: %s)", path, step,
             r == -ENOSPC || r == -EDQUOT ? "no space left on its filesystem" : strerror(-r));
    gs_set_error(err, errlen, "%s; nothing was changed", gd.state_error);
    return r == -ENOSPC || r == -EDQUOT ? GD_ESTATE_FULL : GD_ESTATE_IO;
}

/* After a change made whatever the disk says (a pod's: its pod object is its record). */
static void save_anyway(void)
{
    (void)save_definitions(-1, NULL, NULL, 0);
}

/*
 * While the state cannot be written, once a second (from the sweep; under gd.mu): the daemon
 * is ready again as soon as it can, with the definitions as they are now.
 */
static void retry_state(void)
{
    static uint64_t next_ns;
    uint64_t now = gd_mono_ns();

    if (gd.state_error[0] == '\0' || now < next_ns)
        return;
    next_ns = now + 1000000000ULL;
    save_anyway();
}

/* ---- the state file's mirror of a managed tenant's limits ---- */

static void pwrite_word(int fd, const void *p, size_t len, size_t off)
{
    if (pwrite(fd, p, len, (off_t)off) != (ssize_t)len)
        gd_log("warning: cannot update a managed tenant's state file: %s", strerror(errno));
}

/*
 * A managed tenant's processes in PID namespaces of their own (a pod's): the host PID of each
 * not known yet, or not its own (the word is the tenant's to write), found in /proc from its
 * namespace, inner PID and start time, is written in its slot's host_pid in the file, where
 * the process reads it (NVML names it by it: src/preload/compute/duty.c), and in the sweep's
 * copy. Written with pwrite, as the file's other words (a mapping of a file its processes may
 * cut short would die of SIGBUS), and only to a slot that still holds that process and the
 * host_pid it had when looked for: one freed and taken again meanwhile is left alone (and a
 * PID written there all the same is looked for again at the next sweep, as it names another
 * process). A process not found is left at what it had: a /proc read that failed once is no
 * verdict. The daemon's own judgements never rest on the word: a host PID read there is
 * checked against /proc (gs_proc_is).
 */
static void note_hosts(struct gd_tenant *t)
{
    struct gs_proc_want *v;
    int *slot, i, n, fd = -1;
    int32_t *had;

    n = gs_tenant_hosts_wanted(t->t, &v, &slot, &had);
    for (i = 0; i < n; i++) {
        size_t po = offsetof(struct gpuslice_tenant, proc) +
                    (size_t)slot[i] * sizeof(struct gpuslice_tenant_proc),
               ho = offsetof(struct gpuslice_tenant, host_pid) + (size_t)slot[i] * sizeof(int32_t);
        struct gpuslice_tenant_proc now;
        int32_t host = v[i].found, was;

        if (host <= 0)
            continue; /* not found, or not told: looked for again at the next sweep */
        if (fd < 0 && (fd = open(t->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
            break;
        if (pread(fd, &now, sizeof(now), (off_t)po) != (ssize_t)sizeof(now) ||
            pread(fd, &was, sizeof(was), (off_t)ho) != (ssize_t)sizeof(was) ||
            now.pid != v[i].inner || now.pid_ns != v[i].ns || now.start_time != v[i].start ||
            was != had[i])
            continue;
        pwrite_word(fd, &host, sizeof(host), ho);
        t->t->host_pid[slot[i]] = host;
    }
    if (fd >= 0)
        close(fd);
    free(v);
    free(slot);
    free(had);
}

/*
 * Writes the policy's limits into the state file's device entries, for tools that read the
 * file (what is enforced is read from the node segment).
 */
static void mirror_limits(const char *path, const struct gpuslice_node_tenant *p)
{
    struct gpuslice_tenant_device dev[GPUSLICE_MAX_DEVICES];
    uint32_t any = 0;
    int fd, e;

    if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return;
    if (pread(fd, dev, sizeof(dev), offsetof(struct gpuslice_tenant, dev)) !=
        (ssize_t)sizeof(dev)) {
        close(fd);
        return;
    }
    for (e = 0; e < GPUSLICE_MAX_DEVICES; e++) {
        static const uint8_t zero[16];
        uint64_t mem = p->mem_default;
        uint32_t comp = p->compute_default;
        int d;

        if (memcmp(dev[e].uuid, zero, 16) == 0)
            continue;
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
            if (memcmp(p->dev[d].uuid, dev[e].uuid, 16) == 0) {
                mem = p->dev[d].mem_limit;
                comp = p->dev[d].compute_limit;
            }
        pwrite_word(fd, &mem, sizeof(mem),
                    offsetof(struct gpuslice_tenant, dev) + e * sizeof(dev[0]) +
                        offsetof(struct gpuslice_tenant_device, mem_limit));
        pwrite_word(fd, &comp, sizeof(comp),
                    offsetof(struct gpuslice_tenant, dev) + e * sizeof(dev[0]) +
                        offsetof(struct gpuslice_tenant_device, compute_limit));
    }
    any = (p->flags & GPUSLICE_NODE_COMPUTE_ANY) ? 1 : 0;
    pwrite_word(fd, &any, sizeof(any), offsetof(struct gpuslice_tenant, compute_any));
    pwrite_word(fd, &p->priority, sizeof(p->priority), offsetof(struct gpuslice_tenant, priority));
    pwrite_word(fd, &p->weight, sizeof(p->weight), offsetof(struct gpuslice_tenant, weight));
    close(fd);
}

static uint32_t lineage_of(pid_t pid);
static void prune_members(void);

/* ---- the node segment's entries ---- */

static void policy_flags(struct gpuslice_node_tenant *p)
{
    int d;

    p->flags &= ~GPUSLICE_NODE_COMPUTE_ANY;
    /* A class or a weight governs launches as a ceiling does. */
    if (p->compute_default || p->priority || p->weight)
        p->flags |= GPUSLICE_NODE_COMPUTE_ANY;
    for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
        if (p->dev[d].compute_limit)
            p->flags |= GPUSLICE_NODE_COMPUTE_ANY;
}

/* Writes p into node entry i whole, under its sequence word. */
static void write_entry(int i, const struct gpuslice_node_tenant *p)
{
    gs_node_write_tenant(gd.node, i, p);
}

/*
 * A managed tenant's state file is its owner's alone (0600: its name, limits, usage and
 * processes are not other users' to read), except where a class is given (normal or
 * latency): then other users' tenants of lower classes must read its class's activity
 * stamps from it (pread, never a mapping), and it is 0644.
 */
static mode_t file_mode(const struct gpuslice_node_tenant *p)
{
    return p->priority == GPUSLICE_PRIORITY_NORMAL || p->priority == GPUSLICE_PRIORITY_LATENCY
               ? 0644
               : 0600;
}

/* Brings t's file's mode to what policy p asks (its class may have changed). */
static void set_file_mode(const char *path, const struct gpuslice_node_tenant *p)
{
    if (chmod(path, file_mode(p)) < 0 && errno != ENOENT)
        gd_log("cannot set the mode of %s: %s", path, strerror(errno));
}

static void state_path(const struct gpuslice_node_tenant *p, char *out, size_t len)
{
    if ((size_t)snprintf(out, len, "%s/%s", gd.tenant_dir, p->state_file) >= len)
        out[0] = '\0';
}

/* The 16 raw bytes of entry e's device: its UUID, or a pod's index key. 0, or -EINVAL. */
static int entry_raw(const struct gs_limit_entry *e, uint8_t raw[16], char *err, size_t errlen)
{
    int d;

    if (e->key == GS_KEY_INDEX) {
        /* A pod's: its processes' own CUDA index (api.c resolves the API's to UUIDs). */
        if (e->index < 0 || e->index > GPUSLICE_NODE_INDEX_MAX)
            return gs_set_error(err, errlen, "device index %d: at most %d", e->index,
                                GPUSLICE_NODE_INDEX_MAX),
                   -EINVAL;
        gs_node_index_key(raw, e->index);
        return 0;
    }
    for (d = 0; d < 16; d++) {
        unsigned b;
        if (sscanf(e->uuid + 4 + (d * 2) + (d >= 4) + (d >= 6) + (d >= 8) + (d >= 10), "%2x", &b) !=
            1)
            return gs_set_error(err, errlen, "bad UUID %s", e->uuid), -EINVAL;
        raw[d] = (uint8_t)b;
    }
    return 0;
}

static void set_kind(struct gpuslice_node_limit *d, int mem, uint64_t v)
{
    if (mem)
        d->mem_limit = v;
    else
        d->compute_limit = v >= 100 ? 0 : (uint32_t)v;
}

/* The entry of p's that holds the GPU raw; GPUSLICE_NODE_MAX_DEVICES where none does. */
static int dev_slot(const struct gpuslice_node_tenant *p, const uint8_t raw[16])
{
    int d;

    for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
        if (memcmp(p->dev[d].uuid, raw, 16) == 0)
            break;
    return d;
}

/*
 * Applies limits l on top of p. A value for every GPU (a bare value, or "default") sets the
 * default and every GPU's entry that l does not name itself, so that after a change each GPU
 * has exactly what the change says (as `gpuslice set` does to a gpuslice run's tenant); a
 * key sets its own GPU's entry. Two keys for one GPU are refused (-EINVAL): which one wins
 * would depend on their order.
 */
static int apply_limits(struct gpuslice_node_tenant *p, const struct gs_limits *l, int mem,
                        char *err, size_t errlen)
{
    static const uint8_t zero[16];
    uint8_t raw[GS_MAX_LIMIT_ENTRIES][16];
    int named[GPUSLICE_NODE_MAX_DEVICES] = { 0 };
    int k, j, d, r;

    for (k = 0; k < l->n; k++) {
        if (l->e[k].key == GS_KEY_ALL) {
            for (j = 0; j < k; j++)
                if (l->e[j].key == GS_KEY_ALL)
                    return gs_set_error(err, errlen, "%s: the value for every GPU is given twice",
                                        mem ? "memory" : "compute"),
                           -EINVAL;
            continue;
        }
        if ((r = entry_raw(&l->e[k], raw[k], err, errlen)) < 0)
            return r;
        for (j = 0; j < k; j++)
            if (l->e[j].key != GS_KEY_ALL && memcmp(raw[j], raw[k], 16) == 0)
                return gs_set_error(err, errlen, "%s: one GPU is given twice (%s)",
                                    mem ? "memory" : "compute",
                                    l->e[k].key == GS_KEY_INDEX ? "an index" : l->e[k].uuid),
                       -EINVAL;
    }
    /* Room for every new entry first: a refused change changes nothing. */
    {
        int need = 0, have = 0;

        for (k = 0; k < l->n; k++) {
            if (l->e[k].key == GS_KEY_ALL)
                continue;
            need += dev_slot(p, raw[k]) == GPUSLICE_NODE_MAX_DEVICES;
        }
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
            have += memcmp(p->dev[d].uuid, zero, 16) == 0;
        if (need > have)
            return gs_set_error(err, errlen, "more than %d devices", GPUSLICE_NODE_MAX_DEVICES),
                   -ENOSPC;
    }
    for (k = 0; k < l->n; k++) {
        if (l->e[k].key == GS_KEY_ALL)
            continue;
        if ((d = dev_slot(p, raw[k])) == GPUSLICE_NODE_MAX_DEVICES) {
            for (d = 0; memcmp(p->dev[d].uuid, zero, 16) != 0; d++)
                ;
            memcpy(p->dev[d].uuid, raw[k], 16);
            p->dev[d].mem_limit = p->mem_default;
            p->dev[d].compute_limit = p->compute_default;
        }
        set_kind(&p->dev[d], mem, l->e[k].value);
        named[d] = 1;
    }
    for (k = 0; k < l->n; k++) {
        if (l->e[k].key != GS_KEY_ALL)
            continue;
        if (mem)
            p->mem_default = l->e[k].value;
        else
            p->compute_default = l->e[k].value >= 100 ? 0 : (uint32_t)l->e[k].value;
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
            if (!named[d] && memcmp(p->dev[d].uuid, zero, 16) != 0)
                set_kind(&p->dev[d], mem, l->e[k].value);
    }
    policy_flags(p);
    return 0;
}

/* A class and a weight given in l replace p's. */
static void apply_sched(struct gpuslice_node_tenant *p, const struct gd_limits_req *l)
{
    if (l->priority)
        p->priority = l->priority;
    if (l->weight)
        p->weight = l->weight;
    policy_flags(p);
}

int gd_tenant_create(const char *name, uid_t owner, const struct gd_limits_req *l,
                     struct gd_tenant **out, char *err, size_t errlen)
{
    struct gpuslice_node_tenant p;
    struct gpuslice_tenant *t;
    char path[PATH_MAX];
    const char *base;
    int i, slot = -1, r, free_n;

    if (gs_node_find_name(gd.node, name) >= 0) {
        gs_set_error(err, errlen, "a tenant named \"%s\" exists", name);
        return -EEXIST;
    }
    for (i = 0, free_n = 0; i < GPUSLICE_NODE_MAX_TENANTS; i++)
        if (__atomic_load_n(&gd.node->tenant[i].id, __ATOMIC_RELAXED) == 0) {
            if (slot < 0)
                slot = i;
            free_n++;
        }
    if (slot < 0 || gd.ntenant >= MAX_TENANTS) {
        gs_set_error(err, errlen, "the daemon holds %d tenants, its most",
                     GPUSLICE_NODE_MAX_TENANTS);
        return -ENOSPC;
    }
    /* The last pod-reserve entries are the pods': a GPU pod must never find the table full. */
    if (!(l->pod_flags & GPUSLICE_NODE_POD) && free_n <= (int)gd_opt.pod_reserve) {
        gs_set_error(err, errlen,
                     "the daemon holds %d tenants; its last %ld places are kept for pods "
                     "(pod-reserve)",
                     GPUSLICE_NODE_MAX_TENANTS - free_n, gd_opt.pod_reserve);
        return -ENOSPC;
    }
    memset(&p, 0, sizeof(p));
    snprintf(p.name, sizeof(p.name), "%s", name);
    p.owner_uid = (uint32_t)owner;
    p.created_unix_ns = l->created_unix_ns ? l->created_unix_ns : gd_unix_ns();
    if ((l->has_mem && (r = apply_limits(&p, &l->mem, 1, err, errlen)) < 0) ||
        (l->has_comp && (r = apply_limits(&p, &l->comp, 0, err, errlen)) < 0))
        return r;
    apply_sched(&p, l);
    p.flags |= l->pod_flags & (GPUSLICE_NODE_POD | GPUSLICE_NODE_REFUSED);
    if ((r = gs_tenant_create(gd.tenant_dir, name, path, sizeof(path), &t)) < 0) {
        gs_set_error(err, errlen, "cannot create its state file %s: %s", path, gs_strerror(r));
        return r;
    }
    base = strrchr(path, '/') + 1;
    if (strlen(base) >= sizeof(p.state_file)) {
        gs_tenant_close(t);
        unlink(path);
        gs_set_error(err, errlen, "state file name too long");
        return -ENAMETOOLONG;
    }
    snprintf(p.state_file, sizeof(p.state_file), "%s", base);
    p.id = gd.node->next_id++;
    if (gd.node->next_id == 0)
        gd.node->next_id = 1;
    t->limits_fixed = 1;
    t->owner_uid = (uint32_t)owner;
    t->compute_any = (p.flags & GPUSLICE_NODE_COMPUTE_ANY) ? 1 : 0;
    t->priority = p.priority; /* mirrored for tools; the node segment's is enforced */
    t->weight = p.weight;
    __atomic_store_n(&t->node_tenant, p.id, __ATOMIC_RELEASE);
    gs_tenant_close(t);
    /* Its processes, the owner's, write their usage into it. */
    if (owner != geteuid() && chown(path, owner, (gid_t)-1) < 0) {
        r = -errno;
        unlink(path);
        gs_set_error(err, errlen, "cannot give its state file to uid %u: %s", (unsigned)owner,
                     strerror(errno));
        return r;
    }
    if (chmod(path, file_mode(&p)) < 0) {
        r = -errno;
        unlink(path);
        gs_set_error(err, errlen, "cannot make its state file readable: %s", strerror(errno));
        return r;
    }
    /* Its cgroup (tenant-cgroup), where its joining processes go; a pod has its own. */
    if (!(p.flags & GPUSLICE_NODE_POD) && (r = gd_contain_make(p.id, err, errlen)) < 0) {
        unlink(path);
        return r;
    }
    /*
     * Durable before it exists: a tenant the answer acknowledges survives a reboot, and one that
     * could not be written is not made. A pod's is made anyway (its pod object is its record).
     */
    if ((r = save_definitions(slot, &p, err, errlen)) < 0 && !(p.flags & GPUSLICE_NODE_POD)) {
        gd_contain_end(p.id);
        unlink(path);
        return r;
    }
    write_entry(slot, &p);
    /* In the list at once: a GET right after the POST shows it. */
    {
        struct gd_tenant *n = &gd.tenant[gd.ntenant];
        uid_t o;

        memset(n, 0, sizeof(*n));
        snprintf(n->id, sizeof(n->id), "%u", p.id);
        n->managed = 1;
        n->node_idx = slot;
        n->node_id = p.id;
        n->owner = owner;
        n->policy = p;
        snprintf(n->path, sizeof(n->path), "%s", path);
        if (gs_tenant_open_owned(path, 0, &o, &n->t) < 0)
            n->t = NULL;
        n->read_ns = gd_mono_ns();
        n->seen = 1;
        gd.ntenant++;
        *out = n;
    }
    gd_event(owner, "tenant.created", "\"tenant\":\"%u\",\"name\":\"%s\"", p.id, p.name);
    return 0;
}

int gd_tenant_preview(const struct gd_tenant *t, const struct gd_limits_req *l,
                      struct gpuslice_node_tenant *before, struct gpuslice_node_tenant *after,
                      char *err, size_t errlen)
{
    struct gpuslice_node_tenant p;
    int r;

    if (!t->managed) {
        gs_set_error(err, errlen, "tenant %s is a gpuslice run's", t->id);
        return -EINVAL;
    }
    gs_node_read_tenant(gd.node, t->node_idx, &p);
    if (p.id != t->node_id) {
        gs_set_error(err, errlen, "the tenant ended");
        return -ENOENT;
    }
    if (before)
        *before = p;
    if ((l->has_mem && (r = apply_limits(&p, &l->mem, 1, err, errlen)) < 0) ||
        (l->has_comp && (r = apply_limits(&p, &l->comp, 0, err, errlen)) < 0))
        return r;
    apply_sched(&p, l);
    *after = p;
    return 0;
}

int gd_run_tenant_set(const char *path, uid_t owner, const char *id, const struct gd_limits_req *l,
                      char *err, size_t errlen)
{
    struct gpuslice_tenant *m;
    uid_t o;
    int r;

    /*
     * gpuslice run's tenant: its file holds its limits. Opened as the file it was listed as:
     * its owner's still (a name in a directory anyone may write could have been replaced).
     */
    if ((r = gs_tenant_open_owned(path, 1, &o, &m)) < 0) {
        gs_set_error(err, errlen, "cannot open its state file %s: %s", path, gs_strerror(r));
        return r;
    }
    if (o != owner) {
        gs_tenant_close(m);
        gs_set_error(err, errlen, "its state file %s now belongs to uid %u, not %u", path,
                     (unsigned)o, (unsigned)owner);
        return -ENOENT;
    }
    r = 0;
    if (l->has_mem)
        r = gs_tenant_set(m, GS_SET_MEMORY, &l->mem, err, errlen);
    if (r == 0 && l->has_comp)
        r = gs_tenant_set(m, GS_SET_COMPUTE, &l->comp, err, errlen);
    if (r == 0)
        gs_tenant_set_sched(m, l->priority, l->weight);
    gs_tenant_close(m);
    if (r == 0)
        gd_event(owner, "tenant.changed", "\"tenant\":\"%s\"", id);
    return r;
}

struct gpuslice_tenant *gd_run_tenant_read(const char *path, uid_t owner)
{
    struct gpuslice_tenant *m;
    uid_t o;

    if (gs_tenant_open_owned(path, 0, &o, &m) < 0)
        return NULL;
    if (o != owner) {
        gs_tenant_close(m);
        return NULL;
    }
    return m;
}

void gd_run_tenant_limits_from(struct gd_tenant *t, const struct gpuslice_tenant *m)
{
    int e;

    if (t->managed || t->t == NULL || m == NULL)
        return;
    for (e = 0; e < GPUSLICE_MAX_DEVICES; e++) {
        memcpy(t->t->dev[e].uuid, m->dev[e].uuid, sizeof(t->t->dev[e].uuid));
        t->t->dev[e].mem_limit = m->dev[e].mem_limit;
        t->t->dev[e].compute_limit = m->dev[e].compute_limit;
        t->t->dev[e].flags = m->dev[e].flags;
    }
    t->t->set_flags = m->set_flags;
    t->t->set_mem_limit = m->set_mem_limit;
    t->t->set_compute_limit = m->set_compute_limit;
    t->t->compute_any = m->compute_any;
    t->t->priority = m->priority;
    t->t->weight = m->weight;
}

int gd_tenant_update(struct gd_tenant *t, const struct gd_limits_req *l, char *err, size_t errlen)
{
    struct gpuslice_node_tenant p;
    int r;

    if (!t->managed)
        return gd_run_tenant_set(t->path, t->owner, t->id, l, err, errlen);
    if ((r = gd_tenant_preview(t, l, NULL, &p, err, errlen)) < 0)
        return r;
    /* Durable before it applies: otherwise nothing changes. */
    if ((r = save_definitions(t->node_idx, &p, err, errlen)) < 0)
        return r;
    write_entry(t->node_idx, &p);
    t->policy = p;
    mirror_limits(t->path, &p);
    set_file_mode(t->path, &p);
    gd_event(p.owner_uid, "tenant.changed", "\"tenant\":\"%u\",\"name\":\"%s\"", p.id, p.name);
    return 0;
}

static void member_ended(int i);
static int is_member(uint32_t id, const struct gpuslice_tenant_proc *p);

/*
 * Tenant t ends (its file gone, or ended through the API): the processes of its slots that the
 * last sweep announced (t->t is that sweep's copy) end with it, for the events.
 */
static void procs_ended(const struct gd_tenant *t)
{
    int i;

    for (i = 0; t->t && i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *q = &t->t->proc[i];

        if (q->pid != 0 && !(t->managed && is_member(t->node_id, q)))
            gd_event(t->owner, "process.ended", "\"tenant\":\"%s\",\"pid\":%d", t->id, (int)q->pid);
    }
}

/* The tenant ended: its members are no longer its (each announced one's end is said). */
static void drop_members(uint32_t id)
{
    int i;

    for (i = 0; i < GPUSLICE_NODE_MAX_MEMBERS; i++)
        if (__atomic_load_n(&gd.node->member[i].tenant, __ATOMIC_RELAXED) == id) {
            member_ended(i);
            __atomic_store_n(&gd.node->member[i].tenant, 0, __ATOMIC_RELEASE);
        }
}

/*
 * The live processes of managed tenant id as the daemon knows them: its members (the node
 * segment, which only the daemon writes; a gpuslice run --tenant stays one for as long as
 * its program runs, between its CUDA steps too) and every process whose lineage leads to
 * one of them. Their PIDs (the daemon's namespace) into pids (at most n); how many in all.
 */
static int live_lineage(uint32_t id, pid_t *pids, int n)
{
    uint32_t self = gs_proc_self_ns();
    int i, found = 0;
    DIR *d;
    struct dirent *e;

    prune_members();
    /* Its cgroup's, which the kernel keeps (tenant-cgroup). */
    {
        pid_t in[64];
        int c = gd_contain_procs(id, in, 64), k;

        for (k = 0; k < c; k++) {
            if (found < n)
                pids[found] = k < 64 ? in[k] : 0;
            found++;
        }
    }
    for (i = 0; i < GPUSLICE_NODE_MAX_MEMBERS; i++) {
        const struct gpuslice_node_member *m = &gd.node->member[i];

        if (__atomic_load_n(&m->tenant, __ATOMIC_ACQUIRE) != id)
            continue;
        /* A member in another PID namespace: counted, its host PID looked for. */
        {
            pid_t pid =
                m->pid_ns == self ? m->pid : gs_proc_find(m->pid_ns, m->pid, m->start_time, 0);
            int k, dup = 0;

            for (k = 0; k < found && k < n; k++)
                dup |= pid > 0 && pids[k] == pid;
            if (dup)
                continue;
            if (found < n)
                pids[found] = pid;
            found++;
        }
    }
    if ((d = opendir("/proc")) == NULL)
        return found;
    while ((e = readdir(d)) != NULL) {
        pid_t pid = (pid_t)atoi(e->d_name);
        int k, dup = 0;

        if (pid <= 0 || lineage_of(pid) != id)
            continue;
        for (k = 0; k < found && k < n; k++)
            dup |= pids[k] == pid;
        if (dup)
            continue;
        if (found < n)
            pids[found] = pid;
        found++;
    }
    closedir(d);
    return found;
}

static void end_tenant(struct gd_tenant *t);

int gd_tenant_delete(struct gd_tenant *t, int force, char *err, size_t errlen)
{
    struct gpuslice_node_tenant none;
    pid_t pids[64];
    int live, k, r;

    if (!t->managed) {
        gs_set_error(err, errlen, "tenant %s belongs to its gpuslice run, which ends it", t->id);
        return -EPERM;
    }
    /*
     * Not while anything of it runs: its processes would go on with no limit at all (a job
     * between two CUDA steps has no process on the GPU, but its gpuslice run --tenant is a
     * member until the job ends). Forced (an admin), they are killed first.
     */
    live = live_lineage(t->node_id, pids, 64);
    if (live > 0 && !force) {
        char list[256];
        size_t len = 0;

        list[0] = '\0';
        for (k = 0; k < live && k < 8 && len < sizeof(list); k++)
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%d", k ? ", " : "",
                                    (int)pids[k]);
        gs_set_error(err, errlen,
                     "%d process%s of tenant \"%s\" still run%s (%s%s): end %s first, or "
                     "delete with ?force=true as an admin, which kills %s",
                     live, live == 1 ? "" : "es", t->policy.name, live == 1 ? "s" : "", list,
                     live > 8 ? ", ..." : "", live == 1 ? "it" : "them", live == 1 ? "it" : "them");
        return -EBUSY;
    }
    for (k = 0; k < live && k < 64; k++) {
        uint64_t start = pids[k] > 0 ? gs_proc_start_time(pids[k]) : 0;
        int fd;

        if (start && (fd = (int)syscall(SYS_pidfd_open, pids[k], 0)) >= 0) {
            if (gs_proc_start_time(pids[k]) == start)
                syscall(SYS_pidfd_send_signal, fd, SIGKILL, NULL, 0);
            close(fd);
        }
    }
    if (live > 64) {
        gs_set_error(err, errlen, "tenant \"%s\" has %d processes; %d were killed, try again",
                     t->policy.name, live, 64);
        return -EBUSY;
    }
    if (live > 0)
        gd_event(t->owner, "tenant.killed", "\"tenant\":\"%u\",\"processes\":%d", t->node_id, live);
    /* Its end durable first: a tenant the answer says is gone does not come back at a reboot. */
    memset(&none, 0, sizeof(none));
    if ((r = save_definitions(t->node_idx, &none, err, errlen)) < 0)
        return r;
    end_tenant(t);
    return 0;
}

int gd_tenant_put_pod(const char *name, const struct gd_limits_req *l, struct gd_tenant **out,
                      char *err, size_t errlen)
{
    struct gpuslice_node_tenant p, q;
    struct gd_tenant *t = gd_tenant_find_managed(name);
    int r;

    if (t == NULL)
        return gd_tenant_create(name, 0, l, out, err, errlen);
    if (!t->managed || !(t->policy.flags & GPUSLICE_NODE_POD)) {
        gs_set_error(err, errlen, "a tenant named \"%s\" exists and is not a pod's", name);
        return -EEXIST;
    }
    gs_node_read_tenant(gd.node, t->node_idx, &p);
    if (p.id != t->node_id) {
        gs_set_error(err, errlen, "the tenant ended");
        return -ENOENT;
    }
    q = p;
    q.flags = (q.flags & ~(GPUSLICE_NODE_POD | GPUSLICE_NODE_REFUSED)) |
              (l->pod_flags & (GPUSLICE_NODE_POD | GPUSLICE_NODE_REFUSED));
    /*
     * The pod's object says everything: what it no longer has is gone. But a refusal keeps
     * the limits the pod had: its processes that run on keep them (new ones get no CUDA),
     * and nothing becomes unlimited because the pod's annotations went bad.
     */
    if (!(l->pod_flags & GPUSLICE_NODE_REFUSED)) {
        q.mem_default = 0;
        q.compute_default = 0;
        memset(q.dev, 0, sizeof(q.dev));
        q.priority = l->priority;
        q.weight = l->weight;
        if ((l->has_mem && (r = apply_limits(&q, &l->mem, 1, err, errlen)) < 0) ||
            (l->has_comp && (r = apply_limits(&q, &l->comp, 0, err, errlen)) < 0))
            return r;
    }
    policy_flags(&q);
    *out = t;
    if (memcmp(&p, &q, sizeof(p)) == 0)
        return 0;
    write_entry(t->node_idx, &q);
    t->policy = q;
    mirror_limits(t->path, &q);
    set_file_mode(t->path, &q);
    save_anyway(); /* the pod's object is its record: applied even when it cannot be written */
    gd_event(q.owner_uid, "tenant.changed", "\"tenant\":\"%u\",\"name\":\"%s\"", q.id, q.name);
    return 0;
}

/* Ends managed tenant t, its end written or not. */
static void end_tenant(struct gd_tenant *t)
{
    struct gpuslice_node_tenant p;
    int i;

    procs_ended(t);
    /* Its live processes keep the limits they last read: nothing becomes unlimited. */
    drop_members(t->node_id);
    if (!(t->policy.flags & GPUSLICE_NODE_POD))
        gd_contain_end(t->node_id);
    memset(&p, 0, sizeof(p));
    write_entry(t->node_idx, &p);
    unlink(t->path);
    gd_event(t->owner, "tenant.ended", "\"tenant\":\"%u\",\"name\":\"%s\"", t->node_id,
             t->policy.name);
    gs_tenant_close(t->t);
    for (i = 0; i < gd.ntenant; i++)
        if (&gd.tenant[i] == t) {
            memmove(&gd.tenant[i], &gd.tenant[i + 1],
                    (size_t)(gd.ntenant - i - 1) * sizeof(gd.tenant[0]));
            gd.ntenant--;
            break;
        }
}

int gd_tenant_end(struct gd_tenant *t)
{
    if (!t->managed)
        return -EPERM;
    end_tenant(t);
    save_anyway(); /* a pod's end: its pod is gone whatever the disk says */
    return 0;
}

/* Adds (ns, pid, start) as a member of tenant id; under gd.mu. */
/*
 * What the events said of each member (under gd.mu): a process announced by process.joined
 * gets one process.ended, when it ends or moves to another tenant, with the PID and owner the
 * join named; its slot in its tenant's file (a pod's process uses CUDA itself) then makes no
 * process.started or process.ended of its own, also after it ended, until the entry is reused.
 * A member this daemon did not announce (one a previous daemon took, or one adopted by
 * lineage, announced by its slot) gets none.
 */
static struct {
    pid_t pid; /* as the joined event named it; 0: not announced */
    uid_t owner;
    uint32_t tenant, ns;
    pid_t inner;
    uint64_t start;
    int live; /* its process.ended not said yet */
} announced[GPUSLICE_NODE_MAX_MEMBERS];

static void member_ended(int i)
{
    if (announced[i].pid > 0 && announced[i].live)
        gd_event(announced[i].owner, "process.ended", "\"tenant\":\"%u\",\"pid\":%d",
                 announced[i].tenant, (int)announced[i].pid);
    announced[i].live = 0;
}

/* Makes the process a member of tenant id: its entry's index, or -ENOSPC; *was: already. */
static int add_member(uint32_t id, uint32_t ns, pid_t pid, uint64_t start, int *was)
{
    int i, free_i = -1;

    *was = 0;
    for (i = 0; i < GPUSLICE_NODE_MAX_MEMBERS; i++) {
        struct gpuslice_node_member *m = &gd.node->member[i];
        uint32_t t = __atomic_load_n(&m->tenant, __ATOMIC_RELAXED);

        if (t == 0) {
            if (free_i < 0)
                free_i = i;
            continue;
        }
        if (m->pid == pid && m->pid_ns == ns && m->start_time == start) {
            if (t == id && announced[i].live) {
                *was = 1;
                return i;
            }
            member_ended(i); /* it leaves the tenant it was in */
            announced[i].pid = 0;
            __atomic_store_n(&m->tenant, id, __ATOMIC_RELEASE);
            return i;
        }
    }
    if (free_i < 0)
        return -ENOSPC;
    {
        struct gpuslice_node_member *m = &gd.node->member[free_i];

        announced[free_i].pid = 0;
        __atomic_store_n(&m->pid_ns, ns, __ATOMIC_RELAXED);
        __atomic_store_n(&m->pid, pid, __ATOMIC_RELAXED);
        __atomic_store_n(&m->start_time, start, __ATOMIC_RELAXED);
        __atomic_store_n(&m->tenant, id, __ATOMIC_RELEASE);
    }
    return free_i;
}

/* Whether a process of a tenant's file was announced as a member of managed tenant id. */
static int is_member(uint32_t id, const struct gpuslice_tenant_proc *p)
{
    int i;

    for (i = 0; id && p->pid_ns && i < GPUSLICE_NODE_MAX_MEMBERS; i++)
        if (announced[i].pid > 0 && announced[i].tenant == id && announced[i].inner == p->pid &&
            announced[i].ns == p->pid_ns && announced[i].start == p->start_time)
            return 1;
    return 0;
}

/* The managed tenant whose cgroup (tenant-cgroup) process pid is in, or 0. */
static uint32_t contained_in(pid_t pid)
{
    char path[64], cg[8192];
    ssize_t got = -1;
    int fd;

    if (!gd_contain_enabled())
        return 0;
    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
        got = read(fd, cg, sizeof(cg) - 1);
        close(fd);
    }
    if (got <= 0)
        return 0;
    cg[got] = '\0';
    return gd_contain_of(cg);
}

int gd_tenant_join(struct gd_tenant *t, pid_t pid, int admin, char *err, size_t errlen)
{
    return gd_tenant_join_as(t, pid, gs_proc_pid_ns(pid), gs_proc_inner_pid(pid),
                             gs_proc_start_time(pid), admin, err, errlen);
}

int gd_tenant_join_as(struct gd_tenant *t, pid_t pid, uint32_t ns, pid_t inner, uint64_t start,
                      int admin, char *err, size_t errlen)
{
    uint32_t in;
    int r, was;

    if (!t->managed) {
        gs_set_error(err, errlen,
                     "tenant %s is a gpuslice run's; join a tenant made through the "
                     "API (POST /v1/tenants)",
                     t->id);
        return -EINVAL;
    }
    if (start == 0 || ns == 0 || inner <= 0) {
        gs_set_error(err, errlen, "process %d cannot be read in /proc", (int)pid);
        return -ESRCH;
    }
    /* A process of a managed tenant may not leave it for another: that would lift its limits. */
    if (((in = contained_in(pid)) != 0 || (in = lineage_of(pid)) != 0) && in != t->node_id &&
        !admin) {
        int i = gs_node_find_tenant(gd.node, in);

        gs_set_error(err, errlen,
                     "process %d belongs to the daemon's tenant \"%s\" and may not leave it "
                     "(only an admin may move it)",
                     (int)pid, i >= 0 ? gd.node->tenant[i].name : "?");
        return -EPERM;
    }
    /*
     * One user may not fill the member table (4096): at most members-per-user processes in
     * that user's tenants, and the last pod-member-reserve places are pods' (the review filled
     * it with 4096 sleeping joiners; every other user's, and pod's, join then failed).
     */
    if (!(t->policy.flags & GPUSLICE_NODE_POD)) {
        int k, mine = 0, used = 0;

        prune_members();
        for (k = 0; k < GPUSLICE_NODE_MAX_MEMBERS; k++) {
            uint32_t id = __atomic_load_n(&gd.node->member[k].tenant, __ATOMIC_RELAXED);
            int i;

            if (id == 0)
                continue;
            used++;
            if ((i = gs_node_find_tenant(gd.node, id)) >= 0 &&
                gd.node->tenant[i].owner_uid == (uint32_t)t->owner)
                mine++;
        }
        if (!admin && mine >= (int)gd_opt.members_per_user) {
            gs_set_error(err, errlen,
                         "uid %u has %d processes in its tenants, the most a user may "
                         "(members-per-user)",
                         (unsigned)t->owner, mine);
            return -EDQUOT;
        }
        if (GPUSLICE_NODE_MAX_MEMBERS - used <= (int)gd_opt.pod_member_reserve) {
            gs_set_error(err, errlen,
                         "the member table holds %d processes; its last %ld places are kept for "
                         "pods (pod-member-reserve)",
                         used, gd_opt.pod_member_reserve);
            return -ENOSPC;
        }
    }
    /* Into its cgroup first (tenant-cgroup): what it starts is then the tenant's for good. */
    if (!(t->policy.flags & GPUSLICE_NODE_POD) &&
        (r = gd_contain_join(t->node_id, pid, err, errlen)) < 0)
        return r;
    if ((r = add_member(t->node_id, ns, inner, start, &was)) < 0) {
        gs_set_error(err, errlen, "the member table is full (%d processes)",
                     GPUSLICE_NODE_MAX_MEMBERS);
        return r;
    }
    if (!was) {
        announced[r].pid = pid;
        announced[r].owner = t->owner;
        announced[r].tenant = t->node_id;
        announced[r].ns = ns;
        announced[r].inner = inner;
        announced[r].start = start;
        announced[r].live = 1;
        gd_event(t->owner, "process.joined", "\"tenant\":\"%u\",\"pid\":%d", t->node_id, (int)pid);
    }
    return 0;
}

void gd_tenant_limits(const struct gd_tenant *t, const struct gd_device *dev, uint64_t *mem,
                      uint32_t *compute)
{
    int e;

    *mem = 0;
    *compute = 0;
    if (t->managed) {
        if (gs_node_limits(gd.node, t->node_idx, t->node_id, dev->raw, -1, mem, compute) < 0)
            *mem = 0, *compute = 0;
        return;
    }
    if (t->t && (e = gd_tenant_entry(t, dev->raw)) >= 0) {
        *mem = t->t->dev[e].mem_limit;
        *compute = tenant_list_ceiling(&t->t->dev[e]);
    } else if (t->t) {
        if (t->t->set_flags & GPUSLICE_SET_MEMORY)
            *mem = t->t->set_mem_limit;
        if (t->t->set_flags & GPUSLICE_SET_COMPUTE)
            *compute = t->t->set_compute_limit;
    }
}

void gd_tenant_name(const struct gd_tenant *t, char *out, size_t len)
{
    if (t->managed)
        snprintf(out, len, "%s", t->policy.name);
    else if (t->t)
        tenant_list_name(t->t, out, len);
    else if (len)
        out[0] = '\0';
    gd_api_scrub(out); /* a run tenant's name is whatever its owner wrote */
}

uint64_t gd_tenant_mem_charged(const struct gd_tenant *t, int e)
{
    uint64_t sum = 0;
    int i;

    if (t->t == NULL || e < 0 || e >= GPUSLICE_MAX_DEVICES)
        return 0;
    for (i = 0; i < GPUSLICE_MAX_PROCS && t->nlive; i++)
        if (t->seen_pid[i] != 0)
            sum += t->t->proc[i].mem_used[e];
    return sum;
}

uint64_t gd_tenant_mem_nvml(const struct gd_tenant *t, int e)
{
    uint64_t mem = 0;
    int compute;

    if (!t->managed || t->t == NULL || e < 0 || e >= GPUSLICE_MAX_DEVICES ||
        gd_guard_use(t->node_id, t->t->dev[e].uuid, &mem, &compute) < 0)
        return 0;
    return mem;
}

uint64_t gd_tenant_mem_used(const struct gd_tenant *t, int e)
{
    uint64_t charged = gd_tenant_mem_charged(t, e), nvml = gd_tenant_mem_nvml(t, e);

    return nvml > charged ? nvml : charged;
}

int gd_tenant_entry(const struct gd_tenant *t, const uint8_t raw[16])
{
    int e;

    if (t->t == NULL)
        return -1;
    for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
        if (tenant_list_dev_in_use(&t->t->dev[e]) && memcmp(t->t->dev[e].uuid, raw, 16) == 0)
            return e;
    return -1;
}

int gd_tenants_of(uid_t owner)
{
    int i, n = 0;

    for (i = 0; i < gd.ntenant; i++)
        n += gd.tenant[i].managed && !(gd.tenant[i].policy.flags & GPUSLICE_NODE_POD) &&
             gd.tenant[i].policy.owner_uid == (uint32_t)owner;
    return n;
}

struct gd_tenant *gd_tenant_find_managed(const char *key)
{
    int i;

    for (i = 0; i < gd.ntenant; i++)
        if (gd.tenant[i].managed &&
            (strcmp(gd.tenant[i].id, key) == 0 || strcmp(gd.tenant[i].policy.name, key) == 0))
            return &gd.tenant[i];
    return NULL;
}

struct gd_tenant *gd_tenant_find(const char *key)
{
    int i;
    struct gd_tenant *t;

    /*
     * The daemon's own tenants first: a gpuslice run's ID comes from a file name in a directory
     * anyone may write, and must never stand in for a managed tenant's name or id (a file
     * planted as gpuslice-pod-<uid>.tenant took a pod's tenant away; one named after a managed
     * tenant turned an admin's change onto the planter's).
     */
    if ((t = gd_tenant_find_managed(key)) != NULL)
        return t;
    for (i = 0; i < gd.ntenant; i++)
        if (!gd.tenant[i].managed && strcmp(gd.tenant[i].id, key) == 0)
            return &gd.tenant[i];
    return NULL;
}

/* ---- the sweep ---- */

/* The managed tenant pid (the daemon's namespace) or its nearest member ancestor is in; 0 none. */
static uint32_t lineage_of(pid_t pid)
{
    uint32_t ns = gs_proc_self_ns(), id;
    int gen;

    for (gen = 0; gen < 64 && pid > 1; gen++) {
        uint64_t start = gs_proc_start_time(pid);

        if (start == 0)
            return 0;
        if ((id = gs_node_member_tenant(gd.node, ns, pid, start)) != 0)
            return id;
        pid = gs_proc_parent(pid);
    }
    return 0;
}

uint32_t gd_tenant_lineage(pid_t pid)
{
    return lineage_of(pid);
}

static int descends_from(pid_t pid, uint32_t id)
{
    return lineage_of(pid) == id;
}

/* Members that are gone leave the table; under gd.mu. */
static void prune_members(void)
{
    uint32_t self = gs_proc_self_ns();
    int i;

    for (i = 0; i < GPUSLICE_NODE_MAX_MEMBERS; i++) {
        struct gpuslice_node_member *m = &gd.node->member[i];

        if (__atomic_load_n(&m->tenant, __ATOMIC_RELAXED) == 0)
            continue;
        if (m->pid_ns == self ? gs_proc_start_time(m->pid) != m->start_time
                              : gs_proc_find(m->pid_ns, m->pid, m->start_time, 0) == 0) {
            member_ended(i);
            __atomic_store_n(&m->tenant, 0, __ATOMIC_RELEASE);
        }
    }
}

/*
 * A process of a managed tenant that registered in its state file and descends from one of
 * its members becomes a member itself: its own children then find the tenant even after
 * the processes between them and the first member have exited.
 */
static void adopt_members(const struct gd_tenant *t)
{
    uint32_t self = gs_proc_self_ns();
    int i, was;

    if (!t->managed || t->t == NULL || t->nlive == 0)
        return;
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *p = &t->t->proc[i];
        uint32_t ns = p->pid_ns ? p->pid_ns : self;

        if (t->seen_pid[i] <= 0 || gs_node_member_tenant(gd.node, ns, p->pid, p->start_time) != 0)
            continue;
        if (descends_from(t->seen_pid[i], t->node_id))
            add_member(t->node_id, ns, p->pid, p->start_time, &was);
    }
}

/*
 * An ID gpuslice run could have made ("<uid>-<pid>-<hex>"): the daemon quotes IDs in JSON,
 * events and metrics, and a file name in a shared directory is anyone's to choose.
 */
static int plain_id(const char *id)
{
    int part = 0, n = 0;
    const char *c;

    /* "<uid>-<pid>-<hex>", as gs_tenant_create names its files, and nothing else. */
    for (c = id; *c; c++) {
        if (*c == '-') {
            if (n == 0 || ++part > 2)
                return 0;
            n = 0;
        } else if ((*c >= '0' && *c <= '9') || (part == 2 && *c >= 'a' && *c <= 'f')) {
            n++;
        } else {
            return 0;
        }
    }
    return part == 2 && n > 0;
}

static int find_in(struct gd_tenant *v, int n, const char *id)
{
    int i;

    for (i = 0; i < n; i++)
        if (strcmp(v[i].id, id) == 0)
            return i;
    return -1;
}

/* Process and counter events between the previous sweep's view o and the new one n. */
static void diff_events(struct gd_tenant *o, struct gd_tenant *n)
{
    int i, j, e;

    if (n->t == NULL)
        return;
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *p = &n->t->proc[i];

        if (p->pid == 0)
            continue;
        if (o && o->t && o->t->proc[i].pid == p->pid && o->t->proc[i].start_time == p->start_time)
            continue;
        /* A member was announced when it joined; its end is said when it ends (prune_members). */
        if (n->managed && is_member(n->node_id, p))
            continue;
        gd_event(n->owner, "process.started", "\"tenant\":\"%s\",\"pid\":%d", n->id, (int)p->pid);
    }
    for (i = 0; o && o->t && i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *p = &o->t->proc[i];

        if (p->pid == 0 ||
            (n->t->proc[i].pid == p->pid && n->t->proc[i].start_time == p->start_time) ||
            (n->managed && is_member(n->node_id, p)))
            continue;
        gd_event(n->owner, "process.ended", "\"tenant\":\"%s\",\"pid\":%d", n->id, (int)p->pid);
    }
    for (e = 0; e < GPUSLICE_MAX_DEVICES; e++) {
        char u[GS_UUID_STRLEN];
        uint64_t refused = n->t->mem_refused[e], thr = n->t->compute_throttled_ns[e];

        n->refused[e] = refused;
        n->throttled[e] = thr;
        n->throttling[e] = o ? o->throttling[e] : 0;
        if (!tenant_list_dev_in_use(&n->t->dev[e]))
            continue;
        uuid_str(n->t->dev[e].uuid, u);
        if (o && refused > o->refused[e])
            gd_event(n->owner, "allocation.refused",
                     "\"tenant\":\"%s\",\"gpu\":\"%s\",\"count\":%llu", n->id, u,
                     (unsigned long long)(refused - o->refused[e]));
        j = o && thr > o->throttled[e];
        if (j && !n->throttling[e])
            gd_event(n->owner, "throttle.started", "\"tenant\":\"%s\",\"gpu\":\"%s\"", n->id, u);
        else if (!j && n->throttling[e] && o)
            gd_event(n->owner, "throttle.stopped", "\"tenant\":\"%s\",\"gpu\":\"%s\"", n->id, u);
        n->throttling[e] = j;
    }
}

void gd_registry_sweep(void)
{
    struct gd_tenant *v;
    struct tenant_list l;
    int n = 0, i, k;
    size_t j;

    pthread_mutex_lock(&sweep_mu);
    v = lists[!cur];
    /* The daemon's tenants. */
    for (i = 0; i < GPUSLICE_NODE_MAX_TENANTS && n < MAX_TENANTS; i++) {
        struct gd_tenant *t = &v[n];
        uid_t o;

        if (__atomic_load_n(&gd.node->tenant[i].id, __ATOMIC_ACQUIRE) == 0)
            continue;
        memset(t, 0, sizeof(*t));
        gs_node_read_tenant(gd.node, i, &t->policy);
        if (t->policy.id == 0)
            continue;
        t->managed = 1;
        t->node_idx = i;
        t->node_id = t->policy.id;
        t->owner = t->policy.owner_uid;
        snprintf(t->id, sizeof(t->id), "%u", t->policy.id);
        state_path(&t->policy, t->path, sizeof(t->path));
        t->read_ns = gd_mono_ns();
        if (gs_tenant_open_owned(t->path, 0, &o, &t->t) < 0)
            t->t = NULL;
        /*
         * A process of the tenant wrote its file's link to us away: written back, or every
         * process it starts would find its tenant's file disowned and refuse to run.
         */
        if (t->t && t->t->node_tenant != t->policy.id) {
            int fd = open(t->path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
            uint32_t id = t->policy.id, one = 1;

            if (fd >= 0) {
                pwrite_word(fd, &id, sizeof(id), offsetof(struct gpuslice_tenant, node_tenant));
                pwrite_word(fd, &one, sizeof(one), offsetof(struct gpuslice_tenant, limits_fixed));
                close(fd);
            }
            mirror_limits(t->path, &t->policy);
            t->t->node_tenant = id;
            gd_event(t->owner, "tenant.tampered", "\"tenant\":\"%u\",\"name\":\"%s\"", id,
                     t->policy.name);
        }
        n++;
    }
    /*
     * gpuslice run's: the listing reads at most TENANT_LIST_MAX (256) files, each owner's 16
     * oldest first, so the users who fill the run directory cost the daemon a bounded amount
     * and cannot push another user's tenant out of the table.
     */
    if (tenant_list_scan(&l, 0) == 0) {
        for (j = 0; j < l.n && n < MAX_TENANTS; j++) {
            struct gd_tenant *t = &v[n];
            size_t x = j;

            if (l.v[x].t->node_tenant != 0 || !plain_id(l.v[x].id))
                continue; /* a managed tenant's file copied there, or a name run never makes */
            memset(t, 0, sizeof(*t));
            snprintf(t->id, sizeof(t->id), "%s", l.v[x].id);
            snprintf(t->path, sizeof(t->path), "%s", l.v[x].path);
            t->owner = l.v[x].owner;
            t->t = l.v[x].t;
            t->read_ns = l.v[x].read_ns;
            l.v[x].t = NULL;
            n++;
        }
        tenant_list_done(&l);
    }
    /*
     * Which processes live, read here: a request then answers from what the sweep found. A
     * process in a pod's PID namespace learns its host PID from its slot (NVML's name for it,
     * which its duty needs: src/preload/compute/duty.c).
     */
    for (i = 0; i < n; i++) {
        if (v[i].t) {
            if (v[i].managed)
                note_hosts(&v[i]);
            v[i].nlive = gs_tenant_procs_alive(v[i].t, v[i].seen_pid);
        } else {
            v[i].nlive = 0;
            memset(v[i].seen_pid, 0, sizeof(v[i].seen_pid));
        }
    }
    pthread_mutex_lock(&gd.mu);
    prune_members();
    /* The API's changes since the node was read: tenants made meanwhile come along, ended go. */
    for (k = 0; k < gd.ntenant && n < MAX_TENANTS; k++) {
        struct gd_tenant *o = &gd.tenant[k];

        if (o->managed && find_in(v, n, o->id) < 0 &&
            __atomic_load_n(&gd.node->tenant[o->node_idx].id, __ATOMIC_RELAXED) == o->node_id) {
            v[n] = *o;
            o->t = NULL;
            n++;
        }
    }
    for (i = 0; i < n;) {
        if (v[i].managed &&
            __atomic_load_n(&gd.node->tenant[v[i].node_idx].id, __ATOMIC_RELAXED) != v[i].node_id) {
            gs_tenant_close(v[i].t);
            memmove(&v[i], &v[i + 1], (size_t)(n - i - 1) * sizeof(v[0]));
            n--;
        } else {
            i++;
        }
    }
    for (i = 0; i < n; i++) {
        k = find_in(gd.tenant, gd.ntenant, v[i].id);
        /*
         * What the API changed while the sweep read without the lock is kept, not undone by
         * the older read until the next sweep: a managed tenant's limits are read again from
         * the node (the API writes them there under this lock); a gpuslice run's are taken
         * from the copy the API read after writing its file where that read began after this
         * sweep's read of the file did (each read's time is taken before it starts).
         */
        if (v[i].managed)
            gs_node_read_tenant(gd.node, v[i].node_idx, &v[i].policy);
        else if (k >= 0 && gd.tenant[k].changed_ns > v[i].read_ns &&
                 gd.tenant[k].owner == v[i].owner && strcmp(gd.tenant[k].path, v[i].path) == 0) {
            gd_run_tenant_limits_from(&v[i], gd.tenant[k].t);
            v[i].changed_ns = gd.tenant[k].changed_ns;
        }
        adopt_members(&v[i]);
        if (k < 0 && !v[i].managed && __atomic_load_n(&gd.ready, __ATOMIC_RELAXED)) {
            char name[64], quoted[GS_TEXT_LEN(64) + 8];

            gd_tenant_name(&v[i], name, sizeof(name));
            gd_json_quote(quoted, sizeof(quoted), name);
            gd_event(v[i].owner, "tenant.created", "\"tenant\":\"%s\",\"name\":%s", v[i].id,
                     quoted);
        }
        diff_events(k >= 0 ? &gd.tenant[k] : NULL, &v[i]);
    }
    for (k = 0; k < gd.ntenant; k++)
        if (!gd.tenant[k].managed && find_in(v, n, gd.tenant[k].id) < 0) {
            procs_ended(&gd.tenant[k]);
            gd_event(gd.tenant[k].owner, "tenant.ended", "\"tenant\":\"%s\"", gd.tenant[k].id);
        }
    /* The cgroups of ended tenants go once their last process has. */
    {
        uint32_t live[MAX_TENANTS];
        int nl = 0;

        for (i = 0; i < n; i++)
            if (v[i].managed)
                live[nl++] = v[i].node_id;
        gd_contain_sweep(live, nl);
    }
    /* Swap in; the old copies are freed after the lock. */
    {
        struct gd_tenant *old = gd.tenant;
        int nold = gd.ntenant;

        gd.tenant = v;
        gd.ntenant = n;
        cur = !cur;
        retry_state();
        pthread_mutex_unlock(&gd.mu);
        for (k = 0; k < nold; k++)
            gs_tenant_close(old[k].t);
    }
    pthread_mutex_unlock(&sweep_mu);
}

/* Recreates the tenants of tenants.json in a node segment made afresh (after a reboot). */
static void restore_definitions(void)
{
    char path[PATH_MAX + 32], err[256];
    json_error_t je;
    json_t *arr, *it;
    size_t k;

    snprintf(path, sizeof(path), "%s/tenants.json", gd_opt.state_dir);
    if ((arr = json_load_file(path, JSON_REJECT_DUPLICATES, &je)) == NULL) {
        if (access(path, F_OK) == 0)
            gd_log("warning: %s: %s (line %d); its tenants are not restored", path, je.text,
                   je.line);
        return;
    }
    /* Written once at the end, not once per tenant: a crash midway leaves the file whole. */
    restoring = 1;
    json_array_foreach(arr, k, it)
    {
        struct gd_limits_req l;
        struct gd_tenant *t;
        json_t *name = json_object_get(it, "name"), *owner = json_object_get(it, "owner");
        const char *key;
        json_t *val;
        int pass;

        if (!json_is_string(name) || !json_is_integer(owner))
            continue;
        memset(&l, 0, sizeof(l));
        for (pass = 0; pass < 2; pass++) {
            struct gs_limits *lim = pass == 0 ? &l.mem : &l.comp;
            json_t *obj = json_object_get(it, pass == 0 ? "memory" : "compute");

            json_object_foreach(obj, key, val)
            {
                struct gs_limit_entry *e;

                if (!json_is_integer(val) || lim->n >= GS_MAX_LIMIT_ENTRIES)
                    continue;
                e = &lim->e[lim->n];
                memset(e, 0, sizeof(*e));
                e->value = (uint64_t)json_integer_value(val);
                if (strcmp(key, "default") == 0)
                    e->key = GS_KEY_ALL;
                else if (strncmp(key, "cuda:", 5) == 0 && key[5] >= '0' && key[5] <= '9' &&
                         strlen(key) <= 8 && strspn(key + 5, "0123456789") == strlen(key + 5) &&
                         atoi(key + 5) <= GPUSLICE_NODE_INDEX_MAX)
                    e->key = GS_KEY_INDEX, e->index = atoi(key + 5);
                else if (gs_parse_uuid(key, strlen(key), e->uuid))
                    e->key = GS_KEY_UUID;
                else
                    continue;
                lim->n++;
            }
            if (pass == 0)
                l.has_mem = lim->n > 0;
            else
                l.has_comp = lim->n > 0;
        }
        {
            json_t *jp = json_object_get(it, "priority"), *jw = json_object_get(it, "weight");
            json_int_t pv = json_is_integer(jp) ? json_integer_value(jp) : 0;
            json_int_t wv = json_is_integer(jw) ? json_integer_value(jw) : 0;

            /* A file of ours, but checked as any input: out of range is the default. */
            l.priority = pv >= GPUSLICE_PRIORITY_BACKGROUND && pv <= GPUSLICE_PRIORITY_LATENCY
                             ? (uint32_t)pv
                             : 0;
            l.weight = wv >= 1 && wv <= GPUSLICE_WEIGHT_MAX ? (uint32_t)wv : 0;
            json_t *jc = json_object_get(it, "created_unix_ns");
            json_int_t cv = json_is_integer(jc) ? json_integer_value(jc) : 0;

            l.pod_flags =
                (json_is_true(json_object_get(it, "pod")) ? GPUSLICE_NODE_POD : 0) |
                (json_is_true(json_object_get(it, "refused")) ? GPUSLICE_NODE_REFUSED : 0);
            /* Its time of creation is the first one's, not the reboot's (a clock behind at
               boot keeps it too). */
            l.created_unix_ns = cv > 0 ? (uint64_t)cv : 0;
        }
        if (gd_tenant_create(json_string_value(name), (uid_t)json_integer_value(owner), &l, &t, err,
                             sizeof(err)) < 0)
            gd_log("warning: tenant \"%s\" of %s not restored: %s", json_string_value(name), path,
                   err);
    }
    json_decref(arr);
    restoring = 0;
    save_anyway(); /* the ids are new ones; a failure makes the daemon not ready */
}

int gd_own_dir(const char *path, mode_t mode, char *err, size_t errlen)
{
    struct stat st;

    if (mkdir(path, mode) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    if (lstat(path, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
        snprintf(err, errlen,
                 "%s is not a directory of the daemon's user writable by it alone (fix its owner "
                 "and mode, or give another with --run-dir/--state-dir)",
                 path);
        return -1;
    }
    chmod(path, mode);
    return 0;
}

int gd_registry_start(char *err, size_t errlen)
{
    int created, i, kept = 0, r;
    struct group *g;

    if (gd_own_dir(gd_opt.run_dir, 0755, err, errlen) < 0 ||
        gd_own_dir(gd_opt.state_dir, 0700, err, errlen) < 0)
        return -1;
    if ((size_t)snprintf(gd.tenant_dir, sizeof(gd.tenant_dir), "%s/tenants", gd_opt.run_dir) >=
            sizeof(gd.tenant_dir) ||
        gd_own_dir(gd.tenant_dir, 0755, err, errlen) < 0)
        return -1;
    if ((r = gs_node_create(gd_opt.run_dir, gd.tenant_dir, &gd.node, &created)) < 0) {
        snprintf(err, errlen, "cannot create the node segment %s/" GPUSLICE_NODE_FILE ": %s",
                 gd_opt.run_dir, gs_strerror(r));
        return -1;
    }
    __atomic_store_n(&gd.node->daemon_pid, 0, __ATOMIC_RELEASE);
    gd.node->daemon_pid_ns = gs_proc_self_ns();
    gd.node->daemon_start_time = gs_proc_start_time(getpid());
    __atomic_store_n(&gd.node->daemon_pid, (int32_t)getpid(), __ATOMIC_RELEASE);
    if ((g = getgrnam(gd_opt.admin_group)) != NULL) {
        gd.admin_gid = g->gr_gid;
        gd.has_admin_gid = 1;
    }
    gd.tenant = lists[cur];
    pthread_mutex_lock(&gd.mu);
    /* Entries a daemon killed in the middle of a write left odd are whole again. */
    for (i = 0; i < GPUSLICE_NODE_MAX_TENANTS; i++) {
        if (gd.node->tenant[i].seq & 1)
            gs_node_write_end(gd.node, i);
        kept += gd.node->tenant[i].id != 0;
    }
    if (created)
        restore_definitions();
    pthread_mutex_unlock(&gd.mu);
    if (!created)
        gd_log("the node segment %s/" GPUSLICE_NODE_FILE " was kept: %d tenant%s of the daemon's",
               gd_opt.run_dir, kept, kept == 1 ? "" : "s");
    return 0;
}

void gd_registry_stop(void)
{
    int k;

    pthread_mutex_lock(&gd.mu);
    for (k = 0; k < gd.ntenant; k++) {
        gs_tenant_close(gd.tenant[k].t);
        gd.tenant[k].t = NULL;
    }
    gd.ntenant = 0;
    pthread_mutex_unlock(&gd.mu);
    /* The segment stays: tenants keep their limits while no daemon runs. */
    gs_node_close(gd.node);
    gd.node = NULL;
}
