// CPU backend ops vs an independent double-precision reference, on the shared case table
// (backend_cases.h), with 1, 2 and 3 threads; plus the CPU backend glue (buffers, thread pool).
#include "backend_cases.h"
#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include "doctest_cstr.h"
#include <map>
#include <memory>
#include <vector>

// ---- reference (double, reads host memory through strides; no library code) ---------------------
namespace {

double at(const ggml_tensor * t, int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) {
    if (t->type == GGML_TYPE_Q8_0 || t->type == GGML_TYPE_Q4_0) { // nb[0] is a block: decode from the row start
        const uint8_t * row = (const uint8_t *)t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
        return backend_quant_value(t->type, row, i0);
    }
    const uint8_t * p = (const uint8_t *)t->data + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
    if (t->type == GGML_TYPE_F16) {
        uint16_t h;
        std::memcpy(&h, p, 2);
        return backend_half_to_double(h);
    }
    if (t->type == GGML_TYPE_I32) {
        int32_t k;
        std::memcpy(&k, p, 4);
        return k;
    }
    float f;
    std::memcpy(&f, p, 4);
    return f;
}

float param_f32(const ggml_tensor * t, int i) {
    float f;
    std::memcpy(&f, &t->op_params[i], 4);
    return f;
}

double silu(double x) { return x / (1 + std::exp(-x)); }

// softmax of a row in place; all -inf -> zeros
void softmax_row(std::vector<double> & v) {
    double mx = -INFINITY;
    for (double x : v)
        mx = std::max(mx, x);
    if (mx == -INFINITY) {
        std::fill(v.begin(), v.end(), 0.0);
        return;
    }
    double s = 0;
    for (double & x : v)
        s += (x = std::exp(x - mx));
    for (double & x : v)
        x /= s;
}

// Expected values of dst in ne order.
std::vector<double> reference(const ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t * ne = dst->ne;
    std::vector<double> out;
    out.reserve(ne[0] * ne[1] * ne[2] * ne[3]);
    auto each = [&](auto f) {
        for (int64_t i3 = 0; i3 < ne[3]; ++i3)
            for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                for (int64_t i1 = 0; i1 < ne[1]; ++i1)
                    for (int64_t i0 = 0; i0 < ne[0]; ++i0)
                        out.push_back(f(i0, i1, i2, i3));
    };
    switch (dst->op) {
        case GGML_OP_ADD:
        case GGML_OP_MUL:
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                const double x = at(a, i0, i1, i2, i3);
                const double y = at(b, i0 % b->ne[0], i1 % b->ne[1], i2 % b->ne[2], i3 % b->ne[3]);
                return dst->op == GGML_OP_ADD ? x + y : x * y;
            });
            break;
        case GGML_OP_SCALE:
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                return at(a, i0, i1, i2, i3) * param_f32(dst, 0);
            });
            break;
        case GGML_OP_SILU:
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { return silu(at(a, i0, i1, i2, i3)); });
            break;
        case GGML_OP_SWIGLU:
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                return silu(at(a, i0, i1, i2, i3)) * at(b, i0, i1, i2, i3);
            });
            break;
        case GGML_OP_RMS_NORM: {
            double inv = 0; // of the current row
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                if (i0 == 0) {
                    double ss = 0;
                    for (int64_t j = 0; j < ne[0]; ++j)
                        ss += at(a, j, i1, i2, i3) * at(a, j, i1, i2, i3);
                    inv = 1.0 / std::sqrt(ss / ne[0] + (double)param_f32(dst, 0));
                }
                return at(a, i0, i1, i2, i3) * inv;
            });
            break;
        }
        case GGML_OP_SET_ROWS: { // the destination's values, with the indexed rows replaced
            const ggml_tensor * c = dst->src[2];
            const bool quant = dst->type == GGML_TYPE_Q8_0 || dst->type == GGML_TYPE_Q4_0;
            std::vector<float> row(quant ? ne[0] : 0);
            std::vector<uint8_t> qrow(quant ? ggml_row_size(dst->type, ne[0]) : 0);
            int64_t cached = -1; // (i, i2, i3) of the source row in qrow
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                for (int64_t i = 0; i < c->ne[0]; ++i) {
                    if ((int64_t)at(c, i) != i1) continue;
                    if (!quant) return at(b, i0, i, i2, i3);
                    // a quantized destination holds the row as the reference quantizer writes it
                    const int64_t key = (i3 * b->ne[2] + i2) * b->ne[1] + i;
                    if (key != cached) {
                        for (int64_t j = 0; j < ne[0]; ++j)
                            row[j] = (float)at(b, j, i, i2, i3);
                        if (dst->type == GGML_TYPE_Q8_0)
                            quantize_row_q8_0_ref(row.data(), (block_q8_0 *)qrow.data(), ne[0]);
                        else
                            quantize_row_q4_0_ref(row.data(), (block_q4_0 *)qrow.data(), ne[0]);
                        cached = key;
                    }
                    return backend_quant_value(dst->type, qrow.data(), i0);
                }
                return at(a, i0, i1, i2, i3);
            });
            break;
        }
        case GGML_OP_DIAG_MASK_INF:
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                return i0 > dst->op_params[0] + i1 ? -INFINITY : at(a, i0, i1, i2, i3);
            });
            break;
        case GGML_OP_SOFT_MAX: {
            const double scale = param_f32(dst, 0);
            const int n_past = dst->op_params[1];
            for (int64_t i3 = 0; i3 < ne[3]; ++i3)
                for (int64_t i2 = 0; i2 < ne[2]; ++i2)
                    for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
                        std::vector<double> row(ne[0]);
                        for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
                            double v = at(a, i0, i1, i2, i3) * scale;
                            if (b) v += at(b, i0, i1, i2 % b->ne[2], i3 % b->ne[3]);
                            if (n_past >= 0 && i0 > n_past + i1) v = -INFINITY;
                            row[i0] = v;
                        }
                        softmax_row(row);
                        out.insert(out.end(), row.begin(), row.end());
                    }
            break;
        }
        case GGML_OP_ROPE: {
            const int n_dims = dst->op_params[0], mode = dst->op_params[1];
            const double base = param_f32(dst, 2), fscale = param_f32(dst, 3);
            const ggml_tensor * ff = dst->src[2];
            each([&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
                if (i0 >= n_dims) return at(a, i0, i1, i2, i3);
                const int64_t half = n_dims / 2;
                // pair index and partner element
                int64_t i, j0, j1;
                if (mode == GGML_ROPE_TYPE_NEOX) {
                    i = i0 % half;
                    j0 = i;
                    j1 = i + half;
                } else {
                    i = i0 / 2;
                    j0 = 2 * i;
                    j1 = 2 * i + 1;
                }
                double theta = at(b, i2) * fscale * std::pow(base, -2.0 * i / n_dims);
                if (ff) theta /= at(ff, i);
                const double x0 = at(a, j0, i1, i2, i3), x1 = at(a, j1, i1, i2, i3);
                return i0 == j0 ? x0 * std::cos(theta) - x1 * std::sin(theta)
                                : x0 * std::sin(theta) + x1 * std::cos(theta);
            });
            break;
        }
        case GGML_OP_KQ_MASK: { // token i1 sees cell i0: the cell holds the token's sequence at a position <= its own
            const ggml_tensor * pos = dst->src[2];
            each([&](int64_t i0, int64_t i1, int64_t, int64_t) {
                const int64_t s = (int64_t)at(b, i1);
                const uint64_t bits = (uint64_t)(uint32_t)(int32_t)at(a, 1, i0) |
                                      (uint64_t)(uint32_t)(int32_t)at(a, 2, i0) << 32;
                return (bits >> s & 1) && at(a, 0, i0) <= at(pos, i1) ? 0.0 : -INFINITY;
            });
            break;
        }
        case GGML_OP_ARGMAX:
            for (int64_t r = 0; r < a->ne[1]; ++r) {
                int64_t best = 0;
                for (int64_t i = 1; i < a->ne[0]; ++i)
                    if (at(a, i, r) > at(a, best, r)) best = i;
                out.push_back((double)best);
            }
            break;
        case GGML_OP_FLASH_ATTN_EXT: {
            // unfused: S = scale * K^T q + mask, causal, softmax, V P
            const ggml_tensor *q = a, *k = b, *v = dst->src[2], *m = dst->src[3];
            const double scale = param_f32(dst, 0);
            const int n_past = dst->op_params[1];
            const int64_t D = q->ne[0], n_tokens = q->ne[1], n_head = q->ne[2], n_kv = k->ne[1], n_head_kv = k->ne[2];
            const int64_t group = n_head / n_head_kv;
            // K and V once as doubles (quantized ones decoded by the test's own decoder): [n_head_kv][n_kv][D]
            std::vector<double> kd(n_head_kv * n_kv * D), vd(n_head_kv * n_kv * D);
            for (int64_t h = 0; h < n_head_kv; ++h)
                for (int64_t j = 0; j < n_kv; ++j)
                    for (int64_t c = 0; c < D; ++c) {
                        kd[(h * n_kv + j) * D + c] = at(k, c, j, h);
                        vd[(h * n_kv + j) * D + c] = at(v, c, j, h);
                    }
            std::vector<double> qr(D);
            for (int64_t it = 0; it < n_tokens; ++it)
                for (int64_t ih = 0; ih < n_head; ++ih) {
                    const int64_t h = ih / group;
                    for (int64_t c = 0; c < D; ++c)
                        qr[c] = at(q, c, it, ih);
                    std::vector<double> s(n_kv);
                    for (int64_t j = 0; j < n_kv; ++j) {
                        double d = 0;
                        const double * kr = &kd[(h * n_kv + j) * D];
                        for (int64_t c = 0; c < D; ++c)
                            d += qr[c] * kr[c];
                        s[j] = d * scale + (m ? at(m, j, it, ih % m->ne[2]) : 0.0);
                        if (n_past >= 0 && j > n_past + it) s[j] = -INFINITY;
                    }
                    softmax_row(s);
                    std::vector<double> o(D, 0.0);
                    for (int64_t j = 0; j < n_kv; ++j) {
                        if (s[j] == 0) continue;
                        const double * vr = &vd[(h * n_kv + j) * D];
                        for (int64_t c = 0; c < D; ++c)
                            o[c] += s[j] * vr[c];
                    }
                    out.insert(out.end(), o.begin(), o.end());
                }
            break;
        }
        default:
            FAIL("no reference for op ", ggml_op_name(dst->op));
            break;
    }
    return out;
}

// ---- runner ---------------------------------------------------------------------------------------
struct case_result {
    double nmse;
    bool computed;
};

// want: the reference, computed on the first run (the leaves are the same every run)
case_result run_case(ggml_backend_t backend, const backend_case & c, int n_threads, std::vector<double> & want) {
    backend_case_graph g(c, backend);
    ggml_backend_cpu_set_n_threads(backend, n_threads);
    ggml_backend_cpu_set_serial_below(backend, 0); // small cases too run on n_threads threads
    // before compute: SET_ROWS writes into its source's memory (CPU buffers are host memory)
    if (want.empty()) want = reference(g.out);
    case_result r = {INFINITY, g.compute(backend) == GGML_STATUS_SUCCESS};
    if (r.computed) r.nmse = backend_case_nmse(g.output(), want);
    return r;
}

void run_group(const char * group) {
    ggml_backend_t cpu = ggml_backend_cpu_init();
    int n = 0;
    for (const backend_case & c : backend_cases()) {
        if (c.group != group) continue;
        ++n;
        std::vector<int> thread_counts = {1, 2, 3};
        if (const char * e = std::getenv("GGML_TEST_THREADS")) thread_counts.push_back(std::atoi(e));  // e.g. 16
        std::vector<double> want;
        for (int nth : thread_counts) {
            const case_result r = run_case(cpu, c, nth, want);
            INFO(c.name, " threads ", nth, " nmse ", r.nmse, " (max ", c.max_nmse, ")");
            CHECK(r.computed);
            CHECK(r.nmse <= c.max_nmse);
        }
    }
    MESSAGE(std::string(group), ": ", n, " cases, each with 1, 2, 3 threads (and GGML_TEST_THREADS)");
    CHECK(n > 0);
    ggml_backend_free(cpu);
}

} // namespace

TEST_CASE("add") { run_group("add"); }
TEST_CASE("mul") { run_group("mul"); }
TEST_CASE("scale") { run_group("scale"); }
TEST_CASE("silu") { run_group("silu"); }
TEST_CASE("swiglu") { run_group("swiglu"); }
TEST_CASE("rms_norm") { run_group("rms_norm"); }
TEST_CASE("soft_max") { run_group("soft_max"); }
TEST_CASE("diag_mask_inf") { run_group("diag_mask_inf"); }
TEST_CASE("rope") { run_group("rope"); }
TEST_CASE("argmax") { run_group("argmax"); }
TEST_CASE("set_rows") { run_group("set_rows"); }
TEST_CASE("kq_mask") { run_group("kq_mask"); }
TEST_CASE("flash_attn_ext") { run_group("flash_attn_ext"); }

TEST_CASE("case table: names are unique and every case builds a graph") {
    std::map<std::string, int> seen;
    for (const backend_case & c : backend_cases())
        CHECK_MESSAGE(seen[c.name]++ == 0, c.name);
    CHECK(seen.size() > 300);
}

TEST_CASE("the comparison catches NaN, wrong infinities and wrong values") {
    CHECK(backend_case_nmse({1, 2, 3}, {1, 2, 3}) == 0);
    CHECK(std::isinf(backend_case_nmse({1, NAN, 3}, {1, 2, 3})));
    CHECK(std::isinf(backend_case_nmse({1, 2, INFINITY}, {1, 2, -INFINITY})));
    CHECK(backend_case_nmse({-INFINITY, 2}, {-INFINITY, 2}) == 0);
    CHECK(backend_case_nmse({1, 2, 3.01}, {1, 2, 3}) > BACKEND_NMSE_F32);
    CHECK(std::isinf(backend_case_nmse({1, 2}, {1, 2, 3})));
    // f16 helpers round-trip exactly
    for (double v : {1.0, -0.5, 1.0 / 1024, 65504.0, -3.0 / 1024})
        CHECK(backend_half_to_double(backend_double_to_half(v)) == v);
    CHECK(backend_half_to_double(0x7C00) == INFINITY);
}

TEST_CASE("poisoned outputs fail: a node the backend does not compute is caught") {
    // A graph whose op node is skipped (we compute nothing) must not pass the comparison.
    ggml_init_params ip = {16u * 1024 * 1024, nullptr, false};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 7, 3);
    ggml_tensor * b = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 7);
    ggml_tensor * y = ggml_add(ctx, a, b);
    for (int i = 0; i < 21; ++i)
        ((float *)a->data)[i] = (float)i;
    for (int i = 0; i < 7; ++i)
        ((float *)b->data)[i] = 1.0f;
    std::memset(y->data, 0xFF, ggml_nbytes(y));
    CHECK(std::isinf(backend_case_nmse(backend_case_values(y, (const uint8_t *)y->data), reference(y))));
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, y);
    ggml_graph_compute_with_ctx(ctx, gf, 2);
    CHECK(backend_case_nmse(backend_case_values(y, (const uint8_t *)y->data), reference(y)) == 0);
    ggml_free(ctx);
}
