/*
 * The kubelet's gRPC messages, to and from dra.h's plain structs, by the protobuf-c code
 * generated from proto/ at build time. DRA v1 and v1beta1 have one shape (v1 adds only
 * Device.share_id, field 5, which we never set; tests/k8s/proto_check.py checks the rest is
 * equal), so the v1beta1 code serves both: protoc-c 1.4 generates none for v1's proto3
 * `optional`.
 */
#include "daemon/dra.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dra/v1beta1/api.pb-c.h"
#include "pluginregistration/v1/api.pb-c.h"

typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesRequest prep_req;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesResponse prep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesResponse__ClaimsEntry
    prep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourceResponse prep_one;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Device wire_dev;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodeUnprepareResourcesResponse unprep_resp;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodeUnprepareResourcesResponse__ClaimsEntry
    unprep_entry;
typedef K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodeUnprepareResourceResponse unprep_one;
#define DRA(x) k8s__io__kubelet__pkg__apis__dra__v1beta1__##x
#define DRA_INIT(X) K8S__IO__KUBELET__PKG__APIS__DRA__V1BETA1__##X##__INIT

/*
 * Fields in one message, all depths: protobuf-c keeps each unknown field it meets as a record
 * of its own, so a few MiB of two-byte fields would cost tens of MiB. A message is walked on
 * the wire first and refused past this.
 */
#define MAX_FIELDS 1024

/* ---- the wire, walked before protobuf-c unpacks it ---- */

struct walk {
    int fields;
    char *err;
    size_t errlen;
};

static int varint(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
    *v = 0;
    for (int shift = 0; shift < 64 && *p < end; shift += 7) {
        uint8_t b = *(*p)++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
    }
    return -1;
}

/*
 * Walks a message of msg..end; strings of the fields in `strings` (a bit per field number
 * 1..31) must hold no NUL byte, and field `sub` (0: none) is a message walked the same way
 * with sub_strings. 0, or -1 with w->err.
 */
static int walk_msg(struct walk *w, const uint8_t *p, const uint8_t *end, uint32_t strings,
                    uint32_t sub, uint32_t sub_strings)
{
    while (p < end) {
        uint64_t key, v;
        if (++w->fields > MAX_FIELDS) {
            snprintf(w->err, w->errlen, "the message has more than %d fields", MAX_FIELDS);
            return -1;
        }
        if (varint(&p, end, &key) < 0 || (key >> 3) == 0) {
            snprintf(w->err, w->errlen, "the message is not protobuf (a bad field key)");
            return -1;
        }
        uint64_t field = key >> 3;
        switch (key & 7) {
        case 0:
            if (varint(&p, end, &v) < 0)
                goto bad;
            break;
        case 1:
            if (end - p < 8)
                goto bad;
            p += 8;
            break;
        case 5:
            if (end - p < 4)
                goto bad;
            p += 4;
            break;
        case 2:
            if (varint(&p, end, &v) < 0 || v > (uint64_t)(end - p))
                goto bad;
            if (field == sub && sub) {
                if (walk_msg(w, p, p + v, sub_strings, 0, 0) < 0)
                    return -1;
            } else if (field < 32 && (strings >> field & 1) && memchr(p, 0, v)) {
                snprintf(w->err, w->errlen, "field %u holds a NUL byte", (unsigned)field);
                return -1;
            }
            p += v;
            break;
        default:
            goto bad;
        }
    }
    return 0;
bad:
    snprintf(w->err, w->errlen, "the message is not protobuf (a field cut short or of a bad type)");
    return -1;
}

static int copy_field(char *dst, size_t cap, const char *src, int i, const char *what, char *err,
                      size_t errlen)
{
    size_t n = src ? strlen(src) : 0;
    if (n == 0) {
        snprintf(err, errlen, "claim %d: %s is empty", i, what);
        return -1;
    }
    if (n >= cap) {
        snprintf(err, errlen, "claim %d: %s is %zu bytes, more than %zu", i, what, n, cap - 1);
        return -1;
    }
    memcpy(dst, src, n + 1);
    return 0;
}

int gd_dra_decode_claims(const uint8_t *msg, size_t len, struct gd_dra_ref *out, int max, int *n,
                         char *err, size_t errlen)
{
    struct walk w = { 0, err, errlen };
    *n = 0;
    /* Both requests: claims = 1 (Claim: namespace = 1, uid = 2, name = 3, strings). */
    if (walk_msg(&w, msg, msg + len, 0, 1, 0xe) < 0)
        return -1;
    prep_req *r = DRA(node_prepare_resources_request__unpack)(NULL, len, msg);
    if (!r) {
        snprintf(err, errlen, "the message is not a request of claims");
        return -1;
    }
    int rc = -1;
    if (r->n_claims > (size_t)max) {
        snprintf(err, errlen, "%zu claims in one call, more than %d", r->n_claims, max);
        goto out;
    }
    for (size_t i = 0; i < r->n_claims; i++) {
        const K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Claim *c = r->claims[i];
        struct gd_dra_ref *o = &out[i];
        if (copy_field(o->ns, sizeof o->ns, c->namespace_, (int)i, "namespace", err, errlen) < 0 ||
            copy_field(o->uid, sizeof o->uid, c->uid, (int)i, "uid", err, errlen) < 0 ||
            copy_field(o->name, sizeof o->name, c->name, (int)i, "name", err, errlen) < 0)
            goto out;
    }
    *n = (int)r->n_claims;
    rc = 0;
out:
    DRA(node_prepare_resources_request__free_unpacked)(r, NULL);
    return rc;
}

/* The packed bytes of m (malloc'd; an empty message is 0 bytes of a 1-byte buffer). */
static int pack(const ProtobufCMessage *m, uint8_t **out, size_t *len)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    uint8_t *b = malloc(n ? n : 1);
    if (!b)
        return -1;
    *len = protobuf_c_message_pack(m, b);
    *out = b;
    return 0;
}

int gd_dra_encode_prepare(const struct gd_dra_answer *a, int n, uint8_t **out, size_t *len)
{
    int ndev = 0;
    for (int i = 0; i < n; i++)
        if (!a[i].error[0] && a[i].ndev > 0)
            ndev += a[i].ndev < GD_DRA_MAX_DEVS ? a[i].ndev : GD_DRA_MAX_DEVS;
    prep_resp r = DRA_INIT(NODE_PREPARE_RESOURCES_RESPONSE);
    prep_entry *ent = calloc((size_t)n + 1, sizeof *ent);
    prep_entry **ents = calloc((size_t)n + 1, sizeof *ents);
    prep_one *one = calloc((size_t)n + 1, sizeof *one);
    wire_dev *dev = calloc((size_t)ndev + 1, sizeof *dev);
    wire_dev **devs = calloc((size_t)ndev + 1, sizeof *devs);
    /* request names and CDI IDs: pointers into a, cast for protobuf-c's char ** (not written) */
    char **strs = calloc((size_t)ndev * (4 + GD_DRA_MAX_CDI) + 1, sizeof *strs);
    int rc = -1;
    if (!ent || !ents || !one || !dev || !devs || !strs)
        goto out;
    int d = 0, s = 0;
    for (int i = 0; i < n; i++) {
        prep_entry e = DRA_INIT(NODE_PREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY);
        prep_one o = DRA_INIT(NODE_PREPARE_RESOURCE_RESPONSE);
        ent[i] = e;
        one[i] = o;
        ent[i].key = (char *)a[i].uid;
        ent[i].value = &one[i];
        ents[i] = &ent[i];
        if (a[i].error[0]) {
            one[i].error = (char *)a[i].error;
            continue;
        }
        one[i].devices = &devs[d];
        for (int k = 0; k < a[i].ndev && k < GD_DRA_MAX_DEVS; k++, d++) {
            const struct gd_dra_dev_answer *da = &a[i].dev[k];
            wire_dev wd = DRA_INIT(DEVICE);
            dev[d] = wd;
            dev[d].pool_name = (char *)da->pool;
            dev[d].device_name = (char *)da->device;
            dev[d].request_names = &strs[s];
            for (int q = 0; q < da->nreq && q < 4; q++)
                strs[s++] = (char *)da->request[q];
            dev[d].n_request_names = (size_t)(&strs[s] - dev[d].request_names);
            dev[d].cdi_device_ids = &strs[s];
            for (int q = 0; q < da->ncdi && q < GD_DRA_MAX_CDI; q++)
                strs[s++] = (char *)da->cdi[q];
            dev[d].n_cdi_device_ids = (size_t)(&strs[s] - dev[d].cdi_device_ids);
            devs[d] = &dev[d];
            one[i].n_devices++;
        }
    }
    r.n_claims = (size_t)n;
    r.claims = ents;
    rc = pack(&r.base, out, len);
out:
    free(ent);
    free(ents);
    free(one);
    free(dev);
    free(devs);
    free(strs);
    return rc;
}

int gd_dra_encode_unprepare(const struct gd_dra_answer *a, int n, uint8_t **out, size_t *len)
{
    unprep_resp r = DRA_INIT(NODE_UNPREPARE_RESOURCES_RESPONSE);
    unprep_entry *ent = calloc((size_t)n + 1, sizeof *ent);
    unprep_entry **ents = calloc((size_t)n + 1, sizeof *ents);
    unprep_one *one = calloc((size_t)n + 1, sizeof *one);
    int rc = -1;
    if (!ent || !ents || !one)
        goto out;
    for (int i = 0; i < n; i++) {
        unprep_entry e = DRA_INIT(NODE_UNPREPARE_RESOURCES_RESPONSE__CLAIMS_ENTRY);
        unprep_one o = DRA_INIT(NODE_UNPREPARE_RESOURCE_RESPONSE);
        ent[i] = e;
        one[i] = o;
        ent[i].key = (char *)a[i].uid;
        ent[i].value = &one[i];
        if (a[i].error[0])
            one[i].error = (char *)a[i].error;
        ents[i] = &ent[i];
    }
    r.n_claims = (size_t)n;
    r.claims = ents;
    rc = pack(&r.base, out, len);
out:
    free(ent);
    free(ents);
    free(one);
    return rc;
}

int gd_dra_encode_plugin_info(const char *name, const char *endpoint, const char *const *versions,
                              int nversions, uint8_t **out, size_t *len)
{
    Pluginregistration__PluginInfo pi = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    pi.type = (char *)"DRAPlugin";
    pi.name = (char *)name;
    pi.endpoint = (char *)endpoint;
    pi.n_supported_versions = nversions > 0 ? (size_t)nversions : 0;
    pi.supported_versions = (char **)versions;
    return pack(&pi.base, out, len);
}

int gd_dra_decode_reg_status(const uint8_t *msg, size_t len, int *registered, char *error,
                             size_t errorlen)
{
    struct walk w = { 0, error, errorlen };
    *registered = 0;
    /* plugin_registered = 1 (bool), error = 2 (string) */
    if (walk_msg(&w, msg, msg + len, 1u << 2, 0, 0) < 0)
        return -1;
    Pluginregistration__RegistrationStatus *st =
        pluginregistration__registration_status__unpack(NULL, len, msg);
    if (!st) {
        snprintf(error, errorlen, "the message is not a RegistrationStatus");
        return -1;
    }
    *registered = st->plugin_registered ? 1 : 0;
    snprintf(error, errorlen, "%s", st->error ? st->error : "");
    pluginregistration__registration_status__free_unpacked(st, NULL);
    return 0;
}
