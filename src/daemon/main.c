/*
 * gpusliced's entry point: options, then the GPUs (its first log line says
 * whether they are real or simulated), the node segment and tenants, the
 * HTTP server; then it waits for SIGTERM or SIGINT and stops in the reverse
 * order, within a deadline. The node segment and the tenants' state files outlive it: their
 * processes keep their limits while no daemon runs, and the next one takes
 * them over. With --webhook-only it serves the admission webhook alone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/dra.h"
#include "daemon/guard/guard.h"
#include "daemon/kube.h"
#include "daemon/pods.h"

/* Into the background: the parent returns once the child is serving (or has failed). */
static int background(void)
{
    int p[2];
    pid_t pid;
    char ok = 0;

    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    if ((pid = fork()) < 0)
        return -1;
    if (pid > 0) {
        close(p[1]);
        if (read(p[0], &ok, 1) != 1)
            ok = 0;
        _exit(ok == 1 ? 0 : 1);
    }
    close(p[0]);
    setsid();
    if (fork() > 0)
        _exit(0);
    return p[1];
}

static void ready_signal(int fd)
{
    char ok = 1;
    int devnull;

    if (fd < 0)
        return;
    if (write(fd, &ok, 1) != 1) {
        /* the parent is gone: nothing to tell */
    }
    close(fd);
    if ((devnull = open("/dev/null", O_RDWR | O_CLOEXEC)) >= 0) {
        dup2(devnull, STDIN_FILENO);
        dup2(devnull, STDOUT_FILENO);
        dup2(devnull, STDERR_FILENO);
        close(devnull);
    }
    gd_log_syslog = 1;
}

/*
 * Where the kernel groups tasks by session (autogroup: tasks of the root CPU cgroup, as under
 * systemd with cgroup v1), a nice orders the threads of one group only, and each group weighs
 * the same: 4 busy tenants in sessions of their own kept a p99 of 20-60 ms whatever the
 * daemon's nice (bench/node_soak.py, docs/soak.md). The group takes the nice too, when the
 * daemon leads its session (a systemd service, a container's first process, the daemon in the
 * background): a foreground daemon leaves its shell's session as it is.
 */
static void autogroup_nice(long n)
{
    FILE *f;

    if (getsid(0) != getpid() || (f = fopen("/proc/self/autogroup", "we")) == NULL)
        return; /* not its session's, or no autogroup */
    fprintf(f, "%ld", n);
    if (fclose(f) != 0)
        gd_log("warning: cannot give its session's group (autogroup) nice %ld (%s): tenants in "
               "sessions of their own may slow the answers",
               n, strerror(errno));
}

/*
 * The daemon's own CPU priority and descriptors, before its threads start (they inherit
 * both). Busy tenants at nice 0 otherwise delay its answers by their time slices (a p99 of
 * 206-335 ms at 1000 requests/s, issue 28); a daemon that may not raise its priority says so
 * and runs on.
 */
static void own_resources(void)
{
    struct rlimit rl;

    /*
     * Memory a request freed goes back to the system: a body or a text of some size is mapped
     * on its own and unmapped when freed (glibc would otherwise raise that threshold after the
     * first large free, and keep them), and a few arenas rather than 8 per CPU keep what each
     * connection's thread freed (request-memory bounds what requests hold, not what malloc
     * keeps).
     */
    mallopt(M_MMAP_THRESHOLD, 128 * 1024);
    mallopt(M_TRIM_THRESHOLD, 1024 * 1024);
    mallopt(M_ARENA_MAX, 4);
    /*
     * The threads started from here on inherit this one's priority: the daemon's own work
     * (sampling, sweeping, Kubernetes) runs 5 steps below its answers, which the listeners'
     * threads give at nice itself (http.c), so that a long sweep does not delay them either.
     */
    if (gd_opt.nice != 0 && setpriority(PRIO_PROCESS, 0, (int)gd_nice_background()) < 0)
        gd_log("warning: cannot run at nice %ld (%s): busy tenants may slow the answers; give "
               "the daemon CAP_SYS_NICE, or nice = 0 to stay as it is",
               gd_opt.nice, strerror(errno));
    else if (gd_opt.nice != 0)
        autogroup_nice(gd_opt.nice);
    /* A connection is a descriptor: room for every listener's. */
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/*
 * Stopping is bounded: from the first SIGTERM or SIGINT, every part has STOP_DEADLINE_S to
 * stop (its threads joined); past it, or at a second signal, the daemon says what it was
 * still waiting for and exits with status 1 anyway. Nothing it leaves is unsafe: the node
 * segment and the state files outlive it by design, and the next daemon takes them over.
 */
#define STOP_DEADLINE_S 5

static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond = PTHREAD_COND_INITIALIZER;
static int stop_sig; /* under stop_mu */
static const char *waiting_for = "its start (the GPUs, the tenants, the servers)"; /* atomic */

static void now_waiting_for(const char *what)
{
    __atomic_store_n(&waiting_for, what, __ATOMIC_RELEASE);
}

/*
 * The one thread that takes the signals (every other thread blocks them): SIGHUP is said and
 * ignored; the first SIGTERM or SIGINT wakes main to stop, even while it is still starting,
 * then the deadline runs.
 */
static void *signals_main(void *arg)
{
    const sigset_t *set = arg;
    struct timespec left;
    uint64_t end;
    int sig;

    for (;;) {
        if (sigwait(set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            gd_log("SIGHUP: the configuration is read at start only; restart to change it");
            continue;
        }
        break;
    }
    pthread_mutex_lock(&stop_mu);
    stop_sig = sig;
    pthread_cond_signal(&stop_cond);
    pthread_mutex_unlock(&stop_mu);
    end = gd_mono_ns() + STOP_DEADLINE_S * 1000000000ULL;
    for (;;) {
        uint64_t now = gd_mono_ns();

        if (now >= end)
            break;
        left.tv_sec = (time_t)((end - now) / 1000000000ULL);
        left.tv_nsec = (long)((end - now) % 1000000000ULL);
        sig = sigtimedwait(set, NULL, &left);
        if (sig == SIGTERM || sig == SIGINT) {
            gd_log("signal %d while stopping: exiting now, not waiting for %s", sig,
                   __atomic_load_n(&waiting_for, __ATOMIC_ACQUIRE));
            _exit(1);
        }
        if (sig < 0 && errno == EAGAIN)
            break;
    }
    gd_log("not stopped after %d s: still waiting for %s; exiting anyway", STOP_DEADLINE_S,
           __atomic_load_n(&waiting_for, __ATOMIC_ACQUIRE));
    _exit(1);
}

/* Waits for the signal thread to report a signal that stops the daemon; returns the signal. */
static int wait_for_stop(void)
{
    int sig;

    now_waiting_for("nothing");
    pthread_mutex_lock(&stop_mu);
    while (stop_sig == 0)
        pthread_cond_wait(&stop_cond, &stop_mu);
    sig = stop_sig;
    pthread_mutex_unlock(&stop_mu);
    return sig;
}

/*
 * The API server's client for the webhook's claims mode (webhook-claims): it makes claim
 * templates, and cannot work without one. 0 (also when the mode is off), or -1 with err.
 */
static int claims_client(char *err, size_t errlen)
{
    int r;

    if (!gd_opt.webhook_claims || (r = gd_kube_client_start(err, errlen)) > 0)
        return 0;
    if (r == 0)
        snprintf(err, errlen, "--webhook-claims makes claim templates in the API server: give "
                              "kube-api (an https:// URL), or run in a cluster");
    return -1;
}

int main(int argc, char **argv)
{
    static sigset_t set;
    char err[1024];
    pthread_t sig_th;
    int r, sig, ndev, notify = -1;

    if ((r = gd_options_load(argc, argv)) >= 0)
        return r;
    umask(022);
    gethostname(gd.hostname, sizeof(gd.hostname) - 1);
    gd_api_scrub(gd.hostname);
    gd.started_unix_ns = gd_unix_ns();
    if (!gd_opt.foreground) {
        openlog("gpusliced", LOG_PID, LOG_DAEMON);
        if ((notify = background()) < 0) {
            fprintf(stderr, "gpusliced: cannot go into the background: %s\n", strerror(errno));
            return 1;
        }
    }
    /* Every thread started from here on leaves these signals to signals_main. */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    own_resources();
    if ((r = pthread_create(&sig_th, NULL, signals_main, &set)) != 0) {
        gd_log("cannot start: a thread for the signals: %s", strerror(r));
        return 1;
    }
    pthread_detach(sig_th);
    if (gd_opt.webhook_only) {
        /*
         * Apart from the node: its failure takes no enforcement down, and it needs none. With
         * webhook-claims, the API server's client (no node, no pod watch): the templates.
         */
        if (claims_client(err, sizeof(err)) < 0 || gd_http_start_webhook(err, sizeof(err)) < 0) {
            gd_log("cannot start: %s", err);
            return 1;
        }
        ready_signal(notify);
        sig = wait_for_stop();
        gd_log("stopping (signal %d)", sig);
        now_waiting_for("the webhook's server (its connections)");
        gd_http_stop();
        gd_kube_stop();
        return 0;
    }
    if (gd_devices_start(err, sizeof(err)) < 0 || gd_events_init() < 0 ||
        gd_contain_start(err, sizeof(err)) < 0 || gd_registry_start(err, sizeof(err)) < 0 ||
        gd_guard_start(err, sizeof(err)) < 0 || gd_wall_start() < 0 ||
        gd_devices_run(err, sizeof(err)) < 0 || gd_boards_start(err, sizeof(err)) < 0 ||
        gd_http_start(err, sizeof(err)) < 0 || gd_kube_start(err, sizeof(err)) < 0 ||
        claims_client(err, sizeof(err)) < 0 ||
        (gd_kube_enabled() && gd_pods_start(err, sizeof(err)) < 0) ||
        gd_dra_start(err, sizeof(err)) < 0) {
        gd_log("cannot start: %s", err);
        return 1;
    }
    pthread_mutex_lock(&gd.mu); /* the sampler thread runs now */
    ndev = gd.ndev;
    pthread_mutex_unlock(&gd.mu);
    gd_log("serving on %s (%d GPU%s%s; run directory %s, state %s)", gd_opt.socket, ndev,
           ndev == 1 ? "" : "s", gd.simulated ? ", simulated" : "", gd_opt.run_dir,
           gd_opt.state_dir);
    ready_signal(notify);
    sig = wait_for_stop();
    gd_log("stopping (signal %d); tenants keep their limits", sig);
    __atomic_store_n(&gd.ready, -1, __ATOMIC_RELEASE);
    gd_events_stop();
    now_waiting_for("the DRA driver (a Prepare in progress; its ResourceSlice removed)");
    gd_dra_stop();
    now_waiting_for("the Kubernetes pod watch (a request to the API server)");
    gd_kube_stop();
    now_waiting_for("the pods' socket (its thread)");
    gd_pods_stop();
    now_waiting_for("the HTTP server (its connections: clients, event streams)");
    gd_http_stop();
    now_waiting_for("the device boards' socket (its thread)");
    gd_boards_stop();
    now_waiting_for("the GPU sampler (an NVML call, or its sweep of the tenants)");
    gd_devices_stop();
    now_waiting_for("the guard (its processes' freezes undone)");
    gd_guard_stop();
    now_waiting_for("the tenants (the daemon's lock)");
    gd_registry_stop();
    return 0;
}
