// unary.cu - see unary.cuh. Grid: x over ne0 (so a single long row fills the GPU), y over rows.
#include "mmw-order.cuh"
#include "unary.cuh"

#include <algorithm>

enum unary_kind { UNARY_SCALE, UNARY_SILU, UNARY_SWIGLU };

static __device__ __forceinline__ float silu(float x) { return x / (1.0f + expf(-x)); }

template <typename T, int KIND>
static __global__ void k_unary(const char * a, const char * b, char * d, cuda_shape as, cuda_shape bs, cuda_shape ds,
                               float s) {
    pdl_start();
    for (int64_t rr = blockIdx.y; rr < (int64_t)ds.ne[1] * ds.ne[2] * ds.ne[3]; rr += gridDim.y) {
        int64_t i1, i2, i3;
        unravel_row(rr, ds.ne[1], ds.ne[2], i1, i2, i3);
        const char * ar = a + i1 * as.nb[1] + i2 * as.nb[2] + i3 * as.nb[3];
        const char * br = KIND == UNARY_SWIGLU ? b + i1 * bs.nb[1] + i2 * bs.nb[2] + i3 * bs.nb[3] : nullptr;
        char * dr = d + i1 * ds.nb[1] + i2 * ds.nb[2] + i3 * ds.nb[3];
        for (int64_t i0 = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i0 < ds.ne[0];
             i0 += (int64_t)gridDim.x * blockDim.x) {
            const float x = to_f32<T>(*(const T *)(ar + i0 * as.nb[0]));
            float y;
            if (KIND == UNARY_SCALE)
                y = x * s;
            else if (KIND == UNARY_SILU)
                y = silu(x);
            else
                y = silu(x) * to_f32<T>(*(const T *)(br + i0 * bs.nb[0]));
            *(T *)(dr + i0 * ds.nb[0]) = from_f32<T>(y);
        }
    }
}

// contiguous f32 (prompt-sized SWIGLU): float4 over the flat index. W16 (rows of ne0 values = the wgmma GEMM's N
// columns, ne0 % 128 == 0): d also in the GEMM's f16 order at xw (mmw-order.cuh), nt columns.
template <int KIND, bool W16 = false>
static __global__ void k_unary4(const float4 * a, const float4 * b, float4 * d, int64_t n4, float s, half * xw, int nt,
                                int ne0) {
    pdl_start();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n4; i += (int64_t)gridDim.x * blockDim.x) {
        const float4 x = a[i];
        float4 y;
        if (KIND == UNARY_SCALE) {
            y = make_float4(x.x * s, x.y * s, x.z * s, x.w * s);
        } else if (KIND == UNARY_SILU) {
            y = make_float4(silu(x.x), silu(x.y), silu(x.z), silu(x.w));
        } else {
            const float4 u = b[i];
            y = make_float4(silu(x.x) * u.x, silu(x.y) * u.y, silu(x.z) * u.z, silu(x.w) * u.w);
        }
        d[i] = y;
        if (W16) {
            const int N = (int)(4 * n4 / ne0), n = (int)(4 * i / ne0), k = (int)(4 * i % ne0);
            mmw_put2(xw, nt, N, n, k, y.x, y.y);
            mmw_put2(xw, nt, N, n, k + 2, y.z, y.w);
        }
    }
}

// xw (SWIGLU, ggml_cuda_mmw_order_ok(dst)): dst also in the wgmma GEMM's order there; returns whether it was written
template <int KIND> static bool unary(ggml_cuda_context & ctx, ggml_tensor * dst, float s, half * xw = nullptr) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = KIND == UNARY_SWIGLU ? dst->src[1] : a;
    GGML_ASSERT(a->type == dst->type && b->type == dst->type);
    const int64_t rows = ggml_nrows(dst);
    if (rows == 0 || dst->ne[0] == 0) return false;
    bool flat4 = dst->type == GGML_TYPE_F32 && ggml_nelements(dst) % 4 == 0;
    for (const ggml_tensor * t : {a, b, (const ggml_tensor *)dst})
        flat4 = flat4 && ggml_is_contiguous(t) && (uintptr_t)t->data % 16 == 0;
    if (flat4) {
        const int64_t n4 = ggml_nelements(dst) / 4;
        const int64_t blocks = std::min<int64_t>(cuda_ceil_div(n4, 256), 65535);
        if (xw) {
            ggml_cuda_launch(ctx, k_unary4<KIND, true>, dim3((unsigned)blocks), dim3(256), 0, (const float4 *)a->data,
                             (const float4 *)b->data, (float4 *)dst->data, n4, s, xw, (int)ggml_cuda_mmw_nt(rows),
                             (int)dst->ne[0]);
            return true;
        }
        ggml_cuda_launch(ctx, k_unary4<KIND>, dim3((unsigned)blocks), dim3(256), 0, (const float4 *)a->data,
                         (const float4 *)b->data, (float4 *)dst->data, n4, s, nullptr, 0, 1);
        return false;
    }
    const int bsz = dst->ne[0] >= 256 ? 256 : dst->ne[0] >= 128 ? 128 : 32;
    const char * ap = (const char *)a->data;
    const char * bp = (const char *)b->data;
    if (dst->type == GGML_TYPE_F32)
        ggml_cuda_launch(ctx, k_unary<float, KIND>, ew_grid(dst->ne[0], rows, bsz), dim3(bsz), 0,
            ap, bp, (char *)dst->data, cuda_shape_of(a), cuda_shape_of(b), cuda_shape_of(dst), s);
    else
        ggml_cuda_launch(ctx, k_unary<half, KIND>, ew_grid(dst->ne[0], rows, bsz), dim3(bsz), 0,
            ap, bp, (char *)dst->data, cuda_shape_of(a), cuda_shape_of(b), cuda_shape_of(dst), s);
    return false;
}

GGML_CUDA_OP(scale) { unary<UNARY_SCALE>(ctx, dst, ggml_get_op_params_f32(dst, 0)); }
GGML_CUDA_OP(silu) { unary<UNARY_SILU>(ctx, dst, 0.0f); }
GGML_CUDA_OP(swiglu) { unary<UNARY_SWIGLU>(ctx, dst, 0.0f); }

half * ggml_cuda_op_swiglu_w16(ggml_cuda_context & ctx, ggml_tensor * dst) {
    if (!ggml_cuda_mmw_order_ok(dst)) {
        unary<UNARY_SWIGLU>(ctx, dst, 0.0f);
        return nullptr;
    }
    const size_t mark = ctx.pool.mark();
    half * xw = ggml_cuda_mmw_order_alloc(ctx, dst);
    if (unary<UNARY_SWIGLU>(ctx, dst, 0.0f, xw)) return xw;
    ctx.pool.rewind(mark); // (not the flat kernel: the order was not written)
    return nullptr;
}
