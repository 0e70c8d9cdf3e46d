/*
 * A process of a tenant beside its memory reservation (gpuslice run --filled), which speaks
 * the reservation's protocol itself (common/reserve.h) to show how the reserver answers. It
 * makes device 0's primary context current (so that the tenant has an entry for the GPU),
 * maps its tenant's state file ($GPUSLICE_TENANT), and runs one command:
 *
 *   steer MIB TRIALS  until TRIALS trials say something (10 x TRIALS at most): the tenant's
 *                     use on the GPU grows by MIB without an
 *                     allocation (its counter, as the interposer charges one before asking the
 *                     driver) for two of the reserver's turns, then falls back for a third;
 *                     each turn is made at once by an ask for nothing (ask_seq bumped), right
 *                     after a turn that saw no growth. Prints, per trial,
 *                     "trial HELD0 HELD1 HELD2 HELD3 MS": what the reservation held before,
 *                     after each turn, and the milliseconds from the turn before the growth
 *                     to the first turn that saw it (over 10: another turn may have come
 *                     between, and the trial says nothing).
 *   holdoff MIB       asks the reservation for MIB as an allocation the driver refused does
 *                     (=MIB: for what it holds less MIB),
 *                     allocates nothing, and watches what it holds:
 *                     "holdoff ASK HELD0 HELD1 BACK_MS BYTES": the ask's answer (1), what it
 *                     held before and after the answer, when it held HELD0 (less the 64 MiB
 *                     dead band) again, in milliseconds after the answer (-1: not in 5 s), and
 *                     the bytes asked.
 *
 * Exit status: 0 when the command ran, 1 when CUDA or the tenant could not be had, 2 for bad
 * usage.
 */
#define _GNU_SOURCE
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/cuda_api.h"
#include "common/cuda_funcs.h"
#include "common/reserve.h"
#include "common/tenant.h"

#define DECL(ret, name, params) ret name params;
GS_CUDA_FUNCS(DECL)
#undef DECL

#define MIB (1ULL << 20)
#define BAND (64 * MIB)

static struct gpuslice_tenant *t;
static int e;          /* the reservation's entry for GPU 0 */
static uint64_t *used; /* the tenant's use on GPU 0 */

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

static uint64_t held(void)
{
    return __atomic_load_n(&t->reserve.dev[e].held, __ATOMIC_ACQUIRE);
}

/* One turn of the reserver, at once: an ask for nothing, waited for until answered (2 s). */
static int turn(void)
{
    uint32_t seq = __atomic_add_fetch(&t->reserve.ask_seq, 1, __ATOMIC_ACQ_REL);
    uint64_t end = now_ns() + 2000000000ULL;

    syscall(SYS_futex, &t->reserve.ask_seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
    while ((int32_t)(__atomic_load_n(&t->reserve.gave_seq, __ATOMIC_ACQUIRE) - seq) < 0) {
        if (now_ns() > end)
            return -1;
        usleep(50);
    }
    return 0;
}

static int steer(uint64_t bytes, int trials)
{
    int i, told = 0;

    for (i = 0; i < 10 * trials && told < trials; i++) {
        uint64_t h0, h1, h2, h3, t0;

        if (turn() < 0)
            return 1;
        t0 = now_ns();
        h0 = held();
        __atomic_add_fetch(used, bytes, __ATOMIC_ACQ_REL);
        if (turn() < 0)
            return 1;
        h1 = held();
        t0 = now_ns() - t0;
        if (turn() < 0)
            return 1;
        h2 = held();
        __atomic_sub_fetch(used, bytes, __ATOMIC_ACQ_REL);
        if (turn() < 0)
            return 1;
        h3 = held();
        printf("trial %llu %llu %llu %llu %.1f\n", (unsigned long long)h0, (unsigned long long)h1,
               (unsigned long long)h2, (unsigned long long)h3, t0 / 1e6);
        told += t0 <= 10000000ULL;
        sleep_ms(30);
    }
    return 0;
}

static int holdoff(const char *arg)
{
    uint64_t h0, h1, t0, end, bytes;
    long back = -1;
    int r;

    if (turn() < 0)
        return 1;
    h0 = held();
    bytes = strtoull(arg + (arg[0] == '='), NULL, 10) * MIB;
    if (arg[0] == '=')
        bytes = h0 > bytes ? h0 - bytes : 0;
    r = gs_reserve_ask(t, e, bytes, 2000000000ULL);
    t0 = now_ns();
    h1 = held();
    for (end = t0 + 5000000000ULL; now_ns() < end; usleep(2000)) {
        if (held() + BAND >= h0) {
            back = (long)((now_ns() - t0) / 1000000ULL);
            break;
        }
    }
    printf("holdoff %d %llu %llu %ld %llu\n", r, (unsigned long long)h0, (unsigned long long)h1,
           back, (unsigned long long)bytes);
    return 0;
}

int main(int argc, char **argv)
{
    const char *path = getenv("GPUSLICE_TENANT");
    CUcontext ctx;
    CUdevice dev;
    CUuuid u;
    int i;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc < 3 || (strcmp(argv[1], "steer") == 0 && argc < 4)) {
        fprintf(stderr, "usage: reserve_probe steer MIB TRIALS | holdoff MIB\n");
        return 2;
    }
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
        cuDeviceGetUuid_v2(&u, dev) != CUDA_SUCCESS ||
        cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS ||
        cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
        fprintf(stderr, "reserve_probe: CUDA did not start\n");
        return 1;
    }
    if (path == NULL || gs_tenant_open(path, &t) < 0 ||
        (e = gs_reserve_entry(t, (const uint8_t *)u.bytes)) < 0) {
        fprintf(stderr, "reserve_probe: no tenant with a reservation on GPU 0\n");
        return 1;
    }
    for (i = 0; i < GPUSLICE_MAX_DEVICES; i++)
        if (memcmp(t->dev[i].uuid, u.bytes, 16) == 0)
            break;
    if (i == GPUSLICE_MAX_DEVICES) {
        fprintf(stderr, "reserve_probe: the tenant has no entry for GPU 0\n");
        return 1;
    }
    used = &t->dev[i].mem_used;
    if (strcmp(argv[1], "steer") == 0)
        return steer(strtoull(argv[2], NULL, 10) * MIB, atoi(argv[3]));
    if (strcmp(argv[1], "holdoff") == 0)
        return holdoff(argv[2]);
    fprintf(stderr, "reserve_probe: no command %s\n", argv[1]);
    return 2;
}
