// mmvq.cu - see mmvq.cuh.
// One warp per weight row. block_q8_0 is 34 bytes, so its quants are only 2-byte aligned: four
// consecutive lanes share one block and each reads 8 quants as 4 x u16, so a warp instruction
// covers 8 neighbouring blocks (272 contiguous bytes). The q8_1 activations are 36-byte blocks,
// 4-byte aligned, read as ints. All N columns reuse each weight load.
#include "mmvq.cuh"
#include "q8repack.cuh"
#include "qtypes.cuh" // qt_ld16, qt_ldh: the weight loads

static __device__ __forceinline__ int load_int_b2(const uint16_t * p) { return (int)p[0] | ((int)p[1] << 16); }

static __global__ void k_mmvq_q8_0(const char * a, const cuda_block_q8_1 * bq, float * dst, int64_t nblk, int64_t M,
                                   int ncols, cuda_shape as, cuda_shape ds, int64_t B2, int64_t r2, int64_t r3) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= M) return;
    const int64_t bz = blockIdx.y;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const char * arow = a + row * as.nb[1] + (i2 / r2) * as.nb[2] + (i3 / r3) * as.nb[3];
    const cuda_block_q8_1 * bcol = bq + bz * ncols * nblk;
    const int sub = lane % 4; // which 8 of the block's 32 quants
    float acc[MMVQ_MAX_COLS];
#pragma unroll
    for (int c = 0; c < MMVQ_MAX_COLS; ++c)
        acc[c] = 0.0f;

#pragma unroll 4
    for (int64_t ib = lane / 4; ib < nblk; ib += 8) {
        const char * blk = arow + ib * 34;
        const float dw = __half2float(*(const half *)blk);
        const uint16_t * q16 = (const uint16_t *)(blk + 2) + sub * 4;
        const int v0 = load_int_b2(q16), v1 = load_int_b2(q16 + 2);
#pragma unroll
        for (int c = 0; c < MMVQ_MAX_COLS; ++c) {
            if (c < ncols) {
                const cuda_block_q8_1 * yb = bcol + c * nblk + ib;
                const int * u = (const int *)yb->qs + sub * 2;
                const int dot = __dp4a(v1, u[1], __dp4a(v0, u[0], 0));
                acc[c] += dw * __low2float(yb->ds) * (float)dot;
            }
        }
    }
#pragma unroll
    for (int c = 0; c < MMVQ_MAX_COLS; ++c) {
        if (c < ncols) {
            const float s = warp_sum(acc[c]);
            if (lane == 0) *(float *)((char *)dst + row * ds.nb[0] + c * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]) = s;
        }
    }
}

// v3 (default): one block of 128 threads (4 warps) per row, so a row's loads come from 4x more
// threads and the chains are 4x shorter than v1; NCOLS is a template parameter so ncols = 1
// keeps few registers (more resident warps). Same lane layout as v1 (4 lanes per 34-byte block,
// a warp instruction spans 8 neighbouring blocks); partial sums meet in shared memory.
template <int NCOLS>
static __global__ void __launch_bounds__(128)
    k_mmvq_q8_0_v3(const char * a, const cuda_block_q8_1 * bq, float * dst, int64_t nblk, cuda_shape as, cuda_shape ds,
                   int64_t B2, int64_t r2, int64_t r3) {
    __shared__ float s_part[NCOLS][4];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row = blockIdx.x;
    const int64_t bz = blockIdx.y;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const char * arow = a + row * as.nb[1] + (i2 / r2) * as.nb[2] + (i3 / r3) * as.nb[3];
    const cuda_block_q8_1 * bcol = bq + bz * NCOLS * nblk;
    const int sub = tid % 4;
    float acc[NCOLS];
#pragma unroll
    for (int c = 0; c < NCOLS; ++c)
        acc[c] = 0.0f;
#pragma unroll 4
    for (int64_t ib = tid / 4; ib < nblk; ib += 32) {
        const char * blk = arow + ib * 34;
        const float dw = __half2float(*(const half *)blk);
        const uint16_t * q16 = (const uint16_t *)(blk + 2) + sub * 4;
        const int v0 = load_int_b2(q16), v1 = load_int_b2(q16 + 2);
#pragma unroll
        for (int c = 0; c < NCOLS; ++c) {
            const cuda_block_q8_1 * yb = bcol + c * nblk + ib;
            const int * u = (const int *)yb->qs + sub * 2;
            const int dot = __dp4a(v1, u[1], __dp4a(v0, u[0], 0));
            acc[c] += dw * __low2float(yb->ds) * (float)dot;
        }
    }
#pragma unroll
    for (int c = 0; c < NCOLS; ++c) {
        const float sw = warp_sum(acc[c]);
        if (lane == 0) s_part[c][warp] = sw;
    }
    __syncthreads();
    if (tid < NCOLS) {
        const float sum = s_part[tid][0] + s_part[tid][1] + s_part[tid][2] + s_part[tid][3];
        *(float *)((char *)dst + row * ds.nb[0] + tid * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]) = sum;
    }
}

void ggml_cuda_mmvq_q8_0(ggml_cuda_context & ctx, const ggml_tensor * a, const cuda_block_q8_1 * bq,
                         const ggml_tensor * b, ggml_tensor * dst) {
    GGML_ASSERT(a->type == GGML_TYPE_Q8_0 && a->nb[0] == 34 && b->ne[1] <= MMVQ_MAX_COLS);
    const int64_t M = a->ne[1], nblk = a->ne[0] / 32;
    const int64_t B2 = b->ne[2], B3 = b->ne[3];
    // fewer rows per block when M is small, so all SMs get work
    const int rpb = M >= 8 * ctx.n_sm ? 4 : M >= 4 * ctx.n_sm ? 2 : 1;
    if (!ctx.mmvq_v1) {
        const dim3 grid((unsigned)M, (unsigned)(B2 * B3));
        const char * ap = (const char *)a->data;
        float * dp = (float *)dst->data;
        const cuda_shape as = cuda_shape_of(a), dsh = cuda_shape_of(dst);
        const int64_t r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
        switch (b->ne[1]) {
#define MMVQ_V3(n)                                                                                                     \
    case n:                                                                                                            \
        k_mmvq_q8_0_v3<n><<<grid, 128, 0, ctx.stream>>>(ap, bq, dp, nblk, as, dsh, B2, r2, r3);                        \
        break;
            MMVQ_V3(1)
            MMVQ_V3(2) MMVQ_V3(3) MMVQ_V3(4) MMVQ_V3(5) MMVQ_V3(6) MMVQ_V3(7) MMVQ_V3(8)
#undef MMVQ_V3
                default : GGML_ABORT("mmvq: %lld columns", (long long)b->ne[1]);
        }
        CUDA_CHECK_LAUNCH();
        return;
    }
    const dim3 grid((unsigned)cuda_ceil_div(M, rpb), (unsigned)(B2 * B3));
    k_mmvq_q8_0<<<grid, rpb * 32, 0, ctx.stream>>>((const char *)a->data, bq, (float *)dst->data, nblk, M,
                                                   (int)b->ne[1], cuda_shape_of(a), cuda_shape_of(dst), B2,
                                                   B2 / a->ne[2], B3 / a->ne[3]);
    CUDA_CHECK_LAUNCH();
}

// ---- v5: repacked weights (q8repack.cuh) ------------------------------------------------------
// One block of 128 threads per R rows; a thread takes 16-byte chunks ch = tid + 128*j of the rows'
// quants (half a 32-block each). The activation chunk (split layout: 16-byte quant loads, f32
// scales) is loaded once and used for all R rows; the 2 x R weight loads of two chunks are issued
// before any is used, so 2R 16-byte loads per thread are in flight.
static __device__ __forceinline__ int dot16(const int4 a, const int4 b) {
    return __dp4a(a.w, b.w, __dp4a(a.z, b.z, __dp4a(a.y, b.y, __dp4a(a.x, b.x, 0))));
}

template <int NCOLS, int R>
static __global__ void __launch_bounds__(128)
    k_mmvq_q8r(const int8_t * __restrict__ aq, const half * __restrict__ ad, const int8_t * __restrict__ xq,
               const float * __restrict__ xd, float * __restrict__ dst, int K, int64_t M, int64_t A2, int64_t B2,
               int64_t r2, int64_t r3, int64_t N, cuda_shape ds) {
    constexpr int U = 2;
    __shared__ float s_part[NCOLS * R][4];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row0 = (int64_t)blockIdx.x * R, bz = blockIdx.y;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const int64_t ra0 = row0 + (i2 / r2) * M + (i3 / r3) * M * A2; // first weight row (flat)
    const int64_t c0 = bz * N;                                      // first activation row (flat)
    const int nr = M - row0 < R ? (int)(M - row0) : R;
    const int nch = K / 16;
    float acc[NCOLS][R];
#pragma unroll
    for (int c = 0; c < NCOLS; ++c)
#pragma unroll
        for (int r = 0; r < R; ++r)
            acc[c][r] = 0.0f;
    for (int ch0 = tid; ch0 < nch; ch0 += 128 * U) {
        int4 w[U][R];
        float dw[U][R];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int ch = ch0 + 128 * u;
#pragma unroll
            for (int r = 0; r < R; ++r) {
                if (ch < nch && r < nr) {
                    w[u][r] = qt_ld16((const char *)(aq + (ra0 + r) * K + 16 * ch));
                    dw[u][r] = qt_ldh((const char *)(ad + (ra0 + r) * (K / 32) + ch / 2));
                } else {
                    w[u][r] = make_int4(0, 0, 0, 0);
                    dw[u][r] = 0.0f;
                }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int ch = ch0 + 128 * u;
            if (ch < nch) {
#pragma unroll
                for (int c = 0; c < NCOLS; ++c) {
                    const int4 x = ((const int4 *)(xq + (c0 + c) * K))[ch];
                    const float dx = xd[(c0 + c) * (K / 32) + ch / 2];
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        acc[c][r] += dw[u][r] * dx * (float)dot16(w[u][r], x);
                }
            }
        }
    }
#pragma unroll
    for (int c = 0; c < NCOLS; ++c)
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const float sw = warp_sum(acc[c][r]);
            if (lane == 0) s_part[c * R + r][warp] = sw;
        }
    __syncthreads();
    if (tid < NCOLS * R) {
        const int c = tid / R, r = tid % R;
        const float sum = s_part[tid][0] + s_part[tid][1] + s_part[tid][2] + s_part[tid][3];
        if (r < nr)
            *(float *)((char *)dst + (row0 + r) * ds.nb[0] + c * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]) = sum;
    }
}


// ---- v6: repacked weights, one warp per row (N = 1) --------------------------------------------
// A block of 4 warps takes 4 rows; lane l of a warp reads the row's 16-byte chunks l + 32*j. U chunks
// (U x 16 B of weight quants + their scales) are loaded before the first dp4a, so each thread has U
// independent 16-byte loads in flight; no shared memory, one shuffle reduction per row at the end.
// q8r_row_dot: this lane's part of one row's dot (wrow: the row's quants as nch = K/16 chunks, drow: its
// K/32 scales; xrow/dxrow: the activation row in the split layout); the caller sums over the warp.
template <int U>
static __device__ __forceinline__ void q8r_load(const int4 * __restrict__ wrow, const half * __restrict__ drow, int ch0,
                                                int nch, int4 (&w)[U], float (&dw)[U]) {
#pragma unroll
    for (int u = 0; u < U; ++u) {
        const int ch = ch0 + 32 * u;
        if (ch < nch) {
            w[u] = qt_ld16((const char *)(wrow + ch));
            dw[u] = qt_ldh((const char *)(drow + ch / 2));
        } else {
            w[u] = make_int4(0, 0, 0, 0);
            dw[u] = 0.0f;
        }
    }
}

// The first U chunks are loaded before pdl_wait() (common.cuh): they overlap the previous kernel's tail.
template <int U>
static __device__ __forceinline__ float q8r_row_dot(const int4 * __restrict__ wrow, const half * __restrict__ drow,
                                                    const int4 * __restrict__ xrow, const float * __restrict__ dxrow,
                                                    int nch, int lane) {
    float acc = 0.0f;
    int4 w[U];
    float dw[U];
    q8r_load<U>(wrow, drow, lane, nch, w, dw);
    pdl_wait();
    for (int ch0 = lane; ch0 < nch;) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int ch = ch0 + 32 * u;
            if (ch < nch) acc += dw[u] * __ldg(dxrow + ch / 2) * (float)dot16(w[u], __ldg(xrow + ch));
        }
        ch0 += 32 * U;
        if (ch0 < nch) q8r_load<U>(wrow, drow, ch0, nch, w, dw);
    }
    return acc;
}

template <int U>
static __global__ void __launch_bounds__(128)
    k_mmvq_q8r_w(const int8_t * __restrict__ aq, const half * __restrict__ ad, const int8_t * __restrict__ xq,
                 const float * __restrict__ xd, float * __restrict__ dst, int K, int64_t M, int64_t A2, int64_t B2,
                 int64_t r2, int64_t r3, cuda_shape ds) {
    pdl_trigger();
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32, bz = blockIdx.y;
    if (row >= M) return;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const int64_t ra = row + (i2 / r2) * M + (i3 / r3) * M * A2; // weight row (flat)
    const int4 * wrow = (const int4 *)(aq + ra * K);
    const half * drow = ad + ra * (K / 32);
    const int4 * xrow = (const int4 *)(xq + bz * K); // activation row bz (N = 1)
    const float * dxrow = xd + bz * (K / 32);
    const float acc = warp_sum(q8r_row_dot<U>(wrow, drow, xrow, dxrow, K / 16, lane));
    if (lane == 0) *(float *)((char *)dst + row * ds.nb[0] + i2 * ds.nb[2] + i3 * ds.nb[3]) = acc;
}

// ---- fused groups: up to 3 weights sharing one activation row, one launch --------------------------
// Block b (4 warps, 4 rows as in v6) belongs to matrix m where blk[m] <= b < blk[m+1] (cumulative row-block
// counts, blk[0] = 0); the per-row loop is v6's (q8r_row_dot).
struct q8r_group_args {
    const int8_t * q[MMV_GROUP_MAX]; // quants of weight m: row r at q[m] + r*K
    const half * d[MMV_GROUP_MAX];   // its scales: row r at d[m] + r*K/32
    float * dst[MMV_GROUP_MAX];      // [M[m]] f32
    int64_t M[MMV_GROUP_MAX];
    int64_t blk1, blk2; // first row block of matrix 1 and of matrix 2 (= the grid size when n = 2)
};

template <int U>
static __global__ void __launch_bounds__(128)
    k_mmvq_q8r_group(const q8r_group_args g, const int8_t * __restrict__ xq, const float * __restrict__ xd, int K) {
    pdl_trigger();
    const int lane = threadIdx.x % 32;
    const int64_t b = blockIdx.x;
    const int m = b >= g.blk2 ? 2 : b >= g.blk1 ? 1 : 0;
    const int64_t b0 = m == 2 ? g.blk2 : m == 1 ? g.blk1 : 0;
    const int64_t M = m == 2 ? g.M[2] : m == 1 ? g.M[1] : g.M[0];
    const int64_t row = (b - b0) * 4 + threadIdx.x / 32;
    if (row >= M) return;
    const int8_t * q = m == 2 ? g.q[2] : m == 1 ? g.q[1] : g.q[0];
    const half * d = m == 2 ? g.d[2] : m == 1 ? g.d[1] : g.d[0];
    float * dst = m == 2 ? g.dst[2] : m == 1 ? g.dst[1] : g.dst[0];
    const float acc =
        warp_sum(q8r_row_dot<U>((const int4 *)(q + row * K), d + row * (K / 32), (const int4 *)xq, xd, K / 16, lane));
    if (lane == 0) dst[row] = acc;
}

// gate and up rows i in one warp: U chunks of each loaded before the dp4a (2U loads in flight), one
// activation load serves both; writes silu(gate) * up. Same per-chunk arithmetic as q8r_row_dot.
static __device__ __forceinline__ float silu_f(float x) { return x / (1.0f + expf(-x)); }

template <int U>
static __global__ void __launch_bounds__(128)
    k_mmvq_q8r_swiglu(const int8_t * __restrict__ gq, const half * __restrict__ gd, const int8_t * __restrict__ uq,
                      const half * __restrict__ ud, const int8_t * __restrict__ xq, const float * __restrict__ xd,
                      float * __restrict__ dst, int K, int64_t M) {
    pdl_trigger();
    const int lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    if (row >= M) return;
    const int4 * grow = (const int4 *)(gq + row * K);
    const int4 * urow = (const int4 *)(uq + row * K);
    const half * gdrow = gd + row * (K / 32);
    const half * udrow = ud + row * (K / 32);
    const int4 * xrow = (const int4 *)xq;
    const int nch = K / 16;
    float ag = 0.0f, au = 0.0f;
    int4 wg[U], wu[U];
    float dg[U], du[U];
    q8r_load<U>(grow, gdrow, lane, nch, wg, dg);
    q8r_load<U>(urow, udrow, lane, nch, wu, du);
    pdl_wait(); // the weights above are loaded while the previous kernel finishes
    for (int ch0 = lane; ch0 < nch;) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int ch = ch0 + 32 * u;
            if (ch < nch) {
                const int4 x = __ldg(xrow + ch);
                const float dx = __ldg(xd + ch / 2);
                ag += dg[u] * dx * (float)dot16(wg[u], x);
                au += du[u] * dx * (float)dot16(wu[u], x);
            }
        }
        ch0 += 32 * U;
        if (ch0 < nch) {
            q8r_load<U>(grow, gdrow, ch0, nch, wg, dg);
            q8r_load<U>(urow, udrow, ch0, nch, wu, du);
        }
    }
    ag = warp_sum(ag);
    au = warp_sum(au);
    if (lane == 0) dst[row] = silu_f(ag) * au;
}

bool ggml_cuda_mmvq_q8r_v6(const ggml_cuda_context & ctx, int64_t K, int64_t N) {
    // bench-mmvq on an H200 (2026-11-22, graph replay, us/call v6 U=4 vs v5): 4096x4096 5.76 vs 8.98,
    // 4096x11008 12.96 vs 16.81, 11008x4096 14.45 vs 18.14, so every K takes it (an earlier H100 round had
    // measured v6 slower for K = 11008). GGML_CUDA_MMVQ = 2/4/8 picks U (default 2: with PDL, end to end on an
    // H200, q8_0 Llama-2-7B tg128 338.9 t/s with U=2, 333.6 with U=4, 321.9 with U=4 for the one-wave wo/down
    // launches and U=2 for the rest), = 5 forces v5.
    (void)K;
    return N == 1 && ctx.mmvq_u != 5;
}

void ggml_cuda_mmvq_q8r_group(ggml_cuda_context & ctx, const ggml_tensor * const * dsts, int n, const void * bq) {
    GGML_ASSERT(n >= 1 && n <= MMV_GROUP_MAX);
    const int64_t K = dsts[0]->src[0]->ne[0];
    GGML_ASSERT(K % 32 == 0 && ggml_cuda_mmvq_q8r_v6(ctx, K, 1));
    q8r_group_args g = {};
    int64_t blk[MMV_GROUP_MAX + 1] = {0, 0, 0, 0};
    for (int m = 0; m < MMV_GROUP_MAX; ++m) {
        if (m < n) {
            const ggml_tensor * a = dsts[m]->src[0];
            GGML_ASSERT(ggml_cuda_q8_repacked(a) && a->ne[0] == K && ggml_nrows(a) == a->ne[1]);
            GGML_ASSERT(dsts[m]->type == GGML_TYPE_F32 && ggml_nelements(dsts[m]) == a->ne[1]);
            g.q[m] = q8r_qs(a);
            g.d[m] = q8r_d(a);
            g.dst[m] = (float *)dsts[m]->data;
            g.M[m] = a->ne[1];
        }
        blk[m + 1] = blk[m] + (m < n ? cuda_ceil_div(g.M[m], 4) : 0);
    }
    g.blk1 = blk[1];
    g.blk2 = blk[2];
    const int64_t nblk = blk[MMV_GROUP_MAX];
    if (nblk == 0) return;
    const int8_t * xq = (const int8_t *)bq;
    const float * xd = (const float *)((const char *)bq + K); // one activation row
#define MMVQ_G(u) ggml_cuda_launch(ctx, k_mmvq_q8r_group<u>, dim3((unsigned)nblk), dim3(128), 0, g, xq, xd, (int)K)
    switch (ctx.mmvq_u) {
        case 2: MMVQ_G(2); break;
        case 8: MMVQ_G(8); break;
        default: MMVQ_G(4); break;
    }
#undef MMVQ_G
}

void ggml_cuda_mmvq_q8r_swiglu(ggml_cuda_context & ctx, const ggml_tensor * gate_w, const ggml_tensor * up_w,
                               const void * bq, float * dst) {
    const int64_t K = gate_w->ne[0], M = gate_w->ne[1];
    GGML_ASSERT(ggml_cuda_q8_repacked(gate_w) && ggml_cuda_q8_repacked(up_w) && K % 32 == 0);
    GGML_ASSERT(up_w->ne[0] == K && up_w->ne[1] == M && ggml_nrows(gate_w) == M && ggml_nrows(up_w) == M);
    if (M == 0) return;
    const int8_t * xq = (const int8_t *)bq;
    const float * xd = (const float *)((const char *)bq + K); // one activation row
    const unsigned nblk = (unsigned)cuda_ceil_div(M, 4);
    // U chunks of each matrix: 2U 16-byte loads in flight, as many as v6 with 2U
#define MMVQ_S(u)                                                                                                      \
    ggml_cuda_launch(ctx, k_mmvq_q8r_swiglu<u>, dim3(nblk), dim3(128), 0, q8r_qs(gate_w), q8r_d(gate_w), q8r_qs(up_w), \
                     q8r_d(up_w), xq, xd, dst, (int)K, M)
    switch (ctx.mmvq_u) {
        case 2: MMVQ_S(1); break;
        case 8: MMVQ_S(4); break;
        default: MMVQ_S(2); break;
    }
#undef MMVQ_S
}

void ggml_cuda_mmvq_q8r(ggml_cuda_context & ctx, const ggml_tensor * a, const void * bq, const ggml_tensor * b,
                        ggml_tensor * dst) {
    GGML_ASSERT(a->type == GGML_TYPE_Q8_0 && a->ne[0] % 32 == 0 && b->ne[1] <= MMVQ_MAX_COLS);
    const int64_t K = a->ne[0], M = a->ne[1], N = b->ne[1];
    const int64_t B2 = b->ne[2], B3 = b->ne[3];
    const int64_t nrows_a = ggml_nrows(a), nrows_b = ggml_nrows(b);
    const int8_t * aq = (const int8_t *)a->data;
    const half * ad = (const half *)((const char *)a->data + nrows_a * K);
    const int8_t * xq = (const int8_t *)bq;
    const float * xd = (const float *)((const char *)bq + nrows_b * K);
    const cuda_shape dsh = cuda_shape_of(dst);
    const int64_t r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
    // 4 rows per block when that still gives every SM a few blocks, else 2 or 1
    const int R = N <= 2 && M >= 16 * ctx.n_sm ? 4 : N <= 4 && M >= 8 * ctx.n_sm ? 2 : 1;
    const dim3 grid((unsigned)cuda_ceil_div(M, R), (unsigned)(B2 * B3));
    float * dp = (float *)dst->data;
    if (ggml_cuda_mmvq_q8r_v6(ctx, K, N)) { // v6 for N = 1 (see ggml_cuda_mmvq_q8r_v6)
        const dim3 gw((unsigned)cuda_ceil_div(M, 4), (unsigned)(B2 * B3));
#define MMVQ_W(u)                                                                                                      \
    ggml_cuda_launch(ctx, k_mmvq_q8r_w<u>, gw, dim3(128), 0, aq, ad, xq, xd, dp, (int)K, M, a->ne[2], B2, r2, r3, dsh)
        switch (ctx.mmvq_u) {
            case 2: MMVQ_W(2); break;
            case 8: MMVQ_W(8); break;
            default: MMVQ_W(4); break;
        }
#undef MMVQ_W
        return;
    }
#define MMVQ_R(n, r)                                                                                                   \
    k_mmvq_q8r<n, r><<<grid, 128, 0, ctx.stream>>>(aq, ad, xq, xd, dp, (int)K, M, a->ne[2], B2, r2, r3, N, dsh)
    switch (N * 8 + R) {
        case 8 + 4: MMVQ_R(1, 4); break;
        case 8 + 2: MMVQ_R(1, 2); break;
        case 8 + 1: MMVQ_R(1, 1); break;
        case 16 + 4: MMVQ_R(2, 4); break;
        case 16 + 2: MMVQ_R(2, 2); break;
        case 16 + 1: MMVQ_R(2, 1); break;
        case 24 + 2: MMVQ_R(3, 2); break;
        case 24 + 1: MMVQ_R(3, 1); break;
        case 32 + 2: MMVQ_R(4, 2); break;
        case 32 + 1: MMVQ_R(4, 1); break;
        case 40 + 1: MMVQ_R(5, 1); break;
        case 48 + 1: MMVQ_R(6, 1); break;
        case 56 + 1: MMVQ_R(7, 1); break;
        case 64 + 1: MMVQ_R(8, 1); break;
        default: GGML_ABORT("mmvq: %lld columns", (long long)N);
    }
#undef MMVQ_R
    CUDA_CHECK_LAUNCH();
}

// ---- the other quantized types: one instance file each (mmvq-<type>.cu) -----------------------------------------
extern const ggml_cuda_qt_fns ggml_cuda_qt_q4_0, ggml_cuda_qt_q4_1, ggml_cuda_qt_q5_0, ggml_cuda_qt_q5_1,
    ggml_cuda_qt_q2_K, ggml_cuda_qt_q3_K, ggml_cuda_qt_q4_K, ggml_cuda_qt_q5_K, ggml_cuda_qt_q6_K, ggml_cuda_qt_q8_0;

const ggml_cuda_qt_fns * ggml_cuda_qt_q8r(const ggml_cuda_context & ctx, const ggml_tensor * a) {
    return ctx.q8_qt && ggml_cuda_q8_repacked(a) ? &ggml_cuda_qt_q8_0 : nullptr;
}

const ggml_cuda_qt_fns * ggml_cuda_qt(ggml_type type) {
    switch (type) {
        case GGML_TYPE_Q4_0: return &ggml_cuda_qt_q4_0;
        case GGML_TYPE_Q4_1: return &ggml_cuda_qt_q4_1;
        case GGML_TYPE_Q5_0: return &ggml_cuda_qt_q5_0;
        case GGML_TYPE_Q5_1: return &ggml_cuda_qt_q5_1;
        case GGML_TYPE_Q2_K: return &ggml_cuda_qt_q2_K;
        case GGML_TYPE_Q3_K: return &ggml_cuda_qt_q3_K;
        case GGML_TYPE_Q4_K: return &ggml_cuda_qt_q4_K;
        case GGML_TYPE_Q5_K: return &ggml_cuda_qt_q5_K;
        case GGML_TYPE_Q6_K: return &ggml_cuda_qt_q6_K;
        default: return nullptr;
    }
}
