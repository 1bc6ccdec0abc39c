// softmax.cuh - SOFT_MAX over ne0 of (a*scale + mask), optional f32/f16 mask broadcast over
// dims 2,3, optional built-in causal masking. params: f32 scale, i32 causal_n_past (-1 none).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(soft_max);

// softmax(x * scale + mask) over ne0 of each row of x (f32, shape/strides xs) into y (f32 or f16, ys);
// mask (f32/f16, ms, broadcast over dims 2, 3) may be null; n_past >= 0: column i0 > n_past + i1 excluded.
void ggml_cuda_soft_max_rows(ggml_cuda_context & ctx, const char * x, const cuda_shape & xs, const char * mask,
                             ggml_type mask_type, const cuda_shape & ms, char * y, ggml_type y_type,
                             const cuda_shape & ys, float scale, int n_past);
