// rope.cu - see rope.cuh. One block per (head, token) row, one thread per rotated pair.
// Angles are computed in double: positions reach thousands of radians and the fast-math
// sin/cos would lose the phase.
#include "rope.cuh"

template <typename T, bool NEOX>
static __global__ void k_rope(const char * x, const int32_t * pos, const float * ff, char * y, cuda_shape xs,
                              cuda_shape ys, int n_dims, double theta_scale_log2, float freq_scale) {
    int64_t r = blockIdx.x;
    const int64_t i1 = r % xs.ne[1];
    r /= xs.ne[1];
    const int64_t i2 = r % xs.ne[2];
    const int64_t i3 = r / xs.ne[2];
    const char * xr = x + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    char * yr = y + i1 * ys.nb[1] + i2 * ys.nb[2] + i3 * ys.nb[3];
    const double p = (double)pos[i2];
    const int64_t ne0 = xs.ne[0];
    for (int64_t i = threadIdx.x; i < ne0 / 2; i += blockDim.x) {
        int64_t j0, j1;
        if (i < n_dims / 2) {
            j0 = NEOX ? i : 2 * i;
            j1 = NEOX ? i + n_dims / 2 : 2 * i + 1;
            // theta = pos * freq_scale * base^(-2i/n_dims) / ff[i]
            double theta = p * freq_scale * exp2(theta_scale_log2 * (double)i);
            if (ff) theta /= (double)ff[i];
            double sn, cs;
            sincos(theta, &sn, &cs);
            const float x0 = to_f32<T>(*(const T *)(xr + j0 * xs.nb[0]));
            const float x1 = to_f32<T>(*(const T *)(xr + j1 * xs.nb[0]));
            *(T *)(yr + j0 * ys.nb[0]) = from_f32<T>((float)(x0 * cs - x1 * sn));
            *(T *)(yr + j1 * ys.nb[0]) = from_f32<T>((float)(x0 * sn + x1 * cs));
        } else { // pass-through dims [n_dims, ne0)
            j0 = 2 * i;
            j1 = 2 * i + 1;
            *(T *)(yr + j0 * ys.nb[0]) = *(const T *)(xr + j0 * xs.nb[0]);
            *(T *)(yr + j1 * ys.nb[0]) = *(const T *)(xr + j1 * xs.nb[0]);
        }
    }
}

GGML_CUDA_OP(rope) {
    const ggml_tensor * x = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * ff = dst->src[2];
    GGML_ASSERT(x->type == dst->type && pos->type == GGML_TYPE_I32 && ggml_is_contiguous(pos));
    const int n_dims = ggml_get_op_params_i32(dst, 0);
    const int mode = ggml_get_op_params_i32(dst, 1);
    const float base = ggml_get_op_params_f32(dst, 2);
    const float freq_scale = ggml_get_op_params_f32(dst, 3);
    const double theta_scale_log2 = -2.0 / n_dims * log2((double)base);
    const int64_t rows = ggml_nrows(x);
    if (rows == 0) return;
    const int bs = x->ne[0] / 2 >= 64 ? 64 : 32;
    const float * ffp = ff ? (const float *)ff->data : nullptr;
    const cuda_shape xs = cuda_shape_of(x), ys = cuda_shape_of(dst);
#define ROPE_LAUNCH(T, NEOX)                                                                                           \
    k_rope<T, NEOX><<<rows, bs, 0, ctx.stream>>>((const char *)x->data, (const int32_t *)pos->data, ffp,               \
                                                 (char *)dst->data, xs, ys, n_dims, theta_scale_log2, freq_scale)
    const bool neox = mode == GGML_ROPE_TYPE_NEOX;
    if (x->type == GGML_TYPE_F32) {
        if (neox)
            ROPE_LAUNCH(float, true);
        else
            ROPE_LAUNCH(float, false);
    } else {
        if (neox)
            ROPE_LAUNCH(half, true);
        else
            ROPE_LAUNCH(half, false);
    }
#undef ROPE_LAUNCH
    CUDA_CHECK_LAUNCH();
}
