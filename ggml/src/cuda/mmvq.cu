// mmvq.cu - see mmvq.cuh.
// One warp per weight row. block_q8_0 is 34 bytes, so its quants are only 2-byte aligned: four
// consecutive lanes share one block and each reads 8 quants as 4 x u16, so a warp instruction
// covers 8 neighbouring blocks (272 contiguous bytes). The q8_1 activations are 36-byte blocks,
// 4-byte aligned, read as ints. All N columns reuse each weight load.
#include "mmvq.cuh"

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
