/*
 * The body of a Kubernetes watch: one JSON event per line ({"type": ..., "object": ...}),
 * arriving in pieces of any size (chunks, reads). A decoder that calls back once per
 * complete event, bounded in the length of a line; pure (no I/O), for the daemon's pod
 * watch, its unit tests and a fuzz target.
 */
#ifndef GPUSLICE_DAEMON_KUBEWATCH_H
#define GPUSLICE_DAEMON_KUBEWATCH_H

#include <jansson.h>
#include <stddef.h>

enum gd_watch_type {
    GD_WATCH_ADDED,
    GD_WATCH_MODIFIED,
    GD_WATCH_DELETED,
    GD_WATCH_BOOKMARK,
    GD_WATCH_ERROR
};

#define GD_WATCH_RV_MAX 64 /* resourceVersions are opaque strings; longer ones are refused */

struct gd_watch_event {
    enum gd_watch_type type;
    const json_t *object;     /* valid during the callback only */
    char rv[GD_WATCH_RV_MAX]; /* object.metadata.resourceVersion; "" for ERROR */
    int code;                 /* ERROR: the Status's code (410: the resourceVersion expired) */
};

/* Called once per event; a negative return stops the decoder and is gd_watch_feed's. */
typedef int (*gd_watch_cb)(const struct gd_watch_event *ev, void *arg);

struct gd_watch {
    char *buf;
    size_t len, cap, max;
    gd_watch_cb cb;
    void *arg;
    int failed; /* a negative errno once a line was refused; nothing is decoded after it */
    char err[256];
};

/* A decoder whose lines may be up to max_line bytes. */
void gd_watch_init(struct gd_watch *w, size_t max_line, gd_watch_cb cb, void *arg);

/*
 * Feeds n bytes of the body. 0, or a negative errno with a message in w->err: -EINVAL (a line
 * that is not a watch event), -E2BIG (a line longer than max_line), -ENOMEM, or the callback's
 * own; after a failure every call returns it again.
 */
int gd_watch_feed(struct gd_watch *w, const char *data, size_t n);

/* The body ended: 0, or -EPIPE when it ended inside an event (the stream was cut). */
int gd_watch_end(struct gd_watch *w);

void gd_watch_free(struct gd_watch *w);

#endif
