/*
 * A tenant's shared state: creation, validation on attach, the robust lock,
 * charging and reclaiming the usage of processes that died.
 */
#include "common/tenant.h"
#include "common/shm.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/env.h"

#define LOCK_WAIT_NS 2000000000ULL /* the longest any lock of a tenant is waited for */
#define LOCK_NAP_NS 5000000L       /* a waiter re-checks the holder this often */

const char *gs_tenant_dir(void)
{
    const char *d = getenv(GS_ENV_RUN_DIR);
    return d && *d ? d : "/dev/shm";
}

const char *gs_tenant_dir_relative(void)
{
    const char *d = getenv(GS_ENV_RUN_DIR);
    return d && *d && *d != '/' ? d : NULL;
}

/*
 * Whether the process known as pid in PID namespace ns, started at start, is
 * alive, as this reader can tell. In this reader's own namespace (or an
 * unknown one) the PID is checked as it is. From the initial namespace the
 * process is looked for by its namespace and inner PID: host, when not 0,
 * is the PID it was found by (-1: looked for under the lock and not found);
 * with scan, /proc is searched where host is 0. A process the reader cannot
 * judge (from a third namespace, or whose namespace does not show) is alive.
 */
static int ns_alive(int32_t pid, uint32_t ns, uint64_t start, int32_t host, int scan)
{
    uint32_t mine;

    if (pid <= 0)
        return 0;
    if (ns == 0 || ns == (mine = gs_proc_self_ns()))
        return gs_proc_start_time(pid) == start;
    if (mine != GS_PID_NS_INIT)
        return 1;
    if (host == -1)
        return 0;
    /* A host PID that does not name it (the word is its tenant's) is as none: looked for. */
    if (host > 0 && gs_proc_is(host, ns, pid, start) != 0)
        return 1;
    return scan ? gs_proc_find(ns, pid, start, 0) != 0 : 1;
}

static int slot_alive(const struct gpuslice_tenant *t, int i)
{
    const struct gpuslice_tenant_proc *p = &t->proc[i];

    return ns_alive(__atomic_load_n(&p->pid, __ATOMIC_ACQUIRE),
                    __atomic_load_n(&p->pid_ns, __ATOMIC_RELAXED),
                    __atomic_load_n(&p->start_time, __ATOMIC_RELAXED),
                    __atomic_load_n(&t->host_pid[i], __ATOMIC_RELAXED), 0);
}

int gs_tenant_creator_alive(const struct gpuslice_tenant *t)
{
    return ns_alive(__atomic_load_n(&t->creator_pid, __ATOMIC_RELAXED),
                    __atomic_load_n(&t->creator_pid_ns, __ATOMIC_RELAXED),
                    __atomic_load_n(&t->creator_start_time, __ATOMIC_RELAXED), 0, 1);
}

/*
 * The processes of other PID namespaces whose PID this initial-namespace reader
 * has not found yet (host_pid 0), or whose host_pid does not name them (a word
 * their tenant may write: a wrong PID, or one written over a slot taken again),
 * each looked for in one pass over /proc: their slots into *slot, the host_pid
 * each had into *had, their count returned (0 from any other namespace). *v,
 * *slot and *had are allocated when there are any (the caller frees them).
 */
int gs_tenant_hosts_wanted(const struct gpuslice_tenant *t, struct gs_proc_want **v, int **slot,
                           int32_t **had)
{
    int i, n = 0;

    *v = NULL;
    *slot = NULL;
    *had = NULL;
    if (gs_proc_self_ns() != GS_PID_NS_INIT)
        return 0;
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *p = &t->proc[i];
        int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_ACQUIRE);
        uint32_t ns = __atomic_load_n(&p->pid_ns, __ATOMIC_RELAXED);
        int32_t host = __atomic_load_n(&t->host_pid[i], __ATOMIC_RELAXED);
        uint64_t start = __atomic_load_n(&p->start_time, __ATOMIC_RELAXED);

        if (pid <= 0 || ns == 0 || ns == GS_PID_NS_INIT || host < 0 ||
            (host > 0 && gs_proc_is(host, ns, pid, start) != 0))
            continue;
        if (*v == NULL && ((*v = calloc(GPUSLICE_MAX_PROCS, sizeof(**v))) == NULL ||
                           (*slot = calloc(GPUSLICE_MAX_PROCS, sizeof(**slot))) == NULL ||
                           (*had = calloc(GPUSLICE_MAX_PROCS, sizeof(**had))) == NULL)) {
            free(*v);
            free(*slot);
            *v = NULL;
            *slot = NULL;
            return 0; /* (then not looked for: counted alive) */
        }
        (*v)[n].ns = ns;
        (*v)[n].inner = pid;
        (*v)[n].start = start;
        (*had)[n] = host;
        (*slot)[n++] = i;
    }
    gs_proc_find_all(*v, n);
    return n;
}

int gs_tenant_procs_alive(const struct gpuslice_tenant *t, pid_t seen[GPUSLICE_MAX_PROCS])
{
    struct gs_proc_want *v;
    int i, n, alive = 0, *slot;
    int32_t *had;

    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        const struct gpuslice_tenant_proc *p = &t->proc[i];
        int32_t pid = __atomic_load_n(&p->pid, __ATOMIC_ACQUIRE);
        uint32_t ns = __atomic_load_n(&p->pid_ns, __ATOMIC_RELAXED);
        int32_t host = __atomic_load_n(&t->host_pid[i], __ATOMIC_RELAXED);

        seen[i] = 0;
        if (!slot_alive(t, i))
            continue;
        /* The PID this reader sees: its own namespace's, or the one found there. */
        if (ns == 0 || ns == gs_proc_self_ns())
            seen[i] = pid;
        else
            seen[i] = host > 0 ? host : -1;
    }
    n = gs_tenant_hosts_wanted(t, &v, &slot, &had);
    for (i = 0; i < n; i++)
        seen[slot[i]] = v[i].found > 0 ? v[i].found : v[i].found < 0 ? -1 : 0;
    free(v);
    free(slot);
    free(had);
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++)
        alive += seen[i] != 0;
    return alive;
}

static void init_header(struct gpuslice_tenant *t, const char *name)
{
    struct timespec ts;

    memset(t, 0, sizeof(*t));
    t->owner_uid = (uint32_t)geteuid(); /* the file's owner: checked against it on every open */
    t->owner_user_ns = gs_proc_user_ns();
    t->creator_pid_ns = gs_proc_pid_ns(0);
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
    /* Its space first: a full filesystem is an error here, not SIGBUS at the first write. */
    if ((r = gs_shm_allocate(fd, sizeof(*t))) < 0) {
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
    uid_t owner = 0;
    int r;

    /* A process attaches to its own user's tenant; root may join anyone's (sudo inside run). */
    if ((r = gs_tenant_open_owned(path, 1, &owner, out)) < 0)
        return r;
    if (owner != geteuid() && geteuid() != 0) {
        gs_tenant_close(*out);
        *out = NULL;
        return GS_EUNSAFE;
    }
    return 0;
}

int gs_tenant_open_at(const char *path, const char *name, struct gpuslice_tenant **out,
                      int *created)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX], tmp[PATH_MAX];
    struct gpuslice_tenant *t;
    int r, tries;

    *created = 0;
    if (slash == NULL || (size_t)(slash - path) >= sizeof(dir))
        return -EINVAL;
    snprintf(dir, sizeof(dir), "%.*s", slash == path ? 1 : (int)(slash - path), path);
    for (tries = 0; tries < 3; tries++) {
        if ((r = gs_tenant_open(path, out)) != -ENOENT)
            return r;
        if ((r = gs_tenant_create(dir, name, tmp, sizeof(tmp), &t)) < 0)
            return r;
        /* link, unlike rename, never replaces: the first creator's file is the one. */
        r = link(tmp, path) < 0 ? -errno : 0;
        unlink(tmp);
        if (r == 0) {
            *out = t;
            *created = 1;
            return 0;
        }
        gs_tenant_close(t);
        if (r != -EEXIST)
            return r;
    }
    return -EAGAIN; /* made and removed by others three times over */
}

int gs_tenant_open_mode(const char *path, int writable, struct gpuslice_tenant **out)
{
    uid_t owner = 0;

    return gs_tenant_open_owned(path, writable, &owner, out);
}

/* Whether the n bytes (at most a page) at p are all zero. */
static int all_zero(const char *p, size_t n)
{
    static const char zero[4096];

    return memcmp(p, zero, n) == 0;
}

/*
 * A copy of the file, in memory of our own: a reader that maps another user's file
 * dies of SIGBUS when its owner truncates it, and a listing of every tenant must not
 * be stopped by one user who keeps doing so. A file cut short reads as no tenant.
 * Read a page at a time, and only the pages that hold something are written into the
 * copy: the others stay the anonymous mapping's untouched zero pages, so a copy of a
 * tenant with a few processes (most of its 1024 slots empty) holds a few pages, not 150
 * KiB (the daemon keeps up to 256 of them, twice, while it sweeps).
 */
static int snapshot(int fd, struct gpuslice_tenant **out)
{
    struct gpuslice_tenant *t;
    size_t got = 0;
    ssize_t n;
    char page[4096];

    t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t == MAP_FAILED)
        return -errno;
    while (got < sizeof(*t)) {
        size_t want = sizeof(page) - got % sizeof(page);

        if (want > sizeof(*t) - got)
            want = sizeof(*t) - got;
        n = pread(fd, page, want, (off_t)got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0 && got >= (size_t)GPUSLICE_TENANT_SIZE_4_1)
            break; /* a 4.1 file: what it lacks stays 0 */
        if (n <= 0) {
            munmap(t, sizeof(*t));
            return n < 0 ? -errno : GS_EABI;
        }
        if (!all_zero(page, (size_t)n))
            memcpy((char *)t + got, page, (size_t)n);
        got += (size_t)n;
    }
    *out = t;
    return 0;
}

int gs_tenant_open_owned(const char *path, int writable, uid_t *owner, struct gpuslice_tenant **out)
{
    int fd;

    /* O_NONBLOCK: a FIFO planted under a tenant's name must not hang us. */
    if ((fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return -errno;
    return gs_tenant_open_fd(fd, writable, path, owner, out);
}

int gs_tenant_open_fd(int fd, int writable, const char *what, uid_t *owner,
                      struct gpuslice_tenant **out)
{
    struct gpuslice_tenant *t;
    struct stat st;
    int r;

    if (fstat(fd, &st) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    /*
     * A later minor version may be larger: only the part this build knows is read. A reader
     * that only reads also takes a 4.1 file (a daemon upgraded while its tenants run), whose
     * missing counters read as 0. A writer takes a 4.2 or 4.3 file (a tenant that ran before
     * an upgrade), whose header's size says it has no activity words (classes.c).
     */
    if (!S_ISREG(st.st_mode) ||
        (size_t)st.st_size <
            (writable ? (size_t)GPUSLICE_TENANT_SIZE_4_3 : (size_t)GPUSLICE_TENANT_SIZE_4_1)) {
        close(fd);
        return GS_EABI;
    }
    /* Anyone but its owner could rewrite it under us: such a file is nobody's tenant. */
    if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        close(fd);
        return GS_EUNSAFE;
    }
    if (writable) {
        t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        r = t == MAP_FAILED ? -errno : 0;
    } else {
        r = snapshot(fd, &t);
    }
    close(fd);
    if (r < 0)
        return r;
    if (gs_shm_check((const struct gpuslice_shm_header *)t, (size_t)st.st_size,
                     GPUSLICE_TENANT_MAGIC, GPUSLICE_TENANT_ABI_MAJOR,
                     writable ? (size_t)GPUSLICE_TENANT_SIZE_4_3 : (size_t)GPUSLICE_TENANT_SIZE_4_1,
                     "tenant", what, NULL, 0) < 0 ||
        (!writable && GPUSLICE_ABI_MINOR(t->abi_version) < 1)) {
        munmap(t, sizeof(*t));
        return GS_EABI;
    }
    /*
     * Its header says whose it is; the file's owner is whose it is: they must agree where
     * both uids mean the same (a reader in the writer's user namespace).
     */
    if (__atomic_load_n(&t->owner_uid, __ATOMIC_RELAXED) != (uint32_t)st.st_uid &&
        (t->owner_user_ns == 0 || t->owner_user_ns == gs_proc_user_ns())) {
        munmap(t, sizeof(*t));
        return GS_EOWNER;
    }
    *owner = st.st_uid;
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
        __atomic_store_n(&t->dev[d].mem_used, sum, __ATOMIC_RELAXED);
    }
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Whether thread tid still exists (EPERM: it does, under another user). */
static int thread_alive(uint32_t tid)
{
    return tid != 0 && tid <= INT32_MAX && (kill((pid_t)tid, 0) == 0 || errno == EPERM);
}

/* lock.word is the low half of lock.holder (tenant_abi.h). */
_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the lock word is the holder's low half");

#define HOLDER_TID(v) ((uint32_t)(v) & ~GPUSLICE_LOCK_WAITERS)
#define HOLDER_NS(v) ((uint32_t)((v) >> 32))

/* The holder (lock.holder) that made this thread's last wait for a tenant's lock run out. */
static __thread __attribute__((tls_model("initial-exec"))) uint64_t blocked_by;

void gs_tenant_lock_blocker(uint32_t *tid, uint32_t *ns)
{
    *tid = HOLDER_TID(blocked_by);
    *ns = HOLDER_NS(blocked_by);
}

/*
 * Whether the holder in lock word v is gone: its thread no longer exists. A
 * TID means a thread only in its own PID namespace; in another it names
 * another thread or none, and taking a live holder for dead would let two
 * processes change the totals at once. So only a reader of the holder's own
 * namespace judges it; to any other reader (and to one that cannot read its own
 * namespace) the holder is alive, waited for within the bound and then
 * refused. A word with no namespace was written by an older build (or by
 * hand) and is judged here, as those builds judged every holder.
 */
static int holder_gone(uint64_t v)
{
    uint32_t ns = HOLDER_NS(v), mine;

    if (ns != 0 && ((mine = gs_proc_self_ns()) == 0 || ns != mine))
        return 0;
    return !thread_alive(HOLDER_TID(v));
}

/*
 * Takes t's lock within wait_ns: 0, or -ETIMEDOUT (the holder is then told by
 * gs_tenant_lock_blocker). The word is only ever compared, exchanged and
 * waited on: whatever another user wrote into it costs at most the wait.
 */
static int lock_within(struct gpuslice_tenant *t, uint64_t wait_ns)
{
    uint64_t *h = &t->lock.holder, v = 0, deadline;
    uint64_t me = (uint64_t)gs_proc_self_ns() << 32 | (uint32_t)syscall(SYS_gettid);
    int saved = errno;

    if (__atomic_compare_exchange_n(h, &v, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return 0;
    deadline = mono_ns() + wait_ns;
    for (;;) {
        struct timespec nap = { 0, LOCK_NAP_NS };

        /* Every path round the loop counts against the bound, whatever the word does. */
        if (mono_ns() >= deadline) {
            blocked_by = v;
            errno = saved;
            return -ETIMEDOUT;
        }
        if ((uint32_t)v == 0) {
            /* Free (a high half left by hand is overwritten): take it, keeping the waiters bit. */
            if (__atomic_compare_exchange_n(h, &v, me | GPUSLICE_LOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED))
                break;
            continue;
        }
        if (holder_gone(v)) {
            /* Its holder died mid-update: the per-process records are the truth. */
            if (__atomic_compare_exchange_n(h, &v, me | GPUSLICE_LOCK_WAITERS, 0, __ATOMIC_ACQUIRE,
                                            __ATOMIC_RELAXED)) {
                repair_totals(t);
                break;
            }
            continue;
        }
        if (!(v & GPUSLICE_LOCK_WAITERS) &&
            !__atomic_compare_exchange_n(h, &v, v | GPUSLICE_LOCK_WAITERS, 0, __ATOMIC_RELAXED,
                                         __ATOMIC_RELAXED))
            continue;
        syscall(SYS_futex, &t->lock.word, FUTEX_WAIT, (uint32_t)v | GPUSLICE_LOCK_WAITERS, &nap,
                NULL, 0);
        v = __atomic_load_n(h, __ATOMIC_RELAXED);
    }
    errno = saved;
    return 0;
}

int gs_tenant_lock(struct gpuslice_tenant *t)
{
    return lock_within(t, LOCK_WAIT_NS);
}

static int lock_timed(struct gpuslice_tenant *t, int seconds)
{
    return lock_within(t, (uint64_t)seconds * 1000000000ULL);
}

void gs_tenant_unlock(struct gpuslice_tenant *t)
{
    int saved = errno;

    if (__atomic_exchange_n(&t->lock.holder, 0, __ATOMIC_RELEASE) & GPUSLICE_LOCK_WAITERS)
        syscall(SYS_futex, &t->lock.word, FUTEX_WAKE, 1, NULL, NULL, 0);
    errno = saved;
}

static void free_slot_locked(struct gpuslice_tenant *t, int slot)
{
    struct gpuslice_tenant_proc *p = &t->proc[slot];
    int d;

    for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
        uint64_t u = p->mem_used[d], total = t->dev[d].mem_used;
        __atomic_store_n(&t->dev[d].mem_used, total >= u ? total - u : 0, __ATOMIC_RELAXED);
        __atomic_store_n(&p->mem_used[d], 0, __ATOMIC_RELAXED);
    }
    p->start_time = 0;
    p->pid_ns = 0;
    __atomic_store_n(&t->host_pid[slot], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&p->pid, 0, __ATOMIC_RELEASE);
}

int gs_tenant_reap_locked(struct gpuslice_tenant *t)
{
    int i, n = 0;

    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        if (t->proc[i].pid > 0 && !slot_alive(t, i)) {
            free_slot_locked(t, i);
            n++;
        }
    }
    return n;
}

/*
 * Where this reader is in the initial PID namespace: finds, without the lock,
 * the PID of each process of another namespace not found yet, and keeps what
 * it found in host_pid under the lock (-1: not found), for the slot as it was
 * when looked for (a slot taken again meanwhile is left alone).
 */
static void find_hosts(struct gpuslice_tenant *t)
{
    struct gs_proc_want *v;
    int *slot, i, n;
    int32_t *had;

    n = gs_tenant_hosts_wanted(t, &v, &slot, &had);
    if (n > 0 && gs_tenant_lock(t) == 0) {
        for (i = 0; i < n; i++) {
            const struct gpuslice_tenant_proc *p = &t->proc[slot[i]];

            if (v[i].found != -1 && p->pid == v[i].inner && p->pid_ns == v[i].ns &&
                p->start_time == v[i].start && t->host_pid[slot[i]] == had[i])
                __atomic_store_n(&t->host_pid[slot[i]], v[i].found > 0 ? v[i].found : -1,
                                 __ATOMIC_RELAXED);
        }
        gs_tenant_unlock(t);
    }
    free(v);
    free(slot);
    free(had);
}

int gs_tenant_reap(struct gpuslice_tenant *t)
{
    int r;

    find_hosts(t);
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
        uint32_t ns = gs_proc_pid_ns(pid == getpid() ? 0 : pid);

        memset(&t->proc[slot], 0, sizeof(t->proc[slot]));
        t->proc[slot].start_time = start;
        t->proc[slot].pid_ns = ns;
        t->host_pid[slot] = ns == GS_PID_NS_INIT ? (int32_t)pid : 0;
        __atomic_store_n(&t->proc[slot].pid, (int32_t)pid, __ATOMIC_RELEASE);
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
        d->compute_limit =
            ceiling(t->set_flags & GPUSLICE_SET_COMPUTE ? t->set_compute_limit : compute_limit);
        d->ordinal = ordinal;
        memcpy(d->uuid, uuid, 16);
        if (d->compute_limit)
            __atomic_store_n(&t->compute_any, 1, __ATOMIC_RELEASE);
        found = i;
    }
    gs_tenant_unlock(t);
    return found >= 0 ? found : -ENOSPC;
}

static int has_keys(const struct gs_limits *l)
{
    int i;

    for (i = 0; l && i < l->n; i++)
        if (l->e[i].key != GS_KEY_ALL)
            return 1;
    return 0;
}

/* Whether a key of l names the device at index i with UUID string u. */
static int names(const struct gs_limits *l, int i, const char *u)
{
    int k;

    for (k = 0; l && k < l->n; k++)
        if ((l->e[k].key == GS_KEY_INDEX && l->e[k].index == i) ||
            (l->e[k].key == GS_KEY_UUID && strcasecmp(l->e[k].uuid, u) == 0))
            return 1;
    return 0;
}

static uint64_t default_of(const struct gs_limits *l)
{
    return l ? gs_limits_lookup(l, -1, NULL) : 0;
}

int gs_tenant_fix_limits(struct gpuslice_tenant *t, const struct gs_limits *mem,
                         const struct gs_limits *compute, int n, const uint8_t (*uuids)[16])
{
    int i, e, r, any;

    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    t->set_mem_limit = default_of(mem);
    t->set_compute_limit = ceiling((uint32_t)default_of(compute));
    t->set_flags |= GPUSLICE_SET_MEMORY | GPUSLICE_SET_COMPUTE;
    any = t->set_compute_limit != 0;
    /* Devices named by a key get their entries now; the rest take the defaults when used. */
    for (i = 0, e = 0; i < n && i < GPUSLICE_MAX_DEVICES && e < GPUSLICE_MAX_DEVICES &&
                       (has_keys(mem) || has_keys(compute));
         i++) {
        struct gpuslice_tenant_device *d = &t->dev[e];
        char s[GS_UUID_STRLEN];

        gs_format_uuid(uuids[i], s);
        if (!names(mem, i, s) && !names(compute, i, s))
            continue;
        e++;
        memset(d, 0, sizeof(*d));
        memcpy(d->uuid, uuids[i], 16);
        d->ordinal = i;
        d->mem_limit = mem ? gs_limits_lookup(mem, i, s) : 0;
        d->compute_limit = ceiling(compute ? (uint32_t)gs_limits_lookup(compute, i, s) : 0);
        any |= d->compute_limit != 0;
    }
    if (any)
        __atomic_store_n(&t->compute_any, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&t->limits_fixed, 1, __ATOMIC_RELEASE);
    gs_tenant_unlock(t);
    return 0;
}

void gs_tenant_set_sched(struct gpuslice_tenant *t, uint32_t priority, uint32_t weight)
{
    /* (Sequentially consistent: gs_tenant_set's recount of compute_any races with these.) */
    if (priority)
        __atomic_store_n(&t->priority, priority, __ATOMIC_SEQ_CST);
    if (weight)
        __atomic_store_n(&t->weight, weight, __ATOMIC_SEQ_CST);
    /* The launch hooks are armed at the next launch: the class or weight governs them. */
    if (priority || weight)
        __atomic_store_n(&t->compute_any, 1, __ATOMIC_SEQ_CST);
}

static void set_one(struct gpuslice_tenant_device *d, enum gs_set_kind kind, uint64_t v)
{
    if (kind == GS_SET_MEMORY) {
        __atomic_store_n(&d->mem_limit, v, __ATOMIC_RELEASE);
        return;
    }
    uint32_t old = __atomic_exchange_n(&d->compute_limit, ceiling((uint32_t)v), __ATOMIC_ACQ_REL);

    if (old != ceiling((uint32_t)v)) {
        int64_t tok = __atomic_load_n(&d->compute_tokens, __ATOMIC_ACQUIRE);

        /*
         * A changed ceiling starts from an empty budget (see gs_budget_refill): one left full
         * by an idle or uncapped spell would let a load just over the new ceiling run past it
         * until the window's worth was spent, 45 ms at 90%, which took over a second. A debt
         * owed under a ceiling stays owed under the next (changing the ceiling by a point
         * does not forgive it); one left from before an uncapped spell is stale and dropped.
         * In this order: a refill that began before the reset sees the epoch move and takes
         * its addition back (gs_budget_refill).
         */
        __atomic_store_n(&d->compute_refill_ns, 0, __ATOMIC_RELEASE);
        __atomic_add_fetch(&d->compute_epoch, 1, __ATOMIC_ACQ_REL);
        if (old == 0)
            __atomic_store_n(&d->compute_tokens, 0, __ATOMIC_RELEASE);
        else
            while (tok > 0 && !__atomic_compare_exchange_n(&d->compute_tokens, &tok, 0, 0,
                                                           __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
                ;
    }
}

int gs_tenant_set(struct gpuslice_tenant *t, enum gs_set_kind kind, const struct gs_limits *l,
                  char *err, size_t errlen)
{
    char uuid[GS_UUID_STRLEN];
    int i, j, r, matched;

    /* Bounded: the lock lives in a file its owner controls, and root may be the caller. */
    if ((r = lock_timed(t, 2)) < 0) {
        uint32_t tid, ns;

        gs_tenant_lock_blocker(&tid, &ns);
        if (r == -ETIMEDOUT)
            snprintf(err, errlen,
                     "cannot lock the tenant's state: thread %u%s has held it for 2 s (a process "
                     "of the tenant stopped inside it, or the lock word written by hand)",
                     tid, ns && ns != gs_proc_self_ns() ? " of another PID namespace" : "");
        else
            snprintf(err, errlen, "cannot lock the tenant's state: %s", strerror(-r));
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
                snprintf(err, errlen, "the tenant uses no device GPU-%s", l->e[j].uuid + 4);
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
        /* Launches pass straight through again once no ceiling, class or weight is left. */
        uint32_t any = ((t->set_flags & GPUSLICE_SET_COMPUTE) && t->set_compute_limit) ||
                       __atomic_load_n(&t->priority, __ATOMIC_ACQUIRE) != GPUSLICE_PRIORITY_UNSET ||
                       __atomic_load_n(&t->weight, __ATOMIC_ACQUIRE) != 0;
        for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
            any |= !uuid_empty(t->dev[i].uuid) && t->dev[i].compute_limit;
        __atomic_store_n(&t->compute_any, any ? 1u : 0u, __ATOMIC_SEQ_CST);
        /*
         * A class or weight set meanwhile (gs_tenant_set_sched, a process's environment: not
         * under the lock) stored its value before its own 1 here: seen now, or its 1 comes after.
         */
        if (!any && (__atomic_load_n(&t->priority, __ATOMIC_SEQ_CST) != GPUSLICE_PRIORITY_UNSET ||
                     __atomic_load_n(&t->weight, __ATOMIC_SEQ_CST) != 0))
            __atomic_store_n(&t->compute_any, 1u, __ATOMIC_SEQ_CST);
    }
    gs_tenant_unlock(t);
    return 0;
}

int64_t gs_budget_refill(struct gpuslice_tenant_device *d, uint64_t now_ns, int64_t cap)
{
    return gs_budget_refill_at(d, now_ns, cap,
                               __atomic_load_n(&d->compute_limit, __ATOMIC_RELAXED));
}

int64_t gs_budget_refill_at(struct gpuslice_tenant_device *d, uint64_t now_ns, int64_t cap,
                            uint32_t pct)
{
    uint32_t epoch = __atomic_load_n(&d->compute_epoch, __ATOMIC_ACQUIRE);
    uint64_t last = __atomic_load_n(&d->compute_refill_ns, __ATOMIC_ACQUIRE);
    int64_t tok;

    if (now_ns > last && __atomic_compare_exchange_n(&d->compute_refill_ns, &last, now_ns, 0,
                                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        /*
         * A budget never refilled (a new device entry, a changed ceiling) starts empty: it
         * fills from now. The first refill after a long pause would overflow: the cap bounds
         * it anyway.
         */
        uint64_t dt = now_ns - last;
        int64_t add = last == 0 ? 0 : dt > 100000000000ULL ? cap : (int64_t)(dt * pct / 100);
        tok = __atomic_add_fetch(&d->compute_tokens, add, __ATOMIC_ACQ_REL);
        /*
         * The budget was reset since we read the time it was last refilled: what we added was
         * earned under the old ceiling. Taken back (after a reset that already emptied it this
         * may leave it up to one addition short: a later start, never a burst).
         */
        if (add && __atomic_load_n(&d->compute_epoch, __ATOMIC_ACQUIRE) != epoch)
            tok = __atomic_sub_fetch(&d->compute_tokens, add, __ATOMIC_ACQ_REL);
        while (tok > cap && !__atomic_compare_exchange_n(&d->compute_tokens, &tok, cap, 0,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
        return tok > cap ? cap : tok;
    }
    return __atomic_load_n(&d->compute_tokens, __ATOMIC_ACQUIRE);
}

void gs_budget_charge(struct gpuslice_tenant_device *d, uint64_t ns, int64_t floor)
{
    gs_budget_settle(d, (int64_t)ns, ns, floor);
}

int64_t gs_budget_settle(struct gpuslice_tenant_device *d, int64_t take, uint64_t busy,
                         int64_t floor)
{
    int64_t tok = __atomic_sub_fetch(&d->compute_tokens, take, __ATOMIC_ACQ_REL), forgiven = 0;

    while (tok < floor && !__atomic_compare_exchange_n(&d->compute_tokens, &tok, floor, 0,
                                                       __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    if (tok < floor && take > 0)
        forgiven = floor - tok < take ? floor - tok : take;
    __atomic_add_fetch(&d->compute_busy_ns, busy, __ATOMIC_RELAXED);
    return take - forgiven;
}

/* Whether bytes more on d would cross limit; never wraps, whatever the file holds. */
static int over_limit(const struct gpuslice_tenant_device *d, uint64_t limit, uint64_t bytes)
{
    return limit && (bytes > limit || d->mem_used > limit - bytes);
}

int gs_tenant_charge(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes, int force)
{
    return gs_tenant_charge_within(t, slot, dev, bytes, force ? 0 : GS_TENANT_OWN_LIMIT);
}

int gs_tenant_charge_within(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes,
                            uint64_t limit)
{
    int force = limit == 0;
    struct gpuslice_tenant_device *d;
    uint64_t *mine;
    int r;

    if (slot < 0 || slot >= GPUSLICE_MAX_PROCS || dev < 0 || dev >= GPUSLICE_MAX_DEVICES)
        return -EINVAL;
    d = &t->dev[dev];
    mine = &t->proc[slot].mem_used[dev];
    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    if (limit == GS_TENANT_OWN_LIMIT)
        limit = d->mem_limit;
    /* No request may wrap a total: one of about 2^64 bytes is refused even without a limit. */
    if (!force && over_limit(d, limit, bytes))
        gs_tenant_reap_locked(t); /* dead processes' usage first */
    if (bytes > UINT64_MAX - d->mem_used || bytes > UINT64_MAX - *mine ||
        (!force && over_limit(d, limit, bytes))) {
        gs_tenant_unlock(t);
        return GS_EOVERLIMIT;
    }
    /* Written atomically: displays and the views read them without the lock. */
    __atomic_store_n(&d->mem_used, d->mem_used + bytes, __ATOMIC_RELAXED);
    __atomic_store_n(mine, *mine + bytes, __ATOMIC_RELAXED);
    gs_tenant_unlock(t);
    return 0;
}

int gs_tenant_uncharge(struct gpuslice_tenant *t, int slot, int dev, uint64_t bytes)
{
    struct gpuslice_tenant_device *d;
    uint64_t *mine;
    int r;

    if (slot < 0 || slot >= GPUSLICE_MAX_PROCS || dev < 0 || dev >= GPUSLICE_MAX_DEVICES)
        return -EINVAL;
    if ((r = gs_tenant_lock(t)) < 0)
        return r;
    d = &t->dev[dev];
    mine = &t->proc[slot].mem_used[dev];
    if (bytes > *mine)
        bytes = *mine;
    __atomic_store_n(mine, *mine - bytes, __ATOMIC_RELAXED);
    __atomic_store_n(&d->mem_used, d->mem_used >= bytes ? d->mem_used - bytes : 0,
                     __ATOMIC_RELAXED);
    gs_tenant_unlock(t);
    return 0;
}

uint64_t gs_tenant_live_mem_used(const struct gpuslice_tenant *t, int dev)
{
    pid_t seen[GPUSLICE_MAX_PROCS];
    uint64_t sum = 0;
    int i;

    gs_tenant_procs_alive(t, seen);
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++)
        if (seen[i] != 0)
            sum += __atomic_load_n(&t->proc[i].mem_used[dev], __ATOMIC_RELAXED);
    return sum;
}

int gs_tenant_live_procs(struct gpuslice_tenant *t)
{
    pid_t seen[GPUSLICE_MAX_PROCS];

    return gs_tenant_procs_alive(t, seen);
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
        if (!gs_tenant_creator_alive(t) && gs_tenant_live_procs(t) == 0) {
            if (unlink(path) == 0)
                n++;
        }
        gs_tenant_close(t);
    }
    closedir(d);
    return n;
}
