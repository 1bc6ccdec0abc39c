// cpu/vec_exp.h - y[i] = exp(y[i] - max) over a row, returning the sum (softmax, attention).
// AVX-512: Cody-Waite range reduction + degree-6 polynomial + scalef, ~1e-7 relative error;
// inputs below -104 (incl. -inf from masks) give 0. Other builds: std::exp.
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
#endif
    for (; i < n; ++i) {
        y[i] = std::exp(y[i] - max);
        sum += y[i];
    }
    return (float) sum;
}
