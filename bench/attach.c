/*
 * The launcher of bench/attach.sh: starts N child processes at once behind a barrier; each
 * loads libcuda.so.1 (dlopen, so the one binary runs on a real GPU and on the simulated one),
 * initialises CUDA, makes device 0's primary context current (as the CUDA runtime does) and
 * allocates ALLOC_MIB, reports its times, and holds everything until this process is told to
 * let go (a line on stdin, or its end). Run under `gpuslice run`, all of them are one tenant.
 * This process itself makes no CUDA call. Times are CLOCK_MONOTONIC seconds, comparable
 * between processes.
 *
 * stdout, one line each (parsed by bench/attach.py):
 *   tenant PATH               $GPUSLICE_TENANT, or "-"
 *   go T                      the barrier opened at T (every child was waiting on it)
 *   proc I PID STATUS T0 T_INIT T_CTX T_ALLOC STEP CODE
 *                             STATUS: ok, refused (CUDA_ERROR_OUT_OF_MEMORY) or error; STEP:
 *                             the call that failed (or -), CODE its CUresult; T0 before
 *                             dlopen, T_INIT after cuInit, T_CTX with the context current,
 *                             T_ALLOC after the allocation (0: not reached)
 *   holding OK REFUSED ERRORS MISSING     (MISSING: no report within TIMEOUT_S)
 *   probe I CODE FREE TOTAL   after a "probe" line on stdin: each child that attached (status
 *                             ok) asks cuMemGetInfo once (as a program asking for its free
 *                             memory does), CODE its CUresult; the others do not answer
 *   probed OK ERRORS MISSING  every child that attached answered (or TIMEOUT_S passed)
 *   released EXITED KILLED    after the release, children that exited / were killed
 *
 * stdin: a line "probe" (optional, once) and then any line, or the end, to release.
 * usage: attach N ALLOC_MIB [TIMEOUT_S]     (N 1..4096; TIMEOUT_S 120)
 * Exit status 0 when every child reported (whatever it reported), 1 otherwise, 2 on bad usage.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 4096
#define CUDA_ERROR_OUT_OF_MEMORY 2

typedef int (*init_fn)(unsigned);
typedef int (*device_get_fn)(int *, int);
typedef int (*retain_fn)(void **, int);
typedef int (*release_fn)(int);
typedef int (*set_current_fn)(void *);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
typedef int (*mem_info_fn)(size_t *, size_t *);

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Writes all of buf (a pipe write of under PIPE_BUF bytes is one atomic write). */
static void write_all(int fd, const char *buf, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, buf, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        buf += w;
        n -= (size_t)w;
    }
}

/* Blocks until the other end of fd is closed (or a byte arrives). */
static void wait_pipe(int fd)
{
    char c;

    while (read(fd, &c, 1) < 0 && errno == EINTR)
        ;
}

static void *sym(void *h, const char *a, const char *b)
{
    void *p = dlsym(h, a);

    return p || !b ? p : dlsym(h, b);
}

/*
 * A held child: until the release pipe closes; when the probe pipe closes
 * first, asks the driver for its free memory once and reports it.
 */
static void hold(int idx, int results, int probe, int release, mem_info_fn mem_info)
{
    struct pollfd pf[2] = { { release, POLLIN, 0 }, { probe, POLLIN, 0 } };
    char line[160];

    for (;;) {
        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return;
        }
        if (pf[0].revents)
            return;
        if (pf[1].revents) {
            size_t free_b = 0, total = 0;
            int code;

            pf[1].fd = -1; /* once */
            if (!mem_info)
                continue; /* no context: nothing to ask, and no answer is awaited */
            code = mem_info(&free_b, &total);
            snprintf(line, sizeof line, "probe %d %d %zu %zu\n", idx, code, free_b, total);
            write_all(results, line, strlen(line));
        }
    }
}

/* One child: waits at the barrier, attaches, reports, holds until released. */
static void child(int idx, int barrier, int results, int probe, int release, size_t bytes)
{
    double t0, t_init = 0, t_ctx = 0, t_alloc = 0;
    const char *status = "ok", *step = "-";
    unsigned long long ptr = 0;
    void *h, *ctx = NULL;
    int code = 0, dev = 0, have_ctx = 0;
    release_fn ctx_release = NULL;
    free_fn mem_free = NULL;
    mem_info_fn mem_info = NULL;
    char line[256];

    wait_pipe(barrier);
    t0 = now_s();
    h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        status = "error";
        step = "dlopen";
        code = -1;
    } else {
        init_fn init = (init_fn)sym(h, "cuInit", NULL);
        device_get_fn device_get = (device_get_fn)sym(h, "cuDeviceGet", NULL);
        retain_fn retain = (retain_fn)sym(h, "cuDevicePrimaryCtxRetain", NULL);
        set_current_fn set_current = (set_current_fn)sym(h, "cuCtxSetCurrent", NULL);
        alloc_fn mem_alloc = (alloc_fn)sym(h, "cuMemAlloc_v2", "cuMemAlloc");

        ctx_release =
            (release_fn)sym(h, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease");
        mem_free = (free_fn)sym(h, "cuMemFree_v2", "cuMemFree");
        mem_info = (mem_info_fn)sym(h, "cuMemGetInfo_v2", "cuMemGetInfo");
        if (!init || !device_get || !retain || !set_current || !mem_alloc || !ctx_release ||
            !mem_free || !mem_info) {
            status = "error";
            step = "dlsym";
            code = -1;
        } else if ((code = init(0)) != 0) {
            step = "cuInit";
        } else if ((t_init = now_s(), code = device_get(&dev, 0)) != 0) {
            step = "cuDeviceGet";
        } else if ((code = retain(&ctx, dev)) != 0) {
            step = "cuDevicePrimaryCtxRetain";
        } else if ((have_ctx = 1, code = set_current(ctx)) != 0) {
            step = "cuCtxSetCurrent";
        } else if ((t_ctx = now_s(), code = mem_alloc(&ptr, bytes)) != 0) {
            step = "cuMemAlloc";
        } else {
            t_alloc = now_s();
        }
        if (code > 0)
            status = code == CUDA_ERROR_OUT_OF_MEMORY ? "refused" : "error";
    }
    snprintf(line, sizeof line, "proc %d %d %s %.6f %.6f %.6f %.6f %s %d\n", idx, (int)getpid(),
             status, t0, t_init, t_ctx, t_alloc, step, code);
    write_all(results, line, strlen(line));
    hold(idx, results, probe, release, code == 0 && have_ctx ? mem_info : NULL);
    close(results);
    if (ptr)
        mem_free(ptr);
    if (have_ctx)
        ctx_release(dev);
    exit(0);
}

/*
 * Copies to stdout the lines read from fd until want lines starting with word
 * came or timeout seconds passed; counts their status (the word after the
 * child's index and, for "proc", its PID) in ok ("ok" or "0"), refused
 * ("refused") and errors (anything else). Returns how many came.
 */
static int read_lines(int fd, int want, const char *word, double timeout, int *ok, int *refused,
                      int *errors)
{
    static char buf[65536];
    static size_t have;
    double deadline = now_s() + timeout;
    size_t wl = strlen(word);
    const char *fmt = strcmp(word, "proc") == 0 ? " %*d %*d %15s" : " %*d %15s";
    int got = 0;

    while (got < want) {
        struct pollfd pf = { fd, POLLIN, 0 };
        double left = deadline - now_s();
        ssize_t r;
        char *nl;

        if (left <= 0 || poll(&pf, 1, (int)(left * 1000) + 1) <= 0) {
            if (left <= 0 || errno != EINTR)
                break;
            continue;
        }
        r = read(fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            break; /* every child closed its end */
        have += (size_t)r;
        buf[have] = '\0';
        while ((nl = strchr(buf, '\n')) != NULL) {
            char st[16] = "";

            *nl = '\0';
            fputs(buf, stdout);
            fputc('\n', stdout);
            if (strncmp(buf, word, wl) == 0 && buf[wl] == ' ' && sscanf(buf + wl, fmt, st) == 1) {
                got++;
                if (strcmp(st, "ok") == 0 || strcmp(st, "0") == 0)
                    ++*ok;
                else if (refused && strcmp(st, "refused") == 0)
                    ++*refused;
                else
                    ++*errors;
            }
            have -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, have + 1);
        }
    }
    return got;
}

int main(int argc, char **argv)
{
    static pid_t pids[MAX_PROCS];
    int barrier[2], results[2], probe[2], release[2], n, i, forked = 0, got = 0;
    int ok = 0, refused = 0, errors = 0, exited = 0, killed = 0;
    double timeout = argc > 3 ? atof(argv[3]) : 120.0, deadline;
    const char *tenant = getenv("GPUSLICE_TENANT");
    char line[64];
    size_t bytes;
    long mib;

    if (argc < 3 || (n = atoi(argv[1])) < 1 || n > MAX_PROCS || (mib = atol(argv[2])) < 0 ||
        timeout <= 0) {
        fprintf(stderr, "usage: attach N ALLOC_MIB [TIMEOUT_S]   (N 1..%d)\n", MAX_PROCS);
        return 2;
    }
    bytes = (size_t)mib << 20;
    setvbuf(stdout, NULL, _IOLBF, 0);
    signal(SIGPIPE, SIG_IGN);
    if (pipe(barrier) < 0 || pipe(results) < 0 || pipe(probe) < 0 || pipe(release) < 0) {
        perror("attach: pipe");
        return 1;
    }
    printf("tenant %s\n", tenant && *tenant ? tenant : "-");
    fflush(stdout); /* nothing buffered may be copied into the children */
    for (i = 0; i < n; i++) {
        pid_t p = fork();

        if (p < 0) {
            fprintf(stderr, "attach: fork %d of %d: %s\n", i + 1, n, strerror(errno));
            break;
        }
        if (p == 0) {
            close(barrier[1]);
            close(probe[1]);
            close(release[1]);
            close(results[0]);
            child(i, barrier[0], results[1], probe[0], release[0], bytes);
        }
        pids[forked++] = p;
    }
    close(barrier[0]);
    close(probe[0]);
    close(release[0]);
    close(results[1]);
    usleep(200000); /* every child reaches its read of the barrier */
    printf("go %.6f\n", now_s());
    fflush(stdout);
    close(barrier[1]);

    got = read_lines(results[0], forked, "proc", timeout, &ok, &refused, &errors);
    printf("holding %d %d %d %d\n", ok, refused, errors, n - got);
    fflush(stdout);
    if (!fgets(line, sizeof line, stdin))
        line[0] = '\0';
    if (strncmp(line, "probe", 5) == 0) {
        int pok = 0, perr = 0, pgot;

        close(probe[1]);
        pgot = read_lines(results[0], ok, "probe", timeout, &pok, NULL, &perr);
        printf("probed %d %d %d\n", pok, perr, ok - pgot);
        fflush(stdout);
        if (!fgets(line, sizeof line, stdin))
            line[0] = '\0';
    }
    close(release[1]);
    deadline = now_s() + 30;
    for (i = 0; i < forked; i++) {
        int status;

        for (;;) {
            pid_t w = waitpid(pids[i], &status, WNOHANG);

            if (w == pids[i] || (w < 0 && errno != EINTR)) {
                exited++;
                break;
            }
            if (now_s() > deadline) {
                kill(pids[i], SIGKILL);
                waitpid(pids[i], &status, 0);
                killed++;
                break;
            }
            usleep(2000);
        }
    }
    printf("released %d %d\n", exited, killed);
    return got == n ? 0 : 1;
}
