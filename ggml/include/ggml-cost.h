// ggml-cost.h - what a graph node costs and where its time goes: a cost model (bytes read, bytes written and
// FLOPs of a node from its shapes, types and strides; one function per op), the roofline of a device (memory
// bandwidth, peak FLOP/s per compute class), and the per-node profile of a step that the scheduler records
// (ggml_backend_sched_set_profile) set against that roofline.
//
//   ggml_cost c = ggml_op_cost(node);                    // c.bytes_read, c.bytes_written, c.flops, c.peak
//
//   ggml_backend_sched_set_profile(sched, true);         // the next computes time every node
//   ggml_backend_sched_graph_compute(sched, gf);
//   ggml_profile p = *ggml_backend_sched_get_profile(sched);
//   ggml_backend_sched_set_profile(sched, false);
//   ggml_roofline roof;                                  // measured by the caller (examples/common/roofline.h)
//   roof.bw_gbs = 40;
//   roof.peak_tflops[GGML_PEAK_F32] = 0.1;
//   ggml_profile_set_roofline(p, "CPU", roof);           // fills roof_us of the CPU's records
//   fputs(ggml_profile_table(p, 20).c_str(), stdout);    // top nodes by time, then totals per op
//
// Per record: achieved GB/s = bytes / time, TFLOP/s = flops / time, and % of roofline = the time the node
// would take at the roofline, max(bytes / bandwidth, flops / peak), over the measured time.
#pragma once

#include "ggml.h"

#include <string>
#include <utility>
#include <vector>

// The units an op's FLOPs run on: mat-muls and attention by their weight (K) type, the rest on f32 units.
enum ggml_peak_class {
    GGML_PEAK_F32 = 0,  // f32 weights and every elementwise op
    GGML_PEAK_F16 = 1,  // f16 weights / K cache (tensor cores on CUDA)
    GGML_PEAK_INT8 = 2, // quantized weights (int8 dot products of quantized activations)
    GGML_PEAK_COUNT = 3,
};
const char * ggml_peak_class_name(ggml_peak_class c); // "f32", "f16", "int8"

// The modelled cost of one node: the bytes it must move at least (each input element read once, each output
// element written once, quantized types by their block size) and the arithmetic it does.
struct ggml_cost {
    double bytes_read = 0;
    double bytes_written = 0;
    double flops = 0;
    ggml_peak_class peak = GGML_PEAK_F32;
    double bytes() const { return bytes_read + bytes_written; }
};

// Cost of node (views, reshapes, NONE: zero). Counts per op:
//   MUL_MAT a [K, M, A2, A3] x b [K, N, B2, B3]: 2*K*M*N*B2*B3 FLOPs; reads every row of a once (its type's
//     bytes: block size x block bytes) and b once; writes M*N*B2*B3 f32.
//   FLASH_ATTN_EXT q [D, n_q, n_head], k [D, n_kv, n_head_kv], v [Dv, ...]: 2*(D + Dv)*n_kv*n_q*n_head FLOPs
//     (4*D*n_kv*n_q*n_head when Dv = D); reads K, V, Q and the n_q mask rows; writes Dv*n_head*n_q f32.
//   ADD, MUL, SCALE: 1 FLOP per output element; RMS_NORM 3; ROPE 3; SOFT_MAX 5; SILU 4; SWIGLU 5; ARGMAX 1;
//     reads each source whole (a broadcast source once), writes the output.
//   GET_ROWS: reads the picked rows and the indices; SET_ROWS: reads the source rows and the indices, writes
//     the rows in the destination's type; CPY / DUP / CONT: reads the source, writes it in the result's type;
//     DIAG_MASK_INF: reads and writes the tensor. No FLOPs.
ggml_cost ggml_op_cost(const ggml_tensor * node);

// Bytes of t's elements as stored (rows of ne[0] in t's type; padding and strides not counted).
double ggml_cost_tensor_bytes(const ggml_tensor * t);

// ---- roofline ------------------------------------------------------------------------------------------
struct ggml_roofline {
    double bw_gbs = 0;                        // memory bandwidth, GB/s (0: unknown)
    double peak_tflops[GGML_PEAK_COUNT] = {}; // peak per compute class, TFLOP/s (0: unknown)
    std::string source;                       // how the figures were obtained (printed with the table)
};

// Microseconds a node of cost c takes at the roofline: max(bytes / bw, flops / peak of its class); the terms
// whose figure is unknown (0) are left out; 0 when both are.
double ggml_roofline_us(const ggml_roofline & r, const ggml_cost & c);

// ---- profile of one step ----------------------------------------------------------------------------------
// One timed record: a node, or a group of adjacent nodes timed together (a fused group on CUDA; a whole split on
// a backend that cannot time nodes one by one).
struct ggml_profile_node {
    int node = -1;             // index in the computed graph of the group's first node
    int n_nodes = 1;           // graph nodes [node, node + n_nodes) (views among them included)
    std::string name;          // the first node's name
    std::string label;         // op symbols of the group's computing nodes joined by '+' ("mul_mat+mul_mat+swiglu")
    ggml_op op = GGML_OP_NONE; // the first node's
    ggml_type type = GGML_TYPE_F32;        // the first node's result type
    ggml_type src0_type = GGML_TYPE_COUNT; // its src[0]'s (a mat-mul's weights, attention's q); COUNT: none
    ggml_type src1_type = GGML_TYPE_COUNT; // its src[1]'s (attention's K); COUNT: none
    int64_t ne[GGML_MAX_DIMS] = {0, 0, 0, 0};
    std::string backend;
    double us = 0;      // measured
    ggml_cost cost;     // summed over the group's nodes
    double roof_us = 0; // at the roofline (ggml_profile_set_roofline); 0: unknown

    double gbs() const { return us > 0 ? cost.bytes() / us * 1e-3 : 0; }
    double tflops() const { return us > 0 ? cost.flops / us * 1e-6 : 0; }
    double roofline_pct() const { return us > 0 && roof_us > 0 ? 100.0 * roof_us / us : 0; }
    // the weight type of a mat-mul, the K type of attention, else the result type
    ggml_type main_type() const;
};

struct ggml_profile {
    std::vector<ggml_profile_node> nodes; // in execution order
    double wall_us = 0;                   // the profiled ggml_backend_sched_graph_compute call, entry to return
    double copy_us = 0;                   // of which input copies between backends (host-timed, synchronised)
    int n_graph_nodes = 0;
    // the step's wall time with profiling off, where the caller measured it (0: none): the time outside kernels
    // is then step_us - kernel_us(), since a profiled run (eager on CUDA) is slower than a normal one
    double step_us = 0;
    std::string step_what;                                        // what step_us timed ("llm_decode, median of 5")
    std::vector<std::pair<std::string, ggml_roofline>> rooflines; // per backend name

    double kernel_us() const; // sum of the records
    double ref_us() const { return step_us > 0 ? step_us : wall_us; }
};

// Sets roof_us of every record of `backend` (and remembers r for the tables and the dump).
void ggml_profile_set_roofline(ggml_profile & p, const std::string & backend, const ggml_roofline & r);
const ggml_roofline * ggml_profile_get_roofline(const ggml_profile & p, const std::string & backend);

// Several profiles of the same graph: per record the median time, the median wall and copy times. Runs whose
// records do not line up with the first run's are left out.
ggml_profile ggml_profile_median(const std::vector<ggml_profile> & runs);

// Text reports: the top_n records by time (op, name, shape, type, backend, us, % of the step, GB/s, TFLOP/s,
// % of roofline), the totals per op label, and the summary lines (step wall, kernels, copies, time outside
// kernels). Each ends with a newline.
std::string ggml_profile_table(const ggml_profile & p, int top_n);
std::string ggml_profile_op_totals(const ggml_profile & p);
std::string ggml_profile_summary(const ggml_profile & p);
