/*
 * Device boards: the holder is claimed by compare-and-swap, released with a
 * futex wake. A holder that died is noticed by its PID and start time and its
 * turn taken over, so a crash never leaves the device blocked.
 */
#define _GNU_SOURCE
#include "common/board.h"
#include "common/shm.h"
#include "gpuslice/tenant_abi.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "common/tenant.h"

/* A claim younger than this may not have its start time written yet. */
#define CLAIM_SETTLE_NS 50000000ULL
/* A waiter renews its presence at least every millisecond. */
#define WAITER_FRESH_NS 5000000ULL

const char *gs_board_dir(void)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;

    if (x && x[0] == '/' && lstat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == getuid() &&
        !(st.st_mode & (S_IWGRP | S_IWOTH)))
        return x;
    return gs_tenant_dir();
}

/* Whether its creator has finished making it (the magic is stored last). */
static int made(const struct gpuslice_board *b)
{
    return __atomic_load_n(&b->magic, __ATOMIC_ACQUIRE) == GPUSLICE_BOARD_MAGIC;
}

/*
 * Maps the board at path if it is ours: 1 and *out on success, 0 when there
 * is no file, -1 when there is one we must not use (another user's, writable
 * by others, of another layout), with why in note.
 */
static int map_board(const char *path, const uint8_t uuid[16], struct gpuslice_board **out,
                     char *note, size_t notelen)
{
    struct gpuslice_board *b;
    struct stat st;
    int fd, i;

    if ((fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return errno == ENOENT ? 0 : -1;
    /* One of ours made it a moment ago and has not sized it yet: give it that moment. */
    for (i = 0; i < 100 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == getuid() &&
                !(st.st_mode & (S_IWGRP | S_IWOTH)) && st.st_size == 0;
         i++) {
        struct timespec ms = { 0, 1000000 };
        nanosleep(&ms, NULL);
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != getuid() ||
        (st.st_mode & (S_IWGRP | S_IWOTH)) || (size_t)st.st_size < sizeof(*b)) {
        if (note && notelen)
            snprintf(note, notelen,
                     "%s is not a board of yours (owner uid %u, mode %03o, %lld bytes); "
                     "another user may have planted it",
                     path, (unsigned)st.st_uid, (unsigned)(st.st_mode & 0777),
                     (long long)st.st_size);
        close(fd);
        return -1;
    }
    b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (b == MAP_FAILED)
        return -1;
    {
        /* Its creator may be between ftruncate and the magic: give it a moment. */
        struct timespec ms = { 0, 1000000 };
        for (i = 0; i < 100 && !made(b); i++)
            nanosleep(&ms, NULL);
    }
    /* Another gpuslice version's board: said, naming both versions, and passed over. */
    if (gs_shm_check((const struct gpuslice_shm_header *)b, (size_t)st.st_size,
                     GPUSLICE_BOARD_MAGIC, GPUSLICE_BOARD_ABI_MAJOR, sizeof(*b), "board", path,
                     note, notelen) < 0) {
        munmap(b, sizeof(*b));
        return -1;
    }
    if (memcmp(b->uuid, uuid, 16) != 0) {
        munmap(b, sizeof(*b));
        if (note && notelen)
            snprintf(note, notelen, "%s holds no board of this GPU", path);
        return -1;
    }
    *out = b;
    return 1;
}

int gs_board_open(const char *dir, const uint8_t uuid[16], struct gpuslice_board **out, char *note,
                  size_t notelen)
{
    struct gpuslice_board *b;
    char path[4200], base[4096], hex[33];
    int fd, i, k, r, round, free_k;

    if (note && notelen)
        note[0] = '\0';
    for (i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", uuid[i]);
    if ((size_t)snprintf(base, sizeof(base), "%s/" GS_TENANT_PREFIX "%u-gpu-%s.board", dir,
                         (unsigned)getuid(), hex) >= sizeof(base) - 8)
        return -ENAMETOOLONG;
    /*
     * The directory may be shared (/dev/shm): anyone can create a file under
     * our board's name first. Such a file is passed over, loudly, for the
     * next name in a fixed sequence; every process of ours walks the same
     * sequence and takes the first board of ours in it, so turn-taking
     * survives as long as one of the names is left.
     */
    for (round = 0; round < 3; round++) {
        free_k = -1;
        for (k = 0; k < GS_BOARD_NAMES; k++) {
            if (k == 0)
                snprintf(path, sizeof(path), "%s", base);
            else
                snprintf(path, sizeof(path), "%s.%d", base, k);
            if ((r = map_board(path, uuid, out, note && note[0] ? NULL : note, notelen)) > 0)
                return 0;
            if (r == 0 && free_k < 0)
                free_k = k;
        }
        if (free_k < 0)
            return -EEXIST;
        if (free_k == 0)
            snprintf(path, sizeof(path), "%s", base);
        else
            snprintf(path, sizeof(path), "%s.%d", base, free_k);
        fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0) {
            if (errno == EEXIST)
                continue; /* made meanwhile, by a sibling or not: look again */
            return -errno;
        }
        /* Its space before it is mapped: a full directory is an error, not SIGBUS. */
        if ((r = gs_shm_allocate(fd, sizeof(*b))) < 0) {
            close(fd);
            unlink(path);
            return r;
        }
        b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        close(fd);
        if (b == MAP_FAILED)
            return -errno;
        memcpy(b->uuid, uuid, 16);
        b->abi_version = GPUSLICE_BOARD_ABI_VERSION;
        b->size = sizeof(*b);
        __atomic_store_n(&b->magic, GPUSLICE_BOARD_MAGIC, __ATOMIC_RELEASE);
        *out = b;
        return 0;
    }
    return -EEXIST;
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
    int32_t expected = 0, first = __atomic_load_n(&b->first_pid, __ATOMIC_ACQUIRE);

    if (__atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) == (int32_t)pid)
        return 1;
    /* Another has waited longer and still waits (a renewal from the future counts not): first. */
    if (first != 0 && first != (int32_t)pid) {
        uint64_t seen = __atomic_load_n(&b->first_seen_ns, __ATOMIC_ACQUIRE);

        if (now_ns < seen + WAITER_FRESH_NS && seen <= now_ns + WAITER_FRESH_NS)
            return 0;
    }
    if (!__atomic_compare_exchange_n(&b->holder_pid, &expected, (int32_t)pid, 0, __ATOMIC_ACQ_REL,
                                     __ATOMIC_ACQUIRE)) {
        if (!clear_dead(b, expected, now_ns))
            return 0;
        expected = 0;
        if (!__atomic_compare_exchange_n(&b->holder_pid, &expected, (int32_t)pid, 0,
                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            return 0;
    }
    __atomic_store_n(&b->holder_start_time, start, __ATOMIC_RELEASE);
    __atomic_store_n(&b->acquired_ns, now_ns, __ATOMIC_RELEASE);
    if (first == (int32_t)pid)
        __atomic_compare_exchange_n(&b->first_pid, &first, 0, 0, __ATOMIC_ACQ_REL,
                                    __ATOMIC_RELAXED);
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

void gs_board_note_waiting(struct gpuslice_board *b, pid_t pid, uint64_t since_ns, uint64_t now_ns)
{
    int32_t first = __atomic_load_n(&b->first_pid, __ATOMIC_ACQUIRE);

    __atomic_store_n(&b->waiter_seen_ns, now_ns, __ATOMIC_RELEASE);
    /* The longest waiter goes next: take the place if it is free, stale, or newer than us. */
    if (first == (int32_t)pid) {
        __atomic_store_n(&b->first_seen_ns, now_ns, __ATOMIC_RELEASE);
    } else if (first == 0 ||
               now_ns >= __atomic_load_n(&b->first_seen_ns, __ATOMIC_ACQUIRE) + WAITER_FRESH_NS ||
               __atomic_load_n(&b->first_seen_ns, __ATOMIC_ACQUIRE) > now_ns + WAITER_FRESH_NS ||
               __atomic_load_n(&b->first_since_ns, __ATOMIC_ACQUIRE) > since_ns) {
        if (__atomic_compare_exchange_n(&b->first_pid, &first, (int32_t)pid, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
            __atomic_store_n(&b->first_since_ns, since_ns, __ATOMIC_RELEASE);
            __atomic_store_n(&b->first_seen_ns, now_ns, __ATOMIC_RELEASE);
        }
    }
}

void gs_board_wait(struct gpuslice_board *b, pid_t pid, uint64_t since_ns, uint64_t timeout_ns,
                   uint64_t now_ns)
{
    struct timespec ts = { (time_t)(timeout_ns / 1000000000ULL),
                           (long)(timeout_ns % 1000000000ULL) };
    uint32_t seq = __atomic_load_n(&b->seq, __ATOMIC_ACQUIRE);
    int saved = errno;

    gs_board_note_waiting(b, pid, since_ns, now_ns);
    __atomic_add_fetch(&b->waiters, 1, __ATOMIC_ACQ_REL);
    if (__atomic_load_n(&b->holder_pid, __ATOMIC_ACQUIRE) != 0)
        syscall(SYS_futex, &b->seq, FUTEX_WAIT, seq, &ts, NULL, 0);
    __atomic_sub_fetch(&b->waiters, 1, __ATOMIC_ACQ_REL);
    errno = saved;
}

void gs_board_active(struct gpuslice_board *b, uint32_t priority, uint64_t now_ns)
{
    uint64_t *w, was;

    if (priority == GPUSLICE_PRIORITY_LATENCY)
        w = &b->active_ns[1];
    else if (priority == GPUSLICE_PRIORITY_NORMAL)
        w = &b->active_ns[0];
    else
        return;
    was = __atomic_load_n(w, __ATOMIC_RELAXED);

    /* One store per 50 us at most (every launch comes here); a stamp from the future is
       another process's error or malice, and is replaced. */
    if (now_ns >= was + 50000 || was > now_ns + 50000)
        __atomic_store_n(w, now_ns, __ATOMIC_RELEASE);
}

int gs_board_above(const struct gpuslice_board *b, uint32_t priority, uint64_t now_ns,
                   uint64_t grace_ns)
{
    uint64_t lat = __atomic_load_n(&b->active_ns[1], __ATOMIC_ACQUIRE);
    uint64_t nor = __atomic_load_n(&b->active_ns[0], __ATOMIC_ACQUIRE);

    if (priority == GPUSLICE_PRIORITY_UNSET)
        priority = GPUSLICE_PRIORITY_NORMAL;
    /* A stamp from the future (a foreign writer) counts only for grace_ns from now. */
    if (priority < GPUSLICE_PRIORITY_LATENCY && lat != 0 && now_ns < lat + grace_ns &&
        lat < now_ns + grace_ns)
        return GPUSLICE_PRIORITY_LATENCY;
    if (priority < GPUSLICE_PRIORITY_NORMAL && nor != 0 && now_ns < nor + grace_ns &&
        nor < now_ns + grace_ns)
        return GPUSLICE_PRIORITY_NORMAL;
    return 0;
}

int gs_board_waiting(const struct gpuslice_board *b, uint64_t now_ns)
{
    uint64_t seen = __atomic_load_n(&b->waiter_seen_ns, __ATOMIC_ACQUIRE);

    return seen != 0 && now_ns < seen + WAITER_FRESH_NS;
}

/* ---- the daemon's boards, shared by its tenants' processes across users ---- */

int gs_board_make_shared(const uint8_t uuid[16])
{
    struct gpuslice_board *b;
    int fd, r;

    if ((fd = memfd_create("gpuslice-board", MFD_CLOEXEC | MFD_ALLOW_SEALING)) < 0)
        return -errno;
    if ((r = gs_shm_allocate(fd, sizeof(*b))) < 0) {
        close(fd);
        return r;
    }
    if ((b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        r = -errno;
        close(fd);
        return r;
    }
    memcpy(b->uuid, uuid, 16);
    b->abi_version = GPUSLICE_BOARD_ABI_VERSION;
    b->size = sizeof(*b);
    __atomic_store_n(&b->magic, GPUSLICE_BOARD_MAGIC, __ATOMIC_RELEASE);
    munmap(b, sizeof(*b));
    /* Every holder of the descriptor may write it; none may cut it short (SIGBUS) or grow it. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) < 0) {
        r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int gs_board_send(int conn, const int *fds, const uint8_t (*uuids)[16], int n)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * GS_BOARDS_MAX)];
        struct cmsghdr align;
    } c;
    uint8_t data[4 + 16 * GS_BOARDS_MAX];
    struct iovec iov;
    struct msghdr m;
    struct cmsghdr *h;
    uint32_t cnt = (uint32_t)n;

    if (n < 0 || n > GS_BOARDS_MAX)
        return -EINVAL;
    memcpy(data, &cnt, 4);
    memcpy(data + 4, uuids, 16 * (size_t)n);
    memset(&m, 0, sizeof(m));
    iov.iov_base = data;
    iov.iov_len = 4 + 16 * (size_t)n;
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (n > 0) {
        memset(&c, 0, sizeof(c));
        m.msg_control = c.buf;
        m.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        h = CMSG_FIRSTHDR(&m);
        h->cmsg_level = SOL_SOCKET;
        h->cmsg_type = SCM_RIGHTS;
        h->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(h), fds, sizeof(int) * (size_t)n);
    }
    /* Never waits for a peer that does not read: the whole answer fits a socket's buffer. */
    return sendmsg(conn, &m, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 ? -errno : 0;
}

/* Whether fd is a board the daemon made: sealed against shrinking, of the layout, of uuid. */
static struct gpuslice_board *map_shared(int fd, const uint8_t uuid[16], char *note, size_t notelen)
{
    struct gpuslice_board *b;
    struct stat st;
    int seals = fcntl(fd, F_GET_SEALS);

    if (seals < 0 || !(seals & F_SEAL_SHRINK) || fstat(fd, &st) < 0 ||
        (size_t)st.st_size < sizeof(*b)) {
        if (note && notelen)
            snprintf(note, notelen, "the daemon's board is not sealed memory of %zu bytes",
                     sizeof(*b));
        return NULL;
    }
    b = mmap(NULL, sizeof(*b), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (b == MAP_FAILED)
        return NULL;
    if (gs_shm_check((const struct gpuslice_shm_header *)b, (size_t)st.st_size,
                     GPUSLICE_BOARD_MAGIC, GPUSLICE_BOARD_ABI_MAJOR, sizeof(*b), "board",
                     "the daemon's board", note, notelen) < 0 ||
        memcmp(b->uuid, uuid, 16) != 0) {
        munmap(b, sizeof(*b));
        return NULL;
    }
    return b;
}

int gs_board_open_shared(const char *dir, uint32_t daemon_uid, const uint8_t uuid[16],
                         struct gpuslice_board **out, char *note, size_t notelen)
{
    union {
        char buf[CMSG_SPACE(sizeof(int) * GS_BOARDS_MAX)];
        struct cmsghdr align;
    } c;
    uint8_t data[4 + 16 * GS_BOARDS_MAX + 1];
    struct sockaddr_un sa;
    struct timeval tv = { 1, 0 };
    struct ucred cred = { 0, 0, 0 };
    socklen_t cl = sizeof(cred);
    struct iovec iov;
    struct msghdr m;
    struct cmsghdr *h;
    int fds[GS_BOARDS_MAX], nfd = 0, s, i, r = -ENOENT;
    uint32_t cnt;
    ssize_t got;

    *out = NULL;
    if (note && notelen)
        note[0] = '\0';
    memset(&sa, 0, sizeof(sa));
    sa.sun_family = AF_UNIX;
    if ((size_t)snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/" GS_BOARDS_SOCKET, dir) >=
        sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    if ((s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0)
        return -errno;
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        r = -errno;
        close(s);
        return r;
    }
    /* Only the daemon's user serves its boards (a socket planted by another is not its). */
    if (getsockopt(s, SOL_SOCKET, SO_PEERCRED, &cred, &cl) < 0 || cred.uid != daemon_uid) {
        if (note && notelen)
            snprintf(note, notelen, "%s is served by uid %u, not the daemon's (%u)", sa.sun_path,
                     (unsigned)cred.uid, (unsigned)daemon_uid);
        close(s);
        return -EPERM;
    }
    memset(&m, 0, sizeof(m));
    iov.iov_base = data;
    iov.iov_len = sizeof(data);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = c.buf;
    m.msg_controllen = sizeof(c.buf);
    do
        got = recvmsg(s, &m, MSG_CMSG_CLOEXEC);
    while (got < 0 && errno == EINTR);
    r = got < 0 ? -errno : 0;
    close(s);
    for (h = got >= 0 ? CMSG_FIRSTHDR(&m) : NULL; h; h = CMSG_NXTHDR(&m, h))
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
            int k = (int)((h->cmsg_len - CMSG_LEN(0)) / sizeof(int));

            for (i = 0; i < k; i++) {
                int fd;

                memcpy(&fd, CMSG_DATA(h) + sizeof(int) * (size_t)i, sizeof(int));
                if (nfd < GS_BOARDS_MAX)
                    fds[nfd++] = fd;
                else
                    close(fd);
            }
        }
    if (r == 0 && (got < 4 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))))
        r = -EPROTO;
    if (r == 0) {
        memcpy(&cnt, data, 4);
        if (cnt != (uint32_t)nfd || (size_t)got != 4 + 16 * (size_t)cnt)
            r = -EPROTO;
    }
    if (r == 0) {
        r = -ENOENT; /* no board of this GPU: the daemon does not know it */
        for (i = 0; i < nfd; i++)
            if (memcmp(data + 4 + 16 * (size_t)i, uuid, 16) == 0) {
                *out = map_shared(fds[i], uuid, note, notelen);
                r = *out ? 0 : -EPROTO;
                break;
            }
    }
    for (i = 0; i < nfd; i++)
        close(fds[i]);
    return r;
}
