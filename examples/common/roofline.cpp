// roofline.cpp - see roofline.h.
#include "roofline.h"

#include "ggml-backend.h"
#include "membw.h"
#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace {

// GFLOP/s of the best of `reps` runs of a [K, M] `type` weight times a [K, N] f32 batch on the CPU backend
double cpu_mul_mat_gflops(ggml_backend_t cpu, ggml_type type, int reps) {
    const int64_t K = 2048, M = 512, N = 256;
    ggml_context * ctx = ggml_init({8 * ggml_tensor_overhead() + ggml_graph_overhead_custom(16), nullptr, true});
    ggml_tensor * w = ggml_new_tensor_2d(ctx, type, K, M);          // [K, M]
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N); // [K, N]
    ggml_tensor * y = ggml_mul_mat(ctx, w, x);                      // [M, N]
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 16);
    ggml_build_forward_expand(gf, y);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, cpu);
    double best = 0;
    if (buf) {
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        std::vector<float> v(K * std::max(M, N));
        for (auto & f : v)
            f = u(rng);
        std::vector<uint8_t> q(ggml_row_size(type, K) * M);
        ggml_get_type_traits(type)->from_float_ref(v.data(), q.data(), K * M);
        ggml_backend_tensor_set(w, q.data(), 0, q.size());
        ggml_backend_tensor_set(x, v.data(), 0, ggml_nbytes(x));
        ggml_backend_graph_compute(cpu, gf); // warm-up
        for (int r = 0; r < reps; ++r) {
            const int64_t t0 = ggml_time_us();
            ggml_backend_graph_compute(cpu, gf);
            const double us = (double)std::max<int64_t>(1, ggml_time_us() - t0);
            best = std::max(best, 2.0 * K * M * N / us * 1e-3);
        }
        ggml_backend_buffer_free(buf);
    }
    ggml_free(ctx);
    return best;
}

} // namespace

ggml_roofline roofline_cpu(int n_threads, size_t probe_bytes) {
    if (n_threads <= 0) n_threads = (int) std::max(1u, std::thread::hardware_concurrency());
    ggml_roofline r;
    {
        membw_probe probe(probe_bytes > 0 ? probe_bytes : membw_probe_bytes());
        r.bw_gbs = probe.read_gbs(n_threads);
    }
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, n_threads);
    const ggml_type types[GGML_PEAK_COUNT] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0};
    for (int c = 0; c < GGML_PEAK_COUNT; ++c)
        r.peak_tflops[c] = cpu_mul_mat_gflops(cpu, types[c], 5) * 1e-3;
    ggml_backend_free(cpu);
    r.source = "read bandwidth: 4 streams + prefetch on " + std::to_string(n_threads) +
               " threads; peaks: best timed CPU mat-mul [2048 x 512] x [2048 x 256] with f32 / f16 / q8_0 weights";
    return r;
}

bool roofline_cuda(int device, ggml_roofline & r) {
#ifdef GGML_USE_CUDA
    double f32 = 0, f16 = 0, int8 = 0;
    if (!ggml_backend_cuda_peak_tflops(device, &f32, &f16, &int8)) return false;
    r = ggml_roofline();
    r.bw_gbs = ggml_backend_cuda_copy_bandwidth_gbs(device);
    r.peak_tflops[GGML_PEAK_F32] = f32;
    r.peak_tflops[GGML_PEAK_F16] = f16;
    r.peak_tflops[GGML_PEAK_INT8] = int8;
    r.source = "bandwidth: device-to-device cudaMemcpy (read + written), median; peaks: SMs x max SM clock x "
               "FLOP/clock/SM of the architecture (cuda/profile.cu)";
    return true;
#else
    (void)device;
    (void)r;
    return false;
#endif
}

void roofline_apply(ggml_profile & p, int n_threads, roofline_cache & cache) {
    std::vector<std::string> names;
    for (const auto & n : p.nodes) {
        if (std::find(names.begin(), names.end(), n.backend) == names.end()) names.push_back(n.backend);
    }
    for (const auto & name : names) {
        auto it = std::find_if(cache.known.begin(), cache.known.end(), [&](auto & k) { return k.first == name; });
        if (it == cache.known.end()) {
            ggml_roofline r;
            if (name == "CPU") {
                r = roofline_cpu(n_threads);
            } else if (name.rfind("CUDA", 0) != 0 || !roofline_cuda(std::atoi(name.c_str() + 4), r)) {
                std::fprintf(stderr, "warning: no roofline for backend %s\n", name.c_str());
                continue;
            }
            cache.known.emplace_back(name, r);
            it = cache.known.end() - 1;
        }
        ggml_profile_set_roofline(p, name, it->second);
    }
}
