// cuda/profile.cu - see profile.cuh: an eager run of a graph with a CUDA event after each launch or fused group,
// and the peak throughput of a device from its properties.
//
// Peak FLOP per clock per SM (dense; the roofline's compute terms, ggml-cost.h's peak classes), from NVIDIA's
// architecture whitepapers:
//   arch      f32 (FFMA)  f16 tensor (f32 accumulate)  int8 tensor
//   sm_70        128          1024                         512 (dp4a: no int8 tensor cores)
//   sm_75        128          1024                        2048
//   sm_80        128          2048                        4096
//   sm_86/89     256          1024 (GeForce boards halve   2048
//                              it with f32 accumulate)
//   sm_90        256          4096                        8192
//   sm_100+      256          8192                       16384
// Peak = SMs x the maximum SM clock (cudaDevAttrClockRate) x the figure above. An H100 SXM (132 SMs, 1980 MHz):
// f16 1070 TFLOP/s, int8 2141, f32 66.9. Tensor-heavy kernels run below the maximum clock (power), so a
// compute-bound GEMM reads some 10% under its true share of the peak.
#include "ggml-cuda.h"
#include "profile.cuh"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#ifdef GGML_CUDA_CUPTI
#include <cupti.h>
#include <cxxabi.h>
#if CUPTI_API_VERSION < 130000 // the record layouts below are CUDA 13's
#undef GGML_CUDA_CUPTI
#endif
#endif

// how long the gate holds the stream at most: a launch queue that fills up before the host has queued every
// launch then still drains (the later groups' times would include launch gaps: warned about)
static constexpr double k_gate_timeout_ms = 200.0;

static __device__ __forceinline__ unsigned long long globaltimer_ns() {
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

// spins until the host sets *flag (mapped pinned memory) or timeout_ns pass
static __global__ void profile_gate(const volatile int * flag, unsigned long long timeout_ns) {
    const unsigned long long t0 = globaltimer_ns();
    while (*flag == 0 && globaltimer_ns() - t0 < timeout_ns) {}
}

// a node graph execution runs (views, NONE and empty nodes are skipped)
static bool computes(const ggml_tensor * t) {
    return ggml_nelements(t) > 0 && !ggml_is_view_op(t->op) && t->op != GGML_OP_NONE;
}

// Launches every group of gf through run(i), calling after(k) once group k is launched; returns the groups as
// (first node, node count).
static std::vector<std::pair<int, int>> launch_groups(ggml_cgraph * gf, const std::function<int(int)> & run,
                                                      const std::function<void(size_t)> & after) {
    std::vector<std::pair<int, int>> groups;
    for (int i = 0; i < gf->n_nodes;) {
        if (!computes(gf->nodes[i])) {
            ++i;
            continue;
        }
        const int n = run(i);
        GGML_ASSERT(n >= 1);
        groups.push_back({i, n});
        after(groups.size() - 1);
        i += n;
    }
    return groups;
}

void ggml_cuda_profile_graph(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::function<int(int)> & run,
                             void (*rec)(void * user, int i, int n, double us), void * user) {
    int n_groups = 0; // an upper bound: one per computing node
    for (int i = 0; i < gf->n_nodes; ++i)
        n_groups += computes(gf->nodes[i]);
    std::vector<cudaEvent_t> ev(n_groups + 1);
    for (auto & e : ev)
        CUDA_CHECK(cudaEventCreate(&e));
    int * flag_h = nullptr;
    int * flag_d = nullptr;
    CUDA_CHECK(cudaHostAlloc((void **)&flag_h, sizeof(int), cudaHostAllocMapped));
    CUDA_CHECK(cudaHostGetDevicePointer((void **)&flag_d, flag_h, 0));
    *(volatile int *)flag_h = 0;

    profile_gate<<<1, 1, 0, ctx.stream>>>(flag_d, (unsigned long long)(k_gate_timeout_ms * 1e6));
    CUDA_CHECK_LAUNCH();
    const auto t_host0 = std::chrono::steady_clock::now();
    CUDA_CHECK(cudaEventRecord(ev[0], ctx.stream));
    const std::vector<std::pair<int, int>> groups = launch_groups(gf, run, [&](size_t k) {
        GGML_ASSERT((int)k < n_groups);
        CUDA_CHECK(cudaEventRecord(ev[k + 1], ctx.stream));
    });
    const double host_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_host0).count();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    *(volatile int *)flag_h = 1; // open the gate
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    if (host_ms > 0.9 * k_gate_timeout_ms) {
        GGML_LOG_WARN("%s: queuing %zu launches took %.1f ms, longer than the gate holds the stream (%.0f ms): the "
                      "later groups' times include launch gaps\n",
                      __func__, groups.size(), host_ms, k_gate_timeout_ms);
    }
    for (size_t k = 0; k < groups.size(); ++k) {
        float ms = 0;
        CUDA_CHECK(cudaEventElapsedTime(&ms, ev[k], ev[k + 1]));
        rec(user, groups[k].first, groups[k].second, 1000.0 * ms);
    }
    CUDA_CHECK(cudaFreeHost(flag_h));
    for (auto & e : ev)
        CUDA_CHECK(cudaEventDestroy(e));
}

// ---- replay under CUPTI -----------------------------------------------------------------------
#ifdef GGML_CUDA_CUPTI
namespace {
struct cupti_span {
    uint64_t start, end; // ns, GPU timestamps
    uint32_t node;       // the graph node's index in its graph (the low word of CUPTI's graphNodeId)
    const char * name;   // the kernel's (mangled; CUPTI's string), or "[memset]" / "[memcpy]"
};
std::mutex g_cupti_mu;
std::vector<cupti_span> g_cupti_spans; // records of graph-launched work since the last take (all work: ktrace)
bool g_ktrace = false;                 // GGML_CUDA_KTRACE: every record kept until ggml_cuda_ktrace_report

void CUPTIAPI cupti_buffer_request(uint8_t ** buf, size_t * size, size_t * max_records) {
    *size = 4u << 20;
    *buf = (uint8_t *)std::aligned_alloc(8, *size);
    *max_records = 0;
}

void CUPTIAPI cupti_buffer_complete(CUcontext, uint32_t, uint8_t * buf, size_t, size_t valid) {
    std::lock_guard<std::mutex> lock(g_cupti_mu);
    CUpti_Activity * r = nullptr;
    while (buf && cuptiActivityGetNextRecord(buf, valid, &r) == CUPTI_SUCCESS) {
        cupti_span s{};
        uint32_t graph = 0;
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || r->kind == CUPTI_ACTIVITY_KIND_KERNEL) {
            const auto * k = (const CUpti_ActivityKernel10 *)r;
            s = {k->start, k->end, (uint32_t)k->graphNodeId, k->name};
            graph = k->graphId;
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
            const auto * k = (const CUpti_ActivityMemcpy6 *)r;
            s = {k->start, k->end, (uint32_t)k->graphNodeId, "[memcpy]"};
            graph = k->graphId;
        } else if (r->kind == CUPTI_ACTIVITY_KIND_MEMSET) {
            const auto * k = (const CUpti_ActivityMemset4 *)r;
            s = {k->start, k->end, (uint32_t)k->graphNodeId, "[memset]"};
            graph = k->graphId;
        } else {
            continue;
        }
        if (graph != 0 || g_ktrace) g_cupti_spans.push_back(s);
    }
    std::free(buf);
}

constexpr CUpti_ActivityKind k_cupti_kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY,
                                                 CUPTI_ACTIVITY_KIND_MEMSET};

// CUPTI's activity buffers registered (once) and the record kinds on; false (with a warning, once) where CUPTI
// refuses, e.g. another profiler holds it
bool cupti_begin() {
    static const bool registered = [] {
        const CUptiResult r = cuptiActivityRegisterCallbacks(cupti_buffer_request, cupti_buffer_complete);
        if (r != CUPTI_SUCCESS) {
            const char * msg = "?";
            cuptiGetResultString(r, &msg);
            GGML_LOG_WARN("%s: CUPTI unavailable (%s): CUDA nodes are timed eagerly, one event per launch\n",
                          "ggml_cuda_profile_graph_replay", msg);
        }
        return r == CUPTI_SUCCESS;
    }();
    if (!registered) return false;
    for (CUpti_ActivityKind k : k_cupti_kinds)
        if (cuptiActivityEnable(k) != CUPTI_SUCCESS) {
            for (CUpti_ActivityKind d : k_cupti_kinds)
                cuptiActivityDisable(d);
            return false;
        }
    return true;
}

// the records of everything launched since cupti_begin, in no particular order; the kinds off again
std::vector<cupti_span> cupti_end() {
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    for (CUpti_ActivityKind k : k_cupti_kinds)
        cuptiActivityDisable(k);
    std::lock_guard<std::mutex> lock(g_cupti_mu);
    std::vector<cupti_span> out;
    out.swap(g_cupti_spans);
    return out;
}
} // namespace

// a kernel's name without its parameter list: "void k_mmw<qt_q8_0, 64>(qregs, ...)" -> "k_mmw<qt_q8_0, 64>"
static std::string ktrace_name(const char * mangled) {
    int st = 0;
    char * d = abi::__cxa_demangle(mangled, nullptr, nullptr, &st);
    std::string n = st == 0 && d ? d : mangled;
    std::free(d);
    int depth = 0;
    for (size_t i = 0; i < n.size(); ++i) {
        depth += n[i] == '<' ? 1 : n[i] == '>' ? -1 : 0;
        if (n[i] == '(' && depth == 0) {
            n.resize(i);
            break;
        }
    }
    if (n.rfind("void ", 0) == 0) n.erase(0, 5);
    return n;
}

void ggml_cuda_ktrace_begin() {
    if (g_ktrace || !std::getenv("GGML_CUDA_KTRACE")) return;
    g_ktrace = cupti_begin();
}

void ggml_cuda_ktrace_report() {
    if (!g_ktrace) return;
    std::vector<cupti_span> sp = cupti_end();
    g_ktrace = false;
    if (sp.empty()) return;
    std::sort(sp.begin(), sp.end(), [](const cupti_span & a, const cupti_span & b) { return a.start < b.start; });
    struct agg {
        int64_t n = 0;
        double ns = 0, min_ns = 1e300, max_ns = 0;
    };
    std::map<std::string, agg> per;
    std::map<const char *, std::string> names; // CUPTI hands out one string per kernel
    uint64_t busy = 0, cur0 = sp[0].start, cur1 = sp[0].end;
    for (const cupti_span & s : sp) {
        auto it = names.find(s.name);
        if (it == names.end()) it = names.emplace(s.name, s.name[0] == '[' ? s.name : ktrace_name(s.name)).first;
        agg & a = per[it->second];
        const double ns = (double)(s.end - s.start);
        a.n++;
        a.ns += ns;
        a.min_ns = std::min(a.min_ns, ns);
        a.max_ns = std::max(a.max_ns, ns);
        if (s.start > cur1) { // busy time: the union of the intervals
            busy += cur1 - cur0;
            cur0 = s.start;
        }
        cur1 = std::max(cur1, s.end);
    }
    busy += cur1 - cur0;
    std::vector<std::pair<std::string, agg>> rows(per.begin(), per.end());
    std::sort(rows.begin(), rows.end(), [](const auto & a, const auto & b) { return a.second.ns > b.second.ns; });
    double sum = 0;
    for (const auto & r : rows)
        sum += r.second.ns;
    const double span = (double)(cur1 - sp[0].start);
    GGML_LOG_WARN("CUDA kernel trace (GGML_CUDA_KTRACE): %zu records, GPU span %.3f ms, busy %.3f ms (%.1f%%), kernel "
                  "time summed %.3f ms\n",
                  sp.size(), span * 1e-6, busy * 1e-6, 100.0 * busy / span, sum * 1e-6);
    GGML_LOG_WARN("  %8s %10s %6s %9s %9s %9s  %s\n", "count", "total ms", "%", "avg us", "min us", "max us", "kernel");
    for (size_t i = 0; i < rows.size() && i < 40; ++i) {
        const agg & a = rows[i].second;
        GGML_LOG_WARN("  %8lld %10.3f %6.2f %9.2f %9.2f %9.2f  %s\n", (long long)a.n, a.ns * 1e-6, 100.0 * a.ns / sum,
                      a.ns * 1e-3 / a.n, a.min_ns * 1e-3, a.max_ns * 1e-3, rows[i].first.c_str());
    }
}

bool ggml_cuda_profile_graph_replay(ggml_cuda_context & ctx, ggml_cgraph * gf, const std::function<int(int)> & run,
                                    void (*rec)(void * user, int i, int n, double us), void * user) {
    if (std::getenv("GGML_CUDA_PROFILE_EAGER") || g_ktrace) return false;
    if (!cupti_begin()) return false;
    {
        std::lock_guard<std::mutex> lock(g_cupti_mu);
        g_cupti_spans.clear();
    }
    // capture, counting the graph's nodes after each group: group k owns nodes [bound[k-1], bound[k])
    std::vector<size_t> bound;
    CUDA_CHECK(cudaStreamBeginCapture(ctx.stream, cudaStreamCaptureModeRelaxed));
    const std::vector<std::pair<int, int>> groups = launch_groups(gf, run, [&](size_t) {
        cudaStreamCaptureStatus st;
        cudaGraph_t cg = nullptr;
        size_t n_graph_nodes = 0;
        CUDA_CHECK(cudaStreamGetCaptureInfo(ctx.stream, &st, nullptr, &cg, nullptr, nullptr, nullptr));
        CUDA_CHECK(cudaGraphGetNodes(cg, nullptr, &n_graph_nodes));
        bound.push_back(n_graph_nodes);
    });
    cudaGraph_t g = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(ctx.stream, &g));
    cudaGraphExec_t exec = nullptr;
    CUDA_CHECK(cudaGraphInstantiate(&exec, g, 0));
    CUDA_CHECK(cudaGraphUpload(exec, ctx.stream)); // the first launch's upload is not the step's
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    CUDA_CHECK(cudaGraphLaunch(exec, ctx.stream));
    CUDA_CHECK(cudaStreamSynchronize(ctx.stream));
    std::vector<cupti_span> spans = cupti_end();
    CUDA_CHECK(cudaGraphExecDestroy(exec));
    CUDA_CHECK(cudaGraphDestroy(g));

    // A group's time is what it adds to the step: from the end of the work before it (the previous group's last
    // end, or the first start) to the end of its own last node. Under programmatic dependent launch a kernel
    // starts before its predecessor ends: its early part overlaps and is not counted twice, so the times sum
    // to the replay's GPU span.
    const size_t n_nodes = bound.empty() ? 0 : bound.back();
    std::vector<uint64_t> node_end(n_nodes, 0);
    uint64_t first = UINT64_MAX;
    size_t n_seen = 0;
    for (const cupti_span & s : spans) {
        if (s.node >= n_nodes) continue;
        n_seen += node_end[s.node] == 0;
        node_end[s.node] = std::max(node_end[s.node], s.end);
        first = std::min(first, s.start);
    }
    if (n_seen != n_nodes)
        GGML_LOG_WARN("%s: CUPTI reported %zu of the replay's %zu graph nodes: groups without records read 0 us\n",
                      __func__, n_seen, n_nodes);
    uint64_t prev = first;
    size_t lo = 0;
    for (size_t k = 0; k < groups.size(); ++k) {
        uint64_t end = 0;
        for (size_t j = lo; j < bound[k]; ++j)
            end = std::max(end, node_end[j]);
        lo = bound[k];
        const double us = end > prev ? (end - prev) * 1e-3 : 0.0;
        if (end > prev) prev = end;
        rec(user, groups[k].first, groups[k].second, us);
    }
    return true;
}
#else
bool ggml_cuda_profile_graph_replay(ggml_cuda_context &, ggml_cgraph *, const std::function<int(int)> &,
                                    void (*)(void *, int, int, double), void *) {
    return false;
}
void ggml_cuda_ktrace_begin() {
    if (std::getenv("GGML_CUDA_KTRACE")) GGML_LOG_WARN("GGML_CUDA_KTRACE: this build has no CUPTI\n");
}
void ggml_cuda_ktrace_report() {}
#endif

bool ggml_backend_cuda_peak_tflops(int device, double * f32, double * f16, double * int8) {
    *f32 = *f16 = *int8 = 0;
    if (device < 0 || device >= ggml_backend_cuda_get_device_count()) return false;
    int major = 0, minor = 0, n_sm = 0, clock_khz = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&n_sm, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, device) != cudaSuccess) {
        cudaGetLastError();
        return false;
    }
    const int cc = 10 * major + minor;
    double p32 = 128, p16 = 1024, p8 = 512; // sm_70
    if (cc >= 100) {
        p32 = 256, p16 = 8192, p8 = 16384;
    } else if (cc >= 90) {
        p32 = 256, p16 = 4096, p8 = 8192;
    } else if (cc >= 86) {
        p32 = 256, p16 = 1024, p8 = 2048;
    } else if (cc >= 80) {
        p32 = 128, p16 = 2048, p8 = 4096;
    } else if (cc >= 75) {
        p32 = 128, p16 = 1024, p8 = 2048;
    }
    const double per_clock = (double)n_sm * clock_khz * 1e3 * 1e-12; // SMs x Hz, in tera
    *f32 = p32 * per_clock;
    *f16 = p16 * per_clock;
    *int8 = p8 * per_clock;
    return true;
}
