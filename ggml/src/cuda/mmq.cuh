// mmq.cuh - the int8 tensor-core GEMM of quantized weights (mmq-t.cuh): dst [M, N, B2, B3] = a^T b for N above the
// mat-vec range, a quantized [K, M, A2, A3] in the kernel layout (q8repack.cuh), b already quantized to the q8s
// split layout (quantize.cuh). One instance file per type (mmq-<type>.cu).
//   if (const ggml_cuda_mmq_fns * f = ggml_cuda_mmq(a->type)) f->s8(ctx, a, a->data, true, bq, b, dst);
#pragma once
#include "common.cuh"
#include "mmw-order.cuh"

// w: a's data in the kernel layout (a->data, or a repacked copy: then early = false, as the kernel before wrote it)
typedef void (*ggml_cuda_mmq_fn)(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early,
                                 const void * bq, const ggml_tensor * b, ggml_tensor * dst);
// the same GEMM on f16 tensor cores (mmq-h.cuh): b in f16, dense [K, N, B2, B3] (mulmat.cu's cached copy)
typedef void (*ggml_cuda_mmqh_fn)(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early,
                                  const ggml_tensor * bh, ggml_tensor * dst);
struct ggml_cuda_mmq_fns {
    ggml_cuda_mmq_fn s8;
    ggml_cuda_mmqh_fn f16;
    ggml_cuda_mmqh_fn stream; // the same for N <= 64 (mmq-s.cuh): weights streamed into the MMA fragments
};
// nullptr for types without (f32, f16, ...); q8_0: the repacked layout
const ggml_cuda_mmq_fns * ggml_cuda_mmq(ggml_type type);

// the small-N GEMM on wgmma (mmq-w.cuh, sm_90a), N <= 64: b given as ggml_cuda_mmw_order wrote it; nullptr for types
// without. Only where ggml_cuda_mmw_ok(device): a compute capability 9.0 device running the sm_90a build of the
// instance files.
ggml_cuda_mmqh_fn ggml_cuda_mmw(ggml_type type);
// the same for n = 2 or 3 two-dimensional weights a[m] of one type and K, in the kernel layout, times one activation
// bw (one batch): dst[m] = a[m]^T b in one launch (q, k, v; gate, up). Needs ctx.mmw_tick.
typedef void (*ggml_cuda_mmw_group_fn)(ggml_cuda_context & ctx, const ggml_tensor * const * a, int n,
                                       const ggml_tensor * bw, ggml_tensor * const * dst);
ggml_cuda_mmw_group_fn ggml_cuda_mmw_group(ggml_type type);
bool ggml_cuda_mmw_ok(int device);
// b (f32 [K, N, B2, B3], any strides, N <= 64) for the wgmma GEMM: f16 [mmw_kpad(K), mmw_nt(N), B2, B3] at dst, in the
// order its blocks copy into shared memory (mmw-order.cuh), zero past K and N
void ggml_cuda_mmw_order(ggml_cuda_context & ctx, const ggml_tensor * b, half * dst);
