// cpu/get_rows.cpp - gather rows by index (token embeddings).
//
//   a: [n_embd, n_rows, A2, A3] f32/f16/any quant type (dense rows); b: i32 [n, B1, B2]; dst: f32 [n_embd, n, B1, B2]
//   dst[:, i, j, k] = a[:, b[i, j, k], j % A2, k % A3]   (ggml: A2 == B1, A3 == B2)
#include "cpu/common.h"
#include "cpu/ops.h"
#include "ggml-impl.h"

void ggml_cpu_op_get_rows(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * a = dst->src[0];
    const ggml_tensor * b = dst->src[1];
    const int64_t n_embd = a->ne[0];
    GGML_ASSERT(b->type == GGML_TYPE_I32);
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && dst->nb[0] == sizeof(float));
    GGML_ASSERT(dst->ne[0] == n_embd && dst->ne[1] == b->ne[0] && dst->ne[2] == b->ne[1] && dst->ne[3] == b->ne[2]);
    GGML_ASSERT(ggml_cpu_is_weight_type(a->type));
    GGML_ASSERT(!ggml_is_quantized(a->type) || a->nb[0] == ggml_type_size(a->type));

    const int64_t n = b->ne[0], B1 = b->ne[1], B2 = b->ne[2];
    int64_t r0, r1;
    p.split(n * B1 * B2, r0, r1);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t i10 = r % n, i11 = (r / n) % B1, i12 = r / (n * B1);
        const int32_t idx =
            *(const int32_t *)((const char *)b->data + i10 * b->nb[0] + i11 * b->nb[1] + i12 * b->nb[2]);
        if (idx < 0 || idx >= a->ne[1]) {
            GGML_ABORT("get_rows: index %d at [%lld, %lld, %lld] of '%s' is out of range [0, %lld) of '%s'", idx,
                       (long long)i10, (long long)i11, (long long)i12, b->name, (long long)a->ne[1], a->name);
        }
        const char * src =
            (const char *)a->data + idx * a->nb[1] + (i11 % a->ne[2]) * a->nb[2] + (i12 % a->ne[3]) * a->nb[3];
        float * out = (float *)((char *)dst->data + i10 * dst->nb[1] + i11 * dst->nb[2] + i12 * dst->nb[3]);
        switch (a->type) {
            case GGML_TYPE_F32:
                for (int64_t i = 0; i < n_embd; ++i)
                    out[i] = *(const float *)(src + i * a->nb[0]);
                break;
            case GGML_TYPE_F16:
                if (a->nb[0] == sizeof(ggml_fp16_t)) {
                    ggml_fp16_to_fp32_row((const ggml_fp16_t *)src, out, n_embd);
                } else {
                    for (int64_t i = 0; i < n_embd; ++i) {
                        out[i] = ggml_compute_fp16_to_fp32(*(const ggml_fp16_t *)(src + i * a->nb[0]));
                    }
                }
                break;
            default:
                ggml_get_type_traits(a->type)->to_float(src, out, n_embd);
                break;
        }
    }
}
