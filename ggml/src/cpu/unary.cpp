// cpu/unary.cpp - elementwise SCALE, SILU and SWIGLU (silu(a) * b).
//   a, b: f32/f16 [ne0, ne1, ne2, ne3] (any strides); dst: a's type, a's shape (may alias a)
#include "common.h"
#include "vec_exp.h"

#include <cmath>

namespace {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }

// dst[i] = f(a[i]) or f(a[i], b[i]) for every element; b may be nullptr.
template <typename F> void map_op(const ggml_cpu_params & p, ggml_tensor * dst, const ggml_tensor * b, F f) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(ggml_cpu_is_float(a->type) && ggml_cpu_is_float(dst->type) && ggml_are_same_shape(a, dst));
    if (b) GGML_ASSERT(ggml_cpu_is_float(b->type) && ggml_are_same_shape(a, b));

    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), ne0, r0, r1)) return;

    const bool fast = ggml_cpu_rows_f32(a) && ggml_cpu_rows_f32(dst) && (!b || ggml_cpu_rows_f32(b));
    for (int64_t ir = r0; ir < r1; ++ir) {
        const ggml_cpu_row_index ri(dst, ir);
        const char * ra = ggml_ptr(a, ri.i1, ri.i2, ri.i3);
        const char * rb = b ? ggml_ptr(b, ri.i1, ri.i2, ri.i3) : nullptr;
        char * rd = ggml_ptr(dst, ri.i1, ri.i2, ri.i3);
        if (fast) {
            const float * x = (const float *)ra;
            const float * y = (const float *)rb;
            float * z = (float *)rd;
            if (y) {
                for (int64_t i = 0; i < ne0; ++i)
                    z[i] = f(x[i], y[i]);
            } else {
                for (int64_t i = 0; i < ne0; ++i)
                    z[i] = f(x[i], 0.0f);
            }
        } else {
            for (int64_t i = 0; i < ne0; ++i) {
                const float x = ggml_cpu_load(a->type, ra + i * a->nb[0]);
                const float y = b ? ggml_cpu_load(b->type, rb + i * b->nb[0]) : 0.0f;
                ggml_cpu_store(dst->type, rd + i * dst->nb[0], f(x, y));
            }
        }
    }
}

} // namespace

void ggml_cpu_op_scale(const ggml_cpu_params & p, ggml_tensor * dst) {
    const float s = ggml_get_op_params_f32(dst, 0);
    map_op(p, dst, nullptr, [s](float x, float) { return x * s; });
}

void ggml_cpu_op_silu(const ggml_cpu_params & p, ggml_tensor * dst) {
    map_op(p, dst, nullptr, [](float x, float) { return silu(x); });
}

void ggml_cpu_op_swiglu(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    if (ggml_cpu_rows_f32(a) && ggml_cpu_rows_f32(b) && ggml_cpu_rows_f32(dst) && ggml_are_same_shape(a, dst) &&
        ggml_are_same_shape(a, b)) { // SIMD rows (cpu/vec_exp.h)
        const int64_t ne0 = dst->ne[0];
        int64_t r0, r1;
        if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), ne0, r0, r1)) return;
        for (int64_t ir = r0; ir < r1; ++ir) {
            const ggml_cpu_row_index ri(dst, ir);
            ggml_vec_swiglu_f32(ne0, (float *)ggml_ptr(dst, ri.i1, ri.i2, ri.i3),
                                (const float *)ggml_ptr(a, ri.i1, ri.i2, ri.i3),
                                (const float *)ggml_ptr(b, ri.i1, ri.i2, ri.i3));
        }
        return;
    }
    map_op(p, dst, b, [](float x, float y) { return silu(x) * y; });
}
