// kv-cache.h - the per-layer K/V cache of one context: a linear cache where cell i holds position i.
//
// Layout (ggml style), per layer, in the layer's backend buffer:
//   k: [n_embd_k_gqa, n_ctx]                  keys, stored after RoPE
//   v: [n_ctx, n_embd_v_gqa] (v_trans)         values transposed, so kq*v reads a view directly
//      [n_embd_v_gqa, n_ctx] (flash attention)
// Types (K and V apart): f32, f16, q8_0, q4_0. A quantized cell row is quantized per head (head_dim a
// multiple of 32) by SET_ROWS on write; attention reads it in place. A quantized V needs flash attention
// (a transposed V cannot be stored in blocks). A quantized cache of a layer on a device whose backend cannot
// run every op that touches it (stores, attention, context shift) stays in host memory; those ops then run
// on the CPU (llm_kv_cache_init logs it).
//
//   llm_kv_cache kv;
//   if (!llm_kv_cache_init(kv, model, 4096, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, /*v_trans=*/false, gpu, &err)) ...
//   // in a graph: store this step's k/v, then view the first n_kv cells for attention
//   llm_kv_store(ctx, gf, kv, il, k_cur, v_cur, pos);   // pos: i32 [n_tokens] cells to write
//   ggml_tensor * k = llm_kv_view_k(ctx, kv, il, n_kv);   // [head_dim, n_kv, n_head_kv]
//   llm_kv_cache_free(kv);
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <string>
#include <vector>

struct llm_model;

struct llm_kv_cache {
    int       n_ctx = 0;
    int       n_past = 0;      // cells in use (positions 0 .. n_past-1)
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    bool      v_trans = true;
    int       n_embd_head = 0;
    int       n_head_kv = 0;
    std::vector<ggml_tensor *> k;  // per layer
    std::vector<ggml_tensor *> v;  // per layer
    std::vector<ggml_context *> ctxs;
    std::vector<ggml_backend_buffer_t> bufs;

    size_t size_bytes() const;    // the cache's buffers
    size_t size_bytes_k() const;  // the K tensors
    size_t size_bytes_v() const;  // the V tensors
};

// Why these types cannot make a cache for this model ("" when they can): an unknown type, a quantized V
// without flash attention, a head size that is not a multiple of the block.
std::string llm_kv_types_check(const llm_model & model, ggml_type type_k, ggml_type type_v, bool flash_attn);

// dev: the device backend of the layers whose buffer type is not host memory (nullptr: none); asked whether
// it runs the cache's ops (see above). Fails (false, err) on bad types (llm_kv_types_check) or out of memory.
bool llm_kv_cache_init(llm_kv_cache & kv, const llm_model & model, int n_ctx, ggml_type type_k, ggml_type type_v,
                       bool v_trans, ggml_backend_t dev, std::string * err);
void llm_kv_cache_free(llm_kv_cache & kv);
void llm_kv_cache_clear(llm_kv_cache & kv);  // zero the cells (no NaN garbage) and n_past = 0

// Write k_cur [n_embd_k_gqa, n_tokens] and v_cur [n_embd_v_gqa, n_tokens] into the cells named by the i32
// tensor cells [n_tokens] of layer il (SET_ROWS: the graph does not change with the cell numbers); the writes
// are expanded into gf (before the attention that reads them).
void llm_kv_store(ggml_context * ctx, ggml_cgraph * gf, const llm_kv_cache & kv, int il, ggml_tensor * k_cur,
                  ggml_tensor * v_cur, ggml_tensor * cells);
// [head_dim, n_kv, n_head_kv] views of the first n_kv cells (no copy)
ggml_tensor * llm_kv_view_k(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv);
// v_trans: [n_kv, head_dim, n_head_kv] (a of kq*v); otherwise [head_dim, n_kv, n_head_kv] (flash attention)
ggml_tensor * llm_kv_view_v(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv);

// Context shift: drop cells [p0, p1) and move cells [p1, n_past) down to p0, re-rotating the moved keys
// by -(p1 - p0) positions with RoPE. Runs one small graph through sched. Returns false on a bad range.
bool llm_kv_cache_remove(llm_kv_cache & kv, const llm_model & model, ggml_backend_sched_t sched, int p0, int p1,
                         std::string * err);
