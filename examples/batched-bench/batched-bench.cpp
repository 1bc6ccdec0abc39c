// batched-bench - aggregate throughput of B sequences decoded together, like llama.cpp's llama-batched-bench.
//
//   batched-bench -m model.gguf [-npp 128,512] [-ntg 128] [-npl 1,8,32,64] [-ngl 99] [-fa 0|1] [-c N] [-b 512]
//                 [-t N] [-ctk T] [-ctv T] [-pps] [-o md|json] [--profile]
//
// For each prompt length PP, generation length TG and parallel count B: the cache is cleared, B prompts of PP
// random tokens are evaluated (one batch of B x PP tokens, split into n_batch graphs; with -pps one prompt is
// evaluated and shared by every sequence through llm_kv_seq_cp), then TG steps each decode one token of every
// sequence in one batch. Columns as llama-batched-bench: N_KV = B x (PP + TG) cells (PP once with -pps),
// T_PP / S_PP the prompt time and tokens/s (B x PP tokens, PP with -pps), T_TG / S_TG the generation time and
// aggregate tokens/s (B x TG tokens), T / S the total. One untimed warm-up run first.
// --profile: after each test's generation, 3 more steps of B tokens (their wall time), then 3 with per-node timing
// (ggml_backend_sched_set_profile): the median step's slowest nodes, the totals per op against the roofline and the
// time outside kernels, as bench --profile prints for one sequence (after the table; stderr with -o json). The
// context gets room for these steps.
#include "ggml-cost.h"
#include "llm.h"
#include "roofline.h"
#include "stats.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

namespace {

struct params {
    std::string model;
    std::vector<int> npp = {128, 512}, ntg = {128}, npl = {1, 2, 4, 8, 16, 32};
    int  n_ctx = 0;  // 0: the largest test needs
    int  n_batch = 512;
    int  n_gpu_layers = 99;
    llm_split_mode split_mode = LLM_SPLIT_LAYER;  // -sm none|layer|row
    std::vector<float> tensor_split;              // -ts 3,1
    int  n_threads = 0;
    bool flash_attn = false;
    bool shared_prompt = false;
    ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;
    std::string output = "md";
    bool profile = false;
};

void usage(const char * prog) {
    printf("usage: %s -m MODEL [options]\n"
           "  -npp N[,N..]  prompt tokens per sequence (default 128,512)\n"
           "  -ntg N[,N..]  generated tokens per sequence (default 128)\n"
           "  -npl N[,N..]  parallel sequences B (default 1,2,4,8,16,32; at most 64)\n"
           "  -pps          one prompt shared by every sequence (evaluated once)\n"
           "  -c N          context cells (default: the largest B x (PP + TG))\n"
           "  -b N          tokens per graph (default 512)\n"
           "  -ngl N        layers on the GPU (default 99)\n"
           "  -sm MODE      several GPUs: none (GPU 0 alone), layer (default; by -ts) or row (every layer split)\n"
           "  -ts N0,N1..   each GPU's share of the layers, or with -sm row of each layer (default: by free memory)\n"
           "  -t N          CPU threads (default: all cores)\n"
           "  -fa 0|1       flash attention (default 0)\n"
           "  -ctk T, -ctv T  KV cache types: f16 (default), f32, q8_0, q4_0\n"
           "  -o md|json    output format (default md)\n"
           "  --profile     per-node profile of a generation step of each test (B tokens, after its runs)\n",
           prog);
}

bool parse_list(const std::string & s, std::vector<int> & out, int lo) {
    out.clear();
    size_t i = 0;
    while (i <= s.size()) {
        const size_t j = std::min(s.find(',', i), s.size());
        const std::string t = s.substr(i, j - i);
        char * end = nullptr;
        const long v = strtol(t.c_str(), &end, 10);
        if (t.empty() || *end || v < lo || v > (1L << 20)) return false;
        out.push_back((int) v);
        i = j + 1;
    }
    return !out.empty();
}

bool parse(int argc, char ** argv, params & p, std::string * err) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(argv[0]);
            exit(0);
        }
        if (a == "-pps") {
            p.shared_prompt = true;
            continue;
        }
        if (a == "--profile") {
            p.profile = true;
            continue;
        }
        static const char * with_value[] = {"-m", "-npp", "-ntg", "-npl", "-c", "-b", "-ngl", "-t", "-fa", "-ctk",
                                            "-ctv", "-o", "--cache-type-k", "--cache-type-v", "-sm", "-ts"};
        if (std::find_if(std::begin(with_value), std::end(with_value), [&](const char * f) { return a == f; }) ==
            std::end(with_value)) {
            *err = "unknown argument: " + a;
            return false;
        }
        if (i + 1 >= argc) {
            *err = "missing value after " + a;
            return false;
        }
        const std::string v = argv[++i];
        std::vector<int> one;
        bool ok = true;
        if (a == "-m") p.model = v;
        else if (a == "-npp") ok = parse_list(v, p.npp, 1);
        else if (a == "-ntg") ok = parse_list(v, p.ntg, 0);
        else if (a == "-npl") ok = parse_list(v, p.npl, 1) && *std::max_element(p.npl.begin(), p.npl.end()) <= 64;
        else if (a == "-o") ok = v == "md" || v == "json", p.output = v;
        else if (a == "-ctk" || a == "--cache-type-k") ok = llm_kv_type_from_name(v, &p.type_k);
        else if (a == "-ctv" || a == "--cache-type-v") ok = llm_kv_type_from_name(v, &p.type_v);
        else if (a == "-sm") ok = llm_split_mode_from_name(v, &p.split_mode);
        else if (a == "-ts") ok = llm_tensor_split_parse(v, &p.tensor_split);
        else {
            ok = parse_list(v, one, 0) && one.size() == 1;
            if (ok) {
                if (a == "-c") p.n_ctx = one[0];
                else if (a == "-b") ok = (p.n_batch = one[0]) > 0;
                else if (a == "-ngl") p.n_gpu_layers = one[0];
                else if (a == "-t") p.n_threads = one[0];
                else if (a == "-fa") ok = one[0] <= 1, p.flash_attn = one[0] == 1;
            }
        }
        if (!ok) {
            *err = "bad value for " + a + ": '" + v + "'";
            return false;
        }
    }
    if (p.model.empty()) {
        *err = "no model (-m)";
        return false;
    }
    return true;
}

struct result {
    int pp, tg, b, n_kv;
    double t_pp, t_tg;
    bool has_profile = false;
    ggml_profile profile; // --profile: a generation step after the test's TG steps
};

constexpr int PROFILE_STEPS = 3; // --profile: steps timed whole, then as many with per-node timing

// One test: returns false with err on a failed decode. profile: the --profile steps after it.
bool run(llm_context * ctx, int n_vocab, int pp, int tg, int b, bool shared, bool profile, result * r,
         std::string * err) {
    std::mt19937 rng(42);
    llm_kv_seq_rm(ctx, -1, 0, -1);
    llm_batch batch;
    const int64_t t0 = ggml_time_us();
    for (int s = 0; s < (shared ? 1 : b); ++s) {
        for (int i = 0; i < pp; ++i) batch.add((int32_t) (rng() % n_vocab), i, s, i == pp - 1);
    }
    if (!llm_decode_batch(ctx, batch, err)) return false;
    if (shared) {
        for (int s = 1; s < b; ++s) llm_kv_seq_cp(ctx, 0, s, 0, -1);
    }
    const int64_t t1 = ggml_time_us();
    for (int i = 0; i < tg; ++i) {
        batch.clear();
        for (int s = 0; s < b; ++s) batch.add((int32_t) (rng() % n_vocab), pp + i, s, true);
        if (!llm_decode_batch(ctx, batch, err)) return false;
    }
    const int64_t t2 = ggml_time_us();
    r->pp = pp;
    r->tg = tg;
    r->b = b;
    r->n_kv = (shared ? pp : b * pp) + b * tg;
    r->t_pp = (t1 - t0) / 1e6;
    r->t_tg = (t2 - t1) / 1e6;
    r->has_profile = false;
    if (!profile) return true;
    int pos = pp + tg;
    auto step = [&] {
        batch.clear();
        for (int s = 0; s < b; ++s) batch.add((int32_t) (rng() % n_vocab), pos, s, true);
        ++pos;
        return llm_decode_batch(ctx, batch, err);
    };
    std::vector<double> walls;
    for (int k = 0; k < PROFILE_STEPS; ++k) {  // the walls first, back to back, as generation runs
        const int64_t t = ggml_time_us();
        if (!step()) return false;
        walls.push_back((double) (ggml_time_us() - t));
    }
    ggml_backend_sched_t sched = llm_get_sched(ctx);
    std::vector<ggml_profile> runs;
    for (int k = 0; k < PROFILE_STEPS; ++k) {
        ggml_backend_sched_set_profile(sched, true);
        const bool ok = step();
        ggml_backend_sched_set_profile(sched, false);
        if (!ok) return false;
        runs.push_back(*ggml_backend_sched_get_profile(sched));
    }
    r->profile = ggml_profile_median(runs);
    r->profile.step_us = median(walls);
    r->profile.step_what = "llm_decode_batch of " + std::to_string(b) + " token(s), profiling off, median of " +
                           std::to_string(PROFILE_STEPS);
    r->has_profile = true;
    return true;
}

}  // namespace

int main(int argc, char ** argv) {
    params p;
    std::string err;
    if (!parse(argc, argv, p, &err)) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    const int max_b = *std::max_element(p.npl.begin(), p.npl.end());
    int need = 0;
    for (int pp : p.npp) {
        for (int tg : p.ntg) {
            for (int b : p.npl)
                need = std::max(need, (p.shared_prompt ? pp : b * pp) + b * (tg + (p.profile ? 2 * PROFILE_STEPS : 0)));
        }
    }
    const int n_ctx = p.n_ctx > 0 ? p.n_ctx : need;
    if (n_ctx < need) {
        fprintf(stderr, "error: -c %d is smaller than the largest test needs (%d cells)\n", n_ctx, need);
        return 1;
    }

    llm_model_params mp;
    mp.n_gpu_layers = p.n_gpu_layers;
    mp.split_mode = p.split_mode;
    mp.tensor_split = p.tensor_split;
    llm_model * model = llm_model_load(p.model.c_str(), mp, &err);
    if (!model) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    llm_context_params cp;
    cp.n_ctx = n_ctx;
    cp.n_batch = p.n_batch;
    cp.n_threads = p.n_threads;
    cp.flash_attn = p.flash_attn;
    cp.type_k = p.type_k;
    cp.type_v = p.type_v;
    cp.n_seq_max = max_b;
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) {
        fprintf(stderr, "error: %s\n", err.c_str());
        llm_model_free(model);
        return 1;
    }
    const int n_vocab = llm_model_hparams(model).n_vocab;
    int rc = 0;
    result r;
    // warm-up: kernels loaded, buffers grown, graphs captured
    if (!run(ctx, n_vocab, std::min(p.npp[0], 32), 4, std::min(max_b, 4), false, false, &r, &err)) {
        fprintf(stderr, "error: %s\n", err.c_str());
        rc = 1;
    }
    std::vector<result> results;
    if (p.output == "md") {
        printf("model: %s, n_ctx %d, n_batch %d, flash_attn %d, K %s, V %s, -ngl %d%s\n\n",
               llm_model_desc(model).c_str(), n_ctx, p.n_batch, (int) p.flash_attn, ggml_type_name(p.type_k),
               ggml_type_name(p.type_v), p.n_gpu_layers, p.shared_prompt ? ", shared prompt" : "");
        printf("|    PP |     TG |    B |   N_KV |   T_PP s | S_PP t/s |   T_TG s | S_TG t/s |      T s |    S t/s |\n");
        printf("|-------|--------|------|--------|----------|----------|----------|----------|----------|----------|\n");
    }
    for (int pp : p.npp) {
        for (int tg : p.ntg) {
            for (int b : p.npl) {
                if (rc) break;
                if (!run(ctx, n_vocab, pp, tg, b, p.shared_prompt, p.profile, &r, &err)) {
                    fprintf(stderr, "error: PP %d, TG %d, B %d: %s\n", pp, tg, b, err.c_str());
                    rc = 1;
                    break;
                }
                results.push_back(r);
                const double n_pp = p.shared_prompt ? pp : (double) b * pp, n_tg = (double) b * tg;
                if (p.output == "md") {
                    printf("| %5d | %6d | %4d | %6d | %8.3f | %8.2f | %8.3f | %8.2f | %8.3f | %8.2f |\n", pp, tg, b,
                           r.n_kv, r.t_pp, n_pp / r.t_pp, r.t_tg, tg ? n_tg / r.t_tg : 0.0, r.t_pp + r.t_tg,
                           (n_pp + n_tg) / (r.t_pp + r.t_tg));
                    fflush(stdout);
                }
            }
        }
    }
    if (p.output == "json") {
        nlohmann::json j = nlohmann::json::array();
        for (const result & x : results) {
            const double n_pp = p.shared_prompt ? x.pp : (double) x.b * x.pp, n_tg = (double) x.b * x.tg;
            j.push_back({{"pp", x.pp}, {"tg", x.tg}, {"pl", x.b}, {"n_kv", x.n_kv}, {"t_pp", x.t_pp},
                         {"speed_pp", n_pp / x.t_pp}, {"t_tg", x.t_tg}, {"speed_tg", x.tg ? n_tg / x.t_tg : 0.0},
                         {"t", x.t_pp + x.t_tg}, {"speed", (n_pp + n_tg) / (x.t_pp + x.t_tg)}});
        }
        printf("%s\n", j.dump(2).c_str());
    }
    if (p.profile) {  // after the table (json: on stderr, stdout stays pure JSON)
        FILE * info = p.output == "json" ? stderr : stdout;
        roofline_cache roofs;
        for (result & x : results) {
            if (!x.has_profile) continue;
            roofline_apply(x.profile, p.n_threads, roofs);
            fprintf(info, "\n### profile: %s, PP %d, TG %d, B %d: a generation step at depth %d..%d\n\n%s\n%s\n%s",
                    llm_model_desc(model).c_str(), x.pp, x.tg, x.b, x.pp + x.tg, x.pp + x.tg + 2 * PROFILE_STEPS,
                    ggml_profile_table(x.profile, 20).c_str(), ggml_profile_op_totals(x.profile).c_str(),
                    ggml_profile_summary(x.profile).c_str());
        }
    }
    llm_context_free(ctx);
    llm_model_free(model);
    return rc;
}
