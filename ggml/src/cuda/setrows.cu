// setrows.cu - see setrows.cuh. Grid: x over element chunks of a row, y strides over the source rows.
#include "setrows.cuh"

template <typename T>
static __global__ void k_set_rows(const char * src, const int32_t * idx, char * dst, cuda_shape ss, cuda_shape ds) {
    pdl_start();
    const int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i0 >= ss.ne[0]) return;
    for (int64_t rr = blockIdx.y; rr < ss.ne[1] * ss.ne[2] * ss.ne[3]; rr += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(rr, ss.ne[1], ss.ne[2], i1, i2, i3);
        const int64_t row = idx[i1];
        if (row < 0 || row >= ds.ne[1]) continue;
        const float v = *(const float *)(src + i0 * ss.nb[0] + i1 * ss.nb[1] + i2 * ss.nb[2] + i3 * ss.nb[3]);
        *(T *)(dst + i0 * ds.nb[0] + row * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]) = from_f32<T>(v);
    }
}

GGML_CUDA_OP(set_rows) {
    const ggml_tensor * src = dst->src[1];
    const ggml_tensor * idx = dst->src[2];
    GGML_ASSERT(src->type == GGML_TYPE_F32 && idx->type == GGML_TYPE_I32);
    const int64_t rows = ggml_nrows(src);
    if (rows == 0 || src->ne[0] == 0) return;
    const int bs = src->ne[0] >= 256 ? 256 : 64;
    const dim3 grid((unsigned)cuda_ceil_div(src->ne[0], bs), (unsigned)(rows < 65535 ? rows : 65535));
    const cuda_shape ss = cuda_shape_of(src), ds = cuda_shape_of(dst);
    const char * sp = (const char *)src->data;
    const int32_t * ip = (const int32_t *)idx->data;
    char * dp = (char *)dst->data;
    if (dst->type == GGML_TYPE_F32)
        ggml_cuda_launch(ctx, k_set_rows<float>, grid, dim3(bs), 0, sp, ip, dp, ss, ds);
    else if (dst->type == GGML_TYPE_F16)
        ggml_cuda_launch(ctx, k_set_rows<half>, grid, dim3(bs), 0, sp, ip, dp, ss, ds);
    else
        GGML_ABORT("cuda set_rows: unsupported type %s", ggml_type_name(dst->type));
}
