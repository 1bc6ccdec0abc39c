// fattn.cu - see fattn.cuh.
// Block = FA_WARPS warps; each warp owns one query row (token t, head h); the block's queries
// share one kv head, so a K/V tile of 32 keys (in shared memory, as f32) serves all of them.
// Scores: lane j takes key j of the tile (full dot over D from shared memory). Softmax is online
// (running max m and sum l per query). PV: lane owns dims lane, lane+32, ...
#include "cpy.cuh"
#include "fattn-common.cuh"
#include "fattn-mma.cuh"
#include "fattn-range.cuh"
#include "fattn-vec-pt.cuh"
#include "fattn-vecq.cuh"
#include "fattn.cuh"
#include "quantize.cuh"
#include "softmax.cuh"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <type_traits>
#include <utility>

#define FA_WARPS 8
#define FA_TILE 32

template <typename T> static __global__ void __launch_bounds__(FA_WARPS * 32) k_fattn(fa_params p) {
    extern __shared__ float smem[];
    const int D = p.D, DP = D + 1;
    float * Ks = smem;              // [FA_TILE][D+1]
    float * Vs = Ks + FA_TILE * DP; // [FA_TILE][D]
    float * Qs = Vs + FA_TILE * D;  // [FA_WARPS][D]
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hk = blockIdx.y, split = blockIdx.z;
    const int n_q = p.n_tokens * p.r;            // queries of this kv head
    const int qi = blockIdx.x * FA_WARPS + warp; // t * r + (h - hk*r)
    const bool active = qi < n_q;
    const int t = active ? qi / p.r : 0;
    const int h = hk * p.r + (active ? qi % p.r : 0);

    for (int d = lane; d < D; d += 32)
        Qs[warp * D + d] =
            active ? *(const float *)(p.q + d * p.qs.nb[0] + t * p.qs.nb[1] + h * p.qs.nb[2]) * p.scale : 0.0f;

    const int kv0 = split * p.kv_per_split;
    int kv1 = min(p.n_kv, kv0 + p.kv_per_split);
    if (p.causal_n_past >= 0) { // last key any query of this block can see
        const int q_last = min(n_q - 1, (int)(blockIdx.x * FA_WARPS + FA_WARPS - 1));
        kv1 = min(kv1, p.causal_n_past + q_last / p.r + 1);
    }
    const int my_last = p.causal_n_past >= 0 ? p.causal_n_past + t : INT_MAX;

    float m = -INFINITY, l = 0.0f;
    float acc[FATTN_MAX_D / 32];
#pragma unroll
    for (int i = 0; i < FATTN_MAX_D / 32; ++i)
        acc[i] = 0.0f;

    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    const char * mrow = p.mask ? p.mask + t * p.ms.nb[1] + (h % p.ms.ne[2]) * p.ms.nb[2] : nullptr;

    for (int j0 = kv0; j0 < kv1; j0 += FA_TILE) {
        __syncthreads();
        for (int e = threadIdx.x; e < FA_TILE * D; e += blockDim.x) {
            const int j = e / D, d = e % D;
            const int key = j0 + j;
            float kv = 0.0f, vv = 0.0f;
            if (key < kv1) {
                kv = to_f32<T>(*(const T *)(kb + key * p.ks.nb[1] + d * p.ks.nb[0]));
                vv = to_f32<T>(*(const T *)(vb + key * p.vs.nb[1] + d * p.vs.nb[0]));
            }
            Ks[j * DP + d] = kv;
            Vs[j * D + d] = vv;
        }
        __syncthreads();
        if (!active) continue;
        const int key = j0 + lane;
        float s = -INFINITY;
        if (key < kv1 && key <= my_last) {
            s = 0.0f;
            const float * qv = Qs + warp * D;
            const float * kr = Ks + lane * DP;
            for (int d = 0; d < D; ++d)
                s += qv[d] * kr[d];
            if (mrow)
                s += p.mask_f16 ? __half2float(*(const half *)(mrow + key * p.ms.nb[0]))
                                : *(const float *)(mrow + key * p.ms.nb[0]);
        }
        const float m_new = fmaxf(m, warp_max(s));
        if (m_new == -INFINITY) continue; // nothing visible yet
        const float alpha = expf(m - m_new);
        const float pj = s == -INFINITY ? 0.0f : expf(s - m_new);
        l = l * alpha + warp_sum(pj);
        m = m_new;
#pragma unroll
        for (int i = 0; i < FATTN_MAX_D / 32; ++i)
            acc[i] *= alpha;
        for (int j = 0; j < FA_TILE; ++j) {
            const float pb = __shfl_sync(0xffffffff, pj, j);
            const float * vr = Vs + j * D;
#pragma unroll
            for (int i = 0; i < FATTN_MAX_D / 32; ++i)
                if (lane + 32 * i < D) acc[i] += pb * vr[lane + 32 * i];
        }
    }
    if (!active) return;
    if (p.n_split == 1) {
        const float inv = l > 0.0f ? 1.0f / l : 0.0f;
        char * out = (char *)p.dst + h * p.ds.nb[1] + t * p.ds.nb[2];
#pragma unroll
        for (int i = 0; i < FATTN_MAX_D / 32; ++i)
            if (lane + 32 * i < D) *(float *)(out + (lane + 32 * i) * p.ds.nb[0]) = acc[i] * inv;
    } else {
        const int64_t qg = (int64_t)hk * n_q + qi; // global query index
        const int64_t nq_all = (int64_t)n_q * gridDim.y;
        float * part = p.part + ((int64_t)split * nq_all + qg) * D;
#pragma unroll
        for (int i = 0; i < FATTN_MAX_D / 32; ++i)
            if (lane + 32 * i < D) part[lane + 32 * i] = acc[i];
        if (lane == 0) p.ml[split * nq_all + qg] = make_float2(m, l);
    }
}

// merge the splits: one block per query, threads over D
static __global__ void k_fattn_combine(fa_params p) {
    pdl_start();
    const int64_t qg = blockIdx.x;
    const int n_q = p.n_tokens * p.r;
    const int64_t nq_all = (int64_t)n_q * (p.n_head / p.r);
    const int hk = (int)(qg / n_q), qi = (int)(qg % n_q);
    const int t = qi / p.r, h = hk * p.r + qi % p.r;
    char * out = (char *)p.dst + h * p.ds.nb[1] + t * p.ds.nb[2];
    for (int d = threadIdx.x; d < p.D; d += blockDim.x)
        *(float *)(out + d * p.ds.nb[0]) = merge_splits<8>(p, qg, nq_all, d);
}

void ggml_cuda_fattn_combine(ggml_cuda_context & ctx, const fa_params & p) {
    ggml_cuda_launch(ctx, k_fattn_combine, dim3(p.n_tokens * p.n_head, 1), dim3(128), 0, p);
}

// ---- decode path: few queries per kv head ------------------------------------------------------
// Block = W warps for one (kv head, KV split). Warp w takes the groups of KB consecutive keys kv0 + (g*W + w)*KB
// .. + KB-1 (g = 0, 1, ...); the next group's 2*KB rows and mask values are loaded before the current group is
// used, so a warp has up to 4*KB K/V rows in flight. W = 16 for one or two queries per kv head (decode with MHA),
// else 4. Lane l owns dims [l*E, l*E + E) (E = D/32) of K, V, q and the accumulators, so a key's K and V rows
// are each read by the warp as one contiguous row; scores are warp sums. All NQ queries of the kv head
// (NQ >= n_tokens * r) use each K/V row once loaded. The warps' (m, l, acc) meet in shared memory; with several
// splits (fattn_vec: one wave of resident blocks) each block writes partials and the last block of its kv head
// merges them (no combine launch).

// One lane's E values of a K or V row, held as loaded and read as floats: f16 rows stay f16 in registers (half the
// registers, so a warp keeps twice the keys in flight; at a 4096-token depth decode attention waits on KV loads).
template <typename T, int E> struct kv_frag {
    float v[E];
    __device__ __forceinline__ void load(const char * row, int lane) {
        const T * p = (const T *)row + lane * E;
#pragma unroll
        for (int i = 0; i < E; ++i)
            v[i] = to_f32<T>(p[i]);
    }
    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < E; ++i)
            v[i] = 0.0f;
    }
    __device__ __forceinline__ float operator[](int i) const { return v[i]; }
};
template <int E> struct kv_frag_h { // f16, E even
    half2 h[E / 2];
    __device__ __forceinline__ void load(const char * row, int lane) {
        const half * p = (const half *)row + lane * E;
        if constexpr (E % 4 == 0) {
#pragma unroll
            for (int i = 0; i < E; i += 4) {
                const uint2 raw = *(const uint2 *)(p + i); // 4 halves, 8-byte aligned (fattn_vec_ok)
                h[i / 2] = *(const half2 *)&raw.x;
                h[i / 2 + 1] = *(const half2 *)&raw.y;
            }
        } else {
#pragma unroll
            for (int i = 0; i < E; i += 2)
                h[i / 2] = *(const half2 *)(p + i);
        }
    }
    __device__ __forceinline__ void zero() {
#pragma unroll
        for (int i = 0; i < E / 2; ++i)
            h[i] = __float2half2_rn(0.0f);
    }
    __device__ __forceinline__ float operator[](int i) const {
        return i % 2 ? __high2float(h[i / 2]) : __low2float(h[i / 2]);
    }
};
template <typename T, int E>
using kv_frag_t = std::conditional_t<sizeof(T) == 2 && E % 2 == 0, kv_frag_h<E>, kv_frag<T, E>>;
template <typename T, int E> constexpr int kv_frag_regs() { return sizeof(T) == 2 && E % 2 == 0 ? E / 2 : E; }

// the K and V rows of keys key0 .. key0 + KB - 1; zeros for keys >= kv1 (their weight is 0, and 0 * zero stays 0)
template <typename F, int KB>
static __device__ __forceinline__ void load_group(const char * kb, const char * vb, int64_t ks, int64_t vs, int key0,
                                                  int kv1, int lane, F (&kr)[KB], F (&vr)[KB]) {
#pragma unroll
    for (int b = 0; b < KB; ++b) {
        if (key0 + b < kv1) {
            kr[b].load(kb + (key0 + b) * ks, lane);
            vr[b].load(vb + (key0 + b) * vs, lane);
        } else {
            kr[b].zero();
            vr[b].zero();
        }
    }
}

// the mask values of keys key0 .. key0 + KB - 1 for the NQ queries (0 without a mask or past kv1), loaded with the
// group's K/V rows: read where they are used, each group's scores waited for a dependent global load (decode at
// a 4096-token depth ran at a third of the KV bandwidth)
template <int NQ, int KB>
static __device__ __forceinline__ void load_mask(const fa_params & p, const char * const (&mrow)[NQ], int key0, int kv1,
                                                 float (&mk)[NQ][KB]) {
#pragma unroll
    for (int j = 0; j < NQ; ++j)
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            const int key = key0 + b;
            mk[j][b] = 0.0f;
            if (key < kv1 && mrow[j])
                mk[j][b] = p.mask_f16 ? __half2float(*(const half *)(mrow[j] + key * p.ms.nb[0]))
                                      : *(const float *)(mrow[j] + key * p.ms.nb[0]);
        }
}

template <typename T, int E, int NQ, int W, int KB>
static __global__ void __launch_bounds__(W * 32) k_fattn_vec(fa_params p) {
    constexpr int D = 32 * E;
    __shared__ float s_acc[W][NQ][D];
    __shared__ float s_ml[W][NQ][2];
    pdl_start();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hk = blockIdx.y, split = blockIdx.z;
    // the block's queries qbase .. qbase + n_q - 1 of the kv head: all of them, or token blockIdx.x's r (per_token)
    const int qbase = p.per_token ? blockIdx.x * p.r : 0;
    const int n_q = p.per_token ? p.r : p.n_tokens * p.r;

    float q[NQ][E], acc[NQ][E], m[NQ], l[NQ];
    int last[NQ]; // last visible key of each query (causal), INT_MAX without
    const char * mrow[NQ];
#pragma unroll
    for (int j = 0; j < NQ; ++j) {
        const int qi = qbase + (j < n_q ? j : 0);
        const int t = qi / p.r, h = hk * p.r + qi % p.r;
#pragma unroll
        for (int i = 0; i < E; ++i) {
            q[j][i] = j < n_q ? *(const float *)(p.q + (lane * E + i) * p.qs.nb[0] + t * p.qs.nb[1] + h * p.qs.nb[2]) *
                                    p.scale
                              : 0.0f;
            acc[j][i] = 0.0f;
        }
        m[j] = -INFINITY;
        l[j] = 0.0f;
        last[j] = j < n_q ? (p.causal_n_past >= 0 ? p.causal_n_past + t : INT_MAX) : -1;
        mrow[j] = p.mask ? p.mask + t * p.ms.nb[1] + (h % p.ms.ne[2]) * p.ms.nb[2] : nullptr;
    }

    int kv0, kv1;
    fattn_block_keys(p, split, qbase / p.r, (qbase + n_q - 1) / p.r, kv0, kv1);
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    const int64_t ks = p.ks.nb[1], vs = p.vs.nb[1];
    using F = kv_frag_t<T, E>;
    F kr[KB], vr[KB];
    float mk[NQ][KB];
    // a token whose range is exactly its visible keys, each with 0 added: no mask reads (its r queries are one token)
    if ((p.per_token || p.n_tokens == 1) && fattn_token_exact(p, qbase / p.r)) {
#pragma unroll
        for (int j = 0; j < NQ; ++j)
            mrow[j] = nullptr;
    }
    int key0 = kv0 + warp * KB;
    load_group<F, KB>(kb, vb, ks, vs, key0, kv1, lane, kr, vr);
    load_mask<NQ, KB>(p, mrow, key0, kv1, mk);
    for (; key0 < kv1; key0 += W * KB) {
        F kn[KB], vn[KB]; // the next group's rows and mask, in flight while this one is used
        float mn[NQ][KB];
        load_group<F, KB>(kb, vb, ks, vs, key0 + W * KB, kv1, lane, kn, vn);
        load_mask<NQ, KB>(p, mrow, key0 + W * KB, kv1, mn);
#pragma unroll
        for (int j = 0; j < NQ; ++j) {
            float s[KB];
            float s_max = -INFINITY;
#pragma unroll
            for (int b = 0; b < KB; ++b) {
                const int key = key0 + b;
                float d = 0.0f;
#pragma unroll
                for (int i = 0; i < E; ++i)
                    d += q[j][i] * kr[b][i];
                d = warp_sum(d) + mk[j][b];
                s[b] = key < kv1 && key <= last[j] ? d : -INFINITY;
                s_max = fmaxf(s_max, s[b]);
            }
            const float m_new = fmaxf(m[j], s_max);
            if (m_new == -INFINITY) continue; // nothing visible yet (uniform over the warp)
            const float alpha = expf(m[j] - m_new);
            float pb[KB], psum = 0.0f;
#pragma unroll
            for (int b = 0; b < KB; ++b) {
                pb[b] = expf(s[b] - m_new); // 0 for -inf scores
                psum += pb[b];
            }
            l[j] = l[j] * alpha + psum;
            m[j] = m_new;
#pragma unroll
            for (int i = 0; i < E; ++i) {
                float a = acc[j][i] * alpha;
#pragma unroll
                for (int b = 0; b < KB; ++b)
                    a += pb[b] * vr[b][i];
                acc[j][i] = a;
            }
        }
#pragma unroll
        for (int b = 0; b < KB; ++b) {
            kr[b] = kn[b];
            vr[b] = vn[b];
#pragma unroll
            for (int j = 0; j < NQ; ++j)
                mk[j][b] = mn[j][b];
        }
    }

#pragma unroll
    for (int j = 0; j < NQ; ++j) {
#pragma unroll
        for (int i = 0; i < E; ++i)
            s_acc[warp][j][lane * E + i] = acc[j][i];
        if (lane == 0) {
            s_ml[warp][j][0] = m[j];
            s_ml[warp][j][1] = l[j];
        }
    }
    fattn_vec_finish<W, NQ, D>(p, s_acc, s_ml, hk, split, n_q, qbase);
}

// keys a warp holds per step: the K/V rows of two groups (4 x KB fragments of R registers) and their mask values
// (2 x NQ x KB) within 80 registers for one query, 64 for more (ptxas, sm_90: f16 D = 128 with one query takes
// KB = 8 in 120 registers; every variant without spills)
static constexpr int fattn_vec_kb(int R, int NQ) {
    const int per_key = 4 * R + 2 * NQ, budget = NQ == 1 ? 80 : 64;
    return 8 * per_key <= budget ? 8 : 4 * per_key <= budget ? 4 : 2 * per_key <= budget ? 2 : 1;
}

// the decode kernel for n_q queries per kv head: W = 16 warps for one or two, else 4 (shared memory for the merge);
// per_token with one query (a block per token over its own keys, fattn_vec): 4
template <typename T, int E> static fattn_vec_fn fattn_vec_pick(int n_q, bool per_token, int & W, int & KB) {
    constexpr int R = kv_frag_regs<T, E>();
    W = n_q <= 2 ? 16 : 4;
    KB = fattn_vec_kb(R, n_q <= 1 ? 1 : n_q <= 2 ? 2 : n_q <= 4 ? 4 : 8);
    if (per_token && n_q <= 1) {
        W = 4;
        return k_fattn_vec<T, E, 1, 4, fattn_vec_kb(R, 1)>;
    }
    if (n_q <= 1) return k_fattn_vec<T, E, 1, 16, fattn_vec_kb(R, 1)>;
    if (n_q <= 2) return k_fattn_vec<T, E, 2, 16, fattn_vec_kb(R, 2)>;
    if (n_q <= 4) return k_fattn_vec<T, E, 4, 4, fattn_vec_kb(R, 4)>;
    return k_fattn_vec<T, E, 8, 4, fattn_vec_kb(R, 8)>;
}
template <typename T> static fattn_vec_fn fattn_vec_pick_d(int D, int n_q, bool per_token, int & W, int & KB) {
    switch (D) {
        case 32:
            return fattn_vec_pick<T, 1>(n_q, per_token, W, KB);
        case 64:
            return fattn_vec_pick<T, 2>(n_q, per_token, W, KB);
        case 128:
            return fattn_vec_pick<T, 4>(n_q, per_token, W, KB);
        case 256:
            return fattn_vec_pick<T, 8>(n_q, per_token, W, KB);
        default:
            GGML_ABORT("fattn vec: D %d", D);
    }
}

// Decode: KV splits so that the grid is one wave of resident blocks (occupancy of the kernel), at least one
// warp step of S keys per warp and at least fattn_split_keys() keys per split; the last block of each kv head merges
// the splits (p.counters).
// GGML_CUDA_FATTN_SPLIT_KEYS=n (default 512): at a short depth one block per kv head reads every key, as the
// merge (partials written, a count, the last block reading them back) costs more than it saves. H200, Llama-2-7B
// tg128 (depth 0-128), 2 splits -> 1: q4_0 561-567 -> 577-580 t/s, q8_0 406 -> 417-423, Q4_K_M 492 -> 501-502;
// at depth 4096 (8 splits either way) q8_0 313-315 t/s with 0 / 1024 (2048: 299).
static int fattn_split_keys() {
    static const char * v = std::getenv("GGML_CUDA_FATTN_SPLIT_KEYS");
    static const int n = v ? std::atoi(v) : 512;
    return n;
}

// The fewest query rows per kv head (all of a step's tokens) with which a batch of many sequences' decode tokens takes
// one decode block per token, each over its own keys; fewer take the decode kernel over the union of their tokens'
// ranges. H200, Llama-2-7B q8_0 (one row per token), batched-bench -npp 512 -ntg 128, S_TG at B = 2 / 4 / 8, union
// against per token: f16 cache 534 / 811 / 1551 against 466 / 755 / 1666 t/s, q8_0 cache 504 / 772 / 1504 against
// 508 / 765 / 1610, q4_0 cache 329 / 488 / 818 against 516 / 788 / 1763 (the union kernel's q4_0 slices are slow). So
// with one query row per kv head (MHA) 8, and 2 where K or V is q4_0; with more (GQA; not measured: a block per token
// makes n_tokens x n_head_kv blocks, 16 for two Llama-3 tokens, against the union kernels' KV splits) 9, as before.
// GGML_CUDA_FATTN_PT_MIN=n sets it for all (an A/B).
static int fattn_pt_min(int r, bool q4) {
    static const char * v = std::getenv("GGML_CUDA_FATTN_PT_MIN");
    return v ? std::atoi(v) : r > 1 ? 9 : q4 ? 2 : 8;
}

// GGML_CUDA_FATTN_NO_RANGES=1: no visible ranges from the mask (every key read; an A/B)
static bool fattn_ranges_on() {
    static const bool off = std::getenv("GGML_CUDA_FATTN_NO_RANGES") != nullptr;
    return !off;
}

// whether the tokens' visible key ranges may be taken from the mask (fattn-range.cuh): one row per token for every
// head
static bool fattn_mask_ranges_ok(const fa_params & p) {
    return p.mask && fattn_ranges_on() && p.ms.ne[2] == 1 && p.ms.ne[3] == 1;
}

// A KV cache shared by several sequences (ggml_flash_attn_ext_set_seqs) whose mask gives each token's visible key
// range, so that blocks skip the other sequences' cells.
static bool fattn_shared_ranges(const ggml_tensor * dst, const fa_params & p) {
    return ggml_get_op_params_i32(dst, 3) && fattn_mask_ranges_ok(p);
}

// ... and a batch of about one token per sequence (decode) with enough query rows for one decode block per token
// (q4: K or V q4_0, fattn_pt_min)
static bool fattn_per_token_wanted(const ggml_tensor * dst, const fa_params & p, bool q4) {
    const int n_seq = ggml_get_op_params_i32(dst, 2);
    return n_seq > 1 && p.n_tokens <= 2 * n_seq && p.n_tokens * p.r >= fattn_pt_min(p.r, q4);
}

// GGML_CUDA_FATTN_EXACT=0: a decode block reads the mask even where its token's range is exact (an A/B)
static bool fattn_exact_on() {
    static const bool off = ggml_cuda_env_zero("GGML_CUDA_FATTN_EXACT");
    return !off;
}

// The decode of one token: its visible key range from the mask (fattn-range.cuh: one launch a step, reused by every
// layer), so that the decode kernels read only those keys and, where the range is exact, no mask. A step's n_kv is
// the used cells rounded up to LLM_KV_PAD (256), the rest masked: at a short depth most of what a block read was
// masked keys. H200, Llama-2-7B tg128 (depth 0-128), two rounds in one call, against GGML_CUDA_FATTN_NO_RANGES=1:
// q8_0 434.7 -> 441.6 t/s, q4_0 557.7 -> 574.0.
static void fattn_decode_ranges(ggml_cuda_context & ctx, fa_params & p) {
    if (p.n_tokens != 1) return;
    if (!p.ranges && fattn_mask_ranges_ok(p))
        p.ranges = ggml_cuda_mask_ranges(ctx, p.mask, p.ms.nb[1], p.mask_f16, p.n_kv, p.n_tokens);
    if (p.ranges) p.exact = fattn_exact_on();
}

static void fattn_vec_launch(ggml_cuda_context & ctx, fa_params & p, fattn_vec_fn fn, int W, int S, size_t smem = 0) {
    const int n_q = p.n_tokens * p.r, n_head_kv = p.n_head / p.r;
    static thread_local std::map<std::pair<const void *, int>, int> occupancy; // blocks per SM: kernel, device
    int & occ = occupancy[{(const void *)fn, ctx.device}];
    if (occ == 0) {
        CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, fn, W * 32, smem));
        occ = std::max(occ, 1);
    }
    int64_t n_split =
        std::min<int64_t>(occ * ctx.n_sm / n_head_kv, cuda_ceil_div(p.n_kv, std::max(W * S, fattn_split_keys())));
    if (n_split < 1 || n_head_kv > GGML_CUDA_N_COUNTERS_EPI) n_split = 1;
    p.kv_per_split = (int)(cuda_ceil_div(cuda_ceil_div(p.n_kv, n_split), S) * S);
    p.n_split = (int)cuda_ceil_div(p.n_kv, p.kv_per_split);
    if (p.n_split > 1) {
        const int64_t nq_all = (int64_t)n_q * n_head_kv;
        p.part = (float *)ctx.pool.alloc(sizeof(float) * p.n_split * nq_all * p.D);
        p.ml = (float2 *)ctx.pool.alloc(sizeof(float2) * p.n_split * nq_all);
        p.counters = ctx.counters;
    }
    ggml_cuda_launch(ctx, fn, dim3(1, n_head_kv, p.n_split), dim3(W * 32), smem, p);
}

// per_token: one block (W warps) per (token, kv head), each over its token's visible range (p.ranges), no KV split
static void fattn_per_token_launch(ggml_cuda_context & ctx, fa_params & p, fattn_vec_fn fn, int W) {
    p.exact = fattn_exact_on();
    p.n_split = 1;
    p.kv_per_split = p.n_kv;
    ggml_cuda_launch(ctx, fn, dim3(p.n_tokens, p.n_head / p.r, 1), dim3(W * 32), 0, p);
}

static void fattn_vec(ggml_cuda_context & ctx, fa_params & p, ggml_type kv_type) {
    const int n_q = p.per_token ? p.r : p.n_tokens * p.r;
    // one block per token over its own keys (per_token: a batch of many sequences' decode tokens, ~500 keys each):
    // 4 warps, so that 4 blocks share an SM and one's start and merge overlap the others' loads (H100, Llama-2-7B
    // q8_0, batched-bench -npp 512 -ntg 128, B = 64: 2832-2852 -> 2981-3055 t/s against 16 warps;
    // GGML_CUDA_FATTN_PTW=16 for those)
    static const char * ptw = std::getenv("GGML_CUDA_FATTN_PTW");
    const bool w4 = p.per_token && !(ptw && std::atoi(ptw) == 16);
    // one query row per kv head on an f16 cache: the keys across the lanes (fattn-vec-pt.cuh);
    // GGML_CUDA_FATTN_PT_LANES=0: the dims across the lanes (k_fattn_vec), as before the twenty-seventh session
    static const char * ptl = std::getenv("GGML_CUDA_FATTN_PT_LANES");
    static const bool pt_lanes = !(ptl && std::atoi(ptl) == 0);
    if (p.per_token && kv_type == GGML_TYPE_F16 && pt_lanes) {
        if (const fattn_vec_fn fn = fattn_vec_pt_pick(p)) {
            fattn_per_token_launch(ctx, p, fn, FA_PT_W);
            return;
        }
    }
    int W = 0, KB = 0;
    const fattn_vec_fn fn = kv_type == GGML_TYPE_F16 ? fattn_vec_pick_d<half>(p.D, n_q, w4, W, KB)
                                                     : fattn_vec_pick_d<float>(p.D, n_q, w4, W, KB);
    if (p.per_token) {
        fattn_per_token_launch(ctx, p, fn, W);
        return;
    }
    fattn_vec_launch(ctx, p, fn, W, KB);
}

// ---- decode on a q8_0 / q4_0 KV cache (fattn-vecq.cuh) ----------------------------------------------------------
// The instance for (K, V, D, n_q) or nullptr; one_row: one mask row and causal limit serve every query.
static fattn_vec_fn fattn_vecq_pick(ggml_type tk, ggml_type tv, int D, int n_q, bool one_row, int & W, int & S) {
    auto is = [&](ggml_type a, ggml_type b) { return tk == a && tv == b; };
    const ggml_type Q8 = GGML_TYPE_Q8_0, Q4 = GGML_TYPE_Q4_0, F16 = GGML_TYPE_F16;
    if (is(Q8, Q8)) return ggml_cuda_fattn_vecq_q8_0_q8_0(D, n_q, one_row, W, S);
    if (is(Q8, Q4)) return ggml_cuda_fattn_vecq_q8_0_q4_0(D, n_q, one_row, W, S);
    if (is(Q8, F16)) return ggml_cuda_fattn_vecq_q8_0_f16(D, n_q, one_row, W, S);
    if (is(Q4, Q8)) return ggml_cuda_fattn_vecq_q4_0_q8_0(D, n_q, one_row, W, S);
    if (is(Q4, Q4)) return ggml_cuda_fattn_vecq_q4_0_q4_0(D, n_q, one_row, W, S);
    if (is(Q4, F16)) return ggml_cuda_fattn_vecq_q4_0_f16(D, n_q, one_row, W, S);
    if (is(F16, Q8)) return ggml_cuda_fattn_vecq_f16_q8_0(D, n_q, one_row, W, S);
    if (is(F16, Q4)) return ggml_cuda_fattn_vecq_f16_q4_0(D, n_q, one_row, W, S);
    return nullptr;
}

// whether the quantized decode kernel takes it: K and V q8_0/q4_0/f16 (one of them a block type), D 64/96/128, at
// most 8 queries per kv head in a block (n_q: all the step's, or r for a block per token); block-type rows dense and
// 2-byte aligned, f16 rows dense and 8-byte aligned
static bool fattn_vecq_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v, int n_q) {
    auto rows_ok = [](const ggml_tensor * t) {
        if (ggml_cuda_is_kvq(t->type))
            return ggml_cuda_kvq_rows_ok(t) && t->nb[1] % 2 == 0 && t->nb[2] % 2 == 0 && (uintptr_t)t->data % 2 == 0;
        return t->type == GGML_TYPE_F16 && t->nb[0] == 2 && t->nb[1] % 8 == 0 && t->nb[2] % 8 == 0 &&
               (uintptr_t)t->data % 8 == 0;
    };
    int W, S;
    return n_q <= 8 && rows_ok(k) && rows_ok(v) && fattn_vecq_pick(k->type, v->type, p.D, n_q, true, W, S) != nullptr;
}

static void fattn_vecq(ggml_cuda_context & ctx, fa_params & p, ggml_type tk, ggml_type tv) {
    // per_token: a block per token, each over its own keys (p.ranges), one mask row (broadcast over heads) per block
    const bool one_row = (p.per_token || p.n_tokens == 1) && (!p.mask || p.ms.ne[2] == 1);
    int W = 0, S = 0;
    const fattn_vec_fn fn = fattn_vecq_pick(tk, tv, p.D, p.per_token ? p.r : p.n_tokens * p.r, one_row, W, S);
    GGML_ASSERT(fn);
    if (p.per_token) {
        fattn_per_token_launch(ctx, p, fn, W);
        return;
    }
    fattn_vec_launch(ctx, p, fn, W, S);
}

// the decode kernel takes D in {32, 64, 128, 256}, dense K/V rows and at most 8 queries per kv head
static bool fattn_vec_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v) {
    const size_t es = ggml_type_size(k->type);
    const bool d_ok = p.D == 32 || p.D == 64 || p.D == 128 || p.D == 256;
    const bool dense = k->nb[0] == es && v->nb[0] == es && k->nb[1] % 8 == 0 && v->nb[1] % 8 == 0 &&
                       k->nb[2] % 8 == 0 && v->nb[2] % 8 == 0 && (uintptr_t)k->data % 8 == 0 &&
                       (uintptr_t)v->data % 8 == 0;
    return d_ok && dense && (p.per_token ? p.r <= 8 : p.n_tokens * p.r <= 8);
}

// ---- prompt path: attention through cuBLAS ---------------------------------------------------------
// f16 K/V with dense rows and more than 8 queries per kv head. Per kv head hk, its r query heads are
// extra columns: S [n_kv, T*r] = K_hk^T Q_hk (f16 in, f32 out), P = softmax(S*scale + mask) as f16
// (the causal limit too), O_h [D, T] = V_hk P_h written straight into dst [D, n_head, T].
static bool fattn_gemm_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v, const ggml_tensor * dst) {
    auto al16 = [](const ggml_tensor * t) {
        return t->nb[0] == 2 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 && (uintptr_t)t->data % 16 == 0;
    };
    return k->type == GGML_TYPE_F16 && v->type == GGML_TYPE_F16 && al16(k) && al16(v) && p.n_tokens * p.r > 8 &&
           ggml_is_contiguous(dst);
}

static void fattn_gemm(ggml_cuda_context & ctx, const fa_params & p, const ggml_tensor * q, const ggml_tensor * k,
                       const ggml_tensor * v, const ggml_tensor * mask, ggml_tensor * dst) {
    const int64_t D = p.D, T = p.n_tokens, H = p.n_head, r = p.r, Hk = H / r, n_kv = p.n_kv;
    half * Qh = (half *)ctx.pool.alloc(sizeof(half) * D * T * H); // [D, T, H]
    ggml_cuda_convert(ctx, q, Qh, GGML_TYPE_F16, ggml_cuda_contig_shape(GGML_TYPE_F16, q->ne));
    float * S = (float *)ctx.pool.alloc(sizeof(float) * n_kv * T * H); // [n_kv, T, H]
    half * P = (half *)ctx.pool.alloc(sizeof(half) * n_kv * T * H);    // [n_kv, T, H]
    const float one = 1.0f, zero = 0.0f;
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(
        ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_kv, (int)(T * r), (int)D, &one, k->data, CUDA_R_16F,
        (int)(k->nb[1] / 2), (long long)(k->nb[2] / 2), Qh, CUDA_R_16F, (int)D, (long long)(D * T * r), &zero, S,
        CUDA_R_32F, (int)n_kv, (long long)(n_kv * T * r), (int)Hk, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const int64_t sne[4] = {n_kv, T, H, 1};
    const cuda_shape ss = ggml_cuda_contig_shape(GGML_TYPE_F32, sne), ps = ggml_cuda_contig_shape(GGML_TYPE_F16, sne);
    ggml_cuda_soft_max_rows(ctx, (const char *)S, ss, p.mask, mask ? mask->type : GGML_TYPE_F32, p.ms, (char *)P,
                            GGML_TYPE_F16, ps, p.scale, p.causal_n_past);
    for (int64_t i = 0; i < r; ++i) { // heads hk*r + i for all hk
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)D, (int)T, (int)n_kv, &one,
                                                v->data, CUDA_R_16F, (int)(v->nb[1] / 2), (long long)(v->nb[2] / 2),
                                                P + i * n_kv * T, CUDA_R_16F, (int)n_kv, (long long)(r * n_kv * T),
                                                &zero, (float *)dst->data + i * D, CUDA_R_32F, (int)(D * H),
                                                (long long)(r * D), (int)Hk, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

static fa_params fa_params_of(const ggml_tensor * dst, const ggml_tensor * q, const ggml_tensor * k,
                              const ggml_tensor * v, const ggml_tensor * mask) {
    fa_params p = {};
    p.q = (const char *)q->data;
    p.k = (const char *)k->data;
    p.v = (const char *)v->data;
    p.mask = mask ? (const char *)mask->data : nullptr;
    p.mask_f16 = mask && mask->type == GGML_TYPE_F16;
    p.dst = (float *)dst->data;
    p.qs = cuda_shape_of(q);
    p.ks = cuda_shape_of(k);
    p.vs = cuda_shape_of(v);
    p.ms = mask ? cuda_shape_of(mask) : p.qs;
    p.ds = cuda_shape_of(dst);
    p.D = (int)q->ne[0];
    p.n_kv = (int)k->ne[1];
    p.n_tokens = (int)q->ne[1];
    p.n_head = (int)q->ne[2];
    p.r = (int)(q->ne[2] / k->ne[2]);
    p.scale = ggml_get_op_params_f32(dst, 0);
    p.causal_n_past = ggml_get_op_params_i32(dst, 1);
    return p;
}

// A block-type K or V as an f16 (f32 when the other one is f32) copy of the view in pool scratch, dense [D, n_kv,
// n_head_kv]: the prompt paths (fattn-mma.cu, cuBLAS) and the float kernels read it; *t becomes that copy. The scratch
// is the caller's to give back (pool mark / rewind) once the attention is launched.
static void fattn_widen(ggml_cuda_context & ctx, ggml_tensor * t, ggml_type to) {
    const int64_t * ne = t->ne;
    void * buf = ctx.pool.alloc(ggml_row_size(to, ne[0]) * ne[1] * ne[2] * ne[3]);
    const cuda_shape cs = ggml_cuda_contig_shape(to, ne);
    ggml_cuda_convert(ctx, t, buf, to, cs);
    t->type = to;
    t->data = buf;
    for (int i = 0; i < 4; ++i)
        t->nb[i] = (size_t)cs.nb[i];
    t->view_src = nullptr;
    t->view_offs = 0;
}

// GGML_CUDA_FATTN_DEC: 0 turns the tensor-core decode kernel off (the vec kernels instead; an A/B), other values
// pick its configuration (warps x stages, ggml_cuda_fattn_mma_dec; default 4: 8 x 2, q8_0 8 x 3)
static int fattn_dec_cfg() {
    static const int cfg = std::getenv("GGML_CUDA_FATTN_DEC") ? std::atoi(std::getenv("GGML_CUDA_FATTN_DEC")) : 4;
    return cfg;
}

// Give the decode kernel about to run what side asks it to write beside dst (fattn_vec_store): only into a dense dst,
// the quantized output only where q8_ok (the kernel's warps hold 32 dims of one query), the wgmma order always.
// Returns whether it was given (what the callers report).
static bool fattn_take_side(fa_params & p, const fa_side & side, const ggml_tensor * dst, bool q8_ok) {
    const bool take = ggml_is_contiguous(dst) && (side.q8s ? q8_ok : side.xw != nullptr);
    if (take) fa_set_side(p, side);
    return take;
}

void ggml_cuda_fattn_plan_early(ggml_cuda_context & ctx, const ggml_cgraph * gf) {
    ctx.fa_wcells.clear();
    if (!ctx.use_fattn_early) return;
    auto base = [](const ggml_tensor * t) {
        while (t->view_src)
            t = t->view_src;
        return t;
    };
    // cache -> the cells its SET_ROWS write (nullptr: several, computed ones, or another writer)
    std::vector<std::pair<const ggml_tensor *, const ggml_tensor *>> stores;
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        if (t->view_src && !ggml_is_view_op(t->op)) { // a node that writes into a tensor: SET_ROWS, CPY, ...
            const ggml_tensor * cache = base(t);
            // SET_ROWS at cells the host uploaded (an input, not computed here: readable before griddepcontrol.wait);
            // any other writer leaves the cache without early tiles (nullptr)
            const ggml_tensor * c = t->op == GGML_OP_SET_ROWS ? t->src[2] : nullptr;
            const ggml_tensor * cells = c && c->op == GGML_OP_NONE && !c->view_src ? c : nullptr;
            auto it = std::find_if(stores.begin(), stores.end(), [&](const auto & e) { return e.first == cache; });
            if (it == stores.end()) stores.push_back({cache, cells});
            else if (it->second != cells) it->second = nullptr;
        } else if (t->op == GGML_OP_FLASH_ATTN_EXT) {
            const ggml_tensor *bk = base(t->src[1]), *bv = base(t->src[2]), *ck = nullptr, *cv = nullptr;
            for (const auto & e : stores) {
                if (e.first == bk) ck = e.second;
                if (e.first == bv) cv = e.second;
            }
            if (ck && ck == cv) ctx.fa_wcells.push_back({t, ck});
        }
    }
}

// The cell of the KV caches that this step writes, for a decode of one token on a cache of one sequence whose stores
// the graph holds (ggml_cuda_fattn_plan_early), read in place: the tensor-core decode kernel's warps then request
// their first tiles before the wait (fattn-mma.cu). nullptr otherwise, and for fattn_widen's f16 copies of a
// quantized cache (written by the kernel just ahead: nothing of them may be read before the wait).
static const int * fattn_early_cell(ggml_cuda_context & ctx, const fa_params & p, const ggml_tensor * dst) {
    if (p.n_tokens != 1 || p.r > 8 || ggml_get_op_params_i32(dst, 3)) return nullptr; // (a shared cache: 3)
    if (p.k != (const char *)dst->src[1]->data || p.v != (const char *)dst->src[2]->data) return nullptr;
    for (const auto & e : ctx.fa_wcells)
        if (e.first == dst) return ggml_nelements(e.second) == 1 ? (const int *)e.second->data : nullptr;
    return nullptr;
}

// The tensor-core decode kernel (fattn-mma.cu) on f16 or (q8) q8_0 K/V, writing side where it can (fattn_take_side;
// the quantized output needs D % 32 == 0). Returns whether it did.
static bool fattn_mma_dec(ggml_cuda_context & ctx, fa_params & p, bool q8, const fa_side & side,
                          const ggml_tensor * dst) {
    int W = 0, S = 0;
    size_t smem = 0;
    p.wcells = fattn_early_cell(ctx, p, dst);
    if (p.wcells) ++ctx.n_fattn_early;
    const fattn_vec_fn fn = ggml_cuda_fattn_mma_dec(p.D, q8, p.n_tokens * p.r, fattn_dec_cfg(), ctx.device, W, S, smem);
    static const bool no_lean = ggml_cuda_env_zero("GGML_CUDA_FATTN_LEAN");
    p.lean = !no_lean;
    static const bool no_warm = ggml_cuda_env_zero("GGML_CUDA_FATTN_WARM");
    p.warm = !no_warm;
#ifdef GGML_CUDA_FATTN_TRACE
    static const bool trace = std::getenv("GGML_CUDA_FATTN_TRACE") && std::atoi(std::getenv("GGML_CUDA_FATTN_TRACE"));
    p.trace = trace && p.n_tokens == 1;
#endif
    const bool took = fattn_take_side(p, side, dst, p.D % 32 == 0);
    fattn_vec_launch(ctx, p, fn, W, S, smem);
    return took;
}

// The float K/V paths (K and V of one type, f32 or f16): k and v are dst's sources or fattn_widen copies of them.
// side: what the decode kernel may also write (fa_side; a contiguous dst); returns whether it did. The per-token
// decode of a batch of sequences writes only the wgmma order (xw).
static bool flash_attn_ext_f(ggml_cuda_context & ctx, ggml_tensor * dst, const ggml_tensor * k, const ggml_tensor * v,
                             const fa_side & side) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * mask = dst->src[3];
    GGML_ASSERT(k->type == v->type && (k->type == GGML_TYPE_F32 || k->type == GGML_TYPE_F16));
    fa_params p = fa_params_of(dst, q, k, v, mask);
    const int n_head_kv = (int)k->ne[2];
    const int n_q = p.n_tokens * p.r;
    static const bool no_vec = std::getenv("GGML_CUDA_FATTN_NO_VEC") != nullptr;       // A/B against the tile kernel
    static const bool use_gemm = std::getenv("GGML_CUDA_FATTN_GEMM") != nullptr;       // A/B: cuBLAS, not fattn-mma.cu
    // a KV cache shared by several sequences (ggml_flash_attn_ext_set_seqs): each token's visible key range from the
    // mask (one row for every head), so blocks skip the other sequences' cells; a batch of about one token per
    // sequence (decode) then takes one decode block per token
    if (fattn_shared_ranges(dst, p)) {
        p.ranges = ggml_cuda_mask_ranges(ctx, p.mask, p.ms.nb[1], p.mask_f16, p.n_kv, p.n_tokens);
        p.per_token = fattn_per_token_wanted(dst, p, false);
    }
    const bool one_seq = !p.ranges; // no shared cache (taken before the decode range below): the prompt path may go wide
    fattn_decode_ranges(ctx, p);
    if (p.per_token && !no_vec && fattn_vec_ok(p, k, v)) {
        const bool took = fattn_take_side(p, side, dst, false);
        fattn_vec(ctx, p, k->type);
        return took;
    }
    p.per_token = 0;
    // decode of up to 16 query rows per kv head on f16 K/V: the tensor-core decode kernel (fattn-mma.cu) unless
    // GGML_CUDA_FATTN_DEC=0 (the vec kernel below, or the prompt kernel for 9-16 rows; an A/B)
    // One query row per kv head (MHA decode: Llama 2) fills 1 of the 16 rows of its mma operand: the vec kernel, where
    // it has the head size, is faster there (H200, Llama-2-7B q8_0 tg128 at depth 0 / 512 / 1024 / 2048 / 4096:
    // 352-356 / 342-347 / 334-337 / 315-317 / 285-288 t/s against 336-338 / 326-327 / 314-316 / 295-297 / 272).
    const bool one_row = p.n_tokens * p.r == 1 && fattn_vec_ok(p, k, v);
    if (fattn_dec_cfg() != 0 && !no_vec && !one_row && ggml_cuda_fattn_mma_dec_ok(p, k, v, dst))
        return fattn_mma_dec(ctx, p, false, side, dst);
    if (n_q > 8 && !no_vec && !use_gemm && ggml_cuda_fattn_mma_ok(p.D, k, v, dst)) {
        fattn_mma_params mp = {p.q,        p.k,     p.v, p.mask, p.dst,      p.qs,     p.ks, p.vs,
                               p.ms,       p.ds,    p.D, p.n_kv, p.n_tokens, p.n_head, p.r,  p.causal_n_past,
                               p.mask_f16, p.scale, 0};
        // a prompt over more than one key tile: the tokens' visible ranges from the mask even for one sequence, so
        // that blocks skip the tiles a causal mask hides from all their queries (about half of them; the graph's
        // FLASH_ATTN_EXT carries the causality in the mask, not in causal_n_past)
        if (!p.ranges && fattn_mask_ranges_ok(p) && p.n_kv > 64)
            p.ranges = ggml_cuda_mask_ranges(ctx, p.mask, p.ms.nb[1], p.mask_f16, p.n_kv, p.n_tokens);
        mp.ranges = p.ranges;
        if (one_seq && ggml_cuda_fattn_mma_wide_wanted(mp, ctx.n_sm)) {
            ggml_cuda_fattn_mma_wide(ctx, mp);
        } else {
            ggml_cuda_fattn_mma(ctx, mp);
        }
        return false;
    }
    if (fattn_gemm_ok(p, k, v, dst) && !no_vec) {
        fattn_gemm(ctx, p, q, k, v, mask, dst);
        return false;
    }
    if (fattn_vec_ok(p, k, v) && !no_vec) {
        const bool took = fattn_take_side(p, side, dst, true);
        fattn_vec(ctx, p, k->type);
        return took;
    }
    const int gx = (int)cuda_ceil_div(n_q, FA_WARPS);
    // split the KV range when the grid alone would not fill the GPU (decode)
    const int base = gx * n_head_kv;
    int n_split = 1;
    if (base < 2 * ctx.n_sm) {
        n_split = (int)cuda_ceil_div(2 * ctx.n_sm, base);
        n_split = std::min<int>(n_split, (int)cuda_ceil_div(p.n_kv, 128));
        n_split = std::max(n_split, 1);
    }
    p.kv_per_split = (int)cuda_ceil_div(cuda_ceil_div(p.n_kv, n_split), FA_TILE) * FA_TILE;
    n_split = (int)cuda_ceil_div(p.n_kv, p.kv_per_split);
    if (n_split < 1) n_split = 1;
    p.n_split = n_split;
    if (n_split > 1) {
        const int64_t nq_all = (int64_t)n_q * n_head_kv;
        p.part = (float *)ctx.pool.alloc(sizeof(float) * n_split * nq_all * p.D);
        p.ml = (float2 *)ctx.pool.alloc(sizeof(float2) * n_split * nq_all);
    }
    const size_t smem = sizeof(float) * (FA_TILE * (p.D + 1) + FA_TILE * p.D + FA_WARPS * p.D);
    const dim3 grid(gx, n_head_kv, n_split);
    if (k->type == GGML_TYPE_F16) {
        if (smem > 48 * 1024)
            CUDA_CHECK(cudaFuncSetAttribute(k_fattn<half>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        k_fattn<half><<<grid, FA_WARPS * 32, smem, ctx.stream>>>(p);
    } else {
        if (smem > 48 * 1024)
            CUDA_CHECK(cudaFuncSetAttribute(k_fattn<float>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        k_fattn<float><<<grid, FA_WARPS * 32, smem, ctx.stream>>>(p);
    }
    CUDA_CHECK_LAUNCH();
    if (n_split > 1) ggml_cuda_fattn_combine(ctx, p);
    return false;
}

// side: what the decode kernel may also write (fa_side); returns whether it did
static bool flash_attn_ext(ggml_cuda_context & ctx, ggml_tensor * dst, const fa_side & side) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    GGML_ASSERT(q->type == GGML_TYPE_F32 && q->ne[0] <= FATTN_MAX_D && q->ne[3] == 1);
    if (!ggml_cuda_is_kvq(k->type) && !ggml_cuda_is_kvq(v->type))
        return flash_attn_ext_f(ctx, dst, k, v, side);
    // a q8_0 / q4_0 cache: decode reads it in place; prompts (and shapes the decode kernel lacks) read an f16 copy of
    // the K/V views (the tensor-core kernel then runs as for an f16 cache)
    static const bool no_vec = std::getenv("GGML_CUDA_FATTN_NO_VEC") != nullptr;
    fa_params p = fa_params_of(dst, q, k, v, dst->src[3]);
    // a cache shared by several sequences with about one token each (batched decode): one block per token over its
    // own visible key range, read in place (flash_attn_ext_f does the same on f16 caches; an f16 copy of the whole
    // K/V views for each layer before)
    // GGML_CUDA_FATTN_KVQ_PT=0: the f16 copy instead (an A/B)
    static const char * kvq_pt_env = std::getenv("GGML_CUDA_FATTN_KVQ_PT");
    static const bool kvq_pt = !(kvq_pt_env && std::atoi(kvq_pt_env) == 0);
    if (kvq_pt && !no_vec && fattn_shared_ranges(dst, p) &&
        fattn_per_token_wanted(dst, p, k->type == GGML_TYPE_Q4_0 || v->type == GGML_TYPE_Q4_0) &&
        fattn_vecq_ok(p, k, v, p.r)) {
        p.ranges = ggml_cuda_mask_ranges(ctx, p.mask, p.ms.nb[1], p.mask_f16, p.n_kv, p.n_tokens);
        p.per_token = 1;
        const bool took = fattn_take_side(p, side, dst, false);
        fattn_vecq(ctx, p, k->type, v->type);
        return took;
    }
    fattn_decode_ranges(ctx, p);
    // a q8_0 K and V with 2-16 query rows per kv head (GQA decode): the tensor-core decode kernel on the staged raw
    // rows (up to 8 rows: K as int8 against the query rounded per 32 dims, V widened to f16; 9-16: both widened). One
    // row per kv head (Llama 2's MHA) keeps the vec kernel, as for f16. H200, Llama-3-8B tg64 at depth 16384:
    // 240-244 t/s against 206-214 with the vec kernel (GGML_CUDA_FATTN_DEC=0).
    const bool one_row = p.n_tokens * p.r == 1;
    if (!no_vec && !one_row && fattn_dec_cfg() != 0 && k->type == GGML_TYPE_Q8_0 && v->type == GGML_TYPE_Q8_0 &&
        ggml_cuda_fattn_mma_dec_ok(p, k, v, dst))
        return fattn_mma_dec(ctx, p, true, side, dst);
    if (!no_vec && fattn_vecq_ok(p, k, v, p.n_tokens * p.r)) {
        const bool took = fattn_take_side(p, side, dst, true);
        fattn_vecq(ctx, p, k->type, v->type);
        return took;
    }
    const ggml_type other_f32 = k->type == GGML_TYPE_F32 || v->type == GGML_TYPE_F32 ? GGML_TYPE_F32 : GGML_TYPE_F16;
    const size_t mark = ctx.pool.mark();
    ggml_tensor kw = *k, vw = *v;
    if (ggml_cuda_is_kvq(kw.type)) fattn_widen(ctx, &kw, other_f32);
    if (ggml_cuda_is_kvq(vw.type)) fattn_widen(ctx, &vw, other_f32);
    const bool wrote = flash_attn_ext_f(ctx, dst, &kw, &vw, side);
    ctx.pool.rewind(mark); // the copies (and the kernels' scratch) are read only by the kernels just launched
    return wrote;
}

GGML_CUDA_OP(flash_attn_ext) { flash_attn_ext(ctx, dst, fa_side{}); }

void * ggml_cuda_op_flash_attn_ext_q8(ggml_cuda_context & ctx, ggml_tensor * dst) {
    const int64_t n = dst->ne[0] * dst->ne[1], rows = dst->ne[2] * dst->ne[3]; // [D * n_head, n_tokens] rows
    if (n % 32 != 0) {
        flash_attn_ext(ctx, dst, fa_side{});
        return nullptr;
    }
    void * q = ctx.pool.alloc(ggml_cuda_q8s_size(rows, n));
    const q8s_view v = q8s_view_of(q, rows, n);
    fa_side side;
    side.q8s = v.qs;
    side.q8d = v.d;
    side.q8sum = v.s;
    return flash_attn_ext(ctx, dst, side) ? q : nullptr;
}

half * ggml_cuda_op_flash_attn_ext_w16(ggml_cuda_context & ctx, ggml_tensor * dst, const ggml_tensor * rows) {
    GGML_ASSERT(rows->data == dst->data && ggml_nelements(rows) == ggml_nelements(dst));
    if (!ggml_cuda_mmw_order_ok(rows) || !ggml_is_contiguous(dst) || rows->ne[1] != dst->ne[2] * dst->ne[3]) {
        flash_attn_ext(ctx, dst, fa_side{});
        return nullptr;
    }
    const size_t mark = ctx.pool.mark();
    fa_side side;
    side.xw = ggml_cuda_mmw_order_alloc(ctx, rows);
    side.xw_nt = (int)ggml_cuda_mmw_nt(rows->ne[1]);
    if (flash_attn_ext(ctx, dst, side)) return side.xw;
    ctx.pool.rewind(mark);
    return nullptr;
}
