// norm.cuh - RMS_NORM over ne0 (f32 eps), and the fused RMS_NORM + MUL by a weight that
// graph_compute uses when the norm's only user multiplies it.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(rms_norm);
// mul: a MUL node whose src[0] is an RMS_NORM node; writes mul's result, the norm node is skipped.
void ggml_cuda_op_rms_norm_mul(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul);
// ADD -> RMS_NORM -> MUL(weight) in one kernel (the residual add before a norm); _ok: shapes/types allow it
bool ggml_cuda_add_rms_norm_mul_ok(const ggml_tensor * add, const ggml_tensor * norm, const ggml_tensor * mul);
void ggml_cuda_op_add_rms_norm_mul(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm, ggml_tensor * mul);
// The same two fusions, also writing mul's result quantized in the split q8 layout (quantize.cuh) into pool
// memory, bit-identical to ggml_cuda_quantize_q8s of it; returns that memory (ggml_cuda_q8s_size(nrows, ne0)
// bytes), or nullptr where the layout does not allow it (ne0 % 32 != 0, non-contiguous, unaligned), in which
// case only the f32 result is written.
void * ggml_cuda_op_rms_norm_mul_q8(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul);
void * ggml_cuda_op_add_rms_norm_mul_q8(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm,
                                        ggml_tensor * mul);
// The same two fusions, also writing mul's result in the small-N wgmma GEMM's f16 activation order (mmw-order.cuh)
// into pool memory, returned; nullptr where it cannot (ggml_cuda_mmw_order_ok, the vector add kernel), in which case
// only the f32 result is written. The f32 result is written either way.
half * ggml_cuda_op_rms_norm_mul_w16(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul);
half * ggml_cuda_op_add_rms_norm_mul_w16(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm,
                                         ggml_tensor * mul);
