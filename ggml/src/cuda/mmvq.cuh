// mmvq.cuh - decode mat-vecs of quantized weights: dst [M, N, B2, B3] = a^T b, a quantized [K, M, A2, A3],
// b already quantized (quantize.cuh), N <= MMVQ_MAX_COLS. Integer dots with __dp4a.
//   q8_0: the kernels below (mmvq.cu).
//   q4_0 q4_1 q5_0 q5_1 q2_K q3_K q4_K q5_K q6_K: one kernel template over the type (mmvq-t.cuh, per-type
//   traits in qtypes.cuh), instantiated per type in mmvq-<type>.cu and reached through ggml_cuda_qt().
#pragma once
#include "common.cuh"
#include "rope.cuh"

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

// ---- the other quantized types (mmvq-t.cuh) ---------------------------------------------------------------------
// Epilogues of the one-column mat-vecs below, which let a decode step skip the norm launches (fusion code 12 in
// ggml-cuda.cu). Any member may be null.
//   nsq_in: the activation's q8s holds x * w of an RMS_NORM(x) * w quantized without the norm's scale (the mat-vec
//           before wrote it with q8 / nsq_out below): nsq_in [K/32] are partial sums of x^2, and every dot is
//           multiplied by rsqrt(sum(nsq_in) / K + eps_in). Scaling after the integer dot equals scaling before the
//           rounding: x * s * w and x * w round to the same int8 values with scales s times apart.
//   res:    dst[r] = a_r . b + res[r] (the residual ADD after wo / ffn_down; res may be dst itself).
//   q8:     dst (times qw[r] when qw) also quantized to the q8s layout of one row of M (M % 32 == 0): each group of
//           32 rows by the block that computes them (one block per group), nsq_out [M/32]: the groups' sums of dst^2.
struct ggml_cuda_qt_epi {
    const float * nsq_in = nullptr;
    float eps_in = 0.0f;
    const float * res = nullptr;
    const float * qw = nullptr;
    void * q8 = nullptr;
    float * nsq_out = nullptr;
};

// The epilogue of a q/k/v group of a decode step that takes the rope + KV stores after it (fusion codes 13 / 14 in
// ggml-cuda.cu): rows 2i, 2i + 1 of q and k are a pair rotated as GGML_ROPE_TYPE_NORMAL (head size D, pair i % (D/2)
// at rp.pos[0]); rotated q goes to q (f32, contiguous), rotated k and plain v to their cache rows at cell[0] (row r of
// k at k + cell * k_nb1 + r * k_nb0, f16 or f32; a cell outside [0, ncell) is skipped, as SET_ROWS does). The
// group's own dsts are not written. Needs an even number of rows per warp.
// A q8_0 / q4_0 cache (k_blk / v_blk: its type, else 0): the rows go to scr (k: [0, Mk), v: [Mk, Mk + Mv)) and the
// last of the blocks computing a 32-row group (cnt, zero between launches: k's groups, then v's) quantizes it into
// block r / 32 of the cell's row (as SET_ROWS: ggml's reference quantizer). Mk, Mv multiples of 32.
struct ggml_cuda_qt_rope {
    ggml_cuda_rope_params rp;
    int D;
    float * q;
    const int32_t * cell;
    int64_t ncell;
    char *k, *v;
    int64_t k_nb0, k_nb1, v_nb0, v_nb1;
    int k_f16, v_f16;
    int k_blk, v_blk; // ggml_type of a block cache, 0: f16 / f32
    float * scr;
    int * cnt;
    int64_t Mk;
};

// Weights in the kernel layout (q8repack.cuh: ggml_cuda_kernel_layout) unless the function says otherwise;
// activations in the q8s split layout (quantize.cuh) with their block sums. epi (nullptr: none) needs N = 1, no
// batches and a contiguous dst; group and swiglu take only its nsq_in.
struct ggml_cuda_qt_fns {
    ggml_type type;
    int qk; // values per block
    // dst = a^T b for N = b->ne[1] <= MMVQ_MAX_COLS; a's data in the kernel layout at w (a->data, or a repacked
    // copy of it: then early = false, as the weights were written by the kernel before)
    void (*mmvq)(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early, const void * bq,
                 const ggml_tensor * b, ggml_tensor * dst, const ggml_cuda_qt_epi * epi);
    // as ggml_cuda_mmvq_q8r_group / _swiglu, for weights of this type (all of it); group: rope (nullable) the
    // rope + KV-store epilogue of a q/k/v group (n = 3)
    void (*group)(ggml_cuda_context & ctx, const ggml_tensor * const * dsts, int n, const void * bq,
                  const ggml_cuda_qt_epi * epi, const ggml_cuda_qt_rope * rope);
    void (*swiglu)(ggml_cuda_context & ctx, const ggml_tensor * gate_w, const ggml_tensor * up_w, const void * bq,
                   float * dst, const ggml_cuda_qt_epi * epi);
    // t (contiguous, either layout) -> dense f16 [ne0, nrows] on ctx.stream (the prompt path)
    void (*to_f16)(ggml_cuda_context & ctx, const ggml_tensor * t, half * dst);
    // GET_ROWS with src0 of this type (contiguous, either layout)
    void (*get_rows)(ggml_cuda_context & ctx, ggml_tensor * dst);
};
// nullptr for types without (f32, f16, q8_0, ...)
const ggml_cuda_qt_fns * ggml_cuda_qt(ggml_type type);
// a q/k/v group (n = 3, rows per warp 2) with q and k of type qk and v of type v != qk (mmvq-mix.cu): the K-quant
// mixes' pairs, else nullptr
using ggml_cuda_qt_group_fn = decltype(ggml_cuda_qt_fns::group);
ggml_cuda_qt_group_fn ggml_cuda_qt_group_mixed(ggml_type qk, ggml_type v);
// repacked q8_0 through the kernels of mmvq-t.cuh (unless GGML_CUDA_Q8_V6): their function table, else nullptr
const ggml_cuda_qt_fns * ggml_cuda_qt_q8r(const ggml_cuda_context & ctx, const ggml_tensor * a);
