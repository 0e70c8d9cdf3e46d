/*
 * A latency-critical job for the priority tests on the simulated GPU: every
 * PERIOD_US it sends a request of KERNELS spin kernels of KERNEL_US each on
 * its own stream and waits for them (cuStreamSynchronize); a request starts
 * when due, or when the one before ends if that is later. It prints the
 * latencies' median, 90th and 99th percentiles and how many requests started
 * late: "p50_us 210 p99_us 380 requests 1000 late 3 p90_us 250".
 *
 * usage: latency_probe SECONDS PERIOD_US KERNEL_US KERNELS
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

#define CHECK(x)                                                                                   \
    do {                                                                                           \
        CUresult r_ = (x);                                                                         \
        if (r_ != CUDA_SUCCESS) {                                                                  \
            fprintf(stderr, "latency_probe: %s failed: %d\n", #x, (int)r_);                        \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static double now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fn;
    CUstream s;
    char name[32];
    double seconds, period, *lat, due, end;
    long kernel_us, kernels, n = 0, cap, late = 0, i;

    if (argc != 5 || (seconds = atof(argv[1])) <= 0 || (period = atof(argv[2])) <= 0 ||
        (kernel_us = atol(argv[3])) <= 0 || (kernels = atol(argv[4])) <= 0) {
        fprintf(stderr, "usage: latency_probe SECONDS PERIOD_US KERNEL_US KERNELS\n");
        return 2;
    }
    cap = (long)(seconds * 1e6 / period) + 16;
    if ((lat = calloc((size_t)cap, sizeof(*lat))) == NULL)
        return 1;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "sim"));
    snprintf(name, sizeof(name), "spin_%ldus", kernel_us);
    CHECK(cuModuleGetFunction(&fn, mod, name));
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    due = now_us();
    end = due + seconds * 1e6;
    while (n < cap) {
        double t0 = now_us(), t1;

        if (t0 >= end)
            break;
        if (t0 < due) {
            while ((t0 = now_us()) < due)
                ;
        } else if (t0 > due + period / 2) {
            late++;
        }
        for (i = 0; i < kernels; i++)
            CHECK(cuLaunchKernel(fn, 1, 1, 1, 32, 1, 1, 0, s, NULL, NULL));
        CHECK(cuStreamSynchronize(s));
        t1 = now_us();
        lat[n++] = t1 - t0;
        due += period;
        if (due < t1)
            due = t1;
    }
    qsort(lat, (size_t)n, sizeof(*lat), cmp);
    printf("p50_us %.0f p99_us %.0f requests %ld late %ld p90_us %.0f\n", n ? lat[n / 2] : 0.0,
           n ? lat[(size_t)(n * 0.99)] : 0.0, n, late, n ? lat[(size_t)(n * 0.9)] : 0.0);
    return 0;
}
