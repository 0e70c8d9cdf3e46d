// sm_threads: many threads of one process working at once on the green context that
// `gpuslice run --sms N` makes current on all of them (NVIDIA documents a green context as
// current to one thread at a time). THREADS threads each run ROUNDS rounds of: create a
// stream, allocate, launch a kernel that records %smid and computes a known result, capture
// that launch in a graph and replay it, copy back, check every value, free, destroy the stream.
// Verdict: no CUDA error, every value right, and every block ran on at most N distinct SMs in
// all (the union over all threads and rounds). Before the threads, on the main thread: the
// device's multiprocessor count is N (the partition's, as gpuslice reports it), and a
// cooperative kernel sized by it (blocks per SM x that count, all resident at once) launches
// and runs on at most N SMs. A cooperative grid sized for the whole GPU is tried too, and what
// the driver answers is printed.
//
// usage: sm_threads N [THREADS] [ROUNDS] [WHOLE]     (run under gpuslice run --sms N;
//        WHOLE: the GPU's real SM count, for the whole-GPU cooperative grid)
#include <pthread.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

#include "check.h"

#define BLOCKS 512
#define THREADS_PER_BLOCK 128

__global__ void work(unsigned *smid, unsigned *val, unsigned seed)
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
    val[i] = i * 2654435761u + seed;
    if (threadIdx.x == 0)
        smid[blockIdx.x] = s;
}

// Every block of a cooperative grid is resident at once; each records its SM.
__global__ void coop(unsigned *smid)
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    if (threadIdx.x == 0)
        smid[blockIdx.x] = s;
}

// Launches coop on blocks blocks; the distinct SMs they ran on, or -1 with *e.
static int coop_launch(int blocks, cudaError_t *e)
{
    unsigned *d = NULL;
    std::vector<unsigned> h(blocks);
    unsigned seen[8] = { 0 };
    void *args[] = { &d };
    int distinct = 0;

    if ((*e = cudaMalloc(&d, blocks * sizeof(unsigned))) != cudaSuccess)
        return -1;
    if ((*e = cudaLaunchCooperativeKernel((void *)coop, blocks, THREADS_PER_BLOCK, args, 0, 0)) !=
            cudaSuccess ||
        (*e = cudaMemcpy(h.data(), d, blocks * sizeof(unsigned), cudaMemcpyDeviceToHost)) !=
            cudaSuccess) {
        cudaGetLastError();
        cudaFree(d);
        return -1;
    }
    cudaFree(d);
    for (int b = 0; b < blocks; b++)
        if (h[b] < 256)
            seen[h[b] / 32] |= 1u << (h[b] % 32);
    for (int w = 0; w < 8; w++)
        distinct += __builtin_popcount(seen[w]);
    return distinct;
}

// The multiprocessor count the program is told, and a cooperative launch sized by it.
static void coop_checks(int n, int whole_sms)
{
    int count = 0, per_sm = 0, whole, got;
    cudaError_t e;

    cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, 0);
    cudaDeviceProp prop;
    memset(&prop, 0, sizeof(prop));
    cudaGetDeviceProperties(&prop, 0);
    key("multiprocessor_count", count);
    expect(count == n && prop.multiProcessorCount == n,
           "the device's multiprocessor count is the partition's %d (cudaDeviceGetAttribute %d, "
           "cudaGetDeviceProperties %d)",
           n, count, prop.multiProcessorCount);
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, coop, THREADS_PER_BLOCK, 0);
    if (per_sm > 16)
        per_sm = 16;
    num("coop_blocks_per_sm", per_sm);
    got = coop_launch(per_sm * count, &e);
    expect(got > 0 && got <= n,
           "a cooperative kernel of %d x %d blocks (sized by that count) ran on %d SMs, at most %d "
           "(%s)",
           per_sm, count, got, n, got < 0 ? cudaGetErrorString(e) : "launched");
    if (whole_sms <= count)
        return;
    whole = whole_sms;
    got = coop_launch(per_sm * whole, &e);
    note("a cooperative kernel sized for %d SMs (%d blocks): %s", whole, per_sm * whole,
         got < 0 ? cudaGetErrorString(e) : "launched");
}

struct result {
    int errors;       // CUDA errors
    int wrong;        // wrong values
    char first[160];  // the first problem
    unsigned seen[8]; // bitmap of SM IDs (up to 256)
};

static int rounds = 20;

static void fail_at(result *r, const char *what, cudaError_t e)
{
    if (r->errors++ == 0)
        snprintf(r->first, sizeof(r->first), "%s: %s", what, cudaGetErrorString(e));
}

static void *thread_main(void *arg)
{
    result *r = (result *)arg;
    const size_t nv = BLOCKS * THREADS_PER_BLOCK;
    std::vector<unsigned> smid(BLOCKS), val(nv);
    cudaError_t e;

    for (int k = 0; k < rounds; k++) {
        cudaStream_t s;
        unsigned *d_smid, *d_val;
        cudaGraph_t g;
        cudaGraphExec_t ge;
        unsigned seed = (unsigned)(uintptr_t)r * 31u + (unsigned)k;
        if ((e = cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)) != cudaSuccess) {
            fail_at(r, "cudaStreamCreate", e);
            return NULL;
        }
        if ((e = cudaMallocAsync(&d_val, nv * sizeof(unsigned), s)) != cudaSuccess ||
            (e = cudaMalloc(&d_smid, BLOCKS * sizeof(unsigned))) != cudaSuccess) {
            fail_at(r, "allocation", e);
            return NULL;
        }
        work<<<BLOCKS, THREADS_PER_BLOCK, 0, s>>>(d_smid, d_val, seed);
        // The same launch captured in a graph (seed + 1) and replayed.
        if ((e = cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal)) != cudaSuccess) {
            fail_at(r, "cudaStreamBeginCapture", e);
            return NULL;
        }
        work<<<BLOCKS, THREADS_PER_BLOCK, 0, s>>>(d_smid, d_val, seed + 1);
        if ((e = cudaStreamEndCapture(s, &g)) != cudaSuccess ||
            (e = cudaGraphInstantiate(&ge, g, 0)) != cudaSuccess ||
            (e = cudaGraphLaunch(ge, s)) != cudaSuccess) {
            fail_at(r, "graph", e);
            return NULL;
        }
        if ((e = cudaMemcpyAsync(val.data(), d_val, nv * sizeof(unsigned), cudaMemcpyDeviceToHost,
                                 s)) != cudaSuccess ||
            (e = cudaMemcpyAsync(smid.data(), d_smid, BLOCKS * sizeof(unsigned),
                                 cudaMemcpyDeviceToHost, s)) != cudaSuccess ||
            (e = cudaStreamSynchronize(s)) != cudaSuccess) {
            fail_at(r, "copy back", e);
            return NULL;
        }
        for (size_t i = 0; i < nv; i++) {
            if (val[i] != (unsigned)i * 2654435761u + seed + 1) {
                if (r->wrong++ == 0 && r->errors == 0)
                    snprintf(r->first, sizeof(r->first), "value %zu: %u", i, val[i]);
                break;
            }
        }
        for (int b = 0; b < BLOCKS; b++)
            if (smid[b] < 256)
                r->seen[smid[b] / 32] |= 1u << (smid[b] % 32);
        cudaGraphExecDestroy(ge);
        cudaGraphDestroy(g);
        cudaFreeAsync(d_val, s);
        cudaFree(d_smid);
        if ((e = cudaStreamDestroy(s)) != cudaSuccess) {
            fail_at(r, "cudaStreamDestroy", e);
            return NULL;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    check_init();
    if (argc < 2) {
        fprintf(stderr, "usage: sm_threads N [THREADS] [ROUNDS] [WHOLE]\n");
        return 2;
    }
    int n = atoi(argv[1]), nt = argc > 2 ? atoi(argv[2]) : 16;
    rounds = argc > 3 ? atoi(argv[3]) : 20;
    int whole_sms = argc > 4 ? atoi(argv[4]) : 0;
    if (n < 1 || nt < 1 || nt > 256 || rounds < 1 || whole_sms < 0) {
        fprintf(stderr, "sm_threads: bad arguments\n");
        return 2;
    }
    cudaFree(0); // the context, on the main thread first
    coop_checks(n, whole_sms);
    std::vector<result> res(nt);
    std::vector<pthread_t> th(nt);
    memset(res.data(), 0, sizeof(result) * nt);
    for (int i = 0; i < nt; i++)
        pthread_create(&th[i], NULL, thread_main, &res[i]);
    for (int i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    unsigned seen[8] = { 0 };
    int errors = 0, wrong = 0, distinct = 0;
    const char *first = NULL;
    for (int i = 0; i < nt; i++) {
        errors += res[i].errors;
        wrong += res[i].wrong;
        if (!first && res[i].first[0])
            first = res[i].first;
        for (int w = 0; w < 8; w++)
            seen[w] |= res[i].seen[w];
    }
    for (int w = 0; w < 8; w++)
        distinct += __builtin_popcount(seen[w]);
    key("threads", nt);
    key("rounds", rounds);
    key("distinct_sms", distinct);
    num("cuda_errors", errors);
    num("wrong_values", wrong);
    expect(errors == 0,
           "%d threads x %d rounds (stream, allocation, launch, graph capture and "
           "replay, copy) without a CUDA error (%d; first: %s)",
           nt, rounds, errors, first ? first : "none");
    expect(wrong == 0, "every value the kernels computed is right (%d rounds wrong)", wrong);
    expect(distinct > 0 && distinct <= n,
           "all blocks of all threads ran on %d distinct SMs, at "
           "most %d",
           distinct, n);
    return check_done();
}
