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

// Whether the repacked mat-vec uses v6 (one warp per row) for this K and N; the fused kernels below reuse
// its per-row loop, so graph_compute fuses only where the separate launch would be v6 as well.
bool ggml_cuda_mmvq_q8r_v6(const ggml_cuda_context & ctx, int64_t K, int64_t N);

// Fused decode mat-vecs (ggml_cuda_mul_mat_group / _swiglu in mulmat.cuh check the conditions).
// dsts[0..n-1]: MUL_MAT nodes, src0 repacked q8_0 [K, M_m] (2-D), one activation row quantized in bq (split
// layout), f32 dst [M_m] each: one launch over the concatenated 4-row blocks.
void ggml_cuda_mmvq_q8r_group(ggml_cuda_context & ctx, const ggml_tensor * const * dsts, int n, const void * bq);
// dst [M] = silu(gate_w . x) * (up_w . x); gate_w, up_w repacked q8_0 [K, M] (2-D); x quantized in bq.
void ggml_cuda_mmvq_q8r_swiglu(ggml_cuda_context & ctx, const ggml_tensor * gate_w, const ggml_tensor * up_w,
                               const void * bq, float * dst);
