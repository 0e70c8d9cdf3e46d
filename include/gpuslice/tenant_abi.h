/*
 * The shared-memory layout of a tenant: the one contract between the
 * interposer (in every process of the tenant), the CLI and the daemon.
 * Fixed-width types, explicit padding, sizes pinned by static asserts. It
 * opens with the common segment header (shm_abi.h): a file of another magic
 * or major ABI version, or smaller than this layout, is refused, never
 * guessed at; a later minor version (fields added at the end) is read.
 *
 * Locking: memory figures and the tables are read and written with `lock`
 * held, except reads of limits and totals for display, which may be stale
 * but never torn (aligned 32/64-bit atomic loads). The lock is one 32-bit
 * futex word holding the holder's thread ID (bit 31: someone waits), taken
 * by compare-and-swap of the 64-bit `lock.holder`, whose high half names the
 * holder's PID namespace: no pointers live in the file, so a tenant's owner who
 * rewrites it can make another user's process wait (every wait is bounded,
 * and a wait that runs out refuses what it was for) but never write
 * elsewhere. A holder found dead in its own PID namespace is replaced, and the
 * new holder recomputes the totals from the per-process records; one of
 * another namespace is never taken for dead (its TID means nothing here). The compute
 * budget fields (compute_*) are updated with atomic operations only, never
 * under the lock: they change on every poll of every process of the tenant.
 * So is the memory reservation (`reserve`, see common/reserve.h): its two
 * sequence words are futexes.
 *
 * Lock order in the interposer: the tenant lock is the innermost. It is taken
 * with any of src/preload/mem/'s pool_mu, mem_mu and slot_mu held (taken in
 * that order when more than one is), and nothing is locked while it is held.
 * compute/'s mu, sm.c's sm_mu and the board take no tenant lock at all.
 */
#ifndef GPUSLICE_TENANT_ABI_H
#define GPUSLICE_TENANT_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "gpuslice/shm_abi.h"

#define GPUSLICE_TENANT_MAGIC 0x544e455453504753ULL /* "GSPSTENT" */
/*
 * GPUSLICE_ABI(4, 2): major 4 (a 32-bit lock word, 1024 slots, the reservation), minor 1
 * (pid_ns in a process entry's former padding; ctx_base and host_pid at the end), minor 2
 * (node_tenant in the former reserved words; the throttling and refusal counters at the end),
 * minor 3 (priority and weight in the former reserved words), minor 4 (the class's
 * activity per device entry at the end).
 * Written in decimal for bench/gpumeasure.py, checked below.
 */
#define GPUSLICE_TENANT_ABI_VERSION 262148u
#define GPUSLICE_TENANT_ABI_MAJOR 4u
#define GPUSLICE_MAX_DEVICES 16
#define GPUSLICE_MAX_PROCS 1024

struct gpuslice_tenant_device {
    uint8_t uuid[16];       /* raw UUID bytes; all zero = unused entry */
    uint64_t mem_limit;     /* bytes; 0 = no limit */
    uint64_t mem_used;      /* sum of mem_used of live processes */
    uint32_t compute_limit; /* percent of the device's time, 1..99; 0 = no ceiling */
    uint32_t flags;
    int32_t ordinal;            /* CUDA ordinal as the process that added the entry saw it */
    uint32_t compute_epoch;     /* +1 at every reset of the budget (gs_tenant_set) */
    int64_t compute_tokens;     /* ns of device time the tenant may still use; may be < 0 */
    uint64_t compute_refill_ns; /* CLOCK_MONOTONIC when compute_tokens was last refilled */
    uint64_t compute_busy_ns;   /* device time the tenant's work has held, cumulative */
    uint64_t ctx_footprint;     /* smallest context footprint a process measured, for
                                    processes NVML does not list (PID namespaces); 0 = none */
    uint64_t ctx_hidden;        /* what a context takes on the device beyond NVML's figure for
                                    its process (the latest settled measure; 0 = none yet) */
};

/* A ctx_base word: bytes (< 2^48) in no listed process's figure, and processes listed. */
#define GPUSLICE_CTX_BASE(bytes, listed) ((uint64_t)(listed) << 48 | ((uint64_t)(bytes) + 1))
#define GPUSLICE_CTX_BASE_BYTES(w) (((w) & ((1ULL << 48) - 1)) - 1)
#define GPUSLICE_CTX_BASE_LISTED(w) ((unsigned)((w) >> 48))

/* set_flags: a device added after `gpuslice set` takes these, not the process's own. */
#define GPUSLICE_SET_MEMORY 1u
#define GPUSLICE_SET_COMPUTE 2u

#define GPUSLICE_LOCK_WAITERS 0x80000000u

/* Priority classes (priority): a higher one runs first on a device it shares with a lower. */
#define GPUSLICE_PRIORITY_UNSET 0u
#define GPUSLICE_PRIORITY_BACKGROUND 1u
#define GPUSLICE_PRIORITY_NORMAL 2u
#define GPUSLICE_PRIORITY_LATENCY 3u
#define GPUSLICE_WEIGHT_MAX 100u

struct gpuslice_tenant_proc {
    int32_t pid;         /* 0 = free slot; the PID in the process's own PID namespace */
    uint32_t pid_ns;     /* ABI 4.1: that namespace (inode of /proc/PID/ns/pid); 0 = unknown */
    uint64_t start_time; /* /proc/PID/stat field 22, guards against PID reuse */
    uint64_t mem_used[GPUSLICE_MAX_DEVICES]; /* by device entry */
};

/*
 * The memory reservation kept beside the tenant (gpuslice run --filled): one
 * reserver process holds device memory so that the tenant plus the
 * reservation keep each GPU at its target, and gives memory back when a
 * process of the tenant asks for it (an allocation the driver refused).
 */
struct gpuslice_tenant_reserve_dev {
    uint8_t uuid[16]; /* raw UUID bytes; all zero = unused entry */
    uint64_t target;  /* bytes the tenant and the reservation should use together */
    uint64_t held;    /* bytes the reserver holds now in allocations (not its context) */
    uint64_t want;    /* the largest allocation a tenant process waits for; 0 = none */
};

struct gpuslice_tenant_reserve {
    int32_t pid;         /* the reserver; 0 = no reservation */
    uint32_t ask_seq;    /* futex word: bumped by a process that needs memory */
    uint64_t start_time; /* the reserver's /proc start time, against PID reuse */
    uint32_t gave_seq;   /* futex word: the ask_seq the reserver has answered */
    uint32_t pad0;
    struct gpuslice_tenant_reserve_dev dev[GPUSLICE_MAX_DEVICES];
};

struct gpuslice_tenant {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t size; /* sizeof(struct gpuslice_tenant) */
    union {
        uint32_t word; /* 0 free, else holder TID | GPUSLICE_LOCK_WAITERS (the futex word) */
        /*
         * word in the low half (the layout is little-endian); in the high half the holder's
         * PID namespace (the inode of /proc/TID/ns/pid), without which its TID names no
         * thread: 0 where an older build took the lock (it wrote word alone), or unknown.
         */
        uint64_t holder;
        uint8_t raw[64];
        uint64_t align;
    } lock;
    uint32_t owner_uid;
    int32_t creator_pid;
    uint64_t creator_start_time;
    uint64_t created_unix_ns;
    char name[64];
    uint32_t compute_any;       /* 1 once any device has, or will get, a compute ceiling */
    uint32_t set_flags;         /* GPUSLICE_SET_*: limits given by `gpuslice set` */
    uint64_t set_mem_limit;     /* for devices the tenant starts using after the set */
    uint32_t set_compute_limit; /* likewise */
    uint32_t limits_fixed;      /* 1: the limits came with the tenant (gpuslice run); its
                                   processes' own variables do not change them */
    uint32_t owner_user_ns;     /* ABI 4.1: the writer's user namespace (owner_uid is its uid) */
    uint32_t creator_pid_ns;    /* ABI 4.1: the creator's PID namespace (creator_pid is its PID) */
    uint32_t node_tenant;       /* ABI 4.2: the daemon's tenant (node_abi.h) whose limits rule this
                                   file's processes, which its own limit fields then only mirror;
                                   0 = none */
    uint32_t pad1;
    uint32_t priority; /* ABI 4.3: GPUSLICE_PRIORITY_*; 0 = not set (normal) */
    uint32_t weight;   /* ABI 4.3: share of a contended device among its class, 1..100; 0 = 1 */
    uint64_t reserved[2];
    struct gpuslice_tenant_device dev[GPUSLICE_MAX_DEVICES];
    struct gpuslice_tenant_proc proc[GPUSLICE_MAX_PROCS];
    struct gpuslice_tenant_reserve reserve;
    /*
     * ABI 4.1, per device entry: what a context's hidden part is measured against, as a
     * process of the tenant saw the device before its first context there, every listed
     * process having its context in its figure: the device's use in no listed process's
     * figure, plus 1, in bits 0-47 (0 = none seen), and how many processes NVML listed, in
     * bits 48-63 (GPUSLICE_CTX_BASE). The smallest word wins: the fewest processes (none:
     * the driver's own use, 615 MiB on an idle H200), then the least use.
     */
    uint64_t ctx_base[GPUSLICE_MAX_DEVICES];
    /*
     * ABI 4.1, per process slot: the PID the kernel's initial PID namespace knows the process
     * by, where it runs in another (written by it when it runs in the initial one, else by a
     * reader there that found it: under the lock, or by the daemon with pwrite for a managed
     * tenant, where a process in a pod's PID namespace reads the PID NVML names it by); 0 = not
     * known yet, -1 = looked for and not found (gone). Readers check a PID read here against
     * /proc: one that names another process is looked for again.
     */
    int32_t host_pid[GPUSLICE_MAX_PROCS];
    /*
     * ABI 4.2, per device entry, cumulative and updated with atomic additions: the time
     * launches of the tenant's processes waited for its compute ceiling (ns), and the
     * allocations refused over its memory limit.
     */
    uint64_t compute_throttled_ns[GPUSLICE_MAX_DEVICES];
    uint64_t mem_refused[GPUSLICE_MAX_DEVICES];
    /*
     * ABI 4.4, per device entry: CLOCK_MONOTONIC when work of this tenant's class (normal set
     * explicitly, or latency) was last seen on the device, for tenants of other users, which
     * share no board with it, to yield to. Written by its processes; read by others with
     * pread() (the file is its owner's: a mapping of it could be cut short under them) and
     * trusted only for the class the daemon gave the tenant (node_abi.h).
     */
    uint64_t active_ns[GPUSLICE_MAX_DEVICES];
};

_Static_assert(sizeof(struct gpuslice_tenant_device) == 88, "device entry layout");
_Static_assert(sizeof(struct gpuslice_tenant_proc) == 144, "process entry layout");
GPUSLICE_SHM_LAYOUT_CHECK(struct gpuslice_tenant, GPUSLICE_TENANT_ABI_VERSION,
                          GPUSLICE_TENANT_ABI_MAJOR);
_Static_assert(offsetof(struct gpuslice_tenant, lock) == 16, "lock offset");
_Static_assert(offsetof(struct gpuslice_tenant, dev) == 232, "device table offset");
_Static_assert(offsetof(struct gpuslice_tenant_device, compute_tokens) == 48, "budget offset");
_Static_assert(offsetof(struct gpuslice_tenant, compute_any) == 168, "header fields offset");
_Static_assert(sizeof(struct gpuslice_tenant_reserve_dev) == 40, "reservation entry layout");
_Static_assert(sizeof(struct gpuslice_tenant_reserve) == 24 + 16 * 40, "reservation layout");
_Static_assert(offsetof(struct gpuslice_tenant, reserve) == 232 + 16 * 88 + 1024 * 144,
               "reservation offset");
_Static_assert(offsetof(struct gpuslice_tenant, ctx_base) == 232 + 16 * 88 + 1024 * 144 + 664,
               "ctx_base offset");
_Static_assert(offsetof(struct gpuslice_tenant, host_pid) == 232 + 16 * 88 + 1024 * 144 + 664 + 128,
               "host_pid offset");
_Static_assert(offsetof(struct gpuslice_tenant, compute_throttled_ns) ==
                   232 + 16 * 88 + 1024 * 144 + 664 + 128 + 4096,
               "counters offset");
_Static_assert(sizeof(struct gpuslice_tenant) ==
                   232 + 16 * 88 + 1024 * 144 + 664 + 128 + 4096 + 256 + 128,
               "tenant size");
/* What a 4.1 file holds: readers that only read (the daemon, listings) accept one. */
#define GPUSLICE_TENANT_SIZE_4_1 (232 + 16 * 88 + 1024 * 144 + 664 + 128 + 4096)
/* What a 4.2 or 4.3 file holds: its processes still join it, without the activity words. */
#define GPUSLICE_TENANT_SIZE_4_3 (GPUSLICE_TENANT_SIZE_4_1 + 256)
_Static_assert(offsetof(struct gpuslice_tenant, active_ns) ==
                   232 + 16 * 88 + 1024 * 144 + 664 + 128 + 4096 + 256,
               "activity offset");
_Static_assert((GPUSLICE_TENANT_ABI_VERSION == GPUSLICE_ABI(4, 4)), "tenant ABI 4.4");
_Static_assert(offsetof(struct gpuslice_tenant, priority) == 208, "priority offset");

#endif
