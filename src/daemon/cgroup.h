/*
 * A process's pod and container from its cgroup, and where the daemon's own cgroup namespace
 * is rooted (cgroup.c).
 */
#ifndef GPUSLICE_DAEMON_CGROUP_H
#define GPUSLICE_DAEMON_CGROUP_H

#include <stddef.h>
#include <sys/types.h>

#define GD_POD_UID_LEN 37      /* a UUID and its NUL */
#define GD_CONTAINER_ID_LEN 65 /* 64 hexadecimal digits and a NUL */
#define GD_CGROUP_MAX_HIER 16  /* hierarchies of one kernel (v1 has at most a dozen or so) */
#define GD_CGROUP_ROOT_LEN 2048

/* gd_cgroup_pod_in's answer for a process whose cgroup cannot be placed. */
#define GD_CGROUP_UNPLACED (-2)

/*
 * Where a reader's cgroup namespace is rooted, in each hierarchy: the paths of the
 * /proc/PID/cgroup it reads are relative to these (the kernel climbs with ".." from there to
 * a cgroup outside it).
 */
struct gd_cgroup_ns {
    int n;
    struct gd_cgroup_hier {
        int id;                        /* the line's first field (0: cgroup v2) */
        char ctrl[256];                /* its second: controllers or name=NAME; "" for v2 */
        char root[GD_CGROUP_ROOT_LEN]; /* from the hierarchy's root: "" the root, else "/a/b" */
    } h[GD_CGROUP_MAX_HIER];
};

/*
 * The pod UID (lower-case, with '-') and container ID (empty when the process is in the
 * pod's cgroup but no container's) that text, the contents of /proc/PID/cgroup as a reader
 * whose namespace is ns reads it, names: 1; 0 when no line names a pod; -1 when two lines
 * name different pods or containers; GD_CGROUP_UNPLACED when a line cannot be placed in its
 * hierarchy (a hierarchy ns does not have, a path that climbs above the hierarchy's root or
 * has ".." after a name). ns NULL: the reader's namespace is the host's (every path is from
 * its hierarchy's root).
 */
int gd_cgroup_pod_in(const struct gd_cgroup_ns *ns, const char *text, size_t len,
                     char uid[GD_POD_UID_LEN], char cid[GD_CONTAINER_ID_LEN]);

/* gd_cgroup_pod_in for a reader in the host's namespace. */
int gd_cgroup_pod(const char *text, size_t len, char uid[GD_POD_UID_LEN],
                  char cid[GD_CONTAINER_ID_LEN]);

/* Whether every line of text places at its hierarchy's root (1), or not (0), under ns. */
int gd_cgroup_at_roots(const struct gd_cgroup_ns *ns, const char *text, size_t len);

/*
 * Whether every line of text (non-empty) names a cgroup at or below the reader's namespace
 * root (none climbs with ".."): a process of the reader's own container. 1 or 0.
 */
int gd_cgroup_inside(const char *text, size_t len);

/*
 * Where the namespace of the process pid, whose own /proc/pid/cgroup is self (len bytes),
 * is rooted, from host_root: the host's cgroup hierarchies as mounted from their roots (cgroup
 * v2 at host_root, or at host_root/unified beside v1's; a v1 hierarchy at host_root/CONTROLLERS,
 * name=NAME at host_root/NAME). In each hierarchy the process's cgroup is the one directory
 * whose cgroup.procs lists pid (PIDs are the reader's); the namespace's root is that directory
 * less the path self gives it. 0, or -errno with why (naming the hierarchy and the directory):
 * a hierarchy not there or not mounted from its root, pid in none of its directories, a path
 * that does not end as self says.
 */
int gd_cgroup_ns_find(const char *host_root, const char *self, size_t len, pid_t pid,
                      struct gd_cgroup_ns *out, char *why, size_t whylen);

#endif
