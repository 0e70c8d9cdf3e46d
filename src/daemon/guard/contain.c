/*
 * Managed tenants' own cgroups (tenant-cgroup): each managed tenant that is not a pod gets a
 * cgroup v2 directory, DIR/t<id>, and a process that joins it (gpuslice run --tenant) is
 * moved there before its program starts. What that process starts is then the tenant's by a
 * fact the kernel keeps: a process cannot leave a cgroup without write access to a common
 * ancestor's cgroup.procs, which only root has here (DIR is root's, 0755). Lineage alone could
 * be escaped: a program that kills its own gpuslice run (same user) is re-parented to init,
 * out of every member's line. The guard attributes by this cgroup first, freezes through its
 * cgroup.freeze (which the tenant cannot undo, as it could SIGSTOP), and a tenant's processes
 * are counted from its cgroup.procs.
 *
 * Off (lineage only) unless tenant-cgroup names a directory of a cgroup v2 hierarchy.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/daemon.h"
#include "daemon/guard/guard.h"

static char dir[PATH_MAX]; /* DIR, as this mount namespace names it; "" when off */
static char rel[PATH_MAX]; /* DIR as /proc/PID/cgroup names it (from the hierarchy's root) */

int gd_contain_enabled(void)
{
    return dir[0] != '\0';
}

/* The cgroup2 mount that holds path, its mount point into mnt; 0 or -ENOENT. */
static int mount_of(const char *path, char *mnt, size_t len)
{
    char line[2048], dev[256], mp[PATH_MAX], type[64];
    FILE *f = fopen("/proc/self/mounts", "re");
    size_t best = 0;

    if (f == NULL)
        return -errno;
    while (fgets(line, sizeof(line), f)) {
        size_t n;

        if (sscanf(line, "%255s %4095s %63s", dev, mp, type) != 3 || strcmp(type, "cgroup2"))
            continue;
        n = strlen(mp);
        if (strncmp(path, mp, n) == 0 && (path[n] == '/' || path[n] == '\0' || n == 1) &&
            n >= best && n < len) {
            snprintf(mnt, len, "%s", mp);
            best = n;
        }
    }
    fclose(f);
    return best ? 0 : -ENOENT;
}

int gd_contain_start(char *err, size_t errlen)
{
    char mnt[PATH_MAX], probe[PATH_MAX + 16];
    struct stat st;

    dir[0] = rel[0] = '\0';
    if (gd_opt.tenant_cgroup[0] == '\0') {
        gd_log("managed tenants are found by their lineage only (no tenant-cgroup): a process "
               "that leaves it, by killing its gpuslice run, is not held by the guard");
        return 0;
    }
    if (gd_opt.tenant_cgroup[0] != '/' || mount_of(gd_opt.tenant_cgroup, mnt, sizeof(mnt)) < 0) {
        snprintf(err, errlen,
                 "tenant-cgroup: %s is not a directory of a cgroup v2 hierarchy (give e.g. "
                 "/sys/fs/cgroup/gpuslice)",
                 gd_opt.tenant_cgroup);
        return -1;
    }
    if (mkdir(gd_opt.tenant_cgroup, 0755) < 0 && errno != EEXIST) {
        snprintf(err, errlen, "tenant-cgroup: cannot make %s: %s", gd_opt.tenant_cgroup,
                 strerror(errno));
        return -1;
    }
    snprintf(probe, sizeof(probe), "%s/cgroup.procs", gd_opt.tenant_cgroup);
    if (lstat(gd_opt.tenant_cgroup, &st) < 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
        (st.st_mode & 022) || access(probe, W_OK) < 0) {
        snprintf(err, errlen,
                 "tenant-cgroup: %s must be a cgroup directory of the daemon's user that only it "
                 "may write (a user who could write it could move processes out of a tenant)",
                 gd_opt.tenant_cgroup);
        return -1;
    }
    snprintf(dir, sizeof(dir), "%s", gd_opt.tenant_cgroup);
    snprintf(rel, sizeof(rel), "%s", strcmp(mnt, "/") ? dir + strlen(mnt) : dir);
    if (rel[0] == '\0')
        snprintf(rel, sizeof(rel), "/");
    gd_log("managed tenants each get a cgroup under %s", dir);
    return 0;
}

static void path_of(uint32_t id, const char *file, char *out, size_t len)
{
    snprintf(out, len, "%s/t%u%s%s", dir, id, file ? "/" : "", file ? file : "");
}

int gd_contain_make(uint32_t id, char *err, size_t errlen)
{
    char p[PATH_MAX + 32];

    if (!dir[0])
        return 0;
    path_of(id, NULL, p, sizeof(p));
    if (mkdir(p, 0755) < 0 && errno != EEXIST) {
        int r = -errno;

        snprintf(err, errlen, "cannot make its cgroup %s: %s", p, strerror(errno));
        return r;
    }
    return 0;
}

void gd_contain_end(uint32_t id)
{
    char p[PATH_MAX + 32];

    if (!dir[0])
        return;
    /* Thawed first: a frozen cgroup's processes would never go. */
    gd_contain_freeze(id, 0);
    path_of(id, NULL, p, sizeof(p));
    if (rmdir(p) < 0 && errno != ENOENT && errno != EBUSY)
        gd_log("cannot remove the cgroup %s: %s", p, strerror(errno));
}

void gd_contain_sweep(const uint32_t *live, int n)
{
    char p[PATH_MAX + 300];
    struct dirent *e;
    DIR *d;

    if (!dir[0] || (d = opendir(dir)) == NULL)
        return;
    /* A tenant's cgroup whose processes outlived it goes once they are gone. */
    while ((e = readdir(d)) != NULL) {
        char *end;
        unsigned long id;
        int k, keep = 0;

        if (e->d_name[0] != 't')
            continue;
        id = strtoul(e->d_name + 1, &end, 10);
        if (*end || end == e->d_name + 1)
            continue;
        for (k = 0; k < n && !keep; k++)
            keep = live[k] == id;
        if (keep)
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
        rmdir(p); /* EBUSY while processes of it live: tried again at the next sweep */
    }
    closedir(d);
}

int gd_contain_join(uint32_t id, pid_t pid, char *err, size_t errlen)
{
    char p[PATH_MAX + 48], num[32];
    int fd, n, r = 0;

    if (!dir[0])
        return 0;
    path_of(id, "cgroup.procs", p, sizeof(p));
    if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0) {
        r = -errno;
        snprintf(err, errlen, "its cgroup %s: %s", p, strerror(errno));
        return r;
    }
    n = snprintf(num, sizeof(num), "%d", (int)pid);
    if (write(fd, num, (size_t)n) != n) {
        r = -errno;
        snprintf(err, errlen, "cannot move process %d into its cgroup %s: %s", (int)pid, p,
                 strerror(errno));
    }
    close(fd);
    return r;
}

uint32_t gd_contain_of(const char *cg)
{
    const char *p = cg, *e;
    size_t n = strlen(rel);

    if (!dir[0])
        return 0;
    /* The cgroup v2 line: "0::PATH". */
    for (; p && *p; p = (e = strchr(p, '\n')) ? e + 1 : NULL)
        if (strncmp(p, "0::", 3) == 0) {
            char *end;
            unsigned long id;

            p += 3;
            if (strcmp(rel, "/") == 0)
                n = 0;
            if (strncmp(p, rel, n) != 0 || strncmp(p + n, "/t", 2) != 0)
                return 0;
            id = strtoul(p + n + 2, &end, 10);
            if (end == p + n + 2 || (*end != '/' && *end != '\n' && *end != '\0'))
                return 0;
            return id > 0 && id <= UINT32_MAX ? (uint32_t)id : 0;
        }
    return 0;
}

int gd_contain_procs(uint32_t id, pid_t *pids, int max)
{
    char p[PATH_MAX + 48];
    FILE *f;
    int pid, n = 0;

    if (!dir[0])
        return 0;
    path_of(id, "cgroup.procs", p, sizeof(p));
    if ((f = fopen(p, "re")) == NULL)
        return 0;
    while (fscanf(f, "%d", &pid) == 1) {
        if (n < max)
            pids[n] = pid;
        n++;
    }
    fclose(f);
    return n;
}

int gd_contain_freeze(uint32_t id, int on)
{
    char p[PATH_MAX + 48];
    int fd, r = 0;

    if (!dir[0])
        return -ENOENT;
    path_of(id, "cgroup.freeze", p, sizeof(p));
    if ((fd = open(p, O_WRONLY | O_CLOEXEC)) < 0)
        return -errno;
    if (write(fd, on ? "1" : "0", 1) != 1)
        r = -errno;
    close(fd);
    return r;
}
