// test_vec_dot_quants.cpp - the CPU register-tile dots of every quantized weight type against its
// activation type (cpu/quants.h traits: tiles[nr - 1][nc - 1], vec_dot_type, from_float), each
// R x C tile (1..4 x 1..4) against
//   - a float64 reference over the dequantized weights and activations (the types' to_float):
//     |tile - ref| <= 1e-5 * sum |x * y|;
//   - tile_generic.h's dequantize-and-dot kernel (same bound, doubled).
// Weights: random floats quantized with the weight type's from_float_ref; activations: random
// floats quantized with the CPU activation quantizer (quantize_row_q8_1 / quantize_row_q8_K).
// Row strides wider than a row and odd; outputs written with non-unit strides into a poisoned
// buffer, and the cells between them must stay poisoned.
//
// Adding a type: one generic table and one row in k_cases below.
#include "cpu/common.h"
#include "cpu/quants.h"
#include "cpu/tile_generic.h"
#include "cpu/vec_dot.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include "doctest_cstr.h"
#include <random>
#include <string>
#include <vector>

namespace {

// ---- the table: one row per weight type ------------------------------------------------------
struct dot_case {
    ggml_type type;            // weight type; its activation type and SIMD tiles come from cpu/quants.h
    ggml_tile_table * generic; // the portable reference kernel for it (tile_generic.h)
};

ggml_tile_table k_generic_q4_0 = GGML_TILE_GENERIC_TABLE(GGML_TYPE_Q4_0, GGML_TYPE_Q8_1);
ggml_tile_table k_generic_q4_1 = GGML_TILE_GENERIC_TABLE(GGML_TYPE_Q4_1, GGML_TYPE_Q8_1);
ggml_tile_table k_generic_q5_0 = GGML_TILE_GENERIC_TABLE(GGML_TYPE_Q5_0, GGML_TYPE_Q8_1);
ggml_tile_table k_generic_q5_1 = GGML_TILE_GENERIC_TABLE(GGML_TYPE_Q5_1, GGML_TYPE_Q8_1);
ggml_tile_table k_generic_q8_0 = GGML_TILE_GENERIC_TABLE(GGML_TYPE_Q8_0, GGML_TYPE_Q8_1);

const dot_case k_cases[] = {
    {GGML_TYPE_Q4_0, &k_generic_q4_0}, // cpu/vec_dot_q4_q5.cpp
    {GGML_TYPE_Q4_1, &k_generic_q4_1}, {GGML_TYPE_Q5_0, &k_generic_q5_0},
    {GGML_TYPE_Q5_1, &k_generic_q5_1}, {GGML_TYPE_Q8_0, &k_generic_q8_0}, // cpu/vec_dot.cpp
    // K-quants (cpu/vec_dot_k.cpp, against q8_K): add {GGML_TYPE_Q4_K, &k_generic_q4_K}, ... here
};

// Row lengths; those not a multiple of a type's block size are skipped for it.
const int64_t k_lengths[] = {32, 64, 96, 256, 768, 4096, 5632};

constexpr int TR = GGML_TILE_MAX_R, TC = GGML_TILE_MAX_C;

// ---- helpers ---------------------------------------------------------------------------------

std::vector<float> randv(std::mt19937 & rng, int64_t n) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> v(n);
    for (auto & x : v)
        x = nd(rng);
    return v;
}

// rows x n values of `type` at `stride` bytes per row (padding filled with junk bytes); the
// dequantized values go to deq (rows x n).
std::vector<uint8_t> make_rows(ggml_type type, bool activation, int rows, int64_t n, size_t stride, std::mt19937 & rng,
                               std::vector<double> & deq) {
    const ggml_type_traits * t = ggml_get_type_traits(type);
    REQUIRE_MESSAGE(bool(t->to_float != nullptr), ggml_type_name(type), ": no to_float");
    const ggml_from_float_t q = activation ? ggml_cpu_get_type_traits(type)->from_float : t->from_float_ref;
    REQUIRE_MESSAGE(bool(q != nullptr), ggml_type_name(type), ": no quantizer");
    std::vector<uint8_t> buf(stride * rows + 64);
    std::uniform_int_distribution<int> byte(0, 255);
    for (auto & b : buf)
        b = (uint8_t)byte(rng);
    deq.assign((size_t)rows * n, 0.0);
    std::vector<float> f(n);
    for (int r = 0; r < rows; ++r) {
        std::vector<float> v = randv(rng, n);
        if (!activation && r % 2 == 1) // some rows with an offset: non-trivial mins
            for (auto & e : v)
                e += 0.75f;
        q(v.data(), buf.data() + r * stride, n);
        t->to_float(buf.data() + r * stride, f.data(), n);
        for (int64_t i = 0; i < n; ++i)
            deq[(size_t)r * n + i] = f[i];
    }
    return buf;
}

const float k_poison = -12345.678f;

// Runs tile (nr x nc) into a poisoned output buffer with strides bs_r, bs_c (bytes, multiples
// of 4); returns the nr x nc results and checks nothing else was written.
std::vector<float> run_tile(ggml_tile_dot_t tile, int nr, int nc, int64_t n, const uint8_t * x, size_t bx,
                            const uint8_t * y, size_t by, size_t bs_r, size_t bs_c) {
    const size_t cells = ((nr - 1) * bs_r + (nc - 1) * bs_c) / sizeof(float) + 1;
    std::vector<float> out(cells + 4, k_poison);
    tile(n, x, bx, y, by, out.data(), bs_r, bs_c);
    std::vector<float> res(nr * nc);
    std::vector<bool> is_out(out.size(), false);
    for (int r = 0; r < nr; ++r)
        for (int c = 0; c < nc; ++c) {
            const size_t i = (r * bs_r + c * bs_c) / sizeof(float);
            res[r * nc + c] = out[i];
            is_out[i] = true;
        }
    int stray = 0;
    for (size_t i = 0; i < out.size(); ++i)
        if (!is_out[i] && out[i] != k_poison) ++stray;
    CHECK_MESSAGE(stray == 0, "tile ", nr, "x", nc, " wrote outside its cells");
    return res;
}

} // namespace

TEST_CASE("tile dots of quantized weights: every R x C tile vs float64 and vs tile_generic") {
    INFO("SIMD: ", ggml_cpu_simd_name());
    for (const dot_case & dc : k_cases) {
        const ggml_cpu_type_traits * tt = ggml_cpu_get_type_traits(dc.type);
        REQUIRE(bool(tt->tiles != nullptr));
        const ggml_type yt = tt->vec_dot_type;
        const int64_t blk = ggml_blck_size(dc.type);
        for (const int64_t n : k_lengths) {
            if (n % blk != 0) continue;
            std::mt19937 rng((uint32_t)(1000 * dc.type + n));
            // rows wider than the data and of odd length
            const size_t bx = ggml_row_size(dc.type, n) + 2 * ggml_type_size(dc.type) + 8; // blocks stay 4-byte aligned
            const size_t by = ggml_row_size(yt, n) + ggml_type_size(yt) + 12;
            std::vector<double> xd, yd;
            const std::vector<uint8_t> xb = make_rows(dc.type, false, TR, n, bx, rng, xd);
            const std::vector<uint8_t> yb = make_rows(yt, true, TC, n, by, rng, yd);
            double ref[TR][TC], mag[TR][TC];
            for (int r = 0; r < TR; ++r)
                for (int c = 0; c < TC; ++c) {
                    double s = 0, m = 0;
                    for (int64_t i = 0; i < n; ++i) {
                        const double p = xd[r * n + i] * yd[c * n + i];
                        s += p;
                        m += std::fabs(p);
                    }
                    ref[r][c] = s;
                    mag[r][c] = m;
                }
            for (int nr = 1; nr <= TR; ++nr)
                for (int nc = 1; nc <= TC; ++nc) {
                    // two output layouts: rows contiguous (as mul_mat's dst), and both strides wide
                    const size_t layouts[2][2] = {{sizeof(float), sizeof(float) * (nr + 3)},
                                                  {sizeof(float) * (2 * nc + 1), sizeof(float) * 2}};
                    for (const auto & lay : layouts) {
                        CAPTURE(n);
                        CAPTURE(nr);
                        CAPTURE(nc);
                        INFO("type ", ggml_type_name(dc.type), " x ", ggml_type_name(yt), ", bs_r ", lay[0], " bs_c ",
                             lay[1]);
                        const std::vector<float> got = run_tile((*tt->tiles)[nr - 1][nc - 1], nr, nc, n, xb.data(), bx,
                                                                yb.data(), by, lay[0], lay[1]);
                        const std::vector<float> gen = run_tile((*dc.generic)[nr - 1][nc - 1], nr, nc, n, xb.data(), bx,
                                                                yb.data(), by, lay[0], lay[1]);
                        for (int r = 0; r < nr; ++r)
                            for (int c = 0; c < nc; ++c) {
                                const double v = got[r * nc + c], g = gen[r * nc + c];
                                CAPTURE(r);
                                CAPTURE(c);
                                CAPTURE(v);
                                CAPTURE(ref[r][c]);
                                CHECK(std::fabs(v - ref[r][c]) <= 1e-5 * mag[r][c]);
                                CHECK(std::fabs(g - ref[r][c]) <= 1e-5 * mag[r][c]);
                                CHECK(std::fabs(v - g) <= 2e-5 * mag[r][c]);
                            }
                    }
                }
        }
    }
}

TEST_CASE("tile dots of quantized weights: extreme codes and scales (no overflow, exact integer sums)") {
    // Every weight at its largest code and every activation at +-127, with large f16 scales: the
    // int32 sums and the 16x high-nibble lanes must not overflow or saturate.
    for (const dot_case & dc : k_cases) {
        const ggml_cpu_type_traits * tt = ggml_cpu_get_type_traits(dc.type);
        const ggml_type yt = tt->vec_dot_type;
        const int64_t blk = ggml_blck_size(dc.type);
        const int64_t n = blk * 8;
        for (int sign = -1; sign <= 1; sign += 2)
            for (int uniform = 0; uniform <= 1; ++uniform) {
                CAPTURE(sign);
                CAPTURE(uniform);
                INFO("type ", ggml_type_name(dc.type));
                // weights: alternating large magnitudes quantize to the extreme codes; uniform: every weight at the
                // most negative code and every activation at +-127, so all products of a block add up with one sign
                // (the largest partial sums the kernels' narrow lanes can see)
                std::vector<float> xf(TR * n), yf(TC * n);
                for (int64_t i = 0; i < TR * n; ++i)
                    xf[i] = uniform ? -1000.0f : (i % 2 ? 1000.0f : -1000.0f) * (i % 64 < 32 ? 1 : -1);
                for (int64_t i = 0; i < TC * n; ++i)
                    yf[i] = sign * 500.0f * (uniform || (i / 3) % 2 ? 1 : -1);
                const size_t bx = ggml_row_size(dc.type, n), by = ggml_row_size(yt, n);
                std::vector<uint8_t> xb(bx * TR + 64), yb(by * TC + 64);
                for (int r = 0; r < TR; ++r)
                    ggml_get_type_traits(dc.type)->from_float_ref(xf.data() + r * n, xb.data() + r * bx, n);
                for (int c = 0; c < TC; ++c)
                    ggml_cpu_get_type_traits(yt)->from_float(yf.data() + c * n, yb.data() + c * by, n);
                std::vector<float> xd(n), yd(n);
                // every tile shape: the decode tiles (R x 1) have kernels of their own
                for (int nr = 1; nr <= TR; ++nr)
                    for (int nc = 1; nc <= TC; ++nc) {
                        CAPTURE(nr);
                        CAPTURE(nc);
                        float got[TR * TC];
                        (*tt->tiles)[nr - 1][nc - 1](n, xb.data(), bx, yb.data(), by, got, sizeof(float) * TC,
                                                     sizeof(float));
                        for (int r = 0; r < nr; ++r) {
                            ggml_get_type_traits(dc.type)->to_float(xb.data() + r * bx, xd.data(), n);
                            for (int c = 0; c < nc; ++c) {
                                ggml_get_type_traits(yt)->to_float(yb.data() + c * by, yd.data(), n);
                                double ref = 0, mag = 0;
                                for (int64_t i = 0; i < n; ++i) {
                                    ref += (double)xd[i] * yd[i];
                                    mag += std::fabs((double)xd[i] * yd[i]);
                                }
                                CHECK(mag > 0);
                                CHECK(std::fabs(got[r * TC + c] - ref) <= 1e-5 * mag);
                            }
                        }
                    }
            }
    }
}

namespace {

// The weight types whose traits have a decode tile (GGML_TILE_DECODE_R rows x 1 column, cpu/quants.h) in this build.
std::vector<ggml_type> decode_tile_types() {
    std::vector<ggml_type> v;
    for (int t = 0; t < GGML_TYPE_COUNT; ++t)
        if (ggml_cpu_is_weight_type((ggml_type)t) && ggml_cpu_get_type_traits((ggml_type)t)->tile_decode)
            v.push_back((ggml_type)t);
    return v;
}

} // namespace

TEST_CASE("decode tiles (8 rows x 1 column) vs float64, the 4-row tiles and tile_generic") {
    constexpr int DR = GGML_TILE_DECODE_R;
    const std::vector<ggml_type> types = decode_tile_types();
    INFO("SIMD: ", ggml_cpu_simd_name());
    if (std::strncmp(ggml_cpu_simd_name(), "avx2", 4) == 0) // the AVX2 build has q4_0's (Zen 1, cpu/vec_dot_q4_q5.cpp)
        CHECK(std::find(types.begin(), types.end(), GGML_TYPE_Q4_0) != types.end());
    for (const ggml_type type : types) {
        const ggml_cpu_type_traits * tt = ggml_cpu_get_type_traits(type);
        const ggml_type yt = tt->vec_dot_type;
        const int64_t blk = ggml_blck_size(type);
        for (const int64_t n : k_lengths) {
            if (n % blk != 0) continue;
            std::mt19937 rng((uint32_t)(7000 * type + n));
            const size_t bx = ggml_row_size(type, n) + 2 * ggml_type_size(type) + 8;
            std::vector<double> xd, yd;
            const std::vector<uint8_t> xb = make_rows(type, false, DR, n, bx, rng, xd);
            const std::vector<uint8_t> yb = make_rows(yt, true, 1, n, ggml_row_size(yt, n), rng, yd);
            // two output strides: dense (mul_mat's dst) and wide
            for (const size_t bs_r : {sizeof(float), 3 * sizeof(float)}) {
                CAPTURE(n);
                CAPTURE(bs_r);
                INFO("type ", ggml_type_name(type));
                const std::vector<float> got =
                    run_tile(tt->tile_decode, DR, 1, n, xb.data(), bx, yb.data(), 0, bs_r, 0);
                // the 4-row tile, and tile_generic.h where this file has it for the type (else the 4-row tile again)
                ggml_tile_dot_t generic = (*tt->tiles)[3][0];
                for (const dot_case & dc : k_cases)
                    if (dc.type == type) generic = (*dc.generic)[3][0];
                std::vector<float> four(DR), gen(DR);
                for (int r0 = 0; r0 < DR; r0 += 4) {
                    (*tt->tiles)[3][0](n, xb.data() + r0 * bx, bx, yb.data(), 0, four.data() + r0, sizeof(float), 0);
                    generic(n, xb.data() + r0 * bx, bx, yb.data(), 0, gen.data() + r0, sizeof(float), 0);
                }
                for (int r = 0; r < DR; ++r) {
                    double ref = 0, mag = 0;
                    for (int64_t i = 0; i < n; ++i) {
                        ref += xd[r * n + i] * yd[i];
                        mag += std::fabs(xd[r * n + i] * yd[i]);
                    }
                    CAPTURE(r);
                    CAPTURE(got[r]);
                    CAPTURE(ref);
                    CHECK(std::fabs(got[r] - ref) <= 1e-5 * mag);
                    CHECK(std::fabs(got[r] - four[r]) <= 2e-5 * mag);
                    CHECK(std::fabs(got[r] - gen[r]) <= 2e-5 * mag);
                }
            }
        }
    }
}

TEST_CASE("decode tiles: extreme codes and scales (the int16 lanes at their bounds)") {
    // As the extreme-codes case above, with 8 rows: alternating extreme codes; every weight at the most negative code
    // against activations all at +-127 of one sign (the largest partial sums of one sign the narrow lanes see); and
    // rows that differ (each row its own extreme pattern), so a row mixed up with another shows.
    constexpr int DR = GGML_TILE_DECODE_R;
    for (const ggml_type type : decode_tile_types()) {
        const ggml_cpu_type_traits * tt = ggml_cpu_get_type_traits(type);
        const ggml_type yt = tt->vec_dot_type;
        const int64_t n = ggml_blck_size(type) * 8;
        for (int sign = -1; sign <= 1; sign += 2)
            for (int mode = 0; mode < 3; ++mode) {
                CAPTURE(sign);
                CAPTURE(mode);
                INFO("type ", ggml_type_name(type));
                std::vector<float> xf(DR * n), yf(n);
                for (int64_t i = 0; i < DR * n; ++i) {
                    const int64_t r = i / n, j = i % n;
                    if (mode == 0) xf[i] = (j % 2 ? 1000.0f : -1000.0f) * (j % 64 < 32 ? 1 : -1);
                    if (mode == 1) xf[i] = -1000.0f;
                    if (mode == 2)
                        xf[i] = (r % 2 ? 1000.0f : -1000.0f) * ((j >> (r % 4)) % 2 ? 1 : -1) * (1 + 0.1f * r);
                }
                for (int64_t i = 0; i < n; ++i)
                    yf[i] = sign * 500.0f * (mode == 1 || (i / 3) % 2 ? 1 : -1);
                const size_t bx = ggml_row_size(type, n), by = ggml_row_size(yt, n);
                std::vector<uint8_t> xb(bx * DR + 64), yb(by + 64);
                for (int r = 0; r < DR; ++r)
                    ggml_get_type_traits(type)->from_float_ref(xf.data() + r * n, xb.data() + r * bx, n);
                ggml_cpu_get_type_traits(yt)->from_float(yf.data(), yb.data(), n);
                std::vector<float> xd(n), yd(n);
                ggml_get_type_traits(yt)->to_float(yb.data(), yd.data(), n);
                float got[DR];
                tt->tile_decode(n, xb.data(), bx, yb.data(), by, got, sizeof(float), 0);
                for (int r = 0; r < DR; ++r) {
                    ggml_get_type_traits(type)->to_float(xb.data() + r * bx, xd.data(), n);
                    double ref = 0, mag = 0;
                    for (int64_t i = 0; i < n; ++i) {
                        ref += (double)xd[i] * yd[i];
                        mag += std::fabs((double)xd[i] * yd[i]);
                    }
                    CAPTURE(r);
                    CHECK(mag > 0);
                    CHECK(std::fabs(got[r] - ref) <= 1e-5 * mag);
                }
            }
    }
}
