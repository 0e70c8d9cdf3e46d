/*
 * Work on the simulated device: modules and functions, kernel launches (plain,
 * Ex, cooperative), streams with the legacy and per-thread default streams,
 * events, and CUDA graphs built by stream capture or explicitly. A function
 * named spin_<N>us occupies the device for N microseconds; the device timeline
 * itself lives in the shared state (sim_state_launch).
 */
#define _GNU_SOURCE
#include "sim_cuda.h"

#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SIM_PRIORITY_GREATEST (-5)
#define SIM_PRIORITY_LEAST 0
#define SIM_MAX_SHARED_PER_BLOCK 232448u

/* ---- streams ---------------------------------------------------------- */

static struct CUctx_st *current_ctx(void)
{
    return sim_tls.depth > 0 ? sim_tls.stack[sim_tls.depth - 1] : NULL;
}

/* The SMs a launch on s runs on: a stream's own, the current green context's for NULL streams. */
static unsigned stream_sms(const struct CUstream_st *s)
{
    return s->kind == SIM_STREAM_USER ? s->sms : sim_current_sms();
}

/* The largest thread-block cluster a launch on s may have (sim_green.c). */
static unsigned stream_cluster(const struct CUstream_st *s)
{
    unsigned c = s->kind == SIM_STREAM_USER ? s->cluster : sim_current_cluster();

    return c ? c : SIM_CLUSTER_DEVICE;
}

/* This thread's default stream in c, made on first use. */
static struct CUstream_st *ptds_stream(struct CUctx_st *c)
{
    struct CUstream_st *s;
    unsigned k;

    for (k = 0; k < SIM_PTDS_CACHE; k++)
        if (sim_tls.ptds[k].s && sim_tls.ptds[k].ctx_id == c->id)
            return sim_tls.ptds[k].s;
    if (!(s = calloc(1, sizeof(*s))))
        return NULL;
    s->ctx = c;
    s->kind = SIM_STREAM_PTDS;
    s->next = sim_drv.streams;
    sim_drv.streams = s;
    /* An evicted entry's stream lives on in the context's list until it goes. */
    k = sim_tls.ptds_next++ % SIM_PTDS_CACHE;
    sim_tls.ptds[k].ctx_id = c->id;
    sim_tls.ptds[k].s = s;
    return s;
}

CUresult sim_stream_get(CUstream h, int ptds, struct CUstream_st **out)
{
    struct CUctx_st *c;
    CUresult r;

    if (!h)
        h = ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
    if (h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        if (!(c = current_ctx()))
            return CUDA_ERROR_INVALID_CONTEXT;
        if ((r = sim_ctx_usable(c)) != CUDA_SUCCESS)
            return r;
        c = sim_ctx_base(c);
        if (h == CU_STREAM_LEGACY) {
            *out = &c->legacy;
            return CUDA_SUCCESS;
        }
        *out = ptds_stream(c);
        return *out ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (struct CUstream_st *s = sim_drv.streams; s; s = s->next) {
        if (s == h) {
            *out = s;
            return sim_ctx_usable(s->ctx) == CUDA_SUCCESS ? CUDA_SUCCESS
                                                          : CUDA_ERROR_INVALID_HANDLE;
        }
    }
    return CUDA_ERROR_INVALID_HANDLE;
}

static int blocking(const struct CUstream_st *s)
{
    return s->kind == SIM_STREAM_PTDS ||
           (s->kind == SIM_STREAM_USER && !(s->flags & CU_STREAM_NON_BLOCKING));
}

/*
 * The legacy stream waits for every blocking stream of its context, and they
 * wait for it; non-blocking streams wait only for themselves.
 */
uint64_t sim_stream_wait_point(const struct CUstream_st *s)
{
    uint64_t t = s->tail_ns;

    if (s->kind == SIM_STREAM_LEGACY) {
        for (const struct CUstream_st *o = sim_drv.streams; o; o = o->next)
            if (o->ctx == s->ctx && blocking(o) && o->tail_ns > t)
                t = o->tail_ns;
    } else if (blocking(s) && s->ctx->legacy.tail_ns > t) {
        t = s->ctx->legacy.tail_ns;
    }
    return t;
}

uint64_t sim_ctx_wait_point(const struct CUctx_st *c)
{
    uint64_t t = c->legacy.tail_ns;

    for (const struct CUstream_st *s = sim_drv.streams; s; s = s->next)
        if (s->ctx == c && s->tail_ns > t)
            t = s->tail_ns;
    return t;
}

CUresult sim_stream_new(struct CUctx_st *c, unsigned sms, unsigned flags, int priority,
                        CUstream *ph)
{
    struct CUstream_st *s;

    if (!(s = calloc(1, sizeof(*s))))
        return CUDA_ERROR_OUT_OF_MEMORY;
    /* Out-of-range priorities are clamped, as the driver does. */
    if (priority < SIM_PRIORITY_GREATEST)
        priority = SIM_PRIORITY_GREATEST;
    if (priority > SIM_PRIORITY_LEAST)
        priority = SIM_PRIORITY_LEAST;
    s->ctx = c;
    s->kind = SIM_STREAM_USER;
    s->sms = sms;
    s->cluster = sim_current_cluster(); /* a green context's stream: set by its maker */
    s->flags = flags;
    s->priority = priority;
    s->next = sim_drv.streams;
    sim_drv.streams = s;
    *ph = s;
    return CUDA_SUCCESS;
}

static CUresult stream_create(CUstream *ph, unsigned int flags, int priority)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING))
        r = CUDA_ERROR_INVALID_VALUE;
    else /* made in a green context: its kernels run there */
        r = sim_stream_new(c, sim_current_sms(), flags, priority, ph);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags)
{
    return stream_create(phStream, Flags, SIM_PRIORITY_LEAST);
}

SIM_EXPORT CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags, int priority)
{
    return stream_create(phStream, flags, priority);
}

static void graph_free(struct CUgraph_st *g);

static void stream_free(struct CUstream_st *s)
{
    if (s->capture) {
        graph_free(s->capture);
        sim_drv.captures--;
    }
    free(s);
}

SIM_EXPORT CUresult cuStreamDestroy_v2(CUstream hStream)
{
    struct CUstream_st **pp;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_HANDLE;
    for (pp = &sim_drv.streams; *pp; pp = &(*pp)->next) {
        struct CUstream_st *s = *pp;
        if (s == hStream && s->kind == SIM_STREAM_USER) {
            *pp = s->next;
            stream_free(s);
            r = CUDA_SUCCESS;
            break;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuStreamDestroy(CUstream hStream)
{
    return cuStreamDestroy_v2(hStream);
}

/* Operations that would wait on a capturing stream break its capture, in every mode. */
static CUresult refuse_if_capturing(struct CUstream_st *s)
{
    if (!s->capture)
        return CUDA_SUCCESS;
    s->capture_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
}

/*
 * The capture modes, as measured on an H200 (README): a global capture
 * forbids every thread's unsafe calls, a thread-local one only its own
 * thread's, a relaxed one none; a forbidden call fails and invalidates the
 * captures that forbade it.
 */
CUresult sim_capture_check_unsafe(void)
{
    pthread_t me = pthread_self();
    int forbidden = 0;

    if (sim_drv.captures == 0)
        return CUDA_SUCCESS;
    for (struct CUstream_st *s = sim_drv.streams; s; s = s->next) {
        int mine;

        if (!s->capture)
            continue;
        mine = pthread_equal(s->capture_thread, me);
        if ((mine && s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
            (!mine && s->capture_mode == CU_STREAM_CAPTURE_MODE_GLOBAL)) {
            s->capture_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
            forbidden = 1;
        }
    }
    return forbidden ? CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED : CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream h, int ptds)
{
    struct CUstream_st *s;
    uint64_t until = 0;
    int dev = 0;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS &&
        (r = refuse_if_capturing(s)) == CUDA_SUCCESS &&
        (r = sim_capture_check_unsafe()) == CUDA_SUCCESS) {
        until = sim_stream_wait_point(s);
        dev = s->ctx->dev;
    }
    sim_leave();
    if (r == CUDA_SUCCESS)
        sim_sync_then_settle(until, dev);
    return r;
}

SIM_EXPORT CUresult cuStreamSynchronize(CUstream hStream)
{
    return stream_sync(hStream, 0);
}

SIM_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
    return stream_sync(hStream, 1);
}

static CUresult stream_query(CUstream h, int ptds)
{
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS &&
        (r = refuse_if_capturing(s)) == CUDA_SUCCESS &&
        (r = sim_capture_check_unsafe()) == CUDA_SUCCESS)
        r = sim_stream_wait_point(s) > sim_now_ns() ? CUDA_ERROR_NOT_READY : CUDA_SUCCESS;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuStreamQuery(CUstream hStream)
{
    return stream_query(hStream, 0);
}

SIM_EXPORT CUresult cuStreamQuery_ptsz(CUstream hStream)
{
    return stream_query(hStream, 1);
}

SIM_EXPORT CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx)
{
    struct CUstream_st *s;
    CUresult r;

    if (!pctx)
        return CUDA_ERROR_INVALID_VALUE;
    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_stream_get(hStream, 0, &s)) == CUDA_SUCCESS)
        *pctx = s->ctx;
    sim_leave();
    return r;
}

/* ---- graphs ----------------------------------------------------------- */

static void graph_free(struct CUgraph_st *g)
{
    struct CUgraph_st **pp;

    for (pp = &sim_drv.graphs; *pp; pp = &(*pp)->next) {
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    }
    while (g->nodes) {
        struct CUgraphNode_st *n = g->nodes;
        g->nodes = n->next;
        free(n);
    }
    free(g);
}

static struct CUgraph_st *graph_new(void)
{
    struct CUgraph_st *g = calloc(1, sizeof(*g));

    if (g) {
        g->next = sim_drv.graphs;
        sim_drv.graphs = g;
    }
    return g;
}

static struct CUgraph_st *graph_find(CUgraph h)
{
    for (struct CUgraph_st *g = sim_drv.graphs; g; g = g->next)
        if (g == h)
            return g;
    return NULL;
}

static struct CUgraphNode_st *graph_add_node(struct CUgraph_st *g, uint64_t dur_ns,
                                             struct CUevent_st *event)
{
    struct CUgraphNode_st *n = calloc(1, sizeof(*n));

    if (!n)
        return NULL;
    n->graph = g;
    n->dur_ns = dur_ns;
    n->event = event;
    if (g->tail)
        g->tail->next = n;
    else
        g->nodes = n;
    g->tail = n;
    g->nnodes++;
    return n;
}

SIM_EXPORT CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!phGraph || flags != 0)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(*phGraph = graph_new()))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuGraphDestroy(CUgraph hGraph)
{
    struct CUgraph_st *g;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(g = graph_find(hGraph))) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        for (struct CUstream_st *s = sim_drv.streams; s; s = s->next)
            if (s->capture == g)
                r = CUDA_ERROR_ILLEGAL_STATE; /* still being captured into */
        if (r == CUDA_SUCCESS)
            graph_free(g);
    }
    sim_leave();
    return r;
}

static struct CUfunc_st *func_find(CUfunction h)
{
    for (struct CUmod_st *m = sim_drv.modules; m; m = m->next)
        for (struct CUfunc_st *f = m->funcs; f; f = f->next)
            if (f == h)
                return f;
    return NULL;
}

static CUresult add_kernel_node(CUgraphNode *ph, CUgraph hGraph, const CUgraphNode *deps,
                                size_t ndeps, CUfunction func, unsigned gx, unsigned gy,
                                unsigned gz, unsigned bx, unsigned by, unsigned bz)
{
    struct CUgraph_st *g;
    struct CUfunc_st *f;
    struct CUgraphNode_st *n;

    if (!ph || !(g = graph_find(hGraph)) || (ndeps > 0 && !deps))
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < ndeps; i++) {
        for (n = g->nodes; n && n != deps[i]; n = n->next)
            ;
        if (!n)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!(f = func_find(func)))
        return CUDA_ERROR_INVALID_VALUE;
    if (!gx || !gy || !gz || !bx || !by || !bz || (uint64_t)bx * by * bz > 1024)
        return CUDA_ERROR_INVALID_VALUE;
    /* Dependencies order nothing here: the device runs one kernel at a time. */
    if (!(n = graph_add_node(g, sim_scale_duration(f->dur_ns, sim_current_sms()), NULL)))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *ph = n;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                         const CUgraphNode *dependencies, size_t numDependencies,
                                         const CUDA_KERNEL_NODE_PARAMS_v1 *p)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = p ? add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, p->func,
                            p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                            p->blockDimZ)
          : CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

/* The v2 parameters may name a CUkernel instead; the simulator has no libraries, so no kernels. */
SIM_EXPORT CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                            const CUgraphNode *dependencies, size_t numDependencies,
                                            const CUDA_KERNEL_NODE_PARAMS *p)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = p ? add_kernel_node(phGraphNode, hGraph, dependencies, numDependencies, p->func,
                            p->gridDimX, p->gridDimY, p->gridDimZ, p->blockDimX, p->blockDimY,
                            p->blockDimZ)
          : CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                unsigned long long flags)
{
    struct CUgraph_st *g;
    struct CUgraphExec_st *e;
    CUresult r;
    size_t i = 0;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!phGraphExec || !(g = graph_find(hGraph)) || (flags & ~0xFull)) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (!(e = calloc(1, sizeof(*e))) ||
               !(e->durs = calloc(g->nnodes ? g->nnodes : 1, sizeof(*e->durs))) ||
               !(e->events = calloc(g->nnodes ? g->nnodes : 1, sizeof(*e->events)))) {
        if (e)
            free(e->durs);
        free(e);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        /* A snapshot: later changes to the graph do not reach the executable. */
        for (struct CUgraphNode_st *n = g->nodes; n; n = n->next, i++) {
            e->durs[i] = n->dur_ns;
            e->events[i] = n->event;
            e->total_ns += n->dur_ns;
        }
        e->nnodes = g->nnodes;
        e->next = sim_drv.execs;
        sim_drv.execs = e;
        *phGraphExec = e;
    }
    sim_leave();
    return r;
}

static CUresult graph_instantiate_legacy(CUgraphExec *phGraphExec, CUgraph hGraph,
                                         CUgraphNode *phErrorNode, char *logBuffer,
                                         size_t bufferSize)
{
    CUresult r = cuGraphInstantiateWithFlags(phGraphExec, hGraph, 0);

    if (phErrorNode)
        *phErrorNode = NULL;
    if (logBuffer && bufferSize > 0)
        logBuffer[0] = '\0';
    return r;
}

SIM_EXPORT CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                       CUgraphNode *phErrorNode, char *logBuffer, size_t bufferSize)
{
    return graph_instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_EXPORT CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                          CUgraphNode *phErrorNode, char *logBuffer,
                                          size_t bufferSize)
{
    return graph_instantiate_legacy(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIM_EXPORT CUresult cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    struct CUgraphExec_st **pp;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_VALUE;
    for (pp = &sim_drv.execs; *pp; pp = &(*pp)->next) {
        if (*pp == hGraphExec) {
            struct CUgraphExec_st *e = *pp;
            *pp = e->next;
            free(e->durs);
            free(e->events);
            free(e);
            r = CUDA_SUCCESS;
            break;
        }
    }
    sim_leave();
    return r;
}

/* ---- launches --------------------------------------------------------- */

/*
 * Queues a kernel on s that takes dur_ns on the whole device and runs on sms
 * SMs (0: the whole device; a graph's stretches are scaled already), or
 * records it into the graph s is capturing. Under the lock.
 */
static CUresult enqueue(struct CUstream_st *s, uint64_t dur_ns, unsigned sms)
{
    uint64_t start;

    if (s->capture) {
        if (s->capture_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
            return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        return graph_add_node(s->capture, sim_scale_duration(dur_ns, sms), NULL)
                   ? CUDA_SUCCESS
                   : CUDA_ERROR_OUT_OF_MEMORY;
    }
    s->tail_ns = sim_state_launch(&sim_drv.st, sim_phys(s->ctx->dev), sim_stream_wait_point(s),
                                  dur_ns, sms, sim_mps_client(), &start);
    return CUDA_SUCCESS;
}

static struct CUevent_st *event_find(CUevent h);

/* A launched graph's event record nodes record their events where they fall in its stretch. */
static void graph_record_events(const struct CUgraphExec_st *e, uint64_t start)
{
    uint64_t t = start;

    for (size_t i = 0; i < e->nnodes; i++) {
        struct CUevent_st *ev = e->events[i] ? event_find(e->events[i]) : NULL;

        t += e->durs[i];
        if (ev) {
            ev->ts_ns = t;
            ev->recorded = 1;
            ev->captured = NULL;
        }
    }
}

static CUresult graph_launch(CUgraphExec h, CUstream hStream, int ptds)
{
    struct CUgraphExec_st *e;
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    for (e = sim_drv.execs; e && e != h; e = e->next)
        ;
    if (!e) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if ((r = sim_stream_get(hStream, ptds, &s)) == CUDA_SUCCESS) {
        if (s->capture) {
            for (size_t i = 0; i < e->nnodes && r == CUDA_SUCCESS; i++) {
                if (!e->events[i])
                    r = enqueue(s, e->durs[i], 0);
                else if (s->capture_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
                    r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
                else if (!graph_add_node(s->capture, 0, e->events[i]))
                    r = CUDA_ERROR_OUT_OF_MEMORY;
            }
        } else if ((r = enqueue(s, e->total_ns, 0)) == CUDA_SUCCESS) {
            /* One stretch for the whole graph: its kernels run back to back. */
            graph_record_events(e, s->tail_ns - e->total_ns);
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 0);
}

SIM_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    return graph_launch(hGraphExec, hStream, 1);
}

struct launch {
    CUfunction f;
    unsigned grid[3], block[3];
    unsigned shared;
    CUstream stream;
    int ptds;
    int cooperative;
    uint64_t cluster; /* blocks in one thread-block cluster, 1 for none */
    int both_params;  /* kernelParams and extra both given */
};

static CUresult launch(const struct launch *l)
{
    struct CUctx_st *c;
    struct CUfunc_st *f;
    struct CUstream_st *s;
    uint64_t threads, blocks;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    threads = (uint64_t)l->block[0] * l->block[1] * l->block[2];
    blocks = (uint64_t)l->grid[0] * l->grid[1] * l->grid[2];
    if (!(f = func_find(l->f)) || f->mod->ctx != c) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (blocks == 0 || threads == 0 || threads > 1024 || l->block[2] > 64 ||
               l->grid[1] > 65535 || l->grid[2] > 65535 || l->shared > SIM_MAX_SHARED_PER_BLOCK ||
               l->both_params) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (l->cooperative &&
               blocks > (uint64_t)sim_drv.cfg.sms * (2048 / threads < 32 ? 2048 / threads : 32)) {
        /* Cooperative grids must be co-resident: at most what the SMs hold at once. */
        r = CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE;
    } else if ((r = sim_stream_get(l->stream, l->ptds, &s)) == CUDA_SUCCESS) {
        if (s->ctx != c)
            r = CUDA_ERROR_INVALID_HANDLE;
        else if (l->cluster > 1 && l->cluster > stream_cluster(s))
            r = CUDA_ERROR_INVALID_CLUSTER_SIZE; /* as the H200 refuses it, never a hang */
        else
            r = enqueue(s, f->dur_ns, stream_sms(s));
    }
    sim_leave();
    return r;
}

#define LAUNCH_ARGS                                                                                \
    CUfunction f, unsigned int gridDimX, unsigned int gridDimY, unsigned int gridDimZ,             \
        unsigned int blockDimX, unsigned int blockDimY, unsigned int blockDimZ,                    \
        unsigned int sharedMemBytes, CUstream hStream

#define LAUNCH_INIT(ptds_, coop_, both_)                                                           \
    {                                                                                              \
        .f = f, .grid = { gridDimX, gridDimY, gridDimZ },                                          \
        .block = { blockDimX, blockDimY, blockDimZ }, .shared = sharedMemBytes, .stream = hStream, \
        .ptds = ptds_, .cooperative = coop_, .both_params = both_                                  \
    }

SIM_EXPORT CUresult cuLaunchKernel(LAUNCH_ARGS, void **kernelParams, void **extra)
{
    struct launch l = LAUNCH_INIT(0, 0, kernelParams && extra);
    return launch(&l);
}

SIM_EXPORT CUresult cuLaunchKernel_ptsz(LAUNCH_ARGS, void **kernelParams, void **extra)
{
    struct launch l = LAUNCH_INIT(1, 0, kernelParams && extra);
    return launch(&l);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel(LAUNCH_ARGS, void **kernelParams)
{
    struct launch l = LAUNCH_INIT(0, 1, 0);
    (void)kernelParams;
    return launch(&l);
}

SIM_EXPORT CUresult cuLaunchCooperativeKernel_ptsz(LAUNCH_ARGS, void **kernelParams)
{
    struct launch l = LAUNCH_INIT(1, 1, 0);
    (void)kernelParams;
    return launch(&l);
}

/* Attributes are accepted and ignored except COOPERATIVE and CLUSTER_DIMENSION. */
static CUresult launch_ex(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
                          void **extra, int ptds)
{
    struct launch l;

    if (!config || (config->numAttrs > 0 && !config->attrs))
        return CUDA_ERROR_INVALID_VALUE;
    memset(&l, 0, sizeof(l));
    l.f = f;
    l.grid[0] = config->gridDimX;
    l.grid[1] = config->gridDimY;
    l.grid[2] = config->gridDimZ;
    l.block[0] = config->blockDimX;
    l.block[1] = config->blockDimY;
    l.block[2] = config->blockDimZ;
    l.shared = config->sharedMemBytes;
    l.stream = config->hStream;
    l.ptds = ptds;
    l.both_params = kernelParams && extra;
    l.cluster = 1;
    for (unsigned i = 0; i < config->numAttrs; i++) {
        const CUlaunchAttribute *at = &config->attrs[i];

        if (at->id == CU_LAUNCH_ATTRIBUTE_COOPERATIVE && at->value.cooperative)
            l.cooperative = 1;
        if (at->id == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION) {
            l.cluster =
                (uint64_t)at->value.clusterDim.x * at->value.clusterDim.y * at->value.clusterDim.z;
            /* The grid is whole clusters. */
            if (l.cluster == 0 || l.grid[0] % at->value.clusterDim.x ||
                l.grid[1] % at->value.clusterDim.y || l.grid[2] % at->value.clusterDim.z)
                return CUDA_ERROR_INVALID_CLUSTER_SIZE;
        }
    }
    return launch(&l);
}

SIM_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                     void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, 0);
}

SIM_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                          void **kernelParams, void **extra)
{
    return launch_ex(config, f, kernelParams, extra, 1);
}

/* ---- stream capture --------------------------------------------------- */

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptds)
{
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS) {
        if (s->kind == SIM_STREAM_LEGACY)
            r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED; /* the legacy stream cannot capture */
        else if (s->capture)
            r = CUDA_ERROR_ILLEGAL_STATE;
        else if (!(s->capture = graph_new()))
            r = CUDA_ERROR_OUT_OF_MEMORY;
        else {
            s->capture_status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
            s->capture_mode = mode;
            s->capture_thread = pthread_self();
            sim_drv.captures++;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuStreamBeginCapture(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 0);
}

SIM_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream hStream)
{
    return begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL, 1);
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, 0);
}

SIM_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    return begin_capture(hStream, mode, 1);
}

static CUresult end_capture(CUstream h, CUgraph *phGraph, int ptds)
{
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!phGraph) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS) {
        if (!s->capture) {
            r = CUDA_ERROR_ILLEGAL_STATE;
        } else if (s->capture_mode != CU_STREAM_CAPTURE_MODE_RELAXED &&
                   !pthread_equal(s->capture_thread, pthread_self())) {
            r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
        } else if (s->capture_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED) {
            graph_free(s->capture);
            *phGraph = NULL;
            r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
        } else {
            *phGraph = s->capture;
        }
        if (r != CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD && s->capture) {
            s->capture = NULL;
            s->capture_status = CU_STREAM_CAPTURE_STATUS_NONE;
            sim_drv.captures--;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, 0);
}

SIM_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    return end_capture(hStream, phGraph, 1);
}

static CUresult is_capturing(CUstream h, CUstreamCaptureStatus *status, int ptds)
{
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!status)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS)
        *status = s->capture ? s->capture_status : CU_STREAM_CAPTURE_STATUS_NONE;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus, 0);
}

SIM_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream hStream, CUstreamCaptureStatus *captureStatus)
{
    return is_capturing(hStream, captureStatus, 1);
}

/* ---- events ----------------------------------------------------------- */

static struct CUevent_st *event_find(CUevent h)
{
    for (struct CUevent_st *e = sim_drv.events; e; e = e->next)
        if (e == h)
            return e;
    return NULL;
}

SIM_EXPORT CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags)
{
    struct CUctx_st *c;
    struct CUevent_st *e;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!phEvent || (Flags & ~7u) || ((Flags & 4u) && !(Flags & CU_EVENT_DISABLE_TIMING))) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (!(e = calloc(1, sizeof(*e)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        e->ctx = c;
        e->flags = Flags;
        e->next = sim_drv.events;
        sim_drv.events = e;
        *phEvent = e;
    }
    sim_leave();
    return r;
}

/*
 * The event completes when the work queued before it does. Recorded into a
 * capturing stream it records nothing now: it becomes a node of the graph
 * (recording when the graph runs), and until recorded again outside a
 * capture, querying it is CUDA_ERROR_CAPTURED_EVENT. There is no
 * cross-stream capture (a captured event joins no other stream's work).
 */
static CUresult event_record(CUevent h, CUstream hStream, int ptds)
{
    struct CUevent_st *e;
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(e = event_find(h))) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if ((r = sim_stream_get(hStream, ptds, &s)) == CUDA_SUCCESS) {
        if (s->ctx != e->ctx) {
            r = CUDA_ERROR_INVALID_HANDLE;
        } else if (s->capture) {
            if (s->capture_status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
                r = CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
            else if (!graph_add_node(s->capture, 0, e))
                r = CUDA_ERROR_OUT_OF_MEMORY;
            else
                e->captured = s->capture;
        } else {
            uint64_t now = sim_now_ns(), t = sim_stream_wait_point(s);
            e->ts_ns = t > now ? t : now;
            e->recorded = 1;
            e->captured = NULL;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuEventRecord(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 0);
}

SIM_EXPORT CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream)
{
    return event_record(hEvent, hStream, 1);
}

/*
 * The stream's later work waits for the event's work, whatever context made
 * the event. An event never recorded is complete. Into a capturing stream: an
 * empty node (the simulator has no cross-stream capture).
 */
SIM_EXPORT CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags)
{
    struct CUevent_st *e;
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(e = event_find(hEvent))) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (Flags & ~1u) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if ((r = sim_stream_get(hStream, 0, &s)) == CUDA_SUCCESS) {
        /* (An event of another context is waited on too, as the driver does.) */
        if (s->capture)
            r = graph_add_node(s->capture, 0, NULL) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
        else if (e->recorded && e->ts_ns > s->tail_ns)
            s->tail_ns = e->ts_ns;
    }
    sim_leave();
    return r;
}

/* An event last recorded into a capture cannot be waited on; asking invalidates that capture. */
static CUresult refuse_if_captured(struct CUevent_st *e)
{
    if (!e->captured)
        return CUDA_SUCCESS;
    for (struct CUstream_st *s = sim_drv.streams; s; s = s->next)
        if (s->capture == e->captured)
            s->capture_status = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    return CUDA_ERROR_CAPTURED_EVENT;
}

SIM_EXPORT CUresult cuEventQuery(CUevent hEvent)
{
    struct CUevent_st *e;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(e = event_find(hEvent)))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if ((r = refuse_if_captured(e)) != CUDA_SUCCESS)
        ;
    else if ((r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        ;
    else if (e->recorded && e->ts_ns > sim_now_ns())
        r = CUDA_ERROR_NOT_READY;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuEventSynchronize(CUevent hEvent)
{
    struct CUevent_st *e;
    uint64_t until = 0;
    int dev = 0;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(e = event_find(hEvent))) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if ((r = refuse_if_captured(e)) == CUDA_SUCCESS &&
               (r = sim_capture_check_unsafe()) == CUDA_SUCCESS) {
        until = e->recorded ? e->ts_ns : 0;
        dev = e->ctx->dev;
    }
    sim_leave();
    if (r == CUDA_SUCCESS)
        sim_sync_then_settle(until, dev);
    return r;
}

SIM_EXPORT CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    struct CUevent_st *a, *b;
    uint64_t now;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    now = sim_now_ns();
    if (!pMilliseconds) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (!(a = event_find(hStart)) || !(b = event_find(hEnd)) || !a->recorded ||
               !b->recorded || (a->flags & CU_EVENT_DISABLE_TIMING) ||
               (b->flags & CU_EVENT_DISABLE_TIMING)) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (a->ts_ns > now || b->ts_ns > now) {
        r = CUDA_ERROR_NOT_READY;
    } else {
        *pMilliseconds = (float)(((double)b->ts_ns - (double)a->ts_ns) / 1e6);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd)
{
    return cuEventElapsedTime(pMilliseconds, hStart, hEnd);
}

SIM_EXPORT CUresult cuEventDestroy_v2(CUevent hEvent)
{
    struct CUevent_st **pp;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_HANDLE;
    for (pp = &sim_drv.events; *pp; pp = &(*pp)->next) {
        if (*pp == hEvent) {
            struct CUevent_st *e = *pp;
            *pp = e->next;
            free(e);
            r = CUDA_SUCCESS;
            break;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuEventDestroy(CUevent hEvent)
{
    return cuEventDestroy_v2(hEvent);
}

/* ---- modules ---------------------------------------------------------- */

/*
 * GPUSLICE_SIM_MODULE_BYTES=N: each module loaded holds N bytes of the device's memory until it
 * is unloaded (its code and constants; with lazy loading, a library's kernels come this way on
 * first use): the driver's use for the process grows without an allocation the interposer sees.
 * Default 0.
 */
static CUresult module_new(struct CUctx_st *c, CUmodule *out)
{
    struct CUmod_st *m = calloc(1, sizeof(*m));
    uint64_t bytes = sim_drv.cfg.module_bytes;

    if (!m)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (bytes && sim_state_charge(&sim_drv.st, sim_phys(c->dev), bytes) < 0) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->bytes = bytes;
    m->ctx = c;
    m->next = sim_drv.modules;
    sim_drv.modules = m;
    *out = m;
    return CUDA_SUCCESS;
}

/* Any readable file is a module: there is no code to run. */
SIM_EXPORT CUresult cuModuleLoad(CUmodule *module, const char *fname)
{
    struct CUctx_st *c;
    CUresult r;
    int fd;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!module || !fname) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if ((fd = open(fname, O_RDONLY | O_CLOEXEC)) < 0) {
        r = CUDA_ERROR_FILE_NOT_FOUND;
    } else {
        close(fd);
        r = module_new(c, module);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    r = module && image ? module_new(c, module) : CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

static void module_free(struct CUmod_st *m)
{
    if (m->bytes)
        sim_state_uncharge(&sim_drv.st, sim_phys(m->ctx->dev), m->bytes);
    while (m->funcs) {
        struct CUfunc_st *f = m->funcs;
        m->funcs = f->next;
        free(f);
    }
    free(m);
}

SIM_EXPORT CUresult cuModuleUnload(CUmodule hmod)
{
    struct CUmod_st **pp;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_HANDLE;
    for (pp = &sim_drv.modules; *pp; pp = &(*pp)->next) {
        if (*pp == hmod) {
            struct CUmod_st *m = *pp;
            *pp = m->next;
            module_free(m);
            r = CUDA_SUCCESS;
            break;
        }
    }
    sim_leave();
    return r;
}

/* spin_<N>us, N decimal: N microseconds of device time; any other name: none. */
static uint64_t spin_duration_ns(const char *name)
{
    const char *p = name + 5;
    uint64_t us = 0;
    int digits = 0;

    if (strncmp(name, "spin_", 5) != 0)
        return 0;
    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        if (digits == 12) /* past 11 days of spinning: not a spin kernel */
            return 0;
        us = us * 10 + (uint64_t)(*p - '0');
    }
    if (digits == 0 || strcmp(p, "us") != 0)
        return 0;
    return us * 1000;
}

SIM_EXPORT CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
    struct CUmod_st *m;
    struct CUfunc_st *f = NULL;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    for (m = sim_drv.modules; m && m != hmod; m = m->next)
        ;
    if (!m) {
        r = CUDA_ERROR_INVALID_HANDLE;
    } else if (!hfunc || !name) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        /* The same name gives the same handle, as with the real driver. */
        for (f = m->funcs; f && strcmp(f->name, name) != 0; f = f->next)
            ;
        if (!f && (f = calloc(1, sizeof(*f) + strlen(name) + 1))) {
            f->mod = m;
            f->dur_ns = spin_duration_ns(name);
            strcpy(f->name, name);
            f->next = m->funcs;
            m->funcs = f;
        }
        if (f)
            *hfunc = f;
        else
            r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    sim_leave();
    return r;
}

/* ---- teardown --------------------------------------------------------- */

void sim_exec_drop_ctx(struct CUctx_st *c)
{
    struct CUstream_st **ps = &sim_drv.streams;
    struct CUevent_st **pe = &sim_drv.events;
    struct CUmod_st **pm = &sim_drv.modules;

    while (*ps) {
        struct CUstream_st *s = *ps;
        if (s->ctx == c) {
            *ps = s->next;
            stream_free(s);
        } else {
            ps = &s->next;
        }
    }
    while (*pe) {
        struct CUevent_st *e = *pe;
        if (e->ctx == c) {
            *pe = e->next;
            free(e);
        } else {
            pe = &e->next;
        }
    }
    while (*pm) {
        struct CUmod_st *m = *pm;
        if (m->ctx == c) {
            *pm = m->next;
            module_free(m);
        } else {
            pm = &m->next;
        }
    }
}
