/*
 * Programs side by side on one GPU, each on its own share of its SMs
 * (gpuslice procs, which plans the lanes): makes sure gpuslice's MPS daemon
 * for the GPU runs, starts every lane as `gpuslice run --gpu-share 100 --sms
 * COUNT@FIRST`, waits until each has made its partition (the interposer says
 * so in a file of a directory of ours, GPUSLICE_LANE_BARRIER), releases them
 * together and waits for them; when a lane fails the others are terminated.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/log.h"
#include "control/mps.h"
#include "control/side_by_side.h"
#include "common/env.h"

static volatile sig_atomic_t stop_signal;

static void on_signal(int sig)
{
    stop_signal = sig;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * The lane's child: `gpuslice run -q --device UUID --gpu-share 100 --sms C@F [--memory BYTES]
 * -- ARGS`.
 */
static void exec_lane(const struct lane *l, int index, const char *uuid, const char *dir,
                      int fine_split)
{
    char sms[48], idx[16], mem[24], barrier[PATH_MAX + 16], **av;
    int k = 0, i, null;

    if (!(av = calloc((size_t)l->argc + 14, sizeof(*av))))
        _exit(GS_EXIT_ERROR);
    /* Every lane from the split the plan used: groups of two splits may not be the same SMs. */
    snprintf(sms, sizeof(sms), "%u@%u%s", l->sm.count, l->sm.first, fine_split ? "/fine" : "");
    snprintf(idx, sizeof(idx), "%d", index);
    snprintf(barrier, sizeof(barrier), "%s/%d", dir, index);
    if (setenv(GS_ENV_LANE, idx, 1) < 0 || setenv(GS_ENV_LANE_BARRIER, barrier, 1) < 0)
        _exit(GS_EXIT_ERROR);
    /* What procs changed is not the program's: SIGPIPE back to its default. */
    signal(SIGPIPE, SIG_DFL);
    /*
     * Each lane is a process group of its own, so that it can be terminated
     * whole; a background group reading the terminal would stop, so the lanes
     * read nothing from it.
     */
    setpgid(0, 0);
    if ((null = open("/dev/null", O_RDONLY)) >= 0) {
        dup2(null, 0);
        if (null > 0)
            close(null);
    }
    av[k++] = "gpuslice";
    av[k++] = "run";
    av[k++] = "-q"; /* procs says what each lane is; errors still print */
    av[k++] = "--device";
    av[k++] = (char *)uuid;
    av[k++] = "--gpu-share";
    av[k++] = "100";
    av[k++] = "--sms";
    av[k++] = sms;
    if (l->memory) {
        snprintf(mem, sizeof(mem), "%llu", (unsigned long long)l->memory);
        av[k++] = "--memory";
        av[k++] = mem;
    }
    av[k++] = "--";
    for (i = 0; i < l->argc; i++)
        av[k++] = l->argv[i];
    av[k] = NULL;
    execv("/proc/self/exe", av);
    fprintf(stderr, "gpuslice: procs: cannot start lane %d: %s\n", index, strerror(errno));
    _exit(127);
}

static int exit_status(int st)
{
    return WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : GS_EXIT_ERROR;
}

/*
 * Ends every lane still running: SIGTERM to its process group, SIGKILL after 5 s. Before the
 * release (released 0) the groups of lanes that ended are sent SIGTERM too: a process such a
 * lane left waiting for the release (its CUDA program, started in the background) would take
 * the removal of the directory for the release and run on, unsupervised, after procs failed.
 * Their leaders were left zombies, so that the groups' IDs cannot have been given to others.
 */
static void terminate(struct lane *l, int n, int released)
{
    double deadline = now_s() + 5;
    int i, left;

    for (i = 0; i < n; i++)
        if (l[i].pid > 0 && (!l[i].ended || !released))
            kill(-l[i].pid, SIGTERM);
    do {
        left = 0;
        for (i = 0; i < n; i++) {
            int st;
            if (l[i].pid <= 0 || l[i].ended)
                continue;
            if (waitpid(l[i].pid, &st, WNOHANG) == l[i].pid) {
                l[i].ended = 1;
                l[i].status = exit_status(st);
            } else {
                left++;
            }
        }
        if (left)
            usleep(50000);
    } while (left && now_s() < deadline);
    for (i = 0; i < n; i++)
        if (l[i].pid > 0 && !l[i].ended) {
            kill(-l[i].pid, SIGKILL);
            waitpid(l[i].pid, NULL, 0);
            l[i].ended = 1;
        }
    /* The lanes that ended before the release were left zombies (side_by_side_run). */
    for (i = 0; i < n; i++)
        if (l[i].pid > 0)
            waitpid(l[i].pid, NULL, WNOHANG);
}

/* What lane i said in DIR/ready.I: 1 and its line, 0 while it has said nothing. */
static int read_ready(const char *dir, int i, struct lane *l)
{
    char path[PATH_MAX + 32];
    ssize_t k;
    int fd;

    snprintf(path, sizeof(path), "%s/ready.%d", dir, i);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return 0;
    k = read(fd, l->line, sizeof(l->line) - 1);
    close(fd);
    l->line[k > 0 ? k : 0] = '\0';
    return 1;
}

/* Removes the barrier's directory and what is in it (only files procs or its lanes made). */
static void remove_dir(const char *dir)
{
    char path[PATH_MAX + 260];
    DIR *d = opendir(dir);
    struct dirent *e;

    if (d) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    rmdir(dir);
}

int side_by_side_run(struct lane *lanes, int n, const struct geom_query *q, int fine,
                     double timeout, double mps_to, void (*released)(void *arg), void *arg)
{
    char err[1024], bin[MPS_PATH_MAX], dir[PATH_MAX], path[PATH_MAX + 8];
    const char *rt = getenv("XDG_RUNTIME_DIR");
    struct mps_gpu g;
    struct sigaction sa;
    double deadline;
    int i, started = 0, failed = -1, status = 0, fd, go = 0;

    /* Concurrency across processes needs MPS. */
    if (mps_check_platform(bin, sizeof(bin), err, sizeof(err)) < 0) {
        gs_log_error("procs: %s", err);
        return GS_EXIT_ERROR;
    }
    if (mps_gpu_init(&g, q->uuid) < 0) {
        gs_log_error("procs: the MPS directory for %s would be too long (set XDG_RUNTIME_DIR to "
                     "a shorter directory)",
                     q->uuid);
        return GS_EXIT_ERROR;
    }
    signal(SIGPIPE, SIG_IGN);
    if (mps_daemon_start(bin, &g, mps_to, &started, err, sizeof(err)) < 0) {
        gs_log_error("procs: MPS: %s", err);
        return GS_EXIT_ERROR;
    }
    gs_log_note("procs: %s the MPS control daemon for %s", started ? "started" : "reusing",
                q->uuid);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    /* The lanes' rendezvous: a directory of our own (mode 0700). */
    snprintf(dir, sizeof(dir), "%s/gpuslice-procs-XXXXXX", rt && *rt == '/' ? rt : "/tmp");
    if (mkdtemp(dir) == NULL) {
        gs_log_error("procs: cannot make a directory for the lanes' start (%s): %s", dir,
                     strerror(errno));
        return GS_EXIT_ERROR;
    }
    /* Who waits for the lanes: a lane stops waiting when this process is gone. */
    snprintf(path, sizeof(path), "%s/owner", dir);
    if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0) {
        char pid[24];
        int len = snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
        if (write(fd, pid, (size_t)len) != len)
            gs_log_note("procs: cannot write %s: lanes will not notice if procs is killed", path);
        close(fd);
    }
    fflush(NULL);
    for (i = 0; i < n; i++) {
        if ((lanes[i].pid = fork()) < 0) {
            gs_log_error("procs: fork: %s", strerror(errno));
            failed = i;
            status = GS_EXIT_ERROR;
            break;
        }
        if (lanes[i].pid == 0)
            exec_lane(&lanes[i], i, q->uuid, dir, fine);
        setpgid(lanes[i].pid, lanes[i].pid);
    }

    /* Until every lane holds its partition (or one fails, ends, or time runs out). */
    deadline = now_s() + timeout;
    for (;;) {
        int waiting = 0;
        siginfo_t si;

        if (failed >= 0 || stop_signal)
            break;
        for (i = 0; i < n && failed < 0; i++) {
            struct lane *l = &lanes[i];
            if (!l->ready && read_ready(dir, i, l)) {
                if (sscanf(l->line, "ready %d", &l->prog) == 1) {
                    char mem[48] = "", size[32];

                    l->ready = 1;
                    if (l->memory) {
                        gs_format_size(l->memory, size, sizeof(size));
                        snprintf(mem, sizeof(mem), ", memory limit %.24s", size);
                    }
                    gs_log_note("procs: lane %d: PID %d, share %g, %u SMs (from SM %u)%s: %s", i,
                                (int)l->prog, l->sm.share, l->sm.count, l->sm.first, mem,
                                l->argv[0]);
                } else {
                    char *msg =
                        strncmp(l->line, "error ", 6) == 0 ? strchr(l->line + 6, ' ') : NULL;
                    l->line[strcspn(l->line, "\n")] = '\0';
                    gs_log_error("procs: lane %d cannot have its partition: %s", i,
                                 msg ? msg + 1 : l->line);
                    failed = i;
                    status = GS_EXIT_ERROR;
                }
            }
            /*
             * Left a zombie (WNOWAIT): its PID, its group's ID, stays reserved until terminate
             * has signalled the group, so no other process group can be given that ID.
             */
            memset(&si, 0, sizeof(si)); /* si_pid stays 0 while the lane runs */
            if (!l->ended && waitid(P_PID, (id_t)l->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
                si.si_pid == l->pid) {
                l->ended = 1;
                l->status = si.si_code == CLD_EXITED ? si.si_status : 128 + si.si_status;
                if (failed < 0 && (!l->ready || l->status != 0)) {
                    gs_log_error("procs: lane %d (%s) ended before the lanes were released, "
                                 "with status %d",
                                 i, l->argv[0], l->status);
                    failed = i;
                    status = l->status ? l->status : GS_EXIT_ERROR;
                }
            }
            waiting += !l->ready;
        }
        if (failed >= 0 || waiting == 0)
            break;
        if (now_s() > deadline) {
            for (i = 0; i < n && lanes[i].ready; i++)
                ;
            gs_log_error("procs: lane %d (%s) did not make its partition within %g s (a "
                         "program that never uses CUDA, or only contexts of its own, never "
                         "does; see --timeout)",
                         i, lanes[i].argv[0], timeout);
            failed = i;
            status = GS_EXIT_ERROR;
            break;
        }
        usleep(20000);
    }
    if (failed < 0 && !stop_signal) {
        if (released)
            released(arg);
        snprintf(path, sizeof(path), "%s/go", dir);
        if ((fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0)
            close(fd);
        go = 1;
        gs_log_note("procs: %d lanes on %s released together", n, q->uuid);
        /* Until all end, or one fails. */
        for (;;) {
            int st, left = 0;
            pid_t p = waitpid(-1, &st, 0);
            if (p < 0 && errno == EINTR) {
                if (stop_signal)
                    break;
                continue;
            }
            if (p < 0)
                break;
            for (i = 0; i < n; i++) {
                if (lanes[i].pid == p) {
                    lanes[i].ended = 1;
                    lanes[i].status = exit_status(st);
                    if (lanes[i].status != 0 && failed < 0) {
                        gs_log_error("procs: lane %d (%s) failed with status %d; terminating "
                                     "the others",
                                     i, lanes[i].argv[0], lanes[i].status);
                        failed = i;
                        status = lanes[i].status;
                    }
                }
                left += !lanes[i].ended;
            }
            if (failed >= 0 || left == 0)
                break;
        }
    }
    if (stop_signal) {
        gs_log_error("procs: %s: terminating the lanes", strsignal(stop_signal));
        status = 128 + stop_signal;
    }
    /* Before the directory goes: lanes still waiting would take its end for a release. */
    terminate(lanes, n, go);
    remove_dir(dir);
    return status;
}
