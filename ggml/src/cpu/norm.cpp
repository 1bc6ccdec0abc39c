// cpu/norm.cpp - RMS_NORM over ne0: y = x / sqrt(mean(x^2) + eps).
//   a: f32/f16 [ne0, ne1, ne2, ne3] (any strides); dst: a's type and shape (may alias a)
// The sum of squares uses 8 float lanes (vectorizable) combined in double.
#include "common.h"

#include <cmath>

void ggml_cpu_op_rms_norm(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(ggml_cpu_is_float(a->type) && ggml_cpu_is_float(dst->type) && ggml_are_same_shape(a, dst));
    const float eps = ggml_get_op_params_f32(dst, 0);
    GGML_ASSERT(eps >= 0.0f);

    const int64_t ne0 = dst->ne[0];
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), 2 * ne0, r0, r1)) return;

    const bool fast = ggml_cpu_rows_f32(a) && ggml_cpu_rows_f32(dst);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const ggml_cpu_row_index ri(dst, ir);
        const char * ra = ggml_ptr(a, ri.i1, ri.i2, ri.i3);
        char * rd = ggml_ptr(dst, ri.i1, ri.i2, ri.i3);
        double sum = 0.0;
        if (fast) {
            const float * x = (const float *)ra;
            float lanes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            int64_t i = 0;
            for (; i + 8 <= ne0; i += 8) {
                for (int j = 0; j < 8; ++j)
                    lanes[j] += x[i + j] * x[i + j];
            }
            for (; i < ne0; ++i)
                sum += (double)x[i] * x[i];
            for (int j = 0; j < 8; ++j)
                sum += lanes[j];
            const float s = (float)(1.0 / std::sqrt(sum / ne0 + eps));
            float * y = (float *)rd;
            for (int64_t k = 0; k < ne0; ++k)
                y[k] = x[k] * s;
        } else {
            for (int64_t i = 0; i < ne0; ++i) {
                const double v = ggml_cpu_load(a->type, ra + i * a->nb[0]);
                sum += v * v;
            }
            const float s = (float)(1.0 / std::sqrt(sum / ne0 + eps));
            for (int64_t i = 0; i < ne0; ++i) {
                ggml_cpu_store(dst->type, rd + i * dst->nb[0], ggml_cpu_load(a->type, ra + i * a->nb[0]) * s);
            }
        }
    }
}
