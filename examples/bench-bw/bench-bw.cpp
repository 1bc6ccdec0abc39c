// bench-bw - device memory bandwidth: a large cudaMemcpy device -> device, timed with CUDA events,
// counting bytes read + bytes written (the roofline denominator for memory-bound decode).
//   bench-bw [GiB=4] [reps=20]      prints: bw_GBps <value>   (median over reps)
#include "ggml.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#ifdef GGML_USE_CUDA
#include <cuda_runtime.h>

#define CHECK(call)                                                                                                    \
    do {                                                                                                               \
        cudaError_t e_ = (call);                                                                                       \
        if (e_ != cudaSuccess) {                                                                                       \
            fprintf(stderr, "bench-bw: %s failed: %s\n", #call, cudaGetErrorString(e_));                               \
            return 1;                                                                                                  \
        }                                                                                                              \
    } while (0)

int main(int argc, char ** argv) {
    const double gib = argc > 1 ? atof(argv[1]) : 4.0;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (gib <= 0 || reps <= 0) {
        fprintf(stderr, "usage: bench-bw [GiB > 0] [reps > 0]\n");
        return 1;
    }
    const size_t n = (size_t)(gib * 1073741824.0);
    void *a = nullptr, *b = nullptr;
    CHECK(cudaMalloc(&a, n));
    CHECK(cudaMalloc(&b, n));
    CHECK(cudaMemset(a, 1, n)); // never time on untouched memory
    CHECK(cudaMemset(b, 2, n));
    cudaEvent_t e0, e1;
    CHECK(cudaEventCreate(&e0));
    CHECK(cudaEventCreate(&e1));
    CHECK(cudaMemcpy(b, a, n, cudaMemcpyDeviceToDevice)); // warm-up
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
        CHECK(cudaEventRecord(e0));
        CHECK(cudaMemcpyAsync(i % 2 ? a : b, i % 2 ? b : a, n, cudaMemcpyDeviceToDevice));
        CHECK(cudaEventRecord(e1));
        CHECK(cudaEventSynchronize(e1));
        CHECK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    std::sort(ms.begin(), ms.end());
    const double med = ms[reps / 2];
    const double bw = 2.0 * n / (med * 1e-3) / 1e9;
    printf("copy %.2f GiB D2D: median %.3f ms, min %.3f ms over %d reps\n", gib, med, ms[0], reps);
    printf("bw_GBps %.1f\n", bw);
    cudaFree(a);
    cudaFree(b);
    return 0;
}
#else
int main() {
    fprintf(stderr, "bench-bw: built without CUDA\n");
    return 1;
}
#endif
