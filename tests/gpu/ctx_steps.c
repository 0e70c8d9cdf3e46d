/*
 * Contexts made and destroyed one at a time, for tests/gpu/ctx_agreement.py, which
 * measures the device from outside between the steps. The steps, in order:
 *   primary   cuDevicePrimaryCtxRetain, made current
 *   create2   a second context (cuCtxCreate), current
 *   create3   a third context (cuCtxCreate), current
 *   alloc     cuMemAlloc(256 MiB) in the third
 *   free      cuMemFree of it
 *   destroy3  cuCtxDestroy of the third, the second made current
 *   destroy2  cuCtxDestroy of the second, the primary made current
 * After each step it prints "step NAME" and waits for a line on stdin: "q" is answered
 * "used USED TOTAL" (cuMemGetInfo in the current context: under gpuslice, the tenant's
 * accounted use), "next" goes on, end of input stops. Errors: "error TEXT", exit 1.
 */
#include <cuda.h>
#include <stdio.h>
#include <string.h>

static int fail(const char *what, CUresult r)
{
    const char *s = NULL;
    if (cuGetErrorName(r, &s) != CUDA_SUCCESS || !s)
        s = "?";
    printf("error %s returned %d (%s)\n", what, (int)r, s);
    return 1;
}

/* 0 to go on, 1 at end of input or on an error. */
static int wait_next(const char *name)
{
    char line[64];
    size_t f, t;
    CUresult r;

    printf("step %s\n", name);
    while (fgets(line, sizeof line, stdin)) {
        if (strcmp(line, "next\n") == 0)
            return 0;
        if (strcmp(line, "q\n") != 0) {
            printf("error unknown command %.20s (q or next)\n", line);
            return 1;
        }
        if ((r = cuMemGetInfo(&f, &t)) != CUDA_SUCCESS)
            return fail("cuMemGetInfo", r);
        printf("used %zu %zu\n", t - f, t);
    }
    return 1;
}

#define TRY(call)                                                                                  \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS)                                                                    \
            return fail(#call, r_);                                                                \
    } while (0)

int main(void)
{
    CUdevice dev;
    CUcontext prim, c2, c3;
    CUctxCreateParams params;
    CUdeviceptr p;

    setvbuf(stdout, NULL, _IOLBF, 0);
    memset(&params, 0, sizeof params);
    TRY(cuInit(0));
    TRY(cuDeviceGet(&dev, 0));
    TRY(cuDevicePrimaryCtxRetain(&prim, dev));
    TRY(cuCtxSetCurrent(prim));
    if (wait_next("primary"))
        return 1;
    TRY(cuCtxCreate(&c2, &params, 0, dev));
    if (wait_next("create2"))
        return 1;
    TRY(cuCtxCreate(&c3, &params, 0, dev));
    if (wait_next("create3"))
        return 1;
    TRY(cuMemAlloc(&p, (size_t)256 << 20));
    if (wait_next("alloc"))
        return 1;
    TRY(cuMemFree(p));
    if (wait_next("free"))
        return 1;
    TRY(cuCtxDestroy(c3));
    TRY(cuCtxSetCurrent(c2));
    if (wait_next("destroy3"))
        return 1;
    TRY(cuCtxDestroy(c2));
    TRY(cuCtxSetCurrent(prim));
    if (wait_next("destroy2"))
        return 1;
    TRY(cuDevicePrimaryCtxRelease(dev));
    return 0;
}
