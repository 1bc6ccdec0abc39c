// mmvq.cuh - decode mat-vec for q8_0 weights: dst [M, N, B2, B3] = a^T b, a q8_0 [K, M, A2, A3],
// b already quantized to q8_1 (quantize.cuh), N <= MMVQ_MAX_COLS. Integer dots with __dp4a.
#pragma once
#include "common.cuh"

#define MMVQ_MAX_COLS 8

void ggml_cuda_mmvq_q8_0(ggml_cuda_context & ctx, const ggml_tensor * a, const cuda_block_q8_1 * bq,
                         const ggml_tensor * b, ggml_tensor * dst);

// a repacked q8_0 (q8repack.cuh), contiguous [K, M, A2, A3]; bq: b in the split layout
// (ggml_cuda_quantize_q8s). 16-byte loads of weight quants, one 128-thread block per row.
void ggml_cuda_mmvq_q8r(ggml_cuda_context & ctx, const ggml_tensor * a, const void * bq, const ggml_tensor * b,
                        ggml_tensor * dst);
