/*
 * The pods of this node from the Kubernetes API server (kube.c).
 */
#ifndef GPUSLICE_DAEMON_KUBE_H
#define GPUSLICE_DAEMON_KUBE_H

#include <jansson.h>
#include <stddef.h>

#define GD_MAX_PODS 1024 /* pods followed at once (a kubelet's default is 110) */

/*
 * Starts following the node's pods when kube-api is an https:// URL, or when it is empty and
 * the daemon runs in a cluster (KUBERNETES_SERVICE_HOST); "off" never. 0 (also when off), or
 * -1 with a message for a configuration that cannot work.
 */
int gd_kube_start(char *err, size_t errlen);
void gd_kube_stop(void);
int gd_kube_enabled(void);

/* The pods as /v1/pods shows them (a new reference). */
json_t *gd_kube_pods_json(void);

#endif
