/*
 * gpuslice set: changes the memory limit or compute ceiling of a running
 * tenant, found by ID, name or path, through gs_tenant_set().
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cli/cli.h"
#include "control/daemon_client.h"
#include "control/tenant_view.h"
#include "control/tenants.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/tenant.h"

static void set_usage(void)
{
    printf("usage: gpuslice set TENANT [--compute PERCENT] [--memory SIZE] [--priority CLASS]\n"
           "                    [--weight N] [--json]\n\n"
           "Changes the limits of a running tenant. TENANT is its ID or its name as\n"
           "gpuslice tenants shows them (a name must match one tenant only, of any owner),\n"
           "or the path of its state file (anything with a /). Only the tenant's owner (the\n"
           "owner of its state file) and root may change it.\n\n"
           "options:\n"
           "  -c, --compute PERCENT  new compute ceiling: an integer 1..100, one for\n"
           "                         every GPU or per device by CUDA index or UUID\n"
           "                         (0:30,1:50 or GPU-…:30); none or 100 removes the\n"
           "                         ceiling (also per device: 0:none)\n"
           "  -m, --memory SIZE      new memory limit: 8G, 512M, 1.5G, 1073741824, or\n"
           "                         per device (0:8G,1:4G); none removes the limit\n"
           "      --priority CLASS   new priority class: latency, normal or background\n"
           "      --weight N         new weight, 1..100: its turns on a shared GPU\n"
           "  -q, --quiet            do not print the new limits\n"
           "      --json             print the tenant as it now is on stdout, as gpuslice\n"
           "                         tenants --json lists it (usage not measured: null)\n"
           "  -h, --help             this text\n\n"
           "A bare value applies to every GPU of the tenant, also to those it starts\n"
           "using later; an index or UUID entry must name a GPU the tenant uses now, else\n"
           "nothing changes. A new compute ceiling takes effect within a second.\n"
           "Lowering the memory limit below the tenant's usage frees nothing: new\n"
           "allocations are refused until its usage falls under the limit.\n");
}

/*
 * Parses a value as run does, where "none" may stand for any value (no
 * limit): each "none" is parsed as a valid placeholder (1 for a percentage,
 * 1G for a size: sizes under 1 MiB are refused), then its entry's value set
 * to 0.
 */
/* Why gs_tenant_open_owned refused a file, for a person. */
static const char *why_untrusted(int r)
{
    if (r == GS_EUNSAFE)
        return "its file is writable by group or others, so anyone could have written it; it is "
               "no tenant to trust";
    if (r == GS_EOWNER)
        return "its contents name another owner than the file's, so whoever wrote it could pass "
               "it off as another user's; it is no tenant to trust";
    return gs_strerror(r);
}

static int parse_value(const char *s, enum gs_value_kind kind, const char *what,
                       struct gs_limits *l, char *err, size_t errlen)
{
    char buf[1024];
    int none[GS_MAX_LIMIT_ENTRIES] = { 0 }, item = 0, r, i;
    const char *p = s, *placeholder = kind == GS_VALUE_SIZE ? "1G" : "1";
    size_t len = 0, n = strlen(s);

    if (n >= sizeof(buf)) {
        snprintf(err, errlen, "%s: the value is too long", what);
        return -EINVAL;
    }
    if (n > 0 && s[n - 1] == ',') {
        snprintf(err, errlen, "%s: trailing comma in \"%.200s\"", what, s);
        return -EINVAL;
    }
    for (;;) {
        const char *end = strchr(p, ',');
        size_t ilen = end ? (size_t)(end - p) : strlen(p);
        const char *colon = memchr(p, ':', ilen);
        const char *val = colon ? colon + 1 : p;
        size_t vlen = ilen - (size_t)(val - p);

        if (vlen == 4 && strncasecmp(val, "none", 4) == 0 && item < GS_MAX_LIMIT_ENTRIES) {
            none[item] = 1;
            memcpy(buf + len, p, (size_t)(val - p));
            len += (size_t)(val - p);
            memcpy(buf + len, placeholder, strlen(placeholder));
            len += strlen(placeholder);
        } else {
            memcpy(buf + len, p, ilen);
            len += ilen;
        }
        item++;
        if (end == NULL)
            break;
        buf[len++] = ',';
        p = end + 1;
    }
    buf[len] = '\0';
    if ((r = gs_parse_limit_list(buf, kind, what, l, err, errlen)) < 0)
        return r;
    /* Each item made one entry, in order. */
    for (i = 0; i < l->n; i++)
        if (none[i])
            l->e[i].value = 0;
    return 0;
}

/* "ID (name)" for messages, escaped: both come from a file anyone may have made. */
static void describe(char *out, size_t len, const char *id, const struct gpuslice_tenant *t)
{
    char name[sizeof(t->name) + 1], sid[GS_TEXT_LEN(TENANT_ID_MAX)];
    char sname[GS_TEXT_LEN(sizeof(t->name))];

    tenant_list_name(t, name, sizeof(name));
    gs_text_safe(sid, sizeof(sid), id, strlen(id));
    gs_text_safe(sname, sizeof(sname), name, strlen(name));
    if (*name)
        snprintf(out, len, "%s (%s)", sid, sname);
    else
        snprintf(out, len, "%s", sid);
}

/* "uid 1000 (alice)" for messages. */
static void owner_text(char *out, size_t len, uid_t uid)
{
    struct passwd *pw = getpwuid(uid);

    if (pw && pw->pw_name)
        snprintf(out, len, "uid %u (%.32s)", (unsigned)uid, pw->pw_name);
    else
        snprintf(out, len, "uid %u", (unsigned)uid);
}

static int name_is(const struct gpuslice_tenant *t, const char *arg)
{
    return strnlen(t->name, sizeof(t->name)) == strlen(arg) &&
           strncmp(t->name, arg, sizeof(t->name)) == 0;
}

/*
 * Finds TENANT among the visible tenants (or at its path) and copies its ID
 * and path out. A name must match exactly one tenant: several (of one owner
 * or of several, such as a file another user made under a name of yours) are
 * listed and refused. Prints why on failure; returns a CLI exit status.
 */
static int find_tenant(const char *arg, char *id, size_t idlen, char *path, size_t pathlen)
{
    struct tenant_list l;
    size_t i, nmatch = 0, match = 0;
    int r;

    if (strchr(arg, '/')) {
        const char *base = strrchr(arg, '/') + 1;

        if (tenant_list_id(base, id, idlen) < 0)
            snprintf(id, idlen, "%s", base);
        if ((size_t)snprintf(path, pathlen, "%s", arg) >= pathlen) {
            gs_log_error("set: the path %s is too long", arg);
            return GS_EXIT_ERROR;
        }
        return GS_EXIT_OK;
    }
    if ((r = tenant_list_scan(&l, 0)) < 0) {
        gs_log_error("set: cannot read the run directory %s: %s (GPUSLICE_RUN_DIR must name a "
                     "directory you may list and search, default /dev/shm)",
                     gs_tenant_dir(), gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    for (i = 0; i < l.n && nmatch == 0; i++)
        if (strcmp(l.v[i].id, arg) == 0) {
            match = i;
            nmatch = 1;
        }
    if (nmatch == 0)
        for (i = 0; i < l.n; i++)
            if (name_is(l.v[i].t, arg) && nmatch++ == 0)
                match = i;
    if (nmatch == 0) {
        char file[PATH_MAX];
        struct gpuslice_tenant *t;
        uid_t owner;
        int e = -1;

        /* An ID whose file the listing left out: say why. */
        snprintf(file, sizeof(file), "%s/" GS_TENANT_PREFIX "%s" GS_TENANT_SUFFIX, gs_tenant_dir(),
                 arg);
        if (strchr(arg, '/') == NULL && access(file, F_OK) == 0 &&
            (e = gs_tenant_open_owned(file, 0, &owner, &t)) < 0)
            gs_log_error("set: cannot read the tenant \"%s\" (%s): %s", arg, file,
                         why_untrusted(e));
        else
            gs_log_error("set: no tenant with the ID or name \"%s\" in %s (see gpuslice "
                         "tenants%s)",
                         arg, gs_tenant_dir(),
                         l.skipped ? ", which also names the state files it skipped" : "");
        if (e == 0)
            gs_tenant_close(t);
        r = GS_EXIT_ERROR;
    } else if (nmatch > 1) {
        gs_log_error("set: %zu tenants are named \"%s\"; nothing changed: give the ID of the one "
                     "to change:",
                     nmatch, arg);
        for (i = 0; i < l.n; i++)
            if (name_is(l.v[i].t, arg)) {
                char sid[GS_TEXT_LEN(TENANT_ID_MAX)], owner[64];

                gs_text_safe(sid, sizeof(sid), l.v[i].id, strlen(l.v[i].id));
                owner_text(owner, sizeof(owner), l.v[i].owner);
                fprintf(stderr, "  %s  owned by %s\n", sid, owner);
            }
        r = GS_EXIT_ERROR;
    } else {
        snprintf(id, idlen, "%s", l.v[match].id);
        snprintf(path, pathlen, "%s", l.v[match].path);
        r = GS_EXIT_OK;
    }
    tenant_list_done(&l);
    return r;
}

/*
 * Refuses an index or UUID entry that names no device in use, for both
 * lists before either is applied, so that a refused command changes
 * nothing. Entries are never removed, so what passes here still holds in
 * gs_tenant_set().
 */
static int check_devices(const struct gpuslice_tenant *t, const struct gs_limits *l)
{
    char uuid[GS_UUID_STRLEN], used[512];
    const char *hint;
    size_t len = 0;
    int i, j, d, found, at[GS_MAX_LIMIT_ENTRIES];

    for (i = 0; l && i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];

        at[i] = -1;
        if (e->key == GS_KEY_ALL)
            continue;
        for (d = 0, found = 0; d < GPUSLICE_MAX_DEVICES && !found; d++) {
            if (!tenant_list_dev_in_use(&t->dev[d]))
                continue;
            gs_format_uuid(t->dev[d].uuid, uuid); /* the parser's "gpu-…" form */
            found =
                e->key == GS_KEY_INDEX ? t->dev[d].ordinal == e->index : strcmp(uuid, e->uuid) == 0;
            if (found)
                at[i] = d;
        }
        /* An index and the UUID of one GPU: which one would win? */
        for (j = 0; found && j < i; j++)
            if (at[j] == at[i]) {
                tenant_list_uuid(t->dev[at[i]].uuid, uuid);
                gs_log_error("set: %s: two entries name GPU %d (%s): give each GPU once", l->source,
                             (int)t->dev[at[i]].ordinal, uuid);
                return -EINVAL;
            }
        if (found)
            continue;
        used[0] = '\0';
        for (d = 0; d < GPUSLICE_MAX_DEVICES && len < sizeof(used); d++)
            if (tenant_list_dev_in_use(&t->dev[d])) {
                tenant_list_uuid(t->dev[d].uuid, uuid);
                len += (size_t)snprintf(used + len, sizeof(used) - len, "%s%d %s", len ? ", " : "",
                                        (int)t->dev[d].ordinal, uuid);
            }
        hint = len ? "it uses " : "it uses no GPU yet; give a bare value";
        if (e->key == GS_KEY_INDEX)
            gs_log_error("set: %s: the tenant uses no device with index %d (%s%s)", l->source,
                         e->index, hint, used);
        else {
            tenant_list_uuid_str(e->uuid, uuid);
            gs_log_error("set: %s: the tenant uses no device %s (%s%s)", l->source, uuid, hint,
                         used);
        }
        return -ENODEV;
    }
    return 0;
}

static void limit_text(char *out, size_t len, enum gs_set_kind kind, uint64_t v)
{
    if (kind == GS_SET_MEMORY && v)
        gs_format_size(v, out, len);
    else if (kind == GS_SET_COMPUTE && v && v < 100)
        snprintf(out, len, "%llu%%", (unsigned long long)v);
    else
        snprintf(out, len, "none");
}

/* What the tenant's limits are now, on stderr; the usage is its live processes'. */
static void report(const struct gpuslice_tenant *t, const char *who)
{
    char mem[32], lim[32], comp[32];
    int d, any = 0;

    for (d = 0; d < GPUSLICE_MAX_DEVICES; d++) {
        const struct gpuslice_tenant_device *dev = &t->dev[d];
        uint64_t limit = __atomic_load_n(&dev->mem_limit, __ATOMIC_RELAXED);
        uint64_t used = tenant_list_mem_used(t, d);
        char uuid[GS_UUID_STRLEN];

        if (!tenant_list_dev_in_use(dev))
            continue;
        any = 1;
        tenant_list_uuid(dev->uuid, uuid);
        limit_text(lim, sizeof(lim), GS_SET_MEMORY, limit);
        gs_format_size(used, mem, sizeof(mem));
        limit_text(comp, sizeof(comp), GS_SET_COMPUTE,
                   __atomic_load_n(&dev->compute_limit, __ATOMIC_RELAXED));
        gs_log_note("%s: GPU %d (%s): memory limit %s (%s in use), compute ceiling %s%s", who,
                    (int)dev->ordinal, uuid, lim, mem, comp,
                    limit && used > limit ? "; usage is above the limit: new allocations are "
                                            "refused until it falls under it"
                                          : "");
    }
    if (!any)
        gs_log_note("%s uses no GPU yet", who);
    {
        uint32_t p = __atomic_load_n(&t->priority, __ATOMIC_RELAXED);
        uint32_t w = __atomic_load_n(&t->weight, __ATOMIC_RELAXED);
        gs_log_note("%s: priority %s, weight %u", who,
                    gs_priority_name(p) ? gs_priority_name(p) : "normal",
                    w >= 1 && w <= GPUSLICE_WEIGHT_MAX ? w : 1);
    }
    if (t->set_flags & (GPUSLICE_SET_MEMORY | GPUSLICE_SET_COMPUTE)) {
        limit_text(lim, sizeof(lim), GS_SET_MEMORY, t->set_mem_limit);
        limit_text(comp, sizeof(comp), GS_SET_COMPUTE, t->set_compute_limit);
        gs_log_note("%s: GPUs it starts using from now on get%s%s%s%s%s", who,
                    t->set_flags & GPUSLICE_SET_MEMORY ? " memory limit " : "",
                    t->set_flags & GPUSLICE_SET_MEMORY ? lim : "",
                    (t->set_flags & GPUSLICE_SET_MEMORY) && (t->set_flags & GPUSLICE_SET_COMPUTE)
                        ? ","
                        : "",
                    t->set_flags & GPUSLICE_SET_COMPUTE ? " compute ceiling " : "",
                    t->set_flags & GPUSLICE_SET_COMPUTE ? comp : "");
    }
}

/* Appends "KEY": VALUE members for limits l to the JSON object text in buf. */
static void limits_members(char *buf, size_t len, const struct gs_limits *l)
{
    int i;

    for (i = 0; i < l->n; i++) {
        const struct gs_limit_entry *e = &l->e[i];
        size_t n = strlen(buf);
        char key[GS_UUID_STRLEN + 8];

        if (e->key == GS_KEY_ALL)
            snprintf(key, sizeof(key), "default");
        else if (e->key == GS_KEY_INDEX)
            snprintf(key, sizeof(key), "%d", e->index);
        else
            snprintf(key, sizeof(key), "%s", e->uuid);
        if (e->value)
            snprintf(buf + n, len - n, "%s\"%s\":%llu", i ? "," : "", key,
                     (unsigned long long)e->value);
        else
            snprintf(buf + n, len - n, "%s\"%s\":null", i ? "," : "", key);
    }
}

/*
 * With a daemon running, the change goes through it: it decides who may do what (its
 * socket names the caller). Returns the exit status, or -1 when the daemon does not know
 * the tenant (one of gpuslice run's in another run directory: changed in its file).
 */
static int set_by_daemon(const char *arg, const char *memory, const struct gs_limits *mem_l,
                         const char *compute, const struct gs_limits *comp_l, uint32_t prio,
                         uint32_t weight, int json)
{
    char body[8192], url[512], err[512], msg[1024], *answer = NULL;
    const char *c;
    int st;

    for (c = arg; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
              *c == '.' || *c == '_' || *c == '-'))
            return -1; /* a path, or a name the daemon cannot have */
    snprintf(body, sizeof(body), "{");
    if (memory) {
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "\"memory\":{");
        limits_members(body, sizeof(body), mem_l);
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "}");
    }
    if (compute) {
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "%s\"compute\":{",
                 memory ? "," : "");
        limits_members(body, sizeof(body), comp_l);
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "}");
    }
    if (prio)
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "%s\"priority\":\"%s\"",
                 body[1] ? "," : "", gs_priority_name(prio));
    if (weight)
        snprintf(body + strlen(body), sizeof(body) - strlen(body), "%s\"weight\":%u",
                 body[1] ? "," : "", weight);
    snprintf(body + strlen(body), sizeof(body) - strlen(body), "}");
    snprintf(url, sizeof(url), "/v1/tenants/%s", arg);
    if ((st = gs_daemon_request("PATCH", url, body, &answer, err, sizeof(err))) < 0)
        return -1;
    if (st == 404) {
        free(answer);
        return -1;
    }
    if (st != 200) {
        gs_daemon_error_message(answer, msg, sizeof(msg));
        gs_log_error("set: the daemon refused (HTTP %d): %s", st, msg);
        free(answer);
        return st == 400 ? GS_EXIT_USAGE : GS_EXIT_ERROR;
    }
    if (json) {
        printf("%s\n", answer);
    } else {
        char w[32] = "";

        if (weight)
            snprintf(w, sizeof(w), "%sweight %u", memory || compute || prio ? ", " : "", weight);
        gs_log_note("tenant %s: %s%s%s%s%s%s%s%s%s changed by the daemon", arg,
                    memory ? "memory " : "", memory ? memory : "", memory && compute ? ", " : "",
                    compute ? "compute " : "", compute ? compute : "",
                    (memory || compute) && prio ? ", " : "", prio ? "priority " : "",
                    prio ? gs_priority_name(prio) : "", w);
    }
    free(answer);
    return GS_EXIT_OK;
}

static int run_set(int argc, char **argv)
{
    static const struct option opts[] = {
        { "compute", required_argument, NULL, 'c' }, { "memory", required_argument, NULL, 'm' },
        { "quiet", no_argument, NULL, 'q' },         { "help", no_argument, NULL, 'h' },
        { "json", no_argument, NULL, 'j' },          { "priority", required_argument, NULL, 'R' },
        { "weight", required_argument, NULL, 'W' },  { NULL, 0, NULL, 0 }
    };
    const char *compute = NULL, *memory = NULL, *arg, *prio_arg = NULL, *weight_arg = NULL;
    uint32_t prio = 0, weight = 0;
    struct gs_limits mem_l, comp_l;
    struct gpuslice_tenant *t = NULL;
    char err[512], id[TENANT_ID_MAX], path[PATH_MAX];
    char who[GS_TEXT_LEN(TENANT_ID_MAX) + GS_TEXT_LEN(sizeof(t->name)) + 4];
    char shown_id[GS_TEXT_LEN(TENANT_ID_MAX)], shown_path[GS_TEXT_LEN(PATH_MAX)];
    uid_t owner, again;
    int c, r, json = 0;

    optind = 1;
    opterr = 0;
    /* Options may follow TENANT. */
    while ((c = getopt_long(argc, argv, ":c:m:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            compute = optarg;
            break;
        case 'm':
            memory = optarg;
            break;
        case 'R':
            prio_arg = optarg;
            break;
        case 'W':
            weight_arg = optarg;
            break;
        default:
            if ((r = gs_cli_common_option("set", c, argv, opts, set_usage, &json)) >= 0)
                return r;
        }
    }
    if (optind >= argc) {
        gs_log_error("set: no tenant given (usage: gpuslice set TENANT [--compute PERCENT] "
                     "[--memory SIZE])");
        return GS_EXIT_USAGE;
    }
    if (optind + 1 < argc) {
        gs_log_error("set: one tenant at a time (got \"%s\" and \"%s\")", argv[optind],
                     argv[optind + 1]);
        return GS_EXIT_USAGE;
    }
    arg = argv[optind];
    if (!compute && !memory && !prio_arg && !weight_arg) {
        gs_log_error("set: nothing to change: give --compute PERCENT, --memory SIZE, --priority "
                     "CLASS or --weight N");
        return GS_EXIT_USAGE;
    }
    if (prio_arg && gs_parse_priority(prio_arg, &prio) < 0) {
        gs_log_error("set: --priority: \"%s\" is not a priority class (use latency, normal or "
                     "background)",
                     prio_arg);
        return GS_EXIT_USAGE;
    }
    if (weight_arg && gs_parse_weight(weight_arg, &weight) < 0) {
        gs_log_error("set: --weight: \"%s\" is not a weight (use an integer from 1 to %u)",
                     weight_arg, GPUSLICE_WEIGHT_MAX);
        return GS_EXIT_USAGE;
    }
    if ((memory && parse_value(memory, GS_VALUE_SIZE, "--memory", &mem_l, err, sizeof(err)) < 0) ||
        (compute &&
         parse_value(compute, GS_VALUE_PERCENT, "--compute", &comp_l, err, sizeof(err)) < 0)) {
        gs_log_error("%s; none removes the limit", err);
        return GS_EXIT_USAGE;
    }
    if (gs_daemon_running() &&
        (r = set_by_daemon(arg, memory, &mem_l, compute, &comp_l, prio, weight, json)) >= 0)
        return r;
    if ((r = find_tenant(arg, id, sizeof(id), path, sizeof(path))) != GS_EXIT_OK)
        return r;
    gs_text_safe(shown_id, sizeof(shown_id), id, strlen(id));
    gs_text_safe(shown_path, sizeof(shown_path), path, strlen(path));
    /*
     * Look before asking for write access, for a clear refusal. The owner is
     * the file's (fstat): its header's owner_uid is whatever its writer put
     * there, and a file others may write is refused (gs_tenant_open_owned).
     */
    if ((r = gs_tenant_open_owned(path, 0, &owner, &t)) < 0) {
        gs_log_error("set: cannot read the tenant %s (%s): %s", shown_id, shown_path,
                     why_untrusted(r));
        return GS_EXIT_ERROR;
    }
    if (t->node_tenant != 0) {
        gs_log_error("set: tenant %s (%s) is the daemon's: its limits change through gpusliced, "
                     "which does not answer",
                     shown_id, shown_path);
        gs_tenant_close(t);
        return GS_EXIT_ERROR;
    }
    gs_tenant_close(t);
    t = NULL;
    if (getuid() != 0 && owner != getuid()) {
        owner_text(err, sizeof(err), owner);
        gs_log_error("permission denied: tenant %s belongs to %s; only its owner and root may "
                     "change it",
                     shown_id, err);
        return GS_EXIT_ERROR;
    }
    if ((r = gs_tenant_open_owned(path, 1, &again, &t)) < 0) {
        if (r == GS_EABI)
            gs_log_error("set: the tenant %s (%s) was made by another version of gpuslice "
                         "(its state file has another layout: this version may read an older "
                         "one but writes only its own); change it with the gpuslice that "
                         "started it, or restart it under this one",
                         shown_id, shown_path);
        else
            gs_log_error("set: cannot open the tenant %s (%s) for writing: %s", shown_id,
                         shown_path, gs_strerror(r));
        return GS_EXIT_ERROR;
    }
    if (again != owner) { /* replaced between the two opens */
        gs_log_error("set: the tenant %s (%s) changed owner while being opened; nothing changed",
                     shown_id, shown_path);
        gs_tenant_close(t);
        return GS_EXIT_ERROR;
    }
    describe(who, sizeof(who), id, t);
    if ((r = check_devices(t, memory ? &mem_l : NULL)) < 0 ||
        (r = check_devices(t, compute ? &comp_l : NULL)) < 0) {
        gs_tenant_close(t);
        return r == -EINVAL ? GS_EXIT_USAGE : GS_EXIT_ERROR;
    }
    if ((memory && (r = gs_tenant_set(t, GS_SET_MEMORY, &mem_l, err, sizeof(err))) < 0) ||
        (compute && (r = gs_tenant_set(t, GS_SET_COMPUTE, &comp_l, err, sizeof(err))) < 0)) {
        gs_log_error("set: %s", err);
        gs_tenant_close(t);
        return GS_EXIT_ERROR;
    }
    gs_tenant_set_sched(t, prio, weight);
    report(t, who);
    if (json) {
        /* The same object gpuslice tenants --json lists for it (compute use not measured). */
        struct tenant_entry e;
        struct tview v;
        struct tview_list one = { .v = &v, .n = 1 };

        memset(&e, 0, sizeof(e));
        snprintf(e.id, sizeof(e.id), "%s", id);
        snprintf(e.path, sizeof(e.path), "%s", path);
        e.owner = owner;
        e.t = t;
        tview_from_entry(&v, &e);
        printf("{\"tenants\":");
        tview_json(stdout, &one);
        printf("}\n");
    }
    gs_tenant_close(t);
    return GS_EXIT_OK;
}

const struct gs_cmd gs_cmd_set = { "set", "change a running tenant's limits", run_set, set_usage };
