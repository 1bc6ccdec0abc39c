// bench-mmvq - decode mat-vec (quantized weights, q8_0 by default, x one f32 column, or N columns: batched decode's
// GEMM) on the CUDA backend, in GB/s of weight bytes read, against the copy bandwidth roofline. The mmvq kernel variant comes from the backend's
// env var GGML_CUDA_MMVQ (5 = v5 blocks of R rows, 2/4/8 = v6 warp per row with that many 16-byte
// loads in flight); run once per variant.
//   bench-mmvq [reps=50] [total MB of weight copies=1024] [N columns=1] [weight type=q8_0]
// Shapes: [K, M] = 4096x4096, 4096x11008, 11008x4096. Copies of each weight are rotated (total
// bytes >> 50 MB L2) in one graph of mul_mat nodes sharing the activation; the graph is computed
// reps times and the median wall time per graph (host clock after a synchronize) is reported.
// The graph also quantizes the activation once, so its time (~2 us) is included. Because the mul_mats share the
// activation, the backend fuses them as it fuses a layer's q/k/v or gate/up: with N = 1 into one mat-vec launch of
// 2-3 weights, with 2..64 columns into one wgmma GEMM launch of up to 3 weights (its K split chosen for the group's
// rows), so a figure is per weight of such groups.
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"

static double now_s() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char ** argv) {
    const int reps = argc > 1 ? atoi(argv[1]) : 50;
    const double total_mb = argc > 2 ? atof(argv[2]) : 1024.0;
    const int64_t N = argc > 3 ? atoll(argv[3]) : 1;
    ggml_type wt = GGML_TYPE_COUNT;
    for (int t = 0; t < GGML_TYPE_COUNT && argc > 4; ++t)
        if (ggml_type_is_valid(t) && ggml_is_quantized((ggml_type)t) && !strcmp(ggml_type_name((ggml_type)t), argv[4]))
            wt = (ggml_type)t;
    if (argc <= 4) wt = GGML_TYPE_Q8_0;
    if (reps <= 0 || total_mb <= 0 || N <= 0 || N > 4096 || wt == GGML_TYPE_COUNT) {
        fprintf(stderr, "bench-mmvq: error: bad arguments (usage: bench-mmvq [reps > 0] [total MB > 0] [N columns "
                        "1..4096] [quantized weight type: q8_0, q4_0, q4_K, ...])\n");
        return 1;
    }
    const ggml_type_traits * tt = ggml_get_type_traits(wt);
    ggml_backend_t be = ggml_backend_cuda_init(0);
    if (!be) {
        fprintf(stderr, "bench-mmvq: error: no CUDA device\n");
        return 1;
    }
    const char * var = getenv("GGML_CUDA_MMVQ");
    const int shapes[3][2] = {{4096, 4096}, {4096, 11008}, {11008, 4096}};
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    printf("| variant | type | K | M | N | copies | us/call | GB/s |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
    for (const auto & sh : shapes) {
        const int64_t K = sh[0], M = sh[1];
        const size_t wbytes = ggml_row_size(wt, K) * M;
        const int nc = std::max(4, (int)(total_mb * 1e6 / wbytes));
        ggml_init_params ip = {ggml_tensor_overhead() * (2 * nc + 8) + ggml_graph_overhead_custom(4 * nc + 16), nullptr,
                               true};
        ggml_context * wctx = ggml_init(ip);
        ggml_context * gctx = ggml_init(ip);
        std::vector<ggml_tensor *> w(nc);
        for (int i = 0; i < nc; ++i)
            w[i] = ggml_new_tensor_2d(wctx, wt, K, M); // [K, M]
        ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, be);
        ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        // random weights (one quantized row pattern per copy, set whole so they get repacked)
        std::vector<float> rowf(K);
        std::vector<uint8_t> q(wbytes);
        const size_t rb = ggml_row_size(wt, K);
        for (int64_t r = 0; r < M; ++r) {
            for (auto & v : rowf)
                v = dist(rng);
            tt->from_float_ref(rowf.data(), q.data() + r * rb, K);
        }
        for (int i = 0; i < nc; ++i)
            ggml_backend_tensor_set(w[i], q.data(), 0, wbytes);
        ggml_tensor * x = ggml_new_tensor_2d(gctx, GGML_TYPE_F32, K, N); // [K, N]
        ggml_cgraph * gf = ggml_new_graph_custom(gctx, 4 * nc + 16);
        for (int i = 0; i < nc; ++i)
            ggml_build_forward_expand(gf, ggml_mul_mat(gctx, w[i], x)); // [M, N]
        ggml_backend_buffer_t gbuf = ggml_backend_alloc_ctx_tensors(gctx, be);
        std::vector<float> xv(K * N);
        for (auto & v : xv)
            v = dist(rng);
        ggml_backend_tensor_set(x, xv.data(), 0, xv.size() * sizeof(float));
        std::vector<double> t;
        for (int r = 0; r < reps + 3; ++r) {
            const double t0 = now_s();
            if (ggml_backend_graph_compute(be, gf) != GGML_STATUS_SUCCESS) {
                fprintf(stderr, "bench-mmvq: error: graph compute failed (K %lld, M %lld)\n", (long long)K,
                        (long long)M);
                return 1;
            }
            ggml_backend_synchronize(be);
            if (r >= 3) t.push_back(now_s() - t0);
        }
        std::sort(t.begin(), t.end());
        const double per = t[t.size() / 2] / nc;
        printf("| %s | %s | %lld | %lld | %lld | %d | %.2f | %.0f |\n", var ? var : "default", ggml_type_name(wt),
               (long long)K, (long long)M,
               (long long)N, nc,
               per * 1e6, wbytes / per / 1e9);
        ggml_backend_buffer_free(gbuf);
        ggml_backend_buffer_free(wbuf);
        ggml_free(gctx);
        ggml_free(wctx);
    }
    ggml_backend_free(be);
    return 0;
}
#else
int main() {
    fprintf(stderr, "bench-mmvq: error: built without CUDA\n");
    return 1;
}
#endif
