// cpu/softmax.cpp - SOFT_MAX and DIAG_MASK_INF.
//
// SOFT_MAX: dst = softmax over ne0 of (a * scale + mask), then causal masking.
//   a:    f32 [ne0, ne1, ne2, ne3] (any strides)
//   mask: optional f32/f16 [ne0, >=ne1, ne2/r2, ne3/r3], row i1 used for row i1, broadcast over dims 2, 3
//   params: f32(0) = scale, i32(1) = causal_n_past (-1: none; else column i0 > n_past + i1 is -inf)
//   dst:  f32 contiguous rows, a's shape (may alias a)
// A row whose every entry is -inf (fully masked) produces zeros, not NaN.
//
// DIAG_MASK_INF: dst[i0, i1] = i0 > n_past + i1 ? -inf : a[i0, i1]; f32/f16, any strides.
#include "common.h"
#include "vec_exp.h"

#include <cmath>

void ggml_cpu_op_soft_max(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * mask = dst->src[1];
    GGML_ASSERT(a->type == GGML_TYPE_F32 && ggml_cpu_rows_f32(dst) && ggml_are_same_shape(a, dst));
    if (mask) {
        GGML_ASSERT(ggml_cpu_is_float(mask->type));
        GGML_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1]);
        GGML_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0);
    }
    const float scale = ggml_get_op_params_f32(dst, 0);
    const int32_t n_past = ggml_get_op_params_i32(dst, 1);

    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), 4 * ne0, r0, r1)) return;

    for (int64_t ir = r0; ir < r1; ++ir) {
        const ggml_cpu_row_index ri(dst, ir);
        const char * ra = ggml_ptr(a, ri.i1, ri.i2, ri.i3);
        float * y = (float *)ggml_ptr(dst, ri.i1, ri.i2, ri.i3);
        const char * rm = mask ? ggml_ptr(mask, ri.i1, ri.i2 % mask->ne[2], ri.i3 % mask->ne[3]) : nullptr;
        // columns [0, n_vis) may be visible; the rest are causally masked
        const int64_t n_vis = n_past < 0 ? ne0 : std::min<int64_t>(ne0, (int64_t)n_past + ri.i1 + 1);

        float vmax = -INFINITY;
        for (int64_t i = 0; i < n_vis; ++i) {
            float v = *(const float *)(ra + i * a->nb[0]) * scale;
            if (rm) v += ggml_cpu_load(mask->type, rm + i * mask->nb[0]);
            y[i] = v;
            vmax = std::max(vmax, v);
        }
        if (vmax == -INFINITY) { // everything masked
            for (int64_t i = 0; i < ne0; ++i)
                y[i] = 0.0f;
            continue;
        }
        const double sum = ggml_vec_exp_sum(n_vis, y, vmax);
        const float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n_vis; ++i)
            y[i] *= inv;
        for (int64_t i = n_vis; i < ne0; ++i)
            y[i] = 0.0f;
    }
}

void ggml_cpu_op_diag_mask_inf(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(ggml_cpu_is_float(a->type) && dst->type == a->type && ggml_are_same_shape(a, dst));
    const int32_t n_past = ggml_get_op_params_i32(dst, 0);

    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), ne0, r0, r1)) return;

    for (int64_t ir = r0; ir < r1; ++ir) {
        const ggml_cpu_row_index ri(dst, ir);
        const char * ra = ggml_ptr(a, ri.i1, ri.i2, ri.i3);
        char * rd = ggml_ptr(dst, ri.i1, ri.i2, ri.i3);
        for (int64_t i = 0; i < ne0; ++i) {
            const float v = i > (int64_t)n_past + ri.i1 ? -INFINITY : ggml_cpu_load(a->type, ra + i * a->nb[0]);
            ggml_cpu_store(dst->type, rd + i * dst->nb[0], v);
        }
    }
}
