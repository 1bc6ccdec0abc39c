// context.cpp - a decoding context: backends, scheduler (compute buffers planned once on the worst-case
// graph), KV cache, logits, perf counters, graph dumps.
#include "ggml-dump.h"
#include "llm-impl.h"

#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>

static double mib(size_t b) { return b / (1024.0 * 1024.0); }

// Forget the kept graph (before graph_mem or sched serve another graph).
static void drop_graph(llm_context * ctx) {
    if (ctx->graph.ctx) ggml_free(ctx->graph.ctx);
    ctx->graph = llm_graph();
}

void llm_context_free(llm_context * ctx) {
    if (!ctx) return;
    drop_graph(ctx);
    if (ctx->sched) ggml_backend_sched_free(ctx->sched);
    llm_kv_cache_free(ctx->kv);
    if (ctx->gpu) ggml_backend_free(ctx->gpu);
    if (ctx->cpu) ggml_backend_free(ctx->cpu);
    delete ctx;
}

llm_context * llm_context_new(llm_model * model, const llm_context_params & params, std::string * err) {
    const llm_hparams & hp = model->hp;
    auto * ctx = new llm_context;
    ctx->model = model;
    ctx->params = params;
    ctx->n_ctx = params.n_ctx > 0 ? params.n_ctx : hp.n_ctx_train;
    ctx->n_batch = std::clamp(params.n_batch > 0 ? params.n_batch : 512, 1, ctx->n_ctx);
    ctx->n_threads = params.n_threads > 0 ? params.n_threads : (int) std::max(1u, std::thread::hardware_concurrency());
    if (const char * e = std::getenv("LLM_NO_GRAPH_REUSE")) ctx->graph_reuse = std::atoi(e) == 0;
    auto fail = [&](const std::string & msg) -> llm_context * {
        if (err) *err = msg;
        llm_context_free(ctx);
        return nullptr;
    };
    if (params.n_ctx < 0) return fail("n_ctx must be >= 0, got " + std::to_string(params.n_ctx));

    ctx->cpu = ggml_backend_cpu_init();
    if (!ctx->cpu) return fail("cannot initialise the CPU backend");
    ggml_backend_cpu_set_n_threads(ctx->cpu, ctx->n_threads);
#ifdef GGML_USE_CUDA
    if (model->n_gpu_layers > 0 || model->output_on_gpu) {
        ctx->gpu = ggml_backend_cuda_init(model->main_gpu);
        if (!ctx->gpu) return fail("cannot initialise CUDA device " + std::to_string(model->main_gpu));
        ctx->backends.push_back(ctx->gpu);
    }
#endif
    ctx->backends.push_back(ctx->cpu);

    if (!llm_kv_cache_init(ctx->kv, *model, ctx->n_ctx, params.type_k, params.type_v, /*v_trans=*/!params.flash_attn,
                           ctx->gpu, err)) {
        llm_context_free(ctx);
        return nullptr;
    }

    ctx->graph_size = 64 + 48 * (size_t) hp.n_layer;
    ctx->graph_mem.resize(ctx->graph_size * ggml_tensor_overhead() + ggml_graph_overhead_custom(ctx->graph_size));
    ctx->sched = ggml_backend_sched_new(ctx->backends.data(), (int) ctx->backends.size(), ctx->graph_size);
    if (!ctx->sched) return fail("cannot create the scheduler");

    // plan the compute buffers once on the worst case: a full batch at the end of the context
    llm_graph g = llm_build_graph(*ctx, ctx->n_batch, ctx->n_ctx - ctx->n_batch, params.all_logits);
    const bool ok = ggml_backend_sched_reserve(ctx->sched, g.gf);
    ggml_free(g.ctx);
    if (!ok) return fail("cannot allocate the compute buffers (n_ctx " + std::to_string(ctx->n_ctx) + ", n_batch " +
                         std::to_string(ctx->n_batch) + ")");
    for (auto * b : ctx->backends) ctx->perf.compute_buffer_bytes += ggml_backend_sched_get_buffer_size(ctx->sched, b);
    ctx->perf.kv_bytes = ctx->kv.size_bytes();
    ctx->perf.kv_k_bytes = ctx->kv.size_bytes_k();
    ctx->perf.kv_v_bytes = ctx->kv.size_bytes_v();
    ctx->perf.t_load_ms = model->t_load_ms;
    if (model->verbose) {
        for (auto * b : ctx->backends) {
            GGML_LOG_INFO("%s: %s compute buffer %.2f MiB\n", __func__, ggml_backend_name(b),
                          mib(ggml_backend_sched_get_buffer_size(ctx->sched, b)));
        }
        GGML_LOG_INFO("%s: KV cache %.2f MiB (n_ctx %d; K %s %.2f MiB, V %s %.2f MiB), n_batch %d, threads %d\n",
                      __func__, mib(ctx->perf.kv_bytes), ctx->n_ctx, ggml_type_name(params.type_k),
                      mib(ctx->perf.kv_k_bytes), ggml_type_name(params.type_v), mib(ctx->perf.kv_v_bytes),
                      ctx->n_batch, ctx->n_threads);
    }
    return ctx;
}

// One graph: n tokens at n_past. out_row: where in ctx->logits its logits rows go (-1: do not copy).
static bool decode_batch(llm_context * ctx, const int32_t * tokens, int n, int out_row, std::string * err) {
    const int n_past = ctx->kv.n_past;
    const int n_kv = llm_graph_n_kv(n_past, n, ctx->n_ctx);
    if (!(ctx->graph_reuse && ctx->graph.ctx && ctx->graph.n_tokens == n && ctx->graph.n_kv == n_kv)) {
        drop_graph(ctx);
        ctx->graph = llm_build_graph(*ctx, n, n_past, ctx->params.all_logits);
        ggml_backend_sched_reset(ctx->sched);
        if (!ggml_backend_sched_alloc_graph(ctx->sched, ctx->graph.gf)) {
            drop_graph(ctx);
            if (err) *err = "llm_decode: cannot allocate the graph of " + std::to_string(n) + " tokens";
            return false;
        }
    }
    const llm_graph & g = ctx->graph;
    ggml_backend_tensor_set(g.inp_tokens, tokens, 0, n * sizeof(int32_t));
    int32_t pos_small[64];
    std::vector<int32_t> pos_big;
    int32_t * pos = pos_small;
    if (n > 64) {
        pos_big.resize(n);
        pos = pos_big.data();
    }
    for (int i = 0; i < n; ++i) pos[i] = n_past + i;
    ggml_backend_tensor_set(g.inp_pos, pos, 0, n * sizeof(int32_t));
    ctx->mask_buf.resize(ggml_nbytes(g.inp_kq_mask));
    llm_graph_fill_mask(ctx->mask_buf.data(), g.inp_kq_mask->type, g.n_kv, n, n_past);
    ggml_backend_tensor_set(g.inp_kq_mask, ctx->mask_buf.data(), 0, ctx->mask_buf.size());

    const ggml_status st = ggml_backend_sched_graph_compute(ctx->sched, g.gf);
    if (st != GGML_STATUS_SUCCESS) {
        drop_graph(ctx);
        if (err) *err = "llm_decode: graph compute failed (status " + std::to_string((int) st) + ")";
        return false;
    }
    if (out_row >= 0) {
        const size_t row = (size_t) ctx->model->hp.n_vocab;
        ggml_backend_tensor_get(g.logits, ctx->logits.data() + out_row * row, 0, g.n_out * row * sizeof(float));
        ggml_backend_tensor_get(g.argmax, &ctx->argmax, 0, sizeof(int32_t));
    }
    ctx->kv.n_past += n;
    return true;
}

bool llm_decode(llm_context * ctx, const int32_t * tokens, int n, std::string * err) {
    if (n <= 0) {
        if (err) *err = "llm_decode: no tokens";
        return false;
    }
    const int n_vocab = ctx->model->hp.n_vocab;
    for (int i = 0; i < n; ++i) {
        if (tokens[i] < 0 || tokens[i] >= n_vocab) {
            if (err) {
                *err = "llm_decode: token " + std::to_string(i) + " has id " + std::to_string(tokens[i]) +
                       ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")";
            }
            return false;
        }
    }
    if (ctx->kv.n_past + n > ctx->n_ctx) {
        if (err) {
            *err = "llm_decode: context full: " + std::to_string(ctx->kv.n_past) + " cached + " + std::to_string(n) +
                   " new tokens > n_ctx " + std::to_string(ctx->n_ctx);
        }
        return false;
    }
    const int64_t t0 = ggml_time_us();
    const bool all = ctx->params.all_logits;
    ctx->n_logits_rows = all ? n : 1;
    ctx->logits.resize((size_t) ctx->n_logits_rows * n_vocab);
    for (int i0 = 0; i0 < n; i0 += ctx->n_batch) {
        const int nb = std::min(ctx->n_batch, n - i0);
        const bool last = i0 + nb == n;
        const int out_row = all ? i0 : (last ? 0 : -1);
        if (!decode_batch(ctx, tokens + i0, nb, out_row, err)) {
            ctx->n_logits_rows = 0;
            return false;
        }
    }
    const double ms = (ggml_time_us() - t0) / 1000.0;
    if (n > 1) {
        ctx->perf.t_prompt_ms += ms;
        ctx->perf.n_prompt += n;
    } else {
        ctx->perf.t_eval_ms += ms;
        ctx->perf.n_eval += n;
    }
    return true;
}

const float * llm_get_logits(llm_context * ctx) {
    if (ctx->n_logits_rows == 0) return nullptr;
    return ctx->logits.data() + (size_t) (ctx->n_logits_rows - 1) * ctx->model->hp.n_vocab;
}

const float * llm_get_logits_ith(llm_context * ctx, int i) {
    if (i < 0 || i >= ctx->n_logits_rows) return nullptr;
    return ctx->logits.data() + (size_t) i * ctx->model->hp.n_vocab;
}

int32_t llm_argmax_last(llm_context * ctx) { return ctx->n_logits_rows > 0 ? ctx->argmax : -1; }
int llm_n_ctx(const llm_context * ctx) { return ctx->n_ctx; }
int llm_n_past(const llm_context * ctx) { return ctx->kv.n_past; }

void llm_kv_remove(llm_context * ctx, int p0, int p1) {
    drop_graph(ctx);  // the shift runs its own graph through sched
    std::string err;
    if (!llm_kv_cache_remove(ctx->kv, *ctx->model, ctx->sched, p0, p1, &err)) {
        GGML_LOG_ERROR("%s: %s\n", __func__, err.c_str());
    }
}

void llm_kv_clear(llm_context * ctx) { llm_kv_cache_clear(ctx->kv); }

llm_perf llm_get_perf(const llm_context * ctx) { return ctx->perf; }

void llm_reset_perf(llm_context * ctx) {
    ctx->perf.t_prompt_ms = ctx->perf.t_eval_ms = 0;
    ctx->perf.n_prompt = ctx->perf.n_eval = 0;
}

bool llm_dump_graph(llm_context * ctx, int n_tokens, const char * prefix, std::string * err) {
    const int n_past = ctx->kv.n_past;
    if (n_tokens <= 0 || n_tokens > ctx->n_batch || n_past + n_tokens > ctx->n_ctx) {
        if (err) {
            *err = "llm_dump_graph: " + std::to_string(n_tokens) + " tokens at n_past " + std::to_string(n_past) +
                   " do not fit (n_batch " + std::to_string(ctx->n_batch) + ", n_ctx " + std::to_string(ctx->n_ctx) +
                   ")";
        }
        return false;
    }
    drop_graph(ctx);  // the dump builds into graph_mem
    llm_graph g = llm_build_graph(*ctx, n_tokens, n_past, ctx->params.all_logits);
    ggml_backend_sched_reset(ctx->sched);
    bool ok = ggml_backend_sched_alloc_graph(ctx->sched, g.gf);
    if (!ok) {
        if (err) *err = "llm_dump_graph: cannot allocate the graph";
    } else {
        ggml_dump_info info;
        info.sched = ctx->sched;
        const std::string title = llm_model_desc(ctx->model) + ", " + std::to_string(n_tokens) + " tokens at n_past " +
                                  std::to_string(n_past);
        info.title = title.c_str();
        ok = ggml_graph_dump_files(g.gf, &info, prefix, err);
    }
    ggml_backend_sched_reset(ctx->sched);
    ggml_free(g.ctx);
    return ok;
}
