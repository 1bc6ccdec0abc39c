// fattn-mma.cuh - prompt flash attention on tensor cores (mma.sync m16n8k16, f16 in, f32 accumulate): q f32
// [D, n_tokens, n_head] (any strides), K/V f16 [D, n_kv, n_head_kv] (16-byte aligned rows: KV-cache views are read
// in place), optional f16/f32 mask [n_kv, >= n_tokens] (broadcast over heads or per head), GQA, the causal limit
// causal_n_past (keys past it are skipped tile by tile) -> dst f32 contiguous [D, n_head, n_tokens].
// No score matrix in memory: a block of 4 warps owns 64 query rows of one kv head (rows = token * r + head in the
// group, so a K/V tile serves all r heads of the group), streams K/V tiles of 64 keys through shared memory
// (cp.async, double-buffered; the mask rows of its tokens with them) and keeps the online softmax state in
// registers (FlashAttention-2).
#pragma once
#include "common.cuh"
#include "fattn-common.cuh"

#include <type_traits>

struct fattn_mma_params {
    const char * q;
    const char * k;
    const char * v;
    const char * mask;
    float * dst;
    cuda_shape qs, ks, vs, ms, ds;
    int D, n_kv, n_tokens, n_head, r, causal_n_past, mask_f16;
    float scale;
    int mask_stage; // set by ggml_cuda_fattn_mma
    // optional [n_tokens] {first visible key, one past the last} of each token (fattn-range.cuh): a block reads
    // only the key tiles of the union of its tokens' ranges (a cache shared by many sequences); nullptr: all keys
    const int2 * ranges;
    // ggml_cuda_fattn_mma_wide's KV splits (set there): n_split > 1 blocks per row block, each over its part of the
    // key tiles, write unnormalised partials (fattn-common.cuh's merge_splits layout) that one launch merges
    int n_split;
    float * part;
    float2 * ml;
};

// f(std::integral_constant<int, D>()) for the head sizes the prompt kernels are built for (64, 80, 96, 128)
template <class F> void fattn_mma_for_d(int D, F && f) {
    switch (D) {
        case 64:
            return f(std::integral_constant<int, 64>());
        case 80:
            return f(std::integral_constant<int, 80>());
        case 96:
            return f(std::integral_constant<int, 96>());
        case 128:
            return f(std::integral_constant<int, 128>());
        default:
            GGML_ABORT("fattn mma: D %d", D);
    }
}

// whether the kernel takes it: D in {64, 80, 96, 128}, f16 K/V with 16-byte aligned rows, f32 contiguous dst
bool ggml_cuda_fattn_mma_ok(int D, const ggml_tensor * k, const ggml_tensor * v, const ggml_tensor * dst);
void ggml_cuda_fattn_mma(ggml_cuda_context & ctx, const fattn_mma_params & p);
// The same on the same inputs by blocks of 4 warps x 32 query rows, KV split where that fills the GPU
// (fattn-mma-wide.cu; mask_stage unused): for prompts of one sequence where it is wanted, i.e. at least 2048 keys
// (splits possible) or two blocks per SM without splits; not with GGML_CUDA_FATTN_WIDE=0 (an A/B).
void ggml_cuda_fattn_mma_wide(ggml_cuda_context & ctx, const fattn_mma_params & p);
bool ggml_cuda_fattn_mma_wide_wanted(const fattn_mma_params & p, int n_sm);

// Decode on tensor cores (the f16 and q8_0 decode paths of fattn.cu): at most 16 query rows per kv head (n_tokens *
// r); f16 K/V as for ggml_cuda_fattn_mma_ok, or K and V both q8_0 with D 64 or 128 (rows read in place, 4-byte
// aligned; 8-byte at D 128); KV splits merged by the last block per kv head (fattn-common.cuh).
bool ggml_cuda_fattn_mma_dec_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v,
                                const ggml_tensor * dst);
// The kernel for head size D (64, 80, 96, 128; q8: a q8_0 cache, 64 or 128), n_q query rows per kv head (up to 8: the
// swapped-operand form) and configuration cfg (warps per block x cp.async stages per warp: 1: 4 x 3, 2: 2 x 4, 3: 4 x
// 2, 5: 8 x 3, 6: 12 x 2, 7: 8 x 4, else 8 x 2 (q8: 8 x 3)), its warps per block W, keys per warp step S and dynamic
// shared memory (the attribute is set).
fattn_vec_fn ggml_cuda_fattn_mma_dec(int D, bool q8, int n_q, int cfg, int device, int & W, int & S, size_t & smem);
