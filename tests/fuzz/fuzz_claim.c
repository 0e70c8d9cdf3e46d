/*
 * The DRA driver's readers (dra_doc.c) on any JSON: gd_dra_claim_read (a ResourceClaim as the
 * API server would send it) and gd_dra_checkpoint_read. Checked: 0 or -1, an error message
 * exactly when -1 and nothing left in out then; on success every hold names one of the node's
 * GPUs by its exact gpu-<index>, within its memory, cores 0..100, 1..4 requests, every string
 * NUL-terminated inside its field; and what was read survives the checkpoint's round trip.
 */
#include <jansson.h>

#include "daemon/dra.h"
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
    json_decref(j);
    return 0;
}
