// llm-impl.h - internals of the Llama model shared by the loader (model.cpp), the KV cache
// (kv-cache.cpp), the graph builder (graph.cpp) and the context (context.cpp).
//
//   llm_model:   hparams, vocab, weights (CPU weights zero-copy in the GGUF mapping, GPU weights uploaded)
//   llm_context: backends, scheduler, KV cache, logits
//   llm_graph:   one step's graph with its inputs/outputs (built per decode by llm_build_graph)
#pragma once

#include "gguf.h"
#include "kv-cache.h"
#include "llm.h"
#include "workers.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct llm_layer {
    ggml_tensor * attn_norm = nullptr;   // f32 [n_embd]
    ggml_tensor * wq = nullptr;          // [n_embd, n_embd]
    ggml_tensor * wk = nullptr;          // [n_embd, n_embd_k_gqa]
    ggml_tensor * wv = nullptr;          // [n_embd, n_embd_k_gqa]
    ggml_tensor * wo = nullptr;          // [n_embd, n_embd]
    ggml_tensor * ffn_norm = nullptr;    // f32 [n_embd]
    ggml_tensor * ffn_gate = nullptr;    // [n_embd, n_ff]
    ggml_tensor * ffn_up = nullptr;      // [n_embd, n_ff]
    ggml_tensor * ffn_down = nullptr;    // [n_ff, n_embd]
    ggml_tensor * rope_freqs = nullptr;  // f32 [n_rot/2] or nullptr (a copy on the layer's backend)
    ggml_backend_buffer_type_t buft = nullptr;  // where this layer's weights (and KV cache) live
};

// Split mode row: shard s of a layer holds KV heads [head_kv0, head_kv0 + n_head_kv) with their query heads, and FFN
// columns [ff0, ff0 + n_ff): wq/wk/wv and ffn_gate/ffn_up sliced by output rows, wo and ffn_down by input columns
// (whole blocks), the norms and rope_freqs copied; the device's graph computes the partial wo / ffn_down products of
// its slice and an all-reduce adds the shards' up.
struct llm_shard {
    int n_head = 0, n_head_kv = 0, n_ff = 0;
    int head_kv0 = 0, ff0 = 0;
    std::vector<llm_layer> layers;  // [n_gpu_layers]: slices in the device's buffer (the other layers: whole, CPU)
};

struct llm_model {
    llm_hparams hp;
    llm_vocab   vocab;
    std::string path;
    std::string name;       // general.name
    std::string type_name;  // dominant weight type ("q8_0")

    gguf_context * gguf = nullptr;
    ggml_context * ctx_meta = nullptr;  // one tensor per GGUF tensor; data points into the mapping
    std::vector<int> devices;                   // the CUDA devices holding layers (split mode layer: in layer order)
    bool sim_devices = false;                   // devices are simulated ones (ggml_backend_cpu_sim_init(d + 1))
    std::vector<ggml_context *> ctx_dev;        // per device: copies of the tensors that live in its buffer
    std::vector<ggml_backend_buffer_t> buf_dev; // per device: its weights
    ggml_context * ctx_host = nullptr;  // copies of the CPU tensors (use_mmap = false)
    ggml_backend_buffer_t buf_mmap = nullptr;  // CPU weights, zero copy over the GGUF data section
    ggml_backend_buffer_t buf_host = nullptr;  // CPU weights copied (use_mmap = false)
    ggml_context * ctx_repack = nullptr;         // CPU mat-mul weights stored for the decode (cpu/repack.h)
    ggml_backend_buffer_t buf_repack = nullptr;  // their CPU_REPACK buffer

    ggml_tensor * tok_embd = nullptr;     // [n_embd, n_vocab] (on the GPU only when everything is: tok_embd_on_gpu)
    ggml_tensor * output_norm = nullptr;  // f32 [n_embd]
    ggml_tensor * output = nullptr;       // [n_embd, n_vocab] (token_embd or its GPU copy when tied)
    std::vector<llm_layer> layers;  // split mode row: shard 0's slices of the offloaded ones
    std::vector<llm_shard> shards;  // split mode row: one per entry of devices (empty otherwise)

    int  n_gpu_layers = 0;  // layers actually on the GPU
    bool output_on_gpu = false;
    bool tok_embd_on_gpu = false;  // with the output, when the whole model and its KV cache fit (model.cpp)
    int  main_gpu = 0;
    bool verbose = false;
    uint64_t n_params = 0;
    uint64_t n_bytes = 0;
    std::vector<std::pair<std::string, size_t>> buffer_sizes;
    double t_load_ms = 0;
};

// Split mode row: whether shard s holds layer il as a slice (an offloaded layer). Otherwise shard 0 runs it whole
// from llm_model::layers (no split, or a layer past -ngl) and the other shards do not hold it.
inline bool llm_layer_sliced(const llm_model & m, int s, int il) {
    return !m.shards.empty() && il < (int) m.shards[s].layers.size();
}

// Split mode layer: the device (index into share) of each offloaded layer and, when n_gpu_layers > n_layer, of the
// output as one more entry: unit u of n goes to the first device whose cumulative share exceeds u / n (llama.cpp's
// -sm layer rule). share: non-negative, some positive.
std::vector<int> llm_layer_split(int n_layer, int n_gpu_layers, const std::vector<double> & share);

// Split mode row: n_units (KV heads, FFN blocks) over the devices of share: device d gets [first[d], first[d + 1]),
// first[d] = round(n_units * (the shares before d) / (all shares)). Returns the n + 1 boundaries.
std::vector<int> llm_row_split(int n_units, const std::vector<double> & share);

// Which tokens of a step get logits: all, the last one, or those listed in inp_out_ids.
enum llm_graph_out { LLM_OUT_ALL, LLM_OUT_LAST, LLM_OUT_IDS };

// One step's graph. ctx owns the tensor headers (memory of llm_context::graph_mem).
struct llm_graph {
    ggml_context * ctx = nullptr;
    ggml_cgraph *  gf = nullptr;
    ggml_tensor *  inp_tokens = nullptr;  // i32 [n_tokens]
    ggml_tensor *  inp_pos = nullptr;     // i32 [n_tokens]: positions (RoPE)
    ggml_tensor *  inp_cells = nullptr;   // i32 [n_tokens]: the KV cells the tokens are written to
    ggml_tensor *  inp_out_ids = nullptr; // i32 [n_out]: tokens whose logits are kept (LLM_OUT_IDS)
    ggml_tensor *  inp_seq = nullptr;     // i32 [n_tokens]: sequence ids
    ggml_tensor *  inp_kv_cells = nullptr; // i32 [3, n_kv]: each cell's position and sequence bits (llm_kv_fill_cells)
    ggml_tensor *  kq_mask = nullptr;     // f32/f16 [n_kv, n_tokens] (ggml_kq_mask of the three): 0 where cell j is
                                          // visible to token i, else -inf
    ggml_tensor *  logits = nullptr;      // f32 [n_vocab, n_out]
    ggml_tensor *  argmax = nullptr;      // i32 [1], argmax of the last logits row
    int n_tokens = 0;
    int n_kv = 0;  // KV cells attention reads (llm_kv_n_kv)
    int n_out = 0;
    llm_graph_out out = LLM_OUT_LAST;
    int n_seq = 1;  // sequences among the tokens (a hint for the attention kernels)
};

// Split mode row: what the graph of shard s >= 1 has of its own (shard 0 uses the context's cpu, sched, graph_mem and
// graph). Every shard builds the whole step's graph over its slices; the shards' graphs run at once, from a thread
// each (llm_context::workers), and meet at their all-reduces.
struct llm_shard_ctx {
    ggml_backend_t cpu = nullptr;          // a CPU backend of its own (the token embedding's get_rows)
    ggml_backend_sched_t sched = nullptr;  // {the shard's device, cpu}
    std::vector<uint8_t> graph_mem;
    llm_graph graph;
};

struct llm_context {
    llm_model * model = nullptr;
    llm_context_params params;
    int n_ctx = 0;
    int n_batch = 0;
    int n_threads = 0;

    ggml_backend_t cpu = nullptr;
    std::vector<ggml_backend_t> gpus;      // one device backend per entry of llm_model::devices
    std::vector<ggml_backend_t> backends;  // priority order (the devices in layer order), CPU last
    ggml_backend_sched_t sched = nullptr;
    size_t graph_size = 0;                 // max nodes of one step's graph
    std::vector<uint8_t> graph_mem;        // tensor headers + graph of the current step
    std::vector<int32_t> kv_cells_buf;     // the current step's inp_kv_cells
    // LLM_UBATCH_SYNC=1: wait for each ubatch's graph (the host then builds the next one with the GPU idle)
    bool ubatch_sync = false;
    // The last step's graph, still allocated by sched: a step with the same n_tokens and n_kv (decode, up to
    // LLM_KV_PAD steps in a row) sets its inputs and computes it again instead of building and planning a new
    // one. Dropped by anything else that uses graph_mem or sched. LLM_NO_GRAPH_REUSE=1 turns reuse off.
    llm_graph graph;
    bool      graph_reuse = true;

    llm_kv_cache kv;

    // split mode row (llm_model::shards): shards 1.. (entry s - 1), the communicator of their all-reduces and the
    // threads that run shards 1.. while the caller runs shard 0
    std::vector<llm_shard_ctx> shards;
    ggml_comm * comm = nullptr;
    std::unique_ptr<llm_workers> workers;

    std::vector<float> logits;  // [n_vocab, n_logits_rows]
    int     n_logits_rows = 0;
    std::vector<int32_t> out_row;  // [batch size]: logits row of each token of the last batch, -1: none
    // scratch of a decode (kept to avoid allocations per token)
    llm_batch single;                      // llm_decode's tokens as a batch of sequence 0
    std::vector<uint8_t> batch_out;        // [batch size] which tokens get logits
    std::vector<int32_t> ubatch_cells;     // [n_batch] cells of the current graph's tokens
    std::vector<int32_t> ubatch_out_ids;   // [n_batch] its tokens that get logits
    int32_t argmax = -1;        // argmax of the last row, computed in the graph
    // A decode of one graph leaves its logits rows and argmax in the graph's outputs (on the GPU, a copy to the host
    // per token: 128 KiB for a 32000-token vocabulary, 501 KiB for 128256); they are copied into `logits` /
    // `argmax` on first access (llm_get_logits*, llm_argmax_last) or before the graph is dropped.
    bool logits_pending = false, argmax_pending = false;
    // The argmax of a one-graph decode on a device is read into page-locked memory behind the graph (queue_argmax in
    // context.cpp), so the wait at the end of the decode covers the read; LLM_ARGMAX_SYNC=1: read after it (A/B)
    ggml_backend_buffer_t argmax_host = nullptr;
    bool argmax_queued = false;
    llm_perf perf;
};


// Attention reads the used cells rounded up to LLM_KV_PAD (at most n_ctx), so decode graphs keep their shapes
// for LLM_KV_PAD steps; the padding cells are masked out.
constexpr int LLM_KV_PAD = 256;

// graph.cpp: build the graph for n_tokens tokens of n_seq sequences attending to the first n_kv cells, with
// logits of n_out tokens chosen by out. Free with ggml_free(g.ctx). shard: split mode row's shard (its slices, KV
// heads and graph memory; only shard 0's graph computes the logits), else 0.
llm_graph llm_build_graph(llm_context & lctx, int n_tokens, int n_kv, int n_out, llm_graph_out out, int n_seq = 1,
                          int shard = 0);
