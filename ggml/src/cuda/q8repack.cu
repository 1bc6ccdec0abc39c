// q8repack.cu - see q8repack.cuh.
#include "ggml-backend.h"
#include "q8repack.cuh"

#include <cstring>
#include <vector>

static char g_repacked_tag; // tensor->extra == &g_repacked_tag: the data is repacked

bool ggml_cuda_q8_repacked(const ggml_tensor * t) { return t && t->extra == &g_repacked_tag; }
bool ggml_cuda_q8_touches_repacked(const ggml_tensor * t) {
    return t && (ggml_cuda_q8_repacked(t) || ggml_cuda_q8_repacked(t->view_src));
}

bool ggml_cuda_q8_should_repack(const ggml_backend_buffer * buf, const ggml_tensor * t, size_t offset, size_t size) {
    if (ggml_cuda_q8_repacked(t)) return true; // keep it repacked (partial sets are merged)
    return buf && buf->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS && t->type == GGML_TYPE_Q8_0 && !t->view_src &&
           offset == 0 && size == ggml_nbytes(t) && size > 0 && ggml_is_contiguous(t) && t->ne[0] % 32 == 0 &&
           (uintptr_t)t->data % 16 == 0;
}

// one thread per block: 34 bytes of block b -> qs[b*32..] and d[b]
static __global__ void k_repack(const char * src, int8_t * qs, half * d, int64_t nblk) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    const uint16_t * s = (const uint16_t *)(src + b * 34);
    d[b] = *(const half *)s;
    uint4 o[2];
    uint16_t * o16 = (uint16_t *)o;
#pragma unroll
    for (int j = 0; j < 16; ++j)
        o16[j] = s[1 + j];
    ((uint4 *)(qs + b * 32))[0] = o[0];
    ((uint4 *)(qs + b * 32))[1] = o[1];
}
static __global__ void k_unpack(const int8_t * qs, const half * d, char * dst, int64_t nblk) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    uint16_t * o = (uint16_t *)(dst + b * 34);
    o[0] = *(const uint16_t *)(d + b);
    const uint16_t * s = (const uint16_t *)(qs + b * 32);
#pragma unroll
    for (int j = 0; j < 16; ++j)
        o[1 + j] = s[j];
}

// whole tensor, device to device, between two different allocations
static void repack_dev(const void * src, ggml_tensor * t) {
    const int64_t nblk = ggml_nelements(t) / 32;
    k_repack<<<cuda_ceil_div(nblk, 256), 256>>>((const char *)src, (int8_t *)t->data,
                                                 (half *)((char *)t->data + ggml_nelements(t)), nblk);
    CUDA_CHECK_LAUNCH();
}
static void unpack_dev(const ggml_tensor * t, void * dst) {
    const int64_t nblk = ggml_nelements(t) / 32;
    k_unpack<<<cuda_ceil_div(nblk, 256), 256>>>(q8r_qs(t), q8r_d(t), (char *)dst, nblk);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_q8_set(ggml_tensor * t, const void * data, size_t offset, size_t size) {
    const size_t n = ggml_nbytes(t);
    GGML_ASSERT(offset + size <= n);
    void * tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&tmp, n));
    if (ggml_cuda_q8_repacked(t) && !(offset == 0 && size == n)) unpack_dev(t, tmp); // merge a partial set
    CUDA_CHECK(cudaMemcpy((char *)tmp + offset, data, size, cudaMemcpyHostToDevice));
    repack_dev(tmp, t);
    CUDA_CHECK(cudaFree(tmp)); // synchronizes
    t->extra = &g_repacked_tag;
}

void ggml_cuda_q8_get(const ggml_tensor * t, void * data, size_t offset, size_t size) {
    const size_t n = ggml_nbytes(t);
    GGML_ASSERT(offset + size <= n);
    void * tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&tmp, n));
    unpack_dev(t, tmp);
    CUDA_CHECK(cudaMemcpy(data, (const char *)tmp + offset, size, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(tmp));
}

// one thread per 8 values: 8 quants (one 8-byte load) and their scale -> one 16-byte store
static __global__ void k_q8r_to_f16(const int8_t * qs, const half * d, uint4 * dst, int64_t n8) {
    const int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n8) return;
    const int2 q = ((const int2 *)qs)[i];
    const float s = __half2float(d[i / 4]);
    uint4 out;
    half2 * h = (half2 *)&out;
    const int v[2] = {q.x, q.y};
#pragma unroll
    for (int j = 0; j < 4; ++j) {
        const int w = v[j / 2] >> (16 * (j % 2));
        h[j] = __floats2half2_rn(s * (float)(int8_t)(w & 0xff), s * (float)(int8_t)((w >> 8) & 0xff));
    }
    dst[i] = out;
}

void ggml_cuda_q8r_to_f16(ggml_cuda_context & ctx, const ggml_tensor * t, half * dst) {
    GGML_ASSERT(ggml_cuda_q8_repacked(t));
    const int64_t n8 = ggml_nelements(t) / 8;
    k_q8r_to_f16<<<cuda_ceil_div(n8, 256), 256, 0, ctx.stream>>>(q8r_qs(t), q8r_d(t), (uint4 *)dst, n8);
    CUDA_CHECK_LAUNCH();
}
