/*
 * gpusliced's options, each declared once in one table: its name (the same in
 * the config file and as a flag), its kind, its default, its bounds and one
 * line of help. The config file holds "name = value" lines ('#' starts a
 * comment); flags given on the command line win over it.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/env.h"
#include "common/tenant.h"
#include "daemon/daemon.h"

#ifndef GPUSLICE_VERSION
#define GPUSLICE_VERSION "0.0.0"
#endif

#define GD_DEFAULT_CONFIG "/etc/gpuslice/gpusliced.conf"

struct gd_options gd_opt;

static void gd_options_dump(FILE *f);

enum kind { OPT_PATH, OPT_STRING, OPT_LONG, OPT_BOOL };

struct option_def {
    const char *name;
    enum kind kind;
    size_t off, size; /* where in gd_opt, and the buffer's size for strings */
    const char *def;  /* NULL: computed (the run directory) or empty */
    long min, max;
    const char *help;
};

#define STR(kind, f, def, help)                                                                    \
    {                                                                                              \
#f, kind, offsetof(struct gd_options, f), sizeof(gd_opt.f), def, 0, 0, help                \
    }
#define NUM(f, def, min, max, help)                                                                \
    {                                                                                              \
#f, OPT_LONG, offsetof(struct gd_options, f), sizeof(long), def, min, max, help            \
    }
#define FLAG(f, help)                                                                              \
    {                                                                                              \
#f, OPT_BOOL, offsetof(struct gd_options, f), sizeof(int), "0", 0, 1, help                 \
    }

/* Names use '-' where the struct uses '_': fixed up in name_of(). */
static const struct option_def defs[] = {
    STR(OPT_PATH, run_dir, NULL,
        "run directory: node segment, socket, managed tenants (default $GPUSLICE_DAEMON_DIR, "
        "absolute, else /run/gpuslice as root, else $XDG_RUNTIME_DIR/gpuslice, else "
        "/tmp/gpuslice-UID)"),
    STR(OPT_PATH, state_dir, NULL,
        "state directory (default /var/lib/gpuslice as root, else the run directory's state/)"),
    STR(OPT_PATH, socket, "", "unix socket path (default RUN_DIR/gpusliced.sock)"),
    STR(OPT_STRING, listen, "", "also listen on TCP ADDR:PORT (needs token-file)"),
    STR(OPT_PATH, token_file, "", "file holding the bearer token TCP clients must send"),
    STR(OPT_STRING, admin_group, "gpuslice-admin",
        "group whose members may raise limits and change other users' tenants"),
    STR(OPT_STRING, socket_group, GD_SOCKET_GROUP_DEFAULT,
        "group the socket belongs to, if it exists"),
    STR(OPT_PATH, nvml, "", "NVML library (default libnvidia-ml.so.1, else the simulated GPU)"),
    STR(OPT_STRING, metrics_labels, "dcgm",
        "device label names: dcgm (gpu, UUID, modelName, Hostname, as dcgm-exporter) or "
        "prometheus (gpu, uuid, model_name, hostname: what promtool's lint asks)"),
    NUM(sample_ms, "100", 10, 60000, "milliseconds between NVML samples"),
    NUM(sweep_ms, "250", 10, 60000, "milliseconds between reads of the tenants"),
    NUM(max_connections, "128", 1, 10000, "connections at once on each listener"),
    NUM(max_peer_connections, "32", 1, 10000,
        "connections at once of one user (unix socket) or address (TCP, the webhook); root "
        "and the daemon's user are not counted"),
    NUM(reserved_connections, "8", 0, 1000,
        "connections on the unix socket beyond max-connections, kept for root and the daemon's "
        "user (the liveness probe)"),
    NUM(timeout_s, "10", 1, 3600, "seconds an idle connection is kept"),
    NUM(request_timeout_s, "10", 1, 3600,
        "seconds a request may take whole (TLS handshake, headers, body and answer), from its "
        "connection or the previous answer"),
    NUM(request_memory, "67108864", 1048576, 17179869184L,
        "bytes of request bodies and their parsed JSON held at once (answered 503 past it)"),
    NUM(webhook_max_body, "4194304", 65536, 67108864,
        "the webhook's largest AdmissionReview, bytes (above the API server's 3 MiB of a "
        "request, so that no pod is refused for its size)"),
    NUM(nice, "-10", -20, 19,
        "the CPU priority (nice) the daemon answers at, where it may set it (root or "
        "CAP_SYS_NICE), so that busy tenants do not slow its answers; its other threads run 5 "
        "steps lower; 0: as it is started"),
    NUM(max_body, "65536", 256, 16777216, "largest request body, bytes"),
    NUM(max_header, "16384", 1024, 1048576, "largest request line and headers, bytes"),
    NUM(max_sse, "32", 0, 1000, "event subscribers at once"),
    NUM(events_history, "1024", 16, 1000000, "events kept for Last-Event-ID"),
    STR(OPT_STRING, kube_api, "",
        "the Kubernetes API server's https:// URL, to follow this node's pods; empty: in a "
        "cluster (KUBERNETES_SERVICE_HOST) its own; off: never"),
    STR(OPT_PATH, kube_token_file, "",
        "the service account token for the API server (default "
        "/var/run/secrets/kubernetes.io/serviceaccount/token)"),
    STR(OPT_PATH, kube_ca_file, "",
        "the CA the API server's certificate is checked against (default "
        "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt)"),
    STR(OPT_STRING, node_name, "", "this node's name in the cluster (default $NODE_NAME)"),
    STR(OPT_STRING, webhook_listen, "",
        "serve the mutating admission webhook that injects the interposer into pods, over TLS "
        "on ADDR:PORT (needs webhook-cert and webhook-key)"),
    STR(OPT_PATH, webhook_cert, "", "the webhook's certificate chain (PEM)"),
    STR(OPT_PATH, webhook_key, "", "the webhook's private key (PEM; only its owner may read it)"),
    STR(OPT_PATH, inject_lib_dir, "/var/lib/gpuslice/lib",
        "the node's directory of libgpuslice.so and ld.so.preload that injected pods mount"),
    STR(OPT_PATH, inject_run_dir, "",
        "the node's run directory that injected pods mount (default the run directory)"),
    STR(OPT_STRING, guard_memory, "kill",
        "what is done to a managed tenant whose processes hold more GPU memory than its limit "
        "as NVML counts it (a corrupted or bypassed interposer): kill, freeze (until within its "
        "limit) or report"),
    STR(OPT_STRING, guard_compute, "freeze",
        "what is done to a managed tenant using more of a GPU's time than its ceiling plus "
        "guard-compute-margin as NVML measures it: freeze (until its average is back at its "
        "ceiling), kill or report"),
    NUM(guard_grace_ms, "200", 0, 60000,
        "milliseconds a tenant may be over a limit (two NVML samples at least) before the guard "
        "acts"),
    NUM(guard_compute_margin, "10", 0, 100,
        "points of a GPU's time above its ceiling that NVML's measure of a tenant may show before "
        "the guard acts"),
    STR(OPT_PATH, tenant_cgroup, "",
        "a cgroup v2 directory (e.g. /sys/fs/cgroup/gpuslice) under which each managed tenant "
        "gets a cgroup its joining processes are moved into: the kernel then says which "
        "processes are the tenant's (the guard's attribution and freezer); empty: by lineage"),
    NUM(tenants_per_user, "16", 0, 256,
        "managed tenants a user who is not an admin may have at once (API-made; pods aside)"),
    NUM(members_per_user, "1024", 1, 4096,
        "processes joined to the tenants of one user who is not an admin, at once (the node's "
        "member table holds 4096)"),
    NUM(pod_member_reserve, "512", 0, 4095,
        "places of the node's member table kept for pods' processes"),
    FLAG(dra, "serve as the Kubernetes DRA driver gpu.gpuslice.io (needs kube-api): publish "
              "the node's GPUs as a ResourceSlice whose devices claims share by memory and "
              "cores, and prepare each claim as a tenant held to what it was allocated"),
    NUM(dra_publish_s, "10", 1, 3600,
        "seconds between checks of the node's ResourceSlice against its GPUs (a GPU that came "
        "or went, a slice deleted or changed by another): published again where it differs"),
    STR(OPT_PATH, kubelet_plugin_dir, "/var/lib/kubelet/plugins/gpu.gpuslice.io",
        "directory of the DRA driver's socket (dra.sock), which the kubelet calls"),
    STR(OPT_PATH, kubelet_registry_dir, "/var/lib/kubelet/plugins_registry",
        "the kubelet's plugin registration directory"),
    STR(OPT_PATH, cdi_dir, "/var/run/cdi",
        "directory the DRA driver writes each prepared claim's CDI spec into"),
    STR(OPT_STRING, nvidia_cdi_dirs, "/etc/cdi:/var/run/cdi",
        "directories (':'-separated) where NVIDIA's CDI spec (nvidia.com/gpu=<UUID>, from "
        "nvidia-ctk cdi generate) is looked for before a claim is prepared"),
    NUM(pod_reserve, "64", 0, 255,
        "places of the node's 256-tenant table kept for pods: other tenants may not take them"),
    STR(OPT_PATH, host_cgroup_root, "/sys/fs/cgroup",
        "the host's cgroup hierarchies, mounted from the root (pods' cgroups are placed in them "
        "when the daemon has a cgroup namespace of its own)"),
    STR(OPT_STRING, pod_latency_namespaces, "",
        "namespaces whose pods may ask for the latency class, comma-separated (* for all; "
        "default none: only an admin's tenants are latency)"),
    FLAG(foreground, "stay in the foreground, logging to stderr"),
    FLAG(webhook_only,
         "serve only the admission webhook (webhook-listen), apart from the node daemon: no "
         "GPUs, node segment, socket or run directory (needs inject-run-dir)"),
    FLAG(webhook_claims,
         "the webhook gives a GPU pod a claim of the DRA driver (from a ResourceClaimTemplate "
         "named after its slice, which it makes in the pod's namespace: needs the API server, "
         "kube-api) instead of the interposer's mounts, and takes its nvidia.com/gpu, gpumem "
         "and gpucores away"),
    FLAG(simulated, "use the simulated GPU even where an NVIDIA driver is installed"),
    FLAG(verbose, "log every request"),
};

#define NDEFS (sizeof(defs) / sizeof(defs[0]))

long gd_nice_background(void)
{
    return gd_opt.nice + 5 < 19 ? gd_opt.nice + 5 : 19;
}

static void name_of(const struct option_def *d, char *out, size_t len)
{
    size_t i;

    snprintf(out, len, "%s", d->name);
    for (i = 0; out[i]; i++)
        if (out[i] == '_')
            out[i] = '-';
}

static const struct option_def *find(const char *name, size_t n)
{
    char buf[64];
    size_t i;

    for (i = 0; i < NDEFS; i++) {
        name_of(&defs[i], buf, sizeof(buf));
        if (strlen(buf) == n && strncmp(buf, name, n) == 0)
            return &defs[i];
    }
    return NULL;
}

/* Sets d from text; where names the source in a message. 0 or GS exit status 2. */
static int set(const struct option_def *d, const char *v, const char *where)
{
    char name[64], *end;
    void *p = (char *)&gd_opt + d->off;
    long n;

    name_of(d, name, sizeof(name));
    switch (d->kind) {
    case OPT_PATH:
    case OPT_STRING:
        if (strlen(v) >= d->size) {
            fprintf(stderr, "gpusliced: %s: %s is %zu characters long (at most %zu)\n", where, name,
                    strlen(v), d->size - 1);
            return 2;
        }
        if (d->kind == OPT_PATH && *v && *v != '/') {
            fprintf(stderr, "gpusliced: %s: %s \"%s\" is not an absolute path\n", where, name, v);
            return 2;
        }
        memcpy(p, v, strlen(v) + 1);
        return 0;
    case OPT_BOOL:
        if (strcmp(v, "1") == 0 || strcmp(v, "true") == 0 || strcmp(v, "yes") == 0)
            *(int *)p = 1;
        else if (strcmp(v, "0") == 0 || strcmp(v, "false") == 0 || strcmp(v, "no") == 0)
            *(int *)p = 0;
        else {
            fprintf(stderr, "gpusliced: %s: %s \"%s\" is not a boolean (use true or false)\n",
                    where, name, v);
            return 2;
        }
        return 0;
    case OPT_LONG:
        errno = 0;
        n = strtol(v, &end, 10);
        if (*v == '\0' || *end != '\0' || errno || n < d->min || n > d->max) {
            fprintf(stderr, "gpusliced: %s: %s \"%s\" is not an integer from %ld to %ld\n", where,
                    name, v, d->min, d->max);
            return 2;
        }
        *(long *)p = n;
        return 0;
    }
    return 2;
}

/* Reads the config file; a missing default file is fine, a missing named one is not. */
static int load_file(const char *path, int named)
{
    char line[4096], where[PATH_MAX + 32];
    FILE *f = fopen(path, "re");
    int lineno = 0, r = 0;

    if (f == NULL) {
        if (!named && errno == ENOENT)
            return 0;
        fprintf(stderr, "gpusliced: --config: cannot read %s: %s\n", path, strerror(errno));
        return 2;
    }
    while (r == 0 && fgets(line, sizeof(line), f)) {
        char *s = line, *eq, *k_end, *v, *e;
        const struct option_def *d;

        lineno++;
        snprintf(where, sizeof(where), "%s:%d", path, lineno);
        if (strchr(line, '\n') == NULL && !feof(f)) {
            fprintf(stderr, "gpusliced: %s: line too long (at most %zu characters)\n", where,
                    sizeof(line) - 2);
            r = 2;
            break;
        }
        if ((e = strchr(s, '#')) != NULL)
            *e = '\0';
        while (*s == ' ' || *s == '\t')
            s++;
        e = s + strlen(s);
        while (e > s && (e[-1] == '\n' || e[-1] == '\r' || e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (*s == '\0')
            continue;
        if ((eq = strchr(s, '=')) == NULL) {
            fprintf(stderr, "gpusliced: %s: \"%s\" is not \"name = value\"\n", where, s);
            r = 2;
            break;
        }
        k_end = eq;
        while (k_end > s && (k_end[-1] == ' ' || k_end[-1] == '\t'))
            k_end--;
        v = eq + 1;
        while (*v == ' ' || *v == '\t')
            v++;
        if ((d = find(s, (size_t)(k_end - s))) == NULL) {
            fprintf(stderr, "gpusliced: %s: unknown option \"%.*s\" (see gpusliced --help)\n",
                    where, (int)(k_end - s), s);
            r = 2;
            break;
        }
        r = set(d, v, where);
    }
    fclose(f);
    return r;
}

static void usage(FILE *f)
{
    char name[64];
    size_t i;

    fprintf(f, "usage: gpusliced [--config FILE] [--OPTION VALUE]... [--foreground]\n\n"
               "The gpuslice node daemon: GPUs, tenants and their limits, an HTTP API on a unix\n"
               "socket (and TCP with a token), Prometheus metrics.\n\noptions (also \"name = "
               "value\" lines of the config file, default " GD_DEFAULT_CONFIG "):\n");
    fprintf(f, "  --%-18s %s\n", "config FILE", "read options from FILE");
    for (i = 0; i < NDEFS; i++) {
        name_of(&defs[i], name, sizeof(name));
        if (defs[i].kind == OPT_BOOL)
            fprintf(f, "  --%-18s %s\n", name, defs[i].help);
        else
            fprintf(f, "  --%-18s %s%s%s%s\n", name, defs[i].help,
                    defs[i].def && *defs[i].def ? " [" : "",
                    defs[i].def && *defs[i].def ? defs[i].def : "",
                    defs[i].def && *defs[i].def ? "]" : "");
    }
    fprintf(f, "  --%-18s %s\n  --%-18s %s\n  --%-18s %s\n", "print-config",
            "print every option's value and exit", "version", "print the version", "help",
            "this text");
}

/* The run and state directories when not given. */
static void compute_defaults(void)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");

    if (gd_opt.run_dir[0] == '\0') {
        const char *env = getenv(GS_ENV_DAEMON_DIR);

        /* Where the CLI and the interposer look for it (gs_node_dir). */
        if (env && *env)
            snprintf(gd_opt.run_dir, sizeof(gd_opt.run_dir), "%.*s", PATH_MAX - 16, env);
        else if (geteuid() == 0)
            snprintf(gd_opt.run_dir, sizeof(gd_opt.run_dir), "/run/gpuslice");
        else if (xdg && *xdg == '/')
            snprintf(gd_opt.run_dir, sizeof(gd_opt.run_dir), "%.*s/gpuslice", PATH_MAX - 16, xdg);
        else
            snprintf(gd_opt.run_dir, sizeof(gd_opt.run_dir), "/tmp/gpuslice-%u",
                     (unsigned)geteuid());
    }
    if (gd_opt.state_dir[0] == '\0') {
        if (geteuid() == 0 && strcmp(gd_opt.run_dir, "/run/gpuslice") == 0)
            snprintf(gd_opt.state_dir, sizeof(gd_opt.state_dir), "/var/lib/gpuslice");
        else
            snprintf(gd_opt.state_dir, sizeof(gd_opt.state_dir), "%.*s/state", PATH_MAX - 16,
                     gd_opt.run_dir);
    }
    if (gd_opt.socket[0] == '\0')
        snprintf(gd_opt.socket, sizeof(gd_opt.socket), "%.*s/" GD_SOCKET_FILE, PATH_MAX - 32,
                 gd_opt.run_dir);
}

static void gd_options_dump(FILE *f)
{
    char name[64];
    size_t i;

    for (i = 0; i < NDEFS; i++) {
        const void *p = (const char *)&gd_opt + defs[i].off;

        name_of(&defs[i], name, sizeof(name));
        if (defs[i].kind == OPT_LONG)
            fprintf(f, "%s = %ld\n", name, *(const long *)p);
        else if (defs[i].kind == OPT_BOOL)
            fprintf(f, "%s = %s\n", name, *(const int *)p ? "true" : "false");
        else
            fprintf(f, "%s = %s\n", name, (const char *)p);
    }
}

int gd_options_load(int argc, char **argv)
{
    const char *config = NULL;
    int i, r, print = 0;
    size_t k;

    memset(&gd_opt, 0, sizeof(gd_opt));
    for (k = 0; k < NDEFS; k++)
        if (defs[k].def && (r = set(&defs[k], defs[k].def, "default")) != 0)
            return r;
    /* --config first: the flags win over the file whatever their order. */
    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--config") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "gpusliced: --config needs a file\n");
                return 2;
            }
            config = argv[++i];
        } else if (strncmp(argv[i], "--config=", 9) == 0) {
            config = argv[i] + 9;
        }
    }
    if ((r = load_file(config ? config : GD_DEFAULT_CONFIG, config != NULL)) != 0)
        return r;
    snprintf(gd_opt.config, sizeof(gd_opt.config), "%s", config ? config : GD_DEFAULT_CONFIG);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i], *eq, *v;
        const struct option_def *d;
        size_t n;

        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            return 0;
        }
        if (strcmp(a, "--version") == 0 || strcmp(a, "-V") == 0) {
            printf("gpusliced %s\n", GPUSLICE_VERSION);
            return 0;
        }
        if (strcmp(a, "--print-config") == 0) {
            print = 1;
            continue;
        }
        if (strcmp(a, "--config") == 0) {
            i++;
            continue;
        }
        if (strncmp(a, "--config=", 9) == 0)
            continue;
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr,
                    "gpusliced: unexpected argument \"%s\" (options start with --; see "
                    "gpusliced --help)\n",
                    a);
            return 2;
        }
        a += 2;
        eq = strchr(a, '=');
        n = eq ? (size_t)(eq - a) : strlen(a);
        if ((d = find(a, n)) == NULL) {
            fprintf(stderr, "gpusliced: unknown option --%.*s (see gpusliced --help)\n", (int)n, a);
            return 2;
        }
        if (d->kind == OPT_BOOL && eq == NULL) {
            v = "1";
        } else if (eq) {
            v = eq + 1;
        } else if (i + 1 < argc) {
            v = argv[++i];
        } else {
            fprintf(stderr, "gpusliced: --%s needs a value (see gpusliced --help)\n", d->name);
            return 2;
        }
        if ((r = set(d, v, "command line")) != 0)
            return r;
    }
    if (!gd_opt.run_dir[0] && !gd_opt.webhook_only && getenv(GS_ENV_DAEMON_DIR) &&
        *getenv(GS_ENV_DAEMON_DIR) && *getenv(GS_ENV_DAEMON_DIR) != '/') {
        /* Never another place in its stead: that may be the system daemon's. */
        fprintf(stderr,
                "gpusliced: " GS_ENV_DAEMON_DIR " \"%.200s\" is not an absolute path (give the "
                "run directory as one, or unset it, or pass --run-dir)\n",
                getenv(GS_ENV_DAEMON_DIR));
        return 2;
    }
    if (!gd_opt.webhook_only && gs_tenant_dir_relative()) {
        /* It lists the tenants of gpuslice run there: each working directory would be its own. */
        fprintf(stderr,
                "gpusliced: " GS_ENV_RUN_DIR " \"%.200s\" is not an absolute path (give the "
                "directory tenant files live in as one, or unset it: /dev/shm)\n",
                gs_tenant_dir_relative());
        return 2;
    }
    compute_defaults();
    if (strcmp(gd_opt.metrics_labels, "dcgm") != 0 &&
        strcmp(gd_opt.metrics_labels, "prometheus") != 0) {
        fprintf(stderr, "gpusliced: metrics-labels \"%s\" is not dcgm or prometheus\n",
                gd_opt.metrics_labels);
        return 2;
    }
    if (gd_opt.listen[0] && gd_opt.token_file[0] == '\0') {
        fprintf(stderr,
                "gpusliced: --listen %s needs --token-file: TCP clients are checked by a "
                "bearer token, and there is none\n",
                gd_opt.listen);
        return 2;
    }
    if (gd_opt.webhook_listen[0] && !gd_opt.inject_lib_dir[0]) {
        fprintf(stderr,
                "gpusliced: --webhook-listen %s needs --inject-lib-dir: the node's "
                "directory of libgpuslice.so that injected pods mount\n",
                gd_opt.webhook_listen);
        return 2;
    }
    if (gd_opt.webhook_listen[0] && (!gd_opt.webhook_cert[0] || !gd_opt.webhook_key[0])) {
        fprintf(stderr,
                "gpusliced: --webhook-listen %s needs --webhook-cert and --webhook-key: the API "
                "server calls a webhook over TLS only\n",
                gd_opt.webhook_listen);
        return 2;
    }
    /* A body takes four times its length of request-memory before it is read (http.c). */
    if (gd_opt.request_memory < 4 * gd_opt.max_body + 256 ||
        (gd_opt.webhook_listen[0] && gd_opt.request_memory < 4 * gd_opt.webhook_max_body + 256)) {
        long body = gd_opt.webhook_listen[0] && gd_opt.webhook_max_body > gd_opt.max_body
                        ? gd_opt.webhook_max_body
                        : gd_opt.max_body;

        fprintf(stderr,
                "gpusliced: request-memory %ld is less than 4 times the largest body (%ld, %s): "
                "such a body could never be read; give at least %ld\n",
                gd_opt.request_memory, body,
                body == gd_opt.max_body ? "max-body" : "webhook-max-body", 4 * body + 256);
        return 2;
    }
    if (gd_opt.webhook_claims && !gd_opt.webhook_listen[0]) {
        fprintf(stderr, "gpusliced: --webhook-claims is a mode of the webhook: it needs "
                        "--webhook-listen ADDR:PORT (with --webhook-cert and --webhook-key)\n");
        return 2;
    }
    if (gd_opt.webhook_claims && strcmp(gd_opt.kube_api, "off") == 0) {
        fprintf(stderr, "gpusliced: --webhook-claims makes claim templates in the API server: "
                        "it needs kube-api (an https:// URL, or empty in a cluster), not off\n");
        return 2;
    }
    if (gd_opt.webhook_only && !gd_opt.webhook_listen[0]) {
        fprintf(stderr, "gpusliced: --webhook-only needs --webhook-listen ADDR:PORT (with "
                        "--webhook-cert and --webhook-key): it serves the webhook alone\n");
        return 2;
    }
    if (gd_opt.webhook_only && !gd_opt.inject_run_dir[0]) {
        fprintf(stderr, "gpusliced: --webhook-only needs --inject-run-dir: the nodes' run "
                        "directory that injected pods mount (the DaemonSet's run-dir, "
                        "/run/gpuslice), as it has none of its own\n");
        return 2;
    }
    if (gd_opt.webhook_only && gd_opt.listen[0]) {
        fprintf(stderr,
                "gpusliced: --webhook-only serves the webhook alone: leave out --listen %s (the "
                "API is the node daemon's)\n",
                gd_opt.listen);
        return 2;
    }
    if (print) {
        gd_options_dump(stdout);
        return 0;
    }
    return -1;
}
