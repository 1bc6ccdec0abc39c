// ggml-quants-legacy.cpp - reference quantize / dequantize of ggml's 32-weight "legacy" quants
// (q4_0, q4_1, q5_0, q5_1), bit-identical to ggml-quants.c's quantize_row_*_ref and
// dequantize_row_*: same float operations in the same order, so a file quantized here equals one
// quantized by llama.cpp's quantize (without an importance matrix), byte for byte.
//
// Layout of a block (see ggml.h): weight j < 16 sits in the low nibble of qs[j], weight j >= 16 in
// the high nibble of qs[j - 16]; q5's 5th bit of weight j is bit j of the little-endian uint32 qh.
//
// Float contraction (a*b + c into one fma) would change roundings (q4_1/q5_1: x*d + m): ggml's
// reference code is built for baseline x86-64 (no FMA), so it stays off here, as in
// ggml-quants-k.cpp.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ggml-impl.h"

#include <cfloat>
#include <cmath>
#include <cstring>

namespace {

// ggml's MIN on an int8_t cast: the cast truncates toward zero (x0 + 8.5f >= 0 here).
inline uint8_t min_u8(int a, int b) { return (uint8_t)(a < b ? a : b); }

// Absolute max of a block and the signed value that has it (the first one on ties).
inline float signed_absmax(const float * x, int n) {
    float amax = 0.0f;
    float max = 0.0f;
    for (int j = 0; j < n; ++j) {
        const float v = x[j];
        if (amax < std::fabs(v)) {
            amax = std::fabs(v);
            max = v;
        }
    }
    return max;
}

inline void min_max(const float * x, int n, float * pmin, float * pmax) {
    float min = FLT_MAX;
    float max = -FLT_MAX;
    for (int j = 0; j < n; ++j) {
        const float v = x[j];
        if (v < min) min = v;
        if (v > max) max = v;
    }
    *pmin = min;
    *pmax = max;
}

} // namespace

// ---------------------------------------------------------------------------------------------
// quantize

void quantize_row_q4_0_ref(const float * x, block_q4_0 * y, int64_t k) {
    constexpr int qk = QK4_0;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float * xb = x + i * qk;
        const float max = signed_absmax(xb, qk);
        const float d = max / -8;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = ggml_compute_fp32_to_fp16(d);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = xb[j] * id;
            const float x1 = xb[qk / 2 + j] * id;
            const uint8_t xi0 = min_u8(15, (int8_t)(x0 + 8.5f));
            const uint8_t xi1 = min_u8(15, (int8_t)(x1 + 8.5f));
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void quantize_row_q4_1_ref(const float * x, block_q4_1 * y, int64_t k) {
    constexpr int qk = QK4_1;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float * xb = x + i * qk;
        float min, max;
        min_max(xb, qk, &min, &max);
        const float d = (max - min) / ((1 << 4) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = ggml_compute_fp32_to_fp16(d);
        y[i].m = ggml_compute_fp32_to_fp16(min);
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[qk / 2 + j] - min) * id;
            const uint8_t xi0 = min_u8(15, (int8_t)(x0 + 0.5f));
            const uint8_t xi1 = min_u8(15, (int8_t)(x1 + 0.5f));
            y[i].qs[j] = (uint8_t)(xi0 | (xi1 << 4));
        }
    }
}

void quantize_row_q5_0_ref(const float * x, block_q5_0 * y, int64_t k) {
    constexpr int qk = QK5_0;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float * xb = x + i * qk;
        const float max = signed_absmax(xb, qk);
        const float d = max / -16;
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = ggml_compute_fp32_to_fp16(d);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = xb[j] * id;
            const float x1 = xb[qk / 2 + j] * id;
            const uint8_t xi0 = min_u8(31, (int8_t)(x0 + 16.5f));
            const uint8_t xi1 = min_u8(31, (int8_t)(x1 + 16.5f));
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        std::memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

void quantize_row_q5_1_ref(const float * x, block_q5_1 * y, int64_t k) {
    constexpr int qk = QK5_1;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float * xb = x + i * qk;
        float min, max;
        min_max(xb, qk, &min, &max);
        const float d = (max - min) / ((1 << 5) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = ggml_compute_fp32_to_fp16(d);
        y[i].m = ggml_compute_fp32_to_fp16(min);
        uint32_t qh = 0;
        for (int j = 0; j < qk / 2; ++j) {
            const float x0 = (xb[j] - min) * id;
            const float x1 = (xb[qk / 2 + j] - min) * id;
            const uint8_t xi0 = (uint8_t)(x0 + 0.5f);
            const uint8_t xi1 = (uint8_t)(x1 + 0.5f);
            y[i].qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
            qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
            qh |= ((xi1 & 0x10u) >> 4) << (j + qk / 2);
        }
        std::memcpy(y[i].qh, &qh, sizeof(qh));
    }
}

// ---------------------------------------------------------------------------------------------
// dequantize

void dequantize_row_q4_0(const block_q4_0 * x, float * y, int64_t k) {
    constexpr int qk = QK4_0;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = (x[i].qs[j] & 0x0F) - 8;
            const int x1 = (x[i].qs[j] >> 4) - 8;
            y[i * qk + j] = x0 * d;
            y[i * qk + j + qk / 2] = x1 * d;
        }
    }
}

void dequantize_row_q4_1(const block_q4_1 * x, float * y, int64_t k) {
    constexpr int qk = QK4_1;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        const float m = ggml_compute_fp16_to_fp32(x[i].m);
        for (int j = 0; j < qk / 2; ++j) {
            const int x0 = x[i].qs[j] & 0x0F;
            const int x1 = x[i].qs[j] >> 4;
            y[i * qk + j] = x0 * d + m;
            y[i * qk + j + qk / 2] = x1 * d + m;
        }
    }
}

void dequantize_row_q5_0(const block_q5_0 * x, float * y, int64_t k) {
    constexpr int qk = QK5_0;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, sizeof(qh));
        for (int j = 0; j < qk / 2; ++j) {
            const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
            const uint8_t xh_1 = (qh >> (j + 12)) & 0x10;
            const int32_t x0 = ((x[i].qs[j] & 0x0F) | xh_0) - 16;
            const int32_t x1 = ((x[i].qs[j] >> 4) | xh_1) - 16;
            y[i * qk + j] = x0 * d;
            y[i * qk + j + qk / 2] = x1 * d;
        }
    }
}

void dequantize_row_q5_1(const block_q5_1 * x, float * y, int64_t k) {
    constexpr int qk = QK5_1;
    GGML_ASSERT(k % qk == 0);
    const int64_t nb = k / qk;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        const float m = ggml_compute_fp16_to_fp32(x[i].m);
        uint32_t qh;
        std::memcpy(&qh, x[i].qh, sizeof(qh));
        for (int j = 0; j < qk / 2; ++j) {
            const uint8_t xh_0 = ((qh >> (j + 0)) << 4) & 0x10;
            const uint8_t xh_1 = (qh >> (j + 12)) & 0x10;
            const int x0 = (x[i].qs[j] & 0x0F) | xh_0;
            const int x1 = (x[i].qs[j] >> 4) | xh_1;
            y[i * qk + j] = x0 * d + m;
            y[i * qk + j + qk / 2] = x1 * d + m;
        }
    }
}
