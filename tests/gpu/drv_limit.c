/*
 * Driver-API memory-limit check. Run under a gpuslice limit of LIMIT bytes, it checks
 * that cuMemGetInfo reports the limit as total, that each allocation family it tries
 * (cuMemAlloc, cuMemAllocAsync, cuMemCreate, cuMemAllocPitch, and cuMemAlloc in a
 * second context from cuCtxCreate) fails with CUDA_ERROR_OUT_OF_MEMORY exactly when it
 * would cross the limit, and that freed memory can be allocated again.
 *
 * usage: drv_limit LIMIT_BYTES        the checks above
 *        drv_limit --expect-init-fail  passes when cuInit refuses (bad configuration)
 * Output follows check.h; the exit status is 1 when any assertion failed.
 */
#include <cuda.h>
#include <string.h>

#include "cu_check.h"

#define STEP ((size_t)256 << 20)
#define SLACK ((size_t)2 << 20)
#define MAX_BLOCKS 4096

static size_t absdiff(size_t a, size_t b)
{
    return a > b ? a - b : b - a;
}

/* cuMemGetInfo in the current context; returns free, stores total. */
static size_t mem_free(size_t *total)
{
    size_t f = 0, t = 0;
    CU(cuMemGetInfo(&f, &t));
    if (total)
        *total = t;
    return f;
}

static void test_mem_alloc(size_t limit, size_t used0)
{
    static CUdeviceptr p[MAX_BLOCKS];
    size_t max = limit / STEP + 4, n = 0, i, total, f, again = 0;
    CUresult r = CUDA_SUCCESS;

    if (max > MAX_BLOCKS)
        max = MAX_BLOCKS;
    while (n < max && (r = cuMemAlloc(&p[n], STEP)) == CUDA_SUCCESS)
        n++;
    f = mem_free(&total);
    key("cuMemAlloc_256MiB_blocks", (double)n);
    num("free_at_oom_MiB", f / MiB);
    expect(n < max,
           "cuMemAlloc(256 MiB) stopped after %zu blocks (a limit of %zu MiB would allow "
           "at most %zu)",
           n, limit >> 20, limit / STEP);
    expect(r == CUDA_ERROR_OUT_OF_MEMORY,
           "the refused cuMemAlloc returned CUDA_ERROR_OUT_OF_MEMORY "
           "(got %d %s)",
           (int)r, errname(r));
    expect(used0 + n * STEP <= limit,
           "context %.1f MiB + %zu x 256 MiB = %.1f MiB <= limit %.1f MiB", used0 / MiB, n,
           (used0 + n * STEP) / MiB, limit / MiB);
    expect(f < STEP,
           "free when refused is %.1f MiB < 256 MiB: the block really would have crossed "
           "the limit",
           f / MiB);
    expect(f <= total && total == limit, "after the refusal free %.1f <= total %.1f MiB == limit",
           f / MiB, total / MiB);
    for (i = 0; i < n; i++)
        CU(cuMemFree(p[i]));
    f = mem_free(NULL);
    num("used_after_free_MiB", (limit - f) / MiB);
    expect(absdiff(limit - f, used0) <= SLACK,
           "after cuMemFree used is %.1f MiB, back to the "
           "context's %.1f MiB",
           (limit - f) / MiB, used0 / MiB);
    for (i = 0; i < n; i++) {
        if (!CU(cuMemAlloc(&p[i], STEP)))
            break;
        again++;
    }
    expect(again == n, "after freeing, the same %zu blocks allocate again (%zu did)", n, again);
    for (i = 0; i < again; i++)
        CU(cuMemFree(p[i]));
}

static void test_mem_alloc_async(size_t limit)
{
    CUstream s;
    CUdeviceptr a = 0, b = 0, c = 0;
    size_t fa, fb, fc, big;
    CUresult r;

    if (!CU(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING)))
        return;
    fa = mem_free(NULL);
    r = cuMemAllocAsync(&a, 512u << 20, s);
    expect(r == CUDA_SUCCESS, "cuMemAllocAsync(512 MiB) under the limit succeeds (got %d %s)",
           (int)r, errname(r));
    CU(cuStreamSynchronize(s));
    fb = mem_free(NULL);
    num("async_512MiB_accounted_MiB", ((double)fa - (double)fb) / MiB);
    expect(fa >= fb && fa - fb >= (512u << 20),
           "cuMemAllocAsync(512 MiB) is accounted: free went "
           "%.1f -> %.1f MiB",
           fa / MiB, fb / MiB);
    big = fb + STEP;
    r = cuMemAllocAsync(&b, big, s);
    expect(r == CUDA_ERROR_OUT_OF_MEMORY,
           "cuMemAllocAsync(free + 256 MiB = %.1f MiB) returns "
           "CUDA_ERROR_OUT_OF_MEMORY (got %d %s)",
           big / MiB, (int)r, errname(r));
    if (r == CUDA_SUCCESS)
        CU(cuMemFreeAsync(b, s));
    if (a)
        CU(cuMemFreeAsync(a, s));
    CU(cuStreamSynchronize(s));
    fc = mem_free(NULL);
    num("async_used_after_free_MiB", (limit - fc) / MiB);
    expect(absdiff(fa, fc) <= 16 * SLACK,
           "after cuMemFreeAsync + cuStreamSynchronize free is back "
           "to %.1f MiB (was %.1f)",
           fc / MiB, fa / MiB);
    /* What the interposer says is free must really be allocatable. */
    big = (fc > STEP ? fc - STEP : 0) & ~(SLACK - 1);
    if (big) {
        r = cuMemAlloc(&c, big);
        expect(r == CUDA_SUCCESS,
               "cuMemAlloc(free - 256 MiB = %.1f MiB) after the async round "
               "succeeds (got %d %s)",
               big / MiB, (int)r, errname(r));
        if (r == CUDA_SUCCESS)
            CU(cuMemFree(c));
    }
    CU(cuStreamDestroy(s));
}

static void test_mem_create(CUdevice dev, size_t limit)
{
    CUmemAllocationProp prop;
    CUmemAccessDesc acc;
    CUmemGenericAllocationHandle h = 0, h2 = 0;
    CUdeviceptr va = 0;
    size_t gran = 0, sz = 512u << 20, f0, f1, f2, over;
    CUresult r;
    int created = 0, reserved = 0, mapped = 0;

    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    if (!CU(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM)) || !gran)
        return;
    num("vmm_granularity_bytes", (double)gran);
    f0 = mem_free(NULL);
    r = cuMemCreate(&h, sz, &prop, 0);
    created = expect(r == CUDA_SUCCESS, "cuMemCreate(512 MiB) under the limit succeeds (got %d %s)",
                     (int)r, errname(r));
    if (created && (reserved = CU(cuMemAddressReserve(&va, sz, 0, 0, 0)))) {
        if ((mapped = CU(cuMemMap(va, sz, 0, h, 0)))) {
            memset(&acc, 0, sizeof acc);
            acc.location = prop.location;
            acc.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            if (CU(cuMemSetAccess(va, sz, &acc, 1)) && CU(cuMemsetD8(va, 0x5a, sz)))
                CU(cuCtxSynchronize());
        }
    }
    f1 = mem_free(NULL);
    num("vmm_512MiB_accounted_MiB", ((double)f0 - (double)f1) / MiB);
    expect(f0 >= f1 && f0 - f1 >= sz,
           "cuMemCreate(512 MiB) is accounted: free went %.1f -> %.1f MiB", f0 / MiB, f1 / MiB);
    over = (f1 + gran + gran - 1) / gran * gran;
    r = cuMemCreate(&h2, over, &prop, 0);
    expect(r == CUDA_ERROR_OUT_OF_MEMORY,
           "cuMemCreate(%.1f MiB, more than the %.1f MiB free) returns "
           "CUDA_ERROR_OUT_OF_MEMORY (got %d %s)",
           over / MiB, f1 / MiB, (int)r, errname(r));
    if (r == CUDA_SUCCESS)
        CU(cuMemRelease(h2));
    if (mapped)
        CU(cuMemUnmap(va, sz));
    if (reserved)
        CU(cuMemAddressFree(va, sz));
    if (created)
        CU(cuMemRelease(h));
    f2 = mem_free(NULL);
    expect(absdiff(f0, f2) <= SLACK,
           "after cuMemUnmap + cuMemRelease free is back to %.1f MiB "
           "(was %.1f)",
           f2 / MiB, f0 / MiB);
    (void)limit;
}

static void test_mem_alloc_pitch(void)
{
    CUdeviceptr p = 0, q = 0;
    size_t pitch = 0, pitch2 = 0, f0, f1, f2, rows = 65536, width = 4000, rows_over;
    CUresult r;

    f0 = mem_free(NULL);
    r = cuMemAllocPitch(&p, &pitch, width, rows, 4);
    if (!expect(r == CUDA_SUCCESS,
                "cuMemAllocPitch(%zu x %zu) under the limit succeeds (got %d %s)", width, rows,
                (int)r, errname(r)))
        return;
    f1 = mem_free(NULL);
    num("pitch_bytes", (double)pitch);
    num("pitch_accounted_MiB", ((double)f0 - (double)f1) / MiB);
    expect(f0 >= f1 && f0 - f1 >= pitch * rows,
           "cuMemAllocPitch is accounted by pitch x height "
           "(%.1f MiB): free went %.1f -> %.1f MiB",
           pitch * rows / MiB, f0 / MiB, f1 / MiB);
    rows_over = f1 / (pitch ? pitch : 1) + 1024;
    r = cuMemAllocPitch(&q, &pitch2, width, rows_over, 4);
    expect(r == CUDA_ERROR_OUT_OF_MEMORY,
           "cuMemAllocPitch of %.1f MiB (more than the %.1f MiB free) "
           "returns CUDA_ERROR_OUT_OF_MEMORY (got %d %s)",
           (double)rows_over * pitch / MiB, f1 / MiB, (int)r, errname(r));
    if (r == CUDA_SUCCESS)
        CU(cuMemFree(q));
    CU(cuMemFree(p));
    f2 = mem_free(NULL);
    expect(absdiff(f0, f2) <= SLACK,
           "after cuMemFree of the pitched block free is back to %.1f MiB "
           "(was %.1f)",
           f2 / MiB, f0 / MiB);
}

/* A second context made by cuCtxCreate sees the same limit and shares it. */
static void test_second_context(CUdevice dev, CUcontext primary, size_t limit)
{
    CUctxCreateParams params;
    CUcontext c = NULL;
    CUdeviceptr p = 0;
    size_t f0, f1, f2, t1 = 0, over;
    CUresult r;

    f0 = mem_free(NULL);
    memset(&params, 0, sizeof params);
    if (!CU(cuCtxCreate(&c, &params, 0, dev)))
        return;
    f1 = mem_free(&t1);
    num("second_context_footprint_MiB", ((double)f0 - (double)f1) / MiB);
    expect(t1 == limit, "in a context from cuCtxCreate cuMemGetInfo total is %zu == limit %zu", t1,
           limit);
    expect(f1 <= f0, "the second context's footprint is accounted: free went %.1f -> %.1f MiB",
           f0 / MiB, f1 / MiB);
    over = ((f1 + STEP) + SLACK - 1) & ~(SLACK - 1);
    r = cuMemAlloc(&p, over);
    expect(r == CUDA_ERROR_OUT_OF_MEMORY,
           "in the second context cuMemAlloc(free + 256 MiB) returns "
           "CUDA_ERROR_OUT_OF_MEMORY (got %d %s)",
           (int)r, errname(r));
    if (r == CUDA_SUCCESS)
        CU(cuMemFree(p));
    CU(cuCtxDestroy(c));
    CU(cuCtxSetCurrent(primary));
    f2 = mem_free(NULL);
    num("free_after_ctx_destroy_MiB", f2 / MiB);
    expect(f2 + 16 * SLACK >= f0, "after cuCtxDestroy free is back to %.1f MiB (was %.1f)",
           f2 / MiB, f0 / MiB);
}

static int expect_init_fail(void)
{
    CUresult r = cuInit(0);
    num("cuInit_result", (double)r);
    printf("cuInit returned %d (%s)\n", (int)r, errname(r));
    expect(r != CUDA_SUCCESS, "with a broken limit configuration cuInit returns an error (got %d)",
           (int)r);
    return check_done();
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    size_t limit, f0, total;
    char *end;

    check_init();
    if (argc == 2 && strcmp(argv[1], "--expect-init-fail") == 0)
        return expect_init_fail();
    if (argc != 2 || !(limit = strtoull(argv[1], &end, 10)) || *end) {
        fprintf(stderr, "usage: drv_limit LIMIT_BYTES | drv_limit --expect-init-fail\n");
        return 2;
    }
    if (!CU(cuInit(0)) || !CU(cuDeviceGet(&dev, 0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, dev)) ||
        !CU(cuCtxSetCurrent(ctx)))
        return check_done();

    f0 = mem_free(&total);
    key("total_bytes", (double)total);
    key("context_MiB", (total - f0) / MiB);
    expect(total == limit, "cuMemGetInfo total %zu == limit %zu", total, limit);
    expect(f0 < total, "cuMemGetInfo free %.1f MiB < total: the context's footprint is accounted",
           f0 / MiB);
    if (total != limit || f0 > total)
        return check_done(); /* nothing below means anything without the limit */

    test_mem_alloc(limit, total - f0);
    test_mem_alloc_async(limit);
    test_mem_create(dev, limit);
    test_mem_alloc_pitch();
    test_second_context(dev, ctx, limit);

    CU(cuDevicePrimaryCtxRelease(dev));
    return check_done();
}
