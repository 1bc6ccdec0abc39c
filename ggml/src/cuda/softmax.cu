// softmax.cu - see softmax.cuh. One block per row: max pass, sum pass, write pass.
#include "softmax.cuh"

template <typename TM, typename TY>
static __global__ void k_soft_max(const char * x, const char * mask, char * y, cuda_shape xs, cuda_shape ms,
                                  cuda_shape ys, float scale, int n_past) {
    pdl_start();
    __shared__ float s_tmp[32];
    int64_t r = blockIdx.x;
    const int64_t i1 = r % xs.ne[1];
    r /= xs.ne[1];
    const int64_t i2 = r % xs.ne[2];
    const int64_t i3 = r / xs.ne[2];
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

void ggml_cuda_soft_max_rows(ggml_cuda_context & ctx, const char * x, const cuda_shape & xs, const char * mask,
                             ggml_type mask_type, const cuda_shape & ms, char * y, ggml_type y_type,
                             const cuda_shape & ys, float scale, int n_past) {
    const int64_t rows = xs.ne[1] * xs.ne[2] * xs.ne[3];
    if (rows == 0) return;
    const int bs = xs.ne[0] >= 1024 ? 512 : xs.ne[0] >= 256 ? 128 : 32;
    const bool mh = mask && mask_type == GGML_TYPE_F16, yh = y_type == GGML_TYPE_F16;
#define SOFT_MAX(TM, TY)                                                                                               \
    ggml_cuda_launch(ctx, k_soft_max<TM, TY>, dim3((unsigned)rows), dim3(bs), 0, x, mask, y, xs, ms, ys, scale, n_past)
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
