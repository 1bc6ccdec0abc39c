// roofline.h - the roofline of the backends a profile ran on (ggml-cost.h), measured at start: memory bandwidth
// and peak FLOP/s per compute class, for graph-dump --profile and bench --profile.
//
//   ggml_profile p = ...;                        // ggml_backend_sched_get_profile
//   roofline_cache cache;
//   roofline_apply(p, n_threads, cache);         // measures each backend named in p once, sets roof_us
//   fputs(ggml_profile_table(p, 20).c_str(), stdout);
#pragma once

#include "ggml-cost.h"

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

// CPU: bandwidth = the 4-stream read probe of membw.h on n_threads (what bench's CPU roofline uses; probe_bytes 0:
// membw_probe_bytes()); peak per class = the best of a few timed mat-muls on the CPU backend with n_threads, a
// [K 2048, M 512] weight of f32 / f16 / q8_0 times a [2048, 256] f32 batch (the kernels' own peak, not the FMA
// units': int8 dots and tiles reach more or less than an f32 FMA loop would say). About a second.
// n_threads <= 0: all cores.
ggml_roofline roofline_cpu(int n_threads, size_t probe_bytes = 0);
// CUDA device: bandwidth = ggml_backend_cuda_copy_bandwidth_gbs (device-to-device copy, read + written), peaks =
// ggml_backend_cuda_peak_tflops (device properties). False when built without CUDA or no such device.
bool roofline_cuda(int device, ggml_roofline & r);
// The rooflines measured so far, by backend name (reused for every profile the caller applies them to).
struct roofline_cache {
    std::vector<std::pair<std::string, ggml_roofline>> known;
};
// Sets the roofline of every backend named in p's records ("CPU", "CUDA0", ...), measuring those not in the cache.
void roofline_apply(ggml_profile & p, int n_threads, roofline_cache & cache);
