// cpy.cu - see cpy.cuh.
#include "cpy.cuh"

// flat element index -> byte offset in a strided tensor (32-bit divisions where they fit: common.cuh)
static __device__ __forceinline__ int64_t flat_offset(int64_t i, const cuda_shape & s) {
    int64_t r, i0, i1, i2, i3;
    divmod(i, s.ne[0], r, i0);
    unravel_row(r, s.ne[1], s.ne[2], i1, i2, i3);
    return i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

// both dense: element i at i (an f32 -> f16 activation copy for cuBLAS ran 5x under bandwidth through
// flat_offset's 64-bit divisions)
template <typename Ts, typename Td> static __global__ void k_cpy_dense(const Ts * src, Td * dst, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dst[i] = from_f32<Td>(to_f32<Ts>(src[i]));
}

template <typename Ts, typename Td>
static __global__ void k_cpy(const char * src, char * dst, cuda_shape ss, cuda_shape ds, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    const Ts v = *(const Ts *)(src + flat_offset(i, ss));
    *(Td *)(dst + flat_offset(i, ds)) = from_f32<Td>(to_f32<Ts>(v));
}

// Block-type shapes: ne0 counts elements, nb0 is the block size; block b covers elements 32b..32b+31.
static __device__ __forceinline__ int64_t flat_block_offset(int64_t b, const cuda_shape & s) {
    int64_t r, i0, i1, i2, i3;
    divmod(b, s.ne[0] / 32, r, i0);
    unravel_row(r, s.ne[1], s.ne[2], i1, i2, i3);
    return i0 * s.nb[0] + i1 * s.nb[1] + i2 * s.nb[2] + i3 * s.nb[3];
}

// float -> q8_0 / q4_0: one warp per block, one lane per value (bit-identical to ggml's reference quantizers)
template <typename Ts, ggml_type TYPE>
static __global__ void k_quantize_blocks(const char * src, char * dst, cuda_shape ss, cuda_shape ds, int64_t nblk) {
    const int64_t b = (int64_t)blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32;
    const int l = threadIdx.x % 32;
    if (b >= nblk) return; // whole warps leave together
    const float x = to_f32<Ts>(*(const Ts *)(src + flat_offset(b * 32 + l, ss)));
    kvq_quantize<TYPE>(x, l, dst + flat_block_offset(b, ds));
}

// q8_0 / q4_0 -> float: one thread per value
template <ggml_type TYPE, typename Td>
static __global__ void k_dequantize_blocks(const char * src, char * dst, cuda_shape ss, cuda_shape ds, int64_t n) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    *(Td *)(dst + flat_offset(i, ds)) = from_f32<Td>(kvq_value<TYPE>(src + flat_block_offset(i / 32, ss), (int)(i % 32)));
}

// q8_0 / q4_0 -> f16, dst dense and 16-byte aligned (a quantized K/V span for the prompt attention): one thread per 8
// values of one block, one 16-byte store
template <ggml_type TYPE>
static __global__ void k_dequantize_blocks_f16(const char * src, uint4 * dst, cuda_shape ss, int64_t n8) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const char * blk = src + flat_block_offset(i / 4, ss);
    const int j0 = (int)(i % 4) * 8;
    uint4 out;
    half2 * h = (half2 *)&out;
#pragma unroll
    for (int j = 0; j < 4; ++j)
        h[j] = __floats2half2_rn(kvq_value<TYPE>(blk, j0 + 2 * j), kvq_value<TYPE>(blk, j0 + 2 * j + 1));
    dst[i] = out;
}

// a block type into the same type: one thread per block
template <int BYTES>
static __global__ void k_copy_blocks(const char * src, char * dst, cuda_shape ss, cuda_shape ds, int64_t nblk) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint16_t * x = (const uint16_t *)(src + flat_block_offset(b, ss)); // blocks are 2-byte aligned
    uint16_t * y = (uint16_t *)(dst + flat_block_offset(b, ds));
#pragma unroll
    for (int j = 0; j < BYTES / 2; ++j)
        y[j] = x[j];
}

// q8_0 -> f16, both dense (the prefill weight dequantization): one thread per 8 values, one
// 16-byte store each
static __global__ void k_dequantize_q8_0_f16_dense(const char * src, uint4 * dst, int64_t n8) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const char * blk = src + (i / 4) * 34;
    const float d = __half2float(*(const half *)blk);
    const uint16_t * q16 = (const uint16_t *)(blk + 2) + (i % 4) * 4;
    uint4 out;
    half2 * h = (half2 *)&out;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const uint16_t v = q16[j];
        h[j] = __floats2half2_rn(d * (float)(int8_t)(v & 0xff), d * (float)(int8_t)(v >> 8));
    }
    dst[i] = out;
}

cuda_shape ggml_cuda_contig_shape(ggml_type type, const int64_t * ne) {
    cuda_shape s;
    for (int i = 0; i < 4; ++i)
        s.ne[i] = ne[i];
    s.nb[0] = (int64_t)ggml_type_size(type);
    s.nb[1] = s.nb[0] * ne[0] / ggml_blck_size(type);
    s.nb[2] = s.nb[1] * ne[1];
    s.nb[3] = s.nb[2] * ne[2];
    return s;
}

static bool is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16; }

bool ggml_cuda_cpy_supported(ggml_type st, ggml_type dt, const ggml_tensor * s, const ggml_tensor * d) {
    const bool sq = ggml_cuda_is_kvq(st), dq = ggml_cuda_is_kvq(dt);
    if (!(is_float(st) || sq) || !(is_float(dt) || dq)) return false;
    // block types: dense rows of whole blocks; between two block types only a copy (no requantization)
    if (sq && (s->type != st || !ggml_cuda_kvq_rows_ok(s))) return false;
    if (dq && (d->type != dt || !ggml_cuda_kvq_rows_ok(d))) return false;
    return !(sq && dq && st != dt);
}

static bool same_layout(const cuda_shape & a, const cuda_shape & b) {
    for (int i = 0; i < 4; ++i)
        if (a.ne[i] != b.ne[i] || (a.ne[i] > 1 && a.nb[i] != b.nb[i])) return false;
    return true;
}

void ggml_cuda_convert(ggml_cuda_context & ctx, const ggml_tensor * src, void * dst, ggml_type dt,
                       const cuda_shape & ds) {
    const cuda_shape ss = cuda_shape_of(src);
    const ggml_type st = src->type;
    const int64_t n = ggml_nelements(src);
    if (n == 0) return;
    cudaStream_t stream = ctx.stream;
    const char * s = (const char *)src->data;
    char * d = (char *)dst;
    // both dense with the same layout: one memcpy
    if (st == dt && ggml_is_contiguous(src) && same_layout(ss, ggml_cuda_contig_shape(dt, ds.ne)) &&
        same_layout(ds, ggml_cuda_contig_shape(dt, ds.ne))) {
        CUDA_CHECK(cudaMemcpyAsync(d, s, ggml_nbytes(src), cudaMemcpyDeviceToDevice, stream));
        return;
    }
    const int bs = 256;
    const bool dense = ggml_is_contiguous(src) && same_layout(ds, ggml_cuda_contig_shape(dt, ds.ne));
    if (dense && is_float(st) && is_float(dt)) {
        const unsigned g = (unsigned)cuda_ceil_div(n, bs);
        if (st == GGML_TYPE_F32 && dt == GGML_TYPE_F16)
            k_cpy_dense<float, half><<<g, bs, 0, stream>>>((const float *)s, (half *)d, n);
        else if (st == GGML_TYPE_F16 && dt == GGML_TYPE_F32)
            k_cpy_dense<half, float><<<g, bs, 0, stream>>>((const half *)s, (float *)d, n);
        else if (st == GGML_TYPE_F32)
            k_cpy_dense<float, float><<<g, bs, 0, stream>>>((const float *)s, (float *)d, n);
        else
            k_cpy_dense<half, half><<<g, bs, 0, stream>>>((const half *)s, (half *)d, n);
    } else if (st == GGML_TYPE_Q8_0 && dt == GGML_TYPE_F16 && ggml_is_contiguous(src) &&
               same_layout(ds, ggml_cuda_contig_shape(dt, ds.ne)) && (uintptr_t)d % 16 == 0) {
        k_dequantize_q8_0_f16_dense<<<cuda_ceil_div(n / 8, bs), bs, 0, stream>>>(s, (uint4 *)d, n / 8);
    } else if (ggml_cuda_is_kvq(st) && dt == GGML_TYPE_F16 && same_layout(ds, ggml_cuda_contig_shape(dt, ds.ne)) &&
               (uintptr_t)d % 16 == 0) {
        if (st == GGML_TYPE_Q8_0)
            k_dequantize_blocks_f16<GGML_TYPE_Q8_0><<<cuda_ceil_div(n / 8, bs), bs, 0, stream>>>(s, (uint4 *)d, ss, n / 8);
        else
            k_dequantize_blocks_f16<GGML_TYPE_Q4_0><<<cuda_ceil_div(n / 8, bs), bs, 0, stream>>>(s, (uint4 *)d, ss, n / 8);
    } else if (ggml_cuda_is_kvq(st) && st == dt) {
        const int64_t nblk = n / 32;
        if (st == GGML_TYPE_Q8_0)
            k_copy_blocks<34><<<cuda_ceil_div(nblk, bs), bs, 0, stream>>>(s, d, ss, ds, nblk);
        else
            k_copy_blocks<18><<<cuda_ceil_div(nblk, bs), bs, 0, stream>>>(s, d, ss, ds, nblk);
    } else if (ggml_cuda_is_kvq(dt)) {
        GGML_ASSERT(is_float(st) && "cuda cpy: a block type only from f32/f16 or the same block type");
        const int64_t nblk = n / 32, grid = cuda_ceil_div(nblk, bs / 32);
        const int v = (st == GGML_TYPE_F16 ? 2 : 0) + (dt == GGML_TYPE_Q4_0 ? 1 : 0);
        if (v == 0)
            k_quantize_blocks<float, GGML_TYPE_Q8_0><<<grid, bs, 0, stream>>>(s, d, ss, ds, nblk);
        else if (v == 1)
            k_quantize_blocks<float, GGML_TYPE_Q4_0><<<grid, bs, 0, stream>>>(s, d, ss, ds, nblk);
        else if (v == 2)
            k_quantize_blocks<half, GGML_TYPE_Q8_0><<<grid, bs, 0, stream>>>(s, d, ss, ds, nblk);
        else
            k_quantize_blocks<half, GGML_TYPE_Q4_0><<<grid, bs, 0, stream>>>(s, d, ss, ds, nblk);
    } else if (ggml_cuda_is_kvq(st)) {
        GGML_ASSERT(is_float(dt));
        const int64_t grid = cuda_ceil_div(n, bs);
        const int v = (dt == GGML_TYPE_F16 ? 2 : 0) + (st == GGML_TYPE_Q4_0 ? 1 : 0);
        if (v == 0)
            k_dequantize_blocks<GGML_TYPE_Q8_0, float><<<grid, bs, 0, stream>>>(s, d, ss, ds, n);
        else if (v == 1)
            k_dequantize_blocks<GGML_TYPE_Q4_0, float><<<grid, bs, 0, stream>>>(s, d, ss, ds, n);
        else if (v == 2)
            k_dequantize_blocks<GGML_TYPE_Q8_0, half><<<grid, bs, 0, stream>>>(s, d, ss, ds, n);
        else
            k_dequantize_blocks<GGML_TYPE_Q4_0, half><<<grid, bs, 0, stream>>>(s, d, ss, ds, n);
    } else if (st == GGML_TYPE_F32 && dt == GGML_TYPE_F32) {
        k_cpy<float, float><<<cuda_ceil_div(n, bs), bs, 0, stream>>>(s, d, ss, ds, n);
    } else if (st == GGML_TYPE_F32 && dt == GGML_TYPE_F16) {
        k_cpy<float, half><<<cuda_ceil_div(n, bs), bs, 0, stream>>>(s, d, ss, ds, n);
    } else if (st == GGML_TYPE_F16 && dt == GGML_TYPE_F32) {
        k_cpy<half, float><<<cuda_ceil_div(n, bs), bs, 0, stream>>>(s, d, ss, ds, n);
    } else if (st == GGML_TYPE_F16 && dt == GGML_TYPE_F16) {
        k_cpy<half, half><<<cuda_ceil_div(n, bs), bs, 0, stream>>>(s, d, ss, ds, n);
    } else {
        GGML_ABORT("cuda cpy: unsupported %s -> %s", ggml_type_name(st), ggml_type_name(dt));
    }
    CUDA_CHECK_LAUNCH();
}

GGML_CUDA_OP(cpy) {
    // dst is a view of src1: write through dst's own shape/strides
    ggml_cuda_convert(ctx, dst->src[0], dst->data, dst->type, cuda_shape_of(dst));
}

GGML_CUDA_OP(dup) { ggml_cuda_convert(ctx, dst->src[0], dst->data, dst->type, cuda_shape_of(dst)); }
