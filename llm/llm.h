// llm.h - the Llama 2 / Llama 3 model API: load a GGUF, make a context (KV cache + compute
// buffers on the chosen backends), decode batches of tokens, read logits.
//
//   std::string err;
//   llm_model_params mp;  mp.n_gpu_layers = 99;
//   llm_model * model = llm_model_load("model.gguf", mp, &err);
//   if (!model) { fprintf(stderr, "error: %s\n", err.c_str()); return 1; }
//   llm_context_params cp;  cp.n_ctx = 4096;
//   llm_context * ctx = llm_context_new(model, cp, &err);
//   std::vector<int32_t> toks = llm_tokenize(llm_model_get_vocab(model), "Hello", true, false);
//   if (!llm_decode(ctx, toks.data(), (int) toks.size(), &err)) ...   // appends to the KV cache
//   const float * logits = llm_get_logits(ctx);                        // [n_vocab] of the last token
//   ...
//   llm_context_free(ctx); llm_model_free(model);
#pragma once

#include "ggml.h"
#include "ggml-backend.h"
#include "vocab.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

struct llm_hparams {
    int32_t n_vocab = 0;
    int32_t n_ctx_train = 0;
    int32_t n_embd = 0;
    int32_t n_layer = 0;
    int32_t n_ff = 0;
    int32_t n_head = 0;
    int32_t n_head_kv = 0;
    int32_t n_rot = 0;        // rope dimension count (head_dim unless the file says otherwise)
    int32_t n_embd_head = 0;  // n_embd / n_head
    float   rms_eps = 1e-5f;
    float   rope_freq_base = 10000.0f;
    float   rope_freq_scale = 1.0f;  // 1 / rope.scaling.factor for linear scaling
    bool    tied_output = false;     // output.weight absent: token_embd is reused
    int32_t n_embd_k_gqa() const { return n_embd_head * n_head_kv; }
};

struct llm_model_params {
    int  n_gpu_layers = 0;      // first N layers on the GPU; > n_layer also puts the output there
    int  main_gpu = 0;
    bool use_mmap = true;
    bool verbose = false;
    std::function<bool(float)> progress;  // 0..1 while weights upload; return false to cancel
};

struct llm_model;
llm_model *         llm_model_load(const char * path, const llm_model_params & params, std::string * err);
void                llm_model_free(llm_model * model);
const llm_hparams & llm_model_hparams(const llm_model * model);
const llm_vocab &   llm_model_get_vocab(const llm_model * model);
std::string         llm_model_desc(const llm_model * model);  // "llama 7B q8_0"
uint64_t            llm_model_n_params(const llm_model * model);
uint64_t            llm_model_size(const llm_model * model);  // bytes of weights
// bytes of weights per backend name ("CPU", "CUDA0") for the VRAM report
std::vector<std::pair<std::string, size_t>> llm_model_buffer_sizes(const llm_model * model);
// GGUF metadata value as a string ("" if absent), e.g. "tokenizer.chat_template"
std::string         llm_model_meta(const llm_model * model, const char * key);

// KV cache type by name: f32, f16, q8_0, q4_0 (any case). Returns false for any other name.
bool         llm_kv_type_from_name(const std::string & name, ggml_type * type);
const char * llm_kv_type_names();  // "f32, f16, q8_0, q4_0", for messages

struct llm_context_params {
    int  n_ctx = 0;             // 0: the model's training context
    int  n_batch = 512;         // max tokens per graph (a prompt is split into batches)
    int  n_threads = 0;         // 0: hardware threads
    // KV cache types (-ctk, -ctv): f32, f16, q8_0, q4_0. Quantized types need a head size that is a multiple of
    // 32; a quantized V needs flash_attn (llm_context_new fails with a one-line reason otherwise).
    ggml_type type_k = GGML_TYPE_F16;
    ggml_type type_v = GGML_TYPE_F16;
    bool flash_attn = false;    // fused attention op instead of mul_mat/soft_max/mul_mat
    bool all_logits = false;    // keep logits for every token of a batch (perplexity)
};

struct llm_context;
llm_context * llm_context_new(llm_model * model, const llm_context_params & params, std::string * err);
void          llm_context_free(llm_context * ctx);

// Process tokens at positions n_past .. n_past+n-1 (split into n_batch-sized graphs), append
// them to the KV cache. Fails (false, err) if the cache would overflow.
bool          llm_decode(llm_context * ctx, const int32_t * tokens, int n, std::string * err);
const float * llm_get_logits(llm_context * ctx);            // [n_vocab], last token of the last decode
const float * llm_get_logits_ith(llm_context * ctx, int i); // all_logits: token i of the last decode
int32_t       llm_argmax_last(llm_context * ctx);            // greedy pick (on the device if possible)
int           llm_n_ctx(const llm_context * ctx);
int           llm_n_past(const llm_context * ctx);           // tokens in the KV cache
// KV cache edits: drop positions [p0, p1); shift positions >= p1 down by (p1 - p0) (context shift).
void          llm_kv_remove(llm_context * ctx, int p0, int p1);
void          llm_kv_clear(llm_context * ctx);

struct llm_perf {
    double  t_load_ms = 0;
    double  t_prompt_ms = 0;   int n_prompt = 0;
    double  t_eval_ms = 0;     int n_eval = 0;
    size_t  compute_buffer_bytes = 0;   // sum over backends
    size_t  kv_bytes = 0;                // the cache's buffers
    size_t  kv_k_bytes = 0, kv_v_bytes = 0;  // its K and V tensors (of llm_context_params' type_k, type_v)
};
llm_perf      llm_get_perf(const llm_context * ctx);
void          llm_reset_perf(llm_context * ctx);

// Graph of one step for inspection (graph-dump, --dump-graph): builds the graph for n_tokens
// at the current n_past, allocates it through the scheduler and writes PREFIX.dot/.json.
bool          llm_dump_graph(llm_context * ctx, int n_tokens, const char * prefix, std::string * err);
