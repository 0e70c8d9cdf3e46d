/*
 * The simulated GPU's shared state: the configuration read from the
 * environment, and the shared-memory file every process using the simulator
 * (driver and NVML alike) maps, with each device's timeline, its recent kernel
 * intervals and a record per process of the memory and contexts it holds.
 * Functions return 0 or a negative errno unless they say otherwise.
 */
#ifndef GPUSLICE_SIM_STATE_H
#define GPUSLICE_SIM_STATE_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SIM_MAX_DEVICES 16
#define SIM_MAX_PROCS 512
#define SIM_RING_LEN 4096
#define SIM_GRANULE ((uint64_t)2 << 20)

#define SIM_DEFAULT_DEVICES 1
#define SIM_DEFAULT_MEMORY ((uint64_t)16 << 30)
#define SIM_DEFAULT_SMS 132
#define SIM_DEFAULT_CONTEXT_BYTES ((uint64_t)64 << 20)
/* H200, driver 580: 64 processes' contexts took 5.8 MiB each more than NVML listed for them. */
#define SIM_DEFAULT_CONTEXT_HIDDEN ((uint64_t)6 << 20)
/*
 * H200, driver 580 (bench/context_memory.py): NVML lists a process from just after its cuInit
 * with 14 MiB; while its context is made the figure grows in steps (16 ... 32, 102, 104 MiB)
 * and reaches its context's 526 MiB as the context becomes current, while the device's own
 * use already holds more (with 64 processes making theirs at once, 27 GiB of the device's use
 * was in no process's figure).
 */
#define SIM_EARLY_LISTED ((uint64_t)14 << 20)
#define SIM_MAX_SMS 1024
#define SIM_MAX_BYTES ((uint64_t)1 << 50)

#define SIM_DEVICE_NAME "gpuslice simulated GPU"
#define SIM_CC_MAJOR 9
#define SIM_CC_MINOR 0
#define SIM_CUDA_DRIVER_VERSION 13000
#define SIM_NVML_DRIVER_VERSION "580.159.04-sim"

/* The utilisation window NVML reports over, in ns. */
#define SIM_UTIL_WINDOW_NS 1000000000ull

#define SIM_STATE_MAGIC 0x314d49534543494cull /* "LICESIM1", little-endian */
#define SIM_STATE_VERSION                                                                          \
    10u /* 4: users hold a shared lock on the file (sim_state_open); 5: 512 processes; 6: context_hidden; 7: idle_used, context_ms; 8: sm_free_ns; 9: periods; 10: the device's periods apart */

struct sim_config {
    uint32_t devices;
    uint32_t sms;
    uint64_t memory;        /* bytes per device */
    uint64_t context_bytes; /* footprint of each context */
    uint64_t
        context_hidden;  /* device memory each context takes that NVML's per-process figure omits */
    uint64_t idle_used;  /* in use on an idle device, no process's (H200: 615 MiB) */
    uint32_t context_ms; /* making a context takes this long (its memory taken at the start) */
    uint32_t exit_free_ms;  /* a dead process's memory returns this long after its death is seen */
    uint32_t kernel_gap_ns; /* the device's own gap before a kernel queued behind another */
    uint32_t green;         /* green contexts supported (GPUSLICE_SIM_GREEN, default 1) */
    uint32_t dev_shift_pct; /* device sample periods end this % of one before the processes' */
    uint32_t pitch_align;   /* cuMemAllocPitch pads rows to this (GPUSLICE_SIM_PITCH_ALIGN) */
    uint32_t sm_align;      /* SM resources' smCoscheduledAlignment; 0: their minSmPartitionSize */
    uint32_t nvml_attr_sms; /* NVML's attributes' SM count (..._NVML_ATTR_SMS) */
    uint32_t nvml_mem_unknown;   /* processes' usedGpuMemory not available (..._NVML_MEM_UNKNOWN) */
    uint32_t dev_samples_mono;   /* device samples on the monotonic clock, typed ULL */
    uint64_t module_bytes;       /* device memory each loaded module holds */
    uint32_t cc_major, cc_minor; /* compute capability (GPUSLICE_SIM_CC; not in the file) */
    char state_path[PATH_MAX];
};

/* One process that holds memory or contexts; pid 0 marks a free slot. */
struct sim_proc {
    int32_t pid;
    uint32_t pad0;
    uint64_t start_time;                /* /proc/PID/stat field 22: tells a reused PID apart */
    uint64_t held[SIM_MAX_DEVICES];     /* bytes reserved per device, contexts included */
    uint32_t contexts[SIM_MAX_DEVICES]; /* active contexts per device */
    uint64_t gone_ns;                   /* CLOCK_MONOTONIC when its death was first seen; 0 alive */
    uint64_t ctx_ready_ns[SIM_MAX_DEVICES]; /* CLOCK_MONOTONIC when its newest context is made */
};

/* A stretch of device time taken by kernels of one process, CLOCK_MONOTONIC ns. */
struct sim_interval {
    uint64_t start_ns;
    uint64_t end_ns;
    uint64_t end_rt_us; /* end_ns in CLOCK_REALTIME us, fixed once so NVML samples are stable */
    int32_t pid;
    uint32_t pad0;
};

/*
 * NVML's per-process samples: the driver samples each process's utilisation once per
 * period (about 1/6 s on the H100 and H200) and keeps the samples of the periods in which a
 * process ran, each the share of its period in which its kernels ran (bench/nvml_busy.py).
 */
#define SIM_SAMPLE_NS 166666667ull
#define SIM_PERIODS 24      /* periods kept: 4 s */
#define SIM_PERIOD_PROCS 32 /* processes counted per period */
/*
 * The device's utilisation samples (nvmlDeviceGetSamples) have periods of the same length
 * whose ends fall GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT percent of a period (0..99, read from
 * each process's environment: give all of a test's processes the same) before the processes'
 * periods' ends; 0, the default, lines them up. The driver samples the device on its own
 * schedule and no H100 run has told how the two line up.
 */
uint64_t sim_dev_sample_shift_ns(void);
#define SIM_DEV_SAMPLE_SHIFT_NS (sim_dev_sample_shift_ns())

struct sim_period_proc {
    int32_t pid;
    uint32_t pad0;
    uint64_t busy_ns;
    uint64_t covered_until_ns; /* its kernels' time is counted up to here (no overlap twice) */
};

struct sim_period {
    uint64_t key; /* start / SIM_SAMPLE_NS + 1; 0 = unused */
    struct sim_period_proc p[SIM_PERIOD_PROCS];
};

/* One of the device's sample periods: [key * P - P - SHIFT, key * P - SHIFT). */
struct sim_dev_period {
    uint64_t key;            /* (start + SHIFT) / SIM_SAMPLE_NS + 1; 0 = unused */
    uint64_t run_ns;         /* a kernel of any process ran (the device's utilisation) */
    uint64_t run_covered_ns; /* ... counted up to here */
};

struct sim_device {
    uint64_t busy_until_ns; /* end of the last kernel queued on the device */
    struct sim_period periods[SIM_PERIODS];
    struct sim_dev_period dev_periods[SIM_PERIODS];
    /* When each SM is free of the kernels queued so far (MPS clients' kernels share SMs). */
    uint64_t sm_free_ns[SIM_MAX_SMS];
    uint64_t ring_count; /* intervals ever written; the newest is ring[(count-1) % LEN] */
    struct sim_interval ring[SIM_RING_LEN];
};

struct sim_shared {
    uint64_t magic;
    uint32_t version;
    uint32_t size; /* sizeof(struct sim_shared), a second check on the layout */
    uint32_t devices;
    uint32_t sms;
    uint64_t memory;
    uint64_t context_bytes;
    union {
        pthread_mutex_t mutex; /* process-shared and robust */
        uint8_t pad[64];
    } lock;
    struct sim_proc procs[SIM_MAX_PROCS];
    struct sim_device dev[SIM_MAX_DEVICES];
    uint64_t context_hidden; /* per active context, in the device's use but no process's */
    uint64_t idle_used;      /* in the device's use with no process on it */
    uint32_t context_ms;     /* see struct sim_config */
    uint32_t pad0;
    int64_t rt_minus_mono_us; /* CLOCK_REALTIME - CLOCK_MONOTONIC when made: NVML's stamps */
    uint64_t nvml_list_calls; /* NVML's process lists asked for, by every process */
};

_Static_assert(sizeof(pthread_mutex_t) <= 64, "the mutex fits its slot");
_Static_assert(offsetof(struct sim_shared, lock) == 40, "header layout");
_Static_assert(sizeof(struct sim_proc) == 344, "process record layout");
_Static_assert(sizeof(struct sim_interval) == 32, "interval layout");
_Static_assert(offsetof(struct sim_shared, procs) == 104, "process table offset");

/* One process's view of the shared state. */
struct sim_state {
    struct sim_shared *sh; /* NULL until opened */
    int fd;                /* the file, kept open: its shared OFD lock says "in use" */
    int slot;              /* this process's record, -1 until it holds something */
    pid_t pid;             /* whose slot it is: a forked child must find its own */
    uint64_t start_time;
    uint32_t exit_free_ms;  /* from the config */
    uint32_t kernel_gap_ns; /* from the config (this process's launches) */
};

/*
 * Reads GPUSLICE_SIM_* into cfg. A bad value prints one message naming the
 * variable on stderr and returns -EINVAL.
 */
int sim_config_load(struct sim_config *cfg);
/* CUDA cores of one SM of compute capability major.minor: 64 on 7.x and 8.0, else 128. */
unsigned sim_cores_per_sm(unsigned major, unsigned minor);

/* Parses a size: decimal bytes, or with one K/M/G/T suffix (binary). */
int sim_parse_size(const char *s, uint64_t *out);

/*
 * Opens (creating and initialising once, under flock) and maps the state file
 * named by cfg, and holds a shared lock on it until sim_state_close. When an
 * initialised file's geometry (devices, SMs, memory, context footprint)
 * differs from cfg's, the environment wins if no other process has the file
 * open (it is initialised afresh); otherwise the file wins, cfg is updated
 * from it and one line on stderr says so. Errors print one message naming
 * GPUSLICE_SIM_STATE.
 */
int sim_state_open(struct sim_config *cfg, struct sim_state *st);
void sim_state_close(struct sim_state *st);

/* Locks the shared state and sweeps processes that died. */
void sim_state_lock(struct sim_state *st);
void sim_state_unlock(struct sim_state *st);
/*
 * For NVML's readers. A real NVML answers while a CUDA process is stopped (SIGSTOP: the
 * daemon's guard freezes one so), but the simulated driver's state is one lock, which such a
 * process may hold as it stops; waiting for it would hang the reader for as long as the stop
 * lasts (the daemon's guard, that would end the stop, among them). Locks as sim_state_lock
 * when the lock comes within SIM_READER_WAIT_MS and returns 1; else returns 0, and the reader
 * reads the state as it stands, unlocked (an update may be half-done: a figure off for one
 * sample). sim_state_unlock_reader takes what it returned.
 */
#define SIM_READER_WAIT_MS 100
int sim_state_lock_reader(struct sim_state *st);
void sim_state_unlock_reader(struct sim_state *st, int locked);

/* Under the lock: this process's record, claimed on first use; NULL if the table is full. */
struct sim_proc *sim_state_self(struct sim_state *st);
/* Under the lock: bytes reserved on dev by every process. */
uint64_t sim_state_used(const struct sim_shared *sh, int dev);

/* Reserves bytes on dev for this process; -ENOMEM when the device lacks them. */
int sim_state_charge(struct sim_state *st, int dev, uint64_t bytes);
void sim_state_uncharge(struct sim_state *st, int dev, uint64_t bytes);
/* Charges a context's footprint and counts it; -ENOMEM as above. */
int sim_state_context_add(struct sim_state *st, int dev);
void sim_state_context_remove(struct sim_state *st, int dev);
/* Gives back this process's record (at exit). */
void sim_state_release_self(struct sim_state *st);

/*
 * Queues a kernel on dev, not before not_before_ns, that takes dur_ns on the
 * whole device; sms is the SMs of its context (0 = the whole device). Returns
 * its end and stores its start in *start. Without MPS (mps 0) the device
 * time-slices whole contexts: kernels of all processes serialise, and one on
 * a partition takes dur_ns x device SMs / sms. An MPS client's kernel shares
 * the SMs with other MPS clients' kernels: on a partition it takes the sms
 * SMs that are free first, for the scaled time; on the whole device it starts
 * when an SM is free and takes those free then (dur_ns x device SMs / that
 * many), as the block scheduler spreads a grid over the SMs it finds free.
 */
uint64_t sim_state_launch(struct sim_state *st, int dev, uint64_t not_before_ns, uint64_t dur_ns,
                          unsigned sms, int mps, uint64_t *start);

/* Under the lock: busy ns of dev within [now - window, now]. */
uint64_t sim_state_busy(const struct sim_shared *sh, int dev, uint64_t now, uint64_t window);
/* One of NVML's per-process samples: pid ran pct % of the period that ended at end_ns. */
struct sim_sample {
    int32_t pid;
    unsigned pct;
    uint64_t end_ns; /* CLOCK_MONOTONIC */
};

/*
 * Under the lock: the device's utilisation samples (NVML_GPU_UTILIZATION_SAMPLES) of dev's
 * periods that ended by now, oldest first, pid 0; how many.
 */
int sim_state_device_samples(const struct sim_shared *sh, int dev, uint64_t now,
                             struct sim_sample *out, int max);

/* Under the lock: the samples of dev's periods that ended by now, oldest first; how many. */
int sim_state_samples(const struct sim_shared *sh, int dev, uint64_t now, struct sim_sample *out,
                      int max);

/* Reads a process's start time; -ESRCH if it is gone or a zombie. */
int sim_proc_start_time(pid_t pid, uint64_t *start);

/*
 * This process's PID as the driver names it: getpid(), or where GPUSLICE_SIM_HOST_PROC is
 * set (a process in a pod's PID namespace), its PID in the host's proc there.
 */
pid_t sim_self_pid(void);

/* Where processes are read: "/proc" or GPUSLICE_SIM_HOST_PROC. */
const char *sim_proc_root(void);

/*
 * The devices CUDA shows for CUDA_VISIBLE_DEVICES spec (NULL: all ndev), as
 * CUDA reads it: indices or "GPU-" UUIDs (whole, or a prefix that names one
 * GPU), in the order given; the first invalid entry (not a number, negative,
 * no such GPU, an ambiguous or unknown UUID, a MIG- entry) ends the list;
 * a GPU named twice leaves none. Fills out[] with physical indices and
 * returns how many.
 */
int sim_visible_devices(const char *spec, uint32_t ndev, int out[SIM_MAX_DEVICES]);

/* The fixed UUID of device index, as bytes and as NVML's "GPU-…" string (41 bytes). */
void sim_uuid_bytes(int index, unsigned char out[16]);
void sim_uuid_string(int index, char out[41]);

uint64_t sim_now_ns(void);
uint64_t sim_realtime_us(void);
/* Sleeps until CLOCK_MONOTONIC reaches t. */
void sim_sleep_until(uint64_t t);

/* ---- sim_memlimits.c: per-cgroup memory limits in the driver (r615 and later) ---- */

/* The simulated driver's version (GPUSLICE_SIM_DRIVER_VERSION, else 580.159.04-sim). */
const char *sim_driver_version(void);
int sim_driver_major(void);
/* The CUDA version it reports (GPUSLICE_SIM_CUDA_VERSION, else 13000); -EINVAL: a bad value. */
int sim_cuda_version(int *version);

/* Where the limits are kept: beside the state file at state_path. */
void sim_memlimit_init(const char *state_path);

/*
 * Sets GPU dev's limits for the cgroup v2 directory at sysfs path (soft 0 and hard ~0:
 * cleared). 0, or -EINVAL (not an absolute path), -ENOENT (no such cgroup), -EPERM (not
 * root), -ENOSPC, or another negative errno.
 */
int sim_memlimit_set(int dev, const char *path, unsigned long long soft, unsigned long long hard);

/* GPU dev's limits for the cgroup at path (none: soft 0, hard ~0); 0. */
int sim_memlimit_get(int dev, const char *path, unsigned long long *soft, unsigned long long *hard);

/*
 * Whether process self may take bytes more on GPU dev under its cgroup's limit (sh locked):
 * 0, or -ENOMEM. (Only a driver of r615 or later sets limits.)
 */
int sim_memlimit_check(const struct sim_shared *sh, pid_t self, int dev, uint64_t bytes);

#endif /* GPUSLICE_SIM_STATE_H */
