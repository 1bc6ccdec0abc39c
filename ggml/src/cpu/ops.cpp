// cpu/ops.cpp - the CPU op table: which nodes the CPU can run (op + types) and the dispatch
// from dst->op to the ggml_cpu_op_* kernels. View ops and NONE compute nothing.
#include "common.h"
#include "cpu/repack.h"
#include "ggml-comm.h"

static bool is_f32(const ggml_tensor * t) { return t->type == GGML_TYPE_F32; }
static bool is_f32_f16(const ggml_tensor * t) { return ggml_cpu_is_float(t->type); }
static bool is_weight_type(const ggml_tensor * t) { return ggml_cpu_is_weight_type(t->type); }
// KV-cache types (set_rows.cpp writes them, flash_attn.cpp reads them in place)
static bool is_kv_type(const ggml_tensor * t) {
    return ggml_cpu_is_float(t->type) || t->type == GGML_TYPE_Q8_0 || t->type == GGML_TYPE_Q4_0;
}
// quantized: dense rows of whole blocks
static bool rows_of_blocks(const ggml_tensor * t) {
    return !ggml_is_quantized(t->type) ||
           (t->nb[0] == ggml_type_size(t->type) && t->ne[0] % ggml_blck_size(t->type) == 0);
}

bool ggml_cpu_supports_op(const ggml_tensor * dst) {
    // weights in the repacked layout (cpu/repack.h): mul_mat's src0 only, not through a view
    for (int j = 0; j < GGML_MAX_SRC; ++j) {
        const ggml_tensor * s = dst->src[j];
        if (s && ggml_cpu_reads_repacked(s) && !(dst->op == GGML_OP_MUL_MAT && j == 0 && !s->view_src)) return false;
    }
    const ggml_tensor * s0 = dst->src[0];
    const ggml_tensor * s1 = dst->src[1];
    const ggml_tensor * s2 = dst->src[2];
    const ggml_tensor * s3 = dst->src[3];
    switch (dst->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return true;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
        case GGML_OP_CPY: // dup.cpp: f32/f16/quants in any combination; a quantized dst needs dense whole blocks
            return s0 && is_weight_type(s0) && is_weight_type(dst) &&
                   (!ggml_is_quantized(dst->type) ||
                    (dst->nb[0] == ggml_type_size(dst->type) && dst->ne[0] % ggml_blck_size(dst->type) == 0));
        case GGML_OP_ADD:
        case GGML_OP_MUL:
            return s0 && s1 && is_f32_f16(s0) && is_f32(s1) && dst->type == s0->type;
        case GGML_OP_SCALE:
        case GGML_OP_SILU:
        case GGML_OP_RMS_NORM:
        case GGML_OP_DIAG_MASK_INF:
            return s0 && is_f32_f16(s0) && dst->type == s0->type;
        case GGML_OP_SWIGLU:
            return s0 && s1 && is_f32_f16(s0) && is_f32_f16(s1) && is_f32_f16(dst);
        case GGML_OP_GET_ROWS:
            return s0 && s1 && is_weight_type(s0) && s1->type == GGML_TYPE_I32 && is_f32(dst) &&
                   (!ggml_is_quantized(s0->type) || s0->nb[0] == ggml_type_size(s0->type));
        case GGML_OP_SET_ROWS:
            return s0 && s1 && s2 && is_kv_type(s0) && rows_of_blocks(s0) && is_f32(s1) && s2->type == GGML_TYPE_I32 &&
                   dst->type == s0->type;
        case GGML_OP_SOFT_MAX:
            return s0 && is_f32(s0) && is_f32(dst) && (!s1 || is_f32_f16(s1));
        case GGML_OP_ROPE:
            return s0 && s1 && is_f32_f16(s0) && dst->type == s0->type && s1->type == GGML_TYPE_I32 &&
                   (!s2 || is_f32(s2));
        case GGML_OP_MUL_MAT:
            // each weight row must be dense (mul_mat.cpp walks rows with SIMD dots)
            return s0 && s1 && is_weight_type(s0) && is_f32(s1) && is_f32(dst) &&
                   s0->nb[0] == ggml_type_size(s0->type);
        case GGML_OP_ARGMAX:
            return s0 && is_f32(s0) && dst->type == GGML_TYPE_I32;
        case GGML_OP_ALL_REDUCE:
            return s0 && is_f32(s0) && ggml_is_contiguous(s0) && ggml_all_reduce_comm(dst)->kind == GGML_COMM_HOST;
        case GGML_OP_KQ_MASK:
            return s0 && s1 && s2 && s0->type == GGML_TYPE_I32 && s1->type == GGML_TYPE_I32 &&
                   s2->type == GGML_TYPE_I32 && is_f32_f16(dst) && ggml_is_contiguous(dst);
        case GGML_OP_FLASH_ATTN_EXT:
            return s0 && s1 && s2 && is_f32(s0) && is_kv_type(s1) && is_kv_type(s2) && (!s3 || is_f32_f16(s3)) &&
                   s1->nb[0] == ggml_type_size(s1->type) && s2->nb[0] == ggml_type_size(s2->type) &&
                   rows_of_blocks(s1) && rows_of_blocks(s2) && s0->ne[3] == 1 && s1->ne[3] == 1 && s2->ne[3] == 1;
        case GGML_OP_COUNT:
            break;
    }
    return false;
}

void ggml_cpu_compute_node(const ggml_cpu_params & p, ggml_tensor * dst) {
    switch (dst->op) {
        case GGML_OP_NONE:
        case GGML_OP_RESHAPE:
        case GGML_OP_VIEW:
        case GGML_OP_PERMUTE:
        case GGML_OP_TRANSPOSE:
            return;
        case GGML_OP_DUP:
        case GGML_OP_CONT:
            ggml_cpu_op_dup(p, dst);
            return;
        case GGML_OP_CPY:
            ggml_cpu_op_cpy(p, dst);
            return;
        case GGML_OP_ADD:
            ggml_cpu_op_add(p, dst);
            return;
        case GGML_OP_MUL:
            ggml_cpu_op_mul(p, dst);
            return;
        case GGML_OP_SCALE:
            ggml_cpu_op_scale(p, dst);
            return;
        case GGML_OP_SILU:
            ggml_cpu_op_silu(p, dst);
            return;
        case GGML_OP_SWIGLU:
            ggml_cpu_op_swiglu(p, dst);
            return;
        case GGML_OP_GET_ROWS:
            ggml_cpu_op_get_rows(p, dst);
            return;
        case GGML_OP_SET_ROWS:
            ggml_cpu_op_set_rows(p, dst);
            return;
        case GGML_OP_DIAG_MASK_INF:
            ggml_cpu_op_diag_mask_inf(p, dst);
            return;
        case GGML_OP_SOFT_MAX:
            ggml_cpu_op_soft_max(p, dst);
            return;
        case GGML_OP_ROPE:
            ggml_cpu_op_rope(p, dst);
            return;
        case GGML_OP_RMS_NORM:
            ggml_cpu_op_rms_norm(p, dst);
            return;
        case GGML_OP_MUL_MAT:
            ggml_cpu_op_mul_mat(p, dst);
            return;
        case GGML_OP_ARGMAX:
            ggml_cpu_op_argmax(p, dst);
            return;
        case GGML_OP_ALL_REDUCE:
            ggml_cpu_op_all_reduce(p, dst);
            return;
        case GGML_OP_KQ_MASK:
            ggml_cpu_op_kq_mask(p, dst);
            return;
        case GGML_OP_FLASH_ATTN_EXT:
            ggml_cpu_op_flash_attn_ext(p, dst);
            return;
        case GGML_OP_COUNT:
            break;
    }
    GGML_ABORT("ggml_cpu_compute_node: op %d (%s) of node '%s' has no CPU kernel", (int)dst->op, ggml_op_name(dst->op),
               dst->name);
}
