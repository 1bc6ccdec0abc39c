// binary.cu - see binary.cuh. Grid: x over ne0 (so a single long row fills the GPU), y over rows.
#include "binary.cuh"

template <typename T, bool IS_ADD>
static __global__ void k_binary(const char * a, const char * b, char * d, cuda_shape as, cuda_shape bs, cuda_shape ds) {
    pdl_start();
    for (int64_t rr = blockIdx.y; rr < (int64_t)ds.ne[1] * ds.ne[2] * ds.ne[3]; rr += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(rr, ds.ne[1], ds.ne[2], i1, i2, i3);
        const char * ar = a + i1 * as.nb[1] + i2 * as.nb[2] + i3 * as.nb[3];
        const char * br = b + (i1 % bs.ne[1]) * bs.nb[1] + (i2 % bs.ne[2]) * bs.nb[2] + (i3 % bs.ne[3]) * bs.nb[3];
        char * dr = d + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3];
        for (int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < ds.ne[0];
             i0 += (int64_t)gridDim.x * blockDim.x) {
            const float x = to_f32<T>(*(const T *)(ar + i0 * as.nb[0]));
            const float y = *(const float *)(br + (bs.ne[0] == ds.ne[0] ? i0 : i0 % bs.ne[0]) * bs.nb[0]);
            *(T *)(dr + i0 * ds.nb[0]) = from_f32<T>(IS_ADD ? x + y : x * y);
        }
    }
}

template <bool IS_ADD> static void binary(ggml_cuda_context & ctx, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(b->type == GGML_TYPE_F32 && a->type == dst->type);
    const int64_t rows = ggml_nrows(dst);
    if (rows == 0 || dst->ne[0] == 0) return;
    const int bsz = dst->ne[0] >= 256 ? 256 : dst->ne[0] >= 128 ? 128 : 32;
    if (a->type == GGML_TYPE_F32) {
        ggml_cuda_launch(ctx, k_binary<float, IS_ADD>, ew_grid(dst->ne[0], rows, bsz), dim3(bsz), 0,
            (const char *)a->data, (const char *)b->data, (char *)dst->data, cuda_shape_of(a), cuda_shape_of(b),
            cuda_shape_of(dst));
    } else {
        ggml_cuda_launch(ctx, k_binary<half, IS_ADD>, ew_grid(dst->ne[0], rows, bsz), dim3(bsz), 0,
            (const char *)a->data, (const char *)b->data, (char *)dst->data, cuda_shape_of(a), cuda_shape_of(b),
            cuda_shape_of(dst));
    }
}

GGML_CUDA_OP(add) { binary<true>(ctx, dst); }
GGML_CUDA_OP(mul) { binary<false>(ctx, dst); }
