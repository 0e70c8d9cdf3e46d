/*
 * Per-cgroup GPU memory limits held by the driver, as NVIDIA r615 and later hold them
 * (nvmlDeviceSetMemoryLimits_v1; the "misc" backend of MPS v3 memory partitioning): a hard
 * limit per GPU on a cgroup v2 directory, named by its sysfs path, bounds what the processes
 * of that cgroup and its descendants hold on the GPU (contexts included); an allocation that
 * would cross it fails with CUDA_ERROR_OUT_OF_MEMORY. A cgroup is bounded by its nearest
 * limited ancestor (itself included): limits do not nest. Only where the simulated driver is
 * r615 or later (GPUSLICE_SIM_DRIVER_VERSION); 580, the default, has no such call.
 *
 * The limits live in a text file beside the state file (STATE.memlimits, one "DEV HARD SOFT
 * PATH" line each), written under an flock; a process's cgroup is read from /proc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sim_state.h"

#define MAX_LIMITS 64

struct limit {
    int dev;
    unsigned long long hard, soft;
    char path[PATH_MAX];
};

static char file[PATH_MAX + 16];

void sim_memlimit_init(const char *state_path)
{
    snprintf(file, sizeof(file), "%s.memlimits", state_path);
}

/* The limits in the file (at most MAX_LIMITS); how many, 0 when there is no file. */
static int load(struct limit *v)
{
    char line[PATH_MAX + 128];
    FILE *f;
    int n = 0;

    if (!file[0] || (f = fopen(file, "re")) == NULL)
        return 0;
    while (n < MAX_LIMITS && fgets(line, sizeof(line), f)) {
        struct limit *l = &v[n];

        if (sscanf(line, "%d %llu %llu %4095s", &l->dev, &l->hard, &l->soft, l->path) == 4)
            n++;
    }
    fclose(f);
    return n;
}

/* The driver's version's major number (615 for "615.00"), from GPUSLICE_SIM_DRIVER_VERSION. */
int sim_driver_major(void)
{
    const char *v = sim_driver_version();

    return atoi(v);
}

const char *sim_driver_version(void)
{
    const char *v = getenv("GPUSLICE_SIM_DRIVER_VERSION");

    return v && *v ? v : SIM_NVML_DRIVER_VERSION;
}

int sim_cuda_version(int *version)
{
    const char *v = getenv("GPUSLICE_SIM_CUDA_VERSION");
    char *end;
    long n;

    if (v == NULL) {
        *version = SIM_CUDA_DRIVER_VERSION;
        return 0;
    }
    errno = 0;
    n = strtol(v, &end, 10);
    /* 1000 x major + 10 x minor, as every driver reports it: 12080 is CUDA 12.8. */
    if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < 1000 || n > 99990 ||
        n % 10 != 0) {
        fprintf(stderr,
                "gpuslice-sim: GPUSLICE_SIM_CUDA_VERSION: \"%s\" is not a CUDA version "
                "(use 1000 x major + 10 x minor, 1000 to 99990, e.g. 12080 for 12.8)\n",
                v);
        return -EINVAL;
    }
    *version = (int)n;
    return 0;
}

int sim_memlimit_set(int dev, const char *path, unsigned long long soft, unsigned long long hard)
{
    struct limit v[MAX_LIMITS];
    struct stat st;
    int n, i, fd, r = 0;
    FILE *f;

    if (path == NULL || path[0] != '/' || strlen(path) >= PATH_MAX)
        return -EINVAL;
    /* A cgroup's directory, with the controller files of a cgroup v2 one. */
    {
        char probe[PATH_MAX + 32];

        snprintf(probe, sizeof(probe), "%s/cgroup.procs", path);
        if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) || access(probe, F_OK) < 0)
            return -ENOENT;
    }
    if (geteuid() != 0)
        return -EPERM;
    if ((fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0644)) < 0)
        return -errno;
    flock(fd, LOCK_EX);
    n = load(v);
    for (i = 0; i < n; i++)
        if (v[i].dev == dev && strcmp(v[i].path, path) == 0)
            break;
    if (i == n && n == MAX_LIMITS) {
        r = -ENOSPC;
        goto out;
    }
    if (i == n)
        n++;
    v[i].dev = dev;
    v[i].soft = soft;
    v[i].hard = hard;
    snprintf(v[i].path, sizeof(v[i].path), "%s", path);
    /* Cleared (soft 0, hard at its "max"): gone. */
    if (soft == 0 && hard == ~0ULL)
        v[i] = v[--n];
    if (ftruncate(fd, 0) < 0 || (f = fdopen(dup(fd), "w")) == NULL) {
        r = -errno;
        goto out;
    }
    for (i = 0; i < n; i++)
        fprintf(f, "%d %llu %llu %s\n", v[i].dev, v[i].hard, v[i].soft, v[i].path);
    if (fclose(f) != 0)
        r = -EIO;
out:
    flock(fd, LOCK_UN);
    close(fd);
    return r;
}

int sim_memlimit_get(int dev, const char *path, unsigned long long *soft, unsigned long long *hard)
{
    struct limit v[MAX_LIMITS];
    int n = load(v), i;

    for (i = 0; i < n; i++)
        if (v[i].dev == dev && strcmp(v[i].path, path) == 0) {
            *soft = v[i].soft;
            *hard = v[i].hard;
            return 0;
        }
    *soft = 0;
    *hard = ~0ULL;
    return 0;
}

/* The cgroup v2 mount point, into out; 0 or -ENOENT. */
static int cgroup2_mount(char *out, size_t len)
{
    char line[1024], dev[256], dir[PATH_MAX], type[64];
    FILE *f = fopen("/proc/self/mounts", "re");
    int r = -ENOENT;

    if (f == NULL)
        return -ENOENT;
    while (r < 0 && fgets(line, sizeof(line), f))
        if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 && strcmp(type, "cgroup2") == 0)
            r = snprintf(out, len, "%s", dir) < (int)len ? 0 : -ENOENT;
    fclose(f);
    return r;
}

/* The sysfs path of process pid's cgroup v2 directory, into out; 0 or -ENOENT. */
static int cgroup_of(pid_t pid, const char *mnt, char *out, size_t len)
{
    char path[PATH_MAX + 32], buf[8192], *p, *e;
    ssize_t got;
    int fd;

    snprintf(path, sizeof(path), "%s/%d/cgroup", sim_proc_root(), (int)pid);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -ENOENT;
    got = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (got <= 0)
        return -ENOENT;
    buf[got] = '\0';
    for (p = buf; p && *p; p = (e = strchr(p, '\n')) ? e + 1 : NULL)
        if (strncmp(p, "0::/", 4) == 0) {
            for (e = p + 3; *e && *e != '\n'; e++)
                ;
            if ((size_t)snprintf(out, len, "%s%.*s", mnt, (int)(e - p - 3), p + 3) >= len)
                return -ENOENT;
            /* The root's own "/" would end in '/': not a path under a limited cgroup. */
            if (out[strlen(out) - 1] == '/')
                out[strlen(out) - 1] = '\0';
            return 0;
        }
    return -ENOENT;
}

/* Whether sysfs path c is the cgroup at ns or below it. */
static int under(const char *c, const char *ns)
{
    size_t n = strlen(ns);

    return strncmp(c, ns, n) == 0 && (c[n] == '\0' || c[n] == '/');
}

/* The limit of GPU dev that bounds the cgroup at c: its nearest limited ancestor; or NULL. */
static const struct limit *nearest(const struct limit *v, int n, int dev, const char *c)
{
    const struct limit *best = NULL;
    int i;

    for (i = 0; i < n; i++)
        if (v[i].dev == dev && under(c, v[i].path) &&
            (best == NULL || strlen(v[i].path) > strlen(best->path)))
            best = &v[i];
    return best;
}

int sim_memlimit_check(const struct sim_shared *sh, pid_t self, int dev, uint64_t bytes)
{
    struct limit v[MAX_LIMITS];
    char mnt[PATH_MAX], mine[PATH_MAX + 8], other[PATH_MAX + 8];
    const struct limit *best = NULL;
    uint64_t used = 0;
    int n, i;

    /* Only a driver of r615 or later sets them (nvmlDeviceSetMemoryLimits_v1). */
    if ((n = load(v)) == 0)
        return 0;
    if (cgroup2_mount(mnt, sizeof(mnt)) < 0 || cgroup_of(self, mnt, mine, sizeof(mine)) < 0)
        return 0;
    /* The nearest limited ancestor bounds it, and the processes it bounds count. */
    if ((best = nearest(v, n, dev, mine)) == NULL)
        return 0;
    for (i = 0; i < SIM_MAX_PROCS; i++) {
        const struct sim_proc *p = &sh->procs[i];

        if (p->pid == 0 || p->gone_ns)
            continue;
        if (p->pid == self || (cgroup_of(p->pid, mnt, other, sizeof(other)) == 0 &&
                               nearest(v, n, dev, other) == best))
            used += p->held[dev];
    }
    return used + bytes > best->hard ? -ENOMEM : 0;
}
