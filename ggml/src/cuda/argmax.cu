// argmax.cu - see argmax.cuh. One block per row; (value, index) reduced by shuffles.
#include "argmax.cuh"

static __device__ __forceinline__ void argmax_merge(float & v, int & i, float v2, int i2) {
    if (v2 > v || (v2 == v && i2 < i) || (v != v && v2 == v2)) {
        v = v2;
        i = i2;
    }
}

static __global__ void k_argmax(const char * x, int32_t * y, cuda_shape xs) {
    pdl_start();
    __shared__ float s_v[32];
    __shared__ int s_i[32];
    const char * xr = x + blockIdx.x * xs.nb[1];
    float best = -INFINITY;
    int bi = INT_MAX;
    const int64_t n = xs.ne[0];
    if (xs.nb[0] == 4 && n % 4 == 0 && (uintptr_t)xr % 16 == 0) {
        // a vocabulary row (32k-128k logits) in 16-byte loads, U of them issued before any is merged: a thread's
        // loads are then a few round trips to L2, not one per value (one block of 1024 threads per row)
        constexpr int U = 4;
        const float4 * x4 = (const float4 *)xr;
        const int64_t n4 = n / 4;
        for (int64_t i0 = threadIdx.x; i0 < n4; i0 += U * blockDim.x) {
            float4 v[U];
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int64_t i = i0 + u * blockDim.x;
                v[u] = i < n4 ? x4[i] : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
            }
#pragma unroll
            for (int u = 0; u < U; ++u) {
                const int i = (int)(4 * (i0 + u * blockDim.x));
                argmax_merge(best, bi, v[u].x, i);
                argmax_merge(best, bi, v[u].y, i + 1);
                argmax_merge(best, bi, v[u].z, i + 2);
                argmax_merge(best, bi, v[u].w, i + 3);
            }
        }
    } else {
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x)
            argmax_merge(best, bi, *(const float *)(xr + i * xs.nb[0]), (int)i);
    }
    for (int o = 16; o > 0; o >>= 1) {
        const float v2 = __shfl_xor_sync(0xffffffff, best, o);
        const int i2 = __shfl_xor_sync(0xffffffff, bi, o);
        argmax_merge(best, bi, v2, i2);
    }
    const int w = threadIdx.x / 32, l = threadIdx.x % 32, nw = blockDim.x / 32;
    if (l == 0) {
        s_v[w] = best;
        s_i[w] = bi;
    }
    __syncthreads();
    if (w == 0) {
        best = l < nw ? s_v[l] : -INFINITY;
        bi = l < nw ? s_i[l] : INT_MAX;
        for (int o = 16; o > 0; o >>= 1) {
            const float v2 = __shfl_xor_sync(0xffffffff, best, o);
            const int i2 = __shfl_xor_sync(0xffffffff, bi, o);
            argmax_merge(best, bi, v2, i2);
        }
        if (l == 0) y[blockIdx.x] = bi == INT_MAX ? 0 : bi;
    }
}

GGML_CUDA_OP(argmax) {
    const ggml_tensor * x = dst->src[0];
    GGML_ASSERT(x->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_I32 && ggml_is_contiguous(dst));
    const int64_t rows = x->ne[1];
    if (rows == 0) return;
    // one block per row: a vocabulary-sized row (32k-128k logits) needs the full 1024 threads in flight
    const int bs = x->ne[0] >= 8192 ? 1024 : x->ne[0] >= 1024 ? 256 : 32;
    ggml_cuda_launch(ctx, k_argmax, dim3((unsigned)rows), dim3(bs), 0, (const char *)x->data, (int32_t *)dst->data,
                     cuda_shape_of(x));
}
