/*
 * The GPUs, from NVML: loaded once (the real library, else the simulated GPU
 * next to the daemon's binary, saying so), then read by one thread every
 * sample_ms into a private table that is copied under gd.mu, so that no
 * NVML call ever runs with the lock held. The same thread sweeps the tenants
 * every sweep_ms.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "daemon/daemon.h"
#include "daemon/guard/guard.h"
#include "daemon/kube.h"
#include "daemon/pods.h"

static pthread_t sampler;
static int sampler_started, stopping;
static pthread_mutex_t stop_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stop_cond = PTHREAD_COND_INITIALIZER;

/* The simulated GPU's NVML: next to the binary in the build tree, or installed beside it. */
static int find_sim(char *out, size_t len)
{
    static const char *const rel[] = { "../lib/sim/libnvidia-ml.so.1",
                                       "../lib/gpuslice/sim/libnvidia-ml.so.1" };
    char exe[PATH_MAX], *slash;
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    size_t i;

    if (n <= 0)
        return -ENOENT;
    exe[n] = '\0';
    if ((slash = strrchr(exe, '/')) == NULL)
        return -ENOENT;
    slash[1] = '\0';
    for (i = 0; i < sizeof(rel) / sizeof(rel[0]); i++) {
        if ((size_t)snprintf(out, len, "%s%s", exe, rel[i]) >= len)
            continue;
        if (access(out, R_OK) == 0)
            return 0;
    }
    return -ENOENT;
}

static int load(const char *path, char *err, size_t errlen)
{
    nvmlReturn_t r;

    if (setenv(GS_ENV_REAL_LIBNVML, path, 1) < 0 ||
        gs_driver_open_nvml(&gd.drv, RTLD_NOW | RTLD_LOCAL, NULL, err, errlen) < 0)
        return -1;
    if (!gd.drv.nvmlInit_v2 || !gd.drv.nvmlDeviceGetCount_v2 ||
        !gd.drv.nvmlDeviceGetHandleByIndex_v2) {
        snprintf(err, errlen, "%s lacks nvmlInit_v2 or the device functions", path);
        gs_driver_close(&gd.drv);
        return -1;
    }
    if ((r = gd.drv.nvmlInit_v2()) != NVML_SUCCESS) {
        snprintf(err, errlen, "nvmlInit: %s",
                 gd.drv.nvmlErrorString ? gd.drv.nvmlErrorString(r) : "failed");
        gs_driver_close(&gd.drv);
        return -1;
    }
    snprintf(gd.nvml_path, sizeof(gd.nvml_path), "%s", path);
    return 0;
}

/* A GPU's facts that do not change, by index, as last read (the sampler's thread only). */
static struct {
    char uuid[GS_UUID_STRLEN];
    int sms, cc_major, cc_minor;
} fixed[GD_MAX_DEVICES];

/* Reads every device into v; returns how many. */
static int sample(struct gd_device *v)
{
    struct gs_driver *d = &gd.drv;
    unsigned n = 0, i;

    if (d->nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS)
        return 0;
    if (n > GD_MAX_DEVICES)
        n = GD_MAX_DEVICES;
    for (i = 0; i < n; i++) {
        struct gd_device *g = &v[i];
        nvmlProcessInfo_t info[GD_MAX_DEVPROCS];
        nvmlProcessUtilizationSample_t us[GD_MAX_DEVPROCS];
        nvmlUtilization_t u;
        nvmlMemory_t m;
        nvmlMemory_v2_t m2;
        nvmlDevice_t h;
        unsigned val, cnt = GD_MAX_DEVPROCS, ucnt = GD_MAX_DEVPROCS, k, j;
        char uuid[NVML_DEVICE_UUID_V2_BUFFER_SIZE];

        memset(g, 0, sizeof(*g));
        g->index = (int)i;
        g->util = -1;
        g->power_mw = g->sm_clock = g->temp_c = -1;
        if (d->nvmlDeviceGetHandleByIndex_v2(i, &h) != NVML_SUCCESS)
            continue;
        if (d->nvmlDeviceGetUUID && d->nvmlDeviceGetUUID(h, uuid, sizeof(uuid)) == NVML_SUCCESS) {
            char low[GS_UUID_STRLEN];

            if (gs_parse_uuid(uuid, strlen(uuid), low)) {
                snprintf(g->uuid, sizeof(g->uuid), "GPU-%s", low + 4);
                for (k = 0, j = 4; k < 16 && low[j]; j++) {
                    unsigned b;

                    if (low[j] == '-')
                        continue;
                    sscanf(low + j, "%2x", &b);
                    g->raw[k++] = (uint8_t)b;
                    j++;
                }
            }
        }
        if (d->nvmlDeviceGetName &&
            d->nvmlDeviceGetName(h, g->name, sizeof(g->name)) == NVML_SUCCESS)
            gd_api_scrub(g->name);
        /* What does not change while the GPU stays: read once per GPU, not every sample. */
        if (g->uuid[0] && strcmp(fixed[i].uuid, g->uuid) == 0) {
            g->sms = fixed[i].sms;
            g->cc_major = fixed[i].cc_major;
            g->cc_minor = fixed[i].cc_minor;
        } else {
            nvmlDeviceAttributes_t a;

            if (d->nvmlDeviceGetAttributes_v2 &&
                d->nvmlDeviceGetAttributes_v2(h, &a) == NVML_SUCCESS && a.multiprocessorCount < 4096)
                g->sms = (int)a.multiprocessorCount;
            if (d->nvmlDeviceGetCudaComputeCapability &&
                d->nvmlDeviceGetCudaComputeCapability(h, &g->cc_major, &g->cc_minor) !=
                    NVML_SUCCESS)
                g->cc_major = g->cc_minor = 0;
            /*
             * NVML's attributes name the SMs of MIG-capable GPUs in MIG mode only (an H100
             * without MIG answers 0): else its CUDA cores over the cores of one SM of the
             * architecture (64 on compute capability 7.x and 8.0, 128 on 8.6 and later).
             */
            if (g->sms == 0 && g->cc_major >= 7 && d->nvmlDeviceGetNumGpuCores &&
                d->nvmlDeviceGetNumGpuCores(h, &val) == NVML_SUCCESS) {
                unsigned per = g->cc_major == 7 || (g->cc_major == 8 && g->cc_minor == 0) ? 64
                                                                                         : 128;

                if (val % per == 0 && val / per > 0 && val / per < 4096)
                    g->sms = (int)(val / per);
            }
            snprintf(fixed[i].uuid, sizeof(fixed[i].uuid), "%s", g->uuid);
            fixed[i].sms = g->sms;
            fixed[i].cc_major = g->cc_major;
            fixed[i].cc_minor = g->cc_minor;
        }
        /*
         * The v2 figures, as nvidia-smi shows them: used without what the driver reserves for
         * itself (615 MiB on the H200), which the v1 call counts as used.
         */
        m2.version = nvmlMemory_v2;
        if (d->nvmlDeviceGetMemoryInfo_v2 &&
            d->nvmlDeviceGetMemoryInfo_v2(h, &m2) == NVML_SUCCESS) {
            g->mem_total = m2.total;
            g->mem_used = m2.used;
            g->mem_reserved = m2.reserved;
        } else if (d->nvmlDeviceGetMemoryInfo &&
                   d->nvmlDeviceGetMemoryInfo(h, &m) == NVML_SUCCESS) {
            g->mem_total = m.total;
            g->mem_used = m.used;
        }
        if (d->nvmlDeviceGetUtilizationRates &&
            d->nvmlDeviceGetUtilizationRates(h, &u) == NVML_SUCCESS)
            g->util = (int)u.gpu;
        if (d->nvmlDeviceGetPowerUsage && d->nvmlDeviceGetPowerUsage(h, &val) == NVML_SUCCESS)
            g->power_mw = val;
        if (d->nvmlDeviceGetClockInfo &&
            d->nvmlDeviceGetClockInfo(h, NVML_CLOCK_SM, &val) == NVML_SUCCESS)
            g->sm_clock = val;
        if (d->nvmlDeviceGetTemperature &&
            d->nvmlDeviceGetTemperature(h, NVML_TEMPERATURE_GPU, &val) == NVML_SUCCESS)
            g->temp_c = val;
        if (d->nvmlDeviceGetComputeRunningProcesses_v3 &&
            d->nvmlDeviceGetComputeRunningProcesses_v3(h, &cnt, info) == NVML_SUCCESS) {
            for (k = 0; k < cnt && k < GD_MAX_DEVPROCS; k++) {
                g->proc[k].pid = (pid_t)info[k].pid;
                g->proc[k].mem = info[k].usedGpuMemory == NVML_VALUE_NOT_AVAILABLE_ULL
                                     ? 0
                                     : info[k].usedGpuMemory;
                g->proc[k].sm_util = -1;
                g->proc[k].sm_util_mean = -1;
            }
            g->nproc = (int)k;
        }
        /* Per-process utilization over NVML's last second (the samples since one second ago). */
        if (g->nproc && d->nvmlDeviceGetProcessUtilization) {
            unsigned long long since = (unsigned long long)(gd_unix_ns() / 1000) - 1000000ULL;

            int nsamp[GD_MAX_DEVPROCS] = { 0 }, sum[GD_MAX_DEVPROCS] = { 0 };

            if (d->nvmlDeviceGetProcessUtilization(h, us, &ucnt, since) == NVML_SUCCESS)
                for (k = 0; k < ucnt && k < GD_MAX_DEVPROCS; k++)
                    for (j = 0; j < (unsigned)g->nproc; j++)
                        if (g->proc[j].pid == (pid_t)us[k].pid) {
                            if ((int)us[k].smUtil > g->proc[j].sm_util)
                                g->proc[j].sm_util = (int)us[k].smUtil;
                            sum[j] += (int)us[k].smUtil;
                            nsamp[j]++;
                        }
            for (j = 0; j < (unsigned)g->nproc; j++) {
                if (g->proc[j].sm_util < 0)
                    g->proc[j].sm_util = 0; /* listed, no sample in the last second: idle */
                g->proc[j].sm_util_mean = nsamp[j] ? sum[j] / nsamp[j] : 0;
            }
        }
    }
    return (int)n;
}

static void *sampler_main(void *arg)
{
    static struct gd_device v[GD_MAX_DEVICES];
    uint64_t next_sweep = 0;

    (void)arg;
    for (;;) {
        struct timespec ts;
        uint64_t now;
        int n = sample(v);

        pthread_mutex_lock(&gd.mu);
        memcpy(gd.dev, v, sizeof(v[0]) * (size_t)n);
        gd.ndev = n;
        gd.sampled_ns = gd_mono_ns();
        if (gd.node)
            __atomic_store_n(&gd.node->heartbeat_ns, gd.sampled_ns, __ATOMIC_RELEASE);
        pthread_mutex_unlock(&gd.mu);
        gd_guard_pass(v, n, gd_mono_ns());
        now = gd_mono_ns();
        if (now >= next_sweep) {
            gd_registry_sweep();
            if (gd_kube_enabled())
                gd_pods_retry();
            next_sweep = now + (uint64_t)gd_opt.sweep_ms * 1000000ULL;
            if (!__atomic_load_n(&gd.ready, __ATOMIC_ACQUIRE)) {
                int nt;

                __atomic_store_n(&gd.ready, 1, __ATOMIC_RELEASE);
                pthread_mutex_lock(&gd.mu);
                nt = gd.ntenant;
                pthread_mutex_unlock(&gd.mu);
                gd_log("ready: %d GPU%s, %d tenant%s", n, n == 1 ? "" : "s", nt,
                       nt == 1 ? "" : "s");
            }
        }
        pthread_mutex_lock(&stop_mu);
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += (gd_opt.sample_ms % 1000) * 1000000L;
        ts.tv_sec += gd_opt.sample_ms / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        while (!stopping && pthread_cond_timedwait(&stop_cond, &stop_mu, &ts) == 0)
            ;
        if (stopping) {
            pthread_mutex_unlock(&stop_mu);
            break;
        }
        pthread_mutex_unlock(&stop_mu);
    }
    return NULL;
}

/* The simulator's NVML: its driver version ends in "-sim", its GPUs' names are its own. */
static int is_simulator(const char *version)
{
    size_t n = strlen(version);
    char name[96] = "";
    nvmlDevice_t h;

    if (n > 4 && strcmp(version + n - 4, "-sim") == 0)
        return 1;
    return gd.drv.nvmlDeviceGetHandleByIndex_v2 && gd.drv.nvmlDeviceGetName &&
           gd.drv.nvmlDeviceGetHandleByIndex_v2(0, &h) == NVML_SUCCESS &&
           gd.drv.nvmlDeviceGetName(h, name, sizeof(name)) == NVML_SUCCESS &&
           strcmp(name, "gpuslice simulated GPU") == 0;
}

int gd_devices_start(char *err, size_t errlen)
{
    char sim[PATH_MAX], why[512] = "";

    if (!gd_opt.simulated &&
        load(gd_opt.nvml[0] ? gd_opt.nvml : "libnvidia-ml.so.1", why, sizeof(why)) == 0) {
        gd.simulated = 0;
    } else if (gd_opt.nvml[0] && !gd_opt.simulated) {
        snprintf(err, errlen, "--nvml %s: %s", gd_opt.nvml, why);
        return -1;
    } else {
        char why2[512];

        if (find_sim(sim, sizeof(sim)) < 0) {
            snprintf(err, errlen,
                     "no NVIDIA driver (%s), and the simulated GPU (lib/sim/libnvidia-ml.so.1 "
                     "beside the binary's directory) is not there either",
                     why[0] ? why : "--simulated");
            return -1;
        }
        if (load(sim, why2, sizeof(why2)) < 0) {
            snprintf(err, errlen, "the simulated GPU %s: %s", sim, why2);
            return -1;
        }
        gd.simulated = 1;
        gd_log("no NVIDIA driver here (%s): running on the simulated GPU (%s)",
               why[0] ? why : "--simulated", sim);
    }
    if (gd.drv.nvmlSystemGetDriverVersion)
        gd.drv.nvmlSystemGetDriverVersion(gd.driver_version, sizeof(gd.driver_version));
    /*
     * The simulated GPU found as the driver (README's LD_LIBRARY_PATH=build/lib/sim, or
     * --nvml): told by what the library says it is, not by how it was found.
     */
    if (!gd.simulated && is_simulator(gd.driver_version)) {
        gd.simulated = 1;
        gd_log("%s is the simulated GPU (driver %s): running on the simulated GPU",
               gd_opt.nvml[0] ? gd_opt.nvml : "libnvidia-ml.so.1", gd.driver_version);
    }
    /* The first sample before anything is served: /v1/devices is never empty while starting. */
    gd.ndev = sample(gd.dev);
    gd.sampled_ns = gd_mono_ns();
    return 0;
}

int gd_devices_run(char *err, size_t errlen)
{
    pthread_condattr_t ca;

    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_destroy(&stop_cond);
    pthread_cond_init(&stop_cond, &ca);
    pthread_condattr_destroy(&ca);
    if (pthread_create(&sampler, NULL, sampler_main, NULL) != 0) {
        snprintf(err, errlen, "cannot start the sampling thread");
        return -1;
    }
    sampler_started = 1;
    return 0;
}

void gd_devices_stop(void)
{
    if (!sampler_started)
        return;
    pthread_mutex_lock(&stop_mu);
    stopping = 1;
    pthread_cond_broadcast(&stop_cond);
    pthread_mutex_unlock(&stop_mu);
    pthread_join(sampler, NULL);
    sampler_started = 0;
    if (gd.drv.nvmlShutdown)
        gd.drv.nvmlShutdown();
}

const struct gd_device *gd_device_find(const char *key)
{
    char want[GS_UUID_STRLEN], have[GS_UUID_STRLEN];
    char *end;
    long idx;
    int i;

    if (key == NULL || *key == '\0')
        return NULL;
    idx = strtol(key, &end, 10);
    if (*end == '\0' && key[0] >= '0' && key[0] <= '9' && (key[0] != '0' || key[1] == '\0')) {
        for (i = 0; i < gd.ndev; i++)
            if (gd.dev[i].index == idx)
                return &gd.dev[i];
        return NULL;
    }
    if (!gs_parse_uuid(key, strlen(key), want))
        return NULL;
    for (i = 0; i < gd.ndev; i++)
        if (gs_parse_uuid(gd.dev[i].uuid, strlen(gd.dev[i].uuid), have) && strcmp(have, want) == 0)
            return &gd.dev[i];
    return NULL;
}
