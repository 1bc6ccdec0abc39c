// q8repack.cu - see q8repack.cuh.
#include "ggml-backend.h"
#include "q8repack.cuh"

#include <cstring>
#include <vector>

static char g_repacked_tag; // tensor->extra == &g_repacked_tag: the data is repacked

const ggml_cuda_qlayout * ggml_cuda_qlayout_of(ggml_type type) {
    static const ggml_cuda_qlayout q8_0 = {2, {2, 0}, {32, 2}};
    static const ggml_cuda_qlayout q4_0 = {2, {2, 0}, {16, 2}};
    static const ggml_cuda_qlayout q4_1 = {2, {4, 0}, {16, 4}};
    static const ggml_cuda_qlayout q5_0 = {3, {6, 2, 0}, {16, 4, 2}};
    static const ggml_cuda_qlayout q5_1 = {2, {8, 0}, {16, 8}};
    static const ggml_cuda_qlayout q2_K = {2, {0, 80}, {80, 4}};
    static const ggml_cuda_qlayout q3_K = {3, {0, 96, 108}, {96, 12, 2}};
    static const ggml_cuda_qlayout q4_K = {1, {0}, {144}};
    static const ggml_cuda_qlayout q5_K = {1, {0}, {176}};
    static const ggml_cuda_qlayout q6_K = {2, {0, 208}, {208, 2}};
    switch (type) {
        case GGML_TYPE_Q8_0:
            return &q8_0;
        case GGML_TYPE_Q4_0:
            return &q4_0;
        case GGML_TYPE_Q4_1:
            return &q4_1;
        case GGML_TYPE_Q5_0:
            return &q5_0;
        case GGML_TYPE_Q5_1:
            return &q5_1;
        case GGML_TYPE_Q2_K:
            return &q2_K;
        case GGML_TYPE_Q3_K:
            return &q3_K;
        case GGML_TYPE_Q4_K:
            return &q4_K;
        case GGML_TYPE_Q5_K:
            return &q5_K;
        case GGML_TYPE_Q6_K:
            return &q6_K;
        default:
            return nullptr;
    }
}

bool ggml_cuda_repacked(const ggml_tensor * t) { return t && t->extra == &g_repacked_tag; }
bool ggml_cuda_touches_repacked(const ggml_tensor * t) {
    return t && (ggml_cuda_repacked(t) || ggml_cuda_repacked(t->view_src));
}

bool ggml_cuda_should_repack(const ggml_backend_buffer * buf, const ggml_tensor * t, size_t offset, size_t size) {
    if (ggml_cuda_repacked(t)) return true; // keep it repacked (partial sets are merged)
    const ggml_cuda_qlayout * l = ggml_cuda_qlayout_of(t->type);
    return buf && buf->usage == GGML_BACKEND_BUFFER_USAGE_WEIGHTS && l && l->n > 1 && !t->view_src && offset == 0 &&
           size == ggml_nbytes(t) && size > 0 && ggml_is_contiguous(t) && (uintptr_t)t->data % 16 == 0;
}

bool ggml_cuda_kernel_layout(const ggml_tensor * t) {
    if (ggml_cuda_repacked(t)) return true;
    const ggml_cuda_qlayout * l = ggml_cuda_qlayout_of(t->type);
    return l && l->n == 1 && ggml_is_contiguous(t) && (uintptr_t)t->data % 16 == 0;
}

static int64_t n_blocks(const ggml_tensor * t) { return ggml_nelements(t) / ggml_blck_size(t->type); }

cuda_qptrs ggml_cuda_qptrs_repacked(ggml_type type, const void * data, int64_t nblk) {
    const ggml_cuda_qlayout * l = ggml_cuda_qlayout_of(type);
    GGML_ASSERT(l);
    cuda_qptrs p = {};
    int64_t at = 0;
    for (int j = 0; j < l->n; ++j) {
        p.r[j] = (const char *)data + at;
        p.st[j] = l->size[j];
        at += nblk * l->size[j];
    }
    return p;
}

cuda_qptrs ggml_cuda_qptrs_of(const ggml_tensor * t) {
    const ggml_cuda_qlayout * l = ggml_cuda_qlayout_of(t->type);
    GGML_ASSERT(l);
    if (ggml_cuda_repacked(t) || l->n == 1) return ggml_cuda_qptrs_repacked(t->type, t->data, n_blocks(t));
    cuda_qptrs p = {};
    for (int j = 0; j < l->n; ++j) {
        p.r[j] = (const char *)t->data + l->off[j];
        p.st[j] = (int64_t)ggml_type_size(t->type);
    }
    return p;
}

// one thread per block: ggml's block b (bs bytes at src + b*bs) <-> its segments in the regions (dir 0: to the
// regions, 1: back). Every offset and size is even: 2-byte copies.
struct repack_args {
    char * r[4];
    int off[4], size[4];
    int n, bs;
};
template <int DIR> static __global__ void k_repack(char * blocks, repack_args a, int64_t nblk) {
    const int64_t b = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblk) return;
    uint16_t * blk = (uint16_t *)(blocks + b * a.bs);
    for (int j = 0; j < a.n; ++j) {
        uint16_t * seg = (uint16_t *)(a.r[j] + b * a.size[j]);
        uint16_t * src = blk + a.off[j] / 2;
        for (int i = 0; i < a.size[j] / 2; ++i) {
            if (DIR == 0)
                seg[i] = src[i];
            else
                src[i] = seg[i];
        }
    }
}

static repack_args repack_args_of(ggml_type type, void * regions, int64_t nblk) {
    const ggml_cuda_qlayout * l = ggml_cuda_qlayout_of(type);
    repack_args a = {};
    a.n = l->n;
    a.bs = (int)ggml_type_size(type);
    int64_t at = 0;
    for (int j = 0; j < l->n; ++j) {
        a.r[j] = (char *)regions + at;
        a.off[j] = l->off[j];
        a.size[j] = l->size[j];
        at += nblk * l->size[j];
    }
    return a;
}

// whole tensor between two different allocations (src: ggml's bytes; regions: t's type, nblk blocks)
static void repack_dev(const void * src, ggml_type type, void * regions, int64_t nblk, cudaStream_t stream) {
    if (nblk == 0) return;
    k_repack<0><<<cuda_ceil_div(nblk, 256), 256, 0, stream>>>((char *)src, repack_args_of(type, regions, nblk), nblk);
    CUDA_CHECK_LAUNCH();
}
static void unpack_dev(const ggml_tensor * t, void * dst) {
    const int64_t nblk = n_blocks(t);
    if (nblk == 0) return;
    k_repack<1><<<cuda_ceil_div(nblk, 256), 256>>>((char *)dst, repack_args_of(t->type, t->data, nblk), nblk);
    CUDA_CHECK_LAUNCH();
}

void ggml_cuda_repack_set(ggml_tensor * t, const void * data, size_t offset, size_t size) {
    const size_t n = ggml_nbytes(t);
    GGML_ASSERT(offset + size <= n);
    void * tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&tmp, n));
    if (ggml_cuda_repacked(t) && !(offset == 0 && size == n)) unpack_dev(t, tmp); // merge a partial set
    CUDA_CHECK(cudaMemcpy((char *)tmp + offset, data, size, cudaMemcpyHostToDevice));
    repack_dev(tmp, t->type, t->data, n_blocks(t), nullptr);
    CUDA_CHECK(cudaFree(tmp)); // synchronizes
    t->extra = &g_repacked_tag;
}

void ggml_cuda_repack_get(const ggml_tensor * t, void * data, size_t offset, size_t size) {
    const size_t n = ggml_nbytes(t);
    GGML_ASSERT(offset + size <= n);
    void * tmp = nullptr;
    CUDA_CHECK(cudaMalloc(&tmp, n));
    unpack_dev(t, tmp);
    CUDA_CHECK(cudaMemcpy(data, (const char *)tmp + offset, size, cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(tmp));
}

void ggml_cuda_repack_into(ggml_cuda_context & ctx, const ggml_tensor * t, void * dst) {
    GGML_ASSERT(ggml_is_contiguous(t) && !ggml_cuda_repacked(t) && ggml_cuda_qlayout_of(t->type));
    repack_dev(t->data, t->type, dst, n_blocks(t), ctx.stream);
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
