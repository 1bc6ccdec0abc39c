// rope.cuh - ROPE, NORMAL (adjacent pairs) and NEOX (halves) modes, optional freq factors,
// f32/f16, any source strides. params: i32 n_dims, i32 mode, f32 freq_base, f32 freq_scale.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(rope);

// ROPE -> RESHAPE to [ne0 * ne1, n_tokens] -> SET_ROWS into a KV cache [ne0 * ne1, n_cells] with dense rows,
// the rope output used by nothing else: one kernel writes the rotated rows straight into their cells.
bool ggml_cuda_rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * reshape, const ggml_tensor * set_rows);
void ggml_cuda_op_rope_set_rows(ggml_cuda_context & ctx, const ggml_tensor * rope, ggml_tensor * set_rows);

// The attention inputs of a step in one launch, nodes n[0..span) = ROPE(q), a view, ROPE(k), RESHAPE,
// SET_ROWS(k into the K cache), [a view (span 7: the transposed V cache)], SET_ROWS(v into the V cache, same
// cells): q rotated into its result, k rotated straight into its cells (as ggml_cuda_op_rope_set_rows), v
// copied into its cells. The caller checks that nothing else reads the rope(k) result.
bool ggml_cuda_rope_qkv_ok(ggml_tensor * const * n, int span);
void ggml_cuda_op_rope_qkv(ggml_cuda_context & ctx, ggml_tensor * const * n, int span);
