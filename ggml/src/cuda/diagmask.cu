// diagmask.cu - see diagmask.cuh. One block per row.
#include "diagmask.cuh"

template <typename T>
static __global__ void k_diag_mask_inf(const char * x, char * y, cuda_shape xs, cuda_shape ys, int n_past) {
    int64_t i1, i2, i3;
    unravel_row(blockIdx.x, xs.ne[1], xs.ne[2], i1, i2, i3);
    const char * xr = x + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3];
    char * yr = y + i1 * ys.nb[1] + i2 * ys.nb[2] + i3 * ys.nb[3];
    for (int64_t i = threadIdx.x; i < xs.ne[0]; i += blockDim.x) {
        const T v = *(const T *)(xr + i * xs.nb[0]);
        *(T *)(yr + i * ys.nb[0]) = i > n_past + i1 ? from_f32<T>(-INFINITY) : v;
    }
}

GGML_CUDA_OP(diag_mask_inf) {
    const ggml_tensor * x = dst->src[0];
    GGML_ASSERT(x->type == dst->type);
    const int64_t rows = ggml_nrows(x);
    if (rows == 0) return;
    const int n_past = ggml_get_op_params_i32(dst, 0);
    const int bs = x->ne[0] >= 256 ? 128 : 32;
    if (x->type == GGML_TYPE_F32)
        k_diag_mask_inf<float><<<rows, bs, 0, ctx.stream>>>((const char *)x->data, (char *)dst->data, cuda_shape_of(x),
                                                            cuda_shape_of(dst), n_past);
    else
        k_diag_mask_inf<half><<<rows, bs, 0, ctx.stream>>>((const char *)x->data, (char *)dst->data, cuda_shape_of(x),
                                                           cuda_shape_of(dst), n_past);
    CUDA_CHECK_LAUNCH();
}
