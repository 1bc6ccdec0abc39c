// test_vec_dot_k.cpp - the K-quant CPU dots (cpu/vec_dot_k.cpp): every R x C tile of q2_K..q6_K
// x q8_K against a double-precision dot of the reference-dequantized operands, and the SIMD
// quantize_row_q8_K against quantize_row_q8_K_ref byte for byte. Whatever SIMD level the build
// picked (ggml_cpu_simd_name) is what runs; build with -DGGML_NATIVE=OFF (plain C++) or
// -mavx2 -mfma -mf16c (AVX2) to test the other paths.
#include "cpu/quants.h"
#include "cpu/vec_dot.h"
#include "ggml-impl.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include "doctest_cstr.h"
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace {

struct ktype {
    ggml_type type;
    size_t block_bytes;
    void (*quantize)(const float *, void *, int64_t);
    void (*dequantize)(const void *, float *, int64_t);
    std::vector<size_t> f16_offsets; // byte offsets of d (and dmin) in a block
};

template <typename B, void (*Q)(const float *, B *, int64_t)> void quantize_as(const float * x, void * y, int64_t k) {
    Q(x, (B *)y, k);
}
template <typename B, void (*D)(const B *, float *, int64_t)> void dequantize_as(const void * x, float * y, int64_t k) {
    D((const B *)x, y, k);
}

const std::vector<ktype> & ktypes() {
    static const std::vector<ktype> t = {
        {GGML_TYPE_Q2_K,
         sizeof(block_q2_K),
         quantize_as<block_q2_K, quantize_row_q2_K_ref>,
         dequantize_as<block_q2_K, dequantize_row_q2_K>,
         {offsetof(block_q2_K, d), offsetof(block_q2_K, dmin)}},
        {GGML_TYPE_Q3_K,
         sizeof(block_q3_K),
         quantize_as<block_q3_K, quantize_row_q3_K_ref>,
         dequantize_as<block_q3_K, dequantize_row_q3_K>,
         {offsetof(block_q3_K, d)}},
        {GGML_TYPE_Q4_K,
         sizeof(block_q4_K),
         quantize_as<block_q4_K, quantize_row_q4_K_ref>,
         dequantize_as<block_q4_K, dequantize_row_q4_K>,
         {offsetof(block_q4_K, d), offsetof(block_q4_K, dmin)}},
        {GGML_TYPE_Q5_K,
         sizeof(block_q5_K),
         quantize_as<block_q5_K, quantize_row_q5_K_ref>,
         dequantize_as<block_q5_K, dequantize_row_q5_K>,
         {offsetof(block_q5_K, d), offsetof(block_q5_K, dmin)}},
        {GGML_TYPE_Q6_K,
         sizeof(block_q6_K),
         quantize_as<block_q6_K, quantize_row_q6_K_ref>,
         dequantize_as<block_q6_K, dequantize_row_q6_K>,
         {offsetof(block_q6_K, d)}},
    };
    return t;
}

const char * type_name(ggml_type t) {
    switch (t) {
        case GGML_TYPE_Q2_K:
            return "q2_K";
        case GGML_TYPE_Q3_K:
            return "q3_K";
        case GGML_TYPE_Q4_K:
            return "q4_K";
        case GGML_TYPE_Q5_K:
            return "q5_K";
        case GGML_TYPE_Q6_K:
            return "q6_K";
        default:
            return "?";
    }
}

// One weight row of n values. mode 0: normal values through the reference quantizer; 1: heavy
// tails and per-16 offsets (large 6-bit scales, mins of both signs); 2: random bytes with random
// finite f16 d/dmin of both signs (every scale, min and quant bit pattern).
void make_row(const ktype & kt, int64_t n, int mode, std::mt19937 & rng, uint8_t * dst) {
    const int64_t nb = n / QK_K;
    if (mode == 2 || mode == 3) { // 3: every byte 0xFF (every quant, scale and min at its largest)
        std::uniform_int_distribution<int> byte(0, 255);
        std::uniform_real_distribution<float> mag(-8.0f, 2.0f);
        for (int64_t i = 0; i < nb * (int64_t)kt.block_bytes; ++i)
            dst[i] = mode == 3 ? 0xFF : (uint8_t)byte(rng);
        for (int64_t ib = 0; ib < nb; ++ib)
            for (size_t off : kt.f16_offsets) {
                const float v = std::exp2(mag(rng)) * (byte(rng) & 1 ? -1.0f : 1.0f);
                const ggml_fp16_t h = ggml_compute_fp32_to_fp16(v);
                std::memcpy(dst + ib * kt.block_bytes + off, &h, sizeof(h));
            }
        return;
    }
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
        x[i] = nd(rng);
        if (mode == 1) x[i] = x[i] * std::exp(nd(rng)) + (float)((i / 16) % 5) - 2.0f;
    }
    kt.quantize(x.data(), dst, n);
}

// q8_K activations: normal (column 0 also with outliers), column 3 of the "extreme" set all of
// magnitude max (quants +-127), or all zero.
void make_act(int64_t n, int kind, std::mt19937 & rng, block_q8_K * dst) {
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::vector<float> x(n);
    for (int64_t i = 0; i < n; ++i) {
        switch (kind) {
            case 0:
                x[i] = nd(rng);
                break;
            case 1:
                x[i] = nd(rng) * std::exp(2.0f * nd(rng));
                break;
            case 2:
                x[i] = nd(rng) < 0 ? -3.0f : 3.0f;
                break;
            case 4: // every quant at the same extreme: the largest partial sums of the narrow lanes
                x[i] = 3.0f;
                break;
            default:
                x[i] = 0.0f;
                break;
        }
    }
    quantize_row_q8_K_ref(x.data(), dst, n);
}

// dot of dequantized x with y = d * qs, in double; mag = sum |x_i y_i|
void ref_dot(const ktype & kt, int64_t n, const uint8_t * x, const block_q8_K * y, double & dot, double & mag) {
    std::vector<float> xf(n);
    kt.dequantize(x, xf.data(), n);
    dot = mag = 0.0;
    for (int64_t i = 0; i < n; ++i) {
        const block_q8_K & b = y[i / QK_K];
        const double p = (double)xf[i] * ((double)b.d * b.qs[i % QK_K]);
        dot += p;
        mag += std::fabs(p);
    }
}

} // namespace

TEST_CASE("K-quant tiles: every R x C against a double dot of the dequantized operands") {
    MESSAGE("SIMD: " << std::string(ggml_cpu_simd_name()));
    std::mt19937 rng(20240607);
    const float poison = std::numeric_limits<float>::quiet_NaN();
    for (const ktype & kt : ktypes()) {
        const ggml_cpu_type_traits * tt = ggml_cpu_get_type_traits(kt.type);
        REQUIRE(tt->vec_dot_type == GGML_TYPE_Q8_K);
        REQUIRE(tt->tiles != nullptr);
        for (int64_t n : {256, 512, 2048, 5632}) {
            const int64_t nb = n / QK_K;
            const size_t row = nb * kt.block_bytes;
            const size_t bx = row + 38;                        // rows apart by more than a row
            const size_t by = nb * sizeof(block_q8_K) + 7 * 4; // q8_K rows too
            for (int mode = 0; mode < 4; ++mode) {
                std::vector<uint8_t> xs(4 * bx, 0xA5), ys(4 * by, 0x5A);
                for (int r = 0; r < 4; ++r)
                    make_row(kt, n, mode, rng, xs.data() + r * bx);
                for (int c = 0; c < 4; ++c) {
                    // mode 0: normal activations; 1: outliers + one all-zero column; 2: +-127 quants; 3: all
                    // quants at one extreme (with the all-0xFF weights of mode 3)
                    const int kind = mode == 0   ? (c == 3 ? 1 : 0)
                                     : mode == 1 ? (c == 2 ? 3 : 1)
                                     : mode == 2 ? (c < 2 ? 2 : 0)
                                                 : (c < 2 ? 4 : 2);
                    make_act(n, kind, rng, (block_q8_K *)(ys.data() + c * by));
                }
                double ref[4][4], mag[4][4];
                for (int r = 0; r < 4; ++r)
                    for (int c = 0; c < 4; ++c)
                        ref_dot(kt, n, xs.data() + r * bx, (const block_q8_K *)(ys.data() + c * by), ref[r][c],
                                mag[r][c]);
                for (int R = 1; R <= 4; ++R)
                    for (int C = 1; C <= 4; ++C)
                        for (int layout = 0; layout < 2; ++layout) {
                            // layout 0: s[r + c * 9] (rows contiguous, as mul_mat); 1: s[r * 7 + c * 2]
                            const size_t bs_r = layout ? 7 * sizeof(float) : sizeof(float);
                            const size_t bs_c = layout ? 2 * sizeof(float) : 9 * sizeof(float);
                            std::vector<float> s(64, poison);
                            (*tt->tiles)[R - 1][C - 1](n, xs.data(), bx, ys.data(), by, s.data(), bs_r, bs_c);
                            std::vector<bool> written(64, false);
                            for (int r = 0; r < R; ++r)
                                for (int c = 0; c < C; ++c) {
                                    const size_t at = (r * bs_r + c * bs_c) / sizeof(float);
                                    written[at] = true;
                                    const double err = std::fabs((double)s[at] - ref[r][c]);
                                    INFO(type_name(kt.type) << " n=" << n << " mode=" << mode << " tile " << R << "x"
                                                            << C << " (" << r << "," << c << "): got " << s[at]
                                                            << " ref " << ref[r][c] << " mag " << mag[r][c]);
                                    CHECK(std::isfinite(s[at]));
                                    CHECK(err <= 1e-5 * mag[r][c] + 1e-30);
                                }
                            for (int i = 0; i < 64; ++i)
                                if (!written[i]) CHECK(std::isnan(s[i])); // nothing outside the tile written
                        }
            }
        }
    }
}

TEST_CASE("K-quant tiles do not depend on the bytes around the rows") {
    // The same rows copied into buffers of exactly their size (a read past a row shows up under
    // ASan; a read of the gap between rows would change the result).
    std::mt19937 rng(7);
    for (const ktype & kt : ktypes()) {
        const int64_t n = 512, nb = n / QK_K;
        const size_t row = nb * kt.block_bytes, yrow = nb * sizeof(block_q8_K);
        std::vector<uint8_t> x(4 * row);
        std::vector<block_q8_K> y(4 * nb);
        for (int r = 0; r < 4; ++r)
            make_row(kt, n, 2, rng, x.data() + r * row);
        for (int c = 0; c < 4; ++c)
            make_act(n, 0, rng, y.data() + c * nb);
        float s1[16], s2[16];
        const ggml_tile_table & tiles = *ggml_cpu_get_type_traits(kt.type)->tiles;
        tiles[3][3](n, x.data(), row, y.data(), yrow, s1, sizeof(float), 4 * sizeof(float));
        // the same rows, spaced out with garbage between them
        std::vector<uint8_t> x2(4 * (row + 100), 0xFF);
        for (int r = 0; r < 4; ++r)
            std::memcpy(x2.data() + r * (row + 100), x.data() + r * row, row);
        tiles[3][3](n, x2.data(), row + 100, y.data(), yrow, s2, sizeof(float), 4 * sizeof(float));
        for (int i = 0; i < 16; ++i)
            CHECK(s1[i] == s2[i]);
        // each row alone at the very end of its own allocation
        for (int r = 0; r < 4; ++r) {
            std::vector<uint8_t> one(x.begin() + r * row, x.begin() + (r + 1) * row);
            float s = 0;
            tiles[0][0](n, one.data(), row, y.data(), yrow, &s, sizeof(float), sizeof(float));
            float s4 = 0;
            tiles[0][0](n, x.data() + r * row, row, y.data(), yrow, &s4, sizeof(float), sizeof(float));
            CHECK(s == s4);
        }
    }
}

TEST_CASE("quantize_row_q8_K is bit-identical to quantize_row_q8_K_ref") {
    std::mt19937 rng(99);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> pick(0, QK_K - 1);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    std::vector<std::vector<float>> rows;
    auto block = [&](auto f) {
        std::vector<float> x(QK_K);
        for (int i = 0; i < QK_K; ++i)
            x[i] = f(i);
        rows.push_back(x);
    };
    for (float scale : {1e-30f, 1e-3f, 1.0f, 7.0f, 1e3f, 1e30f})
        for (int t = 0; t < 20; ++t)
            block([&](int) { return nd(rng) * scale; });
    for (int t = 0; t < 20; ++t) // heavy tails: the max far from the rest
        block([&](int) { return nd(rng) * std::exp(3.0f * nd(rng)); });
    block([](int) { return 0.0f; });
    block([](int) { return -0.0f; });
    block([&](int i) { return i == 77 ? -2.5f : 0.0f; });
    block([&](int i) { return i == 200 ? 1e-3f : 0.0f; });
    block([](int i) { return i % 2 ? 3.0f : -3.0f; });                    // ties of |x|: the first wins
    block([](int i) { return i == 5 ? -5.0f : i == 100 ? 5.0f : 1.0f; }); // -5 first
    block([](int i) { return i == 5 ? 5.0f : i == 100 ? -5.0f : -1.0f; });
    block([&](int i) { return i == 0 ? -127.0f : 0.5f * (float)(pick(rng) - 128); }); // iscale 1: exact .5 ties
    block([&](int i) { return i == 3 ? 127.0f : 0.5f * (float)(pick(rng) - 128) + 0.25f; });
    block([&](int i) { return i == 9 ? std::numeric_limits<float>::max() : nd(rng) * 1e37f; });
    block([&](int i) { return i == 9 ? -std::numeric_limits<float>::max() : nd(rng); });
    block([&](int) { return nd(rng) * 1e-40f; }); // denormal max: iscale = -inf
    block([&](int i) { return i == 11 ? inf : nd(rng); });
    block([&](int i) { return i == 11 ? -inf : i == 12 ? inf : nd(rng); });
    block([&](int i) { return i % 3 == 0 ? nan : nd(rng); });
    block([&](int) { return nan; });
    for (int t = 0; t < 200; ++t) { // random scales per block
        const float s = std::exp2((float)(pick(rng) % 60) - 30.0f);
        block([&](int) { return nd(rng) * s; });
    }
    const int64_t nrows = (int64_t)rows.size();
    std::vector<float> x;
    for (const auto & r : rows)
        x.insert(x.end(), r.begin(), r.end());
    // whole run at once and block by block; outputs poisoned differently
    std::vector<block_q8_K> a(nrows), b(nrows);
    std::memset(a.data(), 0x11, nrows * sizeof(block_q8_K));
    std::memset(b.data(), 0xEE, nrows * sizeof(block_q8_K));
    quantize_row_q8_K_ref(x.data(), a.data(), nrows * QK_K);
    quantize_row_q8_K(x.data(), b.data(), nrows * QK_K);
    int bad = 0;
    for (int64_t i = 0; i < nrows; ++i) {
        if (std::memcmp(&a[i], &b[i], sizeof(block_q8_K)) != 0) {
            if (++bad <= 5) {
                int j = 0;
                while (j < QK_K && a[i].qs[j] == b[i].qs[j])
                    ++j;
                MESSAGE("block " << i << ": d " << a[i].d << " vs " << b[i].d << ", first qs diff at " << j);
            }
        }
    }
    CHECK(bad == 0);
    for (int64_t i = 0; i < nrows; ++i) {
        block_q8_K one;
        std::memset(&one, 0x77, sizeof(one));
        quantize_row_q8_K(x.data() + i * QK_K, &one, QK_K);
        CHECK(std::memcmp(&one, &a[i], sizeof(one)) == 0);
    }
    // and the bsums are the sums of the quants (what the dots rely on)
    for (int64_t i = 0; i < nrows; ++i)
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l)
                sum += b[i].qs[16 * g + l];
            CHECK(b[i].bsums[g] == sum);
        }
}
