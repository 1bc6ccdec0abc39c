// mmqw.cu - see mmq.cuh: the wgmma GEMM of each type's instance file (mmqw-<type>.cu), and whether the device runs
// it. Built for sm_90a too, like the instance files: the probe is compiled in the same passes, so the cubin the
// runtime picks for it is the one it picks for them.
#include "mmq.cuh"

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define GGML_CUDA_WGMMA 1
#endif

#define MMW_DECL(name)                                                                                                 \
    extern const ggml_cuda_mmqh_fn ggml_cuda_mmw_##name;                                                               \
    extern const ggml_cuda_mmw_group_fn ggml_cuda_mmw_group_##name;
MMW_DECL(q8_0)
MMW_DECL(q4_0)
MMW_DECL(q4_1)
MMW_DECL(q5_0)
MMW_DECL(q5_1)
MMW_DECL(q2_K)
MMW_DECL(q3_K)
MMW_DECL(q4_K)
MMW_DECL(q5_K)
MMW_DECL(q6_K)
#undef MMW_DECL

namespace {
struct mmw_fns {
    ggml_cuda_mmqh_fn one = nullptr;
    ggml_cuda_mmw_group_fn group = nullptr;
};
mmw_fns mmw_fns_of(ggml_type type) {
#define MMW_CASE(T, name)                                                                                              \
    case T:                                                                                                            \
        return {ggml_cuda_mmw_##name, ggml_cuda_mmw_group_##name};
    switch (type) {
        MMW_CASE(GGML_TYPE_Q8_0, q8_0)
        MMW_CASE(GGML_TYPE_Q4_0, q4_0)
        MMW_CASE(GGML_TYPE_Q4_1, q4_1)
        MMW_CASE(GGML_TYPE_Q5_0, q5_0)
        MMW_CASE(GGML_TYPE_Q5_1, q5_1)
        MMW_CASE(GGML_TYPE_Q2_K, q2_K)
        MMW_CASE(GGML_TYPE_Q3_K, q3_K)
        MMW_CASE(GGML_TYPE_Q4_K, q4_K)
        MMW_CASE(GGML_TYPE_Q5_K, q5_K)
        MMW_CASE(GGML_TYPE_Q6_K, q6_K)
        default:
            return {};
    }
#undef MMW_CASE
}
} // namespace

ggml_cuda_mmqh_fn ggml_cuda_mmw(ggml_type type) { return mmw_fns_of(type).one; }
ggml_cuda_mmw_group_fn ggml_cuda_mmw_group(ggml_type type) { return mmw_fns_of(type).group; }

// Thread (column n < nt, values 8j .. 8j + 7 of K padded to Kp) of batch bz: the order of mmw-order.cuh, zero past N
// and K
static __global__ void k_mmw_order(const char * __restrict__ b, half * __restrict__ dst, int K, int N, int64_t Kp,
                                   int nt, cuda_shape bs, int64_t B2, int64_t total) {
    pdl_start();
    const int64_t idx = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= total) return;
    const int n = (int)(idx % nt);
    const int64_t j = (idx / nt) % (Kp / 8), bz = idx / nt / (Kp / 8);
    const int k = (int)(8 * j);
    const char * src = b + n * bs.nb[1] + (bz % B2) * bs.nb[2] + (bz / B2) * bs.nb[3];
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
        v[e] = n < N && k + e < K ? *(const float *)(src + (int64_t)(k + e) * bs.nb[0]) : 0.0f;
#pragma unroll
    for (int e = 0; e < 8; e += 2)
        mmw_put2(dst + bz * Kp * nt, nt, nt, n, k + e, v[e], v[e + 1]);
}

void ggml_cuda_mmw_order(ggml_cuda_context & ctx, const ggml_tensor * b, half * dst) {
    GGML_ASSERT(b->type == GGML_TYPE_F32 && b->ne[1] <= 64);
    const int64_t Kp = ggml_cuda_mmw_kpad(b->ne[0]), nt = ggml_cuda_mmw_nt(b->ne[1]);
    const int64_t total = nt * (Kp / 8) * b->ne[2] * b->ne[3];
    if (total == 0) return;
    ++ctx.n_mmw_order;
    ggml_cuda_launch(ctx, k_mmw_order, dim3((unsigned)cuda_ceil_div(total, 256)), dim3(256), 0, (const char *)b->data,
                     dst, (int)b->ne[0], (int)b->ne[1], Kp, (int)nt, cuda_shape_of(b), b->ne[2], total);
}

static __global__ void k_mmw_probe(int * out) {
#if defined(GGML_CUDA_WGMMA)
    *out = 1;
#else
    *out = 0;
#endif
}

bool ggml_cuda_mmw_ok(int device) {
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess || prop.major != 9 || prop.minor != 0) return false;
    int * d = nullptr, h = 0;
    CUDA_CHECK(cudaMalloc(&d, sizeof(int)));
    k_mmw_probe<<<1, 1>>>(d);
    const cudaError_t e = cudaGetLastError(); // no kernel image for this device: the sm_90a pass was not built
    if (e == cudaSuccess) CUDA_CHECK(cudaMemcpy(&h, d, sizeof(int), cudaMemcpyDeviceToHost));
    CUDA_CHECK(cudaFree(d));
    return e == cudaSuccess && h == 1;
}
