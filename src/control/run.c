/*
 * Starting a program as a new tenant (gpuslice run, gpuslice exec): the
 * interposer preloaded with the given limits, the GPUs and nice value chosen,
 * and gpuslice staying beside it to reclaim the usage of tenant processes
 * that die, then returning the program's exit status. For Python programs it
 * also puts gpuslice's sitecustomize hook (python/gpuslice_torch) first on
 * PYTHONPATH, which runs PyTorch on a highest-priority CUDA stream. The
 * command files (src/cli/launch.c) parse the options into a run_spec.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/log.h"
#include "control/mps.h"
#include "control/probe.h"
#include "control/reserver.h"
#include "control/run.h"
#include "control/tenants.h"
#include "control/daemon_client.h"
#include "common/config.h"
#include "common/devlist.h"
#include "common/env.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/reserve.h"
#include "common/node.h"
#include "common/tenant.h"

#define RESERVER_START_MS 120000 /* the first fill of every GPU may take this long */
#define RESERVER_STOP_MS 10000   /* and giving it all back this long */

int gs_preload_find(char *out, size_t len)
{
    const char *env = getenv(GS_ENV_PRELOAD_LIB);
    char exe[PATH_MAX], *slash;
    ssize_t n;

    if (env && *env) {
        if ((size_t)snprintf(out, len, "%s", env) >= len)
            return -ENAMETOOLONG;
        return access(out, R_OK) == 0 ? 0 : -errno;
    }
    if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
        return -errno;
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(out, len, "%s/../lib/libgpuslice.so", exe) >= len)
        return -ENAMETOOLONG;
    return access(out, R_OK) == 0 ? 0 : -errno;
}

/*
 * The directory holding gpuslice's sitecustomize.py, made absolute:
 * $GPUSLICE_PYTHON_DIR, else bin/../share/gpuslice/python beside this
 * executable (installed, and in the build tree, where CMake copies it). On
 * failure out holds the path that was tried, for the message.
 */
int gs_python_dir(char *out, size_t len)
{
    const char *env = getenv(GS_ENV_PYTHON_DIR);
    char exe[PATH_MAX], want[PATH_MAX], *slash;
    ssize_t n;

    if (env && *env) {
        if ((size_t)snprintf(want, sizeof(want), "%s", env) >= sizeof(want))
            return -ENAMETOOLONG;
    } else {
        if ((n = readlink("/proc/self/exe", exe, sizeof(exe) - 1)) < 0)
            return -errno;
        exe[n] = '\0';
        if ((slash = strrchr(exe, '/')) == NULL)
            return -ENOENT;
        *slash = '\0';
        if ((size_t)snprintf(want, sizeof(want), "%s/../share/gpuslice/python", exe) >=
            sizeof(want))
            return -ENAMETOOLONG;
    }
    snprintf(out, len, "%s", want);
    if (realpath(want, exe) == NULL)
        return -errno;
    /* A PYTHONPATH entry cannot hold a ':'. */
    if (strchr(exe, ':'))
        return -EINVAL;
    if ((size_t)snprintf(out, len, "%s/sitecustomize.py", exe) >= len)
        return -ENAMETOOLONG;
    if (access(out, R_OK) < 0)
        return -errno;
    if ((size_t)snprintf(out, len, "%s", exe) >= len)
        return -ENAMETOOLONG;
    return 0;
}

/* PYTHONPATH with dir first, then what the user had; unchanged if dir is first already. */
int gs_set_pythonpath(const char *dir)
{
    const char *old = getenv("PYTHONPATH");
    size_t l = strlen(dir);
    char *v;
    int r;

    if (old && strncmp(old, dir, l) == 0 && (old[l] == '\0' || old[l] == ':'))
        return 0; /* a gpuslice run inside another */
    /* No trailing ':' for an unset or empty PYTHONPATH: an empty entry is the cwd. */
    if (old && *old) {
        if (asprintf(&v, "%s:%s", dir, old) < 0)
            return -ENOMEM;
    } else if ((v = strdup(dir)) == NULL) {
        return -ENOMEM;
    }
    r = setenv("PYTHONPATH", v, 1);
    free(v);
    return r < 0 ? -errno : 0;
}

int gs_set_preload(const char *lib)
{
    const char *old = getenv("LD_PRELOAD");
    char *v;
    int r;

    if (old && *old) {
        /* Already listed: leave it where the user put it. */
        const char *p = strstr(old, lib);
        size_t l = strlen(lib);
        if (p && (p == old || p[-1] == ':' || p[-1] == ' ') &&
            (p[l] == '\0' || p[l] == ':' || p[l] == ' '))
            return 0;
        if (asprintf(&v, "%s:%s", lib, old) < 0)
            return -ENOMEM;
    } else if ((v = strdup(lib)) == NULL) {
        return -ENOMEM;
    }
    r = setenv("LD_PRELOAD", v, 1);
    free(v);
    return r < 0 ? -errno : 0;
}

/* In the child, before exec: the program and all it starts inherit the value. */
static void apply_nice(int n)
{
    int e, cur;

    if (setpriority(PRIO_PROCESS, 0, n) == 0)
        return;
    e = errno;
    errno = 0;
    cur = getpriority(PRIO_PROCESS, 0);
    if (e == EACCES || e == EPERM)
        gs_log_error("warning: --nice %d: %s (lowering the nice value needs root, "
                     "CAP_SYS_NICE or a higher RLIMIT_NICE); running at nice %d",
                     n, strerror(e), cur);
    else
        gs_log_error("warning: --nice %d: %s; running at nice %d", n, strerror(e), cur);
}

/* Whether sig is the terminal's (^C, ^\), sent to our whole process group by the kernel. */
static int from_terminal(int sig, const siginfo_t *si)
{
    return (sig == SIGINT || sig == SIGQUIT) && si->si_code == SI_KERNEL;
}

/*
 * Waits for the program, forwarding a supervisor's signals to it and reaping
 * the tenant's dead processes; notes it if the memory reservation (*reserver,
 * 0 without one) ends first, and clears *reserver then. SIGINT and SIGQUIT
 * are forwarded only when a process sent them (kill -INT, timeout -s INT,
 * Python's send_signal): the terminal's ^C and ^\ (si_code SI_KERNEL) reach
 * the program directly, in our process group, and are not sent twice.
 */
static int wait_child(pid_t child, struct gpuslice_tenant *t, int *status, pid_t *reserver)
{
    sigset_t set;
    struct timespec tick = { 0, 200 * 1000 * 1000 };

    sigemptyset(&set);
    sigaddset(&set, SIGCHLD);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGQUIT);
    sigaddset(&set, SIGHUP);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGUSR2);
    for (;;) {
        siginfo_t si;
        pid_t w;
        int sig, rs;

        /* Our children, and (as a daemon tenant's subreaper) the program's orphans. */
        while ((w = waitpid(-1, &rs, WNOHANG)) > 0) {
            if (w == child) {
                *status = rs;
                return 0;
            }
            if (*reserver > 0 && w == *reserver) {
                gs_log_error("warning: the memory reservation of --filled ended (%s %d); the "
                             "program runs on without it",
                             WIFSIGNALED(rs) ? "signal" : "exit status",
                             WIFSIGNALED(rs) ? WTERMSIG(rs) : WEXITSTATUS(rs));
                gs_reserve_release(t, *reserver); /* what it held went with it */
                *reserver = 0;
            }
        }
        if (w < 0 && errno != EINTR)
            return -errno;
        sig = sigtimedwait(&set, &si, &tick);
        if (sig > 0 && sig != SIGCHLD && !from_terminal(sig, &si))
            kill(child, sig); /* a supervisor's signal is for the program */
        /* Give back promptly what processes of the tenant that died held. */
        if (t)
            gs_tenant_reap(t);
    }
}

static void stop_reserver(pid_t pid);

/*
 * Starts the memory reservation of --filled beside tenant t, in a child of
 * its own, and waits until it has filled the GPUs. 0 and its PID, or -1
 * (said why). The child stops on SIGTERM, or when this process is gone. It
 * is started before the program's environment is made, so that it never
 * joins the tenant it serves (were gpuslice itself under an interposer, it
 * would stay in the tenant gpuslice belongs to); it sees the program's GPUs.
 */
static int start_reserver(double ratio, const char *devices, struct gpuslice_tenant *t, pid_t *out)
{
    char line[1024];
    size_t got = 0;
    int fds[2];
    pid_t pid, parent = getpid();

    if (pipe2(fds, O_CLOEXEC) < 0) {
        gs_log_error("--filled: pipe: %s", strerror(errno));
        return -1;
    }
    if ((pid = fork()) < 0) {
        gs_log_error("--filled: fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        struct reserve_opts ro = {
            .ratio = ratio, .tenant = t, .ready_fd = fds[1], .parent = parent, .label = "--filled"
        };
        sigset_t stop;
        close(fds[0]);
        if (devices && setenv("CUDA_VISIBLE_DEVICES", devices, 1) < 0)
            _exit(GS_EXIT_ERROR);
        /*
         * Signals to the terminal's or the job's process group are the
         * program's; the reservation ends when it does (SIGTERM from us).
         */
        setpgid(0, 0);
        signal(SIGINT, SIG_IGN);
        signal(SIGQUIT, SIG_IGN);
        signal(SIGHUP, SIG_IGN);
        signal(SIGPIPE, SIG_IGN);
        signal(SIGTTOU, SIG_IGN);
        signal(SIGTTIN, SIG_IGN);
        sigemptyset(&stop);
        sigaddset(&stop, SIGTERM);
        sigprocmask(SIG_BLOCK, &stop, NULL);
        _exit(reserve_run(&ro, &stop) < 0 ? GS_EXIT_ERROR : GS_EXIT_OK);
    }
    close(fds[1]);
    {
        struct pollfd pfd = { fds[0], POLLIN, 0 };
        while (got < sizeof(line) - 1 && (got == 0 || line[got - 1] != '\n')) {
            ssize_t n;
            int pr = poll(&pfd, 1, RESERVER_START_MS);
            if (pr <= 0)
                break;
            if ((n = read(fds[0], line + got, sizeof(line) - 1 - got)) <= 0)
                break;
            got += (size_t)n;
        }
    }
    close(fds[0]);
    line[got] = '\0';
    if (got > 0 && line[got - 1] == '\n')
        line[--got] = '\0';
    if (strcmp(line, "ok") == 0) {
        *out = pid;
        return 0;
    }
    if (strncmp(line, "error ", 6) == 0)
        gs_log_error("--filled: %s", line + 6);
    else
        gs_log_error("--filled: the memory reservation %s", got ? line : "did not start in time");
    stop_reserver(pid);
    return -1;
}

/* Ends the reservation (SIGTERM, then SIGKILL after RESERVER_STOP_MS) and waits for it. */
static void stop_reserver(pid_t pid)
{
    int status, i;

    if (pid <= 0)
        return;
    kill(pid, SIGTERM);
    for (i = 0; i < RESERVER_STOP_MS / 10; i++) {
        struct timespec ts = { 0, 10 * 1000 * 1000 };
        if (waitpid(pid, &status, WNOHANG) == pid)
            return;
        nanosleep(&ts, NULL);
    }
    gs_log_error("warning: the memory reservation did not end within %d s; killed",
                 RESERVER_STOP_MS / 1000);
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
}

/*
 * --gpu-share: the user's MPS control daemon for the program's GPU, started
 * or reused, the client settings in the environment, and a connection probe.
 * Returns -1 to go on, else the exit status to return now (a daemon this
 * call started is stopped again on failure; one it reused is left alone).
 */
static int setup_mps(const struct run_spec *o)
{
    char bin[MPS_PATH_MAX], err[1024], uuid[GS_UUID_STRLEN], num[16];
    struct mps_gpu g;
    double timeout = mps_timeout();
    void (*pipe_was)(int);
    int r, started = 0, status = GS_EXIT_ERROR;

    if (timeout < 0)
        return GS_EXIT_USAGE;
    if (mps_check_platform(bin, sizeof(bin), err, sizeof(err)) < 0) {
        gs_log_error("--gpu-share: %s", err);
        return GS_EXIT_ERROR;
    }
    if (gs_parse_uuid(o->mps_device, strlen(o->mps_device), uuid)) {
        memcpy(uuid, "GPU", 3); /* the probe below checks that it is a GPU */
    } else {
        int index = atoi(o->mps_device);

        if ((r = probe_in_child(probe_uuid_of_index, &index, timeout, err, sizeof(err))) < 0) {
            gs_log_error("--gpu-share: cannot find GPU %s: %s", o->mps_device, err);
            return GS_EXIT_ERROR;
        }
        if (!gs_parse_uuid(err, strlen(err), uuid)) {
            gs_log_error("--gpu-share: GPU %s has no UUID the driver would tell", o->mps_device);
            return GS_EXIT_ERROR;
        }
        memcpy(uuid, "GPU", 3);
    }
    if (mps_gpu_init(&g, uuid) < 0) {
        gs_log_error("--gpu-share: the MPS directory for %s would be too long (set "
                     "XDG_RUNTIME_DIR to a shorter directory)",
                     uuid);
        return GS_EXIT_ERROR;
    }
    /* A control client that exits before reading its command must not kill us. */
    pipe_was = signal(SIGPIPE, SIG_IGN);
    r = mps_daemon_start(bin, &g, timeout, &started, err, sizeof(err));
    if (r < 0) {
        gs_log_error("--gpu-share: MPS: %s", err);
        goto out;
    }
    gs_log_note("%s the MPS control daemon for %s (pipe dir %s)", started ? "started" : "reusing",
                g.uuid, g.pipe);
    snprintf(num, sizeof(num), "%d", o->gpu_share);
    if (setenv("CUDA_MPS_PIPE_DIRECTORY", g.pipe, 1) < 0 ||
        setenv("CUDA_MPS_LOG_DIRECTORY", g.log, 1) < 0 ||
        setenv("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", num, 1) < 0 ||
        setenv("CUDA_MPS_CLIENT_PRIORITY", o->mps_priority ? "1" : "0", 1) < 0) {
        gs_log_error("cannot set the environment: %s", strerror(errno));
        goto out;
    }
    if ((r = probe_in_child(probe_cuda_context, NULL, 2 * timeout, err, sizeof(err))) < 0) {
        gs_log_error("--gpu-share: a CUDA program cannot connect through MPS (pipe dir %s): %s; "
                     "%s is not started",
                     g.pipe, err, o->what);
        goto out;
    }
    gs_log_note("MPS client: %d%% of the GPU's threads, %s priority", o->gpu_share,
                o->mps_priority ? "below-normal" : "normal");
    status = -1;
out:
    if (status >= 0 && started) {
        if (mps_daemon_stop(bin, &g, timeout, err, sizeof(err)) < 0)
            gs_log_error("--gpu-share: cannot stop the MPS control daemon it started: %s", err);
        else
            gs_log_note("stopped the MPS control daemon for %s again", g.uuid);
    }
    signal(SIGPIPE, pipe_was);
    return status;
}

static int has_device_keys(const struct gs_limits *l)
{
    int i;

    for (i = 0; i < l->n; i++)
        if (l->e[i].key != GS_KEY_ALL)
            return 1;
    return 0;
}

/* "0 = GPU-…, 1 = GPU-…" for messages. */
static void describe_visible(const struct visible_gpus *v, char *out, size_t len)
{
    size_t at = 0;
    int i;

    out[0] = '\0';
    for (i = 0; i < v->n && i < GPUSLICE_MAX_DEVICES && at < len; i++) {
        char u[GS_UUID_STRLEN];

        gs_format_uuid(v->uuid[i], u);
        at += (size_t)snprintf(out + at, len - at, "%s%d = GPU-%s", i ? ", " : "", i, u + 4);
    }
}

/*
 * Every entry of --device names a GPU here. CUDA stops reading
 * CUDA_VISIBLE_DEVICES at the first entry it does not know, so the program
 * would see fewer GPUs than were named (none at all for -d 3 on a machine of
 * one: CUDA_ERROR_NO_DEVICE at its first call). v: what it would see.
 * Returns -1 to go on, else the exit status. MIG instances are left to the
 * driver, which shows a process one of several.
 */
static int check_selection(const char *cmd, const struct run_spec *o, const struct visible_gpus *v)
{
    const char *vis = getenv("CUDA_VISIBLE_DEVICES"), *bad = o->devices;
    struct visible_gpus all;
    char buf[1024], seen[1024], from[256] = "";
    size_t len;
    int i;

    if (v->n >= gs_device_list_count(o->devices) || strcasestr(o->devices, "MIG-"))
        return -1;
    for (i = 0; i < v->n && bad; i++)
        if ((bad = strchr(bad, ',')) != NULL)
            bad++;
    if (!bad)
        return -1;
    len = strcspn(bad, ",");
    if ((strncasecmp(bad, "GPU-", 4) == 0) != (strncasecmp(o->devices, "GPU-", 4) == 0)) {
        gs_log_error("%s: -d/--device: CUDA reads \"%s\" as a list of %s, as its first entry "
                     "is, and so sees no GPU %.*s: name every GPU by index or every one by UUID",
                     cmd, o->devices, strncasecmp(o->devices, "GPU-", 4) == 0 ? "UUIDs" : "indexes",
                     (int)(len > 64 ? 64 : len), bad);
        return GS_EXIT_USAGE;
    }
    if (vis)
        snprintf(from, sizeof(from), " (picked from CUDA_VISIBLE_DEVICES=\"%.200s\")", vis);
    if (probe_every_gpu(&all, buf, sizeof(buf)) < 0) {
        gs_log_error("%s: -d/--device: there is no GPU %.*s%s (the machine's GPUs cannot be "
                     "listed: %.600s)",
                     cmd, (int)(len > 64 ? 64 : len), bad, from, buf);
        return GS_EXIT_USAGE;
    }
    describe_visible(&all, seen, sizeof(seen));
    gs_log_error("%s: -d/--device: there is no GPU %.*s%s: the machine has %d GPU%s%s%s%s", cmd,
                 (int)(len > 64 ? 64 : len), bad, from, all.n, all.n == 1 ? "" : "s",
                 all.n ? " (" : "", seen, all.n ? ")" : "");
    return GS_EXIT_USAGE;
}

/*
 * Every entry of --device, and every index and UUID key of --memory,
 * --compute and --sms, names a GPU the program will see: checked in a child
 * (CUDA is never initialised here). Returns -1 to go on (v filled, or v->n =
 * -1 when no key needed checking), else the exit status.
 */
static int check_devices(const char *cmd, const struct run_spec *o, struct visible_gpus *v)
{
    const struct gs_limits *lists[] = { &o->mem_l, &o->comp_l, &o->sms_l };
    char buf[1024], seen[1024];
    int i, j, k, r, keys;

    v->n = -1;
    keys = has_device_keys(&o->mem_l) || has_device_keys(&o->comp_l) || has_device_keys(&o->sms_l);
    if (!keys && !o->devices)
        return -1;
    if (!keys && probe_visible_gpus(o->devices, v, buf, sizeof(buf)) < 0) {
        v->n = -1; /* nothing to say about --device: the program meets the same driver */
        return -1;
    }
    if (!keys) {
        r = check_selection(cmd, o, v);
        v->n = -1;
        return r;
    }
    if (probe_visible_gpus(o->devices, v, buf, sizeof(buf)) < 0) {
        gs_log_error("%s: cannot check the devices that %s name: %s", cmd,
                     has_device_keys(&o->mem_l)    ? "--memory's keys"
                     : has_device_keys(&o->comp_l) ? "--compute's keys"
                                                   : "--sms's keys",
                     buf);
        return GS_EXIT_ERROR;
    }
    if (o->devices && (r = check_selection(cmd, o, v)) >= 0)
        return r;
    describe_visible(v, seen, sizeof(seen));
    for (j = 0; j < 3; j++) {
        const struct gs_limits *l = lists[j];
        int at[GS_MAX_LIMIT_ENTRIES], m;

        for (i = 0; i < l->n; i++) {
            const struct gs_limit_entry *e = &l->e[i];
            int found = 0;

            at[i] = e->key == GS_KEY_INDEX ? e->index : -1;

            if (e->key == GS_KEY_INDEX && e->index >= GPUSLICE_MAX_DEVICES && e->index < v->n) {
                gs_log_error("%s: device %d: a tenant keeps limits for its first %d GPUs only "
                             "(choose the GPUs the program sees with --device)",
                             l->source, e->index, GPUSLICE_MAX_DEVICES);
                return GS_EXIT_USAGE;
            }
            if (e->key == GS_KEY_INDEX && e->index >= v->n) {
                gs_log_error("%s: device %d does not exist: %s would see %d GPU%s%s%s%s", l->source,
                             e->index, o->what, v->n, v->n == 1 ? "" : "s", v->n ? " (" : "", seen,
                             v->n ? ")" : "");
                return GS_EXIT_USAGE;
            }
            if (e->key != GS_KEY_UUID)
                continue;
            for (k = 0; k < v->n && k < GPUSLICE_MAX_DEVICES && !found; k++) {
                char u[GS_UUID_STRLEN];
                gs_format_uuid(v->uuid[k], u);
                found = strcasecmp(u, e->uuid) == 0;
                if (found)
                    at[i] = k;
            }
            if (!found) {
                gs_log_error("%s: GPU-%s is not a GPU %s would see%s%s%s", l->source, e->uuid + 4,
                             o->what, v->n ? " (it sees " : " (it sees none)", seen,
                             v->n ? ")" : "");
                return GS_EXIT_USAGE;
            }
        }
        /* An index and the UUID of the same GPU: one would silently override the other. */
        for (i = 0; i < l->n; i++)
            for (m = 0; at[i] >= 0 && m < i; m++)
                if (at[m] == at[i]) {
                    char u[GS_UUID_STRLEN];

                    tenant_list_uuid(v->uuid[at[i]], u);
                    gs_log_error("%s: two entries name GPU %d (%s) as %s sees it: give each GPU "
                                 "once",
                                 l->source, at[i], u, o->what);
                    return GS_EXIT_USAGE;
                }
    }
    return -1;
}

/*
 * One limit of a nested run against the enclosing tenant's: 0 if equal or not
 * given, else the exit status after a message. what: "--memory"/"--compute".
 */
static int nested_limit(const char *cmd, const struct run_spec *o, const struct gpuslice_tenant *t,
                        const char *env, const char *what, const char *where, uint64_t have,
                        uint64_t want, int size)
{
    char a[32], b[32];

    if (want == have)
        return 0;
    if (size) {
        gs_format_size(have, a, sizeof(a));
        gs_format_size(want, b, sizeof(b));
    } else {
        snprintf(a, sizeof(a), "%llu%%", (unsigned long long)have);
        snprintf(b, sizeof(b), "%llu%%", (unsigned long long)want);
    }
    gs_log_error("%s: %s runs inside tenant \"%.63s\" (%s), whose limit %s is %s; a nested "
                 "gpuslice %s shares that tenant's limits and %s (asked: %s). Give the limit to "
                 "the outer gpuslice run, or lower it with gpuslice set",
                 what, o->what, t->name, env, where, have ? a : "none", cmd,
                 (want == 0 && have != 0) || (have != 0 && want > have) ? "may not raise them"
                                                                        : "cannot narrow them yet",
                 want ? b : "none");
    return GS_EXIT_USAGE;
}

/*
 * A run inside a tenant (GPUSLICE_TENANT names one we may join) stays in
 * it: a new tenant would escape the enclosing one's limits. Limits given to
 * such a run must be the enclosing tenant's own. Returns -1 to go on, or
 * the exit status; *outer is the enclosing tenant (mapped) or NULL.
 */
/*
 * The daemon's tenant this process belongs to (it or an ancestor is a member), as the
 * interposer finds it: its name into name and 1, or 0.
 */
static int managed_lineage(char *name, size_t len)
{
    char dirs[2][PATH_MAX];
    int nd = 0, i, found = 0;

    snprintf(dirs[nd++], sizeof(dirs[0]), "%s", GS_NODE_SYSTEM_DIR);
    if (gs_node_dir(dirs[nd], sizeof(dirs[1])) == 0 && strcmp(dirs[nd], dirs[0]) != 0)
        nd++;
    for (i = 0; i < nd && !found; i++) {
        struct gpuslice_node *n;
        struct gpuslice_node_tenant t;
        uint32_t id;
        int idx;

        if (gs_node_open(dirs[i], &n) < 0)
            continue;
        if ((id = gs_node_lineage_tenant(n)) != 0 && (idx = gs_node_find_tenant(n, id)) >= 0) {
            gs_node_read_tenant(n, idx, &t);
            snprintf(name, len, "%s", t.name);
            found = 1;
        }
        gs_node_close(n);
    }
    return found;
}

static int nested_run(const char *cmd, const struct run_spec *o, struct gpuslice_tenant **outer,
                      char *path, size_t pathlen)
{
    static const uint8_t zero[16];
    const char *env = getenv(GS_ENV_TENANT);
    struct gpuslice_tenant *t;
    char where[80], managed[64];
    int i, r = 0;

    *outer = NULL;
    if (managed_lineage(managed, sizeof(managed)) &&
        (o->mem_set || o->comp_set || o->filled || o->sched_given)) {
        gs_log_error("%s: %s runs inside the daemon's tenant \"%s\", whose limits apply to "
                     "everything it starts; a nested gpuslice %s cannot give it other limits "
                     "(%s). Change the tenant's with gpuslice set %s (raising takes an admin)",
                     cmd, o->what, managed, cmd,
                     o->mem_set    ? "--memory"
                     : o->comp_set ? "--compute"
                     : o->filled   ? "--filled"
                     : o->priority ? "--priority"
                                   : "--weight",
                     managed);
        return GS_EXIT_USAGE;
    }
    if (env == NULL || *env == '\0' || gs_tenant_open(env, &t) < 0)
        return -1;
    if (!gs_tenant_creator_alive(t) && gs_tenant_live_procs(t) == 0) {
        gs_tenant_close(t); /* a leftover of a tenant that ended: not one to join */
        return -1;
    }
    if (o->sched_given) {
        gs_log_error("%s: %s runs inside tenant \"%.63s\" (%s), and a tenant has one class and "
                     "one weight; give %s to the outer gpuslice run, or change the tenant's "
                     "with gpuslice set",
                     cmd, o->what, t->name, env, o->priority ? "--priority" : "--weight");
        gs_tenant_close(t);
        return GS_EXIT_USAGE;
    }
    for (i = 0; i < GPUSLICE_MAX_DEVICES && r == 0; i++) {
        const struct gpuslice_tenant_device *d = &t->dev[i];
        char u[GS_UUID_STRLEN];

        if (memcmp(d->uuid, zero, 16) == 0)
            continue;
        gs_format_uuid(d->uuid, u);
        snprintf(where, sizeof(where), "on GPU-%s", u + 4);
        if (o->mem_set)
            r = nested_limit(cmd, o, t, env, "--memory", where,
                             __atomic_load_n(&d->mem_limit, __ATOMIC_RELAXED),
                             gs_limits_lookup(&o->mem_l, d->ordinal, u), 1);
        if (o->comp_set && r == 0)
            r = nested_limit(cmd, o, t, env, "--compute", where,
                             __atomic_load_n(&d->compute_limit, __ATOMIC_RELAXED),
                             gs_limits_lookup(&o->comp_l, d->ordinal, u) % 100, 0);
    }
    /* And for the GPUs it has not used yet. */
    if (o->mem_set && r == 0 && (t->set_flags & GPUSLICE_SET_MEMORY))
        r = nested_limit(cmd, o, t, env, "--memory", "for its other GPUs", t->set_mem_limit,
                         gs_limits_lookup(&o->mem_l, -1, NULL), 1);
    if (o->comp_set && r == 0 && (t->set_flags & GPUSLICE_SET_COMPUTE))
        r = nested_limit(cmd, o, t, env, "--compute", "for its other GPUs", t->set_compute_limit,
                         gs_limits_lookup(&o->comp_l, -1, NULL) % 100, 0);
    if (r) {
        gs_tenant_close(t);
        return r;
    }
    gs_log_note("%s runs inside tenant \"%.63s\" (%s) and shares its limits", o->what, t->name,
                env);
    snprintf(path, pathlen, "%s", env);
    *outer = t;
    return -1;
}

/*
 * --tenant NAME: this process joins the daemon's tenant NAME (the daemon learns which
 * process from the socket), so that the program and all it starts are its members; it
 * stays their subreaper, so that orphans stay in that lineage. Returns -1 to go on, with
 * the tenant's state file mapped into *t and its path in path, or the exit status.
 */
static int join_daemon(const char *cmd, const struct run_spec *o, struct gpuslice_tenant **t,
                       char *path, size_t pathlen)
{
    char url[256], err[512], msg[512], *body = NULL;
    const char *c;
    int st, r;

    for (c = o->tenant; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-'))
            break;
    if (*o->tenant == '\0' || *c || strlen(o->tenant) > 63) {
        gs_log_error("%s: --tenant: \"%s\" is not a tenant's name or id (letters, digits, '.', "
                     "'_' and '-', at most 63)",
                     cmd, o->tenant);
        return GS_EXIT_USAGE;
    }
    snprintf(url, sizeof(url), "/v1/tenants/%s/processes", o->tenant);
    if ((st = gs_daemon_request("POST", url, NULL, &body, err, sizeof(err))) < 0) {
        gs_log_error("%s: --tenant %s: %s; or run without --tenant", cmd, o->tenant, err);
        return GS_EXIT_ERROR;
    }
    if (st != 200) {
        gs_daemon_error_message(body, msg, sizeof(msg));
        free(body);
        gs_log_error("%s: --tenant %s: the daemon refused (HTTP %d): %s", cmd, o->tenant, st, msg);
        return st == 404 || st == 400 ? GS_EXIT_USAGE : GS_EXIT_ERROR;
    }
    r = gs_json_find_string(body, "state_file", path, pathlen);
    free(body);
    if (r < 0) {
        gs_log_error("%s: --tenant %s: the daemon's answer names no state file", cmd, o->tenant);
        return GS_EXIT_ERROR;
    }
    if ((r = gs_tenant_open(path, t)) < 0) {
        gs_log_error("%s: --tenant %s: cannot attach the tenant's state file %s: %s", cmd,
                     o->tenant, path, gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (prctl(PR_SET_CHILD_SUBREAPER, 1) < 0)
        gs_log_error("warning: --tenant: cannot become the program's subreaper (%s): a process "
                     "whose parent exits before it uses CUDA may leave the tenant",
                     strerror(errno));
    gs_log_note("%s joins the daemon's tenant %s", o->what, o->tenant);
    return -1;
}

int run_program(const char *cmd, struct run_spec *spec)
{
    struct run_spec o = *spec; /* read only; what it points to stays the caller's */
    struct gpuslice_tenant *t = NULL;
    struct visible_gpus vis;
    char lib[PATH_MAX], path[PATH_MAX], pydir[PATH_MAX];
    sigset_t block, old;
    int r, status = 0, pipefd[2], nested;
    pid_t child, reserver = 0;

    if ((r = check_devices(cmd, &o, &vis)) >= 0 ||
        (o.tenant ? (r = join_daemon(cmd, &o, &t, path, sizeof(path)))
                  : (r = nested_run(cmd, &o, &t, path, sizeof(path)))) >= 0)
        return r;
    nested = t != NULL;
    if (nested && o.filled) {
        gs_log_error("--filled: %s runs inside tenant \"%.63s\" (%s); a memory reservation is "
                     "made by the outer gpuslice run (give --filled to it)",
                     o.what, t->name, path);
        gs_tenant_close(t);
        return GS_EXIT_USAGE;
    }
    if ((r = gs_preload_find(lib, sizeof(lib))) < 0) {
        gs_log_error("cannot find the interposer libgpuslice.so (%s: %s); set " GS_ENV_PRELOAD_LIB
                     " to its path",
                     lib, gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (!nested) {
        gs_tenant_sweep(gs_tenant_dir());
        if ((r = gs_tenant_create(gs_tenant_dir(), o.name ? o.name : o.what, path, sizeof(path),
                                  &t)) < 0) {
            gs_log_error("cannot create the tenant's state file %s: %s (%s)", path, gs_strerror(r),
                         r == -ENOSPC || r == -EDQUOT
                             ? "its filesystem is full: free space there, or set " GS_ENV_RUN_DIR
                               " to another directory"
                             : "set " GS_ENV_RUN_DIR " to a writable directory");
            return GS_EXIT_ERROR;
        }
        /* Its limits belong to it from now on: no process of it can change them. */
        if ((r = gs_tenant_fix_limits(t, o.mem_set ? &o.mem_l : NULL, o.comp_set ? &o.comp_l : NULL,
                                      vis.n, vis.uuid)) < 0) {
            gs_log_error("cannot record the tenant's limits in %s: %s", path, gs_strerror(r));
            unlink(path);
            gs_tenant_close(t);
            return GS_EXIT_ERROR;
        }
        gs_tenant_set_sched(t, o.priority, o.weight);
    }
    if (o.filled) {
        gs_log_note("filling every GPU %s sees to %g%% of its memory", o.what, 100 * o.filled);
        if (start_reserver(o.filled, o.devices, t, &reserver) < 0)
            goto fail;
    }
    if (setenv(GS_ENV_TENANT, path, 1) < 0 ||
        /*
         * The limits live in the tenant; the variables stay as the limits of a
         * process that leaves it (one that unsets GPUSLICE_TENANT gets them alone).
         */
        (o.memory && setenv(GS_ENV_MEMORY, o.memory, 1) < 0) ||
        (o.compute && setenv(GS_ENV_COMPUTE, o.compute, 1) < 0) ||
        (o.priority_arg && setenv(GS_ENV_PRIORITY, o.priority_arg, 1) < 0) ||
        (o.weight_arg && setenv(GS_ENV_WEIGHT, o.weight_arg, 1) < 0) ||
        (o.sms && setenv(GS_ENV_SMS, o.sms, 1) < 0) ||
        (o.devices && setenv("CUDA_VISIBLE_DEVICES", o.devices, 1) < 0) || gs_set_preload(lib) < 0 ||
        /*
         * A background tenant that is an MPS client gets the below-normal client priority
         * too (unless one is set already, by --mps-priority or the user): the hardware then
         * gives a higher class's blocks the SMs first, beside the partition it moves to while
         * a higher class is active (route.c). Without MPS the variable does nothing.
         */
        (o.priority == GPUSLICE_PRIORITY_BACKGROUND && !getenv("CUDA_MPS_CLIENT_PRIORITY") &&
         setenv("CUDA_MPS_CLIENT_PRIORITY", "1", 1) < 0)) {
        gs_log_error("cannot set the environment: %s", strerror(errno));
        goto fail;
    }
    /*
     * A missing hook costs PyTorch only its stream priority, so the program
     * still runs; the warning is printed even with -q, like --nice's, since it
     * says a default did not take effect.
     */
    if (!o.no_torch_priority) {
        if ((r = gs_python_dir(pydir, sizeof(pydir))) < 0)
            gs_log_error("warning: cannot find gpuslice's Python hook (%s: %s); PyTorch keeps "
                         "its default stream priority (set GPUSLICE_PYTHON_DIR to the "
                         "directory holding sitecustomize.py, or pass --no-torch-priority)",
                         pydir,
                         r == -EINVAL ? "a PYTHONPATH entry cannot contain ':'" : gs_strerror(r));
        else if ((r = gs_set_pythonpath(pydir)) < 0) {
            gs_log_error("cannot set PYTHONPATH: %s", gs_strerror(r));
            goto fail;
        }
    }
    if (o.gpu_share && (r = setup_mps(&o)) >= 0) {
        if (!nested)
            unlink(path);
        gs_tenant_close(t);
        return r;
    }
    if (o.python)
        gs_log_note("running the Python script %s with %s", o.what, o.argv[0]);
    if (o.devices)
        gs_log_note("CUDA_VISIBLE_DEVICES=%s for %s", o.devices, o.what);
    if (o.has_nice)
        gs_log_note("nice %d for %s", o.nice, o.what);
    if (o.memory)
        gs_log_note("memory limit %s for %s", o.memory, o.what);
    if (o.compute)
        gs_log_note("compute ceiling %s%s for %s", o.compute,
                    strchr(o.compute, ':') ? " (percent)" : "%", o.what);
    if (o.sms)
        gs_log_note("SM partition %s%s for %s", o.sms, strchr(o.sms, '%') ? " of the SMs" : "",
                    o.what);
    if (pipe2(pipefd, O_CLOEXEC) < 0) {
        gs_log_error("pipe: %s", strerror(errno));
        goto fail;
    }
    sigemptyset(&block);
    sigaddset(&block, SIGCHLD);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGQUIT);
    sigaddset(&block, SIGHUP);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGUSR2);
    sigprocmask(SIG_BLOCK, &block, &old);
    if ((child = fork()) < 0) {
        gs_log_error("fork: %s", strerror(errno));
        close(pipefd[0]);
        close(pipefd[1]);
        sigprocmask(SIG_SETMASK, &old, NULL);
        goto fail;
    }
    if (child == 0) {
        int e;
        sigprocmask(SIG_SETMASK, &old, NULL);
        close(pipefd[0]);
        if (o.has_nice)
            apply_nice(o.nice);
        execvp(o.argv[0], o.argv);
        e = errno;
        if (write(pipefd[1], &e, sizeof(e)) < 0)
            _exit(127);
        _exit(e == ENOENT ? 127 : 126);
    }
    close(pipefd[1]);
    {
        int e;
        if (read(pipefd[0], &e, sizeof(e)) == (ssize_t)sizeof(e)) {
            if (o.python)
                gs_log_error("%s: cannot run %s, the interpreter for %s (set PYTHON to "
                             "another): %s",
                             cmd, o.argv[0], o.what, strerror(e));
            else
                gs_log_error("%s: cannot run %s: %s", cmd, o.what, strerror(e));
        }
        close(pipefd[0]);
    }
    r = wait_child(child, t, &status, &reserver);
    stop_reserver(reserver);
    reserver = 0;
    gs_tenant_reap(t);
    if (nested)
        ; /* the enclosing run owns the tenant's state */
    else if (gs_tenant_live_procs(t) == 0)
        unlink(path);
    else
        gs_log_note("%d process(es) of the tenant still run; its state stays until they exit",
                    gs_tenant_live_procs(t));
    gs_tenant_close(t);
    if (r < 0) {
        gs_log_error("waiting for %s: %s", o.what, gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return WEXITSTATUS(status);
fail:
    stop_reserver(reserver);
    if (!nested)
        unlink(path);
    gs_tenant_close(t);
    return GS_EXIT_ERROR;
}
