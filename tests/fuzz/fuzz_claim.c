/*
 * The DRA driver's readers (dra_doc.c) on any JSON: gd_dra_claim_read (a ResourceClaim as the
 * API server would send it) and gd_dra_checkpoint_read. Checked: 0 or -1, an error message
 * exactly when -1 and nothing left in out then; on success every hold names one of the node's
 * GPUs by its exact gpu-<index>, within its memory, cores 0..100, 1..4 requests, every string
 * NUL-terminated inside its field; and what was read survives the checkpoint's round trip.
 * And the readers of NVIDIA's driver's documents (nvclaim_doc.c) on the same input: as a claim
 * of gpu.nvidia.com for a pod (refused naming it, or results of that driver on node-a's pool
 * only), as a ResourceSlice list (devices named, with a uuid), as a pod (claim names that are
 * object names, each once), and the limits those results make: one entry per GPU, none of 0,
 * never more than the claim and the annotation each allow.
 */
#include <jansson.h>

#include "daemon/dra.h"
#include "daemon/nvclaim.h"
#include "fuzz.h"

#define TERMINATED(s) (memchr((s), '\0', sizeof(s)) != NULL)

static const struct gd_dra_gpu gpus[] = {
    { 0, "GPU-11111111-2222-3333-4444-555555555555", "H100", "550.54.15", "hopper", 132,
      80ull << 30 },
    { 3, "GPU-99999999-8888-7777-6666-555555555555", "T4", "535.104.05", "turing", 40,
      (15ull << 30) + (100ull << 20) },
};
static const struct gd_dra_ref ref = { "default", "u1", "c" };

static int all_zero(const void *p, size_t n)
{
    const unsigned char *b = p;
    size_t i;

    for (i = 0; i < n; i++)
        if (b[i])
            return 0;
    return 1;
}

static void check_claim(const struct gd_dra_claim *c, int against_gpus)
{
    int h, k, g;

    FUZZ_CHECK(TERMINATED(c->ns) && TERMINATED(c->name) && TERMINATED(c->uid), "names");
    FUZZ_CHECK(c->nhold >= 1 && c->nhold <= GD_DRA_MAX_DEVS, "%d holds", c->nhold);
    FUZZ_CHECK(c->npod >= 0 && c->npod <= 8, "%d pods", c->npod);
    FUZZ_CHECK(c->priority <= 3 && c->weight <= 100, "priority %u weight %u", c->priority,
               c->weight);
    for (k = 0; k < c->npod; k++)
        FUZZ_CHECK(TERMINATED(c->pod_uid[k]) && c->pod_uid[k][0], "pod %d", k);
    for (h = 0; h < c->nhold; h++) {
        const struct gd_dra_hold *x = &c->hold[h];
        char want[32];

        FUZZ_CHECK(TERMINATED(x->uuid) && TERMINATED(x->device), "hold %d strings", h);
        FUZZ_CHECK(x->nreq >= 1 && x->nreq <= 4, "hold %d: %d requests", h, x->nreq);
        for (k = 0; k < x->nreq; k++)
            FUZZ_CHECK(TERMINATED(x->request[k]) && x->request[k][0], "hold %d request %d", h, k);
        FUZZ_CHECK(x->cores >= 0 && x->cores <= 100, "hold %d: cores %d", h, x->cores);
        if (!against_gpus)
            continue;
        for (g = 0; g < 2; g++) {
            snprintf(want, sizeof(want), "gpu-%d", gpus[g].index);
            if (strcmp(x->device, want) == 0)
                break;
        }
        FUZZ_CHECK(g < 2, "hold %d: device \"%s\" is none of the GPUs", h, x->device);
        FUZZ_CHECK(strcmp(x->uuid, gpus[g].uuid) == 0, "hold %d: uuid %s", h, x->uuid);
        FUZZ_CHECK(x->mem_bytes <= gpus[g].mem_total, "hold %d: %llu bytes", h,
                   (unsigned long long)x->mem_bytes);
        for (k = 0; k < h; k++)
            FUZZ_CHECK(strcmp(c->hold[k].device, x->device) != 0, "%s held twice", x->device);
    }
}

/* NVIDIA's driver's readers on document j (nvclaim_doc.c). */
static void check_nvidia(const json_t *j)
{
    static struct gd_nv_claim c;
    static struct gd_nv_dev dev[8];
    static char names[GD_POD_MAX_CLAIMS][GD_CLAIM_NAME_LEN];
    static const char *const uuids[] = { "GPU-11111111-2222-3333-4444-555555555555",
                                         "GPU-99999999-8888-7777-6666-555555555555", "MIG-1" };
    struct gs_limits l, ann, out;
    unsigned char whole[GS_MAX_LIMIT_ENTRIES];
    char err[512];
    int r, k, n, pending;

    err[0] = '\0';
    r = gd_nv_claim_read(j, "default", "c", "node-a", "u1", &c, err, sizeof(err));
    FUZZ_CHECK((r == 0 && err[0] == '\0') ||
                   (r == -1 && strncmp(err, "claim default/c: ", 17) == 0),
               "nv claim_read: r %d, err \"%s\"", r, err);
    if (r < 0)
        FUZZ_CHECK(all_zero(&c, sizeof(c)), "a refused NVIDIA claim left in out");
    FUZZ_CHECK(c.n >= 0 && c.n <= GD_NV_MAX_RESULTS && TERMINATED(c.uid) && TERMINATED(c.rv),
               "nv claim: %d results", c.n);
    memset(&l, 0, sizeof(l));
    memset(whole, 0, sizeof(whole));
    for (k = 0; k < c.n; k++) {
        FUZZ_CHECK(TERMINATED(c.r[k].device) && c.r[k].device[0], "result %d's device", k);
        (void)gd_nv_limits_add(&l, whole, uuids[k % 3], c.r[k].mem, err, sizeof(err));
    }
    gd_nv_limits_done(&l, whole);
    FUZZ_CHECK(l.n >= 0 && l.n <= 2, "%d GPUs from 2 UUIDs", l.n);
    for (k = 0; k < l.n; k++)
        FUZZ_CHECK(l.e[k].key == GS_KEY_UUID && l.e[k].value > 0, "limit %d", k);
    memset(&ann, 0, sizeof(ann));
    ann.n = 1;
    ann.e[0].key = GS_KEY_ALL;
    ann.e[0].value = 2ull << 30;
    FUZZ_CHECK(gd_nv_merge(&ann, &l, &out, err, sizeof(err)) == 0, "merge: %s", err);
    FUZZ_CHECK(out.n == 1 + l.n, "merged %d of %d", out.n, 1 + l.n);
    for (k = 1; k < out.n; k++)
        FUZZ_CHECK(out.e[k].value <= ann.e[0].value && out.e[k].value <= l.e[k - 1].value,
                   "merged %d over a bound", k);
    r = gd_nv_slices_read(j, "node-a", dev, 8, &n, err, sizeof(err));
    FUZZ_CHECK((r == 0 && n >= 0 && n <= 8) || (r == -1 && n == 0), "slices: r %d n %d", r, n);
    for (k = 0; k < n; k++)
        FUZZ_CHECK(TERMINATED(dev[k].name) && dev[k].name[0] && TERMINATED(dev[k].uuid) &&
                       dev[k].uuid[0],
                   "device %d", k);
    n = gd_nv_pod_claims(j, names, GD_POD_MAX_CLAIMS, &pending, err, sizeof(err));
    FUZZ_CHECK(n >= -1 && n <= GD_POD_MAX_CLAIMS && pending >= 0, "pod claims %d", n);
    for (k = 0; k < n; k++) {
        FUZZ_CHECK(TERMINATED(names[k]) && names[k][0] &&
                       strspn(names[k], "abcdefghijklmnopqrstuvwxyz0123456789-.") ==
                           strlen(names[k]),
                   "claim name %d \"%s\"", k, names[k]);
        for (r = 0; r < k; r++)
            FUZZ_CHECK(strcmp(names[r], names[k]) != 0, "claim %s twice", names[k]);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct gd_dra_claim c, back[4];
    json_t *j = json_loadb((const char *)data, size, 0, NULL), *cp;
    char err[512];
    int r, n;

    if (j == NULL)
        return 0;
    err[0] = '\0';
    r = gd_dra_claim_read(j, &ref, "node-a", gpus, 2, &c, err, sizeof(err));
    FUZZ_CHECK(r == 0 || r == -1, "claim_read returned %d", r);
    FUZZ_CHECK((r == -1) == (err[0] != '\0'), "r %d, err \"%s\"", r, err);
    if (r < 0) {
        FUZZ_CHECK(strncmp(err, "claim default/c: ", 17) == 0, "\"%s\" names no claim", err);
        FUZZ_CHECK(all_zero(&c, sizeof(c)), "a refused claim left in out");
    } else {
        check_claim(&c, 1);
        cp = gd_dra_checkpoint_json(&c, 1);
        FUZZ_CHECK(cp != NULL, "no checkpoint");
        r = gd_dra_checkpoint_read(cp, back, 4, &n, err, sizeof(err));
        FUZZ_CHECK(r == 0 && n == 1, "the checkpoint of a read claim is refused: %s", err);
        FUZZ_CHECK(back[0].claim_set == 0, "the checkpoint kept who set the class");
        c.claim_set = 0; /* judged at Prepare only, not kept (dra.h) */
        FUZZ_CHECK(memcmp(&back[0], &c, sizeof(c)) == 0, "the checkpoint changed the claim");
        json_decref(cp);
    }
    err[0] = '\0';
    r = gd_dra_checkpoint_read(j, back, 4, &n, err, sizeof(err));
    FUZZ_CHECK((r == 0 && err[0] == '\0' && n >= 0 && n <= 4) ||
                   (r == -1 && err[0] != '\0' && n == 0 && all_zero(back, sizeof(back))),
               "checkpoint_read: r %d n %d err \"%s\"", r, n, err);
    for (r = 0; r < n; r++)
        check_claim(&back[r], 0);
    check_nvidia(j);
    json_decref(j);
    return 0;
}
