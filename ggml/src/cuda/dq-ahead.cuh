// dq-ahead.cuh - quantized weights dequantized ahead of their cuBLAS GEMMs (prompts).
//
// A prompt's mat-mul over more columns than the tensor-core GEMM takes (mulmat.cu: mmq_of) dequantizes its weight
// to f16 and runs cuBLAS. Inline, the dequantization (memory bound: the quantized bytes read, twice the weight's
// element count written) sits between compute-bound GEMMs that leave the memory system idle. Ahead, each such
// weight is dequantized on a second stream into one of two slots while the GEMM before it runs:
//   slot s = k % 2 holds the k-th such mat-mul's weight; its dequantization waits until the GEMM of mat-mul k - 2
//   (the slot's last reader) is done (event free[s]) and records ready[s]; the main stream waits for ready[s]
//   before that mat-mul's GEMM and records free[s] after it, then issues mat-mul k + 2.
// Only graphs run eagerly take part (never one being captured); a weight whose f16 copy exceeds
// GGML_CUDA_DQ_AHEAD_MAX_BYTES (a 128k-vocabulary output projection, say) is dequantized inline as before, and so
// is everything when the slots cannot be allocated. GGML_CUDA_NO_DQ_AHEAD=1 turns it off (A/B).
#pragma once
#include "common.cuh"

#include <cuda_fp16.h>
#include <vector>

#define GGML_CUDA_DQ_AHEAD_MAX_BYTES (size_t(256) << 20)

struct ggml_cuda_dq_ahead {
    cudaStream_t stream = nullptr;
    cudaEvent_t start = nullptr;              // recorded on the main stream when a graph begins
    cudaEvent_t ready[2] = {}, free_[2] = {}; // per slot: dequantized; its last GEMM done
    cudaEvent_t done = nullptr;               // the side stream's last work of a graph
    half * buf[2] = {};
    size_t cap = 0;                        // bytes per slot
    bool broken = false;                   // a slot could not be allocated: inline from now on
    std::vector<const ggml_tensor *> list; // this graph's mat-muls dequantized ahead, in node order
    size_t next = 0;                       // index in list of the next one to run
};

// Plan graph gf (fused: the fusion plan, ggml-cuda.cu) and issue the first two dequantizations; a no-op while
// ctx.stream is being captured or GGML_CUDA_NO_DQ_AHEAD is set.
void ggml_cuda_dq_ahead_begin(ggml_cuda_context & ctx, const ggml_cgraph * gf, const std::vector<uint8_t> & fused);
// The f16 copy [K, M, A2, A3] (dense) of MUL_MAT node mm's weight if it was made ahead, with ctx.stream waiting for
// it; nullptr: dequantize inline. After launching the GEMM that reads it, call ggml_cuda_dq_ahead_release.
const half * ggml_cuda_dq_ahead_take(ggml_cuda_context & ctx, const ggml_tensor * mm);
void ggml_cuda_dq_ahead_release(ggml_cuda_context & ctx);
// The end of the graph: ctx.stream waits for whatever the side stream still does.
void ggml_cuda_dq_ahead_end(ggml_cuda_context & ctx);
void ggml_cuda_dq_ahead_free(ggml_cuda_context & ctx);
