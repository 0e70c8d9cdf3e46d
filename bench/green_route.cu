// Can one process move single launches onto a green context while the primary context stays
// current? The facts the priority mechanism of issue 15 stands on, asked of the real driver:
//  A. a kernel of the CUDA runtime launched (<<<>>>) onto a stream of a green context made
//     from the device's SMs runs on that partition only (%smid), with the primary current;
//  B. the same through the driver (cuLaunchKernel) with a CUfunction of a module loaded in
//     the primary context (cuModuleLoad of a cubin);
//  C. stream order across the two kept by events: primary stream -> green stream -> primary
//     stream, a chain of dependent kernels that checks every step;
//  D. what the four extra calls of a moved launch cost (record, wait, launch, record, wait)
//     against a plain launch, per launch on the host.
// Build: nvcc -O2 -arch=sm_90 -o green_route bench/green_route.cu -lcuda
//        nvcc -arch=sm_90 -cubin -o green_route.cubin bench/green_route.cu
// Run:   ./green_route green_route.cubin   (prints one JSON object)
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cuda.h>
#include <cuda_runtime.h>
#include <vector>

extern "C" __global__ void smk(unsigned *smid, int spin)
{
    unsigned s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    if (threadIdx.x == 0)
        smid[blockIdx.x] = s;
    long long t0 = clock64();
    while (clock64() - t0 < spin)
        ;
}

extern "C" __global__ void step(int *v, int want, int next)
{
    if (threadIdx.x == 0 && blockIdx.x == 0)
        v[0] = v[0] == want ? next : -1000000 - v[0];
}

extern "C" __global__ void nothing() {}

#define CK(x)                                                                                     \
    do {                                                                                          \
        CUresult r_ = (x);                                                                        \
        if (r_ != CUDA_SUCCESS) {                                                                 \
            const char *n_ = "?";                                                                 \
            cuGetErrorName(r_, &n_);                                                              \
            printf("{\"error\": \"%s: %s (line %d)\"}\n", #x, n_, __LINE__);                      \
            exit(1);                                                                              \
        }                                                                                         \
    } while (0)

static const int BLOCKS = 1024;

static void smrange(unsigned *d, unsigned *lo, unsigned *hi, unsigned *distinct)
{
    std::vector<unsigned> h(BLOCKS);
    cudaMemcpy(h.data(), d, BLOCKS * sizeof(unsigned), cudaMemcpyDeviceToHost);
    unsigned seen[8] = {0};
    *lo = 1u << 30;
    *hi = 0;
    for (unsigned x : h) {
        if (x < *lo)
            *lo = x;
        if (x > *hi)
            *hi = x;
        if (x < 256)
            seen[x / 32] |= 1u << (x % 32);
    }
    *distinct = 0;
    for (unsigned w : seen)
        *distinct += __builtin_popcount(w);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: green_route CUBIN\n");
        return 2;
    }
    cudaSetDevice(0);
    cudaFree(0);
    CUcontext prim;
    CK(cuCtxGetCurrent(&prim));
    CUdevice dev;
    CK(cuCtxGetDevice(&dev));

    CUdevResource all, groups[64], rest;
    unsigned n = 64;
    CK(cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM));
    CK(cuDevSmResourceSplitByCount(groups, &n, &all, &rest, 0, 8));
    unsigned want = n / 2;
    CUdevResourceDesc desc;
    CK(cuDevResourceGenerateDesc(&desc, groups, want));
    CUgreenCtx green;
    CK(cuGreenCtxCreate(&green, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM));
    CUdevResource got;
    CK(cuGreenCtxGetDevResource(green, &got, CU_DEV_RESOURCE_TYPE_SM));
    CUstream gs;
    CK(cuGreenCtxStreamCreate(&gs, green, CU_STREAM_NON_BLOCKING, 0));
    CUcontext cur;
    CK(cuCtxGetCurrent(&cur));

    unsigned *d_smid;
    cudaMalloc(&d_smid, BLOCKS * sizeof(unsigned));
    unsigned lo[3], hi[3], dist[3];

    // A: runtime launch onto the green stream, primary current.
    smk<<<BLOCKS, 128, 0, (cudaStream_t)gs>>>(d_smid, 20000);
    cudaError_t ea = cudaStreamSynchronize((cudaStream_t)gs);
    smrange(d_smid, &lo[0], &hi[0], &dist[0]);
    // Reference: the same on a primary stream.
    cudaStream_t ps;
    cudaStreamCreateWithFlags(&ps, cudaStreamNonBlocking);
    smk<<<BLOCKS, 128, 0, ps>>>(d_smid, 20000);
    cudaStreamSynchronize(ps);
    smrange(d_smid, &lo[1], &hi[1], &dist[1]);

    // B: driver launch of a primary-context module's function onto the green stream.
    CUmodule mod;
    CK(cuModuleLoad(&mod, argv[1]));
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, "smk"));
    int spin = 20000;
    void *args[] = {&d_smid, &spin};
    CUresult rb = cuLaunchKernel(f, BLOCKS, 1, 1, 128, 1, 1, 0, gs, args, NULL);
    CUresult rbs = cuStreamSynchronize(gs);
    smrange(d_smid, &lo[2], &hi[2], &dist[2]);

    // C: order kept by events, 200 hops primary -> green -> primary.
    int *d_v;
    cudaMalloc(&d_v, sizeof(int));
    cudaMemset(d_v, 0, sizeof(int));
    CUevent e1, e2;
    CK(cuEventCreate(&e1, CU_EVENT_DISABLE_TIMING));
    CK(cuEventCreate(&e2, CU_EVENT_DISABLE_TIMING));
    int val = 0;
    for (int i = 0; i < 200; i++) {
        step<<<1, 32, 0, ps>>>(d_v, val, val + 1);
        val++;
        CK(cuEventRecord(e1, (CUstream)ps));
        CK(cuStreamWaitEvent(gs, e1, 0));
        smk<<<BLOCKS, 128, 0, (cudaStream_t)gs>>>(d_smid, 2000);
        step<<<1, 32, 0, (cudaStream_t)gs>>>(d_v, val, val + 1);
        val++;
        CK(cuEventRecord(e2, gs));
        CK(cuStreamWaitEvent((CUstream)ps, e2, 0));
    }
    step<<<1, 32, 0, ps>>>(d_v, val, val + 1);
    val++;
    cudaStreamSynchronize(ps);
    int hv = 0;
    cudaMemcpy(&hv, d_v, sizeof(int), cudaMemcpyDeviceToHost);

    // D: host cost per launch, plain vs moved (events around it), 20000 each, interleaved x5.
    double plain_us = 0, moved_us = 0;
    const int N = 20000;
    for (int round = 0; round < 5; round++) {
        cudaStreamSynchronize(ps);
        auto t0 = std::chrono::steady_clock::now();
        for (int i = 0; i < N; i++)
            nothing<<<1, 32, 0, ps>>>();
        auto t1 = std::chrono::steady_clock::now();
        cudaStreamSynchronize(ps);
        auto t2 = std::chrono::steady_clock::now();
        for (int i = 0; i < N; i++) {
            cuEventRecord(e1, (CUstream)ps);
            cuStreamWaitEvent(gs, e1, 0);
            nothing<<<1, 32, 0, (cudaStream_t)gs>>>();
            cuEventRecord(e2, gs);
            cuStreamWaitEvent((CUstream)ps, e2, 0);
        }
        auto t3 = std::chrono::steady_clock::now();
        cudaStreamSynchronize(ps);
        plain_us += std::chrono::duration<double, std::micro>(t1 - t0).count() / N / 5;
        moved_us += std::chrono::duration<double, std::micro>(t3 - t2).count() / N / 5;
    }
    cudaError_t ee = cudaDeviceSynchronize();
    const char *nb = "?", *nbs = "?";
    cuGetErrorName(rb, &nb);
    cuGetErrorName(rbs, &nbs);
    printf("{\"device_sms\": %u, \"green_sms\": %u, \"primary_still_current\": %s,\n"
           " \"A_runtime_launch\": {\"error\": \"%s\", \"smid_lo\": %u, \"smid_hi\": %u, "
           "\"distinct\": %u},\n"
           " \"primary_stream\": {\"smid_lo\": %u, \"smid_hi\": %u, \"distinct\": %u},\n"
           " \"B_driver_module\": {\"launch\": \"%s\", \"sync\": \"%s\", \"smid_lo\": %u, "
           "\"smid_hi\": %u, \"distinct\": %u},\n"
           " \"C_order\": {\"want\": %d, \"got\": %d},\n"
           " \"D_host_us_per_launch\": {\"plain\": %.3f, \"moved\": %.3f},\n"
           " \"final\": \"%s\"}\n",
           all.sm.smCount, got.sm.smCount, cur == prim ? "true" : "false",
           cudaGetErrorName(ea), lo[0], hi[0], dist[0], lo[1], hi[1], dist[1], nb, nbs, lo[2],
           hi[2], dist[2], val, hv, plain_us, moved_us, cudaGetErrorName(ee));
    return 0;
}
