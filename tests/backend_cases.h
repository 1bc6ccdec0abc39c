// backend_cases.h - the op cases of the backend-equivalence suite (as llama.cpp's test-backend-ops).
//
// Each case builds a small graph with the ggml.h builders: leaf tensors (op NONE, contiguous)
// get deterministic random data from backend_case_leaf_data, views of them feed one op, and the
// case's output is that op. Runners:
//   tests/test_ops.cpp           CPU backend vs an independent double-precision reference
//   tests/test_backend_cuda.cpp  CUDA vs CPU on the same cases (SKIPPED without a GPU)
//
//   for (const backend_case & c : backend_cases()) {
//       ggml_tensor * out = c.build(ctx);                          // ctx: host or no_alloc
//       for each leaf: bytes = backend_case_leaf_data(leaf, backend_case_seed(c));  // set into the leaf
//       ... compute on a backend, read out's bytes ...
//       double e = backend_case_nmse(got, expected);               // CHECK(e <= c.max_nmse)
//   }
//
// Leaf data by name prefix: "pos" i32 positions in [0, 1000) ("posbig": in [65536, 131072), Llama 3.1 long
// context); "rowids" i32 n distinct values in [0, 2n); "ff" f32 freq factors in [1, 8];
// "mask" f32/f16 (0, small negatives, -inf; rows with i1 % 5 == 3 fully -inf); "cmask" causal 0 / -inf (row i1
// sees keys up to ne0 - ne1 + i1; from key (13 i1) % 97 where i1 % 7 == 5, nothing where i1 % 11 == 10, and one
// -0.5 inside where i1 % 13 == 6: a mask a range alone does not describe); "ties" small
// integers in [-2, 2] (for argmax ties); "kvcells" i32 triples of ggml_kq_mask (position in [0, 1000), then
// sequence bits: each of sequences 0..5, 33 and 63 with probability 1/3, a free cell (no bits) one in 7); "seqid"
// i32 sequence ids among 0..5, 33 and 63; anything else uniform in [-1, 1] without zeros (f16: exact
// multiples of 1/1024), i32 in [0, 100). q8_0/q4_0 leaves (KV caches) are random valid blocks: an exact f16
// scale d (q8_0: d in [2^-8, 2^-7), values up to ~1; q4_0: d in [2^-4, 2^-3)) and random quants.
// NMSE thresholds: exact ops 0, f32 1e-7, f16 (inputs or outputs) 1e-5; quantized K/V: see the attention cases.
#pragma once

#include "ggml-backend.h"
#include "ggml.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

struct backend_case {
    std::string group;                                  // op family ("add", "rope", ...): one TEST_CASE per group
    std::string name;                                   // unique, readable: shapes, types, layout
    std::function<ggml_tensor *(ggml_context *)> build; // leaves + views + one op; returns the output
    double max_nmse;                                    // 0: must match exactly
    double gpu_nmse = 0; // against the CPU, where a GPU kernel rounds to f16 inside (0: max_nmse)
};

constexpr double BACKEND_NMSE_EXACT = 0.0;
constexpr double BACKEND_NMSE_F32 = 1e-7;
constexpr double BACKEND_NMSE_F16 = 1e-5;

// ---- f16 bits without the library (the tests must not trust the code they test) ---------------
inline double backend_half_to_double(uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0)
        v = std::ldexp((double)m, -24);
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = std::ldexp(1.0 + m / 1024.0, e - 15);
    return (h & 0x8000) ? -v : v;
}
// exact for 0, +-inf and normal halfs (the only values the fills produce)
inline uint16_t backend_double_to_half(double x) {
    const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
    if (x == 0) return sign;
    if (std::isinf(x)) return sign | 0x7C00;
    int e;
    const double f = std::frexp(std::fabs(x), &e); // |x| = f * 2^e, f in [0.5, 1)
    const int E = e - 1 + 15;
    const int m = (int)std::lround((2 * f - 1) * 1024);
    return sign | (uint16_t)(E << 10) | (uint16_t)m;
}

inline uint64_t backend_case_seed(const backend_case & c) {
    uint64_t h = 1469598103934665603ull; // FNV-1a of the name
    for (char ch : c.name)
        h = (h ^ (uint8_t)ch) * 1099511628211ull;
    return h;
}

// Bytes for a contiguous leaf tensor (ggml_nbytes(leaf) of them).
inline std::vector<uint8_t> backend_case_leaf_data(const ggml_tensor * leaf, uint64_t seed) {
    uint64_t h = seed;
    for (const char * p = leaf->name; *p; ++p)
        h = (h ^ (uint8_t)*p) * 1099511628211ull;
    std::mt19937_64 rng(h);
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    const std::string name = leaf->name;
    auto starts = [&](const char * pre) { return name.rfind(pre, 0) == 0; };
    const int64_t n = leaf->ne[0] * leaf->ne[1] * leaf->ne[2] * leaf->ne[3];
    if (leaf->type == GGML_TYPE_Q8_0 || leaf->type == GGML_TYPE_Q4_0) {
        // blocks of 32: f16 d (exact: m * 2^e, m in [512, 1024)), then 32 int8 (q8_0) or 16 bytes of nibbles (q4_0)
        const bool q8 = leaf->type == GGML_TYPE_Q8_0;
        const size_t bsize = q8 ? 34 : 18;
        std::vector<uint8_t> out((size_t)(n / 32) * bsize);
        for (size_t b = 0; b < out.size() / bsize; ++b) {
            uint8_t * p = &out[b * bsize];
            const double d = std::ldexp(512.0 + (double)(rng() % 512), q8 ? -17 : -13);
            const uint16_t h = backend_double_to_half(d);
            std::memcpy(p, &h, 2);
            for (size_t i = 2; i < bsize; ++i)
                p[i] = q8 ? (uint8_t)(int8_t)((int)(rng() % 255) - 127) : (uint8_t)(rng() & 0xFF);
        }
        return out;
    }
    std::vector<uint8_t> out(n * (leaf->type == GGML_TYPE_F16 ? 2 : 4));
    for (int64_t i = 0; i < n; ++i) {
        double v;
        if (leaf->type == GGML_TYPE_I32 && starts("rowids")) { // distinct values in [0, 2n)
            if (i == 0) {
                std::vector<int32_t> ids(2 * n);
                for (int64_t j = 0; j < 2 * n; ++j)
                    ids[j] = (int32_t)j;
                std::shuffle(ids.begin(), ids.end(), rng);
                std::memcpy(out.data(), ids.data(), n * 4);
            }
            continue;
        }
        if (leaf->type == GGML_TYPE_I32 && starts("kvcells")) {
            int32_t k = (int32_t)(rng() % 1000);
            if (i % 3 > 0) { // the bits of sequences 0..31 (lo) or 32..63 (hi)
                uint32_t bits = 0;
                for (int s : {0, 1, 2, 3, 4, 5, 33, 63})
                    if ((s < 32) == (i % 3 == 1) && rng() % 3 == 0) bits |= 1u << (s % 32);
                if ((i / 3) % 7 == 4) bits = 0;
                k = (int32_t)bits;
            }
            std::memcpy(&out[i * 4], &k, 4);
            continue;
        }
        if (leaf->type == GGML_TYPE_I32 && starts("seqid")) {
            const int32_t ids[] = {0, 1, 2, 3, 4, 5, 33, 63}, k = ids[rng() % 8];
            std::memcpy(&out[i * 4], &k, 4);
            continue;
        }
        if (leaf->type == GGML_TYPE_I32 && starts("posbig")) {
            const int32_t k = 65536 + (int32_t)(rng() % 65536);
            std::memcpy(&out[i * 4], &k, 4);
            continue;
        }
        if (leaf->type == GGML_TYPE_I32) {
            const int32_t k = (int32_t)(rng() % (starts("pos") ? 1000 : 100));
            std::memcpy(&out[i * 4], &k, 4);
            continue;
        }
        if (starts("ff")) {
            v = 1.0 + 7.0 * (u(rng) + 1.0) / 2.0;
        } else if (starts("seqmask")) {
            // a cache shared by 5 sequences: row i1 is a token of sequence (7 i1) % 5, which owns the keys of its fifth
            // of the row (with random holes) and every 37th key from its offset (cells left between the others');
            // rows with i1 % 11 == 4 see nothing
            const int64_t n = leaf->ne[0], j = i % n, i1 = (i / n) % leaf->ne[1], sq = (i1 * 7) % 5;
            const double r = (u(rng) + 1.0) / 2.0;
            const bool own = (j * 5 / n == sq && r >= 0.2) || j % 37 == sq;
            v = i1 % 11 == 4 || !own ? -INFINITY : r < 0.4 ? -std::round(r * 1024) / 1024 : 0.0;
        } else if (starts("tokmask")) {
            // the same cache with each token's keys one run of zeros (its fifth of the row, the first 3 + i1 % 7 keys
            // not), so its range is exact (fattn-range.cuh: the per-token kernel skips the mask); rows with
            // i1 % 9 == 2 have one -0.5 in the run (not exact), rows with i1 % 11 == 4 see nothing
            const int64_t n = leaf->ne[0], j = i % n, i1 = (i / n) % leaf->ne[1], sq = (i1 * 7) % 5;
            const int64_t lo = sq * n / 5 + 3 + i1 % 7, hi = (sq + 1) * n / 5;
            const bool own = j >= lo && j < hi && i1 % 11 != 4;
            v = !own ? -INFINITY : i1 % 9 == 2 && j == (lo + hi) / 2 ? -0.5 : 0.0;
        } else if (starts("cmask")) {
            const int64_t n = leaf->ne[0], j = i % n, i1 = (i / n) % leaf->ne[1];
            const int64_t last = n - leaf->ne[1] + i1, first = i1 % 7 == 5 ? (13 * i1) % 97 : 0;
            const bool seen = i1 % 11 != 10 && j >= first && j <= last;
            v = !seen ? -INFINITY : i1 % 13 == 6 && j == (first + last) / 2 ? -0.5 : 0.0;
        } else if (starts("mask")) {
            const int64_t i1 = (i / leaf->ne[0]) % leaf->ne[1];
            const double r = (u(rng) + 1.0) / 2.0;
            v = i1 % 5 == 3 || r < 0.2 ? -INFINITY : r < 0.4 ? -std::round(r * 1024) / 1024 : 0.0;
        } else if (starts("ties")) {
            v = (double)(int)(rng() % 5) - 2.0;
        } else {
            do
                v = std::round(u(rng) * 1024) / 1024;
            while (v == 0);
            if (leaf->type == GGML_TYPE_F32) v += u(rng) / 4096; // f32 gets full-precision values
        }
        if (leaf->type == GGML_TYPE_F16) {
            const uint16_t b = backend_double_to_half(v);
            std::memcpy(&out[i * 2], &b, 2);
        } else {
            const float f = (float)v;
            std::memcpy(&out[i * 4], &f, 4);
        }
    }
    return out;
}

// Element i0 of the q8_0 / q4_0 row at p (the layouts of ggml's block_q8_0 and block_q4_0, decoded here without
// the library: d * q, d * (nibble - 8) with elements 0..15 in the low nibbles and 16..31 in the high ones).
inline double backend_quant_value(ggml_type type, const uint8_t * row, int64_t i0) {
    const bool q8 = type == GGML_TYPE_Q8_0;
    const uint8_t * b = row + (i0 / 32) * (q8 ? 34 : 18);
    uint16_t h;
    std::memcpy(&h, b, 2);
    const double d = backend_half_to_double(h);
    const int j = (int)(i0 % 32);
    if (q8) return d * (int8_t)b[2 + j];
    const uint8_t q = b[2 + j % 16];
    return d * ((j < 16 ? (q & 0x0F) : (q >> 4)) - 8);
}

// Values of t in ne order (i0 fastest), read from base (= the bytes t->data points to), via t's strides.
inline std::vector<double> backend_case_values(const ggml_tensor * t, const uint8_t * base) {
    std::vector<double> v;
    v.reserve(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    for (int64_t i3 = 0; i3 < t->ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < t->ne[2]; ++i2)
            for (int64_t i1 = 0; i1 < t->ne[1]; ++i1)
                for (int64_t i0 = 0; i0 < t->ne[0]; ++i0) {
                    const uint8_t * p = base + i0 * t->nb[0] + i1 * t->nb[1] + i2 * t->nb[2] + i3 * t->nb[3];
                    if (t->type == GGML_TYPE_F32) {
                        float f;
                        std::memcpy(&f, p, 4);
                        v.push_back(f);
                    } else if (t->type == GGML_TYPE_F16) {
                        uint16_t b;
                        std::memcpy(&b, p, 2);
                        v.push_back(backend_half_to_double(b));
                    } else if (t->type == GGML_TYPE_I32) {
                        int32_t k;
                        std::memcpy(&k, p, 4);
                        v.push_back(k);
                    } else if (t->type == GGML_TYPE_Q8_0 || t->type == GGML_TYPE_Q4_0) {
                        v.push_back(backend_quant_value(t->type, p - i0 * t->nb[0], i0)); // from the row start
                    } else {
                        v.push_back(NAN); // not a type the cases produce
                    }
                }
    return v;
}

// Normalized mean squared error sum((a-b)^2) / sum(b^2). Non-finite expected values must match
// exactly (same infinity); any NaN or size mismatch gives +inf.
inline double backend_case_nmse(const std::vector<double> & got, const std::vector<double> & want) {
    if (got.size() != want.size()) return INFINITY;
    double err = 0, ref = 0;
    for (size_t i = 0; i < got.size(); ++i) {
        if (std::isnan(got[i]) || std::isnan(want[i])) return INFINITY;
        if (!std::isfinite(want[i]) || !std::isfinite(got[i])) {
            if (got[i] != want[i]) return INFINITY;
            continue;
        }
        err += (got[i] - want[i]) * (got[i] - want[i]);
        ref += want[i] * want[i];
    }
    if (ref == 0) return err == 0 ? 0 : INFINITY;
    return err / ref;
}

// ---- building blocks for the table ------------------------------------------------------------
enum backend_layout {
    BACKEND_LAYOUT_CONT,       // a plain leaf
    BACKEND_LAYOUT_TRANSPOSED, // transpose of a leaf: nb[0] is not the element size
    BACKEND_LAYOUT_PERMUTED,   // dims 1 and 2 swapped: dense rows, permuted row order
    BACKEND_LAYOUT_OFFSET,     // view into a larger leaf: padded rows, non-zero offset
};
inline const char * backend_layout_name(backend_layout l) {
    switch (l) {
        case BACKEND_LAYOUT_CONT:
            return "cont";
        case BACKEND_LAYOUT_TRANSPOSED:
            return "transposed";
        case BACKEND_LAYOUT_PERMUTED:
            return "permuted";
        case BACKEND_LAYOUT_OFFSET:
            return "offset";
    }
    return "?";
}

// An input of shape ne with the given memory layout, backed by a leaf named `name`.
inline ggml_tensor * backend_case_input(ggml_context * ctx, ggml_type type, const int64_t * ne, backend_layout l,
                                        const char * name) {
    ggml_tensor * leaf = nullptr;
    ggml_tensor * t = nullptr;
    switch (l) {
        case BACKEND_LAYOUT_CONT:
            t = leaf = ggml_new_tensor_4d(ctx, type, ne[0], ne[1], ne[2], ne[3]);
            break;
        case BACKEND_LAYOUT_TRANSPOSED:
            leaf = ggml_new_tensor_4d(ctx, type, ne[1], ne[0], ne[2], ne[3]);
            t = ggml_transpose(ctx, leaf);
            break;
        case BACKEND_LAYOUT_PERMUTED:
            leaf = ggml_new_tensor_4d(ctx, type, ne[0], ne[2], ne[1], ne[3]);
            t = ggml_permute(ctx, leaf, 0, 2, 1, 3);
            break;
        case BACKEND_LAYOUT_OFFSET:
            leaf = ggml_new_tensor_4d(ctx, type, ne[0] + 3, ne[1] + 1, ne[2], ne[3]);
            t = ggml_view_4d(ctx, leaf, ne[0], ne[1], ne[2], ne[3], leaf->nb[1], leaf->nb[2], leaf->nb[3],
                             leaf->nb[1] + 2 * ggml_type_size(type));
            break;
    }
    ggml_set_name(leaf, name);
    return t;
}

inline std::string backend_shape_str(const int64_t * ne) {
    return "[" + std::to_string(ne[0]) + "," + std::to_string(ne[1]) + "," + std::to_string(ne[2]) + "," +
           std::to_string(ne[3]) + "]";
}

// ---- the table ---------------------------------------------------------------------------------
// The inputs of a FLASH_ATTN_EXT case: q [D, T, n_head], a permuted view of "q" [D, n_head, T] as llama builds it;
// k / v [D, n_kv, n_head_kv] views of the first n_kv cells of a KV cache, "k_cache" / "v_cache" [D * n_head_kv,
// n_kv + 17] of types tk / tv
inline ggml_tensor * fa_case_q(ggml_context * ctx, int64_t D, int64_t n_head, int64_t n_tokens) {
    ggml_tensor * q0 = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, D, n_head, n_tokens);
    ggml_set_name(q0, "q");
    return ggml_permute(ctx, q0, 0, 2, 1, 3);
}
inline void fa_case_kv_cache(ggml_context * ctx, int64_t D, int64_t n_head_kv, int64_t n_kv, ggml_type tk, ggml_type tv,
                             ggml_tensor *& k, ggml_tensor *& v) {
    const int64_t n_ctx = n_kv + 17;
    ggml_tensor * kcache = ggml_new_tensor_2d(ctx, tk, D * n_head_kv, n_ctx);
    ggml_tensor * vcache = ggml_new_tensor_2d(ctx, tv, D * n_head_kv, n_ctx);
    ggml_set_name(kcache, "k_cache");
    ggml_set_name(vcache, "v_cache");
    k = ggml_view_3d(ctx, kcache, D, n_kv, n_head_kv, kcache->nb[1], ggml_row_size(tk, D), 0);
    v = ggml_view_3d(ctx, vcache, D, n_kv, n_head_kv, vcache->nb[1], ggml_row_size(tv, D), 0);
}

inline std::vector<backend_case> backend_cases() {
    std::vector<backend_case> cases;
    auto add = [&](const std::string & group, const std::string & name, double nmse,
                   std::function<ggml_tensor *(ggml_context *)> build, double gpu_nmse = 0) {
        for (const backend_case & c : cases)
            if (c.name == group + " " + name) return; // shapes that coincide (e.g. ne0 = 1 broadcasts)
        cases.push_back({group, group + " " + name, std::move(build), nmse, gpu_nmse});
    };
    const int64_t sizes[] = {1, 7, 33, 4097};
    const backend_layout layouts[] = {BACKEND_LAYOUT_CONT, BACKEND_LAYOUT_TRANSPOSED, BACKEND_LAYOUT_PERMUTED,
                                      BACKEND_LAYOUT_OFFSET};
    auto tol = [](ggml_type t) { return t == GGML_TYPE_F16 ? BACKEND_NMSE_F16 : BACKEND_NMSE_F32; };

    // ADD / MUL: b broadcast over a; a of any layout and f32/f16, b f32 of any layout
    for (ggml_op op : {GGML_OP_ADD, GGML_OP_MUL}) {
        const std::string g = op == GGML_OP_ADD ? "add" : "mul";
        auto mk = [op](ggml_context * ctx, ggml_tensor * a, ggml_tensor * b) {
            return op == GGML_OP_ADD ? ggml_add(ctx, a, b) : ggml_mul(ctx, a, b);
        };
        for (int64_t n0 : sizes) {
            const int64_t ne[4] = {n0, 3, 2, 2};
            // b shapes: same, row, row per dim 2, per-column broadcast, scalar
            const int64_t bnes[][4] = {{n0, 3, 2, 2}, {n0, 1, 1, 1}, {n0, 1, 2, 1}, {1, 3, 1, 2}, {1, 1, 1, 1}};
            for (const auto & bne : bnes) {
                for (backend_layout la : layouts) {
                    for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                        if (ta == GGML_TYPE_F16 && la != BACKEND_LAYOUT_CONT && la != BACKEND_LAYOUT_TRANSPOSED)
                            continue;
                        const std::string nm = std::string(ggml_type_name(ta)) + " a" + backend_shape_str(ne) + " " +
                                               backend_layout_name(la) + " b" + backend_shape_str(bne);
                        add(g, nm, tol(ta), [=](ggml_context * ctx) {
                            ggml_tensor * a = backend_case_input(ctx, ta, ne, la, "a");
                            ggml_tensor * b = backend_case_input(ctx, GGML_TYPE_F32, bne, BACKEND_LAYOUT_CONT, "b");
                            return mk(ctx, a, b);
                        });
                    }
                }
            }
            // non-contiguous b
            const int64_t bne[4] = {n0, 3, 1, 2};
            for (backend_layout lb : layouts) {
                add(g, "f32 a" + backend_shape_str(ne) + " b" + backend_shape_str(bne) + " " + backend_layout_name(lb),
                    BACKEND_NMSE_F32, [=](ggml_context * ctx) {
                        ggml_tensor * a = backend_case_input(ctx, GGML_TYPE_F32, ne, BACKEND_LAYOUT_CONT, "a");
                        ggml_tensor * b = backend_case_input(ctx, GGML_TYPE_F32, bne, lb, "b");
                        return mk(ctx, a, b);
                    });
            }
        }
        // b repeated along ne0 (ne0 12 = 3 x 4)
        add(g, "f32 a[12,5,1,1] b[4,5,1,1]", BACKEND_NMSE_F32, [=](ggml_context * ctx) {
            const int64_t ne[4] = {12, 5, 1, 1}, bne[4] = {4, 5, 1, 1};
            return mk(ctx, backend_case_input(ctx, GGML_TYPE_F32, ne, BACKEND_LAYOUT_CONT, "a"),
                      backend_case_input(ctx, GGML_TYPE_F32, bne, BACKEND_LAYOUT_CONT, "b"));
        });
    }

    // SCALE / SILU / SWIGLU / RMS_NORM: elementwise or per-row, any layout, f32/f16
    for (const char * g : {"scale", "silu", "swiglu", "rms_norm"}) {
        const std::string gs = g;
        for (int64_t n0 : sizes) {
            for (int64_t n1 : {int64_t(1), int64_t(5)}) {
                const int64_t ne[4] = {n0, n1, 3, 2};
                for (backend_layout la : layouts) {
                    for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                        if (ta == GGML_TYPE_F16 && la == BACKEND_LAYOUT_PERMUTED) continue;
                        const std::string nm = std::string(ggml_type_name(ta)) + " " + backend_shape_str(ne) + " " +
                                               backend_layout_name(la);
                        add(gs, nm, tol(ta), [=](ggml_context * ctx) -> ggml_tensor * {
                            ggml_tensor * a = backend_case_input(ctx, ta, ne, la, "a");
                            if (gs == "scale") return ggml_scale(ctx, a, 0.37f);
                            if (gs == "silu") return ggml_silu(ctx, a);
                            if (gs == "rms_norm") return ggml_rms_norm(ctx, a, n0 == 1 ? 1e-2f : 1e-6f);
                            // swiglu: b in a different layout than a
                            const backend_layout lb =
                                la == BACKEND_LAYOUT_CONT ? BACKEND_LAYOUT_OFFSET : BACKEND_LAYOUT_CONT;
                            return ggml_swiglu_split(ctx, a, backend_case_input(ctx, ta, ne, lb, "b"));
                        });
                    }
                }
            }
        }
    }

    // SOFT_MAX: scale, optional mask (f32/f16, taller than a, broadcast over dims 2,3), causal; row lengths for
    // each register width of the CUDA warp-per-row kernel (<= 128, 256, 512, 1024) and the block kernel beyond
    for (int64_t n0 : {int64_t(1), int64_t(7), int64_t(33), int64_t(200), int64_t(513), int64_t(1000), int64_t(4097)}) {
        for (int64_t n1 : {int64_t(1), int64_t(6)}) {
            const int64_t ne[4] = {n0, n1, 4, 2};
            for (int mask_kind = 0; mask_kind < 4; ++mask_kind) { // none, f32 bcast, f16 bcast, f32 per dim 2
                for (int n_past : {-1, 0, 3}) {
                    for (backend_layout la : {BACKEND_LAYOUT_CONT, BACKEND_LAYOUT_PERMUTED, BACKEND_LAYOUT_OFFSET}) {
                        if (la != BACKEND_LAYOUT_CONT && (mask_kind == 3 || n_past == 3)) continue;
                        const char * mk[] = {"no mask", "mask f32", "mask f16", "mask f32 [.,.,4,1]"};
                        const std::string nm = backend_shape_str(ne) + " " + backend_layout_name(la) + " " +
                                               mk[mask_kind] + " causal " + std::to_string(n_past);
                        add("soft_max", nm, mask_kind == 2 ? BACKEND_NMSE_F16 : BACKEND_NMSE_F32,
                            [=](ggml_context * ctx) {
                                ggml_tensor * a = backend_case_input(ctx, GGML_TYPE_F32, ne, la, "a");
                                ggml_tensor * m = nullptr;
                                if (mask_kind > 0) {
                                    const int64_t mne[4] = {n0, n1 + 2, mask_kind == 3 ? 4 : 1, 1};
                                    m = backend_case_input(ctx, mask_kind == 2 ? GGML_TYPE_F16 : GGML_TYPE_F32, mne,
                                                           BACKEND_LAYOUT_CONT, "mask");
                                }
                                if (n_past < 0) return ggml_soft_max_ext(ctx, a, m, 0.8f);
                                if (!m) return ggml_soft_max_causal(ctx, a, 0.8f, n_past);
                                ggml_tensor * t = ggml_soft_max_ext(ctx, a, m, 0.8f); // mask + causal together
                                ggml_set_op_params_i32(t, 1, n_past);
                                return t;
                            });
                    }
                }
            }
        }
    }

    // DIAG_MASK_INF
    for (int64_t n0 : {int64_t(1), int64_t(7), int64_t(33)}) {
        for (int n_past : {0, 2}) {
            for (backend_layout la : layouts) {
                for (ggml_type ta : {GGML_TYPE_F32, GGML_TYPE_F16}) {
                    const int64_t ne[4] = {n0, 9, 2, 1};
                    const std::string nm = std::string(ggml_type_name(ta)) + " " + backend_shape_str(ne) + " " +
                                           backend_layout_name(la) + " n_past " + std::to_string(n_past);
                    add("diag_mask_inf", nm, BACKEND_NMSE_EXACT, [=](ggml_context * ctx) {
                        return ggml_diag_mask_inf(ctx, backend_case_input(ctx, ta, ne, la, "a"), n_past);
                    });
                }
            }
        }
    }

    // ROPE: both modes, partial n_dims, freq factors, f16, a view of a fused QKV
    struct rope_cfg {
        int64_t head_dim, n_head, n_tokens;
        int n_dims;
        float base, fscale;
    };
    const rope_cfg rcfgs[] = {{64, 4, 5, 64, 10000.0f, 1.0f},
                              {128, 3, 7, 64, 500000.0f, 1.0f},
                              {6, 2, 3, 4, 10000.0f, 0.25f},
                              {2, 1, 1, 2, 10000.0f, 1.0f},
                              {80, 2, 33, 32, 10000.0f, 0.5f},
                              {128, 11, 9, 128, 10000.0f, 1.0f}}; // heads in CUDA's groups of 8 and a partial one
    for (const rope_cfg & rc : rcfgs) {
        for (int mode : {GGML_ROPE_TYPE_NORMAL, GGML_ROPE_TYPE_NEOX}) {
            for (bool ff : {false, true}) {
                for (int lay = 0; lay < 3; ++lay) { // 0 cont f32, 1 f16, 2 view of fused qkv
                    const std::string nm = "hd " + std::to_string(rc.head_dim) + " heads " + std::to_string(rc.n_head) +
                                           " tokens " + std::to_string(rc.n_tokens) + " n_dims " +
                                           std::to_string(rc.n_dims) + (mode ? " neox" : " normal") +
                                           (ff ? " ff" : "") +
                                           (lay == 0   ? " f32"
                                            : lay == 1 ? " f16"
                                                       : " qkv-view");
                    add("rope", nm, lay == 1 ? BACKEND_NMSE_F16 : BACKEND_NMSE_F32, [=](ggml_context * ctx) {
                        ggml_tensor * a;
                        if (lay == 2) {
                            // [head_dim * (n_head + 2 * n_head), n_tokens]; take the K part
                            ggml_tensor * qkv =
                                ggml_new_tensor_2d(ctx, GGML_TYPE_F32, rc.head_dim * rc.n_head * 3, rc.n_tokens);
                            ggml_set_name(qkv, "qkv");
                            a = ggml_view_3d(ctx, qkv, rc.head_dim, rc.n_head, rc.n_tokens, rc.head_dim * 4, qkv->nb[1],
                                             rc.head_dim * rc.n_head * 4);
                        } else {
                            a = ggml_new_tensor_3d(ctx, lay == 1 ? GGML_TYPE_F16 : GGML_TYPE_F32, rc.head_dim,
                                                   rc.n_head, rc.n_tokens);
                            ggml_set_name(a, "a");
                        }
                        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, rc.n_tokens);
                        ggml_set_name(pos, "pos");
                        ggml_tensor * f = nullptr;
                        if (ff) {
                            f = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, rc.n_dims / 2);
                            ggml_set_name(f, "ff");
                        }
                        return ggml_rope_ext(ctx, a, pos, f, rc.n_dims, mode, rc.base, rc.fscale);
                    });
                }
            }
        }
    }
    // ROPE at Llama 3.1 long-context positions (65536 .. 131071), with and without freq factors (rope_freqs)
    for (bool ff : {false, true}) {
        for (int64_t n_dims : {int64_t(64), int64_t(128)}) {
            const std::string nm = "hd 128 heads 4 tokens 9 n_dims " + std::to_string(n_dims) + " normal" +
                                   (ff ? " ff" : "") + " f32 positions 64k+";
            add("rope", nm, BACKEND_NMSE_F32, [=](ggml_context * ctx) {
                ggml_tensor * a = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, 128, 4, 9);
                ggml_set_name(a, "a");
                ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 9);
                ggml_set_name(pos, "posbig");
                ggml_tensor * f = nullptr;
                if (ff) {
                    f = ggml_new_tensor_1d(ctx, GGML_TYPE_F32, n_dims / 2);
                    ggml_set_name(f, "ff");
                }
                return ggml_rope_ext(ctx, a, pos, f, (int)n_dims, GGML_ROPE_TYPE_NORMAL, 500000.0f, 1.0f);
            });
        }
    }

    // ARGMAX: ties (first wins), odd sizes, transposed input
    for (int64_t n0 : sizes) {
        for (backend_layout la : {BACKEND_LAYOUT_CONT, BACKEND_LAYOUT_TRANSPOSED, BACKEND_LAYOUT_OFFSET}) {
            for (bool ties : {false, true}) {
                const int64_t ne[4] = {n0, 13, 1, 1};
                add("argmax", backend_shape_str(ne) + " " + backend_layout_name(la) + (ties ? " ties" : ""),
                    BACKEND_NMSE_EXACT, [=](ggml_context * ctx) {
                        return ggml_argmax(ctx, backend_case_input(ctx, GGML_TYPE_F32, ne, la, ties ? "ties" : "a"));
                    });
            }
        }
    }
    // ... over vocabulary-sized rows (CUDA: 16-byte loads, several in flight, where rows are dense and n % 4 == 0)
    for (int64_t n0 : {4100, 32000, 128256}) {
        for (bool ties : {false, true}) {
            const int64_t ne[4] = {n0, 3, 1, 1};
            add("argmax", backend_shape_str(ne) + " vocab" + (ties ? " ties" : ""), BACKEND_NMSE_EXACT,
                [=](ggml_context * ctx) {
                    return ggml_argmax(ctx, backend_case_input(ctx, GGML_TYPE_F32, ne, BACKEND_LAYOUT_CONT,
                                                               ties ? "ties" : "a"));
                });
        }
    }

    // KQ_MASK: the attention mask from cells and tokens, odd cell counts, 1 / 3 / 64 tokens, f16 and f32
    for (int64_t n_kv : {1, 17, 255, 4100}) {
        for (int64_t n_tok : {1, 3, 64}) {
            for (ggml_type t : {GGML_TYPE_F16, GGML_TYPE_F32}) {
                add("kq_mask", std::string(ggml_type_name(t)) + " n_kv " + std::to_string(n_kv) + " tokens " +
                                   std::to_string(n_tok),
                    BACKEND_NMSE_EXACT, [=](ggml_context * ctx) {
                        ggml_tensor * cells = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 3, n_kv);
                        ggml_tensor * seq = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tok);
                        ggml_tensor * pos = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_tok);
                        ggml_set_name(cells, "kvcells");
                        ggml_set_name(seq, "seqid");
                        ggml_set_name(pos, "pos");
                        return ggml_kq_mask(ctx, cells, seq, pos, t);
                    });
            }
        }
    }

    // SET_ROWS: rows scattered into f32/f16 destinations that are plain, transposed (the transposed V cache:
    // each "row" is a column) or offset views; sources plain or transposed; the row ids broadcast over dim 2
    for (int64_t n0 : sizes) {
        for (ggml_type td : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (backend_layout ld : {BACKEND_LAYOUT_CONT, BACKEND_LAYOUT_TRANSPOSED, BACKEND_LAYOUT_OFFSET}) {
                for (backend_layout lb : {BACKEND_LAYOUT_CONT, BACKEND_LAYOUT_TRANSPOSED}) {
                    for (int64_t n : {1, 3}) {
                        const int64_t nd[4] = {n0, 2 * n + 1, 2, 1}, nbs[4] = {n0, n, 2, 1};
                        const std::string nm = std::string(ggml_type_name(td)) + " dst " + backend_shape_str(nd) + " " +
                                               backend_layout_name(ld) + " src " + backend_shape_str(nbs) + " " +
                                               backend_layout_name(lb);
                        add("set_rows", nm, tol(td), [=](ggml_context * ctx) {
                            ggml_tensor * a = backend_case_input(ctx, td, nd, ld, "a");
                            ggml_tensor * b = backend_case_input(ctx, GGML_TYPE_F32, nbs, lb, "b");
                            ggml_tensor * c = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
                            ggml_set_name(c, "rowids");
                            return ggml_set_rows(ctx, a, b, c);
                        });
                    }
                }
            }
        }
    }
    // SET_ROWS into q8_0/q4_0 caches (each written row quantized as the reference quantizer does; the other rows
    // untouched): the whole cache, or a view one block in (a head's columns of a cache row); sources plain or
    // transposed; rows of 1 to 128 heads of 32..128 dims (n0 = head_dim x n_head_kv: 96 = 3 x 32, 192 = 3 x 64,
    // 480 = 5 x 96, 1024 = 8 x 128); odd row counts; the row ids broadcast over dim 2. Exact: the reference quantizes
    // with quantize_row_*_ref and a kernel must write the same bytes (CUDA: cpy.cuh's block quantizers). The index
    // tensor is always a contiguous i32 vector (ggml_set_rows asserts it).
    for (ggml_type td : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (int64_t n0 : {int64_t(32), int64_t(96), int64_t(192), int64_t(480), int64_t(1024), int64_t(4096)}) {
            for (bool view : {false, true}) {
                for (backend_layout lb : {BACKEND_LAYOUT_CONT, BACKEND_LAYOUT_TRANSPOSED}) {
                    for (int64_t n : {1, 3, 7, 255}) {
                        if (n == 255 && (n0 != 1024 || view || lb != BACKEND_LAYOUT_CONT)) continue; // a prompt's store
                        const int64_t nd[4] = {n0, 2 * n + 1, 2, 1}, nbs[4] = {n0, n, 2, 1};
                        const std::string nm = std::string(ggml_type_name(td)) + " dst " + backend_shape_str(nd) +
                                               (view ? " block-offset view" : " cont") + " src " +
                                               backend_shape_str(nbs) + " " + backend_layout_name(lb);
                        add("set_rows", nm, BACKEND_NMSE_EXACT, [=](ggml_context * ctx) {
                            ggml_tensor * a;
                            if (view) {
                                ggml_tensor * leaf = ggml_new_tensor_4d(ctx, td, n0 + 32, nd[1] + 1, nd[2], nd[3]);
                                ggml_set_name(leaf, "a");
                                a = ggml_view_4d(ctx, leaf, n0, nd[1], nd[2], nd[3], leaf->nb[1], leaf->nb[2],
                                                 leaf->nb[3], leaf->nb[1] + ggml_type_size(td));
                            } else {
                                a = ggml_new_tensor_4d(ctx, td, nd[0], nd[1], nd[2], nd[3]);
                                ggml_set_name(a, "a");
                            }
                            ggml_tensor * b = backend_case_input(ctx, GGML_TYPE_F32, nbs, lb, "b");
                            ggml_tensor * c = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
                            ggml_set_name(c, "rowids");
                            return ggml_set_rows(ctx, a, b, c);
                        });
                    }
                }
            }
        }
    }

    // FLASH_ATTN_EXT: GQA, f16 K/V as strided views of a KV cache, masks, causal
    struct fa_cfg {
        int64_t D, n_tokens, n_head, n_head_kv, n_kv;
    };
    const fa_cfg fcfgs[] = {
        {64, 1, 8, 2, 33}, {64, 7, 8, 2, 256}, {128, 3, 4, 4, 1}, {32, 5, 8, 8, 40}, {64, 1, 8, 8, 300}};
    for (const fa_cfg & fc : fcfgs) {
        for (ggml_type tkv : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (int mask_kind = 0; mask_kind < 3; ++mask_kind) { // none, f32, f16
                for (bool causal : {false, true}) {
                    for (bool cache_view : {false, true}) {
                        if (cache_view && mask_kind == 2) continue;
                        const std::string nm = "D " + std::to_string(fc.D) + " tokens " + std::to_string(fc.n_tokens) +
                                               " heads " + std::to_string(fc.n_head) + "/" +
                                               std::to_string(fc.n_head_kv) + " n_kv " + std::to_string(fc.n_kv) +
                                               " kv " + ggml_type_name(tkv) +
                                               (mask_kind == 0   ? ""
                                                : mask_kind == 1 ? " mask f32"
                                                                 : " mask f16") +
                                               (causal ? " causal" : "") + (cache_view ? " cache-view" : "");
                        add("flash_attn_ext", nm,
                            tkv == GGML_TYPE_F16 || mask_kind == 2 ? BACKEND_NMSE_F16 : BACKEND_NMSE_F32,
                            [=](ggml_context * ctx) {
                                ggml_tensor * q = fa_case_q(ctx, fc.D, fc.n_head, fc.n_tokens);
                                ggml_tensor *k, *v;
                                if (cache_view) {
                                    fa_case_kv_cache(ctx, fc.D, fc.n_head_kv, fc.n_kv, tkv, tkv, k, v);
                                } else {
                                    k = ggml_new_tensor_3d(ctx, tkv, fc.D, fc.n_kv, fc.n_head_kv);
                                    v = ggml_new_tensor_3d(ctx, tkv, fc.D, fc.n_kv, fc.n_head_kv);
                                    ggml_set_name(k, "k");
                                    ggml_set_name(v, "v");
                                }
                                ggml_tensor * m = nullptr;
                                if (mask_kind) {
                                    m = ggml_new_tensor_2d(ctx, mask_kind == 2 ? GGML_TYPE_F16 : GGML_TYPE_F32, fc.n_kv,
                                                           fc.n_tokens + 1);
                                    ggml_set_name(m, "mask");
                                }
                                const int n_past = causal ? (int)(fc.n_kv - fc.n_tokens) : -1;
                                return ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt((float)fc.D),
                                                           n_past < 0 && causal ? 0 : n_past);
                            });
                    }
                }
            }
        }
    }

    // FLASH_ATTN_EXT on KV-cache types: K and V f16, q8_0, q4_0 (and mixed), read in place from views of
    // [D * n_head_kv, n_ctx] caches; head sizes 64, 80 (not a multiple of the 32-block: f16 only), 96, 128; GQA
    // 1, 4, 8; 1, 17 (decode: one token), 255 keys, 4097 for a few (KV split across threads); with and without a
    // mask. Tolerances against the float64 reference of the same (dequantized) K/V: the kernel's own error only
    // (f32 sums; with a quantized K, blocks of under 5 query rows dot K in its integer format against q8_1 queries).
    struct fa_kv_cfg {
        int64_t D, ratio, n_head_kv, n_kv, n_tokens;
        ggml_type tk, tv;
        int mask; // 0 none, 1 f32, 2 f16 + causal n_past, 3 f16
    };
    std::vector<fa_kv_cfg> kcfgs;
    const std::pair<ggml_type, ggml_type> kv_types[] = {{GGML_TYPE_F16, GGML_TYPE_F16},
                                                        {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0},
                                                        {GGML_TYPE_Q4_0, GGML_TYPE_Q4_0},
                                                        {GGML_TYPE_Q8_0, GGML_TYPE_F16},
                                                        {GGML_TYPE_F16, GGML_TYPE_Q4_0}};
    for (int64_t D : {64, 80, 96, 128}) {
        for (auto [tk, tv] : kv_types) {
            if (D % 32 != 0 && (tk != GGML_TYPE_F16 || tv != GGML_TYPE_F16)) continue;
            for (int64_t ratio : {1, 4, 8}) {
                for (int64_t n_kv : {1, 17, 255}) {
                    for (int mask : {0, 1})
                        kcfgs.push_back({D, ratio, 2, n_kv, n_kv == 17 ? 1 : 3, tk, tv, mask});
                }
            }
        }
    }
    kcfgs.push_back({128, 8, 1, 4097, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 1});
    kcfgs.push_back({64, 4, 2, 4097, 2, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, 1});
    kcfgs.push_back({80, 1, 2, 4097, 1, GGML_TYPE_F16, GGML_TYPE_F16, 0});
    kcfgs.push_back({96, 4, 1, 4097, 5, GGML_TYPE_Q8_0, GGML_TYPE_F16, 2});
    kcfgs.push_back({40, 4, 2, 255, 3, GGML_TYPE_F16, GGML_TYPE_F16, 1}); // D not a multiple of 16 (tails)
    // f16 decode at depth on the tensor-core decode kernel: GQA 1/4/8, 1-16 rows per kv head, KV splits with ragged
    // 16-key tiles, staged (16-byte rows) and unstaged masks, causal limits
    kcfgs.push_back({128, 4, 2, 4097, 1, GGML_TYPE_F16, GGML_TYPE_F16, 2});
    kcfgs.push_back({128, 8, 1, 5001, 2, GGML_TYPE_F16, GGML_TYPE_F16, 1});
    kcfgs.push_back({64, 1, 4, 4099, 16, GGML_TYPE_F16, GGML_TYPE_F16, 2});
    kcfgs.push_back({96, 4, 2, 4097, 4, GGML_TYPE_F16, GGML_TYPE_F16, 1});
    kcfgs.push_back({80, 8, 1, 4097, 1, GGML_TYPE_F16, GGML_TYPE_F16, 2});
    kcfgs.push_back({128, 1, 8, 4096, 1, GGML_TYPE_F16, GGML_TYPE_F16, 1});
    kcfgs.push_back({128, 4, 2, 4096, 3, GGML_TYPE_F16, GGML_TYPE_F16, 2});
    // decode at depth with each GQA ratio and the mixed types; a few tokens per step (parallel sequences: one mask
    // row per token); prompts of 9, 64 and 512 tokens on quantized caches
    kcfgs.push_back({96, 8, 1, 4097, 1, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, 2});
    kcfgs.push_back({64, 1, 4, 4097, 1, GGML_TYPE_F16, GGML_TYPE_Q8_0, 0});
    kcfgs.push_back({128, 4, 2, 4097, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, 2});
    kcfgs.push_back({128, 1, 2, 4097, 1, GGML_TYPE_Q4_0, GGML_TYPE_F16, 1});
    kcfgs.push_back({128, 4, 2, 255, 2, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 2});
    kcfgs.push_back({64, 2, 2, 17, 3, GGML_TYPE_Q4_0, GGML_TYPE_F16, 1});
    kcfgs.push_back({128, 4, 2, 255, 9, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 2});
    kcfgs.push_back({64, 1, 4, 4097, 9, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, 1});
    kcfgs.push_back({128, 8, 1, 4097, 64, GGML_TYPE_Q8_0, GGML_TYPE_F16, 2});
    kcfgs.push_back({96, 1, 2, 1000, 64, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, 1});
    kcfgs.push_back({128, 4, 2, 600, 512, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 2});
    kcfgs.push_back({64, 8, 1, 512, 512, GGML_TYPE_F16, GGML_TYPE_Q4_0, 2});
    // a q8_0 K and V with 2-16 rows per kv head: the tensor-core decode kernel (q8_0 rows staged in shared memory;
    // up to 8 rows K dotted in int8, 9-16 rows K widened to f16; V widened; fattn-mma.cu), D 64 and 128, KV splits
    // with ragged tiles, staged / unstaged / no masks
    kcfgs.push_back({128, 4, 2, 4097, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 2});
    kcfgs.push_back({64, 8, 1, 5001, 2, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 1});
    kcfgs.push_back({128, 2, 4, 4096, 3, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 0});
    kcfgs.push_back({128, 4, 2, 17, 4, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 2});
    kcfgs.push_back({64, 1, 4, 4099, 16, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 2});
    // one token, no causal limit (the decode graph's form: the mask alone): the decode kernel's lean tiles (copies by
    // row strides, 16-byte q8_0 pieces where the row strides allow: 2 and 4 kv heads, rows starting 0, 4, 8 or 12
    // bytes into a piece; 1 kv head of D 128 (136-byte rows) the 8-byte pieces), the mask from registers; ragged
    // split and tile ends
    kcfgs.push_back({128, 4, 2, 4097, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 1});
    kcfgs.push_back({128, 8, 1, 5001, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 3});
    kcfgs.push_back({64, 4, 4, 4099, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 3});
    kcfgs.push_back({128, 2, 4, 2051, 1, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 0});
    kcfgs.push_back({128, 4, 2, 5001, 1, GGML_TYPE_F16, GGML_TYPE_F16, 1});
    kcfgs.push_back({64, 8, 2, 4099, 1, GGML_TYPE_F16, GGML_TYPE_F16, 3});
    kcfgs.push_back({96, 4, 2, 2051, 1, GGML_TYPE_F16, GGML_TYPE_F16, 3});
    for (const fa_kv_cfg & kc : kcfgs) {
        const bool kq = kc.tk != GGML_TYPE_F16;
        const std::string nm = "D " + std::to_string(kc.D) + " tokens " + std::to_string(kc.n_tokens) + " heads " +
                               std::to_string(kc.n_head_kv * kc.ratio) + "/" + std::to_string(kc.n_head_kv) + " n_kv " +
                               std::to_string(kc.n_kv) + " k " + ggml_type_name(kc.tk) + " v " + ggml_type_name(kc.tv) +
                               (kc.mask == 1   ? " mask f32"
                                : kc.mask == 2 ? " mask f16 causal"
                                : kc.mask == 3 ? " mask f16"
                                               : "") +
                               " cache-view";
        // The kernel works on blocks of up to 16 query rows of one KV head. f32 math (K and V widened): f32 rounding
        // only (measured <= 1.2e-12). A quantized K in a block of at most 4 rows is dotted in its integer format
        // against q8_1-rounded queries (measured <= 1.6e-6). A wrong block, nibble, scale, mask or tile bound gives
        // 1e-7 (a 0.1% score scale) to 1.
        const int64_t rows = kc.ratio * kc.n_tokens, last_block = rows % 16 ? rows % 16 : 16;
        const double tol = kq && std::min<int64_t>(rows, last_block) <= 4 ? 2e-5 : 1e-10;
        // CUDA against the CPU. Up to 8 query rows per KV head (decode, fattn-vecq.cuh): a quantized K is dotted as
        // integers against the query rounded to int8 per 32 dims (as the CPU's q8_1 rows; the two roundings differ,
        // so up to twice the error: 2e-5), an f16 K in f32 (f32 rounding and exp2.approx: 1e-9). More rows (prompts):
        // the tensor-core kernel on an f16 copy of the K/V views, q and the softmax weights in f16, and the K/V
        // values rounded to f16 (d x q needs up to 19 bits): 1e-6.
        // f16 K/V with up to 16 rows and D 64-128: the tensor-core decode kernel (fattn-mma.cu; q and the softmax
        // weights in f16, as the prompt kernel): 1e-6. The same kernel on a q8_0 K/V (2-16 rows, D 64 / 128) against
        // the CPU's q8_1 query (up to 4 rows per block): 2e-5, else 1e-6 (the CPU widens K to f32).
        const bool mma_dec = !kq && kc.tv == GGML_TYPE_F16 && kc.D % 16 == 0 && kc.D <= 128 && rows <= 16;
        const double gpu_tol = rows > 8 || mma_dec ? 1e-6 : kq ? 2e-5 : kc.tv != GGML_TYPE_F16 ? 1e-9 : 0.0;
        add(
            "flash_attn_ext", nm, tol,
            [=](ggml_context * ctx) {
                ggml_tensor * q = fa_case_q(ctx, kc.D, kc.n_head_kv * kc.ratio, kc.n_tokens);
                ggml_tensor *k, *v;
                fa_case_kv_cache(ctx, kc.D, kc.n_head_kv, kc.n_kv, kc.tk, kc.tv, k, v);
                ggml_tensor * m = nullptr;
                if (kc.mask) {
                    m = ggml_new_tensor_2d(ctx, kc.mask == 1 ? GGML_TYPE_F32 : GGML_TYPE_F16, kc.n_kv, kc.n_tokens);
                    ggml_set_name(m, "mask");
                }
                const int n_past = kc.mask == 2 ? (int)(kc.n_kv - kc.n_tokens) : -1;
                return ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt((float)kc.D), n_past);
            },
            // CUDA (f16 K/V, more than 8 query rows: tensor-core attention with q and the softmax weights in f16,
            // measured 4-5e-8 against the CPU)
            gpu_tol);
    }

    // FLASH_ATTN_EXT over a cache shared by several sequences (ggml_flash_attn_ext_set_seqs(n_seq, shared)): a
    // "seqmask" (each token sees its sequence's part of the keys). Kernels that take each token's visible key range
    // from the mask and skip the rest: one decode block per token (about one token per sequence), the tensor-core
    // kernel over the union of its tokens' ranges (prompts), the decode kernel over the union (few tokens). The
    // hints do not change the result: the tolerances are those of the same kernels without them.
    struct fa_seq_cfg {
        int64_t D, ratio, n_head_kv, n_kv, n_tokens, n_seq;
        ggml_type tkv;
        bool runs = false; // "tokmask": each token's keys one run (exact ranges: no mask reads in the decode blocks)
    };
    const fa_seq_cfg scfgs[] = {{128, 4, 2, 4097, 64, 40, GGML_TYPE_F16},  {64, 1, 4, 1000, 24, 24, GGML_TYPE_F16},
                                {128, 8, 1, 2048, 9, 9, GGML_TYPE_F16},    {128, 4, 2, 3000, 512, 1, GGML_TYPE_F16},
                                {64, 1, 4, 700, 100, 2, GGML_TYPE_F16},    {128, 4, 2, 4097, 2, 2, GGML_TYPE_F16},
                                {128, 4, 2, 1500, 33, 33, GGML_TYPE_Q8_0}, {96, 1, 2, 777, 17, 17, GGML_TYPE_F32},
                                {128, 1, 4, 600, 40, 40, GGML_TYPE_F16},   {128, 1, 4, 900, 40, 40, GGML_TYPE_F16, true},
                                {128, 4, 2, 1203, 20, 20, GGML_TYPE_F16, true}, {64, 1, 3, 251, 21, 21, GGML_TYPE_F16, true},
                                {256, 4, 2, 333, 12, 12, GGML_TYPE_F16, true}, {128, 8, 1, 700, 12, 12, GGML_TYPE_F16, true},
                                {256, 1, 2, 500, 12, 12, GGML_TYPE_F16},       {64, 1, 2, 300, 33, 33, GGML_TYPE_F16, true},
                                // q8_0 / q4_0 caches: the per-token blocks read them in place (fattn-vecq.cuh)
                                {128, 1, 4, 900, 40, 40, GGML_TYPE_Q8_0, true}, {128, 1, 4, 600, 40, 40, GGML_TYPE_Q4_0},
                                {96, 2, 2, 777, 17, 17, GGML_TYPE_Q8_0},       {64, 8, 1, 700, 12, 12, GGML_TYPE_Q4_0, true},
                                {64, 1, 3, 251, 64, 21, GGML_TYPE_Q8_0, true}};
    for (const fa_seq_cfg & sc : scfgs) {
        const std::string nm = "D " + std::to_string(sc.D) + " tokens " + std::to_string(sc.n_tokens) + " of " +
                               std::to_string(sc.n_seq) + " sequences, heads " +
                               std::to_string(sc.n_head_kv * sc.ratio) + "/" + std::to_string(sc.n_head_kv) + " n_kv " +
                               std::to_string(sc.n_kv) + " kv " + ggml_type_name(sc.tkv) + " shared cache" +
                               (sc.runs ? ", one run of keys per token" : "");
        // CPU against float64: f32 sums of exact values (a q8_0 / q4_0 K dotted against q8_1 rows: 2e-5, as above).
        // CUDA against the CPU: 1e-6, the bound of the tensor-core kernel (f16 q and weights); the f16 decode kernels
        // stay far below it; a q8_0 / q4_0 cache in the per-token decode blocks (at most 8 query rows per kv head) is
        // dotted as integers against the query rounded to int8 per 32 dims: 2e-5, as the decode cases above. A block
        // reading a wrong key range is off by O(1).
        const bool kq = sc.tkv == GGML_TYPE_Q8_0 || sc.tkv == GGML_TYPE_Q4_0;
        add(
            "flash_attn_ext", nm, kq ? 2e-5 : 1e-10,
            [=](ggml_context * ctx) {
                ggml_tensor * q = fa_case_q(ctx, sc.D, sc.n_head_kv * sc.ratio, sc.n_tokens);
                ggml_tensor *k, *v;
                fa_case_kv_cache(ctx, sc.D, sc.n_head_kv, sc.n_kv, sc.tkv, sc.tkv, k, v);
                ggml_tensor * m = ggml_new_tensor_2d(ctx, GGML_TYPE_F16, sc.n_kv, sc.n_tokens);
                ggml_set_name(m, sc.runs ? "tokmask" : "seqmask");
                ggml_tensor * fa = ggml_flash_attn_ext(ctx, q, k, v, m, 1.0f / std::sqrt((float)sc.D), -1);
                ggml_flash_attn_ext_set_seqs(fa, (int)sc.n_seq, true);
                return fa;
            },
            kq ? 2e-5 : 1e-6);
    }
    return cases;
}

// ---- one case on one backend ----------------------------------------------------------------------
// Builds the case in a no_alloc context, allocates every tensor in one buffer of the backend,
// sets the leaves (backend_case_leaf_data) and poisons every op output with 0xFF bytes (NaN for
// f32/f16, -1 for i32) so an element a kernel fails to write is caught.
struct backend_case_graph {
    ggml_context * ctx = nullptr;
    ggml_backend_buffer_t buf = nullptr;
    ggml_cgraph * gf = nullptr;
    ggml_tensor * out = nullptr;

    backend_case_graph(const backend_case & c, ggml_backend_t backend) {
        ggml_init_params ip = {ggml_tensor_overhead() * 64 + ggml_graph_overhead_custom(GGML_DEFAULT_GRAPH_SIZE),
                               nullptr, true};
        ctx = ggml_init(ip);
        out = c.build(ctx);
        ggml_set_output(out);
        gf = ggml_new_graph(ctx);
        ggml_build_forward_expand(gf, out);
        buf = ggml_backend_alloc_ctx_tensors(ctx, backend);
        GGML_ASSERT(buf && "backend_case_graph: allocation failed");
        const uint64_t seed = backend_case_seed(c);
        for (ggml_tensor * t = ggml_get_first_tensor(ctx); t; t = ggml_get_next_tensor(ctx, t)) {
            if (t->view_src) continue;
            if (t->op == GGML_OP_NONE) {
                const std::vector<uint8_t> bytes = backend_case_leaf_data(t, seed);
                GGML_ASSERT(bytes.size() == ggml_nbytes(t));
                ggml_backend_tensor_set(t, bytes.data(), 0, bytes.size());
            } else {
                const std::vector<uint8_t> poison(ggml_nbytes(t), 0xFF);
                ggml_backend_tensor_set(t, poison.data(), 0, poison.size());
            }
        }
    }
    ~backend_case_graph() {
        ggml_backend_buffer_free(buf);
        ggml_free(ctx);
    }
    backend_case_graph(const backend_case_graph &) = delete;
    backend_case_graph & operator=(const backend_case_graph &) = delete;

    ggml_status compute(ggml_backend_t backend) {
        const ggml_status st = ggml_backend_graph_compute(backend, gf);
        ggml_backend_synchronize(backend);
        return st;
    }
    // the output's values in ne order
    std::vector<double> output() const {
        std::vector<uint8_t> bytes(ggml_nbytes(out));
        ggml_backend_tensor_get(out, bytes.data(), 0, bytes.size());
        return backend_case_values(out, bytes.data());
    }
};
