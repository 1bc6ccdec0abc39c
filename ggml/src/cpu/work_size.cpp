// cpu/work_size.cpp - bytes of shared scratch (p.wdata) each CPU op needs.
#include "cpu/mul_mat.h"
#include "cpu/ops.h"
#include "ggml-impl.h"

size_t ggml_cpu_op_work_size(const ggml_tensor * dst, int n_threads) {
    switch (dst->op) {
        case GGML_OP_MUL_MAT:
            return ggml_cpu_mul_mat_work_size(dst);
        case GGML_OP_FLASH_ATTN_EXT: {
            // per thread: a row of n_kv scores, a q row and an accumulator row (+ 64 bytes of padding)
            const ggml_tensor * q = dst->src[0]; // [head_dim, n_tokens, n_head, 1]
            const ggml_tensor * k = dst->src[1]; // [head_dim, n_kv, n_head_kv, 1]
            return (size_t)n_threads * (size_t)(k->ne[1] + 2 * q->ne[0]) * sizeof(float) + 64 * (size_t)n_threads;
        }
        default:
            return 0;
    }
}
