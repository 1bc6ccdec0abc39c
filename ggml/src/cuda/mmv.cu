// mmv.cu - see mmv.cuh. One warp per row of a. The vector path (dense, 16-byte aligned rows of
// a and b) reads 16 bytes of a per lane per step (8 halves / 4 floats); the general path
// reads one element at a time with strides.
#include "mmv.cuh"

// 8 halves (one 16-byte load) -> 8 floats
static __device__ __forceinline__ void h8_to_f32(const uint4 & raw, float * out) {
    const half2 * h = (const half2 *)&raw;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const float2 f = __half22float2(h[j]);
        out[2 * j] = f.x;
        out[2 * j + 1] = f.y;
    }
}

// one 16-byte load of T (8 halves or 4 floats) -> 16 / sizeof(T) floats
template <typename T> static __device__ __forceinline__ void load16_f32(const char * p, float * out) {
    const uint4 raw = *(const uint4 *)p;
    if constexpr (sizeof(T) == 2) {
        h8_to_f32(raw, out);
    } else {
        const float * f = (const float *)&raw;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            out[j] = f[j];
    }
}

// PDL (common.cuh): these kernels read nothing before pdl_wait(). An earlier version fetched each block's weight
// row into L2 (prefetch.global.L2) before it: f16 Llama-2-7B tg128 on an H200 fell from 246.7 to 218.7 t/s.
template <typename T, bool VEC>
static __global__ void k_mmv(const char * a, const char * b, float * dst, int64_t K, int64_t M, int ncols,
                             cuda_shape as, cuda_shape bs, cuda_shape ds, int64_t B2, int64_t r2, int64_t r3) {
    pdl_start();
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int64_t row = (int64_t)blockIdx.x * (blockDim.x / 32) + warp;
    if (row >= M) return;
    const int64_t bz = blockIdx.y;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const char * arow = a + row * as.nb[1] + (i2 / r2) * as.nb[2] + (i3 / r3) * as.nb[3];
    const char * bbase = b + i2 * bs.nb[2] + i3 * bs.nb[3];
    float acc[MMV_MAX_COLS];
#pragma unroll
    for (int c = 0; c < MMV_MAX_COLS; ++c)
        acc[c] = 0.0f;

    if (VEC) {
        constexpr int E = 16 / sizeof(T); // elements per 16-byte load
#pragma unroll 2
        for (int64_t k = (int64_t)lane * E; k < K; k += 32 * E) {
            float av[E];
            load16_f32<T>(arow + k * sizeof(T), av);
#pragma unroll
            for (int c = 0; c < MMV_MAX_COLS; ++c) {
                if (c < ncols) {
                    const float4 * bv = (const float4 *)(bbase + c * bs.nb[1] + k * 4);
                    float s = 0.0f;
#pragma unroll
                    for (int j = 0; j < E / 4; ++j) {
                        const float4 x = bv[j];
                        s += av[4 * j] * x.x + av[4 * j + 1] * x.y + av[4 * j + 2] * x.z + av[4 * j + 3] * x.w;
                    }
                    acc[c] += s;
                }
            }
        }
    } else {
        for (int64_t k = lane; k < K; k += 32) {
            const float av = to_f32<T>(*(const T *)(arow + k * sizeof(T)));
#pragma unroll
            for (int c = 0; c < MMV_MAX_COLS; ++c)
                if (c < ncols) acc[c] += av * *(const float *)(bbase + c * bs.nb[1] + k * bs.nb[0]);
        }
    }
#pragma unroll
    for (int c = 0; c < MMV_MAX_COLS; ++c) {
        if (c < ncols) {
            const float s = warp_sum(acc[c]);
            if (lane == 0) *(float *)((char *)dst + row * ds.nb[0] + c * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]) = s;
        }
    }
}

// v2 for long rows (weights, K >= 1024) with the vector layout: one block of 128 threads per row,
// each thread 16-byte loads strided by 128 x 16 bytes, NCOLS a template parameter; the 4 warps'
// partial sums meet in shared memory.
template <typename T, int NCOLS>
static __global__ void __launch_bounds__(128)
    k_mmv_v2(const char * a, const char * b, float * dst, int64_t K, cuda_shape as, cuda_shape bs, cuda_shape ds,
             int64_t B2, int64_t r2, int64_t r3) {
    constexpr int E = 16 / sizeof(T);
    __shared__ float s_part[NCOLS][4];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row = blockIdx.x, bz = blockIdx.y;
    const int64_t i2 = bz % B2, i3 = bz / B2;
    const char * arow = a + row * as.nb[1] + (i2 / r2) * as.nb[2] + (i3 / r3) * as.nb[3];
    const char * bbase = b + i2 * bs.nb[2] + i3 * bs.nb[3];
    pdl_start();
    float acc[NCOLS];
#pragma unroll
    for (int c = 0; c < NCOLS; ++c)
        acc[c] = 0.0f;
#pragma unroll 4
    for (int64_t k = (int64_t)tid * E; k < K; k += 128 * E) {
        float av[E];
        load16_f32<T>(arow + k * sizeof(T), av);
#pragma unroll
        for (int c = 0; c < NCOLS; ++c) {
            const float4 * bv = (const float4 *)(bbase + c * bs.nb[1] + k * 4);
#pragma unroll
            for (int j = 0; j < E / 4; ++j) {
                const float4 x = bv[j];
                acc[c] += av[4 * j] * x.x + av[4 * j + 1] * x.y + av[4 * j + 2] * x.z + av[4 * j + 3] * x.w;
            }
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

template <typename T>
static void launch_mmv_v2(ggml_cuda_context & ctx, dim3 grid, int nc, const char * ap, const char * bp, float * dp,
                          int64_t K, const cuda_shape & as, const cuda_shape & bs, const cuda_shape & ds, int64_t B2,
                          int64_t r2, int64_t r3) {
    switch (nc) {
#define MMV_V2(n)                                                                                                      \
    case n:                                                                                                            \
        ggml_cuda_launch(ctx, k_mmv_v2<T, n>, grid, dim3(128), 0, ap, bp, dp, K, as, bs, ds, B2, r2, r3);              \
        break;
        MMV_V2(1)
        MMV_V2(2) MMV_V2(3) MMV_V2(4) MMV_V2(5) MMV_V2(6) MMV_V2(7) MMV_V2(8)
#undef MMV_V2
            default : GGML_ABORT("mmv: %d columns", nc);
    }
}

static bool aligned16(const void * p, const ggml_tensor * t) {
    if ((uintptr_t)p % 16 != 0) return false;
    for (int i = 1; i < 4; ++i)
        if (t->ne[i] > 1 && t->nb[i] % 16 != 0) return false;
    return true;
}

void ggml_cuda_mmv(ggml_cuda_context & ctx, const ggml_tensor * a, const ggml_tensor * b, ggml_tensor * dst) {
    const size_t ts = ggml_type_size(a->type);
    GGML_ASSERT((a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16) && a->nb[0] == ts);
    GGML_ASSERT(b->type == GGML_TYPE_F32 && b->ne[1] <= MMV_MAX_COLS);
    const int64_t K = a->ne[0], M = a->ne[1], B2 = b->ne[2], B3 = b->ne[3];
    const bool vec = K % (16 / ts) == 0 && b->nb[0] == 4 && aligned16(a->data, a) && aligned16(b->data, b);
    const int rpb = M >= 8 * ctx.n_sm ? 4 : M >= 4 * ctx.n_sm ? 2 : 1;
    const dim3 grid((unsigned)cuda_ceil_div(M, rpb), (unsigned)(B2 * B3));
    const cuda_shape as = cuda_shape_of(a), bs = cuda_shape_of(b), ds = cuda_shape_of(dst);
    const int64_t r2 = B2 / a->ne[2], r3 = B3 / a->ne[3];
    const char * ap = (const char *)a->data;
    const char * bp = (const char *)b->data;
    float * dp = (float *)dst->data;
    const int nc = (int)b->ne[1];
    if (vec && K >= 1024) { // long rows: a block per row
        const dim3 grid2((unsigned)M, (unsigned)(B2 * B3));
        if (a->type == GGML_TYPE_F16)
            launch_mmv_v2<half>(ctx, grid2, nc, ap, bp, dp, K, as, bs, ds, B2, r2, r3);
        else
            launch_mmv_v2<float>(ctx, grid2, nc, ap, bp, dp, K, as, bs, ds, B2, r2, r3);
        return;
    }
#define MMV_LAUNCH(T, V)                                                                                               \
    ggml_cuda_launch(ctx, k_mmv<T, V>, grid, dim3(rpb * 32), 0, ap, bp, dp, K, M, nc, as, bs, ds, B2, r2, r3)
    if (a->type == GGML_TYPE_F16) {
        if (vec)
            MMV_LAUNCH(half, true);
        else
            MMV_LAUNCH(half, false);
    } else {
        if (vec)
            MMV_LAUNCH(float, true);
        else
            MMV_LAUNCH(float, false);
    }
#undef MMV_LAUNCH
}

// ---- fused groups (f16 weights, one activation column): v2's loop, one 128-thread block per row ----------
// f16 row `arow` (16-byte aligned, K % 8 == 0) times f32 x (16-byte aligned): this thread's part, exactly as
// k_mmv_v2<half, 1> accumulates it.
static __device__ __forceinline__ float f16_row_part(const char * __restrict__ arow, const char * __restrict__ x,
                                                     int64_t K, int tid) {
    float acc = 0.0f;
#pragma unroll 4
    for (int64_t k = (int64_t)tid * 8; k < K; k += 128 * 8) {
        float av[8];
        load16_f32<half>(arow + k * 2, av);
        const float4 * bv = (const float4 *)(x + k * 4);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const float4 xv = bv[j];
            acc += av[4 * j] * xv.x + av[4 * j + 1] * xv.y + av[4 * j + 2] * xv.z + av[4 * j + 3] * xv.w;
        }
    }
    return acc;
}

// block b is row b - start[m] of matrix m, start[m] <= b < start[m+1] (cumulative row counts)
struct f16_group_args {
    const char * a[MMV_GROUP_MAX]; // row r of matrix m at a[m] + r * lda[m]
    int64_t lda[MMV_GROUP_MAX];    // bytes
    float * dst[MMV_GROUP_MAX];
    int64_t start1, start2; // first block of matrix 1 and of matrix 2 (= the grid size when n = 2)
};

static __global__ void __launch_bounds__(128)
    k_mmv_f16_group(const f16_group_args g, const char * __restrict__ x, int64_t K) {
    __shared__ float s_part[4];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t b = blockIdx.x;
    const int m = b >= g.start2 ? 2 : b >= g.start1 ? 1 : 0;
    const int64_t row = b - (m == 2 ? g.start2 : m == 1 ? g.start1 : 0);
    const char * a = m == 2 ? g.a[2] : m == 1 ? g.a[1] : g.a[0];
    const int64_t lda = m == 2 ? g.lda[2] : m == 1 ? g.lda[1] : g.lda[0];
    float * dst = m == 2 ? g.dst[2] : m == 1 ? g.dst[1] : g.dst[0];
    pdl_start();
    const float sw = warp_sum(f16_row_part(a + row * lda, x, K, tid));
    if (lane == 0) s_part[warp] = sw;
    __syncthreads();
    if (tid == 0) dst[row] = s_part[0] + s_part[1] + s_part[2] + s_part[3];
}

// gate and up row b in one block (two accumulators, one activation load for both); writes silu(g) * u
static __global__ void __launch_bounds__(128)
    k_mmv_f16_swiglu(const char * __restrict__ ga, int64_t glda, const char * __restrict__ ua, int64_t ulda,
                     const char * __restrict__ x, float * __restrict__ dst, int64_t K) {
    __shared__ float s_part[2][4];
    const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
    const int64_t row = blockIdx.x;
    const char * grow = ga + row * glda;
    const char * urow = ua + row * ulda;
    pdl_start();
    float ag = 0.0f, au = 0.0f;
#pragma unroll 4
    for (int64_t k = (int64_t)tid * 8; k < K; k += 128 * 8) {
        const uint4 rg = *(const uint4 *)(grow + k * 2);
        const uint4 ru = *(const uint4 *)(urow + k * 2);
        float gv[8], uv[8];
        h8_to_f32(rg, gv);
        h8_to_f32(ru, uv);
        const float4 * bv = (const float4 *)(x + k * 4);
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            const float4 xv = bv[j];
            ag += gv[4 * j] * xv.x + gv[4 * j + 1] * xv.y + gv[4 * j + 2] * xv.z + gv[4 * j + 3] * xv.w;
            au += uv[4 * j] * xv.x + uv[4 * j + 1] * xv.y + uv[4 * j + 2] * xv.z + uv[4 * j + 3] * xv.w;
        }
    }
    const float sg = warp_sum(ag), su = warp_sum(au);
    if (lane == 0) {
        s_part[0][warp] = sg;
        s_part[1][warp] = su;
    }
    __syncthreads();
    if (tid == 0) {
        const float g = s_part[0][0] + s_part[0][1] + s_part[0][2] + s_part[0][3];
        const float u = s_part[1][0] + s_part[1][1] + s_part[1][2] + s_part[1][3];
        dst[row] = g / (1.0f + expf(-g)) * u;
    }
}

bool ggml_cuda_mmv_f16_fusable(const ggml_tensor * a, int64_t K) {
    return a->type == GGML_TYPE_F16 && a->ne[0] == K && a->ne[2] == 1 && a->ne[3] == 1 && a->nb[0] == 2 &&
           a->nb[1] % 16 == 0 && (uintptr_t)a->data % 16 == 0 && K % 8 == 0 && K >= 1024;
}

void ggml_cuda_mmv_f16_group(ggml_cuda_context & ctx, const ggml_tensor * const * dsts, int n) {
    GGML_ASSERT(n >= 1 && n <= MMV_GROUP_MAX);
    const ggml_tensor * x = dsts[0]->src[1];
    const int64_t K = x->ne[0];
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == 4 && ggml_nrows(x) == 1 && (uintptr_t)x->data % 16 == 0);
    f16_group_args g = {};
    int64_t start[MMV_GROUP_MAX + 1] = {0, 0, 0, 0};
    for (int m = 0; m < MMV_GROUP_MAX; ++m) {
        int64_t M = 0;
        if (m < n) {
            const ggml_tensor * a = dsts[m]->src[0];
            GGML_ASSERT(ggml_cuda_mmv_f16_fusable(a, K) && dsts[m]->src[1] == x);
            GGML_ASSERT(dsts[m]->type == GGML_TYPE_F32 && ggml_nelements(dsts[m]) == a->ne[1]);
            g.a[m] = (const char *)a->data;
            g.lda[m] = (int64_t)a->nb[1];
            g.dst[m] = (float *)dsts[m]->data;
            M = a->ne[1];
        }
        start[m + 1] = start[m] + M;
    }
    g.start1 = start[1];
    g.start2 = start[2];
    const int64_t nrows = start[MMV_GROUP_MAX];
    if (nrows == 0) return;
    ggml_cuda_launch(ctx, k_mmv_f16_group, dim3((unsigned)nrows), dim3(128), 0, g, (const char *)x->data, K);
}

void ggml_cuda_mmv_f16_swiglu(ggml_cuda_context & ctx, const ggml_tensor * gate_w, const ggml_tensor * up_w,
                              const ggml_tensor * x, float * dst) {
    const int64_t K = x->ne[0], M = gate_w->ne[1];
    GGML_ASSERT(ggml_cuda_mmv_f16_fusable(gate_w, K) && ggml_cuda_mmv_f16_fusable(up_w, K) && up_w->ne[1] == M);
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->nb[0] == 4 && ggml_nrows(x) == 1 && (uintptr_t)x->data % 16 == 0);
    if (M == 0) return;
    ggml_cuda_launch(ctx, k_mmv_f16_swiglu, dim3((unsigned)M), dim3(128), 0, (const char *)gate_w->data,
                     (int64_t)gate_w->nb[1], (const char *)up_w->data, (int64_t)up_w->nb[1], (const char *)x->data, dst,
                     K);
}
