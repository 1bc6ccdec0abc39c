// bench - prompt processing and generation speed, like llama.cpp's llama-bench.
//
//   bench -m model.gguf [-m model2.gguf] [-p 512] [-n 128] [-d 0,4096] [-ngl 99] [-t 2] [-b 512] [-r 3]
//         [-fa 0|1|auto] [-ctk T] [-ctv T] [-mmp 0|1] [-nr 0|1] [-o md|json] [--no-roofline] [--probe-mib N]
//         [--profile]
//
// Tests per model and depth d: pp<p> (p random tokens in one decode, timed), tg<n> (n tokens decoded one at
// a time, timed); at depth d the cache is first filled with d tokens (untimed). Each test runs r times after
// one warm-up; t/s is reported as mean ± stddev over the repetitions.
//
// Roofline of a tg test: the t/s at which every weight byte (the model size column: the file's tensor bytes)
// is read once per token at the measured memory bandwidth (the KV cache at depth d is not counted), and the
// percent of it reached, per repetition, then mean ± stddev. CPU: the read bandwidth (4 interleaved streams
// with prefetch, as a 4-row mat-vec tile reads; examples/common/membw.h) on the bench's threads, measured
// just before and just after each repetition (a shared machine's bandwidth drifts within minutes) and
// averaged. CUDA: the device-to-device copy bandwidth (bytes read + written), measured once per process.
//
// --profile: after each test's timed repetitions (which it leaves as they are), r more steps of the test (at least
// 3; a tg token, a pp graph of min(p, b) tokens) with per-node timing (ggml_backend_sched_set_profile), alternating
// with steps timed without it; after the table, per test: the top nodes by time with GB/s and % of roofline
// (examples/common/roofline.h), the totals per op and the time outside kernels. Without --profile none of this
// runs: the timed loop is the same code, and profiling off costs one branch per graph in the scheduler and one
// per node in the CPU thread pool.
#include "ggml-cost.h"
#include "llm.h"
#include "membw.h"
#include "model-info.h"
#include "roofline.h"
#include "stats.h"
#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
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
    int  flash_attn = -1;  // -fa: 0, 1, or -1 (auto: on where llm_flash_attn_supported, as main's -fa auto)
    int  use_mmap = -1; // llm_model_params' default: the CPU weights read into memory where they fit
    bool use_repack = true;  // -nr 0|1
    llm_split_mode split_mode = LLM_SPLIT_LAYER;  // -sm none|layer|row
    std::vector<float> tensor_split;              // -ts 3,1
    ggml_type type_k = GGML_TYPE_F16, type_v = GGML_TYPE_F16;  // -ctk, -ctv
    bool roofline = true;
    int  probe_mib = 0;  // 0: membw_probe_bytes()
    bool profile = false;  // --profile
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
           "  -fa 0|1|auto  flash attention (default auto: on where the model's layers and cache types have it)\n"
           "  -ctk T, -ctv T  KV cache type of K / V: f16 (default), f32, q8_0, q4_0 (a quantized V needs -fa 1 or\n"
           "                auto)\n"
           "  -sm MODE      several GPUs: none (GPU 0 alone), layer (default; by -ts) or row (every layer split)\n"
           "  -ts N0,N1..   each GPU's share of the layers, or with -sm row of each layer (default: by free memory)\n"
           "  -mmp 0|1      1: the CPU weights in place from the file mapping, 0: read into memory (default: read\n"
           "                into memory where some layer runs on the CPU and the model takes at most half of the\n"
           "                available memory, else mapped)\n"
           "  -nr 0|1       1: no repacked CPU weights (q4_0, q4_K, q6_K in 8-row groups on AVX2; default 0)\n"
           "  -o md|json    output format (default md)\n"
           "  --no-roofline skip the bandwidth measurements (the roofline columns print -)\n"
           "  --probe-mib N CPU read-bandwidth probe buffer in MiB (default: 3x the L3, 256 to 1024)\n"
           "  --profile     per-node profile of each test's step after its runs: top nodes, totals per op,\n"
           "                time outside kernels, against the roofline (printed after the table)\n",
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
        if (a == "--no-roofline") {
            p.roofline = false;
            continue;
        }
        if (a == "--profile") {
            p.profile = true;
            continue;
        }
        if (a == "-ctk" || a == "-ctv" || a == "--cache-type-k" || a == "--cache-type-v") {
            if (i + 1 >= argc) {
                err = "missing value for " + a;
                return false;
            }
            const std::string v = argv[++i];
            if (!llm_kv_type_from_name(v, a == "-ctk" || a == "--cache-type-k" ? &p.type_k : &p.type_v)) {
                err = "unknown cache type '" + v + "' for " + a + " (" + llm_kv_type_names() + ")";
                return false;
            }
            continue;
        }
        static const char * known[] = {"-m", "-p", "-n", "-d", "-ngl", "-t", "-b", "-r", "-fa", "-mmp", "-nr", "-o",
                                       "--probe-mib", "-sm", "-ts"};
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
        else if (a == "-sm") ok = llm_split_mode_from_name(v, &p.split_mode);
        else if (a == "-ts") ok = llm_tensor_split_parse(v, &p.tensor_split);
        else if (a == "--probe-mib") ok = parse_int(v, p.probe_mib) && p.probe_mib > 0 && p.probe_mib <= (1 << 20);
        else if (a == "-fa") {
            int f = -1;
            ok = v == "auto" || (parse_int(v, f) && f <= 1);
            p.flash_attn = f;
        } else if (a == "-mmp") {
            int f;
            ok = parse_int(v, f) && f <= 1;
            p.use_mmap = f == 1 ? 1 : 0;
        } else if (a == "-nr") {
            int f;
            ok = parse_int(v, f) && f <= 1;
            p.use_repack = f == 0;
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
    if (ggml_is_quantized(p.type_v) && p.flash_attn == 0) {
        err = std::string("a quantized V cache (-ctv ") + ggml_type_name(p.type_v) +
              ") needs flash attention (-fa 1 or auto)";
        return false;
    }
    if (p.models.empty()) {
        err = "no model given (-m)";
        return false;
    }
    if (p.n_threads == 0) p.n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    return true;
}

double mean(const std::vector<double> & v) {
    double s = 0;
    for (double x : v) s += x;
    return v.empty() ? 0 : s / v.size();
}

double stddev(const std::vector<double> & v) {  // sample standard deviation; 0 for fewer than 2
    if (v.size() < 2) return 0;
    const double m = mean(v);
    double s = 0;
    for (double x : v) s += (x - m) * (x - m);
    return std::sqrt(s / (v.size() - 1));
}

struct result {
    std::string model_path, model_desc, backend, test;
    uint64_t size = 0, n_params = 0;
    int n_prompt = 0, n_gen = 0, depth = 0;
    bool flash_attn = false;  // as the test ran (-fa auto resolved)
    std::vector<double> samples_ns;
    // tg tests with a roofline: the bandwidth each repetition ran at (GB/s; CPU: the mean of the read
    // probes just before and just after it; CUDA: the one copy figure) and what was measured
    std::vector<double> bw_gbs;
    std::string bw_kind;
    bool has_profile = false;  // --profile: the step's per-node profile
    ggml_profile profile;

    std::vector<double> samples_ts() const {
        std::vector<double> v;
        for (double ns : samples_ns) v.push_back((n_prompt + n_gen) / (ns * 1e-9));
        return v;
    }
    double avg_ts() const { return mean(samples_ts()); }
    double stddev_ts() const { return stddev(samples_ts()); }
    bool has_roofline() const { return !bw_gbs.empty() && bw_gbs.size() == samples_ns.size() && size > 0; }
    // t/s if every weight byte were read once per token at the bandwidth of each repetition
    std::vector<double> samples_roofline_ts() const {
        std::vector<double> v;
        for (double bw : bw_gbs) v.push_back(bw * 1e9 / size);
        return v;
    }
    std::vector<double> samples_roofline_pct() const {
        std::vector<double> v, ts = samples_ts(), roof = samples_roofline_ts();
        for (size_t i = 0; i < ts.size() && i < roof.size(); ++i) v.push_back(100.0 * ts[i] / roof[i]);
        return v;
    }
};

// " 41.2 40.8 ..." (one decimal)
std::string fmt_list(const std::vector<double> & v) {
    std::string s;
    char b[32];
    for (double x : v) {
        snprintf(b, sizeof(b), " %.1f", x);
        s += b;
    }
    return s;
}

// "mean ± stddev", the mean alone when every sample is the same (one measurement), "-" for none
std::string fmt_mean_sd(const std::vector<double> & v) {
    if (v.empty()) return "-";
    char b[64];
    if (std::all_of(v.begin(), v.end(), [&](double x) { return x == v[0]; })) snprintf(b, sizeof(b), "%.2f", v[0]);
    else snprintf(b, sizeof(b), "%.2f ± %.2f", mean(v), stddev(v));
    return b;
}

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

// --profile, after a test's timed runs: max(3, r) steps where the context has room (a tg token, or a pp graph of
// min(p, b) tokens) without per-node timing (the step's wall time), then as many with it; tg steps follow each other
// in the cache, as generation does, a pp step is taken back out after each run. The profile's medians go to r.profile.
bool profile_test(llm_context * ctx, const bench_params & bp, int n_vocab, int n_prompt, int depth, std::mt19937 & rng,
                  result & r, std::string & err) {
    const int n = n_prompt > 0 ? std::min(n_prompt, bp.n_batch) : 1;
    llm_kv_remove(ctx, depth, llm_n_past(ctx));
    if (n == 1 && !decode_random(ctx, 1, n_vocab, rng, true, err)) return false;  // builds the decode graph
    const int room = llm_n_ctx(ctx) - llm_n_past(ctx);
    const int want = std::max(3, bp.reps);
    const int reps = std::min(want, n == 1 ? room / 2 : (room >= n ? want : 0));
    ggml_backend_sched_t sched = llm_get_sched(ctx);
    std::vector<double> walls;
    std::vector<ggml_profile> runs;
    // the walls first, back to back, as generation runs: a step right after a profiled one is not the steady state
    // (it looks its CUDA graph up again)
    for (int k = 0; k < reps; ++k) {
        const int64_t t0 = ggml_time_us();
        if (!decode_random(ctx, n, n_vocab, rng, n == 1, err)) return false;
        walls.push_back((double) (ggml_time_us() - t0));
        if (n > 1) llm_kv_remove(ctx, depth, llm_n_past(ctx));
    }
    for (int k = 0; k < reps; ++k) {
        ggml_backend_sched_set_profile(sched, true);
        const bool ok = decode_random(ctx, n, n_vocab, rng, n == 1, err);
        ggml_backend_sched_set_profile(sched, false);
        if (!ok) return false;
        runs.push_back(*ggml_backend_sched_get_profile(sched));
        if (n > 1) llm_kv_remove(ctx, depth, llm_n_past(ctx));
    }
    if (runs.empty()) {
        fprintf(stderr, "%s: no room in the context for a profiled step\n", r.test.c_str());
        return true;
    }
    r.profile = ggml_profile_median(runs);
    r.profile.step_us = median(walls);
    r.profile.step_what = "llm_decode of " + std::to_string(n) + " token(s), profiling off, median of " +
                          std::to_string(runs.size());
    r.has_profile = true;
    return true;
}

// One test (pp or tg at a depth): a fresh context, a warm-up, then reps timed runs. With a probe, its read
// bandwidth is measured before the first run and after each (r.bw_gbs: the mean of the two around a run).
bool run_test(llm_model * model, const bench_params & bp, int n_prompt, int n_gen, int depth,
              const membw_probe * probe, result & r, std::string & err) {
    const int n_vocab = llm_model_hparams(model).n_vocab;
    llm_context_params cp;
    cp.n_ctx = depth + n_prompt + n_gen + 1;
    // a pure decode test plans its compute buffer for one token (what a tg step needs)
    cp.n_batch = n_prompt == 0 && depth == 0 ? 1 : bp.n_batch;
    cp.n_threads = bp.n_threads;
    cp.flash_attn = bp.flash_attn == 1 || (bp.flash_attn < 0 && llm_flash_attn_supported(model, bp.type_k, bp.type_v));
    r.flash_attn = cp.flash_attn;
    cp.type_k = bp.type_k;
    cp.type_v = bp.type_v;
    llm_context * ctx = llm_context_new(model, cp, &err);
    if (!ctx) return false;
    const llm_perf mem = llm_get_perf(ctx);
    fprintf(stderr,
            "%s: KV cache %.2f MiB (n_ctx %d; K %s %.2f MiB, V %s %.2f MiB), compute buffers %.3f MiB (planned for %d "
            "tokens)\n",
            n_prompt > 0 ? ("pp" + std::to_string(n_prompt)).c_str() : ("tg" + std::to_string(n_gen)).c_str(),
            mem.kv_bytes / 1048576.0, cp.n_ctx, ggml_type_name(cp.type_k), mem.kv_k_bytes / 1048576.0,
            ggml_type_name(cp.type_v), mem.kv_v_bytes / 1048576.0, mem.compute_buffer_bytes / 1048576.0,
            std::min(cp.n_batch, cp.n_ctx));
    std::mt19937 rng(1234);
    bool ok = true;
    if (depth > 0) ok = decode_random(ctx, depth, n_vocab, rng, false, err);  // untimed fill
    // warm-up: touch every weight once (pages of the mapping, caches)
    ok = ok && decode_random(ctx, n_prompt > 0 ? std::min(n_prompt, bp.n_batch) : 1, n_vocab, rng, false, err);
    std::vector<double> probes;  // GB/s: before the first run, then after each
    if (ok && probe) probes.push_back(probe->read_gbs(bp.n_threads));
    for (int rep = 0; ok && rep < bp.reps; ++rep) {
        llm_kv_remove(ctx, depth, llm_n_past(ctx));  // back to the depth
        const int64_t t0 = ggml_time_us();
        ok = n_prompt > 0 ? decode_random(ctx, n_prompt, n_vocab, rng, false, err)
                          : decode_random(ctx, n_gen, n_vocab, rng, true, err);
        r.samples_ns.push_back((ggml_time_us() - t0) * 1e3);
        if (probe) {
            probes.push_back(probe->read_gbs(bp.n_threads));
            r.bw_gbs.push_back(0.5 * (probes[rep] + probes[rep + 1]));
        }
    }
    if (ok && probe) {
        fprintf(stderr, "%s: read bandwidth before the first run and after each:%s GB/s; roofline reached:%s %%\n",
                r.test.c_str(), fmt_list(probes).c_str(), fmt_list(r.samples_roofline_pct()).c_str());
    }
    if (ok && bp.profile) ok = profile_test(ctx, bp, n_vocab, n_prompt, depth, rng, r, err);
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
    FILE * info = md ? stdout : stderr;  // lines above the table; json output stays pure JSON

    // the roofline's bandwidth: the CPU's read bandwidth around each tg run, or the GPU's copy bandwidth once;
    // set up after the first model loaded (a bad file costs no measurement), with the lines above the table
    const bool any_tg = std::any_of(bp.n_gen.begin(), bp.n_gen.end(), [](int n) { return n > 0; });
    std::unique_ptr<membw_probe> probe;
    double gpu_bw_gbs = 0;
    bool header_done = false;
    auto begin_output = [&](bool gpu) {
        if (header_done) return;
        header_done = true;
        if (bp.roofline && any_tg && gpu) {
#ifdef GGML_USE_CUDA
            const int device = llm_model_params().main_gpu;
            gpu_bw_gbs = ggml_backend_cuda_copy_bandwidth_gbs(device);
            if (gpu_bw_gbs > 0) {
                fprintf(info, "roofline of CUDA tg rows: model size / %.1f GB/s, the device-to-device copy bandwidth "
                              "of CUDA%d (cudaMemcpy, bytes read + written, median)\n\n",
                        gpu_bw_gbs, device);
            } else {
                fprintf(stderr, "warning: CUDA%d copy bandwidth not measured: no roofline\n", device);
            }
#endif
        } else if (bp.roofline && any_tg) {
            probe = std::make_unique<membw_probe>(bp.probe_mib > 0 ? size_t(bp.probe_mib) << 20 : membw_probe_bytes());
            fprintf(info, "roofline of CPU tg rows: model size / read bandwidth (4 streams + prefetch, %d threads, "
                          "%zu MiB), the mean of the probes just before and just after each repetition\n\n",
                    bp.n_threads, probe->bytes() >> 20);
        }
        if (md) {
            printf("| %-28s | %10s | %10s | %-7s | %3s | %7s | %2s | %16s | %20s | %20s | %14s |\n", "model", "size",
                   "params", "backend", "ngl", "threads", "fa", "test", "t/s", "roofline t/s", "% roofline");
            printf("| %.28s | %.10s | %.10s | %.7s | %.3s | %.7s | %.2s | %.16s | %.20s | %.20s | %.14s |\n",
                   "------------------------------", "---------------:", "---------------:", "--------", "--:",
                   "------:", "-:", "---------------:", "-------------------:", "-------------------:",
                   "-------------:");
        }
        fflush(info);
    };
    for (const std::string & path : bp.models) {
        llm_model_params mp;
        mp.n_gpu_layers = bp.n_gpu_layers;
        mp.split_mode = bp.split_mode;
        mp.tensor_split = bp.tensor_split;
        mp.use_mmap = bp.use_mmap;
        mp.use_repack = bp.use_repack;
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
        begin_output(gpu);  // every model runs where the first does (same -ngl)
        if (gpu && gpu_bw_gbs > 0 && bp.n_gpu_layers <= llm_model_hparams(model).n_layer) {
            fprintf(stderr, "note: partial offload (-ngl %d of %d layers + output): the roofline counts every weight "
                            "at the GPU's bandwidth (an upper bound)\n",
                    bp.n_gpu_layers, llm_model_hparams(model).n_layer);
        }
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
                const bool cpu_roofline = n > 0 && !gpu && probe;
                if (!run_test(model, bp, p, n, d, cpu_roofline ? probe.get() : nullptr, r, err)) {
                    fprintf(stderr, "error: %s: %s: %s\n", path.c_str(), r.test.c_str(), err.c_str());
                    llm_model_free(model);
                    return 1;
                }
                if (cpu_roofline) r.bw_kind = "cpu_read_4streams";
                if (n > 0 && gpu && gpu_bw_gbs > 0) {
                    r.bw_kind = "cuda_d2d_copy";
                    r.bw_gbs.assign(r.samples_ns.size(), gpu_bw_gbs);
                }
                if (md) {
                    char ts[64];
                    snprintf(ts, sizeof(ts), "%.2f ± %.2f", r.avg_ts(), r.stddev_ts());
                    const bool roof = r.has_roofline();
                    printf("| %-28s | %10s | %10s | %-7s | %3d | %7d | %2d | %16s | %20s | %20s | %14s |\n",
                           r.model_desc.c_str(), fmt_size(r.size).c_str(), fmt_params(r.n_params).c_str(),
                           r.backend.c_str(), gpu ? bp.n_gpu_layers : 0, bp.n_threads, r.flash_attn ? 1 : 0,
                           r.test.c_str(), ts, roof ? fmt_mean_sd(r.samples_roofline_ts()).c_str() : "-",
                           roof ? fmt_mean_sd(r.samples_roofline_pct()).c_str() : "-");
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
            nlohmann::json row = {{"model_filename", r.model_path}, {"model_type", r.model_desc},
                                  {"model_size", r.size}, {"model_n_params", r.n_params}, {"backend", r.backend},
                                  {"n_batch", bp.n_batch}, {"n_threads", bp.n_threads},
                                  {"n_gpu_layers", bp.n_gpu_layers}, {"flash_attn", r.flash_attn},
                                  {"type_k", ggml_type_name(bp.type_k)}, {"type_v", ggml_type_name(bp.type_v)},
                                  {"test", r.test}, {"n_prompt", r.n_prompt}, {"n_gen", r.n_gen},
                                  {"n_depth", r.depth}, {"avg_ns", mean(r.samples_ns)}, {"avg_ts", r.avg_ts()},
                                  {"stddev_ts", r.stddev_ts()}, {"samples_ns", r.samples_ns},
                                  {"samples_ts", r.samples_ts()}};
            // the roofline's fields: null for pp tests and without a measurement
            const std::vector<double> rts = r.samples_roofline_ts(), pct = r.samples_roofline_pct();
            const nlohmann::json roofline = {{"bw_kind", r.bw_kind},
                                             {"samples_bw_gbs", r.bw_gbs},
                                             {"avg_roofline_ts", mean(rts)},
                                             {"stddev_roofline_ts", stddev(rts)},
                                             {"samples_roofline_ts", rts},
                                             {"avg_roofline_pct", mean(pct)},
                                             {"stddev_roofline_pct", stddev(pct)},
                                             {"samples_roofline_pct", pct}};
            for (const auto & [key, value] : roofline.items()) row[key] = r.has_roofline() ? value : nullptr;
            out.push_back(std::move(row));
        }
        printf("%s\n", out.dump(2).c_str());
    }
    if (bp.profile) {  // after the table (json: on stderr, stdout stays pure JSON)
        roofline_cache roofs;
        for (result & r : results) {
            if (!r.has_profile) continue;
            roofline_apply(r.profile, bp.n_threads, roofs);
            fprintf(info, "\n### profile: %s, %s (one step; %zu timed records)\n\n%s\n%s\n%s", r.model_desc.c_str(),
                    r.test.c_str(), r.profile.nodes.size(), ggml_profile_table(r.profile, 20).c_str(),
                    ggml_profile_op_totals(r.profile).c_str(), ggml_profile_summary(r.profile).c_str());
        }
    }
    return 0;
}
