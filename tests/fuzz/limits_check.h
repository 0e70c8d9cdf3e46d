/*
 * Checks shared by the limit-list, JSON and environment targets: what every
 * parsed entry must be, and writing entries back in the list form.
 */
#ifndef GPUSLICE_FUZZ_LIMITS_CHECK_H
#define GPUSLICE_FUZZ_LIMITS_CHECK_H

#include <ctype.h>

#include "common/parse.h"
#include "fuzz.h"

/* Every entry in range for its kind, every key well-formed, no device twice. */
static inline void check_entries(const struct gs_limits *l, enum gs_value_kind kind, int zero_ok,
                                 const char *in)
{
    int i, j;

    FUZZ_CHECK(l->n >= 0 && l->n <= GS_MAX_LIMIT_ENTRIES, "%d entries for \"%s\"", l->n, in);
    for (i = 0; i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        uint64_t v = e->value;
        char uuid[GS_UUID_STRLEN];

        if (kind == GS_VALUE_SIZE)
            FUZZ_CHECK(v >= GS_MIN_MEMORY_LIMIT, "size %llu from \"%s\"", (unsigned long long)v,
                       in);
        else if (kind == GS_VALUE_PERCENT)
            FUZZ_CHECK((v >= 1 || zero_ok) && v <= 100, "percent %llu from \"%s\"",
                       (unsigned long long)v, in);
        else if (v & GS_SMS_SHARE)
            FUZZ_CHECK(!(v & GS_SMS_FINE) && GS_SMS_FIRST(v) == 0 && GS_SMS_COUNT(v) >= 1 &&
                           GS_SMS_COUNT(v) <= 100,
                       "share %llx from \"%s\"", (unsigned long long)v, in);
        else
            FUZZ_CHECK(GS_SMS_COUNT(v) >= 1 && GS_SMS_COUNT(v) <= GS_SMS_MAX &&
                           GS_SMS_FIRST(v) < GS_SMS_MAX,
                       "partition %llx from \"%s\"", (unsigned long long)v, in);
        FUZZ_CHECK(e->key == GS_KEY_ALL || e->key == GS_KEY_INDEX || e->key == GS_KEY_UUID,
                   "key kind %d", (int)e->key);
        if (e->key == GS_KEY_INDEX)
            FUZZ_CHECK(e->index >= 0 && e->index <= GS_MAX_DEVICE_INDEX, "index %d from \"%s\"",
                       e->index, in);
        if (e->key == GS_KEY_UUID) {
            FUZZ_CHECK(gs_parse_uuid(e->uuid, strlen(e->uuid), uuid) == 1 &&
                           strcmp(uuid, e->uuid) == 0,
                       "UUID \"%s\" from \"%s\"", e->uuid, in);
        }
        for (j = 0; j < i; j++) {
            const struct gs_limit_entry *o = &l->e[j];
            int same = o->key == e->key &&
                       (e->key == GS_KEY_ALL || (e->key == GS_KEY_INDEX && o->index == e->index) ||
                        (e->key == GS_KEY_UUID && strcmp(o->uuid, e->uuid) == 0));
            FUZZ_CHECK(!same, "entries %d and %d name one device in \"%s\"", j, i, in);
        }
    }
}

/* The entries in the list form, sizes in bytes: "0:1048576,gpu-…:25%,16@32/fine". */
static inline void write_list(const struct gs_limits *l, enum gs_value_kind kind, char *buf,
                              size_t len)
{
    size_t n = 0;
    int i;

    buf[0] = '\0';
    for (i = 0; i < l->n && n < len; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        uint64_t v = e->value;

        if (i)
            n += (size_t)snprintf(buf + n, len - n, ",");
        if (e->key == GS_KEY_INDEX)
            n += (size_t)snprintf(buf + n, len - n, "%d:", e->index);
        else if (e->key == GS_KEY_UUID)
            n += (size_t)snprintf(buf + n, len - n, "%s:", e->uuid);
        if (kind != GS_VALUE_SMS)
            n += (size_t)snprintf(buf + n, len - n, "%llu", (unsigned long long)v);
        else if (v & GS_SMS_SHARE)
            n += (size_t)snprintf(buf + n, len - n, "%u%%", GS_SMS_COUNT(v));
        else
            n += (size_t)snprintf(buf + n, len - n, "%u@%u%s", GS_SMS_COUNT(v), GS_SMS_FIRST(v),
                                  v & GS_SMS_FINE ? "/fine" : "");
    }
    FUZZ_CHECK(n < len, "list of %d entries does not fit %zu bytes", l->n, len);
}

static inline void check_same(const struct gs_limits *a, const struct gs_limits *b, const char *in,
                              const char *again)
{
    int i;

    FUZZ_CHECK(a->n == b->n, "\"%s\" gave %d entries, written back \"%s\" %d", in, a->n, again,
               b->n);
    for (i = 0; i < a->n; i++) {
        const struct gs_limit_entry *x = &a->e[i], *y = &b->e[i];
        FUZZ_CHECK(x->key == y->key && x->value == y->value &&
                       (x->key != GS_KEY_INDEX || x->index == y->index) &&
                       (x->key != GS_KEY_UUID || strcmp(x->uuid, y->uuid) == 0),
                   "entry %d of \"%s\" differs from \"%s\"'s", i, in, again);
    }
}

#endif
