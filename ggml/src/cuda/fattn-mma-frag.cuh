// fattn-mma-frag.cuh - the f16 tensor-core pieces of the attention kernels (fattn-mma.cu, fattn-mma-wide.cu):
// one mma.m16n8k16 (f16 in, f32 accumulate), ldmatrix of four 8x8 f16 matrices (plain and transposed) and two floats
// packed to an f16 pair. Fragment layouts: fattn-mma.cu's head comment.
#pragma once
#include "common.cuh"

static __device__ __forceinline__ void fm_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void fm_ldsm(uint32_t (&r)[4], const half * p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ void fm_ldsm_t(uint32_t (&r)[4], const half * p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ uint32_t fm_pack(float x, float y) {
    const half2 h = __floats2half2_rn(x, y);
    return *(const uint32_t *)&h;
}
