// cpu/gemv_q4_Kx8.cpp - the decode mat-vec over q4_K weights repacked in 8-row groups (layout: cpu/repack.h)
// against q8_K activations: per super-block, s[r] += dy * (d[r] * sum_s sc[r][s] * sum_i q * qy
//                                                            - dmin[r] * sum_s mn[r][s] * sum_i qy)
// (s: the 8 sub-blocks of 32 weights, sum_i qy of a sub-block from q8_K's bsums).
//
// AVX2, per group super-block (8 rows x 256 weights): per 64-weight chunk eight 256-bit loads, load k holding packed
// bytes 4k..4k+3 of every row (a dword per row); the low nibbles (sub-block 2c) times qy[64c+4k..] and the high
// nibbles (2c+1) times qy[64c+32+4k..], broadcast to every dword, by vpmaddubsw, added in int16 per sub-block (8
// products of <= 2 * 15 * 128: <= 30720); one vpmaddwd to a dword per row, times the rows' 6-bit scales (one 8-byte
// load per sub-block gives a byte per row, one per sub-block pair the high bits), int32 over the super-block; the
// mins the same way against the sub-blocks' sums of qy (computed once per call). One convert and two fma per 8 rows
// and super-block.
#include "cpu/repack.h"
#include "ggml-impl.h"

#include <vector>

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define GEMV_Q4_KX8_AVX2 1
#endif

namespace {

// per block of y: the 8 sub-blocks' sums of qy (from the 16 bsums)
void block_sums(const block_q8_K * y, int64_t nb, int32_t * ysum) {
    for (int64_t j = 0; j < nb; ++j)
        for (int s = 0; s < 8; ++s)
            ysum[8 * j + s] = y[j].bsums[2 * s] + y[j].bsums[2 * s + 1];
}

#if defined(GEMV_Q4_KX8_AVX2)
inline __m256i bytes8(const uint8_t * p) { return _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)); }

void gemv_groups(const block_q4_Kx8 * x, int64_t nb, int64_t ng, const block_q8_K * y, const int32_t * ysum, float * s,
                 size_t bs) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i m15 = _mm256_set1_epi32(15), m3 = _mm256_set1_epi32(3);
    for (int64_t g = 0; g < ng; ++g, x += nb) {
        __m256 acc = _mm256_setzero_ps();
        for (int64_t j = 0; j < nb; ++j) {
            const block_q4_Kx8 & b = x[j];
            const int8_t * qy = y[j].qs;
            __m256i isum = _mm256_setzero_si256(), msum = _mm256_setzero_si256();
            for (int c = 0; c < 4; ++c) {
                __m256i slo = _mm256_setzero_si256(), shi = _mm256_setzero_si256();
                for (int k = 0; k < 8; ++k) {
                    const __m256i w = _mm256_loadu_si256((const __m256i *)(b.qs + 256 * c + 32 * k));
                    const __m256i lo = _mm256_and_si256(w, m4);
                    const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
                    slo = _mm256_add_epi16(slo, _mm256_maddubs_epi16(lo, ggml_repack_bcast4(qy + 64 * c + 4 * k)));
                    shi = _mm256_add_epi16(shi, _mm256_maddubs_epi16(hi, ggml_repack_bcast4(qy + 64 * c + 32 + 4 * k)));
                }
                // scales and mins of sub-blocks 2c, 2c+1: a dword per row
                const __m256i v0 = bytes8(b.lo[2 * c]), v1 = bytes8(b.lo[2 * c + 1]), h = bytes8(b.hi[c]);
                const __m256i sc0 =
                    _mm256_or_si256(_mm256_and_si256(v0, m15), _mm256_slli_epi32(_mm256_and_si256(h, m3), 4));
                const __m256i sc1 = _mm256_or_si256(
                    _mm256_and_si256(v1, m15), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 4), m3), 4));
                const __m256i mn0 = _mm256_or_si256(
                    _mm256_srli_epi32(v0, 4), _mm256_slli_epi32(_mm256_and_si256(_mm256_srli_epi32(h, 2), m3), 4));
                const __m256i mn1 =
                    _mm256_or_si256(_mm256_srli_epi32(v1, 4), _mm256_slli_epi32(_mm256_srli_epi32(h, 6), 4));
                isum = _mm256_add_epi32(isum, _mm256_add_epi32(_mm256_mullo_epi32(_mm256_madd_epi16(slo, ones), sc0),
                                                               _mm256_mullo_epi32(_mm256_madd_epi16(shi, ones), sc1)));
                msum = _mm256_add_epi32(
                    msum, _mm256_add_epi32(_mm256_mullo_epi32(mn0, _mm256_set1_epi32(ysum[8 * j + 2 * c])),
                                           _mm256_mullo_epi32(mn1, _mm256_set1_epi32(ysum[8 * j + 2 * c + 1]))));
            }
            const __m256 dy = _mm256_set1_ps(y[j].d);
            const __m256 dx = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b.d)), dy);
            const __m256 mx = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)b.dmin)), dy);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dx, acc);
            acc = _mm256_fnmadd_ps(_mm256_cvtepi32_ps(msum), mx, acc);
        }
        ggml_repack_store_group(acc, (float *)((char *)s + 8 * g * bs), bs);
    }
}
#else
void gemv_groups(const block_q4_Kx8 * x, int64_t nb, int64_t ng, const block_q8_K * y, const int32_t * ysum, float * s,
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
    thread_local std::vector<int32_t> ysum;
    ysum.resize(8 * nb);
    block_sums(y, nb, ysum.data());
    gemv_groups((const block_q4_Kx8 *)x, nb, n_groups, y, ysum.data(), s, bs);
}
