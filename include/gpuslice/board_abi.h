/*
 * The shared-memory layout of a device board: one small file per user and
 * GPU through which the processes of that user's tenants that have a compute
 * ceiling take turns on the device, so the time one of them is charged for is
 * time its own work held the GPU. Fixed-width types, sizes pinned by static
 * asserts. It opens with the common segment header (shm_abi.h): a file of
 * another magic or major ABI version, or smaller than this layout, is not
 * used, and the process says so naming both versions and the file.
 *
 * Every field is read and written with atomic operations; there is no lock.
 * holder_pid is claimed by compare-and-swap; seq is a futex word bumped at
 * every release, which waiters sleep on.
 */
#ifndef GPUSLICE_BOARD_ABI_H
#define GPUSLICE_BOARD_ABI_H

#include <stddef.h>
#include <stdint.h>

#include "gpuslice/shm_abi.h"

#define GPUSLICE_BOARD_MAGIC 0x44524f4253504753ULL /* "GSPSBORD" */
/* GPUSLICE_ABI(1, 1): minor 1 (classes' activity and the longest waiter in reserved words). */
#define GPUSLICE_BOARD_ABI_VERSION 65537u
#define GPUSLICE_BOARD_ABI_MAJOR 1u

struct gpuslice_board {
    uint64_t magic;
    uint32_t abi_version;
    uint32_t size;
    uint8_t uuid[16];
    int32_t holder_pid;         /* 0 = free */
    uint32_t seq;               /* futex word: +1 at every release */
    uint64_t holder_start_time; /* /proc/PID/stat start time of the holder */
    uint64_t acquired_ns;       /* CLOCK_MONOTONIC when the holder took the device */
    int32_t waiters;            /* threads sleeping on seq (for the wake; may drift if one dies) */
    uint32_t pad0;
    uint64_t handoffs;       /* releases while another process waited */
    uint64_t waiter_seen_ns; /* CLOCK_MONOTONIC when a waiter last (re)started waiting */
    /*
     * ABI 1.1: CLOCK_MONOTONIC when work of a tenant of class normal (set explicitly) [0] and
     * latency [1] was last seen on the device (launched, or still running): lower classes
     * yield while it is recent.
     */
    uint64_t active_ns[2];
    /*
     * ABI 1.1: the process that has waited longest for the device, when it began waiting and
     * when it last said it still waits; the device is its turn next (0 = none).
     */
    int32_t first_pid;
    uint32_t pad1;
    uint64_t first_since_ns;
    uint64_t first_seen_ns;
    uint64_t holder_turn_ns; /* ABI 1.1: how long the holder's turn may last (its weight's) */
    uint64_t reserved[1];
};

GPUSLICE_SHM_LAYOUT_CHECK(struct gpuslice_board, GPUSLICE_BOARD_ABI_VERSION,
                          GPUSLICE_BOARD_ABI_MAJOR);
_Static_assert(offsetof(struct gpuslice_board, holder_pid) == 32, "board holder offset");
_Static_assert(sizeof(struct gpuslice_board) == 136, "board size");
_Static_assert(offsetof(struct gpuslice_board, active_ns) == 80, "board activity offset");

#endif
