// cpu/vec_dot_q4_q5.cpp - register-tile dots (vec_dot.h) of q4_0, q4_1, q5_0, q5_1 weights
// against q8_1 activations, picked at build time: AVX-512 VNNI, AVX2 (+ AVX-VNNI if present) or
// plain C++. All three compute exact integer block dots; only the per-block scaling is float.
//
// Per block b of 32 (x = weights, y = activations, q = the 4- or 5-bit codes, qy = y's int8s):
//   q4_0, q5_0: x = dx * (q - o), o = 8 or 16  ->  dot_b = dx * dy * (sum q*qy - o * sum qy)
//   q4_1, q5_1: x = dx * q + m                 ->  dot_b = dx * dy * sum q*qy + m * dy * sum qy
// sum qy is an exact integer computed once per activation column and block and shared by the R
// rows of a tile (q8_1's f16 s = dy * sum qy is not used: its rounding would cost ~1e-4).
//
// AVX-512 VNNI (see tile_avx512): two weight rows per register, so the float work (convert,
// scale, accumulate) runs once per two rows; one 64-byte load per row brings two blocks, vpermt2w
// gathers the nibble bytes and the f16 scales of two rows, scales convert with integer ops,
// q5's 5th bits become byte masks (vpshufbitqmb where AVX512-BITALG is there), and the decode
// tiles prefetch the rows two tiles ahead. AVX2: one block per register, the low and high nibbles
// in the two 128-bit lanes; vpdpbusd (AVX-VNNI) or vpmaddubsw + vpmaddwd (codes <= 31: no
// saturation). Kernel versions and their measured speeds: docs/cpu-notes.md.
#include "cpu/quants.h"
#include "ggml-impl.h"

#include <cstring>
#include <type_traits>

#if defined(__AVX2__) || defined(__AVX512F__) || defined(__F16C__)
#include <immintrin.h>
#endif

// GCC 12 warns about the _mm*_undefined_* placeholders inside its own AVX-512 intrinsics.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512VNNI__)
#define Q45_AVX512 1
#elif defined(__AVX2__) && defined(__F16C__) && defined(__FMA__)
#define Q45_AVX2 1
#endif

// Software prefetch: while a tile reads rows r..r+R-1 at block ib, it prefetches block ib of the
// rows GGML_Q45_PREFETCH_ROWS further (two tiles ahead in mul_mat's row loop), so each cache line
// is requested once, well ahead (0: no prefetch). Zen 5, one thread, q4_0 from DRAM: 512 bytes
// ahead in the same row 7.5 GB/s, 4 rows 25, 8 rows 29-35 (docs/cpu-notes.md).
#ifndef GGML_Q45_PREFETCH_ROWS
#define GGML_Q45_PREFETCH_ROWS 8
#endif

namespace {

// f16 -> f32: one vcvtph2ps where F16C is there (the portable conversion is a dozen integer ops)
inline float fp16(ggml_fp16_t h) {
#if defined(__F16C__)
    return _cvtsh_ss(h);
#else
    return ggml_compute_fp16_to_fp32(h);
#endif
}

#if defined(Q45_AVX512) || defined(Q45_AVX2)
inline float hsum8(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

// What the kernels need to know of each block type.
template <typename B> struct q45;
template <> struct q45<block_q4_0> {
    static constexpr bool five = false; // 5-bit codes (qh)
    static constexpr bool min = false;  // x = d * q + m (else x = d * (q - offset))
    static constexpr int offset = 8;
};
template <> struct q45<block_q4_1> {
    static constexpr bool five = false, min = true;
    static constexpr int offset = 0;
};
template <> struct q45<block_q5_0> {
    static constexpr bool five = true, min = false;
    static constexpr int offset = 16;
};
template <> struct q45<block_q5_1> {
    static constexpr bool five = true, min = true;
    static constexpr int offset = 0;
};

template <typename B> inline uint32_t qh_bits(const B & b) {
    uint32_t h;
    std::memcpy(&h, b.qh, sizeof(h));
    return h;
}
template <typename B> inline float min_of(const B & b) {
    if constexpr (q45<B>::min)
        return fp16(b.m);
    else
        return 0.0f;
}

#if defined(Q45_AVX512)
// =============================================================================================
// AVX-512 VNNI

// Word offsets (in a pair of blocks loaded from the first block's start) of each block's d, m
// and first qs byte.
template <typename B> struct pair_layout {
    static constexpr int bw = (int)sizeof(B) / 2; // block size in 16-bit words
    static constexpr int d0 = (int)offsetof(B, d) / 2, d1 = d0 + bw;
    static constexpr int qs0 = (int)offsetof(B, qs) / 2, qs1 = qs0 + bw;
    static constexpr int m0() {
        if constexpr (q45<B>::min)
            return (int)offsetof(B, m) / 2;
        else
            return 0;
    }
    static constexpr int qh0() {
        if constexpr (q45<B>::five)
            return (int)offsetof(B, qh) / 2;
        else
            return 0;
    }
};
static_assert(sizeof(block_q4_0) % 2 == 0 && sizeof(block_q4_1) % 2 == 0 && sizeof(block_q5_0) % 2 == 0 &&
                  sizeof(block_q5_1) % 2 == 0 && 2 * sizeof(block_q5_1) <= 64,
              "a pair of blocks fits one 64-byte load, word aligned");

// Constants of one type's kernel (vpermt2w indices: words 0-31 from the first row, 32-63 from
// the second).
template <typename B> struct consts512 {
    __m512i qs_idx;   // [qs of b, qs of b+1] of row r, then of row r+1 (16 bytes each)
    __m512i d_idx;    // odd words: d of (r, b) x 4, (r, b+1) x 4, (r+1, b) x 4, (r+1, b+1) x 4
    __m512i m_idx;    // the same for m
    __m512i dy_idx;   // vpermw over a q8_1 pair: dy of b x 4, of b+1 x 4, twice (words 0-15)
    __m512i qhlo_idx; // q5: every qword = the low qh halves of (r, b), (r, b+1), (r+1, b), (r+1, b+1)
    __m512i qhhi_idx; // q5: the same for the high halves
    __m512i off;      // u8 offset (8 or 16; 0 for the _1 types), for -offset * sum qy
    consts512() {
        using L = pair_layout<B>;
        alignas(64) int16_t q[32], d[32], m[32], dy[32], ql[32], qhh[32];
        for (int i = 0; i < 32; ++i) {
            const int row = i / 16, blk = (i / 8) % 2;
            q[i] = (int16_t)(32 * row + (blk ? L::qs1 : L::qs0) + i % 8);
            const int lane = i / 2, drow = lane / 8, dblk = (lane / 4) % 2;
            d[i] = (int16_t)(32 * drow + (dblk ? L::d1 : L::d0));
            m[i] = (int16_t)(32 * drow + L::m0() + (dblk ? L::bw : 0));
            dy[i] = (int16_t)(i < 16 && (i / 4) % 2 ? (int)sizeof(block_q8_1) / 2 : 0);
            const int j = i % 4, qrow = j / 2, qblk = j % 2; // word j of each qword
            ql[i] = (int16_t)(32 * qrow + (qblk ? L::bw : 0) + L::qh0());
            qhh[i] = (int16_t)(ql[i] + 1);
        }
        qhlo_idx = _mm512_load_si512(ql);
        qhhi_idx = _mm512_load_si512(qhh);
        qs_idx = _mm512_load_si512(q);
        d_idx = _mm512_load_si512(d);
        m_idx = _mm512_load_si512(m);
        dy_idx = _mm512_load_si512(dy);
        off = _mm512_set1_epi8((char)q45<B>::offset);
    }
};

// f16 words in the high half of each dword (low half zero) -> f32 of the same value times 2^-112,
// with integer ops only: shifting the f16 sign/exponent/mantissa right by 3 lines them up with
// f32's; the exponent bias difference (127 - 15 = 112) goes into the activation scale. Exact,
// subnormals included (they become f32 subnormals). nonneg: values known >= 0 (no sign to clear).
template <bool nonneg> inline __m512 f16_scaled(__m512i hi_words) {
    const __m512i v = _mm512_srai_epi32(hi_words, 3);
    return _mm512_castsi512_ps(nonneg ? v : _mm512_and_si512(v, _mm512_set1_epi32((int)0x8FFFFFFFu)));
}

// q5: the 5th bits of rows r, r + 1 at blocks ib, ib + 1 as byte masks of the low-nibble register
// (weights 0-15 of each block) and the high-nibble one (weights 16-31).
template <typename B> inline void qh_masks(const B * x0, const B * x1, bool two, __mmask64 & lo, __mmask64 & hi) {
    const uint64_t a0 = qh_bits(x0[0]), a1 = two ? qh_bits(x0[1]) : 0, b0 = qh_bits(x1[0]),
                   b1 = two ? qh_bits(x1[1]) : 0;
    const uint64_t l = (a0 & 0xFFFF) | (a1 & 0xFFFF) << 16 | (b0 & 0xFFFF) << 32 | (b1 & 0xFFFF) << 48;
    const uint64_t h = a0 >> 16 | (a1 >> 16) << 16 | (b0 >> 16) << 32 | (b1 >> 16) << 48;
    lo = _cvtu64_mask64(l);
    hi = _cvtu64_mask64(h);
}

// R x C tile. Two weight rows share each register: per pair of blocks (ib, ib + 1), rows r and
// r + 1 give a low-nibble register (weights 0-15 of: (r, b), (r, b+1), (r+1, b), (r+1, b+1), one
// per 128-bit lane) and a high-nibble one (weights 16-31), built by one vpermt2w from the two
// rows' 64-byte loads. Two vpdpbusd against the activations rearranged the same way (each y half
// duplicated for both rows) leave 4 int32 partial sums per (row, block), so the float work
// (convert, scale, accumulate: 3 ops) is done once per 2 rows. Scales: d of both rows and blocks
// gathered by one more vpermt2w into the high words of the lanes they scale (f16_scaled).
template <typename B, int R, int C>
void tile_avx512(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                 size_t bs_c) {
    using Q = q45<B>;
    constexpr int RP = (R + 1) / 2; // row pairs (an odd last row is paired with itself)
    static const consts512<B> k;
    const int64_t nb = n / 32;
    const B * x[2 * RP];
    const block_q8_1 * y[C];
    ggml_tile_rows(vx, bx, R, x);
    ggml_tile_rows(vy, by, C, y);
    __m512 acc[RP][C], accm[RP][C]; // accm: the m * sum y terms of the _1 types (a second FMA chain)
    for (int p = 0; p < RP; ++p)
        for (int c = 0; c < C; ++c)
            acc[p][c] = accm[p][c] = _mm512_setzero_ps();
    const __m512i zero = _mm512_setzero_si512();
    const __m512i lo4 = _mm512_set1_epi8(0x0F);
    const __m512i qs_idx = k.qs_idx, d_idx = k.d_idx;
    const __m512i ylo_idx = _mm512_set_epi64(5, 4, 1, 0, 5, 4, 1, 0),
                  yhi_idx = _mm512_set_epi64(7, 6, 3, 2, 7, 6, 3, 2);

    // Blocks ib, ib + 1 (two = false: ib only; the second block's lanes are then zero).
    // full: plain 64-byte loads (>= 4 blocks left in the row); else masked ones, which do not
    // read past the row but stream from DRAM at a third of the speed on Zen 5 (measured).
    auto step = [&](int64_t ib, bool two, bool full) __attribute__((always_inline)) {
        const __mmask64 ld = two ? (__mmask64)((1ull << (2 * sizeof(B))) - 1) : (__mmask64)((1ull << sizeof(B)) - 1);
        __m512i xlo[RP], xhi[RP];
        __m512 dx[RP], mx[RP];
        for (int p = 0; p < RP; ++p) {
            __m512i raw[2];
            for (int h = 0; h < 2; ++h) {
                const B * xr = x[2 * p + h] + ib;
#if GGML_Q45_PREFETCH_ROWS > 0
                if (2 * p + h < R) _mm_prefetch((const char *)xr + GGML_Q45_PREFETCH_ROWS * bx, _MM_HINT_T0);
#endif
                raw[h] = full ? _mm512_loadu_si512(xr) : _mm512_maskz_loadu_epi8(ld, xr);
                __asm__("" : "+v"(raw[h])); // one load: GCC would fold it into each vpermt2w (3 line-split loads)
            }
            const __m512i qs = _mm512_permutex2var_epi16(raw[0], qs_idx, raw[1]);
            xlo[p] = _mm512_and_si512(qs, lo4);
            xhi[p] = _mm512_and_si512(_mm512_srli_epi16(qs, 4), lo4);
            if constexpr (Q::five) {
                __mmask64 klo, khi;
#if defined(__AVX512BITALG__)
                // bit j of each qword of the gathered qh halves -> byte j (vpshufbitqmb)
                const __m512i iota =
                    _mm512_set_epi64(0x3F3E3D3C3B3A3938, 0x3736353433323130, 0x2F2E2D2C2B2A2928, 0x2726252423222120,
                                     0x1F1E1D1C1B1A1918, 0x1716151413121110, 0x0F0E0D0C0B0A0908, 0x0706050403020100);
                klo = _mm512_bitshuffle_epi64_mask(_mm512_permutex2var_epi16(raw[0], k.qhlo_idx, raw[1]), iota);
                khi = _mm512_bitshuffle_epi64_mask(_mm512_permutex2var_epi16(raw[0], k.qhhi_idx, raw[1]), iota);
#else
                qh_masks(x[2 * p] + ib, x[2 * p + 1] + ib, two, klo, khi);
#endif
                const __m512i b16 = _mm512_set1_epi8(16);
                xlo[p] = _mm512_mask_add_epi8(xlo[p], klo, xlo[p], b16);
                xhi[p] = _mm512_mask_add_epi8(xhi[p], khi, xhi[p], b16);
            }
            // d * 2^-112 (q4_1, q5_1: d >= 0); the 2^112 is in dy
            dx[p] = f16_scaled<Q::min>(_mm512_maskz_permutex2var_epi16(0xAAAAAAAAu, raw[0], d_idx, raw[1]));
            if constexpr (Q::min)
                mx[p] = f16_scaled<false>(_mm512_maskz_permutex2var_epi16(0xAAAAAAAAu, raw[0], k.m_idx, raw[1]));
        }
        for (int c = 0; c < C; ++c) {
            const block_q8_1 * yb = y[c] + ib;
            const __m256i y0 = _mm256_loadu_si256((const __m256i *)yb[0].qs);
            const __m512i yq =
                two ? _mm512_inserti64x4(_mm512_castsi256_si512(y0), _mm256_loadu_si256((const __m256i *)yb[1].qs), 1)
                    : _mm512_zextsi256_si512(y0);
            const __m512i ylo = _mm512_permutexvar_epi64(ylo_idx, yq), yhi = _mm512_permutexvar_epi64(yhi_idx, yq);
            // dy of b, b+1 per lane, times 2^112 (the other factor of the weight scales)
            const __m512i yraw = two ? _mm512_loadu_si512(yb) : _mm512_maskz_loadu_epi8(0xFFFFFFFFFull, yb);
            const __m512 dy =
                _mm512_mul_ps(_mm512_cvtph_ps(_mm512_castsi512_si256(_mm512_permutexvar_epi16(k.dy_idx, yraw))),
                              _mm512_set1_ps(0x1p112f));
            if constexpr (Q::min) {
                // per lane: dy * (sum of its 8 qy); summed over a block's lanes: dy * sum qy
                const __m512i ones = _mm512_set1_epi8(1);
                const __m512 ys = _mm512_mul_ps(
                    _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, ones, ylo), ones, yhi)), dy);
                for (int p = 0; p < RP; ++p) {
                    const __m512i isum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, xlo[p], ylo), xhi[p], yhi);
                    acc[p][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx[p], dy), acc[p][c]);
                    accm[p][c] = _mm512_fmadd_ps(mx[p], ys, accm[p][c]);
                }
            } else {
                const __m512i off = k.off; // -offset * sum qy per lane
                const __m512i init =
                    _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, off, ylo), off, yhi));
                for (int p = 0; p < RP; ++p) {
                    const __m512i isum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(init, xlo[p], ylo), xhi[p], yhi);
                    acc[p][c] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(dx[p], dy), acc[p][c]);
                }
            }
        }
    };
    int64_t ib = 0;
    for (; ib + 4 <= nb; ib += 2) // 4 blocks >= 64 bytes: the plain load stays in the row
        step(ib, true, true);
    if (ib + 2 <= nb) {
        step(ib, true, false);
        ib += 2;
    }
    if (ib < nb) step(ib, false, false);
    // row 2p: lanes 0-7, row 2p + 1: lanes 8-15
    for (int p = 0; p < RP; ++p)
        for (int c = 0; c < C; ++c) {
            const __m512 a = Q::min ? _mm512_add_ps(acc[p][c], accm[p][c]) : acc[p][c];
            const __m256 lo = _mm512_castps512_ps256(a), hi = _mm512_extractf32x8_ps(a, 1);
            *(float *)((char *)s + 2 * p * bs_r + c * bs_c) = hsum8(lo);
            if (2 * p + 1 < R) *(float *)((char *)s + (2 * p + 1) * bs_r + c * bs_c) = hsum8(hi);
        }
}

#define Q45_TILE tile_avx512

#elif defined(Q45_AVX2)
// =============================================================================================
// AVX2: one block per 256-bit register (128-bit lanes: weights 0-15, 16-31).

// u8 x s8 -> 8 x int32 sums of 4, added to acc (the q codes are <= 31: maddubs cannot saturate)
inline __m256i dot_u8s8(__m256i acc, __m256i u, __m256i v) {
#if defined(__AVXVNNI__)
    return _mm256_dpbusd_avx_epi32(acc, u, v);
#else
    return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, v), _mm256_set1_epi16(1)));
#endif
}

// bit j of h -> byte j = 0x10 (else 0)
inline __m256i bits_to_0x10(uint32_t h) {
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303, 0x0202020202020202, 0x0101010101010101, 0);
    __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf); // byte j = byte j / 8 of h
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

// Four rows' 8 x int16 -> one register whose dword r holds row r's sum as two int16 halves (each the sum of 4
// lanes): t01 = rows 0 1 0 1, t23 = rows 2 3 2 3, then rows 0 1 2 3.
inline __m128i fold_rows4_i16(const __m128i * p) {
    const __m128i t01 = _mm_add_epi16(_mm_unpacklo_epi32(p[0], p[1]), _mm_unpackhi_epi32(p[0], p[1]));
    const __m128i t23 = _mm_add_epi16(_mm_unpacklo_epi32(p[2], p[3]), _mm_unpackhi_epi32(p[2], p[3]));
    return _mm_add_epi16(_mm_unpacklo_epi64(t01, t23), _mm_unpackhi_epi64(t01, t23));
}

// q4_0 4 x 1 (decode). Zen 1 splits 256-bit ops in two and issues vpmaddubsw / vpmaddwd on one pipe, so the
// generic tile (a 256-bit madd, convert, scale and fma per row and block) ran ~9-10 cycles per row and block there.
// Here, per block: 128-bit halves; each row's two vpmaddubsw (low nibbles x y[0..15], high x y[16..31]) are added
// in int16 (<= 4 * 15 * 127) and the offset term 8 * (y pairs) is subtracted there too (|sum of 4 (q - 8) y| <=
// 4064); the 4 rows are then folded by unpack + add in int16 (sums of 8 lanes <= 16256, no overflow) into one
// register whose dwords hold rows 0..3, so one vpmaddwd, one convert and one fma serve the 4 rows, scaled by
// their d (packed in a general register, one vcvtph2ps) times dy. Prefetch as the generic tile, on even blocks
// only (two 18-byte blocks < one 64-byte line). Measured speeds: docs/cpu-notes.md.
inline void tile_avx2_q4_0_4x1(int64_t n, const void * vx, size_t bx, const void * vy, float * s, size_t bs_r) {
    const int64_t nb = n / 32;
    const block_q4_0 * x[4];
    ggml_tile_rows(vx, bx, 4, x);
    const block_q8_1 * y = (const block_q8_1 *)vy;
    __m128 acc = _mm_setzero_ps();
    const __m128i m4 = _mm_set1_epi8(0x0F);
    const __m128i ones = _mm_set1_epi16(1);
    const __m128i eights = _mm_set1_epi8(8);
    for (int64_t ib = 0; ib < nb; ++ib) {
        const block_q8_1 & yb = y[ib];
        const __m128i ylo = _mm_loadu_si128((const __m128i *)yb.qs);
        const __m128i yhi = _mm_loadu_si128((const __m128i *)(yb.qs + 16));
        const __m128i y8 = _mm_add_epi16(_mm_maddubs_epi16(eights, ylo), _mm_maddubs_epi16(eights, yhi));
        __m128i p[4];
        for (int r = 0; r < 4; ++r) {
            const block_q4_0 & b = x[r][ib];
#if GGML_Q45_PREFETCH_ROWS > 0
            if (!(ib & 1)) _mm_prefetch((const char *)&b + GGML_Q45_PREFETCH_ROWS * bx, _MM_HINT_T0);
#endif
            const __m128i qs = _mm_loadu_si128((const __m128i *)b.qs);
            const __m128i lo = _mm_and_si128(qs, m4), hi = _mm_and_si128(_mm_srli_epi16(qs, 4), m4);
            p[r] = _mm_sub_epi16(_mm_add_epi16(_mm_maddubs_epi16(lo, ylo), _mm_maddubs_epi16(hi, yhi)), y8);
        }
        const __m128i isum = _mm_madd_epi16(fold_rows4_i16(p), ones);
        uint16_t d[4];
        for (int r = 0; r < 4; ++r)
            std::memcpy(&d[r], &x[r][ib].d, sizeof(d[r]));
        const uint64_t d4 = (uint64_t)d[0] | (uint64_t)d[1] << 16 | (uint64_t)d[2] << 32 | (uint64_t)d[3] << 48;
        const __m128 dxy = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi64_si128((long long)d4)), _mm_set1_ps(fp16(yb.d)));
        acc = _mm_fmadd_ps(_mm_cvtepi32_ps(isum), dxy, acc);
    }
    alignas(16) float o[4];
    _mm_store_ps(o, acc);
    for (int r = 0; r < 4; ++r)
        *(float *)((char *)s + r * bs_r) = o[r];
}

// q4_0 8 x 1 (decode; mul_mat takes it for every 8 rows of a mat-vec, see quants.h): the 4 x 1 tile above for four
// pairs of rows, rows 2k (low 128-bit lane) and 2k + 1 (high lane) in one 256-bit register, sharing per block the
// activation loads, the offset term and dy, and with the offset subtracted once after the fold instead of once per
// row. Per row pair only the nibble split, two vpmaddubsw and an add are left. Lanes: p = a row's q * y products (q
// in 0..15), 4 per int16 lane (<= 4 * 15 * 127 = 7620), folded lane-wise over 4 lanes per int16 half (<= 30480; lane
// 0 sums rows 0 2 4 6, lane 1 rows 1 3 5 7); minus the offset folded the same way, each half is a sum of 16 (q - 8) y
// (<= 16256). One vpmaddwd adds the halves; the 8 d are gathered in general registers (idle in this loop) in that
// order, one vcvtph2ps, convert and fma for the 8 rows. The 128-bit form of this tile (two groups of 4 rows, the d by
// vpinsrw; Zen 1 lab, docs/cpu-notes.md: 1.57-1.85 ns per row and block in cache) ran ~7% slower whole-process
// (bench tg64, 2 threads) on a Zen 3 VM, where 256-bit operations are not split.
inline void tile_avx2_q4_0_8x1(int64_t n, const void * vx, size_t bx, const void * vy, float * s, size_t bs_r) {
    const int64_t nb = n / 32;
    const block_q4_0 * x[8];
    ggml_tile_rows(vx, bx, 8, x);
    const block_q8_1 * y = (const block_q8_1 *)vy;
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m128i eights = _mm_set1_epi8(8);
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t ib = 0; ib < nb; ++ib) {
        const block_q8_1 & yb = y[ib];
        const __m128i ylo = _mm_loadu_si128((const __m128i *)yb.qs);
        const __m128i yhi = _mm_loadu_si128((const __m128i *)(yb.qs + 16));
        // the offset term 8 * (y pairs), folded as the rows are: both int16 halves of every dword hold the sum of
        // 4 lanes (<= 4 * 8 * 4 * 127 = 16256), the term of each row's halves
        __m128i y8 = _mm_add_epi16(_mm_maddubs_epi16(eights, ylo), _mm_maddubs_epi16(eights, yhi));
        y8 = _mm_add_epi16(y8, _mm_shuffle_epi32(y8, 0x4E));
        y8 = _mm_add_epi16(y8, _mm_shuffle_epi32(y8, 0xB1));
        const __m256i ylo2 = _mm256_broadcastsi128_si256(ylo), yhi2 = _mm256_broadcastsi128_si256(yhi);
        __m256i p[4];
        for (int k = 0; k < 4; ++k) {
            const block_q4_0 & b0 = x[2 * k][ib];
            const block_q4_0 & b1 = x[2 * k + 1][ib];
#if GGML_Q45_PREFETCH_ROWS > 0
            if (!(ib & 1)) {
                _mm_prefetch((const char *)&b0 + GGML_Q45_PREFETCH_ROWS * bx, _MM_HINT_T0);
                _mm_prefetch((const char *)&b1 + GGML_Q45_PREFETCH_ROWS * bx, _MM_HINT_T0);
            }
#endif
            const __m256i qs = _mm256_loadu2_m128i((const __m128i *)b1.qs, (const __m128i *)b0.qs);
            const __m256i lo = _mm256_and_si256(qs, m4), hi = _mm256_and_si256(_mm256_srli_epi16(qs, 4), m4);
            p[k] = _mm256_add_epi16(_mm256_maddubs_epi16(lo, ylo2), _mm256_maddubs_epi16(hi, yhi2));
        }
        const __m256i t01 = _mm256_add_epi16(_mm256_unpacklo_epi32(p[0], p[1]), _mm256_unpackhi_epi32(p[0], p[1]));
        const __m256i t23 = _mm256_add_epi16(_mm256_unpacklo_epi32(p[2], p[3]), _mm256_unpackhi_epi32(p[2], p[3]));
        const __m256i f = _mm256_add_epi16(_mm256_unpacklo_epi64(t01, t23), _mm256_unpackhi_epi64(t01, t23));
        const __m256i isum = _mm256_madd_epi16(_mm256_sub_epi16(f, _mm256_broadcastsi128_si256(y8)), ones);
        uint64_t d[2] = {0, 0}; // halves of rows 0 2 4 6 | 1 3 5 7
        for (int r = 0; r < 8; ++r) {
            uint16_t h;
            std::memcpy(&h, &x[r][ib].d, sizeof(h));
            d[r & 1] |= (uint64_t)h << (16 * (r >> 1));
        }
        const __m128i dh = _mm_set_epi64x((long long)d[1], (long long)d[0]);
        const __m256 dxy = _mm256_mul_ps(_mm256_cvtph_ps(dh), _mm256_set1_ps(fp16(yb.d)));
        acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), dxy, acc);
    }
    alignas(32) float o[8];
    _mm256_store_ps(o, acc);
    for (int j = 0; j < 8; ++j) // o: rows 0 2 4 6 1 3 5 7
        *(float *)((char *)s + (2 * (j & 3) + (j >> 2)) * bs_r) = o[j];
}

template <typename B, int R, int C>
void tile_avx2(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r, size_t bs_c) {
    using Q = q45<B>;
    if constexpr (std::is_same_v<B, block_q4_0> && R == 4 && C == 1) {
        (void)by, (void)bs_c;
        tile_avx2_q4_0_4x1(n, vx, bx, vy, s, bs_r);
        return;
    }
    const int64_t nb = n / 32;
    const B * x[R];
    const block_q8_1 * y[C];
    ggml_tile_rows(vx, bx, R, x);
    ggml_tile_rows(vy, by, C, y);
    __m256 acc[R][C];
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            acc[r][c] = _mm256_setzero_ps();
    const __m256i lo4 = _mm256_set1_epi8(0x0F);
    const __m256i zero = _mm256_setzero_si256();
    for (int64_t ib = 0; ib < nb; ++ib) {
        __m256i xq[R];
        __m256 dx[R], mx[R];
        for (int r = 0; r < R; ++r) {
            const B & b = x[r][ib];
#if GGML_Q45_PREFETCH_ROWS > 0
            _mm_prefetch((const char *)&b + GGML_Q45_PREFETCH_ROWS * bx, _MM_HINT_T0);
#endif
            const __m128i qs = _mm_loadu_si128((const __m128i *)b.qs);
            __m256i q =
                _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(qs), _mm_srli_epi16(qs, 4), 1), lo4);
            if constexpr (Q::five) q = _mm256_or_si256(q, bits_to_0x10(qh_bits(b)));
            xq[r] = q;
            dx[r] = _mm256_set1_ps(fp16(b.d));
            if constexpr (Q::min) mx[r] = _mm256_set1_ps(min_of(b));
        }
        for (int c = 0; c < C; ++c) {
            const block_q8_1 & yb = y[c][ib];
            const __m256i yq = _mm256_loadu_si256((const __m256i *)yb.qs);
            const __m256 dy = _mm256_set1_ps(fp16(yb.d));
            if constexpr (Q::min) {
                const __m256 ys = _mm256_mul_ps(_mm256_cvtepi32_ps(dot_u8s8(zero, _mm256_set1_epi8(1), yq)), dy);
                for (int r = 0; r < R; ++r) {
                    const __m256i isum = dot_u8s8(zero, xq[r], yq);
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx[r], dy), acc[r][c]);
                    acc[r][c] = _mm256_fmadd_ps(mx[r], ys, acc[r][c]);
                }
            } else {
                const __m256i init = _mm256_sub_epi32(zero, dot_u8s8(zero, _mm256_set1_epi8((char)Q::offset), yq));
                for (int r = 0; r < R; ++r) {
                    const __m256i isum = dot_u8s8(init, xq[r], yq);
                    acc[r][c] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dx[r], dy), acc[r][c]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            *(float *)((char *)s + r * bs_r + c * bs_c) = hsum8(acc[r][c]);
}

#define Q45_TILE tile_avx2

void tile_decode_q4_0(int64_t n, const void * vx, size_t bx, const void * vy, size_t, float * s, size_t bs_r, size_t) {
    tile_avx2_q4_0_8x1(n, vx, bx, vy, s, bs_r);
}
#define Q45_DECODE_Q4_0 tile_decode_q4_0

#else
// =============================================================================================
// plain C++: exact integer block dots, as ggml's scalar vec_dot.

template <typename B> inline void unpack(const B & b, int8_t * q) {
    for (int j = 0; j < 16; ++j) {
        q[j] = (int8_t)(b.qs[j] & 0x0F);
        q[j + 16] = (int8_t)(b.qs[j] >> 4);
    }
    if constexpr (q45<B>::five) {
        const uint32_t h = qh_bits(b);
        for (int j = 0; j < 32; ++j)
            q[j] = (int8_t)(q[j] | (((h >> j) & 1) << 4));
    }
}

template <typename B, int R, int C>
void tile_scalar(int64_t n, const void * vx, size_t bx, const void * vy, size_t by, float * s, size_t bs_r,
                 size_t bs_c) {
    using Q = q45<B>;
    const int64_t nb = n / 32;
    float acc[R][C] = {};
    for (int64_t ib = 0; ib < nb; ++ib) {
        int ysum[C];
        float dy[C];
        const int8_t * qy[C];
        for (int c = 0; c < C; ++c) {
            const block_q8_1 & yb = ((const block_q8_1 *)((const char *)vy + c * by))[ib];
            qy[c] = yb.qs;
            dy[c] = fp16(yb.d);
            int sum = 0;
            for (int j = 0; j < 32; ++j)
                sum += yb.qs[j];
            ysum[c] = sum;
        }
        for (int r = 0; r < R; ++r) {
            const B & b = ((const B *)((const char *)vx + r * bx))[ib];
            int8_t q[32];
            unpack(b, q);
            const float dx = fp16(b.d), mx = min_of(b);
            for (int c = 0; c < C; ++c) {
                int isum = 0;
                for (int j = 0; j < 32; ++j)
                    isum += q[j] * qy[c][j];
                if constexpr (Q::min) {
                    acc[r][c] += dx * dy[c] * (float)isum + mx * dy[c] * (float)ysum[c];
                } else {
                    acc[r][c] += dx * dy[c] * (float)(isum - Q::offset * ysum[c]);
                }
            }
        }
    }
    for (int r = 0; r < R; ++r)
        for (int c = 0; c < C; ++c)
            *(float *)((char *)s + r * bs_r + c * bs_c) = acc[r][c];
}

#define Q45_TILE tile_scalar
#endif

} // namespace

ggml_tile_table ggml_cpu_tiles_q4_0 = GGML_TILE_TABLE(Q45_TILE, block_q4_0);
#if defined(Q45_DECODE_Q4_0)
const ggml_tile_dot_t ggml_cpu_tile_decode_q4_0 = Q45_DECODE_Q4_0;
#else
const ggml_tile_dot_t ggml_cpu_tile_decode_q4_0 = nullptr;
#endif
ggml_tile_table ggml_cpu_tiles_q4_1 = GGML_TILE_TABLE(Q45_TILE, block_q4_1);
ggml_tile_table ggml_cpu_tiles_q5_0 = GGML_TILE_TABLE(Q45_TILE, block_q5_0);
ggml_tile_table ggml_cpu_tiles_q5_1 = GGML_TILE_TABLE(Q45_TILE, block_q5_1);
