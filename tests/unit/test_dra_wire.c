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
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
