// cuda/profile.cuh - per-node GPU times of one graph (ggml_backend_sched_set_profile) and the device's peak
// FLOP/s per compute class (ggml_backend_cuda_peak_tflops, the roofline of ggml-cost.h).
//
//   auto run = [&](int i) { return run_fused(ctx, gf, i, fused[i]); };
//   if (!ggml_cuda_profile_graph_replay(ctx, gf, run, rec, user)) ggml_cuda_profile_graph(ctx, gf, run, rec, user);
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

// Captures gf as a CUDA graph (the form a decode step runs in: programmatic dependent launches, no host between
// kernels), replays it once with CUPTI's activity records on, and reports each group's share of the replay's GPU
// span: rec(user, i, n, us) with us = the end of the group's last kernel (or memset/memcpy) minus the end of the
// work before it, so overlapping launches are not counted twice and the times sum to the span. Returns false,
// having launched nothing, where CUPTI is not built in or refuses, or GGML_CUDA_PROFILE_EAGER is set: the caller
// then times the graph eagerly (ggml_cuda_profile_graph).
bool ggml_cuda_profile_graph_replay(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::function<int(int)> & run,
                                    void (*rec)(void * user, int i, int n, double us), void * user);

// GGML_CUDA_KTRACE=1: every kernel, memset and memcpy of the process on the device from CUPTI's activity records
// (graph replays included, node by node), summed per kernel name and printed (stderr) when the backend is freed:
// count, total, average / min / max duration, and the GPU span against its busy time (the gaps between kernels).
// begin at backend init (only when the variable is set), report at free; nothing where CUPTI is not built in.
void ggml_cuda_ktrace_begin();
void ggml_cuda_ktrace_report();

