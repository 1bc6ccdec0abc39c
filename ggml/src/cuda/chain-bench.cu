// chain-bench.cu - the floor of a decode step built from one kernel per op (bench-chain): a CUDA graph of dependent
// streaming kernels, each reading its own weight bytes (16-byte loads, U in flight a thread, the first ones before
// griddepcontrol.wait as the mat-vecs do) and, after the wait, the small output of the kernel ahead, then writing
// one value per block. A kernel does nothing else, so what the chain loses against bytes / bandwidth is the
// boundaries' (launch, ramp, tail, the wait on the kernel ahead), and what a real decode step loses against the chain
// is its kernels'.
#include "common.cuh"
#include "event-time.cuh"
#include "ggml-cuda.h"
#include "qtypes.cuh"

#include <algorithm>
#include <vector>

// w: n 16-byte words of this kernel's own; in: n_in floats, the kernel ahead's values (read after the wait); out:
// one float a block. Grid-stride: thread t of the grid reads words t, t + stride, ..., U at a time.
template <int U>
static __global__ void __launch_bounds__(256)
    k_chain_stream(const int4 * __restrict__ w, int64_t n, const float * in, int n_in, float * out, int early) {
    pdl_trigger();
    const int64_t stride = (int64_t)gridDim.x * blockDim.x;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    int4 v[U];
    auto load = [&](int64_t base) {
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int64_t j = base + u * stride;
            v[u] = j < n ? qt_ld16((const char *)(w + j)) : make_int4(0, 0, 0, 0);
        }
    };
    if (early) load(i);
    pdl_wait();
    if (!early) load(i);
    unsigned acc = (unsigned)__float_as_int(ld_act(in + threadIdx.x % n_in)); // the output of the kernel ahead
    for (; i < n; i += U * stride) {
#pragma unroll
        for (int u = 0; u < U; ++u)
            acc += (unsigned)(v[u].x ^ v[u].y) + (unsigned)(v[u].z ^ v[u].w);
        if (i + U * stride < n) load(i + U * stride);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        acc += __shfl_xor_sync(0xffffffff, acc, o);
    __shared__ unsigned s[8];
    if (threadIdx.x % 32 == 0) s[threadIdx.x / 32] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        unsigned t = 0;
        for (int k = 0; k < (int)blockDim.x / 32; ++k)
            t += s[k];
        out[blockIdx.x] = (float)(t & 1023); // what the next kernel reads
    }
}

using chain_kernel = void (*)(const int4 *, int64_t, const float *, int, float *, int);

static cudaError_t chain_launch(chain_kernel kern, const ggml_cuda_chain_step & st, const int4 * w, const float * in,
                                int n_in, float * out, bool pdl, bool early, cudaStream_t stream) {
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3((unsigned)st.blocks);
    cfg.blockDim = dim3(256);
    cfg.stream = stream;
    cfg.attrs = attr;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, kern, w, (int64_t)(st.bytes / 16), in, n_in, out, early ? 1 : 0);
}

double ggml_backend_cuda_chain_us(int device, const ggml_cuda_chain_step * steps, int n_steps, int n_layers,
                                  const ggml_cuda_chain_step * tail, int u, bool pdl, bool early, int reps) {
    if (device < 0 || device >= ggml_backend_cuda_get_device_count() || n_steps <= 0 || n_layers <= 0 || reps <= 0 ||
        (u != 2 && u != 4 && u != 8 && u != 16)) {
        GGML_LOG_ERROR("%s: no CUDA device %d, or a bad plan (%d steps, %d layers, U %d, %d reps)\n", __func__, device,
                       n_steps, n_layers, u, reps);
        return 0;
    }
    int prev = device;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(device));
    int n_sm = 0, occ = 0;
    CUDA_CHECK(cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device));
    const chain_kernel kern = u == 2   ? k_chain_stream<2>
                              : u == 4 ? k_chain_stream<4>
                              : u == 8 ? k_chain_stream<8>
                                       : k_chain_stream<16>;
    CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kern, 256, 0));
    // every kernel of the step its own bytes (no L2 reuse across kernels), 256-byte aligned
    std::vector<ggml_cuda_chain_step> plan;
    for (int l = 0; l < n_layers; ++l)
        plan.insert(plan.end(), steps, steps + n_steps);
    if (tail) plan.push_back(*tail);
    size_t total = 0;
    for (auto & st : plan) {
        st.bytes = (st.bytes + 255) / 256 * 256;
        if (st.blocks <= 0) st.blocks = n_sm * (st.blocks < 0 ? -st.blocks : std::max(occ, 1)); // one wave
        total += st.bytes;
    }
    int max_blocks = 1;
    for (const auto & st : plan)
        max_blocks = std::max(max_blocks, st.blocks);
    char * w = nullptr;
    float * io = nullptr; // two ping-pong outputs of max_blocks floats
    cudaError_t err = cudaMalloc(&w, total);
    if (err == cudaSuccess) err = cudaMalloc(&io, sizeof(float) * 2 * max_blocks);
    if (err != cudaSuccess) {
        cudaGetLastError();
        if (w) CUDA_CHECK(cudaFree(w));
        CUDA_CHECK(cudaSetDevice(prev));
        GGML_LOG_WARN("%s: cannot allocate %.2f GiB on CUDA%d: %s\n", __func__, total / 1073741824.0, device,
                      cudaGetErrorString(err));
        return 0;
    }
    CUDA_CHECK(cudaMemset(w, 1, total));
    CUDA_CHECK(cudaMemset(io, 0, sizeof(float) * 2 * max_blocks));
    cudaStream_t stream;
    CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    size_t off = 0;
    int n_in = 1;
    for (size_t k = 0; k < plan.size(); ++k) {
        const ggml_cuda_chain_step & st = plan[k];
        const float * in = io + (k % 2) * max_blocks;
        float * out = io + ((k + 1) % 2) * max_blocks;
        const int4 * wp = (const int4 *)(w + off);
        const int ni = std::min(n_in, 256);
        CUDA_CHECK(chain_launch(kern, st, wp, in, ni, out, pdl, early, stream));
        off += st.bytes;
        n_in = st.blocks;
    }
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CUDA_CHECK(cudaGraphLaunch(exec, stream)); // warm-up
    CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> ms =
        cuda_event_times_ms(stream, reps, [&](int) { CUDA_CHECK(cudaGraphLaunch(exec, stream)); });
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(graph));
    CUDA_CHECK(cudaStreamDestroy(stream));
    CUDA_CHECK(cudaFree(w));
    CUDA_CHECK(cudaFree(io));
    CUDA_CHECK(cudaSetDevice(prev));
    return ms[reps / 2] * 1e3;
}
