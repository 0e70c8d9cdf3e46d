/*
 * Classes on a device: saying that this process's class has work there, and
 * seeing whether a higher class does. Among one user's tenants that is the
 * board's activity words (common/board.h). Tenants of the daemon's meet
 * tenants of other users there too, whose processes may write the daemon's
 * board but must not be believed about classes on it: each process of a
 * managed tenant stamps its class's activity in its own tenant's file
 * (tenant_abi.h, active_ns), and the others read that stamp with pread()
 * for the tenants the node segment, which only the daemon writes, gives a
 * higher class. A tenant's owner can only say its own tenant is busy, and
 * only at the class the daemon gave it. With mu held.
 */
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "common/node.h"
#include "preload/compute/compute_internal.h"

#define PEER_REFRESH_NS 100000000ULL /* the node's list of classed tenants, re-read this often */
#define PEER_CACHE_NS 200000ULL      /* a device's answer holds this long */
#define MAX_PEERS 64

/* A tenant of the daemon's of class normal (set) or latency, not this process's own. */
struct peer {
    uint32_t id, priority;
    int fd;             /* its state file, read-only; -1: could not be opened */
    int entry[MAX_ORD]; /* its device entry of our ordinal's GPU; -1 none, -2 not looked */
};

static struct peer peers[MAX_PEERS];
static int npeers;
static uint64_t peers_ns;

/* Whether name is a plain file name (nothing the daemon's entry could point elsewhere with). */
static int plain(const char *name)
{
    return name[0] && !strchr(name, '/') && strcmp(name, ".") && strcmp(name, "..");
}

static int open_peer(const struct gpuslice_node_tenant *t)
{
    char dir[sizeof(gs__state.node->tenant_dir)], path[PATH_MAX];
    struct stat st;
    int fd;

    memcpy(dir, gs__state.node->tenant_dir, sizeof(dir));
    dir[sizeof(dir) - 1] = '\0';
    if (!plain(t->state_file) || dir[0] != '/' ||
        (size_t)snprintf(path, sizeof(path), "%s/%.63s", dir, t->state_file) >= sizeof(path))
        return -1;
    if ((fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
        return -1;
    /* Its owner's, written by no one else, as the daemon made it. */
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != t->owner_uid ||
        (st.st_mode & (S_IWGRP | S_IWOTH))) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Re-reads which tenants have a class that others yield to, keeping open what stays. */
static void refresh(uint64_t now)
{
    const struct gpuslice_node *n = gs__state.node;
    struct peer next[MAX_PEERS];
    int i, j, k = 0;

    peers_ns = now;
    for (i = 0; i < GPUSLICE_NODE_MAX_TENANTS && k < MAX_PEERS; i++) {
        struct gpuslice_node_tenant t;
        uint32_t id = __atomic_load_n(&n->tenant[i].id, __ATOMIC_ACQUIRE);
        uint32_t p = __atomic_load_n(&n->tenant[i].priority, __ATOMIC_ACQUIRE);

        if (id == 0 || id == gs__state.node_id ||
            (p != GPUSLICE_PRIORITY_NORMAL && p != GPUSLICE_PRIORITY_LATENCY))
            continue;
        gs_node_read_tenant(n, i, &t);
        if (t.id != id ||
            (t.priority != GPUSLICE_PRIORITY_NORMAL && t.priority != GPUSLICE_PRIORITY_LATENCY))
            continue;
        for (j = 0; j < npeers && peers[j].id != id; j++)
            ;
        if (j < npeers && peers[j].fd >= 0) {
            next[k] = peers[j];
            peers[j].fd = -1; /* moved */
        } else {
            next[k].id = id;
            next[k].fd = open_peer(&t);
            for (j = 0; j < MAX_ORD; j++)
                next[k].entry[j] = -2;
        }
        next[k].priority = t.priority;
        if (next[k].fd >= 0)
            for (j = 0; j < MAX_ORD; j++)
                if (next[k].entry[j] == -1)
                    next[k].entry[j] = -2; /* a device it did not use yet: look again */
        k++;
    }
    for (j = 0; j < npeers; j++)
        if (peers[j].fd >= 0)
            close(peers[j].fd);
    memcpy(peers, next, sizeof(next[0]) * (size_t)k);
    npeers = k;
}

/* Peer p's stamp of the GPU of d, or 0. */
static uint64_t peer_stamp(struct peer *p, const struct gdev *d, int ord)
{
    uint64_t v = 0;

    if (p->fd < 0)
        return 0;
    if (p->entry[ord] == -2) {
        uint8_t uuids[GPUSLICE_MAX_DEVICES][88];
        int e;

        p->entry[ord] = -1;
        if (pread(p->fd, uuids, sizeof(uuids), offsetof(struct gpuslice_tenant, dev)) ==
            (ssize_t)sizeof(uuids))
            for (e = 0; e < GPUSLICE_MAX_DEVICES; e++)
                if (memcmp(uuids[e], gs__state.tenant->dev[d->entry].uuid, 16) == 0) {
                    p->entry[ord] = e;
                    break;
                }
    }
    if (p->entry[ord] < 0 || pread(p->fd, &v, sizeof(v),
                                   (off_t)(offsetof(struct gpuslice_tenant, active_ns) +
                                           8 * (size_t)p->entry[ord])) != (ssize_t)sizeof(v))
        return 0;
    return v;
}

/* The highest class above prio among the daemon's other tenants active on d, or 0. */
static int node_above(struct gdev *d, uint32_t prio, uint64_t now, uint64_t grace)
{
    int ord = (int)(d - gdevs), i, best = 0;

    if (now - d->peer_ns < PEER_CACHE_NS && d->peer_prio == prio)
        return d->peer_above;
    if (now - peers_ns >= PEER_REFRESH_NS || peers_ns == 0)
        refresh(now);
    if (prio == GPUSLICE_PRIORITY_UNSET)
        prio = GPUSLICE_PRIORITY_NORMAL;
    for (i = 0; i < npeers; i++) {
        uint64_t v;

        if (peers[i].priority <= prio || (int)peers[i].priority <= best)
            continue;
        v = peer_stamp(&peers[i], d, ord);
        /* A stamp from the future counts only for grace from now, as on a board. */
        if (v != 0 && now < v + grace && v < now + grace)
            best = (int)peers[i].priority;
    }
    d->peer_ns = now;
    d->peer_prio = prio;
    d->peer_above = best;
    return best;
}

int class_wanted(struct gdev *d, uint32_t prio)
{
    if (prio != GPUSLICE_PRIORITY_UNSET)
        return 1;
    if (d->board && !d->shared_board &&
        (__atomic_load_n(&d->board->active_ns[0], __ATOMIC_RELAXED) ||
         __atomic_load_n(&d->board->active_ns[1], __ATOMIC_RELAXED)))
        return 1;
    if (gs__state.node) {
        uint64_t now = now_ns();

        if (now - peers_ns >= PEER_REFRESH_NS || peers_ns == 0)
            refresh(now);
        return npeers > 0;
    }
    return 0;
}

void class_note(struct gdev *d, uint32_t prio, uint64_t now)
{
    struct gpuslice_tenant *t = gs__state.tenant;

    if (d->board && !d->shared_board)
        gs_board_active(d->board, prio, now);
    if (gs__state.node && t && t->size >= sizeof(*t) &&
        (prio == GPUSLICE_PRIORITY_NORMAL || prio == GPUSLICE_PRIORITY_LATENCY)) {
        uint64_t *w = &t->active_ns[d->entry], was = __atomic_load_n(w, __ATOMIC_RELAXED);

        /* One store per 50 us at most, as on a board. */
        if (now >= was + 50000 || was > now + 50000)
            __atomic_store_n(w, now, __ATOMIC_RELEASE);
    }
}

int class_above(struct gdev *d, uint32_t prio, uint64_t now, uint64_t grace)
{
    int a = 0, b;

    if (d->board && !d->shared_board)
        a = gs_board_above(d->board, prio, now, grace);
    if (gs__state.node && a != GPUSLICE_PRIORITY_LATENCY &&
        (b = node_above(d, prio, now, grace)) > a)
        a = b;
    return a;
}
