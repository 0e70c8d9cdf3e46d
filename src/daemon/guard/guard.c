/*
 * The guard: the daemon's own check of every managed tenant (API-made and pods) against the
 * ground truth. The interposer enforces limits inside each process, where it is fast, but a
 * process can write its tenant's state file (zero its usage words, fill its compute budget)
 * or never load the interposer at all (a static binary, a cleared LD_PRELOAD, the driver
 * called directly). So after every NVML sample the guard sums, per tenant and GPU, what NVML
 * says the tenant's processes hold and how much of the GPU's time they used, for processes
 * the kernel says are the tenant's (a pod's cgroup; the lineage of the tenant's members,
 * which only the daemon records), and compares the sums with the limits in the node segment,
 * which only the daemon writes. Nothing a tenant can write enters the decision.
 *
 * A tenant over a limit for guard-grace-ms is stopped by a rule the kernel enforces, by
 * policy: killed (SIGKILL through a pidfd, so a PID reused meanwhile is never hit), frozen
 * (SIGSTOP, judged at every pass by what the kernel holds: a process that a sibling's SIGCONT
 * or its own tracer let run again is killed, proc_held; a compute overdraft is frozen for as
 * long as it takes the tenant's average back to its ceiling, a memory one until its use is
 * under its limit again, as after an admin raises it), or only reported. Each action is an event (tenant.over_limit) and a metric. What it froze is
 * written to RUN_DIR/gpusliced.frozen, so a daemon killed meanwhile lets it go at its next
 * start instead of leaving processes stopped for good.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/node.h"
#include "common/proc.h"
#include "daemon/cgroup.h"
#include "daemon/daemon.h"
#include "daemon/dra.h"
#include "daemon/guard/guard.h"
#include "daemon/pods.h"

/* (tenant, GPU) pairs followed: every managed tenant on every GPU. */
#define MAX_ACCOUNTS (GPUSLICE_NODE_MAX_TENANTS * GD_MAX_DEVICES)
#define MAX_ATTR 4096                   /* processes whose tenant is known */
#define MAX_PIDS 32                     /* a tenant's processes on one GPU acted on at once */
#define RECHECK_NS 500000000ULL         /* a process in no tenant is looked at again after this */
#define COMPUTE_WINDOW_NS 1000000000ULL /* NVML's utilization covers the last second */
#define MAX_FREEZE_NS 10000000000ULL    /* one compute freeze at most */
#define FROZEN_FILE "gpusliced.frozen"

enum { KIND_MEMORY, KIND_COMPUTE, NKIND };

/* A thread of a frozen process as last judged (proc_held). */
struct thr_mark {
    pid_t tid;
    char state;  /* thread_of's letter */
    int moves;   /* judgements at which it had been switched out while traced */
    int tlooks;  /* judgements in a row, to this one, at which it was stopped ('T') */
    uint64_t sw; /* how often it had been switched out */
};

/* One tenant on one GPU. Under mu. */
struct account {
    uint32_t id; /* 0: free */
    uint8_t raw[16];
    uint64_t seen_ns; /* the last pass that saw it */
    uint64_t mem;     /* NVML's bytes, summed over its processes */
    int compute;      /* percent of the GPU's time, -1 no sample */
    uint64_t over_since[NKIND];
    int over_passes[NKIND];
    int frozen[NKIND]; /* held stopped for this kind */
    int nstopped;      /* the processes it stopped with SIGSTOP while frozen */
    pid_t stopped_pid[MAX_PIDS];
    uint64_t stopped_start[MAX_PIDS];
    uint8_t stopped_judged[MAX_PIDS]; /* judged held once (every thread sent its own stop) */
    struct thr_mark *marks[MAX_PIDS]; /* its threads at its last judgement (malloc'd) */
    int nmarks[MAX_PIDS];             /* how many; -1 unknown */
    int cgroup_frozen;       /* through its cgroup's cgroup.freeze (tenant-cgroup), not SIGSTOP */
    int reported[NKIND];     /* said once (guard-* report) for the time it stays over */
    uint64_t thaw_ns;        /* compute: when its freeze ends */
    uint64_t quiet_until_ns; /* compute: no judgement until its window is past the freeze */
    uint64_t actions[NKIND][3];
    uint64_t mem_limit; /* its memory limit at the last pass (UINT64_MAX: none) */
    int limit_seen;     /* mem_limit holds one */
    uint64_t allow;     /* use it had when its limit went below it, shrinking as it frees */
    int npid;
    pid_t pid[MAX_PIDS];
    uint64_t start[MAX_PIDS];
};

/* A process and the tenant the kernel says it is in. Under mu. */
struct attr {
    pid_t pid;
    uint64_t start;
    uint32_t tenant;
    uint64_t checked_ns;
    char leaf[PATH_MAX]; /* a pod's process: its container's cgroup (the second wall's); "" */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct account acc[MAX_ACCOUNTS];
static struct attr attrs[MAX_ATTR];
static enum gd_guard_action policy[NKIND];
static int passes; /* since the daemon started */
static const char *const kind_name[NKIND] = { "memory", "compute" };
static const char *const action_name[3] = { "killed", "frozen", "reported" };

int gd_guard_parse_action(const char *s, enum gd_guard_action *out)
{
    if (strcmp(s, "kill") == 0)
        *out = GD_GUARD_KILL;
    else if (strcmp(s, "freeze") == 0)
        *out = GD_GUARD_FREEZE;
    else if (strcmp(s, "report") == 0)
        *out = GD_GUARD_REPORT;
    else
        return -EINVAL;
    return 0;
}

/* Sends sig to the process pid started at start, never to another that took its PID. */
static int signal_proc(pid_t pid, uint64_t start, int sig)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0), r = 0;

    if (fd < 0)
        return -errno;
    /* The pidfd holds the process it was opened on: checked after, it is still that one. */
    if (gs_proc_start_time(pid) != start)
        r = -ESRCH;
    else if (syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0) < 0)
        r = -errno;
    close(fd);
    return r;
}

/* The uid tenant id belongs to (0, root's, when it is gone: only admins see its events). */
static uid_t owner_of(uint32_t id)
{
    int i = gs_node_find_tenant(gd.node, id);

    return i >= 0 ? (uid_t)gd.node->tenant[i].owner_uid : 0;
}

#define SIGBIT(sig) (1ULL << ((sig)-1)) /* a signal's bit in /proc's sets */
#define PF_EXITING_FLAG 0x4             /* a task's flags (stat's 9th field): exiting */
/*
 * A traced thread is moved by its tracer while it handles the freeze's stops (a stop it is
 * given, then the process's stop, as strace does it), which a loaded machine may spread over
 * a few judgements; more moves than this, and it is being run between them.
 */
#define TRACED_MOVES 3
/*
 * A look that finds a thread free (running, or nothing of the process stopped) is made again
 * this many times, CONFIRM_NS apart, before the process is taken for continued: a thread on
 * its way into the stop (a traced one its tracer has just given the stop, one leaving an
 * uninterruptible wait) is runnable for a moment, which a loaded machine stretches.
 */
#define CONFIRM_LOOKS 4
#define CONFIRM_NS 25000000L

/*
 * From the status file at path: the set key ("SigPnd:", "ShdPnd:") into *set, and into *sw
 * (when not NULL) how often the task has been switched out (voluntary and not). 0, or -1
 * when it is unreadable or lacks them.
 */
static int read_status(const char *path, const char *key, unsigned long long *set, uint64_t *sw)
{
    unsigned long long v, got = 0;
    char line[256];
    size_t kl = strlen(key);
    int have = 0, want = sw ? 3 : 1;
    FILE *f;

    if ((f = fopen(path, "re")) == NULL)
        return -1;
    while (have < want && fgets(line, sizeof(line), f)) {
        if (strncmp(line, key, kl) == 0 && sscanf(line + kl, "%llx", set) == 1)
            have++;
        else if (sw && (sscanf(line, "voluntary_ctxt_switches: %llu", &v) == 1 ||
                        sscanf(line, "nonvoluntary_ctxt_switches: %llu", &v) == 1)) {
            got += v;
            have++;
        }
    }
    fclose(f);
    if (sw)
        *sw = got;
    return have == want ? 0 : -1;
}

/*
 * One thread of pid, as proc_held judges it: 'T' stopped by a stop of its process, 't' traced
 * and stopped, '-' gone or going (a zombie, exiting, or killed), 'p' a SIGSTOP of its own
 * still pending (not yet taken), else its state letter; *sw how often it has been switched
 * out. Its own pending set is read before its state: a thread takes a stop and stops in one
 * step under the lock that reading the set takes, so a stop seen taken has its thread
 * stopped by the time the state is read.
 */
static char thread_of(pid_t pid, const char *tid, uint64_t *sw)
{
    char path[96], buf[512], *p, st;
    unsigned long long own;
    unsigned flags = 0;

    snprintf(path, sizeof(path), "/proc/%d/task/%.16s/status", (int)pid, tid);
    if (read_status(path, "SigPnd:", &own, sw) < 0)
        return '-';
    snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int)pid, tid);
    if (gs_read_text(path, buf, sizeof(buf)) <= 0 || (p = strrchr(buf, ')')) == NULL ||
        sscanf(p + 1, " %c %*d %*d %*d %*d %*d %u", &st, &flags) != 2)
        return '-';
    if (st == 'Z' || st == 'X' || (flags & PF_EXITING_FLAG) || (own & SIGBIT(SIGKILL)))
        return '-';
    if (st == 'T' || st == 't')
        return st;
    return (own & SIGBIT(SIGSTOP)) ? 'p' : st;
}

/* The mark of thread tid among n, or NULL; looked for at hint first (the threads' order). */
static const struct thr_mark *mark_of(const struct thr_mark *m, int n, int hint, pid_t tid)
{
    int i;

    if (hint >= 0 && hint < n && m[hint].tid == tid)
        return &m[hint];
    for (i = 0; i < n; i++)
        if (m[i].tid == tid)
            return &m[i];
    return NULL;
}

/* One look at pid's threads for proc_held, against the marks of the last judgement (prev). */
struct look {
    int live, stopped, pend, free_run, ran, n;
    struct thr_mark *now;
};

static void look_at(pid_t pid, int strict, const struct thr_mark *prev, int nprev,
                    unsigned long long shd, struct look *L, char *why, size_t whylen)
{
    char path[64], t;
    int cap = 0, moves, tfree, tran;
    struct thr_mark *grown;
    const struct thr_mark *was;
    struct dirent *d;
    uint64_t sw;
    pid_t tid;
    DIR *dir;

    memset(L, 0, sizeof(*L));
    L->pend = (shd & SIGBIT(SIGSTOP)) != 0;
    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    if ((dir = opendir(path)) == NULL)
        return;
    while ((d = readdir(dir)) != NULL) {
        if (d->d_name[0] < '1' || d->d_name[0] > '9' || (t = thread_of(pid, d->d_name, &sw)) == '-')
            continue;
        tid = (pid_t)atoi(d->d_name);
        L->live++;
        L->stopped |= t == 'T' || t == 't';
        L->pend |= t == 'p';
        was = nprev >= 0 ? mark_of(prev, nprev, L->live - 1, tid) : NULL;
        moves = was ? was->moves + (was->state == 't' && was->sw != sw) : 0;
        tfree = t != 'T' && t != 't' && t != 'p';
        /*
         * Switched out since a look that found it stopped, and the one before too: the switch
         * a thread makes as it enters the stop may come after its state reads 'T'.
         */
        tran = strict && nprev >= 0 &&
               (was == NULL || (was->state == 'T' && was->tlooks >= 2 && was->sw != sw) ||
                moves > TRACED_MOVES);
        if ((tfree || tran) && strict && !L->free_run && !L->ran) { /* the first reason, logged */
            if (tfree)
                snprintf(why, whylen, "thread %d runs (state %c)", (int)tid, t);
            else if (was == NULL)
                snprintf(why, whylen, "thread %d is new", (int)tid);
            else
                snprintf(why, whylen, "thread %d ran since the last look (%c, switched %llu times)",
                         (int)tid, t, (unsigned long long)(sw - was->sw));
        }
        L->free_run |= tfree;
        L->ran |= tran;
        if (L->n >= 0 && L->n == cap) {
            cap = cap ? 2 * cap : 16;
            if ((grown = realloc(L->now, (size_t)cap * sizeof(*L->now))) == NULL) {
                free(L->now);
                L->now = NULL;
                L->n = cap = -1; /* no room: unknown */
            } else {
                L->now = grown;
            }
        }
        if (L->n >= 0)
            L->now[L->n++] = (struct thr_mark){
                tid, t, moves, t == 'T' ? (was && was->state == 'T' ? was->tlooks : 0) + 1 : 0, sw
            };
    }
    closedir(dir);
}

/*
 * Whether process pid (started at start), sent SIGSTOP, is still held by it, by what the
 * kernel says rather than by how long it has been. A SIGCONT discards every pending stop and
 * wakes every stopped thread; a tracer in the tenant can let a thread it traces go from any
 * stop and drop the signal. The kernel gives a process's signal to one thread, and if that
 * one waits in the kernel where only a fatal signal reaches it (a driver call, a vfork), the
 * others run on and never look. So at each judgement every thread neither stopped nor with
 * its own stop pending is sent the stop itself (tgkill, after the process's start time is
 * checked), and takes it at once if it runs.
 *
 * The first judgement after the freeze (strict 0) holds a process that has a thread stopped
 * or the stop still pending (for the process or a thread). Later ones (strict 1) hold it only
 * if every thread is stopped or has its own stop pending, and if no thread ran since the last
 * judgement: none is new (a thread is made only by one that runs), and none stopped at the
 * last two has been switched out since (a stopped thread is never run; one continued and
 * stopped again between two judgements, by a SIGCONT and its own SIGSTOP, has been; the last
 * two, as a thread's state reads 'T' a moment before the switch that stops it). A traced one
 * may be moved by its tracer as it handles the stops, up to TRACED_MOVES judgements. A look
 * that finds the process not held for a thread that runs now, not for one that ran, is made
 * again up to CONFIRM_LOOKS times: only a thread still free at the last is taken for
 * continued. What each thread was is kept in *marks (*nmarks of them, -1 when unknown) for
 * the next judgement. One gone or dying is held: nothing of it runs.
 */
static int proc_held(pid_t pid, uint64_t start, int strict, struct thr_mark **marks, int *nmarks,
                     char *why, size_t whylen)
{
    struct timespec gap = { 0, CONFIRM_NS };
    unsigned long long shd;
    struct look L;
    char path[64];
    int held, i, k;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    for (k = 0;; k++) {
        if (read_status(path, "ShdPnd:", &shd, NULL) < 0 || (shd & SIGBIT(SIGKILL)))
            return 1; /* gone, or dying */
        look_at(pid, strict, *marks, *nmarks, shd, &L, why, whylen);
        held = !L.live || (strict ? !L.free_run && !L.ran : L.stopped || L.pend);
        /* A thread that ran is known; one that runs now may be on its way into the stop. */
        if (held || L.ran || k == CONFIRM_LOOKS)
            break;
        free(L.now);
        nanosleep(&gap, NULL);
    }
    free(*marks);
    *marks = L.now;
    *nmarks = L.n;
    /* The PID is still the process it was (else the one stopped is gone). */
    if (gs_proc_start_time(pid) != start)
        return 1;
    if (!held && !strict)
        snprintf(why, whylen, "no thread stopped, no stop pending");
    for (i = 0; held && i < L.n; i++)
        if (L.now[i].state != 'T' && L.now[i].state != 't' && L.now[i].state != 'p')
            syscall(SYS_tgkill, pid, L.now[i].tid, SIGSTOP);
    return held;
}

/*
 * Stops a's processes again (a frozen tenant's new ones too). One it stopped before that runs
 * again was continued by someone its user controls (SIGCONT from a sibling or the user's
 * shell): a SIGSTOP freeze is the tenant's to undo, so it is killed; a freeze the tenant
 * cannot undo is its cgroup's (tenant-cgroup).
 */
static void hold_stopped(struct account *a, int kind)
{
    int k, j, seen, found, strict;
    char why[96];

    /* Processes stopped before that are no longer on the GPU are forgotten. */
    for (j = 0; j < a->nstopped;) {
        for (k = 0; k < a->npid; k++)
            if (a->stopped_pid[j] == a->pid[k] && a->stopped_start[j] == a->start[k])
                break;
        if (k < a->npid) {
            j++;
            continue;
        }
        free(a->marks[j]);
        a->nstopped--;
        a->stopped_pid[j] = a->stopped_pid[a->nstopped];
        a->stopped_start[j] = a->stopped_start[a->nstopped];
        a->stopped_judged[j] = a->stopped_judged[a->nstopped];
        a->marks[j] = a->marks[a->nstopped];
        a->nmarks[j] = a->nmarks[a->nstopped];
    }
    for (k = 0; k < a->npid; k++) {
        for (j = 0, found = -1; j < a->nstopped && found < 0; j++)
            if (a->stopped_pid[j] == a->pid[k] && a->stopped_start[j] == a->start[k])
                found = j;
        seen = found >= 0;
        /* (Judged from the next pass on, by what the kernel holds: see proc_held.) */
        strict = seen && a->stopped_judged[found];
        if (seen)
            a->stopped_judged[found] = 1;
        why[0] = '\0';
        if (seen && !proc_held(a->pid[k], a->start[k], strict, &a->marks[found], &a->nmarks[found],
                               why, sizeof(why))) {
            signal_proc(a->pid[k], a->start[k], SIGKILL);
            a->actions[kind][GD_GUARD_KILL]++;
            gd_log("guard: tenant %u: process %d was continued while frozen: killed (%s)", a->id,
                   (int)a->pid[k], why);
            gd_event(owner_of(a->id), "tenant.over_limit",
                     "\"tenant\":\"%u\",\"kind\":\"%s\",\"action\":\"killed\","
                     "\"why\":\"continued while frozen\",\"pids\":[%d]",
                     a->id, kind_name[kind], (int)a->pid[k]);
            continue;
        }
        signal_proc(a->pid[k], a->start[k], SIGSTOP);
        if (!seen && a->nstopped < MAX_PIDS) {
            a->stopped_pid[a->nstopped] = a->pid[k];
            a->stopped_judged[a->nstopped] = 0;
            a->marks[a->nstopped] = NULL;
            a->nmarks[a->nstopped] = 0;
            a->stopped_start[a->nstopped++] = a->start[k];
        }
    }
}

/* Forgets every process a stopped (its freeze is over). */
static void forget_stopped(struct account *a)
{
    int j;

    for (j = 0; j < a->nstopped; j++) {
        free(a->marks[j]);
        a->marks[j] = NULL;
    }
    a->nstopped = 0;
}

/* ---- which tenant a process is in ---- */

/*
 * The managed tenant of pid by its pod's cgroup (then its container's cgroup's sysfs path
 * into leaf), or by its lineage; 0 for none.
 */
static uint32_t attribute(pid_t pid, char *leaf, size_t leaflen)
{
    char path[64], cg[16384], uid[GD_POD_UID_LEN], cid[GD_CONTAINER_ID_LEN], why[256];
    ssize_t got = -1;
    uint32_t id = 0;
    int fd;

    snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
        got = read(fd, cg, sizeof(cg) - 1);
        close(fd);
    }
    if (got > 0) {
        /* A managed tenant's cgroup (tenant-cgroup): the kernel's word, as a pod's. */
        cg[got] = '\0';
        if ((id = gd_contain_of(cg)) != 0)
            return id;
    }
    /* A pod's, its cgroup placed as the pods' socket places it (a cgroup namespace too). */
    if (got > 0 && gd_pods_cgroup(cg, (size_t)got, uid, cid, why, sizeof(why)) == 1) {
        char claim[64];
        struct gd_tenant *t;

        pthread_mutex_lock(&gd.mu);
        /*
         * A pod with a claim of the DRA driver prepared is held to the claim's tenant, which
         * its processes join (pods.c), whatever its annotations say.
         */
        if (gd_dra_tenant_of_pod(uid, claim, sizeof(claim), why, sizeof(why)) == 1)
            id = (t = gd_tenant_find_managed(claim)) ? t->node_id : 0;
        else
            id = gd_pods_tenant_of(uid);
        pthread_mutex_unlock(&gd.mu);
        cg[got] = '\0';
        if (id && gd_wall_leaf(cg, leaf, leaflen) < 0)
            leaf[0] = '\0';
        if (id)
            return id;
    }
    return gd_tenant_lineage(pid);
}

/* The tenant of pid (started at start), from the table or looked up; under mu. */
static struct attr *tenant_of(pid_t pid, uint64_t start, uint64_t now)
{
    struct attr *a = &attrs[(unsigned)pid % MAX_ATTR];

    if (a->pid == pid && a->start == start && (a->tenant || now - a->checked_ns < RECHECK_NS))
        return a;
    a->pid = pid;
    a->start = start;
    a->leaf[0] = '\0';
    a->tenant = attribute(pid, a->leaf, sizeof(a->leaf));
    a->checked_ns = now;
    return a;
}

/* ---- accounts ---- */

static struct account *account(uint32_t id, const uint8_t raw[16], int make)
{
    struct account *free_a = NULL;
    int i;

    for (i = 0; i < MAX_ACCOUNTS; i++) {
        if (acc[i].id == id && memcmp(acc[i].raw, raw, 16) == 0)
            return &acc[i];
        if (!acc[i].id && !free_a)
            free_a = &acc[i];
    }
    if (!make || !free_a)
        return NULL;
    memset(free_a, 0, sizeof(*free_a));
    free_a->id = id;
    memcpy(free_a->raw, raw, 16);
    free_a->compute = -1;
    return free_a;
}

/*
 * The limits the node segment gives tenant id on the GPU raw: its entry for the GPU, else
 * the largest a pod's index keys give (which of its containers' CUDA indexes this GPU is
 * is not known here, so the loosest of them: the guard never stops a tenant within its
 * limits), else the default. 0: none. -ENOENT: no such tenant.
 */
static int limits_of(uint32_t id, const uint8_t raw[16], uint64_t *mem, uint32_t *comp)
{
    struct gpuslice_node_tenant p;
    int i = gs_node_find_tenant(gd.node, id), d, any = 0;
    uint64_t m;
    uint32_t c;

    if (i < 0 || gs_node_limits(gd.node, i, id, raw, -1, &m, &c) < 0)
        return -ENOENT;
    gs_node_read_tenant(gd.node, i, &p);
    for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++)
        if (memcmp(p.dev[d].uuid, raw, 16) == 0)
            break;
    if (d == GPUSLICE_NODE_MAX_DEVICES) {
        for (d = 0; d < GPUSLICE_NODE_MAX_DEVICES; d++) {
            if (gs_node_key_index(p.dev[d].uuid) < 0)
                continue;
            if (!any) {
                any = 1;
                m = p.mem_default, c = p.compute_default;
            }
            m = !m || !p.dev[d].mem_limit ? 0 : m > p.dev[d].mem_limit ? m : p.dev[d].mem_limit;
            c = !c || !p.dev[d].compute_limit ? 0
                : c > p.dev[d].compute_limit  ? c
                                              : p.dev[d].compute_limit;
        }
    }
    *mem = m;
    *comp = c;
    return 0;
}

/* ---- what it froze, kept across a daemon's restart ---- */

/* RUN_DIR/gpusliced.frozen into out (PATH_MAX + 32 bytes). */
static void frozen_path(char out[PATH_MAX + 32])
{
    snprintf(out, PATH_MAX + 32, "%s/%s", gd_opt.run_dir, FROZEN_FILE);
}

/* Rewrites the file of stopped processes (PID and start time per line); under mu. */
static void save_frozen(void)
{
    char path[PATH_MAX + 32], tmp[PATH_MAX + 40];
    FILE *f;
    int i, k, any = 0;

    frozen_path(path);
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    for (i = 0; i < MAX_ACCOUNTS && !any; i++)
        any = acc[i].id && (acc[i].frozen[KIND_MEMORY] || acc[i].frozen[KIND_COMPUTE]);
    if (!any) {
        unlink(path);
        return;
    }
    if ((f = fopen(tmp, "we")) == NULL) {
        gd_log("guard: cannot write %s: %s (a daemon killed now would leave them stopped)", tmp,
               strerror(errno));
        return;
    }
    for (i = 0; i < MAX_ACCOUNTS; i++)
        if (acc[i].id && (acc[i].frozen[KIND_MEMORY] || acc[i].frozen[KIND_COMPUTE]))
            for (k = 0; k < acc[i].npid; k++)
                fprintf(f, "%d %llu\n", (int)acc[i].pid[k], (unsigned long long)acc[i].start[k]);
    if (fclose(f) != 0 || rename(tmp, path) < 0) {
        gd_log("guard: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
}

/* Lets go what an earlier daemon left stopped (each still the process it stopped). */
static void thaw_left_over(void)
{
    char path[PATH_MAX + 32];
    FILE *f;
    int pid;
    unsigned long long start;
    int n = 0;

    frozen_path(path);
    if ((f = fopen(path, "re")) == NULL)
        return;
    while (fscanf(f, "%d %llu", &pid, &start) == 2)
        if (pid > 0 && signal_proc(pid, start, SIGCONT) == 0)
            n++;
    fclose(f);
    unlink(path);
    if (n)
        gd_log("guard: let %d process%s go that an earlier daemon had stopped", n,
               n == 1 ? "" : "es");
}

int gd_guard_start(char *err, size_t errlen)
{
    if (gd_guard_parse_action(gd_opt.guard_memory, &policy[KIND_MEMORY]) < 0) {
        snprintf(err, errlen, "guard-memory: \"%s\" is not an action (kill, freeze or report)",
                 gd_opt.guard_memory);
        return -1;
    }
    if (gd_guard_parse_action(gd_opt.guard_compute, &policy[KIND_COMPUTE]) < 0) {
        snprintf(err, errlen, "guard-compute: \"%s\" is not an action (kill, freeze or report)",
                 gd_opt.guard_compute);
        return -1;
    }
    thaw_left_over();
    return 0;
}

/* ---- one pass ---- */

static void pids_json(char *out, size_t len, const struct account *a)
{
    size_t n = 0;
    int k;

    out[0] = '\0';
    for (k = 0; k < a->npid && n + 16 < len; k++)
        n += (size_t)snprintf(out + n, len - n, "%s%d", k ? "," : "", (int)a->pid[k]);
}

/* Acts on a tenant over its limit of kind on the GPU: the policy's action, an event. */
static void act(struct account *a, int kind, const struct gd_device *g, uint64_t used,
                uint64_t limit, uint64_t now)
{
    enum gd_guard_action what = policy[kind];
    char pids[1024], name[64];
    int k, i = gs_node_find_tenant(gd.node, a->id);

    if (i >= 0)
        snprintf(name, sizeof(name), "%s", gd.node->tenant[i].name);
    else
        name[0] = '\0';
    gd_api_scrub(name);
    /* A tenant of its own cgroup is frozen there, where none of its processes can thaw it. */
    if (what == GD_GUARD_FREEZE && gd_contain_freeze(a->id, 1) == 0)
        a->cgroup_frozen = 1;
    if (what == GD_GUARD_KILL)
        for (k = 0; k < a->npid; k++)
            signal_proc(a->pid[k], a->start[k], SIGKILL);
    else if (what == GD_GUARD_FREEZE && !a->cgroup_frozen)
        hold_stopped(a, kind);
    a->actions[kind][what]++;
    if (what == GD_GUARD_REPORT)
        a->reported[kind] = 1;
    /* Found over what it was allowed: that allowance is spent (a new process gets none of it). */
    if (kind == KIND_MEMORY)
        a->allow = 0;
    if (what == GD_GUARD_FREEZE) {
        a->frozen[kind] = 1;
        if (kind == KIND_COMPUTE) {
            /*
             * Frozen until its average over the window and the freeze is its ceiling: it
             * used `used` percent of a window where `limit` was its share.
             */
            uint64_t ns = COMPUTE_WINDOW_NS * (used - limit) / (limit ? limit : 1);

            if (ns > MAX_FREEZE_NS)
                ns = MAX_FREEZE_NS;
            a->thaw_ns = now + ns;
        }
        save_frozen();
    }
    pids_json(pids, sizeof(pids), a);
    gd_log("guard: tenant %u (%s) uses %llu %s on GPU %d, over its limit of %llu: %s "
           "(processes %s)",
           a->id, name, (unsigned long long)used, kind == KIND_MEMORY ? "bytes" : "%", g->index,
           (unsigned long long)limit, action_name[what], pids);
    {
        char qname[2 * 64 + 8];

        gd_json_quote(qname, sizeof(qname), name);
        gd_event(i >= 0 ? (uid_t)gd.node->tenant[i].owner_uid : 0, "tenant.over_limit",
                 "\"tenant\":\"%u\",\"name\":%s,\"gpu\":%d,\"uuid\":\"%s\",\"kind\":\"%s\","
                 "\"used\":%llu,\"limit\":%llu,\"action\":\"%s\",\"pids\":[%s]",
                 a->id, qname, g->index, g->uuid, kind_name[kind], (unsigned long long)used,
                 (unsigned long long)limit, action_name[what], pids);
    }
}

/* Lets a's processes go once no kind holds them any more (kind: the one that ends, or -1). */
/* Whether another account (the tenant's on another GPU) holds pid frozen still. */
static int held_elsewhere(const struct account *a, pid_t pid, uint64_t start)
{
    int i, j;

    for (i = 0; i < MAX_ACCOUNTS; i++) {
        const struct account *o = &acc[i];

        if (o == a || !o->id || !(o->frozen[KIND_MEMORY] || o->frozen[KIND_COMPUTE]) ||
            o->cgroup_frozen)
            continue;
        for (j = 0; j < o->nstopped; j++)
            if (o->stopped_pid[j] == pid && o->stopped_start[j] == start)
                return 1;
    }
    return 0;
}

static void thaw(struct account *a, int kind, const char *why)
{
    int k;

    if (kind < 0)
        a->frozen[KIND_MEMORY] = a->frozen[KIND_COMPUTE] = 0;
    else
        a->frozen[kind] = 0;
    if (a->frozen[KIND_MEMORY] || a->frozen[KIND_COMPUTE])
        return;
    if (a->cgroup_frozen) {
        gd_contain_freeze(a->id, 0);
        a->cgroup_frozen = 0;
    } else {
        for (k = 0; k < a->npid; k++)
            if (!held_elsewhere(a, a->pid[k], a->start[k]))
                signal_proc(a->pid[k], a->start[k], SIGCONT);
    }
    forget_stopped(a);
    gd_event(owner_of(a->id), "tenant.thawed", "\"tenant\":\"%u\",\"kind\":\"%s\",\"why\":\"%s\"",
             a->id, kind < 0 ? "all" : kind_name[kind], why);
    save_frozen();
}

/* Whether a is over its limit of kind now, counted over passes; 1 when it must be acted on. */
static int judge(struct account *a, int kind, int over, uint64_t now)
{
    if (!over) {
        a->over_since[kind] = 0;
        a->over_passes[kind] = 0;
        a->reported[kind] = 0;
        return 0;
    }
    if (a->reported[kind])
        return 0; /* said already: once for as long as it stays over */
    if (a->over_passes[kind]++ == 0)
        a->over_since[kind] = now;
    /* Two samples at least, and the grace: a sample caught between a charge and a free. */
    return a->over_passes[kind] >= 2 &&
           now - a->over_since[kind] >= (uint64_t)gd_opt.guard_grace_ms * 1000000ULL;
}

void gd_guard_pass(const struct gd_device *dev, int ndev, uint64_t now)
{
    int i, k, d;

    if (gd.node == NULL)
        return;
    pthread_mutex_lock(&mu);
    for (d = 0; d < ndev; d++) {
        const struct gd_device *g = &dev[d];

        for (i = 0; i < MAX_ACCOUNTS; i++)
            if (acc[i].id && memcmp(acc[i].raw, g->raw, 16) == 0 && acc[i].seen_ns != now) {
                acc[i].mem = 0;
                acc[i].compute = -1;
                acc[i].npid = 0;
            }
        for (k = 0; k < g->nproc; k++) {
            const struct gd_devproc *p = &g->proc[k];
            uint64_t start = gs_proc_start_time(p->pid), wall_mem;
            uint32_t id, wall_comp;
            struct account *a;
            struct attr *at;

            if (start == 0 || (at = tenant_of(p->pid, start, now))->tenant == 0)
                continue;
            id = at->tenant;
            /* A pod's container: its limit also in the driver, where the driver holds them. */
            if (at->leaf[0] && limits_of(id, g->raw, &wall_mem, &wall_comp) == 0)
                gd_wall_apply(g->index, at->leaf, wall_mem);
            if ((a = account(id, g->raw, 1)) == NULL)
                continue;
            if (a->seen_ns != now) {
                a->seen_ns = now;
                a->mem = 0;
                a->compute = -1;
                a->npid = 0;
            }
            a->mem += p->mem;
            if (p->sm_util_mean >= 0)
                a->compute = (a->compute < 0 ? 0 : a->compute) + p->sm_util_mean;
            if (a->npid < MAX_PIDS) {
                a->pid[a->npid] = p->pid;
                a->start[a->npid++] = start;
            }
        }
        for (i = 0; i < MAX_ACCOUNTS; i++) {
            struct account *a = &acc[i];
            uint64_t mem_lim;
            uint32_t comp_lim;

            if (!a->id || memcmp(a->raw, g->raw, 16) != 0)
                continue;
            if (limits_of(a->id, g->raw, &mem_lim, &comp_lim) < 0) {
                /* The tenant ended: nothing of it stays stopped, its counters go. */
                if (a->frozen[KIND_MEMORY] || a->frozen[KIND_COMPUTE])
                    thaw(a, -1, "the tenant ended");
                forget_stopped(a);
                a->id = 0;
                continue;
            }
            if (a->seen_ns != now) { /* none of its processes is on the GPU now */
                a->mem = 0;
                a->compute = -1;
            }
            /*
             * Memory. A limit set below what the tenant already holds takes nothing away (its
             * interposers refuse new allocations; what it holds it keeps): that use, shrinking
             * as it frees, is allowed, and so is what a tenant held when this daemon started
             * (its limit may have been lowered under the one before). Never more.
             */
            if (mem_lim && a->mem > mem_lim && passes == 0)
                a->allow = a->mem;
            /*
             * Lowered: what it held within its previous limit is allowed, never more (a tenant
             * that went over and then lowered its own limit, again and again, was forgiven its
             * excess each time and never stopped).
             */
            if (mem_lim && a->mem > mem_lim && a->limit_seen && mem_lim < a->mem_limit) {
                uint64_t within = a->mem < a->mem_limit ? a->mem : a->mem_limit;

                a->allow = a->allow > within ? a->allow : within;
            }
            a->allow = a->allow < a->mem ? a->allow : a->mem;
            a->mem_limit = mem_lim ? mem_lim : UINT64_MAX;
            a->limit_seen = 1;
            if (a->frozen[KIND_MEMORY]) {
                if (!mem_lim || a->mem <= mem_lim)
                    thaw(a, KIND_MEMORY, "its memory is within its limit");
            } else if (judge(a, KIND_MEMORY, mem_lim && a->mem > mem_lim && a->mem > a->allow,
                             now)) {
                act(a, KIND_MEMORY, g, a->mem, mem_lim, now);
                a->over_passes[KIND_MEMORY] = 0;
            }
            /* Compute: the share NVML measured over its last second, with a margin. */
            if (a->frozen[KIND_COMPUTE]) {
                if (now >= a->thaw_ns || !comp_lim) {
                    thaw(a, KIND_COMPUTE, "its compute debt is paid");
                    a->quiet_until_ns = now + COMPUTE_WINDOW_NS;
                }
            } else if (now >= a->quiet_until_ns &&
                       judge(a, KIND_COMPUTE,
                             comp_lim && a->compute >= 0 &&
                                 a->compute > (int)comp_lim + (int)gd_opt.guard_compute_margin,
                             now)) {
                act(a, KIND_COMPUTE, g, (uint64_t)a->compute, comp_lim, now);
                a->over_passes[KIND_COMPUTE] = 0;
                a->quiet_until_ns = now + COMPUTE_WINDOW_NS;
            }
            /* Held stopped: its processes, new ones included; one continued is killed. */
            if ((a->frozen[KIND_MEMORY] || a->frozen[KIND_COMPUTE]) && !a->cgroup_frozen)
                hold_stopped(a, a->frozen[KIND_COMPUTE] ? KIND_COMPUTE : KIND_MEMORY);
        }
    }
    passes++;
    pthread_mutex_unlock(&mu);
}

void gd_guard_wall_join(uint32_t id, const char *cg)
{
    char leaf[PATH_MAX];
    uint8_t raw[GD_MAX_DEVICES][16];
    int idx[GD_MAX_DEVICES], n, k;

    if (gd_wall_leaf(cg, leaf, sizeof(leaf)) < 0)
        return;
    pthread_mutex_lock(&gd.mu);
    for (n = 0; n < gd.ndev; n++) {
        memcpy(raw[n], gd.dev[n].raw, 16);
        idx[n] = gd.dev[n].index;
    }
    pthread_mutex_unlock(&gd.mu);
    for (k = 0; k < n; k++) {
        uint64_t mem;
        uint32_t comp;

        if (limits_of(id, raw[k], &mem, &comp) == 0)
            gd_wall_apply(idx[k], leaf, mem);
    }
}

void gd_guard_stop(void)
{
    int i;

    pthread_mutex_lock(&mu);
    for (i = 0; i < MAX_ACCOUNTS; i++)
        if (acc[i].id && (acc[i].frozen[KIND_MEMORY] || acc[i].frozen[KIND_COMPUTE]))
            thaw(&acc[i], -1, "the daemon stops");
    pthread_mutex_unlock(&mu);
}

int gd_guard_use(uint32_t id, const uint8_t raw[16], uint64_t *mem, int *compute)
{
    struct account *a;
    int r = -ENOENT;

    pthread_mutex_lock(&mu);
    if ((a = account(id, raw, 0)) != NULL) {
        *mem = a->mem;
        *compute = a->compute;
        r = 0;
    }
    pthread_mutex_unlock(&mu);
    return r;
}

int gd_guard_frozen(uint32_t id)
{
    int i, f = 0;

    pthread_mutex_lock(&mu);
    for (i = 0; i < MAX_ACCOUNTS && !f; i++)
        f = acc[i].id == id && (acc[i].frozen[KIND_MEMORY] || acc[i].frozen[KIND_COMPUTE]);
    pthread_mutex_unlock(&mu);
    return f;
}

uint64_t gd_guard_actions(uint32_t id, const uint8_t raw[16], int kind, int action)
{
    struct account *a;
    uint64_t n = 0;

    if (kind < 0 || kind >= NKIND || action < 0 || action > 2)
        return 0;
    pthread_mutex_lock(&mu);
    if ((a = account(id, raw, 0)) != NULL)
        n = a->actions[kind][action];
    pthread_mutex_unlock(&mu);
    return n;
}
