// The in-process C API on a GPU: gpuslice_lanes_run with one lane per weight, each running a
// compute-bound FMA kernel back to back on its own thread (CUDA runtime, the lane's NULL stream)
// for SECONDS; then the same kernel alone on the whole GPU (one lane of weight 1). Prints each
// lane's SM count, throughput and share of the lanes' sum beside its share of the SMs, and the
// sum beside the whole GPU alone, and the multiprocessor count the CUDA runtime gives on each
// lane's thread, which must be the lane's own (libraries size their grids by it).
// Exit status 1 if a share is more than 2 points off or the runtime gives another count.
//
// build: nvcc -O2 -arch=sm_90 -I include -o lanes_api bench/lanes_api.cu -L build/lib -lgpuslice
//        -Xlinker -rpath=build/lib
// usage: lanes_api [--seconds S] W1 W2 ...
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

#include <cuda_runtime.h>

#include "gpuslice/gpuslice.h"

__global__ void fma_loop(float *out, int iters)
{
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f;
    for (int i = 0; i < iters; i++) {
        a = fmaf(a, b, c);
        b = fmaf(b, c, a);
    }
    if (a == 12345.678f) // never: keeps the loop
        out[blockIdx.x] = b;
}

static double now_s()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct job {
    double seconds;
    double kernels_per_s;
    const char *error;
    int told; // the multiprocessor count the runtime gives on the lane's thread
};

static int lane(int i, const gpuslice_lane *info, void *arg)
{
    job *j = (job *)arg;
    float *out;
    const int blocks = 8192, iters = 4096;
    (void)i;
    (void)info;
    cudaDeviceGetAttribute(&j->told, cudaDevAttrMultiProcessorCount, 0);
    if (cudaMalloc(&out, blocks * sizeof(float)) != cudaSuccess) {
        j->error = "cudaMalloc failed";
        return 1;
    }
    fma_loop<<<blocks, 256>>>(out, iters); // warm-up
    cudaDeviceSynchronize();
    long n = 0;
    double t0 = now_s(), t;
    do {
        for (int k = 0; k < 4; k++)
            fma_loop<<<blocks, 256>>>(out, iters);
        cudaStreamSynchronize(0);
        n += 4;
        t = now_s();
    } while (t - t0 < j->seconds);
    j->kernels_per_s = n / (t - t0);
    cudaFree(out);
    if (cudaGetLastError() != cudaSuccess) {
        j->error = "a launch failed";
        return 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    double w[GPUSLICE_LANES_MAX], seconds = 3;
    int n = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc)
            seconds = atof(argv[++i]);
        else if (n < GPUSLICE_LANES_MAX)
            w[n++] = atof(argv[i]);
    }
    if (n < 1) {
        fprintf(stderr, "usage: lanes_api [--seconds S] W1 W2 ...\n");
        return 2;
    }
    gpuslice_lane lanes[GPUSLICE_LANES_MAX], whole[1];
    job jobs[GPUSLICE_LANES_MAX], solo = { seconds, 0, NULL, 0 };
    void *args[GPUSLICE_LANES_MAX], *solo_arg[1] = { &solo };
    char err[512] = "";
    for (int i = 0; i < n; i++) {
        jobs[i] = job{ seconds, 0, NULL, 0 };
        args[i] = &jobs[i];
    }
    double one = 1;
    int rc = gpuslice_lanes_run(0, 1, &one, lane, solo_arg, whole, err, sizeof(err));
    if (rc < 0 || whole[0].result) {
        fprintf(stderr, "lanes_api: the whole GPU: %s\n", rc < 0 ? err : solo.error);
        return 1;
    }
    rc = gpuslice_lanes_run(0, n, w, lane, args, lanes, err, sizeof(err));
    if (rc < 0) {
        fprintf(stderr, "lanes_api: %s\n", err);
        return 1;
    }
    unsigned sms = 0;
    double sum = 0;
    for (int i = 0; i < n; i++) {
        if (lanes[i].result) {
            fprintf(stderr, "lanes_api: lane %d: %s\n", i, jobs[i].error);
            return 1;
        }
        sms += lanes[i].sm_count;
        sum += jobs[i].kernels_per_s;
    }
    printf("gpuslice_lanes_run on GPU 0, %d lanes, an FMA kernel (8192 blocks of 256 threads) "
           "back to back for %g s; the whole GPU alone (one lane): %.1f kernels/s on %u SMs.\n\n",
           n, seconds, solo.kernels_per_s, whole[0].sm_count);
    printf("| lane | weight | SMs (reported) | SMs the runtime gives | SM share | kernels/s | "
           "throughput share | verdict |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    int ok = 1;
    for (int i = 0; i < n; i++) {
        double sm_share = 100.0 * lanes[i].sm_count / sms,
               share = 100.0 * jobs[i].kernels_per_s / sum;
        // The runtime must give the lane's own count: libraries size their grids by it.
        int good = std::fabs(share - sm_share) <= 2.0 && jobs[i].told == (int)lanes[i].sm_count;
        ok &= good;
        printf("| %d | %g | %u (from SM %u) | %d | %.2f %% | %.1f | %.2f %% | %s |\n", i,
               lanes[i].weight, lanes[i].sm_count, lanes[i].first_sm, jobs[i].told, sm_share,
               jobs[i].kernels_per_s, share, good ? "PASS" : "FAIL");
    }
    printf("\nTogether %.1f kernels/s = %.1f %% of the whole GPU alone; lane 1 / lane 0 throughput "
           "%.3f for SMs %.3f.\n",
           sum, 100.0 * sum / solo.kernels_per_s,
           n > 1 ? jobs[1].kernels_per_s / jobs[0].kernels_per_s : 1.0,
           n > 1 ? (double)lanes[1].sm_count / lanes[0].sm_count : 1.0);
    return ok ? 0 : 1;
}
