// bench-bw - device memory bandwidth: a large cudaMemcpy device -> device, timed with CUDA events,
// counting bytes read + bytes written (the roofline denominator for memory-bound decode; the measurement
// is ggml_backend_cuda_copy_bandwidth_gbs, which bench's roofline uses too).
//   bench-bw [GiB=4] [reps=20]      prints: bw_GBps <value>   (median over reps)
#include "ggml.h"

#include <cstdio>
#include <cstdlib>

#ifdef GGML_USE_CUDA
#include "ggml-cuda.h"

int main(int argc, char ** argv) {
    const double gib = argc > 1 ? atof(argv[1]) : 4.0;
    const int reps = argc > 2 ? atoi(argv[2]) : 20;
    if (gib <= 0 || reps <= 0) {
        fprintf(stderr, "usage: bench-bw [GiB > 0] [reps > 0]\n");
        return 1;
    }
    const size_t n = (size_t)(gib * 1073741824.0);
    const double bw = ggml_backend_cuda_copy_bandwidth_gbs(0, n, reps); // logs why when 0
    if (bw <= 0) {
        fprintf(stderr, "bench-bw: error: copy bandwidth not measured\n");
        return 1;
    }
    printf("copy %.2f GiB D2D: median %.3f ms over %d reps\n", gib, 2.0 * n / (bw * 1e9) * 1e3, reps);
    printf("bw_GBps %.1f\n", bw);
    return 0;
}
#else
int main() {
    fprintf(stderr, "bench-bw: built without CUDA\n");
    return 1;
}
#endif
