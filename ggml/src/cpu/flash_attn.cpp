// cpu/flash_attn.cpp - FLASH_ATTN_EXT: fused softmax(scale * q k^T + mask) v, cache-blocked, K/V read in place.
//   q:    f32 [D, n_tokens, n_head, 1] (any strides)
//   k, v: f32/f16/q8_0/q4_0 [D, n_kv, n_head_kv, 1] (K and V types independent), rows dense (nb[0] = type
//         size; quantized: D a multiple of the block), nb1/nb2 free (KV cache views)
//   mask: optional f32/f16 [n_kv, >=n_tokens, 1 or n_head, 1]
//   params: f32(0) = scale, i32(1) = causal_n_past (-1: none; else key j is visible to query i iff
//           j <= n_past + i)
//   dst:  f32 [D, n_head, n_tokens, 1] contiguous
// Query head h reads kv head h / (n_head / n_head_kv) (GQA). A query that sees no key gives zeros.
//
// One work unit (flash_attn.h) = one KV head x a block of up to 16 query rows of its group (the heads that share
// the KV head, for one or more tokens), so each K/V tile is read once per block, not once per query head:
//   - per tile of 64 keys: skipped when no row of the block sees any of its keys (causal limit, mask); scores,
//     scale, mask; online softmax per row (running max m and sum l; acc rescaled when m grows); V accumulated
//     for all rows of the block at once;
//   - out = acc / l, or, when a unit's KV range is split across threads (decode: fewer units than threads),
//     the partial (m, l, acc), merged after a barrier.
// Two ways through a tile:
//   lane path (AVX-512, blocks of 5-16 rows: prefill, GQA decode): the 16 rows sit across the lanes of a
//     register. The K and V tiles are widened to f32 rows once per block (f16 converted, q8_0/q4_0
//     dequantized into per-thread scratch), a key's 16 scores are D FMAs with the key's elements broadcast
//     against q^T, softmax runs across keys with no horizontal sums, and P V broadcasts V elements against
//     a key's 16 weights. Error: f32 rounding.
//   row path (blocks of 1-4 rows, or no AVX-512): the 4x4 register-tile dots of mul_mat (vec_dot.h). In
//     blocks of up to 4 rows a q8_0/q4_0 K is dotted in its own format against the queries converted once
//     to q8_1 (integer dots; error: the q8_1 rounding of q); larger blocks widen the K tile to f32 first.
//     f16/f32 K: f16 x f32 / f32 x f32 dots. V rows widened to f32 and accumulated per row.
// No dequantized copy of the cache is made; the strided K/V rows of a head are prefetched ahead.
#include "cpu/flash_attn.h"

#include "cpu/common.h"
#include "cpu/quants.h"
#include "cpu/vec_dot.h"
#include "cpu/vec_exp.h"

#include <cmath>
#include <cstring>

#if defined(__SSE__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t FA_BQ = 16;         // query rows per block
constexpr int64_t FA_BK = 64;         // keys per tile
constexpr int64_t FA_MIN_CHUNK = 256; // keys per flash-decoding chunk, at least
static_assert(FA_BQ == 16 && FA_BK <= 64, "the lane path holds 16 rows per register and a 64-bit key mask");

size_t pad64(size_t n) { return (n + 63) / 64 * 64; }

} // namespace

ggml_cpu_fa_plan ggml_cpu_fa_plan_make(const ggml_tensor * dst, int nth) {
    const ggml_tensor * q = dst->src[0]; // [D, n_tokens, n_head, 1]
    const ggml_tensor * k = dst->src[1]; // [D, n_kv, n_head_kv, 1]
    ggml_cpu_fa_plan pl;
    pl.D = q->ne[0];
    pl.n_tokens = q->ne[1];
    pl.n_head = q->ne[2];
    pl.n_head_kv = std::max<int64_t>(1, k->ne[2]);
    pl.n_kv = k->ne[1];
    pl.group = std::max<int64_t>(1, pl.n_head / pl.n_head_kv);
    const int64_t rows = pl.group * pl.n_tokens; // query rows per KV head
    pl.bq = std::max<int64_t>(1, std::min(FA_BQ, rows));
    pl.bk = FA_BK;
    pl.n_qb = (rows + pl.bq - 1) / pl.bq;
    pl.n_units = pl.n_head_kv * pl.n_qb;
    pl.n_split = 1;
    pl.kv_chunk = std::max<int64_t>(pl.bk, (pl.n_kv + pl.bk - 1) / pl.bk * pl.bk);
    if (nth > 1 && pl.n_units < nth) {
        const int64_t want = std::min<int64_t>((nth + pl.n_units - 1) / pl.n_units, pl.n_kv / FA_MIN_CHUNK);
        if (want > 1) {
            pl.kv_chunk = ((pl.n_kv + want - 1) / want + pl.bk - 1) / pl.bk * pl.bk;
            pl.n_split = (pl.n_kv + pl.kv_chunk - 1) / pl.kv_chunk;
        }
    }
    const bool kq = ggml_is_quantized(k->type);
    pl.q_row_bytes = kq ? ggml_row_size(ggml_cpu_get_type_traits(k->type)->vec_dot_type, pl.D) : pl.D * sizeof(float);
    const size_t f = sizeof(float);
    const int64_t L = FA_BQ;              // the lane layout of flash_attn.cpp uses 16 rows whatever bq is
    pl.thread_bytes = pad64(L * pl.D * f) // qf: q rows [bq, D] or q^T [D, 16]
                      + (kq ? pad64(pl.bq * pl.q_row_bytes) : 0) // qq: q rows in the K dot's type
                      + pad64(L * pl.bk * f)                     // S: scores/weights [bq, bk] or [bk, 16]
                      + pad64(pl.bk * pl.D * f)                  // kt: K tile as f32 [bk, D]
                      + pad64(pl.bk * pl.D * f)                  // vt: V tile as f32 [bk, D]
                      + pad64(L * pl.D * f)                      // acc [bq, D]
                      + pad64(L * pl.D * f)                      // accT [D, 16]
                      + pad64(2 * L * f);                        // m, l
    pl.partial_bytes = pl.n_split > 1 ? (size_t)(pl.n_units * pl.n_split * pl.bq * (pl.D + 2)) * f : 0;
    return pl;
}

namespace {

struct fa_op {
    const ggml_tensor *q, *k, *v, *mask;
    ggml_tensor * dst;
    ggml_cpu_fa_plan pl;
    float scale;
    int32_t n_past;
    bool k_quant;
    ggml_from_float_t q_quantize;                            // f32 -> K's dot activation type (quantized K, row path)
    ggml_tile_dot_t tiles[GGML_TILE_MAX_R][GGML_TILE_MAX_C]; // K rows x q rows (q in K's dot activation type)
    ggml_tile_dot_t tiles_f32[GGML_TILE_MAX_R][GGML_TILE_MAX_C]; // f32 K tile x f32 q rows
};

struct fa_scratch {
    float * qf;   // row path: q rows [bq, D]; lane path: scale * q^T [D, 16]
    char * qq;    // row path: q rows in K's dot activation type
    float * S;    // row path: [bq, bk]; lane path: [bk, 16]
    float * kt;   // K tile as f32 [bk, D] (lane path)
    float * vt;   // V tile as f32 [bk, D]
    float * acc;  // [bq, D]
    float * accT; // [D, 16] (lane path)
    float * m;    // [bq] running max
    float * l;    // [bq] running sum
};

fa_scratch scratch_of(const ggml_cpu_fa_plan & pl, bool k_quant, char * base) {
    fa_scratch w;
    const size_t f = sizeof(float);
    auto take = [&](size_t bytes) {
        char * r = base;
        base += pad64(bytes);
        return r;
    };
    w.qf = (float *)take(FA_BQ * pl.D * f);
    w.qq = k_quant ? take(pl.bq * pl.q_row_bytes) : nullptr;
    w.S = (float *)take(FA_BQ * pl.bk * f);
    w.kt = (float *)take(pl.bk * pl.D * f);
    w.vt = (float *)take(pl.bk * pl.D * f);
    w.acc = (float *)take(FA_BQ * pl.D * f);
    w.accT = (float *)take(FA_BQ * pl.D * f);
    w.m = (float *)take(2 * FA_BQ * f);
    w.l = w.m + FA_BQ;
    return w;
}

// One K/V row of D values as f32 (the same values as the type's reference dequantizer).
void row_to_f32(ggml_type type, const char * x, float * y, int64_t D) {
    switch (type) {
        case GGML_TYPE_F32:
            std::memcpy(y, x, D * sizeof(float));
            return;
        case GGML_TYPE_F16:
            ggml_fp16_to_fp32_row((const ggml_fp16_t *)x, y, D);
            return;
#if defined(__AVX512F__)
        case GGML_TYPE_Q8_0: {
            const block_q8_0 * b = (const block_q8_0 *)x;
            for (int64_t i = 0; i < D / QK8_0; ++i) {
                const __m512 d = _mm512_set1_ps(ggml_compute_fp16_to_fp32(b[i].d));
                const __m128i q0 = _mm_loadu_si128((const __m128i *)b[i].qs);
                const __m128i q1 = _mm_loadu_si128((const __m128i *)(b[i].qs + 16));
                _mm512_storeu_ps(y + i * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d));
                _mm512_storeu_ps(y + i * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d));
            }
            return;
        }
        case GGML_TYPE_Q4_0: {
            const block_q4_0 * b = (const block_q4_0 *)x;
            const __m128i lo = _mm_set1_epi8(0x0F), eight = _mm_set1_epi8(8);
            for (int64_t i = 0; i < D / QK4_0; ++i) {
                const __m512 d = _mm512_set1_ps(ggml_compute_fp16_to_fp32(b[i].d));
                const __m128i q = _mm_loadu_si128((const __m128i *)b[i].qs);
                const __m128i q0 = _mm_sub_epi8(_mm_and_si128(q, lo), eight);                    // elements 0..15
                const __m128i q1 = _mm_sub_epi8(_mm_and_si128(_mm_srli_epi16(q, 4), lo), eight); // 16..31
                _mm512_storeu_ps(y + i * 32, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0)), d));
                _mm512_storeu_ps(y + i * 32 + 16, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1)), d));
            }
            return;
        }
#endif
        default:
            ggml_get_type_traits(type)->to_float(x, y, D);
            return;
    }
}

// The K/V rows of a head are a few cache lines every n_embd_kv row bytes: the strided stream is prefetched
// FA_PREFETCH rows ahead (decode at depth went from latency- to compute-bound: 48 -> 25 ms for 22 layers of
// 4096 q8_0 keys, one thread).
constexpr int64_t FA_PREFETCH = 8;
inline void prefetch_row(const char * p, size_t bytes) {
#if defined(__SSE__)
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch(p + o, _MM_HINT_T0);
    _mm_prefetch(p + bytes - 1, _MM_HINT_T0);
#else
    (void)p;
    (void)bytes;
#endif
}

// Rows j0 .. j0+n-1 of K or V (t) for kv head hk as f32 rows: in place when t is f32, else widened into buf (rows
// whose bit is clear in `want` are only prefetched: their weights are 0). c1: the end of the block's key range
// (prefetch bound). Returns the first row; ld = the row stride in bytes.
const char * tile_rows_f32(const ggml_tensor * t, int64_t j0, int64_t n, int64_t hk, int64_t c1, int64_t D, float * buf,
                           size_t & ld, uint64_t want = ~0ull) {
    if (t->type == GGML_TYPE_F32) {
        ld = t->nb[1];
        return ggml_ptr(t, j0, hk);
    }
    const size_t bytes = ggml_row_size(t->type, D); // one head's row
    for (int64_t j = 0; j < n; ++j) {
        const char * r = ggml_ptr(t, j0 + j, hk);
        if (j0 + j + FA_PREFETCH < c1) prefetch_row(r + FA_PREFETCH * t->nb[1], bytes);
        if (want >> j & 1) row_to_f32(t->type, r, buf + j * D, D);
    }
    ld = D * sizeof(float);
    return (const char *)buf;
}

inline float mask_at(const ggml_tensor * mask, const char * mrow, int64_t j) {
    return mask->type == GGML_TYPE_F32 ? *(const float *)(mrow + j * mask->nb[0])
                                       : ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *)(mrow + j * mask->nb[0]));
}

// keys [j0, j0 + n) of a mask row: does any of them show (> -inf), are all of them 0?
void mask_scan(const ggml_tensor * mask, const char * mrow, int64_t j0, int64_t n, bool & any, bool & all_zero) {
    any = false;
    all_zero = true;
    int64_t j = 0;
#if defined(__AVX512F__)
    const bool f32 = mask->type == GGML_TYPE_F32 && mask->nb[0] == sizeof(float);
    const bool f16 = mask->type == GGML_TYPE_F16 && mask->nb[0] == sizeof(ggml_fp16_t);
    if (f32 || f16) {
        const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
        for (; j + 16 <= n; j += 16) {
            const __m512 x =
                f32 ? _mm512_loadu_ps((const float *)mrow + j0 + j)
                    : _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const ggml_fp16_t *)mrow + j0 + j)));
            any |= _mm512_cmp_ps_mask(x, ninf, _CMP_GT_OQ) != 0;
            all_zero &= _mm512_cmp_ps_mask(x, zero, _CMP_NEQ_UQ) == 0;
        }
    }
#endif
    for (; j < n; ++j) {
        const float x = mask_at(mask, mrow, j0 + j);
        any |= x > -INFINITY;
        all_zero &= x == 0.0f;
    }
}

// The rows of one work unit and the keys they read.
struct fa_block {
    int64_t hk;           // KV head
    int64_t nr;           // rows (<= bq)
    int64_t it[FA_BQ];    // token of row r
    int64_t ih[FA_BQ];    // query head of row r
    int64_t n_vis[FA_BQ]; // row r sees keys < n_vis (causal limit; n_kv without one)
    const char * mrow[FA_BQ];
    int64_t c0, c1; // keys [c0, c1) of this chunk
};

// Tile [j0, j0 + nk): lim[r] = keys of the tile row r sees causally; returns 0 when no row sees any key
// (mask included), 1 when some rows see some keys, 2 when every row sees every key with a zero mask.
int tile_visibility(const fa_op & op, const fa_block & b, int64_t j0, int64_t nk, int64_t * lim) {
    bool any = false, clean = true;
    bool prev_any = false, prev_zero = false;
    for (int64_t r = 0; r < b.nr; ++r) {
        lim[r] = std::clamp<int64_t>(b.n_vis[r] - j0, 0, nk);
        if (lim[r] == 0) {
            clean = false;
            continue;
        }
        if (!b.mrow[r]) {
            any = true;
            clean &= lim[r] == nk;
            continue;
        }
        bool ra, rz;
        if (r > 0 && b.mrow[r] == b.mrow[r - 1] && lim[r] == lim[r - 1]) { // same token, shared mask row
            ra = prev_any;
            rz = prev_zero;
        } else {
            mask_scan(op.mask, b.mrow[r], j0, lim[r], ra, rz);
        }
        prev_any = ra;
        prev_zero = rz;
        any |= ra;
        clean &= rz && lim[r] == nk;
    }
    return !any ? 0 : clean ? 2 : 1;
}

// ---- row path: one query row per register lane group (any SIMD level; small blocks) ------------------------

// acc[r, :] += sum_j P[r, j] * V[j, :] for R rows (acc row stride D, P row stride ldp, V rows ldv bytes apart).
template <int R>
void pv_rows(int64_t nk, const float * P, int64_t ldp, const char * V, size_t ldv, int64_t D, float * acc) {
    for (int r = 0; r < R; ++r) {
        float * ar = acc + r * D;
        for (int64_t j = 0; j < nk; ++j) {
            const float p = P[r * ldp + j];
            if (p == 0.0f) continue; // masked: the cell is never read (it may hold anything)
            const float * vr = (const float *)(V + j * ldv);
#if defined(__AVX512F__)
            const __m512 pv = _mm512_set1_ps(p);
            int64_t d = 0;
            for (; d + 16 <= D; d += 16)
                _mm512_storeu_ps(ar + d, _mm512_fmadd_ps(pv, _mm512_loadu_ps(vr + d), _mm512_loadu_ps(ar + d)));
            for (; d < D; ++d)
                ar[d] += p * vr[d];
#else
            for (int64_t d = 0; d < D; ++d)
                ar[d] += p * vr[d];
#endif
        }
    }
}

// Scores with the K type's tile dots (q in its activation type: q8_1 for q8_0/q4_0, read in place), per-row
// online softmax, V tile widened to f32 and accumulated.
void fa_block_rows(const fa_op & op, const fa_scratch & w, const fa_block & b) {
    const ggml_cpu_fa_plan & pl = op.pl;
    const int64_t D = pl.D, bk = pl.bk, nr = b.nr;
    const size_t kbytes = ggml_row_size(op.k->type, D); // one head's row
    bool q_ready = false;
    // a quantized K: integer dots against q8_1 queries for blocks of up to 4 rows (each K row is used by few
    // rows: dot it where it lies); larger blocks (no AVX-512) widen the K tile to f32 once and dot in f32
    const bool k_int = op.k_quant && nr <= 4;
    const char * y = k_int ? w.qq : (const char *)w.qf;
    const size_t ldy = k_int ? pl.q_row_bytes : D * sizeof(float);
    for (int64_t j0 = b.c0; j0 < b.c1; j0 += bk) {
        const int64_t nk = std::min(bk, b.c1 - j0);
        int64_t lim[FA_BQ];
        if (tile_visibility(op, b, j0, nk, lim) == 0) continue;
        if (!q_ready) {
            for (int64_t r = 0; r < nr; ++r) {
                const char * qr = ggml_ptr(op.q, b.it[r], b.ih[r]);
                float * qd = w.qf + r * D;
                for (int64_t d = 0; d < D; ++d)
                    qd[d] = *(const float *)(qr + d * op.q->nb[0]);
                if (k_int) op.q_quantize(qd, w.qq + r * pl.q_row_bytes, D);
            }
            q_ready = true;
        }
        const char * kb = ggml_ptr(op.k, j0, b.hk);
        size_t ldk = op.k->nb[1];
        if (op.k_quant && !k_int) kb = tile_rows_f32(op.k, j0, nk, b.hk, b.c1, D, w.kt, ldk);
        // S[r, j] = k_{j0+j} . q_r: 4 keys x 4 query rows per tile call
        for (int64_t jj = 0; jj < nk; jj += 4) {
            const int R = (int)std::min<int64_t>(4, nk - jj);
            const char * kx = kb + jj * ldk;
            if (kb != (const char *)w.kt) {
                for (int u = 0; u < 4; ++u)
                    if (j0 + jj + u + FA_PREFETCH < b.c1) prefetch_row(kx + (u + FA_PREFETCH) * ldk, kbytes);
            }
            for (int64_t rr = 0; rr < nr; rr += 4) {
                const int C = (int)std::min<int64_t>(4, nr - rr);
                const ggml_tile_dot_t dot = op.k_quant && !k_int ? op.tiles_f32[R - 1][C - 1] : op.tiles[R - 1][C - 1];
                dot(D, kx, ldk, y + rr * ldy, ldy, w.S + rr * bk + jj, sizeof(float), bk * sizeof(float));
            }
        }
        int64_t nk_used = 0; // keys up to the last one some row gives weight to
        for (int64_t r = 0; r < nr; ++r) {
            float * s = w.S + r * bk;
            float mt = -INFINITY;
            for (int64_t j = 0; j < lim[r]; ++j) {
                float x = s[j] * op.scale;
                if (b.mrow[r]) x += mask_at(op.mask, b.mrow[r], j0 + j);
                s[j] = x;
                mt = std::max(mt, x);
            }
            if (mt == -INFINITY) { // this row sees nothing here
                std::memset(s, 0, nk * sizeof(float));
                continue;
            }
            for (int64_t j = lim[r]; j < nk; ++j)
                s[j] = -INFINITY;
            const float m_new = std::max(w.m[r], mt);
            const float corr = w.m[r] == -INFINITY ? 0.0f : std::exp(w.m[r] - m_new);
            const float sum = ggml_vec_exp_sum(nk, s, m_new); // s becomes the weights; -inf -> 0
            if (corr != 1.0f) {
                float * a = w.acc + r * D;
                for (int64_t d = 0; d < D; ++d)
                    a[d] *= corr;
            }
            w.l[r] = w.l[r] * corr + sum;
            w.m[r] = m_new;
            int64_t last = nk;
            while (last > 0 && s[last - 1] == 0.0f)
                --last;
            nk_used = std::max(nk_used, last);
        }
        if (nk_used == 0) continue;
        size_t ldv;
        const char * vb = tile_rows_f32(op.v, j0, nk_used, b.hk, b.c1, D, w.vt, ldv);
        for (int64_t r = 0; r < nr; ++r)
            pv_rows<1>(nk_used, w.S + r * bk, bk, vb, ldv, D, w.acc + r * D);
    }
}

// ---- lane path (AVX-512): the block's 16 query rows across the lanes of a register ---------------------------
// K and V tiles are widened to f32 rows once per block; a score is 16 rows x 1 key per register (D FMAs with
// the key's elements broadcast), softmax runs across keys with no horizontal reductions, and P V broadcasts
// V elements against the 16 weights of a key.
#if defined(__AVX512F__)
void fa_block_lanes(const fa_op & op, const fa_scratch & w, const fa_block & b) {
    const ggml_cpu_fa_plan & pl = op.pl;
    const int64_t D = pl.D, bk = pl.bk, nr = b.nr;
    constexpr int64_t L = 16;
    float * qT = w.qf;     // [D, 16]: scale * q
    float * sT = w.S;      // [bk, 16]
    float * accT = w.accT; // [D, 16]
    const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
    const __mmask16 active = (__mmask16)((1u << nr) - 1); // lanes of real rows (the others compute unread values)
    __m512 vm = ninf, vl = zero;                          // running max and sum per row
    bool q_ready = false;
    std::memset(accT, 0, D * L * sizeof(float));
    for (int64_t j0 = b.c0; j0 < b.c1; j0 += bk) {
        const int64_t nk = std::min(bk, b.c1 - j0);
        int64_t lim[FA_BQ];
        const int vis = tile_visibility(op, b, j0, nk, lim);
        if (vis == 0) continue;
        if (!q_ready) {
            std::memset(qT, 0, D * L * sizeof(float));
            for (int64_t r = 0; r < nr; ++r) {
                const char * qr = ggml_ptr(op.q, b.it[r], b.ih[r]);
                for (int64_t d = 0; d < D; ++d)
                    qT[d * L + r] = op.scale * *(const float *)(qr + d * op.q->nb[0]);
            }
            q_ready = true;
        }
        // K tile as f32 rows (f32 K is read in place)
        size_t ldk;
        const char * kb = tile_rows_f32(op.k, j0, nk, b.hk, b.c1, D, w.kt, ldk);
        // sT[j] = scale * q . k_j for the 16 rows, 8 keys at a time
        int64_t j = 0;
        for (; j + 8 <= nk; j += 8) {
            const float * k0 = (const float *)(kb + j * ldk);
            __m512 s[8];
            for (int u = 0; u < 8; ++u)
                s[u] = zero;
            for (int64_t d = 0; d < D; ++d) {
                const __m512 qv = _mm512_load_ps(qT + d * L);
                for (int u = 0; u < 8; ++u)
                    s[u] =
                        _mm512_fmadd_ps(_mm512_set1_ps(*(const float *)((const char *)k0 + u * ldk + d * 4)), qv, s[u]);
            }
            for (int u = 0; u < 8; ++u)
                _mm512_store_ps(sT + (j + u) * L, s[u]);
        }
        for (; j < nk; ++j) {
            const float * kr = (const float *)(kb + j * ldk);
            __m512 s = zero;
            for (int64_t d = 0; d < D; ++d)
                s = _mm512_fmadd_ps(_mm512_set1_ps(kr[d]), _mm512_load_ps(qT + d * L), s);
            _mm512_store_ps(sT + j * L, s);
        }
        // mask and causal limit (skipped when every row sees every key with a zero mask); unused lanes -inf
        if (vis == 1) {
            alignas(64) float mv[L];
            for (int64_t jj = 0; jj < nk; ++jj) {
                for (int64_t r = 0; r < L; ++r) {
                    if (r >= nr || jj >= lim[r])
                        mv[r] = -INFINITY;
                    else
                        mv[r] = b.mrow[r] && vis == 1 ? mask_at(op.mask, b.mrow[r], j0 + jj) : 0.0f;
                }
                _mm512_store_ps(sT + jj * L, _mm512_add_ps(_mm512_load_ps(sT + jj * L), _mm512_load_ps(mv)));
            }
        }
        // online softmax across the tile's keys, per lane
        __m512 mt = ninf;
        for (int64_t jj = 0; jj < nk; ++jj)
            mt = _mm512_max_ps(mt, _mm512_load_ps(sT + jj * L));
        const __m512 m_new = _mm512_max_ps(vm, mt);
        const __mmask16 seen = _mm512_cmp_ps_mask(m_new, ninf, _CMP_GT_OQ); // rows that saw a key so far
        if (!(seen & active)) continue;
        const __m512 base = _mm512_maskz_mov_ps(seen, m_new); // 0 where nothing seen (no NaN)
        const __m512 corr =
            _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(vm, ninf, _CMP_GT_OQ), ggml_v_expf(_mm512_sub_ps(vm, base)));
        __m512 sum = zero;
        uint64_t used = 0; // keys with some weight
        for (int64_t jj = 0; jj < nk; ++jj) {
            const __m512 x = _mm512_load_ps(sT + jj * L);
            const __m512 p =
                _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, ninf, _CMP_GT_OQ), ggml_v_expf(_mm512_sub_ps(x, base)));
            _mm512_store_ps(sT + jj * L, p);
            sum = _mm512_add_ps(sum, p);
            used |= (uint64_t)((_mm512_cmp_ps_mask(p, zero, _CMP_NEQ_UQ) & active) != 0) << jj;
        }
        vl = _mm512_fmadd_ps(vl, corr, sum);
        if (_mm512_cmp_ps_mask(corr, _mm512_set1_ps(1.0f), _CMP_NEQ_UQ) & _mm512_cmp_ps_mask(vm, ninf, _CMP_GT_OQ)) {
            for (int64_t d = 0; d < D; ++d)
                _mm512_store_ps(accT + d * L, _mm512_mul_ps(_mm512_load_ps(accT + d * L), corr));
        }
        vm = m_new;
        if (!used) continue;
        const int64_t nk_used = 64 - __builtin_clzll(used);
        // V tile as f32 rows, then accT[d] += sum_j v_j[d] * p_j
        size_t ldv;
        const char * vb = tile_rows_f32(op.v, j0, nk_used, b.hk, b.c1, D, w.vt, ldv, used);
        int64_t d0 = 0;
        for (; d0 + 16 <= D; d0 += 16) {
            __m512 a[16];
            for (int u = 0; u < 16; ++u)
                a[u] = _mm512_load_ps(accT + (d0 + u) * L);
            for (int64_t jj = 0; jj < nk_used; ++jj) {
                if (!(used >> jj & 1)) continue; // masked for every row: the cell is never read
                const __m512 p = _mm512_load_ps(sT + jj * L);
                const float * vr = (const float *)(vb + jj * ldv) + d0;
                for (int u = 0; u < 16; ++u)
                    a[u] = _mm512_fmadd_ps(_mm512_set1_ps(vr[u]), p, a[u]);
            }
            for (int u = 0; u < 16; ++u)
                _mm512_store_ps(accT + (d0 + u) * L, a[u]);
        }
        for (; d0 < D; ++d0) {
            __m512 a = _mm512_load_ps(accT + d0 * L);
            for (int64_t jj = 0; jj < nk_used; ++jj) {
                if (!(used >> jj & 1)) continue;
                a = _mm512_fmadd_ps(_mm512_set1_ps(((const float *)(vb + jj * ldv))[d0]), _mm512_load_ps(sT + jj * L),
                                    a);
            }
            _mm512_store_ps(accT + d0 * L, a);
        }
    }
    // back to the row layout of the epilogue
    alignas(64) float mr[L], lr[L];
    _mm512_store_ps(mr, vm);
    _mm512_store_ps(lr, vl);
    for (int64_t r = 0; r < nr; ++r) {
        w.m[r] = mr[r];
        w.l[r] = lr[r];
        for (int64_t d = 0; d < D; ++d)
            w.acc[r * D + d] = accT[d * L + r];
    }
}
#endif

// One (unit, chunk): rows of the unit's query block against keys of its chunk. partial: where the (m, l, acc)
// of this chunk go ([bq] m, [bq] l, [bq, D] acc), or nullptr to write the output.
void fa_task(const fa_op & op, const fa_scratch & w, int64_t unit, int64_t split, float * partial) {
    const ggml_cpu_fa_plan & pl = op.pl;
    const int64_t D = pl.D, G = pl.group;
    fa_block b;
    b.hk = unit / pl.n_qb;
    const int64_t row0 = (unit % pl.n_qb) * pl.bq;
    b.nr = std::min(pl.bq, G * pl.n_tokens - row0);
    int64_t kv_end = 0;
    for (int64_t r = 0; r < b.nr; ++r) {
        b.it[r] = (row0 + r) / G;
        b.ih[r] = b.hk * G + (row0 + r) % G;
        b.n_vis[r] = op.n_past < 0 ? pl.n_kv : std::min<int64_t>(pl.n_kv, (int64_t)op.n_past + b.it[r] + 1);
        kv_end = std::max(kv_end, b.n_vis[r]);
        b.mrow[r] = op.mask ? ggml_ptr(op.mask, b.it[r], b.ih[r] % op.mask->ne[2]) : nullptr;
    }
    b.c0 = split * pl.kv_chunk;
    b.c1 = std::min(kv_end, b.c0 + pl.kv_chunk);

    for (int64_t r = 0; r < b.nr; ++r) {
        w.m[r] = -INFINITY;
        w.l[r] = 0.0f;
    }
    std::memset(w.acc, 0, b.nr * D * sizeof(float));
#if defined(__AVX512F__)
    if (b.nr > 4)
        fa_block_lanes(op, w, b);
    else
        fa_block_rows(op, w, b);
#else
    fa_block_rows(op, w, b);
#endif

    if (partial) {
        std::memcpy(partial, w.m, b.nr * sizeof(float));
        std::memcpy(partial + pl.bq, w.l, b.nr * sizeof(float));
        std::memcpy(partial + 2 * pl.bq, w.acc, b.nr * D * sizeof(float));
        return;
    }
    for (int64_t r = 0; r < b.nr; ++r) {
        float * out = (float *)ggml_ptr(op.dst, b.ih[r], b.it[r]);
        const float * a = w.acc + r * D;
        const float inv = w.l[r] > 0.0f ? 1.0f / w.l[r] : 0.0f; // l == 0: no visible key -> zeros
        for (int64_t d = 0; d < D; ++d)
            out[d] = a[d] * inv;
    }
}

// Merge the n_split partials of one unit into its output rows.
void fa_combine(const fa_op & op, const float * partials, int64_t unit) {
    const ggml_cpu_fa_plan & pl = op.pl;
    const int64_t D = pl.D, G = pl.group;
    const int64_t hk = unit / pl.n_qb;
    const int64_t row0 = (unit % pl.n_qb) * pl.bq;
    const int64_t nr = std::min(pl.bq, G * pl.n_tokens - row0);
    const size_t slot = (size_t)pl.bq * (D + 2);
    for (int64_t r = 0; r < nr; ++r) {
        const int64_t it = (row0 + r) / G, ih = hk * G + (row0 + r) % G;
        float * out = (float *)ggml_ptr(op.dst, ih, it);
        float M = -INFINITY;
        for (int64_t s = 0; s < pl.n_split; ++s)
            M = std::max(M, partials[(unit * pl.n_split + s) * slot + r]);
        for (int64_t d = 0; d < D; ++d)
            out[d] = 0.0f;
        if (M == -INFINITY) continue;
        float L = 0.0f;
        for (int64_t s = 0; s < pl.n_split; ++s) {
            const float * p = partials + (unit * pl.n_split + s) * slot;
            if (p[r] == -INFINITY) continue;
            const float f = std::exp(p[r] - M);
            L += f * p[pl.bq + r];
            const float * a = p + 2 * pl.bq + r * D;
            for (int64_t d = 0; d < D; ++d)
                out[d] += f * a[d];
        }
        const float inv = L > 0.0f ? 1.0f / L : 0.0f;
        for (int64_t d = 0; d < D; ++d)
            out[d] *= inv;
    }
}

} // namespace

void ggml_cpu_op_flash_attn_ext(const ggml_cpu_params & p, ggml_tensor * dst) {
    fa_op op;
    op.q = dst->src[0];
    op.k = dst->src[1];
    op.v = dst->src[2];
    op.mask = dst->src[3];
    op.dst = dst;
    const ggml_tensor *q = op.q, *k = op.k, *v = op.v, *mask = op.mask;
    const int64_t D = q->ne[0], n_tokens = q->ne[1], n_head = q->ne[2];
    const int64_t n_kv = k->ne[1], n_head_kv = k->ne[2];
    GGML_ASSERT(q->type == GGML_TYPE_F32);
    GGML_ASSERT(k->ne[0] == D && v->ne[0] == D && v->ne[1] == n_kv && v->ne[2] == n_head_kv);
    GGML_ASSERT(n_head_kv > 0 && n_head % n_head_kv == 0 && q->ne[3] == 1 && k->ne[3] == 1 && v->ne[3] == 1);
    GGML_ASSERT(k->nb[0] == ggml_type_size(k->type) && v->nb[0] == ggml_type_size(v->type) &&
                "flash_attn_ext: K/V rows must be dense");
    GGML_ASSERT(D % ggml_blck_size(k->type) == 0 && D % ggml_blck_size(v->type) == 0 &&
                "flash_attn_ext: head size must be a multiple of the K/V block");
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst));
    GGML_ASSERT(dst->ne[0] == D && dst->ne[1] == n_head && dst->ne[2] == n_tokens);
    if (mask) {
        GGML_ASSERT(ggml_cpu_is_float(mask->type) && mask->ne[0] == n_kv && mask->ne[1] >= n_tokens);
        GGML_ASSERT(n_head % mask->ne[2] == 0);
        GGML_ASSERT(mask->type == GGML_TYPE_F16 || mask->nb[0] % sizeof(float) == 0);
    }
    op.scale = ggml_get_op_params_f32(dst, 0);
    op.n_past = ggml_get_op_params_i32(dst, 1);
    op.pl = ggml_cpu_fa_plan_make(dst, p.nth);
    const ggml_cpu_fa_plan & pl = op.pl;
    GGML_ASSERT(pl.bq <= FA_BQ);

    op.k_quant = ggml_is_quantized(k->type);
    op.q_quantize = nullptr;
    if (op.k_quant) {
        const ggml_type vdt = ggml_cpu_get_type_traits(k->type)->vec_dot_type;
        GGML_ASSERT(vdt != GGML_TYPE_COUNT && "flash_attn_ext: K type has no CPU dot");
        op.q_quantize = ggml_cpu_get_type_traits(vdt)->from_float;
    }
    for (int r = 0; r < GGML_TILE_MAX_R; ++r) {
        for (int c = 0; c < GGML_TILE_MAX_C; ++c) {
            op.tiles[r][c] = ggml_cpu_get_tile_dot(k->type, false, r + 1, c + 1);
            op.tiles_f32[r][c] = ggml_cpu_get_tile_dot(GGML_TYPE_F32, false, r + 1, c + 1);
        }
    }

    GGML_ASSERT(p.wdata && p.wsize >= pl.work_size(p.nth) &&
                "flash_attn_ext: scratch too small (ggml_cpu_op_work_size)");
    char * base = (char *)(((uintptr_t)p.wdata + 63) / 64 * 64);
    float * partials = pl.n_split > 1 ? (float *)(base + (size_t)p.nth * pl.thread_bytes) : nullptr;
    const fa_scratch w = scratch_of(pl, op.k_quant, base + (size_t)p.ith * pl.thread_bytes);
    const size_t slot = (size_t)pl.bq * (pl.D + 2);

    // tasks (unit, chunk), the most expensive (last query blocks: the most keys under a causal mask) first
    const int64_t n_tasks = pl.n_units * pl.n_split;
    auto run = [&](int64_t t) {
        t = n_tasks - 1 - t;
        const int64_t unit = t / pl.n_split, split = t % pl.n_split;
        fa_task(op, w, unit, split, partials ? partials + (unit * pl.n_split + split) * slot : nullptr);
    };
    if (p.counter && p.nth > 1) {
        for (int64_t t = p.counter->fetch_add(1, std::memory_order_relaxed); t < n_tasks;
             t = p.counter->fetch_add(1, std::memory_order_relaxed))
            run(t);
    } else {
        for (int64_t t = p.ith; t < n_tasks; t += p.nth)
            run(t);
    }
    if (pl.n_split > 1) {
        p.barrier();
        for (int64_t u = p.ith; u < pl.n_units; u += p.nth)
            fa_combine(op, partials, u);
    }
}
