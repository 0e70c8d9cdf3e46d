/*
 * Device memory of the simulated driver: every allocation family (plain,
 * pitched, managed, stream-ordered pools, VMM, arrays), the process-local map
 * of device addresses, and the charges each family makes on the shared device.
 * What each family reserves follows what an H200's driver was measured to do
 * (tests/sim/README.md); the rules are in one place below, "what the driver
 * reserves". Device memory has no backing except managed memory, which is
 * host-mapped so the host may touch it.
 */
#define _GNU_SOURCE
#include "sim_cuda.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* Where device addresses come from: the 32-bit legacy calls need low ones. */
#define SIM_VA_LO 0x200000000000ull
#define SIM_VA_HI 0x300000000000ull
#define SIM_VA32_LO 0x00200000ull
#define SIM_VA32_HI 0x100000000ull

/*
 * ---- what the driver reserves -------------------------------------------
 * Measured on an H200 (driver 580.159.04, CUDA 13.0, 2026-12-01) by
 * tests/gpu/driver_facts.c; tests/sim/README.md lists each measurement and
 * what is still unknown. Change a rule here when more is measured.
 */

/* Device memory comes in pages of 2 MiB, aligned so in device addresses. */
#define SIM_PAGE SIM_GRANULE
/* Small requests are rounded to this and packed into shared pages. */
#define SIM_SMALL_ALIGN 512u
/* A stream-ordered pool takes memory from the device in chunks of this. */
#define SIM_POOL_CHUNK ((uint64_t)32 << 20)

_Static_assert(SIM_PAGE / SIM_SMALL_ALIGN == SIM_PAGE_BLOCKS, "a page's blocks");

/*
 * cuMemAlloc: a request under a page, rounded to 512 bytes, shares a page
 * with others of its context (first fit; 4000 x 512 B took one page, 512 x
 * 4 KiB one, 2 x 1 MiB one, 1 MiB + 4 KiB one each); a page goes back to the
 * device with its last allocation. A larger request takes whole pages of its
 * own (2 MiB + 1 -> 4 MiB, 33 MiB + 1 -> 34 MiB). Unknown: whether small
 * requests may use the tail of a large one's last page (here they may not).
 */
static int alloc_is_small(uint64_t size)
{
    return sim_round_up(size, SIM_SMALL_ALIGN) < SIM_PAGE;
}

static unsigned small_blocks(uint64_t size)
{
    return (unsigned)(sim_round_up(size, SIM_SMALL_ALIGN) / SIM_SMALL_ALIGN);
}

static uint64_t large_bytes(uint64_t size)
{
    return sim_round_up(size, SIM_PAGE);
}

/*
 * cuMemAllocPitch: the pitch, for element sizes 4, 8 and 16 alike; pitch *
 * height is allocated as cuMemAlloc allocates it.
 */
static uint64_t pitch_of(uint64_t width)
{
    /*
     * GPUSLICE_SIM_PITCH_ALIGN=N (a power of two from 512 to 65536): rows padded to N, wider
     * than the 512 the interposer estimates with (a driver or GPU that pads more).
     */
    return sim_round_up(width, sim_drv.cfg.pitch_align);
}

/*
 * Arrays take whole pages of their own, and a block-linear layout: rows of
 * 64-byte units (a GOB's width), heights in blocks of 8 * 2^k rows, depths
 * in blocks of 2^k slices. 1-D arrays (height 0) are their elements rounded
 * to pages. For 2-D arrays the block height is the smallest of 8, 16, 32,
 * 64, 128 rows that holds the array's height (at most 128: not measured
 * apart from the shapes below); for 3-D arrays the height is rounded to 8
 * rows and the depth to a block of the smallest power of two that holds it, at
 * most 16 — every one of the 353 "a3" lines of driver_facts --more matches
 * (test_every_measured_3d_array_…). Fitted to every measurement (2-D: 1x1, 100x100,
 * 1000x1000 u8 -> 2 MiB, 1000x1000 float4 -> 16 MiB, 4096x4096 float4 ->
 * 256 MiB, 4096x4096 half2 -> 64 MiB, 1001x999 float2 -> 8 MiB; 1-D 3000
 * floats -> 2 MiB; 3-D 256^3 float -> 64 MiB, 100^3 uchar4 -> 6 MiB,
 * 1000x1000x10 half -> 32 MiB), but not the only rule that fits: see README.
 * Width 1048576 float4 in 1-D failed on the H200; 1-D widths above 131072
 * (the H100/H200 maximum 1-D texture width) are refused here.
 */
#define SIM_ARRAY_ROW_ALIGN 64u
#define SIM_ARRAY_MAX_1D_WIDTH 131072u

static uint64_t block_of(uint64_t n, uint64_t first, uint64_t max)
{
    uint64_t b = first;

    while (b < n && b < max)
        b *= 2;
    return b;
}

/* Bytes an array reserves; 0 when it is too large to describe. Dimensions are at least 1. */
static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t d, uint64_t esize, int dims)
{
    uint64_t row, rows, slices;

    if (w > SIM_MAX_BYTES / esize)
        return 0;
    if (dims == 1)
        return sim_round_up(w * esize, SIM_PAGE);
    row = sim_round_up(w * esize, SIM_ARRAY_ROW_ALIGN);
    rows = sim_round_up(h, dims == 2 ? block_of(h, 8, 128) : 8);
    slices = dims == 2 ? 1 : sim_round_up(d, block_of(d, 1, 16));
    if (rows > SIM_MAX_BYTES / row || slices > SIM_MAX_BYTES / (row * rows))
        return 0;
    return sim_round_up(row * rows * slices, SIM_PAGE);
}

/*
 * Pools: what an allocation uses (its size, to 512 bytes: 4 KiB used 4 KiB).
 * A pool is one range of addresses, backed by 32 MiB chunks of device memory
 * where something lies; an allocation takes the first hole of the range that
 * holds it, else goes after the last, and the chunks it lies in that are not
 * backed yet are taken from the device. So from empty or held one after
 * another the pool grows to its use rounded up to 32 MiB (4 KiB from empty ->
 * 32 MiB, 33 MiB + 1 -> 64, 1 GiB + 1 -> 1056; 4K, 4K, 1M, 20M, 8M -> 32 MiB,
 * +4M -> 64, +40M -> 96, +1M -> 96, +100M -> 192), and a pool with room by
 * count may still grow: 20 + 20 MiB held (64 reserved), the first freed and
 * synchronised (64, 20 used), then 30 MiB: 96 (h200-driver-facts.txt, "pool
 * frag": the hole of 20 and the 24 at the end do not hold it). Where in a
 * hole an allocation goes was not measured (first fit here), nor alignment
 * beyond 512 bytes. Default and created pools alike.
 */
static uint64_t pool_use(uint64_t size)
{
    return sim_round_up(size, SIM_SMALL_ALIGN);
}

/* Where an allocation of len goes in p's range: the first hole that holds it, else the end. */
static uint64_t pool_place(const struct CUmemPoolHandle_st *p, uint64_t len)
{
    uint64_t at = 0;

    for (unsigned i = 0; i < p->nblocks; i++) {
        if (p->blocks[i].off - at >= len)
            return at;
        at = p->blocks[i].off + p->blocks[i].len;
    }
    return at;
}

/* What p reserves with nmapped chunks backed (at most its maximum size, where it has one). */
static uint64_t pool_reserve_of(const struct CUmemPoolHandle_st *p, uint64_t nmapped)
{
    uint64_t r = nmapped * SIM_POOL_CHUNK;

    return p->max_size && r > p->max_size ? p->max_size : r;
}

/* Whether a live allocation of p lies in chunk c. */
static int pool_chunk_used(const struct CUmemPoolHandle_st *p, uint64_t c)
{
    uint64_t lo = c * SIM_POOL_CHUNK, hi = lo + SIM_POOL_CHUNK;

    for (unsigned i = 0; i < p->nblocks && p->blocks[i].off < hi; i++)
        if (p->blocks[i].off + p->blocks[i].len > lo)
            return 1;
    return 0;
}

/* ---- the address map -------------------------------------------------- */

/* Index of the last range with base <= p, or -1. */
static long range_index(CUdeviceptr p)
{
    long lo = 0, hi = (long)sim_drv.nranges - 1, found = -1;

    while (lo <= hi) {
        long mid = lo + (hi - lo) / 2;
        if (sim_drv.ranges[mid].base <= p) {
            found = mid;
            lo = mid + 1;
        } else {
            hi = mid - 1;
        }
    }
    return found;
}

static struct sim_range *range_containing(CUdeviceptr p)
{
    long i = range_index(p);

    if (i < 0 || p - sim_drv.ranges[i].base >= sim_drv.ranges[i].span)
        return NULL;
    return &sim_drv.ranges[i];
}

static struct sim_range *range_at(CUdeviceptr base)
{
    long i = range_index(base);

    return i >= 0 && sim_drv.ranges[i].base == base ? &sim_drv.ranges[i] : NULL;
}

static int range_insert(const struct sim_range *r)
{
    long i = range_index(r->base) + 1;

    if (sim_drv.nranges == sim_drv.cap) {
        size_t cap = sim_drv.cap ? sim_drv.cap * 2 : 64;
        struct sim_range *n = realloc(sim_drv.ranges, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        sim_drv.ranges = n;
        sim_drv.cap = cap;
    }
    memmove(&sim_drv.ranges[i + 1], &sim_drv.ranges[i], (sim_drv.nranges - (size_t)i) * sizeof(*r));
    sim_drv.ranges[i] = *r;
    sim_drv.nranges++;
    return 0;
}

static void range_remove(struct sim_range *r)
{
    size_t i = (size_t)(r - sim_drv.ranges);

    memmove(&sim_drv.ranges[i], &sim_drv.ranges[i + 1], (sim_drv.nranges - i - 1) * sizeof(*r));
    sim_drv.nranges--;
}

/* First fit of span bytes aligned to align in [lo, hi); a free hint is taken as is. */
static int va_find(uint64_t lo, uint64_t hi, uint64_t span, uint64_t align, CUdeviceptr hint,
                   CUdeviceptr *out)
{
    uint64_t cur = sim_round_up(lo, align);

    if (span == 0 || span > hi - lo)
        return -ENOMEM;
    if (hint && hint % align == 0 && hint >= lo && hint <= hi - span) {
        long i = range_index(hint + span - 1);
        if (i < 0 || sim_drv.ranges[i].base + sim_drv.ranges[i].span <= hint) {
            *out = hint;
            return 0;
        }
    }
    for (size_t i = 0; i < sim_drv.nranges; i++) {
        const struct sim_range *r = &sim_drv.ranges[i];
        if (r->base + r->span <= cur)
            continue;
        if (r->base >= cur + span || r->base >= hi)
            break;
        cur = sim_round_up(r->base + r->span, align);
        if (cur > hi - span)
            return -ENOMEM;
    }
    if (cur > hi - span)
        return -ENOMEM;
    *out = cur;
    return 0;
}

/* ---- plain allocations ------------------------------------------------ */

/* Makes a page for small allocations of c; its 2 MiB are charged at once. */
static struct sim_range *page_new(struct CUctx_st *c, int low32)
{
    struct sim_range r = { .kind = SIM_RANGE_PAGE, .dev = c->dev, .ctx = c };

    r.span = r.charged = SIM_PAGE;
    if (va_find(low32 ? SIM_VA32_LO : SIM_VA_LO, low32 ? SIM_VA32_HI : SIM_VA_HI, r.span, SIM_PAGE,
                0, &r.base) < 0)
        return NULL;
    if (!(r.page = calloc(1, sizeof(*r.page))))
        return NULL;
    r.page->free_blocks = SIM_PAGE_BLOCKS;
    r.page->low32 = low32;
    if (sim_state_charge(&sim_drv.st, sim_phys(c->dev), r.charged) < 0) {
        free(r.page);
        return NULL;
    }
    if (range_insert(&r) < 0) {
        sim_state_uncharge(&sim_drv.st, sim_phys(c->dev), r.charged);
        free(r.page);
        return NULL;
    }
    return range_at(r.base);
}

/* The first run of n free blocks in pg, or -1. */
static int page_fit(const struct sim_page *pg, unsigned n)
{
    unsigned run = 0;

    if (pg->free_blocks < n)
        return -1;
    for (unsigned i = 0; i < SIM_PAGE_BLOCKS; i++) {
        run = pg->owner[i] ? 0 : run + 1;
        if (run == n)
            return (int)(i + 1 - n);
    }
    return -1;
}

/* A small request: first fit in c's pages, in address order, else a new page. */
static CUresult alloc_small(struct CUctx_st *c, uint64_t size, int low32, CUdeviceptr *out)
{
    unsigned n = small_blocks(size);
    struct sim_range *pr = NULL;
    int at = -1;

    for (size_t i = 0; i < sim_drv.nranges && at < 0; i++) {
        struct sim_range *r = &sim_drv.ranges[i];
        if (r->kind == SIM_RANGE_PAGE && r->ctx == c && r->page->low32 == low32 &&
            (at = page_fit(r->page, n)) >= 0)
            pr = r;
    }
    if (at < 0) {
        if (!(pr = page_new(c, low32)))
            return CUDA_ERROR_OUT_OF_MEMORY;
        at = 0;
    }
    for (unsigned i = 0; i < n; i++)
        pr->page->owner[at + (int)i] = (uint16_t)(at + 1);
    pr->page->size[at] = (uint32_t)size;
    pr->page->count++;
    pr->page->free_blocks -= n;
    *out = pr->base + (CUdeviceptr)at * SIM_SMALL_ALIGN;
    return CUDA_SUCCESS;
}

/* The allocation in page range pr holding p: its first block, or -1. */
static int page_alloc_at(const struct sim_range *pr, CUdeviceptr p)
{
    unsigned blk = (unsigned)((p - pr->base) / SIM_SMALL_ALIGN);

    return pr->page->owner[blk] ? pr->page->owner[blk] - 1 : -1;
}

/* Frees the allocation starting at block at; the page goes with its last one. */
static void small_free(struct sim_range *pr, int at)
{
    struct sim_page *pg = pr->page;
    unsigned n = small_blocks(pg->size[at] ? pg->size[at] : 1);

    for (unsigned i = 0; i < n; i++)
        pg->owner[at + (int)i] = 0;
    pg->size[at] = 0;
    pg->free_blocks += n;
    if (--pg->count == 0) {
        sim_state_uncharge(&sim_drv.st, sim_phys(pr->dev), pr->charged);
        free(pg);
        range_remove(pr);
    }
}

static CUresult alloc_device(struct CUctx_st *c, uint64_t size, int low32, CUdeviceptr *out)
{
    struct sim_range r = { .size = size, .kind = SIM_RANGE_ALLOC, .dev = c->dev, .ctx = c };

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIM_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (alloc_is_small(size))
        return alloc_small(c, size, low32, out);
    r.span = r.charged = large_bytes(size);
    if (va_find(low32 ? SIM_VA32_LO : SIM_VA_LO, low32 ? SIM_VA32_HI : SIM_VA_HI, r.span, SIM_PAGE,
                0, &r.base) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (sim_state_charge(&sim_drv.st, sim_phys(c->dev), r.charged) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (range_insert(&r) < 0) {
        sim_state_uncharge(&sim_drv.st, sim_phys(c->dev), r.charged);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *out = r.base;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_check_unsafe()) == CUDA_SUCCESS)
        r = dptr ? alloc_device(c, bytesize, 0, dptr) : CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
    struct CUctx_st *c;
    CUdeviceptr p = 0;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if ((r = sim_capture_check_unsafe()) == CUDA_SUCCESS)
        r = dptr ? alloc_device(c, bytesize, 1, &p) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS)
        *dptr = (CUdeviceptr_v1)p;
    sim_leave();
    return r;
}

/* The whole pitch * height is allocated, packed as cuMemAlloc packs it. */
static CUresult alloc_pitch(size_t width, size_t height, unsigned elem, int low32,
                            CUdeviceptr *dptr, size_t *pitch)
{
    struct CUctx_st *c;
    uint64_t p;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    p = pitch_of(width);
    if (!dptr || !pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16) ||
        width > SIM_MAX_BYTES)
        r = CUDA_ERROR_INVALID_VALUE;
    else if (height > SIM_MAX_BYTES / p)
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else if ((r = sim_capture_check_unsafe()) == CUDA_SUCCESS &&
             (r = alloc_device(c, p * height, low32, dptr)) == CUDA_SUCCESS)
        *pitch = (size_t)p;
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                       size_t Height, unsigned int ElementSizeBytes)
{
    return alloc_pitch(WidthInBytes, Height, ElementSizeBytes, 0, dptr, pPitch);
}

SIM_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                    unsigned int WidthInBytes, unsigned int Height,
                                    unsigned int ElementSizeBytes)
{
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult r;

    if (!dptr || !pPitch)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    r = alloc_pitch(WidthInBytes, Height, ElementSizeBytes, 1, &p, &pitch);
    if (r == CUDA_SUCCESS) {
        *dptr = (CUdeviceptr_v1)p;
        *pPitch = (unsigned int)pitch;
    }
    return r;
}

/* Counted as device memory, and host-mapped (lazily, never reserved) so the host may use it. */
SIM_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    struct CUctx_st *c;
    struct sim_range rg = { .kind = SIM_RANGE_MANAGED };
    size_t page = 4096;
    void *host;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!dptr || bytesize == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if ((r = sim_capture_check_unsafe()) != CUDA_SUCCESS)
        goto out;
    if (bytesize > SIM_MAX_BYTES) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    rg.size = bytesize;
    rg.span = sim_round_up(bytesize, page);
    rg.charged = sim_round_up(bytesize, SIM_GRANULE);
    rg.dev = c->dev;
    rg.ctx = c;
    if (sim_state_charge(&sim_drv.st, sim_phys(c->dev), rg.charged) < 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    host = mmap(NULL, rg.span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                -1, 0);
    if (host == MAP_FAILED) {
        sim_state_uncharge(&sim_drv.st, sim_phys(c->dev), rg.charged);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    rg.host = host;
    rg.base = (CUdeviceptr)(uintptr_t)host;
    if (range_insert(&rg) < 0) {
        munmap(host, rg.span);
        sim_state_uncharge(&sim_drv.st, sim_phys(c->dev), rg.charged);
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    *dptr = rg.base;
out:
    sim_leave();
    return r;
}

/* ---- pools ------------------------------------------------------------ */

static struct CUmemPoolHandle_st *pool_new(int dev, int is_default, uint64_t max_size)
{
    struct CUmemPoolHandle_st *p = calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    p->dev = dev;
    p->is_default = is_default;
    p->max_size = max_size;
    p->reuse[0] = p->reuse[1] = p->reuse[2] = 1;
    p->next = sim_drv.pools;
    sim_drv.pools = p;
    return p;
}

static void pool_unlink(struct CUmemPoolHandle_st *p)
{
    struct CUmemPoolHandle_st **pp;

    for (pp = &sim_drv.pools; *pp; pp = &(*pp)->next) {
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    }
    free(p->blocks);
    free(p->mapped);
    free(p);
}

int sim_mem_init_pools(void)
{
    for (uint32_t d = 0; d < sim_drv.cfg.devices; d++) {
        struct CUmemPoolHandle_st *p = pool_new((int)d, 1, 0);
        if (!p)
            return -ENOMEM;
        sim_drv.default_pool[d] = sim_drv.current_pool[d] = p;
    }
    return 0;
}

static struct CUmemPoolHandle_st *pool_find(CUmemoryPool h)
{
    for (struct CUmemPoolHandle_st *p = sim_drv.pools; p; p = p->next)
        if (p == h && !p->destroyed)
            return p;
    return NULL;
}

/*
 * Gives back unused chunks, the last first, while the pool reserves more than
 * the whole chunks in keep bytes (at a synchronisation: keep = its release
 * threshold; cuMemPoolTrimTo: the bytes asked); never a chunk an allocation
 * lies in (two 8 MiB held, one freed, synchronised: 32 MiB stay; both freed: 0;
 * threshold UINT64_MAX: a freed 4 KiB leaves 32 MiB; trimmed to 0: 0).
 */
static void pool_shrink_to(struct CUmemPoolHandle_st *p, uint64_t keep)
{
    uint64_t k = keep / SIM_POOL_CHUNK, reserved;

    for (uint64_t c = p->nchunks; c-- > 0 && p->nmapped > k;) {
        if (p->mapped[c] && !pool_chunk_used(p, c)) {
            p->mapped[c] = 0;
            p->nmapped--;
        }
    }
    reserved = pool_reserve_of(p, p->nmapped);
    if (p->reserved > reserved) {
        sim_state_uncharge(&sim_drv.st, sim_phys(p->dev), p->reserved - reserved);
        p->reserved = reserved;
    }
}

/* Records a live allocation [off, off + len) of p, kept in order of offset; 0 or -1. */
static int pool_block_add(struct CUmemPoolHandle_st *p, uint64_t off, uint64_t len)
{
    unsigned i;

    if (p->nblocks == p->blocks_cap) {
        unsigned cap = p->blocks_cap ? p->blocks_cap * 2 : 16;
        struct sim_pool_block *b = realloc(p->blocks, cap * sizeof(*b));
        if (!b)
            return -1;
        p->blocks = b;
        p->blocks_cap = cap;
    }
    for (i = p->nblocks; i > 0 && p->blocks[i - 1].off > off; i--)
        p->blocks[i] = p->blocks[i - 1];
    p->blocks[i].off = off;
    p->blocks[i].len = len;
    p->nblocks++;
    return 0;
}

static void pool_block_remove(struct CUmemPoolHandle_st *p, uint64_t off)
{
    for (unsigned i = 0; i < p->nblocks; i++) {
        if (p->blocks[i].off == off) {
            memmove(&p->blocks[i], &p->blocks[i + 1], (p->nblocks - i - 1) * sizeof(p->blocks[0]));
            p->nblocks--;
            return;
        }
    }
}

/* At a synchronisation, a pool holding more than its release threshold gives back what it may. */
void sim_pools_settle(int dev)
{
    for (struct CUmemPoolHandle_st *p = sim_drv.pools; p; p = p->next)
        if (p->dev == dev && p->reserved > p->threshold)
            pool_shrink_to(p, p->threshold);
}

void sim_sync_then_settle(uint64_t until, int dev)
{
    sim_sleep_until(until);
    if (sim_enter() == CUDA_SUCCESS) {
        sim_pools_settle(dev);
        sim_leave();
    }
}

/*
 * U grows by the allocation's use; the chunks it lies in that are not backed
 * yet are taken from the device (see pool_place), and an allocation the
 * device or the pool's maximum size cannot hold changes nothing.
 */
static CUresult pool_alloc(struct CUmemPoolHandle_st *p, struct CUctx_st *c, size_t size,
                           CUdeviceptr *out)
{
    struct sim_range r = {
        .size = size, .kind = SIM_RANGE_POOL, .dev = p->dev, .ctx = c, .pool = p
    };
    uint64_t used, reserved, first, last, grown = 0;

    if (size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (size > SIM_MAX_BYTES)
        return CUDA_ERROR_OUT_OF_MEMORY;
    r.charged = pool_use(size);
    r.span = sim_round_up(size, SIM_PAGE);
    used = p->used + r.charged;
    r.pool_off = pool_place(p, r.charged);
    /* Unmeasured: a capped pool grows to its cap, not a whole chunk past it. */
    if (p->max_size && (used > p->max_size || r.pool_off + r.charged > p->max_size))
        return CUDA_ERROR_OUT_OF_MEMORY;
    first = r.pool_off / SIM_POOL_CHUNK;
    last = (r.pool_off + r.charged - 1) / SIM_POOL_CHUNK;
    if (last >= p->nchunks) {
        uint8_t *m = realloc(p->mapped, last + 1);
        if (!m)
            return CUDA_ERROR_OUT_OF_MEMORY;
        memset(m + p->nchunks, 0, last + 1 - p->nchunks);
        p->mapped = m;
        p->nchunks = last + 1;
    }
    for (uint64_t k = first; k <= last; k++)
        grown += !p->mapped[k];
    reserved = pool_reserve_of(p, p->nmapped + grown);
    if (va_find(SIM_VA_LO, SIM_VA_HI, r.span, SIM_PAGE, 0, &r.base) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (reserved > p->reserved &&
        sim_state_charge(&sim_drv.st, sim_phys(p->dev), reserved - p->reserved) < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (pool_block_add(p, r.pool_off, r.charged) < 0 || range_insert(&r) < 0) {
        pool_block_remove(p, r.pool_off);
        if (reserved > p->reserved)
            sim_state_uncharge(&sim_drv.st, sim_phys(p->dev), reserved - p->reserved);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (uint64_t k = first; k <= last; k++)
        p->mapped[k] = 1;
    p->nmapped += grown;
    p->reserved = reserved;
    p->used = used;
    if (p->used > p->used_high)
        p->used_high = p->used;
    if (p->reserved > p->reserved_high)
        p->reserved_high = p->reserved;
    *out = r.base;
    return CUDA_SUCCESS;
}

/* Frees any allocation (not a VMM reservation); the range pointer dies with it. */
static void range_free(struct sim_range *r)
{
    struct CUmemPoolHandle_st *p = r->pool;

    switch (r->kind) {
    case SIM_RANGE_POOL:
        p->used -= r->charged;
        pool_block_remove(p, r->pool_off);
        range_remove(r);
        /* A destroyed pool goes once its last allocation does. */
        if (p->destroyed && p->used == 0) {
            pool_shrink_to(p, 0);
            pool_unlink(p);
        }
        return;
    case SIM_RANGE_PAGE: /* all of its allocations at once (a context's teardown) */
        sim_state_uncharge(&sim_drv.st, sim_phys(r->dev), r->charged);
        free(r->page);
        range_remove(r);
        return;
    case SIM_RANGE_MANAGED:
        munmap(r->host, r->span);
        /* fall through */
    case SIM_RANGE_ALLOC:
        sim_state_uncharge(&sim_drv.st, sim_phys(r->dev), r->charged);
        range_remove(r);
        return;
    case SIM_RANGE_VA:
        return;
    }
}

/* Frees the allocation that starts at dptr: a whole range, or one in a shared page. */
/* The index of dptr among the stream-ordered frees not done yet, or -1. */
static int pending_free(CUdeviceptr dptr)
{
    unsigned i;

    for (i = 0; i < sim_drv.npending; i++)
        if (sim_drv.pending_frees[i].ptr == dptr)
            return (int)i;
    return -1;
}

/* Whether dptr is the start of a live allocation that cuMemFree may free. */
static int freeable(CUdeviceptr dptr)
{
    struct sim_range *r = range_containing(dptr);
    int at;

    if (pending_free(dptr) >= 0)
        return 0; /* already freed, in stream order */
    if (r && r->kind == SIM_RANGE_PAGE)
        return (at = page_alloc_at(r, dptr)) >= 0 &&
               r->base + (CUdeviceptr)at * SIM_SMALL_ALIGN == dptr;
    return r && r->base == dptr && r->kind != SIM_RANGE_VA;
}

static CUresult free_at(CUdeviceptr dptr)
{
    struct sim_range *r = range_containing(dptr);
    int at;

    if (pending_free(dptr) >= 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (r && r->kind == SIM_RANGE_PAGE) {
        if ((at = page_alloc_at(r, dptr)) < 0 ||
            r->base + (CUdeviceptr)at * SIM_SMALL_ALIGN != dptr)
            return CUDA_ERROR_INVALID_VALUE;
        small_free(r, at);
        return CUDA_SUCCESS;
    }
    if (!r || r->base != dptr || r->kind == SIM_RANGE_VA)
        return CUDA_ERROR_INVALID_VALUE;
    range_free(r);
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    struct CUctx_st *c;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    r = free_at(dptr);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
    return cuMemFree_v2(dptr);
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, int use_pool,
                            CUstream h, int ptds)
{
    struct CUmemPoolHandle_st *p = NULL;
    struct CUstream_st *s;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!dptr || (use_pool && !(p = pool_find(pool))))
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS) {
        /* Allocated at once, even when capturing: there are no memory nodes here. */
        if (!p)
            p = sim_drv.current_pool[s->ctx->dev];
        r = pool_alloc(p, s->ctx, size, dptr);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, 0, hStream, 0);
}

SIM_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
    return alloc_async(dptr, bytesize, NULL, 0, hStream, 1);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                            CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, 1, hStream, 0);
}

SIM_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                 CUmemoryPool pool, CUstream hStream)
{
    return alloc_async(dptr, bytesize, pool, 1, hStream, 1);
}

/* The bytes return to the pool at once; the pool gives back to the device at a sync. */
void sim_frees_due(uint64_t now)
{
    unsigned i = 0;

    while (i < sim_drv.npending) {
        if (sim_drv.pending_frees[i].due <= now) {
            CUdeviceptr p = sim_drv.pending_frees[i].ptr;

            sim_drv.pending_frees[i] = sim_drv.pending_frees[--sim_drv.npending];
            free_at(p); /* checked when it was queued */
        } else {
            i++;
        }
    }
}

/*
 * In stream order: behind work still queued on the stream, the memory is taken until the
 * stream gets there (a full list of such frees waits for its stream instead).
 */
static CUresult free_async(CUdeviceptr dptr, CUstream h, int ptds)
{
    struct CUstream_st *s;
    uint64_t due;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_stream_get(h, ptds, &s)) == CUDA_SUCCESS) {
        due = sim_stream_wait_point(s);
        if (s->capture || due <= sim_now_ns()) {
            r = free_at(dptr);
        } else if (!freeable(dptr)) {
            r = CUDA_ERROR_INVALID_VALUE;
        } else if (sim_drv.npending ==
                   sizeof(sim_drv.pending_frees) / sizeof(sim_drv.pending_frees[0])) {
            sim_leave();
            sim_sleep_until(due);
            if ((r = sim_enter()) != CUDA_SUCCESS)
                return r;
            r = free_at(dptr);
        } else {
            sim_drv.pending_frees[sim_drv.npending].ptr = dptr;
            sim_drv.pending_frees[sim_drv.npending].due = due;
            sim_drv.npending++;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, 0);
}

SIM_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
    return free_async(dptr, hStream, 1);
}

static int valid_location(const CUmemLocation *l)
{
    return l->type == CU_MEM_LOCATION_TYPE_DEVICE && l->id >= 0 &&
           (uint32_t)l->id < sim_drv.cfg.devices;
}

SIM_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pool || !poolProps || poolProps->allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
        !valid_location(&poolProps->location))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (!(p = pool_new(poolProps->location.id, 0, poolProps->maxSize)))
        r = CUDA_ERROR_OUT_OF_MEMORY;
    else
        *pool = p;
    sim_leave();
    return r;
}

/*
 * With allocations outstanding the pool lives on until they are freed, as
 * documented; what it holds beyond them goes back now.
 */
SIM_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)) || p->is_default) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        if (sim_drv.current_pool[p->dev] == p)
            sim_drv.current_pool[p->dev] = sim_drv.default_pool[p->dev];
        pool_shrink_to(p, 0);
        if (p->used == 0)
            pool_unlink(p);
        else
            p->destroyed = 1;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)))
        r = CUDA_ERROR_INVALID_VALUE;
    else
        pool_shrink_to(p, minBytesToKeep);
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)) || !value) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            *(int *)value = p->reuse[attr - 1];
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            *(cuuint64_t *)value = p->threshold;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
            *(cuuint64_t *)value = p->reserved;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            *(cuuint64_t *)value = p->reserved_high;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
            *(cuuint64_t *)value = p->used;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            *(cuuint64_t *)value = p->used_high;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
    }
    sim_leave();
    return r;
}

/* The high-water marks may only be reset (set to 0, which means "to the current value"). */
SIM_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void *value)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(p = pool_find(pool)) || !value) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        switch (attr) {
        case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
        case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
            p->reuse[attr - 1] = *(int *)value != 0;
            break;
        case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
            p->threshold = *(cuuint64_t *)value;
            break;
        case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                p->reserved_high = p->reserved;
            break;
        case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
            if (*(cuuint64_t *)value != 0)
                r = CUDA_ERROR_INVALID_VALUE;
            else
                p->used_high = p->used;
            break;
        default:
            r = CUDA_ERROR_INVALID_VALUE;
            break;
        }
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pool_out)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS)
        *pool_out = sim_drv.default_pool[dev];
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!pool)
        r = CUDA_ERROR_INVALID_VALUE;
    else if ((r = sim_check_device(dev)) == CUDA_SUCCESS)
        *pool = sim_drv.current_pool[dev];
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool)
{
    struct CUmemPoolHandle_st *p;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if ((r = sim_check_device(dev)) != CUDA_SUCCESS)
        ;
    else if (!(p = pool_find(pool)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (p->dev != dev)
        r = CUDA_ERROR_INVALID_DEVICE;
    else
        sim_drv.current_pool[dev] = p;
    sim_leave();
    return r;
}

/* ---- virtual memory management ------------------------------------------ */

static int valid_alloc_prop(const CUmemAllocationProp *prop)
{
    return prop->type == CU_MEM_ALLOCATION_TYPE_PINNED && valid_location(&prop->location);
}

SIM_EXPORT CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                  const CUmemAllocationProp *prop,
                                                  CUmemAllocationGranularity_flags option)
{
    if (!sim_ready())
        return CUDA_ERROR_NOT_INITIALIZED;
    if (!granularity || !prop || !valid_alloc_prop(prop) ||
        (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
         option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = (size_t)SIM_GRANULE;
    return CUDA_SUCCESS;
}

static struct sim_vmm *vmm_find(CUmemGenericAllocationHandle h)
{
    for (struct sim_vmm *v = sim_drv.vmms; v; v = v->next)
        if (h != 0 && v->id == h)
            return v;
    return NULL;
}

/* A handle value no longer names v: the next cuMemCreate may take it. */
static void vmm_free_id(struct sim_vmm *v)
{
    if (v->id && sim_drv.vmm_nfree < sizeof(sim_drv.vmm_free_ids) / sizeof(sim_drv.vmm_free_ids[0]))
        sim_drv.vmm_free_ids[sim_drv.vmm_nfree++] = v->id;
    v->id = 0;
}

/* A handle value for a new handle: a freed one first, as the driver may hand them out. */
static CUmemGenericAllocationHandle vmm_new_id(void)
{
    return sim_drv.vmm_nfree ? sim_drv.vmm_free_ids[--sim_drv.vmm_nfree]
                             : 0x5100000000ULL + 0x10 * ++sim_drv.vmm_next_id;
}

/* Physical memory goes when the handle is released and no mapping is left. */
static void vmm_maybe_free(struct sim_vmm *v)
{
    struct sim_vmm **pp;

    if (v->refs > 0 || v->maps > 0)
        return;
    sim_state_uncharge(&sim_drv.st, sim_phys(v->dev), v->size);
    vmm_free_id(v);
    for (pp = &sim_drv.vmms; *pp; pp = &(*pp)->next) {
        if (*pp == v) {
            *pp = v->next;
            break;
        }
    }
    free(v);
}

SIM_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                const CUmemAllocationProp *prop, unsigned long long flags)
{
    struct sim_vmm *v;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!handle || !prop || flags != 0 || !valid_alloc_prop(prop) || size == 0 ||
        size % SIM_GRANULE != 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else if (size > SIM_MAX_BYTES || !(v = calloc(1, sizeof(*v)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (sim_state_charge(&sim_drv.st, sim_phys(prop->location.id), size) < 0) {
        free(v);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        v->dev = prop->location.id;
        v->size = size;
        v->refs = 1;
        v->next = sim_drv.vmms;
        sim_drv.vmms = v;
        /* Opaque values as the driver's are, never 0. */
        v->id = vmm_new_id();
        *handle = v->id;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    struct sim_vmm *v;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    if (!(v = vmm_find(handle)) || v->refs == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        /* Released while still mapped: the memory stays, its handle's value is free. */
        if (--v->refs == 0 && v->maps > 0)
            vmm_free_id(v);
        vmm_maybe_free(v);
    }
    sim_leave();
    return r;
}

static struct sim_map *map_containing(const struct sim_range *va, CUdeviceptr p)
{
    for (struct sim_map *m = va->maps; m; m = m->next)
        if (p >= m->ptr && p - m->ptr < m->size)
            return m;
    return NULL;
}

SIM_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
    struct sim_range *va;
    struct sim_map *m = NULL;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing((CUdeviceptr)(uintptr_t)addr);
    if (!handle || !va || va->kind != SIM_RANGE_VA ||
        !(m = map_containing(va, (CUdeviceptr)(uintptr_t)addr))) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        /* A handle released while mapped gets a value again (perhaps another's old one). */
        if (m->handle->id == 0)
            m->handle->id = vmm_new_id();
        m->handle->refs++;
        *handle = m->handle->id;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                        CUdeviceptr addr, unsigned long long flags)
{
    struct sim_range r = { .kind = SIM_RANGE_VA };
    CUresult res;

    if ((res = sim_enter()) != CUDA_SUCCESS)
        return res;
    if (alignment < SIM_GRANULE)
        alignment = (size_t)SIM_GRANULE;
    if (!ptr || size == 0 || flags != 0 || (alignment & (alignment - 1)) != 0) {
        res = CUDA_ERROR_INVALID_VALUE;
    } else if (size > SIM_VA_HI - SIM_VA_LO) {
        res = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        r.size = size;
        r.span = sim_round_up(size, SIM_GRANULE);
        if (va_find(SIM_VA_LO, SIM_VA_HI, r.span, alignment, addr, &r.base) < 0 ||
            range_insert(&r) < 0)
            res = CUDA_ERROR_OUT_OF_MEMORY;
        else
            *ptr = r.base;
    }
    sim_leave();
    return res;
}

static void unmap(struct sim_range *va, struct sim_map *m)
{
    struct sim_map **pp;

    for (pp = &va->maps; *pp; pp = &(*pp)->next) {
        if (*pp == m) {
            *pp = m->next;
            break;
        }
    }
    m->handle->maps--;
    vmm_maybe_free(m->handle);
    free(m);
}

/* Mappings still in the range are dropped with it, as cuMemUnmap would. */
SIM_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    struct sim_range *va;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_at(ptr);
    if (!va || va->kind != SIM_RANGE_VA || sim_round_up(size, SIM_GRANULE) != va->span) {
        r = CUDA_ERROR_INVALID_VALUE;
    } else {
        while (va->maps)
            unmap(va, va->maps);
        range_remove(va);
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                             CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    struct sim_range *va;
    struct sim_vmm *v;
    struct sim_map *m;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing(ptr);
    v = vmm_find(handle);
    if (flags != 0 || !v || v->refs == 0 || size == 0 || size % SIM_GRANULE ||
        offset % SIM_GRANULE || offset > v->size || size > v->size - offset || !va ||
        va->kind != SIM_RANGE_VA || size > va->span - (ptr - va->base)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (m = va->maps; m; m = m->next) {
        if (ptr < m->ptr + m->size && m->ptr < ptr + size) {
            r = CUDA_ERROR_INVALID_VALUE; /* already mapped */
            goto out;
        }
    }
    if (!(m = calloc(1, sizeof(*m)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    m->ptr = ptr;
    m->size = size;
    m->handle = v;
    m->next = va->maps;
    va->maps = m;
    v->maps++;
out:
    sim_leave();
    return r;
}

/* Unmaps whole mappings inside [ptr, ptr + size); cutting one in part is refused. */
SIM_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    struct sim_range *va;
    struct sim_map *m, *next;
    int found = 0;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing(ptr);
    if (!va || va->kind != SIM_RANGE_VA || size == 0) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (m = va->maps; m; m = m->next) {
        int overlaps = ptr < m->ptr + m->size && m->ptr < ptr + size;
        int inside = m->ptr >= ptr && m->ptr + m->size <= ptr + size;
        if (overlaps && !inside) {
            r = CUDA_ERROR_INVALID_VALUE;
            goto out;
        }
        found |= inside;
    }
    if (!found) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    for (m = va->maps; m; m = next) {
        next = m->next;
        if (m->ptr >= ptr && m->ptr + m->size <= ptr + size)
            unmap(va, m);
    }
out:
    sim_leave();
    return r;
}

/* Whether [p, p + n) is covered by mappings of va. */
static int va_covered(const struct sim_range *va, CUdeviceptr p, size_t n)
{
    CUdeviceptr end = p + n;

    while (p < end) {
        const struct sim_map *m = map_containing(va, p);
        if (!m)
            return 0;
        p = m->ptr + m->size;
    }
    return 1;
}

SIM_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                   size_t count)
{
    struct sim_range *va;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    va = range_containing(ptr);
    if (!desc || count == 0 || size == 0 || !va || va->kind != SIM_RANGE_VA ||
        size > va->span - (ptr - va->base) || !va_covered(va, ptr, size))
        r = CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; r == CUDA_SUCCESS && i < count; i++)
        if (!valid_location(&desc[i].location) ||
            (desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_NONE &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
             desc[i].flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE))
            r = CUDA_ERROR_INVALID_VALUE;
    sim_leave();
    return r;
}

/* ---- arrays ----------------------------------------------------------- */

static unsigned format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT:
        return 4;
    default:
        return 0;
    }
}

/*
 * 1-D (height 0), 2-D (depth 0) or 3-D, reserving what array_bytes says in
 * pages of its own.
 */
static CUresult array_create(CUarray *ph, uint64_t w, uint64_t h, uint64_t d, CUarray_format fmt,
                             unsigned channels)
{
    struct CUctx_st *c;
    struct CUarray_st *a;
    uint64_t esize = format_bytes(fmt), bytes;
    int dims = h == 0 ? 1 : d == 0 ? 2 : 3;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (!ph || w == 0 || esize == 0 || (channels != 1 && channels != 2 && channels != 4) ||
        (h == 0 && d != 0) || (dims == 1 && w > SIM_ARRAY_MAX_1D_WIDTH)) {
        r = CUDA_ERROR_INVALID_VALUE;
        goto out;
    }
    if ((bytes = array_bytes(w, h, d, esize * channels, dims)) == 0) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
        goto out;
    }
    if (!(a = calloc(1, sizeof(*a)))) {
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else if (sim_state_charge(&sim_drv.st, sim_phys(c->dev), bytes) < 0) {
        free(a);
        r = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        a->ctx = c;
        a->dev = c->dev;
        a->charged = bytes;
        a->next = sim_drv.arrays;
        sim_drv.arrays = a;
        *ph = a;
    }
out:
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels);
}

SIM_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, 0, d->Format, d->NumChannels);
}

SIM_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

SIM_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d)
{
    if (!d)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    return array_create(pHandle, d->Width, d->Height, d->Depth, d->Format, d->NumChannels);
}

static void array_free(struct CUarray_st *a)
{
    sim_state_uncharge(&sim_drv.st, sim_phys(a->dev), a->charged);
    free(a);
}

SIM_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    struct CUarray_st **pp;
    CUresult r;

    if ((r = sim_enter()) != CUDA_SUCCESS)
        return r;
    r = CUDA_ERROR_INVALID_HANDLE;
    for (pp = &sim_drv.arrays; *pp; pp = &(*pp)->next) {
        if (*pp == hArray) {
            struct CUarray_st *a = *pp;
            *pp = a->next;
            array_free(a);
            r = CUDA_SUCCESS;
            break;
        }
    }
    sim_leave();
    return r;
}

/* ---- information ------------------------------------------------------ */

static CUresult mem_info(uint64_t *free_b, uint64_t *total_b)
{
    struct CUctx_st *c;
    uint64_t used;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    sim_state_lock(&sim_drv.st);
    used = sim_state_used(sim_drv.st.sh, sim_phys(c->dev));
    sim_state_unlock(&sim_drv.st);
    *total_b = sim_drv.cfg.memory;
    *free_b = used < sim_drv.cfg.memory ? sim_drv.cfg.memory - used : 0;
    sim_leave();
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetInfo_v2(size_t *free, size_t *total)
{
    uint64_t f, t;
    CUresult r;

    if (!free || !total)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    if ((r = mem_info(&f, &t)) == CUDA_SUCCESS) {
        *free = (size_t)f;
        *total = (size_t)t;
    }
    return r;
}

/* The 32-bit legacy call cannot say more than 4 GiB - 1. */
SIM_EXPORT CUresult cuMemGetInfo(unsigned int *free, unsigned int *total)
{
    uint64_t f, t;
    CUresult r;

    if (!free || !total)
        return sim_ready() ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_INITIALIZED;
    if ((r = mem_info(&f, &t)) == CUDA_SUCCESS) {
        *free = f > UINT32_MAX ? UINT32_MAX : (unsigned int)f;
        *total = t > UINT32_MAX ? UINT32_MAX : (unsigned int)t;
    }
    return r;
}

/* The allocation in r (not a VMM range) whose addresses hold p; -1 for a free part of a page. */
static int alloc_extent(const struct sim_range *r, CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    int at;

    if (r->kind != SIM_RANGE_PAGE) {
        *base = r->base;
        *size = r->size;
        return 0;
    }
    if ((at = page_alloc_at(r, p)) < 0)
        return -1;
    *base = r->base + (CUdeviceptr)at * SIM_SMALL_ALIGN;
    *size = r->page->size[at];
    return 0;
}

/* The allocation (or, for VMM, the mapping) holding p. */
static CUresult address_range(CUdeviceptr p, CUdeviceptr *base, size_t *size)
{
    struct sim_range *r = range_containing(p);
    struct sim_map *m;

    if (!r)
        return CUDA_ERROR_NOT_FOUND;
    if (r->kind == SIM_RANGE_VA) {
        if (!(m = map_containing(r, p)))
            return CUDA_ERROR_NOT_FOUND;
        *base = m->ptr;
        *size = m->size;
        return CUDA_SUCCESS;
    }
    if (alloc_extent(r, p, base, size) < 0 || p - *base >= *size)
        return CUDA_ERROR_NOT_FOUND;
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr)
{
    struct CUctx_st *c;
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if ((r = address_range(dptr, &b, &s)) == CUDA_SUCCESS) {
        if (pbase)
            *pbase = b;
        if (psize)
            *psize = s;
    }
    sim_leave();
    return r;
}

SIM_EXPORT CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
                                         CUdeviceptr_v1 dptr)
{
    CUdeviceptr b = 0;
    size_t s = 0;
    CUresult r = cuMemGetAddressRange_v2(&b, &s, dptr);

    if (r == CUDA_SUCCESS) {
        if (pbase)
            *pbase = (CUdeviceptr_v1)b;
        if (psize)
            *psize = (unsigned int)s;
    }
    return r;
}

/* ---- copies ----------------------------------------------------------- */

/*
 * Checks that [p, p + n) lies in one live allocation or in mapped VMM memory;
 * for managed memory returns its host address. Under the lock.
 */
static CUresult check_device_range(CUdeviceptr p, size_t n, void **host)
{
    struct sim_range *r = range_containing(p);
    CUdeviceptr base;
    size_t size;

    *host = NULL;
    if (!r)
        return CUDA_ERROR_INVALID_VALUE;
    if (r->kind == SIM_RANGE_VA)
        return n <= r->span - (p - r->base) && va_covered(r, p, n) ? CUDA_SUCCESS
                                                                   : CUDA_ERROR_INVALID_VALUE;
    if (alloc_extent(r, p, &base, &size) < 0 || p - base > size || n > size - (p - base))
        return CUDA_ERROR_INVALID_VALUE;
    if (r->kind == SIM_RANGE_MANAGED)
        *host = (char *)r->host + (p - r->base);
    return CUDA_SUCCESS;
}

enum copy_dir { COPY_HTOD, COPY_DTOH, COPY_SET };

/*
 * Copies are synchronous, as the driver's pageable-memory copies are: they
 * wait for the work queued before them on the default stream. Memset is not.
 */
static CUresult copy(enum copy_dir dir, CUdeviceptr dev, void *host, const void *src,
                     unsigned char value, size_t n, int ptds)
{
    struct CUctx_st *c;
    struct CUstream_st *s;
    uint64_t until = 0;
    void *managed = NULL;
    CUresult r;

    if ((r = sim_enter_ctx(&c)) != CUDA_SUCCESS)
        return r;
    if (n > 0 && ((dir == COPY_HTOD && !src) || (dir == COPY_DTOH && !host)))
        r = CUDA_ERROR_INVALID_VALUE;
    else if (n > 0)
        r = check_device_range(dev, n, &managed);
    if (r == CUDA_SUCCESS && dir != COPY_SET &&
        (r = sim_stream_get(NULL, ptds, &s)) == CUDA_SUCCESS)
        until = sim_stream_wait_point(s);
    sim_leave();
    if (r != CUDA_SUCCESS || n == 0)
        return r;
    sim_sleep_until(until);
    switch (dir) {
    case COPY_HTOD:
        if (managed)
            memcpy(managed, src, n);
        break;
    case COPY_DTOH:
        if (managed)
            memcpy(host, managed, n);
        else
            memset(host, 0, n); /* device memory has no content: reads give zeros */
        break;
    case COPY_SET:
        if (managed)
            memset(managed, value, n);
        break;
    }
    return CUDA_SUCCESS;
}

SIM_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    return copy(COPY_HTOD, dstDevice, NULL, srcHost, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                         size_t ByteCount)
{
    return copy(COPY_HTOD, dstDevice, NULL, srcHost, 0, ByteCount, 1);
}

SIM_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                 unsigned int ByteCount)
{
    return copy(COPY_HTOD, dstDevice, NULL, srcHost, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(COPY_DTOH, srcDevice, dstHost, NULL, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount)
{
    return copy(COPY_DTOH, srcDevice, dstHost, NULL, 0, ByteCount, 1);
}

SIM_EXPORT CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    return copy(COPY_DTOH, srcDevice, dstHost, NULL, 0, ByteCount, 0);
}

SIM_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return copy(COPY_SET, dstDevice, NULL, NULL, uc, N, 0);
}

SIM_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    return copy(COPY_SET, dstDevice, NULL, NULL, uc, N, 1);
}

SIM_EXPORT CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N)
{
    return copy(COPY_SET, dstDevice, NULL, NULL, uc, N, 0);
}

/* ---- teardown --------------------------------------------------------- */

void sim_mem_drop_ctx(struct CUctx_st *c)
{
    struct CUarray_st **pa = &sim_drv.arrays;
    unsigned k = 0;

    /* Its stream-ordered frees go with it: the addresses may be handed out again. */
    while (k < sim_drv.npending) {
        struct sim_range *r = range_containing(sim_drv.pending_frees[k].ptr);
        if (!r || r->ctx == c)
            sim_drv.pending_frees[k] = sim_drv.pending_frees[--sim_drv.npending];
        else
            k++;
    }
    for (size_t i = sim_drv.nranges; i-- > 0;)
        if (sim_drv.ranges[i].ctx == c && sim_drv.ranges[i].kind != SIM_RANGE_VA)
            range_free(&sim_drv.ranges[i]);
    while (*pa) {
        struct CUarray_st *a = *pa;
        if (a->ctx == c) {
            *pa = a->next;
            array_free(a);
        } else {
            pa = &a->next;
        }
    }
    sim_pools_settle(c->dev);
}
