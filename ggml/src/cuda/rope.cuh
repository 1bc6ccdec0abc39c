// rope.cuh - ROPE, NORMAL (adjacent pairs) and NEOX (halves) modes, optional freq factors,
// f32/f16, any source strides. params: i32 n_dims, i32 mode, f32 freq_base, f32 freq_scale.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(rope);

// ROPE -> RESHAPE to [ne0 * ne1, n_tokens] -> SET_ROWS into a KV cache [ne0 * ne1, n_cells] with dense rows,
// the rope output used by nothing else: one kernel writes the rotated rows straight into their cells.
bool ggml_cuda_rope_set_rows_ok(const ggml_tensor * rope, const ggml_tensor * reshape, const ggml_tensor * set_rows);
void ggml_cuda_op_rope_set_rows(ggml_cuda_context & ctx, const ggml_tensor * rope, ggml_tensor * set_rows);
