/*
 * The simulated libnvidia-ml.so.1: NVML answers read from the same shared
 * state file the simulated driver writes, so memory, processes and
 * utilisation agree with what every process using the driver did.
 *
 * Clocks: utilisation covers the last second of CLOCK_MONOTONIC (the device
 * timeline's clock); process samples carry timeStamp in microseconds of
 * CLOCK_REALTIME, as real NVML does: the end of the process's latest kernel
 * time in that second, converted once when the kernel was queued (so the same
 * sample keeps the same timeStamp), or now while that kernel still runs.
 */
#define _GNU_SOURCE
#include "common/nvml_api.h"
#include "sim_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#define SIM_EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st {
    unsigned index;
};

static struct {
    pthread_mutex_t lock;
    unsigned refs;
    struct sim_config cfg;
    struct sim_state st;
} nv = { .lock = PTHREAD_MUTEX_INITIALIZER };

static struct nvmlDevice_st devices[SIM_MAX_DEVICES] = { { 0 },  { 1 },  { 2 },  { 3 },
                                                         { 4 },  { 5 },  { 6 },  { 7 },
                                                         { 8 },  { 9 },  { 10 }, { 11 },
                                                         { 12 }, { 13 }, { 14 }, { 15 } };

static nvmlReturn_t init(void)
{
    nvmlReturn_t r = NVML_SUCCESS;

    pthread_mutex_lock(&nv.lock);
    if (nv.refs == 0) {
        /* A bad environment or state file leaves NVML uninitialised; the message says why. */
        if (sim_config_load(&nv.cfg) < 0 || sim_state_open(&nv.cfg, &nv.st) < 0)
            r = NVML_ERROR_DRIVER_NOT_LOADED;
    }
    if (r == NVML_SUCCESS)
        nv.refs++;
    pthread_mutex_unlock(&nv.lock);
    return r;
}

SIM_EXPORT nvmlReturn_t nvmlInit_v2(void)
{
    return init();
}

SIM_EXPORT nvmlReturn_t nvmlInit(void)
{
    return init();
}

SIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags)
{
    /* NVML_INIT_FLAG_NO_GPUS (1) and NVML_INIT_FLAG_NO_ATTACH (2) change nothing here. */
    if (flags & ~3u)
        return NVML_ERROR_INVALID_ARGUMENT;
    return init();
}

SIM_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    nvmlReturn_t r = NVML_SUCCESS;

    pthread_mutex_lock(&nv.lock);
    if (nv.refs == 0)
        r = NVML_ERROR_UNINITIALIZED;
    else if (--nv.refs == 0)
        sim_state_close(&nv.st);
    pthread_mutex_unlock(&nv.lock);
    return r;
}

SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t result)
{
    switch (result) {
    case NVML_SUCCESS:
        return "Success";
    case NVML_ERROR_UNINITIALIZED:
        return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT:
        return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED:
        return "Not Supported";
    case NVML_ERROR_NO_PERMISSION:
        return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED:
        return "Already Initialized";
    case NVML_ERROR_NOT_FOUND:
        return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT:
        return "Timeout";
    case NVML_ERROR_LIBRARY_NOT_FOUND:
        return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return "Function Not Found";
    case NVML_ERROR_GPU_IS_LOST:
        return "GPU is lost";
    case NVML_ERROR_OPERATING_SYSTEM:
        return "The operating system has blocked the request";
    case NVML_ERROR_MEMORY:
        return "Insufficient Memory";
    case NVML_ERROR_NO_DATA:
        return "No Data";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH:
        return "Argument version mismatch";
    case NVML_ERROR_UNKNOWN:
        return "Unknown Error";
    default:
        return "Unknown Error";
    }
}

static int ready(void)
{
    unsigned refs;

    pthread_mutex_lock(&nv.lock);
    refs = nv.refs;
    pthread_mutex_unlock(&nv.lock);
    return refs > 0;
}

/* NVML's answer for a string that must fit length bytes. */
static nvmlReturn_t copy_string(char *out, unsigned length, const char *s)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    return copy_string(version, length, sim_driver_version());
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *cudaDriverVersion)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!cudaDriverVersion)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (sim_cuda_version(cudaDriverVersion) < 0)
        return NVML_ERROR_UNKNOWN;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *deviceCount)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!deviceCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    *deviceCount = nv.cfg.devices;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *deviceCount)
{
    return nvmlDeviceGetCount_v2(deviceCount);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!device || index >= nv.cfg.devices)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device)
{
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device)
{
    char s[41];

    if (!ready())
        return NVML_ERROR_UNINITIALIZED;
    if (!uuid || !device)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < nv.cfg.devices; i++) {
        sim_uuid_string((int)i, s);
        if (strcasecmp(s, uuid) == 0) {
            *device = &devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/*
 * GPUSLICE_SIM_NVML_HANG=PATH: while the file PATH exists, every query of a device does not
 * return, as a driver whose GPU fell off the bus may hang its callers (the daemon's stop must
 * not wait for it).
 */
static void hang_while_asked(void)
{
    const char *path = getenv("GPUSLICE_SIM_NVML_HANG");
    struct timespec ms = { 0, 10 * 1000 * 1000 };

    while (path && *path && access(path, F_OK) == 0)
        nanosleep(&ms, NULL);
}

/* The index of a valid handle, or -1. */
static int device_index(nvmlDevice_t device)
{
    hang_while_asked();
    if (!ready())
        return -1;
    for (unsigned i = 0; i < nv.cfg.devices; i++)
        if (device == &devices[i])
            return (int)i;
    return -1;
}

#define DEVICE_OR_RETURN(device, idx)                                                              \
    do {                                                                                           \
        if (!ready())                                                                              \
            return NVML_ERROR_UNINITIALIZED;                                                       \
        if (((idx) = device_index(device)) < 0)                                                    \
            return NVML_ERROR_INVALID_ARGUMENT;                                                    \
    } while (0)

SIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!index)
        return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)i;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    return copy_string(name, length, SIM_DEVICE_NAME);
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length)
{
    char s[41];
    int i;

    DEVICE_OR_RETURN(device, i);
    sim_uuid_string(i, s);
    return copy_string(uuid, length, s);
}

/* The SMs' CUDA cores: 128 a SM on Hopper (16896 on the H100's 132), 64 on an A100 (6912 on 108). */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumGpuCores(nvmlDevice_t device, unsigned int *numCores)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!numCores)
        return NVML_ERROR_INVALID_ARGUMENT;
    *numCores = nv.cfg.sms * sim_cores_per_sm(nv.cfg.cc_major, nv.cfg.cc_minor);
    return NVML_SUCCESS;
}

/*
 * An H100's: its memory in MiB; one engine of each kind; and no multiprocessors, as the H100
 * without MIG mode answers (NVML names the SMs of a MIG-capable GPU in MIG mode only:
 * docs/results.md, issue 29). GPUSLICE_SIM_NVML_ATTR_SMS=N names N, as a GPU in MIG mode
 * names its instance's.
 */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device,
                                                   nvmlDeviceAttributes_t *attributes)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!attributes)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(attributes, 0, sizeof(*attributes));
    attributes->multiprocessorCount = nv.cfg.nvml_attr_sms;
    attributes->sharedCopyEngineCount = 1;
    attributes->sharedDecoderCount = 1;
    attributes->sharedEncoderCount = 1;
    attributes->sharedJpegCount = 1;
    attributes->sharedOfaCount = 1;
    attributes->gpuInstanceSliceCount = 1;
    attributes->computeInstanceSliceCount = 1;
    attributes->memorySizeMB = nv.cfg.memory >> 20;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major,
                                                           int *minor)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!major || !minor)
        return NVML_ERROR_INVALID_ARGUMENT;
    *major = (int)nv.cfg.cc_major;
    *minor = (int)nv.cfg.cc_minor;
    return NVML_SUCCESS;
}

static uint64_t device_used(int i)
{
    int locked;
    uint64_t used;

    locked = sim_state_lock_reader(&nv.st);
    used = sim_state_used(nv.st.sh, i);
    sim_state_unlock_reader(&nv.st, locked);
    return used < nv.cfg.memory ? used : nv.cfg.memory;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
    uint64_t used;
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    used = device_used(i);
    memory->total = nv.cfg.memory;
    memory->used = used;
    memory->free = nv.cfg.memory - used;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
    uint64_t used;
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!memory)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != nvmlMemory_v2)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    used = device_used(i);
    memory->total = nv.cfg.memory;
    /*
     * The device's own use (GPUSLICE_SIM_IDLE_USED) is "reserved" here, not "used": on the
     * H200 nvidia-smi's memory.used (this call's used) was 615 MiB below nvmlDeviceGetMemoryInfo's
     * at rest and under load alike (tests/gpu/daemon.py, docs/results.md).
     */
    memory->reserved = nv.cfg.idle_used < used ? nv.cfg.idle_used : used;
    memory->used = used - memory->reserved;
    memory->free = nv.cfg.memory - used;
    return NVML_SUCCESS;
}

static unsigned percent(uint64_t part, uint64_t whole)
{
    uint64_t p = (part * 100 + whole / 2) / whole;

    return p > 100 ? 100 : (unsigned)p;
}

/* gpu: the share of the last second the device timeline was busy; memory: not simulated, 0. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device,
                                                      nvmlUtilization_t *utilization)
{
    int locked;
    uint64_t busy;
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!utilization)
        return NVML_ERROR_INVALID_ARGUMENT;
    locked = sim_state_lock_reader(&nv.st);
    busy = sim_state_busy(nv.st.sh, i, sim_now_ns(), SIM_UTIL_WINDOW_NS);
    sim_state_unlock_reader(&nv.st, locked);
    utilization->gpu = percent(busy, SIM_UTIL_WINDOW_NS);
    utilization->memory = 0;
    return NVML_SUCCESS;
}

/* The device timeline's busy share of the last second, 0..100. */
static unsigned busy_percent(int i)
{
    int locked;
    uint64_t busy;

    locked = sim_state_lock_reader(&nv.st);
    busy = sim_state_busy(nv.st.sh, i, sim_now_ns(), SIM_UTIL_WINDOW_NS);
    sim_state_unlock_reader(&nv.st, locked);
    return percent(busy, SIM_UTIL_WINDOW_NS);
}

/*
 * Power, SM clock and temperature follow the device's busy share. The busy ends are the
 * H200's under a saturating GEMM (about 690 W at about 1410 MHz, power-limited; 1980 MHz
 * while partly idle: docs/results.md); the idle power (110 W) and the temperatures are a
 * model, not a measurement.
 */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *power)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!power)
        return NVML_ERROR_INVALID_ARGUMENT;
    *power = 110000u + busy_percent(i) * 5800u; /* milliwatts */
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t type,
                                               unsigned int *clock)
{
    unsigned u;
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!clock)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (type != NVML_CLOCK_SM && type != NVML_CLOCK_GRAPHICS) {
        if (type != NVML_CLOCK_MEM && type != NVML_CLOCK_VIDEO)
            return NVML_ERROR_INVALID_ARGUMENT;
        *clock = type == NVML_CLOCK_MEM ? 3201u : 1755u;
        return NVML_SUCCESS;
    }
    u = busy_percent(i);
    *clock = u <= 50 ? 1980u : 1980u - (u - 50) * 570u / 50u;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device,
                                                 nvmlTemperatureSensors_t sensorType,
                                                 unsigned int *temp)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!temp)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (sensorType != NVML_TEMPERATURE_GPU)
        return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 30u + busy_percent(i) * 35u / 100u;
    return NVML_SUCCESS;
}

/*
 * One sample per process that ran kernels in the last second. No samples:
 * NVML_ERROR_NOT_FOUND. No room: the count needed and NVML_ERROR_INSUFFICIENT_SIZE.
 */
static unsigned pid_offset(void);

/* A period's end as NVML stamps it: CLOCK_REALTIME us, fixed per period as the driver's are. */
static unsigned long long stamp_us(uint64_t end_ns)
{
    return (unsigned long long)((int64_t)(end_ns / 1000) + nv.st.sh->rt_minus_mono_us);
}

/*
 * The device's utilisation samples: one per sample period (SIM_SAMPLE_NS) that ended, the
 * share of it in which a kernel of any process ran, stamped with the period's end (CLOCK_REALTIME
 * us), newer than lastSeenTimeStamp, oldest first. Only NVML_GPU_UTILIZATION_SAMPLES.
 */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t type,
                                             unsigned long long lastSeenTimeStamp,
                                             nvmlValueType_t *sampleValType,
                                             unsigned int *sampleCount, nvmlSample_t *samples)
{
    int locked;
    struct sim_sample got[SIM_PERIODS];
    nvmlSample_t out[SIM_PERIODS];
    unsigned n = 0;
    int i, count;

    DEVICE_OR_RETURN(device, i);
    if (!sampleCount || !sampleValType)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (type != NVML_GPU_UTILIZATION_SAMPLES)
        return NVML_ERROR_NOT_SUPPORTED;
    locked = sim_state_lock_reader(&nv.st);
    count = sim_state_device_samples(nv.st.sh, i, sim_now_ns(), got, SIM_PERIODS);
    sim_state_unlock_reader(&nv.st, locked);
    /*
     * GPUSLICE_SIM_NVML_DEVICE_SAMPLES=monotonic: the device's samples stamped on the
     * monotonic clock (us) and typed unsigned long long, unlike the per-process ones (NVML
     * names neither the clock nor promises the type: the reader must take either).
     */
    int mono = (int)nv.cfg.dev_samples_mono;

    for (int k = 0; k < count; k++) {
        unsigned long long ts = mono ? got[k].end_ns / 1000 : stamp_us(got[k].end_ns);
        if (ts <= lastSeenTimeStamp)
            continue;
        memset(&out[n], 0, sizeof(out[n]));
        out[n].timeStamp = ts;
        if (mono)
            out[n].sampleValue.ullVal = got[k].pct;
        else
            out[n].sampleValue.uiVal = got[k].pct;
        n++;
    }
    *sampleValType = mono ? NVML_VALUE_TYPE_UNSIGNED_LONG_LONG : NVML_VALUE_TYPE_UNSIGNED_INT;
    if (n == 0) {
        *sampleCount = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    if (!samples) {
        *sampleCount = n;
        return NVML_SUCCESS;
    }
    if (*sampleCount < n)
        n = *sampleCount; /* as many as fit, the oldest */
    memcpy(samples, out, n * sizeof(out[0]));
    *sampleCount = n;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device,
                                                        nvmlProcessUtilizationSample_t *utilization,
                                                        unsigned int *processSamplesCount,
                                                        unsigned long long lastSeenTimeStamp)
{
    int locked;
    struct sim_sample got[SIM_PERIODS * SIM_PERIOD_PROCS];
    nvmlProcessUtilizationSample_t samples[SIM_PERIODS * SIM_PERIOD_PROCS];
    uint64_t now;
    unsigned n = 0;
    int i, count;

    DEVICE_OR_RETURN(device, i);
    if (!processSamplesCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    /*
     * GPUSLICE_SIM_NVML_SILENT=FILE: while FILE exists, no process has samples (as when the
     * driver stops reporting them, or a process moves out of NVML's sight).
     */
    {
        const char *silent = getenv("GPUSLICE_SIM_NVML_SILENT");

        if (silent && *silent && access(silent, F_OK) == 0) {
            *processSamplesCount = 0;
            return NVML_ERROR_NOT_FOUND;
        }
    }
    locked = sim_state_lock_reader(&nv.st);
    now = sim_now_ns();
    count = sim_state_samples(nv.st.sh, i, now, got, (int)(sizeof(got) / sizeof(got[0])));
    sim_state_unlock_reader(&nv.st, locked);
    /*
     * One sample per process and period in which it ran, stamped with the period's end in
     * CLOCK_REALTIME us, newer than lastSeenTimeStamp (bench/nvml_busy.py: what the H100's
     * NVML answers).
     */
    for (int k = 0; k < count; k++) {
        unsigned long long ts = stamp_us(got[k].end_ns);
        if (ts <= lastSeenTimeStamp)
            continue;
        memset(&samples[n], 0, sizeof(samples[n]));
        samples[n].pid = (unsigned)got[k].pid + pid_offset();
        samples[n].timeStamp = ts;
        samples[n].smUtil = got[k].pct;
        n++;
    }
    if (n == 0) {
        *processSamplesCount = 0;
        return NVML_ERROR_NOT_FOUND;
    }
    if (!utilization || *processSamplesCount < n) {
        *processSamplesCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    memcpy(utilization, samples, n * sizeof(samples[0]));
    *processSamplesCount = n;
    return NVML_SUCCESS;
}

struct proc_row {
    unsigned pid;
    unsigned long long used;
};

/*
 * GPUSLICE_SIM_NVML_PID_OFFSET=N: NVML reports every process's PID plus N, as
 * a caller inside a container's PID namespace sees a host NVML's PIDs: no
 * process finds itself in the list.
 */
static unsigned pid_offset(void)
{
    static int read;
    static unsigned off;

    if (!__atomic_load_n(&read, __ATOMIC_ACQUIRE)) {
        const char *v = getenv("GPUSLICE_SIM_NVML_PID_OFFSET");
        off = v ? (unsigned)strtoul(v, NULL, 10) : 0;
        __atomic_store_n(&read, 1, __ATOMIC_RELEASE);
    }
    return off;
}

/*
 * GPUSLICE_SIM_NVML_MEM_UNKNOWN=1: every listed process's usedGpuMemory is
 * NVML_VALUE_NOT_AVAILABLE, as NVML documents it answering where the driver does not
 * manage the memory itself (under WDDM, always): the process is listed, its memory not told.
 */
static int mem_unknown(void)
{
    return nv.cfg.nvml_mem_unknown != 0;
}

/*
 * Live processes with a context or memory on device i. While a process makes
 * a context (GPUSLICE_SIM_CONTEXT_MS), the device holds the context's memory
 * but the process's figure shows only SIM_EARLY_LISTED of it, as the H200's.
 */
static unsigned running_processes(int i, struct proc_row *rows)
{
    int locked;
    unsigned n = 0, off = pid_offset();
    uint64_t ctx = nv.st.sh->context_bytes, now = 0;
    uint64_t early = ctx < SIM_EARLY_LISTED ? ctx : SIM_EARLY_LISTED;
    struct timespec ts;

    if (nv.st.sh->context_ms) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    }

    locked = sim_state_lock_reader(&nv.st);
    nv.st.sh->nvml_list_calls++;
    for (int k = 0; k < SIM_MAX_PROCS; k++) {
        const struct sim_proc *p = &nv.st.sh->procs[k];
        if (p->pid != 0 && (p->contexts[i] > 0 || p->held[i] > 0)) {
            rows[n].pid = (unsigned)p->pid + off;
            rows[n].used = p->held[i];
            if (now && p->contexts[i] > 0 && now < p->ctx_ready_ns[i] && rows[n].used >= ctx)
                rows[n].used -= ctx - early;
            if (mem_unknown())
                rows[n].used = 0xFFFFFFFFFFFFFFFFull; /* NVML_VALUE_NOT_AVAILABLE */
            n++;
        }
    }
    sim_state_unlock_reader(&nv.st, locked);
    return n;
}

/*
 * Not NVML's: how many process lists (nvmlDeviceGetComputeRunningProcesses*) every process of
 * the simulated GPU has asked for, for tests of how often the interposer asks (each costs
 * milliseconds on a real driver).
 */
SIM_EXPORT unsigned long long gpuslice_sim_nvml_list_calls(void);
SIM_EXPORT unsigned long long gpuslice_sim_nvml_list_calls(void)
{
    int locked;
    unsigned long long n;

    if (!nv.st.sh)
        return 0; /* (NVML not initialised) */
    locked = sim_state_lock_reader(&nv.st);
    n = nv.st.sh->nvml_list_calls;
    sim_state_unlock_reader(&nv.st, locked);
    return n;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses(nvmlDevice_t device,
                                                             unsigned int *infoCount,
                                                             nvmlProcessInfo_v1_t *infos)
{
    struct proc_row rows[SIM_MAX_PROCS];
    unsigned n;
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = running_processes(i, rows);
    if (*infoCount < n || (n > 0 && !infos)) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned k = 0; k < n; k++) {
        infos[k].pid = rows[k].pid;
        infos[k].usedGpuMemory = rows[k].used;
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device,
                                                                unsigned int *infoCount,
                                                                nvmlProcessInfo_t *infos)
{
    struct proc_row rows[SIM_MAX_PROCS];
    unsigned n;
    int i;

    DEVICE_OR_RETURN(device, i);
    if (!infoCount)
        return NVML_ERROR_INVALID_ARGUMENT;
    n = running_processes(i, rows);
    if (*infoCount < n || (n > 0 && !infos)) {
        *infoCount = n;
        return NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned k = 0; k < n; k++) {
        infos[k].pid = rows[k].pid;
        infos[k].usedGpuMemory = rows[k].used;
        infos[k].gpuInstanceId = 0xFFFFFFFFu; /* no MIG: NVML_VALUE_NOT_AVAILABLE */
        infos[k].computeInstanceId = 0xFFFFFFFFu;
    }
    *infoCount = n;
    return NVML_SUCCESS;
}

/*
 * r615's per-cgroup memory limits (sim_memlimits.c). Before r615 the driver has no such call:
 * NVML_ERROR_FUNCTION_NOT_FOUND, as a caller that found the symbol in a newer library would
 * get from an older driver.
 */
struct sim_set_memory_limits {
    const char *nameSpace;
    unsigned long long softLimit;
    unsigned long long hardLimit;
};

struct sim_get_memory_limits {
    const char *nameSpace;
    unsigned long long softLimit;
    unsigned long long hardLimit;
    unsigned long long currentUsed;
};

nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device,
                                          struct sim_set_memory_limits *limits);
nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device,
                                          struct sim_get_memory_limits *limits);

SIM_EXPORT nvmlReturn_t nvmlDeviceSetMemoryLimits_v1(nvmlDevice_t device,
                                                     struct sim_set_memory_limits *limits)
{
    int i, r;

    DEVICE_OR_RETURN(device, i);
    if (sim_driver_major() < 615)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!limits || !limits->nameSpace || limits->softLimit > limits->hardLimit)
        return NVML_ERROR_INVALID_ARGUMENT;
    r = sim_memlimit_set(i, limits->nameSpace, limits->softLimit, limits->hardLimit);
    return r == 0         ? NVML_SUCCESS
           : r == -ENOENT ? NVML_ERROR_NOT_FOUND
           : r == -EPERM  ? NVML_ERROR_NO_PERMISSION
           : r == -EINVAL ? NVML_ERROR_INVALID_ARGUMENT
                          : NVML_ERROR_UNKNOWN;
}

SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryLimits_v1(nvmlDevice_t device,
                                                     struct sim_get_memory_limits *limits)
{
    int i;

    DEVICE_OR_RETURN(device, i);
    if (sim_driver_major() < 615)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    if (!limits || !limits->nameSpace)
        return NVML_ERROR_INVALID_ARGUMENT;
    sim_memlimit_get(i, limits->nameSpace, &limits->softLimit, &limits->hardLimit);
    limits->currentUsed = 0;
    return NVML_SUCCESS;
}
