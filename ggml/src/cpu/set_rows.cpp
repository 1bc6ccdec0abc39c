// cpu/set_rows.cpp - scatter rows by index (KV-cache writes at the step's cells).
//
//   dst = a: f32/f16 [ne0, R, ne2, ne3], any strides; or q8_0/q4_0 with dense rows (nb0 = block bytes,
//            ne0 % block == 0): each written row is quantized on its own by the type's CPU from_float
//            (bit-identical to the reference quantizer) (dst is a view of a: same data, shape, strides)
//   b: f32 [ne0, n, ne2, ne3], any strides;  c: i32 [n] contiguous, distinct indices in [0, R)
//   a[:, c[i], i2, i3] = b[:, i, i2, i3]
#include "common.h"
#include "cpu/quants.h"

#include <vector>

void ggml_cpu_op_set_rows(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * b = dst->src[1];
    const ggml_tensor * c = dst->src[2];
    const int64_t ne0 = b->ne[0];
    const int32_t * idx = (const int32_t *)c->data;
    const bool quantized = ggml_is_quantized(dst->type);
    if (quantized) {
        GGML_ASSERT(dst->nb[0] == ggml_type_size(dst->type) && ne0 % ggml_blck_size(dst->type) == 0 &&
                    "set_rows: a quantized destination needs dense rows of whole blocks");
    }
    const ggml_from_float_t quantize = quantized ? ggml_cpu_get_type_traits(dst->type)->from_float : nullptr;
    GGML_ASSERT(!quantized || quantize);
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, ggml_nrows(b), ne0, r0, r1)) return;
    const bool dense = b->nb[0] == sizeof(float) && dst->nb[0] == ggml_type_size(dst->type);
    std::vector<float> tmp(quantized && b->nb[0] != sizeof(float) ? ne0 : 0); // a strided source row, gathered
    for (int64_t r = r0; r < r1; ++r) {
        const ggml_cpu_row_index ri(b, r);
        const int32_t row = idx[ri.i1];
        if (row < 0 || row >= dst->ne[1]) {
            GGML_ABORT("set_rows: index %d at %lld of '%s' is out of range [0, %lld) of '%s'", row, (long long)ri.i1,
                       c->name, (long long)dst->ne[1], dst->name);
        }
        const char * s = ggml_ptr(b, ri.i1, ri.i2, ri.i3);
        char * d = ggml_ptr(dst, row, ri.i2, ri.i3);
        if (quantized) {
            const float * x = (const float *)s;
            if (!tmp.empty()) {
                for (int64_t i0 = 0; i0 < ne0; ++i0)
                    tmp[i0] = *(const float *)(s + i0 * b->nb[0]);
                x = tmp.data();
            }
            quantize(x, d, ne0);
        } else if (dense && dst->type == GGML_TYPE_F32) {
            std::memcpy(d, s, ne0 * sizeof(float));
        } else if (dense) {
            ggml_fp32_to_fp16_row((const float *)s, (ggml_fp16_t *)d, ne0);
        } else {
            for (int64_t i0 = 0; i0 < ne0; ++i0)
                ggml_cpu_store(dst->type, d + i0 * dst->nb[0], *(const float *)(s + i0 * b->nb[0]));
        }
    }
}
