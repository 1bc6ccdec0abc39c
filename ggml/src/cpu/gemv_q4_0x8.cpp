// cpu/gemv_q4_0x8.cpp - the decode mat-vec over q4_0 weights repacked in 8-row groups (layout: cpu/repack.h)
// against q8_1 activations: s[r] = sum_j dw[r][j] * dy[j] * sum_i (q[r][j][i] - 8) * qy[j][i].
//
// AVX2, per group block (8 rows x 32 weights): the 8 row scales by one 128-bit load and vcvtph2ps; four 256-bit
// loads, load k holding packed bytes 4k..4k+3 of every row (a dword per row): the low nibbles times qy[4k..4k+3]
// and the high nibbles times qy[16+4k..16+4k+3], each broadcast to every dword, by vpmaddubsw; the 8 products
// added in int16 (each lane <= 2 * 15 * 127, the sum <= 30480) and one vpmaddwd to a dword per row; the offset
// 8 * sum qy of the block (exact, computed once per call for all blocks) subtracted; one convert and one fma for
// the 8 rows. No row gathers, no cross-row folds: ~40 micro-ops per 8 rows and block where the plain-layout 8-row
// tile takes ~90 (docs/cpu-notes.md).
#include "cpu/repack.h"
#include "ggml-impl.h"

#include <vector>

#if defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#include <immintrin.h>
#define GEMV_Q4_0X8_AVX2 1
#endif

namespace {

// per block of y: 8 * sum qy (exact) and dy as float, shared by every group of the call
void block_terms(const block_q8_1 * y, int64_t nb, int32_t * ys8, float * dy) {
    for (int64_t j = 0; j < nb; ++j) {
#if defined(GEMV_Q4_0X8_AVX2)
        const __m256i v = _mm256_loadu_si256((const __m256i *)y[j].qs);
        const __m256i t = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), v), _mm256_set1_epi16(1));
        __m128i h = _mm_add_epi32(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
        h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
        ys8[j] = _mm_cvtsi128_si32(h);
#else
        int32_t sum = 0;
        for (int i = 0; i < QK8_1; ++i)
            sum += y[j].qs[i];
        ys8[j] = 8 * sum;
#endif
        dy[j] = ggml_compute_fp16_to_fp32(y[j].d);
    }
}

#if defined(GEMV_Q4_0X8_AVX2)

// NG groups at once: NG streams of weights (more reads in flight), each activation broadcast shared by NG x 8 rows
template <int NG>
void gemv_n(const block_q4_0x8 * x, int64_t nb, const block_q8_1 * y, const int32_t * ys8, const float * dy, float * s,
            size_t bs) {
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[NG];
    for (int q = 0; q < NG; ++q)
        acc[q] = _mm256_setzero_ps();
    for (int64_t j = 0; j < nb; ++j) {
        const int8_t * qy = y[j].qs;
        __m256i s16[NG];
        for (int q = 0; q < NG; ++q)
            s16[q] = _mm256_setzero_si256();
        for (int k = 0; k < 4; ++k) {
            const __m256i yl = ggml_repack_bcast4(qy + 4 * k), yh = ggml_repack_bcast4(qy + 16 + 4 * k);
            for (int q = 0; q < NG; ++q) {
                const __m256i w = _mm256_loadu_si256((const __m256i *)(x[q * nb + j].qs + 32 * k));
                const __m256i lo = _mm256_and_si256(w, m4);
                const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(w, 4), m4);
                s16[q] = _mm256_add_epi16(s16[q],
                                          _mm256_add_epi16(_mm256_maddubs_epi16(lo, yl), _mm256_maddubs_epi16(hi, yh)));
            }
        }
        const __m256i off = _mm256_set1_epi32(ys8[j]);
        const __m256 vdy = _mm256_set1_ps(dy[j]);
        for (int q = 0; q < NG; ++q) {
            const __m256i isum = _mm256_sub_epi32(_mm256_madd_epi16(s16[q], ones), off);
            const __m256 dxy = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)x[q * nb + j].d)), vdy);
            acc[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dxy, acc[q]);
        }
    }
    for (int q = 0; q < NG; ++q)
        ggml_repack_store_group(acc[q], (float *)((char *)s + 8 * q * bs), bs);
}

// four groups at a time where there are four (measured: 2-thread DRAM mat-vec ~0.76 -> ~0.84 of the read probe on
// Zen 3, docs/cpu-notes.md), then one by one
void gemv_groups(const block_q4_0x8 * x, int64_t nb, int64_t ng, const block_q8_1 * y, const int32_t * ys8,
                 const float * dy, float * s, size_t bs) {
    int64_t g = 0;
    for (; g + 4 <= ng; g += 4)
        gemv_n<4>(x + g * nb, nb, y, ys8, dy, (float *)((char *)s + 8 * g * bs), bs);
    for (; g < ng; ++g)
        gemv_n<1>(x + g * nb, nb, y, ys8, dy, (float *)((char *)s + 8 * g * bs), bs);
}
#else
void gemv_groups(const block_q4_0x8 * x, int64_t nb, int64_t ng, const block_q8_1 * y, const int32_t * ys8,
                 const float * dy, float * s, size_t bs) {
    for (int64_t g = 0; g < ng; ++g, x += nb) {
        float acc[8] = {};
        for (int64_t j = 0; j < nb; ++j) {
            const block_q4_0x8 & b = x[j];
            const int8_t * qy = y[j].qs;
            for (int r = 0; r < 8; ++r) {
                int32_t isum = 0;
                for (int k = 0; k < 4; ++k)
                    for (int i = 0; i < 4; ++i) {
                        const uint8_t q = b.qs[32 * k + 4 * r + i];
                        isum += (q & 0x0F) * qy[4 * k + i] + (q >> 4) * qy[16 + 4 * k + i];
                    }
                acc[r] += (float)(isum - ys8[j]) * (ggml_compute_fp16_to_fp32(b.d[r]) * dy[j]);
            }
        }
        ggml_repack_store_group(acc, (float *)((char *)s + 8 * g * bs), bs);
    }
}
#endif

} // namespace

void ggml_cpu_gemv_q4_0x8(int64_t K, const void * x, int64_t n_groups, const void * vy, float * s, size_t bs) {
    const int64_t nb = K / QK4_0;
    const block_q8_1 * y = (const block_q8_1 *)vy;
    thread_local std::vector<int32_t> ys8;
    thread_local std::vector<float> dy;
    ys8.resize(nb);
    dy.resize(nb);
    block_terms(y, nb, ys8.data(), dy.data());
    gemv_groups((const block_q4_0x8 *)x, nb, n_groups, y, ys8.data(), dy.data(), s, bs);
}
