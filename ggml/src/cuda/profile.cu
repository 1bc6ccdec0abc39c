// cuda/profile.cu - see profile.cuh: an eager run of a graph with a CUDA event after each launch or fused group,
// and the peak throughput of a device from its properties.
//
// Peak FLOP per clock per SM (dense; the roofline's compute terms, ggml-cost.h's peak classes), from NVIDIA's
// architecture whitepapers:
//   arch      f32 (FFMA)  f16 tensor (f32 accumulate)  int8 tensor
//   sm_70        128          1024                         512 (dp4a: no int8 tensor cores)
//   sm_75        128          1024                        2048
//   sm_80        128          2048                        4096
//   sm_86/89     256          1024 (GeForce boards halve   2048
//                              it with f32 accumulate)
//   sm_90        256          4096                        8192
//   sm_100+      256          8192                       16384
// Peak = SMs x the maximum SM clock (cudaDevAttrClockRate) x the figure above. An H100 SXM (132 SMs, 1980 MHz):
// f16 1070 TFLOP/s, int8 2141, f32 66.9. Tensor-heavy kernels run below the maximum clock (power), so a
// compute-bound GEMM reads some 10% under its true share of the peak.
#include "ggml-cuda.h"
#include "profile.cuh"

#include <atomic>
#include <chrono>
#include <vector>

// how long the gate holds the stream at most: a launch queue that fills up before the host has queued every
// launch then still drains (the later groups' times would include launch gaps: warned about)
static constexpr double k_gate_timeout_ms = 200.0;

static __device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// spins until the host sets *flag (mapped pinned memory) or timeout_ns pass
static __global__ void profile_gate(const volatile int * flag, unsigned long long timeout_ns) {
    const unsigned long long t0 = globaltimer_ns();
    while (*flag == 0 && globaltimer_ns() - t0 < timeout_ns) {}
}

void ggml_cuda_profile_graph(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::function<int(int)> & run,
                             void (*rec)(void * user, int i, int n, double us), void * user) {
    int n_groups = 0; // an upper bound: one per computing node
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        if (ggml_nelements(t) > 0 && !ggml_is_view_op(t->op) && t->op != GGML_OP_NONE) ++n_groups;
    }
    std::vector<cudaEvent_t> ev(n_groups + 1);
    for (auto & e : ev)
        CUDA_CHECK(cudaEventCreate(&e));
    int * flag_h = nullptr;
    int * flag_d = nullptr;
    CUDA_CHECK(cudaHostAlloc((void **)&flag_h, sizeof(int), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&flag_d, flag_h, 0));
    *(volatile int *)flag_h = 0;

    profile_gate<<<1, 1, 0, ctx.stream>>>(flag_d, (unsigned long long)(k_gate_timeout_ms * 1e6));
    CUDA_CHECK_LAUNCH();
    const auto t_host0 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaEventRecord(ev[0], ctx.stream));
    std::vector<std::pair<int, int>> groups; // (first node, node count)
    for (int i = 0; i < gf->n_nodes;) {
        const ggml_tensor * t = gf->nodes[i];
        if (ggml_nelements(t) == 0 || ggml_is_view_op(t->op) || t->op == GGML_OP_NONE) {
            ++i;
            continue;
        }
        const int n = run(i);
        GGML_ASSERT(n >= 1 && (int)groups.size() < n_groups);
        groups.push_back({i, n});
        CUDA_CHECK(cudaEventRecord(ev[groups.size()], ctx.stream));
        i += n;
    }
    const double host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_host0).count();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *(volatile int *)flag_h = 1; // open the gate
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (host_ms > 0.9 * k_gate_timeout_ms) {
        GGML_LOG_WARN("%s: queuing %zu launches took %.1f ms, longer than the gate holds the stream (%.0f ms): the "
                      "later groups' times include launch gaps\n",
                      __func__, groups.size(), host_ms, k_gate_timeout_ms);
    }
    for (size_t k = 0; k < groups.size(); ++k) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]));
        rec(user, groups[k].first, groups[k].second, 1000.0 * ms);
    }
    CUDA_CHECK(cudaFreeHost(flag_h));
    for (auto & e : ev)
        CUDA_CHECK(cudaEventDestroy(e));
}

bool ggml_backend_cuda_peak_tflops(int device, double * f32, double * f16, double * int8) {
    *f32 = *f16 = *int8 = 0;
    if (device < 0 || device >= ggml_backend_cuda_get_device_count()) return false;
    int major = 0, minor = 0, n_sm = 0, clock_khz = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    const int cc = 10 * major + minor;
    double p32 = 128, p16 = 1024, p8 = 512; // sm_70
    if (cc >= 100) {
        p32 = 256, p16 = 8192, p8 = 16384;
    } else if (cc >= 90) {
        p32 = 256, p16 = 4096, p8 = 8192;
    } else if (cc >= 86) {
        p32 = 256, p16 = 1024, p8 = 2048;
    } else if (cc >= 80) {
        p32 = 128, p16 = 2048, p8 = 4096;
    } else if (cc >= 75) {
        p32 = 128, p16 = 1024, p8 = 2048;
    }
    const double per_clock = (double)n_sm * clock_khz * 1e3 * 1e-12; // SMs x Hz, in tera
    *f32 = p32 * per_clock;
    *f16 = p16 * per_clock;
    *int8 = p8 * per_clock;
    return true;
}
