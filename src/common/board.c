/*
 * Device boards: the holder is claimed by compare-and-swap, released with a
 * futex wake. A holder that died is noticed by its PID and start time and its
 * turn taken over, so a crash never leaves the device blocked.
 */
#define _GNU_SOURCE
#include "common/board.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/tenant.h"

/* A claim younger than this may not have its start time written yet. */
#define CLAIM_SETTLE_NS 50000000ULL
/* A waiter renews its presence at least every millisecond. */
#define WAITER_FRESH_NS 5000000ULL

static int valid(const struct gpuslice_board *b)
{
    return __atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) == GPUSLICE_BOARD_MAGIC &&
           b->abi_version == GPUSLICE_BOARD_ABI_VERSION && b->size == sizeof(*b);
}

int gs_board_open(const char *dir, const uint8_t uuid[16], struct gpuslice_board **out)
{
    struct gpuslice_board *b;
    struct stat st;
    char path[4096], hex[33];
    int fd, i, created = 0, r;

    for (i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
    if ((size_t)snprintf(path, sizeof(path), "%s/" GS_TENANT_PREFIX "%u-gpu-%s.board", dir,
                         (unsigned)getuid(), hex) >= sizeof(path))
        return -ENAMETOOLONG;
    fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0) {
        created = 1;
        if (ftruncate(fd, sizeof(*b)) < 0) {
            r = -errno;
            close(fd);
            unlink(path);
            return r;
        }
    } else if (errno != EEXIST || (fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW)) < 0) {
        return -errno;
    }
    if (fstat(fd, &st) < 0 || st.st_uid != getuid() || !S_ISREG(st.st_mode)) {
        close(fd);
        return -EPERM; /* someone else's file under our name: do not trust it */
    }
    b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED)
        return -errno;
    if (created) {
        memcpy(b->uuid, uuid, 16);
        b->abi_version = GPUSLICE_BOARD_ABI_VERSION;
        b->size = sizeof(*b);
        __atomic_store_n(&b->magic, GPUSLICE_BOARD_MAGIC, __ATOMIC_RELEASE);
    } else {
        /* Its creator may be between ftruncate and the magic: give it a moment. */
        struct timespec ms = {0, 1000000};
        for (i = 0; i < 100 && !valid(b); i++)
            nanosleep(&ms, NULL);
        if (!valid(b) || memcmp(b->uuid, uuid, 16) != 0) {
            munmap(b, sizeof(*b));
            return -EPROTO;
        }
    }
    *out = b;
    return 0;
}

void gs_board_close(struct gpuslice_board *b)
{
    if (b)
        munmap(b, sizeof(*b));
}

static void wake_all(struct gpuslice_board *b)
{
    syscall(SYS_futex, &b->seq, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Clears a claim whose process is gone; returns 1 if it did. */
static int clear_dead(struct gpuslice_board *b, int32_t holder, uint64_t now_ns)
{
    uint64_t start = __atomic_load_n(&b->holder_start_time, __ATOMIC_ACQUIRE);
    uint64_t since = __atomic_load_n(&b->acquired_ns, __ATOMIC_ACQUIRE);

    /* Not written yet (release clears both): the claim is settling, not dead. */
    if (start == 0 || since == 0 || now_ns < since + CLAIM_SETTLE_NS)
        return 0;
    if (gs_proc_start_time(holder) == start && start != 0)
        return 0;
    if (!__atomic_compare_exchange_n(&b->holder_pid, &holder, 0, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return 0;
    __atomic_add_fetch(&b->seq, 1, __ATOMIC_ACQ_REL);
    wake_all(b);
    return 1;
}

int gs_board_try_acquire(struct gpuslice_board *b, pid_t pid, uint64_t start, uint64_t now_ns)
{
    int32_t expected = 0;

    if (__atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) == (int32_t)pid)
        return 1;
    if (!__atomic_compare_exchange_n(&b->holder_pid, &expected, (int32_t)pid, 0,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        if (!clear_dead(b, expected, now_ns))
            return 0;
        expected = 0;
        if (!__atomic_compare_exchange_n(&b->holder_pid, &expected, (int32_t)pid, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return 0;
    }
    __atomic_store_n(&b->holder_start_time, start, __ATOMIC_RELEASE);
    __atomic_store_n(&b->acquired_ns, now_ns, __ATOMIC_RELEASE);
    return 1;
}

void gs_board_release(struct gpuslice_board *b, pid_t pid)
{
    int32_t expected = (int32_t)pid;

    if (__atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) != (int32_t)pid)
        return;
    /* The next claimant writes its own; a stale pair must not judge it. */
    __atomic_store_n(&b->acquired_ns, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&b->holder_start_time, 0, __ATOMIC_RELEASE);
    if (!__atomic_compare_exchange_n(&b->holder_pid, &expected, 0, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE))
        return;
    __atomic_add_fetch(&b->seq, 1, __ATOMIC_ACQ_REL);
    if (__atomic_load_n(&b->waiters, __ATOMIC_ACQUIRE) > 0) {
        __atomic_add_fetch(&b->handoffs, 1, __ATOMIC_RELAXED);
        wake_all(b);
    }
}

void gs_board_wait(struct gpuslice_board *b, uint64_t timeout_ns, uint64_t now_ns)
{
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ULL), (long)(timeout_ns % 1000000000ULL)};
    uint32_t seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
    int saved = errno;

    __atomic_store_n(&b->waiter_seen_ns, now_ns, __ATOMIC_RELEASE);
    __atomic_add_fetch(&b->waiters, 1, __ATOMIC_ACQ_REL);
    if (__atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) != 0)
        syscall(SYS_futex, &b->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
    __atomic_sub_fetch(&b->waiters, 1, __ATOMIC_ACQ_REL);
    errno = saved;
}

int gs_board_waiting(const struct gpuslice_board *b, uint64_t now_ns)
{
    uint64_t seen = __atomic_load_n(&b->waiter_seen_ns, __ATOMIC_ACQUIRE);

    return seen != 0 && now_ns < seen + WAITER_FRESH_NS;
}
