// bench-matvec - CPU mat-vec throughput of any weight type against this machine's memory
// bandwidth, and prompt-style mat-mat GFLOP/s. Prints markdown tables.
//
//   bench-matvec [--runs N] [--total-mb MB] [--threads 1,2] [--types q8_0,q4_0,q4_K,...]
//                [--shapes 4096x4096,11008x4096 | tinyllama] [--matmat-n 64] [--no-bw] [--repack off|on|both]
//
// --types: f32, f16 and every quantized weight type (q4_0, q4_1, q5_0, q5_1, q8_0, q2_K .. q6_K);
// the weights are random normal floats quantized with the type's reference from_float_ref (a type
// whose traits are not implemented yet is reported and skipped). --shapes: M x K of the weight
// matrix ([K, M] in ggml order); "tinyllama" = TinyLlama-1.1B's 2048x2048, 5632x2048, 2048x5632.
// --matmat-n: N of the mat-mat run (M x K = the first shape; 0 skips it).
// --repack: the mat-vec weights in a CPU_REPACK buffer (cpu/repack.h: q4_0, q4_K, q6_K in 8-row groups; other types stay
// plain there); "both": each row plain, then repacked (weights column "q4_0/r8"), alternating.
//
// Weights are read once per token in decode, so mat-vec is memory bound: the figure of merit is
// GB/s of weight bytes read. Several weight copies are rotated through (total >= --total-mb,
// default 3x the L3 size capped at 1536 MB) so that no run is served from cache. Each run is one
// graph of mul_mat nodes (one per copy) computed with ggml_graph_compute_with_ctx; the median
// run is reported. Memory bandwidth (examples/common/membw.h): a large memcpy (read + write bytes
// counted) and a read-only sum reduction (one stream, and 4 interleaved streams with software
// prefetch, as a 4-row tile reads), on the same thread counts. The "read BW" column of the mat-vec
// table is the 4-stream read measured in alternation with that row's runs (median): the shared
// machine's bandwidth drifts.
#include "ggml-backend.h"
#include "ggml.h"
#include "membw.h"
#include "stats.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

struct mv_result {
    double ms, gbs, max_rel_err;
    double read_gbs; // membw_probe median over runs alternating with the kernel's (0: no probe)
};

// The type the CPU mul_mat quantizes activations to for weights of `type` (the reference
// below rounds x the same way): q8_1 for 32-blocks, q8_K for 256-blocks, none for f32/f16.
ggml_type activation_type(ggml_type type) {
    if (!ggml_is_quantized(type)) return GGML_TYPE_F32;
    return ggml_blck_size(type) == 256 ? GGML_TYPE_Q8_K : GGML_TYPE_Q8_1;
}

// Whether the reference code can make weights of this type (and its activations).
bool type_available(ggml_type type, std::string & why) {
    const ggml_type_traits * t = ggml_get_type_traits(type);
    if (!t->supported || !t->from_float_ref || !t->to_float) {
        why = std::string(ggml_type_name(type)) + ": reference quantize/dequantize not implemented";
        return false;
    }
    const ggml_type at = activation_type(type);
    const ggml_type_traits * ta = ggml_get_type_traits(at);
    if (at != GGML_TYPE_F32 && (!ta->supported || !ta->from_float_ref || !ta->to_float)) {
        why = std::string(ggml_type_name(type)) + ": activation type " + ggml_type_name(at) + " not implemented";
        return false;
    }
    return true;
}

// M x K random normal weights of `type` (rows of ggml_row_size(type, K) bytes), and the same
// values dequantized.
std::vector<uint8_t> make_weights(ggml_type type, int64_t M, int64_t K, uint32_t seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(K * M);
    for (auto & v : wf)
        v = nd(rng);
    std::vector<uint8_t> w(ggml_row_size(type, K) * M);
    ggml_get_type_traits(type)->from_float_ref(wf.data(), w.data(), K * M);
    return w;
}

// x rounded as the kernel sees it: quantized to the activation type and back.
std::vector<float> round_activations(ggml_type type, const std::vector<float> & xf) {
    const ggml_type at = activation_type(type);
    if (at == GGML_TYPE_F32) return xf;
    const int64_t K = (int64_t)xf.size();
    std::vector<uint8_t> xq(ggml_row_size(at, K));
    std::vector<float> xr(K);
    ggml_get_type_traits(at)->from_float_ref(xf.data(), xq.data(), K);
    ggml_get_type_traits(at)->to_float(xq.data(), xr.data(), K);
    return xr;
}

// y = W x for `copies` copies of W [K, M] (ggml: a [K, M], b [K, 1]).
mv_result bench_matvec(ggml_type type, int64_t M, int64_t K, int copies, int nth, int runs, const membw_probe * probe,
                       bool repack) {
    const size_t wbytes = ggml_row_size(type, K) * M;
    ggml_context * ctx =
        ggml_init({ggml_tensor_overhead() * (3 * copies + 8) + ggml_graph_overhead_custom(4 * copies + 16) + (1 << 20),
                   nullptr, true});
    ggml_context * wctx = ggml_init({ggml_tensor_overhead() * (copies + 1), nullptr, true}); // repack: the weights
    std::vector<void *> bufs;
    auto alloc = [&](ggml_tensor * t) {
        void * p = std::aligned_alloc(64, (ggml_nbytes(t) + 63) / 64 * 64);
        GGML_ASSERT(p);
        bufs.push_back(p);
        t->data = p;
    };
    // one random matrix, copied into every copy (copies differ only in address)
    const std::vector<uint8_t> wq = make_weights(type, M, K, 1);
    std::mt19937 rng(3);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> xf(K);
    for (auto & v : xf)
        v = nd(rng);

    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K);
    alloc(x);
    std::memcpy(x->data, xf.data(), K * sizeof(float));
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 4 * copies + 16);
    std::vector<ggml_tensor *> outs;
    std::vector<ggml_tensor *> ws;
    for (int c = 0; c < copies; ++c) {
        ggml_tensor * w = ggml_new_tensor_2d(repack ? wctx : ctx, type, K, M);
        GGML_ASSERT(ggml_nbytes(w) == wbytes);
        if (!repack) {
            alloc(w);
            std::memcpy(w->data, wq.data(), wbytes);
        }
        ws.push_back(w);
    }
    ggml_backend_buffer_t wbuf = nullptr;
    if (repack) {
        wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ggml_backend_cpu_repack_buffer_type());
        GGML_ASSERT(wbuf);
        for (ggml_tensor * w : ws)
            ggml_backend_tensor_set(w, wq.data(), 0, wbytes);
    }
    for (ggml_tensor * w : ws) {
        ggml_tensor * y = ggml_mul_mat(ctx, w, x);
        alloc(y);
        outs.push_back(y);
        ggml_build_forward_expand(gf, y);
    }
    // sanity: sampled outputs vs a double loop over the dequantized weights and activations
    ggml_graph_compute_with_ctx(ctx, gf, nth);
    std::vector<float> wrow(K);
    double max_rel = 0;
    const std::vector<float> xr = round_activations(type, xf);
    for (int64_t m = 0; m < M; m += 97) {
        ggml_get_type_traits(type)->to_float(wq.data() + m * ggml_row_size(type, K), wrow.data(), K);
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
            ref += (double)wrow[k] * xr[k];
            mag += std::fabs((double)wrow[k] * xr[k]);
        }
        for (int c = 0; c < copies; c += std::max(1, copies / 3)) {
            max_rel = std::max(max_rel, std::fabs(((float *)outs[c]->data)[m] - ref) / mag);
        }
    }
    std::vector<double> t, bw;
    for (int r = 0; r < runs; ++r) {
        const double t0 = now_s();
        ggml_graph_compute_with_ctx(ctx, gf, nth);
        t.push_back(now_s() - t0);
        if (probe) bw.push_back(probe->read_gbs(nth));
    }
    const double tm = median(t);
    for (void * p : bufs)
        std::free(p);
    if (wbuf) ggml_backend_buffer_free(wbuf);
    ggml_free(wctx);
    ggml_free(ctx);
    return {tm / copies * 1e3, (double)wbytes * copies / tm / 1e9, max_rel, bw.empty() ? 0.0 : median(bw)};
}

// Prompt-style mat-mat: W [K, M] x X [K, N] (N tokens); returns GFLOP/s (2*M*N*K per run).
double bench_matmat(ggml_type type, int64_t M, int64_t K, int64_t N, int nth, int runs) {
    ggml_init_params ip = {size_t(ggml_row_size(type, K) * M + (K + M) * N * 4 + (8 << 20)), nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, K, M);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    const std::vector<uint8_t> wq = make_weights(type, M, K, 2);
    std::memcpy(w->data, wq.data(), wq.size());
    std::mt19937 rng(4);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    for (int64_t i = 0; i < K * N; ++i)
        ((float *)x->data)[i] = nd(rng);
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_graph_compute_with_ctx(ctx, gf, nth);
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
        const double t0 = now_s();
        ggml_graph_compute_with_ctx(ctx, gf, nth);
        t.push_back(now_s() - t0);
    }
    ggml_free(ctx);
    return 2.0 * M * N * K / median(t) / 1e9;
}

// "a,b,c" -> {"a", "b", "c"}
std::vector<std::string> split_list(const std::string & s) {
    std::vector<std::string> out;
    size_t p = 0;
    while (p <= s.size()) {
        const size_t q = std::min(s.find(',', p), s.size());
        if (q > p) out.push_back(s.substr(p, q - p));
        p = q + 1;
    }
    return out;
}

bool parse_type(const std::string & name, ggml_type & type) {
    for (int t = 0; t < GGML_TYPE_COUNT; ++t) {
        if (name == ggml_type_name((ggml_type)t)) {
            type = (ggml_type)t;
            return true;
        }
    }
    return false;
}

} // namespace

int main(int argc, char ** argv) {
    int runs = 9;
    long total_mb = -1;
    int64_t matmat_n = 64;
    bool do_bw = true;
    std::vector<bool> repack_modes = {false};
    std::vector<int> threads = {1, 2};
    std::vector<ggml_type> types = {GGML_TYPE_Q8_0, GGML_TYPE_F16};
    std::vector<std::array<int64_t, 2>> shapes = {{4096, 4096}, {11008, 4096}}; // M x K
    auto usage = [&]() {
        fprintf(stderr,
                "usage: %s [--runs N] [--total-mb MB] [--threads 1,2] [--types q8_0,q4_0,...]\n"
                "          [--shapes MxK,... | tinyllama] [--matmat-n N (0: skip)] [--no-bw] [--repack off|on|both]\n",
                argv[0]);
        return 1;
    };
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        const bool has_val = i + 1 < argc;
        if (a == "--runs" && has_val) {
            runs = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--total-mb" && has_val) {
            total_mb = std::atol(argv[++i]);
        } else if (a == "--threads" && has_val) {
            threads.clear();
            for (const std::string & t : split_list(argv[++i]))
                threads.push_back(std::max(1, std::atoi(t.c_str())));
        } else if (a == "--types" && has_val) {
            types.clear();
            for (const std::string & t : split_list(argv[++i])) {
                ggml_type type;
                if (!parse_type(t, type)) {
                    fprintf(stderr, "%s: unknown type '%s'\n", argv[0], t.c_str());
                    return 1;
                }
                types.push_back(type);
            }
        } else if (a == "--shapes" && has_val) {
            shapes.clear();
            const std::string v = argv[++i];
            if (v == "tinyllama") {
                shapes = {{2048, 2048}, {5632, 2048}, {2048, 5632}};
            } else {
                for (const std::string & t : split_list(v)) {
                    long long m = 0, k = 0;
                    if (sscanf(t.c_str(), "%lldx%lld", &m, &k) != 2 || m <= 0 || k <= 0) {
                        fprintf(stderr, "%s: bad shape '%s' (want MxK)\n", argv[0], t.c_str());
                        return 1;
                    }
                    shapes.push_back({m, k});
                }
            }
        } else if (a == "--matmat-n" && has_val) {
            matmat_n = std::max(0, std::atoi(argv[++i]));
        } else if (a == "--no-bw") {
            do_bw = false;
        } else if (a == "--repack" && has_val) {
            const std::string v = argv[++i];
            if (v != "off" && v != "on" && v != "both") return usage();
            repack_modes = v == "off"  ? std::vector<bool>{false}
                           : v == "on" ? std::vector<bool>{true}
                                       : std::vector<bool>{false, true};
        } else {
            return usage();
        }
    }
    if (threads.empty() || types.empty() || shapes.empty()) return usage();
    const long l3 = (long)membw_l3_bytes();
    if (total_mb < 0) total_mb = std::min(3 * l3 / (1 << 20), 1536l);
    printf("L3 %ld MiB (reported), weight rotation >= %ld MB, %d runs (median)\n\n", l3 >> 20, total_mb, runs);

    const size_t bw_bytes =
        std::max<size_t>(size_t(total_mb) << 19, size_t(256) << 20); // half the rotation, >= 256 MiB
    // read-bandwidth probes interleaved with the kernel runs (the machine is shared and its
    // bandwidth drifts: a ratio of medians taken in alternation is the fair comparison)
    std::unique_ptr<membw_probe> probe;
    if (do_bw) {
        probe = std::make_unique<membw_probe>(bw_bytes);
        printf("| memory bandwidth | threads | GB/s |\n|---|---|---|\n");
        for (int nth : threads) {
            const membw_result bw = membw_measure(bw_bytes, nth, std::max(3, runs / 2));
            printf("| memcpy %zu MiB (read + write counted) | %d | %.1f |\n", bw_bytes >> 20, nth, bw.copy_gbs);
            printf("| sum reduction %zu MiB (read only) | %d | %.1f |\n", bw_bytes >> 20, nth, bw.read_gbs);
            printf("| sum reduction, 4 streams + prefetch (read only) | %d | %.1f |\n", nth, bw.read4_gbs);
        }
        fflush(stdout);
    }

    std::vector<ggml_type> ok_types;
    for (ggml_type type : types) {
        std::string why;
        if (type_available(type, why))
            ok_types.push_back(type);
        else
            printf("\nskipped %s\n", why.c_str());
    }

    printf(
        "\n| weights | M x K | threads | copies | ms / mat-vec | GB/s (weights) | read BW (GB/s) | %% of read BW | max "
        "rel err |\n");
    printf("|---|---|---|---|---|---|---|---|---|\n");
    for (ggml_type type : ok_types) {
        for (const auto & s : shapes) {
            if (s[1] % ggml_blck_size(type) != 0) {
                printf("| %s | %lld x %lld | - | - | - | - | - | - | K not a multiple of %lld |\n",
                       ggml_type_name(type), (long long)s[0], (long long)s[1], (long long)ggml_blck_size(type));
                continue;
            }
            const size_t wbytes = ggml_row_size(type, s[1]) * s[0];
            const int copies = (int)std::max<int64_t>(2, (int64_t)((total_mb << 20) + wbytes - 1) / (int64_t)wbytes);
            for (int nth : threads)
                for (const bool rp : repack_modes) {
                    const mv_result r = bench_matvec(type, s[0], s[1], copies, nth, runs, probe.get(), rp);
                    const double pct = r.read_gbs > 0 ? 100.0 * r.gbs / r.read_gbs : 0.0;
                    printf("| %s%s | %lld x %lld | %d | %d | %.3f | %.1f | %.1f | %.0f%% | %.1e |\n",
                           ggml_type_name(type), rp ? "/r8" : "", (long long)s[0], (long long)s[1], nth, copies, r.ms,
                           r.gbs, r.read_gbs, pct, r.max_rel_err);
                    fflush(stdout);
                }
        }
    }

    if (matmat_n > 0) {
        const int64_t M = shapes[0][0], K = shapes[0][1];
        printf("\n| prompt mat-mat | M x K x N | threads | GFLOP/s |\n|---|---|---|---|\n");
        for (ggml_type type : ok_types) {
            if (K % ggml_blck_size(type) != 0) continue;
            for (int nth : threads) {
                printf("| %s | %lld x %lld x %lld | %d | %.1f |\n", ggml_type_name(type), (long long)M, (long long)K,
                       (long long)matmat_n, nth, bench_matmat(type, M, K, matmat_n, nth, std::max(3, runs / 3)));
                fflush(stdout);
            }
        }
    }
    return 0;
}
