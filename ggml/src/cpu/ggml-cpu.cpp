// cpu/ggml-cpu.cpp - the CPU backend: host buffers (64-byte aligned, or wrapping existing memory),
// graph execution on a persistent thread pool, and ggml_graph_compute_with_ctx.
//
// A graph runs as one thread-pool job: every thread walks the node list, calls each kernel with
// its ith, and meets the others at a barrier after each node. View ops, NONE and empty nodes are
// skipped. Kernels share one scratch block sized max over nodes of ggml_cpu_op_work_size. A profiled run
// (ggml_backend_sched_set_profile) has thread 0 take a timestamp after each node's barrier.
#include "common.h"
#include "ggml-backend.h"
#include "ggml-impl.h"
#include "mul_mat.h"
#include "ops.h"
#include "threadpool.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#if defined(__linux__)
#include <sys/mman.h>
#endif
#include <mutex>
#include <thread>
#include <vector>

static constexpr size_t k_cpu_alignment = 64;

static size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// ---- scratch ---------------------------------------------------------------------------------
struct ggml_cpu_work_buffer {
    void * data = nullptr;
    size_t size = 0;
    ~ggml_cpu_work_buffer() { std::free(data); }
    bool reserve(size_t n) {
        if (n <= size) return true;
        void * p = std::aligned_alloc(k_cpu_alignment, round_up(n, k_cpu_alignment));
        if (!p) return false;
        std::free(data);
        data = p;
        size = n;
        return true;
    }
};

// ---- graph execution -------------------------------------------------------------------------
// Does gf, with no mat-mul or attention, write fewer than serial_below elements in all? The backend then runs
// it on the calling thread alone: waking the pool costs more than it saves (a decode step's token-embedding
// get_rows, split off the GPU graph, wrote 4096 floats behind a ~200 us wake-up of 15 sleeping workers on a
// 16-core host, 7% of a Llama-2-7B token on an H200).
static bool cpu_graph_is_small(const ggml_cgraph * gf, int64_t serial_below) {
    int64_t n = 0;
    for (int i = 0; i < gf->n_nodes && n < serial_below; ++i) {
        const ggml_tensor * t = gf->nodes[i];
        if (t->op == GGML_OP_MUL_MAT || t->op == GGML_OP_FLASH_ATTN_EXT) return false;
        if (t->op != GGML_OP_NONE && !ggml_is_view_op(t->op)) n += ggml_nelements(t);
    }
    return n < serial_below;
}

// A profiled run (ggml_backend_i::graph_compute_profile): the graph index of each node run, and the time
// thread 0 saw when all threads were done with it.
struct cpu_profile {
    std::vector<int> index;
    std::vector<int64_t> ts_ns; // [0]: all threads started; [i + 1]: node i done
};

static int64_t cpu_now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// ---- the step plan: which nodes need a barrier before them ----------------------------------------
// A decode step has ~300 nodes, most of them a few thousand elements (norms, adds, rope, the KV-cache writes), which
// the kernels run on one thread anyway (ggml_cpu_n_active). Ending every node with a barrier of all threads cost
// ~14% of a 2-thread decode step. The plan instead:
//  - runs such "serial" nodes on thread 0 alone (nth = 1: same kernel, same rows, same results); the other threads
//    skip them;
//  - converts a mat-vec's activations (b -> q8_1/q8_K/f32) as a serial step of its own into a region of the scratch
//    that no other step writes (one per distinct b: q, k and v share one), so the mat-vec itself has no internal
//    barrier (ggml_cpu_params::pre_b) and hands out its rows from a counter of its own;
//  - puts a barrier before a step only where it must: when the step reads memory that a step since the last
//    barrier wrote, or writes memory such a step read or wrote (byte ranges of dst, srcs and scratch regions);
//    two serial steps never conflict (one thread, program order). Steps with internal barriers or the pool's shared
//    counter (flash attention, prompt mat-muls, AMX, big element-wise ops) keep a barrier before and after.
// So a layer's q, k, v mat-vecs run back to back, as do gate and up, and a chain like add -> rms_norm -> mul -> convert
// runs on thread 0 while the other thread already waits at the one barrier before the next mat-vec.
// GGML_CPU_NODE_BARRIERS=1 (or ggml_backend_cpu_set_node_barriers) restores one barrier after every node; a profiled
// run always does, so that every node has its own time.
enum cpu_step_kind : uint8_t {
    CPU_STEP_NODE,    // all threads, the pool's counter, barriers before and after
    CPU_STEP_SERIAL,  // thread 0 alone, nth = 1
    CPU_STEP_CONVERT, // thread 0 alone: mul_mat's b -> scratch + woff
    CPU_STEP_MATVEC,  // all threads, own counter, no internal barrier (b read in place or from scratch + woff)
};

struct cpu_step {
    ggml_tensor * t;
    cpu_step_kind kind;
    bool barrier; // a barrier of all threads before this step
    bool has_pre; // CPU_STEP_MATVEC: b converted at woff
    size_t woff;  // scratch offset (CONVERT, MATVEC with has_pre)
};

struct alignas(64) cpu_padded_counter {
    std::atomic<int64_t> v{0};
};

struct cpu_range {
    uintptr_t lo, hi;
    bool write;
    bool serial; // touched by a serial step (thread 0 only)
};

static bool cpu_ranges_overlap(uintptr_t lo0, uintptr_t hi0, uintptr_t lo1, uintptr_t hi1) {
    return lo0 < hi1 && lo1 < hi0;
}

// Below this many elements (and not a mat-mul or attention) a node runs on thread 0 alone. The kernels already use
// one thread below GGML_CPU_MIN_WORK_PER_THREAD element-ops (common.h), so this changes no node that used more.
static bool cpu_node_is_serial(const ggml_tensor * t) {
    switch (t->op) {
        case GGML_OP_MUL_MAT:
        case GGML_OP_FLASH_ATTN_EXT:
            return false;
        case GGML_OP_ALL_REDUCE: // one thread of each rank meets the others (cpu/all_reduce.cpp)
            return true;
        default:
            break;
    }
    int64_t work = ggml_nelements(t);
    if (t->op == GGML_OP_SET_ROWS)
        work = ggml_nelements(t->src[1]);            // dst is the whole cache view
    else if (t->src[0] && t->op != GGML_OP_GET_ROWS) // argmax: the work is its input; get_rows: the rows it copies
        work = std::max(work, ggml_nelements(t->src[0]));
    return work < GGML_CPU_MIN_WORK_PER_THREAD;
}

// Decode-size mat-vecs get their b converted by a serial step (below this many b elements).
static constexpr int64_t k_preconvert_max_elements = 64 * 1024;

struct cpu_plan {
    std::vector<cpu_step> steps;
    size_t wsize = 0; // scratch: [0, node_wsize) for the nodes' own use, then the conversion regions
};

// nodes: the graph's compute nodes in order. node_barriers: the old plan (a NODE step per node).
static void cpu_plan_make(cpu_plan & plan, const std::vector<ggml_tensor *> & nodes, size_t node_wsize, int nth,
                          bool node_barriers) {
    plan.steps.clear();
    plan.steps.reserve(nodes.size() + nodes.size() / 2);
    if (nth == 1 || node_barriers) {
        for (size_t i = 0; i < nodes.size(); ++i)
            plan.steps.push_back({nodes[i], nth == 1 ? CPU_STEP_SERIAL : CPU_STEP_NODE, i > 0, false, 0});
        plan.wsize = node_wsize;
        return;
    }
    size_t woff = (node_wsize + k_cpu_alignment - 1) / k_cpu_alignment * k_cpu_alignment;
    // the scratch as an address range of its own (offsets from a fake base far from any tensor are not needed:
    // scratch ranges are tagged by a high bit that no host pointer has on x86-64 / aarch64 user space)
    constexpr uintptr_t k_scratch_tag = uintptr_t(1) << 62;
    std::vector<cpu_range> epoch; // what the steps since the last barrier touched
    bool force_next = false;      // the previous step was a NODE: barrier after it
    // the last conversion, reusable while only mat-vecs reading it ran since (q, k, v share one)
    const ggml_tensor * conv_b = nullptr;
    ggml_type conv_a_type = GGML_TYPE_COUNT;
    size_t conv_off = 0, conv_size = 0;

    auto add_step = [&](ggml_tensor * t, cpu_step_kind kind, const std::vector<cpu_range> & rs, bool has_pre,
                        size_t off) {
        bool barrier = force_next || plan.steps.empty() || kind == CPU_STEP_NODE || epoch.size() > 64;
        const bool serial = kind == CPU_STEP_SERIAL || kind == CPU_STEP_CONVERT;
        for (size_t a = 0; !barrier && a < rs.size(); ++a) {
            for (const cpu_range & e : epoch) {
                if (serial && e.serial) continue;
                if ((rs[a].write || e.write) && cpu_ranges_overlap(rs[a].lo, rs[a].hi, e.lo, e.hi)) {
                    barrier = true;
                    break;
                }
            }
        }
        if (plan.steps.empty()) barrier = false; // nothing before the first step
        if (barrier) epoch.clear();
        for (cpu_range r : rs) {
            r.serial = serial;
            epoch.push_back(r);
        }
        force_next = kind == CPU_STEP_NODE;
        plan.steps.push_back({t, kind, barrier, has_pre, off});
    };
    auto tensor_range = [](const ggml_tensor * t, bool write) {
        const uintptr_t lo = (uintptr_t)t->data;
        return cpu_range{lo, lo + ggml_nbytes(t), write, false};
    };

    std::vector<cpu_range> rs;
    for (ggml_tensor * t : nodes) {
        rs.clear();
        rs.push_back(tensor_range(t, true));
        for (int j = 0; j < GGML_MAX_SRC; ++j)
            if (t->src[j]) rs.push_back(tensor_range(t->src[j], false));
        if (t->op == GGML_OP_MUL_MAT) {
            const ggml_tensor * b = t->src[1];
            const size_t pre = ggml_nelements(b) <= k_preconvert_max_elements ? ggml_cpu_mul_mat_preconvert_size(t) : 0;
            if (pre > 0) {
                const bool reuse = conv_b == b && conv_a_type == t->src[0]->type && conv_size == pre;
                if (!reuse) {
                    std::vector<cpu_range> crs = {
                        cpu_range{k_scratch_tag + woff, k_scratch_tag + woff + pre, true, false},
                        tensor_range(b, false)};
                    conv_b = b;
                    conv_a_type = t->src[0]->type;
                    conv_off = woff;
                    conv_size = pre;
                    add_step(t, CPU_STEP_CONVERT, crs, false, woff);
                    woff += (pre + k_cpu_alignment - 1) / k_cpu_alignment * k_cpu_alignment;
                }
                rs.erase(rs.begin() + 2); // b itself is not read, its conversion is
                rs.push_back({k_scratch_tag + conv_off, k_scratch_tag + conv_off + conv_size, false, false});
                add_step(t, CPU_STEP_MATVEC, rs, true, conv_off);
                continue;
            }
            if (ggml_cpu_mul_mat_barrier_free(t)) {
                add_step(t, CPU_STEP_MATVEC, rs, false, 0);
                conv_b = nullptr;
                continue;
            }
        }
        conv_b = nullptr; // anything else may write b's memory; no reuse across it
        add_step(t, cpu_node_is_serial(t) ? CPU_STEP_SERIAL : CPU_STEP_NODE, rs, false, 0);
    }
    plan.wsize = woff;
}

// serial_below: see cpu_graph_is_small (0: always the whole pool). prof: nullptr, or filled as above (a profiled
// run adds a barrier before the first node and after the last, so each node's time is all threads' time on it).
static ggml_status cpu_graph_compute(ggml_cpu_threadpool & tp, ggml_cpu_work_buffer & work, ggml_cgraph * gf,
                                     int64_t serial_below, bool node_barriers, cpu_profile * prof = nullptr) {
    const int nth = cpu_graph_is_small(gf, serial_below) ? 1 : tp.n_threads();
    std::vector<ggml_tensor *> nodes;
    nodes.reserve(gf->n_nodes);
    size_t wsize = 0;
    for (int i = 0; i < gf->n_nodes; ++i) {
        ggml_tensor * t = gf->nodes[i];
        if (t->op == GGML_OP_NONE || ggml_is_view_op(t->op) || ggml_nelements(t) == 0) continue;
        if (!ggml_cpu_supports_op(t)) {
            GGML_LOG_ERROR("%s: node %d '%s' (%s, %s) is not supported by the CPU backend\n", __func__, i, t->name,
                           ggml_op_name(t->op), ggml_type_name(t->type));
            return GGML_STATUS_FAILED;
        }
        for (int j = -1; j < GGML_MAX_SRC; ++j) {
            const ggml_tensor * s = j < 0 ? t : t->src[j];
            if (!s) continue;
            if (!s->data || (s->buffer && !ggml_backend_buffer_is_host(s->buffer) &&
                             s->buffer->buft != ggml_backend_cpu_repack_buffer_type())) {
                GGML_LOG_ERROR("%s: node %d '%s' (%s): tensor '%s' has no host memory\n", __func__, i, t->name,
                               ggml_op_name(t->op), s->name);
                return GGML_STATUS_FAILED;
            }
        }
        wsize = std::max(wsize, ggml_cpu_op_work_size(t, nth));
        nodes.push_back(t);
        if (prof) prof->index.push_back(i);
    }
    if (nodes.empty()) { return work.reserve(wsize) ? GGML_STATUS_SUCCESS : GGML_STATUS_ALLOC_FAILED; }
    thread_local cpu_plan plan;
    cpu_plan_make(plan, nodes, wsize, nth, node_barriers || prof);
    if (!work.reserve(plan.wsize)) {
        GGML_LOG_ERROR("%s: cannot allocate %zu bytes of scratch\n", __func__, plan.wsize);
        return GGML_STATUS_ALLOC_FAILED;
    }
    const size_t n_steps = plan.steps.size();
    std::unique_ptr<cpu_padded_counter[]> counters(nth > 1 ? new cpu_padded_counter[n_steps] : nullptr);
    // the mat-mul steps' take words (ggml_cpu_params::owned), nth per step, zero
    auto takes_words = [](const cpu_step & s) {
        return s.kind == CPU_STEP_MATVEC || (s.kind == CPU_STEP_NODE && s.t->op == GGML_OP_MUL_MAT);
    };
    size_t n_mm = 0;
    for (const cpu_step & s : plan.steps)
        n_mm += takes_words(s);
    std::unique_ptr<ggml_cpu_take_word[]> takes(nth > 1 && n_mm ? new ggml_cpu_take_word[n_mm * nth] : nullptr);

    void * wdata = work.data;
    int64_t * ts = nullptr;
    if (prof) {
        prof->ts_ns.assign(nodes.size() + 1, 0);
        ts = prof->ts_ns.data();
    }
    const cpu_step * steps = plan.steps.data();
    auto job = [&](int ith) {
        ggml_cpu_params p;
        p.ith = ith;
        p.nth = nth;
        p.wdata = wdata;
        p.wsize = wsize;
        p.barrier = nth > 1 ? std::function<void()>([&tp] { tp.barrier(); }) : [] {};
        p.counter = nth > 1 ? tp.counter() : nullptr;
        ggml_cpu_params p1; // serial steps: thread 0 alone
        p1.ith = 0;
        p1.nth = 1;
        p1.wdata = wdata;
        p1.wsize = wsize;
        p1.barrier = [] {};
        ggml_cpu_params pm = p; // mat-vec steps: a counter of their own, b maybe converted already
        if (ts) {
            if (nth > 1) tp.barrier(); // the pool's wake-up is not the first node's time
            if (ith == 0) ts[0] = cpu_now_ns();
        }
        size_t i_mm = 0; // mat-mul steps so far (the same on every thread: all walk every step)
        for (size_t i = 0; i < n_steps; ++i) {
            const cpu_step & s = steps[i];
            if (s.barrier && nth > 1 && !ts) tp.barrier();
            ggml_cpu_take_word * owned = takes && takes_words(s) ? &takes[nth * i_mm++] : nullptr;
            switch (s.kind) {
                case CPU_STEP_NODE:
                    p.owned = owned;
                    ggml_cpu_compute_node(p, s.t);
                    break;
                case CPU_STEP_SERIAL:
                    if (ith == 0) ggml_cpu_compute_node(p1, s.t);
                    break;
                case CPU_STEP_CONVERT:
                    if (ith == 0) ggml_cpu_mul_mat_convert(p1, s.t, (char *)wdata + s.woff);
                    break;
                case CPU_STEP_MATVEC:
                    pm.counter = nth > 1 ? &counters[i].v : nullptr;
                    pm.owned = owned;
                    pm.pre_b = s.has_pre ? (char *)wdata + s.woff : nullptr;
                    ggml_cpu_compute_node(pm, s.t);
                    break;
            }
            if (ts) { // profiling only (one NODE step per node, barrier after each): one predictable branch otherwise
                if (nth > 1) tp.barrier();
                if (ith == 0) ts[i + 1] = cpu_now_ns();
            }
        }
    };
    if (nth == 1)
        job(0);
    else
        tp.run(job);
    return GGML_STATUS_SUCCESS;
}

// GGML_CPU_NODE_BARRIERS=1: one barrier after every node (the plan before barrier elision), for A/B runs.
static bool cpu_env_node_barriers() {
    const char * e = std::getenv("GGML_CPU_NODE_BARRIERS");
    return e && *e && std::strcmp(e, "0") != 0;
}

void ggml_graph_compute_with_ctx(ggml_context * ctx, ggml_cgraph * gf, int n_threads) {
    (void)ctx;
    // one cached pool for all callers (serialized), so repeated calls do not respawn threads
    static std::mutex mutex;
    static std::unique_ptr<ggml_cpu_threadpool> pool;
    static ggml_cpu_work_buffer work;
    std::lock_guard<std::mutex> lock(mutex);
    n_threads = std::max(1, n_threads);
    if (!pool || pool->n_threads() != n_threads) {
        pool.reset();
        pool = std::make_unique<ggml_cpu_threadpool>(n_threads);
    }
    static const bool node_barriers = cpu_env_node_barriers();
    const ggml_status st = cpu_graph_compute(*pool, work, gf, 0, node_barriers);
    GGML_ASSERT(st == GGML_STATUS_SUCCESS && "ggml_graph_compute_with_ctx failed (see log)");
}

// ---- buffers ---------------------------------------------------------------------------------
static void cpu_buffer_free(ggml_backend_buffer_t buf) { std::free(buf->context); }
static void cpu_buffer_free_nothing(ggml_backend_buffer_t) {}
static void * cpu_buffer_get_base(ggml_backend_buffer_t buf) { return buf->context; }

static void cpu_buffer_set_tensor(ggml_backend_buffer_t, ggml_tensor * t, const void * data, size_t offset,
                                  size_t size) {
    std::memcpy((char *)t->data + offset, data, size);
}
static void cpu_buffer_get_tensor(ggml_backend_buffer_t, const ggml_tensor * t, void * data, size_t offset,
                                  size_t size) {
    std::memcpy(data, (const char *)t->data + offset, size);
}
static bool cpu_buffer_cpy_tensor(ggml_backend_buffer_t, const ggml_tensor * src, ggml_tensor * dst) {
    if (src->buffer && !ggml_backend_buffer_is_host(src->buffer)) return false;
    std::memcpy(dst->data, src->data, ggml_nbytes(src));
    return true;
}
static void cpu_buffer_clear(ggml_backend_buffer_t buf, uint8_t value) { std::memset(buf->context, value, buf->size); }

static ggml_backend_buffer_i cpu_buffer_iface(bool owns_memory) {
    ggml_backend_buffer_i i{};
    i.free_buffer = owns_memory ? cpu_buffer_free : cpu_buffer_free_nothing;
    i.get_base = cpu_buffer_get_base;
    i.init_tensor = nullptr;
    i.set_tensor = cpu_buffer_set_tensor;
    i.get_tensor = cpu_buffer_get_tensor;
    i.cpy_tensor = cpu_buffer_cpy_tensor;
    i.clear = cpu_buffer_clear;
    return i;
}

// buft->context: nullptr for the CPU's own type, else the name of a simulated device's ("CPU1", ...)
static const char * cpu_buft_get_name(ggml_backend_buffer_type_t buft) {
    return buft->context ? (const char *)buft->context : "CPU";
}
// A buffer of 32 MiB or more (weights read into memory, a KV cache, a compute buffer) on 2 MiB pages where the kernel
// gives them (transparent huge pages in "madvise" mode): a decode step streams every weight once, and on 4 KiB pages
// each page is a TLB miss and a new start for the hardware prefetchers, which stop at page boundaries.
// GGML_CPU_HUGEPAGES=0: 4 KiB pages (A/B).
static void * cpu_alloc(size_t size) {
    constexpr size_t huge = size_t(2) << 20;
    static const bool off = std::getenv("GGML_CPU_HUGEPAGES") && std::atoi(std::getenv("GGML_CPU_HUGEPAGES")) == 0;
    if (size < 16 * huge || off) return std::aligned_alloc(k_cpu_alignment, round_up(size, k_cpu_alignment));
    void * p = std::aligned_alloc(huge, round_up(size, huge));
#if defined(__linux__) && defined(MADV_HUGEPAGE)
    if (p) madvise(p, round_up(size, huge), MADV_HUGEPAGE); // (advice: ignored where THP is off)
#endif
    return p;
}

static ggml_backend_buffer_t cpu_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size) {
    // always allocate something, so a zero-sized buffer still has a valid base
    void * data = cpu_alloc(std::max<size_t>(size, 1));
    if (!data) {
        GGML_LOG_ERROR("%s: failed to allocate %.2f MiB of host memory\n", __func__, size / (1024.0 * 1024.0));
        return nullptr;
    }
    return ggml_backend_buffer_init(buft, cpu_buffer_iface(true), data, size);
}
static size_t cpu_buft_get_alignment(ggml_backend_buffer_type_t) { return k_cpu_alignment; }
static size_t cpu_buft_get_max_size(ggml_backend_buffer_type_t) { return SIZE_MAX; }
static bool cpu_buft_is_host(ggml_backend_buffer_type_t) { return true; }

ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type() {
    static ggml_backend_buffer_type buft = {
        {cpu_buft_get_name, cpu_buft_alloc_buffer, cpu_buft_get_alignment, cpu_buft_get_max_size, nullptr,
         cpu_buft_is_host},
        nullptr,
    };
    return &buft;
}

ggml_backend_buffer_type_t ggml_backend_cpu_sim_buffer_type(int i) {
    static const char * names[GGML_CPU_SIM_MAX] = {"CPU", "CPU1", "CPU2", "CPU3", "CPU4", "CPU5", "CPU6", "CPU7"};
    static ggml_backend_buffer_type types[GGML_CPU_SIM_MAX];
    static std::once_flag once;
    if (i <= 0 || i >= GGML_CPU_SIM_MAX) return i == 0 ? ggml_backend_cpu_buffer_type() : nullptr;
    std::call_once(once, [] {
        for (int j = 1; j < GGML_CPU_SIM_MAX; ++j)
            types[j] = {ggml_backend_cpu_buffer_type()->iface, (void *)names[j]};
    });
    return &types[i];
}

ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size) {
    GGML_ASSERT(ptr && "ggml_backend_cpu_buffer_from_ptr: null pointer");
    return ggml_backend_buffer_init(ggml_backend_cpu_buffer_type(), cpu_buffer_iface(false), ptr, size);
}

// ---- backend ---------------------------------------------------------------------------------
struct ggml_backend_cpu_context {
    int n_threads;
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_buffer_type(); // default: the CPU's, or a simulated device's
    int64_t serial_below = GGML_CPU_SERIAL_BELOW_DEFAULT; // ggml_backend_cpu_set_serial_below
    bool node_barriers = cpu_env_node_barriers();         // ggml_backend_cpu_set_node_barriers
    std::unique_ptr<ggml_cpu_threadpool> pool;
    ggml_cpu_work_buffer work;
};

static const char * cpu_backend_get_name(ggml_backend_t backend) {
    return ggml_backend_buft_name(((ggml_backend_cpu_context *)backend->context)->buft);
}
static void cpu_backend_free(ggml_backend_t backend) {
    delete (ggml_backend_cpu_context *)backend->context;
    delete backend;
}
static ggml_backend_buffer_type_t cpu_backend_get_default_buffer_type(ggml_backend_t backend) {
    return ((ggml_backend_cpu_context *)backend->context)->buft;
}
static ggml_cpu_threadpool & cpu_backend_pool(ggml_backend_cpu_context * ctx) {
    if (!ctx->pool || ctx->pool->n_threads() != ctx->n_threads) {
        ctx->pool.reset();
        ctx->pool = std::make_unique<ggml_cpu_threadpool>(ctx->n_threads);
    }
    return *ctx->pool;
}
static ggml_status cpu_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * gf) {
    auto * ctx = (ggml_backend_cpu_context *)backend->context;
    return cpu_graph_compute(cpu_backend_pool(ctx), ctx->work, gf, ctx->serial_below, ctx->node_barriers);
}
// ggml_backend_i::graph_compute_profile: a time per node (cpu_graph_compute's timestamps)
static ggml_status cpu_backend_graph_compute_profile(ggml_backend_t backend, ggml_cgraph * gf,
                                                     void (*rec)(void *, int, int, double), void * user) {
    auto * ctx = (ggml_backend_cpu_context *)backend->context;
    cpu_profile prof;
    const ggml_status st =
        cpu_graph_compute(cpu_backend_pool(ctx), ctx->work, gf, ctx->serial_below, ctx->node_barriers, &prof);
    if (st != GGML_STATUS_SUCCESS) return st;
    for (size_t i = 0; i < prof.index.size() && i + 1 < prof.ts_ns.size(); ++i)
        rec(user, prof.index[i], 1, (prof.ts_ns[i + 1] - prof.ts_ns[i]) * 1e-3);
    return st;
}
static bool cpu_backend_supports_op(ggml_backend_t, const ggml_tensor * op) { return ggml_cpu_supports_op(op); }
static bool cpu_backend_supports_buft(ggml_backend_t, ggml_backend_buffer_type_t buft) {
    return ggml_backend_buft_is_host(buft) || buft == ggml_backend_cpu_repack_buffer_type();
}

ggml_backend_t ggml_backend_cpu_init() {
    auto * ctx = new ggml_backend_cpu_context;
    const unsigned hc = std::thread::hardware_concurrency();
    ctx->n_threads = hc == 0 ? 4 : (int)hc;
    ggml_backend_i iface{};
    iface.get_name = cpu_backend_get_name;
    iface.free = cpu_backend_free;
    iface.get_default_buffer_type = cpu_backend_get_default_buffer_type;
    iface.graph_compute = cpu_backend_graph_compute;
    iface.graph_compute_profile = cpu_backend_graph_compute_profile;
    iface.supports_op = cpu_backend_supports_op;
    iface.supports_buft = cpu_backend_supports_buft;
    iface.synchronize = nullptr;
    iface.set_tensor_async = nullptr;
    iface.get_tensor_async = nullptr;
    return new ggml_backend{iface, ctx};
}

ggml_backend_t ggml_backend_cpu_sim_init(int i) {
    ggml_backend_buffer_type_t buft = ggml_backend_cpu_sim_buffer_type(i);
    if (!buft) return nullptr;
    ggml_backend_t b = ggml_backend_cpu_init();
    ((ggml_backend_cpu_context *)b->context)->buft = buft;
    return b;
}

bool ggml_backend_is_cpu(ggml_backend_t backend) { return backend && backend->iface.get_name == cpu_backend_get_name; }

void ggml_backend_cpu_set_n_threads(ggml_backend_t backend, int n_threads) {
    GGML_ASSERT(ggml_backend_is_cpu(backend));
    auto * ctx = (ggml_backend_cpu_context *)backend->context;
    ctx->n_threads = std::max(1, n_threads); // the pool is rebuilt on the next graph
}

void ggml_backend_cpu_set_serial_below(ggml_backend_t backend, int64_t n_elements) {
    GGML_ASSERT(ggml_backend_is_cpu(backend));
    ((ggml_backend_cpu_context *)backend->context)->serial_below = std::max<int64_t>(0, n_elements);
}

void ggml_backend_cpu_set_node_barriers(ggml_backend_t backend, bool on) {
    GGML_ASSERT(ggml_backend_is_cpu(backend));
    ((ggml_backend_cpu_context *)backend->context)->node_barriers = on;
}
