/*
 * The event history: a ring of the latest events_history events, each with
 * an id that only grows, kept in server-sent-event form, so that a
 * subscriber (GET /v1/events) is sent each as it happens and one that comes
 * back with Last-Event-ID gets what it missed, as far as the ring reaches.
 *
 * Ids grow across restarts too: a run's first id follows the wall clock's
 * milliseconds times 1000, so a Last-Event-ID from before a restart is below
 * every id of this run, and its subscriber gets all this run has kept (told
 * that what came between is lost) rather than only what comes next (issue
 * 32: ids restarted at 1 and an old id meant "from now on", losing the
 * events since the restart).
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/text.h"
#include "daemon/daemon.h"

#define EVENT_MAX 1024 /* bytes of one event's text */

struct event {
    uint64_t id;
    int64_t owner; /* the uid whose tenant it is about (admins see every event); -1: anyone's */
    size_t len;
    char text[EVENT_MAX];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond;
static struct event *ring;
static size_t cap;
static uint64_t last_id;
static uint64_t first_id; /* this run's first event's id */
static int stopping;

int gd_events_init(void)
{
    pthread_condattr_t ca;

    cap = (size_t)gd_opt.events_history;
    if ((ring = calloc(cap, sizeof(*ring))) == NULL)
        return -1;
    last_id = gd_unix_ns() / 1000000ULL * 1000ULL;
    first_id = last_id + 1;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cond, &ca);
    pthread_condattr_destroy(&ca);
    return 0;
}

__attribute__((format(printf, 3, 0))) static void record(int64_t owner, const char *type,
                                                         const char *fmt, va_list ap)
{
    char members[EVENT_MAX - 160];
    struct event *e;
    int n;

    n = vsnprintf(members, sizeof(members), fmt, ap);
    if (n < 0 || (size_t)n >= sizeof(members))
        snprintf(members, sizeof(members), "\"truncated\":true");
    pthread_mutex_lock(&mu);
    if (ring == NULL) {
        pthread_mutex_unlock(&mu);
        return;
    }
    e = &ring[last_id % cap];
    e->id = ++last_id;
    e->owner = owner;
    n = snprintf(e->text, sizeof(e->text),
                 "id: %llu\nevent: %s\ndata: {\"id\":%llu,\"type\":\"%s\",\"time_unix_ns\":%llu,%s}"
                 "\n\n",
                 (unsigned long long)e->id, type, (unsigned long long)e->id, type,
                 (unsigned long long)gd_unix_ns(), members);
    e->len = n < 0 ? 0 : (size_t)n >= sizeof(e->text) ? sizeof(e->text) - 1 : (size_t)n;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
    if (gd_opt.verbose)
        gd_log("event %s {%s}", type, members);
}

void gd_event(uid_t owner, const char *type, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record((int64_t)owner, type, fmt, ap);
    va_end(ap);
}

void gd_json_quote(char *out, size_t len, const char *s)
{
    FILE *f = fmemopen(out, len, "w");

    if (f == NULL || len < 3) {
        if (len)
            snprintf(out, len, "\"\"");
        if (f)
            fclose(f);
        return;
    }
    setvbuf(f, NULL, _IONBF, 0);
    gs_json_string(f, s, strlen(s));
    if (ferror(f) || ftell(f) >= (long)len - 1)
        snprintf(out, len, "\"\"");
    fclose(f);
}

uint64_t gd_events_last(void)
{
    uint64_t v;

    pthread_mutex_lock(&mu);
    v = last_id;
    pthread_mutex_unlock(&mu);
    return v;
}

size_t gd_events_read(uint64_t after, char *buf, size_t len, int wait_ms, uid_t viewer, int admin,
                      uint64_t *last, int *gap)
{
    struct timespec ts;
    size_t got = 0;

    *gap = 0;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += wait_ms / 1000;
    ts.tv_nsec += (long)(wait_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&mu);
    if (after > last_id || after + 1 < first_id) {
        /*
         * From before this run (0: everything kept, nothing said lost), or an id this run never
         * gave (a run before it whose clock was ahead): all this run has kept, said lost.
         */
        *gap = after != 0;
        after = first_id - 1;
    }
    for (;;) {
        /* Until one the viewer may see comes, or the wait ends: others' pass by unseen. */
        while (after == last_id && wait_ms > 0 && !stopping &&
               pthread_cond_timedwait(&cond, &mu, &ts) == 0)
            ;
        if (last_id - after > cap) {
            *gap = 1;
            after = last_id - cap;
        }
        while (after < last_id) {
            const struct event *e = &ring[(after) % cap];

            if (e->id != after + 1)
                break;
            if (admin || e->owner < 0 || e->owner == (int64_t)viewer) {
                if (got + e->len > len)
                    break;
                memcpy(buf + got, e->text, e->len);
                got += e->len;
            }
            after++;
        }
        if (got > 0 || after != last_id || wait_ms <= 0 || stopping)
            break;
        {
            struct timespec now;

            clock_gettime(CLOCK_MONOTONIC, &now);
            if (now.tv_sec > ts.tv_sec || (now.tv_sec == ts.tv_sec && now.tv_nsec >= ts.tv_nsec))
                break;
        }
    }
    *last = after;
    pthread_mutex_unlock(&mu);
    return got;
}

void gd_events_stop(void)
{
    pthread_mutex_lock(&mu);
    stopping = 1;
    pthread_cond_broadcast(&cond);
    pthread_mutex_unlock(&mu);
}
