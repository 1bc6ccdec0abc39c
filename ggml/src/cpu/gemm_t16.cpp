// cpu/gemm_t16.cpp - f32 GEMM for float weights on 16-row transposed panels; see gemm_t16.h.
//
// The panel xT[k][m] holds 16 weight rows side by side, so one zmm load gives x[m][k] for all 16
// rows and an FMA with y[n][k] broadcast from memory accumulates 16 outputs of column n at once:
// no horizontal reductions (the cost that dominates the dot-product tiles when K is small, as
// in attention's K = head_dim), and the accumulator of column n is a contiguous 16-float run of dst.
#include "cpu/gemm_t16.h"

#include "ggml-impl.h"

#include <algorithm>
#include <cstring>

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#include <immintrin.h>
#endif

// GCC 12 warns about the _mm*_undefined_* placeholders inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)

bool ggml_cpu_gemm_t16_available() { return true; }

namespace {

// 16 x 16 f32 transpose in registers: r[i] lane j -> r[j] lane i.
inline void transpose16(__m512 * r) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i]), _mm512_castps_pd(t[i + 2])));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(_mm512_castps_pd(t[i + 1]), _mm512_castps_pd(t[i + 3])));
    }
    // r[4a + b] now holds, in 128-bit lane q, elements (row 4q'.., col ..): finish with lane shuffles
    for (int i = 0; i < 4; ++i) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xDD);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xDD);
    }
    for (int i = 0; i < 4; ++i) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xDD);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xDD);
    }
}

inline __m512 load_row16(const char * p, ggml_type type, __mmask16 m) {
    if (type == GGML_TYPE_F16) return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
    return _mm512_maskz_loadu_ps(m, p);
}

// NC columns: acc[c] += xT[k] * y_c[k] over k; then acc[c] -> dst column c (mr rows).
template <int NC>
void kernel(int64_t K, const float * xT, const float * y, size_t by, __mmask16 mask, char * dst, size_t d1) {
    __m512 acc[NC];
    const float * yc[NC];
    for (int c = 0; c < NC; ++c) {
        acc[c] = _mm512_setzero_ps();
        yc[c] = (const float *)((const char *)y + c * by);
    }
    for (int64_t k = 0; k < K; ++k) {
        const __m512 xv = _mm512_load_ps(xT + k * 16);
        for (int c = 0; c < NC; ++c)
            acc[c] = _mm512_fmadd_ps(xv, _mm512_set1_ps(yc[c][k]), acc[c]);
    }
    for (int c = 0; c < NC; ++c)
        _mm512_mask_storeu_ps(dst + c * d1, mask, acc[c]);
}

} // namespace

void ggml_cpu_pack_t16(const void * x, ggml_type type, size_t bx, int mr, int64_t K, float * xT) {
    GGML_ASSERT(type == GGML_TYPE_F16 || type == GGML_TYPE_F32);
    GGML_ASSERT(mr >= 1 && mr <= 16);
    const size_t es = ggml_type_size(type);
    for (int64_t k0 = 0; k0 < K; k0 += 16) {
        const int kn = (int)std::min<int64_t>(16, K - k0);
        const __mmask16 km = (__mmask16)((1u << kn) - 1);
        __m512 r[16];
        for (int m = 0; m < 16; ++m)
            r[m] = m < mr ? load_row16((const char *)x + m * bx + k0 * es, type, km) : _mm512_setzero_ps();
        transpose16(r);
        for (int k = 0; k < kn; ++k)
            _mm512_store_ps(xT + (k0 + k) * 16, r[k]);
    }
}

void ggml_cpu_gemm_t16(int64_t K, const float * xT, const float * y, size_t by, int64_t nc, int mr, float * dst,
                       size_t d1) {
    constexpr int NC = 8;
    const __mmask16 mask = (__mmask16)((1u << mr) - 1);
    int64_t c = 0;
    for (; c + NC <= nc; c += NC)
        kernel<NC>(K, xT, (const float *)((const char *)y + c * by), by, mask, (char *)dst + c * d1, d1);
    const char * yt = (const char *)y + c * by;
    char * dt = (char *)dst + c * d1;
    switch (nc - c) {
        case 7:
            kernel<7>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        case 6:
            kernel<6>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        case 5:
            kernel<5>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        case 4:
            kernel<4>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        case 3:
            kernel<3>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        case 2:
            kernel<2>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        case 1:
            kernel<1>(K, xT, (const float *)yt, by, mask, dt, d1);
            break;
        default:
            break;
    }
}

#else

bool ggml_cpu_gemm_t16_available() { return false; }
void ggml_cpu_pack_t16(const void *, ggml_type, size_t, int, int64_t, float *) {
    GGML_ABORT("ggml_cpu_pack_t16: built without AVX-512");
}
void ggml_cpu_gemm_t16(int64_t, const float *, const float *, size_t, int64_t, int, float *, size_t) {
    GGML_ABORT("ggml_cpu_gemm_t16: built without AVX-512");
}

#endif
