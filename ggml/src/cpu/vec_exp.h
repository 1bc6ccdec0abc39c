// cpu/vec_exp.h - y[i] = exp(y[i] - max) over a row, returning the sum (softmax, attention).
// AVX-512: Cody-Waite range reduction + degree-6 polynomial + scalef, ~1e-7 relative error;
// inputs below -104 (incl. -inf from masks) give 0. AVX2 + FMA: the same on 8 lanes. Other builds: std::exp.
// Also swiglu's silu(x) * y on the same exp.
#pragma once

#include <cmath>
#include <cstdint>

#if defined(__AVX512F__)
#include <immintrin.h>

inline __m512 ggml_v_expf(__m512 x) {
    const __m512 log2e = _mm512_set1_ps(1.44269504088896341f);
    const __m512 ln2_hi = _mm512_set1_ps(0.693359375f);
    const __m512 ln2_lo = _mm512_set1_ps(-2.12194440e-4f);
    x = _mm512_max_ps(_mm512_min_ps(x, _mm512_set1_ps(88.7f)), _mm512_set1_ps(-104.0f));
    const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_fnmadd_ps(n, ln2_hi, x);
    f = _mm512_fnmadd_ps(n, ln2_lo, f);
    // e^f on [-ln2/2, ln2/2]
    __m512 p = _mm512_set1_ps(1.0f / 720);
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 120));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 24));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f / 6));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(0.5f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    p = _mm512_fmadd_ps(p, f, _mm512_set1_ps(1.0f));
    return _mm512_scalef_ps(p, n);
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>

// The AVX-512 ggml_v_expf on 8 lanes: same reduction and polynomial; 2^n applied as two exponent-field
// multiplies (n in [-150, 128] does not fit one normal float's exponent, as scalef's range does).
inline __m256 ggml_v_expf_avx2(__m256 x) {
    const __m256 log2e = _mm256_set1_ps(1.44269504088896341f);
    const __m256 ln2_hi = _mm256_set1_ps(0.693359375f);
    const __m256 ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
    x = _mm256_max_ps(_mm256_min_ps(x, _mm256_set1_ps(88.7f)), _mm256_set1_ps(-104.0f));
    const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, log2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_fnmadd_ps(n, ln2_hi, x);
    f = _mm256_fnmadd_ps(n, ln2_lo, f);
    __m256 p = _mm256_set1_ps(1.0f / 720);
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 120));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 24));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f / 6));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(0.5f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    p = _mm256_fmadd_ps(p, f, _mm256_set1_ps(1.0f));
    const __m256i ni = _mm256_cvtps_epi32(n);    // [-150, 128]
    const __m256i n1 = _mm256_srai_epi32(ni, 1); // [-75, 64]
    const __m256i n2 = _mm256_sub_epi32(ni, n1); // [-75, 64]
    const __m256i bias = _mm256_set1_epi32(127);
    const __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n1, bias), 23));
    const __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(n2, bias), 23));
    return _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
}
#endif

// z[i] = silu(x[i]) * y[i] = x[i] / (1 + exp(-x[i])) * y[i] (swiglu; z may alias x or y)
inline void ggml_vec_swiglu_f32(int64_t n, float * z, const float * x, const float * y) {
    int64_t i = 0;
#if defined(__AVX512F__)
    const __m512 one = _mm512_set1_ps(1.0f);
    for (; i + 16 <= n; i += 16) {
        const __m512 v = _mm512_loadu_ps(x + i);
        const __m512 e = ggml_v_expf(_mm512_sub_ps(_mm512_setzero_ps(), v));
        _mm512_storeu_ps(z + i, _mm512_mul_ps(_mm512_div_ps(v, _mm512_add_ps(one, e)), _mm512_loadu_ps(y + i)));
    }
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256 one = _mm256_set1_ps(1.0f);
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        const __m256 e = ggml_v_expf_avx2(_mm256_sub_ps(_mm256_setzero_ps(), v));
        _mm256_storeu_ps(z + i, _mm256_mul_ps(_mm256_div_ps(v, _mm256_add_ps(one, e)), _mm256_loadu_ps(y + i)));
    }
#endif
    for (; i < n; ++i)
        z[i] = x[i] / (1.0f + std::exp(-x[i])) * y[i];
}

inline float ggml_vec_exp_sum(int64_t n, float * y, float max) {
    int64_t i = 0;
    double sum = 0.0;
#if defined(__AVX512F__)
    const __m512 vmax = _mm512_set1_ps(max);
    __m512 acc = _mm512_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        const __m512 e = ggml_v_expf(_mm512_sub_ps(_mm512_loadu_ps(y + i), vmax));
        _mm512_storeu_ps(y + i, e);
        acc = _mm512_add_ps(acc, e);
    }
    sum = _mm512_reduce_add_ps(acc);
#elif defined(__AVX2__) && defined(__FMA__)
    const __m256 vmax = _mm256_set1_ps(max);
    __m256 acc = _mm256_setzero_ps();
    for (; i + 8 <= n; i += 8) {
        const __m256 e = ggml_v_expf_avx2(_mm256_sub_ps(_mm256_loadu_ps(y + i), vmax));
        _mm256_storeu_ps(y + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, acc);
    for (float l : lanes)
        sum += l;
#endif
    for (; i < n; ++i) {
        y[i] = std::exp(y[i] - max);
        sum += y[i];
    }
    return (float) sum;
}
