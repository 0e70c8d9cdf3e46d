/* The tenant's shared state: limits, concurrent charges, dead processes, ABI checks. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/tenant.h"

static const uint8_t uuid0[16] = {1, 2, 3};

static char dir[64];

static int setup(void **state)
{
    (void)state;
    snprintf(dir, sizeof(dir), "/tmp/gs-tenant-test-XXXXXX");
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[128];
    (void)state;
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd) == 0 ? 0 : -1;
}

static void test_charge_refuses_over_limit(void **state)
{
    struct gpuslice_tenant *t;
    char path[256];
    int s, d;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "t", path, sizeof(path), &t), 0);
    s = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    assert_true(s >= 0);
    d = gs_tenant_device(t, uuid0, 100);
    assert_int_equal(d, 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 999), 0); /* existing entry keeps its limit */
    assert_int_equal(t->dev[0].mem_limit, 100);
    assert_int_equal(gs_tenant_charge(t, s, d, 60, 0), 0);
    assert_int_equal(gs_tenant_charge(t, s, d, 41, 0), GS_EOVERLIMIT);
    assert_int_equal(gs_tenant_charge(t, s, d, 40, 0), 0);
    assert_int_equal(t->dev[d].mem_used, 100);
    gs_tenant_uncharge(t, s, d, 30);
    assert_int_equal(t->dev[d].mem_used, 70);
    gs_tenant_uncharge(t, s, d, 1000); /* never below zero */
    assert_int_equal(t->dev[d].mem_used, 0);
    assert_int_equal(gs_tenant_charge(t, s, d, 500, 1), 0); /* forced: driver already took it */
    gs_tenant_proc_unregister(t, s);
    assert_int_equal(t->dev[d].mem_used, 0);
    gs_tenant_close(t);
    unlink(path);
}

struct racer {
    struct gpuslice_tenant *t;
    int slot;
    int granted;
};

static void *race(void *arg)
{
    struct racer *r = arg;
    int i;

    for (i = 0; i < 1000; i++)
        if (gs_tenant_charge(r->t, r->slot, 0, 7, 0) == 0)
            r->granted++;
    return NULL;
}

static void test_many_threads_cannot_overshoot(void **state)
{
    struct gpuslice_tenant *t;
    struct racer r[8];
    pthread_t th[8];
    int i, s, total = 0;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    s = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    gs_tenant_device(t, uuid0, 7 * 1000 + 3);
    for (i = 0; i < 8; i++) {
        r[i] = (struct racer){t, s, 0};
        pthread_create(&th[i], NULL, race, &r[i]);
    }
    for (i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        total += r[i].granted;
    }
    assert_int_equal(total, 1000);
    assert_int_equal(t->dev[0].mem_used, 7000);
    gs_tenant_close(t);
}

static void test_killed_process_usage_is_reclaimed(void **state)
{
    struct gpuslice_tenant *t;
    int p[2], s, st;
    pid_t pid;
    char c;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    gs_tenant_device(t, uuid0, 1000);
    assert_int_equal(pipe(p), 0);
    if ((pid = fork()) == 0) {
        int cs = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
        gs_tenant_charge(t, cs, 0, 900, 0);
        if (write(p[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    assert_int_equal(read(p[0], &c, 1), 1);
    s = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    assert_int_equal(t->dev[0].mem_used, 900);
    assert_int_equal(gs_tenant_charge(t, s, 0, 200, 0), GS_EOVERLIMIT);
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    /* The refused charge reaps the dead process first, then fits. */
    assert_int_equal(gs_tenant_charge(t, s, 0, 200, 0), 0);
    assert_int_equal(t->dev[0].mem_used, 200);
    assert_int_equal(gs_tenant_live_procs(t), 1);
    gs_tenant_close(t);
}

static void test_lock_holder_death_repairs_totals(void **state)
{
    struct gpuslice_tenant *t;
    pid_t pid;
    int st, s;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    gs_tenant_device(t, uuid0, 1000);
    s = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    gs_tenant_charge(t, s, 0, 100, 0);
    if ((pid = fork()) == 0) {
        gs_tenant_lock(t);
        t->dev[0].mem_used = 999999; /* half-done update */
        _exit(0);                    /* dies holding the lock */
    }
    waitpid(pid, &st, 0);
    assert_int_equal(gs_tenant_lock(t), 0);
    assert_int_equal(t->dev[0].mem_used, 100);
    gs_tenant_unlock(t);
    gs_tenant_close(t);
}

static void test_abi_mismatch_is_refused(void **state)
{
    struct gpuslice_tenant *t, *u;
    char path[256];
    int fd;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "t", path, sizeof(path), &t), 0);
    assert_int_equal(gs_tenant_open(path, &u), 0);
    gs_tenant_close(u);
    t->abi_version = GPUSLICE_TENANT_ABI_VERSION + 1;
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    t->abi_version = GPUSLICE_TENANT_ABI_VERSION;
    t->magic = 42;
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    gs_tenant_close(t);
    fd = open(path, O_WRONLY | O_TRUNC);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "short", 5), 5);
    close(fd);
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    assert_int_equal(gs_tenant_open("/nonexistent/x.tenant", &u), -ENOENT);
    unlink(path);
}

static void test_sweep_removes_only_dead_tenants(void **state)
{
    struct gpuslice_tenant *t;
    char live[256], dead[256];
    pid_t pid;
    int st;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "live", live, sizeof(live), &t), 0);
    gs_tenant_close(t);
    if ((pid = fork()) == 0) {
        struct gpuslice_tenant *c;
        FILE *f;
        if (gs_tenant_create(dir, "dead", dead, sizeof(dead), &c) < 0)
            _exit(1);
        f = fopen("/dev/null", "w");
        fclose(f);
        _exit(0);
    }
    waitpid(pid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(gs_tenant_sweep(dir), 1);
    assert_int_equal(access(live, F_OK), 0);
    unlink(live);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_charge_refuses_over_limit),
        cmocka_unit_test(test_many_threads_cannot_overshoot),
        cmocka_unit_test(test_killed_process_usage_is_reclaimed),
        cmocka_unit_test(test_lock_holder_death_repairs_totals),
        cmocka_unit_test(test_abi_mismatch_is_refused),
        cmocka_unit_test(test_sweep_removes_only_dead_tenants),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
