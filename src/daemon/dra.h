/*
 * gpusliced as the Kubernetes DRA driver gpu.gpuslice.io.
 *
 *   dra_doc.c  the documents, pure functions: the node's ResourceSlice, a ResourceClaim read
 *              and judged (which of this node's GPUs, how much of each), its CDI spec, the
 *              checkpoint of prepared claims.
 *   dra_wire.c the kubelet's gRPC messages (pluginregistration v1; DRA v1 and v1beta1, whose
 *              messages have one shape) decoded into and encoded from the plain structs below.
 *   grpc.c     a unary gRPC server on a Unix socket (HTTP/2 by nghttp2).
 *   dra.c      the driver: publishing, registration, Prepare and Unprepare, the tenants.
 */
#ifndef GPUSLICE_DAEMON_DRA_H
#define GPUSLICE_DAEMON_DRA_H

#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdint.h>

#include "daemon/nvclaim.h"

#define GD_DRA_DRIVER "gpu.gpuslice.io"
#define GD_DRA_MEM_STEP (256ull << 20) /* memory is consumed in steps of 256 MiB */
#define GD_DRA_MAX_CLAIMS 64           /* claims in one Prepare or Unprepare call */
#define GD_DRA_MAX_DEVS 16             /* devices of one claim that are ours */
#define GD_DRA_MAX_CDI 4               /* CDI device IDs answered per device */

/* ---- the driver (dra.c) ---- */

/*
 * Starts the driver when the option dra is on (needs the pods' watch: kube-api): the claims
 * of the checkpoint prepared again, the ResourceSlice published, the kubelet's sockets served.
 * 0 (also when off), or -1 with a message.
 */
int gd_dra_start(char *err, size_t errlen);
/* Stops it: the kubelet's sockets closed, then the node's ResourceSlice removed. */
void gd_dra_stop(void);
/* The same without removing the slice (a start that failed half-way). */
void gd_dra_stop_keep(void);

/*
 * The tenant the processes of pod pod_uid join: the tenant of the prepared claim reserved for
 * it. 1 with its name, 0 for none, -1 with why (more than one). Any thread, gd.mu held or not.
 */
int gd_dra_tenant_of_pod(const char *pod_uid, char *name, size_t namelen, char *why,
                         size_t whylen);
/*
 * The same for a pod of namespace ns that names claims (their names, n of them) which are not
 * reserved for it as far as the driver knows: a prepared claim among them is one shared with
 * the pods that came after it was prepared; pod_uid is then added to the pods that may join
 * it. 1 with its name, 0 for none, -1 with why.
 */
int gd_dra_tenant_of_claims(const char *pod_uid, const char *ns,
                            const char (*names)[GD_CLAIM_NAME_LEN], int n,
                            char *name, size_t namelen, char *why, size_t whylen);
/* Whether a tenant's name is a claim's ("claim-<uid>"): the pods' reconciling leaves it. */
int gd_dra_is_claim_tenant(const char *name);
/* The driver's series of /metrics (nothing when it is off). */
void gd_dra_metrics(FILE *f);

/* ---- the kubelet's messages (dra_wire.c) ---- */

enum gd_dra_version { GD_DRA_V1 = 1, GD_DRA_V1BETA1 = 2 };

/*
 * The gRPC paths of the kubelet's calls (method names appended), and the service versions a
 * plugin names in PluginInfo.supported_versions (k8s.io/kubelet pkg/apis/dra/<v>/types.go,
 * DRAPluginService; tests/k8s/upstream_fields.json).
 */
#define GD_DRA_PATH_V1 "/k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin/"
#define GD_DRA_PATH_V1BETA1 "/k8s.io.kubelet.pkg.apis.dra.v1beta1.DRAPlugin/"
#define GD_DRA_REG_PATH "/pluginregistration.Registration/"
#define GD_DRA_SERVICE_V1 "v1.DRAPlugin"
#define GD_DRA_SERVICE_V1BETA1 "v1beta1.DRAPlugin"

/* A claim named in NodePrepareResourcesRequest / NodeUnprepareResourcesRequest. */
struct gd_dra_ref {
    char ns[254], uid[129], name[254];
};

/* One device of a prepared claim, as NodePrepareResourceResponse answers it. */
struct gd_dra_dev_answer {
    int nreq;
    char request[4][64]; /* request_names */
    char pool[254], device[129];
    int ncdi;
    char cdi[GD_DRA_MAX_CDI][512];
};

/* The answer for one claim: its devices, or error (non-empty) and no devices. */
struct gd_dra_answer {
    char uid[129];
    char error[1024];
    int ndev;
    struct gd_dra_dev_answer dev[GD_DRA_MAX_DEVS];
};

/*
 * The claims of a Prepare or Unprepare request (both messages: field 1, repeated Claim). 0 with
 * *n of them in out (at most max), or -1 with err naming what is wrong (a bad message, more
 * than max claims, a field too long or empty where the kubelet always fills it).
 */
int gd_dra_decode_claims(const uint8_t *msg, size_t len, struct gd_dra_ref *out, int max, int *n,
                         char *err, size_t errlen);

/* The responses, as bytes (malloc'd, *len); -1 only without memory. */
int gd_dra_encode_prepare(const struct gd_dra_answer *a, int n, uint8_t **out, size_t *len);
int gd_dra_encode_unprepare(const struct gd_dra_answer *a, int n, uint8_t **out, size_t *len);

/* pluginregistration v1: PluginInfo for GetInfo (type "DRAPlugin"), and RegistrationStatus. */
int gd_dra_encode_plugin_info(const char *name, const char *endpoint, const char *const *versions,
                              int nversions, uint8_t **out, size_t *len);
int gd_dra_decode_reg_status(const uint8_t *msg, size_t len, int *registered, char *error,
                             size_t errorlen);

/* ---- the documents (dra_doc.c) ---- */

/* One GPU of the node as the driver publishes it. */
struct gd_dra_gpu {
    int index;
    char uuid[96], product[96], driver_version[96], arch[32];
    int sms;
    uint64_t mem_total; /* bytes */
};

/*
 * The node's ResourceSlice (resource.k8s.io/v1, a new reference): name, pool = node,
 * generation, one device gpu-<index> per GPU with allowMultipleAllocations, the attributes and
 * the consumable capacities memory (bytes; steps of GD_DRA_MEM_STEP, default all) and cores
 * (100; step 1, default 0).
 */
json_t *gd_dra_slice_json(const char *node, int64_t generation, const struct gd_dra_gpu *gpu,
                          int n);

/* What a prepared claim holds on one of this node's GPUs. */
struct gd_dra_hold {
    char uuid[96];
    char device[129]; /* gpu-<index> */
    /* The claim's requests it answers, 1..4: two results on one device are one hold. */
    int nreq;
    char request[4][64];
    uint64_t mem_bytes; /* consumedCapacity.memory (0: not given: the whole GPU) */
    int cores;          /* consumedCapacity.cores, 0..100; 0: no ceiling */
};

#define GD_DRA_CLAIM_SET_PRIORITY 1u
#define GD_DRA_CLAIM_SET_WEIGHT 2u

/* A claim judged for this node. */
struct gd_dra_claim {
    char ns[254], name[254], uid[129];
    int nhold;
    struct gd_dra_hold hold[GD_DRA_MAX_DEVS];
    uint32_t priority; /* GPUSLICE_PRIORITY_*; 0: not given */
    uint32_t weight;   /* 1..100; 0: not given */
    /*
     * Which of them the claim's own configuration set (config of source FromClaim, written by
     * the claim's author, not the DeviceClass's admin): GD_DRA_CLAIM_SET_*. Not checkpointed.
     */
    uint32_t claim_set;
    int npod;          /* status.reservedFor's pods (their UIDs): who may join */
    char pod_uid[8][129];
};

/*
 * Reads a ResourceClaim object: it must be ref (namespace, name, UID), allocated, and every
 * result of driver GD_DRA_DRIVER must be of pool node and name one of gpu (device gpu-<index>),
 * within that GPU's capacity; results of other drivers are left out, and a claim with none of
 * ours is an error. Two results on one device are one hold, their consumption summed (within
 * the GPU). The opaque configuration of driver GD_DRA_DRIVER (parameters {"priority":
 * "latency"|"normal"|"background", "weight": 1..100}, and optionally "apiVersion":
 * "gpu.gpuslice.io/v1alpha1", "kind": "ClaimConfig"; any other key is refused) applies to the
 * requests it names (all when none; "req" covers "req/sub"), a later entry over an earlier one;
 * two devices given different values are refused. status.reservedFor's pods give pod_uid.
 * 0, or -1 with out cleared and err naming the claim (namespace/name) and the field's path.
 */
int gd_dra_claim_read(const json_t *claim, const struct gd_dra_ref *ref, const char *node,
                      const struct gd_dra_gpu *gpu, int ngpu, struct gd_dra_claim *out, char *err,
                      size_t errlen);

/*
 * The CDI spec of a claim (a new reference; NULL when the UID cannot name a CDI device): kind
 * gpuslice.io/claim, one device named by the claim's UID, whose container edits bring, as the
 * webhook does: lib_dir (the node's directory of the interposer) at /usr/local/gpuslice,
 * preload_file (its ld.so.preload, naming /usr/local/gpuslice/libgpuslice.so) at
 * /etc/ld.so.preload, the pods' directory pods_dir at /run/gpuslice
 * and tenants_dir at /run/gpuslice/tenants, all read-only, and GPUSLICE_POD=1. The caller
 * writes it to cdi-dir/gpuslice.io-claim_<uid>.json.
 */
json_t *gd_dra_cdi_json(const char *claim_uid, const char *lib_dir, const char *preload_file,
                        const char *pods_dir, const char *tenants_dir);

/*
 * The CDI device ID of that spec: gpuslice.io/claim=<uid>; "" if uid is no CDI device name or
 * the ID does not fit len (gd_dra_cdi_json is NULL for such a uid, or a path not absolute).
 */
void gd_dra_cdi_id(const char *claim_uid, char *out, size_t len);

/*
 * The checkpoint: the prepared claims as JSON ({"version": 1, "claims": [...]}, NULL without
 * memory), and back: strictly (every key known and present, every value in bounds, no UID
 * twice, at most max claims); 0 with *n claims, or -1 with *n 0, out cleared and err naming the
 * field.
 */
json_t *gd_dra_checkpoint_json(const struct gd_dra_claim *c, int n);
int gd_dra_checkpoint_read(const json_t *j, struct gd_dra_claim *out, int max, int *n, char *err,
                           size_t errlen);

#endif
