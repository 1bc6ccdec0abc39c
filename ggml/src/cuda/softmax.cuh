// softmax.cuh - SOFT_MAX over ne0 of (a*scale + mask), optional f32/f16 mask broadcast over
// dims 2,3, optional built-in causal masking. params: f32 scale, i32 causal_n_past (-1 none).
#pragma once
#include "common.cuh"

GGML_CUDA_OP(soft_max);
