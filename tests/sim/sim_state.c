/*
 * The simulated GPU's shared state (see sim_state.h): environment parsing, the
 * shared-memory file, the robust process-shared lock, the sweep that gives back
 * what dead processes held, and the device timelines. Compiled into both
 * libcuda.so.1 and libnvidia-ml.so.1 so they agree on one layout.
 */
#define _GNU_SOURCE
#include "sim_state.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

uint64_t sim_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t sim_realtime_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

void sim_sleep_until(uint64_t t)
{
    struct timespec ts = { .tv_sec = (time_t)(t / 1000000000ull),
                           .tv_nsec = (long)(t % 1000000000ull) };
    /* Absolute, so a signal that interrupts the sleep costs no accuracy. */
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* ---- configuration ---------------------------------------------------- */

int sim_parse_size(const char *s, uint64_t *out)
{
    uint64_t v = 0, mult = 1;
    const char *p = s;

    if (!s || !isdigit((unsigned char)*s))
        return -EINVAL;
    for (; isdigit((unsigned char)*p); p++) {
        unsigned d = (unsigned)(*p - '0');
        if (v > (UINT64_MAX - d) / 10)
            return -ERANGE;
        v = v * 10 + d;
    }
    switch (*p) {
    case '\0':
        break;
    case 'K':
    case 'k':
        mult = 1ull << 10;
        p++;
        break;
    case 'M':
    case 'm':
        mult = 1ull << 20;
        p++;
        break;
    case 'G':
    case 'g':
        mult = 1ull << 30;
        p++;
        break;
    case 'T':
    case 't':
        mult = 1ull << 40;
        p++;
        break;
    default:
        return -EINVAL;
    }
    if (*p != '\0')
        return -EINVAL;
    if (v > UINT64_MAX / mult)
        return -ERANGE;
    *out = v * mult;
    return 0;
}

/* Strict decimal in [lo, hi]. */
static int parse_uint(const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
    uint64_t v = 0;

    if (!isdigit((unsigned char)*s))
        return -EINVAL;
    for (; isdigit((unsigned char)*s); s++) {
        v = v * 10 + (uint64_t)(*s - '0');
        if (v > hi)
            return -ERANGE;
    }
    if (*s != '\0' || v < lo)
        return -EINVAL;
    *out = v;
    return 0;
}

/* The device's sample periods' shift (GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT), set by sim_config_load. */
static uint64_t dev_shift_ns = SIM_SAMPLE_NS * 40 / 100;
/* Where processes are read: /proc, or GPUSLICE_SIM_HOST_PROC (sim_config_load). */
static char proc_root[PATH_MAX] = "/proc";

/* The PID root/self names (the reader's in that proc's PID namespace), or 0. */
static pid_t self_in(const char *root)
{
    char path[PATH_MAX + 8], link[32];
    uint64_t n;
    ssize_t k;

    if ((size_t)snprintf(path, sizeof(path), "%s/self", root) >= sizeof(path) ||
        (k = readlink(path, link, sizeof(link) - 1)) <= 0)
        return 0;
    link[k] = '\0';
    return parse_uint(link, 1, 0x7fffffff, &n) == 0 ? (pid_t)n : 0;
}

unsigned sim_cores_per_sm(unsigned major, unsigned minor)
{
    /* Volta and Turing (7.x) and the A100 (8.0): 64; GA10x (8.6), Ada, Hopper, Blackwell: 128. */
    return major == 7 || (major == 8 && minor == 0) ? 64 : 128;
}

int sim_config_load(struct sim_config *cfg)
{
    const char *v;
    uint64_t n;

    memset(cfg, 0, sizeof(*cfg));
    cfg->devices = SIM_DEFAULT_DEVICES;
    cfg->sms = SIM_DEFAULT_SMS;
    cfg->memory = SIM_DEFAULT_MEMORY;
    cfg->context_bytes = SIM_DEFAULT_CONTEXT_BYTES;
    cfg->context_hidden = SIM_DEFAULT_CONTEXT_HIDDEN;
    cfg->dev_shift_pct = 40;
    cfg->pitch_align = 512;
    cfg->cc_major = SIM_CC_MAJOR;
    cfg->cc_minor = SIM_CC_MINOR;

    if ((v = getenv("GPUSLICE_SIM_DEVICES"))) {
        if (parse_uint(v, 1, SIM_MAX_DEVICES, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_DEVICES: \"%s\" is not a device count "
                    "(use 1 to %d)\n",
                    v, SIM_MAX_DEVICES);
            return -EINVAL;
        }
        cfg->devices = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_SMS"))) {
        if (parse_uint(v, 1, SIM_MAX_SMS, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_SMS: \"%s\" is not an SM count "
                    "(use 1 to %d)\n",
                    v, SIM_MAX_SMS);
            return -EINVAL;
        }
        cfg->sms = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_MEMORY"))) {
        if (sim_parse_size(v, &n) < 0 || n < SIM_GRANULE || n > SIM_MAX_BYTES) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_MEMORY: \"%s\" is not a memory size "
                    "from 2M to 1024T (use e.g. 16G, 512M, 17179869184)\n",
                    v);
            return -EINVAL;
        }
        cfg->memory = n;
    }
    if ((v = getenv("GPUSLICE_SIM_CONTEXT_BYTES"))) {
        if (sim_parse_size(v, &n) < 0 || n > SIM_MAX_BYTES) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_CONTEXT_BYTES: \"%s\" is not a size "
                    "(use e.g. 64M, 0, 67108864)\n",
                    v);
            return -EINVAL;
        }
        cfg->context_bytes = n;
    }
    if ((v = getenv("GPUSLICE_SIM_CONTEXT_HIDDEN"))) {
        if (sim_parse_size(v, &n) < 0 || n > SIM_MAX_BYTES) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_CONTEXT_HIDDEN: \"%s\" is not a size "
                    "(use e.g. 6M, 0, 6291456)\n",
                    v);
            return -EINVAL;
        }
        cfg->context_hidden = n;
    }
    if ((v = getenv("GPUSLICE_SIM_IDLE_USED"))) {
        if (sim_parse_size(v, &n) < 0 || n > SIM_MAX_BYTES) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_IDLE_USED: \"%s\" is not a size "
                    "(use e.g. 615M, 0, 644939776)\n",
                    v);
            return -EINVAL;
        }
        cfg->idle_used = n;
    }
    if ((v = getenv("GPUSLICE_SIM_CONTEXT_MS"))) {
        if (parse_uint(v, 0, 60000, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_CONTEXT_MS: \"%s\" is not a delay "
                    "(use 0 to 60000 milliseconds)\n",
                    v);
            return -EINVAL;
        }
        cfg->context_ms = (uint32_t)n;
    }
    cfg->green = 1;
    if ((v = getenv("GPUSLICE_SIM_GREEN"))) {
        if (parse_uint(v, 0, 1, &n) < 0) {
            fprintf(stderr, "gpuslice-sim: GPUSLICE_SIM_GREEN: \"%s\" is not 0 or 1\n", v);
            return -EINVAL;
        }
        cfg->green = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_EXIT_FREE_MS"))) {
        if (parse_uint(v, 0, 60000, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_EXIT_FREE_MS: \"%s\" is not a delay "
                    "(use 0 to 60000 milliseconds)\n",
                    v);
            return -EINVAL;
        }
        cfg->exit_free_ms = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_KERNEL_GAP_NS"))) {
        if (parse_uint(v, 0, 1000000, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_KERNEL_GAP_NS: \"%s\" is not a gap "
                    "(use 0 to 1000000 nanoseconds)\n",
                    v);
            return -EINVAL;
        }
        cfg->kernel_gap_ns = (uint32_t)n;
    }
    /* 40 unless set (0 lines them up): nothing measured says how a driver's line up. */
    if ((v = getenv("GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT"))) {
        if (parse_uint(v, 0, 99, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_DEV_SAMPLE_SHIFT_PCT: \"%s\" is not a share of a "
                    "period (use 0 to 99 percent)\n",
                    v);
            return -EINVAL;
        }
        cfg->dev_shift_pct = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_PITCH_ALIGN"))) {
        if (parse_uint(v, 512, 65536, &n) < 0 || (n & (n - 1)) != 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_PITCH_ALIGN: \"%s\" is not a row alignment "
                    "(use a power of two from 512 to 65536)\n",
                    v);
            return -EINVAL;
        }
        cfg->pitch_align = (uint32_t)n;
    }
    /* What the driver says of co-scheduling, apart from how it splits (never measured: below). */
    if ((v = getenv("GPUSLICE_SIM_SM_ALIGNMENT"))) {
        if (parse_uint(v, 1, SIM_MAX_SMS, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_SM_ALIGNMENT: \"%s\" is not an SM count "
                    "(use 1 to %d)\n",
                    v, SIM_MAX_SMS);
            return -EINVAL;
        }
        cfg->sm_align = (uint32_t)n;
    }
    /* NVML's view only: what its attributes name (0, as an H100 without MIG answers). */
    if ((v = getenv("GPUSLICE_SIM_NVML_ATTR_SMS"))) {
        if (parse_uint(v, 0, SIM_MAX_SMS, &n) < 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_NVML_ATTR_SMS: \"%s\" is not an SM count "
                    "(use 0 to %d)\n",
                    v, SIM_MAX_SMS);
            return -EINVAL;
        }
        cfg->nvml_attr_sms = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_NVML_MEM_UNKNOWN"))) {
        if (parse_uint(v, 0, 1, &n) < 0) {
            fprintf(stderr, "gpuslice-sim: GPUSLICE_SIM_NVML_MEM_UNKNOWN: \"%s\" is not 0 or 1\n",
                    v);
            return -EINVAL;
        }
        cfg->nvml_mem_unknown = (uint32_t)n;
    }
    if ((v = getenv("GPUSLICE_SIM_MODULE_BYTES"))) {
        if (sim_parse_size(v, &n) < 0 || n > SIM_MAX_BYTES) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_MODULE_BYTES: \"%s\" is not a size "
                    "(use e.g. 64M, 0, 67108864)\n",
                    v);
            return -EINVAL;
        }
        cfg->module_bytes = n;
    }
    if ((v = getenv("GPUSLICE_SIM_NVML_DEVICE_SAMPLES"))) {
        if (strcmp(v, "monotonic") != 0 && strcmp(v, "realtime") != 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_NVML_DEVICE_SAMPLES: \"%s\" is not a clock "
                    "(use realtime or monotonic)\n",
                    v);
            return -EINVAL;
        }
        cfg->dev_samples_mono = strcmp(v, "monotonic") == 0;
    }
    /*
     * GPUSLICE_SIM_CC=MAJOR.MINOR: another architecture's compute capability, 7.0 to 12.9 (the
     * architectures whose SMs NVML counts in CUDA cores: sim_cores_per_sm). Each process
     * reads its own; it is not part of the state file's geometry.
     */
    if ((v = getenv("GPUSLICE_SIM_CC"))) {
        size_t len = strlen(v), k;
        unsigned ma = 0;
        int ok = (len == 3 || len == 4) && v[len - 2] == '.' && isdigit((unsigned char)v[len - 1]);

        for (k = 0; ok && k + 2 < len; k++) {
            ok = isdigit((unsigned char)v[k]);
            ma = ma * 10 + (unsigned)(v[k] - '0');
        }
        if (!ok || ma < 7 || ma > 12) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_CC: \"%s\" is not a compute capability "
                    "(use MAJOR.MINOR from 7.0 to 12.9, e.g. 8.0 for an A100)\n",
                    v);
            return -EINVAL;
        }
        cfg->cc_major = ma;
        cfg->cc_minor = (unsigned)(v[len - 1] - '0');
    }
    dev_shift_ns = SIM_SAMPLE_NS * cfg->dev_shift_pct / 100;
    /*
     * GPUSLICE_SIM_HOST_PROC=DIR: the initial PID namespace's proc, mounted at DIR where this
     * process runs in a PID namespace of its own (a pod's). The driver names every process by
     * its PID there (NVML's PIDs are the host's), and so does the simulator then: its own is
     * DIR/self, and the processes it judges alive or dead are read there.
     */
    if ((v = getenv("GPUSLICE_SIM_HOST_PROC"))) {
        if (v[0] != '/' || strlen(v) >= sizeof(proc_root) || self_in(v) == 0) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_HOST_PROC: \"%s\" is not a proc file system "
                    "(use the absolute path where the host's /proc is mounted)\n",
                    v);
            return -EINVAL;
        }
        snprintf(proc_root, sizeof(proc_root), "%s", v);
    }
    if ((v = getenv("GPUSLICE_SIM_STATE"))) {
        if (v[0] == '\0' || strlen(v) >= sizeof(cfg->state_path)) {
            fprintf(stderr,
                    "gpuslice-sim: GPUSLICE_SIM_STATE: \"%s\" is not a usable path "
                    "(use e.g. /dev/shm/my-sim-state)\n",
                    v);
            return -EINVAL;
        }
        strcpy(cfg->state_path, v);
    } else {
        snprintf(cfg->state_path, sizeof(cfg->state_path), "/dev/shm/gpuslice-sim-%u",
                 (unsigned)getuid());
    }
    return 0;
}

/* ---- the file --------------------------------------------------------- */

static int init_shared(struct sim_shared *sh, const struct sim_config *cfg)
{
    pthread_mutexattr_t a;
    int r;

    memset(sh, 0, sizeof(*sh));
    sh->version = SIM_STATE_VERSION;
    sh->size = (uint32_t)sizeof(*sh);
    sh->devices = cfg->devices;
    sh->sms = cfg->sms;
    sh->memory = cfg->memory;
    sh->context_bytes = cfg->context_bytes;
    sh->context_hidden = cfg->context_hidden;
    sh->idle_used = cfg->idle_used;
    sh->context_ms = cfg->context_ms;
    sh->rt_minus_mono_us = (int64_t)sim_realtime_us() - (int64_t)(sim_now_ns() / 1000);
    if ((r = pthread_mutexattr_init(&a)) != 0)
        return -r;
    pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
    pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
    r = pthread_mutex_init(&sh->lock.mutex, &a);
    pthread_mutexattr_destroy(&a);
    if (r != 0)
        return -r;
    /* The magic goes last: a file with it is complete. */
    __atomic_store_n(&sh->magic, SIM_STATE_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

static int state_error(const char *path, const char *what, int err)
{
    fprintf(stderr, "gpuslice-sim: GPUSLICE_SIM_STATE: %s: %s%s%s\n", path, what, err ? ": " : "",
            err ? strerror(err) : "");
    return err ? -err : -EPROTO;
}

/*
 * Who has the file open: every user holds a shared open-file-description lock
 * on its first byte for as long as it maps the file (it goes with the process,
 * even on SIGKILL). Taking it exclusively succeeds only when nobody else holds
 * it; the caller then downgrades it to shared.
 */
static int use_lock(int fd, short type, int wait)
{
    struct flock fl = { .l_type = type, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1 };

    while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &fl) < 0) {
        if (errno != EINTR)
            return -errno;
    }
    return 0;
}

/* A size as the variables take it: 16G, 512M, 4K or bytes. */
static void format_size(uint64_t v, char *out, size_t len)
{
    static const char units[] = "TGMK";

    for (int i = 0; i < 4; i++) {
        uint64_t u = 1ull << (10 * (4 - i));
        if (v != 0 && v % u == 0) {
            snprintf(out, len, "%" PRIu64 "%c", v / u, units[i]);
            return;
        }
    }
    snprintf(out, len, "%" PRIu64, v);
}

/* The variable a geometry field comes from, as this process set it (or its default). */
static void describe_env(const char *var, char *out, size_t len)
{
    const char *v = getenv(var);

    if (v)
        snprintf(out, len, "%s=%s", var, v);
    else
        snprintf(out, len, "%s (unset)", var);
}

/*
 * The file is in use with another geometry than this process's environment
 * asks for: one line naming the variables, the file and what it holds. At
 * most once per library and process.
 */
static void warn_geometry(const struct sim_config *cfg, const struct sim_shared *sh)
{
    static int warned;
    char asked[512] = "", one[160], mem[32], ctx[32];
    size_t n = 0;
    int count = 0;

    if (warned)
        return;
    warned = 1;
#define SIM_DIFF(field, var)                                                                       \
    if (cfg->field != sh->field) {                                                                 \
        describe_env(var, one, sizeof(one));                                                       \
        n += (size_t)snprintf(asked + n, sizeof(asked) - n, "%s%s", count++ ? " and " : "", one);  \
        if (n >= sizeof(asked))                                                                    \
            n = sizeof(asked) - 1;                                                                 \
    }
    SIM_DIFF(devices, "GPUSLICE_SIM_DEVICES")
    SIM_DIFF(sms, "GPUSLICE_SIM_SMS")
    SIM_DIFF(memory, "GPUSLICE_SIM_MEMORY")
    SIM_DIFF(context_bytes, "GPUSLICE_SIM_CONTEXT_BYTES")
    SIM_DIFF(context_hidden, "GPUSLICE_SIM_CONTEXT_HIDDEN")
    SIM_DIFF(idle_used, "GPUSLICE_SIM_IDLE_USED")
    SIM_DIFF(context_ms, "GPUSLICE_SIM_CONTEXT_MS")
#undef SIM_DIFF
    format_size(sh->memory, mem, sizeof(mem));
    format_size(sh->context_bytes, ctx, sizeof(ctx));
    fprintf(stderr,
            "gpuslice-sim: GPUSLICE_SIM_STATE: %s holds %u device%s of %u SMs and %s, contexts "
            "of %s, and another process is using it, so it is used as it is, not as %s %s "
            "(to change it, end the processes using it or remove the file)\n",
            cfg->state_path, sh->devices, sh->devices == 1 ? "" : "s", sh->sms, mem, ctx, asked,
            count > 1 ? "ask" : "asks");
}

static int same_geometry(const struct sim_config *cfg, const struct sim_shared *sh)
{
    return cfg->devices == sh->devices && cfg->sms == sh->sms && cfg->memory == sh->memory &&
           cfg->context_bytes == sh->context_bytes && cfg->context_hidden == sh->context_hidden &&
           cfg->idle_used == sh->idle_used && cfg->context_ms == sh->context_ms;
}

int sim_state_open(struct sim_config *cfg, struct sim_state *st)
{
    const size_t len = sizeof(struct sim_shared);
    struct sim_shared *sh = MAP_FAILED;
    struct stat sb;
    int fd, r = 0;

    st->sh = NULL;
    st->fd = -1;
    st->slot = -1;
    st->exit_free_ms = cfg->exit_free_ms;
    st->kernel_gap_ns = cfg->kernel_gap_ns;
    st->pid = sim_self_pid();
    sim_memlimit_init(cfg->state_path);
    if (sim_proc_start_time(st->pid, &st->start_time) < 0)
        st->start_time = 0;

    fd = open(cfg->state_path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return state_error(cfg->state_path, "cannot open", errno);
    /* flock, not the mutex: the mutex lives in the file and may not exist yet. */
    while (flock(fd, LOCK_EX) < 0) {
        if (errno != EINTR) {
            r = state_error(cfg->state_path, "cannot lock", errno);
            goto out_close;
        }
    }
    if (fstat(fd, &sb) < 0) {
        r = state_error(cfg->state_path, "cannot stat", errno);
        goto out_unlock;
    }
    /*
     * The user's own device, or one root shares with every user (mode o+rw), as a real GPU
     * is shared: tests of several users' tenants on one device make it so.
     */
    if (!S_ISREG(sb.st_mode) ||
        (sb.st_uid != geteuid() && !(sb.st_uid == 0 && (sb.st_mode & 0006) == 0006))) {
        r = state_error(cfg->state_path,
                        "not a regular file owned by this user (nor one root shares: o+rw)", 0);
        goto out_unlock;
    }
    if (sb.st_size != 0 && (size_t)sb.st_size != len) {
        r = state_error(cfg->state_path,
                        "written by another version of the simulator "
                        "(size differs); remove it",
                        0);
        goto out_unlock;
    }
    if (sb.st_size == 0 && ftruncate(fd, (off_t)len) < 0) {
        r = state_error(cfg->state_path, "cannot size", errno);
        goto out_unlock;
    }
    sh = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (sh == MAP_FAILED) {
        r = state_error(cfg->state_path, "cannot map", errno);
        goto out_unlock;
    }
    if (__atomic_load_n(&sh->magic, __ATOMIC_ACQUIRE) == SIM_STATE_MAGIC &&
        (sh->version != SIM_STATE_VERSION || sh->size != len || sh->devices < 1 ||
         sh->devices > SIM_MAX_DEVICES)) {
        r = state_error(cfg->state_path,
                        "written by another version of the simulator; "
                        "remove it",
                        0);
        goto out_unlock;
    }
    /*
     * A file nobody else has open (its users died or exited) is started afresh
     * when this environment asks for another geometry; one in use keeps its own.
     */
    if (__atomic_load_n(&sh->magic, __ATOMIC_ACQUIRE) != SIM_STATE_MAGIC ||
        (!same_geometry(cfg, sh) && use_lock(fd, F_WRLCK, 0) == 0)) {
        if ((r = init_shared(sh, cfg)) < 0) {
            state_error(cfg->state_path, "cannot initialise the lock", -r);
            goto out_unlock;
        }
    } else if (!same_geometry(cfg, sh)) {
        warn_geometry(cfg, sh);
    }
    if ((r = use_lock(fd, F_RDLCK, 1)) < 0) {
        state_error(cfg->state_path, "cannot take a shared lock", -r);
        goto out_unlock;
    }
    cfg->devices = sh->devices;
    cfg->sms = sh->sms;
    cfg->memory = sh->memory;
    cfg->context_bytes = sh->context_bytes;
    cfg->context_hidden = sh->context_hidden;
    cfg->idle_used = sh->idle_used;
    cfg->context_ms = sh->context_ms;
    st->sh = sh;
    st->fd = fd;
    flock(fd, LOCK_UN);
    return 0;
out_unlock:
    if (sh != MAP_FAILED)
        munmap(sh, len);
    flock(fd, LOCK_UN);
out_close:
    close(fd);
    return r;
}

/* The mapping and the descriptor go together: a state never opened (all zeros) closes nothing. */
void sim_state_close(struct sim_state *st)
{
    if (!st || !st->sh)
        return;
    munmap(st->sh, sizeof(*st->sh));
    st->sh = NULL;
    close(st->fd); /* and with it this process's shared lock */
    st->fd = -1;
}

/* ---- processes -------------------------------------------------------- */

const char *sim_proc_root(void)
{
    return proc_root;
}

pid_t sim_self_pid(void)
{
    /* (getpid() << 32 | the PID the driver knows it by), taken afresh after a fork. */
    static uint64_t cached;
    uint64_t c = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    pid_t me = getpid(), host = me;

    if (c >> 32 == (uint64_t)(uint32_t)me)
        return (pid_t)(uint32_t)c;
    if (strcmp(proc_root, "/proc") != 0 && (host = self_in(proc_root)) == 0)
        host = me;
    __atomic_store_n(&cached, (uint64_t)(uint32_t)me << 32 | (uint32_t)host, __ATOMIC_RELAXED);
    return host;
}

int sim_proc_start_time(pid_t pid, uint64_t *start)
{
    char path[PATH_MAX + 32], buf[1024], *p, *save = NULL, *tok;
    ssize_t n;
    int fd, field;

    snprintf(path, sizeof(path), "%s/%d/stat", proc_root, (int)pid);
    fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : -errno;
    n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (n <= 0)
        return -ESRCH;
    buf[n] = '\0';
    /* The command name may hold spaces and parentheses: fields resume after the last ')'. */
    p = strrchr(buf, ')');
    if (!p)
        return -EIO;
    p++;
    for (field = 3, tok = strtok_r(p, " ", &save); tok; tok = strtok_r(NULL, " ", &save), field++) {
        /* A zombie has let go of its GPU memory, as with the real driver. */
        if (field == 3 && (tok[0] == 'Z' || tok[0] == 'X'))
            return -ESRCH;
        if (field == 22) {
            *start = strtoull(tok, NULL, 10);
            return 0;
        }
    }
    return -EIO;
}

static int proc_is_self(const struct sim_state *st, const struct sim_proc *p)
{
    return p->pid == (int32_t)st->pid && p->start_time == st->start_time;
}

/*
 * Frees the records of processes that are gone; their memory returns to the
 * device, GPUSLICE_SIM_EXIT_FREE_MS after their death is first seen (a real
 * driver tears a dead process's contexts down a while after it ends). PIDs
 * are those of this process's namespace: processes sharing one state file
 * must share it too, or name themselves by the host's PIDs
 * (GPUSLICE_SIM_HOST_PROC in another namespace). Without a readable /proc
 * (our own start time unknown) nobody is declared dead.
 */
static void sweep(struct sim_state *st)
{
    struct sim_shared *sh = st->sh;
    struct timespec ts;
    uint64_t now;

    if (st->start_time == 0)
        return;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    now = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;

    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        struct sim_proc *p = &sh->procs[i];
        uint64_t start;
        int r;

        if (p->pid == 0 || proc_is_self(st, p))
            continue;
        r = sim_proc_start_time(p->pid, &start);
        /* Only a sure death frees a record; a /proc we may not read means alive. */
        if (r == -ESRCH || (r == 0 && start != p->start_time)) {
            if (p->gone_ns == 0)
                p->gone_ns = now;
            if (now - p->gone_ns >= (uint64_t)st->exit_free_ms * 1000000ull)
                memset(p, 0, sizeof(*p));
        }
    }
}

static void refresh_identity(struct sim_state *st)
{
    pid_t pid = sim_self_pid();

    if (pid != st->pid) { /* a forked child: it holds nothing yet */
        st->pid = pid;
        st->slot = -1;
        if (sim_proc_start_time(pid, &st->start_time) < 0)
            st->start_time = 0;
    }
}

void sim_state_lock(struct sim_state *st)
{
    int r = pthread_mutex_lock(&st->sh->lock.mutex);

    /* The holder died mid-update: the counters stay as it left them. */
    if (r == EOWNERDEAD)
        pthread_mutex_consistent(&st->sh->lock.mutex);
    refresh_identity(st);
    sweep(st);
}

void sim_state_unlock(struct sim_state *st)
{
    pthread_mutex_unlock(&st->sh->lock.mutex);
}

int sim_state_lock_reader(struct sim_state *st)
{
    struct timespec ts;
    int r;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += (long)SIM_READER_WAIT_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec += ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
    }
    r = pthread_mutex_timedlock(&st->sh->lock.mutex, &ts);
    if (r == EOWNERDEAD) {
        pthread_mutex_consistent(&st->sh->lock.mutex);
        r = 0;
    }
    if (r != 0)
        return 0; /* held past the wait (its holder stopped): read as it stands */
    refresh_identity(st);
    sweep(st);
    return 1;
}

void sim_state_unlock_reader(struct sim_state *st, int locked)
{
    if (locked)
        sim_state_unlock(st);
}

struct sim_proc *sim_state_self(struct sim_state *st)
{
    struct sim_shared *sh = st->sh;
    int free_slot = -1;

    if (st->slot >= 0 && proc_is_self(st, &sh->procs[st->slot]))
        return &sh->procs[st->slot];
    for (int i = 0; i < SIM_MAX_PROCS; i++) {
        if (proc_is_self(st, &sh->procs[i])) {
            st->slot = i;
            return &sh->procs[i];
        }
        if (sh->procs[i].pid == 0 && free_slot < 0)
            free_slot = i;
    }
    if (free_slot < 0)
        return NULL;
    memset(&sh->procs[free_slot], 0, sizeof(sh->procs[free_slot]));
    sh->procs[free_slot].pid = (int32_t)st->pid;
    sh->procs[free_slot].start_time = st->start_time;
    st->slot = free_slot;
    return &sh->procs[free_slot];
}

uint64_t sim_state_used(const struct sim_shared *sh, int dev)
{
    uint64_t used = sh->idle_used;

    for (int i = 0; i < SIM_MAX_PROCS; i++)
        if (sh->procs[i].pid != 0)
            used +=
                sh->procs[i].held[dev] + (uint64_t)sh->procs[i].contexts[dev] * sh->context_hidden;
    return used;
}

static int charge_locked(struct sim_state *st, int dev, uint64_t bytes)
{
    struct sim_proc *me = sim_state_self(st);
    uint64_t used = sim_state_used(st->sh, dev);

    if (!me)
        return -ENOMEM;
    if (used > st->sh->memory || bytes > st->sh->memory - used)
        return -ENOMEM;
    if (sim_memlimit_check(st->sh, st->pid, dev, bytes) < 0)
        return -ENOMEM; /* its cgroup's limit in the driver (r615+) */
    me->held[dev] += bytes;
    return 0;
}

int sim_state_charge(struct sim_state *st, int dev, uint64_t bytes)
{
    int r;

    sim_state_lock(st);
    r = charge_locked(st, dev, bytes);
    sim_state_unlock(st);
    return r;
}

void sim_state_uncharge(struct sim_state *st, int dev, uint64_t bytes)
{
    struct sim_proc *me;

    if (bytes == 0)
        return;
    sim_state_lock(st);
    if ((me = sim_state_self(st)))
        me->held[dev] = me->held[dev] >= bytes ? me->held[dev] - bytes : 0;
    sim_state_unlock(st);
}

int sim_state_context_add(struct sim_state *st, int dev)
{
    uint32_t ms = st->sh->context_ms;
    int r;

    sim_state_lock(st);
    r = charge_locked(st, dev, st->sh->context_bytes);
    if (r == 0) {
        struct sim_proc *me = sim_state_self(st);
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        me->contexts[dev]++;
        me->ctx_ready_ns[dev] =
            (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec + (uint64_t)ms * 1000000ull;
    }
    sim_state_unlock(st);
    if (r == 0 && ms) {
        struct timespec d = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000L };

        while (nanosleep(&d, &d) < 0 && errno == EINTR)
            ;
    }
    return r;
}

void sim_state_context_remove(struct sim_state *st, int dev)
{
    struct sim_proc *me;

    sim_state_lock(st);
    if ((me = sim_state_self(st))) {
        uint64_t b = st->sh->context_bytes;
        me->held[dev] = me->held[dev] >= b ? me->held[dev] - b : 0;
        if (me->contexts[dev] > 0)
            me->contexts[dev]--;
    }
    sim_state_unlock(st);
}

void sim_state_release_self(struct sim_state *st)
{
    if (!st->sh)
        return;
    sim_state_lock(st);
    if (st->slot >= 0 && proc_is_self(st, &st->sh->procs[st->slot]))
        memset(&st->sh->procs[st->slot], 0, sizeof(st->sh->procs[st->slot]));
    st->slot = -1;
    sim_state_unlock(st);
}

/* ---- timeline --------------------------------------------------------- */

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The period slot of time t on d, made afresh when it held an older period. */
static struct sim_period *period_at(struct sim_device *d, uint64_t t)
{
    uint64_t key = t / SIM_SAMPLE_NS + 1;
    struct sim_period *p = &d->periods[key % SIM_PERIODS];

    if (p->key != key) {
        memset(p, 0, sizeof(*p));
        p->key = key;
    }
    return p;
}

/* One sample: pid busy b ns of the period key (its share, rounded, at most 100 %). */
static void set_sample(struct sim_sample *x, int32_t pid, uint64_t b, uint64_t key)
{
    x->pid = pid;
    x->pct = (unsigned)((b * 100 + SIM_SAMPLE_NS / 2) / SIM_SAMPLE_NS);
    if (x->pct > 100)
        x->pct = 100;
    x->end_ns = key * SIM_SAMPLE_NS;
}

uint64_t sim_dev_sample_shift_ns(void)
{
    return dev_shift_ns;
}

/* The device's period slot of time t on d, made afresh when it held an older period. */
static struct sim_dev_period *dev_period_at(struct sim_device *d, uint64_t t)
{
    uint64_t key = (t + SIM_DEV_SAMPLE_SHIFT_NS) / SIM_SAMPLE_NS + 1;
    struct sim_dev_period *p = &d->dev_periods[key % SIM_PERIODS];

    if (p->key != key) {
        memset(p, 0, sizeof(*p));
        p->key = key;
    }
    return p;
}

/* Counts [s, e), a kernel running, into the device's utilisation of the periods it is in. */
static void count_running(struct sim_device *d, uint64_t s, uint64_t e)
{
    while (s < e) {
        struct sim_dev_period *p = dev_period_at(d, s);
        uint64_t end = p->key * SIM_SAMPLE_NS - SIM_DEV_SAMPLE_SHIFT_NS;
        uint64_t upto = e < end ? e : end, from = s;

        if (p->run_covered_ns > from)
            from = p->run_covered_ns; /* MPS clients' kernels overlap: the device ran once */
        if (upto > from)
            p->run_ns += upto - from;
        if (upto > p->run_covered_ns)
            p->run_covered_ns = upto;
        s = upto;
    }
}

int sim_state_device_samples(const struct sim_shared *sh, int dev, uint64_t now,
                             struct sim_sample *out, int max)
{
    const struct sim_device *d = &sh->dev[dev];
    uint64_t cur = (now + SIM_DEV_SAMPLE_SHIFT_NS) / SIM_SAMPLE_NS + 1, key;
    int n = 0;

    /* Every period that ended, idle ones too (the driver samples the device all the time). */
    for (key = cur > SIM_PERIODS ? cur - SIM_PERIODS + 1 : 1; key < cur && n < max; key++) {
        const struct sim_dev_period *p = &d->dev_periods[key % SIM_PERIODS];
        uint64_t b = p->key == key ? p->run_ns : 0;

        set_sample(&out[n], 0, b, key);
        out[n++].end_ns = key * SIM_SAMPLE_NS - SIM_DEV_SAMPLE_SHIFT_NS;
    }
    return n;
}

/* Counts [s, e), this process's work on the device, into the periods it falls in. */
static void count_periods(struct sim_device *d, uint64_t s, uint64_t e)
{
    int32_t pid = (int32_t)sim_self_pid();

    while (s < e) {
        struct sim_period *p = period_at(d, s);
        uint64_t end = p->key * SIM_SAMPLE_NS, upto = e < end ? e : end, from = s;
        int k;

        for (k = 0; k < SIM_PERIOD_PROCS && p->p[k].pid && p->p[k].pid != pid; k++)
            ;
        if (k < SIM_PERIOD_PROCS) {
            p->p[k].pid = pid;
            if (p->p[k].covered_until_ns > from)
                from = p->p[k].covered_until_ns;
            if (upto > from)
                p->p[k].busy_ns += upto - from;
            if (upto > p->p[k].covered_until_ns)
                p->p[k].covered_until_ns = upto;
        }
        s = upto;
    }
}

int sim_state_samples(const struct sim_shared *sh, int dev, uint64_t now, struct sim_sample *out,
                      int max)
{
    const struct sim_device *d = &sh->dev[dev];
    uint64_t cur = now / SIM_SAMPLE_NS + 1, key;
    int n = 0, k;

    /* The periods that ended, oldest first (those still in the ring). */
    for (key = cur > SIM_PERIODS ? cur - SIM_PERIODS + 1 : 1; key < cur; key++) {
        const struct sim_period *p = &d->periods[key % SIM_PERIODS];

        if (p->key != key)
            continue; /* nothing ran then */
        for (k = 0; k < SIM_PERIOD_PROCS && p->p[k].pid; k++) {
            uint64_t b = p->p[k].busy_ns;

            if (b == 0 || n == max)
                continue;
            set_sample(&out[n++], p->p[k].pid, b, key);
        }
    }
    return n;
}

uint64_t sim_state_launch(struct sim_state *st, int dev, uint64_t not_before_ns, uint64_t dur_ns,
                          unsigned sms, int mps, uint64_t *start)
{
    struct sim_device *d = &st->sh->dev[dev];
    unsigned total = st->sh->sms, i, k;
    uint64_t now, s, e;
    int r = pthread_mutex_lock(&st->sh->lock.mutex);

    /* No sweep here: launches are the hot path and touch no process records. */
    if (r == EOWNERDEAD)
        pthread_mutex_consistent(&st->sh->lock.mutex);
    if (total > SIM_MAX_SMS)
        total = SIM_MAX_SMS;
    if (sms == 0 || sms > total)
        sms = total;
    s = now = sim_now_ns();
    if (not_before_ns > s)
        s = not_before_ns;
    if (!mps) {
        /*
         * Time-sliced: after everything queued, on every SM. A kernel queued behind another
         * starts a gap later (GPUSLICE_SIM_KERNEL_GAP_NS): the device's own time between
         * back-to-back kernels, in which the process has work on the device but no kernel
         * runs (NVML's per-process figure counts it, the device's utilisation does not).
         */
        if (d->busy_until_ns > s)
            s = d->busy_until_ns;
        for (i = 0; i < total; i++)
            if (d->sm_free_ns[i] > s)
                s = d->sm_free_ns[i];
        if (s > now)
            s += st->kernel_gap_ns;
        e = s + dur_ns * total / sms;
        for (i = 0; i < total; i++)
            d->sm_free_ns[i] = e;
    } else {
        uint64_t sorted[SIM_MAX_SMS];

        memcpy(sorted, d->sm_free_ns, total * sizeof(sorted[0]));
        qsort(sorted, total, sizeof(sorted[0]), cmp_u64);
        if (sms < total) {
            /* Its partition's SMs: the sms that are free first. */
            if (sorted[sms - 1] > s)
                s = sorted[sms - 1];
            k = sms;
        } else {
            /* The whole device: from the first free SM, on all free by then. */
            if (sorted[0] > s)
                s = sorted[0];
            for (k = 0; k < total && sorted[k] <= s; k++)
                ;
        }
        e = s + dur_ns * total / k;
        /* Give it the k SMs free earliest (ties: the lowest numbers). */
        {
            uint64_t thr = sms < total ? sorted[sms - 1] : s;
            unsigned want = k;

            for (i = 0; i < total && want > 0; i++)
                if (d->sm_free_ns[i] < thr) {
                    d->sm_free_ns[i] = e;
                    want--;
                }
            for (i = 0; i < total && want > 0; i++)
                if (d->sm_free_ns[i] == thr) {
                    d->sm_free_ns[i] = e;
                    want--;
                }
        }
    }
    if (dur_ns > 0) {
        struct sim_interval *last =
            d->ring_count ? &d->ring[(d->ring_count - 1) % SIM_RING_LEN] : NULL;
        if (e > d->busy_until_ns)
            d->busy_until_ns = e;
        /* Back-to-back kernels of one process make one interval: the ring lasts longer. */
        if (!last || last->pid != (int32_t)sim_self_pid() || last->end_ns != s) {
            last = &d->ring[d->ring_count % SIM_RING_LEN];
            last->start_ns = s;
            last->pid = (int32_t)sim_self_pid();
            d->ring_count++;
        }
        last->end_ns = e;
        last->end_rt_us = sim_realtime_us() + (e - now) / 1000;
        /*
         * NVML's per-process figure counts a process's work from when it is ready to run, time
         * sliced out behind another process's included: two saturating GEMM processes on the
         * H200 read 99 % each (docs/results.md).
         */
        count_periods(d, not_before_ns > now ? not_before_ns : now, e);
        count_running(d, s, e);
    }
    pthread_mutex_unlock(&st->sh->lock.mutex);
    *start = s;
    return e;
}

/* The part of [a, b) inside [lo, hi). */
static uint64_t overlap(uint64_t a, uint64_t b, uint64_t lo, uint64_t hi)
{
    if (a < lo)
        a = lo;
    if (b > hi)
        b = hi;
    return b > a ? b - a : 0;
}

uint64_t sim_state_busy(const struct sim_shared *sh, int dev, uint64_t now, uint64_t window)
{
    const struct sim_device *d = &sh->dev[dev];
    uint64_t lo = now > window ? now - window : 0, busy = 0;
    uint64_t n = d->ring_count < SIM_RING_LEN ? d->ring_count : SIM_RING_LEN;

    for (uint64_t i = 0; i < n; i++) {
        const struct sim_interval *in = &d->ring[(d->ring_count - 1 - i) % SIM_RING_LEN];
        if (in->end_ns <= lo)
            break; /* older ones lie wholly before the window: intervals are ordered */
        busy += overlap(in->start_ns, in->end_ns, lo, now);
    }
    /* MPS clients' kernels overlap: the device was busy at most all of the window. */
    return busy < now - lo ? busy : now - lo;
}

/* ---- identity --------------------------------------------------------- */

/*
 * One entry of CUDA_VISIBLE_DEVICES, [start, end): the physical index it
 * names, or -1 if it is invalid. Numbers are read like strtoul (blanks
 * around them, a sign, and anything after the digits are ignored: "1gpu" is
 * 1), as CUDA does and PyTorch's _parse_visible_devices copies.
 */
static int visible_entry(const char *start, const char *end, int uuids, uint32_t ndev)
{
    if (uuids) {
        size_t len = (size_t)(end - start);
        int found = -1;

        if (len < 4 || strncmp(start, "GPU-", 4) != 0)
            return -1;
        for (uint32_t i = 0; i < ndev; i++) {
            char u[41];
            sim_uuid_string((int)i, u);
            if (len <= strlen(u) && strncmp(u, start, len) == 0) {
                if (found >= 0)
                    return -1; /* ambiguous */
                found = (int)i;
            }
        }
        return found;
    } else {
        const char *p = start;
        uint64_t v = 0;
        int neg = 0, digits = 0;

        while (p < end && isspace((unsigned char)*p))
            p++;
        if (p < end && (*p == '+' || *p == '-'))
            neg = *p++ == '-';
        for (; p < end && isdigit((unsigned char)*p); p++, digits++) {
            v = v * 10 + (uint64_t)(*p - '0');
            if (v >= ndev && v > SIM_MAX_DEVICES)
                return -1;
        }
        if (digits == 0 || (neg && v != 0) || v >= ndev)
            return -1;
        return (int)v;
    }
}

int sim_visible_devices(const char *spec, uint32_t ndev, int out[SIM_MAX_DEVICES])
{
    const char *p = spec;
    int n = 0, uuids;

    if (!spec) {
        for (uint32_t i = 0; i < ndev && i < SIM_MAX_DEVICES; i++)
            out[n++] = (int)i;
        return n;
    }
    /* The first entry decides how all are read; there is no MIG here, so MIG- names nothing. */
    if (strncmp(spec, "MIG-", 4) == 0)
        return 0;
    uuids = strncmp(spec, "GPU-", 4) == 0;
    for (;;) {
        const char *end = strchr(p, ',');
        int d;

        if (!end)
            end = p + strlen(p);
        if ((d = visible_entry(p, end, uuids, ndev)) < 0)
            break;
        for (int k = 0; k < n; k++)
            if (out[k] == d)
                return 0; /* a GPU named twice: CUDA then shows none */
        if (n == SIM_MAX_DEVICES)
            break;
        out[n++] = d;
        if (*end == '\0')
            break;
        p = end + 1;
    }
    return n;
}

void sim_uuid_bytes(int index, unsigned char out[16])
{
    static const unsigned char base[16] = { 0x5a, 0xc1, 0xce, 0x00, 0x00, 0x00, 0x40, 0x00,
                                            0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00 };
    memcpy(out, base, 16);
    out[15] = (unsigned char)index;
}

void sim_uuid_string(int index, char out[41])
{
    unsigned char b[16];

    sim_uuid_bytes(index, b);
    snprintf(out, 41, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
             b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
             b[14], b[15]);
}
