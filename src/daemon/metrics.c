/*
 * GET /metrics: the Prometheus text format. Base units (bytes, seconds,
 * hertz, watts), ratios 0..1, counters ending _total; device labels as
 * dcgm-exporter's (gpu, UUID, modelName, Hostname). A tenant's series carry
 * tenant (its id) and tenant_name; a limit that is not set has no series.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/tenant.h"
#include "control/tenants.h"
#include "daemon/daemon.h"
#include "daemon/dra.h"
#include "daemon/guard/guard.h"
#include "daemon/kube.h"
#include "daemon/pods.h"

/* A label value with \, " and newlines escaped, as the format asks. */
static void label(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* dcgm-exporter's label names, or the snake_case ones promtool's lint asks for. */
static int dcgm(void)
{
    return gd_opt.metrics_labels[0] == 'd';
}

static void dev_labels(FILE *f, const struct gd_device *d)
{
    fprintf(f, "{gpu=\"%d\",%s=\"", d->index, dcgm() ? "UUID" : "uuid");
    label(f, d->uuid);
    fprintf(f, "\",%s=\"", dcgm() ? "modelName" : "model_name");
    label(f, d->name);
    fprintf(f, "\",%s=\"", dcgm() ? "Hostname" : "hostname");
    label(f, gd.hostname);
    fputs("\"}", f);
}

/* A tenant's labels on device d; extra (",name=\"value\"...") goes last, before the brace. */
static void tenant_labels_x(FILE *f, const struct gd_tenant *t, const struct gd_device *d,
                            const char *extra)
{
    const char *ns, *pod;
    char name[64];

    gd_tenant_name(t, name, sizeof(name));
    fputs("{tenant=\"", f);
    label(f, t->id);
    fputs("\",tenant_name=\"", f);
    label(f, name);
    if (gd_pods_labels(t, &ns, &pod)) {
        fputs("\",namespace=\"", f);
        label(f, ns);
        fputs("\",pod=\"", f);
        label(f, pod);
    }
    fprintf(f, "\",gpu=\"%d\",%s=\"", d->index, dcgm() ? "UUID" : "uuid");
    label(f, d->uuid);
    fprintf(f, "\",%s=\"", dcgm() ? "Hostname" : "hostname");
    label(f, gd.hostname);
    fprintf(f, "\"%s}", extra);
}

static void tenant_labels(FILE *f, const struct gd_tenant *t, const struct gd_device *d)
{
    tenant_labels_x(f, t, d, "");
}

enum tmetric {
    T_MEM_LIMIT,
    T_MEM_USED,
    T_COMP_LIMIT,
    T_GPU_TIME,
    T_THROTTLED,
    T_REFUSED,
    T_PROCS,
    T_MEM_NVML,
    T_GUARD,
};

static const struct {
    const char *name, *type, *help;
} tmetrics[] = {
    [T_MEM_LIMIT] = { "gpuslice_tenant_memory_limit_bytes", "gauge",
                      "The tenant's memory limit on the GPU." },
    [T_MEM_USED] = { "gpuslice_tenant_memory_used_bytes", "gauge",
                     "GPU memory the tenant's live processes hold." },
    [T_COMP_LIMIT] = { "gpuslice_tenant_compute_limit_ratio", "gauge",
                       "The tenant's compute ceiling: its share of the GPU's time, 0..1." },
    [T_GPU_TIME] = { "gpuslice_tenant_gpu_time_seconds_total", "counter",
                     "GPU time the tenant's work held (measured where it has a ceiling)." },
    [T_THROTTLED] = { "gpuslice_tenant_throttled_seconds_total", "counter",
                      "Time the tenant's launches waited for its compute ceiling." },
    [T_REFUSED] = { "gpuslice_tenant_allocations_refused_total", "counter",
                    "Allocations refused over the tenant's memory limit." },
    [T_PROCS] = { "gpuslice_tenant_processes", "gauge",
                  "Live processes of the tenant holding memory on the GPU." },
    [T_MEM_NVML] = { "gpuslice_tenant_memory_nvml_bytes", "gauge",
                     "GPU memory NVML shows the processes of a daemon's tenant holding (the "
                     "guard's figure, whatever their interposers charged)." },
    [T_GUARD] = { "gpuslice_tenant_guard_actions_total", "counter",
                  "Times the guard found a daemon's tenant over a limit by NVML's figures "
                  "(kind: memory, compute) and what it did (action: killed, frozen, reported)." },
};

/* Live processes of t with a charge on entry e. */
static int procs_on(const struct gd_tenant *t, int e)
{
    int i, n = 0;

    for (i = 0; i < GPUSLICE_MAX_PROCS && t->nlive; i++)
        n += t->seen_pid[i] != 0 && t->t->proc[i].mem_used[e] > 0;
    return n;
}

/* Who the page is rendered for: an admin sees every tenant, a user only its own. */
static uid_t viewer;
static int viewer_admin;

static int visible(const struct gd_tenant *t)
{
    return viewer_admin || t->owner == viewer;
}

static void tenant_series(FILE *f, enum tmetric m)
{
    int k, i;

    head(f, tmetrics[m].name, tmetrics[m].type, tmetrics[m].help);
    for (k = 0; k < gd.ntenant; k++) {
        const struct gd_tenant *t = &gd.tenant[k];

        if (!visible(t))
            continue;
        for (i = 0; i < gd.ndev; i++) {
            const struct gd_device *d = &gd.dev[i];
            int e = gd_tenant_entry(t, d->raw);
            uint64_t mem;
            uint32_t comp;

            gd_tenant_limits(t, d, &mem, &comp);
            switch (m) {
            case T_MEM_LIMIT:
                if (!mem)
                    continue;
                fputs(tmetrics[m].name, f);
                tenant_labels(f, t, d);
                fprintf(f, " %llu\n", (unsigned long long)mem);
                break;
            case T_COMP_LIMIT:
                if (!comp)
                    continue;
                fputs(tmetrics[m].name, f);
                tenant_labels(f, t, d);
                fprintf(f, " %.2f\n", comp / 100.0);
                break;
            case T_MEM_NVML:
            case T_GUARD: {
                uint64_t use;
                int kind, act, c;
                static const char *const kinds[] = { "memory", "compute" }, *const acts[] = {
                    "killed", "frozen", "reported"
                };

                if (!t->managed || gd_guard_use(t->node_id, d->raw, &use, &c) < 0)
                    continue; /* the guard never saw it on this GPU */
                if (m == T_MEM_NVML) {
                    fputs(tmetrics[m].name, f);
                    tenant_labels(f, t, d);
                    fprintf(f, " %llu\n", (unsigned long long)use);
                    break;
                }
                for (kind = 0; kind < 2; kind++)
                    for (act = 0; act < 3; act++) {
                        char x[64];

                        snprintf(x, sizeof(x), ",kind=\"%s\",action=\"%s\"", kinds[kind],
                                 acts[act]);
                        fputs(tmetrics[m].name, f);
                        tenant_labels_x(f, t, d, x);
                        fprintf(
                            f, " %llu\n",
                            (unsigned long long)gd_guard_actions(t->node_id, d->raw, kind, act));
                    }
                break;
            }
            default:
                if (e < 0)
                    continue; /* the tenant has not used this GPU */
                fputs(tmetrics[m].name, f);
                tenant_labels(f, t, d);
                if (m == T_MEM_USED)
                    fprintf(f, " %llu\n", (unsigned long long)gd_tenant_mem_used(t, e));
                else if (m == T_GPU_TIME)
                    fprintf(f, " %.9f\n", t->t->dev[e].compute_busy_ns / 1e9);
                else if (m == T_THROTTLED)
                    fprintf(f, " %.9f\n", t->t->compute_throttled_ns[e] / 1e9);
                else if (m == T_REFUSED)
                    fprintf(f, " %llu\n", (unsigned long long)t->t->mem_refused[e]);
                else
                    fprintf(f, " %d\n", procs_on(t, e));
                break;
            }
        }
    }
}

const double gd_latency_bounds[GD_LATENCY_BUCKETS] = { 0.0001, 0.00025, 0.0005, 0.001,
                                                       0.0025, 0.005,   0.01,   0.025,
                                                       0.05,   0.1,     0.25,   1 };

static void latency(FILE *f)
{
    uint64_t cum = 0;
    int b;

    head(f, "gpuslice_daemon_request_duration_seconds", "histogram",
         "Time the daemon took for a request, from its headers to its answer.");
    for (b = 0; b <= GD_LATENCY_BUCKETS; b++) {
        cum += __atomic_load_n(&gd.latency_count[b], __ATOMIC_RELAXED);
        if (b < GD_LATENCY_BUCKETS)
            fprintf(f, "gpuslice_daemon_request_duration_seconds_bucket{le=\"%g\"} %llu\n",
                    gd_latency_bounds[b], (unsigned long long)cum);
        else
            fprintf(f, "gpuslice_daemon_request_duration_seconds_bucket{le=\"+Inf\"} %llu\n",
                    (unsigned long long)cum);
    }
    fprintf(f, "gpuslice_daemon_request_duration_seconds_sum %.9f\n",
            __atomic_load_n(&gd.latency_sum_ns, __ATOMIC_RELAXED) / 1e9);
    fprintf(f, "gpuslice_daemon_request_duration_seconds_count %llu\n", (unsigned long long)cum);
}

size_t gd_metrics_render(char **out, uid_t who, int admin)
{
    size_t len = 0;
    FILE *f = open_memstream(out, &len);
    int i;
    size_t m;

    viewer = who;
    viewer_admin = admin;
    if (f == NULL) {
        *out = NULL;
        return 0;
    }
    head(f, "gpuslice_gpu_utilization_ratio", "gauge",
         "Share of the last second the GPU was busy, 0..1 (NVML).");
    for (i = 0; i < gd.ndev; i++)
        if (gd.dev[i].util >= 0) {
            fputs("gpuslice_gpu_utilization_ratio", f);
            dev_labels(f, &gd.dev[i]);
            fprintf(f, " %.2f\n", gd.dev[i].util / 100.0);
        }
    head(f, "gpuslice_gpu_memory_used_bytes", "gauge",
         "GPU memory in use, as nvidia-smi shows it (NVML v2: without the driver's reserve).");
    for (i = 0; i < gd.ndev; i++) {
        fputs("gpuslice_gpu_memory_used_bytes", f);
        dev_labels(f, &gd.dev[i]);
        fprintf(f, " %llu\n", (unsigned long long)gd.dev[i].mem_used);
    }
    head(f, "gpuslice_gpu_memory_reserved_bytes", "gauge",
         "GPU memory the driver keeps for itself, not in use by anyone (NVML).");
    for (i = 0; i < gd.ndev; i++) {
        fputs("gpuslice_gpu_memory_reserved_bytes", f);
        dev_labels(f, &gd.dev[i]);
        fprintf(f, " %llu\n", (unsigned long long)gd.dev[i].mem_reserved);
    }
    head(f, "gpuslice_gpu_memory_total_bytes", "gauge", "GPU memory in all (NVML).");
    for (i = 0; i < gd.ndev; i++) {
        fputs("gpuslice_gpu_memory_total_bytes", f);
        dev_labels(f, &gd.dev[i]);
        fprintf(f, " %llu\n", (unsigned long long)gd.dev[i].mem_total);
    }
    head(f, "gpuslice_gpu_power_watts", "gauge", "GPU power draw (NVML).");
    for (i = 0; i < gd.ndev; i++)
        if (gd.dev[i].power_mw >= 0) {
            fputs("gpuslice_gpu_power_watts", f);
            dev_labels(f, &gd.dev[i]);
            fprintf(f, " %.3f\n", gd.dev[i].power_mw / 1000.0);
        }
    head(f, "gpuslice_gpu_sm_clock_hertz", "gauge", "GPU SM clock (NVML).");
    for (i = 0; i < gd.ndev; i++)
        if (gd.dev[i].sm_clock >= 0) {
            fputs("gpuslice_gpu_sm_clock_hertz", f);
            dev_labels(f, &gd.dev[i]);
            fprintf(f, " %ld\n", gd.dev[i].sm_clock * 1000000L);
        }
    head(f, "gpuslice_gpu_temperature_celsius", "gauge", "GPU temperature (NVML).");
    for (i = 0; i < gd.ndev; i++)
        if (gd.dev[i].temp_c >= 0) {
            fputs("gpuslice_gpu_temperature_celsius", f);
            dev_labels(f, &gd.dev[i]);
            fprintf(f, " %ld\n", gd.dev[i].temp_c);
        }
    for (m = 0; m < sizeof(tmetrics) / sizeof(tmetrics[0]); m++)
        tenant_series(f, (enum tmetric)m);
    head(f, "gpuslice_tenants", "gauge", "Tenants the daemon knows, by kind.");
    {
        int managed = 0, run = 0;

        for (i = 0; i < gd.ntenant; i++)
            if (visible(&gd.tenant[i])) {
                managed += gd.tenant[i].managed;
                run += !gd.tenant[i].managed;
            }
        fprintf(f, "gpuslice_tenants{kind=\"managed\"} %d\ngpuslice_tenants{kind=\"run\"} %d\n",
                managed, run);
    }
    /* Pods are nobody's on this node but the cluster's: an admin's to see. */
    if (gd_kube_enabled() && admin) {
        gd_pods_metrics(f, label);
        gd_dra_metrics(f);
    }
    head(f, "gpuslice_daemon_simulated", "gauge", "1 when the daemon runs on the simulated GPU.");
    fprintf(f, "gpuslice_daemon_simulated %d\n", gd.simulated);
    head(f, "gpuslice_daemon_requests_total", "counter", "HTTP requests the daemon answered.");
    fprintf(f, "gpuslice_daemon_requests_total %llu\n",
            (unsigned long long)__atomic_load_n(&gd.requests_total, __ATOMIC_RELAXED));
    latency(f);
    head(f, "gpuslice_daemon_start_time_seconds", "gauge", "When the daemon started, Unix time.");
    fprintf(f, "gpuslice_daemon_start_time_seconds %.3f\n", gd.started_unix_ns / 1e9);
    if (fclose(f) != 0) {
        free(*out);
        *out = NULL;
        return 0;
    }
    return len;
}
