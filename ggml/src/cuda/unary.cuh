// unary.cuh - SCALE (f32 s), SILU, SWIGLU (silu(a) * b); f32/f16, any strides.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(scale);
GGML_CUDA_OP(silu);
GGML_CUDA_OP(swiglu);
