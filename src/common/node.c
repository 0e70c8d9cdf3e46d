/*
 * The daemon's node segment: creating it, checking it before trusting it,
 * and the sequence-word reads that let a reader see a tenant entry whole.
 */
#include "common/node.h"
#include "common/env.h"
#include "common/error.h"
#include "common/proc.h"
#include "common/shm.h"
#include "gpuslice/tenant_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int gs_node_dir(char *buf, size_t len)
{
    const char *env = getenv(GS_ENV_DAEMON_DIR), *xdg = getenv("XDG_RUNTIME_DIR");
    int r;

    /*
     * Not /run/gpuslice merely because it exists: a user's own daemon (in her runtime
     * directory) would then be hidden from her by the system's, or by a directory one left.
     * The interposer looks in /run/gpuslice always, and the CLI asks there too.
     */
    if (env && *env && *env != '/')
        return -EINVAL; /* a relative one names no place: refused, as the daemon refuses it */
    if (env && *env)
        r = snprintf(buf, len, "%s", env);
    else if (geteuid() == 0)
        r = snprintf(buf, len, "%s", GS_NODE_SYSTEM_DIR);
    else if (xdg && *xdg == '/')
        r = snprintf(buf, len, "%s/gpuslice", xdg);
    else
        r = snprintf(buf, len, "/tmp/gpuslice-%u", (unsigned)geteuid());
    return r < 0 || (size_t)r >= len ? -ENAMETOOLONG : 0;
}

static void init_node(struct gpuslice_node *n, const char *tenant_dir)
{
    memset(n, 0, sizeof(*n));
    n->next_id = 1;
    n->owner_uid = (uint32_t)geteuid();
    snprintf(n->tenant_dir, sizeof(n->tenant_dir), "%s", tenant_dir);
    n->abi_version = GPUSLICE_NODE_ABI_VERSION;
    n->size = (uint32_t)sizeof(*n);
    n->magic = GPUSLICE_NODE_MAGIC;
}

/* Maps the file at path read-write if it is a node segment of ours; else a negative error. */
static int map_existing(const char *path, struct gpuslice_node **out)
{
    struct gpuslice_node *n;
    struct stat st;
    int fd, r;

    if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return -errno;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() ||
        (size_t)st.st_size < sizeof(*n)) {
        close(fd);
        return GS_EABI;
    }
    n = mmap(NULL, sizeof(*n), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (n == MAP_FAILED)
        return -errno;
    if ((r = gs_shm_check((const struct gpuslice_shm_header *)n, (size_t)st.st_size,
                          GPUSLICE_NODE_MAGIC, GPUSLICE_NODE_ABI_MAJOR, sizeof(*n), "node", path,
                          NULL, 0)) < 0) {
        munmap(n, sizeof(*n));
        return r;
    }
    *out = n;
    return 0;
}

int gs_node_create(const char *dir, const char *tenant_dir, struct gpuslice_node **out,
                   int *created)
{
    struct gpuslice_node *n;
    char path[512], tmp[560];
    int fd, r;

    if ((size_t)snprintf(path, sizeof(path), "%s/" GPUSLICE_NODE_FILE, dir) >= sizeof(path) ||
        strlen(tenant_dir) >= sizeof(n->tenant_dir))
        return -ENAMETOOLONG;
    *created = 0;
    if (map_existing(path, out) == 0) {
        snprintf((*out)->tenant_dir, sizeof((*out)->tenant_dir), "%s", tenant_dir);
        return 0;
    }
    snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid());
    unlink(tmp);
    if ((fd = open(tmp, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644)) < 0)
        return -errno;
    /*
     * Readable by every user whose processes look their limits up in it; the umask may differ.
     * Its space before it is mapped: a full run directory is an error, not SIGBUS.
     */
    if ((r = fchmod(fd, 0644) < 0 ? -errno : gs_shm_allocate(fd, sizeof(*n))) < 0) {
        close(fd);
        unlink(tmp);
        return r;
    }
    n = mmap(NULL, sizeof(*n), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (n == MAP_FAILED) {
        r = -errno;
        unlink(tmp);
        return r;
    }
    init_node(n, tenant_dir);
    if (msync(n, sizeof(*n), MS_SYNC) < 0 || rename(tmp, path) < 0) {
        r = -errno;
        munmap(n, sizeof(*n));
        unlink(tmp);
        return r;
    }
    *created = 1;
    *out = n;
    return 0;
}

/* Whether st could only have been written by root or by this user. */
static int trusted(const struct stat *st)
{
    if (st->st_uid != 0 && st->st_uid != geteuid())
        return 0;
    /* A sticky directory (like /tmp) lets others add entries but not replace ours. */
    if (S_ISDIR(st->st_mode))
        return !(st->st_mode & (S_IWGRP | S_IWOTH)) || (st->st_mode & S_ISVTX);
    return !(st->st_mode & (S_IWGRP | S_IWOTH));
}

int gs_node_open(const char *dir, struct gpuslice_node **out)
{
    struct gpuslice_node *n;
    struct stat st;
    char path[512];
    int fd, r;

    if ((size_t)snprintf(path, sizeof(path), "%s/" GPUSLICE_NODE_FILE, dir) >= sizeof(path))
        return -ENAMETOOLONG;
    if (stat(dir, &st) < 0)
        return -errno;
    if (!S_ISDIR(st.st_mode) || !trusted(&st))
        return GS_EUNSAFE;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    if (!S_ISREG(st.st_mode) || !trusted(&st)) {
        close(fd);
        return GS_EUNSAFE;
    }
    if ((size_t)st.st_size < sizeof(*n)) {
        close(fd);
        return GS_EABI;
    }
    n = mmap(NULL, sizeof(*n), PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (n == MAP_FAILED)
        return -errno;
    if ((r = gs_shm_check((const struct gpuslice_shm_header *)n, (size_t)st.st_size,
                          GPUSLICE_NODE_MAGIC, GPUSLICE_NODE_ABI_MAJOR, sizeof(*n), "node", path,
                          NULL, 0)) < 0) {
        munmap(n, sizeof(*n));
        return r;
    }
    *out = n;
    return 0;
}

void gs_node_close(struct gpuslice_node *n)
{
    if (n)
        munmap(n, sizeof(*n));
}

int gs_node_daemon_alive(const struct gpuslice_node *n)
{
    int32_t pid = __atomic_load_n(&n->daemon_pid, __ATOMIC_ACQUIRE);
    uint64_t start = __atomic_load_n(&n->daemon_start_time, __ATOMIC_RELAXED);
    uint32_t ns = __atomic_load_n(&n->daemon_pid_ns, __ATOMIC_RELAXED);

    if (pid <= 0)
        return 0;
    if (ns == 0 || ns == gs_proc_self_ns())
        return gs_proc_start_time(pid) == start;
    return gs_proc_find(ns, pid, start, 0) != 0;
}

/*
 * Word by word: every field is an aligned 32- or 64-bit word, each read whole. Acquire
 * loads: the sequence word read after them cannot be read before them (no fences: the
 * ThreadSanitizer build does not take them).
 */
static void copy_words(void *dst, const void *src, size_t len)
{
    const uint64_t *s = src;
    uint64_t *d = dst;
    size_t i;

    for (i = 0; i < len / 8; i++)
        d[i] = __atomic_load_n(&s[i], __ATOMIC_ACQUIRE);
}

_Static_assert(sizeof(struct gpuslice_node_tenant) % 8 == 0, "tenant entry in whole words");

void gs_node_read_tenant(const struct gpuslice_node *n, int i, struct gpuslice_node_tenant *out)
{
    const struct gpuslice_node_tenant *t = &n->tenant[i];
    int tries;

    for (tries = 0; tries < 64; tries++) {
        uint32_t s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE), s2;

        copy_words(out, t, sizeof(*out));
        s2 = __atomic_load_n(&t->seq, __ATOMIC_RELAXED);
        if (s1 == s2 && !(s1 & 1))
            break;
    }
    out->name[sizeof(out->name) - 1] = '\0';
    out->state_file[sizeof(out->state_file) - 1] = '\0';
}

int gs_node_find_tenant(const struct gpuslice_node *n, uint32_t id)
{
    int i;

    if (id == 0)
        return -ENOENT;
    for (i = 0; i < GPUSLICE_NODE_MAX_TENANTS; i++)
        if (__atomic_load_n(&n->tenant[i].id, __ATOMIC_ACQUIRE) == id)
            return i;
    return -ENOENT;
}

int gs_node_find_name(const struct gpuslice_node *n, const char *name)
{
    struct gpuslice_node_tenant t = { 0 }; /* gcc -O3 cannot see copy_words fill it */
    int i;

    for (i = 0; i < GPUSLICE_NODE_MAX_TENANTS; i++) {
        if (__atomic_load_n(&n->tenant[i].id, __ATOMIC_ACQUIRE) == 0)
            continue;
        gs_node_read_tenant(n, i, &t);
        if (t.id != 0 && strcmp(t.name, name) == 0)
            return i;
    }
    return -ENOENT;
}

/* Whether device entry d of t holds uuid (its two words read whole). */
static int holds(const struct gpuslice_node_limit *d, const uint64_t want[2])
{
    const uint64_t *w = (const uint64_t *)d->uuid;
    uint64_t a = __atomic_load_n(&w[0], __ATOMIC_ACQUIRE),
             b = __atomic_load_n(&w[1], __ATOMIC_ACQUIRE);

    return (a | b) != 0 && a == want[0] && b == want[1];
}

/*
 * Read on every launch of a managed tenant (its ceiling): only the words it needs, under the
 * sequence word as gs_node_read_tenant reads them, not a copy of the whole entry.
 */
void gs_node_index_key(uint8_t out[16], int idx)
{
    memset(out, GPUSLICE_NODE_INDEX_KEY_BYTE, 15);
    out[15] = (uint8_t)idx;
}

int gs_node_key_index(const uint8_t key[16])
{
    int k;

    for (k = 0; k < 15; k++)
        if (key[k] != GPUSLICE_NODE_INDEX_KEY_BYTE)
            return -1;
    return key[15] <= GPUSLICE_NODE_INDEX_MAX ? key[15] : -1;
}

uint32_t gs_node_flags(const struct gpuslice_node *n, int i, uint32_t id)
{
    uint32_t f;

    if (i < 0 || i >= GPUSLICE_NODE_MAX_TENANTS)
        return 0;
    f = __atomic_load_n(&n->tenant[i].flags, __ATOMIC_ACQUIRE);
    return __atomic_load_n(&n->tenant[i].id, __ATOMIC_ACQUIRE) == id ? f : 0;
}

int gs_node_limits(const struct gpuslice_node *n, int i, uint32_t id, const uint8_t uuid[16],
                   int ord, uint64_t *mem, uint32_t *compute)
{
    const struct gpuslice_node_tenant *t;
    uint64_t want[2], by_index[2], m = 0;
    uint32_t c = 0, s1, tid = 0;
    int tries, d, found;
    uint8_t ik[16];

    if (i < 0 || i >= GPUSLICE_NODE_MAX_TENANTS)
        return -ESTALE;
    t = &n->tenant[i];
    memcpy(want, uuid, 16);
    gs_node_index_key(ik, ord >= 0 && ord <= GPUSLICE_NODE_INDEX_MAX ? ord : 0);
    memcpy(by_index, ik, 16);
    for (tries = 0; tries < 64; tries++) {
        s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        tid = __atomic_load_n(&t->id, __ATOMIC_ACQUIRE);
        m = __atomic_load_n(&t->mem_default, __ATOMIC_ACQUIRE);
        c = __atomic_load_n(&t->compute_default, __ATOMIC_ACQUIRE);
        found = 0;
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
            if (holds(&t->dev[d], want)) {
                m = __atomic_load_n(&t->dev[d].mem_limit, __ATOMIC_ACQUIRE);
                c = __atomic_load_n(&t->dev[d].compute_limit, __ATOMIC_ACQUIRE);
                found = 1;
                break;
            }
        /* The process's own index next (a pod's keys), then the defaults. */
        for (d = 0;
             !found && ord >= 0 && ord <= GPUSLICE_NODE_INDEX_MAX && d < GPUSLICE_NODE_MAX_DEVICES;
             d++)
            if (holds(&t->dev[d], by_index)) {
                m = __atomic_load_n(&t->dev[d].mem_limit, __ATOMIC_ACQUIRE);
                c = __atomic_load_n(&t->dev[d].compute_limit, __ATOMIC_ACQUIRE);
                found = 1;
            }
        if (!(s1 & 1) && __atomic_load_n(&t->seq, __ATOMIC_RELAXED) == s1)
            break;
    }
    if (tid != id)
        return -ESTALE;
    *mem = m;
    *compute = c;
    return 0;
}

int gs_node_sched(const struct gpuslice_node *n, int i, uint32_t id, uint32_t *priority,
                  uint32_t *weight)
{
    const struct gpuslice_node_tenant *t;
    uint32_t s1, p = 0, w = 0, tid = 0;
    int tries;

    if (i < 0 || i >= GPUSLICE_NODE_MAX_TENANTS)
        return -ESTALE;
    t = &n->tenant[i];
    for (tries = 0; tries < 64; tries++) {
        s1 = __atomic_load_n(&t->seq, __ATOMIC_ACQUIRE);
        tid = __atomic_load_n(&t->id, __ATOMIC_ACQUIRE);
        p = __atomic_load_n(&t->priority, __ATOMIC_ACQUIRE);
        w = __atomic_load_n(&t->weight, __ATOMIC_ACQUIRE);
        if (!(s1 & 1) && __atomic_load_n(&t->seq, __ATOMIC_RELAXED) == s1)
            break;
    }
    if (tid != id)
        return -ESTALE;
    /* Out of range (a torn or foreign write): the class and weight everyone has by default. */
    *priority = p <= GPUSLICE_PRIORITY_LATENCY ? p : GPUSLICE_PRIORITY_UNSET;
    *weight = w <= GPUSLICE_WEIGHT_MAX ? w : 0;
    return 0;
}

int gs_node_compute_any(const struct gpuslice_node *n, int i)
{
    if (i < 0 || i >= GPUSLICE_NODE_MAX_TENANTS)
        return 0;
    return (__atomic_load_n(&n->tenant[i].flags, __ATOMIC_RELAXED) & GPUSLICE_NODE_COMPUTE_ANY) !=
           0;
}

uint32_t gs_node_member_tenant(const struct gpuslice_node *n, uint32_t pid_ns, pid_t pid,
                               uint64_t start)
{
    int i;

    for (i = 0; i < GPUSLICE_NODE_MAX_MEMBERS; i++) {
        const struct gpuslice_node_member *m = &n->member[i];
        uint32_t t = __atomic_load_n(&m->tenant, __ATOMIC_ACQUIRE);

        if (t == 0 || __atomic_load_n(&m->pid, __ATOMIC_RELAXED) != pid ||
            __atomic_load_n(&m->start_time, __ATOMIC_RELAXED) != start ||
            __atomic_load_n(&m->pid_ns, __ATOMIC_RELAXED) != pid_ns)
            continue;
        if (__atomic_load_n(&m->tenant, __ATOMIC_ACQUIRE) == t)
            return t;
    }
    return 0;
}

uint32_t gs_node_lineage_tenant(const struct gpuslice_node *n)
{
    uint32_t ns = gs_proc_self_ns(), t;
    pid_t pid = getpid();
    int gen;

    if (ns == 0)
        return 0;
    /*
     * Each ancestor is looked up by its start time too: a parent that exits and whose PID
     * is taken by another process ends the walk there.
     */
    /*
     * PID 1 too: in a container's PID namespace it is the container's first process, which
     * the daemon joins to its pod's tenant (the walk ends there).
     */
    for (gen = 0; gen < 64 && pid >= 1; gen++) {
        uint64_t start = gs_proc_start_time(pid);

        if (start == 0)
            break;
        if ((t = gs_node_member_tenant(n, ns, pid, start)) != 0)
            return t;
        if (pid == 1)
            break;
        pid = gs_proc_parent(pid);
    }
    return 0;
}

void gs_node_write_begin(struct gpuslice_node *n, int i)
{
    /*
     * Odd already: a daemon killed in the middle of a write; it stays odd until we end. An
     * acquiring read-modify-write: the entry's stores that follow cannot come before it.
     */
    __atomic_fetch_or(&n->tenant[i].seq, 1u, __ATOMIC_ACQ_REL);
}

void gs_node_write_end(struct gpuslice_node *n, int i)
{
    struct gpuslice_node_tenant *t = &n->tenant[i];
    uint32_t s = __atomic_load_n(&t->seq, __ATOMIC_RELAXED);

    __atomic_store_n(&t->seq, (s | 1) + 1, __ATOMIC_RELEASE);
}

void gs_node_write_tenant(struct gpuslice_node *n, int i, const struct gpuslice_node_tenant *p)
{
    struct gpuslice_node_tenant c = *p;
    const uint64_t *s = (const uint64_t *)&c;
    uint64_t *d = (uint64_t *)&n->tenant[i];
    size_t k;

    gs_node_write_begin(n, i);
    /*
     * The first word holds the sequence beside the id: it is written as it is now (odd), never
     * as p had it (even, or 0), which would let a reader take the half-written entry for whole.
     */
    c.seq = __atomic_load_n(&n->tenant[i].seq, __ATOMIC_RELAXED);
    for (k = 0; k < sizeof(c) / 8; k++)
        __atomic_store_n(&d[k], s[k], __ATOMIC_RELAXED);
    gs_node_write_end(n, i);
}
