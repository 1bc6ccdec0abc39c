// random_graph.h - seeded random DAGs of elementwise/unary/mul_mat/view/permute/cont/... ops for
// the allocator and scheduler tests. The same seed builds the same graph in any context, so a
// graph planned into one buffer can be checked against the same graph with memory per tensor.
#pragma once

#include "ggml-backend.h"
#include "ggml-impl.h"
#include "ggml.h"

#include <algorithm>
#include <cstring>
#include <random>
#include <string>
#include <vector>

struct rg_graph {
    ggml_cgraph * gf = nullptr;
    std::vector<ggml_tensor *> inputs; // leafs the caller fills with input_data
    std::vector<std::vector<uint8_t>> input_data;
    std::vector<ggml_tensor *> results; // tensors read after compute (no consumers, or OUTPUT)
    std::vector<ggml_tensor *> weights; // inputs flagged PARAM (the scheduler test moves them)
};

struct rg_builder {
    ggml_context * ctx;
    ggml_backend_t cpu; // supports_op decides which random ops are kept
    std::mt19937 rng;
    rg_graph g;
    std::vector<ggml_tensor *> pool;
    std::vector<int> uses;

    rg_builder(ggml_context * c, ggml_backend_t b, uint32_t seed) : ctx(c), cpu(b), rng(seed) {}

    int irand(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
    float frand(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }

    ggml_tensor * input(int64_t n0, int64_t n1, int64_t n2, int64_t n3, ggml_type type = GGML_TYPE_F32) {
        ggml_tensor * t = ggml_new_tensor_4d(ctx, type, n0, n1, n2, n3);
        ggml_format_name(t, "in%zu", g.inputs.size());
        const int kind = irand(0, 9);
        if (kind < 7)
            ggml_set_input(t);
        else if (kind == 7 && type == GGML_TYPE_F32) {
            ggml_set_param(t);
            g.weights.push_back(t);
        }
        std::vector<uint8_t> data(ggml_nbytes(t));
        const int64_t n = ggml_nelements(t);
        for (int64_t i = 0; i < n; ++i) {
            if (type == GGML_TYPE_I32) {
                const int32_t v = irand(0, 40);
                std::memcpy(data.data() + 4 * i, &v, 4);
            } else {
                const float v = frand(-2.0f, 2.0f);
                std::memcpy(data.data() + 4 * i, &v, 4);
            }
        }
        if (t->data) std::memcpy(t->data, data.data(), data.size());
        g.inputs.push_back(t);
        g.input_data.push_back(std::move(data));
        return t;
    }

    ggml_tensor * pick() {
        const int n = (int)pool.size();
        if (irand(0, 9) < 7) return pool[std::max(0, n - 1 - irand(0, 3))]; // mostly recent: chains
        return pool[irand(0, n - 1)];
    }
    ggml_tensor * same_shape(ggml_tensor * a) {
        std::vector<ggml_tensor *> c;
        for (auto * t : pool) {
            if (t != a && ggml_are_same_shape(t, a) && t->type == GGML_TYPE_F32) c.push_back(t);
        }
        return c.empty() || irand(0, 1) ? input(a->ne[0], a->ne[1], a->ne[2], a->ne[3])
                                        : c[irand(0, (int)c.size() - 1)];
    }

    void add_node(ggml_tensor * t) {
        if (!t || !ggml_backend_supports_op(cpu, t)) return; // an orphan: never reaches the graph
        for (auto * s : t->src) {
            for (size_t i = 0; s && i < pool.size(); ++i) {
                if (pool[i] == s) uses[i]++;
            }
        }
        ggml_format_name(t, "t%zu_%s", pool.size(), ggml_op_symbol(t->op));
        pool.push_back(t);
        uses.push_back(0);
    }

    void step() {
        ggml_tensor * a = pick();
        if (a->type != GGML_TYPE_F32) return;
        switch (irand(0, 15)) {
            case 0:
                add_node(ggml_add(ctx, a, irand(0, 2) ? same_shape(a) : input(a->ne[0], 1, a->ne[2], 1)));
                break;
            case 1:
                add_node(ggml_mul(ctx, a, irand(0, 2) ? same_shape(a) : input(a->ne[0], a->ne[1], 1, 1)));
                break;
            case 2:
                add_node(ggml_scale(ctx, a, frand(-1.5f, 1.5f)));
                break;
            case 3:
                add_node(ggml_silu(ctx, a));
                break;
            case 4:
                add_node(ggml_rms_norm(ctx, a, 1e-5f));
                break;
            case 5:
                if (irand(0, 1))
                    add_node(ggml_soft_max(ctx, a));
                else
                    add_node(ggml_soft_max_ext(ctx, a, input(a->ne[0], a->ne[1], 1, 1), frand(0.1f, 1.0f)));
                break;
            case 6: { // [K, M, ..] x [K, N, ..] -> [M, N, ..]
                // (the CPU kernel wants dense rows in src0: a->nb[0] == 4)
                if (irand(0, 1) && !ggml_is_transposed(a) && a->nb[0] == 4) {
                    add_node(ggml_mul_mat(ctx, a, input(a->ne[0], irand(1, 5), a->ne[2] * irand(1, 2), a->ne[3])));
                } else {
                    add_node(ggml_mul_mat(ctx, input(a->ne[0], irand(1, 5), a->ne[2], a->ne[3]), a));
                }
                break;
            }
            case 7:
                add_node(ggml_transpose(ctx, a));
                break;
            case 8: {
                int p[4] = {0, 1, 2, 3};
                std::shuffle(p, p + 4, rng);
                add_node(ggml_permute(ctx, a, p[0], p[1], p[2], p[3]));
                break;
            }
            case 9:
                if (a->ne[1] > 1)
                    add_node(ggml_view_3d(ctx, a, a->ne[0], a->ne[1] - 1, a->ne[2], a->nb[1], a->nb[2], a->nb[1]));
                break;
            case 10:
                add_node(ggml_cont(ctx, a));
                break;
            case 11:
                add_node(ggml_swiglu_split(ctx, a, same_shape(a)));
                break;
            case 12:
                add_node(ggml_diag_mask_inf(ctx, a, irand(0, 2)));
                break;
            case 13:
                if (a->ne[0] % 2 == 0 && a->ne[3] == 1) { // [head_dim, n_head, n_tokens]
                    ggml_tensor * pos = input(a->ne[2], 1, 1, 1, GGML_TYPE_I32);
                    const int n_dims = a->ne[0] >= 4 && irand(0, 1) ? (int)a->ne[0] - 2 : (int)a->ne[0];
                    add_node(ggml_rope_ext(ctx, a, pos, nullptr, n_dims, irand(0, 1) ? GGML_ROPE_TYPE_NEOX : 0,
                                           10000.0f, 1.0f));
                }
                break;
            case 14:
                if (ggml_is_contiguous(a)) add_node(ggml_reshape_2d(ctx, a, a->ne[0] * a->ne[1], a->ne[2] * a->ne[3]));
                break;
            case 15:
                add_node(ggml_dup(ctx, a));
                break;
        }
    }

    rg_graph build(int n_steps) {
        pool.push_back(input(irand(1, 12) * 2, irand(1, 6), irand(1, 3), irand(1, 2)));
        uses.push_back(0);
        for (int i = 0; i < n_steps; ++i)
            step();
        g.gf = ggml_new_graph(ctx);
        for (size_t i = 1; i < pool.size(); ++i) {
            if (uses[i] == 0) {
                ggml_build_forward_expand(g.gf, pool[i]);
                g.results.push_back(pool[i]);
            }
        }
        // one consumed intermediate marked OUTPUT: it must survive to the end
        std::vector<ggml_tensor *> mid;
        for (size_t i = 1; i < pool.size(); ++i) {
            if (uses[i] > 0 && !pool[i]->view_src) mid.push_back(pool[i]);
        }
        if (!mid.empty()) {
            ggml_tensor * o = mid[irand(0, (int)mid.size() - 1)];
            ggml_set_output(o);
            g.results.push_back(o);
        }
        return g;
    }
};

// values of an f32 tensor of any backend and strides, in ne order
inline std::vector<float> rg_values(const ggml_tensor * a) {
    std::vector<uint8_t> raw(ggml_nbytes(a));
    ggml_backend_tensor_get(a, raw.data(), 0, raw.size());
    std::vector<float> v;
    for (int64_t i3 = 0; i3 < a->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < a->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < a->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < a->ne[0]; ++i0) {
                    float x;
                    std::memcpy(&x, raw.data() + i0 * a->nb[0] + i1 * a->nb[1] + i2 * a->nb[2] + i3 * a->nb[3], 4);
                    v.push_back(x);
                }
    return v;
}

// exact (bitwise) comparison; on mismatch *where says which element
inline bool rg_bitwise_equal(const ggml_tensor * a, const std::vector<float> & ref, std::string * where) {
    const std::vector<float> v = rg_values(a);
    if (v.size() != ref.size()) {
        if (where) *where = std::string(a->name) + ": element count differs";
        return false;
    }
    for (size_t k = 0; k < v.size(); ++k) {
        if (std::memcmp(&v[k], &ref[k], 4) != 0) {
            if (where)
                *where = std::string(a->name) + " at " + std::to_string(k) + ": " + std::to_string(v[k]) + " vs " +
                         std::to_string(ref[k]);
            return false;
        }
    }
    return true;
}

// fill the graph's inputs (those that made it into a graph and have memory)
inline void rg_set_inputs(const rg_graph & g) {
    for (size_t i = 0; i < g.inputs.size(); ++i) {
        if (g.inputs[i]->data) ggml_backend_tensor_set(g.inputs[i], g.input_data[i].data(), 0, g.input_data[i].size());
    }
}
