/*
 * gpuslice info: what this machine's GPUs are and how they may be shared --
 * memory, SMs, the green-context partition sizes the driver allows, whether
 * an MPS daemon serves this user -- and the tenants running on them. It loads
 * the driver itself (dlopen), so it runs where no driver is installed and says so.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/gpuinfo.h"
#include "control/mps.h"
#include "control/tenant_view.h"
#include "control/tenants.h"
#include "common/cuda_api.h"
#include "common/devlist.h"
#include "common/driver.h"
#include "common/error.h"
#include "common/nvml_api.h"
#include "common/parse.h"
#include "common/tenant.h"

#define REEXEC_ENV GS_ENV_INFO_REEXEC

static void info_usage(void)
{
    printf("usage: gpuslice info [-d LIST] [--json] [-q]\n\n"
           "Describes this machine's NVIDIA GPUs and the tenants running on them. For\n"
           "each GPU (numbered by CUDA ordinal, as limits are): name, UUID, memory\n"
           "total/used/free (NVML), SM count and compute capability, the green-context\n"
           "partition sizes the driver allows (smallest group, alignment, and smallest\n"
           "group with CU_DEV_SM_RESOURCE_SPLIT_IGNORE_SM_COSCHEDULING), and whether an\n"
           "MPS control daemon is running: the one 'gpuslice mps start' made for that GPU\n"
           "if it has one, else the one of $CUDA_MPS_PIPE_DIRECTORY (default\n"
           "/tmp/nvidia-mps); then every tenant you may read, with its limits and usage\n"
           "(from gpusliced when it runs, then the run directory's files).\n\n"
           "options:\n"
           "  -d, --device LIST  only these GPUs: CUDA indexes or GPU UUIDs,\n"
           "                     comma-separated, or the option repeated (-d 1,3)\n"
           "      --json         one JSON object on stdout instead of text (sizes in\n"
           "                     bytes, null where the driver cannot tell, with a reason)\n"
           "  -q, --quiet        no notes on stderr (such as NVML missing)\n"
           "  -h, --help         this text\n\n"
           "The driver is loaded from libcuda.so.1 and libnvidia-ml.so.1, or from\n"
           "$GPUSLICE_REAL_LIBCUDA and $GPUSLICE_REAL_LIBNVML. Without a CUDA driver\n"
           "info fails (exit 1); without NVML the memory fields are empty.\n");
}

/*
 * The interposer, if preloaded, would show a tenant's view of the GPU (its
 * memory limit as the total). Run again without it; another preloaded library stays.
 */
static void leave_interposer(int argc, char **argv)
{
    const char *pre = getenv("LD_PRELOAD");
    char *keep, *copy, *tok, *save = NULL;
    char **args;
    size_t n = 0;
    int i, k = 0;

    if (pre == NULL || strstr(pre, "libgpuslice") == NULL || getenv(REEXEC_ENV))
        return;
    if ((copy = strdup(pre)) == NULL || (keep = calloc(1, strlen(pre) + 1)) == NULL ||
        (args = calloc((size_t)argc + 3, sizeof(*args))) == NULL)
        return; /* then it runs as it is */
    for (tok = strtok_r(copy, ": ", &save); tok; tok = strtok_r(NULL, ": ", &save)) {
        if (strstr(strrchr(tok, '/') ? strrchr(tok, '/') + 1 : tok, "libgpuslice"))
            continue;
        n += (size_t)sprintf(keep + n, "%s%s", n ? ":" : "", tok);
    }
    if (n)
        setenv("LD_PRELOAD", keep, 1);
    else
        unsetenv("LD_PRELOAD");
    setenv(REEXEC_ENV, "1", 1);
    args[k++] = "gpuslice";
    if (gs_log_quiet)
        args[k++] = "--quiet";
    for (i = 0; i < argc; i++)
        args[k++] = argv[i];
    execv("/proc/self/exe", args);
    /* Could not: carry on under the interposer rather than fail. */
    setenv("LD_PRELOAD", pre, 1);
    free(args);
    free(keep);
    free(copy);
}

static void json_int_or_null(const char *key, int v)
{
    if (v > 0)
        printf(",\"%s\":%d", key, v);
    else
        printf(",\"%s\":null", key);
}

static void print_json_gpu(const struct gpuinfo_gpu *g)
{
    const struct gpuinfo_green *gc = &g->green;

    printf("{\"index\":%d,\"name\":", g->index);
    gs_json_string(stdout, g->name, strlen(g->name));
    printf(",\"uuid\":\"%s\"", g->uuid);
    if (g->have_mem)
        printf(",\"memory_total_bytes\":%llu,\"memory_used_bytes\":%llu,"
               "\"memory_free_bytes\":%llu",
               g->mem.total, g->mem.used, g->mem.free);
    else
        printf(",\"memory_total_bytes\":null,\"memory_used_bytes\":null,"
               "\"memory_free_bytes\":null");
    json_int_or_null("sm_count", g->sm_count);
    if (g->cc_major >= 0)
        printf(",\"compute_capability\":\"%d.%d\"", g->cc_major, g->cc_minor);
    else
        printf(",\"compute_capability\":null");
    printf(",\"green_contexts\":{\"supported\":%s", gc->supported ? "true" : "false");
    json_int_or_null("min_sms", gc->min_sms);
    json_int_or_null("alignment", gc->alignment);
    json_int_or_null("finest_split_sms", gc->finest);
    json_int_or_null("groups", gc->groups);
    if (gc->groups && g->sm_count >= 0) /* 0 is a count here, not unknown */
        printf(",\"groups_left_over_sms\":%d", g->sm_count - gc->groups * gc->min_sms);
    else
        printf(",\"groups_left_over_sms\":null");
    json_int_or_null("finest_groups", gc->finest_groups);
    json_int_or_null("driver_min_sm_partition_size", (int)gc->drv_min);
    json_int_or_null("driver_sm_coscheduled_alignment", (int)gc->drv_align);
    printf(",\"reason\":");
    if (gc->reason[0])
        gs_json_string(stdout, gc->reason, strlen(gc->reason));
    else
        printf("null");
    printf("},\"mps\":\"%s\",\"mps_pipe_dir\":", g->mps);
    gs_json_string(stdout, g->mps_dir, strlen(g->mps_dir));
    printf("}");
}

static void print_json(const struct gpuinfo *in, const struct tview_list *l)
{
    int i;

    printf("{\"driver_version\":");
    if (in->driver_version[0])
        gs_json_string(stdout, in->driver_version, strlen(in->driver_version));
    else
        printf("null");
    if (in->cuda_version > 0)
        printf(",\"cuda_driver_version\":\"%d.%d\"", in->cuda_version / 1000,
               in->cuda_version % 1000 / 10);
    else
        printf(",\"cuda_driver_version\":null");
    printf(",\"gpus\":[");
    for (i = 0; i < in->ngpus; i++) {
        if (i)
            putchar(',');
        print_json_gpu(&in->gpus[i]);
    }
    printf("],");
    printf("\"tenants_source\":\"%s\",\"tenants\":", l->daemon ? "gpusliced" : "run-directory");
    tview_json(stdout, l); /* compute use is not measured here: null */
    printf("}\n");
}

/* Text for a terminal: what the driver or another user's tenant file says, escaped. */
static void plain(char *out, size_t len, const char *s)
{
    gs_text_safe(out, len, s, strlen(s));
}

/*
 * One of a GPU's memory figures in the unit its total is best told in (GiB with a decimal,
 * else MiB, else bytes), so that the line's three figures read alike: "16.0 GiB total,
 * 0.8 GiB used, 15.2 GiB free", never a mix of GiB and MiB.
 */
static void text_size(char *buf, size_t len, const struct gpuinfo_gpu *g, unsigned long long v)
{
    if (!g->have_mem)
        snprintf(buf, len, "?");
    else if (g->mem.total >= 1ULL << 30)
        snprintf(buf, len, "%.1f GiB", (double)v / (double)(1ULL << 30));
    else if (g->mem.total >= 1ULL << 20)
        snprintf(buf, len, "%.0f MiB", (double)v / (double)(1ULL << 20));
    else
        snprintf(buf, len, "%llu B", v);
}

static void print_text_gpu(const struct gpuinfo_gpu *g)
{
    const struct gpuinfo_green *gc = &g->green;
    char name[GS_TEXT_LEN(GPUINFO_NAME_LEN)], total[32], used[32], free_[32];
    char dir[GS_TEXT_LEN(MPS_PATH_MAX)];

    plain(name, sizeof(name), g->name);
    printf("GPU %d: %s  %s\n", g->index, name, g->uuid);
    text_size(total, sizeof(total), g, g->mem.total);
    text_size(used, sizeof(used), g, g->mem.used);
    text_size(free_, sizeof(free_), g, g->mem.free);
    printf("  memory          %s total, %s used, %s free\n", total, used, free_);
    if (g->sm_count > 0)
        printf("  SMs             %d", g->sm_count);
    else
        printf("  SMs             ?");
    if (g->cc_major >= 0)
        printf(", compute capability %d.%d\n", g->cc_major, g->cc_minor);
    else
        printf(", compute capability ?\n");
    if (gc->supported) {
        printf("  green contexts  groups of %d SMs or more", gc->min_sms);
        if (gc->alignment)
            printf(", in steps of %d", gc->alignment);
        if (gc->finest)
            printf("; %d when co-scheduling is ignored", gc->finest);
        printf("\n");
        if (gc->groups && g->sm_count >= 0)
            printf("                  split: %d groups of %d and %d SMs left over, or %d groups "
                   "of %d\n",
                   gc->groups, gc->min_sms, g->sm_count - gc->groups * gc->min_sms,
                   gc->finest_groups, gc->finest);
        if (gc->reason[0])
            printf("                  (%s)\n", gc->reason);
    } else {
        printf("  green contexts  %s\n", gc->reason);
    }
    plain(dir, sizeof(dir), g->mps_dir);
    printf("  MPS             %s (%s)\n", g->mps, dir);
}

static void print_text_tenants(const struct tview_list *l)
{
    size_t i;
    int d;

    if (l->n == 0) {
        char dir[GS_TEXT_LEN(PATH_MAX)];

        plain(dir, sizeof(dir), gs_tenant_dir());
        printf("tenants: none %s %s\n", l->daemon ? "in gpusliced or" : "in", dir);
        return;
    }
    printf("tenants%s (details: gpuslice tenants):\n", l->daemon ? ", from gpusliced" : "");
    printf("  %-28s %-16s %-4s %-12s %-12s %s\n", "ID", "NAME", "GPU", "MEM USED", "MEM LIMIT",
           "CEILING");
    for (i = 0; i < l->n; i++) {
        const struct tview *t = &l->v[i];
        char shown[GS_TEXT_LEN(TVIEW_NAME)], id[GS_TEXT_LEN(TENANT_ID_MAX)];

        plain(shown, sizeof(shown), t->name[0] ? t->name : "-");
        plain(id, sizeof(id), t->id);
        for (d = 0; d < t->ndev; d++) {
            const struct tview_dev *dev = &t->dev[d];
            char used[32], lim[32], cl[16], gpu[16];

            gs_format_size(dev->mem_used, used, sizeof(used));
            if (dev->mem_limit)
                gs_format_size(dev->mem_limit, lim, sizeof(lim));
            else
                snprintf(lim, sizeof(lim), "none");
            if (dev->ceiling)
                snprintf(cl, sizeof(cl), "%u%%", (unsigned)dev->ceiling);
            else
                snprintf(cl, sizeof(cl), "none");
            if (dev->index >= 0)
                snprintf(gpu, sizeof(gpu), "%d", dev->index);
            else
                snprintf(gpu, sizeof(gpu), "-");
            printf("  %-28s %-16s %-4s %-12s %-12s %s\n", d ? "" : id, d ? "" : shown, gpu, used,
                   lim, cl);
        }
        if (t->ndev == 0) {
            char lim[32] = "-", cl[16] = "-";

            if (t->def_mem)
                gs_format_size(t->def_mem, lim, sizeof(lim));
            if (t->def_ceiling)
                snprintf(cl, sizeof(cl), "%u%%", (unsigned)t->def_ceiling);
            printf("  %-28s %-16s %-4s %-12s %-12s %s\n", id, shown, "-", "-", lim, cl);
        }
    }
}

static void print_text(const struct gpuinfo *in, const struct tview_list *l)
{
    int i;

    printf("driver %s, CUDA ", in->driver_version[0] ? in->driver_version : "?");
    if (in->cuda_version > 0)
        printf("%d.%d", in->cuda_version / 1000, in->cuda_version % 1000 / 10);
    else
        printf("?");
    printf(", %d GPU%s\n\n", in->ngpus, in->ngpus == 1 ? "" : "s");
    for (i = 0; i < in->ngpus; i++) {
        print_text_gpu(&in->gpus[i]);
        printf("\n");
    }
    print_text_tenants(l);
}

/*
 * One entry of a checked -d list, [p, p + len): a GPU UUID (*uuid filled) or a CUDA index
 * (*idx); -1 for what no GPU of info's can be (a MIG UUID, a partial one).
 */
static int device_entry(const char *p, size_t len, char uuid[GS_UUID_STRLEN], long *idx)
{
    size_t i;

    *idx = -1;
    if (len > 0 && gs_parse_uuid(p, len, uuid))
        return 0;
    if (len == 0 || len > 4)
        return -1;
    for (i = 0; i < len; i++)
        if (p[i] < '0' || p[i] > '9')
            return -1;
    *idx = strtol(p, NULL, 10);
    return 0;
}

/*
 * Keeps the GPUs of in that list names (the -d values as gs_device_list checked and joined
 * them), in CUDA order; 0, or -1 having said which entry names none of the GPUs described.
 */
static int select_gpus(struct gpuinfo *in, const char *list)
{
    unsigned char *keep = calloc((size_t)in->ngpus + 1, 1);
    char uuid[GS_UUID_STRLEN], have[160] = "";
    const char *p = list;
    int i, n = 0;
    long idx;

    if (!keep) {
        gs_log_error("info: %s", strerror(ENOMEM));
        return -1;
    }
    for (;;) {
        size_t len = strcspn(p, ",");
        int found = -1;

        if (device_entry(p, len, uuid, &idx) == 0)
            for (i = 0; i < in->ngpus && found < 0; i++)
                if (idx >= 0 ? in->gpus[i].index == idx : strcasecmp(in->gpus[i].uuid, uuid) == 0)
                    found = i;
        if (found < 0) {
            for (i = 0; i < in->ngpus; i++) {
                size_t used = strlen(have);
                snprintf(have + used, sizeof(have) - used, "%s%d", i ? ", " : "",
                         in->gpus[i].index);
            }
            gs_log_error("--device: \"%.*s\" is none of the %d GPU%s described here (%s%s)",
                         (int)(len > 64 ? 64 : len), p, in->ngpus, in->ngpus == 1 ? "" : "s",
                         in->ngpus ? "CUDA indexes " : "", in->ngpus ? have : "none");
            free(keep);
            return -1;
        }
        keep[found] = 1;
        if (p[len] == '\0')
            break;
        p += len + 1;
    }
    for (i = 0; i < in->ngpus; i++)
        if (keep[i])
            in->gpus[n++] = in->gpus[i];
    in->ngpus = n;
    free(keep);
    return 0;
}

static int run_info(int argc, char **argv)
{
    static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
                                          { "device", required_argument, NULL, 'd' },
                                          { "quiet", no_argument, NULL, 'q' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    struct tview_list l = { 0 };
    struct gs_driver d;
    struct gpuinfo in;
    char err[1024], *sel[64], *list = NULL;
    int c, r, json = 0, nsel = 0;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:d:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            if (nsel == (int)(sizeof(sel) / sizeof(sel[0]))) {
                gs_log_error("--device: given more than %d times", nsel);
                return GS_EXIT_USAGE;
            }
            sel[nsel++] = optarg;
            break;
        default:
            if ((r = gs_cli_common_option("info", c, argv, opts, info_usage, &json)) >= 0)
                return r;
        }
    }
    if (optind < argc) {
        gs_log_error("info: unexpected argument \"%s\" (usage: gpuslice info [-d LIST] [--json] "
                     "[-q])",
                     argv[optind]);
        return GS_EXIT_USAGE;
    }
    /* The -d values as run's are checked, before the driver is asked. */
    if (nsel && gs_device_list(sel, nsel, NULL, &list, err, sizeof(err)) < 0) {
        gs_log_error("%s", err);
        return GS_EXIT_USAGE;
    }
    leave_interposer(argc, argv);
    if (gpuinfo_load_driver(&d, err, sizeof(err)) < 0) {
        gs_log_error("no NVIDIA driver found: %s", err);
        free(list);
        return GS_EXIT_ERROR;
    }
    if ((r = gpuinfo_gather(&d, &in)) < 0) {
        if (r == -ENOMEM)
            gs_log_error("info: %s", gs_strerror(r));
        free(in.gpus);
        free(list);
        gpuinfo_unload_driver(&d);
        return GS_EXIT_ERROR;
    }
    gpuinfo_unload_driver(&d);
    r = list ? select_gpus(&in, list) : 0;
    free(list);
    if (r < 0) {
        free(in.gpus);
        return GS_EXIT_USAGE;
    }
    if ((r = tview_read(&l, 1, err, sizeof(err))) < 0) {
        gs_log_error("info: %s", err);
        free(in.gpus);
        return GS_EXIT_ERROR;
    }
    if (json)
        print_json(&in, &l);
    else
        print_text(&in, &l);
    tview_done(&l);
    free(in.gpus);
    if (fflush(stdout) != 0 || ferror(stdout)) {
        gs_log_error("info: cannot write the output: %s", strerror(errno));
        return GS_EXIT_ERROR;
    }
    /* A GPU the driver would not describe (named on stderr) fails info, unless -d left it out. */
    return in.failed && !nsel ? GS_EXIT_ERROR : GS_EXIT_OK;
}

const struct gs_cmd gs_cmd_info = { "info",
                                    "describe the GPUs, how they can be shared, and the tenants",
                                    run_info, info_usage };
