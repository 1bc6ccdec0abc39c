// cpu/gemv_q4_Kx8.cpp - the decode mat-vec over q4_K weights repacked in 8-row groups (layout: cpu/repack.h)
// against q8_K activations: per super-block, s[r] += dy * (d[r] * sum_s sc[r][s] * sum_i q * qy
//                                                            - dmin[r] * sum_s mn[r][s] * sum_i qy)
// (s: the 8 sub-blocks of 32 weights, sum_i qy of a sub-block from q8_K's bsums).
//
// AVX2, per group super-block (8 rows x 256 weights): per 64-weight chunk eight 256-bit loads, load k holding packed
// bytes 4k..4k+3 of every row (a dword per row); the low nibbles (sub-block 2c) times qy[64c+4k..] and the high
// nibbles (2c+1) times qy[64c+32+4k..], broadcast to every dword, by vpmaddubsw, added in int16 per sub-block (8
// products of <= 2 * 15 * 128: <= 30720); one vpmaddwd per sub-block against the rows' 6-bit scales as int16 pairs
// (sc, sc) gives sc * dot as a dword per row, int32 over the super-block; the mins by one vpmaddwd per sub-block pair,
// (mn(2c), mn(2c+1)) against the pair's sums of qy (int16, computed once per call). One convert and two fma per 8
// rows and super-block. Four groups at a time (four weight streams per thread, each activation broadcast serving
// all four): from DRAM on 2 threads 20-21 -> 23-27 GB/s (docs/cpu-notes.md), in cache the same as one at a time.
#include "cpu/repack.h"
#include "ggml-impl.h"

#include <vector>

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define GEMV_Q4_KX8_AVX2 1
#endif

namespace {

// per block of y: the 8 sub-blocks' sums of qy (from the 16 bsums)
void block_sums(const block_q8_K * y, int64_t nb, int16_t * ysum) {
    for (int64_t j = 0; j < nb; ++j)
        for (int s = 0; s < 8; ++s)
            ysum[8 * j + s] = (int16_t)(y[j].bsums[2 * s] + y[j].bsums[2 * s + 1]); // |sum| <= 32 * 128
}

#if defined(GEMV_Q4_KX8_AVX2)
// sub-blocks 2c, 2c+1 of the 8 rows of b: their scales as int16 pairs (sc, sc) per row dword (sc0 for sub-block 2c,
// sc1 for 2c+1) and their mins as (mn(2c), mn(2c+1)) per row dword
inline void scales_c(const block_q4_Kx8 & b, int c, __m256i & sc0, __m256i & sc1, __m256i & mn) {
    const __m128i m4 = _mm_set1_epi8(0x0F), m2 = _mm_set1_epi8(3);
    const __m128i x = _mm_loadu_si128((const __m128i *)b.lo[2 * c]); // lo[2c][r], then lo[2c+1][r]
    const __m128i hv = _mm_loadl_epi64((const __m128i *)b.hi[c]);
    const __m128i h = _mm_unpacklo_epi64(hv, _mm_srli_epi16(hv, 4)); // bits 0..3: those of 2c, then of 2c+1
    const __m128i sc = _mm_or_si128(_mm_and_si128(x, m4), _mm_slli_epi16(_mm_and_si128(h, m2), 4));
    const __m128i mv = _mm_or_si128(_mm_and_si128(_mm_srli_epi16(x, 4), m4),
                                    _mm_slli_epi16(_mm_and_si128(_mm_srli_epi16(h, 2), m2), 4));
    sc0 = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(sc, sc));
    sc1 = _mm256_cvtepu8_epi16(_mm_unpackhi_epi8(sc, sc));
    mn = _mm256_cvtepu8_epi16(_mm_unpacklo_epi8(mv, _mm_srli_si128(mv, 8)));
}

// NG groups at once (x, x + nb, ...): the activation broadcasts serve all of them
template <int NG>
inline void gemv_ng(const block_q4_Kx8 * x, int64_t nb, const block_q8_K * y, const int16_t * ysum, float * s,
                    size_t bs) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256 acc[NG];
    for (int n = 0; n < NG; ++n)
        acc[n] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; ++j) {
        const int8_t * qy = y[j].qs;
        __m256i isum[NG], msum[NG];
        for (int n = 0; n < NG; ++n)
            isum[n] = msum[n] = _mm256_setzero_si256();
        for (int c = 0; c < 4; ++c) {
            __m256i slo[NG], shi[NG];
            for (int n = 0; n < NG; ++n)
                slo[n] = shi[n] = _mm256_setzero_si256();
            for (int k = 0; k < 8; ++k) {
                const __m256i ylo = ggml_repack_bcast4(qy + 64 * c + 4 * k);
                const __m256i yhi = ggml_repack_bcast4(qy + 64 * c + 32 + 4 * k);
                for (int n = 0; n < NG; ++n) {
                    const __m256i w = _mm256_loadu_si256((const __m256i *)(x[n * nb + j].qs + 256 * c + 32 * k));
                    slo[n] = _mm256_add_epi16(slo[n], _mm256_maddubs_epi16(_mm256_and_si256(w, m4), ylo));
                    shi[n] = _mm256_add_epi16(shi[n],
                                              _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(w, 4), m4), yhi));
                }
            }
            int32_t yp;
            std::memcpy(&yp, ysum + 8 * j + 2 * c, sizeof(yp));
            const __m256i ys = _mm256_set1_epi32(yp); // (sum qy of 2c, of 2c+1) as int16
            for (int n = 0; n < NG; ++n) {
                __m256i sc0, sc1, mn;
                scales_c(x[n * nb + j], c, sc0, sc1, mn);
                isum[n] = _mm256_add_epi32(
                    isum[n], _mm256_add_epi32(_mm256_madd_epi16(slo[n], sc0), _mm256_madd_epi16(shi[n], sc1)));
                msum[n] = _mm256_add_epi32(msum[n], _mm256_madd_epi16(mn, ys));
            }
        }
        const __m256 dy = _mm256_set1_ps(y[j].d);
        for (int n = 0; n < NG; ++n) {
            const block_q4_Kx8 & b = x[n * nb + j];
            const __m256 dx = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b.d)), dy);
            const __m256 mx = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b.dmin)), dy);
            acc[n] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum[n]), dx, acc[n]);
            acc[n] = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum[n]), mx, acc[n]);
        }
    }
    for (int n = 0; n < NG; ++n)
        ggml_repack_store_group(acc[n], (float *)((char *)s + 8 * n * bs), bs);
}

void gemv_groups(const block_q4_Kx8 * x, int64_t nb, int64_t ng, const block_q8_K * y, const int16_t * ysum, float * s,
                 size_t bs) {
    int64_t g = 0;
    for (; g + 4 <= ng; g += 4)
        gemv_ng<4>(x + g * nb, nb, y, ysum, (float *)((char *)s + 8 * g * bs), bs);
    for (; g + 2 <= ng; g += 2)
        gemv_ng<2>(x + g * nb, nb, y, ysum, (float *)((char *)s + 8 * g * bs), bs);
    for (; g < ng; ++g)
        gemv_ng<1>(x + g * nb, nb, y, ysum, (float *)((char *)s + 8 * g * bs), bs);
}
#else
void gemv_groups(const block_q4_Kx8 * x, int64_t nb, int64_t ng, const block_q8_K * y, const int16_t * ysum, float * s,
                 size_t bs) {
    for (int64_t g = 0; g < ng; ++g, x += nb) {
        float acc[8] = {};
        for (int64_t j = 0; j < nb; ++j) {
            const block_q4_Kx8 & b = x[j];
            const int8_t * qy = y[j].qs;
            for (int r = 0; r < 8; ++r) {
                int32_t isum = 0, msum = 0;
                for (int sb = 0; sb < 8; ++sb) {
                    const int h = b.hi[sb / 2][r] >> (4 * (sb & 1));
                    const int sc = (b.lo[sb][r] & 15) | ((h & 3) << 4), mn = (b.lo[sb][r] >> 4) | (((h >> 2) & 3) << 4);
                    const int c = sb / 2, shift = 4 * (sb & 1);
                    int32_t dot = 0;
                    for (int k = 0; k < 8; ++k)
                        for (int i = 0; i < 4; ++i)
                            dot += ((b.qs[256 * c + 32 * k + 4 * r + i] >> shift) & 15) * qy[32 * sb + 4 * k + i];
                    isum += sc * dot;
                    msum += mn * ysum[8 * j + sb];
                }
                const float dy = y[j].d;
                acc[r] += (float)isum * (ggml_compute_fp16_to_fp32(b.d[r]) * dy);
                acc[r] -= (float)msum * (ggml_compute_fp16_to_fp32(b.dmin[r]) * dy);
            }
        }
        ggml_repack_store_group(acc, (float *)((char *)s + 8 * g * bs), bs);
    }
}
#endif

} // namespace

void ggml_cpu_gemv_q4_Kx8(int64_t K, const void * x, int64_t n_groups, const void * vy, float * s, size_t bs) {
    const int64_t nb = K / QK_K;
    const block_q8_K * y = (const block_q8_K *)vy;
    thread_local std::vector<int16_t> ysum;
    ysum.resize(8 * nb);
    block_sums(y, nb, ysum.data());
    gemv_groups((const block_q4_Kx8 *)x, nb, n_groups, y, ysum.data(), s, bs);
}
