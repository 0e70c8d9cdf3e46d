/*
 * MPS helpers for the CLI: the per-user, per-GPU directories gpuslice gives
 * an MPS control daemon, finding a daemon through /proc, and running
 * nvidia-cuda-mps-control without a shell and without ever waiting forever.
 */
#define _GNU_SOURCE
#include "cli/mps.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
static int open_private_dir(int parent, const char *name, const char *shown, int create,
                            char *err, size_t errlen)
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
    const char *shown[4] = {base, g->dir, g->pipe, g->log};
    const char *names[4] = {NULL, g->uuid, "pipe", "log"};
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

const char *mps_state(const char *pipe_dir)
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
    return daemon > 0 || daemon == -EACCES ? "running" : "unknown";
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
        snprintf(err, errlen,
                 "MPS is not supported under WSL (kernel %s); use a native Linux host", rel);
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
    const char *v = getenv("GPUSLICE_MPS_TIMEOUT");
    char *end;
    double s;

    if (v == NULL || *v == '\0')
        return 10.0;
    s = strtod(v, &end);
    return *end == '\0' && s > 0 && s <= 600 ? s : 10.0;
}

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
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
    static const char *const drop[] = {"CUDA_MPS_PIPE_DIRECTORY=", "CUDA_MPS_LOG_DIRECTORY=",
                                       "CUDA_VISIBLE_DEVICES=", "LD_PRELOAD="};
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
    char *argv[3] = {(char *)MPS_CONTROL, (char *)arg, NULL};
    char **env;
    int in[2], o[2], st = 0, eof = 0, r;
    double deadline = now() + timeout;
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
        struct pollfd p = {o[0], POLLIN, 0};
        pid_t w = waitpid(pid, &st, WNOHANG);

        if (w == pid) {
            /* Ended: what it wrote is in the pipe. A daemon it left holding
             * the pipe open must not keep us waiting for end of file. */
            take(out, o[0]);
            break;
        }
        if (now() >= deadline) {
            kill(-pid, SIGKILL);
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            take(out, o[0]);
            out->timed_out = 1;
            close(o[0]);
            return 0;
        }
        if (eof) {
            struct timespec ts = {0, 10 * 1000 * 1000};

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
