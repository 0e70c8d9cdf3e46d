/*
 * The shared-memory layout of a tenant: the one contract between the
 * interposer (in every process of the tenant), the CLI and the daemon.
 * Fixed-width types, explicit padding, sizes pinned by static asserts. A file
 * whose magic, ABI version or size differs is refused, never guessed at.
 *
 * Locking: every field below `lock` is read and written with `lock` held,
 * except reads of limits and totals for display, which may be torn-free but
 * stale (64-bit aligned loads). The lock is a robust, process-shared mutex:
 * a process that dies holding it is detected (EOWNERDEAD) and the next
 * holder recomputes the totals from the per-process records.
 */
#ifndef GPUSLICE_TENANT_ABI_H
#define GPUSLICE_TENANT_ABI_H

#include <stddef.h>
#include <stdint.h>

#define GPUSLICE_TENANT_MAGIC 0x544e455453504753ULL /* "GSPSTENT" */
#define GPUSLICE_TENANT_ABI_VERSION 1u
#define GPUSLICE_MAX_DEVICES 16
#define GPUSLICE_MAX_PROCS 256

struct gpuslice_tenant_device {
    uint8_t uuid[16];       /* raw UUID bytes; all zero = unused entry */
    uint64_t mem_limit;     /* bytes; 0 = no limit */
    uint64_t mem_used;      /* sum of mem_used of live processes */
    uint32_t compute_limit; /* percent, 0 = none (reserved for compute ceilings) */
    uint32_t flags;
    uint64_t reserved[4];
};

struct gpuslice_tenant_proc {
    int32_t pid;         /* 0 = free slot */
    uint32_t pad0;
    uint64_t start_time; /* /proc/PID/stat field 22, guards against PID reuse */
    uint64_t mem_used[GPUSLICE_MAX_DEVICES]; /* by device entry */
};

struct gpuslice_tenant {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t size; /* sizeof(struct gpuslice_tenant) */
    union {
        uint8_t raw[64]; /* pthread_mutex_t, robust and process-shared */
        uint64_t align;
    } lock;
    uint32_t owner_uid;
    int32_t creator_pid;
    uint64_t creator_start_time;
    uint64_t created_unix_ns;
    char name[64];
    uint64_t reserved[8];
    struct gpuslice_tenant_device dev[GPUSLICE_MAX_DEVICES];
    struct gpuslice_tenant_proc proc[GPUSLICE_MAX_PROCS];
};

_Static_assert(sizeof(struct gpuslice_tenant_device) == 72, "device entry layout");
_Static_assert(sizeof(struct gpuslice_tenant_proc) == 144, "process entry layout");
_Static_assert(offsetof(struct gpuslice_tenant, lock) == 16, "lock offset");
_Static_assert(offsetof(struct gpuslice_tenant, dev) == 232, "device table offset");
_Static_assert(sizeof(struct gpuslice_tenant) == 232 + 16 * 72 + 256 * 144, "tenant size");

#endif
