/*
 * Thread-race check for the memory limit. 16 threads sharing the primary context start
 * together and allocate 64 MiB blocks with cuMemAlloc as fast as they can until each is
 * refused; the blocks that succeeded plus the context's footprint must fit the limit in
 * every round, and freeing them (also from 16 threads at once) must bring the accounted
 * usage back exactly. A last phase has every thread allocate and free in a tight loop
 * near the limit, so increments and decrements race; usage must not drift.
 *
 * usage: threads_race LIMIT_BYTES [ROUNDS]   (output follows check.h; exit 1 on failure)
 */
#include <cuda.h>
#include <pthread.h>
#include <string.h>

#include "cu_check.h"

#define THREADS 16
#define BLOCK ((size_t)64 << 20)
#define SLACK ((size_t)2 << 20)
#define MAX_PER_THREAD 64
#define CHURN_ITERS 300

struct worker {
    int id;
    size_t n;
    CUresult last;
    CUresult setup;
    CUdeviceptr p[MAX_PER_THREAD];
    size_t churn_ok, churn_oom, churn_other;
};

static CUcontext ctx;
static size_t cap;
static pthread_barrier_t start;
static struct worker workers[THREADS];

static size_t mem_free(size_t *total)
{
    size_t f = 0, t = 0;
    CU(cuMemGetInfo(&f, &t));
    if (total)
        *total = t;
    return f;
}

static void *alloc_until_refused(void *arg)
{
    struct worker *w = arg;
    CUresult r;

    w->setup = cuCtxSetCurrent(ctx);
    pthread_barrier_wait(&start);
    if (w->setup != CUDA_SUCCESS)
        return NULL;
    w->last = CUDA_SUCCESS;
    while (w->n < cap) {
        r = cuMemAlloc(&w->p[w->n], BLOCK);
        if (r != CUDA_SUCCESS) {
            w->last = r;
            break;
        }
        w->n++;
    }
    return NULL;
}

static void *free_all(void *arg)
{
    struct worker *w = arg;
    size_t i;

    w->setup = cuCtxSetCurrent(ctx);
    pthread_barrier_wait(&start);
    for (i = 0; i < w->n; i++)
        if (cuMemFree(w->p[i]) != CUDA_SUCCESS)
            w->last = CUDA_ERROR_UNKNOWN;
    w->n = 0;
    return NULL;
}

static void *churn(void *arg)
{
    struct worker *w = arg;
    CUdeviceptr p;
    CUresult r;
    int i;

    w->setup = cuCtxSetCurrent(ctx);
    pthread_barrier_wait(&start);
    if (w->setup != CUDA_SUCCESS)
        return NULL;
    for (i = 0; i < CHURN_ITERS; i++) {
        r = cuMemAlloc(&p, BLOCK);
        if (r == CUDA_SUCCESS) {
            w->churn_ok++;
            if (cuMemFree(p) != CUDA_SUCCESS)
                w->churn_other++;
        } else if (r == CUDA_ERROR_OUT_OF_MEMORY) {
            w->churn_oom++;
        } else {
            w->churn_other++;
        }
    }
    return NULL;
}

static int run_threads(void *(*fn)(void *))
{
    pthread_t t[THREADS];
    int i, started = 0, ok = 1;

    if (pthread_barrier_init(&start, NULL, THREADS) != 0)
        return expect(0, "pthread_barrier_init failed");
    for (i = 0; i < THREADS; i++) {
        workers[i].id = i;
        if (pthread_create(&t[i], NULL, fn, &workers[i]) != 0)
            break;
        started++;
    }
    if (started != THREADS) {
        /* The barrier would never open: cannot recover cleanly, so report and stop. */
        expect(0, "pthread_create failed after %d threads", started);
        fflush(stdout);
        _Exit(1);
    }
    for (i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&start);
    for (i = 0; i < THREADS; i++)
        if (workers[i].setup != CUDA_SUCCESS)
            ok = expect(0, "thread %d: cuCtxSetCurrent returned %d", i, (int)workers[i].setup);
    return ok;
}

int main(int argc, char **argv)
{
    size_t limit, total, f0, f, used0, sum, max_sum = 0, min_sum = (size_t)-1, max_end_free = 0;
    size_t worst_used = 0, churn_ok = 0, churn_oom = 0, churn_other = 0;
    int rounds = 30, round, i, bad_code = 0, over = 0, early = 0, drift = 0, free_err = 0;
    CUdevice dev;
    char *end;

    check_init();
    if (argc < 2 || argc > 3 || !(limit = strtoull(argv[1], &end, 10)) || *end ||
        (argc == 3 && (rounds = atoi(argv[2])) <= 0)) {
        fprintf(stderr, "usage: threads_race LIMIT_BYTES [ROUNDS]\n");
        return 2;
    }
    if (!CU(cuInit(0)) || !CU(cuDeviceGet(&dev, 0)) || !CU(cuDevicePrimaryCtxRetain(&ctx, dev)) ||
        !CU(cuCtxSetCurrent(ctx)))
        return check_done();
    f0 = mem_free(&total);
    used0 = total - f0;
    key("total_bytes", (double)total);
    key("context_MiB", used0 / MiB);
    if (!expect(total == limit, "cuMemGetInfo total %zu == limit %zu", total, limit) || f0 > total)
        return check_done();
    cap = limit / BLOCK + 2;
    if (cap > MAX_PER_THREAD)
        cap = MAX_PER_THREAD;

    for (round = 0; round < rounds; round++) {
        memset(workers, 0, sizeof workers);
        if (!run_threads(alloc_until_refused))
            break;
        sum = 0;
        for (i = 0; i < THREADS; i++) {
            sum += workers[i].n;
            if (workers[i].last != CUDA_ERROR_OUT_OF_MEMORY) {
                if (!bad_code)
                    printf("round %d thread %d ended with %d (%s) after %zu blocks\n", round, i,
                           (int)workers[i].last, errname(workers[i].last), workers[i].n);
                bad_code++;
            }
        }
        f = mem_free(NULL);
        if (used0 + sum * BLOCK > limit)
            over++;
        if (f >= BLOCK)
            early++;
        if (used0 + sum * BLOCK > worst_used)
            worst_used = used0 + sum * BLOCK;
        if (f > max_end_free)
            max_end_free = f;
        if (sum > max_sum)
            max_sum = sum;
        if (sum < min_sum)
            min_sum = sum;
        if (round < 3 || round == rounds - 1)
            printf("round %d: %zu blocks of 64 MiB succeeded, free %.1f MiB at the end\n", round,
                   sum, f / MiB);
        if (!run_threads(free_all))
            break;
        for (i = 0; i < THREADS; i++)
            free_err += workers[i].last == CUDA_ERROR_UNKNOWN;
        f = mem_free(NULL);
        if (f > f0 ? f - f0 > SLACK : f0 - f > SLACK) {
            if (!drift)
                printf("round %d: after freeing, free is %.1f MiB, was %.1f\n", round, f / MiB,
                       f0 / MiB);
            drift++;
        }
    }
    key("rounds", round);
    key("max_blocks", (double)max_sum);
    num("min_blocks", (double)(min_sum == (size_t)-1 ? 0 : min_sum));
    key("worst_used_MiB", worst_used / MiB);
    num("max_free_at_end_MiB", max_end_free / MiB);
    expect(round == rounds, "all %d rounds ran (%d did)", rounds, round);
    expect(over == 0,
           "in every round context %.1f MiB + successful blocks <= limit %.1f MiB "
           "(worst %.1f MiB, %d rounds over)",
           used0 / MiB, limit / MiB, worst_used / MiB, over);
    expect(bad_code == 0, "every thread stopped with CUDA_ERROR_OUT_OF_MEMORY (%d did not)",
           bad_code);
    expect(early == 0,
           "every round filled the limit: free < 64 MiB at the end (%d rounds stopped "
           "early, max free %.1f MiB)",
           early, max_end_free / MiB);
    expect(free_err == 0, "every cuMemFree from the freeing threads succeeded (%d failed)",
           free_err);
    expect(drift == 0, "after each round's frees, free is back to %.1f MiB (%d rounds drifted)",
           f0 / MiB, drift);

    /* Alloc/free churn near the limit: hold about half of what fits, then race. */
    {
        CUdeviceptr hold[MAX_PER_THREAD];
        size_t nhold = 0, want = (f0 / BLOCK) / 2;
        while (nhold < want && nhold < MAX_PER_THREAD && CU(cuMemAlloc(&hold[nhold], BLOCK)))
            nhold++;
        memset(workers, 0, sizeof workers);
        if (run_threads(churn)) {
            for (i = 0; i < THREADS; i++) {
                churn_ok += workers[i].churn_ok;
                churn_oom += workers[i].churn_oom;
                churn_other += workers[i].churn_other;
            }
        }
        f = mem_free(NULL);
        num("churn_ok", (double)churn_ok);
        num("churn_oom", (double)churn_oom);
        expect(churn_other == 0, "churn: %zu allocations, %zu refused with OOM, %zu other errors",
               churn_ok, churn_oom, churn_other);
        expect(f + nhold * BLOCK + SLACK >= f0 && f + nhold * BLOCK <= f0 + SLACK,
               "after the churn free is %.1f MiB = %.1f - %zu held blocks (no drift)", f / MiB,
               f0 / MiB, nhold);
        while (nhold > 0)
            CU(cuMemFree(hold[--nhold]));
        f = mem_free(NULL);
        expect(f + SLACK >= f0 && f <= f0 + SLACK,
               "after freeing everything free is %.1f MiB, "
               "as at the start (%.1f)",
               f / MiB, f0 / MiB);
    }
    CU(cuDevicePrimaryCtxRelease(dev));
    return check_done();
}
