// test_cpy_get_rows.cpp - CPU dup/cont/cpy (all f32/f16/q8_0 pairs, non-contiguous views on
// either side, different shapes with equal element counts), get_rows, and set_rows into quantized
// KV caches, against element-wise references built from the reference converters.
#include "cpu/ops.h"
#include "ggml-impl.h"
#include "tensor_test_util.h"
#include "test_util.h"

#include <barrier>
#include <cmath>
#include <cstring>
#include "doctest_cstr.h"
#include <iterator>
#include <random>
#include <thread>
#include <vector>

namespace {

// element k (linear, ne order) of t
double rd_linear(const ggml_tensor * t, int64_t k) {
    const int64_t i0 = k % t->ne[0], i1 = (k / t->ne[0]) % t->ne[1], i2 = (k / (t->ne[0] * t->ne[1])) % t->ne[2];
    const int64_t i3 = k / (t->ne[0] * t->ne[1] * t->ne[2]);
    return rd(t, i0, i1, i2, i3);
}


// 8 MiB is several times the largest case (a few 4096-wide rows); under ASan a context is poisoned whole on
// allocation and free
ggml_context * new_ctx() { return ggml_init({size_t(8) << 20, nullptr, false}); }

// Run one node's kernel on nth threads directly (no graph, no op-support table).
void run_node(ggml_tensor * node, int nth) {
    std::vector<char> work(ggml_cpu_op_work_size(node, nth) + 1);
    std::barrier sync(nth);
    std::vector<std::thread> threads;
    for (int ith = 0; ith < nth; ++ith) {
        threads.emplace_back([&, ith] {
            ggml_cpu_params p{ith, nth, work.data(), work.size(), [&sync] { sync.arrive_and_wait(); }};
            ggml_cpu_compute_node(p, node);
        });
    }
    for (auto & t : threads)
        t.join();
}

// Through the graph API when the CPU backend's op table accepts the node; otherwise (a type pair
// the table does not list yet) the kernel is run directly so that it is still tested.
void compute(ggml_context * ctx, ggml_tensor * out, int nth) {
    if (!ggml_cpu_supports_op(out)) {
        MESSAGE("ggml_cpu_supports_op rejects " << ggml_op_name(out->op) << " " << ggml_type_name(out->src[0]->type)
                                                << " -> " << ggml_type_name(out->type)
                                                << ": running the kernel directly");
        run_node(out, nth);
        return;
    }
    ggml_cgraph * gf = ggml_new_graph(ctx);
    ggml_build_forward_expand(gf, out);
    ggml_graph_compute_with_ctx(ctx, gf, nth);
}

// dst (of any type/strides) holds src's elements in linear order, converted with the reference
// converters: f32 exact, f16 = fp32_to_fp16(v), quantized rows = the type's from_float_ref(row of v).
int check_copy(const ggml_tensor * src, const ggml_tensor * dst) {
    const int64_t n = ggml_nelements(src), ne0 = dst->ne[0];
    int bad = 0;
    std::vector<float> row(ne0);
    std::vector<char> q(ggml_is_quantized(dst->type) ? ggml_row_size(dst->type, ne0) : 0);
    for (int64_t r = 0; r < n / ne0; ++r) {
        for (int64_t i = 0; i < ne0; ++i)
            row[i] = (float)rd_linear(src, r * ne0 + i);
        if (ggml_is_quantized(dst->type)) {
            ggml_get_type_traits(dst->type)->from_float_ref(row.data(), q.data(), ne0);
            const int64_t i1 = r % dst->ne[1], i2 = (r / dst->ne[1]) % dst->ne[2], i3 = r / (dst->ne[1] * dst->ne[2]);
            bad += std::memcmp(ggml_ptr(dst, i1, i2, i3), q.data(), q.size()) != 0;
            continue;
        }
        for (int64_t i = 0; i < ne0; ++i) {
            const double want = dst->type == GGML_TYPE_F16 ? ggml_fp16_to_fp32(ggml_fp32_to_fp16(row[i])) : row[i];
            bad += rd_linear(dst, r * ne0 + i) != want;
        }
    }
    return bad;
}

const ggml_type k_types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_Q8_0};
// every quantized weight type (test_quant_vectors checks their converters against llama.cpp's data)
const ggml_type k_quant_types[] = {GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                   GGML_TYPE_Q8_0, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K,
                                   GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};
// a row length of an odd number of blocks
int64_t odd_row(ggml_type t) { return ggml_blck_size(t) * 3; }

} // namespace

TEST_CASE("cpy: all type pairs, permuted source, contiguous destination") {
    std::mt19937 rng(1);
    for (ggml_type ts : k_types) {
        for (ggml_type td : k_types) {
            for (int nth = 1; nth <= 3; ++nth) {
                ggml_context * ctx = new_ctx();
                ggml_tensor * s0 = ggml_new_tensor_4d(ctx, ts, 64, 3, 5, 2);
                fill(s0, rng, 2.0f);
                ggml_tensor * s = ggml_permute(ctx, s0, 0, 2, 1, 3); // [64, 5, 3, 2], rows dense
                ggml_tensor * d = ggml_new_tensor_4d(ctx, td, 64, 5, 3, 2);
                std::memset(d->data, 0xff, ggml_nbytes(d));
                compute(ctx, ggml_cpy(ctx, s, d), nth);
                INFO("ts = " << ggml_type_name(ts));
                INFO("td = " << ggml_type_name(td));
                CAPTURE(nth);
                CHECK(check_copy(s, d) == 0);
                ggml_free(ctx);
            }
        }
    }
}

TEST_CASE("cpy: contiguous and same-shape fast paths, all type pairs") {
    std::mt19937 rng(2);
    for (ggml_type ts : k_types) {
        for (ggml_type td : k_types) {
            ggml_context * ctx = new_ctx();
            ggml_tensor * s = ggml_new_tensor_3d(ctx, ts, 96, 7, 3);
            fill(s, rng, 2.0f);
            ggml_tensor * d = ggml_new_tensor_3d(ctx, td, 96, 7, 3);
            std::memset(d->data, 0xff, ggml_nbytes(d));
            compute(ctx, ggml_cpy(ctx, s, d), 2);
            INFO("ts = " << ggml_type_name(ts));
            INFO("td = " << ggml_type_name(td));
            CHECK(check_copy(s, d) == 0);
            // different shape, same element count: [96, 7, 3] -> [288, 7]
            ggml_tensor * d2 = ggml_new_tensor_2d(ctx, td, 288, 7);
            std::memset(d2->data, 0xff, ggml_nbytes(d2));
            compute(ctx, ggml_cpy(ctx, s, d2), 3);
            CHECK(check_copy(s, d2) == 0);
            ggml_free(ctx);
        }
    }
}

TEST_CASE("cpy: transposed source into a strided V-cache view (f32/f16 destinations)") {
    std::mt19937 rng(3);
    for (ggml_type ts : {GGML_TYPE_F32, GGML_TYPE_F16}) {
        for (ggml_type td : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (int nth = 1; nth <= 3; ++nth) {
                const int64_t n_embd = 48, n_tokens = 5, n_ctx = 16, n_past = 3;
                ggml_context * ctx = new_ctx();
                ggml_tensor * vcur = ggml_new_tensor_2d(ctx, ts, n_embd, n_tokens);
                fill(vcur, rng, 2.0f);
                ggml_tensor * cache = ggml_new_tensor_2d(ctx, td, n_ctx, n_embd); // V stored transposed
                std::memset(cache->data, 0, ggml_nbytes(cache));
                ggml_tensor * dst = ggml_view_2d(ctx, cache, n_tokens, n_embd, cache->nb[1], n_past * cache->nb[0]);
                ggml_tensor * src = ggml_transpose(ctx, vcur); // [n_tokens, n_embd]
                compute(ctx, ggml_cpy(ctx, src, dst), nth);
                INFO("ts = " << ggml_type_name(ts));
                INFO("td = " << ggml_type_name(td));
                CAPTURE(nth);
                CHECK(check_copy(src, dst) == 0);
                // nothing outside the view was written
                int outside = 0;
                for (int64_t e = 0; e < n_embd; ++e)
                    for (int64_t c = 0; c < n_ctx; ++c)
                        if (c < n_past || c >= n_past + n_tokens) outside += rd(cache, c, e, 0, 0) != 0.0;
                CHECK(outside == 0);
                ggml_free(ctx);
            }
        }
    }
}

TEST_CASE("dup / cont of non-contiguous views") {
    std::mt19937 rng(4);
    for (ggml_type t : k_types) {
        for (int nth = 1; nth <= 3; ++nth) {
            ggml_context * ctx = new_ctx();
            ggml_tensor * a = ggml_new_tensor_3d(ctx, t, 64, 6, 4);
            fill(a, rng, 2.0f);
            ggml_tensor * p = ggml_permute(ctx, a, 0, 2, 1, 3);                             // [64, 4, 6]
            ggml_tensor * v = ggml_view_2d(ctx, a, 32, 10, a->nb[1], ggml_row_size(t, 32)); // right half of rows
            ggml_tensor * c1 = ggml_cont(ctx, p);
            ggml_tensor * c2 = ggml_dup(ctx, v);
            compute(ctx, c1, nth);
            compute(ctx, c2, nth);
            INFO("t = " << ggml_type_name(t));
            CAPTURE(nth);
            CHECK(ggml_is_contiguous(c1));
            CHECK(check_copy(p, c1) == 0);
            CHECK(check_copy(v, c2) == 0);
            if (t != GGML_TYPE_Q8_0) { // element transposes need single-element types
                ggml_tensor * tr = ggml_transpose(ctx, ggml_reshape_2d(ctx, a, 64, 24)); // [24, 64]
                ggml_tensor * c3 = ggml_cont(ctx, tr);
                compute(ctx, c3, nth);
                CHECK(check_copy(tr, c3) == 0);
            }
            ggml_free(ctx);
        }
    }
}

TEST_CASE("get_rows: f32 / f16 / every quantized type, batched indices, 1-3 threads") {
    std::mt19937 rng(5);
    std::vector<ggml_type> types(std::begin(k_types), std::end(k_types));
    for (ggml_type t : k_quant_types)
        if (t != GGML_TYPE_Q8_0) types.push_back(t);
    for (ggml_type t : types) {
        for (int nth = 1; nth <= 3; ++nth) {
            // an odd number of blocks per row (K-quants: three 256-blocks)
            const int64_t n_embd = ggml_blck_size(t) == QK_K ? odd_row(t) : 96, n_rows = 11, B1 = 3;
            ggml_context * ctx = new_ctx();
            ggml_tensor * a = ggml_new_tensor_3d(ctx, t, n_embd, n_rows, B1);
            fill(a, rng, 2.0f);
            ggml_tensor * idx = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, 7, B1);
            for (int64_t i = 0; i < 7 * B1; ++i)
                ((int32_t *)idx->data)[i] = (int32_t)(rng() % n_rows);
            ((int32_t *)idx->data)[0] = 0;
            ((int32_t *)idx->data)[1] = (int32_t)n_rows - 1;
            ggml_tensor * out = ggml_get_rows(ctx, a, idx); // [n_embd, 7, B1]
            REQUIRE(out->type == GGML_TYPE_F32);
            std::memset(out->data, 0xff, ggml_nbytes(out));
            compute(ctx, out, nth);
            INFO("t = " << ggml_type_name(t));
            CAPTURE(nth);
            int bad = 0;
            for (int64_t j = 0; j < B1; ++j)
                for (int64_t i = 0; i < 7; ++i) {
                    const int32_t r = ((int32_t *)idx->data)[j * 7 + i];
                    for (int64_t k = 0; k < n_embd; ++k)
                        bad += rd(out, k, i, j, 0) != rd(a, k, r, j, 0);
                }
            CHECK(bad == 0);
            ggml_free(ctx);
        }
    }
}

TEST_CASE("get_rows: token embedding lookup with a strided index view") {
    std::mt19937 rng(6);
    ggml_context * ctx = new_ctx();
    ggml_tensor * emb = ggml_new_tensor_2d(ctx, GGML_TYPE_Q8_0, 64, 50);
    fill(emb, rng, 2.0f);
    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, 12);
    for (int i = 0; i < 12; ++i)
        ((int32_t *)ids->data)[i] = (i * 17) % 50;
    ggml_tensor * every_other = ggml_view_1d(ctx, ids, 6, 0);
    every_other->nb[0] = 8; // ids[0], ids[2], ...
    ggml_tensor * out = ggml_get_rows(ctx, emb, every_other);
    compute(ctx, out, 2);
    int bad = 0;
    for (int i = 0; i < 6; ++i)
        for (int k = 0; k < 64; ++k)
            bad += rd(out, k, i, 0, 0) != rd(emb, k, (2 * i * 17) % 50, 0, 0);
    CHECK(bad == 0);
    ggml_free(ctx);
}

TEST_CASE("cpy: every quantized type to and from f32 / f16, permuted source, 1-3 threads") {
    std::mt19937 rng(8);
    for (ggml_type t : k_quant_types) {
        for (ggml_type f : {GGML_TYPE_F32, GGML_TYPE_F16}) {
            for (int nth = 1; nth <= 3; ++nth) {
                const int64_t ne0 = odd_row(t), ne1 = 5, ne2 = 3;
                INFO(ggml_type_name(t) << " <-> " << ggml_type_name(f));
                CAPTURE(nth);
                ggml_context * ctx = new_ctx();
                // float -> quant from a permuted source: [ne0, ne2, ne1] viewed as [ne0, ne1, ne2]
                ggml_tensor * src = ggml_new_tensor_3d(ctx, f, ne0, ne2, ne1);
                fill(src, rng);
                ggml_tensor * perm = ggml_permute(ctx, src, 0, 2, 1, 3);
                ggml_tensor * q = ggml_new_tensor_3d(ctx, t, ne0, ne1, ne2);
                ggml_tensor * c1 = ggml_cpy(ctx, perm, q);
                poison(q);
                compute(ctx, c1, nth);
                CHECK(check_copy(perm, q) == 0);
                // quant -> float (dequantize), contiguous and into a transposed destination view
                ggml_tensor * back = ggml_new_tensor_3d(ctx, f, ne0, ne1, ne2);
                ggml_tensor * c2 = ggml_cpy(ctx, q, back);
                poison(back);
                compute(ctx, c2, nth);
                CHECK(check_copy(q, back) == 0);
                ggml_tensor * dt = ggml_new_tensor_2d(ctx, f, ne1 * ne2, ne0);
                ggml_tensor * dtv = ggml_transpose(ctx, dt); // [ne0, ne1*ne2], element stride ne1*ne2
                ggml_tensor * q2 = ggml_reshape_2d(ctx, q, ne0, ne1 * ne2);
                ggml_tensor * c3 = ggml_cpy(ctx, q2, dtv);
                poison(dt);
                compute(ctx, c3, nth);
                CHECK(check_copy(q2, dtv) == 0);
                // a quantized source reshaped to another row length goes through the element path
                ggml_tensor * flat = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0 * ne1 / 2, 2 * ne2);
                ggml_tensor * c4 = ggml_cpy(ctx, q, flat);
                poison(flat);
                compute(ctx, c4, nth);
                CHECK(check_copy(q, flat) == 0);
                ggml_free(ctx);
            }
        }
    }
}

TEST_CASE("set_rows into q8_0 / q4_0 caches: written rows are the reference quantizer's bytes, others untouched") {
    std::mt19937 rng(9);
    for (ggml_type t : {GGML_TYPE_Q8_0, GGML_TYPE_Q4_0}) {
        for (int64_t ne0 : {int64_t(32), int64_t(4096)}) {
            for (bool strided : {false, true}) {
                for (int nth = 1; nth <= 3; ++nth) {
                    INFO(ggml_type_name(t) << " ne0 " << ne0 << (strided ? " transposed source" : ""));
                    CAPTURE(nth);
                    ggml_context * ctx = new_ctx();
                    const int64_t n_rows = 9, n = 3, ne2 = 2;
                    ggml_tensor * cache = ggml_new_tensor_3d(ctx, t, ne0, n_rows, ne2);  // [ne0, n_rows, ne2]
                    fill(cache, rng);
                    const std::vector<char> before((const char *) cache->data,
                                                   (const char *) cache->data + ggml_nbytes(cache));
                    ggml_tensor * src;  // f32 [ne0, n, ne2], plain or a transposed view
                    if (strided) {
                        ggml_tensor * s = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, n, ne0, ne2);
                        fill(s, rng);
                        src = ggml_transpose(ctx, s);
                    } else {
                        src = ggml_new_tensor_3d(ctx, GGML_TYPE_F32, ne0, n, ne2);
                        fill(src, rng);
                    }
                    ggml_tensor * ids = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n);
                    const int32_t cells[n] = {7, 0, 4};
                    std::memcpy(ids->data, cells, sizeof(cells));
                    ggml_tensor * out = ggml_set_rows(ctx, cache, src, ids);
                    REQUIRE(ggml_cpu_supports_op(out));
                    compute(ctx, out, nth);
                    std::vector<char> want = before;
                    std::vector<float> row(ne0);
                    for (int64_t i2 = 0; i2 < ne2; ++i2) {
                        for (int64_t i = 0; i < n; ++i) {
                            for (int64_t i0 = 0; i0 < ne0; ++i0)
                                row[i0] = (float) rd(src, i0, i, i2, 0);
                            char * dst = want.data() + (size_t) cells[i] * cache->nb[1] + i2 * cache->nb[2];
                            if (t == GGML_TYPE_Q8_0)
                                quantize_row_q8_0_ref(row.data(), (block_q8_0 *) dst, ne0);
                            else
                                quantize_row_q4_0_ref(row.data(), (block_q4_0 *) dst, ne0);
                        }
                    }
                    CHECK(std::memcmp(cache->data, want.data(), want.size()) == 0);
                    ggml_free(ctx);
                }
            }
        }
    }
}
