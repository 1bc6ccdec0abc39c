// fattn.cuh - FLASH_ATTN_EXT: q f32 [D, n_tokens, n_head], k/v f32/f16 (both the same type) or q8_0/q4_0 (dense
// block rows; the other of K/V q8_0, q4_0, f16 or f32) [D, n_kv, n_head_kv] (any row strides: views of the KV cache
// are read in place), optional f32/f16 mask [n_kv, >= n_tokens], GQA (n_head % n_head_kv == 0) -> f32 [D, n_head,
// n_tokens]. params: f32 scale, i32 causal_n_past. D <= 256. Decode splits the KV range over blocks
// (flash-decoding) and merges the partials; up to 8 queries per kv head with D in {32, 64, 128, 256} take the
// row-per-warp decode kernel, more queries with f16 K/V the tensor-core kernel of fattn-mma.cuh (D 64, 80, 96,
// 128), else cuBLAS (S = K^T Q, softmax to f16, O = V P; GGML_CUDA_FATTN_GEMM=1: always, for comparisons);
// GGML_CUDA_FATTN_NO_VEC=1: always the tile kernel (f32 K/V always take it). A q8_0/q4_0 K or V: up to 8 queries
// per kv head with D 64/96/128 read it in place (fattn-vecq.cuh), and so does a batch of many sequences' decode tokens
// on a shared cache (one block per token, up to 8 queries each); otherwise the views are converted to an f16 copy
// (f32 beside an f32 K/V) in pool scratch and the paths above run on it.
#pragma once
#include "common.cuh"

#define FATTN_MAX_D 256

GGML_CUDA_OP(flash_attn_ext);
// Before a graph runs: which of its FLASH_ATTN_EXT nodes read K and V caches that the graph writes (SET_ROWS) at the
// cells of one input tensor, into ctx.fa_wcells (the decode attention then requests its first tiles early).
void ggml_cuda_fattn_plan_early(ggml_cuda_context & ctx, const ggml_cgraph * gf);
// The same, and where the decode kernel runs (contiguous dst) also its output quantized for the repacked q8_0
// mat-vec that reads it as [D * n_head, n_tokens] rows (quantize.cuh's split layout, pool memory); nullptr when
// not (the output is then only written as f32).
void * ggml_cuda_op_flash_attn_ext_q8(ggml_cuda_context & ctx, ggml_tensor * dst);
// The same, and where a decode kernel runs (contiguous dst) also its output in the small-N wgmma GEMM's f16 order
// (mmw-order.cuh) of rows (dst's reshape to [D * n_head, n_tokens], the batched wo GEMM's activation), in pool
// memory, returned; nullptr when not (only the f32 output then).
half * ggml_cuda_op_flash_attn_ext_w16(ggml_cuda_context & ctx, ggml_tensor * dst, const ggml_tensor * rows);
