// graph.cpp - the Llama forward graph of one step: n_tokens new tokens (of one or many sequences), each
// attending to the cached cells of its own sequence at positions up to its own (kq_mask: ggml_kq_mask), with
// the logits of every token, of the last one, or of those listed in inp_out_ids.
//
// Decode steps keep one graph: the step's cells are written with SET_ROWS at the cells in inp_cells, and
// attention reads a KV view of n_kv cells (the used ones rounded up to LLM_KV_PAD), with the visibility in
// the mask, which the graph builds from the cells' positions and sequences and the tokens' (a few bytes a cell
// and a token cross to a GPU, not n_kv x n_tokens). Consecutive decode steps then differ only in their inputs'
// contents (tokens, positions, cells), so a backend can replay the step it captured (CUDA graphs) for up to
// LLM_KV_PAD tokens in a row.
#include "llm-impl.h"

#include <algorithm>
#include <cmath>

llm_graph llm_build_graph(llm_context & lctx, int n_tokens, int n_kv, int n_out, llm_graph_out out, int n_seq,
                          int shard) {
    const llm_model & model = *lctx.model;
    const llm_hparams & hp = model.hp;
    const llm_kv_cache & kv = lctx.kv;
    // split mode row: this shard's heads (and FFN columns, in its slices); wo and ffn_down give partial sums that the
    // all-reduce adds up over the shards
    const llm_shard * sh = model.shards.empty() ? nullptr : &model.shards[shard];
    GGML_ASSERT(sh || shard == 0);
    std::vector<uint8_t> & mem = shard == 0 ? lctx.graph_mem : lctx.shards[shard - 1].graph_mem;
    const int64_t n_embd = hp.n_embd, hd = hp.n_embd_head;

    GGML_ASSERT(n_tokens > 0 && n_tokens <= kv.n_ctx && n_kv > 0 && n_kv <= kv.n_ctx);
    GGML_ASSERT(out == LLM_OUT_ALL ? n_out == n_tokens : out == LLM_OUT_LAST ? n_out == 1 : n_out >= 1 && n_out <= n_tokens);
    const float kq_scale = 1.0f / std::sqrt((float) hd);

    llm_graph g;
    g.n_tokens = n_tokens;
    g.n_kv = n_kv;
    g.n_out = n_out;
    g.out = out;
    g.n_seq = n_seq;
    g.ctx = ggml_init({mem.size(), mem.data(), true});
    ggml_context * ctx = g.ctx;
    // [n_embd, n] partial sums of this shard -> the sum over all shards (nothing without a split)
    auto reduce = [&](ggml_tensor * partial, const char * name, int il, bool split) {
        if (!split) return partial;
        ggml_tensor * t = ggml_all_reduce(ctx, partial, lctx.comm, shard);
        ggml_format_name(t, "%s-%d", name, il);
        return t;
    };
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, lctx.graph_size);
    g.gf = gf;

    g.inp_tokens = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);  // i32 [n_tokens]
    ggml_set_name(g.inp_tokens, "inp_tokens");
    ggml_set_input(g.inp_tokens);
    g.inp_pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);  // i32 [n_tokens]
    ggml_set_name(g.inp_pos, "inp_pos");
    ggml_set_input(g.inp_pos);
    g.inp_cells = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);  // i32 [n_tokens]: KV cells written
    ggml_set_name(g.inp_cells, "inp_cells");
    ggml_set_input(g.inp_cells);
    if (out == LLM_OUT_IDS) {
        g.inp_out_ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_out);  // i32 [n_out]: tokens whose logits are kept
        ggml_set_name(g.inp_out_ids, "inp_out_ids");
        ggml_set_input(g.inp_out_ids);
    }
    g.inp_seq = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tokens);  // i32 [n_tokens]
    ggml_set_name(g.inp_seq, "inp_seq");
    ggml_set_input(g.inp_seq);
    g.inp_kv_cells = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 3, n_kv);  // i32 [3, n_kv]
    ggml_set_name(g.inp_kv_cells, "inp_kv_cells");
    ggml_set_input(g.inp_kv_cells);
    // [n_kv, n_tokens]: 0 or -inf, built where the attention runs; f16 for flash attention, f32 for the softmax path
    g.kq_mask = ggml_kq_mask(ctx, g.inp_kv_cells, g.inp_seq, g.inp_pos,
                             lctx.params.flash_attn ? GGML_TYPE_F16 : GGML_TYPE_F32);
    ggml_set_name(g.kq_mask, "kq_mask");

    ggml_tensor * x = ggml_get_rows(ctx, model.tok_embd, g.inp_tokens);  // [n_embd, n_tokens]
    ggml_set_name(x, "inp_embd");

    for (int il = 0; il < hp.n_layer; ++il) {
        // split mode row: the offloaded layers are the shard's slices; the others run whole in shard 0's graph
        const bool split = llm_layer_sliced(model, shard, il);
        if (sh && !split && shard > 0) break;
        const llm_layer & L = split ? sh->layers[il] : model.layers[il];
        const int64_t n_head = split ? sh->n_head : hp.n_head, n_head_kv = split ? sh->n_head_kv : hp.n_head_kv;
        const int64_t n_q = hd * n_head;  // this shard's query width (n_embd without a split)
        const int kv_shard = split ? shard : 0;
        const bool last = il == hp.n_layer - 1;
        ggml_tensor * inp = x;

        // ---- attention ----
        ggml_tensor * cur = ggml_rms_norm(ctx, x, hp.rms_eps);
        ggml_format_name(cur, "norm-%d", il);
        cur = ggml_mul(ctx, cur, L.attn_norm);  // [n_embd, n_tokens]
        ggml_format_name(cur, "attn_norm-%d", il);

        ggml_tensor * q = ggml_mul_mat(ctx, L.wq, cur);  // [n_q, n_tokens]
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

        llm_kv_store(ctx, gf, kv, il, ggml_reshape_2d(ctx, k, hd * n_head_kv, n_tokens), v, g.inp_cells, kv_shard);

        ggml_tensor * qp = ggml_permute(ctx, q, 0, 2, 1, 3);  // [hd, n_tokens, n_head]
        ggml_tensor * kc = llm_kv_view_k(ctx, kv, il, n_kv, kv_shard);  // [hd, n_kv, n_head_kv]
        ggml_tensor * vc = llm_kv_view_v(ctx, kv, il, n_kv, kv_shard);
        ggml_tensor * attn;
        if (lctx.params.flash_attn) {
            attn = ggml_flash_attn_ext(ctx, qp, kc, vc, g.kq_mask, kq_scale, -1);  // [hd, n_head, n_tokens]
            ggml_flash_attn_ext_set_seqs(attn, n_seq, kv.n_seq_max > 1);
            ggml_format_name(attn, "fattn-%d", il);
            attn = ggml_reshape_2d(ctx, attn, n_q, n_tokens);
        } else {
            ggml_tensor * kq = ggml_mul_mat(ctx, kc, qp);  // [n_kv, n_tokens, n_head]
            ggml_format_name(kq, "kq-%d", il);
            kq = ggml_soft_max_ext(ctx, kq, g.kq_mask, kq_scale);
            ggml_format_name(kq, "kq_soft_max-%d", il);
            ggml_tensor * kqv = ggml_mul_mat(ctx, vc, kq);  // [hd, n_tokens, n_head]
            ggml_format_name(kqv, "kqv-%d", il);
            attn = ggml_cont_2d(ctx, ggml_permute(ctx, kqv, 0, 2, 1, 3), n_q, n_tokens);  // [n_q, n_tokens]
        }
        ggml_format_name(attn, "kqv_out-%d", il);

        if (last && out == LLM_OUT_LAST && n_tokens > 1) {
            // only the last token goes on: skip the FFN (and the output matmul) of the others
            attn = ggml_view_2d(ctx, attn, n_q, 1, attn->nb[1], (n_tokens - 1) * attn->nb[1]);
            inp = ggml_view_2d(ctx, inp, n_embd, 1, inp->nb[1], (n_tokens - 1) * inp->nb[1]);
        } else if (last && out == LLM_OUT_IDS) {
            // only the tokens whose logits are wanted go on: [n_q / n_embd, n_out]
            attn = ggml_get_rows(ctx, attn, g.inp_out_ids);
            inp = ggml_get_rows(ctx, inp, g.inp_out_ids);
        }
        cur = ggml_mul_mat(ctx, L.wo, attn);  // [n_embd, n_out]
        ggml_format_name(cur, "attn_out-%d", il);
        cur = reduce(cur, "attn_out_sum", il, split);
        x = ggml_add(ctx, cur, inp);
        ggml_format_name(x, "ffn_inp-%d", il);

        // ---- feed-forward ----
        cur = ggml_rms_norm(ctx, x, hp.rms_eps);
        ggml_format_name(cur, "ffn_norm_raw-%d", il);
        cur = ggml_mul(ctx, cur, L.ffn_norm);
        ggml_format_name(cur, "ffn_norm-%d", il);
        ggml_tensor * gate = ggml_mul_mat(ctx, L.ffn_gate, cur);  // [n_ff (the shard's), n_out]
        ggml_format_name(gate, "ffn_gate-%d", il);
        ggml_tensor * up = ggml_mul_mat(ctx, L.ffn_up, cur);  // [n_ff, n_out]
        ggml_format_name(up, "ffn_up-%d", il);
        cur = ggml_swiglu_split(ctx, gate, up);
        ggml_format_name(cur, "ffn_swiglu-%d", il);
        cur = ggml_mul_mat(ctx, L.ffn_down, cur);  // [n_embd, n_out]
        ggml_format_name(cur, "ffn_out-%d", il);
        cur = reduce(cur, "ffn_out_sum", il, split);
        x = ggml_add(ctx, cur, x);
        ggml_format_name(x, "l_out-%d", il);
    }

    if (shard > 0) {  // shards 1.. end with their last all-reduce (and the residual add after it)
        // the tokens whose logits are kept are picked in the last layer, which this graph has only when it is split
        if (sh->layers.size() < (size_t) hp.n_layer) g.inp_out_ids = nullptr;
        ggml_build_forward_expand(gf, x);
        return g;
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
