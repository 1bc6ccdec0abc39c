// cpu/vec_dot_k.cpp - tile dots of the K-quants (q2_K, q3_K, q4_K, q5_K, q6_K) against q8_K
// activations, and the q8_K activation quantizer; picked at build time: AVX-512 (F/BW/VL, VNNI
// when present), AVX2 (AVX-VNNI when present) or plain C++.
//
// All paths compute the dot of a 256-weight super-block exactly in integers and convert once:
//
//   dot = d_y * (d_x * sum_s sc_s * sum_{i in s} u_i * y_i  -  dmin_x * sum_s m_s * bsum_s)
//
// with u_i the unsigned quant (q2_K: 0..3, q3_K: 0..7, q4_K: 0..15, q5_K: 0..31, q6_K: 0..63),
// sc_s the integer scale of sub-block s, and the second term from q8_K's bsums (sums of 16
// activation quants): the mins of q2_K/q4_K/q5_K (float, scaled by dmin), and the offsets of
// q3_K (u - 4) and q6_K (u - 32), which are integer: -4 * sc_s * bsum_s, -32 * sc_s * bsum_s.
// The SIMD inner step is vpmaddubsw (u8 x s8 -> pairs in s16, no saturation: |u| <= 63) then
// vpdpwssd with the sub-block scales broadcast to their words (or vpmaddwd + add), so the
// scales cost nothing per element. A tile of R weight rows x C activation columns unpacks each
// row's quants once per 64 weights and loads each activation chunk once for all R rows.
#include "cpu/quants.h"
#include "ggml-impl.h"

#include <cmath>
#include <cstring>
#include <type_traits>
#include <utility>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif

// GCC 12 warns about the _mm*_undefined_* placeholders inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define K_AVX512 1
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define K_AVX2 1
#endif

namespace {

template <int N, typename F> inline void static_for(F && f) {
    [&]<int... I>(std::integer_sequence<int, I...>) { (f(std::integral_constant<int, I>{}), ...); }
    (std::make_integer_sequence<int, N>{});
}

inline float fp16(ggml_fp16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return ggml_compute_fp16_to_fp32(h);
#endif
}

// ---------------------------------------------------------------------------------------------
// Sub-block scales as integers, per 16 weights (a 32-weight sub-block's scale appears twice):
// sc[16], and m[16] for the types with mins. Used by the scalar and AVX2 paths.

// q4_K/q5_K: 8 6-bit scales and 8 6-bit mins packed in 12 bytes (ggml's get_scale_min_k4).
inline void unpack_scale_min_k4(const uint8_t * q, int j, int & sc, int & m) {
    if (j < 4) {
        sc = q[j] & 63;
        m = q[j + 4] & 63;
    } else {
        sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
        m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
    }
}

// q3_K: 16 6-bit scales (low nibbles in bytes 0..7, high 2-bit pairs in bytes 8..11), minus 32.
inline int unpack_scale_q3(const uint8_t * s, int i) {
    const int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
    const int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
    return (lo | hi << 4) - 32;
}

[[maybe_unused]] inline void scales16(const block_q2_K & b, int16_t * sc, int16_t * m) {
    for (int i = 0; i < 16; ++i) {
        sc[i] = b.scales[i] & 0xF;
        m[i] = b.scales[i] >> 4;
    }
}
[[maybe_unused]] inline void scales16(const block_q3_K & b, int16_t * sc, int16_t * m) {
    for (int i = 0; i < 16; ++i) {
        sc[i] = (int16_t)unpack_scale_q3(b.scales, i);
        m[i] = 0;
    }
}
// All 8 of unpack_scale_min_k4 at once, on 32-bit words (ggml's kmask form): bytes of s_lo, s_hi = scales 0-3, 4-7;
// m_lo, m_hi = mins 0-3, 4-7. The per-j form cost ~half of a q4_K decode step on a Zen 1 core (AVX2).
template <typename B> inline void scales16_k4(const B & b, int16_t * sc, int16_t * m) {
    uint32_t u[3];
    std::memcpy(u, b.scales, 12);
    const uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
    const uint32_t s_lo = u[0] & k6, m_lo = u[1] & k6;
    const uint32_t s_hi = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
    const uint32_t m_hi = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
#if defined(__AVX2__) || defined(__AVX512F__)
    const __m128i sw = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)s_hi, (int)s_lo));
    const __m128i mw = _mm_cvtepu8_epi16(_mm_set_epi32(0, 0, (int)m_hi, (int)m_lo));
    _mm_storeu_si128((__m128i *)sc, _mm_unpacklo_epi16(sw, sw));
    _mm_storeu_si128((__m128i *)(sc + 8), _mm_unpackhi_epi16(sw, sw));
    _mm_storeu_si128((__m128i *)m, _mm_unpacklo_epi16(mw, mw));
    _mm_storeu_si128((__m128i *)(m + 8), _mm_unpackhi_epi16(mw, mw));
#else
    for (int j = 0; j < 8; ++j) {
        const uint32_t ws = j < 4 ? s_lo : s_hi, wm = j < 4 ? m_lo : m_hi;
        sc[2 * j] = sc[2 * j + 1] = (int16_t)((ws >> (8 * (j % 4))) & 0xFF);
        m[2 * j] = m[2 * j + 1] = (int16_t)((wm >> (8 * (j % 4))) & 0xFF);
    }
#endif
}
[[maybe_unused]] inline void scales16(const block_q4_K & b, int16_t * sc, int16_t * m) { scales16_k4(b, sc, m); }
[[maybe_unused]] inline void scales16(const block_q5_K & b, int16_t * sc, int16_t * m) { scales16_k4(b, sc, m); }
[[maybe_unused]] inline void scales16(const block_q6_K & b, int16_t * sc, int16_t * m) {
    for (int i = 0; i < 16; ++i) {
        sc[i] = b.scales[i];
        m[i] = 0;
    }
}

// d and dmin (0 where the type has no mins) as floats.
[[maybe_unused]] inline void scales_f(const block_q2_K & b, float & d, float & dmin) {
    d = fp16(b.d);
    dmin = fp16(b.dmin);
}
[[maybe_unused]] inline void scales_f(const block_q3_K & b, float & d, float & dmin) {
    d = fp16(b.d);
    dmin = 0.0f;
}
[[maybe_unused]] inline void scales_f(const block_q4_K & b, float & d, float & dmin) {
    d = fp16(b.d);
    dmin = fp16(b.dmin);
}
[[maybe_unused]] inline void scales_f(const block_q5_K & b, float & d, float & dmin) {
    d = fp16(b.d);
    dmin = fp16(b.dmin);
}
[[maybe_unused]] inline void scales_f(const block_q6_K & b, float & d, float & dmin) {
    d = fp16(b.d);
    dmin = 0.0f;
}

// The offset of the unsigned quants of the types without mins (u - offset is the signed quant):
// the integer bias term is -offset * sum_s sc_s * bsum_s.
template <typename B> constexpr int k_offset = 0;
template <> constexpr int k_offset<block_q3_K> = 4;
template <> constexpr int k_offset<block_q6_K> = 32;

// =============================================================================================
// plain C++: the 256 unsigned quants of a super-block in order, then exact integer sub-block dots.
#if !defined(K_AVX512) && !defined(K_AVX2)

void unpack_quants(const block_q2_K & b, uint8_t * u) {
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l)
                u[128 * h + 32 * j + l] = (b.qs[32 * h + l] >> (2 * j)) & 3;
}
void unpack_quants(const block_q3_K & b, uint8_t * u) {
    for (int h = 0; h < 2; ++h)
        for (int j = 0; j < 4; ++j)
            for (int l = 0; l < 32; ++l)
                u[128 * h + 32 * j + l] =
                    ((b.qs[32 * h + l] >> (2 * j)) & 3) | (((b.hmask[l] >> (4 * h + j)) & 1) << 2);
}
void unpack_quants(const block_q4_K & b, uint8_t * u) {
    for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
            u[64 * j + l] = b.qs[32 * j + l] & 0xF;
            u[64 * j + 32 + l] = b.qs[32 * j + l] >> 4;
        }
}
void unpack_quants(const block_q5_K & b, uint8_t * u) {
    for (int j = 0; j < 4; ++j)
        for (int l = 0; l < 32; ++l) {
            u[64 * j + l] = (b.qs[32 * j + l] & 0xF) | (((b.qh[l] >> (2 * j)) & 1) << 4);
            u[64 * j + 32 + l] = (b.qs[32 * j + l] >> 4) | (((b.qh[l] >> (2 * j + 1)) & 1) << 4);
        }
}
void unpack_quants(const block_q6_K & b, uint8_t * u) {
    for (int h = 0; h < 2; ++h)
        for (int l = 0; l < 32; ++l) {
            const uint8_t * ql = b.ql + 64 * h;
            const uint8_t qh = b.qh[32 * h + l];
            u[128 * h + l + 0] = (ql[l] & 0xF) | ((qh >> 0) & 3) << 4;
            u[128 * h + l + 32] = (ql[l + 32] & 0xF) | ((qh >> 2) & 3) << 4;
            u[128 * h + l + 64] = (ql[l] >> 4) | ((qh >> 4) & 3) << 4;
            u[128 * h + l + 96] = (ql[l + 32] >> 4) | ((qh >> 6) & 3) << 4;
        }
}

template <typename B, int R, int C>
void tile_dot_k(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                size_t bs_c) {
    const int64_t nb = n / QK_K;
    float acc[R][C] = {};
    for (int64_t ib = 0; ib < nb; ++ib) {
        uint8_t u[R][QK_K];
        int16_t sc[R][16], m[R][16];
        float d[R], dmin[R];
        for (int r = 0; r < R; ++r) {
            const B & b = ((const B *)((const char *)vx + r * bx))[ib];
            unpack_quants(b, u[r]);
            scales16(b, sc[r], m[r]);
            scales_f(b, d[r], dmin[r]);
            if (k_offset<B>)
                for (int i = 0; i < 16; ++i)
                    m[r][i] = (int16_t)(k_offset<B> * sc[r][i]);
        }
        for (int c = 0; c < C; ++c) {
            const block_q8_K & y = ((const block_q8_K *)((const char *)vy + c * by))[ib];
            for (int r = 0; r < R; ++r) {
                int isum = 0, ibias = 0;
                for (int j = 0; j < 16; ++j) {
                    int t = 0;
                    for (int l = 0; l < 16; ++l)
                        t += u[r][16 * j + l] * y.qs[16 * j + l];
                    isum += sc[r][j] * t;
                    ibias += m[r][j] * y.bsums[j];
                }
                if (k_offset<B>)
                    acc[r][c] += y.d * d[r] * (float)(isum - ibias);
                else
                    acc[r][c] += y.d * (d[r] * (float)isum - dmin[r] * (float)ibias);
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            *(float *)((char *)s + r * bs_r + c * bs_c) = acc[r][c];
}

#endif // plain C++

// =============================================================================================
// AVX2: 32 weights per step in their natural order (8 chunks per super-block).
#if defined(K_AVX2)

// Software prefetch of the decode tiles' weights, GGML_K_AVX2_PREFETCH tiles ahead (0: none) plus the next
// super-block of the tile's rows, as the AVX-512 tiles do (see GGML_K_PREFETCH below).
#ifndef GGML_K_AVX2_PREFETCH
#define GGML_K_AVX2_PREFETCH 2
#endif

inline __m256i load256(const void * p) { return _mm256_loadu_si256((const __m256i *)p); }

// acc + madd(a, b) (s16 pairs -> s32)
inline __m256i dp_words(__m256i acc, __m256i a, __m256i b) {
#if defined(__AVXVNNI__)
    return _mm256_dpwssd_avx_epi32(acc, a, b);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b));
#endif
}

// v >> S (S may be negative: shift left) on 16-bit lanes, then & mask: moves bit S + k of every
// byte to bit k (the bits a 16-bit shift drags across bytes fall outside the mask).
template <int S> inline __m256i shift_bits(__m256i v) {
    if constexpr (S > 0)
        return _mm256_srli_epi16(v, S);
    else if constexpr (S < 0)
        return _mm256_slli_epi16(v, -S);
    else
        return v;
}
template <int S> inline __m256i bits(__m256i v, int mask) {
    return _mm256_and_si256(shift_bits<S>(v), _mm256_set1_epi8((char)mask));
}

// The unsigned quants of weights 32c .. 32c + 31.
template <int c> inline __m256i quant_chunk(const block_q2_K & b) {
    return bits<2 * (c % 4)>(load256(b.qs + 32 * (c / 4)), 3);
}
template <int c> inline __m256i quant_chunk(const block_q3_K & b) {
    constexpr int j = c % 4, hb = 4 * (c / 4) + j;
    return _mm256_or_si256(bits<2 * j>(load256(b.qs + 32 * (c / 4)), 3), bits<hb - 2>(load256(b.hmask), 4));
}
template <int c> inline __m256i quant_chunk(const block_q4_K & b) {
    return bits<4 * (c % 2)>(load256(b.qs + 32 * (c / 2)), 0xF);
}
template <int c> inline __m256i quant_chunk(const block_q5_K & b) {
    return _mm256_or_si256(bits<4 * (c % 2)>(load256(b.qs + 32 * (c / 2)), 0xF), bits<c - 4>(load256(b.qh), 0x10));
}
template <int c> inline __m256i quant_chunk(const block_q6_K & b) {
    constexpr int h = c / 4, k = c % 4;
    return _mm256_or_si256(bits<4 * (k / 2)>(load256(b.ql + 64 * h + 32 * (k % 2)), 0xF),
                           bits<2 * k - 4>(load256(b.qh + 32 * h), 0x30));
}

// Four rows' 8 x int16 (each the partial sums of one 32-weight chunk) -> one register whose dword r holds row r's
// sum as two int16 halves (|sum of 8 lanes| <= 4 * 2 * 2 * 15 * 127 = 30480: no overflow for 4-bit quants).
inline __m128i fold_rows4_i16(const __m128i * p) {
    const __m128i t01 = _mm_add_epi16(_mm_unpacklo_epi32(p[0], p[1]), _mm_unpackhi_epi32(p[0], p[1]));
    const __m128i t23 = _mm_add_epi16(_mm_unpacklo_epi32(p[2], p[3]), _mm_unpackhi_epi32(p[2], p[3]));
    return _mm_add_epi16(_mm_unpacklo_epi64(t01, t23), _mm_unpackhi_epi64(t01, t23));
}

// Four rows' 4 x int32 partial sums -> one register whose dword r holds row r's total.
inline __m128i sum_rows4_i32(__m128i r0, __m128i r1, __m128i r2, __m128i r3) {
    const __m128i u01 = _mm_add_epi32(_mm_unpacklo_epi32(r0, r1), _mm_unpackhi_epi32(r0, r1));
    const __m128i u23 = _mm_add_epi32(_mm_unpacklo_epi32(r2, r3), _mm_unpackhi_epi32(r2, r3));
    return _mm_add_epi32(_mm_unpacklo_epi64(u01, u23), _mm_unpackhi_epi64(u01, u23));
}

// q4_K 4 x 1 (decode), as the q4_0 one in vec_dot_q4_q5.cpp: Zen 1 splits 256-bit ops and has one pipe for
// vpmaddubsw / vpmaddwd, and the generic tile above spends per row and 32-weight chunk a 256-bit maddubs, madd
// with the scales, add, plus the scale shuffles. Here, per chunk: 128-bit halves, each row's two vpmaddubsw added
// in int16, the 4 rows folded in int16 (fold_rows4_i16), one vpmaddwd with the 4 rows' 6-bit scales of that chunk
// (one vpshufb of the rows' unpacked scale bytes), int32 sums over the super-block; the mins against the bsums
// pairs once per super-block for the 4 rows; one convert + fma per super-block and term for the 4 rows.
inline void tile_avx2_q4_K_4x1(int64_t n, const void * vx, size_t bx, const void * vy, float * s, size_t bs_r) {
    const int64_t nb = n / QK_K;
    const block_q4_K * x[4];
    ggml_tile_rows(vx, bx, 4, x);
    const block_q8_K * y = (const block_q8_K *)vy;
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i ones = _mm_set1_epi16(1);
    __m128 acc = _mm_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
#if GGML_K_AVX2_PREFETCH
        // the rows 2 tiles ahead only: the near prefetch of the generic tile (the next super-block of these rows) cost
        // instructions and no bandwidth on Zen 1 (bench-matvec 2 threads, 3 rounds: q4_K 2048 x 5632 12.7-13.8 ->
        // 14.2-14.5 GB/s, 5632 x 2048 12.9-13.1 -> 13.4-13.6; q6_K 4 x 1 13.7-14.0 -> 14.1-14.5 on 5632 x 2048)
        for (int r = 0; r < 4; ++r) {
            const char * pf = (const char *)(x[r] + ib) + GGML_K_AVX2_PREFETCH * 4 * bx;
            for (size_t o = 0; o < sizeof(block_q4_K) + 63; o += 64)
                _mm_prefetch(pf + o, _MM_HINT_T0);
        }
#endif
        // scales / mins 0-3 and 4-7 of each row as bytes (ggml's kmask form, as scales16_k4); dword r = row r
        alignas(16) uint32_t sl[4], sh[4], ml[4], mh[4], dd[4];
        for (int r = 0; r < 4; ++r) {
            uint32_t u[3];
            std::memcpy(u, x[r][ib].scales, 12);
            std::memcpy(&dd[r], &x[r][ib].d, 4); // d | dmin << 16
            const uint32_t k6 = 0x3f3f3f3f, k4 = 0x0f0f0f0f, k2 = 0x03030303;
            sl[r] = u[0] & k6;
            ml[r] = u[1] & k6;
            sh[r] = (u[2] & k4) | (((u[0] >> 6) & k2) << 4);
            mh[r] = ((u[2] >> 4) & k4) | (((u[1] >> 6) & k2) << 4);
        }
        const __m128i SL = _mm_load_si128((const __m128i *)sl), SH = _mm_load_si128((const __m128i *)sh);
        const block_q8_K & yb = y[ib];
        __m128i isum = _mm_setzero_si128();
        static_for<8>([&](auto ck) {
            constexpr int c = decltype(ck)::value;
            const __m128i yl = _mm_loadu_si128((const __m128i *)(yb.qs + 32 * c));
            const __m128i yh = _mm_loadu_si128((const __m128i *)(yb.qs + 32 * c + 16));
            __m128i p[4];
            for (int r = 0; r < 4; ++r) {
                const uint8_t * q = x[r][ib].qs + 32 * (c / 2);
                __m128i qa = _mm_loadu_si128((const __m128i *)q), qb = _mm_loadu_si128((const __m128i *)(q + 16));
                if constexpr (c % 2) {
                    qa = _mm_srli_epi16(qa, 4);
                    qb = _mm_srli_epi16(qb, 4);
                }
                p[r] = _mm_add_epi16(_mm_maddubs_epi16(_mm_and_si128(qa, m4), yl),
                                     _mm_maddubs_epi16(_mm_and_si128(qb, m4), yh));
            }
            // int16 lanes 2r, 2r + 1 <- scale c of row r (byte 4r + c % 4 of SL / SH)
            constexpr char b = (char)(c % 4);
            const __m128i idx =
                _mm_setr_epi8(b, -1, b, -1, b + 4, -1, b + 4, -1, b + 8, -1, b + 8, -1, b + 12, -1, b + 12, -1);
            const __m128i sc = _mm_shuffle_epi8(c < 4 ? SL : SH, idx);
            isum = _mm_add_epi32(isum, _mm_madd_epi16(fold_rows4_i16(p), sc));
        });
        // mins: bias_r = sum_j m_rj * (bsums[2j] + bsums[2j + 1]) (|pair sum| <= 32 * 127: int16)
        const __m128i bs0 = _mm_madd_epi16(_mm_loadu_si128((const __m128i *)yb.bsums), ones);
        const __m128i bs1 = _mm_madd_epi16(_mm_loadu_si128((const __m128i *)(yb.bsums + 8)), ones);
        const __m128i ys = _mm_packs_epi32(bs0, bs1);
        const __m128i ML = _mm_load_si128((const __m128i *)ml), MH = _mm_load_si128((const __m128i *)mh);
        const __m128i m01 = _mm_unpacklo_epi32(ML, MH), m23 = _mm_unpackhi_epi32(ML, MH); // rows 0 1 | 2 3, 8 bytes
        const __m128i zero = _mm_setzero_si128();
        const __m128i b0 = _mm_madd_epi16(_mm_unpacklo_epi8(m01, zero), ys);
        const __m128i b1 = _mm_madd_epi16(_mm_unpackhi_epi8(m01, zero), ys);
        const __m128i b2 = _mm_madd_epi16(_mm_unpacklo_epi8(m23, zero), ys);
        const __m128i b3 = _mm_madd_epi16(_mm_unpackhi_epi8(m23, zero), ys);
        const __m128i bias = sum_rows4_i32(b0, b1, b2, b3);
        // d, dmin of the 4 rows: 8 f16 -> d0 m0 d1 m1 | d2 m2 d3 m3
        const __m256 dm = _mm256_cvtph_ps(_mm_load_si128((const __m128i *)dd));
        const __m128 lo = _mm256_castps256_ps128(dm), hi = _mm256_extractf128_ps(dm, 1);
        const __m128 dy = _mm_set1_ps(yb.d);
        const __m128 d = _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(2, 0, 2, 0)), dy);
        const __m128 dmin = _mm_mul_ps(_mm_shuffle_ps(lo, hi, _MM_SHUFFLE(3, 1, 3, 1)), dy);
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), d, acc);
        acc = _mm_fnmadd_ps(_mm_cvtepi32_ps(bias), dmin, acc);
    }
    alignas(16) float o[4];
    _mm_store_ps(o, acc);
    for (int r = 0; r < 4; ++r)
        *(float *)((char *)s + r * bs_r) = o[r];
}

// q6_K 4 x 1 (decode). The generic tile above spends per row and 32 weights ~18 mostly 256-bit instructions (the
// quants, a maddubs, the scale pair shuffle, a madd with the scales and an add). Here, per pair of 16-weight groups
// (2j, 2j + 1; one scale each, their ql / qh / y bytes contiguous): each row's unsigned quants u (ql nibble | qh bits
// << 4) against y[32j .. 32j + 31] by one vpmaddubsw (lanes <= 2 * 63 * 128 = 16128), group 2j in the low 128-bit
// lane and 2j + 1 in the high one; rows 0 1 and 2 3 folded in pairs in int16 (sums of 2 lanes <= 32256: the 4-lane
// sum of the q4 tiles could reach 32768 against q8_K's -128); one vpmaddwd per pair of rows with their scales of the
// two groups (int32 sums over the super-block); the offset -32 once per super-block and row from q8_K's bsums (-32 *
// sum_g sc_g * bsum_g); one convert + fma per super-block for the 4 rows. The Zen 1 form of this tile used 128-bit
// halves, one group per step: on a Zen 3 VM, where 256-bit operations are not split, this one runs 1.6x faster on
// rows in L2 (10.0-11.1 -> 16.8-17.6 GB/s, 2048 x 64, one thread) and a Q4_K_M decode (q6_K: attn_v, half of
// ffn_down, the output) 3-7% faster whole-process (docs/cpu-notes.md).
inline void tile_avx2_q6_K_4x1(int64_t n, const void * vx, size_t bx, const void * vy, float * s, size_t bs_r) {
    const int64_t nb = n / QK_K;
    const block_q6_K * x[4];
    ggml_tile_rows(vx, bx, 4, x);
    const block_q8_K * y = (const block_q8_K *)vy;
    __m128 acc = _mm_setzero_ps();
    for (int64_t ib = 0; ib < nb; ++ib) {
#if GGML_K_AVX2_PREFETCH
        for (int r = 0; r < 4; ++r) { // far only: see tile_avx2_q4_K_4x1
            const char * pf = (const char *)(x[r] + ib) + GGML_K_AVX2_PREFETCH * 4 * bx;
            for (size_t o = 0; o < sizeof(block_q6_K) + 63; o += 64)
                _mm_prefetch(pf + o, _MM_HINT_T0);
        }
#endif
        const block_q8_K & yb = y[ib];
        // the 16 scales of each row as int16 (lanes: groups 0-7 | 8-15); the rows paired per group: A01 = s0 s1 of
        // groups 0-3 | 8-11 (a dword per group), B01 of groups 4-7 | 12-15; A23 / B23 the same for rows 2, 3
        __m256i W[4];
        for (int r = 0; r < 4; ++r)
            W[r] = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[r][ib].scales));
        const __m256i A01 = _mm256_unpacklo_epi16(W[0], W[1]), B01 = _mm256_unpackhi_epi16(W[0], W[1]);
        const __m256i A23 = _mm256_unpacklo_epi16(W[2], W[3]), B23 = _mm256_unpackhi_epi16(W[2], W[3]);
        __m256i i01 = _mm256_setzero_si256(), i23 = _mm256_setzero_si256(); // int32: rows 0 1 0 1 | 0 1 0 1, 2 3
        static_for<8>([&](auto jk) {
            // groups g = 2j (low lane) and 2j + 1 (high lane): weights 32j .. 32j + 31 (quant_chunk)
            constexpr int j = decltype(jk)::value, h = j / 4, k = j % 4;
            const __m256i yv = load256(yb.qs + 32 * j);
            __m256i p[4];
            for (int r = 0; r < 4; ++r)
                p[r] = _mm256_maddubs_epi16(quant_chunk<j>(x[r][ib]), yv);
            // the scales of groups 2j | 2j + 1 for rows 0 1 (2 3): int16 s0 s0 s1 s1 s0 s0 s1 s1 per lane, from
            // the 128-bit half of A / B holding groups 8h + 4 (k / 2) .. + 3, copied to both lanes
            constexpr int sel = h ? 0xEE : 0x44;
            constexpr char b = (char)(8 * (k % 2)), c = (char)(b + 4);
            const __m256i idx = _mm256_setr_epi8(b, b + 1, b, b + 1, b + 2, b + 3, b + 2, b + 3, b, b + 1, b, b + 1,
                                                 b + 2, b + 3, b + 2, b + 3, c, c + 1, c, c + 1, c + 2, c + 3, c + 2,
                                                 c + 3, c, c + 1, c, c + 1, c + 2, c + 3, c + 2, c + 3);
            const __m256i s01 = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(k < 2 ? A01 : B01, sel), idx);
            const __m256i s23 = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(k < 2 ? A23 : B23, sel), idx);
            const __m256i t01 = _mm256_add_epi16(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
            const __m256i t23 = _mm256_add_epi16(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
            i01 = _mm256_add_epi32(i01, _mm256_madd_epi16(t01, s01));
            i23 = _mm256_add_epi32(i23, _mm256_madd_epi16(t23, s23));
        });
        const __m128i j01 = _mm_add_epi32(_mm256_castsi256_si128(i01), _mm256_extracti128_si256(i01, 1));
        const __m128i j23 = _mm_add_epi32(_mm256_castsi256_si128(i23), _mm256_extracti128_si256(i23, 1));
        const __m128i isum = _mm_add_epi32(_mm_unpacklo_epi64(j01, j23), _mm_unpackhi_epi64(j01, j23));
        // offsets: bias_r = sum_g sc_rg * bsum_g (|bsum| <= 16 * 128)
        const __m256i bs = load256(yb.bsums);
        __m128i bsr[4];
        for (int r = 0; r < 4; ++r) {
            const __m256i t = _mm256_madd_epi16(W[r], bs);
            bsr[r] = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        }
        const __m128i bias = sum_rows4_i32(bsr[0], bsr[1], bsr[2], bsr[3]);
        const __m128i tot = _mm_sub_epi32(isum, _mm_slli_epi32(bias, 5));
        __m128i dh = _mm_cvtsi32_si128(x[0][ib].d);
        dh = _mm_insert_epi16(dh, x[1][ib].d, 1);
        dh = _mm_insert_epi16(dh, x[2][ib].d, 2);
        dh = _mm_insert_epi16(dh, x[3][ib].d, 3);
        const __m128 d = _mm_mul_ps(_mm_cvtph_ps(dh), _mm_set1_ps(yb.d));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(tot), d, acc);
    }
    alignas(16) float o[4];
    _mm_store_ps(o, acc);
    for (int r = 0; r < 4; ++r)
        *(float *)((char *)s + r * bs_r) = o[r];
}

template <typename B, int R, int C>
void tile_dot_k(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                size_t bs_c) {
    if constexpr (std::is_same_v<B, block_q6_K> && R == 4 && C == 1) {
        tile_avx2_q6_K_4x1(n, vx, bx, vy, s, bs_r);
        return;
    }
    if constexpr (std::is_same_v<B, block_q4_K> && R == 4 && C == 1) {
        tile_avx2_q4_K_4x1(n, vx, bx, vy, s, bs_r);
        return;
    }
    const int64_t nb = n / QK_K;
    const B * x[R];
    const block_q8_K * y[C];
    ggml_tile_rows(vx, bx, R, x);
    ggml_tile_rows(vy, by, C, y);
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            acc[r][c] = _mm256_setzero_ps();
    // words 0-7 <- word 0 of a dword, 8-15 <- word 1 (a pair of 16-weight sub-block scales)
    const __m256i pair_idx = _mm256_setr_epi8(0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1, //
                                              2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3, 2, 3);
    for (int64_t ib = 0; ib < nb; ++ib) {
#if GGML_K_AVX2_PREFETCH
        if (C == 1) // streaming weights (decode): as the AVX-512 tiles, far (2 tiles ahead) and near (next super-block)
            for (int r = 0; r < R; ++r) {
                const char * pf = (const char *)(x[r] + ib) + GGML_K_AVX2_PREFETCH * R * bx;
                const char * pn = (const char *)(x[r] + ib + 1);
                for (size_t o = 0; o < sizeof(B) + 63; o += 64) {
                    _mm_prefetch(pf + o, _MM_HINT_T0);
                    _mm_prefetch(pn + o, _MM_HINT_T0);
                }
            }
#endif
        alignas(32) int16_t sc[R][16], m[R][16];
        float d[R], dmin[R];
        for (int r = 0; r < R; ++r) {
            scales16(x[r][ib], sc[r], m[r]);
            scales_f(x[r][ib], d[r], dmin[r]);
            if (k_offset<B>)
                for (int i = 0; i < 16; ++i)
                    m[r][i] = (int16_t)(-k_offset<B> * sc[r][i]);
        }
        __m256i isum[R][C];
        for (int r = 0; r < R; ++r)
            for (int c = 0; c < C; ++c)
                isum[r][c] = _mm256_setzero_si256();
        static_for<8>([&](auto ck) {
            constexpr int k = decltype(ck)::value;
            __m256i xq[R], xs[R];
            for (int r = 0; r < R; ++r) {
                xq[r] = quant_chunk<k>(x[r][ib]);
                int32_t pair;
                std::memcpy(&pair, &sc[r][2 * k], 4);
                xs[r] = _mm256_shuffle_epi8(_mm256_set1_epi32(pair), pair_idx);
            }
            for (int c = 0; c < C; ++c) {
                const __m256i yv = load256(y[c][ib].qs + 32 * k);
                for (int r = 0; r < R; ++r)
                    isum[r][c] = dp_words(isum[r][c], _mm256_maddubs_epi16(xq[r], yv), xs[r]);
            }
        });
        for (int c = 0; c < C; ++c) {
            const __m256i bs = load256(y[c][ib].bsums);
            const float dy = y[c][ib].d;
            for (int r = 0; r < R; ++r) {
                const __m256i bias = _mm256_madd_epi16(load256(m[r]), bs);
                if (k_offset<B>) {
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(_mm256_add_epi32(isum[r][c], bias)),
                                                _mm256_set1_ps(d[r] * dy), acc[r][c]);
                } else {
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[r][c]), _mm256_set1_ps(d[r] * dy), acc[r][c]);
                    acc[r][c] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(bias), _mm256_set1_ps(dmin[r] * dy), acc[r][c]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c) {
            __m128 v = _mm_add_ps(_mm256_castps256_ps128(acc[r][c]), _mm256_extractf128_ps(acc[r][c], 1));
            v = _mm_add_ps(v, _mm_movehl_ps(v, v));
            v = _mm_add_ss(v, _mm_movehdup_ps(v));
            *(float *)((char *)s + r * bs_r + c * bs_c) = _mm_cvtss_f32(v);
        }
}

#endif // AVX2

// =============================================================================================
// AVX-512: 64 weights per step (4 chunks per super-block). A chunk holds two 32-weight halves
// taken from where one 64-byte load of the packed quants puts them (q2_K..q5_K), or 64 weights
// in order (q6_K); the activation chunk is assembled to match and shared by the R rows. The
// tile's 4 rows are prepared together, one row per 128-bit lane (scales, mins, d, dmin: the
// unpacking runs once for 4 rows), each chunk's scale words come from one vpshufb (vpermt2w for
// the signed scales of q3_K/q6_K), and each super-block ends by folding the 4 rows' int32 sums
// into one vector of 4 lanes per row: one conversion and one fma per column for the 4 rows.
#if defined(K_AVX512)

inline __m512i load512(const void * p) { return _mm512_loadu_si512(p); }
// A load the compiler keeps as one instruction into a register: weight rows are not 64-byte
// aligned (144-byte q4_K blocks), so each load folded into several instructions as a memory
// operand would read two cache lines again.
inline __m512i load512_once(const void * p) {
    __m512i v = _mm512_loadu_si512(p);
    __asm__("" : "+v"(v));
    return v;
}
inline __m512i bcast256_once(const void * p) {
    __m512i v = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p));
    __asm__("" : "+v"(v));
    return v;
}
inline __m512i bcast256(const void * p) { return _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)p)); }
inline __m512i pair256(const void * a, const void * b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}
inline __m512i bytes(int v) { return _mm512_set1_epi8((char)v); }
// (a & mask) | b
inline __m512i and_or(__m512i a, __m512i mask, __m512i b) { return _mm512_ternarylogic_epi32(a, mask, b, 0xEA); }
// bit `lo` of each byte of the low 256 bits and bit `hi` of each byte of the high 256 bits -> bit
// `to` (other bits: garbage); a 64-bit rotate moves the bits, so no bit crosses out of its byte.
template <int lo, int hi, int to> inline __m512i move_bits(__m512i v) {
    constexpr long long a = (lo - to) & 63, b = (hi - to) & 63;
    if constexpr (a == 0 && b == 0) return v;
    return _mm512_rorv_epi64(v, _mm512_set_epi64(b, b, b, b, a, a, a, a));
}

// acc + madd(a, b) (s16 pairs -> s32)
inline __m512i dp_words(__m512i acc, __m512i a, __m512i b) {
#if defined(__AVX512VNNI__)
    return _mm512_dpwssd_epi32(acc, a, b);
#else
    return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b));
#endif
}

// The 4 rows of a tile are prepared together, one row per 128-bit lane: each row's 16
// sub-block scales (one byte per 16 weights; signed for q3_K and q6_K), 16 mins (types with
// mins) and d, dmin as [d0, dmin0, d1, dmin1, ..] (dmin 0 for the types without mins).
struct rows4 {
    __m512i sc, mn;
    __m256 ds;
};

inline __m512i load4x128(const void * p0, const void * p1, const void * p2, const void * p3) {
    __m512i v = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)p0));
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p1), 1);
    v = _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p2), 2);
    return _mm512_inserti32x4(v, _mm_loadu_si128((const __m128i *)p3), 3);
}
inline uint32_t load_u16(const void * p) {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
}
inline uint32_t load_u32(const void * p) {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
}
// the same 16 bytes in every 128-bit lane
inline __m512i lanes(__m128i v) { return _mm512_broadcast_i32x4(v); }

// q2_K, q3_K chunk k: 16-weight groups 2k, 2k+1 | 8+2k, 9+2k (8 words each)
constexpr int group_half(int k, int w) { return w < 16 ? 2 * k + w / 8 : 8 + 2 * k + (w - 16) / 8; }
// q4_K, q5_K chunk k: 32-weight sub-blocks a | a + 2 (16 words each), a = 4(k/2) + k%2
constexpr int group_k4(int k, int w) { return 2 * (4 * (k / 2) + k % 2 + 2 * (w / 16)) + (w % 16) / 8; }
// q6_K chunk k: weights 64k..64k+63, groups 4k..4k+3
constexpr int group_seq(int k, int w) { return 4 * k + w / 8; }

// vpermt2w indices: words of chunk k of row r <- row r's scale word of the word's group (rows 0, 1
// in the first source, 2, 3 in the second: index 16 r + group).
struct scale_idx4 {
    alignas(64) uint16_t v[4][4][32];
};
// vpshufb indices over a row's 16 scale bytes broadcast to every 128-bit lane: byte 2w of chunk
// k <- the group of word w, odd bytes 0x80 (zero): the scale words, zero-extended.
struct scale_sidx {
    alignas(64) uint8_t v[4][64];
};
template <int (*G)(int, int)> constexpr scale_sidx make_scale_sidx() {
    scale_sidx t{};
    for (int k = 0; k < 4; ++k)
        for (int w = 0; w < 32; ++w) {
            t.v[k][2 * w] = (uint8_t)G(k, w);
            t.v[k][2 * w + 1] = 0x80;
        }
    return t;
}

template <int (*G)(int, int)> constexpr scale_idx4 make_scale_idx4() {
    scale_idx4 t{};
    for (int k = 0; k < 4; ++k)
        for (int r = 0; r < 4; ++r)
            for (int w = 0; w < 32; ++w)
                t.v[k][r][w] = (uint16_t)(16 * r + G(k, w));
    return t;
}

// q4_K, q5_K: d, dmin, 12 bytes of 6-bit scales and mins (ggml's get_scale_min_k4)
inline rows4 prep_k4(const void * b0, const void * b1, const void * b2, const void * b3) {
    const __m512i hdr = load4x128(b0, b1, b2, b3); // per lane: d, dmin, s[0..11]
    rows4 rs;
    rs.ds = _mm256_cvtph_ps(_mm512_castsi512_si128(
        _mm512_permutexvar_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), hdr)));
    // u[j], j < 8: scale j; u[8 + j]: min j. byte i of s = hdr[4 + i].
    // j < 4: s[j] & 63, s[j+4] & 63; j >= 4: s[j+4] & 15 | (s[j-4] >> 6) << 4, s[j+4] >> 4 | (s[j] >> 6) << 4
    const __m512i a = _mm512_srlv_epi16(
        _mm512_shuffle_epi8(hdr, lanes(_mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15))),
        lanes(_mm_setr_epi16(0, 0, 0, 0, 0, 0, 4, 4)));
    const __m512i hb = _mm512_and_si512(
        _mm512_srli_epi16(
            _mm512_shuffle_epi8(hdr, lanes(_mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11))),
            2),
        lanes(_mm_setr_epi8(0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30, 0, 0, 0, 0, 0x30, 0x30, 0x30, 0x30)));
    const __m512i u =
        and_or(a, lanes(_mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 15, 15, 15, 15)), hb);
    rs.sc = _mm512_shuffle_epi8(u, lanes(_mm_setr_epi8(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7)));
    rs.mn = _mm512_shuffle_epi8(u, lanes(_mm_setr_epi8(8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13, 14, 14, 15, 15)));
    return rs;
}

// q4_K chunk k: nibble k % 2 (0..15) of qs[64 (k/2) .. +63]: weights 128 (k/2) + 32 (k%2) + [0, 32) | + 64
// (qs: the 64 bytes, loaded at even k into c)
template <int k> inline __m512i nibbles(const uint8_t * qs, __m512i & c) {
    if constexpr (k % 2 == 0) c = load512_once(qs + 64 * (k / 2));
    const __m512i q = c;
    if constexpr (k % 2 == 0) return _mm512_and_si512(q, bytes(0xF));
#if defined(__GFNI__)
    return _mm512_gf2p8affine_epi64_epi8(q, _mm512_set1_epi64(0x1020408000000000ll), 0); // q >> 4 per byte
#else
    return _mm512_and_si512(_mm512_srli_epi16(q, 4), bytes(0xF));
#endif
}
template <int k> inline __m512i act_k4(const block_q8_K & y) {
    constexpr int o = 128 * (k / 2) + 32 * (k % 2);
    return pair256(y.qs + o, y.qs + o + 64);
}

struct k_q2 {
    using block = block_q2_K;
    static constexpr bool has_min = true, is_signed = false;
    static constexpr int offset = 0;
    static constexpr scale_idx4 idx = make_scale_idx4<group_half>();
    static constexpr scale_sidx sidx = make_scale_sidx<group_half>();
    static rows4 prep4(const block & b0, const block & b1, const block & b2, const block & b3) {
        const __m512i s = load4x128(b0.scales, b1.scales, b2.scales, b3.scales);
        rows4 rs;
        rs.sc = _mm512_and_si512(s, bytes(0xF));
        rs.mn = _mm512_and_si512(_mm512_srli_epi16(s, 4), bytes(0xF));
        rs.ds = _mm256_cvtph_ps(_mm_setr_epi32(load_u32(&b0.d), load_u32(&b1.d), load_u32(&b2.d), load_u32(&b3.d)));
        return rs;
    }
    // weights 32k..32k+31 | 128+32k..128+32k+31
    template <int k> static __m512i quant(const block & b, __m512i * c) {
        if constexpr (k == 0) c[0] = load512_once(b.qs);
        return _mm512_and_si512(k ? _mm512_srli_epi16(c[0], 2 * k) : c[0], bytes(3));
    }
    template <int k> static __m512i act(const block_q8_K & y) { return pair256(y.qs + 32 * k, y.qs + 128 + 32 * k); }
};

struct k_q3 {
    using block = block_q3_K;
    static constexpr bool has_min = false, is_signed = true;
    static constexpr int offset = 4;
    static constexpr scale_idx4 idx = make_scale_idx4<group_half>();
    static rows4 prep4(const block & b0, const block & b1, const block & b2, const block & b3) {
        // the last 16 bytes of each block: qs[62..63], scales[0..11], d
        constexpr size_t o = sizeof(block) - 16;
        const __m512i v =
            load4x128((const char *)&b0 + o, (const char *)&b1 + o, (const char *)&b2 + o, (const char *)&b3 + o);
        // scale i: low nibble s[i] (i < 8) or s[i - 8] >> 4; high 2 bits s[8 + i % 4] >> 2 (i / 4); minus 32
        const __m512i lo = _mm512_srlv_epi16(
            _mm512_shuffle_epi8(v, lanes(_mm_setr_epi8(2, 3, 4, 5, 6, 7, 8, 9, 2, 3, 4, 5, 6, 7, 8, 9))),
            lanes(_mm_setr_epi16(0, 0, 0, 0, 4, 4, 4, 4)));
        const __m512i hi = _mm512_srlv_epi16(
            _mm512_shuffle_epi8(v,
                                lanes(_mm_setr_epi8(10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13, 10, 11, 12, 13))),
            lanes(_mm_setr_epi16(0, 0, 2, 2, 4, 4, 6, 6)));
        rows4 rs;
        rs.sc =
            _mm512_sub_epi8(and_or(lo, bytes(0xF), _mm512_and_si512(_mm512_slli_epi16(hi, 4), bytes(0x30))), bytes(32));
        rs.mn = _mm512_setzero_si512();
        // d: word 7 of each lane, zero-extended to a dword
        rs.ds = _mm256_cvtph_ps(_mm512_castsi512_si128(_mm512_maskz_permutexvar_epi16(
            0x55, _mm512_setr_epi32(7, 15, 23, 31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), v)));
        return rs;
    }
    template <int k> static __m512i quant(const block & b, __m512i * c) {
        if constexpr (k == 0) {
            c[0] = load512_once(b.qs);
            c[1] = bcast256_once(b.hmask);
        }
        return and_or(k ? _mm512_srli_epi16(c[0], 2 * k) : c[0], bytes(3),
                      _mm512_and_si512(move_bits<k, 4 + k, 2>(c[1]), bytes(4)));
    }
    template <int k> static __m512i act(const block_q8_K & y) { return pair256(y.qs + 32 * k, y.qs + 128 + 32 * k); }
};

struct k_q4 {
    using block = block_q4_K;
    static constexpr bool has_min = true, is_signed = false;
    static constexpr int offset = 0;
    static constexpr scale_idx4 idx = make_scale_idx4<group_k4>();
    static constexpr scale_sidx sidx = make_scale_sidx<group_k4>();
    static rows4 prep4(const block & b0, const block & b1, const block & b2, const block & b3) {
        return prep_k4(&b0, &b1, &b2, &b3);
    }
    template <int k> static __m512i quant(const block & b, __m512i * c) { return nibbles<k>(b.qs, c[0]); }
    template <int k> static __m512i act(const block_q8_K & y) { return act_k4<k>(y); }
};

struct k_q5 {
    using block = block_q5_K;
    static constexpr bool has_min = true, is_signed = false;
    static constexpr int offset = 0;
    static constexpr scale_idx4 idx = make_scale_idx4<group_k4>();
    static constexpr scale_sidx sidx = make_scale_sidx<group_k4>();
    static rows4 prep4(const block & b0, const block & b1, const block & b2, const block & b3) {
        return prep_k4(&b0, &b1, &b2, &b3);
    }
    // the 5th bit of weight 32j + l is bit j of qh[l]; chunk k holds sub-blocks a | a + 2
    template <int k> static __m512i quant(const block & b, __m512i * c) {
        constexpr int a = 4 * (k / 2) + k % 2;
        if constexpr (k == 0) c[1] = bcast256_once(b.qh);
        return _mm512_or_si512(nibbles<k>(b.qs, c[0]), _mm512_and_si512(move_bits<a, a + 2, 4>(c[1]), bytes(0x10)));
    }
    template <int k> static __m512i act(const block_q8_K & y) { return act_k4<k>(y); }
};

struct k_q6 {
    using block = block_q6_K;
    static constexpr bool has_min = false, is_signed = true;
    static constexpr int offset = 32;
    static constexpr scale_idx4 idx = make_scale_idx4<group_seq>();
    static rows4 prep4(const block & b0, const block & b1, const block & b2, const block & b3) {
        rows4 rs;
        rs.sc = load4x128(b0.scales, b1.scales, b2.scales, b3.scales);
        rs.mn = _mm512_setzero_si512();
        rs.ds = _mm256_cvtph_ps(_mm_setr_epi32(load_u16(&b0.d), load_u16(&b1.d), load_u16(&b2.d), load_u16(&b3.d)));
        return rs;
    }
    // weights 64k .. 64k + 63: nibble k % 2 of ql[64(k/2) ..], 2 bits of qh[32(k/2) + l]
    // (bits 4(k%2), 4(k%2) + 1 for l < 32 of the chunk, 4(k%2) + 2, + 3 for the rest)
    template <int k> static __m512i quant(const block & b, __m512i * c) {
        constexpr int p = 4 * (k % 2);
        if constexpr (k % 2 == 0) c[1] = bcast256_once(b.qh + 32 * (k / 2));
        return _mm512_or_si512(nibbles<k>(b.ql, c[0]), _mm512_and_si512(move_bits<p, p + 2, 4>(c[1]), bytes(0x30)));
    }
    template <int k> static __m512i act(const block_q8_K & y) { return load512(y.qs + 64 * k); }
};

// [x0 (16 lanes), x1] -> [x0 lanes 0-7 + 8-15 | x1 lanes 0-7 + 8-15] (per 256-bit half: one row)
inline __m512i fold_rows2(__m512i x0, __m512i x1) {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(x0, x1, 0x44), _mm512_shuffle_i32x4(x0, x1, 0xEE));
}
// [r0 | r1] (8 lanes each), [r2 | r3] -> 4 lanes per row, rows in order
inline __m512i fold_rows4(__m512i a01, __m512i a23) {
    return _mm512_add_epi32(_mm512_shuffle_i32x4(a01, a23, 0x88), _mm512_shuffle_i32x4(a01, a23, 0xDD));
}

// Prefetches. Far: the weights GGML_K_PREFETCH tiles (of R rows) ahead in mul_mat's row loop;
// 4 rows of a few KiB read side by side are short interleaved streams that the hardware
// prefetchers follow poorly (1 thread, q4_K from DRAM: none 18-21 GB/s; 1, 2 or 4 tiles ahead
// alike, 30-36). Near: the next super-block of the tile's rows. And the joint preparation
// (scales, d) runs one super-block ahead, so that no chain of the current one waits for a
// header line (25 -> 33 GB/s with q4_K; docs/cpu-notes.md).
#ifndef GGML_K_PREFETCH
#define GGML_K_PREFETCH 2
#endif

// R x C tile: rows beyond R are row 0 again in the joint preparation, and skipped in the dots.
template <typename T, int R, int C>
void tile_dot_k(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                size_t bs_c) {
    using B = typename T::block;
    const int64_t nb = n / QK_K;
    const B * x[4];
    const block_q8_K * y[C];
    ggml_tile_rows(vx, bx, R, x); // rows >= R: pointers only (their sums are zeroed)
    ggml_tile_rows(vy, by, C, y);
    __m512 acc[C]; // lanes 4r .. 4r+3: row r
    for (int c = 0; c < C; ++c)
        acc[c] = _mm512_setzero_ps();
    const __m512i idx_d = _mm512_setr_epi32(0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6);
    const __m512i idx_m = _mm512_setr_epi32(1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7);
    rows4 rs_next{};
    if (nb > 0) rs_next = T::prep4(x[0][0], x[1][0], x[2][0], x[3][0]);
    for (int64_t ib = 0; ib < nb; ++ib) {
#if GGML_K_PREFETCH
        for (int r = 0; r < R; ++r) {
            const char * p = (const char *)(x[r] + ib) + GGML_K_PREFETCH * R * bx;
            for (size_t o = 0; o < sizeof(B) + 63; o += 64)
                _mm_prefetch(p + o, _MM_HINT_T0);
        }
#endif
        for (int r = 0; r < R; ++r)
            for (size_t o = 0; o < sizeof(B) + 63; o += 64)
                _mm_prefetch((const char *)(x[r] + ib + 1) + o, _MM_HINT_T0);
        const rows4 rs = rs_next;
        if (ib + 1 < nb) rs_next = T::prep4(x[0][ib + 1], x[1][ib + 1], x[2][ib + 1], x[3][ib + 1]);
        // scale words (rows 0, 1 | rows 2, 3) and bias words matching the q8_K bsums
        const __m512i s01 = T::is_signed ? _mm512_cvtepi8_epi16(_mm512_castsi512_si256(rs.sc))
                                         : _mm512_cvtepu8_epi16(_mm512_castsi512_si256(rs.sc));
        const __m512i s23 = T::is_signed ? _mm512_cvtepi8_epi16(_mm512_extracti64x4_epi64(rs.sc, 1))
                                         : _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(rs.sc, 1));
        __m512i m01, m23;
        if constexpr (T::has_min) {
            m01 = _mm512_cvtepu8_epi16(_mm512_castsi512_si256(rs.mn));
            m23 = _mm512_cvtepu8_epi16(_mm512_extracti64x4_epi64(rs.mn, 1));
        } else {
            m01 = _mm512_mullo_epi16(s01, _mm512_set1_epi16(-T::offset));
            m23 = _mm512_mullo_epi16(s23, _mm512_set1_epi16(-T::offset));
        }
        const __m512 vd = _mm512_permutexvar_ps(idx_d, _mm512_castps256_ps512(rs.ds));
        const __m512 vm = T::has_min ? _mm512_permutexvar_ps(idx_m, _mm512_castps256_ps512(rs.ds)) : vd;

        __m512i isum[4][C]; // rows >= R: zero; the others start at chunk 0
        for (int r = R; r < 4; ++r)
            for (int c = 0; c < C; ++c)
                isum[r][c] = _mm512_setzero_si512();
        __m512i rsc[R]; // unsigned types: row r's 16 scale bytes in every lane
        if constexpr (!T::is_signed)
            static_for<R>([&](auto cr) { // (the lane is an immediate: unrolled also at -O0)
                constexpr int r = decltype(cr)::value;
                rsc[r] = _mm512_shuffle_i32x4(rs.sc, rs.sc, 0x55 * r);
            });
        __m512i raw[R][2]; // each row's packed bits, loaded once (see load512_once)
        static_for<4>([&](auto ck) {
            constexpr int k = decltype(ck)::value;
            __m512i xq[R], xs[R];
            for (int r = 0; r < R; ++r) {
                xq[r] = T::template quant<k>(x[r][ib], raw[r]);
                if constexpr (!T::is_signed)
                    xs[r] = _mm512_shuffle_epi8(rsc[r], _mm512_load_si512(T::sidx.v[k]));
                else
                    xs[r] = _mm512_permutex2var_epi16(s01, _mm512_load_si512(T::idx.v[k][r]), s23);
            }
            for (int c = 0; c < C; ++c) {
                const __m512i yv = T::template act<k>(y[c][ib]);
                for (int r = 0; r < R; ++r) {
                    const __m512i p = _mm512_maddubs_epi16(xq[r], yv);
                    if (k == 0)
                        isum[r][c] = _mm512_madd_epi16(p, xs[r]);
                    else
                        isum[r][c] = dp_words(isum[r][c], p, xs[r]);
                }
            }
        });
        for (int c = 0; c < C; ++c) {
            const __m512i bs = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)y[c][ib].bsums));
            const __m512i b01 = _mm512_madd_epi16(m01, bs), b23 = _mm512_madd_epi16(m23, bs);
            __m512i i01 = fold_rows2(isum[0][c], isum[1][c]), i23 = fold_rows2(isum[2][c], isum[3][c]);
            const __m512 dy = _mm512_set1_ps(y[c][ib].d);
            if constexpr (!T::has_min) {
                i01 = _mm512_add_epi32(i01, b01);
                i23 = _mm512_add_epi32(i23, b23);
            }
            acc[c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(fold_rows4(i01, i23)), _mm512_mul_ps(vd, dy), acc[c]);
            if constexpr (T::has_min)
                acc[c] = _mm512_fnmadd_ps(_mm512_cvtepi32_ps(fold_rows4(b01, b23)), _mm512_mul_ps(vm, dy), acc[c]);
        }
    }
    for (int c = 0; c < C; ++c) {
        __m512 t = _mm512_add_ps(acc[c], _mm512_shuffle_ps(acc[c], acc[c], 0x4E));
        t = _mm512_add_ps(t, _mm512_shuffle_ps(t, t, 0xB1)); // every lane: its row's sum
        float v[16];
        _mm512_storeu_ps(v, t);
        for (int r = 0; r < R; ++r)
            *(float *)((char *)s + r * bs_r + c * bs_c) = v[4 * r];
    }
}

#endif // AVX-512

// The kernel of block type B (the AVX-512 kernels take a traits struct).
#if defined(K_AVX512)
template <typename B> struct kernel_of;
template <> struct kernel_of<block_q2_K> { using type = k_q2; };
template <> struct kernel_of<block_q3_K> { using type = k_q3; };
template <> struct kernel_of<block_q4_K> { using type = k_q4; };
template <> struct kernel_of<block_q5_K> { using type = k_q5; };
template <> struct kernel_of<block_q6_K> { using type = k_q6; };
template <typename B, int R, int C>
void tile(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r, size_t bs_c) {
    tile_dot_k<typename kernel_of<B>::type, R, C>(n, vx, bx, vy, by, s, bs_r, bs_c);
}
#else
template <typename B, int R, int C>
void tile(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r, size_t bs_c) {
    tile_dot_k<B, R, C>(n, vx, bx, vy, by, s, bs_r, bs_c);
}
#endif

} // namespace

ggml_tile_table ggml_cpu_tiles_q2_K = GGML_TILE_TABLE(tile, block_q2_K);
ggml_tile_table ggml_cpu_tiles_q3_K = GGML_TILE_TABLE(tile, block_q3_K);
ggml_tile_table ggml_cpu_tiles_q4_K = GGML_TILE_TABLE(tile, block_q4_K);
ggml_tile_table ggml_cpu_tiles_q5_K = GGML_TILE_TABLE(tile, block_q5_K);
ggml_tile_table ggml_cpu_tiles_q6_K = GGML_TILE_TABLE(tile, block_q6_K);

// =============================================================================================
// q8_K quantizer, bit-identical to quantize_row_q8_K_ref: max = the first x of largest |x| (NaNs
// skipped), iscale = -127 / max, q = min(127, nearest_int(iscale * x)) stored as int8 (ggml's
// nearest_int: the low mantissa bits of iscale * x + 1.5 * 2^23, emulated bit for bit, so even
// inf/NaN inputs give the reference's bytes), d = 1 / iscale, bsums = sums of 16 stored quants.
// No fused multiply-add anywhere (the reference rounds the product, then the sum).

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC push_options
#pragma GCC optimize("fp-contract=off")
#endif

#if defined(K_AVX512)

void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    const __m512 magic = _mm512_set1_ps(12582912.f);
    const __m512i mant = _mm512_set1_epi32(0x007fffff), bias = _mm512_set1_epi32(0x00400000),
                  q127 = _mm512_set1_epi32(127);
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        __m512 vmax = _mm512_setzero_ps();
        for (int j = 0; j < QK_K; j += 16) // vmaxps returns its second operand when either is NaN
            vmax = _mm512_max_ps(_mm512_abs_ps(_mm512_loadu_ps(x + j)), vmax);
        const float amax = _mm512_reduce_max_ps(vmax);
        if (!amax) {
            y[i].d = 0;
            std::memset(y[i].qs, 0, sizeof(y[i].qs));
            std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
            continue;
        }
        int jmax = 0;
        for (int j = 0; j < QK_K; j += 16) {
            const __mmask16 eq =
                _mm512_cmp_ps_mask(_mm512_abs_ps(_mm512_loadu_ps(x + j)), _mm512_set1_ps(amax), _CMP_EQ_OQ);
            if (eq) {
                jmax = j + __builtin_ctz(eq);
                break;
            }
        }
        const float iscale = -127.f / x[jmax];
        const __m512 vis = _mm512_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 16) {
            const __m512 v = _mm512_add_round_ps(
                _mm512_mul_round_ps(vis, _mm512_loadu_ps(x + j), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC), magic,
                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
            const __m512i q =
                _mm512_min_epi32(_mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(v), mant), bias), q127);
            _mm_storeu_si128((__m128i *)(y[i].qs + j), _mm512_cvtepi32_epi8(q)); // truncating, as the (int8_t) cast
        }
        // bsums: sum of 8 bytes (q + 128 as u8) per 64-bit lane with vpsadbw, pairs added
        __m512i s[4];
        for (int g = 0; g < 4; ++g)
            s[g] = _mm512_sad_epu8(_mm512_xor_si512(load512(y[i].qs + 64 * g), bytes(0x80)), _mm512_setzero_si512());
        // t01 64-bit lanes: groups 0, 4, 1, 5, 2, 6, 3, 7; t23: 8, 12, 9, 13, 10, 14, 11, 15
        const __m512i t01 = _mm512_add_epi64(_mm512_unpacklo_epi64(s[0], s[1]), _mm512_unpackhi_epi64(s[0], s[1]));
        const __m512i t23 = _mm512_add_epi64(_mm512_unpacklo_epi64(s[2], s[3]), _mm512_unpackhi_epi64(s[2], s[3]));
        const __m256i w = _mm256_sub_epi16(
            _mm256_inserti128_si256(_mm256_castsi128_si256(_mm512_cvtepi64_epi16(t01)), _mm512_cvtepi64_epi16(t23), 1),
            _mm256_set1_epi16(16 * 128));
        const __m256i order = _mm256_setr_epi16(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15);
        _mm256_storeu_si256((__m256i *)y[i].bsums, _mm256_permutexvar_epi16(order, w));
        y[i].d = 1 / iscale;
    }
}

#elif defined(K_AVX2)

void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t k) {
    GGML_ASSERT(k % QK_K == 0);
    const int64_t nb = k / QK_K;
    const __m256 sign = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 magic = _mm256_set1_ps(12582912.f);
    const __m256i mant = _mm256_set1_epi32(0x007fffff), bias = _mm256_set1_epi32(0x00400000),
                  q127 = _mm256_set1_epi32(127), lowb = _mm256_set1_epi32(0xff);
    for (int64_t i = 0; i < nb; ++i, x += QK_K) {
        __m256 vmax = _mm256_setzero_ps();
        for (int j = 0; j < QK_K; j += 8) // vmaxps returns its second operand when either is NaN
            vmax = _mm256_max_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), sign), vmax);
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(vmax), _mm256_extractf128_ps(vmax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float amax = _mm_cvtss_f32(m4);
        if (!amax) {
            y[i].d = 0;
            std::memset(y[i].qs, 0, sizeof(y[i].qs));
            std::memset(y[i].bsums, 0, sizeof(y[i].bsums));
            continue;
        }
        int jmax = 0;
        for (int j = 0; j < QK_K; j += 8) {
            const int eq = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(x + j), sign), _mm256_set1_ps(amax), _CMP_EQ_OQ));
            if (eq) {
                jmax = j + __builtin_ctz(eq);
                break;
            }
        }
        const float iscale = -127.f / x[jmax];
        const __m256 vis = _mm256_set1_ps(iscale);
        for (int j = 0; j < QK_K; j += 32) {
            __m256i q[4];
            for (int h = 0; h < 4; ++h) {
                const __m256 v = _mm256_add_ps(_mm256_mul_ps(vis, _mm256_loadu_ps(x + j + 8 * h)), magic);
                q[h] = _mm256_and_si256(
                    _mm256_min_epi32(_mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(v), mant), bias), q127),
                    lowb); // the low byte (the int8_t cast) as 0..255
            }
            const __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(q[0], q[1]), _mm256_packus_epi32(q[2], q[3]));
            _mm256_storeu_si256((__m256i *)(y[i].qs + j),
                                _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)));
        }
        for (int g = 0; g < QK_K / 16; ++g) {
            int sum = 0;
            for (int l = 0; l < 16; ++l)
                sum += y[i].qs[16 * g + l];
            y[i].bsums[g] = (int16_t)sum;
        }
        y[i].d = 1 / iscale;
    }
}

#else

void quantize_row_q8_K(const float * x, block_q8_K * y, int64_t k) { quantize_row_q8_K_ref(x, y, k); }

#endif

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC pop_options
#endif
