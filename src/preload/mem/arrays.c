/*
 * CUDA arrays (cuArrayCreate, cuArray3DCreate and their legacy forms):
 * charged by the block-linear rule.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "common/error.h"
#include "common/reserve.h"
#include "common/tenant.h"
#include "preload/map.h"
#include "preload/preload.h"
#include "preload/mem/mem_internal.h"

static uint64_t format_bytes(CUarray_format f)
{
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8:
        return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF:
        return 2;
    default:
        return 4; /* 32-bit formats; the rarer packed formats are at most this */
    }
}

/*
 * What an array takes, before the rounding to pages: its layout is block-
 * linear. Fitted to 353 arrays measured on the H200 (driver 580; every one
 * matched): rows rounded up to 64 bytes, the height to 8 rows, the depth to a
 * block of the next power of two up to 16 (1, 2, 4, 8, 16: a depth of 10
 * takes 16, 17 takes 32, 100 takes 112). 2-D arrays are one slice.
 */
static uint64_t array_bytes(uint64_t w, uint64_t h, uint64_t depth, CUarray_format f,
                            unsigned int channels)
{
    uint64_t row, rows, block = 1;

    if (w > (1ULL << 32) || h > (1ULL << 32) || depth > (1ULL << 32) || channels > 4)
        return UINT64_MAX; /* refused: no device holds it */
    row = round_up(w * format_bytes(f) * (channels ? channels : 1), 64);
    rows = round_up(h ? h : 1, 8);
    while (block < depth && block < 16)
        block *= 2;
    depth = depth > 1 ? round_up(depth, block) : 1;
    if (row > UINT64_MAX / rows / depth)
        return UINT64_MAX;
    return row * rows * depth;
}

#define GS_ARRAY_BODY(sym, pHandle, bytes, call)                                                   \
    do {                                                                                           \
        struct dev_state *d;                                                                       \
        uint64_t charge;                                                                           \
        CUresult r;                                                                                \
        int ord;                                                                                   \
        GS_PASS(sym, call);                                                                        \
        if (pAllocateArray == NULL)                                                                \
            return gs__real.sym call;                                                              \
        if ((d = limited_current(&ord, &r)) == NULL)                                               \
            return r == CUDA_SUCCESS ? gs__real.sym call : r;                                      \
        charge = round_up((bytes), d->gran);                                                       \
        if ((r = admit(d, charge)) != CUDA_SUCCESS)                                                \
            return r;                                                                              \
        GS_RESERVED_CALL(r, d, charge, gs__real.sym call);                                         \
        if (r != CUDA_SUCCESS) {                                                                   \
            unadmit(d, charge);                                                                    \
            settle(d);                                                                             \
            return r;                                                                              \
        }                                                                                          \
        track(&arrays, (uint64_t)(uintptr_t) * (pHandle), charge, ord, current_ctx());             \
        settle(d);                                                                                 \
        return CUDA_SUCCESS;                                                                       \
    } while (0)

GS_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray)
{
    GS_ARRAY_BODY(cuArrayCreate_v2, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height, 1,
                              pAllocateArray->Format, pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray)
{
    GS_ARRAY_BODY(cuArrayCreate, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height, 1,
                              pAllocateArray->Format, pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle,
                                      const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray)
{
    GS_ARRAY_BODY(cuArray3DCreate_v2, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height, pAllocateArray->Depth,
                              pAllocateArray->Format, pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArray3DCreate(CUarray *pHandle,
                                   const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray)
{
    GS_ARRAY_BODY(cuArray3DCreate, pHandle,
                  array_bytes(pAllocateArray->Width, pAllocateArray->Height, pAllocateArray->Depth,
                              pAllocateArray->Format, pAllocateArray->NumChannels),
                  (pHandle, pAllocateArray));
}

GS_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
    GS_FREE_BODY(cuArrayDestroy, &arrays, (uintptr_t)hArray, (hArray));
}
