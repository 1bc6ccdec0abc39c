// cpu/vec_dot.cpp - SIMD dot products and the q8_1 activation quantizer, picked at build time:
// AVX-512 (F/BW/VL, + VNNI for the int8 dots), AVX2 (+ F16C, AVX-VNNI) or plain C++.
//
// int8 dots use vpdpbusd (u8 x s8). The tile kernels use the offset trick: x + 128 is unsigned,
// and dot(x + 128, y) - 128 * sum(y) = dot(x, y) exactly, with 128 * sum(y) computed once per
// column and reused by every row of the tile. The single-block AVX2 path uses the sign trick
// (|x| . sign(y, x)).
#include "cpu/vec_dot.h"

#include "cpu/quants.h"

#include "cpu/ops.h"
#include "ggml-impl.h"

#include <cmath>
#include <cstring>
#include <type_traits>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// GCC 12 warns about the _mm*_undefined_* placeholders inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define GGML_CPU_AVX512 1
#endif
#if defined(GGML_CPU_AVX512) && defined(__AVX512VNNI__)
#define GGML_CPU_AVX512_VNNI 1
#endif

const char * ggml_cpu_simd_name() {
#if defined(GGML_CPU_AVX512_VNNI)
    return "avx512-vnni";
#elif defined(GGML_CPU_AVX512)
    return "avx512";
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
    return "avx2";
#else
    return "scalar";
#endif
}

static inline float fp16(ggml_fp16_t h) { return ggml_compute_fp16_to_fp32(h); }

// Software prefetch for the streaming dots: while a tile reads rows r..r+R-1 at some column, it
// prefetches the same column of the rows GGML_PREFETCH_ROWS further (two 4-row tiles ahead in
// mul_mat's row loop), so each cache line is requested once and well ahead (as vec_dot_q4_q5.cpp;
// measurements in docs/cpu-notes.md). 0: off. Decode tiles of one column read f16 and q8_0 rows one after the other
// instead, without it (the hardware prefetcher streams that run better on the Zen 5 VM: docs/cpu-notes.md, "f16 decode
// rows one after the other").
#ifndef GGML_PREFETCH_ROWS
#define GGML_PREFETCH_ROWS 8
#endif

#if defined(__AVX2__)
static inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

// =============================================================================================
// AVX-512
#if defined(GGML_CPU_AVX512)

// 16 floats from f32 or f16, optionally masked (tail).
static inline __m512 load16(const float * p) { return _mm512_loadu_ps(p); }
static inline __m512 load16(const ggml_fp16_t * p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }
static inline __m512 load16(const float * p, __mmask16 m) { return _mm512_maskz_loadu_ps(m, p); }
static inline __m512 load16(const ggml_fp16_t * p, __mmask16 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, p));
}

// Horizontal sums of 16 accumulators v[r * 4 + c] at once (a transposing add tree, 30 shuffles
// and adds instead of 16 separate reductions): lane c * 4 + r of the result = sum of v[r * 4 + c].
static inline __m512 reduce_4x4(const __m512 * v) {
    __m512 w[8], x[4];
    for (int j = 0; j < 8; ++j) { // 16 -> 8: lanes 0-7 partials of v[2j], 8-15 of v[2j+1]
        w[j] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * j], v[2 * j + 1], 0xEE));
    }
    for (int j = 0; j < 4; ++j) { // 8 -> 4: 128-bit lane q holds 4 partials of v[4j + q]
        x[j] = _mm512_add_ps(_mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], 0x88),
                             _mm512_shuffle_f32x4(w[2 * j], w[2 * j + 1], 0xDD));
    }
    const __m512 y0 = _mm512_add_ps(_mm512_unpacklo_ps(x[0], x[1]), _mm512_unpackhi_ps(x[0], x[1]));
    const __m512 y1 = _mm512_add_ps(_mm512_unpacklo_ps(x[2], x[3]), _mm512_unpackhi_ps(x[2], x[3]));
    const __m512d lo = _mm512_unpacklo_pd(_mm512_castps_pd(y0), _mm512_castps_pd(y1));
    const __m512d hi = _mm512_unpackhi_pd(_mm512_castps_pd(y0), _mm512_castps_pd(y1));
    return _mm512_add_ps(_mm512_castpd_ps(lo), _mm512_castpd_ps(hi)); // lane q * 4 + j: v[4j + q]
}

// z from reduce_4x4 -> s[r * bs_r + c * bs_c] (bytes).
static inline void store_tile_4x4(__m512 z, float * s, size_t bs_r, size_t bs_c) {
    if (bs_r == sizeof(float)) { // the 4 rows of a column are contiguous
        _mm_storeu_ps((float *)((char *)s + 0 * bs_c), _mm512_extractf32x4_ps(z, 0));
        _mm_storeu_ps((float *)((char *)s + 1 * bs_c), _mm512_extractf32x4_ps(z, 1));
        _mm_storeu_ps((float *)((char *)s + 2 * bs_c), _mm512_extractf32x4_ps(z, 2));
        _mm_storeu_ps((float *)((char *)s + 3 * bs_c), _mm512_extractf32x4_ps(z, 3));
        return;
    }
    alignas(64) float t[16];
    _mm512_store_ps(t, z);
    for (int c = 0; c < 4; ++c)
        for (int r = 0; r < 4; ++r)
            *(float *)((char *)s + r * bs_r + c * bs_c) = t[c * 4 + r];
}

// Single dots: 4 independent accumulators (64 elements per step) to hide the FMA latency.
template <typename TX, typename TY> static float dot_float(int64_t n, const TX * x, const TY * y) {
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm512_fmadd_ps(load16(x + i + 0), load16(y + i + 0), a0);
        a1 = _mm512_fmadd_ps(load16(x + i + 16), load16(y + i + 16), a1);
        a2 = _mm512_fmadd_ps(load16(x + i + 32), load16(y + i + 32), a2);
        a3 = _mm512_fmadd_ps(load16(x + i + 48), load16(y + i + 48), a3);
    }
    for (; i + 16 <= n; i += 16) {
        a0 = _mm512_fmadd_ps(load16(x + i), load16(y + i), a0);
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        a1 = _mm512_fmadd_ps(load16(x + i, m), load16(y + i, m), a1);
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
}

// R x C float tile: 16 lanes per step, one accumulator per (r, c).
template <typename TX, typename TY, int R, int C>
static void tile_dot_float(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                           size_t bs_c) {
    const TX * x[R];
    const TY * y[C];
    ggml_tile_rows(vx, bx, R, x);
    ggml_tile_rows(vy, by, C, y);
    if constexpr (C == 1 && std::is_same_v<TX, ggml_fp16_t>) {
        // f16 weights against one column (decode): one row after the other, so that a thread's rows are read as one
        // sequential run (Zen 5 VM, TinyLlama f16 tg128, 7 alternating rounds: 13.45 -> 14.46 t/s, 55.5 -> 61.3%
        // of bench's read probe, against this tile's 4 rows with a prefetch 8 rows ahead; q8_0's tile_dot_q8 the
        // same, 27.6 -> 31.5 t/s over 4 rounds; docs/cpu-notes.md)
        for (int r = 0; r < R; ++r)
            *(float *)((char *)s + r * bs_r) = dot_float(n, x[r], y[0]);
        return;
    }
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            acc[r][c] = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512 xv[R];
        for (int r = 0; r < R; ++r) {
#if GGML_PREFETCH_ROWS > 0
            if (C == 1 && (i * sizeof(TX)) % 64 == 0) { // streaming weights (decode): one prefetch per line
                _mm_prefetch((const char *)(x[r] + i) + GGML_PREFETCH_ROWS * bx, _MM_HINT_T0);
            }
#endif
            xv[r] = load16(x[r] + i);
        }
        for (int c = 0; c < C; ++c) {
            const __m512 yv = load16(y[c] + i);
            for (int r = 0; r < R; ++r)
                acc[r][c] = _mm512_fmadd_ps(xv[r], yv, acc[r][c]);
        }
    }
    if (i < n) {
        const __mmask16 m = (__mmask16)((1u << (n - i)) - 1);
        __m512 xv[R];
        for (int r = 0; r < R; ++r)
            xv[r] = load16(x[r] + i, m);
        for (int c = 0; c < C; ++c) {
            const __m512 yv = load16(y[c] + i, m);
            for (int r = 0; r < R; ++r)
                acc[r][c] = _mm512_fmadd_ps(xv[r], yv, acc[r][c]);
        }
    }
    if constexpr (R == 4 && C == 4) {
        store_tile_4x4(reduce_4x4(&acc[0][0]), s, bs_r, bs_c);
    } else {
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c)
                *(float *)((char *)s + r * bs_r + c * bs_c) = _mm512_reduce_add_ps(acc[r][c]);
    }
}

void ggml_vec_dot_f32(int64_t n, float * s, const float * x, const float * y) { *s = dot_float(n, x, y); }
void ggml_vec_dot_f16_f32(int64_t n, float * s, const ggml_fp16_t * x, const float * y) { *s = dot_float(n, x, y); }
void ggml_vec_dot_f16(int64_t n, float * s, const ggml_fp16_t * x, const ggml_fp16_t * y) { *s = dot_float(n, x, y); }

// q8_1 quantizer, bit-identical to quantize_row_q8_1_ref: same d and id, x*id rounded half away
// from zero (roundf), s = fp16(d * sum(qs)).
void quantize_row_q8_1(const float * x, block_q8_1 * y, int64_t k) {
    GGML_ASSERT(k % QK8_1 == 0);
    const int64_t nb = k / QK8_1;
    const __m512 sign_mask = _mm512_castsi512_ps(_mm512_set1_epi32((int)0x80000000u));
    const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
    for (int64_t i = 0; i < nb; ++i) {
        const __m512 v0 = _mm512_loadu_ps(x + i * QK8_1);
        const __m512 v1 = _mm512_loadu_ps(x + i * QK8_1 + 16);
        const float amax = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_abs_ps(v0), _mm512_abs_ps(v1)));
        const float d = amax / ((1 << 7) - 1);
        const float id = d ? 1.0f / d : 0.0f;
        const __m512 vid = _mm512_set1_ps(id);
        __m512i q[2];
        const __m512 vs[2] = {_mm512_mul_ps(v0, vid), _mm512_mul_ps(v1, vid)};
        for (int h = 0; h < 2; ++h) {
            const __m512 t = _mm512_roundscale_ps(vs[h], _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
            const __m512 frac = _mm512_abs_ps(_mm512_sub_ps(vs[h], t));
            const __mmask16 up = _mm512_cmp_ps_mask(frac, half, _CMP_GE_OQ);
            const __m512 step = _mm512_or_ps(one, _mm512_and_ps(vs[h], sign_mask)); // copysign(1, v)
            q[h] = _mm512_cvttps_epi32(_mm512_mask_add_ps(t, up, t, step));
        }
        _mm_storeu_si128((__m128i *)(y[i].qs + 0), _mm512_cvtepi32_epi8(q[0]));
        _mm_storeu_si128((__m128i *)(y[i].qs + 16), _mm512_cvtepi32_epi8(q[1]));
        const int sum = _mm512_reduce_add_epi32(_mm512_add_epi32(q[0], q[1]));
        y[i].d = ggml_compute_fp32_to_fp16(d);
        y[i].s = ggml_compute_fp32_to_fp16(sum * d);
    }
}

#endif // GGML_CPU_AVX512

// =============================================================================================
// int8 tiles with AVX-512 VNNI: two blocks per 512-bit register (lanes 0-7 block b, 8-15 block b+1).
#if defined(GGML_CPU_AVX512_VNNI)

template <typename B> static inline __m512i load_qs2(const B * b) { // qs of blocks b[0], b[1]
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs)),
                              _mm256_loadu_si256((const __m256i *)b[1].qs), 1);
}
template <typename B> static inline __m512i load_qs1(const B * b) { // qs of b[0]; upper half zero
    return _mm512_zextsi256_si512(_mm256_loadu_si256((const __m256i *)b[0].qs));
}
static inline __m512 scales2(ggml_fp16_t d0, ggml_fp16_t d1) { // 8 x d0, 8 x d1 as f32
    const __m256i h =
        _mm256_inserti128_si256(_mm256_castsi128_si256(_mm_set1_epi16((short)d0)), _mm_set1_epi16((short)d1), 1);
    return _mm512_cvtph_ps(h);
}


template <int R, int C>
static void tile_dot_q8(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                        size_t bs_c) {
    if constexpr (C == 1 && R > 1) { // decode: one row after the other, as the f16 tile (tile_dot_float)
        for (int r = 0; r < R; ++r)
            tile_dot_q8<1, 1>(n, (const char *)vx + r * bx, 0, vy, by, (float *)((char *)s + r * bs_r), bs_r, bs_c);
        return;
    }
    const int64_t nb = n / QK8_0;
    const block_q8_0 * x[R];
    const block_q8_1 * y[C];
    ggml_tile_rows(vx, bx, R, x);
    ggml_tile_rows(vy, by, C, y);
    __m512 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            acc[r][c] = _mm512_setzero_ps();
    const __m512i bias = _mm512_set1_epi8((char)0x80);
    const __m512i ones = _mm512_set1_epi8(1);
    const __m512i zero = _mm512_setzero_si512();

    auto step = [&](int64_t ib, bool two) {
        __m512i xu[R];
        __m512 dx[R];
        for (int r = 0; r < R; ++r) {
#if GGML_PREFETCH_ROWS > 0
            if constexpr (C > 1) { // (one column reads its rows one after the other: the hardware prefetcher's stream)
                _mm_prefetch((const char *)(x[r] + ib) + GGML_PREFETCH_ROWS * bx, _MM_HINT_T0);
                _mm_prefetch((const char *)(x[r] + ib) + GGML_PREFETCH_ROWS * bx + 63, _MM_HINT_T0);
            }
#endif
            const __m512i xv = two ? load_qs2(x[r] + ib) : load_qs1(x[r] + ib);
            xu[r] = _mm512_xor_si512(xv, bias); // x + 128 as u8
            dx[r] = scales2(x[r][ib].d, two ? x[r][ib + 1].d : (ggml_fp16_t)0);
        }
        for (int c = 0; c < C; ++c) {
            const __m512i yv = two ? load_qs2(y[c] + ib) : load_qs1(y[c] + ib);
            // -128 * sum(y) per lane group
            const __m512i init = _mm512_sub_epi32(zero, _mm512_slli_epi32(_mm512_dpbusd_epi32(zero, ones, yv), 7));
            const __m512 dy = scales2(y[c][ib].d, two ? y[c][ib + 1].d : (ggml_fp16_t)0);
            for (int r = 0; r < R; ++r) {
                const __m512i isum = _mm512_dpbusd_epi32(init, xu[r], yv);
                acc[r][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx[r], dy), acc[r][c]);
            }
        }
    };
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2)
        step(ib, true);
    if (ib < nb) step(ib, false);
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            *(float *)((char *)s + r * bs_r + c * bs_c) = _mm512_reduce_add_ps(acc[r][c]);
}

void ggml_vec_dot_q8_0_q8_1(int64_t n, float * s, const block_q8_0 * x, const block_q8_1 * y) {
    GGML_ASSERT(n % QK8_0 == 0);
    tile_dot_q8<1, 1>(n, x, 0, y, 0, s, 0, 0);
}

#endif // GGML_CPU_AVX512_VNNI

// =============================================================================================
// AVX2 (+F16C, FMA; AVX-VNNI if present)
#if !defined(GGML_CPU_AVX512) && defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)

static inline __m256 load8(const float * p) { return _mm256_loadu_ps(p); }
static inline __m256 load8(const ggml_fp16_t * p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }
static inline float x_to_f(float v) { return v; }
static inline float x_to_f(ggml_fp16_t v) { return fp16(v); }

template <typename TX, typename TY> static float dot_float(int64_t n, const TX * x, const TY * y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps(), a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        a0 = _mm256_fmadd_ps(load8(x + i + 0), load8(y + i + 0), a0);
        a1 = _mm256_fmadd_ps(load8(x + i + 8), load8(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(load8(x + i + 16), load8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(load8(x + i + 24), load8(y + i + 24), a3);
    }
    for (; i + 8 <= n; i += 8) {
        a0 = _mm256_fmadd_ps(load8(x + i), load8(y + i), a0);
    }
    float sum = hsum8(_mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
    for (; i < n; ++i) {
        sum += x_to_f(x[i]) * x_to_f(y[i]);
    }
    return sum;
}

void ggml_vec_dot_f32(int64_t n, float * s, const float * x, const float * y) { *s = dot_float(n, x, y); }
void ggml_vec_dot_f16_f32(int64_t n, float * s, const ggml_fp16_t * x, const float * y) { *s = dot_float(n, x, y); }
void ggml_vec_dot_f16(int64_t n, float * s, const ggml_fp16_t * x, const ggml_fp16_t * y) { *s = dot_float(n, x, y); }

#define GGML_CPU_GENERIC_QUANTIZE 1
#endif // AVX2

// int8 dot without AVX-512 VNNI: 256-bit sign trick
#if !defined(GGML_CPU_AVX512_VNNI) && defined(__AVX2__)
void ggml_vec_dot_q8_0_q8_1(int64_t n, float * s, const block_q8_0 * x, const block_q8_1 * y) {
    GGML_ASSERT(n % QK8_0 == 0);
    const int64_t nb = n / QK8_0;
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    auto block = [&](int64_t ib) {
        const __m256i xv = _mm256_loadu_si256((const __m256i *)x[ib].qs);
        const __m256i yv = _mm256_loadu_si256((const __m256i *)y[ib].qs);
        const __m256i ax = _mm256_sign_epi8(xv, xv);
        const __m256i sy = _mm256_sign_epi8(yv, xv);
#if defined(__AVXVNNI__)
        const __m256i p = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), ax, sy);
#else
        const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(ax, sy), _mm256_set1_epi16(1));
#endif
        return _mm256_mul_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(fp16(x[ib].d) * fp16(y[ib].d)));
    };
    int64_t ib = 0;
    for (; ib + 2 <= nb; ib += 2) {
        acc0 = _mm256_add_ps(acc0, block(ib));
        acc1 = _mm256_add_ps(acc1, block(ib + 1));
    }
    if (ib < nb) acc0 = _mm256_add_ps(acc0, block(ib));
    *s = hsum8(_mm256_add_ps(acc0, acc1));
}

#endif

// =============================================================================================
// plain C++
#if !defined(GGML_CPU_AVX512) && !(defined(__AVX2__) && defined(__F16C__) && defined(__FMA__))

void ggml_vec_dot_f32(int64_t n, float * s, const float * x, const float * y) {
    double sum = 0.0; // no SIMD: make the slow path at least accurate
    for (int64_t i = 0; i < n; ++i)
        sum += (double)x[i] * y[i];
    *s = (float)sum;
}
void ggml_vec_dot_f16_f32(int64_t n, float * s, const ggml_fp16_t * x, const float * y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        sum += (double)fp16(x[i]) * y[i];
    *s = (float)sum;
}
void ggml_vec_dot_f16(int64_t n, float * s, const ggml_fp16_t * x, const ggml_fp16_t * y) {
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i)
        sum += (double)fp16(x[i]) * fp16(y[i]);
    *s = (float)sum;
}
#if !defined(__AVX2__)
void ggml_vec_dot_q8_0_q8_1(int64_t n, float * s, const block_q8_0 * x, const block_q8_1 * y) {
    GGML_ASSERT(n % QK8_0 == 0);
    float sum = 0.0f;
    for (int64_t ib = 0; ib < n / QK8_0; ++ib) {
        int isum = 0;
        for (int j = 0; j < QK8_0; ++j)
            isum += x[ib].qs[j] * y[ib].qs[j];
        sum += fp16(x[ib].d) * fp16(y[ib].d) * (float)isum;
    }
    *s = sum;
}
#endif

#define GGML_CPU_GENERIC_QUANTIZE 1
#endif // plain C++

#if defined(GGML_CPU_GENERIC_QUANTIZE)
void quantize_row_q8_1(const float * x, block_q8_1 * y, int64_t k) { quantize_row_q8_1_ref(x, y, k); }
#endif

// =============================================================================================
// tile table

#if defined(GGML_CPU_AVX512)
static const ggml_tile_dot_t k_tile_f32[4][4] = GGML_TILE_TABLE(tile_dot_float, float, float);
static const ggml_tile_dot_t k_tile_f16[4][4] = GGML_TILE_TABLE(tile_dot_float, ggml_fp16_t, ggml_fp16_t);
static const ggml_tile_dot_t k_tile_f16_f32[4][4] = GGML_TILE_TABLE(tile_dot_float, ggml_fp16_t, float);
#endif

#if defined(GGML_CPU_AVX512_VNNI)
ggml_tile_table ggml_cpu_tiles_q8_0 = {
    {tile_dot_q8<1, 1>, tile_dot_q8<1, 2>, tile_dot_q8<1, 3>, tile_dot_q8<1, 4>},
    {tile_dot_q8<2, 1>, tile_dot_q8<2, 2>, tile_dot_q8<2, 3>, tile_dot_q8<2, 4>},
    {tile_dot_q8<3, 1>, tile_dot_q8<3, 2>, tile_dot_q8<3, 3>, tile_dot_q8<3, 4>},
    {tile_dot_q8<4, 1>, tile_dot_q8<4, 2>, tile_dot_q8<4, 3>, tile_dot_q8<4, 4>},
};
#endif

// Without tiles: one single dot per (r, c).
template <typename TX, typename TY, void (*DOT)(int64_t, float *, const TX *, const TY *), int R, int C>
static void tile_dot_pairs(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                           size_t bs_c) {
    for (int r = 0; r < R; ++r) {
        for (int c = 0; c < C; ++c) {
            DOT(n, (float *)((char *)s + r * bs_r + c * bs_c), (const TX *)((const char *)vx + r * bx),
                (const TY *)((const char *)vy + c * by));
        }
    }
}
#define PAIRS(TX, TY, D) GGML_TILE_TABLE(tile_dot_pairs, TX, TY, D)
#if !defined(GGML_CPU_AVX512)
static const ggml_tile_dot_t k_tile_f32[4][4] = PAIRS(float, float, ggml_vec_dot_f32);
static const ggml_tile_dot_t k_tile_f16[4][4] = PAIRS(ggml_fp16_t, ggml_fp16_t, ggml_vec_dot_f16);
static const ggml_tile_dot_t k_tile_f16_f32[4][4] = PAIRS(ggml_fp16_t, float, ggml_vec_dot_f16_f32);
#endif
#if !defined(GGML_CPU_AVX512_VNNI)
ggml_tile_table ggml_cpu_tiles_q8_0 = PAIRS(block_q8_0, block_q8_1, ggml_vec_dot_q8_0_q8_1);
#endif
#undef PAIRS

ggml_tile_dot_t ggml_cpu_get_tile_dot(ggml_type type_x, bool y_f16, int nr, int nc) {
    GGML_ASSERT(nr >= 1 && nr <= GGML_TILE_MAX_R && nc >= 1 && nc <= GGML_TILE_MAX_C);
    switch (type_x) {
        case GGML_TYPE_F32:
            return k_tile_f32[nr - 1][nc - 1];
        case GGML_TYPE_F16:
            return y_f16 ? k_tile_f16[nr - 1][nc - 1] : k_tile_f16_f32[nr - 1][nc - 1];
        default: {
            ggml_tile_table * tiles = ggml_cpu_get_type_traits(type_x)->tiles;
            if (!tiles) GGML_ABORT("no dot kernel for weight type %s", ggml_type_name(type_x));
            return (*tiles)[nr - 1][nc - 1];
        }
    }
}
