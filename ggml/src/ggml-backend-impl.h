// ggml-backend-impl.h - internals of the backend layer shared with the graph dump: buffer
// ownership and a read-only view of the scheduler's last split.
#pragma once

#include "ggml-alloc.h"
#include "ggml-backend.h"

#include <vector>

// The backend a buffer was allocated through (ggml_backend_alloc_buffer /
// ggml_backend_alloc_ctx_tensors), or nullptr (allocated from a buffer type directly).
ggml_backend_t ggml_backend_buffer_get_owner(ggml_backend_buffer_t buf);

// One split of the last assigned graph: nodes [i_start, i_end) of the graph run on backend_id;
// inputs[k] is copied into input_copies[k] (in the split backend's compute buffer) first.
struct ggml_sched_split_info {
    int backend_id;
    int i_start;
    int i_end;
    std::vector<ggml_tensor *> inputs;
    std::vector<ggml_tensor *> input_copies;
};

int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched);
ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i);
ggml_gallocr_t ggml_backend_sched_get_gallocr(ggml_backend_sched_t sched, int backend_id);
const std::vector<ggml_sched_split_info> & ggml_backend_sched_get_splits(ggml_backend_sched_t sched);
// Index of the split that holds graph node t, or -1.
int ggml_backend_sched_get_node_split(ggml_backend_sched_t sched, const ggml_tensor * t);
// Backend id whose memory holds t (after assignment), or -1.
int ggml_backend_sched_get_tensor_backend_id(ggml_backend_sched_t sched, const ggml_tensor * t);
// The tensor node reads as src[j] when the scheduler runs it: an input copy, or node->src[j].
// (The caller's graph keeps its own sources between scheduler calls.)
ggml_tensor * ggml_backend_sched_get_node_src(ggml_backend_sched_t sched, const ggml_tensor * node, int j);
// If t is one of the scheduler's input copies, the tensor it copies; else nullptr.
ggml_tensor * ggml_backend_sched_get_copy_origin(ggml_backend_sched_t sched, const ggml_tensor * t);
