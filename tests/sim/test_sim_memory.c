/*
 * Tests of the simulated driver's memory, against what an H200's driver was
 * measured to reserve (h200-driver-facts.txt): small cuMemAlloc requests
 * packed into 2 MiB pages, larger ones rounded to pages, pitch, arrays in a
 * block-linear layout, stream-ordered pools growing in 32 MiB chunks and
 * giving whole chunks back at a synchronisation; and OOM at capacity with
 * exact give-back, managed, legacy 32-bit calls, address ranges and copy
 * checks, VMM (memory lives while mapped). A 1 GiB device.
 */
#include "sim_test.h"

#include <pthread.h>

static struct cu cu;
static CUcontext ctx;

static int setup(void **state)
{
    (void)state;
    sim_test_state_init("memory");
    setenv("GPUSLICE_SIM_MEMORY", "1G", 1);
    if (cu_load(&cu) < 0 || cu.cuInit(0) != CUDA_SUCCESS ||
        cu.cuDevicePrimaryCtxRetain(&ctx, 0) != CUDA_SUCCESS ||
        cu.cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
        return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cu.cuDevicePrimaryCtxRelease_v2(0);
    sim_test_state_done();
    return 0;
}

static uint64_t used(void)
{
    size_t f, t;

    assert_ok(cu.cuMemGetInfo_v2(&f, &t));
    assert_int_equal(t, GiB);
    return t - f;
}

static void test_allocations_take_pages_and_bad_frees_fail(void **state)
{
    uint64_t base = used();
    CUdeviceptr a, b;

    (void)state;
    assert_ok(cu.cuMemAlloc_v2(&a, 1));
    assert_int_equal(used(), base + 2 * MiB);
    assert_ok(cu.cuMemAlloc_v2(&b, 2 * MiB + 1));
    assert_int_equal(used(), base + 6 * MiB);
    assert_int_equal(a % (2 * MiB), 0);
    assert_ok(cu.cuMemFree_v2(a));
    assert_ok(cu.cuMemFree_v2(b));
    assert_int_equal(used(), base);
    assert_cu(cu.cuMemFree_v2(b), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuMemAlloc_v2(&a, 0), CUDA_ERROR_INVALID_VALUE);
}

struct pack_case {
    size_t size;
    int count;    /* allocations made */
    int per_page; /* measured: a new page every this many */
};

/* h200-driver-facts.txt, "packing" lines: 4000 x 512 B took 2 MiB, and so on. */
static const struct pack_case pack_cases[] = {
    { 512, 4000, 4096 }, { 4096, 4000, 512 }, { 65536, 384, 32 }, { 262144, 96, 8 },
    { 524288, 48, 4 },   { 1048576, 24, 2 },  { 1052672, 23, 1 }, { 2093056, 12, 1 },
};

static void test_small_allocations_are_packed_into_2mib_pages(void **state)
{
    static CUdeviceptr p[4096];
    uint64_t base = used();

    (void)state;
    for (size_t c = 0; c < sizeof(pack_cases) / sizeof(pack_cases[0]); c++) {
        const struct pack_case *k = &pack_cases[c];
        uint64_t prev = used();

        for (int i = 0; i < k->count; i++) {
            uint64_t now;
            assert_ok(cu.cuMemAlloc_v2(&p[i], k->size));
            now = used();
            /* A page is taken exactly where the H200 took one: at every per_page-th. */
            if (now - prev != (i % k->per_page == 0 ? 2 * MiB : 0))
                fail_msg("%zu B: allocation %d took %llu bytes", k->size, i,
                         (unsigned long long)(now - prev));
            prev = now;
            assert_int_equal(p[i] % 512, 0);
            assert_int_equal(p[i] / (2 * MiB), (p[i] + k->size - 1) / (2 * MiB)); /* in one page */
        }
        assert_int_equal(used() - base,
                         2 * MiB * (uint64_t)((k->count + k->per_page - 1) / k->per_page));
        for (int i = 0; i < k->count; i++)
            assert_ok(cu.cuMemFree_v2(p[i]));
        assert_int_equal(used(), base); /* after freeing them, nothing stays taken */
    }
}

static void test_large_allocations_take_whole_pages_of_their_own(void **state)
{
    /* h200-driver-facts.txt, "cuMemAlloc(N) took" lines. */
    static const struct {
        size_t size;
        uint64_t took;
    } cases[] = { { 2 * MiB, 2 * MiB }, { 2 * MiB + 1, 4 * MiB },   { 3 * MiB, 4 * MiB },
                  { 5 * MiB, 6 * MiB }, { 33 * MiB + 1, 34 * MiB }, { 100 * MiB + 1, 102 * MiB } };
    uint64_t base = used();
    CUdeviceptr a, b, small;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        assert_ok(cu.cuMemAlloc_v2(&a, cases[i].size));
        assert_int_equal(used() - base, cases[i].took);
        assert_int_equal(a % (2 * MiB), 0);
        assert_ok(cu.cuMemFree_v2(a));
        assert_int_equal(used(), base);
    }
    /* A small request does not use the tail of a large one's last page (unknown; see README). */
    assert_ok(cu.cuMemAlloc_v2(&a, 3 * MiB));
    assert_ok(cu.cuMemAlloc_v2(&small, 4096));
    assert_int_equal(used() - base, 6 * MiB);
    assert_ok(cu.cuMemFree_v2(a));
    assert_ok(cu.cuMemFree_v2(small));
    /* First fit: a freed hole is used again before a new page is taken. */
    assert_ok(cu.cuMemAlloc_v2(&a, MiB));
    assert_ok(cu.cuMemAlloc_v2(&b, MiB));
    assert_int_equal(used() - base, 2 * MiB);
    assert_ok(cu.cuMemFree_v2(a));
    assert_ok(cu.cuMemAlloc_v2(&small, 4096));
    assert_int_equal(small, a);
    assert_int_equal(used() - base, 2 * MiB);
    assert_cu(cu.cuMemFree_v2(small + 512), CUDA_ERROR_INVALID_VALUE); /* not where one starts */
    assert_ok(cu.cuMemFree_v2(small));
    assert_ok(cu.cuMemFree_v2(b));
    assert_int_equal(used(), base);
}

/* Pages belong to a context: another context's small allocations take pages of its own. */
static void test_pages_are_not_shared_between_contexts(void **state)
{
    uint64_t base = used();
    CUdeviceptr a, b;
    CUcontext c2;

    (void)state;
    assert_ok(cu.cuMemAlloc_v2(&a, 4096));
    assert_int_equal(used() - base, 2 * MiB);
    assert_ok(cu.cuCtxCreate_v2(&c2, 0, 0));
    assert_int_equal(used() - base, 2 * MiB + 64 * MiB);
    assert_ok(cu.cuMemAlloc_v2(&b, 4096));
    assert_int_equal(used() - base, 4 * MiB + 64 * MiB);
    assert_true(a / (2 * MiB) != b / (2 * MiB));
    assert_ok(cu.cuCtxDestroy_v2(c2)); /* takes its page with it */
    assert_int_equal(used() - base, 2 * MiB);
    assert_ok(cu.cuCtxSetCurrent(ctx));
    assert_ok(cu.cuMemFree_v2(a));
    assert_int_equal(used(), base);
}

static void test_out_of_memory_at_capacity_and_exact_give_back(void **state)
{
    uint64_t base = used();
    CUdeviceptr big, one;
    size_t f, t;

    (void)state;
    assert_int_equal(base, 64 * MiB); /* the primary context's footprint */
    assert_ok(cu.cuMemGetInfo_v2(&f, &t));
    assert_ok(cu.cuMemAlloc_v2(&big, f));
    assert_int_equal(used(), GiB);
    assert_cu(cu.cuMemAlloc_v2(&one, 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_cu(cu.cuMemAllocManaged(&one, 1, CU_MEM_ATTACH_GLOBAL), CUDA_ERROR_OUT_OF_MEMORY);
    assert_ok(cu.cuMemFree_v2(big));
    assert_int_equal(used(), base);
    assert_cu(cu.cuMemAlloc_v2(&big, f + 1), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(used(), base);
    assert_cu(cu.cuMemAlloc_v2(&big, (size_t)1 << 62), CUDA_ERROR_OUT_OF_MEMORY);
}

static void test_pitch_is_the_width_rounded_to_512_bytes(void **state)
{
    /* h200-driver-facts.txt, "pitch width W height 16 elem E -> pitch P" (alike for E 4, 8, 16). */
    static const size_t widths[] = { 1,   4,    100,  128,  256,  500,  511,  512,
                                     513, 1000, 1024, 2048, 4096, 4097, 10000 };
    static const size_t pitches[] = { 512,  512,  512,  512,  512,  512,  512,  512,
                                      1024, 1024, 1024, 2048, 4096, 4608, 10240 };
    static const unsigned elems[] = { 4, 8, 16 };
    uint64_t base = used();
    CUdeviceptr p, q;
    CUdeviceptr_v1 p32;
    size_t pitch, size;
    unsigned pitch32;

    (void)state;
    for (size_t e = 0; e < 3; e++) {
        for (size_t i = 0; i < sizeof(widths) / sizeof(widths[0]); i++) {
            assert_ok(cu.cuMemAllocPitch_v2(&p, &pitch, widths[i], 16, elems[e]));
            if (pitch != pitches[i])
                fail_msg("width %zu elem %u: pitch %zu, want %zu", widths[i], elems[e], pitch,
                         pitches[i]);
            assert_int_equal(used() - base, 2 * MiB); /* each alone took one page */
            assert_ok(cu.cuMemFree_v2(p));
        }
    }
    /* Larger ones: pitch * height rounded to pages (both measured: 10 MiB). */
    assert_ok(cu.cuMemAllocPitch_v2(&p, &pitch, 1000, 10000, 4));
    assert_int_equal(pitch, 1024);
    assert_int_equal(used() - base, 10 * MiB);
    assert_ok(cu.cuMemAllocPitch_v2(&q, &pitch, 3000, 3000, 16));
    assert_int_equal(pitch, 3072);
    assert_int_equal(used() - base, 20 * MiB);
    assert_ok(cu.cuMemFree_v2(p));
    assert_ok(cu.cuMemFree_v2(q));
    /* Small ones share pages with each other and with cuMemAlloc's. */
    assert_ok(cu.cuMemAllocPitch_v2(&p, &pitch, 1000, 3, 4));
    assert_ok(cu.cuMemGetAddressRange_v2(NULL, &size, p));
    assert_int_equal(size, 1024 * 3);
    assert_ok(cu.cuMemAllocPitch_v2(&q, &pitch, 100, 16, 8));
    assert_ok(cu.cuMemAllocPitch(&p32, &pitch32, 512, 4096, 8)); /* exactly a page, low */
    assert_int_equal(pitch32, 512);
    assert_int_equal(used() - base, 4 * MiB);
    assert_cu(cu.cuMemAllocPitch_v2(&p, &pitch, 100, 1, 2), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuMemAllocPitch_v2(&p, &pitch, 0, 1, 4), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemFree_v2(p));
    assert_ok(cu.cuMemFree_v2(q));
    assert_ok(cu.cuMemFree(p32));
    assert_int_equal(used(), base);
}

static void test_managed_memory_counts_and_is_host_accessible(void **state)
{
    uint64_t base = used();
    CUdeviceptr m;
    char out[8];

    (void)state;
    assert_ok(cu.cuMemAllocManaged(&m, 3 * MiB, CU_MEM_ATTACH_GLOBAL));
    assert_int_equal(used(), base + 4 * MiB);
    strcpy((char *)(uintptr_t)m, "hello");
    assert_ok(cu.cuMemcpyDtoH_v2(out, m, 6));
    assert_string_equal(out, "hello");
    assert_ok(cu.cuMemsetD8_v2(m + 1, 'a', 2));
    assert_ok(cu.cuMemcpyDtoH_v2(out, m, 6));
    assert_string_equal(out, "haalo");
    assert_ok(cu.cuMemcpyHtoD_v2(m, "HI", 2));
    assert_memory_equal((char *)(uintptr_t)m, "HIalo", 5);
    assert_cu(cu.cuMemAllocManaged(&m, 1, 0), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemFree_v2(m));
    assert_int_equal(used(), base);
}

static void test_legacy_32bit_calls_get_low_addresses(void **state)
{
    uint64_t base = used();
    CUdeviceptr_v1 p, b;
    unsigned size, f, t;

    (void)state;
    assert_ok(cu.cuMemAlloc(&p, 3 * MiB));
    assert_true(p != 0);
    assert_int_equal(used(), base + 4 * MiB);
    assert_ok(cu.cuMemGetAddressRange(&b, &size, p + 5));
    assert_int_equal(b, p);
    assert_int_equal(size, 3 * MiB);
    assert_ok(cu.cuMemGetInfo(&f, &t));
    assert_int_equal(t, GiB);
    assert_int_equal(t - f, base + 4 * MiB);
    assert_ok(cu.cuMemcpyHtoD(p, "x", 1));
    assert_ok(cu.cuMemFree(p));
    assert_int_equal(used(), base);
}

static void test_address_range_and_copy_bounds(void **state)
{
    CUdeviceptr p, b;
    size_t s;
    char buf[64];

    (void)state;
    assert_ok(cu.cuMemAlloc_v2(&p, 1000));
    assert_ok(cu.cuMemGetAddressRange_v2(&b, &s, p + 999));
    assert_int_equal(b, p);
    assert_int_equal(s, 1000);
    assert_cu(cu.cuMemGetAddressRange_v2(&b, &s, p + 1000), CUDA_ERROR_NOT_FOUND);
    memset(buf, 0x55, sizeof(buf));
    assert_ok(cu.cuMemcpyDtoH_v2(buf, p + 936, 64));
    for (size_t i = 0; i < sizeof(buf); i++)
        assert_int_equal(buf[i], 0); /* no content: reads give zeros */
    assert_cu(cu.cuMemcpyDtoH_v2(buf, p + 937, 64), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemcpyHtoD_v2(p, buf, 64));
    assert_ok(cu.cuMemcpyHtoD_v2_ptds(p, buf, 64));
    assert_cu(cu.cuMemcpyHtoD_v2(p - 1, buf, 1), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemsetD8_v2(p, 0, 1000));
    assert_cu(cu.cuMemsetD8_v2(p, 0, 1001), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemFree_v2(p));
    assert_cu(cu.cuMemcpyHtoD_v2(p, buf, 1), CUDA_ERROR_INVALID_VALUE);
}

static uint64_t pool_attr(CUmemoryPool pool, CUmemPool_attribute a)
{
    cuuint64_t v = 0;

    assert_ok(cu.cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

/* h200-driver-facts.txt, "alloc N B from empty -> reserved R KiB"; default and created pools. */
static const struct {
    size_t size;
    uint64_t reserved;
} pool_cases[] = {
    { 4096, 32 * MiB },         { MiB, 32 * MiB },          { 2 * MiB, 32 * MiB },
    { 2 * MiB + 1, 32 * MiB },  { 31 * MiB, 32 * MiB },     { 32 * MiB, 32 * MiB },
    { 32 * MiB + 1, 64 * MiB }, { 33 * MiB, 64 * MiB },     { 48 * MiB, 64 * MiB },
    { 64 * MiB, 64 * MiB },     { 64 * MiB + 1, 96 * MiB }, { 100 * MiB, 128 * MiB },
    { 256 * MiB, 256 * MiB },
};

/* The sequence held one after another, and what was reserved after each. */
static const size_t pool_seq[] = { 4096,    4096,     MiB, 20 * MiB, 8 * MiB,
                                   4 * MiB, 40 * MiB, MiB, 100 * MiB };
static const uint64_t pool_seq_reserved[] = { 32 * MiB, 32 * MiB, 32 * MiB, 32 * MiB, 32 * MiB,
                                              64 * MiB, 96 * MiB, 96 * MiB, 192 * MiB };

static void check_pool_growth(CUmemoryPool pool, CUstream s)
{
    uint64_t base = used();
    CUdeviceptr p[16];

    for (size_t i = 0; i < sizeof(pool_cases) / sizeof(pool_cases[0]); i++) {
        assert_ok(cu.cuMemAllocFromPoolAsync(&p[0], pool_cases[i].size, pool, s));
        assert_ok(cu.cuStreamSynchronize(s));
        if (pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) != pool_cases[i].reserved ||
            used() - base != pool_cases[i].reserved)
            fail_msg("%zu B from empty: reserved %llu, device %llu, want %llu", pool_cases[i].size,
                     (unsigned long long)pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
                     (unsigned long long)(used() - base),
                     (unsigned long long)pool_cases[i].reserved);
        /* What it uses is the request (to 512 bytes), not the reserve. */
        assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
                         (pool_cases[i].size + 511) / 512 * 512);
        assert_ok(cu.cuMemFreeAsync(p[0], s));
        assert_ok(cu.cuStreamSynchronize(s));
        assert_ok(cu.cuMemPoolTrimTo(pool, 0));
        assert_int_equal(used(), base);
    }
    for (size_t i = 0; i < sizeof(pool_seq) / sizeof(pool_seq[0]); i++) {
        assert_ok(cu.cuMemAllocFromPoolAsync(&p[i], pool_seq[i], pool, s));
        assert_ok(cu.cuStreamSynchronize(s));
        if (pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT) != pool_seq_reserved[i])
            fail_msg("held one after another, step %zu: reserved %llu, want %llu", i,
                     (unsigned long long)pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT),
                     (unsigned long long)pool_seq_reserved[i]);
    }
    assert_int_equal(used() - base, 192 * MiB);
    for (size_t i = sizeof(pool_seq) / sizeof(pool_seq[0]); i-- > 0;)
        assert_ok(cu.cuMemFreeAsync(p[i], s));
    assert_ok(cu.cuStreamSynchronize(s)); /* threshold 0: after freeing all and a sync, 0 */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(used(), base);
}

static void test_pools_grow_in_32mib_chunks_as_measured(void **state)
{
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemoryPool def, own;
    CUstream s;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuDeviceGetDefaultMemPool(&def, 0));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    check_pool_growth(def, s);
    assert_ok(cu.cuMemPoolCreate(&own, &props));
    check_pool_growth(own, s);
    assert_ok(cu.cuMemPoolDestroy(own));
    assert_ok(cu.cuStreamDestroy_v2(s));
}

/*
 * h200-driver-facts.txt, "pool frag" and "pool reuse": a pool with room by count still grows
 * when no hole holds the request (20 + 20 MiB held, the first freed: a hole of 20 and 24 at the
 * end; 30 MiB more grew the pool to 96), and a block freed in stream order is reused by the
 * same stream before any sync.
 */
static void test_fragmented_pool_grows_with_room_by_count(void **state)
{
    uint64_t base = used();
    CUmemoryPool def;
    CUdeviceptr a, b, c;
    CUstream s;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuDeviceGetDefaultMemPool(&def, 0));
    assert_ok(cu.cuMemAllocAsync(&a, 20 * MiB, s));
    assert_ok(cu.cuMemAllocAsync(&b, 20 * MiB, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 64 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 64 * MiB);
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 20 * MiB);
    assert_ok(cu.cuMemAllocAsync(&c, 30 * MiB, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 96 * MiB);
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 50 * MiB);
    assert_int_equal(used() - base, 96 * MiB);
    /* A request the hole holds goes there: no growth. */
    assert_ok(cu.cuMemAllocAsync(&a, 20 * MiB, s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 96 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuMemFreeAsync(b, s));
    assert_ok(cu.cuMemFreeAsync(c, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_ok(cu.cuMemAllocAsync(&a, 30 * MiB, s));
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuMemAllocAsync(&b, 30 * MiB, s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuMemFreeAsync(b, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(used(), base);
    assert_ok(cu.cuStreamDestroy_v2(s));
}

/*
 * cuMemFreeAsync frees in stream order: behind a kernel the memory stays taken until the
 * stream gets there, a second free of it is refused, and a destroyed pool's last allocation
 * goes back to the device only then.
 */
static void test_free_async_waits_for_its_stream(void **state)
{
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUfunction f = get_function(&cu, "spin_100000us");
    uint64_t base = used();
    CUmemoryPool own;
    CUdeviceptr a;
    CUstream s;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuMemPoolCreate(&own, &props));
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 40 * MiB, own, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_ok(cu.cuMemPoolDestroy(own)); /* lives on for its allocation */
    assert_true(used() - base >= 40 * MiB);
    assert_ok(launch1(&cu, f, s));
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_true(used() - base >= 40 * MiB); /* the stream has not got to the free */
    assert_int_equal(cu.cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuMemFree_v2(a), CUDA_ERROR_INVALID_VALUE);
    assert_int_equal(cu.cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(used(), base);
    /* With the stream idle, at once. */
    assert_ok(cu.cuMemAllocAsync(&a, 8 * MiB, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_int_equal(cu.cuMemFreeAsync(a, s), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(used(), base);
    assert_ok(cu.cuStreamDestroy_v2(s));
}

/* A synchronisation gives back whole unused chunks, down to the release threshold. */
static void test_pool_gives_back_whole_chunks_at_a_sync(void **state)
{
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    cuuint64_t max = UINT64_MAX, forty = 40 * MiB, zero = 0;
    uint64_t base = used();
    CUmemoryPool def, own;
    CUdeviceptr a, b;
    CUstream s;
    CUevent e;

    (void)state;
    assert_ok(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    assert_ok(cu.cuDeviceGetDefaultMemPool(&def, 0));
    /* Measured: two 8 MiB held, one freed: 32 MiB before and after the stream's sync. */
    assert_ok(cu.cuMemAllocAsync(&a, 8 * MiB, s));
    assert_ok(cu.cuMemAllocAsync(&b, 8 * MiB, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuMemFreeAsync(b, s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_int_equal(used() - base, 32 * MiB);
    /* Both freed: 0 after cuCtxSynchronize. */
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_int_equal(used() - base, 32 * MiB); /* freed into the pool, not the device */
    assert_ok(cu.cuCtxSynchronize());
    assert_int_equal(pool_attr(def, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(used(), base);
    /* Measured: threshold UINT64_MAX keeps a freed 4 KiB's 32 MiB; cuMemPoolTrimTo(0) frees it. */
    assert_ok(cu.cuMemPoolCreate(&own, &props));
    assert_ok(cu.cuMemPoolSetAttribute(own, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 4096, own, s));
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuStreamSynchronize(s));
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), UINT64_MAX);
    assert_ok(cu.cuMemPoolTrimTo(own, 0));
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0);
    assert_int_equal(used(), base);
    /*
     * Unmeasured, modelled: a threshold between chunks keeps the whole chunks
     * not above it (64 MiB reserved, threshold 40 MiB: 32 stay); an event's
     * sync settles too; trimming keeps whole chunks not above the bytes asked,
     * never what is in use.
     */
    assert_ok(cu.cuMemPoolSetAttribute(own, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &forty));
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 50 * MiB, own, s));
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuEventCreate(&e, 0));
    assert_ok(cu.cuEventRecord(e, s));
    assert_ok(cu.cuEventSynchronize(e));
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuMemPoolSetAttribute(own, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max));
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 70 * MiB, own, s));
    assert_ok(cu.cuMemAllocFromPoolAsync(&b, 2 * MiB, own, s));
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 96 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuMemPoolTrimTo(own, 40 * MiB));
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuMemPoolTrimTo(own, 0)); /* b is in use: its chunk stays */
    assert_int_equal(pool_attr(own, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuMemFree_v2(b)); /* a pool allocation may also go by cuMemFree */
    assert_ok(cu.cuMemPoolTrimTo(own, 0));
    assert_int_equal(used(), base);
    assert_ok(cu.cuMemPoolSetAttribute(own, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    assert_ok(cu.cuMemPoolDestroy(own));
    assert_ok(cu.cuEventDestroy_v2(e));
    assert_ok(cu.cuStreamDestroy_v2(s));
}

static void test_pool_attributes_and_high_water_marks(void **state)
{
    uint64_t base = used();
    CUmemoryPool pool, cur;
    CUdeviceptr a, b;
    CUstream s;

    (void)state;
    assert_ok(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    assert_ok(cu.cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(pool, cur);
    {
        cuuint64_t zero = 0; /* the marks of earlier tests */
        assert_ok(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
        assert_ok(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
    }
    assert_ok(cu.cuStreamCreate(&s, 0));
    assert_ok(cu.cuMemAllocAsync(&a, 3 * MiB, s));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 * MiB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_int_equal(used(), base + 32 * MiB);
    assert_ok(cu.cuMemAllocAsync_ptsz(&b, 1, NULL));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 3 * MiB + 512);
    assert_int_equal(used(), base + 32 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuMemAllocAsync(&a, 20 * MiB, s)); /* reuses the reserve (after b, in its chunk) */
    assert_int_equal(used(), base + 32 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuStreamSynchronize(s)); /* b still in use: its chunk stays */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 32 * MiB);
    assert_ok(cu.cuMemFreeAsync_ptsz(b, NULL));
    assert_ok(cu.cuCtxSynchronize());
    assert_int_equal(used(), base);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 20 * MiB + 512);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 32 * MiB);
    {
        cuuint64_t zero = 0, one = 1;
        assert_ok(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
        assert_ok(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero));
        assert_cu(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &one),
                  CUDA_ERROR_INVALID_VALUE);
        assert_cu(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero),
                  CUDA_ERROR_INVALID_VALUE);
    }
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 0);
    assert_ok(cu.cuStreamDestroy_v2(s));
}

/* Growth the device cannot hold fails and changes nothing. */
static void test_pool_growth_past_the_device_fails_and_changes_nothing(void **state)
{
    uint64_t base = used(), room;
    CUmemoryPool pool;
    CUdeviceptr a, b;

    (void)state;
    assert_ok(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    assert_ok(cu.cuMemAllocAsync(&a, 100 * MiB, NULL)); /* 128 MiB reserved */
    room = GiB - base - 128 * MiB;                      /* 832 MiB: 26 chunks */
    assert_cu(cu.cuMemAllocAsync(&b, 28 * MiB + room + 1, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 100 * MiB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 128 * MiB);
    assert_int_equal(used(), base + 128 * MiB);
    assert_ok(cu.cuMemAllocAsync(&b, 28 * MiB + room, NULL));
    assert_int_equal(used(), GiB);
    assert_ok(cu.cuMemFreeAsync(a, NULL));
    assert_ok(cu.cuMemFreeAsync(b, NULL));
    assert_ok(cu.cuStreamSynchronize(NULL));
    assert_int_equal(used(), base);
}

static void test_created_pools_and_device_current_pool(void **state)
{
    uint64_t base = used();
    CUmemPoolProps props = { .allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                             .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemoryPool pool, cur, def;
    CUdeviceptr a, b;

    (void)state;
    assert_ok(cu.cuMemPoolCreate(&pool, &props));
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 5 * MiB, pool, NULL));
    assert_ok(cu.cuMemAllocFromPoolAsync_ptsz(&b, 1 * MiB, pool, NULL));
    assert_int_equal(used(), base + 32 * MiB);
    assert_ok(cu.cuDeviceSetMemPool(0, pool));
    assert_ok(cu.cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, pool);
    assert_ok(cu.cuDeviceGetDefaultMemPool(&def, 0));
    assert_cu(cu.cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    /* Destroyed with allocations outstanding: the pool goes when they do. */
    assert_ok(cu.cuMemFreeAsync(b, NULL));
    assert_ok(cu.cuMemPoolDestroy(pool));
    assert_int_equal(used(), base + 32 * MiB); /* the chunk a's 5 MiB use */
    assert_ok(cu.cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, def);
    assert_ok(cu.cuMemFreeAsync(a, NULL));
    assert_int_equal(used(), base);
    /* Unmeasured, modelled: a capped pool grows to its cap, not a whole chunk. */
    props.maxSize = 4 * MiB;
    assert_ok(cu.cuMemPoolCreate(&pool, &props));
    assert_cu(cu.cuMemAllocFromPoolAsync(&a, 5 * MiB, pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 3 * MiB, pool, NULL));
    assert_int_equal(used(), base + 4 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, NULL));
    assert_ok(cu.cuMemPoolDestroy(pool));
    assert_int_equal(used(), base);
    assert_cu(cu.cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
    props.location.id = 1;
    assert_cu(cu.cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
}

static void test_vmm_memory_lives_until_released_and_unmapped(void **state)
{
    uint64_t base = used();
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemAccessDesc access = { .location = prop.location,
                               .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE };
    CUmemGenericAllocationHandle h, h2;
    CUdeviceptr va, b;
    size_t g = 0, s;

    (void)state;
    assert_ok(cu.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    assert_int_equal(g, 2 * MiB);
    assert_ok(cu.cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    assert_int_equal(g, 2 * MiB);
    assert_cu(cu.cuMemCreate(&h, 3 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemCreate(&h, 4 * MiB, &prop, 0));
    assert_int_equal(used(), base + 4 * MiB);
    assert_ok(cu.cuMemAddressReserve(&va, 8 * MiB, 0, 0, 0));
    assert_int_equal(used(), base + 4 * MiB); /* address space costs nothing */
    assert_ok(cu.cuMemMap(va + 2 * MiB, 4 * MiB, 0, h, 0));
    assert_cu(cu.cuMemMap(va, 4 * MiB, 0, h, 0), CUDA_ERROR_INVALID_VALUE); /* overlaps */
    assert_ok(cu.cuMemSetAccess(va + 2 * MiB, 4 * MiB, &access, 1));
    assert_cu(cu.cuMemSetAccess(va, 4 * MiB, &access, 1), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemcpyHtoD_v2(va + 3 * MiB, "x", 1));
    assert_cu(cu.cuMemcpyHtoD_v2(va, "x", 1), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemGetAddressRange_v2(&b, &s, va + 5 * MiB));
    assert_int_equal(b, va + 2 * MiB);
    assert_int_equal(s, 4 * MiB);
    assert_ok(cu.cuMemRelease(h));
    assert_int_equal(used(), base + 4 * MiB); /* still mapped */
    assert_ok(cu.cuMemRetainAllocationHandle(&h2, (void *)(uintptr_t)(va + 3 * MiB)));
    assert_int_equal(h2, h);
    assert_ok(cu.cuMemRelease(h2));
    assert_cu(cu.cuMemUnmap(va + 2 * MiB, 2 * MiB), CUDA_ERROR_INVALID_VALUE); /* a part */
    assert_ok(cu.cuMemUnmap(va + 2 * MiB, 4 * MiB));
    assert_int_equal(used(), base);
    assert_cu(cu.cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);
    assert_ok(cu.cuMemAddressFree(va, 8 * MiB));
    /* Freeing the range drops what is still mapped in it. */
    assert_ok(cu.cuMemCreate(&h, 2 * MiB, &prop, 0));
    assert_ok(cu.cuMemAddressReserve(&va, 2 * MiB, 0, 0, 0));
    assert_ok(cu.cuMemMap(va, 2 * MiB, 0, h, 0));
    assert_ok(cu.cuMemRelease(h));
    assert_int_equal(used(), base + 2 * MiB);
    assert_ok(cu.cuMemAddressFree(va, 2 * MiB));
    assert_int_equal(used(), base);
}

/* A released handle's value is handed out again by the next cuMemCreate, as the driver does. */
static void test_vmm_released_handle_value_comes_back_at_once(void **state)
{
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemGenericAllocationHandle a, b, c, h;
    CUdeviceptr va;
    uint64_t base = used();

    (void)state;
    assert_ok(cu.cuMemCreate(&a, 2 * MiB, &prop, 0));
    assert_ok(cu.cuMemCreate(&b, 2 * MiB, &prop, 0));
    assert_true(a != 0 && b != 0 && a != b);
    assert_ok(cu.cuMemRelease(a));
    assert_ok(cu.cuMemCreate(&c, 4 * MiB, &prop, 0));
    assert_int_equal(c, a);
    /*
     * Released while mapped, the memory stays but the value is free at once: the next
     * cuMemCreate gets it, and retaining the mapped memory gives it another value.
     */
    assert_ok(cu.cuMemAddressReserve(&va, 4 * MiB, 0, 0, 0));
    assert_ok(cu.cuMemMap(va, 4 * MiB, 0, c, 0));
    assert_ok(cu.cuMemRelease(c));
    assert_ok(cu.cuMemCreate(&a, 2 * MiB, &prop, 0));
    assert_int_equal(a, c);
    assert_ok(cu.cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)va));
    assert_true(h != a && h != b && h != 0);
    assert_ok(cu.cuMemRelease(h));
    assert_ok(cu.cuMemRelease(a)); /* the new 2 MiB, not the mapped 4 */
    assert_ok(cu.cuMemUnmap(va, 4 * MiB));
    assert_ok(cu.cuMemAddressFree(va, 4 * MiB));
    assert_ok(cu.cuMemRelease(b));
    assert_int_equal(used(), base);
}

static void test_vmm_create_beyond_capacity_is_oom(void **state)
{
    uint64_t base = used();
    CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                 .location = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 } };
    CUmemGenericAllocationHandle h;

    (void)state;
    assert_cu(cu.cuMemCreate(&h, GiB, &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
    assert_ok(cu.cuMemCreate(&h, GiB - base, &prop, 0));
    assert_int_equal(used(), GiB);
    assert_ok(cu.cuMemRelease(h));
    assert_int_equal(used(), base);
    prop.location.id = 2;
    assert_cu(cu.cuMemCreate(&h, 2 * MiB, &prop, 0), CUDA_ERROR_INVALID_VALUE);
}

/* h200-driver-facts.txt, "array2d" and "array3d" lines; depth 0 is a 2-D array, height 0 1-D. */
static const struct {
    size_t w, h, d;
    CUarray_format f;
    unsigned ch;
    uint64_t took;
} array_cases[] = {
    { 1, 1, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 2 * MiB },
    { 100, 100, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 2 * MiB },
    { 1000, 1000, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 2 * MiB },
    { 1000, 1000, 0, CU_AD_FORMAT_FLOAT, 4, 16 * MiB },
    { 4096, 4096, 0, CU_AD_FORMAT_FLOAT, 4, 256 * MiB },
    { 4096, 4096, 0, CU_AD_FORMAT_HALF, 2, 64 * MiB },
    { 3000, 0, 0, CU_AD_FORMAT_FLOAT, 1, 2 * MiB },
    { 1001, 999, 0, CU_AD_FORMAT_FLOAT, 2, 8 * MiB },
    { 256, 256, 256, CU_AD_FORMAT_FLOAT, 1, 64 * MiB },
    { 100, 100, 100, CU_AD_FORMAT_UNSIGNED_INT8, 4, 6 * MiB }, /* elements alone: 4 MiB */
    { 1000, 1000, 10, CU_AD_FORMAT_HALF, 1, 32 * MiB },        /* elements alone: 20 MiB */
};

static void test_arrays_reserve_what_the_h200_reserved(void **state)
{
    uint64_t base = used();
    CUarray a;

    (void)state;
    for (size_t i = 0; i < sizeof(array_cases) / sizeof(array_cases[0]); i++) {
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = array_cases[i].w,
                                       .Height = array_cases[i].h,
                                       .Depth = array_cases[i].d,
                                       .Format = array_cases[i].f,
                                       .NumChannels = array_cases[i].ch };
        assert_ok(cu.cuArray3DCreate_v2(&a, &d3));
        if (used() - base != array_cases[i].took)
            fail_msg("array %zux%zux%zu x%u: took %llu, the H200 %llu", array_cases[i].w,
                     array_cases[i].h, array_cases[i].d, array_cases[i].ch,
                     (unsigned long long)(used() - base), (unsigned long long)array_cases[i].took);
        assert_ok(cu.cuArrayDestroy(a));
        assert_int_equal(used(), base);
        if (array_cases[i].d == 0) { /* the 2-D entry points agree */
            CUDA_ARRAY_DESCRIPTOR d2 = { .Width = array_cases[i].w,
                                         .Height = array_cases[i].h,
                                         .Format = array_cases[i].f,
                                         .NumChannels = array_cases[i].ch };
            assert_ok(cu.cuArrayCreate_v2(&a, &d2));
            assert_int_equal(used() - base, array_cases[i].took);
            assert_ok(cu.cuArrayDestroy(a));
        }
    }
    assert_int_equal(used(), base);
}

/* Every "a3 W H D KiB" line of h200-driver-facts.txt (u8, one channel): 353 3-D arrays. */
static void test_every_measured_3d_array_reserves_what_the_h200_reserved(void **state)
{
    FILE *f = fopen(SIM_FACTS_FILE, "r");
    char line[256];
    int n = 0, wrong = 0;

    (void)state;
    assert_non_null(f);
    while (fgets(line, sizeof(line), f)) {
        unsigned long long w, h, d, kib;
        uint64_t base = used();
        CUarray a;

        if (sscanf(line, "a3 %llu %llu %llu %llu", &w, &h, &d, &kib) != 4)
            continue;
        CUDA_ARRAY3D_DESCRIPTOR d3 = { .Width = w,
                                       .Height = h,
                                       .Depth = d,
                                       .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                       .NumChannels = 1 };
        assert_ok(cu.cuArray3DCreate_v2(&a, &d3));
        if (used() - base != kib * 1024) {
            print_message("array %llux%llux%llu: took %llu KiB, the H200 %llu KiB\n", w, h, d,
                          (unsigned long long)((used() - base) / 1024), kib);
            wrong++;
        }
        assert_ok(cu.cuArrayDestroy(a));
        n++;
    }
    fclose(f);
    assert_true(n >= 300);
    assert_int_equal(wrong, 0);
}

static void test_arrays_take_pages_of_their_own_and_are_checked(void **state)
{
    uint64_t base = used();
    CUDA_ARRAY_DESCRIPTOR_v1 d1 = {
        .Width = 100, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8, .NumChannels = 1
    };
    CUDA_ARRAY_DESCRIPTOR d2 = {
        .Width = 1 << 20, .Height = 0, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 4
    };
    CUDA_ARRAY3D_DESCRIPTOR_v1 d31 = { .Width = 1024,
                                       .Height = 1024,
                                       .Depth = 0,
                                       .Format = CU_AD_FORMAT_SIGNED_INT32,
                                       .NumChannels = 1 };
    CUDA_ARRAY3D_DESCRIPTOR d3 = {
        .Width = 16, .Height = 0, .Depth = 16, .Format = CU_AD_FORMAT_FLOAT, .NumChannels = 1
    };
    CUarray a, b, c;

    (void)state;
    assert_ok(cu.cuArrayCreate(&a, &d1)); /* the v1 descriptor; 100 bytes */
    assert_ok(cu.cuArrayCreate(&b, &d1)); /* not packed with the first */
    assert_int_equal(used(), base + 4 * MiB);
    assert_ok(cu.cuArray3DCreate(&c, &d31)); /* 2-D: 4096 x 1024 */
    assert_int_equal(used(), base + 8 * MiB);
    assert_ok(cu.cuArrayDestroy(a));
    assert_ok(cu.cuArrayDestroy(b));
    assert_ok(cu.cuArrayDestroy(c));
    assert_int_equal(used(), base);
    assert_cu(cu.cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    /* Refused, as on the H200: a 1-D array of 1048576 float4. */
    assert_cu(cu.cuArrayCreate_v2(&a, &d2), CUDA_ERROR_INVALID_VALUE);
    assert_cu(cu.cuArray3DCreate_v2(&a, &d3), CUDA_ERROR_INVALID_VALUE); /* depth without height */
    d2.Width = 1000;
    d2.NumChannels = 3;
    assert_cu(cu.cuArrayCreate_v2(&a, &d2), CUDA_ERROR_INVALID_VALUE);
    d2.NumChannels = 4;
    d2.Height = 1 << 30;
    d2.Width = 1 << 30;
    assert_cu(cu.cuArrayCreate_v2(&a, &d2), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(used(), base);
}

/* Threads allocating, launching and freeing at once leave the books exact. */
static void *churn(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    CUdeviceptr p[4];
    CUstream s;
    CUfunction f;
    CUevent e;
    CUresult bad = CUDA_SUCCESS;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        CUresult r_ = (call);                                                                      \
        if (r_ != CUDA_SUCCESS && bad == CUDA_SUCCESS)                                             \
            bad = r_;                                                                              \
    } while (0)
    CHECK(cu.cuCtxSetCurrent(ctx));
    CHECK(cu.cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cu.cuEventCreate(&e, 0));
    f = get_function(&cu, "noop");
    for (int i = 0; i < 200; i++) {
        CHECK(cu.cuMemAlloc_v2(&p[0], 1 + rand_r(&seed) % (8 << 20)));
        CHECK(cu.cuMemAllocAsync(&p[1], 1 + rand_r(&seed) % (8 << 20), s));
        CHECK(cu.cuMemAllocManaged(&p[2], 1 + rand_r(&seed) % (1 << 20), CU_MEM_ATTACH_GLOBAL));
        CHECK(cu.cuMemAllocAsync_ptsz(&p[3], 4096, NULL));
        CHECK(launch1(&cu, f, s));
        CHECK(cu.cuLaunchKernel_ptsz(f, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
        CHECK(cu.cuEventRecord(e, s));
        CHECK(cu.cuMemFreeAsync(p[1], s));
        CHECK(cu.cuMemFree_v2(p[0]));
        CHECK(cu.cuMemFree_v2(p[2]));
        CHECK(cu.cuMemFreeAsync_ptsz(p[3], NULL));
        CHECK(cu.cuEventSynchronize(e));
    }
    CHECK(cu.cuStreamSynchronize(s));
    CHECK(cu.cuStreamSynchronize_ptsz(NULL));
    CHECK(cu.cuEventDestroy_v2(e));
    CHECK(cu.cuStreamDestroy_v2(s));
#undef CHECK
    return (void *)(uintptr_t)bad;
}

static void test_concurrent_threads_keep_the_books_exact(void **state)
{
    uint64_t base = used();
    pthread_t t[6];
    void *ret;

    (void)state;
    for (uintptr_t i = 0; i < 6; i++)
        pthread_create(&t[i], NULL, churn, (void *)(i + 1));
    for (int i = 0; i < 6; i++) {
        pthread_join(t[i], &ret);
        assert_int_equal((int)(uintptr_t)ret, CUDA_SUCCESS);
    }
    assert_ok(cu.cuCtxSynchronize());
    assert_int_equal(used(), base);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allocations_take_pages_and_bad_frees_fail),
        cmocka_unit_test(test_small_allocations_are_packed_into_2mib_pages),
        cmocka_unit_test(test_large_allocations_take_whole_pages_of_their_own),
        cmocka_unit_test(test_pages_are_not_shared_between_contexts),
        cmocka_unit_test(test_out_of_memory_at_capacity_and_exact_give_back),
        cmocka_unit_test(test_pitch_is_the_width_rounded_to_512_bytes),
        cmocka_unit_test(test_managed_memory_counts_and_is_host_accessible),
        cmocka_unit_test(test_legacy_32bit_calls_get_low_addresses),
        cmocka_unit_test(test_address_range_and_copy_bounds),
        cmocka_unit_test(test_pools_grow_in_32mib_chunks_as_measured),
        cmocka_unit_test(test_pool_gives_back_whole_chunks_at_a_sync),
        cmocka_unit_test(test_fragmented_pool_grows_with_room_by_count),
        cmocka_unit_test(test_free_async_waits_for_its_stream),
        cmocka_unit_test(test_pool_attributes_and_high_water_marks),
        cmocka_unit_test(test_pool_growth_past_the_device_fails_and_changes_nothing),
        cmocka_unit_test(test_created_pools_and_device_current_pool),
        cmocka_unit_test(test_vmm_memory_lives_until_released_and_unmapped),
        cmocka_unit_test(test_vmm_create_beyond_capacity_is_oom),
        cmocka_unit_test(test_arrays_reserve_what_the_h200_reserved),
        cmocka_unit_test(test_every_measured_3d_array_reserves_what_the_h200_reserved),
        cmocka_unit_test(test_arrays_take_pages_of_their_own_and_are_checked),
        cmocka_unit_test(test_concurrent_threads_keep_the_books_exact),
        cmocka_unit_test(test_vmm_released_handle_value_comes_back_at_once),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
