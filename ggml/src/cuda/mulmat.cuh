// mulmat.cuh - MUL_MAT dispatch: a [K, M, A2, A3] (f32/f16/q8_0/q4_0 ... q6_K), b f32 [K, N, B2, B3] -> f32
// [M, N, B2, B3].
//   N <= 8:  quantized -> mmvq (b quantized on the GPU, q8s layout; q8_0 in ggml's layout: q8_1 blocks);
//            f16/f32 -> mmv
//   N > 8:   quantized a, N up to the crossover of mulmat.cu: the tensor-core GEMM of mmq.cuh (b in f16); beyond,
//            and f16/f32 a: cuBLAS, a quantized a dequantized to f16 (ahead on a second stream, dq-ahead.cuh, or
//            into scratch given back after the GEMM), b converted to f16, f16 x f16 -> f32 (f32 compute); f32 x f32
//            as f32. Batches (GQA broadcast included) via strided-batched calls.
// Inputs with non-dense rows (transposed views) are first copied to dense scratch.
#pragma once
#include "common.cuh"

#define MUL_MAT_VEC_MAX_N 8

// the most columns a quantized-weight mat-mul runs as a mat-vec (ctx.mmv_max_n where the f16 GEMM takes the rest)
int64_t ggml_cuda_mmv_max_n(const ggml_cuda_context & ctx);

GGML_CUDA_OP(mul_mat);

// Whether MUL_MAT node mm runs as its quantized weight dequantized to f16 + cuBLAS (a prompt's mat-mul wider than the
// tensor-core GEMM's limit; dq-ahead.cuh may then dequantize it ahead), and that dequantization: a in the kernel
// layout (repacked q8_0, or contiguous of a type of ggml_cuda_qt) into dst, dense [K, M, A2, A3] f16.
bool ggml_cuda_mul_mat_dequant_f16(const ggml_cuda_context & ctx, const ggml_tensor * mm);
void ggml_cuda_weight_to_f16(ggml_cuda_context & ctx, const ggml_tensor * a, half * dst);

// The activation caches (ctx.qcache: q8s, ctx.hcache: f16, ctx.wcache: wgmma order) must forget b once a node writes
// over it: call after each node.
void ggml_cuda_qcache_written(ggml_cuda_context & ctx, const ggml_tensor * t);
// Fill the cache with q (ggml_cuda_q8s_size(nrows(b), ne0(b)) bytes of pool memory holding b quantized by a
// fused kernel, bit-identical to ggml_cuda_quantize_q8s): the next q8_0 mat-vecs reading b skip quantizing.
// nsq: b = RMS_NORM(x) * w, and q holds x * w without the norm's scale (ggml_cuda_qt_epi in mmvq.cuh: nsq [ne0/32]
// partial sums of x^2, eps the norm's); only mat-vecs passing ggml_cuda_mul_mat_reads_q8s_norm may then read b.
void ggml_cuda_qcache_set(ggml_cuda_context & ctx, const ggml_tensor * b, void * q, const float * nsq = nullptr,
                          float eps = 0.0f);

// Whether the MUL_MAT node mm runs a mat-vec that reads its activation through ctx.qcache (the q8s layout):
// the fused norm / attention kernels may then write that layout for it.
bool ggml_cuda_mul_mat_reads_q8s(const ggml_cuda_context & ctx, const ggml_tensor * mm);
// ... through the kernels of mmvq-t.cuh with one activation column: they also apply a deferred norm
bool ggml_cuda_mul_mat_reads_q8s_norm(const ggml_cuda_context & ctx, const ggml_tensor * mm);
// Whether the MUL_MAT node mm runs the small-N wgmma GEMM (mmq-w.cuh), which reads its activation in its own f16
// order through ctx.wcache: the fused norm / SwiGLU / attention kernels may then write that order for it
// (ggml_cuda_wcache_set with their result, which mm reads as src1, two-dimensional).
bool ggml_cuda_mul_mat_reads_mmw(const ggml_cuda_context & ctx, const ggml_tensor * mm);
void ggml_cuda_wcache_set(ggml_cuda_context & ctx, const ggml_tensor * b, half * xw);

// ---- fused decode mat-vecs (plan_fusions / run_fused in ggml-cuda.cu) ----------------------------
// mm[0..n-1], n 2..MMV_GROUP_MAX: MUL_MAT nodes with the same src1 (pointer-equal: one f32 column [K]),
// 2-D weights that are all repacked q8_0, all of one other quantized type in the kernel layout (q8repack.cuh),
// or all f16 with 16-byte aligned dense rows, the same K, f32
// contiguous dsts; and K is one where the separate launches would use the kernel whose row loop the fused
// kernel shares (q8_0: v6, mmvq.cuh; f16: v2, K >= 1024). _ok: whether one launch may compute them all.
bool ggml_cuda_mul_mat_group_ok(const ggml_cuda_context & ctx, const ggml_tensor * const * mm, int n);
void ggml_cuda_mul_mat_group(ggml_cuda_context & ctx, ggml_tensor * const * mm, int n);
// mm[0..n-1], n 2..3: MUL_MAT nodes with the same src1 of 2..64 columns (one batch) whose separate launches would
// each run the wgmma GEMM (mmq-w.cuh), 2-D weights of one type and K in the kernel layout, f32 contiguous dsts (q, k,
// v or gate, up of a batched decode step): one launch of ggml_cuda_mmw_group (fusion codes 15 / 16). Needs
// ctx.mmw_tick, and at most ctx.mmw_group_n columns (64; GGML_CUDA_MMW_GROUP=n sets it, 0 turns it off).
bool ggml_cuda_mul_mat_group_wg_ok(const ggml_cuda_context & ctx, const ggml_tensor * const * mm, int n);
void ggml_cuda_mul_mat_group_wg(ggml_cuda_context & ctx, ggml_tensor * const * mm, int n);
// The q/k/v group of a decode step and the attention inputs after it (fusion codes 13 / 14): n[0..2] MUL_MAT q, k, v
// (passing _group_ok as a group through the kernels of mmvq-t.cuh), n[3] q's view as heads, n[4..span) the nodes of
// ggml_cuda_op_rope_qkv (rope.cuh: ROPE(q), k's view, ROPE(k), RESHAPE, SET_ROWS(k), [view,] SET_ROWS(v)), span 10
// or 11, GGML_ROPE_TYPE_NORMAL, one token: one launch writes rope(q) and the cache rows of rotated k and of v
// (ggml_cuda_qt_rope in mmvq.cuh). q, k, v and the rope(k) result are NOT written (the caller makes sure nothing
// else reads them).
bool ggml_cuda_mul_mat_group_rope_ok(const ggml_cuda_context & ctx, ggml_tensor * const * n, int span);
void ggml_cuda_mul_mat_group_rope(ggml_cuda_context & ctx, ggml_tensor * const * n, int span);
// glu = SWIGLU(gate, up) (silu(gate) * up), gate/up MUL_MAT nodes that pass _group_ok as a pair with the
// same M, glu f32 contiguous: one launch writes glu; gate's and up's dsts are NOT written (the caller makes
// sure nothing else reads them). glu may lie over gate's or up's memory.
bool ggml_cuda_mul_mat_swiglu_ok(const ggml_cuda_context & ctx, const ggml_tensor * gate, const ggml_tensor * up,
                                 const ggml_tensor * glu);
void ggml_cuda_mul_mat_swiglu(ggml_cuda_context & ctx, ggml_tensor * gate, ggml_tensor * up, ggml_tensor * glu);

// mm (one column, weights through mmvq-t.cuh in the kernel layout, M % 32 == 0), add = mm + res, norm =
// RMS_NORM(add), mul = norm * w (code 12): one mat-vec launch writes add and the q8s of add * w with the norm's
// scale deferred (returned: pool memory; *nsq its partial sums of add^2, see ggml_cuda_qcache_set). mm, norm and
// mul are NOT written (the caller makes sure only the ADD reads mm and only norm-capable mat-vecs read mul).
bool ggml_cuda_mul_mat_add_norm_ok(const ggml_cuda_context & ctx, const ggml_tensor * mm, const ggml_tensor * add,
                                   const ggml_tensor * norm, const ggml_tensor * mul);
void * ggml_cuda_mul_mat_add_norm(ggml_cuda_context & ctx, ggml_tensor * mm, ggml_tensor * add, ggml_tensor * norm,
                                  ggml_tensor * mul, const float ** nsq);
