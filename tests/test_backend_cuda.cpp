// CUDA backend vs the CPU backend: every case of the shared table (backend_cases.h) plus CUDA-only
// paths: q8_0 mat-vec (mmvq) with odd row counts, cuBLAS prefill (N = 512), every other quant type
// (q4_0 ... q6_K: mat-vec N 1..8, prompt GEMM N 9..17 and 511..513, against the CPU and float64; get_rows;
// repacked set/get; the fused groups), attention through mul_mat on permuted f16 KV-cache views with GQA,
// fused RMS_NORM+MUL, flash-decoding splits, copies among f32/f16/q8_0, CUDA-graph replay after data and
// pointer changes, buffer errors.
// Without a GPU (or a build without CUDA) it prints SKIPPED and exits 77 (CTest SKIP_RETURN_CODE).
#include "cuda_test_util.h"  // first: exits 77 (skip) without a GPU
#include "backend_cases.h"
#include "ggml-backend.h"
#include "ggml-cost.h"
#include "ggml.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include "doctest_cstr.h"
#include <map>
#include <set>
#include <string>
#include <tuple>

#ifdef GGML_USE_CUDA
#include <cuda_runtime.h> // the device's compute capability (the wgmma GEMM case)

namespace {

using build_fn = std::function<ggml_tensor *(ggml_context *)>;

// Leaf bytes: the table's fill for f32/f16/i32; quantized leaves (q8_0, q4_0 ... q6_K) get random f32 in
// [-1, 1] quantized by the type's reference quantizer (traits from_float_ref).
std::vector<uint8_t> make_leaf_bytes(const ggml_tensor * t, uint64_t seed) {
    if (!ggml_is_quantized(t->type)) return backend_case_leaf_data(t, seed);
    const int64_t n = ggml_nelements(t);
    std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> f(n);
    for (auto & x : f)
        x = u(rng);
    std::vector<uint8_t> out(ggml_nbytes(t));
    ggml_get_type_traits(t->type)->from_float_ref(f.data(), out.data(), n);
    return out;
}

// The same, kept for leaves of 1 MiB and more (the last ones made, up to 1 GiB): the layer tests set the same
// Llama-sized weights again and again (the CPU and the CUDA run of a comparison, its galloc variant, the bit-for-bit
// pairs), and the reference quantizers of the K-quants take seconds for one 4096 x 11008 weight.
std::vector<uint8_t> leaf_bytes(const ggml_tensor * t, uint64_t seed) {
    if (ggml_nbytes(t) < (1u << 20)) return make_leaf_bytes(t, seed);
    using key = std::tuple<int, int64_t, int64_t, int64_t, int64_t, uint64_t, std::string>;
    static std::map<key, std::vector<uint8_t>> made;
    static std::vector<key> order; // oldest first
    static size_t held = 0;
    const key k{(int)t->type, t->ne[0], t->ne[1], t->ne[2], t->ne[3], seed, t->name};
    if (const auto it = made.find(k); it != made.end()) return it->second;
    std::vector<uint8_t> out = make_leaf_bytes(t, seed);
    while (!order.empty() && held + out.size() > (1u << 30)) {
        held -= made[order.front()].size();
        made.erase(order.front());
        order.erase(order.begin());
    }
    made[k] = out;
    order.push_back(k);
    held += out.size();
    return out;
}

// Values of t (in ne order) from its bytes; quantized rows are dequantized with the reference code.
std::vector<double> values_of(const ggml_tensor * t, const std::vector<uint8_t> & bytes) {
    if (!ggml_is_quantized(t->type)) return backend_case_values(t, bytes.data());
    std::vector<double> v;
    std::vector<float> row(t->ne[0]);
    const ggml_to_float_t to_float = ggml_get_type_traits(t->type)->to_float;
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1) {
                to_float(bytes.data() + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3], row.data(), t->ne[0]);
                v.insert(v.end(), row.begin(), row.end());
            }
    return v;
}

struct run_result {
    std::vector<double> values;
    bool ok = false;
};

// Build in a no_alloc context, place every tensor in one buffer of `backend`, fill leaves,
// poison the rest (0xFF: NaN / -1), compute `reps` times, read the output.
// pad > 0: a leading unused tensor of pad floats shifts every address in the buffer.
run_result run_on(ggml_backend_t backend, const build_fn & build, uint64_t seed, int reps = 1, int64_t pad = 0) {
    ggml_init_params ip = {64u * 1024 * 1024, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    if (pad > 0) ggml_set_name(ggml_new_tensor_1d(ctx, GGML_TYPE_F32, pad), "pad");
    ggml_tensor * out = build(ctx);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 4096);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    REQUIRE(buf != nullptr);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src) continue;
        if (t->op == GGML_OP_NONE) {
            const std::vector<uint8_t> b = leaf_bytes(t, seed);
            REQUIRE(b.size() == ggml_nbytes(t));
            ggml_backend_tensor_set(t, b.data(), 0, b.size());
        } else {
            const std::vector<uint8_t> poison(ggml_nbytes(t), 0xFF);
            ggml_backend_tensor_set(t, poison.data(), 0, poison.size());
        }
    }
    run_result r;
    r.ok = true;
    for (int i = 0; i < reps && r.ok; ++i)
        r.ok = ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS;
    ggml_backend_synchronize(backend);
    if (r.ok) {
        std::vector<uint8_t> bytes(ggml_nbytes(out));
        ggml_backend_tensor_get(out, bytes.data(), 0, bytes.size());
        r.values = values_of(out, bytes);
    }
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return r;
}

struct backends {
    ggml_backend_t cpu = nullptr, cuda = nullptr;
    backends() {
        cpu = ggml_backend_cpu_init();
        ggml_backend_cpu_set_n_threads(cpu, 2);
        cuda = ggml_backend_cuda_init(0);
        REQUIRE(cuda != nullptr);
    }
    ~backends() {
        ggml_backend_free(cuda);
        ggml_backend_free(cpu);
    }
};

// CUDA vs CPU on one graph; the node producing the output must be supported by CUDA.
void compare(backends & be, const std::string & name, const build_fn & build, double max_nmse, uint64_t seed = 1) {
    const run_result want = run_on(be.cpu, build, seed);
    const run_result got = run_on(be.cuda, build, seed);
    const double e = got.ok && want.ok ? backend_case_nmse(got.values, want.values) : INFINITY;
    INFO(name, " nmse ", e, " (max ", max_nmse, ")");
    CHECK(want.ok);
    CHECK(got.ok);
    CHECK(e <= max_nmse);
}

bool cuda_supports_graph(ggml_backend_t cuda, const build_fn & build) {
    ggml_init_params ip = {16u * 1024 * 1024, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * out = build(ctx);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 4096);
    ggml_build_forward_expand(gf, out);
    bool ok = true;
    for (int i = 0; i < ggml_graph_n_nodes(gf); ++i)
        ok = ok && ggml_backend_supports_op(cuda, ggml_graph_node(gf, i));
    ggml_free(ctx);
    return ok;
}

ggml_tensor * leaf(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, const char * name,
                   int64_t ne3 = 1) {
    ggml_tensor * t = ggml_new_tensor_4d(ctx, type, ne0, ne1, ne2, ne3);
    ggml_set_name(t, name);
    return t;
}

} // namespace

TEST_CASE("shared case table: every case on CUDA matches the CPU") {
    backends be;
    std::map<std::string, int> per_group;
    int unsupported = 0;
    for (const backend_case & c : backend_cases()) {
        if (!cuda_supports_graph(be.cuda, c.build)) {
            ++unsupported;
            MESSAGE("not supported on CUDA: ", c.name);
            continue;
        }
        // CPU and CUDA differ in rounding only: allow the f32 level where the table demands exactness
        // for float results computed with transcendental functions
        const double tol = c.gpu_nmse > 0 ? c.gpu_nmse : c.max_nmse > 0 ? c.max_nmse : 0.0;
        compare(be, c.name, c.build, tol, backend_case_seed(c));
        ++per_group[c.group];
    }
    for (auto & [g, n] : per_group)
        MESSAGE(g, ": ", n, " cases");
    CHECK(unsupported == 0);
    CHECK(!per_group.empty());
}

TEST_CASE("mul_mat q8_0: mmvq decode (odd rows, 1..8 columns) and cuBLAS prefill") {
    backends be;
    for (int64_t K : {32, 96, 4096, 8448}) {
        for (int64_t M : {1, 37, 333}) {
            for (int64_t N : {1, 3, 8, 9, 64}) {
                if (K >= 4096 && N == 64 && M == 1) continue;
                compare(
                    be, "q8_0 K" + std::to_string(K) + " M" + std::to_string(M) + " N" + std::to_string(N),
                    [=](ggml_context * ctx) {
                        return ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_Q8_0, K, M, 1, "w"),
                                            leaf(ctx, GGML_TYPE_F32, K, N, 1, "x"));
                    },
                    2e-4);
            }
        }
    }
    // prefill size: N = 512 through cuBLAS (weights dequantized to f16)
    compare(
        be, "q8_0 prefill K1024 M300 N512",
        [](ggml_context * ctx) {
            return ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_Q8_0, 1024, 300, 1, "w"),
                                leaf(ctx, GGML_TYPE_F32, 1024, 512, 1, "x"));
        },
        2e-4);
    // activations that are a permuted (non-contiguous) view
    compare(
        be, "q8_0 permuted activations",
        [](ggml_context * ctx) {
            ggml_tensor * x = ggml_permute(ctx, leaf(ctx, GGML_TYPE_F32, 64, 2, 3, "x"), 0, 2, 1, 3); // [64,3,2]
            return ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_Q8_0, 64, 19, 1, "w"), x);
        },
        2e-4);
}

TEST_CASE("mul_mat f16/f32: mmv decode and cuBLAS prefill") {
    backends be;
    for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        for (int64_t K : {40, 256, 1000, 2048}) {
            for (int64_t N : {1, 5, 8, 33, 512}) {
                const int64_t M = 71;
                compare(
                    be, std::string(ggml_type_name(t)) + " K" + std::to_string(K) + " N" + std::to_string(N),
                    [=](ggml_context * ctx) {
                        return ggml_mul_mat(ctx, leaf(ctx, t, K, M, 1, "w"), leaf(ctx, GGML_TYPE_F32, K, N, 1, "x"));
                    },
                    t == GGML_TYPE_F16 && N > 8 ? 2e-5 : 1e-6);
            }
        }
    }
}

TEST_CASE("attention through mul_mat on permuted f16 KV-cache views with GQA") {
    // also a q8_0 K cache (-ctk q8_0 without flash attention: since the cache's stores run on CUDA it stays on the
    // GPU and this mat-mul reads the strided q8_0 view; the activation is rounded to q8_1 for up to 8 columns)
    backends be;
    const int64_t D = 64, n_ctx = 100, n_kv = 77, n_head = 8, n_head_kv = 2;
    for (ggml_type tk : {GGML_TYPE_F16, GGML_TYPE_Q8_0})
    for (int64_t n_tokens : {1, 4, 33}) {
        for (bool v_trans : {true, false}) {
            if (tk != GGML_TYPE_F16 && !v_trans) continue;
            compare(
                be,
                "attn n_tokens " + std::to_string(n_tokens) + " k " + ggml_type_name(tk) +
                    (v_trans ? " v transposed cache" : " v cont of transposed view"),
                [=](ggml_context * ctx) {
                    // K cache [D, n_head_kv, n_ctx] (token-major, as written per step); view the first n_kv
                    ggml_tensor * kc = leaf(ctx, tk, D * n_head_kv, n_ctx, 1, "kcache");
                    ggml_tensor * k = ggml_view_3d(ctx, kc, D, n_kv, n_head_kv, kc->nb[1], ggml_row_size(tk, D), 0);
                    ggml_tensor * q0 = leaf(ctx, GGML_TYPE_F32, D, n_head, n_tokens, "q");
                    ggml_tensor * q = ggml_permute(ctx, q0, 0, 2, 1, 3); // [D, n_tokens, n_head]
                    ggml_tensor * kq = ggml_mul_mat(ctx, k, q);          // [n_kv, n_tokens, n_head]
                    kq = ggml_soft_max_causal(ctx, kq, 0.125f, (int)(n_kv - n_tokens));
                    ggml_tensor * v;
                    if (v_trans) { // V cache stored transposed: [n_ctx, D, n_head_kv]
                        ggml_tensor * vc = leaf(ctx, GGML_TYPE_F16, n_ctx, D, n_head_kv, "vcache");
                        v = ggml_view_3d(ctx, vc, n_kv, D, n_head_kv, vc->nb[1], vc->nb[2], 0);
                    } else { // same layout as K: transposed into a dense copy first
                        ggml_tensor * vc = leaf(ctx, GGML_TYPE_F16, D * n_head_kv, n_ctx, 1, "vcache");
                        v = ggml_view_3d(ctx, vc, D, n_kv, n_head_kv, vc->nb[1], D * 2, 0);
                        v = ggml_cont(ctx, ggml_permute(ctx, v, 1, 0, 2, 3)); // [n_kv, D, n_head_kv]
                    }
                    return ggml_mul_mat(ctx, v, kq); // [D, n_tokens, n_head]
                },
                tk != GGML_TYPE_F16 ? 1e-4 : n_tokens > 8 ? 2e-5 : 1e-6);
        }
    }
}

TEST_CASE("flash_attn_ext: flash-decoding splits, long KV, GQA, f16 mask, causal prefill") {
    backends be;
    struct fc {
        int64_t D, n_tokens, n_head, n_head_kv, n_kv;
        bool causal;
    };
    for (fc c : {fc{128, 1, 32, 8, 1000, false}, fc{128, 1, 32, 32, 700, true}, fc{64, 3, 4, 1, 513, true},
                 fc{128, 64, 8, 2, 200, true}, fc{80, 7, 6, 3, 333, false}, fc{256, 2, 2, 1, 100, true},
                 // prompts on the tensor-core kernel (fattn-mma.cu): odd token / key counts, ragged 64-row and 64-key
                 // tiles, D 96, keys past the causal limit skipped per tile, a long KV
                 fc{96, 33, 8, 8, 255, true}, fc{64, 17, 4, 4, 17, true}, fc{128, 130, 32, 8, 4097, true},
                 fc{128, 9, 4, 1, 1, false},
                 // prompts of 2048 keys or more: blocks of 32 query rows per warp (fattn-mma-wide.cu), KV split in
                 // 1, 2 and 3 (4097 above: 2), ragged 128-row blocks
                 fc{128, 300, 8, 2, 2100, false}, fc{64, 77, 4, 4, 4100, true}, fc{80, 200, 2, 1, 6200, false},
                 fc{96, 33, 8, 8, 2049, true}}) {
        // mask 1: random values (read per score); 2: causal 0 / -inf rows (the ranges describe them: tiles inside
        // every range unmasked), some not (backend_cases.h "cmask")
        for (int mask : {0, 1, 2}) {
            compare(
                be,
                "fattn D" + std::to_string(c.D) + " T" + std::to_string(c.n_tokens) + " H" + std::to_string(c.n_head) +
                    "/" + std::to_string(c.n_head_kv) + " kv" + std::to_string(c.n_kv) +
                    (mask == 1 ? " mask" : mask == 2 ? " causal mask" : "") +
                    (c.causal ? " causal" : ""),
                [=](ggml_context * ctx) {
                    const int64_t n_ctx = c.n_kv + 24;
                    ggml_tensor * q =
                        ggml_permute(ctx, leaf(ctx, GGML_TYPE_F32, c.D, c.n_head, c.n_tokens, "q"), 0, 2, 1, 3);
                    ggml_tensor * kc = leaf(ctx, GGML_TYPE_F16, c.D * c.n_head_kv, n_ctx, 1, "kc");
                    ggml_tensor * vc = leaf(ctx, GGML_TYPE_F16, c.D * c.n_head_kv, n_ctx, 1, "vc");
                    ggml_tensor * k = ggml_view_3d(ctx, kc, c.D, c.n_kv, c.n_head_kv, kc->nb[1], c.D * 2, 0);
                    ggml_tensor * v = ggml_view_3d(ctx, vc, c.D, c.n_kv, c.n_head_kv, vc->nb[1], c.D * 2, 0);
                    ggml_tensor * m =
                        mask ? leaf(ctx, GGML_TYPE_F16, c.n_kv, c.n_tokens, 1, mask == 1 ? "maskx" : "cmaskx") : nullptr;
                    return ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt((float)c.D),
                                               c.causal ? (int)(c.n_kv - c.n_tokens) : -1);
                },
                2e-5);
        }
    }
}

TEST_CASE("rms_norm fused with mul, and not fused when the norm has another user") {
    backends be;
    for (int64_t n : {7, 64, 4096, 5120}) {
        compare(
            be, "rms_norm*w n" + std::to_string(n),
            [=](ggml_context * ctx) {
                ggml_tensor * x = leaf(ctx, GGML_TYPE_F32, n, 5, 1, "x");
                return ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), leaf(ctx, GGML_TYPE_F32, n, 1, 1, "w"));
            },
            1e-7);
    }
    compare(
        be, "rms_norm used twice",
        [](ggml_context * ctx) {
            ggml_tensor * nrm = ggml_rms_norm(ctx, leaf(ctx, GGML_TYPE_F32, 300, 3, 1, "x"), 1e-6f);
            ggml_tensor * y = ggml_mul(ctx, nrm, leaf(ctx, GGML_TYPE_F32, 300, 1, 1, "w"));
            return ggml_add(ctx, y, nrm);
        },
        1e-7);
}

TEST_CASE("copies among f32/f16/q8_0/q4_0, contiguous and not; get_rows of each type") {
    // Exact: the block quantizers write the reference quantizers' bytes (cpy.cuh), the dequantization is the
    // reference's d * q. Between the two block types only a copy of the same type is supported (no requantization).
    backends be;
    const ggml_type types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    auto blocks = [](ggml_type t) { return t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0; };
    for (ggml_type ts : types) {
        for (ggml_type td : types) {
            if (blocks(ts) && blocks(td) && ts != td) continue;
            for (int64_t ne0 : {64, 96}) {
                // src: a permuted view (f32/f16) or a row-offset view (blocks); dst: a strided view of a bigger cache
                compare(
                    be, std::string("cpy ") + ggml_type_name(ts) + " -> " + ggml_type_name(td) + " ne0 " + std::to_string(ne0),
                    [=](ggml_context * ctx) {
                        ggml_tensor * s = leaf(ctx, ts, ne0, 6, 5, "src");
                        if (!blocks(ts))
                            s = ggml_permute(ctx, s, 0, 2, 1, 3); // [ne0, 5, 6]
                        else
                            s = ggml_view_3d(ctx, s, ne0, 5, 5, s->nb[1], s->nb[2], s->nb[1]);
                        ggml_tensor * cache = leaf(ctx, td, ne0, 40, 1, "cache");
                        ggml_tensor * d =
                            ggml_view_2d(ctx, cache, ne0, blocks(ts) ? 25 : 30, cache->nb[1] * 1, cache->nb[1] * 3);
                        return ggml_cpy(ctx, s, d);
                    },
                    0.0);
            }
        }
        if (blocks(ts)) { // DUP of a strided block-type view (the context shift's V move)
            compare(
                be, std::string("dup of a view ") + ggml_type_name(ts),
                [=](ggml_context * ctx) {
                    ggml_tensor * s = leaf(ctx, ts, 256, 33, 1, "src");
                    return ggml_dup(ctx, ggml_view_2d(ctx, s, 128, 17, s->nb[1], ggml_row_size(ts, 64) + 3 * s->nb[1]));
                },
                0.0);
        }
        compare(
            be, std::string("get_rows ") + ggml_type_name(ts),
            [=](ggml_context * ctx) {
                return ggml_get_rows(ctx, leaf(ctx, ts, 96, 100, 1, "tok_embd"),
                                     leaf(ctx, GGML_TYPE_I32, 17, 1, 1, "ids"));
            },
            0.0);
    }
    compare(
        be, "cont of transposed f16",
        [](ggml_context * ctx) {
            return ggml_cont(ctx, ggml_transpose(ctx, leaf(ctx, GGML_TYPE_F16, 33, 17, 2, "x")));
        },
        0.0);
}

namespace {
// Build on `backend` with the leaves named in `fill` set to those bytes (others: leaf_bytes(seed 7)), compute, and
// return the bytes of the tensor named `want` (a leaf that ops write into: a KV cache).
std::vector<uint8_t> run_bytes(ggml_backend_t backend, const build_fn & build, const std::map<std::string, std::vector<uint8_t>> & fill,
                               const char * want) {
    ggml_init_params ip = {16u * 1024 * 1024, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * out = build(ctx);
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, 1024);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
    REQUIRE(buf != nullptr);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src || t->op != GGML_OP_NONE) continue;
        const auto it = fill.find(t->name);
        const std::vector<uint8_t> b = it != fill.end() ? it->second : leaf_bytes(t, 7);
        REQUIRE(b.size() == ggml_nbytes(t));
        ggml_backend_tensor_set(t, b.data(), 0, b.size());
    }
    REQUIRE(ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS);
    ggml_backend_synchronize(backend);
    ggml_tensor * w = ggml_get_tensor(ctx, want);
    REQUIRE(w != nullptr);
    std::vector<uint8_t> bytes(ggml_nbytes(w));
    ggml_backend_tensor_get(w, bytes.data(), 0, bytes.size());
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
    return bytes;
}

template <typename T> std::vector<uint8_t> as_bytes(const std::vector<T> & v) {
    std::vector<uint8_t> b(v.size() * sizeof(T));
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

// Rows of 8 blocks of 32 whose quantization hits the reference's corner cases: all +0 and all -0 blocks (q4_0 keeps
// d = -0), halves exactly between two quants with the scale 1 (roundf / +8.5 truncation round them away from zero,
// round-to-even would not), the largest magnitude twice with both signs (q4_0 takes the first), a scale past the f16
// range (d = inf), tiny normal values, and random values of full f32 precision.
std::vector<float> kvq_corner_rows(int n_rows, ggml_type type, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> x((size_t)n_rows * 256);
    for (int r = 0; r < n_rows; ++r) {
        float * b = &x[(size_t)r * 256];
        for (int j = 0; j < 32; ++j) {
            b[j] = 0.0f;
            b[32 + j] = -0.0f;
            // scale 1: q8_0 max 127, q4_0 first max -8; then halves
            const float half = (float)(j % 15) - 7.0f + 0.5f; // -6.5 .. 7.5
            b[64 + j] = j == 0 ? (type == GGML_TYPE_Q8_0 ? 127.0f : -8.0f) : (type == GGML_TYPE_Q8_0 ? half * 16.0f + 0.5f : half);
            b[96 + j] = j == 3 ? 3.0f : j == 9 ? -3.0f : u(rng) * 2.9f;   // ties of |max|, + first
            b[128 + j] = j == 2 ? -5.0f : j == 30 ? 5.0f : u(rng) * 4.9f; // ties of |max|, - first
            b[160 + j] = u(rng) * 1e7f;                                   // d beyond the f16 range
            b[192 + j] = u(rng) * 1e-30f;                                 // tiny (normal) values
            b[224 + j] = u(rng) * (float)(1 + r);
        }
    }
    return x;
}
} // namespace

TEST_CASE("q8_0/q4_0 stores and copies write the reference quantizer's bytes (ties, halves, zeros, signs)") {
    // SET_ROWS of f32 rows and CPY of f32 / f16 rows into q8_0 / q4_0 caches on CUDA: every byte equals
    // quantize_row_q8_0_ref / quantize_row_q4_0_ref of the row (run here on the host), and the rows not written keep
    // their bytes.
    backends be;
    for (ggml_type qt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        const int64_t n0 = 256, n_ctx = 9, n = 3;
        const size_t rb = ggml_row_size(qt, n0);
        const std::vector<float> x = kvq_corner_rows((int)n, qt, 11);
        const std::vector<int32_t> cells = {6, 1, 4};
        std::vector<uint8_t> cache0((size_t)n_ctx * rb);
        for (size_t i = 0; i < cache0.size(); ++i)
            cache0[i] = (uint8_t)(i * 37 + 11); // any bytes (the quants are random, the scales finite or not)
        for (int op = 0; op < 3; ++op) { // 0 SET_ROWS f32, 1 CPY f32 into rows 2..4, 2 CPY f16 into rows 2..4
            const std::string name = std::string(ggml_type_name(qt)) + (op == 0 ? " set_rows" : op == 1 ? " cpy f32" : " cpy f16");
            INFO(name);
            std::vector<float> xs = x;
            std::vector<uint8_t> src_bytes = as_bytes(x);
            if (op == 2) { // an f16 source: the values the reference then sees are the f16 ones (the 1e7 block
                           // scaled into the f16 range; the tiny one becomes zeros)
                std::vector<ggml_fp16_t> h(x.size());
                for (size_t i = 0; i < x.size(); ++i) {
                    h[i] = ggml_fp32_to_fp16(i % 256 >= 160 && i % 256 < 192 ? x[i] * 6e-3f : x[i]);
                    xs[i] = ggml_fp16_to_fp32(h[i]);
                }
                src_bytes = as_bytes(h);
            }
            // the reference: each source row quantized on the host
            std::vector<uint8_t> want = cache0;
            std::vector<uint8_t> rows((size_t)n * rb);
            ggml_get_type_traits(qt)->from_float_ref(xs.data(), rows.data(), n * n0);
            for (int64_t i = 0; i < n; ++i)
                std::memcpy(&want[(size_t)(op == 0 ? cells[i] : 2 + i) * rb], &rows[i * rb], rb);
            const build_fn build = [=](ggml_context * ctx) -> ggml_tensor * {
                ggml_tensor * cache = leaf(ctx, qt, n0, n_ctx, 1, "cache");
                ggml_tensor * src = leaf(ctx, op == 2 ? GGML_TYPE_F16 : GGML_TYPE_F32, n0, n, 1, "src");
                if (op == 0) return ggml_set_rows(ctx, cache, src, leaf(ctx, GGML_TYPE_I32, n, 1, 1, "cells"));
                return ggml_cpy(ctx, src, ggml_view_2d(ctx, cache, n0, n, cache->nb[1], 2 * cache->nb[1]));
            };
            const std::map<std::string, std::vector<uint8_t>> fill = {
                {"cache", cache0}, {"src", src_bytes}, {"cells", as_bytes(cells)}};
            REQUIRE(cuda_supports_graph(be.cuda, build));
            const std::vector<uint8_t> got = run_bytes(be.cuda, build, fill, "cache");
            const std::vector<uint8_t> cpu = run_bytes(be.cpu, build, fill, "cache");
            CHECK(cpu == want);
            size_t first_diff = got.size();
            for (size_t i = 0; i < got.size() && i < want.size(); ++i)
                if (got[i] != want[i]) {
                    first_diff = i;
                    break;
                }
            INFO("first differing byte ", first_diff, " (row ", first_diff / rb, ", byte ", first_diff % rb, ")");
            CHECK(got == want);
        }
    }
}

TEST_CASE("supports_op: every op of a q8_0/q4_0 KV cache runs on CUDA (the cache is not kept in host memory)") {
    // The probes llm_kv_cache_init asks (llm/kv-cache.cpp kv_ops_supported) for head sizes 64, 96, 128 and every K/V
    // type pair; and what stays unsupported: a transposed block-type V (no blocks along a column), requantizing
    // between block types, a block-type view whose rows are not whole blocks.
    backends be;
    const ggml_type ts[] = {GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};
    for (int64_t hd : {64, 96, 128}) {
        for (ggml_type tk : ts) {
            for (ggml_type tv : ts) {
                const int64_t nh = 32, nkv = 8, n = 256;
                ggml_init_params ip = {64 * ggml_tensor_overhead(), nullptr, true};
                ggml_context * c = ggml_init(ip);
                ggml_tensor * kc = ggml_new_tensor_2d(c, tk, hd * nkv, n);
                ggml_tensor * vc = ggml_new_tensor_2d(c, tv, hd * nkv, n);
                ggml_tensor * cur = ggml_new_tensor_2d(c, GGML_TYPE_F32, hd * nkv, 7);
                ggml_tensor * cells = ggml_new_tensor_1d(c, GGML_TYPE_I32, 7);
                ggml_tensor * q = ggml_new_tensor_3d(c, GGML_TYPE_F32, hd, 1, nh);
                ggml_tensor * mask = ggml_new_tensor_2d(c, GGML_TYPE_F16, n, 1);
                ggml_tensor * k = ggml_view_3d(c, kc, hd, n, nkv, kc->nb[1], ggml_row_size(tk, hd), 0);
                ggml_tensor * v = ggml_view_3d(c, vc, hd, n, nkv, vc->nb[1], ggml_row_size(tv, hd), 0);
                ggml_tensor * q9 = ggml_new_tensor_3d(c, GGML_TYPE_F32, hd, 9, nh);
                ggml_tensor * mask9 = ggml_new_tensor_2d(c, GGML_TYPE_F16, n, 9);
                INFO("hd ", hd, " k ", ggml_type_name(tk), " v ", ggml_type_name(tv));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_set_rows(c, kc, cur, cells)));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_set_rows(c, vc, cur, cells)));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_get_rows(c, kc, cells)));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_cpy(c, cur, ggml_view_2d(c, kc, hd * nkv, 7, kc->nb[1], 0))));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_dup(c, ggml_view_2d(c, vc, hd * nkv, 7, vc->nb[1], 0))));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_flash_attn_ext(c, q, k, v, mask, 1.0f, -1)));
                CHECK(ggml_backend_supports_op(be.cuda, ggml_flash_attn_ext(c, q9, k, v, mask9, 1.0f, 200)));
                if (tk != GGML_TYPE_F16 && tv != GGML_TYPE_F16 && tk != tv)
                    CHECK_FALSE(ggml_backend_supports_op(be.cuda, ggml_cpy(c, ggml_view_2d(c, kc, hd * nkv, 7, kc->nb[1], 0),
                                                                             ggml_view_2d(c, vc, hd * nkv, 7, vc->nb[1], 0))));
                if (tv != GGML_TYPE_F16) {
                    ggml_tensor * vt = ggml_new_tensor_2d(c, tv, n, hd * nkv); // a transposed V cache
                    CHECK_FALSE(ggml_backend_supports_op(be.cuda, ggml_set_rows(c, ggml_transpose(c, vt), cur, cells)));
                }
                ggml_free(c);
            }
        }
    }
}

TEST_CASE("CUDA graphs: replay after data, pointer and KV-length changes equals eager execution") {
    // a decode-like step: norm*w, q8_0 projection, rope, attention over a KV view of n_kv cells,
    // f16 output projection, silu, scale
    const auto step = [](int64_t n_kv) {
        return [n_kv](ggml_context * ctx) {
            const int64_t D = 64, H = 4, HKV = 2;
            ggml_tensor * x = leaf(ctx, GGML_TYPE_F32, D * H, 1, 1, "x");
            ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), leaf(ctx, GGML_TYPE_F32, D * H, 1, 1, "wn"));
            ggml_tensor * q = ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_Q8_0, D * H, D * H, 1, "wq"), h);
            q = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, q, D, H, 1), leaf(ctx, GGML_TYPE_I32, 1, 1, 1, "pos"), nullptr,
                              (int)D, GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
            ggml_tensor * kc = leaf(ctx, GGML_TYPE_F16, D * HKV, 600, 1, "kc");
            ggml_tensor * vc = leaf(ctx, GGML_TYPE_F16, D * HKV, 600, 1, "vc");
            ggml_tensor * k = ggml_view_3d(ctx, kc, D, n_kv, HKV, kc->nb[1], D * 2, 0);
            ggml_tensor * v = ggml_view_3d(ctx, vc, D, n_kv, HKV, vc->nb[1], D * 2, 0);
            ggml_tensor * a =
                ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), k, v, nullptr, 0.125f, (int)n_kv - 1);
            ggml_tensor * o =
                ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_F16, D * H, 300, 1, "wo"), ggml_reshape_2d(ctx, a, D * H, 1));
            return ggml_scale(ctx, ggml_silu(ctx, o), 0.5f);
        };
    };
    setenv("GGML_CUDA_DISABLE_GRAPHS", "1", 1);
    ggml_backend_t eager = ggml_backend_cuda_init(0);
    unsetenv("GGML_CUDA_DISABLE_GRAPHS");
    ggml_backend_t graphs = ggml_backend_cuda_init(0);
    REQUIRE(eager);
    REQUIRE(graphs);
    struct run {
        uint64_t seed;
        int64_t n_kv, pad;
    };
    for (run r : {run{11, 50, 0}, run{12, 50, 0}, run{13, 50, 64}, run{14, 300, 64}, run{15, 513, 128}}) {
        // reps = 3: the first sighting runs eagerly, then capture (or update), then replay
        const run_result want = run_on(eager, step(r.n_kv), r.seed, 3, r.pad);
        const run_result got = run_on(graphs, step(r.n_kv), r.seed, 3, r.pad);
        REQUIRE(want.ok);
        REQUIRE(got.ok);
        INFO("seed ", r.seed, " n_kv ", r.n_kv, " pad ", r.pad);
        CHECK(backend_case_nmse(got.values, want.values) == 0.0);
    }
    int n_replay = 0, n_update = 0, n_inst = 0;
    ggml_backend_cuda_get_graph_stats(graphs, &n_replay, &n_update, &n_inst);
    MESSAGE("graph replays ", n_replay, ", updates ", n_update, ", instantiations ", n_inst);
    CHECK(n_replay >= 5);          // unchanged pointers, shapes and params: launched as is
    CHECK(n_update + n_inst >= 3); // moved pointers / longer KV: captured again
    ggml_backend_free(graphs);
    ggml_backend_free(eager);
}

TEST_CASE("buffers: set/get with offsets, clear, memory query, allocation failure is an error not an abort") {
    backends be;
    ggml_backend_buffer_type_t buft = ggml_backend_cuda_buffer_type(0);
    REQUIRE(buft);
    CHECK(ggml_backend_cuda_buffer_type(1000) == nullptr);
    CHECK(ggml_backend_cuda_init(1000) == nullptr);
    CHECK(ggml_backend_is_cuda(be.cuda));
    CHECK(!ggml_backend_is_cuda(be.cpu));
    CHECK(ggml_backend_supports_buft(be.cuda, buft));
    CHECK(!ggml_backend_supports_buft(be.cuda, ggml_backend_cpu_buffer_type()));
    size_t free_b = 0, total_b = 0;
    ggml_backend_cuda_get_device_memory(0, &free_b, &total_b);
    CHECK(total_b > 0);
    CHECK(free_b <= total_b);
    // far more than the device has: nullptr and a logged reason
    CHECK(ggml_backend_buft_alloc_buffer(buft, total_b * 4) == nullptr);

    ggml_init_params ip = {1u << 20, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * t = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 1000);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
    REQUIRE(buf);
    ggml_backend_buffer_clear(buf, 0);
    std::vector<float> a(1000), b(1000, -1.0f);
    for (int i = 0; i < 1000; ++i)
        a[i] = (float)i * 0.5f + 1.0f;
    ggml_backend_tensor_set(t, a.data() + 100, 400, 300 * 4);
    ggml_backend_tensor_get(t, b.data(), 0, 4000);
    for (int i = 0; i < 1000; ++i)
        CHECK(b[i] == (i >= 100 && i < 400 ? a[i] : 0.0f));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);

    ggml_backend_buffer_t host = ggml_backend_buft_alloc_buffer(ggml_backend_cuda_host_buffer_type(), 4096);
    REQUIRE(host);
    CHECK(ggml_backend_buffer_is_host(host));
    ggml_backend_buffer_free(host);
}
namespace {
using build2_fn = std::function<ggml_tensor *(ggml_context * cw, ggml_context * cg)>;

// Like run_on, but tensors made in `cw` live in their own buffer marked as weights (the CUDA
// backend stores q8_0 weights set in full repacked), so graphs read the repacked layout.
run_result run_weights(ggml_backend_t backend, const build2_fn & build, uint64_t seed) {
    ggml_init_params ip = {16u * 1024 * 1024, nullptr, true};
    ggml_context * cw = ggml_init(ip);
    ggml_context * cg = ggml_init(ip);
    ggml_tensor * out = build(cw, cg);
    ggml_cgraph * gf = ggml_new_graph_custom(cg, 4096);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors(cw, backend);
    ggml_backend_buffer_t bg = ggml_backend_alloc_ctx_tensors(cg, backend);
    REQUIRE(bw != nullptr);
    REQUIRE(bg != nullptr);
    ggml_backend_buffer_set_usage(bw, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    uint64_t k = 0;
    for (ggml_context * c : {cw, cg})
        for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t)) {
            if (t->view_src) continue;
            ++k;
            const std::vector<uint8_t> b =
                t->op == GGML_OP_NONE ? leaf_bytes(t, seed + 977 * k) : std::vector<uint8_t>(ggml_nbytes(t), 0xFF);
            ggml_backend_tensor_set(t, b.data(), 0, b.size());
        }
    run_result r;
    r.ok = ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS;
    if (r.ok) r.ok = ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS; // graph replay too
    ggml_backend_synchronize(backend);
    if (r.ok) {
        std::vector<uint8_t> bytes(ggml_nbytes(out));
        ggml_backend_tensor_get(out, bytes.data(), 0, bytes.size());
        r.values = values_of(out, bytes);
    }
    ggml_backend_buffer_free(bg);
    ggml_backend_buffer_free(bw);
    ggml_free(cg);
    ggml_free(cw);
    return r;
}

void compare_w(backends & be, const std::string & name, const build2_fn & build, double max_nmse, uint64_t seed = 3) {
    const run_result want = run_weights(be.cpu, build, seed);
    const run_result got = run_weights(be.cuda, build, seed);
    const double e = got.ok && want.ok ? backend_case_nmse(got.values, want.values) : INFINITY;
    INFO(name, " nmse ", e, " (max ", max_nmse, ")");
    CHECK(want.ok);
    CHECK(got.ok);
    CHECK(e <= max_nmse);
}
} // namespace

TEST_CASE("set_tensor_async: the host data read before the call returns; small writes gathered into one kernel, "
          "larger ones staged, the largest waited for; all in stream order with the graphs") {
    backends be;
    ggml_init_params ip = {1u << 20, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    // small: 24 tensors of 1..701 i32 (more than one gathered batch); mid: 3 MiB (the ring, 3 of them wrap it);
    // big: 5 MiB (above half the ring: copied and waited for); a: the input of a graph b = a + a
    std::vector<ggml_tensor *> small;
    for (int i = 0; i < 24; ++i)
        small.push_back(ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 1 + 29 * i));
    ggml_tensor * mid = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 3 << 18);
    ggml_tensor * big = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 5 << 18);
    ggml_tensor * a = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, 333);
    ggml_tensor * b = ggml_add(ctx, a, a);
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, b);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be.cuda);
    REQUIRE(buf);
    ggml_backend_buffer_clear(buf, 0);
    int k0 = 0, r0 = 0, s0 = 0, k1 = 0, r1 = 0, s1 = 0;
    ggml_backend_cuda_get_host_write_counts(be.cuda, &k0, &r0, &s0);

    auto val = [](int t, int64_t i, int round) { return (int32_t)(1000003 * t + 7 * i + 65537 * round); };
    std::vector<int32_t> src;
    auto put = [&](ggml_tensor * t, int id, int round) { // src is overwritten right after the call
        src.resize(ggml_nelements(t));
        for (int64_t i = 0; i < (int64_t)src.size(); ++i)
            src[i] = val(id, i, round);
        ggml_backend_tensor_set_async(be.cuda, t, src.data(), 0, ggml_nbytes(t));
        std::fill(src.begin(), src.end(), -1);
    };
    for (int round = 0; round < 3; ++round) { // the mids of rounds 0-2 fill and wrap the ring
        for (int i = 0; i < (int)small.size(); ++i)
            put(small[i], i, round);
        put(mid, 100, round);
    }
    put(big, 200, 0);
    // a graph between two writes of its input: it reads the first, the second lands after it
    std::vector<float> fa(333), fb(333);
    for (int i = 0; i < 333; ++i)
        fa[i] = 0.5f * i - 3.0f;
    ggml_backend_tensor_set_async(be.cuda, a, fa.data(), 0, ggml_nbytes(a));
    REQUIRE(be.cuda->iface.graph_compute(be.cuda, gf) == GGML_STATUS_SUCCESS);
    for (int i = 0; i < 333; ++i)
        fb[i] = 100.0f + i;
    ggml_backend_tensor_set_async(be.cuda, a, fb.data(), 0, ggml_nbytes(a));
    std::fill(fb.begin(), fb.end(), -7.0f);
    ggml_backend_synchronize(be.cuda);

    ggml_backend_cuda_get_host_write_counts(be.cuda, &k1, &r1, &s1);
    CHECK(k1 - k0 == 3 * 24 + 2); // every small write and both of a's through the kernel
    CHECK(r1 - r0 == 3);          // the mids through the ring
    CHECK(s1 - s0 == 1);          // the big one waited for
    int bad = 0;
    for (int i = 0; i < (int)small.size(); ++i) {
        std::vector<int32_t> got(ggml_nelements(small[i]));
        ggml_backend_tensor_get(small[i], got.data(), 0, ggml_nbytes(small[i]));
        for (int64_t j = 0; j < (int64_t)got.size(); ++j)
            bad += got[j] != val(i, j, 2);
    }
    for (auto [t, id, round] : {std::tuple{mid, 100, 2}, std::tuple{big, 200, 0}}) {
        std::vector<int32_t> got(ggml_nelements(t));
        ggml_backend_tensor_get(t, got.data(), 0, ggml_nbytes(t));
        for (int64_t j = 0; j < (int64_t)got.size(); ++j)
            bad += got[j] != val(id, j, round);
    }
    CHECK(bad == 0);
    std::vector<float> ga(333), gb(333);
    ggml_backend_tensor_get(a, ga.data(), 0, ggml_nbytes(a));
    ggml_backend_tensor_get(b, gb.data(), 0, ggml_nbytes(b));
    int bad_ab = 0;
    for (int i = 0; i < 333; ++i)
        bad_ab += ga[i] != 100.0f + i || gb[i] != 2.0f * (0.5f * i - 3.0f);
    CHECK(bad_ab == 0);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

TEST_CASE("repacked q8_0 weights: set/get return ggml's bytes, partial sets merge, views are not supported") {
    backends be;
    ggml_init_params ip = {1u << 20, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * w = ggml_new_tensor_3d(ctx, GGML_TYPE_Q8_0, 96, 37, 2);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be.cuda);
    REQUIRE(buf);
    ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    std::vector<uint8_t> a = leaf_bytes(w, 11), b(a.size(), 0);
    ggml_backend_tensor_set(w, a.data(), 0, a.size());
    CHECK(w->extra != nullptr); // repacked
    ggml_backend_tensor_get(w, b.data(), 0, b.size());
    CHECK(a == b);
    std::vector<uint8_t> part(100);
    ggml_backend_tensor_get(w, part.data(), 34 * 5 + 3, part.size());
    CHECK(std::equal(part.begin(), part.end(), a.begin() + 34 * 5 + 3));
    // a partial set into a repacked tensor: merged, still repacked
    const std::vector<uint8_t> c = leaf_bytes(w, 12);
    ggml_backend_tensor_set(w, c.data() + 340, 340, 34 * 7 + 5);
    std::copy(c.begin() + 340, c.begin() + 340 + 34 * 7 + 5, a.begin() + 340);
    ggml_backend_tensor_get(w, b.data(), 0, b.size());
    CHECK(a == b);
    // the whole tensor may be read by mat-mul / get_rows; views and other readers fall back
    ggml_tensor * x = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 96, 2, 2);
    ggml_tensor * v = ggml_view_2d(ctx, w, 96, 3, w->nb[1], 0);
    CHECK(ggml_backend_supports_op(be.cuda, ggml_mul_mat(ctx, w, x)));
    CHECK(!ggml_backend_supports_op(be.cuda, ggml_mul_mat(ctx, v, x)));
    CHECK(!ggml_backend_supports_op(be.cuda, ggml_cpy(ctx, v, ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 96, 3))));
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

// Columns 5..8 go to the streamed GEMM by default (GGML_CUDA_MMV_MAX_N, 4): every case once so, and once with the
// mat-vec for every N <= 8.
TEST_CASE("repacked q8_0 weights: mat-vec (odd rows, 1..8 columns, batches), prefill, get_rows") {
    for (const char * mv : {"", "8"}) {
        if (*mv) setenv("GGML_CUDA_MMV_MAX_N", mv, 1);
        INFO("GGML_CUDA_MMV_MAX_N=", mv);
        backends be;
        for (int64_t K : {32, 96, 4096, 11008}) {
            for (int64_t M : {1, 37, 333}) {
                for (int64_t N : {1, 3, 8, 9, 64, 513}) {
                    if (K >= 4096 && N >= 64 && M == 1) continue;
                    if (N == 513 && K > 4096) continue;
                    compare_w(
                        be, "q8r K" + std::to_string(K) + " M" + std::to_string(M) + " N" + std::to_string(N),
                        [=](ggml_context * cw, ggml_context * cg) {
                            return ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, K, M, 1, "w"),
                                                leaf(cg, GGML_TYPE_F32, K, N, 1, "x"));
                        },
                        2e-4);
                }
            }
        }
        // enough rows for 4 (N <= 2) and 2 (N <= 4) rows per block on a 132-SM GPU; a partial last block
        for (int64_t N : {1, 2, 3, 4}) {
            compare_w(
                be, "q8r K256 M2115 N" + std::to_string(N),
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, 256, 2115, 1, "w"),
                                        leaf(cg, GGML_TYPE_F32, 256, N, 1, "x"));
                },
                2e-4);
        }
        compare_w(
            be, "q8r batched (broadcast over 2 x 2)",
            [](ggml_context * cw, ggml_context * cg) {
                return ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, 64, 19, 2, "w", 1),
                                    leaf(cg, GGML_TYPE_F32, 64, 3, 4, "x"));
            },
            2e-4);
        compare_w(
            be, "q8r get_rows",
            [](ggml_context * cw, ggml_context * cg) {
                return ggml_get_rows(cg, leaf(cw, GGML_TYPE_Q8_0, 160, 101, 1, "w"),
                                     leaf(cg, GGML_TYPE_I32, 7, 1, 1, "i"));
            },
            1e-12);
        // q/k/v-style reuse of one quantized activation, then a different activation of the same shape
        compare_w(
            be, "q8r shared activation",
            [](ggml_context * cw, ggml_context * cg) {
                ggml_tensor * x = leaf(cg, GGML_TYPE_F32, 256, 1, 1, "x");
                ggml_tensor * x2 = leaf(cg, GGML_TYPE_F32, 256, 1, 1, "x2");
                ggml_tensor * q = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, 256, 64, 1, "wq"), x);
                ggml_tensor * k = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, 256, 64, 1, "wk"), x);
                ggml_tensor * v = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, 256, 64, 1, "wv"), x2);
                return ggml_add(cg, ggml_add(cg, q, k), v);
            },
            2e-4);
        unsetenv("GGML_CUDA_MMV_MAX_N");
    }
}

namespace {
const ggml_type k_qtypes[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K,
                              GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

// NMSE bound of a quantized-weight mat-mul on CUDA against the CPU backend. Both sides read the same weight
// bytes and round the activation (decode: q8 blocks of 32 on the GPU, the CPU's q8_0/q8_1/q8_K; prompts: f16 on
// the GPU), so the error is the activation rounding (~3e-5 for uniform data) whatever the weight type; per type
// for the record, and against a float64 reference (GPU rounding only) half of it.
double qtol(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q2_K:
        case GGML_TYPE_Q3_K:
            return 3e-4; // the largest weight errors: outputs closer to 0 relative to noise
        default:
            return 2e-4;
    }
}

// w [K, M] of `type` (in a weights buffer: stored repacked where the type has a repacked layout) times x [K, N]
// on CUDA, against float64 from the dequantized bytes (the reference to_float) and the f32 activations
double mm_vs_f64(backends & be, ggml_type type, int64_t K, int64_t M, int64_t N, uint64_t seed) {
    ggml_init_params ip = {1u << 20, nullptr, true};
    ggml_context * cw = ggml_init(ip);
    ggml_context * cg = ggml_init(ip);
    ggml_tensor * w = leaf(cw, type, K, M, 1, "w");
    ggml_tensor * x = leaf(cg, GGML_TYPE_F32, K, N, 1, "x");
    ggml_tensor * y = ggml_mul_mat(cg, w, x);
    ggml_cgraph * gf = ggml_new_graph(cg);
    ggml_build_forward_expand(gf, y);
    ggml_backend_buffer_t bw = ggml_backend_alloc_ctx_tensors(cw, be.cuda);
    ggml_backend_buffer_t bg = ggml_backend_alloc_ctx_tensors(cg, be.cuda);
    REQUIRE(bw);
    REQUIRE(bg);
    ggml_backend_buffer_set_usage(bw, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    const std::vector<uint8_t> wb = leaf_bytes(w, seed), xb = leaf_bytes(x, seed + 1);
    ggml_backend_tensor_set(w, wb.data(), 0, wb.size());
    ggml_backend_tensor_set(x, xb.data(), 0, xb.size());
    const std::vector<uint8_t> poison(ggml_nbytes(y), 0xFF);
    ggml_backend_tensor_set(y, poison.data(), 0, poison.size());
    REQUIRE(ggml_backend_graph_compute(be.cuda, gf) == GGML_STATUS_SUCCESS);
    std::vector<uint8_t> yb(ggml_nbytes(y));
    ggml_backend_tensor_get(y, yb.data(), 0, yb.size());
    const std::vector<double> got = values_of(y, yb), wv = values_of(w, wb), xv = values_of(x, xb);
    std::vector<double> want(M * N);
    for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
            double acc = 0;
            for (int64_t k = 0; k < K; ++k)
                acc += wv[m * K + k] * xv[n * K + k];
            want[n * M + m] = acc;
        }
    ggml_backend_buffer_free(bg);
    ggml_backend_buffer_free(bw);
    ggml_free(cg);
    ggml_free(cw);
    return backend_case_nmse(got, want);
}
} // namespace

// (as the repacked q8_0 case: the default, then the mat-vec for every N <= 8)
TEST_CASE("quantized types: mat-vec (N 1..8) and prompt GEMM (N 9..17, 511..513) against the CPU, odd shapes") {
    for (const char * mv : {"", "8"}) {
        if (*mv) setenv("GGML_CUDA_MMV_MAX_N", mv, 1);
        INFO("GGML_CUDA_MMV_MAX_N=", mv);
        backends be;
        for (ggml_type t : k_qtypes) {
            const int64_t qk = ggml_blck_size(t);
            const std::string tn = ggml_type_name(t);
            // 3 blocks per row, 37 rows (not a multiple of the 4-row tile): every column count
            std::vector<int64_t> ns;
            for (int64_t n = 1; n <= 17; ++n)
                ns.push_back(n);
            for (int64_t n : {511, 512, 513})
                ns.push_back(n);
            for (int64_t N : ns) {
                const int64_t K = 3 * qk;
                compare_w(
                    be, tn + " K" + std::to_string(K) + " M37 N" + std::to_string(N),
                    [=](ggml_context * cw, ggml_context * cg) {
                        return ggml_mul_mat(cg, leaf(cw, t, K, 37, 1, "w"), leaf(cg, GGML_TYPE_F32, K, N, 1, "x"));
                    },
                    qtol(t));
            }
            // a Llama FFN row length (11008 = 43 super-blocks: the lanes' chunk loop runs several ragged rounds)
            for (int64_t N : {1, 3, 8, 9, 512}) {
                compare_w(
                    be, tn + " K11008 M333 N" + std::to_string(N),
                    [=](ggml_context * cw, ggml_context * cg) {
                        return ggml_mul_mat(cg, leaf(cw, t, 11008, 333, 1, "w"),
                                            leaf(cg, GGML_TYPE_F32, 11008, N, 1, "x"));
                    },
                    qtol(t));
            }
            // batches with broadcast over the weight's dims 2/3
            compare_w(
                be, tn + " batched (broadcast over 2 x 2)",
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, t, 2 * qk, 19, 2, "w", 1),
                                        leaf(cg, GGML_TYPE_F32, 2 * qk, 3, 4, "x"));
                },
                qtol(t));
            // weights in ggml's layout (not a weights buffer: a repacked copy in scratch for the mat-vec; the
            // prompt path dequantizes ggml's layout directly)
            for (int64_t N : {1, 4, 9, 64}) {
                compare(
                    be, tn + " ggml layout K" + std::to_string(5 * qk) + " M45 N" + std::to_string(N),
                    [=](ggml_context * ctx) {
                        return ggml_mul_mat(ctx, leaf(ctx, t, 5 * qk, 45, 1, "w"),
                                            leaf(ctx, GGML_TYPE_F32, 5 * qk, N, 1, "x"));
                    },
                    qtol(t));
            }
            // against float64 (independent of the CPU backend): decode and prompt
            for (int64_t N : {1, 2, 77}) {
                const double e = mm_vs_f64(be, t, 4 * qk, 67, N, 41 + N);
                INFO(tn, " vs f64 K", 4 * qk, " M67 N", N, ": nmse ", e);
                CHECK(e <= qtol(t) / 2);
            }
        }
        unsetenv("GGML_CUDA_MMV_MAX_N");
    }
}

// The quantized GEMM (mmq.cuh: tiles of 128 weight rows x 64 columns, K steps of 128 values) for every quantized
// weight type in the kernel layout (repacked q8_0 too): rows not a multiple of the tile, N just above the mat-vec
// range and ragged last column tiles, K of several steps with a partial last step, batches with broadcast over
// dims 2 and 3, K split over blocks. The GEMM forced for every N (GGML_CUDA_MMQ_MAX_N), on f16 tensor cores (the
// default: N <= 64 on wgmma where the device has it, mmq-w.cuh; then without it, GGML_CUDA_MMQ_WG_N=0: N <= 32
// streamed, mmq-s.cuh, wider N tiled, mmq-h.cuh; then the tiled kernel for every N, GGML_CUDA_MMQ_STREAM_N=0) and
// on int8 tensor cores (GGML_CUDA_MMQ_INT8=1); then the same shapes through dequantization + cuBLAS
// (GGML_CUDA_NO_MMQ=1).
TEST_CASE("quantized types: tensor-core GEMM (MMQ, f16 and int8), ragged tiles, several K steps, split K, batches") {
    std::vector<ggml_type> types = {GGML_TYPE_Q8_0};
    types.insert(types.end(), std::begin(k_qtypes), std::end(k_qtypes));
    for (const char * mode : {"f16", "f16 streamed", "f16 tiles", "int8", "no mmq"}) {
        const bool no_mmq = std::string(mode) == "no mmq", int8 = std::string(mode) == "int8";
        // the GEMM for every N (the default dispatch sends large N to cuBLAS), then the old path
        setenv(no_mmq ? "GGML_CUDA_NO_MMQ" : "GGML_CUDA_MMQ_MAX_N", no_mmq ? "1" : "1000000", 1);
        if (int8) setenv("GGML_CUDA_MMQ_INT8", "1", 1);
        if (std::string(mode) != "f16") setenv("GGML_CUDA_MMQ_WG_N", "0", 1);
        if (std::string(mode) == "f16 tiles") setenv("GGML_CUDA_MMQ_STREAM_N", "0", 1);
        backends be;
        for (ggml_type t : types) {
            const int64_t qk = ggml_blck_size(t);
            const std::string tn = std::string(ggml_type_name(t)) + " (" + mode + ")";
            // legacy types: 13 blocks (3 full steps + one block); K-quants: 3 super-blocks (6 steps)
            const int64_t K = qk == 32 ? 13 * 32 : 3 * qk;
            for (int64_t M : {37, 130, 256}) {
                for (int64_t N : {9, 17, 63, 65, 130}) {
                    if (no_mmq && M != 130) continue;
                    compare_w(
                        be, tn + " K" + std::to_string(K) + " M" + std::to_string(M) + " N" + std::to_string(N),
                        [=](ggml_context * cw, ggml_context * cg) {
                            return ggml_mul_mat(cg, leaf(cw, t, K, M, 1, "w"), leaf(cg, GGML_TYPE_F32, K, N, 1, "x"));
                        },
                        qtol(t));
                }
            }
            compare_w(
                be, tn + " batched N12 (broadcast 2 -> 4 over dim 2)",
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, t, 2 * qk, 19, 2, "w"),
                                        leaf(cg, GGML_TYPE_F32, 2 * qk, 12, 4, "x"));
                },
                qtol(t));
            compare_w(
                be, tn + " batched K2048 N12 (split over K into 4)",
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, t, 2048, 19, 2, "w"), leaf(cg, GGML_TYPE_F32, 2048, 12, 4, "x"));
                },
                qtol(t));
            // 30 K steps over 3 x 2 ragged tiles: split over K (6 slices of 5 steps on 132 SMs), each tile's slices
            // added into dst
            compare_w(
                be, tn + " K3840 M300 N70 (split over K, ragged tiles)",
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, t, 3840, 300, 1, "w"), leaf(cg, GGML_TYPE_F32, 3840, 70, 1, "x"));
                },
                qtol(t));
            // streamed (N <= 64): 30 chunks of 128 values in slices of 256 (15 blocks per 256 rows), 44 rows past
            // the last full block
            compare_w(
                be, tn + " K3840 M300 N40 (split over K)",
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, t, 3840, 300, 1, "w"), leaf(cg, GGML_TYPE_F32, 3840, 40, 1, "x"));
                },
                qtol(t));
            compare_w(
                be, tn + " batched N33 (broadcast over dims 2 and 3)",
                [=](ggml_context * cw, ggml_context * cg) {
                    return ggml_mul_mat(cg, leaf(cw, t, 4 * qk, 150, 1, "w", 2),
                                        leaf(cg, GGML_TYPE_F32, 4 * qk, 33, 2, "x", 4));
                },
                qtol(t));
        }
        unsetenv(no_mmq ? "GGML_CUDA_NO_MMQ" : "GGML_CUDA_MMQ_MAX_N");
        unsetenv("GGML_CUDA_MMQ_INT8");
        unsetenv("GGML_CUDA_MMQ_STREAM_N");
        unsetenv("GGML_CUDA_MMQ_WG_N");
    }
}

// The streamed GEMM (mmq-s.cuh) and, on an sm_90a device, the wgmma GEMM (mmq-w.cuh) against the tiled one
// (mmq-h.cuh): the same f16 weights and activations, so only the f32 summation order differs (K permuted within
// 128-value chunks, other K slices): nmse <= 1e-10, where a wrong unit, scale, row or column would be O(1). Legacy
// and K-quant types; partial chunks, split K, ragged rows and columns; every N of them through the streamed kernel
// (GGML_CUDA_MMQ_STREAM_N=64, GGML_CUDA_MMQ_WG_N=0: 1..4 m16 tiles of columns) and the wgmma kernel (the default
// where the device has it, GGML_CUDA_MMQ_WG_N=64: tiles of 32 and 64 columns).
TEST_CASE("quantized types: the streamed and wgmma small-N GEMMs equal the tiled GEMM") {
    setenv("GGML_CUDA_MMQ_MAX_N", "1000000", 1);
    setenv("GGML_CUDA_MMQ_STREAM_N", "0", 1);
    setenv("GGML_CUDA_MMQ_WG_N", "0", 1);
    ggml_backend_t tiled = ggml_backend_cuda_init(0);
    setenv("GGML_CUDA_MMQ_STREAM_N", "64", 1);
    ggml_backend_t streamed = ggml_backend_cuda_init(0);
    setenv("GGML_CUDA_MMQ_WG_N", "64", 1);
    ggml_backend_t wgmma = ggml_backend_cuda_init(0);
    unsetenv("GGML_CUDA_MMQ_WG_N");
    unsetenv("GGML_CUDA_MMQ_STREAM_N");
    REQUIRE(tiled != nullptr);
    REQUIRE(wgmma != nullptr);
    REQUIRE(streamed != nullptr);
    int n_cases = 0;
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q5_1, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
        const int64_t qk = ggml_blck_size(t);
        struct shape {
            int64_t K, M, N;
        };
        // the last three: test_llm_gpu's model shapes (a 24-token prompt; gate/up, GQA k/v and the output of n_embd
        // 128 or 256)
        const int64_t ke = qk == 32 ? 128 : 256;
        for (shape sh : {shape{qk == 32 ? 416 : 768, 37, 5}, shape{ke, 128, 24}, shape{3840, 300, 40},
                         shape{qk == 32 ? 1056 : 1280, 130, 64}, shape{qk == 32 ? 1056 : 1280, 200, 47},
                         shape{ke, 344, 24}, shape{ke, 32, 24}, shape{ke, 300, 24}, shape{4096, 129, 33}}) {
            auto build = [=](ggml_context * cw, ggml_context * cg) {
                return ggml_mul_mat(cg, leaf(cw, t, sh.K, sh.M, 1, "w"), leaf(cg, GGML_TYPE_F32, sh.K, sh.N, 1, "x"));
            };
            const run_result want = run_weights(tiled, build, 5);
            for (ggml_backend_t be : {streamed, wgmma}) {
                const int before = ggml_backend_cuda_get_wgmma_count(wgmma);
                const run_result got = run_weights(be, build, 5);
                const double e = got.ok && want.ok ? backend_case_nmse(got.values, want.values) : INFINITY;
                INFO(ggml_type_name(t), be == wgmma ? " wgmma" : " streamed", " K", sh.K, " M", sh.M, " N", sh.N,
                     ": nmse ", e);
                CHECK(e <= 1e-10);
                n_cases += be == wgmma && ggml_backend_cuda_get_wgmma_count(wgmma) > before;
            }
        }
    }
    // every case ran on wgmma where the device has it (the probe, mmqw.cu), none elsewhere
    cudaDeviceProp prop;
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    MESSAGE("wgmma GEMM cases run: ", n_cases, " (device ", prop.name, ", compute capability ", prop.major, ".",
            prop.minor, ")");
    if (prop.major == 9 && prop.minor == 0) CHECK(n_cases == 6 * 9);
    if (prop.major != 9) CHECK(n_cases == 0);
    ggml_backend_free(tiled);
    ggml_backend_free(wgmma);
    ggml_backend_free(streamed);
    unsetenv("GGML_CUDA_MMQ_MAX_N");
}

// Prompt GEMMs past the tensor-core GEMM's limit dequantize their weights to f16 for cuBLAS; dq-ahead.cuh does that on
// a second stream into two slots, ahead of each GEMM. The same kernels either way, so the result must be bit-equal
// to the inline path (GGML_CUDA_NO_DQ_AHEAD=1), and close to the CPU. Seven mat-muls of five types and four sizes in
// a chain and a branch: each slot is refilled three times within a graph, and the second computation refills them
// after the first graph's GEMMs.
TEST_CASE("quantized types: prompt weights dequantized ahead on a second stream equal the inline path") {
    backends be;
    setenv("GGML_CUDA_NO_DQ_AHEAD", "1", 1);
    ggml_backend_t inl = ggml_backend_cuda_init(0);
    unsetenv("GGML_CUDA_NO_DQ_AHEAD");
    REQUIRE(inl != nullptr);
    const int64_t N = 130; // > 112: dequantization + cuBLAS
    // each product normed (random weights would otherwise grow the values past f16's range within a few layers)
    auto build = [=](ggml_context * cw, ggml_context * cg) {
        auto mm = [&](ggml_type t, int64_t K, int64_t M, const char * name, ggml_tensor * x) { // [M, N]
            return ggml_rms_norm(cg, ggml_mul_mat(cg, leaf(cw, t, K, M, 1, name), x), 1e-5f);
        };
        ggml_tensor * x = leaf(cg, GGML_TYPE_F32, 512, N, 1, "x");
        ggml_tensor * h = mm(GGML_TYPE_Q8_0, 512, 256, "w1", x);
        h = mm(GGML_TYPE_Q4_K, 256, 768, "w2", h);
        h = mm(GGML_TYPE_Q6_K, 768, 512, "w3", h);
        h = mm(GGML_TYPE_Q4_0, 512, 1024, "w4", h);
        h = mm(GGML_TYPE_Q8_0, 1024, 256, "w5", h);
        ggml_tensor * y = mm(GGML_TYPE_Q5_K, 512, 256, "w6", x);
        return mm(GGML_TYPE_Q4_K, 256, 256, "w7", ggml_add(cg, h, y));
    };
    const int n0 = ggml_backend_cuda_get_dq_ahead_count(be.cuda);
    const run_result want = run_weights(be.cpu, build, 7);
    const run_result ahead = run_weights(be.cuda, build, 7);
    const run_result inline_ = run_weights(inl, build, 7);
    CHECK(ggml_backend_cuda_get_dq_ahead_count(be.cuda) - n0 == 14); // 7 GEMMs, computed twice
    CHECK(ggml_backend_cuda_get_dq_ahead_count(inl) == 0);
    REQUIRE(ahead.ok);
    REQUIRE(inline_.ok);
    REQUIRE(want.ok);
    CHECK(ahead.values == inline_.values);
    const double e = backend_case_nmse(ahead.values, want.values);
    INFO("against the CPU: nmse ", e);
    CHECK(e <= 1e-2);
    ggml_backend_free(inl);
}

TEST_CASE("quantized types: get_rows, set/get of repacked weights (ggml's bytes back), partial sets merge") {
    backends be;
    for (ggml_type t : k_qtypes) {
        const int64_t qk = ggml_blck_size(t);
        const std::string tn = ggml_type_name(t);
        compare_w(
            be, tn + " get_rows (weights buffer)",
            [=](ggml_context * cw, ggml_context * cg) {
                return ggml_get_rows(cg, leaf(cw, t, 2 * qk, 101, 1, "w"), leaf(cg, GGML_TYPE_I32, 7, 1, 1, "i"));
            },
            1e-12);
        compare(
            be, tn + " get_rows (ggml layout, batched ids)",
            [=](ggml_context * ctx) {
                return ggml_get_rows(ctx, leaf(ctx, t, 3 * qk, 100, 2, "tok_embd"),
                                     leaf(ctx, GGML_TYPE_I32, 5, 2, 1, "ids"));
            },
            1e-12);

        ggml_init_params ip = {1u << 20, nullptr, true};
        ggml_context * ctx = ggml_init(ip);
        ggml_tensor * w = ggml_new_tensor_3d(ctx, t, 2 * qk, 37, 2);
        ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be.cuda);
        REQUIRE(buf);
        ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
        std::vector<uint8_t> a = leaf_bytes(w, 11), b(a.size(), 0);
        ggml_backend_tensor_set(w, a.data(), 0, a.size());
        ggml_backend_tensor_get(w, b.data(), 0, b.size());
        INFO(tn);
        CHECK(a == b);
        const size_t bs = ggml_type_size(t);
        std::vector<uint8_t> part(3 * bs + 7);
        ggml_backend_tensor_get(w, part.data(), bs * 5 + 3, part.size());
        CHECK(std::equal(part.begin(), part.end(), a.begin() + bs * 5 + 3));
        const std::vector<uint8_t> c = leaf_bytes(w, 12);
        ggml_backend_tensor_set(w, c.data() + 10 * bs, 10 * bs, 7 * bs + 5);
        std::copy(c.begin() + 10 * bs, c.begin() + 17 * bs + 5, a.begin() + 10 * bs);
        ggml_backend_tensor_get(w, b.data(), 0, b.size());
        CHECK(a == b);
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
}

TEST_CASE("fused residual add + rms_norm + mul (the add has another user)") {
    backends be;
    for (int64_t n : {64, 70, 4096, 5120, 4098}) {
        compare(
            be, "add+rms_norm*w n" + std::to_string(n),
            [=](ggml_context * ctx) {
                ggml_tensor * s = ggml_add(ctx, leaf(ctx, GGML_TYPE_F32, n, 3, 1, "x"), leaf(ctx, GGML_TYPE_F32, n, 3, 1, "y"));
                ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, s, 1e-5f), leaf(ctx, GGML_TYPE_F32, n, 1, 1, "w"));
                return ggml_add(ctx, ggml_scale(ctx, h, 0.5f), s);
            },
            1e-7);
    }
}
// ---- fused decode mat-vecs (q/k/v group, gate/up + swiglu) and norm + q8s quantization ---------------
#include "ggml-alloc.h"

namespace {
// build(cw, cg, gf): tensors made in cw live in a buffer marked as weights (q8_0 stored repacked on CUDA);
// the builder may expand nodes into gf itself to fix their order; the returned tensors are then expanded
// in order, flagged OUTPUT and read back (values concatenated).
using layer_fn = std::function<std::vector<ggml_tensor *>(ggml_context * cw, ggml_context * cg, ggml_cgraph * gf)>;
using fill_map = std::map<std::string, std::vector<uint8_t>>;
// a leaf's bytes for fill_map from f32 values
std::vector<uint8_t> f32_bytes(const std::vector<float> & v) {
    std::vector<uint8_t> b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}

struct layer_result {
    std::vector<double> values;            // all outputs, concatenated
    std::vector<std::vector<double>> outs; // per output
    std::vector<std::vector<double>> runs; // fresh: the outputs (concatenated) of each compute
    bool ok = false;
};

// galloc: the graph's tensors are placed by ggml_gallocr as in a real decode graph (memory reused, SWIGLU
// in place over its gate input), else each in its own place. Leaf bytes come from the seed and the leaf's
// name (equal names in different graphs get equal bytes) unless `fill` names the leaf. Computed twice
// (first sighting eager, then captured into a CUDA graph). fresh: three computes (eager, captured, replayed), the
// leaves set again before each (a graph that writes into a leaf, such as a KV store, then sees the same input every
// time), each compute's outputs in runs.
layer_result run_layer(ggml_backend_t backend, const layer_fn & build, uint64_t seed, bool galloc = false,
                       const fill_map & fill = {}, bool fresh = false) {
    ggml_init_params ip = {16u * 1024 * 1024, nullptr, true};
    ggml_context * cw = ggml_init(ip);
    ggml_context * cg = ggml_init(ip);
    ggml_cgraph * gf = ggml_new_graph_custom(cg, 4096);
    const std::vector<ggml_tensor *> outs = build(cw, cg, gf);
    for (ggml_tensor * t : outs) {
        ggml_set_output(t);
        ggml_build_forward_expand(gf, t);
    }
    ggml_backend_buffer_t bw = nullptr; // (no weights: nothing to allocate)
    if (ggml_get_first_tensor(cw)) {
        bw = ggml_backend_alloc_ctx_tensors(cw, backend);
        REQUIRE(bw != nullptr);
        ggml_backend_buffer_set_usage(bw, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
    }
    ggml_backend_buffer_t bg = nullptr;
    ggml_gallocr_t ga = nullptr;
    if (galloc) {
        ga = ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend));
        REQUIRE(ggml_gallocr_alloc_graph(ga, gf));
    } else {
        bg = ggml_backend_alloc_ctx_tensors(cg, backend);
        REQUIRE(bg != nullptr);
    }
    auto bytes_for = [&](const ggml_tensor * t) {
        const auto it = fill.find(t->name);
        if (it != fill.end()) return it->second;
        uint64_t h = seed;
        for (const char * p = t->name; *p; ++p)
            h = (h ^ (uint8_t)*p) * 1099511628211ull;
        return leaf_bytes(t, h);
    };
    // poison every op result first (with galloc they share memory), then set the leaves
    for (ggml_context * c : {cw, cg})
        for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t))
            if (!t->view_src && t->data && t->op != GGML_OP_NONE) {
                const std::vector<uint8_t> poison(ggml_nbytes(t), 0xFF);
                ggml_backend_tensor_set(t, poison.data(), 0, poison.size());
            }
    auto set_leaves = [&] {
        for (ggml_context * c : {cw, cg})
            for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t))
                if (!t->view_src && t->data && t->op == GGML_OP_NONE) {
                    const std::vector<uint8_t> b = bytes_for(t);
                    REQUIRE(b.size() == ggml_nbytes(t));
                    ggml_backend_tensor_set(t, b.data(), 0, b.size());
                }
    };
    auto read_outs = [&](layer_result & r) {
        r.outs.clear();
        r.values.clear();
        for (ggml_tensor * t : outs) {
            std::vector<uint8_t> bytes(ggml_nbytes(t));
            ggml_backend_tensor_get(t, bytes.data(), 0, bytes.size());
            r.outs.push_back(values_of(t, bytes));
            r.values.insert(r.values.end(), r.outs.back().begin(), r.outs.back().end());
        }
    };
    set_leaves();
    layer_result r;
    r.ok = true;
    for (int i = 0; i < (fresh ? 3 : 2) && r.ok; ++i) {
        if (fresh && i > 0) set_leaves();
        r.ok = ggml_backend_graph_compute(backend, gf) == GGML_STATUS_SUCCESS;
        if (fresh && r.ok) {
            ggml_backend_synchronize(backend);
            read_outs(r);
            r.runs.push_back(r.values);
        }
    }
    ggml_backend_synchronize(backend);
    if (r.ok && !fresh) read_outs(r); // (fresh: the last run's outputs are read already)
    if (ga) ggml_gallocr_free(ga);
    if (bg) ggml_backend_buffer_free(bg);
    if (bw) ggml_backend_buffer_free(bw);
    ggml_free(cg);
    ggml_free(cw);
    return r;
}

struct fusion_counts {
    int mmv = 0, glu = 0, nq8 = 0;
    int mmv_norm = 0; // mat-vec + residual add + norm (code 12 in ggml-cuda.cu)
    int mmv_rope = 0; // q/k/v mat-vecs + rope + KV stores (codes 13 / 14)
};
fusion_counts fusion_stats(ggml_backend_t cuda) {
    fusion_counts c;
    ggml_backend_cuda_get_fusion_stats(cuda, &c.mmv, &c.glu, &c.nq8, nullptr, nullptr, nullptr, &c.mmv_norm,
                                       &c.mmv_rope);
    return c;
}

// CPU vs CUDA; returns how many fused groups of each kind the CUDA runs executed
fusion_counts compare_layer(backends & be, const std::string & name, const layer_fn & build, double max_nmse,
                            bool galloc = false, uint64_t seed = 5) {
    const layer_result want = run_layer(be.cpu, build, seed, galloc);
    const fusion_counts c0 = fusion_stats(be.cuda);
    const layer_result got = run_layer(be.cuda, build, seed, galloc);
    const fusion_counts c1 = fusion_stats(be.cuda);
    const double e = got.ok && want.ok ? backend_case_nmse(got.values, want.values) : INFINITY;
    INFO(name, " nmse ", e, " (max ", max_nmse, "); fused groups: mat-vec ", c1.mmv - c0.mmv, ", gate/up+swiglu ",
         c1.glu - c0.glu, ", norm+q8 ", c1.nq8 - c0.nq8, ", mat-vec+add+norm ", c1.mmv_norm - c0.mmv_norm);
    CHECK(want.ok);
    CHECK(got.ok);
    CHECK(e <= max_nmse);
    return {c1.mmv - c0.mmv, c1.glu - c0.glu, c1.nq8 - c0.nq8, c1.mmv_norm - c0.mmv_norm, c1.mmv_rope - c0.mmv_rope};
}

// a CUDA backend with every fusion off (GGML_CUDA_NO_FUSION is read at init)
ggml_backend_t cuda_init_no_fusion() {
    setenv("GGML_CUDA_NO_FUSION", "1", 1);
    ggml_backend_t b = ggml_backend_cuda_init(0);
    unsetenv("GGML_CUDA_NO_FUSION");
    REQUIRE(b != nullptr);
    return b;
}

std::string shape_name(ggml_type wt, int64_t K, const std::vector<int64_t> & Ms) {
    std::string s = std::string(ggml_type_name(wt)) + " K" + std::to_string(K) + " M";
    for (size_t m = 0; m < Ms.size(); ++m)
        s += (m ? "/" : "") + std::to_string(Ms[m]);
    return s;
}

// [K, N] f32 activation after (add +) rms_norm * weight, as a Llama layer starts its attention and FFN.
// (Leaf names avoid the prefixes backend_case_leaf_data gives special value ranges: "ff", "mask", "pos".)
ggml_tensor * normed_input(ggml_context * cw, ggml_context * cg, int64_t K, int64_t N, bool add) {
    ggml_tensor * x = leaf(cg, GGML_TYPE_F32, K, N, 1, "x");
    if (add) x = ggml_add(cg, x, leaf(cg, GGML_TYPE_F32, K, N, 1, "res"));
    return ggml_mul(cg, ggml_rms_norm(cg, x, 1e-5f), leaf(cw, GGML_TYPE_F32, K, 1, 1, "norm_w"));
}

// as the q8r / f16 mat-vec cases; the CPU rounds the activation of a K-quant dot to q8_K (one scale per 256
// values), so those compare a little less closely (a gate/up+swiglu doubles the error of one mat-vec)
double wtol(ggml_type wt) {
    if (!ggml_is_quantized(wt)) return 1e-6;
    return ggml_blck_size(wt) == 256 ? 5e-4 : 2e-4;
}
} // namespace

TEST_CASE("f16 prompt GEMMs share one f16 copy of their activation; memory reused by the allocator is converted anew") {
    // q and k read x (one conversion to f16), then x2 is placed where x was (x is dead after k) and v reads it:
    // the cached copy of x must not serve v
    backends be;
    const int64_t K = 256, N = 64;
    for (bool galloc : {false, true}) {
        compare_layer(
            be, std::string("f16 gemms, shared activation") + (galloc ? " galloc" : ""),
            [=](ggml_context * cw, ggml_context * cg, ggml_cgraph * gf) {
                ggml_tensor * x = normed_input(cw, cg, K, N, false);
                ggml_tensor * q = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_F16, K, 48, 1, "wq"), x);
                ggml_tensor * k = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_F16, K, 40, 1, "wk"), x);
                ggml_build_forward_expand(gf, q);
                ggml_build_forward_expand(gf, k);
                ggml_tensor * x2 = ggml_mul(cg, ggml_rms_norm(cg, leaf(cg, GGML_TYPE_F32, K, N, 1, "x2"), 1e-5f),
                                            leaf(cw, GGML_TYPE_F32, K, 1, 1, "norm_w2"));
                ggml_tensor * v = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_F16, K, 40, 1, "wv"), x2);
                return std::vector<ggml_tensor *>{q, k, v};
            },
            2e-5, galloc);
    }
}

TEST_CASE("fused mat-vec group: q/k/v of one normed activation in one launch (q8_0, q4_0, q4_K, q6_K, f16)") {
    backends be;
    struct shape {
        int64_t K;
        std::vector<int64_t> Ms;
        bool add;
    };
    const shape shapes[] = {{4096, {4096, 1024, 1024}, true}, {4096, {37, 333, 1024}, false}, {4096, {4096, 37}, true},
                            {256, {333, 37, 37}, true},       {256, {37, 333}, false},        {1024, {1, 4, 5}, false}};
    for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
        for (const shape & s : shapes) {
            for (bool galloc : {false, true}) {
                if (galloc && s.K != 4096) continue;
                const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                    ggml_tensor * cur = normed_input(cw, cg, s.K, 1, s.add);
                    std::vector<ggml_tensor *> outs;
                    for (size_t m = 0; m < s.Ms.size(); ++m) {
                        const std::string wn = "w" + std::to_string(m);
                        outs.push_back(ggml_mul_mat(cg, leaf(cw, wt, s.K, s.Ms[m], 1, wn.c_str()), cur));
                    }
                    return outs;
                };
                const std::string name = shape_name(wt, s.K, s.Ms) + (s.add ? " add" : "") + (galloc ? " galloc" : "");
                const fusion_counts c = compare_layer(be, name, build, wtol(wt), galloc);
                INFO(name);
                // fused where the separate launches use the kernel whose row loop the group shares:
                // q8_0 v6 (K <= 4096), the other quantized types always, f16 v2 (K >= 1024)
                const bool fuses = wt != GGML_TYPE_F16 || s.K >= 1024;
                CHECK((c.mmv > 0) == fuses);
                CHECK(c.glu == 0);
                // the norm output's readers are all quantized-weight mat-vecs (q8s readers)
                CHECK((c.nq8 > 0) == (wt != GGML_TYPE_F16));
            }
        }
    }
    // Q4_K_M-style q/k/v: q and k q4_K, v q6_K: one launch of the mixed group (mmvq-mix.cu) reading the activation
    // the norm quantized
    const fusion_counts c = compare_layer(
        be, "q4_K q, k + q6_K v",
        [](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
            ggml_tensor * cur = normed_input(cw, cg, 4096, 1, true);
            return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, 4096, 4096, 1, "wq"), cur),
                                              ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, 4096, 1024, 1, "wk"), cur),
                                              ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q6_K, 4096, 1024, 1, "wv"), cur)};
        },
        2e-4);
    CHECK(c.mmv > 0);
    CHECK(c.nq8 > 0);
}

TEST_CASE("fused mat-vec group and gate/up+swiglu equal the separate kernels bit for bit") {
    // the activation is a leaf (no norm fusion in either run): fused and separate launches run the same
    // per-row arithmetic on the same quantized activation
    backends be;
    ggml_backend_t plain = cuda_init_no_fusion();
    // (the last two: q and k of the first type, v of the second, as the K-quant mixes' attn_v: mmvq-mix.cu)
    const std::pair<ggml_type, ggml_type> types[] = {
        {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0}, {GGML_TYPE_F16, GGML_TYPE_F16},   {GGML_TYPE_Q4_0, GGML_TYPE_Q4_0},
        {GGML_TYPE_Q5_1, GGML_TYPE_Q5_1}, {GGML_TYPE_Q3_K, GGML_TYPE_Q3_K}, {GGML_TYPE_Q4_K, GGML_TYPE_Q4_K},
        {GGML_TYPE_Q6_K, GGML_TYPE_Q6_K}, {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}, {GGML_TYPE_Q3_K, GGML_TYPE_Q5_K}};
    for (const auto & [wt, wtv] : types) {
        for (bool glu : {false, true}) {
            if (glu && wt != wtv) continue;
            const int64_t K = 4096;
            const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                ggml_tensor * x = leaf(cg, GGML_TYPE_F32, K, 1, 1, "x");
                if (glu) {
                    ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, K, 1000, 1, "wg"), x);
                    ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, K, 1000, 1, "wu"), x);
                    return std::vector<ggml_tensor *>{ggml_swiglu_split(cg, g, u)};
                }
                return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, wt, K, 333, 1, "wq"), x),
                                                  ggml_mul_mat(cg, leaf(cw, wt, K, 1024, 1, "wk"), x),
                                                  ggml_mul_mat(cg, leaf(cw, wtv, K, 37, 1, "wv"), x)};
            };
            const fusion_counts c0 = fusion_stats(be.cuda);
            const layer_result fused = run_layer(be.cuda, build, 9);
            const fusion_counts c1 = fusion_stats(be.cuda);
            const layer_result sep = run_layer(plain, build, 9);
            INFO(ggml_type_name(wt), " ", ggml_type_name(wtv), glu ? " gate/up+swiglu" : " q/k/v");
            REQUIRE(fused.ok);
            REQUIRE(sep.ok);
            CHECK((glu ? c1.glu - c0.glu : c1.mmv - c0.mmv) > 0);
            CHECK(fusion_stats(plain).mmv + fusion_stats(plain).glu == 0);
            CHECK(backend_case_nmse(fused.values, sep.values) == 0.0);
        }
    }
    ggml_backend_free(plain);
}

// A batched decode step's q/k/v and gate/up GEMMs (2..64 columns of one activation, on the wgmma GEMM where the device
// has it) run as one launch per group (fusion codes 15 / 16, mmq-w.cuh's weight groups): equal to the separate
// launches up to the order of the K split's additions, and to the CPU; rows not a multiple of the 128-row blocks, so
// a block past one weight's end must not spill into the next weight's rows.
TEST_CASE("batched q/k/v and gate/up GEMMs in one wgmma launch equal the separate launches and the CPU") {
    setenv("GGML_CUDA_MMW_GROUP", "64", 1); // grouped up to 64 columns (the default; whatever the caller's env says)
    backends be;
    unsetenv("GGML_CUDA_MMW_GROUP");
    ggml_backend_t plain = cuda_init_no_fusion();
    int n_checked = 0;
    for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K}) {
        for (int64_t N : {9, 33, 64}) {
            for (bool glu : {false, true}) {
                const int64_t K = 2048;
                const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                    ggml_tensor * x = normed_input(cw, cg, K, N, true);
                    if (glu) {
                        ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, K, 1000, 1, "wg"), x);
                        ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, K, 1000, 1, "wu"), x);
                        return std::vector<ggml_tensor *>{ggml_swiglu_split(cg, g, u)};
                    }
                    return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, wt, K, 333, 1, "wq"), x),
                                                      ggml_mul_mat(cg, leaf(cw, wt, K, 128, 1, "wk"), x),
                                                      ggml_mul_mat(cg, leaf(cw, wt, K, 37, 1, "wv"), x)};
                };
                const std::string name = std::string(ggml_type_name(wt)) + " N" + std::to_string(N) +
                                         (glu ? " gate/up+swiglu" : " q/k/v");
                INFO(name);
                const int w0 = ggml_backend_cuda_get_wgmma_count(be.cuda);
                compare_layer(be, name, build, wtol(wt)); // (against the CPU)
                const int w1 = ggml_backend_cuda_get_wgmma_count(be.cuda);
                const layer_result fused = run_layer(be.cuda, build, 5);
                const int p0 = ggml_backend_cuda_get_wgmma_count(plain);
                const layer_result sep = run_layer(plain, build, 5);
                const int p1 = ggml_backend_cuda_get_wgmma_count(plain);
                REQUIRE(fused.ok);
                REQUIRE(sep.ok);
                if (p1 == p0) continue; // no wgmma GEMM on this device: nothing is grouped
                CHECK(w1 - w0 > 0);                           // one launch for the group (in each run)
                CHECK(p1 - p0 == (glu ? 2 : 3) * (w1 - w0)); // one per weight without fusion
                CHECK(backend_case_nmse(fused.values, sep.values) <= 1e-10);
                ++n_checked;
            }
        }
    }
    MESSAGE("grouped wgmma GEMM cases checked: ", n_checked);
    ggml_backend_free(plain);
}

TEST_CASE("batched GEMM activations written in the wgmma order by the norm, SwiGLU and attention equal the reorder") {
    // A batched decode step's GEMM reads its activation as f16 in its own order (mmw-order.cuh). The kernel producing
    // it (rms_norm * w, add + rms_norm * w, SWIGLU, the per-token decode attention) writes that order beside its f32
    // result (fusion codes 17-20); GGML_CUDA_MMW_REORDER=1 reorders it by a launch of its own instead. No K split in
    // either backend (GGML_CUDA_MMQ_KS=1): the GEMM's sums are then added in one order, and the results equal bit for
    // bit. K not a multiple of 128 (padding the producers do not write) keeps the reorder. Both backends run every
    // graph eagerly (GGML_CUDA_DISABLE_GRAPHS), so that each run counts its launches (a replay counts none).
    setenv("GGML_CUDA_MMQ_KS", "1", 1);
    setenv("GGML_CUDA_DISABLE_GRAPHS", "1", 1);
    backends be;
    setenv("GGML_CUDA_MMW_REORDER", "1", 1);
    ggml_backend_t sep = ggml_backend_cuda_init(0);
    unsetenv("GGML_CUDA_MMW_REORDER");
    unsetenv("GGML_CUDA_DISABLE_GRAPHS");
    unsetenv("GGML_CUDA_MMQ_KS");
    REQUIRE(sep != nullptr);
    auto order_stats = [](ggml_backend_t b) {
        std::pair<int, int> r;
        ggml_backend_cuda_get_wgmma_order_stats(b, &r.first, &r.second);
        return r;
    };
    enum kind { NORM, ADD_NORM, SWIGLU, ATTN };
    int n_checked = 0;
    for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
        for (int64_t N : {9, 33, 64}) {
            for (kind kd : {NORM, ADD_NORM, SWIGLU, ATTN}) {
                for (int64_t K : {2048, 2304 + 32}) {
                    if (K % ggml_blck_size(wt) != 0 || (K % 128 != 0 && kd != ADD_NORM)) continue;
                    const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                        if (kd == SWIGLU) { // gate, up [K, N] -> SWIGLU -> down
                            ggml_tensor * x = leaf(cg, GGML_TYPE_F32, 256, N, 1, "x");
                            ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, 256, K, 1, "wg"), x);
                            ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, 256, K, 1, "wu"), x);
                            ggml_tensor * y = ggml_swiglu_split(cg, g, u);
                            return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, wt, K, 200, 1, "wd"), y)};
                        }
                        if (kd == ATTN) { // N tokens of N sequences on a shared f16 cache, heads of 128, then wo
                            const int64_t D = 128, H = K / D, n_kv = 700;
                            ggml_tensor * q = ggml_permute(cg, leaf(cg, GGML_TYPE_F32, D, H, N, "q"), 0, 2, 1, 3);
                            ggml_tensor * kc = leaf(cg, GGML_TYPE_F16, D * H, n_kv, 1, "kc");
                            ggml_tensor * vc = leaf(cg, GGML_TYPE_F16, D * H, n_kv, 1, "vc");
                            ggml_tensor * k = ggml_view_3d(cg, kc, D, n_kv, H, kc->nb[1], kc->nb[0] * D, 0);
                            ggml_tensor * v = ggml_view_3d(cg, vc, D, n_kv, H, vc->nb[1], vc->nb[0] * D, 0);
                            ggml_tensor * m = leaf(cg, GGML_TYPE_F16, n_kv, N, 1, "tokmask");
                            ggml_tensor * fa = ggml_flash_attn_ext(cg, q, k, v, m, 1.0f / std::sqrt((float)D), -1);
                            ggml_flash_attn_ext_set_seqs(fa, (int)N, true);
                            ggml_tensor * x = ggml_reshape_2d(cg, fa, D * H, N);
                            return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, wt, K, 333, 1, "wo"), x)};
                        }
                        ggml_tensor * x = normed_input(cw, cg, K, N, kd == ADD_NORM);
                        return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, wt, K, 333, 1, "wq"), x),
                                                          ggml_mul_mat(cg, leaf(cw, wt, K, 128, 1, "wk"), x),
                                                          ggml_mul_mat(cg, leaf(cw, wt, K, 37, 1, "wv"), x)};
                    };
                    static const char * kinds[] = {"rms_norm*w", "add+rms_norm*w", "swiglu", "attention"};
                    const std::string name = std::string(ggml_type_name(wt)) + " N" + std::to_string(N) + " K" +
                                             std::to_string(K) + " " + kinds[kd];
                    INFO(name);
                    compare_layer(be, name, build, kd == ATTN ? 2e-4 : wtol(wt)); // (against the CPU)
                    const auto f0 = order_stats(be.cuda), s0 = order_stats(sep);
                    const int w0 = ggml_backend_cuda_get_wgmma_count(sep);
                    const layer_result fused = run_layer(be.cuda, build, 7);
                    const layer_result plain = run_layer(sep, build, 7);
                    const auto f1 = order_stats(be.cuda), s1 = order_stats(sep);
                    REQUIRE(fused.ok);
                    REQUIRE(plain.ok);
                    if (ggml_backend_cuda_get_wgmma_count(sep) == w0) continue; // no wgmma GEMM on this device
                    CHECK(s1.first > s0.first); // the reorder launches
                    CHECK(s1.second == s0.second);
                    // each activation written in the order by its producer is one reorder launch fewer
                    CHECK((s1.first - s0.first) - (f1.first - f0.first) == f1.second - f0.second);
                    CHECK((f1.second > f0.second) == (K % 128 == 0));
                    CHECK(fused.values == plain.values);
                    ++n_checked;
                }
            }
        }
    }
    MESSAGE("wgmma activation order cases checked: ", n_checked);
    ggml_backend_free(sep);
}

TEST_CASE("fused gate/up mat-vecs + swiglu in one launch (q8_0, q4_0, q4_K, q5_K, f16)") {
    backends be;
    struct shape {
        int64_t K, M;
        bool galloc, swapped; // swapped: SWIGLU(up, gate) of nodes made gate first
    };
    const shape shapes[] = {{4096, 11008, false, false}, {4096, 11008, true, false}, {4096, 333, false, false},
                            {4096, 37, true, true},      {256, 37, false, false},    {256, 2115, true, false},
                            {1024, 3, false, true}};
    for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K}) {
        for (const shape & s : shapes) {
            const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph * gf) {
                ggml_tensor * cur = normed_input(cw, cg, s.K, 1, true);
                ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, s.K, s.M, 1, "wg"), cur);
                ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, s.K, s.M, 1, "wu"), cur);
                if (!s.swapped) return std::vector<ggml_tensor *>{ggml_swiglu_split(cg, g, u)};
                ggml_build_forward_expand(gf, g); // nodes: g, u, then silu(u) * g
                ggml_build_forward_expand(gf, u);
                return std::vector<ggml_tensor *>{ggml_swiglu_split(cg, u, g)};
            };
            const std::string name =
                shape_name(wt, s.K, {s.M}) + (s.galloc ? " galloc" : "") + (s.swapped ? " swapped" : "");
            const fusion_counts c = compare_layer(be, name, build, wtol(wt), s.galloc);
            INFO(name);
            const bool fuses = wt != GGML_TYPE_F16 || s.K >= 1024;
            CHECK((c.glu > 0) == fuses);
            CHECK(c.mmv == 0);
        }
    }
}

TEST_CASE("fused mat-vecs: not fused when gate/up has another reader or is an output, N = 2, or not adjacent") {
    backends be;
    const int64_t K = 4096, M = 333;
    for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_F16, GGML_TYPE_Q4_K}) {
        const std::string tn = ggml_type_name(wt);
        // gate also read by an ADD: gate/up still one launch (pair), SWIGLU separate
        fusion_counts c = compare_layer(
            be, tn + " gate read twice",
            [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                ggml_tensor * cur = normed_input(cw, cg, K, 1, true);
                ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wg"), cur);
                ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wu"), cur);
                ggml_tensor * s = ggml_swiglu_split(cg, g, u);
                return std::vector<ggml_tensor *>{s, ggml_add(cg, g, leaf(cg, GGML_TYPE_F32, M, 1, 1, "z"))};
            },
            wtol(wt));
        CHECK(c.glu == 0);
        CHECK(c.mmv > 0);
        // up is a graph output: it must be written
        c = compare_layer(
            be, tn + " up is an output",
            [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                ggml_tensor * cur = normed_input(cw, cg, K, 1, false);
                ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wg"), cur);
                ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wu"), cur);
                return std::vector<ggml_tensor *>{ggml_swiglu_split(cg, g, u), u};
            },
            wtol(wt), true);
        CHECK(c.glu == 0);
        CHECK(c.mmv > 0);
        // N = 2 (two tokens): nothing of this kind is fused
        c = compare_layer(
            be, tn + " N2",
            [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                ggml_tensor * cur = normed_input(cw, cg, K, 2, true);
                std::vector<ggml_tensor *> outs;
                for (const char * wn : {"wq", "wk", "wv"})
                    outs.push_back(ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, wn), cur));
                ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wg"), cur);
                ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wu"), cur);
                outs.push_back(ggml_swiglu_split(cg, g, u));
                return outs;
            },
            wtol(wt));
        CHECK(c.mmv == 0);
        CHECK(c.glu == 0);
        CHECK(c.nq8 == 0);
        // q and k of one activation with a SCALE between them: not adjacent, not fused
        c = compare_layer(
            be, tn + " not adjacent",
            [=](ggml_context * cw, ggml_context * cg, ggml_cgraph * gf) {
                ggml_tensor * cur = normed_input(cw, cg, K, 1, true);
                ggml_tensor * q = ggml_scale(cg, ggml_mul_mat(cg, leaf(cw, wt, K, M, 1, "wq"), cur), 0.5f);
                ggml_build_forward_expand(gf, q);
                return std::vector<ggml_tensor *>{q, ggml_mul_mat(cg, leaf(cw, wt, K, 64, 1, "wk"), cur)};
            },
            wtol(wt));
        CHECK(c.mmv == 0);
        CHECK((c.nq8 > 0) == (wt != GGML_TYPE_F16)); // two quantized-weight readers, one quantization
    }
}

TEST_CASE("fused norm + q8s quantization: bit-identical to quantize_q8s, only for quantized-weight mat-vec readers") {
    // the q4_0 / q4_K readers also use the block sums of the q8s layout: those must match bit for bit too
    backends be;
    for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_K}) {
        for (bool add : {false, true}) {
            for (int64_t K : {256, 4096, 4128}) {
                if (K % ggml_blck_size(wt) != 0) continue;
                const std::string name = std::string(ggml_type_name(wt)) + " " + (add ? "add+" : "") +
                                         "rms_norm*w+q8s K" + std::to_string(K);
                // the norm result (an output too) and one mat-vec reading it through the fused quantization
                const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                    ggml_tensor * cur = normed_input(cw, cg, K, 1, add);
                    return std::vector<ggml_tensor *>{cur, ggml_mul_mat(cg, leaf(cw, wt, K, 333, 1, "wq"), cur)};
                };
                const fusion_counts c = compare_layer(be, name, build, 2e-4);
                INFO(name);
                CHECK(c.nq8 > 0);
                // the same mat-vec on the norm's f32 result as a leaf (quantize_q8s): the same bits
                const layer_result r1 = run_layer(be.cuda, build, 5);
                REQUIRE(r1.ok);
                REQUIRE(r1.outs.size() == 2);
                const std::vector<uint8_t> xb = f32_bytes(std::vector<float>(r1.outs[0].begin(), r1.outs[0].end()));
                const layer_result r2 = run_layer(
                    be.cuda,
                    [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                        return std::vector<ggml_tensor *>{
                            ggml_mul_mat(cg, leaf(cw, wt, K, 333, 1, "wq"), leaf(cg, GGML_TYPE_F32, K, 1, 1, "xn"))};
                    },
                    5, false, fill_map{{"xn", xb}});
                REQUIRE(r2.ok);
                CHECK(r2.values == r1.outs[1]);
            }
        }
    }
    // a reader that is not a q8_0 mat-vec (f16 weights): no fused quantization, still correct
    const fusion_counts c = compare_layer(
        be, "norm read by q8_0 and f16 mat-vecs",
        [](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
            ggml_tensor * cur = normed_input(cw, cg, 4096, 1, true);
            return std::vector<ggml_tensor *>{ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q8_0, 4096, 64, 1, "wq"), cur),
                                              ggml_mul_mat(cg, leaf(cw, GGML_TYPE_F16, 4096, 64, 1, "wk"), cur)};
        },
        2e-4);
    CHECK(c.nq8 == 0);
}

TEST_CASE("mat-vec epilogue: residual add, and the rms_norm after it deferred to the mat-vecs reading it") {
    // A decode layer from the attention output on (code 12 in ggml-cuda.cu): wo and ffn_down write the residual sum
    // and the q8s of sum * norm weight without the norm's scale, which the gate/up (q/k/v group, output) mat-vecs
    // apply. Against the CPU, with the allocator's memory reuse (in-place ADDs) and without.
    backends be;
    struct tc {
        ggml_type wt, wdown;
        int64_t E, F, V;
    };
    for (tc c : {tc{GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 4096, 11008, 333}, tc{GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, 4096, 11008, 333},
                 tc{GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, 2048, 5632, 1000}, tc{GGML_TYPE_Q5_1, GGML_TYPE_Q5_1, 96, 160, 37},
                 tc{GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, 256, 768, 64}, tc{GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 64, 32, 5}}) {
        for (bool galloc : {false, true}) {
            const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                ggml_tensor * attn = leaf(cg, GGML_TYPE_F32, c.E, 1, 1, "attn");
                ggml_tensor * h = ggml_add(cg, ggml_mul_mat(cg, leaf(cw, c.wt, c.E, c.E, 1, "wo"), attn),
                                           leaf(cg, GGML_TYPE_F32, c.E, 1, 1, "inp"));
                ggml_tensor * n1 = ggml_mul(cg, ggml_rms_norm(cg, h, 1e-5f), leaf(cw, GGML_TYPE_F32, c.E, 1, 1, "nw1"));
                ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, c.wt, c.E, c.F, 1, "wg"), n1);
                ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, c.wt, c.E, c.F, 1, "wu"), n1);
                ggml_tensor * d = ggml_mul_mat(cg, leaf(cw, c.wdown, c.F, c.E, 1, "wd"), ggml_swiglu_split(cg, g, u));
                ggml_tensor * h2 = ggml_add(cg, d, h); // [E]: the next layer's input
                ggml_tensor * n2 = ggml_mul(cg, ggml_rms_norm(cg, h2, 1e-6f), leaf(cw, GGML_TYPE_F32, c.E, 1, 1, "nw2"));
                return std::vector<ggml_tensor *>{h2,
                                                  ggml_mul_mat(cg, leaf(cw, c.wt, c.E, c.E, 1, "wq"), n2),
                                                  ggml_mul_mat(cg, leaf(cw, c.wt, c.E, c.E / 4, 1, "wk"), n2),
                                                  ggml_mul_mat(cg, leaf(cw, c.wt, c.E, c.E / 4, 1, "wv"), n2),
                                                  ggml_mul_mat(cg, leaf(cw, c.wdown, c.E, c.V, 1, "wout"), n2)};
            };
            const std::string name = std::string(ggml_type_name(c.wt)) + "/" + ggml_type_name(c.wdown) + " E" +
                                     std::to_string(c.E) + " F" + std::to_string(c.F) + (galloc ? " galloc" : "");
            // two mat-vecs rounding (wo, ffn_down) feed the last four
            const fusion_counts n = compare_layer(be, name, build, 2 * std::max(wtol(c.wt), wtol(c.wdown)), galloc);
            INFO(name);
            CHECK(n.mmv_norm > 0); // wo and ffn_down
            CHECK(n.glu > 0);
            CHECK(n.nq8 == 0); // no norm kernel left
        }
    }
    // what must stay as it was: a norm result read by an f16 mat-vec too, or a graph output; the mat-vec result read
    // by another node; another activation's mat-vec between the norm's readers (it would take the one cached q8s)
    const int64_t E = 256;
    struct nc {
        const char * what;
        int reader; // 0: f16 mat-vec of the norm, 1: the norm an output, 2: wo's result an output, 3: none (fused),
                    // 4: gate, another activation's mat-vec, then up
    };
    for (nc c : {nc{"norm read by an f16 mat-vec", 0}, nc{"norm an output", 1}, nc{"wo an output", 2},
                 nc{"fused", 3}, nc{"another mat-vec between the norm's readers", 4}}) {
        const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph * gf) {
            ggml_tensor * wo = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, E, E, 1, "wo"), leaf(cg, GGML_TYPE_F32, E, 1, 1, "a"));
            ggml_tensor * h = ggml_add(cg, wo, leaf(cg, GGML_TYPE_F32, E, 1, 1, "inp"));
            ggml_tensor * n1 = ggml_mul(cg, ggml_rms_norm(cg, h, 1e-5f), leaf(cw, GGML_TYPE_F32, E, 1, 1, "nw1"));
            ggml_tensor * g = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, E, 512, 1, "wg"), n1);
            ggml_tensor * z = nullptr;
            if (c.reader == 4) { // nodes: wo, add, norm, mul, g, z, u, ...
                ggml_build_forward_expand(gf, g);
                z = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, E, 64, 1, "wz"), leaf(cg, GGML_TYPE_F32, E, 1, 1, "b"));
                ggml_build_forward_expand(gf, z);
            }
            ggml_tensor * u = ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, E, 512, 1, "wu"), n1);
            ggml_tensor * sw = ggml_swiglu_split(cg, g, u);
            std::vector<ggml_tensor *> outs = {ggml_mul_mat(cg, leaf(cw, GGML_TYPE_Q4_K, 512, E, 1, "wd"), sw)};
            if (c.reader == 0) outs.push_back(ggml_mul_mat(cg, leaf(cw, GGML_TYPE_F16, E, 64, 1, "wf"), n1));
            if (c.reader == 1) outs.push_back(n1);
            if (c.reader == 2) outs.push_back(wo);
            if (c.reader == 4) outs.push_back(z);
            return outs;
        };
        const fusion_counts n = compare_layer(be, c.what, build, 1e-3);
        INFO(c.what);
        CHECK((n.glu > 0) == (c.reader != 4)); // 4: gate and up are not adjacent
        CHECK((n.mmv_norm > 0) == (c.reader == 3));
        // the add+norm kernel still quantizes for gate/up unless an f16 mat-vec reads the norm too, or wo does it
        CHECK((n.nq8 > 0) == (c.reader == 1 || c.reader == 2 || c.reader == 4));
    }
}

TEST_CASE("rope fused with the KV-cache SET_ROWS (the rotated rows land in their cells, the rest untouched)") {
    backends be;
    auto rope_stores = [&] {
        int n = 0;
        ggml_backend_cuda_get_fusion_stats(be.cuda, nullptr, nullptr, nullptr, &n);
        return n;
    };
    for (ggml_type ct : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
            for (int64_t T : {1, 5}) {
                for (bool rope_out : {false, true}) { // rope result also an output: must not fuse
                    const int64_t hd = 128, hk = 4, n_ctx = 2 * T + 7;
                    const std::string name = std::string("rope+set_rows ") + ggml_type_name(ct) +
                                             (mode ? " neox" : " normal") + " T" + std::to_string(T) +
                                             (rope_out ? " rope also output" : "");
                    const int before = rope_stores();
                    compare_layer(
                        be, name,
                        [=](ggml_context *, ggml_context * cg, ggml_cgraph *) {
                            ggml_tensor * k = leaf(cg, GGML_TYPE_F32, hd * hk, T, 1, "kcur");
                            ggml_tensor * cells = leaf(cg, GGML_TYPE_I32, T, 1, 1, "rowids"); // distinct, < 2T
                            ggml_tensor * cache = leaf(cg, ct, hd * hk, n_ctx, 1, "cache");
                            ggml_tensor * r = ggml_rope_ext(cg, ggml_reshape_3d(cg, k, hd, hk, T), cells, nullptr,
                                                            (int)hd, mode, 10000.0f, 1.0f);
                            ggml_tensor * st = ggml_set_rows(cg, cache, ggml_reshape_2d(cg, r, hd * hk, T), cells);
                            if (rope_out) return std::vector<ggml_tensor *>{st, r};
                            return std::vector<ggml_tensor *>{st};
                        },
                        ct == GGML_TYPE_F16 ? 1e-6 : 1e-10);
                    // fused in the eager run and in each capture (a replay runs no kernels through run_fused)
                    if (rope_out)
                        CHECK(rope_stores() == before);
                    else
                        CHECK(rope_stores() > before);
                }
            }
        }
    }
}
TEST_CASE("q rope, k rope into the K cache and v into the V cache in one launch (transposed V cache or not)") {
    backends be;
    auto rope_stores = [&] {
        int n = 0;
        ggml_backend_cuda_get_fusion_stats(be.cuda, nullptr, nullptr, nullptr, nullptr, &n);
        return n;
    };
    for (bool v_trans : {true, false}) {
        for (ggml_type ct : {GGML_TYPE_F16, GGML_TYPE_F32}) {
            for (int64_t T : {1, 3}) {
                const int64_t hd = 64, hq = 8, hk = 2, n_ctx = 2 * T + 5;
                const std::string name = std::string("rope q+k, stores ") + ggml_type_name(ct) +
                                         (v_trans ? " v_trans" : "") + " T" + std::to_string(T);
                const int before = rope_stores();
                compare_layer(
                    be, name,
                    [=](ggml_context *, ggml_context * cg, ggml_cgraph * gf) {
                        ggml_tensor * q = leaf(cg, GGML_TYPE_F32, hd * hq, T, 1, "qcur");
                        ggml_tensor * k = leaf(cg, GGML_TYPE_F32, hd * hk, T, 1, "kcur");
                        ggml_tensor * v = leaf(cg, GGML_TYPE_F32, hd * hk, T, 1, "vcur");
                        ggml_tensor * cells = leaf(cg, GGML_TYPE_I32, T, 1, 1, "rowids"); // distinct, < 2T
                        ggml_tensor * kc = leaf(cg, ct, hd * hk, n_ctx, 1, "kcache");
                        ggml_tensor * vc = v_trans ? leaf(cg, ct, n_ctx, hd * hk, 1, "vcache")
                                                   : leaf(cg, ct, hd * hk, n_ctx, 1, "vcache");
                        // the order llm/graph.cpp builds: rope(q), then k's rope + store, then v's store
                        ggml_tensor * rq = ggml_rope_ext(cg, ggml_reshape_3d(cg, q, hd, hq, T), cells, nullptr, (int)hd,
                                                         GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
                        ggml_build_forward_expand(gf, rq);
                        ggml_tensor * rk = ggml_rope_ext(cg, ggml_reshape_3d(cg, k, hd, hk, T), cells, nullptr, (int)hd,
                                                         GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
                        ggml_tensor * sk = ggml_set_rows(cg, kc, ggml_reshape_2d(cg, rk, hd * hk, T), cells);
                        ggml_build_forward_expand(gf, sk);
                        ggml_tensor * sv = ggml_set_rows(cg, v_trans ? ggml_transpose(cg, vc) : vc, v, cells);
                        ggml_build_forward_expand(gf, sv);
                        return std::vector<ggml_tensor *>{rq, sk, sv};
                    },
                    ct == GGML_TYPE_F16 ? 1e-6 : 1e-10);
                CHECK(rope_stores() > before);
            }
        }
    }
}
// A decode step's q/k/v mat-vecs, rope(q), rope(k) into the K cache and v into the V cache, in the order
// llm/graph.cpp builds them: one launch (fusion codes 13 / 14: the mat-vec rotates and stores), against the CPU.
// Weights of several types, f16 / f32 caches, the V cache transposed or not, partial rotation (n_dims < D), freq
// factors and Llama 3.1 positions; not fused when q is also an output or the rope is NEOX.
TEST_CASE("q/k/v mat-vecs with the rope and the KV stores in their epilogue (decode)") {
    backends be;
    struct rc {
        ggml_type wt, ct;
        bool v_trans, ff, big_pos, q_out;
        int n_dims, mode;
        ggml_type wv = GGML_TYPE_COUNT; // v's weight type when not wt (the K-quant mixes' attn_v)
    };
    const int64_t hd = 64, hq = 8, hk = 2, K = 256, n_ctx = 9;
    const rc cases[] = {
        {GGML_TYPE_Q4_0, GGML_TYPE_F16, false, false, false, false, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q4_0, GGML_TYPE_F16, true, false, false, false, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q8_0, GGML_TYPE_F16, false, true, true, false, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q4_K, GGML_TYPE_F32, false, false, false, false, 32, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q6_K, GGML_TYPE_F32, true, true, false, false, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q4_0, GGML_TYPE_F16, false, false, false, true, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q4_0, GGML_TYPE_F16, false, false, false, false, 64, GGML_ROPE_TYPE_NEOX},
        {GGML_TYPE_Q4_K, GGML_TYPE_F16, false, false, false, false, 64, GGML_ROPE_TYPE_NORMAL, GGML_TYPE_Q6_K},
        {GGML_TYPE_Q3_K, GGML_TYPE_F16, true, false, false, false, 64, GGML_ROPE_TYPE_NORMAL, GGML_TYPE_Q5_K},
        // q8_0 / q4_0 caches: each 32-row group of k and v quantized by the last of its 4 blocks (the cache bytes
        // are ggml's quantizer's of the GPU's rows: a value on a rounding edge may land one step off the CPU's)
        {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, false, false, false, false, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, false, true, true, false, 64, GGML_ROPE_TYPE_NORMAL},
        {GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, false, false, false, false, 32, GGML_ROPE_TYPE_NORMAL, GGML_TYPE_Q6_K},
        {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, false, false, false, false, 64, GGML_ROPE_TYPE_NORMAL},
    };
    for (const rc & c : cases) {
        const ggml_type wv = c.wv == GGML_TYPE_COUNT ? c.wt : c.wv;
        const std::string name = std::string("q/k/v+rope ") + ggml_type_name(c.wt) + "/" + ggml_type_name(wv) +
                                 " cache " + ggml_type_name(c.ct) + (c.v_trans ? " v_trans" : "") +
                                 (c.ff ? " ff" : "") + (c.big_pos ? " pos 64k+" : "") +
                                 (c.q_out ? " q also output" : "") + " n_dims " + std::to_string(c.n_dims) +
                                 (c.mode == GGML_ROPE_TYPE_NEOX ? " neox" : "");
        auto build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph * gf) {
            ggml_tensor * x = leaf(cg, GGML_TYPE_F32, K, 1, 1, "x");
            ggml_tensor * q = ggml_mul_mat(cg, leaf(cw, c.wt, K, hd * hq, 1, "wq"), x);
            ggml_tensor * k = ggml_mul_mat(cg, leaf(cw, c.wt, K, hd * hk, 1, "wk"), x);
            ggml_tensor * v = ggml_mul_mat(cg, leaf(cw, wv, K, hd * hk, 1, "wv"), x);
            for (ggml_tensor * t : {q, k, v})
                ggml_build_forward_expand(gf, t);
            ggml_tensor * pos = leaf(cg, GGML_TYPE_I32, 1, 1, 1, c.big_pos ? "posbig" : "pos");
            ggml_tensor * ff = c.ff ? leaf(cw, GGML_TYPE_F32, c.n_dims / 2, 1, 1, "ff") : nullptr;
            ggml_tensor * cell = leaf(cg, GGML_TYPE_I32, 1, 1, 1, "rowids");
            ggml_tensor * kc = leaf(cg, c.ct, hd * hk, n_ctx, 1, "kcache");
            ggml_tensor * vc = c.v_trans ? leaf(cg, c.ct, n_ctx, hd * hk, 1, "vcache") : leaf(cg, c.ct, hd * hk, n_ctx, 1, "vcache");
            ggml_tensor * rq = ggml_rope_ext(cg, ggml_reshape_3d(cg, q, hd, hq, 1), pos, ff, c.n_dims, c.mode,
                                             500000.0f, 1.0f);
            ggml_build_forward_expand(gf, rq);
            ggml_tensor * rk = ggml_rope_ext(cg, ggml_reshape_3d(cg, k, hd, hk, 1), pos, ff, c.n_dims, c.mode,
                                             500000.0f, 1.0f);
            ggml_tensor * sk = ggml_set_rows(cg, kc, ggml_reshape_2d(cg, rk, hd * hk, 1), cell);
            ggml_build_forward_expand(gf, sk);
            ggml_tensor * sv = ggml_set_rows(cg, c.v_trans ? ggml_transpose(cg, vc) : vc, v, cell);
            ggml_build_forward_expand(gf, sv);
            std::vector<ggml_tensor *> outs = {rq, sk, sv};
            if (c.q_out) outs.push_back(q);
            return outs;
        };
        // a q4_0 cache: a value one rounding step off costs 1/8 of its block's range (measured NMSE: see docs)
        const double tol = c.ct == GGML_TYPE_Q4_0 ? 2e-3 : std::max(wtol(c.wt), wtol(wv));
        const fusion_counts n = compare_layer(be, name, build, tol);
        INFO(name);
        const bool fused = !c.q_out && c.mode == GGML_ROPE_TYPE_NORMAL;
        CHECK((n.mmv_rope > 0) == fused);
        CHECK((n.mmv > 0) == !fused); // else the q/k/v group alone
    }
}

TEST_CASE("decode attention: splits merged by the last block; output quantized for the q8_0 / q4_K wo mat-vec") {
    // FLASH_ATTN_EXT -> reshape to [D * n_head, T] -> q8_0 mat-vec (the wo projection of a decode step). The
    // attention kernel writes the q8s activation itself: bit-identical to quantizing its f32 output, and each
    // case runs with fresh data on the same backend (a split counter left non-zero would skip the next merge).
    backends be;
    ggml_backend_t plain = cuda_init_no_fusion();
    auto fattn_q8 = [](ggml_backend_t b) {
        int n = 0;
        ggml_backend_cuda_get_fusion_stats(b, nullptr, nullptr, nullptr, nullptr, nullptr, &n);
        return n;
    };
    struct fc {
        int64_t D, n_head, n_head_kv, n_kv, T;
        bool out_too; // the attention output is also a graph output: no fused quantization
    };
    // KV cache types: f16 (fattn.cu's decode kernel), q8_0 / q4_0 (fattn-vecq.cuh; D 256: through an f16 copy)
    const std::pair<ggml_type, ggml_type> kv_types[] = {{GGML_TYPE_F16, GGML_TYPE_F16}, {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
                                                        {GGML_TYPE_Q4_0, GGML_TYPE_Q4_0}, {GGML_TYPE_Q8_0, GGML_TYPE_F16}};
    for (fc c : {fc{128, 32, 32, 256, 1, false}, fc{128, 32, 8, 1000, 1, false}, fc{64, 8, 2, 37, 1, false},
                 fc{256, 4, 1, 300, 2, false}, fc{128, 8, 8, 4096, 1, false}, fc{128, 32, 32, 256, 1, true},
                 fc{96, 16, 2, 700, 1, false}}) {
      for (auto [tk, tv] : kv_types) {
        // D 96 f16: the tensor-core decode kernel (fattn-mma.cu); the vec kernel of GGML_CUDA_FATTN_DEC=0 lacks it
        for (ggml_type wt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_K}) {
            for (uint64_t seed : {1, 2}) {
                const std::string name = std::string(ggml_type_name(wt)) + " fattn+wo D" + std::to_string(c.D) + " H" +
                                         std::to_string(c.n_head) + "/" + std::to_string(c.n_head_kv) + " kv" +
                                         std::to_string(c.n_kv) + " T" + std::to_string(c.T) + " cache " +
                                         ggml_type_name(tk) + "/" + ggml_type_name(tv) +
                                         (c.out_too ? " fattn also output" : "") + " seed " + std::to_string(seed);
                const layer_fn build = [=](ggml_context * cw, ggml_context * cg, ggml_cgraph *) {
                    ggml_tensor * q = ggml_permute(cg, leaf(cg, GGML_TYPE_F32, c.D, c.n_head, c.T, "q"), 0, 2, 1, 3);
                    ggml_tensor * kc = leaf(cg, tk, c.D * c.n_head_kv, c.n_kv + 5, 1, "kc");
                    ggml_tensor * vc = leaf(cg, tv, c.D * c.n_head_kv, c.n_kv + 5, 1, "vc");
                    ggml_tensor * k = ggml_view_3d(cg, kc, c.D, c.n_kv, c.n_head_kv, kc->nb[1], ggml_row_size(tk, c.D), 0);
                    ggml_tensor * v = ggml_view_3d(cg, vc, c.D, c.n_kv, c.n_head_kv, vc->nb[1], ggml_row_size(tv, c.D), 0);
                    ggml_tensor * m = leaf(cg, GGML_TYPE_F32, c.n_kv, c.T, 1, "maskx");
                    ggml_tensor * fa = ggml_flash_attn_ext(cg, q, k, v, m, 1.0f / std::sqrt((float)c.D), -1);
                    ggml_tensor * x = ggml_reshape_2d(cg, fa, c.D * c.n_head, c.T); // [D * n_head, T]
                    ggml_tensor * o = ggml_mul_mat(cg, leaf(cw, wt, c.D * c.n_head, 333, 1, "wo"), x);
                    if (c.out_too) return std::vector<ggml_tensor *>{o, fa};
                    return std::vector<ggml_tensor *>{o};
                };
                const int before = fattn_q8(be.cuda);
                compare_layer(be, name, build, 2e-4, false, seed);
                INFO(name);
                // counted when run eagerly or captured: the second seed may replay the first one's CUDA graph
                if (seed == 1) CHECK((fattn_q8(be.cuda) > before) == !c.out_too);
                const layer_result fused = run_layer(be.cuda, build, seed + 10);
                const layer_result sep = run_layer(plain, build, seed + 10);
                REQUIRE(fused.ok);
                REQUIRE(sep.ok);
                CHECK(fattn_q8(plain) == 0);
                CHECK(fused.values == sep.values);
            }
        }
      }
    }
    ggml_backend_free(plain);
}
TEST_CASE("decode attention: first tiles requested before the wait, never the cell the same step writes") {
    // SET_ROWS of one token's k / v into the caches, then its attention over them (a Llama 3 decode step, GQA 4, four
    // KV splits). The warps' first tiles are copied before griddepcontrol.wait (fattn-mma.cu), except a warp whose
    // first tiles hold the written cell. k is 4x the query, so that the new key takes ~all the weight: had its row
    // been copied before the store, the output would be the old row's value, not v's. So that the race can happen
    // here: the caches are set to the old rows before each run (eager, captured, replayed); the stored rows wait for
    // a slow kernel on one SM (k plus the dot of 2M zeros with x: one block, ~0.1 ms), leaving the other SMs to the
    // attention's blocks (a producer on every SM keeps them from becoming resident); and there is no mask, so no
    // mask-range kernel runs between the stores and the attention (it triggers its dependents only at its end).
    // With the cell check taken out of the kernel this case fails (H200, 2026-11-30: 13 of 404 checks, nmse ~1.0 in
    // eager, captured and replayed runs, both caches); a form with a mask never did.
    backends be;
    const int64_t D = 128, hq = 8, hk = 2, n_kv = 2048, n_ctx = n_kv + 16, NZ = 1 << 21;
    std::vector<float> r(D);
    uint64_t h = 7;
    for (float & x : r) {
        h = h * 6364136223846793005ull + 1442695040888963407ull;
        x = (float)((h >> 40) % 2001) / 1000.0f - 1.0f;
    }
    std::vector<float> q, k;
    for (int i = 0; i < hq; ++i)
        q.insert(q.end(), r.begin(), r.end());
    for (int i = 0; i < hk; ++i)
        for (float x : r)
            k.push_back(4.0f * x);
    cudaDeviceProp prop;
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    // split 0 warp 0's first tile, warp 5's; split 1 warp 2's second (q8_0: 2 tiles early, f16: 1); none's
    for (ggml_type ct : {GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        int n_early = 0; // launches with early tiles: counted where dispatched (eager or captured), not per replay
        for (int32_t cell : {7, 83, 512 + 128 + 32 + 9, 300, (int32_t)n_kv - 1}) {
            const std::string name = std::string("early tiles, ") + ggml_type_name(ct) + " cache, cell " +
                                     std::to_string(cell);
            auto build = [=](ggml_context *, ggml_context * cg, ggml_cgraph * gf) {
                ggml_tensor * kc = leaf(cg, ct, D * hk, n_ctx, 1, "kc");
                ggml_tensor * vc = leaf(cg, ct, D * hk, n_ctx, 1, "vc");
                ggml_tensor * c1 = leaf(cg, GGML_TYPE_I32, 1, 1, 1, "cell");
                ggml_tensor * zero = ggml_mul_mat(cg, leaf(cg, GGML_TYPE_F32, NZ, 1, 1, "wzero"),
                                                  leaf(cg, GGML_TYPE_F32, NZ, 1, 1, "xz")); // [1]: 0, slowly
                ggml_tensor * kcur = ggml_add(cg, leaf(cg, GGML_TYPE_F32, D * hk, 1, 1, "kcur"), zero);
                ggml_tensor * vcur = ggml_add(cg, leaf(cg, GGML_TYPE_F32, D * hk, 1, 1, "vcur"), zero);
                ggml_build_forward_expand(gf, ggml_set_rows(cg, kc, kcur, c1));
                ggml_build_forward_expand(gf, ggml_set_rows(cg, vc, vcur, c1));
                const size_t rs = ggml_row_size(ct, D);
                ggml_tensor * kv = ggml_view_3d(cg, kc, D, n_kv, hk, kc->nb[1], rs, 0);
                ggml_tensor * vv = ggml_view_3d(cg, vc, D, n_kv, hk, vc->nb[1], rs, 0);
                ggml_tensor * qv = ggml_permute(cg, leaf(cg, GGML_TYPE_F32, D, hq, 1, "q"), 0, 2, 1, 3);
                const float scale = 1.0f / std::sqrt((float)D);
                return std::vector<ggml_tensor *>{ggml_flash_attn_ext(cg, qv, kv, vv, nullptr, scale, -1)};
            };
            fill_map fl = {{"q", f32_bytes(q)},
                           {"kcur", f32_bytes(k)},
                           {"cell", std::vector<uint8_t>(4)},
                           {"wzero", std::vector<uint8_t>(NZ * 4)}};
            std::memcpy(fl["cell"].data(), &cell, 4);
            const layer_result want = run_layer(be.cpu, build, 5, false, fl);
            const int n0 = ggml_backend_cuda_get_fattn_early_count(be.cuda);
            const layer_result got = run_layer(be.cuda, build, 5, false, fl, true); // the old rows before each run
            const int n1 = ggml_backend_cuda_get_fattn_early_count(be.cuda);
            CHECK(want.ok);
            REQUIRE(got.ok);
            REQUIRE(got.runs.size() == 3);
            for (size_t i = 0; i < got.runs.size(); ++i) { // eager, captured, replayed
                const double e = want.ok ? backend_case_nmse(got.runs[i], want.values) : INFINITY;
                INFO(name, ", run ", i, ": nmse ", e, ", early launches ", n1 - n0);
                CHECK(e <= 1e-4);
            }
            n_early += n1 - n0;
        }
        INFO(ggml_type_name(ct), " cache: launches with early tiles ", n_early);
        const char * off = std::getenv("GGML_CUDA_FATTN_EARLY");
        if (prop.major >= 9 && !(off && std::atoi(off) == 0)) CHECK(n_early > 0); // (with PDL: sm_90+)
    }
}
TEST_CASE("context shift on a q8_0/q4_0 K cache: get_rows, rope, and the rows stored back (set_rows or cpy)") {
    // llm_kv_cache's shift graph: the moved cells' keys dequantized (GET_ROWS), rotated (ROPE), quantized back in
    // place (SET_ROWS; earlier versions: CPY into a view of the cache), and the V rows moved by DUP + CPY of block
    // views. Against the CPU: GPU and CPU rope differ in f32 rounding (sincos), which can move a value across a
    // rounding boundary of its block now and then: one q8_0 quant off by one in these ~2.5k values is ~1e-7 of the
    // signal, one q4_0 nibble ~2e-5.
    backends be;
    for (ggml_type qt : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (int variant = 0; variant < 2; ++variant) {
            const int64_t hd = 128, hk = 4, n_ctx = 13, n = 5;
            const std::string name = std::string("shift ") + ggml_type_name(qt) + (variant ? " cpy + v move" : " set_rows");
            compare_layer(
                be, name,
                [=](ggml_context *, ggml_context * cg, ggml_cgraph * gf) {
                    ggml_tensor * kc = leaf(cg, qt, hd * hk, n_ctx, 1, "kcache");
                    ggml_tensor * rows = leaf(cg, GGML_TYPE_I32, n, 1, 1, "rowids"); // distinct, < 2n
                    ggml_tensor * pos = leaf(cg, GGML_TYPE_I32, n, 1, 1, "pos");
                    ggml_tensor * kr = ggml_get_rows(cg, kc, rows); // f32 [hd * hk, n]
                    kr = ggml_rope_ext(cg, ggml_reshape_3d(cg, kr, hd, hk, n), pos, nullptr, (int)hd, GGML_ROPE_TYPE_NORMAL,
                                       10000.0f, 1.0f);
                    kr = ggml_reshape_2d(cg, kr, hd * hk, n);
                    if (variant == 0) return std::vector<ggml_tensor *>{ggml_set_rows(cg, kc, kr, rows)};
                    ggml_tensor * st = ggml_cpy(cg, kr, ggml_view_2d(cg, kc, hd * hk, n, kc->nb[1], 1 * kc->nb[1]));
                    ggml_build_forward_expand(gf, st);
                    ggml_tensor * vc = leaf(cg, qt, hd * hk, n_ctx, 1, "vcache");
                    ggml_tensor * v_src = ggml_view_2d(cg, vc, hd * hk, n, vc->nb[1], 7 * vc->nb[1]);
                    ggml_tensor * v_dst = ggml_view_2d(cg, vc, hd * hk, n, vc->nb[1], 4 * vc->nb[1]); // overlaps v_src
                    ggml_tensor * mv = ggml_cpy(cg, ggml_dup(cg, v_src), v_dst);
                    return std::vector<ggml_tensor *>{st, mv};
                },
                qt == GGML_TYPE_Q8_0 ? 1e-6 : 1e-4);
        }
    }
}

TEST_CASE("profile: a decode-like step is timed as a CUDA-graph replay (CUPTI), or eagerly; same output, every "
          "node timed once") {
    backends be;
    const int64_t D = 64, H = 4, HKV = 2, n_kv = 300;
    ggml_init_params ip = {16u * 1024 * 1024, nullptr, true};
    ggml_context * ctx = ggml_init(ip);
    ggml_tensor * x = leaf(ctx, GGML_TYPE_F32, D * H, 1, 1, "x");
    ggml_tensor * h = ggml_mul(ctx, ggml_rms_norm(ctx, x, 1e-5f), leaf(ctx, GGML_TYPE_F32, D * H, 1, 1, "wn"));
    ggml_tensor * q = ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_Q8_0, D * H, D * H, 1, "wq"), h); // [D H]
    q = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, q, D, H, 1), leaf(ctx, GGML_TYPE_I32, 1, 1, 1, "pos"), nullptr, (int)D,
                      GGML_ROPE_TYPE_NORMAL, 10000.0f, 1.0f);
    ggml_tensor * kc = leaf(ctx, GGML_TYPE_F16, D * HKV, 512, 1, "kc");
    ggml_tensor * vc = leaf(ctx, GGML_TYPE_F16, D * HKV, 512, 1, "vc");
    ggml_tensor * k = ggml_view_3d(ctx, kc, D, n_kv, HKV, kc->nb[1], D * 2, 0); // [D, n_kv, HKV]
    ggml_tensor * v = ggml_view_3d(ctx, vc, D, n_kv, HKV, vc->nb[1], D * 2, 0);
    ggml_tensor * a = ggml_flash_attn_ext(ctx, ggml_permute(ctx, q, 0, 2, 1, 3), k, v, nullptr, 0.125f, (int)n_kv - 1);
    ggml_tensor * o = ggml_mul_mat(ctx, leaf(ctx, GGML_TYPE_F16, D * H, 300, 1, "wo"), ggml_reshape_2d(ctx, a, D * H, 1));
    ggml_tensor * out = ggml_add(ctx, ggml_scale(ctx, ggml_silu(ctx, o), 0.5f), o); // [300]
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors(ctx, be.cuda);
    REQUIRE(buf != nullptr);
    for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
        if (t->view_src || t->op != GGML_OP_NONE) continue;
        const std::vector<uint8_t> b = leaf_bytes(t, 7);
        ggml_backend_tensor_set(t, b.data(), 0, b.size());
    }
    ggml_backend_t bk[2] = {be.cuda, be.cpu};
    ggml_backend_sched_t sched = ggml_backend_sched_new(bk, 2, GGML_DEFAULT_GRAPH_SIZE);
    REQUIRE(ggml_backend_sched_alloc_graph(sched, gf));
    const auto output = [&] {
        std::vector<float> r(ggml_nelements(out));
        ggml_backend_tensor_get(out, r.data(), 0, ggml_nbytes(out));
        return r;
    };
    for (int i = 0; i < 3; ++i) // eager, capture, replay: the normal path's output
        REQUIRE(ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS);
    const std::vector<float> want = output();
    for (const char * mode : {"replay", "eager"}) {
        CAPTURE(mode);
        if (std::string(mode) == "eager") setenv("GGML_CUDA_PROFILE_EAGER", "1", 1);
        std::vector<float> poison(want.size(), NAN);
        ggml_backend_tensor_set(out, poison.data(), 0, ggml_nbytes(out));
        ggml_backend_sched_set_profile(sched, true);
        REQUIRE(ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS);
        ggml_backend_sched_set_profile(sched, false);
        unsetenv("GGML_CUDA_PROFILE_EAGER");
        CHECK(output() == want); // the profiled run computes the step, bit for bit as the normal path
        const ggml_profile * p = ggml_backend_sched_get_profile(sched);
        REQUIRE(p != nullptr);
        const int n_nodes = ggml_graph_n_nodes(gf);
        std::vector<int> covered(n_nodes, 0);
        double sum = 0;
        for (const ggml_profile_node & r : p->nodes) {
            CHECK(r.us >= 0);
            CHECK(r.backend == "CUDA0");
            sum += r.us;
            for (int j = r.node; j < r.node + r.n_nodes; ++j)
                covered[j]++;
        }
        for (int j = 0; j < n_nodes; ++j) {
            const ggml_tensor * t = ggml_graph_node(gf, j);
            INFO("node ", j, " ", t->name, " ", ggml_op_name(t->op));
            if (!ggml_is_view_op(t->op) && t->op != GGML_OP_NONE) CHECK(covered[j] == 1);
        }
        MESSAGE(mode, ": ", p->nodes.size(), " records, ", sum, " us of ", p->wall_us, " us profiled wall");
        CHECK(sum > 0);
        CHECK(sum <= p->wall_us);
    }
    ggml_backend_sched_free(sched);
    ggml_backend_buffer_free(buf);
    ggml_free(ctx);
}

#endif
