// test_quants.cpp - type traits, f16 conversion, q8_0/q8_1 quantization and the SIMD dots,
// each against an independent reference (bit-level decoders, _Float16, numpy golden bytes,
// double-precision sums).
#include "cpu/ops.h"
#include "cpu/vec_dot.h"
#include "ggml-impl.h"
#include "test_util.h"

#include <cmath>
#include <cstring>
#include "doctest_cstr.h"
#include <limits>
#include <random>
#include <vector>

namespace {

// Golden data printed by scripts/q8_golden.py (numpy, float32 math mirroring ggml).
static const uint32_t k_golden_x_bits[64] = {
    0x00000000u, 0x3faadc3eu, 0x40217699u, 0x405bf962u, 0x407f3589u, 0x4084484du, 0x4078f0c9u, 0x3fc93ba8u,
    0x3f4ab2acu, 0xbd7d7a11u, 0xbf56ea06u, 0xbfb374bfu, 0xbfd1d79fu, 0xbfbe2c0eu, 0xc02b636bu, 0xbfe0fcf4u,
    0xbf10d5b1u, 0x3f453bd0u, 0x4006a5ffu, 0x40526d2fu, 0x408646a6u, 0x403f52c5u, 0x40483331u, 0x40382561u,
    0x40137ff4u, 0x3fc2c608u, 0x3f2b051fu, 0xbddabf34u, 0xc01a8222u, 0xc02944d3u, 0xc01ef440u, 0xbff596d6u,
    0xbf7e1350u, 0x3e504163u, 0x3fc53bc8u, 0x3f8fba0fu, 0x40136237u, 0x404d1f2bu, 0x406f6dbbu, 0x4077d398u,
    0x4067582au, 0x404260e5u, 0x3f0063dfu, 0xbeb438b5u, 0xbf8fe071u, 0xbfd6901du, 0xbff33746u, 0xbfdda066u,
    0xbf9462c6u, 0xbffd1353u, 0xbf47066eu, 0x3f0fb330u, 0x3ff2266au, 0x404455afu, 0x407daefau, 0x408fc335u,
    0x403771d0u, 0x40268927u, 0x400140abu, 0x3f9d9d13u, 0x3ec18801u, 0xbec849dcu, 0xbf703089u, 0xc039f03eu,
};
static const uint8_t k_golden_q8_0[68] = {
    0x3b, 0x28, 0x00, 0x28, 0x4c, 0x68, 0x79, 0x7d, 0x76, 0x30, 0x18, 0xfe, 0xe7, 0xd6, 0xce, 0xd3, 0xaf,
    0xcb, 0xef, 0x17, 0x40, 0x64, 0x7f, 0x5a, 0x5f, 0x57, 0x46, 0x2e, 0x14, 0xfd, 0xb7, 0xb0, 0xb5, 0xc6,
    0x87, 0x28, 0xe4, 0x06, 0x2c, 0x20, 0x41, 0x5b, 0x6a, 0x6d, 0x66, 0x56, 0x0e, 0xf6, 0xe0, 0xd1, 0xca,
    0xcf, 0xdf, 0xc8, 0xea, 0x10, 0x35, 0x57, 0x70, 0x7f, 0x51, 0x4a, 0x39, 0x23, 0x0b, 0xf5, 0xe5, 0xae,
};
static const uint8_t k_golden_q8_1[72] = {
    0x3b, 0x28, 0x65, 0x4e, 0x00, 0x28, 0x4c, 0x68, 0x79, 0x7d, 0x76, 0x30, 0x18, 0xfe, 0xe7, 0xd6, 0xce, 0xd3,
    0xaf, 0xcb, 0xef, 0x17, 0x40, 0x64, 0x7f, 0x5a, 0x5f, 0x57, 0x46, 0x2e, 0x14, 0xfd, 0xb7, 0xb0, 0xb5, 0xc6,
    0x87, 0x28, 0x94, 0x4f, 0xe4, 0x06, 0x2c, 0x20, 0x41, 0x5b, 0x6a, 0x6d, 0x66, 0x56, 0x0e, 0xf6, 0xe0, 0xd1,
    0xca, 0xcf, 0xdf, 0xc8, 0xea, 0x10, 0x35, 0x57, 0x70, 0x7f, 0x51, 0x4a, 0x39, 0x23, 0x0b, 0xf5, 0xe5, 0xae,
};

uint32_t f2u(float f) {
    uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float u2f(uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// IEEE half decoded from its fields (independent of the library's bit tricks).
double half_ref(uint16_t h) {
    const int sign = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = std::ldexp((double)m, -24);
    else if (e == 31)
        v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
    else
        v = std::ldexp((double)(1024 + m), e - 25);
    return sign ? -v : v;
}

uint16_t f16_hw(float f) { // compiler's _Float16 conversion (round to nearest even)
    _Float16 h = (_Float16)f;
    uint16_t u;
    std::memcpy(&u, &h, 2);
    return u;
}

std::vector<float> randv(std::mt19937 & rng, int64_t n, float scale = 1.0f) {
    std::normal_distribution<float> nd(0.0f, scale);
    std::vector<float> v(n);
    for (auto & x : v)
        x = nd(rng);
    return v;
}

} // namespace

TEST_CASE("type traits") {
    CHECK(std::string(ggml_type_name(GGML_TYPE_F32)) == "f32");
    CHECK(std::string(ggml_type_name(GGML_TYPE_F16)) == "f16");
    CHECK(std::string(ggml_type_name(GGML_TYPE_Q8_0)) == "q8_0");
    CHECK(std::string(ggml_type_name(GGML_TYPE_Q8_1)) == "q8_1");
    CHECK(std::string(ggml_type_name(GGML_TYPE_I32)) == "i32");
    CHECK(std::string(ggml_type_name((ggml_type)12)) == "q4_K");
    CHECK(std::string(ggml_type_name((ggml_type)4)) == "unknown");
    CHECK(std::string(ggml_type_name((ggml_type)1000)) == "unknown");
    CHECK(ggml_type_size(GGML_TYPE_Q8_0) == 34);
    CHECK(ggml_type_size(GGML_TYPE_Q8_1) == 36);
    CHECK(ggml_blck_size(GGML_TYPE_Q8_0) == 32);
    CHECK(ggml_row_size(GGML_TYPE_Q8_0, 4096) == 4352);
    CHECK(ggml_row_size(GGML_TYPE_F16, 7) == 14);
    CHECK(ggml_row_size((ggml_type)12, 512) == 288); // q4_K geometry for loaders
    CHECK(ggml_is_quantized(GGML_TYPE_Q8_0));
    CHECK(!ggml_is_quantized(GGML_TYPE_F16));
    for (int t : {0, 1, 2, 3, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 26})
        CHECK(ggml_type_is_valid(t));
    for (int t : {-1, 4, 5, 16, 20, 23, 30, 38, 39, 1000})
        CHECK(!ggml_type_is_valid(t));
    CHECK((ggml_get_type_traits(GGML_TYPE_Q8_0)->to_float != nullptr));
    CHECK((ggml_get_type_traits(GGML_TYPE_Q8_1)->from_float_ref != nullptr));
}

TEST_CASE("f16 -> f32 is exact for all 65536 halves") {
    std::vector<uint16_t> all(65536);
    for (int i = 0; i < 65536; ++i)
        all[i] = (uint16_t)i;
    std::vector<float> row(65536);
    ggml_fp16_to_fp32_row(all.data(), row.data(), 65536);
    int bad = 0;
    for (int i = 0; i < 65536; ++i) {
        const double ref = half_ref((uint16_t)i);
        const float f = ggml_fp16_to_fp32((uint16_t)i);
        if (std::isnan(ref)) {
            bad += !std::isnan(f) || !std::isnan(row[i]);
        } else {
            bad += f2u(f) != f2u((float)ref) || f2u(row[i]) != f2u((float)ref); // -0 keeps its sign
        }
    }
    CHECK(bad == 0);
}

TEST_CASE("f32 -> f16 round trip and round to nearest even") {
    int bad = 0;
    for (int i = 0; i < 65536; ++i) {
        const uint16_t h = (uint16_t)i;
        const float f = ggml_fp16_to_fp32(h);
        const uint16_t back = ggml_fp32_to_fp16(f);
        if (std::isnan(f)) {
            bad += (back & 0x7c00) != 0x7c00 || (back & 0x3ff) == 0; // still a NaN
        } else {
            bad += back != h;
        }
    }
    CHECK(bad == 0);

    // exact midpoints between neighbouring finite halves: ties go to the even mantissa
    int ties = 0;
    for (int i = 0; i < 0x7bff; ++i) {
        const double lo = half_ref((uint16_t)i), hi = half_ref((uint16_t)(i + 1));
        const float mid = (float)((lo + hi) / 2); // exact in float: halves have 11 significant bits
        REQUIRE((double)mid == (lo + hi) / 2);
        const uint16_t want = (i % 2 == 0) ? (uint16_t)i : (uint16_t)(i + 1);
        ties += ggml_fp32_to_fp16(mid) != want;
        ties += ggml_fp32_to_fp16(-mid) != (uint16_t)(want | 0x8000);
    }
    CHECK(ties == 0);
    // overflow: 65520 (the midpoint to the next power) rounds to inf, just below stays max
    CHECK(ggml_fp32_to_fp16(65520.0f) == 0x7c00);
    CHECK(ggml_fp32_to_fp16(65519.996f) == 0x7bff);
    CHECK(ggml_fp32_to_fp16(INFINITY) == 0x7c00);
    CHECK(ggml_fp32_to_fp16(-INFINITY) == 0xfc00);
    const uint16_t hn = ggml_fp32_to_fp16(NAN);
    CHECK(((hn & 0x7c00) == 0x7c00 && (hn & 0x3ff) != 0));

    // random float bit patterns vs the compiler's _Float16 conversion; row (SIMD) vs scalar
    std::mt19937 rng(1234);
    const int n = 1 << 20;
    std::vector<float> xs(n);
    for (auto & x : xs) {
        do {
            x = u2f((uint32_t)rng());
        } while (std::isnan(x));
        if (rng() % 2) x = std::ldexp(x, -(int)(std::ilogb(x)) + (int)(rng() % 40) - 25); // bring near the f16 range
    }
    std::vector<uint16_t> row(n);
    ggml_fp32_to_fp16_row(xs.data(), row.data(), n);
    int mism = 0, rmism = 0;
    for (int i = 0; i < n; ++i) {
        const uint16_t h = ggml_fp32_to_fp16(xs[i]);
        mism += h != f16_hw(xs[i]);
        rmism += h != row[i];
    }
    CHECK(mism == 0);
    CHECK(rmism == 0);
}

TEST_CASE("q8_0 / q8_1 golden bytes (numpy reference)") {
    float x[64];
    for (int i = 0; i < 64; ++i)
        x[i] = u2f(k_golden_x_bits[i]);
    // the inputs are what the formula gives here too (sanity check of the script)
    for (int i = 0; i < 64; ++i)
        CHECK(x[i] == (float)(std::sin(i * 0.37) * 3.0 + (i % 7) * 0.25));

    block_q8_0 q0[2];
    quantize_row_q8_0_ref(x, q0, 64);
    CHECK(std::memcmp(q0, k_golden_q8_0, sizeof(q0)) == 0);
    block_q8_1 q1[2], q1s[2];
    quantize_row_q8_1_ref(x, q1, 64);
    CHECK(std::memcmp(q1, k_golden_q8_1, sizeof(q1)) == 0);
    quantize_row_q8_1(x, q1s, 64);
    CHECK(std::memcmp(q1s, k_golden_q8_1, sizeof(q1s)) == 0);
    // traits point at the same code
    block_q8_0 q0t[2];
    ggml_get_type_traits(GGML_TYPE_Q8_0)->from_float_ref(x, q0t, 64);
    CHECK(std::memcmp(q0t, k_golden_q8_0, sizeof(q0t)) == 0);
}

TEST_CASE("q8 rounding is half away from zero; zero blocks") {
    // amax 127 -> d = 1, id = 1: x*id is exact, so the ties below are real ties
    float x[32] = {127.0f, 2.5f, -2.5f, 0.5f, -0.5f, 1.5f, -1.5f, 0.49999997f, 126.5f, -126.5f};
    const int8_t want[10] = {127, 3, -3, 1, -1, 2, -2, 0, 127, -127};
    block_q8_0 b0;
    block_q8_1 b1, b1s;
    quantize_row_q8_0_ref(x, &b0, 32);
    quantize_row_q8_1_ref(x, &b1, 32);
    quantize_row_q8_1(x, &b1s, 32);
    CHECK(ggml_fp16_to_fp32(b0.d) == 1.0f);
    for (int i = 0; i < 10; ++i) {
        CHECK(b0.qs[i] == want[i]);
        CHECK(b1.qs[i] == want[i]);
        CHECK(b1s.qs[i] == want[i]);
    }
    CHECK(ggml_fp16_to_fp32(b1.s) == 127.0f + 0 + 0 + 0 + 0 + 0); // 127+3-3+1-1+2-2+0+127-127
    CHECK(std::memcmp(&b1, &b1s, sizeof(b1)) == 0);

    float z[32] = {};
    quantize_row_q8_0_ref(z, &b0, 32);
    quantize_row_q8_1(z, &b1s, 32);
    CHECK(b0.d == 0);
    CHECK(b1s.d == 0);
    CHECK(b1s.s == 0);
    for (int i = 0; i < 32; ++i)
        CHECK((b0.qs[i] == 0 && b1s.qs[i] == 0));
}

TEST_CASE("q8 round trip error <= d/2") {
    std::mt19937 rng(7);
    for (float scale : {1e-3f, 1.0f, 300.0f}) {
        const int64_t n = 32 * 64;
        auto x = randv(rng, n, scale);
        std::vector<block_q8_0> q0(n / 32);
        std::vector<block_q8_1> q1(n / 32);
        std::vector<float> y0(n), y1(n);
        quantize_row_q8_0_ref(x.data(), q0.data(), n);
        quantize_row_q8_1_ref(x.data(), q1.data(), n);
        dequantize_row_q8_0(q0.data(), y0.data(), n);
        dequantize_row_q8_1(q1.data(), y1.data(), n);
        int bad = 0;
        for (int64_t b = 0; b < n / 32; ++b) {
            float amax = 0;
            for (int j = 0; j < 32; ++j)
                amax = std::max(amax, std::fabs(x[b * 32 + j]));
            const float d = amax / 127;               // exact d (the stored one is f16-rounded: relative 2^-11)
            const float tol = d / 2 + amax * 1.5e-3f; // f16 d: up to 127 * 2^-11 * d ~ 0.062 d, generous
            int sum = 0;
            for (int j = 0; j < 32; ++j) {
                bad += std::fabs(x[b * 32 + j] - y0[b * 32 + j]) > tol;
                bad += std::fabs(x[b * 32 + j] - y1[b * 32 + j]) > tol;
                sum += q1[b].qs[j];
            }
            bad += ggml_fp16_to_fp32(q1[b].s) != ggml_fp16_to_fp32(ggml_fp32_to_fp16(sum * (amax / 127)));
        }
        CHECK(bad == 0);
    }
}

TEST_CASE("SIMD quantize_row_q8_1 is bit-identical to the reference") {
    std::mt19937 rng(99);
    int bad = 0;
    for (int64_t nb = 1; nb <= 200; nb += (nb < 20 ? 1 : 13)) {
        const int64_t n = nb * 32;
        auto x = randv(rng, n, std::ldexp(1.0f, (int)(rng() % 30) - 15));
        for (int64_t i = 0; i < n; i += 97)
            x[i] = std::round(x[i] * 4) / 4;                         // some exact ties
        if (nb > 3) std::fill(x.begin() + 32, x.begin() + 64, 0.0f); // a zero block
        std::vector<block_q8_1> a(nb), b(nb);
        quantize_row_q8_1_ref(x.data(), a.data(), n);
        quantize_row_q8_1(x.data(), b.data(), n);
        bad += std::memcmp(a.data(), b.data(), nb * sizeof(block_q8_1)) != 0;
    }
    CHECK(bad == 0);
}

TEST_CASE("vec_dot_q8_0_q8_1 equals the integer reference") {
    std::mt19937 rng(5);
    for (int64_t nb : {1, 2, 3, 7, 128, 129}) {
        const int64_t n = nb * 32;
        auto x = randv(rng, n), y = randv(rng, n, 3.0f);
        std::vector<block_q8_0> qx(nb);
        std::vector<block_q8_1> qy(nb);
        quantize_row_q8_0_ref(x.data(), qx.data(), n);
        quantize_row_q8_1_ref(y.data(), qy.data(), n);
        double ref = 0, mag = 0;
        for (int64_t b = 0; b < nb; ++b) {
            int64_t isum = 0, iabs = 0;
            for (int j = 0; j < 32; ++j) {
                isum += qx[b].qs[j] * qy[b].qs[j];
                iabs += std::abs(qx[b].qs[j] * qy[b].qs[j]);
            }
            const double dd = (double)ggml_fp16_to_fp32(qx[b].d) * ggml_fp16_to_fp32(qy[b].d);
            ref += dd * isum;
            mag += dd * iabs;
        }
        float s = NAN;
        ggml_vec_dot_q8_0_q8_1(n, &s, qx.data(), qy.data());
        CAPTURE(nb);
        CHECK(std::fabs(s - ref) <= 1e-5 * mag);
    }
}

TEST_CASE("f32 / f16 dots vs double") {
    std::mt19937 rng(11);
    for (int64_t n : {1, 3, 15, 16, 17, 31, 63, 64, 65, 100, 255, 4096, 4097}) {
        auto x = randv(rng, n), y = randv(rng, n);
        std::vector<ggml_fp16_t> xh(n), yh(n);
        for (int64_t i = 0; i < n; ++i) {
            xh[i] = ggml_fp32_to_fp16(x[i]);
            yh[i] = ggml_fp32_to_fp16(y[i]);
        }
        double r32 = 0, r16 = 0, r16f = 0, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
            const double xr = ggml_fp16_to_fp32(xh[i]), yr = ggml_fp16_to_fp32(yh[i]);
            r32 += (double)x[i] * y[i];
            r16 += xr * yr;
            r16f += xr * y[i];
            mag += std::fabs((double)x[i] * y[i]);
        }
        float s32 = NAN, s16 = NAN, s16f = NAN;
        ggml_vec_dot_f32(n, &s32, x.data(), y.data());
        ggml_vec_dot_f16(n, &s16, xh.data(), yh.data());
        ggml_vec_dot_f16_f32(n, &s16f, xh.data(), y.data());
        CAPTURE(n);
        const double tol = 1e-6 * mag + 1e-30; // float accumulation: ~sqrt(n) * 2^-24 * sum|xy|
        CHECK(std::fabs(s32 - r32) <= tol);
        CHECK(std::fabs(s16 - r16) <= tol * 1.1);
        CHECK(std::fabs(s16f - r16f) <= tol * 1.1);
    }
}

TEST_CASE("tile kernels equal the single dots") {
    std::mt19937 rng(21);
    const int64_t K = 32 * 37; // odd block count, and not a multiple of 16 floats... (1184 = 74*16)
    for (int64_t n : {(int64_t)7, (int64_t)33, K}) {
        const int R = 4, C = 4;
        auto xf = randv(rng, n * R), yf = randv(rng, n * C);
        std::vector<ggml_fp16_t> xh(n * R), yh(n * C);
        ggml_fp32_to_fp16_row(xf.data(), xh.data(), n * R);
        ggml_fp32_to_fp16_row(yf.data(), yh.data(), n * C);
        for (int nr = 1; nr <= R; ++nr) {
            for (int nc = 1; nc <= C; ++nc) {
                float out[4][4], ref;
                // f32
                ggml_cpu_get_tile_dot(GGML_TYPE_F32, false, nr, nc)(n, xf.data(), n * 4, yf.data(), n * 4, &out[0][0],
                                                                    sizeof(out[0]), sizeof(float));
                for (int r = 0; r < nr; ++r)
                    for (int c = 0; c < nc; ++c) {
                        ggml_vec_dot_f32(n, &ref, xf.data() + r * n, yf.data() + c * n);
                        CHECK(out[r][c] == doctest::Approx(ref).epsilon(1e-5));
                    }
                // f16 x f16 and f16 x f32
                ggml_cpu_get_tile_dot(GGML_TYPE_F16, true, nr, nc)(n, xh.data(), n * 2, yh.data(), n * 2, &out[0][0],
                                                                   sizeof(out[0]), sizeof(float));
                for (int r = 0; r < nr; ++r)
                    for (int c = 0; c < nc; ++c) {
                        ggml_vec_dot_f16(n, &ref, xh.data() + r * n, yh.data() + c * n);
                        CHECK(out[r][c] == doctest::Approx(ref).epsilon(1e-5));
                    }
                ggml_cpu_get_tile_dot(GGML_TYPE_F16, false, nr, nc)(n, xh.data(), n * 2, yf.data(), n * 4, &out[0][0],
                                                                    sizeof(out[0]), sizeof(float));
                for (int r = 0; r < nr; ++r)
                    for (int c = 0; c < nc; ++c) {
                        ggml_vec_dot_f16_f32(n, &ref, xh.data() + r * n, yf.data() + c * n);
                        CHECK(out[r][c] == doctest::Approx(ref).epsilon(1e-5));
                    }
            }
        }
    }
    // q8_0 x q8_1
    const int64_t nb = 37;
    auto xf = randv(rng, K * 4), yf = randv(rng, K * 4);
    std::vector<block_q8_0> qx(nb * 4);
    std::vector<block_q8_1> qy(nb * 4);
    quantize_row_q8_0_ref(xf.data(), qx.data(), K * 4);
    quantize_row_q8_1(yf.data(), qy.data(), K * 4);
    for (int nr = 1; nr <= 4; ++nr) {
        for (int nc = 1; nc <= 4; ++nc) {
            float out[4][4], ref;
            ggml_cpu_get_tile_dot(GGML_TYPE_Q8_0, false, nr, nc)(K, qx.data(), nb * sizeof(block_q8_0), qy.data(),
                                                                 nb * sizeof(block_q8_1), &out[0][0], sizeof(out[0]),
                                                                 sizeof(float));
            for (int r = 0; r < nr; ++r)
                for (int c = 0; c < nc; ++c) {
                    ggml_vec_dot_q8_0_q8_1(K, &ref, qx.data() + r * nb, qy.data() + c * nb);
                    CHECK(out[r][c] == doctest::Approx(ref).epsilon(1e-5));
                }
        }
    }
}
