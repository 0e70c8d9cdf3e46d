/*
 * The HTTP listeners' front door (src/daemon/door.c): a peer's share, the room kept for the
 * privileged, a full door giving the place of its slowest request to a newcomer (never a
 * privileged one's, never a stream's), deadlines that shut a connection down, peers named by
 * the kernel, the request memory bound, and the JSON cost being an upper bound of what jansson
 * really allocates to parse a text (counted with allocation hooks of its own).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/door.h"

#define SEC 1000000000ULL

/* A connected pair: the door gets [0], the test watches [1]. */
static void pair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
}

/* Whether the far end sees the near end shut down (read gives 0 at once). */
static int shut(int far)
{
    char c;
    struct timeval tv = { 0, 1000 };

    setsockopt(far, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return recv(far, &c, 1, 0) == 0;
}

static struct gd_door_key uid_key(uid_t uid)
{
    struct gd_door_key k;

    memset(&k, 0, sizeof(k));
    k.uid = uid;
    return k;
}

struct conns {
    int sv[16][2];
    struct gd_conn *c[16];
    int n;
};

static struct gd_conn *enter(struct gd_door *d, struct conns *cs, uid_t uid, int privileged,
                             uint64_t now)
{
    struct gd_door_key k = uid_key(uid);
    int refused, i = cs->n++;

    pair(cs->sv[i]);
    cs->c[i] = gd_door_enter(d, cs->sv[i][0], &k, privileged, now, &refused);
    assert_int_equal(refused, cs->c[i] == NULL);
    return cs->c[i];
}

static void leave_all(struct gd_door *d, struct conns *cs)
{
    int i;

    for (i = 0; i < cs->n; i++) {
        gd_door_leave(d, cs->c[i]);
        close(cs->sv[i][0]);
        close(cs->sv[i][1]);
    }
    cs->n = 0;
    assert_int_equal(gd_door_count(d), 0);
}

static void test_a_peer_gets_its_share_and_no_more(void **state)
{
    struct gd_door d;
    struct conns cs = { .n = 0 };
    struct gd_door_key k = uid_key(1000), other = uid_key(1001);
    int held, i;

    (void)state;
    gd_door_init(&d, 8, 2, 3, 10 * SEC, SEC);
    for (i = 0; i < 3; i++) {
        assert_int_equal(gd_door_check(&d, &k, 0, 0, &held), 0);
        assert_non_null(enter(&d, &cs, 1000, 0, 0));
    }
    assert_int_equal(gd_door_check(&d, &k, 0, 0, &held), -EUSERS);
    assert_int_equal(held, 3);
    /* Counted again when it enters: a fourth is refused and shut down. */
    assert_null(enter(&d, &cs, 1000, 0, 0));
    assert_true(shut(cs.sv[3][1]));
    assert_int_equal(gd_door_check(&d, &other, 0, 0, &held), 0);
    /* One of its own leaves: room again. */
    gd_door_leave(&d, cs.c[0]);
    cs.c[0] = NULL;
    assert_int_equal(gd_door_check(&d, &k, 0, 0, &held), 0);
    leave_all(&d, &cs);
}

static void test_the_privileged_have_room_of_their_own(void **state)
{
    struct gd_door d;
    struct conns cs = { .n = 0 };
    struct gd_door_key root = uid_key(0), u = uid_key(2000);
    int held, i;

    (void)state;
    gd_door_init(&d, 4, 2, 4, 10 * SEC, SEC);
    /* The privileged are not one peer: more than per_peer of them, within max + reserve. */
    for (i = 0; i < 4; i++)
        assert_non_null(enter(&d, &cs, 0, 1, 10 * SEC));
    assert_int_equal(gd_door_check(&d, &u, 0, 10 * SEC, &held), -EMFILE);
    assert_int_equal(held, 4);
    assert_int_equal(gd_door_check(&d, &root, 1, 10 * SEC, &held), 0);
    assert_non_null(enter(&d, &cs, 0, 1, 10 * SEC));
    assert_non_null(enter(&d, &cs, 0, 1, 10 * SEC));
    assert_int_equal(gd_door_check(&d, &root, 1, 10 * SEC, &held), -EMFILE);
    /* And a privileged one is never evicted, however long its request has waited. */
    assert_int_equal(gd_door_check(&d, &u, 0, 15 * SEC, &held), -EMFILE);
    assert_int_equal(gd_door_check(&d, &root, 1, 15 * SEC, &held), -EMFILE);
    for (i = 0; i < cs.n; i++)
        assert_false(shut(cs.sv[i][1]));
    leave_all(&d, &cs);
}

static void test_a_full_door_evicts_the_request_that_waited_longest(void **state)
{
    struct gd_door d;
    struct conns cs = { .n = 0 };
    struct gd_door_key k = uid_key(3000);
    int held, i;

    (void)state;
    gd_door_init(&d, 4, 0, 8, 10 * SEC, SEC);
    enter(&d, &cs, 2001, 0, 3 * SEC);
    enter(&d, &cs, 2002, 0, 1 * SEC); /* the oldest request */
    enter(&d, &cs, 2003, 0, 2 * SEC);
    enter(&d, &cs, 2004, 0, 0);
    gd_door_start(cs.c[3], 0); /* a stream: never evicted */
    /* At 1.5 s none has waited a second (the oldest, 0.5 s); at 2.5 s 2002's has. */
    assert_int_equal(gd_door_check(&d, &k, 0, 1 * SEC + SEC / 2, &held), -EMFILE);
    assert_int_equal(gd_door_check(&d, &k, 0, 2 * SEC + SEC / 2, &held), 0);
    assert_true(shut(cs.sv[1][1]));
    for (i = 0; i < 4; i++)
        if (i != 1)
            assert_false(shut(cs.sv[i][1]));
    /* The evicted one is not counted while the server closes it: the newcomer enters. */
    assert_int_equal(gd_door_count(&d), 3);
    assert_non_null(enter(&d, &cs, 3000, 0, 3 * SEC + SEC / 2));
    /* A request that starts again is young again: the next oldest is 2001's at 3 s. */
    gd_door_start(cs.c[2], 5 * SEC);
    assert_int_equal(gd_door_check(&d, &k, 0, 4 * SEC + SEC / 2, &held), 0);
    assert_true(shut(cs.sv[0][1]));
    assert_false(shut(cs.sv[2][1]));
    leave_all(&d, &cs);
}

static void test_a_request_past_its_deadline_is_shut_down(void **state)
{
    struct gd_door d;
    struct conns cs = { .n = 0 };
    const uint64_t t0 = 10 * SEC; /* a monotonic clock is never 0: 0 is a stream */

    (void)state;
    gd_door_init(&d, 8, 0, 8, 2 * SEC, SEC);
    enter(&d, &cs, 1, 0, t0);
    enter(&d, &cs, 2, 0, t0 + SEC);
    enter(&d, &cs, 3, 0, t0);
    gd_door_start(cs.c[2], 0); /* a stream */
    assert_int_equal(gd_door_expire(&d, t0 + 2 * SEC - 1), 0);
    assert_int_equal(gd_door_expire(&d, t0 + 2 * SEC), 1);
    assert_true(shut(cs.sv[0][1]));
    assert_false(shut(cs.sv[1][1]));
    /* A new request restarts the clock. */
    gd_door_start(cs.c[1], t0 + 2 * SEC);
    assert_int_equal(gd_door_expire(&d, t0 + 3 * SEC + SEC / 2), 0);
    assert_int_equal(gd_door_expire(&d, t0 + 4 * SEC), 1);
    assert_true(shut(cs.sv[1][1]));
    /* Once only, and never a stream. */
    assert_int_equal(gd_door_expire(&d, t0 + 100 * SEC), 0);
    assert_false(shut(cs.sv[2][1]));
    assert_int_equal(gd_door_count(&d), 1);
    leave_all(&d, &cs);
}

static void test_peers_are_named_by_the_kernel(void **state)
{
    struct gd_door_key k, k6;
    struct sockaddr_in a;
    struct sockaddr_in6 a6;
    socklen_t len = sizeof(a);
    int sv[2], l, c, s, privileged;
    static const uint8_t mapped[16] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1 };

    (void)state;
    pair(sv);
    assert_int_equal(gd_door_key_of(sv[0], 0, &k, &privileged), 0);
    assert_int_equal(k.uid, getuid());
    assert_int_equal(privileged, getuid() == 0 || getuid() == geteuid());
    close(sv[0]);
    close(sv[1]);
    /*
     * As root, for a daemon run as a plain user (65534 here): its own user is privileged (its
     * liveness probe, its operator), another plain user is not. The kernel names a peer by the
     * effective uid it had when the socket was made.
     */
    if (geteuid() == 0) {
        assert_int_equal(seteuid(65534), 0);
        pair(sv);
        assert_int_equal(gd_door_key_of(sv[0], 0, &k, &privileged), 0);
        assert_int_equal(k.uid, 65534);
        assert_true(privileged);
        assert_int_equal(seteuid(0), 0);
        assert_int_equal(seteuid(65533), 0);
        assert_int_equal(gd_door_key_of(sv[0], 0, &k, &privileged), 0);
        assert_int_equal(k.uid, 65534);
        assert_false(privileged);
        assert_int_equal(seteuid(0), 0);
        close(sv[0]);
        close(sv[1]);
    }
    /* TCP: the peer's address, IPv4 as IPv6 maps it. */
    l = socket(AF_INET, SOCK_STREAM, 0);
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&a, sizeof(a)), 0);
    assert_int_equal(listen(l, 4), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&a, &len), 0);
    c = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
    s = accept(l, NULL, NULL);
    assert_int_equal(gd_door_key_of(s, 1, &k, &privileged), 0);
    assert_true(k.tcp);
    assert_false(privileged);
    assert_memory_equal(k.addr, mapped, 16);
    close(s);
    close(c);
    close(l);
    /* IPv6 ::1, where the host has it: another peer than 127.0.0.1. */
    l = socket(AF_INET6, SOCK_STREAM, 0);
    memset(&a6, 0, sizeof(a6));
    a6.sin6_family = AF_INET6;
    a6.sin6_addr = in6addr_loopback;
    len = sizeof(a6);
    if (l >= 0 && bind(l, (struct sockaddr *)&a6, sizeof(a6)) == 0 && listen(l, 4) == 0 &&
        getsockname(l, (struct sockaddr *)&a6, &len) == 0) {
        c = socket(AF_INET6, SOCK_STREAM, 0);
        assert_int_equal(connect(c, (struct sockaddr *)&a6, sizeof(a6)), 0);
        s = accept(l, NULL, NULL);
        assert_int_equal(gd_door_key_of(s, 1, &k6, &privileged), 0);
        assert_memory_equal(k6.addr, &in6addr_loopback, 16);
        assert_memory_not_equal(k6.addr, k.addr, 16);
        close(s);
        close(c);
    }
    if (l >= 0)
        close(l);
}

static void test_request_memory_is_bounded(void **state)
{
    (void)state;
    gd_mem_init(1000);
    assert_int_equal(gd_mem_take(600), 0);
    assert_int_equal(gd_mem_take(401), -ENOMEM);
    assert_int_equal(gd_mem_used(), 600);
    assert_int_equal(gd_mem_take(400), 0);
    assert_int_equal(gd_mem_take(1), -ENOMEM);
    gd_mem_give(1000);
    assert_int_equal(gd_mem_take(1001), -ENOMEM);
    assert_int_equal(gd_mem_take((size_t)-1), -ENOMEM);
    assert_int_equal(gd_mem_used(), 0);
    assert_int_equal(gd_mem_total(), 1000);
}

/* jansson's allocations, counted: what is held now, and the most held. */
static size_t held_now, held_peak;

static void *count_malloc(size_t n)
{
    size_t *p = malloc(n + sizeof(size_t) * 2);

    if (p == NULL)
        return NULL;
    p[0] = n;
    held_now += n;
    if (held_now > held_peak)
        held_peak = held_now;
    return p + 2;
}

static void count_free(void *q)
{
    size_t *p = q;

    if (p == NULL)
        return;
    held_now -= p[-2];
    free(p - 2);
}

/* Parses text under the counting allocator: the most jansson held, the text included. */
static size_t parse_peak(const char *text, size_t len)
{
    json_error_t e;
    json_t *o;

    held_now = held_peak = 0;
    o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &e);
    json_decref(o);
    assert_int_equal(held_now, 0);
    return held_peak + len;
}

static char *repeat(const char *head, const char *unit, const char *sep, const char *tail, size_t n,
                    size_t *len)
{
    size_t ul = strlen(unit), sl = strlen(sep), i, at = 0;
    char *s = malloc(strlen(head) + n * (ul + sl + 24) + strlen(tail) + 1);

    at += (size_t)sprintf(s + at, "%s", head);
    for (i = 0; i < n; i++) {
        const char *hash = strchr(unit, '#'); /* numbered: '#' is i */

        if (hash)
            at += (size_t)sprintf(s + at, "%.*s%zu%s", (int)(hash - unit), unit, i, hash + 1);
        else
            at += (size_t)sprintf(s + at, "%s", unit);
        if (i + 1 < n)
            at += (size_t)sprintf(s + at, "%s", sep);
    }
    at += (size_t)sprintf(s + at, "%s", tail);
    *len = at;
    return s;
}

static void test_json_cost_bounds_what_parsing_takes(void **state)
{
    static const struct {
        const char *head, *unit, *sep, *tail;
        size_t n;
    } cases[] = {
        { "[", "{}", ",", "]", 20000 },
        { "[", "[]", ",", "]", 20000 },
        { "[", "1", ",", "]", 30000 },
        { "[", "\"\"", ",", "]", 30000 },
        { "[", "1.5e3", ",", "]", 20000 },
        { "{", "\"k#\":0", ",", "}", 20000 },
        { "{", "\"k#\":{\"a\":[1,{}]}", ",", "}", 5000 },
        { "", "[", "", "", 1000 },
        { "[", "\"#\\u00e9\\n\"", ",", "]", 10000 },
        { "{\"x\":\"", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "", "\"}",
          20000 },
        { "[", "true", ",", "]", 20000 },
        { "[", "null", ",", "]", 20000 },
    };
    size_t i;

    (void)state;
    json_set_alloc_funcs(count_malloc, count_free);
    for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        size_t len, took, cost;
        char *s =
            repeat(cases[i].head, cases[i].unit, cases[i].sep, cases[i].tail, cases[i].n, &len);

        took = parse_peak(s, len);
        cost = gd_json_cost(s, len);
        print_message("%-24s %8zu bytes: parsing took %9zu, cost %9zu\n", cases[i].unit, len, took,
                      cost);
        assert_true(cost >= took);
        assert_true(cost >= gd_json_cost_floor(len));
        free(s);
    }
    /* The floor is what any text of that length is charged before it is read. */
    assert_int_equal(gd_json_cost("", 0), gd_json_cost_floor(0));
    assert_int_equal(gd_json_cost("\"{[:,\"", 6), gd_json_cost_floor(6));
    json_set_alloc_funcs(malloc, free);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_peer_gets_its_share_and_no_more),
        cmocka_unit_test(test_the_privileged_have_room_of_their_own),
        cmocka_unit_test(test_a_full_door_evicts_the_request_that_waited_longest),
        cmocka_unit_test(test_a_request_past_its_deadline_is_shut_down),
        cmocka_unit_test(test_peers_are_named_by_the_kernel),
        cmocka_unit_test(test_request_memory_is_bounded),
        cmocka_unit_test(test_json_cost_bounds_what_parsing_takes),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
