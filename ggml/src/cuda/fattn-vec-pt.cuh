// fattn-vec-pt.cuh - the decode block of one token and one query row per kv head over an f16 cache (a batch of many
// sequences' decode tokens on MHA, Llama 2: fattn_vec's per_token path with r = 1), keys across the lanes.
//
// k_fattn_vec (fattn.cu) spreads one key's D dims over the 32 lanes (E = D / 32 each) and sums every score over the
// warp: 5 shuffles and 5 adds a key, 8-byte loads, a branch a key; ncu on an H200 (Llama-2-7B, B = 64, depth
// 512-640): 71 warp instructions a key, the issue slots 65% busy at 65% of the DRAM bandwidth. Here a key's row is
// read by LPK = D / 16 lanes (16 dims, two 16-byte loads of K and two of V each), so a warp holds KPS = 32 / LPK keys
// per load and sums a score over LPK lanes (log2 LPK shuffles for KPS keys at once). The online softmax keeps one m
// for the warp (the step's maximum over all its keys), so each lane group's unnormalised sums add up at the end.
//
// Lane l: key group kg = l / LPK (key key0 + KPS s + kg of set s), dims 16 (l % LPK) .. + 15.
#pragma once
#include "fattn-common.cuh"

#define FA_PT_W 4 // warps a block (as k_fattn_vec's per-token form: 4 blocks share an SM)

// 16 halves at p (16-byte aligned) as 2 x uint4
struct fa_pt_row {
    uint4 a, b;
    __device__ __forceinline__ void load(const half * p) {
        a = *(const uint4 *)p;
        b = *(const uint4 *)(p + 8);
    }
    __device__ __forceinline__ void zero() { a = b = make_uint4(0, 0, 0, 0); }
    __device__ __forceinline__ float2 pair(int i) const { // values 2i, 2i + 1
        const unsigned w = i < 4 ? (&a.x)[i] : (&b.x)[i - 4];
        return __half22float2(*(const half2 *)&w);
    }
};

// D dims, S key sets per warp step (KPS * S keys)
template <int D, int S>
static __global__ void __launch_bounds__(FA_PT_W * 32) k_fattn_vec_pt(fa_params p) {
    constexpr int LPK = D / 16, KPS = 32 / LPK, KB = KPS * S, W = FA_PT_W;
    static_assert(D % 16 == 0 && 32 % LPK == 0, "D 64, 128 or 256");
    __shared__ float s_acc[W][1][D];
    __shared__ float s_ml[W][1][2];
    pdl_start();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, kg = lane / LPK, g = lane % LPK;
    const int hk = blockIdx.y, t = blockIdx.x; // one query: token t, head hk (r = 1)

    float q[16], acc[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        q[i] = *(const float *)(p.q + (16 * g + i) * p.qs.nb[0] + t * p.qs.nb[1] + hk * p.qs.nb[2]) * p.scale;
        acc[i] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f; // m: the warp's, l: this lane group's keys
    const int last = p.causal_n_past >= 0 ? p.causal_n_past + t : INT_MAX;
    const char * mrow = p.mask && !fattn_token_exact(p, t) ? p.mask + t * p.ms.nb[1] + (hk % p.ms.ne[2]) * p.ms.nb[2]
                                                          : nullptr;
    int kv0, kv1;
    fattn_block_keys(p, 0, t, t, kv0, kv1);
    const half * kb = (const half *)(p.k + hk * p.ks.nb[2]) + 16 * g;
    const half * vb = (const half *)(p.v + hk * p.vs.nb[2]) + 16 * g;
    const int64_t ks = p.ks.nb[1] / 2, vs = p.vs.nb[1] / 2; // in halves

    // the rows (and mask values) of this lane's keys of the step from key0
    auto load = [&](int key0, fa_pt_row (&kr)[S], fa_pt_row (&vr)[S], float (&mk)[S]) {
#pragma unroll
        for (int s = 0; s < S; ++s) {
            const int key = key0 + KPS * s + kg;
            mk[s] = 0.0f;
            if (key < kv1) {
                kr[s].load(kb + key * ks);
                vr[s].load(vb + key * vs);
                if (mrow)
                    mk[s] = p.mask_f16 ? __half2float(*(const half *)(mrow + key * p.ms.nb[0]))
                                       : *(const float *)(mrow + key * p.ms.nb[0]);
            } else {
                kr[s].zero();
                vr[s].zero();
            }
        }
    };
    fa_pt_row kr[S], vr[S];
    float mk[S];
    int key0 = kv0 + warp * KB;
    load(key0, kr, vr, mk);
    for (; key0 < kv1; key0 += W * KB) {
        fa_pt_row kn[S], vn[S]; // the next step's rows, in flight while these are used
        float mn[S];
        load(key0 + W * KB, kn, vn, mn);
        float sc[S], smax = -INFINITY;
#pragma unroll
        for (int s = 0; s < S; ++s) {
            float d = 0.0f;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                const float2 k2 = kr[s].pair(i);
                d = fmaf(q[2 * i], k2.x, fmaf(q[2 * i + 1], k2.y, d));
            }
#pragma unroll
            for (int o = 1; o < LPK; o *= 2)
                d += __shfl_xor_sync(0xffffffff, d, o);
            const int key = key0 + KPS * s + kg;
            sc[s] = key < kv1 && key <= last ? d + mk[s] : -INFINITY;
            smax = fmaxf(smax, sc[s]);
        }
#pragma unroll
        for (int o = LPK; o < 32; o *= 2)
            smax = fmaxf(smax, __shfl_xor_sync(0xffffffff, smax, o));
        const float m_new = fmaxf(m, smax);
        if (m_new != -INFINITY) { // (uniform over the warp)
            const float alpha = expf(m - m_new);
            float pb[S], psum = 0.0f;
#pragma unroll
            for (int s = 0; s < S; ++s) {
                pb[s] = expf(sc[s] - m_new); // 0 for -inf scores
                psum += pb[s];
            }
            l = l * alpha + psum;
            m = m_new;
#pragma unroll
            for (int i = 0; i < 8; ++i) {
                float a0 = acc[2 * i] * alpha, a1 = acc[2 * i + 1] * alpha;
#pragma unroll
                for (int s = 0; s < S; ++s) {
                    const float2 v2 = vr[s].pair(i);
                    a0 = fmaf(pb[s], v2.x, a0);
                    a1 = fmaf(pb[s], v2.y, a1);
                }
                acc[2 * i] = a0;
                acc[2 * i + 1] = a1;
            }
        }
#pragma unroll
        for (int s = 0; s < S; ++s) {
            kr[s] = kn[s];
            vr[s] = vn[s];
            mk[s] = mn[s];
        }
    }
    // the lane groups' sums (one m for the warp): lanes 0 .. LPK - 1 hold the warp's
#pragma unroll
    for (int o = LPK; o < 32; o *= 2) {
        l += __shfl_xor_sync(0xffffffff, l, o);
#pragma unroll
        for (int i = 0; i < 16; ++i)
            acc[i] += __shfl_xor_sync(0xffffffff, acc[i], o);
    }
    if (kg == 0) {
#pragma unroll
        for (int i = 0; i < 16; ++i)
            s_acc[warp][0][16 * g + i] = acc[i];
    }
    if (lane == 0) {
        s_ml[warp][0][0] = m;
        s_ml[warp][0][1] = l;
    }
    fattn_vec_finish<W, 1, D>(p, s_acc, s_ml, hk, 0, 1, t);
}

// the instance for p (one query row per kv head; head size 64, 128 or 256; K and V rows and heads 16-byte aligned),
// or nullptr where it does not take p
static fattn_vec_fn fattn_vec_pt_pick(const fa_params & p) {
    const bool aligned = p.ks.nb[1] % 16 == 0 && p.ks.nb[2] % 16 == 0 && p.vs.nb[1] % 16 == 0 && p.vs.nb[2] % 16 == 0 &&
                         (uintptr_t)p.k % 16 == 0 && (uintptr_t)p.v % 16 == 0;
    if (p.r != 1 || !aligned) return nullptr;
    switch (p.D) {
        case 64:
            return k_fattn_vec_pt<64, 2>;
        case 128:
            return k_fattn_vec_pt<128, 2>;
        case 256:
            return k_fattn_vec_pt<256, 4>;
        default:
            return nullptr;
    }
}
