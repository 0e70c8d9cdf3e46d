/*
 * The kubelet's messages (src/daemon/dra_wire.c): requests built byte by byte as the kubelet's
 * protobuf encoder writes them, and our answers read back with the protobuf-c code generated
 * from proto/ (the same messages python3-grpcio reads in tests/k8s/grpc_check.py).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/dra.h"
#include "dra/v1beta1/api.pb-c.h"
#include "pluginregistration/v1/api.pb-c.h"

struct buf {
    uint8_t b[1 << 16];
    size_t n;
};

static void put_varint(struct buf *b, uint64_t v)
{
    while (v >= 0x80) {
        b->b[b->n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b->b[b->n++] = (uint8_t)v;
}

static void put_bytes(struct buf *b, int field, const void *p, size_t len)
{
    put_varint(b, (uint64_t)field << 3 | 2);
    put_varint(b, len);
    memcpy(b->b + b->n, p, len);
    b->n += len;
}

static void put_str(struct buf *b, int field, const char *s)
{
    put_bytes(b, field, s, strlen(s));
}

/* A Claim (namespace = 1, uid = 2, name = 3) as field 1 of a request. */
static void put_claim(struct buf *req, const char *ns, const char *uid, const char *name)
{
    struct buf c = { .n = 0 };
    put_str(&c, 1, ns);
    put_str(&c, 2, uid);
    put_str(&c, 3, name);
    put_bytes(req, 1, c.b, c.n);
}

static struct gd_dra_ref refs[GD_DRA_MAX_CLAIMS + 1];

static void test_decode_claims_reads_each_field(void **state)
{
    struct buf b = { .n = 0 };
    char err[256] = "";
    int n = -1;
    (void)state;
    put_claim(&b, "ns-a", "uid-a", "claim-a");
    put_claim(&b, "default", "0b5c7f3e-1111-2222-3333-444455556666", "b");
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, GD_DRA_MAX_CLAIMS, &n, err, sizeof err),
                     0);
    assert_int_equal(n, 2);
    assert_string_equal(refs[0].ns, "ns-a");
    assert_string_equal(refs[0].uid, "uid-a");
    assert_string_equal(refs[0].name, "claim-a");
    assert_string_equal(refs[1].uid, "0b5c7f3e-1111-2222-3333-444455556666");
}

static void test_decode_claims_empty_request_is_no_claims(void **state)
{
    char err[256] = "";
    int n = -1;
    (void)state;
    assert_int_equal(gd_dra_decode_claims((const uint8_t *)"", 0, refs, 4, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
}

static void test_decode_claims_max_and_one_more(void **state)
{
    struct buf b = { .n = 0 };
    char err[256] = "", uid[32];
    int n = -1;
    (void)state;
    for (int i = 0; i < GD_DRA_MAX_CLAIMS; i++) {
        snprintf(uid, sizeof uid, "u%d", i);
        put_claim(&b, "ns", uid, "c");
    }
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, GD_DRA_MAX_CLAIMS, &n, err, sizeof err),
                     0);
    assert_int_equal(n, GD_DRA_MAX_CLAIMS);
    assert_string_equal(refs[GD_DRA_MAX_CLAIMS - 1].uid, "u63");
    put_claim(&b, "ns", "one-more", "c");
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, GD_DRA_MAX_CLAIMS, &n, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "65 claims"));
    assert_int_equal(n, 0);
}

static void test_decode_claims_field_lengths(void **state)
{
    char uid[200], err[256] = "";
    int n;
    (void)state;
    memset(uid, 'u', sizeof uid);
    uid[128] = '\0'; /* the longest a UID may be */
    struct buf b = { .n = 0 };
    put_claim(&b, "ns", uid, "c");
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), 0);
    assert_int_equal(strlen(refs[0].uid), 128);
    uid[128] = 'u';
    uid[129] = '\0';
    b.n = 0;
    put_claim(&b, "ns", uid, "c");
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "claim 0: uid is 129 bytes, more than 128"));
}

static void test_decode_claims_refuses_empty_fields(void **state)
{
    const char *cases[][3] = { { "", "u", "n" }, { "ns", "", "n" }, { "ns", "u", "" } };
    const char *what[] = { "namespace", "uid", "name" };
    char err[256], want[64];
    int n;
    (void)state;
    for (int i = 0; i < 3; i++) {
        struct buf b = { .n = 0 };
        put_claim(&b, "ok", "ok", "ok");
        put_claim(&b, cases[i][0], cases[i][1], cases[i][2]);
        assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), -1);
        snprintf(want, sizeof want, "claim 1: %s is empty", what[i]);
        assert_non_null(strstr(err, want));
    }
}

static void test_decode_claims_refuses_nul_and_garbage(void **state)
{
    struct buf b = { .n = 0 }, c = { .n = 0 };
    char err[256];
    int n;
    (void)state;
    put_str(&c, 1, "ns");
    put_bytes(&c, 3, "a\0b", 3);
    put_bytes(&b, 1, c.b, c.n);
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "NUL"));
    static const uint8_t cut[] = { 0x0a, 0x05, 0x0a, 0x01 }; /* a length past the end */
    static const uint8_t badwire[] = { 0x0b, 0x00 };         /* wire type 3 */
    static const uint8_t zero[] = { 0x00, 0x01 };            /* field 0 */
    static const uint8_t longvar[] = { 0x08, 0xff, 0xff, 0xff, 0xff, 0xff,
                                       0xff, 0xff, 0xff, 0xff, 0xff, 0x01 };
    const struct {
        const uint8_t *p;
        size_t n;
    } bad[] = { { cut, sizeof cut },
                { badwire, sizeof badwire },
                { zero, sizeof zero },
                { longvar, sizeof longvar } };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = '\0';
        assert_int_equal(gd_dra_decode_claims(bad[i].p, bad[i].n, refs, 4, &n, err, sizeof err),
                         -1);
        assert_true(err[0] != '\0');
    }
}

static void test_decode_claims_bounds_unknown_fields(void **state)
{
    struct buf b = { .n = 0 };
    char err[256] = "";
    int n;
    (void)state;
    /* 1024 unknown varint fields (field 15) are read past; one more is refused. */
    for (int i = 0; i < 1024; i++) {
        put_varint(&b, 15 << 3);
        put_varint(&b, 1);
    }
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), 0);
    assert_int_equal(n, 0);
    put_varint(&b, 15 << 3);
    put_varint(&b, 1);
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), -1);
    assert_non_null(strstr(err, "more than 1024 fields"));
}

static struct gd_dra_answer ans[3];

static void test_encode_prepare_reads_back(void **state)
{
    uint8_t *out = NULL;
    size_t len = 0;
    (void)state;
    memset(ans, 0, sizeof ans);
    snprintf(ans[0].uid, sizeof ans[0].uid, "uid-a");
    ans[0].ndev = 2;
    for (int d = 0; d < 2; d++) {
        ans[0].dev[d].nreq = 2;
        snprintf(ans[0].dev[d].request[0], 64, "gpu");
        snprintf(ans[0].dev[d].request[1], 64, "more");
        snprintf(ans[0].dev[d].pool, sizeof ans[0].dev[d].pool, "node-1");
        snprintf(ans[0].dev[d].device, sizeof ans[0].dev[d].device, "gpu-%d", d);
        ans[0].dev[d].ncdi = 1;
        snprintf(ans[0].dev[d].cdi[0], 512, "gpuslice.io/claim=uid-a");
    }
    snprintf(ans[1].uid, sizeof ans[1].uid, "uid-b");
    snprintf(ans[1].error, sizeof ans[1].error, "ns/b: not allocated");
    ans[1].ndev = 1; /* an error: its devices are not answered */
    snprintf(ans[2].uid, sizeof ans[2].uid, "uid-c");
    assert_int_equal(gd_dra_encode_prepare(ans, 3, &out, &len), 0);
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesResponse *r =
        k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__unpack(
            NULL, len, out);
    assert_non_null(r);
    assert_int_equal(r->n_claims, 3);
    assert_string_equal(r->claims[0]->key, "uid-a");
    assert_int_equal(r->claims[0]->value->n_devices, 2);
    assert_string_equal(r->claims[0]->value->devices[1]->device_name, "gpu-1");
    assert_string_equal(r->claims[0]->value->devices[1]->pool_name, "node-1");
    assert_int_equal(r->claims[0]->value->devices[1]->n_request_names, 2);
    assert_string_equal(r->claims[0]->value->devices[1]->request_names[1], "more");
    assert_int_equal(r->claims[0]->value->devices[0]->n_cdi_device_ids, 1);
    assert_string_equal(r->claims[0]->value->devices[0]->cdi_device_ids[0],
                        "gpuslice.io/claim=uid-a");
    assert_string_equal(r->claims[0]->value->error, "");
    assert_string_equal(r->claims[1]->key, "uid-b");
    assert_string_equal(r->claims[1]->value->error, "ns/b: not allocated");
    assert_int_equal(r->claims[1]->value->n_devices, 0);
    assert_string_equal(r->claims[2]->key, "uid-c");
    assert_int_equal(r->claims[2]->value->n_devices, 0);
    k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__free_unpacked(r,
                                                                                              NULL);
    free(out);
    assert_int_equal(gd_dra_encode_prepare(ans, 0, &out, &len), 0);
    assert_int_equal(len, 0);
    free(out);
}

static void test_encode_unprepare_reads_back(void **state)
{
    uint8_t *out = NULL;
    size_t len = 0;
    (void)state;
    memset(ans, 0, sizeof ans);
    snprintf(ans[0].uid, sizeof ans[0].uid, "uid-a");
    snprintf(ans[1].uid, sizeof ans[1].uid, "uid-b");
    snprintf(ans[1].error, sizeof ans[1].error, "busy");
    assert_int_equal(gd_dra_encode_unprepare(ans, 2, &out, &len), 0);
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodeUnprepareResourcesResponse *r =
        k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__unpack(
            NULL, len, out);
    assert_non_null(r);
    assert_int_equal(r->n_claims, 2);
    assert_string_equal(r->claims[0]->key, "uid-a");
    assert_string_equal(r->claims[0]->value->error, "");
    assert_string_equal(r->claims[1]->value->error, "busy");
    k8s__io__kubelet__pkg__apis__dra__v1beta1__node_unprepare_resources_response__free_unpacked(
        r, NULL);
    free(out);
}

static void test_plugin_info_reads_back(void **state)
{
    static const char *const v[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin" };
    uint8_t *out = NULL;
    size_t len = 0;
    (void)state;
    assert_int_equal(gd_dra_encode_plugin_info(GD_DRA_DRIVER, "/var/lib/kubelet/plugins/x/dra.sock",
                                               v, 2, &out, &len),
                     0);
    Pluginregistration__PluginInfo *pi = pluginregistration__plugin_info__unpack(NULL, len, out);
    assert_non_null(pi);
    assert_string_equal(pi->type, "DRAPlugin");
    assert_string_equal(pi->name, "gpu.gpuslice.io");
    assert_string_equal(pi->endpoint, "/var/lib/kubelet/plugins/x/dra.sock");
    assert_int_equal(pi->n_supported_versions, 2);
    assert_string_equal(pi->supported_versions[1], "v1beta1.DRAPlugin");
    pluginregistration__plugin_info__free_unpacked(pi, NULL);
    free(out);
}

static void test_reg_status_decodes_and_refuses(void **state)
{
    struct buf b = { .n = 0 };
    char err[64];
    int reg = -1;
    (void)state;
    put_varint(&b, 1 << 3); /* plugin_registered = true */
    put_varint(&b, 1);
    put_str(&b, 2, "version v9 unknown");
    assert_int_equal(gd_dra_decode_reg_status(b.b, b.n, &reg, err, sizeof err), 0);
    assert_int_equal(reg, 1);
    assert_string_equal(err, "version v9 unknown");
    assert_int_equal(gd_dra_decode_reg_status((const uint8_t *)"", 0, &reg, err, sizeof err), 0);
    assert_int_equal(reg, 0);
    assert_string_equal(err, "");
    static const uint8_t cut[] = { 0x12, 0x09, 'a' };
    assert_int_equal(gd_dra_decode_reg_status(cut, sizeof cut, &reg, err, sizeof err), -1);
    assert_true(err[0] != '\0');
    b.n = 0;
    put_bytes(&b, 2, "a\0b", 3);
    assert_int_equal(gd_dra_decode_reg_status(b.b, b.n, &reg, err, sizeof err), -1);
}

/* A NUL in any of a claim's three strings is refused naming its field; elsewhere it is data. */
static void test_decode_claims_nul_in_each_field(void **state)
{
    char err[256], want[64];
    int n;
    (void)state;
    for (int f = 1; f <= 3; f++) {
        struct buf b = { .n = 0 }, c = { .n = 0 };
        for (int k = 1; k <= 3; k++) {
            if (k == f)
                put_bytes(&c, k, "ok\0x", 4);
            else
                put_str(&c, k, "ok");
        }
        put_bytes(&b, 1, c.b, c.n);
        err[0] = '\0';
        assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), -1);
        snprintf(want, sizeof want, "field %d holds a NUL byte", f);
        assert_string_equal(err, want);
        assert_int_equal(n, 0);
    }
    /* An unknown field of a claim (4), or of the request (2), may hold any bytes. */
    struct buf b = { .n = 0 }, c = { .n = 0 };
    put_str(&c, 1, "ns");
    put_str(&c, 2, "u");
    put_str(&c, 3, "nm");
    put_bytes(&c, 4, "a\0b", 3);
    put_bytes(&b, 1, c.b, c.n);
    put_bytes(&b, 2, "a\0b", 3);
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_string_equal(refs[0].ns, "ns");
    assert_string_equal(refs[0].uid, "u");
    assert_string_equal(refs[0].name, "nm");
}

/* Each wire type protobuf has is walked past; one cut short, or a group or bad type, is not. */
static void test_decode_claims_wire_types(void **state)
{
    static const uint8_t fixed64[] = { 0x79, 1, 2, 3, 4, 5, 6, 7, 8 };   /* field 15, type 1 */
    static const uint8_t fixed32[] = { 0x7d, 1, 2, 3, 4 };               /* field 15, type 5 */
    static const uint8_t var10[] = { 0x78, 0xff, 0xff, 0xff, 0xff, 0xff, /* 10-byte varint */
                                     0xff, 0xff, 0xff, 0xff, 0x01 };
    static const uint8_t exact[] = { 0x7a, 0x02, 'a', 'b' }; /* a length to the very end */
    static const uint8_t short64[] = { 0x79, 1, 2, 3, 4, 5, 6, 7 };
    static const uint8_t short32[] = { 0x7d, 1, 2, 3 };
    static const uint8_t group[] = { 0x7b, 0x7c }; /* start and end group */
    static const uint8_t type6[] = { 0x7e, 0x00 };
    static const uint8_t type7[] = { 0x7f, 0x00 };
    static const uint8_t cutvar[] = { 0x78, 0x80 }; /* a varint with no last byte */
    static const uint8_t cutkey[] = { 0x80 };
    static const uint8_t zero[] = { 0x02, 0x00 }; /* field 0, type 2 */
    const struct {
        const uint8_t *p;
        size_t n;
        const char *err; /* NULL: accepted */
    } cases[] = {
        { fixed64, sizeof fixed64, NULL },
        { fixed32, sizeof fixed32, NULL },
        { var10, sizeof var10, NULL },
        { exact, sizeof exact, NULL },
        { short64, sizeof short64,
          "the message is not protobuf (a field cut short or of a bad type)" },
        { short32, sizeof short32,
          "the message is not protobuf (a field cut short or of a bad type)" },
        { group, sizeof group, "the message is not protobuf (a field cut short or of a bad type)" },
        { type6, sizeof type6, "the message is not protobuf (a field cut short or of a bad type)" },
        { type7, sizeof type7, "the message is not protobuf (a field cut short or of a bad type)" },
        { cutvar, sizeof cutvar,
          "the message is not protobuf (a field cut short or of a bad type)" },
        { cutkey, sizeof cutkey, "the message is not protobuf (a bad field key)" },
        { zero, sizeof zero, "the message is not protobuf (a bad field key)" },
    };
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct buf b = { .n = 0 };
        char err[256] = "";
        int n = -1;
        put_claim(&b, "ns", "u", "c");
        memcpy(b.b + b.n, cases[i].p, cases[i].n);
        b.n += cases[i].n;
        int r = gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err);
        if (cases[i].err ? r != -1 || strcmp(err, cases[i].err) != 0 : r != 0 || n != 1)
            fail_msg("case %zu: %d, n %d, \"%s\"", i, r, n, err);
    }
}

/* The fields of a claim count toward the bound with the request's own. */
static void test_decode_claims_counts_nested_fields(void **state)
{
    char err[256] = "";
    int n;
    (void)state;
    for (int extra = 1020; extra <= 1021; extra++) {
        struct buf b = { .n = 0 };
        for (int i = 0; i < extra; i++) {
            put_varint(&b, 15 << 3);
            put_varint(&b, 1);
        }
        put_claim(&b, "ns", "u", "c"); /* 4 fields: the claim and its three */
        int r = gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err);
        if (extra == 1020) {
            assert_int_equal(r, 0);
            assert_int_equal(n, 1);
        } else {
            assert_int_equal(r, -1);
            assert_string_equal(err, "the message has more than 1024 fields");
        }
    }
}

/* A namespace and a name hold 253 bytes (a DNS subdomain); one more is refused, named. */
static void test_decode_claims_namespace_and_name_lengths(void **state)
{
    char big[300], err[256];
    int n;
    (void)state;
    memset(big, 'a', sizeof big);
    for (int which = 0; which < 2; which++) {
        struct buf b = { .n = 0 };
        big[253] = '\0';
        put_claim(&b, which ? "ns" : big, "u", which ? big : "c");
        assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), 0);
        assert_int_equal(strlen(which ? refs[0].name : refs[0].ns), 253);
        big[253] = 'a';
        big[254] = '\0';
        b.n = 0;
        put_claim(&b, "ok", "u", "c");
        put_claim(&b, which ? "ns" : big, "u", which ? big : "c");
        assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 4, &n, err, sizeof err), -1);
        assert_string_equal(err, which ? "claim 1: name is 254 bytes, more than 253"
                                       : "claim 1: namespace is 254 bytes, more than 253");
        big[254] = 'a';
    }
    /* max is the caller's: 2 claims where 1 may come */
    struct buf b = { .n = 0 };
    put_claim(&b, "a", "u1", "c");
    put_claim(&b, "a", "u2", "c");
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 2, &n, err, sizeof err), 0);
    assert_int_equal(n, 2);
    assert_int_equal(gd_dra_decode_claims(b.b, b.n, refs, 1, &n, err, sizeof err), -1);
    assert_string_equal(err, "2 claims in one call, more than 1");
}

/*
 * An answer carries at most 16 devices a claim, 4 request names and 4 CDI IDs a device; the
 * next claim's devices follow its own, whatever was left out before.
 */
static void test_encode_prepare_bounds(void **state)
{
    static struct gd_dra_answer two[2];
    uint8_t *out = NULL;
    size_t len = 0;
    (void)state;
    memset(two, 0, sizeof two);
    snprintf(two[0].uid, sizeof two[0].uid, "uid-a");
    two[0].ndev = GD_DRA_MAX_DEVS + 1;
    for (int d = 0; d < GD_DRA_MAX_DEVS; d++) {
        struct gd_dra_dev_answer *da = &two[0].dev[d];
        snprintf(da->pool, sizeof da->pool, "node-1");
        snprintf(da->device, sizeof da->device, "gpu-%d", d);
        da->nreq = 5;
        for (int q = 0; q < 4; q++)
            snprintf(da->request[q], sizeof da->request[q], "r%d", q);
        da->ncdi = GD_DRA_MAX_CDI + 1;
        for (int q = 0; q < GD_DRA_MAX_CDI; q++)
            snprintf(da->cdi[q], sizeof da->cdi[q], "k.io/c=%d-%d", d, q);
    }
    snprintf(two[1].uid, sizeof two[1].uid, "uid-b");
    two[1].ndev = 1;
    snprintf(two[1].dev[0].pool, sizeof two[1].dev[0].pool, "node-1");
    snprintf(two[1].dev[0].device, sizeof two[1].dev[0].device, "gpu-b");
    two[1].dev[0].nreq = 1;
    snprintf(two[1].dev[0].request[0], 64, "gpu");
    two[1].dev[0].ncdi = 1;
    snprintf(two[1].dev[0].cdi[0], 512, "gpuslice.io/claim=uid-b");
    assert_int_equal(gd_dra_encode_prepare(two, 2, &out, &len), 0);
    K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__NodePrepareResourcesResponse *r =
        k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__unpack(
            NULL, len, out);
    assert_non_null(r);
    assert_int_equal(r->n_claims, 2);
    assert_int_equal(r->claims[0]->value->n_devices, GD_DRA_MAX_DEVS);
    for (int d = 0; d < GD_DRA_MAX_DEVS; d++) {
        char want[32];
        const K8s__Io__Kubelet__Pkg__Apis__Dra__V1beta1__Device *wd =
            r->claims[0]->value->devices[d];
        snprintf(want, sizeof want, "gpu-%d", d);
        assert_string_equal(wd->device_name, want);
        assert_int_equal(wd->n_request_names, 4);
        assert_string_equal(wd->request_names[3], "r3");
        assert_int_equal(wd->n_cdi_device_ids, GD_DRA_MAX_CDI);
        snprintf(want, sizeof want, "k.io/c=%d-%d", d, GD_DRA_MAX_CDI - 1);
        assert_string_equal(wd->cdi_device_ids[GD_DRA_MAX_CDI - 1], want);
    }
    assert_string_equal(r->claims[1]->key, "uid-b");
    assert_int_equal(r->claims[1]->value->n_devices, 1);
    assert_string_equal(r->claims[1]->value->devices[0]->device_name, "gpu-b");
    assert_string_equal(r->claims[1]->value->devices[0]->pool_name, "node-1");
    assert_int_equal(r->claims[1]->value->devices[0]->n_request_names, 1);
    assert_string_equal(r->claims[1]->value->devices[0]->request_names[0], "gpu");
    assert_int_equal(r->claims[1]->value->devices[0]->n_cdi_device_ids, 1);
    assert_string_equal(r->claims[1]->value->devices[0]->cdi_device_ids[0],
                        "gpuslice.io/claim=uid-b");
    k8s__io__kubelet__pkg__apis__dra__v1beta1__node_prepare_resources_response__free_unpacked(r,
                                                                                              NULL);
    free(out);
}

/* PluginInfo with one version, or none (a count below one lists none). */
static void test_plugin_info_version_counts(void **state)
{
    static const char *const v[] = { "v1.DRAPlugin", "v1beta1.DRAPlugin" };
    (void)state;
    for (int k = -1; k <= 1; k++) {
        uint8_t *out = NULL;
        size_t len = 0;
        assert_int_equal(gd_dra_encode_plugin_info("d", "/e", v, k, &out, &len), 0);
        Pluginregistration__PluginInfo *pi =
            pluginregistration__plugin_info__unpack(NULL, len, out);
        assert_non_null(pi);
        assert_int_equal(pi->n_supported_versions, k > 0 ? (size_t)k : 0);
        if (k == 1)
            assert_string_equal(pi->supported_versions[0], "v1.DRAPlugin");
        assert_string_equal(pi->name, "d");
        assert_string_equal(pi->endpoint, "/e");
        pluginregistration__plugin_info__free_unpacked(pi, NULL);
        free(out);
    }
}

/* A refused registration: not registered, with the kubelet's reason; a NUL named by field. */
static void test_reg_status_refused_and_fields(void **state)
{
    struct buf b = { .n = 0 };
    char err[64];
    int reg = -1;
    (void)state;
    put_varint(&b, 1 << 3); /* plugin_registered = false, written out */
    put_varint(&b, 0);
    put_str(&b, 2, "no");
    put_bytes(&b, 3, "x\0y", 3); /* an unknown field: any bytes */
    assert_int_equal(gd_dra_decode_reg_status(b.b, b.n, &reg, err, sizeof err), 0);
    assert_int_equal(reg, 0);
    assert_string_equal(err, "no");
    b.n = 0;
    put_varint(&b, 1 << 3);
    put_varint(&b, 1);
    put_bytes(&b, 2, "a\0b", 3);
    reg = -1;
    assert_int_equal(gd_dra_decode_reg_status(b.b, b.n, &reg, err, sizeof err), -1);
    assert_string_equal(err, "field 2 holds a NUL byte");
    assert_int_equal(reg, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_claims_reads_each_field),
        cmocka_unit_test(test_decode_claims_empty_request_is_no_claims),
        cmocka_unit_test(test_decode_claims_max_and_one_more),
        cmocka_unit_test(test_decode_claims_field_lengths),
        cmocka_unit_test(test_decode_claims_refuses_empty_fields),
        cmocka_unit_test(test_decode_claims_refuses_nul_and_garbage),
        cmocka_unit_test(test_decode_claims_bounds_unknown_fields),
        cmocka_unit_test(test_encode_prepare_reads_back),
        cmocka_unit_test(test_encode_unprepare_reads_back),
        cmocka_unit_test(test_plugin_info_reads_back),
        cmocka_unit_test(test_reg_status_decodes_and_refuses),
        cmocka_unit_test(test_decode_claims_nul_in_each_field),
        cmocka_unit_test(test_decode_claims_wire_types),
        cmocka_unit_test(test_decode_claims_counts_nested_fields),
        cmocka_unit_test(test_decode_claims_namespace_and_name_lengths),
        cmocka_unit_test(test_encode_prepare_bounds),
        cmocka_unit_test(test_plugin_info_version_counts),
        cmocka_unit_test(test_reg_status_refused_and_fields),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
