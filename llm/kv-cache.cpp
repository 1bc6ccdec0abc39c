// kv-cache.cpp - per-layer K/V tensors in the layer's backend buffer, store/view helpers for the graph
// builder, and the context shift (remove a range, move later cells down, re-rotate their keys).
#include "kv-cache.h"

#include "llm-impl.h"

#include <cstdio>
#include <map>

size_t llm_kv_cache::size_bytes() const {
    size_t n = 0;
    for (auto * b : bufs) n += ggml_backend_buffer_get_size(b);
    return n;
}

void llm_kv_cache_free(llm_kv_cache & kv) {
    for (auto * b : kv.bufs) ggml_backend_buffer_free(b);
    for (auto * c : kv.ctxs) ggml_free(c);
    kv.bufs.clear();
    kv.ctxs.clear();
    kv.k.clear();
    kv.v.clear();
    kv.n_past = 0;
}

bool llm_kv_cache_init(llm_kv_cache & kv, const llm_model & model, int n_ctx, ggml_type type, bool v_trans,
                       std::string * err) {
    GGML_ASSERT(type == GGML_TYPE_F16 || type == GGML_TYPE_F32);
    const llm_hparams & hp = model.hp;
    kv.n_ctx = n_ctx;
    kv.n_past = 0;
    kv.type = type;
    kv.v_trans = v_trans;
    kv.n_embd_head = hp.n_embd_head;
    kv.n_head_kv = hp.n_head_kv;
    const int64_t n_embd_kv = hp.n_embd_k_gqa();

    // one context (and one buffer) per buffer type
    std::map<ggml_backend_buffer_type_t, ggml_context *> ctx_of;
    kv.k.resize(hp.n_layer);
    kv.v.resize(hp.n_layer);
    for (int il = 0; il < hp.n_layer; ++il) {
        ggml_backend_buffer_type_t buft = model.layers[il].buft;
        ggml_context *& c = ctx_of[buft];
        if (!c) {
            c = ggml_init({(size_t) 2 * hp.n_layer * ggml_tensor_overhead(), nullptr, true});
            kv.ctxs.push_back(c);
        }
        kv.k[il] = ggml_new_tensor_2d(c, type, n_embd_kv, n_ctx);  // [n_embd_k_gqa, n_ctx]
        kv.v[il] = v_trans ? ggml_new_tensor_2d(c, type, n_ctx, n_embd_kv)   // [n_ctx, n_embd_v_gqa]
                           : ggml_new_tensor_2d(c, type, n_embd_kv, n_ctx);  // [n_embd_v_gqa, n_ctx]
        ggml_format_name(kv.k[il], "cache_k_l%d", il);
        ggml_format_name(kv.v[il], "cache_v_l%d", il);
    }
    for (auto & [buft, c] : ctx_of) {
        ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(c, buft);
        if (!b) {
            const size_t need = (size_t) 2 * ggml_row_size(type, n_embd_kv) * n_ctx;
            if (err) {
                char buf[256];
                snprintf(buf, sizeof(buf), "out of memory: KV cache (n_ctx %d, %.1f MiB per layer) on %s", n_ctx,
                         need / (1024.0 * 1024.0), ggml_backend_buft_name(buft));
                *err = buf;
            }
            llm_kv_cache_free(kv);
            return false;
        }
        kv.bufs.push_back(b);
    }
    llm_kv_cache_clear(kv);
    return true;
}

void llm_kv_cache_clear(llm_kv_cache & kv) {
    // zeros, not garbage: masked-out V cells are multiplied by 0 and a NaN there would poison the sum
    for (auto * b : kv.bufs) ggml_backend_buffer_clear(b, 0);
    kv.n_past = 0;
}

void llm_kv_store(ggml_context * ctx, ggml_cgraph * gf, const llm_kv_cache & kv, int il, ggml_tensor * k_cur,
                  ggml_tensor * v_cur, ggml_tensor * cells) {
    ggml_tensor * k = kv.k[il];
    ggml_tensor * v = kv.v[il];
    const int64_t n_embd_kv = k->ne[0];
    const int64_t n_tokens = k_cur->ne[1];
    GGML_ASSERT(k_cur->ne[0] == n_embd_kv && v_cur->ne[0] == n_embd_kv && v_cur->ne[1] == n_tokens);
    GGML_ASSERT(cells->type == GGML_TYPE_I32 && cells->ne[0] == n_tokens && n_tokens <= kv.n_ctx);

    ggml_tensor * kw = ggml_set_rows(ctx, k, k_cur, cells);  // rows of k [n_embd_k_gqa, n_ctx]
    ggml_format_name(kw, "k_cache_store-%d", il);
    ggml_build_forward_expand(gf, kw);
    // v_trans: v is [n_ctx, n_embd_v_gqa]; its transpose [n_embd_v_gqa, n_ctx] has one "row" per cell
    ggml_tensor * vw = ggml_set_rows(ctx, kv.v_trans ? ggml_transpose(ctx, v) : v, v_cur, cells);
    ggml_format_name(vw, "v_cache_store-%d", il);
    ggml_build_forward_expand(gf, vw);
}

ggml_tensor * llm_kv_view_k(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv) {
    ggml_tensor * k = kv.k[il];
    ggml_tensor * t = ggml_view_3d(ctx, k, kv.n_embd_head, n_kv, kv.n_head_kv, k->nb[1],
                                   ggml_row_size(k->type, kv.n_embd_head), 0);
    ggml_format_name(t, "k-%d", il);
    return t;
}

ggml_tensor * llm_kv_view_v(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv) {
    ggml_tensor * v = kv.v[il];
    ggml_tensor * t;
    if (kv.v_trans) {
        t = ggml_view_3d(ctx, v, n_kv, kv.n_embd_head, kv.n_head_kv, v->nb[1], v->nb[1] * kv.n_embd_head, 0);
    } else {
        t = ggml_view_3d(ctx, v, kv.n_embd_head, n_kv, kv.n_head_kv, v->nb[1],
                         ggml_row_size(v->type, kv.n_embd_head), 0);
    }
    ggml_format_name(t, "v-%d", il);
    return t;
}

bool llm_kv_cache_remove(llm_kv_cache & kv, const llm_model & model, ggml_backend_sched_t sched, int p0, int p1,
                         std::string * err) {
    if (p0 < 0 || p1 < p0) {
        if (err) *err = "llm_kv_remove: bad range [" + std::to_string(p0) + ", " + std::to_string(p1) + ")";
        return false;
    }
    if (p1 > kv.n_past) p1 = kv.n_past;
    if (p0 >= p1) return true;
    const int n_move = kv.n_past - p1;
    const int delta = p1 - p0;
    if (n_move == 0) {
        kv.n_past = p0;
        return true;
    }

    const llm_hparams & hp = model.hp;
    const int64_t n_embd_kv = hp.n_embd_k_gqa();
    const size_t graph_size = 16 + 12 * (size_t) hp.n_layer;
    std::vector<uint8_t> mem(graph_size * ggml_tensor_overhead() + ggml_graph_overhead_custom(graph_size));
    ggml_context * ctx = ggml_init({mem.size(), mem.data(), true});
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, graph_size);

    // temporaries are graph nodes (get_rows, dup), so the allocator reuses their memory layer by layer
    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_move);  // i32 [n_move], all -delta
    ggml_set_name(pos, "shift_pos");
    ggml_set_input(pos);
    ggml_tensor * rows = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_move);  // i32 [n_move]: p1 .. n_past-1
    ggml_set_name(rows, "shift_rows");
    ggml_set_input(rows);
    for (int il = 0; il < hp.n_layer; ++il) {
        // keys: cells p1.. -> f32 [head_dim, n_head_kv, n_move] -> rope by -delta -> cells p0..
        ggml_tensor * k = kv.k[il];
        ggml_tensor * kr = ggml_get_rows(ctx, k, rows);  // f32 [n_embd_k_gqa, n_move]
        kr = ggml_reshape_3d(ctx, kr, hp.n_embd_head, hp.n_head_kv, n_move);
        kr = ggml_rope_ext(ctx, kr, pos, model.layers[il].rope_freqs, hp.n_rot, GGML_ROPE_TYPE_NORMAL,
                           hp.rope_freq_base, hp.rope_freq_scale);
        ggml_format_name(kr, "shift_k_rope-%d", il);
        ggml_tensor * k_dst = ggml_view_2d(ctx, k, n_embd_kv, n_move, k->nb[1], (size_t) p0 * k->nb[1]);
        ggml_build_forward_expand(gf, ggml_cpy(ctx, ggml_reshape_2d(ctx, kr, n_embd_kv, n_move), k_dst));

        // values: plain move through a contiguous copy (source and destination may overlap)
        ggml_tensor * v = kv.v[il];
        ggml_tensor * v_src, * v_dst;
        if (kv.v_trans) {
            const size_t es = ggml_type_size(v->type);
            v_src = ggml_view_2d(ctx, v, n_move, n_embd_kv, v->nb[1], (size_t) p1 * es);
            v_dst = ggml_view_2d(ctx, v, n_move, n_embd_kv, v->nb[1], (size_t) p0 * es);
        } else {
            v_src = ggml_view_2d(ctx, v, n_embd_kv, n_move, v->nb[1], (size_t) p1 * v->nb[1]);
            v_dst = ggml_view_2d(ctx, v, n_embd_kv, n_move, v->nb[1], (size_t) p0 * v->nb[1]);
        }
        ggml_tensor * v_tmp = ggml_dup(ctx, v_src);
        ggml_format_name(v_tmp, "shift_v_tmp-%d", il);
        ggml_build_forward_expand(gf, ggml_cpy(ctx, v_tmp, v_dst));
    }

    ggml_backend_sched_reset(sched);
    bool ok = ggml_backend_sched_alloc_graph(sched, gf);
    if (ok) {
        std::vector<int32_t> d(n_move, -delta), r(n_move);
        for (int i = 0; i < n_move; ++i) r[i] = p1 + i;
        ggml_backend_tensor_set(pos, d.data(), 0, d.size() * sizeof(int32_t));
        ggml_backend_tensor_set(rows, r.data(), 0, r.size() * sizeof(int32_t));
        ok = ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS;
    }
    ggml_backend_sched_reset(sched);
    ggml_free(ctx);
    if (!ok) {
        if (err) *err = "llm_kv_remove: the shift graph failed to allocate or compute";
        return false;
    }
    kv.n_past -= delta;
    return true;
}
