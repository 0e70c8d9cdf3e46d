/*
 * A tenant's shared state: creation, validation on attach, the robust lock,
 * charging and reclaiming the usage of processes that died.
 */
#include "common/tenant.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"

_Static_assert(sizeof(pthread_mutex_t) <= 64, "mutex fits the ABI's lock field");

static pthread_mutex_t *tenant_mutex(struct gpuslice_tenant *t)
{
    return (pthread_mutex_t *)(void *)t->lock.raw;
}

const char *gs_tenant_dir(void)
{
    const char *d = getenv("GPUSLICE_RUN_DIR");
    return d && *d ? d : "/dev/shm";
}

uint64_t gs_proc_start_time(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long long v = 0;
    ssize_t n;
    int fd, field;

    snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: count from the last ')'. */
    if ((p = strrchr(buf, ')')) == NULL)
        return 0;
    p++;
    for (field = 3; field < 22 && p; field++)
        p = strchr(p + 1, ' ');
    if (p == NULL || sscanf(p + 1, "%llu", &v) != 1)
        return 0;
    /* A zombie has exited: its memory is gone, treat it as dead. */
    {
        char *state = strrchr(buf, ')');
        if (state && state[1] == ' ' && (state[2] == 'Z' || state[2] == 'X'))
            return 0;
    }
    return v ? v : 1;
}

static int proc_alive(const struct gpuslice_tenant_proc *p)
{
    return p->pid > 0 && gs_proc_start_time(p->pid) == p->start_time;
}

static void init_header(struct gpuslice_tenant *t, const char *name)
{
    pthread_mutexattr_t a;
    struct timespec ts;

    memset(t, 0, sizeof(*t));
    pthread_mutexattr_init(&a);
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    pthread_mutex_init(tenant_mutex(t), &a);
    pthread_mutexattr_destroy(&a);
    t->owner_uid = (uint32_t)getuid();
    t->creator_pid = (int32_t)getpid();
    t->creator_start_time = gs_proc_start_time(getpid());
    clock_gettime(CLOCK_REALTIME, &ts);
    t->created_unix_ns = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
    snprintf(t->name, sizeof(t->name), "%s", name ? name : "");
    t->abi_version = GPUSLICE_TENANT_ABI_VERSION;
    t->size = (uint32_t)sizeof(*t);
    __atomic_store_n(&t->magic, GPUSLICE_TENANT_MAGIC, __ATOMIC_RELEASE);
}

int gs_tenant_create(const char *dir, const char *name, char *path, size_t pathlen,
                     struct gpuslice_tenant **out)
{
    struct gpuslice_tenant *t;
    struct timespec ts;
    int fd, i, r;

    for (i = 0; i < 16; i++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        r = snprintf(path, pathlen, "%s/" GS_TENANT_PREFIX "%u-%d-%lx" GS_TENANT_SUFFIX, dir,
                     (unsigned)getuid(), (int)getpid(),
                     (unsigned long)(ts.tv_nsec ^ (ts.tv_sec << 20)) & 0xffffff);
        if (r < 0 || (size_t)r >= pathlen)
            return -ENAMETOOLONG;
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd >= 0)
            break;
        if (errno != EEXIST)
            return -errno;
    }
    if (fd < 0)
        return -EEXIST;
    if (ftruncate(fd, sizeof(*t)) < 0) {
        r = -errno;
        close(fd);
        unlink(path);
        return r;
    }
    t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (t == MAP_FAILED) {
        r = -errno;
        unlink(path);
        return r;
    }
    init_header(t, name);
    *out = t;
    return 0;
}

int gs_tenant_open(const char *path, struct gpuslice_tenant **out)
{
    return gs_tenant_open_mode(path, 1, out);
}

int gs_tenant_open_mode(const char *path, int writable, struct gpuslice_tenant **out)
{
    struct gpuslice_tenant *t;
    struct stat st;
    int fd, r;

    /* O_NONBLOCK: a FIFO planted under a tenant's name must not hang us. */
    if ((fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return -errno;
    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return GS_EABI;
    }
    if ((size_t)st.st_size != sizeof(*t)) {
        close(fd);
        return GS_EABI;
    }
    t = mmap(NULL, sizeof(*t), writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (t == MAP_FAILED)
        return -errno;
    if (__atomic_load_n(&t->magic, __ATOMIC_ACQUIRE) != GPUSLICE_TENANT_MAGIC ||
        t->abi_version != GPUSLICE_TENANT_ABI_VERSION || t->size != sizeof(*t)) {
        munmap(t, sizeof(*t));
        return GS_EABI;
    }
    *out = t;
    return 0;
}

int gs_tenant_anon(struct gpuslice_tenant **out)
{
    struct gpuslice_tenant *t;

    t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return -errno;
    init_header(t, "process");
    *out = t;
    return 0;
}

void gs_tenant_close(struct gpuslice_tenant *t)
{
    if (t)
        munmap(t, sizeof(*t));
}

/* Recomputes every device total from the per-process records. */
static void repair_totals(struct gpuslice_tenant *t)
{
    int d, p;

    for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
        uint64_t sum = 0;
        for (p = 0; p < GPUSLICE_MAX_PROCS; p++)
            if (t->proc[p].pid > 0)
                sum += t->proc[p].mem_used[d];
        t->dev[d].mem_used = sum;
    }
}

int gs_tenant_lock(struct gpuslice_tenant *t)
{
    int r = pthread_mutex_lock(tenant_mutex(t));

    if (r == EOWNERDEAD) {
        /* The holder died mid-update: the per-process records are the truth. */
        repair_totals(t);
        pthread_mutex_consistent(tenant_mutex(t));
        return 0;
    }
    return -r;
}

static int lock_timed(struct gpuslice_tenant *t, int seconds)
{
    struct timespec ts;
    int r;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += seconds;
    r = pthread_mutex_timedlock(tenant_mutex(t), &ts);
    if (r == EOWNERDEAD) {
        repair_totals(t);
        pthread_mutex_consistent(tenant_mutex(t));
        return 0;
    }
    return -r;
}

void gs_tenant_unlock(struct gpuslice_tenant *t)
{
    pthread_mutex_unlock(tenant_mutex(t));
}

static void free_slot_locked(struct gpuslice_tenant *t, int slot)
{
    struct gpuslice_tenant_proc *p = &t->proc[slot];
    int d;

    for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
        uint64_t u = p->mem_used[d];
        t->dev[d].mem_used = t->dev[d].mem_used >= u ? t->dev[d].mem_used - u : 0;
        p->mem_used[d] = 0;
    }
    p->start_time = 0;
    __atomic_store_n(&p->pid, 0, __ATOMIC_RELEASE);
}

int gs_tenant_reap_locked(struct gpuslice_tenant *t)
{
    int i, n = 0;

    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        if (t->proc[i].pid > 0 && !proc_alive(&t->proc[i])) {
            free_slot_locked(t, i);
            n++;
        }
    }
    return n;
}

int gs_tenant_reap(struct gpuslice_tenant *t)
{
    int r;

    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    r = gs_tenant_reap_locked(t);
    gs_tenant_unlock(t);
    return r;
}

int gs_tenant_proc_register(struct gpuslice_tenant *t, pid_t pid, uint64_t start)
{
    int i, r, slot = -1;

    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    for (i = 0; i < GPUSLICE_MAX_PROCS && slot < 0; i++)
        if (t->proc[i].pid == 0)
            slot = i;
    if (slot < 0 && gs_tenant_reap_locked(t) > 0)
        for (i = 0; i < GPUSLICE_MAX_PROCS && slot < 0; i++)
            if (t->proc[i].pid == 0)
                slot = i;
    if (slot >= 0) {
        memset(&t->proc[slot], 0, sizeof(t->proc[slot]));
        t->proc[slot].start_time = start;
        t->proc[slot].pid = (int32_t)pid;
    }
    gs_tenant_unlock(t);
    return slot >= 0 ? slot : GS_ENOSLOT;
}

void gs_tenant_proc_unregister(struct gpuslice_tenant *t, int slot)
{
    if (slot < 0 || slot >= GPUSLICE_MAX_PROCS || gs_tenant_lock(t) < 0)
        return;
    free_slot_locked(t, slot);
    gs_tenant_unlock(t);
}

static int uuid_empty(const uint8_t *u)
{
    int i;

    for (i = 0; i < 16; i++)
        if (u[i])
            return 0;
    return 1;
}

/* 100% is no ceiling: the entry stores 0. */
static uint32_t ceiling(uint32_t percent)
{
    return percent >= 100 ? 0 : percent;
}

int gs_tenant_device(struct gpuslice_tenant *t, const uint8_t uuid[16], int ordinal,
                     uint64_t mem_limit, uint32_t compute_limit)
{
    int i, r, found = -1;

    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    for (i = 0; i < GPUSLICE_MAX_DEVICES && found < 0; i++)
        if (!uuid_empty(t->dev[i].uuid) && memcmp(t->dev[i].uuid, uuid, 16) == 0)
            found = i;
    for (i = 0; i < GPUSLICE_MAX_DEVICES && found < 0; i++) {
        struct gpuslice_tenant_device *d = &t->dev[i];

        if (!uuid_empty(d->uuid))
            continue;
        memset(d, 0, sizeof(*d));
        d->mem_limit = t->set_flags & GPUSLICE_SET_MEMORY ? t->set_mem_limit : mem_limit;
        d->compute_limit = ceiling(t->set_flags & GPUSLICE_SET_COMPUTE ? t->set_compute_limit
                                                                       : compute_limit);
        d->ordinal = ordinal;
        memcpy(d->uuid, uuid, 16);
        if (d->compute_limit)
            __atomic_store_n(&t->compute_any, 1, __ATOMIC_RELEASE);
        found = i;
    }
    gs_tenant_unlock(t);
    return found >= 0 ? found : -ENOSPC;
}

static void set_one(struct gpuslice_tenant_device *d, enum gs_set_kind kind, uint64_t v)
{
    if (kind == GS_SET_MEMORY) {
        __atomic_store_n(&d->mem_limit, v, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&d->compute_limit, ceiling((uint32_t)v), __ATOMIC_RELEASE);
}

int gs_tenant_set(struct gpuslice_tenant *t, enum gs_set_kind kind, const struct gs_limits *l,
                  char *err, size_t errlen)
{
    char uuid[GS_UUID_STRLEN];
    int i, j, r, matched;

    /* Bounded: the lock lives in a file its owner controls, and root may be the caller. */
    if ((r = lock_timed(t, 2)) < 0) {
        snprintf(err, errlen, "cannot lock the tenant's state: %s",
                 r == -ETIMEDOUT ? "a process of the tenant has held it for 2 s" : strerror(-r));
        return r;
    }
    /* Check every entry first: a refused command changes nothing. */
    for (j = 0; j < l->n; j++) {
        if (l->e[j].key == GS_KEY_ALL)
            continue;
        matched = 0;
        for (i = 0; i < GPUSLICE_MAX_DEVICES && !matched; i++) {
            if (uuid_empty(t->dev[i].uuid))
                continue;
            gs_format_uuid(t->dev[i].uuid, uuid);
            matched = l->e[j].key == GS_KEY_INDEX ? t->dev[i].ordinal == l->e[j].index
                                                  : strcmp(uuid, l->e[j].uuid) == 0;
        }
        if (!matched) {
            if (l->e[j].key == GS_KEY_INDEX)
                snprintf(err, errlen, "the tenant uses no device with index %d", l->e[j].index);
            else
                snprintf(err, errlen, "the tenant uses no device %s", l->e[j].uuid);
            gs_tenant_unlock(t);
            return -ENODEV;
        }
    }
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++) {
        uint64_t v;

        if (uuid_empty(t->dev[i].uuid))
            continue;
        gs_format_uuid(t->dev[i].uuid, uuid);
        v = gs_limits_lookup(l, t->dev[i].ordinal, uuid);
        /* Devices no entry names keep what they have. */
        for (j = 0, matched = 0; j < l->n; j++)
            matched |= l->e[j].key == GS_KEY_ALL ||
                       (l->e[j].key == GS_KEY_INDEX && l->e[j].index == t->dev[i].ordinal) ||
                       (l->e[j].key == GS_KEY_UUID && strcmp(l->e[j].uuid, uuid) == 0);
        if (matched)
            set_one(&t->dev[i], kind, v);
    }
    for (j = 0; j < l->n; j++) {
        if (l->e[j].key != GS_KEY_ALL)
            continue;
        if (kind == GS_SET_MEMORY) {
            t->set_mem_limit = l->e[j].value;
            t->set_flags |= GPUSLICE_SET_MEMORY;
        } else {
            t->set_compute_limit = ceiling((uint32_t)l->e[j].value);
            t->set_flags |= GPUSLICE_SET_COMPUTE;
        }
    }
    if (kind == GS_SET_COMPUTE) {
        /* Launches pass straight through again once no ceiling is left. */
        uint32_t any = (t->set_flags & GPUSLICE_SET_COMPUTE) && t->set_compute_limit;
        for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
            any |= !uuid_empty(t->dev[i].uuid) && t->dev[i].compute_limit;
        __atomic_store_n(&t->compute_any, any ? 1u : 0u, __ATOMIC_RELEASE);
    }
    gs_tenant_unlock(t);
    return 0;
}

int64_t gs_budget_refill(struct gpuslice_tenant_device *d, uint64_t now_ns, int64_t cap)
{
    uint64_t last = __atomic_load_n(&d->compute_refill_ns, __ATOMIC_ACQUIRE);
    uint32_t pct = __atomic_load_n(&d->compute_limit, __ATOMIC_RELAXED);
    int64_t tok;

    if (now_ns > last && __atomic_compare_exchange_n(&d->compute_refill_ns, &last, now_ns, 0,
                                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /* The first refill after a long pause would overflow: the cap bounds it anyway. */
        uint64_t dt = now_ns - last;
        int64_t add = dt > 100000000000ULL ? cap : (int64_t)(dt * pct / 100);
        tok = __atomic_add_fetch(&d->compute_tokens, add, __ATOMIC_ACQ_REL);
        while (tok > cap && !__atomic_compare_exchange_n(&d->compute_tokens, &tok, cap, 0,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
        return tok > cap ? cap : tok;
    }
    return __atomic_load_n(&d->compute_tokens, __ATOMIC_ACQUIRE);
}

void gs_budget_charge(struct gpuslice_tenant_device *d, uint64_t ns, int64_t floor)
{
    int64_t tok = __atomic_sub_fetch(&d->compute_tokens, (int64_t)ns, __ATOMIC_ACQ_REL);

    while (tok < floor && !__atomic_compare_exchange_n(&d->compute_tokens, &tok, floor, 0,
                                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    __atomic_add_fetch(&d->compute_busy_ns, ns, __ATOMIC_RELAXED);
}

int gs_tenant_charge(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes, int force)
{
    struct gpuslice_tenant_device *d = &t->dev[dev];
    int r;

    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    if (!force && d->mem_limit && (d->mem_used + bytes > d->mem_limit || d->mem_used + bytes < bytes)) {
        gs_tenant_reap_locked(t);
        if (d->mem_used + bytes > d->mem_limit) {
            gs_tenant_unlock(t);
            return GS_EOVERLIMIT;
        }
    }
    d->mem_used += bytes;
    t->proc[slot].mem_used[dev] += bytes;
    gs_tenant_unlock(t);
    return 0;
}

void gs_tenant_uncharge(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes)
{
    struct gpuslice_tenant_device *d = &t->dev[dev];
    uint64_t *mine = &t->proc[slot].mem_used[dev];

    if (gs_tenant_lock(t) < 0)
        return;
    if (bytes > *mine)
        bytes = *mine;
    *mine -= bytes;
    d->mem_used = d->mem_used >= bytes ? d->mem_used - bytes : 0;
    gs_tenant_unlock(t);
}

int gs_tenant_live_procs(struct gpuslice_tenant *t)
{
    int i, n = 0;

    for (i = 0; i < GPUSLICE_MAX_PROCS; i++)
        if (proc_alive(&t->proc[i]))
            n++;
    return n;
}

int gs_tenant_sweep(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    char prefix[64], path[4096];
    int n = 0;

    if (d == NULL)
        return -errno;
    snprintf(prefix, sizeof(prefix), GS_TENANT_PREFIX "%u-", (unsigned)getuid());
    while ((de = readdir(d)) != NULL) {
        struct gpuslice_tenant *t;
        size_t len = strlen(de->d_name);

        if (strncmp(de->d_name, prefix, strlen(prefix)) != 0 || len < sizeof(GS_TENANT_SUFFIX) ||
            strcmp(de->d_name + len - strlen(GS_TENANT_SUFFIX), GS_TENANT_SUFFIX) != 0)
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (gs_tenant_open(path, &t) < 0)
            continue;
        if (gs_proc_start_time(t->creator_pid) != t->creator_start_time &&
            gs_tenant_live_procs(t) == 0) {
            if (unlink(path) == 0)
                n++;
        }
        gs_tenant_close(t);
    }
    closedir(d);
    return n;
}
