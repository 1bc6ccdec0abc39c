// cpu/argmax.cpp - ARGMAX over ne0: a f32 [n, rows] (any strides) -> i32 [rows].
// The first maximum wins; NaNs are never picked (a row of only NaNs gives 0).
#include "common.h"

#include <cmath>

void ggml_cpu_op_argmax(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    GGML_ASSERT(a->type == GGML_TYPE_F32 && dst->type == GGML_TYPE_I32);
    GGML_ASSERT(a->ne[2] == 1 && a->ne[3] == 1 && dst->ne[0] == a->ne[1]);

    const int64_t n = a->ne[0];
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, a->ne[1], n, r0, r1)) return;

    for (int64_t ir = r0; ir < r1; ++ir) {
        const char * row = ggml_ptr(a, ir);
        int64_t best = 0;
        float best_v = -INFINITY;
        bool found = false;
        for (int64_t i = 0; i < n; ++i) {
            const float v = *(const float *)(row + i * a->nb[0]);
            if (v > best_v || (!found && v == best_v)) { // -inf rows still pick index 0
                best_v = v;
                best = i;
                found = true;
            }
        }
        *(int32_t *)((char *)dst->data + ir * dst->nb[0]) = (int32_t)best;
    }
}
