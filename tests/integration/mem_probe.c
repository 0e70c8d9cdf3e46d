/*
 * A scripted allocator for memory tests on the simulated GPU: runs its
 * arguments in order, on device 0's primary context (device $MEM_PROBE_DEVICE's, as
 * a torchrun worker starts on its LOCAL_RANK's), and prints one line per step:
 *   alloc:MIB    cuMemAlloc of MIB MiB      -> "alloc MIB ok" / "alloc MIB CUDA_ERROR_..."
 *   async:MIB    cuMemAllocAsync of MIB MiB from the device's default pool, then a
 *                stream synchronisation   -> "async MIB ok" / "async MIB CUDA_ERROR_..."
 *   free         frees the newest allocation -> "free ok"
 *   used         device-wide use from cuMemGetInfo -> "used BYTES"
 *   nvmlused     device 0's use as NVML's nvmlDeviceGetMemoryInfo says it, asked from this
 *                process (the interposer's view) -> "nvmlused BYTES", then "nvmlfree BYTES"
 *                (its free) / "nvmlused error"
 *   ctx          makes a context of its own on the current device (cuCtxCreate; its footprint
 *                is the driver's), kept until exit; the primary stays current
 *                -> "ctx ok" / "ctx CUDA_ERROR_..."
 *   dev:N        makes device N's primary context current (this process's CUDA
 *                numbering, after CUDA_VISIBLE_DEVICES) -> "dev N ok" / "dev N CUDA_ERROR_..."
 *   total        the current device's total memory as cuMemGetInfo says -> "total BYTES"
 *   uuid         the current device's UUID -> "uuid GPU-..."
 *   vmm:D:MIB    cuMemCreate of MIB MiB on device D, mapped and made accessible to D and
 *                to the current device (a peer's view, as NCCL maps a buffer of another
 *                GPU) -> "vmm D MIB ok" / "vmm D MIB CUDA_ERROR_..."; kept until exit
 *   mark:PATH    creates the file PATH (a test waits for it)
 *   wait:PATH    waits (up to 60 s) until the file PATH exists
 *   sleep:MS     sleeps
 *   exit         exits at once with 0, freeing nothing (as a framework's allocator
 *                leaves it to the driver)
 *   tamper       the escape a tenant's own process could try: maps its tenant's
 *                state file ($GPUSLICE_TENANT) and clears every limit in it
 *                (-> "tamper ok" / "tamper error")
 *   zero:PATH    what a process that may write its tenant's state file PATH can do: zeroes
 *                every usage word in it (the tenant's totals and every process's charges)
 *                -> "zero ok" / "zero error"
 *   budget:PATH  fills every device's compute budget in the state file PATH, and keeps it
 *                full for the rest of the run (a thread) -> "budget ok" / "budget error"
 *   lockstop     a process stopped inside its tenant's lock (SIGSTOP, a debugger, a
 *                frozen cgroup): takes the lock of $GPUSLICE_TENANT as the interposer
 *                takes it (its thread ID and PID namespace, by compare-and-swap),
 *                prints "lockstop PID", stops itself with SIGSTOP, and once continued
 *                lets the lock go (-> "lockstop released"; "lockstop error" if not had)
 * Exit status: 0 when every step ran (a refused allocation is a result, not
 * an error), 1 when CUDA could not start, 2 for a bad step.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"
#include "common/nvml_api.h"
#include "gpuslice/tenant_abi.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

static struct gpuslice_tenant *budget_of;

/* Keeps every device's compute budget full, as a process that writes its tenant's file can. */
static void *keep_budget(void *arg)
{
    int e;

    (void)arg;
    for (;;) {
        for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
            __atomic_store_n(&budget_of->dev[e].compute_tokens, (int64_t)1 << 62, __ATOMIC_RELAXED);
        usleep(1000);
    }
    return NULL;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Takes the tenant's lock as a process of the tenant does, stops, and lets it go once continued. */
static void lockstop(void)
{
    const char *path = getenv("GPUSLICE_TENANT");
    struct gpuslice_tenant *t = MAP_FAILED;
    struct stat ns;
    uint64_t me, v;
    int fd = path ? open(path, O_RDWR) : -1, k;

    if (fd >= 0)
        t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (fd >= 0)
        close(fd);
    if (t == MAP_FAILED || stat("/proc/self/ns/pid", &ns) < 0) {
        printf("lockstop error\n");
        return;
    }
    me = (uint64_t)(uint32_t)ns.st_ino << 32 | (uint32_t)syscall(SYS_gettid);
    for (k = 0, v = 0; !__atomic_compare_exchange_n(&t->lock.holder, &v, me, 0, __ATOMIC_ACQUIRE,
                                                    __ATOMIC_RELAXED);
         k++, v = 0) {
        if (k == 2000) {
            printf("lockstop error\n");
            return;
        }
        sleep_ms(1);
    }
    printf("lockstop %d\n", (int)getpid());
    fflush(stdout);
    raise(SIGSTOP);
    if (__atomic_exchange_n(&t->lock.holder, 0, __ATOMIC_RELEASE) & GPUSLICE_LOCK_WAITERS)
        syscall(SYS_futex, &t->lock.word, FUTEX_WAKE, 1, NULL, NULL, 0);
    munmap(t, sizeof(*t));
    printf("lockstop released\n");
}

int main(int argc, char **argv)
{
    CUdeviceptr ptr[256];
    CUcontext ctx;
    CUdevice dev;
    int n = 0, i;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (cuInit(0) != CUDA_SUCCESS ||
        cuDeviceGet(&dev, getenv("MEM_PROBE_DEVICE") ? atoi(getenv("MEM_PROBE_DEVICE")) : 0) !=
            CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "mem_probe: CUDA did not start\n");
        return 1;
    }
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "alloc:", 6) == 0) {
            long mib = atol(a + 6);
            const char *name = NULL;
            CUresult r;
            if (n == 256 || mib <= 0)
                return 2;
            r = cuMemAlloc_v2(&ptr[n], (size_t)mib << 20);
            if (r == CUDA_SUCCESS)
                n++;
            cuGetErrorName(r, &name);
            printf("alloc %ld %s\n", mib, r == CUDA_SUCCESS ? "ok" : name ? name : "error");
        } else if (strncmp(a, "async:", 6) == 0) {
            long mib = atol(a + 6);
            const char *name = NULL;
            CUresult r;
            if (n == 256 || mib <= 0)
                return 2;
            r = cuMemAllocAsync(&ptr[n], (size_t)mib << 20, NULL);
            if (r == CUDA_SUCCESS && (r = cuStreamSynchronize(NULL)) == CUDA_SUCCESS)
                n++;
            cuGetErrorName(r, &name);
            printf("async %ld %s\n", mib, r == CUDA_SUCCESS ? "ok" : name ? name : "error");
        } else if (strcmp(a, "free") == 0) {
            if (n == 0)
                return 2;
            printf("free %s\n", cuMemFree_v2(ptr[--n]) == CUDA_SUCCESS ? "ok" : "error");
        } else if (strcmp(a, "ctx") == 0) {
            const char *name = NULL;
            CUcontext c, prim = NULL;
            CUresult r;
            cuCtxGetCurrent(&prim);
            if ((r = cuCtxGetDevice(&dev)) == CUDA_SUCCESS &&
                (r = cuCtxCreate_v2(&c, 0, dev)) == CUDA_SUCCESS)
                r = cuCtxSetCurrent(prim);
            cuGetErrorName(r, &name);
            printf("ctx %s\n", r == CUDA_SUCCESS ? "ok" : name ? name : "error");
        } else if (strncmp(a, "dev:", 4) == 0) {
            const char *name = NULL;
            CUcontext c;
            CUresult r;
            if ((r = cuDeviceGet(&dev, atoi(a + 4))) == CUDA_SUCCESS &&
                (r = cuDevicePrimaryCtxRetain(&c, dev)) == CUDA_SUCCESS)
                r = cuCtxSetCurrent(c);
            cuGetErrorName(r, &name);
            printf("dev %d %s\n", atoi(a + 4), r == CUDA_SUCCESS ? "ok" : name ? name : "error");
        } else if (strncmp(a, "vmm:", 4) == 0) {
            int on = atoi(a + 4);
            const char *colon = strchr(a + 4, ':'), *name = NULL;
            long mib = colon ? atol(colon + 1) : 0;
            CUmemAllocationProp prop = { 0 };
            CUmemAccessDesc acc[2];
            CUmemGenericAllocationHandle h;
            CUdeviceptr va;
            CUdevice cur = 0;
            CUresult r;
            if (mib <= 0 || mib % 2)
                return 2;
            prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
            prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            prop.location.id = on;
            cuCtxGetDevice(&cur);
            memset(acc, 0, sizeof(acc));
            acc[0].location = prop.location;
            acc[0].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            acc[1].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
            acc[1].location.id = (int)cur;
            acc[1].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
            if ((r = cuMemCreate(&h, (size_t)mib << 20, &prop, 0)) == CUDA_SUCCESS &&
                (r = cuMemAddressReserve(&va, (size_t)mib << 20, 0, 0, 0)) == CUDA_SUCCESS &&
                (r = cuMemMap(va, (size_t)mib << 20, 0, h, 0)) == CUDA_SUCCESS)
                r = cuMemSetAccess(va, (size_t)mib << 20, acc, (int)cur == on ? 1 : 2);
            cuGetErrorName(r, &name);
            printf("vmm %d %ld %s\n", on, mib, r == CUDA_SUCCESS ? "ok" : name ? name : "error");
        } else if (strcmp(a, "total") == 0) {
            size_t f = 0, t = 0;
            cuMemGetInfo_v2(&f, &t);
            printf("total %zu\n", t);
        } else if (strcmp(a, "uuid") == 0) {
            CUuuid u;
            const unsigned char *b = (const unsigned char *)u.bytes;
            if (cuCtxGetDevice(&dev) != CUDA_SUCCESS || cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS)
                printf("uuid error\n");
            else
                printf(
                    "uuid GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x\n",
                    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
                    b[13], b[14], b[15]);
        } else if (strcmp(a, "used") == 0) {
            size_t f = 0, t = 0;
            cuMemGetInfo_v2(&f, &t);
            printf("used %zu\n", t - f);
        } else if (strcmp(a, "nvmlused") == 0) {
            void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
            gs_pfn_nvmlInit_v2 in = lib ? (gs_pfn_nvmlInit_v2)dlsym(lib, "nvmlInit_v2") : NULL;
            gs_pfn_nvmlDeviceGetHandleByIndex_v2 gh =
                lib ? (gs_pfn_nvmlDeviceGetHandleByIndex_v2)dlsym(lib,
                                                                  "nvmlDeviceGetHandleByIndex_v2")
                    : NULL;
            gs_pfn_nvmlDeviceGetMemoryInfo mi =
                lib ? (gs_pfn_nvmlDeviceGetMemoryInfo)dlsym(lib, "nvmlDeviceGetMemoryInfo") : NULL;
            nvmlDevice_t nd;
            nvmlMemory_t m;
            if (in && gh && mi && in() == NVML_SUCCESS && gh(0, &nd) == NVML_SUCCESS &&
                mi(nd, &m) == NVML_SUCCESS)
                printf("nvmlused %llu\nnvmlfree %llu\n", (unsigned long long)m.used,
                       (unsigned long long)m.free);
            else
                printf("nvmlused error\n");
        } else if (strncmp(a, "mark:", 5) == 0) {
            FILE *f = fopen(a + 5, "w");
            if (f == NULL)
                return 2;
            fclose(f);
        } else if (strncmp(a, "wait:", 5) == 0) {
            int k;
            for (k = 0; k < 6000 && access(a + 5, F_OK) != 0; k++)
                sleep_ms(10);
        } else if (strncmp(a, "sleep:", 6) == 0) {
            sleep_ms(atol(a + 6));
        } else if (strcmp(a, "tamper") == 0) {
            const char *path = getenv("GPUSLICE_TENANT");
            struct gpuslice_tenant *t = MAP_FAILED;
            int fd = path ? open(path, O_RDWR) : -1, e;

            if (fd >= 0)
                t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (fd >= 0)
                close(fd);
            if (t == MAP_FAILED) {
                printf("tamper error\n");
                continue;
            }
            for (e = 0; e < GPUSLICE_MAX_DEVICES; e++) {
                t->dev[e].mem_limit = 0;
                t->dev[e].compute_limit = 0;
            }
            t->set_flags = 0;
            t->compute_any = 0;
            t->limits_fixed = 0;
            t->node_tenant = 0;
            munmap(t, sizeof(*t));
            printf("tamper ok\n");
        } else if (strncmp(a, "zero:", 5) == 0 || strncmp(a, "budget:", 7) == 0) {
            int zero = a[0] == 'z', fd = open(a + (zero ? 5 : 7), O_RDWR), e, p;
            struct gpuslice_tenant *t = MAP_FAILED;

            if (fd >= 0)
                t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (fd >= 0)
                close(fd);
            if (t == MAP_FAILED) {
                printf("%s error\n", zero ? "zero" : "budget");
                continue;
            }
            if (zero) {
                for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
                    __atomic_store_n(&t->dev[e].mem_used, 0, __ATOMIC_RELAXED);
                for (p = 0; p < GPUSLICE_MAX_PROCS; p++)
                    for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
                        __atomic_store_n(&t->proc[p].mem_used[e], 0, __ATOMIC_RELAXED);
                munmap(t, sizeof(*t));
                printf("zero ok\n");
            } else {
                pthread_t th;

                budget_of = t;
                pthread_create(&th, NULL, keep_budget, NULL);
                printf("budget ok\n");
            }
        } else if (strcmp(a, "lockstop") == 0) {
            lockstop();
        } else if (strcmp(a, "exit") == 0) {
            fflush(stdout);
            exit(0);
        } else {
            fprintf(stderr, "mem_probe: bad step %s\n", a);
            return 2;
        }
    }
    while (n > 0)
        cuMemFree_v2(ptr[--n]);
    return 0; /* the primary contexts retained go with the process */
}
