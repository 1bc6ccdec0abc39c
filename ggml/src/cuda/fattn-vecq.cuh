// fattn-vecq.cuh - decode attention (at most 8 query rows per kv head) on a q8_0 / q4_0 KV cache read in place: K
// and V each q8_0, q4_0 or f16 (at least one of them a block type), D 64, 96 or 128. Instances: one file per (K, V)
// pair, fattn-vecq-<k>-<v>.cu; fattn.cu picks them (ggml_cuda_fattn_vecq) and launches them as its f16 decode kernel
// (KV splits sized to one wave of resident blocks, merged by the last block of each kv head: fattn-common.cuh), or,
// for a batch of many sequences' decode tokens on a shared cache (p.per_token), one block per token over the keys of
// its own visible range, as the f16 kernel does.
//
// Layout. A key is worked on by T lanes (a power of two), each owning a slice of L consecutive dims (L = 32, 16, 8
// for 1, 2-4, 5-8 queries: the accumulators take NQ x L registers); the G = 32 / T lane groups of a warp take G
// different keys at once, KB keys each per step, the next step's K/V slices and mask values loaded before the
// current ones are used. A slice lies inside one 32-value block, so a lane reads its block's f16 scale and L int8
// quants (q8_0) or nibbles (q4_0, L <= 16 bytes) as 4-byte words: a block type's rows are only 2-byte aligned, so
// the words are loaded from the 4-byte boundary below and realigned with one __byte_perm each. D = 96 runs with
// T x L = 128 (the lanes past D idle).
// Scores. K.q per slice, then a sum over the T lanes of the key (log2 T shuffles, against 5 for a full warp). A
// block-type K is dotted as integers (__dp4a) against the query quantized to int8 per 32 dims (scale d_q, as q8_1
// without the sum) once per block: d_k d_q sum(k_i q_i), q4_0 as sum(n_i q_i) - 8 sum(q_i). The query is scaled by
// scale x log2(e) first, so the softmax is exp2.
// Softmax. Each lane group keeps its own running (m, l) per query over the keys it saw, so no cross-group traffic in
// the loop; the accumulators are rescaled only in steps where some group's max grew (warp vote). At the end the G
// groups of a warp are merged with shuffles, then the W warps through shared memory (fattn_vec_finish).
// V. A slice's values are made floats without I2F: a byte b becomes the float 2^23 + b by __byte_perm with 0x4B000000
// and the bias is subtracted (q8_0: b = q + 128 after flipping the sign bits; q4_0: b = the nibble, bias 2^23 + 8);
// then acc += (p d_v) x value for each query.
#pragma once
#include "fattn-common.cuh"

#include <climits>

// lanes per key for D dims in slices of L: the next power of two of D / L
constexpr int kvq_lanes(int D, int L) {
    int t = 1;
    while (t * L < D)
        t *= 2;
    return t;
}

// the float 2^23 + byte k of x (0..255)
static __device__ __forceinline__ float kvq_byte_f(uint32_t x, int k) {
    return __uint_as_float(__byte_perm(x, 0x4B000000u, 0x7440u | (unsigned)k));
}
// an int of magnitude < 2^22 as a float, without I2F
static __device__ __forceinline__ float kvq_i2f(int v) { return __int_as_float(v + 0x4B400000) - 12582912.0f; }

// ---- lane slices: L dims [t L, t L + L) of one K or V row (of one kv head) --------------------------------------
// raw: what a lane loads (load / zero); scale(): the block's d (1 for f16); values(): the L values without d; for
// the block types idot(): the integer dot with the query's int8 slice; for f16 fdot(): the float dot. sh: the nibble
// (0 or 4) of a q4_0 slice of at most 16 values (dims 16..31 of a block sit in the high nibbles).
// What a lane loads of a block-type slice: the NW 4-byte words covering its quants (off bytes past the block's f16
// scale), one more when the block is only 2-byte aligned, the __byte_perm selector realigning them, and the scale.
template <int NW> struct kvq_words {
    uint32_t w[NW + 1];
    uint32_t sel;
    uint32_t d; // f16 bits of the block's scale
    __device__ __forceinline__ void load(const char * blk, int off) {
        const uintptr_t a = (uintptr_t)(blk + 2 + off);
        const uint32_t * wp = (const uint32_t *)(a & ~(uintptr_t)3);
        const bool mis = (a & 2) != 0;
#pragma unroll
        for (int i = 0; i < NW; ++i)
            w[i] = __ldg(wp + i);
        w[NW] = mis ? __ldg(wp + NW) : 0u;
        sel = mis ? 0x5432u : 0x3210u;
        d = __ldg((const unsigned short *)blk);
    }
    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i <= NW; ++i)
            w[i] = 0u;
        sel = 0x3210u;
        d = 0u;
    }
    __device__ __forceinline__ uint32_t word(int i) const { return __byte_perm(w[i], w[i + 1], sel); }
    __device__ __forceinline__ float scale() const { return __half2float(__ushort_as_half((unsigned short)d)); }
};

template <int L> struct kvq_s_q8_0 {
    static constexpr bool quant = true;
    static constexpr int NW = L / 4; // words of quants
    using raw = kvq_words<NW>;
    static __device__ __forceinline__ void load(raw & r, const char * row, int t) {
        r.load(row + (t * L / 32) * 34, (t * L) % 32);
    }
    static __device__ __forceinline__ void zero(raw & r) { r.zero(); }
    static __device__ __forceinline__ uint32_t word(const raw & r, int i) { return r.word(i); }
    static __device__ __forceinline__ float scale(const raw & r) { return r.scale(); }
    static __device__ __forceinline__ int idot(const raw & r, const int (&q)[L / 4], int, int) {
        int s = 0;
#pragma unroll
        for (int i = 0; i < NW; ++i)
            s = __dp4a((int)word(r, i), q[i], s);
        return s;
    }
    static __device__ __forceinline__ void values(const raw & r, int, float (&v)[L]) {
#pragma unroll
        for (int i = 0; i < NW; ++i) {
            const uint32_t x = word(r, i) ^ 0x80808080u; // q + 128
#pragma unroll
            for (int k = 0; k < 4; ++k)
                v[4 * i + k] = kvq_byte_f(x, k) - 8388736.0f; // 2^23 + 128
        }
    }
};

template <int L> struct kvq_s_q4_0 {
    static constexpr bool quant = true;
    static constexpr int NB = L < 16 ? L : 16; // bytes of quants a slice reads
    static constexpr int NW = NB / 4;
    using raw = kvq_words<NW>;
    static __device__ __forceinline__ void load(raw & r, const char * row, int t) {
        r.load(row + (t * L / 32) * 18, ((t * L) % 32) % 16);
    }
    static __device__ __forceinline__ void zero(raw & r) { r.zero(); }
    static __device__ __forceinline__ uint32_t word(const raw & r, int i) { return r.word(i); }
    static __device__ __forceinline__ float scale(const raw & r) { return r.scale(); }
    static __device__ __forceinline__ int idot(const raw & r, const int (&q)[L / 4], int qsum, int sh) {
        int s = 0;
        if constexpr (L == 32) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t w = word(r, i);
                s = __dp4a((int)(w & 0x0F0F0F0Fu), q[i], s);
                s = __dp4a((int)((w >> 4) & 0x0F0F0F0Fu), q[4 + i], s);
            }
        } else {
#pragma unroll
            for (int i = 0; i < NW; ++i)
                s = __dp4a((int)((word(r, i) >> sh) & 0x0F0F0F0Fu), q[i], s);
        }
        return s - 8 * qsum;
    }
    static __device__ __forceinline__ void values(const raw & r, int sh, float (&v)[L]) {
        if constexpr (L == 32) {
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                const uint32_t w = word(r, i), lo = w & 0x0F0F0F0Fu, hi = (w >> 4) & 0x0F0F0F0Fu;
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    v[4 * i + k] = kvq_byte_f(lo, k) - 8388616.0f; // 2^23 + 8
                    v[16 + 4 * i + k] = kvq_byte_f(hi, k) - 8388616.0f;
                }
            }
        } else {
#pragma unroll
            for (int i = 0; i < NW; ++i) {
                const uint32_t x = (word(r, i) >> sh) & 0x0F0F0F0Fu;
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    v[4 * i + k] = kvq_byte_f(x, k) - 8388616.0f;
            }
        }
    }
};

template <int L> struct kvq_s_f16 { // rows 8-byte aligned (fattn.cu checks)
    static constexpr bool quant = false;
    struct raw {
        uint2 w[L / 4]; // 4 halves each
    };
    static __device__ __forceinline__ void load(raw & r, const char * row, int t) {
        const uint2 * p = (const uint2 *)(row + t * L * 2);
#pragma unroll
        for (int i = 0; i < L / 4; ++i)
            r.w[i] = __ldg(p + i);
    }
    static __device__ __forceinline__ void zero(raw & r) {
#pragma unroll
        for (int i = 0; i < L / 4; ++i)
            r.w[i] = make_uint2(0u, 0u);
    }
    static __device__ __forceinline__ float scale(const raw &) { return 1.0f; }
    static __device__ __forceinline__ void values(const raw & r, int, float (&v)[L]) {
#pragma unroll
        for (int i = 0; i < L / 4; ++i) {
            const float2 a = __half22float2(*(const half2 *)&r.w[i].x), b = __half22float2(*(const half2 *)&r.w[i].y);
            v[4 * i] = a.x;
            v[4 * i + 1] = a.y;
            v[4 * i + 2] = b.x;
            v[4 * i + 3] = b.y;
        }
    }
    static __device__ __forceinline__ float fdot(const raw & r, const float (&q)[L]) {
        float v[L];
        values(r, 0, v);
        float s = 0.0f;
#pragma unroll
        for (int i = 0; i < L; ++i)
            s += q[i] * v[i];
        return s;
    }
};

// ---- the query slice of a lane: int8 per 32 dims against a block-type K, floats against an f16 K ----------------
template <bool INT8, int L> struct kvq_query;
template <int L> struct kvq_query<true, L> {
    int q[L / 4]; // 4 int8 each
    float d;      // the 32-block's scale
    int sum;      // sum of this slice's int8 values (q4_0's -8 offset)
    // x: this lane's L dims; the lanes of one 32-block (32 / L neighbours) agree on d. Every lane calls.
    __device__ __forceinline__ void set(const float (&x)[L]) {
        float amax = 0.0f;
#pragma unroll
        for (int i = 0; i < L; ++i)
            amax = fmaxf(amax, fabsf(x[i]));
#pragma unroll
        for (int o = 1; o < 32 / L; o <<= 1)
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
        d = amax / 127.0f;
        const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
        sum = 0;
#pragma unroll
        for (int i = 0; i < L / 4; ++i) {
            int w = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const int v = max(-127, min(127, __float2int_rn(x[4 * i + k] * id)));
                sum += v;
                w |= (v & 0xff) << (8 * k);
            }
            q[i] = w;
        }
    }
};
template <int L> struct kvq_query<false, L> {
    float q[L];
    __device__ __forceinline__ void set(const float (&x)[L]) {
#pragma unroll
        for (int i = 0; i < L; ++i)
            q[i] = x[i];
    }
};

// the slice's share of a score (f32; summed over the key's T lanes by the caller)
template <typename KS, int L>
static __device__ __forceinline__ float kvq_score(const typename KS::raw & r, const kvq_query<KS::quant, L> & q, int sh) {
    if constexpr (KS::quant) {
        return kvq_i2f(KS::idot(r, q.q, q.sum, sh)) * (KS::scale(r) * q.d);
    } else {
        return KS::fdot(r, q.q);
    }
}

// the K/V slices and mask values (log2 units; 0 without a mask; MT mask rows) of keys key_g + b G (b < KB); zeros
// past kv1
template <typename KS, typename VS, int MT, int KB, int G>
static __device__ __forceinline__ void kvq_load(const fa_params & p, const char * kb, const char * vb, int key_g, int kv1,
                                                int t, bool on, const char * const (&mrow)[MT],
                                                typename KS::raw (&kr)[KB], typename VS::raw (&vr)[KB],
                                                float (&mk)[MT][KB]) {
    constexpr float LOG2E = 1.4426950408889634f;
#pragma unroll
    for (int b = 0; b < KB; ++b) {
        const int key = key_g + b * G;
        if (key < kv1 && on) {
            KS::load(kr[b], kb + key * p.ks.nb[1], t);
            VS::load(vr[b], vb + key * p.vs.nb[1], t);
        } else {
            KS::zero(kr[b]);
            VS::zero(vr[b]);
        }
#pragma unroll
        for (int j = 0; j < MT; ++j) {
            mk[j][b] = 0.0f;
            if (key < kv1 && mrow[j])
                mk[j][b] = LOG2E * (p.mask_f16 ? __half2float(*(const half *)(mrow[j] + key * p.ms.nb[0]))
                                               : *(const float *)(mrow[j] + key * p.ms.nb[0]));
        }
    }
}

// NQ queries per block (the kv head's n_q <= NQ); MT = 1: one token whose mask row all heads share (decode of one
// sequence: one mask row and causal limit in registers), MT = NQ: one per query.
template <typename KS, typename VS, int D, int L, int NQ, int MT, int W, int KB>
static __global__ void __launch_bounds__(W * 32) k_fattn_vecq(fa_params p) {
    constexpr int T = kvq_lanes(D, L), G = 32 / T, S = G * KB; // S: keys of a warp step
    static_assert(T * G == 32 && D % L == 0 && 32 % L == 0 && (MT == 1 || MT == NQ), "fattn vecq: slices");
    constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
    __shared__ float s_acc[W][NQ][D];
    __shared__ float s_ml[W][NQ][2];
    pdl_start();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / T, t = lane % T;
    const bool on = t * L < D;                    // D = 96: lanes of dims 96..127 idle
    const int sh = (t * L) % 32 >= 16 ? 4 : 0;    // q4_0 slices of dims 16..31 of a block: high nibbles
    const int hk = blockIdx.y, split = blockIdx.z;
    // the block's queries qbase .. qbase + n_q - 1 of the kv head: all of them, or token blockIdx.x's r (per_token:
    // a batch of many sequences' decode tokens, each block over its own token's visible range; MT 1)
    const int qbase = p.per_token ? blockIdx.x * p.r : 0;
    const int n_q = p.per_token ? p.r : p.n_tokens * p.r;

    kvq_query<KS::quant, L> q[NQ];
    float acc[NQ][L], m[NQ], l[NQ];
    int last[MT]; // last visible key of a mask slot's token (causal), INT_MAX without
    const char * mrow[MT];
#pragma unroll
    for (int j = 0; j < NQ; ++j) {
        const int qi = qbase + (j < n_q ? j : 0);
        const int tok = qi / p.r, h = hk * p.r + qi % p.r;
        const char * qrow = p.q + tok * p.qs.nb[1] + h * p.qs.nb[2];
        float x[L];
#pragma unroll
        for (int i = 0; i < L; ++i) {
            x[i] = j < n_q && on ? *(const float *)(qrow + (t * L + i) * p.qs.nb[0]) * (p.scale * LOG2E) : 0.0f;
            acc[j][i] = 0.0f;
        }
        q[j].set(x);
        m[j] = -INFINITY;
        l[j] = 0.0f;
        if (j < MT) {
            last[j] = p.causal_n_past >= 0 ? p.causal_n_past + tok : INT_MAX;
            mrow[j] = p.mask ? p.mask + tok * p.ms.nb[1] + (h % p.ms.ne[2]) * p.ms.nb[2] : nullptr;
        }
    }

    int kv0, kv1; // the split's keys within the tokens' visible ranges (p.ranges)
    fattn_block_keys(p, split, qbase / p.r, (qbase + n_q - 1) / p.r, kv0, kv1);
    if ((p.per_token || p.n_tokens == 1) && fattn_token_exact(p, qbase / p.r)) // an exact range: no mask reads
#pragma unroll
        for (int j = 0; j < MT; ++j)
            mrow[j] = nullptr;
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    typename KS::raw kr[KB];
    typename VS::raw vr[KB];
    float mk[MT][KB];
    int key0 = kv0 + warp * S; // this warp's step: keys key0 + b G + g
    kvq_load<KS, VS, MT, KB, G>(p, kb, vb, key0 + g, kv1, t, on, mrow, kr, vr, mk);
    for (; key0 < kv1; key0 += W * S) { // uniform over the warp
        typename KS::raw kn[KB];
        typename VS::raw vn[KB];
        float mn[MT][KB];
        kvq_load<KS, VS, MT, KB, G>(p, kb, vb, key0 + W * S + g, kv1, t, on, mrow, kn, vn, mn);

        float s[NQ][KB];
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            const int key = key0 + b * G + g;
#pragma unroll
            for (int j = 0; j < NQ; ++j) {
                float d = kvq_score<KS, L>(kr[b], q[j], sh);
#pragma unroll
                for (int o = T / 2; o > 0; o >>= 1)
                    d += __shfl_xor_sync(0xffffffffu, d, o);
                const int js = MT == 1 ? 0 : j;
                s[j][b] = j < n_q && key < kv1 && key <= last[js] ? d + mk[js][b] : -INFINITY;
            }
        }
        // online softmax of each group's keys (log2 units)
        float pw[NQ][KB], alpha[NQ];
        bool grew = false;
#pragma unroll
        for (int j = 0; j < NQ; ++j) {
            float mx = s[j][0];
#pragma unroll
            for (int b = 1; b < KB; ++b)
                mx = fmaxf(mx, s[j][b]);
            const float m_new = fmaxf(m[j], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; // nothing visible yet: every weight 0
            const bool up = m_new > m[j];
            alpha[j] = up ? exp2f(m[j] - m_use) : 1.0f;
            grew = grew || up;
            float ps = 0.0f;
#pragma unroll
            for (int b = 0; b < KB; ++b) {
                pw[j][b] = exp2f(s[j][b] - m_use); // 0 for -inf scores
                ps += pw[j][b];
            }
            l[j] = l[j] * alpha[j] + ps;
            m[j] = m_new;
        }
        if (__any_sync(0xffffffffu, grew)) {
#pragma unroll
            for (int j = 0; j < NQ; ++j)
#pragma unroll
                for (int i = 0; i < L; ++i)
                    acc[j][i] *= alpha[j];
        }
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            float v[L];
            VS::values(vr[b], sh, v);
            const float dv = VS::scale(vr[b]);
#pragma unroll
            for (int j = 0; j < NQ; ++j) {
                const float pv = pw[j][b] * dv;
#pragma unroll
                for (int i = 0; i < L; ++i)
                    acc[j][i] += pv * v[i];
            }
        }
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            kr[b] = kn[b];
            vr[b] = vn[b];
#pragma unroll
            for (int j = 0; j < MT; ++j)
                mk[j][b] = mn[j][b];
        }
    }

    // merge the G groups of the warp (lanes t, t + T, ... hold the same dims), then the warps (fattn_vec_finish)
#pragma unroll
    for (int j = 0; j < NQ; ++j) {
        float M = m[j];
#pragma unroll
        for (int o = T; o < 32; o <<= 1)
            M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        const float sc = m[j] == -INFINITY ? 0.0f : exp2f(m[j] - M);
        float lj = l[j] * sc;
#pragma unroll
        for (int o = T; o < 32; o <<= 1)
            lj += __shfl_xor_sync(0xffffffffu, lj, o);
#pragma unroll
        for (int i = 0; i < L; ++i) {
            float a = acc[j][i] * sc;
#pragma unroll
            for (int o = T; o < 32; o <<= 1)
                a += __shfl_xor_sync(0xffffffffu, a, o);
            if (g == 0 && on) s_acc[warp][j][t * L + i] = a;
        }
        if (lane == 0) {
            s_ml[warp][j][0] = M == -INFINITY ? -INFINITY : M * LN2; // natural-log units for the merge
            s_ml[warp][j][1] = lj;
        }
    }
    fattn_vec_finish<W, NQ, D>(p, s_acc, s_ml, hk, split, n_q, qbase);
}

// The kernel for n_q queries per kv head (1..8) of n_tokens tokens; one_row: one mask row and causal limit for all
// (one token, a mask broadcast over heads or none; or a block per token, p.per_token, with n_q = r). W warps per
// block, S keys per warp step.
template <template <int> class KS, template <int> class VS, int D>
static fattn_vec_fn fattn_vecq_pick_nq(int n_q, bool one_row, int & W, int & S) {
    W = 4;
    if (!one_row) { // several tokens in a step (parallel sequences): per-query masks, the 8-query kernel
        S = 32 / kvq_lanes(D, 8);
        return k_fattn_vecq<KS<8>, VS<8>, D, 8, 8, 8, 4, 1>;
    }
    constexpr int KB = 2;
    if (n_q <= 1) {
        S = 32 / kvq_lanes(D, 32) * KB;
        return k_fattn_vecq<KS<32>, VS<32>, D, 32, 1, 1, 4, KB>;
    }
    if (n_q <= 2) {
        S = 32 / kvq_lanes(D, 16) * KB;
        return k_fattn_vecq<KS<16>, VS<16>, D, 16, 2, 1, 4, KB>;
    }
    if (n_q <= 4) {
        S = 32 / kvq_lanes(D, 16) * KB;
        return k_fattn_vecq<KS<16>, VS<16>, D, 16, 4, 1, 4, KB>;
    }
    S = 32 / kvq_lanes(D, 8) * KB;
    return k_fattn_vecq<KS<8>, VS<8>, D, 8, 8, 1, 4, KB>;
}

template <template <int> class KS, template <int> class VS>
static fattn_vec_fn fattn_vecq_pick(int D, int n_q, bool one_row, int & W, int & S) {
    switch (D) {
        case 64: return fattn_vecq_pick_nq<KS, VS, 64>(n_q, one_row, W, S);
        case 96: return fattn_vecq_pick_nq<KS, VS, 96>(n_q, one_row, W, S);
        case 128: return fattn_vecq_pick_nq<KS, VS, 128>(n_q, one_row, W, S);
        default: return nullptr;
    }
}

// One function per (K, V) pair (fattn-vecq-<k>-<v>.cu): the kernel for head size D and n_q queries per kv head
// (nullptr: no instance for this D), with its warps per block W and keys per warp step S.
#define GGML_CUDA_FATTN_VECQ_DECL(KN, VN)                                                                              \
    fattn_vec_fn ggml_cuda_fattn_vecq_##KN##_##VN(int D, int n_q, bool one_row, int & W, int & S)
#define GGML_CUDA_FATTN_VECQ_INSTANCE(KN, VN)                                                                          \
    GGML_CUDA_FATTN_VECQ_DECL(KN, VN) { return fattn_vecq_pick<kvq_s_##KN, kvq_s_##VN>(D, n_q, one_row, W, S); }
GGML_CUDA_FATTN_VECQ_DECL(q8_0, q8_0);
GGML_CUDA_FATTN_VECQ_DECL(q8_0, q4_0);
GGML_CUDA_FATTN_VECQ_DECL(q8_0, f16);
GGML_CUDA_FATTN_VECQ_DECL(q4_0, q8_0);
GGML_CUDA_FATTN_VECQ_DECL(q4_0, q4_0);
GGML_CUDA_FATTN_VECQ_DECL(q4_0, f16);
GGML_CUDA_FATTN_VECQ_DECL(f16, q8_0);
GGML_CUDA_FATTN_VECQ_DECL(f16, q4_0);
