/*
 * The allocation path's cost: N pairs of cuMemAlloc_v2 + cuMemFree_v2 of SIZE bytes on the
 * primary context of GPU 0, timed one by one; prints the median and the mean in nanoseconds
 * ("alloc_free_ns median M mean A n N"). The driver is reached through dlopen and dlsym as a
 * framework reaches it, so an interposer's hooks are what is timed.
 * usage: alloc_path N SIZE
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

typedef int (*init_fn)(unsigned);
typedef int (*get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*set_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static int cmp(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    int n = argc > 1 ? atoi(argv[1]) : 2000, dev, i;
    size_t size = argc > 2 ? (size_t)strtoull(argv[2], NULL, 0) : 2u << 20;
    uint64_t *t, sum = 0;
    void *ctx;
    unsigned long long p;

    if (!h || n <= 0 || !(t = malloc((size_t)n * sizeof(*t)))) {
        fprintf(stderr, "alloc_path: %s\n", h ? "bad arguments" : dlerror());
        return 1;
    }
    init_fn cuInit = (init_fn)dlsym(h, "cuInit");
    get_fn cuDeviceGet = (get_fn)dlsym(h, "cuDeviceGet");
    retain_fn retain = (retain_fn)dlsym(h, "cuDevicePrimaryCtxRetain");
    set_fn setc = (set_fn)dlsym(h, "cuCtxSetCurrent");
    alloc_fn alloc = (alloc_fn)dlsym(h, "cuMemAlloc_v2");
    free_fn mfree = (free_fn)dlsym(h, "cuMemFree_v2");

    if (cuInit(0) || cuDeviceGet(&dev, 0) || retain(&ctx, dev) || setc(ctx)) {
        fprintf(stderr, "alloc_path: CUDA did not start\n");
        return 1;
    }
    for (i = 0; i < 50; i++) /* warm up */
        if (alloc(&p, size) == 0)
            mfree(p);
    for (i = 0; i < n; i++) {
        uint64_t t0 = now_ns();
        int r = alloc(&p, size);

        if (r == 0)
            mfree(p);
        t[i] = now_ns() - t0;
        if (r) {
            fprintf(stderr, "alloc_path: cuMemAlloc: %d\n", r);
            return 1;
        }
        sum += t[i];
    }
    qsort(t, (size_t)n, sizeof(*t), cmp);
    printf("alloc_free_ns median %llu mean %llu n %d\n", (unsigned long long)t[n / 2],
           (unsigned long long)(sum / (uint64_t)n), n);
    return 0;
}
