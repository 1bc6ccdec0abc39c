// cpy.cuh - copies with type conversion among f32/f16/q8_0/q4_0, any strides on either side (DUP, CONT, CPY),
// the conversion helper the mat-mul and attention paths use, and the block quantizers of the KV-cache types.
#pragma once
#include "common.cuh"

GGML_CUDA_OP(cpy); // src0 -> dst (dst views src1)
GGML_CUDA_OP(dup); // src0 -> dst (also CONT)

// Copy src (any strides; f32/f16, or q8_0/q4_0 with dense rows of whole blocks) into dst memory laid out with
// `dst_shape` of `dst_type` (element order: src's flat order). q8_0/q4_0 <-> float and a block type into the same
// block type; both row lengths must be multiples of 32 for a block type.
void ggml_cuda_convert(ggml_cuda_context & ctx, const ggml_tensor * src, void * dst, ggml_type dst_type,
                       const cuda_shape & dst_shape);
// Contiguous shape of the given type and ne.
cuda_shape ggml_cuda_contig_shape(ggml_type type, const int64_t * ne);
bool ggml_cuda_cpy_supported(ggml_type src, ggml_type dst, const ggml_tensor * s, const ggml_tensor * d);

// The KV-cache block types q8_0 / q4_0 as a tensor of the CUDA ops (SET_ROWS, CPY, FLASH_ATTN_EXT): dense rows of
// whole blocks (nb[0] = block bytes, ne[0] % 32 == 0).
inline bool ggml_cuda_is_kvq(ggml_type t) { return t == GGML_TYPE_Q8_0 || t == GGML_TYPE_Q4_0; }
inline bool ggml_cuda_kvq_rows_ok(const ggml_tensor * t) {
    return ggml_cuda_is_kvq(t->type) && t->ne[0] % 32 == 0 && t->nb[0] == ggml_type_size(t->type);
}

// ---- q8_0 / q4_0 blocks, quantized by one warp (value l of the block in lane l) ----------------------------------
// Bit-identical to ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref (ggml-quants.cpp, ggml-quants-legacy.cpp;
// the CPU backend's SET_ROWS and CPY use them): the same IEEE operations in the same order. The backend is built with
// --use_fast_math, which makes '/' approximate and flushes subnormals even in __fdiv_rn / __fmul_rn (ptxas emits
// div.rn.ftz), so the divisions, products and sums that decide a quant are written as PTX without .ftz, and the
// absolute max is taken on the bits (for non-negative floats the integer order is the float order). roundf is
// exact as compiled (trunc of an add.rz with copysign(0.5)). The f16 scale: __float2half_rn, round to nearest even
// as ggml_compute_fp32_to_fp16. (NaN inputs are not matched.)
static __device__ __forceinline__ float kvq_div(float a, float b) {
    float r;
    asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
static __device__ __forceinline__ float kvq_mul(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
static __device__ __forceinline__ float kvq_add(float a, float b) {
    float r;
    asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}

// q8_0: d = max|x| / 127, q = roundf(x / d) (as x * (1/d)); blk: the block's 34 bytes (2-byte aligned)
static __device__ __forceinline__ void kvq_quantize_q8_0(float x, int lane, char * blk) {
    const unsigned amax = __reduce_max_sync(0xffffffffu, __float_as_uint(x) & 0x7fffffffu);
    const float d = kvq_div(__uint_as_float(amax), 127.0f);
    const float id = __float_as_uint(d) != 0 ? kvq_div(1.0f, d) : 0.0f;
    blk[2 + lane] = (char)(int8_t)roundf(kvq_mul(x, id));
    if (lane == 0) *(half *)blk = __float2half_rn(d);
}

// q4_0: d = m / -8 with m the first value of the largest magnitude, q = min(15, (int)(x / d + 8.5)); value j < 16 in
// the low nibble of byte j, value j + 16 in its high nibble; blk: the block's 18 bytes (2-byte aligned)
static __device__ __forceinline__ void kvq_quantize_q4_0(float x, int lane, char * blk) {
    const unsigned ax = __float_as_uint(x) & 0x7fffffffu;
    const unsigned amax = __reduce_max_sync(0xffffffffu, ax);
    const unsigned first = __ballot_sync(0xffffffffu, ax == amax);
    const float m = __shfl_sync(0xffffffffu, x, __ffs(first) - 1);
    const float d = kvq_div(amax != 0 ? m : 0.0f, -8.0f); // all zeros: the reference keeps its initial +0 (d = -0)
    const float id = (__float_as_uint(d) & 0x7fffffffu) != 0 ? kvq_div(1.0f, d) : 0.0f;
    const int q = min(15, __float2int_rz(kvq_add(kvq_mul(x, id), 8.5f)));
    const int hi = __shfl_down_sync(0xffffffffu, q, 16);
    if (lane < 16) blk[2 + lane] = (char)(q | (hi << 4));
    if (lane == 0) *(half *)blk = __float2half_rn(d);
}

template <ggml_type TYPE> static __device__ __forceinline__ void kvq_quantize(float x, int lane, char * blk) {
    if constexpr (TYPE == GGML_TYPE_Q8_0)
        kvq_quantize_q8_0(x, lane, blk);
    else
        kvq_quantize_q4_0(x, lane, blk);
}

// element j (0..31) of a block (any 2-byte alignment), as ggml's dequantize_row_q8_0 / dequantize_row_q4_0
template <ggml_type TYPE> static __device__ __forceinline__ float kvq_value(const char * blk, int j) {
    const float d = __half2float(*(const half *)blk);
    if constexpr (TYPE == GGML_TYPE_Q8_0) {
        return d * (float)(int8_t)blk[2 + j];
    } else {
        const uint8_t q = (uint8_t)blk[2 + (j & 15)];
        return d * (float)((j < 16 ? q & 15 : q >> 4) - 8);
    }
}
template <ggml_type TYPE> constexpr int kvq_block_bytes() { return TYPE == GGML_TYPE_Q8_0 ? 34 : 18; }
