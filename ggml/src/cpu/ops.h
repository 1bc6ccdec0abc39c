// cpu/ops.h - the CPU kernels. One function per op, all of the same shape:
//   void ggml_cpu_op_<name>(const ggml_cpu_params & p, ggml_tensor * dst);
// Inputs are dst->src[], parameters are dst->op_params. Every kernel is called by all p.nth
// threads at once with p.ith in [0, nth) and splits its rows among them. A kernel that needs
// two phases (e.g. quantize activations then dot) calls p.barrier() between them; all threads
// must reach the same barriers. p.wdata is scratch of ggml_cpu_op_work_size(dst, nth) bytes,
// shared by all threads.
#pragma once

#include "ggml.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>

// Units taken from a thread's own range: from its front by the owner (high 32 bits), from its back by the others
// (low 32 bits). See ggml_cpu_units.
struct alignas(64) ggml_cpu_take_word {
    std::atomic<uint64_t> v{0};
};

struct ggml_cpu_params {
    int    ith;      // this thread
    int    nth;      // threads
    void * wdata;    // shared scratch
    size_t wsize;
    std::function<void()> barrier;  // all nth threads meet here
    // Optional shared work counter for dynamic scheduling: zero when each barrier phase starts
    // (the thread pool resets it), so a kernel may hand out work units with fetch_add once per
    // phase. nullptr: split statically (split()).
    std::atomic<int64_t> * counter = nullptr;
    // Mat-mul steps of the graph executor (ggml-cpu.cpp) only: nth take words, one per thread and cache line, zero
    // when the step starts: each thread's share of a decode mat-vec's units as a range of its own (ggml_cpu_units,
    // streaming mode). nullptr: not given.
    ggml_cpu_take_word * owned = nullptr;
    // MUL_MAT only: b already converted to the dot's activation type (ggml_cpu_mul_mat_convert), so the
    // kernel skips its conversion phase and that phase's barrier. nullptr: convert as usual.
    const void * pre_b = nullptr;

    // rows [r0, r1) of nrows for thread t of nth
    static void split_of(int t, int nth, int64_t nrows, int64_t & r0, int64_t & r1) {
        const int64_t per = (nrows + nth - 1) / nth;
        r0 = per * t < nrows ? per * t : nrows;
        r1 = r0 + per < nrows ? r0 + per : nrows;
    }
    // rows [r0, r1) of nrows for this thread
    void split(int64_t nrows, int64_t & r0, int64_t & r1) const { split_of(ith, nth, nrows, r0, r1); }
};

// bytes of shared scratch the op needs (0 for most)
size_t ggml_cpu_op_work_size(const ggml_tensor * dst, int n_threads);
// does the CPU implement this node (op + types)?
bool   ggml_cpu_supports_op(const ggml_tensor * dst);
// run one node (dispatch on dst->op); views/NONE are no-ops
void   ggml_cpu_compute_node(const ggml_cpu_params & p, ggml_tensor * dst);

#define GGML_CPU_OP(name) void ggml_cpu_op_##name(const ggml_cpu_params & p, ggml_tensor * dst)
GGML_CPU_OP(dup);            // dup.cpp     (also cont, cpy)
GGML_CPU_OP(cpy);
GGML_CPU_OP(add);            // binary.cpp
GGML_CPU_OP(mul);
GGML_CPU_OP(scale);          // unary.cpp
GGML_CPU_OP(silu);
GGML_CPU_OP(swiglu);
GGML_CPU_OP(get_rows);       // get_rows.cpp
GGML_CPU_OP(set_rows);       // set_rows.cpp
GGML_CPU_OP(diag_mask_inf);  // softmax.cpp
GGML_CPU_OP(soft_max);
GGML_CPU_OP(rope);           // rope.cpp
GGML_CPU_OP(rms_norm);       // norm.cpp
GGML_CPU_OP(mul_mat);        // mul_mat.cpp (vec_dot.cpp holds the SIMD dots)
GGML_CPU_OP(argmax);         // argmax.cpp
GGML_CPU_OP(all_reduce);     // all_reduce.cpp
GGML_CPU_OP(kq_mask);        // kq_mask.cpp
GGML_CPU_OP(flash_attn_ext); // flash_attn.cpp
#undef GGML_CPU_OP

// SIMD row kernels (vec_dot.cpp), picked at build time (AVX-512 VNNI / AVX2 / scalar).
void ggml_vec_dot_f32(int64_t n, float * s, const float * x, const float * y);
void ggml_vec_dot_f16_f32(int64_t n, float * s, const ggml_fp16_t * x, const float * y);
void ggml_vec_dot_f16(int64_t n, float * s, const ggml_fp16_t * x, const ggml_fp16_t * y);
void ggml_vec_dot_q8_0_q8_1(int64_t n, float * s, const block_q8_0 * x, const block_q8_1 * y);
void quantize_row_q8_1(const float * x, block_q8_1 * y, int64_t k);  // SIMD, bit-identical to _ref
