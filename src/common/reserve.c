/*
 * The memory reservation's protocol (reserve.h). The tenant file is mapped
 * shared by every process of the tenant and by the reserver, so the futexes
 * are process-shared (no FUTEX_PRIVATE_FLAG).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/reserve.h"
#include "common/tenant.h"

#define WAIT_STEP_NS 10000000ULL /* re-check the reserver's life at least this often */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void futex_wait(uint32_t *word, uint32_t val, uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

    syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake_all(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static int uuid_unused(const uint8_t *u)
{
    static const uint8_t zero[16];

    return memcmp(u, zero, 16) == 0;
}

int gs_reserve_alive(const struct gpuslice_tenant *t)
{
    int32_t pid = __atomic_load_n(&t->reserve.pid, __ATOMIC_ACQUIRE);
    uint64_t start = __atomic_load_n(&t->reserve.start_time, __ATOMIC_ACQUIRE);
    int saved = errno, alive;

    alive = pid > 0 && start != 0 && gs_proc_start_time((pid_t)pid) == start;
    errno = saved;
    return alive;
}

int gs_reserve_entry(const struct gpuslice_tenant *t, const uint8_t uuid[16])
{
    int i;

    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        if (!uuid_unused(t->reserve.dev[i].uuid) && memcmp(t->reserve.dev[i].uuid, uuid, 16) == 0)
            return i;
    return -ENOENT;
}

uint64_t gs_reserve_held(const struct gpuslice_tenant *t, int e)
{
    if (e < 0 || e >= GPUSLICE_MAX_DEVICES ||
        __atomic_load_n(&t->reserve.pid, __ATOMIC_ACQUIRE) == 0)
        return 0;
    return __atomic_load_n(&t->reserve.dev[e].held, __ATOMIC_ACQUIRE);
}

int gs_reserve_ask(struct gpuslice_tenant *t, int e, uint64_t bytes, uint64_t timeout_ns)
{
    struct gpuslice_tenant_reserve *r = &t->reserve;
    uint64_t want, deadline;
    uint32_t seq;
    int saved = errno, res;

    if (gs_reserve_held(t, e) == 0 || !gs_reserve_alive(t)) {
        errno = saved;
        return 0;
    }
    want = __atomic_load_n(&r->dev[e].want, __ATOMIC_ACQUIRE);
    while (want < bytes && !__atomic_compare_exchange_n(&r->dev[e].want, &want, bytes, 0,
                                                        __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        ;
    seq = __atomic_add_fetch(&r->ask_seq, 1, __ATOMIC_ACQ_REL);
    futex_wake_all(&r->ask_seq);
    deadline = now_ns() + timeout_ns;
    for (;;) {
        uint32_t gave = __atomic_load_n(&r->gave_seq, __ATOMIC_ACQUIRE);
        uint64_t now = now_ns();

        if ((int32_t)(gave - seq) >= 0) {
            res = 1;
            break;
        }
        if (now >= deadline) {
            /* Nobody is waiting for it any more: do not leave the ask to be met later. */
            want = bytes;
            __atomic_compare_exchange_n(&r->dev[e].want, &want, 0, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE);
            res = -ETIMEDOUT;
            break;
        }
        if (!gs_reserve_alive(t)) {
            res = 1; /* it ended, and what it held went with it: worth another try */
            break;
        }
        futex_wait(&r->gave_seq, gave,
                   deadline - now < WAIT_STEP_NS ? deadline - now : WAIT_STEP_NS);
    }
    errno = saved;
    return res;
}

int gs_reserve_claim(struct gpuslice_tenant *t, pid_t pid, uint64_t start)
{
    struct gpuslice_tenant_reserve *r = &t->reserve;
    int32_t cur = __atomic_load_n(&r->pid, __ATOMIC_ACQUIRE);

    if (cur == (int32_t)pid && __atomic_load_n(&r->start_time, __ATOMIC_ACQUIRE) == start)
        return 0;
    if (cur != 0 && gs_reserve_alive(t))
        return -EBUSY;
    /* A dead reserver's claim is taken over; only the CAS winner proceeds. */
    if (!__atomic_compare_exchange_n(&r->pid, &cur, (int32_t)pid, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return -EBUSY;
    __atomic_store_n(&r->start_time, start, __ATOMIC_RELEASE);
    return 0;
}

int gs_reserve_add(struct gpuslice_tenant *t, const uint8_t uuid[16], uint64_t target)
{
    struct gpuslice_tenant_reserve *r = &t->reserve;
    int i = gs_reserve_entry(t, uuid);

    if (i < 0) {
        for (i = 0; i < GPUSLICE_MAX_DEVICES && !uuid_unused(r->dev[i].uuid); i++)
            ;
        if (i == GPUSLICE_MAX_DEVICES)
            return -ENOSPC;
        __atomic_store_n(&r->dev[i].held, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&r->dev[i].want, 0, __ATOMIC_RELAXED);
        memcpy(r->dev[i].uuid, uuid, 16); /* only the reserver writes entries */
    }
    __atomic_store_n(&r->dev[i].target, target, __ATOMIC_RELEASE);
    return i;
}

uint32_t gs_reserve_wait(struct gpuslice_tenant *t, uint32_t seen, uint64_t timeout_ns)
{
    uint32_t cur = __atomic_load_n(&t->reserve.ask_seq, __ATOMIC_ACQUIRE);

    if (cur == seen && timeout_ns > 0) {
        futex_wait(&t->reserve.ask_seq, seen, timeout_ns);
        cur = __atomic_load_n(&t->reserve.ask_seq, __ATOMIC_ACQUIRE);
    }
    return cur;
}

uint64_t gs_reserve_take(struct gpuslice_tenant *t, int e)
{
    if (e < 0 || e >= GPUSLICE_MAX_DEVICES)
        return 0;
    return __atomic_exchange_n(&t->reserve.dev[e].want, 0, __ATOMIC_ACQ_REL);
}

void gs_reserve_answer(struct gpuslice_tenant *t, uint32_t seq)
{
    __atomic_store_n(&t->reserve.gave_seq, seq, __ATOMIC_RELEASE);
    futex_wake_all(&t->reserve.gave_seq);
}

void gs_reserve_release(struct gpuslice_tenant *t, pid_t pid)
{
    struct gpuslice_tenant_reserve *r = &t->reserve;
    int i;

    if (__atomic_load_n(&r->pid, __ATOMIC_ACQUIRE) != (int32_t)pid)
        return;
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        __atomic_store_n(&r->dev[i].held, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->start_time, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&r->pid, 0, __ATOMIC_RELEASE);
    gs_reserve_answer(t, __atomic_load_n(&r->ask_seq, __ATOMIC_ACQUIRE));
}
