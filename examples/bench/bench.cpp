// bench - prompt processing and generation speed, like llama.cpp's llama-bench.
//
//   bench -m model.gguf [-m model2.gguf] [-p 512] [-n 128] [-d 0,4096] [-ngl 99] [-t 2] [-b 512] [-r 3]
//         [-fa 0|1] [-mmp 0|1] [-o md|json]
//
// Tests per model and depth d: pp<p> (p random tokens in one decode, timed), tg<n> (n tokens decoded one at
// a time, timed); at depth d the cache is first filled with d tokens (untimed). Each test runs r times after
// one warm-up; t/s is reported as mean ± stddev over the repetitions.
#include "llm.h"
#include "model-info.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

struct bench_params {
    std::vector<std::string> models;
    std::vector<int> n_prompt = {512};
    std::vector<int> n_gen = {128};
    std::vector<int> depth = {0};
    int  n_gpu_layers = 99;
    int  n_threads = 0;
    int  n_batch = 512;
    int  reps = 3;
    bool flash_attn = false;
    bool use_mmap = true;
    std::string output = "md";
};

void usage(const char * prog) {
    printf("usage: %s -m MODEL [-m MODEL2 ...] [options]\n"
           "  -p N[,N..]    prompt lengths (default 512; 0: none)\n"
           "  -n N[,N..]    generated tokens (default 128; 0: none)\n"
           "  -d N[,N..]    cache depth before each test (default 0)\n"
           "  -ngl N        layers on the GPU (default 99)\n"
           "  -t N          CPU threads (default: all cores)\n"
           "  -b N          batch size (default 512)\n"
           "  -r N          repetitions (default 3)\n"
           "  -fa 0|1       flash attention (default 0)\n"
           "  -mmp 0|1      use the weights in place from the file mapping (default 1)\n"
           "  -o md|json    output format (default md)\n",
           prog);
}

bool parse_int(const std::string & s, int & out) {
    char * end = nullptr;
    const long v = strtol(s.c_str(), &end, 10);
    if (s.empty() || *end || v < 0 || v > (1L << 30)) return false;
    out = (int) v;
    return true;
}

bool parse_list(const std::string & s, std::vector<int> & out) {
    out.clear();
    size_t i = 0;
    while (i <= s.size()) {
        const size_t j = s.find(',', i);
        const std::string item = s.substr(i, j == std::string::npos ? std::string::npos : j - i);
        int v;
        if (!parse_int(item, v)) return false;
        out.push_back(v);
        if (j == std::string::npos) break;
        i = j + 1;
    }
    return !out.empty();
}

bool parse_args(int argc, char ** argv, bench_params & p, std::string & err) {
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "-h" || a == "--help") {
            usage(argv[0]);
            exit(0);
        }
        static const char * known[] = {"-m", "-p", "-n", "-d", "-ngl", "-t", "-b", "-r", "-fa", "-mmp", "-o"};
        if (std::find(std::begin(known), std::end(known), a) == std::end(known)) {
            err = "unknown argument " + a;
            return false;
        }
        if (i + 1 >= argc) {
            err = "missing value for " + a;
            return false;
        }
        const std::string v = argv[++i];
        bool ok = true;
        if (a == "-m") p.models.push_back(v);
        else if (a == "-p") ok = parse_list(v, p.n_prompt);
        else if (a == "-n") ok = parse_list(v, p.n_gen);
        else if (a == "-d") ok = parse_list(v, p.depth);
        else if (a == "-ngl") ok = parse_int(v, p.n_gpu_layers);
        else if (a == "-t") ok = parse_int(v, p.n_threads) && p.n_threads > 0;
        else if (a == "-b") ok = parse_int(v, p.n_batch) && p.n_batch > 0;
        else if (a == "-r") ok = parse_int(v, p.reps) && p.reps > 0;
        else if (a == "-fa") {
            int f;
            ok = parse_int(v, f) && f <= 1;
            p.flash_attn = f == 1;
        } else if (a == "-mmp") {
            int f;
            ok = parse_int(v, f) && f <= 1;
            p.use_mmap = f == 1;
        } else if (a == "-o") {
            ok = v == "md" || v == "json";
            p.output = v;
        } else {
            err = "unknown argument " + a;
            return false;
        }
        if (!ok) {
            err = "invalid value '" + v + "' for " + a;
            return false;
        }
    }
    if (p.models.empty()) {
        err = "no model given (-m)";
        return false;
    }
    if (p.n_threads == 0) p.n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    return true;
}

struct result {
    std::string model_path, model_desc, backend, test;
    uint64_t size = 0, n_params = 0;
    int n_prompt = 0, n_gen = 0, depth = 0;
    std::vector<double> samples_ns;
    double avg_ts() const {
        double s = 0;
        for (double ns : samples_ns) s += (n_prompt + n_gen) / (ns * 1e-9);
        return s / samples_ns.size();
    }
    double stddev_ts() const {
        if (samples_ns.size() < 2) return 0;
        const double m = avg_ts();
        double s = 0;
        for (double ns : samples_ns) {
            const double ts = (n_prompt + n_gen) / (ns * 1e-9);
            s += (ts - m) * (ts - m);
        }
        return std::sqrt(s / (samples_ns.size() - 1));
    }
};

bool decode_random(llm_context * ctx, int n, int n_vocab, std::mt19937 & rng, bool one_by_one, std::string & err) {
    std::vector<int32_t> toks(n);
    for (auto & t : toks) t = (int32_t) (rng() % n_vocab);
    if (!one_by_one) return llm_decode(ctx, toks.data(), n, &err);
    for (int i = 0; i < n; ++i) {
        if (!llm_decode(ctx, &toks[i], 1, &err)) return false;
        (void) llm_argmax_last(ctx);
    }
    return true;
}

// One test (pp or tg at a depth): a fresh context, a warm-up, then reps timed runs.
bool run_test(llm_model * model, const bench_params & bp, int n_prompt, int n_gen, int depth, result & r,
              std::string & err) {
    const int n_vocab = llm_model_hparams(model).n_vocab;
    llm_context_params cp;
    cp.n_ctx = depth + n_prompt + n_gen + 1;
    // a pure decode test plans its compute buffer for one token (what a tg step needs)
    cp.n_batch = n_prompt == 0 && depth == 0 ? 1 : bp.n_batch;
    cp.n_threads = bp.n_threads;
    cp.flash_attn = bp.flash_attn;
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) return false;
    const llm_perf mem = llm_get_perf(ctx);
    fprintf(stderr, "%s: KV cache %.2f MiB (n_ctx %d), compute buffers %.3f MiB (planned for %d tokens)\n",
            n_prompt > 0 ? ("pp" + std::to_string(n_prompt)).c_str() : ("tg" + std::to_string(n_gen)).c_str(),
            mem.kv_bytes / 1048576.0, cp.n_ctx, mem.compute_buffer_bytes / 1048576.0, std::min(cp.n_batch, cp.n_ctx));
    std::mt19937 rng(1234);
    bool ok = true;
    if (depth > 0) ok = decode_random(ctx, depth, n_vocab, rng, false, err);  // untimed fill
    // warm-up: touch every weight once (pages of the mapping, caches)
    ok = ok && decode_random(ctx, n_prompt > 0 ? std::min(n_prompt, bp.n_batch) : 1, n_vocab, rng, false, err);
    for (int rep = 0; ok && rep < bp.reps; ++rep) {
        llm_kv_remove(ctx, depth, llm_n_past(ctx));  // back to the depth
        const int64_t t0 = ggml_time_us();
        ok = n_prompt > 0 ? decode_random(ctx, n_prompt, n_vocab, rng, false, err)
                          : decode_random(ctx, n_gen, n_vocab, rng, true, err);
        r.samples_ns.push_back((ggml_time_us() - t0) * 1e3);
    }
    llm_context_free(ctx);
    return ok;
}

std::string fmt_size(uint64_t bytes) {
    char b[64];
    if (bytes >= (1ull << 30)) snprintf(b, sizeof(b), "%.2f GiB", bytes / (double) (1ull << 30));
    else snprintf(b, sizeof(b), "%.2f MiB", bytes / (double) (1ull << 20));
    return b;
}

std::string fmt_params(uint64_t n) {
    char b[64];
    if (n >= 1000000000ull) snprintf(b, sizeof(b), "%.2f B", n / 1e9);
    else snprintf(b, sizeof(b), "%.2f M", n / 1e6);
    return b;
}

}  // namespace

int main(int argc, char ** argv) {
    bench_params bp;
    std::string err;
    if (!parse_args(argc, argv, bp, err)) {
        fprintf(stderr, "error: %s\n", err.c_str());
        return 1;
    }
    ggml_log_set([](ggml_log_level level, const char * text, void *) {
        if (level >= GGML_LOG_LEVEL_WARN) fputs(text, stderr);
    }, nullptr);

    std::vector<result> results;
    const bool md = bp.output == "md";
    if (md) {
        printf("| %-28s | %10s | %10s | %-7s | %3s | %7s | %2s | %16s | %20s |\n", "model", "size", "params", "backend",
               "ngl", "threads", "fa", "test", "t/s");
        printf("| %.28s | %.10s | %.10s | %.7s | %.3s | %.7s | %.2s | %.16s | %.20s |\n", "------------------------------",
               "---------------:", "---------------:", "--------", "--:", "------:", "-:", "---------------:",
               "-------------------:");
        fflush(stdout);
    }
    for (const std::string & path : bp.models) {
        llm_model_params mp;
        mp.n_gpu_layers = bp.n_gpu_layers;
        mp.use_mmap = bp.use_mmap;
        llm_model * model = llm_model_load(path.c_str(), mp, &err);
        if (!model) {
            fprintf(stderr, "error: %s\n", err.c_str());
            return 1;
        }
        bool gpu = false;
        for (auto & [name, size] : llm_model_buffer_sizes(model)) gpu = gpu || name.rfind("CUDA", 0) == 0;
        const std::string desc = llm_model_desc_ftype(model);  // "llama 6.7B Q4_K - Medium", as llama-bench
        fprintf(stderr, "%s: %s\n", path.c_str(), desc.c_str());
        llm_type_summary_print(stderr, llm_model_type_summary(model), "  ");
        for (int d : bp.depth) {
            std::vector<std::pair<int, int>> tests;
            for (int p : bp.n_prompt) if (p > 0) tests.push_back({p, 0});
            for (int n : bp.n_gen) if (n > 0) tests.push_back({0, n});
            for (auto [p, n] : tests) {
                result r;
                r.model_path = path;
                r.model_desc = desc;
                r.backend = gpu ? "CUDA" : "CPU";
                r.size = llm_model_size(model);
                r.n_params = llm_model_n_params(model);
                r.n_prompt = p;
                r.n_gen = n;
                r.depth = d;
                r.test = p > 0 ? "pp" + std::to_string(p) : "tg" + std::to_string(n);
                if (d > 0) r.test += " @ d" + std::to_string(d);
                if (!run_test(model, bp, p, n, d, r, err)) {
                    fprintf(stderr, "error: %s: %s: %s\n", path.c_str(), r.test.c_str(), err.c_str());
                    llm_model_free(model);
                    return 1;
                }
                if (md) {
                    char ts[64];
                    snprintf(ts, sizeof(ts), "%.2f ± %.2f", r.avg_ts(), r.stddev_ts());
                    printf("| %-28s | %10s | %10s | %-7s | %3d | %7d | %2d | %16s | %20s |\n", r.model_desc.c_str(),
                           fmt_size(r.size).c_str(), fmt_params(r.n_params).c_str(), r.backend.c_str(),
                           gpu ? bp.n_gpu_layers : 0, bp.n_threads, bp.flash_attn ? 1 : 0, r.test.c_str(), ts);
                    fflush(stdout);
                }
                results.push_back(std::move(r));
            }
        }
        llm_model_free(model);
    }
    if (!md) {
        nlohmann::json out = nlohmann::json::array();
        for (const result & r : results) {
            double avg_ns = 0;
            std::vector<double> samples_ts;
            for (double ns : r.samples_ns) {
                avg_ns += ns / r.samples_ns.size();
                samples_ts.push_back((r.n_prompt + r.n_gen) / (ns * 1e-9));
            }
            out.push_back({{"model_filename", r.model_path}, {"model_type", r.model_desc}, {"model_size", r.size},
                           {"model_n_params", r.n_params}, {"backend", r.backend}, {"n_batch", bp.n_batch},
                           {"n_threads", bp.n_threads}, {"n_gpu_layers", bp.n_gpu_layers},
                           {"flash_attn", bp.flash_attn}, {"test", r.test}, {"n_prompt", r.n_prompt},
                           {"n_gen", r.n_gen}, {"n_depth", r.depth}, {"avg_ns", avg_ns},
                           {"avg_ts", r.avg_ts()}, {"stddev_ts", r.stddev_ts()}, {"samples_ns", r.samples_ns},
                           {"samples_ts", samples_ts}});
        }
        printf("%s\n", out.dump(2).c_str());
    }
    return 0;
}
