/*
 * Finding the tenants in the run directory for `gpuslice tenants`, `set` and
 * `info`, and showing what their files hold. The directory may be shared by
 * every user (/dev/shm), so a file found there is trusted only as far as
 * gs_tenant_open_owned() vouches for it: its owner is the file's real owner,
 * and every string in it is escaped before it reaches a terminal.
 */
#define _GNU_SOURCE
#include "control/tenants.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>

#include "common/text.h"
#include "control/log.h"
#include "common/error.h"
#include "common/parse.h"
#include "common/shm.h"
#include "common/tenant.h"

int tenant_list_id(const char *base, char *id, size_t len)
{
    const size_t plen = strlen(GS_TENANT_PREFIX), slen = strlen(GS_TENANT_SUFFIX);
    size_t n = strlen(base);

    if (n <= plen + slen || strncmp(base, GS_TENANT_PREFIX, plen) != 0 ||
        strcmp(base + n - slen, GS_TENANT_SUFFIX) != 0 || n - plen - slen >= len)
        return -EINVAL;
    memcpy(id, base + plen, n - plen - slen);
    id[n - plen - slen] = '\0';
    return 0;
}

int tenant_list_pids(const struct gpuslice_tenant *t, int *pids, int max)
{
    pid_t seen[GPUSLICE_MAX_PROCS];
    int i, n = 0;

    /* As the interposer's reaping judges it: start time, PID namespace (common/proc.h). */
    gs_tenant_procs_alive(t, seen);
    for (i = 0; i < GPUSLICE_MAX_PROCS; i++) {
        if (seen[i] == 0)
            continue;
        if (n < max)
            pids[n] = seen[i] > 0 ? seen[i] : 0;
        n++;
    }
    return n;
}

int tenant_list_live(const struct gpuslice_tenant *t)
{
    if (gs_tenant_creator_alive(t))
        return 1;
    return tenant_list_pids(t, NULL, 0) > 0;
}

int tenant_list_dev_in_use(const struct gpuslice_tenant_device *d)
{
    static const uint8_t zero[16];

    return memcmp(d->uuid, zero, sizeof(zero)) != 0;
}

uint64_t tenant_list_mem_used(const struct gpuslice_tenant *t, int dev)
{
    /*
     * Not dev->mem_used: that total keeps a dead process's charge until
     * someone reaps it, which nobody does once gpuslice run is gone.
     */
    return gs_tenant_live_mem_used(t, dev);
}

void tenant_list_uuid(const uint8_t raw[16], char out[GS_UUID_STRLEN])
{
    gs_format_uuid(raw, out);
    memcpy(out, "GPU", 3);
}

void tenant_list_uuid_str(const char *uuid, char out[GS_UUID_STRLEN])
{
    size_t i;

    snprintf(out, GS_UUID_STRLEN, "%s", uuid);
    if (strncasecmp(out, "gpu-", 4) != 0)
        return;
    memcpy(out, "GPU", 3);
    for (i = 4; out[i]; i++)
        if (out[i] >= 'A' && out[i] <= 'F')
            out[i] = (char)(out[i] - 'A' + 'a');
}

void tenant_list_name(const struct gpuslice_tenant *t, char *out, size_t len)
{
    size_t n = strnlen(t->name, sizeof(t->name));

    if (len == 0)
        return;
    if (n >= len)
        n = len - 1;
    memcpy(out, t->name, n);
    out[n] = '\0';
}

/* Opens one file; a file caught between creation and initialisation gets a second look. */
static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static int open_one(const char *path, uid_t *owner, struct gpuslice_tenant **t)
{
    struct timespec pause = { 0, 20 * 1000 * 1000 };
    int r = gs_tenant_open_owned(path, 0, owner, t);

    if (r == GS_EABI) {
        nanosleep(&pause, NULL);
        r = gs_tenant_open_owned(path, 0, owner, t);
    }
    return r;
}

/* Why a file is not listed, for the warning. */
static void skip_reason(int r, const char *path, const struct stat *st, char *out, size_t len)
{
    char why[600];

    if (r == GS_EUNSAFE)
        snprintf(out, len,
                 "it is writable by group or others (mode %04o), so anyone could have written "
                 "it; a tenant's file is its owner's alone (mode 0600)",
                 (unsigned)(st->st_mode & 07777));
    else if (r == GS_EABI &&
             gs_shm_check_file(path, GPUSLICE_TENANT_MAGIC, GPUSLICE_TENANT_ABI_MAJOR,
                               sizeof(struct gpuslice_tenant), "tenant", why, sizeof(why)) < 0) {
        /* The message names the file; the warning names it already. */
        const char *m = strncmp(why, path, strlen(path)) == 0 && why[strlen(path)] == ':'
                            ? why + strlen(path) + 2
                            : why;
        size_t n = strlen(m);

        if (len == 0)
            return;
        n = n < len - 1 ? n : len - 1;
        memcpy(out, m, n);
        out[n] = '\0';
    } else if (r == GS_EOWNER)
        snprintf(out, len,
                 "its contents name another owner than the file's (uid %u), so whoever wrote it "
                 "could pass it off as another user's; it is no tenant to trust",
                 (unsigned)st->st_uid);
    else if (r == GS_EABI)
        snprintf(out, len, "not a tenant's file (tenant ABI %u.x)",
                 (unsigned)GPUSLICE_TENANT_ABI_MAJOR);
    else
        snprintf(out, len, "%s", gs_strerror(r));
}

static int by_age(const void *a, const void *b)
{
    const struct tenant_entry *x = a, *y = b;

    if (x->t->created_unix_ns != y->t->created_unix_ns)
        return x->t->created_unix_ns < y->t->created_unix_ns ? -1 : 1;
    return strcmp(x->id, y->id);
}

/* A file of the run directory that may be read: its name, owner and when it changed. */
struct candidate {
    char name[256];
    uid_t uid;
    struct stat st;
    int take;
};

/* Oldest first (by the inode's change, the file's making as far as a listing can tell). */
static int by_ctime(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;

    if (x->st.st_ctim.tv_sec != y->st.st_ctim.tv_sec)
        return x->st.st_ctim.tv_sec < y->st.st_ctim.tv_sec ? -1 : 1;
    if (x->st.st_ctim.tv_nsec != y->st.st_ctim.tv_nsec)
        return x->st.st_ctim.tv_nsec < y->st.st_ctim.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/*
 * Which of the n candidates are read: each owner's TENANT_LIST_FAIR oldest first, then the
 * others oldest first, each owner at most TENANT_LIST_PER_OWNER, all at most TENANT_LIST_MAX.
 * What anyone plants in the run directory so costs a reader a bounded amount of work, and no
 * one's files push another user's first ones out. Returns how many are taken.
 */
static size_t choose(struct candidate *v, size_t n)
{
    size_t i, k, taken = 0;
    int round;

    if (n > 1)
        qsort(v, n, sizeof(v[0]), by_ctime);
    for (round = 0; round < 2; round++)
        for (i = 0; i < n && taken < TENANT_LIST_MAX; i++) {
            size_t before = 0;

            if (v[i].take)
                continue;
            for (k = 0; k < i; k++)
                before += v[k].uid == v[i].uid;
            if (before >= (round ? TENANT_LIST_PER_OWNER : TENANT_LIST_FAIR))
                continue;
            v[i].take = 1;
            taken++;
        }
    return taken;
}

int tenant_list_scan(struct tenant_list *l, int warn)
{
    const char *dir = gs_tenant_dir();
    struct dirent *de;
    struct candidate *cands = NULL;
    size_t cap = 0, ncand = 0, candcap = 0, i, unread = 0;
    DIR *d;
    int r = 0;

    l->v = NULL;
    l->n = 0;
    l->skipped = 0;
    l->over_owner = 0;
    if ((d = opendir(dir)) == NULL)
        return errno == ENOENT ? 0 : -errno;
    /* First the names and owners, reading nothing: anyone may put files here. */
    for (;;) {
        char id[sizeof(l->v[0].id)], path[PATH_MAX];
        struct stat st;

        errno = 0;
        if ((de = readdir(d)) == NULL) {
            r = -errno; /* 0 at the end */
            break;
        }
        if (tenant_list_id(de->d_name, id, sizeof(id)) < 0 || strlen(de->d_name) >= 256)
            continue;
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >= sizeof(path))
            continue;
        /* Anyone may create files here: opening a FIFO would block. */
        if (lstat(path, &st) < 0) {
            if (errno == ENOENT)
                continue; /* gone meanwhile */
            r = -errno;   /* the directory can be listed but not searched */
            break;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        if (ncand == TENANT_LIST_NAMES) {
            unread++; /* the names kept are bounded too */
            continue;
        }
        if (ncand == candcap) {
            size_t ncap = candcap ? candcap * 2 : 64;
            struct candidate *nv = realloc(cands, ncap * sizeof(*nv));

            if (nv == NULL) {
                r = -ENOMEM;
                break;
            }
            cands = nv;
            candcap = ncap;
        }
        snprintf(cands[ncand].name, sizeof(cands[ncand].name), "%s", de->d_name);
        cands[ncand].uid = st.st_uid;
        cands[ncand].st = st;
        cands[ncand].take = 0;
        ncand++;
    }
    closedir(d);
    if (r < 0) {
        free(cands);
        return r;
    }
    unread += ncand - choose(cands, ncand);
    l->over_owner = unread;
    if (unread && warn)
        gs_log_error("warning: %s holds more tenant files than a listing reads (at most %d, %d "
                     "of one owner): %zu left unread",
                     dir, TENANT_LIST_MAX, TENANT_LIST_PER_OWNER, unread);
    /* Then the files chosen. */
    for (i = 0; i < ncand; i++) {
        struct tenant_entry e;

        if (!cands[i].take)
            continue;
        tenant_list_id(cands[i].name, e.id, sizeof(e.id));
        snprintf(e.path, sizeof(e.path), "%s/%s", dir, cands[i].name);
        e.read_ns = mono_ns(); /* before: a change made after this is not in the copy */
        r = open_one(e.path, &e.owner, &e.t);
        if (r < 0) {
            /* Another user's own file (mode 0600) is theirs to hide. */
            if (r != -EACCES && r != -ENOENT) {
                char why[256], shown[GS_TEXT_LEN(PATH_MAX)];

                l->skipped++;
                skip_reason(r, e.path, &cands[i].st, why, sizeof(why));
                gs_text_safe(shown, sizeof(shown), e.path, strlen(e.path));
                if (warn)
                    gs_log_error("warning: skipping %s: %s", shown, why);
            }
            r = 0;
            continue;
        }
        if (!tenant_list_live(e.t)) {
            gs_tenant_close(e.t);
            continue;
        }
        if (l->n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct tenant_entry *nv = realloc(l->v, ncap * sizeof(*nv));

            if (nv == NULL) {
                gs_tenant_close(e.t);
                r = -ENOMEM;
                break;
            }
            l->v = nv;
            cap = ncap;
        }
        l->v[l->n++] = e;
    }
    free(cands);
    if (r < 0) {
        tenant_list_done(l);
        return r;
    }
    if (l->n > 1)
        qsort(l->v, l->n, sizeof(l->v[0]), by_age);
    return 0;
}

void tenant_list_done(struct tenant_list *l)
{
    size_t i;

    if (l == NULL)
        return;
    for (i = 0; i < l->n; i++)
        gs_tenant_close(l->v[i].t);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

uint32_t tenant_list_ceiling(const struct gpuslice_tenant_device *d)
{
    uint32_t c = __atomic_load_n(&d->compute_limit, __ATOMIC_RELAXED);

    return c >= 100 ? 0 : c;
}
