// cpu/common.h - helpers shared by the CPU kernels: how many threads an op is worth, the row
// range of one thread, and typed element access for f32/f16 tensors.
//
//   int64_t r0, r1;
//   if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), dst->ne[0], r0, r1)) return;  // nothing for us
//   for (int64_t ir = r0; ir < r1; ++ir) { ggml_cpu_row_index ri(dst, ir); ... }
#pragma once

#include "ggml-impl.h"
#include "ops.h"

#include <algorithm>

// Below this many element-ops per thread, splitting costs more (wake-up, cache traffic) than it
// saves; such ops run on fewer threads and the idle ones go straight to the barrier.
constexpr int64_t GGML_CPU_MIN_WORK_PER_THREAD = 16 * 1024;

// Threads worth using for `work` element-ops spread over `n_items` independent items.
inline int ggml_cpu_n_active(const ggml_cpu_params & p, int64_t n_items, int64_t work) {
    int64_t n = std::max<int64_t>(1, work / GGML_CPU_MIN_WORK_PER_THREAD);
    n = std::min<int64_t>(n, p.nth);
    n = std::min<int64_t>(n, std::max<int64_t>(1, n_items));
    return (int)n;
}

// Items [r0, r1) of n_items (each costing about item_cost element-ops) for this thread.
// Returns false when this thread has nothing to do.
inline bool ggml_cpu_thread_rows(const ggml_cpu_params & p, int64_t n_items, int64_t item_cost, int64_t & r0,
                                 int64_t & r1) {
    const int n_use = ggml_cpu_n_active(p, n_items, n_items * item_cost);
    r0 = r1 = 0;
    if (p.ith >= n_use || n_items <= 0) return false;
    const int64_t per = (n_items + n_use - 1) / n_use;
    r0 = std::min<int64_t>(per * p.ith, n_items);
    r1 = std::min<int64_t>(r0 + per, n_items);
    return r0 < r1;
}

// (i1, i2, i3) of flat row index ir of a tensor with shape ne.
struct ggml_cpu_row_index {
    int64_t i1, i2, i3;
    ggml_cpu_row_index(const ggml_tensor * t, int64_t ir) {
        i3 = ir / (t->ne[1] * t->ne[2]);
        i2 = (ir - i3 * t->ne[1] * t->ne[2]) / t->ne[1];
        i1 = ir - i3 * t->ne[1] * t->ne[2] - i2 * t->ne[1];
    }
};

inline bool ggml_cpu_is_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16; }
// f32, f16 or a quantized type the CPU multiplies with (has a mul_mat activation type in cpu/quants.h)
bool ggml_cpu_is_weight_type(ggml_type t);

// element load/store for f32 or f16 (other types are rejected by ggml_cpu_supports_op)
inline float ggml_cpu_load(ggml_type type, const char * p) {
    return type == GGML_TYPE_F32 ? *(const float *)p : ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *)p);
}
inline void ggml_cpu_store(ggml_type type, char * p, float v) {
    if (type == GGML_TYPE_F32)
        *(float *)p = v;
    else
        *(ggml_fp16_t *)p = ggml_compute_fp32_to_fp16(v);
}

// row of f32 with unit stride?
inline bool ggml_cpu_rows_f32(const ggml_tensor * t) { return t->type == GGML_TYPE_F32 && t->nb[0] == sizeof(float); }
