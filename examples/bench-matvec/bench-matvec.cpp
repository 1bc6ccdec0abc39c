// bench-matvec - CPU mat-vec throughput (q8_0 and f16 weights) against this machine's memory
// bandwidth. Prints a markdown table.
//
//   bench-matvec [--runs N] [--total-mb MB] [--threads 1,2]
//
// Weights are read once per token in decode, so mat-vec is memory bound: the figure of merit is
// GB/s of weight bytes read. Several weight copies are rotated through (total >= --total-mb,
// default 3x the L3 size capped at 1536 MB) so that no run is served from cache. Each run is one
// graph of mul_mat nodes (one per copy) computed with ggml_graph_compute_with_ctx; the median
// run is reported. Memory bandwidth: a large memcpy (read + write bytes counted) and a read-only
// sum reduction, on the same thread counts.
#include "ggml.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

#if defined(__AVX512F__)
#include <immintrin.h>
#endif

namespace {

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

// Run fn(ith) on nth threads; returns wall seconds from a common start to the last finish.
template <typename F> double run_threads(int nth, F fn) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> th;
    for (int i = 0; i < nth; ++i) {
        th.emplace_back([&, i] {
            ready.fetch_add(1);
            while (!go.load(std::memory_order_acquire)) {}
            fn(i);
        });
    }
    while (ready.load() < nth) {}
    const double t0 = now_s();
    go.store(true, std::memory_order_release);
    for (auto & t : th)
        t.join();
    return now_s() - t0;
}

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12: _mm512_reduce_add_ps uses _mm512_undefined
#endif
float sum_floats(const float * p, size_t n) {
#if defined(__AVX512F__)
    __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
        a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
    }
    float s = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
    for (; i < n; ++i)
        s += p[i];
    return s;
#else
    float s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += p[i];
        s1 += p[i + 1];
        s2 += p[i + 2];
        s3 += p[i + 3];
    }
    for (; i < n; ++i)
        s0 += p[i];
    return s0 + s1 + s2 + s3;
#endif
}

struct bw_result {
    double copy_gbs, read_gbs;
};

bw_result measure_bandwidth(size_t bytes, int nth, int runs) {
    char * a = (char *)std::aligned_alloc(64, bytes);
    char * b = (char *)std::aligned_alloc(64, bytes);
    std::memset(a, 1, bytes);
    std::memset(b, 2, bytes);
    const size_t per = bytes / nth / 64 * 64;
    std::vector<double> tc, tr;
    std::atomic<float> sink{0};
    for (int r = 0; r < runs; ++r) {
        tc.push_back(run_threads(nth, [&](int i) { std::memcpy(b + i * per, a + i * per, per); }));
        tr.push_back(run_threads(nth, [&](int i) {
            const float s = sum_floats((const float *)(a + i * per), per / sizeof(float));
            sink.store(s, std::memory_order_relaxed);
        }));
    }
    std::free(a);
    std::free(b);
    return {2.0 * per * nth / median(tc) / 1e9, (double)per * nth / median(tr) / 1e9};
}

struct mv_result {
    double ms, gbs, max_rel_err;
};

// y = W x for `copies` copies of W [K, M] (ggml: a [K, M], b [K, 1]).
mv_result bench_matvec(ggml_type type, int64_t M, int64_t K, int copies, int nth, int runs) {
    const size_t wbytes = ggml_row_size(type, K) * M;
    ggml_context * ctx =
        ggml_init({ggml_tensor_overhead() * (3 * copies + 8) + ggml_graph_overhead_custom(4 * copies + 16) + (1 << 20),
                   nullptr, true});
    std::vector<void *> bufs;
    auto alloc = [&](ggml_tensor * t) {
        void * p = std::aligned_alloc(64, (ggml_nbytes(t) + 63) / 64 * 64);
        GGML_ASSERT(p);
        bufs.push_back(p);
        t->data = p;
    };
    // one random f32 matrix, converted into every copy (copies differ only in address)
    std::mt19937 rng(1);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(K * M), xf(K);
    for (auto & v : wf)
        v = nd(rng);
    for (auto & v : xf)
        v = nd(rng);

    ggml_tensor * x = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, K);
    alloc(x);
    std::memcpy(x->data, xf.data(), K * sizeof(float));
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 4 * copies + 16);
    std::vector<ggml_tensor *> outs;
    for (int c = 0; c < copies; ++c) {
        ggml_tensor * w = ggml_new_tensor_2d(ctx, type, K, M);
        alloc(w);
        if (type == GGML_TYPE_Q8_0) {
            quantize_row_q8_0_ref(wf.data(), (block_q8_0 *)w->data, K * M);
        } else {
            ggml_fp32_to_fp16_row(wf.data(), (ggml_fp16_t *)w->data, K * M);
        }
        ggml_tensor * y = ggml_mul_mat(ctx, w, x);
        alloc(y);
        outs.push_back(y);
        ggml_build_forward_expand(gf, y);
    }
    // sanity: the first output vs a double loop over the stored weights
    ggml_graph_compute_with_ctx(ctx, gf, nth);
    std::vector<float> wrow(K);
    double max_rel = 0;
    std::vector<block_q8_1> xq(K / 32 + 1);
    std::vector<float> xr(xf);
    if (type == GGML_TYPE_Q8_0) { // the kernel quantizes x to q8_1
        quantize_row_q8_1_ref(xf.data(), xq.data(), K);
        dequantize_row_q8_1(xq.data(), xr.data(), K);
    }
    for (int64_t m = 0; m < M; m += 97) {
        const char * row = (const char *)outs[0]->src[0]->data + m * outs[0]->src[0]->nb[1];
        ggml_get_type_traits(type)->to_float(row, wrow.data(), K);
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) {
            ref += (double)wrow[k] * xr[k];
            mag += std::fabs((double)wrow[k] * xr[k]);
        }
        for (int c = 0; c < copies; c += std::max(1, copies / 3)) {
            max_rel = std::max(max_rel, std::fabs(((float *)outs[c]->data)[m] - ref) / mag);
        }
    }
    std::vector<double> t;
    for (int r = 0; r < runs; ++r) {
        const double t0 = now_s();
        ggml_graph_compute_with_ctx(ctx, gf, nth);
        t.push_back(now_s() - t0);
    }
    const double tm = median(t);
    for (void * p : bufs)
        std::free(p);
    ggml_free(ctx);
    return {tm / copies * 1e3, (double)wbytes * copies / tm / 1e9, max_rel};
}

// Prompt-style mat-mat: W [K, M] x X [K, N] (N tokens); returns GFLOP/s (2*M*N*K per run).
double bench_matmat(ggml_type type, int64_t M, int64_t K, int64_t N, int nth, int runs) {
    ggml_init_params ip = {size_t(ggml_row_size(type, K) * M + (K + M) * N * 4 + (8 << 20)), nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, K, M);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    std::mt19937 rng(2);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> wf(K * M);
    for (auto & v : wf)
        v = nd(rng);
    for (int64_t i = 0; i < K * N; ++i)
        ((float *)x->data)[i] = nd(rng);
    if (type == GGML_TYPE_Q8_0)
        quantize_row_q8_0_ref(wf.data(), (block_q8_0 *)w->data, K * M);
    else
        ggml_fp32_to_fp16_row(wf.data(), (ggml_fp16_t *)w->data, K * M);
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

} // namespace

int main(int argc, char ** argv) {
    int runs = 9;
    long total_mb = -1;
    std::vector<int> threads = {1, 2};
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--runs" && i + 1 < argc) {
            runs = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--total-mb" && i + 1 < argc) {
            total_mb = std::atol(argv[++i]);
        } else if (a == "--threads" && i + 1 < argc) {
            threads.clear();
            for (const char * s = argv[++i]; *s;) {
                threads.push_back(std::max(1, std::atoi(s)));
                while (*s && *s != ',')
                    ++s;
                if (*s == ',') ++s;
            }
        } else {
            fprintf(stderr, "usage: %s [--runs N] [--total-mb MB] [--threads 1,2]\n", argv[0]);
            return 1;
        }
    }
    long l3 = sysconf(_SC_LEVEL3_CACHE_SIZE);
    if (l3 <= 0) l3 = 32l << 20;
    if (total_mb < 0) total_mb = std::min(3 * l3 / (1 << 20), 1536l);
    printf("L3 %ld MiB (reported), weight rotation >= %ld MB, %d runs (median)\n\n", l3 >> 20, total_mb, runs);

    const size_t bw_bytes =
        std::max<size_t>(size_t(total_mb) << 19, size_t(256) << 20); // half the rotation, >= 256 MiB
    printf("| memory bandwidth | threads | GB/s |\n|---|---|---|\n");
    std::vector<double> read_bw(8, 0);
    for (int nth : threads) {
        const bw_result bw = measure_bandwidth(bw_bytes, nth, std::max(3, runs / 2));
        if (nth < 8) read_bw[nth] = bw.read_gbs;
        printf("| memcpy %zu MiB (read + write counted) | %d | %.1f |\n", bw_bytes >> 20, nth, bw.copy_gbs);
        printf("| sum reduction %zu MiB (read only) | %d | %.1f |\n", bw_bytes >> 20, nth, bw.read_gbs);
    }
    fflush(stdout);

    printf("\n| weights | M x K | threads | copies | ms / mat-vec | GB/s (weights) | %% of read BW | max rel err |\n");
    printf("|---|---|---|---|---|---|---|---|\n");
    const int64_t shapes[2][2] = {{4096, 4096}, {11008, 4096}};
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_F16}) {
        for (const auto & s : shapes) {
            const size_t wbytes = ggml_row_size(type, s[1]) * s[0];
            const int copies = (int)std::max<int64_t>(2, (int64_t)((total_mb << 20) + wbytes - 1) / (int64_t)wbytes);
            for (int nth : threads) {
                const mv_result r = bench_matvec(type, s[0], s[1], copies, nth, runs);
                const double pct = nth < 8 && read_bw[nth] > 0 ? 100.0 * r.gbs / read_bw[nth] : 0.0;
                printf("| %s | %lld x %lld | %d | %d | %.3f | %.1f | %.0f%% | %.1e |\n", ggml_type_name(type),
                       (long long)s[0], (long long)s[1], nth, copies, r.ms, r.gbs, pct, r.max_rel_err);
                fflush(stdout);
            }
        }
    }

    printf("\n| prompt mat-mat | M x K x N | threads | GFLOP/s |\n|---|---|---|---|\n");
    for (ggml_type type : {GGML_TYPE_Q8_0, GGML_TYPE_F16}) {
        for (int nth : threads) {
            printf("| %s | 4096 x 4096 x 64 | %d | %.1f |\n", ggml_type_name(type), nth,
                   bench_matmat(type, 4096, 4096, 64, nth, std::max(3, runs / 3)));
            fflush(stdout);
        }
    }
    return 0;
}
