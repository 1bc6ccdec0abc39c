// quantize.cuh - activations f32 (any strides) -> q8_1 rows on the GPU, for the q8_0 mat-vec.
#pragma once
#include "common.cuh"

// x: f32 [K, N, B2, B3] (K % 32 == 0) -> y: contiguous q8_1, row (i1, i2, i3) at ((i3*B2 + i2)*N + i1) * K/32.
void ggml_cuda_quantize_q8_1(ggml_cuda_context & ctx, const ggml_tensor * x, cuda_block_q8_1 * y);

// Split layout for the repacked-weight mat-vec (mmvq.cuh): qs [nrows * K] int8 (row r at r*K,
// rows in the same order as above), then d [nrows * K/32] f32. Size: ggml_cuda_q8s_size().
inline size_t ggml_cuda_q8s_size(int64_t nrows, int64_t K) { return (size_t)(nrows * K + nrows * (K / 32) * 4); }
void ggml_cuda_quantize_q8s(ggml_cuda_context & ctx, const ggml_tensor * x, void * y);

// The rounding of one split-layout block (amax = max |v| over its 32 values), shared by k_quantize_q8s and
// the fused norm kernels (norm.cu) so both write the same bytes. IEEE divisions (__fdiv_rn): fast-math
// cannot turn them into different approximations in different kernels.
static __device__ __forceinline__ float q8s_scale(float amax) { return __fdiv_rn(amax, 127.0f); }
static __device__ __forceinline__ int8_t q8s_quant(float v, float amax, float s) {
    return (int8_t)(amax == 0.0f ? 0 : (int)roundf(__fdiv_rn(v, s)));
}
