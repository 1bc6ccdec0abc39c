// fattn.cu - see fattn.cuh.
// Block = FA_WARPS warps; each warp owns one query row (token t, head h); the block's queries
// share one kv head, so a K/V tile of 32 keys (in shared memory, as f32) serves all of them.
// Scores: lane j takes key j of the tile (full dot over D from shared memory). Softmax is online
// (running max m and sum l per query). PV: lane owns dims lane, lane+32, ...
#include "cpy.cuh"
#include "fattn.cuh"
#include "softmax.cuh"

#include <cstdlib>

#define FA_WARPS 8
#define FA_TILE 32

struct fa_params {
    const char * q;
    const char * k;
    const char * v;
    const char * mask;
    float * dst;  // final output (n_split == 1)
    float * part; // [n_split][n_q][D] partial accumulators (n_split > 1)
    float2 * ml;  // [n_split][n_q] (m, l)
    cuda_shape qs, ks, vs, ms, ds;
    int D, n_kv, n_tokens, n_head, r, n_split, kv_per_split, causal_n_past, mask_f16;
    float scale;
};

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
    float M = -INFINITY;
    for (int s = 0; s < p.n_split; ++s)
        M = fmaxf(M, p.ml[s * nq_all + qg].x);
    char * out = (char *)p.dst + h * p.ds.nb[1] + t * p.ds.nb[2];
    for (int d = threadIdx.x; d < p.D; d += blockDim.x) {
        float num = 0.0f, den = 0.0f;
        if (M != -INFINITY) {
            for (int s = 0; s < p.n_split; ++s) {
                const float2 ml = p.ml[s * nq_all + qg];
                const float w = ml.x == -INFINITY ? 0.0f : expf(ml.x - M);
                num += w * p.part[(s * nq_all + qg) * p.D + d];
                den += w * ml.y;
            }
        }
        *(float *)(out + d * p.ds.nb[0]) = den > 0.0f ? num / den : 0.0f;
    }
}

// ---- decode path: few queries per kv head ------------------------------------------------------
// Block = W warps for one (kv head, KV split); warp w takes keys kv0 + w, kv0 + w + W, ... and loads the
// next key's rows before it uses the current ones. W = 16 for one or two queries per kv head (decode with
// MHA: short contexts need no split and no combine launch), else 4 (shared memory for the merge).
// Lane l owns dims [l*E, l*E + E) (E = D/32) of K, V, q and the accumulators, so a key's K and V rows
// are each read by the warp as one contiguous row; scores are warp sums. All NQ queries of the kv head
// (NQ >= n_tokens * r) use each K/V row once loaded. The warps' (m, l, acc) meet in shared memory;
// with several splits the block writes partials for k_fattn_combine.

template <typename T, int E>
static __device__ __forceinline__ void load_row(const char * row, int lane, float * out) {
    const T * p = (const T *)row + lane * E;
    if constexpr (sizeof(T) == 2 && E % 4 == 0) {
#pragma unroll
        for (int i = 0; i < E; i += 4) {
            const uint2 raw = *(const uint2 *)(p + i); // 4 halves
            const float2 a = __half22float2(*(const half2 *)&raw.x), b = __half22float2(*(const half2 *)&raw.y);
            out[i] = a.x;
            out[i + 1] = a.y;
            out[i + 2] = b.x;
            out[i + 3] = b.y;
        }
    } else {
#pragma unroll
        for (int i = 0; i < E; ++i)
            out[i] = to_f32<T>(p[i]);
    }
}

template <typename T, int E, int NQ, int W> static __global__ void __launch_bounds__(W * 32) k_fattn_vec(fa_params p) {
    constexpr int D = 32 * E;
    __shared__ float s_acc[W][NQ][D];
    __shared__ float s_ml[W][NQ][2];
    pdl_start();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int hk = blockIdx.y, split = blockIdx.z;
    const int n_q = p.n_tokens * p.r;

    float q[NQ][E], acc[NQ][E], m[NQ], l[NQ];
    int last[NQ]; // last visible key of each query (causal), INT_MAX without
    const char * mrow[NQ];
#pragma unroll
    for (int j = 0; j < NQ; ++j) {
        const int qi = j < n_q ? j : 0;
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

    const int kv0 = split * p.kv_per_split;
    const int kv1 = min(p.n_kv, kv0 + p.kv_per_split);
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    float kr[E], vr[E];
    if (kv0 + warp < kv1) {
        load_row<T, E>(kb + (kv0 + warp) * p.ks.nb[1], lane, kr);
        load_row<T, E>(vb + (kv0 + warp) * p.vs.nb[1], lane, vr);
    }
    for (int key = kv0 + warp; key < kv1; key += W) {
        float kn[E], vn[E]; // the next key's rows, in flight while this one is used
        if (key + W < kv1) {
            load_row<T, E>(kb + (key + W) * p.ks.nb[1], lane, kn);
            load_row<T, E>(vb + (key + W) * p.vs.nb[1], lane, vn);
        }
#pragma unroll
        for (int j = 0; j < NQ; ++j) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < E; ++i)
                s += q[j][i] * kr[i];
            s = warp_sum(s);
            if (mrow[j])
                s += p.mask_f16 ? __half2float(*(const half *)(mrow[j] + key * p.ms.nb[0]))
                                : *(const float *)(mrow[j] + key * p.ms.nb[0]);
            if (key > last[j]) s = -INFINITY;
            const float m_new = fmaxf(m[j], s);
            if (m_new == -INFINITY) continue; // nothing visible yet (uniform over the warp)
            const float alpha = expf(m[j] - m_new), pj = expf(s - m_new);
            l[j] = l[j] * alpha + pj;
            m[j] = m_new;
#pragma unroll
            for (int i = 0; i < E; ++i)
                acc[j][i] = acc[j][i] * alpha + pj * vr[i];
        }
#pragma unroll
        for (int i = 0; i < E; ++i) {
            kr[i] = kn[i];
            vr[i] = vn[i];
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
    __syncthreads();
    // merge the warps: thread e handles (query j, dim d) pairs
    for (int e = threadIdx.x; e < n_q * D; e += blockDim.x) {
        const int j = e / D, d = e % D;
        float M = -INFINITY;
#pragma unroll
        for (int w = 0; w < W; ++w)
            M = fmaxf(M, s_ml[w][j][0]);
        float num = 0.0f, den = 0.0f;
        if (M != -INFINITY) {
#pragma unroll
            for (int w = 0; w < W; ++w) {
                const float mw = s_ml[w][j][0];
                const float sc = mw == -INFINITY ? 0.0f : expf(mw - M);
                num += sc * s_acc[w][j][d];
                den += sc * s_ml[w][j][1];
            }
        }
        const int t = j / p.r, h = hk * p.r + j % p.r;
        if (p.n_split == 1) {
            *(float *)((char *)p.dst + d * p.ds.nb[0] + h * p.ds.nb[1] + t * p.ds.nb[2]) = den > 0.0f ? num / den : 0.0f;
        } else {
            const int64_t qg = (int64_t)hk * n_q + j;
            const int64_t nq_all = (int64_t)n_q * gridDim.y;
            p.part[((int64_t)split * nq_all + qg) * D + d] = num;
            if (d == 0) p.ml[split * nq_all + qg] = make_float2(M, den);
        }
    }
}

// warps per block of the decode kernel for n_q queries per kv head
static int fattn_vec_warps(int n_q) { return n_q <= 2 ? 16 : 4; }

template <typename T, int E>
static void launch_fattn_vec(const ggml_cuda_context & ctx, const fa_params & p, dim3 grid) {
    const int n_q = p.n_tokens * p.r;
    if (n_q <= 1)
        ggml_cuda_launch(ctx, k_fattn_vec<T, E, 1, 16>, grid, dim3(16 * 32), 0, p);
    else if (n_q <= 2)
        ggml_cuda_launch(ctx, k_fattn_vec<T, E, 2, 16>, grid, dim3(16 * 32), 0, p);
    else if (n_q <= 4)
        ggml_cuda_launch(ctx, k_fattn_vec<T, E, 4, 4>, grid, dim3(4 * 32), 0, p);
    else
        ggml_cuda_launch(ctx, k_fattn_vec<T, E, 8, 4>, grid, dim3(4 * 32), 0, p);
}

template <typename T> static void launch_fattn_vec_d(const ggml_cuda_context & ctx, const fa_params & p, dim3 grid) {
    switch (p.D) {
        case 32: launch_fattn_vec<T, 1>(ctx, p, grid); break;
        case 64: launch_fattn_vec<T, 2>(ctx, p, grid); break;
        case 128: launch_fattn_vec<T, 4>(ctx, p, grid); break;
        case 256: launch_fattn_vec<T, 8>(ctx, p, grid); break;
        default: GGML_ABORT("fattn vec: D %d", p.D);
    }
}

// the decode kernel takes D in {32, 64, 128, 256}, dense K/V rows and at most 8 queries per kv head
static bool fattn_vec_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v) {
    const size_t es = ggml_type_size(k->type);
    const bool d_ok = p.D == 32 || p.D == 64 || p.D == 128 || p.D == 256;
    const bool dense = k->nb[0] == es && v->nb[0] == es && k->nb[1] % 8 == 0 && v->nb[1] % 8 == 0 &&
                       k->nb[2] % 8 == 0 && v->nb[2] % 8 == 0 && (uintptr_t)k->data % 8 == 0 &&
                       (uintptr_t)v->data % 8 == 0;
    return d_ok && dense && p.n_tokens * p.r <= 8;
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
    CUBLAS_CHECK(cublasGemmStridedBatchedEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n_kv, (int)(T * r), (int)D, &one,
                                            k->data, CUDA_R_16F, (int)(k->nb[1] / 2), (long long)(k->nb[2] / 2), Qh,
                                            CUDA_R_16F, (int)D, (long long)(D * T * r), &zero, S, CUDA_R_32F, (int)n_kv,
                                            (long long)(n_kv * T * r), (int)Hk, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    const int64_t sne[4] = {n_kv, T, H, 1};
    const cuda_shape ss = ggml_cuda_contig_shape(GGML_TYPE_F32, sne), ps = ggml_cuda_contig_shape(GGML_TYPE_F16, sne);
    ggml_cuda_soft_max_rows(ctx, (const char *)S, ss, p.mask, mask ? mask->type : GGML_TYPE_F32, p.ms, (char *)P,
                            GGML_TYPE_F16, ps, p.scale, p.causal_n_past);
    for (int64_t i = 0; i < r; ++i) { // heads hk*r + i for all hk
        CUBLAS_CHECK(cublasGemmStridedBatchedEx(
            ctx.cublas, CUBLAS_OP_N, CUBLAS_OP_N, (int)D, (int)T, (int)n_kv, &one, v->data, CUDA_R_16F,
            (int)(v->nb[1] / 2), (long long)(v->nb[2] / 2), P + i * n_kv * T, CUDA_R_16F, (int)n_kv,
            (long long)(r * n_kv * T), &zero, (float *)dst->data + i * D, CUDA_R_32F, (int)(D * H), (long long)(r * D),
            (int)Hk, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    }
}

GGML_CUDA_OP(flash_attn_ext) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3];
    GGML_ASSERT(q->type == GGML_TYPE_F32 && k->type == v->type && q->ne[0] <= FATTN_MAX_D && q->ne[3] == 1);
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
    const int n_head_kv = (int)k->ne[2];
    const int n_q = p.n_tokens * p.r;
    static const bool no_vec = std::getenv("GGML_CUDA_FATTN_NO_VEC") != nullptr; // A/B against the tile kernel
    if (fattn_gemm_ok(p, k, v, dst) && !no_vec) {
        fattn_gemm(ctx, p, q, k, v, mask, dst);
        return;
    }
    if (fattn_vec_ok(p, k, v) && !no_vec) {
        // splits of >= 16 keys per warp until the grid covers the SMs twice
        const int W = fattn_vec_warps(n_q);
        int n_split = (int)std::min<int64_t>(cuda_ceil_div(2 * ctx.n_sm, n_head_kv), cuda_ceil_div(p.n_kv, 16 * W));
        n_split = std::max(n_split, 1);
        p.kv_per_split = (int)cuda_ceil_div(p.n_kv, n_split);
        n_split = (int)cuda_ceil_div(p.n_kv, p.kv_per_split);
        p.n_split = n_split;
        if (n_split > 1) {
            const int64_t nq_all = (int64_t)n_q * n_head_kv;
            p.part = (float *)ctx.pool.alloc(sizeof(float) * n_split * nq_all * p.D);
            p.ml = (float2 *)ctx.pool.alloc(sizeof(float2) * n_split * nq_all);
        }
        const dim3 grid(1, n_head_kv, n_split);
        if (k->type == GGML_TYPE_F16)
            launch_fattn_vec_d<half>(ctx, p, grid);
        else
            launch_fattn_vec_d<float>(ctx, p, grid);
        if (n_split > 1) ggml_cuda_launch(ctx, k_fattn_combine, dim3(n_q * n_head_kv, 1), dim3(128), 0, p);
        return;
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
    if (n_split > 1) ggml_cuda_launch(ctx, k_fattn_combine, dim3(n_q * n_head_kv, 1), dim3(128), 0, p);
}
