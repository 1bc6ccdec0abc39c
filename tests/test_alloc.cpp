// test_alloc.cpp - the graph allocator: random graphs planned into one poisoned buffer equal the
// same graphs with memory per tensor, bit for bit; chains plan small; in-place where expected;
// outputs survive; a reserved buffer holds smaller graphs; context allocation limits.
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-impl.h"
#include "ggml.h"
#include "random_graph.h"

#include <cmath>
#include <cstring>
#include "doctest_cstr.h"
#include <string>
#include <vector>

namespace {

struct ctx_guard {
    ggml_context * ctx;
    explicit ctx_guard(size_t mem, bool no_alloc) { ctx = ggml_init({mem, nullptr, no_alloc}); }
    ~ctx_guard() { ggml_free(ctx); }
};

struct backend_guard {
    ggml_backend_t b = ggml_backend_cpu_init();
    backend_guard() { ggml_backend_cpu_set_n_threads(b, 2); }
    ~backend_guard() { ggml_backend_free(b); }
};

size_t meta_size() { return ggml_tensor_overhead() * 1024 + ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE); }

void fill(ggml_tensor * t, uint32_t seed) {
    std::mt19937 rng(seed);
    std::vector<float> v(ggml_nelements(t));
    for (auto & x : v)
        x = std::uniform_real_distribution<float>(-1.0f, 1.0f)(rng);
    ggml_backend_tensor_set(t, v.data(), 0, v.size() * 4);
}

} // namespace

TEST_CASE("random graphs planned into one poisoned buffer equal graphs with memory per tensor") {
    backend_guard cpu;
    int n_checked = 0, n_inplace = 0;
    size_t planned_total = 0, naive_total = 0;
    for (uint32_t seed = 1; seed <= 300; ++seed) {
        CAPTURE(seed);
        ctx_guard ca(meta_size(), true);
        ctx_guard cr(meta_size() + 32 * 1024 * 1024, false);
        rg_builder ba(ca.ctx, cpu.b, seed), br(cr.ctx, cpu.b, seed);
        rg_graph ga = ba.build(10 + (int)(seed % 30));
        rg_graph gr = br.build(10 + (int)(seed % 30));
        REQUIRE(ggml_graph_n_nodes(ga.gf) == ggml_graph_n_nodes(gr.gf));
        REQUIRE(ga.results.size() == gr.results.size());
        if (ggml_graph_n_nodes(ga.gf) == 0) continue;

        ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        REQUIRE(ggml_gallocr_alloc_graph(galloc, ga.gf));
        ggml_backend_buffer_t buf = ggml_gallocr_get_buffer(galloc);
        ggml_backend_buffer_clear(buf, 0xFF); // NaN everywhere: reading unwritten memory shows
        rg_set_inputs(ga);
        REQUIRE(ggml_backend_graph_compute(cpu.b, ga.gf) == GGML_STATUS_SUCCESS);
        REQUIRE(ggml_backend_graph_compute(cpu.b, gr.gf) == GGML_STATUS_SUCCESS);

        // every node got memory inside the buffer
        const char * base = (const char *)ggml_backend_buffer_get_base(buf);
        for (int i = 0; i < ggml_graph_n_nodes(ga.gf); ++i) {
            const ggml_tensor * t = ggml_graph_node(ga.gf, i);
            REQUIRE(t->data);
            if (t->buffer == buf) {
                CHECK((const char *)t->data >= base);
                CHECK((const char *)t->data + ggml_nbytes(t) <= base + ggml_backend_buffer_get_size(buf));
            }
            n_inplace += ggml_gallocr_is_inplace(galloc, t);
        }
        for (size_t k = 0; k < ga.results.size(); ++k) {
            std::string where;
            CHECK_MESSAGE(rg_bitwise_equal(ga.results[k], rg_values(gr.results[k]), &where), where);
            ++n_checked;
        }
        size_t inputs = 0;
        for (int i = 0; i < ggml_graph_n_leafs(ga.gf); ++i)
            inputs += ggml_nbytes(ggml_graph_leaf(ga.gf, i)) + 64;
        const size_t naive = ggml_gallocr_naive_size(ga.gf, ggml_backend_cpu_buffer_type());
        CHECK(ggml_gallocr_get_buffer_size(galloc) <= naive + inputs);
        planned_total += ggml_gallocr_get_buffer_size(galloc);
        naive_total += naive + inputs;
        ggml_gallocr_free(galloc);
    }
    MESSAGE("checked " << n_checked << " results, " << n_inplace << " in-place nodes; planned " << planned_total
                       << " bytes vs naive " << naive_total);
    CHECK(n_checked > 300);
    CHECK(n_inplace > 50);
    CHECK(planned_total < naive_total);
}

TEST_CASE("a 50-op chain plans at most three tensors") {
    backend_guard cpu;
    ctx_guard cw(1024 * 1024, false);
    ggml_tensor * w = ggml_new_tensor_2d(cw.ctx, GGML_TYPE_F32, 64, 64); // [64, 64] weight with data
    {
        std::mt19937 rng(7);
        for (int64_t i = 0; i < 64 * 64; ++i)
            ((float *)w->data)[i] = std::uniform_real_distribution<float>(-0.2f, 0.2f)(rng);
    }
    for (int kind = 0; kind < 2; ++kind) {
        CAPTURE(kind);
        ctx_guard ca(meta_size(), true);
        ggml_tensor * x = ggml_new_tensor_2d(ca.ctx, GGML_TYPE_F32, 64, 8); // [64, 8]
        ggml_set_input(x);
        ggml_tensor * y = x;
        for (int i = 0; i < 50; ++i)
            y = kind == 0 ? ggml_mul_mat(ca.ctx, w, y) : ggml_silu(ca.ctx, y);
        ggml_cgraph * gf = ggml_new_graph(ca.ctx);
        ggml_build_forward_expand(gf, y);
        ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
        REQUIRE(ggml_gallocr_alloc_graph(galloc, gf));
        const size_t one = ggml_nbytes(x);
        const size_t planned = ggml_gallocr_get_buffer_size(galloc);
        MESSAGE(std::string(kind == 0 ? "mul_mat" : "silu")
                << " chain: planned " << planned << " bytes, naive "
                << ggml_gallocr_naive_size(gf, ggml_backend_cpu_buffer_type()));
        CHECK(ggml_gallocr_naive_size(gf, ggml_backend_cpu_buffer_type()) >= 50 * one);
        CHECK(planned <= (kind == 0 ? 3 : 2) * one);
        // silu: the first can't overwrite the input, every later one runs in place
        if (kind == 1) {
            CHECK(!ggml_gallocr_is_inplace(galloc, ggml_graph_node(gf, 0)));
            for (int i = 1; i < 50; ++i)
                CHECK(ggml_gallocr_is_inplace(galloc, ggml_graph_node(gf, i)));
        } else {
            for (int i = 0; i < 50; ++i)
                CHECK(!ggml_gallocr_is_inplace(galloc, ggml_graph_node(gf, i)));
        }
        // and it computes the right thing (double-precision reference)
        fill(x, 11);
        std::vector<float> xv(64 * 8);
        ggml_backend_tensor_get(x, xv.data(), 0, xv.size() * 4);
        REQUIRE(ggml_backend_graph_compute(cpu.b, gf) == GGML_STATUS_SUCCESS);
        std::vector<double> ref(xv.begin(), xv.end()), nxt(64 * 8);
        for (int step = 0; step < 50; ++step) {
            for (int n = 0; n < 8; ++n)
                for (int m = 0; m < 64; ++m) {
                    if (kind == 0) {
                        double s = 0;
                        for (int k = 0; k < 64; ++k)
                            s += (double)((float *)w->data)[m * 64 + k] * ref[n * 64 + k];
                        nxt[n * 64 + m] = s;
                    } else {
                        const double v = ref[n * 64 + m];
                        nxt[n * 64 + m] = v / (1.0 + std::exp(-v));
                    }
                }
            ref = nxt;
        }
        std::vector<float> out(64 * 8);
        ggml_backend_tensor_get(y, out.data(), 0, out.size() * 4);
        double max_err = 0, max_ref = 0;
        for (int i = 0; i < 64 * 8; ++i) {
            max_err = std::max(max_err, std::fabs(out[i] - ref[i]));
            max_ref = std::max(max_ref, std::fabs(ref[i]));
        }
        CHECK(max_err <= 1e-4 * std::max(1.0, max_ref));
        ggml_gallocr_free(galloc);
    }
}

TEST_CASE("in-place only over a source with no other remaining consumer") {
    ctx_guard ca(meta_size(), true);
    ggml_tensor * x = ggml_new_tensor_2d(ca.ctx, GGML_TYPE_F32, 32, 4); // [32, 4]
    ggml_set_input(x);
    ggml_tensor * a = ggml_scale(ca.ctx, x, 0.5f);                 // x is an input: own block
    ggml_tensor * b = ggml_silu(ca.ctx, a);                        // a's only consumer: in place
    ggml_tensor * c = ggml_mul(ca.ctx, b, x);                      // over b (src0), not x (input)
    ggml_tensor * e = ggml_silu(ca.ctx, c);                        // c is still read by f: not in place
    ggml_tensor * f = ggml_scale(ca.ctx, c, 2.0f);                 // c's last consumer: in place
    ggml_tensor * g = ggml_add(ca.ctx, e, f);                      // over e
    ggml_tensor * v = ggml_view_2d(ca.ctx, g, 32, 2, g->nb[1], 0); // [32, 2] view of g
    ggml_tensor * h = ggml_scale(ca.ctx, v, 3.0f);                 // views are never taken over
    ggml_tensor * m = ggml_mul_mat(ca.ctx, h, h);                  // never in place
    ggml_cgraph * gf = ggml_new_graph(ca.ctx);
    ggml_build_forward_expand(gf, m);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    REQUIRE(ggml_gallocr_alloc_graph(galloc, gf));
    CHECK(!ggml_gallocr_is_inplace(galloc, a));
    CHECK(ggml_gallocr_is_inplace(galloc, b));
    CHECK(b->data == a->data);
    CHECK(ggml_gallocr_is_inplace(galloc, c));
    CHECK(c->data == b->data);
    CHECK(!ggml_gallocr_is_inplace(galloc, e));
    CHECK(ggml_gallocr_is_inplace(galloc, f));
    CHECK(f->data == c->data);
    CHECK(ggml_gallocr_is_inplace(galloc, g));
    CHECK(g->data == e->data);
    CHECK(v->data == g->data);
    CHECK(!ggml_gallocr_is_inplace(galloc, h));
    CHECK(!ggml_gallocr_is_inplace(galloc, m));
    CHECK(ggml_gallocr_get_offset(galloc, v) == ggml_gallocr_get_offset(galloc, g));
    CHECK(ggml_op_can_inplace(b, 0));
    CHECK(!ggml_op_can_inplace(m, 0));
    // allocating the same graph again plans it afresh: same marks, same placement
    const size_t off_h = ggml_gallocr_get_offset(galloc, h);
    REQUIRE(ggml_gallocr_alloc_graph(galloc, gf));
    CHECK(ggml_gallocr_is_inplace(galloc, b));
    CHECK(b->data == a->data);
    CHECK(v->data == g->data);
    CHECK(ggml_gallocr_get_offset(galloc, h) == off_h);
    ggml_gallocr_free(galloc);
}

TEST_CASE("a tensor flagged OUTPUT is never overwritten") {
    backend_guard cpu;
    ctx_guard ca(meta_size(), true);
    ggml_tensor * x = ggml_new_tensor_1d(ca.ctx, GGML_TYPE_F32, 100); // [100]
    ggml_set_input(x);
    std::vector<ggml_tensor *> chain;
    ggml_tensor * y = x;
    for (int i = 0; i < 10; ++i)
        chain.push_back(y = ggml_scale(ca.ctx, y, 1.5f));
    ggml_set_output(chain[4]);
    ggml_cgraph * gf = ggml_new_graph(ca.ctx);
    ggml_build_forward_expand(gf, y);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    REQUIRE(ggml_gallocr_alloc_graph(galloc, gf));
    CHECK(!ggml_gallocr_is_inplace(galloc, chain[5])); // would overwrite the output
    CHECK(ggml_gallocr_is_inplace(galloc, chain[6]));
    for (int i = 5; i < 10; ++i)
        CHECK(chain[i]->data != chain[4]->data);
    std::vector<float> xv(100);
    for (int i = 0; i < 100; ++i)
        xv[i] = 0.01f * i - 0.3f;
    ggml_backend_buffer_clear(ggml_gallocr_get_buffer(galloc), 0xFF);
    ggml_backend_tensor_set(x, xv.data(), 0, 400);
    REQUIRE(ggml_backend_graph_compute(cpu.b, gf) == GGML_STATUS_SUCCESS);
    std::vector<float> o4(100), o9(100);
    ggml_backend_tensor_get(chain[4], o4.data(), 0, 400);
    ggml_backend_tensor_get(chain[9], o9.data(), 0, 400);
    for (int i = 0; i < 100; ++i) {
        CHECK(o4[i] == doctest::Approx(xv[i] * std::pow(1.5, 5)).epsilon(1e-5));
        CHECK(o9[i] == doctest::Approx(xv[i] * std::pow(1.5, 10)).epsilon(1e-5));
    }
    ggml_gallocr_free(galloc);
}

TEST_CASE("a buffer reserved for a big graph holds a smaller one without growing") {
    auto build = [](ggml_context * ctx, int64_t n) {
        ggml_tensor * x = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, n); // [64, n]
        ggml_set_input(x);
        ggml_tensor * y = ggml_rms_norm(ctx, x, 1e-5f);
        ggml_tensor * s = ggml_soft_max(ctx, ggml_mul_mat(ctx, y, y)); // [n, n]
        ggml_cgraph * gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, ggml_add(ctx, s, s));
        return gf;
    };
    ctx_guard c1(meta_size(), true), c2(meta_size(), true), c3(meta_size(), true);
    ggml_gallocr_t galloc = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
    REQUIRE(ggml_gallocr_reserve(galloc, build(c1.ctx, 32)));
    const size_t reserved = ggml_gallocr_get_buffer_size(galloc);
    ggml_backend_buffer_t buf = ggml_gallocr_get_buffer(galloc);
    CHECK(reserved > 0);
    REQUIRE(ggml_gallocr_alloc_graph(galloc, build(c2.ctx, 8)));
    CHECK(ggml_gallocr_get_buffer(galloc) == buf);
    CHECK(ggml_gallocr_get_buffer_size(galloc) == reserved);
    // a bigger graph grows the buffer
    REQUIRE(ggml_gallocr_alloc_graph(galloc, build(c3.ctx, 64)));
    CHECK(ggml_gallocr_get_buffer_size(galloc) > reserved);
    ggml_gallocr_free(galloc);
}

namespace {
ggml_backend_buffer_type small_buft; // the CPU buffer type with a 1000-byte limit
size_t small_max_size(ggml_backend_buffer_type_t) { return 1000; }
size_t small_alignment(ggml_backend_buffer_type_t) { return 256; }
} // namespace

TEST_CASE("context allocation honours alignment and the buffer type's max size") {
    small_buft = *ggml_backend_cpu_buffer_type();
    small_buft.iface.get_max_size = small_max_size;
    small_buft.iface.get_alignment = small_alignment;
    ctx_guard c(meta_size(), true);
    ggml_tensor * a = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, 10); // 40 bytes
    ggml_tensor * b = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, 3);
    ggml_tensor * v = ggml_view_1d(c.ctx, a, 5, 8);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(c.ctx, &small_buft);
    REQUIRE(buf);
    CHECK((uintptr_t)b->data - (uintptr_t)a->data == 256);
    CHECK(v->data == (char *)a->data + 8);
    CHECK(v->buffer == buf);
    ggml_backend_buffer_free(buf);

    ctx_guard c2(meta_size(), true);
    ggml_new_tensor_1d(c2.ctx, GGML_TYPE_F32, 200); // 800 bytes: fits alone
    ggml_new_tensor_1d(c2.ctx, GGML_TYPE_F32, 200); // two need 1024 > 1000
    CHECK(ggml_backend_alloc_ctx_tensors_from_buft(c2.ctx, &small_buft) == nullptr);
    ctx_guard c3(meta_size(), true);
    ggml_new_tensor_1d(c3.ctx, GGML_TYPE_F32, 300); // 1200 bytes: too big for one buffer
    CHECK(ggml_backend_alloc_ctx_tensors_from_buft(c3.ctx, &small_buft) == nullptr);
}
