// cuda/profile.cuh - per-node GPU times of one graph (ggml_backend_sched_set_profile) and the device's peak
// FLOP/s per compute class (ggml_backend_cuda_peak_tflops, the roofline of ggml-cost.h).
//
//   ggml_cuda_profile_graph(ctx, gf, [&](int i) { return run_fused(ctx, gf, i, fused[i]); }, rec, user);
#pragma once

#include "common.cuh"

#include <functional>

// Runs gf eagerly on ctx.stream: run(i) launches node i with the nodes fused to it and returns how many nodes
// it did (view, NONE and empty nodes are skipped, as graph execution does). A gate kernel holds the stream
// until every launch is queued (at most k_gate_timeout_ms), so the events recorded between the groups time the
// kernels back to back, not the host's launch rate; after a sync, rec(user, i, n, us) reports each group.
// Kernels launched as programmatic dependent launches do not overlap their neighbours here (an event sits
// between them): each group's time is its kernels' time alone.
void ggml_cuda_profile_graph(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::function<int(int)> & run,
                             void (*rec)(void * user, int i, int n, double us), void * user);
