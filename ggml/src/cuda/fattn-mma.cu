// fattn-mma.cu - see fattn-mma.cuh.
// Fragments (PTX ISA, mma.m16n8k16 .f16): g = lane / 4, c = lane % 4.
//   A 16x16 row-major: a0 (row g, cols 2c, 2c+1), a1 (row g+8, same cols), a2 (row g, cols 2c+8, 2c+9), a3 (row g+8)
//   B 16x8 col:        b0 (rows 2c, 2c+1, col g), b1 (rows 2c+8, 2c+9, col g)
//   C 16x8 f32:        c0, c1 (row g, cols 2c, 2c+1), c2, c3 (row g+8, cols 2c, 2c+1)
// S = Q K^T: A = Q (16 rows of a warp x D), B = K^T; a K row is a B column, so ldmatrix (no .trans) of 8x8 blocks
// of K rows gives b0/b1. O = P V: A = P, whose fragments are the S accumulators packed to f16 (C -> A layout:
// n-tiles 2kk, 2kk+1 of S are k-step kk of P); B = V (keys x D, row-major in shared memory): ldmatrix .trans.
#include "cp-async.cuh"
#include "fattn-mma.cuh"
#include "fattn-mma-frag.cuh"
#include "fattn-range.cuh"
#include "mma-s8.cuh"

#include <climits>
#include <map>
#include <utility>

#define FM_BM 64 // query rows per block: 4 warps x 16
#define FM_BN 64 // keys per tile

template <int D> static __global__ void __launch_bounds__(128) k_fattn_mma(const fattn_mma_params p) {
    constexpr int LD = D + 8; // shared row stride in halves: 16-byte aligned rows, ldmatrix without bank conflicts
    constexpr int KT = D / 16, NT = D / 8; // k-steps of S, n-tiles of O
    extern __shared__ __align__(16) half fm_smem[];
    half * Ks = fm_smem;                       // [2][FM_BN][LD]
    half * Vs = Ks + 2 * FM_BN * LD;           // [2][FM_BN][LD]
    char * Ms = (char *)(Vs + 2 * FM_BN * LD); // staged mask (p.mask_stage): [2][FM_BM tokens][FM_BN keys] of its type
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int hk = blockIdx.y, n_q = p.n_tokens * p.r, q0 = blockIdx.x * FM_BM;
    const int t_lo = q0 / p.r, t_hi = min(n_q - 1, q0 + FM_BM - 1) / p.r; // the block's tokens
    const int mes = p.mask_f16 ? 2 : 4;                                   // mask element size
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
    auto load_tile = [&](int tile, int buf) {
        fm_load_kv<D, FM_BN, LD>(Ks, Vs, kb, vb, p.ks.nb[1], p.vs.nb[1], p.n_kv, tile, buf);
        if (p.mask_stage) { // the mask rows of the block's tokens for these keys (bytes past n_kv read as zero)
            const int mch = FM_BN * mes / 16; // 16-byte chunks per token
            for (int e = threadIdx.x; e < (t_hi - t_lo + 1) * mch; e += blockDim.x) {
                const int tt = e / mch, ch = e % mch;
                const int k0 = tile * FM_BN + ch * (16 / mes);
                const int n = max(0, min(16, (p.n_kv - k0) * mes));
                cp_async16n(Ms + ((buf * FM_BM + tt) * FM_BN) * mes + ch * 16,
                         p.mask + (int64_t)(t_lo + tt) * p.ms.nb[1] + (int64_t)(n > 0 ? k0 : 0) * mes, n);
            }
        }
        cp_async_commit();
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
        fm_next_tile(it, n_tiles, tile_begin, load_tile);
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
                // matrices: keys 16 n2 + (0..7 | 8..15) x d 16 kt + (0..7 | 8..15): b0, b1 of n-tile 2 n2, then 2 n2 +
                // 1
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
    fattn_mma_for_d(p.D, [&](auto d) { launch<decltype(d)::value>(ctx, p); });
}

// ---- decode on tensor cores: at most 16 query rows per kv head, f16 or q8_0 K/V (fattn.cu's decode path) -------
// Block = W warps for one (kv head, KV split). The 16 rows of A are the kv head's queries (token * r + head in the
// group; rows past n_q are zero and never stored), so every K/V row is read once for the whole GQA group. Warp w
// takes the tiles of FMD_BN keys tb + (i W + w) FMD_BN of the split and streams them through its own NS-stage ring
// in shared memory (cp.async; NS - 1 tiles in flight while one is used; no block barrier in the loop). Per tile:
// S = Q K^T (D / 16 k-steps x 2 n-tiles), the online softmax on the accumulators (log2 units), O += P V (one k-step
// of 16 keys x D / 8 n-tiles, V by ldmatrix .trans). Up to 8 query rows (SW, GQA decode of one token) take the
// swapped-operand form instead (fmd_sw_loop: the keys are the 16 mma rows, the queries its 8 columns).
// A q8_0 cache (Q8; K and V both q8_0, D 64 or 128) is staged as its raw rows (D / 32 blocks of 34 bytes; a staged
// row is RS bytes, the row at offset kp / vp in it): half the bytes of an f16 cache per key. Where the cache's row
// strides are multiples of 16 bytes (every kv head's rows then start at one offset mod 16) a row is copied as the
// 16-byte pieces that cover it (kp / vp = that offset), else in 4- or 8-byte pieces (fmd_cfg::CB; kp = vp = 0). The
// swapped form dots K in int8 (s8 mma per 32-dim block against the query rounded to int8, the block scales applied
// to the integer sums) and builds V^T's f16 fragments from the raw V rows in registers; the 16-row form widens the
// tile's K rows to f16 (d x q, rounded once, as fattn_widen's copy) in one f16 buffer before S, then the V rows.
// Measured (H200, Llama-3-8B q8_0 weights, tg32 at depth 16384; docs/perf.md, seventeenth session): f16 cache
// 298-301 t/s, q8_0 cache 290-297 (sixth session: 243-252 and 240-244; vec kernel 206-214).
// The mask rows of the block's tokens come with the tile (when they are dense and 16-byte aligned). The warps then
// meet in shared memory (the tiles' space) and the splits are merged by the last block per kv head
// (fattn_vec_finish).
// Lean tiles (p.lean; the decode of one token: one mask row for all queries, no causal limit): a tile whose 16 keys
// all lie in [kv_lo, kv1) is copied by per-lane row strides (no clamp, no per-piece index math; f16 D 64 / 128 and
// 16-byte q8_0 pieces) and, in the swapped form, adds the 2 mask values of a lane's keys from the staged row without
// per-score bounds checks. PTX per tile of the swapped form, D 128: f16 ~550 -> ~250, q8_0 ~880 -> ~575 (the copies
// and the mask were half of an f16 tile's instructions). The mask values were loaded into registers a tile ahead
// until the twenty-second session: the conversion of a tile's values waited on the scoreboard of the next tile's
// loads as well (SASS counts a scoreboard's loads, it does not track registers), so each tile waited one memory
// latency (H200 ncu, depth 16384, f16 cache: 27% of the kernel's stall samples on that conversion, 10% with q8_0).
#define FMD_BN 16 // keys per warp tile
#define FMD_MT 4  // mask rows staged with a tile: steps of up to 4 tokens (more read the mask from global memory)

// A block's shared memory: per warp NS stages of K/V tiles (the 16-row q8_0 form also one widened tile, Ts; the
// swapped form reads the raw rows and has none: at D 128, 8 x 3, a q8_0 block takes 116.7 KB, not the 151.5 it
// reserved until the thirty-seventh session; H200, Llama-3-8B q8_0 at depth 16384: step 3309 against 3307 us), and
// the staged mask rows.
template <int D, int W, int NS, bool Q8, bool SW = false> struct fmd_cfg {
    static constexpr int LD = D + 8;
    static constexpr int RB = D / 32 * 34;                              // bytes of a q8_0 row
    static constexpr int CB = RB % 8 == 0 ? 8 : 4;                      // cp.async piece of a q8_0 row
    static constexpr int RS = (RB + 15) / 16 * 16;                      // a staged q8_0 row: 16-byte pieces
    static constexpr size_t f16_bytes = sizeof(half) * 2 * FMD_BN * LD; // K and V of one f16 tile
    static constexpr size_t raw_bytes = 2 * FMD_BN * RS;                // K and V rows of one q8_0 tile
    static constexpr size_t stage_bytes = Q8 ? raw_bytes : f16_bytes;
    static constexpr size_t warp_bytes = NS * stage_bytes + (Q8 && !SW ? f16_bytes / 2 : 0); // + one widened K or V
    static constexpr size_t mask_bytes = FMD_MT * FMD_BN * 4;                         // FMD_MT tokens of f32 mask
    static constexpr size_t smem = W * (warp_bytes + NS * mask_bytes);
    static_assert(!Q8 || (D % 64 == 0 && RB % 4 == 0), "fattn mma decode: q8_0 rows of 4-byte pieces");
    static_assert(W * 16 * D * 4 + W * 16 * 2 * 4 <= smem, "fattn mma decode: merge space");
};

// Rows of a q8_0 tile widened (the 16-row form): raw [FMD_BN] rows RS bytes apart (the K or the V rows) -> f16
// [FMD_BN][LD]. A unit is 16 values of one block (a half): its scale, 16 bytes (2-byte aligned: 8 halfword loads),
// q + 128 put in the low byte of the f16 1024 + (q + 128) by one byte_perm per pair, minus 1152 (exact), times d
// (rounded once: d x q needs <= 19 bits).
template <int D, int RS, int LD>
static __device__ __forceinline__ void fmd_q8_widen(const char * raw, half * dst, int lane) {
    constexpr int UR = D / 16; // units per row
    const half2 off = __float2half2_rn(1152.0f);
#pragma unroll
    for (int u = lane; u < FMD_BN * UR; u += 32) {
        const int j = u / UR, b = (u % UR) / 2, hb = u % 2; // row, block, half
        const char * blk = raw + j * RS + b * 34;
        const half2 d2 = __half2half2(*(const half *)blk);
        const unsigned short * qs = (const unsigned short *)(blk + 2 + hb * 16);
        uint32_t h[8];
#pragma unroll
        for (int w = 0; w < 4; ++w) {
            const uint32_t x = ((uint32_t)qs[2 * w] | ((uint32_t)qs[2 * w + 1] << 16)) ^ 0x80808080u;
            h[2 * w] = __byte_perm(x, 0x64646464u, 0x5140);
            h[2 * w + 1] = __byte_perm(x, 0x64646464u, 0x5342);
        }
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const half2 v = __hmul2(__hsub2(*(const half2 *)&h[i], off), d2);
            h[i] = *(const uint32_t *)&v;
        }
        uint4 * o = (uint4 *)(dst + j * LD + b * 32 + hb * 16);
        o[0] = make_uint4(h[0], h[1], h[2], h[3]);
        o[1] = make_uint4(h[4], h[5], h[6], h[7]);
    }
}

// 4 bytes of shared memory at p, 4-byte aligned (al) or only 2-byte aligned (two halfwords)
static __device__ __forceinline__ uint32_t fm_ld4(const char * p, bool al) {
    if (al) return *(const uint32_t *)p;
    return __byte_perm(*(const unsigned short *)p, *(const unsigned short *)(p + 2), 0x5410);
}

// 8x8 b16 matrix transposed across the warp: in, row lane / 4, columns 2 (lane % 4) and + 1; out, the same of the
// transpose
static __device__ __forceinline__ uint32_t fm_movt(uint32_t x) {
    uint32_t r;
    asm volatile("movmatrix.sync.aligned.m8n8.trans.b16 %0, %1;\n" : "=r"(r) : "r"(x));
    return r;
}

// The swapped form's query values of this lane (thread (g, c): query g of kv head hk, 0 past n_q), unscaled, in
// the order its B fragments take them: Q8 dims 32 b + 16 (i / 4) + 4 c + i % 4 at 8 b + i, f16 dims 16 kt + 8 hi + 2 c
// (+ 1) at 4 kt + 2 hi (+ 1). Loaded before the first tiles' copies are issued: behind them the query's loads
// waited for the copies to leave the load queue, then for their own round trip (H200 ncu at depth 16384, q8_0 cache:
// one instruction waiting on them held 8% of the kernel's stall samples). Where the query row is dense and 16-byte
// aligned, 8 (Q8) or 16 (f16) vector loads at D 128 instead of 32 scalar ones and their address arithmetic (code
// that runs once a launch is fetched cold: fattn_vec_finish). The decode step did not measurably change with it.
template <int D, bool Q8>
static __device__ __forceinline__ void fmd_sw_qload(const fa_params & p, int hk, int g, int c, float (&qv)[D / 4]) {
    const int n_q = p.n_tokens * p.r;
    const bool act = g < n_q;
    const int qq = act ? g : 0;
    const char * qrow = p.q + (qq / p.r) * p.qs.nb[1] + (hk * p.r + qq % p.r) * p.qs.nb[2];
    static_assert(D % 32 == 0 || !Q8, "fmd_sw_qload: q8 blocks of 32 dims");
    const bool vec = p.qs.nb[0] == 4 && (uintptr_t)qrow % 16 == 0;
#pragma unroll
    for (int k = 0; k < D / 4; ++k) {
        const int d =
            Q8 ? 32 * (k / 8) + 16 * (k % 8 / 4) + 4 * c + k % 4 : 16 * (k / 4) + 8 * (k % 4 / 2) + 2 * c + k % 2;
        constexpr int V = Q8 ? 4 : 2; // values of one vector load
        if (vec && k % V == 0) {
            if constexpr (Q8) {
                const float4 x = act ? *(const float4 *)(qrow + 4 * d) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                qv[k] = x.x, qv[k + 1] = x.y, qv[k + 2] = x.z, qv[k + 3] = x.w;
            } else {
                const float2 x = act ? *(const float2 *)(qrow + 4 * d) : make_float2(0.0f, 0.0f);
                qv[k] = x.x, qv[k + 1] = x.y;
            }
        } else if (!vec) {
            qv[k] = act ? *(const float *)(qrow + d * p.qs.nb[0]) : 0.0f;
        }
    }
}

// The main loop and the end of k_fattn_mma_dec for at most 8 query rows per kv head (SW: the GQA decode of one
// token), with the operands swapped: S^T = K Q^T (A = 16 keys of the tile x D from shared memory, B = the queries, 8
// columns held in registers) and O^T += V^T P^T (A = V^T by ldmatrix .trans, B = P^T: the S^T accumulators packed to
// f16 and transposed by movmatrix). Half the mma of the 16-row form (whose rows 8-15 carried nothing), D / 16 x 4
// output registers instead of D / 8 x 4, and 4 scores per thread instead of 8. Thread (g, c) holds keys g, g + 8
// for queries 2c, 2c + 1; a query's max is shuffled over its 8 lanes (g); its sum l stays per lane until the end.
// one_row (the lean form, see above): every query reads mask row mrow[0] and there is no causal limit; kp / vp: where
// a q8_0 K / V row starts in its staged row.
template <int D, int W, int NS, bool Q8, typename LT>
static __device__ __forceinline__ void fmd_sw_loop(const fa_params & p, char * Wsm, const char * Ms, LT & load_tile,
                                                   int key_w, int kv_lo, int kv1, const int (&t)[2],
                                                   const int (&last)[2], const char * const (&mrow)[2], bool mask_stage,
                                                   bool one_row, int kp, int vp, int hk, int split,
                                                   const float (&qv)[D / 4]) {
    using C = fmd_cfg<D, W, NS, Q8, true>;
    constexpr int LD = C::LD, KT = D / 16, BN = FMD_BN;
    constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
    extern __shared__ __align__(16) half fm_smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    const int n_q = p.n_tokens * p.r, mes = p.mask_f16 ? 2 : 4, step = W * BN;
    // Q^T fragments (the B operand) from qv (fmd_sw_qload): query g, dims kt 16 + 2c (+1) and + 8 (+9); zero past
    // n_q; scaled, f16. Q8: K stays int8 (S^T = K Q^T on m16n8k32 s8 per 32-dim block, d_k d_q applied to each
    // block's integer sums), the query quantized to int8 per 32 dims as the vec kernels do: qk[b] the B fragments of
    // query g (dims 32b + 4c .. + 3, 32b + 16 + 4c .. + 3), qd[b] the scales of the accumulator columns (queries 2c,
    // 2c + 1)
    constexpr int NB = D / 32;
    uint32_t qb[Q8 ? 1 : KT][2];
    uint32_t qk[Q8 ? NB : 1][2];
    float qd[Q8 ? NB : 1][2];
    {
        const float qs = p.scale * LOG2E;
        if constexpr (Q8) {
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                float x[8], amax = 0.0f;
#pragma unroll
                for (int i = 0; i < 8; ++i) {
                    x[i] = qv[8 * b + i] * qs;
                    amax = fmaxf(amax, fabsf(x[i]));
                }
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 1)); // the 4 lanes of query g: its 32 dims
                amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 2));
                const float id = amax > 0.0f ? 127.0f / amax : 0.0f;
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    uint32_t w = 0;
#pragma unroll
                    for (int i = 0; i < 4; ++i)
                        w |= (uint32_t)(max(-127, min(127, __float2int_rn(x[4 * h + i] * id))) & 0xff) << (8 * i);
                    qk[b][h] = w;
                }
                const float dq = amax / 127.0f;
                qd[b][0] = __shfl_sync(0xffffffff, dq, 8 * c); // query 2c: lane 4 (2c)
                qd[b][1] = __shfl_sync(0xffffffff, dq, 8 * c + 4);
            }
        } else {
#pragma unroll
            for (int kt = 0; kt < KT; ++kt)
#pragma unroll
                for (int hi = 0; hi < 2; ++hi)
                    qb[kt][hi] = fm_pack(qv[4 * kt + 2 * hi] * qs, qv[4 * kt + 2 * hi + 1] * qs);
        }
    }
    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[KT][4]; // O^T: dims dt 16 + g (+ 8) x queries 2c, 2c + 1
#pragma unroll
    for (int dt = 0; dt < KT; ++dt)
        o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.0f;
    const int ka = (lane % 8) + ((lane / 8) & 1) * 8, kc = (lane / 16) * 8; // K (A, no .trans): row, column
    const int va = (lane % 8) + (lane / 16) * 8, vc = ((lane / 8) & 1) * 8; // V (A = V^T, .trans): key, dim
    auto mask_at = [&](const char * mp) { // a mask value in log2 units
        return LOG2E * (p.mask_f16 ? __half2float(*(const half *)mp) : *(const float *)mp);
    };

    for (int it = 0; key_w + it * step < kv1; ++it) {
        load_tile(key_w + (it + NS - 1) * step, (it + NS - 1) % NS);
        const int st = it % NS, key0 = key_w + it * step;
        cp_async_wait<NS - 1>();
        __syncwarp();
        const half * Kb = (const half *)(Wsm + st * C::stage_bytes);
        float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}; // keys g, g + 8 of the tile x queries 2c, 2c + 1
        if constexpr (Q8) {
            // A fragments from the raw rows: key g (and g + 8), quants 4c .. + 3 (and 16 + 4c ..) of block b, at
            // byte kp + 34 b + 2 + 4c of the staged row: 4-byte aligned for odd b only (kp % 4 == 0, RS % 16 == 0)
            const char * r0 = Wsm + st * C::stage_bytes + g * C::RS + kp;
            const char * r1 = r0 + 8 * C::RS;
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                const bool al = b % 2 == 1;
                const char *q0 = r0 + 34 * b + 2 + 4 * c, *q1 = r1 + 34 * b + 2 + 4 * c;
                int ci[4];
                mmq_mma_k32(ci, fm_ld4(q0, al), fm_ld4(q1, al), fm_ld4(q0 + 16, al), fm_ld4(q1 + 16, al), qk[b][0],
                            qk[b][1]);
                const float d0 = __half2float(*(const half *)(r0 + 34 * b));
                const float d1 = __half2float(*(const half *)(r1 + 34 * b));
                s[0] += d0 * qd[b][0] * (__int_as_float(ci[0]) - MMQ_FBIAS_F);
                s[1] += d0 * qd[b][1] * (__int_as_float(ci[1]) - MMQ_FBIAS_F);
                s[2] += d1 * qd[b][0] * (__int_as_float(ci[2]) - MMQ_FBIAS_F);
                s[3] += d1 * qd[b][1] * (__int_as_float(ci[3]) - MMQ_FBIAS_F);
            }
        } else {
#pragma unroll
            for (int kt = 0; kt < KT; ++kt) {
                uint32_t a[4];
                fm_ldsm(a, Kb + ka * LD + kt * 16 + kc);
                fm_mma(s, a, qb[kt][0], qb[kt][1]);
            }
        }
        if (one_row && key0 >= kv_lo && key0 + BN <= kv1) { // every key of the tile visible: the mask only
            float m0 = 0.0f, m1 = 0.0f;
            if (mask_stage) { // keys g, g + 8 of the staged row
                m0 = mask_at(Ms + (st * FMD_MT * BN + g) * mes);
                m1 = mask_at(Ms + (st * FMD_MT * BN + g + 8) * mes);
            } else if (mrow[0]) {
                m0 = mask_at(mrow[0] + (int64_t)(key0 + g) * p.ms.nb[0]);
                m1 = mask_at(mrow[0] + (int64_t)(key0 + g + 8) * p.ms.nb[0]);
            }
            s[0] += m0;
            s[1] += m0;
            s[2] += m1;
            s[3] += m1;
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) { // query 2c + e % 2, key g + 8 (e / 2)
                const int i = e % 2, key = key0 + g + 8 * (e / 2);
                float & sv = s[e];
                if (key < kv_lo || key >= kv1 || key > last[i]) {
                    sv = -INFINITY;
                } else if (mask_stage) {
                    sv += mask_at(Ms + ((st * FMD_MT + t[i]) * BN + key - key0) * mes);
                } else if (mrow[i]) {
                    sv += mask_at(mrow[i] + key * p.ms.nb[0]);
                }
            }
        }
#pragma unroll
        for (int i = 0; i < 2; ++i) { // query 2c + i: scores s[i] (key g), s[2 + i] (key g + 8)
            float mx = fmaxf(s[i], s[2 + i]);
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 4));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 8));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffff, mx, 16));
            const float m_new = fmaxf(m[i], mx);
            const float m_use = m_new == -INFINITY ? 0.0f : m_new; // a query with nothing visible yet stays at 0
            const float alpha = exp2f(m[i] - m_use);
            s[i] = exp2f(s[i] - m_use);
            s[2 + i] = exp2f(s[2 + i] - m_use);
            l[i] = l[i] * alpha + s[i] + s[2 + i];
            m[i] = m_new;
            if (alpha != 1.0f) {
#pragma unroll
                for (int dt = 0; dt < KT; ++dt) {
                    o[dt][i] *= alpha;
                    o[dt][2 + i] *= alpha;
                }
            }
        }
        // P^T (keys x queries) as the B operand: b0 keys 2c, 2c + 1 x query g (the transpose of keys 0-7's scores),
        // b1 the same for keys 8-15
        const uint32_t b0 = fm_movt(fm_pack(s[0], s[1])), b1 = fm_movt(fm_pack(s[2], s[3]));
        if constexpr (Q8) {
            // V^T's A fragments straight from the raw rows, without a widened copy: m-tile 2 b + h holds dims 32 b +
            // 4 g + 2 h (row g) and + 1 (row g + 8). Lane (g, c) reads quants 4g .. 4g + 3 of block b of keys 2c, 2c
            // + 1, 2c + 8, 2c + 9 (one 4-byte piece each: the 32 lanes hit 32 banks), pairs the two keys of a dim
            // by byte_perm into the f16 1152 + q and takes q x d (d of each key; rounded once, as fmd_q8_widen)
            const half2 off = __float2half2_rn(1152.0f);
            const char * vr = Wsm + st * C::stage_bytes + BN * C::RS + vp + 2 * c * C::RS; // key 2c's row
#pragma unroll
            for (int b = 0; b < NB; ++b) {
                uint32_t a[2][4]; // [h][fragment]
#pragma unroll
                for (int pr = 0; pr < 2; ++pr) { // keys 2c, 2c + 1 (a0, a1) | 2c + 8, 2c + 9 (a2, a3)
                    const char *ra = vr + 8 * pr * C::RS + 34 * b, *rb = ra + C::RS;
                    const uint32_t xa = fm_ld4(ra + 2 + 4 * g, b % 2 == 1) ^ 0x80808080u;
                    const uint32_t xb = fm_ld4(rb + 2 + 4 * g, b % 2 == 1) ^ 0x80808080u;
                    const half2 d2 = __halves2half2(*(const half *)ra, *(const half *)rb);
                    // dims 4g, 4g + 1 | 4g + 2, 4g + 3: bytes (a, b, a, b)
                    const uint32_t tt[2] = {__byte_perm(xa, xb, 0x5140), __byte_perm(xa, xb, 0x7362)};
#pragma unroll
                    for (int h = 0; h < 2; ++h)
#pragma unroll
                        for (int e = 0; e < 2; ++e) { // dim 4g + 2h + e: keys (a, b) as the f16 pair 1152 + q
                            const uint32_t w = __byte_perm(tt[h], 0x64646464u, e ? 0x5342 : 0x5140);
                            const half2 v = __hmul2(__hsub2(*(const half2 *)&w, off), d2);
                            a[h][2 * pr + e] = *(const uint32_t *)&v;
                        }
                }
                fm_mma(o[2 * b], a[0], b0, b1);
                fm_mma(o[2 * b + 1], a[1], b0, b1);
            }
        } else {
#pragma unroll
            for (int dt = 0; dt < KT; ++dt) {
                uint32_t a[4];
                fm_ldsm_t(a, Kb + BN * LD + va * LD + dt * 16 + vc);
                fm_mma(o[dt], a, b0, b1);
            }
        }
        __syncwarp(); // the next iteration's load overwrites the stage NS - 1 tiles ahead: this one
    }
    cp_async_wait<0>();
    FA_TRACE(p, lane == 0, FA_TR_LOOP + warp);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        l[i] += __shfl_xor_sync(0xffffffff, l[i], 4);
        l[i] += __shfl_xor_sync(0xffffffff, l[i], 8);
        l[i] += __shfl_xor_sync(0xffffffff, l[i], 16);
    }
    __syncthreads(); // the tiles' space becomes the warps' merge space
    auto & s_acc = *reinterpret_cast<float(*)[W][8][D]>(fm_smem);
    auto & s_ml = *reinterpret_cast<float(*)[W][8][2]>((char *)fm_smem + sizeof(float) * W * 8 * D);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int j = 2 * c + i;
#pragma unroll
        for (int dt = 0; dt < KT; ++dt) { // rows g, g + 8 of m-tile dt (Q8: dims 32 (dt / 2) + 4 g + 2 (dt % 2), + 1)
            const int d0 = Q8 ? 32 * (dt / 2) + 4 * g + 2 * (dt % 2) : dt * 16 + g, d1 = Q8 ? d0 + 1 : d0 + 8;
            s_acc[warp][j][d0] = o[dt][i];
            s_acc[warp][j][d1] = o[dt][2 + i];
        }
        if (g == 0) {
            s_ml[warp][j][0] = m[i] == -INFINITY ? -INFINITY : m[i] * LN2; // natural-log units for the merge
            s_ml[warp][j][1] = l[i];
        }
    }
    fattn_vec_finish<W, 8, D, D >= 128 ? 8 : 4>(p, s_acc, s_ml, hk, split, n_q);
}

template <int D, int W, int NS, bool Q8, bool SW>
static __global__ void __launch_bounds__(W * 32) k_fattn_mma_dec(const fa_params p) {
    using C = fmd_cfg<D, W, NS, Q8, SW>;
    constexpr int LD = C::LD, KT = D / 16, NT = D / 8, CH = D / 8, BN = FMD_BN;
    constexpr float LOG2E = 1.4426950408889634f, LN2 = 0.6931471805599453f;
    extern __shared__ __align__(16) half fm_smem[];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, c = lane % 4;
    char * Wsm = (char *)fm_smem + warp * C::warp_bytes; // f16: [NS][2][BN][LD] halves; Q8: [NS][2][BN][RS] bytes
    half * Ts = (half *)(Wsm + NS * C::stage_bytes);     // Q8: the widened tile [2][BN][LD]
    char * Ms = (char *)fm_smem + W * C::warp_bytes + warp * NS * C::mask_bytes; // [NS][FMD_MT][BN]
    FA_TRACE(p, threadIdx.x == 0, FA_TR_ENTRY);
    // early: the warps' first tiles requested before griddepcontrol.wait (see the prologue below)
    const bool early = SW && p.wcells != nullptr;
    if (early) {
        pdl_trigger();
    } else {
        pdl_start();
        FA_TRACE(p, threadIdx.x == 0, FA_TR_WAIT);
    }
    const int hk = blockIdx.y, split = blockIdx.z;
    const int n_q = p.n_tokens * p.r; // <= 16 (SW: <= 8)
    const int mes = p.mask_f16 ? 2 : 4;
    const int es = p.mask_f16 ? 2 : 4;
    // one_row (swapped form, p.lean): one token, one mask row for every head, no causal limit (see the lean tiles)
    const bool one_row =
        SW && p.lean && p.n_tokens == 1 && p.causal_n_past < 0 && (!p.mask || (p.ms.ne[2] == 1 && p.ms.ne[3] == 1));
    int t[2], h[2], last[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) { // this thread's queries: rows g, g + 8 of A; SW: columns 2c, 2c + 1 of B
        const int qi = SW ? 2 * c + i : g + 8 * i;
        const int qq = qi < n_q ? qi : n_q - 1;
        t[i] = qq / p.r;
        h[i] = hk * p.r + qq % p.r;
        last[i] = p.causal_n_past >= 0 ? p.causal_n_past + t[i] : INT_MAX;
    }
    bool exact1 = false, mask_stage = false;
    const char * mrow[2] = {nullptr, nullptr};
    float qv[SW ? D / 4 : 1]; // SW: the query values, requested before the block's key range and first tiles
    int kv_lo, kv1;
    auto causal_end = [&] { // kv1 at most the last token's last key + 1
        if (p.causal_n_past >= 0) kv1 = min(kv1, p.causal_n_past + p.n_tokens);
    };
    // What is read after the wait (written by kernels of this step: the ranges, q): whether the one token's range is
    // exact (fattn_decode_ranges: the range is the mask, nothing to stage or add), the mask rows, the query, the
    // block's keys within the tokens' visible ranges
    auto after_wait = [&] {
        exact1 = p.n_tokens == 1 && fattn_token_exact(p, 0);
        mask_stage = !exact1 && p.mask && p.n_tokens <= FMD_MT && p.ms.ne[2] == 1 && p.ms.ne[3] == 1 &&
                     p.ms.nb[0] == es && p.ms.nb[1] % 16 == 0 && (uintptr_t)p.mask % 16 == 0;
#pragma unroll
        for (int i = 0; i < 2; ++i)
            mrow[i] = p.mask && !exact1 ? p.mask + t[i] * p.ms.nb[1] + (h[i] % p.ms.ne[2]) * p.ms.nb[2] : nullptr;
        if constexpr (SW) fmd_sw_qload<D, Q8>(p, hk, g, c, qv);
        fattn_block_keys(p, split, 0, p.n_tokens - 1, kv_lo, kv1);
        causal_end();
    };
    if (early) { // the split's keys for now; the visible range (p.ranges) narrows them after the wait
        fattn_split_keys(p, split, kv_lo, kv1);
        causal_end();
    } else {
        after_wait();
    }
    int tb = kv_lo & ~(BN - 1); // tiles start BN-aligned (staged mask chunks are 16-byte aligned)
    const char * kb = p.k + hk * p.ks.nb[2];
    const char * vb = p.v + hk * p.vs.nb[2];
    const int64_t ks = p.ks.nb[1], vs = p.vs.nb[1];
    // Lean copies (p.lean; a tile whose keys are all below kv1): lane (jl, cl) copies 16-byte piece cl of rows jl +
    // R i, PC pieces per row: f16 D / 8 where that divides 32 (D 64, 128); q8_0 RS / 16 where the row strides are
    // multiples of 16 (a row then starts kp / vp bytes into its first piece; the last piece ends with the row)
    constexpr int PC = Q8 ? C::RS / 16 : CH, R = 32 / PC;
    const int jl = lane / PC, cl = lane % PC;
    int kp = 0, vp = 0;
    bool lean_ld = p.lean && (Q8 || 32 % CH == 0);
    if constexpr (Q8) {
        const int pk = (int)((uintptr_t)kb % 16), pv = (int)((uintptr_t)vb % 16);
        lean_ld = lean_ld && ks % 16 == 0 && vs % 16 == 0 && pk % 4 == 0 && pv % 4 == 0 && pk + C::RB <= C::RS &&
                  pv + C::RB <= C::RS;
        if (lean_ld) {
            kp = pk;
            vp = pv;
        }
    }
    const int nk = cl == PC - 1 ? kp + C::RB - 16 * (PC - 1) : 16; // q8_0: bytes of this lane's piece of a K row
    const int nv = cl == PC - 1 ? vp + C::RB - 16 * (PC - 1) : 16; // (of a V row)
    auto load_mask = [&](int key0, int st) { // the tokens' mask rows of a tile, staged with it
        if (key0 < kv1 && mask_stage) {
            const int mch = BN * mes / 16; // 16-byte chunks per token
            for (int e = lane; e < p.n_tokens * mch; e += 32) {
                const int tt = e / mch, ch = e % mch;
                const int k0 = key0 + ch * (16 / mes);
                const int n = max(0, min(16, (p.n_kv - k0) * mes));
                cp_async16n(Ms + ((st * FMD_MT + tt) * BN) * mes + ch * 16,
                            p.mask + (int64_t)tt * p.ms.nb[1] + (int64_t)(n > 0 ? k0 : 0) * mes, n);
            }
        }
    };
    auto load_tile = [&](int key0, int st) { // keys past kv1 repeat row kv1 - 1 (finite; their weight is 0)
        if (key0 < kv1 && lean_ld && key0 + BN <= kv1) {
            if (jl < R) { // q8_0: the last lanes have no piece
                const int64_t k0 = key0 + jl;
                if constexpr (Q8) {
                    char * kd = Wsm + st * C::stage_bytes + jl * C::RS + cl * 16;
                    char * vd = kd + BN * C::RS;
                    const char * gk = kb + k0 * ks + cl * 16 - kp;
                    const char * gv = vb + k0 * vs + cl * 16 - vp;
#pragma unroll
                    for (int i = 0; i < (BN + R - 1) / R; ++i)
                        if (jl + R * i < BN) {
                            cp_async16n(kd + i * R * C::RS, gk + i * R * ks, nk);
                            cp_async16n(vd + i * R * C::RS, gv + i * R * vs, nv);
                        }
                } else {
                    half * kd = (half *)(Wsm + st * C::stage_bytes) + jl * LD + cl * 8;
                    half * vd = kd + BN * LD;
                    const char * gk = kb + k0 * ks + cl * 16;
                    const char * gv = vb + k0 * vs + cl * 16;
#pragma unroll
                    for (int i = 0; i < BN / R; ++i) {
                        cp_async16(kd + i * R * LD, gk + i * R * ks);
                        cp_async16(vd + i * R * LD, gv + i * R * vs);
                    }
                }
            }
        } else if (key0 < kv1) { // q8_0 rows at kp / vp too: CB-aligned (the launch checks the strides for CB)
            if constexpr (Q8) {
                constexpr int RB = C::RB, RS = C::RS, CB = C::CB, PR = RB / CB; // pieces per row
                char * kd = Wsm + st * C::stage_bytes;
                char * vd = kd + BN * RS;
#pragma unroll
                for (int e = lane; e < BN * PR; e += 32) {
                    const int j = e / PR, pc = e % PR;
                    const int64_t key = min(key0 + j, kv1 - 1);
                    cp_async_n<CB>(kd + j * RS + kp + pc * CB, kb + key * ks + pc * CB);
                    cp_async_n<CB>(vd + j * RS + vp + pc * CB, vb + key * vs + pc * CB);
                }
            } else {
                half * kd = (half *)(Wsm + st * C::stage_bytes);
                half * vd = kd + BN * LD;
#pragma unroll
                for (int e = lane; e < BN * CH; e += 32) {
                    const int j = e / CH, ch = e % CH;
                    const int64_t key = min(key0 + j, kv1 - 1);
                    cp_async16(kd + j * LD + ch * 8, kb + key * ks + ch * 16);
                    cp_async16(vd + j * LD + ch * 8, vb + key * vs + ch * 16);
                }
            }
        }
        load_mask(key0, st);
        cp_async_commit(); // an empty group past kv1 keeps the count
    };

    const int mat = lane / 8, mi = lane % 8; // ldmatrix: this lane's row address is row mi of matrix mat
    const int step = W * BN;
    int key_w = tb + warp * BN;
    if (early) {
        // The decode of one token (p.wcells, fattn.cu): the K/V rows of earlier steps do not depend on the kernels
        // ahead, so each warp requests its first NS - 1 tiles of the split before griddepcontrol.wait, while the
        // q/k/v kernel ahead finishes, unless one of them holds the cell this step writes (wcells: a graph input,
        // uploaded before the graph ran). After the wait the ranges give the block's keys: first tiles that moved
        // are requested again. H200, Llama-3-8B q8_0 at depth 16384 (per-block %globaltimer stamps): the first
        // tile came 6.2 us (q8_0 cache) / 7.6 us (f16) after the wait, 4.0 / 5.3 with these requests; tg32 +1.1% /
        // +1.0% (+3.6% / +2.4% in a lab form on another machine; docs/perf.md, thirty-fifth session).
        const int wc = __ldcg(p.wcells);
        bool mine = true; // none of this warp's first tiles holds the written cell
#pragma unroll
        for (int s = 0; s < NS - 1; ++s)
            mine = mine && (wc < key_w + s * step || wc >= key_w + s * step + BN);
        if (mine)
#pragma unroll
            for (int s = 0; s < NS - 1; ++s)
                load_tile(key_w + s * step, s); // K and V only: mask_stage is still false
        pdl_wait();
        FA_TRACE(p, threadIdx.x == 0, FA_TR_WAIT);
        after_wait();
        if (!mine || (kv_lo & ~(BN - 1)) != tb) { // (tiles of other keys: wait for them, their stages are reused)
            if (mine) cp_async_wait<0>();
            __syncwarp();
            tb = kv_lo & ~(BN - 1);
            key_w = tb + warp * BN;
#pragma unroll
            for (int s = 0; s < NS - 1; ++s)
                load_tile(key_w + s * step, s);
        } else if (mask_stage) { // the mask rows of the tiles requested early, before the loop reads any
#pragma unroll
            for (int s = 0; s < NS - 1; ++s)
                load_mask(key_w + s * step, s);
            cp_async_commit();
            cp_async_wait<0>();
            __syncwarp();
        }
    } else {
#pragma unroll
        for (int s = 0; s < NS - 1; ++s)
            load_tile(key_w + s * step, s);
    }
    if constexpr (SW) {
        fmd_sw_loop<D, W, NS, Q8>(p, Wsm, Ms, load_tile, key_w, kv_lo, kv1, t, last, mrow, mask_stage, one_row, kp, vp,
                                  hk, split, qv);
        return;
    }

    float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.0f, 0.0f};
    float o[NT][4];
#pragma unroll
    for (int nt = 0; nt < NT; ++nt)
        o[nt][0] = o[nt][1] = o[nt][2] = o[nt][3] = 0.0f;
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
        cp_async_wait<NS - 1>();
        __syncwarp();
        const int st = it % NS, key0 = key_w + it * step;
        const half * Kb = (const half *)(Wsm + st * C::stage_bytes);
        if constexpr (Q8) {
            fmd_q8_widen<D, C::RS, LD>(Wsm + st * C::stage_bytes + kp, Ts, lane);
            __syncwarp();
            Kb = Ts;
        }

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
        const half * Vb = Kb + BN * LD;
        if constexpr (Q8) { // the V rows into the buffer K left (every lane past its K reads)
            __syncwarp();
            fmd_q8_widen<D, C::RS, LD>(Wsm + st * C::stage_bytes + BN * C::RS + vp, Ts, lane);
            __syncwarp();
            Vb = Ts;
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
        __syncwarp(); // the next iteration's load overwrites the stage NS - 1 tiles ahead: this one (Q8: and Ts)
    }
    cp_async_wait<0>();
    FA_TRACE(p, lane == 0, FA_TR_LOOP + warp);
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
    fattn_vec_finish<W, 16, D, D >= 128 ? 8 : 4>(p, s_acc, s_ml, hk, split, n_q);
}

bool ggml_cuda_fattn_mma_dec_ok(const fa_params & p, const ggml_tensor * k, const ggml_tensor * v,
                                const ggml_tensor * dst) {
    if (!(p.n_tokens * p.r <= 16 && p.n_tokens <= 16)) return false;
    if (k->type == GGML_TYPE_Q8_0 && v->type == GGML_TYPE_Q8_0) { // rows in place: 4-byte pieces (8 at D 128)
        const size_t cb = (p.D / 32 * 34) % 8 == 0 ? 8 : 4;
        auto al = [&](const ggml_tensor * t) {
            return t->ne[0] == p.D && t->nb[0] == 34 && t->nb[1] % cb == 0 && t->nb[2] % cb == 0 &&
                   (uintptr_t)t->data % cb == 0;
        };
        return (p.D == 64 || p.D == 128) && al(k) && al(v) && k->ne[1] > 0 && dst->type == GGML_TYPE_F32 &&
               ggml_is_contiguous(dst);
    }
    return ggml_cuda_fattn_mma_ok(p.D, k, v, dst);
}

template <int D, int W, int NS, bool Q8, bool SW> static fattn_vec_fn fmd_get(int & w, int & s, size_t & smem) {
    w = W;
    s = FMD_BN;
    smem = fmd_cfg<D, W, NS, Q8, SW>::smem;
    return k_fattn_mma_dec<D, W, NS, Q8, SW>;
}
// The swapped form (SW) has the default and configurations 1, 3, 5 and 7 (others give its default). A configuration
// whose shared memory exceeds the device's (f16 8 x 4) falls back to the default (ggml_cuda_fattn_mma_dec).
template <int D, bool Q8, bool SW> static fattn_vec_fn fmd_pick_cfg(int cfg, int & W, int & S, size_t & smem) {
    switch (cfg) {
        case 1:
            return fmd_get<D, 4, 3, Q8, SW>(W, S, smem);
        case 5:
            return fmd_get<D, 8, 3, Q8, SW>(W, S, smem);
        case 7:
            return fmd_get<D, 8, 4, Q8, SW>(W, S, smem);
        case 3:
            return fmd_get<D, 4, 2, Q8, SW>(W, S, smem);
        default:
            break;
    }
    if constexpr (!SW) {
        switch (cfg) {
            case 2:
                return fmd_get<D, 2, 4, Q8, SW>(W, S, smem);
            case 6:
                return fmd_get<D, 12, 2, Q8, SW>(W, S, smem);
            default:
                break;
        }
    }
    // q8_0: 3 stages (H200, Llama-3-8B tg64 at depth 16384: 222 t/s against 208-215 with 2 stages at 2 blocks per SM)
    return Q8 ? fmd_get<D, 8, 3, Q8, SW>(W, S, smem) : fmd_get<D, 8, 2, Q8, SW>(W, S, smem);
}
template <int D, bool Q8> static fattn_vec_fn fmd_pick(int n_q, int cfg, int & W, int & S, size_t & smem) {
    // GGML_CUDA_FATTN_DEC16=1: the 16-row form for every n_q (an A/B of the swapped one)
    static const bool no_sw = std::getenv("GGML_CUDA_FATTN_DEC16") != nullptr;
    return n_q <= 8 && !no_sw ? fmd_pick_cfg<D, Q8, true>(cfg, W, S, smem)
                              : fmd_pick_cfg<D, Q8, false>(cfg, W, S, smem);
}

fattn_vec_fn ggml_cuda_fattn_mma_dec(int D, bool q8, int n_q, int cfg, int device, int & W, int & S, size_t & smem) {
    fattn_vec_fn fn = nullptr;
    switch (q8 ? -D : D) {
        case 64:
            fn = fmd_pick<64, false>(n_q, cfg, W, S, smem);
            break;
        case 80:
            fn = fmd_pick<80, false>(n_q, cfg, W, S, smem);
            break;
        case 96:
            fn = fmd_pick<96, false>(n_q, cfg, W, S, smem);
            break;
        case 128:
            fn = fmd_pick<128, false>(n_q, cfg, W, S, smem);
            break;
        case -64:
            fn = fmd_pick<64, true>(n_q, cfg, W, S, smem);
            break;
        case -128:
            fn = fmd_pick<128, true>(n_q, cfg, W, S, smem);
            break;
        default:
            GGML_ABORT("fattn mma decode: D %d%s", D, q8 ? " (q8_0)" : "");
    }
    static thread_local std::map<int, int> smem_max; // per device
    int & mx = smem_max[device];
    if (mx == 0) CUDA_CHECK(cudaDeviceGetAttribute(&mx, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (cfg != 4 && (int)smem > mx) return ggml_cuda_fattn_mma_dec(D, q8, n_q, 4, device, W, S, smem); // too big here
    static thread_local std::map<std::pair<const void *, int>, bool> attr_set; // smem above 48 KiB: once per device
    bool & done = attr_set[{(const void *)fn, device}];
    if (!done) {
        CUDA_CHECK(cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
        done = true;
    }
    return fn;
}
