// norm.cu - see norm.cuh. One block per row; warp shuffles then a shared-memory pass.
#include "mmw-order.cuh"
#include "norm.cuh"
#include "quantize.cuh"

// y = x / sqrt(mean(x^2) + eps) [* w] ; w (f32) repeats over x like ggml_mul's b
// Q8 (T = float, ne0 % 32 == 0, blockDim % 32 == 0): y also quantized to the split q8 layout (quantize.cuh):
// qs [nrows * ne0] int8, qd [nrows * ne0/32] f32, row = blockIdx.x; a warp's 32 consecutive values are one block.
// W16 (T = float, rows = the wgmma GEMM's N columns, one batch): y also in the GEMM's f16 order at xw (mmw-order.cuh).
template <typename T, bool HAS_W, bool Q8 = false, bool W16 = false>
static __global__ void k_rms_norm(const char * x, const char * w, char * y, cuda_shape xs, cuda_shape ws, cuda_shape ys,
                                  float eps, int8_t * qs, float * qd, int * qsum, half * xw, int nt) {
    __shared__ float s_tmp[32];
    pdl_start();
    int64_t i1, i2, i3;
    unravel_row(blockIdx.x, xs.ne[1], xs.ne[2], i1, i2, i3);
    const char * xr = x + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    char * yr = y + i1 * ys.nb[1] + i2 * ys.nb[2] + i3 * ys.nb[3];
    const char * wr =
        HAS_W ? w + (i1 % ws.ne[1]) * ws.nb[1] + (i2 % ws.ne[2]) * ws.nb[2] + (i3 % ws.ne[3]) * ws.nb[3] : nullptr;
    const int64_t n = xs.ne[0];
    float sum = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = to_f32<T>(*(const T *)(xr + i * xs.nb[0]));
        sum += v * v;
    }
    sum = block_sum(sum, s_tmp);
    const float scale = rsqrtf(sum / n + eps);
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float v = to_f32<T>(*(const T *)(xr + i * xs.nb[0])) * scale;
        if (HAS_W) v *= *(const float *)(wr + (i % ws.ne[0]) * ws.nb[0]);
        *(T *)(yr + i * ys.nb[0]) = from_f32<T>(v);
        if (Q8) { // the whole warp is in this iteration (n % 32 == 0): lanes hold values i - lane .. i - lane + 31
            const int64_t blk = (int64_t)blockIdx.x * (n / 32) + i / 32;
            q8s_quantize_block(v, (int)(i % 32), qs + 32 * blk, qd + blk, qsum + blk);
        }
        if (W16) mmw_put1(xw, nt, (int)gridDim.x, (int)blockIdx.x, i, v);
    }
}

// threads per row of n values for k_rms_norm (a multiple of 32, as its Q8 and W16 forms need)
static int rms_norm_block(int64_t n) { return n >= 1024 ? 1024 : n >= 256 ? 256 : 32; }

static void rms_norm(ggml_cuda_context & ctx, const ggml_tensor * x, const ggml_tensor * w, ggml_tensor * y,
                     float eps) {
    const int64_t rows = ggml_nrows(x);
    if (rows == 0) return;
    const int bs = rms_norm_block(x->ne[0]);
    const cuda_shape xs = cuda_shape_of(x), ys = cuda_shape_of(y), ws = w ? cuda_shape_of(w) : xs;
    const char * xp = (const char *)x->data;
    const char * wp = w ? (const char *)w->data : nullptr;
#define RMS_NORM(T, W)                                                                                                 \
    ggml_cuda_launch(ctx, k_rms_norm<T, W>, dim3((unsigned)rows), dim3(bs), 0, xp, wp, (char *)y->data, xs, ws, ys,     \
                     eps, nullptr, nullptr, nullptr, nullptr, 0)
    if (x->type == GGML_TYPE_F32) {
        if (w)
            RMS_NORM(float, true);
        else
            RMS_NORM(float, false);
    } else {
        if (w)
            RMS_NORM(half, true);
        else
            RMS_NORM(half, false);
    }
#undef RMS_NORM
}

GGML_CUDA_OP(rms_norm) {
    GGML_ASSERT(dst->src[0]->type == dst->type);
    rms_norm(ctx, dst->src[0], nullptr, dst, ggml_get_op_params_f32(dst, 0));
}

void ggml_cuda_op_rms_norm_mul(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul) {
    GGML_ASSERT(mul->src[0] == norm && mul->type == norm->type && mul->src[1]->type == GGML_TYPE_F32);
    rms_norm(ctx, norm->src[0], mul->src[1], mul, ggml_get_op_params_f32(norm, 0));
}

void * ggml_cuda_op_rms_norm_mul_q8(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul) {
    const ggml_tensor * x = norm->src[0], * w = mul->src[1];
    const int64_t n = x->ne[0], rows = ggml_nrows(x);
    if (!(x->type == GGML_TYPE_F32 && mul->type == GGML_TYPE_F32 && ggml_is_contiguous(mul) && n % 32 == 0 &&
          rows > 0 && rows <= INT32_MAX)) {
        ggml_cuda_op_rms_norm_mul(ctx, norm, mul);
        return nullptr;
    }
    GGML_ASSERT(mul->src[0] == norm && w->type == GGML_TYPE_F32);
    void * q = ctx.pool.alloc(ggml_cuda_q8s_size(rows, n));
    const q8s_view v = q8s_view_of(q, rows, n);
    const int bs = rms_norm_block(n);
    ggml_cuda_launch(ctx, k_rms_norm<float, true, true>, dim3((unsigned)rows), dim3(bs), 0, (const char *)x->data,
                     (const char *)w->data, (char *)mul->data, cuda_shape_of(x), cuda_shape_of(w), cuda_shape_of(mul),
                     ggml_get_op_params_f32(norm, 0), v.qs, v.d, v.s, nullptr, 0);
    return q;
}

half * ggml_cuda_op_rms_norm_mul_w16(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul) {
    const ggml_tensor * x = norm->src[0], * w = mul->src[1];
    if (!(x->type == GGML_TYPE_F32 && ggml_cuda_mmw_order_ok(mul))) {
        ggml_cuda_op_rms_norm_mul(ctx, norm, mul);
        return nullptr;
    }
    GGML_ASSERT(mul->src[0] == norm && w->type == GGML_TYPE_F32);
    half * xw = ggml_cuda_mmw_order_alloc(ctx, mul);
    const int64_t n = x->ne[0], rows = ggml_nrows(x);
    const int bs = rms_norm_block(n);
    ggml_cuda_launch(ctx, k_rms_norm<float, true, false, true>, dim3((unsigned)rows), dim3(bs), 0,
                     (const char *)x->data, (const char *)w->data, (char *)mul->data, cuda_shape_of(x),
                     cuda_shape_of(w), cuda_shape_of(mul), ggml_get_op_params_f32(norm, 0), nullptr, nullptr, nullptr,
                     xw, (int)ggml_cuda_mmw_nt(rows));
    return xw;
}

// s = x + y (written: the residual stream has other users); out = s / rms(s) * w. f32, contiguous
// rows of n; w one row of n. One block per row.
static __global__ void k_add_rms_norm_mul(const float * x, const float * y, float * s, const float * w, float * out,
                                          int n, float eps) {
    __shared__ float s_tmp[32];
    pdl_start();
    const int64_t off = (int64_t)blockIdx.x * n;
    float sum = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        const float v = x[off + i] + y[off + i];
        s[off + i] = v;
        sum += v * v;
    }
    sum = block_sum(sum, s_tmp);
    const float scale = rsqrtf(sum / n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x)
        out[off + i] = s[off + i] * scale * w[i]; // s: this thread's own writes
}

// the same with float4 loads held in registers (n % 4 == 0, n/4 <= 4 * blockDim): every load of the
// row is issued before the one reduction. Q8 (n % 32 == 0): out also quantized to the split q8 layout
// (quantize.cuh): qs [rows * n] int8, qd [rows * n/32] f32; blockDim % 32 == 0, so float4 i of lane l has
// i % 32 == l and the 8 lanes 8j..8j+7 hold one 32-value block (i / 8). W16 (rows = the wgmma GEMM's N columns): out
// also in the GEMM's f16 order at xw (mmw-order.cuh).
template <bool Q8, bool W16 = false>
static __global__ void k_add_rms_norm_mul4(const float4 * x, const float4 * y, float4 * s, const float4 * w,
                                           float4 * out, int n4, float eps, char4 * qs, float * qd, int * qsum,
                                           half * xw, int nt) {
    __shared__ float s_tmp[32];
    pdl_trigger();
    const int64_t off = (int64_t)blockIdx.x * n4;
    float4 v[4], g[4];
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n4) g[k] = w[i]; // the norm weight: before pdl_wait (common.cuh)
    }
    pdl_wait();
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        if (i < n4) {
            const float4 a = x[off + i], b = y[off + i];
            v[k] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
            sum += v[k].x * v[k].x + v[k].y * v[k].y + v[k].z * v[k].z + v[k].w * v[k].w;
        }
    }
    sum = block_sum(sum, s_tmp);
    const float scale = rsqrtf(sum / (4 * n4) + eps);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const int i = threadIdx.x + k * blockDim.x;
        float4 o = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < n4) {
            s[off + i] = v[k];
            o = make_float4(v[k].x * scale * g[k].x, v[k].y * scale * g[k].y, v[k].z * scale * g[k].z,
                            v[k].w * scale * g[k].w);
            out[off + i] = o;
            if (W16) {
                mmw_put2(xw, nt, (int)gridDim.x, (int)blockIdx.x, 4 * i, o.x, o.y);
                mmw_put2(xw, nt, (int)gridDim.x, (int)blockIdx.x, 4 * i + 2, o.z, o.w);
            }
        }
        if (Q8) { // every thread of the block runs this (past the row: o = 0, n4 % 8 == 0 keeps groups whole)
            float amax = fmaxf(fmaxf(fabsf(o.x), fabsf(o.y)), fmaxf(fabsf(o.z), fabsf(o.w)));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 1));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 2));
            amax = fmaxf(amax, __shfl_xor_sync(0xffffffff, amax, 4));
            const float sc = q8s_scale(amax);
            const char4 q = make_char4(q8s_quant(o.x, amax, sc), q8s_quant(o.y, amax, sc), q8s_quant(o.z, amax, sc),
                                       q8s_quant(o.w, amax, sc));
            // half-block sums: lanes 8j..8j+3 hold quants 0..15 of block j, lanes 8j+4..8j+7 quants 16..31
            int sm = (int)q.x + (int)q.y + (int)q.z + (int)q.w;
            sm += __shfl_xor_sync(0xffffffff, sm, 1);
            sm += __shfl_xor_sync(0xffffffff, sm, 2);
            const int sm_hi = __shfl_xor_sync(0xffffffff, sm, 4);
            if (i < n4) {
                qs[off + i] = q;
                if (i % 8 == 0) { // row * n/32 + block
                    qd[off / 8 + i / 8] = sc;
                    qsum[off / 8 + i / 8] = (sm & 0xffff) | (sm_hi << 16);
                }
            }
        }
    }
}

bool ggml_cuda_add_rms_norm_mul_ok(const ggml_tensor * add, const ggml_tensor * norm, const ggml_tensor * mul) {
    const ggml_tensor * x = add->src[0], * y = add->src[1], * w = mul->src[1];
    auto f32c = [](const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && ggml_is_contiguous(t); };
    return f32c(add) && f32c(x) && f32c(y) && f32c(norm) && f32c(mul) && f32c(w) && ggml_are_same_shape(x, y) &&
           ggml_are_same_shape(add, x) && ggml_are_same_shape(norm, add) && ggml_are_same_shape(mul, norm) &&
           w->ne[0] == add->ne[0] && ggml_nrows(w) == 1 && add->ne[0] <= INT32_MAX;
}

// q8: also write the q8s copy of mul's result (pool memory, returned) when the vector kernel runs and
// ne0 % 32 == 0; w16: the wgmma GEMM's f16 order of it (ggml_cuda_mmw_order_ok); nullptr where not written
static void * add_rms_norm_mul(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm, ggml_tensor * mul,
                               bool q8, bool w16 = false) {
    GGML_ASSERT(ggml_cuda_add_rms_norm_mul_ok(add, norm, mul) && norm->src[0] == add && mul->src[0] == norm);
    const int64_t rows = ggml_nrows(add);
    if (rows == 0) return nullptr;
    const int n = (int)add->ne[0];
    const float eps = ggml_get_op_params_f32(norm, 0);
    const ggml_tensor * x = add->src[0], * y = add->src[1], * w = mul->src[1];
    bool vec = n % 4 == 0 && n / 4 <= 4 * 1024;
    for (const ggml_tensor * t : {x, y, w, (const ggml_tensor *)add, (const ggml_tensor *)mul})
        vec = vec && (uintptr_t)t->data % 16 == 0;
    if (vec) {
        const int n4 = n / 4;
        int bs = (int)cuda_ceil_div(n4, 4);
        bs = bs < 128 ? 128 : (int)cuda_ceil_div(bs, 32) * 32;
        void * q = nullptr;
        if (q8 && n % 32 == 0) {
            q = ctx.pool.alloc(ggml_cuda_q8s_size(rows, n));
            const q8s_view v = q8s_view_of(q, rows, n);
            ggml_cuda_launch(ctx, k_add_rms_norm_mul4<true>, dim3((unsigned)rows), dim3(bs), 0, (const float4 *)x->data,
                             (const float4 *)y->data, (float4 *)add->data, (const float4 *)w->data, (float4 *)mul->data,
                             n4, eps, (char4 *)v.qs, v.d, v.s, nullptr, 0);
        } else if (w16 && ggml_cuda_mmw_order_ok(mul)) {
            half * xw = ggml_cuda_mmw_order_alloc(ctx, mul);
            ggml_cuda_launch(ctx, k_add_rms_norm_mul4<false, true>, dim3((unsigned)rows), dim3(bs), 0,
                             (const float4 *)x->data, (const float4 *)y->data, (float4 *)add->data,
                             (const float4 *)w->data, (float4 *)mul->data, n4, eps, nullptr, nullptr, nullptr, xw,
                             (int)ggml_cuda_mmw_nt(rows));
            q = xw;
        } else {
            ggml_cuda_launch(ctx, k_add_rms_norm_mul4<false>, dim3((unsigned)rows), dim3(bs), 0,
                             (const float4 *)x->data, (const float4 *)y->data, (float4 *)add->data,
                             (const float4 *)w->data, (float4 *)mul->data, n4, eps, nullptr, nullptr, nullptr, nullptr,
                             0);
        }
        return q;
    }
    const int bs = n >= 2048 ? 512 : n >= 256 ? 256 : 32;
    ggml_cuda_launch(ctx, k_add_rms_norm_mul, dim3((unsigned)rows), dim3(bs), 0, (const float *)x->data,
                     (const float *)y->data, (float *)add->data, (const float *)w->data, (float *)mul->data, n, eps);
    return nullptr;
}

void ggml_cuda_op_add_rms_norm_mul(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm, ggml_tensor * mul) {
    add_rms_norm_mul(ctx, add, norm, mul, false);
}

void * ggml_cuda_op_add_rms_norm_mul_q8(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm,
                                        ggml_tensor * mul) {
    return add_rms_norm_mul(ctx, add, norm, mul, true);
}

half * ggml_cuda_op_add_rms_norm_mul_w16(ggml_cuda_context & ctx, ggml_tensor * add, ggml_tensor * norm,
                                         ggml_tensor * mul) {
    return (half *)add_rms_norm_mul(ctx, add, norm, mul, false, true);
}
