// Does a thread-block cluster launch run on a green context's stream, and on which split?
// The yield partition of issue 15 (src/preload/compute/route.c) moves a lower class's kernels
// onto a green context of about half the SMs; cuBLAS's Hopper GEMMs are cluster launches
// (cuLaunchKernelEx with a cluster dimension). Asked of the real driver, one case per
// process (a cluster that can never be co-scheduled could hang its stream):
//   green_cluster fine|coarse|none CLUSTER
//     fine:   66 SMs from the split that ignores co-scheduling (2-SM groups);
//     coarse: 64 SMs in co-scheduled groups (the split without that flag, 8 SMs each);
//     none:   the primary context's own stream (the whole device), for comparison.
// Each block of a grid of 256 meets its cluster at a barrier (cluster.sync(), which needs the
// whole cluster resident at once) and writes its SM. Prints one JSON object: the launch's
// result, whether it finished within 5 s, and the distinct SMs used.
// Build: nvcc -O2 -arch=sm_90 -o green_cluster bench/green_cluster.cu -lcuda
// Run:   for p in none fine coarse; do for c in 1 2 4 8 16; do
//          timeout 20 ./green_cluster $p $c; done; done
#include <chrono>
#include <cooperative_groups.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <cuda.h>
#include <cuda_runtime.h>
#include <set>
#include <unistd.h>
#include <vector>

namespace cg = cooperative_groups;

__global__ void clustered(unsigned *smid)
{
    cg::cluster_group c = cg::this_cluster();
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    c.sync();
    if (threadIdx.x == 0)
        smid[blockIdx.x] = s;
}

static const int BLOCKS = 256;

static void fail(const char *what, const char *part, int cluster, const char *name)
{
    printf("{\"partition\": \"%s\", \"cluster\": %d, \"error\": \"%s: %s\"}\n", part, cluster,
           what, name);
    exit(1);
}

#define CK(x)                                                                                     \
    do {                                                                                          \
        CUresult r_ = (x);                                                                        \
        if (r_ != CUDA_SUCCESS) {                                                                 \
            const char *n_ = "?";                                                                 \
            cuGetErrorName(r_, &n_);                                                              \
            fail(#x, part, cluster, n_);                                                          \
        }                                                                                         \
    } while (0)

int main(int argc, char **argv)
{
    if (argc != 3 || (strcmp(argv[1], "fine") && strcmp(argv[1], "coarse") &&
                      strcmp(argv[1], "none"))) {
        fprintf(stderr, "usage: green_cluster fine|coarse|none CLUSTER\n");
        return 2;
    }
    const char *part = argv[1];
    int cluster = atoi(argv[2]);
    if (cluster < 1 || BLOCKS % cluster) {
        fprintf(stderr, "green_cluster: CLUSTER must divide %d\n", BLOCKS);
        return 2;
    }
    cudaSetDevice(0);
    cudaFree(0);
    CUdevice dev;
    CK(cuDeviceGet(&dev, 0));
    CUstream st = NULL;
    unsigned sms = 0;
    if (strcmp(part, "none") == 0) {
        CK(cuStreamCreate(&st, CU_STREAM_NON_BLOCKING));
        CUdevResource all;
        CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
        sms = all.sm.smCount;
    } else {
        CUdevResource all, groups[132], rest;
        unsigned n = 132;
        int fine = strcmp(part, "fine") == 0;
        CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
        CK(cuDevSmResourceSplitByCount(groups, &n, &all, &rest,
                                       fine ? CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING : 0,
                                       1));
        unsigned want = fine ? 66 : 64, k = 0;
        while (k < n && sms < want)
            sms += groups[k++].sm.smCount;
        CUdevResourceDesc desc;
        CUgreenCtx g;
        CK(cuDevResourceGenerateDesc(&desc, groups, k));
        CK(cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
        CK(cuGreenCtxStreamCreate(&st, g, CU_STREAM_NON_BLOCKING, 0));
    }
    if (cluster > 8 &&
        cudaFuncSetAttribute(clustered, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) !=
            cudaSuccess)
        fail("cudaFuncSetAttribute", part, cluster, "refused");
    unsigned *d;
    cudaMalloc(&d, BLOCKS * sizeof(unsigned));
    cudaMemset(d, 0xff, BLOCKS * sizeof(unsigned));
    cudaDeviceSynchronize();
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeClusterDimension;
    at[0].val.clusterDim.x = cluster;
    at[0].val.clusterDim.y = 1;
    at[0].val.clusterDim.z = 1;
    cfg.gridDim = dim3(BLOCKS);
    cfg.blockDim = dim3(128);
    cfg.stream = (cudaStream_t)st;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cudaError_t lr = cudaLaunchKernelEx(&cfg, clustered, d);
    int done = 0;
    auto t0 = std::chrono::steady_clock::now();
    CUresult q = CUDA_ERROR_NOT_READY;
    if (lr == cudaSuccess)
        while ((q = cuStreamQuery(st)) == CUDA_ERROR_NOT_READY &&
               std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
            ;
    done = lr == cudaSuccess && q == CUDA_SUCCESS;
    std::set<unsigned> seen;
    if (done) {
        std::vector<unsigned> h(BLOCKS);
        cudaMemcpy(h.data(), d, BLOCKS * sizeof(unsigned), cudaMemcpyDeviceToHost);
        for (unsigned x : h)
            seen.insert(x);
    }
    const char *qn = "?";
    cuGetErrorName(q, &qn);
    printf("{\"partition\": \"%s\", \"sms\": %u, \"cluster\": %d, \"launch\": \"%s\", "
           "\"query\": \"%s\", \"finished\": %s, \"distinct_sms\": %zu}\n",
           part, sms, cluster, cudaGetErrorName(lr), qn, done ? "true" : "false", seen.size());
    fflush(stdout);
    if (!done && lr == cudaSuccess)
        _exit(3); // a stream that never finishes: leave without waiting on it
    return 0;
}
