/*
 * Tests of the simulator's configuration: the size parser, and each
 * GPUSLICE_SIM_* variable read strictly by cuInit and nvmlInit in a fresh
 * child process (a bad value: one message naming the variable, and an
 * error, never a crash); a state file nobody uses following the
 * environment, one in use keeping its geometry and saying so; a foreign
 * state file refused.
 */
#include "sim_test.h"
#include "sim_state.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>

struct size_case {
    const char *in;
    int ret;
    uint64_t out;
};

static const struct size_case size_cases[] = {
    { "0", 0, 0 },
    { "1", 0, 1 },
    { "1K", 0, 1024 },
    { "1k", 0, 1024 },
    { "2M", 0, 2 << 20 },
    { "3G", 0, 3ull << 30 },
    { "1T", 0, 1ull << 40 },
    { "17179869184", 0, 17179869184ull },
    { "18446744073709551615", 0, UINT64_MAX },
    { "18446744073709551616", -ERANGE, 0 },
    { "16777216T", -ERANGE, 0 },
    { "", -EINVAL, 0 },
    { "K", -EINVAL, 0 },
    { "1KB", -EINVAL, 0 },
    { "1KiB", -EINVAL, 0 },
    { " 1", -EINVAL, 0 },
    { "1 ", -EINVAL, 0 },
    { "-1", -EINVAL, 0 },
    { "+1", -EINVAL, 0 },
    { "0x10", -EINVAL, 0 },
    { "1.5G", -EINVAL, 0 },
    { "1P", -EINVAL, 0 },
};

static void test_size_parser(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(size_cases) / sizeof(size_cases[0]); i++) {
        const struct size_case *c = &size_cases[i];
        uint64_t out = 12345;
        int r = sim_parse_size(c->in, &out);

        if (r != c->ret || (r == 0 && out != c->out))
            fail_msg("sim_parse_size(\"%s\") = %d, %llu", c->in, r, (unsigned long long)out);
    }
}

static void test_config_defaults(void **state)
{
    struct sim_config cfg;
    char want[64];

    (void)state;
    unsetenv("GPUSLICE_SIM_DEVICES");
    unsetenv("GPUSLICE_SIM_MEMORY");
    unsetenv("GPUSLICE_SIM_SMS");
    unsetenv("GPUSLICE_SIM_CONTEXT_BYTES");
    unsetenv("GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT");
    unsetenv("GPUSLICE_SIM_PITCH_ALIGN");
    unsetenv("GPUSLICE_SIM_SM_ALIGNMENT");
    unsetenv("GPUSLICE_SIM_MODULE_BYTES");
    unsetenv("GPUSLICE_SIM_NVML_DEVICE_SAMPLES");
    unsetenv("GPUSLICE_SIM_HOST_PROC");
    unsetenv("GPUSLICE_SIM_STATE");
    unsetenv("GPUSLICE_SIM_CC");
    unsetenv("GPUSLICE_SIM_NVML_ATTR_SMS");
    unsetenv("GPUSLICE_SIM_NVML_MEM_UNKNOWN");
    assert_int_equal(sim_config_load(&cfg), 0);
    assert_int_equal(cfg.nvml_attr_sms, 0);
    assert_int_equal(cfg.nvml_mem_unknown, 0);
    assert_int_equal(cfg.cc_major, 9);
    assert_int_equal(cfg.cc_minor, 0);
    assert_int_equal(cfg.devices, 1);
    assert_int_equal(cfg.sms, 132);
    assert_int_equal(cfg.memory, 16 * GiB);
    assert_int_equal(cfg.context_bytes, 64 * MiB);
    assert_int_equal(cfg.dev_shift_pct, 40);
    assert_int_equal(cfg.pitch_align, 512);
    assert_int_equal(cfg.sm_align, 0);
    assert_int_equal(cfg.module_bytes, 0);
    assert_int_equal(cfg.dev_samples_mono, 0);
    snprintf(want, sizeof(want), "/dev/shm/gpuslice-sim-%u", (unsigned)getuid());
    assert_string_equal(cfg.state_path, want);
}

struct child_result {
    int cu_init, cu_init_again, nvml_init;
    int devices;
    unsigned long long total;
    char err[2048];
};

/* Runs cuInit (twice) and nvmlInit in a fresh child with var=value set. */
static void run_child(const char *var, const char *value, const char *state_path,
                      struct child_result *res)
{
    int out[2], err[2], status;
    pid_t pid;
    ssize_t n;
    size_t got = 0;
    char buf[256];

    memset(res, 0, sizeof(*res));
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct cu cu;
        struct nvml nv;
        int a, b, c, count = -1;
        size_t total = 0;

        dup2(err[1], 2);
        setenv("GPUSLICE_SIM_STATE", state_path, 1);
        if (var)
            setenv(var, value, 1);
        if (cu_load(&cu) < 0 || nvml_load(&nv) < 0)
            _exit(3);
        a = cu.cuInit(0);
        b = cu.cuInit(0);
        c = nv.nvmlInit_v2();
        if (a == CUDA_SUCCESS) {
            cu.cuDeviceGetCount(&count);
            cu.cuDeviceTotalMem_v2(&total, 0);
        }
        n = snprintf(buf, sizeof(buf), "%d %d %d %d %llu\n", a, b, c, count,
                     (unsigned long long)total);
        if (write(out[1], buf, (size_t)n) != n)
            _exit(4);
        _exit(0);
    }
    close(out[1]);
    close(err[1]);
    n = read(out[0], buf, sizeof(buf) - 1);
    assert_true(n > 0);
    buf[n] = '\0';
    assert_int_equal(sscanf(buf, "%d %d %d %d %llu", &res->cu_init, &res->cu_init_again,
                            &res->nvml_init, &res->devices, &res->total),
                     5);
    while ((n = read(err[0], res->err + got, sizeof(res->err) - 1 - got)) > 0)
        got += (size_t)n;
    res->err[got] = '\0';
    close(out[0]);
    close(err[0]);
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static int count_lines(const char *s)
{
    int n = 0;

    for (; *s; s++)
        n += *s == '\n';
    return n;
}

static char state_dir[128];

static void state_file(char *out, size_t len, const char *name)
{
    snprintf(out, len, "%s/gpuslice-sim-env-%s-%d", state_dir, name, (int)getpid());
    unlink(out);
}

struct env_case {
    const char *var;
    const char *value;
    int ok;
};

static const struct env_case env_cases[] = {
    { "GPUSLICE_SIM_DEVICES", "1", 1 },
    { "GPUSLICE_SIM_DEVICES", "16", 1 },
    { "GPUSLICE_SIM_DEVICES", "0", 0 },
    { "GPUSLICE_SIM_DEVICES", "17", 0 },
    { "GPUSLICE_SIM_DEVICES", "2x", 0 },
    { "GPUSLICE_SIM_DEVICES", "", 0 },
    { "GPUSLICE_SIM_DEVICES", " 1", 0 },
    { "GPUSLICE_SIM_DEVICES", "+1", 0 },
    { "GPUSLICE_SIM_MEMORY", "16G", 1 },
    { "GPUSLICE_SIM_MEMORY", "2048m", 1 },
    { "GPUSLICE_SIM_MEMORY", "17179869184", 1 },
    { "GPUSLICE_SIM_MEMORY", "1T", 1 },
    { "GPUSLICE_SIM_MEMORY", "12X", 0 },
    { "GPUSLICE_SIM_MEMORY", "0", 0 },
    { "GPUSLICE_SIM_MEMORY", "1M", 0 },
    { "GPUSLICE_SIM_MEMORY", "1.5G", 0 },
    { "GPUSLICE_SIM_MEMORY", "-1", 0 },
    { "GPUSLICE_SIM_MEMORY", "99999999999999999999", 0 },
    { "GPUSLICE_SIM_MEMORY", "2048T", 0 },
    { "GPUSLICE_SIM_SMS", "132", 1 },
    { "GPUSLICE_SIM_SMS", "0", 0 },
    { "GPUSLICE_SIM_SMS", "abc", 0 },
    { "GPUSLICE_SIM_SMS", "1025", 0 },
    { "GPUSLICE_SIM_CONTEXT_BYTES", "0", 1 },
    { "GPUSLICE_SIM_CONTEXT_BYTES", "64M", 1 },
    { "GPUSLICE_SIM_CONTEXT_BYTES", "x", 0 },
    { "GPUSLICE_SIM_CONTEXT_BYTES", "", 0 },
    { "GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT", "0", 1 },
    { "GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT", "99", 1 },
    { "GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT", "100", 0 },
    { "GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT", "40%", 0 },
    { "GPUSLICE_SIM_PITCH_ALIGN", "2048", 1 },
    { "GPUSLICE_SIM_PITCH_ALIGN", "256", 0 },
    { "GPUSLICE_SIM_PITCH_ALIGN", "768", 0 },
    { "GPUSLICE_SIM_PITCH_ALIGN", "131072", 0 },
    { "GPUSLICE_SIM_SM_ALIGNMENT", "1", 1 },
    { "GPUSLICE_SIM_SM_ALIGNMENT", "1024", 1 },
    { "GPUSLICE_SIM_SM_ALIGNMENT", "0", 0 },
    { "GPUSLICE_SIM_SM_ALIGNMENT", "1025", 0 },
    { "GPUSLICE_SIM_CC", "7.0", 1 },
    { "GPUSLICE_SIM_CC", "8.0", 1 },
    { "GPUSLICE_SIM_CC", "12.9", 1 },
    { "GPUSLICE_SIM_CC", "6.1", 0 },
    { "GPUSLICE_SIM_CC", "13.0", 0 },
    { "GPUSLICE_SIM_CC", "8", 0 },
    { "GPUSLICE_SIM_CC", "8.10", 0 },
    { "GPUSLICE_SIM_CC", " 8.0", 0 },
    { "GPUSLICE_SIM_CC", "8,0", 0 },
    { "GPUSLICE_SIM_CC", "", 0 },
    { "GPUSLICE_SIM_NVML_ATTR_SMS", "0", 1 },
    { "GPUSLICE_SIM_NVML_ATTR_SMS", "1024", 1 },
    { "GPUSLICE_SIM_NVML_ATTR_SMS", "1025", 0 },
    { "GPUSLICE_SIM_NVML_ATTR_SMS", "66x", 0 },
    { "GPUSLICE_SIM_NVML_ATTR_SMS", "", 0 },
    { "GPUSLICE_SIM_NVML_MEM_UNKNOWN", "1", 1 },
    { "GPUSLICE_SIM_NVML_MEM_UNKNOWN", "0", 1 },
    { "GPUSLICE_SIM_NVML_MEM_UNKNOWN", "yes", 0 },
    { "GPUSLICE_SIM_MODULE_BYTES", "64M", 1 },
    { "GPUSLICE_SIM_MODULE_BYTES", "12Q", 0 },
    { "GPUSLICE_SIM_NVML_DEVICE_SAMPLES", "monotonic", 1 },
    { "GPUSLICE_SIM_NVML_DEVICE_SAMPLES", "realtime", 1 },
    { "GPUSLICE_SIM_NVML_DEVICE_SAMPLES", "mono", 0 },
    { "GPUSLICE_SIM_HOST_PROC", "/proc", 1 },
    { "GPUSLICE_SIM_HOST_PROC", "/tmp", 0 },
    { "GPUSLICE_SIM_HOST_PROC", "proc", 0 },
    { "GPUSLICE_SIM_HOST_PROC", "", 0 },
};

static void test_each_variable_is_parsed_strictly(void **state)
{
    char path[256];
    struct child_result r;

    (void)state;
    for (size_t i = 0; i < sizeof(env_cases) / sizeof(env_cases[0]); i++) {
        const struct env_case *c = &env_cases[i];

        state_file(path, sizeof(path), "case");
        run_child(c->var, c->value, path, &r);
        if (c->ok) {
            if (r.cu_init != CUDA_SUCCESS || r.nvml_init != NVML_SUCCESS || r.err[0])
                fail_msg("%s=\"%s\": cuInit %d nvmlInit %d, stderr \"%s\"", c->var, c->value,
                         r.cu_init, r.nvml_init, r.err);
        } else {
            /* One message per library, naming the variable and the value. */
            if (r.cu_init != CUDA_ERROR_INVALID_VALUE || r.cu_init_again != r.cu_init ||
                r.nvml_init == NVML_SUCCESS || count_lines(r.err) != 2 || !strstr(r.err, c->var))
                fail_msg("%s=\"%s\": cuInit %d, %d nvmlInit %d, stderr \"%s\"", c->var, c->value,
                         r.cu_init, r.cu_init_again, r.nvml_init, r.err);
        }
        unlink(path);
    }
}

/* GPUSLICE_SIM_CC=MAJOR.MINOR, and the CUDA cores of each architecture's SM. */
static void test_compute_capability_and_cores_per_sm(void **state)
{
    struct sim_config cfg;

    (void)state;
    setenv("GPUSLICE_SIM_CC", "8.0", 1);
    assert_int_equal(sim_config_load(&cfg), 0);
    assert_int_equal(cfg.cc_major, 8);
    assert_int_equal(cfg.cc_minor, 0);
    setenv("GPUSLICE_SIM_CC", "12.1", 1);
    assert_int_equal(sim_config_load(&cfg), 0);
    assert_int_equal(cfg.cc_major, 12);
    assert_int_equal(cfg.cc_minor, 1);
    unsetenv("GPUSLICE_SIM_CC");
    assert_int_equal(sim_cores_per_sm(7, 0), 64);  /* V100 */
    assert_int_equal(sim_cores_per_sm(7, 5), 64);  /* T4 */
    assert_int_equal(sim_cores_per_sm(8, 0), 64);  /* A100: 108 SMs, 6912 cores */
    assert_int_equal(sim_cores_per_sm(8, 6), 128); /* A10, RTX 30x0 */
    assert_int_equal(sim_cores_per_sm(8, 9), 128); /* L4, L40 */
    assert_int_equal(sim_cores_per_sm(9, 0), 128); /* H100, H200: 132 SMs, 16896 cores */
    assert_int_equal(sim_cores_per_sm(10, 0), 128);
}

static void test_bad_state_paths_are_refused(void **state)
{
    char path[256];
    struct child_result r;
    int fd;

    (void)state;
    run_child(NULL, NULL, "", &r);
    assert_int_equal(r.cu_init, CUDA_ERROR_INVALID_VALUE);
    assert_non_null(strstr(r.err, "GPUSLICE_SIM_STATE"));
    run_child(NULL, NULL, "/nonexistent-dir/state", &r);
    assert_int_equal(r.cu_init, CUDA_ERROR_OPERATING_SYSTEM);
    assert_int_equal(r.cu_init_again, CUDA_ERROR_OPERATING_SYSTEM);
    assert_int_equal(count_lines(r.err), 2);
    assert_non_null(strstr(r.err, "GPUSLICE_SIM_STATE"));
    /* A file of another size is another layout: refused, not reinterpreted. */
    state_file(path, sizeof(path), "foreign");
    fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "not a simulator state", 21), 21);
    close(fd);
    run_child(NULL, NULL, path, &r);
    assert_int_equal(r.cu_init, CUDA_ERROR_OPERATING_SYSTEM);
    assert_non_null(strstr(r.err, "another version"));
    unlink(path);
}

/* A file nobody has open follows the environment: a new geometry starts it afresh. */
static void test_unused_state_follows_the_environment(void **state)
{
    char path[256];
    struct child_result r;
    struct stat sb;

    (void)state;
    state_file(path, sizeof(path), "geometry");
    setenv("GPUSLICE_SIM_MEMORY", "1G", 1);
    run_child("GPUSLICE_SIM_DEVICES", "3", path, &r);
    assert_int_equal(r.cu_init, CUDA_SUCCESS);
    assert_int_equal(r.devices, 3);
    assert_int_equal(r.total, GiB);
    assert_string_equal(r.err, "");
    assert_int_equal(stat(path, &sb), 0);
    assert_int_equal(sb.st_mode & 0777, 0600);
    setenv("GPUSLICE_SIM_MEMORY", "4G", 1);
    run_child("GPUSLICE_SIM_DEVICES", "1", path, &r);
    assert_int_equal(r.cu_init, CUDA_SUCCESS);
    assert_int_equal(r.devices, 1);
    assert_int_equal(r.total, 4 * GiB);
    assert_string_equal(r.err, ""); /* nothing to say: nobody else saw the old geometry */
    unsetenv("GPUSLICE_SIM_MEMORY");
    unlink(path);
}

/*
 * A file another process has open keeps its geometry, and a process whose
 * environment asks for another one is told so in one line (per library),
 * naming the variables, the file, what it holds and how to change it.
 */
static void test_state_in_use_keeps_its_geometry_and_says_so(void **state)
{
    struct sim_config cfg;
    struct sim_state st;
    struct child_result r;
    char path[256];

    (void)state;
    state_file(path, sizeof(path), "inuse");
    unsetenv("GPUSLICE_SIM_MEMORY");
    unsetenv("GPUSLICE_SIM_DEVICES");
    setenv("GPUSLICE_SIM_STATE", path, 1);
    assert_int_equal(sim_config_load(&cfg), 0);
    assert_int_equal(sim_state_open(&cfg, &st), 0); /* this process holds it: 1 device, 16G */
    run_child("GPUSLICE_SIM_DEVICES", "2", path, &r);
    assert_int_equal(r.cu_init, CUDA_SUCCESS);
    assert_int_equal(r.nvml_init, NVML_SUCCESS);
    assert_int_equal(r.devices, 1);
    assert_int_equal(r.total, 16 * GiB);
    assert_int_equal(count_lines(r.err), 2); /* libcuda's and NVML's */
    assert_non_null(strstr(r.err, "GPUSLICE_SIM_DEVICES=2"));
    assert_non_null(strstr(r.err, path));
    assert_non_null(strstr(r.err, "holds 1 device of 132 SMs and 16G"));
    assert_non_null(strstr(r.err, "remove the file"));
    /* The same geometry: silent. */
    run_child("GPUSLICE_SIM_DEVICES", "1", path, &r);
    assert_int_equal(r.devices, 1);
    assert_string_equal(r.err, "");
    /* Once this process lets go, the environment wins again. */
    sim_state_close(&st);
    run_child("GPUSLICE_SIM_DEVICES", "2", path, &r);
    assert_int_equal(r.devices, 2);
    assert_string_equal(r.err, "");
    unsetenv("GPUSLICE_SIM_STATE");
    unlink(path);
}

struct visible_case {
    const char *spec; /* NULL: unset */
    const char *want; /* the physical indices shown, e.g. "2 0" */
};

/* Three devices: GPU-5ac1ce00-0000-4000-8000-00000000000{0,1,2}. */
static const struct visible_case visible_cases[] = {
    { NULL, "0 1 2" },
    { "", "" },
    { "0", "0" },
    { "2,0", "2 0" },
    { "0,2,-1,1", "0 2" }, /* CUDA's own example: the invalid entry ends the list */
    { "1,3,0", "1" },      /* no device 3 */
    { "1,,0", "1" },
    { " 1 , 2", "1 2" }, /* read like strtoul */
    { "1gpu,2x", "1 2" },
    { "+1", "1" },
    { "-1", "" },
    { "x,0", "" },
    { "0,1,0", "" }, /* a device named twice: none */
    { "GPU-5ac1ce00-0000-4000-8000-000000000002", "2" },
    { "GPU-5ac1ce00-0000-4000-8000-000000000002,GPU-5ac1ce00-0000-4000-8000-000000000000", "2 0" },
    { "GPU-5ac1ce00-0000-4000-8000-000000000001,0", "1" }, /* the first entry sets the form */
    { "0,GPU-5ac1ce00-0000-4000-8000-000000000001", "0" },
    { "GPU-5ac1ce00-0000-4000-8000-00000000000", "" }, /* a prefix of all three: ambiguous */
    { "GPU-5ac1ce00", "" },
    { "GPU-5ac1ce00-0000-4000-8000-0000000000011", "" }, /* longer than any */
    { "GPU-5ac1ce00-0000-4000-8000-000000000001,GPU-5ac1ce00-0000-4000-8000-000000000001", "" },
    { "GPU-5AC1CE00-0000-4000-8000-000000000001", "" }, /* as nvidia-smi prints them: lower case */
    { "MIG-5ac1ce00-0000-4000-8000-000000000001/1/0", "" }, /* no MIG here */
};

static void test_cuda_visible_devices_is_read_as_cuda_reads_it(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(visible_cases) / sizeof(visible_cases[0]); i++) {
        const struct visible_case *c = &visible_cases[i];
        int out[SIM_MAX_DEVICES], n = sim_visible_devices(c->spec, 3, out);
        char got[128] = "";
        size_t len = 0;

        for (int k = 0; k < n; k++)
            len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%d", k ? " " : "", out[k]);
        if (strcmp(got, c->want) != 0)
            fail_msg("CUDA_VISIBLE_DEVICES=\"%s\": devices \"%s\", want \"%s\"",
                     c->spec ? c->spec : "(unset)", got, c->want);
    }
    /* A one-GPU machine: its whole UUID's shortest prefix names it. */
    {
        int out[SIM_MAX_DEVICES];
        assert_int_equal(sim_visible_devices("GPU-", 1, out), 1);
        assert_int_equal(sim_visible_devices("GPU-5", 1, out), 1);
        assert_int_equal(sim_visible_devices("1", 1, out), 0);
    }
}

/* A process that dies holding the state lock does not lock everyone out (robust mutex). */
static void test_lock_held_by_a_dead_process_is_recovered(void **state)
{
    struct sim_config cfg;
    struct sim_state st;
    char path[256];
    pid_t pid;
    int status;

    (void)state;
    state_file(path, sizeof(path), "robust");
    unsetenv("GPUSLICE_SIM_MEMORY");
    setenv("GPUSLICE_SIM_STATE", path, 1);
    assert_int_equal(sim_config_load(&cfg), 0);
    assert_int_equal(sim_state_open(&cfg, &st), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sim_proc *me;
        sim_state_lock(&st);
        me = sim_state_self(&st);
        me->held[0] += 1 << 20;
        _exit(0); /* dies holding the lock and 1 MiB */
    }
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sim_state_lock(&st); /* EOWNERDEAD, made consistent; the dead process is swept */
    assert_int_equal(sim_state_used(st.sh, 0), 0);
    sim_state_unlock(&st);
    assert_int_equal(sim_state_charge(&st, 0, 5 << 20), 0);
    sim_state_lock(&st);
    assert_int_equal(sim_state_used(st.sh, 0), 5 << 20);
    sim_state_unlock(&st);
    sim_state_release_self(&st);
    sim_state_close(&st);
    unsetenv("GPUSLICE_SIM_STATE");
    unlink(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_size_parser),
        cmocka_unit_test(test_cuda_visible_devices_is_read_as_cuda_reads_it),
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_each_variable_is_parsed_strictly),
        cmocka_unit_test(test_compute_capability_and_cores_per_sm),
        cmocka_unit_test(test_bad_state_paths_are_refused),
        cmocka_unit_test(test_unused_state_follows_the_environment),
        cmocka_unit_test(test_state_in_use_keeps_its_geometry_and_says_so),
        cmocka_unit_test(test_lock_held_by_a_dead_process_is_recovered),
    };

    snprintf(state_dir, sizeof(state_dir), "%s",
             access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
    unsetenv("CUDA_VISIBLE_DEVICES"); /* the children choose their devices */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
