/*
 * Runtime-API memory-limit check. Run under a gpuslice limit of LIMIT bytes, it checks
 * that cudaMemGetInfo reports the limit as total, that cudaMalloc in 256 MiB steps is
 * refused with cudaErrorMemoryAllocation exactly when a block would cross the limit,
 * that kernels still launch and compute correctly with the memory nearly full, and
 * that freed memory (cudaFree, cudaFreeAsync) can be allocated again. libcudart reaches
 * the driver through cuGetProcAddress, so this exercises that path of the interposer;
 * it is built twice, with the static and the shared cudart.
 *
 * usage: rt_limit LIMIT_BYTES     (output follows check.h; exit 1 when an assertion failed)
 */
#include <cuda_runtime.h>
#include <string.h>

#include "check.h"

#define STEP ((size_t)256 << 20)
#define SLACK ((size_t)2 << 20)
#define MAX_BLOCKS 4096
#define N_INTS (1 << 20)

static int rt_ok(cudaError_t e, const char *what, int line)
{
    if (e == cudaSuccess)
        return 1;
    expect(0, "line %d: %s returned %d (%s)", line, what, (int)e, cudaGetErrorName(e));
    return 0;
}
#define RT(call) rt_ok((call), #call, __LINE__)

__global__ void fill(int *p, int n, int base)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        p[i] = base + 3 * i;
}

static size_t absdiff(size_t a, size_t b)
{
    return a > b ? a - b : b - a;
}

static size_t mem_free(size_t *total)
{
    size_t f = 0, t = 0;
    RT(cudaMemGetInfo(&f, &t));
    if (total)
        *total = t;
    return f;
}

/* Launches fill() into dev (N_INTS ints) and checks every element on the host. */
static void check_kernel(int *dev, const char *when)
{
    static int host[N_INTS];
    int i, bad = 0, base = 17;

    fill<<<(N_INTS + 255) / 256, 256>>>(dev, N_INTS, base);
    if (!RT(cudaGetLastError()) || !RT(cudaDeviceSynchronize()))
        return;
    if (!RT(cudaMemcpy(host, dev, sizeof host, cudaMemcpyDeviceToHost)))
        return;
    for (i = 0; i < N_INTS; i++)
        bad += host[i] != base + 3 * i;
    expect(bad == 0, "a kernel launched %s wrote all %d values correctly (%d wrong)", when, N_INTS,
           bad);
}

int main(int argc, char **argv)
{
    static void *p[MAX_BLOCKS];
    size_t limit, f0, total, f, max, n = 0, i, again = 0, used0;
    cudaError_t e = cudaSuccess;
    cudaDeviceProp prop;
    cudaStream_t s;
    void *a = NULL;
    char *end;
    int rtv = 0, drv = 0;

    check_init();
    if (argc != 2 || !(limit = strtoull(argv[1], &end, 10)) || *end) {
        fprintf(stderr, "usage: rt_limit LIMIT_BYTES\n");
        return 2;
    }
    if (!RT(cudaSetDevice(0)) || !RT(cudaFree(0)))
        return check_done();
    RT(cudaRuntimeGetVersion(&rtv));
    RT(cudaDriverGetVersion(&drv));
    num("cudart_version", rtv);
    num("driver_version", drv);
    if (RT(cudaGetDeviceProperties(&prop, 0)))
        num("totalGlobalMem_MiB", prop.totalGlobalMem / MiB); /* informational: cuDeviceTotalMem */

    f0 = mem_free(&total);
    used0 = total - f0;
    key("total_bytes", (double)total);
    key("context_MiB", used0 / MiB);
    expect(total == limit, "cudaMemGetInfo total %zu == limit %zu", total, limit);
    expect(f0 < total, "cudaMemGetInfo free %.1f MiB < total: the context is accounted", f0 / MiB);
    if (total != limit || f0 > total)
        return check_done();

    max = limit / STEP + 4;
    if (max > MAX_BLOCKS)
        max = MAX_BLOCKS;
    while (n < max && (e = cudaMalloc(&p[n], STEP)) == cudaSuccess)
        n++;
    (void)cudaGetLastError(); /* the refused cudaMalloc is recorded as the last error */
    f = mem_free(NULL);
    key("cudaMalloc_256MiB_blocks", (double)n);
    num("free_at_oom_MiB", f / MiB);
    expect(n < max, "cudaMalloc(256 MiB) stopped after %zu blocks (the limit allows at most %zu)",
           n, limit / STEP);
    expect(e == cudaErrorMemoryAllocation,
           "the refused cudaMalloc returned cudaErrorMemoryAllocation "
           "(got %d %s)",
           (int)e, cudaGetErrorName(e));
    expect(used0 + n * STEP <= limit, "context %.1f MiB + %zu x 256 MiB <= limit %.1f MiB",
           used0 / MiB, n, limit / MiB);
    expect(f < STEP,
           "free when refused is %.1f MiB < 256 MiB: the block really would have crossed "
           "the limit",
           f / MiB);
    if (n > 0)
        check_kernel((int *)p[n - 1], "with the limit nearly reached");

    for (i = 0; i < n; i++)
        RT(cudaFree(p[i]));
    f = mem_free(NULL);
    expect(absdiff(total - f, used0) <= SLACK,
           "after cudaFree used is %.1f MiB, back to the "
           "context's %.1f MiB",
           (total - f) / MiB, used0 / MiB);
    for (i = 0; i < n; i++) {
        if (!RT(cudaMalloc(&p[i], STEP)))
            break;
        again++;
    }
    expect(again == n, "after freeing, the same %zu blocks allocate again (%zu did)", n, again);
    for (i = 0; i < again; i++)
        RT(cudaFree(p[i]));

    /* Stream-ordered allocation: cudaMallocAsync reaches cuMemAllocAsync. */
    if (RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking))) {
        f0 = mem_free(NULL);
        e = cudaMallocAsync(&a, f0 + STEP, s);
        (void)cudaGetLastError();
        expect(e == cudaErrorMemoryAllocation,
               "cudaMallocAsync(free + 256 MiB) returns "
               "cudaErrorMemoryAllocation (got %d %s)",
               (int)e, cudaGetErrorName(e));
        if (e == cudaSuccess)
            RT(cudaFreeAsync(a, s));
        a = NULL;
        if (RT(cudaMallocAsync(&a, STEP, s))) {
            RT(cudaStreamSynchronize(s));
            check_kernel((int *)a, "into a cudaMallocAsync block");
            RT(cudaFreeAsync(a, s));
        }
        RT(cudaStreamSynchronize(s));
        f = mem_free(NULL);
        expect(absdiff(f, f0) <= 16 * SLACK,
               "after cudaFreeAsync + sync free is back to %.1f MiB "
               "(was %.1f)",
               f / MiB, f0 / MiB);
        RT(cudaStreamDestroy(s));
    }
    return check_done();
}
