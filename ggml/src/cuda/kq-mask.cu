// kq-mask.cu - see kq-mask.cuh. A thread per 8 cells of one token row (one 16-byte store of f16, two of f32); a
// block's 256 threads cover 2048 cells, grid.y the tokens.
#include "kq-mask.cuh"

#include <type_traits>

template <typename T>
static __global__ void k_kq_mask(const int * __restrict__ cells, const int * __restrict__ seq,
                                 const int * __restrict__ pos, T * __restrict__ dst, int n_kv) {
    pdl_start();
    const int i = blockIdx.y;
    const int j0 = 8 * (blockIdx.x * blockDim.x + threadIdx.x);
    if (j0 >= n_kv) return;
    const int s = seq[i], p = pos[i];
    const int word = 1 + (s >> 5); // the cells' bits of sequences 0..31, then 32..63
    const unsigned bit = 1u << (s & 31);
    T v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
        const int j = j0 + e < n_kv ? j0 + e : n_kv - 1;
        const int * c = cells + 3 * (int64_t)j;
        const bool vis = ((unsigned)c[word] & bit) && c[0] <= p;
        if constexpr (std::is_same_v<T, half>)
            v[e] = vis ? __float2half(0.0f) : __ushort_as_half((unsigned short)0xFC00);
        else
            v[e] = vis ? 0.0f : -INFINITY;
    }
    T * row = dst + (int64_t)i * n_kv;
    if (j0 + 8 <= n_kv && (uintptr_t)(row + j0) % (8 * sizeof(T)) == 0) {
        if constexpr (std::is_same_v<T, half>) {
            *(uint4 *)(row + j0) = *(const uint4 *)v;
        } else {
            *(float4 *)(row + j0) = *(const float4 *)v;
            *(float4 *)(row + j0 + 4) = *(const float4 *)(v + 4);
        }
    } else {
        for (int e = 0; e < 8 && j0 + e < n_kv; ++e)
            row[j0 + e] = v[e];
    }
}

void ggml_cuda_op_kq_mask(ggml_cuda_context & ctx, ggml_tensor * dst) {
    const ggml_tensor *cells = dst->src[0], *seq = dst->src[1], *pos = dst->src[2];
    const int64_t n_kv = dst->ne[0], n_tok = dst->ne[1];
    GGML_ASSERT(cells->type == GGML_TYPE_I32 && seq->type == GGML_TYPE_I32 && pos->type == GGML_TYPE_I32);
    GGML_ASSERT(cells->ne[1] == n_kv && seq->ne[0] == n_tok && pos->ne[0] == n_tok && ggml_is_contiguous(dst));
    GGML_ASSERT(n_kv <= INT32_MAX / 3 && n_tok <= 65535);
    if (n_kv == 0 || n_tok == 0) return;
    const dim3 grid((unsigned)cuda_ceil_div(n_kv, 8 * 256), (unsigned)n_tok);
    if (dst->type == GGML_TYPE_F16)
        ggml_cuda_launch(ctx, k_kq_mask<half>, grid, dim3(256), 0, (const int *)cells->data, (const int *)seq->data,
                         (const int *)pos->data, (half *)dst->data, (int)n_kv);
    else
        ggml_cuda_launch(ctx, k_kq_mask<float>, grid, dim3(256), 0, (const int *)cells->data,
                         (const int *)seq->data, (const int *)pos->data, (float *)dst->data, (int)n_kv);
}
