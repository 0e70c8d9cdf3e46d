/*
 * Questions to the CUDA driver asked in a child process: gpuslice forks the
 * program later, and a process that initialised CUDA cannot use it after a
 * fork; a driver that hangs cannot hang gpuslice either. Used by gpuslice
 * run/exec and gpuslice procs (and the node daemon to come).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "control/mps.h"
#include "control/probe.h"
#include "common/cuda_api.h"
#include "common/driver.h"
#include "common/parse.h"

/*
 * Runs fn in a forked child and waits at most timeout seconds (then kills
 * it): 0 if fn returned 0, else -EIO (or -ETIMEDOUT) with what fn wrote to
 * buf, its message or result. The CUDA work is done in a child because a
 * process that initialised CUDA cannot use it after a fork, and so that a
 * driver that hangs cannot hang gpuslice.
 */
int probe_in_child(int (*fn)(void *arg, char *buf, size_t len), void *arg, double timeout,
                   char *buf, size_t len)
{
    struct pollfd pfd;
    size_t got = 0;
    int fds[2], status = 0, timed_out = 0;
    pid_t pid;

    buf[0] = '\0';
    if (pipe2(fds, O_CLOEXEC) < 0) {
        snprintf(buf, len, "pipe: %s", strerror(errno));
        return -errno;
    }
    if ((pid = fork()) < 0) {
        snprintf(buf, len, "fork: %s", strerror(errno));
        close(fds[0]);
        close(fds[1]);
        return -EAGAIN;
    }
    if (pid == 0) {
        char out[1024] = "";
        int r;

        close(fds[0]);
        r = fn(arg, out, sizeof(out));
        if (write(fds[1], out, strlen(out)) < 0)
            _exit(2);
        _exit(r == 0 ? 0 : 1);
    }
    close(fds[1]);
    pfd.fd = fds[0];
    pfd.events = POLLIN;
    for (;;) {
        ssize_t n;
        int pr = poll(&pfd, 1, (int)(timeout * 1000));

        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            timed_out = 1;
            break;
        }
        if ((n = read(fds[0], buf + got, len - 1 - got)) <= 0 || (got += (size_t)n) >= len - 1)
            break;
    }
    buf[got] = '\0';
    close(fds[0]);
    if (timed_out)
        kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (timed_out) {
        snprintf(buf, len, "no answer within %g s", timeout);
        return -ETIMEDOUT;
    }
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

/* In a child: the UUID of device index *arg as the driver numbers all GPUs. */
int probe_uuid_of_index(void *arg, char *buf, size_t len)
{
    char uuid[GS_UUID_STRLEN], err[512];

    /* Entries of CUDA_VISIBLE_DEVICES count the GPUs as they are without it. */
    unsetenv("CUDA_VISIBLE_DEVICES");
    if (mps_driver_uuid(*(int *)arg, uuid, err, sizeof(err)) < 0) {
        snprintf(buf, len, "%s", err);
        return -1;
    }
    snprintf(buf, len, "%s", uuid);
    return 0;
}

/* In a child with the program's environment: can CUDA make a context on device 0? */
int probe_cuda_context(void *arg, char *buf, size_t len)
{
    struct gs_driver d = { 0 };
    const char *step;
    char num[32], why[256];
    CUcontext ctx;
    CUdevice dev;
    CUresult r;

    (void)arg;
    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(buf, len, "cannot load the CUDA driver: %s", why);
        return -1;
    }
    if (!d.cuInit || !d.cuDeviceGet || !d.cuDevicePrimaryCtxRetain ||
        !d.cuDevicePrimaryCtxRelease) {
        snprintf(buf, len,
                 "the CUDA driver lacks cuInit, cuDeviceGet or the primary context "
                 "calls");
        return -1;
    }
    if ((r = d.cuInit(0)) != CUDA_SUCCESS)
        step = "cuInit";
    else if ((r = d.cuDeviceGet(&dev, 0)) != CUDA_SUCCESS)
        step = "cuDeviceGet(0)";
    else if ((r = d.cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS)
        step = "cuDevicePrimaryCtxRetain";
    else if ((r = d.cuDevicePrimaryCtxRelease(dev)) != CUDA_SUCCESS)
        step = "cuDevicePrimaryCtxRelease";
    else
        return 0;
    snprintf(buf, len, "%s: %s", step, gs_driver_cu_name(&d, r, num, sizeof(num)));
    return -1;
}

/* For visible_probe's arg: every GPU of the machine (CUDA_VISIBLE_DEVICES unset). */
static const char every_gpu[] = "";

/*
 * In a child with the program's CUDA_VISIBLE_DEVICES (arg, NULL: as it is;
 * every_gpu: unset): "N HEX HEX …", the device count and each UUID as 32 hex
 * digits.
 */
static int visible_probe(void *arg, char *buf, size_t len)
{
    uint8_t raw[GPUSLICE_MAX_DEVICES][16];
    const char *vis = arg;
    struct gs_driver d = { 0 };
    char why[256];
    size_t at;
    int n, i, k;

    if (vis == every_gpu)
        unsetenv("CUDA_VISIBLE_DEVICES");
    else if (vis && setenv("CUDA_VISIBLE_DEVICES", vis, 1) < 0) {
        snprintf(buf, len, "cannot set CUDA_VISIBLE_DEVICES: %s", strerror(errno));
        return -1;
    }
    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(buf, len, "cannot load the CUDA driver: %s", why);
        return -1;
    }
    if ((n = gs_driver_uuids(&d, raw, GPUSLICE_MAX_DEVICES, buf, len)) < 0)
        return -1;
    at = (size_t)snprintf(buf, len, "%d", n);
    for (i = 0; i < n && i < GPUSLICE_MAX_DEVICES && at + 34 < len; i++) {
        buf[at++] = ' ';
        for (k = 0; k < 16; k++)
            at += (size_t)snprintf(buf + at, len - at, "%02x", raw[i][k]);
    }
    return 0;
}

static int probe_gpus(const char *devices, struct visible_gpus *v, char *err, size_t errlen)
{
    char buf[1024];
    const char *p;
    int i, k;

    if (probe_in_child(visible_probe, (void *)devices, 60, buf, sizeof(buf)) < 0) {
        snprintf(err, errlen, "%s", buf);
        return -1;
    }
    v->n = atoi(buf);
    for (i = 0, p = strchr(buf, ' '); p && i < v->n && i < GPUSLICE_MAX_DEVICES; i++) {
        for (k = 0; k < 16; k++) {
            unsigned b;
            if (sscanf(p + 1 + 2 * k, "%2x", &b) != 1)
                break;
            v->uuid[i][k] = (uint8_t)b;
        }
        p = strchr(p + 1, ' ');
    }
    return 0;
}

int probe_visible_gpus(const char *devices, struct visible_gpus *v, char *err, size_t errlen)
{
    return probe_gpus(devices, v, err, errlen);
}

int probe_every_gpu(struct visible_gpus *v, char *err, size_t errlen)
{
    return probe_gpus(every_gpu, v, err, errlen);
}

/* In a child: the device's UUID, index, split, memory and name, as "UUID INDEX TOTAL C NC F NF
 * MEMORY NAME". */
static int query_geom(void *arg, char *buf, size_t len)
{
    const struct geom_query *q = arg;
    struct gs_driver d = { 0 };
    char uuid[GS_UUID_STRLEN], want[GS_UUID_STRLEN], name[128] = "", eb[32], why[256];
    CUdevResource all, groups[1], rest;
    unsigned total, coarse = 0, ncoarse = 0, fine = 0, nfine = 0, n;
    CUdevice dev = -1;
    CUresult r;
    CUuuid u;
    size_t mem = 0;
    int i, nd = 0, index = 0;

    if (gs_driver_open_cuda(&d, RTLD_NOW | RTLD_LOCAL, NULL, why, sizeof(why)) < 0) {
        snprintf(buf, len, "no NVIDIA driver found: %s", why);
        return -1;
    }
    if (!d.cuInit || !d.cuDeviceGet || !d.cuDeviceGetCount || !d.cuDeviceGetUuid_v2 ||
        !d.cuDeviceGetName) {
        snprintf(buf, len, "the CUDA driver lacks the device calls");
        return -1;
    }
    if ((r = d.cuInit(0)) != CUDA_SUCCESS || (r = d.cuDeviceGetCount(&nd)) != CUDA_SUCCESS) {
        snprintf(buf, len, "the CUDA driver did not initialise: %s",
                 gs_driver_cu_name(&d, r, eb, sizeof(eb)));
        return -1;
    }
    if (gs_parse_uuid(q->device, strlen(q->device), want)) {
        for (i = 0; i < nd && dev < 0; i++) {
            if (d.cuDeviceGet(&dev, i) == CUDA_SUCCESS &&
                d.cuDeviceGetUuid_v2(&u, dev) == CUDA_SUCCESS) {
                gs_format_uuid((const unsigned char *)u.bytes, uuid);
                if (strcmp(uuid, want) != 0)
                    dev = -1;
                else
                    index = i;
            } else {
                dev = -1;
            }
        }
        if (dev < 0) {
            snprintf(buf, len, "--device: no GPU %s among the %d this process sees", q->device, nd);
            return -1;
        }
    } else if ((r = d.cuDeviceGet(&dev, (index = atoi(q->device)))) != CUDA_SUCCESS) {
        snprintf(buf, len, "--device: there is no GPU %s (%d visible)", q->device, nd);
        return -1;
    }
    if ((r = d.cuDeviceGetUuid_v2(&u, dev)) != CUDA_SUCCESS) {
        snprintf(buf, len, "GPU %s has no UUID: %s", q->device,
                 gs_driver_cu_name(&d, r, eb, sizeof(eb)));
        return -1;
    }
    gs_format_uuid((const unsigned char *)u.bytes, uuid);
    memcpy(uuid, "GPU", 3);
    d.cuDeviceGetName(name, sizeof(name), dev);
    if (!d.cuDeviceTotalMem_v2 || (r = d.cuDeviceTotalMem_v2(&mem, dev)) != CUDA_SUCCESS) {
        snprintf(buf, len, "GPU %s does not say its memory: %s", q->device,
                 d.cuDeviceTotalMem_v2 ? gs_driver_cu_name(&d, r, eb, sizeof(eb))
                                       : "no cuDeviceTotalMem_v2");
        return -1;
    }
    memset(&all, 0, sizeof(all));
    if (!d.cuDeviceGetDevResource || !d.cuDevSmResourceSplitByCount) {
        snprintf(buf, len,
                 "GPU %s: this driver has no green contexts (CUDA 12.4 or later is "
                 "needed for SM partitions)",
                 q->device);
        return -1;
    }
    if ((r = d.cuDeviceGetDevResource(dev, &all, CU_DEV_RESOURCE_TYPE_SM)) != CUDA_SUCCESS ||
        all.sm.smCount == 0) {
        snprintf(buf, len,
                 "GPU %s cannot partition its SMs with green contexts "
                 "(cuDeviceGetDevResource: %s)",
                 q->device,
                 r == CUDA_SUCCESS ? "no SMs" : gs_driver_cu_name(&d, r, eb, sizeof(eb)));
        return -1;
    }
    total = all.sm.smCount;
    n = 1;
    if (d.cuDevSmResourceSplitByCount(groups, &n, &all, &rest, 0, 1) == CUDA_SUCCESS && n == 1) {
        coarse = groups[0].sm.smCount;
        if (d.cuDevSmResourceSplitByCount(NULL, &ncoarse, &all, NULL, 0, 1) != CUDA_SUCCESS)
            ncoarse = 0;
    }
    n = 1;
    if (d.cuDevSmResourceSplitByCount(groups, &n, &all, &rest,
                                      CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                      1) == CUDA_SUCCESS &&
        n == 1) {
        fine = groups[0].sm.smCount;
        if (d.cuDevSmResourceSplitByCount(NULL, &nfine, &all, NULL,
                                          CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING,
                                          1) != CUDA_SUCCESS)
            nfine = 0;
    }
    if (ncoarse == 0 && nfine == 0) {
        snprintf(buf, len, "GPU %s: cuDevSmResourceSplitByCount made no groups of its %u SMs",
                 q->device, total);
        return -1;
    }
    snprintf(buf, len, "%s %d %u %u %u %u %u %zu %s", uuid, (int)index, total, coarse, ncoarse,
             fine, nfine, mem, name);
    return 0;
}

int probe_sm_geometry(struct geom_query *q, char *err, size_t errlen)
{
    char buf[1024];

    if (probe_in_child(query_geom, q, 30, buf, sizeof(buf)) < 0) {
        snprintf(err, errlen, "%s", buf);
        return -1;
    }
    if (sscanf(buf, "%40s %d %u %u %u %u %u %" SCNu64 " %127[^\n]", q->uuid, &q->index, &q->g.total,
               &q->g.coarse, &q->g.ncoarse, &q->g.fine, &q->g.nfine, &q->memory, q->name) < 8) {
        snprintf(err, errlen, "the GPU query said \"%s\"", buf);
        return -1;
    }
    return 0;
}
