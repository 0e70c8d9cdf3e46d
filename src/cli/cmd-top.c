/*
 * gpuslice top: a live view of the node from the daemon, refreshed in place
 * like nvidia-smi dmon or nvtop: per GPU its utilization, memory, power and
 * SM clock; per tenant its limits, memory, share of GPU time and throttled
 * time over the last interval, with its processes. --once prints one view
 * (two samples an interval apart, for the shares); --json prints the same as
 * one JSON object.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/parse.h"
#include "control/daemon_client.h"
#include "control/json.h"

#define MAX_SHARES 1024

static void top_usage(void)
{
    printf("usage: gpuslice top [--interval SECONDS] [--once] [--json] [-q]\n\n"
           "A live view of the node from gpusliced, refreshed in place: per GPU its\n"
           "utilization, memory, power and SM clock; per tenant its limits, memory in\n"
           "use, share of the GPU's time and time throttled over the last interval,\n"
           "and its processes. Ctrl-C ends it. Needs a running gpusliced.\n\n"
           "options:\n"
           "  -i, --interval SECONDS how often to refresh: 0.1..3600 (default 1)\n"
           "      --once             print one view and exit (two samples an interval\n"
           "                         apart, for the shares)\n"
           "      --json             print one view as JSON and exit: the daemon's\n"
           "                         devices and tenants, and each tenant's shares\n"
           "  -q, --quiet            no messages\n"
           "  -h, --help             this text\n");
}

/* A tenant's counters on one GPU at one sample, for the shares of the next. */
struct counter {
    char key[160]; /* tenant id, '/', GPU UUID */
    double gpu_time, throttled;
};

struct sample {
    struct gs_json *devices, *tenants;
    char *devices_text, *tenants_text;
    double at; /* CLOCK_MONOTONIC seconds */
    struct counter c[MAX_SHARES];
    int nc;
};

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void sample_done(struct sample *s)
{
    gs_json_free(s->devices);
    gs_json_free(s->tenants);
    free(s->devices_text);
    free(s->tenants_text);
    memset(s, 0, sizeof(*s));
}

/* One GET, parsed; 0, or -1 after saying why. */
static int get(const char *path, struct gs_json **out, char **text)
{
    char err[512], msg[512];
    int st = gs_daemon_request("GET", path, NULL, text, err, sizeof(err));

    if (st < 0) {
        gs_log_error("top: %s", err); /* err says why, and what to do (daemon_client.c) */
        return -1;
    }
    if (st != 200) {
        gs_daemon_error_message(*text, msg, sizeof(msg));
        gs_log_error("top: GET %s: HTTP %d: %s", path, st, msg);
        return -1;
    }
    if ((*out = gs_json_parse(*text, strlen(*text), err, sizeof(err))) == NULL) {
        gs_log_error("top: GET %s: the daemon's answer is not JSON: %s", path, err);
        return -1;
    }
    return 0;
}

static int take(struct sample *s)
{
    const struct gs_json *t, *d;

    memset(s, 0, sizeof(*s));
    if (get("/v1/devices", &s->devices, &s->devices_text) < 0 ||
        get("/v1/tenants", &s->tenants, &s->tenants_text) < 0)
        return -1;
    s->at = now_s();
    for (t = gs_json_get(s->tenants, "tenants") ? gs_json_get(s->tenants, "tenants")->child : NULL;
         t; t = t->next)
        for (d = gs_json_get(t, "devices") ? gs_json_get(t, "devices")->child : NULL;
             d && s->nc < MAX_SHARES; d = d->next) {
            struct counter *c = &s->c[s->nc++];

            snprintf(c->key, sizeof(c->key), "%s/%s", gs_json_str(gs_json_get(t, "id"), "?"),
                     gs_json_str(gs_json_get(d, "uuid"), "?"));
            c->gpu_time = gs_json_num(gs_json_get(d, "gpu_time_seconds"), 0);
            c->throttled = gs_json_num(gs_json_get(d, "throttled_seconds"), 0);
        }
    return 0;
}

/* The share of the interval between prev and cur a counter grew by; NAN when unknown. */
static void shares(const struct sample *prev, const struct sample *cur, const char *key,
                   double *busy, double *throttled)
{
    int i, j;

    *busy = *throttled = NAN;
    if (prev == NULL || cur->at <= prev->at)
        return;
    for (i = 0; i < cur->nc; i++) {
        if (strcmp(cur->c[i].key, key) != 0)
            continue;
        for (j = 0; j < prev->nc; j++)
            if (strcmp(prev->c[j].key, key) == 0) {
                double dt = cur->at - prev->at;

                *busy = (cur->c[i].gpu_time - prev->c[j].gpu_time) / dt;
                *throttled = (cur->c[i].throttled - prev->c[j].throttled) / dt;
                if (*busy < 0)
                    *busy = 0;
                if (*throttled < 0)
                    *throttled = 0;
            }
    }
}

static void size_text(double bytes, char *out, size_t len)
{
    if (bytes < 0)
        snprintf(out, len, "-");
    else if (bytes >= (double)(1ULL << 30))
        snprintf(out, len, "%.1f GiB", bytes / (double)(1ULL << 30));
    else
        snprintf(out, len, "%.0f MiB", bytes / (double)(1ULL << 20));
}

static void pct_text(double ratio, char *out, size_t len)
{
    if (isnan(ratio) || ratio < 0)
        snprintf(out, len, "-");
    else
        snprintf(out, len, "%.1f%%", 100 * ratio);
}

/* The GPU index a tenant's device entry is on, as text. */
static const char *index_text(const struct gs_json *d, char *buf, size_t len)
{
    const struct gs_json *i = gs_json_get(d, "index");

    if (i && i->type == GS_JSON_NUMBER)
        snprintf(buf, len, "%d", (int)i->num);
    else
        snprintf(buf, len, "?");
    return buf;
}

static void show(FILE *f, const struct sample *prev, const struct sample *cur, double interval)
{
    const struct gs_json *devs = gs_json_get(cur->devices, "devices"), *d, *t;
    const struct gs_json *tenants = gs_json_get(cur->tenants, "tenants");
    char a[32], b[32], c[32], when[32];
    time_t wall = time(NULL);
    struct tm tm;

    localtime_r(&wall, &tm);
    strftime(when, sizeof(when), "%H:%M:%S", &tm);
    fprintf(f, "gpuslice top - %s, %zu GPU%s%s, %zu tenant%s, %s (every %.1f s)\n\n",
            gs_json_str(gs_json_get(cur->devices, "hostname"), "?"), devs ? devs->n : 0,
            devs && devs->n == 1 ? "" : "s",
            gs_json_get(cur->devices, "simulated") &&
                    gs_json_get(cur->devices, "simulated")->type == GS_JSON_TRUE
                ? " (simulated)"
                : "",
            tenants ? tenants->n : 0, tenants && tenants->n == 1 ? "" : "s", when, interval);
    fprintf(f, "%-4s %-26s %6s %-21s %8s %9s %5s\n", "GPU", "NAME", "UTIL", "MEMORY", "POWER",
            "SM CLOCK", "TEMP");
    for (d = devs ? devs->child : NULL; d; d = d->next) {
        const struct gs_json *u = gs_json_get(d, "utilization");
        char mem[80];

        size_text(gs_json_num(gs_json_get(d, "memory_used_bytes"), -1), a, sizeof(a));
        size_text(gs_json_num(gs_json_get(d, "memory_total_bytes"), -1), b, sizeof(b));
        snprintf(mem, sizeof(mem), "%s / %s", a, b);
        pct_text(u && u->type == GS_JSON_NUMBER ? u->num : NAN, c, sizeof(c));
        fprintf(f, "%-4d %-26.26s %6s %-21s %6.0f W %5.0f MHz %3.0f C\n",
                (int)gs_json_num(gs_json_get(d, "index"), -1),
                gs_json_str(gs_json_get(d, "name"), "?"), c, mem,
                gs_json_num(gs_json_get(d, "power_watts"), NAN),
                gs_json_num(gs_json_get(d, "sm_clock_mhz"), NAN),
                gs_json_num(gs_json_get(d, "temperature_celsius"), NAN));
    }
    fprintf(f, "\n%-20s %-14s %-4s %10s %10s %8s %9s %9s %5s\n", "TENANT", "ID", "GPU", "MEM LIMIT",
            "MEM USED", "CEILING", "GPU TIME", "THROTTLED", "PROCS");
    for (t = tenants ? tenants->child : NULL; t; t = t->next) {
        const struct gs_json *td = gs_json_get(t, "devices"), *e;
        const char *id = gs_json_str(gs_json_get(t, "id"), "?");
        char name[24];

        snprintf(name, sizeof(name), "%s%s", gs_json_str(gs_json_get(t, "name"), ""),
                 gs_json_get(t, "managed") && gs_json_get(t, "managed")->type == GS_JSON_TRUE ? "*"
                                                                                              : "");
        if (td == NULL || td->n == 0) {
            /* On no GPU yet: the limits it will have on each (the defaults), as tenants shows. */
            const struct gs_json *lim = gs_json_get(t, "limits");
            const struct gs_json *dm = gs_json_get(gs_json_get(lim, "memory"), "default");
            const struct gs_json *dc = gs_json_get(gs_json_get(lim, "compute"), "default");
            char lim_s[32], ceil_s[16];

            size_text(dm && dm->type == GS_JSON_NUMBER ? dm->num : -1, lim_s, sizeof(lim_s));
            if (dc && dc->type == GS_JSON_NUMBER)
                snprintf(ceil_s, sizeof(ceil_s), "%.0f%%", dc->num);
            else
                snprintf(ceil_s, sizeof(ceil_s), "-");
            fprintf(f, "%-20.20s %-14.14s %-4s %10s %10s %8s %9s %9s %5d\n", name, id, "-", lim_s,
                    "-", ceil_s, "-", "-", (int)gs_json_num(gs_json_get(t, "processes"), 0));
            continue;
        }
        for (e = td->child; e; e = e->next) {
            char key[160], lim[32], used[32], ceil_s[16], busy_s[16], thr_s[16], idx[16];
            const struct gs_json *l = gs_json_get(e, "memory_limit_bytes");
            const struct gs_json *cl = gs_json_get(e, "compute_limit_percent");
            double busy, thr;

            snprintf(key, sizeof(key), "%s/%s", id, gs_json_str(gs_json_get(e, "uuid"), "?"));
            shares(prev, cur, key, &busy, &thr);
            size_text(l && l->type == GS_JSON_NUMBER ? l->num : -1, lim, sizeof(lim));
            size_text(gs_json_num(gs_json_get(e, "memory_used_bytes"), -1), used, sizeof(used));
            if (cl && cl->type == GS_JSON_NUMBER)
                snprintf(ceil_s, sizeof(ceil_s), "%.0f%%", cl->num);
            else
                snprintf(ceil_s, sizeof(ceil_s), "-");
            pct_text(busy, busy_s, sizeof(busy_s));
            pct_text(thr, thr_s, sizeof(thr_s));
            fprintf(f, "%-20.20s %-14.14s %-4s %10s %10s %8s %9s %9s %5d\n",
                    e == td->child ? name : "", e == td->child ? id : "",
                    index_text(e, idx, sizeof(idx)), lim, used, ceil_s, busy_s, thr_s,
                    e == td->child ? (int)gs_json_num(gs_json_get(t, "processes"), 0) : 0);
        }
    }
    fprintf(f,
            "\n* a tenant of the daemon's; GPU TIME and THROTTLED: shares of the last %.1f s "
            "(measured where a tenant has a ceiling)\n",
            interval);
}

/* The members of a JSON object's text (what lies between its braces); *len 0 for "{}". */
static const char *members(const char *text, int *len)
{
    const char *open = strchr(text, '{'), *close = strrchr(text, '}');

    *len = 0;
    if (!open || !close || close <= open)
        return "";
    for (open++; open < close && isspace((unsigned char)*open); open++)
        ;
    *len = (int)(close - open);
    return open;
}

/*
 * One object: the members of the daemon's answers to GET /v1/devices (hostname,
 * simulated, driver_version, devices) and GET /v1/tenants (tenants) side by side,
 * then the shares of the interval.
 */
static void show_json(FILE *f, const struct sample *prev, const struct sample *cur)
{
    const char *dm, *tm;
    int i, dl, tl;

    dm = members(cur->devices_text, &dl);
    tm = members(cur->tenants_text, &tl);
    fprintf(f, "{%.*s%s%.*s%s\"interval_seconds\":%.3f,\"shares\":[", dl, dm, dl ? "," : "", tl, tm,
            tl ? "," : "", prev ? cur->at - prev->at : 0.0);
    for (i = 0; i < cur->nc; i++) {
        const char *slash = strchr(cur->c[i].key, '/');
        double busy, thr;

        shares(prev, cur, cur->c[i].key, &busy, &thr);
        fprintf(f, "%s{\"tenant\":\"%.*s\",\"gpu\":\"%s\",", i ? "," : "",
                slash ? (int)(slash - cur->c[i].key) : 0, cur->c[i].key, slash ? slash + 1 : "");
        if (isnan(busy))
            fprintf(f, "\"gpu_time\":null,\"throttled\":null}");
        else
            fprintf(f, "\"gpu_time\":%.4f,\"throttled\":%.4f}", busy, thr);
    }
    fprintf(f, "]}\n");
}

static void nap(double s)
{
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };

    while (!stop && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static int run_top(int argc, char **argv)
{
    static const struct option opts[] = {
        { "interval", required_argument, NULL, 'i' }, { "once", no_argument, NULL, 'o' },
        { "json", no_argument, NULL, 'j' },           { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },           { NULL, 0, NULL, 0 }
    };
    static struct sample a, b;
    struct sample *prev = &a, *cur = &b, *tmp;
    double interval = 1;
    int c, r, once = 0, json = 0, tty = isatty(STDOUT_FILENO), first = 1;
    char *end;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, ":i:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            interval = strtod(optarg, &end);
            if (*optarg == '\0' || *end != '\0' || !(interval >= 0.1 && interval <= 3600)) {
                gs_log_error("top: --interval: \"%s\" is not a number of seconds from 0.1 to "
                             "3600",
                             optarg);
                return GS_EXIT_USAGE;
            }
            break;
        case 'o':
            once = 1;
            break;
        default:
            if ((r = gs_cli_common_option("top", c, argv, opts, top_usage, &json)) >= 0)
                return r;
        }
    }
    if (optind < argc) {
        gs_log_error("top: unexpected argument \"%s\" (see gpuslice top --help)", argv[optind]);
        return GS_EXIT_USAGE;
    }
    signal(SIGINT, on_signal);
    signal(SIGTERM, on_signal);
    if (take(prev) < 0)
        return GS_EXIT_ERROR;
    for (;;) {
        int shown_once = once || json;

        if (!shown_once && first) {
            if (tty)
                fputs("\033[H\033[2J", stdout);
            show(stdout, NULL, prev, interval);
            fflush(stdout);
        }
        first = 0;
        nap(interval);
        if (stop)
            break;
        if (take(cur) < 0) {
            sample_done(prev);
            return GS_EXIT_ERROR;
        }
        if (json)
            show_json(stdout, prev, cur);
        else {
            if (tty && !once)
                fputs("\033[H\033[2J", stdout);
            else if (!once)
                fputs("\n", stdout);
            show(stdout, prev, cur, interval);
        }
        fflush(stdout);
        sample_done(prev);
        tmp = prev;
        prev = cur;
        cur = tmp;
        if (shown_once)
            break;
    }
    sample_done(prev);
    sample_done(cur);
    return GS_EXIT_OK;
}

const struct gs_cmd gs_cmd_top = { "top", "a live view of the GPUs and tenants (from gpusliced)",
                                   run_top, top_usage };
