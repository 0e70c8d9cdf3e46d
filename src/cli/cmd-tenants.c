/*
 * gpuslice tenants: lists the tenants on this machine with their limits and
 * usage per device, as a table or as JSON. Compute usage is measured here,
 * from two readings of each tenant's cumulative device time.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
#include "control/tenants.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/tenant.h"

#define DEFAULT_INTERVAL_NS (200ULL * 1000 * 1000)
#define MAX_INTERVAL_S 3600
#define PIDS_SHOWN 4 /* in the table; JSON has them all */

static void tenants_usage(void)
{
    printf("usage: gpuslice tenants [--json] [--interval SEC]\n\n"
           "Lists the tenants on this machine: every tenant in $GPUSLICE_RUN_DIR\n"
           "(default /dev/shm) that you may read (root sees every user's) with, for each\n"
           "GPU it uses, its memory limit and usage and its compute ceiling and usage.\n\n"
           "options:\n"
           "      --json          one JSON object on stdout instead of a table (sizes in\n"
           "                      bytes, times in seconds, null for no limit)\n"
           "      --interval SEC  measure compute usage over SEC seconds (default 0.2;\n"
           "                      0 skips the measurement)\n"
           "  -q, --quiet         no note when there is nothing to list\n"
           "  -h, --help          this text\n\n"
           "Compute usage is the share of wall time the tenant's kernels, all its\n"
           "processes together, held the GPU during the interval; memory usage is what\n"
           "its live processes hold. A tenant whose gpuslice run and processes have all\n"
           "exited is not listed. A file that group or others may write, or of another\n"
           "gpuslice version, is skipped with a warning; the owner shown is the file's.\n");
}

/* Seconds as "2", "0.5", "0": digits with an optional fraction, up to MAX_INTERVAL_S. */
static int parse_seconds(const char *s, uint64_t *ns)
{
    uint64_t whole = 0, frac = 0, scale = 1000000000ULL;
    const char *p = s;
    int digits = 0;

    for (; *p >= '0' && *p <= '9'; p++, digits++) {
        whole = whole * 10 + (uint64_t)(*p - '0');
        if (whole > MAX_INTERVAL_S)
            return -ERANGE;
    }
    if (*p == '.')
        for (p++; *p >= '0' && *p <= '9'; p++, digits++)
            if (scale > 1) {
                scale /= 10;
                frac += (uint64_t)(*p - '0') * scale;
            }
    if (digits == 0 || *p != '\0')
        return -EINVAL;
    *ns = whole * 1000000000ULL + frac;
    return *ns > MAX_INTERVAL_S * 1000000000ULL ? -ERANGE : 0;
}

static uint64_t now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* Device time each device entry has used so far: one reading of every tenant. */
struct reading {
    uint64_t at_ns;
    uint64_t *busy; /* [tenant * GPUSLICE_MAX_DEVICES + entry] */
};

static int take_reading(const struct tenant_list *l, struct reading *r)
{
    size_t i;
    int d;

    if ((r->busy = calloc(l->n ? l->n : 1, GPUSLICE_MAX_DEVICES * sizeof(uint64_t))) == NULL)
        return -ENOMEM;
    r->at_ns = now_ns();
    for (i = 0; i < l->n; i++)
        for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
            const struct gpuslice_tenant_device *dev = &l->v[i].t->dev[d];

            /* An entry added later starts from zero, so a missing first reading is 0. */
            if (tenant_list_dev_in_use(dev))
                r->busy[i * GPUSLICE_MAX_DEVICES + (size_t)d] =
                    __atomic_load_n(&dev->compute_busy_ns, __ATOMIC_RELAXED);
        }
    return 0;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Percent of wall time device entry d of tenant i was busy between a and b; < 0 if unknown. */
static double usage_percent(const struct reading *a, const struct reading *b, size_t i, int d)
{
    size_t k = i * GPUSLICE_MAX_DEVICES + (size_t)d;

    if (a == NULL || b == NULL || b->at_ns <= a->at_ns)
        return -1;
    if (b->busy[k] <= a->busy[k])
        return 0;
    return 100.0 * (double)(b->busy[k] - a->busy[k]) / (double)(b->at_ns - a->at_ns);
}

struct sampled {
    const struct reading *a, *b;
};

static double sampled_use(size_t i, int d, const void *ctx)
{
    const struct sampled *s = ctx;

    return usage_percent(s->a, s->b, i, d);
}

static void print_json(const struct tenant_list *l, const struct reading *a,
                       const struct reading *b)
{
    struct sampled s = { a, b };

    printf("{\"tenants\":");
    tenant_list_json(stdout, l, sampled_use, &s);
    printf("}\n");
}

/* The table: one row per device in use (one for a tenant that uses none yet). */
enum {
    C_ID,
    C_NAME,
    C_OWNER,
    C_CREATOR,
    C_PIDS,
    C_GPU,
    C_UUID,
    C_MEM,
    C_MEMLIM,
    C_COMP,
    C_CEIL,
    NCOLS
};
/* Room for an escaped ID, the longest cell (gs_text_safe: 4 characters a byte at most). */
#define CELL GS_TEXT_LEN(TENANT_ID_MAX)

static const char *const headers[NCOLS] = { "ID",        "NAME",    "OWNER",  "CREATOR",
                                            "PROCESSES", "GPU",     "UUID",   "MEM USED",
                                            "MEM LIMIT", "COMPUTE", "CEILING" };

typedef char row_t[NCOLS][CELL];

/* A cell for a terminal: whatever another user wrote into a name or a file name, escaped. */
static void cell_text(char *cell, const char *s)
{
    gs_text_safe(cell, CELL, s, strlen(s));
    if (cell[0] == '\0')
        snprintf(cell, CELL, "-");
}

/* Columns a cell takes: one per character (cells hold valid UTF-8 only, no controls). */
static size_t cell_width(const char *cell)
{
    size_t w = 0;

    for (; *cell; cell++)
        w += ((unsigned char)*cell & 0xc0) != 0x80;
    return w;
}

/* The file's real owner: the header's owner_uid is whatever its writer put there. */
static void owner_cell(char *cell, uid_t uid)
{
    struct passwd *pw = getpwuid(uid);

    if (pw && pw->pw_name)
        snprintf(cell, CELL, "%u(%.32s)", (unsigned)uid, pw->pw_name);
    else
        snprintf(cell, CELL, "%u", (unsigned)uid);
}

static void pids_cell(char *cell, const struct gpuslice_tenant *t)
{
    int pids[PIDS_SHOWN], n = tenant_list_pids(t, pids, PIDS_SHOWN), k;
    size_t len = 0;

    snprintf(cell, CELL, "-");
    for (k = 0; k < n && k < PIDS_SHOWN; k++)
        len += (size_t)snprintf(cell + len, CELL - len, "%s%d", k ? "," : "", pids[k]);
    if (n > PIDS_SHOWN)
        snprintf(cell + len, CELL - len, " +%d", n - PIDS_SHOWN);
}

static void device_cells(row_t row, const struct gpuslice_tenant *t, int d, double used)
{
    const struct gpuslice_tenant_device *dev = &t->dev[d];
    uint64_t limit = __atomic_load_n(&dev->mem_limit, __ATOMIC_RELAXED);
    uint32_t ceil = tenant_list_ceiling(dev);
    char uuid[GS_UUID_STRLEN];

    tenant_list_uuid(dev->uuid, uuid);
    snprintf(row[C_GPU], CELL, "%d", (int)dev->ordinal);
    snprintf(row[C_UUID], CELL, "%s", uuid);
    gs_format_size(tenant_list_mem_used(t, d), row[C_MEM], CELL);
    if (limit)
        gs_format_size(limit, row[C_MEMLIM], CELL);
    else
        snprintf(row[C_MEMLIM], CELL, "none");
    if (used >= 0)
        snprintf(row[C_COMP], CELL, "%.1f%%", used);
    else
        snprintf(row[C_COMP], CELL, "-");
    if (ceil)
        snprintf(row[C_CEIL], CELL, "%u%%", (unsigned)ceil);
    else
        snprintf(row[C_CEIL], CELL, "none");
}

static int print_table(const struct tenant_list *l, const struct reading *a,
                       const struct reading *b)
{
    size_t i, nrows = 1, r, w[NCOLS] = { 0 };
    row_t *rows;
    int c, d;

    for (i = 0; i < l->n; i++) {
        size_t used = 0;
        for (d = 0; d < GPUSLICE_MAX_DEVICES; d++)
            used += (size_t)tenant_list_dev_in_use(&l->v[i].t->dev[d]);
        nrows += used ? used : 1;
    }
    if ((rows = calloc(nrows, sizeof(*rows))) == NULL)
        return -ENOMEM;
    for (c = 0; c < NCOLS; c++)
        snprintf(rows[0][c], CELL, "%s", headers[c]);
    for (i = 0, r = 1; i < l->n; i++) {
        const struct gpuslice_tenant *t = l->v[i].t;
        char name[sizeof(t->name) + 1];
        size_t first = r;

        tenant_list_name(t, name, sizeof(name));
        cell_text(rows[r][C_ID], l->v[i].id);
        cell_text(rows[r][C_NAME], name);
        owner_cell(rows[r][C_OWNER], l->v[i].owner);
        snprintf(rows[r][C_CREATOR], CELL, "%d", (int)t->creator_pid);
        pids_cell(rows[r][C_PIDS], t);
        for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
            if (!tenant_list_dev_in_use(&t->dev[d]))
                continue;
            device_cells(rows[r++], t, d, usage_percent(a, b, i, d));
        }
        if (r == first) {
            for (c = C_GPU; c < NCOLS; c++)
                snprintf(rows[r][c], CELL, "-");
            r++;
        }
    }
    for (r = 0; r < nrows; r++)
        for (c = 0; c < NCOLS; c++)
            if (cell_width(rows[r][c]) > w[c])
                w[c] = cell_width(rows[r][c]);
    for (r = 0; r < nrows; r++) {
        for (c = 0; c < NCOLS - 1; c++)
            printf("%s%*s", rows[r][c], (int)(w[c] - cell_width(rows[r][c]) + 2), "");
        printf("%s\n", rows[r][NCOLS - 1]);
    }
    free(rows);
    return 0;
}

static int run_tenants(int argc, char **argv)
{
    static const struct option opts[] = { { "json", no_argument, NULL, 'j' },
                                          { "interval", required_argument, NULL, 'i' },
                                          { "quiet", no_argument, NULL, 'q' },
                                          { "help", no_argument, NULL, 'h' },
                                          { NULL, 0, NULL, 0 } };
    struct reading first = { 0, NULL }, second = { 0, NULL };
    struct tenant_list l = { NULL, 0, 0 };
    uint64_t interval = DEFAULT_INTERVAL_NS;
    int c, r, json = 0, sampled = 0;

    optind = 1;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'i':
            if ((r = parse_seconds(optarg, &interval)) < 0) {
                gs_log_error("--interval: \"%s\" is %s (use seconds such as 0.5 or 2, up to "
                             "%d; 0 skips the measurement)",
                             optarg, r == -ERANGE ? "too long" : "not a number of seconds",
                             MAX_INTERVAL_S);
                return GS_EXIT_USAGE;
            }
            break;
        default:
            if ((r = gs_cli_common_option("tenants", c, argv, opts, tenants_usage, &json)) >= 0)
                return r;
        }
    }
    if (optind < argc) {
        gs_log_error("tenants: unexpected argument \"%s\" (usage: gpuslice tenants [--json] "
                     "[--interval SEC])",
                     argv[optind]);
        return GS_EXIT_USAGE;
    }
    if ((r = tenant_list_scan(&l, 1)) < 0) {
        gs_log_error("tenants: cannot read the run directory %s: %s (GPUSLICE_RUN_DIR must "
                     "name a directory you may list and search, default /dev/shm)",
                     gs_tenant_dir(), gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (l.n > 0 && interval > 0) {
        /* The scan's copies may be old by the time it ends (many files): read them afresh. */
        tenant_list_refresh(&l);
        if ((r = take_reading(&l, &first)) == 0) {
            sleep_ns(interval);
            tenant_list_refresh(&l);
            r = take_reading(&l, &second);
        }
        if (r < 0) {
            gs_log_error("tenants: %s", gs_strerror(r));
            free(first.busy);
            tenant_list_done(&l);
            return GS_EXIT_ERROR;
        }
        sampled = 1;
    }
    if (l.n == 0)
        gs_log_note("no tenants in %s", gs_tenant_dir());
    if (json)
        print_json(&l, sampled ? &first : NULL, sampled ? &second : NULL);
    else if (l.n > 0)
        r = print_table(&l, sampled ? &first : NULL, sampled ? &second : NULL);
    free(first.busy);
    free(second.busy);
    tenant_list_done(&l);
    if (r < 0) {
        gs_log_error("tenants: %s", gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        gs_log_error("tenants: cannot write the output: %s", strerror(errno));
        return GS_EXIT_ERROR;
    }
    return GS_EXIT_OK;
}

const struct gs_cmd gs_cmd_tenants = { "tenants", "list tenants with their limits and usage",
                                       run_tenants, tenants_usage };
