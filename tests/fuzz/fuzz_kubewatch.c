/*
 * The watch decoder (src/daemon/kubewatch.c) on any body, fed whole and in pieces of the
 * size the first byte gives: the same events (type, resourceVersion, code) and the same
 * verdict either way; and any pod object the body's events carry through gd_pod_spec, whose
 * accepted limits must be in range.
 */
#include <errno.h>
#include <jansson.h>

#include "daemon/kubewatch.h"
#include "daemon/podspec.h"
#include "fuzz.h"
#include "gpuslice/tenant_abi.h"

struct log {
    char text[8192];
    size_t n;
};

static int record(const struct gd_watch_event *ev, void *arg)
{
    struct log *l = arg;
    struct gd_pod_spec s;
    char err[512];
    int k;

    if (l->n < sizeof(l->text)) {
        k = snprintf(l->text + l->n, sizeof(l->text) - l->n, "%d:%s:%d;", (int)ev->type, ev->rv,
                     ev->code);
        l->n += k > 0 ? (size_t)k : 0;
        if (l->n > sizeof(l->text) - 1)
            l->n = sizeof(l->text) - 1;
    }
    if (gd_pod_spec(ev->object, &s, err, sizeof(err)) == 0) {
        FUZZ_CHECK(s.priority == GPUSLICE_PRIORITY_UNSET || s.priority <= GPUSLICE_PRIORITY_LATENCY,
                   "priority %u", s.priority);
        for (int i = 0; i < s.compute.n; i++)
            FUZZ_CHECK(s.compute.e[i].value >= 1 && s.compute.e[i].value <= 100, "compute %llu",
                       (unsigned long long)s.compute.e[i].value);
        for (int i = 0; i < s.memory.n; i++)
            FUZZ_CHECK(s.memory.e[i].value >= GS_MIN_MEMORY_LIMIT, "memory %llu",
                       (unsigned long long)s.memory.e[i].value);
    } else {
        FUZZ_CHECK(err[0] != '\0', "a refusal without a message");
    }
    return 0;
}

static int run(const uint8_t *data, size_t size, size_t piece, struct log *l)
{
    struct gd_watch w;
    size_t i;
    int r = 0;

    gd_watch_init(&w, 2048, record, l);
    for (i = 0; i < size && r == 0; i += piece)
        r = gd_watch_feed(&w, (const char *)data + i, i + piece <= size ? piece : size - i);
    if (r == 0)
        r = gd_watch_end(&w);
    FUZZ_CHECK(r == 0 || w.err[0] != '\0', "refused (%d) without a message", r);
    gd_watch_free(&w);
    return r;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct log whole, pieces;
    size_t piece;
    int a, b;

    if (size < 1)
        return 0;
    piece = (size_t)data[0] % 64 + 1;
    data++;
    size--;
    whole.n = pieces.n = 0;
    a = run(data, size, size ? size : 1, &whole);
    b = run(data, size, piece, &pieces);
    FUZZ_CHECK(a == b, "whole %d, in pieces of %zu %d", a, piece, b);
    FUZZ_CHECK(whole.n == pieces.n && memcmp(whole.text, pieces.text, whole.n) == 0,
               "events differ: \"%.*s\" and \"%.*s\"", (int)whole.n, whole.text, (int)pieces.n,
               pieces.text);
    return 0;
}
