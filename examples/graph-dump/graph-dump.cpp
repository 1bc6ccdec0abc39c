// graph-dump - build a small transformer block (rms_norm, mul, mul_mat, rope, soft_max, swiglu,
// permute/cont views), plan it with the graph allocator (or the scheduler), run it on the CPU,
// and write PREFIX.dot / PREFIX.json (and PREFIX.svg with --svg when graphviz is installed).
//
//   graph-dump -o /tmp/block --svg
//   graph-dump -o /tmp/block --sched      # backends, splits and copies from the scheduler
//   graph-dump -m model.gguf -n 32 -o /tmp/llama [-ngl N] [-c N] [--svg]
//       one Llama step of n tokens (32: a prompt batch, 1: a decode step) as planned by the
//       scheduler: backend per node, splits, buffer offsets
//   graph-dump -m model.gguf -n 1 --profile [-d DEPTH] [-r REPS] [-t THREADS] [--top N] -o /tmp/llama --svg
//       the same step run for real after a warm-up, REPS times with per-node timing (median kept): the dump gains
//       each node's time, GB/s, TFLOP/s and % of roofline (the SVG colours nodes by time), and the top nodes, the
//       totals per op and the time outside kernels are printed
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cost.h"
#include "ggml-dump.h"
#include "ggml.h"
#include "llm.h"
#include "roofline.h"
#include "stats.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

struct block_weights {
    ggml_tensor *attn_norm, *wq, *wk, *wv, *wo, *ffn_norm, *w_gate, *w_up, *w_down;
};

constexpr int n_embd = 64, n_head = 4, head_dim = n_embd / n_head, n_ff = 172, n_tokens = 7;

block_weights make_weights(ggml_context * ctx) {
    block_weights w;
    auto mk = [&](const char * name, int64_t n0, int64_t n1) {
        ggml_tensor * t =
            n1 > 1 ? ggml_new_tensor_2d(ctx, GGML_TYPE_F32, n0, n1) : ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n0);
        ggml_set_name(t, name);
        ggml_set_param(t);
        return t;
    };
    w.attn_norm = mk("attn_norm.weight", n_embd, 1); // [n_embd]
    w.wq = mk("attn_q.weight", n_embd, n_embd);      // [n_embd, n_embd]
    w.wk = mk("attn_k.weight", n_embd, n_embd);
    w.wv = mk("attn_v.weight", n_embd, n_embd);
    w.wo = mk("attn_output.weight", n_embd, n_embd);
    w.ffn_norm = mk("ffn_norm.weight", n_embd, 1);
    w.w_gate = mk("ffn_gate.weight", n_embd, n_ff); // [n_embd, n_ff]
    w.w_up = mk("ffn_up.weight", n_embd, n_ff);
    w.w_down = mk("ffn_down.weight", n_ff, n_embd); // [n_ff, n_embd]
    return w;
}

// x: [n_embd, n_tokens], pos: i32 [n_tokens] -> [n_embd, n_tokens]
ggml_tensor * build_block(ggml_context * ctx, const block_weights & w, ggml_tensor * x, ggml_tensor * pos) {
    ggml_tensor * cur = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), w.attn_norm);
    ggml_set_name(cur, "attn_norm");
    auto proj = [&](ggml_tensor * wt, const char * name, bool rope) { // -> [head_dim, n_head, n_tokens]
        ggml_tensor * t = ggml_reshape_3d(ctx, ggml_mul_mat(ctx, wt, cur), head_dim, n_head, n_tokens);
        if (rope) t = ggml_rope_ext(ctx, t, pos, nullptr, head_dim, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
        ggml_set_name(t, name);
        return t;
    };
    ggml_tensor * q = ggml_permute(ctx, proj(w.wq, "Qcur", true), 0, 2, 1, 3); // [head_dim, n_tokens, n_head]
    ggml_tensor * k = ggml_permute(ctx, proj(w.wk, "Kcur", true), 0, 2, 1, 3);
    ggml_tensor * v = proj(w.wv, "Vcur", false);
    ggml_tensor * kq = ggml_mul_mat(ctx, k, q); // [n_kv, n_tokens, n_head]
    ggml_set_name(kq, "kq");
    kq = ggml_soft_max_causal(ctx, kq, 1.0f / std::sqrt((float)head_dim), 0);
    ggml_set_name(kq, "kq_soft_max");
    ggml_tensor * vt = ggml_cont(ctx, ggml_permute(ctx, v, 1, 2, 0, 3)); // [n_kv, head_dim, n_head]
    ggml_tensor * kqv = ggml_mul_mat(ctx, vt, kq);                       // [head_dim, n_tokens, n_head]
    ggml_tensor * merged = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_embd, n_tokens);
    ggml_set_name(merged, "kqv_merged");
    ggml_tensor * h = ggml_add(ctx, x, ggml_mul_mat(ctx, w.wo, merged));
    ggml_set_name(h, "ffn_inp");
    cur = ggml_mul(ctx, ggml_rms_norm(ctx, h, 1e-5f), w.ffn_norm);
    ggml_tensor * g = ggml_mul_mat(ctx, w.w_gate, cur); // [n_ff, n_tokens]
    ggml_tensor * u = ggml_mul_mat(ctx, w.w_up, cur);
    ggml_tensor * s = ggml_swiglu_split(ctx, g, u);
    ggml_set_name(s, "ffn_swiglu");
    ggml_tensor * out = ggml_add(ctx, h, ggml_mul_mat(ctx, w.w_down, s));
    ggml_set_name(out, "l_out");
    return out;
}

void fill_random(ggml_tensor * t, std::mt19937 & rng, float scale) {
    std::vector<float> v(ggml_nelements(t));
    for (auto & x : v)
        x = std::uniform_real_distribution<float>(-scale, scale)(rng);
    ggml_backend_tensor_set(t, v.data(), 0, v.size() * sizeof(float));
}

void usage(const char * argv0) {
    std::fprintf(stderr,
                 "usage: %s [-o PREFIX] [--svg] [--sched] [-m MODEL.gguf [-n TOKENS] [-ngl N] [-c N]\n"
                 "          [--profile [-d DEPTH] [-r REPS] [-t THREADS] [--top N]]]\n",
                 argv0);
}

struct profile_opts {
    bool on = false;
    int depth = 0;     // tokens in the cache before the profiled step
    int reps = 5;      // profiled steps (the median per node is kept)
    int n_threads = 0; // 0: all cores
    int top = 25;      // rows of the top-nodes table
};

bool decode_random(llm_context * ctx, int n, std::mt19937 & rng, int n_vocab, std::string & err) {
    std::vector<int32_t> toks(n);
    for (auto & t : toks)
        t = (int32_t)(rng() % (uint32_t)n_vocab);
    return llm_decode(ctx, toks.data(), n, &err);
}

// A real step of n_tokens at the given depth, after a warm-up: po.reps times with profiling off (the step's wall
// time), then po.reps times with it on (per-node times); decode steps follow each other in the cache (the graph is reused, as
// in generation), a prompt step is taken back out of the cache after each run.
bool profile_step(llm_context * ctx, int n_vocab, int n_tokens, const profile_opts & po, ggml_profile & out,
                  std::string & err) {
    std::mt19937 rng(1234);
    if (po.depth > 0 && !decode_random(ctx, po.depth, rng, n_vocab, err)) return false;
    const bool prompt = n_tokens > 1;
    auto rewind = [&] {
        if (prompt) llm_kv_remove(ctx, po.depth, llm_n_past(ctx));
    };
    if (!decode_random(ctx, n_tokens, rng, n_vocab, err)) return false; // warm-up
    rewind();
    ggml_backend_sched_t sched = llm_get_sched(ctx);
    std::vector<double> walls;
    std::vector<ggml_profile> runs;
    // the walls first, back to back, as generation runs: a step right after a profiled one is not the steady state
    // (it looks its CUDA graph up again)
    for (int r = 0; r < po.reps; ++r) {
        const int64_t t0 = ggml_time_us();
        if (!decode_random(ctx, n_tokens, rng, n_vocab, err)) return false;
        walls.push_back((double)(ggml_time_us() - t0));
        rewind();
    }
    for (int r = 0; r < po.reps; ++r) {
        ggml_backend_sched_set_profile(sched, true);
        const bool ok = decode_random(ctx, n_tokens, rng, n_vocab, err);
        ggml_backend_sched_set_profile(sched, false);
        if (!ok) return false;
        runs.push_back(*ggml_backend_sched_get_profile(sched));
        if (r + 1 < po.reps) rewind(); // the last one stays: its graph is the one dumped
    }
    out = ggml_profile_median(runs);
    out.step_us = median(walls);
    out.step_what = "llm_decode of " + std::to_string(n_tokens) + " token(s) at depth " + std::to_string(po.depth) +
                    ", profiling off, median of " + std::to_string(po.reps);
    return true;
}

bool write_svg(const std::string & prefix) {
    if (std::system("command -v dot > /dev/null 2>&1") != 0) {
        std::fprintf(stderr, "warning: graphviz 'dot' not found, skipping the SVG\n");
        return true;
    }
    const std::string cmd = "dot -Tsvg '" + prefix + ".dot' -o '" + prefix + ".svg'";
    if (std::system(cmd.c_str()) != 0) {
        std::fprintf(stderr, "error: '%s' failed\n", cmd.c_str());
        return false;
    }
    std::printf("wrote %s.svg\n", prefix.c_str());
    return true;
}

// one step of a Llama model, through the model's own graph builder and scheduler (with po.on: run and profiled)
int dump_model(const std::string & model_path, int n_tokens, int ngl, int n_ctx, const std::string & prefix, bool svg,
               const profile_opts & po) {
    std::string err;
    llm_model_params mp;
    mp.n_gpu_layers = ngl;
    llm_model * model = llm_model_load(model_path.c_str(), mp, &err);
    if (!model) {
        std::fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    llm_context_params cp;
    cp.n_ctx = n_ctx;
    cp.n_batch = std::max(n_tokens, 1);
    cp.n_threads = po.n_threads;
    if (po.on) { // room for the depth, the warm-up and the steps (decode steps stay in the cache)
        cp.n_ctx = std::max(n_ctx, po.depth + (n_tokens > 1 ? n_tokens : 1 + 2 * po.reps));
    }
    llm_context * ctx = llm_context_new(model, cp, &err);
    bool ok = ctx != nullptr;
    if (ok && po.on) {
        ggml_profile prof;
        ok = profile_step(ctx, llm_model_hparams(model).n_vocab, n_tokens, po, prof, err);
        ggml_cgraph * gf = ok ? llm_last_graph(ctx) : nullptr;
        if (ok && !gf) {
            err = "the profiled step's graph is gone";
            ok = false;
        }
        if (ok) {
            roofline_cache roofs;
            roofline_apply(prof, cp.n_threads, roofs);
            ggml_dump_info info;
            info.sched = llm_get_sched(ctx);
            info.profile = &prof;
            const std::string title = llm_model_desc(model) + ", " + std::to_string(n_tokens) +
                                      " token(s) at depth " + std::to_string(po.depth) + ", profiled";
            info.title = title.c_str();
            ok = ggml_graph_dump_files(gf, &info, prefix, &err);
            std::printf("top %d of %zu timed nodes (%s):\n%s\n%s\n%s", po.top, prof.nodes.size(), title.c_str(),
                        ggml_profile_table(prof, po.top).c_str(), ggml_profile_op_totals(prof).c_str(),
                        ggml_profile_summary(prof).c_str());
        }
    } else if (ok) {
        ok = llm_dump_graph(ctx, n_tokens, prefix.c_str(), &err);
    }
    if (!ok) std::fprintf(stderr, "error: %s\n", err.c_str());
    if (ok) std::printf("wrote %s.dot and %s.json (%s, %d tokens)\n", prefix.c_str(), prefix.c_str(),
                        llm_model_desc(model).c_str(), n_tokens);
    llm_context_free(ctx);
    llm_model_free(model);
    if (!ok) return 1;
    return svg && !write_svg(prefix) ? 1 : 0;
}

int int_arg(const char * flag, const char * v, int lo, int hi) {
    char * end = nullptr;
    const long x = std::strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || x < lo || x > hi) {
        std::fprintf(stderr, "error: invalid value '%s' for %s (%d..%d)\n", v, flag, lo, hi);
        std::exit(1);
    }
    return (int) x;
}

} // namespace

int main(int argc, char ** argv) {
    std::string prefix = "graph-dump";
    bool svg = false, use_sched = false;
    std::string model_path;
    int model_tokens = 32, ngl = 0, n_ctx = 512;  // -m mode only; the demo block has n_tokens
    profile_opts po;
    for (int i = 1; i < argc; ++i) {
        if (!std::strcmp(argv[i], "-o") && i + 1 < argc)
            prefix = argv[++i];
        else if (!std::strcmp(argv[i], "-m") && i + 1 < argc)
            model_path = argv[++i];
        else if (!std::strcmp(argv[i], "-n") && i + 1 < argc)
            model_tokens = int_arg("-n", argv[++i], 1, 1 << 16);
        else if (!std::strcmp(argv[i], "-ngl") && i + 1 < argc)
            ngl = int_arg("-ngl", argv[++i], 0, 1 << 20);
        else if (!std::strcmp(argv[i], "-c") && i + 1 < argc)
            n_ctx = int_arg("-c", argv[++i], 1, 1 << 24);
        else if (!std::strcmp(argv[i], "--svg"))
            svg = true;
        else if (!std::strcmp(argv[i], "--sched"))
            use_sched = true;
        else if (!std::strcmp(argv[i], "--profile"))
            po.on = true;
        else if (!std::strcmp(argv[i], "-d") && i + 1 < argc)
            po.depth = int_arg("-d", argv[++i], 0, 1 << 24);
        else if (!std::strcmp(argv[i], "-r") && i + 1 < argc)
            po.reps = int_arg("-r", argv[++i], 1, 1000);
        else if (!std::strcmp(argv[i], "-t") && i + 1 < argc)
            po.n_threads = int_arg("-t", argv[++i], 1, 1024);
        else if (!std::strcmp(argv[i], "--top") && i + 1 < argc)
            po.top = int_arg("--top", argv[++i], 1, 1 << 20);
        else if (!std::strcmp(argv[i], "-h") || !std::strcmp(argv[i], "--help")) {
            usage(argv[0]);
            return 0;
        } else {
            std::fprintf(stderr, "error: unknown or incomplete argument '%s' (see --help)\n", argv[i]);
            return 1;
        }
    }

    if (po.on && model_path.empty()) {
        std::fprintf(stderr, "error: --profile needs a model (-m)\n");
        return 1;
    }
    if (!model_path.empty()) return dump_model(model_path, model_tokens, ngl, n_ctx, prefix, svg, po);

    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 2);
    const size_t meta = ggml_tensor_overhead() * 256 + ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE);
    ggml_context * wctx = ggml_init({meta, nullptr, true});
    ggml_context * gctx = ggml_init({meta, nullptr, true});
    block_weights w = make_weights(wctx);
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, cpu);
    if (!wbuf) {
        std::fprintf(stderr, "error: cannot allocate the weights\n");
        return 1;
    }
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::mt19937 rng(42);
    for (ggml_tensor * t = ggml_get_first_tensor(wctx); t; t = ggml_get_next_tensor(wctx, t))
        fill_random(t, rng, 0.1f);

    ggml_tensor * x = ggml_new_tensor_2d(gctx, GGML_TYPE_F32, n_embd, n_tokens); // [n_embd, n_tokens]
    ggml_set_name(x, "inp_embd");
    ggml_set_input(x);
    ggml_tensor * pos = ggml_new_tensor_1d(gctx, GGML_TYPE_I32, n_tokens); // [n_tokens]
    ggml_set_name(pos, "inp_pos");
    ggml_set_input(pos);
    ggml_tensor * out = build_block(gctx, w, x, pos);
    ggml_set_output(out);
    ggml_cgraph * gf = ggml_new_graph(gctx);
    ggml_build_forward_expand(gf, out);

    ggml_gallocr_t galloc = nullptr;
    ggml_backend_sched_t sched = nullptr;
    bool ok;
    if (use_sched) {
        sched = ggml_backend_sched_new(&cpu, 1, GGML_DEFAULT_GRAPH_SIZE);
        ok = ggml_backend_sched_alloc_graph(sched, gf);
    } else {
        galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        ok = ggml_gallocr_alloc_graph(galloc, gf);
    }
    if (!ok) {
        std::fprintf(stderr, "error: graph allocation failed\n");
        return 1;
    }
    fill_random(x, rng, 1.0f);
    std::vector<int32_t> p(n_tokens);
    for (int i = 0; i < n_tokens; ++i)
        p[i] = i;
    ggml_backend_tensor_set(pos, p.data(), 0, p.size() * sizeof(int32_t));
    const ggml_status st =
        use_sched ? ggml_backend_sched_graph_compute(sched, gf) : ggml_backend_graph_compute(cpu, gf);
    if (st != GGML_STATUS_SUCCESS) {
        std::fprintf(stderr, "error: compute failed (%d)\n", (int)st);
        return 1;
    }

    ggml_dump_info info;
    info.galloc = galloc;
    info.sched = sched;
    info.title = "transformer block (CPU)";
    std::string err;
    if (!ggml_graph_dump_files(gf, &info, prefix, &err)) {
        std::fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    std::printf("%d nodes, %d leafs\n", ggml_graph_n_nodes(gf), ggml_graph_n_leafs(gf));
    if (galloc) {
        std::printf("compute buffer: %zu bytes planned (one buffer per tensor: %zu bytes)\n",
                    ggml_gallocr_get_buffer_size(galloc), ggml_gallocr_naive_size(gf, ggml_backend_cpu_buffer_type()));
    } else {
        std::printf("splits: %d, copies: %d, CPU compute buffer: %zu bytes\n", ggml_backend_sched_get_n_splits(sched),
                    ggml_backend_sched_get_n_copies(sched), ggml_backend_sched_get_buffer_size(sched, cpu));
    }
    std::printf("wrote %s.dot and %s.json\n", prefix.c_str(), prefix.c_str());
    if (svg && !write_svg(prefix)) return 1;
    ggml_backend_sched_free(sched);
    ggml_gallocr_free(galloc);
    ggml_backend_buffer_free(wbuf);
    ggml_free(gctx);
    ggml_free(wctx);
    ggml_backend_free(cpu);
    return 0;
}
