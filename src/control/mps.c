/*
 * MPS helpers for the CLI: the per-user, per-GPU directories gpuslice gives
 * an MPS control daemon, finding a daemon through /proc, and running
 * nvidia-cuda-mps-control without a shell and without ever waiting forever.
 */
#define _GNU_SOURCE
#include "control/mps.h"

#include <ctype.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "control/log.h"
#include "common/cuda_api.h"
#include "common/driver.h"
#include "common/mps_pipe.h"

extern char **environ;

int mps_base_dir(char *buf, size_t len)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    int n;

    if (x && x[0] == '/')
        n = snprintf(buf, len, "%s/gpuslice-mps", x);
    else
        n = snprintf(buf, len, "/tmp/gpuslice-mps-%lu", (unsigned long)geteuid());
    return n < 0 || (size_t)n >= len ? -ENAMETOOLONG : 0;
}

int mps_gpu_init(struct mps_gpu *g, const char *uuid)
{
    int r;

    memset(g, 0, sizeof(*g));
    snprintf(g->uuid, sizeof(g->uuid), "%s", uuid);
    if ((r = mps_base_dir(g->dir, sizeof(g->dir))) < 0)
        return r;
    if (strlen(g->dir) + 1 + strlen(uuid) + 1 > sizeof(g->dir))
        return -ENAMETOOLONG;
    strcat(strcat(g->dir, "/"), uuid);
    snprintf(g->pipe, sizeof(g->pipe), "%s/pipe", g->dir);
    snprintf(g->log, sizeof(g->log), "%s/log", g->dir);
    return 0;
}

/*
 * Opens (making it if asked) the directory name under parent, refusing a
 * link, another owner or group/other bits. Returns an fd or a negative errno.
 */
static int open_private_dir(int parent, const char *name, const char *shown, int create, char *err,
                            size_t errlen)
{
    struct stat st;
    int fd;

    fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && create) {
        if (mkdirat(parent, name, 0700) < 0 && errno != EEXIST) {
            int e = errno;

            snprintf(err, errlen, "cannot create %s: %s", shown, strerror(e));
            return -e;
        }
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        /* The umask may have taken bits the owner needs; it cannot have added any. */
        if (fd >= 0 && fstat(fd, &st) == 0 && st.st_uid == geteuid())
            (void)fchmod(fd, 0700);
    }
    if (fd < 0) {
        int e = errno;

        if (e == ENOENT && !create)
            return -ENOENT;
        if (e == ELOOP || e == ENOTDIR)
            snprintf(err, errlen,
                     "%s is not a directory (a link or a file); remove it or set "
                     "XDG_RUNTIME_DIR elsewhere",
                     shown);
        else
            snprintf(err, errlen, "cannot open %s: %s", shown, strerror(e));
        return -e;
    }
    if (fstat(fd, &st) < 0) {
        int e = errno;

        close(fd);
        snprintf(err, errlen, "cannot stat %s: %s", shown, strerror(e));
        return -e;
    }
    if (st.st_uid != geteuid()) {
        close(fd);
        snprintf(err, errlen,
                 "%s belongs to uid %lu, not to you (uid %lu); refusing to use it (remove it, "
                 "or set XDG_RUNTIME_DIR to a directory of yours)",
                 shown, (unsigned long)st.st_uid, (unsigned long)geteuid());
        return -EPERM;
    }
    if (st.st_mode & 077) {
        close(fd);
        snprintf(err, errlen,
                 "%s has mode %04o, open to other users; refusing to use it (chmod 700 it, "
                 "or remove it)",
                 shown, (unsigned)(st.st_mode & 07777));
        return -EPERM;
    }
    return fd;
}

int mps_gpu_dirs(const struct mps_gpu *g, int create, char *err, size_t errlen)
{
    char base[MPS_PATH_MAX], parent[MPS_PATH_MAX], *slash;
    const char *shown[4] = { base, g->dir, g->pipe, g->log };
    const char *names[4] = { NULL, g->uuid, "pipe", "log" };
    int fd, top, i, r = 0;

    snprintf(base, sizeof(base), "%s", g->dir);
    if ((slash = strrchr(base, '/')) == NULL)
        return -EINVAL;
    *slash = '\0';
    snprintf(parent, sizeof(parent), "%s", base);
    slash = strrchr(parent, '/');
    names[0] = slash + 1;
    if (slash == parent)
        parent[1] = '\0';
    else
        *slash = '\0';
    /* The base's parent ($XDG_RUNTIME_DIR or /tmp) is the system's; it is only opened. */
    if ((top = open(parent, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        r = -errno;
        snprintf(err, errlen, "cannot open %s: %s", parent, strerror(errno));
        return r;
    }
    if ((fd = open_private_dir(top, names[0], shown[0], create, err, errlen)) < 0) {
        close(top);
        return fd;
    }
    close(top);
    top = fd;
    if ((fd = open_private_dir(top, names[1], shown[1], create, err, errlen)) < 0) {
        close(top);
        return fd;
    }
    close(top);
    top = fd;
    for (i = 2; i < 4 && r == 0; i++) {
        if ((fd = open_private_dir(top, names[i], shown[i], create, err, errlen)) < 0)
            r = fd;
        else
            close(fd);
    }
    close(top);
    return r;
}

/* argv[0]'s last component of process pid is nvidia-cuda-mps-control. */
static int is_daemon(const char *pid)
{
    char path[64], cmd[256];
    const char *base;
    FILE *f;
    size_t n;

    snprintf(path, sizeof(path), "/proc/%.20s/cmdline", pid);
    if ((f = fopen(path, "re")) == NULL)
        return 0;
    n = fread(cmd, 1, sizeof(cmd) - 1, f);
    fclose(f);
    cmd[n] = '\0'; /* argv[0] ends at its NUL */
    base = strrchr(cmd, '/') ? strrchr(cmd, '/') + 1 : cmd;
    return strcmp(base, MPS_CONTROL) == 0;
}

/* 1 if process pid's CUDA_MPS_PIPE_DIRECTORY is dir, 0 if not, -errno if unreadable. */
static int serves(const char *pid, const char *dir)
{
    static const char key[] = "CUDA_MPS_PIPE_DIRECTORY=";
    char path[64], *env = NULL, *p;
    const char *mine = MPS_DEFAULT_PIPE_DIR;
    size_t cap = 0, len = 0, n;
    FILE *f;
    int r;

    snprintf(path, sizeof(path), "/proc/%.20s/environ", pid);
    if ((f = fopen(path, "re")) == NULL)
        return -errno;
    do {
        if (len + 4096 + 1 > cap) {
            char *grown = realloc(env, cap = len + 65536);

            if (grown == NULL) {
                free(env);
                fclose(f);
                return -ENOMEM;
            }
            env = grown;
        }
        n = fread(env + len, 1, 4096, f);
        len += n;
    } while (n > 0);
    r = ferror(f) ? -EACCES : 0;
    fclose(f);
    if (r < 0 || env == NULL) {
        free(env);
        return r < 0 ? r : 0;
    }
    env[len] = '\0';
    for (p = env; p < env + len; p += strlen(p) + 1)
        if (strncmp(p, key, sizeof(key) - 1) == 0 && p[sizeof(key) - 1])
            mine = p + sizeof(key) - 1;
    r = strcmp(mine, dir) == 0;
    free(env);
    return r;
}

pid_t mps_daemon_find(const char *pipe_dir)
{
    DIR *dir = opendir("/proc");
    struct dirent *e;
    pid_t found = 0;
    int hidden = 0, r;

    if (dir == NULL)
        return -EACCES;
    while (found == 0 && (e = readdir(dir)) != NULL) {
        if (!isdigit((unsigned char)e->d_name[0]) || !is_daemon(e->d_name))
            continue;
        if ((r = serves(e->d_name, pipe_dir)) > 0)
            found = (pid_t)atoi(e->d_name);
        else if (r < 0 && r != -ENOENT)
            hidden = 1;
    }
    closedir(dir);
    return found ? found : hidden ? -EACCES : 0;
}

const char *mps_state(const char *pipe_dir, int own)
{
    char path[MPS_PATH_MAX + 16];
    struct stat st;
    int control;
    pid_t daemon;

    snprintf(path, sizeof(path), "%s/control", pipe_dir);
    if (stat(path, &st) == 0)
        control = S_ISSOCK(st.st_mode) || S_ISFIFO(st.st_mode);
    else if (errno == ENOENT || errno == ENOTDIR)
        control = 0;
    else
        return "unknown";
    if (!control)
        return "not running";
    daemon = mps_daemon_find(pipe_dir);
    /*
     * A daemon whose environment we may not read is another user's: it may
     * serve a directory of theirs, never our own (mode 0700, ours).
     */
    if (daemon > 0 || (daemon == -EACCES && !own))
        return "running";
    /*
     * The daemon leaves its control pipe behind when it stops. In our own
     * directory the daemon would be ours, so not seeing it means it is gone;
     * elsewhere it may run where we cannot see it (another PID namespace).
     */
    return own ? "not running" : "unknown";
}

int mps_check_platform(char *bin, size_t binlen, char *err, size_t errlen)
{
#ifndef __linux__
    (void)bin;
    (void)binlen;
    snprintf(err, errlen, "MPS needs Linux; this gpuslice was built for another system");
    return -ENOSYS;
#else
    const char *path = getenv("PATH");
    char rel[256] = "";
    const char *p, *end;
    FILE *f;

    if ((f = fopen("/proc/sys/kernel/osrelease", "re")) != NULL) {
        if (fgets(rel, sizeof(rel), f) == NULL)
            rel[0] = '\0';
        fclose(f);
    }
    if (strcasestr(rel, "microsoft") || strstr(rel, "WSL")) {
        rel[strcspn(rel, "\n")] = '\0';
        snprintf(err, errlen, "MPS is not supported under WSL (kernel %s); use a native Linux host",
                 rel);
        return -ENOSYS;
    }
    for (p = path && *path ? path : "/usr/bin:/bin";; p = end + 1) {
        struct stat st;
        int n;

        end = p + strcspn(p, ":");
        if (end == p) /* an empty entry is the current directory */
            n = snprintf(bin, binlen, "./%s", MPS_CONTROL);
        else
            n = snprintf(bin, binlen, "%.*s/%s", (int)(end - p), p, MPS_CONTROL);
        if (n > 0 && (size_t)n < binlen && stat(bin, &st) == 0 && S_ISREG(st.st_mode) &&
            access(bin, X_OK) == 0)
            return 0;
        if (*end == '\0')
            break;
    }
    snprintf(err, errlen,
             "%s is not in PATH; MPS ships with the NVIDIA driver (its utilities package, "
             "e.g. nvidia-compute-utils or nvidia-utils): install it or add its directory to PATH",
             MPS_CONTROL);
    return -ENOENT;
#endif
}

double mps_timeout(void)
{
    const char *v = getenv(GS_ENV_MPS_TIMEOUT);
    const char *p;
    double s;
    int digits = 0;

    if (v == NULL || *v == '\0')
        return 10.0;
    /* Decimal seconds only: strtod would also take " 5", "1e1", "0x10", "inf". */
    for (p = v; *p >= '0' && *p <= '9'; p++)
        digits++;
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++)
            digits++;
    s = digits && *p == '\0' ? strtod(v, NULL) : -1;
    if (!(s > 0 && s <= MPS_TIMEOUT_MAX)) {
        gs_log_error(GS_ENV_MPS_TIMEOUT ": \"%s\" is not a number of seconds above 0 and at "
                                        "most %d (e.g. 10 or 2.5; unset it for the default, 10)",
                     v, MPS_TIMEOUT_MAX);
        return -1;
    }
    return s;
}

/* LD_PRELOAD without libgpuslice*, or NULL when nothing is left. */
static char *preload_without_us(const char *pre)
{
    char *copy, *keep, *tok, *save = NULL;
    size_t n = 0;

    if ((copy = strdup(pre)) == NULL || (keep = calloc(1, strlen(pre) + 1)) == NULL) {
        free(copy);
        return NULL;
    }
    for (tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
        if (strstr(strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok, "libgpuslice"))
            continue;
        n += (size_t)sprintf(keep + n, "%s%s", n ? ":" : "", tok);
    }
    free(copy);
    if (n == 0) {
        free(keep);
        return NULL;
    }
    return keep;
}

/* The environment for nvidia-cuda-mps-control; free with free_env. */
static char **child_env(const struct mps_gpu *g)
{
    static const char *const drop[] = { "CUDA_MPS_PIPE_DIRECTORY=", "CUDA_MPS_LOG_DIRECTORY=",
                                        "CUDA_VISIBLE_DEVICES=", "LD_PRELOAD=" };
    const char *pre = getenv("LD_PRELOAD");
    char **env, *kept = pre ? preload_without_us(pre) : NULL;
    size_t n = 0, k = 0, i, d;

    while (environ && environ[n])
        n++;
    if ((env = calloc(n + 5, sizeof(*env))) == NULL) {
        free(kept);
        return NULL;
    }
    for (i = 0; i < n; i++) {
        for (d = 0; d < sizeof(drop) / sizeof(drop[0]); d++)
            if (strncmp(environ[i], drop[d], strlen(drop[d])) == 0)
                break;
        if (d == sizeof(drop) / sizeof(drop[0]))
            env[k++] = strdup(environ[i]);
    }
    if (asprintf(&env[k++], "CUDA_MPS_PIPE_DIRECTORY=%s", g->pipe) < 0)
        env[k - 1] = NULL;
    if (asprintf(&env[k++], "CUDA_MPS_LOG_DIRECTORY=%s", g->log) < 0)
        env[k - 1] = NULL;
    if (asprintf(&env[k++], "CUDA_VISIBLE_DEVICES=%s", g->uuid) < 0)
        env[k - 1] = NULL;
    if (kept && asprintf(&env[k++], "LD_PRELOAD=%s", kept) < 0)
        env[k - 1] = NULL;
    free(kept);
    for (i = 0; i < k; i++)
        if (env[i] == NULL)
            break;
    if (i < k) { /* out of memory */
        for (i = 0; i < k; i++)
            free(env[i]);
        free(env);
        return NULL;
    }
    return env;
}

static void free_env(char **env)
{
    size_t i;

    for (i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

static void take(struct mps_out *out, int fd)
{
    char buf[4096];
    ssize_t n;

    while ((n = read(fd, buf, sizeof(buf))) > 0) {
        size_t room = sizeof(out->text) - 1 - out->len, m = (size_t)n < room ? (size_t)n : room;

        memcpy(out->text + out->len, buf, m);
        out->len += m;
    }
    out->text[out->len] = '\0';
}

int mps_control(const char *bin, const struct mps_gpu *g, const char *arg, const char *input,
                double timeout, struct mps_out *out)
{
    char *argv[3] = { (char *)MPS_CONTROL, (char *)arg, NULL };
    char **env;
    int in[2], o[2], st = 0, eof = 0, r;
    double deadline = mps_now_s() + timeout;
    pid_t pid;

    memset(out, 0, sizeof(*out));
    out->status = -1;
    if ((env = child_env(g)) == NULL)
        return -ENOMEM;
    if (pipe2(in, O_CLOEXEC) < 0) {
        r = -errno;
        free_env(env);
        return r;
    }
    if (pipe2(o, O_CLOEXEC) < 0) {
        r = -errno;
        close(in[0]);
        close(in[1]);
        free_env(env);
        return r;
    }
    if ((pid = fork()) < 0) {
        r = -errno;
        close(in[0]);
        close(in[1]);
        close(o[0]);
        close(o[1]);
        free_env(env);
        return r;
    }
    if (pid == 0) {
        /* Its own process group, so a timeout takes whatever it started too. */
        setpgid(0, 0);
        signal(SIGPIPE, SIG_DFL);
        if (dup2(in[0], 0) < 0 || dup2(o[1], 1) < 0 || dup2(o[1], 2) < 0)
            _exit(127);
        execve(bin, argv, env);
        _exit(127);
    }
    setpgid(pid, pid); /* also here, so the kill below cannot race the child's own call */
    free_env(env);
    close(in[0]);
    close(o[1]);
    if (input && write(in[1], input, strlen(input)) < 0) {
        /* It did not read its input (EPIPE); its status says why. */
    }
    close(in[1]);
    fcntl(o[0], F_SETFL, O_NONBLOCK);
    for (;;) {
        struct pollfd p = { o[0], POLLIN, 0 };
        pid_t w = waitpid(pid, &st, WNOHANG);

        if (w == pid) {
            /* Ended: what it wrote is in the pipe. A daemon it left holding
             * the pipe open must not keep us waiting for end of file. */
            take(out, o[0]);
            break;
        }
        if (mps_now_s() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            take(out, o[0]);
            out->timed_out = 1;
            close(o[0]);
            return 0;
        }
        if (eof) {
            struct timespec ts = { 0, 10 * 1000 * 1000 };

            nanosleep(&ts, NULL);
        } else if (poll(&p, 1, 20) > 0) {
            char buf[4096];
            ssize_t n = read(o[0], buf, sizeof(buf));

            if (n == 0) {
                eof = 1;
            } else if (n > 0) {
                size_t room = sizeof(out->text) - 1 - out->len;
                size_t m = (size_t)n < room ? (size_t)n : room;

                memcpy(out->text + out->len, buf, m);
                out->len += m;
                out->text[out->len] = '\0';
            }
        }
    }
    close(o[0]);
    out->status = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    return 0;
}

int mps_parse_pids(const char *text, pid_t **pids, int *n)
{
    const char *p = text;
    pid_t *v = NULL;
    int k = 0;

    *pids = NULL;
    *n = 0;
    while (*p) {
        size_t len;
        char *end;
        long x;

        p += strspn(p, " \t\r\n");
        len = strcspn(p, " \t\r\n");
        if (len == 0)
            break;
        x = strtol(p, &end, 10);
        if (end == p + len && x > 0 && x <= 0x7fffffff && isdigit((unsigned char)*p)) {
            pid_t *grown = realloc(v, (size_t)(k + 1) * sizeof(*v));

            if (grown == NULL) {
                free(v);
                return -ENOMEM;
            }
            v = grown;
            v[k++] = (pid_t)x;
        }
        p += len;
    }
    *pids = v;
    *n = k;
    return 0;
}

/*
 * The UUID of CUDA device index, or a check that uuid is one, through the
 * driver as info loads it ($GPUSLICE_REAL_LIBCUDA, else libcuda.so.1).
 */
int mps_driver_uuid(int index, char uuid[GS_UUID_STRLEN], char *err, size_t errlen)
{
    struct gs_driver d = { 0 };
    char why[256];
    int n, i, found = -1;

    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(err, errlen, "no NVIDIA driver found: %s", why);
        return -ENOENT;
    }
    if ((n = gs_driver_count(&d, err, errlen)) < 0) {
        gs_driver_close(&d);
        return n;
    }
    /* Every device, however many; one whose UUID cannot be read is passed over. */
    for (i = 0; i < n && found < 0; i++) {
        uint8_t raw[16];
        char u[GS_UUID_STRLEN];

        if (gs_driver_uuid(&d, i, raw) != 0)
            continue;
        gs_format_uuid(raw, u);
        memcpy(u, "GPU", 3);
        if (index >= 0 ? i == index : strcmp(u, uuid) == 0) {
            memcpy(uuid, u, sizeof(u));
            found = i;
        }
    }
    gs_driver_close(&d);
    if (found >= 0)
        return 0;
    if (index >= 0)
        snprintf(err, errlen, "--device %d: no such GPU (this machine shows %d)", index, n);
    else
        snprintf(err, errlen, "--device %s: no GPU has this UUID", uuid);
    return -ENODEV;
}

void mps_sleep_ms(int ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

    nanosleep(&ts, NULL);
}

double mps_now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* 1 if the daemon serving g answers get_server_list, 0 if none does, <0 on error. */
static int daemon_answers(const char *bin, const struct mps_gpu *g, double timeout, char *err,
                          size_t errlen)
{
    struct mps_out out;
    int r;

    if (!gs_mps_control_at(g->pipe))
        return 0;
    if ((r = mps_control(bin, g, NULL, "get_server_list\n", timeout, &out)) < 0) {
        snprintf(err, errlen, "cannot run %s: %s", bin, strerror(-r));
        return r;
    }
    if (out.timed_out) {
        snprintf(err, errlen, "%s: get_server_list did not answer within %g s (pipe dir %s)",
                 g->uuid, timeout, g->pipe);
        return -ETIMEDOUT;
    }
    return out.status == 0;
}

int mps_daemon_start(const char *bin, const struct mps_gpu *g, double timeout, int *started,
                     char *err, size_t errlen)
{
    struct sockaddr_un sun;
    struct mps_out out;
    double deadline;
    int r;

    *started = 0;
    if (strlen(g->pipe) + sizeof("/control") > sizeof(sun.sun_path)) {
        snprintf(err, errlen,
                 "the pipe directory %s is too long for a socket path (at most %zu "
                 "characters); set XDG_RUNTIME_DIR to a shorter directory",
                 g->pipe, sizeof(sun.sun_path) - sizeof("/control"));
        return -ENAMETOOLONG;
    }
    if ((r = mps_gpu_dirs(g, 1, err, errlen)) < 0)
        return r;
    if ((r = daemon_answers(bin, g, timeout, err, errlen)) != 0)
        return r < 0 ? r : 0;
    /* A stale control endpoint of a daemon that died is the daemon's to replace. */
    if ((r = mps_control(bin, g, "-d", NULL, timeout, &out)) < 0) {
        snprintf(err, errlen, "cannot run %s: %s", bin, strerror(-r));
        return r;
    }
    if (!out.timed_out && out.status != 0 && (r = (int)mps_daemon_find(g->pipe)) > 0) {
        /*
         * It runs but did not answer get_server_list. A daemon busy starting its
         * server for clients arriving together does that for a moment (seen on an
         * H200 with four at once); one told to quit does it until it exits.
         */
        for (deadline = mps_now_s() + timeout; mps_now_s() < deadline; mps_sleep_ms(100)) {
            int a = daemon_answers(bin, g, timeout, err, errlen);
            if (a != 0)
                return a < 0 ? a : 0;
        }
        snprintf(err, errlen,
                 "the MPS control daemon of %s (PID %d) is running but has accepted no new "
                 "client for %g s: it is stopping (after `gpuslice mps stop --force` it exits "
                 "when its clients end) or does not answer; try again once it has gone, or "
                 "set GPUSLICE_MPS_TIMEOUT longer",
                 g->uuid, r, timeout);
        return -EBUSY;
    }
    if (out.timed_out || out.status != 0) {
        snprintf(err, errlen, "%s -d %s%s%.*s (log dir %s)", MPS_CONTROL,
                 out.timed_out ? "did not return in time" : "failed", out.len ? ": " : "",
                 (int)out.len, out.text, g->log);
        return -EIO;
    }
    for (deadline = mps_now_s() + timeout;
         (r = daemon_answers(bin, g, timeout, err, errlen)) == 0;) {
        if (mps_now_s() >= deadline)
            break;
        mps_sleep_ms(50);
    }
    if (r <= 0) {
        if (r == 0)
            snprintf(err, errlen,
                     "the daemon for %s did not answer on %s within %g s (see %s/control.log)",
                     g->uuid, g->pipe, timeout, g->log);
        return r < 0 ? r : -ETIMEDOUT;
    }
    *started = 1;
    if ((r = mps_control(bin, g, NULL, "set_default_active_thread_percentage 100\n", timeout,
                         &out)) < 0 ||
        out.timed_out || out.status != 0) {
        snprintf(err, errlen, "%s: set_default_active_thread_percentage 100 failed%s%.*s", g->uuid,
                 r >= 0 && out.len ? ": " : "", r >= 0 ? (int)out.len : 0, r >= 0 ? out.text : "");
        return r < 0 ? r : -EIO;
    }
    return 0;
}

int mps_daemon_stop(const char *bin, const struct mps_gpu *g, double timeout, char *err,
                    size_t errlen)
{
    struct mps_out out;
    double deadline;
    pid_t daemon = mps_daemon_find(g->pipe);
    int r, gone;

    if ((r = mps_control(bin, g, NULL, "quit\n", timeout, &out)) < 0) {
        snprintf(err, errlen, "cannot run %s: %s", bin, strerror(-r));
        return r;
    }
    if (!out.timed_out && out.status != 0) {
        snprintf(err, errlen, "%s: quit failed%s%.*s", g->uuid, out.len ? ": " : "", (int)out.len,
                 out.text);
        return -EIO;
    }
    for (deadline = mps_now_s() + timeout;; mps_sleep_ms(50)) {
        if (daemon > 0)
            gone = mps_daemon_find(g->pipe) <= 0;
        else
            gone = daemon_answers(bin, g, timeout, err, errlen) == 0;
        if (gone)
            return 0;
        if (mps_now_s() >= deadline)
            break;
    }
    snprintf(err, errlen, "%s: the daemon did not exit within %g s of quit (pipe dir %s)", g->uuid,
             timeout, g->pipe);
    return -ETIMEDOUT;
}
