/*
 * Tests of the simulated driver's memory: OOM at capacity and exact give-back,
 * 2 MiB granules, pitch, managed, legacy 32-bit calls, address ranges and copy
 * checks, stream-ordered pools (growth, release at sync, threshold, trim,
 * destroy), VMM (memory lives while mapped), and arrays. A 1 GiB device.
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

static void test_allocations_reserve_whole_2mib_granules(void **state)
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

static void test_pitch_rounds_rows_to_512_bytes(void **state)
{
    uint64_t base = used();
    CUdeviceptr p, q;
    CUdeviceptr_v1 p32;
    size_t pitch, size;
    unsigned pitch32;

    (void)state;
    assert_ok(cu.cuMemAllocPitch_v2(&p, &pitch, 1000, 3, 4));
    assert_int_equal(pitch, 1024);
    assert_int_equal(used(), base + 2 * MiB);
    assert_ok(cu.cuMemGetAddressRange_v2(NULL, &size, p));
    assert_int_equal(size, 1024 * 3);
    assert_ok(cu.cuMemAllocPitch_v2(&q, &pitch, 3000, 1000, 16));
    assert_int_equal(pitch, 3072);
    assert_int_equal(used(), base + 2 * MiB + 4 * MiB); /* 3,072,000 bytes: two granules */
    assert_ok(cu.cuMemAllocPitch(&p32, &pitch32, 512, 4096, 8));
    assert_int_equal(pitch32, 512);
    assert_int_equal(used(), base + 8 * MiB);
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

static void test_pool_grows_keeps_freed_memory_until_sync(void **state)
{
    uint64_t base = used();
    CUmemoryPool pool, cur;
    CUdeviceptr a, b;
    CUstream s;

    (void)state;
    assert_ok(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    assert_ok(cu.cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(pool, cur);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), 0);
    assert_ok(cu.cuStreamCreate(&s, 0));
    assert_ok(cu.cuMemAllocAsync(&a, 3 * MiB, s));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 4 * MiB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    assert_int_equal(used(), base + 4 * MiB);
    assert_ok(cu.cuMemAllocAsync_ptsz(&b, 1, NULL));
    assert_int_equal(used(), base + 6 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 2 * MiB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 6 * MiB);
    assert_int_equal(used(), base + 6 * MiB); /* freed into the pool, not the device */
    assert_ok(cu.cuMemAllocAsync(&a, 4 * MiB, s));  /* reuses the reserve */
    assert_int_equal(used(), base + 6 * MiB);
    assert_ok(cu.cuMemFreeAsync(a, s));
    assert_ok(cu.cuStreamSynchronize(s)); /* the threshold is 0: all unused goes back */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
    assert_int_equal(used(), base + 2 * MiB);
    assert_ok(cu.cuMemFreeAsync_ptsz(b, NULL));
    assert_ok(cu.cuCtxSynchronize());
    assert_int_equal(used(), base);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), 6 * MiB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH), 6 * MiB);
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

static void test_pool_threshold_and_trim(void **state)
{
    uint64_t base = used();
    cuuint64_t threshold = 8 * MiB, zero = 0;
    CUmemoryPool pool;
    CUdeviceptr a;
    CUevent e;

    (void)state;
    assert_ok(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    assert_ok(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    assert_ok(cu.cuMemAllocAsync(&a, 12 * MiB, NULL));
    assert_ok(cu.cuMemFreeAsync(a, NULL));
    assert_ok(cu.cuEventCreate(&e, 0));
    assert_ok(cu.cuEventRecord(e, NULL));
    assert_ok(cu.cuEventSynchronize(e)); /* keeps the threshold */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 8 * MiB);
    assert_int_equal(used(), base + 8 * MiB);
    assert_ok(cu.cuMemAllocAsync(&a, 2 * MiB, NULL));
    assert_ok(cu.cuMemPoolTrimTo(pool, 4 * MiB));
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4 * MiB);
    assert_ok(cu.cuMemPoolTrimTo(pool, 0)); /* never below what is in use */
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 2 * MiB);
    assert_int_equal(used(), base + 2 * MiB);
    assert_ok(cu.cuMemFree_v2(a)); /* a pool allocation may also go by cuMemFree */
    assert_ok(cu.cuMemPoolTrimTo(pool, 0));
    assert_int_equal(used(), base);
    assert_ok(cu.cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &zero));
    assert_ok(cu.cuEventDestroy_v2(e));
}

static void test_pool_growth_past_the_device_fails_and_changes_nothing(void **state)
{
    uint64_t base = used();
    CUmemoryPool pool;
    CUdeviceptr a, b;

    (void)state;
    assert_ok(cu.cuDeviceGetDefaultMemPool(&pool, 0));
    assert_ok(cu.cuMemAllocAsync(&a, 100 * MiB, NULL));
    assert_cu(cu.cuMemAllocAsync(&b, GiB - base - 99 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 100 * MiB);
    assert_int_equal(pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 100 * MiB);
    assert_int_equal(used(), base + 100 * MiB);
    assert_ok(cu.cuMemAllocAsync(&b, GiB - base - 100 * MiB, NULL));
    assert_int_equal(used(), GiB);
    assert_ok(cu.cuMemFreeAsync(a, NULL));
    assert_ok(cu.cuMemFreeAsync(b, NULL));
    assert_ok(cu.cuStreamSynchronize(NULL));
    assert_int_equal(used(), base);
}

static void test_created_pools_and_device_current_pool(void **state)
{
    uint64_t base = used();
    CUmemPoolProps props = {.allocType = CU_MEM_ALLOCATION_TYPE_PINNED,
                            .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemoryPool pool, cur, def;
    CUdeviceptr a, b;

    (void)state;
    assert_ok(cu.cuMemPoolCreate(&pool, &props));
    assert_ok(cu.cuMemAllocFromPoolAsync(&a, 5 * MiB, pool, NULL));
    assert_ok(cu.cuMemAllocFromPoolAsync_ptsz(&b, 1 * MiB, pool, NULL));
    assert_int_equal(used(), base + 8 * MiB);
    assert_ok(cu.cuDeviceSetMemPool(0, pool));
    assert_ok(cu.cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, pool);
    assert_ok(cu.cuDeviceGetDefaultMemPool(&def, 0));
    assert_cu(cu.cuMemPoolDestroy(def), CUDA_ERROR_INVALID_VALUE);
    /* Destroyed with allocations outstanding: the pool goes when they do. */
    assert_ok(cu.cuMemFreeAsync(b, NULL));
    assert_ok(cu.cuMemPoolDestroy(pool));
    assert_int_equal(used(), base + 6 * MiB);
    assert_ok(cu.cuDeviceGetMemPool(&cur, 0));
    assert_ptr_equal(cur, def);
    assert_ok(cu.cuMemFreeAsync(a, NULL));
    assert_int_equal(used(), base);
    props.maxSize = 4 * MiB;
    assert_ok(cu.cuMemPoolCreate(&pool, &props));
    assert_cu(cu.cuMemAllocFromPoolAsync(&a, 5 * MiB, pool, NULL), CUDA_ERROR_OUT_OF_MEMORY);
    assert_ok(cu.cuMemPoolDestroy(pool));
    assert_cu(cu.cuMemPoolDestroy(pool), CUDA_ERROR_INVALID_VALUE);
    props.location.id = 1;
    assert_cu(cu.cuMemPoolCreate(&pool, &props), CUDA_ERROR_INVALID_VALUE);
}

static void test_vmm_memory_lives_until_released_and_unmapped(void **state)
{
    uint64_t base = used();
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
    CUmemAccessDesc access = {.location = prop.location,
                              .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
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

static void test_vmm_create_beyond_capacity_is_oom(void **state)
{
    uint64_t base = used();
    CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                                .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
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

static void test_arrays_reserve_their_size_in_granules(void **state)
{
    uint64_t base = used();
    CUDA_ARRAY_DESCRIPTOR d2 = {.Width = 1000, .Height = 1000, .Format = CU_AD_FORMAT_FLOAT,
                                .NumChannels = 4};
    CUDA_ARRAY_DESCRIPTOR_v1 d1 = {.Width = 100, .Height = 0, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                   .NumChannels = 1};
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = 256, .Height = 256, .Depth = 64,
                                  .Format = CU_AD_FORMAT_HALF, .NumChannels = 2};
    CUDA_ARRAY3D_DESCRIPTOR_v1 d31 = {.Width = 1024, .Height = 1024, .Depth = 0,
                                      .Format = CU_AD_FORMAT_SIGNED_INT32, .NumChannels = 1};
    CUarray a, b, c, d;

    (void)state;
    assert_ok(cu.cuArrayCreate_v2(&a, &d2)); /* 16,000,000 bytes: 8 granules */
    assert_int_equal(used(), base + 16 * MiB);
    assert_ok(cu.cuArrayCreate(&b, &d1));
    assert_int_equal(used(), base + 18 * MiB);
    assert_ok(cu.cuArray3DCreate_v2(&c, &d3)); /* exactly 16 MiB */
    assert_int_equal(used(), base + 34 * MiB);
    assert_ok(cu.cuArray3DCreate(&d, &d31)); /* 4 MiB */
    assert_int_equal(used(), base + 38 * MiB);
    assert_ok(cu.cuArrayDestroy(a));
    assert_ok(cu.cuArrayDestroy(b));
    assert_ok(cu.cuArrayDestroy(c));
    assert_ok(cu.cuArrayDestroy(d));
    assert_int_equal(used(), base);
    assert_cu(cu.cuArrayDestroy(a), CUDA_ERROR_INVALID_HANDLE);
    d2.NumChannels = 3;
    assert_cu(cu.cuArrayCreate_v2(&a, &d2), CUDA_ERROR_INVALID_VALUE);
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

#define CHECK(call)                                                                        \
    do {                                                                                   \
        CUresult r_ = (call);                                                              \
        if (r_ != CUDA_SUCCESS && bad == CUDA_SUCCESS)                                     \
            bad = r_;                                                                      \
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
        cmocka_unit_test(test_allocations_reserve_whole_2mib_granules),
        cmocka_unit_test(test_out_of_memory_at_capacity_and_exact_give_back),
        cmocka_unit_test(test_pitch_rounds_rows_to_512_bytes),
        cmocka_unit_test(test_managed_memory_counts_and_is_host_accessible),
        cmocka_unit_test(test_legacy_32bit_calls_get_low_addresses),
        cmocka_unit_test(test_address_range_and_copy_bounds),
        cmocka_unit_test(test_pool_grows_keeps_freed_memory_until_sync),
        cmocka_unit_test(test_pool_threshold_and_trim),
        cmocka_unit_test(test_pool_growth_past_the_device_fails_and_changes_nothing),
        cmocka_unit_test(test_created_pools_and_device_current_pool),
        cmocka_unit_test(test_vmm_memory_lives_until_released_and_unmapped),
        cmocka_unit_test(test_vmm_create_beyond_capacity_is_oom),
        cmocka_unit_test(test_arrays_reserve_their_size_in_granules),
        cmocka_unit_test(test_concurrent_threads_keep_the_books_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
