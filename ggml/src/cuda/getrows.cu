// getrows.cu - see getrows.cuh. One block per output row.
#include "getrows.cuh"
#include "mmvq.cuh"
#include "q8repack.cuh"

template <typename T> static __device__ __forceinline__ float load_elem(const char * row, int64_t i, int64_t nb0) {
    return to_f32<T>(*(const T *)(row + i * nb0));
}

template <int TYPE> // 0 f32, 1 f16, 2 q8_0, 3 repacked q8_0 (q8repack.cuh)
static __global__ void k_get_rows(const char * src, const char * idx, char * dst, cuda_shape ss, cuda_shape is,
                                  cuda_shape ds) {
    pdl_start();
    int64_t i10, i11, i12;
    unravel_row(blockIdx.x, ds.ne[1], ds.ne[2], i10, i11, i12);
    const int64_t row = *(const int32_t *)(idx + i10 * is.nb[0] + i11 * is.nb[1] + i12 * is.nb[2]);
    const char * sr = src + row * ss.nb[1] + (i11 % ss.ne[2]) * ss.nb[2] + (i12 % ss.ne[3]) * ss.nb[3];
    const int64_t flat = row + ((i11 % ss.ne[2]) + (i12 % ss.ne[3]) * ss.ne[2]) * ss.ne[1]; // repacked row
    const half * rd = (const half *)(src + ss.ne[0] * ss.ne[1] * ss.ne[2] * ss.ne[3]) + flat * (ss.ne[0] / 32);
    char * dr = dst + i10 * ds.nb[1] + i11 * ds.nb[2] + i12 * ds.nb[3];
    for (int64_t i = threadIdx.x; i < ds.ne[0]; i += blockDim.x) {
        float v;
        if (TYPE == 0)
            v = load_elem<float>(sr, i, ss.nb[0]);
        else if (TYPE == 1)
            v = load_elem<half>(sr, i, ss.nb[0]);
        else if (TYPE == 3)
            v = __half2float(rd[i / 32]) * (float)((const int8_t *)src)[flat * ss.ne[0] + i];
        else {
            const cuda_block_q8_0 * b = (const cuda_block_q8_0 *)(sr + (i / 32) * ss.nb[0]);
            v = __half2float(b->d) * b->qs[i % 32];
        }
        *(float *)(dr + i * ds.nb[0]) = v;
    }
}

GGML_CUDA_OP(get_rows) {
    const ggml_tensor * src = dst->src[0];
    const ggml_tensor * idx = dst->src[1];
    GGML_ASSERT(idx->type == GGML_TYPE_I32 && dst->type == GGML_TYPE_F32);
    const int64_t rows = dst->ne[1] * dst->ne[2] * dst->ne[3];
    if (rows == 0) return;
    const int bs = dst->ne[0] >= 1024 ? 256 : 64;
    const cuda_shape ss = cuda_shape_of(src), is = cuda_shape_of(idx), ds = cuda_shape_of(dst);
    const char * sp = (const char *)src->data;
    const char * ip = (const char *)idx->data;
    char * dp = (char *)dst->data;
    switch (src->type) {
        case GGML_TYPE_F32:
            ggml_cuda_launch(ctx, k_get_rows<0>, dim3((unsigned)rows), dim3(bs), 0, sp, ip, dp, ss, is, ds);
            break;
        case GGML_TYPE_F16:
            ggml_cuda_launch(ctx, k_get_rows<1>, dim3((unsigned)rows), dim3(bs), 0, sp, ip, dp, ss, is, ds);
            break;
        case GGML_TYPE_Q8_0:
            if (ggml_cuda_q8_repacked(src)) {
                ggml_cuda_launch(ctx, k_get_rows<3>, dim3((unsigned)rows), dim3(bs), 0, sp, ip, dp, ss, is, ds);
                break;
            }
            ggml_cuda_launch(ctx, k_get_rows<2>, dim3((unsigned)rows), dim3(bs), 0, sp, ip, dp, ss, is, ds);
            break;
        default:
            if (const ggml_cuda_qt_fns * qt = ggml_cuda_qt(src->type)) {
                qt->get_rows(ctx, dst);
                break;
            }
            GGML_ABORT("cuda get_rows: unsupported type %s", ggml_type_name(src->type));
    }
}
