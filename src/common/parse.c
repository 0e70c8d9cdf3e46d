/*
 * Parsers for sizes, per-device limit lists and vgpu.rs's JSON limit objects.
 * They are strict: anything not fully understood is refused with a message,
 * because a limit silently misread is a limit not applied.
 */
#include "common/error.h"
#include "common/parse.h"
#include "gpuslice/tenant_abi.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/*
 * floor(0.DIGITS * mult) for the fraction digits [first, last), exactly and
 * for any number of digits: from the last digit back, w = floor((d * mult +
 * w) / 10), which is the floor of the exact value at every step because
 * floor((a + x) / 10) = floor((a + floor(x)) / 10) for an integer a. w stays
 * below mult (at most 2^40), so nothing overflows.
 */
static uint64_t fraction_of(const char *first, const char *last, uint64_t mult)
{
    uint64_t w = 0;

    while (last > first) {
        last--;
        w = ((uint64_t)(*last - '0') * mult + w) / 10;
    }
    return w;
}

int gs_parse_size(const char *s, uint64_t *out)
{
    const char *p = s, *frac = NULL, *frac_end = NULL;
    uint64_t whole = 0, mult = 1, part;
    int digits = 0;

    if (s == NULL)
        return -EINVAL;
    while (isdigit((unsigned char)*p)) {
        uint64_t d = (uint64_t)(*p - '0');
        if (whole > (UINT64_MAX - d) / 10)
            return -ERANGE;
        whole = whole * 10 + d;
        p++;
        digits++;
    }
    if (*p == '.') {
        frac = ++p;
        while (isdigit((unsigned char)*p))
            p++;
        frac_end = p;
        if (frac_end == frac)
            return -EINVAL; /* "1." or "1.G": a point needs digits after it */
        digits++;
    }
    if (digits == 0)
        return -EINVAL;
    switch (tolower((unsigned char)*p)) {
    case '\0':
        break;
    case 'k':
        mult = 1ULL << 10;
        break;
    case 'm':
        mult = 1ULL << 20;
        break;
    case 'g':
        mult = 1ULL << 30;
        break;
    case 't':
        mult = 1ULL << 40;
        break;
    case 'b':
        break;
    default:
        return -EINVAL;
    }
    /* A unit letter, then "i" (binary, as every unit here is) and "B", each optional. */
    if (*p != '\0' && tolower((unsigned char)*p) != 'b') {
        p++;
        if (*p == 'i' || *p == 'I')
            p++;
        if (*p == 'b' || *p == 'B')
            p++;
    } else if (*p != '\0') {
        p++;
    }
    if (*p != '\0')
        return -EINVAL;
    part = frac ? fraction_of(frac, frac_end, mult) : 0;
    if (mult == 1 && frac) {
        for (; frac < frac_end; frac++)
            if (*frac != '0')
                return -EINVAL; /* a fraction of a byte */
    }
    if (whole > (UINT64_MAX - part) / mult)
        return -ERANGE;
    *out = whole * mult + part;
    return 0;
}

int gs_parse_share(const char *s, int *out)
{
    int v = 0;

    if (s == NULL || *s == '\0')
        return -EINVAL;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > 100)
            return -EINVAL;
        v = v * 10 + (*s - '0');
    }
    if (v < 1 || v > 100)
        return -EINVAL;
    *out = v;
    return 0;
}

static const char *const priority_names[] = { "normal", "background", "normal", "latency" };

int gs_parse_priority(const char *s, uint32_t *out)
{
    uint32_t p;

    if (s == NULL)
        return -EINVAL;
    for (p = GPUSLICE_PRIORITY_BACKGROUND; p <= GPUSLICE_PRIORITY_LATENCY; p++)
        if (strcasecmp(s, priority_names[p]) == 0) {
            *out = p;
            return 0;
        }
    return -EINVAL;
}

const char *gs_priority_name(uint32_t p)
{
    return p <= GPUSLICE_PRIORITY_LATENCY ? priority_names[p] : NULL;
}

/* An integer from min to max in decimal digits only: 0 or -EINVAL. */
static int parse_digits(const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
    uint32_t v = 0;

    if (s == NULL || *s == '\0')
        return -EINVAL;
    for (; *s; s++) {
        if (!isdigit((unsigned char)*s) || v > max)
            return -EINVAL;
        v = v * 10 + (uint32_t)(*s - '0');
    }
    if (v < min || v > max)
        return -EINVAL;
    *out = v;
    return 0;
}

int gs_parse_weight(const char *s, uint32_t *out)
{
    return parse_digits(s, 1, GPUSLICE_WEIGHT_MAX, out);
}

int gs_parse_quantity(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t mult;
    } units[] = {
        { "Ki", 1ULL << 10 },
        { "Mi", 1ULL << 20 },
        { "Gi", 1ULL << 30 },
        { "Ti", 1ULL << 40 },
        { "Pi", 1ULL << 50 },
        { "Ei", 1ULL << 60 },
        { "k", 1000ULL },
        { "M", 1000000ULL },
        { "G", 1000000000ULL },
        { "T", 1000000000000ULL },
        { "P", 1000000000000000ULL },
        { "E", 1000000000000000000ULL },
        { "", 1 },
    };
    unsigned __int128 whole = 0, frac = 0, scale = 1, v;
    const char *p = s;
    size_t i, digits = 0;

    if (s == NULL)
        return -EINVAL;
    for (; isdigit((unsigned char)*p); p++, digits++) {
        whole = whole * 10 + (unsigned)(*p - '0');
        if (whole > UINT64_MAX)
            return -ERANGE;
    }
    if (*p == '.') {
        p++;
        for (; isdigit((unsigned char)*p); p++, digits++)
            if (scale < (unsigned __int128)1000000000000000000ULL * 10) { /* 19 digits kept */
                frac = frac * 10 + (unsigned)(*p - '0');
                scale *= 10;
            }
    }
    if (digits == 0)
        return -EINVAL;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(p, units[i].suffix) == 0)
            break;
    if (i == sizeof(units) / sizeof(units[0]))
        return -EINVAL;
    v = whole * units[i].mult + frac * units[i].mult / scale;
    if (v > UINT64_MAX)
        return -ERANGE;
    *out = (uint64_t)v;
    return 0;
}

int gs_parse_yield_sms(const char *s, uint32_t *out)
{
    return parse_digits(s, 2, GS_YIELD_SMS_MAX, out);
}

static int ishex(int c)
{
    return isxdigit((unsigned char)c);
}

int gs_parse_uuid(const char *s, size_t len, char out[GS_UUID_STRLEN])
{
    static const int groups[5] = { 8, 4, 4, 4, 12 };
    size_t i, pos = 4;
    int g;

    if (len != GS_UUID_STRLEN - 1 || strncasecmp(s, "gpu-", 4) != 0)
        return 0;
    for (g = 0; g < 5; g++) {
        for (i = 0; i < (size_t)groups[g]; i++, pos++)
            if (!ishex(s[pos]))
                return 0;
        if (g < 4 && s[pos++] != '-')
            return 0;
    }
    for (i = 0; i < len; i++)
        out[i] = (char)tolower((unsigned char)s[i]);
    out[len] = '\0';
    return 1;
}

void gs_format_uuid(const unsigned char b[16], char out[GS_UUID_STRLEN])
{
    snprintf(out, GS_UUID_STRLEN,
             "gpu-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
             b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
             b[15]);
}

/* Parses a device key (index 0..GS_MAX_DEVICE_INDEX, or UUID) of length len into e. */
static int parse_key(const char *k, size_t len, struct gs_limit_entry *e)
{
    size_t i;
    long v = 0;

    if (len == 0)
        return -EINVAL;
    if (gs_parse_uuid(k, len, e->uuid)) {
        e->key = GS_KEY_UUID;
        return 0;
    }
    if (len > 3)
        return -EINVAL;
    for (i = 0; i < len; i++) {
        if (!isdigit((unsigned char)k[i]))
            return -EINVAL;
        v = v * 10 + (k[i] - '0');
    }
    e->key = GS_KEY_INDEX;
    e->index = (int)v;
    return 0;
}

/* A decimal integer of at most 9 digits, the whole of [p, end); -EINVAL if not. */
static int parse_uint_span(const char *p, const char *end, uint64_t *out)
{
    uint64_t n = 0;

    if (p == end || end - p > 9)
        return -EINVAL;
    for (; p < end; p++) {
        if (!isdigit((unsigned char)*p))
            return -EINVAL;
        n = n * 10 + (uint64_t)(*p - '0');
    }
    *out = n;
    return 0;
}

/*
 * One value of the kind: 0, or -EINVAL (not of the form), -EDOM (out of
 * range; for a size, zero) or -ERANGE (a size too large for 64 bits). A size
 * below GS_MIN_MEMORY_LIMIT is returned: the callers' messages differ.
 */
static int parse_value(const char *v, enum gs_value_kind kind, uint64_t *out)
{
    int r;

    if (kind == GS_VALUE_SMS) {
        const char *at = strchr(v, '@'), *end = v + strlen(v);
        uint64_t count, first = 0, fine = 0;

        if ((size_t)(end - v) > 5 && strcmp(end - 5, "/fine") == 0) {
            end -= 5;
            fine = GS_SMS_FINE;
            if (end[-1] == '%')
                return -EINVAL;
        }

        if (end > v && end[-1] == '%') {
            if (at || parse_uint_span(v, end - 1, &count) < 0)
                return -EINVAL;
            if (count == 0 || count > 100)
                return -EDOM;
            *out = count | GS_SMS_SHARE;
            return 0;
        }
        if (parse_uint_span(v, at ? at : end, &count) < 0 ||
            (at && parse_uint_span(at + 1, end, &first) < 0))
            return -EINVAL;
        if (count == 0 || count > GS_SMS_MAX || first >= GS_SMS_MAX)
            return -EDOM;
        *out = count | first << 32 | fine;
        return 0;
    }
    if (kind == GS_VALUE_SIZE) {
        if ((r = gs_parse_size(v, out)) < 0)
            return r;
        return *out == 0 ? -EDOM : 0;
    }
    /* percent: an integer 1..100 */
    {
        const char *p = v;
        uint64_t n = 0;

        if (*p == '\0')
            return -EINVAL;
        for (; *p; p++) {
            if (!isdigit((unsigned char)*p) || n > 1000)
                return -EINVAL;
            n = n * 10 + (uint64_t)(*p - '0');
        }
        if (n == 0 || n > 100)
            return -EDOM;
        *out = n;
    }
    return 0;
}

static const char *value_forms(enum gs_value_kind kind)
{
    return kind == GS_VALUE_SIZE      ? GS_SIZE_FORMS
           : kind == GS_VALUE_PERCENT ? "use an integer percentage from 1 to 100, e.g. 30"
                                      : "use a count of SMs such as 16, 16@32 for 16 SMs "
                                        "from the 32nd, or a share such as 25%";
}

/* A per-device list of the kind, for messages. */
static const char *list_example(enum gs_value_kind kind)
{
    return kind == GS_VALUE_SIZE      ? "0:8G,1:4G"
           : kind == GS_VALUE_PERCENT ? "0:30,1:50"
                                      : "0:16,1:32";
}

static const char *kind_noun(enum gs_value_kind kind)
{
    return kind == GS_VALUE_SIZE ? "size" : kind == GS_VALUE_PERCENT ? "percentage" : "partition";
}

/*
 * The message for a size under the minimum, where plain numbers mean bytes:
 * a number without a unit most likely lacked one, so suggest it with units.
 */
static void below_minimum(char *err, size_t errlen, const char *what, const char *val,
                          uint64_t bytes)
{
    size_t num = strspn(val, "0123456789.");

    if (val[num] == '\0' || strcasecmp(val + num, "b") == 0)
        gs_set_error(err, errlen,
                     "%s: \"%s\" is %llu bytes, below the 1 MiB minimum (give a unit: %.*sM, "
                     "%.*sG)",
                     what, val, (unsigned long long)bytes, (int)num, val, (int)num, val);
    else
        gs_set_error(err, errlen,
                     "%s: \"%s\" is %llu bytes, below the 1 MiB minimum (use at least 1M, "
                     "e.g. 512M or 8G)",
                     what, val, (unsigned long long)bytes);
}

static int add_entry(struct gs_limits *out, const struct gs_limit_entry *e, const char *what,
                     char *err, size_t errlen)
{
    int i;

    for (i = 0; i < out->n; i++) {
        const struct gs_limit_entry *o = &out->e[i];
        if (o->key == e->key &&
            (e->key == GS_KEY_ALL || (e->key == GS_KEY_INDEX && o->index == e->index) ||
             (e->key == GS_KEY_UUID && strcmp(o->uuid, e->uuid) == 0))) {
            if (e->key == GS_KEY_INDEX)
                gs_set_error(err, errlen, "%s: device %d is given twice", what, e->index);
            else
                gs_set_error(err, errlen, "%s: %s is given twice", what,
                             e->key == GS_KEY_ALL ? "the value for all devices" : e->uuid);
            return -EINVAL;
        }
    }
    if (out->n >= GS_MAX_LIMIT_ENTRIES) {
        gs_set_error(err, errlen, "%s: more than %d entries", what, GS_MAX_LIMIT_ENTRIES);
        return -E2BIG;
    }
    out->e[out->n++] = *e;
    return 0;
}

int gs_parse_limit_list(const char *s, enum gs_value_kind kind, const char *what,
                        struct gs_limits *out, char *err, size_t errlen)
{
    const char *p = s;

    memset(out, 0, sizeof(*out));
    out->source = what;
    if (s == NULL || *s == '\0') {
        gs_set_error(err, errlen, "%s: empty value (%s, or per device as %s)", what,
                     value_forms(kind), list_example(kind));
        return -EINVAL;
    }
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', len);
        struct gs_limit_entry e;
        char val[64];
        size_t vlen;
        int r;

        memset(&e, 0, sizeof(e));
        if (len == 0) {
            gs_set_error(err, errlen, "%s: \"%s\" has an empty entry (%s, or per device as %s)",
                         what, s, value_forms(kind), list_example(kind));
            return -EINVAL;
        }
        if (colon) {
            if (parse_key(p, (size_t)(colon - p), &e) < 0) {
                gs_set_error(err, errlen,
                             "%s: \"%.*s\" is not a device (use an index from 0 to %d, or a "
                             "UUID such as GPU-1a2b3c4d-0000-1111-2222-333344445555, as in %s)",
                             what, (int)(colon - p), p, GS_MAX_DEVICE_INDEX, list_example(kind));
                return -EINVAL;
            }
            vlen = len - (size_t)(colon - p) - 1;
            p = colon + 1;
        } else {
            e.key = GS_KEY_ALL;
            vlen = len;
        }
        if (vlen >= sizeof(val)) {
            gs_set_error(err, errlen, "%s: \"%.*s\" is too long to be a %s (%s)", what, (int)vlen,
                         p, kind_noun(kind), value_forms(kind));
            return -EINVAL;
        }
        memcpy(val, p, vlen);
        val[vlen] = '\0';
        if ((r = parse_value(val, kind, &e.value)) < 0) {
            if (r == -EDOM)
                gs_set_error(err, errlen, "%s: \"%s\" is %s (%s)", what, val,
                             kind == GS_VALUE_SIZE ? "not a usable limit: it must be above zero"
                                                   : "out of range",
                             value_forms(kind));
            else if (r == -ERANGE)
                gs_set_error(err, errlen, "%s: \"%s\" is too large to be a size (%s)", what, val,
                             value_forms(kind));
            else
                gs_set_error(err, errlen, "%s: \"%s\" is not a %s (%s)", what, val, kind_noun(kind),
                             value_forms(kind));
            return -EINVAL;
        }
        if (kind == GS_VALUE_SIZE && e.value < GS_MIN_MEMORY_LIMIT) {
            below_minimum(err, errlen, what, val, e.value);
            return -EINVAL;
        }
        if ((r = add_entry(out, &e, what, err, errlen)) < 0)
            return r;
        p += vlen;
        if (*p == ',') {
            p++;
            if (*p == '\0') {
                gs_set_error(err, errlen, "%s: trailing comma in \"%s\"", what, s);
                return -EINVAL;
            }
        }
    }
    return 0;
}

/* A small strict reader for one flat JSON object of string keys and numbers. */
struct json_cursor {
    const char *s;
    size_t pos;
};

static void json_ws(struct json_cursor *c)
{
    while (c->s[c->pos] == ' ' || c->s[c->pos] == '\t' || c->s[c->pos] == '\n' ||
           c->s[c->pos] == '\r')
        c->pos++;
}

int gs_parse_limit_json(const char *s, enum gs_value_kind kind, const char *what,
                        struct gs_limits *out, char *err, size_t errlen)
{
    struct json_cursor c = { s, 0 };
    int first = 1;

    memset(out, 0, sizeof(*out));
    out->source = what;
    if (s == NULL) {
        gs_set_error(err, errlen, "%s: missing value", what);
        return -EINVAL;
    }
    json_ws(&c);
    if (s[c.pos] != '{')
        goto syntax;
    c.pos++;
    for (;;) {
        struct gs_limit_entry e;
        const char *key;
        size_t klen, vstart;
        char val[32];
        int r;

        json_ws(&c);
        if (s[c.pos] == '}' && first) {
            c.pos++;
            break;
        }
        if (s[c.pos] != '"')
            goto syntax;
        key = s + ++c.pos;
        while (s[c.pos] && s[c.pos] != '"' && s[c.pos] != '\\')
            c.pos++;
        if (s[c.pos] != '"')
            goto syntax;
        klen = (size_t)(s + c.pos - key);
        c.pos++;
        json_ws(&c);
        if (s[c.pos] != ':')
            goto syntax;
        c.pos++;
        json_ws(&c);
        memset(&e, 0, sizeof(e));
        if (parse_key(key, klen, &e) < 0) {
            gs_set_error(err, errlen,
                         "%s: key \"%.*s\" is not a device (use an index from \"0\" to \"%d\" "
                         "or a GPU UUID such as \"GPU-1a2b3c4d-0000-1111-2222-333344445555\")",
                         what, (int)klen, key, GS_MAX_DEVICE_INDEX);
            return -EINVAL;
        }
        vstart = c.pos;
        while (isdigit((unsigned char)s[c.pos]))
            c.pos++;
        if (c.pos == vstart || c.pos - vstart >= sizeof(val) ||
            (s[vstart] == '0' && c.pos - vstart > 1) /* JSON has no leading zeros */) {
            gs_set_error(err, errlen, "%s: the value for \"%.*s\" must be a %s", what, (int)klen,
                         key,
                         kind == GS_VALUE_SIZE
                             ? "positive integer number of bytes (e.g. 1073741824 for 1 GiB)"
                             : "percentage, an integer from 1 to 100");
            return -EINVAL;
        }
        memcpy(val, s + vstart, c.pos - vstart);
        val[c.pos - vstart] = '\0';
        if ((r = parse_value(val, kind, &e.value)) < 0) {
            gs_set_error(err, errlen, "%s: the value %s for \"%.*s\" is %s", what, val, (int)klen,
                         key,
                         r == -ERANGE ? "too large to be a number of bytes"
                         : kind == GS_VALUE_SIZE
                             ? "not a usable limit (it must be above zero; values are bytes, "
                               "e.g. 1073741824 for 1 GiB)"
                             : "out of range (use 1 to 100)");
            return -EINVAL;
        }
        if (kind == GS_VALUE_SIZE && e.value < GS_MIN_MEMORY_LIMIT) {
            gs_set_error(err, errlen,
                         "%s: the value %s for \"%.*s\" is %s bytes, below the 1 MiB minimum "
                         "(values here are bytes: 1 GiB is 1073741824)",
                         what, val, (int)klen, key, val);
            return -EINVAL;
        }
        if ((r = add_entry(out, &e, what, err, errlen)) < 0)
            return r;
        first = 0;
        json_ws(&c);
        if (s[c.pos] == ',') {
            c.pos++;
            continue;
        }
        if (s[c.pos] == '}') {
            c.pos++;
            break;
        }
        goto syntax;
    }
    json_ws(&c);
    if (s[c.pos] != '\0')
        goto syntax;
    return 0;
syntax:
    gs_set_error(err, errlen,
                 "%s: not a JSON object of device to %s at character %zu (use e.g. "
                 "{\"0\": %s, \"GPU-1a2b3c4d-0000-1111-2222-333344445555\": %s})",
                 what, kind == GS_VALUE_SIZE ? "bytes" : "percent", c.pos + 1,
                 kind == GS_VALUE_SIZE ? "1073741824" : "30",
                 kind == GS_VALUE_SIZE ? "2147483648" : "50");
    return -EINVAL;
}

uint64_t gs_limits_lookup(const struct gs_limits *l, int index, const char *uuid)
{
    uint64_t by_index = 0, all = 0;
    int i, have_index = 0;

    /* An entry of 0 (no limit) for a device still overrides the default. */
    for (i = 0; i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        if (e->key == GS_KEY_UUID && uuid && strcasecmp(e->uuid, uuid) == 0)
            return e->value;
        if (e->key == GS_KEY_INDEX && e->index == index) {
            by_index = e->value;
            have_index = 1;
        }
        if (e->key == GS_KEY_ALL)
            all = e->value;
    }
    return have_index ? by_index : all;
}

void gs_format_size(uint64_t b, char *buf, size_t len)
{
    static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB" };
    int u = 0, top = 0;
    uint64_t v = b;

    /* Exact in some unit of MiB or more (4 GiB, 1536 MiB), else two decimals of the largest. */
    while (u < 4 && v >= 1024 && v % 1024 == 0) {
        v /= 1024;
        u++;
    }
    while (top < 4 && b >> (10 * (top + 1)) > 0)
        top++;
    if (top >= 2 && u < 2)
        snprintf(buf, len, "%.2f %s", (double)b / (double)(1ULL << (10 * top)), units[top]);
    else
        snprintf(buf, len, "%llu %s", (unsigned long long)v, units[u]);
}
