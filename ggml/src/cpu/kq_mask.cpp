// cpu/kq_mask.cpp - KQ_MASK (ggml_kq_mask): cells i32 [3, n_kv], seq / pos i32 [n_tokens] -> f16/f32 [n_kv, n_tokens],
// 0 where token i sees cell j, -inf elsewhere. Threads take rows (tokens).
#include "common.h"

#include <cmath>

template <typename T>
static void kq_mask_rows(const int32_t * cells, const int32_t * seq, const int32_t * pos, T * dst, int64_t n_kv,
                         int64_t r0, int64_t r1, T zero, T minus_inf) {
    for (int64_t i = r0; i < r1; ++i) {
        const int32_t s = seq[i], p = pos[i];
        const int word = 1 + (s >> 5);            // the cell's bits of sequences 0..31, then 32..63
        const uint32_t bit = 1u << (s & 31);
        T * row = dst + i * n_kv;
        for (int64_t j = 0; j < n_kv; ++j) {
            const int32_t * c = cells + 3 * j;
            row[j] = ((uint32_t)c[word] & bit) && c[0] <= p ? zero : minus_inf;
        }
    }
}

void ggml_cpu_op_kq_mask(const ggml_cpu_params & p, ggml_tensor * dst) {
    const ggml_tensor *cells = dst->src[0], *seq = dst->src[1], *pos = dst->src[2];
    const int64_t n_kv = dst->ne[0], n_tok = dst->ne[1];
    GGML_ASSERT(cells->ne[1] == n_kv && seq->ne[0] == n_tok && pos->ne[0] == n_tok && ggml_is_contiguous(dst));
    const int32_t *c = (const int32_t *)cells->data, *s = (const int32_t *)seq->data, *ps = (const int32_t *)pos->data;
    for (int64_t i = 0; i < n_tok; ++i)
        GGML_ASSERT(s[i] >= 0 && s[i] < 64);
    int64_t r0, r1;
    if (!ggml_cpu_thread_rows(p, n_tok, n_kv, r0, r1)) return;
    if (dst->type == GGML_TYPE_F32)
        kq_mask_rows(c, s, ps, (float *)dst->data, n_kv, r0, r1, 0.0f, -INFINITY);
    else
        kq_mask_rows(c, s, ps, (uint16_t *)dst->data, n_kv, r0, r1, (uint16_t)0x0000, (uint16_t)0xFC00);
}
