// ggml-alloc.h - the graph allocator: plans every intermediate tensor of a graph into one
// buffer by liveness.
//
// A tensor's block is taken when its op runs and given back after its last consumer runs.
// Blocks are best fit from a free list with coalescing of neighbours; an op whose output has
// the same size/layout as an input that has no other remaining consumer, and that is not a
// graph input or output, computes in place (ggml_op_can_inplace). Tensors flagged OUTPUT are
// never freed; tensors flagged INPUT get their own blocks, which are never reused.
//
//   ggml_gallocr_t ga = ggml_gallocr_new(ggml_backend_cpu_buffer_type());
//   ggml_gallocr_reserve(ga, worst_case_graph);   // measure pass: sizes the buffer
//   printf("compute buffer: %zu bytes\n", ggml_gallocr_get_buffer_size(ga));
//   ggml_gallocr_alloc_graph(ga, gf);             // place every node of gf (grows if needed)
//   ... compute gf ...
//   ggml_gallocr_free(ga);
#pragma once

#include "ggml-backend.h"

struct ggml_gallocr;
typedef ggml_gallocr * ggml_gallocr_t;

ggml_gallocr_t ggml_gallocr_new(ggml_backend_buffer_type_t buft);
void           ggml_gallocr_free(ggml_gallocr_t galloc);
// Plan gf and make sure the buffer is at least that big. Returns false if allocation failed.
bool           ggml_gallocr_reserve(ggml_gallocr_t galloc, ggml_cgraph * gf);
// Assign data to every node/leaf of gf that has none (views get their view_src's memory).
bool           ggml_gallocr_alloc_graph(ggml_gallocr_t galloc, ggml_cgraph * gf);
size_t         ggml_gallocr_get_buffer_size(ggml_gallocr_t galloc);
ggml_backend_buffer_t ggml_gallocr_get_buffer(ggml_gallocr_t galloc);

// Sum of the sizes of all the graph's non-view intermediates (what one-buffer-per-tensor costs).
size_t ggml_gallocr_naive_size(ggml_cgraph * gf, ggml_backend_buffer_type_t buft);
// Was t computed in place over one of its sources in the last plan? (for graph dumps)
bool   ggml_gallocr_is_inplace(ggml_gallocr_t galloc, const ggml_tensor * t);
// Byte offset of t in the compute buffer in the last plan, or SIZE_MAX if not planned here.
size_t ggml_gallocr_get_offset(ggml_gallocr_t galloc, const ggml_tensor * t);

// Can op compute with dst aliasing src[i]? (elementwise ops with equal layouts, etc.)
bool ggml_op_can_inplace(const ggml_tensor * node, int src_index);
