// mma-s8.cuh - the int8 tensor-core MMA (mma.sync s8 x s8 -> s32) of the quantized GEMM (mmq-t.cuh) and of the
// decode attention on a q8_0 cache (fattn-mma.cu). The MMAs start from MMQ_FBIAS instead of 0: the s32 result c is
// then the bit pattern of the float 1.5 * 2^23 + c (|c| <= 32 * 127 * 128 < 2^22), so (float)c costs one FADD
// (__int_as_float(c) - MMQ_FBIAS_F) instead of a quarter-rate I2F.
#pragma once
#include "common.cuh"

#define MMQ_FBIAS 0x4B400000
#define MMQ_FBIAS_F 12582912.0f

// c = MMQ_FBIAS + a (16 x 32, row) b (32 x 8, col), s8 -> s32
static __device__ __forceinline__ void mmq_mma_k32(int (&c)[4], int a0, int a1, int a2, int a3, int b0, int b1) {
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%10, %10, %10, %10};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "r"(MMQ_FBIAS));
}
// c = MMQ_FBIAS + a (16 x 16) b (16 x 8), s8 -> s32
static __device__ __forceinline__ void mmq_mma_k16(int (&c)[4], int a0, int a1, int b0) {
    asm("mma.sync.aligned.m16n8k16.row.col.s32.s8.s8.s32 {%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};"
        : "=r"(c[0]), "=r"(c[1]), "=r"(c[2]), "=r"(c[3])
        : "r"(a0), "r"(a1), "r"(b0), "r"(MMQ_FBIAS));
}
