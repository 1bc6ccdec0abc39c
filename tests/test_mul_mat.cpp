// test_mul_mat.cpp - CPU mul_mat (f32/f16 and every quantized weight type) against double-precision loops:
// odd sizes, GQA broadcast, transposed/permuted activations, permuted/strided weight views
// (a KV-cache style f16 view), 1-3 threads; the AMX path (q8_0 in place, the other quant types
// unpacked) and the transposed-panel float path with their tails. GGML_NO_AMX=1 runs the batches on
// the AVX-512 VNNI tiles instead; GGML_AMX_EMULATE=1 runs the AMX path with scalar tile math (no AMX needed).
#include "cpu/amx.h"
#include "cpu/repack.h"
#include "ggml-backend.h"
#include "ggml-impl.h"
#include "tensor_test_util.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include "doctest_cstr.h"
#include <random>
#include <string>
#include <vector>

namespace {

// 32 MiB covers the largest case (K 5632 x N 300 f32 activations); under ASan every context is poisoned whole on
// allocation and free (256 MiB contexts made this test take 340 s there)
ggml_context * new_ctx() { return ggml_init({size_t(32) << 20, nullptr, false}); }

void compute(ggml_context * ctx, ggml_tensor * out, int nth) {
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, nth);
}

enum class act_ref { exact, f16, q8_1, q8_K }; // how the reference rounds the activations

// 32-weight quant blocks see activations quantized to q8_1, the K-quants q8_K; float weights see them exactly
act_ref act_ref_for(ggml_type ta) {
    if (!ggml_is_quantized(ta)) return act_ref::exact;
    return ggml_blck_size(ta) == QK_K ? act_ref::q8_K : act_ref::q8_1;
}

// out [M, N, B2, B3] vs sum_k a[k, m, i2/r2, i3/r3] * b'[k, n, i2, i3] in double.
// Returns the number of elements off by more than tol * sum|a*b| (+ 1e-6 absolute).
int check_mul_mat(const ggml_tensor * out, const ggml_tensor * a, const ggml_tensor * b, act_ref ar, double tol,
                  const std::vector<float> * a_orig = nullptr) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1], B2 = b->ne[2], B3 = b->ne[3];
    const int64_t r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
    int bad = 0;
    std::vector<double> bcol(K);
    std::vector<float> bf(K);
    std::vector<block_q8_1> bq(K / 32 + 1);
    std::vector<block_q8_K> bk(K / QK_K + 1);
    // the weight matrix of each batch read once: amat[m * K + k] (quantized blocks are decoded by
    // rd() one block per element, too slow to repeat per column)
    std::vector<double> amat(M * K);
    for (int64_t i3 = 0; i3 < B3; ++i3)
        for (int64_t i2 = 0; i2 < B2; ++i2) {
            if (!a_orig) {
                std::vector<float> row(K);
                for (int64_t m = 0; m < M; ++m) {
                    const char * ra =
                        (const char *)a->data + m * a->nb[1] + (i2 / r2) * a->nb[2] + (i3 / r3) * a->nb[3];
                    if (ggml_is_quantized(a->type) && a->nb[0] == ggml_type_size(a->type)) {
                        ggml_get_type_traits(a->type)->to_float(ra, row.data(), K); // whole row at once
                        for (int64_t k = 0; k < K; ++k)
                            amat[m * K + k] = row[k];
                    } else {
                        for (int64_t k = 0; k < K; ++k)
                            amat[m * K + k] = rd(a, k, m, i2 / r2, i3 / r3);
                    }
                }
            }
            for (int64_t n = 0; n < N; ++n) {
                for (int64_t k = 0; k < K; ++k)
                    bf[k] = (float)rd(b, k, n, i2, i3);
                if (ar == act_ref::q8_1) {
                    quantize_row_q8_1_ref(bf.data(), bq.data(), K);
                    dequantize_row_q8_1(bq.data(), bf.data(), K);
                } else if (ar == act_ref::q8_K) {
                    quantize_row_q8_K_ref(bf.data(), bk.data(), K);
                    dequantize_row_q8_K(bk.data(), bf.data(), K);
                }
                for (int64_t k = 0; k < K; ++k) {
                    bcol[k] = ar == act_ref::f16 ? ggml_fp16_to_fp32(ggml_fp32_to_fp16(bf[k])) : bf[k];
                }
                for (int64_t m = 0; m < M; ++m) {
                    double ref = 0, mag = 0;
                    for (int64_t k = 0; k < K; ++k) {
                        // a_orig: the f32 values before quantization (contiguous a only)
                        const double av =
                            a_orig ? (*a_orig)[((i3 / r3 * a->ne[2] + i2 / r2) * M + m) * K + k] : amat[m * K + k];
                        ref += av * bcol[k];
                        mag += std::fabs(av * bcol[k]);
                    }
                    const double got = rd(out, m, n, i2, i3);
                    if (!(std::fabs(got - ref) <= tol * mag + 1e-6)) {
                        if (bad < 5) {
                            MESSAGE("out[" << m << "," << n << "," << i2 << "," << i3 << "] = " << got << " ref " << ref
                                           << " mag " << mag);
                        }
                        ++bad;
                    }
                }
            }
        }
    return bad;
}

// a dense [K, M] weight of type ta (random) times a dense f32 [K, N] activation (random) on nth threads: the number
// of output elements check_mul_mat finds off the reference (activations rounded as ar) by more than 1e-5
int dense_mul_mat_errors(ggml_type ta, int64_t K, int64_t M, int64_t N, int nth, std::mt19937 & rng, act_ref ar) {
    ggml_context * ctx = new_ctx();
    ggml_tensor * a = ggml_new_tensor_2d(ctx, ta, K, M);
    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
    fill(a, rng);
    fill(b, rng);
    ggml_tensor * out = ggml_mul_mat(ctx, a, b);
    poison(out);
    compute(ctx, out, nth);
    const int bad = check_mul_mat(out, a, b, ar, 1e-5);
    ggml_free(ctx);
    return bad;
}

} // namespace

TEST_CASE("mul_mat f32 / f16 weights, odd sizes, 1-3 threads") {
    std::mt19937 rng(42);
    for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (int64_t K : {7, 33, 4097}) {
            for (int64_t M : {1, 7, 33}) {
                for (int64_t N : {1, 2, 5, 17}) {
                    for (int nth = 1; nth <= 3; ++nth) {
                        INFO("ta = " << ggml_type_name(ta));
                        CAPTURE(K);
                        CAPTURE(M);
                        CAPTURE(N);
                        CAPTURE(nth);
                        // activations stay f32 for f16 weights too (ggml rounds them to f16 when N > 1)
                        CHECK(dense_mul_mat_errors(ta, K, M, N, nth, rng, act_ref::exact) == 0);
                    }
                }
            }
        }
    }
}

TEST_CASE("mul_mat q8_0 weights: tight vs q8 reference, loose vs f32") {
    std::mt19937 rng(43);
    for (int64_t K : {32, 64, 4128}) {
        for (int64_t M : {1, 7, 33}) {
            for (int64_t N : {1, 2, 5, 17}) {
                for (int nth = 1; nth <= 3; ++nth) {
                    ggml_context * ctx = new_ctx();
                    ggml_tensor * a = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, K, M);
                    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
                    const auto a_orig = fill(a, rng);
                    fill(b, rng);
                    ggml_tensor * out = ggml_mul_mat(ctx, a, b);
                    poison(out);
                    compute(ctx, out, nth);
                    CAPTURE(K);
                    CAPTURE(M);
                    CAPTURE(N);
                    CAPTURE(nth);
                    // tight: dequantized weights x q8_1-quantized activations (only the float sum order differs)
                    CHECK(check_mul_mat(out, a, b, act_ref::q8_1, 1e-5) == 0);
                    // loose: against the unquantized f32 weights and activations. Each q8 value is off by
                    // at most amax/254 of its block; 3% of sum|a*b| bounds the total for N(0,1) data.
                    CHECK(check_mul_mat(out, a, b, act_ref::exact, 3e-2, &a_orig) == 0);
                    ggml_free(ctx);
                }
            }
        }
    }
}

TEST_CASE("mul_mat broadcast (GQA): a [K, M, 2, 1] x b [K, N, 4, 2]") {
    std::mt19937 rng(44);
    for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        for (int64_t N : {1, 3, 9}) {
            for (int nth = 1; nth <= 3; ++nth) {
                ggml_context * ctx = new_ctx();
                ggml_tensor * a = ggml_new_tensor_4d(ctx, ta, 64, 5, 2, 1);
                ggml_tensor * b = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 64, N, 4, 2);
                fill(a, rng);
                fill(b, rng);
                ggml_tensor * out = ggml_mul_mat(ctx, a, b);
                REQUIRE(out->ne[0] == 5);
                REQUIRE(out->ne[2] == 4);
                REQUIRE(out->ne[3] == 2);
                poison(out);
                compute(ctx, out, nth);
                INFO("ta = " << ggml_type_name(ta));
                CAPTURE(N);
                CAPTURE(nth);
                const act_ref ar = act_ref_for(ta);
                CHECK(check_mul_mat(out, a, b, ar, 1e-5) == 0);
                ggml_free(ctx);
            }
        }
    }
}

TEST_CASE("mul_mat with transposed and permuted activations") {
    std::mt19937 rng(45);
    for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        for (int nth = 1; nth <= 3; ++nth) {
            const int64_t K = 96, M = 11, N = 6, H = 3;
            ggml_context * ctx = new_ctx();
            ggml_tensor * a = ggml_new_tensor_3d(ctx, ta, K, M, H);
            fill(a, rng);
            // b1: transpose of [N, K, H] -> [K, N, H] (element stride N*4)
            ggml_tensor * bt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, N, K, H);
            fill(bt, rng);
            ggml_tensor * b1 = ggml_transpose(ctx, bt);
            // b2: [K, H, N] permuted to [K, N, H] (rows dense, dims 1 and 2 swapped)
            ggml_tensor * bp = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, H, N);
            fill(bp, rng);
            ggml_tensor * b2 = ggml_permute(ctx, bp, 0, 2, 1, 3);
            REQUIRE(b1->ne[1] == N);
            REQUIRE(b2->ne[1] == N);
            REQUIRE(b2->ne[2] == H);
            ggml_tensor * o1 = ggml_mul_mat(ctx, a, b1);
            ggml_tensor * o2 = ggml_mul_mat(ctx, a, b2);
            poison(o1);
            poison(o2);
            compute(ctx, o1, nth);
            compute(ctx, o2, nth);
            INFO("ta = " << ggml_type_name(ta));
            CAPTURE(nth);
            const act_ref ar = act_ref_for(ta);
            CHECK(check_mul_mat(o1, a, b1, ar, 1e-5) == 0);
            CHECK(check_mul_mat(o2, a, b2, ar, 1e-5) == 0);
            ggml_free(ctx);
        }
    }
}

TEST_CASE("mul_mat with a permuted KV-cache style weight view") {
    std::mt19937 rng(46);
    for (ggml_type ta : {GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_Q8_0}) {
        for (int64_t n_tokens : {1, 4}) {
            for (int nth = 1; nth <= 3; ++nth) {
                // cache [head_dim, n_head_kv, n_ctx]; use the first n_kv positions as k [head_dim, n_kv, n_head_kv]
                const int64_t head_dim = 64, n_head_kv = 2, n_ctx = 40, n_kv = 13, n_head = 4;
                ggml_context * ctx = new_ctx();
                ggml_tensor * cache = ggml_new_tensor_3d(ctx, ta, head_dim, n_head_kv, n_ctx);
                fill(cache, rng);
                ggml_tensor * kv = ggml_view_3d(ctx, cache, head_dim, n_head_kv, n_kv, cache->nb[1], cache->nb[2], 0);
                ggml_tensor * k = ggml_permute(ctx, kv, 0, 2, 1, 3); // [head_dim, n_kv, n_head_kv]
                REQUIRE(k->ne[1] == n_kv);
                REQUIRE(k->ne[2] == n_head_kv);
                // q [head_dim, n_head, n_tokens] permuted to [head_dim, n_tokens, n_head]
                ggml_tensor * q0 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, head_dim, n_head, n_tokens);
                fill(q0, rng);
                ggml_tensor * q = ggml_permute(ctx, q0, 0, 2, 1, 3);
                ggml_tensor * kq = ggml_mul_mat(ctx, k, q); // [n_kv, n_tokens, n_head]
                poison(kq);
                compute(ctx, kq, nth);
                INFO("ta = " << ggml_type_name(ta));
                CAPTURE(n_tokens);
                CAPTURE(nth);
                const act_ref ar = act_ref_for(ta);
                CHECK(check_mul_mat(kq, k, q, ar, 1e-5) == 0);
                ggml_free(ctx);
            }
        }
    }
}

TEST_CASE("mul_mat with strided weight rows (row view of a wider tensor)") {
    std::mt19937 rng(47);
    for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0}) {
        ggml_context * ctx = new_ctx();
        ggml_tensor * wide = ggml_new_tensor_2d(ctx, ta, 160, 9);
        fill(wide, rng);
        // the second 64-element block of columns of every row: [64, 9], row stride 160 elements
        ggml_tensor * a = ggml_view_2d(ctx, wide, 64, 9, wide->nb[1], ggml_row_size(ta, 64));
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, 64, 7);
        fill(b, rng);
        ggml_tensor * out = ggml_mul_mat(ctx, a, b);
        poison(out);
        compute(ctx, out, 2);
        INFO("ta = " << ggml_type_name(ta));
        const act_ref ar = act_ref_for(ta);
        CHECK(check_mul_mat(out, a, b, ar, 1e-5) == 0);
        ggml_free(ctx);
    }
}

TEST_CASE("mul_mat q8_0 prompt batches (AMX int8 tiles where the CPU has them): panel and group tails") {
    // AMX path: 32-row panels (two 16-row A tiles), groups of 16 columns in pairs. M covers a full
    // panel, a last panel of 1, 16 and 18 rows; N covers 2 (padding), 16, 17, 64 and 512 columns
    // (several column chunks for the big K). Run with GGML_NO_AMX=1 for the AVX-512 VNNI tiles.
    const std::string amx = ggml_cpu_amx_int8_available() ? "on" : "off (VNNI tiles)";
    MESSAGE("AMX int8: " << amx);
    std::mt19937 rng(48);
    struct shape {
        int64_t K, M, N;
    };
    const shape shapes[] = {{32, 33, 2},    {64, 48, 16},   {96, 50, 17},    {4128, 64, 64},
                            {256, 80, 512}, {2048, 32, 40}, {5632, 17, 300}, {64, 1, 512}};
    for (const shape & sh : shapes) {
        for (int nth = 1; nth <= 3; nth += 2) {
            CAPTURE(sh.K);
            CAPTURE(sh.M);
            CAPTURE(sh.N);
            CAPTURE(nth);
            CHECK(dense_mul_mat_errors(GGML_TYPE_Q8_0, sh.K, sh.M, sh.N, nth, rng, act_ref::q8_1) == 0);
        }
    }
}

TEST_CASE("mul_mat 4/5-bit and K-quant prompt batches (AMX int8 tiles where the CPU has them): tails") {
    // AMX path of the unpacked types: 32-row panels with a last panel of 1, 17 and 18 rows, 2 (padding),
    // 17, 40 and 300 columns, several blocks (and super-blocks) per row. GGML_AMX_EMULATE=1 runs the same
    // path with scalar tile math on a CPU without AMX; GGML_NO_AMX=1 the VNNI/AVX2 tiles.
    const std::string amx = ggml_cpu_amx_int8_available() ? "on" : "off (VNNI tiles)";
    MESSAGE("AMX int8 (quant types): " << amx);
    std::mt19937 rng(51);
    struct shape {
        int64_t K, M, N;
    };
    const shape shapes[] = {{256, 33, 2}, {512, 50, 17}, {768, 64, 40}, {2304, 17, 300}, {256, 1, 33}};
    for (ggml_type ta : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K,
                         GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K}) {
        for (const shape & sh : shapes) {
            const int nth = 1 + (int)((sh.M + sh.N) % 3);
            INFO("ta = " << ggml_type_name(ta));
            CAPTURE(sh.K);
            CAPTURE(sh.M);
            CAPTURE(sh.N);
            CAPTURE(nth);
            CHECK(dense_mul_mat_errors(ta, sh.K, sh.M, sh.N, nth, rng, act_ref_for(ta)) == 0);
        }
    }
}

TEST_CASE("mul_mat q8_0 prompt batch with GQA broadcast and transposed activations (AMX packing)") {
    std::mt19937 rng(49);
    for (int nth = 1; nth <= 2; ++nth) {
        ggml_context * ctx = new_ctx();
        ggml_tensor * a = ggml_new_tensor_4d(ctx, GGML_TYPE_Q8_0, 128, 40, 2, 1);
        ggml_tensor * bt = ggml_new_tensor_4d(ctx, GGML_TYPE_F32, 19, 128, 4, 1);
        fill(a, rng);
        fill(bt, rng);
        ggml_tensor * b = ggml_transpose(ctx, bt); // [128, 19, 4], element stride 19 floats
        ggml_tensor * out = ggml_mul_mat(ctx, a, b);
        poison(out);
        compute(ctx, out, nth);
        CAPTURE(nth);
        CHECK(check_mul_mat(out, a, b, act_ref::q8_1, 1e-5) == 0);
        ggml_free(ctx);
    }
}

TEST_CASE("mul_mat float weights, several columns (transposed 16-row panels): K, row and column tails") {
    std::mt19937 rng(50);
    for (ggml_type ta : {GGML_TYPE_F16, GGML_TYPE_F32}) {
        for (int64_t K : {1, 16, 17, 64, 300}) {
            for (int64_t M : {15, 16, 40}) {
                for (int64_t N : {4, 8, 9, 70}) {
                    ggml_context * ctx = new_ctx();
                    ggml_tensor * a = ggml_new_tensor_2d(ctx, ta, K, M);
                    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
                    fill(a, rng);
                    fill(b, rng);
                    ggml_tensor * out = ggml_mul_mat(ctx, a, b);
                    poison(out);
                    compute(ctx, out, 2);
                    INFO("ta = " << ggml_type_name(ta));
                    CAPTURE(K);
                    CAPTURE(M);
                    CAPTURE(N);
                    CHECK(check_mul_mat(out, a, b, act_ref::exact, 1e-5) == 0);
                    ggml_free(ctx);
                }
            }
        }
    }
}

// Loose bound against the unquantized values: relative RMS error of the type on N(0,1) data times a margin
// (the result error sums K independent errors; it is a fraction of sum|a*b|, not of the result).
TEST_CASE("mul_mat every quantized weight type: odd sizes, GQA, transposed activations, 1-3 threads") {
    struct tcase {
        ggml_type t;
        double loose;
    };
    const tcase types[] = {{GGML_TYPE_Q4_0, 0.15}, {GGML_TYPE_Q4_1, 0.15}, {GGML_TYPE_Q5_0, 0.08},
                           {GGML_TYPE_Q5_1, 0.08}, {GGML_TYPE_Q2_K, 0.5},  {GGML_TYPE_Q3_K, 0.3},
                           {GGML_TYPE_Q4_K, 0.15}, {GGML_TYPE_Q5_K, 0.08}, {GGML_TYPE_Q6_K, 0.04}};
    std::mt19937 rng(46);
    for (const tcase & tc : types) {
        const int64_t blk = ggml_blck_size(tc.t);
        for (int64_t K : {blk, 3 * blk, blk == 32 ? int64_t(4128) : int64_t(4352)}) {
            for (int64_t M : {1, 7, 33}) {
                for (int64_t N : {1, 2, 5, 17}) {
                    const int nth = 1 + (int)((K + M + N) % 3);
                    ggml_context * ctx = new_ctx();
                    ggml_tensor * a = ggml_new_tensor_2d(ctx, tc.t, K, M);
                    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
                    const auto a_orig = fill(a, rng);
                    fill(b, rng);
                    ggml_tensor * out = ggml_mul_mat(ctx, a, b);
                    poison(out);
                    compute(ctx, out, nth);
                    INFO("ta = " << ggml_type_name(tc.t));
                    CAPTURE(K);
                    CAPTURE(M);
                    CAPTURE(N);
                    CAPTURE(nth);
                    // tight: dequantized weights x activations rounded like the kernel's activation type
                    CHECK(check_mul_mat(out, a, b, act_ref_for(tc.t), 1e-5) == 0);
                    CHECK(check_mul_mat(out, a, b, act_ref::exact, tc.loose, &a_orig) == 0);
                    ggml_free(ctx);
                }
            }
        }
        // GQA broadcast and non-contiguous activations (transposed: element stride N; permuted dims 1, 2)
        for (int nth = 1; nth <= 3; ++nth) {
            const int64_t K = 2 * blk, M = 9, N = 6, H = 4;
            ggml_context * ctx = new_ctx();
            ggml_tensor * a = ggml_new_tensor_3d(ctx, tc.t, K, M, 2);
            fill(a, rng);
            ggml_tensor * bt = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, N, K, H);
            fill(bt, rng);
            ggml_tensor * b1 = ggml_transpose(ctx, bt);
            ggml_tensor * bp = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, K, H, N);
            fill(bp, rng);
            ggml_tensor * b2 = ggml_permute(ctx, bp, 0, 2, 1, 3);
            ggml_tensor * o1 = ggml_mul_mat(ctx, a, b1);
            ggml_tensor * o2 = ggml_mul_mat(ctx, a, b2);
            poison(o1);
            poison(o2);
            compute(ctx, o1, nth);
            compute(ctx, o2, nth);
            INFO("ta = " << ggml_type_name(tc.t));
            CAPTURE(nth);
            CHECK(check_mul_mat(o1, a, b1, act_ref_for(tc.t), 1e-5) == 0);
            CHECK(check_mul_mat(o2, a, b2, act_ref_for(tc.t), 1e-5) == 0);
            ggml_free(ctx);
        }
    }
}

TEST_CASE(
    "mul_mat decode (N = 1, and N = 5's last column): 8-row decode tiles, their 4-row and odd tails, 1-3 threads") {
    // Row counts that give mat-vec units (16 rows) of whole 8-row tiles, an 8-row tile plus a 4-row one and tails of
    // 1..7 rows, with enough units that mul_mat keeps 16-row blocks; every weight type (those without a decode tile
    // run their 4-row tiles, the same check). N = 5: 4-column tiles, then the single column by the decode tile.
    const ggml_type types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q8_0,
                               GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
    std::mt19937 rng(47);
    for (const ggml_type t : types) {
        const int64_t blk = ggml_blck_size(t);
        for (int64_t K : {blk, 8 * blk})
            for (int64_t M : {int64_t(160), int64_t(203), int64_t(236)})
                for (int nth = 1; nth <= 3; ++nth) {
                    const int64_t N = nth == 2 ? 5 : 1;
                    INFO("ta = " << ggml_type_name(t));
                    CAPTURE(K);
                    CAPTURE(M);
                    CAPTURE(N);
                    CAPTURE(nth);
                    CHECK(dense_mul_mat_errors(t, K, M, N, nth, rng, act_ref_for(t)) == 0);
                }
    }
}

namespace {
// plain (a quantized [K, M] in ctx) uploaded to a CPU_REPACK buffer (the 8-row group layout) and both multiplied by
// b on nth threads: the two results (in ctx) and the largest difference of the repacked one from the plain tiles',
// relative to 1 + |y| (NaN where a value is not finite)
struct repack_run {
    ggml_tensor * o_rep, * o_plain;
    float max_rel;
};
repack_run run_repacked(ggml_context * ctx, ggml_tensor * plain, ggml_tensor * b, int nth) {
    ggml_context * wctx = ggml_init({ggml_tensor_overhead() * 2, nullptr, true});
    ggml_tensor * a = ggml_dup_tensor(wctx, plain);
    ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, ggml_backend_cpu_repack_buffer_type());
    REQUIRE(buf);
    ggml_backend_tensor_set(a, plain->data, 0, ggml_nbytes(plain));
    REQUIRE(ggml_cpu_is_repacked(a));
    repack_run r{ggml_mul_mat(ctx, a, b), ggml_mul_mat(ctx, plain, b), 0.0f};
    poison(r.o_rep);
    poison(r.o_plain);
    compute(ctx, r.o_rep, nth);
    compute(ctx, r.o_plain, nth);
    for (int64_t i = 0; i < ggml_nelements(r.o_rep); ++i) {
        const float x = ((const float *)r.o_rep->data)[i], y = ((const float *)r.o_plain->data)[i];
        const float rel = std::fabs(x - y) / (1.0f + std::fabs(y));
        if (!(rel <= r.max_rel)) r.max_rel = rel; // NaN stays
    }
    ggml_backend_buffer_free(buf);
    ggml_free(wctx);
    return r;
}

// The group kernels (AVX2) take the same integer block dots and the same per-block float steps as the AVX2 plain
// tiles: equal to 1e-6. An AVX-512 build's plain tiles add the blocks in another order: f32 rounding apart (measured
// on a Zen 5: up to 1.0e-5 of 1 + |y|, while both stay within 1e-5 of the float64 reference).
void check_same_as_plain(const repack_run & r) {
#if defined(__AVX512F__)
    CHECK(r.max_rel < 3e-5f);
#else
    CHECK(r.max_rel <= 1e-6f);
#endif
}
} // namespace

TEST_CASE("mul_mat q4_0 / q4_K / q6_K weights repacked in 8-row groups (CPU_REPACK buffer): decode groups, plain tail "
          "rows, prompt batches through unpacked row blocks, 1-3 threads") {
    // M: one group; groups + a 5-row tail; enough rows for 64-row decode units (four groups at a time) with a tail;
    // units halved for a small M on 3 threads. N = 1 takes the repacked mat-vec, N > 1 unpacks row blocks for the
    // plain tiles.
    std::mt19937 rng(71);
    for (ggml_type ta : {GGML_TYPE_Q4_0, GGML_TYPE_Q4_K, GGML_TYPE_Q6_K})
    for (int64_t K : {int64_t(256), int64_t(1024), int64_t(32)})
        for (int64_t M : {int64_t(8), int64_t(13), int64_t(64), int64_t(203), int64_t(520)})
            for (int64_t N : {int64_t(1), int64_t(2), int64_t(5), int64_t(17)})
                for (int nth = 1; nth <= 3; ++nth) {
                    if (N > 2 && nth != 2) continue;
                    if (K % ggml_blck_size(ta) != 0) continue;
                    ggml_context * ctx = new_ctx();
                    ggml_tensor * plain = ggml_new_tensor_2d(ctx, ta, K, M);
                    ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, N);
                    fill(plain, rng);
                    fill(b, rng);
                    const repack_run r = run_repacked(ctx, plain, b, nth);
                    CAPTURE(K);
                    CAPTURE(M);
                    CAPTURE(N);
                    CAPTURE(nth);
                    INFO("ta = " << ggml_type_name(ta));
                    CHECK(check_mul_mat(r.o_rep, plain, b, act_ref_for(ta), 1e-5) == 0);
                    check_same_as_plain(r);
                    ggml_free(ctx);
                }
}

TEST_CASE("mul_mat q6_K repacked: random quant and scale bytes, extreme codes against one-sign activations") {
    // Every 6-bit code and every scale byte (-128..127) in random rows; then uniform rows at the extremes (all codes
    // 0 or 63, scales -128 or 127) against activations all of one sign, the largest int16 lane sums the group
    // mat-vec sees. M = 72: one unit of 8 groups (four at a time, twice) and a unit of one group; 2 threads.
    // Checked against the plain 4-row tiles (same integer dots) and a float64 sum of the dequantized weights.
    std::mt19937 rng(83);
    const int64_t K = 1024, M = 72;
    struct mode {
        int code;  // -1: random bytes
        int scale; // ignored for code -1
        float act; // 0: random activations
    };
    const mode modes[] = {{-1, 0, 0.0f},    {-1, 0, -1.0f}, {0, -128, -1.0f}, {63, -128, 1.0f},
                          {63, 127, -1.0f}, {0, 127, 1.0f}, {63, -128, -1.0f}};
    for (const mode & md : modes) {
        CAPTURE(md.code);
        CAPTURE(md.scale);
        CAPTURE(md.act);
        ggml_context * ctx = new_ctx();
        ggml_tensor * plain = ggml_new_tensor_2d(ctx, GGML_TYPE_Q6_K, K, M);
        ggml_tensor * b = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, K, 1);
        fill(plain, rng);
        fill(b, rng);
        if (md.act != 0.0f)
            for (int64_t k = 0; k < K; ++k)
                ((float *)b->data)[k] = md.act * (1.0f + 0.001f * (float)(k % 7)); // one sign, near-equal
        auto * blk = (block_q6_K *)plain->data;
        for (int64_t i = 0; i < M * K / QK_K; ++i) {
            block_q6_K & x = blk[i];
            for (int l = 0; l < QK_K / 2; ++l)
                x.ql[l] = md.code < 0 ? (uint8_t)rng() : (uint8_t)((md.code & 15) * 0x11);
            for (int l = 0; l < QK_K / 4; ++l)
                x.qh[l] = md.code < 0 ? (uint8_t)rng() : (uint8_t)((md.code >> 4) * 0x55);
            for (int g = 0; g < QK_K / 16; ++g)
                x.scales[g] = (int8_t)(md.code < 0 ? (int)(rng() % 256) - 128 : md.scale);
        }
        const repack_run r = run_repacked(ctx, plain, b, 2);
        CHECK(check_mul_mat(r.o_rep, plain, b, act_ref::q8_K, 1e-5) == 0);
        check_same_as_plain(r);
        ggml_free(ctx);
    }
}
