// kv-cache.h - the per-layer K/V cache of one context: one pool of n_ctx cells shared by every sequence.
//
// A cell holds one position and the set of sequences that see it (a bit per sequence id, at most 64), so a
// prefix shared by sequences is stored once. Tokens of a batch go to free cells (llm_kv_place): each sequence
// prefers its home region (n_ctx / n_seq_max cells), so a sequence's cells stay mostly contiguous and the
// attention of one step reads few cells of others. Attention reads the first n_kv cells (llm_kv_n_kv) and the
// mask (ggml_kq_mask of llm_kv_fill_cells) lets token i see a cell iff the cell belongs to i's sequence at a position
// <= i's.
//
// Layout (ggml style), per layer, in the layer's backend buffer:
//   k: [n_embd_k_gqa, n_ctx]                  keys, stored after RoPE
//   v: [n_ctx, n_embd_v_gqa] (v_trans)         values transposed, so kq*v reads a view directly
//      [n_embd_v_gqa, n_ctx] (flash attention)
// Types (K and V apart): f32, f16, q8_0, q4_0. A quantized cell row is quantized per head (head_dim a
// multiple of 32) by SET_ROWS on write; attention reads it in place. A quantized V needs flash attention
// (a transposed V cannot be stored in blocks). A quantized cache of a layer on a device whose backend cannot
// run every op that touches it (stores, attention, context shift) stays in host memory; those ops then run
// on the CPU (llm_kv_cache_init logs it). CUDA runs them all for q8_0/q4_0 with flash attention (any head size
// that is a multiple of 32); without it, a q4_0 K's attention mat-mul on the cache view is not a CUDA op.
//
//   llm_kv_cache kv;
//   if (!llm_kv_cache_init(kv, model, 4096, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, /*v_trans=*/false, {gpu}, &err)) ...
//   llm_kv_place(kv, n, seq, pos, cells, &err);          // host: pick the cells of a batch's tokens
//   // in a graph: store this step's k/v, then view the first n_kv cells for attention
//   llm_kv_store(ctx, gf, kv, il, k_cur, v_cur, inp_cells);  // inp_cells: i32 [n_tokens] cells to write
//   ggml_tensor * k = llm_kv_view_k(ctx, kv, il, n_kv);   // [head_dim, n_kv, n_head_kv]
//   llm_kv_cache_free(kv);
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <functional>
#include <string>
#include <vector>

struct llm_model;

struct llm_kv_cell {
    int32_t  pos = -1;
    uint64_t seq = 0;  // bit s: sequence s sees this cell; 0: free
};

struct llm_kv_cache {
    int       n_ctx = 0;
    int       n_seq_max = 1;
    std::vector<llm_kv_cell> cells;   // [n_ctx]
    int       used = 0;               // cells with a sequence
    int       used_end = 0;           // 1 + the highest used cell
    std::vector<int32_t> seq_pos_max; // [n_seq_max] highest position of each sequence, -1: none
    std::vector<int32_t> seq_next;    // [n_seq_max] where the next free-cell search of each sequence starts
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    bool      v_trans = true;
    int       n_embd_head = 0;
    int       n_layer = 0;
    int       n_shards = 1;     // split mode row: one set of per-layer tensors per device (its KV heads)
    std::vector<ggml_tensor *> k;  // [shard * n_layer + layer] (nullptr: a layer that shard does not hold)
    std::vector<ggml_tensor *> v;  // [shard * n_layer + layer]
    std::vector<ggml_context *> ctxs;
    std::vector<ggml_backend_buffer_t> bufs;

    size_t size_bytes() const;    // the cache's buffers
    size_t size_bytes_k() const;  // the K tensors
    size_t size_bytes_v() const;  // the V tensors
};

// Why these types cannot make a cache for this model ("" when they can): an unknown type, a quantized V
// without flash attention, a head size that is not a multiple of the block.
std::string llm_kv_types_check(const llm_model & model, ggml_type type_k, ggml_type type_v, bool flash_attn);

// devs: the device backends of the layers whose buffer type is not host memory (empty: none); the one whose
// buffer type a layer has is asked whether it runs the cache's ops (see above). Fails (false, err) on bad types
// (llm_kv_types_check) or out of memory.
bool llm_kv_cache_init(llm_kv_cache & kv, const llm_model & model, int n_ctx, int n_seq_max, ggml_type type_k,
                       ggml_type type_v, bool v_trans, const std::vector<ggml_backend_t> & devs, std::string * err);
void llm_kv_cache_free(llm_kv_cache & kv);
void llm_kv_cache_clear(llm_kv_cache & kv);  // zero the tensors (no NaN garbage) and free every cell

// Cells for n tokens (sequence seq[i] at position pos[i]) written into cells[i], marked used. Fails (false,
// err, nothing marked) when fewer than n cells are free.
bool llm_kv_place(llm_kv_cache & kv, int n, const int32_t * seq, const int32_t * pos, int32_t * cells,
                  std::string * err);
// Cells attention reads: used_end rounded up to LLM_KV_PAD (at most n_ctx), so decode steps keep their
// graph's shapes for LLM_KV_PAD steps.
int  llm_kv_n_kv(const llm_kv_cache & kv);
// out [n_kv][3]: each cell's position, its sequence bits 0..31 and 32..63 (none for free cells and those at or past
// used_end): the cells input of ggml_kq_mask.
void llm_kv_fill_cells(const llm_kv_cache & kv, int32_t * out, int n_kv);
// Sequence edits (p1 < 0: to the end). rm with seq < 0 frees the range of every sequence.
void llm_kv_seq_rm(llm_kv_cache & kv, int seq, int p0, int p1);
void llm_kv_seq_cp(llm_kv_cache & kv, int src, int dst, int p0, int p1);
void llm_kv_seq_keep(llm_kv_cache & kv, int seq);
void llm_kv_free_cells(llm_kv_cache & kv, const int32_t * cells, int n);  // undo llm_kv_place (a failed step)
// The edits above keep used, used_end and seq_pos_max up to date as they go (kv-cells.cpp says how).
void llm_kv_recount(llm_kv_cache & kv); // all three again from all n_ctx cells (the reference the tests check)
void llm_kv_recount_pos_max(llm_kv_cache & kv, uint64_t seqs); // seq_pos_max of the sequences (bits) only

// Write k_cur [n_embd_k_gqa, n_tokens] and v_cur [n_embd_v_gqa, n_tokens] into the cells named by the i32
// tensor cells [n_tokens] of layer il (SET_ROWS: the graph does not change with the cell numbers); the writes
// are expanded into gf (before the attention that reads them).
// shard: split mode row's device (its KV heads), else 0.
void llm_kv_store(ggml_context * ctx, ggml_cgraph * gf, const llm_kv_cache & kv, int il, ggml_tensor * k_cur,
                  ggml_tensor * v_cur, ggml_tensor * cells, int shard = 0);
// [head_dim, n_kv, n_head_kv] views of the first n_kv cells (no copy)
ggml_tensor * llm_kv_view_k(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv, int shard = 0);
// v_trans: [n_kv, head_dim, n_head_kv] (a of kq*v); otherwise [head_dim, n_kv, n_head_kv] (flash attention)
ggml_tensor * llm_kv_view_v(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv, int shard = 0);

// Context shift: positions [p0, p1) of seq move by delta; their keys are re-rotated by delta with RoPE in
// place (GET_ROWS, ROPE, SET_ROWS of the cells: one small graph per shard, through scheds[shard]). A cell another
// sequence also sees moves for both. Returns false (err) on a bad range or a failed graph. before_shift, if set, runs
// once cells are about to move (not when none is in the range or delta is 0).
bool llm_kv_seq_add(llm_kv_cache & kv, const llm_model & model, const std::vector<ggml_backend_sched_t> & scheds,
                    int seq, int p0, int p1, int delta, std::string * err,
                    const std::function<void()> & before_shift = {});
