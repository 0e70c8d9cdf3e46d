/*
 * A recursive-descent JSON reader: every value a node, strings unescaped,
 * numbers read with strtod from the exact text the grammar allows.
 */
#include "control/json.h"
#include "common/text.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 64

struct parser {
    const char *s;
    size_t len, pos;
    int depth;
    char *err;
    size_t errlen;
};

static int fail(struct parser *p, const char *what)
{
    if (p->err && p->errlen)
        snprintf(p->err, p->errlen, "%s at byte %zu", what, p->pos);
    return -1;
}

static void skip_ws(struct parser *p)
{
    while (p->pos < p->len && (p->s[p->pos] == ' ' || p->s[p->pos] == '\t' ||
                               p->s[p->pos] == '\n' || p->s[p->pos] == '\r'))
        p->pos++;
}

static int hex4(struct parser *p, unsigned *out)
{
    unsigned v = 0;
    int i;

    if (p->len - p->pos < 4)
        return fail(p, "a short \\u escape");
    for (i = 0; i < 4; i++) {
        char c = p->s[p->pos++];

        v <<= 4;
        if (c >= '0' && c <= '9')
            v |= (unsigned)(c - '0');
        else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
            v |= (unsigned)((c | 0x20) - 'a' + 10);
        else
            return fail(p, "a bad \\u escape");
    }
    *out = v;
    return 0;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xc0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3f));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xe0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        o[2] = (char)(0x80 | (cp & 0x3f));
        return 3;
    }
    o[0] = (char)(0xf0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
    o[3] = (char)(0x80 | (cp & 0x3f));
    return 4;
}

/* A string at p->pos (its opening quote); its unescaped value, malloc'd, or NULL. */
static char *string(struct parser *p)
{
    size_t start = ++p->pos, n = 0;
    char *out;

    /* Escapes never grow: 6 bytes (\uXXXX) give at most 3, 12 (a pair) give 4. */
    if ((out = malloc(p->len - start + 1)) == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    while (p->pos < p->len) {
        unsigned char c = (unsigned char)p->s[p->pos++];

        if (c == '"') {
            out[n] = '\0';
            return out;
        }
        if (c < 0x20) {
            fail(p, "a control character in a string");
            break;
        }
        if (c >= 0x80) {
            uint32_t cp;
            size_t k =
                gs_utf8_len((const unsigned char *)p->s + p->pos - 1, p->len - p->pos + 1, &cp);

            if (k == 0) {
                p->pos--;
                fail(p, "a byte that is not UTF-8 in a string");
                break;
            }
            memcpy(out + n, p->s + p->pos - 1, k);
            n += k;
            p->pos += k - 1;
            continue;
        }
        if (c != '\\') {
            out[n++] = (char)c;
            continue;
        }
        if (p->pos >= p->len)
            break;
        c = (unsigned char)p->s[p->pos++];
        switch (c) {
        case '"':
        case '\\':
        case '/':
            out[n++] = (char)c;
            break;
        case 'b':
            out[n++] = '\b';
            break;
        case 'f':
            out[n++] = '\f';
            break;
        case 'n':
            out[n++] = '\n';
            break;
        case 'r':
            out[n++] = '\r';
            break;
        case 't':
            out[n++] = '\t';
            break;
        case 'u': {
            unsigned cp, lo;

            if (hex4(p, &cp) < 0)
                goto bad;
            if (cp >= 0xd800 && cp < 0xdc00) {
                if (p->len - p->pos < 2 || p->s[p->pos] != '\\' || p->s[p->pos + 1] != 'u') {
                    fail(p, "a lone surrogate");
                    goto bad;
                }
                p->pos += 2;
                if (hex4(p, &lo) < 0)
                    goto bad;
                if (lo < 0xdc00 || lo >= 0xe000) {
                    fail(p, "a lone surrogate");
                    goto bad;
                }
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                fail(p, "a lone surrogate");
                goto bad;
            }
            n += put_utf8(out + n, cp);
            break;
        }
        default:
            fail(p, "a bad escape");
            goto bad;
        }
    }
    if (p->pos >= p->len)
        fail(p, "an unterminated string");
bad:
    free(out);
    return NULL;
}

/* The number grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)? */
static int number(struct parser *p, double *out)
{
    size_t i = p->pos, digits;
    char buf[64];

    if (i < p->len && p->s[i] == '-')
        i++;
    if (i < p->len && p->s[i] == '0')
        i++;
    else {
        for (digits = 0; i < p->len && p->s[i] >= '0' && p->s[i] <= '9'; i++)
            digits++;
        if (!digits)
            return fail(p, "a bad number");
    }
    if (i < p->len && p->s[i] == '.') {
        i++;
        for (digits = 0; i < p->len && p->s[i] >= '0' && p->s[i] <= '9'; i++)
            digits++;
        if (!digits)
            return fail(p, "a bad number");
    }
    if (i < p->len && (p->s[i] == 'e' || p->s[i] == 'E')) {
        i++;
        if (i < p->len && (p->s[i] == '+' || p->s[i] == '-'))
            i++;
        for (digits = 0; i < p->len && p->s[i] >= '0' && p->s[i] <= '9'; i++)
            digits++;
        if (!digits)
            return fail(p, "a bad number");
    }
    /* strtod needs a terminated copy: the text is not. */
    if (i - p->pos < sizeof(buf)) {
        memcpy(buf, p->s + p->pos, i - p->pos);
        buf[i - p->pos] = '\0';
        *out = strtod(buf, NULL);
    } else {
        char *big = malloc(i - p->pos + 1);

        if (big == NULL)
            return fail(p, "out of memory");
        memcpy(big, p->s + p->pos, i - p->pos);
        big[i - p->pos] = '\0';
        *out = strtod(big, NULL);
        free(big);
    }
    p->pos = i;
    return 0;
}

static struct gs_json *value(struct parser *p);

static int literal(struct parser *p, const char *word)
{
    size_t n = strlen(word);

    if (p->len - p->pos < n || memcmp(p->s + p->pos, word, n) != 0)
        return fail(p, "an unexpected character");
    p->pos += n;
    return 0;
}

/* The elements of an array or the members of an object, after its opening bracket. */
static int elements(struct parser *p, struct gs_json *v, char close, int members)
{
    struct gs_json **tail = &v->child;

    p->pos++;
    skip_ws(p);
    if (p->pos < p->len && p->s[p->pos] == close) {
        p->pos++;
        return 0;
    }
    for (;;) {
        struct gs_json *e;
        char *key = NULL;

        skip_ws(p);
        if (members) {
            if (p->pos >= p->len || p->s[p->pos] != '"')
                return fail(p, "a member name expected");
            if ((key = string(p)) == NULL)
                return -1;
            skip_ws(p);
            if (p->pos >= p->len || p->s[p->pos] != ':') {
                free(key);
                return fail(p, "':' expected");
            }
            p->pos++;
        }
        if ((e = value(p)) == NULL) {
            free(key);
            return -1;
        }
        e->key = key;
        *tail = e;
        tail = &e->next;
        v->n++;
        skip_ws(p);
        if (p->pos < p->len && p->s[p->pos] == ',') {
            p->pos++;
            continue;
        }
        if (p->pos < p->len && p->s[p->pos] == close) {
            p->pos++;
            return 0;
        }
        return fail(p, members ? "',' or '}' expected" : "',' or ']' expected");
    }
}

static struct gs_json *value(struct parser *p)
{
    struct gs_json *v;
    int r = 0;

    skip_ws(p);
    if (p->pos >= p->len) {
        fail(p, "a value expected");
        return NULL;
    }
    if ((v = calloc(1, sizeof(*v))) == NULL) {
        fail(p, "out of memory");
        return NULL;
    }
    switch (p->s[p->pos]) {
    case '{':
    case '[':
        if (++p->depth > MAX_DEPTH) {
            r = fail(p, "nested too deep");
            break;
        }
        v->type = p->s[p->pos] == '{' ? GS_JSON_OBJECT : GS_JSON_ARRAY;
        r = elements(p, v, v->type == GS_JSON_OBJECT ? '}' : ']', v->type == GS_JSON_OBJECT);
        p->depth--;
        break;
    case '"':
        v->type = GS_JSON_STRING;
        r = (v->str = string(p)) ? 0 : -1;
        break;
    case 't':
        v->type = GS_JSON_TRUE;
        r = literal(p, "true");
        break;
    case 'f':
        v->type = GS_JSON_FALSE;
        r = literal(p, "false");
        break;
    case 'n':
        v->type = GS_JSON_NULL;
        r = literal(p, "null");
        break;
    default:
        v->type = GS_JSON_NUMBER;
        r = number(p, &v->num);
    }
    if (r < 0) {
        gs_json_free(v);
        return NULL;
    }
    return v;
}

struct gs_json *gs_json_parse(const char *text, size_t len, char *err, size_t errlen)
{
    struct parser p = { text, len, 0, 0, err, errlen };
    struct gs_json *v = value(&p);

    if (v == NULL)
        return NULL;
    skip_ws(&p);
    if (p.pos != p.len) {
        fail(&p, "text after the value");
        gs_json_free(v);
        return NULL;
    }
    return v;
}

void gs_json_free(struct gs_json *v)
{
    while (v) {
        struct gs_json *next = v->next;

        gs_json_free(v->child);
        free(v->str);
        free(v->key);
        free(v);
        v = next;
    }
}

const struct gs_json *gs_json_get(const struct gs_json *v, const char *key)
{
    const struct gs_json *e;

    if (v == NULL || v->type != GS_JSON_OBJECT)
        return NULL;
    for (e = v->child; e; e = e->next)
        if (strcmp(e->key, key) == 0)
            return e;
    return NULL;
}

double gs_json_num(const struct gs_json *v, double dflt)
{
    return v && v->type == GS_JSON_NUMBER ? v->num : dflt;
}

const char *gs_json_str(const struct gs_json *v, const char *dflt)
{
    return v && v->type == GS_JSON_STRING ? v->str : dflt;
}
