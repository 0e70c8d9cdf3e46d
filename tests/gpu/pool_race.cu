/*
 * Stream-ordered allocations racing under a memory limit (issue 28, item 20): the audit's
 * measurement. 32 threads, each on its per-thread default stream (built with
 * --default-stream per-thread, so libcudart asks for cuMemAllocAsync_ptsz and the other
 * per-thread variants), allocate 1-24 MiB blocks with cudaMallocAsync from the device's pool
 * and from two pools of their own, behind a short kernel each, and free them, holding up to
 * four at a time: together they ask for more than the limit. The pools fragment, so a pool with
 * room by count still grows. A process started without the interposer samples NVML every
 * millisecond meanwhile: this process's figure (nvmlDeviceGetComputeRunningProcesses) and the
 * device's use over what it was before this process made its context (nvmlDeviceGetMemoryInfo,
 * which also holds the context's part that no process figure shows). The most of each must
 * not pass the limit. On the H200 the audit measured 1030-1056 MiB under 1 GiB.
 *
 * usage: pool_race LIMIT_BYTES [SECONDS]   (under gpuslice run --memory LIMIT; output follows
 * check.h; exit 1 when an assertion failed)
 *        pool_race --sample UUID PID BASE STOPFILE   (the sampler, started by the above)
 */
#include <cuda.h>
#include <cuda_runtime.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

#define THREADS 32
#define HELD 4

static int rt_ok(cudaError_t e, const char *what, int line)
{
    if (e == cudaSuccess)
        return 1;
    expect(0, "line %d: %s returned %d (%s)", line, what, (int)e, cudaGetErrorName(e));
    return 0;
}
#define RT(call) rt_ok((call), #call, __LINE__)

__global__ void spin(long long cycles)
{
    long long t0 = clock64();
    while (clock64() - t0 < cycles)
        ;
}

/* ---- the sampler (no interposer) ----------------------------------------------------------- */

/* NVML's own declarations, as nvml.h has them (not every toolkit installs nvml.h). */
typedef int nvmlReturn_t;
typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId;
    unsigned int computeInstanceId;
} nvmlProcessInfo_t;
typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
#define NVML_SUCCESS 0
#define NVML_VALUE_NOT_AVAILABLE_ULL (~0ULL)

typedef nvmlReturn_t (*init_fn)(void);
typedef nvmlReturn_t (*by_uuid_fn)(const char *, nvmlDevice_t *);
typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned int *, nvmlProcessInfo_t *);
typedef nvmlReturn_t (*meminfo_fn)(nvmlDevice_t, nvmlMemory_t *);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Samples until stop exists; prints "most_process most_device samples" (bytes). */
static int sample(const char *uuid, unsigned pid, unsigned long long base, const char *stop)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    init_fn in;
    by_uuid_fn by;
    procs_fn pr;
    meminfo_fn mi;
    nvmlDevice_t dev;
    unsigned long long most_proc = 0, most_dev = 0, n = 0;

    if (!lib || !(in = (init_fn)dlsym(lib, "nvmlInit_v2")) ||
        !(by = (by_uuid_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID")) ||
        !(pr = (procs_fn)dlsym(lib, "nvmlDeviceGetComputeRunningProcesses_v3")) ||
        !(mi = (meminfo_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo")) || in() != NVML_SUCCESS ||
        by(uuid, &dev) != NVML_SUCCESS) {
        printf("0 0 0\n");
        return 1;
    }
    while (access(stop, F_OK) != 0) {
        nvmlProcessInfo_t info[256];
        unsigned int cnt = 256, i;
        nvmlMemory_t m;

        if (pr(dev, &cnt, info) == NVML_SUCCESS)
            for (i = 0; i < cnt; i++)
                if (info[i].pid == pid && info[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE_ULL &&
                    info[i].usedGpuMemory > most_proc)
                    most_proc = info[i].usedGpuMemory;
        if (mi(dev, &m) == NVML_SUCCESS && m.used > base && m.used - base > most_dev)
            most_dev = m.used - base;
        n++;
        usleep(1000);
    }
    printf("%llu %llu %llu\n", most_proc, most_dev, n);
    return 0;
}

/* The device's use now, from a process without the interposer (the sampler's NVML). */
static unsigned long long device_used_outside(const char *self, const char *uuid)
{
    char cmd[1024];
    unsigned long long v = 0;
    FILE *f;

    snprintf(cmd, sizeof(cmd), "env -u LD_PRELOAD '%s' --used %s", self, uuid);
    if ((f = popen(cmd, "r")) != NULL) {
        if (fscanf(f, "%llu", &v) != 1)
            v = 0;
        pclose(f);
    }
    return v;
}

static int used_now(const char *uuid)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    init_fn in;
    by_uuid_fn by;
    meminfo_fn mi;
    nvmlDevice_t dev;
    nvmlMemory_t m;

    if (!lib || !(in = (init_fn)dlsym(lib, "nvmlInit_v2")) ||
        !(by = (by_uuid_fn)dlsym(lib, "nvmlDeviceGetHandleByUUID")) ||
        !(mi = (meminfo_fn)dlsym(lib, "nvmlDeviceGetMemoryInfo")) || in() != NVML_SUCCESS ||
        by(uuid, &dev) != NVML_SUCCESS || mi(dev, &m) != NVML_SUCCESS)
        return 1;
    printf("%llu\n", m.used);
    return 0;
}

/* ---- the racers ---------------------------------------------------------------------------- */

static cudaMemPool_t pools[3]; /* [0]: the device's (cudaMallocAsync) */
static double deadline;
static unsigned long long ok_count, refused, other;

static void *racer(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *held[HELD];
    int n = 0;

    cudaSetDevice(0);
    while (now_s() < deadline) {
        if (n < HELD && rand_r(&seed) % 3 != 0) {
            size_t bytes = ((size_t)(rand_r(&seed) % 24) + 1) << 20;
            int k = rand_r(&seed) % 3;
            cudaError_t e;
            spin<<<1, 1>>>(20000); /* ~10 us: the allocation comes between kernels */
            e = k ? cudaMallocFromPoolAsync(&held[n], bytes, pools[k], 0)
                  : cudaMallocAsync(&held[n], bytes, 0);
            if (e == cudaSuccess) {
                n++;
                __atomic_add_fetch(&ok_count, 1, __ATOMIC_RELAXED);
            } else {
                (void)cudaGetLastError();
                __atomic_add_fetch(e == cudaErrorMemoryAllocation ? &refused : &other, 1,
                                   __ATOMIC_RELAXED);
            }
        } else if (n > 0) {
            cudaFreeAsync(held[--n], 0);
        }
        cudaStreamSynchronize(0); /* the pools give back whole unused chunks here */
    }
    while (n > 0)
        cudaFreeAsync(held[--n], 0);
    cudaStreamSynchronize(0);
    return NULL;
}

int main(int argc, char **argv)
{
    unsigned long long limit, base, most_proc = 0, most_dev = 0, samples = 0;
    double seconds = 10;
    char uuid[96], stop[256], self[PATH_MAX];
    ssize_t len;
    pthread_t th[THREADS];
    cudaMemPoolProps props;
    const unsigned char *u;
    CUdevice cudev;
    CUuuid cu_uuid;
    pid_t sampler;
    int fds[2], i, st;
    FILE *f;

    if (argc == 6 && strcmp(argv[1], "--sample") == 0)
        return sample(argv[2], (unsigned)atoi(argv[3]), strtoull(argv[4], NULL, 10), argv[5]);
    if (argc == 3 && strcmp(argv[1], "--used") == 0)
        return used_now(argv[2]);
    check_init();
    if (argc < 2 || argc > 3 || !(limit = strtoull(argv[1], NULL, 10)) ||
        (argc == 3 && (seconds = atof(argv[2])) <= 0)) {
        fprintf(stderr, "usage: pool_race LIMIT_BYTES [SECONDS]\n");
        return 2;
    }
    /* The UUID through the driver, which makes no context (the runtime's calls may). */
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&cudev, 0) != CUDA_SUCCESS ||
        cuDeviceGetUuid(&cu_uuid, cudev) != CUDA_SUCCESS)
        return expect(0, "cuInit/cuDeviceGetUuid failed"), check_done();
    u = (const unsigned char *)cu_uuid.bytes;
    snprintf(uuid, sizeof(uuid),
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
             u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14],
             u[15]);
    /* The device's use before this process's context (the GPU should be otherwise idle). */
    if ((len = readlink("/proc/self/exe", self, sizeof(self) - 1)) <= 0)
        return expect(0, "cannot read /proc/self/exe"), check_done();
    self[len] = '\0';
    base = device_used_outside(self, uuid);
    if (!RT(cudaSetDevice(0)) || !RT(cudaFree(0)))
        return check_done();
    memset(&props, 0, sizeof(props));
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    if (!RT(cudaDeviceGetDefaultMemPool(&pools[0], 0)) ||
        !RT(cudaMemPoolCreate(&pools[1], &props)) || !RT(cudaMemPoolCreate(&pools[2], &props)))
        return check_done();
    snprintf(stop, sizeof(stop), "/tmp/pool_race-stop-%d", (int)getpid());
    unlink(stop);
    if (pipe(fds) < 0 || (sampler = fork()) < 0)
        return expect(0, "cannot start the sampler"), check_done();
    if (sampler == 0) {
        char pid[32], b[32];
        dup2(fds[1], STDOUT_FILENO);
        close(fds[0]);
        snprintf(pid, sizeof(pid), "%d", (int)getppid());
        snprintf(b, sizeof(b), "%llu", base);
        unsetenv("LD_PRELOAD");
        execl("/proc/self/exe", "pool_race", "--sample", uuid, pid, b, stop, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    deadline = now_s() + seconds;
    for (i = 0; i < THREADS; i++)
        pthread_create(&th[i], NULL, racer, (void *)(uintptr_t)(i + 1));
    for (i = 0; i < THREADS; i++)
        pthread_join(th[i], NULL);
    if ((f = fopen(stop, "w")) != NULL)
        fclose(f);
    if ((f = fdopen(fds[0], "r")) != NULL) {
        if (fscanf(f, "%llu %llu %llu", &most_proc, &most_dev, &samples) != 3)
            samples = 0;
        fclose(f);
    }
    waitpid(sampler, &st, 0);
    unlink(stop);
    printf("%d threads for %.0f s: %llu allocations, %llu refused, %llu other errors\n", THREADS,
           seconds, ok_count, refused, other);
    printf("real use, sampled from outside every ms (%llu samples): this process's NVML figure "
           "at most %.1f MiB, the device's use over its idle %.1f MiB at most %.1f MiB; "
           "limit %.1f MiB\n",
           samples, most_proc / MiB, base / MiB, most_dev / MiB, limit / MiB);
    key("limit_MiB", limit / MiB);
    key("max_process_MiB", most_proc / MiB);
    key("max_device_MiB", most_dev / MiB);
    num("samples", (double)samples);
    num("allocations", (double)ok_count);
    num("refused", (double)refused);
    expect(samples > 100, "the sampler read NVML %llu times", samples);
    expect(ok_count > 1000 && refused > 0,
           "the threads pressed on the limit: %llu allocations, %llu refused", ok_count, refused);
    expect(other == 0, "no error but cudaErrorMemoryAllocation (%llu others)", other);
    expect(most_proc <= limit,
           "NVML's figure for this process stayed under the limit: %.1f MiB <= %.1f",
           most_proc / MiB, limit / MiB);
    expect(most_dev <= limit,
           "the device's use over idle stayed under the limit: %.1f MiB <= %.1f (the context's "
           "part no figure shows included)",
           most_dev / MiB, limit / MiB);
    RT(cudaMemPoolDestroy(pools[1]));
    RT(cudaMemPoolDestroy(pools[2]));
    return check_done();
}
