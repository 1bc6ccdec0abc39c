// mmv.cuh - decode mat-vec for f16/f32 a: dst [M, N, B2, B3] = a^T b, a [K, M, A2, A3] with dense
// rows (nb0 == type size, any nb1..nb3: permuted KV-cache views work, with GQA broadcast),
// b f32 [K, N, B2, B3] any strides, N <= MMV_MAX_COLS.
#pragma once
#include "common.cuh"

#define MMV_MAX_COLS 8

void ggml_cuda_mmv(ggml_cuda_context & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst);

// Fused decode mat-vecs with f16 weights (mulmat.cuh: ggml_cuda_mul_mat_group / _swiglu), v2's loop.
// _fusable: a is a 2-D f16 [K, M] with 16-byte aligned dense rows and K is a v2 length (K % 8 == 0, >= 1024).
bool ggml_cuda_mmv_f16_fusable(const ggml_tensor * a, int64_t K);
// dsts[0..n-1]: MUL_MAT nodes, same src1 x (f32 [K], dense, 16-byte aligned), _fusable src0, f32 dst [M_m]
void ggml_cuda_mmv_f16_group(ggml_cuda_context & ctx, const ggml_tensor * const * dsts, int n);
// dst [M] = silu(gate_w . x) * (up_w . x)
void ggml_cuda_mmv_f16_swiglu(ggml_cuda_context & ctx, const ggml_tensor * gate_w, const ggml_tensor * up_w,
                              const ggml_tensor * x, float * dst);
