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
 *   vforkwait:PATH  vfork()s a child that creates the file PATH.in, waits (up to 60 s) until
 *                the file PATH exists, then exits: meanwhile this process waits in the kernel,
 *                where only a fatal signal reaches it (a SIGSTOP sent then stays pending
 *                until the child is gone)
 *   evade:MODE   a tenant that keeps running past a freeze: starts a second thread (as
 *                vforkthread's) and a child process (no CUDA) that works against the freeze.
 *                MODE hold: the child traces that thread (PTRACE_SEIZE), stops it (traced,
 *                't') and keeps it so, and sends this process SIGCONT every 5 ms; resume: the
 *                child traces it and lets it go at every stop, dropping the signal that
 *                stopped it; cycle: no tracing, the child continues this process as soon as a
 *                stop is pending for it (the guard's, renewed after each of its passes) and
 *                stops it again 30 ms later, so that it is stopped whenever the guard looks
 *                park: the child traces that thread and keeps it stopped ('t') whenever the
 *                guard looks, letting it run 30 ms each time the guard's renewed stop is
 *                pending (the signal it takes dropped) while the rest stays stopped
 *                -> "evade ok" / "evade refused" (ptrace not allowed here); debugged: no
 *                evasion, the child traces both threads as strace -f does, passing every
 *                signal on and leaving every stop of the process stopped (PTRACE_LISTEN);
 *                gdb: no evasion, the child traces both threads and leaves every stop it is
 *                told of as it is (a debugger at its prompt): the stop's signal is taken, and
 *                each thread stays in its tracer's stop ('t')
 *   vforkthread:PATH  the same, with a second thread started first that runs on in and out
 *                of 5 ms sleeps: the kernel gives a SIGSTOP sent to the process to the first
 *                thread, which cannot take it, and the second never looks
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
#include <sched.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
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

/*
 * vforkthread's second thread: runs on, in and out of short sleeps, never looking at signals
 * pending for its process (only a change of its mask, or one sent to it, would make it).
 */
static void *sleeper(void *arg)
{
    struct timespec ts = { 0, 5000000 };

    (void)arg;
    for (;;)
        nanosleep(&ts, NULL);
    return NULL;
}

/* evade's second thread: publishes its thread ID, then sleeps as vforkthread's does. */
static void *sleeper_tid(void *arg)
{
    __atomic_store_n((pid_t *)arg, (pid_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    return sleeper(NULL);
}

/* The state letter of /proc/PID/stat and whether a SIGSTOP is pending for the process. */
static char proc_state(pid_t pid, int *stop_pending)
{
    char path[64], line[256], st = '?';
    unsigned long long set;
    FILE *f;

    *stop_pending = 0;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    if ((f = fopen(path, "re")) == NULL)
        return '?';
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "State:", 6) == 0)
            sscanf(line + 6, " %c", &st);
        else if (sscanf(line, "ShdPnd: %llx", &set) == 1)
            *stop_pending = (set >> (SIGSTOP - 1)) & 1;
    }
    fclose(f);
    return st;
}

/*
 * evade:MODE's child, of process parent (thread w its second). Writes 1 (set up) or 0
 * (refused) to fd, then works until its parent is gone.
 */
static void evader(pid_t parent, pid_t w, char mode, int fd)
{
    struct timespec ts = { 0, 5000000 }, ms = { 0, 1000000 }, run = { 0, 30000000 };
    char ok = 1;
    int st, pend, k;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent || (mode != 'c' && ptrace(PTRACE_SEIZE, w, 0, 0) != 0) ||
        ((mode == 'd' || mode == 'g') && ptrace(PTRACE_SEIZE, parent, 0, 0) != 0) ||
        ((mode == 'h' || mode == 'k') &&
         (ptrace(PTRACE_INTERRUPT, w, 0, 0) != 0 || waitpid(w, &st, __WALL) != w)))
        ok = 0;
    if (write(fd, &ok, 1) != 1 || !ok)
        _exit(0);
    for (;;) {
        if (mode == 'h') {
            /* The thread stays stopped (reaped stops are not resumed); the rest runs. */
            kill(parent, SIGCONT);
            waitpid(w, &st, __WALL | WNOHANG);
            nanosleep(&ts, NULL);
            continue;
        }
        if (mode == 'g') {
            /* A debugger at its prompt: every stop reported is left as it is, nothing resumed. */
            if (waitpid(-1, &st, __WALL) < 0 && errno != EINTR)
                _exit(0);
            continue;
        }
        if (mode == 'r' || mode == 'd') {
            pid_t t = waitpid(mode == 'r' ? w : -1, &st, __WALL);
            if (t < 0 && errno != EINTR)
                _exit(0);
            if (t <= 0 || !WIFSTOPPED(st)) {
                if (t > 0 && mode == 'r')
                    _exit(0);
                continue;
            }
            if (mode == 'r')
                ptrace(PTRACE_CONT, t, 0, 0); /* on from any stop, its signal dropped */
            else if (st >> 16 == PTRACE_EVENT_STOP)
                ptrace(PTRACE_LISTEN, t, 0, 0); /* a stop of the process: it stays stopped */
            else
                ptrace(PTRACE_CONT, t, 0, WSTOPSIG(st)); /* a signal: passed on */
            continue;
        }
        /* cycle and park act each time the guard's renewed stop is pending. */
        if (proc_state(parent, &pend) == '?')
            _exit(0);
        if (!pend) {
            nanosleep(&ms, NULL);
            continue;
        }
        if (mode == 'c') {
            kill(parent, SIGCONT);
            nanosleep(&run, NULL);
            kill(parent, SIGSTOP);
            for (k = 0; k < 1000 && proc_state(parent, &pend) != 'T'; k++)
                nanosleep(&ms, NULL);
            continue;
        }
        ptrace(PTRACE_CONT, w, 0, 0);
        for (k = 0; k < 30; k++) { /* runs 30 ms, every stop it takes dropped */
            if (waitpid(w, &st, __WALL | WNOHANG) == w && WIFSTOPPED(st))
                ptrace(PTRACE_CONT, w, 0, 0);
            nanosleep(&ms, NULL);
        }
        if (ptrace(PTRACE_INTERRUPT, w, 0, 0) != 0 || waitpid(w, &st, __WALL) != w)
            _exit(0);
    }
}

/* evade:MODE: 0 set up, 1 refused, -1 failed. */
static int evade(const char *mode)
{
    static pid_t w_tid;
    char m = strcmp(mode, "hold") == 0       ? 'h'
             : strcmp(mode, "resume") == 0   ? 'r'
             : strcmp(mode, "cycle") == 0    ? 'c'
             : strcmp(mode, "debugged") == 0 ? 'd'
             : strcmp(mode, "gdb") == 0      ? 'g'
             : strcmp(mode, "park") == 0     ? 'k'
                                             : 0;
    pthread_t th;
    pid_t c, self = getpid();
    char ok = 0;
    int p[2];

    if (!m || pthread_create(&th, NULL, sleeper_tid, &w_tid) != 0 || pipe(p) != 0)
        return -1;
    while (__atomic_load_n(&w_tid, __ATOMIC_ACQUIRE) == 0)
        sched_yield();
    prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY); /* (Yama: a child may trace its parent) */
    if ((c = fork()) < 0)
        return -1;
    if (c == 0) {
        close(p[0]);
        evader(self, w_tid, m, p[1]);
        _exit(0);
    }
    close(p[1]);
    if (read(p[0], &ok, 1) != 1)
        ok = 0;
    close(p[0]);
    return ok ? 0 : 1;
}

/*
 * vforkwait:PATH: a vfork()ed child creates PATH.in, waits until PATH exists (60 s at most)
 * and exits; the caller waits in the kernel meanwhile. The child shares this frame: system
 * calls only.
 */
static __attribute__((noinline)) int vfork_wait(const char *path)
{
    char in[4096];
    pid_t c;

    if (snprintf(in, sizeof(in), "%s.in", path) >= (int)sizeof(in))
        return -1;
    c = vfork();
    if (c == 0) {
        struct timespec ts = { 0, 10000000 };
        long fd = syscall(SYS_openat, AT_FDCWD, in, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        int k;
        if (fd >= 0)
            syscall(SYS_close, fd);
        for (k = 0; k < 6000 && syscall(SYS_faccessat, AT_FDCWD, path, F_OK, 0) != 0; k++)
            syscall(SYS_clock_nanosleep, CLOCK_MONOTONIC, 0, &ts, NULL);
        _exit(0);
    }
    if (c < 0)
        return -1;
    return waitpid(c, NULL, 0) == c ? 0 : -1;
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
        } else if (strncmp(a, "vforkwait:", 10) == 0) {
            if (vfork_wait(a + 10) < 0)
                return 2;
        } else if (strncmp(a, "evade:", 6) == 0) {
            int r = evade(a + 6);
            if (r < 0)
                return 2;
            printf("evade %s\n", r ? "refused" : "ok");
        } else if (strncmp(a, "vforkthread:", 12) == 0) {
            pthread_t th;
            if (pthread_create(&th, NULL, sleeper, NULL) != 0 || vfork_wait(a + 12) < 0)
                return 2;
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
