// fattn-range.cuh - the visible key range of each query token, from an attention mask: for row t of the mask
// [n_kv, n_tokens] (f16 or f32, any row stride, heads broadcast), {the first key whose mask value is above -inf,
// one past the last such key}; {0, 0} for a row that sees nothing. Flash attention over a KV cache shared by many
// sequences (ggml_flash_attn_ext_set_seqs) then reads only these keys: a token's range is its own sequence's
// cells, a small part of n_kv.
#pragma once
#include "common.cuh"

// [n_tokens] ranges in ctx.pool (valid until the pool is reset after the graph), computed by one launch on ctx's
// stream: one block per token row, reading the row once; the next call for the same mask in the graph returns them
// again without a launch (ctx.rcache; forgotten when a node writes over the mask or a pool rewind frees them).
// Followed by [n_tokens] flags {exact, 0}: exact = 1 where the row is 0 on every key of its range (and -inf outside
// it), so the range alone describes the mask.
int2 * ggml_cuda_mask_ranges(ggml_cuda_context & ctx, const char * mask, int64_t row_stride, bool f16, int n_kv,
                             int n_tokens);

// The union of the ranges of tokens t0 .. t1 (the keys a block of their queries must read): {lo, hi}, {0, 0} when
// none of them sees anything.
static __device__ __forceinline__ int2 fattn_ranges_union(const int2 * ranges, int t0, int t1) {
    int lo = INT_MAX, hi = 0;
    for (int t = t0; t <= t1; ++t) {
        const int2 r = ranges[t];
        if (r.y > r.x) {
            lo = min(lo, r.x);
            hi = max(hi, r.y);
        }
    }
    return lo == INT_MAX ? make_int2(0, 0) : make_int2(lo, hi);
}
