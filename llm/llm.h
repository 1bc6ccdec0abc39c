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

// How the offloaded layers spread over several GPUs (-sm): NONE all on main_gpu; LAYER consecutive layers on
// consecutive devices in proportion to tensor_split (default: their free memory), the output with the last layer's
// device, the token embedding on the CPU, activations copied between devices by the scheduler. ROW (tensor
// parallelism) splits every layer: each device holds a share of the KV heads (with their query heads and KV cache)
// and of the FFN columns, the devices run their graphs at once, and the partial sums of the attention output and FFN
// down projections are added up by an all-reduce (NCCL) after each; the output is on the first device.
enum llm_split_mode { LLM_SPLIT_NONE = 0, LLM_SPLIT_LAYER = 1, LLM_SPLIT_ROW = 2 };

struct llm_model_params {
    int  n_gpu_layers = 0;      // first N layers on the GPU; > n_layer also puts the output there
    int  main_gpu = 0;
    llm_split_mode split_mode = LLM_SPLIT_LAYER;  // with one device (or -sm none: main_gpu alone) no split
    std::vector<float> tensor_split;              // per CUDA device; empty: by free memory (-ts 3,1)
    // Tests: n >= 2 offloads to n simulated devices (ggml_backend_cpu_sim_*: host memory, the CPU's kernels) instead
    // of CUDA devices, tensor_split's shares over them (default equal), so that a machine without a GPU runs the
    // layer split's placement, per-device buffers and KV caches, and the scheduler's copies between devices.
    int sim_devices = 0;
    // CPU weights: 1 used in place from the file mapping, 0 read into CPU buffers, -1 (default) read into them where
    // some layer stays on the CPU and the file's tensor data takes at most half of the available memory, else mapped
    int  use_mmap = -1;
    // CPU mat-mul weights of a type the CPU decodes faster in 8-row groups (ggml_backend_cpu_repack_wanted: q4_0,
    // q4_K on AVX2) are copied into a CPU_REPACK buffer at load instead of being read from the mapping (--no-repack)
    bool use_repack = true;
    bool verbose = false;
    std::function<bool(float)> progress;  // 0..1 while weights upload; return false to cancel
    // The context the caller will make (0: unknown): the KV cache of its n_ctx cells on the offloaded layers is
    // counted with the weights in the free-device-memory check, so a -c too large for the GPU fails before any
    // weight is uploaded (llm_context_new checks again when it allocates).
    int       n_ctx_hint = 0;
    ggml_type type_k_hint = GGML_TYPE_F16, type_v_hint = GGML_TYPE_F16;
};

// -sm / -ts values: "none", "layer", "row" (any case); "3,1" or "3/1" (non-negative numbers). False on anything else.
bool llm_split_mode_from_name(const std::string & name, llm_split_mode * mode);
bool llm_tensor_split_parse(const std::string & s, std::vector<float> * split);

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
// Can flash attention (llm_context_params::flash_attn) run with these cache types where the model's layers are?
// (main's -fa auto.) On the CPU always (every head size and cache type); with layers on CUDA, when the CUDA
// backend takes a FLASH_ATTN_EXT of the model's head size and cache types. A quantized V says true: it needs flash
// attention, and a device without the kernel leaves that cache and its attention on the CPU.
bool         llm_flash_attn_supported(const llm_model * model, ggml_type type_k, ggml_type type_v);

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
    int  n_seq_max = 1;         // sequences the cache holds at once (1..64; the server's -np slots)
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
int           llm_n_past(const llm_context * ctx);           // sequence 0's next position (tokens cached)
// KV cache edits of sequence 0: drop positions [p0, p1); shift positions >= p1 down by (p1 - p0) (context shift).
void          llm_kv_remove(llm_context * ctx, int p0, int p1);
void          llm_kv_clear(llm_context * ctx);               // every sequence

// ---- many sequences in one context -------------------------------------------------------------------
// The KV cache is one pool of n_ctx cells; each cell holds one position and the set of sequences (ids
// 0 .. n_seq_max-1) that see it, so a prefix shared by several sequences (llm_kv_seq_cp) is stored once.
// A batch carries tokens of any sequences; the step's mat-muls run over all its tokens at once, and each
// token attends to the cells of its own sequence at positions <= its own.
//
//   llm_batch b;
//   b.add(tok_a, pos_a, /*seq=*/0, /*logits=*/true);
//   b.add(tok_b, pos_b, /*seq=*/1, true);
//   if (!llm_decode_batch(ctx, b, &err)) ...
//   const float * la = llm_get_logits_batch(ctx, 0), * lb = llm_get_logits_batch(ctx, 1);
//
// The single-sequence calls above (llm_decode, llm_n_past, llm_kv_remove) work on sequence 0.
struct llm_batch {
    std::vector<int32_t> token;   // token ids
    std::vector<int32_t> pos;     // position of each token in its sequence
    std::vector<int32_t> seq_id;  // its sequence
    std::vector<uint8_t> logits;  // 1: keep this token's logits
    void add(int32_t tok, int32_t p, int32_t seq, bool want_logits) {
        token.push_back(tok);
        pos.push_back(p);
        seq_id.push_back(seq);
        logits.push_back(want_logits ? 1 : 0);
    }
    void clear() { token.clear(); pos.clear(); seq_id.clear(); logits.clear(); }
    int  size() const { return (int) token.size(); }
};

// Evaluate a batch (split into n_batch-sized graphs), writing its tokens into free cells. Tokens of one
// sequence come in increasing positions. Fails (false, err) on a bad token/position/sequence or when the
// cache has fewer free cells than the batch has tokens (nothing is written then).
bool          llm_decode_batch(llm_context * ctx, const llm_batch & batch, std::string * err);
const float * llm_get_logits_batch(llm_context * ctx, int i);  // [n_vocab] of batch token i (its logits flag set)
int           llm_n_seq_max(const llm_context * ctx);
int           llm_kv_cells_used(const llm_context * ctx);
int           llm_kv_seq_pos_max(const llm_context * ctx, int seq);  // highest position of seq, -1 if empty
// Cache edits per sequence; p1 < 0 means "to the end". seq < 0 in rm: every sequence.
void          llm_kv_seq_rm(llm_context * ctx, int seq, int p0, int p1);    // forget positions [p0, p1)
void          llm_kv_seq_cp(llm_context * ctx, int src, int dst, int p0, int p1);  // dst also sees src's cells
void          llm_kv_seq_keep(llm_context * ctx, int seq);                   // forget every other sequence
// Move positions [p0, p1) of seq by delta (context shift): the keys are re-rotated with RoPE in place.
bool          llm_kv_seq_add(llm_context * ctx, int seq, int p0, int p1, int delta, std::string * err);

struct llm_perf {
    double  t_load_ms = 0;
    double  t_prompt_ms = 0;   int n_prompt = 0;
    double  t_eval_ms = 0;     int n_eval = 0;
    int     n_graph_builds = 0;  // step graphs llm_decode built (a step like the last one reuses its graph)
    size_t  compute_buffer_bytes = 0;   // sum over backends
    size_t  kv_bytes = 0;                // the cache's buffers
    size_t  kv_k_bytes = 0, kv_v_bytes = 0;  // its K and V tensors (of llm_context_params' type_k, type_v)
};
llm_perf      llm_get_perf(const llm_context * ctx);
void          llm_reset_perf(llm_context * ctx);

// Graph of one step for inspection (graph-dump, --dump-graph): builds the graph for n_tokens
// at the current n_past, allocates it through the scheduler and writes PREFIX.dot/.json.
bool          llm_dump_graph(llm_context * ctx, int n_tokens, const char * prefix, std::string * err);
// The context's scheduler (ggml_backend_sched_set_profile: per-node times of the next decodes), and the graph the
// last decode computed, still allocated by it (nullptr after anything else used the scheduler): what a dump of
// that step's profile shows (graph-dump --profile).
ggml_backend_sched_t llm_get_sched(llm_context * ctx);
ggml_cgraph *        llm_last_graph(llm_context * ctx);
