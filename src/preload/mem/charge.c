/*
 * Memory limits: every allocation family is charged to the tenant by what
 * the driver reserves (rounded to the device's allocation granularity; pools
 * by their reserved size; VMM by physical handles; plus the driver's own
 * per-process overhead — contexts, loaded modules — read from NVML), before
 * the driver is asked, so concurrent allocators cannot overshoot together.
 * Memory given back is returned exactly, including what a destroyed context
 * took with it. This file: the process's slot, the devices, charging and
 * admission, the driver's overhead and a context's hidden part, the memory
 * reservation's give-back, and cuMemAlloc/cuMemAllocPitch/cuMemAllocManaged
 * with their frees. The other families are beside it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
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
#include "preload/mem/mem_internal.h"

#define DEFAULT_GRAN (2ULL << 20)
#define REFRESH_INTERVAL_NS 100000000ULL /* overhead re-read at most every 100 ms */
#define RESERVE_WAIT_NS 2000000000ULL /* a refused allocation waits this long for the reservation */
pthread_mutex_t mem_mu = PTHREAD_MUTEX_INITIALIZER;
/* Recursive: an admission made with it held may sync every pool (admit). */
pthread_mutex_t pool_mu = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
struct dev_state devs[MAX_ORDINALS];
struct pool_state pools[MAX_POOLS];
struct gs_map allocs;    /* device pointer -> charge; aux = context */
struct gs_map vmm;       /* VMM allocation (serial) -> charge, refs, maps */
struct gs_map handles;   /* live VMM handle -> its allocation's serial (aux) */
struct gs_map mappings;  /* mapped VA -> size; aux = the allocation's serial */
uint64_t vmm_serial;     /* the last serial given (mem_mu) */
struct gs_map arrays;    /* CUarray -> charge; aux = context */
struct gs_map pages;     /* page of small allocations -> how many (refs); aux = context */
struct gs_map pool_ptrs; /* live pool allocation -> aux = its pool's slot (pool_mu) */
uint64_t pool_ptr_count; /* entries in pool_ptrs: frees look only when there are some */
CUcontext created[256];  /* contexts made by cuCtxCreate, for destroy */
int created_ord[256];
/* What could not be given back while the tenant's lock was held too long: given back later. */
static uint64_t owed[GPUSLICE_MAX_DEVICES];
/*
 * What the driver reserved that could not be charged while the lock was held too long
 * (its own overhead, a context's footprint): charged before this process's next
 * admission, which is refused until it is (admit).
 */
static uint64_t unpaid[GPUSLICE_MAX_DEVICES];
static int proc_slot = -1;
static pid_t slot_pid;
int exiting;

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

uint64_t round_up(uint64_t v, uint64_t g)
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

pid_t gs__host_pid(void)
{
    struct gpuslice_tenant *t = gs__state.tenant;
    int32_t h;
    int s;

    /* Only a slot this process already has: its own, not one a fork left it. */
    if (!t || __atomic_load_n(&slot_pid, __ATOMIC_ACQUIRE) != getpid() ||
        (s = __atomic_load_n(&proc_slot, __ATOMIC_RELAXED)) < 0 || s >= GPUSLICE_MAX_PROCS ||
        t->size < offsetof(struct gpuslice_tenant, host_pid) + sizeof(t->host_pid))
        return 0;
    h = __atomic_load_n(&t->host_pid[s], __ATOMIC_RELAXED);
    return h > 0 ? h : 0;
}

int slot(void)
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
    if (s == -ETIMEDOUT)
        lock_refused(-1);
    else if (s < 0 && __atomic_exchange_n(&warned, pid, __ATOMIC_RELAXED) != pid)
        gs__log("%s (%d processes at most); this process's contexts and allocations are "
                "refused",
                s == GS_ENOSLOT ? "no free process slot in the tenant"
                                : "cannot take a process slot in the tenant",
                GPUSLICE_MAX_PROCS);
    return s;
}

/*
 * Something was refused because the tenant's lock was held past its bound (2 s)
 * by a process of the tenant stopped inside it (SIGSTOP, a debugger, a frozen
 * cgroup) or by a word written into the file: nothing is ever done unlocked,
 * so the allocation or context is refused. Counted on device entry e when there
 * is one (-1: none yet), and said once per process, naming the holder; called
 * on the thread whose wait ran out.
 */
void lock_refused(int e)
{
    static pid_t said;
    uint32_t tid, ns;
    pid_t pid = getpid();

    if (e >= 0 && e < GPUSLICE_MAX_DEVICES && gs__state.tenant)
        __atomic_add_fetch(&gs__state.tenant->mem_refused[e], 1, __ATOMIC_RELAXED);
    if (__atomic_exchange_n(&said, pid, __ATOMIC_RELAXED) == pid)
        return;
    gs_tenant_lock_blocker(&tid, &ns);
    gs__log("the tenant's accounting lock was held for more than 2 s by thread %u%s (a process "
            "of the tenant stopped inside it, or the lock word written into its file); what "
            "this process allocates meanwhile is refused, never admitted uncharged",
            tid, ns && ns != gs_proc_self_ns() ? " of another PID namespace" : "");
}

void gs__mem_fork_child(void)
{
    /* The child is a new process: it takes its own slot and starts with nothing. */
    proc_slot = -1;
    slot_pid = 0;
    memset(owed, 0, sizeof(owed));
    memset(unpaid, 0, sizeof(unpaid));
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

/* The tenant's entry for ordinal's device, found without the lock (for counting a refusal). */
static int entry_unlocked(int ord)
{
    uint8_t raw[16];
    int i;

    if (gs__device_uuid(ord, raw) == NULL)
        return -1;
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        if (memcmp(gs__state.tenant->dev[i].uuid, raw, 16) == 0)
            return i;
    return -1;
}

/*
 * Ordinal's memory state: its UUID and tenant entry (device.c), and its
 * granularity. NULL where nothing is accounted (no tenant, the driver not
 * initialised), with *refuse set where the device's memory cannot be counted
 * now (the tenant's lock held too long) or ever (no room for it in the
 * tenant's device table): nothing may be allocated there then.
 */
static struct dev_state *dev_lookup(int ord, int *refuse)
{
    static int said_full;
    struct dev_state *d;
    int e;

    *refuse = 0;
    if (ord < 0 || ord >= MAX_ORDINALS || gs__state.tenant == NULL)
        return NULL;
    d = &devs[ord];
    if (d->resolved) {
        *refuse = d->resolved < 0;
        return d->resolved > 0 ? d : NULL;
    }
    /* The device's UUID and tenant entry come from the one registry (device.c). */
    if ((e = gs__device_entry(ord)) == GS_DEVICE_LATER)
        return NULL; /* not initialised yet: try again later */
    if (e == GS_DEVICE_BUSY) {
        /* Asked again at the next use; meanwhile its memory could not be counted. */
        lock_refused(entry_unlocked(ord));
        *refuse = 1;
        return NULL;
    }
    if (e < 0) {
        d->resolved = -1;
        *refuse = 1;
        if (!__atomic_exchange_n(&said_full, 1, __ATOMIC_RELAXED))
            gs__log("device %d: the tenant's device table has no room for it, so its memory "
                    "cannot be counted; contexts and allocations there are refused",
                    ord);
        return NULL;
    }
    memcpy(d->uuid, gs__device_uuid(ord, NULL), sizeof(d->uuid));
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
    gs__debug("device %d (%s): tenant entry %d, limit %llu bytes, granularity %llu", ord, d->uuid,
              e, (unsigned long long)gs__mem_limit(e), (unsigned long long)d->gran);
    d->resolved = 1;
    return d;
}

struct dev_state *dev_get(int ord)
{
    int refuse;

    return dev_lookup(ord, &refuse);
}

struct dev_state *dev_for_alloc(int ord, CUresult *r)
{
    int refuse;
    struct dev_state *d = dev_lookup(ord, &refuse);

    *r = refuse ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_SUCCESS;
    return d;
}

int current_ordinal(void)
{
    CUdevice dev;

    if (!gs__real.cuCtxGetDevice || gs__real.cuCtxGetDevice(&dev) != CUDA_SUCCESS)
        return -1;
    return (int)dev;
}

/*
 * Charges without a limit check what the driver has already reserved: 0, or <0
 * when the lock could not be had (nothing charged then: a caller that can take
 * the memory back does so, before anyone can be admitted against it).
 */
int charge_taken(struct dev_state *d, uint64_t bytes)
{
    int s = slot();

    if (s < 0)
        return s;
    return bytes ? gs_tenant_charge(gs__state.tenant, s, d->entry, bytes, 1) : 0;
}

/*
 * charge_taken() for what cannot be taken back (the driver's own overhead, a
 * context's footprint): if the lock could not be had, the bytes are unpaid,
 * charged before this process's next admission, which waits for it.
 */
void force_charge(struct dev_state *d, uint64_t bytes)
{
    if (charge_taken(d, bytes) < 0)
        __atomic_add_fetch(&unpaid[d->entry], bytes, __ATOMIC_ACQ_REL);
}

/* Takes back up to bytes of what is unpaid on entry e; returns what was taken back. */
static uint64_t cancel_unpaid(int e, uint64_t bytes)
{
    uint64_t u = __atomic_load_n(&unpaid[e], __ATOMIC_ACQUIRE), take;

    do {
        take = u < bytes ? u : bytes;
    } while (take && !__atomic_compare_exchange_n(&unpaid[e], &u, u - take, 0, __ATOMIC_ACQ_REL,
                                                  __ATOMIC_ACQUIRE));
    return take;
}

void uncharge(struct dev_state *d, uint64_t bytes)
{
    int s = slot();

    if (s < 0)
        return;
    /* A charge that never reached the tenant is given back by not making it. */
    bytes -= cancel_unpaid(d->entry, bytes);
    bytes += __atomic_exchange_n(&owed[d->entry], 0, __ATOMIC_ACQ_REL);
    if (bytes && gs_tenant_uncharge(gs__state.tenant, s, d->entry, bytes) < 0)
        __atomic_add_fetch(&owed[d->entry], bytes, __ATOMIC_ACQ_REL);
}

/* Charges what is unpaid on d: 0, or <0 (the lock), when it stays unpaid. */
static int pay_unpaid(struct dev_state *d, int s)
{
    uint64_t u = __atomic_exchange_n(&unpaid[d->entry], 0, __ATOMIC_ACQ_REL);
    int r;

    if (u == 0 || (r = gs_tenant_charge(gs__state.tenant, s, d->entry, u, 1)) == 0)
        return 0;
    __atomic_add_fetch(&unpaid[d->entry], u, __ATOMIC_ACQ_REL);
    return r;
}

static void nvml_init_once(void)
{
    if (gs__load_nvml() == 0 && gs__real.nvmlInit_v2)
        gs__real.nvmlInit_v2();
}

/* NVML, initialised (every reading before nvmlInit would be an error or 0), or -1. */
int gs__nvml_ready(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;

    if (gs__load_nvml() < 0)
        return -1;
    pthread_once(&once, nvml_init_once);
    return 0;
}

#define NVML_PROC_TRIES 6

int nvml_look_processes(struct dev_state *d, struct nvml_look *l)
{
    nvmlProcessInfo_t buf[64], *infos = buf, *more;
    nvmlDevice_t h;
    unsigned int cap = 64, n, i;
    char uuid[GS_UUID_STRLEN];
    nvmlReturn_t r = NVML_ERROR_INSUFFICIENT_SIZE;
    int tries;

    memset(l, 0, sizeof(*l));
    l->mine = -1;
    if (gs__nvml_ready() < 0 || !gs__real.nvmlDeviceGetHandleByUUID ||
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
int64_t nvml_process_used(struct dev_state *d)
{
    struct nvml_look l;

    return nvml_look_processes(d, &l) == 0 ? l.mine : -1;
}

/* Memory in use on the whole device (NVML), or -1 when it cannot be read. */
int64_t nvml_device_used(struct dev_state *d)
{
    nvmlDevice_t h;
    nvmlMemory_t m;
    char uuid[GS_UUID_STRLEN];

    if (gs__nvml_ready() < 0 || !gs__real.nvmlDeviceGetHandleByUUID ||
        !gs__real.nvmlDeviceGetMemoryInfo)
        return -1;
    memcpy(uuid, d->uuid, sizeof(uuid));
    memcpy(uuid, "GPU-", 4);
    if (gs__real.nvmlDeviceGetHandleByUUID(uuid, &h) != NVML_SUCCESS ||
        gs__real.nvmlDeviceGetMemoryInfo(h, &m) != NVML_SUCCESS)
        return -1;
    return (int64_t)m.used;
}

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
 * per context (refresh_overhead); nothing where the device was not settled.
 * The part is a context's, so the growth is divided among the contexts made
 * since the base: this process's own (d->ctx_count; with three, dividing by
 * processes took each for three parts, and charged nine) and one for each
 * other process listed since. base is the tenant's ctx_base word (not 0).
 */
static void hidden_from_look(struct dev_state *d, uint64_t base, int64_t device_used,
                             const struct nvml_look *l)
{
    uint64_t before, unattributed, hidden, own;
    unsigned listed_before;

    if (device_used < 0 || !l->complete || l->mine < 0 || d->ctx_count <= 0)
        return;
    before = GPUSLICE_CTX_BASE_BYTES(base);
    listed_before = GPUSLICE_CTX_BASE_LISTED(base);
    /* What one of this process's contexts holds in its figure. */
    own = (uint64_t)l->mine > d->charged ? ((uint64_t)l->mine - d->charged) / d->ctx_count : 0;
    if (l->listed <= listed_before || l->smallest < CTX_LISTED_MIN || l->smallest < own / 2)
        return;
    if ((uint64_t)device_used < before + l->sum)
        return; /* a figure changed between the two reads */
    unattributed = (uint64_t)device_used - l->sum - before;
    hidden = unattributed / (l->listed - listed_before + (unsigned)d->ctx_count - 1);
    if (hidden > CTX_HIDDEN_MAX)
        return;
    __atomic_store_n(&gs__state.tenant->dev[d->entry].ctx_hidden, hidden, __ATOMIC_RELEASE);
}

/*
 * Re-reads what the driver holds for this process on the device beyond our
 * charges (contexts, modules loaded lazily, …) and charges the difference.
 * Called with mem_mu held.
 */
void refresh_overhead(struct dev_state *d)
{
    struct nvml_look l;
    int64_t device_used;
    uint64_t want, base, mine;

    if (d->mode == OVERHEAD_FOOTPRINT || d->ctx_count == 0)
        return;
    d->last_refresh_ns = now_ns();
    /* The device's own use is read only when there is a base to measure a hidden part against. */
    base = __atomic_load_n(&gs__state.tenant->ctx_base[d->entry], __ATOMIC_ACQUIRE);
    device_used = base ? nvml_device_used(d) : -1;
    if (nvml_look_processes(d, &l) < 0 || l.mine < 0)
        return;
    d->mode = OVERHEAD_NVML_PROCESS;
    /* The device's use must not have moved while the list was read: its figures go with it. */
    if (device_used >= 0 && nvml_device_used(d) == device_used)
        hidden_from_look(d, base, device_used, &l);
    /*
     * What pools gave back at a synchronisation not seen yet is still in d->charged but no
     * longer in NVML's figure: without it the overhead would drop by it, and the pool's own
     * re-read give it back a second time (a 128 MiB release, a second context, then 128 MiB
     * admitted over the limit).
     */
    mine = (uint64_t)l.mine + pools_released_unseen((int)(d - devs));
    want = mine > d->charged ? mine - d->charged : 0;
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
void pool_sync(struct pool_state *p)
{
    struct dev_state *d = dev_get(p->ord);
    cuuint64_t reserved = 0;

    if (d == NULL || !gs__real.cuMemPoolGetAttribute ||
        gs__real.cuMemPoolGetAttribute(p->pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) !=
            CUDA_SUCCESS)
        return;
    pthread_mutex_lock(&mem_mu);
    if (reserved > p->accounted) {
        force_charge(d, reserved - p->accounted);
        d->charged += reserved - p->accounted;
    } else {
        uncharge(d, p->accounted - reserved);
        d->charged -= p->accounted - reserved;
    }
    p->accounted = reserved; /* with the charge, under mem_mu (pools_released_unseen) */
    pthread_mutex_unlock(&mem_mu);
}

void sync_all_pools(void)
{
    int i;

    pthread_mutex_lock(&pool_mu);
    for (i = 0; i < MAX_POOLS; i++)
        if (pools[i].pool)
            pool_sync(&pools[i]);
    pthread_mutex_unlock(&pool_mu);
}

/* The limit admit() charges against: the daemon's for a managed tenant (0 is none there). */
static uint64_t limit_of(int e)
{
    uint64_t l;

    if (gs__state.node == NULL)
        return GS_TENANT_OWN_LIMIT;
    l = gs__mem_limit(e);
    return l ? l : GS_TENANT_NO_LIMIT;
}

/*
 * Charges bytes for a new allocation on d, or returns CUDA_ERROR_OUT_OF_MEMORY.
 * Before refusing, it re-reads what may have been given back meanwhile
 * (pools released at a synchronisation, dead processes of the tenant).
 */
CUresult admit(struct dev_state *d, uint64_t bytes)
{
    int s = slot(), r, saved = errno;

    if (s < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* What the driver took that the lock kept from being charged: charged first, or refused. */
    if ((r = pay_unpaid(d, s)) < 0) {
        errno = saved;
        if (r == -ETIMEDOUT)
            lock_refused(d->entry);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (__atomic_load_n(&owed[d->entry], __ATOMIC_RELAXED))
        uncharge(d, 0); /* a free the lock made wait: given back first */
    __atomic_add_fetch(&d->inflight, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&mem_mu);
    if (d->mode == OVERHEAD_NVML_PROCESS && now_ns() - d->last_refresh_ns > REFRESH_INTERVAL_NS)
        refresh_overhead(d);
    pthread_mutex_unlock(&mem_mu);
    r = gs_tenant_charge_within(gs__state.tenant, s, d->entry, bytes, limit_of(d->entry));
    if (r == GS_EOVERLIMIT) {
        sync_all_pools();
        pthread_mutex_lock(&mem_mu);
        refresh_overhead(d);
        pthread_mutex_unlock(&mem_mu);
        r = gs_tenant_charge_within(gs__state.tenant, s, d->entry, bytes, limit_of(d->entry));
    }
    errno = saved;
    if (r < 0) {
        __atomic_sub_fetch(&d->inflight, 1, __ATOMIC_ACQ_REL);
        if (r == GS_EOVERLIMIT)
            __atomic_add_fetch(&gs__state.tenant->mem_refused[d->entry], 1, __ATOMIC_RELAXED);
        else if (r == -ETIMEDOUT)
            lock_refused(d->entry); /* never admitted without the lock */
        gs__debug("refused %llu bytes on %s: tenant uses %llu of %llu", (unsigned long long)bytes,
                  d->uuid,
                  (unsigned long long)__atomic_load_n(&gs__state.tenant->dev[d->entry].mem_used,
                                                      __ATOMIC_RELAXED),
                  (unsigned long long)gs__mem_limit(d->entry));
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    pthread_mutex_lock(&mem_mu);
    d->charged += bytes;
    pthread_mutex_unlock(&mem_mu);
    return CUDA_SUCCESS;
}

/* Whether bytes more would fit under d's limit now (a hint: admit() decides). */
int room_for(const struct dev_state *d, uint64_t bytes)
{
    const struct gpuslice_tenant_device *td = &gs__state.tenant->dev[d->entry];
    uint64_t limit = gs__mem_limit(d->entry);
    uint64_t used = __atomic_load_n(&td->mem_used, __ATOMIC_RELAXED);

    return limit == 0 || (bytes <= limit && used <= limit - bytes);
}

/* Ends what admit() began, once the driver has answered and the charge is final. */
void settle(struct dev_state *d)
{
    __atomic_sub_fetch(&d->inflight, 1, __ATOMIC_ACQ_REL);
}

/* Gives back a charge made by admit(); mem_mu held. */
void unadmit_locked(struct dev_state *d, uint64_t bytes)
{
    int saved = errno;

    d->charged = d->charged >= bytes ? d->charged - bytes : 0;
    uncharge(d, bytes);
    errno = saved;
}

void unadmit(struct dev_state *d, uint64_t bytes)
{
    pthread_mutex_lock(&mem_mu);
    unadmit_locked(d, bytes);
    pthread_mutex_unlock(&mem_mu);
}

/* Records a charged object in map m; on failure gives the charge back. */
int track(struct gs_map *m, uint64_t key, uint64_t bytes, int ord, uint64_t aux)
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
int untrack(struct gs_map *m, uint64_t key, struct gs_map_entry *out)
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

void retrack(struct gs_map *m, const struct gs_map_entry *old)
{
    struct gs_map_entry *e;

    pthread_mutex_lock(&mem_mu);
    if ((e = gs_map_put(m, old->key)) != NULL)
        *e = *old;
    pthread_mutex_unlock(&mem_mu);
}

uint64_t current_ctx(void)
{
    CUcontext c = NULL;

    if (gs__real.cuCtxGetCurrent)
        gs__real.cuCtxGetCurrent(&c);
    return (uint64_t)(uintptr_t)c;
}

/*
 * The state for the current context's device if a limit applies, else NULL
 * with *r: CUDA_SUCCESS (nothing is accounted: the call passes) or the
 * refusal (dev_for_alloc).
 */
struct dev_state *limited_current(int *ord, CUresult *r)
{
    *r = CUDA_SUCCESS;
    if (exiting || (*ord = current_ordinal()) < 0)
        return NULL;
    return dev_for_alloc(*ord, r);
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
void release_entry(const struct gs_map_entry *e)
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
int give_back(struct dev_state *d, uint64_t bytes)
{
    static int warned;
    struct gpuslice_tenant *t = gs__state.tenant;
    uint64_t held;
    size_t f = 0, tot = 0;
    int e, r;

    if (d == NULL || t == NULL || exiting || (e = gs_reserve_entry(t, t->dev[d->entry].uuid)) < 0 ||
        (held = gs_reserve_held(t, e)) == 0)
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
uint64_t reserved_for(const struct dev_state *d)
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
        gs__debug("refused a small allocation on %s: it needed a page beyond the limit", d->uuid);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (fresh == 0 && sm->admitted)
        unadmit(d, d->gran); /* its page was counted already */
    if (sm->admitted)
        settle(d);
    return CUDA_SUCCESS;
}

#define GS_ALLOC_BODY(sym, ptrtype, dptr, bytes, pages_ok, call)                                   \
    do {                                                                                           \
        struct dev_state *d;                                                                       \
        uint64_t charge;                                                                           \
        CUresult r;                                                                                \
        int ord;                                                                                   \
        GS_PASS(sym, call);                                                                        \
        if ((d = limited_current(&ord, &r)) == NULL)                                               \
            return r == CUDA_SUCCESS ? gs__real.sym call : r;                                      \
        if ((bytes) == 0)                                                                          \
            return gs__real.sym call;                                                              \
        if ((pages_ok) && (uint64_t)(bytes) < d->gran && dptr) {                                   \
            struct small sm;                                                                       \
            small_begin(&sm, d, ord);                                                              \
            r = gs__real.sym call;                                                                 \
            return small_end(&sm, r, r == CUDA_SUCCESS ? (uint64_t) * (dptr) : 0);                 \
        }                                                                                          \
        charge = alloc_charge(d, (bytes));                                                         \
        if ((r = admit(d, charge)) != CUDA_SUCCESS)                                                \
            return r;                                                                              \
        GS_RESERVED_CALL(r, d, charge, gs__real.sym call);                                         \
        if (r != CUDA_SUCCESS) {                                                                   \
            unadmit(d, charge);                                                                    \
            settle(d);                                                                             \
            return r;                                                                              \
        }                                                                                          \
        if (track(&allocs, (uint64_t) * (dptr), charge, ord, current_ctx()) < 0)                   \
            gs__log("out of memory tracking an allocation; it stays charged");                     \
        settle(d);                                                                                 \
        return CUDA_SUCCESS;                                                                       \
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

#define GS_PITCH_BODY(sym, dptr, pPitch, width, height, call)                                      \
    do {                                                                                           \
        struct dev_state *d;                                                                       \
        uint64_t charge, actual, est;                                                              \
        CUresult r;                                                                                \
        int ord;                                                                                   \
        GS_PASS(sym, call);                                                                        \
        if ((d = limited_current(&ord, &r)) == NULL)                                               \
            return r == CUDA_SUCCESS ? gs__real.sym call : r;                                      \
        if ((width) == 0 || (height) == 0)                                                         \
            return gs__real.sym call;                                                              \
        if ((uint64_t)(height) > UINT64_MAX / round_up((width), PITCH_ALIGN))                      \
            return CUDA_ERROR_OUT_OF_MEMORY;                                                       \
        est = round_up((width), PITCH_ALIGN) * (uint64_t)(height);                                 \
        if (est < d->gran && dptr && pPitch) {                                                     \
            struct small sm;                                                                       \
            small_begin(&sm, d, ord);                                                              \
            r = gs__real.sym call;                                                                 \
            if (r != CUDA_SUCCESS || (uint64_t) * (pPitch) * (uint64_t)(height) < d->gran)         \
                return small_end(&sm, r, r == CUDA_SUCCESS ? (uint64_t) * (dptr) : 0);             \
            /* Wider rows than measured: a large one after all, admitted as one or undone. */      \
            if (sm.admitted) {                                                                     \
                unadmit(d, d->gran);                                                               \
                settle(d);                                                                         \
            }                                                                                      \
            actual = alloc_charge(d, (uint64_t) * (pPitch) * (uint64_t)(height));                  \
            if ((r = admit(d, actual)) != CUDA_SUCCESS) {                                          \
                gs__real.cuMemFree_v2((CUdeviceptr) * (dptr));                                     \
                return r;                                                                          \
            }                                                                                      \
            track(&allocs, (uint64_t) * (dptr), actual, ord, current_ctx());                       \
            settle(d);                                                                             \
            return CUDA_SUCCESS;                                                                   \
        }                                                                                          \
        charge = alloc_charge(d, est);                                                             \
        if ((r = admit(d, charge)) != CUDA_SUCCESS)                                                \
            return r;                                                                              \
        GS_RESERVED_CALL(r, d, charge, gs__real.sym call);                                         \
        if (r != CUDA_SUCCESS) {                                                                   \
            unadmit(d, charge);                                                                    \
            settle(d);                                                                             \
            return r;                                                                              \
        }                                                                                          \
        actual = alloc_charge(d, (uint64_t) * (pPitch) * (uint64_t)(height));                      \
        if (actual > charge) {                                                                     \
            /* Wider rows than measured: the rest admitted too, or the allocation undone. */       \
            if ((r = admit(d, actual - charge)) != CUDA_SUCCESS) {                                 \
                gs__real.cuMemFree_v2((CUdeviceptr) * (dptr));                                     \
                unadmit(d, charge);                                                                \
                settle(d);                                                                         \
                return r;                                                                          \
            }                                                                                      \
            settle(d);                                                                             \
        } else if (actual < charge) {                                                              \
            unadmit(d, charge - actual);                                                           \
        }                                                                                          \
        track(&allocs, (uint64_t) * (dptr), actual, ord, current_ctx());                           \
        settle(d);                                                                                 \
        return CUDA_SUCCESS;                                                                       \
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

GS_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    GS_FREE_BODY(cuMemFree_v2, &allocs, dptr, (dptr));
}

GS_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    GS_FREE_BODY(cuMemFree, &allocs, dptr, (dptr));
}
