/*
 * gpuslice mps start|status|stop: one MPS control daemon per user and GPU,
 * in private directories gpuslice owns, started or reused, listed with its
 * servers and clients, and stopped only when no client would be cut off
 * (unless forced). Everything goes through nvidia-cuda-mps-control (mps.c).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/mps.h"
#include "common/mps_pipe.h"
#include "common/parse.h"

#define ERR_LEN 1024

static void mps_usage(void)
{
    printf("usage: gpuslice mps start  [--device D] [--json] [-q]\n"
           "       gpuslice mps status [--device D] [--json] [-q]\n"
           "       gpuslice mps stop   [--device D] [--force] [--json] [-q]\n\n"
           "Manages your own MPS (Multi-Process Service) control daemon for one GPU, so\n"
           "that processes on it run concurrently instead of time-sliced. Its pipe and\n"
           "log directories are $XDG_RUNTIME_DIR/gpuslice-mps/UUID/{pipe,log}, or\n"
           "/tmp/gpuslice-mps-EUID/UUID/{pipe,log} (EUID: your effective user ID) when\n"
           "XDG_RUNTIME_DIR is unset or not an absolute path; mode 0700. Clients use the\n"
           "daemon when CUDA_MPS_PIPE_DIRECTORY names its pipe directory.\n\n"
           "  start    starts nvidia-cuda-mps-control -d for the GPU (or reuses the one\n"
           "           already running there) and sets its default active thread\n"
           "           percentage to 100\n"
           "  status   for each GPU with a gpuslice MPS directory: running or not, the\n"
           "           MPS server PIDs and their client PIDs\n"
           "  stop     asks the daemon to quit and waits for it; refused while clients\n"
           "           are connected unless --force\n\n"
           "options:\n"
           "  -d, --device D  the GPU: a CUDA index (default 0) or a GPU UUID; status\n"
           "                  lists every GPU without it\n"
           "      --force     stop even with clients connected: MPS lets them finish,\n"
           "                  accepts no new ones, and exits after the last\n"
           "      --json      one JSON object on stdout instead of text\n"
           "  -q, --quiet     no notes on stderr (errors still print)\n"
           "  -h, --help      this text\n\n"
           "Each call to nvidia-cuda-mps-control is given $GPUSLICE_MPS_TIMEOUT seconds\n"
           "(default 10; more than 0, at most 600). Exit status: 0 success, 1 error (MPS\n"
           "unavailable, a refused directory, clients connected), 2 bad usage.\n");
}

enum sub { SUB_START, SUB_STATUS, SUB_STOP };

struct opts {
    enum sub sub;
    const char *device; /* NULL: default (0, or every GPU for status) */
    int force, json;
    char bin[MPS_PATH_MAX];
    double timeout;
};

/* A device given as an index or a UUID; the UUID in canonical "GPU-…" form. */
static int parse_device(const char *s, int *index, char uuid[GS_UUID_STRLEN])
{
    char *end;
    long v;

    uuid[0] = '\0';
    *index = -1;
    if (gs_parse_uuid(s, strlen(s), uuid)) {
        memcpy(uuid, "GPU", 3);
        return 0;
    }
    if (!isdigit((unsigned char)s[0]))
        return -EINVAL;
    v = strtol(s, &end, 10);
    if (*end || v < 0 || v > 1023)
        return -EINVAL;
    *index = (int)v;
    return 0;
}

static void json_pids(const pid_t *v, int n)
{
    int i;

    putchar('[');
    for (i = 0; i < n; i++)
        printf("%s%d", i ? "," : "", (int)v[i]);
    putchar(']');
}

static int control_exists(const struct mps_gpu *g)
{
    return gs_mps_control_at(g->pipe);
}

/* Asks the daemon for its servers: 1 if it answered, 0 if it is not there, <0 on error. */
static int probe(const struct opts *o, const struct mps_gpu *g, pid_t **servers, int *n)
{
    struct mps_out out;
    int r;

    if (servers) {
        *servers = NULL;
        *n = 0;
    }
    if (!control_exists(g))
        return 0;
    if ((r = mps_control(o->bin, g, NULL, "get_server_list\n", o->timeout, &out)) < 0) {
        gs_log_error("mps: cannot run %s: %s", o->bin, strerror(-r));
        return r;
    }
    if (out.timed_out) {
        gs_log_error("mps: %s: get_server_list did not answer within %g s (pipe dir %s)", g->uuid,
                     o->timeout, g->pipe);
        return -ETIMEDOUT;
    }
    if (out.status != 0)
        return 0;
    if (servers && (r = mps_parse_pids(out.text, servers, n)) < 0)
        return r;
    return 1;
}

/* The clients of server pid; -ETIMEDOUT etc. on error (named on stderr). */
static int clients_of(const struct opts *o, const struct mps_gpu *g, pid_t pid, pid_t **v, int *n)
{
    struct mps_out out;
    char cmd[64];
    int r;

    *v = NULL;
    *n = 0;
    snprintf(cmd, sizeof(cmd), "get_client_list %d\n", (int)pid);
    if ((r = mps_control(o->bin, g, NULL, cmd, o->timeout, &out)) < 0) {
        gs_log_error("mps: cannot run %s: %s", o->bin, strerror(-r));
        return r;
    }
    if (out.timed_out) {
        gs_log_error("mps: %s: get_client_list did not answer within %g s", g->uuid, o->timeout);
        return -ETIMEDOUT;
    }
    if (out.status != 0)
        return 0; /* the server ended meanwhile */
    return mps_parse_pids(out.text, v, n);
}

/* A daemon's state as status shows it. */
struct daemon {
    struct mps_gpu g;
    int running;
    int nservers;
    pid_t *servers;
    pid_t **clients;
    int *nclients;
};

static void daemon_done(struct daemon *d)
{
    int i;

    for (i = 0; i < d->nservers; i++)
        free(d->clients ? d->clients[i] : NULL);
    free(d->clients);
    free(d->nclients);
    free(d->servers);
    d->servers = NULL;
    d->clients = NULL;
    d->nclients = NULL;
    d->nservers = 0;
}

static int daemon_query(const struct opts *o, struct daemon *d)
{
    int i, r;

    if ((r = probe(o, &d->g, &d->servers, &d->nservers)) < 0)
        return r;
    d->running = r;
    if (!r || d->nservers == 0)
        return 0;
    d->clients = calloc((size_t)d->nservers, sizeof(*d->clients));
    d->nclients = calloc((size_t)d->nservers, sizeof(*d->nclients));
    if (d->clients == NULL || d->nclients == NULL)
        return -ENOMEM;
    for (i = 0; i < d->nservers; i++)
        if ((r = clients_of(o, &d->g, d->servers[i], &d->clients[i], &d->nclients[i])) < 0)
            return r;
    return 0;
}

static int total_clients(const struct daemon *d)
{
    int i, n = 0;

    for (i = 0; i < d->nservers; i++)
        n += d->nclients[i];
    return n;
}

static void print_client_pids(FILE *f, const struct daemon *d, const char *sep)
{
    int i, k, first = 1;

    for (i = 0; i < d->nservers; i++)
        for (k = 0; k < d->nclients[i]; k++, first = 0)
            fprintf(f, "%s%d", first ? "" : sep, (int)d->clients[i][k]);
}

static void print_daemon_json(const struct daemon *d)
{
    int i;

    printf("{\"uuid\":\"%s\",\"pipe_dir\":", d->g.uuid);
    gs_json_string(stdout, d->g.pipe, strlen(d->g.pipe));
    printf(",\"log_dir\":");
    gs_json_string(stdout, d->g.log, strlen(d->g.log));
    printf(",\"running\":%s,\"servers\":[", d->running ? "true" : "false");
    for (i = 0; i < d->nservers; i++) {
        printf("%s{\"pid\":%d,\"clients\":", i ? "," : "", (int)d->servers[i]);
        json_pids(d->clients[i], d->nclients[i]);
        putchar('}');
    }
    printf("]}");
}

static void print_daemon_text(const struct daemon *d)
{
    int i, k;

    printf("%s  %s\n", d->g.uuid, d->running ? "running" : "not running");
    printf("  pipe dir  %s\n", d->g.pipe);
    if (d->running && d->nservers == 0)
        printf("  no MPS server yet (one starts with the first client)\n");
    for (i = 0; i < d->nservers; i++) {
        printf("  server %d: ", (int)d->servers[i]);
        printf(d->nclients[i] == 0 ? "no clients" : d->nclients[i] == 1 ? "client" : "clients");
        for (k = 0; k < d->nclients[i]; k++)
            printf(" %d", (int)d->clients[i][k]);
        printf("\n");
    }
}

/* The GPU UUIDs with a directory under the base, sorted; *n of them in *v (freed by caller). */
static int list_gpus(char (**v)[GS_UUID_STRLEN], int *n)
{
    char base[MPS_PATH_MAX];
    struct dirent *e;
    DIR *dir;
    int r, k = 0;

    *v = NULL;
    *n = 0;
    if ((r = mps_base_dir(base, sizeof(base))) < 0)
        return r;
    if ((dir = opendir(base)) == NULL)
        return errno == ENOENT ? 0 : -errno;
    while ((e = readdir(dir)) != NULL) {
        char u[GS_UUID_STRLEN], (*grown)[GS_UUID_STRLEN];

        if (!gs_parse_uuid(e->d_name, strlen(e->d_name), u) || strncmp(e->d_name, "GPU-", 4) != 0)
            continue;
        if ((grown = realloc(*v, (size_t)(k + 1) * sizeof(**v))) == NULL) {
            closedir(dir);
            return -ENOMEM;
        }
        *v = grown;
        memcpy(u, "GPU", 3);
        memcpy((*v)[k++], u, sizeof(u));
    }
    closedir(dir);
    qsort(*v, (size_t)k, sizeof(**v), (int (*)(const void *, const void *))strcmp);
    *n = k;
    return 0;
}

/* The GPU the options name, its directories, and (for start) checks on them. */
static int pick_gpu(const struct opts *o, int need_driver, struct mps_gpu *g)
{
    char uuid[GS_UUID_STRLEN], err[ERR_LEN];
    int index, r;

    if (parse_device(o->device ? o->device : "0", &index, uuid) < 0)
        return -EINVAL; /* checked while parsing the options */
    if ((index >= 0 || need_driver) && (r = mps_driver_uuid(index, uuid, err, sizeof(err))) < 0) {
        gs_log_error("mps: %s", err);
        return r;
    }
    if ((r = mps_gpu_init(g, uuid)) < 0) {
        gs_log_error("mps: the directory for %s would be too long (XDG_RUNTIME_DIR is %s)", uuid,
                     getenv("XDG_RUNTIME_DIR") ? getenv("XDG_RUNTIME_DIR") : "unset");
        return r;
    }
    return 0;
}

static int mps_start(const struct opts *o)
{
    struct mps_gpu g;
    char err[ERR_LEN];
    int started = 0;

    if (pick_gpu(o, 1, &g) < 0)
        return GS_EXIT_ERROR;
    if (mps_daemon_start(o->bin, &g, o->timeout, &started, err, sizeof(err)) < 0) {
        gs_log_error("mps: %s", err);
        return GS_EXIT_ERROR;
    }
    if (o->json) {
        printf("{\"uuid\":\"%s\",\"pipe_dir\":", g.uuid);
        gs_json_string(stdout, g.pipe, strlen(g.pipe));
        printf(",\"log_dir\":");
        gs_json_string(stdout, g.log, strlen(g.log));
        printf(",\"started\":%s}\n", started ? "true" : "false");
    } else {
        printf("%s: MPS control daemon %s\n", g.uuid,
               started ? "started" : "already running (reused)");
        printf("  clients use it with CUDA_MPS_PIPE_DIRECTORY=%s\n", g.pipe);
    }
    return GS_EXIT_OK;
}

static int mps_status(const struct opts *o)
{
    char(*uuids)[GS_UUID_STRLEN] = NULL, base[MPS_PATH_MAX];
    int n = 0, i, r, status = GS_EXIT_OK, shown = 0;

    if ((r = mps_base_dir(base, sizeof(base))) < 0 || (r = list_gpus(&uuids, &n)) < 0) {
        gs_log_error("mps: cannot read %s: %s", base, strerror(-r));
        return GS_EXIT_ERROR;
    }
    if (o->device) {
        struct mps_gpu want;

        if (pick_gpu(o, 0, &want) < 0) {
            free(uuids);
            return GS_EXIT_ERROR;
        }
        for (i = 0; i < n && strcmp(uuids[i], want.uuid) != 0; i++)
            ;
        if (i < n) {
            memcpy(uuids[0], uuids[i], sizeof(uuids[0]));
            n = 1;
        } else {
            n = 0;
        }
    }
    if (o->json)
        printf("{\"gpus\":[");
    for (i = 0; i < n; i++) {
        struct daemon d;
        char err[ERR_LEN];

        memset(&d, 0, sizeof(d));
        if (mps_gpu_init(&d.g, uuids[i]) < 0)
            continue;
        if ((r = mps_gpu_dirs(&d.g, 0, err, sizeof(err))) < 0 && r != -ENOENT) {
            gs_log_error("mps: %s", err);
            status = GS_EXIT_ERROR;
            continue;
        }
        if (r == 0 && daemon_query(o, &d) < 0)
            status = GS_EXIT_ERROR;
        if (o->json) {
            printf("%s", shown ? "," : "");
            print_daemon_json(&d);
        } else {
            print_daemon_text(&d);
        }
        shown++;
        daemon_done(&d);
    }
    if (o->json)
        printf("]}\n");
    else if (shown == 0)
        printf("no gpuslice MPS daemon%s (none started in %s)\n", o->device ? " for this GPU" : "s",
               base);
    free(uuids);
    return status;
}

static int mps_stop(const struct opts *o)
{
    struct daemon d;
    struct mps_out out;
    char err[ERR_LEN];
    double deadline;
    pid_t daemon;
    int r, clients, gone = 0;

    memset(&d, 0, sizeof(d));
    if (pick_gpu(o, 0, &d.g) < 0)
        return GS_EXIT_ERROR;
    if ((r = mps_gpu_dirs(&d.g, 0, err, sizeof(err))) < 0 && r != -ENOENT) {
        gs_log_error("mps: %s", err);
        return GS_EXIT_ERROR;
    }
    if (r == 0 && daemon_query(o, &d) < 0) {
        daemon_done(&d);
        return GS_EXIT_ERROR;
    }
    if (!d.running) {
        if (o->json)
            printf("{\"uuid\":\"%s\",\"running\":false,\"stopped\":false,\"clients\":[]}\n",
                   d.g.uuid);
        else
            printf("%s: no gpuslice MPS daemon is running\n", d.g.uuid);
        daemon_done(&d);
        return GS_EXIT_OK;
    }
    clients = total_clients(&d);
    if (clients && !o->force) {
        fprintf(stderr, "gpuslice: mps: stop: %s has %d client%s connected (PID%s ", d.g.uuid,
                clients, clients == 1 ? "" : "s", clients == 1 ? "" : "s");
        print_client_pids(stderr, &d, " ");
        fprintf(stderr, "); stop them first, or use --force\n");
        daemon_done(&d);
        return GS_EXIT_ERROR;
    }
    daemon = mps_daemon_find(d.g.pipe);
    /* quit may answer only once the daemon is gone (and with clients, after them). */
    if ((r = mps_control(o->bin, &d.g, NULL, "quit\n", o->timeout, &out)) < 0) {
        gs_log_error("mps: cannot run %s: %s", o->bin, strerror(-r));
        daemon_done(&d);
        return GS_EXIT_ERROR;
    }
    if (!out.timed_out && out.status != 0) {
        gs_log_error("mps: %s: quit failed%s%s", d.g.uuid, out.len ? ": " : "", out.text);
        daemon_done(&d);
        return GS_EXIT_ERROR;
    }
    for (deadline = mps_now_s() + o->timeout;; mps_sleep_ms(50)) {
        /* The daemon's process where /proc shows it, else its answers. */
        if (daemon > 0)
            gone = mps_daemon_find(d.g.pipe) <= 0;
        else
            gone = probe(o, &d.g, NULL, NULL) == 0;
        if (gone)
            break;
        if (mps_now_s() >= deadline)
            break;
    }
    if (o->json) {
        printf("{\"uuid\":\"%s\",\"running\":%s,\"stopped\":%s,\"clients\":", d.g.uuid,
               gone ? "false" : "true", gone ? "true" : "false");
        printf("[");
        print_client_pids(stdout, &d, ",");
        printf("]}\n");
    }
    r = GS_EXIT_OK;
    if (gone) {
        if (!o->json)
            printf("%s: MPS control daemon stopped\n", d.g.uuid);
    } else if (clients) {
        if (!o->json) {
            printf("%s: quit sent; MPS accepts no new clients and the daemon exits once its "
                   "clients end (PIDs ",
                   d.g.uuid);
            print_client_pids(stdout, &d, " ");
            printf(")\n");
        }
    } else {
        gs_log_error("mps: %s: the daemon did not exit within %g s of quit (pipe dir %s)", d.g.uuid,
                     o->timeout, d.g.pipe);
        r = GS_EXIT_ERROR;
    }
    daemon_done(&d);
    return r;
}

static int run_mps(int argc, char **argv)
{
    static const struct option opts[] = {
        { "device", required_argument, NULL, 'd' }, { "force", no_argument, NULL, 'f' },
        { "json", no_argument, NULL, 'j' },         { "quiet", no_argument, NULL, 'q' },
        { "help", no_argument, NULL, 'h' },         { NULL, 0, NULL, 0 }
    };
    static const char *const subs[] = { "start", "status", "stop" };
    struct opts o;
    char err[ERR_LEN], uuid[GS_UUID_STRLEN];
    const char *sub = NULL;
    int c, i, index, r;

    memset(&o, 0, sizeof(o));
    optind = 1;
    opterr = 0;
    /* Options may come before or after the subcommand. */
    while ((c = getopt_long(argc, argv, ":qhd:", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (parse_device(optarg, &index, uuid) < 0) {
                gs_log_error("mps: --device: \"%s\" is not a GPU (use a CUDA index such as 0, "
                             "or a UUID GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx)",
                             optarg);
                return GS_EXIT_USAGE;
            }
            o.device = optarg;
            break;
        case 'f':
            o.force = 1;
            break;
        default:
            if ((r = gs_cli_common_option("mps", c, argv, opts, mps_usage, &o.json)) >= 0)
                return r;
        }
    }
    if (optind >= argc) {
        gs_log_error("mps: which: start, status or stop? (see gpuslice mps --help)");
        return GS_EXIT_USAGE;
    }
    sub = argv[optind];
    for (i = 0; i < 3 && strcmp(sub, subs[i]) != 0; i++)
        ;
    if (i == 3) {
        gs_log_error("mps: unknown subcommand \"%s\" (use start, status or stop)", sub);
        return GS_EXIT_USAGE;
    }
    o.sub = (enum sub)i;
    if (optind + 1 < argc) {
        gs_log_error("mps: unexpected argument \"%s\" (see gpuslice mps --help)", argv[optind + 1]);
        return GS_EXIT_USAGE;
    }
    if (o.force && o.sub != SUB_STOP) {
        gs_log_error("mps: --force applies to stop only");
        return GS_EXIT_USAGE;
    }
    if ((o.timeout = mps_timeout()) < 0)
        return GS_EXIT_USAGE;
    if (mps_check_platform(o.bin, sizeof(o.bin), err, sizeof(err)) < 0) {
        gs_log_error("mps: %s", err);
        return GS_EXIT_ERROR;
    }
    /* A control client that exits before reading its command must not kill us. */
    signal(SIGPIPE, SIG_IGN);
    switch (o.sub) {
    case SUB_START:
        c = mps_start(&o);
        break;
    case SUB_STATUS:
        c = mps_status(&o);
        break;
    default:
        c = mps_stop(&o);
        break;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        gs_log_error("mps: cannot write the output: %s", strerror(errno));
        return GS_EXIT_ERROR;
    }
    return c;
}

const struct gs_cmd gs_cmd_mps = { "mps", "start, list or stop your MPS control daemon for a GPU",
                                   run_mps, mps_usage };
