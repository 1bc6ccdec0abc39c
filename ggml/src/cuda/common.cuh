// common.cuh - shared pieces of the CUDA backend: error checks, the backend context (stream,
// cuBLAS handle, scratch pool), a by-value tensor shape for kernels, warp/block reductions.
#pragma once

#include "ggml-impl.h"

#include <cstdint>
#include <cstdlib>
#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <utility>
#include <vector>

// Bugs abort naming the call and file:line.
#define CUDA_CHECK(call)                                                                                               \
    do {                                                                                                               \
        cudaError_t err_ = (call);                                                                                     \
        if (err_ != cudaSuccess)                                                                                       \
            ggml_abort(__FILE__, __LINE__, "CUDA error: %s failed: %s", #call, cudaGetErrorString(err_));              \
    } while (0)

#define CUBLAS_CHECK(call)                                                                                             \
    do {                                                                                                               \
        cublasStatus_t st_ = (call);                                                                                   \
        if (st_ != CUBLAS_STATUS_SUCCESS)                                                                              \
            ggml_abort(__FILE__, __LINE__, "cuBLAS error: %s failed: %s", #call, cublasGetStatusString(st_));          \
    } while (0)

// After every kernel launch.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define WARP_SIZE 32
// ctx.counters: GGML_CUDA_N_COUNTERS_EPI for the decode attention (one per kv head: the last block of a head merges
// its splits), then GGML_CUDA_N_COUNTERS_KV for the q/k/v group's q8_0 / q4_0 KV stores (one per 32-row group of k
// and v: the last block of a group quantizes it)
#define GGML_CUDA_N_COUNTERS_EPI 1024
#define GGML_CUDA_N_COUNTERS_KV 1024
#define GGML_CUDA_N_COUNTERS (GGML_CUDA_N_COUNTERS_EPI + GGML_CUDA_N_COUNTERS_KV)
#define GGML_CUDA_MMW_TILES 65536 // output tiles of one wgmma GEMM launch with ctx.mmw_tick counters

// Scratch memory for one graph_compute: a bump allocator over one device block. Addresses are
// stable between calls with the same sequence of requests (CUDA graphs rely on that). When a
// request does not fit, an extra block is taken and, at the end of the graph, everything is
// merged into one larger block (grew() tells the caller captured graphs are stale). An extra block is given back by
// the rewind past the offset it was taken at; a later request that does not fit reuses the smallest such free block
// that holds it (and is at most twice its size), in stream order as the main block is reused. So the first prompt of
// a 70B model, which dequantizes 240 large weights to f16 one after another, holds one of them, not their sum (which
// ran a single H200 out of memory).
struct ggml_cuda_pool {
    int device = 0;
    char * base = nullptr;
    size_t size = 0, used = 0, peak = 0;
    struct xblock {
        void * p;
        size_t n, at; // bytes; the offset it serves while live
        bool live;
    };
    std::vector<xblock> extra; // overflow blocks of this graph
    bool grown = false;

    void * alloc(size_t n) {
        n = (n + 255) & ~size_t(255);
        void * p;
        if (used + n <= size) {
            p = base + used;
        } else {
            xblock * best = nullptr;
            for (xblock & b : extra) {
                if (!b.live && b.n >= n && b.n / 2 <= n && (!best || b.n < best->n)) best = &b;
            }
            if (!best) {
                CUDA_CHECK(cudaMalloc(&p, n));
                extra.push_back({p, n, 0, false});
                best = &extra.back();
            }
            best->live = true;
            best->at = used;
            p = best->p;
        }
        used += n;
        if (used > peak) peak = used;
        return p;
    }
    void reset() {
        rewind(0);
        pin_end = 0;
    }
    // One allocation kept for reuse across nodes (ctx.rcache) ends at pin_end (0: none): a rewind below it drops it.
    size_t pin_end = 0;
    // Scratch that only the next kernels of the stream read (a dequantized weight for one GEMM): take mark()
    // before allocating it and rewind(m) once its readers are launched; later requests reuse the memory, in
    // stream order. The peak, so the block settle() makes, is then the largest such scratch, not their sum.
    size_t mark() const { return used; }
    void rewind(size_t m) {
        used = m;
        if (m < pin_end) pin_end = 0;
        for (xblock & b : extra) b.live = b.live && b.at < m;
    }
    // after the stream is idle: fold overflow blocks into one block of the peak size
    bool settle() {
        if (extra.empty()) return false;
        for (const xblock & b : extra)
            CUDA_CHECK(cudaFree(b.p));
        extra.clear();
        if (base) CUDA_CHECK(cudaFree(base));
        size = peak + peak / 8;
        CUDA_CHECK(cudaMalloc((void **)&base, size));
        return true;
    }
    void release() {
        for (const xblock & b : extra)
            cudaFree(b.p);
        extra.clear();
        if (base) cudaFree(base);
        base = nullptr;
        size = used = 0;
    }
};

struct ggml_cuda_graph_cache; // ggml-cuda.cu
struct ggml_cuda_profile;     // ggml-cuda.cu
struct ggml_cuda_dq_ahead;    // dq-ahead.cuh
struct ggml_cuda_host_writes; // host-writes.cuh

// last activation quantized for the q8_0 mat-vec, or converted to f16 for a cuBLAS GEMM (within one
// graph_compute; lives in the pool)
struct ggml_cuda_qcache {
    const void * src = nullptr;
    size_t bytes = 0;
    int64_t ne[4] = {0}, nb[4] = {0};
    void * buf = nullptr; // nullptr: empty
    // q8s only: non-null when buf holds x * w of an RMS_NORM(x) * w without the norm's scale (written by the
    // mat-vec before it, fusion code 12): nsq [K/32] partial sums of x^2, and the norm's eps (mmvq.cuh)
    const float * nsq = nullptr;
    float eps = 0.0f;
};

struct ggml_cuda_context {
    int device = 0;
    char name[16] = {0};
    cudaStream_t stream = nullptr;
    cublasHandle_t cublas = nullptr;
    void * cublas_ws = nullptr;
    int * counters = nullptr; // GGML_CUDA_N_COUNTERS ints, zero between kernels: "last block" counts (fattn.cu)
    ggml_cuda_pool pool;
    ggml_cuda_qcache qcache; // q8s activations (quantized_b in mulmat.cu)
    ggml_cuda_qcache hcache; // f16 activations of f16-weight GEMMs (prompts: q/k/v and gate/up share one)
    ggml_cuda_qcache wcache; // the wgmma GEMM's f16 activations in its shared-memory order (mmq-w.cuh)
    ggml_cuda_qcache rcache; // an attention mask's key ranges (fattn-range.cuh): every layer of a step reads one mask
    int n_sm = 0;
    bool use_graphs = true;
    // graphs whose mat-muls have at most this many columns are captured and replayed (decode steps, B sequences
    // decoded together); wider ones (prompts) run eagerly. GGML_CUDA_GRAPH_MAX_N sets it.
    int64_t graph_max_n = 64;
    // GGML_CUDA_GRAPH_FULL_CHECK=1: compare the whole graph record even when the scheduler's plan_id says the
    // graph is the one launched last; GGML_CUDA_GRAPH_VERIFY=1: compare it too, and abort on a difference (tests)
    bool graph_full_check = false, graph_verify = false;
    bool use_fusion = true;
    bool use_mmv_norm = true; // fusion code 12 (ggml-cuda.cu); GGML_CUDA_NO_MMV_NORM=1: off
    bool use_mmv_rope = true; // fusion codes 13 / 14 (ggml-cuda.cu); GGML_CUDA_NO_MMV_ROPE=1: off
    bool use_pdl = false;     // programmatic dependent launch (sm_90+, not GGML_CUDA_NO_PDL): see ggml_cuda_launch
    // FLASH_ATTN_EXT nodes of the graph being run whose K and V caches this step writes at the cells of one graph input
    // (node, cells), for the decode attention's early tiles (ggml_cuda_fattn_plan_early); with PDL, and not with
    // GGML_CUDA_FATTN_EARLY=0 (an A/B)
    std::vector<std::pair<const ggml_tensor *, const ggml_tensor *>> fa_wcells;
    bool use_fattn_early = false;
    int n_fattn_early = 0; // decode attention launches that requested their first tiles early (eager or captured)
    bool mmvq_v1 = false;     // GGML_CUDA_MMVQ_V1=1: the first mmvq kernel (for comparisons)
    int mmvq_u = 2;           // GGML_CUDA_MMVQ=5: v5 kernel for N = 1; =2/4/8: v6 with that many loads in flight
    // rows per warp of the quantized-weight mat-vecs of mmvq-t.cuh (N = 1) and groups (GGML_CUDA_QT_RPW=1|2|4, which
    // sets qt_rpw_env: without it a group takes its type's rows, qt_group_rpw), of their gate/up + SwiGLU
    // (GGML_CUDA_QT_RPW_GLU=1|2; 0: per type); GGML_CUDA_Q8_V6=1: repacked q8_0 decode through mmvq.cu's v6
    // kernels instead of those
    int qt_rpw = 2, qt_rpw_glu = 0;
    bool qt_rpw_env = false;
    bool no_mmv_mix = false; // GGML_CUDA_NO_MMV_MIX: no q/k/v group of mixed weight types (mmvq-mix.cu)
    bool q8_qt = true;
    // quantized weights times N > ggml_cuda_mmv_max_n columns through the tensor-core GEMM (mmq.cuh) up to
    // mmq_max_n columns (GGML_CUDA_MMQ_MAX_N; -1: the per-type crossover of mulmat.cu), beyond through
    // dequantization + cuBLAS; GGML_CUDA_NO_MMQ=1: never
    bool use_mmq = true;
    int64_t mmq_max_n = -1;
    // GGML_CUDA_MMQ_INT8=1: that GEMM on int8 tensor cores (k_mmq, activations quantized to q8s) instead of on f16
    // tensor cores (k_mmqh, weights dequantized per tile in shared memory, activations in f16)
    bool mmq_int8 = false;
    // up to how many columns the f16 GEMM streams the weights into its fragments (k_mms, mmq-s.cuh; at most 64;
    // beyond 32 its per-warp MMA work outgrows the tiled kernel's on the Llama-2-7B shapes) where the wgmma GEMM does
    // not take them (mmq_wg_n); GGML_CUDA_MMQ_STREAM_N sets it (0: k_mmqh for every N)
    int mmq_stream_n = 32;
    // up to how many columns the GEMM runs on wgmma (k_mmw, mmq-w.cuh; at most 64) where the device runs it (mmw_ok),
    // ahead of mmq_stream_n; GGML_CUDA_MMQ_WG_N sets it (0: never)
    int mmq_wg_n = 64;
    bool mmw_ok = false;
    // where mmw_ok: 2 ints per tile of the wgmma GEMM's K split (mmq-w.cuh: the block with a tile's first ticket
    // stores it, the others add theirs; no memset of dst), zero between launches; nullptr with GGML_CUDA_MMW_TICK=0 (the
    // memset + atomic adds of mmq_launch, an A/B)
    int * mmw_tick = nullptr;
    // q/k/v and gate/up of a batched step in one wgmma launch up to this many columns (GGML_CUDA_MMW_GROUP=n, 0:
    // never). H200, Llama-2-7B q8_0 batched-bench: B = 8 1497 -> 1562-1565 t/s, B = 32 3986-4032 -> 4158-4185; B = 64
    // was slower grouped (4633-4735 -> 4531-4545) while a block's K range was bound by its staged activations, and
    // is faster since they stream through a ring (twenty-seventh session: 4864 / 4902 -> 5098 / 5105)
    int mmw_group_n = 64;
    // the kernels producing a wgmma GEMM's activations (norms, SwiGLU, decode attention) also write them in its order
    // (fusion codes 17-20, mmw-order.cuh); GGML_CUDA_MMW_REORDER=1: a reorder launch before each GEMM instead (A/B)
    bool mmw_w16 = true;
    // the wgmma GEMM's activation chunks by one bulk copy (TMA) each, waited for on shared-memory barriers, instead of
    // per-thread cp.async and a block barrier a chunk (mmq-w.cuh); GGML_CUDA_MMW_BULK=0: the latter (A/B)
    bool mmw_bulk = true;
    // a block's fixed cost in K values, in the wgmma GEMM's choice of its K split (mmw_kr): with 256 a Llama-2 q/k/v
    // group at N <= 64 runs 2 slices of 16 chunks in one wave instead of 8 of 4 in three (GGML_CUDA_MMW_OV sets it)
    int mmw_ov = 256;
    // its K split with ctx.mmw_tick: slice 0 zeroes the tile when it starts and every slice adds its sums, so none
    // waits for another to finish; GGML_CUDA_MMW_ZERO=0: the block with the first ticket stores and the others wait
    // for it (A/B)
    bool mmw_zero = true;
    // quantized weights times N <= mmv_max_n columns (<= MUL_MAT_VEC_MAX_N) through the mat-vec kernels, more through
    // the GEMM (H200, q8_0 4096 x 11008: mat-vec 40.7 us at N 8, the streamed GEMM 21.4 at N 9);
    // GGML_CUDA_MMV_MAX_N sets it (1..8). The mat-vec keeps N <= 8 when the GEMM is off or on int8
    // (ggml_cuda_mmv_max_n).
    int mmv_max_n = 4;
    // GGML_CUDA_MMQ_KS: the GEMM's K split fixed (an A/B; 0: chosen per shape, mmq-t.cuh)
    int mmq_ks = 0;
    // GGML_CUDA_TWICE=norm,rope,attn,mmv,other: timing probe, the kernels of those node classes are launched twice
    // (results are then wrong where a kernel is not idempotent); the step time's increase is the class's cost
    unsigned twice_mask = 0;
    // fused groups run (plan_fusions in ggml-cuda.cu), counted when launched eagerly or captured, not per replay:
    // mat-vecs sharing one activation, gate/up mat-vecs + SWIGLU, norms that also wrote the q8s activation
    int n_fused_mmv_group = 0, n_fused_swiglu = 0, n_fused_norm_q8 = 0, n_fused_rope_store = 0, n_fused_rope_qkv = 0,
        n_fused_fattn_q8 = 0, n_fused_mmv_norm = 0, n_fused_mmv_rope = 0;
    ggml_cuda_graph_cache * graphs = nullptr;
    ggml_cuda_profile * prof = nullptr; // GGML_CUDA_PROFILE=1: per-op GPU times, printed at free
    // prompts' weights dequantized for cuBLAS on a second stream, ahead of their GEMMs (dq-ahead.cuh);
    // GGML_CUDA_NO_DQ_AHEAD=1: inline
    bool use_dq_ahead = true;
    ggml_cuda_dq_ahead * dq = nullptr;
    int n_dq_ahead = 0; // GEMMs that read a weight dequantized ahead
    int n_mmw = 0;      // GEMMs launched on wgmma (mmq-w.cuh), eagerly or into a captured graph
    int n_mmw_order = 0; // their activations reordered by a launch of its own (ggml_cuda_mmw_order)
    int n_fused_w16 = 0; // ... or written in that order by the kernel producing them (fusion codes 17-20)
    ggml_cuda_host_writes * hw = nullptr; // set_tensor_async's gathered writes and staging ring (host-writes.cuh)
};

// ---- programmatic dependent launch (PDL, sm_90+) ----
// A kernel started by ggml_cuda_launch() while ctx.use_pdl may begin before the kernel ahead of it in the
// stream has finished. Such a kernel calls pdl_wait() before its first read of anything another kernel
// writes and before its first global write; before it, it may only read weights (constant during a graph),
// so a mat-vec's first weight loads overlap the tail of the kernel before. pdl_trigger() lets the next
// kernel launch (its blocks become resident and sit in their pdl_wait()). pdl_wait() returns once every
// kernel ahead has completed and its writes are visible, so the chain is as safe as plain stream order.
// Both are no-ops below sm_90 and for kernels launched the usual way.
static __device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
static __device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
// the first lines of a kernel that needs nothing before its inputs
static __device__ __forceinline__ void pdl_start() {
    pdl_trigger();
    pdl_wait();
}
// A load of what an earlier kernel of the stream wrote, in a kernel that may start early: ld.global.cg. ptxas treats
// __ldg (ld.global.nc) data as constant for the whole grid and may schedule the load above griddepcontrol.wait: the
// SASS of k_mmq had its activation loads before ACQBULK, and whole-model logits went wrong with PDL on (H200,
// 2026-11-26; right with a plain launch or a sync before it). The decode mat-vecs and attention keep __ldg for their
// activations / KV rows: ld.global.cg there cost 23-35% of tg128 (H200 A/B, docs/perf.md); in the SASS of the q4_0
// mat-vec instances the loads above ACQBULK are as many as one step's weight loads, and the model tests pass.
template <typename T> static __device__ __forceinline__ T ld_act(const T * p) { return __ldcg(p); }

// Launch on ctx.stream, as a programmatic dependent launch when ctx.use_pdl. Only for kernels that call
// pdl_wait() (or pdl_start()) as described above. Checked like every launch.
template <typename... P, typename... A>
static void ggml_cuda_launch(const ggml_cuda_context & ctx, void (*kernel)(P...), dim3 grid, dim3 block, size_t smem,
                             A &&... args) {
    if (!ctx.use_pdl) {
        kernel<<<grid, block, smem, ctx.stream>>>(std::forward<A>(args)...);
        CUDA_CHECK_LAUNCH();
        return;
    }
    cudaLaunchAttribute attr[1] = {};
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = smem;
    cfg.stream = ctx.stream;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    CUDA_CHECK(cudaLaunchKernelEx(&cfg, kernel, std::forward<A>(args)...));
}

// Shape and byte strides, passed by value to kernels.
struct cuda_shape {
    int64_t ne[4];
    int64_t nb[4];
};
inline cuda_shape cuda_shape_of(const ggml_tensor * t) {
    cuda_shape s;
    for (int i = 0; i < 4; ++i) {
        s.ne[i] = t->ne[i];
        s.nb[i] = (int64_t)t->nb[i];
    }
    return s;
}

// (i1, i2, i3) of the flat row index r = i1 + ne1 * (i2 + ne2 * i3). 32-bit divisions when r and the counts fit:
// the 64-bit ones are emulated, several times slower, and made rope of a 512-token prompt compute-bound (ncu).
static __device__ __forceinline__ void unravel_row(int64_t r, int64_t ne1, int64_t ne2, int64_t & i1, int64_t & i2,
                                                   int64_t & i3) {
    if (r <= UINT32_MAX && ne1 <= UINT32_MAX && ne2 <= UINT32_MAX) {
        const uint32_t a = (uint32_t)r, n1 = (uint32_t)ne1, n2 = (uint32_t)ne2;
        const uint32_t q = a / n1, q2 = q / n2;
        i1 = a - q * n1;
        i2 = q - q2 * n2;
        i3 = q2;
    } else {
        i1 = r % ne1;
        i2 = (r / ne1) % ne2;
        i3 = r / (ne1 * ne2);
    }
}
static __device__ __forceinline__ int64_t cuda_ceil_div_d(int64_t a, int64_t b) { return (a + b - 1) / b; }
// (q, r) of a / b, in 32 bits when both fit
static __device__ __forceinline__ void divmod(int64_t a, int64_t b, int64_t & q, int64_t & r) {
    if (a <= UINT32_MAX && b <= UINT32_MAX) {
        const uint32_t q32 = (uint32_t)a / (uint32_t)b;
        q = q32;
        r = (uint32_t)a - q32 * (uint32_t)b;
    } else {
        q = a / b;
        r = a % b;
    }
}

static __device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffff, v, o);
    return v;
}
static __device__ __forceinline__ float warp_max(float v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffff, v, o));
    return v;
}
// Block-wide sum/max (blockDim.x a multiple of 32, <= 1024); every thread gets the result.
static __device__ __forceinline__ float block_sum(float v, float * s_tmp /* [32] */) {
    v = warp_sum(v);
    if (blockDim.x == WARP_SIZE) return v;
    const int w = threadIdx.x / WARP_SIZE, l = threadIdx.x % WARP_SIZE;
    __syncthreads();
    if (l == 0) s_tmp[w] = v;
    __syncthreads();
    v = l < (int)(blockDim.x / WARP_SIZE) ? s_tmp[l] : 0.0f;
    return warp_sum(v);
}
static __device__ __forceinline__ float block_max(float v, float * s_tmp /* [32] */) {
    v = warp_max(v);
    if (blockDim.x == WARP_SIZE) return v;
    const int w = threadIdx.x / WARP_SIZE, l = threadIdx.x % WARP_SIZE;
    __syncthreads();
    if (l == 0) s_tmp[w] = v;
    __syncthreads();
    v = l < (int)(blockDim.x / WARP_SIZE) ? s_tmp[l] : -INFINITY;
    return warp_max(v);
}

// element loads/stores of the supported float types
template <typename T> static __device__ __forceinline__ float to_f32(T v);
template <> __device__ __forceinline__ float to_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ float to_f32<half>(half v) { return __half2float(v); }
template <typename T> static __device__ __forceinline__ T from_f32(float v);
template <> __device__ __forceinline__ float from_f32<float>(float v) { return v; }
template <> __device__ __forceinline__ half from_f32<half>(float v) { return __float2half(v); }

// device-side q8 blocks (same bytes as block_q8_0 / block_q8_1)
struct cuda_block_q8_0 {
    half d;
    int8_t qs[32];
};
struct cuda_block_q8_1 {
    half2 ds; // d, d*sum(qs)
    int8_t qs[32];
};
static_assert(sizeof(cuda_block_q8_0) == 34 && sizeof(cuda_block_q8_1) == 36, "q8 block sizes");

inline int64_t cuda_ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// whether the environment variable `name` is set to 0: the A/B switches that turn a default form off
inline bool ggml_cuda_env_zero(const char * name) {
    const char * v = std::getenv(name);
    return v && std::atoi(v) == 0;
}

// most mat-vecs one fused launch computes (ggml_cuda_mul_mat_group in mulmat.cuh)
#define MMV_GROUP_MAX 3

// elementwise grid: x covers ne0 in blocks of bs (so one long row still fills the GPU), y the rows
inline dim3 ew_grid(int64_t ne0, int64_t rows, int bs) {
    const int64_t gx = cuda_ceil_div(ne0, bs);
    return dim3((unsigned)(gx < 65535 ? gx : 65535), (unsigned)(rows < 65535 ? rows : 65535));
}

// Every op: void ggml_cuda_op_<name>(ggml_cuda_context & ctx, ggml_tensor * dst);
#define GGML_CUDA_OP(name) void ggml_cuda_op_##name(ggml_cuda_context & ctx, ggml_tensor * dst)
