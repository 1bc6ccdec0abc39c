// ggml-impl.h - internals shared by the core, the allocator, the backends and the dump.
#pragma once

#include "ggml.h"

#include <cstring>
#include <unordered_set>

struct ggml_cgraph {
    int size;                 // capacity of nodes/leafs
    int n_nodes;
    int n_leafs;
    ggml_tensor ** nodes;     // ops in topological order (sources before users)
    ggml_tensor ** leafs;     // tensors with op NONE (weights, inputs, constants)
    std::unordered_set<const ggml_tensor *> * visited;  // owned by the context
    // Non-zero: the scheduler's id of this split graph, fresh at every ggml_backend_sched_alloc_graph. Two
    // computes with the same id run the same nodes on the same tensors, shapes, data and params (only input
    // contents differ), so a backend may launch what it captured last time without comparing the graph again.
    uint64_t plan_id = 0;
};

// A small struct with a tensor's shape and strides, for kernels (instead of injected locals).
struct ggml_shape {
    int64_t ne[GGML_MAX_DIMS];
    size_t  nb[GGML_MAX_DIMS];
    explicit ggml_shape(const ggml_tensor * t) {
        for (int i = 0; i < GGML_MAX_DIMS; ++i) { ne[i] = t->ne[i]; nb[i] = t->nb[i]; }
    }
    size_t offset(int64_t i0, int64_t i1, int64_t i2, int64_t i3) const {
        return i0 * nb[0] + i1 * nb[1] + i2 * nb[2] + i3 * nb[3];
    }
};

inline char * ggml_ptr(const ggml_tensor * t, int64_t i1, int64_t i2 = 0, int64_t i3 = 0) {
    return (char *) t->data + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
}

// f16 <-> f32 in headers for inlining in kernels
inline float ggml_compute_fp16_to_fp32(ggml_fp16_t h) {
    const uint32_t w = (uint32_t) h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w;
    const uint32_t exp_offset = 0xE0u << 23;
    float exp_scale;
    { const uint32_t v = 0x7800000u; std::memcpy(&exp_scale, &v, 4); }  // 0x1.0p-112f
    uint32_t nv = (two_w >> 4) + exp_offset;
    float normalized; std::memcpy(&normalized, &nv, 4);
    normalized *= exp_scale;
    const uint32_t magic_mask = 126u << 23;
    const float magic_bias = 0.5f;
    uint32_t dv = (two_w >> 17) | magic_mask;
    float denormalized; std::memcpy(&denormalized, &dv, 4);
    denormalized -= magic_bias;
    const uint32_t denormalized_cutoff = 1u << 27;
    uint32_t nbits, dbits; std::memcpy(&nbits, &normalized, 4); std::memcpy(&dbits, &denormalized, 4);
    const uint32_t result = sign | (two_w < denormalized_cutoff ? dbits : nbits);
    float out; std::memcpy(&out, &result, 4);
    return out;
}

inline ggml_fp16_t ggml_compute_fp32_to_fp16(float f) {
    float scale_to_inf, scale_to_zero;
    { const uint32_t a = 0x77800000u, b = 0x08800000u; std::memcpy(&scale_to_inf, &a, 4); std::memcpy(&scale_to_zero, &b, 4); }
    float base = (f < 0 ? -f : f) * scale_to_inf * scale_to_zero;
    uint32_t w; std::memcpy(&w, &f, 4);
    const uint32_t shl1_w = w + w;
    const uint32_t sign = w & 0x80000000u;
    uint32_t bias = shl1_w & 0xFF000000u;
    if (bias < 0x71000000u) bias = 0x71000000u;
    uint32_t bv = (bias >> 1) + 0x07800000u;
    float bf; std::memcpy(&bf, &bv, 4);
    base = bf + base;
    uint32_t bits; std::memcpy(&bits, &base, 4);
    const uint32_t exp_bits = (bits >> 13) & 0x00007C00u;
    const uint32_t mantissa_bits = bits & 0x00000FFFu;
    const uint32_t nonsign = exp_bits + mantissa_bits;
    return (ggml_fp16_t) ((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

// Compute the default (contiguous) strides for a type and ne.
void ggml_set_contiguous_strides(ggml_tensor * t);
