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
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
