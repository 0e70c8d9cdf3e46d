/*
 * A process's pod and container from its cgroup (cgroup.c).
 */
#ifndef GPUSLICE_DAEMON_CGROUP_H
#define GPUSLICE_DAEMON_CGROUP_H

#include <stddef.h>

#define GD_POD_UID_LEN 37      /* a UUID and its NUL */
#define GD_CONTAINER_ID_LEN 65 /* 64 hexadecimal digits and a NUL */

/*
 * The pod UID (lower-case, with '-') and container ID (empty when the process is in the
 * pod's cgroup but no container's) that text, the contents of /proc/PID/cgroup, names: 1;
 * 0 when no line names a pod; -1 when two lines name different pods or containers.
 */
int gd_cgroup_pod(const char *text, size_t len, char uid[GD_POD_UID_LEN],
                  char cid[GD_CONTAINER_ID_LEN]);

#endif
