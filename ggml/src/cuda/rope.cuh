// rope.cuh - ROPE, NORMAL (adjacent pairs) and NEOX (halves) modes, optional freq factors,
// f32/f16, any source strides. params: i32 n_dims, i32 mode, f32 freq_base, f32 freq_scale.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(rope);

// The angles of a ROPE node: src1 the positions (i32), src2 the optional freq factors, params n_dims, freq_base,
// freq_scale
struct ggml_cuda_rope_params {
    const int32_t * pos;
    const float * ff;
    int n_dims;
    double theta_scale_log2;
    float freq_scale;
};
ggml_cuda_rope_params ggml_cuda_rope_params_of(const ggml_tensor * rope);

// cos and sin of rotated pair i (< n_dims / 2) at position p: theta = p * freq_scale * base^(-2i/n_dims) / ff[i],
// computed in double and reduced mod 2 pi there (positions reach thousands of radians: the float angle would lose
// the phase), then sin/cos in float, as the CPU backend does
static __device__ __forceinline__ void rope_cs(const ggml_cuda_rope_params & a, double p, int64_t i, float & cs,
                                               float & sn) {
    double theta = p * a.freq_scale * exp2(a.theta_scale_log2 * (double)i);
    if (a.ff) theta /= (double)a.ff[i];
    constexpr double two_pi = 6.283185307179586476925286766559;
    sincosf((float)(theta - rint(theta / two_pi) * two_pi), &sn, &cs);
}

// ROPE -> RESHAPE to [ne0 * ne1, n_tokens] -> SET_ROWS into a KV cache [ne0 * ne1, n_cells] with dense rows,
// the rope output used by nothing else: one kernel writes the rotated rows straight into their cells.
// blocks: the cache may also be q8_0 / q4_0 (rows of whole blocks; only the q/k/v group's epilogue stores those,
// ggml_cuda_mul_mat_group_rope: not the rope kernels here).
bool ggml_cuda_rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * reshape, const ggml_tensor * set_rows,
                                bool blocks = false);
void ggml_cuda_op_rope_set_rows(ggml_cuda_context & ctx, const ggml_tensor * rope, ggml_tensor * set_rows);

// The attention inputs of a step in one launch, nodes n[0..span) = ROPE(q), a view, ROPE(k), RESHAPE,
// SET_ROWS(k into the K cache), [a view (span 7: the transposed V cache)], SET_ROWS(v into the V cache, same
// cells): q rotated into its result, k rotated straight into its cells (as ggml_cuda_op_rope_set_rows), v
// copied into its cells. The caller checks that nothing else reads the rope(k) result. blocks: as above, for either
// cache (then only ggml_cuda_mul_mat_group_rope runs the nodes fused).
bool ggml_cuda_rope_qkv_ok(ggml_tensor * const * n, int span, bool blocks = false);
void ggml_cuda_op_rope_qkv(ggml_cuda_context & ctx, ggml_tensor * const * n, int span);
