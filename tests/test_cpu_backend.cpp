// CPU backend glue: host buffer type, wrapped buffers, backend identity, supports_op, graph
// compute (errors, view/empty nodes, in-place), the thread pool barrier, and per-node overhead.
#include "cpu/mul_mat.h"
#include "cpu/threadpool.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include "doctest_cstr.h"
#include <random>
#include <string>
#include <thread>
#include <vector>

TEST_CASE("CPU buffer type: host, 64-byte aligned, set/get/clear") {
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type();
    CHECK(ggml_backend_buft_is_host(buft));
    CHECK(ggml_backend_buft_get_alignment(buft) == 64);
    CHECK(std::string(ggml_backend_buft_name(buft)) == "CPU");
    ggml_backend_buffer_t buf = ggml_backend_buft_alloc_buffer(buft, 1000);
    REQUIRE(buf);
    CHECK(ggml_backend_buffer_is_host(buf));
    CHECK(ggml_backend_buffer_get_size(buf) == 1000);
    CHECK((uintptr_t)ggml_backend_buffer_get_base(buf) % 64 == 0);
    ggml_backend_buffer_clear(buf, 0xAB);
    CHECK(((uint8_t *)ggml_backend_buffer_get_base(buf))[999] == 0xAB);

    ggml_init_params ip = {ggml_tensor_overhead() * 4, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 10);
    ggml_backend_tensor_alloc(buf, t, (char *)ggml_backend_buffer_get_base(buf) + 64);
    const float in[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    ggml_backend_tensor_set(t, in, 0, sizeof(in));
    float out[3] = {};
    ggml_backend_tensor_get(t, out, 4 * sizeof(float), sizeof(out));
    CHECK(out[0] == 5);
    CHECK(out[2] == 7);
    ggml_free(ctx);
    ggml_backend_buffer_free(buf);

    ggml_backend_buffer_t empty = ggml_backend_buft_alloc_buffer(buft, 0);
    REQUIRE(empty);
    CHECK(ggml_backend_buffer_get_base(empty) != nullptr);
    ggml_backend_buffer_free(empty);
}

TEST_CASE("CPU buffer from pointer wraps memory it does not own") {
    std::vector<uint8_t> mem(256, 7);
    ggml_backend_buffer_t buf = ggml_backend_cpu_buffer_from_ptr(mem.data(), mem.size());
    REQUIRE(buf);
    CHECK(ggml_backend_buffer_get_base(buf) == mem.data());
    CHECK(ggml_backend_buffer_is_host(buf));
    ggml_backend_buffer_free(buf); // must not free mem (ASan would report a bad free)
    CHECK(mem[100] == 7);
}

TEST_CASE("CPU backend identity and supports_op") {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    CHECK(ggml_backend_is_cpu(cpu));
    CHECK(!ggml_backend_is_cpu(nullptr));
    CHECK(std::string(ggml_backend_name(cpu)) == "CPU");
    CHECK(ggml_backend_supports_buft(cpu, ggml_backend_cpu_buffer_type()));

    ggml_init_params ip = {1024 * 1024, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 8, 2);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    CHECK(ggml_backend_supports_op(cpu, ggml_add(ctx, a, b)));
    CHECK(ggml_backend_supports_op(cpu, ggml_rms_norm(ctx, a, 1e-5f)));
    CHECK(ggml_backend_supports_op(cpu, ggml_transpose(ctx, a)));
    ggml_tensor * w = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_1, 32, 4);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 32, 1);
    CHECK(!ggml_backend_supports_op(cpu, ggml_mul_mat(ctx, w, x))); // q8_1 weights are not a CPU weight type
    ggml_tensor * ai = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 8, 2);
    ggml_tensor * bad = ggml_silu(ctx, ai);
    CHECK(!ggml_backend_supports_op(cpu, bad));
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

TEST_CASE("graph compute: unsupported node and missing memory fail cleanly") {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_init_params ip = {1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * ai = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 8);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, ggml_silu(ctx, ai));
    CHECK(ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_FAILED);
    ggml_free(ctx);

    ggml_init_params ip2 = {1024 * 1024, nullptr, true}; // no data anywhere
    ctx = ggml_init(ip2);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 8);
    gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, ggml_silu(ctx, a));
    CHECK(ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_FAILED);
    ggml_free(ctx);
    ggml_backend_free(cpu);
}

TEST_CASE("graph compute: chains of small nodes, views, in place, thread counts") {
    // y = ((x + 1) * 2 + 1) * 2 ... over 300 nodes, some through views; exact in f32. The graph is small, so by
    // default it runs on the calling thread alone; serial_below 0 makes every thread take part.
    for (int64_t serial_below : {int64_t(0), GGML_CPU_SERIAL_BELOW_DEFAULT})
        for (int nth : {1, 2, 3, 4}) {
            ggml_init_params ip = {16 * 1024 * 1024, nullptr, false};
            ggml_context * ctx = ggml_init(ip);
            ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 3);
            ggml_tensor * one = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1);
            for (int i = 0; i < 192; ++i)
                ((float *)x->data)[i] = (float)(i % 5);
            ((float *)one->data)[0] = 1.0f;
            ggml_tensor * y = x;
            for (int i = 0; i < 150; ++i) {
                y = ggml_add(ctx, y, one);
                y = ggml_scale(ctx, y, i % 2 ? 0.5f : 2.0f);
                if (i % 10 == 0) y = ggml_reshape_2d(ctx, y, 64, 3);
            }
            ggml_cgraph * gf = ggml_new_graph(ctx);
            ggml_build_forward_expand(gf, y);
            ggml_backend_t cpu = ggml_backend_cpu_init();
            ggml_backend_cpu_set_n_threads(cpu, nth);
            ggml_backend_cpu_set_serial_below(cpu, serial_below);
            const int64_t t0 = ggml_time_us();
            const int reps = 20;
            for (int r = 0; r < reps; ++r)
                REQUIRE(ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_SUCCESS);
            const double us_per_node = (double)(ggml_time_us() - t0) / reps / 300;
            MESSAGE("threads ", nth, serial_below ? " (small graph: calling thread)" : "", ": ", us_per_node,
                    " us per small node");
            for (int i = 0; i < 192; ++i) {
                double v = i % 5;
                for (int k = 0; k < 150; ++k)
                    v = (v + 1) * (k % 2 ? 0.5 : 2.0);
                if (((float *)y->data)[i] != (float)v) {
                    FAIL_CHECK("element ", i, " = ", ((float *)y->data)[i], " want ", v);
                    break;
                }
            }
            ggml_backend_free(cpu);
            ggml_free(ctx);
        }
}

TEST_CASE("ggml_graph_compute_with_ctx matches the backend") {
    ggml_init_params ip = {16 * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 300, 70);
    for (int i = 0; i < 300 * 70; ++i)
        ((float *)x->data)[i] = (float)std::sin(i * 0.37);
    ggml_tensor * y = ggml_soft_max(ctx, ggml_rms_norm(ctx, x, 1e-5f));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_graph_compute_with_ctx(ctx, gf, 3);
    std::vector<float> a((float *)y->data, (float *)y->data + 300 * 70);
    std::memset(y->data, 0xFF, ggml_nbytes(y));
    ggml_backend_t cpu = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(cpu, 1);
    REQUIRE(ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_SUCCESS);
    CHECK(std::memcmp(a.data(), y->data, a.size() * sizeof(float)) == 0); // splits do not change results
    ggml_backend_free(cpu);
    ggml_free(ctx);
}

TEST_CASE("thread pool: barrier separates phases, run() repeats") {
    for (int nth : {1, 2, 3, 5}) {
        ggml_cpu_threadpool tp(nth);
        std::vector<int> slots(nth, 0);
        std::atomic<int> bad{0};
        for (int rep = 0; rep < 50; ++rep) {
            tp.run([&](int ith) {
                for (int phase = 0; phase < 40; ++phase) {
                    slots[ith] = rep * 1000 + phase;
                    tp.barrier();
                    for (int j = 0; j < nth; ++j)
                        if (slots[j] != rep * 1000 + phase) bad++;
                    tp.barrier();
                }
            });
        }
        CHECK(bad.load() == 0);
    }
}

// The decode mat-vec's dispenser (ggml_cpu_units, streaming with take words): every unit is taken exactly once,
// each thread first takes its own range front to back, and a thread that starts only when all others are done finds
// its whole range taken by them.
TEST_CASE("work units: own ranges front to back, the rest taken from the back by the others") {
    for (int nth : {2, 3, 5}) {
        for (int64_t n : {1, 7, 64, 129}) {
            for (int late : {-1, 0, nth - 1}) { // the thread that starts after the others finish (-1: none)
                ggml_cpu_threadpool tp(nth);
                std::vector<ggml_cpu_take_word> words(nth);
                std::vector<std::atomic<int>> owner(n);
                for (auto & o : owner)
                    o = -1;
                std::atomic<int> twice{0}, order{0}, done{0};
                tp.run([&](int ith) {
                    while (ith == late && done.load() < nth - 1)
                        std::this_thread::yield();
                    ggml_cpu_params p{};
                    p.ith = ith;
                    p.nth = nth;
                    p.owned = words.data();
                    int64_t own0, own1;
                    p.split(n, own0, own1);
                    int64_t next_own = own0; // own units come in order from the range's start
                    ggml_cpu_units units(p, n, 1, true);
                    for (int64_t u0, u1; units.next(u0, u1);) {
                        if (u0 >= own0 && u0 < own1 && u0 != next_own) order++;
                        if (u0 >= own0 && u0 < own1) next_own = u1;
                        for (int64_t u = u0; u < u1; ++u) {
                            int expected = -1;
                            if (!owner[u].compare_exchange_strong(expected, ith)) twice++;
                        }
                    }
                    done++;
                });
                CAPTURE(nth);
                CAPTURE(n);
                CAPTURE(late);
                CHECK(twice.load() == 0);
                CHECK(order.load() == 0);
                int64_t missing = 0, stolen = 0;
                const int64_t per = (n + nth - 1) / nth;
                for (int64_t u = 0; u < n; ++u) {
                    missing += owner[u] < 0;
                    if (late >= 0 && u / per == late && owner[u] != late) stolen++;
                }
                CHECK(missing == 0);
                // the others return only once every range is empty, so they took all of the late thread's
                if (late >= 0 && per * late < n) CHECK(stolen == std::min(n, per * (late + 1)) - per * late);
            }
        }
    }
}

// A small Llama-like decoder (odd shapes, quantized and float weights, GQA, rope, KV-cache set_rows, softmax, swiglu),
// its intermediates placed by the graph allocator (so later nodes reuse earlier nodes' memory: the write-after-read
// hazards the barrier elision must respect), run for 3 steps. Every plan and thread count must give the bytes of the
// reference (1 thread): the elided barriers change which thread runs what, never what is computed.
namespace {
struct mini_decoder {
    static constexpr int E = 288, HD = 32, H = 9, HKV = 3, FF = 352, CELLS = 24, VOCAB = 501, LAYERS = 3;
    ggml_context * wctx = nullptr;
    std::vector<ggml_tensor *> w; // per layer: norm, q, k, v, o, norm2, gate, up, down; then out_norm, out
    std::vector<ggml_tensor *> kc, vc;
    ggml_tensor * out_norm = nullptr;
    ggml_tensor * out = nullptr;

    explicit mini_decoder(uint32_t seed) {
        ggml_init_params ip = {64 * 1024 * 1024, nullptr, false};
        wctx = ggml_init(ip);
        std::mt19937 rng(seed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        const ggml_type types[LAYERS] = {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, GGML_TYPE_F16};
        auto weight = [&](ggml_type t, int64_t k, int64_t m, float scale) {
            ggml_tensor * x = ggml_new_tensor_2d(wctx, t, k, m);
            std::vector<float> v(k * m);
            for (float & f : v)
                f = nd(rng) * scale;
            if (t == GGML_TYPE_F32)
                std::memcpy(x->data, v.data(), v.size() * 4);
            else if (t == GGML_TYPE_F16)
                ggml_fp32_to_fp16_row(v.data(), (ggml_fp16_t *)x->data, (int64_t)v.size());
            else
                for (int64_t r = 0; r < m; ++r)
                    ggml_get_type_traits(t)->from_float_ref(v.data() + r * k, (char *)x->data + r * x->nb[1], k);
            return x;
        };
        for (int l = 0; l < LAYERS; ++l) {
            const ggml_type t = types[l];
            const float s = 1.0f / std::sqrt((float)E);
            w.push_back(weight(GGML_TYPE_F32, E, 1, 1.0f));
            w.push_back(weight(t, E, H * HD, s));
            w.push_back(weight(t, E, HKV * HD, s));
            w.push_back(weight(t, E, HKV * HD, s));
            w.push_back(weight(t, H * HD, E, s));
            w.push_back(weight(GGML_TYPE_F32, E, 1, 1.0f));
            w.push_back(weight(t, E, FF, s));
            w.push_back(weight(t, E, FF, s));
            w.push_back(weight(t, FF, E, 1.0f / std::sqrt((float)FF)));
            kc.push_back(ggml_new_tensor_2d(wctx, GGML_TYPE_F16, HKV * HD, CELLS));
            vc.push_back(ggml_new_tensor_2d(wctx, GGML_TYPE_F16, HKV * HD, CELLS));
        }
        out_norm = weight(GGML_TYPE_F32, E, 1, 1.0f);
        out = weight(GGML_TYPE_Q4_0, E, VOCAB, 0.1f);
    }
    ~mini_decoder() { ggml_free(wctx); }
    void clear_cache() {
        for (int l = 0; l < LAYERS; ++l) {
            std::memset(kc[l]->data, 0, ggml_nbytes(kc[l]));
            std::memset(vc[l]->data, 0, ggml_nbytes(vc[l]));
        }
    }

    // logits of n tokens at positions p0.. (the cache cells p0..), after attending cells [0, p0 + n)
    std::vector<float> step(ggml_backend_t cpu, int p0, int n, uint32_t seed) {
        ggml_init_params ip = {4 * 1024 * 1024, nullptr, true};
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, E, n);
        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
        ggml_set_input(x);
        ggml_set_input(pos);
        ggml_tensor * x_in = x;
        const int n_kv = p0 + n;
        for (int l = 0; l < LAYERS; ++l) {
            ggml_tensor ** lw = &w[l * 9];
            ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), lw[0]);
            ggml_tensor * q = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, lw[1], h), HD, H, n), pos,
                                            nullptr, HD, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
            ggml_tensor * k = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, ggml_mul_mat(ctx, lw[2], h), HD, HKV, n), pos,
                                            nullptr, HD, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
            ggml_tensor * v = ggml_mul_mat(ctx, lw[3], h);
            ggml_tensor * kw = ggml_set_rows(ctx, kc[l], ggml_reshape_2d(ctx, k, HKV * HD, n), pos);
            ggml_tensor * vw = ggml_set_rows(ctx, vc[l], v, pos);
            // K: [HD, n_kv, HKV] view of the written cache; V^T: [n_kv, HD, HKV] made contiguous
            ggml_tensor * K = ggml_view_3d(ctx, kw, HD, n_kv, HKV, kw->nb[1], HD * kw->nb[0], 0);
            ggml_tensor * V = ggml_view_3d(ctx, vw, HD, n_kv, HKV, vw->nb[1], HD * vw->nb[0], 0);
            ggml_tensor * Vt = ggml_cont(ctx, ggml_permute(ctx, V, 1, 0, 2, 3));
            ggml_tensor * kq = ggml_mul_mat(ctx, K, ggml_permute(ctx, q, 0, 2, 1, 3)); // [n_kv, n, H]
            kq = ggml_soft_max_ext(ctx, kq, nullptr, 1.0f / std::sqrt((float)HD));
            ggml_tensor * kqv = ggml_mul_mat(ctx, Vt, kq);                        // [HD, n, H]
            ggml_tensor * o = ggml_cont(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3)); // [HD, H, n]
            x = ggml_add(ctx, x, ggml_mul_mat(ctx, lw[4], ggml_reshape_2d(ctx, o, H * HD, n)));
            ggml_tensor * h2 = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), lw[5]);
            ggml_tensor * s = ggml_swiglu_split(ctx, ggml_mul_mat(ctx, lw[6], h2), ggml_mul_mat(ctx, lw[7], h2));
            x = ggml_add(ctx, x, ggml_mul_mat(ctx, lw[8], s));
        }
        ggml_tensor * logits = ggml_mul_mat(ctx, out, ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), out_norm));
        ggml_set_output(logits);
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, logits);
        ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        REQUIRE(ggml_gallocr_alloc_graph(ga, gf));
        std::mt19937 rng(seed);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        std::vector<float> xin((size_t)E * n);
        for (float & f : xin)
            f = nd(rng);
        std::vector<int32_t> pin(n);
        for (int i = 0; i < n; ++i)
            pin[i] = p0 + i;
        ggml_backend_tensor_set(x_in, xin.data(), 0, xin.size() * sizeof(float));
        ggml_backend_tensor_set(pos, pin.data(), 0, pin.size() * sizeof(int32_t));
        REQUIRE(ggml_backend_graph_compute(cpu, gf) == GGML_STATUS_SUCCESS);
        std::vector<float> r((float *)logits->data, (float *)logits->data + (size_t)VOCAB * n);
        ggml_gallocr_free(ga);
        ggml_free(ctx);
        return r;
    }
};
} // namespace

TEST_CASE("barrier elision: a decoder's steps are bit-identical to one thread, any plan and thread count") {
    mini_decoder m(7);
    struct run {
        std::vector<float> logits, cache;
    };
    auto go = [&](int nth, bool node_barriers, int n) {
        ggml_backend_t cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, nth);
        ggml_backend_cpu_set_serial_below(cpu, 0);
        ggml_backend_cpu_set_node_barriers(cpu, node_barriers);
        m.clear_cache();
        run r;
        for (int st = 0; st < 3; ++st) {
            std::vector<float> l = m.step(cpu, st * n, n, 100 + st);
            r.logits.insert(r.logits.end(), l.begin(), l.end());
        }
        for (int l = 0; l < mini_decoder::LAYERS; ++l)
            for (ggml_tensor * c : {m.kc[l], m.vc[l]}) {
                const ggml_fp16_t * h = (const ggml_fp16_t *)c->data;
                for (int64_t i = 0; i < ggml_nelements(c); ++i)
                    r.cache.push_back(ggml_fp16_to_fp32(h[i]));
            }
        ggml_backend_free(cpu);
        return r;
    };
    for (int n : {1, 3}) {
        const run ref = go(1, true, n);
        bool finite = true;
        for (float f : ref.logits)
            finite = finite && std::isfinite(f);
        CHECK(finite);
        for (int nth : {2, 3})
            for (bool nb : {true, false})
                for (int rep = 0; rep < 3; ++rep) {
                    CAPTURE(n);
                    CAPTURE(nth);
                    CAPTURE(nb);
                    const run r = go(nth, nb, n);
                    REQUIRE(r.logits.size() == ref.logits.size());
                    CHECK(std::memcmp(r.logits.data(), ref.logits.data(), r.logits.size() * sizeof(float)) == 0);
                    CHECK(std::memcmp(r.cache.data(), ref.cache.data(), r.cache.size() * sizeof(float)) == 0);
                }
    }
}
