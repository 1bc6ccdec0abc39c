// mmq-t.cuh - the int8 tensor-core GEMM of one quantized weight type T (qtypes.cuh): dst = a^T b for prompts and
// batched decode (N > ggml_cuda_mmv_max_n), a in the kernel layout (q8repack.cuh), b in the q8s split layout
// (quantize.cuh). Included only by the instance files mmq-<type>.cu (GGML_CUDA_MMQ_INSTANCE).
//
// A block of 8 warps computes a tile of MMQ_BM (128) weight rows x MMQ_BN (64) activation columns. Per K step of
// MMQ_KS (128) values:
//   - each thread loads two 32-value weight units with T::mmq_load (raw 16-byte loads, the next step's issued
//     before this step's MMAs so they are in flight during them), unpacks them with T::mmq_unpack to int8 in
//     shared memory (offsets such as q4_0's -8 folded into the int8 values) plus a float scale per T::MMQ_SB
//     values (and a min for the types with mins);
//   - the activation tile: int8 quants, the f32 scale per 32 and (types with mins) scale x the block's sums;
//   - warp (wr, wc) of a 4 x 2 grid owns 32 rows x 32 columns: per 32 values ldmatrix.x4 fragments and
//     mma.sync m16n8k32 s8 (m16n8k16 for the 16-value-scale types), integer results of one scale block
//     converted to float and scaled by weight scale x activation scale into f32 accumulators;
//     min terms: sum over the step's blocks of min(row) x scale x sum(column).
// Shared rows are MMQ_KS + 16 bytes apart: the 8 row addresses of an ldmatrix fall in different banks.
// Ragged edges: rows past M load row M-1 (not stored); columns past N and K past the last block are zero.
#pragma once
#include "mma-s8.cuh"
#include "mmq.cuh"
#include "qtypes.cuh"
#include "quantize.cuh"

#include <algorithm>
#include <map>

#define MMQ_BM 128
#define MMQ_BN 64
#define MMQ_KS 128
#define MMQ_LD (MMQ_KS + 16)
#define MMQ_NT 256

static __device__ __forceinline__ void mmq_ldsm4(int (&r)[4], const int8_t * p) {
    const unsigned a = (unsigned)__cvta_generic_to_shared(p);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

// The K steps [s0, nsteps) of this block (blockIdx.z % ksplit of a K split over ksplit blocks)
struct mmq_block_range {
    int s0, nsteps;
    __device__ mmq_block_range(int K, int ksplit) {
        const int nsteps_all = (K + MMQ_KS - 1) / MMQ_KS, sps = (nsteps_all + ksplit - 1) / ksplit;
        s0 = (int)(blockIdx.z % ksplit) * sps;
        nsteps = min(nsteps_all, s0 + sps);
    }
};

// This thread's two 32-value weight units of a K step: unit u = tid + 256k is row u / 4 of the tile, unit u % 4 of
// the step (rows past M read row M - 1); load issues the raw loads, unpack gives T::mmq_unpack's values (zero past K).
// w and K stay kernel parameters (passed in, not copied into registers).
template <typename T> struct mmq_wunits {
    int64_t b[2];
    int row[2], j[2];
    typename T::MU u[2];
    __device__ mmq_wunits(int m0, int M, int64_t off, int K) {
        const int nbr = K / T::QK;
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int v = threadIdx.x + MMQ_NT * k;
            row[k] = v / 4;
            j[k] = v % 4;
            b[k] = ((int64_t)min(m0 + row[k], M - 1) + off) * nbr;
        }
    }
    __device__ __forceinline__ void load(const qregs & w, int K, int s) {
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            const int kv = s * MMQ_KS + 32 * j[k];
            if (kv < K) T::mmq_load(w, b[k] + kv / T::QK, (kv % T::QK) / 32, u[k]);
        }
    }
    __device__ __forceinline__ void unpack(int K, int s, int k, int (&q)[8], float (&d)[2], float (&m)[2]) const {
#pragma unroll
        for (int e = 0; e < 8; ++e)
            q[e] = 0;
        d[0] = d[1] = m[0] = m[1] = 0.0f;
        const int kv = s * MMQ_KS + 32 * j[k];
        if (kv < K) T::mmq_unpack(u[k], (kv % T::QK) / 32, q, d, m);
    }
};

// A warp's 32 x 32 accumulators (2 x 4 MMA tiles from row r0, column c0) into dst, added with atomics for a K split
static __device__ __forceinline__ void mmq_store(const float (&acc)[2][4][4], float * dst, const cuda_shape & ds,
                                                 int r0, int c0, int lane, int M, int N, int64_t i2, int64_t i3,
                                                 bool atomic) {
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int r = r0 + 16 * i + g + 8 * (e / 2);
                const int c = c0 + 8 * j + 2 * t + (e % 2);
                if (r < M && c < N) {
                    float * p = (float *)((char *)dst + r * ds.nb[0] + c * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]);
                    if (atomic)
                        atomicAdd(p, acc[i][j][e]);
                    else
                        *p = acc[i][j][e];
                }
            }
}

// dst [M, N, B2, B3]; weight rows flat (row + (i2/r2)*M + (i3/r3)*M*A2); activation rows bz*N + c.
// early: the weights may be read before pdl_wait() (not written by the kernel before)
template <typename T>
static __global__ void __launch_bounds__(MMQ_NT, 2)
    k_mmq(const qregs w, const int8_t * __restrict__ xq, const float * __restrict__ xd, const int * __restrict__ xs,
          float * __restrict__ dst, int K, int M, int N, int64_t A2, int64_t B2, int64_t r2, int64_t r3, cuda_shape ds,
          int early, int ksplit) {
    constexpr int SB = T::MMQ_SB, SPU = 32 / SB, NS = MMQ_KS / SB;
    constexpr bool MIN = T::MMQ_MIN;
    __shared__ __align__(16) int8_t sw[MMQ_BM * MMQ_LD];
    __shared__ __align__(16) int8_t sx[MMQ_BN * MMQ_LD];
    __shared__ float swd[NS][MMQ_BM + 8];
    __shared__ float swm[MIN ? NS : 1][MMQ_BM + 8];
    __shared__ float sxd[MMQ_KS / 32][MMQ_BN + 8];
    __shared__ float sxm[MIN ? NS : 1][MMQ_BN + 8];

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    // split-K: this block's steps [s0, nsteps) (ksplit > 1: partial sums added into dst, zeroed before)
    const mmq_block_range br(K, ksplit);
    const int s0 = br.s0, nsteps = br.nsteps;
    if (s0 >= nsteps) return;
    const int n0 = blockIdx.x * MMQ_BN, m0 = blockIdx.y * MMQ_BM;
    const int64_t bz = blockIdx.z / ksplit, i2 = bz % B2, i3 = bz / B2;
    const int64_t K32 = K / 32;
    mmq_wunits<T> wu(m0, M, (i2 / r2) * M + (i3 / r3) * M * A2, K);
    // activation quants: 16 bytes of column tid / 8 + 32k, part tid % 8; scales: column tid / 4, block tid % 4
    const int8_t * xr[2];
    bool xok[2];
#pragma unroll
    for (int k = 0; k < 2; ++k) {
        const int c = n0 + tid / 8 + 32 * k;
        xok[k] = c < N;
        xr[k] = xq + (bz * N + (xok[k] ? c : 0)) * (int64_t)K + 16 * (tid % 8);
    }
    const int sc_col = tid / 4, sc_blk = tid % 4;
    const bool sc_ok = n0 + sc_col < N;
    const int64_t sc_row = (bz * N + (sc_ok ? n0 + sc_col : 0)) * K32 + sc_blk;

    int4 xv[2];
    float xdv;
    int xsv;
    // the activations are written by the kernel before: ld_act (common.cuh), never __ldg
    auto load_x = [&](int s) {
        const int k0 = s * MMQ_KS;
#pragma unroll
        for (int k = 0; k < 2; ++k)
            xv[k] = xok[k] && k0 + 16 * (tid % 8) < K ? ld_act((const int4 *)(xr[k] + k0)) : make_int4(0, 0, 0, 0);
        const bool ok = sc_ok && k0 + 32 * sc_blk < K;
        xdv = ok ? ld_act(xd + sc_row + k0 / 32) : 0.0f;
        xsv = ok && MIN ? ld_act(xs + sc_row + k0 / 32) : 0;
    };

    if (!early) pdl_wait();
    wu.load(w, K, s0); // the first weights before pdl_wait: they do not depend on the kernel before
    pdl_wait();
    load_x(s0);

    const int g = lane / 4, t = lane % 4;
    const int wr = warp % 4, wc = warp / 4;
    float acc[2][4][4] = {};

    for (int s = s0; s < nsteps; ++s) {
        // unpack this step's registers into shared memory
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            int q[8];
            float d[2], m[2];
            wu.unpack(K, s, k, q, d, m);
            int4 * p = (int4 *)(sw + wu.row[k] * MMQ_LD + 32 * wu.j[k]);
            p[0] = make_int4(q[0], q[1], q[2], q[3]);
            p[1] = make_int4(q[4], q[5], q[6], q[7]);
#pragma unroll
            for (int e = 0; e < SPU; ++e) {
                swd[wu.j[k] * SPU + e][wu.row[k]] = d[e];
                if constexpr (MIN) swm[wu.j[k] * SPU + e][wu.row[k]] = m[e];
            }
        }
#pragma unroll
        for (int k = 0; k < 2; ++k)
            *(int4 *)(sx + (tid / 8 + 32 * k) * MMQ_LD + 16 * (tid % 8)) = xv[k];
        sxd[sc_blk][sc_col] = xdv;
        if constexpr (MIN) {
            const float lo = (float)(short)(xsv & 0xffff), hi = (float)(xsv >> 16);
            if constexpr (SB == 32) {
                sxm[sc_blk][sc_col] = xdv * (lo + hi);
            } else {
                sxm[2 * sc_blk][sc_col] = xdv * lo;
                sxm[2 * sc_blk + 1][sc_col] = xdv * hi;
            }
        }
        __syncthreads();
        if (s + 1 < nsteps) { // in flight during the MMAs
            wu.load(w, K, s + 1);
            load_x(s + 1);
        }

#pragma unroll 1
        for (int kk = 0; kk < MMQ_KS / 32; ++kk) {
            int a[2][4], b[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                mmq_ldsm4(a[i], sw + (32 * wr + 16 * i + (lane % 8) + 8 * ((lane / 8) & 1)) * MMQ_LD + 32 * kk +
                                    16 * (lane / 16));
#pragma unroll
            for (int jj = 0; jj < 2; ++jj)
                mmq_ldsm4(b[jj], sx + (32 * wc + 16 * jj + (lane % 8) + 8 * (lane / 16)) * MMQ_LD + 32 * kk +
                                     16 * ((lane / 8) & 1));
            float dx[4][2];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                dx[j][0] = sxd[kk][32 * wc + 8 * j + 2 * t];
                dx[j][1] = sxd[kk][32 * wc + 8 * j + 2 * t + 1];
            }
#pragma unroll
            for (int h = 0; h < SPU; ++h) {
                float dw[2][2];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    dw[i][0] = swd[kk * SPU + h][32 * wr + 16 * i + g];
                    dw[i][1] = swd[kk * SPU + h][32 * wr + 16 * i + g + 8];
                }
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const int * bj = b[j / 2] + 2 * (j % 2);
                        int c[4];
                        if constexpr (SB == 32)
                            mmq_mma_k32(c, a[i][0], a[i][1], a[i][2], a[i][3], bj[0], bj[1]);
                        else
                            mmq_mma_k16(c, a[i][2 * h], a[i][2 * h + 1], bj[h]);
#pragma unroll
                        for (int e = 0; e < 4; ++e)
                            acc[i][j][e] += dw[i][e / 2] * dx[j][e % 2] * (__int_as_float(c[e]) - MMQ_FBIAS_F);
                    }
            }
        }
        if constexpr (MIN) {
#pragma unroll
            for (int sb = 0; sb < NS; ++sb) {
                float mw[2][2], mx[4][2];
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    mw[i][0] = swm[sb][32 * wr + 16 * i + g];
                    mw[i][1] = swm[sb][32 * wr + 16 * i + g + 8];
                }
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    mx[j][0] = sxm[sb][32 * wc + 8 * j + 2 * t];
                    mx[j][1] = sxm[sb][32 * wc + 8 * j + 2 * t + 1];
                }
#pragma unroll
                for (int i = 0; i < 2; ++i)
#pragma unroll
                    for (int j = 0; j < 4; ++j)
#pragma unroll
                        for (int e = 0; e < 4; ++e)
                            acc[i][j][e] += mw[i][e / 2] * mx[j][e % 2];
            }
        }
        __syncthreads();
    }
    pdl_trigger();
    mmq_store(acc, dst, ds, m0 + 32 * wr, n0 + 32 * wc, lane, M, N, i2, i3, ksplit > 1);
}

// The K split of a GEMM of `tiles` output tiles and nsteps K steps: split while the tiles fill less than one wave
// of 2 blocks per SM (small N: batched decode): the split k of 1..8 (at least 4 steps, 512 values, per block) with
// the least waves x steps per block, the smaller k on a tie (gate/up of Llama-2-7B at N <= 64: 86 tiles of 32 steps;
// k = 3: 258 blocks in one wave of 264 doing 11 steps, where doubling took k = 4: 344 blocks, two waves of 8 steps)
static inline int mmq_ksplit(const ggml_cuda_context & ctx, int64_t tiles, int64_t nsteps) {
    if (ctx.mmq_ks > 0) return (int)std::min<int64_t>(ctx.mmq_ks, nsteps); // A/B: a fixed split
    const int64_t slots = 2 * (int64_t)ctx.n_sm;
    int ks = 1;
    if (tiles < slots) {
        int64_t best = nsteps;
        for (int k = 2; k <= 8 && nsteps >= 4 * k; ++k) {
            const int64_t t = cuda_ceil_div(tiles * k, slots) * cuda_ceil_div(nsteps, (int64_t)k);
            if (t < best) {
                best = t;
                ks = k;
            }
        }
    }
    return ks;
}

// Launch a GEMM kernel whose last two parameters are (early, ksplit): with a K split (ks > 1) dst (contiguous) is
// zeroed and the slices' partial sums are added into it, by a plain launch after the memset; else a programmatic
// dependent launch (ggml_cuda_launch)
template <typename... P, typename... A>
static void mmq_launch(ggml_cuda_context & ctx, void (*kernel)(P...), dim3 grid, size_t smem, int ks, bool early,
                       ggml_tensor * dst, A &&... args) {
    if (ks > 1) {
        GGML_ASSERT(ggml_is_contiguous(dst));
        CUDA_CHECK(cudaMemsetAsync(dst->data, 0, ggml_nbytes(dst), ctx.stream));
        kernel<<<grid, MMQ_NT, smem, ctx.stream>>>(std::forward<A>(args)..., 0, ks);
        CUDA_CHECK_LAUNCH();
        return;
    }
    ggml_cuda_launch(ctx, kernel, grid, dim3(MMQ_NT), smem, std::forward<A>(args)..., early ? 1 : 0, 1);
}

template <typename T>
static void qt_mmq(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early, const void * bq,
                   const ggml_tensor * b, ggml_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1], B2 = b->ne[2], B3 = b->ne[3];
    GGML_ASSERT(a->type == T::type && K % T::QK == 0 && K <= INT32_MAX && M <= INT32_MAX && N <= INT32_MAX);
    GGML_ASSERT(b->ne[0] == K && B2 % a->ne[2] == 0 && B3 % a->ne[3] == 0);
    if (M == 0 || N == 0 || B2 * B3 == 0) return;
    GGML_ASSERT(cuda_ceil_div(M, MMQ_BM) <= 65535 && B2 * B3 * 8 <= 65535);
    const q8s_view x = q8s_view_of(const_cast<void *>(bq), ggml_nrows(b), K);
    const qregs r = qt_regs_of(T::type, w, ggml_nelements(a) / T::QK);
    const int64_t tiles = cuda_ceil_div(N, MMQ_BN) * cuda_ceil_div(M, MMQ_BM) * B2 * B3;
    const int ks = mmq_ksplit(ctx, tiles, cuda_ceil_div(K, MMQ_KS));
    const dim3 grid((unsigned)cuda_ceil_div(N, MMQ_BN), (unsigned)cuda_ceil_div(M, MMQ_BM), (unsigned)(B2 * B3 * ks));
    mmq_launch(ctx, k_mmq<T>, grid, 0, ks, early, dst, r, (const int8_t *)x.qs, (const float *)x.d, (const int *)x.s,
               (float *)dst->data, (int)K, (int)M, (int)N, a->ne[2], B2, B2 / a->ne[2], B3 / a->ne[3],
               cuda_shape_of(dst));
}

#include "mmq-h.cuh"
#include "mmq-s.cuh"

#define GGML_CUDA_MMQ_INSTANCE(T, name)                                                                                \
    extern const ggml_cuda_mmq_fns ggml_cuda_mmq_##name;                                                               \
    const ggml_cuda_mmq_fns ggml_cuda_mmq_##name = {qt_mmq<T>, qt_mmqh<T>, qt_mms<T>};
