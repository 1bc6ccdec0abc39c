// fattn-mma.cu - see fattn-mma.cuh.
// Fragments (PTX ISA, mma.m16n8k16 .f16): g = lane / 4, c = lane % 4.
//   A 16x16 row-major: a0 (row g, cols 2c, 2c+1), a1 (row g+8, same cols), a2 (row g, cols 2c+8, 2c+9), a3 (row g+8)
//   B 16x8 col:        b0 (rows 2c, 2c+1, col g), b1 (rows 2c+8, 2c+9, col g)
//   C 16x8 f32:        c0, c1 (row g, cols 2c, 2c+1), c2, c3 (row g+8, cols 2c, 2c+1)
// S = Q K^T: A = Q (16 rows of a warp x D), B = K^T; a K row is a B column, so ldmatrix (no .trans) of 8x8 blocks
// of K rows gives b0/b1. O = P V: A = P, whose fragments are the S accumulators packed to f16 (C -> A layout:
// n-tiles 2kk, 2kk+1 of S are k-step kk of P); B = V (keys x D, row-major in shared memory): ldmatrix .trans.
#include "fattn-mma.cuh"
#include "fattn-range.cuh"

#include <climits>
#include <map>
#include <utility>

#define FM_BM 64 // query rows per block: 4 warps x 16
#define FM_BN 64 // keys per tile

static __device__ __forceinline__ void fm_mma(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};\n"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
static __device__ __forceinline__ void fm_ldsm(uint32_t (&r)[4], const half * p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ void fm_ldsm_t(uint32_t (&r)[4], const half * p) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(s));
}
static __device__ __forceinline__ void fm_cp16(half * dst, const char * src) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(src));
}
// 16 bytes of shared memory from the first n (0..16) bytes at src, the rest zero
static __device__ __forceinline__ void fm_cp16n(void * dst, const char * src, int n) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(n));
}
static __device__ __forceinline__ uint32_t fm_pack(float x, float y) {
    const half2 h = __floats2half2_rn(x, y);
    return *(const uint32_t *)&h;
}

template <int D> static __global__ void __launch_bounds__(128) k_fattn_mma(const fattn_mma_params p) {
    constexpr int LD = D + 8; // shared row stride in halves: 16-byte aligned rows, ldmatrix without bank conflicts
    constexpr int KT = D / 16, NT = D / 8, CH = D / 8; // k-steps of S, n-tiles of O, 16-byte chunks per row
    extern __shared__ __align__(16) half fm_smem[];
    half * Ks = fm_smem;             // [2][FM_BN][LD]
    half * Vs = Ks + 2 * FM_BN * LD; // [2][FM_BN][LD]
    char * Ms = (char *)(Vs + 2 * FM_BN * LD); // staged mask (p.mask_stage): [2][FM_BM tokens][FM_BN keys] of its type
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int hk = blockIdx.y, n_q = p.n_tokens * p.r, q0 = blockIdx.x * FM_BM;
    const int t_lo = q0 / p.r, t_hi = min(n_q - 1, q0 + FM_BM - 1) / p.r; // the block's tokens
    const int mes = p.mask_f16 ? 2 : 4;                                      // mask element size
    constexpr float LOG2E = 1.4426950408889634f; // scores are kept in log2 units: exp2 in the softmax

    // this thread's two query rows (g, g + 8 of the warp's 16): token t, head h
    int t[2], h[2];
    bool act[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int qi = q0 + warp * 16 + g + 8 * i;
        act[i] = qi < n_q;
        const int qq = act[i] ? qi : n_q - 1;
        t[i] = qq / p.r;
        h[i] = hk * p.r + qq % p.r;
    }
    // Q fragments, scaled, as f16
    uint32_t qa[KT][4];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const char * qrow = p.q + t[i] * p.qs.nb[1] + h[i] * p.qs.nb[2];
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int d = kt * 16 + 2 * c + 8 * hi;
                const float x0 = *(const float *)(qrow + d * p.qs.nb[0]) * (p.scale * LOG2E);
                const float x1 = *(const float *)(qrow + (d + 1) * p.qs.nb[0]) * (p.scale * LOG2E);
                qa[kt][i + 2 * hi] = fm_pack(x0, x1);
            }
    }

    int kv_end = p.n_kv, kv_begin = 0;
    if (p.causal_n_past >= 0) { // the last key any row of this block sees
        const int q_last = min(n_q - 1, q0 + FM_BM - 1);
        kv_end = min(kv_end, p.causal_n_past + q_last / p.r + 1);
    }
    if (p.ranges) { // the union of the block's tokens' visible ranges
        const int2 u = fattn_ranges_union(p.ranges, t_lo, t_hi);
        kv_begin = u.x;
        kv_end = min(kv_end, u.y);
    }
    const int tile_begin = kv_begin / FM_BN;
    const int n_tiles = max(0, (kv_end + FM_BN - 1) / FM_BN - tile_begin);
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    auto load_tile = [&](int tile, int buf) { // keys past n_kv repeat the last row (finite; masked below)
        for (int e = threadIdx.x; e < FM_BN * CH; e += blockDim.x) {
            const int j = e / CH, ch = e % CH;
            const int64_t key = min(tile * FM_BN + j, p.n_kv - 1);
            fm_cp16(Ks + (buf * FM_BN + j) * LD + ch * 8, kb + key * p.ks.nb[1] + ch * 16);
            fm_cp16(Vs + (buf * FM_BN + j) * LD + ch * 8, vb + key * p.vs.nb[1] + ch * 16);
        }
        if (p.mask_stage) { // the mask rows of the block's tokens for these keys (bytes past n_kv read as zero)
            const int mch = FM_BN * mes / 16; // 16-byte chunks per token
            for (int e = threadIdx.x; e < (t_hi - t_lo + 1) * mch; e += blockDim.x) {
                const int tt = e / mch, ch = e % mch;
                const int k0 = tile * FM_BN + ch * (16 / mes);
                const int n = max(0, min(16, (p.n_kv - k0) * mes));
                fm_cp16n(Ms + ((buf * FM_BM + tt) * FM_BN) * mes + ch * 16,
                         p.mask + (int64_t)(t_lo + tt) * p.ms.nb[1] + (int64_t)(n > 0 ? k0 : 0) * mes, n);
            }
        }
        asm volatile("cp.async.commit_group;\n");
    };

    const char * mrow[2];
    int last[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        mrow[i] = p.mask ? p.mask + t[i] * p.ms.nb[1] + (h[i] % p.ms.ne[2]) * p.ms.nb[2] : nullptr;
        last[i] = p.causal_n_past >= 0 ? p.causal_n_past + t[i] : INT_MAX;
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

    const int mat = lane / 8, mi = lane % 8; // ldmatrix: this lane's row address is row mi of matrix mat
    if (n_tiles > 0) load_tile(tile_begin, 0);
    for (int it = 0; it < n_tiles; ++it) {
        const int buf = it & 1;
        if (it + 1 < n_tiles) {
            load_tile(tile_begin + it + 1, buf ^ 1);
            asm volatile("cp.async.wait_group 1;\n");
        } else {
            asm volatile("cp.async.wait_group 0;\n");
        }
        __syncthreads();
        const half * Kb = Ks + buf * FM_BN * LD;
        const half * Vb = Vs + buf * FM_BN * LD;

        // S [16 rows][64 keys] of this warp: n-tile nt = keys 8nt .. 8nt+7
        float s[FM_BN / 8][4];
#pragma unroll
        for (int nt = 0; nt < FM_BN / 8; ++nt)
            s[nt][0] = s[nt][1] = s[nt][2] = s[nt][3] = 0.0f;
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
            for (int n2 = 0; n2 < FM_BN / 16; ++n2) {
                // matrices: keys 16 n2 + (0..7 | 8..15) x d 16 kt + (0..7 | 8..15): b0, b1 of n-tile 2 n2, then 2 n2 + 1
                uint32_t b[4];
                fm_ldsm(b, Kb + (n2 * 16 + mi + (mat >> 1) * 8) * LD + kt * 16 + (mat & 1) * 8);
                fm_mma(s[2 * n2], qa[kt], b[0], b[1]);
                fm_mma(s[2 * n2 + 1], qa[kt], b[2], b[3]);
            }

        // mask, online softmax (rows g and g + 8; a row's 64 scores are spread over the 4 lanes of its group)
        const int key0 = (tile_begin + it) * FM_BN;
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < FM_BN / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = key0 + nt * 8 + 2 * c + e;
                    float & sv = s[nt][2 * i + e];
                    if (key >= kv_end || key > last[i]) {
                        sv = -INFINITY;
                    } else if (p.mask_stage) {
                        const char * mp = Ms + ((buf * FM_BM + t[i] - t_lo) * FM_BN + key - key0) * mes;
                        sv += LOG2E * (p.mask_f16 ? __half2float(*(const half *)mp) : *(const float *)mp);
                    } else if (mrow[i]) {
                        sv += LOG2E * (p.mask_f16 ? __half2float(*(const half *)(mrow[i] + key * p.ms.nb[0]))
                                                  : *(const float *)(mrow[i] + key * p.ms.nb[0]));
                    }
                    mx = fmaxf(mx, sv);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            const float m_new = fmaxf(m[i], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; // a row with nothing visible yet stays at 0
            const float alpha = exp2f(m[i] - m_use);
            float rs = 0.0f;
#pragma unroll
            for (int nt = 0; nt < FM_BN / 8; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float pv = exp2f(s[nt][2 * i + e] - m_use);
                    s[nt][2 * i + e] = pv;
                    rs += pv;
                }
            rs += __shfl_xor_sync(0xffffffff, rs, 1);
            rs += __shfl_xor_sync(0xffffffff, rs, 2);
            l[i] = l[i] * alpha + rs;
            m[i] = m_new;
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                o[nt][2 * i] *= alpha;
                o[nt][2 * i + 1] *= alpha;
            }
        }

        // O += P V: k-step kk = keys 16 kk .. 16 kk + 15
#pragma unroll
        for (int kk = 0; kk < FM_BN / 16; ++kk) {
            const uint32_t pa[4] = {fm_pack(s[2 * kk][0], s[2 * kk][1]), fm_pack(s[2 * kk][2], s[2 * kk][3]),
                                    fm_pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                    fm_pack(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
            for (int n2 = 0; n2 < NT / 2; ++n2) {
                // matrices: keys 16 kk + (0..7 | 8..15) x d 16 n2 + (0..7 | 8..15), transposed: b0, b1 of d-tile 2 n2,
                // then 2 n2 + 1
                uint32_t b[4];
                fm_ldsm_t(b, Vb + (kk * 16 + mi + (mat & 1) * 8) * LD + n2 * 16 + (mat >> 1) * 8);
                fm_mma(o[2 * n2], pa, b[0], b[1]);
                fm_mma(o[2 * n2 + 1], pa, b[2], b[3]);
            }
        }
        __syncthreads(); // the next iteration's load overwrites this buffer
    }

#pragma unroll
    for (int i = 0; i < 2; ++i) {
        if (!act[i]) continue;
        const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
        float * out = (float *)((char *)p.dst + h[i] * p.ds.nb[1] + t[i] * p.ds.nb[2]);
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
            *(float2 *)(out + nt * 8 + 2 * c) = make_float2(o[nt][2 * i] * inv, o[nt][2 * i + 1] * inv);
    }
}

bool ggml_cuda_fattn_mma_ok(int D, const ggml_tensor * k, const ggml_tensor * v, const ggml_tensor * dst) {
    auto al16 = [](const ggml_tensor * t) {
        return t->type == GGML_TYPE_F16 && t->nb[0] == 2 && t->nb[1] % 16 == 0 && t->nb[2] % 16 == 0 &&
               (uintptr_t)t->data % 16 == 0;
    };
    return (D == 64 || D == 80 || D == 96 || D == 128) && al16(k) && al16(v) && k->ne[1] > 0 &&
           dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst);
}

template <int D> static void launch(ggml_cuda_context & ctx, const fattn_mma_params & p) {
    const size_t smem = sizeof(half) * 4 * FM_BN * (D + 8) + (p.mask_stage ? 2 * FM_BM * FM_BN * 4 : 0);
    CUDA_CHECK(cudaFuncSetAttribute(k_fattn_mma<D>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
    const dim3 grid((unsigned)cuda_ceil_div((int64_t)p.n_tokens * p.r, FM_BM), (unsigned)(p.n_head / p.r));
    k_fattn_mma<D><<<grid, 128, smem, ctx.stream>>>(p);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_fattn_mma(ggml_cuda_context & ctx, const fattn_mma_params & p0) {
    fattn_mma_params p = p0;
    // a mask shared by all heads with dense, 16-byte aligned rows is staged through shared memory with K/V
    const int es = p.mask_f16 ? 2 : 4;
    p.mask_stage = p.mask && p.ms.ne[2] == 1 && p.ms.ne[3] == 1 && p.ms.nb[0] == es && p.ms.nb[1] % 16 == 0 &&
                   (uintptr_t)p.mask % 16 == 0;
    switch (p.D) {
        case 64: launch<64>(ctx, p); break;
        case 80: launch<80>(ctx, p); break;
        case 96: launch<96>(ctx, p); break;
        case 128: launch<128>(ctx, p); break;
        default: GGML_ABORT("fattn mma: D %d", p.D);
    }
}

// ---- decode on tensor cores: at most 16 query rows per kv head, f16 K/V (fattn.cu's f16 decode path) ------------
// Block = W warps for one (kv head, KV split). The 16 rows of A are the kv head's queries (token * r + head in the
// group; rows past n_q are zero and never stored), so every K/V row is read once for the whole GQA group. Warp w
// takes the tiles of FMD_BN keys tb + (i W + w) FMD_BN of the split and streams them through its own NS-stage ring
// in shared memory (cp.async; NS - 1 tiles in flight while one is used; no block barrier in the loop). Per tile:
// S = Q K^T (D / 16 k-steps x 2 n-tiles), the online softmax on the accumulators (log2 units), O += P V (one k-step
// of 16 keys x D / 8 n-tiles, V by ldmatrix .trans) - about two mma per key, so the kernel waits only on memory.
// The mask rows of the block's tokens come with the tile (when they are dense and 16-byte aligned). The warps then
// meet in shared memory (the tiles' space) and the splits are merged by the last block per kv head
// (fattn_vec_finish).
#define FMD_BN 16 // keys per warp tile
#define FMD_MT 4  // mask rows staged with a tile: steps of up to 4 tokens (more read the mask from global memory)

template <int D, int W, int NS> struct fmd_cfg {
    static constexpr int LD = D + 8;
    static constexpr size_t tile_bytes = sizeof(half) * 2 * FMD_BN * LD; // K and V of one stage
    static constexpr size_t mask_bytes = FMD_MT * FMD_BN * 4;            // FMD_MT tokens of f32 mask
    static constexpr size_t smem = W * NS * (tile_bytes + mask_bytes);
    static_assert(W * 16 * D * 4 + W * 16 * 2 * 4 <= smem, "fattn mma decode: merge space");
};

template <int D, int W, int NS> static __global__ void __launch_bounds__(W * 32) k_fattn_mma_dec(const fa_params p) {
    using C = fmd_cfg<D, W, NS>;
    constexpr int LD = C::LD, KT = D / 16, NT = D / 8, CH = D / 8, BN = FMD_BN;
    constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
    extern __shared__ __align__(16) half fm_smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    half * Ks = (half *)((char *)fm_smem + warp * NS * C::tile_bytes);                // [NS][BN][LD]
    half * Vs = Ks + NS * BN * LD;                                                    // [NS][BN][LD]
    char * Ms = (char *)fm_smem + W * NS * C::tile_bytes + warp * NS * C::mask_bytes; // [NS][FMD_MT][BN]
    pdl_start();
    const int hk = blockIdx.y, split = blockIdx.z;
    const int n_q = p.n_tokens * p.r; // <= 16
    const int mes = p.mask_f16 ? 2 : 4;
    const int es = p.mask_f16 ? 2 : 4;
    const bool mask_stage = p.mask && p.n_tokens <= FMD_MT && p.ms.ne[2] == 1 && p.ms.ne[3] == 1 && p.ms.nb[0] == es &&
                            p.ms.nb[1] % 16 == 0 && (uintptr_t)p.mask % 16 == 0;

    int t[2], h[2], last[2];
    const char * mrow[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int qi = g + 8 * i;
        const int qq = qi < n_q ? qi : n_q - 1;
        t[i] = qq / p.r;
        h[i] = hk * p.r + qq % p.r;
        last[i] = p.causal_n_past >= 0 ? p.causal_n_past + t[i] : INT_MAX;
        mrow[i] = p.mask ? p.mask + t[i] * p.ms.nb[1] + (h[i] % p.ms.ne[2]) * p.ms.nb[2] : nullptr;
    }
    int kv_lo, kv1;
    fattn_block_keys(p, split, 0, p.n_tokens - 1, kv_lo, kv1);
    if (p.causal_n_past >= 0) kv1 = min(kv1, p.causal_n_past + p.n_tokens); // the last token's last key + 1
    const int tb = kv_lo & ~(BN - 1); // tiles start BN-aligned (staged mask chunks are 16-byte aligned)
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    const int64_t ks = p.ks.nb[1], vs = p.vs.nb[1];
    auto load_tile = [&](int key0, int st) { // keys past kv1 repeat row kv1 - 1 (finite; their weight is 0)
        if (key0 < kv1) {
            half * kd = Ks + st * BN * LD;
            half * vd = Vs + st * BN * LD;
#pragma unroll
            for (int e = lane; e < BN * CH; e += 32) {
                const int j = e / CH, ch = e % CH;
                const int64_t key = min(key0 + j, kv1 - 1);
                fm_cp16(kd + j * LD + ch * 8, kb + key * ks + ch * 16);
                fm_cp16(vd + j * LD + ch * 8, vb + key * vs + ch * 16);
            }
            if (mask_stage) {
                const int mch = BN * mes / 16; // 16-byte chunks per token
                for (int e = lane; e < p.n_tokens * mch; e += 32) {
                    const int tt = e / mch, ch = e % mch;
                    const int k0 = key0 + ch * (16 / mes);
                    const int n = max(0, min(16, (p.n_kv - k0) * mes));
                    fm_cp16n(Ms + ((st * FMD_MT + tt) * BN) * mes + ch * 16,
                             p.mask + (int64_t)tt * p.ms.nb[1] + (int64_t)(n > 0 ? k0 : 0) * mes, n);
                }
            }
        }
        asm volatile("cp.async.commit_group;\n"); // an empty group past kv1 keeps the count
    };

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;

    const int mat = lane / 8, mi = lane % 8; // ldmatrix: this lane's row address is row mi of matrix mat
    const int step = W * BN, key_w = tb + warp * BN;
#pragma unroll
    for (int s = 0; s < NS - 1; ++s)
        load_tile(key_w + s * step, s);
    // the query (written by the kernel before) while the first tiles are in flight
    uint32_t qa[KT][4]; // Q fragments (rows past n_q zero), scaled, f16
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const bool act = g + 8 * i < n_q;
        const char * qrow = p.q + t[i] * p.qs.nb[1] + h[i] * p.qs.nb[2];
#pragma unroll
        for (int kt = 0; kt < KT; ++kt)
#pragma unroll
            for (int hi = 0; hi < 2; ++hi) {
                const int d = kt * 16 + 2 * c + 8 * hi;
                const float x0 = act ? *(const float *)(qrow + d * p.qs.nb[0]) * (p.scale * LOG2E) : 0.0f;
                const float x1 = act ? *(const float *)(qrow + (d + 1) * p.qs.nb[0]) * (p.scale * LOG2E) : 0.0f;
                qa[kt][i + 2 * hi] = fm_pack(x0, x1);
            }
    }

    for (int it = 0; key_w + it * step < kv1; ++it) {
        load_tile(key_w + (it + NS - 1) * step, (it + NS - 1) % NS);
        asm volatile("cp.async.wait_group %0;\n" ::"n"(NS - 1));
        __syncwarp();
        const int st = it % NS, key0 = key_w + it * step;
        const half * Kb = Ks + st * BN * LD;
        const half * Vb = Vs + st * BN * LD;

        float s[2][4] = {};
#pragma unroll
        for (int kt = 0; kt < KT; ++kt) {
            uint32_t b[4];
            fm_ldsm(b, Kb + (mi + (mat >> 1) * 8) * LD + kt * 16 + (mat & 1) * 8);
            fm_mma(s[0], qa[kt], b[0], b[1]);
            fm_mma(s[1], qa[kt], b[2], b[3]);
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) {
            float mx = -INFINITY;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const int key = key0 + nt * 8 + 2 * c + e;
                    float & sv = s[nt][2 * i + e];
                    if (key < kv_lo || key >= kv1 || key > last[i]) {
                        sv = -INFINITY;
                    } else if (mask_stage) {
                        const char * mp = Ms + ((st * FMD_MT + t[i]) * BN + key - key0) * mes;
                        sv += LOG2E * (p.mask_f16 ? __half2float(*(const half *)mp) : *(const float *)mp);
                    } else if (mrow[i]) {
                        sv += LOG2E * (p.mask_f16 ? __half2float(*(const half *)(mrow[i] + key * p.ms.nb[0]))
                                                  : *(const float *)(mrow[i] + key * p.ms.nb[0]));
                    }
                    mx = fmaxf(mx, sv);
                }
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 2));
            const float m_new = fmaxf(m[i], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; // a row with nothing visible yet stays at 0
            const float alpha = exp2f(m[i] - m_use);
            float rs = 0.0f;
#pragma unroll
            for (int nt = 0; nt < 2; ++nt)
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    const float pv = exp2f(s[nt][2 * i + e] - m_use);
                    s[nt][2 * i + e] = pv;
                    rs += pv;
                }
            rs += __shfl_xor_sync(0xffffffff, rs, 1);
            rs += __shfl_xor_sync(0xffffffff, rs, 2);
            l[i] = l[i] * alpha + rs;
            m[i] = m_new;
            if (alpha != 1.0f) {
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    o[nt][2 * i] *= alpha;
                    o[nt][2 * i + 1] *= alpha;
                }
            }
        }
        const uint32_t pa[4] = {fm_pack(s[0][0], s[0][1]), fm_pack(s[0][2], s[0][3]), fm_pack(s[1][0], s[1][1]),
                                fm_pack(s[1][2], s[1][3])};
#pragma unroll
        for (int n2 = 0; n2 < NT / 2; ++n2) {
            uint32_t b[4];
            fm_ldsm_t(b, Vb + (mi + (mat & 1) * 8) * LD + n2 * 16 + (mat >> 1) * 8);
            fm_mma(o[2 * n2], pa, b[0], b[1]);
            fm_mma(o[2 * n2 + 1], pa, b[2], b[3]);
        }
        __syncwarp(); // the next iteration's load overwrites the stage NS - 1 tiles ahead: this one
    }
    asm volatile("cp.async.wait_group 0;\n");
    __syncthreads(); // the tiles' space becomes the warps' merge space

    auto & s_acc = *reinterpret_cast<float(*)[W][16][D]>(fm_smem);
    auto & s_ml = *reinterpret_cast<float(*)[W][16][2]>((char *)fm_smem + sizeof(float) * W * 16 * D);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int j = g + 8 * i;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt) {
            s_acc[warp][j][nt * 8 + 2 * c] = o[nt][2 * i];
            s_acc[warp][j][nt * 8 + 2 * c + 1] = o[nt][2 * i + 1];
        }
        if (c == 0) {
            s_ml[warp][j][0] = m[i] == -INFINITY ? -INFINITY : m[i] * LN2; // natural-log units for the merge
            s_ml[warp][j][1] = l[i];
        }
    }
    fattn_vec_finish<W, 16, D>(p, s_acc, s_ml, hk, split, n_q);
}

bool ggml_cuda_fattn_mma_dec_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v,
                                const ggml_tensor * dst) {
    return p.n_tokens * p.r <= 16 && p.n_tokens <= 16 && ggml_cuda_fattn_mma_ok(p.D, k, v, dst);
}

template <int D, int W, int NS> static fattn_vec_fn fmd_get(int & w, int & s, size_t & smem) {
    w = W;
    s = FMD_BN;
    smem = fmd_cfg<D, W, NS>::smem;
    return k_fattn_mma_dec<D, W, NS>;
}
template <int D> static fattn_vec_fn fmd_pick_cfg(int cfg, int & W, int & S, size_t & smem) {
    switch (cfg) {
        case 2:
            return fmd_get<D, 2, 4>(W, S, smem);
        case 1:
            return fmd_get<D, 4, 3>(W, S, smem);
        case 3:
            return fmd_get<D, 4, 2>(W, S, smem);
        case 5:
            return fmd_get<D, 8, 3>(W, S, smem);
        case 6:
            return fmd_get<D, 12, 2>(W, S, smem);
        default:
            return fmd_get<D, 8, 2>(W, S, smem);
    }
}

fattn_vec_fn ggml_cuda_fattn_mma_dec(int D, int cfg, int device, int & W, int & S, size_t & smem) {
    fattn_vec_fn fn = nullptr;
    switch (D) {
        case 64:
            fn = fmd_pick_cfg<64>(cfg, W, S, smem);
            break;
        case 80:
            fn = fmd_pick_cfg<80>(cfg, W, S, smem);
            break;
        case 96:
            fn = fmd_pick_cfg<96>(cfg, W, S, smem);
            break;
        case 128:
            fn = fmd_pick_cfg<128>(cfg, W, S, smem);
            break;
        default:
            GGML_ABORT("fattn mma decode: D %d", D);
    }
    static thread_local std::map<std::pair<const void *, int>, bool> attr_set; // smem above 48 KiB: once per device
    bool & done = attr_set[{(const void *)fn, device}];
    if (!done) {
        CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        done = true;
    }
    return fn;
}
