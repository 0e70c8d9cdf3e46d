/*
 * The watch decoder (src/daemon/kubewatch.c): events of a body fed whole, byte by byte and in
 * odd pieces are the same; keep-alive lines; BOOKMARK and ERROR 410; a body cut inside an
 * event; lines that are not events, and a line over the bound, refused with a message.
 */
#include <errno.h>
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/kubewatch.h"

static char seen[4096];

static int record(const struct gd_watch_event *ev, void *arg)
{
    static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
    const char *name =
        json_string_value(json_object_get(json_object_get(ev->object, "metadata"), "name"));
    size_t n = strlen(seen);

    (void)arg;
    snprintf(seen + n, sizeof(seen) - n, "%s%s:%s:%s:%d", n ? " " : "", names[ev->type],
             name ? name : "-", ev->rv, ev->code);
    return 0;
}

static const char body[] =
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"101\"}}}\n"
    "\n"
    "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"102\"}}}\r\n"
    "{\"type\":\"DELETED\",\"object\":{\"kind\":\"Pod\",\"metadata\":{\"name\":\"a\","
    "\"resourceVersion\":\"103\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"kind\":\"Pod\",\"metadata\":{"
    "\"resourceVersion\":\"150\"}}}\n"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n";
static const char want[] =
    "ADDED:a:101:0 MODIFIED:a:102:0 DELETED:a:103:0 BOOKMARK:-:150:0 ERROR:-::410";

static void feed_in_pieces(size_t piece)
{
    struct gd_watch w;
    size_t i, n = strlen(body);

    seen[0] = '\0';
    gd_watch_init(&w, 1 << 16, record, NULL);
    for (i = 0; i < n; i += piece)
        assert_int_equal(gd_watch_feed(&w, body + i, i + piece <= n ? piece : n - i), 0);
    assert_int_equal(gd_watch_end(&w), 0);
    gd_watch_free(&w);
    assert_string_equal(seen, want);
}

static void test_the_same_events_in_any_pieces(void **state)
{
    size_t piece;

    (void)state;
    for (piece = 1; piece <= strlen(body); piece += piece < 20 ? 1 : 37)
        feed_in_pieces(piece);
}

static void test_a_body_cut_inside_an_event(void **state)
{
    struct gd_watch w;

    (void)state;
    seen[0] = '\0';
    gd_watch_init(&w, 1 << 16, record, NULL);
    assert_int_equal(gd_watch_feed(&w, body, 60), 0);
    assert_int_equal(gd_watch_end(&w), -EPIPE);
    assert_non_null(strstr(w.err, "inside an event"));
    gd_watch_free(&w);
    assert_string_equal(seen, "");
}

static int refused(const char *text, size_t max, const char *msg)
{
    struct gd_watch w;
    int r;

    seen[0] = '\0';
    gd_watch_init(&w, max, record, NULL);
    r = gd_watch_feed(&w, text, strlen(text));
    if (r < 0 && !strstr(w.err, msg))
        fail_msg("message \"%s\" lacks \"%s\"", w.err, msg);
    /* Once refused, it stays refused. */
    if (r < 0)
        assert_int_equal(gd_watch_feed(&w, "\n", 1), r);
    gd_watch_free(&w);
    return r;
}

static void test_what_is_not_an_event_is_refused(void **state)
{
    (void)state;
    assert_int_equal(refused("not json\n", 4096, "not JSON"), -EINVAL);
    assert_int_equal(refused("{\"type\":\"ADDED\"}\n", 4096, "known type"), -EINVAL);
    assert_int_equal(refused("{\"type\":\"UPSERT\",\"object\":{}}\n", 4096, "UPSERT"), -EINVAL);
    assert_int_equal(
        refused("{\"type\":\"ADDED\",\"object\":{\"metadata\":{}}}\n", 4096, "resourceVersion"),
        -EINVAL);
    assert_int_equal(
        refused("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":5}}}\n", 4096,
                "resourceVersion"),
        -EINVAL);
    assert_int_equal(refused("{\"type\":\"ERROR\",\"object\":{\"reason\":\"x\"}}\n", 4096, "code"),
                     -EINVAL);
    assert_int_equal(
        refused("{\"type\":\"ADDED\",\"type\":\"DELETED\",\"object\":{}}\n", 4096, "not JSON"),
        -EINVAL);
    /* A line over the bound, whole or in pieces. */
    assert_int_equal(refused(body, 40, "longer than the limit"), -E2BIG);
}

static void test_a_long_line_in_pieces_over_the_bound(void **state)
{
    struct gd_watch w;
    char big[300];

    (void)state;
    memset(big, 'x', sizeof(big));
    gd_watch_init(&w, 1000, record, NULL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gd_watch_feed(&w, big, sizeof(big)), 0);
    assert_int_equal(gd_watch_feed(&w, big, sizeof(big)), -E2BIG);
    gd_watch_free(&w);
}

static int stop_at_second(const struct gd_watch_event *ev, void *arg)
{
    int *n = arg;

    (void)ev;
    return ++*n == 2 ? -ECANCELED : 0;
}

static void test_the_reader_may_stop_it(void **state)
{
    struct gd_watch w;
    int n = 0;

    (void)state;
    gd_watch_init(&w, 4096, stop_at_second, &n);
    assert_int_equal(gd_watch_feed(&w, body, strlen(body)), -ECANCELED);
    assert_int_equal(n, 2);
    gd_watch_free(&w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_same_events_in_any_pieces),
        cmocka_unit_test(test_a_body_cut_inside_an_event),
        cmocka_unit_test(test_what_is_not_an_event_is_refused),
        cmocka_unit_test(test_a_long_line_in_pieces_over_the_bound),
        cmocka_unit_test(test_the_reader_may_stop_it),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
