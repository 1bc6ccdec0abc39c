// ggml-backend.h - backends (CPU, CUDA), their buffers, and the scheduler that runs one graph
// across several backends.
//
//   ggml_backend_t cpu = ggml_backend_cpu_init();
//   ggml_backend_cpu_set_n_threads(cpu, 2);
//   // weights: allocate every tensor of a no_alloc context in one backend buffer
//   ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors(wctx, cpu);
//   ggml_backend_tensor_set(w, host_ptr, 0, ggml_nbytes(w));
//   // per step: build graph, let the scheduler allocate and run it
//   ggml_backend_t backends[] = { cuda, cpu };   // priority order; CPU last
//   ggml_backend_sched_t sched = ggml_backend_sched_new(backends, 2, GGML_DEFAULT_GRAPH_SIZE);
//   ggml_backend_sched_reserve(sched, worst_case_graph);  // measure: plans the compute buffers
//   ggml_backend_sched_graph_compute(sched, gf);           // assigns, splits, copies, allocates, runs
//   ggml_backend_tensor_get(logits, out, 0, ggml_nbytes(logits));
#pragma once

#include "ggml.h"

#include <cstddef>
#include <cstdint>

struct ggml_backend_buffer_type;
struct ggml_backend_buffer;
struct ggml_backend;
struct ggml_backend_sched;
typedef ggml_backend_buffer_type * ggml_backend_buffer_type_t;
typedef ggml_backend_buffer *      ggml_backend_buffer_t;
typedef ggml_backend *             ggml_backend_t;
typedef ggml_backend_sched *       ggml_backend_sched_t;

enum ggml_backend_buffer_usage { GGML_BACKEND_BUFFER_USAGE_ANY = 0, GGML_BACKEND_BUFFER_USAGE_WEIGHTS = 1, GGML_BACKEND_BUFFER_USAGE_COMPUTE = 2 };

// ---- buffer type: where memory comes from -----------------------------------------------
struct ggml_backend_buffer_type_i {
    const char *          (*get_name)(ggml_backend_buffer_type_t buft);
    ggml_backend_buffer_t (*alloc_buffer)(ggml_backend_buffer_type_t buft, size_t size); // nullptr on failure (logs why)
    size_t                (*get_alignment)(ggml_backend_buffer_type_t buft);
    size_t                (*get_max_size)(ggml_backend_buffer_type_t buft);   // SIZE_MAX if no limit
    size_t                (*get_alloc_size)(ggml_backend_buffer_type_t buft, const ggml_tensor * t); // nullptr: ggml_nbytes
    bool                  (*is_host)(ggml_backend_buffer_type_t buft);
};
struct ggml_backend_buffer_type {
    ggml_backend_buffer_type_i iface;
    void * context;
};

// ---- buffer: one allocation --------------------------------------------------------------
struct ggml_backend_buffer_i {
    void   (*free_buffer)(ggml_backend_buffer_t buf);
    void * (*get_base)(ggml_backend_buffer_t buf);
    void   (*init_tensor)(ggml_backend_buffer_t buf, ggml_tensor * t);  // may be nullptr
    void   (*set_tensor)(ggml_backend_buffer_t buf, ggml_tensor * t, const void * data, size_t offset, size_t size);
    void   (*get_tensor)(ggml_backend_buffer_t buf, const ggml_tensor * t, void * data, size_t offset, size_t size);
    bool   (*cpy_tensor)(ggml_backend_buffer_t buf, const ggml_tensor * src, ggml_tensor * dst); // may be nullptr
    void   (*clear)(ggml_backend_buffer_t buf, uint8_t value);
};
struct ggml_backend_buffer {
    ggml_backend_buffer_i      iface;
    ggml_backend_buffer_type_t buft;
    void *                     context;
    size_t                     size;
    ggml_backend_buffer_usage  usage;
};

ggml_backend_buffer_t ggml_backend_buffer_init(ggml_backend_buffer_type_t buft, ggml_backend_buffer_i iface,
                                               void * context, size_t size);
const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft);
ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size);
size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft);
size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft);
size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const ggml_tensor * t);
bool   ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft);

void   ggml_backend_buffer_free(ggml_backend_buffer_t buf);
void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buf);
size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buf);
void   ggml_backend_buffer_clear(ggml_backend_buffer_t buf, uint8_t value);
bool   ggml_backend_buffer_is_host(ggml_backend_buffer_t buf);
void   ggml_backend_buffer_set_usage(ggml_backend_buffer_t buf, ggml_backend_buffer_usage usage);
// t (or the tensor it is a view of) lives in a WEIGHTS buffer: only the host writes it
bool   ggml_backend_tensor_in_weights(const ggml_tensor * t);
ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buf);
// place a tensor at base + offset inside buf (sets t->buffer, t->data; calls init_tensor)
void   ggml_backend_tensor_alloc(ggml_backend_buffer_t buf, ggml_tensor * t, void * addr);
// give a view tensor its data from its view_src
void   ggml_backend_view_init(ggml_tensor * t);

// ---- tensor data access (any backend) -------------------------------------------------------
void ggml_backend_tensor_set(ggml_tensor * t, const void * data, size_t offset, size_t size);
void ggml_backend_tensor_get(const ggml_tensor * t, void * data, size_t offset, size_t size);
void ggml_backend_tensor_copy(const ggml_tensor * src, ggml_tensor * dst);  // across backends

// ---- backend: executes graphs -------------------------------------------------------------
enum ggml_status { GGML_STATUS_SUCCESS = 0, GGML_STATUS_FAILED = -1, GGML_STATUS_ALLOC_FAILED = -2 };

struct ggml_backend_i {
    const char *               (*get_name)(ggml_backend_t backend);
    void                       (*free)(ggml_backend_t backend);
    ggml_backend_buffer_type_t (*get_default_buffer_type)(ggml_backend_t backend);
    ggml_status                (*graph_compute)(ggml_backend_t backend, ggml_cgraph * gf);
    bool                       (*supports_op)(ggml_backend_t backend, const ggml_tensor * op);
    bool                       (*supports_buft)(ggml_backend_t backend, ggml_backend_buffer_type_t buft);
    void                       (*synchronize)(ggml_backend_t backend);  // may be nullptr
    // optional copies host <-> backend ordered with its queued work (nullptr: the buffer's set/get are used).
    // set: `data` is read before the call returns (the caller may reuse it at once); the write lands before any
    // later work of the backend (reads through the buffer, ggml_backend_tensor_get, see it once the backend is
    // synchronized). get: `data` is written by the time the backend is synchronized (it must stay
    // valid until then; a backend may need it in page-locked memory to stay asynchronous).
    void (*set_tensor_async)(ggml_backend_t backend, ggml_tensor * t, const void * data, size_t offset, size_t size);
    void (*get_tensor_async)(ggml_backend_t backend, const ggml_tensor * t, void * data, size_t offset, size_t size);
    // optional (nullptr: the scheduler times a profiled split as a whole): compute gf as graph_compute does,
    // timing each node or group of nodes, and once done (synchronised) call rec(user, i, n, us) for each: nodes
    // [i, i + n) of gf took us microseconds. Only called while profiling (ggml_backend_sched_set_profile).
    ggml_status (*graph_compute_profile)(ggml_backend_t backend, ggml_cgraph * gf,
                                         void (*rec)(void * user, int i, int n, double us), void * user);
};
struct ggml_backend {
    ggml_backend_i iface;
    void *         context;
};

const char * ggml_backend_name(ggml_backend_t backend);
void         ggml_backend_free(ggml_backend_t backend);
ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend);
ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size);
ggml_status  ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * gf);
bool         ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op);
bool         ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft);
void         ggml_backend_synchronize(ggml_backend_t backend);
// the backend's set_tensor_async / get_tensor_async (above) where it has them, else ggml_backend_tensor_set / _get
void ggml_backend_tensor_set_async(ggml_backend_t backend, ggml_tensor * t, const void * data, size_t offset,
                                   size_t size);
void ggml_backend_tensor_get_async(ggml_backend_t backend, const ggml_tensor * t, void * data, size_t offset,
                                   size_t size);
bool         ggml_backend_is_cpu(ggml_backend_t backend);

// Allocate every tensor of a no_alloc context (that has no data yet) in one new buffer.
// Returns nullptr (with a logged reason) on failure.
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors_from_buft(ggml_context * ctx, ggml_backend_buffer_type_t buft);
ggml_backend_buffer_t ggml_backend_alloc_ctx_tensors(ggml_context * ctx, ggml_backend_t backend);

// ---- CPU backend -------------------------------------------------------------------------
ggml_backend_t ggml_backend_cpu_init();
void ggml_backend_cpu_set_n_threads(ggml_backend_t backend, int n_threads);
// A graph without mat-mul or attention that writes fewer than n_elements in all runs on the calling thread
// alone (default GGML_CPU_SERIAL_BELOW_DEFAULT; 0: every graph uses all threads, as tests of threaded kernels want).
#define GGML_CPU_SERIAL_BELOW_DEFAULT (int64_t(1) << 16)
void ggml_backend_cpu_set_serial_below(ggml_backend_t backend, int64_t n_elements);
// true: a barrier of all threads after every node (the plan before barrier elision; default: the env var
// GGML_CPU_NODE_BARRIERS=1). false (default): barriers only where a node depends on another thread's work
// (docs/cpu-notes.md, "Barrier elision").
void ggml_backend_cpu_set_node_barriers(ggml_backend_t backend, bool on);
ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type();
// wrap existing host memory (e.g. a mmapped GGUF) as a CPU buffer without copying
ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size);
// Simulated devices, for tests of several-device placement on a machine without them (llm_model_params::
// sim_devices): device i (1 .. GGML_CPU_SIM_MAX - 1) has its own buffer type "CPUi" (host memory, the CPU buffer's
// functions, a distinct type) and a CPU backend whose default buffer type it is, so the scheduler runs the nodes next
// to weights in it on that backend and copies across. i = 0 is the CPU's own type; nullptr out of range.
#define GGML_CPU_SIM_MAX 8
ggml_backend_buffer_type_t ggml_backend_cpu_sim_buffer_type(int i);
ggml_backend_t ggml_backend_cpu_sim_init(int i);
// CPU weights stored for the decode mat-vec (cpu/repack.h): q4_0 / q4_K matrices in 8-row groups, others plain.
// Not host memory in the GGUF layout: write and read it with ggml_backend_tensor_set / _get (they convert).
ggml_backend_buffer_type_t ggml_backend_cpu_repack_buffer_type();
// true where this build's CPU decode reads weights of `type` faster from that buffer (q4_0, q4_K on AVX2 builds
// without AVX-512); the environment variable GGML_CPU_REPACK=0 / =1 overrides it, for A/B runs.
bool ggml_backend_cpu_repack_wanted(ggml_type type);

// ---- communicators ------------------------------------------------------------------------
// The ranks an ALL_REDUCE node (ggml_all_reduce) sums over. A host communicator's ranks are threads of this process
// whose tensors are in host memory (CPU backends, one per rank): the CPU backend runs its ALL_REDUCE nodes. An NCCL
// one (ggml_backend_cuda_comm_new, ggml-cuda.h) has a CUDA device per rank: the CUDA backend of that device runs them.
// Every rank must reach each all-reduce, in the same order, from a thread of its own.
enum ggml_comm_kind { GGML_COMM_HOST, GGML_COMM_NCCL };
struct ggml_comm;
ggml_comm *    ggml_comm_host_new(int n_ranks);  // nullptr for n_ranks < 1
void           ggml_comm_free(ggml_comm * comm);
int            ggml_comm_n_ranks(const ggml_comm * comm);
ggml_comm_kind ggml_comm_get_kind(const ggml_comm * comm);

// ---- scheduler -----------------------------------------------------------------------------
// Backends in priority order (the last must be the CPU). Each node runs on the backend that
// holds its weight (a src with PARAM flag / in a WEIGHTS buffer); otherwise on the backend of
// its inputs; otherwise the first backend that supports it. The graph is split into runs of
// nodes on one backend; inputs that live on another backend are copied into the split's
// backend before it runs. Per backend, one compute buffer is planned by ggml_gallocr.
ggml_backend_sched_t ggml_backend_sched_new(ggml_backend_t * backends, int n_backends, size_t graph_size);
void ggml_backend_sched_free(ggml_backend_sched_t sched);
bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, ggml_cgraph * measure_graph);  // plan buffers
bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, ggml_cgraph * gf);        // assign + allocate
ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, ggml_cgraph * gf); // alloc (if not) + run
// As ggml_backend_sched_graph_compute, without waiting for the backends at the end: the host may prepare the next
// graph while the last split still runs. Reads of its outputs through ggml_backend_tensor_get are ordered after
// it; ggml_backend_sched_synchronize waits for it.
ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, ggml_cgraph * gf);
void ggml_backend_sched_synchronize(ggml_backend_sched_t sched);
void ggml_backend_sched_reset(ggml_backend_sched_t sched);  // forget assignments (next graph)
int  ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched);
int  ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched);
size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend);
void ggml_backend_sched_set_tensor_backend(ggml_backend_sched_t sched, ggml_tensor * t, ggml_backend_t backend);
ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, const ggml_tensor * t);
// The backend owning a tensor's buffer, or nullptr.
ggml_backend_t ggml_backend_sched_get_buffer_backend(ggml_backend_sched_t sched, ggml_backend_buffer_t buf);

// ---- profiling (ggml-cost.h) --------------------------------------------------------------------------
// While on, each ggml_backend_sched_graph_compute records the time of every computing node (CPU: a timestamp
// per node in the thread pool; CUDA: an eager run without CUDA graphs, an event after each launch or fused
// group), its modelled bytes and FLOPs, the input copies between backends and the call's wall time. Off (the
// default): nothing is recorded and the compute path is the usual one.
struct ggml_profile;
void ggml_backend_sched_set_profile(ggml_backend_sched_t sched, bool on);
// The records of the last compute run while profiling was on; nullptr before any.
const ggml_profile * ggml_backend_sched_get_profile(ggml_backend_sched_t sched);
