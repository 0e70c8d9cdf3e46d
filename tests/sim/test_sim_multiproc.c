/*
 * Tests of the simulated device shared by processes: memory one process holds
 * is missing for the others and NVML shows each process; a SIGKILLed process's
 * memory comes back; kernels of different processes serialise on the device.
 * The other process is this program again (fork + exec), run as "child".
 */
#include "sim_test.h"
#include "sim_state.h" /* SIM_SAMPLE_NS: NVML's sample period */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>

#define MS 1000000ull

static struct cu cu;
static struct nvml nv;
static nvmlDevice_t dev0;

/* ---- the child -------------------------------------------------------- */

/*
 * child hold BYTES: allocates BYTES in the primary context, says "ready RC T",
 * and holds it until its stdin closes. child spin US: launches spin_<US>us at
 * time T, says "ready RC T", and waits for stdin to close. child stophold
 * BYTES: as hold, then takes the simulated driver's lock and stops itself
 * (SIGSTOP) holding it, as a process the daemon's guard stops in the middle
 * of a call may; let go when continued.
 */
static int child_main(const char *mode, const char *arg)
{
    struct cu c;
    CUcontext ctx;
    CUresult r;
    uint64_t t0 = 0;
    char buf[64];
    int said = 0;

    if (cu_load(&c) < 0 || c.cuInit(0) != CUDA_SUCCESS ||
        c.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        c.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return 2;
    if (strcmp(mode, "hold") == 0) {
        CUdeviceptr p;
        r = c.cuMemAlloc_v2(&p, strtoull(arg, NULL, 10));
    } else if (strcmp(mode, "stophold") == 0) {
        CUdeviceptr p;
        const char *path = getenv("GPUSLICE_SIM_STATE");
        int fd = path ? open(path, O_RDWR | O_CLOEXEC) : -1;
        struct sim_shared *sh;

        r = c.cuMemAlloc_v2(&p, strtoull(arg, NULL, 10));
        sh = fd < 0 ? MAP_FAILED
                    : mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (sh == MAP_FAILED)
            return 3;
        pthread_mutex_lock(&sh->lock.mutex);
        printf("ready %d 0\n", (int)r);
        fflush(stdout);
        said = 1;
        raise(SIGSTOP);
        pthread_mutex_unlock(&sh->lock.mutex);
    } else {
        CUmodule m;
        CUfunction f;
        snprintf(buf, sizeof(buf), "spin_%sus", arg);
        c.cuModuleLoadData(&m, "x");
        c.cuModuleGetFunction(&f, m, buf);
        t0 = now_ns();
        r = c.cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL);
    }
    if (!said)
        printf("ready %d %llu\n", (int)r, (unsigned long long)t0);
    fflush(stdout);
    while (read(0, buf, sizeof(buf)) > 0)
        ;
    c.cuCtxSynchronize();
    c.cuDevicePrimaryCtxRelease_v2(0);
    return 0;
}

/* ---- the parent ------------------------------------------------------- */

struct child {
    pid_t pid;
    int in;
    FILE *out;
    int rc;
    uint64_t t0;
};

static void spawn(struct child *c, const char *mode, const char *arg)
{
    int in[2], out[2];

    assert_int_equal(pipe2(in, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    c->pid = fork();
    assert_true(c->pid >= 0);
    if (c->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl("/proc/self/exe", "test_sim_multiproc", "child", mode, arg, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    c->in = in[1];
    c->out = fdopen(out[0], "r");
    assert_non_null(c->out);
}

static void wait_ready(struct child *c)
{
    char line[128];
    unsigned long long t0 = 0;

    assert_non_null(fgets(line, sizeof(line), c->out));
    assert_int_equal(sscanf(line, "ready %d %llu", &c->rc, &t0), 2);
    c->t0 = t0;
}

/* Lets the child finish; returns its exit status. */
static int finish(struct child *c)
{
    int status = 0;

    close(c->in);
    fclose(c->out);
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    return status;
}

static int setup(void **state)
{
    CUcontext ctx;

    (void)state;
    sim_test_state_init("multiproc");
    setenv("GPUSLICE_SIM_MEMORY", "2G", 1);
    if (cu_load(&cu) < 0 || nvml_load(&nv) < 0 || cu.cuInit(0) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS || nv.nvmlInit_v2() != NVML_SUCCESS ||
        nv.nvmlDeviceGetHandleByIndex_v2(0, &dev0) != NVML_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    nv.nvmlShutdown();
    cu.cuDevicePrimaryCtxRelease_v2(0);
    sim_test_state_done();
    return 0;
}

static uint64_t used(void)
{
    size_t f, t;

    assert_ok(cu.cuMemGetInfo_v2(&f, &t));
    return t - f;
}

/* What NVML says pid holds, or -1 if it does not list it. */
static long long nvml_process_memory(pid_t pid)
{
    nvmlProcessInfo_t infos[16];
    nvmlProcessInfo_v1_t infos1[16];
    unsigned n = 16, n1 = 16;
    long long found = -1;

    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses_v3(dev0, &n, infos), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetComputeRunningProcesses(dev0, &n1, infos1), NVML_SUCCESS);
    assert_int_equal(n, n1);
    for (unsigned i = 0; i < n; i++) {
        assert_int_equal(infos[i].pid, infos1[i].pid);
        assert_int_equal(infos[i].usedGpuMemory, infos1[i].usedGpuMemory);
        if ((pid_t)infos[i].pid == pid)
            found = (long long)infos[i].usedGpuMemory;
    }
    return found;
}

static void test_two_processes_see_each_others_memory(void **state)
{
    uint64_t base = used();
    struct child c;
    nvmlMemory_t m;

    (void)state;
    assert_int_equal(nvml_process_memory(getpid()), (long long)base);
    spawn(&c, "hold", "268435456");
    wait_ready(&c);
    assert_ok(c.rc);
    assert_int_equal(used(), base + 64 * MiB + 256 * MiB);
    assert_int_equal(nvml_process_memory(c.pid), (long long)(64 * MiB + 256 * MiB));
    assert_int_equal(nvml_process_memory(getpid()), (long long)base);
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(m.used, used());
    assert_int_equal(finish(&c), 0);
    assert_int_equal(used(), base); /* a normal exit gives everything back */
    assert_int_equal(nvml_process_memory(c.pid), -1);
}

static void test_memory_is_exhausted_across_processes(void **state)
{
    uint64_t base = used();
    struct child c;
    char arg[32];
    CUdeviceptr p;

    (void)state;
    /* The child takes all but 10 MiB, its context included. */
    snprintf(arg, sizeof(arg), "%llu", (unsigned long long)(2 * GiB - base - 64 * MiB - 10 * MiB));
    spawn(&c, "hold", arg);
    wait_ready(&c);
    assert_ok(c.rc);
    assert_cu(cu.cuMemAlloc_v2(&p, 12 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
    assert_ok(cu.cuMemAlloc_v2(&p, 10 * MiB));
    assert_ok(cu.cuMemFree_v2(p));
    assert_int_equal(finish(&c), 0);
    assert_ok(cu.cuMemAlloc_v2(&p, 12 * MiB));
    assert_ok(cu.cuMemFree_v2(p));
}

static void test_sigkilled_process_memory_is_given_back(void **state)
{
    uint64_t base = used();
    struct child c;
    int status;

    (void)state;
    spawn(&c, "hold", "536870912");
    wait_ready(&c);
    assert_ok(c.rc);
    assert_int_equal(used(), base + 64 * MiB + 512 * MiB);
    kill(c.pid, SIGKILL);
    /* Back as soon as the process is gone, even before it is reaped. */
    for (int i = 0; i < 200 && used() != base; i++)
        usleep(10000);
    assert_int_equal(used(), base);
    assert_int_equal(nvml_process_memory(c.pid), -1);
    close(c.in);
    fclose(c.out);
    assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
    assert_true(WIFSIGNALED(status));
}

static void test_kernels_of_two_processes_serialise(void **state)
{
    CUmodule m;
    CUfunction f;
    struct child c;
    nvmlProcessUtilizationSample_t s[8];
    unsigned n = 8;
    int seen_child = 0, seen_self = 0;

    (void)state;
    spawn(&c, "spin", "100000");
    wait_ready(&c);
    assert_ok(c.rc);
    assert_ok(cu.cuModuleLoadData(&m, "x"));
    assert_ok(cu.cuModuleGetFunction(&f, m, "spin_1000us"));
    assert_ok(launch1(&cu, f, NULL));
    assert_ok(cu.cuCtxSynchronize());
    /* Our kernel could start only after the child's 100 ms one ended. */
    assert_true(now_ns() >= c.t0 + 101 * MS);
    assert_int_equal(finish(&c), 0);
    /* NVML's samples of the periods that ended: the child's 100 ms, then our 1 ms. */
    {
        uint64_t t = now_ns(), end = (t / SIM_SAMPLE_NS + 1) * SIM_SAMPLE_NS;
        unsigned child_ms = 0, self_ms = 0;

        usleep((useconds_t)((end - t) / 1000 + 2000));
        n = 8;
        assert_int_equal(nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, 0), NVML_SUCCESS);
        for (unsigned i = 0; i < n; i++) {
            if ((pid_t)s[i].pid == c.pid) {
                seen_child = 1;
                child_ms += s[i].smUtil * (unsigned)(SIM_SAMPLE_NS / MS) / 100;
            }
            if ((pid_t)s[i].pid == getpid())
                seen_self = 1;
        }
        assert_in_range(child_ms, 95, 105);
        /* Ours waited behind the child's: that counts as ours too, as NVML counts it. */
        for (unsigned i = 0; i < n; i++)
            if ((pid_t)s[i].pid == getpid())
                self_ms += s[i].smUtil * (unsigned)(SIM_SAMPLE_NS / MS) / 100;
        assert_true(self_ms >= 50);
    }
    assert_true(seen_child && seen_self);
    assert_ok(cu.cuModuleUnload(m));
}

/*
 * NVML answers while a process that holds the simulated driver's lock is stopped, as a real
 * NVML answers beside a stopped CUDA process: the daemon's guard, which stops one over its
 * compute ceiling, reads NVML to decide when to continue it (before, its sampler waited on the
 * lock for good, and the process stayed stopped: integration.daemon_guard_compute timed out).
 * Each reader waits SIM_READER_WAIT_MS at most, then reads the state as it stands.
 */
static pid_t stopped_child;

static void reader_hung(int sig)
{
    static const char msg[] = "an NVML reader waited for the stopped process's lock for good\n";

    (void)sig;
    kill(stopped_child, SIGKILL);
    (void)!write(2, msg, sizeof(msg) - 1);
    _exit(1);
}

static void test_nvml_answers_beside_a_stopped_holder(void **state)
{
    struct child c;
    nvmlMemory_t m;
    nvmlUtilization_t u;
    nvmlProcessUtilizationSample_t s[8];
    unsigned n = 8;
    int status;
    uint64_t t0, took;
    long long held;

    (void)state;
    spawn(&c, "stophold", "268435456");
    wait_ready(&c);
    assert_ok(c.rc);
    assert_int_equal(waitpid(c.pid, &status, WUNTRACED), c.pid);
    assert_true(WIFSTOPPED(status));
    /* A reader that waits for the lock would wait for good: failed at 20 s, the child killed. */
    stopped_child = c.pid;
    signal(SIGALRM, reader_hung);
    alarm(20);
    t0 = now_ns();
    held = nvml_process_memory(c.pid); /* two lists, one wait each */
    assert_int_equal(nv.nvmlDeviceGetMemoryInfo(dev0, &m), NVML_SUCCESS);
    assert_int_equal(nv.nvmlDeviceGetUtilizationRates(dev0, &u), NVML_SUCCESS);
    (void)nv.nvmlDeviceGetProcessUtilization(dev0, s, &n, 0);
    took = now_ns() - t0;
    alarm(0);
    /* The stopped process is listed with what it holds (its context's 64 MiB and 256 MiB). */
    assert_int_equal(held, (long long)(64 + 256) * (long long)MiB);
    assert_true(m.used >= (64 + 256) * MiB);
    /* Each of the five calls waited its SIM_READER_WAIT_MS, and not much more. */
    assert_in_range(took / MS, 5 * SIM_READER_WAIT_MS - 5, 5 * SIM_READER_WAIT_MS + 2000);
    kill(c.pid, SIGCONT);
    assert_int_equal(finish(&c), 0);
    /* Continued, it let the lock go: the next reader has it at once. */
    t0 = now_ns();
    assert_int_equal(nvml_process_memory(c.pid), -1);
    assert_true(now_ns() - t0 < (uint64_t)SIM_READER_WAIT_MS * MS);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_processes_see_each_others_memory),
        cmocka_unit_test(test_memory_is_exhausted_across_processes),
        cmocka_unit_test(test_sigkilled_process_memory_is_given_back),
        cmocka_unit_test(test_kernels_of_two_processes_serialise),
        cmocka_unit_test(test_nvml_answers_beside_a_stopped_holder),
    };

    if (argc == 4 && strcmp(argv[1], "child") == 0)
        return child_main(argv[2], argv[3]);
    return cmocka_run_group_tests(tests, setup, teardown);
}
