// quantize.cuh - activations f32 (any strides) -> q8_1 rows on the GPU, for the q8_0 mat-vec.
#pragma once
#include "common.cuh"

// x: f32 [K, N, B2, B3] (K % 32 == 0) -> y: contiguous q8_1, row (i1, i2, i3) at ((i3*B2 + i2)*N + i1) * K/32.
void ggml_cuda_quantize_q8_1(ggml_cuda_context & ctx, const ggml_tensor * x, cuda_block_q8_1 * y);

// Split layout for the quantized-weight mat-vecs (mmvq.cuh, mmvq-t.cuh): qs [nrows * K] int8 (row r at r*K,
// rows in the same order as above), then d [nrows * K/32] f32, then s [nrows * K/32] int32: the sums of each
// block's quants, two int16 (low half: quants 0..15, high half: quants 16..31; the min / offset terms of
// q4_0 ... q6_K; the q8_0 kernels do not read them). Size: ggml_cuda_q8s_size(); pointers: q8s_view.
inline size_t ggml_cuda_q8s_size(int64_t nrows, int64_t K) { return (size_t)(nrows * K + nrows * (K / 32) * 8); }
void ggml_cuda_quantize_q8s(ggml_cuda_context & ctx, const ggml_tensor * x, void * y);

struct q8s_view {
    int8_t * qs;
    float * d;
    int * s;
};
inline q8s_view q8s_view_of(void * y, int64_t nrows, int64_t K) {
    int8_t * qs = (int8_t *)y;
    float * d = (float *)(qs + nrows * K);
    return {qs, d, (int *)(d + nrows * (K / 32))};
}

// The rounding of one split-layout block (amax = max |v| over its 32 values), shared by k_quantize_q8s and
// the fused norm kernels (norm.cu) so both write the same bytes. IEEE divisions (__fdiv_rn): fast-math
// cannot turn them into different approximations in different kernels.
static __device__ __forceinline__ float q8s_scale(float amax) { return __fdiv_rn(amax, 127.0f); }
static __device__ __forceinline__ int8_t q8s_quant(float v, float amax, float s) {
    return (int8_t)(amax == 0.0f ? 0 : (int)roundf(__fdiv_rn(v, s)));
}

// The packed half-block sums of one block whose 32 quants are held one per lane of a warp (quant l in lane l):
// every lane must call; the result is valid in every lane.
static __device__ __forceinline__ int q8s_block_sums(int q, int lane) {
#pragma unroll
    for (int o = 1; o < 16; o <<= 1)
        q += __shfl_xor_sync(0xffffffff, q, o);
    const int hi = __shfl_xor_sync(0xffffffff, q, 16);
    const bool low = lane < 16;
    return ((low ? q : hi) & 0xffff) | ((low ? hi : q) << 16);
}

// One split-layout block held one value per lane (v in lane l: value l of the block): its 32 quants to qs, and from
// lane 0 its scale to *d and its packed half-block sums to *sums. Every lane of the warp must call. st false: the
// same instructions, nothing stored.
static __device__ __forceinline__ void q8s_quantize_block(float v, int lane, int8_t * qs, float * d, int * sums,
                                                          bool st = true) {
    const float amax = warp_max(fabsf(v));
    const float s = q8s_scale(amax);
    const int8_t q = q8s_quant(v, amax, s);
    if (st) qs[lane] = q;
    const int sm = q8s_block_sums(q, lane);
    if (lane == 0 && st) {
        *d = s;
        *sums = sm;
    }
}
