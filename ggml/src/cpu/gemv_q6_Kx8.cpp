// cpu/gemv_q6_Kx8.cpp - the decode mat-vec over q6_K weights repacked in 8-row groups (layout: cpu/repack.h)
// against q8_K activations: per super-block, s[r] += d[r] * dy * sum_g sc[r][g] * (sum_i u * qy - 32 * bsum_g)
// (g: the 16 groups of 16 weights, u the unsigned 6-bit quant, bsum_g = sum_i qy of the group from q8_K's bsums).
//
// AVX2, per group super-block (8 rows x 256 weights), per 16-weight group three 256-bit loads X, Y, Z (a dword of 4
// weights per row): u_0..u_2 = X, Y, Z & 63 and u_3 = the three top bit pairs shifted down together (3 andnot, 3
// shifts, 2 or); each u_v times qy[16g + 4v ..] broadcast to every dword by vpmaddubsw (lanes <= 2 * 63 * 128), the
// pairs v = 0 1 and 2 3 added in int16 (<= 32256), one vpmaddwd each against the rows' scales of the group as int16
// pairs (sc, sc) (int32 over the super-block); the offset -32 * sum_g sc[r][g] * bsum_g by one vpmaddwd per group
// pair, (sc(2t), sc(2t+1)) per row dword against the pair's bsums. One convert and one fma per 8 rows and
// super-block, the same integer sums and float steps as the plain 4-row tile (tile_avx2_q6_K_4x1). Four groups at a
// time (four weight streams per thread, each activation broadcast serving all four), as gemv_q4_Kx8.cpp.
#include "cpu/repack.h"
#include "ggml-impl.h"

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define GEMV_Q6_KX8_AVX2 1
#endif

namespace {

#if defined(GEMV_Q6_KX8_AVX2)
// NG groups at once (x, x + nb, ...)
template <int NG> inline void gemv_ng(const block_q6_Kx8 * x, int64_t nb, const block_q8_K * y, float * s, size_t bs) {
    const __m256i m63 = _mm256_set1_epi8(63);
    // (sc, sc) of group 2t (even bytes of a pair load) / 2t + 1 (odd bytes) per row
    const __m128i dup0 = _mm_setr_epi8(0, 0, 2, 2, 4, 4, 6, 6, 8, 8, 10, 10, 12, 12, 14, 14);
    const __m128i dup1 = _mm_setr_epi8(1, 1, 3, 3, 5, 5, 7, 7, 9, 9, 11, 11, 13, 13, 15, 15);
    __m256 acc[NG];
    for (int n = 0; n < NG; ++n)
        acc[n] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; ++j) {
        const int8_t * qy = y[j].qs;
        __m256i isum[NG];
        for (int n = 0; n < NG; ++n)
            isum[n] = _mm256_setzero_si256();
        for (int g = 0; g < 16; ++g) {
            const __m256i y0 = ggml_repack_bcast4(qy + 16 * g), y1 = ggml_repack_bcast4(qy + 16 * g + 4);
            const __m256i y2 = ggml_repack_bcast4(qy + 16 * g + 8), y3 = ggml_repack_bcast4(qy + 16 * g + 12);
            for (int n = 0; n < NG; ++n) {
                const block_q6_Kx8 & b = x[n * nb + j];
                const __m256i X = _mm256_loadu_si256((const __m256i *)b.qs[g][0]);
                const __m256i Y = _mm256_loadu_si256((const __m256i *)b.qs[g][1]);
                const __m256i Z = _mm256_loadu_si256((const __m256i *)b.qs[g][2]);
                // u_3: X's top bits to 0..1, Y's to 2..3, Z's to 4..5 (16-bit shifts of masked bytes stay in the byte)
                __m256i u3 = _mm256_srli_epi16(_mm256_andnot_si256(m63, X), 2);
                u3 = _mm256_srli_epi16(_mm256_or_si256(u3, _mm256_andnot_si256(m63, Y)), 2);
                u3 = _mm256_srli_epi16(_mm256_or_si256(u3, _mm256_andnot_si256(m63, Z)), 2);
                const __m256i p01 = _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(X, m63), y0),
                                                     _mm256_maddubs_epi16(_mm256_and_si256(Y, m63), y1));
                const __m256i p23 =
                    _mm256_add_epi16(_mm256_maddubs_epi16(_mm256_and_si256(Z, m63), y2), _mm256_maddubs_epi16(u3, y3));
                const __m128i sp = _mm_loadu_si128((const __m128i *)b.sc[g / 2]);
                const __m256i sc = _mm256_cvtepi8_epi16(_mm_shuffle_epi8(sp, g % 2 ? dup1 : dup0));
                isum[n] =
                    _mm256_add_epi32(isum[n], _mm256_add_epi32(_mm256_madd_epi16(p01, sc), _mm256_madd_epi16(p23, sc)));
            }
        }
        const __m256 dy = _mm256_set1_ps(y[j].d);
        for (int n = 0; n < NG; ++n) {
            const block_q6_Kx8 & b = x[n * nb + j];
            __m256i bias = _mm256_setzero_si256(); // sum_g sc[r][g] * bsum_g (|bsum| <= 16 * 128)
            for (int t = 0; t < 8; ++t) {
                int32_t bp;
                std::memcpy(&bp, y[j].bsums + 2 * t, sizeof(bp));
                const __m256i sp = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)b.sc[t]));
                bias = _mm256_add_epi32(bias, _mm256_madd_epi16(sp, _mm256_set1_epi32(bp)));
            }
            const __m256i tot = _mm256_sub_epi32(isum[n], _mm256_slli_epi32(bias, 5));
            const __m256 d = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b.d)), dy);
            acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(tot), d, acc[n]);
        }
    }
    for (int n = 0; n < NG; ++n)
        ggml_repack_store_group(acc[n], (float *)((char *)s + 8 * n * bs), bs);
}

void gemv_groups(const block_q6_Kx8 * x, int64_t nb, int64_t ng, const block_q8_K * y, float * s, size_t bs) {
    int64_t g = 0;
    for (; g + 4 <= ng; g += 4)
        gemv_ng<4>(x + g * nb, nb, y, (float *)((char *)s + 8 * g * bs), bs);
    for (; g + 2 <= ng; g += 2)
        gemv_ng<2>(x + g * nb, nb, y, (float *)((char *)s + 8 * g * bs), bs);
    for (; g < ng; ++g)
        gemv_ng<1>(x + g * nb, nb, y, (float *)((char *)s + 8 * g * bs), bs);
}
#else
void gemv_groups(const block_q6_Kx8 * x, int64_t nb, int64_t ng, const block_q8_K * y, float * s, size_t bs) {
    for (int64_t gr = 0; gr < ng; ++gr, x += nb) {
        float acc[8] = {};
        for (int64_t j = 0; j < nb; ++j) {
            const block_q6_Kx8 & b = x[j];
            const int8_t * qy = y[j].qs;
            for (int r = 0; r < 8; ++r) {
                int32_t tot = 0;
                for (int g = 0; g < 16; ++g) {
                    int32_t dot = 0;
                    for (int i = 0; i < 4; ++i) {
                        const int X = b.qs[g][0][4 * r + i], Y = b.qs[g][1][4 * r + i], Z = b.qs[g][2][4 * r + i];
                        const int u3 = X >> 6 | (Y >> 6) << 2 | (Z >> 6) << 4;
                        dot += (X & 63) * qy[16 * g + i] + (Y & 63) * qy[16 * g + 4 + i] +
                               (Z & 63) * qy[16 * g + 8 + i] + u3 * qy[16 * g + 12 + i];
                    }
                    tot += b.sc[g / 2][2 * r + g % 2] * (dot - 32 * y[j].bsums[g]);
                }
                acc[r] += (float)tot * (ggml_compute_fp16_to_fp32(b.d[r]) * y[j].d);
            }
        }
        ggml_repack_store_group(acc, (float *)((char *)s + 8 * gr * bs), bs);
    }
}
#endif

} // namespace

void ggml_cpu_gemv_q6_Kx8(int64_t K, const void * x, int64_t n_groups, const void * y, float * s, size_t bs) {
    gemv_groups((const block_q6_Kx8 *)x, K / QK_K, n_groups, (const block_q8_K *)y, s, bs);
}
