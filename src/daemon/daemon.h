/*
 * gpusliced's state, shared by its parts: the options (options.c), the GPUs
 * as NVML last showed them (devices.c), the tenants (registry.c), the event
 * history (events.c), the HTTP server (http.c), its routes (api.c) and the
 * metrics page (metrics.c). One mutex, gd.mu, guards everything that changes
 * after start-up; nothing sleeps or does I/O on a client while holding it.
 */
#ifndef GPUSLICE_DAEMON_H
#define GPUSLICE_DAEMON_H

#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "common/driver.h"
#include "common/parse.h"
#include "gpuslice/node_abi.h"
#include "gpuslice/tenant_abi.h"

#define GD_MAX_DEVICES GPUSLICE_NODE_MAX_DEVICES
#define GD_MAX_DEVPROCS 256
#define GD_MAX_RUN_TENANTS 256
#define GD_SOCKET_FILE "gpusliced.sock"
#define GD_ID_MAX 128
#define GD_LATENCY_BUCKETS 12

/* The bounds of the request-latency histogram, in seconds (metrics.c). */
extern const double gd_latency_bounds[GD_LATENCY_BUCKETS];

/* ---- options.c: one table of every option, read from the config file and the flags ---- */

/* The group the socket is given to by default, where it exists. */
#define GD_SOCKET_GROUP_DEFAULT "gpuslice"

struct gd_options {
    char config[PATH_MAX];
    char run_dir[PATH_MAX];    /* the node segment, the socket, managed tenants' files */
    char state_dir[PATH_MAX];  /* the daemon's own state (atomic writes) */
    char socket[PATH_MAX];     /* the unix socket */
    char listen[128];          /* ADDR:PORT for TCP; empty: none */
    char token_file[PATH_MAX]; /* the bearer token TCP clients must send */
    char admin_group[64];      /* members may raise limits and change others' tenants */
    char socket_group[64];     /* the socket's group, when it exists */
    char nvml[PATH_MAX];       /* the NVML library; empty: libnvidia-ml.so.1, else the simulator */
    char metrics_labels[16];   /* "dcgm" (gpu, UUID, modelName, Hostname) or "prometheus" */
    long sample_ms;            /* how often NVML is read */
    long sweep_ms;             /* how often the tenants are read */
    long max_connections;      /* connections at once on each listener */
    long max_peer_connections; /* of one uid (unix socket) or address (TCP) */
    long reserved_connections; /* more on the unix socket, for root and the daemon's user */
    long timeout_s;            /* an idle connection is closed after this */
    long request_timeout_s;    /* each request, whole, from its connection or last answer */
    long request_memory;       /* bytes of request bodies and their JSON at once */
    long webhook_max_body;     /* the webhook's largest AdmissionReview */
    long nice;                 /* the daemon's CPU priority, where it may raise it */
    long max_body;             /* bytes of a request body */
    long max_header;           /* bytes of a request's line and headers together */
    long max_sse;              /* event subscribers at once */
    long events_history;       /* events kept for Last-Event-ID */
    char kube_api[512];        /* the API server's https:// URL; empty: in-cluster; "off" */
    char kube_token_file[PATH_MAX];
    char kube_ca_file[PATH_MAX];
    char node_name[256];         /* this node's name in the cluster; empty: $NODE_NAME */
    char webhook_listen[128];    /* ADDR:PORT of the admission webhook (TLS); empty: none */
    char webhook_cert[PATH_MAX]; /* its certificate (PEM, the chain) and key */
    char webhook_key[PATH_MAX];
    char inject_lib_dir[PATH_MAX];     /* the node's libgpuslice.so and ld.so.preload, for pods */
    char inject_run_dir[PATH_MAX];     /* the node's run directory pods mount; empty: run_dir */
    char host_cgroup_root[PATH_MAX];   /* the hosts's cgroup hierarchies, to place pods' cgroups */
    char pod_latency_namespaces[1024]; /* namespaces whose pods may be latency; "*": all */
    char guard_memory[16];             /* what the guard does to a tenant over its memory limit */
    char guard_compute[16];            /* ... over its compute ceiling (guard/guard.h) */
    long guard_grace_ms;               /* how long a tenant may be over before it acts */
    long guard_compute_margin;         /* points of the GPU's time over a ceiling it lets pass */
    long tenants_per_user;             /* managed tenants a user (not an admin) may make */
    char tenant_cgroup[PATH_MAX]; /* cgroup v2 directory of managed tenants' cgroups; "": none */
    long pod_reserve;             /* places of the tenant table only pods may take */
    long members_per_user;        /* processes a user's tenants may have joined at once */
    long pod_member_reserve;      /* places of the member table only pods' processes take */
    char kubelet_plugin_dir[PATH_MAX];   /* the DRA driver's socket's directory */
    char kubelet_registry_dir[PATH_MAX]; /* the kubelet's plugins_registry */
    char cdi_dir[PATH_MAX];              /* where claims' CDI specs are written */
    char nvidia_cdi_dirs[1024];          /* where NVIDIA's CDI spec is looked for (':'-separated) */
    long dra_publish_s;                  /* how often the node's ResourceSlice is checked */
    int dra;                             /* serve as the DRA driver gpu.gpuslice.io */
    int foreground;
    int webhook_only;   /* serve the webhook alone: no GPUs, node segment or run directory */
    int webhook_claims; /* the webhook turns a pod's slice into a claim of the DRA driver */
    int simulated;      /* use the simulated GPU even where a driver exists */
    int verbose;
};

extern struct gd_options gd_opt;

/* Parses argv after the config file; returns an exit status to exit with, or -1 to run. */
int gd_options_load(int argc, char **argv);

/* The priority of the daemon's threads that do not answer requests: 5 steps below nice. */
long gd_nice_background(void);

/* ---- devices.c: NVML, read by a thread of its own every sample_ms ---- */

struct gd_devproc {
    pid_t pid; /* as NVML gives it: the daemon's PID namespace */
    uint64_t mem;
    int sm_util;      /* percent over NVML's last second, its largest sample; -1 unknown */
    int sm_util_mean; /* the same, the mean of its samples (the guard's); -1 unknown */
};

struct gd_device {
    int index;
    char uuid[GS_UUID_STRLEN]; /* "GPU-…", as nvidia-smi prints it */
    uint8_t raw[16];
    char name[96];
    int sms;                /* multiprocessors (NVML's attributes); 0 unknown */
    int cc_major, cc_minor; /* compute capability; 0.0 unknown */
    uint64_t mem_total, mem_used;
    uint64_t mem_reserved; /* the driver's own (NVML v2), not in mem_used */
    int util;              /* percent, -1 unknown */
    long power_mw;         /* -1 unknown */
    long sm_clock;         /* MHz, -1 unknown */
    long temp_c;           /* -1 unknown */
    int nproc;
    struct gd_devproc proc[GD_MAX_DEVPROCS];
};

/* ---- registry.c: the tenants ---- */

/* What the daemon knows of one tenant at its latest sweep. */
struct gd_tenant {
    char id[GD_ID_MAX]; /* managed: its number; gpuslice run's: its file's ID */
    int managed;
    int node_idx; /* managed: its node entry */
    uint32_t node_id;
    char path[PATH_MAX]; /* its state file */
    uid_t owner;
    struct gpuslice_tenant *t;          /* a copy read at the sweep (NULL: not readable now) */
    uint64_t read_ns;                   /* CLOCK_MONOTONIC when the read of t began */
    struct gpuslice_node_tenant policy; /* managed: its limits */
    uint64_t changed_ns; /* gpuslice run's: CLOCK_MONOTONIC when the read began of the copy
                            the API took t's limits from after a change (0: none) */
    /* Its live processes as the sweep found them (gs_tenant_procs_alive), and how many. */
    pid_t seen_pid[GPUSLICE_MAX_PROCS];
    int nlive;
    /* For events: what the previous sweep saw. */
    uint64_t refused[GPUSLICE_MAX_DEVICES], throttled[GPUSLICE_MAX_DEVICES];
    int throttling[GPUSLICE_MAX_DEVICES];
    int seen; /* found at this sweep */
};

/* ---- the daemon's state ---- */

struct gd_state {
    pthread_mutex_t mu;
    struct gs_driver drv; /* NVML only */
    int simulated;
    char nvml_path[PATH_MAX];
    char driver_version[96];
    char hostname[256];
    int ready; /* devices sampled and tenants read once */
    uint64_t started_unix_ns;
    int ndev;
    struct gd_device dev[GD_MAX_DEVICES];
    uint64_t sampled_ns; /* CLOCK_MONOTONIC of the latest sample */
    struct gpuslice_node *node;
    char tenant_dir[PATH_MAX]; /* managed tenants' state files */
    int ntenant;
    struct gd_tenant *tenant; /* GD_MAX_RUN_TENANTS + GPUSLICE_NODE_MAX_TENANTS of them */
    uint64_t requests_total;
    /* How long requests took in the daemon (from their headers to their answer), by bucket. */
    uint64_t latency_count[GD_LATENCY_BUCKETS + 1]; /* the last: above every bound */
    uint64_t latency_sum_ns;
    gid_t admin_gid;
    int has_admin_gid;
    /*
     * Why STATE_DIR/tenants.json cannot be written now ("" while it can; under mu): /readyz
     * says not ready with it, and the sweep writes it again every second until it can.
     */
    char state_error[512];
};

extern struct gd_state gd;

/* Loads NVML (or the simulated GPU) and samples once; 0 or -1 with a message in err. */
int gd_devices_start(char *err, size_t errlen);

/* Starts the sampling thread (which also sweeps the tenants); 0 or -1 with a message. */
int gd_devices_run(char *err, size_t errlen);
void gd_devices_stop(void);

/* The device by index or UUID (any case, "GPU-" optional); NULL if none. Under gd.mu. */
const struct gd_device *gd_device_find(const char *key);

/* Opens the node segment and rebuilds the tenants from it; 0 or -1 with a message. */
int gd_registry_start(char *err, size_t errlen);
/*
 * path, a directory of the daemon's own, made with mode if missing; refused (-1, err says
 * why) where it is not a directory owned by the daemon's user and writable by it alone.
 */
int gd_own_dir(const char *path, mode_t mode, char *err, size_t errlen);
void gd_registry_stop(void);

/* One sweep of the tenants (the sampler thread calls it every sweep_ms). */
void gd_registry_sweep(void);

/*
 * The managed tenant process pid (the daemon's PID namespace) belongs to by its lineage: it
 * or its nearest ancestor is a member the daemon recorded. 0 for none. Reads only the node
 * segment: any thread, without gd.mu.
 */
uint32_t gd_tenant_lineage(pid_t pid);

/* How many managed tenants, pods' aside, owner has (under gd.mu). */
int gd_tenants_of(uid_t owner);

/* The managed tenant with this id or name; NULL if none. Under gd.mu. */
struct gd_tenant *gd_tenant_find_managed(const char *key);

/*
 * The tenant with this id, or managed name (a managed tenant first, then a gpuslice run's
 * by its ID); NULL if none. Under gd.mu.
 */
struct gd_tenant *gd_tenant_find(const char *key);

/* The limits a request asks for, parsed (api.c): memory and compute, each optional. */
struct gd_limits_req {
    int has_mem, has_comp;
    struct gs_limits mem, comp; /* keys resolved to UUIDs, or the default */
    uint32_t priority, weight;  /* GPUSLICE_PRIORITY_*, 1..100; 0 = not given */
    uint32_t pod_flags;         /* GPUSLICE_NODE_POD, GPUSLICE_NODE_REFUSED (pods.c) */
    uint64_t created_unix_ns;   /* a restored tenant's time of creation; 0: now */
};

/*
 * A change to the managed tenants that could not be made durable in STATE_DIR/tenants.json
 * (written, synced, renamed, its directory synced): the change was not made, and the message
 * names the file and the cause. GD_ESTATE_FULL when its filesystem is full (ENOSPC, EDQUOT).
 */
#define GD_ESTATE_FULL (-4090)
#define GD_ESTATE_IO (-4091)

/* The HTTP status of such a failure (507 full, 500 any other), 0 when r is none. */
static inline int gd_state_status(int r)
{
    return r == GD_ESTATE_FULL ? 507 : r == GD_ESTATE_IO ? 500 : 0;
}

/*
 * Creates a managed tenant (under gd.mu). 0, or a negative errno with a
 * message: -EEXIST (the name is taken), -ENOSPC (no room), GD_ESTATE_* (its
 * definition could not be made durable: no tenant was made). A pod's tenant is
 * made even then (its pod object is its record), and the daemon is not ready.
 */
int gd_tenant_create(const char *name, uid_t owner, const struct gd_limits_req *l,
                     struct gd_tenant **out, char *err, size_t errlen);

/*
 * What managed tenant t's policy would be after l (under gd.mu), written to nothing: the
 * policy now into *before (unless NULL), after into *after. 0, or a negative errno with a
 * message: -EINVAL (two keys for one GPU, a gpuslice run's tenant), -ENOSPC, -ENOENT.
 */
int gd_tenant_preview(const struct gd_tenant *t, const struct gd_limits_req *l,
                      struct gpuslice_node_tenant *before, struct gpuslice_node_tenant *after,
                      char *err, size_t errlen);

/*
 * Applies l to the gpuslice run tenant id whose state file is path, owned by owner: without
 * gd.mu (it may wait up to 2 s for the tenant's lock, a word its owner can hold). 0, or a
 * negative errno with a message.
 */
int gd_run_tenant_set(const char *path, uid_t owner, const char *id, const struct gd_limits_req *l,
                      char *err, size_t errlen);

/*
 * A copy of gpuslice run tenant's file at path, read without gd.mu (its owner may make the read
 * wait), or NULL where it cannot be read as owner's; gs_tenant_close() it.
 */
struct gpuslice_tenant *gd_run_tenant_read(const char *path, uid_t owner);

/*
 * Copies the limits, class and weight of m (gd_run_tenant_read) into run tenant t's copy (under
 * gd.mu), so that an answer after a change shows it rather than the last sweep's reading; its
 * processes stay as the sweep read them (what its events are told against).
 */
void gd_run_tenant_limits_from(struct gd_tenant *t, const struct gpuslice_tenant *m);

/*
 * Applies l to t (under gd.mu); 0 or a negative errno with a message (GD_ESTATE_*: not made
 * durable, so not applied).
 */
int gd_tenant_update(struct gd_tenant *t, const struct gd_limits_req *l, char *err, size_t errlen);

/*
 * A pod's tenant named name (under gd.mu): made with l, or given exactly l (limits, class and
 * flags; what l lacks is gone) if it exists. 0, or a negative errno with a message.
 */
int gd_tenant_put_pod(const char *name, const struct gd_limits_req *l, struct gd_tenant **out,
                      char *err, size_t errlen);

/*
 * Ends managed tenant t even while processes of it live (a deleted pod's; under gd.mu):
 * they keep the limits they last read. 0, or -EPERM for a gpuslice run's.
 */
int gd_tenant_end(struct gd_tenant *t);

/*
 * Ends managed tenant t (under gd.mu); -EBUSY while any process of it lives (a member, or a
 * process descending from one), unless force, which kills them first; GD_ESTATE_* when its end
 * could not be made durable (it goes on).
 */
int gd_tenant_delete(struct gd_tenant *t, int force, char *err, size_t errlen);

/*
 * Makes the process (pid in the daemon's namespace) a member of managed
 * tenant t, with every process it starts (under gd.mu). 0 or a negative errno.
 */
int gd_tenant_join(struct gd_tenant *t, pid_t pid, int admin, char *err, size_t errlen);

/*
 * gd_tenant_join for the process known as inner in PID namespace ns, started at start, which
 * the caller read while it knew pid to be that process (a pidfd): recorded as given, never
 * read again from a PID that may have been recycled meanwhile.
 */
int gd_tenant_join_as(struct gd_tenant *t, pid_t pid, uint32_t ns, pid_t inner, uint64_t start,
                      int admin, char *err, size_t errlen);

/*
 * The limit t has on device dev (its policy or its state file): memory in
 * bytes, compute in percent; 0 for none.
 */
void gd_tenant_limits(const struct gd_tenant *t, const struct gd_device *dev, uint64_t *mem,
                      uint32_t *compute);

/* t's name as the API and metrics show it (UTF-8, at most len - 1 bytes). */
void gd_tenant_name(const struct gd_tenant *t, char *out, size_t len);

/*
 * What t's live processes (as the sweep found them) hold on its device entry e: the larger of
 * what their interposers charged in its state file (gd_tenant_mem_charged), which a process
 * that may write the file can forge, and what NVML says the processes the kernel counts as
 * the tenant's hold (gd_tenant_mem_nvml: managed tenants; 0 where unknown).
 */
uint64_t gd_tenant_mem_used(const struct gd_tenant *t, int e);
uint64_t gd_tenant_mem_charged(const struct gd_tenant *t, int e);
uint64_t gd_tenant_mem_nvml(const struct gd_tenant *t, int e);

/* The state file's device entry of t for UUID raw, or -1. */
int gd_tenant_entry(const struct gd_tenant *t, const uint8_t raw[16]);

/* ---- events.c: the recent history, and server-sent events ---- */

/*
 * Records an event (any thread; takes its own lock) about a tenant of owner (who sees it,
 * with the admins): type, and a JSON object's members.
 */
void gd_event(uid_t owner, const char *type, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Copies into buf the events after id after that viewer may see (admin: all; else those of
 * its own tenants), at most len bytes, whole events in SSE form, waiting up to wait_ms for
 * one; returns the bytes written and the last id passed in *last. *gap is set when events
 * after `after` were already dropped from the history.
 */
size_t gd_events_read(uint64_t after, char *buf, size_t len, int wait_ms, uid_t viewer, int admin,
                      uint64_t *last, int *gap);
uint64_t gd_events_last(void);

/* s as a JSON string, quotes included, into out (len bytes); "" when it does not fit. */
void gd_json_quote(char *out, size_t len, const char *s);
void gd_events_stop(void);
int gd_events_init(void);

/* ---- http.c and api.c ---- */

/* Who sent a request. */
struct gd_peer {
    int unix_peer; /* came over the unix socket: uid, gid, pid are the kernel's */
    uid_t uid;
    gid_t gid;
    pid_t pid;
    uint32_t pid_ns; /* pid's namespace, PID there and start time, read while it was pid's */
    pid_t inner;
    uint64_t start;
    int admin; /* root, the daemon's user, a member of the admin group, or a TCP token */
};

struct gd_request {
    const char *method;
    const char *path; /* without the query */
    const char *query;
    const char *body;
    size_t body_len;
    const char *last_event_id;
    const char *content_type;
    struct gd_peer peer;
    char *params[2]; /* the route's {parameters}, in order */
};

struct gd_response {
    int status;
    char *body; /* malloc'd */
    size_t len;
    const char *content_type;
    int sse; /* serve the event stream from sse_from */
    uint64_t sse_from;
    uid_t sse_uid; /* to the events this viewer may see (sse_admin: all) */
    int sse_admin;
};

/* Routes a request; fills resp (api.c). */
void gd_api_handle(struct gd_request *req, struct gd_response *resp);

/* Replaces in s each byte that is not part of a UTF-8 character with '?' (JSON needs UTF-8). */
void gd_api_scrub(char *s);

/* A JSON error body {"error": {"code", "message"}} with its status. */
void gd_api_error(struct gd_response *resp, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The API's listeners, and the webhook's where asked; 0 or -1 with a message. */
int gd_http_start(char *err, size_t errlen);
/* The webhook's listener alone (--webhook-only); 0 or -1 with a message. */
int gd_http_start_webhook(char *err, size_t errlen);
void gd_http_stop(void);

/* ---- boards.c: the device boards shared by every tenant's processes ---- */
int gd_boards_start(char *err, size_t errlen);
void gd_boards_stop(void);

/*
 * The Prometheus text page (metrics.c) as viewer may see it (admin: every tenant and pod; a
 * user: the devices and its own tenants), malloc'd, into *out; its length. Under gd.mu.
 */
size_t gd_metrics_render(char **out, uid_t viewer, int admin);

/* The OpenAPI document served at /v1/openapi.json (generated into the build from docs/). */
extern const char gd_openapi_json[];

/* ---- state.c: the log (stderr, or syslog once in the background) and the clocks ---- */
extern int gd_log_syslog;
void gd_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
uint64_t gd_mono_ns(void);
uint64_t gd_unix_ns(void);

#endif
