// unary.cuh - SCALE (f32 s), SILU, SWIGLU (silu(a) * b); f32/f16, any strides.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(scale);
GGML_CUDA_OP(silu);
GGML_CUDA_OP(swiglu);
// SWIGLU also writing its result in the small-N wgmma GEMM's f16 activation order (mmw-order.cuh) into pool memory,
// returned; nullptr where it cannot (ggml_cuda_mmw_order_ok, the flat kernel), only the f32 result then.
half * ggml_cuda_op_swiglu_w16(ggml_cuda_context & ctx, ggml_tensor * dst);
