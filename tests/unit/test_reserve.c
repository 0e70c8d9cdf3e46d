/* The memory reservation's protocol between a tenant's processes and its reserver. */
#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/reserve.h"
#include "common/tenant.h"
#include "control/reserver.h"

static const uint8_t gpu0[16] = { 0xa, 1, 2, 3 };
static const uint8_t gpu1[16] = { 0xb, 1, 2, 3 };

static struct gpuslice_tenant *fresh(void)
{
    struct gpuslice_tenant *t = NULL;

    assert_int_equal(gs_tenant_anon(&t), 0);
    return t;
}

static void test_no_reserver_nothing_to_ask(void **state)
{
    struct gpuslice_tenant *t = fresh();

    (void)state;
    assert_false(gs_reserve_alive(t));
    assert_int_equal(gs_reserve_entry(t, gpu0), -ENOENT);
    assert_int_equal(gs_reserve_ask(t, 0, 1 << 20, 1000000000ULL), 0);
    gs_tenant_close(t);
}

static void test_claim_is_exclusive_while_alive(void **state)
{
    struct gpuslice_tenant *t = fresh();
    pid_t parent = getppid();

    (void)state;
    assert_int_equal(gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid())), 0);
    assert_true(gs_reserve_alive(t));
    assert_int_equal(gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid())), 0);
    assert_int_equal(gs_reserve_claim(t, parent, gs_proc_start_time(parent)), -EBUSY);
    gs_reserve_release(t, parent); /* not the holder: nothing happens */
    assert_true(gs_reserve_alive(t));
    gs_reserve_release(t, getpid());
    assert_false(gs_reserve_alive(t));
    assert_int_equal(gs_reserve_claim(t, parent, gs_proc_start_time(parent)), 0);
    gs_tenant_close(t);
}

/* An allocation that waits while the reserver ends is told to try again. */
static void test_reserver_that_ends_during_an_ask_means_try_again(void **state)
{
    struct gpuslice_tenant *t = fresh();
    pid_t child;
    int status, e;

    (void)state;
    child = fork();
    if (child == 0) {
        struct timespec ts = { 0, 100000000L };
        gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid()));
        __atomic_store_n(&t->reserve.dev[gs_reserve_add(t, gpu0, 1 << 30)].held, 1 << 29,
                         __ATOMIC_RELEASE);
        nanosleep(&ts, NULL); /* dies without answering */
        _exit(0);
    }
    while (!gs_reserve_alive(t) || gs_reserve_entry(t, gpu0) < 0 ||
           __atomic_load_n(&t->reserve.dev[0].held, __ATOMIC_ACQUIRE) == 0)
        usleep(1000);
    e = gs_reserve_entry(t, gpu0);
    assert_int_equal(gs_reserve_ask(t, e, 4096, 5000000000ULL), 1);
    assert_int_equal(waitpid(child, &status, 0), child);
    gs_tenant_close(t);
}

static void test_dead_reserver_is_taken_over_and_not_asked(void **state)
{
    struct gpuslice_tenant *t = fresh();
    pid_t child = fork();
    int e, status;

    (void)state;
    if (child == 0) {
        gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid()));
        gs_reserve_add(t, gpu0, 1 << 30);
        __atomic_store_n(&t->reserve.dev[0].held, 1 << 29, __ATOMIC_RELEASE);
        _exit(0);
    }
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_int_equal(t->reserve.pid, child);
    assert_false(gs_reserve_alive(t));
    e = gs_reserve_entry(t, gpu0);
    assert_int_equal(e, 0);
    assert_int_equal(gs_reserve_ask(t, e, 1 << 20, 1000000000ULL), 0); /* not waited for */
    assert_int_equal(gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid())), 0);
    gs_tenant_close(t);
}

static void test_entries_by_uuid(void **state)
{
    struct gpuslice_tenant *t = fresh();

    (void)state;
    assert_int_equal(gs_reserve_add(t, gpu0, 100), 0);
    assert_int_equal(gs_reserve_add(t, gpu1, 200), 1);
    assert_int_equal(gs_reserve_add(t, gpu0, 300), 0); /* the same entry, a new target */
    assert_int_equal(t->reserve.dev[0].target, 300);
    assert_int_equal(gs_reserve_entry(t, gpu1), 1);
    gs_tenant_close(t);
}

static void test_ask_without_answer_times_out_and_is_withdrawn(void **state)
{
    struct gpuslice_tenant *t = fresh();
    struct timespec a, b;
    int e;

    (void)state;
    assert_int_equal(gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid())), 0);
    e = gs_reserve_add(t, gpu0, 1ULL << 30);
    assert_int_equal(gs_reserve_ask(t, e, 4096, 50000000ULL), 0); /* nothing held yet */
    __atomic_store_n(&t->reserve.dev[e].held, 1ULL << 29, __ATOMIC_RELEASE);
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(gs_reserve_ask(t, e, 4096, 50000000ULL), -ETIMEDOUT);
    clock_gettime(CLOCK_MONOTONIC, &b);
    assert_true((b.tv_sec - a.tv_sec) * 1000000000L + (b.tv_nsec - a.tv_nsec) >= 50000000L);
    assert_int_equal(gs_reserve_take(t, e), 0); /* withdrawn: nobody waits for it any more */
    /* A larger ask another process made meanwhile is not withdrawn by this one's timeout. */
    __atomic_store_n(&t->reserve.dev[e].want, 1 << 20, __ATOMIC_RELEASE);
    assert_int_equal(gs_reserve_ask(t, e, 4096, 10000000ULL), -ETIMEDOUT);
    assert_int_equal(gs_reserve_take(t, e), 1 << 20);
    gs_tenant_close(t);
}

/*
 * A reserver in another process answers: the asker gets 1, the reserver saw
 * the largest of the asks, and release answers anyone left waiting.
 */
static void test_ask_answered_by_another_process(void **state)
{
    struct gpuslice_tenant *t = fresh();
    int fds[2], status, e;
    pid_t child;
    char c;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    child = fork();
    if (child == 0) {
        uint32_t seen;
        uint64_t got = 0;
        int i;
        close(fds[0]);
        gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid()));
        i = gs_reserve_add(t, gpu0, 1ULL << 30);
        __atomic_store_n(&t->reserve.dev[i].held, 1ULL << 29, __ATOMIC_RELEASE);
        seen = __atomic_load_n(&t->reserve.ask_seq, __ATOMIC_ACQUIRE);
        if (write(fds[1], "r", 1) != 1)
            _exit(3);
        for (i = 0; i < 500 && got == 0; i++) {
            uint32_t seq = gs_reserve_wait(t, seen, 10000000ULL);
            got = gs_reserve_take(t, 0);
            if (seq != seen) {
                gs_reserve_answer(t, seq);
                seen = seq;
            }
        }
        /* The answer is given; leave waiters none. */
        gs_reserve_release(t, getpid());
        _exit(got == (3ULL << 20) ? 0 : 4);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    e = gs_reserve_entry(t, gpu0);
    assert_int_equal(e, 0);
    /* Two asks before it looks: it sees the larger. */
    __atomic_store_n(&t->reserve.dev[e].want, 1ULL << 20, __ATOMIC_RELEASE);
    assert_int_equal(gs_reserve_ask(t, e, 3ULL << 20, 5000000000ULL), 1);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    assert_false(gs_reserve_alive(t));
    assert_int_equal(t->reserve.dev[e].held, 0);
    gs_tenant_close(t);
}

static uint64_t ns_since(const struct timespec *a)
{
    struct timespec b;

    clock_gettime(CLOCK_MONOTONIC, &b);
    return (uint64_t)((b.tv_sec - a->tv_sec) * 1000000000L + (b.tv_nsec - a->tv_nsec));
}

/*
 * A PID reused by a new reserver: the file still names the PID with the dead one's start
 * time. The new one's claim is its own (its start time recorded), and it is alive.
 */
static void test_claim_after_pid_reuse_records_the_new_start_time(void **state)
{
    struct gpuslice_tenant *t = fresh();
    uint64_t start = gs_proc_start_time(getpid());

    (void)state;
    t->reserve.pid = getpid();
    t->reserve.start_time = start + 12345; /* the dead reserver's */
    assert_false(gs_reserve_alive(t));
    assert_int_equal(gs_reserve_claim(t, getpid(), start), 0);
    assert_int_equal(t->reserve.pid, getpid());
    assert_int_equal(t->reserve.start_time, start);
    assert_true(gs_reserve_alive(t));
    /* A start time of 0 is never alive, whatever the PID. */
    t->reserve.start_time = 0;
    assert_false(gs_reserve_alive(t));
    t->reserve.start_time = start;
    t->reserve.pid = 0;
    assert_false(gs_reserve_alive(t));
    gs_tenant_close(t);
}

/* held reads 0 without a reserver, and for an index outside the table. */
static void test_held_and_take_bounds(void **state)
{
    struct gpuslice_tenant *t = fresh();
    int e;

    (void)state;
    e = gs_reserve_add(t, gpu0, 1 << 30);
    assert_int_equal(e, 0);
    t->reserve.dev[0].held = 5 << 20;
    t->reserve.dev[GPUSLICE_MAX_DEVICES - 1].held = 7 << 20;
    assert_int_equal(gs_reserve_held(t, 0), 0); /* nobody holds it: pid 0 */
    assert_int_equal(gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid())), 0);
    assert_int_equal(gs_reserve_held(t, 0), 5 << 20);
    assert_int_equal(gs_reserve_held(t, GPUSLICE_MAX_DEVICES - 1), 7 << 20);
    assert_int_equal(gs_reserve_held(t, GPUSLICE_MAX_DEVICES), 0);
    assert_int_equal(gs_reserve_held(t, -1), 0);
    t->reserve.dev[GPUSLICE_MAX_DEVICES - 1].want = 9;
    assert_int_equal(gs_reserve_take(t, GPUSLICE_MAX_DEVICES - 1), 9);
    assert_int_equal(gs_reserve_take(t, GPUSLICE_MAX_DEVICES - 1), 0);
    assert_int_equal(gs_reserve_take(t, GPUSLICE_MAX_DEVICES), 0);
    assert_int_equal(gs_reserve_take(t, -1), 0);
    gs_tenant_close(t);
}

/* Entries: the first unused slot, reset when taken; the all-zero UUID names no entry; full. */
static void test_add_fills_free_slots_until_full(void **state)
{
    struct gpuslice_tenant *t = fresh();
    static const uint8_t zero[16];
    uint8_t u[16];
    int i;

    (void)state;
    assert_int_equal(gs_reserve_entry(t, zero), -ENOENT);
    t->reserve.dev[0].held = 11;
    t->reserve.dev[0].want = 12;
    assert_int_equal(gs_reserve_add(t, gpu1, 100), 0);
    assert_int_equal(t->reserve.dev[0].held, 0);
    assert_int_equal(t->reserve.dev[0].want, 0);
    assert_int_equal(t->reserve.dev[0].target, 100);
    assert_memory_equal(t->reserve.dev[0].uuid, gpu1, 16);
    assert_int_equal(gs_reserve_entry(t, zero), -ENOENT); /* the free slots are not entries */
    for (i = 1; i < GPUSLICE_MAX_DEVICES; i++) {
        memset(u, 0, sizeof(u));
        u[15] = (uint8_t)i;
        assert_int_equal(gs_reserve_add(t, u, (uint64_t)i), i);
    }
    u[15] = 0xee;
    assert_int_equal(gs_reserve_add(t, u, 1), -ENOSPC);
    u[15] = GPUSLICE_MAX_DEVICES - 1; /* the last one is found */
    assert_int_equal(gs_reserve_entry(t, u), GPUSLICE_MAX_DEVICES - 1);
    assert_int_equal(gs_reserve_add(t, u, 77), GPUSLICE_MAX_DEVICES - 1);
    assert_int_equal(t->reserve.dev[GPUSLICE_MAX_DEVICES - 1].target, 77);
    gs_tenant_close(t);
}

/* Release: every entry's held goes to 0, the claim is cleared, and waiters are answered. */
static void test_release_clears_every_entry_and_answers(void **state)
{
    struct gpuslice_tenant *t = fresh();
    int i;

    (void)state;
    assert_int_equal(gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid())), 0);
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        t->reserve.dev[i].held = (uint64_t)(i + 1) << 20;
    t->reserve.ask_seq = 41;
    t->reserve.gave_seq = 40;
    gs_reserve_release(t, getpid());
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        assert_int_equal(t->reserve.dev[i].held, 0);
    assert_int_equal(t->reserve.pid, 0);
    assert_int_equal(t->reserve.start_time, 0);
    assert_int_equal(t->reserve.gave_seq, 41);
    gs_tenant_close(t);
}

/* wait: at once when an ask is newer than seen, or with no time to wait; else up to the time. */
static void test_wait_returns_the_newest_ask(void **state)
{
    struct gpuslice_tenant *t = fresh();
    struct timespec a;

    (void)state;
    t->reserve.ask_seq = 5;
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(gs_reserve_wait(t, 4, 2000000000ULL), 5);
    assert_int_equal(gs_reserve_wait(t, 5, 0), 5);
    assert_true(ns_since(&a) < 500000000ULL);
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(gs_reserve_wait(t, 5, 30000000ULL), 5);
    assert_true(ns_since(&a) >= 25000000ULL);
    gs_tenant_close(t);
}

/*
 * The reserver's answer carries the sequence number of the ask it read (gs_reserve_answer
 * with ask_seq): that answers the ask at once, while the reserver lives on. An older answer
 * does not.
 */
static void test_answer_with_the_asks_own_number_answers_it(void **state)
{
    struct gpuslice_tenant *t = fresh();
    struct timespec a;
    int fds[2], status, e;
    pid_t child;
    char c;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    child = fork();
    if (child == 0) {
        struct timespec ts = { 1, 500000000L };
        uint32_t seen, seq;
        int i;
        close(fds[0]);
        gs_reserve_claim(t, getpid(), gs_proc_start_time(getpid()));
        i = gs_reserve_add(t, gpu0, 1ULL << 30);
        __atomic_store_n(&t->reserve.dev[i].held, 1ULL << 29, __ATOMIC_RELEASE);
        seen = __atomic_load_n(&t->reserve.ask_seq, __ATOMIC_ACQUIRE);
        if (write(fds[1], "r", 1) != 1)
            _exit(3);
        for (i = 0; i < 300 && (seq = gs_reserve_wait(t, seen, 10000000ULL)) == seen; i++)
            ;
        gs_reserve_answer(t, seq);
        nanosleep(&ts, NULL); /* alive, answering nothing more */
        gs_reserve_release(t, getpid());
        _exit(0);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    e = gs_reserve_entry(t, gpu0);
    assert_int_equal(e, 0);
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(gs_reserve_ask(t, e, 1 << 20, 1000000000ULL), 1);
    assert_true(ns_since(&a) < 900000000ULL);
    assert_true(gs_reserve_alive(t));
    /* An answer to an earlier ask leaves a new one waiting until its time runs out. */
    clock_gettime(CLOCK_MONOTONIC, &a);
    assert_int_equal(gs_reserve_ask(t, e, 1 << 20, 100000000ULL), -ETIMEDOUT);
    assert_true(ns_since(&a) >= 100000000ULL);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    gs_tenant_close(t);
}

/* RATIO of reserve and --filled: digits with at most one '.', in (0, 1]. */
static void test_ratio_accepts_only_0_to_1(void **state)
{
    static const struct {
        const char *s;
        double v; /* 0: refused */
    } cases[] = {
        { "1", 1 },     { "1.0", 1 },      { "1.", 1 },          { ".5", 0.5 },
        { "0.5", 0.5 }, { "0.9", 0.9 },    { "0.000001", 1e-6 }, { "00.25", 0.25 },
        { "0", 0 },     { "0.0", 0 },      { ".", 0 },           { "", 0 },
        { "1.01", 0 },  { "1.000001", 0 }, { "2", 0 },           { "0.5.1", 0 },
        { "0..5", 0 },  { "..5", 0 },      { "-0.5", 0 },        { "+0.5", 0 },
        { "0.5 ", 0 },  { " 0.5", 0 },     { "5e-1", 0 },        { "0x0.8", 0 },
        { "nan", 0 },   { "inf", 0 },      { "0,5", 0 },         { "0.5x", 0 },
    };
    size_t i;

    (void)state;
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        double v = -1;
        int r = reserve_parse_ratio(cases[i].s, &v);
        if (cases[i].v > 0) {
            if (r != 0 || v != cases[i].v)
                fail_msg("\"%s\": %d, %g; want %g", cases[i].s, r, v, cases[i].v);
        } else if (r != -EINVAL || v != -1) {
            fail_msg("\"%s\": %d, %g; want -EINVAL and nothing stored", cases[i].s, r, v);
        }
    }
    {
        double v = -1;
        assert_int_equal(reserve_parse_ratio(NULL, &v), -EINVAL);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_reserver_nothing_to_ask),
        cmocka_unit_test(test_claim_is_exclusive_while_alive),
        cmocka_unit_test(test_dead_reserver_is_taken_over_and_not_asked),
        cmocka_unit_test(test_reserver_that_ends_during_an_ask_means_try_again),
        cmocka_unit_test(test_entries_by_uuid),
        cmocka_unit_test(test_ask_without_answer_times_out_and_is_withdrawn),
        cmocka_unit_test(test_ask_answered_by_another_process),
        cmocka_unit_test(test_claim_after_pid_reuse_records_the_new_start_time),
        cmocka_unit_test(test_held_and_take_bounds),
        cmocka_unit_test(test_add_fills_free_slots_until_full),
        cmocka_unit_test(test_release_clears_every_entry_and_answers),
        cmocka_unit_test(test_wait_returns_the_newest_ask),
        cmocka_unit_test(test_answer_with_the_asks_own_number_answers_it),
        cmocka_unit_test(test_ratio_accepts_only_0_to_1),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
