// quantize.cu - see quantize.cuh. One warp per 32-value block, one lane per value.
#include "quantize.cuh"

static __global__ void k_quantize_q8_1(const char * x, cuda_block_q8_1 * y, cuda_shape xs, int64_t nblk_total) {
    pdl_start();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int l = threadIdx.x % 32;
    if (b >= nblk_total) return;
    int64_t r, i0, i1, i2, i3;
    divmod(b, xs.ne[0] / 32, r, i0); // row, block of the row
    i0 = i0 * 32 + l;
    unravel_row(r, xs.ne[1], xs.ne[2], i1, i2, i3);
    const float v = *(const float *)(x + i0 * xs.nb[0] + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3]);
    const float amax = warp_max(fabsf(v));
    const float d = amax / 127.0f;
    const int q = amax == 0.0f ? 0 : (int)roundf(v / d);
    const float sum = warp_sum((float)q);
    y[b].qs[l] = (int8_t)q;
    if (l == 0) y[b].ds = make_half2(__float2half_rn(d), __float2half_rn(d * sum));
}

void ggml_cuda_quantize_q8_1(ggml_cuda_context & ctx, const ggml_tensor * x, cuda_block_q8_1 * y) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->ne[0] % 32 == 0);
    const int64_t nblk = ggml_nelements(x) / 32;
    if (nblk == 0) return;
    const int bs = 256;
    ggml_cuda_launch(ctx, k_quantize_q8_1, dim3((unsigned)cuda_ceil_div(nblk, bs / 32)), dim3(bs), 0,
                     (const char *)x->data, y, cuda_shape_of(x), nblk);
}

// split layout: lane l writes quant l of block b; lane 0 the f32 scale
static __global__ void k_quantize_q8s(const char * x, int8_t * qs, float * d, int * sums, cuda_shape xs,
                               int64_t nblk_total) {
    pdl_start();
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int l = threadIdx.x % 32;
    if (b >= nblk_total) return;
    int64_t r, i0, i1, i2, i3;
    divmod(b, xs.ne[0] / 32, r, i0); // row, block of the row
    i0 = i0 * 32 + l;
    unravel_row(r, xs.ne[1], xs.ne[2], i1, i2, i3);
    const float v = *(const float *)(x + i0 * xs.nb[0] + i1 * xs.nb[1] + i2 * xs.nb[2] + i3 * xs.nb[3]);
    q8s_quantize_block(v, l, qs + b * 32, d + b, sums + b);
}

void ggml_cuda_quantize_q8s(ggml_cuda_context & ctx, const ggml_tensor * x, void * y) {
    GGML_ASSERT(x->type == GGML_TYPE_F32 && x->ne[0] % 32 == 0);
    const int64_t n = ggml_nelements(x), nblk = n / 32;
    if (nblk == 0) return;
    const int bs = 256;
    const q8s_view v = q8s_view_of(y, ggml_nrows(x), x->ne[0]);
    ggml_cuda_launch(ctx, k_quantize_q8s, dim3((unsigned)cuda_ceil_div(nblk, bs / 32)), dim3(bs), 0,
                     (const char *)x->data, v.qs, v.d, v.s, cuda_shape_of(x), nblk);
}
