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
#include "control/tenant_view.h"
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
           "Lists the tenants on this machine with, for each GPU it uses, its memory\n"
           "limit and usage and its compute ceiling and usage. When gpusliced runs, the\n"
           "tenants it shows you (yours; an admin's: all) come from it, its managed\n"
           "tenants too; then every tenant in $GPUSLICE_RUN_DIR (default /dev/shm) that\n"
           "you may read and the daemon does not list (root reads every user's).\n\n"
           "options:\n"
           "      --json          one JSON object on stdout instead of a table (sizes in\n"
           "                      bytes, times in seconds, null for no limit; \"source\"\n"
           "                      says gpusliced or run-directory)\n"
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

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = { (time_t)(ns / 1000000000ULL), (long)(ns % 1000000000ULL) };

    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void print_json(const struct tview_list *l)
{
    printf("{\"source\":\"%s\",\"tenants\":", l->daemon ? "gpusliced" : "run-directory");
    tview_json(stdout, l);
    printf("}\n");
}

/* The table: one row per device in use (one for a tenant that uses none yet). */
enum {
    C_ID,
    C_NAME,
    C_OWNER,
    C_CREATOR,
    C_PIDS,
    C_CLASS,
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

static const char *const headers[NCOLS] = { "ID",        "NAME",      "OWNER",   "CREATOR",
                                            "PROCESSES", "PRIORITY",  "GPU",     "UUID",
                                            "MEM USED",  "MEM LIMIT", "COMPUTE", "CEILING" };

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

static void pids_cell(char *cell, const struct tview *t)
{
    size_t len = 0;
    int k;

    snprintf(cell, CELL, "-");
    for (k = 0; k < t->npids && k < PIDS_SHOWN && k < TVIEW_PIDS; k++)
        len += (size_t)snprintf(cell + len, CELL - len, "%s%d", k ? "," : "", t->pids[k]);
    if (t->npids > PIDS_SHOWN)
        snprintf(cell + len, CELL - len, " +%d", t->npids - PIDS_SHOWN);
}

static void device_cells(row_t row, const struct tview_dev *dev)
{
    if (dev->index >= 0)
        snprintf(row[C_GPU], CELL, "%d", dev->index);
    else
        snprintf(row[C_GPU], CELL, "-");
    cell_text(row[C_UUID], dev->uuid);
    gs_format_size(dev->mem_used, row[C_MEM], CELL);
    if (dev->mem_limit)
        gs_format_size(dev->mem_limit, row[C_MEMLIM], CELL);
    else
        snprintf(row[C_MEMLIM], CELL, "none");
    if (dev->used >= 0)
        snprintf(row[C_COMP], CELL, "%.1f%%", dev->used);
    else
        snprintf(row[C_COMP], CELL, "-");
    if (dev->ceiling)
        snprintf(row[C_CEIL], CELL, "%u%%", (unsigned)dev->ceiling);
    else
        snprintf(row[C_CEIL], CELL, "none");
}

static int print_table(const struct tview_list *l)
{
    size_t i, nrows = 1, r, w[NCOLS] = { 0 };
    row_t *rows;
    int c, d;

    for (i = 0; i < l->n; i++)
        nrows += l->v[i].ndev ? (size_t)l->v[i].ndev : 1;
    if ((rows = calloc(nrows, sizeof(*rows))) == NULL)
        return -ENOMEM;
    for (c = 0; c < NCOLS; c++)
        snprintf(rows[0][c], CELL, "%s", headers[c]);
    for (i = 0, r = 1; i < l->n; i++) {
        const struct tview *t = &l->v[i];

        cell_text(rows[r][C_ID], t->id);
        cell_text(rows[r][C_NAME], t->name);
        owner_cell(rows[r][C_OWNER], t->owner);
        if (t->creator > 0)
            snprintf(rows[r][C_CREATOR], CELL, "%d", t->creator);
        else
            snprintf(rows[r][C_CREATOR], CELL, "%s", t->managed ? "daemon" : "-");
        pids_cell(rows[r][C_PIDS], t);
        if (t->weight > 1)
            snprintf(rows[r][C_CLASS], CELL, "%s x%u", gs_priority_name(t->priority), t->weight);
        else
            snprintf(rows[r][C_CLASS], CELL, "%s", gs_priority_name(t->priority));
        for (d = 0; d < t->ndev; d++)
            device_cells(rows[r++], &t->dev[d]);
        if (t->ndev == 0) {
            /* No GPU used yet: the limits it will have on each (a daemon's named tenant). */
            for (c = C_GPU; c < NCOLS; c++)
                snprintf(rows[r][c], CELL, "-");
            if (t->def_mem)
                gs_format_size(t->def_mem, rows[r][C_MEMLIM], CELL);
            if (t->def_ceiling)
                snprintf(rows[r][C_CEIL], CELL, "%u%%", (unsigned)t->def_ceiling);
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
    struct tview_list first = { 0 }, second = { 0 }, *l;
    uint64_t interval = DEFAULT_INTERVAL_NS;
    char err[1024];
    int c, r, json = 0;

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
    if ((r = tview_read(&first, 1, err, sizeof(err))) < 0) {
        gs_log_error("tenants: %s", err);
        return GS_EXIT_ERROR;
    }
    l = &first;
    if (first.n > 0 && interval > 0) {
        int tries;

        sleep_ns(interval);
        /*
         * The second reading warns no more: the first said what was skipped. The daemon reads
         * its tenants' files at its sweeps (every 250 ms by default): until it has read each
         * again, read again, for at most a second more.
         */
        for (tries = 0;; tries++) {
            if ((r = tview_read(&second, 0, err, sizeof(err))) < 0) {
                gs_log_error("tenants: %s", err);
                tview_done(&first);
                return GS_EXIT_ERROR;
            }
            if (!second.daemon || !tview_stale(&second, &first) || tries >= 20)
                break;
            tview_done(&second);
            sleep_ns(50 * 1000 * 1000);
        }
        if (second.daemon != first.daemon)
            gs_log_error("warning: gpusliced %s between the two readings; compute use is not "
                         "measured",
                         first.daemon ? "stopped answering" : "started");
        else
            tview_usage(&second, &first);
        l = &second;
    }
    if (l->n == 0)
        gs_log_note("no tenants %s %s", l->daemon ? "in gpusliced or" : "in", gs_tenant_dir());
    if (json)
        print_json(l);
    else if (l->n > 0)
        r = print_table(l);
    tview_done(&first);
    tview_done(&second);
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
