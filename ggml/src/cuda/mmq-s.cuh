// mmq-s.cuh - the streaming quantized GEMM for small N (batched decode, 5..32 columns by default where the wgmma GEMM
// of mmq-w.cuh does not run, at most 64: ggml_cuda_mmv_max_n + 1 .. ctx.mmq_stream_n; included by mmq-t.cuh after
// mmq-h.cuh, whose dequantization and MMA it uses): dst = a^T b with a quantized in the kernel layout and b the
// cached f16 copy of the activations (dense [K, N, B2, B3]), as k_mmqh.
//
// Why: k_mmqh stages every dequantized weight tile through shared memory and syncs its block twice per K step. At
// N <= 64 that, not the weight bytes, sets its time (Nsight Compute, q8_0 4096 x 4096: L1/shared 71% busy, no warp
// eligible in 60% of the cycles, 19-22 us where a loads-only kernel of the same pattern reads the 16.8 MB in 9 us).
// Here the weights go from global memory straight into mma B fragments:
//   - a block of 8 warps owns MMS_BM (256) rows and a K range of kr values (the K split); it copies its activation
//     slice (16 MT columns x kr values, f16) into shared memory once, the only barrier;
//   - warp w owns rows 32w .. 32w + 31 of the block as 4 n8 tiles. Per chunk of 128 values of K, lane (g, t)
//     (g = lane / 4, t = lane % 4) loads 32-value unit t of rows 8i + g (T::mmq_load: the raw bytes, the next chunk in
//     flight), dequantizes them (mmqh_s8x4: d * q + m in f16) and uses them as B fragments directly. K is permuted
//     within the chunk: the 4 values lane t holds in k16 step s (0..7) are values 4s .. 4s + 3 of its unit, so the
//     activations use the same permutation: one 16-byte shared load per lane, row and part h = s / 2 gives 8
//     consecutive values of the lane's unit, the A fragments of steps 2h and 2h + 1;
//   - shared rows are kr + 32 halves apart (64 bytes modulo 128) and the four 8-value parts of each 32-value unit are
//     stored rotated by the unit's index (mms_col), so the 8 lanes of each 16-byte load phase hit 32 distinct banks;
//   - the K split's partial sums are added into dst (zeroed by mmq_launch).
// Ragged edges: rows past M load row M - 1 (not stored); columns past N and K past the last unit are zero.
#pragma once
#include "cp-async.cuh"

#define MMS_RW 32                     // weight rows per warp: 4 n8 tiles
#define MMS_BM (MMQ_NT / 32 * MMS_RW) // weight rows per block
#define MMS_KC 128                    // K values per chunk: unit t of 32 values for lane t
#define MMS_PAD 32                    // halves of padding per shared row
#define MMS_MAX_N 64                  // columns: MT = 1..4 m16 tiles
#define MMS_MAX_KR 1024               // the largest K range per block

// the shared position (halves) of activation k (relative to the block's K start): part (k % 32) / 8 of unit k / 32
// stored at part ((k % 32) / 8 + k / 32) % 4
static __device__ __forceinline__ int mms_col(int k) {
    const int u = k / 32;
    return 32 * u + 8 * (((k % 32) / 8 + u) % 4) + k % 8;
}

// dst [M, N, B2, B3]; weight rows flat (row + (i2/r2)*M + (i3/r3)*M*A2); activation rows bz*N + c of xh (ldx halves
// apart, 16-byte aligned); kr: K values per block (a multiple of MMS_KC), blockIdx.z % ksplit its slice.
// early: the weights may be read before pdl_wait().
// Registers: one block per SM (153-241 registers, no spills); two for one m16 tile of the 32-value types (128).
template <typename T, int MT>
static __global__ void __launch_bounds__(MMQ_NT, MT == 1 && T::QK == 32 ? 2 : 1)
    k_mms(const qregs w, const half * __restrict__ xh, float * __restrict__ dst, int K, int M, int N, int64_t ldx,
          int64_t A2, int64_t B2, int64_t r2, int64_t r3, cuda_shape ds, int kr, int early, int ksplit) {
    constexpr int SB = T::MMQ_SB;
    extern __shared__ int4 mms_smem[];
    half * sx = (half *)mms_smem; // [16 MT][kr + MMS_PAD]
    const int ld = kr + MMS_PAD;
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, g = lane / 4, t = lane % 4;
    const int64_t bz = blockIdx.z / ksplit, i2 = bz % B2, i3 = bz / B2;
    const int k0 = (int)(blockIdx.z % ksplit) * kr, k1 = min(K, k0 + kr);
    if (k0 >= K) return;
    const int m0 = blockIdx.y * MMS_BM + warp * MMS_RW;
    const int64_t off = (i2 / r2) * M + (i3 / r3) * M * A2;
    const int nbr = K / T::QK;
    int64_t wb[4]; // first block of rows m0 + 8i + g
#pragma unroll
    for (int i = 0; i < 4; ++i)
        wb[i] = ((int64_t)min(m0 + 8 * i + g, M - 1) + off) * nbr;
    const int nc = (k1 - k0 + MMS_KC - 1) / MMS_KC;

    typename T::MU u[4]; // the raw units of the next chunk
    auto load = [&](int c) {
        const int kv = k0 + c * MMS_KC + 32 * t;
        if (kv < k1) {
#pragma unroll
            for (int i = 0; i < 4; ++i)
                T::mmq_load(w, wb[i] + kv / T::QK, (kv % T::QK) / 32, u[i]);
        }
    };

    if (!early) pdl_wait();
    load(0); // the first weights before pdl_wait: they do not depend on the kernel before
    pdl_wait();
    { // the activation slice, zero past N and K (K is a multiple of 32: a part is all in or all out)
        const int per_row = kr / 8;
        for (int idx = tid; idx < 16 * MT * per_row; idx += MMQ_NT) {
            const int n = idx / per_row, k = 8 * (idx % per_row);
            half * d = sx + n * ld + mms_col(k);
            if (n < N && k0 + k < K)
                cp_async16(d, xh + (bz * N + n) * ldx + k0 + k);
            else
                *(int4 *)d = make_int4(0, 0, 0, 0);
        }
        cp_async_commit();
        cp_async_wait<0>();
        __syncthreads();
    }

    float acc[MT][4][4] = {};
    const half * xa = sx + g * ld + 32 * t; // row g, unit t of chunk 0
    for (int c = 0; c < nc; ++c) {
        {
            const int kv = k0 + c * MMS_KC + 32 * t;
            int q[4][8];
            half2 d2[4][2], m2[4][2];
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                float d[2] = {0.0f, 0.0f}, m[2] = {0.0f, 0.0f};
#pragma unroll
                for (int e = 0; e < 8; ++e)
                    q[i][e] = 0;
                if (kv < k1) T::mmq_unpack(u[i], (kv % T::QK) / 32, q[i], d, m);
#pragma unroll
                for (int e = 0; e < 2; ++e) {
                    d2[i][e] = __float2half2_rn(d[e]);
                    m2[i][e] = __float2half2_rn(m[e]);
                }
            }
            load(c + 1); // in flight during this chunk's MMAs (two chunks in flight measured slower)
#pragma unroll
            for (int h = 0; h < 4; ++h) {
                int4 xg[MT], x8[MT]; // values 8h .. 8h + 7 of the lane's unit, rows g and g + 8 of each m16 tile
#pragma unroll
                for (int mi = 0; mi < MT; ++mi) {
                    const half * r = xa + 16 * mi * ld + c * MMS_KC + 8 * ((h + t) % 4);
                    xg[mi] = *(const int4 *)r;
                    x8[mi] = *(const int4 *)(r + 8 * ld);
                }
#pragma unroll
                for (int i = 0; i < 4; ++i) {
                    const int sb = SB == 32 ? 0 : h / 2;
                    half2 b[4]; // steps 2h (b[0], b[1]) and 2h + 1 (b[2], b[3])
                    mmqh_s8x4(q[i][2 * h], d2[i][sb], m2[i][sb], b[0], b[1]);
                    mmqh_s8x4(q[i][2 * h + 1], d2[i][sb], m2[i][sb], b[2], b[3]);
#pragma unroll
                    for (int mi = 0; mi < MT; ++mi) {
                        const int a0[4] = {xg[mi].x, x8[mi].x, xg[mi].y, x8[mi].y};
                        const int a1[4] = {xg[mi].z, x8[mi].z, xg[mi].w, x8[mi].w};
                        mmqh_mma(acc[mi][i], a0, *(const int *)&b[0], *(const int *)&b[1]);
                        mmqh_mma(acc[mi][i], a1, *(const int *)&b[2], *(const int *)&b[3]);
                    }
                }
            }
        }
    }
    pdl_trigger();
    // acc[mi][i]: columns (tokens) 16 mi + g (e < 2) and + 8 (e >= 2), rows m0 + 8i + 2t + (e % 2): the two rows
    // of a column are one float2 where dst rows are dense and 8-byte aligned
    const bool atomic = ksplit > 1;
    const bool pair = ds.nb[0] == sizeof(float) && ds.nb[1] % 8 == 0 && ds.nb[2] % 8 == 0 && ds.nb[3] % 8 == 0 &&
                      (uintptr_t)dst % 8 == 0;
#pragma unroll
    for (int mi = 0; mi < MT; ++mi)
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
            for (int e = 0; e < 4; e += 2) {
                const int r = m0 + 8 * i + 2 * t, n = 16 * mi + g + 8 * (e / 2);
                if (r >= M || n >= N) continue;
                float * p = (float *)((char *)dst + r * ds.nb[0] + n * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]);
                const float2 v = make_float2(acc[mi][i][e], acc[mi][i][e + 1]);
                if (pair && r + 1 < M) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
                    if (atomic) {
                        atomicAdd((float2 *)p, v);
                        continue;
                    }
#endif
                    if (!atomic) {
                        *(float2 *)p = v;
                        continue;
                    }
                }
                float * p1 = (float *)((char *)p + ds.nb[0]);
                if (atomic) {
                    atomicAdd(p, v.x);
                    if (r + 1 < M) atomicAdd(p1, v.y);
                } else {
                    *p = v.x;
                    if (r + 1 < M) *p1 = v.y;
                }
            }
}

// the K range per block (a multiple of MMS_KC, at most MMS_MAX_KR): the fewest waves x K values per block over
// one block per SM, the larger range on a tie (fewer partial sums)
static inline int mms_kr(const ggml_cuda_context & ctx, int64_t row_blocks, int64_t K) {
    const int64_t kmax = std::min<int64_t>(MMS_MAX_KR, cuda_ceil_div(K, MMS_KC) * MMS_KC);
    int best_kr = (int)kmax;
    int64_t best = INT64_MAX;
    for (int64_t kr = kmax; kr >= 2 * MMS_KC; kr /= 2) {
        const int64_t blocks = row_blocks * cuda_ceil_div(K, kr);
        const int64_t cost = cuda_ceil_div(blocks, (int64_t)ctx.n_sm) * kr;
        if (cost < best) {
            best = cost;
            best_kr = (int)kr;
        }
    }
    return best_kr;
}

template <typename T, int MT>
static void qt_mms_mt(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early,
                      const ggml_tensor * bh, ggml_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = bh->ne[1], B2 = bh->ne[2], B3 = bh->ne[3];
    const qregs r = qt_regs_of(T::type, w, ggml_nelements(a) / T::QK);
    const int64_t row_blocks = cuda_ceil_div(M, MMS_BM);
    const int kr = mms_kr(ctx, row_blocks * B2 * B3, K);
    const int ks = (int)cuda_ceil_div(K, kr);
    GGML_ASSERT(row_blocks <= 65535 && B2 * B3 * ks <= 65535);
    const size_t smem = (size_t)16 * MT * (kr + MMS_PAD) * sizeof(half);
    static thread_local std::map<int, bool> attr_set; // up to 132 KiB of shared memory: allowed once per device
    bool & done = attr_set[ctx.device];
    if (!done) {
        const int max_smem = 16 * MT * (MMS_MAX_KR + MMS_PAD) * (int)sizeof(half);
        CUDA_CHECK(cudaFuncSetAttribute(k_mms<T, MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, max_smem));
        done = true;
    }
    const dim3 grid(1, (unsigned)row_blocks, (unsigned)(B2 * B3 * ks));
    mmq_launch(ctx, k_mms<T, MT>, grid, smem, ks, early, dst, r, (const half *)bh->data, (float *)dst->data, (int)K,
               (int)M, (int)N, (int64_t)(bh->nb[1] / 2), a->ne[2], B2, B2 / a->ne[2], B3 / a->ne[3], cuda_shape_of(dst),
               kr);
}

template <typename T>
static void qt_mms(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early, const ggml_tensor * bh,
                   ggml_tensor * dst) {
    if (!mmqh_check<T>(a, bh, MMS_MAX_N)) return;
    switch ((bh->ne[1] + 15) / 16) {
        case 1:
            return qt_mms_mt<T, 1>(ctx, a, w, early, bh, dst);
        case 2:
            return qt_mms_mt<T, 2>(ctx, a, w, early, bh, dst);
        case 3:
            return qt_mms_mt<T, 3>(ctx, a, w, early, bh, dst);
        default:
            return qt_mms_mt<T, 4>(ctx, a, w, early, bh, dst);
    }
}
