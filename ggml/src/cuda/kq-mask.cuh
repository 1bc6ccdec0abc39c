// kq-mask.cuh - KQ_MASK (ggml_kq_mask): the attention mask of a batch built on the GPU from its KV cells
// (i32 [3, n_kv]: position, sequence bits 0..31, 32..63) and its tokens' sequence ids and positions (i32 [n_tokens]):
// f16/f32 [n_kv, n_tokens], 0 where token i sees cell j, -inf elsewhere.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(kq_mask);
