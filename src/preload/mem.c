/*
 * Memory limits: every allocation family is charged to the tenant by what
 * the driver reserves (rounded to the device's allocation granularity; pools
 * by their reserved size; VMM by physical handles; plus the driver's own
 * per-process overhead — contexts, loaded modules — read from NVML), before
 * the driver is asked, so concurrent allocators cannot overshoot together.
 * Memory given back is returned exactly, including what a destroyed context
 * took with it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/reserve.h"
#include "common/tenant.h"
#include "preload/map.h"
#include "preload/preload.h"

#define MAX_ORDINALS 64
#define MAX_POOLS 64
#define DEFAULT_GRAN (2ULL << 20)
#define REFRESH_INTERVAL_NS 100000000ULL /* overhead re-read at most every 100 ms */
#define RESERVE_WAIT_NS 2000000000ULL /* a refused allocation waits this long for the reservation */
#define RESERVE_TRIES 3               /* ... and asks it this many times */
#define RESERVE_CTX_BYTES (1ULL << 30) /* what a context that cannot be made asks for */

enum overhead_mode { OVERHEAD_UNKNOWN, OVERHEAD_NVML_PROCESS, OVERHEAD_FOOTPRINT };

struct dev_state {
    int resolved; /* 1 resolved, <0 failed */
    int entry;    /* tenant device entry */
    uint64_t gran;
    char uuid[GS_UUID_STRLEN]; /* "gpu-…" */
    int primary_refs;
    CUcontext primary;      /* as handed out: with an SM partition, its green context */
    CUcontext real_primary; /* the device's own primary context */
    int ctx_count;
    uint64_t charged;  /* allocations, pools, VMM, arrays of this process */
    uint64_t overhead; /* driver-side usage beyond them */
    enum overhead_mode mode;
    uint64_t footprint; /* per-context, when NVML cannot see this process */
    uint64_t last_refresh_ns;
    int inflight; /* allocations and frees between their charge and the driver's answer */
};

struct pool_state {
    CUmemoryPool pool; /* NULL once destroyed */
    int ord;
    int destroyed; /* destroyed while allocations from it lived: charged until they go */
    int uncounted; /* an allocation from it went unrecorded: charged until its context goes */
    uint64_t live; /* allocations from it not yet freed */
    uint64_t accounted;
};

static pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
/* Recursive: an admission made with it held may sync every pool (admit). */
static pthread_mutex_t pool_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct dev_state devs[MAX_ORDINALS];
static struct pool_state pools[MAX_POOLS];
static struct gs_map allocs;   /* device pointer -> charge; aux = context */
static struct gs_map vmm;      /* VMM allocation (serial) -> charge, refs, maps */
static struct gs_map handles;  /* live VMM handle -> its allocation's serial (aux) */
static struct gs_map mappings; /* mapped VA -> size; aux = the allocation's serial */
static uint64_t vmm_serial;    /* the last serial given (mem_mu) */
static struct gs_map arrays;   /* CUarray -> charge; aux = context */
static struct gs_map pages;    /* page of small allocations -> how many (refs); aux = context */
static struct gs_map pool_ptrs; /* live pool allocation -> aux = its pool's slot (pool_mu) */
static uint64_t pool_ptr_count; /* entries in pool_ptrs: frees look only when there are some */
static CUcontext created[256]; /* contexts made by cuCtxCreate, for destroy */
static int created_ord[256];
/* What could not be given back while the tenant's lock was held too long: given back later. */
static uint64_t owed[GPUSLICE_MAX_DEVICES];
static int proc_slot = -1;
static pid_t slot_pid;
static int exiting;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static uint64_t round_up(uint64_t v, uint64_t g)
{
    if (g == 0)
        return v;
    if (v > UINT64_MAX - g)
        return UINT64_MAX - (UINT64_MAX % g);
    return (v + g - 1) / g * g;
}

/*
 * What an allocation of bytes costs on d when it has pages of its own.
 * Measured on an H200 (driver 580, tests/sim/h200-driver-facts.txt): a
 * request of at least the granularity (2 MiB) takes it rounded up to that
 * (2 MiB + 1 took 4 MiB). A smaller one is placed in a 2 MiB page shared with
 * other small ones (4000 x 512 B took one page, 1 MiB + 4 KiB one page each):
 * those are charged by page (small_alloc). Managed memory is charged by its
 * size, rounded to 512 bytes, as a bound: the driver takes device memory for
 * it only when it is touched.
 */
static uint64_t alloc_charge(const struct dev_state *d, uint64_t bytes)
{
    return bytes >= d->gran ? round_up(bytes, d->gran) : round_up(bytes, 512);
}

/*
 * This process's slot in the tenant, taken at its first use. A process that
 * finds every slot taken is refused its contexts and allocations (memory it
 * held could not be counted); it says so once.
 */
static pthread_mutex_t slot_mu = PTHREAD_MUTEX_INITIALIZER;

static int slot(void)
{
    static pid_t warned;
    pid_t pid = getpid();
    int s;

    if (__atomic_load_n(&slot_pid, __ATOMIC_ACQUIRE) == pid)
        return __atomic_load_n(&proc_slot, __ATOMIC_RELAXED);
    /* Threads making their first CUDA calls at once take one slot, not one each. */
    pthread_mutex_lock(&slot_mu);
    if (__atomic_load_n(&slot_pid, __ATOMIC_ACQUIRE) == pid) {
        pthread_mutex_unlock(&slot_mu);
        return proc_slot;
    }
    s = gs_tenant_proc_register(gs__state.tenant, pid, gs_proc_start_time(pid));
    __atomic_store_n(&proc_slot, s, __ATOMIC_RELAXED);
    if (s >= 0) /* a refused registration is tried again at the next use */
        __atomic_store_n(&slot_pid, pid, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&slot_mu);
    if (s < 0 && __atomic_exchange_n(&warned, pid, __ATOMIC_RELAXED) != pid)
        gs__log("%s (%d processes at most); this process's contexts and allocations are "
                "refused",
                s == GS_ENOSLOT ? "no free process slot in the tenant"
                                        : "cannot take a process slot in the tenant",
                GPUSLICE_MAX_PROCS);
    return s;
}

void gs__mem_fork_child(void)
{
    /* The child is a new process: it takes its own slot and starts with nothing. */
    proc_slot = -1;
    slot_pid = 0;
    memset(owed, 0, sizeof(owed));
    pthread_mutex_init(&slot_mu, NULL);
    pthread_mutex_init(&mem_mu, NULL);
    {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&pool_mu, &a);
        pthread_mutexattr_destroy(&a);
    }
    memset(devs, 0, sizeof(devs));
    memset(pools, 0, sizeof(pools));
    free(allocs.v);
    free(vmm.v);
    free(handles.v);
    free(mappings.v);
    free(arrays.v);
    free(pages.v);
    memset(&pages, 0, sizeof(pages));
    memset(&allocs, 0, sizeof(allocs));
    memset(&vmm, 0, sizeof(vmm));
    memset(&handles, 0, sizeof(handles));
    memset(&mappings, 0, sizeof(mappings));
    memset(&arrays, 0, sizeof(arrays));
    free(pool_ptrs.v);
    memset(&pool_ptrs, 0, sizeof(pool_ptrs));
    pool_ptr_count = 0;
}

void gs__mem_exit(void)
{
    exiting = 1;
    if (gs__state.tenant && proc_slot >= 0 && slot_pid == getpid())
        gs_tenant_proc_unregister(gs__state.tenant, proc_slot);
    proc_slot = -1;
}

/* Resolves ordinal's device: UUID, tenant entry with its limit, granularity. */
static struct dev_state *dev_get(int ord)
{
    struct dev_state *d;
    CUuuid uuid;
    CUdevice dev;
    uint64_t limit;
    int e;

    if (ord < 0 || ord >= MAX_ORDINALS || gs__state.tenant == NULL)
        return NULL;
    d = &devs[ord];
    if (d->resolved)
        return d->resolved > 0 ? d : NULL;
    if (!gs__real.cuDeviceGet || !gs__real.cuDeviceGetUuid_v2 ||
        gs__real.cuDeviceGet(&dev, ord) != CUDA_SUCCESS ||
        gs__real.cuDeviceGetUuid_v2(&uuid, dev) != CUDA_SUCCESS)
        return NULL; /* not initialised yet: try again later */
    gs_format_uuid((const unsigned char *)uuid.bytes, d->uuid);
    limit = gs_limits_lookup(&gs__state.mem_limits, ord, d->uuid);
    if ((e = gs_tenant_device(gs__state.tenant, (const uint8_t *)uuid.bytes, ord, limit,
                              (uint32_t)gs_limits_lookup(&gs__state.compute_limits, ord,
                                                         d->uuid))) < 0) {
        d->resolved = -1;
        gs__log("device %d: no room for it in the tenant's device table", ord);
        return NULL;
    }
    d->entry = e;
    d->gran = DEFAULT_GRAN;
    if (gs__real.cuMemGetAllocationGranularity) {
        CUmemAllocationProp prop;
        size_t g = 0;

        memset(&prop, 0, sizeof(prop));
        prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
        prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        prop.location.id = ord;
        if (gs__real.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM) ==
                CUDA_SUCCESS &&
            g > 0)
            d->gran = g;
    }
    gs__debug("device %d (%s): tenant entry %d, limit %llu bytes, granularity %llu", ord,
              d->uuid, e,
              (unsigned long long)__atomic_load_n(&gs__state.tenant->dev[e].mem_limit,
                                                  __ATOMIC_RELAXED),
              (unsigned long long)d->gran);
    d->resolved = 1;
    return d;
}

static int current_ordinal(void)
{
    CUdevice dev;

    if (!gs__real.cuCtxGetDevice || gs__real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return (int)dev;
}

/* Charges without a limit check: the driver has already reserved it. */
static void force_charge(struct dev_state *d, uint64_t bytes)
{
    int s = slot();

    if (s >= 0 && bytes)
        gs_tenant_charge(gs__state.tenant, s, d->entry, bytes, 1);
}

static void uncharge(struct dev_state *d, uint64_t bytes)
{
    int s = slot();

    if (s < 0)
        return;
    bytes += __atomic_exchange_n(&owed[d->entry], 0, __ATOMIC_ACQ_REL);
    if (bytes && gs_tenant_uncharge(gs__state.tenant, s, d->entry, bytes) < 0)
        __atomic_add_fetch(&owed[d->entry], bytes, __ATOMIC_ACQ_REL);
}

static void nvml_init_once(void)
{
    if (gs__load_nvml() == 0 && gs__real.nvmlInit_v2)
        gs__real.nvmlInit_v2();
}

/* NVML, initialised (every reading before nvmlInit would be an error or 0), or -1. */
static int nvml_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    if (gs__load_nvml() < 0)
        return -1;
    pthread_once(&once, nvml_init_once);
    return 0;
}

#define NVML_PROC_TRIES 6

/*
 * This process's usage on the device according to the driver (NVML), or -1
 * when NVML does not list it. The process list can grow between asking its
 * length and reading it (hundreds of processes attach at once): the buffer
 * grows until it fits, so a busy GPU never looks like one that cannot see us.
 */
/*
 * One look at device d through NVML's process list: this process's figure
 * (-1 when it is not listed), and the number, sum and smallest of every listed
 * process's figures. -1 when the list could not be read.
 */
struct nvml_look {
    int64_t mine;
    uint64_t sum;
    uint64_t smallest;
    unsigned listed;
    int complete; /* every listed process gave a figure */
};

static int nvml_look_processes(struct dev_state *d, struct nvml_look *l)
{
    nvmlProcessInfo_t buf[64], *infos = buf, *more;
    nvmlDevice_t h;
    unsigned int cap = 64, n, i;
    char uuid[GS_UUID_STRLEN];
    nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;
    int tries;

    memset(l, 0, sizeof(*l));
    l->mine = -1;
    if (nvml_ready() < 0 || !gs__real.nvmlDeviceGetHandleByUUID ||
        !gs__real.nvmlDeviceGetComputeRunningProcesses_v3)
        return -1;
    memcpy(uuid, d->uuid, sizeof(uuid));
    memcpy(uuid, "GPU-", 4);
    if (gs__real.nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS)
        return -1;
    for (tries = 0; tries < NVML_PROC_TRIES && r == NVML_ERROR_INSUFFICIENT_SIZE; tries++) {
        n = cap;
        r = gs__real.nvmlDeviceGetComputeRunningProcesses_v3(h, &n, infos);
        if (r != NVML_ERROR_INSUFFICIENT_SIZE)
            break;
        /* n is now what it needs; more may attach before the next call. */
        cap = (n > cap ? n : cap) * 2 + 64;
        if ((more = calloc(cap, sizeof(*more))) == NULL)
            break;
        if (infos != buf)
            free(infos);
        infos = more;
    }
    if (r == NVML_SUCCESS) {
        l->complete = 1;
        l->smallest = UINT64_MAX;
        for (i = 0; i < n && i < cap; i++) {
            unsigned long long u = infos[i].usedGpuMemory;
            if (u == NVML_VALUE_NOT_AVAILABLE_ULL) {
                l->complete = 0;
                continue;
            }
            if (infos[i].pid == (unsigned int)getpid())
                l->mine = (int64_t)u;
            l->sum += u;
            l->smallest = u < l->smallest ? u : l->smallest;
            l->listed++;
        }
    }
    if (infos != buf)
        free(infos);
    return r == NVML_SUCCESS ? 0 : -1;
}

/* This process's figure in NVML's list for d; -1 if it is not listed. */
static int64_t nvml_process_used(struct dev_state *d)
{
    struct nvml_look l;

    return nvml_look_processes(d, &l) == 0 ? l.mine : -1;
}

/* Memory in use on the whole device (NVML), or -1 when it cannot be read. */
static int64_t nvml_device_used(struct dev_state *d)
{
    nvmlDevice_t h;
    nvmlMemory_t m;
    char uuid[GS_UUID_STRLEN];

    if (nvml_ready() < 0 || !gs__real.nvmlDeviceGetHandleByUUID ||
        !gs__real.nvmlDeviceGetMemoryInfo)
        return -1;
    memcpy(uuid, d->uuid, sizeof(uuid));
    memcpy(uuid, "GPU-", 4);
    if (gs__real.nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS ||
        gs__real.nvmlDeviceGetMemoryInfo(h, &m) != NVML_SUCCESS)
        return -1;
    return (int64_t)m.used;
}

/* The largest believable hidden part of a context (measured on the H200: 5.8 MiB). */
#define CTX_HIDDEN_MAX (64ULL << 20)
/*
 * A process NVML lists with less than this, or with less than half of this
 * process's own context figure, is still making its context: on the H200 a
 * process was listed with 14 MiB from just after cuInit, its figure growing in
 * steps (16 ... 32, 102, 104 MiB, for over a second at 104 with 64 processes
 * making theirs at once) to its context's 526 MiB as the context became
 * current (bench/context_memory.py).
 */
#define CTX_LISTED_MIN (32ULL << 20)

/*
 * A context takes device memory that NVML's figure for its process omits: on
 * the H200, once 64 processes had made their contexts, the device held 5.82
 * MiB per listed process more than the idle device plus every listed figure
 * (8 processes: 5.98; one: 8.81). Measured here the same way, device-wide,
 * against the tenant's ctx_base (the device's use in no listed figure, and
 * how many were listed, before a first context of the tenant): what the
 * device's use in no listed figure grew by since, per process listed since.
 * Only when the device has settled, which is when every listed process has its
 * context in its figure (CTX_LISTED_MIN; while contexts are being made that
 * use reached 27 GiB on the H200). Stored in the tenant's ctx_hidden, charged
 * per context (refresh_overhead). Returns 1 when it measured, 0 when the
 * device was not settled or no base is known.
 */
static int hidden_from_look(struct dev_state *d, int64_t device_used, const struct nvml_look *l)
{
    uint64_t base = __atomic_load_n(&gs__state.tenant->ctx_base[d->entry], __ATOMIC_ACQUIRE);
    uint64_t before, unattributed, hidden, own;
    unsigned listed_before;

    if (base == 0 || device_used < 0 || !l->complete || l->mine < 0)
        return 0;
    before = GPUSLICE_CTX_BASE_BYTES(base);
    listed_before = GPUSLICE_CTX_BASE_LISTED(base);
    own = (uint64_t)l->mine > d->charged ? (uint64_t)l->mine - d->charged : 0;
    if (l->listed <= listed_before || l->smallest < CTX_LISTED_MIN || l->smallest < own / 2)
        return 0;
    if ((uint64_t)device_used < before + l->sum)
        return 0; /* a figure changed between the two reads */
    unattributed = (uint64_t)device_used - l->sum - before;
    hidden = unattributed / (l->listed - listed_before);
    if (hidden > CTX_HIDDEN_MAX)
        return 0;
    __atomic_store_n(&gs__state.tenant->dev[d->entry].ctx_hidden, hidden, __ATOMIC_RELEASE);
    return 1;
}

/*
 * Re-reads what the driver holds for this process on the device beyond our
 * charges (contexts, modules loaded lazily, …) and charges the difference.
 * Called with mem_mu held.
 */
static void refresh_overhead(struct dev_state *d)
{
    struct nvml_look l;
    int64_t device_used;
    uint64_t want;

    if (d->mode == OVERHEAD_FOOTPRINT || d->ctx_count == 0)
        return;
    d->last_refresh_ns = now_ns();
    device_used = nvml_device_used(d);
    if (nvml_look_processes(d, &l) < 0 || l.mine < 0)
        return;
    d->mode = OVERHEAD_NVML_PROCESS;
    hidden_from_look(d, device_used, &l);
    want = (uint64_t)l.mine > d->charged ? (uint64_t)l.mine - d->charged : 0;
    /* And what each context takes beyond NVML's figure for the process (hidden_from_look). */
    want += (uint64_t)d->ctx_count *
            __atomic_load_n(&gs__state.tenant->dev[d->entry].ctx_hidden, __ATOMIC_RELAXED);
    /*
     * While allocations or frees are between our charge and the driver's answer,
     * the two figures disagree by their size: then the overhead may only grow, so
     * a transient never lets more through than the limit.
     */
    if (want < d->overhead && __atomic_load_n(&d->inflight, __ATOMIC_ACQUIRE) > 0)
        return;
    if (want > d->overhead)
        force_charge(d, want - d->overhead);
    else
        uncharge(d, d->overhead - want);
    d->overhead = want;
}

/* Reads a pool's reserved size from the driver and charges the change. */
static void pool_sync(struct pool_state *p)
{
    struct dev_state *d = dev_get(p->ord);
    cuuint64_t reserved = 0;

    if (d == NULL || !gs__real.cuMemPoolGetAttribute ||
        gs__real.cuMemPoolGetAttribute(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                       &reserved) != CUDA_SUCCESS)
        return;
    pthread_mutex_lock(&mem_mu);
    if (reserved > p->accounted) {
        force_charge(d, reserved - p->accounted);
        d->charged += reserved - p->accounted;
    } else {
        uncharge(d, p->accounted - reserved);
        d->charged -= p->accounted - reserved;
    }
    pthread_mutex_unlock(&mem_mu);
    p->accounted = reserved;
}

static void sync_all_pools(void)
{
    int i;

    pthread_mutex_lock(&pool_mu);
    for (i = 0; i < MAX_POOLS; i++)
        if (pools[i].pool)
            pool_sync(&pools[i]);
    pthread_mutex_unlock(&pool_mu);
}

/*
 * Charges bytes for a new allocation on d, or returns CUDA_ERROR_OUT_OF_MEMORY.
 * Before refusing, it re-reads what may have been given back meanwhile
 * (pools released at a synchronisation, dead processes of the tenant).
 */
static CUresult admit(struct dev_state *d, uint64_t bytes)
{
    int s = slot(), r, saved = errno;

    if (s < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (__atomic_load_n(&owed[d->entry], __ATOMIC_RELAXED))
        uncharge(d, 0); /* a free the lock made wait: given back first */
    __atomic_add_fetch(&d->inflight, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&mem_mu);
    if (d->mode == OVERHEAD_NVML_PROCESS && now_ns() - d->last_refresh_ns > REFRESH_INTERVAL_NS)
        refresh_overhead(d);
    pthread_mutex_unlock(&mem_mu);
    r = gs_tenant_charge(gs__state.tenant, s, d->entry, bytes, 0);
    if (r == GS_EOVERLIMIT) {
        sync_all_pools();
        pthread_mutex_lock(&mem_mu);
        refresh_overhead(d);
        pthread_mutex_unlock(&mem_mu);
        r = gs_tenant_charge(gs__state.tenant, s, d->entry, bytes, 0);
    }
    errno = saved;
    if (r < 0) {
        __atomic_sub_fetch(&d->inflight, 1, __ATOMIC_ACQ_REL);
        gs__debug("refused %llu bytes on %s: tenant uses %llu of %llu", (unsigned long long)bytes,
                  d->uuid,
                  (unsigned long long)__atomic_load_n(&gs__state.tenant->dev[d->entry].mem_used,
                                                      __ATOMIC_RELAXED),
                  (unsigned long long)__atomic_load_n(&gs__state.tenant->dev[d->entry].mem_limit,
                                                      __ATOMIC_RELAXED));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mem_mu);
    d->charged += bytes;
    pthread_mutex_unlock(&mem_mu);
    return CUDA_SUCCESS;
}

/* Whether bytes more would fit under d's limit now (a hint: admit() decides). */
static int room_for(const struct dev_state *d, uint64_t bytes)
{
    const struct gpuslice_tenant_device *td = &gs__state.tenant->dev[d->entry];
    uint64_t limit = __atomic_load_n(&td->mem_limit, __ATOMIC_RELAXED);
    uint64_t used = __atomic_load_n(&td->mem_used, __ATOMIC_RELAXED);

    return limit == 0 || (bytes <= limit && used <= limit - bytes);
}

/* Ends what admit() began, once the driver has answered and the charge is final. */
static void settle(struct dev_state *d)
{
    __atomic_sub_fetch(&d->inflight, 1, __ATOMIC_ACQ_REL);
}

/* Gives back a charge made by admit(); mem_mu held. */
static void unadmit_locked(struct dev_state *d, uint64_t bytes)
{
    int saved = errno;

    d->charged = d->charged >= bytes ? d->charged - bytes : 0;
    uncharge(d, bytes);
    errno = saved;
}

static void unadmit(struct dev_state *d, uint64_t bytes)
{
    pthread_mutex_lock(&mem_mu);
    unadmit_locked(d, bytes);
    pthread_mutex_unlock(&mem_mu);
}

/* Records a charged object in map m; on failure gives the charge back. */
static int track(struct gs_map *m, uint64_t key, uint64_t bytes, int ord, uint64_t aux)
{
    struct gs_map_entry *e;

    pthread_mutex_lock(&mem_mu);
    e = gs_map_put(m, key);
    if (e) {
        e->bytes = bytes;
        e->dev = ord;
        e->aux = aux;
    }
    pthread_mutex_unlock(&mem_mu);
    return e ? 0 : -ENOMEM;
}

/* Removes key from m; returns 1 and its entry in out if it was there. */
static int untrack(struct gs_map *m, uint64_t key, struct gs_map_entry *out)
{
    struct gs_map_entry *e;
    int found = 0;

    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_get(m, key)) != NULL) {
        *out = *e;
        gs_map_del(m, e);
        found = 1;
    }
    pthread_mutex_unlock(&mem_mu);
    return found;
}

static void retrack(struct gs_map *m, const struct gs_map_entry *old)
{
    struct gs_map_entry *e;

    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_put(m, old->key)) != NULL)
        *e = *old;
    pthread_mutex_unlock(&mem_mu);
}

static uint64_t current_ctx(void)
{
    CUcontext c = NULL;

    if (gs__real.cuCtxGetCurrent)
        gs__real.cuCtxGetCurrent(&c);
    return (uint64_t)(uintptr_t)c;
}

/* The state for the current context's device if a limit applies, else NULL. */
static struct dev_state *limited_current(int *ord)
{
    struct dev_state *d;

    if (exiting || (*ord = current_ordinal()) < 0 || (d = dev_get(*ord)) == NULL)
        return NULL;
    return d;
}

/*
 * Small allocations (under d->gran) live in the driver's shared pages: the
 * first one in a page brings the page's cost, the last one to go takes it
 * away. An allocation entry marks itself small with maps = 1 (bytes 0).
 */
#define SMALL_MARK 1u

static uint64_t page_of(const struct dev_state *d, uint64_t ptr)
{
    return ptr & ~(d->gran - 1);
}

/*
 * Counts a small allocation at ptr: 0 if its page was counted already, 1 if
 * the page is new and paid for (paid: the caller was admitted for a page),
 * -1 if the page is new and not paid for, or cannot be followed (nothing is
 * recorded then: the caller frees the allocation).
 */
static int page_add(struct dev_state *d, int ord, uint64_t ptr, uint64_t ctx, int paid)
{
    struct gs_map_entry *e;
    int fresh = 0;

    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_get(&pages, page_of(d, ptr))) != NULL) {
        e->refs++;
    } else if (!paid) {
        fresh = -1;
    } else if ((e = gs_map_put(&pages, page_of(d, ptr))) != NULL) {
        e->refs = 1;
        e->bytes = d->gran;
        e->dev = ord;
        e->aux = ctx;
        fresh = 1;
    } else {
        fresh = -1;
    }
    /* The allocation itself, marked small: its page carries the charge. */
    if (fresh >= 0 && (e = gs_map_put(&allocs, ptr)) != NULL) {
        e->bytes = 0;
        e->dev = ord;
        e->aux = ctx;
        e->maps = SMALL_MARK;
    }
    pthread_mutex_unlock(&mem_mu);
    return fresh;
}

/* A small allocation at ptr is gone; the page's cost goes with the last one. */
static void page_release(struct dev_state *d, uint64_t ptr)
{
    struct gs_map_entry *e;

    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_get(&pages, page_of(d, ptr))) != NULL && --e->refs == 0) {
        unadmit_locked(d, e->bytes);
        gs_map_del(&pages, e);
    }
    pthread_mutex_unlock(&mem_mu);
}

/* Releases a tracked object's charge. */
static void release_entry(const struct gs_map_entry *e)
{
    struct dev_state *d = dev_get(e->dev);

    if (d == NULL)
        return;
    if (e->maps == SMALL_MARK)
        page_release(d, e->key);
    else
        unadmit(d, e->bytes);
}

/*
 * The driver refused an allocation of bytes on d. If the tenant runs beside
 * a memory reservation (gpuslice run --filled) holding memory on that GPU,
 * ask it to give some back and wait for it: 1 means try again. The program
 * never fails for memory its own reservation was keeping for it.
 */
static int give_back(struct dev_state *d, uint64_t bytes)
{
    static int warned;
    struct gpuslice_tenant *t = gs__state.tenant;
    uint64_t held;
    size_t f = 0, tot = 0;
    int e, r;

    if (d == NULL || t == NULL || exiting ||
        (e = gs_reserve_entry(t, t->dev[d->entry].uuid)) < 0 || (held = gs_reserve_held(t, e)) == 0)
        return 0;
    /* One that would not fit even with all of it fails anyway: keep the reservation whole. */
    if (current_ordinal() == (int)(d - devs) && gs__real.cuMemGetInfo_v2 &&
        gs__real.cuMemGetInfo_v2(&f, &tot) == CUDA_SUCCESS && bytes > held + f)
        return 0;
    r = gs_reserve_ask(t, e, bytes, RESERVE_WAIT_NS);
    if (r == -ETIMEDOUT && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
        gs__log("device %s: the memory reservation did not give memory back within %llu s; "
                "the allocation fails",
                d->uuid, (unsigned long long)(RESERVE_WAIT_NS / 1000000000ULL));
    if (r > 0)
        gs__debug("device %s: the memory reservation gave back memory for %llu bytes", d->uuid,
                  (unsigned long long)bytes);
    return r > 0;
}

/* What the tenant's memory reservation holds on d's GPU: memory the program may have. */
static uint64_t reserved_for(const struct dev_state *d)
{
    struct gpuslice_tenant *t = gs__state.tenant;
    int e;

    if (t == NULL || __atomic_load_n(&t->reserve.pid, __ATOMIC_ACQUIRE) == 0 ||
        (e = gs_reserve_entry(t, t->dev[d->entry].uuid)) < 0 || !gs_reserve_alive(t))
        return 0;
    return gs_reserve_held(t, e);
}

uint64_t gs__mem_reserved_for_entry(int e)
{
    int i;

    for (i = 0; i < MAX_ORDINALS; i++)
        if (devs[i].resolved > 0 && devs[i].entry == e)
            return reserved_for(&devs[i]);
    return 0;
}

/* r = expr, asked again after the reservation gave memory back (see give_back). */
#define GS_RESERVED_CALL(r, d, bytes, expr)                                             \
    do {                                                                                \
        int tries_ = 0;                                                                 \
        while (((r) = (expr)) == CUDA_ERROR_OUT_OF_MEMORY && tries_++ < RESERVE_TRIES && \
               give_back((d), (bytes)))                                                 \
            ;                                                                           \
    } while (0)

/*
 * The same for making a context, which the driver measures by the change in
 * the device's use: after a give-back that changed it, measured again.
 */
#define GS_RESERVED_CTX_CALL(r, d, before, expr)                                         \
    do {                                                                                 \
        int tries_ = 0;                                                                  \
        while (((r) = (expr)) == CUDA_ERROR_OUT_OF_MEMORY && tries_++ < RESERVE_TRIES &&  \
               give_back((d), RESERVE_CTX_BYTES))                                        \
            (before) = used_before(d);                                                   \
    } while (0)

/*
 * A small allocation: admitted for a whole page, since the driver may need a
 * new one. Near the limit, where a page is not left, it is asked for all the
 * same: if it lands in a page already counted it costs nothing, and if it
 * took a new page it is freed again and refused — the one request that would
 * cross the limit gets nothing. r is the driver's answer; ptr its pointer.
 */
struct small {
    struct dev_state *d;
    int ord;
    int admitted;
};

static void small_begin(struct small *sm, struct dev_state *d, int ord)
{
    sm->d = d;
    sm->ord = ord;
    sm->admitted = admit(d, d->gran) == CUDA_SUCCESS;
}

static CUresult small_end(struct small *sm, CUresult r, uint64_t ptr)
{
    struct dev_state *d = sm->d;
    int fresh;

    if (r != CUDA_SUCCESS) {
        if (sm->admitted) {
            unadmit(d, d->gran);
            settle(d);
        }
        return r;
    }
    fresh = page_add(d, sm->ord, ptr, current_ctx(), sm->admitted);
    if (fresh < 0) {
        /* It took a page the limit has no room for (or one we cannot follow). */
        if (sm->admitted) {
            unadmit(d, d->gran);
            settle(d);
        }
        gs__real.cuMemFree_v2(ptr);
        gs__debug("refused a small allocation on %s: it needed a page beyond the limit",
                  d->uuid);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (fresh == 0 && sm->admitted)
        unadmit(d, d->gran); /* its page was counted already */
    if (sm->admitted)
        settle(d);
    return CUDA_SUCCESS;
}

#define GS_ALLOC_BODY(sym, ptrtype, dptr, bytes, pages_ok, call)            \
    do {                                                                     \
        struct dev_state *d;                                                 \
        uint64_t charge;                                                     \
        CUresult r;                                                          \
        int ord;                                                             \
        GS_PASS(sym, call);                                                  \
        if ((d = limited_current(&ord)) == NULL || (bytes) == 0)             \
            return gs__real.sym call;                                        \
        if ((pages_ok) && (uint64_t)(bytes) < d->gran && dptr) {             \
            struct small sm;                                                 \
            small_begin(&sm, d, ord);                                        \
            r = gs__real.sym call;                                           \
            return small_end(&sm, r, r == CUDA_SUCCESS ? (uint64_t)*(dptr) : 0); \
        }                                                                    \
        charge = alloc_charge(d, (bytes));                                   \
        if ((r = admit(d, charge)) != CUDA_SUCCESS)                          \
            return r;                                                        \
        GS_RESERVED_CALL(r, d, charge, gs__real.sym call);                   \
        if (r != CUDA_SUCCESS) {                                             \
            unadmit(d, charge);                                              \
            settle(d);                                                       \
            return r;                                                        \
        }                                                                    \
        if (track(&allocs, (uint64_t)*(dptr), charge, ord, current_ctx()) < 0) \
            gs__log("out of memory tracking an allocation; it stays charged"); \
        settle(d);                                                           \
        return CUDA_SUCCESS;                                                 \
    } while (0)

GS_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    GS_ALLOC_BODY(cuMemAlloc_v2, CUdeviceptr, dptr, bytesize, 1, (dptr, bytesize));
}

GS_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    GS_ALLOC_BODY(cuMemAlloc, CUdeviceptr_v1, dptr, bytesize, 1, (dptr, bytesize));
}

GS_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    GS_ALLOC_BODY(cuMemAllocManaged, CUdeviceptr, dptr, bytesize, 0, (dptr, bytesize, flags));
}

/* The pitch the driver picks (measured: rows rounded up to 512 bytes), to charge before asking. */
#define PITCH_ALIGN 512

#define GS_PITCH_BODY(sym, dptr, pPitch, width, height, call)                        \
    do {                                                                             \
        struct dev_state *d;                                                         \
        uint64_t charge, actual, est;                                                \
        CUresult r;                                                                  \
        int ord;                                                                     \
        GS_PASS(sym, call);                                                          \
        if ((d = limited_current(&ord)) == NULL || (width) == 0 || (height) == 0)   \
            return gs__real.sym call;                                                \
        if ((uint64_t)(height) > UINT64_MAX / round_up((width), PITCH_ALIGN))       \
            return CUDA_ERROR_OUT_OF_MEMORY;                                         \
        est = round_up((width), PITCH_ALIGN) * (uint64_t)(height);                   \
        if (est < d->gran && dptr && pPitch) {                                       \
            struct small sm;                                                         \
            small_begin(&sm, d, ord);                                                \
            r = gs__real.sym call;                                                   \
            if (r != CUDA_SUCCESS || (uint64_t)*(pPitch) * (uint64_t)(height) < d->gran) \
                return small_end(&sm, r, r == CUDA_SUCCESS ? (uint64_t)*(dptr) : 0); \
            /* Wider rows than measured: a large one after all; charged below. */    \
            if (sm.admitted)                                                         \
                unadmit(d, d->gran);                                                 \
            actual = alloc_charge(d, (uint64_t)*(pPitch) * (uint64_t)(height));     \
            pthread_mutex_lock(&mem_mu);                                             \
            force_charge(d, actual);                                                 \
            d->charged += actual;                                                    \
            pthread_mutex_unlock(&mem_mu);                                           \
            track(&allocs, (uint64_t)*(dptr), actual, ord, current_ctx());           \
            if (sm.admitted)                                                         \
                settle(d);                                                           \
            return CUDA_SUCCESS;                                                     \
        }                                                                            \
        charge = alloc_charge(d, est);                                               \
        if ((r = admit(d, charge)) != CUDA_SUCCESS)                                  \
            return r;                                                                \
        GS_RESERVED_CALL(r, d, charge, gs__real.sym call);                           \
        if (r != CUDA_SUCCESS) {                                                     \
            unadmit(d, charge);                                                      \
            settle(d);                                                               \
            return r;                                                                \
        }                                                                            \
        actual = alloc_charge(d, (uint64_t)*(pPitch) * (uint64_t)(height));         \
        if (actual > charge) {                                                       \
            pthread_mutex_lock(&mem_mu);                                             \
            force_charge(d, actual - charge);                                        \
            d->charged += actual - charge;                                           \
            pthread_mutex_unlock(&mem_mu);                                           \
        } else if (actual < charge) {                                                \
            unadmit(d, charge - actual);                                             \
        }                                                                            \
        track(&allocs, (uint64_t)*(dptr), actual, ord, current_ctx());               \
        settle(d);                                                                   \
        return CUDA_SUCCESS;                                                         \
    } while (0)

GS_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                      size_t Height, unsigned int ElementSizeBytes)
{
    GS_PITCH_BODY(cuMemAllocPitch_v2, dptr, pPitch, WidthInBytes, Height,
                  (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

GS_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                   unsigned int WidthInBytes, unsigned int Height,
                                   unsigned int ElementSizeBytes)
{
    GS_PITCH_BODY(cuMemAllocPitch, dptr, pPitch, WidthInBytes, Height,
                  (dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

static int pool_ptr_take(CUdeviceptr ptr);
static void pool_ptr_untake(CUdeviceptr ptr, int slot);
static void pool_ptr_done(int slot, int ordered, CUstream stream, int ptsz);

/*
 * Frees: forget first (so a reused address cannot be confused), restore on failure.
 * A pointer not charged as a plain allocation may be a pool's (cuMemFree frees those too).
 */
#define GS_FREE_BODY(sym, map, key, call)                       \
    do {                                                        \
        struct gs_map_entry old;                                \
        CUresult r;                                             \
        int had, slot = -1;                                     \
        struct dev_state *fd = NULL;                            \
        GS_PASS(sym, call);                                     \
        had = untrack((map), (uint64_t)(key), &old);            \
        if (!had && (map) == &allocs)                           \
            slot = pool_ptr_take((CUdeviceptr)(key));           \
        if (had && (fd = dev_get(old.dev)) != NULL)             \
            __atomic_add_fetch(&fd->inflight, 1, __ATOMIC_ACQ_REL); \
        if ((r = gs__real.sym call) != CUDA_SUCCESS) {          \
            if (had)                                            \
                retrack((map), &old);                           \
            if (slot >= 0)                                      \
                pool_ptr_untake((CUdeviceptr)(key), slot);      \
        } else if (had) {                                       \
            release_entry(&old);                                \
        } else if (slot >= 0) {                                 \
            pool_ptr_done(slot, 0, NULL, 0);                    \
        }                                                       \
        if (fd)                                                 \
            settle(fd);                                         \
        return r;                                               \
    } while (0)

GS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GS_FREE_BODY(cuMemFree_v2, &allocs, dptr, (dptr));
}

GS_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    GS_FREE_BODY(cuMemFree, &allocs, dptr, (dptr));
}

/* ---- stream-ordered allocations: charged by the pools' reserved size ---- */

static struct pool_state *pool_find(CUmemoryPool pool, int ord, int add)
{
    int i, free_i = -1;

    if (pool == NULL)
        return NULL;
    for (i = 0; i < MAX_POOLS; i++) {
        if (pools[i].pool == pool)
            return &pools[i];
        if (pools[i].pool == NULL && !pools[i].destroyed && free_i < 0)
            free_i = i;
    }
    if (!add || free_i < 0)
        return NULL;
    memset(&pools[free_i], 0, sizeof(pools[free_i]));
    pools[free_i].pool = pool;
    pools[free_i].ord = ord;
    return &pools[free_i];
}

/*
 * The live allocations of each pool (pool_mu held): a pool destroyed while some
 * live keeps their memory until the last is freed (the driver's rule), and so
 * keeps their charge. A free takes the record before the driver is asked (the
 * address may be handed out again the moment it is freed) and gives it back if
 * the driver refuses.
 */
static void pool_ptr_add(struct pool_state *p, CUdeviceptr ptr)
{
    struct gs_map_entry *e;

    if ((e = gs_map_get(&pool_ptrs, (uint64_t)ptr)) != NULL) {
        /* A free we did not see (a graph's free node): that allocation is gone. */
        if (pools[e->aux].live)
            pools[e->aux].live--;
        pools[e->aux].uncounted = 1;
    } else if ((e = gs_map_put(&pool_ptrs, (uint64_t)ptr)) == NULL) {
        p->uncounted = 1;
        return;
    } else {
        __atomic_add_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
    }
    e->aux = (uint64_t)(p - pools);
    p->live++;
}

/* Takes ptr's record before its free: its pool's slot, or -1 when it is no pool's. */
static int pool_ptr_take(CUdeviceptr ptr)
{
    struct gs_map_entry *e;
    int slot = -1;

    if (__atomic_load_n(&pool_ptr_count, __ATOMIC_RELAXED) == 0)
        return -1;
    pthread_mutex_lock(&pool_mu);
    if ((e = gs_map_get(&pool_ptrs, (uint64_t)ptr)) != NULL) {
        slot = (int)e->aux;
        gs_map_del(&pool_ptrs, e);
        __atomic_sub_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
    }
    pthread_mutex_unlock(&pool_mu);
    return slot;
}

/* The free of ptr (taken from slot) was refused, or only recorded into a graph: still live. */
static void pool_ptr_untake(CUdeviceptr ptr, int slot)
{
    struct gs_map_entry *e;

    pthread_mutex_lock(&pool_mu);
    if ((e = gs_map_put(&pool_ptrs, (uint64_t)ptr)) != NULL) {
        e->aux = (uint64_t)slot;
        __atomic_add_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
    } else {
        pools[slot].live--;
        pools[slot].uncounted = 1;
    }
    pthread_mutex_unlock(&pool_mu);
}

/* Gives back a destroyed pool's slot and charge (pool_mu held). */
static void pool_release(struct pool_state *p)
{
    struct dev_state *d;

    if ((d = dev_get(p->ord)) != NULL)
        unadmit(d, p->accounted);
    memset(p, 0, sizeof(*p));
}

/*
 * The allocation taken from slot is freed. If it was a destroyed pool's last, the
 * pool's memory goes when the free has run: with ordered, a free in stream order,
 * the stream is waited for first (the driver frees when the stream reaches it).
 */
static void pool_ptr_done(int slot, int ordered, CUstream stream, int ptsz)
{
    struct pool_state *p = &pools[slot];
    int last;

    pthread_mutex_lock(&pool_mu);
    last = p->live && --p->live == 0 && p->destroyed && !p->uncounted;
    pthread_mutex_unlock(&pool_mu);
    if (!last)
        return;
    if (ordered)
        (ptsz ? gs__real.cuStreamSynchronize_ptsz : gs__real.cuStreamSynchronize)(stream);
    pthread_mutex_lock(&pool_mu);
    /* Unless the device's last context took it meanwhile (and the slot is another's now). */
    if (p->destroyed && p->pool == NULL && p->live == 0)
        pool_release(p);
    pthread_mutex_unlock(&pool_mu);
}

/* Every context on ord is gone, and with them every pool allocation made there. */
static void pool_forget_device(int ord)
{
    struct gs_map_entry *e;
    int i;

    pthread_mutex_lock(&pool_mu);
    GS_MAP_FOREACH(&pool_ptrs, e)
    {
        struct pool_state *p = &pools[e->aux];
        if (p->ord == ord) {
            if (p->live)
                p->live--;
            gs_map_del(&pool_ptrs, e);
            __atomic_sub_fetch(&pool_ptr_count, 1, __ATOMIC_RELAXED);
        }
    }
    for (i = 0; i < MAX_POOLS; i++)
        if (pools[i].destroyed && pools[i].ord == ord)
            pool_release(&pools[i]);
    pthread_mutex_unlock(&pool_mu);
}

/* Measured on the H200: a pool that must grow takes whole steps of 32 MiB (4 KiB took 32 MiB). */
#define POOL_STEP (32ULL << 20)

/* What the pool will grow by to serve bytes more: 0 when it has room. */
static uint64_t pool_growth(uint64_t reserved, uint64_t used, uint64_t bytes)
{
    if (bytes > UINT64_MAX - POOL_STEP - used)
        return UINT64_MAX; /* no pool grows by that: refused */
    if (used + bytes <= reserved)
        return 0;
    return round_up(used + bytes, POOL_STEP) - reserved;
}

struct async_args {
    int which; /* 0 alloc, 1 alloc ptsz, 2 from pool, 3 from pool ptsz */
    CUdeviceptr *dptr;
    size_t bytesize;
    CUmemoryPool pool;
    CUstream stream;
};

static CUresult async_call(struct async_args *a)
{
    switch (a->which) {
    case 0:
        return gs__real.cuMemAllocAsync(a->dptr, a->bytesize, a->stream);
    case 1:
        return gs__real.cuMemAllocAsync_ptsz(a->dptr, a->bytesize, a->stream);
    case 2:
        return gs__real.cuMemAllocFromPoolAsync(a->dptr, a->bytesize, a->pool, a->stream);
    default:
        return gs__real.cuMemAllocFromPoolAsync_ptsz(a->dptr, a->bytesize, a->pool, a->stream);
    }
}

/*
 * Takes back an allocation the pool grew for beyond what was admitted (its
 * growth was not what 32 MiB steps predict): freed in stream order, and the
 * stream waited for, so that the pool gives back what it grew by.
 */
static void async_undo(struct async_args *a)
{
    CUresult r = a->which & 1 ? gs__real.cuMemFreeAsync_ptsz(*a->dptr, a->stream)
                              : gs__real.cuMemFreeAsync(*a->dptr, a->stream);

    if (r == CUDA_SUCCESS)
        (a->which & 1 ? gs__real.cuStreamSynchronize_ptsz : gs__real.cuStreamSynchronize)(
            a->stream);
}

/*
 * A stream-ordered allocation from pool on d. Everything from reading the
 * pool to charging what it really reserved happens under pool_mu, so no other
 * allocation can take the room this one was admitted for; what the pool will
 * grow by is charged before the driver is asked. A pool only shrinks to its
 * whole steps in use, so a shrink by another thread's synchronisation meanwhile
 * can only make the growth smaller than admitted.
 */
static CUresult pool_alloc(struct dev_state *d, int ord, CUmemoryPool pool, struct async_args *a)
{
    struct gpuslice_tenant_device *td = &gs__state.tenant->dev[d->entry];
    struct pool_state *p;
    cuuint64_t reserved = 0, used = 0;
    uint64_t need;
    CUresult r;
    int tries;

    pthread_mutex_lock(&pool_mu);
    if ((p = pool_find(pool, ord, 1)) == NULL) {
        pthread_mutex_unlock(&pool_mu);
        gs__log("more than %d memory pools in use; refusing to allocate untracked", MAX_POOLS);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (tries = 0;; tries++) {
        pool_sync(p); /* the charge is what the pool reserves now */
        if (gs__real.cuMemPoolGetAttribute &&
            gs__real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT,
                                           &reserved) == CUDA_SUCCESS &&
            gs__real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) ==
                CUDA_SUCCESS)
            need = pool_growth(reserved, used, a->bytesize);
        else
            need = pool_growth(0, 0, a->bytesize);
        /*
         * A pool with room by count may still be too fragmented for the request
         * (measured: 20 MiB free in a hole and 24 at the end, 30 MiB asked, 32
         * grown): admitted for a step more where the limit allows, else for
         * what the count says, and then held to what it really grew by.
         */
        if (need == 0 && used < reserved && room_for(d, pool_growth(0, 0, a->bytesize)))
            need = pool_growth(0, 0, a->bytesize);
        if (need && (r = admit(d, need)) != CUDA_SUCCESS) {
            pthread_mutex_unlock(&pool_mu);
            return r;
        }
        p->accounted += need;
        r = async_call(a);
        if (r != CUDA_ERROR_OUT_OF_MEMORY || tries >= RESERVE_TRIES)
            break;
        /* Refused by the driver: the reservation (run --filled) may give memory back. */
        if (need) {
            p->accounted -= need;
            unadmit(d, need);
            settle(d);
        }
        pthread_mutex_unlock(&pool_mu);
        if (!give_back(d, need ? need : pool_growth(0, 0, a->bytesize)))
            return r;
        pthread_mutex_lock(&pool_mu);
        if ((p = pool_find(pool, ord, 0)) == NULL) {
            pthread_mutex_unlock(&pool_mu);
            return r; /* destroyed meanwhile */
        }
    }
    {
        uint64_t admitted = reserved + need;
        cuuint64_t now = 0;

        if (r == CUDA_SUCCESS && gs__real.cuMemPoolGetAttribute &&
            gs__real.cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &now) ==
                CUDA_SUCCESS &&
            now > admitted && __atomic_load_n(&td->mem_limit, __ATOMIC_RELAXED) &&
            __atomic_load_n(&td->mem_used, __ATOMIC_RELAXED) + (now - admitted) >
                __atomic_load_n(&td->mem_limit, __ATOMIC_RELAXED)) {
            gs__debug("pool on %s grew %llu bytes beyond the %llu admitted; the allocation is "
                      "refused",
                      d->uuid, (unsigned long long)(now - reserved), (unsigned long long)need);
            async_undo(a);
            /*
             * A pool that keeps its memory (a release threshold above its use, as PyTorch's
             * cudaMallocAsync backend sets) would stay grown: give back what it grew by.
             */
            if (gs__real.cuMemPoolTrimTo)
                gs__real.cuMemPoolTrimTo(pool, (size_t)reserved + 1);
            r = CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    if (r == CUDA_SUCCESS)
        pool_ptr_add(p, *a->dptr);
    pool_sync(p); /* the charge becomes what the pool really reserved */
    pthread_mutex_unlock(&pool_mu);
    if (need)
        settle(d);
    return r;
}

static CUresult alloc_async(struct async_args *a)
{
    struct dev_state *d;
    int ord = -1, i;

    if (a->pool) {
        /* A pool we saw created knows its device; otherwise the current one. */
        pthread_mutex_lock(&pool_mu);
        for (i = 0; i < MAX_POOLS; i++)
            if (pools[i].pool == a->pool)
                ord = pools[i].ord;
        pthread_mutex_unlock(&pool_mu);
    }
    if (ord < 0)
        ord = current_ordinal();
    if (exiting || ord < 0 || (d = dev_get(ord)) == NULL || a->bytesize == 0)
        return async_call(a);
    {
        CUmemoryPool pool = a->pool;
        if (pool == NULL && (!gs__real.cuDeviceGetMemPool ||
                             gs__real.cuDeviceGetMemPool(&pool, ord) != CUDA_SUCCESS))
            return async_call(a);
        return pool_alloc(d, ord, pool, a);
    }
}

GS_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    struct async_args a = {0, dptr, bytesize, NULL, hStream};

    GS_PASS(cuMemAllocAsync, (dptr, bytesize, hStream));
    return alloc_async(&a);
}

GS_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    struct async_args a = {1, dptr, bytesize, NULL, hStream};

    GS_PASS(cuMemAllocAsync_ptsz, (dptr, bytesize, hStream));
    return alloc_async(&a);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream)
{
    struct async_args a = {2, dptr, bytesize, pool, hStream};

    GS_PASS(cuMemAllocFromPoolAsync, (dptr, bytesize, pool, hStream));
    if (pool == NULL)
        return gs__real.cuMemAllocFromPoolAsync(dptr, bytesize, pool, hStream);
    return alloc_async(&a);
}

GS_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                CUmemoryPool pool, CUstream hStream)
{
    struct async_args a = {3, dptr, bytesize, pool, hStream};

    GS_PASS(cuMemAllocFromPoolAsync_ptsz, (dptr, bytesize, pool, hStream));
    if (pool == NULL)
        return gs__real.cuMemAllocFromPoolAsync_ptsz(dptr, bytesize, pool, hStream);
    return alloc_async(&a);
}

/*
 * A stream-ordered free. Into a stream being captured it frees nothing yet (the
 * graph's free node will, unseen): the allocation stays live to us.
 */
static CUresult free_async(CUdeviceptr dptr, CUstream stream, int ptsz)
{
    CUstreamCaptureStatus cs = CU_STREAM_CAPTURE_STATUS_NONE;
    int slot = exiting ? -1 : pool_ptr_take(dptr);
    CUresult r = ptsz ? gs__real.cuMemFreeAsync_ptsz(dptr, stream)
                      : gs__real.cuMemFreeAsync(dptr, stream);

    if (slot >= 0) {
        if (r == CUDA_SUCCESS &&
            (ptsz ? gs__real.cuStreamIsCapturing_ptsz : gs__real.cuStreamIsCapturing)(stream,
                                                                                    &cs) !=
                CUDA_SUCCESS)
            cs = CU_STREAM_CAPTURE_STATUS_NONE;
        if (r != CUDA_SUCCESS || cs != CU_STREAM_CAPTURE_STATUS_NONE)
            pool_ptr_untake(dptr, slot);
        else
            pool_ptr_done(slot, 1, stream, ptsz);
    }
    if (r == CUDA_SUCCESS && !exiting)
        sync_all_pools();
    return r;
}

GS_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    GS_PASS(cuMemFreeAsync, (dptr, hStream));
    return free_async(dptr, hStream, 0);
}

GS_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    GS_PASS(cuMemFreeAsync_ptsz, (dptr, hStream));
    return free_async(dptr, hStream, 1);
}

GS_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    CUresult r;

    GS_PASS(cuMemPoolCreate, (pool, poolProps));
    r = gs__real.cuMemPoolCreate(pool, poolProps);
    if (r == CUDA_SUCCESS && poolProps && poolProps->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        pthread_mutex_lock(&pool_mu);
        pool_find(*pool, poolProps->location.id, 1);
        pthread_mutex_unlock(&pool_mu);
    }
    return r;
}

GS_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct pool_state *p;
    CUresult r;

    GS_PASS(cuMemPoolTrimTo, (pool, minBytesToKeep));
    r = gs__real.cuMemPoolTrimTo(pool, minBytesToKeep);
    pthread_mutex_lock(&pool_mu);
    if ((p = pool_find(pool, -1, 0)) != NULL)
        pool_sync(p);
    pthread_mutex_unlock(&pool_mu);
    return r;
}

GS_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    struct pool_state *p;
    CUresult r;

    GS_PASS(cuMemPoolDestroy, (pool));
    pthread_mutex_lock(&pool_mu);
    p = pool_find(pool, -1, 0);
    /*
     * With allocations from it still live, the driver destroys the pool only when the
     * last is freed, and keeps what they occupy until then: it gives back the rest now
     * (trimmed here, so that the charge kept is what stays reserved).
     */
    if (p && (p->live || p->uncounted) && gs__real.cuMemPoolTrimTo &&
        gs__real.cuMemPoolTrimTo(pool, 0) == CUDA_SUCCESS)
        pool_sync(p);
    r = gs__real.cuMemPoolDestroy(pool);
    if (r == CUDA_SUCCESS && p) {
        if (p->live || p->uncounted) {
            gs__debug("a memory pool was destroyed with %llu allocations live: its %llu bytes "
                      "stay charged until they are freed",
                      (unsigned long long)p->live, (unsigned long long)p->accounted);
            p->pool = NULL;
            p->destroyed = 1;
        } else {
            pool_release(p);
        }
    }
    pthread_mutex_unlock(&pool_mu);
    return r;
}

/* ---- virtual memory management: physical handles are what is charged ---- */

/*
 * A physical allocation is recorded under a serial of ours, not under its
 * handle: the driver may hand a released handle's value to the next
 * cuMemCreate while the old allocation still lives in a mapping. Every
 * record changes before the driver call that could let another thread reuse
 * its key (release, unmap) and is put back if that call fails.
 */

/* Gives back a physical allocation once nothing holds it; mem_mu held. */
static void vmm_maybe_free(struct gs_map_entry *e)
{
    struct dev_state *d;

    if (e->refs == 0 && e->maps == 0) {
        if ((d = dev_get(e->dev)) != NULL)
            unadmit_locked(d, e->bytes);
        gs_map_del(&vmm, e);
    }
}

/*
 * Adds a reference to allocation serial through handle h; mem_mu held. The
 * driver hands out the same handle value again for the same allocation
 * (cuMemRetainAllocationHandle, as NCCL does before it releases): the handle's
 * entry then counts its references, each released once.
 */
static int vmm_add_handle(CUmemGenericAllocationHandle h, uint64_t serial)
{
    struct gs_map_entry *e = gs_map_get(&handles, h), *a;

    if (e != NULL && e->aux == serial) {
        e->refs++;
    } else {
        if ((e = gs_map_put(&handles, h)) == NULL)
            return -ENOMEM;
        e->aux = serial;
        e->refs = 1;
    }
    if ((a = gs_map_get(&vmm, serial)) != NULL)
        a->refs++;
    return 0;
}

GS_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                               const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct gs_map_entry *e;
    struct dev_state *d;
    CUresult r;
    int ord, ok = 0;

    GS_PASS(cuMemCreate, (handle, size, prop, flags));
    if (exiting || prop == NULL || prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        (d = dev_get(ord = prop->location.id)) == NULL || size == 0)
        return gs__real.cuMemCreate(handle, size, prop, flags);
    if ((r = admit(d, size)) != CUDA_SUCCESS)
        return r;
    GS_RESERVED_CALL(r, d, size, gs__real.cuMemCreate(handle, size, prop, flags));
    if (r != CUDA_SUCCESS) {
        unadmit(d, size);
        settle(d);
        return r;
    }
    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_put(&vmm, ++vmm_serial)) != NULL) {
        e->bytes = size;
        e->dev = ord;
        e->refs = 0;
        e->maps = 0;
        ok = vmm_add_handle(*handle, vmm_serial) == 0;
        if (!ok)
            gs_map_del(&vmm, gs_map_get(&vmm, vmm_serial));
    }
    pthread_mutex_unlock(&mem_mu);
    if (!ok)
        gs__log("out of memory tracking a VMM allocation; it stays charged");
    settle(d);
    return CUDA_SUCCESS;
}

GS_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct gs_map_entry *h, *e;
    uint64_t serial = 0;
    CUresult r;

    GS_PASS(cuMemRelease, (handle));
    pthread_mutex_lock(&mem_mu);
    if ((h = gs_map_get(&handles, handle)) != NULL) {
        serial = h->aux;
        if (h->refs <= 1)
            gs_map_del(&handles, h);
        else
            h->refs--;
        if ((e = gs_map_get(&vmm, serial)) != NULL && e->refs > 0)
            e->refs--;
    }
    pthread_mutex_unlock(&mem_mu);
    r = gs__real.cuMemRelease(handle);
    pthread_mutex_lock(&mem_mu);
    if (serial && r != CUDA_SUCCESS) {
        /* Still the program's: the driver gave no one else this handle. */
        if (vmm_add_handle(handle, serial) < 0)
            gs__log("out of memory tracking a VMM handle");
    } else if (serial && (e = gs_map_get(&vmm, serial)) != NULL) {
        vmm_maybe_free(e);
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

/* The serial of the allocation mapped at addr, or 0; mem_mu held. */
static uint64_t vmm_at(uint64_t addr)
{
    struct gs_map_entry *m;

    GS_MAP_FOREACH(&mappings, m)
    {
        if (addr >= m->key && addr - m->key < m->bytes)
            return m->aux;
    }
    return 0;
}

GS_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    uint64_t serial;
    CUresult r;

    GS_PASS(cuMemRetainAllocationHandle, (handle, addr));
    if ((r = gs__real.cuMemRetainAllocationHandle(handle, addr)) != CUDA_SUCCESS || !handle)
        return r;
    pthread_mutex_lock(&mem_mu);
    if ((serial = vmm_at((uint64_t)(uintptr_t)addr)) != 0 &&
        vmm_add_handle(*handle, serial) < 0)
        gs__log("out of memory tracking a VMM handle");
    pthread_mutex_unlock(&mem_mu);
    return r;
}

GS_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                            CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    struct gs_map_entry *h, *e, *m;
    CUresult r;

    GS_PASS(cuMemMap, (ptr, size, offset, handle, flags));
    if ((r = gs__real.cuMemMap(ptr, size, offset, handle, flags)) != CUDA_SUCCESS)
        return r;
    pthread_mutex_lock(&mem_mu);
    if ((h = gs_map_get(&handles, handle)) != NULL) {
        uint64_t serial = h->aux;
        if ((m = gs_map_put(&mappings, ptr)) != NULL) {
            m->bytes = size;
            m->aux = serial;
            if ((e = gs_map_get(&vmm, serial)) != NULL)
                e->maps++;
        }
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

#define VMM_UNMAP_BATCH 64

GS_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct gs_map_entry *m, *e, gone[VMM_UNMAP_BATCH];
    int n = 0, i, more = 0;
    CUresult r;

    GS_PASS(cuMemUnmap, (ptr, size));
    /* Forgotten before the driver unmaps: another thread may map the range again at once. */
    pthread_mutex_lock(&mem_mu);
    GS_MAP_FOREACH(&mappings, m)
    {
        if (m->key >= ptr && m->key - ptr < size) {
            if (n == VMM_UNMAP_BATCH) {
                more = 1;
                break;
            }
            gone[n++] = *m;
            gs_map_del(&mappings, m);
        }
    }
    pthread_mutex_unlock(&mem_mu);
    r = gs__real.cuMemUnmap(ptr, size);
    pthread_mutex_lock(&mem_mu);
    for (i = 0; i < n; i++) {
        if (r != CUDA_SUCCESS) {
            if ((m = gs_map_put(&mappings, gone[i].key)) != NULL)
                *m = gone[i];
        } else if ((e = gs_map_get(&vmm, gone[i].aux)) != NULL) {
            if (e->maps > 0)
                e->maps--;
            vmm_maybe_free(e);
        }
    }
    /* A range of more mappings than one batch: the rest, now that the driver has unmapped it. */
    while (more && r == CUDA_SUCCESS) {
        more = 0;
        GS_MAP_FOREACH(&mappings, m)
        {
            if (m->key >= ptr && m->key - ptr < size) {
                uint64_t serial = m->aux;
                gs_map_del(&mappings, m);
                if ((e = gs_map_get(&vmm, serial)) != NULL) {
                    if (e->maps > 0)
                        e->maps--;
                    vmm_maybe_free(e);
                }
                more = 1;
                break;
            }
        }
    }
    pthread_mutex_unlock(&mem_mu);
    return r;
}

/* ---- arrays ---- */

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    default:
        return 4; /* 32-bit formats; the rarer packed formats are at most this */
    }
}

/*
 * What an array takes, before the rounding to pages: its layout is block-
 * linear. Fitted to 353 arrays measured on the H200 (driver 580; every one
 * matched): rows rounded up to 64 bytes, the height to 8 rows, the depth to a
 * block of the next power of two up to 16 (1, 2, 4, 8, 16: a depth of 10
 * takes 16, 17 takes 32, 100 takes 112). 2-D arrays are one slice.
 */
static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t depth, CUarray_format f,
                            unsigned int channels)
{
    uint64_t row, rows, block = 1;

    if (w > (1ULL << 32) || h > (1ULL << 32) || depth > (1ULL << 32) || channels > 4)
        return UINT64_MAX; /* refused: no device holds it */
    row = round_up(w * format_bytes(f) * (channels ? channels : 1), 64);
    rows = round_up(h ? h : 1, 8);
    while (block < depth && block < 16)
        block *= 2;
    depth = depth > 1 ? round_up(depth, block) : 1;
    if (row > UINT64_MAX / rows / depth)
        return UINT64_MAX;
    return row * rows * depth;
}

#define GS_ARRAY_BODY(sym, pHandle, bytes, call)                                \
    do {                                                                        \
        struct dev_state *d;                                                    \
        uint64_t charge;                                                        \
        CUresult r;                                                             \
        int ord;                                                                \
        GS_PASS(sym, call);                                                     \
        if (pAllocateArray == NULL || (d = limited_current(&ord)) == NULL)      \
            return gs__real.sym call;                                           \
        charge = round_up((bytes), d->gran);                                    \
        if ((r = admit(d, charge)) != CUDA_SUCCESS)                             \
            return r;                                                           \
        GS_RESERVED_CALL(r, d, charge, gs__real.sym call);                      \
        if (r != CUDA_SUCCESS) {                                                \
            unadmit(d, charge);                                                 \
            settle(d);                                                          \
            return r;                                                           \
        }                                                                       \
        track(&arrays, (uint64_t)(uintptr_t)*(pHandle), charge, ord, current_ctx()); \
        settle(d);                                                              \
        return CUDA_SUCCESS;                                                    \
    } while (0)

GS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    GS_ARRAY_BODY(cuArrayCreate_v2, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height, 1,
                              pAllocateArray->Format, pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray)
{
    GS_ARRAY_BODY(cuArrayCreate, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height, 1,
                              pAllocateArray->Format, pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle,
                                      const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    GS_ARRAY_BODY(cuArray3DCreate_v2, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height,
                              pAllocateArray->Depth, pAllocateArray->Format,
                              pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArray3DCreate(CUarray *pHandle,
                                   const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
    GS_ARRAY_BODY(cuArray3DCreate, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height,
                              pAllocateArray->Depth, pAllocateArray->Format,
                              pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    GS_FREE_BODY(cuArrayDestroy, &arrays, (uintptr_t)hArray, (hArray));
}

/* ---- contexts: their footprint, and what their destruction gives back ---- */

/*
 * The footprint of a context for a process NVML does not list (a PID
 * namespace): the change in the device's use across its creation (before:
 * -1 if it could not be read). Processes of other tenants attaching at the
 * same moment inflate that change, so the smallest footprint any process of
 * the tenant measured on the device is kept in the tenant and wins.
 */
static uint64_t context_footprint(struct dev_state *d, int64_t before)
{
    uint64_t *shared = &gs__state.tenant->dev[d->entry].ctx_footprint;
    uint64_t known = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
    int64_t after = nvml_device_used(d);

    if (before >= 0 && after > before) {
        uint64_t delta = (uint64_t)(after - before);
        while ((known == 0 || delta < known) &&
               !__atomic_compare_exchange_n(shared, &known, delta, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
            ;
        return known && known < delta ? known : delta;
    }
    return known;
}

/*
 * Where the tenant has no base yet (hidden_from_look cannot measure):
 * the device's growth across this process's first context less what NVML then
 * lists for the process; the smallest believable measure of the tenant is kept
 * (others attaching at the same moment only inflate it).
 */
static void context_hidden(struct dev_state *d, int64_t before)
{
    uint64_t *shared = &gs__state.tenant->dev[d->entry].ctx_hidden;
    uint64_t known = __atomic_load_n(shared, __ATOMIC_ACQUIRE), hidden;
    int64_t after, mine;

    /*
     * (What the device holds beyond every process NVML lists cannot stand in for it when
     * others attach meanwhile: an idle H200 already had 615 MiB in use that is no process's.)
     */
    if (before < 0 || (after = nvml_device_used(d)) < 0 || (mine = nvml_process_used(d)) < 0 ||
        after - before <= mine)
        return;
    hidden = (uint64_t)(after - before - mine);
    if (hidden > CTX_HIDDEN_MAX)
        return; /* others attached meanwhile: not a measure of this context */
    while ((known == 0 || hidden < known) &&
           !__atomic_compare_exchange_n(shared, &known, hidden, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE))
        ;
}

/* A context appeared on d; measures the driver's overhead. */
static void context_appeared(struct dev_state *d, int64_t device_used_before)
{
    pthread_mutex_lock(&mem_mu);
    d->ctx_count++;
    if (d->mode != OVERHEAD_FOOTPRINT)
        refresh_overhead(d);
    if (d->mode == OVERHEAD_NVML_PROCESS &&
        __atomic_load_n(&gs__state.tenant->ctx_base[d->entry], __ATOMIC_ACQUIRE) == 0) {
        context_hidden(d, device_used_before);
        refresh_overhead(d);
    }
    if (d->mode != OVERHEAD_NVML_PROCESS) {
        /* NVML cannot see this process (a PID namespace): charge a measured footprint. */
        if (d->mode == OVERHEAD_UNKNOWN) {
            d->footprint = context_footprint(d, device_used_before);
            d->mode = OVERHEAD_FOOTPRINT;
            gs__debug("%s: NVML does not list this process; each context counts %llu bytes",
                      d->uuid, (unsigned long long)d->footprint);
        }
        force_charge(d, d->footprint);
        d->overhead += d->footprint;
    }
    pthread_mutex_unlock(&mem_mu);
}

/* Context ctx on d is gone: so is everything allocated in it. */
/*
 * ctx ended: what was allocated in it is gone. also, when not NULL, is a
 * second handle of the same context (the real primary context behind a
 * partition's green one: allocations made while either was current).
 */
static void context_gone(struct dev_state *d, int ord, CUcontext ctx, CUcontext also)
{
    uint64_t a = (uint64_t)(uintptr_t)ctx, b = also ? (uint64_t)(uintptr_t)also : a;
    struct gs_map_entry *e;
    uint64_t freed = 0;

    pthread_mutex_lock(&mem_mu);
    GS_MAP_FOREACH(&allocs, e)
    {
        if (e->dev == ord && (e->aux == a || e->aux == b)) {
            freed += e->bytes;
            gs_map_del(&allocs, e);
        }
    }
    GS_MAP_FOREACH(&arrays, e)
    {
        if (e->dev == ord && (e->aux == a || e->aux == b)) {
            freed += e->bytes;
            gs_map_del(&arrays, e);
        }
    }
    GS_MAP_FOREACH(&pages, e)
    {
        if (e->dev == ord && (e->aux == a || e->aux == b)) {
            freed += e->bytes;
            gs_map_del(&pages, e);
        }
    }
    d->charged = d->charged >= freed ? d->charged - freed : 0;
    uncharge(d, freed);
    if (d->ctx_count > 0)
        d->ctx_count--;
    if (d->mode == OVERHEAD_FOOTPRINT) {
        uint64_t f = d->footprint < d->overhead ? d->footprint : d->overhead;
        uncharge(d, f);
        d->overhead -= f;
    } else if (d->ctx_count == 0) {
        uncharge(d, d->overhead);
        d->overhead = 0;
    }
    pthread_mutex_unlock(&mem_mu);
    if (d->ctx_count == 0) {
        pool_forget_device(ord);
        sync_all_pools();
    }
}

/*
 * The device's use before this process's first context on it, for
 * context_footprint() and context_hidden(); -1 when not needed. Where every
 * process NVML lists there has its context in its figure, that use less the
 * figures, with how many were listed, is a base for hidden_from_look(): the
 * smallest ctx_base word of the tenant is kept.
 */
static int64_t used_before(struct dev_state *d)
{
    struct nvml_look l;
    int64_t used;

    if (!d || d->ctx_count != 0)
        return -1;
    if ((used = nvml_device_used(d)) >= 0 && nvml_look_processes(d, &l) == 0 && l.complete &&
        (l.listed == 0 || l.smallest >= CTX_LISTED_MIN) && (uint64_t)used >= l.sum &&
        (uint64_t)used - l.sum < (1ULL << 47) && l.listed < 0xffff) {
        uint64_t *shared = &gs__state.tenant->ctx_base[d->entry];
        uint64_t known = __atomic_load_n(shared, __ATOMIC_ACQUIRE);
        uint64_t mine = GPUSLICE_CTX_BASE((uint64_t)used - l.sum, l.listed);

        while ((known == 0 || mine < known) &&
               !__atomic_compare_exchange_n(shared, &known, mine, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
            ;
    }
    return used;
}

GS_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
    struct dev_state *d;
    CUcontext real;
    int64_t before;
    CUresult r;

    GS_PASS(cuDevicePrimaryCtxRetain, (pctx, dev));
    d = exiting ? NULL : dev_get(dev);
    /* A context whose memory could not be counted is not made (no process slot left). */
    if (d && slot() < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    before = used_before(d);
    GS_RESERVED_CTX_CALL(r, d, before, gs__real.cuDevicePrimaryCtxRetain(pctx, dev));
    real = r == CUDA_SUCCESS ? *pctx : NULL;
    /* With an SM partition, what is handed out for the primary context is its green context. */
    if (r == CUDA_SUCCESS && (r = gs__sm_primary(dev, pctx)) != CUDA_SUCCESS)
        gs__real.cuDevicePrimaryCtxRelease_v2(dev);
    if (r != CUDA_SUCCESS || d == NULL)
        return r;
    d->primary = *pctx;
    d->real_primary = real;
    if (d->primary_refs++ == 0)
        context_appeared(d, before);
    return r;
}

#define GS_PRIMARY_RELEASE_BODY(sym, reset)                        \
    do {                                                           \
        struct dev_state *d;                                       \
        CUresult r;                                                \
        GS_PASS(sym, (dev));                                       \
        d = exiting ? NULL : dev_get(dev);                         \
        if (d && d->primary && (reset || d->primary_refs == 1))    \
            gs__compute_ctx_gone(d->primary);                      \
        if (reset)                                                 \
            gs__sm_reset(dev);                                     \
        if ((r = gs__real.sym(dev)) != CUDA_SUCCESS)               \
            return r;                                              \
        if (d == NULL || d->primary_refs == 0)                     \
            return r;                                              \
        if (reset) {                                               \
            context_gone(d, dev, d->primary, d->real_primary);     \
            pthread_mutex_lock(&mem_mu);                           \
            d->ctx_count++; /* still retained: it comes back on use */ \
            pthread_mutex_unlock(&mem_mu);                         \
        } else if (--d->primary_refs == 0) {                       \
            context_gone(d, dev, d->primary, d->real_primary);     \
        }                                                          \
        return r;                                                  \
    } while (0)

GS_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxRelease, 0);
}

GS_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxRelease_v2, 0);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxReset, 1);
}

GS_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
    GS_PRIMARY_RELEASE_BODY(cuDevicePrimaryCtxReset_v2, 1);
}

static void remember_created(CUcontext ctx, int ord)
{
    int i;

    pthread_mutex_lock(&mem_mu);
    for (i = 0; i < 256; i++) {
        if (created[i] == NULL) {
            created[i] = ctx;
            created_ord[i] = ord;
            break;
        }
    }
    pthread_mutex_unlock(&mem_mu);
}

#define GS_CTX_CREATE_BODY(sym, call)                                   \
    do {                                                                \
        struct dev_state *d;                                            \
        int64_t before;                                                 \
        CUresult r;                                                     \
        GS_PASS(sym, call);                                             \
        d = exiting ? NULL : dev_get(dev);                              \
        if (d && slot() < 0)                                            \
            return CUDA_ERROR_OUT_OF_MEMORY;                            \
        before = used_before(d);                                        \
        GS_RESERVED_CTX_CALL(r, d, before, gs__real.sym call);          \
        if (r == CUDA_SUCCESS)                                          \
            gs__sm_created(dev);                                        \
        if (r != CUDA_SUCCESS || d == NULL)                             \
            return r;                                                   \
        remember_created(*pctx, dev);                                   \
        context_appeared(d, before);                                    \
        return r;                                                       \
    } while (0)

GS_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate, (pctx, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate_v2, (pctx, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                  int numParams, unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate_v3, (pctx, paramsArray, numParams, flags, dev));
}

GS_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                  unsigned int flags, CUdevice dev)
{
    GS_CTX_CREATE_BODY(cuCtxCreate_v4, (pctx, ctxCreateParams, flags, dev));
}

#define GS_CTX_DESTROY_BODY(sym)                                      \
    do {                                                              \
        struct dev_state *d;                                          \
        CUresult r;                                                   \
        int i, ord = -1;                                              \
        GS_PASS(sym, (ctx));                                          \
        gs__compute_ctx_gone(ctx);                                    \
        if ((r = gs__real.sym(ctx)) != CUDA_SUCCESS)                  \
            return r;                                                 \
        pthread_mutex_lock(&mem_mu);                                  \
        for (i = 0; i < 256 && ctx; i++) {                            \
            if (created[i] == ctx) {                                  \
                ord = created_ord[i];                                 \
                created[i] = NULL;                                    \
                break;                                                \
            }                                                         \
        }                                                             \
        pthread_mutex_unlock(&mem_mu);                                \
        if (ord >= 0 && !exiting && (d = dev_get(ord)) != NULL)       \
            context_gone(d, ord, ctx, NULL);                          \
        return r;                                                     \
    } while (0)

GS_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
    GS_CTX_DESTROY_BODY(cuCtxDestroy);
}

GS_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    GS_CTX_DESTROY_BODY(cuCtxDestroy_v2);
}

/* ---- views: what the program is told it has ---- */

void gs__mem_entry_usage(int e, uint64_t *used, uint64_t *limit)
{
    struct gpuslice_tenant *t = gs__state.tenant;

    *used = __atomic_load_n(&t->dev[e].mem_used, __ATOMIC_RELAXED);
    *limit = __atomic_load_n(&t->dev[e].mem_limit, __ATOMIC_RELAXED);
}

void gs__mem_refresh_entry(int e)
{
    int i;

    sync_all_pools();
    pthread_mutex_lock(&mem_mu);
    for (i = 0; i < MAX_ORDINALS; i++)
        if (devs[i].resolved > 0 && devs[i].entry == e)
            refresh_overhead(&devs[i]);
    pthread_mutex_unlock(&mem_mu);
    gs_tenant_reap(gs__state.tenant);
}

/*
 * Fills (free, total) for ordinal from the tenant view; 0 if it differs from
 * the device's: a limit applies, or a memory reservation (gpuslice run
 * --filled) holds memory the program may have, which counts as free.
 */
static int limited_view(int ord, uint64_t real_free, uint64_t real_total, uint64_t *free,
                        uint64_t *total)
{
    struct dev_state *d;
    uint64_t used, limit, held;

    if (exiting || (d = dev_get(ord)) == NULL)
        return -1;
    gs__mem_refresh_entry(d->entry);
    gs__mem_entry_usage(d->entry, &used, &limit);
    held = reserved_for(d);
    if (limit == 0 && held == 0)
        return -1;
    real_free = real_free + held < real_total ? real_free + held : real_total;
    if (limit == 0) {
        *total = real_total;
        *free = real_free;
        return 0;
    }
    *total = limit < real_total ? limit : real_total;
    *free = limit > used ? limit - used : 0;
    if (*free > real_free)
        *free = real_free; /* never promise what the device does not have */
    return 0;
}

GS_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f, t;
    CUresult r;

    GS_PASS(cuMemGetInfo_v2, (free, total));
    if ((r = gs__real.cuMemGetInfo_v2(free, total)) != CUDA_SUCCESS || !free || !total)
        return r;
    if (limited_view(current_ordinal(), *free, *total, &f, &t) == 0) {
        *free = f;
        *total = t;
    }
    return r;
}

GS_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    size_t rf, rt;
    uint64_t f, t;
    CUresult r;

    GS_PASS(cuMemGetInfo, (free, total));
    if (!gs__real.cuMemGetInfo_v2 || !free || !total)
        return gs__real.cuMemGetInfo(free, total);
    if ((r = gs__real.cuMemGetInfo_v2(&rf, &rt)) != CUDA_SUCCESS)
        return r;
    if (limited_view(current_ordinal(), rf, rt, &f, &t) < 0) {
        f = rf;
        t = rt;
    }
    *free = f > UINT_MAX ? UINT_MAX : (unsigned int)f;
    *total = t > UINT_MAX ? UINT_MAX : (unsigned int)t;
    return r;
}

static uint64_t total_limit(CUdevice dev, uint64_t real_total)
{
    struct dev_state *d;
    uint64_t limit;

    if (exiting || (d = dev_get(dev)) == NULL)
        return real_total;
    limit = __atomic_load_n(&gs__state.tenant->dev[d->entry].mem_limit, __ATOMIC_RELAXED);
    return limit && limit < real_total ? limit : real_total;
}

GS_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
    CUresult r;

    GS_PASS(cuDeviceTotalMem_v2, (bytes, dev));
    if ((r = gs__real.cuDeviceTotalMem_v2(bytes, dev)) == CUDA_SUCCESS && bytes)
        *bytes = total_limit(dev, *bytes);
    return r;
}

GS_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
    CUresult r;

    GS_PASS(cuDeviceTotalMem, (bytes, dev));
    if ((r = gs__real.cuDeviceTotalMem(bytes, dev)) == CUDA_SUCCESS && bytes)
        *bytes = (unsigned int)total_limit(dev, *bytes);
    return r;
}

int gs__mem_device_entry(int ordinal)
{
    struct dev_state *d = exiting ? NULL : dev_get(ordinal);

    return d ? d->entry : -1;
}

/* ---- NVML helpers ---- */

int gs__mem_entry_for_uuid_string(const char *uuid)
{
    struct gpuslice_tenant *t = gs__state.tenant;
    char s[GS_UUID_STRLEN];
    int i;

    if (t == NULL)
        return -1;
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++) {
        gs_format_uuid(t->dev[i].uuid, s);
        if (strcasecmp(s, uuid) == 0)
            return i;
    }
    return -1;
}

uint64_t gs__mem_limit_for_uuid(const char *uuid)
{
    int count = 0, i;

    /* An index key needs the CUDA ordinal of this GPU: ask the driver. */
    if (gs__load_cuda() == 0 && gs__real.cuInit && gs__real.cuInit(0) == CUDA_SUCCESS &&
        gs__real.cuDeviceGetCount && gs__real.cuDeviceGetCount(&count) == CUDA_SUCCESS) {
        for (i = 0; i < count && i < MAX_ORDINALS; i++) {
            struct dev_state *d = dev_get(i);
            if (d && strcasecmp(d->uuid, uuid) == 0)
                return __atomic_load_n(&gs__state.tenant->dev[d->entry].mem_limit,
                                       __ATOMIC_RELAXED);
        }
    }
    return gs_limits_lookup(&gs__state.mem_limits, -1, uuid);
}

/* ---- cuInit: refuses a broken configuration, checks device keys ---- */

/* Every index and UUID key of l names a device that exists; else -1 with a message. */
static int validate_list(const struct gs_limits *l, int count, char *msg, size_t len)
{
    int i, j;

    for (i = 0; i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        int found = 0;

        if (e->key == GS_KEY_INDEX && e->index >= count) {
            snprintf(msg, len,
                     "%s: device %d does not exist: this process sees %d CUDA device%s "
                     "(indexes 0 to %d)",
                     l->source, e->index, count, count == 1 ? "" : "s", count - 1);
            return -1;
        }
        if (e->key != GS_KEY_UUID)
            continue;
        for (j = 0; j < count && j < MAX_ORDINALS && !found; j++) {
            CUuuid u;
            char s[GS_UUID_STRLEN];
            if (gs__real.cuDeviceGetUuid_v2(&u, j) == CUDA_SUCCESS) {
                gs_format_uuid((const unsigned char *)u.bytes, s);
                found = strcasecmp(s, e->uuid) == 0;
            }
        }
        if (!found && gs__load_nvml() == 0 && gs__real.nvmlDeviceGetHandleByUUID) {
            /* Not visible to this process, but maybe to another of the tenant. */
            nvmlDevice_t h;
            char s[GS_UUID_STRLEN];
            memcpy(s, e->uuid, sizeof(s));
            memcpy(s, "GPU-", 4);
            if (gs__real.nvmlInit_v2)
                gs__real.nvmlInit_v2();
            found = gs__real.nvmlDeviceGetHandleByUUID(s, &h) == NVML_SUCCESS;
        }
        if (!found) {
            snprintf(msg, len, "%s: no GPU has UUID GPU-%s on this machine", l->source,
                     e->uuid + 4);
            return -1;
        }
    }
    return 0;
}

/*
 * A key for a device that does not exist would silently mean no limit there:
 * memory, compute and SM keys are all refused.
 */
static int validate_keys(char *msg, size_t len)
{
    int count = 0;

    if (!gs__real.cuDeviceGetCount || gs__real.cuDeviceGetCount(&count) != CUDA_SUCCESS)
        return 0;
    if (validate_list(&gs__state.mem_limits, count, msg, len) < 0 ||
        validate_list(&gs__state.compute_limits, count, msg, len) < 0 ||
        validate_list(&gs__state.sm_limits, count, msg, len) < 0)
        return -1;
    return 0;
}

GS_EXPORT CUresult cuInit(unsigned int Flags)
{
    static int checked;
    CUresult r;

    if (gs__load_cuda() < 0 || !gs__real.cuInit)
        return CUDA_ERROR_NOT_INITIALIZED;
    gs__config();
    if (gs__state.config_error)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = gs__real.cuInit(Flags)) != CUDA_SUCCESS || !gs__state.active)
        return r;
    if (!__atomic_load_n(&checked, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&mem_mu);
        if (!checked && validate_keys(gs__state.config_msg, sizeof(gs__state.config_msg)) < 0) {
            gs__state.config_error = 1;
            gs__log("%s; CUDA is disabled in this process (cuInit fails)", gs__state.config_msg);
        }
        __atomic_store_n(&checked, 1, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&mem_mu);
    }
    return gs__state.config_error ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
