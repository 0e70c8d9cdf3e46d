/*
 * The small kernel of the compute benchmarks (compute_small.cu, launch_trace.cu): a
 * 64K-element float kernel doing 4 FMAs per element, launched as N_ELEMS / THREADS blocks
 * of THREADS threads, so that both measure the same work.
 */
#ifndef GPUSLICE_BENCH_SMALL_KERNEL_CUH
#define GPUSLICE_BENCH_SMALL_KERNEL_CUH

#define N_ELEMS 65536
#define THREADS 256

__global__ void fma4(float *x, int n, float a, float b)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;

    if (i < n) {
        float v = x[i];
        v = fmaf(v, a, b);
        v = fmaf(v, a, b);
        v = fmaf(v, a, b);
        v = fmaf(v, a, b);
        x[i] = v;
    }
}

#endif
