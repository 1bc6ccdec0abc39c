// mmw-order.cuh - the order in which the small-N wgmma GEMM (mmq-w.cuh) reads its activations, for the kernels that
// write them: mmqw.cu's reorder (ggml_cuda_mmw_order) and the producers that write the order themselves beside their
// f32 result (a norm, the SwiGLU, the decode attention: fusion codes 17-20, ggml-cuda.cu), so that a batched decode
// step's GEMM needs no reorder launch before it.
//
// b f32 [K, N] becomes f16 [mmw_kpad(K), mmw_nt(N)] (per batch), zero past K and N. Value k of column n: in chunk
// c = k / 128 it is value 8p + e (p = (k % 32) / 8, e = k % 8) of 32-value unit u = (k % 128) / 32; k16 step s = 2p
// + e / 4 of the chunk holds values 4s .. 4s + 3 of each unit: e % 4 < 2 in core-matrix half 0 (logical k 2u, 2u + 1),
// else half 1 (2u + 8, 2u + 9). A step is a tile of nt x 16 halves: core (n / 8, half) 128 + 64 half halves into it,
// row n % 8, 8 halves a row.
#pragma once
#include "common.cuh"

#include <cuda_fp16.h>

static inline int64_t ggml_cuda_mmw_kpad(int64_t K) { return (K + 127) / 128 * 128; }
static inline int64_t ggml_cuda_mmw_nt(int64_t N) { return N <= 32 ? 32 : 64; }

// where value k of column n lies (halves from the start of its batch) in a tile of nt columns: mmw_at_k(nt, k) +
// mmw_at_n(n)
static __device__ __forceinline__ int64_t mmw_at_k(int nt, int64_t k) {
    const int64_t c = k / 128;
    const int u = (int)(k % 128) / 32, p = (int)(k % 32) / 8, e = (int)(k % 8);
    return (8 * c + 2 * p + e / 4) * nt * 16 + 64 * ((e % 4) / 2) + 2 * u + e % 2;
}
static __device__ __forceinline__ int mmw_at_n(int n) { return 128 * (n / 8) + 8 * (n % 8); }

// The producers' store of values k, k + 1 (k even) of column n < N: also zero the same place of the padding columns
// N + n, 2N + n, ... below nt, so that every value of the order is written once, by the thread that writes column
// n's (the producers cover exactly the N columns, and K % 128 == 0: no K padding).
static __device__ __forceinline__ void mmw_put2(half * xw, int nt, int N, int n, int64_t k, float v0, float v1) {
    half * at = xw + mmw_at_k(nt, k);
    *(half2 *)(at + mmw_at_n(n)) = __floats2half2_rn(v0, v1);
    for (int c = n + N; c < nt; c += N)
        *(half2 *)(at + mmw_at_n(c)) = __floats2half2_rn(0.0f, 0.0f);
}

// the same for one value
static __device__ __forceinline__ void mmw_put1(half * xw, int nt, int N, int n, int64_t k, float v) {
    half * at = xw + mmw_at_k(nt, k);
    at[mmw_at_n(n)] = __float2half_rn(v);
    for (int c = n + N; c < nt; c += N)
        at[mmw_at_n(c)] = __float2half_rn(0.0f);
}

// whether a producer can write t (its f32 result, as the GEMM reads it) in the order too: dense f32 rows of a
// multiple of 128 values (no K padding), 1..64 of them, one batch
static inline bool ggml_cuda_mmw_order_ok(const ggml_tensor * t) {
    return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t) && t->ne[2] == 1 && t->ne[3] == 1 && t->ne[0] % 128 == 0 &&
           t->ne[1] >= 1 && t->ne[1] <= 64 && t->ne[0] <= INT32_MAX;
}

// pool memory for t in the order (ggml_cuda_mmw_order_ok(t))
static inline half * ggml_cuda_mmw_order_alloc(ggml_cuda_context & ctx, const ggml_tensor * t) {
    return (half *)ctx.pool.alloc(sizeof(half) * ggml_cuda_mmw_kpad(t->ne[0]) * ggml_cuda_mmw_nt(t->ne[1]));
}
