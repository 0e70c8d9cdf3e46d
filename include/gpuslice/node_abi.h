/*
 * The node segment: the one file the daemon (gpusliced) writes and every
 * process of a managed tenant maps read-only. It holds the limits of the
 * tenants the daemon owns and which processes belong to them, so that a
 * process of such a tenant finds its limits without asking anyone and
 * cannot change them: the file is the daemon's (root's on a node), and the
 * tenant's own state file (tenant_abi.h), which its processes must write to
 * account their memory, no longer says what their limits are.
 *
 * One writer (the daemon, one thread at a time); any number of readers. A
 * tenant entry is read under its sequence word: odd while the daemon writes
 * it; a reader that sees it change reads again (a bounded number of times:
 * a daemon killed in the middle of a write leaves it odd, and every field is
 * a whole aligned word that held one limit the daemon gave or the other).
 * An entry's id says which tenant it holds: a reader checks it is still the
 * tenant it joined, since a freed entry is reused. A member entry is added
 * with its tenant written last and removed with its tenant cleared first.
 */
#ifndef GPUSLICE_NODE_ABI_H
#define GPUSLICE_NODE_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "gpuslice/shm_abi.h"

#define GPUSLICE_NODE_MAGIC 0x45444f4e53504753ULL /* "GSPSNODE" */
/*
 * GPUSLICE_ABI(1, 2), in decimal for bench/gpumeasure.py, checked below: minor 1 (a tenant's
 * priority and weight in its former reserved words), minor 2 (a pod's tenant: the flags
 * GPUSLICE_NODE_POD and GPUSLICE_NODE_REFUSED, and limits keyed by a process's CUDA index).
 */
#define GPUSLICE_NODE_ABI_VERSION 131073u
#define GPUSLICE_NODE_ABI_MAJOR 1u
#define GPUSLICE_NODE_MAX_TENANTS 256
#define GPUSLICE_NODE_MAX_DEVICES 16
#define GPUSLICE_NODE_MAX_MEMBERS 4096
/* The file's name in the daemon's run directory. */
#define GPUSLICE_NODE_FILE "gpusliced.node"

/*
 * gpuslice_node_tenant.flags: some device has, or will get, a compute ceiling, or the tenant
 * has a priority class or a weight (its launches are governed).
 */
#define GPUSLICE_NODE_COMPUTE_ANY 1u
/* ABI 1.2: the tenant of a Kubernetes pod, whose processes the daemon joins by their cgroup. */
#define GPUSLICE_NODE_POD 2u
/*
 * ABI 1.2: the daemon refused the tenant's limits (a pod whose annotations are bad): its
 * processes' CUDA calls fail, as with a bad configuration, and never run unlimited.
 */
#define GPUSLICE_NODE_REFUSED 4u

/*
 * ABI 1.2: a limit entry whose uuid is 15 bytes of 0xff and then an index is keyed by that
 * CUDA index as each process numbers its own devices (a pod's "0:8G" is its container's
 * device 0, whichever GPU of the node that is). An entry of the device's UUID comes first.
 */
#define GPUSLICE_NODE_INDEX_KEY_BYTE 0xffu
#define GPUSLICE_NODE_INDEX_MAX 254

/* The daemon's socket that joins a pod's processes to its tenant, in its run directory. */
#define GPUSLICE_NODE_POD_SOCKET "gpusliced.pods"

/* One device's limits for a tenant. */
struct gpuslice_node_limit {
    uint8_t uuid[16];       /* raw UUID bytes; all zero = unused entry */
    uint64_t mem_limit;     /* bytes; 0 = no limit */
    uint32_t compute_limit; /* percent, 1..99; 0 = no ceiling */
    uint32_t pad0;
};

struct gpuslice_node_tenant {
    uint32_t seq;       /* odd while the daemon writes the entry */
    uint32_t id;        /* the tenant's number (never reused by one segment); 0 = free entry */
    uint32_t owner_uid; /* who may lower its limits, and whose processes join it */
    uint32_t flags;
    uint64_t created_unix_ns;
    char name[64];            /* NUL-terminated */
    char state_file[64];      /* its tenant_abi.h file's name, in tenant_dir; NUL-terminated */
    uint64_t mem_default;     /* for devices without an entry of their own; 0 = no limit */
    uint32_t compute_default; /* likewise, percent; 0 = no ceiling */
    uint32_t pad0;
    struct gpuslice_node_limit dev[GPUSLICE_NODE_MAX_DEVICES];
    uint32_t priority; /* ABI 1.1: GPUSLICE_PRIORITY_* (tenant_abi.h); 0 = not set (normal) */
    uint32_t weight;   /* ABI 1.1: 1..GPUSLICE_WEIGHT_MAX; 0 = 1 */
    uint64_t reserved[7];
};

/* A process that belongs to a tenant, and with it every process it starts. */
struct gpuslice_node_member {
    uint32_t tenant; /* the tenant's id; 0 = free entry */
    uint32_t pid_ns; /* the process's PID namespace (inode of /proc/PID/ns/pid) */
    int32_t pid;     /* its PID in that namespace */
    uint32_t pad0;
    uint64_t start_time; /* /proc/PID/stat field 22, against a recycled PID */
};

struct gpuslice_node {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t size;      /* sizeof(struct gpuslice_node) */
    int32_t daemon_pid; /* in daemon_pid_ns */
    uint32_t daemon_pid_ns;
    uint64_t daemon_start_time;
    uint64_t heartbeat_ns; /* CLOCK_MONOTONIC at the daemon's latest sample */
    uint32_t next_id;      /* the id the next tenant gets */
    uint32_t owner_uid;    /* the daemon's user: the file's owner */
    char tenant_dir[256];  /* where its tenants' state files are; NUL-terminated */
    uint64_t reserved[8];
    struct gpuslice_node_tenant tenant[GPUSLICE_NODE_MAX_TENANTS];
    struct gpuslice_node_member member[GPUSLICE_NODE_MAX_MEMBERS];
};

_Static_assert(sizeof(struct gpuslice_node_limit) == 32, "node limit layout");
_Static_assert(sizeof(struct gpuslice_node_tenant) == 24 + 128 + 16 + 16 * 32 + 64,
               "node tenant layout");
_Static_assert(sizeof(struct gpuslice_node_member) == 24, "node member layout");
GPUSLICE_SHM_LAYOUT_CHECK(struct gpuslice_node, GPUSLICE_NODE_ABI_VERSION, GPUSLICE_NODE_ABI_MAJOR);
_Static_assert(offsetof(struct gpuslice_node, tenant) == 368, "node tenant table offset");
_Static_assert(sizeof(struct gpuslice_node) == 368 + 256 * 744 + 4096 * 24, "node size");
_Static_assert((GPUSLICE_NODE_ABI_VERSION == GPUSLICE_ABI(1, 2)), "node ABI 1.2");

#endif
