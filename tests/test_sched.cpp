// test_sched.cpp - the backend scheduler: one CPU backend is a pass-through; two CPU backends and
// a simulated device backend (its own buffer type, some ops unsupported) split the graph, copy
// inputs between backends and still give bit-identical results; copies through non-host buffers.
#include "ggml-alloc.h"
#include "ggml-backend-impl.h"
#include "ggml-backend.h"
#include "ggml-impl.h"
#include "ggml.h"
#include "random_graph.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include "doctest_cstr.h"
#include <string>
#include <vector>

namespace {

size_t meta_size() { return ggml_tensor_overhead() * 1024 + ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE); }

struct ctx_guard {
    ggml_context * ctx;
    ctx_guard(size_t mem, bool no_alloc) { ctx = ggml_init({mem, nullptr, no_alloc}); }
    ~ctx_guard() { ggml_free(ctx); }
};

ggml_backend_t new_cpu() {
    ggml_backend_t b = ggml_backend_cpu_init();
    ggml_backend_cpu_set_n_threads(b, 2);
    return b;
}

// ---- a simulated device: host memory behind its own buffer type (is_host configurable), graphs
// run by an inner CPU backend, and SOFT_MAX "not supported" so the scheduler must fall back.
struct sim_buffer_ctx {
    void * data;
};
void sim_buf_free(ggml_backend_buffer_t b) {
    std::free(((sim_buffer_ctx *)b->context)->data), delete (sim_buffer_ctx *)b->context;
}
void * sim_buf_base(ggml_backend_buffer_t b) { return ((sim_buffer_ctx *)b->context)->data; }
void sim_buf_set(ggml_backend_buffer_t, ggml_tensor * t, const void * d, size_t off, size_t n) {
    std::memcpy((char *)t->data + off, d, n);
}
void sim_buf_get(ggml_backend_buffer_t, const ggml_tensor * t, void * d, size_t off, size_t n) {
    std::memcpy(d, (const char *)t->data + off, n);
}
void sim_buf_clear(ggml_backend_buffer_t b, uint8_t v) { std::memset(sim_buf_base(b), v, b->size); }

const char * sim_buft_name(ggml_backend_buffer_type_t) { return "SIM"; }
ggml_backend_buffer_t sim_buft_alloc(ggml_backend_buffer_type_t buft, size_t size) {
    ggml_backend_buffer_i i{};
    i.free_buffer = sim_buf_free;
    i.get_base = sim_buf_base;
    i.set_tensor = sim_buf_set;
    i.get_tensor = sim_buf_get;
    i.clear = sim_buf_clear;
    auto * c = new sim_buffer_ctx{std::aligned_alloc(128, (size + 128) / 128 * 128)};
    return ggml_backend_buffer_init(buft, i, c, size);
}
size_t sim_buft_align(ggml_backend_buffer_type_t) { return 128; }
bool sim_buft_host(ggml_backend_buffer_type_t buft) { return buft->context != nullptr; }
ggml_backend_buffer_type sim_buft_host_t = {
    {sim_buft_name, sim_buft_alloc, sim_buft_align, nullptr, nullptr, sim_buft_host}, (void *)1};
ggml_backend_buffer_type sim_buft_dev_t = {
    {sim_buft_name, sim_buft_alloc, sim_buft_align, nullptr, nullptr, sim_buft_host}, nullptr};

const char * sim_name(ggml_backend_t) { return "SIM"; }
void sim_free(ggml_backend_t b) { ggml_backend_free((ggml_backend_t)b->context), delete b; }
ggml_backend_buffer_type_t sim_default_buft(ggml_backend_t) { return &sim_buft_host_t; }
int sim_n_computed = 0;
ggml_status sim_compute(ggml_backend_t b, ggml_cgraph * gf) {
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * n = gf->nodes[i];
        if (n->op == GGML_OP_SOFT_MAX) return GGML_STATUS_FAILED; // must never be sent here
        for (int j = 0; j < GGML_MAX_SRC; ++j) {                  // every input must live in SIM memory or be a view
            const ggml_tensor * s = n->src[j];
            if (s && s->buffer && s->buffer->buft != &sim_buft_host_t && !ggml_is_view_op(n->op))
                return GGML_STATUS_FAILED;
        }
        sim_n_computed += n->op != GGML_OP_NONE && !ggml_is_view_op(n->op);
    }
    return ggml_backend_graph_compute((ggml_backend_t)b->context, gf);
}
bool sim_supports_op(ggml_backend_t b, const ggml_tensor * op) {
    return op->op != GGML_OP_SOFT_MAX && ggml_backend_supports_op((ggml_backend_t)b->context, op);
}
bool sim_supports_buft(ggml_backend_t, ggml_backend_buffer_type_t buft) { return buft == &sim_buft_host_t; }

ggml_backend_t new_sim() {
    ggml_backend_i i{};
    i.get_name = sim_name;
    i.free = sim_free;
    i.get_default_buffer_type = sim_default_buft;
    i.graph_compute = sim_compute;
    i.supports_op = sim_supports_op;
    i.supports_buft = sim_supports_buft;
    return new ggml_backend{i, new_cpu()};
}

// place the graph's PARAM inputs in one WEIGHTS buffer of `owner`
ggml_backend_buffer_t place_weights(const rg_graph & g, ggml_backend_t owner) {
    size_t total = 0;
    for (auto * w : g.weights)
        total += ggml_nbytes(w) + 256;
    if (total == 0) return nullptr;
    ggml_backend_buffer_t buf = ggml_backend_alloc_buffer(owner, total);
    REQUIRE(buf);
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    char * p = (char *)ggml_backend_buffer_get_base(buf);
    for (auto * w : g.weights) {
        ggml_backend_tensor_alloc(buf, w, p);
        p += (ggml_nbytes(w) + 255) / 256 * 256;
    }
    return buf;
}

struct run_stats {
    int n_graphs = 0, n_multi_split = 0, n_copies = 0;
};

// Build the same random graph twice; run one through a scheduler over `backends` (weights owned
// by backends[weight_owner], optionally some nodes forced onto backends[force]), the other with
// memory per tensor on a plain CPU backend; all results must match bit for bit.
void check_random(std::vector<ggml_backend_t> backends, int weight_owner, int force, uint32_t seed, run_stats & st) {
    CAPTURE(seed);
    ggml_backend_t ref_cpu = new_cpu();
    ctx_guard ca(meta_size(), true), cr(meta_size() + 32 * 1024 * 1024, false);
    rg_builder ba(ca.ctx, ref_cpu, seed), br(cr.ctx, ref_cpu, seed);
    rg_graph ga = ba.build(10 + (int)(seed % 30)), gr = br.build(10 + (int)(seed % 30));
    if (ggml_graph_n_nodes(ga.gf) == 0) {
        ggml_backend_free(ref_cpu);
        return;
    }
    ggml_backend_buffer_t wbuf = weight_owner >= 0 ? place_weights(ga, backends[weight_owner]) : nullptr;
    ggml_backend_sched_t sched = ggml_backend_sched_new(backends.data(), (int)backends.size(), GGML_DEFAULT_GRAPH_SIZE);
    if (force >= 0) {
        std::mt19937 rng(seed);
        for (int i = 0; i < ggml_graph_n_nodes(ga.gf); ++i) {
            if (rng() % 3 == 0)
                ggml_backend_sched_set_tensor_backend(sched, ggml_graph_node(ga.gf, i), backends[force]);
        }
    }
    REQUIRE(ggml_backend_sched_alloc_graph(sched, ga.gf));
    for (int b = 0; b < (int)backends.size(); ++b) { // poison every compute buffer
        ggml_backend_buffer_t cb = ggml_gallocr_get_buffer(ggml_backend_sched_get_gallocr(sched, b));
        if (cb) ggml_backend_buffer_clear(cb, 0xFF);
    }
    rg_set_inputs(ga);
    REQUIRE(ggml_backend_sched_graph_compute(sched, ga.gf) == GGML_STATUS_SUCCESS);
    REQUIRE(ggml_backend_graph_compute(ref_cpu, gr.gf) == GGML_STATUS_SUCCESS);
    for (size_t k = 0; k < ga.results.size(); ++k) {
        std::string where;
        CHECK_MESSAGE(rg_bitwise_equal(ga.results[k], rg_values(gr.results[k]), &where), where);
    }
    st.n_graphs++;
    st.n_multi_split += ggml_backend_sched_get_n_splits(sched) > 1;
    st.n_copies += ggml_backend_sched_get_n_copies(sched);
    if (backends.size() == 1) {
        CHECK(ggml_backend_sched_get_n_splits(sched) == 1);
        CHECK(ggml_backend_sched_get_n_copies(sched) == 0);
    }
    // the caller's graph is restored on reset: no source points at a scheduler copy
    ggml_backend_sched_reset(sched);
    for (int i = 0; i < ggml_graph_n_nodes(ga.gf); ++i) {
        for (auto * s : ggml_graph_node(ga.gf, i)->src) {
            if (s) CHECK(std::strchr(s->name, '#') == nullptr);
        }
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
    ggml_backend_free(ref_cpu);
}

} // namespace

TEST_CASE("one CPU backend: the scheduler is a pass-through") {
    ggml_backend_t cpu = new_cpu();
    run_stats st;
    for (uint32_t seed = 1; seed <= 100; ++seed)
        check_random({cpu}, 0, -1, seed, st);
    CHECK(st.n_graphs > 90);
    CHECK(st.n_multi_split == 0);
    CHECK(st.n_copies == 0);
    ggml_backend_free(cpu);
}

TEST_CASE("two CPU backends: weights in one, inputs in the other, forced nodes: split, copy, same result") {
    ggml_backend_t c0 = new_cpu(), c1 = new_cpu();
    run_stats st;
    for (uint32_t seed = 1; seed <= 100; ++seed)
        check_random({c0, c1}, 0, -1, seed, st);
    MESSAGE("weights on backend 0: " << st.n_multi_split << " of " << st.n_graphs << " graphs split, " << st.n_copies
                                     << " copies");
    CHECK(st.n_copies > 0);
    run_stats st2;
    for (uint32_t seed = 101; seed <= 200; ++seed)
        check_random({c0, c1}, 1, 0, seed, st2);
    MESSAGE("weights on backend 1 + forced nodes: " << st2.n_multi_split << " of " << st2.n_graphs << " graphs split, "
                                                    << st2.n_copies << " copies");
    CHECK(st2.n_multi_split > st2.n_graphs / 5);
    CHECK(st2.n_copies > 0);
    ggml_backend_free(c0);
    ggml_backend_free(c1);
}

TEST_CASE("a device backend without SOFT_MAX: those nodes fall back to the CPU, the rest stays on the device") {
    ggml_backend_t sim = new_sim(), cpu = new_cpu();
    run_stats st;
    sim_n_computed = 0;
    for (uint32_t seed = 1; seed <= 100; ++seed)
        check_random({sim, cpu}, 0, -1, seed, st);
    MESSAGE("sim+cpu: " << st.n_multi_split << " of " << st.n_graphs << " graphs split, " << st.n_copies << " copies, "
                        << sim_n_computed << " nodes on SIM");
    CHECK(sim_n_computed > 500);
    CHECK(st.n_multi_split > 10);

    // a hand-made attention-like graph: where does each node run?
    ctx_guard cw(meta_size(), true), cg(meta_size(), true);
    ggml_tensor * w = ggml_new_tensor_2d(cw.ctx, GGML_TYPE_F32, 16, 16); // [16, 16] weight
    ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(cw.ctx, sim);
    REQUIRE(wbuf);
    ggml_backend_buffer_set_usage(wbuf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<float> wv(256);
    for (int i = 0; i < 256; ++i)
        wv[i] = 0.01f * (i % 17) - 0.05f;
    ggml_backend_tensor_set(w, wv.data(), 0, sizeof(float) * 256);
    ggml_tensor * x = ggml_new_tensor_2d(cg.ctx, GGML_TYPE_F32, 16, 5); // [16, 5]
    ggml_set_input(x);
    ggml_tensor * h = ggml_mul_mat(cg.ctx, w, x);                                             // [16, 5] on SIM (weight)
    ggml_tensor * n = ggml_rms_norm(cg.ctx, h, 1e-5f);                                        // follows: SIM
    ggml_tensor * kq = ggml_mul_mat(cg.ctx, n, n);                                            // [5, 5] SIM
    ggml_tensor * sm = ggml_soft_max(cg.ctx, kq);                                             // CPU (fallback)
    ggml_tensor * o = ggml_mul_mat(cg.ctx, ggml_cont(cg.ctx, ggml_transpose(cg.ctx, n)), sm); // [16, 5]
    ggml_tensor * y = ggml_mul_mat(cg.ctx, w, o);                                             // SIM again (weight)
    ggml_cgraph * gf = ggml_new_graph(cg.ctx);
    ggml_build_forward_expand(gf, y);
    ggml_backend_t bk[2] = {sim, cpu};
    ggml_backend_sched_t sched = ggml_backend_sched_new(bk, 2, GGML_DEFAULT_GRAPH_SIZE);
    REQUIRE(ggml_backend_sched_reserve(sched, gf));
    const size_t sim_size = ggml_backend_sched_get_buffer_size(sched, sim);
    CHECK(sim_size > 0);
    REQUIRE(ggml_backend_sched_alloc_graph(sched, gf));
    CHECK(ggml_backend_sched_get_buffer_size(sched, sim) == sim_size); // reserve was enough
    CHECK(ggml_backend_sched_get_tensor_backend(sched, h) == sim);
    CHECK(ggml_backend_sched_get_tensor_backend(sched, n) == sim);
    CHECK(ggml_backend_sched_get_tensor_backend(sched, kq) == sim);
    CHECK(ggml_backend_sched_get_tensor_backend(sched, sm) == cpu);
    CHECK(ggml_backend_sched_get_tensor_backend(sched, y) == sim);
    CHECK(ggml_backend_sched_get_tensor_backend(sched, x) == cpu); // inputs live on the host
    CHECK(ggml_backend_sched_get_buffer_backend(sched, wbuf) == sim);
    CHECK(ggml_backend_sched_get_n_splits(sched) >= 3);
    CHECK(ggml_backend_sched_get_n_copies(sched) >= 3); // x -> SIM, kq -> CPU, sm -> SIM
    std::vector<float> xv(80);
    for (int i = 0; i < 80; ++i)
        xv[i] = 0.1f * (i % 9) - 0.4f;
    ggml_backend_tensor_set(x, xv.data(), 0, sizeof(float) * 80);
    REQUIRE(ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS);
    // reference in double precision
    auto mm = [](const std::vector<double> & a, const std::vector<double> & b, int K, int M, int N) {
        std::vector<double> r(M * N); // a [K, M], b [K, N] -> [M, N]
        for (int j = 0; j < N; ++j)
            for (int i = 0; i < M; ++i) {
                double s = 0;
                for (int k = 0; k < K; ++k)
                    s += a[i * K + k] * b[j * K + k];
                r[j * M + i] = s;
            }
        return r;
    };
    std::vector<double> W(wv.begin(), wv.end()), X(xv.begin(), xv.end());
    std::vector<double> H = mm(W, X, 16, 16, 5), N(80);
    for (int t = 0; t < 5; ++t) {
        double ss = 0;
        for (int i = 0; i < 16; ++i)
            ss += H[t * 16 + i] * H[t * 16 + i];
        for (int i = 0; i < 16; ++i)
            N[t * 16 + i] = H[t * 16 + i] / std::sqrt(ss / 16 + 1e-5);
    }
    std::vector<double> KQ = mm(N, N, 16, 5, 5), SM(25);
    for (int r = 0; r < 5; ++r) {
        double mx = -1e300, s = 0;
        for (int c = 0; c < 5; ++c)
            mx = std::max(mx, KQ[r * 5 + c]);
        for (int c = 0; c < 5; ++c)
            s += SM[r * 5 + c] = std::exp(KQ[r * 5 + c] - mx);
        for (int c = 0; c < 5; ++c)
            SM[r * 5 + c] /= s;
    }
    std::vector<double> NT(80); // [5, 16]
    for (int t = 0; t < 5; ++t)
        for (int i = 0; i < 16; ++i)
            NT[i * 5 + t] = N[t * 16 + i];
    std::vector<double> O = mm(NT, SM, 5, 16, 5), Y = mm(W, O, 16, 16, 5);
    std::vector<float> yv(80);
    ggml_backend_tensor_get(y, yv.data(), 0, sizeof(float) * 80);
    for (int i = 0; i < 80; ++i)
        CHECK(yv[i] == doctest::Approx(Y[i]).epsilon(1e-4));
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(wbuf);
    ggml_backend_free(sim);
    ggml_backend_free(cpu);
}

TEST_CASE("tensor copies between non-host buffers bounce through the host") {
    ctx_guard c(meta_size(), true);
    ggml_tensor * a = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 7, 3);
    ggml_tensor * b = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 7, 3);
    ggml_tensor * h = ggml_new_tensor_2d(c.ctx, GGML_TYPE_F32, 7, 3);
    ggml_backend_buffer_t d1 = ggml_backend_buft_alloc_buffer(&sim_buft_dev_t, 512);
    ggml_backend_buffer_t d2 = ggml_backend_buft_alloc_buffer(&sim_buft_dev_t, 512);
    ggml_backend_buffer_t hb = ggml_backend_buft_alloc_buffer(ggml_backend_cpu_buffer_type(), 512);
    CHECK(!ggml_backend_buffer_is_host(d1));
    ggml_backend_tensor_alloc(d1, a, ggml_backend_buffer_get_base(d1));
    ggml_backend_tensor_alloc(d2, b, ggml_backend_buffer_get_base(d2));
    ggml_backend_tensor_alloc(hb, h, ggml_backend_buffer_get_base(hb));
    std::vector<float> v(21), out(21);
    for (int i = 0; i < 21; ++i)
        v[i] = i * 1.25f - 3.0f;
    ggml_backend_tensor_set(a, v.data(), 0, 84);
    ggml_backend_tensor_copy(a, b); // device -> device
    ggml_backend_tensor_get(b, out.data(), 0, 84);
    CHECK(out == v);
    ggml_backend_buffer_clear(hb, 0);
    ggml_backend_tensor_copy(b, h); // device -> host
    CHECK(std::memcmp(h->data, v.data(), 84) == 0);
    ggml_backend_buffer_clear(d1, 0xFF);
    ggml_backend_tensor_copy(h, a); // host -> device
    ggml_backend_tensor_get(a, out.data(), 0, 84);
    CHECK(out == v);
    // partial get through a view
    ggml_tensor * row = ggml_view_1d(c.ctx, a, 7, 7 * 4);
    float r[7];
    ggml_backend_tensor_get(row, r, 0, sizeof(r));
    CHECK(r[0] == v[7]);
    CHECK(r[6] == v[13]);
    ggml_backend_buffer_free(d1);
    ggml_backend_buffer_free(d2);
    ggml_backend_buffer_free(hb);
}

TEST_CASE("compute twice, then a new graph without reset: each result is right") {
    ggml_backend_t c0 = new_cpu(), c1 = new_cpu();
    ggml_backend_t bk[2] = {c0, c1};
    ggml_backend_sched_t sched = ggml_backend_sched_new(bk, 2, GGML_DEFAULT_GRAPH_SIZE);
    for (int round = 0; round < 3; ++round) {
        CAPTURE(round);
        ctx_guard c(meta_size(), true);
        ggml_tensor * x = ggml_new_tensor_1d(c.ctx, GGML_TYPE_F32, 33); // [33]
        ggml_set_input(x);
        ggml_tensor * a = ggml_scale(c.ctx, x, 2.0f + round);
        ggml_tensor * b = ggml_silu(c.ctx, a);
        ggml_backend_sched_set_tensor_backend(sched, b, c0);
        ggml_tensor * y = ggml_add(c.ctx, ggml_scale(c.ctx, b, 0.5f), a);
        ggml_cgraph * gf = ggml_new_graph(c.ctx);
        ggml_build_forward_expand(gf, y);
        std::vector<float> xv(33), yv(33);
        for (int i = 0; i < 33; ++i)
            xv[i] = 0.1f * i - 1.5f;
        for (int rep = 0; rep < 2; ++rep) {
            if (rep == 0) {
                REQUIRE(ggml_backend_sched_alloc_graph(sched, gf));
                REQUIRE(ggml_backend_sched_alloc_graph(sched, gf)); // twice: re-planned, not overlapped
                ggml_backend_tensor_set(x, xv.data(), 0, sizeof(float) * 33);
            }
            REQUIRE(ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS);
            ggml_backend_tensor_get(y, yv.data(), 0, sizeof(float) * 33);
            for (int i = 0; i < 33; ++i) {
                const double av = (double)xv[i] * (2.0 + round);
                CHECK(yv[i] == doctest::Approx(0.5 * av / (1.0 + std::exp(-av)) + av).epsilon(1e-5));
            }
        }
        CHECK(ggml_backend_sched_get_n_splits(sched) >= 1);
        // no reset here: the next round's graph must be noticed as new
    }
    ggml_backend_sched_free(sched);
    ggml_backend_free(c0);
    ggml_backend_free(c1);
}
