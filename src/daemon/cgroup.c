/*
 * Which pod and container a process runs in, from its /proc/PID/cgroup. The
 * kubelet names a pod's cgroup after the pod's UID and a container's after
 * its ID, with either of its cgroup drivers:
 *
 *   cgroupfs: /kubepods/burstable/pod<uid>/<container id>
 *   systemd:  /kubepods.slice/kubepods-burstable.slice/
 *             kubepods-burstable-pod<uid, '-' as '_'>.slice/cri-containerd-<id>.scope
 *
 * (docker-<id>.scope and crio-<id>.scope as well), from the root of the
 * hierarchy. A process cannot move itself into another pod's cgroup without
 * write access to the kubelet's part of the tree, which neither a pod's
 * containers nor a user with a delegated subtree of their own have: this, not
 * its environment, says which pod it belongs to.
 *
 * The kernel prints those paths relative to the reader's cgroup namespace
 * root, in each hierarchy, climbing with ".." to the common ancestor of the
 * two. The shipped DaemonSet on cgroup v2 runs in a namespace of its own
 * (containerd and CRI-O give every non-privileged container one), rooted at
 * its container's cgroup: it reads another pod's process as
 * "0::/../../../burstable/pod<uid>/<id>". Its root's names are not visible
 * from inside; they are found once in the host's tree (gd_cgroup_ns_find:
 * the one directory whose cgroup.procs lists the daemon's own PID), and every
 * path read is then placed from the hierarchy's root before it is anchored
 * exactly as a host reader's would be. A path that cannot be placed is never
 * guessed at.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/cgroup.h"

static int hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/* A pod UID at s (36 characters, '-' or '_' where a UUID has '-'), into uid; 1 or 0. */
static int take_uid(const char *s, size_t n, char uid[GD_POD_UID_LEN])
{
    int i;

    if (n < 36)
        return 0;
    for (i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-' && s[i] != '_')
                return 0;
            uid[i] = '-';
        } else if (hex(s[i])) {
            uid[i] = s[i];
        } else {
            return 0;
        }
    }
    uid[36] = '\0';
    return 1;
}

/*
 * A path component naming a pod: "pod<uid>" (cgroupfs) or "…-pod<uid>.slice" (systemd), and
 * nothing after the UID but ".slice".
 */
static int pod_component(const char *c, size_t n, char uid[GD_POD_UID_LEN])
{
    size_t i;

    if (n > 6 && memcmp(c + n - 6, ".slice", 6) == 0)
        n -= 6;
    for (i = 0; i + 3 + 36 <= n; i++) {
        if ((i == 0 || c[i - 1] == '-') && memcmp(c + i, "pod", 3) == 0 && i + 3 + 36 == n)
            return take_uid(c + i + 3, 36, uid);
    }
    return 0;
}

/* A container's component: "<id>", "cri-containerd-<id>.scope", "docker-…", "crio-…". */
static int container_component(const char *c, size_t n, char cid[GD_CONTAINER_ID_LEN])
{
    static const char *const prefix[] = { "cri-containerd-", "docker-", "crio-" };
    size_t i, k;

    if (n > 6 && memcmp(c + n - 6, ".scope", 6) == 0) {
        n -= 6;
        for (k = 0; k < sizeof(prefix) / sizeof(prefix[0]); k++) {
            size_t pl = strlen(prefix[k]);

            if (n > pl && memcmp(c, prefix[k], pl) == 0) {
                c += pl;
                n -= pl;
                break;
            }
        }
        if (k == sizeof(prefix) / sizeof(prefix[0]))
            return 0;
    }
    if (n == 0 || n >= GD_CONTAINER_ID_LEN)
        return 0;
    for (i = 0; i < n; i++)
        if (!hex(c[i]))
            return 0;
    memcpy(cid, c, n);
    cid[n] = '\0';
    return 1;
}

/* The next component of p at *i (n bytes in all): its start and length, *i past it; 0 at the end. */
static int next_component(const char *p, size_t n, size_t *i, const char **c, size_t *len)
{
    size_t j;

    while (*i < n && p[*i] == '/')
        (*i)++;
    for (j = *i; j < n && p[j] != '/'; j++)
        ;
    *c = p + *i;
    *len = j - *i;
    *i = j;
    return *len > 0;
}

static int is(const char *c, size_t n, const char *s)
{
    return n == strlen(s) && memcmp(c, s, n) == 0;
}

/*
 * One line's path (after "ID:CONTROLLERS:"): 1 with uid (and cid, maybe empty), or 0. The pod
 * must be where the kubelet puts pods, from the hierarchy's root: kubepods (cgroupfs) or
 * kubepods.slice (systemd), or kubelet.slice/kubelet-kubepods.slice (a kubelet run with
 * --cgroup-root=/kubelet, as kind and k3s in containers do), then a QoS class or none, then
 * the pod. A cgroup a user made in a tree delegated to them (user.slice/…) is not a pod's,
 * whatever its name.
 */
static int from_path(const char *p, size_t n, char uid[GD_POD_UID_LEN],
                     char cid[GD_CONTAINER_ID_LEN])
{
    const char *c;
    size_t i = 0, len;

    if (!next_component(p, n, &i, &c, &len))
        return 0;
    if (is(c, len, "kubelet.slice")) {
        if (!next_component(p, n, &i, &c, &len) || !is(c, len, "kubelet-kubepods.slice"))
            return 0;
    } else if (!is(c, len, "kubepods") && !is(c, len, "kubepods.slice")) {
        return 0;
    }
    if (!next_component(p, n, &i, &c, &len))
        return 0;
    if (is(c, len, "besteffort") || is(c, len, "burstable") ||
        is(c, len, "kubepods-besteffort.slice") || is(c, len, "kubepods-burstable.slice") ||
        is(c, len, "kubelet-kubepods-besteffort.slice") ||
        is(c, len, "kubelet-kubepods-burstable.slice")) {
        if (!next_component(p, n, &i, &c, &len))
            return 0;
    }
    if (!pod_component(c, len, uid))
        return 0;
    cid[0] = '\0';
    if (next_component(p, n, &i, &c, &len) && !container_component(c, len, cid))
        cid[0] = '\0';
    return 1;
}

/*
 * Places path (n bytes, as a line of /proc/PID/cgroup gives it) under root (the reader's
 * namespace root in that hierarchy, from the hierarchy's root; NULL: the hierarchy's root),
 * into out: the path from the hierarchy's root. 0, or GD_CGROUP_UNPLACED: ".." after a name,
 * more ".." than root is deep, "." or a path that does not fit.
 */
static int place(const char *root, const char *path, size_t n, char *out, size_t outlen)
{
    const char *c;
    size_t i = 0, len, k = 0, keep, o = 0;
    int names = 0;

    /* Leading "..": how far above root; after a name, not something the kernel writes. */
    while (next_component(path, n, &i, &c, &len)) {
        if (is(c, len, "..")) {
            if (names)
                return GD_CGROUP_UNPLACED;
            k++;
        } else if (is(c, len, ".")) {
            return GD_CGROUP_UNPLACED;
        } else {
            names = 1;
        }
    }
    /* root less its last k components. */
    keep = root ? strlen(root) : 0;
    for (; k > 0; k--) {
        if (keep == 0)
            return GD_CGROUP_UNPLACED; /* above the hierarchy's root */
        while (keep > 0 && root[keep - 1] != '/')
            keep--;
        if (keep > 0)
            keep--; /* the '/' before it */
    }
    if (keep + 1 > outlen)
        return GD_CGROUP_UNPLACED;
    if (keep)
        memcpy(out, root, keep);
    o = keep;
    i = 0;
    while (next_component(path, n, &i, &c, &len)) {
        if (is(c, len, ".."))
            continue;
        if (o + 1 + len + 1 > outlen)
            return GD_CGROUP_UNPLACED;
        out[o++] = '/';
        memcpy(out + o, c, len);
        o += len;
    }
    out[o] = '\0';
    return 0;
}

/* The root of the hierarchy of line (id, ctrl) in ns, or NULL when ns has none. */
static const char *ns_root(const struct gd_cgroup_ns *ns, const char *id, size_t idlen,
                           const char *ctrl, size_t ctrllen)
{
    int i;

    for (i = 0; i < ns->n; i++) {
        char num[16];

        snprintf(num, sizeof(num), "%d", ns->h[i].id);
        if (is(id, idlen, num) && ctrllen == strlen(ns->h[i].ctrl) &&
            memcmp(ctrl, ns->h[i].ctrl, ctrllen) == 0)
            return ns->h[i].root;
    }
    return NULL;
}

/* A line of /proc/PID/cgroup: "ID:CONTROLLERS:PATH". */
struct line {
    const char *id, *ctrl, *path;
    size_t idlen, ctrllen, pathlen;
};

/* The next line of text at *i: its fields; 0 at the end. Lines without two colons are skipped. */
static int next_line(const char *text, size_t len, size_t *i, struct line *l)
{
    while (*i < len) {
        size_t e, c1, c2, start = *i;

        for (e = start; e < len && text[e] != '\n'; e++)
            ;
        *i = e + 1;
        for (c1 = start; c1 < e && text[c1] != ':'; c1++)
            ;
        for (c2 = c1 + 1; c2 < e && text[c2] != ':'; c2++)
            ;
        if (c2 >= e)
            continue;
        l->id = text + start;
        l->idlen = c1 - start;
        l->ctrl = text + c1 + 1;
        l->ctrllen = c2 - c1 - 1;
        l->path = text + c2 + 1;
        l->pathlen = e - c2 - 1;
        return 1;
    }
    return 0;
}

/* Line l placed from its hierarchy's root into out; 0 or GD_CGROUP_UNPLACED. */
static int place_line(const struct gd_cgroup_ns *ns, const struct line *l, char *out, size_t outlen)
{
    const char *root = NULL;

    if (ns && (root = ns_root(ns, l->id, l->idlen, l->ctrl, l->ctrllen)) == NULL)
        return GD_CGROUP_UNPLACED; /* a hierarchy the reader's namespace was not found in */
    return place(root, l->path, l->pathlen, out, outlen);
}

int gd_cgroup_pod_in(const struct gd_cgroup_ns *ns, const char *text, size_t len,
                     char uid[GD_POD_UID_LEN], char cid[GD_CONTAINER_ID_LEN])
{
    size_t i = 0;
    int found = 0, conflict = 0;
    char u[GD_POD_UID_LEN], c[GD_CONTAINER_ID_LEN], abs[2 * GD_CGROUP_ROOT_LEN + 4096];
    struct line l;

    uid[0] = cid[0] = '\0';
    while (next_line(text, len, &i, &l)) {
        /* One line that cannot be placed: nothing is known of the others' agreement. */
        if (place_line(ns, &l, abs, sizeof(abs)) < 0) {
            uid[0] = cid[0] = '\0';
            return GD_CGROUP_UNPLACED;
        }
        if (!from_path(abs, strlen(abs), u, c))
            continue;
        /* Every hierarchy that names a pod must name the same one. */
        if (found && (strcmp(u, uid) != 0 || (c[0] && cid[0] && strcmp(c, cid) != 0)))
            conflict = 1;
        if (!found || (!cid[0] && c[0])) {
            memcpy(uid, u, sizeof(u));
            memcpy(cid, c, sizeof(c));
        }
        found = 1;
    }
    if (conflict) {
        uid[0] = cid[0] = '\0';
        return -1;
    }
    return found;
}

int gd_cgroup_pod(const char *text, size_t len, char uid[GD_POD_UID_LEN],
                  char cid[GD_CONTAINER_ID_LEN])
{
    return gd_cgroup_pod_in(NULL, text, len, uid, cid);
}

int gd_cgroup_at_roots(const struct gd_cgroup_ns *ns, const char *text, size_t len)
{
    char abs[2 * GD_CGROUP_ROOT_LEN + 4096];
    size_t i = 0;
    int lines = 0;
    struct line l;

    while (next_line(text, len, &i, &l)) {
        if (place_line(ns, &l, abs, sizeof(abs)) < 0 || abs[0] != '\0')
            return 0;
        lines++;
    }
    return lines > 0;
}

int gd_cgroup_inside(const char *text, size_t len)
{
    size_t i = 0;
    int lines = 0;
    struct line l;

    while (next_line(text, len, &i, &l)) {
        const char *c;
        size_t k = 0, clen;

        /* The kernel climbs first: a path below the root has no ".." at its start. */
        if (next_component(l.path, l.pathlen, &k, &c, &clen) && is(c, clen, ".."))
            return 0;
        lines++;
    }
    return lines > 0;
}

/* ---- where the reader's namespace is rooted, from the host's tree ---- */

#define FIND_MAX_DIRS 200000 /* a node has thousands of cgroups; a bound on a tree of millions */
#define FIND_MAX_DEPTH 64

/* Whether path exists. */
static int exists(const char *path)
{
    struct stat st;

    return stat(path, &st) == 0;
}

/* Whether the cgroup.procs of directory dir lists pid: 1, 0, or -1 when it cannot be read. */
static int lists(const char *dir, pid_t pid)
{
    char path[GD_CGROUP_ROOT_LEN + 64], buf[4096];
    long v = -1;
    ssize_t n, k;
    int fd, found = 0;

    if ((size_t)snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= sizeof(path) ||
        (fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
        return -1;
    /* Numbers one a line, read in pieces: a number may straddle two. */
    while (!found && (n = read(fd, buf, sizeof(buf))) > 0)
        for (k = 0; k < n && !found; k++) {
            if (buf[k] >= '0' && buf[k] <= '9') {
                v = (v < 0 ? 0 : v) * 10 + (buf[k] - '0');
                if (v > 0x7fffffff)
                    v = 0x7fffffff;
            } else {
                found = v == (long)pid;
                v = -1;
            }
        }
    if (!found && v >= 0)
        found = v == (long)pid;
    close(fd);
    return found;
}

struct walk {
    pid_t pid;
    long dirs;
    char found[GD_CGROUP_ROOT_LEN]; /* from the hierarchy's root, "" for the root */
    int nfound;
};

/* Looks for w->pid under dir (rel from the hierarchy's root), depth levels down. */
static void walk(struct walk *w, const char *dir, const char *rel, int depth)
{
    DIR *d;
    struct dirent *e;

    if (w->nfound > 1 || ++w->dirs > FIND_MAX_DIRS)
        return;
    if (lists(dir, w->pid) == 1) {
        if (w->nfound++ == 0)
            snprintf(w->found, sizeof(w->found), "%s", rel);
    }
    if (depth >= FIND_MAX_DEPTH || (d = opendir(dir)) == NULL)
        return;
    while ((e = readdir(d)) != NULL && w->nfound <= 1 && w->dirs <= FIND_MAX_DIRS) {
        char sub[GD_CGROUP_ROOT_LEN], subrel[GD_CGROUP_ROOT_LEN];
        struct stat st;

        if (e->d_name[0] == '.' ||
            (size_t)snprintf(sub, sizeof(sub), "%s/%s", dir, e->d_name) >= sizeof(sub) ||
            (size_t)snprintf(subrel, sizeof(subrel), "%s/%s", rel, e->d_name) >= sizeof(subrel))
            continue;
        /* Cgroups are directories; files (cgroup.procs…) and anything else are not looked in. */
        if (e->d_type != DT_DIR &&
            (e->d_type != DT_UNKNOWN || lstat(sub, &st) < 0 || !S_ISDIR(st.st_mode)))
            continue;
        walk(w, sub, subrel, depth + 1);
    }
    closedir(d);
}

int gd_cgroup_ns_find(const char *host_root, const char *self, size_t len, pid_t pid,
                      struct gd_cgroup_ns *out, char *why, size_t whylen)
{
    size_t i = 0;
    struct line l;

    out->n = 0;
    while (next_line(self, len, &i, &l)) {
        struct gd_cgroup_hier *h;
        char hdir[GD_CGROUP_ROOT_LEN], x[GD_CGROUP_ROOT_LEN], own[GD_CGROUP_ROOT_LEN],
            probe[GD_CGROUP_ROOT_LEN + 32], name[256];
        struct walk w;
        size_t ol, fl;
        int v2 = l.ctrllen == 0, id;

        if (out->n == GD_CGROUP_MAX_HIER) {
            snprintf(why, whylen, "more than %d cgroup hierarchies", GD_CGROUP_MAX_HIER);
            return -E2BIG;
        }
        h = &out->h[out->n];
        if (sscanf(l.id, "%d", &id) != 1 || l.ctrllen >= sizeof(h->ctrl) ||
            l.ctrllen >= sizeof(name)) {
            snprintf(why, whylen,
                     "a line of the daemon's /proc/self/cgroup is not ID:CONTROLLERS:PATH");
            return -EINVAL;
        }
        memcpy(h->ctrl, l.ctrl, l.ctrllen);
        h->ctrl[l.ctrllen] = '\0';
        h->id = id;
        /* The daemon's own path is below its root: never climbs ("" has nothing to climb). */
        if (place("", l.path, l.pathlen, own, sizeof(own)) < 0) {
            snprintf(why, whylen,
                     "the daemon's own cgroup in hierarchy %d (%s) is outside its cgroup namespace",
                     id, v2 ? "cgroup v2" : h->ctrl);
            return -EINVAL;
        }
        /* The hierarchy's directory in the host's tree. */
        snprintf(name, sizeof(name), "%s",
                 strncmp(h->ctrl, "name=", 5) == 0 ? h->ctrl + 5 : h->ctrl);
        if (v2) {
            snprintf(probe, sizeof(probe), "%s/cgroup.controllers", host_root);
            snprintf(hdir, sizeof(hdir), exists(probe) ? "%s" : "%s/unified", host_root);
        } else if (name[0] == '\0' || strchr(name, '/') || strcmp(name, "..") == 0 ||
                   (size_t)snprintf(hdir, sizeof(hdir), "%s/%s", host_root, name) >= sizeof(hdir)) {
            snprintf(why, whylen, "hierarchy %d (%s) has no directory name", id, h->ctrl);
            return -EINVAL;
        }
        /* Mounted from the hierarchy's root: v2's root has no cgroup.type, v1's has release_agent. */
        snprintf(probe, sizeof(probe), "%s/%s", hdir, v2 ? "cgroup.controllers" : "cgroup.procs");
        if (!exists(probe)) {
            snprintf(
                why, whylen,
                "%s is not the host's cgroup hierarchy %d (%s): mount the host's /sys/fs/cgroup "
                "and give it as host-cgroup-root",
                hdir, id, v2 ? "cgroup v2" : h->ctrl);
            return -ENOENT;
        }
        snprintf(probe, sizeof(probe), "%s/%s", hdir, v2 ? "cgroup.type" : "release_agent");
        if (exists(probe) == v2) {
            snprintf(why, whylen,
                     "%s is not mounted from the root of cgroup hierarchy %d (%s), but from a "
                     "cgroup below it (a container's own mount): mount the host's /sys/fs/cgroup "
                     "and give it as host-cgroup-root",
                     hdir, id, v2 ? "cgroup v2" : h->ctrl);
            return -EXDEV;
        }
        /* The host's namespace, or a root that was always the hierarchy's: own path as is. */
        if ((size_t)snprintf(x, sizeof(x), "%s%s", hdir, own) < sizeof(x) && lists(x, pid) == 1) {
            h->root[0] = '\0';
            out->n++;
            continue;
        }
        memset(&w, 0, sizeof(w));
        w.pid = pid;
        walk(&w, hdir, "", 0);
        if (w.nfound != 1) {
            if (w.nfound > 1)
                snprintf(why, whylen, "process %d is in more than one cgroup of %s", (int)pid,
                         hdir);
            else if (w.dirs > FIND_MAX_DIRS)
                snprintf(why, whylen, "process %d is in none of the first %d cgroups of %s",
                         (int)pid, FIND_MAX_DIRS, hdir);
            else
                snprintf(why, whylen,
                         "process %d is in no cgroup of %s (not the host's tree, or one whose "
                         "cgroup.procs this PID namespace does not see)",
                         (int)pid, hdir);
            return -ENOENT;
        }
        /* found = root + own: the root is what is left once own is taken off its end. */
        ol = strlen(own);
        fl = strlen(w.found);
        if (fl < ol || strcmp(w.found + fl - ol, own) != 0) {
            snprintf(why, whylen,
                     "process %d is in %s%s, which does not end as its own /proc/self/cgroup says "
                     "(%s)",
                     (int)pid, hdir, w.found, own[0] ? own : "/");
            return -EXDEV;
        }
        memcpy(h->root, w.found, fl - ol);
        h->root[fl - ol] = '\0';
        out->n++;
    }
    if (out->n == 0) {
        snprintf(why, whylen, "the daemon's /proc/self/cgroup names no hierarchy");
        return -ENOENT;
    }
    return 0;
}
