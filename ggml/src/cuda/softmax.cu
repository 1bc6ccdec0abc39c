// softmax.cu - see softmax.cuh. Rows of up to 1024 values: a warp per row, values in registers; longer rows: one
// block per row (max pass, sum pass, write pass).
#include "softmax.cuh"

template <typename TM, typename TY>
static __global__ void k_soft_max(const char * x, const char * mask, char * y, cuda_shape xs, cuda_shape ms,
                                  cuda_shape ys, float scale, int n_past) {
    pdl_start();
    __shared__ float s_tmp[32];
    int64_t i1, i2, i3;
    unravel_row(blockIdx.x, xs.ne[1], xs.ne[2], i1, i2, i3);
    const char * xr = x + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    const char * mr = mask ? mask + i1 * ms.nb[1] + (i2 % ms.ne[2]) * ms.nb[2] + (i3 % ms.ne[3]) * ms.nb[3] : nullptr;
    char * yr = y + i1 * ys.nb[1] + i2 * ys.nb[2] + i3 * ys.nb[3];
    const int64_t n = xs.ne[0];
    // visible columns: all, or i0 <= n_past + i1
    const int64_t n_vis = n_past >= 0 ? min(n, (int64_t)n_past + i1 + 1) : n;
    auto val = [&](int64_t i) {
        float v = *(const float *)(xr + i * xs.nb[0]) * scale;
        if (mr) v += to_f32<TM>(*(const TM *)(mr + i * ms.nb[0]));
        return v;
    };
    float mx = -INFINITY;
    for (int64_t i = threadIdx.x; i < n_vis; i += blockDim.x)
        mx = fmaxf(mx, val(i));
    mx = block_max(mx, s_tmp);
    float sum = 0.0f;
    if (mx != -INFINITY)
        for (int64_t i = threadIdx.x; i < n_vis; i += blockDim.x)
            sum += expf(val(i) - mx);
    sum = block_sum(sum, s_tmp);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        const float p = i < n_vis && mx != -INFINITY ? expf(val(i) - mx) * inv : 0.0f;
        *(TY *)(yr + i * ys.nb[0]) = from_f32<TY>(p);
    }
}

// Rows of at most 32 * NPL values: a warp per row, the row's values held in registers (one pass over x and the
// mask, shuffles only). The block-per-row kernel above, for the prompt's attention scores (16384 rows of 512),
// ran 7.8 waves of three dependent passes and two block reductions each: 54 us per layer on an H200 (ncu).
template <typename TM, typename TY, int NPL>
static __global__ void __launch_bounds__(128)
    k_soft_max_warp(const char * x, const char * mask, char * y, cuda_shape xs, cuda_shape ms, cuda_shape ys,
                    float scale, int n_past, int64_t rows) {
    pdl_start();
    const int lane = threadIdx.x % 32;
    const int64_t r = (int64_t)blockIdx.x * 4 + threadIdx.x / 32;
    if (r >= rows) return;
    int64_t i1, i2, i3;
    unravel_row(r, xs.ne[1], xs.ne[2], i1, i2, i3);
    const char * xr = x + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    const char * mr = mask ? mask + i1 * ms.nb[1] + (i2 % ms.ne[2]) * ms.nb[2] + (i3 % ms.ne[3]) * ms.nb[3] : nullptr;
    char * yr = y + i1 * ys.nb[1] + i2 * ys.nb[2] + i3 * ys.nb[3];
    const int n = (int)xs.ne[0];
    const int n_vis = n_past >= 0 ? (int)min((int64_t)n, (int64_t)n_past + i1 + 1) : n; // as k_soft_max
    float v[NPL];
    float mx = -INFINITY;
#pragma unroll
    for (int k = 0; k < NPL; ++k) {
        const int i = lane + 32 * k;
        v[k] = -INFINITY;
        if (i < n_vis) {
            v[k] = *(const float *)(xr + i * xs.nb[0]) * scale;
            if (mr) v[k] += to_f32<TM>(*(const TM *)(mr + i * ms.nb[0]));
        }
        mx = fmaxf(mx, v[k]);
    }
    mx = warp_max(mx);
    float sum = 0.0f;
#pragma unroll
    for (int k = 0; k < NPL; ++k) {
        v[k] = mx == -INFINITY || v[k] == -INFINITY ? 0.0f : expf(v[k] - mx);
        sum += v[k];
    }
    sum = warp_sum(sum);
    const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
#pragma unroll
    for (int k = 0; k < NPL; ++k) {
        const int i = lane + 32 * k;
        if (i < n) *(TY *)(yr + i * ys.nb[0]) = from_f32<TY>(v[k] * inv);
    }
}

template <typename TM, typename TY>
static void soft_max_launch(ggml_cuda_context & ctx, const char * x, const char * mask, char * y, const cuda_shape & xs,
                            const cuda_shape & ms, const cuda_shape & ys, float scale, int n_past, int64_t rows) {
    const int64_t n = xs.ne[0];
    const dim3 gw((unsigned)cuda_ceil_div(rows, 4));
    if (n <= 128)
        ggml_cuda_launch(ctx, k_soft_max_warp<TM, TY, 4>, gw, dim3(128), 0, x, mask, y, xs, ms, ys, scale, n_past,
                         rows);
    else if (n <= 256)
        ggml_cuda_launch(ctx, k_soft_max_warp<TM, TY, 8>, gw, dim3(128), 0, x, mask, y, xs, ms, ys, scale, n_past,
                         rows);
    else if (n <= 512)
        ggml_cuda_launch(ctx, k_soft_max_warp<TM, TY, 16>, gw, dim3(128), 0, x, mask, y, xs, ms, ys, scale, n_past,
                         rows);
    else if (n <= 1024)
        ggml_cuda_launch(ctx, k_soft_max_warp<TM, TY, 32>, gw, dim3(128), 0, x, mask, y, xs, ms, ys, scale, n_past,
                         rows);
    else
        ggml_cuda_launch(ctx, k_soft_max<TM, TY>, dim3((unsigned)rows), dim3(n >= 1024 ? 512 : 128), 0, x, mask, y, xs,
                         ms, ys, scale, n_past);
}

void ggml_cuda_soft_max_rows(ggml_cuda_context & ctx, const char * x, const cuda_shape & xs, const char * mask,
                             ggml_type mask_type, const cuda_shape & ms, char * y, ggml_type y_type,
                             const cuda_shape & ys, float scale, int n_past) {
    const int64_t rows = xs.ne[1] * xs.ne[2] * xs.ne[3];
    if (rows == 0) return;
    const bool mh = mask && mask_type == GGML_TYPE_F16, yh = y_type == GGML_TYPE_F16;
#define SOFT_MAX(TM, TY) soft_max_launch<TM, TY>(ctx, x, mask, y, xs, ms, ys, scale, n_past, rows)
    if (mh && yh)
        SOFT_MAX(half, half);
    else if (mh)
        SOFT_MAX(half, float);
    else if (yh)
        SOFT_MAX(float, half);
    else
        SOFT_MAX(float, float);
#undef SOFT_MAX
}

GGML_CUDA_OP(soft_max) {
    const ggml_tensor * x = dst->src[0];
    const ggml_tensor * mask = dst->src[1];
    GGML_ASSERT(x->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_F32);
    const cuda_shape xs = cuda_shape_of(x);
    ggml_cuda_soft_max_rows(ctx, (const char *)x->data, xs, mask ? (const char *)mask->data : nullptr,
                            mask ? mask->type : GGML_TYPE_F32, mask ? cuda_shape_of(mask) : xs, (char *)dst->data,
                            GGML_TYPE_F32, cuda_shape_of(dst), ggml_get_op_params_f32(dst, 0),
                            ggml_get_op_params_i32(dst, 1));
}
