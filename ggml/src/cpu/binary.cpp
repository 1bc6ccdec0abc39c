// cpu/binary.cpp - ADD and MUL: dst = a op b with b repeated over a in all four dims.
//   a:   f32/f16 [ne0, ne1, ne2, ne3] (any strides)
//   b:   f32     [ne0/r0, ne1/r1, ne2/r2, ne3/r3] (any strides)
//   dst: a's type, same shape as a (may alias a: in-place is safe, each element is read before written)
#include "common.h"

namespace {

struct op_add {
    static float apply(float x, float y) { return x + y; }
};
struct op_mul {
    static float apply(float x, float y) { return x * y; }
};

template <typename Op> void binary_op(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    GGML_ASSERT(ggml_cpu_is_float(a->type) && b->type == GGML_TYPE_F32 && dst->type == a->type);
    GGML_ASSERT(ggml_are_same_shape(a, dst) && ggml_can_repeat(b, a));

    const int64_t ne0 = dst->ne[0];
    const int64_t bne0 = b->ne[0];
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(dst), ne0, r0, r1)) return;

    const bool fast = ggml_cpu_rows_f32(a) && ggml_cpu_rows_f32(b) && ggml_cpu_rows_f32(dst);
    for (int64_t ir = r0; ir < r1; ++ir) {
        const ggml_cpu_row_index ri(dst, ir);
        const char * ra = ggml_ptr(a, ri.i1, ri.i2, ri.i3);
        const char * rb = ggml_ptr(b, ri.i1 % b->ne[1], ri.i2 % b->ne[2], ri.i3 % b->ne[3]);
        char * rd = ggml_ptr(dst, ri.i1, ri.i2, ri.i3);
        if (fast) {
            const float * x = (const float *)ra;
            const float * y = (const float *)rb;
            float * z = (float *)rd;
            if (bne0 == 1) {
                const float y0 = y[0];
                for (int64_t i = 0; i < ne0; ++i)
                    z[i] = Op::apply(x[i], y0);
            } else {
                for (int64_t j = 0; j < ne0; j += bne0) {
                    for (int64_t i = 0; i < bne0; ++i)
                        z[j + i] = Op::apply(x[j + i], y[i]);
                }
            }
        } else {
            for (int64_t i = 0; i < ne0; ++i) {
                const float x = ggml_cpu_load(a->type, ra + i * a->nb[0]);
                const float y = *(const float *)(rb + (i % bne0) * b->nb[0]);
                ggml_cpu_store(dst->type, rd + i * dst->nb[0], Op::apply(x, y));
            }
        }
    }
}

} // namespace

void ggml_cpu_op_add(const ggml_cpu_params & p, ggml_tensor * dst) { binary_op<op_add>(p, dst); }
void ggml_cpu_op_mul(const ggml_cpu_params & p, ggml_tensor * dst) { binary_op<op_mul>(p, dst); }
