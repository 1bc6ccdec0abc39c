// rope.cuh - ROPE, NORMAL (adjacent pairs) and NEOX (halves) modes, optional freq factors,
// f32/f16, any source strides. params: i32 n_dims, i32 mode, f32 freq_base, f32 freq_scale.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(rope);
