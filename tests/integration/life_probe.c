/*
 * Launch patterns of a process's life for the compute governor, on the simulated GPU:
 *
 *   fork KERNEL_US N [inflight]
 *                      launches N spin kernels on device 0's primary context (synchronised,
 *                      unless inflight: then they are still running), then forks; the child (which the simulator lets use CUDA afresh) makes
 *                      its own context and launches N more, prints "child PID" and exits; the
 *                      parent waits for it and prints "parent PID status S".
 *   green KERNEL_US SECONDS
 *                      makes no primary context: a green context of the whole GPU's first 8
 *                      SMs (cuGreenCtxCreate, which only the driver sees) is made current, and
 *                      spin kernels are launched on its stream back to back, synchronised about
 *                      every 20 ms, for SECONDS of wall time from the first launch's return;
 *                      prints "green ready" before the first launch, then
 *                      "green launches N first_ms F wall_ms W", F the milliseconds the first
 *                      launch took.
 *
 * Exit status: 0 when it ran, 1 when CUDA failed, 2 for bad usage.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static CUfunction kernel(long us)
{
    static const char image[] = "simulated";
    char name[32];
    CUmodule m;
    CUfunction f;

    snprintf(name, sizeof(name), "spin_%ldus", us);
    if (cuModuleLoadData(&m, image) != CUDA_SUCCESS ||
        cuModuleGetFunction(&f, m, name) != CUDA_SUCCESS)
        return NULL;
    return f;
}

/* Device 0's primary context current and n kernels of us each launched (and waited for). */
static int launches(long us, int n, int wait)
{
    CUcontext ctx;
    CUdevice dev;
    CUfunction f;
    int i;

    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS || (f = kernel(us)) == NULL)
        return -1;
    for (i = 0; i < n; i++)
        if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return -1;
    return !wait || cuCtxSynchronize() == CUDA_SUCCESS ? 0 : -1;
}

static int fork_cmd(long us, int n, int inflight)
{
    pid_t child;
    int status = 0;

    if (launches(us, n, !inflight) < 0)
        return 1;
    fflush(stdout);
    if ((child = fork()) < 0)
        return 1;
    if (child == 0) {
        if (launches(us, n, 1) < 0)
            exit(1);
        printf("child %d\n", (int)getpid());
        exit(0); /* exit, not _exit: what is done at exit runs */
    }
    if (waitpid(child, &status, 0) != child || cuCtxSynchronize() != CUDA_SUCCESS)
        return 1;
    printf("parent %d status %d\n", (int)getpid(), WIFEXITED(status) ? WEXITSTATUS(status) : -1);
    return 0;
}

static int green_cmd(long us, double seconds)
{
    CUdevResource all, groups[66], rest;
    CUdevResourceDesc desc;
    CUgreenCtx g;
    CUcontext ctx;
    CUdevice dev;
    CUfunction f;
    unsigned nb = 66;
    double t0, first, start, busy = 0;
    long n = 0;

    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM) != CUDA_SUCCESS ||
        cuDevSmResourceSplitByCount(groups, &nb, &all, &rest, 0, 8) != CUDA_SUCCESS || nb < 1 ||
        cuDevResourceGenerateDesc(&desc, groups, 1) != CUDA_SUCCESS ||
        cuGreenCtxCreate(&g, desc, dev, CU_GREEN_CTX_DEFAULT_STREAM) != CUDA_SUCCESS ||
        cuCtxFromGreenCtx(&ctx, g) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS ||
        (f = kernel(us)) == NULL) {
        fprintf(stderr, "life_probe: no green context\n");
        return 1;
    }
    printf("green ready\n");
    t0 = now_ms();
    if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
        return 1;
    first = now_ms() - t0;
    start = now_ms();
    for (n = 1; now_ms() - start < seconds * 1e3; n++) {
        if (cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL) != CUDA_SUCCESS)
            return 1;
        busy += us / 1e3;
        if (busy >= 20) {
            if (cuCtxSynchronize() != CUDA_SUCCESS)
                return 1;
            busy = 0;
        }
    }
    if (cuCtxSynchronize() != CUDA_SUCCESS)
        return 1;
    printf("green launches %ld first_ms %.0f wall_ms %.0f\n", n, first, now_ms() - start);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    if ((argc == 4 || (argc == 5 && strcmp(argv[4], "inflight") == 0)) &&
        strcmp(argv[1], "fork") == 0)
        return fork_cmd(atol(argv[2]), atoi(argv[3]), argc == 5);
    if (argc == 4 && strcmp(argv[1], "green") == 0)
        return green_cmd(atol(argv[2]), atof(argv[3]));
    fprintf(stderr, "usage: life_probe fork KERNEL_US N [inflight] | green KERNEL_US SECONDS\n");
    return 2;
}
