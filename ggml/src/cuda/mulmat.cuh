// mulmat.cuh - MUL_MAT dispatch: a [K, M, A2, A3] (f32/f16/q8_0), b f32 [K, N, B2, B3] -> f32 [M, N, B2, B3].
//   N <= 8:  q8_0 -> mmvq (b quantized to q8_1 on the GPU); f16/f32 -> mmv
//   N > 8:   cuBLAS: q8_0 dequantized to f16 scratch, b converted to f16, f16 x f16 -> f32 (f32
//            compute); f32 x f32 as f32. Batches (GQA broadcast included) via strided-batched calls.
// Inputs with non-dense rows (transposed views) are first copied to dense scratch.
#pragma once
#include "common.cuh"

#define MUL_MAT_VEC_MAX_N 8

GGML_CUDA_OP(mul_mat);

// The q8 activation cache (ctx.qcache) must forget b once a node writes over it: call after each node.
void ggml_cuda_qcache_written(ggml_cuda_context & ctx, const ggml_tensor * t);
