// fattn-range.cu - see fattn-range.cuh.
#include "fattn-range.cuh"

// one block of 256 threads per row: each thread the first and last visible key of its strided part, then the
// block's min / max; rows are read 8 halves (or 4 floats) at a time where 16-byte aligned
template <bool F16> static __global__ void __launch_bounds__(256) k_mask_ranges(const char * mask, int64_t stride,
                                                                                  int n_kv, int2 * out) {
    pdl_wait();
    const int t = blockIdx.x;
    const char * row = mask + t * stride;
    int lo = INT_MAX, hi = -1, cnt = 0, nz = 0; // visible keys, and whether one of them has a value other than 0
    constexpr int V = F16 ? 8 : 4; // values per 16-byte load
    const bool vec = ((uintptr_t)row % 16) == 0;
    const int n_vec = vec ? n_kv / V : 0;
    for (int i = threadIdx.x; i < n_vec; i += blockDim.x) {
        const int4 w = *(const int4 *)(row + (int64_t)i * 16);
        const auto * x = (const typename std::conditional<F16, half, float>::type *)&w;
#pragma unroll
        for (int e = 0; e < V; ++e) {
            const float f = F16 ? __half2float(((const half *)x)[e]) : ((const float *)x)[e];
            if (f != -INFINITY) {
                lo = min(lo, i * V + e);
                hi = max(hi, i * V + e);
                ++cnt;
                nz |= f != 0.0f;
            }
        }
    }
    for (int j = n_vec * V + threadIdx.x; j < n_kv; j += blockDim.x) {
        const float f = F16 ? __half2float(((const half *)row)[j]) : ((const float *)row)[j];
        if (f != -INFINITY) {
            lo = min(lo, j);
            hi = max(hi, j);
            ++cnt;
            nz |= f != 0.0f;
        }
    }
    __shared__ int s_lo[8], s_hi[8], s_cnt[8], s_nz[8];
    for (int o = 16; o > 0; o /= 2) {
        lo = min(lo, __shfl_xor_sync(0xffffffff, lo, o));
        hi = max(hi, __shfl_xor_sync(0xffffffff, hi, o));
        cnt += __shfl_xor_sync(0xffffffff, cnt, o);
        nz |= __shfl_xor_sync(0xffffffff, nz, o);
    }
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (lane == 0) {
        s_lo[warp] = lo;
        s_hi[warp] = hi;
        s_cnt[warp] = cnt;
        s_nz[warp] = nz;
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        for (int w = 1; w < (int)blockDim.x / 32; ++w) {
            lo = min(lo, s_lo[w]);
            hi = max(hi, s_hi[w]);
            cnt += s_cnt[w];
            nz |= s_nz[w];
        }
        out[t] = hi < 0 ? make_int2(0, 0) : make_int2(lo, hi + 1);
        out[gridDim.x + t] = make_int2(!nz && cnt == (hi < 0 ? 0 : hi + 1 - lo), 0); // an exact range
    }
    pdl_trigger();
}

int2 * ggml_cuda_mask_ranges(ggml_cuda_context & ctx, const char * mask, int64_t row_stride, bool f16, int n_kv,
                             int n_tokens) {
    // the layers of a step read one mask: its ranges are computed by the first and reused until a node writes over
    // the mask's memory (ggml_cuda_qcache_written) or the graph ends (B = 64 batched decode: 32 launches a step -> 1)
    ggml_cuda_qcache & c = ctx.rcache;
    // (the pool's pin, set only here: a caller's rewind below the buffer gives its memory back and clears the pin)
    if (c.buf && ctx.pool.pin_end != 0 && c.src == mask && c.nb[1] == row_stride && c.ne[0] == n_kv &&
        c.ne[1] == n_tokens && c.ne[2] == f16)
        return (int2 *)c.buf;
    int2 * out = (int2 *)ctx.pool.alloc(sizeof(int2) * 2 * n_tokens);
    ctx.pool.pin_end = ctx.pool.used;
    c = {};
    c.src = mask;
    c.bytes = (size_t)row_stride * (n_tokens - 1) + (size_t)n_kv * (f16 ? 2 : 4);
    c.ne[0] = n_kv;
    c.ne[1] = n_tokens;
    c.ne[2] = f16;
    c.nb[1] = row_stride;
    c.buf = out;
    if (f16) {
        ggml_cuda_launch(ctx, k_mask_ranges<true>, dim3(n_tokens), dim3(256), 0, mask, row_stride, n_kv, out);
    } else {
        ggml_cuda_launch(ctx, k_mask_ranges<false>, dim3(n_tokens), dim3(256), 0, mask, row_stride, n_kv, out);
    }
    return out;
}
