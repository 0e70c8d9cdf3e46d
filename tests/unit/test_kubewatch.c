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
    assert_string_equal(w.err, "stopped by its reader (-125)");
    /* The stop is kept: nothing more is decoded, and the end says why it stopped. */
    assert_int_equal(gd_watch_feed(&w, body, strlen(body)), -ECANCELED);
    assert_int_equal(gd_watch_end(&w), -ECANCELED);
    assert_int_equal(n, 2);
    gd_watch_free(&w);
}

/* An event line of exactly n bytes (n >= 80), its padding spaces inside the object. */
static void event_of(char *out, size_t n, const char *rv)
{
    int head = snprintf(out, n + 1, "{\"type\":\"ADDED\",\"object\":{\"metadata\":{"
                                    "\"resourceVersion\":\"%s\"}", rv);

    memset(out + head, ' ', n - (size_t)head - 2);
    out[n - 2] = '}';
    out[n - 1] = '}';
    out[n] = '\0';
}

static void test_a_line_of_exactly_the_bound(void **state)
{
    char ev[200], buf[202];
    struct gd_watch w;
    size_t piece;

    (void)state;
    event_of(ev, 150, "7");
    assert_int_equal(strlen(ev), 150);
    /* Whole in one feed (decoded in place) and in pieces (copied): 150 of 150 is taken. */
    for (piece = 1; piece <= 151; piece += piece < 8 ? 1 : 50) {
        size_t i;

        snprintf(buf, sizeof(buf), "%s\n", ev);
        seen[0] = '\0';
        gd_watch_init(&w, 150, record, NULL);
        for (i = 0; i < 151; i += piece)
            assert_int_equal(gd_watch_feed(&w, buf + i, i + piece <= 151 ? piece : 151 - i), 0);
        assert_int_equal(gd_watch_end(&w), 0);
        assert_string_equal(seen, "ADDED:-:7:0");
        gd_watch_free(&w);
        /* One byte more is refused, whole or in pieces, naming the bound. */
        gd_watch_init(&w, 149, record, NULL);
        for (i = 0; i < 151; i += piece)
            if (gd_watch_feed(&w, buf + i, i + piece <= 151 ? piece : 151 - i) < 0)
                break;
        assert_true(i < 151);
        assert_int_equal(w.failed, -E2BIG);
        assert_non_null(strstr(w.err, "(149 bytes)"));
        gd_watch_free(&w);
    }
    /* Blanks at a line's end (and a line of blanks) are not part of the event; the end of a
       body after blanks is clean. */
    seen[0] = '\0';
    gd_watch_init(&w, 160, record, NULL);
    assert_int_equal(gd_watch_feed(&w, ev, 150), 0);
    assert_int_equal(gd_watch_feed(&w, " \t\r\n \t\r\n \t", 9), 0);
    assert_int_equal(gd_watch_end(&w), 0);
    assert_string_equal(seen, "ADDED:-:7:0");
    gd_watch_free(&w);
}

static void test_the_ends_of_versions_and_codes(void **state)
{
    char rv[GD_WATCH_RV_MAX + 1], ev[GD_WATCH_RV_MAX + 200], want_seen[GD_WATCH_RV_MAX + 32];

    (void)state;
    memset(rv, '9', sizeof(rv));
    rv[GD_WATCH_RV_MAX - 1] = '\0'; /* the longest that fits */
    event_of(ev, strlen(rv) + 100, rv);
    strcat(ev, "\n");
    assert_int_equal(refused(ev, 1 << 16, "-"), 0);
    snprintf(want_seen, sizeof(want_seen), "ADDED:-:%s:0", rv);
    assert_string_equal(seen, want_seen);
    rv[GD_WATCH_RV_MAX - 1] = '9';
    rv[GD_WATCH_RV_MAX] = '\0'; /* one more */
    event_of(ev, strlen(rv) + 100, rv);
    strcat(ev, "\n");
    assert_int_equal(refused(ev, 1 << 16, "too long"), -EINVAL);
    assert_int_equal(refused("{\"type\":\"ADDED\",\"object\":{\"metadata\":{\"resourceVersion\":\"\"}}}\n",
                             4096, "without a resourceVersion"),
                     -EINVAL);
    /* An ERROR's code from 0 to 999. */
    assert_int_equal(refused("{\"type\":\"ERROR\",\"object\":{\"code\":0}}\n", 4096, "-"), 0);
    assert_string_equal(seen, "ERROR:-::0");
    assert_int_equal(refused("{\"type\":\"ERROR\",\"object\":{\"code\":999}}\n", 4096, "-"), 0);
    assert_string_equal(seen, "ERROR:-::999");
    assert_int_equal(refused("{\"type\":\"ERROR\",\"object\":{\"code\":1000}}\n", 4096, "0 to 999"),
                     -EINVAL);
    assert_int_equal(refused("{\"type\":\"ERROR\",\"object\":{\"code\":-1}}\n", 4096, "0 to 999"),
                     -EINVAL);
    assert_int_equal(refused("{\"type\":\"ERROR\",\"object\":{\"code\":\"410\"}}\n", 4096, "0 to 999"),
                     -EINVAL);
    /* The first and last of the known types. */
    assert_int_equal(refused("{\"type\":\"ERROR\"}\n", 4096, "known type"), -EINVAL);
    assert_int_equal(refused("{\"type\":\"added\",\"object\":{}}\n", 4096, "type added"), -EINVAL);
    assert_int_equal(refused("{\"object\":{}}\n", 4096, "type missing"), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_same_events_in_any_pieces),
        cmocka_unit_test(test_a_body_cut_inside_an_event),
        cmocka_unit_test(test_what_is_not_an_event_is_refused),
        cmocka_unit_test(test_a_long_line_in_pieces_over_the_bound),
        cmocka_unit_test(test_the_reader_may_stop_it),
        cmocka_unit_test(test_a_line_of_exactly_the_bound),
        cmocka_unit_test(test_the_ends_of_versions_and_codes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
