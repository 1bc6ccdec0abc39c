// cpu/flash_attn.cpp - FLASH_ATTN_EXT: fused softmax(scale * q k^T + mask) v per (token, head).
//   q:    f32 [D, n_tokens, n_head, 1] (any strides)
//   k, v: f32/f16 [D, n_kv, n_head_kv, 1], rows dense (nb[0] = type size), nb1/nb2 free (KV cache views)
//   mask: optional f32/f16 [n_kv, >=n_tokens, 1 or n_head, 1]
//   params: f32(0) = scale, i32(1) = causal_n_past (-1: none; else key j is visible to query i iff
//           j <= n_past + i)
//   dst:  f32 [D, n_head, n_tokens, 1] contiguous
// Query head h reads kv head h / (n_head / n_head_kv) (GQA). The (token, head) pairs are split
// across threads; each thread keeps its scores and accumulators in its slice of wdata:
// [n_kv + 2*D] floats per thread (ggml_cpu_op_work_size). A query that sees no key gives zeros.
#include "common.h"
#include "vec_exp.h"

#include <cmath>

#if defined(__F16C__)
#include <immintrin.h>
#endif

namespace {

void f16_to_f32_row(const ggml_fp16_t * x, float * y, int64_t n) {
    int64_t i = 0;
#if defined(__F16C__)
    for (; i + 8 <= n; i += 8) {
        _mm256_storeu_ps(y + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i))));
    }
#endif
    for (; i < n; ++i)
        y[i] = ggml_compute_fp16_to_fp32(x[i]);
}

} // namespace

void ggml_cpu_op_flash_attn_ext(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor * q = dst->src[0];
    const ggml_tensor * k = dst->src[1];
    const ggml_tensor * v = dst->src[2];
    const ggml_tensor * mask = dst->src[3];
    const int64_t D = q->ne[0], n_tokens = q->ne[1], n_head = q->ne[2];
    const int64_t n_kv = k->ne[1], n_head_kv = k->ne[2];
    GGML_ASSERT(q->type == GGML_TYPE_F32 && ggml_cpu_is_float(k->type) && ggml_cpu_is_float(v->type));
    GGML_ASSERT(k->ne[0] == D && v->ne[0] == D && v->ne[1] == n_kv && v->ne[2] == n_head_kv);
    GGML_ASSERT(n_head_kv > 0 && n_head % n_head_kv == 0 && q->ne[3] == 1 && k->ne[3] == 1 && v->ne[3] == 1);
    GGML_ASSERT(k->nb[0] == ggml_type_size(k->type) && v->nb[0] == ggml_type_size(v->type) &&
                "flash_attn_ext: K/V rows must be dense");
    GGML_ASSERT(dst->type == GGML_TYPE_F32 && ggml_is_contiguous(dst));
    GGML_ASSERT(dst->ne[0] == D && dst->ne[1] == n_head && dst->ne[2] == n_tokens);
    if (mask) {
        GGML_ASSERT(ggml_cpu_is_float(mask->type) && mask->ne[0] == n_kv && mask->ne[1] >= n_tokens);
        GGML_ASSERT(n_head % mask->ne[2] == 0);
    }
    const float scale = ggml_get_op_params_f32(dst, 0);
    const int32_t n_past = ggml_get_op_params_i32(dst, 1);

    const int64_t per_thread = n_kv + 2 * D; // floats
    GGML_ASSERT(p.wdata && p.wsize >= (size_t)(p.nth * per_thread) * sizeof(float) &&
                "flash_attn_ext: scratch too small (ggml_cpu_op_work_size)");
    float * scores = (float *)p.wdata + p.ith * per_thread; // [n_kv]
    float * acc = scores + n_kv;                            // [D]
    float * tmp = acc + D;                                  // [D] q row or converted v row

    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, n_tokens * n_head, 4 * n_kv * D, r0, r1)) return;

    const int64_t group = n_head / n_head_kv;
    for (int64_t ir = r0; ir < r1; ++ir) {
        const int64_t it = ir / n_head; // token
        const int64_t ih = ir % n_head; // query head
        const int64_t ihk = ih / group; // kv head
        float * out = (float *)ggml_ptr(dst, ih, it);

        // q row (dense copy if strided)
        const float * qr = (const float *)ggml_ptr(q, it, ih);
        if (q->nb[0] != sizeof(float)) {
            for (int64_t d = 0; d < D; ++d)
                tmp[d] = *(const float *)((const char *)qr + d * q->nb[0]);
            qr = tmp;
        }
        const int64_t n_vis = n_past < 0 ? n_kv : std::min<int64_t>(n_kv, (int64_t)n_past + it + 1);
        const char * mrow = mask ? ggml_ptr(mask, it, ih % mask->ne[2]) : nullptr;

        float smax = -INFINITY;
        for (int64_t j = 0; j < n_vis; ++j) {
            const char * kr = ggml_ptr(k, j, ihk);
            float s;
            if (k->type == GGML_TYPE_F16)
                ggml_vec_dot_f16_f32(D, &s, (const ggml_fp16_t *)kr, qr);
            else
                ggml_vec_dot_f32(D, &s, (const float *)kr, qr);
            s *= scale;
            if (mrow) s += ggml_cpu_load(mask->type, mrow + j * mask->nb[0]);
            scores[j] = s;
            smax = std::max(smax, s);
        }
        if (smax == -INFINITY) { // no visible key
            for (int64_t d = 0; d < D; ++d)
                out[d] = 0.0f;
            continue;
        }
        for (int64_t d = 0; d < D; ++d)
            acc[d] = 0.0f;
        const double sum = ggml_vec_exp_sum(n_vis, scores, smax);  // scores become weights; -inf -> 0
        for (int64_t j = 0; j < n_vis; ++j) {
            const float w = scores[j];
            if (w == 0.0f) continue;
            const char * vr = ggml_ptr(v, j, ihk);
            const float * vf = (const float *)vr;
            if (v->type == GGML_TYPE_F16) {
                f16_to_f32_row((const ggml_fp16_t *)vr, tmp, D);
                vf = tmp;
            }
            for (int64_t d = 0; d < D; ++d)
                acc[d] += w * vf[d];
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t d = 0; d < D; ++d)
            out[d] = acc[d] * inv;
    }
}
