// norm.cu - see norm.cuh. One block per row; warp shuffles then a shared-memory pass.
#include "norm.cuh"

// y = x / sqrt(mean(x^2) + eps) [* w] ; w (f32) repeats over x like ggml_mul's b
template <typename T, bool HAS_W>
static __global__ void k_rms_norm(const char * x, const char * w, char * y, cuda_shape xs, cuda_shape ws, cuda_shape ys,
                                  float eps) {
    __shared__ float s_tmp[32];
    int64_t r = blockIdx.x;
    const int64_t i1 = r % xs.ne[1];
    r /= xs.ne[1];
    const int64_t i2 = r % xs.ne[2];
    const int64_t i3 = r / xs.ne[2];
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
    }
}

static void rms_norm(ggml_cuda_context & ctx, const ggml_tensor * x, const ggml_tensor * w, ggml_tensor * y,
                     float eps) {
    const int64_t rows = ggml_nrows(x);
    if (rows == 0) return;
    const int bs = x->ne[0] >= 1024 ? 1024 : x->ne[0] >= 256 ? 256 : 32;
    const cuda_shape xs = cuda_shape_of(x), ys = cuda_shape_of(y), ws = w ? cuda_shape_of(w) : xs;
    const char * xp = (const char *)x->data;
    const char * wp = w ? (const char *)w->data : nullptr;
    if (x->type == GGML_TYPE_F32) {
        if (w)
            k_rms_norm<float, true><<<rows, bs, 0, ctx.stream>>>(xp, wp, (char *)y->data, xs, ws, ys, eps);
        else
            k_rms_norm<float, false><<<rows, bs, 0, ctx.stream>>>(xp, wp, (char *)y->data, xs, ws, ys, eps);
    } else {
        if (w)
            k_rms_norm<half, true><<<rows, bs, 0, ctx.stream>>>(xp, wp, (char *)y->data, xs, ws, ys, eps);
        else
            k_rms_norm<half, false><<<rows, bs, 0, ctx.stream>>>(xp, wp, (char *)y->data, xs, ws, ys, eps);
    }
    CUDA_CHECK_LAUNCH();
}

GGML_CUDA_OP(rms_norm) {
    GGML_ASSERT(dst->src[0]->type == dst->type);
    rms_norm(ctx, dst->src[0], nullptr, dst, ggml_get_op_params_f32(dst, 0));
}

void ggml_cuda_op_rms_norm_mul(ggml_cuda_context & ctx, ggml_tensor * norm, ggml_tensor * mul) {
    GGML_ASSERT(mul->src[0] == norm && mul->type == norm->type && mul->src[1]->type == GGML_TYPE_F32);
    rms_norm(ctx, norm->src[0], mul->src[1], mul, ggml_get_op_params_f32(norm, 0));
}
