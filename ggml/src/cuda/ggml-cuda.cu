// ggml-cuda.cu - the CUDA backend glue: device and pinned-host buffer types, the backend
// interface (graph_compute dispatching per op, supports_op, synchronize), the fused
// RMS_NORM+MUL, and CUDA-graph capture/replay of repeated graphs (decode steps).
#include "all-reduce.cuh"
#include "argmax.cuh"
#include "binary.cuh"
#include "common.cuh"
#include "cpy.cuh"
#include "diagmask.cuh"
#include "dq-ahead.cuh"
#include "fattn.cuh"
#include "getrows.cuh"
#include "host-writes.cuh"
#include "kq-mask.cuh"
#include "ggml-cuda.h"
#include "mmq.cuh"
#include "mmvq.cuh"
#include "mulmat.cuh"
#include "norm.cuh"
#include "profile.cuh"
#include "q8repack.cuh"
#include "rope.cuh"
#include "setrows.cuh"
#include "softmax.cuh"
#include "unary.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#define GGML_CUDA_MAX_DEVICES 16

// ---- devices ---------------------------------------------------------------------------------
int ggml_backend_cuda_get_device_count() {
    static int count = [] {
        int n = 0;
        const cudaError_t err = cudaGetDeviceCount(&n);
        if (err != cudaSuccess) {
            cudaGetLastError(); // clear the sticky-free error so later calls start clean
            GGML_LOG_DEBUG("%s: no CUDA devices: %s\n", __func__, cudaGetErrorString(err));
            return 0;
        }
        return n > GGML_CUDA_MAX_DEVICES ? GGML_CUDA_MAX_DEVICES : n;
    }();
    return count;
}

void ggml_backend_cuda_get_device_memory(int device, size_t * free, size_t * total) {
    *free = *total = 0;
    if (device < 0 || device >= ggml_backend_cuda_get_device_count()) return;
    int prev = 0;
    if (cudaGetDevice(&prev) != cudaSuccess) prev = device;
    if (cudaSetDevice(device) == cudaSuccess && cudaMemGetInfo(free, total) != cudaSuccess) *free = *total = 0;
    cudaGetLastError();
    cudaSetDevice(prev);
}

// ---- device buffers ---------------------------------------------------------------------------
struct cuda_buffer_ctx {
    int device;
    void * ptr;
};

static void cuda_buffer_free(ggml_backend_buffer_t buf) {
    cuda_buffer_ctx * c = (cuda_buffer_ctx *)buf->context;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaFree(c->ptr));
    delete c; // buf itself is deleted by ggml_backend_buffer_free
}
static void * cuda_buffer_get_base(ggml_backend_buffer_t buf) { return ((cuda_buffer_ctx *)buf->context)->ptr; }
static void cuda_buffer_set_tensor(ggml_backend_buffer_t buf, ggml_tensor * t, const void * data, size_t offset,
                                   size_t size) {
    CUDA_CHECK(cudaSetDevice(((cuda_buffer_ctx *)buf->context)->device));
    if (ggml_cuda_should_repack(buf, t, offset, size)) return ggml_cuda_repack_set(t, data, offset, size);
    // legacy-stream copy: ordered after the backend streams' queued work (they are blocking streams)
    CUDA_CHECK(cudaMemcpy((char *)t->data + offset, data, size, cudaMemcpyHostToDevice));
}
static void cuda_buffer_get_tensor(ggml_backend_buffer_t buf, const ggml_tensor * t, void * data, size_t offset,
                                   size_t size) {
    CUDA_CHECK(cudaSetDevice(((cuda_buffer_ctx *)buf->context)->device));
    if (ggml_cuda_repacked(t)) return ggml_cuda_repack_get(t, data, offset, size);
    CUDA_CHECK(cudaMemcpy(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost));
}
static bool cuda_buft_is_device(ggml_backend_buffer_type_t buft);
static bool cuda_buffer_cpy_tensor(ggml_backend_buffer_t buf, const ggml_tensor * src, ggml_tensor * dst) {
    if (!src->buffer) return false;
    if (ggml_cuda_repacked(src) || ggml_cuda_should_repack(buf, dst, 0, ggml_nbytes(dst))) return false; // bounce
    const bool src_dev = cuda_buft_is_device(src->buffer->buft);
    if (!src_dev && !ggml_backend_buffer_is_host(src->buffer)) return false;
    CUDA_CHECK(cudaSetDevice(((cuda_buffer_ctx *)buf->context)->device));
    CUDA_CHECK(cudaMemcpy(dst->data, src->data, ggml_nbytes(src), cudaMemcpyDefault));
    return true;
}
static void cuda_buffer_clear(ggml_backend_buffer_t buf, uint8_t value) {
    cuda_buffer_ctx * c = (cuda_buffer_ctx *)buf->context;
    CUDA_CHECK(cudaSetDevice(c->device));
    CUDA_CHECK(cudaMemset(c->ptr, value, buf->size));
    CUDA_CHECK(cudaDeviceSynchronize());
}

static const char * cuda_buft_get_name(ggml_backend_buffer_type_t buft) {
    static char names[GGML_CUDA_MAX_DEVICES][16];
    const int dev = (int)(intptr_t)buft->context;
    snprintf(names[dev], sizeof(names[dev]), "CUDA%d", dev);
    return names[dev];
}
static bool cuda_buft_is_device(ggml_backend_buffer_type_t buft) { return buft->iface.get_name == cuda_buft_get_name; }

static ggml_backend_buffer_t cuda_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    const int dev = (int)(intptr_t)buft->context;
    if (cudaSetDevice(dev) != cudaSuccess) {
        GGML_LOG_ERROR("%s: cannot select CUDA device %d: %s\n", __func__, dev, cudaGetErrorString(cudaGetLastError()));
        return nullptr;
    }
    void * ptr = nullptr;
    const cudaError_t err = cudaMalloc(&ptr, size ? size : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        size_t free_b = 0, total_b = 0;
        cudaMemGetInfo(&free_b, &total_b);
        cudaGetLastError();
        GGML_LOG_ERROR("%s: cudaMalloc of %zu bytes failed on CUDA%d (%zu bytes free of %zu): %s\n", __func__, size,
                       dev, free_b, total_b, cudaGetErrorString(err));
        return nullptr;
    }
    ggml_backend_buffer_i iface = {};
    iface.free_buffer = cuda_buffer_free;
    iface.get_base = cuda_buffer_get_base;
    iface.init_tensor = nullptr;
    iface.set_tensor = cuda_buffer_set_tensor;
    iface.get_tensor = cuda_buffer_get_tensor;
    iface.cpy_tensor = cuda_buffer_cpy_tensor;
    iface.clear = cuda_buffer_clear;
    return ggml_backend_buffer_init(buft, iface, new cuda_buffer_ctx{dev, ptr}, size);
}
static size_t cuda_buft_get_alignment(ggml_backend_buffer_type_t) { return 256; }
static size_t cuda_buft_get_max_size(ggml_backend_buffer_type_t) { return SIZE_MAX; }
static bool cuda_buft_is_host(ggml_backend_buffer_type_t) { return false; }

ggml_backend_buffer_type_t ggml_backend_cuda_buffer_type(int device) {
    static ggml_backend_buffer_type types[GGML_CUDA_MAX_DEVICES];
    static std::once_flag once;
    if (device < 0 || device >= ggml_backend_cuda_get_device_count()) {
        GGML_LOG_ERROR("%s: no CUDA device %d (%d found)\n", __func__, device, ggml_backend_cuda_get_device_count());
        return nullptr;
    }
    std::call_once(once, [] {
        for (int i = 0; i < GGML_CUDA_MAX_DEVICES; ++i) {
            types[i].iface = {
                cuda_buft_get_name, cuda_buft_alloc_buffer, cuda_buft_get_alignment, cuda_buft_get_max_size, nullptr,
                cuda_buft_is_host};
            types[i].context = (void *)(intptr_t)i;
        }
    });
    return &types[device];
}

// ---- pinned host buffers ----------------------------------------------------------------------
static void host_buffer_free(ggml_backend_buffer_t buf) { CUDA_CHECK(cudaFreeHost(buf->context)); }
static void * host_buffer_get_base(ggml_backend_buffer_t buf) { return buf->context; }
static void host_buffer_set_tensor(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset,
                                   size_t size) {
    memcpy((char *)t->data + offset, data, size);
}
static void host_buffer_get_tensor(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset,
                                   size_t size) {
    memcpy(data, (const char *)t->data + offset, size);
}
static void host_buffer_clear(ggml_backend_buffer_t buf, uint8_t value) { memset(buf->context, value, buf->size); }

static const char * host_buft_get_name(ggml_backend_buffer_type_t) { return "CUDA_Host"; }
static ggml_backend_buffer_t host_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    void * ptr = nullptr;
    const cudaError_t err = cudaMallocHost(&ptr, size ? size : 1);
    if (err != cudaSuccess) {
        cudaGetLastError();
        GGML_LOG_ERROR("%s: cudaMallocHost of %zu bytes failed: %s\n", __func__, size, cudaGetErrorString(err));
        return nullptr;
    }
    ggml_backend_buffer_i iface = {};
    iface.free_buffer = host_buffer_free;
    iface.get_base = host_buffer_get_base;
    iface.set_tensor = host_buffer_set_tensor;
    iface.get_tensor = host_buffer_get_tensor;
    iface.clear = host_buffer_clear;
    return ggml_backend_buffer_init(buft, iface, ptr, size);
}
static size_t host_buft_get_alignment(ggml_backend_buffer_type_t) { return 64; }
static bool host_buft_is_host(ggml_backend_buffer_type_t) { return true; }

ggml_backend_buffer_type_t ggml_backend_cuda_host_buffer_type() {
    static ggml_backend_buffer_type type = {{host_buft_get_name, host_buft_alloc_buffer, host_buft_get_alignment,
                                             cuda_buft_get_max_size, nullptr, host_buft_is_host},
                                            nullptr};
    return &type;
}

// ---- CUDA graphs ------------------------------------------------------------------------------
// A graph is replayed when its topology (ops, types, shapes, strides, fusions) matches one seen
// before. Same pointers and params: the instantiated graph is launched as is. Otherwise the
// stream is captured again and the executable is updated in place (cudaGraphExecUpdate).
// The scheduler's split graph launched last time, not planned again since (the same non-zero
// plan_id: decode steps of a kept graph), is launched without building and comparing its record.
struct cuda_graph_entry {
    std::vector<int64_t> key;
    std::vector<uintptr_t> vals;
    cudaGraphExec_t exec = nullptr;
    uint64_t last_use = 0;
    int n_fail = 0; // consecutive failed updates; >= 4: run this topology eagerly
    int n_recap = 0; // consecutive re-captures without a plain replay; >= 4: eager as well (capture + update
                     // on the host are serial with the GPU, eager launches overlap it)
    uint64_t id = 0;
};
struct ggml_cuda_graph_cache {
    std::vector<cuda_graph_entry> entries;
    uint64_t tick = 0;
    int n_replay = 0, n_update = 0, n_instantiate = 0; // stats (for tests and tuning)
    uint64_t next_id = 0, last_id = 0; // last_id: the entry the last call launched (0: none)
    std::vector<uintptr_t> last_vals;  // and that call's graph_vals
    uint64_t last_plan_id = 0;         // and its graph's plan_id (ggml-impl.h; 0: none)
    void clear_execs() {
        for (auto & e : entries)
            if (e.exec) {
                cudaGraphExecDestroy(e.exec);
                e.exec = nullptr;
            }
    }
};

// ---- profiling (GGML_CUDA_PROFILE=1): eager, an event pair per node, totals per op at free ------
static void run_node(ggml_cuda_context & ctx, ggml_tensor * t);
static int run_fused(ggml_cuda_context & ctx, ggml_cgraph * gf, int i, int fused);

struct ggml_cuda_profile {
    std::vector<cudaEvent_t> ev;
    std::map<std::string, std::pair<double, int64_t>> per_op; // ms, count
    double gpu_ms = 0, host_ms = 0;
    int64_t n_graphs = 0;
    int mode = 1; // 1: per-op GPU times (eager); 2: host-side times of the normal path
    // mode 2 (microseconds, summed): outside = between two graph_compute calls (scheduler, graph
    // building, input copies, output reads); sig = key + fusion plan; run = launches or capture;
    // upd = graph update/instantiate; launch = cudaGraphLaunch
    double outside = 0, sig = 0, run = 0, upd = 0, launch = 0;
    int64_t last_end = 0, n_calls = 0;
    // mode 2: GPU time of each call's work (an event pair around it, read at the next call)
    cudaEvent_t g0 = nullptr, g1 = nullptr;
    bool pending = false;
    double gpu_us = 0;
    int64_t n_gpu = 0;
    bool warmed = false; // mode 1: the backend's first graph (cuBLAS set-up, first-touch) is not counted
};

static std::string profile_label(const ggml_cuda_context & ctx, const ggml_tensor * t, int fused) {
    switch (fused) { // codes: plan_fusions
        case 1: return "RMS_NORM+MUL";
        case 2: return "ADD+RMS_NORM+MUL";
        case 6: return "RMS_NORM+MUL+Q8S";
        case 7: return "ADD+RMS_NORM+MUL+Q8S";
        case 3:
        case 4: return std::string("MUL_MAT ") + ggml_type_name(t->src[0]->type) + " vec x" + (fused == 3 ? "2" : "3");
        case 5: return std::string("MUL_MAT ") + ggml_type_name(t->src[0]->type) + " vec gate+up+SWIGLU";
        case 8: return "ROPE+SET_ROWS";
        case 9:
        case 10: return "ROPE q+ROPE k+SET_ROWS k,v";
        case 11: return "FLASH_ATTN_EXT+Q8S";
        case 12: return std::string("MUL_MAT ") + ggml_type_name(t->src[0]->type) + " vec+ADD+RMS_NORM+MUL+Q8S";
        case 15:
        case 16:
            return std::string("MUL_MAT ") + ggml_type_name(t->src[0]->type) + " gemm n<=64 x" +
                   (fused == 15 ? "2" : "3");
        case 17: return "RMS_NORM+MUL+W16";
        case 18: return "ADD+RMS_NORM+MUL+W16";
        case 19: return "SWIGLU+W16";
        case 20: return "FLASH_ATTN_EXT+W16";
        default: break;
    }
    std::string l = ggml_op_name(t->op);
    if (t->op == GGML_OP_MUL_MAT) {
        const int64_t n = t->src[1]->ne[1];
        const int64_t vec_n = ggml_is_quantized(t->src[0]->type) ? ggml_cuda_mmv_max_n(ctx) : MUL_MAT_VEC_MAX_N;
        l += std::string(" ") + ggml_type_name(t->src[0]->type) +
             (n <= vec_n ? " vec" : n <= 128 ? " gemm n<=128" : " gemm");
        if (t->src[0]->ne[2] > 1 || t->src[1]->ne[2] > 1) l += " batched";
    } else if (t->op == GGML_OP_FLASH_ATTN_EXT) {
        l += t->src[0]->ne[1] <= 128 ? " q<=128" : " q>128";
    }
    return l;
}

static void profile_report(ggml_cuda_context & ctx);

static ggml_status profile_graph(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::vector<uint8_t> & fused) {
    ggml_cuda_profile & p = *ctx.prof;
    const int n = gf->n_nodes;
    while ((int)p.ev.size() < n + 1) {
        cudaEvent_t e;
        CUDA_CHECK(cudaEventCreate(&e));
        p.ev.push_back(e);
    }
    const int64_t t0 = ggml_time_us();
    ctx.pool.reset();
    ctx.qcache = ctx.hcache = ctx.wcache = ctx.rcache = {};
    std::vector<int> idx;
    CUDA_CHECK(cudaEventRecord(p.ev[0], ctx.stream));
    for (int i = 0; i < n; ++i) {
        ggml_tensor * t = gf->nodes[i];
        if (ggml_nelements(t) == 0 || ggml_is_view_op(t->op) || t->op == GGML_OP_NONE) continue;
        const int step = run_fused(ctx, gf, i, fused[i]);
        idx.push_back(i);
        CUDA_CHECK(cudaEventRecord(p.ev[idx.size()], ctx.stream));
        i += step - 1;
    }
    const int64_t t1 = ggml_time_us();
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    float total = 0;
    for (size_t k = 0; k < idx.size(); ++k) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, p.ev[k], p.ev[k + 1]));
        auto & e = p.per_op[profile_label(ctx, gf->nodes[idx[k]], fused[idx[k]])];
        e.first += ms;
        e.second += 1;
        total += ms;
    }
    p.gpu_ms += total;
    p.host_ms += (t1 - t0) / 1000.0;
    p.n_graphs++;
    if (!p.warmed) { // drop the first graph: warm-up
        p.warmed = true;
        p.per_op.clear();
        p.gpu_ms = p.host_ms = 0;
        p.n_graphs = 0;
    }
    if (!ctx.pool.extra.empty()) ctx.pool.settle();
    if (p.n_graphs == 128) profile_report(ctx);
    return GGML_STATUS_SUCCESS;
}

static void profile_report(ggml_cuda_context & ctx) {
    ggml_cuda_profile & p = *ctx.prof;
    if (p.mode == 2 && p.n_calls > 0) {
        const double n = (double)p.n_calls;
        GGML_LOG_WARN("%s host profile over %lld graph_compute calls (us/call): outside %.1f, signature %.1f, "
                      "launch-or-capture %.1f, graph update %.1f, graph launch %.1f; GPU time of a call's work %.1f\n",
                      ctx.name, (long long)p.n_calls, p.outside / n, p.sig / n, p.run / n, p.upd / n, p.launch / n,
                      p.n_gpu ? p.gpu_us / p.n_gpu : 0.0);
        p.outside = p.sig = p.run = p.upd = p.launch = p.gpu_us = 0;
        p.n_calls = p.n_gpu = 0;
        return;
    }
    if (p.n_graphs == 0) return;
    GGML_LOG_WARN("%s profile: %lld graphs, GPU %.3f ms/graph (kernels back to back), host launch %.3f ms/graph\n",
                  ctx.name, (long long)p.n_graphs, p.gpu_ms / p.n_graphs, p.host_ms / p.n_graphs);
    std::vector<std::pair<double, std::string>> rows;
    for (auto & [k, v] : p.per_op)
        rows.push_back({v.first, k});
    std::sort(rows.rbegin(), rows.rend());
    for (auto & [ms, k] : rows)
        GGML_LOG_WARN("  %-28s %9.3f ms/graph %6.1f%%  %8.1f us/call\n", k.c_str(), ms / p.n_graphs,
                      100.0 * ms / p.gpu_ms, 1000.0 * ms / p.per_op[k].second);
    p.per_op.clear();
    p.gpu_ms = p.host_ms = 0;
    p.n_graphs = 0;
}

// ---- graph execution --------------------------------------------------------------------------
static void run_node(ggml_cuda_context & ctx, ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            break;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            ggml_cuda_op_dup(ctx, t);
            break;
        case GGML_OP_CPY:
            ggml_cuda_op_cpy(ctx, t);
            break;
        case GGML_OP_ADD:
            ggml_cuda_op_add(ctx, t);
            break;
        case GGML_OP_MUL:
            ggml_cuda_op_mul(ctx, t);
            break;
        case GGML_OP_SCALE:
            ggml_cuda_op_scale(ctx, t);
            break;
        case GGML_OP_SILU:
            ggml_cuda_op_silu(ctx, t);
            break;
        case GGML_OP_SWIGLU:
            ggml_cuda_op_swiglu(ctx, t);
            break;
        case GGML_OP_GET_ROWS:
            ggml_cuda_op_get_rows(ctx, t);
            break;
        case GGML_OP_SET_ROWS:
            ggml_cuda_op_set_rows(ctx, t);
            break;
        case GGML_OP_DIAG_MASK_INF:
            ggml_cuda_op_diag_mask_inf(ctx, t);
            break;
        case GGML_OP_SOFT_MAX:
            ggml_cuda_op_soft_max(ctx, t);
            break;
        case GGML_OP_ROPE:
            ggml_cuda_op_rope(ctx, t);
            break;
        case GGML_OP_RMS_NORM:
            ggml_cuda_op_rms_norm(ctx, t);
            break;
        case GGML_OP_MUL_MAT:
            ggml_cuda_op_mul_mat(ctx, t);
            break;
        case GGML_OP_ARGMAX:
            ggml_cuda_op_argmax(ctx, t);
            break;
        case GGML_OP_ALL_REDUCE:
            ggml_cuda_op_all_reduce(ctx, t);
            break;
        case GGML_OP_KQ_MASK:
            ggml_cuda_op_kq_mask(ctx, t);
            break;
        case GGML_OP_FLASH_ATTN_EXT:
            ggml_cuda_op_flash_attn_ext(ctx, t);
            break;
        default:
            GGML_ABORT("CUDA backend: op %s is not implemented", ggml_op_name(t->op));
    }
}

// Fusion codes, fused[i] for the first node i of a group (the other nodes of the group keep 0):
//   1: node i (RMS_NORM) is computed together with node i+1 (MUL by a weight);
//   2: node i (ADD) with i+1 (its RMS_NORM) and i+2 (MUL by a weight), the add still written;
//   3 / 4: nodes i..i+1 / i..i+2 are MUL_MATs of one activation column (same src1): one mat-vec launch
//      (ggml_cuda_mul_mat_group);
//   5: nodes i, i+1 are MUL_MATs (gate, up; same src1) and i+2 their SWIGLU: one launch writes the SWIGLU
//      result, the gate/up results are not written (no other reader, not outputs);
//   6 / 7: as 1 / 2, and the MUL result is also quantized (q8s) into ctx.qcache for the quantized-weight
//      mat-vecs that are its only readers;
//   8: node i (ROPE), i+1 (its RESHAPE to rows) and i+2 (SET_ROWS of those rows into the KV cache): one kernel
//      writes the rotated rows into their cells, the rope result is not written (no other reader, no output);
//   9 / 10: ROPE(q), view, then code 8's three nodes for k, then [view,] SET_ROWS(v) (7 / 6 nodes): one launch
//      (ggml_cuda_op_rope_qkv). Computing k and v at q's place is safe: their inputs are ready, and their
//      outputs are cache cells, not allocator memory;
//   11: node i (FLASH_ATTN_EXT) and i+1 (its reshape to [D * n_head, n_tokens] rows): the attention kernel also
//      quantizes its output (q8s) into ctx.qcache for the quantized-weight mat-vecs that are the only readers.
//   12: node i (a one-column MUL_MAT, read only by i+1), i+1 (ADD of it and the residual), i+2 (RMS_NORM) and
//      i+3 (MUL by a weight): one mat-vec launch writes the ADD and the q8s of ADD * weight with the norm's scale
//      deferred to the mat-vecs reading the MUL (all of them must apply it: ggml_cuda_mul_mat_reads_q8s_norm);
//      the MUL_MAT, RMS_NORM and MUL results are not written. A code 7 group with the mat-vec before it (wo or
//      ffn_down of a decode step: the norm kernel after it goes away).
//   13 / 14: a code 4 group of q, k, v (nodes i..i+2), q's view as heads (i+3) and a code 9 / 10 group after it
//      (i+4..): the group's mat-vec also rotates q and k and stores k and v in their cache rows
//      (ggml_cuda_mul_mat_group_rope; a q8_0 / q4_0 cache too: each 32-row group quantized by the last block to
//      compute it); q, k, v and the rope(k) result are not written (nothing else reads them).
//      The rope launch between the q/k/v mat-vecs and the attention of a decode step goes away.
//   15 / 16: nodes i..i+1 / i..i+2 are MUL_MATs of one activation of 2..64 columns that would each run the wgmma
//      GEMM (q, k, v or gate, up of a batched decode step): one launch (ggml_cuda_mul_mat_group_wg).
//   17 / 18: as 1 / 2, 19: a SWIGLU alone, 20: as 11 (FLASH_ATTN_EXT and its reshape to rows): the result (the MUL,
//      the SWIGLU, the reshape) is also written in the wgmma GEMM's f16 order (mmw-order.cuh) into ctx.wcache, where
//      a MUL_MAT reading it runs that GEMM (a batched decode step's q/k/v, wo, gate/up, ffn_down, output): the
//      reorder launch before each of those GEMMs goes away. The f32 result is written as well.
// Only adjacent nodes are fused: computing node i+1 / i+2 at node i's place is then safe (their inputs are
// ready, and the allocator cannot have handed their outputs memory that node i still reads). One exception,
// checked by ggml_cuda_mul_mat_swiglu_ok: SWIGLU's output may lie over the activation once gate/up were its
// last readers (the f16 kernel then does not fuse; the q8_0 one has quantized it before).
static int fused_span(int code) {
    if (code == 13) return 11;
    if (code == 14) return 10;
    if (code == 9) return 7;
    if (code == 10) return 6;
    if (code == 11) return 2;
    if (code == 12) return 4;
    if (code == 19) return 1;
    return code == 2 || code == 4 || code == 5 || code == 7 || code == 8 || code == 16 || code == 18 ? 3 : code ? 2 : 1;
}

// f(t) for every tensor node u reads: its sources, what they view, and what u itself views
template <typename F> static void for_each_read(const ggml_tensor * u, F f) {
    for (int k = 0; k < GGML_MAX_SRC; ++k) {
        const ggml_tensor * s = u->src[k];
        if (!s) continue;
        f(s);
        if (s->view_src) f(s->view_src);
    }
    if (u->view_src) f(u->view_src);
}

static void plan_norm_fusions(ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::vector<int> cand;
    for (int i = 0; i + 1 < n; ++i) {
        ggml_tensor * a = gf->nodes[i];
        ggml_tensor * b = gf->nodes[i + 1];
        if (a->op != GGML_OP_RMS_NORM || b->op != GGML_OP_MUL || b->src[0] != a || b->src[1] == a) continue;
        if (a->flags & GGML_TENSOR_FLAG_OUTPUT) continue;
        if (a->type != b->type || !ggml_are_same_shape(a, b) || b->src[1]->type != GGML_TYPE_F32) continue;
        cand.push_back(i);
    }
    if (cand.empty()) return;
    // one pass: a candidate used by any node other than its MUL is not fused
    std::map<const ggml_tensor *, int> norm_at;
    for (int i : cand) {
        fused[i] = 1;
        norm_at[gf->nodes[i]] = i;
    }
    for (int j = 0; j < n; ++j) {
        for_each_read(gf->nodes[j], [&](const ggml_tensor * t) {
            const auto it = norm_at.find(t);
            if (it != norm_at.end() && j != it->second && j != it->second + 1) fused[it->second] = 0;
        });
    }
    for (int i : cand) { // a norm+mul pair right after the ADD that feeds it: three nodes
        if (!fused[i] || i == 0) continue;
        ggml_tensor * add = gf->nodes[i - 1];
        if (add->op == GGML_OP_ADD && gf->nodes[i]->src[0] == add && (i < 2 || fused[i - 2] != 1) &&
            ggml_cuda_add_rms_norm_mul_ok(add, gf->nodes[i], gf->nodes[i + 1])) {
            fused[i - 1] = 2;
            fused[i] = 0;
        }
    }
}

// codes 3/4/5 over the nodes no norm fusion covers
static void plan_mat_vec_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::map<const ggml_tensor *, int> glu; // gate/up result -> first node of its code-5 candidate
    for (int i = 0; i + 1 < n; ++i) {
        if (fused[i]) {
            i += fused_span(fused[i]) - 1;
            continue;
        }
        ggml_tensor * mm[3] = {gf->nodes[i], gf->nodes[i + 1], i + 2 < n ? gf->nodes[i + 2] : nullptr};
        if (mm[0]->op != GGML_OP_MUL_MAT || mm[1]->op != GGML_OP_MUL_MAT || mm[0]->src[1] != mm[1]->src[1]) continue;
        ggml_tensor * g = mm[2];
        if (g && g->op == GGML_OP_SWIGLU && !(mm[0]->flags & GGML_TENSOR_FLAG_OUTPUT) &&
            !(mm[1]->flags & GGML_TENSOR_FLAG_OUTPUT) &&
            ((g->src[0] == mm[0] && g->src[1] == mm[1]) || (g->src[0] == mm[1] && g->src[1] == mm[0])) &&
            ggml_cuda_mul_mat_swiglu_ok(ctx, g->src[0], g->src[1], g)) {
            fused[i] = 5;
            glu[mm[0]] = i;
            glu[mm[1]] = i;
            i += 2;
        } else if (g && ggml_cuda_mul_mat_group_ok(ctx, mm, 3)) {
            fused[i] = 4;
            i += 2;
        } else if (ggml_cuda_mul_mat_group_ok(ctx, mm, 2)) {
            fused[i] = 3;
            i += 1;
        } else if (g && ggml_cuda_mul_mat_group_wg_ok(ctx, mm, 3)) {
            fused[i] = 16;
            i += 2;
        } else if (ggml_cuda_mul_mat_group_wg_ok(ctx, mm, 2)) {
            fused[i] = 15;
            i += 1;
        }
    }
    if (glu.empty()) return;
    // a gate/up result read by any node but its SWIGLU must be written: then only the pair is fused
    for (int j = 0; j < n; ++j) {
        for_each_read(gf->nodes[j], [&](const ggml_tensor * t) {
            const auto it = glu.find(t);
            if (it == glu.end()) return;
            const int i = it->second;
            if (fused[i] != 5 || j == i + 2) return;
            ggml_tensor * const mm[2] = {gf->nodes[i], gf->nodes[i + 1]};
            fused[i] = ggml_cuda_mul_mat_group_ok(ctx, mm, 2) ? 3 : 0;
        });
    }
}

// is u a quantized-weight mat-vec reading t (f32 rows of K) as its activation through the q8s layout (repacked
// q8_0, q4_0 ... q6_K)?
static bool is_q8_vec_reader(const ggml_cuda_context & ctx, const ggml_tensor * u, const ggml_tensor * t) {
    return u->op == GGML_OP_MUL_MAT && u->src[1] == t && u->src[0] != t && ggml_cuda_mul_mat_reads_q8s(ctx, u) &&
           u->src[0]->ne[0] == t->ne[0];
}

// codes 1/2 -> 6/7 where the norm's result (the MUL node) is read only by quantized-weight mat-vecs of one column
// (q8s readers: they then find it quantized in ctx.qcache)
static void plan_norm_q8_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::map<const ggml_tensor *, int> cand; // MUL result -> first node of its code 1/2 group
    for (int i = 0; i < n; ++i) {
        if (fused[i] != 1 && fused[i] != 2) continue;
        const ggml_tensor * mul = gf->nodes[i + fused_span(fused[i]) - 1];
        if (mul->type == GGML_TYPE_F32 && ggml_is_contiguous(mul) && mul->ne[0] % 32 == 0 && ggml_nrows(mul) == 1)
            cand[mul] = i;
    }
    if (cand.empty()) return;
    std::map<int, int> n_readers; // first node -> q8_0 mat-vecs reading its result; -1: another reader
    for (int j = 0; j < n; ++j) {
        const ggml_tensor * u = gf->nodes[j];
        for_each_read(u, [&](const ggml_tensor * t) {
            const auto it = cand.find(t);
            if (it == cand.end()) return;
            int & r = n_readers[it->second];
            if (r >= 0) r = is_q8_vec_reader(ctx, u, t) ? r + 1 : -1;
        });
    }
    for (const auto & [i, r] : n_readers)
        if (r > 0) fused[i] = fused[i] == 1 ? 6 : 7;
}

// codes 8, 9, 10 (rope + KV stores)
static void plan_rope_store_fusions(ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::map<const ggml_tensor *, int> cand; // rope(k) result and its reshape -> the group's first node
    std::map<int, int> k_at;                 // the group's first node -> the rope(k) node
    auto free_span = [&](int i, int span) {
        for (int k = 0; k < span; ++k)
            if (i + k >= n || fused[i + k]) return false;
        return true;
    };
    for (int i = 0; i + 2 < n; ++i) {
        ggml_tensor ** t = gf->nodes + i;
        int code = 0, rk = i;
        if (free_span(i, 7) && ggml_cuda_rope_qkv_ok(t, 7, true))
            code = 9, rk = i + 2;
        else if (free_span(i, 6) && ggml_cuda_rope_qkv_ok(t, 6, true))
            code = 10, rk = i + 2;
        else if (free_span(i, 3) && ggml_cuda_rope_set_rows_ok(t[0], t[1], t[2]))
            code = 8;
        if (!code || ((gf->nodes[rk]->flags | gf->nodes[rk + 1]->flags) & GGML_TENSOR_FLAG_OUTPUT)) continue;
        fused[i] = (uint8_t)code;
        cand[gf->nodes[rk]] = cand[gf->nodes[rk + 1]] = i;
        k_at[i] = rk;
        i += fused_span(code) - 1;
    }
    if (cand.empty()) return;
    // the rope(k) result may be read only by its reshape and that by the SET_ROWS (the next two nodes)
    for (int j = 0; j < n; ++j) {
        for_each_read(gf->nodes[j], [&](const ggml_tensor * t) {
            const auto it = cand.find(t);
            if (it == cand.end()) return;
            const int rk = k_at[it->second];
            if (j != rk + 1 && j != rk + 2) fused[it->second] = 0;
        });
    }
}

// codes 4 + 9 / 10 -> 13 / 14 (the q/k/v group takes the rope + KV stores after it)
static void plan_mmv_rope_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::map<const ggml_tensor *, int> cand; // q, k, v and their views as heads -> the group's first node
    for (int i = 0; i + 4 < n; ++i) {
        if (fused[i] != 4 || fused[i + 3] || (fused[i + 4] != 9 && fused[i + 4] != 10)) continue;
        ggml_tensor ** t = gf->nodes + i;
        if (!ggml_cuda_mul_mat_group_rope_ok(ctx, t, 4 + fused_span(fused[i + 4]))) continue;
        if ((t[0]->flags | t[1]->flags | t[2]->flags | t[3]->flags | t[5]->flags) & GGML_TENSOR_FLAG_OUTPUT) continue;
        for (int k : {0, 1, 2, 3, 5})
            cand[t[k]] = i;
    }
    if (cand.empty()) return;
    std::set<int> bad; // groups whose results another node reads
    for (int j = 0; j < n; ++j)
        for_each_read(gf->nodes[j], [&](const ggml_tensor * t) {
            const auto it = cand.find(t);
            if (it != cand.end() && (j < it->second || j >= it->second + 4 + fused_span(fused[it->second + 4])))
                bad.insert(it->second);
        });
    for (const auto & [t, i] : cand)
        if (!bad.count(i) && fused[i] == 4) {
            fused[i] = fused[i + 4] == 9 ? 13 : 14;
            fused[i + 4] = 0;
        }
}

// whether r (the node after FLASH_ATTN_EXT fa) is fa's f32 output viewed as [D * n_head, n_tokens] rows, as the wo
// projection reads it (codes 11 and 20)
static bool fattn_rows_view(const ggml_tensor * fa, const ggml_tensor * r) {
    return fa->op == GGML_OP_FLASH_ATTN_EXT && fa->type == GGML_TYPE_F32 && ggml_is_view_op(r->op) &&
           r->view_src == fa && r->data == fa->data && ggml_is_contiguous(r) && r->ne[0] == fa->ne[0] * fa->ne[1] &&
           ggml_nelements(r) == ggml_nelements(fa);
}

// code 11 (attention output quantized by the attention kernel)
static void plan_fattn_q8_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::map<const ggml_tensor *, int> cand; // attention output and its reshape -> the attention node
    for (int i = 0; i + 1 < n; ++i) {
        const ggml_tensor * fa = gf->nodes[i], * r = gf->nodes[i + 1];
        if (fused[i] || fused[i + 1] || !fattn_rows_view(fa, r) || r->ne[0] % 32 != 0) continue;
        if ((fa->flags | r->flags) & GGML_TENSOR_FLAG_OUTPUT) continue;
        cand[fa] = cand[r] = i;
    }
    if (cand.empty()) return;
    std::map<int, int> n_readers; // attention node -> q8_0 mat-vecs reading its reshape; -1: another reader
    for (int j = 0; j < n; ++j) {
        const ggml_tensor * u = gf->nodes[j];
        std::set<int> via_reshape; // attention nodes u reads only as a q8_0 mat-vec of their reshape
        for_each_read(u, [&](const ggml_tensor * t) {
            const auto it = cand.find(t);
            if (it == cand.end()) return;
            const int i = it->second;
            const ggml_tensor * r = gf->nodes[i + 1];
            if (j == i + 1) return; // the reshape itself
            int & c = n_readers[i];
            if (is_q8_vec_reader(ctx, u, r)) { // (for_each_read reports the attention output too: r's view_src)
                if (c >= 0 && via_reshape.insert(i).second) ++c;
            } else {
                c = -1;
            }
        });
    }
    for (const auto & [i, r] : n_readers)
        if (r > 0) fused[i] = 11;
}

// codes 7 -> 12 (with the mat-vec before the group), where every reader takes what it writes
static void plan_mmv_norm_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    const int n = gf->n_nodes;
    std::vector<bool> in_group(n, false); // nodes a group covers
    for (int i = 0; i < n; ++i)
        for (int k = 0; fused[i] && k < fused_span(fused[i]) && i + k < n; ++k)
            in_group[i + k] = true;
    std::map<const ggml_tensor *, int> mm_of, mul_of; // candidate results -> the group's first node
    for (int i = 0; i < n; ++i) {
        ggml_tensor ** t = gf->nodes + i;
        if (fused[i] == 7 && i > 0 && !in_group[i - 1] && !((t[-1]->flags | t[2]->flags) & GGML_TENSOR_FLAG_OUTPUT) &&
            ggml_cuda_mul_mat_add_norm_ok(ctx, t[-1], t[0], t[1], t[2])) {
            mm_of[t[-1]] = i - 1;
            mul_of[t[2]] = i - 1;
        }
    }
    if (mm_of.empty()) return;
    std::set<int> bad;
    std::map<int, int> last_reader; // group -> the last node reading its MUL
    for (int j = 0; j < n; ++j) {
        const ggml_tensor * u = gf->nodes[j];
        for_each_read(u, [&](const ggml_tensor * t) {
            if (const auto it = mm_of.find(t); it != mm_of.end()) {
                if (j != it->second + 1) bad.insert(it->second); // the mat-vec result: only its ADD
            } else if (const auto it = mul_of.find(t); it != mul_of.end()) {
                if (!(u->src[1] == t && ggml_cuda_mul_mat_reads_q8s_norm(ctx, u) && u->src[0] != t))
                    bad.insert(it->second);
                last_reader[it->second] = j;
            }
        });
    }
    // The MUL's f32 result is never written: its readers must find the q8s in ctx.qcache, which holds one activation.
    // So they must follow the group with nothing between them that could quantize another one: only readers, views,
    // and the SWIGLU of a gate/up pair of readers (code 5).
    for (const auto & [i, last] : last_reader) {
        const ggml_tensor * mul = gf->nodes[i + 3];
        for (int j = i + 4; j <= last; ++j) {
            const ggml_tensor * u = gf->nodes[j];
            const bool reader = u->op == GGML_OP_MUL_MAT && u->src[1] == mul;
            const bool glu = u->op == GGML_OP_SWIGLU && fused[j - 2] == 5 && gf->nodes[j - 2]->src[1] == mul;
            if (!reader && !glu && !ggml_is_view_op(u->op)) bad.insert(i);
        }
    }
    for (const auto & [t, i] : mm_of)
        if (!bad.count(i) && last_reader.count(i)) {
            fused[i] = 12;
            fused[i + 1] = 0;
        }
}

// codes 1 / 2 -> 17 / 18, a SWIGLU -> 19, an attention and its reshape -> 20 where a MUL_MAT reading the result runs
// the wgmma GEMM (ggml_cuda_mul_mat_reads_mmw): other readers read the f32 result, written as before
static void plan_mmw_order_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    if (!ctx.mmw_ok || !ctx.mmw_w16) return;
    const int n = gf->n_nodes;
    std::map<const ggml_tensor *, std::pair<int, int>> cand; // result -> the group's first node, its new code
    for (int i = 0; i < n; ++i) {
        ggml_tensor * t = gf->nodes[i];
        const ggml_tensor * r = nullptr;
        int code = 0;
        if (fused[i] == 1 || fused[i] == 2) {
            r = gf->nodes[i + fused_span(fused[i]) - 1];
            code = fused[i] == 1 ? 17 : 18;
        } else if (!fused[i] && t->op == GGML_OP_SWIGLU) {
            r = t;
            code = 19;
        } else if (!fused[i] && i + 1 < n && !fused[i + 1] && fattn_rows_view(t, gf->nodes[i + 1])) {
            r = gf->nodes[i + 1];
            code = 20;
        }
        if (r && ggml_cuda_mmw_order_ok(r)) cand[r] = {i, code};
    }
    if (cand.empty()) return;
    for (int j = 0; j < n; ++j) {
        const ggml_tensor * u = gf->nodes[j];
        if (!ggml_cuda_mul_mat_reads_mmw(ctx, u)) continue;
        const auto it = cand.find(u->src[1]);
        if (it != cand.end() && it->second.first < j) fused[it->second.first] = (uint8_t)it->second.second;
    }
}

static void plan_fusions(const ggml_cuda_context & ctx, ggml_cgraph * gf, std::vector<uint8_t> & fused) {
    fused.assign(gf->n_nodes, 0);
    if (!ctx.use_fusion) return;
    plan_norm_fusions(gf, fused);
    plan_mat_vec_fusions(ctx, gf, fused);
    plan_norm_q8_fusions(ctx, gf, fused);
    plan_rope_store_fusions(gf, fused);
    if (ctx.use_mmv_rope) plan_mmv_rope_fusions(ctx, gf, fused);
    // codes 9 / 10 with a q8_0 / q4_0 cache were planned for the q/k/v group's epilogue only (codes 13 / 14): those
    // it did not take run unfused (SET_ROWS quantizes)
    for (int i = 0; i < gf->n_nodes; ++i)
        if ((fused[i] == 9 || fused[i] == 10) && !ggml_cuda_rope_qkv_ok(gf->nodes + i, fused_span(fused[i])))
            fused[i] = 0;
    plan_fattn_q8_fusions(ctx, gf, fused);
    if (ctx.use_mmv_norm) plan_mmv_norm_fusions(ctx, gf, fused);
    plan_mmw_order_fusions(ctx, gf, fused);
}

// node i (with its fused followers); returns the number of nodes done
static int run_fused(ggml_cuda_context & ctx, ggml_cgraph * gf, int i, int fused) {
    ggml_tensor * t = gf->nodes[i];
    ggml_tensor ** nodes = gf->nodes + i;
    const int n = fused_span(fused);
    void * q8 = nullptr;         // codes 6/7/11/12: the last node's result quantized
    half * xw = nullptr;         // codes 17-20: the last node's result in the wgmma GEMM's order
    const float * nsq = nullptr; // code 12: its deferred norm
    switch (fused) {
        case 1: ggml_cuda_op_rms_norm_mul(ctx, t, nodes[1]); break;
        case 2: ggml_cuda_op_add_rms_norm_mul(ctx, t, nodes[1], nodes[2]); break;
        case 3:
        case 4:
            ggml_cuda_mul_mat_group(ctx, nodes, n);
            ++ctx.n_fused_mmv_group;
            break;
        case 15:
        case 16: ggml_cuda_mul_mat_group_wg(ctx, nodes, n); break;
        case 5:
            ggml_cuda_mul_mat_swiglu(ctx, nodes[2]->src[0], nodes[2]->src[1], nodes[2]);
            ++ctx.n_fused_swiglu;
            break;
        case 12:
            q8 = ggml_cuda_mul_mat_add_norm(ctx, t, nodes[1], nodes[2], nodes[3], &nsq);
            ++ctx.n_fused_mmv_norm;
            break;
        case 13:
        case 14:
            ggml_cuda_mul_mat_group_rope(ctx, nodes, n);
            ++ctx.n_fused_mmv_rope;
            break;
        case 6: q8 = ggml_cuda_op_rms_norm_mul_q8(ctx, t, nodes[1]); break;
        case 7: q8 = ggml_cuda_op_add_rms_norm_mul_q8(ctx, t, nodes[1], nodes[2]); break;
        case 17: xw = ggml_cuda_op_rms_norm_mul_w16(ctx, t, nodes[1]); break;
        case 18: xw = ggml_cuda_op_add_rms_norm_mul_w16(ctx, t, nodes[1], nodes[2]); break;
        case 19: xw = ggml_cuda_op_swiglu_w16(ctx, t); break;
        case 20: xw = ggml_cuda_op_flash_attn_ext_w16(ctx, t, nodes[1]); break;
        case 8:
            ggml_cuda_op_rope_set_rows(ctx, t, nodes[2]);
            ++ctx.n_fused_rope_store;
            break;
        case 9:
        case 10:
            ggml_cuda_op_rope_qkv(ctx, nodes, n);
            ++ctx.n_fused_rope_qkv;
            break;
        case 11:
            q8 = ggml_cuda_op_flash_attn_ext_q8(ctx, t);
            if (q8) ++ctx.n_fused_fattn_q8;
            break;
        default: run_node(ctx, t); break;
    }
    for (int k = 0; k < n; ++k)
        if (!ggml_is_view_op(nodes[k]->op)) ggml_cuda_qcache_written(ctx, nodes[k]);
    if (q8) { // after the loop above, which drops a cache of what these nodes wrote
        ggml_cuda_qcache_set(ctx, nodes[n - 1], q8, nsq, nsq ? ggml_get_op_params_f32(nodes[2], 0) : 0.0f);
        if (fused == 6 || fused == 7) ++ctx.n_fused_norm_q8;
    }
    if (xw) {
        ggml_cuda_wcache_set(ctx, nodes[n - 1], xw);
        ++ctx.n_fused_w16;
    }
    return n;
}

// the GGML_CUDA_TWICE class of node t (fusion code f): bit 0 norm, 1 rope + KV store, 2 attention, 3 mat-mul
static unsigned twice_class(const ggml_tensor * t, int f) {
    if (f == 1 || f == 2 || f == 6 || f == 7 || f == 17 || f == 18 || t->op == GGML_OP_RMS_NORM) return 1u;
    if (f == 8 || f == 9 || f == 10 || t->op == GGML_OP_ROPE || t->op == GGML_OP_SET_ROWS) return 2u;
    if (f == 11 || t->op == GGML_OP_FLASH_ATTN_EXT) return 4u;
    if (f == 3 || f == 4 || f == 5 || f == 12 || f == 13 || f == 14 || f == 15 || f == 16 || t->op == GGML_OP_MUL_MAT)
        return 8u;
    return 16u;
}

static unsigned twice_mask_of(const char * s) {
    if (!s) return 0;
    static const char * names[] = {"norm", "rope", "attn", "mmv", "other"};
    unsigned m = 0;
    for (int k = 0; k < 5; ++k)
        if (strstr(s, names[k])) m |= 1u << k;
    return m;
}

static void run_graph(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::vector<uint8_t> & fused) {
    ctx.pool.reset();
    ctx.qcache = ctx.hcache = ctx.wcache = ctx.rcache = {};
    ggml_cuda_dq_ahead_begin(ctx, gf, fused);
    for (int i = 0; i < gf->n_nodes; ++i) {
        if (ggml_nelements(gf->nodes[i]) == 0) continue;
        const int n = run_fused(ctx, gf, i, fused[i]);
        if (ctx.twice_mask && !ggml_is_view_op(gf->nodes[i]->op) &&
            (ctx.twice_mask & twice_class(gf->nodes[i], fused[i])))
            run_fused(ctx, gf, i, fused[i]);
        i += n - 1;
    }
    ggml_cuda_dq_ahead_end(ctx);
}

// key: what decides the sequence of kernels (ops, types, fusions, row/batch counts of compute
// nodes). Sizes that move every decode step (n_kv in KV views, KQ rows) are left out on purpose: the
// re-capture then differs in kernel parameters only and cudaGraphExecUpdate takes it; if the
// captured topology does differ, the update fails and the graph is instantiated afresh.
// vals: everything else (data pointers, op params, full shapes) - any change triggers a re-capture.
static void graph_key(ggml_cgraph * gf, const std::vector<uint8_t> & fused, std::vector<int64_t> & key) {
    key.clear();
    key.reserve((size_t)gf->n_nodes * 12);
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        key.push_back(t->op | (fused[i] << 16) | ((int64_t)t->type << 24));
        if (!ggml_is_view_op(t->op)) {
            key.push_back(t->ne[1]);
            key.push_back(t->ne[2] * 65536 + t->ne[3]);
        }
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            const ggml_tensor * s = t->src[k];
            key.push_back(s ? s->type : -1);
        }
    }
}

// vals: everything a captured graph bakes in, so that equal vals mean the same kernels with the same arguments
// and the last executable can be launched without planning or capturing again: every node's op (views too:
// the fusion plan depends on adjacency), and for each node that computes, its type, flags, data pointer, shape,
// strides and op params, and each source's identity, type, data pointer, shape and strides. Sources are recorded
// in full, not by reference, since a split's sources may be tensors outside its node list.
// The record is written into buf (only ever grown, so no call pays for zero-filling it) and is buf[0, n).
struct graph_vals_buf {
    std::vector<uintptr_t> buf;
    std::vector<uint32_t> off; // [n_nodes]: where each node's record starts (GGML_CUDA_GRAPH_DEBUG reports)
    size_t n = 0;
    bool operator==(const std::vector<uintptr_t> & o) const {
        return o.size() == n && std::memcmp(buf.data(), o.data(), n * sizeof(uintptr_t)) == 0;
    }
    std::vector<uintptr_t> copy() const { return std::vector<uintptr_t>(buf.begin(), buf.begin() + (ptrdiff_t)n); }
};

static void graph_vals(ggml_cgraph * gf, graph_vals_buf & vals) {
    constexpr size_t per_tensor = 11, per_node = per_tensor + GGML_MAX_OP_PARAMS / 8 + 1 + GGML_MAX_SRC * (1 + per_tensor);
    const size_t bound = 1 + per_node * (size_t)gf->n_nodes;
    if (vals.buf.size() < bound) vals.buf.resize(bound);
    if (vals.off.size() < (size_t)gf->n_nodes) vals.off.resize(gf->n_nodes);
    uintptr_t * v = vals.buf.data();
    *v++ = (uintptr_t)gf->n_nodes;
    auto put = [&v](const ggml_tensor * t) {
        *v++ = (uintptr_t)t;
        *v++ = (uintptr_t)t->op | (uintptr_t)t->type << 8 | (uintptr_t)t->flags << 16;
        *v++ = (uintptr_t)t->data;
        for (int d = 0; d < 4; ++d) {
            *v++ = (uintptr_t)t->ne[d];
            *v++ = (uintptr_t)t->nb[d];
        }
    };
    static_assert(GGML_MAX_OP_PARAMS % 8 == 0 && sizeof(uintptr_t) == 8, "op params packed two per word");
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        vals.off[i] = (uint32_t)(v - vals.buf.data());
        if (ggml_is_view_op(t->op) || t->op == GGML_OP_NONE) {
            *v++ = (uintptr_t)t->op | (uintptr_t)1 << 31;
            continue;
        }
        put(t);
        for (int k = 0; k < GGML_MAX_OP_PARAMS / 4; k += 2)
            *v++ = (uintptr_t)(uint32_t)t->op_params[k] | (uintptr_t)(uint32_t)t->op_params[k + 1] << 32;
        for (int k = 0; k < GGML_MAX_SRC; ++k) {
            if (t->src[k]) {
                *v++ = (uintptr_t)k;
                put(t->src[k]);
            }
        }
        *v++ = (uintptr_t)1 << 30; // end of the node's sources
    }
    vals.n = (size_t)(v - vals.buf.data());
}

// GGML_CUDA_GRAPH_DEBUG=1: why a graph that matches the last one's key could not be launched as is (the first
// word of the record that differs, and its node), logged for the first 48 such calls.
static bool graph_debug_line() {
    static const bool on = std::getenv("GGML_CUDA_GRAPH_DEBUG") != nullptr;
    static int n_logged = 0;
    return on && n_logged++ < 48;
}

static void graph_vals_explain(ggml_cgraph * gf, const graph_vals_buf & vals, const std::vector<uintptr_t> & old) {
    if (old.empty() || !graph_debug_line()) return;
    if (old[0] != vals.buf[0]) {
        GGML_LOG_WARN("graph replay missed: %d nodes, the last call %d\n", gf->n_nodes, (int)old[0]);
        return;
    }
    size_t w = 0;
    while (w < vals.n && w < old.size() && vals.buf[w] == old[w])
        ++w;
    if (w >= vals.n || w >= old.size()) return;
    int i = 0;
    while (i + 1 < gf->n_nodes && vals.off[i + 1] <= w)
        ++i;
    const ggml_tensor * t = gf->nodes[i];
    GGML_LOG_WARN("graph replay missed: node %d '%s' (%s), word %zu of its record: 0x%llx, last call 0x%llx\n", i,
                  t->name, ggml_op_name(t->op), w - vals.off[i], (unsigned long long)vals.buf[w],
                  (unsigned long long)old[w]);
}

// Prompt-sized graphs (a mat-mul over more than ctx.graph_max_n columns) run eagerly: their kernels are long,
// launch gaps do not matter, and capturing + instantiating one costs more than it could save.
static bool graph_is_capturable(const ggml_cuda_context & ctx, const ggml_cgraph * gf) {
    for (int i = 0; i < gf->n_nodes; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        if (t->op == GGML_OP_MUL_MAT && t->src[1]->ne[1] > ctx.graph_max_n) return false;
    }
    return true;
}

static ggml_status cuda_graph_compute_impl(ggml_backend_t backend, ggml_cgraph * gf);

static ggml_status cuda_graph_compute(ggml_backend_t backend, ggml_cgraph * gf) {
    ggml_cuda_context & ctx = *(ggml_cuda_context *)backend->context;
    ggml_cuda_host_writes_flush(ctx); // the split's inputs (set_tensor_async) before its first kernel
    ggml_cuda_profile * hp = ctx.prof && ctx.prof->mode == 2 ? ctx.prof : nullptr;
    if (!hp) return cuda_graph_compute_impl(backend, gf);
    CUDA_CHECK(cudaSetDevice(ctx.device));
    if (!hp->g0) {
        CUDA_CHECK(cudaEventCreate(&hp->g0));
        CUDA_CHECK(cudaEventCreate(&hp->g1));
    }
    if (hp->pending) {
        float ms = 0;
        CUDA_CHECK(cudaEventSynchronize(hp->g1));
        CUDA_CHECK(cudaEventElapsedTime(&ms, hp->g0, hp->g1));
        hp->gpu_us += 1000.0 * ms;
        ++hp->n_gpu;
    }
    CUDA_CHECK(cudaEventRecord(hp->g0, ctx.stream));
    const ggml_status st = cuda_graph_compute_impl(backend, gf);
    CUDA_CHECK(cudaEventRecord(hp->g1, ctx.stream));
    hp->pending = true;
    return st;
}

static ggml_status cuda_graph_compute_impl(ggml_backend_t backend, ggml_cgraph * gf) {
    ggml_cuda_context & ctx = *(ggml_cuda_context *)backend->context;
    CUDA_CHECK(cudaSetDevice(ctx.device));
    const int64_t t_start = ggml_time_us();
    ggml_cuda_profile * hp = ctx.prof && ctx.prof->mode == 2 ? ctx.prof : nullptr;
    if (hp && hp->last_end) hp->outside += t_start - hp->last_end;
    int64_t t_sig = 0, t_run = 0, t_upd = 0;
    static thread_local graph_vals_buf vals;
    const bool capturable = ctx.use_graphs && !(ctx.prof && !hp) && graph_is_capturable(ctx, gf);
    if (capturable) { // the same graph as the last call (decode steps): launch its executable as is
        ggml_cuda_graph_cache & gc = *ctx.graphs;
        cuda_graph_entry * last = nullptr;
        for (auto & x : gc.entries)
            if (x.id == gc.last_id && x.exec) last = &x;
        // the scheduler's split graph of the last call, not planned again since: the same record, not compared
        // again (GGML_CUDA_GRAPH_FULL_CHECK=1: always compared; GGML_CUDA_GRAPH_VERIFY=1: compared, and a
        // difference aborts)
        const bool same_plan = last && gf->plan_id != 0 && gf->plan_id == gc.last_plan_id && !ctx.graph_full_check;
        if (!same_plan || ctx.graph_verify) graph_vals(gf, vals);
        if (same_plan && ctx.graph_verify && !(vals == gc.last_vals))
            GGML_ABORT("CUDA graph: split graph %llu computed again with a different record (plan_id reuse)",
                       (unsigned long long)gf->plan_id);
        if (last && last->n_fail < 4 && (same_plan || vals == gc.last_vals)) {
            last->last_use = ++gc.tick;
            ++gc.n_replay;
            last->n_recap = 0;
            t_sig = t_run = t_upd = ggml_time_us();
            CUDA_CHECK(cudaGraphLaunch(last->exec, ctx.stream));
            if (hp) {
                const int64_t t_end = ggml_time_us();
                hp->sig += t_sig - t_start;
                hp->launch += t_end - t_upd;
                hp->last_end = t_end;
                if (++hp->n_calls == 128) profile_report(ctx);
            }
            return GGML_STATUS_SUCCESS;
        }
        if (same_plan && !ctx.graph_verify) graph_vals(gf, vals); // the paths below need the record
        if (last && last->n_fail < 4) {
            graph_vals_explain(gf, vals, gc.last_vals);
        } else if (graph_debug_line()) {
            GGML_LOG_WARN("graph replay missed: %s\n", !gc.last_id ? "the last call launched no executable"
                                                       : !last         ? "the last call's executable was dropped"
                                                                        : "the last call's graph runs eagerly");
        }
    }
    if (ctx.use_graphs) ctx.graphs->last_plan_id = 0;
    std::vector<uint8_t> fused;
    plan_fusions(ctx, gf, fused);
    ggml_cuda_fattn_plan_early(ctx, gf);
    if (ctx.prof && !hp) return profile_graph(ctx, gf, fused);

    if (!capturable) {
        if (ctx.use_graphs) ctx.graphs->last_id = 0;
        run_graph(ctx, gf, fused);
        if (!ctx.pool.extra.empty()) { // scratch grew: fold it (captured graphs hold the old addresses)
            CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
            ctx.pool.settle();
            if (ctx.use_graphs) ctx.graphs->clear_execs();
        }
        if (hp) {
            const int64_t t_end = ggml_time_us();
            hp->run += t_end - t_start;
            hp->last_end = t_end;
            if (++hp->n_calls == 128) profile_report(ctx);
        }
        return GGML_STATUS_SUCCESS;
    }

    ggml_cuda_graph_cache & gc = *ctx.graphs;
    static thread_local std::vector<int64_t> key;
    graph_key(gf, fused, key);
    cuda_graph_entry * e = nullptr;
    for (auto & x : gc.entries)
        if (x.key == key) e = &x;
    gc.last_id = 0;
    t_sig = ggml_time_us();
    ++gc.tick;

    if (!e) { // first sighting: run eagerly, remember the topology
        run_graph(ctx, gf, fused);
        if (gc.entries.size() >= 8) { // evict the least recently used
            size_t lru = 0;
            for (size_t j = 1; j < gc.entries.size(); ++j)
                if (gc.entries[j].last_use < gc.entries[lru].last_use) lru = j;
            if (gc.entries[lru].exec) cudaGraphExecDestroy(gc.entries[lru].exec);
            gc.entries.erase(gc.entries.begin() + lru);
        }
        cuda_graph_entry ne;
        ne.key = key;
        ne.id = ++gc.next_id;
        ne.last_use = gc.tick;
        gc.entries.push_back(std::move(ne));
    } else if (e->n_fail >= 4) {
        e->last_use = gc.tick;
        run_graph(ctx, gf, fused);
    } else {
        e->last_use = gc.tick;
        if (!(e->exec && vals == e->vals)) {
            if (e->exec) graph_vals_explain(gf, vals, e->vals);
            CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeRelaxed));
            run_graph(ctx, gf, fused);
            cudaGraph_t g = nullptr;
            CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &g));
            t_run = ggml_time_us();
            if (e->exec) {
                cudaGraphExecUpdateResultInfo info;
                if (cudaGraphExecUpdate(e->exec, g, &info) != cudaSuccess) {
                    cudaGetLastError();
                    CUDA_CHECK(cudaGraphExecDestroy(e->exec));
                    e->exec = nullptr;
                    ++e->n_fail;
                } else {
                    ++gc.n_update;
                    e->n_fail = 0;
                    if (++e->n_recap >= 4) e->n_fail = 4;
                }
            }
            if (!e->exec) {
                CUDA_CHECK(cudaGraphInstantiate(&e->exec, g, 0));
                ++gc.n_instantiate;
            }
            CUDA_CHECK(cudaGraphDestroy(g));
            e->vals = vals.copy();
            t_upd = ggml_time_us();
        } else {
            ++gc.n_replay;
            e->n_recap = 0;
        }
        CUDA_CHECK(cudaGraphLaunch(e->exec, ctx.stream));
        gc.last_id = e->id;
        gc.last_vals = vals.copy();
        gc.last_plan_id = gf->plan_id;
    }
    if (hp) {
        const int64_t t_end = ggml_time_us();
        if (!t_run) t_run = t_upd = t_end; // eager or replay
        if (!t_upd) t_upd = t_run;
        hp->sig += t_sig - t_start;
        hp->run += t_run - t_sig;
        hp->upd += t_upd - t_run;
        hp->launch += t_end - t_upd;
        hp->last_end = t_end;
        if (++hp->n_calls == 128) profile_report(ctx);
    }
    if (!ctx.pool.extra.empty()) { // scratch grew: fold it, captured addresses are stale
        CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
        ctx.pool.settle();
        gc.clear_execs();
    }
    return GGML_STATUS_SUCCESS;
}

// ggml_backend_i::graph_compute_profile (ggml_backend_sched_set_profile), with the same fusions and in the form the
// normal path runs the graph (profile.cu): a graph the normal path captures (decode steps) is captured and replayed
// under CUPTI; one it runs eagerly (prompts), or any where CUPTI is missing, eagerly with an event after each
// launch or fused group.
static ggml_status cuda_graph_compute_profile(ggml_backend_t backend, ggml_cgraph * gf,
                                              void (*rec)(void *, int, int, double), void * user) {
    ggml_cuda_context & ctx = *(ggml_cuda_context *)backend->context;
    ggml_cuda_host_writes_flush(ctx);
    CUDA_CHECK(cudaSetDevice(ctx.device));
    std::vector<uint8_t> fused;
    plan_fusions(ctx, gf, fused);
    ggml_cuda_fattn_plan_early(ctx, gf);
    if (ctx.use_graphs) ctx.graphs->last_id = 0; // the next call looks its graph up again
    ctx.pool.reset();
    ctx.qcache = ctx.hcache = ctx.wcache = ctx.rcache = {};
    const auto run = [&](int i) { return run_fused(ctx, gf, i, fused[i]); };
    if (!(ctx.use_graphs && graph_is_capturable(ctx, gf) && ggml_cuda_profile_graph_replay(ctx, gf, run, rec, user)))
        ggml_cuda_profile_graph(ctx, gf, run, rec, user);
    if (ctx.pool.settle() && ctx.use_graphs) ctx.graphs->clear_execs(); // scratch grew: captured addresses stale
    return GGML_STATUS_SUCCESS;
}

// ---- backend interface ------------------------------------------------------------------------
static const char * cuda_backend_get_name(ggml_backend_t backend) {
    return ((ggml_cuda_context *)backend->context)->name;
}

static void cuda_backend_free(ggml_backend_t backend) {
    ggml_cuda_context * ctx = (ggml_cuda_context *)backend->context;
    cudaSetDevice(ctx->device);
    ggml_cuda_host_writes_flush(*ctx);
    cudaStreamSynchronize(ctx->stream);
    ggml_cuda_host_writes_free(*ctx);
    ggml_cuda_ktrace_report();
    if (ctx->prof) {
        profile_report(*ctx);
        for (cudaEvent_t e : ctx->prof->ev)
            cudaEventDestroy(e);
        for (cudaEvent_t e : {ctx->prof->g0, ctx->prof->g1})
            if (e) cudaEventDestroy(e);
        delete ctx->prof;
    }
    if (ctx->graphs) {
        ctx->graphs->clear_execs();
        delete ctx->graphs;
    }
    ggml_cuda_dq_ahead_free(*ctx);
    ctx->pool.release();
    if (ctx->cublas) cublasDestroy(ctx->cublas);
    if (ctx->cublas_ws) cudaFree(ctx->cublas_ws);
    if (ctx->counters) cudaFree(ctx->counters);
    if (ctx->mmw_tick) cudaFree(ctx->mmw_tick);
    if (ctx->stream) cudaStreamDestroy(ctx->stream);
    delete ctx;
    delete backend;
}

static ggml_backend_buffer_type_t cuda_backend_get_default_buffer_type(ggml_backend_t backend) {
    return ggml_backend_cuda_buffer_type(((ggml_cuda_context *)backend->context)->device);
}

static bool is_f(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16; }

static bool cuda_backend_supports_op(ggml_backend_t backend, const ggml_tensor * t) {
    const ggml_tensor * a = t->src[0];
    const ggml_tensor * b = t->src[1];
    // repacked weights (q8repack.cuh): read only by mat-mul and get_rows, whole; never written
    if (ggml_cuda_touches_repacked(t)) return false;
    for (int k = 0; k < GGML_MAX_SRC; ++k) {
        const ggml_tensor * s = t->src[k];
        if (s && ggml_cuda_touches_repacked(s) &&
            !(k == 0 && ggml_cuda_repacked(s) && (t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_GET_ROWS)))
            return false;
    }
    // q4_0 ... q6_K (mmvq-t.cuh): contiguous (either layout)
    const bool a_qt = a && ggml_cuda_qt(a->type) && ggml_is_contiguous(a);
    switch (t->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            return ggml_cuda_cpy_supported(a->type, t->type, a, t);
        case GGML_OP_CPY:
            return ggml_cuda_cpy_supported(a->type, b->type, a, b);
        case GGML_OP_ADD:
        case GGML_OP_MUL:
            return is_f(a->type) && b->type == GGML_TYPE_F32 && t->type == a->type;
        case GGML_OP_SCALE:
        case GGML_OP_SILU:
        case GGML_OP_RMS_NORM:
        case GGML_OP_DIAG_MASK_INF:
            return is_f(a->type) && t->type == a->type;
        case GGML_OP_SWIGLU:
            return is_f(a->type) && b->type == a->type && t->type == a->type;
        case GGML_OP_GET_ROWS:
            return (is_f(a->type) || a->type == GGML_TYPE_Q8_0 || a_qt) && b->type == GGML_TYPE_I32 &&
                   t->type == GGML_TYPE_F32;
        case GGML_OP_SET_ROWS: // f32/f16 any strides; q8_0/q4_0 (KV caches) with dense rows of whole blocks
            return (is_f(a->type) || ggml_cuda_kvq_rows_ok(a)) && b->type == GGML_TYPE_F32 &&
                   t->src[2]->type == GGML_TYPE_I32 && t->type == a->type;
        case GGML_OP_SOFT_MAX:
            return a->type == GGML_TYPE_F32 && (!b || is_f(b->type));
        case GGML_OP_ROPE:
            return is_f(a->type) && t->type == a->type && b->type == GGML_TYPE_I32 && ggml_is_contiguous(b) &&
                   (!t->src[2] || t->src[2]->type == GGML_TYPE_F32);
        case GGML_OP_MUL_MAT:
            if (b->type != GGML_TYPE_F32) return false;
            if (a->type == GGML_TYPE_Q8_0) return a->nb[0] == ggml_type_size(a->type);
            if (ggml_cuda_qt(a->type)) return a_qt && a->ne[0] <= INT32_MAX;
            return is_f(a->type);
        case GGML_OP_ARGMAX:
            return a->type == GGML_TYPE_F32;
        case GGML_OP_KQ_MASK:
            return a->type == GGML_TYPE_I32 && b->type == GGML_TYPE_I32 && t->src[2]->type == GGML_TYPE_I32 &&
                   is_f(t->type) && ggml_is_contiguous(t) && t->ne[1] <= 65535;
        case GGML_OP_ALL_REDUCE: { // an NCCL communicator whose rank is this backend's device
            const ggml_comm * comm = ggml_all_reduce_comm(t);
            const int rank = ggml_get_op_params_i32(t, 0);
            return ggml_cuda_all_reduce_available() && ggml_comm_get_kind(comm) == GGML_COMM_NCCL &&
                   a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) &&
                   ggml_cuda_comm_device(comm, rank) == ((ggml_cuda_context *)backend->context)->device;
        }
        case GGML_OP_FLASH_ATTN_EXT: {
            // K and V of one float type, or q8_0/q4_0 caches (dense rows; fattn.cu: decode in place for D 64/96/128,
            // else through an f16 copy) with the other of K/V q8_0, q4_0, f16 or f32
            const ggml_tensor * v = t->src[2];
            const ggml_tensor * m = t->src[3];
            if (a->type != GGML_TYPE_F32 || a->ne[0] > FATTN_MAX_D || a->ne[3] != 1 || (m && !is_f(m->type))) return false;
            if (!ggml_cuda_is_kvq(b->type) && !ggml_cuda_is_kvq(v->type)) return is_f(b->type) && v->type == b->type;
            auto kv_ok = [](const ggml_tensor * x) { return is_f(x->type) || ggml_cuda_kvq_rows_ok(x); };
            return kv_ok(b) && kv_ok(v);
        }
        default:
            return false;
    }
}

static bool cuda_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft) {
    return cuda_buft_is_device(buft) && (int)(intptr_t)buft->context == ((ggml_cuda_context *)backend->context)->device;
}

static void cuda_backend_synchronize(ggml_backend_t backend) {
    ggml_cuda_context & ctx = *(ggml_cuda_context *)backend->context;
    ggml_cuda_host_writes_flush(ctx);
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (ctx.hw) ctx.hw->head = 0; // the staging ring's copies are done
}

static void cuda_backend_set_tensor_async(ggml_backend_t backend, ggml_tensor * t, const void * data, size_t offset,
                                          size_t size) {
    ggml_cuda_context * ctx = (ggml_cuda_context *)backend->context;
    ggml_backend_buffer_t buf = t->view_src ? t->view_src->buffer : t->buffer;
    if (ggml_cuda_should_repack(buf, t, offset, size)) {
        ggml_cuda_host_writes_flush(*ctx);
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        return ggml_cuda_repack_set(t, data, offset, size);
    }
    ggml_cuda_host_write(*ctx, (char *)t->data + offset, data, size);
}
static void cuda_backend_get_tensor_async(ggml_backend_t backend, const ggml_tensor * t, void * data, size_t offset,
                                          size_t size) {
    ggml_cuda_context * ctx = (ggml_cuda_context *)backend->context;
    ggml_cuda_host_writes_flush(*ctx);
    if (ggml_cuda_repacked(t)) {
        CUDA_CHECK(cudaStreamSynchronize(ctx->stream));
        return ggml_cuda_repack_get(t, data, offset, size);
    }
    CUDA_CHECK(cudaMemcpyAsync(data, (const char *)t->data + offset, size, cudaMemcpyDeviceToHost, ctx->stream));
}

bool ggml_backend_is_cuda(ggml_backend_t backend) {
    return backend && backend->iface.get_name == cuda_backend_get_name;
}

ggml_backend_t ggml_backend_cuda_init(int device) {
    const int n = ggml_backend_cuda_get_device_count();
    if (device < 0 || device >= n) {
        GGML_LOG_ERROR("%s: CUDA device %d not available (%d device(s) found)\n", __func__, device, n);
        return nullptr;
    }
    cudaError_t err = cudaSetDevice(device);
    cudaStream_t stream = nullptr;
    // blocking: legacy-stream copies order with it. The greatest priority, so that its blocks are scheduled before
    // those of the dequantization-ahead stream (dq-ahead.cuh) as SMs free up; GGML_CUDA_MAIN_PRIO=0: the least (A/B)
    int prio_least = 0, prio_greatest = 0;
    if (err == cudaSuccess) err = cudaDeviceGetStreamPriorityRange(&prio_least, &prio_greatest);
    const char * mp = std::getenv("GGML_CUDA_MAIN_PRIO");
    const bool prio_main = !(mp && strcmp(mp, "0") == 0);
    if (err == cudaSuccess)
        err = cudaStreamCreateWithPriority(&stream, cudaStreamDefault, prio_main ? prio_greatest : prio_least);
    if (err != cudaSuccess) {
        cudaGetLastError();
        GGML_LOG_ERROR("%s: cannot initialise CUDA device %d: %s\n", __func__, device, cudaGetErrorString(err));
        return nullptr;
    }
    ggml_cuda_context * ctx = new ggml_cuda_context;
    ctx->device = device;
    ctx->stream = stream;
    snprintf(ctx->name, sizeof(ctx->name), "CUDA%d", device);
    cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    ctx->n_sm = prop.multiProcessorCount;
    ctx->pool.device = device;
    if (cublasCreate(&ctx->cublas) != CUBLAS_STATUS_SUCCESS) {
        GGML_LOG_ERROR("%s: cublasCreate failed on CUDA%d\n", __func__, device);
        cudaStreamDestroy(stream);
        delete ctx;
        return nullptr;
    }
    CUBLAS_CHECK(cublasSetStream(ctx->cublas, stream));
    const size_t ws = 32u << 20; // fixed workspace: cuBLAS then allocates nothing during graph capture
    CUDA_CHECK(cudaMalloc(&ctx->cublas_ws, ws));
    CUBLAS_CHECK(cublasSetWorkspace(ctx->cublas, ctx->cublas_ws, ws));
    CUDA_CHECK(cudaMalloc(&ctx->counters, sizeof(int) * GGML_CUDA_N_COUNTERS));
    CUDA_CHECK(cudaMemset(ctx->counters, 0, sizeof(int) * GGML_CUDA_N_COUNTERS));
    const char * ng = std::getenv("GGML_CUDA_DISABLE_GRAPHS");
    ctx->use_graphs = !(ng && *ng && strcmp(ng, "0") != 0);
    if (const char * gn = std::getenv("GGML_CUDA_GRAPH_MAX_N")) ctx->graph_max_n = std::max(0, atoi(gn));
    ctx->graphs = new ggml_cuda_graph_cache;
    ggml_cuda_ktrace_begin();
    const char * pr = std::getenv("GGML_CUDA_PROFILE");
    if (pr && *pr && strcmp(pr, "0") != 0) {
        ctx->prof = new ggml_cuda_profile;
        ctx->prof->mode = atoi(pr) == 2 ? 2 : 1;
    }
    ctx->use_fusion = std::getenv("GGML_CUDA_NO_FUSION") == nullptr;
    ctx->use_mmv_norm = std::getenv("GGML_CUDA_NO_MMV_NORM") == nullptr;
    ctx->use_mmv_rope = std::getenv("GGML_CUDA_NO_MMV_ROPE") == nullptr;
    ctx->graph_full_check = std::getenv("GGML_CUDA_GRAPH_FULL_CHECK") != nullptr;
    ctx->graph_verify = std::getenv("GGML_CUDA_GRAPH_VERIFY") != nullptr;
    ctx->use_pdl = prop.major >= 9 && std::getenv("GGML_CUDA_NO_PDL") == nullptr;
    ctx->use_fattn_early = ctx->use_pdl && !ggml_cuda_env_zero("GGML_CUDA_FATTN_EARLY");
    ctx->mmvq_v1 = std::getenv("GGML_CUDA_MMVQ_V1") != nullptr;
    ctx->twice_mask = twice_mask_of(std::getenv("GGML_CUDA_TWICE"));
    if (const char * rpw = std::getenv("GGML_CUDA_QT_RPW")) {
        ctx->qt_rpw = atoi(rpw) == 1 ? 1 : atoi(rpw) == 4 ? 4 : 2;
        ctx->qt_rpw_env = true;
    }
    if (const char * rpw = std::getenv("GGML_CUDA_QT_RPW_GLU")) ctx->qt_rpw_glu = atoi(rpw) == 2 ? 2 : 1;
    ctx->no_mmv_mix = std::getenv("GGML_CUDA_NO_MMV_MIX") != nullptr;
    ctx->q8_qt = std::getenv("GGML_CUDA_Q8_V6") == nullptr;
    ctx->use_mmq = std::getenv("GGML_CUDA_NO_MMQ") == nullptr;
    ctx->use_dq_ahead = std::getenv("GGML_CUDA_NO_DQ_AHEAD") == nullptr;
    if (const char * mn = std::getenv("GGML_CUDA_MMQ_MAX_N")) ctx->mmq_max_n = atoll(mn);
    ctx->mmq_int8 = std::getenv("GGML_CUDA_MMQ_INT8") != nullptr;
    if (const char * sn = std::getenv("GGML_CUDA_MMQ_STREAM_N"))
        ctx->mmq_stream_n = std::max(0, std::min(64, atoi(sn)));
    if (const char * wn = std::getenv("GGML_CUDA_MMQ_WG_N")) ctx->mmq_wg_n = std::max(0, std::min(64, atoi(wn)));
    ctx->mmw_ok = ctx->mmq_wg_n > 0 && ggml_cuda_mmw_ok(device);
    if (const char * mg = std::getenv("GGML_CUDA_MMW_GROUP")) ctx->mmw_group_n = std::max(0, atoi(mg));
    ctx->mmw_w16 = std::getenv("GGML_CUDA_MMW_REORDER") == nullptr;
    if (const char * mb = std::getenv("GGML_CUDA_MMW_BULK")) ctx->mmw_bulk = atoi(mb) != 0;
    if (const char * mo = std::getenv("GGML_CUDA_MMW_OV")) ctx->mmw_ov = std::max(0, atoi(mo));
    if (const char * mz = std::getenv("GGML_CUDA_MMW_ZERO")) ctx->mmw_zero = atoi(mz) != 0;
    const char * tk = std::getenv("GGML_CUDA_MMW_TICK");
    if (ctx->mmw_ok && !(tk && atoi(tk) == 0)) {
        CUDA_CHECK(cudaMalloc(&ctx->mmw_tick, sizeof(int) * 2 * GGML_CUDA_MMW_TILES));
        CUDA_CHECK(cudaMemset(ctx->mmw_tick, 0, sizeof(int) * 2 * GGML_CUDA_MMW_TILES));
    }
    if (const char * mv = std::getenv("GGML_CUDA_MMV_MAX_N"))
        ctx->mmv_max_n = std::max(1, std::min(MUL_MAT_VEC_MAX_N, atoi(mv)));
    if (const char * ks = std::getenv("GGML_CUDA_MMQ_KS")) ctx->mmq_ks = std::max(0, std::min(16, atoi(ks)));
    if (const char * mv = std::getenv("GGML_CUDA_MMVQ")) {
        const int u = atoi(mv);
        ctx->mmvq_u = u == 2 || u == 4 || u == 5 || u == 8 ? u : ctx->mmvq_u;
    }

    ggml_backend_i iface = {};
    iface.get_name = cuda_backend_get_name;
    iface.free = cuda_backend_free;
    iface.get_default_buffer_type = cuda_backend_get_default_buffer_type;
    iface.graph_compute = cuda_graph_compute;
    iface.graph_compute_profile = cuda_graph_compute_profile;
    iface.supports_op = cuda_backend_supports_op;
    iface.supports_buft = cuda_backend_supports_buft;
    iface.synchronize = cuda_backend_synchronize;
    iface.set_tensor_async = cuda_backend_set_tensor_async;
    iface.get_tensor_async = cuda_backend_get_tensor_async;
    GGML_LOG_INFO("%s: using %s (%s, %d SMs, %.1f GiB)\n", __func__, ctx->name, prop.name, prop.multiProcessorCount,
                  prop.totalGlobalMem / 1073741824.0);
    return new ggml_backend{iface, ctx};
}

void ggml_backend_cuda_get_fusion_stats(ggml_backend_t backend, int * n_mmv_group, int * n_swiglu_group,
                                        int * n_norm_q8, int * n_rope_store, int * n_rope_qkv, int * n_fattn_q8,
                                        int * n_mmv_norm, int * n_mmv_rope) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    const ggml_cuda_context * ctx = (const ggml_cuda_context *)backend->context;
    if (n_mmv_group) *n_mmv_group = ctx->n_fused_mmv_group;
    if (n_swiglu_group) *n_swiglu_group = ctx->n_fused_swiglu;
    if (n_norm_q8) *n_norm_q8 = ctx->n_fused_norm_q8;
    if (n_rope_store) *n_rope_store = ctx->n_fused_rope_store;
    if (n_rope_qkv) *n_rope_qkv = ctx->n_fused_rope_qkv;
    if (n_fattn_q8) *n_fattn_q8 = ctx->n_fused_fattn_q8;
    if (n_mmv_norm) *n_mmv_norm = ctx->n_fused_mmv_norm;
    if (n_mmv_rope) *n_mmv_rope = ctx->n_fused_mmv_rope;
}

void ggml_backend_cuda_get_host_write_counts(ggml_backend_t backend, int * n_kernel, int * n_ring, int * n_sync) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    const ggml_cuda_host_writes * w = ((const ggml_cuda_context *)backend->context)->hw;
    *n_kernel = w ? w->n_kernel : 0;
    *n_ring = w ? w->n_ring : 0;
    *n_sync = w ? w->n_sync : 0;
}

int ggml_backend_cuda_get_fattn_early_count(ggml_backend_t backend) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    return ((const ggml_cuda_context *)backend->context)->n_fattn_early;
}

int ggml_backend_cuda_get_dq_ahead_count(ggml_backend_t backend) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    return ((const ggml_cuda_context *)backend->context)->n_dq_ahead;
}

int ggml_backend_cuda_get_wgmma_count(ggml_backend_t backend) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    return ((const ggml_cuda_context *)backend->context)->n_mmw;
}

void ggml_backend_cuda_get_wgmma_order_stats(ggml_backend_t backend, int * n_reorder, int * n_fused) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    const ggml_cuda_context * ctx = (const ggml_cuda_context *)backend->context;
    if (n_reorder) *n_reorder = ctx->n_mmw_order;
    if (n_fused) *n_fused = ctx->n_fused_w16;
}

void ggml_backend_cuda_get_graph_stats(ggml_backend_t backend, int * n_replay, int * n_update, int * n_instantiate) {
    GGML_ASSERT(ggml_backend_is_cuda(backend));
    const ggml_cuda_graph_cache * gc = ((ggml_cuda_context *)backend->context)->graphs;
    *n_replay = gc->n_replay;
    *n_update = gc->n_update;
    *n_instantiate = gc->n_instantiate;
}
