// kv-cache.cpp - per-layer K/V tensors in the layer's backend buffer, store/view helpers for the graph
// builder, and the context shift (re-rotate the keys of moved positions in place). The cells' bookkeeping
// (placement, masks, sequence edits) is in kv-cells.cpp.
#include "kv-cache.h"

#include "llm-impl.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <map>
#include <vector>

size_t llm_kv_cache::size_bytes() const {
    size_t n = 0;
    for (auto * b : bufs) n += ggml_backend_buffer_get_size(b);
    return n;
}

size_t llm_kv_cache::size_bytes_k() const {
    size_t n = 0;
    for (auto * t : k) n += t ? ggml_nbytes(t) : 0;
    return n;
}

size_t llm_kv_cache::size_bytes_v() const {
    size_t n = 0;
    for (auto * t : v) n += t ? ggml_nbytes(t) : 0;
    return n;
}

static const ggml_type k_kv_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0};

bool llm_kv_type_from_name(const std::string & name, ggml_type * type) {
    std::string lower = name;
    for (char & c : lower) c = (char) std::tolower((unsigned char) c);
    for (ggml_type t : k_kv_types) {
        if (lower == ggml_type_name(t)) {
            *type = t;
            return true;
        }
    }
    return false;
}

const char * llm_kv_type_names() { return "f32, f16, q8_0, q4_0"; }

std::string llm_kv_types_check(const llm_model & model, ggml_type type_k, ggml_type type_v, bool flash_attn) {
    for (ggml_type t : {type_k, type_v}) {
        if (std::find(std::begin(k_kv_types), std::end(k_kv_types), t) == std::end(k_kv_types)) {
            return std::string("KV cache type ") + ((int) t >= 0 && (int) t < GGML_TYPE_COUNT ? ggml_type_name(t) : "?") +
                   " is not supported (" + llm_kv_type_names() + ")";
        }
    }
    if (ggml_is_quantized(type_v) && !flash_attn) {
        return std::string("a quantized V cache (") + ggml_type_name(type_v) + ") needs flash attention (-fa)";
    }
    const int hd = model.hp.n_embd_head;
    for (ggml_type t : {type_k, type_v}) {
        if (hd % ggml_blck_size(t) != 0) {
            return std::string("KV cache type ") + ggml_type_name(t) + " needs a head size that is a multiple of " +
                   std::to_string(ggml_blck_size(t)) + " (this model's is " + std::to_string(hd) + ")";
        }
    }
    return "";
}

// Can backend run every op that touches a layer's cache of these types: the stores (SET_ROWS), attention
// (FLASH_ATTN_EXT, or the two MUL_MATs on the views), and the context shift (GET_ROWS of K, then SET_ROWS)?
// Asked on one-cell probes with the layer's shapes (no memory).
static bool kv_ops_supported(ggml_backend_t backend, const llm_hparams & hp, ggml_type tk, ggml_type tv,
                             bool v_trans) {
    const int64_t hd = hp.n_embd_head, nh = hp.n_head, nkv = hp.n_head_kv, n = 256;
    ggml_init_params ip = {64 * ggml_tensor_overhead(), nullptr, true};
    ggml_context * c = ggml_init(ip);
    ggml_tensor * kc = ggml_new_tensor_2d(c, tk, hd * nkv, n);                    // [n_embd_k_gqa, n_ctx]
    ggml_tensor * vc = v_trans ? ggml_new_tensor_2d(c, tv, n, hd * nkv) : ggml_new_tensor_2d(c, tv, hd * nkv, n);
    ggml_tensor * cur = ggml_new_tensor_2d(c, GGML_TYPE_F32, hd * nkv, 1);        // [n_embd_k_gqa, 1]
    ggml_tensor * cells = ggml_new_tensor_1d(c, GGML_TYPE_I32, 1);
    ggml_tensor * q = ggml_new_tensor_3d(c, GGML_TYPE_F32, hd, 1, nh);             // [hd, n_tokens, n_head]
    ggml_tensor * mask = ggml_new_tensor_2d(c, GGML_TYPE_F32, n, 1);
    ggml_tensor * k = ggml_view_3d(c, kc, hd, n, nkv, kc->nb[1], ggml_row_size(tk, hd), 0);
    std::vector<ggml_tensor *> probes = {
        ggml_set_rows(c, kc, cur, cells),
        ggml_set_rows(c, v_trans ? ggml_transpose(c, vc) : vc, cur, cells),
        ggml_get_rows(c, kc, cells),
    };
    if (v_trans) {
        ggml_tensor * v = ggml_view_3d(c, vc, n, hd, nkv, vc->nb[1], vc->nb[1] * hd, 0);  // [n_kv, hd, n_head_kv]
        ggml_tensor * kq = ggml_mul_mat(c, k, q);                                        // [n_kv, 1, n_head]
        probes.push_back(kq);
        probes.push_back(ggml_mul_mat(c, v, kq));
    } else {
        ggml_tensor * v = ggml_view_3d(c, vc, hd, n, nkv, vc->nb[1], ggml_row_size(tv, hd), 0);
        probes.push_back(ggml_flash_attn_ext(c, q, k, v, mask, 1.0f, -1));
    }
    bool ok = true;
    for (ggml_tensor * t : probes) ok = ok && ggml_backend_supports_op(backend, t);
    ggml_free(c);
    return ok;
}

void llm_kv_cache_free(llm_kv_cache & kv) {
    for (auto * b : kv.bufs) ggml_backend_buffer_free(b);
    for (auto * c : kv.ctxs) ggml_free(c);
    kv.bufs.clear();
    kv.ctxs.clear();
    kv.k.clear();
    kv.v.clear();
    kv.cells.clear();
}

bool llm_kv_cache_init(llm_kv_cache & kv, const llm_model & model, int n_ctx, int n_seq_max, ggml_type type_k,
                       ggml_type type_v, bool v_trans, const std::vector<ggml_backend_t> & devs, std::string * err) {
    const std::string bad = llm_kv_types_check(model, type_k, type_v, !v_trans);
    if (!bad.empty()) {
        if (err) *err = bad;
        return false;
    }
    if (n_seq_max < 1 || n_seq_max > 64) {
        if (err) *err = "the KV cache holds 1 to 64 sequences, asked for " + std::to_string(n_seq_max);
        return false;
    }
    const llm_hparams & hp = model.hp;
    kv.n_ctx = n_ctx;
    kv.n_seq_max = n_seq_max;
    kv.type_k = type_k;
    kv.type_v = type_v;
    kv.v_trans = v_trans;
    kv.n_embd_head = hp.n_embd_head;
    kv.n_layer = hp.n_layer;
    kv.n_shards = std::max<int>(1, (int) model.shards.size());

    // one context (and one buffer) per buffer type
    std::map<ggml_backend_buffer_type_t, ggml_context *> ctx_of;
    std::map<ggml_backend_buffer_type_t, bool> dev_ok;  // device buffer types whose backend runs the cache's ops
    int n_moved = 0;
    const bool quantized = ggml_is_quantized(type_k) || ggml_is_quantized(type_v);
    kv.k.resize((size_t) kv.n_shards * hp.n_layer);
    kv.v.resize((size_t) kv.n_shards * hp.n_layer);
    for (int i = 0; i < kv.n_shards * hp.n_layer; ++i) {
        const int s = i / hp.n_layer, il = i % hp.n_layer;
        // split mode row: shard s's KV heads of an offloaded layer, on its device; a layer on the CPU has its whole
        // cache in shard 0's set and none in the others
        const bool split = llm_layer_sliced(model, s, il);
        if (s > 0 && !split) continue;
        const llm_layer & L = split ? model.shards[s].layers[il] : model.layers[il];
        const int64_t n_embd_kv = (int64_t) hp.n_embd_head * (split ? model.shards[s].n_head_kv : hp.n_head_kv);
        ggml_backend_buffer_type_t buft = L.buft;
        // f32/f16 caches stay with their layer as before; a quantized one only where the device runs its ops
        if (quantized && !ggml_backend_buft_is_host(buft)) {
            auto it = dev_ok.find(buft);
            if (it == dev_ok.end()) {
                ggml_backend_t dev = nullptr;  // the device backend of this buffer type
                for (ggml_backend_t b : devs) {
                    if (ggml_backend_supports_buft(b, buft)) dev = b;
                }
                it = dev_ok.emplace(buft, dev && kv_ops_supported(dev, hp, type_k, type_v, v_trans)).first;
            }
            if (!it->second) {
                buft = ggml_backend_cpu_buffer_type();
                ++n_moved;
            }
        }
        ggml_context *& c = ctx_of[buft];
        if (!c) {
            c = ggml_init({(size_t) 2 * hp.n_layer * ggml_tensor_overhead(), nullptr, true});
            kv.ctxs.push_back(c);
        }
        kv.k[i] = ggml_new_tensor_2d(c, type_k, n_embd_kv, n_ctx);  // [n_embd_k_gqa, n_ctx]
        kv.v[i] = v_trans ? ggml_new_tensor_2d(c, type_v, n_ctx, n_embd_kv)   // [n_ctx, n_embd_v_gqa]
                          : ggml_new_tensor_2d(c, type_v, n_embd_kv, n_ctx);  // [n_embd_v_gqa, n_ctx]
        ggml_format_name(kv.k[i], s ? "cache_k_l%d.%d" : "cache_k_l%d", il, s);
        ggml_format_name(kv.v[i], s ? "cache_v_l%d.%d" : "cache_v_l%d", il, s);
    }
    for (auto & [buft, c] : ctx_of) {
        ggml_backend_buffer_t b = ggml_backend_alloc_ctx_tensors_from_buft(c, buft);
        if (!b) {
            size_t need = 0;  // per layer in this buffer
            for (ggml_tensor * t = ggml_get_first_tensor(c); t; t = ggml_get_next_tensor(c, t)) need += ggml_nbytes(t);
            need /= hp.n_layer;
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
    if (n_moved > 0) {
        GGML_LOG_WARN("%s: %s has no kernels for a %s K / %s V cache: the KV cache of %d offloaded layer(s) stays in "
                      "host memory and its attention runs on the CPU\n",
                      __func__, devs.empty() ? "the device" : ggml_backend_name(devs[0]), ggml_type_name(type_k),
                      ggml_type_name(type_v), n_moved);
    }
    llm_kv_cache_clear(kv);
    return true;
}

void llm_kv_cache_clear(llm_kv_cache & kv) {
    // zeros, not garbage: masked-out V cells are multiplied by 0 and a NaN there would poison the sum
    for (auto * b : kv.bufs) ggml_backend_buffer_clear(b, 0);
    kv.cells.assign(kv.n_ctx, llm_kv_cell());
    kv.used = kv.used_end = 0;
    kv.seq_pos_max.assign(kv.n_seq_max, -1);
    kv.seq_next.assign(kv.n_seq_max, 0);
    for (int s = 0; s < kv.n_seq_max; ++s) kv.seq_next[s] = (int) ((int64_t) kv.n_ctx * s / kv.n_seq_max);
}

void llm_kv_store(ggml_context * ctx, ggml_cgraph * gf, const llm_kv_cache & kv, int il, ggml_tensor * k_cur,
                  ggml_tensor * v_cur, ggml_tensor * cells, int shard) {
    ggml_tensor * k = kv.k[shard * kv.n_layer + il];
    ggml_tensor * v = kv.v[shard * kv.n_layer + il];
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

ggml_tensor * llm_kv_view_k(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv, int shard) {
    ggml_tensor * k = kv.k[shard * kv.n_layer + il];
    ggml_tensor * t = ggml_view_3d(ctx, k, kv.n_embd_head, n_kv, k->ne[0] / kv.n_embd_head, k->nb[1],
                                   ggml_row_size(k->type, kv.n_embd_head), 0);
    ggml_format_name(t, "k-%d", il);
    return t;
}

ggml_tensor * llm_kv_view_v(ggml_context * ctx, const llm_kv_cache & kv, int il, int n_kv, int shard) {
    ggml_tensor * v = kv.v[shard * kv.n_layer + il];
    ggml_tensor * t;
    if (kv.v_trans) {
        const int64_t n_head_kv = v->ne[1] / kv.n_embd_head;
        t = ggml_view_3d(ctx, v, n_kv, kv.n_embd_head, n_head_kv, v->nb[1], v->nb[1] * kv.n_embd_head, 0);
    } else {
        t = ggml_view_3d(ctx, v, kv.n_embd_head, n_kv, v->ne[0] / kv.n_embd_head, v->nb[1],
                         ggml_row_size(v->type, kv.n_embd_head), 0);
    }
    ggml_format_name(t, "v-%d", il);
    return t;
}

static bool shift_keys(llm_kv_cache & kv, const llm_model & model, ggml_backend_sched_t sched, int s,
                       const std::vector<int32_t> & rows, int delta);

bool llm_kv_seq_add(llm_kv_cache & kv, const llm_model & model, const std::vector<ggml_backend_sched_t> & scheds,
                    int seq, int p0, int p1, int delta, std::string * err, const std::function<void()> & before_shift) {
    if (seq < 0 || seq >= kv.n_seq_max || p0 < 0 || (p1 >= 0 && p1 < p0)) {
        if (err) {
            *err = "llm_kv_seq_add: bad sequence " + std::to_string(seq) + " or range [" + std::to_string(p0) + ", " +
                   std::to_string(p1) + ")";
        }
        return false;
    }
    if (p1 < 0) p1 = INT32_MAX;
    std::vector<int32_t> rows;  // the cells that move
    for (int j = 0; j < kv.used_end; ++j) {
        const llm_kv_cell & c = kv.cells[j];
        if ((c.seq >> seq & 1) && c.pos >= p0 && c.pos < p1) rows.push_back(j);
    }
    if (rows.empty() || delta == 0) return true;
    for (int32_t j : rows) {
        if (kv.cells[j].pos + delta < 0) {
            if (err) *err = "llm_kv_seq_add: position " + std::to_string(kv.cells[j].pos) + " + " +
                            std::to_string(delta) + " is negative";
            return false;
        }
    }
    if (before_shift) before_shift();

    GGML_ASSERT((int) scheds.size() == kv.n_shards);
    bool ok = true;
    for (int s = 0; s < kv.n_shards && ok; ++s) ok = shift_keys(kv, model, scheds[s], s, rows, delta);
    if (!ok) {
        if (err) *err = "llm_kv_seq_add: the shift graph failed to allocate or compute";
        return false;
    }
    uint64_t moved = 0; // the sequences that see a moved cell
    for (int32_t j : rows) {
        kv.cells[j].pos += delta;
        moved |= kv.cells[j].seq;
    }
    llm_kv_recount_pos_max(kv, moved);
    return true;
}

// The keys of cells `rows` of shard s's layers rotated by delta in place, on sched.
static bool shift_keys(llm_kv_cache & kv, const llm_model & model, ggml_backend_sched_t sched, int s,
                       const std::vector<int32_t> & rows, int delta) {
    const llm_hparams & hp = model.hp;
    const int n_move = (int) rows.size();
    const size_t graph_size = 16 + 8 * (size_t) hp.n_layer;
    std::vector<uint8_t> mem(graph_size * ggml_tensor_overhead() + ggml_graph_overhead_custom(graph_size));
    ggml_context * ctx = ggml_init({mem.size(), mem.data(), true});
    ggml_cgraph * gf = ggml_new_graph_custom(ctx, graph_size);

    ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_move);  // i32 [n_move], all delta
    ggml_set_name(pos, "shift_pos");
    ggml_set_input(pos);
    ggml_tensor * idx = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_move);  // i32 [n_move]: the cells
    ggml_set_name(idx, "shift_rows");
    ggml_set_input(idx);
    for (int il = 0; il < hp.n_layer; ++il) {
        // keys of the cells -> f32 [head_dim, n_head_kv, n_move] -> rope by delta -> back into the same cells
        ggml_tensor * k = kv.k[s * kv.n_layer + il];
        if (!k) continue;  // split mode row: a layer on the CPU (shard 0 holds its cache)
        const int64_t n_embd_kv = k->ne[0];
        const bool split = llm_layer_sliced(model, s, il);
        const llm_layer & L = split ? model.shards[s].layers[il] : model.layers[il];
        ggml_tensor * kr = ggml_get_rows(ctx, k, idx);  // f32 [n_embd_k_gqa, n_move]
        kr = ggml_reshape_3d(ctx, kr, hp.n_embd_head, n_embd_kv / hp.n_embd_head, n_move);
        kr = ggml_rope_ext(ctx, kr, pos, L.rope_freqs, hp.n_rot, GGML_ROPE_TYPE_NORMAL, hp.rope_freq_base,
                           hp.rope_freq_scale);
        ggml_format_name(kr, "shift_k_rope-%d", il);
        ggml_tensor * w = ggml_set_rows(ctx, k, ggml_reshape_2d(ctx, kr, n_embd_kv, n_move), idx);
        ggml_format_name(w, "shift_k_store-%d", il);
        ggml_build_forward_expand(gf, w);
    }

    ggml_backend_sched_reset(sched);
    bool ok = ggml_backend_sched_alloc_graph(sched, gf);
    if (ok) {
        std::vector<int32_t> d(n_move, delta);
        ggml_backend_tensor_set(pos, d.data(), 0, d.size() * sizeof(int32_t));
        ggml_backend_tensor_set(idx, rows.data(), 0, rows.size() * sizeof(int32_t));
        ok = ggml_backend_sched_graph_compute(sched, gf) == GGML_STATUS_SUCCESS;
    }
    ggml_backend_sched_reset(sched);
    ggml_free(ctx);
    return ok;
}
