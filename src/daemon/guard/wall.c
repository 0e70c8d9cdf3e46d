/*
 * The second wall: where the driver holds per-cgroup GPU memory limits itself (NVIDIA r615
 * and later, nvmlDeviceSetMemoryLimits_v1), a pod's memory limit is also set on each of its
 * containers' cgroups, so that an allocation over it fails in the driver, whatever the
 * process loaded. The guard (guard.c) still stops what gets past both. Our GPUs run driver
 * 580, which has no such call: there the daemon says so once and relies on the interposer
 * and the guard.
 *
 * The limit goes on each container's own cgroup (the leaf): the driver's documentation says
 * a container's leaf cgroup shadows a limit set on its pod's. Each container gets the pod's
 * limit for the GPU, which bounds a one-container pod exactly and a pod of several containers
 * loosely (each may reach the pod's limit; the interposer and the guard hold their sum).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/daemon.h"
#include "daemon/guard/guard.h"

/* r615's types (nvml.h of CUDA 13.4): a cgroup's sysfs path and two limits in bytes. */
struct nvml_set_memory_limits {
    const char *nameSpace;
    unsigned long long softLimit;
    unsigned long long hardLimit;
};

typedef nvmlReturn_t (*set_limits_fn)(nvmlDevice_t, struct nvml_set_memory_limits *);

#define MAX_WALLS 1024 /* (container cgroup, GPU) pairs whose limit was set */

struct wall {
    int dev; /* NVML index; -1 free */
    uint64_t hard;
    char path[PATH_MAX];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static set_limits_fn set_limits;
static char why_not[256];
static struct wall walls[MAX_WALLS];
static unsigned long walls_set, walls_failed;

int gd_wall_start(void)
{
    int i;

    for (i = 0; i < MAX_WALLS; i++)
        walls[i].dev = -1;
    if (gd.drv.nvml)
        set_limits = (set_limits_fn)dlsym(gd.drv.nvml, "nvmlDeviceSetMemoryLimits_v1");
    if (set_limits && atoi(gd.driver_version) < 615) {
        snprintf(why_not, sizeof(why_not),
                 "NVML has nvmlDeviceSetMemoryLimits_v1 but the driver is %s: per-cgroup memory "
                 "limits came with r615",
                 gd.driver_version);
        set_limits = NULL;
        gd_log("second wall: none: %s; pods are held by the interposer and the guard", why_not);
        return 0;
    }
    if (set_limits == NULL) {
        snprintf(why_not, sizeof(why_not),
                 "NVML (driver %s) has no nvmlDeviceSetMemoryLimits_v1: the driver holds no "
                 "per-cgroup memory limits before r615",
                 gd.driver_version[0] ? gd.driver_version : "unknown");
        gd_log("second wall: none: %s; pods are held by the interposer and the guard", why_not);
        return 0;
    }
    gd_log("second wall: pods' memory limits are also set on their containers' cgroups in the "
           "driver (nvmlDeviceSetMemoryLimits_v1)");
    return 0;
}

const char *gd_wall_state(void)
{
    return set_limits ? "driver" : why_not;
}

/* The cgroup v2 hierarchy's mount point in this mount namespace, into out; 0 or -ENOENT. */
static int cgroup2_mount(char *out, size_t len)
{
    char line[1024], dev[256], dir[PATH_MAX], type[64];
    FILE *f = fopen("/proc/self/mounts", "re");
    int r = -ENOENT;

    if (f == NULL)
        return -errno;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "%255s %4095s %63s", dev, dir, type) == 3 &&
            strcmp(type, "cgroup2") == 0) {
            snprintf(out, len, "%s", dir);
            r = 0;
            break;
        }
    fclose(f);
    return r;
}

/*
 * The sysfs path of the cgroup v2 line of cg (the contents of /proc/PID/cgroup) into out;
 * 0, or -ENOENT (no v2 line, no cgroup2 mount, or a path relative to another cgroup
 * namespace's root, which this daemon cannot name).
 */
int gd_wall_leaf(const char *cg, char *out, size_t len)
{
    const char *p = strstr(cg, "0::/"), *e;
    char mnt[PATH_MAX];

    if (p != cg && (p == NULL || p[-1] != '\n'))
        return -ENOENT;
    p += 3;
    if (strncmp(p, "/..", 3) == 0 || cgroup2_mount(mnt, sizeof(mnt)) < 0)
        return -ENOENT;
    for (e = p; *e && *e != '\n'; e++)
        ;
    if ((size_t)snprintf(out, len, "%s%.*s", mnt, (int)(e - p), p) >= len)
        return -ENAMETOOLONG;
    return 0;
}

void gd_wall_apply(int dev, const char *path, uint64_t hard)
{
    struct nvml_set_memory_limits lim;
    nvmlDevice_t h;
    nvmlReturn_t r;
    int i, free_i = -1;

    if (set_limits == NULL || hard == 0 || path[0] == '\0')
        return;
    pthread_mutex_lock(&mu);
    for (i = 0; i < MAX_WALLS; i++) {
        if (walls[i].dev == dev && strcmp(walls[i].path, path) == 0)
            break;
        if (walls[i].dev < 0 && free_i < 0)
            free_i = i;
    }
    if (i < MAX_WALLS && walls[i].hard == hard) {
        pthread_mutex_unlock(&mu);
        return; /* set already */
    }
    if (i == MAX_WALLS)
        i = free_i >= 0 ? free_i : (int)(walls_set % MAX_WALLS); /* the oldest goes */
    if (gd.drv.nvmlDeviceGetHandleByIndex_v2((unsigned)dev, &h) != NVML_SUCCESS) {
        pthread_mutex_unlock(&mu);
        return;
    }
    lim.nameSpace = path;
    lim.softLimit = 0;
    lim.hardLimit = hard;
    if ((r = set_limits(h, &lim)) == NVML_SUCCESS) {
        walls[i].dev = dev;
        walls[i].hard = hard;
        snprintf(walls[i].path, sizeof(walls[i].path), "%s", path);
        walls_set++;
    } else if (walls_failed++ < 8) {
        gd_log("second wall: cannot set %llu bytes on GPU %d for %s: %s", (unsigned long long)hard,
               dev, path, gd.drv.nvmlErrorString ? gd.drv.nvmlErrorString(r) : "NVML error");
    }
    pthread_mutex_unlock(&mu);
}

unsigned long gd_wall_count(void)
{
    unsigned long n;

    pthread_mutex_lock(&mu);
    n = walls_set;
    pthread_mutex_unlock(&mu);
    return n;
}
