// test_all_reduce.cpp - ALL_REDUCE (ggml_all_reduce) against the sum taken here. Each rank is a backend run from a
// thread of its own with the graph  a = all_reduce(x_r); b = a + x_r; c = all_reduce(b)  (two all-reduces in a row:
// the communicator is reused). Host communicators: 1..4 CPU backends, odd shapes; every rank gets the same bits, those
// of the float sum in rank order. NCCL: two GPUs (skipped with fewer, or in a build without CUDA), within 1e-6 of
// that sum (NCCL adds in its own order).
#include "doctest_cstr.h"
#include "ggml-backend.h"
#include "ggml.h"
#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"
#endif

#include <cmath>
#include <string>
#include <thread>
#include <vector>

namespace {

struct rank_out {
    std::vector<float> a, c;
};

// x[r]: rank r's input [ne0, ne1]; backends[r] runs rank r. Returns each rank's a and c.
std::vector<rank_out> run_ranks(const std::vector<ggml_backend_t> & backends, ggml_comm * comm, int64_t ne0,
                                int64_t ne1, const std::vector<std::vector<float>> & x) {
    const int n = (int) backends.size();
    std::vector<rank_out> out(n);
    std::vector<std::thread> threads;
    for (int r = 0; r < n; ++r) {
        threads.emplace_back([&, r] {
            const size_t mem = 16 * ggml_tensor_overhead() + ggml_graph_overhead_custom(16);
            ggml_context * ctx = ggml_init({mem, nullptr, true});
            ggml_tensor * xt = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
            ggml_tensor * a = ggml_all_reduce(ctx, xt, comm, r);
            ggml_tensor * b = ggml_add(ctx, a, xt);
            ggml_tensor * c = ggml_all_reduce(ctx, b, comm, r);
            ggml_cgraph * gf = ggml_new_graph_custom(ctx, 16);
            ggml_build_forward_expand(gf, c);
            ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backends[r]);
            ggml_backend_tensor_set(xt, x[r].data(), 0, ggml_nbytes(xt));
            const ggml_status st = ggml_backend_graph_compute(backends[r], gf);
            out[r].a.resize(ne0 * ne1);
            out[r].c.resize(ne0 * ne1);
            if (st == GGML_STATUS_SUCCESS) {
                ggml_backend_tensor_get(a, out[r].a.data(), 0, ggml_nbytes(a));
                ggml_backend_tensor_get(c, out[r].c.data(), 0, ggml_nbytes(c));
            }
            ggml_backend_buffer_free(buf);
            ggml_free(ctx);
        });
    }
    for (auto & t : threads) t.join();
    return out;
}

std::vector<std::vector<float>> inputs(int n, int64_t ne) {
    std::vector<std::vector<float>> x(n, std::vector<float>(ne));
    for (int r = 0; r < n; ++r)
        for (int64_t i = 0; i < ne; ++i) x[r][i] = std::sin(0.37f * (float) i + 1.3f * (float) r) * (float) (r + 1);
    return x;
}

// the float sums in rank order: a = sum of x, c = sum of (a + x_r)
void reference(const std::vector<std::vector<float>> & x, std::vector<float> & a, std::vector<float> & c) {
    const size_t ne = x[0].size();
    a.assign(ne, 0);
    c.assign(ne, 0);
    for (size_t i = 0; i < ne; ++i) {
        float s = x[0][i];
        for (size_t r = 1; r < x.size(); ++r) s += x[r][i];
        a[i] = s;
        float t = s + x[0][i];
        for (size_t r = 1; r < x.size(); ++r) t += s + x[r][i];
        c[i] = t;
    }
}

} // namespace

TEST_CASE("all-reduce over a host communicator: every rank gets the rank-order sum, bit for bit") {
    struct shape {
        int64_t ne0, ne1;
    };
    for (int n = 1; n <= 4; ++n) {
        for (const shape & sh : {shape{7, 5}, shape{4096, 1}, shape{1, 1}, shape{100000, 3}}) {
            ggml_comm * comm = ggml_comm_host_new(n);
            REQUIRE(comm != nullptr);
            CHECK(ggml_comm_n_ranks(comm) == n);
            CHECK(ggml_comm_get_kind(comm) == GGML_COMM_HOST);
            std::vector<ggml_backend_t> backends;
            for (int r = 0; r < n; ++r) {
                backends.push_back(ggml_backend_cpu_init());
                ggml_backend_cpu_set_n_threads(backends.back(), 2);
            }
            const auto x = inputs(n, sh.ne0 * sh.ne1);
            const auto out = run_ranks(backends, comm, sh.ne0, sh.ne1, x);
            std::vector<float> a, c;
            reference(x, a, c);
            for (int r = 0; r < n; ++r) {
                INFO("ranks " << n << " rank " << r << " shape " << sh.ne0 << "x" << sh.ne1);
                CHECK(out[r].a == a);
                CHECK(out[r].c == c);
            }
            for (auto * b : backends) ggml_backend_free(b);
            ggml_comm_free(comm);
        }
    }
    CHECK(ggml_comm_host_new(0) == nullptr);
}

TEST_CASE("all-reduce over NCCL on two GPUs equals the host sum") {
#ifdef GGML_USE_CUDA
    if (ggml_backend_cuda_get_device_count() < 2) {
        MESSAGE("SKIP: " << ggml_backend_cuda_get_device_count() << " CUDA device(s)");
        return;
    }
    const int devices[2] = {0, 1};
    std::string err;
    ggml_comm * comm = ggml_backend_cuda_comm_new(devices, 2, &err);
    REQUIRE_MESSAGE(comm != nullptr, err);
    CHECK(ggml_comm_get_kind(comm) == GGML_COMM_NCCL);
    std::vector<ggml_backend_t> backends = {ggml_backend_cuda_init(0), ggml_backend_cuda_init(1)};
    for (int64_t ne : {1, 4096, 4097 * 3, 1 << 20}) {
        const auto x = inputs(2, ne);
        // twice: the second compute may replay what the first captured
        for (int rep = 0; rep < 2; ++rep) {
            const auto out = run_ranks(backends, comm, ne, 1, x);
            std::vector<float> a, c;
            reference(x, a, c);
            double worst = 0;
            bool same = true;
            for (int r = 0; r < 2; ++r) {
                for (int64_t i = 0; i < ne; ++i) {
                    worst = std::max(worst, (double) std::fabs(out[r].a[i] - a[i]) / (1 + std::fabs(a[i])));
                    worst = std::max(worst, (double) std::fabs(out[r].c[i] - c[i]) / (1 + std::fabs(c[i])));
                }
                same = same && out[r].a == out[0].a && out[r].c == out[0].c;
            }
            INFO("n " << ne << " rep " << rep);
            CHECK(worst < 1e-6);
            CHECK(same);  // both ranks hold the same residual
        }
    }
    for (auto * b : backends) ggml_backend_free(b);
    ggml_comm_free(comm);
    const int bad[2] = {0, 99};
    CHECK(ggml_backend_cuda_comm_new(bad, 2, &err) == nullptr);
    CHECK(err.find("CUDA device 99 does not exist") != std::string::npos);
#else
    MESSAGE("SKIP: built without CUDA");
#endif
}
