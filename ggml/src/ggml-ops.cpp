// ggml-ops.cpp - op builders: compute the result shape, record op, sources and params.
// Nothing is computed here. Op param layouts (read by every backend):
//   SCALE          f32[0] = s
//   RMS_NORM       f32[0] = eps
//   SOFT_MAX       f32[0] = scale, i32[1] = causal_n_past (-1: none)
//   DIAG_MASK_INF  i32[0] = n_past
//   ROPE           i32[0] = n_dims, i32[1] = mode, f32[2] = freq_base, f32[3] = freq_scale
//   PERMUTE        i32[0..3] = axes
//   FLASH_ATTN_EXT f32[0] = scale, i32[1] = causal_n_past (-1: none)
//   ALL_REDUCE     i32[0] = rank, i32[2..3] = the ggml_comm pointer
//   KQ_MASK        (none: the result's type is f16 or f32)
#include "ggml-comm.h"
#include "ggml-impl.h"

ggml_tensor * ggml_new_view(ggml_context * ctx, ggml_tensor * src, int n_dims, const int64_t * ne, size_t offset);

static ggml_tensor * new_op(ggml_context * ctx, ggml_op op, ggml_type type, const int64_t * ne, ggml_tensor * a,
                            ggml_tensor * b = nullptr, ggml_tensor * c = nullptr, ggml_tensor * d = nullptr) {
    ggml_tensor * t = ggml_new_tensor(ctx, type, GGML_MAX_DIMS, ne);
    t->op = op;
    t->src[0] = a;
    t->src[1] = b;
    t->src[2] = c;
    t->src[3] = d;
    return t;
}

// ---- elementwise -----------------------------------------------------------------------------
ggml_tensor * ggml_dup(ggml_context * ctx, ggml_tensor * a) { return new_op(ctx, GGML_OP_DUP, a->type, a->ne, a); }

static ggml_tensor * binary(ggml_context * ctx, ggml_op op, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_can_repeat(b, a));
    GGML_ASSERT(b->type == GGML_TYPE_F32);
    return new_op(ctx, op, a->type, a->ne, a, b);
}
ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_ADD, a, b); }
ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) { return binary(ctx, GGML_OP_MUL, a, b); }

ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s) {
    ggml_tensor * t = new_op(ctx, GGML_OP_SCALE, a->type, a->ne, a);
    ggml_set_op_params_f32(t, 0, s);
    return t;
}

ggml_tensor * ggml_silu(ggml_context * ctx, ggml_tensor * a) { return new_op(ctx, GGML_OP_SILU, a->type, a->ne, a); }

ggml_tensor * ggml_swiglu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_are_same_shape(a, b));
    return new_op(ctx, GGML_OP_SWIGLU, a->type, a->ne, a, b);
}

ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps) {
    ggml_tensor * t = new_op(ctx, GGML_OP_RMS_NORM, a->type, a->ne, a);
    ggml_set_op_params_f32(t, 0, eps);
    return t;
}

// ---- copies ----------------------------------------------------------------------------------
ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(ggml_nelements(a) == ggml_nelements(b));
    ggml_tensor * v = ggml_view_tensor(ctx, b);  // the result aliases b
    v->op = GGML_OP_CPY;
    v->src[0] = a;
    v->src[1] = b;
    ggml_format_name(v, "%s (copy of %s)", b->name, a->name);
    return v;
}

ggml_tensor * ggml_set_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c) {
    // f32/f16, or a quantized cache whose rows are whole blocks (each written row is quantized on its own)
    GGML_ASSERT(a->type == GGML_TYPE_F32 || a->type == GGML_TYPE_F16 ||
                (ggml_is_quantized(a->type) && a->ne[0] % ggml_blck_size(a->type) == 0));
    GGML_ASSERT(b->type == GGML_TYPE_F32 && c->type == GGML_TYPE_I32 && ggml_is_contiguous(c));
    GGML_ASSERT(a->ne[0] == b->ne[0] && a->ne[2] == b->ne[2] && a->ne[3] == b->ne[3]);
    GGML_ASSERT(ggml_nelements(c) == b->ne[1] && b->ne[1] <= a->ne[1]);
    ggml_tensor * v = ggml_view_tensor(ctx, a);  // the result aliases a
    v->op = GGML_OP_SET_ROWS;
    v->src[0] = a;
    v->src[1] = b;
    v->src[2] = c;
    ggml_format_name(v, "%s (rows of %s)", a->name, b->name);
    return v;
}

ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a) { return new_op(ctx, GGML_OP_CONT, a->type, a->ne, a); }

ggml_tensor * ggml_cont_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                           int64_t ne3) {
    GGML_ASSERT(ggml_nelements(a) == ne0 * ne1 * ne2 * ne3);
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return new_op(ctx, GGML_OP_CONT, a->type, ne, a);
}
ggml_tensor * ggml_cont_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    return ggml_cont_4d(ctx, a, ne0, ne1, 1, 1);
}

// ---- views -----------------------------------------------------------------------------------
static ggml_tensor * reshape_impl(ggml_context * ctx, ggml_tensor * a, int n, const int64_t * ne) {
    GGML_ASSERT(ggml_is_contiguous(a) && "reshape needs a contiguous tensor (use ggml_cont first)");
    int64_t total = 1;
    for (int i = 0; i < n; ++i) total *= ne[i];
    GGML_ASSERT(total == ggml_nelements(a));
    ggml_tensor * t = ggml_new_view(ctx, a, n, ne, 0);
    t->op = GGML_OP_RESHAPE;
    t->src[0] = a;
    ggml_format_name(t, "%s (reshaped)", a->name);
    return t;
}
ggml_tensor * ggml_reshape(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    return reshape_impl(ctx, a, GGML_MAX_DIMS, b->ne);
}
ggml_tensor * ggml_reshape_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0) { return reshape_impl(ctx, a, 1, &ne0); }
ggml_tensor * ggml_reshape_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1) {
    const int64_t ne[2] = {ne0, ne1};
    return reshape_impl(ctx, a, 2, ne);
}
ggml_tensor * ggml_reshape_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    return reshape_impl(ctx, a, 3, ne);
}
ggml_tensor * ggml_reshape_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2,
                              int64_t ne3) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    return reshape_impl(ctx, a, 4, ne);
}

static ggml_tensor * view_impl(ggml_context * ctx, ggml_tensor * a, int n, const int64_t * ne, const size_t * nb,
                               size_t offset) {
    ggml_tensor * t = ggml_new_view(ctx, a, n, ne, offset);
    t->nb[0] = ggml_type_size(a->type);
    for (int i = 1; i < GGML_MAX_DIMS; ++i) t->nb[i] = i < n ? nb[i - 1] : t->nb[i - 1] * t->ne[i - 1];
    t->op = GGML_OP_VIEW;
    t->src[0] = a;
    ggml_format_name(t, "%s (view)", a->name);
    return t;
}
ggml_tensor * ggml_view_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, size_t offset) {
    return view_impl(ctx, a, 1, &ne0, nullptr, offset);
}
ggml_tensor * ggml_view_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
    const int64_t ne[2] = {ne0, ne1};
    const size_t nb[1] = {nb1};
    return view_impl(ctx, a, 2, ne, nb, offset);
}
ggml_tensor * ggml_view_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
                           size_t nb2, size_t offset) {
    const int64_t ne[3] = {ne0, ne1, ne2};
    const size_t nb[2] = {nb1, nb2};
    return view_impl(ctx, a, 3, ne, nb, offset);
}
ggml_tensor * ggml_view_4d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
                           size_t nb1, size_t nb2, size_t nb3, size_t offset) {
    const int64_t ne[4] = {ne0, ne1, ne2, ne3};
    const size_t nb[3] = {nb1, nb2, nb3};
    return view_impl(ctx, a, 4, ne, nb, offset);
}

ggml_tensor * ggml_permute(ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3) {
    const int axes[4] = {axis0, axis1, axis2, axis3};
    bool seen[4] = {false, false, false, false};
    for (int i = 0; i < 4; ++i) {
        GGML_ASSERT(axes[i] >= 0 && axes[i] < 4 && !seen[axes[i]]);
        seen[axes[i]] = true;
    }
    ggml_tensor * t = ggml_new_view(ctx, a, GGML_MAX_DIMS, a->ne, 0);
    for (int i = 0; i < 4; ++i) {
        t->ne[axes[i]] = a->ne[i];
        t->nb[axes[i]] = a->nb[i];
    }
    t->op = GGML_OP_PERMUTE;
    t->src[0] = a;
    for (int i = 0; i < 4; ++i) ggml_set_op_params_i32(t, i, axes[i]);
    ggml_format_name(t, "%s (permuted)", a->name);
    return t;
}

ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a) {
    ggml_tensor * t = ggml_permute(ctx, a, 1, 0, 2, 3);
    t->op = GGML_OP_TRANSPOSE;
    ggml_format_name(t, "%s (transposed)", a->name);
    return t;
}

// ---- indexing, masking, softmax --------------------------------------------------------------
ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(b->type == GGML_TYPE_I32);
    GGML_ASSERT(a->ne[2] == b->ne[1] || a->ne[2] == 1);
    const int64_t ne[4] = {a->ne[0], b->ne[0], b->ne[1], b->ne[2]};
    return new_op(ctx, GGML_OP_GET_ROWS, GGML_TYPE_F32, ne, a, b);
}

ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past) {
    ggml_tensor * t = new_op(ctx, GGML_OP_DIAG_MASK_INF, a->type, a->ne, a);
    ggml_set_op_params_i32(t, 0, n_past);
    return t;
}

static ggml_tensor * soft_max_impl(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale,
                                   int causal_n_past) {
    GGML_ASSERT(a->type == GGML_TYPE_F32);
    if (mask) {
        GGML_ASSERT(mask->type == GGML_TYPE_F32 || mask->type == GGML_TYPE_F16);
        GGML_ASSERT(mask->ne[0] == a->ne[0] && mask->ne[1] >= a->ne[1]);
        GGML_ASSERT(a->ne[2] % mask->ne[2] == 0 && a->ne[3] % mask->ne[3] == 0);
    }
    ggml_tensor * t = new_op(ctx, GGML_OP_SOFT_MAX, GGML_TYPE_F32, a->ne, a, mask);
    ggml_set_op_params_f32(t, 0, scale);
    ggml_set_op_params_i32(t, 1, causal_n_past);
    ggml_set_op_params_i32(t, 2, 1);
    ggml_set_op_params_i32(t, 3, 0);
    return t;
}

void ggml_flash_attn_ext_set_seqs(ggml_tensor * fa, int n_seq, bool shared) {
    GGML_ASSERT(fa->op == GGML_OP_FLASH_ATTN_EXT && n_seq >= 1);
    ggml_set_op_params_i32(fa, 2, n_seq);
    ggml_set_op_params_i32(fa, 3, shared ? 1 : 0);
}
ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a) { return soft_max_impl(ctx, a, nullptr, 1.0f, -1); }
ggml_tensor * ggml_soft_max_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale) {
    return soft_max_impl(ctx, a, mask, scale, -1);
}
ggml_tensor * ggml_soft_max_causal(ggml_context * ctx, ggml_tensor * a, float scale, int n_past) {
    GGML_ASSERT(n_past >= 0);
    return soft_max_impl(ctx, a, nullptr, scale, n_past);
}

// ---- rope, matmul, argmax, attention -----------------------------------------------------------
ggml_tensor * ggml_rope_ext(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pos, ggml_tensor * freq_factors,
                            int n_dims, int mode, float freq_base, float freq_scale) {
    GGML_ASSERT(pos->type == GGML_TYPE_I32 && pos->ne[0] == a->ne[2]);
    GGML_ASSERT(n_dims > 0 && n_dims % 2 == 0 && n_dims <= a->ne[0]);
    GGML_ASSERT(mode == GGML_ROPE_TYPE_NORMAL || mode == GGML_ROPE_TYPE_NEOX);
    if (freq_factors) GGML_ASSERT(freq_factors->type == GGML_TYPE_F32 && freq_factors->ne[0] >= n_dims / 2);
    ggml_tensor * t = new_op(ctx, GGML_OP_ROPE, a->type, a->ne, a, pos, freq_factors);
    ggml_set_op_params_i32(t, 0, n_dims);
    ggml_set_op_params_i32(t, 1, mode);
    ggml_set_op_params_f32(t, 2, freq_base);
    ggml_set_op_params_f32(t, 3, freq_scale);
    return t;
}

ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
    GGML_ASSERT(a->ne[0] == b->ne[0]);
    GGML_ASSERT(b->ne[2] % a->ne[2] == 0 && b->ne[3] % a->ne[3] == 0);
    GGML_ASSERT(!ggml_is_transposed(a));
    const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
    return new_op(ctx, GGML_OP_MUL_MAT, GGML_TYPE_F32, ne, a, b);
}

ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && a->ne[2] == 1 && a->ne[3] == 1);
    const int64_t ne[4] = {a->ne[1], 1, 1, 1};
    return new_op(ctx, GGML_OP_ARGMAX, GGML_TYPE_I32, ne, a);
}

ggml_tensor * ggml_flash_attn_ext(ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v,
                                  ggml_tensor * mask, float scale, int causal_n_past) {
    GGML_ASSERT(q->type == GGML_TYPE_F32);
    GGML_ASSERT(k->ne[0] == q->ne[0] && v->ne[0] == q->ne[0]);
    GGML_ASSERT(k->ne[1] == v->ne[1] && k->ne[2] == v->ne[2]);
    GGML_ASSERT(q->ne[2] % k->ne[2] == 0);
    if (mask) GGML_ASSERT(mask->ne[0] == k->ne[1] && mask->ne[1] >= q->ne[1]);
    const int64_t ne[4] = {q->ne[0], q->ne[2], q->ne[1], 1};  // [D, n_head, n_tokens]
    ggml_tensor * t = new_op(ctx, GGML_OP_FLASH_ATTN_EXT, GGML_TYPE_F32, ne, q, k, v, mask);
    ggml_set_op_params_f32(t, 0, scale);
    ggml_set_op_params_i32(t, 1, causal_n_past);
    return t;
}

// ---- attention mask ---------------------------------------------------------------------------
ggml_tensor * ggml_kq_mask(ggml_context * ctx, ggml_tensor * cells, ggml_tensor * seq, ggml_tensor * pos,
                           ggml_type type) {
    GGML_ASSERT(type == GGML_TYPE_F16 || type == GGML_TYPE_F32);
    GGML_ASSERT(cells->type == GGML_TYPE_I32 && seq->type == GGML_TYPE_I32 && pos->type == GGML_TYPE_I32);
    GGML_ASSERT(cells->ne[0] == 3 && ggml_nrows(cells) == cells->ne[1] && ggml_is_contiguous(cells));
    GGML_ASSERT(ggml_nelements(seq) == seq->ne[0] && ggml_nelements(pos) == pos->ne[0] && seq->ne[0] == pos->ne[0]);
    GGML_ASSERT(ggml_is_contiguous(seq) && ggml_is_contiguous(pos));
    const int64_t ne[4] = {cells->ne[1], seq->ne[0], 1, 1}; // [n_kv, n_tokens]
    return new_op(ctx, GGML_OP_KQ_MASK, type, ne, cells, seq, pos);
}

// ---- all-reduce ----------------------------------------------------------------------------------
ggml_tensor * ggml_all_reduce(ggml_context * ctx, ggml_tensor * a, ggml_comm * comm, int rank) {
    GGML_ASSERT(a->type == GGML_TYPE_F32 && ggml_is_contiguous(a) && comm);
    GGML_ASSERT(rank >= 0 && rank < ggml_comm_n_ranks(comm));
    ggml_tensor * t = new_op(ctx, GGML_OP_ALL_REDUCE, GGML_TYPE_F32, a->ne, a);
    ggml_set_op_params_i32(t, 0, rank);
    static_assert(sizeof(ggml_comm *) <= 2 * sizeof(int32_t));
    __builtin_memcpy(&t->op_params[2], &comm, sizeof(comm));
    return t;
}

ggml_comm * ggml_all_reduce_comm(const ggml_tensor * t) {
    GGML_ASSERT(t->op == GGML_OP_ALL_REDUCE);
    ggml_comm * comm = nullptr;
    __builtin_memcpy(&comm, &t->op_params[2], sizeof(comm));
    return comm;
}
