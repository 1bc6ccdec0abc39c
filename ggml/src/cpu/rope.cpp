// cpu/rope.cpp - ROPE (rotary position embedding).
//   a:   f32/f16 [head_dim, n_head, n_tokens, ne3] (any strides, e.g. a view of a fused QKV)
//   pos: i32 [n_tokens]; freq_factors: optional f32 [>= n_dims/2]
//   params: i32(0) = n_dims, i32(1) = mode, f32(2) = freq_base, f32(3) = freq_scale
//   dst: a's type and shape (may alias a)
// theta_i = pos * freq_scale * freq_base^(-2i/n_dims) / freq_factors[i], i in [0, n_dims/2).
// NORMAL rotates (x[2i], x[2i+1]); NEOX rotates (x[i], x[i + n_dims/2]); dims >= n_dims are copied.
// theta is computed in double and reduced mod 2*pi before float cos/sin (positions can be large);
// the cos/sin of one token are cached per thread.
#include "common.h"

#include <cmath>
#include <vector>

void ggml_cpu_op_rope(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * pos = dst->src[1];
    const ggml_tensor * ff = dst->src[2];
    const int n_dims = ggml_get_op_params_i32(dst, 0);
    const int mode = ggml_get_op_params_i32(dst, 1);
    const float freq_base = ggml_get_op_params_f32(dst, 2);
    const float freq_scale = ggml_get_op_params_f32(dst, 3);
    GGML_ASSERT(ggml_cpu_is_float(a->type) && dst->type == a->type && ggml_are_same_shape(a, dst));
    GGML_ASSERT(pos && pos->type == GGML_TYPE_I32 && pos->ne[0] == a->ne[2]);
    GGML_ASSERT(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0]);
    GGML_ASSERT(mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX);
    if (ff) GGML_ASSERT(ff->type == GGML_TYPE_F32 && ff->ne[0] >= n_dims / 2);

    const int64_t ne0 = a->ne[0];
    const int half = n_dims / 2;
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), 4 * ne0, r0, r1)) return;

    thread_local std::vector<float> cs; // [2, half]: cos then sin for the cached token
    cs.resize(2 * half);
    int64_t cached_token = -1;
    const double theta_scale = std::pow((double)freq_base, -2.0 / n_dims);
    const bool fast = ggml_cpu_rows_f32(a) && ggml_cpu_rows_f32(dst);

    for (int64_t ir = r0; ir < r1; ++ir) {
        const ggml_cpu_row_index ri(dst, ir);
        if (ri.i2 != cached_token) {
            cached_token = ri.i2;
            const int32_t position = *(const int32_t *)((const char *)pos->data + ri.i2 * pos->nb[0]);
            double freq = (double)position * freq_scale; // * base^(-2i/n_dims), by repeated product
            for (int i = 0; i < half; ++i, freq *= theta_scale) {
                double theta = freq;
                if (ff) theta /= *(const float *)((const char *)ff->data + i * ff->nb[0]);
                const float t = (float)std::remainder(theta, 2.0 * M_PI); // exact reduction, then float trig
                cs[i] = std::cos(t);
                cs[half + i] = std::sin(t);
            }
        }
        const float * c = cs.data();
        const float * s = cs.data() + half;
        const char * ra = ggml_ptr(a, ri.i1, ri.i2, ri.i3);
        char * rd = ggml_ptr(dst, ri.i1, ri.i2, ri.i3);
        // element j of the pair i: NORMAL (2i, 2i+1), NEOX (i, i + half)
        const int64_t step = mode == GGML_ROPE_TYPE_NEOX ? half : 1;
        const int64_t stride = mode == GGML_ROPE_TYPE_NEOX ? 1 : 2;
        if (fast) {
            const float * x = (const float *)ra;
            float * y = (float *)rd;
            for (int i = 0; i < half; ++i) {
                const float x0 = x[i * stride], x1 = x[i * stride + step];
                y[i * stride] = x0 * c[i] - x1 * s[i];
                y[i * stride + step] = x0 * s[i] + x1 * c[i];
            }
            if (y != x) {
                for (int64_t i = n_dims; i < ne0; ++i)
                    y[i] = x[i];
            }
        } else {
            for (int i = 0; i < half; ++i) {
                const int64_t j0 = i * stride, j1 = i * stride + step;
                const float x0 = ggml_cpu_load(a->type, ra + j0 * a->nb[0]);
                const float x1 = ggml_cpu_load(a->type, ra + j1 * a->nb[0]);
                ggml_cpu_store(dst->type, rd + j0 * dst->nb[0], x0 * c[i] - x1 * s[i]);
                ggml_cpu_store(dst->type, rd + j1 * dst->nb[0], x0 * s[i] + x1 * c[i]);
            }
            for (int64_t i = n_dims; i < ne0; ++i) {
                ggml_cpu_store(dst->type, rd + i * dst->nb[0], ggml_cpu_load(a->type, ra + i * a->nb[0]));
            }
        }
    }
}
