// event-time.cuh - `reps` runs of what launch(i) puts on `stream`, each between two CUDA events and waited for: their
// times in ms, sorted (the median and minimum for the bandwidth probe of membw.cu and bench-chain's graph replays).
#pragma once
#include "common.cuh"

#include <algorithm>
#include <vector>

template <typename F> static std::vector<float> cuda_event_times_ms(cudaStream_t stream, int reps, F launch) {
    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    std::vector<float> ms(reps);
    for (int i = 0; i < reps; ++i) {
        CUDA_CHECK(cudaEventRecord(e0, stream));
        launch(i);
        CUDA_CHECK(cudaEventRecord(e1, stream));
        CUDA_CHECK(cudaEventSynchronize(e1));
        CUDA_CHECK(cudaEventElapsedTime(&ms[i], e0, e1));
    }
    CUDA_CHECK(cudaEventDestroy(e0));
    CUDA_CHECK(cudaEventDestroy(e1));
    std::sort(ms.begin(), ms.end());
    return ms;
}
