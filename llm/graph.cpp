// graph.cpp - the Llama forward graph of one step: n_tokens new tokens at positions n_past.., attending
// to the n_past cached cells plus themselves (causal), logits of the last token (or of every token).
//
// Decode steps keep one graph: the step's cells are written with SET_ROWS at the positions in inp_pos, and
// attention reads a KV view of n_kv = n_past + n_tokens rounded up to LLM_KV_PAD cells, with the causal
// limit in the inp_kq_mask input. Consecutive decode steps then differ only in their inputs' contents
// (tokens, positions, mask), so a backend can replay the step it captured (CUDA graphs) for LLM_KV_PAD
// tokens in a row.
#include "llm-impl.h"

#include <algorithm>
#include <cmath>

int llm_graph_n_kv(int n_past, int n_tokens, int n_ctx) {
    return std::min(n_ctx, (n_past + n_tokens + LLM_KV_PAD - 1) / LLM_KV_PAD * LLM_KV_PAD);
}

template <typename T> static void fill_mask(T * mask, int n_kv, int n_tokens, int n_past, T zero, T minus_inf) {
    for (int i = 0; i < n_tokens; ++i) {  // row i sees cells 0 .. n_past + i
        T * row = mask + (size_t) i * n_kv;
        const int n_vis = std::clamp(n_past + i + 1, 0, n_kv);
        std::fill(row, row + n_vis, zero);
        std::fill(row + n_vis, row + n_kv, minus_inf);
    }
}

void llm_graph_fill_mask(void * mask, ggml_type type, int n_kv, int n_tokens, int n_past) {
    GGML_ASSERT(type == GGML_TYPE_F32 || type == GGML_TYPE_F16);
    if (type == GGML_TYPE_F32)
        fill_mask((float *) mask, n_kv, n_tokens, n_past, 0.0f, -INFINITY);
    else  // f16 bits: +0 and -inf
        fill_mask((uint16_t *) mask, n_kv, n_tokens, n_past, (uint16_t) 0x0000, (uint16_t) 0xFC00);
}

llm_graph llm_build_graph(llm_context & lctx, int n_tokens, int n_past, bool all_logits) {
    const llm_model & model = *lctx.model;
    const llm_hparams & hp = model.hp;
    const llm_kv_cache & kv = lctx.kv;
    const int64_t n_embd = hp.n_embd, n_head = hp.n_head, n_head_kv = hp.n_head_kv, hd = hp.n_embd_head;
    GGML_ASSERT(n_tokens > 0 && n_past + n_tokens <= kv.n_ctx);
    const int n_kv = llm_graph_n_kv(n_past, n_tokens, kv.n_ctx);  // cells read by attention (masked beyond)
    const float kq_scale = 1.0f / std::sqrt((float) hd);

    llm_graph g;
    g.n_tokens = n_tokens;
    g.n_kv = n_kv;
    g.n_out = all_logits ? n_tokens : 1;
    g.ctx = ggml_init({lctx.graph_mem.size(), lctx.graph_mem.data(), true});
    ggml_context * ctx = g.ctx;
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, lctx.graph_size);
    g.gf = gf;

    g.inp_tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);  // i32 [n_tokens]
    ggml_set_name(g.inp_tokens, "inp_tokens");
    ggml_set_input(g.inp_tokens);
    g.inp_pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);  // i32 [n_tokens]
    ggml_set_name(g.inp_pos, "inp_pos");
    ggml_set_input(g.inp_pos);
    // [n_kv, n_tokens]: 0 or -inf; f16 for flash attention (half the bytes to fill and upload per step: a
    // 16k-token prompt uploads n_kv x 512 values per batch), f32 for the softmax path
    g.inp_kq_mask =
        ggml_new_tensor_2d(ctx, lctx.params.flash_attn ? GGML_TYPE_F16 : GGML_TYPE_F32, n_kv, n_tokens);
    ggml_set_name(g.inp_kq_mask, "inp_kq_mask");
    ggml_set_input(g.inp_kq_mask);

    ggml_tensor * x = ggml_get_rows(ctx, model.tok_embd, g.inp_tokens);  // [n_embd, n_tokens]
    ggml_set_name(x, "inp_embd");

    for (int il = 0; il < hp.n_layer; ++il) {
        const llm_layer & L = model.layers[il];
        const bool last = il == hp.n_layer - 1;
        ggml_tensor * inp = x;

        // ---- attention ----
        ggml_tensor * cur = ggml_rms_norm(ctx, x, hp.rms_eps);
        ggml_format_name(cur, "norm-%d", il);
        cur = ggml_mul(ctx, cur, L.attn_norm);  // [n_embd, n_tokens]
        ggml_format_name(cur, "attn_norm-%d", il);

        ggml_tensor * q = ggml_mul_mat(ctx, L.wq, cur);  // [n_embd, n_tokens]
        ggml_format_name(q, "Qcur-%d", il);
        ggml_tensor * k = ggml_mul_mat(ctx, L.wk, cur);  // [n_embd_k_gqa, n_tokens]
        ggml_format_name(k, "Kcur-%d", il);
        ggml_tensor * v = ggml_mul_mat(ctx, L.wv, cur);  // [n_embd_v_gqa, n_tokens]
        ggml_format_name(v, "Vcur-%d", il);
        // q, k, v stay adjacent in the graph (a backend may compute the three mat-vecs in one launch)
        ggml_build_forward_expand(gf, q);
        ggml_build_forward_expand(gf, k);
        ggml_build_forward_expand(gf, v);

        q = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, q, hd, n_head, n_tokens), g.inp_pos, L.rope_freqs, hp.n_rot,
                          GGML_ROPE_TYPE_NORMAL, hp.rope_freq_base, hp.rope_freq_scale);  // [hd, n_head, n_tokens]
        ggml_format_name(q, "Qrope-%d", il);
        ggml_build_forward_expand(gf, q);  // q's rope next to k's rope and the KV stores (one launch on CUDA)
        k = ggml_rope_ext(ctx, ggml_reshape_3d(ctx, k, hd, n_head_kv, n_tokens), g.inp_pos, L.rope_freqs,
                          hp.n_rot, GGML_ROPE_TYPE_NORMAL, hp.rope_freq_base,
                          hp.rope_freq_scale);  // [hd, n_head_kv, n_tokens]
        ggml_format_name(k, "Krope-%d", il);

        llm_kv_store(ctx, gf, kv, il, ggml_reshape_2d(ctx, k, hd * n_head_kv, n_tokens), v, g.inp_pos);

        ggml_tensor * qp = ggml_permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tokens, n_head]
        ggml_tensor * kc = llm_kv_view_k(ctx, kv, il, n_kv);  // [hd, n_kv, n_head_kv]
        ggml_tensor * vc = llm_kv_view_v(ctx, kv, il, n_kv);
        ggml_tensor * attn;
        if (lctx.params.flash_attn) {
            attn = ggml_flash_attn_ext(ctx, qp, kc, vc, g.inp_kq_mask, kq_scale, -1);  // [hd, n_head, n_tokens]
            ggml_format_name(attn, "fattn-%d", il);
            attn = ggml_reshape_2d(ctx, attn, n_embd, n_tokens);
        } else {
            ggml_tensor * kq = ggml_mul_mat(ctx, kc, qp);  // [n_kv, n_tokens, n_head]
            ggml_format_name(kq, "kq-%d", il);
            kq = ggml_soft_max_ext(ctx, kq, g.inp_kq_mask, kq_scale);
            ggml_format_name(kq, "kq_soft_max-%d", il);
            ggml_tensor * kqv = ggml_mul_mat(ctx, vc, kq);  // [hd, n_tokens, n_head]
            ggml_format_name(kqv, "kqv-%d", il);
            attn = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_embd, n_tokens);  // [n_embd, n_tokens]
        }
        ggml_format_name(attn, "kqv_out-%d", il);

        if (last && !all_logits && n_tokens > 1) {
            // only the last token goes on: skip the FFN (and the output matmul) of the others
            attn = ggml_view_2d(ctx, attn, n_embd, 1, attn->nb[1], (n_tokens - 1) * attn->nb[1]);
            inp = ggml_view_2d(ctx, inp, n_embd, 1, inp->nb[1], (n_tokens - 1) * inp->nb[1]);
        }
        cur = ggml_mul_mat(ctx, L.wo, attn);  // [n_embd, n_out]
        ggml_format_name(cur, "attn_out-%d", il);
        x = ggml_add(ctx, cur, inp);
        ggml_format_name(x, "ffn_inp-%d", il);

        // ---- feed-forward ----
        cur = ggml_rms_norm(ctx, x, hp.rms_eps);
        ggml_format_name(cur, "ffn_norm_raw-%d", il);
        cur = ggml_mul(ctx, cur, L.ffn_norm);
        ggml_format_name(cur, "ffn_norm-%d", il);
        ggml_tensor * gate = ggml_mul_mat(ctx, L.ffn_gate, cur);  // [n_ff, n_out]
        ggml_format_name(gate, "ffn_gate-%d", il);
        ggml_tensor * up = ggml_mul_mat(ctx, L.ffn_up, cur);  // [n_ff, n_out]
        ggml_format_name(up, "ffn_up-%d", il);
        cur = ggml_swiglu_split(ctx, gate, up);
        ggml_format_name(cur, "ffn_swiglu-%d", il);
        cur = ggml_mul_mat(ctx, L.ffn_down, cur);  // [n_embd, n_out]
        ggml_format_name(cur, "ffn_out-%d", il);
        x = ggml_add(ctx, cur, x);
        ggml_format_name(x, "l_out-%d", il);
    }

    ggml_tensor * cur = ggml_rms_norm(ctx, x, hp.rms_eps);
    ggml_set_name(cur, "result_norm_raw");
    cur = ggml_mul(ctx, cur, model.output_norm);
    ggml_set_name(cur, "result_norm");
    g.logits = ggml_mul_mat(ctx, model.output, cur);  // [n_vocab, n_out]
    ggml_set_name(g.logits, "result_output");
    ggml_set_output(g.logits);
    ggml_build_forward_expand(gf, g.logits);

    ggml_tensor * last_row = g.n_out == 1 ? g.logits
                                          : ggml_view_2d(ctx, g.logits, hp.n_vocab, 1, g.logits->nb[1],
                                                         (g.n_out - 1) * g.logits->nb[1]);
    g.argmax = ggml_argmax(ctx, last_row);  // i32 [1]
    ggml_set_name(g.argmax, "result_argmax");
    ggml_set_output(g.argmax);
    ggml_build_forward_expand(gf, g.argmax);
    return g;
}
