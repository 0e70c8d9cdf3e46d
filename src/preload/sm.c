/*
 * SM partitions (GPUSLICE_SMS): the whole process runs on a green context of
 * the SMs it names, on every thread, with no change to the program.
 *
 * A green context made current on one thread binds that thread only (seen
 * on an H200: PyTorch work on a second thread, and the backward pass, ran
 * on the full GPU). So the partition is not made current anywhere; instead
 * the device's primary context, which the CUDA runtime and most programs use
 * on every thread, is replaced by the green context's CUcontext where it is
 * handed out: cuDevicePrimaryCtxRetain returns it, and cuCtxSetCurrent /
 * cuCtxPushCurrent given the real primary context set it instead. The green
 * context shares the primary context's memory, modules and streams' address
 * space; its NULL stream and every stream made while it is current run on
 * its SMs, and graphs captured there keep them.
 *
 * The partition is COUNT SMs from the FIRST-th in the order the driver splits
 * them: groups of the device's minimum partition (8 on an H200) when COUNT
 * and FIRST fit them, else of its finest split ignoring co-scheduling (2),
 * plus the split's remainder when the range ends at the last SM. Anything
 * else is refused with the granularity in the message, and the program's
 * context call fails: a process never runs unpartitioned by mistake.
 *
 * Contexts a program makes itself with cuCtxCreate are not partitioned; that
 * is said once on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h"
#include "preload/preload.h"

#define MAX_DEVICES 64

struct part {
    char msg[512];     /* why it was refused */
    int state;         /* 0 not made yet, 1 made, -1 refused (the reason logged) */
    CUresult error;    /* what a refused one answers */
    CUcontext primary; /* the device's real primary context */
    CUgreenCtx green;
    CUcontext ctx; /* the green context's CUcontext, handed out for primary */
    unsigned sms;  /* the exact count the driver gave */
};

static struct part parts[MAX_DEVICES];
static pthread_mutex_t sm_mu = PTHREAD_MUTEX_INITIALIZER;
static int created_noted;
int gs__sm_on; /* GPUSLICE_SMS is set: 0 lets every check return at once */
/*
 * Initial-exec TLS: no __tls_get_addr, so the library still links nothing but
 * libc; a preloaded library's few bytes fit the static TLS block.
 */
#define GS_TLS __thread __attribute__((tls_model("initial-exec")))
static GS_TLS int swapped_noted;
static GS_TLS CUcontext checked; /* this thread's current context, known to need no swap */
static GS_TLS int planning;      /* in planned_sms(): the driver's own attribute queries pass */

static const char *cu_name(CUresult r)
{
    const char *s = NULL;

    if (gs__real.cuGetErrorName && gs__real.cuGetErrorName(r, &s) == CUDA_SUCCESS && s)
        return s;
    return "an unknown CUDA error";
}

/*
 * The partition configured for device dev (its packed value), or 0. Kept per
 * device once its UUID is known (the configuration is fixed for the process).
 */
static uint64_t spec_for(CUdevice dev)
{
    static uint64_t cache[MAX_DEVICES];
    static int known[MAX_DEVICES];
    const char *uuid;
    uint64_t v;

    if (gs__state.sm_limits.n == 0)
        return 0;
    if (dev >= 0 && dev < MAX_DEVICES && __atomic_load_n(&known[dev], __ATOMIC_ACQUIRE))
        return cache[dev];
    uuid = gs__device_uuid(dev, NULL); /* the one registry (device.c): a CUdevice is its ordinal */
    v = gs_limits_lookup(&gs__state.sm_limits, dev, uuid);
    if (uuid && dev >= 0 && dev < MAX_DEVICES) {
        cache[dev] = v;
        __atomic_store_n(&known[dev], 1, __ATOMIC_RELEASE);
    }
    return v;
}

/* Refuses the partition of dev: logs why, and its context calls fail with r. */
static void refuse(struct part *p, CUresult r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void refuse(struct part *p, CUresult r, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    gs__log("%s: %s; the device's contexts are refused (%s)", GS_ENV_SMS, msg, cu_name(r));
    snprintf(p->msg, sizeof(p->msg), "%s", msg);
    p->state = -1;
    p->error = r;
}

/*
 * Splits all into groups (flags, the smallest groups), and picks those that
 * make [first, first + count), with the remainder when it ends at the last
 * SM. 1 and the picks in sel/nsel when the range fits that split's groups, 0
 * when not (*group says their size), <0 on a driver error (*r).
 */
static int pick(CUdevResource *all, unsigned flags, unsigned first, unsigned count,
                CUdevResource *groups, unsigned cap, CUdevResource *sel, unsigned *nsel,
                unsigned *group, CUresult *r)
{
    CUdevResource rest;
    unsigned n = cap, size, total = all->sm.smCount, end = first + count, k;

    memset(&rest, 0, sizeof(rest));
    *r = gs__real.cuDevSmResourceSplitByCount(groups, &n, all, &rest, flags, 1);
    if (*r != CUDA_SUCCESS)
        return -1;
    if (n == 0) {
        *group = total;
        return 0;
    }
    size = groups[0].sm.smCount;
    *group = size;
    if (first % size != 0 || first >= n * size + rest.sm.smCount)
        return 0;
    if (end == total && rest.sm.smCount > 0) {
        if ((end - rest.sm.smCount) < first || (end - rest.sm.smCount - first) % size != 0)
            return 0;
    } else if (count % size != 0 || end > n * size) {
        return 0;
    }
    *nsel = 0;
    for (k = first / size; k < n && (k + 1) * size <= end; k++)
        sel[(*nsel)++] = groups[k];
    if (end == total && rest.sm.smCount > 0)
        sel[(*nsel)++] = rest;
    return *nsel > 0;
}

/* The device's SM resource; CUDA_SUCCESS, or an error with the reason in msg. */
CUresult gs__sm_device(CUdevice dev, CUdevResource *all, char *msg, size_t len)
{
    CUresult r;

    if (!gs__real.cuDeviceGetDevResource || !gs__real.cuDevSmResourceSplitByCount ||
        !gs__real.cuDevResourceGenerateDesc || !gs__real.cuGreenCtxCreate ||
        !gs__real.cuCtxFromGreenCtx || !gs__real.cuGreenCtxGetDevResource) {
        snprintf(msg, len,
                 "GPU %d: this driver has no green contexts (CUDA 12.4 or later is "
                 "needed for SM partitions)",
                 (int)dev);
        return CUDA_ERROR_NOT_SUPPORTED;
    }
    memset(all, 0, sizeof(*all));
    if ((r = gs__real.cuDeviceGetDevResource(dev, all, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS ||
        all->sm.smCount == 0) {
        snprintf(msg, len,
                 "GPU %d cannot partition its SMs with green contexts "
                 "(cuDeviceGetDevResource: %s)",
                 (int)dev, r == CUDA_SUCCESS ? "no SMs" : cu_name(r));
        return r == CUDA_SUCCESS ? CUDA_ERROR_NOT_SUPPORTED : r;
    }
    return CUDA_SUCCESS;
}

/*
 * The SMs in one of the device's co-scheduled groups (its split that keeps them), 0 if none;
 * *ngroups how many such groups it has.
 */
unsigned gs__sm_group(CUdevResource *all, unsigned *ngroups)
{
    CUdevResource *groups, rest;
    unsigned n = all->sm.smCount, size = 0;

    *ngroups = 0;
    if (n == 0 || !(groups = calloc(n, sizeof(*groups))))
        return 0;
    memset(&rest, 0, sizeof(rest));
    if (gs__real.cuDevSmResourceSplitByCount(groups, &n, all, &rest, 0, 1) == CUDA_SUCCESS && n > 0)
        size = groups[0].sm.smCount, *ngroups = n;
    free(groups);
    return size;
}

/*
 * A green context of count SMs from first on dev (all: its SM resource), its
 * CUcontext and exact SM count; CUDA_SUCCESS, or an error with the reason in
 * msg. *group says the group size used. With green NULL, only the count the
 * split's groups make (no context is made).
 */
CUresult gs__sm_build(CUdevice dev, CUdevResource *all, unsigned count, unsigned first,
                      int fine_only, CUgreenCtx *green, CUcontext *ctx, unsigned *sms,
                      unsigned *group, char *msg, size_t len)
{
    unsigned total = all->sm.smCount, coarse = 0, fine = 0, nsel = 0, cap = total, k;
    CUdevResource got, *groups = NULL, *sel = NULL;
    CUdevResourceDesc desc;
    CUresult r = CUDA_SUCCESS;
    int ok;

    if (count == 0 || first + count > total) {
        snprintf(msg, len, "%u SMs from SM %u were asked for, but GPU %d has %u SMs", count, first,
                 (int)dev, total);
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (!(groups = calloc(cap, sizeof(*groups))) || !(sel = calloc(cap + 1, sizeof(*sel)))) {
        snprintf(msg, len, "GPU %d: no memory to plan the partition", (int)dev);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    ok = fine_only ? 0 : pick(all, 0, first, count, groups, cap, sel, &nsel, &coarse, &r);
    *group = coarse;
    if (ok == 0) {
        ok = pick(all, CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING, first, count, groups, cap,
                  sel, &nsel, &fine, &r);
        *group = fine;
    }
    if (ok < 0) {
        snprintf(msg, len, "GPU %d: cuDevSmResourceSplitByCount failed", (int)dev);
        goto out;
    }
    if (ok == 0) {
        snprintf(msg, len,
                 "a partition of %u SMs from SM %u cannot be made on GPU %d: it splits its %u "
                 "SMs into groups of %u (of %u ignoring co-scheduling), so a partition is a "
                 "multiple of %u SMs from a multiple of %u, and only one that ends at the last "
                 "SM may end with the SMs left over",
                 count, first, (int)dev, total, coarse, fine, fine, fine);
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if (green == NULL) { /* the plan only: the count the groups make, no context */
        for (k = 0, *sms = 0; k < nsel; k++)
            *sms += sel[k].sm.smCount;
        goto out;
    }
    if ((r = gs__real.cuDevResourceGenerateDesc(&desc, sel, nsel)) != CUDA_SUCCESS ||
        (r = gs__real.cuGreenCtxCreate(green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM)) !=
            CUDA_SUCCESS) {
        snprintf(msg, len, "GPU %d: the green context of %u SMs could not be made", (int)dev,
                 count);
        goto out;
    }
    memset(&got, 0, sizeof(got));
    if ((r = gs__real.cuCtxFromGreenCtx(ctx, *green)) != CUDA_SUCCESS ||
        (r = gs__real.cuGreenCtxGetDevResource(*green, &got, CU_DEV_RESOURCE_TYPE_SM)) !=
            CUDA_SUCCESS) {
        if (gs__real.cuGreenCtxDestroy)
            gs__real.cuGreenCtxDestroy(*green);
        snprintf(msg, len, "GPU %d: the green context of %u SMs could not be used", (int)dev,
                 count);
        goto out;
    }
    *sms = got.sm.smCount;
out:
    free(groups);
    free(sel);
    return r;
}

/* The SM count and first SM that spec asks of a device whose SMs are all. */
static void resolve(CUdevResource *all, uint64_t spec, unsigned *count, unsigned *first)
{
    unsigned total = all->sm.smCount;

    *count = GS_SMS_COUNT(spec);
    *first = GS_SMS_FIRST(spec);
    if (spec & GS_SMS_SHARE) {
        /* A share: the nearest count of the finest groups (2 SMs on an H200), at least one. */
        unsigned pct = GS_SMS_COUNT(spec), step = 2, one_n = 1;
        CUdevResource one, rest;
        if (gs__real.cuDevSmResourceSplitByCount(&one, &one_n, all, &rest,
                                                 CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                                 1) == CUDA_SUCCESS &&
            one_n == 1 && one.sm.smCount > 0)
            step = one.sm.smCount;
        *count = (unsigned)(((uint64_t)total * pct + 50 * step) / (100 * step)) * step;
        if (*count == 0)
            *count = step;
        if (pct == 100 || *count > total)
            *count = total;
        *first = 0;
    }
}

/* Makes the green context of dev's partition (spec); under sm_mu. */
static void make(struct part *p, CUdevice dev, uint64_t spec)
{
    unsigned count, first, total, group = 0;
    CUdevResource all;
    char msg[512];
    CUresult r;

    if ((r = gs__sm_device(dev, &all, msg, sizeof(msg))) != CUDA_SUCCESS) {
        refuse(p, r, "%s", msg);
        return;
    }
    total = all.sm.smCount;
    resolve(&all, spec, &count, &first);
    if ((r = gs__sm_build(dev, &all, count, first, (spec & GS_SMS_FINE) != 0, &p->green, &p->ctx,
                          &p->sms, &group, msg, sizeof(msg))) != CUDA_SUCCESS) {
        refuse(p, r, "%s", msg);
        return;
    }
    __atomic_store_n(&p->state, 1, __ATOMIC_RELEASE); /* after p->sms, for lock-free readers */
    gs__debug("%s: GPU %d runs on %u SMs (%u from SM %u of %u, groups of %u)", GS_ENV_SMS, (int)dev,
              p->sms, count, first, total, group);
}

/*
 * gpuslice procs starts its lanes together. GPUSLICE_LANE_BARRIER is
 * "DIR/I": procs's private directory and this lane's index. The first
 * partition a process of the lane makes (or refuses) is said in the file
 * DIR/ready.I ("ready PID SMS" or "error PID MESSAGE", written to a
 * temporary name and renamed, so procs reads whole lines); the process then
 * waits until DIR/go exists. Paths, not inherited descriptors, so that a
 * program started by a launcher that closes descriptors still reports, and
 * a stale variable meets no reused descriptor. A directory that is gone
 * (procs ended) means no wait; a later process of a lane that already said
 * it just waits for the release. Once per process.
 */
static void lane_barrier(const struct part *p)
{
    static int done;
    const char *v = getenv(GS_ENV_LANE_BARRIER);
    char dir[400], path[460], tmp[480], line[600];
    const char *slash;
    int fd, n, saved = errno;
    long lane;
    char *end;

    if (done || v == NULL || (slash = strrchr(v, '/')) == NULL || slash == v ||
        (size_t)(slash - v) >= sizeof(dir))
        return;
    done = 1;
    lane = strtol(slash + 1, &end, 10);
    if (*end || end == slash + 1 || lane < 0) {
        gs__log(GS_ENV_LANE_BARRIER ": \"%s\" is not DIR/LANE; not waiting for the other lanes", v);
        return;
    }
    memcpy(dir, v, (size_t)(slash - v));
    dir[slash - v] = '\0';
    if (access(dir, F_OK) != 0)
        return; /* procs is gone */
    if (p->state > 0)
        n = snprintf(line, sizeof(line), "ready %d %u\n", (int)getpid(), p->sms);
    else
        n = snprintf(line, sizeof(line), "error %d %s\n", (int)getpid(), p->msg);
    if (n > (int)sizeof(line) - 1)
        n = (int)sizeof(line) - 1;
    snprintf(path, sizeof(path), "%s/ready.%ld", dir, lane);
    snprintf(tmp, sizeof(tmp), "%s/.ready.%ld.%d", dir, lane, (int)getpid());
    if (access(path, F_OK) != 0 &&
        (fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0) {
        int ok = write(fd, line, (size_t)n) == n;
        close(fd);
        /* The first process of the lane says it; link() keeps a second from replacing it. */
        if (!ok || link(tmp, path) != 0)
            gs__debug("%s: lane %ld already said it (or %s cannot be written)", GS_ENV_SMS, lane,
                      path);
        unlink(tmp);
    }
    if (p->state > 0) {
        pid_t owner = 0;
        char buf[32];
        unsigned k;

        snprintf(path, sizeof(path), "%s/owner", dir);
        if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
            ssize_t got = read(fd, buf, sizeof(buf) - 1);
            close(fd);
            buf[got > 0 ? got : 0] = '\0';
            owner = (pid_t)atoi(buf);
        }
        snprintf(path, sizeof(path), "%s/go", dir);
        /* Until the release; or until procs is gone (its directory, or its process, killed). */
        for (k = 0; access(path, F_OK) != 0 && access(dir, F_OK) == 0; k++) {
            struct timespec ts = { 0, 2000000 };
            if (k % 50 == 49 && owner > 0 && kill(owner, 0) < 0 && errno == ESRCH)
                break;
            nanosleep(&ts, NULL);
        }
        gs__debug("%s: released by gpuslice procs", GS_ENV_SMS);
    }
    errno = saved;
}

CUresult gs__sm_primary(CUdevice dev, CUcontext *pctx)
{
    struct part *p;
    uint64_t spec;
    CUresult r = CUDA_SUCCESS;
    int saved;

    if (gs__state.sm_limits.n == 0 || dev < 0 || dev >= MAX_DEVICES || (spec = spec_for(dev)) == 0)
        return CUDA_SUCCESS;
    p = &parts[dev];
    pthread_mutex_lock(&sm_mu);
    saved = errno;
    if (p->state == 0)
        make(p, dev, spec);
    lane_barrier(p); /* once per process, at its first context */
    errno = saved;
    /* Known for refused devices too, so that the primary context is refused wherever it appears. */
    __atomic_store_n(&p->primary, *pctx, __ATOMIC_RELEASE);
    if (p->state > 0)
        *pctx = p->ctx;
    else
        r = p->error;
    pthread_mutex_unlock(&sm_mu);
    return r;
}

/*
 * For a context about to be current: itself, a partitioned device's green
 * context for its primary context, or NULL with *r set for the primary
 * context of a device whose partition was refused.
 */
static CUcontext mapped(CUcontext ctx, CUresult *r)
{
    int i;

    if (ctx == NULL)
        return ctx;
    for (i = 0; i < MAX_DEVICES; i++) {
        if (__atomic_load_n(&parts[i].primary, __ATOMIC_ACQUIRE) != ctx)
            continue;
        if (__atomic_load_n(&parts[i].state, __ATOMIC_ACQUIRE) > 0)
            return parts[i].ctx;
        *r = parts[i].error;
        return NULL;
    }
    return ctx;
}

/*
 * What to make current for c when it may be the primary context of a
 * partitioned device that was never handed out through
 * cuDevicePrimaryCtxRetain (the CUDA runtime retains and sets it through its
 * own entry points too): as mapped(). The reference taken to find out is
 * kept for such a context: its partition lives as long as the process.
 */
static CUcontext unseen_primary(CUcontext c, CUresult *r)
{
    CUcontext p = NULL, g;
    unsigned flags;
    CUdevice dev;
    int active = 0, i;

    for (i = 0; i < MAX_DEVICES; i++)
        if (__atomic_load_n(&parts[i].state, __ATOMIC_ACQUIRE) > 0 && parts[i].ctx == c)
            return c; /* a partition itself */
    if (!gs__real.cuCtxGetDevice || gs__real.cuCtxGetDevice(&dev) != CUDA_SUCCESS ||
        spec_for(dev) == 0)
        return c;
    /*
     * Its primary context known (perhaps since mapped() looked, by another
     * thread): mapped() says what c is. Not active: c is some other context.
     */
    if (dev >= 0 && dev < MAX_DEVICES && __atomic_load_n(&parts[dev].primary, __ATOMIC_ACQUIRE))
        return mapped(c, r);
    if (gs__real.cuDevicePrimaryCtxGetState &&
        (gs__real.cuDevicePrimaryCtxGetState(dev, &flags, &active) != CUDA_SUCCESS || !active))
        return c;
    if (gs__real.cuDevicePrimaryCtxRetain(&p, dev) != CUDA_SUCCESS)
        return c;
    if (p != c) {
        gs__real.cuDevicePrimaryCtxRelease_v2(dev);
        return c; /* a context the program made */
    }
    g = p;
    if ((*r = gs__sm_primary(dev, &g)) != CUDA_SUCCESS)
        return NULL;
    return g;
}

/*
 * Makes the green context current where the real primary context is: the
 * CUDA runtime makes the primary context current on a thread through its
 * own entry points too (seen on an H200: PyTorch's main thread had it, and
 * its streams ran on every SM). Called before launches, stream creation and
 * cuCtxGetCurrent: one cuCtxGetCurrent when the current context is the one
 * this thread last checked. CUDA_SUCCESS, or the error of a refused
 * partition, which the caller returns.
 */
/* The slow path of gs__sm_ensure for the current context c. */
static CUresult swap(CUcontext c)
{
    CUcontext m;
    CUresult r = CUDA_SUCCESS;

    if ((m = mapped(c, &r)) == c && (m = unseen_primary(c, &r)) == c) {
        checked = c; /* not a partitioned device's primary context */
        return CUDA_SUCCESS;
    }
    if (m == NULL)
        return r;
    if ((r = gs__real.cuCtxSetCurrent(m)) != CUDA_SUCCESS)
        return r;
    checked = m;
    if (!swapped_noted) {
        swapped_noted = 1;
        gs__debug("%s: the primary context %p was current on this thread; its partition %p is "
                  "now",
                  GS_ENV_SMS, (void *)c, (void *)m);
    }
    return CUDA_SUCCESS;
}

CUresult gs__sm_ensure(void)
{
    CUcontext c = NULL;
    CUresult r;
    int saved;

    if (!gs__real.cuCtxGetCurrent || gs__real.cuCtxGetCurrent(&c) != CUDA_SUCCESS || c == NULL ||
        c == checked)
        return CUDA_SUCCESS;
    saved = errno;
    r = swap(c);
    errno = saved;
    return r;
}

void gs__sm_reset(CUdevice dev)
{
    struct part *p;

    if (gs__state.sm_limits.n == 0 || dev < 0 || dev >= MAX_DEVICES)
        return;
    p = &parts[dev];
    pthread_mutex_lock(&sm_mu);
    /* The reset ends everything the primary context had; a new partition comes with the next retain. */
    if (p->state > 0 && gs__real.cuGreenCtxDestroy)
        gs__real.cuGreenCtxDestroy(p->green);
    if (p->state > 0)
        memset(p, 0, sizeof(*p));
    pthread_mutex_unlock(&sm_mu);
}

void gs__sm_created(CUdevice dev)
{
    if (gs__state.sm_limits.n == 0 || spec_for(dev) == 0 ||
        __atomic_exchange_n(&created_noted, 1, __ATOMIC_ACQ_REL))
        return;
    gs__log("%s: a context the program made itself (cuCtxCreate) on GPU %d is not on the SM "
            "partition; only the device's primary context, which the CUDA runtime uses, is",
            GS_ENV_SMS, (int)dev);
}

/*
 * The SM count of dev's partition (spec) as the program is told it: the
 * partition's once made, else what the split's groups make, planned without
 * making a context (a query before the first context must not make the
 * primary context behind the memory accounting's back). 0 when the partition
 * cannot be made.
 */
static unsigned planned_sms(CUdevice dev, uint64_t spec)
{
    static unsigned plans[MAX_DEVICES]; /* kept across resets: the same split */
    struct part *p = &parts[dev];
    unsigned n = 0, count, first, group;
    CUdevResource all;
    char msg[512];
    int saved;

    if (__atomic_load_n(&p->state, __ATOMIC_ACQUIRE) > 0 &&
        (n = __atomic_load_n(&p->sms, __ATOMIC_ACQUIRE)) > 0)
        return n;
    if ((n = __atomic_load_n(&plans[dev], __ATOMIC_ACQUIRE)) > 0 || planning)
        return n;
    saved = errno;
    planning = 1;
    if (gs__sm_device(dev, &all, msg, sizeof(msg)) == CUDA_SUCCESS) {
        resolve(&all, spec, &count, &first);
        if (gs__sm_build(dev, &all, count, first, (spec & GS_SMS_FINE) != 0, NULL, NULL, &n, &group,
                         msg, sizeof(msg)) != CUDA_SUCCESS)
            n = 0;
    }
    planning = 0;
    errno = saved;
    if (n > 0)
        __atomic_store_n(&plans[dev], n, __ATOMIC_RELEASE);
    return n;
}

/*
 * A partitioned device's MULTIPROCESSOR_COUNT is its partition's SM count,
 * as a MIG instance's is its own: programs and libraries size grids by it
 * (cuBLAS, persistent kernels), and a cooperative launch sized for the whole
 * GPU is too large for the partition. One that cannot be made leaves the
 * real count (its contexts fail anyway, with the reason logged). Where a
 * gpuslice_lanes_run lane's partition is current, the answer is that lane's
 * count. Handed out through dlsym and cuGetProcAddress even without a
 * configuration, for the lanes API (preload.c).
 */
GS_EXPORT CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev)
{
    uint64_t spec;
    unsigned n;
    CUresult r;

    if (gs__load_cuda() < 0)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!gs__real.cuDeviceGetAttribute)
        return CUDA_ERROR_NOT_SUPPORTED;
    if (gs__config() && gs__state.config_error)
        return CUDA_ERROR_NOT_INITIALIZED;
    r = gs__real.cuDeviceGetAttribute(pi, attrib, dev);
    if (r != CUDA_SUCCESS || attrib != CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        return r;
    if (__atomic_load_n(&gs__lanes_live, __ATOMIC_ACQUIRE) && gs__lanes_sms(dev, pi))
        return r;
    if (!gs__sm_on || dev < 0 || dev >= MAX_DEVICES || (spec = spec_for(dev)) == 0)
        return r;
    if ((n = planned_sms(dev, spec)) > 0)
        *pi = (int)n;
    return r;
}

GS_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx)
{
    CUresult r;

    GS_PASS(cuCtxGetCurrent, (pctx));
    if (gs__sm_on && (r = gs__sm_ensure()) != CUDA_SUCCESS)
        return r;
    return gs__real.cuCtxGetCurrent(pctx);
}

GS_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    CUresult r;

    GS_PASS(cuStreamCreate, (phStream, Flags));
    if (gs__sm_on && (r = gs__sm_ensure()) != CUDA_SUCCESS)
        return r;
    return gs__real.cuStreamCreate(phStream, Flags);
}

GS_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    CUresult r;

    GS_PASS(cuStreamCreateWithPriority, (phStream, flags, priority));
    if (gs__sm_on && (r = gs__sm_ensure()) != CUDA_SUCCESS)
        return r;
    return gs__real.cuStreamCreateWithPriority(phStream, flags, priority);
}

#define GS_SET_CURRENT_BODY(sym)                                                                   \
    do {                                                                                           \
        CUresult r = CUDA_SUCCESS;                                                                 \
        CUcontext m;                                                                               \
        GS_PASS(sym, (ctx));                                                                       \
        if (!gs__sm_on || ctx == NULL)                                                             \
            return gs__real.sym(ctx);                                                              \
        if ((m = mapped(ctx, &r)) == NULL)                                                         \
            return r;                                                                              \
        return gs__real.sym(m);                                                                    \
    } while (0)

GS_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    GS_SET_CURRENT_BODY(cuCtxSetCurrent);
}

GS_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx)
{
    GS_SET_CURRENT_BODY(cuCtxPushCurrent);
}

GS_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    GS_SET_CURRENT_BODY(cuCtxPushCurrent_v2);
}
