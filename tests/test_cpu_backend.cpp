// CPU backend glue: host buffer type, wrapped buffers, backend identity, supports_op, graph
// compute (errors, view/empty nodes, in-place), the thread pool barrier, and per-node overhead.
#include "cpu/threadpool.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <doctest/doctest.h>
#include <string>
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
