/*
 * Kubernetes pods as the daemon's tenants, and the socket that joins their
 * processes to them by cgroup (pods.c).
 */
#ifndef GPUSLICE_DAEMON_PODS_H
#define GPUSLICE_DAEMON_PODS_H

#include <jansson.h>
#include <stdio.h>

#include "daemon/cgroup.h"
#include "daemon/daemon.h"

/* Serves GPUSLICE_NODE_POD_SOCKET in the run directory; 0 or -1 with a message. */
int gd_pods_start(char *err, size_t errlen);
void gd_pods_stop(void);

/*
 * Brings the pods' tenants to what the pods followed now say (kube.c calls it after each
 * list and watch event): made, changed, and, once a whole list has been read, ended for
 * pods that are gone. Takes gd.mu.
 */
void gd_pods_reconcile(void);

/* The pod of tenant t as the API shows it (a new reference), or NULL; under gd.mu. */
json_t *gd_pods_tenant_json(const struct gd_tenant *t);

/*
 * Tries again to make the tenants of pods that have none (the node's table was full when
 * they came): the sampler calls it after each sweep, so that a place freed is taken at once,
 * not at the pod's next change. Takes gd.mu.
 */
void gd_pods_retry(void);

/* The node segment's id of the tenant of the pod with this UID, or 0; under gd.mu. */
uint32_t gd_pods_tenant_of(const char *uid);

/* Whether t is a pod's, and its namespace and name (valid under gd.mu). */
int gd_pods_labels(const struct gd_tenant *t, const char **ns, const char **name);

/*
 * Which pod and container the process whose /proc/PID/cgroup is cg names, placed from the
 * root of each hierarchy (the daemon's own cgroup namespace found once, in the host's tree:
 * host-cgroup-root): as gd_cgroup_pod_in answers; GD_CGROUP_UNPLACED with why when it cannot be
 * told (then never guessed).
 */
int gd_pods_cgroup(const char *cg, size_t len, char uid[GD_POD_UID_LEN],
                   char cid[GD_CONTAINER_ID_LEN], char *why, size_t whylen);

/*
 * Whether a peer whose /proc/PID/cgroup is cg is a pod's process (never an admin): 1 for
 * another pod's than the daemon's own, and for one that cannot be told from one; else 0.
 */
int gd_pods_peer_in_pod(const char *cg, size_t len);

/* Why pods' processes cannot be told by their cgroup (for /readyz), or NULL when they can. */
const char *gd_pods_unplaced(void);

/* The pods' series of /metrics (per-pod totals); label escapes a label value. Under gd.mu. */
void gd_pods_metrics(FILE *f, void (*label)(FILE *, const char *));

#endif
