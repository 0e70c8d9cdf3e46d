/*
 * The second wall (the daemon's guard/wall.c): a pod container's memory limit set in the
 * driver (nvmlDeviceSetMemoryLimits_v1, r615 and later) once per (GPU, cgroup) and value, not
 * again at every guard pass; a new value, another GPU or another cgroup is set; a call the
 * driver refused is tried again; nothing where the driver has no such limits. The driver here
 * is this program: wall.c finds the call in the handle it is given (dlopen(NULL): this
 * executable, which exports it), and each call is recorded.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/daemon.h"
#include "daemon/guard/guard.h"

struct gd_state gd;

void gd_log(const char *fmt, ...)
{
    (void)fmt;
}

/* r615's argument (nvml.h of CUDA 13.4). */
struct limits {
    const char *nameSpace;
    unsigned long long softLimit;
    unsigned long long hardLimit;
};

static struct {
    int n;          /* calls */
    int dev;        /* the last call's */
    char path[256]; /* the last call's */
    unsigned long long soft, hard;
    nvmlReturn_t answer; /* what the next call answers */
} set;

/* Exported: wall.c finds it with dlsym in this executable. */
nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, struct limits *l);

static struct nvmlDevice_st *dev_handle(unsigned idx)
{
    return (struct nvmlDevice_st *)(uintptr_t)(0x1000 + idx);
}

__attribute__((visibility("default"))) nvmlReturn_t
nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device, struct limits *l)
{
    set.n++;
    set.dev = (int)((uintptr_t)device - 0x1000);
    snprintf(set.path, sizeof(set.path), "%s", l->nameSpace);
    set.soft = l->softLimit;
    set.hard = l->hardLimit;
    return set.answer;
}

static nvmlReturn_t handle_by_index(unsigned int index, nvmlDevice_t *device)
{
    *device = dev_handle(index);
    return NVML_SUCCESS;
}

static const char *error_string(nvmlReturn_t r)
{
    (void)r;
    return "error";
}

static void start(const char *version)
{
    memset(&set, 0, sizeof(set));
    gd.drv.nvml = dlopen(NULL, RTLD_NOW);
    gd.drv.nvmlDeviceGetHandleByIndex_v2 = handle_by_index;
    gd.drv.nvmlErrorString = error_string;
    snprintf(gd.driver_version, sizeof(gd.driver_version), "%s", version);
    assert_int_equal(gd_wall_start(), 0);
}

#define A "/sys/fs/cgroup/kubepods.slice/a.scope"
#define B "/sys/fs/cgroup/kubepods.slice/b.scope"
#define G (1ULL << 30)

static void test_once_per_value(void **state)
{
    unsigned long base;

    (void)state;
    start("615.00");
    assert_string_equal(gd_wall_state(), "driver");
    base = gd_wall_count();
    gd_wall_apply(0, A, G);
    assert_int_equal(set.n, 1);
    assert_int_equal(set.dev, 0);
    assert_string_equal(set.path, A);
    assert_int_equal(set.soft, 0);
    assert_int_equal(set.hard, G);
    assert_int_equal(gd_wall_count(), base + 1);
    /* The same limit at the next passes: set already, the driver is not called again. */
    gd_wall_apply(0, A, G);
    gd_wall_apply(0, A, G);
    assert_int_equal(set.n, 1);
    assert_int_equal(gd_wall_count(), base + 1);
    /* Another value for the pair: set; then kept. */
    gd_wall_apply(0, A, 2 * G);
    assert_int_equal(set.n, 2);
    assert_int_equal(set.hard, 2 * G);
    gd_wall_apply(0, A, 2 * G);
    assert_int_equal(set.n, 2);
    /* The same cgroup on another GPU, another cgroup on the same GPU: pairs of their own. */
    gd_wall_apply(1, A, 2 * G);
    assert_int_equal(set.n, 3);
    assert_int_equal(set.dev, 1);
    gd_wall_apply(0, B, 2 * G);
    assert_int_equal(set.n, 4);
    assert_string_equal(set.path, B);
    gd_wall_apply(1, A, 2 * G);
    gd_wall_apply(0, B, 2 * G);
    gd_wall_apply(0, A, 2 * G);
    assert_int_equal(set.n, 4);
    assert_int_equal(gd_wall_count(), base + 4);
    /* No limit (0) or no cgroup: nothing to set. */
    gd_wall_apply(0, "/sys/fs/cgroup/c.scope", 0);
    gd_wall_apply(0, "", G);
    assert_int_equal(set.n, 4);
}

static void test_refused_tried_again(void **state)
{
    (void)state;
    start("615.00");
    set.answer = NVML_ERROR_NO_PERMISSION;
    gd_wall_apply(2, A, G);
    assert_int_equal(set.n, 1);
    /* Refused: not taken for set; the next pass tries again, and once set it is kept. */
    set.answer = NVML_SUCCESS;
    gd_wall_apply(2, A, G);
    assert_int_equal(set.n, 2);
    gd_wall_apply(2, A, G);
    assert_int_equal(set.n, 2);
}

static void test_no_wall_before_615(void **state)
{
    (void)state;
    start("580.159.04");
    assert_non_null(strstr(gd_wall_state(), "r615"));
    gd_wall_apply(0, A, G);
    assert_int_equal(set.n, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_once_per_value),
        cmocka_unit_test(test_refused_tried_again),
        cmocka_unit_test(test_no_wall_before_615),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
