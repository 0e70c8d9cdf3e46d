/*
 * Internals of the simulated libcuda.so.1 shared by its files: the process-
 * local objects (contexts, streams, allocations, pools, modules, events,
 * graphs), the one mutex that guards them, and the helpers the entry points
 * use. Nothing here is exported; the entry points are in sim_driver.c,
 * sim_context.c, sim_memory.c and sim_exec.c.
 */
#ifndef GPUSLICE_SIM_CUDA_H
#define GPUSLICE_SIM_CUDA_H

#include <pthread.h>
#include <stdint.h>

#include "common/cuda_api.h"
#include "sim_state.h"

#define SIM_EXPORT __attribute__((visibility("default")))
#define SIM_HIDDEN __attribute__((visibility("hidden")))

#define CUDA_ERROR_FILE_NOT_FOUND ((CUresult)301)
#ifndef CUDA_ERROR_CAPTURED_EVENT
#define CUDA_ERROR_CAPTURED_EVENT ((CUresult)907)
#endif

#include "sim_extra_funcs.h"

#define SIM_DECLARE_FUNC(ret, name, params) SIM_EXPORT ret name params;
SIM_EXTRA_FUNCS(SIM_DECLARE_FUNC)
#undef SIM_DECLARE_FUNC

enum sim_stream_kind { SIM_STREAM_USER, SIM_STREAM_LEGACY, SIM_STREAM_PTDS };

struct CUgraphNode_st {
    struct CUgraph_st *graph;
    uint64_t dur_ns;
    struct CUevent_st *event; /* an event record node (captured cuEventRecord); else a kernel */
    struct CUgraphNode_st *next;
};

struct CUgraph_st {
    struct CUgraphNode_st *nodes, *tail;
    size_t nnodes;
    struct CUgraph_st *next;
};

struct CUgraphExec_st {
    uint64_t *durs;             /* per node, in node order (0 for event records) */
    struct CUevent_st **events; /* per node: the event an event record node records, or NULL */
    size_t nnodes;
    uint64_t total_ns;
    struct CUgraphExec_st *next;
};

/*
 * The largest thread-block cluster a resource holds, as the H200's driver 580 runs them
 * (bench/green_cluster.cu): the whole device 8 (16 with the kernel's non-portable attribute,
 * not modelled), a co-scheduled group its 8 SMs, the split ignoring co-scheduling 2; a larger
 * cluster is refused at launch (CUDA_ERROR_INVALID_CLUSTER_SIZE). (A split's remainder is
 * taken to hold what its groups do: not measured.)
 */
#define SIM_CLUSTER_DEVICE 8

struct CUstream_st {
    struct CUctx_st *ctx;
    enum sim_stream_kind kind;
    unsigned flags;
    int priority;
    uint64_t tail_ns; /* end of the last work queued on it */
    unsigned sms;     /* SMs its kernels run on: its green context's, 0 the whole device */
    unsigned cluster; /* the largest thread-block cluster it runs; 0 the whole device's */
    struct CUgraph_st *capture; /* the graph being captured into, or NULL */
    CUstreamCaptureStatus capture_status;
    CUstreamCaptureMode capture_mode;
    pthread_t capture_thread;
    struct CUstream_st *next;
};

struct CUctx_st {
    uint64_t id; /* never reused: per-thread caches key on it */
    int dev;
    unsigned flags;
    int primary;
    unsigned refcount;     /* primary contexts */
    int active;            /* footprint charged and usable */
    int destroyed;         /* created contexts are never freed: other threads may hold them */
    struct CUctx_st *base; /* a green context's: the primary context it shares; else NULL */
    unsigned sms;          /* a green context's SMs; 0 the whole device */
    unsigned cluster;      /* a green context's largest cluster; 0 the whole device's */
    struct CUstream_st legacy;
    struct CUctx_st *next;
};

/* A green context: its converted CUcontext is ctx (in sim_drv.contexts). */
struct CUgreenCtx_st {
    struct CUctx_st ctx;
    struct CUgreenCtx_st *next;
};

struct CUdevResourceDesc_st {
    int dev;
    unsigned sms;
    unsigned cluster; /* the largest cluster its groups hold */
    struct CUdevResourceDesc_st *next;
};

struct CUfunc_st {
    struct CUmod_st *mod;
    uint64_t dur_ns; /* from a spin_<N>us name, else 0 */
    struct CUfunc_st *next;
    char name[];
};

struct CUmod_st {
    struct CUctx_st *ctx;
    struct CUfunc_st *funcs;
    struct CUmod_st *next;
    uint64_t bytes; /* of the device's memory it holds (GPUSLICE_SIM_MODULE_BYTES) */
};

struct CUevent_st {
    struct CUctx_st *ctx;
    unsigned flags;
    int recorded;
    uint64_t ts_ns;
    /* Last recorded into a capture (a node of that graph, nothing recorded): the graph, or NULL. */
    struct CUgraph_st *captured;
    struct CUevent_st *next;
};

struct CUarray_st {
    struct CUctx_st *ctx;
    int dev;
    uint64_t charged;
    struct CUarray_st *next;
};

/* A live allocation's place in its pool: [off, off + len) of the pool's own address range. */
struct sim_pool_block {
    uint64_t off, len;
};

struct CUmemPoolHandle_st {
    int dev;
    int is_default;
    int destroyed; /* destroyed with allocations outstanding: freed when they are */
    uint64_t used, reserved, used_high, reserved_high;
    uint64_t threshold;
    uint64_t max_size; /* 0: the device's capacity */
    int reuse[3];
    /* Where its allocations lie (sim_memory.c, "pools"): by offset, and which chunks are mapped. */
    struct sim_pool_block *blocks;
    unsigned nblocks, blocks_cap;
    uint8_t *mapped; /* one per 32 MiB chunk of the pool's range */
    uint64_t nchunks, nmapped;
    struct CUmemPoolHandle_st *next;
};

/* A physical allocation from cuMemCreate; CUmemGenericAllocationHandle is its address. */
struct sim_vmm {
    CUmemGenericAllocationHandle id; /* the handle's value (sim_vmm_handle) */
    int dev;
    size_t size;
    unsigned refs; /* the handle, and each cuMemRetainAllocationHandle */
    unsigned maps; /* live cuMemMap mappings */
    struct sim_vmm *next;
};

struct sim_map {
    CUdeviceptr ptr;
    size_t size;
    struct sim_vmm *handle;
    struct sim_map *next;
};

enum sim_range_kind {
    SIM_RANGE_ALLOC,
    SIM_RANGE_PAGE,
    SIM_RANGE_MANAGED,
    SIM_RANGE_POOL,
    SIM_RANGE_VA
};

#define SIM_PAGE_BLOCKS 4096 /* a 2 MiB page in the 512-byte blocks small requests take */

/*
 * A 2 MiB page that small cuMemAlloc/cuMemAllocPitch requests share (see
 * sim_memory.c, "what the driver reserves"). Block i belongs to the
 * allocation starting at block owner[i] - 1, or to none when owner[i] is 0.
 */
struct sim_page {
    uint16_t owner[SIM_PAGE_BLOCKS];
    uint32_t size[SIM_PAGE_BLOCKS]; /* at an allocation's first block: the bytes asked for */
    unsigned count;                 /* allocations in the page */
    unsigned free_blocks;
    int low32; /* for the 32-bit legacy calls: in the low 4 GiB */
};

/* A range of device addresses: an allocation, a page of small ones, or a VMM reservation. */
struct sim_range {
    CUdeviceptr base;
    size_t size;      /* what the caller asked for (pitch * height when pitched) */
    size_t span;      /* address space taken */
    uint64_t charged; /* device bytes it holds (VA: none, its mappings are charged by handle) */
    enum sim_range_kind kind;
    int dev;
    struct CUctx_st *ctx;
    struct CUmemPoolHandle_st *pool;
    uint64_t pool_off; /* SIM_RANGE_POOL: where it lies in its pool's range */
    void *host;        /* managed memory is backed by a host mapping */
    struct sim_map *maps;
    struct sim_page *page; /* SIM_RANGE_PAGE */
};

struct sim_driver {
    pthread_mutex_t lock;
    int ready; /* read without the lock: 1 once cuInit succeeded */
    int init_tried;
    CUresult init_result;
    struct sim_config cfg; /* cfg.devices: the devices CUDA shows (CUDA_VISIBLE_DEVICES) */
    struct sim_state st;
    uint32_t phys_devices;     /* the devices of the state file, all NVML sees */
    int phys[SIM_MAX_DEVICES]; /* CUDA ordinal -> index in the state file */
    uint64_t next_id;
    struct CUctx_st primary[SIM_MAX_DEVICES];
    struct CUctx_st *contexts;
    struct CUgreenCtx_st *greens;
    struct CUdevResourceDesc_st *descs;
    uint32_t next_split; /* tags the resources of each split */
    struct CUstream_st *streams;
    unsigned captures; /* streams with a capture begun and not ended */
    struct CUevent_st *events;
    struct CUmod_st *modules;
    struct CUgraph_st *graphs;
    struct CUgraphExec_st *execs;
    struct CUarray_st *arrays;
    struct CUmemPoolHandle_st *pools;
    struct CUmemPoolHandle_st *default_pool[SIM_MAX_DEVICES];
    struct CUmemPoolHandle_st *current_pool[SIM_MAX_DEVICES];
    struct sim_vmm *vmms;
    /* Handle values freed, the latest last: the next cuMemCreate takes the latest. The driver
       may hand a released handle's value out again at once; the audit's defect 4 needs it. */
    CUmemGenericAllocationHandle vmm_free_ids[64];
    unsigned vmm_nfree;
    CUmemGenericAllocationHandle vmm_next_id;
    struct sim_range *ranges; /* sorted by base */
    size_t nranges, cap;
    /*
     * Stream-ordered frees (cuMemFreeAsync) behind work still queued on their stream: the
     * memory stays taken until the stream gets there (due), as the driver's does.
     */
    struct {
        CUdeviceptr ptr;
        uint64_t due;
    } pending_frees[256];
    unsigned npending;
};

#define SIM_CTX_STACK 64
#define SIM_PTDS_CACHE 8

struct sim_tls {
    struct CUctx_st *stack[SIM_CTX_STACK];
    int depth;
    struct {
        uint64_t ctx_id;
        struct CUstream_st *s;
    } ptds[SIM_PTDS_CACHE];
    unsigned ptds_next;
};

extern SIM_HIDDEN struct sim_driver sim_drv;
extern SIM_HIDDEN __thread struct sim_tls sim_tls;

/* Takes the driver lock after cuInit; CUDA_ERROR_NOT_INITIALIZED before. */
SIM_HIDDEN CUresult sim_enter(void);
SIM_HIDDEN void sim_leave(void);
/* sim_enter for calls that need a current context, which lands in *ctx. */
SIM_HIDDEN CUresult sim_enter_ctx(struct CUctx_st **ctx);
/*
 * 1 if this process is an MPS client: a control daemon's pipe (a FIFO named
 * control) is in $CUDA_MPS_PIPE_DIRECTORY, else /tmp/nvidia-mps, where the
 * real driver looks. Its kernels then share the SMs with other clients'.
 */
SIM_HIDDEN int sim_mps_client(void);
/* A stream of context c whose kernels run on sms SMs (0: the whole device), lock held. */
SIM_HIDDEN CUresult sim_stream_new(struct CUctx_st *c, unsigned sms, unsigned flags, int priority,
                                   CUstream *ph);

SIM_HIDDEN CUresult sim_check_device(CUdevice dev);
SIM_HIDDEN CUresult sim_ctx_lookup(CUcontext h, struct CUctx_st **out);
SIM_HIDDEN CUresult sim_ctx_usable(const struct CUctx_st *c);
/* The context whose memory, streams and modules c uses: a green context's primary. */
static inline struct CUctx_st *sim_ctx_base(struct CUctx_st *c)
{
    return c && c->base ? c->base : c;
}
/* SMs kernels launched now on the calling thread's NULL stream run on (0: all). */
SIM_HIDDEN unsigned sim_current_sms(void);
SIM_HIDDEN unsigned sim_current_cluster(void);
/* A kernel of dur_ns on the whole device, run on sms of its SMs (0: all). */
SIM_HIDDEN uint64_t sim_scale_duration(uint64_t dur_ns, unsigned sms);
/* The runtime's private way to a current primary context (sim_context.c). */
SIM_EXPORT CUresult cuSimRuntimeMakePrimaryCurrent(CUdevice dev);
/* A reference to dev's primary context, activating it; and its release. Under the lock. */
SIM_HIDDEN CUresult sim_primary_retain_locked(int dev);
SIM_HIDDEN CUresult sim_primary_release_locked(int dev);
/* Frees everything a context owns when it stops being active (destroy, release, reset). */
SIM_HIDDEN void sim_ctx_teardown(struct CUctx_st *c);

/* Resolves a stream handle; ptds: the caller is a _ptsz/_ptds variant. */
SIM_HIDDEN CUresult sim_stream_get(CUstream h, int ptds, struct CUstream_st **out);
/* When work queued on s next may start, by the legacy-stream rules. */
SIM_HIDDEN uint64_t sim_stream_wait_point(const struct CUstream_st *s);
SIM_HIDDEN uint64_t sim_ctx_wait_point(const struct CUctx_st *c);
SIM_HIDDEN void sim_exec_drop_ctx(struct CUctx_st *c);

/*
 * For a "potentially unsafe" call (a query or synchronisation, an allocation
 * by cuMemAlloc and its kin) while stream captures are under way, under the
 * lock: CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, invalidating them, when this
 * thread has a capture not begun in relaxed mode or another thread one in
 * global mode; else CUDA_SUCCESS.
 */
SIM_HIDDEN CUresult sim_capture_check_unsafe(void);

/* Pools of dev holding more than their release threshold give back what they may. */
SIM_HIDDEN void sim_pools_settle(int dev);
/* Does the stream-ordered frees whose stream has got to them by now. With the lock held. */
SIM_HIDDEN void sim_frees_due(uint64_t now);
SIM_HIDDEN void sim_mem_drop_ctx(struct CUctx_st *c);
SIM_HIDDEN int sim_mem_init_pools(void);

SIM_HIDDEN void sim_sync_then_settle(uint64_t until, int dev);

/* The state file's (and NVML's) index of CUDA device dev. */
static inline int sim_phys(int dev)
{
    return sim_drv.phys[dev];
}

static inline int sim_ready(void)
{
    return __atomic_load_n(&sim_drv.ready, __ATOMIC_ACQUIRE);
}

static inline uint64_t sim_round_up(uint64_t v, uint64_t g)
{
    return (v + g - 1) / g * g;
}

#endif /* GPUSLICE_SIM_CUDA_H */
