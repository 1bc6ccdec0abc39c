// mmq-h.cuh - the quantized GEMM on f16 tensor cores (included by mmq-t.cuh, which supplies the tile sizes, the
// weight-unit loads and the epilogue): dst = a^T b with a quantized in the kernel layout and b in f16 (dense
// [K, N, B2, B3], the f16 copy mulmat.cu caches per activation), for batched decode and short prompts.
//
// Why: the int8 GEMM (k_mmq) scales every 32-value block's integer result per output element, dw x dx x c into the
// accumulator: 3 FP instructions per (row, column, block), M x N x K / 32 of them, and at N = 16..128 those (not
// the weight bytes) set its time (Nsight Compute, docs/cuda-notes.md, "The small-N GEMM"). Here the weights are
// dequantized once per tile into shared memory as f16 (d * q + m, one HFMA2 per two values after an exact
// int8 -> f16 conversion), so the scale work is M x K per column tile, independent of N, and the inner loop is
// ldmatrix + mma.sync m16n8k16 f16 -> f32 only. The activations are read as f16 (16-byte loads straight into the
// shared tile): no activation quantization error either.
//
// Tiles as k_mmq: a block of 8 warps, MMQ_BM (128) rows x MMQ_BN (64) columns, K steps of MMQ_KS (128) values;
// each thread loads two 32-value weight units (T::mmq_load: raw loads, the next step's in flight during this step's
// MMAs) and 4 x 16 bytes of activations; warp (wr, wc) of a 4 x 2 grid owns 32 rows x 32 columns.
// Shared rows are MMQH_LD halves (272 bytes) apart: the 8 rows of an ldmatrix fall in distinct banks.
// Ragged edges: rows past M load row M-1 (not stored); columns past N and K past the last block are zero.
#pragma once

#define MMQH_LD (MMQ_KS + 8)
#define MMQH_SMEM ((size_t)(MMQ_BM + MMQ_BN) * MMQH_LD * 2)

// 4 signed bytes v -> d * v + m as two half2 (bytes 0, 1 in lo; 2, 3 in hi). The half 0x6400 | (v ^ 0x80) is
// exactly 1152 + v, so v itself is exact after one HSUB2 and d * v + m is rounded once (HFMA2).
static __device__ __forceinline__ void mmqh_s8x4(int v, half2 d, half2 m, half2 & lo, half2 & hi) {
    const unsigned u = (unsigned)v ^ 0x80808080u;
    const unsigned a = __byte_perm(u, 0x64646464u, 0x5140), b = __byte_perm(u, 0x64646464u, 0x7362);
    const half2 bias = __half2half2(__ushort_as_half((unsigned short)0x6480)); // 1152
    lo = __hfma2(__hsub2(*(const half2 *)&a, bias), d, m);
    hi = __hfma2(__hsub2(*(const half2 *)&b, bias), d, m);
}

// c += a (16 x 16, row) b (16 x 8, col), f16 -> f32
static __device__ __forceinline__ void mmqh_mma(float (&c)[4], const int (&a)[4], int b0, int b1) {
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// dst [M, N, B2, B3]; weight rows flat (row + (i2/r2)*M + (i3/r3)*M*A2); activation rows bz*N + c of xh (ldx
// halves apart, 16-byte aligned). early: the weights may be read before pdl_wait().
template <typename T>
static __global__ void __launch_bounds__(MMQ_NT, 2)
    k_mmqh(const qregs w, const half * __restrict__ xh, float * __restrict__ dst, int K, int M, int N, int64_t ldx,
           int64_t A2, int64_t B2, int64_t r2, int64_t r3, cuda_shape ds, int early, int ksplit) {
    constexpr int SB = T::MMQ_SB;
    extern __shared__ int4 mmqh_smem[];
    half * sw = (half *)mmqh_smem;     // [MMQ_BM][MMQH_LD]
    half * sx = sw + MMQ_BM * MMQH_LD; // [MMQ_BN][MMQH_LD]

    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const mmq_block_range br(K, ksplit);
    if (br.s0 >= br.nsteps) return;
    const int n0 = blockIdx.x * MMQ_BN, m0 = blockIdx.y * MMQ_BM;
    const int64_t bz = blockIdx.z / ksplit, i2 = bz % B2, i3 = bz / B2;
    mmq_wunits<T> wu(m0, M, (i2 / r2) * M + (i3 / r3) * M * A2, K);

    // activations: 16 bytes (8 values) of column tid / 16 + 16k, part tid % 16 of the step
    const half * xr[4];
    bool xok[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int c = n0 + tid / 16 + 16 * k;
        xok[k] = c < N;
        xr[k] = xh + (bz * N + (xok[k] ? c : 0)) * ldx + 8 * (tid % 16);
    }
    int4 xv[4];
    // written by the kernel before: ld_act (common.cuh), never __ldg
    auto load_x = [&](int s) {
        const int k0 = s * MMQ_KS;
#pragma unroll
        for (int k = 0; k < 4; ++k)
            xv[k] = xok[k] && k0 + 8 * (tid % 16) < K ? ld_act((const int4 *)(xr[k] + k0)) : make_int4(0, 0, 0, 0);
    };

    if (!early) pdl_wait();
    wu.load(w, K, br.s0); // the first weights before pdl_wait: they do not depend on the kernel before
    pdl_wait();
    load_x(br.s0);

    const int wr = warp % 4, wc = warp / 4;
    float acc[2][4][4] = {};

    for (int s = br.s0; s < br.nsteps; ++s) {
        // this step's weight units, dequantized to f16, and the activations into shared memory
#pragma unroll
        for (int k = 0; k < 2; ++k) {
            int q[8];
            float d[2], m[2];
            wu.unpack(K, s, k, q, d, m);
            const half2 d2[2] = {__float2half2_rn(d[0]), __float2half2_rn(d[1])};
            const half2 m2[2] = {__float2half2_rn(m[0]), __float2half2_rn(m[1])};
            half2 h[16];
#pragma unroll
            for (int e = 0; e < 8; ++e) {
                const int sb = SB == 32 ? 0 : e / 4;
                mmqh_s8x4(q[e], d2[sb], m2[sb], h[2 * e], h[2 * e + 1]);
            }
            int4 * p = (int4 *)(sw + wu.row[k] * MMQH_LD + 32 * wu.j[k]);
#pragma unroll
            for (int e = 0; e < 4; ++e)
                p[e] = *(const int4 *)&h[4 * e];
        }
#pragma unroll
        for (int k = 0; k < 4; ++k)
            *(int4 *)(sx + (tid / 16 + 16 * k) * MMQH_LD + 8 * (tid % 16)) = xv[k];
        __syncthreads();
        if (s + 1 < br.nsteps) { // in flight during the MMAs
            wu.load(w, K, s + 1);
            load_x(s + 1);
        }
#pragma unroll 2
        for (int kk = 0; kk < MMQ_KS / 16; ++kk) {
            int a[2][4], b[2][4];
#pragma unroll
            for (int i = 0; i < 2; ++i)
                mmq_ldsm4(a[i], (const int8_t *)(sw + (32 * wr + 16 * i + (lane % 8) + 8 * ((lane / 8) & 1)) * MMQH_LD +
                                                 16 * kk + 8 * (lane / 16)));
#pragma unroll
            for (int jj = 0; jj < 2; ++jj)
                mmq_ldsm4(b[jj], (const int8_t *)(sx + (32 * wc + 16 * jj + (lane % 8) + 8 * (lane / 16)) * MMQH_LD +
                                                  16 * kk + 8 * ((lane / 8) & 1)));
#pragma unroll
            for (int i = 0; i < 2; ++i)
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mmqh_mma(acc[i][j], a[i], b[j / 2][2 * (j % 2)], b[j / 2][2 * (j % 2) + 1]);
        }
        __syncthreads();
    }
    pdl_trigger();
    mmq_store(acc, dst, ds, m0 + 32 * wr, n0 + 32 * wc, lane, M, N, i2, i3, ksplit > 1);
}

// the operands of the f16 GEMMs (k_mmqh, k_mms): a of type T, bh the dense 16-byte-aligned f16 copy of the
// activations [K, N, B2, B3] (at most max_n columns); false: nothing to compute
template <typename T> static bool mmqh_check(const ggml_tensor * a, const ggml_tensor * bh, int64_t max_n) {
    const int64_t K = a->ne[0], M = a->ne[1], N = bh->ne[1], B2 = bh->ne[2], B3 = bh->ne[3];
    GGML_ASSERT(a->type == T::type && K % T::QK == 0 && K <= INT32_MAX && M <= INT32_MAX && N <= max_n);
    GGML_ASSERT(bh->type == GGML_TYPE_F16 && bh->ne[0] == K && B2 % a->ne[2] == 0 && B3 % a->ne[3] == 0);
    GGML_ASSERT(bh->nb[0] == 2 && bh->nb[1] % 16 == 0 && bh->nb[2] == bh->nb[1] * N && bh->nb[3] == bh->nb[2] * B2 &&
                (uintptr_t)bh->data % 16 == 0);
    return M > 0 && N > 0 && B2 * B3 > 0;
}

template <typename T>
static void qt_mmqh(ggml_cuda_context & ctx, const ggml_tensor * a, const void * w, bool early, const ggml_tensor * bh,
                    ggml_tensor * dst) {
    const int64_t K = a->ne[0], M = a->ne[1], N = bh->ne[1], B2 = bh->ne[2], B3 = bh->ne[3];
    if (!mmqh_check<T>(a, bh, INT32_MAX)) return;
    GGML_ASSERT(cuda_ceil_div(M, MMQ_BM) <= 65535 && B2 * B3 * 8 <= 65535);
    const qregs r = qt_regs_of(T::type, w, ggml_nelements(a) / T::QK);
    const int64_t tiles = cuda_ceil_div(N, MMQ_BN) * cuda_ceil_div(M, MMQ_BM) * B2 * B3;
    const int ks = mmq_ksplit(ctx, tiles, cuda_ceil_div(K, MMQ_KS));
    const dim3 grid((unsigned)cuda_ceil_div(N, MMQ_BN), (unsigned)cuda_ceil_div(M, MMQ_BM), (unsigned)(B2 * B3 * ks));
    static thread_local std::map<int, bool> attr_set; // 51 KiB of shared memory: allowed once per device
    bool & done = attr_set[ctx.device];
    if (!done) {
        CUDA_CHECK(cudaFuncSetAttribute(k_mmqh<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MMQH_SMEM));
        done = true;
    }
    mmq_launch(ctx, k_mmqh<T>, grid, MMQH_SMEM, ks, early, dst, r, (const half *)bh->data, (float *)dst->data, (int)K,
               (int)M, (int)N, (int64_t)(bh->nb[1] / 2), a->ne[2], B2, B2 / a->ne[2], B3 / a->ne[3],
               cuda_shape_of(dst));
}
