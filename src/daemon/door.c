/*
 * The front door of the HTTP listeners (door.h): the connections each listener holds, by peer,
 * with their deadlines, and the memory of requests in flight. A slow or idle client, or many
 * of them from one peer, must not keep another client out: each peer has a share of the
 * door, the privileged (root, the daemon's user: the liveness probe, an admin) have room of
 * their own, a full door gives the place of its slowest request to a newcomer, and a request
 * that is not whole and answered by its deadline loses its connection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "daemon/door.h"

struct gd_conn {
    struct gd_conn *prev, *next;
    struct gd_door *door;
    int fd;
    int privileged;
    int cut; /* shut down: past its deadline, or given up for a newcomer */
    struct gd_door_key key;
    /* When its request started, 0 for a stream (atomic: the HTTP threads set it). */
    uint64_t since_ns;
};

/* One lock for every door: the doors change a few times a request, never for long. */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t entered_cond = PTHREAD_COND_INITIALIZER;

void gd_door_init(struct gd_door *d, long max, long reserve, long per_peer, uint64_t timeout_ns,
                  uint64_t evict_after_ns)
{
    memset(d, 0, sizeof(*d));
    d->max = max;
    d->reserve = reserve;
    d->per_peer = per_peer;
    d->timeout_ns = timeout_ns;
    d->evict_after_ns = evict_after_ns;
}

int gd_door_key_of(int fd, int tcp, struct gd_door_key *k, int *privileged)
{
    memset(k, 0, sizeof(*k));
    *privileged = 0;
    k->tcp = tcp;
    if (!tcp) {
        struct ucred cred;
        socklen_t len = sizeof(cred);

        if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
            return -errno;
        k->uid = cred.uid;
        *privileged = cred.uid == 0 || cred.uid == geteuid();
    } else {
        struct sockaddr_storage ss;
        socklen_t len = sizeof(ss);

        if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
            return -errno;
        if (ss.ss_family == AF_INET) {
            /* As IPv6 maps it, so that one host is one peer over either. */
            k->addr[10] = k->addr[11] = 0xff;
            memcpy(k->addr + 12, &((struct sockaddr_in *)&ss)->sin_addr, 4);
        } else if (ss.ss_family == AF_INET6) {
            memcpy(k->addr, &((struct sockaddr_in6 *)&ss)->sin6_addr, 16);
        } else {
            return -EAFNOSUPPORT;
        }
    }
    return 0;
}

static int same_peer(const struct gd_door_key *a, const struct gd_door_key *b)
{
    return a->tcp == b->tcp &&
           (a->tcp ? memcmp(a->addr, b->addr, sizeof(a->addr)) == 0 : a->uid == b->uid);
}

static void cut(struct gd_door *d, struct gd_conn *c)
{
    c->cut = 1;
    d->ncut++;
    shutdown(c->fd, SHUT_RDWR); /* the server sees the end and closes it */
}

/* Room for one more at now, from the unprivileged connection that has waited longest. Under mu. */
static int evict(struct gd_door *d, uint64_t now)
{
    struct gd_conn *c, *oldest = NULL;
    uint64_t oldest_since = 0;

    for (c = d->head; c; c = c->next) {
        uint64_t since = __atomic_load_n(&c->since_ns, __ATOMIC_RELAXED);

        if (c->cut || c->privileged || since == 0 || now < since + d->evict_after_ns)
            continue;
        if (oldest == NULL || since < oldest_since) {
            oldest = c;
            oldest_since = since;
        }
    }
    if (oldest == NULL)
        return -EMFILE;
    cut(d, oldest);
    return 0;
}

/* Under mu. */
static int check(struct gd_door *d, const struct gd_door_key *k, int privileged, uint64_t now,
                 int *held)
{
    const struct gd_conn *c;
    int live = d->n - d->ncut, mine = 0;

    *held = live;
    if (privileged)
        return live < d->max + d->reserve ? 0 : evict(d, now);
    for (c = d->head; c; c = c->next)
        if (!c->cut && !c->privileged && same_peer(&c->key, k))
            mine++;
    if (mine >= d->per_peer) {
        *held = mine;
        return -EUSERS;
    }
    return live < d->max ? 0 : evict(d, now);
}

int gd_door_check(struct gd_door *d, const struct gd_door_key *k, int privileged, uint64_t now_ns,
                  int *held)
{
    int r;

    pthread_mutex_lock(&mu);
    r = check(d, k, privileged, now_ns, held);
    pthread_mutex_unlock(&mu);
    return r;
}

struct gd_conn *gd_door_enter(struct gd_door *d, int fd, const struct gd_door_key *k,
                              int privileged, uint64_t now_ns, int *refused)
{
    struct gd_conn *c = NULL;
    int held;

    *refused = 0;
    pthread_mutex_lock(&mu);
    if (check(d, k, privileged, now_ns, &held) < 0 || (c = calloc(1, sizeof(*c))) == NULL) {
        *refused = 1;
        shutdown(fd, SHUT_RDWR);
    } else {
        c->door = d;
        c->fd = fd;
        c->privileged = privileged;
        c->key = *k;
        c->since_ns = now_ns;
        c->next = d->head;
        if (d->head)
            d->head->prev = c;
        d->head = c;
        d->n++;
    }
    d->entered++;
    pthread_cond_broadcast(&entered_cond);
    pthread_mutex_unlock(&mu);
    return c;
}

void gd_door_leave(struct gd_door *d, struct gd_conn *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&mu);
    if (c->prev)
        c->prev->next = c->next;
    else
        d->head = c->next;
    if (c->next)
        c->next->prev = c->prev;
    d->n--;
    if (c->cut)
        d->ncut--;
    pthread_mutex_unlock(&mu);
    free(c);
}

void gd_door_start(struct gd_conn *c, uint64_t now_ns)
{
    if (c)
        __atomic_store_n(&c->since_ns, now_ns, __ATOMIC_RELAXED);
}

int gd_door_expire(struct gd_door *d, uint64_t now_ns)
{
    struct gd_conn *c;
    int n = 0;

    /* Under the lock: the fd is not closed (nor reused) before gd_door_leave. */
    pthread_mutex_lock(&mu);
    for (c = d->head; c; c = c->next) {
        uint64_t since = __atomic_load_n(&c->since_ns, __ATOMIC_RELAXED);

        if (since == 0 || now_ns < since + d->timeout_ns || c->cut)
            continue;
        cut(d, c);
        n++;
    }
    pthread_mutex_unlock(&mu);
    return n;
}

uint64_t gd_door_entered(struct gd_door *d)
{
    uint64_t v;

    pthread_mutex_lock(&mu);
    v = d->entered;
    pthread_mutex_unlock(&mu);
    return v;
}

void gd_door_wait(struct gd_door *d, uint64_t seen, int ms)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&mu);
    while (d->entered == seen && pthread_cond_timedwait(&entered_cond, &mu, &ts) == 0)
        ;
    pthread_mutex_unlock(&mu);
}

int gd_door_count(struct gd_door *d)
{
    int n;

    pthread_mutex_lock(&mu);
    n = d->n - d->ncut;
    pthread_mutex_unlock(&mu);
    return n;
}

static size_t mem_total, mem_used;

void gd_mem_init(size_t total)
{
    __atomic_store_n(&mem_total, total, __ATOMIC_RELAXED);
}

int gd_mem_take(size_t n)
{
    size_t used = __atomic_load_n(&mem_used, __ATOMIC_RELAXED);
    size_t total = __atomic_load_n(&mem_total, __ATOMIC_RELAXED);

    do {
        if (n > total || used > total - n)
            return -ENOMEM;
    } while (!__atomic_compare_exchange_n(&mem_used, &used, used + n, 0, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
    return 0;
}

void gd_mem_give(size_t n)
{
    __atomic_sub_fetch(&mem_used, n, __ATOMIC_RELAXED);
}

size_t gd_mem_total(void)
{
    return __atomic_load_n(&mem_total, __ATOMIC_RELAXED);
}

size_t gd_mem_used(void)
{
    return __atomic_load_n(&mem_used, __ATOMIC_RELAXED);
}

size_t gd_json_cost_floor(size_t len)
{
    /*
     * The text, the lexer's buffer (which doubles to hold the longest string), the strings
     * copied into the tree, one value's node.
     */
    return 4 * len + 256;
}

size_t gd_json_cost(const char *s, size_t len)
{
    size_t cost = gd_json_cost_floor(len), i;
    int in_str = 0;

    for (i = 0; i < len; i++) {
        char ch = s[i];

        if (in_str) {
            if (ch == '\\')
                i++;
            else if (ch == '"')
                in_str = 0;
            continue;
        }
        switch (ch) {
        case '"':
            in_str = 1;
            break;
        case '{':
        case '[':
            cost += 256;
            break;
        case ':':
        case ',':
            cost += 128;
            break;
        default:
            break;
        }
    }
    return cost;
}
