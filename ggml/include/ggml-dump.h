// ggml-dump.h - graph dumps for humans (Graphviz DOT) and tools (JSON): every node with its
// op, shape, strides, backend, buffer offset, in-place/view marks, and the edges between them.
//
//   ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
//   ggml_gallocr_alloc_graph(ga, gf);
//   ggml_dump_info info;
//   info.galloc = ga;                          // or info.sched = sched after sched_alloc_graph
//   std::string err;
//   if (!ggml_graph_dump_files(gf, &info, "step0", &err)) fprintf(stderr, "%s\n", err.c_str());
//   // -> step0.dot (render with: dot -Tsvg step0.dot -o step0.svg) and step0.json
//
// JSON layout: {"title", "n_nodes", "n_leafs", "n_splits",
//   "nodes":  [{"id","index","name","op","type","ne","nb","contiguous","view","view_src","view_offs",
//               "inplace","flags","backend","split","buffer","offset","size","src":[ids]}],
//   "leafs":  [{"id","index","name","kind" (weight|input|constant|copy),"type","ne","nb",...}],
//   "edges":  [{"from","to","slot"}]  (slot -1: an input copy from its origin),
//   "buffers":[{"name","buft","usage","size","host"}],
//   "splits": [{"index","backend","i_start","i_end","inputs":[{"from","copy"}]}],
//   "alloc":  {"planned_size","naive_size"} (with a gallocr),
//   "profile": {"wall_us","step_us","kernels_us","copy_us","outside_us","rooflines":[...]} (with a profile)}
// Offsets are bytes from the tensor's buffer base; -1 where a tensor has no memory yet.
// With a profile (ggml-cost.h) every node also has "us","gbs","tflops","roofline_pct","bytes","flops" (null
// where not timed: views; the nodes of a fused group after its first name it in "fused_into"), and the DOT
// colours timed nodes by their time (white to red: the longest, on a square-root scale) and labels them with
// time, share of the step and % of roofline.
#pragma once

#include "ggml-alloc.h"
#include "ggml-backend.h"
#include "ggml-cost.h"
#include "ggml.h"

#include <string>

struct ggml_dump_info {
    ggml_gallocr_t galloc = nullptr;      // the allocator that planned gf (offsets, in-place marks)
    ggml_backend_sched_t sched = nullptr; // or the scheduler that assigned gf (backends, splits, copies)
    const char * title = nullptr;         // graph label
    const ggml_profile * profile = nullptr; // measured times of gf's nodes (ggml_backend_sched_get_profile)
};

// info may be nullptr (shapes and edges only).
std::string ggml_graph_dump_dot(const ggml_cgraph * gf, const ggml_dump_info * info);
std::string ggml_graph_dump_json(const ggml_cgraph * gf, const ggml_dump_info * info);
// Writes PREFIX.dot and PREFIX.json (each via a temp file and rename). On failure returns false
// and sets *err (if given) to a one-line reason.
bool ggml_graph_dump_files(const ggml_cgraph * gf, const ggml_dump_info * info, const std::string & prefix,
                           std::string * err);
