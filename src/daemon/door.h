/*
 * The front door of the daemon's HTTP listeners (door.c): who may open one more connection
 * (at most `max` at once, at most `per_peer` of one peer, `reserve` more kept for the
 * privileged; when the door is full, a newcomer takes the place of the connection whose
 * request has waited longest, once it has waited `evict_after`), each request's deadline (a
 * connection past it is shut down), and the memory that request bodies and their parsed JSON
 * may take, all listeners together. No part of it waits on a peer; its functions take the
 * doors' own lock, never gd.mu.
 */
#ifndef GPUSLICE_DAEMON_DOOR_H
#define GPUSLICE_DAEMON_DOOR_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Who is at the other end: a uid on a unix socket, an address (IPv4 as IPv6) on TCP. */
struct gd_door_key {
    int tcp;
    uid_t uid;
    uint8_t addr[16];
};

struct gd_conn;

struct gd_door {
    long max;                /* connections at once for anyone */
    long reserve;            /* more, for privileged peers only */
    long per_peer;           /* connections of one unprivileged peer */
    uint64_t timeout_ns;     /* a request's time, whole */
    uint64_t evict_after_ns; /* a request this old gives its place to a newcomer */
    /* Below: the door's own, under its lock. */
    int n;            /* connections in */
    int ncut;         /* of them, shut down (gone once the server closes them) */
    uint64_t entered; /* connections entered since the start: gd_door_wait waits on it */
    struct gd_conn *head;
};

/* Sets up d (zeroed) with its limits. */
void gd_door_init(struct gd_door *d, long max, long reserve, long per_peer, uint64_t timeout_ns,
                  uint64_t evict_after_ns);

/* The peer of connected socket fd into k; *privileged: root or the daemon's user on a unix
 * socket. 0 or a negative errno. */
int gd_door_key_of(int fd, int tcp, struct gd_door_key *k, int *privileged);

/*
 * Whether k may open one more connection at now (CLOCK_MONOTONIC ns): 0, -EUSERS (an
 * unprivileged peer holds `per_peer`) or -EMFILE (the door holds `max` connections, or max +
 * reserve for a privileged peer, and none of the unprivileged has waited `evict_after` on its
 * request); *held is then how many. A full door makes room by shutting down the unprivileged
 * connection whose request has waited longest, once it has waited that long.
 */
int gd_door_check(struct gd_door *d, const struct gd_door_key *k, int privileged, uint64_t now_ns,
                  int *held);

/*
 * Counts connection fd of k in (checked again: a connection the check refuses is shut down and
 * *refused set); its first request starts at now. The record, freed by gd_door_leave; NULL
 * when refused or without memory (fd is then shut down).
 */
struct gd_conn *gd_door_enter(struct gd_door *d, int fd, const struct gd_door_key *k,
                              int privileged, uint64_t now_ns, int *refused);

/* The connection is gone (before its fd is closed): uncounted and freed. NULL is fine. */
void gd_door_leave(struct gd_door *d, struct gd_conn *c);

/*
 * A request (or its answer) of c starts at now: it must be done by now + timeout. now 0: c
 * serves a stream, with no deadline, never given up for a newcomer. NULL is fine.
 */
void gd_door_start(struct gd_conn *c, uint64_t now_ns);

/* Shuts down every connection of d past its deadline at now; returns how many. */
int gd_door_expire(struct gd_door *d, uint64_t now_ns);

/* The count gd_door_enter raises, and a wait (at most ms) until it passes seen. */
uint64_t gd_door_entered(struct gd_door *d);
void gd_door_wait(struct gd_door *d, uint64_t seen, int ms);

/* How many connections d holds (those shut down and not yet closed left out). */
int gd_door_count(struct gd_door *d);

/*
 * The memory of requests in flight: bodies and their parsed JSON, bounded by a total. Takes
 * n bytes: 0, or -ENOMEM when they would pass the total (nothing taken).
 */
int gd_mem_take(size_t n);
void gd_mem_give(size_t n);
void gd_mem_init(size_t total);
size_t gd_mem_total(void);
size_t gd_mem_used(void);

/*
 * An upper bound of the memory jansson takes to parse the JSON text s (len bytes), the text
 * included: the text, its lexer's buffer and its strings copied are 4 times len; each object
 * or array, key and value costs its node and its share of the container's table (measured
 * with jansson 2.14: 227 bytes an empty object, 133 an empty array, 107 a member, 88 a
 * string, 40 an integer).
 */
size_t gd_json_cost(const char *s, size_t len);

/* The part of gd_json_cost that depends on len alone: what any text of len bytes takes. */
size_t gd_json_cost_floor(size_t len);

#endif
