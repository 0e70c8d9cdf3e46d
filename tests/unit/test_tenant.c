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
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/board.h"
#include "common/shm.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/tenant.h"

static const uint8_t uuid0[16] = { 1, 2, 3 };

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
    d = gs_tenant_device(t, uuid0, 0, 100, 0);
    assert_int_equal(d, 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 0, 999, 0), 0); /* existing entry keeps its limit */
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
    gs_tenant_device(t, uuid0, 0, 7 * 1000 + 3, 0);
    for (i = 0; i < 8; i++) {
        r[i] = (struct racer){ t, s, 0 };
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
    gs_tenant_device(t, uuid0, 0, 1000, 0);
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

/* A refund is held to the process's own usage: another process's stays counted. */
static void test_uncharge_beyond_own_usage_leaves_others_usage(void **state)
{
    struct gpuslice_tenant *t;
    pid_t parent = getppid();
    int a, b;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    gs_tenant_device(t, uuid0, 0, 1000, 0);
    a = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    b = gs_tenant_proc_register(t, parent, gs_proc_start_time(parent));
    assert_true(a >= 0 && b >= 0 && a != b);
    assert_int_equal(gs_tenant_charge(t, a, 0, 100, 0), 0);
    assert_int_equal(gs_tenant_charge(t, b, 0, 200, 0), 0);
    gs_tenant_uncharge(t, a, 0, 150);
    assert_int_equal(t->proc[a].mem_used[0], 0);
    assert_int_equal(t->proc[b].mem_used[0], 200);
    assert_int_equal(t->dev[0].mem_used, 200);
    gs_tenant_close(t);
}

static void test_lock_holder_death_repairs_totals(void **state)
{
    struct gpuslice_tenant *t;
    pid_t pid;
    int st, s;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    gs_tenant_device(t, uuid0, 0, 1000, 0);
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

/* Audit defect 1: a request of about 2^64 bytes wraps no total, with or without a limit. */
static void test_charge_that_would_wrap_is_refused_with_or_without_a_limit(void **state)
{
    struct gpuslice_tenant *t;
    int s;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    gs_tenant_device(t, uuid0, 0, 1 << 30, 0);
    gs_tenant_device(t, (const uint8_t[16]){ 9 }, 1, 0, 0); /* entry 1: no limit */
    s = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    assert_int_equal(gs_tenant_charge(t, s, 0, 256 << 20, 0), 0);
    assert_int_equal(gs_tenant_charge(t, s, 0, UINT64_MAX - (128 << 20), 0), GS_EOVERLIMIT);
    assert_int_equal(gs_tenant_charge(t, s, 0, UINT64_MAX, 0), GS_EOVERLIMIT);
    assert_int_equal(t->dev[0].mem_used, 256 << 20);
    assert_int_equal(t->proc[s].mem_used[0], 256 << 20);
    assert_int_equal(gs_tenant_charge(t, s, 1, 4096, 0), 0);
    assert_int_equal(gs_tenant_charge(t, s, 1, UINT64_MAX - 100, 0), GS_EOVERLIMIT);
    assert_int_equal(gs_tenant_charge(t, s, 1, UINT64_MAX - 100, 1), GS_EOVERLIMIT);
    assert_int_equal(t->dev[1].mem_used, 4096);
    /* A refund of what was never charged takes nothing below zero. */
    gs_tenant_uncharge(t, s, 0, UINT64_MAX);
    assert_int_equal(t->dev[0].mem_used, 0);
    assert_int_equal(gs_tenant_charge(t, s, 0, 1 << 30, 0), 0);
    assert_int_equal(gs_tenant_charge(t, s, 0, 1, 0), GS_EOVERLIMIT);
    gs_tenant_close(t);
}

/*
 * Audit defect 2: the lock lives in a file its owner may rewrite. A word naming
 * a live thread that never lets go costs a bounded wait; one naming a dead
 * thread is taken over; garbage around it (where a glibc mutex kept its
 * robust-list pointers) means nothing.
 */
static void test_lock_word_from_the_file_costs_at_most_a_bounded_wait(void **state)
{
    struct gpuslice_tenant *t;
    struct timespec a, b;
    pid_t dead;
    int st;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    memset(t->lock.raw, 0xa5, sizeof(t->lock.raw));
    t->lock.word = (uint32_t)getppid(); /* alive, and never going to unlock */
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(gs_tenant_lock(t), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true(b.tv_sec - a.tv_sec >= 1 && b.tv_sec - a.tv_sec <= 4);
    if ((dead = fork()) == 0)
        _exit(0);
    waitpid(dead, &st, 0);
    /* (A dead holder is one of this namespace: a TID of another means nothing here.) */
    t->lock.holder = (uint64_t)gs_proc_self_ns() << 32 | (uint32_t)dead | GPUSLICE_LOCK_WAITERS;
    assert_int_equal(gs_tenant_lock(t), 0);
    gs_tenant_unlock(t);
    assert_int_equal(t->lock.word, 0);
    assert_int_equal(gs_tenant_lock(t), 0);
    gs_tenant_unlock(t);
    gs_tenant_close(t);
}

/* Audit defect 8: a file others may write is nobody's tenant; the owner is fstat's. */
static void test_open_refuses_files_others_may_write(void **state)
{
    struct gpuslice_tenant *t, *u;
    char path[256];
    uid_t owner = 12345;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "t", path, sizeof(path), &t), 0);
    t->owner_uid = 0; /* what its writer claims */
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), 0);
    assert_int_equal(owner, getuid());
    gs_tenant_close(u);
    chmod(path, 0666);
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), GS_EUNSAFE);
    assert_int_equal(gs_tenant_open(path, &u), GS_EUNSAFE);
    chmod(path, 0620);
    assert_int_equal(gs_tenant_open(path, &u), GS_EUNSAFE);
    chmod(path, 0600);
    assert_int_equal(gs_tenant_open(path, &u), 0);
    gs_tenant_close(u);
    gs_tenant_close(t);
    unlink(path);
}

/*
 * A read-only open is a copy: its owner truncating the file afterwards (which kills a
 * reader of a mapping with SIGBUS) costs the reader nothing, and later changes do not reach it.
 */
static void test_read_only_open_is_a_copy_truncation_cannot_break(void **state)
{
    struct gpuslice_tenant *t, *u;
    char path[256];
    uid_t owner;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "copy", path, sizeof(path), &t), 0);
    gs_tenant_device(t, uuid0, 0, 1000, 0);
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), 0);
    t->dev[0].mem_limit = 2000;
    assert_int_equal(truncate(path, 0), 0);
    assert_int_equal(u->magic, GPUSLICE_TENANT_MAGIC);
    assert_int_equal(u->dev[0].mem_limit, 1000);
    gs_tenant_close(u);
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), GS_EABI);
    gs_tenant_close(t);
    unlink(path);
}

/* Audit defect 13: a file planted under the board's name is passed over, not obeyed. */
static void test_board_planted_under_its_name_is_passed_over(void **state)
{
    struct gpuslice_board *a, *b;
    char path[512], note[600];
    int fd, i;

    (void)state;
    snprintf(path, sizeof(path), "%s/" GS_TENANT_PREFIX "%u-gpu-", dir, (unsigned)getuid());
    for (i = 0; i < 16; i++)
        snprintf(path + strlen(path), sizeof(path) - strlen(path), "%02x", uuid0[i]);
    strcat(path, ".board");
    assert_true((fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0666)) >= 0);
    assert_int_equal(ftruncate(fd, sizeof(struct gpuslice_board)), 0);
    fchmod(fd, 0666); /* writable by anyone: not a board to trust */
    close(fd);
    assert_int_equal(gs_board_open(dir, uuid0, &a, note, sizeof(note)), 0);
    assert_non_null(strstr(note, "not a board of yours"));
    assert_int_equal(gs_board_open(dir, uuid0, &b, NULL, 0), 0);
    /* Both took the next name: one board, so turns are still taken. */
    assert_int_equal(gs_board_try_acquire(a, getpid(), 1, 1000), 1);
    assert_int_equal(b->holder_pid, getpid());
    gs_board_release(a, getpid());
    gs_board_close(a);
    gs_board_close(b);
    strcat(path, ".1");
    assert_int_equal(access(path, F_OK), 0);
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

/* A later minor version (fields added at the end) is read by this one; another major is not. */
static void test_a_later_minor_version_is_read_and_another_major_refused(void **state)
{
    struct gpuslice_tenant *t, *u;
    char path[256], err[600], zeros[256] = { 0 };
    uid_t owner;
    int fd;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "minor", path, sizeof(path), &t), 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 0, 1000, 0), 0);
    /* As a writer of a later minor version would leave it: 256 bytes more at the end. */
    fd = open(path, O_WRONLY | O_APPEND);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, zeros, sizeof(zeros)), (ssize_t)sizeof(zeros));
    close(fd);
    t->abi_version = GPUSLICE_ABI(GPUSLICE_TENANT_ABI_MAJOR, 9);
    t->size = (uint32_t)(sizeof(*t) + sizeof(zeros));
    assert_int_equal(gs_tenant_open(path, &u), 0);
    assert_int_equal(u->dev[0].mem_limit, 1000);
    gs_tenant_close(u);
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), 0);
    assert_int_equal(u->dev[0].mem_limit, 1000);
    gs_tenant_close(u);
    assert_int_equal(gs_shm_check_file(path, GPUSLICE_TENANT_MAGIC, GPUSLICE_TENANT_ABI_MAJOR,
                                       sizeof(*t), "tenant", err, sizeof(err)),
                     0);
    /* A size past the end of its file, or short of this layout, is refused. */
    t->size = (uint32_t)(sizeof(*t) + sizeof(zeros) + 1);
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    t->size = (uint32_t)GPUSLICE_TENANT_SIZE_4_3 - 8;
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    t->size = (uint32_t)sizeof(*t);
    /* Another major: refused, and the message names the file and both versions. */
    t->abi_version = GPUSLICE_ABI(GPUSLICE_TENANT_ABI_MAJOR + 1, 2);
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), GS_EABI);
    assert_int_equal(gs_shm_check_file(path, GPUSLICE_TENANT_MAGIC, GPUSLICE_TENANT_ABI_MAJOR,
                                       sizeof(*t), "tenant", err, sizeof(err)),
                     GS_EABI);
    assert_non_null(strstr(err, path));
    assert_non_null(strstr(err, "tenant ABI 5.2"));
    assert_non_null(strstr(err, "reads tenant ABI 4.x"));
    gs_tenant_close(t);
    unlink(path);
}

/*
 * A 4.3 file (a tenant that ran before an upgrade) is joined by a writer as well: its header's
 * size says it lacks the activity words at the end, which the writer then leaves alone.
 */
static void test_a_4_3_file_is_joined(void **state)
{
    struct gpuslice_tenant *t, *u;
    char path[256];

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "older", path, sizeof(path), &t), 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 0, 1000, 0), 0);
    t->abi_version = GPUSLICE_ABI(4, 3);
    t->size = GPUSLICE_TENANT_SIZE_4_3;
    gs_tenant_close(t);
    assert_int_equal(truncate(path, GPUSLICE_TENANT_SIZE_4_3), 0);
    assert_int_equal(gs_tenant_open(path, &u), 0);
    assert_int_equal(u->dev[0].mem_limit, 1000);
    assert_true(u->size < sizeof(*u));
    gs_tenant_close(u);
    assert_int_equal(truncate(path, GPUSLICE_TENANT_SIZE_4_3 - 8), 0);
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    unlink(path);
}

/*
 * A 4.1 file (a tenant of the version before, its counters missing) is read by readers that
 * only read (the daemon, listings), its counters as 0; a process joining it is refused.
 */
static void test_a_4_1_file_is_read_but_not_joined(void **state)
{
    struct gpuslice_tenant *t, *u;
    char path[256];
    uid_t owner;

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "old", path, sizeof(path), &t), 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 0, 1000, 0), 0);
    t->mem_refused[0] = 99;
    t->abi_version = GPUSLICE_ABI(4, 1);
    t->size = GPUSLICE_TENANT_SIZE_4_1;
    gs_tenant_close(t);
    assert_int_equal(truncate(path, GPUSLICE_TENANT_SIZE_4_1), 0);
    assert_int_equal(gs_tenant_open_owned(path, 0, &owner, &u), 0);
    assert_int_equal(u->dev[0].mem_limit, 1000);
    assert_int_equal(u->mem_refused[0], 0);
    gs_tenant_close(u);
    assert_int_equal(gs_tenant_open(path, &u), GS_EABI);
    /* 4.0 is not read even so: its slots had no PID namespace. */
    assert_int_equal(gs_tenant_open_owned(path, 1, &owner, &u), GS_EABI);
    unlink(path);
}

/* A managed tenant's charge is judged against the limit the caller gives, not the file's. */
static void test_charge_within_a_given_limit(void **state)
{
    struct gpuslice_tenant *t;
    int s, d;

    (void)state;
    assert_int_equal(gs_tenant_anon(&t), 0);
    s = gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid()));
    d = gs_tenant_device(t, uuid0, 0, 0, 0); /* the file says: no limit */
    assert_int_equal(gs_tenant_charge_within(t, s, d, 600, 1000), 0);
    assert_int_equal(gs_tenant_charge_within(t, s, d, 401, 1000), GS_EOVERLIMIT);
    assert_int_equal(gs_tenant_charge_within(t, s, d, 400, 1000), 0);
    assert_int_equal(gs_tenant_charge_within(t, s, d, 1, GS_TENANT_NO_LIMIT), 0);
    assert_int_equal(gs_tenant_charge_within(t, s, d, 1, GS_TENANT_OWN_LIMIT), 0);
    t->dev[d].mem_limit = 1000;
    assert_int_equal(gs_tenant_charge_within(t, s, d, 1, GS_TENANT_OWN_LIMIT), GS_EOVERLIMIT);
    assert_int_equal(gs_tenant_charge_within(t, s, d, 1, 0), 0); /* forced */
    assert_int_equal(t->dev[d].mem_used, 1003);
    gs_tenant_close(t);
}

/* A board of another major version is passed over, and the note names both versions. */
static void test_a_board_of_another_major_version_is_named_and_passed_over(void **state)
{
    static const uint8_t gpu[16] = { 7, 7, 7 };
    struct gpuslice_board *a, *b;
    char note[1024];

    (void)state;
    assert_int_equal(gs_board_open(dir, gpu, &a, note, sizeof(note)), 0);
    a->abi_version = GPUSLICE_ABI(GPUSLICE_BOARD_ABI_MAJOR + 1, 0);
    assert_int_equal(gs_board_open(dir, gpu, &b, note, sizeof(note)), 0);
    assert_non_null(strstr(note, "another major ABI version"));
    assert_non_null(strstr(note, "board ABI 2.0"));
    assert_non_null(strstr(note, "reads board ABI 1.x"));
    assert_true(a != b);
    assert_non_null(strstr(note, ".board: "));
    gs_board_close(a);
    gs_board_close(b);
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

static const uint8_t uuid1[16] = { 9, 8, 7 };

static void parse(const char *s, enum gs_value_kind kind, struct gs_limits *l)
{
    char err[256];

    assert_int_equal(gs_parse_limit_list(s, kind, "test", l, err, sizeof(err)), 0);
}

static void test_set_changes_running_and_future_devices(void **state)
{
    struct gpuslice_tenant *t;
    struct gs_limits l;
    char path[256], err[256];

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "t", path, sizeof(path), &t), 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 0, 100, 0), 0);
    assert_int_equal(t->compute_any, 0);
    parse("30,0:50", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->dev[0].compute_limit, 50);
    assert_int_equal(t->compute_any, 1);
    /* A device used later takes the set default, not the process's own value. */
    assert_int_equal(gs_tenant_device(t, uuid1, 1, 100, 90), 1);
    assert_int_equal(t->dev[1].compute_limit, 30);
    parse("2:10", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), -ENODEV);
    assert_non_null(strstr(err, "index 2"));
    assert_int_equal(t->dev[0].compute_limit, 50); /* refused: nothing changed */
    parse("1:100", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->dev[1].compute_limit, 0); /* 100% is no ceiling */
    assert_int_equal(t->dev[0].compute_limit, 50);
    parse("0:100", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->compute_any, 1); /* the default of 30 remains for new devices */
    parse("100", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->compute_any, 0); /* no ceiling left: launches pass through */
    /* A class or a weight still governs launches when the last ceiling goes. */
    gs_tenant_set_sched(t, GPUSLICE_PRIORITY_LATENCY, 0);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->compute_any, 1);
    t->priority = GPUSLICE_PRIORITY_UNSET;
    gs_tenant_set_sched(t, 0, 3);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->compute_any, 1);
    t->weight = 0;
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->compute_any, 0);
    parse("4G", GS_VALUE_SIZE, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_MEMORY, &l, err, sizeof(err)), 0);
    assert_int_equal(t->dev[0].mem_limit, 4ULL << 30);
    assert_int_equal(t->dev[1].mem_limit, 4ULL << 30);
    /* A device used later takes the set memory default too, not the process's own limit. */
    {
        static const uint8_t uuid2[16] = { 5, 5, 5 };

        assert_int_equal(gs_tenant_device(t, uuid2, 2, 100, 0), 2);
        assert_int_equal(t->dev[2].mem_limit, 4ULL << 30);
    }
    gs_tenant_close(t);
}

static void test_budget_refills_at_the_ceiling_up_to_the_cap(void **state)
{
    struct gpuslice_tenant_device d;

    (void)state;
    memset(&d, 0, sizeof(d));
    d.compute_limit = 25;
    /* The first refill starts empty; 20 ms at 25% fill it (the cap bounds it). */
    assert_int_equal(gs_budget_refill(&d, 980000000ULL, 5000000), 0);
    assert_int_equal(gs_budget_refill(&d, 1000000000ULL, 5000000), 5000000);
    gs_budget_charge(&d, 7000000, -1000000000);
    assert_int_equal(d.compute_tokens, -2000000);
    assert_int_equal(d.compute_busy_ns, 7000000);
    /* 4 ms of wall time at 25% brings back 1 ms. */
    assert_int_equal(gs_budget_refill(&d, 1004000000ULL, 5000000), -1000000);
    /* Time running backwards adds nothing. */
    assert_int_equal(gs_budget_refill(&d, 1003000000ULL, 5000000), -1000000);
    assert_int_equal(gs_budget_refill(&d, 2000000000ULL, 5000000), 5000000);
    /* Debt stops at the floor; what it forgave was not taken (the duty settles what was). */
    assert_int_equal(gs_budget_settle(&d, 60000000, 60000000, -20000000), 25000000);
    assert_int_equal(d.compute_tokens, -20000000);
    assert_int_equal(d.compute_busy_ns, 67000000);
    /* A refund is given back whole; the usage counter gets only what it is given. */
    assert_int_equal(gs_budget_settle(&d, -3000000, 0, -20000000), -3000000);
    assert_int_equal(d.compute_tokens, -17000000);
    assert_int_equal(gs_budget_settle(&d, 2000000, 0, -20000000), 2000000);
    assert_int_equal(d.compute_tokens, -19000000);
    assert_int_equal(d.compute_busy_ns, 67000000);
}

static void test_a_changed_ceiling_starts_from_an_empty_budget(void **state)
{
    struct gpuslice_tenant *t;
    struct gs_limits l;
    char path[256], err[256];

    (void)state;
    assert_int_equal(gs_tenant_create(dir, "budget", path, sizeof(path), &t), 0);
    assert_int_equal(gs_tenant_device(t, uuid0, 0, 0, 90), 0);
    /* Full after an idle spell at 90%: 45 ms, the cap. */
    assert_int_equal(gs_budget_refill(&t->dev[0], 1000000000ULL, 45000000), 0);
    assert_int_equal(gs_budget_refill(&t->dev[0], 3000000000ULL, 45000000), 45000000);
    /* The same ceiling again changes nothing; another one empties the budget. */
    parse("90", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->dev[0].compute_tokens, 45000000);
    parse("50", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_budget_refill(&t->dev[0], 5000000000ULL, 25000000), 0);
    assert_int_equal(gs_budget_refill(&t->dev[0], 5010000000ULL, 25000000), 5000000);
    /* A debt stays owed: a new ceiling does not forgive it. */
    gs_budget_charge(&t->dev[0], 12000000, -1000000000);
    parse("60", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(t->dev[0].compute_tokens, -7000000);
    assert_int_equal(gs_budget_refill(&t->dev[0], 5020000000ULL, 30000000), -7000000);
    parse("50", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    /* So does a ceiling set again after none: no burst saved up while uncapped, nor a debt. */
    parse("100", GS_VALUE_PERCENT, &l); /* no ceiling */
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    parse("90", GS_VALUE_PERCENT, &l);
    assert_int_equal(gs_tenant_set(t, GS_SET_COMPUTE, &l, err, sizeof(err)), 0);
    assert_int_equal(gs_budget_refill(&t->dev[0], 60000000000ULL, 45000000), 0);
    gs_tenant_close(t);
}

static void test_board_classes_and_the_longest_waiter(void **state)
{
    struct gpuslice_board *a, *b;
    const uint64_t ms = 1000000ULL, grace = 5 * ms, t = 1000 * ms;

    (void)state;
    assert_int_equal(gs_board_open(dir, uuid1, &a, NULL, 0), 0);
    assert_int_equal(gs_board_open(dir, uuid1, &b, NULL, 0), 0);
    /* Nothing active: no class yields. */
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_BACKGROUND, t, grace), 0);
    /* A latency tenant's work: every lower class yields, for grace after it was seen. */
    gs_board_active(b, GPUSLICE_PRIORITY_LATENCY, t);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_BACKGROUND, t + ms, grace),
                     GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_UNSET, t + ms, grace),
                     GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_NORMAL, t + grace - 1, grace),
                     GPUSLICE_PRIORITY_LATENCY);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_LATENCY, t + ms, grace), 0);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_NORMAL, t + grace, grace), 0);
    /* Stamps closer than 50 us are one: the word is not written at every launch. */
    gs_board_active(b, GPUSLICE_PRIORITY_LATENCY, t + 10000);
    assert_true(a->active_ns[1] == t);
    gs_board_active(b, GPUSLICE_PRIORITY_LATENCY, t + 60000);
    assert_true(a->active_ns[1] == t + 60000);
    /* Normal set explicitly: background yields to it, normal does not; unset stamps nothing. */
    gs_board_active(b, GPUSLICE_PRIORITY_NORMAL, t + 10 * ms);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_BACKGROUND, t + 11 * ms, grace),
                     GPUSLICE_PRIORITY_NORMAL);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_NORMAL, t + 11 * ms, grace), 0);
    gs_board_active(b, GPUSLICE_PRIORITY_UNSET, t + 100 * ms);
    gs_board_active(b, GPUSLICE_PRIORITY_BACKGROUND, t + 100 * ms);
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_BACKGROUND, t + 100 * ms, grace), 0);
    /* A stamp from the future (written by anyone) holds for grace from now at most. */
    a->active_ns[1] = t + 1000 * ms;
    assert_int_equal(gs_board_above(a, GPUSLICE_PRIORITY_BACKGROUND, t + 200 * ms, grace), 0);
    a->active_ns[1] = 0;

    /* The longest waiter goes next; a newer one cannot take the device before it. */
    assert_int_equal(gs_board_try_acquire(a, 1111, 1, t), 1);
    gs_board_wait(b, 2222, t + ms, 1, t + ms);         /* waits since t + 1 ms */
    gs_board_wait(b, 3333, t + 2 * ms, 1, t + 2 * ms); /* since t + 2 ms: not first */
    assert_int_equal(a->first_pid, 2222);
    gs_board_wait(b, 3333, t + 2 * ms, 1, t + 3 * ms);
    assert_int_equal(a->first_pid, 2222);
    gs_board_release(a, 1111);
    assert_int_equal(gs_board_try_acquire(b, 3333, 1, t + 3 * ms), 0);
    assert_int_equal(gs_board_try_acquire(b, 1111, 1, t + 3 * ms), 0);
    assert_int_equal(gs_board_try_acquire(b, 2222, 1, t + 3 * ms), 1);
    assert_int_equal(a->first_pid, 0);
    gs_board_release(b, 2222);
    /* A first waiter that stopped renewing its wait (gone, or given up) holds no one back. */
    gs_board_wait(b, 3333, t + 4 * ms, 1, t + 4 * ms);
    assert_int_equal(a->first_pid, 3333);
    assert_int_equal(gs_board_try_acquire(b, 2222, 1, t + 4 * ms + 1000), 0);
    assert_int_equal(gs_board_try_acquire(b, 2222, 1, t + 10 * ms), 1);
    gs_board_release(b, 2222);
    gs_board_close(a);
    gs_board_close(b);
}

static void test_board_turns_and_dead_holders(void **state)
{
    struct gpuslice_board *a, *b;
    pid_t child;
    int st;

    (void)state;
    assert_int_equal(gs_board_open(dir, uuid0, &a, NULL, 0), 0);
    assert_int_equal(gs_board_open(dir, uuid0, &b, NULL, 0), 0);
    assert_int_equal(gs_board_try_acquire(a, getpid(), gs_proc_start_time(getpid()), 1), 1);
    assert_int_equal(gs_board_try_acquire(a, getpid(), gs_proc_start_time(getpid()), 2), 1);
    assert_int_equal(b->holder_pid, getpid());
    /* Another live process must wait; it gets the device once released. */
    child = fork();
    if (child == 0)
        _exit(gs_board_try_acquire(b, getpid(), gs_proc_start_time(getpid()), 3) == 0 ? 0 : 1);
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_int_equal(WEXITSTATUS(st), 0);
    gs_board_release(a, getpid());
    assert_int_equal(b->holder_pid, 0);
    /* A holder that died is replaced, once its claim has settled. */
    child = fork();
    if (child == 0)
        _exit(gs_board_try_acquire(b, getpid(), gs_proc_start_time(getpid()), 10) ? 0 : 1);
    assert_int_equal(waitpid(child, &st, 0), child);
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(a->holder_pid, child);
    assert_int_equal(gs_board_try_acquire(a, getpid(), 1, 20), 0);
    assert_int_equal(gs_board_try_acquire(a, getpid(), 1, 10 + 100000000ULL), 1);
    gs_board_release(a, getpid());
    /*
     * A claim whose PID now belongs to another live process (its start time is not the
     * claimant's: the PID was reused) is a dead holder's too; the live one's is not.
     */
    assert_int_equal(
        gs_board_try_acquire(b, getppid(), gs_proc_start_time(getppid()) + 1, 200000000ULL), 1);
    assert_int_equal(gs_board_try_acquire(a, getpid(), 1, 400000000ULL), 1);
    gs_board_release(a, getpid());
    assert_int_equal(
        gs_board_try_acquire(b, getppid(), gs_proc_start_time(getppid()), 500000000ULL), 1);
    assert_int_equal(gs_board_try_acquire(a, getpid(), 1, 700000000ULL), 0);
    gs_board_close(a);
    gs_board_close(b);
}

/* A fake /proc entry: PID's stat (started at start), NSpid and PID namespace. */
static void fake_proc(const char *root, const char *name, const char *nspid, uint32_t ns,
                      unsigned long long start)
{
    char path[512], link[64];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", root, name);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/ns", root, name);
    mkdir(path, 0700);
    snprintf(path, sizeof(path), "%s/%s/ns/pid", root, name);
    snprintf(link, sizeof(link), "pid:[%u]", ns);
    unlink(path);
    assert_int_equal(symlink(link, path), 0);
    snprintf(path, sizeof(path), "%s/%s/stat", root, name);
    assert_non_null(f = fopen(path, "w"));
    fprintf(f, "%s (x) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 %llu 0 0\n", name, start);
    fclose(f);
    snprintf(path, sizeof(path), "%s/%s/status", root, name);
    assert_non_null(f = fopen(path, "w"));
    fprintf(f, "Name:\tx\nNSpid:\t%s\nNSpgid:\t1\n", nspid);
    fclose(f);
}

/* What gs_tenant_procs_alive says of slot i. */
static pid_t seen_of(const struct gpuslice_tenant *t, int i)
{
    static pid_t seen[GPUSLICE_MAX_PROCS];

    gs_tenant_procs_alive(t, seen);
    return seen[i];
}

/*
 * A process in a container's PID namespace registers its own PID there. A
 * reader outside (the CLI, a daemon) finds it by namespace and inner PID, and
 * does not take another process that has that PID outside for it; a reader
 * in a third namespace cannot judge it and leaves it be.
 */
static void test_processes_in_another_pid_namespace(void **state)
{
    const uint32_t box = 4026532100u, other = 4026532200u;
    struct gpuslice_tenant *t;
    char root[128], cmd[256];

    (void)state;
    snprintf(root, sizeof(root), "%s/proc", dir);
    mkdir(root, 0700);
    fake_proc(root, "self", "1", GS_PID_NS_INIT, 1);
    fake_proc(root, "5000", "5000\t7", box, 123);   /* the tenant's process: 7 in its box */
    fake_proc(root, "7", "7", GS_PID_NS_INIT, 999); /* PID 7 outside: another process */
    gs_proc_set_root(root);
    assert_int_equal(gs_proc_self_ns(), GS_PID_NS_INIT);
    assert_int_equal(gs_proc_inner_pid(5000), 7);
    assert_int_equal(gs_tenant_anon(&t), 0);
    t->proc[0].pid = 7;
    t->proc[0].pid_ns = box;
    t->proc[0].start_time = 123;
    t->proc[0].mem_used[0] = t->dev[0].mem_used = 10;
    assert_int_equal(seen_of(t, 0), 5000);
    assert_int_equal(t->host_pid[0], 0); /* a reader without the lock only looks */
    assert_int_equal(gs_tenant_reap(t), 0);
    assert_int_equal(t->host_pid[0], 5000); /* found outside the lock, kept under it */
    assert_int_equal(t->dev[0].mem_used, 10);
    /*
     * The word is the tenant's to write: a PID that names another process there (7, or one
     * written over a slot taken again) is not believed, nor taken for a death: the process is
     * looked for again, and its own PID kept.
     */
    t->host_pid[0] = 7;
    assert_int_equal(gs_tenant_lock(t), 0); /* a reap with no look first (a full table's) */
    assert_int_equal(gs_tenant_reap_locked(t), 0);
    gs_tenant_unlock(t);
    assert_int_equal(t->proc[0].pid, 7);
    assert_int_equal(seen_of(t, 0), 5000);
    assert_int_equal(gs_tenant_reap(t), 0);
    assert_int_equal(t->host_pid[0], 5000);
    assert_int_equal(t->dev[0].mem_used, 10);
    /* Its namespace no longer shows (another user's process, say): still alive. */
    snprintf(cmd, sizeof(cmd), "rm -f %s/5000/ns/pid", root);
    assert_int_equal(system(cmd), 0);
    assert_int_equal(seen_of(t, 0), 5000);
    assert_int_equal(gs_tenant_reap(t), 0);
    /* It died, and a new process of the box took PID 5000 outside and 7 inside: freed. */
    fake_proc(root, "5000", "5000\t7", box, 777);
    assert_int_equal(seen_of(t, 0), 0);
    assert_int_equal(gs_tenant_reap(t), 1);
    assert_int_equal(t->proc[0].pid, 0);
    assert_int_equal(t->host_pid[0], 0);
    assert_int_equal(t->dev[0].mem_used, 0);
    /* One never found (it died before anyone looked): looked for once, then freed. */
    t->proc[2].pid = 8;
    t->proc[2].pid_ns = box;
    t->proc[2].start_time = 555;
    assert_int_equal(seen_of(t, 2), 0);
    assert_int_equal(gs_tenant_reap(t), 1);
    assert_int_equal(t->proc[2].pid, 0);
    /* A reader in a third namespace sees neither: the entry is left alone. */
    fake_proc(root, "self", "3", other, 1);
    gs_proc_set_root(root);
    t->proc[1].pid = 7;
    t->proc[1].pid_ns = box;
    t->proc[1].start_time = 123;
    assert_int_equal(seen_of(t, 1), -1);
    assert_int_equal(gs_tenant_reap(t), 0);
    /* In the reader's own namespace, the PID is checked as it is. */
    t->proc[1].pid_ns = other;
    assert_int_equal(seen_of(t, 1), 0);
    gs_proc_set_root(NULL);
    /* Registering records the real namespace. */
    assert_true(gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid())) >= 0);
    assert_int_equal(t->proc[0].pid_ns, gs_proc_pid_ns(0));
    assert_true(t->proc[0].pid_ns != 0);
    assert_int_equal(seen_of(t, 0), getpid());
    gs_tenant_close(t);
}

/*
 * HAMi's shared file: the first caller makes it at the very path (mode 0600, nothing left
 * beside it), the next joins the same state; a link, a directory or a missing directory is
 * refused, never followed or made.
 */
static void test_open_at_makes_the_file_once_and_then_joins_it(void **state)
{
    struct gpuslice_tenant *a, *b;
    char path[256], other[256], cmd[320];
    struct stat st;
    int made;

    (void)state;
    snprintf(path, sizeof(path), "%s/at/x.cache", dir);
    assert_int_equal(gs_tenant_open_at(path, "hami:x.cache", &a, &made), -ENOENT);
    snprintf(cmd, sizeof(cmd), "%s/at", dir);
    assert_int_equal(mkdir(cmd, 0700), 0);
    assert_int_equal(gs_tenant_open_at(path, "hami:x.cache", &a, &made), 0);
    assert_int_equal(made, 1);
    assert_int_equal(lstat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_uid, geteuid());
    assert_int_equal(st.st_nlink, 1); /* the name it was made under is gone */
    assert_string_equal(a->name, "hami:x.cache");
    assert_int_equal(gs_tenant_open_at(path, "other", &b, &made), 0);
    assert_int_equal(made, 0);
    assert_int_equal(gs_tenant_device(a, uuid0, 0, 100, 0), 0);
    assert_int_equal(b->dev[0].mem_limit, 100); /* one state, seen by both */
    gs_tenant_close(b);
    snprintf(other, sizeof(other), "%s/at/link.cache", dir);
    assert_int_equal(symlink(path, other), 0);
    assert_int_equal(gs_tenant_open_at(other, "x", &b, &made), -ELOOP);
    snprintf(other, sizeof(other), "%s/at/dangling.cache", dir);
    snprintf(cmd, sizeof(cmd), "%s/at/none.cache", dir);
    assert_int_equal(symlink(cmd, other), 0);
    assert_int_equal(gs_tenant_open_at(other, "x", &b, &made), -ELOOP);
    assert_int_equal(access(cmd, F_OK), -1);
    snprintf(other, sizeof(other), "%s/at", dir);
    assert_int_equal(gs_tenant_open_at(other, "x", &b, &made), -EISDIR);
    gs_tenant_close(a);
}

/*
 * Eight processes making one file at the same moment: whoever loses the race to make it
 * joins the winner's, so all eight are members of the one state at the path.
 */
static void test_open_at_racing_makers_share_one_state(void **state)
{
    struct gpuslice_tenant *t;
    char path[256];
    int go[2], i, n, made, status, members = 0;
    pid_t kids[8];

    (void)state;
    snprintf(path, sizeof(path), "%s/race.cache", dir);
    assert_int_equal(pipe(go), 0);
    for (n = 0; n < 8; n++) {
        if ((kids[n] = fork()) == 0) {
            char c;

            close(go[1]);
            if (read(go[0], &c, 1) != 0)
                _exit(3);
            if (gs_tenant_open_at(path, "race", &t, &made) < 0)
                _exit(1);
            _exit(gs_tenant_proc_register(t, getpid(), gs_proc_start_time(getpid())) < 0 ? 2 : 0);
        }
        assert_true(kids[n] > 0);
    }
    close(go[0]);
    close(go[1]); /* all start at once */
    for (i = 0; i < n; i++) {
        assert_int_equal(waitpid(kids[i], &status, 0), kids[i]);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
    assert_int_equal(gs_tenant_open_at(path, "race", &t, &made), 0);
    assert_int_equal(made, 0);
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++)
        members += t->proc[i].pid > 0;
    assert_int_equal(members, 8);
    gs_tenant_close(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_charge_refuses_over_limit),
        cmocka_unit_test(test_many_threads_cannot_overshoot),
        cmocka_unit_test(test_killed_process_usage_is_reclaimed),
        cmocka_unit_test(test_uncharge_beyond_own_usage_leaves_others_usage),
        cmocka_unit_test(test_lock_holder_death_repairs_totals),
        cmocka_unit_test(test_charge_that_would_wrap_is_refused_with_or_without_a_limit),
        cmocka_unit_test(test_lock_word_from_the_file_costs_at_most_a_bounded_wait),
        cmocka_unit_test(test_open_refuses_files_others_may_write),
        cmocka_unit_test(test_read_only_open_is_a_copy_truncation_cannot_break),
        cmocka_unit_test(test_board_planted_under_its_name_is_passed_over),
        cmocka_unit_test(test_abi_mismatch_is_refused),
        cmocka_unit_test(test_a_later_minor_version_is_read_and_another_major_refused),
        cmocka_unit_test(test_a_board_of_another_major_version_is_named_and_passed_over),
        cmocka_unit_test(test_sweep_removes_only_dead_tenants),
        cmocka_unit_test(test_set_changes_running_and_future_devices),
        cmocka_unit_test(test_a_changed_ceiling_starts_from_an_empty_budget),
        cmocka_unit_test(test_budget_refills_at_the_ceiling_up_to_the_cap),
        cmocka_unit_test(test_board_turns_and_dead_holders),
        cmocka_unit_test(test_board_classes_and_the_longest_waiter),
        cmocka_unit_test(test_processes_in_another_pid_namespace),
        cmocka_unit_test(test_a_4_3_file_is_joined),
        cmocka_unit_test(test_a_4_1_file_is_read_but_not_joined),
        cmocka_unit_test(test_charge_within_a_given_limit),
        cmocka_unit_test(test_open_at_makes_the_file_once_and_then_joins_it),
        cmocka_unit_test(test_open_at_racing_makers_share_one_state),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
