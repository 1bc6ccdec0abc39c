// mmv.cuh - decode mat-vec for f16/f32 a: dst [M, N, B2, B3] = a^T b, a [K, M, A2, A3] with dense
// rows (nb0 == type size, any nb1..nb3: permuted KV-cache views work, with GQA broadcast),
// b f32 [K, N, B2, B3] any strides, N <= MMV_MAX_COLS.
#pragma once
#include "common.cuh"

#define MMV_MAX_COLS 8

void ggml_cuda_mmv(ggml_cuda_context & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst);
