/*
 * The memory reservation (reserve.h). It holds memory in chunks of plain
 * cuMemAlloc on the primary context of each GPU it sees, and every TICK_NS
 * (or at once when a process of the tenant asks) moves what it holds towards
 *
 *     target - base - tenant
 *
 * where target is ratio x the GPU's memory, base what was in use on the GPU
 * before the first fill apart from the tenant (other processes, and this
 * one's own context), and tenant what the tenant's processes use now, as
 * their interposer counts it. So the GPU is filled to the target at the
 * start, and afterwards the reservation shrinks as the tenant grows and
 * grows as it shrinks; what other processes do later never changes it, so
 * none of them can take its memory. A dead band keeps it from oscillating,
 * and after giving memory back it waits HOLDOFF_NS before it takes any
 * again, so that the process that asked gets it first.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "control/gpuinfo.h"
#include "control/log.h"
#include "control/reserver.h"
#include "common/cuda_api.h"
#include "common/driver.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/reserve.h"
#include "common/tenant.h"

#define TICK_NS 20000000ULL          /* the reservation looks again at least this often */
#define HOLDOFF_NS 500000000ULL      /* after giving memory back, take none for this long */
#define SHORT_GRACE_NS 1000000000ULL /* a shortfall lasting this long is others' memory */
#define CHUNK (256ULL << 20)         /* what one allocation holds at most */
#define GRAIN (2ULL << 20)           /* allocations are whole multiples of this */
#define BAND_MIN (64ULL << 20)       /* the dead band: at least this, or 1/500 of the GPU */
#define MAX_GPUS GPUSLICE_MAX_DEVICES

/* The driver functions the reserver cannot do without (cuGetErrorName is optional). */
#define CUDA_NEEDED(X)                                                                             \
    X(cuInit)                                                                                      \
    X(cuDeviceGetCount)                                                                            \
    X(cuDeviceGet) X(cuDeviceGetUuid_v2) X(cuDevicePrimaryCtxRetain)                               \
        X(cuDevicePrimaryCtxRelease_v2) X(cuCtxSetCurrent) X(cuMemAlloc_v2) X(cuMemFree_v2)        \
            X(cuMemGetInfo_v2) X(cuDeviceGetAttribute)

struct gpu {
    int index;
    CUcontext ctx;
    uint8_t uuid[16];
    char uuid_s[GS_UUID_STRLEN];
    uint64_t total, target, base, band;
    uint64_t held;    /* the sum of sizes */
    CUdeviceptr *ptr; /* the chunks, newest last */
    uint64_t *size;
    size_t n, cap;
    uint64_t holdoff_until;
    int entry;            /* the reservation's entry, -1 alone */
    int shrink_seen;      /* ticks in a row that asked to shrink for the tenant's growth */
    uint64_t short_since; /* when growing first fell short (0: it did not) */
};

struct state {
    const struct reserve_opts *o;
    struct gs_driver d;
    struct gpu g[MAX_GPUS];
    int n;
};

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

int reserve_parse_ratio(const char *s, double *out)
{
    const char *p;
    int dots = 0, digits = 0;
    double v;

    /* Digits with at most one '.': no sign, exponent, hex, spaces, inf or nan. */
    for (p = s ? s : ""; *p; p++) {
        if (*p == '.')
            dots++;
        else if (*p >= '0' && *p <= '9')
            digits++;
        else
            return -EINVAL;
    }
    if (digits == 0 || dots > 1)
        return -EINVAL;
    v = strtod(s, NULL);
    if (!(v > 0 && v <= 1))
        return -EINVAL;
    *out = v;
    return 0;
}

static int load(struct gs_driver *d, char *err, size_t errlen)
{
    char why[256];

    if (gs_driver_open_cuda(d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        char hint[PATH_MAX + 64];

        gpuinfo_sim_hint(hint, sizeof(hint));
        if ((size_t)snprintf(err, errlen, "no NVIDIA driver found: %s%s", why, hint) >= errlen)
            snprintf(err, errlen, "no NVIDIA driver found: %s", why);
        return GS_ENODRIVER;
    }
#define NEED(name)                                                                                 \
    if (d->name == NULL) {                                                                         \
        snprintf(err, errlen, "the CUDA driver has no %s", #name);                                 \
        return -ENOSYS;                                                                            \
    }
    CUDA_NEEDED(NEED)
#undef NEED
    return 0;
}

/* What the tenant's processes use on g now, as their interposer counts it. */
static uint64_t tenant_used(const struct state *st, const struct gpu *g)
{
    const struct gpuslice_tenant *t = st->o->tenant;
    int i;

    if (t == NULL)
        return 0;
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        if (memcmp(t->dev[i].uuid, g->uuid, 16) == 0)
            return __atomic_load_n(&t->dev[i].mem_used, __ATOMIC_ACQUIRE);
    return 0;
}

static void publish(const struct state *st, const struct gpu *g)
{
    if (st->o->tenant && g->entry >= 0)
        __atomic_store_n(&st->o->tenant->reserve.dev[g->entry].held, g->held, __ATOMIC_RELEASE);
}

/* One allocation of size; 0, or -ENOMEM when the GPU has no room, -EIO otherwise. */
static int take(struct state *st, struct gpu *g, uint64_t size)
{
    CUdeviceptr p;
    CUresult r;

    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 64;
        CUdeviceptr *np = realloc(g->ptr, cap * sizeof(*np));
        uint64_t *ns;
        if (np == NULL)
            return -ENOMEM;
        g->ptr = np;
        if ((ns = realloc(g->size, cap * sizeof(*ns))) == NULL)
            return -ENOMEM;
        g->size = ns;
        g->cap = cap;
    }
    if ((r = st->d.cuMemAlloc_v2(&p, (size_t)size)) != CUDA_SUCCESS)
        return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : -EIO;
    g->ptr[g->n] = p;
    g->size[g->n++] = size;
    g->held += size;
    return 0;
}

/* Frees the newest chunk. */
static void drop(struct state *st, struct gpu *g)
{
    g->n--;
    st->d.cuMemFree_v2(g->ptr[g->n]);
    g->held -= g->size[g->n];
}

/*
 * Holds as close to want as the GPU allows (never more); 0, or -EIO. When the
 * GPU has no room for all of it, what is missing is taken as other processes'
 * (base grows by it), so the reservation does not keep chasing memory that
 * others free later; only the tenant's own changes move it from then on.
 * After the first fill (grace set) that conclusion waits until the shortfall
 * has lasted SHORT_GRACE_NS: memory the tenant gave up may still be on its way
 * back (a process of it that ended is uncounted before the driver has torn its
 * contexts down), and later ticks try again.
 */
static int grow(struct state *st, struct gpu *g, uint64_t want, int grace)
{
    while (g->held + GRAIN <= want) {
        uint64_t size = want - g->held;
        int r;

        if (size > CHUNK)
            size = CHUNK;
        size -= size % GRAIN;
        /* Nearly full: the rest may fit in smaller pieces. */
        while ((r = take(st, g, size)) == -ENOMEM && size > GRAIN) {
            size /= 2;
            size -= size % GRAIN;
            if (size < GRAIN)
                size = GRAIN;
        }
        if (r == -ENOMEM) {
            uint64_t missing = want - g->held, now = now_ns();
            if (grace && g->short_since == 0)
                g->short_since = now;
            if (grace && now - g->short_since < SHORT_GRACE_NS)
                return 0;
            g->short_since = 0;
            if (missing > g->band)
                gs_log_note("%s: GPU %d (%s) has no more free memory: holding %.2f GiB, %.2f GiB "
                            "short of the target",
                            st->o->label, g->index, g->uuid_s, (double)g->held / (1 << 30),
                            (double)missing / (1 << 30));
            g->base += missing;
            return 0;
        }
        if (r < 0)
            return r;
    }
    g->short_since = 0;
    return 0;
}

/* Holds at most want: frees the newest chunks, and takes back the part of the last one not needed. */
static void shrink(struct state *st, struct gpu *g, uint64_t want)
{
    while (g->n > 0 && g->held > want)
        drop(st, g);
    grow(st, g, want, 1);
}

/* What g should hold now. */
static uint64_t wanted(const struct state *st, const struct gpu *g)
{
    uint64_t used = tenant_used(st, g), off = g->base + used;

    return g->target > off ? g->target - off : 0;
}

/*
 * The tenant asked for bytes on g: give them back, and a band more, and hold
 * off. An ask that could not be met even with all of it (more than it holds
 * plus what is free) is not: the allocation fails either way, and other
 * processes would take what was given.
 */
static void give(struct state *st, struct gpu *g, uint64_t bytes)
{
    size_t free_b = 0, total_b = 0;
    uint64_t goal;

    if (st->d.cuMemGetInfo_v2(&free_b, &total_b) == CUDA_SUCCESS && bytes > g->held + free_b)
        return;
    if (bytes > g->total)
        bytes = g->total;
    goal = g->held > bytes + g->band ? g->held - bytes - g->band : 0;
    while (g->n > 0 && g->held > goal)
        drop(st, g);
    g->holdoff_until = now_ns() + HOLDOFF_NS;
    publish(st, g);
}

/*
 * Moves g towards what it should hold. It shrinks for the tenant's growth only
 * when two ticks in a row ask it to: an allocation is charged to the tenant
 * before the driver is asked, and one the driver refuses is uncharged at once.
 */
static void steer(struct state *st, struct gpu *g)
{
    uint64_t want = wanted(st, g);

    if (g->held > want + g->band) {
        g->short_since = 0;
        if (++g->shrink_seen >= 2)
            shrink(st, g, want);
    } else {
        g->shrink_seen = 0;
        if (g->held + g->band < want && now_ns() >= g->holdoff_until)
            grow(st, g, want, 1);
        else if (g->held + g->band >= want)
            g->short_since = 0; /* no shortfall now: a later one has its own grace */
    }
    publish(st, g);
}

static int setup(struct state *st, char *err, size_t errlen)
{
    struct gs_driver *d = &st->d;
    char eb[48];
    int count, i, r;
    CUresult cr;

    if ((r = load(d, err, errlen)) < 0)
        return r;
    if ((cr = d->cuInit(0)) != CUDA_SUCCESS || (cr = d->cuDeviceGetCount(&count)) != CUDA_SUCCESS) {
        snprintf(err, errlen, "the CUDA driver did not initialise: %s",
                 gs_driver_cu_name(d, cr, eb, sizeof(eb)));
        return -EIO;
    }
    if (count == 0) {
        snprintf(err, errlen, "no GPU to reserve (CUDA_VISIBLE_DEVICES=%s)",
                 getenv("CUDA_VISIBLE_DEVICES") ? getenv("CUDA_VISIBLE_DEVICES") : "(unset)");
        return -ENODEV;
    }
    if (count > MAX_GPUS)
        count = MAX_GPUS;
    for (i = 0; i < count; i++) {
        struct gpu *g = &st->g[i];
        CUdevice dev;
        CUuuid u;
        size_t free_b = 0, total_b = 0;
        uint64_t used;

        memset(g, 0, sizeof(*g));
        g->index = i;
        g->entry = -1;
        if ((cr = d->cuDeviceGet(&dev, i)) == CUDA_SUCCESS) {
            int mode = 0;
            if (d->cuDeviceGetAttribute(&mode, CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, dev) ==
                    CUDA_SUCCESS &&
                mode != 0) {
                snprintf(err, errlen,
                         "GPU %d is in %s compute mode: a context of the reservation would "
                         "keep the program from making its own",
                         i,
                         mode == 3   ? "exclusive-process"
                         : mode == 2 ? "prohibited"
                                     : "a restricted");
                return -EPERM;
            }
        }
        if (cr != CUDA_SUCCESS || (cr = d->cuDeviceGetUuid_v2(&u, dev)) != CUDA_SUCCESS ||
            (cr = d->cuDevicePrimaryCtxRetain(&g->ctx, dev)) != CUDA_SUCCESS) {
            snprintf(err, errlen, "GPU %d: cannot make a context to hold memory in: %s", i,
                     gs_driver_cu_name(d, cr, eb, sizeof(eb)));
            return -EIO;
        }
        st->n = i + 1;
        memcpy(g->uuid, u.bytes, 16);
        gs_format_uuid(g->uuid, g->uuid_s);
        memcpy(g->uuid_s, "GPU", 3); /* as NVML and nvidia-smi write it */
        if ((cr = d->cuCtxSetCurrent(g->ctx)) != CUDA_SUCCESS ||
            (cr = d->cuMemGetInfo_v2(&free_b, &total_b)) != CUDA_SUCCESS) {
            snprintf(err, errlen, "GPU %d (%s): cannot read its memory: %s", i, g->uuid_s,
                     gs_driver_cu_name(d, cr, eb, sizeof(eb)));
            return -EIO;
        }
        g->total = total_b;
        g->target = (uint64_t)(st->o->ratio * (double)total_b);
        g->target -= g->target % GRAIN;
        used = total_b - free_b;
        /* In use apart from the tenant: others, and this process's own context. */
        g->base = used > tenant_used(st, g) ? used - tenant_used(st, g) : 0;
        g->band = total_b / 500 > BAND_MIN ? total_b / 500 : BAND_MIN;
        if (st->o->tenant) {
            if ((g->entry = gs_reserve_add(st->o->tenant, g->uuid, g->target)) < 0) {
                snprintf(err, errlen, "GPU %d: no room for it in the tenant's reservation", i);
                return -ENOSPC;
            }
        }
    }
    return 0;
}

static void report(const struct state *st)
{
    int i;

    for (i = 0; i < st->n; i++) {
        const struct gpu *g = &st->g[i];
        uint64_t in_use = g->base + g->held + tenant_used(st, g);

        gs_log_note("%s: GPU %d (%s): holding %.2f GiB; the GPU is %.1f%% full (%.2f of %.2f GiB, "
                    "target %.0f%%)",
                    st->o->label, g->index, g->uuid_s, (double)g->held / (1 << 30),
                    100.0 * (double)in_use / (double)g->total, (double)in_use / (1 << 30),
                    (double)g->total / (1 << 30), 100.0 * st->o->ratio);
    }
}

static void print_json(const struct state *st)
{
    int i;

    printf("{\"ratio\":%g,\"gpus\":[", st->o->ratio);
    for (i = 0; i < st->n; i++) {
        const struct gpu *g = &st->g[i];
        printf("%s{\"index\":%d,\"uuid\":\"%s\",\"total_bytes\":%llu,\"target_bytes\":%llu,"
               "\"reserved_bytes\":%llu,\"used_bytes\":%llu}",
               i ? "," : "", g->index, g->uuid_s, (unsigned long long)g->total,
               (unsigned long long)g->target, (unsigned long long)g->held,
               (unsigned long long)(g->base + g->held + tenant_used(st, g)));
    }
    printf("]}\n");
    fflush(stdout);
}

static void teardown(struct state *st)
{
    int i;

    for (i = 0; i < st->n; i++) {
        struct gpu *g = &st->g[i];
        if (g->ctx && st->d.cuCtxSetCurrent(g->ctx) == CUDA_SUCCESS)
            while (g->n > 0)
                drop(st, g);
        g->held = 0;
        publish(st, g);
        if (g->ctx) {
            CUdevice dev;
            if (st->d.cuDeviceGet(&dev, g->index) == CUDA_SUCCESS)
                st->d.cuDevicePrimaryCtxRelease_v2(dev);
        }
        free(g->ptr);
        free(g->size);
    }
    if (st->o->tenant)
        gs_reserve_release(st->o->tenant, getpid());
}

static void ready(const struct reserve_opts *o, const char *msg)
{
    char line[1024];
    int n;

    if (o->ready_fd < 0)
        return;
    n = snprintf(line, sizeof(line), "%s\n", msg);
    if (write(o->ready_fd, line, (size_t)n) < 0)
        return; /* the parent is gone: the loop notices */
}

/* Says why the reservation cannot start: to the parent that waits for it, else on stderr. */
static void fail(const struct reserve_opts *o, const char *msg)
{
    char line[1024];

    if (o->ready_fd < 0) {
        gs_log_error("%s: %s", o->label, msg);
        return;
    }
    snprintf(line, sizeof(line), "error %s", msg);
    ready(o, line);
}

int reserve_run(const struct reserve_opts *o, const sigset_t *stop)
{
    static struct state st;
    struct timespec zero = { 0, 0 }, tick = { 0, (long)TICK_NS };
    char err[512], msg[600];
    uint32_t seen = 0;
    int i, r;

    memset(&st, 0, sizeof(st));
    st.o = o;
    if (o->parent > 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != o->parent)
            return -1;
    }
    if (o->tenant &&
        (r = gs_reserve_claim(o->tenant, getpid(), gs_proc_start_time(getpid()))) < 0) {
        fail(o, "the tenant already has a memory reservation");
        return -1;
    }
    if ((r = setup(&st, err, sizeof(err))) < 0) {
        fail(o, err);
        teardown(&st);
        return -1;
    }
    for (i = 0; i < st.n; i++) {
        struct gpu *g = &st.g[i];
        if (st.d.cuCtxSetCurrent(g->ctx) != CUDA_SUCCESS || grow(&st, g, wanted(&st, g), 0) < 0) {
            snprintf(msg, sizeof(msg), "GPU %d (%s): an allocation failed", g->index, g->uuid_s);
            fail(o, msg);
            teardown(&st);
            return -1;
        }
        if (wanted(&st, g) == 0)
            gs_log_note("%s: GPU %d (%s) is already %.1f%% full, above the target: nothing held",
                        o->label, g->index, g->uuid_s, 100.0 * (double)g->base / (double)g->total);
        publish(&st, g);
    }
    if (o->tenant)
        seen = __atomic_load_n(&o->tenant->reserve.ask_seq, __ATOMIC_ACQUIRE);
    report(&st);
    if (o->json)
        print_json(&st);
    ready(o, "ok");
    for (;;) {
        uint32_t seq = seen;

        if (sigtimedwait(stop, NULL, o->tenant ? &zero : &tick) > 0)
            break;
        if (o->parent > 0 && getppid() != o->parent)
            break;
        if (o->tenant)
            seq = gs_reserve_wait(o->tenant, seen, TICK_NS);
        for (i = 0; i < st.n; i++) {
            struct gpu *g = &st.g[i];
            uint64_t w = o->tenant ? gs_reserve_take(o->tenant, g->entry) : 0;

            if (st.d.cuCtxSetCurrent(g->ctx) != CUDA_SUCCESS)
                continue;
            if (w)
                give(&st, g, w);
            steer(&st, g);
        }
        if (o->tenant && seq != seen) {
            gs_reserve_answer(o->tenant, seq);
            seen = seq;
        }
    }
    teardown(&st);
    for (i = 0; i < st.n; i++)
        gs_log_note("%s: GPU %d (%s): released", o->label, st.g[i].index, st.g[i].uuid_s);
    return 0;
}
