// ggml-cuda.h - the CUDA backend: device buffers, pinned host buffers, and a backend that runs
// graphs on one GPU (kernels per op family in ggml/src/cuda/, cuBLAS for prefill mat-muls,
// CUDA graphs for repeated decode steps).
//
//   if (ggml_backend_cuda_get_device_count() > 0) {
//       ggml_backend_t cuda = ggml_backend_cuda_init(0);        // nullptr (+ logged reason) on failure
//       ggml_backend_buffer_t w = ggml_backend_alloc_ctx_tensors(wctx, cuda);  // weights in VRAM
//       ...
//       ggml_backend_graph_compute(cuda, gf);
//       ggml_backend_free(cuda);
//   }
//
// Environment: GGML_CUDA_DISABLE_GRAPHS=1 turns CUDA-graph capture/replay off (read at init).
#pragma once

#include "ggml-backend.h"

#include <cstddef>
#include <string>

// nullptr (with a logged reason) if the device does not exist or CUDA cannot be initialised.
ggml_backend_t ggml_backend_cuda_init(int device);
// Number of usable CUDA devices; 0 without a GPU or driver (never aborts).
int ggml_backend_cuda_get_device_count();
// Device memory of `device`; nullptr for a device that does not exist.
ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device);
// Page-locked host memory (fast H2D/D2H copies); usable by the CPU backend.
ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type();
// Free and total bytes of device memory (both 0 if the device cannot be queried).
void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total);
bool ggml_backend_is_cuda(ggml_backend_t backend);
// Copy bandwidth of `device` in GB/s: cudaMemcpy device -> device of `bytes` (0: 4 GiB, or a quarter of
// the free memory when less), bytes read + bytes written counted, the median of `reps` timed with events
// (the roofline denominator of memory-bound decode; stable on a GPU, measure it once). 0 (with a logged
// reason) when the device does not exist or the memory cannot be allocated.
double ggml_backend_cuda_copy_bandwidth_gbs(int device, size_t bytes = 0, int reps = 20);
// One step of bench-chain's plan: a streaming kernel that reads `bytes` of its own and waits for the kernel ahead;
// `blocks` of 256 threads (0: one wave of resident blocks; -k: k a multiprocessor).
struct ggml_cuda_chain_step {
    size_t bytes;
    int blocks;
};
// The floor of a decode step built from one kernel per op (cuda/chain-bench.cu): n_layers x `steps` and then `tail`
// (nullable) as dependent streaming kernels in one CUDA graph, U (2, 4, 8, 16) 16-byte loads in flight a thread, with
// programmatic dependent launch or without, the first loads before the wait (early) or after it. Microseconds a graph
// replay (the median of `reps`); 0 (with a logged reason) for no device, a bad plan or too little memory.
double ggml_backend_cuda_chain_us(int device, const ggml_cuda_chain_step * steps, int n_steps, int n_layers,
                                  const ggml_cuda_chain_step * tail, int u, bool pdl, bool early, int reps);
// Peak dense throughput of `device` in TFLOP/s: f32 (FFMA), f16 and int8 tensor cores, as SMs x maximum SM clock
// x FLOP per clock per SM of its architecture (the table in cuda/profile.cu). False (all 0) for no device.
bool ggml_backend_cuda_peak_tflops(int device, double * f32, double * f16, double * int8);

// CUDA-graph counters of a CUDA backend since init: launches of an unchanged graph (replay),
// re-captures folded into an existing executable (update), and fresh instantiations.
void ggml_backend_cuda_get_graph_stats(ggml_backend_t backend, int * n_replay, int * n_update, int * n_instantiate);
// Prompt GEMMs of a CUDA backend since init whose quantized weight was dequantized to f16 ahead, on a second stream
// (dq-ahead.cuh; GGML_CUDA_NO_DQ_AHEAD=1, read at init, turns it off).
int ggml_backend_cuda_get_dq_ahead_count(ggml_backend_t backend);
// Decode attention launches of a CUDA backend since init (eager or captured) whose warps requested their first K/V
// tiles before the wait on the kernel ahead: one token whose K/V cells the same graph writes from an input
// (GGML_CUDA_FATTN_EARLY=0, read at init, turns it off).
int ggml_backend_cuda_get_fattn_early_count(ggml_backend_t backend);
// Writes of a CUDA backend's set_tensor_async since init (host-writes.cuh): gathered into one kernel's parameters,
// staged in its page-locked ring, or copied and waited for (above half the ring)
void ggml_backend_cuda_get_host_write_counts(ggml_backend_t backend, int * n_kernel, int * n_ring, int * n_sync);
// Batched-decode GEMMs a CUDA backend has launched on Hopper's warpgroup MMA since init, eagerly or into a captured
// graph (mmq-w.cuh: 33..64 columns by default, GGML_CUDA_MMQ_WG_N; 0 where the device or the build has no sm_90a
// kernel).
int ggml_backend_cuda_get_wgmma_count(ggml_backend_t backend);
// How those GEMMs got their activations in the f16 order they read (mmw-order.cuh) since init: reorder launches of
// their own (n_reorder), or written beside the f32 result by the norm / SwiGLU / attention kernel producing them
// (n_fused, fusion codes 17-20). Either pointer may be nullptr.
void ggml_backend_cuda_get_wgmma_order_stats(ggml_backend_t backend, int * n_reorder, int * n_fused);
// Fused groups a CUDA backend has run since init (counted when launched eagerly or captured into a CUDA
// graph, not per graph replay): adjacent mat-vecs sharing one activation (q/k/v), gate/up mat-vecs with
// their SWIGLU, norms that also quantized their result for the q8_0 mat-vecs, and ropes that wrote straight
// into the KV cache (ROPE + SET_ROWS; with q's rope and v's store as well: rope_qkv), and attention kernels
// that also quantized their output for the q8_0 mat-vec after them (fattn_q8), mat-vecs that also did the
// residual add, the norm after it and its quantization (mmv_norm), and q/k/v mat-vecs that also did the rope and
// the KV stores after them (mmv_rope). Any pointer may be nullptr. GGML_CUDA_NO_FUSION=1 (read at init) turns all
// fusions off, GGML_CUDA_NO_MMV_NORM=1 the mmv_norm kind.
void ggml_backend_cuda_get_fusion_stats(ggml_backend_t backend, int * n_mmv_group, int * n_swiglu_group,
                                        int * n_norm_q8 = nullptr, int * n_rope_store = nullptr,
                                        int * n_rope_qkv = nullptr, int * n_fattn_q8 = nullptr,
                                        int * n_mmv_norm = nullptr, int * n_mmv_rope = nullptr);

// An NCCL communicator over devices[0..n) (rank i on devices[i]) for ALL_REDUCE nodes (ggml_all_reduce) that the CUDA
// backends of those devices run, each from a thread of its own. NVLink multicast (NVLS) is turned off. nullptr and err
// where a device does not exist, NCCL fails, or the build has no NCCL. Free with ggml_comm_free after the backends
// that ran its all-reduces (their captured CUDA graphs hold NCCL work: ncclCommDestroy waits for them).
ggml_comm * ggml_backend_cuda_comm_new(const int * devices, int n, std::string * err);
