// fattn-mma-frag.cuh - the pieces the prompt attention kernels (fattn-mma.cu, fattn-mma-wide.cu) share: one
// mma.m16n8k16 (f16 in, f32 accumulate), ldmatrix of four 8x8 f16 matrices (plain and transposed), two floats packed
// to an f16 pair, and the double-buffered K/V tiles. Fragment layouts: fattn-mma.cu's head comment.
#pragma once
#include "common.cuh"
#include "cp-async.cuh"

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

// The K and V rows of key tile `tile` (BN keys of D f16 values, rows 16-byte aligned, row strides ks1 / vs1 bytes)
// into buffer buf of Ks / Vs ([2][BN][LD] halves each) by cp.async, the block's threads over 16-byte chunks; keys
// past n_kv repeat the last row (finite values: the callers mask them). The caller commits the group.
template <int D, int BN, int LD>
static __device__ __forceinline__ void fm_load_kv(half * Ks, half * Vs, const char * kb, const char * vb, int64_t ks1,
                                                  int64_t vs1, int n_kv, int tile, int buf) {
    constexpr int CH = D / 8; // 16-byte chunks per row
    for (int e = threadIdx.x; e < BN * CH; e += blockDim.x) {
        const int j = e / CH, ch = e % CH;
        const int64_t key = min(tile * BN + j, n_kv - 1);
        cp_async16(Ks + (buf * BN + j) * LD + ch * 8, kb + key * ks1 + ch * 16);
        cp_async16(Vs + (buf * BN + j) * LD + ch * 8, vb + key * vs1 + ch * 16);
    }
}

// The head of iteration it of a double-buffered tile loop over tiles tile_begin .. + n_tiles - 1: the next tile's
// loads issued into the other buffer (load(tile, buf), one commit group), this one's awaited, a block barrier.
template <class F>
static __device__ __forceinline__ void fm_next_tile(int it, int n_tiles, int tile_begin, const F & load) {
    if (it + 1 < n_tiles) {
        load(tile_begin + it + 1, (it & 1) ^ 1);
        cp_async_wait<1>();
    } else {
        cp_async_wait<0>();
    }
    __syncthreads();
}
