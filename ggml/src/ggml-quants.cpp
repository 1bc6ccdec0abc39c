// ggml-quants.cpp - the type traits table, f16 <-> f32 conversion and the reference q8_0 / q8_1
// quantizers. Everything here is plain C++ and bit-identical to ggml's reference code
// (ggml-quants.c), so blocks written here load in ggml and the other way round.
#include "ggml-impl.h"

#include <cmath>
#include <cstring>

#if defined(__F16C__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// ---------------------------------------------------------------------------------------------
// f16 <-> f32

float ggml_fp16_to_fp32(ggml_fp16_t h) { return ggml_compute_fp16_to_fp32(h); }

ggml_fp16_t ggml_fp32_to_fp16(float f) { return ggml_compute_fp32_to_fp16(f); }

void ggml_fp16_to_fp32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        _mm512_storeu_ps(y + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(x + i))));
    }
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    }
#endif
    for (; i < n; ++i) {
        y[i] = ggml_compute_fp16_to_fp32(x[i]);
    }
}

// The hardware conversion rounds to nearest even like the scalar one; the two differ only in
// the payload bits of NaNs (both give a NaN).
void ggml_fp32_to_fp16_row(const float * x, ggml_fp16_t * y, int64_t n) {
    int64_t i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) {
        _mm256_storeu_si256((__m256i *)(y + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    }
#elif defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT));
    }
#endif
    for (; i < n; ++i) {
        y[i] = ggml_compute_fp32_to_fp16(x[i]);
    }
}

// ---------------------------------------------------------------------------------------------
// q8_0 / q8_1 reference code (ggml-quants.c: quantize_row_q8_0_ref, quantize_row_q8_1_ref)

void quantize_row_q8_0_ref(const float * x, block_q8_0 * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; ++i) {
        float amax = 0.0f; // absolute max
        for (int j = 0; j < QK8_0; ++j) {
            const float v = std::fabs(x[i * QK8_0 + j]);
            amax = amax > v ? amax : v; // ggml's MAX()
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = ggml_compute_fp32_to_fp16(d);
        for (int j = 0; j < QK8_0; ++j) {
            const float x0 = x[i * QK8_0 + j] * id;
            y[i].qs[j] = (int8_t)std::roundf(x0);
        }
    }
}

void quantize_row_q8_1_ref(const float * x, block_q8_1 * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; ++i) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; ++j) {
            const float v = std::fabs(x[i * QK8_1 + j]);
            amax = amax > v ? amax : v; // ggml's MAX()
        }
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        y[i].d = ggml_compute_fp32_to_fp16(d);
        int sum = 0;
        for (int j = 0; j < QK8_1 / 2; ++j) {
            const float v0 = x[i * QK8_1 + j] * id;
            const float v1 = x[i * QK8_1 + QK8_1 / 2 + j] * id;
            y[i].qs[j] = (int8_t)std::roundf(v0);
            y[i].qs[QK8_1 / 2 + j] = (int8_t)std::roundf(v1);
            sum += y[i].qs[j];
            sum += y[i].qs[QK8_1 / 2 + j];
        }
        y[i].s = ggml_compute_fp32_to_fp16(sum * d);
    }
}

void dequantize_row_q8_0(const block_q8_0 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_0 == 0);
    const int64_t nb = k / QK8_0;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_0; ++j) {
            y[i * QK8_0 + j] = x[i].qs[j] * d;
        }
    }
}

void dequantize_row_q8_1(const block_q8_1 * x, float * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    const int64_t nb = k / QK8_1;
    for (int64_t i = 0; i < nb; ++i) {
        const float d = ggml_compute_fp16_to_fp32(x[i].d);
        for (int j = 0; j < QK8_1; ++j) {
            y[i * QK8_1 + j] = x[i].qs[j] * d;
        }
    }
}

// ---------------------------------------------------------------------------------------------
// type traits

static void to_float_f32(const void * x, float * y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }
static void to_float_f16(const void * x, float * y, int64_t n) { ggml_fp16_to_fp32_row((const ggml_fp16_t *)x, y, n); }
static void to_float_q8_0(const void * x, float * y, int64_t n) { dequantize_row_q8_0((const block_q8_0 *)x, y, n); }
static void to_float_q8_1(const void * x, float * y, int64_t n) { dequantize_row_q8_1((const block_q8_1 *)x, y, n); }

static void from_float_f32(const float * x, void * y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }
static void from_float_f16(const float * x, void * y, int64_t n) {
    for (int64_t i = 0; i < n; ++i) {
        ((ggml_fp16_t *)y)[i] = ggml_compute_fp32_to_fp16(x[i]);
    }
}
static void from_float_q8_0(const float * x, void * y, int64_t n) { quantize_row_q8_0_ref(x, (block_q8_0 *)y, n); }
static void from_float_q8_1(const float * x, void * y, int64_t n) { quantize_row_q8_1_ref(x, (block_q8_1 *)y, n); }

// Legacy quants (ggml-quants-legacy.cpp) and K-quants (ggml-quants-k.cpp).
#define QUANT_WRAPPERS(t)                                                                                              \
    static void to_float_##t(const void * x, float * y, int64_t n) { dequantize_row_##t((const block_##t *)x, y, n); } \
    static void from_float_##t(const float * x, void * y, int64_t n) { quantize_row_##t##_ref(x, (block_##t *)y, n); }
QUANT_WRAPPERS(q4_0)
QUANT_WRAPPERS(q4_1)
QUANT_WRAPPERS(q5_0)
QUANT_WRAPPERS(q5_1)
QUANT_WRAPPERS(q2_K)
QUANT_WRAPPERS(q3_K)
QUANT_WRAPPERS(q4_K)
QUANT_WRAPPERS(q5_K)
QUANT_WRAPPERS(q6_K)
QUANT_WRAPPERS(q8_K)
#undef QUANT_WRAPPERS

// Types this library does not implement keep their ggml name and block geometry, so a loader
// can size their data and name them in its error message.
#define UNSUPPORTED(name, blck, size)                                                                                  \
    { name, blck, size, true, false, nullptr, nullptr }

static const ggml_type_traits k_type_traits[GGML_TYPE_COUNT] = {
    /*  0 */ {"f32", 1, sizeof(float), false, true, to_float_f32, from_float_f32},
    /*  1 */ {"f16", 1, sizeof(ggml_fp16_t), false, true, to_float_f16, from_float_f16},
    /*  2 */ {"q4_0", QK4_0, sizeof(block_q4_0), true, true, to_float_q4_0, from_float_q4_0},
    /*  3 */ {"q4_1", QK4_1, sizeof(block_q4_1), true, true, to_float_q4_1, from_float_q4_1},
    /*  4 */ {}, // removed from ggml (q4_2)
    /*  5 */ {}, // removed from ggml (q4_3)
    /*  6 */ {"q5_0", QK5_0, sizeof(block_q5_0), true, true, to_float_q5_0, from_float_q5_0},
    /*  7 */ {"q5_1", QK5_1, sizeof(block_q5_1), true, true, to_float_q5_1, from_float_q5_1},
    /*  8 */ {"q8_0", QK8_0, sizeof(block_q8_0), true, true, to_float_q8_0, from_float_q8_0},
    /*  9 */ {"q8_1", QK8_1, sizeof(block_q8_1), true, true, to_float_q8_1, from_float_q8_1},
    /* 10 */ {"q2_K", QK_K, sizeof(block_q2_K), true, true, to_float_q2_K, from_float_q2_K},
    /* 11 */ {"q3_K", QK_K, sizeof(block_q3_K), true, true, to_float_q3_K, from_float_q3_K},
    /* 12 */ {"q4_K", QK_K, sizeof(block_q4_K), true, true, to_float_q4_K, from_float_q4_K},
    /* 13 */ {"q5_K", QK_K, sizeof(block_q5_K), true, true, to_float_q5_K, from_float_q5_K},
    /* 14 */ {"q6_K", QK_K, sizeof(block_q6_K), true, true, to_float_q6_K, from_float_q6_K},
    /* 15 */ {"q8_K", QK_K, sizeof(block_q8_K), true, true, to_float_q8_K, from_float_q8_K},
    /* 16 */ UNSUPPORTED("iq2_xxs", 256, 66),
    /* 17 */ UNSUPPORTED("iq2_xs", 256, 74),
    /* 18 */ UNSUPPORTED("iq3_xxs", 256, 98),
    /* 19 */ UNSUPPORTED("iq1_s", 256, 50),
    /* 20 */ UNSUPPORTED("iq4_nl", 32, 18),
    /* 21 */ UNSUPPORTED("iq3_s", 256, 110),
    /* 22 */ UNSUPPORTED("iq2_s", 256, 82),
    /* 23 */ UNSUPPORTED("iq4_xs", 256, 136),
    /* 24 */ {"i8", 1, 1, false, false, nullptr, nullptr},
    /* 25 */ {"i16", 1, 2, false, false, nullptr, nullptr},
    /* 26 */ {"i32", 1, sizeof(int32_t), false, true, nullptr, nullptr},
    /* 27 */ {"i64", 1, 8, false, false, nullptr, nullptr},
    /* 28 */ {"f64", 1, 8, false, false, nullptr, nullptr},
    /* 29 */ UNSUPPORTED("iq1_m", 256, 56),
    /* 30 */ {"bf16", 1, 2, false, false, nullptr, nullptr},
    /* 31 */ {}, // removed (q4_0_4_4)
    /* 32 */ {}, // removed (q4_0_4_8)
    /* 33 */ {}, // removed (q4_0_8_8)
    /* 34 */ UNSUPPORTED("tq1_0", 256, 54),
    /* 35 */ UNSUPPORTED("tq2_0", 256, 66),
    /* 36 */ {}, // removed (iq4_nl_4_4)
    /* 37 */ {}, // removed (iq4_nl_4_8)
    /* 38 */ {}, // removed (iq4_nl_8_8)
};
#undef UNSUPPORTED

const ggml_type_traits * ggml_get_type_traits(ggml_type type) {
    GGML_ASSERT((int)type >= 0 && (int)type < GGML_TYPE_COUNT);
    return &k_type_traits[type];
}

bool ggml_type_is_valid(int32_t type) { return type >= 0 && type < GGML_TYPE_COUNT && k_type_traits[type].supported; }

const char * ggml_type_name(ggml_type type) {
    if ((int)type < 0 || (int)type >= GGML_TYPE_COUNT || !k_type_traits[type].type_name) { return "unknown"; }
    return k_type_traits[type].type_name;
}

int64_t ggml_blck_size(ggml_type type) { return ggml_get_type_traits(type)->blck_size; }

size_t ggml_type_size(ggml_type type) { return ggml_get_type_traits(type)->type_size; }

size_t ggml_row_size(ggml_type type, int64_t ne) {
    const ggml_type_traits * tt = ggml_get_type_traits(type);
    GGML_ASSERT(tt->blck_size > 0 && ne % tt->blck_size == 0);
    return tt->type_size * (size_t)(ne / tt->blck_size);
}

bool ggml_is_quantized(ggml_type type) { return ggml_get_type_traits(type)->is_quantized; }
