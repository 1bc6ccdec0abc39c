// quantize.cuh - activations f32 (any strides) -> q8_1 rows on the GPU, for the q8_0 mat-vec.
#pragma once
#include "common.cuh"

// x: f32 [K, N, B2, B3] (K % 32 == 0) -> y: contiguous q8_1, row (i1, i2, i3) at ((i3*B2 + i2)*N + i1) * K/32.
void ggml_cuda_quantize_q8_1(ggml_cuda_context & ctx, const ggml_tensor * x, cuda_block_q8_1 * y);

// Split layout for the repacked-weight mat-vec (mmvq.cuh): qs [nrows * K] int8 (row r at r*K,
// rows in the same order as above), then d [nrows * K/32] f32. Size: ggml_cuda_q8s_size().
inline size_t ggml_cuda_q8s_size(int64_t nrows, int64_t K) { return (size_t)(nrows * K + nrows * (K / 32) * 4); }
void ggml_cuda_quantize_q8s(ggml_cuda_context & ctx, const ggml_tensor * x, void * y);
