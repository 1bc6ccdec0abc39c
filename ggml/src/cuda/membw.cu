// membw.cu - device memory bandwidth: a large cudaMemcpy device -> device timed with CUDA events, bytes
// read + bytes written counted: the roofline denominator of memory-bound decode (bench, bench-bw).
#include "common.cuh"
#include "event-time.cuh"
#include "ggml-cuda.h"

#include <algorithm>
#include <vector>

double ggml_backend_cuda_copy_bandwidth_gbs(int device, size_t bytes, int reps) {
    if (device < 0 || device >= ggml_backend_cuda_get_device_count() || reps <= 0) {
        GGML_LOG_ERROR("%s: no CUDA device %d (%d found) or reps %d <= 0\n", __func__, device,
                       ggml_backend_cuda_get_device_count(), reps);
        return 0;
    }
    int prev = device;
    CUDA_CHECK(cudaGetDevice(&prev));
    CUDA_CHECK(cudaSetDevice(device));
    if (bytes == 0) { // 4 GiB, less where a model already holds the memory
        size_t free_mem = 0, total_mem = 0;
        CUDA_CHECK(cudaMemGetInfo(&free_mem, &total_mem));
        bytes = std::min(size_t(4) << 30, free_mem / 4 / (1 << 20) * (1 << 20));
    }
    void *a = nullptr, *b = nullptr;
    cudaError_t err = bytes >= (size_t(64) << 20) ? cudaMalloc(&a, bytes) : cudaErrorMemoryAllocation;
    if (err == cudaSuccess) err = cudaMalloc(&b, bytes);
    if (err != cudaSuccess) { // not enough memory: not a bug, the caller goes without
        cudaGetLastError();
        if (a) CUDA_CHECK(cudaFree(a));
        CUDA_CHECK(cudaSetDevice(prev));
        GGML_LOG_WARN("%s: cannot allocate 2 x %.2f GiB on CUDA%d: %s\n", __func__, bytes / 1073741824.0, device,
                      cudaGetErrorString(err));
        return 0;
    }
    CUDA_CHECK(cudaMemset(a, 1, bytes)); // never time on untouched memory
    CUDA_CHECK(cudaMemset(b, 2, bytes));
    CUDA_CHECK(cudaMemcpy(b, a, bytes, cudaMemcpyDeviceToDevice)); // warm-up
    const std::vector<float> ms = cuda_event_times_ms(0, reps, [&](int i) {
        CUDA_CHECK(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, bytes, cudaMemcpyDeviceToDevice, 0));
    });
    const double med_ms = ms[reps / 2];
    CUDA_CHECK(cudaFree(a));
    CUDA_CHECK(cudaFree(b));
    CUDA_CHECK(cudaSetDevice(prev));
    GGML_LOG_INFO("%s: CUDA%d: copy of %.2f GiB, median %.3f ms over %d reps (min %.3f ms)\n", __func__, device,
                  bytes / 1073741824.0, med_ms, reps, ms[0]);
    return 2.0 * bytes / (med_ms * 1e-3) / 1e9;
}
