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

// The kept graph's logits (n rows) into rows [row, row + n) of ctx->logits, and its argmax into ctx->argmax.
static void get_logits(llm_context * ctx, int row, int n) {
    const size_t row_size = (size_t) ctx->model->hp.n_vocab;
    ggml_backend_tensor_get(ctx->graph.logits, ctx->logits.data() + row * row_size, 0, n * row_size * sizeof(float));
    ctx->logits_pending = false;
}
static void get_argmax(llm_context * ctx) {
    if (ctx->argmax_queued) {  // decode() has waited for the graph and the read behind it
        ctx->argmax = *(const int32_t *) ggml_backend_buffer_get_base(ctx->argmax_host);
        ctx->argmax_queued = false;
    } else {
        ggml_backend_tensor_get(ctx->graph.argmax, &ctx->argmax, 0, sizeof(int32_t));
    }
    ctx->argmax_pending = false;
}

// The last decode's outputs, still in its graph's tensors (a one-graph decode), into ctx->logits / ctx->argmax.
static void fetch_outputs(llm_context * ctx) {
    if (ctx->logits_pending) get_logits(ctx, 0, ctx->n_logits_rows);
    if (ctx->argmax_pending) get_argmax(ctx);
}

// A one-graph decode's argmax read queued behind the graph into page-locked memory where the backend computing it
// reads asynchronously: the wait at the end of decode() covers it, and llm_argmax_last reads host memory (a read
// after the wait was a device round trip: 12-20 us a token on an H200, ~1% of a Llama-2-7B q4_0 decode step).
static void queue_argmax(llm_context * ctx) {
    ctx->argmax_queued = false;
    if (!ctx->argmax_host || !ctx->graph.argmax) return;
    ggml_backend_t b = ggml_backend_sched_get_tensor_backend(ctx->sched, ctx->graph.argmax);
    if (!b || !b->iface.get_tensor_async) return;
    ggml_backend_tensor_get_async(b, ctx->graph.argmax, ggml_backend_buffer_get_base(ctx->argmax_host), 0,
                                  sizeof(int32_t));
    ctx->argmax_queued = true;
}

// Split mode row: shard s's scheduler and kept graph (shard 0's are the context's own); one shard otherwise.
static int n_shards(const llm_context * ctx) { return 1 + (int) ctx->shards.size(); }
static ggml_backend_sched_t sched_of(const llm_context * ctx, int s) {
    return s ? ctx->shards[s - 1].sched : ctx->sched;
}
static llm_graph & graph_of(llm_context * ctx, int s) { return s ? ctx->shards[s - 1].graph : ctx->graph; }

static void synchronize(llm_context * ctx) {
    for (int s = 0; s < n_shards(ctx); ++s) {
        if (sched_of(ctx, s)) ggml_backend_sched_synchronize(sched_of(ctx, s));
    }
}

// Forget the kept graph (before graph_mem or sched serve another graph).
static void drop_graph(llm_context * ctx) {
    fetch_outputs(ctx);
    for (int s = 0; s < n_shards(ctx); ++s) {
        llm_graph & g = graph_of(ctx, s);
        if (g.ctx) ggml_free(g.ctx);
        g = llm_graph();
    }
}

void llm_context_free(llm_context * ctx) {
    if (!ctx) return;
    ctx->logits_pending = ctx->argmax_pending = false;
    synchronize(ctx);
    drop_graph(ctx);
    if (ctx->sched) ggml_backend_sched_free(ctx->sched);
    for (auto & sc : ctx->shards) {
        if (sc.sched) ggml_backend_sched_free(sc.sched);
        if (sc.cpu) ggml_backend_free(sc.cpu);
    }
    ctx->workers.reset();
    llm_kv_cache_free(ctx->kv);
    if (ctx->argmax_host) ggml_backend_buffer_free(ctx->argmax_host);
    for (auto * g : ctx->gpus) ggml_backend_free(g);
    if (ctx->cpu) ggml_backend_free(ctx->cpu);
    ggml_comm_free(ctx->comm);  // after the backends: their CUDA graphs hold NCCL's captured all-reduces
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
    if (const char * e = std::getenv("LLM_UBATCH_SYNC")) ctx->ubatch_sync = std::atoi(e) != 0;  // A/B (docs/perf.md)
    auto fail = [&](const std::string & msg) -> llm_context * {
        if (err) *err = msg;
        llm_context_free(ctx);
        return nullptr;
    };
    if (params.n_ctx < 0) return fail("n_ctx must be >= 0, got " + std::to_string(params.n_ctx));

    ctx->cpu = ggml_backend_cpu_init();
    if (!ctx->cpu) return fail("cannot initialise the CPU backend");
    ggml_backend_cpu_set_n_threads(ctx->cpu, ctx->n_threads);
    for (int dev : model->devices) {
        ggml_backend_t g = nullptr;
        if (model->sim_devices) {
            if ((g = ggml_backend_cpu_sim_init(dev + 1))) ggml_backend_cpu_set_n_threads(g, ctx->n_threads);
        } else {
#ifdef GGML_USE_CUDA
            g = ggml_backend_cuda_init(dev);
#endif
        }
        if (!g) return fail(std::string("cannot initialise ") + (model->sim_devices ? "simulated" : "CUDA") +
                            " device " + std::to_string(dev));
        ctx->gpus.push_back(g);
        if (model->shards.empty() || ctx->backends.empty()) ctx->backends.push_back(g);  // row: shard 0's device
    }
#ifdef GGML_USE_CUDA
    if (!ctx->gpus.empty() && !model->sim_devices && !std::getenv("LLM_ARGMAX_SYNC")) {
        ctx->argmax_host = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_host_buffer_type(), 64);  // may fail
    }
#endif
    ctx->backends.push_back(ctx->cpu);
    const int n_graph_nodes = 64 + 48 * hp.n_layer;
    const size_t graph_mem = n_graph_nodes * ggml_tensor_overhead() + ggml_graph_overhead_custom(n_graph_nodes);
    if (!model->shards.empty()) {
        // split mode row: an all-reduce communicator over the devices, and shards 1.. with their own CPU backend and
        // scheduler, run by threads of their own
        const int n = (int) model->shards.size();
        std::string cerr = "no CUDA in this build";
        if (model->sim_devices) {
            ctx->comm = ggml_comm_host_new(n);
        } else {
#ifdef GGML_USE_CUDA
            ctx->comm = ggml_backend_cuda_comm_new(model->devices.data(), n, &cerr);
#endif
        }
        if (!ctx->comm) return fail("split mode row: cannot create the all-reduce communicator: " + cerr);
        ctx->shards.resize(n - 1);
        for (int s = 1; s < n; ++s) {
            llm_shard_ctx & sc = ctx->shards[s - 1];
            if (!(sc.cpu = ggml_backend_cpu_init())) return fail("cannot initialise the CPU backend");
            ggml_backend_cpu_set_n_threads(sc.cpu, ctx->n_threads);
            ggml_backend_t bs[2] = {ctx->gpus[s], sc.cpu};
            if (!(sc.sched = ggml_backend_sched_new(bs, 2, n_graph_nodes))) return fail("cannot create the scheduler");
            sc.graph_mem.resize(graph_mem);
        }
        ctx->workers = std::make_unique<llm_workers>(n - 1);
    }

    if (!llm_kv_cache_init(ctx->kv, *model, ctx->n_ctx, params.n_seq_max, params.type_k, params.type_v,
                           /*v_trans=*/!params.flash_attn, ctx->gpus, err)) {
        llm_context_free(ctx);
        return nullptr;
    }

    ctx->graph_size = n_graph_nodes;
    ctx->graph_mem.resize(graph_mem);
    ctx->sched = ggml_backend_sched_new(ctx->backends.data(), (int) ctx->backends.size(), ctx->graph_size);
    if (!ctx->sched) return fail("cannot create the scheduler");

    // plan the compute buffers once on the worst case: a full batch reading every cell, with logits of every token
    // (all_logits) or of one per sequence (a batch that wants more grows the buffers when it comes)
    const int n_out = params.all_logits ? ctx->n_batch : std::min(ctx->n_batch, std::max(1, params.n_seq_max));
    for (int s = 0; s < n_shards(ctx); ++s) {
        llm_graph g = llm_build_graph(*ctx, ctx->n_batch, ctx->n_ctx, n_out,
                                      n_out == ctx->n_batch ? LLM_OUT_ALL : n_out == 1 ? LLM_OUT_LAST : LLM_OUT_IDS, 1,
                                      s);
        const bool ok = ggml_backend_sched_reserve(sched_of(ctx, s), g.gf);
        ggml_free(g.ctx);
        if (!ok) {
            return fail("cannot allocate the compute buffers (n_ctx " + std::to_string(ctx->n_ctx) + ", n_batch " +
                        std::to_string(ctx->n_batch) + ")");
        }
    }
    for (auto * b : ctx->backends) ctx->perf.compute_buffer_bytes += ggml_backend_sched_get_buffer_size(ctx->sched, b);
    for (int s = 1; s < n_shards(ctx); ++s) {
        for (ggml_backend_t b : {ctx->gpus[s], ctx->shards[s - 1].cpu}) {
            ctx->perf.compute_buffer_bytes += ggml_backend_sched_get_buffer_size(ctx->shards[s - 1].sched, b);
        }
    }
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

// One graph: tokens [i0, i0+n) of the batch. Rows of ctx->logits from `row` on receive the logits of the
// tokens that want them (out[i] != 0); returns how many.
static bool decode_ubatch(llm_context * ctx, const llm_batch & b, int i0, int n, const uint8_t * out, int row,
                          bool lazy, int * n_rows, std::string * err) {
    const int32_t * seq = b.seq_id.data() + i0;
    const int32_t * pos = b.pos.data() + i0;
    std::vector<int32_t> & cells = ctx->ubatch_cells;
    cells.resize(n);
    if (!llm_kv_place(ctx->kv, n, seq, pos, cells.data(), err)) return false;

    // outputs: all tokens, the last one, or a list
    int n_out = 0;
    std::vector<int32_t> & ids = ctx->ubatch_out_ids;
    ids.clear();
    for (int i = 0; i < n; ++i) {
        if (out[i]) ids.push_back(i);
    }
    n_out = (int) ids.size();
    llm_graph_out mode = LLM_OUT_IDS;
    if (n_out == n) {
        mode = LLM_OUT_ALL;
    } else if (n_out == 0 || (n_out == 1 && ids[0] == n - 1)) {
        mode = LLM_OUT_LAST;  // no output wanted: the last token's logits are computed and not kept
    }
    const int n_graph_out = mode == LLM_OUT_LAST ? 1 : n_out;
    const int n_kv = llm_kv_n_kv(ctx->kv);
    int n_seq = 1;  // distinct sequences (a hint for the attention kernels)
    if (ctx->kv.n_seq_max > 1) {
        uint64_t seen = 0;
        for (int i = 0; i < n; ++i) seen |= 1ull << seq[i];
        n_seq = __builtin_popcountll(seen);
    }
    const llm_graph & kept = ctx->graph;
    const int n_sh = n_shards(ctx);
    if (!(ctx->graph_reuse && kept.ctx && kept.n_tokens == n && kept.n_kv == n_kv && kept.out == mode &&
          kept.n_out == n_graph_out && kept.n_seq == n_seq)) {
        drop_graph(ctx);
        bool ok = true;
        for (int s = 0; s < n_sh; ++s) {
            llm_graph & g = graph_of(ctx, s);
            g = llm_build_graph(*ctx, n, n_kv, n_graph_out, mode, n_seq, s);
            ggml_backend_sched_reset(sched_of(ctx, s));
            ok = ok && ggml_backend_sched_alloc_graph(sched_of(ctx, s), g.gf);
        }
        ++ctx->perf.n_graph_builds;
        if (!ok) {
            drop_graph(ctx);
            llm_kv_free_cells(ctx->kv, cells.data(), n);
            if (err) *err = "llm_decode: cannot allocate the graph of " + std::to_string(n) + " tokens";
            return false;
        }
    }
    ctx->kv_cells_buf.resize(3 * (size_t) n_kv);
    llm_kv_fill_cells(ctx->kv, ctx->kv_cells_buf.data(), n_kv);
    for (int s = 0; s < n_sh; ++s) {  // every shard's graph has the same inputs
        const llm_graph & g = graph_of(ctx, s);
        ggml_backend_tensor_set(g.inp_tokens, b.token.data() + i0, 0, n * sizeof(int32_t));
        ggml_backend_tensor_set(g.inp_pos, pos, 0, n * sizeof(int32_t));
        ggml_backend_tensor_set(g.inp_cells, cells.data(), 0, n * sizeof(int32_t));
        if (g.inp_out_ids) ggml_backend_tensor_set(g.inp_out_ids, ids.data(), 0, n_out * sizeof(int32_t));
        ggml_backend_tensor_set(g.inp_seq, seq, 0, n * sizeof(int32_t));
        ggml_backend_tensor_set(g.inp_kv_cells, ctx->kv_cells_buf.data(), 0,
                                ctx->kv_cells_buf.size() * sizeof(int32_t));
    }

    // not waited for here: the next ubatch's graph, mask and inputs are prepared on the host while this one runs
    // (its input uploads are ordered after it); decode() waits at its end. Split mode row: the shards' graphs at
    // once, one thread each (they meet at their all-reduces)
    auto compute = [ctx](int s) {
        ggml_backend_sched_t sc = sched_of(ctx, s);
        ggml_cgraph * gf = graph_of(ctx, s).gf;
        return ctx->ubatch_sync ? ggml_backend_sched_graph_compute(sc, gf)
                                : ggml_backend_sched_graph_compute_async(sc, gf);
    };
    ggml_status st = GGML_STATUS_SUCCESS;
    if (n_sh == 1) {
        st = compute(0);
    } else {
        std::vector<ggml_status> sts(n_sh);
        ctx->workers->run([&](int s) { sts[s] = compute(s); });
        for (ggml_status x : sts) st = x != GGML_STATUS_SUCCESS ? x : st;
    }
    if (st != GGML_STATUS_SUCCESS) {
        drop_graph(ctx);
        llm_kv_free_cells(ctx->kv, cells.data(), n);
        if (err) *err = "llm_decode: graph compute failed (status " + std::to_string((int) st) + ")";
        return false;
    }
    *n_rows = n_out;
    if (n_out > 0 && lazy) {
        ctx->logits_pending = ctx->argmax_pending = true;  // rows [0, n_out): row is 0
        queue_argmax(ctx);
    } else if (n_out > 0) {
        get_logits(ctx, row, n_out);
        get_argmax(ctx);
    }
    return true;
}

// Checks a batch: token ids in the vocabulary, sequence ids in range, positions >= 0 and increasing per
// sequence, room in the cache.
static bool check_batch(const llm_context * ctx, const llm_batch & b, std::string * err) {
    const int n = b.size();
    auto fail = [&](const std::string & m) {
        if (err) *err = "llm_decode: " + m;
        return false;
    };
    if (n <= 0) return fail("no tokens");
    if ((int) b.pos.size() != n || (int) b.seq_id.size() != n || (int) b.logits.size() != n) {
        return fail("batch arrays differ in length");
    }
    const int n_vocab = ctx->model->hp.n_vocab;
    std::vector<int32_t> last(ctx->kv.n_seq_max, -1);
    for (int i = 0; i < n; ++i) {
        if (b.token[i] < 0 || b.token[i] >= n_vocab) {
            return fail("token " + std::to_string(i) + " has id " + std::to_string(b.token[i]) +
                        ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
        }
        const int s = b.seq_id[i];
        if (s < 0 || s >= ctx->kv.n_seq_max) {
            return fail("token " + std::to_string(i) + " has sequence id " + std::to_string(s) + ", outside [0, " +
                        std::to_string(ctx->kv.n_seq_max) + ")");
        }
        if (b.pos[i] < 0 || b.pos[i] <= last[s]) {
            return fail("token " + std::to_string(i) + " of sequence " + std::to_string(s) + " has position " +
                        std::to_string(b.pos[i]) + ", not after the previous one");
        }
        last[s] = b.pos[i];
    }
    if (ctx->kv.used + n > ctx->n_ctx) {
        return fail("context full: " + std::to_string(ctx->kv.used) + " cells used + " + std::to_string(n) +
                    " new tokens > n_ctx " + std::to_string(ctx->n_ctx));
    }
    return true;
}

static bool decode(llm_context * ctx, const llm_batch & b, std::string * err) {
    if (!check_batch(ctx, b, err)) return false;
    const int n = b.size();
    const int64_t t0 = ggml_time_us();
    ctx->logits_pending = ctx->argmax_pending = ctx->argmax_queued = false;  // this decode's outputs replace the last
    const bool all = ctx->params.all_logits;
    std::vector<uint8_t> & out = ctx->batch_out;
    out.assign(b.logits.begin(), b.logits.end());
    if (all) std::fill(out.begin(), out.end(), 1);
    ctx->out_row.assign(n, -1);
    int n_rows = 0;
    for (int i = 0; i < n; ++i) {
        if (out[i]) ctx->out_row[i] = n_rows++;
    }
    ctx->n_logits_rows = n_rows;
    ctx->logits.resize((size_t) std::max(n_rows, 1) * ctx->model->hp.n_vocab);
    int row = 0;
    for (int i0 = 0; i0 < n; i0 += ctx->n_batch) {
        const int nb = std::min(ctx->n_batch, n - i0);
        int got = 0;
        // one graph: its outputs stay on the backend until asked for
        if (!decode_ubatch(ctx, b, i0, nb, out.data() + i0, row, nb == n, &got, err)) {
            synchronize(ctx);
            ctx->n_logits_rows = 0;
            ctx->out_row.clear();
            return false;
        }
        row += got;
    }
    synchronize(ctx);
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

bool llm_decode_batch(llm_context * ctx, const llm_batch & batch, std::string * err) { return decode(ctx, batch, err); }

bool llm_decode(llm_context * ctx, const int32_t * tokens, int n, std::string * err) {
    if (n <= 0) {
        if (err) *err = "llm_decode: no tokens";
        return false;
    }
    if (ctx->kv.seq_pos_max[0] + 1 + n > ctx->n_ctx || ctx->kv.used + n > ctx->n_ctx) {
        if (err) {
            *err = "llm_decode: context full: " + std::to_string(llm_n_past(ctx)) + " cached + " + std::to_string(n) +
                   " new tokens > n_ctx " + std::to_string(ctx->n_ctx);
        }
        return false;
    }
    llm_batch & b = ctx->single;
    b.clear();
    const int p0 = ctx->kv.seq_pos_max[0] + 1;
    for (int i = 0; i < n; ++i) b.add(tokens[i], p0 + i, 0, i == n - 1);
    return decode(ctx, b, err);
}

const float * llm_get_logits(llm_context * ctx) {
    if (ctx->n_logits_rows == 0) return nullptr;
    fetch_outputs(ctx);
    return ctx->logits.data() + (size_t) (ctx->n_logits_rows - 1) * ctx->model->hp.n_vocab;
}

const float * llm_get_logits_ith(llm_context * ctx, int i) {
    if (i < 0 || i >= ctx->n_logits_rows) return nullptr;
    fetch_outputs(ctx);
    return ctx->logits.data() + (size_t) i * ctx->model->hp.n_vocab;
}

const float * llm_get_logits_batch(llm_context * ctx, int i) {
    if (i < 0 || i >= (int) ctx->out_row.size() || ctx->out_row[i] < 0) return nullptr;
    fetch_outputs(ctx);
    return ctx->logits.data() + (size_t) ctx->out_row[i] * ctx->model->hp.n_vocab;
}

int32_t llm_argmax_last(llm_context * ctx) {
    if (ctx->n_logits_rows == 0) return -1;
    if (ctx->argmax_pending) get_argmax(ctx);
    return ctx->argmax;
}
int llm_n_ctx(const llm_context * ctx) { return ctx->n_ctx; }
int llm_n_past(const llm_context * ctx) { return ctx->kv.seq_pos_max[0] + 1; }
int llm_n_seq_max(const llm_context * ctx) { return ctx->kv.n_seq_max; }
int llm_kv_cells_used(const llm_context * ctx) { return ctx->kv.used; }

int llm_kv_seq_pos_max(const llm_context * ctx, int seq) {
    return seq >= 0 && seq < ctx->kv.n_seq_max ? ctx->kv.seq_pos_max[seq] : -1;
}

void llm_kv_seq_rm(llm_context * ctx, int seq, int p0, int p1) {
    if (seq >= ctx->kv.n_seq_max) return;
    llm_kv_seq_rm(ctx->kv, seq, std::max(p0, 0), p1);
}

void llm_kv_seq_cp(llm_context * ctx, int src, int dst, int p0, int p1) {
    const int n = ctx->kv.n_seq_max;
    if (src < 0 || src >= n || dst < 0 || dst >= n) return;
    llm_kv_seq_cp(ctx->kv, src, dst, std::max(p0, 0), p1);
}

void llm_kv_seq_keep(llm_context * ctx, int seq) {
    if (seq >= 0 && seq < ctx->kv.n_seq_max) llm_kv_seq_keep(ctx->kv, seq);
}

bool llm_kv_seq_add(llm_context * ctx, int seq, int p0, int p1, int delta, std::string * err) {
    // the kept graph is dropped only when cells move (the shift runs its own graph through sched): a removal with
    // nothing after it (bench, the server trimming a sequence's tail) keeps it (rebuilding a 512-token graph costs
    // ~0.8 ms of host time per prompt)
    std::vector<ggml_backend_sched_t> scheds;
    for (int s = 0; s < n_shards(ctx); ++s) scheds.push_back(sched_of(ctx, s));
    return llm_kv_seq_add(ctx->kv, *ctx->model, scheds, seq, p0, p1, delta, err, [ctx] { drop_graph(ctx); });
}

void llm_kv_remove(llm_context * ctx, int p0, int p1) {
    if (p0 < 0 || p1 <= p0) return;
    llm_kv_seq_rm(ctx->kv, 0, p0, p1);
    std::string err;
    if (!llm_kv_seq_add(ctx, 0, p1, -1, -(p1 - p0), &err)) GGML_LOG_ERROR("%s: %s\n", __func__, err.c_str());
}

void llm_kv_clear(llm_context * ctx) { llm_kv_cache_clear(ctx->kv); }

llm_perf llm_get_perf(const llm_context * ctx) { return ctx->perf; }

void llm_reset_perf(llm_context * ctx) {
    ctx->perf.t_prompt_ms = ctx->perf.t_eval_ms = 0;
    ctx->perf.n_prompt = ctx->perf.n_eval = ctx->perf.n_graph_builds = 0;
}

bool llm_dump_graph(llm_context * ctx, int n_tokens, const char * prefix, std::string * err) {
    const int n_past = llm_n_past(ctx);
    if (n_tokens <= 0 || n_tokens > ctx->n_batch || n_past + n_tokens > ctx->n_ctx) {
        if (err) {
            *err = "llm_dump_graph: " + std::to_string(n_tokens) + " tokens at n_past " + std::to_string(n_past) +
                   " do not fit (n_batch " + std::to_string(ctx->n_batch) + ", n_ctx " + std::to_string(ctx->n_ctx) +
                   ")";
        }
        return false;
    }
    drop_graph(ctx);  // the dump builds into graph_mem
    const int n_kv = std::min(ctx->n_ctx, (std::max(ctx->kv.used_end, n_past + n_tokens) + LLM_KV_PAD - 1) /
                                              LLM_KV_PAD * LLM_KV_PAD);
    const bool all = ctx->params.all_logits;
    llm_graph g = llm_build_graph(*ctx, n_tokens, n_kv, all ? n_tokens : 1, all ? LLM_OUT_ALL : LLM_OUT_LAST);
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

ggml_backend_sched_t llm_get_sched(llm_context * ctx) { return ctx->sched; }
ggml_cgraph * llm_last_graph(llm_context * ctx) { return ctx->graph.ctx ? ctx->graph.gf : nullptr; }

bool llm_flash_attn_supported(const llm_model * model, ggml_type type_k, ggml_type type_v) {
    if (ggml_is_quantized(type_v) || model->n_gpu_layers == 0 || model->sim_devices) return true;
#ifdef GGML_USE_CUDA
    // ask the backend about one query of the model's shapes against a 256-cell cache (tensor headers only)
    ggml_backend_t gpu = ggml_backend_cuda_init(model->main_gpu);
    if (!gpu) return true;  // llm_context_new reports the device
    const llm_hparams & hp = model->hp;
    const int64_t hd = hp.n_embd_head, n_kv = 256;
    ggml_context * c = ggml_init({8 * ggml_tensor_overhead(), nullptr, true});
    ggml_tensor * q = ggml_new_tensor_3d(c, GGML_TYPE_F32, hd, 1, hp.n_head);     // [hd, n_tokens, n_head]
    ggml_tensor * k = ggml_new_tensor_3d(c, type_k, hd, n_kv, hp.n_head_kv);       // [hd, n_kv, n_head_kv]
    ggml_tensor * v = ggml_new_tensor_3d(c, type_v, hd, n_kv, hp.n_head_kv);
    ggml_tensor * mask = ggml_new_tensor_2d(c, GGML_TYPE_F16, n_kv, 1);           // [n_kv, n_tokens]
    const bool ok = ggml_backend_supports_op(gpu, ggml_flash_attn_ext(c, q, k, v, mask, 1.0f, -1));
    ggml_free(c);
    ggml_backend_free(gpu);
    return ok;
#else
    (void) type_k;
    return true;
#endif
}
