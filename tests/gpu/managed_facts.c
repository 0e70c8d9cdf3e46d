/*
 * What managed memory costs in device memory on a real GPU, untouched and touched by the device
 * (issue 32: the simulator charged a small cuMemAllocManaged a whole 2 MiB granule at the call,
 * the interposer its size to 512 bytes). Prints one line per step: the drop of the device's free
 * memory (cuMemGetInfo) since the step before, in KiB. Build: nvcc -O2 -o managed_facts
 * managed_facts.c -lcuda. Nothing else runs on the GPU meanwhile for the figures to mean much.
 */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>

static size_t last;

static size_t cu_free(void)
{
    size_t f = 0, t = 0;

    cuCtxSynchronize();
    cuMemGetInfo(&f, &t);
    return f;
}

static void step(const char *what)
{
    size_t f = cu_free();

    printf("%-52s %8lld KiB\n", what, ((long long)last - (long long)f) / 1024);
    last = f;
}

#define CK(x)                                                                                      \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            printf("%s failed: %d\n", #x, (int)r_);                                                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

int main(void)
{
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr small[16], one, mid, big;
    int i, concurrent = -1;

    CK(cuInit(0));
    CK(cuDeviceGet(&dev, 0));
    CK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CK(cuCtxSetCurrent(ctx));
    cuDeviceGetAttribute(&concurrent, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev);
    printf("concurrent managed access: %d\n", concurrent);
    last = cu_free();
    {
        /* The memset's own first use (its module, the context's lazy parts) apart. */
        CUdeviceptr w;

        CK(cuMemAlloc(&w, 2 << 20));
        step("warm-up: cuMemAlloc 2 MiB");
        CK(cuMemsetD8(w, 1, 2 << 20));
        step("warm-up: a first cuMemsetD8 on it");
        CK(cuMemFree(w));
        step("warm-up: freed");
    }
    CK(cuMemAllocManaged(&one, 4000, CU_MEM_ATTACH_GLOBAL));
    step("managed 4000 B, untouched");
    CK(cuMemsetD8(one, 1, 4000));
    step("managed 4000 B, set by the device");
    for (i = 0; i < 16; i++)
        CK(cuMemAllocManaged(&small[i], 4000, CU_MEM_ATTACH_GLOBAL));
    step("16 more managed 4000 B, untouched");
    for (i = 0; i < 16; i++)
        CK(cuMemsetD8(small[i], 1, 4000));
    step("the 16 set by the device");
    CK(cuMemAllocManaged(&mid, 3 << 20, CU_MEM_ATTACH_GLOBAL));
    step("managed 3 MiB, untouched");
    CK(cuMemsetD8(mid, 1, 3 << 20));
    step("managed 3 MiB, set by the device");
    CK(cuMemAllocManaged(&big, 64 << 20, CU_MEM_ATTACH_GLOBAL));
    step("managed 64 MiB, untouched");
    CK(cuMemsetD8(big, 1, 64 << 20));
    step("managed 64 MiB, set by the device");
    CK(cuMemFree(big));
    step("the 64 MiB freed (negative: given back)");
    CK(cuMemFree(mid));
    step("the 3 MiB freed");
    for (i = 0; i < 16; i++)
        CK(cuMemFree(small[i]));
    CK(cuMemFree(one));
    step("the 17 small ones freed");
    {
        CUdeviceptr d;

        CK(cuMemAlloc(&d, 4000));
        step("cuMemAlloc 4000 B (for comparison)");
        CK(cuMemFree(d));
        step("freed");
    }
    cuDevicePrimaryCtxRelease(dev);
    return 0;
}
