// setrows.cu - see setrows.cuh. f32/f16 rows: grid x over element chunks of a row, y strides over the source rows.
// q8_0/q4_0 rows: one warp per 32-value block (kvq_quantize, cpy.cuh), 8 warps per thread block.
#include "cpy.cuh"
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

// block b (flat over the source's rows: nblk_row blocks per row) of source row (i1, i2, i3) into its cell row
template <ggml_type TYPE>
static __global__ void k_set_rows_q(const char * src, const int32_t * idx, char * dst, cuda_shape ss, cuda_shape ds,
                                    int64_t nblk_row, int64_t nblk) {
    pdl_start();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int lane = threadIdx.x % 32;
    if (b >= nblk) return; // whole warps
    int64_t rr, ib, i1, i2, i3;
    divmod(b, nblk_row, rr, ib);
    unravel_row(rr, ss.ne[1], ss.ne[2], i1, i2, i3);
    const int64_t row = idx[i1];
    if (row < 0 || row >= ds.ne[1]) return; // the same row for the whole warp
    const float x = *(const float *)(src + (ib * 32 + lane) * ss.nb[0] + i1 * ss.nb[1] + i2 * ss.nb[2] + i3 * ss.nb[3]);
    kvq_quantize<TYPE>(x, lane, dst + ib * ds.nb[0] + row * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3]);
}

GGML_CUDA_OP(set_rows) {
    const ggml_tensor * src = dst->src[1];
    const ggml_tensor * idx = dst->src[2];
    GGML_ASSERT(src->type == GGML_TYPE_F32 && idx->type == GGML_TYPE_I32);
    const int64_t rows = ggml_nrows(src);
    if (rows == 0 || src->ne[0] == 0) return;
    const cuda_shape ss = cuda_shape_of(src), ds = cuda_shape_of(dst);
    const char * sp = (const char *)src->data;
    const int32_t * ip = (const int32_t *)idx->data;
    char * dp = (char *)dst->data;
    if (ggml_cuda_is_kvq(dst->type)) {
        GGML_ASSERT(ggml_cuda_kvq_rows_ok(dst) && "cuda set_rows: a q8_0/q4_0 destination needs dense rows of blocks");
        const int64_t nblk_row = src->ne[0] / 32, nblk = nblk_row * rows;
        const dim3 grid((unsigned)cuda_ceil_div(nblk, 8));
        if (dst->type == GGML_TYPE_Q8_0)
            ggml_cuda_launch(ctx, k_set_rows_q<GGML_TYPE_Q8_0>, grid, dim3(256), 0, sp, ip, dp, ss, ds, nblk_row, nblk);
        else
            ggml_cuda_launch(ctx, k_set_rows_q<GGML_TYPE_Q4_0>, grid, dim3(256), 0, sp, ip, dp, ss, ds, nblk_row, nblk);
        return;
    }
    const int bs = src->ne[0] >= 256 ? 256 : 64;
    const dim3 grid((unsigned)cuda_ceil_div(src->ne[0], bs), (unsigned)(rows < 65535 ? rows : 65535));
    if (dst->type == GGML_TYPE_F32)
        ggml_cuda_launch(ctx, k_set_rows<float>, grid, dim3(bs), 0, sp, ip, dp, ss, ds);
    else if (dst->type == GGML_TYPE_F16)
        ggml_cuda_launch(ctx, k_set_rows<half>, grid, dim3(bs), 0, sp, ip, dp, ss, ds);
    else
        GGML_ABORT("cuda set_rows: unsupported type %s", ggml_type_name(dst->type));
}
