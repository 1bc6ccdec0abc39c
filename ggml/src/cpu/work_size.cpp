// cpu/work_size.cpp - bytes of shared scratch (p.wdata) each CPU op needs.
#include "cpu/flash_attn.h"
#include "cpu/mul_mat.h"
#include "cpu/ops.h"
#include "ggml-impl.h"

size_t ggml_cpu_op_work_size(const ggml_tensor * dst, int n_threads) {
    switch (dst->op) {
        case GGML_OP_MUL_MAT:
            return ggml_cpu_mul_mat_work_size(dst);
        case GGML_OP_FLASH_ATTN_EXT: // per thread: q block, scores, V tile, accumulators; split partials
            return ggml_cpu_fa_plan_make(dst, n_threads).work_size(n_threads);
        default:
            return 0;
    }
}
