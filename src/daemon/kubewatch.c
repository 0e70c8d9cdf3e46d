/*
 * Decoding a watch's body into events (kubewatch.h). The API server is
 * trusted as far as TLS and its CA say, but a line is still checked whole
 * before anything of it is used, and the buffer is bounded.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/kubewatch.h"

void gd_watch_init(struct gd_watch *w, size_t max_line, gd_watch_cb cb, void *arg)
{
    memset(w, 0, sizeof(*w));
    w->max = max_line;
    w->cb = cb;
    w->arg = arg;
}

static int fail(struct gd_watch *w, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct gd_watch *w, int r, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(w->err, sizeof(w->err), fmt, ap);
    va_end(ap);
    w->failed = r;
    return r;
}

/* One complete line (without its newline). */
static int line(struct gd_watch *w, const char *s, size_t n)
{
    static const char *const names[] = { "ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR" };
    struct gd_watch_event ev;
    json_error_t je;
    json_t *root, *obj, *rv;
    const char *type;
    size_t i;
    int r;

    while (n > 0 && (s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 0; /* an empty line (a keep-alive) */
    if (!(root = json_loadb(s, n, JSON_REJECT_DUPLICATES, &je)))
        return fail(w, -EINVAL, "a watch event that is not JSON (%s)", je.text);
    memset(&ev, 0, sizeof(ev));
    type = json_string_value(json_object_get(root, "type"));
    obj = json_object_get(root, "object");
    for (i = 0; type && i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(type, names[i]) == 0)
            break;
    if (!type || i == sizeof(names) / sizeof(names[0]) || !json_is_object(obj)) {
        r = fail(w, -EINVAL, "a watch event without a known type and an object (type %s)",
                 type ? type : "missing");
        json_decref(root);
        return r;
    }
    ev.type = (enum gd_watch_type)i;
    ev.object = obj;
    if (ev.type == GD_WATCH_ERROR) {
        json_t *code = json_object_get(obj, "code");

        if (!json_is_integer(code) || json_integer_value(code) < 0 ||
            json_integer_value(code) > 999) {
            json_decref(root);
            return fail(w, -EINVAL, "a watch ERROR whose Status has no code from 0 to 999");
        }
        ev.code = (int)json_integer_value(code);
    } else {
        rv = json_object_get(json_object_get(obj, "metadata"), "resourceVersion");
        if (!json_is_string(rv) || json_string_length(rv) == 0 ||
            json_string_length(rv) >= sizeof(ev.rv)) {
            json_decref(root);
            return fail(w, -EINVAL, "a %s event without a resourceVersion (or one too long)",
                        names[i]);
        }
        memcpy(ev.rv, json_string_value(rv), json_string_length(rv) + 1);
    }
    r = w->cb(&ev, w->arg);
    json_decref(root);
    if (r < 0) {
        w->failed = r;
        snprintf(w->err, sizeof(w->err), "stopped by its reader (%d)", r);
    }
    return r < 0 ? r : 0;
}

int gd_watch_feed(struct gd_watch *w, const char *data, size_t n)
{
    const char *nl;
    int r;

    if (w->failed)
        return w->failed;
    while (n > 0) {
        nl = memchr(data, '\n', n);
        size_t take = nl ? (size_t)(nl - data) : n;

        if (w->len + take > w->max)
            return fail(w, -E2BIG, "a watch event longer than the limit (%zu bytes)", w->max);
        if (nl && w->len == 0) {
            /* The whole line is in data: no copy. */
            if ((r = line(w, data, take)) < 0)
                return r;
        } else {
            if (w->len + take > w->cap) {
                size_t cap = w->cap ? w->cap : 4096;
                char *b;

                while (cap < w->len + take)
                    cap *= 2;
                if (cap > w->max)
                    cap = w->max;
                if (!(b = realloc(w->buf, cap)))
                    return fail(w, -ENOMEM, "no memory for a watch event");
                w->buf = b;
                w->cap = cap;
            }
            memcpy(w->buf + w->len, data, take);
            w->len += take;
            if (nl) {
                r = line(w, w->buf, w->len);
                w->len = 0;
                if (r < 0)
                    return r;
            }
        }
        if (!nl)
            break;
        data = nl + 1;
        n -= take + 1;
    }
    return 0;
}

int gd_watch_end(struct gd_watch *w)
{
    size_t i;

    if (w->failed)
        return w->failed;
    for (i = 0; i < w->len; i++)
        if (w->buf[i] != ' ' && w->buf[i] != '\t' && w->buf[i] != '\r')
            return fail(w, -EPIPE, "the watch ended inside an event");
    return 0;
}

void gd_watch_free(struct gd_watch *w)
{
    free(w->buf);
    w->buf = NULL;
    w->len = w->cap = 0;
}
